//! The main job: read a checkpoint, extract the proxy matrices, certify
//! their spectra and norms, evaluate the bound proxies, and assemble the
//! typed [`Certificate`]. Every interval in it is a certified enclosure.

use std::path::Path;

use faer::Par;
use inari::Interval;
use rayon::prelude::*;

use crate::arch::{
    self, ArchOverrides, Architecture, MatrixId, ModelError, ProxyMatrix, ProxySource,
};
use crate::bounds::{self, MatrixInput, ModelProxies, ProxyParams};
use crate::certificate::{
    BoundsEntry, CertInterval, Certificate, Contribution, FileEntry, GridPoint, LayerEntry,
    MatrixEntry, ModelInfo, Parameters, RankBounds, Tool, FORMAT, MAX_GRID_M, VERSION,
};
use crate::enclosure::Inconclusive;
use crate::io::checkpoint::{Checkpoint, FileHash};
use crate::linalg::factored::certify_factored;
use crate::linalg::{certify_singular_values, Precision, SingularValues, SvdOptions};
use crate::spectral::{summarize, summarize_factored, SpectralSummary};

/// Options of [`certify_model`].
#[derive(Clone, Debug)]
pub struct CertifyOptions {
    /// Method for the singular values (default f64: enough for the targets).
    pub precision: Precision,
    /// `L_phi` as a decimal string (default "1.13", the GELU bound of the paper's code).
    pub l_phi: String,
    /// Grid resolution override (default `ceil(L + ln N)`).
    pub grid_m: Option<usize>,
    /// Architecture facts for a file without config.json.
    pub overrides: ArchOverrides,
}

impl Default for CertifyOptions {
    fn default() -> Self {
        Self {
            precision: Precision::F64,
            l_phi: crate::arch::PAPER_L_PHI.into(),
            grid_m: None,
            overrides: ArchOverrides::default(),
        }
    }
}

/// Why no certificate could be attempted: bad input (the model, a
/// parameter), or the caller cancelled the run. A computation that cannot
/// be certified is not an error but the [`Outcome::Inconclusive`] outcome.
#[derive(Debug)]
pub enum CertifyError {
    /// Bad model input (names the file and tensor or key).
    Model(ModelError),
    /// A bad parameter (names it).
    Param(String),
    /// The run was stopped through [`Progress::cancelled`] before it finished.
    Cancelled,
}

impl std::fmt::Display for CertifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CertifyError::Model(e) => write!(f, "{e}"),
            CertifyError::Param(s) => write!(f, "{s}"),
            CertifyError::Cancelled => write!(f, "cancelled before every matrix was certified"),
        }
    }
}

// `Model` is transparent: it displays the model error and hands on that
// error's own source, so a chain printer shows each cause once.
impl std::error::Error for CertifyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CertifyError::Model(e) => e.source(),
            CertifyError::Param(_) | CertifyError::Cancelled => None,
        }
    }
}

impl From<ModelError> for CertifyError {
    fn from(e: ModelError) -> Self {
        CertifyError::Model(e)
    }
}

/// What a certification run ends with: a certificate, or "inconclusive"
/// with the reason (naming the matrix). Never a wrong interval.
#[derive(Debug)]
pub enum Outcome<T> {
    /// Every interval is a certified enclosure.
    Certified(T),
    /// Something could not be certified; the reason says what.
    Inconclusive(Inconclusive),
}

impl<T> Outcome<T> {
    /// The certified value, or `Err` with the reason.
    pub fn into_result(self) -> Result<T, Inconclusive> {
        match self {
            Outcome::Certified(t) => Ok(t),
            Outcome::Inconclusive(i) => Err(i),
        }
    }
}

/// Certified singular values and spectral summary of one proxy matrix.
#[derive(Clone, Debug)]
pub struct MatrixResult {
    /// Which matrix.
    pub id: MatrixId,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Certified singular values.
    pub sv: SingularValues,
    /// Certified norms and rank.
    pub summary: SpectralSummary,
}

/// Parses a positive decimal parameter into an interval containing it
/// exactly (`spectral::positive_decimal_interval`, the bounded parser).
pub fn parse_decimal(text: &str, what: &str) -> Result<Interval, CertifyError> {
    crate::spectral::positive_decimal_interval(text)
        .map_err(|e| CertifyError::Param(format!("invalid {what}: {e}")))
}

/// Checks a grid resolution against the one limit that `certify`, `verify`
/// and the certificate reader share ([`MAX_GRID_M`]).
pub fn check_grid_m(m: usize) -> Result<usize, CertifyError> {
    if m == 0 || m > MAX_GRID_M {
        return Err(CertifyError::Param(format!(
            "grid m must be between 1 and {MAX_GRID_M}, got {m}"
        )));
    }
    Ok(m)
}

/// Certifies one proxy matrix: singular values, then norms and rank.
///
/// *Guarantee: certified enclosure* of every singular value and summary
/// quantity of the exact matrix (`proofs/residual-single-pair.md`, L6, and
/// the lemmas `certify_singular_values` names; `proofs/factored-product.md`
/// for factored products; `proofs/derived-quantities.md`, L15).
pub fn certify_matrix(
    pm: &ProxyMatrix,
    opts: &SvdOptions,
) -> Result<(SingularValues, SpectralSummary), Inconclusive> {
    let wrap = |e: Inconclusive| Inconclusive::new(format!("{}: {}", pm.id, e.reason));
    match &pm.source {
        ProxySource::Factored { b, c } => {
            let sv = certify_factored(b, c, opts).map_err(wrap)?;
            let s = summarize_factored(b, c, &sv).map_err(wrap)?;
            Ok((sv, s))
        }
        ProxySource::Dense(a) => {
            let sv = certify_singular_values(a, opts).map_err(wrap)?;
            let s = summarize(a, &sv).map_err(wrap)?;
            Ok((sv, s))
        }
    }
}

/// Runs the whole pipeline on a model directory or file.
///
/// *Guarantee: certified enclosure* for every interval of the certificate
/// (see `docs/certify.md` for which paper quantity each one is); `Err` only
/// for bad input, [`Outcome::Inconclusive`] when something could not be
/// certified.
pub fn certify_model(
    path: &Path,
    opts: &CertifyOptions,
) -> Result<Outcome<Certificate>, CertifyError> {
    Ok(match certify_model_with_spectra(path, opts)? {
        Outcome::Certified((c, _)) => Outcome::Certified(c),
        Outcome::Inconclusive(i) => Outcome::Inconclusive(i),
    })
}

/// Hooks a long run calls as it goes (a progress bar on a terminal, a log,
/// nothing). Called from several threads at once.
pub trait Progress: Sync {
    /// The run will certify `n` matrices.
    fn matrices_total(&self, _n: usize) {}
    /// One matrix is finished (certified or not).
    fn matrix_done(&self, _id: MatrixId) {}
    /// What the run is doing now (a stage, a tensor), for display.
    fn message(&self, _text: &str) {}
    /// Whether to stop: asked before each matrix is started; once it says
    /// `true`, no further matrix is started, those under way finish, and the
    /// run ends with [`CertifyError::Cancelled`] (an interrupt in the Python
    /// module). Never stops a matrix half-way.
    fn cancelled(&self) -> bool {
        false
    }
}

/// A [`Progress`] that reports nothing.
pub struct NoProgress;

impl Progress for NoProgress {}

/// [`certify_model`], also returning the certified singular values of every
/// matrix with their methods (in certificate order), for callers that need
/// more than the certificate keeps (the audit's Schatten claims).
pub fn certify_model_with_spectra(
    path: &Path,
    opts: &CertifyOptions,
) -> Result<Outcome<(Certificate, Vec<MatrixResult>)>, CertifyError> {
    certify_model_with_progress(path, opts, &NoProgress)
}

/// [`certify_model_with_spectra`], calling `progress` as matrices finish.
pub fn certify_model_with_progress(
    path: &Path,
    opts: &CertifyOptions,
    progress: &dyn Progress,
) -> Result<Outcome<(Certificate, Vec<MatrixResult>)>, CertifyError> {
    let l_phi = parse_decimal(&opts.l_phi, "L_phi")?;
    if let Some(m) = opts.grid_m {
        check_grid_m(m)?;
    }
    let ck = Checkpoint::open(path).map_err(ModelError::from)?;
    let arch = arch::detect(&ck, &opts.overrides)?;
    let mats = arch::extract(&ck, &arch)?;
    let grid_m = match opts.grid_m {
        Some(m) => m,
        None => {
            let m = bounds::default_grid_m(arch.layers, arch.hidden);
            check_grid_m(m).map_err(|_| {
                CertifyError::Param(format!(
                    "the default grid m = ceil(L + ln N) = {m} exceeds the limit {MAX_GRID_M}; pass --grid-m"
                ))
            })?
        }
    };
    let hashes = ck.file_hashes().map_err(ModelError::from)?;
    let svd_opts = SvdOptions {
        precision: opts.precision,
        par: Par::Seq, // parallel over matrices instead
        ..SvdOptions::default()
    };
    progress.matrices_total(mats.len());
    // `None`: skipped because the run was cancelled.
    let results: Vec<Option<Result<MatrixResult, Inconclusive>>> = mats
        .into_par_iter()
        .map(|pm| {
            if progress.cancelled() {
                return None;
            }
            let done = certify_matrix(&pm, &svd_opts);
            progress.matrix_done(pm.id);
            Some(done.map(|(sv, summary)| MatrixResult {
                id: pm.id,
                rows: pm.rows,
                cols: pm.cols,
                sv,
                summary,
            }))
        })
        .collect();
    let Some(results) = results.into_iter().collect::<Option<Vec<_>>>() else {
        return Err(CertifyError::Cancelled);
    };
    let results: Vec<MatrixResult> = match results.into_iter().collect() {
        Ok(r) => r,
        Err(inc) => return Ok(Outcome::Inconclusive(inc)),
    };
    let params = ProxyParams {
        l_phi_text: opts.l_phi.trim().to_string(),
        l_phi,
        grid_m,
    };
    let inputs: Vec<MatrixInput<'_>> = results
        .iter()
        .map(|r| MatrixInput {
            id: r.id,
            sv: &r.sv,
            summary: &r.summary,
        })
        .collect();
    let proxies = bounds::evaluate(&inputs, arch.layers, arch.heads, arch.hidden, &params);
    Ok(
        match build_certificate(
            path,
            &hashes,
            &arch,
            &params,
            opts.precision,
            &results,
            &proxies,
        ) {
            Ok(c) => Outcome::Certified((c, results)),
            Err(inc) => Outcome::Inconclusive(inc),
        },
    )
}

fn iv(x: Interval, what: &dyn std::fmt::Display) -> Result<CertInterval, Inconclusive> {
    CertInterval::of_inari(x).ok_or_else(|| Inconclusive::new(format!("{what} overflowed f64")))
}

/// The method names of a matrix's values (sorted, distinct), followed by
/// the notes of stages that failed.
fn method_list(sv: &SingularValues) -> Vec<String> {
    let mut methods: Vec<String> = sv.values.iter().map(|v| v.method.name()).collect();
    methods.sort();
    methods.dedup();
    // A stage that failed, was skipped or fell short is said, not hidden.
    methods.extend(sv.notes.iter().map(|n| format!("note: {n}")));
    methods
}

/// Assembles the certificate from certified results; inconclusive when a
/// proxy or bound overflowed f64.
pub fn build_certificate(
    path: &Path,
    hashes: &[FileHash],
    arch: &Architecture,
    params: &ProxyParams,
    precision: Precision,
    results: &[MatrixResult],
    proxies: &ModelProxies,
) -> Result<Certificate, Inconclusive> {
    let m = params.grid_m;
    let mut matrices = Vec::with_capacity(results.len());
    for (r, p) in results.iter().zip(&proxies.matrices) {
        let id = r.id;
        let nz = r.sv.values.len() - r.sv.structural_zeros;
        let s = &r.summary;
        let contributions = p
            .contributions
            .iter()
            .map(|(k, c)| {
                let g = GridPoint { k: *k, m };
                Ok(Contribution {
                    p: g.approx(),
                    p_fraction: g,
                    value: iv(*c, &format_args!("{id}: the contribution at p = {g}"))?,
                })
            })
            .collect::<Result<Vec<_>, Inconclusive>>()?;
        let p_opt_fraction: Vec<GridPoint> = p.p_opt.iter().map(|&k| GridPoint { k, m }).collect();
        matrices.push(MatrixEntry {
            layer: id.layer,
            head: id.head,
            kind: id.kind,
            rows: r.rows,
            cols: r.cols,
            spectral_norm: CertInterval::of(&s.spectral_norm),
            frobenius_norm: CertInterval::of(&s.frobenius_norm),
            nuclear_norm: CertInterval::of(&s.nuclear_norm),
            norm_21: CertInterval::of(&s.norm_21),
            norm_11: CertInterval::of(&s.norm_11),
            stable_rank: s.stable_rank.as_ref().map(CertInterval::of),
            rank: RankBounds {
                lo: s.rank.lo,
                hi: s.rank.hi,
            },
            singular_values: r.sv.values[..nz]
                .iter()
                .map(|v| CertInterval::of(&v.enclosure))
                .collect(),
            structural_zeros: r.sv.structural_zeros,
            method: method_list(&r.sv),
            alpha: iv(p.alpha, &format_args!("{id}: alpha"))?,
            gamma: iv(p.gamma, &format_args!("{id}: gamma"))?,
            scale: iv(p.scale, &format_args!("{id}: gamma alpha L"))?,
            contributions,
            p_opt: p_opt_fraction.iter().map(GridPoint::approx).collect(),
            p_opt_fraction,
            min_contribution: iv(
                p.min_contribution,
                &format_args!("{id}: the minimum contribution"),
            )?,
        });
    }
    let layers = proxies
        .layers
        .iter()
        .enumerate()
        .map(|(l, x)| {
            Ok(LayerEntry {
                layer: l,
                alpha: iv(x.alpha, &format_args!("layer {l} alpha"))?,
                xi: iv(x.xi, &format_args!("layer {l} xi"))?,
            })
        })
        .collect::<Result<Vec<_>, Inconclusive>>()?;
    Ok(Certificate {
        format: FORMAT.into(),
        version: VERSION,
        tool: Tool {
            name: "specbound".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        },
        model: ModelInfo {
            path: path.display().to_string(),
            files: hashes
                .iter()
                .map(|h| FileEntry {
                    file: h.file.clone(),
                    sha256: h.sha256.clone(),
                })
                .collect(),
            architecture: arch.family.clone(),
            tensor_prefix: arch.prefix.clone(),
            layers: arch.layers,
            hidden: arch.hidden,
            heads: arch.heads,
            kv_heads: arch.kv_heads,
            head_dim: arch.head_dim,
            intermediate: arch.intermediate,
        },
        parameters: Parameters {
            l_phi: params.l_phi_text.clone(),
            grid_m: m,
            grid: (0..=2 * m).map(|k| GridPoint { k, m }).collect(),
            n: arch.hidden,
            depth: arch.layers,
            precision,
            rank: "exact rank of the stored matrix (certified), not a numerical rank".into(),
        },
        matrices,
        layers,
        bounds: BoundsEntry {
            ours: iv(proxies.ours, &"B_ours")?,
            edelman: iv(proxies.edelman, &"B_Edel")?,
        },
        extensions: arch.extensions(&params.l_phi_text),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts the hooks; cancels once `stop_after` matrices are done.
    struct Counter {
        total: AtomicUsize,
        done: AtomicUsize,
        stop_after: usize,
    }

    impl Progress for Counter {
        fn matrices_total(&self, n: usize) {
            self.total.store(n, Ordering::SeqCst);
        }
        fn matrix_done(&self, _id: MatrixId) {
            self.done.fetch_add(1, Ordering::SeqCst);
        }
        fn cancelled(&self) -> bool {
            self.done.load(Ordering::SeqCst) >= self.stop_after
        }
    }

    fn bundled() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("data/all-MiniLM-L6-v2")
    }

    #[test]
    fn progress_sees_every_matrix_once_and_never_cancels_by_default() {
        assert!(!NoProgress.cancelled());
        let c = Counter {
            total: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            stop_after: usize::MAX,
        };
        let out = certify_model_with_progress(&bundled(), &CertifyOptions::default(), &c).unwrap();
        let (cert, _) = out.into_result().unwrap();
        assert_eq!(c.total.load(Ordering::SeqCst), cert.matrices.len());
        assert_eq!(c.done.load(Ordering::SeqCst), cert.matrices.len());
    }

    #[test]
    fn a_cancelled_run_starts_no_further_matrix_and_says_cancelled() {
        let c = Counter {
            total: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            stop_after: 1,
        };
        let e = certify_model_with_progress(&bundled(), &CertifyOptions::default(), &c)
            .expect_err("cancelled after the first matrix");
        assert!(matches!(e, CertifyError::Cancelled), "{e}");
        assert_eq!(e.to_string(), "cancelled before every matrix was certified");
        // Only the matrices already under way when the first one finished
        // (one per worker thread: the f64 method runs each matrix on one
        // thread) complete after the cancellation.
        let done = c.done.load(Ordering::SeqCst);
        let total = c.total.load(Ordering::SeqCst);
        assert!(
            done <= rayon::current_num_threads() && done < total,
            "{done} of {total} matrices done"
        );
    }
}
