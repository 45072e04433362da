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
//!
//! A table that states each value's interval beside it (columns `X_lo` and
//! `X_hi` next to `X`, as every table specbound writes) claims the
//! interval (an end of at most 17 significant digits names the binary64
//! value it reads back as, as specbound and numpy print them):
//! **consistent** when the certified enclosure lies inside it (so the exact
//! value does), **inconsistent** when they are disjoint,
//! **undecided** otherwise (`--rtol`/`--atol` widen it). So a specbound
//! table audits cleanly against the model it came from.
//!
//! An inconsistent claim of `c(W, p)`, `min_contribution`, `p_opt` or
//! `B_ours` that the authors' float64 treatment of the per-head products'
//! exact zeros explains gets a note saying so, with the certified exact
//! value and the size of the artefact (`crate::report::fidelity`).

use std::collections::HashMap;
use std::path::Path;

use inari::Interval;
use rug::Rational;
use serde::Serialize;

use super::{Answer, EvidenceError};
use crate::arch::{MatrixId, MatrixType};
use crate::certificate::{CertInterval, Certificate, GridPoint};
use crate::certify::{
    certify_measures, certify_run, CertifyOptions, MatrixResult, MeasuresRun, Outcome, Run,
    RunScope,
};
use crate::progress::Progress;

/// A model's certificate with the certified spectra behind it.
struct Certified {
    cert: Certificate,
    results: Vec<MatrixResult>,
}
use crate::enclosure::Enclosure;
use crate::io::checkpoint::Checkpoint;
use crate::linalg::{certify_singular_values, SingularValues, SvdOptions};
use crate::report::fidelity;
use crate::spectral::{enclose_power_sum, summarize, SchattenP, SpectralSummary};

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
        /// Whether the gap is within the rounding of a float32 / float64
        /// value of that quantity (certified, [`proofs/rounding-gap.md`](crate::proofs::rounding_gap));
        /// absent for `p_opt` claims.
        #[serde(skip_serializing_if = "Option::is_none")]
        rounding: Option<Rounding>,
    },
    /// The certified interval is wider than the claim's window.
    Undecided {
        /// Width `hi - lo` of the certified interval.
        width: f64,
    },
}

/// Unit roundoff of float32, `2^-24`.
pub(crate) const U32: f64 = 5.960464477539063e-8;
/// Unit roundoff of float64, `2^-53`.
pub(crate) const U64: f64 = 1.1102230246251565e-16;

/// Whether a gap is certainly within, certainly beyond, or possibly either
/// side of `k` unit roundoffs of the exact value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RoundingVerdict {
    /// `|c - x| <= k u |x|` for every `x` in the enclosure.
    Within,
    /// `|c - x| > k u |x|` for every `x` in the enclosure.
    Beyond,
    /// Neither can be certified at this width.
    Undecided,
}

/// A gap measured against the unit roundoff `u` of one format.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FormatGap {
    /// The verdict against `k u |x|`.
    pub verdict: RoundingVerdict,
    /// Encloses `|c - x| / (u |x|)` over the enclosure (outward to f64);
    /// `hi` is `null` when the enclosure reaches 0.
    pub units: [Option<f64>; 2],
}

/// A gap measured against float32 and float64 rounding.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Rounding {
    /// The multiple `k` of the unit roundoff used (`--rounding-units`).
    pub k: f64,
    /// Against `u = 2^-24`.
    pub float32: FormatGap,
    /// Against `u = 2^-53`.
    pub float64: FormatGap,
    /// Whether the claim as printed can be a float32 value: at most 9
    /// significant digits (float32's round-trip length), or exactly a float32
    /// number. A gap within float32 rounding is counted (and shown) as
    /// float32 rounding only then: a 17-digit float64 result a few float64
    /// units off is within float32 rounding too, but it is no float32
    /// computation.
    pub float32_value: bool,
}

/// [`Rounding::float32_value`] of a claim's text.
pub(crate) fn float32_value(claim: &str) -> bool {
    let Ok(d) = claim.parse::<crate::spectral::ExactDecimal>() else {
        return false;
    };
    if d.digits.trim_matches('0').len() <= 9 {
        return true;
    }
    let x = d.to_rational();
    let f = x.to_f64() as f32;
    f.is_finite() && Rational::from_f32(f).is_some_and(|r| r == x)
}

/// `r` rounded down (`up = false`) or up to an f64, directed
/// ([`proofs/mpfr-directed.md`](crate::proofs::mpfr_directed), L13).
pub(crate) fn directed(r: &Rational, up: bool) -> f64 {
    use rug::float::Round;
    let rd = if up { Round::Up } else { Round::Down };
    rug::Float::with_val_round(64, r, rd).0.to_f64_round(rd)
}

/// The gap between a claim `c` and an exact value `x` known to lie in
/// `[l, h]`, against `k u |x|` for the unit roundoff `u`:
/// *certified* ([`proofs/rounding-gap.md`](crate::proofs::rounding_gap), L22): `Within` only when
/// `|c - x| <= k u |x|` for every `x` in `[l, h]`, `Beyond` only when it
/// fails for every such `x`; `units` encloses `|c - x| / (u |x|)`.
pub(crate) fn format_gap(c: &Rational, l: &Rational, h: &Rational, u: f64, k: f64) -> FormatGap {
    let u = Rational::from_f64(u).expect("finite");
    let ku = Rational::from_f64(k).expect("finite") * &u;
    let g = |x: &Rational| Rational::from(c - x).abs() - Rational::from(&ku * x).abs();
    // g is piecewise linear with breaks only at 0 and c: its extremes over
    // [l, h] are at the ends and at those breaks that lie inside.
    let mut pts = vec![l.clone(), h.clone()];
    if *l < 0 && *h > 0 {
        pts.push(Rational::new());
    }
    if *l < *c && *c < *h {
        pts.push(c.clone());
    }
    let gs: Vec<Rational> = pts.iter().map(g).collect();
    let verdict = if gs.iter().all(|v| *v <= 0) {
        RoundingVerdict::Within
    } else if gs.iter().all(|v| *v > 0) {
        RoundingVerdict::Beyond
    } else {
        RoundingVerdict::Undecided
    };
    // rho(x) = |c - x| / (u |x|) is monotone on [l, h] unless 0 is in it.
    let rho = |x: &Rational| -> Option<Rational> {
        (*x != 0).then(|| Rational::from(c - x).abs() / (Rational::from(x.abs_ref()) * &u))
    };
    // rho is monotone on each side of c (and of 0), so its extremes are at
    // the ends; it is 0 at c when c lies inside.
    let (rl, rh) = (rho(l), rho(h));
    let spans_zero = *l <= 0 && *h >= 0;
    let lo = if *l <= *c && *c <= *h && *c != 0 {
        Some(Rational::new())
    } else {
        match (&rl, &rh) {
            (Some(a), Some(b)) => Some(std::cmp::min(a, b).clone()),
            (Some(a), None) | (None, Some(a)) => Some(a.clone()),
            (None, None) => None,
        }
    };
    let hi = if spans_zero {
        None
    } else {
        match (rl, rh) {
            (Some(a), Some(b)) => Some(std::cmp::max(a, b)),
            _ => None,
        }
    };
    FormatGap {
        verdict,
        units: [
            lo.map(|v| directed(&v, false)),
            hi.map(|v| directed(&v, true)),
        ],
    }
}

fn rounding_of(c: &Rational, lo: f64, hi: f64, k: f64) -> Rounding {
    let (l, h) = (
        Rational::from_f64(lo).expect("finite"),
        Rational::from_f64(hi).expect("finite"),
    );
    Rounding {
        k,
        float32: format_gap(c, &l, &h, U32, k),
        float64: format_gap(c, &l, &h, U64, k),
        // Set from the claim's text by the caller (`float32_value`).
        float32_value: false,
    }
}

/// Options of [`audit_with`].
#[derive(Clone, Debug)]
pub(crate) struct AuditOptions {
    /// Relative tolerance: the window of every claim without a `tolerance`
    /// column is at least `c ± (atol + rtol |c|)`.
    pub rtol: f64,
    /// Absolute tolerance (see `rtol`).
    pub atol: f64,
    /// Method for the certified singular values (`certify`'s default, f64).
    pub precision: crate::linalg::Precision,
    /// Multiple of the unit roundoff in the rounding verdict of an
    /// inconsistent claim.
    pub rounding_units: f64,
    /// In a claims table whose `model_id` column holds several ids (a
    /// study's tables, the authors' multi-model tables), the rows of this
    /// model; other rows are counted as another model's, never judged.
    /// `None`: the model's default id, as `study` derives it (its directory
    /// or file name). A table of a single id is about the model audited
    /// unless an id is given here.
    pub model_id: Option<String>,
    /// The model's default id when its path does not show it (a Hugging
    /// Face model's name); `None`: the name of its directory or file.
    pub default_id: Option<String>,
    /// The initialisation for claims of the distance measures
    /// (`frobenius_distance`, ...; `certify --init`); `None`: such claims
    /// are refused with a line saying so.
    pub init: Option<std::path::PathBuf>,
    /// The stack of a model of several (`certify --stack`: `decoder`, ...)
    /// whose matrices the claims are about; `None`: the first, as certify.
    pub stack: Option<String>,
}

impl AuditOptions {
    /// The certification options of the model's certificate and measures:
    /// `certify`'s defaults with this precision and stack.
    fn certify_options(&self) -> CertifyOptions {
        let mut o = CertifyOptions {
            precision: self.precision,
            ..CertifyOptions::default()
        };
        o.overrides.stack = self.stack.clone();
        o
    }
}

impl Default for AuditOptions {
    fn default() -> Self {
        Self {
            rtol: 0.0,
            atol: 0.0,
            precision: crate::linalg::Precision::F64,
            rounding_units: 1.0,
            model_id: None,
            default_id: None,
            init: None,
            stack: None,
        }
    }
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
    /// Why an inconsistent claim is what the authors' float64 computation
    /// gives (round-off values in place of exact zeros), stating the
    /// certified exact value and the size of the artefact
    /// (`crate::report::fidelity`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The whole audit.
#[derive(Clone, Debug, Serialize)]
pub struct AuditReport {
    /// Detected layout of the claims file.
    pub layout: String,
    /// `--rtol` used.
    pub rtol: f64,
    /// `--atol` used.
    pub atol: f64,
    /// Precision of the certified singular values.
    pub precision: String,
    /// Inconsistent claims whose gap is certainly within float32 rounding.
    pub within_float32_rounding: usize,
    /// Inconsistent claims whose gap is certainly within float64 rounding.
    pub within_float64_rounding: usize,
    /// Per claim.
    pub results: Vec<ClaimResult>,
    /// Counts.
    pub consistent: usize,
    /// Counts.
    pub inconsistent: usize,
    /// Counts.
    pub undecided: usize,
    /// The `model_id` whose rows were audited, when the table has that column.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_id: Option<String>,
    /// Rows of other models (another `model_id`): not this model's, not judged.
    pub other_models: usize,
    /// One line when claims are undecided for want of a tolerance (their
    /// printed digits finer than the certified intervals, with `--rtol` and
    /// `--atol` 0): the tolerance that a float64 table needs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl AuditReport {
    /// `Refuted` when a claim is inconsistent, else `Undecided` when a claim
    /// is undecided, else `Holds` (every claim consistent).
    pub fn answer(&self) -> Answer {
        Answer::of(self.inconsistent > 0, self.undecided > 0)
    }
}

/// Largest claims file read (bytes).
pub(crate) const MAX_CLAIMS_BYTES: u64 = 16 << 20;

/// A minimal CSV reader (RFC 4180 quoting) with a size limit.
pub(crate) fn parse_csv(text: &str, file: &str) -> Result<Vec<Vec<String>>, EvidenceError> {
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
    // The bounded parser (at most 4096 digits, |exponent| <= 4096).
    let d: crate::spectral::ExactDecimal = s.parse().ok()?;
    // Half a unit in the last printed digit: 5 * 10^(exp10 - 1).
    let half_unit = crate::spectral::ExactDecimal {
        negative: false,
        digits: "5".into(),
        exp10: d.exp10 - 1,
    };
    Some((d.to_rational(), half_unit.to_rational()))
}

/// The inconsistent verdict of claim `c` at certified distance `dist` from
/// the enclosure `[lo, hi]`, with its relative error and rounding verdict.
fn inconsistent(c: &Rational, dist: Rational, lo: f64, hi: f64, k: f64) -> Verdict {
    let rel = if *c != 0 {
        &dist / c.clone().abs()
    } else {
        Rational::from(0)
    };
    Verdict::Inconsistent {
        distance: dist.to_f64(),
        relative_error: rel.to_f64(),
        rounding: Some(rounding_of(c, lo, hi, k)),
    }
}

fn judge(c: &Rational, tol: &Rational, lo: f64, hi: f64, k: f64) -> Verdict {
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
        return inconsistent(c, dist, lo, hi, k);
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

/// A stated interval end, exactly: a decimal of at most 17 significant
/// digits names the binary64 value it rounds to (specbound's tables, like
/// numpy, print each binary64 end in the shortest decimal that reads back
/// as it); a longer decimal is taken as written.
fn stated_end(t: &str) -> Option<Rational> {
    let d: crate::spectral::ExactDecimal = t.parse().ok()?;
    let significant = d.digits.trim_start_matches('0').len();
    if significant <= 17 {
        let x: f64 = t.trim().parse().ok()?;
        if x.is_finite() {
            return Rational::from_f64(x);
        }
    }
    Some(d.to_rational())
}

/// The verdict on a claimed interval `[wlo, whi]` (value `c`): consistent
/// when the certified enclosure `[lo, hi]` lies inside it (so the exact
/// value does), inconsistent when the two are disjoint (the exact value is
/// outside the claim), undecided otherwise.
fn judge_stated(c: &Rational, wlo: &Rational, whi: &Rational, lo: f64, hi: f64, k: f64) -> Verdict {
    let (l, h) = (
        Rational::from_f64(lo).expect("finite"),
        Rational::from_f64(hi).expect("finite"),
    );
    if h < *wlo || l > *whi {
        let dist = if h < *wlo {
            Rational::from(wlo - &h)
        } else {
            Rational::from(&l - whi)
        };
        return inconsistent(c, dist, lo, hi, k);
    }
    if *wlo <= l && h <= *whi {
        Verdict::Consistent
    } else {
        Verdict::Undecided {
            width: Rational::from(&h - &l).to_f64(),
        }
    }
}

/// Certified facts about one matrix, for claims.
struct Facts {
    sv: SingularValues,
    summary: SpectralSummary,
}

fn facts_of_tensor(
    ck: &Checkpoint,
    name: &str,
    precision: crate::linalg::Precision,
) -> Result<Facts, String> {
    let m = ck.read(name).map_err(|e| e.to_string())?.matrix;
    let opts = SvdOptions {
        precision,
        ..SvdOptions::default()
    };
    let sv = certify_singular_values(&m, &opts)
        .map_err(|e| format!("tensor '{}': {e}", crate::io::escape(name)))?;
    let summary =
        summarize(&m, &sv).map_err(|e| format!("tensor '{}': {e}", crate::io::escape(name)))?;
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
    let two = || Interval::try_from((2.0, 2.0)).expect("finite");
    let need_p =
        || p.ok_or_else(|| format!("quantity '{}' needs a p column", crate::io::escape(q)));
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
            // The one bounded decimal parser; p = 0 (the rank) is decided on
            // the decimal itself, so a tiny p such as 1e-400 is not the rank.
            let sp = SchattenP::parse(need_p()?)?;
            let pv = sp.value;
            if sp.is_zero() {
                Interval::try_from((s.rank.lo as f64, s.rank.hi as f64)).expect("finite")
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
        // log10(x^2) as 2 log10(x), exactly as `spectra` encloses it, so
        // that its table audits against the model it came from.
        "log_norm" => two() * enc_iv(&s.frobenius_norm).log10(),
        "log_spectral_norm" => two() * enc_iv(&s.spectral_norm).log10(),
        "ww_stable_rank" => fro2 / sp2,
        // WeightWatcher's matrix_rank is a thresholded count, not the rank:
        // #{sigma_i > sigma_max N eps} with N the larger dimension and eps
        // float64's 2^-52 (its CPU path; RMT_Util.matrix_rank). Enclosed:
        // sure above the threshold's upper end, possibly above its lower.
        "ww_matrix_rank" => {
            let n = f.sv.rows.max(f.sv.cols) as f64;
            let eps = Interval::try_from((f64::EPSILON, f64::EPSILON)).expect("finite");
            let nn = Interval::try_from((n, n)).expect("finite");
            let t = enc_iv(&s.spectral_norm) * nn * eps;
            let over = |v: &&crate::linalg::CertifiedValue, lo: bool| {
                let e = enc_iv(&v.enclosure);
                if lo {
                    e.inf() > t.sup()
                } else {
                    e.sup() > t.inf()
                }
            };
            let sure = f.sv.values.iter().filter(|v| over(v, true)).count();
            let maybe = f.sv.values.iter().filter(|v| over(v, false)).count();
            Interval::try_from((sure as f64, maybe as f64)).expect("finite")
        }
        _ => return Err(format!("unknown quantity '{}'", crate::io::escape(q))),
    })
}

/// The spectral columns of `matrix_summary.csv` that are claims: a
/// matrix's own quantities, certified for every family (with a bound or
/// without).
const SUMMARY_COLUMNS: [&str; 9] = [
    "rows",
    "cols",
    "rank",
    "spectral_norm",
    "frobenius_norm",
    "nuclear_norm",
    "norm_21",
    "norm_11",
    "stable_rank",
];

/// The quantities of a proxy matrix that are not its own spectrum's:
/// certified only for a family with a bound ([`proxy_quantity`]).
const PROXY_QUANTITIES: [&str; 9] = [
    "alpha",
    "alpha_mh",
    "gamma",
    "scale",
    "scale_gamma_alpha_L",
    "min_contribution",
    "contribution",
    "p_grid_m",
    "p_opt",
];

/// The matrix named by the authors' columns and, for a mixture of
/// experts, the `expert` column (an index or `shared`; empty: no expert).
fn matrix_id(
    layer: usize,
    head: i64,
    kind: MatrixType,
    expert: Option<&str>,
) -> Result<MatrixId, String> {
    let id = MatrixId::from_columns(layer, head, kind)
        .ok_or_else(|| format!("no matrix layer {layer} head {head} {kind}"))?;
    let expert = match expert.map(str::trim) {
        None | Some("") => None,
        Some("shared") => Some(crate::arch::Expert::Shared),
        Some(e) => Some(
            e.parse::<usize>()
                .ok()
                .filter(|&i| i < crate::arch::MAX_EXPERTS)
                .map(crate::arch::Expert::Routed)
                .ok_or_else(|| {
                    format!(
                        "expert '{}' is neither an index below {} nor 'shared'",
                        crate::io::escape_to(e, 40),
                        crate::arch::MAX_EXPERTS
                    )
                })?,
        ),
    };
    Ok(MatrixId { expert, ..id })
}

/// A spectral quantity (`rows`, `cols` or a [`matrix_quantity`]) of
/// matrix `id` of the certified model, with a bound or without.
fn spectrum_quantity(
    c: &Certified,
    id: MatrixId,
    q: &str,
    p: Option<&str>,
) -> Result<Interval, String> {
    let r = c
        .results
        .binary_search_by_key(&id, |r| r.id)
        .map(|i| &c.results[i])
        .map_err(|_| format!("no matrix {id} in the model"))?;
    let count = |n: usize| Interval::try_from((n as f64, n as f64)).expect("finite");
    match q {
        "rows" => Ok(count(r.rows)),
        "cols" => Ok(count(r.cols)),
        other => matrix_quantity(
            &Facts {
                sv: r.sv.clone(),
                summary: r.summary.clone(),
            },
            other,
            p,
        ),
    }
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
    let grid_k = |p: &str| grid_index(p, m);
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

/// The grid index k of a claimed `p = k/m`: a decimal within half a unit
/// in its last printed digit of exactly one `k/m`, or the binary64 number
/// nearest `k/m` as float64 tables print it (`0.16666666666666666` for
/// 2/12: the decimal that reads back as the float `fl(k/m)`).
fn grid_index(p: &str, m: usize) -> Result<usize, String> {
    let (v, tol) = parse_claim(p).ok_or("invalid p")?;
    let as_f64 = p.trim().parse::<f64>().ok();
    // A decimal that reads back as exactly fl(k/m) names k (certify --csv
    // writes p so: `0` is 0/m, not a window of half a unit around 0).
    let exact: Vec<usize> = (0..=2 * m)
        .filter(|&k| as_f64 == Some(k as f64 / m as f64))
        .collect();
    if let [k] = exact.as_slice() {
        return Ok(*k);
    }
    let hits: Vec<usize> = (0..=2 * m)
        .filter(|&k| {
            Rational::from(&Rational::from((k as u32, m as u32)) - &v).abs() <= tol
                || as_f64 == Some(k as f64 / m as f64)
        })
        .collect();
    match hits.as_slice() {
        [k] => Ok(*k),
        [] => Err(format!("p = {p} is not a point of the grid P_{m}")),
        _ => Err(format!(
            "p = {p} is too coarse to name one point of the grid P_{m}"
        )),
    }
}

/// The fidelity note of an inconsistent proxy claim (contribution,
/// min_contribution), if the authors' float artefact explains it.
fn proxy_note(
    c: &Certificate,
    l: usize,
    h: i64,
    k: MatrixType,
    quantity: &str,
    p: Option<&str>,
    claim: &str,
) -> Option<String> {
    let w = &c.matrices[find_matrix(c, l, h, k).ok()?];
    let (n, m) = (c.model.hidden, c.parameters.grid_m);
    let v: f64 = claim.trim().parse().ok()?;
    match quantity {
        "contribution" => fidelity::explain_contribution(w, n, m, grid_index(p?, m).ok()?, v),
        "min_contribution" => fidelity::explain_min_contribution(w, n, m, v),
        _ => None,
    }
}

/// Index of a proxy matrix given in the authors' columns (`head = -1` for layer matrices).
fn find_matrix(
    cert: &Certificate,
    layer: usize,
    head: i64,
    kind: MatrixType,
) -> Result<usize, String> {
    let missing = || match &cert.bound_absent {
        Some(why) => format!(
            "the model has no bound, so no proxies to audit (its certificate states spectra \
             only; `specbound verify` checks them): {}",
            crate::io::escape_to(why, 400)
        ),
        None => format!("no proxy matrix layer {layer} head {head} {kind}"),
    };
    let id = MatrixId::from_columns(layer, head, kind).ok_or_else(missing)?;
    cert.position(id).ok_or_else(missing)
}

fn kind_of(s: &str) -> Result<MatrixType, String> {
    MatrixType::parse(s.trim()).ok_or_else(|| {
        format!(
            "unknown matrix_type '{}' ({})",
            crate::io::escape(s),
            MatrixType::NAMES
        )
    })
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
    let (v, tol) = parse_claim(claim)
        .ok_or_else(|| format!("'{}' is not a decimal number", crate::io::escape(claim)))?;
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
            rounding: None,
        }
    } else if opt.len() == 1 {
        Verdict::Consistent
    } else {
        Verdict::Undecided { width: hi - lo }
    };
    let name = c.matrices[idx].id().to_string();
    let note = match (&verdict, hits.as_slice()) {
        (Verdict::Inconsistent { .. }, [j]) => {
            fidelity::explain_p_opt(&c.matrices[idx], c.model.hidden, m, *j)
        }
        _ => None,
    };
    Ok(ClaimResult {
        line: 0,
        subject: name,
        quantity: "p_opt".into(),
        claim: claim.to_string(),
        tolerance: tol.to_f64(),
        certified: [lo, hi],
        verdict,
        note,
    })
}

fn ensure_cert<'a>(
    slot: &'a mut Option<Certified>,
    model: &Path,
    opts: &AuditOptions,
    progress: &dyn Progress,
) -> Result<&'a Certified, EvidenceError> {
    if slot.is_none() {
        let copts = opts.certify_options();
        let (cert, results) = match certify_run(model, &copts, &RunScope::default(), progress)
            .map_err(|e| EvidenceError::Model(e.to_string()))?
            .and_then(Run::into_certificate)
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
        // In certificate order (by id): looked up by binary search.
        let mut results = results;
        results.sort_by_key(|r| r.id);
        *slot = Some(Certified { cert, results });
    }
    Ok(slot.as_ref().expect("just set"))
}

/// The model's raw weights and measures (`certify --measures`, with
/// `opts.init` as `--init`), certified on first use.
fn ensure_measures<'a>(
    slot: &'a mut Option<MeasuresRun>,
    model: &Path,
    opts: &AuditOptions,
    progress: &dyn Progress,
) -> Result<&'a MeasuresRun, EvidenceError> {
    if slot.is_none() {
        let copts = opts.certify_options();
        let run = match certify_measures(model, opts.init.as_deref(), &copts, progress)
            .map_err(|e| EvidenceError::Model(e.to_string()))?
        {
            Outcome::Certified(x) => x,
            Outcome::Inconclusive(i) => {
                return Err(EvidenceError::Model(format!(
                    "{}: the measures could not be certified: {}",
                    model.display(),
                    i.reason
                )))
            }
        };
        *slot = Some(run);
    }
    Ok(slot.as_ref().expect("just set"))
}

/// The names of the measures (`docs/measures.md`), those needing the
/// initialisation last: the study's names without the two bounds.
pub(crate) const MEASURE_NAMES: &[&str] = crate::report::measures::QUANTITY_NAMES.split_at(2).1;

/// The certified interval of measure `name` in `m`, or why there is none.
fn measure_quantity(m: &MeasuresRun, name: &str, init: bool) -> Result<Interval, String> {
    let idx = MEASURE_NAMES
        .iter()
        .position(|n| *n == name)
        .ok_or_else(|| {
            format!(
                "unknown measure '{}' (one of {})",
                crate::io::escape(name),
                MEASURE_NAMES.join(", ")
            )
        })?;
    if idx >= 8 && !init {
        return Err(format!(
            "{name} needs the initialisation: pass --init MODEL"
        ));
    }
    m.measures
        .stated()
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, x)| iv(x))
        .ok_or_else(|| format!("{name}: not certified finite for this model (docs/measures.md)"))
}

/// The certified norm `q` of the raw weight `role` of `layer`.
fn raw_weight_quantity(
    m: &MeasuresRun,
    layer: usize,
    role: &str,
    q: &str,
) -> Result<Interval, String> {
    let w = m
        .raw_weights
        .iter()
        .find(|w| w.layer == layer && w.role == role)
        .ok_or_else(|| {
            format!(
                "no raw weight '{}' in layer {layer} (query, key, value, output, ffn_gate, ffn_in, ffn_out)",
                crate::io::escape(role)
            )
        })?;
    let dist = || {
        w.init_distance
            .ok_or_else(|| format!("{q} needs the initialisation: pass --init MODEL"))
    };
    Ok(iv(match q {
        "spectral_norm" => w.spectral_norm,
        "frobenius_norm" => w.frobenius_norm,
        "norm_21_rows" => w.norm_21_rows,
        "init_distance_spectral_norm" => dist()?.spectral_norm,
        "init_distance_frobenius_norm" => dist()?.frobenius_norm,
        "init_distance_norm_21_rows" => dist()?.norm_21_rows,
        other => {
            return Err(format!(
                "unknown raw-weight quantity '{}'",
                crate::io::escape(other)
            ))
        }
    }))
}

/// The interval columns of `spectra --csv` that are audited (each a
/// quantity of [`matrix_quantity`]; the Schatten columns, named by their
/// `p`, are not).
const SPECTRA_COLUMNS: [&str; 12] = crate::report::csv::SPECTRA_QUANTITIES;

/// The raw-weight norm columns a `raw_weights` table may carry.
const RAW_WEIGHT_COLUMNS: [&str; 6] = [
    "spectral_norm",
    "frobenius_norm",
    "norm_21_rows",
    "init_distance_spectral_norm",
    "init_distance_frobenius_norm",
    "init_distance_norm_21_rows",
];

/// The tensor a WeightWatcher row is about. WeightWatcher writes the
/// module's short name in `name` (`query`, `dense`: one name for many
/// layers) and its path in `longname` (`encoder.layer.0.attention.self.query`),
/// so `longname` decides when the table has it, `name` otherwise (tables of
/// state dicts, where the two agree). A module path names its `.weight`; a
/// path that carries a wrapper's prefix the checkpoint lacks
/// (`0.auto_model.` of sentence-transformers) or lacks one the checkpoint
/// has (`bert.`) names the one tensor it is a dotted suffix of, or of which
/// it is; two candidates are refused as ambiguous, never guessed.
fn ww_tensor(
    ck: &Checkpoint,
    longname: Option<&str>,
    name: Option<&str>,
) -> Result<String, String> {
    let key = longname
        .or(name)
        .ok_or("missing name (and longname)")?
        .trim()
        .to_string();
    for exact in [format!("{key}.weight"), key.clone()] {
        if ck.contains(&exact) {
            return Ok(exact);
        }
    }
    let dotted = |a: &str, b: &str| a == b || a.ends_with(&format!(".{b}"));
    let hits: Vec<&str> = ck
        .names()
        .filter(|t| {
            let module = t.strip_suffix(".weight").unwrap_or(t);
            dotted(t, &key) || dotted(module, &key) || dotted(&key, module)
        })
        .collect();
    let shown = crate::io::escape(&key);
    match hits.as_slice() {
        [one] => Ok(one.to_string()),
        [] => Err(format!(
            "no tensor named '{shown}' or '{shown}.weight' (nor one it is a dotted suffix of){}",
            if longname.is_none() {
                "; WeightWatcher's full module path is its longname column"
            } else {
                ""
            }
        )),
        many => Err(format!(
            "'{shown}' names {} tensors ({}, ...){}",
            many.len(),
            crate::io::escape(many[0]),
            if longname.is_none() {
                ": WeightWatcher's name is the module's short name; keep the table's longname column"
            } else {
                ""
            }
        )),
    }
}

/// The layouts of a claims table, told apart by their header
/// ([`ClaimsLayout::detect`], once per table); each has its own reader of
/// a row's claims ([`ClaimsLayout::claims_of_row`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClaimsLayout {
    /// `layer,role` and norm columns (the raw weights of `certify --measures`).
    RawWeights,
    /// `measure,value` rows.
    Measures,
    /// A column per measure.
    MeasuresWide,
    /// A WeightWatcher details table.
    WeightWatcher,
    /// sigma_i by `rank_index` (`spectra --singular-values`, the study's).
    SingularValues,
    /// specbound's `spectra.csv`: stated intervals.
    Spectra,
    /// `model_id,bound,value` (the study's observed bounds).
    ObservedBounds,
    /// `certify --csv`'s contributions per `p`.
    PContributionRaw,
    /// `certify --csv`'s minimisers.
    SchattenOpt,
    /// `certify --csv`'s matrix summary.
    MatrixSummary,
    /// `tensor` or `layer,head,matrix_type`; `quantity`; `[p]`; `value`; `[tolerance]`.
    Generic,
}

impl ClaimsLayout {
    /// The layout of a table with this header, tried in this order (the
    /// first that fits wins); `None` when none fits.
    fn detect(header: &Header) -> Option<ClaimsLayout> {
        let has = |n: &str| header.has(n);
        Some(
            if has("role") && has("layer") && RAW_WEIGHT_COLUMNS.iter().any(|q| has(q)) {
                ClaimsLayout::RawWeights
            } else if has("measure") && has("value") {
                ClaimsLayout::Measures
            } else if MEASURE_NAMES.iter().any(|q| has(q)) && !has("matrix_type") {
                ClaimsLayout::MeasuresWide
            } else if has("layer_id")
                && has("name")
                && (has("log_spectral_norm") || has("lambda_max") || has("sv_max"))
            {
                ClaimsLayout::WeightWatcher
            } else if has("rank_index") && has("sigma") && (has("tensor") || has("matrix_type")) {
                ClaimsLayout::SingularValues
            } else if has("tensor") && has("status") && has("spectral_norm_lo") {
                ClaimsLayout::Spectra
            } else if has("model_id") && has("bound") && has("value") {
                ClaimsLayout::ObservedBounds
            } else if has("matrix_type") && has("contribution") && has("p") {
                ClaimsLayout::PContributionRaw
            } else if has("matrix_type") && has("min_contribution") {
                ClaimsLayout::SchattenOpt
            } else if has("matrix_type") && has("spectral_norm") {
                ClaimsLayout::MatrixSummary
            } else if has("quantity") && has("value") && (has("tensor") || has("matrix_type")) {
                ClaimsLayout::Generic
            } else {
                return None;
            },
        )
    }

    /// The layout's name ([`AuditReport::layout`]).
    fn name(self) -> &'static str {
        match self {
            ClaimsLayout::RawWeights => "raw_weights",
            ClaimsLayout::Measures => "measures",
            ClaimsLayout::MeasuresWide => "measures_wide",
            ClaimsLayout::WeightWatcher => "weightwatcher",
            ClaimsLayout::SingularValues => "singular_values",
            ClaimsLayout::Spectra => "spectra",
            ClaimsLayout::ObservedBounds => "observed_bounds",
            ClaimsLayout::PContributionRaw => "p_contribution_raw",
            ClaimsLayout::SchattenOpt => "schatten_opt",
            ClaimsLayout::MatrixSummary => "matrix_summary",
            ClaimsLayout::Generic => "generic",
        }
    }

    /// The column whose `_lo` and `_hi` companions state the interval of a
    /// claim of `quantity`, when the table has them.
    fn value_column(self, quantity: &str) -> &str {
        match self {
            ClaimsLayout::ObservedBounds | ClaimsLayout::Measures | ClaimsLayout::Generic => {
                "value"
            }
            ClaimsLayout::SingularValues => "sigma",
            _ => quantity,
        }
    }

    /// The claims of one row, in the order of its columns (a `p_opt` of
    /// the schatten_opt layout is judged apart: [`judge_p_opt`]).
    fn claims_of_row(self, row: &Row) -> Vec<RawClaim> {
        match self {
            ClaimsLayout::MatrixSummary => proxy_columns(row, &SUMMARY_COLUMNS),
            ClaimsLayout::SchattenOpt => proxy_columns(row, &SCHATTEN_OPT_COLUMNS),
            ClaimsLayout::PContributionRaw => p_contribution_claims(row),
            ClaimsLayout::Measures => measures_claims(row),
            ClaimsLayout::MeasuresWide => columns(row, Subject::Measure, MEASURE_NAMES),
            ClaimsLayout::RawWeights => columns(row, Subject::Raw, &RAW_WEIGHT_COLUMNS),
            ClaimsLayout::Spectra => spectra_claims(row),
            ClaimsLayout::SingularValues => singular_value_claims(row),
            ClaimsLayout::ObservedBounds => observed_bound_claims(row),
            ClaimsLayout::Generic => generic_claims(row),
            ClaimsLayout::WeightWatcher => weightwatcher_claims(row),
        }
    }

    /// The quantity of `row` that needs the initialisation (a distance
    /// measure, an `init_distance_*` norm), if any.
    fn init_claim_of_row(self, row: &Row) -> Option<String> {
        let distance = &MEASURE_NAMES[8..];
        let first_stated = |names: &[&str]| {
            names
                .iter()
                .find(|n| row.cell(n).is_some())
                .map(|n| n.to_string())
        };
        match self {
            ClaimsLayout::Measures => row
                .cell("measure")
                .filter(|n| distance.contains(&n.as_str()) && row.cell("value").is_some()),
            ClaimsLayout::MeasuresWide => first_stated(distance),
            ClaimsLayout::RawWeights => first_stated(&RAW_WEIGHT_COLUMNS[3..]),
            _ => None,
        }
    }
}

/// The columns of the schatten_opt layout claimed of a proxy matrix
/// (`p_opt` apart).
const SCHATTEN_OPT_COLUMNS: [&str; 5] = [
    "alpha_mh",
    "gamma",
    "scale_gamma_alpha_L",
    "p_grid_m",
    "min_contribution",
];

/// A claims table's header (trimmed, a byte-order mark removed).
struct Header(Vec<String>);

impl Header {
    /// The first column named `n`.
    fn col(&self, n: &str) -> Option<usize> {
        self.0.iter().position(|h| h == n)
    }

    fn has(&self, n: &str) -> bool {
        self.col(n).is_some()
    }
}

/// One row of a claims table, read by column name.
#[derive(Clone, Copy)]
struct Row<'a> {
    header: &'a Header,
    cells: &'a [String],
}

impl Row<'_> {
    /// The cell of column `n`, trimmed; `None` when absent or empty.
    fn cell(&self, n: &str) -> Option<String> {
        self.header
            .col(n)
            .and_then(|c| self.cells.get(c))
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    }

    /// `(layer, head, matrix type)` of a row about a proxy matrix.
    fn proxy_subject(&self) -> Result<(usize, i64, MatrixType), String> {
        let l = self
            .cell("layer")
            .ok_or("missing layer")?
            .parse::<usize>()
            .map_err(|_| "bad layer".to_string())?;
        let h = self
            .cell("head")
            .ok_or("missing head")?
            .parse::<i64>()
            .map_err(|_| "bad head".to_string())?;
        let k = kind_of(&self.cell("matrix_type").ok_or("missing matrix_type")?)?;
        Ok((l, h, k))
    }
}

/// What a claim is about, which says where its certified value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Subject {
    /// A proxy matrix (`layer,head,matrix_type`) of the model's certificate.
    Proxy,
    /// A measure of the model (`docs/measures.md`).
    Measure,
    /// A norm of a layer's raw weights.
    Raw,
    /// A bound of the model's certificate.
    Bound,
    /// A named tensor.
    Tensor,
    /// A WeightWatcher row's tensor (by `longname` or `name`).
    Ww,
}

/// One claim of a row, before it is judged.
struct RawClaim {
    subject: Subject,
    quantity: String,
    /// `p` of sigma_i, a Schatten norm or a contribution.
    p: Option<String>,
    /// The claimed value as written.
    claim: String,
    /// The row's explicit tolerance.
    tol: Option<String>,
}

fn raw_claim(
    subject: Subject,
    quantity: impl Into<String>,
    p: Option<String>,
    claim: String,
    tol: Option<String>,
) -> RawClaim {
    RawClaim {
        subject,
        quantity: quantity.into(),
        p,
        claim,
        tol,
    }
}

/// A claim of `subject` for each of `names` the row states.
fn columns(row: &Row, subject: Subject, names: &[&str]) -> Vec<RawClaim> {
    names
        .iter()
        .filter_map(|&q| {
            let v = row.cell(q)?;
            Some(raw_claim(subject, q, None, v, row.cell("tolerance")))
        })
        .collect()
}

fn proxy_columns(row: &Row, names: &[&str]) -> Vec<RawClaim> {
    columns(row, Subject::Proxy, names)
}

fn p_contribution_claims(row: &Row) -> Vec<RawClaim> {
    let Some(v) = row.cell("contribution") else {
        return Vec::new();
    };
    vec![raw_claim(
        Subject::Proxy,
        "contribution",
        row.cell("p"),
        v,
        row.cell("tolerance"),
    )]
}

fn measures_claims(row: &Row) -> Vec<RawClaim> {
    let Some(v) = row.cell("value") else {
        return Vec::new();
    };
    let name = row.cell("measure").unwrap_or_default();
    vec![raw_claim(
        Subject::Measure,
        name,
        None,
        v,
        row.cell("tolerance"),
    )]
}

/// specbound's own spectra.csv: every value a stated interval (`X_lo`,
/// `X_hi`), judged by containment; rows of slices of higher-rank tensors
/// and rows not certified are not claims.
fn spectra_claims(row: &Row) -> Vec<RawClaim> {
    if row.cell("status").as_deref() != Some("certified") || row.cell("slice").is_some() {
        return Vec::new();
    }
    SPECTRA_COLUMNS
        .iter()
        .filter_map(|&q| {
            let lo = row.cell(&format!("{q}_lo"))?;
            Some(raw_claim(Subject::Tensor, q, None, lo, None))
        })
        .collect()
}

/// `spectra --singular-values`' table (by tensor) and the study's (by
/// proxy matrix): sigma_i with i = rank_index, from 1; rows of slices are
/// not claims (as in spectra.csv), nor is the study's `sigma_normalized`.
fn singular_value_claims(row: &Row) -> Vec<RawClaim> {
    let (None, Some(v)) = (row.cell("slice"), row.cell("sigma")) else {
        return Vec::new();
    };
    let subject = if row.cell("tensor").is_some() {
        Subject::Tensor
    } else {
        Subject::Proxy
    };
    vec![raw_claim(
        subject,
        "sigma_i",
        row.cell("rank_index"),
        v,
        row.cell("tolerance"),
    )]
}

fn observed_bound_claims(row: &Row) -> Vec<RawClaim> {
    let Some(v) = row.cell("value") else {
        return Vec::new();
    };
    vec![raw_claim(
        Subject::Bound,
        row.cell("bound").unwrap_or_default(),
        None,
        v,
        row.cell("tolerance"),
    )]
}

fn generic_claims(row: &Row) -> Vec<RawClaim> {
    let Some(v) = row.cell("value") else {
        return Vec::new();
    };
    let subject = if row.cell("tensor").is_some() {
        Subject::Tensor
    } else if row.cell("matrix_type").is_some() {
        Subject::Proxy
    } else {
        Subject::Bound
    };
    vec![raw_claim(
        subject,
        row.cell("quantity").unwrap_or_default(),
        row.cell("p"),
        v,
        row.cell("tolerance"),
    )]
}

/// WeightWatcher's columns and the quantities they claim: its
/// spectral_norm is sigma_max^2, its norm ||W||_F^2.
const WEIGHTWATCHER_COLUMNS: [(&str, &str); 9] = [
    ("sv_max", "sv_max"),
    ("sv_min", "sv_min"),
    ("spectral_norm", "ww_spectral_norm"),
    ("lambda_max", "lambda_max"),
    ("norm", "norm"),
    ("log_norm", "log_norm"),
    ("log_spectral_norm", "log_spectral_norm"),
    ("stable_rank", "ww_stable_rank"),
    ("matrix_rank", "ww_matrix_rank"),
];

fn weightwatcher_claims(row: &Row) -> Vec<RawClaim> {
    WEIGHTWATCHER_COLUMNS
        .iter()
        .filter_map(|&(wq, q)| {
            let v = row.cell(wq).filter(|v| !v.eq_ignore_ascii_case("nan"))?;
            Some(raw_claim(Subject::Ww, q, None, v, row.cell("tolerance")))
        })
        .collect()
}

/// The first claim (1-based line, quantity) of the rows audited (`selected`
/// model's, when a table holds several) that needs the initialisation: a
/// distance measure of a `measures` or `measures_wide` table, an
/// `init_distance_*` norm of a `raw_weights` table; `None` when none does.
/// Found before anything is computed, so that a table needing `--init`
/// without it is refused at once.
fn first_init_claim(
    rows: &[Vec<String>],
    header: &Header,
    layout: ClaimsLayout,
    selected: Option<&str>,
) -> Option<(usize, String)> {
    rows.iter().enumerate().skip(1).find_map(|(i, cells)| {
        let row = Row { header, cells };
        if selected.is_some_and(|id| row.cell("model_id").as_deref() != Some(id)) {
            return None;
        }
        layout.init_claim_of_row(&row).map(|n| (i + 1, n))
    })
}

/// Runs an audit of `claims` against `model`: every claim's window is its
/// `tolerance` column when the layout has one, else the larger of half a
/// unit in its last printed digit and `atol + rtol |c|`; `progress` hears
/// of the model's certification and of each tensor certified.
pub(crate) fn audit_with(
    model: &Path,
    claims: &Path,
    opts: &AuditOptions,
    progress: &dyn Progress,
) -> Result<AuditReport, EvidenceError> {
    // Capped while reading: `/dev/zero` or a FIFO is refused at the cap.
    let text = crate::io::limits::read_capped_string(claims, MAX_CLAIMS_BYTES, "claims file")
        .map_err(EvidenceError::Read)?;
    audit_text(model, &text, claims, opts, progress)
}

/// [`audit_with`] on the text of a claims CSV that is not a file (a pandas
/// DataFrame's `to_csv()`), at most [`MAX_CLAIMS_BYTES`]; `claims` names it
/// in messages.
pub(crate) fn audit_text(
    model: &Path,
    text: &str,
    claims: &Path,
    opts: &AuditOptions,
    progress: &dyn Progress,
) -> Result<AuditReport, EvidenceError> {
    let cfile = claims.display().to_string();
    if text.len() as u64 > MAX_CLAIMS_BYTES {
        return Err(EvidenceError::Malformed {
            file: cfile,
            at: "whole table".into(),
            message: format!("larger than {MAX_CLAIMS_BYTES} bytes"),
        });
    }
    let rows = parse_csv(text, &cfile)?;
    let header = header_of(&rows, &cfile)?;
    let layout = ClaimsLayout::detect(&header).ok_or_else(|| unrecognised_header(&cfile))?;
    let ck = Checkpoint::open(model).map_err(|e| EvidenceError::Model(e.to_string()))?;
    let selected = selected_model(&rows, &header, model, opts);
    if opts.init.is_none() {
        if let Some((line, q)) = first_init_claim(&rows, &header, layout, selected.as_deref()) {
            return Err(bad_line(
                claims,
                line,
                format!(
                    "{} needs the initialisation: pass --init MODEL (nothing was computed)",
                    crate::io::escape(&q)
                ),
            ));
        }
    }
    let mut auditor = Auditor {
        model,
        claims,
        opts,
        progress,
        ck,
        cert: None,
        meas: None,
        tensors: HashMap::new(),
    };
    let mut tally = Tally::default();
    for (i, cells) in rows.iter().enumerate().skip(1) {
        let row = Row {
            header: &header,
            cells,
        };
        if let Some(id) = &selected {
            if row.cell("model_id").as_deref() != Some(id.as_str()) {
                tally.other_models += 1;
                continue;
            }
        }
        auditor.audit_row(layout, i + 1, &row, &mut tally)?;
    }
    // A file with nothing to check (header only, every value empty, no
    // value column) must not pass as "consistent": a truncated claims file
    // would pass a CI gate.
    if tally.results.is_empty() {
        return Err(no_claim(&cfile, rows.len(), layout, &selected, &tally));
    }
    Ok(tally.into_report(layout, opts, selected))
}

/// The header of a claims table (its first row), trimmed, without a
/// byte-order mark.
fn header_of(rows: &[Vec<String>], cfile: &str) -> Result<Header, EvidenceError> {
    let first = rows.first().ok_or_else(|| EvidenceError::Malformed {
        file: cfile.to_string(),
        at: "line 1".into(),
        message: "empty claims file".into(),
    })?;
    Ok(Header(
        first
            .iter()
            .map(|h| h.trim().trim_start_matches('\u{feff}').to_string())
            .collect(),
    ))
}

fn unrecognised_header(cfile: &str) -> EvidenceError {
    EvidenceError::Malformed {
        file: cfile.to_string(),
        at: "line 1".into(),
        message: "unrecognised header: expected one of the certify --csv layouts, the generic layout \
                  (tensor or layer,head,matrix_type; quantity; [p]; value; [tolerance]), a WeightWatcher details CSV, \
                  a spectra or singular-values table (tensor or layer,head,matrix_type; rank_index; sigma), \
                  a measures table (measure,value or a column per measure) or a raw-weights table (layer,role,norm columns)".into(),
    }
}

/// A malformed claim at `line` of `claims`.
fn bad_line(claims: &Path, line: usize, message: String) -> EvidenceError {
    EvidenceError::Malformed {
        file: claims.display().to_string(),
        at: format!("line {line}"),
        message,
    }
}

/// The `model_id` whose rows are audited. A multi-model table (several
/// model_id values, as a study's tables and the authors' are): only this
/// model's rows are claims about it. A table of one model_id is about the
/// model audited, whatever its id, unless an id was asked for (`None`:
/// every row is audited).
fn selected_model(
    rows: &[Vec<String>],
    header: &Header,
    model: &Path,
    opts: &AuditOptions,
) -> Option<String> {
    let ids: std::collections::BTreeSet<&str> = header
        .col("model_id")
        .map(|c| {
            rows.iter()
                .skip(1)
                .filter_map(|r| r.get(c).map(|s| s.trim()))
                .collect()
        })
        .unwrap_or_default();
    (ids.len() > 1 || (opts.model_id.is_some() && !ids.is_empty())).then(|| {
        opts.model_id
            .clone()
            .or_else(|| opts.default_id.clone())
            .unwrap_or_else(|| crate::io::model_ref::default_id_of_path(model))
    })
}

/// The error of a table with no claim to check.
fn no_claim(
    cfile: &str,
    rows: usize,
    layout: ClaimsLayout,
    selected: &Option<String>,
    tally: &Tally,
) -> EvidenceError {
    let other_models = tally.other_models;
    let whose = match selected {
        Some(id) if other_models > 0 => format!(
            "; {other_models} rows are of other models, none of model_id '{}' (pass --model-id)",
            crate::io::escape(id)
        ),
        _ => String::new(),
    };
    EvidenceError::Malformed {
        file: crate::io::escape(cfile).into_owned(),
        at: format!("lines 2-{}", rows.max(2)),
        message: format!(
            "no claim to check ({} data rows, none with a value in the {} layout{whose}): \
             an audit needs at least one claim",
            rows.saturating_sub(1),
            layout.name()
        ),
    }
}

/// What the rows audited so far came to.
#[derive(Default)]
struct Tally {
    results: Vec<ClaimResult>,
    /// Rows of other models (not judged).
    other_models: usize,
    /// Undecided claims judged by their printed digits alone (for the hint).
    digits_only: usize,
}

impl Tally {
    fn into_report(
        self,
        layout: ClaimsLayout,
        opts: &AuditOptions,
        selected: Option<String>,
    ) -> AuditReport {
        let results = self.results;
        let count = |f: fn(&Verdict) -> bool| results.iter().filter(|r| f(&r.verdict)).count();
        let within = |f32: bool| {
            results
                .iter()
                .filter(|r| match &r.verdict {
                    Verdict::Inconsistent {
                        rounding: Some(x), ..
                    } => {
                        let g = if f32 { &x.float32 } else { &x.float64 };
                        g.verdict == RoundingVerdict::Within && (!f32 || x.float32_value)
                    }
                    _ => false,
                })
                .count()
        };
        AuditReport {
            layout: layout.name().to_string(),
            rtol: opts.rtol,
            atol: opts.atol,
            precision: opts.precision.to_string(),
            within_float32_rounding: within(true),
            within_float64_rounding: within(false),
            consistent: count(|v| matches!(v, Verdict::Consistent)),
            inconsistent: count(|v| matches!(v, Verdict::Inconsistent { .. })),
            undecided: count(|v| matches!(v, Verdict::Undecided { .. })),
            hint: tolerance_hint(self.digits_only, opts),
            results,
            model_id: selected,
            other_models: self.other_models,
        }
    }
}

/// One audit's model, opened once, and what is certified of it on first
/// need: the certificate, the measures, tensors by name.
struct Auditor<'a> {
    model: &'a Path,
    claims: &'a Path,
    opts: &'a AuditOptions,
    progress: &'a dyn Progress,
    ck: Checkpoint,
    cert: Option<Certified>,
    meas: Option<MeasuresRun>,
    tensors: HashMap<String, Facts>,
}

impl Auditor<'_> {
    /// Judges the claims of one row (at `line`), in order, into `tally`.
    fn audit_row(
        &mut self,
        layout: ClaimsLayout,
        line: usize,
        row: &Row,
        tally: &mut Tally,
    ) -> Result<(), EvidenceError> {
        let claims = layout.claims_of_row(row);
        if let (ClaimsLayout::SchattenOpt, Some(v)) = (layout, row.cell("p_opt")) {
            let file = self.claims;
            let bad = |e: String| bad_line(file, line, e);
            let (l, h, k) = row.proxy_subject().map_err(bad)?;
            let c = ensure_cert(&mut self.cert, self.model, self.opts, self.progress)?;
            let r = judge_p_opt(&c.cert, l, h, k, &v).map_err(bad)?;
            tally.results.push(r.at(line));
        }
        for raw in claims {
            let (result, digits_only) = self.judge_claim(layout, line, row, raw)?;
            tally.digits_only += usize::from(digits_only);
            tally.results.push(result);
        }
        Ok(())
    }

    /// Judges one claim; `true` beside it when it is undecided on its
    /// printed digits alone (no tolerance, no stated interval).
    fn judge_claim(
        &mut self,
        layout: ClaimsLayout,
        line: usize,
        row: &Row,
        raw: RawClaim,
    ) -> Result<(ClaimResult, bool), EvidenceError> {
        let file = self.claims;
        let bad = |e: String| bad_line(file, line, e);
        // A table that states the interval beside the value (`X_lo`,
        // `X_hi`, as every table specbound writes) claims the interval:
        // judged by containment, not by the value's printed digits.
        let column = layout.value_column(&raw.quantity);
        let stated = match raw.tol {
            None => stated_interval(row, column).map_err(bad)?,
            Some(_) => None,
        };
        let (c, default_tol) = parse_claim(&raw.claim).ok_or_else(|| {
            bad(format!(
                "'{}' is not a decimal number",
                crate::io::escape(&raw.claim)
            ))
        })?;
        let tol_r = claim_tolerance(&c, default_tol, raw.tol.as_deref(), self.opts).map_err(bad)?;
        let (subject, iv) = self.certified(line, row, &raw)?;
        let e = Enclosure::from_interval(iv)
            .ok_or_else(|| bad(format!("{}: no finite certified enclosure", raw.quantity)))?;
        let k = self.opts.rounding_units;
        let mut verdict = match &stated {
            Some((l, h)) => {
                let t = widening(&c, self.opts);
                judge_stated(&c, &(l - t.clone()), &(h + t), e.lo(), e.hi(), k)
            }
            None => judge(&c, &tol_r, e.lo(), e.hi(), k),
        };
        let note = self.note(&verdict, row, &raw);
        if let Verdict::Inconsistent {
            rounding: Some(r), ..
        } = &mut verdict
        {
            r.float32_value = float32_value(&raw.claim);
        }
        let digits_only =
            raw.tol.is_none() && stated.is_none() && matches!(verdict, Verdict::Undecided { .. });
        let result = ClaimResult {
            line,
            subject,
            quantity: raw.quantity,
            claim: raw.claim,
            tolerance: stated.as_ref().map_or_else(
                || tol_r.to_f64(),
                |(l, h)| (Rational::from(h - l) / 2u32).to_f64(),
            ),
            certified: [e.lo(), e.hi()],
            verdict,
            note,
        };
        Ok((result, digits_only))
    }

    /// The subject's name and the certified enclosure of the claimed quantity.
    fn certified(
        &mut self,
        line: usize,
        row: &Row,
        raw: &RawClaim,
    ) -> Result<(String, Interval), EvidenceError> {
        let file = self.claims;
        let bad = |e: String| bad_line(file, line, e);
        let (q, p) = (raw.quantity.as_str(), raw.p.as_deref());
        match raw.subject {
            Subject::Proxy => self.proxy(line, row, q, p),
            Subject::Measure => {
                let m = ensure_measures(&mut self.meas, self.model, self.opts, self.progress)?;
                let iv = measure_quantity(m, q, self.opts.init.is_some()).map_err(bad)?;
                Ok(("model".to_string(), iv))
            }
            Subject::Raw => {
                let layer = row
                    .cell("layer")
                    .and_then(|l| l.parse::<usize>().ok())
                    .ok_or_else(|| bad("missing or bad layer".into()))?;
                let role = row.cell("role").unwrap_or_default();
                let m = ensure_measures(&mut self.meas, self.model, self.opts, self.progress)?;
                let iv = raw_weight_quantity(m, layer, &role, q).map_err(bad)?;
                Ok((format!("layer {layer} {}", crate::io::escape(&role)), iv))
            }
            Subject::Bound => self.bound(line, q),
            Subject::Tensor | Subject::Ww => {
                let name = if raw.subject == Subject::Ww {
                    ww_tensor(
                        &self.ck,
                        row.cell("longname").as_deref(),
                        row.cell("name").as_deref(),
                    )
                    .map_err(bad)?
                } else {
                    row.cell("tensor").expect("tensor subject")
                };
                if !self.tensors.contains_key(&name) {
                    self.progress
                        .message(&format!("tensor {}", crate::io::escape(&name)));
                    let f = facts_of_tensor(&self.ck, &name, self.opts.precision).map_err(bad)?;
                    self.tensors.insert(name.clone(), f);
                }
                let iv = matrix_quantity(&self.tensors[&name], q, p).map_err(bad)?;
                Ok((name, iv))
            }
        }
    }

    /// A claim about a proxy matrix: a spectral quantity is the matrix's,
    /// whether or not the model has a bound (or experts); the rest are
    /// proxies.
    fn proxy(
        &mut self,
        line: usize,
        row: &Row,
        q: &str,
        p: Option<&str>,
    ) -> Result<(String, Interval), EvidenceError> {
        let file = self.claims;
        let bad = |e: String| bad_line(file, line, e);
        let (l, h, k) = row.proxy_subject().map_err(bad)?;
        let expert = row.cell(crate::report::csv::EXPERT_COLUMN);
        let c = ensure_cert(&mut self.cert, self.model, self.opts, self.progress)?;
        if !PROXY_QUANTITIES.contains(&q) {
            let id = matrix_id(l, h, k, expert.as_deref()).map_err(bad)?;
            let iv = spectrum_quantity(c, id, q, p).map_err(bad)?;
            Ok((id.to_string(), iv))
        } else {
            let name = MatrixId::from_columns(l, h, k)
                .map(|id| id.to_string())
                .unwrap_or_else(|| format!("layer {l} head {h} {k}"));
            Ok((name, proxy_quantity(c, l, h, k, q, p).map_err(bad)?))
        }
    }

    /// A claim of one of the model's bounds.
    fn bound(&mut self, line: usize, q: &str) -> Result<(String, Interval), EvidenceError> {
        let file = self.claims;
        let bad = |e: String| bad_line(file, line, e);
        let c = ensure_cert(&mut self.cert, self.model, self.opts, self.progress)?;
        let Some(bounds) = &c.cert.bounds else {
            return Err(bad(format!(
                "a claim of a bound, but the model has none: {}",
                crate::io::escape_to(c.cert.bound_absent.as_deref().unwrap_or(""), 400)
            )));
        };
        let b = match q {
            "ours" | "B_ours" => iv(bounds.ours),
            "edelman" | "B_Edel" | "edel" => iv(bounds.edelman),
            other => {
                return Err(bad(format!(
                    "unknown bound '{}' (ours, edelman)",
                    crate::io::escape(other)
                )))
            }
        };
        Ok(("model".to_string(), b))
    }

    /// Why an inconsistent claim is what the authors' float64 computation
    /// gives ([`ClaimResult::note`]), for the claims that can say it.
    fn note(&self, verdict: &Verdict, row: &Row, raw: &RawClaim) -> Option<String> {
        let (Verdict::Inconsistent { .. }, Some(cc)) = (verdict, self.cert.as_ref()) else {
            return None;
        };
        match raw.subject {
            Subject::Proxy => row.proxy_subject().ok().and_then(|(l, h, k)| {
                proxy_note(
                    &cc.cert,
                    l,
                    h,
                    k,
                    &raw.quantity,
                    raw.p.as_deref(),
                    &raw.claim,
                )
            }),
            Subject::Bound if matches!(raw.quantity.as_str(), "ours" | "B_ours") => raw
                .claim
                .trim()
                .parse()
                .ok()
                .and_then(|v| fidelity::explain_bound_ours(&cc.cert, v)),
            _ => None,
        }
    }
}

/// The interval a row states beside its value (`column_lo`,
/// `column_hi`), when it has both.
fn stated_interval(row: &Row, column: &str) -> Result<Option<(Rational, Rational)>, String> {
    let (Some(l), Some(h)) = (
        row.cell(&format!("{column}_lo")),
        row.cell(&format!("{column}_hi")),
    ) else {
        return Ok(None);
    };
    let parse = |t: &str| {
        stated_end(t).ok_or_else(|| format!("'{}' is not a decimal number", crate::io::escape(t)))
    };
    let (l, h) = (parse(&l)?, parse(&h)?);
    if l > h {
        return Err(format!("{column}_lo exceeds {column}_hi"));
    }
    Ok(Some((l, h)))
}

/// `atol + rtol |c|`: how far `--rtol`/`--atol` widen a claim `c`.
fn widening(c: &Rational, opts: &AuditOptions) -> Rational {
    let r = Rational::from_f64(opts.rtol).expect("checked finite");
    let a = Rational::from_f64(opts.atol).expect("checked finite");
    a + r * Rational::from(c.abs_ref())
}

/// The half-width of a claim's window: its explicit tolerance `tol`, else
/// the larger of its printed half unit `default_tol` and the widening
/// (`--rtol`/`--atol` widen the printed half unit, never narrow it).
fn claim_tolerance(
    c: &Rational,
    default_tol: Rational,
    tol: Option<&str>,
    opts: &AuditOptions,
) -> Result<Rational, String> {
    let Some(t) = tol else {
        return Ok(std::cmp::max(default_tol, widening(c, opts)));
    };
    let (tv, _) = parse_claim(t).ok_or_else(|| {
        format!(
            "tolerance '{}' is not a decimal number",
            crate::io::escape(t)
        )
    })?;
    if tv < 0 {
        return Err("tolerance must be >= 0".into());
    }
    Ok(tv)
}

/// The hint of [`AuditReport::hint`] for `n` claims undecided only because
/// of their printed digits.
fn tolerance_hint(n: usize, opts: &AuditOptions) -> Option<String> {
    (n > 0 && opts.rtol == 0.0 && opts.atol == 0.0).then(|| {
        format!(
            "hint: {n} claims are undecided because their printed digits are finer than the certified \
             intervals; a table of float64 results needs a tolerance: --rtol 1e-12 (float32: --rtol 1e-6)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::{Answer, AuditReport};

    #[test]
    fn answers_are_the_commands() {
        let r = |consistent, inconsistent, undecided| AuditReport {
            layout: "generic".into(),
            rtol: 0.0,
            atol: 0.0,
            precision: "f64".into(),
            within_float32_rounding: 0,
            within_float64_rounding: 0,
            results: Vec::new(),
            consistent,
            inconsistent,
            undecided,
            model_id: None,
            other_models: 0,
            hint: None,
        };
        assert_eq!(r(2, 0, 0).answer(), Answer::Holds);
        assert_eq!(r(2, 0, 1).answer(), Answer::Undecided);
        assert_eq!(
            r(2, 1, 1).answer(),
            Answer::Refuted,
            "inconsistent outweighs undecided"
        );
    }
}
