//! `specbound spectra`: certified spectra of every weight matrix of any
//! checkpoint, known family or not (WeightWatcher's reach, with
//! certificates). One row per matrix, keyed by the full parameter name:
//! shape, dtype, the spectral, Frobenius, nuclear, (2,1) and (1,1) norms,
//! stable rank, rank, Schatten quantities, and WeightWatcher's exact
//! quantities that are Schatten quantities (`log_norm`,
//! `log_spectral_norm`, `stable_rank`). Nothing here depends on the model's
//! family: no proxy matrix is formed and no bound is computed.
//!
//! Higher-rank tensors are cut as WeightWatcher cuts convolution kernels
//! (its `conv2D_Wmats`): a 4-D kernel `[out, in, kh, kw]` (PyTorch order)
//! gives the `kh * kw` matrices `W[:, :, i, j]`, each `out x in`, and a 3-D
//! kernel `[out, in, k]` the `k` matrices `W[:, :, i]`; each row says its
//! slice. Tensors of rank 5 or more, 1-D tensors and non-float tensors are
//! listed as skipped, with the reason.

use std::path::PathBuf;

use serde::Serialize;

use super::{CmdError, Exit, ModelRef, Report, Style, Ui};
use crate::enclosure::{Enclosure, IntEnclosure, OpenEnclosure};
use crate::io::checkpoint::Checkpoint;
use crate::io::output::Outputs;
use crate::io::ReadError;
use crate::linalg::{ExactBounds, Precision, SvdOptions};
use crate::matrix::DenseMatrix;
use crate::report::csv::num;
use crate::report::fmt::interval;
use crate::spectral::{certify_and_summarize, enclose_schatten, wide, SchattenP};

/// The name of the table `--csv DIR` writes.
pub(crate) const CSV_NAME: &str = "spectra.csv";

/// The name of the table of singular values `--csv DIR
/// --singular-values` writes beside [`CSV_NAME`] (the study's table's name).
pub(crate) const SV_CSV_NAME: &str = "singular_values.csv";

/// Header of [`SV_CSV_NAME`]: the tensor (and slice) as in `spectra.csv`,
/// then the study's `singular_values.csv` columns (`rank_index` from 1,
/// largest first; `sigma` the midpoint, `sigma_lo`/`sigma_hi` certified).
pub(crate) const SV_CSV_HEADER: &str = "tensor,slice,rows,cols,rank_index,sigma,sigma_lo,sigma_hi";

/// What to certify.
#[derive(Clone, Debug)]
pub struct SpectraRequest {
    /// The checkpoint (directory, file or Hub id).
    pub model: ModelRef,
    /// Only tensors whose full name matches this regular expression.
    pub include: Option<String>,
    /// No tensor whose full name matches this regular expression.
    pub exclude: Option<String>,
    /// Skip matrices with more entries than this (bounds memory and time).
    pub max_elements: Option<u64>,
    /// Schatten exponents (exact decimals; 0 = rank).
    pub schatten_p: Vec<SchattenP>,
    /// The method for the singular values.
    pub precision: Precision,
    /// The target relative radius of `auto`.
    pub rtol: f64,
    /// A directory for `spectra.csv` (written atomically).
    pub csv: Option<PathBuf>,
    /// Keep every certified singular value of each matrix: in the rows
    /// ([`SpectraValues::singular_values`], so in the JSON), and with
    /// [`SpectraRequest::csv`] in `SV_CSV_NAME` too.
    pub singular_values: bool,
}

/// One Schatten exponent's enclosures, the exponent as the decimal string
/// given (the view `svd` writes too, [`crate::report::SchattenView`]).
pub(crate) type SchattenRow = crate::report::SchattenView<String>;

/// The certified values of one matrix.
#[derive(Clone, Debug, Serialize)]
pub struct SpectraValues {
    /// Encloses `sigma_max`.
    pub spectral_norm: Enclosure,
    /// Encloses the smallest of the `min(rows, cols)` singular values.
    pub sv_min: Enclosure,
    /// Encloses `||W||_F`.
    pub frobenius_norm: Enclosure,
    /// Encloses `sum sigma_i`.
    pub nuclear_norm: Enclosure,
    /// Encloses the sum of the column 2-norms.
    pub norm_21: Enclosure,
    /// Encloses `sum |w_ij|`.
    pub norm_11: Enclosure,
    /// Encloses `||W||_F^2 / sigma_max^2` (WeightWatcher's `stable_rank`).
    pub stable_rank: Option<Enclosure>,
    /// Encloses the rank (WeightWatcher's `matrix_rank`).
    pub rank: IntEnclosure,
    /// Encloses `||W||_F^2` (WeightWatcher's `norm`); `[lo, +inf)`, written
    /// with `"hi": null`, where it overflowed binary64.
    pub norm: Option<OpenEnclosure>,
    /// Encloses `log10 ||W||_F^2` (WeightWatcher's `log_norm`).
    pub log_norm: Option<Enclosure>,
    /// Encloses `sigma_max^2` (WeightWatcher's `spectral_norm`,
    /// `lambda_max`); `[lo, +inf)` where it overflowed binary64.
    pub lambda_max: Option<OpenEnclosure>,
    /// Encloses `log10 sigma_max^2` (WeightWatcher's `log_spectral_norm`).
    pub log_spectral_norm: Option<Enclosure>,
    /// Decimal ends of `norm` where it overflowed binary64 (`||W||_F` above
    /// about 1.3e154).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub norm_exact: Option<ExactBounds>,
    /// Decimal ends of `lambda_max` where it overflowed binary64.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lambda_max_exact: Option<ExactBounds>,
    /// One per requested exponent.
    pub schatten: Vec<SchattenRow>,
    /// Every singular value, largest first, the `min(rows, cols)` of them
    /// (exact zeros included); only with `--singular-values`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub singular_values: Option<Vec<Enclosure>>,
}

/// One matrix of the checkpoint.
#[derive(Clone, Debug, Serialize)]
pub struct SpectraRow {
    /// The full parameter name.
    pub tensor: String,
    /// The slice of a higher-rank tensor (`[:, :, 0, 1]`); absent for 2-D.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slice: Option<String>,
    /// The stored shape.
    pub shape: Vec<usize>,
    /// Rows of the matrix certified.
    pub rows: usize,
    /// Columns of the matrix certified.
    pub cols: usize,
    /// Stored element type.
    pub dtype: String,
    /// `certified` or `inconclusive`.
    pub status: &'static str,
    /// Why it is inconclusive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The certified values (absent when inconclusive).
    #[serde(flatten)]
    pub values: Option<SpectraValues>,
}

/// A tensor not certified, and why.
#[derive(Clone, Debug, Serialize)]
pub struct SkippedTensor {
    /// The full parameter name.
    pub tensor: String,
    /// The stored shape.
    pub shape: Vec<usize>,
    /// Stored element type.
    pub dtype: String,
    /// Why (1-D, not a float type, rank 5 or more, above --max-elements).
    pub why: String,
}

/// The report of `spectra`.
#[derive(Debug)]
pub struct SpectraReport {
    /// The model as the user named it.
    pub shown: String,
    /// One row per matrix, in natural name order (slices in index order).
    pub rows: Vec<SpectraRow>,
    /// Tensors the filters kept but that were not certified.
    pub skipped: Vec<SkippedTensor>,
    /// Tensors `--include`/`--exclude` left out.
    pub filtered_out: usize,
    /// Schatten exponents, as given.
    pub schatten_p: Vec<String>,
    /// The method.
    pub precision: String,
}

/// How higher-rank tensors are cut (said in the text and JSON output).
pub(crate) const RESHAPE_NOTE: &str = "tensors of rank 3 and 4 are cut as WeightWatcher cuts \
convolution kernels: [out, in, kh, kw] into the kh*kw matrices W[:, :, i, j] and [out, in, k] \
into the k matrices W[:, :, i], each out x in";

fn regex(flag: &str, pattern: &Option<String>) -> Result<Option<regex::Regex>, CmdError> {
    pattern
        .as_deref()
        .map(|p| {
            regex::RegexBuilder::new(p)
                .size_limit(1 << 20)
                .build()
                .map_err(|e| {
                    let first = e.to_string();
                    let first = first.lines().last().unwrap_or("invalid").trim().to_string();
                    CmdError::usage(format!(
                        "{flag}: not a regular expression: {}",
                        crate::arch::clean_to(&first, 200)
                    ))
                })
        })
        .transpose()
}

/// The slices of a tensor of `shape`: for each, its label, and the
/// matrix taken from the flattened `[shape[0], rest]` tensor `flat`.
fn slices(shape: &[usize], flat: DenseMatrix) -> Vec<(Option<String>, DenseMatrix)> {
    match shape.len() {
        // A matrix is certified as read (not copied).
        2 => vec![(None, flat)],
        3 | 4 => {
            let (o, i) = (shape[0], shape[1]);
            let spatial: Vec<usize> = shape[2..].to_vec();
            let rf: usize = spatial.iter().product();
            (0..rf)
                .map(|s| {
                    let label = if spatial.len() == 1 {
                        format!("[:, :, {s}]")
                    } else {
                        format!("[:, :, {}, {}]", s / spatial[1], s % spatial[1])
                    };
                    // Element (r, c, s) of the stored tensor sits at flat
                    // column c * rf + s of row r: moved, not computed.
                    let mut data = Vec::with_capacity(o * i);
                    for r in 0..o {
                        let row = &flat.data[r * flat.cols..(r + 1) * flat.cols];
                        data.extend((0..i).map(|c| row[c * rf + s]));
                    }
                    (
                        Some(label),
                        DenseMatrix {
                            rows: o,
                            cols: i,
                            data,
                        },
                    )
                })
                .collect()
        }
        _ => Vec::new(),
    }
}

/// Certifies one matrix, dropping it as soon as its prepared copy and its
/// entry norms are formed ([`certify_and_summarize`]).
///
/// *Guarantee: certified enclosure* of every value: singular values by
/// `certify_singular_values`, norms, stable rank, rank and Schatten
/// quantities by `summarize` (both through [`certify_and_summarize`]) and
/// [`enclose_schatten`]
/// ([`proofs/derived-quantities.md`](crate::proofs::derived_quantities) L15); the squares and base-10
/// logarithms of WeightWatcher's quantities are inari interval operations
/// on those enclosures ([`proofs/assumptions.md`](crate::proofs::assumptions) A0.9 (c): containment of
/// monotone functions evaluated with outward rounding).
/// With `keep_sv`, every singular value's enclosure is kept too (those of
/// `certify_singular_values`, through [`certify_and_summarize`]).
fn certify_one(
    a: DenseMatrix,
    opts: &SvdOptions,
    ps: &[SchattenP],
    keep_sv: bool,
) -> Result<SpectraValues, String> {
    let (sv, s) = certify_and_summarize(a, opts).map_err(|e| e.reason)?;
    let sv_min = sv
        .values
        .last()
        .map(|v| v.enclosure)
        .ok_or("no singular values")?;
    let fro2 = s.frobenius_norm.to_interval().sqr();
    let sp2 = s.spectral_norm.to_interval().sqr();
    // log10(x^2) = 2 log10(x) (exact doubling), finite where x^2 overflows;
    // log10 of an interval whose lower end is 0 is unbounded below.
    let log10_sq = |e: &Enclosure| {
        let x = e.to_interval();
        if x.inf() > 0.0 {
            let two = inari::Interval::try_from((2.0, 2.0)).expect("finite");
            Enclosure::from_interval(two * x.log10())
        } else {
            None
        }
    };
    let norm = Enclosure::from_interval(fro2);
    let lambda_max = Enclosure::from_interval(sp2);
    // Beyond binary64, the lower end of the same square stands.
    let open = |e: Option<Enclosure>, x: inari::Interval| {
        e.map(OpenEnclosure::from)
            .or_else(|| OpenEnclosure::from_interval(x))
    };
    Ok(SpectraValues {
        spectral_norm: s.spectral_norm,
        sv_min,
        frobenius_norm: s.frobenius_norm,
        nuclear_norm: s.nuclear_norm,
        norm_21: s.norm_21,
        norm_11: s.norm_11,
        stable_rank: s.stable_rank,
        rank: s.rank,
        norm_exact: norm
            .is_none()
            .then(|| wide::square_exact(&s.frobenius_norm))
            .flatten(),
        lambda_max_exact: lambda_max
            .is_none()
            .then(|| wide::square_exact(&s.spectral_norm))
            .flatten(),
        norm: open(norm, fro2),
        log_norm: log10_sq(&s.frobenius_norm),
        lambda_max: open(lambda_max, sp2),
        log_spectral_norm: log10_sq(&s.spectral_norm),
        schatten: ps
            .iter()
            .map(|p| {
                let e = enclose_schatten(&sv, p);
                SchattenRow::of(&e, e.p.clone())
            })
            .collect(),
        singular_values: keep_sv.then(|| sv.values.iter().map(|v| v.enclosure).collect()),
    })
}

/// Whether a read error says the tensor is not a float matrix this tool
/// reads (skipped), rather than that the file is bad (an error).
fn skippable(e: &ReadError) -> Option<String> {
    match e {
        ReadError::UnsupportedDtype { .. } => Some("not a float type this tool reads".into()),
        ReadError::NotTwoD { .. } => {
            Some("a tensor of rank 3 or 4 is read only from safetensors files".into())
        }
        ReadError::Empty { .. } => Some("empty (a zero dimension)".into()),
        _ => None,
    }
}

/// Runs `spectra`.
///
/// *Guarantee: certified enclosure* of every value reported (see
/// `certify_one`, which names its lemmas); a matrix that cannot be
/// certified is reported inconclusive, with the reason.
///
/// ```
/// use specbound::cmd::spectra::{run, SpectraRequest};
/// use specbound::cmd::{defaults, ModelRef, Silent};
/// use specbound::spectral::SchattenP;
///
/// // One tensor of the bundled MiniLM.
/// let req = SpectraRequest {
///     model: ModelRef::Bundled,
///     include: Some("encoder.layer.0.attention.self.query.weight".into()),
///     exclude: None,
///     max_elements: None,
///     schatten_p: vec![SchattenP::parse("2").unwrap()],
///     precision: defaults::PRECISION.parse().unwrap(),
///     rtol: defaults::RTOL,
///     csv: None,
///     singular_values: false,
/// };
/// let report = run(&req, &Silent).unwrap();
/// assert_eq!(report.rows.len(), 1);
/// ```
pub fn run(req: &SpectraRequest, ui: &dyn Ui) -> Result<SpectraReport, CmdError> {
    if !(req.rtol > 0.0 && req.rtol.is_finite()) {
        return Err(CmdError::usage(format!(
            "--rtol must be a positive number, got {}",
            req.rtol
        )));
    }
    let include = regex("--include", &req.include)?;
    let exclude = regex("--exclude", &req.exclude)?;
    if req.csv.is_some() {
        csv_outputs(req, None).check()?;
    }
    let resolved = req.model.resolve()?;
    let ck = Checkpoint::open(&resolved.path)?;
    let mut chosen = choose(req, &ck, include.as_ref(), exclude.as_ref());
    let rows = certify_tensors(req, &ck, &mut chosen, ui)?;
    if rows.is_empty() {
        return Err(CmdError::usage(format!(
            "{}: no matrix to certify ({} tensors left out by --include/--exclude, {} skipped)",
            resolved.shown,
            chosen.filtered_out,
            chosen.skipped.len()
        )));
    }
    let report = SpectraReport {
        shown: resolved.shown,
        rows,
        skipped: chosen.skipped,
        filtered_out: chosen.filtered_out,
        schatten_p: req.schatten_p.iter().map(|p| p.text.clone()).collect(),
        precision: req.precision.to_string(),
    };
    if req.csv.is_some() {
        csv_outputs(req, Some(&report)).commit()?;
    }
    Ok(report)
}

/// The CSV files `--csv` writes (the spectra table, and the singular
/// values with `--singular-values`), all or none: empty to check the
/// target before anything is computed (`report` `None`), else the
/// report's tables.
fn csv_outputs(req: &SpectraRequest, report: Option<&SpectraReport>) -> Outputs {
    let mut out = Outputs::new();
    if let Some(dir) = &req.csv {
        out.create_dir(dir);
        out.stage(
            dir.join(CSV_NAME),
            report.map(|r| r.csv()).unwrap_or_default(),
        );
        if req.singular_values {
            out.stage(
                dir.join(SV_CSV_NAME),
                report.map(|r| r.singular_values_csv()).unwrap_or_default(),
            );
        }
    }
    out
}

/// The tensors `spectra` certifies (name, shape, dtype, in natural name
/// order), and those it leaves out: by `--include`/`--exclude` (counted)
/// or skipped with the reason.
struct Chosen {
    todo: Vec<(String, Vec<usize>, String)>,
    skipped: Vec<SkippedTensor>,
    filtered_out: usize,
}

/// Chooses the checkpoint's tensors to certify (see [`Chosen`]).
fn choose(
    req: &SpectraRequest,
    ck: &Checkpoint,
    include: Option<&regex::Regex>,
    exclude: Option<&regex::Regex>,
) -> Chosen {
    let mut names: Vec<&str> = ck.names().collect();
    names.sort_by(|a, b| crate::io::safetensors::natural_cmp(a, b));
    let mut chosen = Chosen {
        todo: Vec::new(),
        skipped: Vec::new(),
        filtered_out: 0,
    };
    for name in names {
        if include.is_some_and(|r| !r.is_match(name)) || exclude.is_some_and(|r| r.is_match(name)) {
            chosen.filtered_out += 1;
            continue;
        }
        let (shape, dtype) = ck.info(name).unwrap_or_default();
        match why_skipped(&shape, req.max_elements) {
            Some(why) => chosen.skipped.push(SkippedTensor {
                tensor: name.to_string(),
                shape,
                dtype,
                why,
            }),
            None => chosen.todo.push((name.to_string(), shape, dtype)),
        }
    }
    chosen
}

/// Why a tensor of `shape` is skipped before it is read, if it is: not a
/// matrix or a 3-D/4-D kernel, or above `--max-elements`.
fn why_skipped(shape: &[usize], max_elements: Option<u64>) -> Option<String> {
    if shape.len() < 2 {
        return Some(format!("{}-D", shape.len()));
    }
    if shape.len() > 4 {
        return Some(format!(
            "rank {}: only matrices and 3-D/4-D convolution kernels are cut into matrices",
            shape.len()
        ));
    }
    let elements = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d as u64));
    match (max_elements, elements) {
        (Some(max), e) if e.is_none_or(|e| e > max) => Some(format!(
            "{} elements, above --max-elements {max}",
            e.map_or_else(|| "more than 2^64".to_string(), |e| e.to_string())
        )),
        _ => None,
    }
}

/// Certifies every chosen tensor, slice by slice, in order: one row per
/// matrix; a tensor that turns out not to be a float matrix this tool
/// reads is moved to the skipped ones.
fn certify_tensors(
    req: &SpectraRequest,
    ck: &Checkpoint,
    chosen: &mut Chosen,
    ui: &dyn Ui,
) -> Result<Vec<SpectraRow>, CmdError> {
    let opts = SvdOptions {
        precision: req.precision,
        rtol: req.rtol,
        ..SvdOptions::default()
    };
    let progress = ui.matrices("spectra");
    let total: usize = (chosen.todo.iter())
        .map(|(_, s, _)| s[2..].iter().product::<usize>())
        .sum();
    progress.matrices_total(total);
    let mut rows = Vec::new();
    for (name, shape, dtype) in std::mem::take(&mut chosen.todo) {
        if progress.cancelled() {
            return Err(CmdError::usage("cancelled"));
        }
        let loaded = match ck.read_flattened(&name) {
            Ok(m) => m,
            Err(e) => match skippable(&e) {
                Some(why) => {
                    chosen.skipped.push(SkippedTensor {
                        tensor: name,
                        shape,
                        dtype,
                        why,
                    });
                    continue;
                }
                None => return Err(e.into()),
            },
        };
        let dtype_shown = loaded.dtype.to_string().to_lowercase();
        for (slice, m) in slices(&shape, loaded.matrix) {
            progress.message(&crate::arch::clean_to(&name, 80));
            let (m_rows, m_cols) = (m.rows, m.cols);
            let outcome = certify_one(m, &opts, &req.schatten_p, req.singular_values);
            rows.push(SpectraRow {
                tensor: name.clone(),
                slice,
                shape: shape.clone(),
                rows: m_rows,
                cols: m_cols,
                dtype: dtype_shown.clone(),
                status: if outcome.is_ok() {
                    "certified"
                } else {
                    "inconclusive"
                },
                reason: outcome.as_ref().err().cloned(),
                values: outcome.ok(),
            });
            // The bar counts matrices; its id names none of a proxy here.
            progress.matrix_done(crate::arch::MatrixId::layer(
                rows.len(),
                crate::arch::MatrixType::MIn,
            ));
        }
    }
    Ok(rows)
}

/// A CSV field: quoted when it holds a comma, quote or line break; control
/// characters escaped (nothing from the input written raw).
fn csv_field(s: &str) -> String {
    let s = crate::arch::clean_to(s, 4096);
    if s.contains([',', '"']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

fn lo_hi(e: Option<&Enclosure>) -> String {
    e.map_or_else(
        || ",".to_string(),
        |e| format!("{},{}", num(e.lo()), num(e.hi())),
    )
}

/// [`lo_hi`], or the decimal ends `x` where the binary64 enclosure is absent.
fn lo_hi_wide(e: Option<&Enclosure>, x: Option<&ExactBounds>) -> String {
    match (e, x) {
        (None, Some(x)) => format!("{},{}", x.lo, x.hi),
        _ => lo_hi(e),
    }
}

/// [`lo_hi_wide`] of an interval that may be open above: its decimal ends
/// where given, else `lo,` (an empty `_hi`: no finite upper end).
fn lo_open(e: Option<&OpenEnclosure>, x: Option<&ExactBounds>) -> String {
    match (e.map(|e| (e.bounded(), e.lo())), x) {
        (Some((Some(b), _)), _) => lo_hi(Some(&b)),
        (_, Some(_)) => lo_hi_wide(None, x),
        (Some((None, lo)), None) => format!("{},", num(lo)),
        (None, None) => lo_hi(None),
    }
}

impl SpectraReport {
    /// The rows as CSV: each certified quantity as `_lo,_hi` columns, the
    /// ends the shortest decimals that read back as the exact binary64 ends.
    pub fn csv(&self) -> String {
        let mut head = vec![
            "tensor", "slice", "rows", "cols", "dtype", "status", "reason",
        ]
        .into_iter()
        .map(str::to_string)
        .collect::<Vec<_>>();
        for q in crate::report::csv::SPECTRA_QUANTITIES {
            head.push(format!("{q}_lo"));
            head.push(format!("{q}_hi"));
        }
        for p in &self.schatten_p {
            for what in ["schatten_power", "schatten_norm"] {
                head.push(format!("{what}_{p}_lo"));
                head.push(format!("{what}_{p}_hi"));
            }
        }
        let mut s = head.join(",");
        s.push('\n');
        for r in &self.rows {
            let mut f = vec![
                csv_field(&r.tensor),
                csv_field(r.slice.as_deref().unwrap_or("")),
                r.rows.to_string(),
                r.cols.to_string(),
                r.dtype.clone(),
                r.status.to_string(),
                csv_field(r.reason.as_deref().unwrap_or("")),
            ];
            match &r.values {
                Some(v) => {
                    for e in [
                        Some(&v.spectral_norm),
                        Some(&v.sv_min),
                        Some(&v.frobenius_norm),
                        Some(&v.nuclear_norm),
                        Some(&v.norm_21),
                        Some(&v.norm_11),
                        v.stable_rank.as_ref(),
                    ] {
                        f.push(lo_hi(e));
                    }
                    f.push(format!("{},{}", v.rank.lo, v.rank.hi));
                    // Beyond binary64, the decimal ends (numbers such as
                    // 1.5e400, outward rounded) fill the _lo,_hi columns.
                    f.push(lo_open(v.norm.as_ref(), v.norm_exact.as_ref()));
                    f.push(lo_hi(v.log_norm.as_ref()));
                    f.push(lo_open(v.lambda_max.as_ref(), v.lambda_max_exact.as_ref()));
                    f.push(lo_hi(v.log_spectral_norm.as_ref()));
                    for sc in &v.schatten {
                        f.push(lo_open(sc.power.as_ref(), sc.power_exact.as_ref()));
                        f.push(lo_open(sc.norm.as_ref(), sc.norm_exact.as_ref()));
                    }
                }
                None => {
                    let n = 12 + 2 * self.schatten_p.len();
                    f.extend(std::iter::repeat_n(",".to_string(), n));
                }
            }
            s.push_str(&f.join(","));
            s.push('\n');
        }
        s
    }

    /// `SV_CSV_HEADER` and a row per singular value of every certified
    /// matrix kept with `--singular-values` (none of an inconclusive one).
    pub fn singular_values_csv(&self) -> String {
        let mut s = String::from(SV_CSV_HEADER);
        s.push('\n');
        for r in &self.rows {
            let Some(sv) = r.values.as_ref().and_then(|v| v.singular_values.as_ref()) else {
                continue;
            };
            let lead = format!(
                "{},{},{},{}",
                csv_field(&r.tensor),
                csv_field(r.slice.as_deref().unwrap_or("")),
                r.rows,
                r.cols
            );
            for (i, e) in sv.iter().enumerate() {
                s.push_str(&format!(
                    "{lead},{},{},{},{}\n",
                    i + 1,
                    num(e.mid()),
                    num(e.lo()),
                    num(e.hi())
                ));
            }
        }
        s
    }

    fn inconclusive(&self) -> usize {
        self.rows.iter().filter(|r| r.values.is_none()).count()
    }
}

/// The lines of `--singular-values` in the text output: every value,
/// largest first, numbered from 1.
fn singular_values_text(sv: &[Enclosure], style: Style) -> String {
    let mut s = format!("  singular values ({}), largest first:\n", sv.len());
    for (i, e) in sv.iter().enumerate() {
        s.push_str(&format!(
            "    sigma_{:<6} {}\n",
            i + 1,
            interval(e.lo(), e.hi(), style)
        ));
    }
    s
}

impl Report for SpectraReport {
    fn exit(&self) -> Exit {
        if self.inconclusive() == 0 {
            Exit::Success
        } else {
            Exit::Failed
        }
    }

    fn reason(&self) -> Option<String> {
        let first = self.rows.iter().find(|r| r.values.is_none())?;
        Some(format!(
            "{}: {} of {} matrices inconclusive (first: '{}'{}: {})",
            self.shown,
            self.inconclusive(),
            self.rows.len(),
            crate::arch::clean(&first.tensor),
            first.slice.as_deref().unwrap_or(""),
            crate::arch::clean_to(first.reason.as_deref().unwrap_or(""), 300)
        ))
    }

    fn text(&self, style: Style) -> String {
        use std::fmt::Write;
        let iv = |e: &Enclosure| interval(e.lo(), e.hi(), style);
        let opt = |e: &Option<Enclosure>| e.as_ref().map_or_else(|| "-".to_string(), iv);
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{}: {} matrices certified ({}), {} skipped, {} left out by the filters",
            self.shown,
            self.rows.len() - self.inconclusive(),
            self.precision,
            self.skipped.len(),
            self.filtered_out
        );
        if self.rows.iter().any(|r| r.slice.is_some()) {
            let _ = writeln!(s, "note: {RESHAPE_NOTE}");
        }
        for r in &self.rows {
            let _ = writeln!(
                s,
                "{}{} {} x {} {}",
                crate::arch::clean(&r.tensor),
                r.slice.as_deref().unwrap_or(""),
                r.rows,
                r.cols,
                r.dtype
            );
            match &r.values {
                None => {
                    let _ = writeln!(
                        s,
                        "  inconclusive: {}",
                        crate::arch::clean_to(r.reason.as_deref().unwrap_or(""), 300)
                    );
                }
                Some(v) => {
                    let _ = writeln!(s, "  spectral norm      {}", iv(&v.spectral_norm));
                    let _ = writeln!(s, "  sigma_min          {}", iv(&v.sv_min));
                    let _ = writeln!(s, "  Frobenius norm     {}", iv(&v.frobenius_norm));
                    let _ = writeln!(s, "  nuclear norm       {}", iv(&v.nuclear_norm));
                    let _ = writeln!(s, "  (2,1) norm         {}", iv(&v.norm_21));
                    let _ = writeln!(s, "  (1,1) norm         {}", iv(&v.norm_11));
                    let _ = writeln!(s, "  stable rank        {}", opt(&v.stable_rank));
                    let _ = writeln!(s, "  rank               [{}, {}]", v.rank.lo, v.rank.hi);
                    let _ = writeln!(s, "  log_norm           {}", opt(&v.log_norm));
                    let _ = writeln!(s, "  log_spectral_norm  {}", opt(&v.log_spectral_norm));
                    let wide = |e: &Option<Enclosure>, x: &Option<ExactBounds>| match (e, x) {
                        (None, Some(x)) => format!("[{}, {}]", x.lo, x.hi),
                        _ => opt(e),
                    };
                    let bounded = |e: &Option<OpenEnclosure>| e.and_then(|e| e.bounded());
                    let (norm, lambda_max) = (bounded(&v.norm), bounded(&v.lambda_max));
                    if norm.is_none() || lambda_max.is_none() {
                        let _ = writeln!(s, "  norm               {}", wide(&norm, &v.norm_exact));
                        let _ = writeln!(
                            s,
                            "  lambda_max         {}",
                            wide(&lambda_max, &v.lambda_max_exact)
                        );
                    }
                    for sc in &v.schatten {
                        let _ = writeln!(
                            s,
                            "  S_{}^{}: {}   S_{}: {}",
                            sc.p,
                            sc.p,
                            wide(&sc.power.and_then(|p| p.bounded()), &sc.power_exact),
                            sc.p,
                            wide(&sc.norm.and_then(|p| p.bounded()), &sc.norm_exact)
                        );
                        for note in &sc.notes {
                            let _ = writeln!(s, "    note: {note}");
                        }
                    }
                    if let Some(sv) = &v.singular_values {
                        s.push_str(&singular_values_text(sv, style));
                    }
                }
            }
        }
        if !self.skipped.is_empty() {
            let _ = writeln!(s, "skipped:");
            for k in &self.skipped {
                let _ = writeln!(
                    s,
                    "  {} {:?} {}: {}",
                    crate::arch::clean(&k.tensor),
                    k.shape,
                    crate::arch::clean_to(&k.dtype, 16),
                    k.why
                );
            }
        }
        s
    }

    fn json(&self) -> Option<String> {
        #[derive(Serialize)]
        struct Doc<'a> {
            model: &'a str,
            precision: &'a str,
            schatten_p: &'a [String],
            reshape: &'static str,
            matrices: &'a [SpectraRow],
            skipped: &'a [SkippedTensor],
            filtered_out: usize,
        }
        let doc = Doc {
            model: &self.shown,
            precision: &self.precision,
            schatten_p: &self.schatten_p,
            reshape: RESHAPE_NOTE,
            matrices: &self.rows,
            skipped: &self.skipped,
            filtered_out: self.filtered_out,
        };
        Some(serde_json::to_string(&doc).expect("the report serialises"))
    }
}
