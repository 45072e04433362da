//! `specbound audit MATRIX CLAIMED.npy`: another tool's singular values of
//! a matrix, checked index by index against the certified ones. This is
//! what a numerical library's test suite calls to pin the accuracy of its
//! SVD: for every index the certified interval of the claimed value's error
//! (absolute, relative, and in units in the last place of the claimed
//! dtype), the certified maximum relative error, and a verdict against
//! `|c - sigma| <= atol + rtol sigma`.
//!
//! All error intervals are computed exactly (rationals) from the claimed
//! value and the certified enclosure, then rounded outward to f64
//! ([`proofs/rounding-gap.md`](crate::proofs::rounding_gap), L22, for the endpoint argument).

use rug::Rational;
use serde::Serialize;

use super::audit::{directed, format_gap, FormatGap, U32};
use super::Answer;
use crate::linalg::SingularValues;
use crate::matrix::SourceDtype;

/// Options of [`audit_spectrum`].
#[derive(Clone, Debug)]
pub(crate) struct SpectrumOptions {
    /// Relative tolerance of the verdict.
    pub rtol: f64,
    /// Absolute tolerance of the verdict.
    pub atol: f64,
    /// Multiple of the unit roundoff in the rounding statement.
    pub rounding_units: f64,
}

/// Verdict of one index or of the whole audit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    /// `|c - sigma| <= atol + rtol sigma` for the exact sigma (certified).
    Pass,
    /// `|c - sigma| > atol + rtol sigma` for the exact sigma (certified).
    Fail,
    /// The enclosure is too wide to decide.
    Undecided,
}

/// One index.
#[derive(Clone, Debug, Serialize)]
pub struct IndexResult {
    /// 1-based index (sigma_1 largest).
    pub index: usize,
    /// The claimed value (exactly the stored number).
    pub claimed: f64,
    /// Certified enclosure of sigma_index.
    pub certified: [f64; 2],
    /// Encloses `claimed - sigma`.
    pub abs_error: [f64; 2],
    /// Encloses `(claimed - sigma) / sigma`; `null` when sigma may be 0.
    pub rel_error: Option<[f64; 2]>,
    /// Encloses `(claimed - sigma) / ulp(claimed)` in the claimed dtype.
    pub ulps: [f64; 2],
    /// `|claimed - sigma|` against float32 rounding of sigma.
    pub float32: FormatGap,
    /// Verdict against the tolerances.
    pub verdict: Check,
}

impl SpectrumAudit {
    /// The verdict as an [`Answer`]: `Refuted` when a claimed value fails,
    /// else `Undecided` when one is undecided, else `Holds`.
    pub fn answer(&self) -> Answer {
        match self.verdict {
            Check::Pass => Answer::Holds,
            Check::Fail => Answer::Refuted,
            Check::Undecided => Answer::Undecided,
        }
    }
}

/// The whole spectrum audit.
#[derive(Clone, Debug, Serialize)]
pub struct SpectrumAudit {
    /// Storage type of the claimed values.
    pub claimed_dtype: String,
    /// Number of claimed values (at most `min(rows, cols)`; the largest are compared).
    pub claimed: usize,
    /// Whether the claimed values had to be sorted (largest first).
    pub sorted: bool,
    /// `rtol` of the verdict.
    pub rtol: f64,
    /// `atol` of the verdict.
    pub atol: f64,
    /// Per index.
    pub indices: Vec<IndexResult>,
    /// Encloses `max_i |claimed_i - sigma_i| / sigma_i`; `hi` is `null`
    /// when some sigma_i may be 0.
    pub max_relative_error: [Option<f64>; 2],
    /// Encloses `max_i |claimed_i - sigma_i| / ulp(claimed_i)`.
    pub max_ulps: [f64; 2],
    /// Counts.
    pub pass: usize,
    /// Counts.
    pub fail: usize,
    /// Counts.
    pub undecided: usize,
    /// Fail if any index fails, else undecided if any is, else pass.
    pub verdict: Check,
}

/// The distance from `x` to the next number of the claimed dtype above
/// `|x|`'s binade floor: `2^(max(e, emin) - p + 1)`, `e = floor(log2 |x|)`.
fn ulp(x: f64, dtype: SourceDtype) -> Rational {
    let (p, emin) = match dtype {
        SourceDtype::F16 => (11, -14),
        SourceDtype::BF16 => (8, -126),
        SourceDtype::F32 => (24, -126),
        _ => (53, -1022),
    };
    let e = if x == 0.0 {
        emin
    } else {
        // Exact: the exponent of a finite nonzero binary64 number.
        let bits = x.abs().to_bits();
        let biased = ((bits >> 52) & 0x7ff) as i32;
        let e = if biased == 0 {
            -1074 + (63 - (bits.leading_zeros() as i32)) // subnormal
        } else {
            biased - 1023
        };
        e.max(emin)
    };
    let k = e - p + 1;
    let two = rug::Integer::from(1) << k.unsigned_abs();
    if k >= 0 {
        Rational::from(two)
    } else {
        Rational::from((rug::Integer::from(1), two))
    }
}

fn pair(lo: &Rational, hi: &Rational) -> [f64; 2] {
    [directed(lo, false), directed(hi, true)]
}

/// Audits `claimed` (any order; sorted largest first when not already)
/// against the certified singular values `sv` of the same matrix.
/// *Guarantee*: every error interval encloses the exact error of the
/// claimed value against the exact singular value, and every verdict is
/// certified ([`proofs/rounding-gap.md`](crate::proofs::rounding_gap), L22).
pub(crate) fn audit_spectrum(
    claimed: &[f64],
    dtype: SourceDtype,
    sv: &SingularValues,
    opts: &SpectrumOptions,
) -> Result<SpectrumAudit, String> {
    let n = sv.values.len();
    if claimed.len() > n {
        return Err(format!(
            "{} claimed values, but the matrix has min(rows, cols) = {n} singular values",
            claimed.len()
        ));
    }
    if claimed.is_empty() {
        return Err("no claimed values".into());
    }
    let mut c: Vec<f64> = claimed.to_vec();
    let sorted = !c.windows(2).all(|w| w[0] >= w[1]);
    if sorted {
        c.sort_by(|a, b| b.total_cmp(a));
    }
    let tol = Tolerance {
        rtol: Rational::from_f64(opts.rtol).ok_or("rtol must be finite")?,
        atol: Rational::from_f64(opts.atol).ok_or("atol must be finite")?,
        rounding_units: opts.rounding_units,
    };
    let mut max = Maxima {
        rel_lo: Rational::new(),
        rel_hi: Some(Rational::new()),
        ulp_lo: Rational::new(),
        ulp_hi: Rational::new(),
    };
    let indices: Vec<IndexResult> = c
        .iter()
        .enumerate()
        .map(|(i, &ci)| {
            let e = &sv.values[i].enclosure;
            audit_index(i + 1, ci, (e.lo(), e.hi()), dtype, &tol, &mut max)
        })
        .collect();
    let count = |k: Check| indices.iter().filter(|x| x.verdict == k).count();
    let (pass, fail, undecided) = (
        count(Check::Pass),
        count(Check::Fail),
        count(Check::Undecided),
    );
    Ok(SpectrumAudit {
        claimed_dtype: dtype.to_string().to_lowercase(),
        claimed: c.len(),
        sorted,
        rtol: opts.rtol,
        atol: opts.atol,
        indices,
        max_relative_error: [
            Some(directed(&max.rel_lo, false)),
            max.rel_hi.map(|r| directed(&r, true)),
        ],
        max_ulps: [directed(&max.ulp_lo, false), directed(&max.ulp_hi, true)],
        pass,
        fail,
        undecided,
        verdict: if fail > 0 {
            Check::Fail
        } else if undecided > 0 {
            Check::Undecided
        } else {
            Check::Pass
        },
    })
}

/// The verdict's tolerance, exact.
struct Tolerance {
    rtol: Rational,
    atol: Rational,
    /// Unit roundoffs within which a gap counts as float32 rounding.
    rounding_units: f64,
}

/// Running maxima over the indices: bounds on the largest relative error
/// (`rel_hi` is `None` once some sigma may be 0) and on the largest error
/// in ulps.
struct Maxima {
    rel_lo: Rational,
    rel_hi: Option<Rational>,
    ulp_lo: Rational,
    ulp_hi: Rational,
}

/// `|x|` over `x` in `[a, b]`, as `(min, max)`.
fn abs_range(a: &Rational, b: &Rational) -> (Rational, Rational) {
    let lo = if *a <= 0 && *b >= 0 {
        Rational::new()
    } else {
        std::cmp::min(Rational::from(a.abs_ref()), Rational::from(b.abs_ref()))
    };
    let hi = std::cmp::max(Rational::from(a.abs_ref()), Rational::from(b.abs_ref()));
    (lo, hi)
}

/// The claimed value `ci` of sigma_`index`, certified in `[lo, hi]`:
/// its exact error intervals and verdict; folds its errors into `max`.
fn audit_index(
    index: usize,
    ci: f64,
    (lo, hi): (f64, f64),
    dtype: SourceDtype,
    tol: &Tolerance,
    max: &mut Maxima,
) -> IndexResult {
    let (l, h) = (
        Rational::from_f64(lo).expect("finite"),
        Rational::from_f64(hi).expect("finite"),
    );
    let cr = Rational::from_f64(ci).expect("finite claims");
    // c - sigma over sigma in [l, h].
    let (elo, ehi) = (Rational::from(&cr - &h), Rational::from(&cr - &l));
    // |c - sigma| bounds.
    let (abs_lo, abs_hi) = abs_range(&elo, &ehi);
    // (c - sigma) / sigma = c / sigma - 1, monotone in sigma > 0.
    let rel = (l > 0).then(|| {
        let a = Rational::from(&cr / &l) - 1u32;
        let b = Rational::from(&cr / &h) - 1u32;
        if a <= b {
            (a, b)
        } else {
            (b, a)
        }
    });
    match &rel {
        Some((a, b)) => {
            let (lo, hi) = abs_range(a, b);
            max.rel_lo = std::cmp::max(std::mem::take(&mut max.rel_lo), lo);
            max.rel_hi = max.rel_hi.take().map(|r| std::cmp::max(r, hi));
        }
        None => max.rel_hi = None,
    }
    let u = ulp(ci, dtype);
    let (ulo, uhi) = (Rational::from(&elo / &u), Rational::from(&ehi / &u));
    max.ulp_lo = std::cmp::max(
        std::mem::take(&mut max.ulp_lo),
        Rational::from(&abs_lo / &u),
    );
    max.ulp_hi = std::cmp::max(
        std::mem::take(&mut max.ulp_hi),
        Rational::from(&abs_hi / &u),
    );
    // g(s) = |c - s| - atol - rtol s is convex: its max over [l, h] is at
    // an end, its min at an end or at s = c (where it is <= 0).
    let g =
        |s: &Rational| Rational::from(&cr - s).abs() - &tol.atol - Rational::from(&tol.rtol * s);
    let (gl, gh) = (g(&l), g(&h));
    let verdict = if gl <= 0 && gh <= 0 {
        Check::Pass
    } else if (cr < l || cr > h) && gl > 0 && gh > 0 {
        Check::Fail
    } else {
        Check::Undecided
    };
    IndexResult {
        index,
        claimed: ci,
        certified: [lo, hi],
        abs_error: pair(&elo, &ehi),
        rel_error: rel.map(|(a, b)| pair(&a, &b)),
        ulps: pair(&ulo, &uhi),
        float32: format_gap(&cr, &l, &h, U32, tol.rounding_units),
        verdict,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ulp_of_the_claimed_dtype() {
        assert_eq!(ulp(1.0, SourceDtype::F32), Rational::from((1, 1 << 23)));
        assert_eq!(
            ulp(1.5, SourceDtype::F64),
            Rational::from_f64(f64::EPSILON).unwrap()
        );
        assert_eq!(
            ulp(0.0, SourceDtype::F32),
            Rational::from_f64(2f64.powi(-149)).unwrap()
        );
        assert_eq!(ulp(3.0, SourceDtype::F16), Rational::from((1, 512)));
        assert_eq!(
            ulp(5e-324, SourceDtype::F64),
            Rational::from_f64(5e-324).unwrap()
        );
    }
}
