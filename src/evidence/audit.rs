//! `specbound audit`: checks claimed numbers against certified values.
//!
//! A claim is a decimal as printed (e.g. `6.12499`). Unless a tolerance is
//! given, it is taken to mean "the exact value rounded to the digits shown",
//! i.e. the value lies within half a unit in the last printed digit. With the
//! certified enclosure `[lo, hi]` and the claim window `[c - tol, c + tol]`
//! (all compared exactly, as rationals):
//!
//! * **inconsistent**: the window and the enclosure are disjoint, so the claim
//!   is certainly wrong at its own precision (the certified distance and
//!   relative error are reported);
//! * **consistent**: they meet and the enclosure is no wider than the window,
//!   so the certified value confirms the claim at its precision;
//! * **undecided**: they meet but the enclosure is wider than the window (the
//!   certificate cannot confirm digits that fine; its width is reported).

use std::collections::HashMap;
use std::path::Path;

use inari::Interval;
use rug::ops::Pow;
use rug::Rational;
use serde::Serialize;

use super::EvidenceError;
use crate::arch::{MatrixId, MatrixType};
use crate::certificate::{CertInterval, Certificate, GridPoint};
use crate::certify::{certify_model_with_spectra, CertifyOptions, MatrixResult, Outcome};

/// A model's certificate with the certified spectra behind it.
struct Certified {
    cert: Certificate,
    results: Vec<MatrixResult>,
}
use crate::enclosure::Enclosure;
use crate::io::checkpoint::Checkpoint;
use crate::linalg::{certify_singular_values, SingularValues, SvdOptions};
use crate::spectral::{enclose_power_sum, parse_decimal_interval, summarize, SpectralSummary};

/// A claim's verdict.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// Confirmed at the claim's precision.
    Consistent,
    /// Certainly wrong at the claim's precision.
    Inconsistent {
        /// Distance from the claim to the certified interval (approximate decimal of an exact rational).
        distance: f64,
        /// `distance / |claim|`.
        relative_error: f64,
    },
    /// The certified interval is wider than the claim's window.
    Undecided {
        /// Width `hi - lo` of the certified interval.
        width: f64,
    },
}

/// One audited claim.
#[derive(Clone, Debug, Serialize)]
pub struct ClaimResult {
    /// CSV line number (1 = header).
    pub line: usize,
    /// What the claim is about (tensor or proxy matrix or bound).
    pub subject: String,
    /// Quantity name as in the claims file.
    pub quantity: String,
    /// Claimed value as written.
    pub claim: String,
    /// Half-width of the claim window used.
    pub tolerance: f64,
    /// Certified enclosure.
    pub certified: [f64; 2],
    /// Verdict.
    #[serde(flatten)]
    pub verdict: Verdict,
}

/// The whole audit.
#[derive(Clone, Debug, Serialize)]
pub struct AuditReport {
    /// Detected layout of the claims file.
    pub layout: String,
    /// Per claim.
    pub results: Vec<ClaimResult>,
    /// Counts.
    pub consistent: usize,
    /// Counts.
    pub inconsistent: usize,
    /// Counts.
    pub undecided: usize,
}

impl AuditReport {
    /// The exit code of `specbound audit` for this report: 1 when a claim is
    /// inconsistent, else 3 when a claim is undecided, else 0.
    pub fn exit_code(&self) -> u8 {
        if self.inconsistent > 0 {
            1
        } else if self.undecided > 0 {
            3
        } else {
            0
        }
    }
}

/// `(subject kind, quantity, p, claim text, explicit tolerance)` of one claim.
type RawClaim = (String, String, Option<String>, String, Option<String>);

/// Largest claims file read (bytes).
pub const MAX_CLAIMS_BYTES: u64 = 16 << 20;

/// A minimal CSV reader (RFC 4180 quoting) with a size limit.
pub fn parse_csv(text: &str, file: &str) -> Result<Vec<Vec<String>>, EvidenceError> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    let mut line = 1usize;
    while let Some(ch) = chars.next() {
        if quoted {
            match ch {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => quoted = false,
                '\n' => {
                    line += 1;
                    field.push(ch);
                }
                _ => field.push(ch),
            }
            continue;
        }
        match ch {
            '"' if field.is_empty() => quoted = true,
            ',' => row.push(std::mem::take(&mut field)),
            '\r' => {}
            '\n' => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
                line += 1;
            }
            _ => field.push(ch),
        }
    }
    if quoted {
        return Err(EvidenceError::Malformed {
            file: file.into(),
            at: format!("line {line}"),
            message: "unterminated quoted field".into(),
        });
    }
    if !field.is_empty() || !row.is_empty() {
        row.push(field);
        rows.push(row);
    }
    rows.retain(|r| !(r.len() == 1 && r[0].trim().is_empty()));
    Ok(rows)
}

/// `(value, half unit in the last printed digit)` of a decimal string, exactly.
pub fn parse_claim(s: &str) -> Option<(Rational, Rational)> {
    let t = s.trim();
    let (mant, exp) = match t.find(['e', 'E']) {
        Some(i) => (&t[..i], t[i + 1..].parse::<i32>().ok()?),
        None => (t, 0),
    };
    let (neg, mant) = match mant.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, mant.strip_prefix('+').unwrap_or(mant)),
    };
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    if int.is_empty() && frac.is_empty()
        || !int.chars().chain(frac.chars()).all(|c| c.is_ascii_digit())
    {
        return None;
    }
    if exp.unsigned_abs() > 10_000 {
        return None;
    }
    let digits = format!("{int}{frac}");
    let m = rug::Integer::from_str_radix(if digits.is_empty() { "0" } else { &digits }, 10).ok()?;
    let scale = exp - frac.len() as i32; // value = m * 10^scale
    let ten = |k: i32| -> Rational {
        let p = rug::Integer::from(10).pow(k.unsigned_abs());
        if k >= 0 {
            Rational::from(p)
        } else {
            Rational::from((rug::Integer::from(1), p))
        }
    };
    let mut v = Rational::from(m) * ten(scale);
    if neg {
        v = -v;
    }
    let tol = ten(scale) / 2;
    Some((v, tol))
}

fn judge(c: &Rational, tol: &Rational, lo: f64, hi: f64) -> Verdict {
    let (l, h) = (
        Rational::from_f64(lo).expect("finite"),
        Rational::from_f64(hi).expect("finite"),
    );
    let wlo = Rational::from(c - tol);
    let whi = Rational::from(c + tol);
    if h < wlo || l > whi {
        let dist = if h < *c {
            Rational::from(c - &h)
        } else {
            Rational::from(&l - c)
        };
        let rel = if *c != 0 {
            &dist / c.clone().abs()
        } else {
            Rational::from(0)
        };
        return Verdict::Inconsistent {
            distance: dist.to_f64(),
            relative_error: rel.to_f64(),
        };
    }
    let width = Rational::from(&h - &l);
    if width > Rational::from(tol * 2u32) {
        Verdict::Undecided {
            width: width.to_f64(),
        }
    } else {
        Verdict::Consistent
    }
}

/// Certified facts about one matrix, for claims.
struct Facts {
    sv: SingularValues,
    summary: SpectralSummary,
}

fn facts_of_tensor(ck: &Checkpoint, name: &str) -> Result<Facts, String> {
    let m = ck.read(name).map_err(|e| e.to_string())?.matrix;
    let sv = certify_singular_values(&m, &SvdOptions::default())
        .map_err(|e| format!("tensor '{name}': {e}"))?;
    let summary = summarize(&m, &sv).map_err(|e| format!("tensor '{name}': {e}"))?;
    Ok(Facts { sv, summary })
}

fn enc_iv(e: &Enclosure) -> Interval {
    e.to_interval()
}

/// Certified enclosure of a named quantity of a matrix (`p` for sigma_i,
/// schatten, schatten_power). WeightWatcher names are accepted too.
fn matrix_quantity(f: &Facts, q: &str, p: Option<&str>) -> Result<Interval, String> {
    let s = &f.summary;
    let sig = |i: usize| -> Result<Interval, String> {
        f.sv.values
            .get(i)
            .map(|v| enc_iv(&v.enclosure))
            .ok_or_else(|| format!("sigma index {} out of range", i + 1))
    };
    let fro2 = enc_iv(&s.frobenius_norm).sqr();
    let sp2 = enc_iv(&s.spectral_norm).sqr();
    let need_p = || p.ok_or_else(|| format!("quantity '{q}' needs a p column"));
    Ok(match q {
        "sigma_max" | "sv_max" | "spectral_norm" => enc_iv(&s.spectral_norm),
        "sv_min" | "sigma_min" => sig(f.sv.values.len() - 1)?,
        "sigma_i" => {
            let i: usize = need_p()?
                .trim()
                .parse()
                .map_err(|_| "sigma_i needs an integer index p (1-based)".to_string())?;
            if i == 0 {
                return Err("sigma_i indices start at 1".into());
            }
            sig(i - 1)?
        }
        "frobenius_norm" => enc_iv(&s.frobenius_norm),
        "nuclear_norm" => enc_iv(&s.nuclear_norm),
        "norm_21" => enc_iv(&s.norm_21),
        "norm_11" => enc_iv(&s.norm_11),
        "stable_rank" => s
            .stable_rank
            .as_ref()
            .map(enc_iv)
            .ok_or("stable rank not certified")?,
        "rank" | "matrix_rank" => {
            Interval::try_from((s.rank.lo as f64, s.rank.hi as f64)).expect("finite")
        }
        "schatten" | "schatten_power" => {
            let pv = parse_decimal_interval(need_p()?).ok_or("invalid p")?;
            if pv.inf() == 0.0 && pv.sup() == 0.0 {
                Interval::try_from((s.rank.lo as f64, s.rank.hi as f64)).expect("finite")
            } else if !(pv.inf() > 0.0) {
                return Err("p must be >= 0".into());
            } else {
                let pw = enclose_power_sum(&f.sv, pv);
                if q == "schatten_power" {
                    pw
                } else {
                    pw.pow(pv.recip())
                }
            }
        }
        // WeightWatcher's names: its spectral_norm/lambda_max are sigma_max^2,
        // norm is ||W||_F^2, log_* are base-10 logarithms of those.
        "ww_spectral_norm" | "lambda_max" => sp2,
        "norm" => fro2,
        "log_norm" => fro2.log10(),
        "log_spectral_norm" => sp2.log10(),
        "ww_stable_rank" => fro2 / sp2,
        _ => return Err(format!("unknown quantity '{q}'")),
    })
}

fn iv(x: CertInterval) -> Interval {
    x.to_inari()
        .expect("a certificate interval is finite with lo <= hi")
}

fn proxy_quantity(
    c: &Certified,
    layer: usize,
    head: i64,
    kind: MatrixType,
    q: &str,
    p: Option<&str>,
) -> Result<Interval, String> {
    let idx = find_matrix(&c.cert, layer, head, kind)?;
    let w = &c.cert.matrices[idx];
    let r = &c.results[idx];
    let m = c.cert.parameters.grid_m;
    let grid_k = |p: &str| -> Result<usize, String> {
        let (v, _) = parse_claim(p).ok_or("invalid p")?;
        let km = Rational::from(&v * m as u32);
        if *km.denom() != 1 || km < 0 || km > 2 * m as u32 {
            return Err(format!("p = {p} is not a point of the grid P_{m}"));
        }
        Ok(km.numer().to_usize().unwrap_or(usize::MAX))
    };
    Ok(match q {
        "alpha" | "alpha_mh" => iv(w.alpha),
        "gamma" => iv(w.gamma),
        "scale" | "scale_gamma_alpha_L" => iv(w.scale),
        "min_contribution" => iv(w.min_contribution),
        "contribution" => {
            let k = grid_k(p.ok_or("contribution needs p")?)?;
            iv(w.contribution_at(GridPoint { k, m })
                .ok_or("p is not on the grid")?)
        }
        "p_grid_m" => Interval::try_from((m as f64, m as f64)).expect("finite"),
        "rows" => Interval::try_from((w.rows as f64, w.rows as f64)).expect("finite"),
        "cols" => Interval::try_from((w.cols as f64, w.cols as f64)).expect("finite"),
        other => matrix_quantity(
            &Facts {
                sv: r.sv.clone(),
                summary: r.summary.clone(),
            },
            other,
            p,
        )?,
    })
}

/// Index of a proxy matrix given in the authors' columns (`head = -1` for layer matrices).
fn find_matrix(
    cert: &Certificate,
    layer: usize,
    head: i64,
    kind: MatrixType,
) -> Result<usize, String> {
    let missing = || format!("no proxy matrix layer {layer} head {head} {kind}");
    let id = MatrixId::from_columns(layer, head, kind).ok_or_else(missing)?;
    cert.position(id).ok_or_else(missing)
}

fn kind_of(s: &str) -> Result<MatrixType, String> {
    MatrixType::parse(s.trim())
        .ok_or_else(|| format!("unknown matrix_type '{s}' (QK, V_tilde, M_in, M_out)"))
}

impl ClaimResult {
    fn at(mut self, line: usize) -> Self {
        self.line = line;
        self
    }
}

/// A claimed minimiser `p`: consistent when it is the certified unique
/// minimiser, inconsistent when the certified contributions exclude it,
/// undecided when it is one of several possible minimisers.
fn judge_p_opt(
    c: &Certificate,
    l: usize,
    h: i64,
    k: MatrixType,
    claim: &str,
) -> Result<ClaimResult, String> {
    let idx = find_matrix(c, l, h, k)?;
    let m = c.parameters.grid_m;
    let opt: Vec<usize> = c.matrices[idx].p_opt_fraction.iter().map(|g| g.k).collect();
    let (v, tol) =
        parse_claim(claim).ok_or_else(|| format!("'{claim}' is not a decimal number"))?;
    // Grid points within the claim's window.
    let hits: Vec<usize> = (0..=2 * m)
        .filter(|&j| {
            let p = Rational::from((j as u32, m as u32));
            Rational::from(&p - &v).abs() <= tol
        })
        .collect();
    let (lo, hi) = (
        opt.first()
            .map(|&j| j as f64 / m as f64)
            .unwrap_or(f64::NAN),
        opt.last().map(|&j| j as f64 / m as f64).unwrap_or(f64::NAN),
    );
    let verdict = if !hits.iter().any(|j| opt.contains(j)) {
        let nearest = opt
            .iter()
            .map(|&j| Rational::from(&Rational::from((j as u32, m as u32)) - &v).abs())
            .min()
            .unwrap_or_default();
        let rel = if v != 0 {
            (&nearest / v.clone().abs()).to_f64()
        } else {
            0.0
        };
        Verdict::Inconsistent {
            distance: nearest.to_f64(),
            relative_error: rel,
        }
    } else if opt.len() == 1 {
        Verdict::Consistent
    } else {
        Verdict::Undecided { width: hi - lo }
    };
    let name = c.matrices[idx].id().to_string();
    Ok(ClaimResult {
        line: 0,
        subject: name,
        quantity: "p_opt".into(),
        claim: claim.to_string(),
        tolerance: tol.to_f64(),
        certified: [lo, hi],
        verdict,
    })
}

fn ensure_cert<'a>(
    slot: &'a mut Option<Certified>,
    model: &Path,
) -> Result<&'a Certified, EvidenceError> {
    if slot.is_none() {
        let (cert, results) = match certify_model_with_spectra(model, &CertifyOptions::default())
            .map_err(|e| EvidenceError::Model(e.to_string()))?
        {
            Outcome::Certified(x) => x,
            Outcome::Inconclusive(i) => {
                return Err(EvidenceError::Model(format!(
                    "{}: the model could not be certified: {}",
                    model.display(),
                    i.reason
                )))
            }
        };
        *slot = Some(Certified { cert, results });
    }
    Ok(slot.as_ref().expect("just set"))
}

/// Runs an audit of `claims` against `model`.
pub fn audit(model: &Path, claims: &Path) -> Result<AuditReport, EvidenceError> {
    let cfile = claims.display().to_string();
    // Capped while reading: `/dev/zero` or a FIFO is refused at the cap.
    let text = crate::io::limits::read_capped_string(claims, MAX_CLAIMS_BYTES, "claims file")
        .map_err(EvidenceError::Read)?;
    let rows = parse_csv(&text, &cfile)?;
    let header: Vec<String> = rows
        .first()
        .ok_or_else(|| EvidenceError::Malformed {
            file: cfile.clone(),
            at: "line 1".into(),
            message: "empty claims file".into(),
        })?
        .iter()
        .map(|h| h.trim().trim_start_matches('\u{feff}').to_string())
        .collect();
    let col = |n: &str| header.iter().position(|h| h == n);
    let has = |n: &str| col(n).is_some();
    let layout = if has("layer_id")
        && has("name")
        && (has("log_spectral_norm") || has("lambda_max") || has("sv_max"))
    {
        "weightwatcher"
    } else if has("model_id") && has("bound") && has("value") {
        "observed_bounds"
    } else if has("matrix_type") && has("contribution") && has("p") {
        "p_contribution_raw"
    } else if has("matrix_type") && has("min_contribution") {
        "schatten_opt"
    } else if has("matrix_type") && has("spectral_norm") {
        "matrix_summary"
    } else if has("quantity") && has("value") && (has("tensor") || has("matrix_type")) {
        "generic"
    } else {
        return Err(EvidenceError::Malformed {
            file: cfile,
            at: "line 1".into(),
            message: "unrecognised header: expected one of the certify --csv layouts, the generic layout \
                      (tensor or layer,head,matrix_type; quantity; [p]; value; [tolerance]) or a WeightWatcher details CSV".into(),
        });
    };
    let ck = Checkpoint::open(model).map_err(|e| EvidenceError::Model(e.to_string()))?;
    // The model certificate is computed only when a claim needs it.
    let mut cert: Option<Certified> = None;
    let mut tensor_cache: HashMap<String, Facts> = HashMap::new();
    let mut results = Vec::new();
    let bad = |line: usize, msg: String| EvidenceError::Malformed {
        file: claims.display().to_string(),
        at: format!("line {line}"),
        message: msg,
    };
    for (i, row) in rows.iter().enumerate().skip(1) {
        let line = i + 1;
        let cell = |n: &str| {
            col(n)
                .and_then(|c| row.get(c))
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        };
        // (subject, quantity, p, claim text, explicit tolerance)
        let mut claims_here: Vec<RawClaim> = Vec::new();
        let proxy_subject =
            |cell: &dyn Fn(&str) -> Option<String>| -> Result<(usize, i64, MatrixType), String> {
                let l = cell("layer")
                    .ok_or("missing layer")?
                    .parse::<usize>()
                    .map_err(|_| "bad layer".to_string())?;
                let h = cell("head")
                    .ok_or("missing head")?
                    .parse::<i64>()
                    .map_err(|_| "bad head".to_string())?;
                let k = kind_of(&cell("matrix_type").ok_or("missing matrix_type")?)?;
                Ok((l, h, k))
            };
        match layout {
            "matrix_summary" | "schatten_opt" => {
                let qs: &[&str] = if layout == "matrix_summary" {
                    &[
                        "rows",
                        "cols",
                        "rank",
                        "spectral_norm",
                        "frobenius_norm",
                        "nuclear_norm",
                        "norm_21",
                        "norm_11",
                        "stable_rank",
                    ]
                } else {
                    &[
                        "alpha_mh",
                        "gamma",
                        "scale_gamma_alpha_L",
                        "p_grid_m",
                        "min_contribution",
                    ]
                };
                for q in qs {
                    if let Some(v) = cell(q) {
                        claims_here.push(("proxy".into(), q.to_string(), None, v, None));
                    }
                }
                if let (true, Some(v)) = (layout == "schatten_opt", cell("p_opt")) {
                    let (l, h, k) = proxy_subject(&cell).map_err(|e| bad(line, e))?;
                    let c = ensure_cert(&mut cert, model)?;
                    results.push(
                        judge_p_opt(&c.cert, l, h, k, &v)
                            .map_err(|e| bad(line, e))?
                            .at(line),
                    );
                }
            }
            "p_contribution_raw" => {
                if let Some(v) = cell("contribution") {
                    claims_here.push(("proxy".into(), "contribution".into(), cell("p"), v, None));
                }
            }
            "observed_bounds" => {
                if let Some(v) = cell("value") {
                    claims_here.push((
                        "bound".into(),
                        cell("bound").unwrap_or_default(),
                        None,
                        v,
                        None,
                    ));
                }
            }
            "generic" => {
                if let Some(v) = cell("value") {
                    let subj = if cell("tensor").is_some() {
                        "tensor"
                    } else if cell("matrix_type").is_some() {
                        "proxy"
                    } else {
                        "bound"
                    };
                    claims_here.push((
                        subj.into(),
                        cell("quantity").unwrap_or_default(),
                        cell("p"),
                        v,
                        cell("tolerance"),
                    ));
                }
            }
            _ => {
                // WeightWatcher: its spectral_norm is sigma_max^2, norm is ||W||_F^2.
                for (wq, q) in [
                    ("sv_max", "sv_max"),
                    ("sv_min", "sv_min"),
                    ("spectral_norm", "ww_spectral_norm"),
                    ("lambda_max", "lambda_max"),
                    ("norm", "norm"),
                    ("log_norm", "log_norm"),
                    ("log_spectral_norm", "log_spectral_norm"),
                    ("stable_rank", "ww_stable_rank"),
                    ("matrix_rank", "matrix_rank"),
                ] {
                    if let Some(v) = cell(wq).filter(|v| !v.eq_ignore_ascii_case("nan")) {
                        claims_here.push(("ww".into(), q.to_string(), None, v, None));
                    }
                }
            }
        }
        for (subj, quantity, p, claim, tol) in claims_here {
            let (c, default_tol) = parse_claim(&claim)
                .ok_or_else(|| bad(line, format!("'{claim}' is not a decimal number")))?;
            let tol_r = match &tol {
                Some(t) => {
                    let (tv, _) = parse_claim(t).ok_or_else(|| {
                        bad(line, format!("tolerance '{t}' is not a decimal number"))
                    })?;
                    if tv < 0 {
                        return Err(bad(line, "tolerance must be >= 0".into()));
                    }
                    tv
                }
                None => default_tol,
            };
            let (subject, iv) = match subj.as_str() {
                "proxy" => {
                    let (l, h, k) = proxy_subject(&cell).map_err(|e| bad(line, e))?;
                    let name = MatrixId::from_columns(l, h, k)
                        .map(|id| id.to_string())
                        .unwrap_or_else(|| format!("layer {l} head {h} {k}"));
                    let q = if quantity == "p_opt" {
                        "p_opt".to_string()
                    } else {
                        quantity.clone()
                    };
                    (
                        name,
                        proxy_quantity(ensure_cert(&mut cert, model)?, l, h, k, &q, p.as_deref())
                            .map_err(|e| bad(line, e))?,
                    )
                }
                "bound" => {
                    let c = ensure_cert(&mut cert, model)?;
                    let b = match quantity.as_str() {
                        "ours" | "B_ours" => iv(c.cert.bounds.ours),
                        "edelman" | "B_Edel" | "edel" => iv(c.cert.bounds.edelman),
                        other => {
                            return Err(bad(
                                line,
                                format!("unknown bound '{other}' (ours, edelman)"),
                            ))
                        }
                    };
                    ("model".to_string(), b)
                }
                _ => {
                    let name = if subj == "ww" {
                        let n = cell("name").ok_or_else(|| bad(line, "missing name".into()))?;
                        if ck.contains(&format!("{n}.weight")) {
                            format!("{n}.weight")
                        } else {
                            n
                        }
                    } else {
                        cell("tensor").expect("tensor subject")
                    };
                    if !tensor_cache.contains_key(&name) {
                        let f = facts_of_tensor(&ck, &name).map_err(|e| bad(line, e))?;
                        tensor_cache.insert(name.clone(), f);
                    }
                    let iv = matrix_quantity(&tensor_cache[&name], &quantity, p.as_deref())
                        .map_err(|e| bad(line, e))?;
                    (name, iv)
                }
            };
            let e = Enclosure::from_interval(iv)
                .ok_or_else(|| bad(line, format!("{quantity}: no finite certified enclosure")))?;
            let verdict = judge(&c, &tol_r, e.lo(), e.hi());
            results.push(ClaimResult {
                line,
                subject,
                quantity: quantity.clone(),
                claim: claim.clone(),
                tolerance: tol_r.to_f64(),
                certified: [e.lo(), e.hi()],
                verdict,
            });
        }
    }
    let count = |f: fn(&Verdict) -> bool| results.iter().filter(|r| f(&r.verdict)).count();
    Ok(AuditReport {
        layout: layout.to_string(),
        consistent: count(|v| matches!(v, Verdict::Consistent)),
        inconsistent: count(|v| matches!(v, Verdict::Inconsistent { .. })),
        undecided: count(|v| matches!(v, Verdict::Undecided { .. })),
        results,
    })
}

#[cfg(test)]
mod tests {
    use super::AuditReport;

    #[test]
    fn exit_codes_are_the_commands() {
        let r = |consistent, inconsistent, undecided| AuditReport {
            layout: "generic".into(),
            results: Vec::new(),
            consistent,
            inconsistent,
            undecided,
        };
        assert_eq!(r(2, 0, 0).exit_code(), 0);
        assert_eq!(r(2, 0, 1).exit_code(), 3);
        assert_eq!(
            r(2, 1, 1).exit_code(),
            1,
            "inconsistent outweighs undecided"
        );
    }
}
