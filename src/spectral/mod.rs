//! Spectral quantities derived from certified singular values, plus direct
//! enclosures computed from the matrix entries.
//!
//! Every function returns an enclosure of the exact quantity of the exact
//! matrix; justification `proofs/derived-quantities.md` (L15), with sums
//! bounded by `proofs/rn-directed-scalar.md` (L3) and
//! `proofs/compensated-sum.md` (L12), and power-of-two scaling by
//! `proofs/power-of-two-scaling.md` (L2).

use inari::Interval;
use serde::Serialize;

use crate::enclosure::{Enclosure, Inconclusive, IntEnclosure};
use crate::io::DenseMatrix;
use crate::linalg::rounding::{self as r, ETA, U};
use crate::linalg::SingularValues;

/// A Schatten exponent `p > 0`, held as an interval that contains the exact
/// decimal the user wrote (so `0.1` means one tenth, not its binary64 neighbour).
#[derive(Clone, Debug)]
pub struct SchattenP {
    /// The text as given (for reports).
    pub text: String,
    /// Encloses the exact exponent.
    pub value: Interval,
}

impl SchattenP {
    /// Parses a decimal exponent; rejects non-positive, non-finite or malformed input.
    pub fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim();
        let ok = !t.is_empty()
            && t.chars()
                .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'));
        let value: Interval = if ok {
            format!("[{t}]")
                .parse()
                .map_err(|_| format!("invalid Schatten exponent '{text}'"))?
        } else {
            return Err(format!("invalid Schatten exponent '{text}'"));
        };
        if value.is_empty() || !(value.inf() >= 0.0) || !value.sup().is_finite() {
            return Err(format!(
                "Schatten exponent '{text}' must be a finite number >= 0"
            ));
        }
        Ok(Self {
            text: t.to_string(),
            value,
        })
    }

    /// Whether the exponent is exactly zero (the rank).
    pub fn is_zero(&self) -> bool {
        self.value.inf() == 0.0 && self.value.sup() == 0.0
    }
}

/// Enclosures of `S_p^p = sum_i sigma_i^p` and of the Schatten (quasi-)norm
/// `S_p = (S_p^p)^(1/p)`; `None` where the bound overflowed f64.
#[derive(Clone, Debug)]
pub struct SchattenEnclosure {
    /// The exponent as written.
    pub p: String,
    /// Encloses `sum sigma_i^p` (for p = 0: the rank).
    pub power: Option<Enclosure>,
    /// Encloses `(sum sigma_i^p)^(1/p)` (for p = 0: `None`).
    pub norm: Option<Enclosure>,
}

/// Certified spectral summary of one matrix.
#[derive(Clone, Debug, Serialize)]
pub struct SpectralSummary {
    /// Encloses `sigma_1`.
    pub spectral_norm: Enclosure,
    /// Encloses `||A||_F`: intersection of the singular-value route and the
    /// direct sum of squared entries.
    pub frobenius_norm: Enclosure,
    /// Encloses `sum sigma_i`.
    pub nuclear_norm: Enclosure,
    /// Encloses the sum over columns of their 2-norms (column = second index).
    pub norm_21: Enclosure,
    /// Encloses `sum |a_ij|`.
    pub norm_11: Enclosure,
    /// Encloses `||A||_F^2 / ||A||_2^2`; `None` if sigma_1 could not be
    /// certified positive (or the matrix is zero).
    pub stable_rank: Option<Enclosure>,
    /// Encloses the rank.
    pub rank: IntEnclosure,
}

fn enc(x: Interval, what: &str) -> Result<Enclosure, Inconclusive> {
    Enclosure::from_interval(x).ok_or_else(|| Inconclusive::new(format!("{what} overflowed")))
}

fn sv_intervals(sv: &SingularValues) -> Vec<Interval> {
    sv.values
        .iter()
        .map(|v| v.enclosure.to_interval())
        .collect()
}

/// Encloses the rank: `[#{lo_i > 0}, #{hi_i > 0}]` (L15 c).
pub fn enclose_rank(sv: &SingularValues) -> IntEnclosure {
    let lo = sv.values.iter().filter(|v| v.enclosure.lo() > 0.0).count() as u64;
    let hi = sv.values.iter().filter(|v| v.enclosure.hi() > 0.0).count() as u64;
    IntEnclosure { lo, hi }
}

/// Encloses `sum sigma_i^p` and `(sum sigma_i^p)^(1/p)` for `p > 0`, or the
/// rank for `p = 0` (L15 b, c). The singular values are scaled by a power of
/// two near `sigma_1` first so that large `p` does not overflow needlessly.
pub fn enclose_schatten(sv: &SingularValues, p: &SchattenP) -> SchattenEnclosure {
    if p.is_zero() {
        let rk = enclose_rank(sv);
        return SchattenEnclosure {
            p: p.text.clone(),
            power: Enclosure::new(rk.lo as f64, rk.hi as f64),
            norm: None,
        };
    }
    let top = sv.values.first().map(|v| v.enclosure.hi()).unwrap_or(0.0);
    if top == 0.0 {
        let zero = Enclosure::exact(0.0);
        return SchattenEnclosure {
            p: p.text.clone(),
            power: zero,
            norm: zero,
        };
    }
    let k = crate::linalg::dense::exponent_of(top);
    let mut t = Interval::try_from((0.0, 0.0)).expect("zero");
    for v in &sv.values {
        let lo = r::scale_pow2_rd(v.enclosure.lo(), -k);
        let hi = r::scale_pow2_ru(v.enclosure.hi(), -k);
        let x = Interval::try_from((lo, hi)).expect("ordered");
        t = t + x.pow(p.value);
    }
    let two_k =
        Interval::try_from((r::scale_pow2_rd(1.0, k), r::scale_pow2_ru(1.0, k))).expect("finite");
    let power = Enclosure::from_interval(t * two_k.pow(p.value));
    let norm = Enclosure::from_interval(two_k * t.pow(p.value.recip()));
    SchattenEnclosure {
        p: p.text.clone(),
        power,
        norm,
    }
}

/// Encloses `sum_ij a_ij^2` directly from the entries: error-free products
/// (FMA) and a cascaded TwoSum (Sum2) with the bound of L12.
pub fn enclose_sum_of_squares(a: &DenseMatrix) -> Result<Enclosure, Inconclusive> {
    let maxabs = a.data.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    if maxabs == 0.0 {
        return Ok(Enclosure::exact(0.0).expect("zero"));
    }
    // Exact power-of-two scaling when possible (L2); scale back at the end.
    let mut k = -crate::linalg::dense::exponent_of(maxabs);
    if a.data.iter().any(|&x| r::scale_pow2_exact(x, k).is_none()) {
        k = 0;
    }
    let mut s = 0.0f64; // running sum
    let mut c = 0.0f64; // sum of TwoSum errors
    let mut abs_sum = 0.0f64; // fl of sum of the products (for the bound)
    for &x0 in &a.data {
        let x = r::scale_pow2_rn(x0, k);
        let p = x * x;
        let e = x.mul_add(x, -p); // exact unless x*x underflows (eta term below)
        abs_sum += p;
        for t in [p, e] {
            let sn = s + t;
            let bp = sn - s;
            let err = (s - (sn - bp)) + (t - bp); // TwoSum, error-free
            s = sn;
            c += err;
        }
    }
    let res = s + c;
    let n_terms = 2 * a.data.len();
    // sum |t_i| <= (1 + u) sum p_i  and  sum p_i <= nonneg bound of abs_sum.
    let sum_abs = r::mul_ru(r::nonneg_sum_ru(abs_sum, a.data.len()), 1.0 + 2.0 * U);
    let g = r::gamma_ru(n_terms);
    let big_g = r::add_ru(
        r::mul_ru(r::mul_ru(g, g), sum_abs),
        r::mul_ru(n_terms as f64, ETA),
    );
    // |res - s| <= u (|res| + G) / (1 - u) + G
    let err = r::add_ru(
        r::div_ru(r::mul_ru(U, r::add_ru(res.abs(), big_g)), 1.0 - 2.0 * U),
        big_g,
    );
    let lo = r::sub_rd(res, err).max(0.0);
    let hi = r::add_ru(res, err);
    let lo = r::scale_pow2_rd(lo, -2 * k);
    let hi = r::scale_pow2_ru(hi, -2 * k);
    Enclosure::new(lo, hi).ok_or_else(|| Inconclusive::new("sum of squares overflowed"))
}

/// Encloses the (2,1)-norm `sum_j ||A e_j||_2` (column = second index) and
/// the (1,1)-norm `sum_ij |a_ij|` from the entries (L3, L15 e).
pub fn enclose_entry_norms(a: &DenseMatrix) -> Result<(Enclosure, Enclosure), Inconclusive> {
    let maxabs = a.data.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    if maxabs == 0.0 {
        let z = Enclosure::exact(0.0).expect("zero");
        return Ok((z, z));
    }
    let mut k = -crate::linalg::dense::exponent_of(maxabs);
    if a.data.iter().any(|&x| r::scale_pow2_exact(x, k).is_none()) {
        k = 0;
    }
    let (m, n) = (a.rows, a.cols);
    let mut col_sq = vec![0.0f64; n];
    let mut abs_total = 0.0f64;
    for i in 0..m {
        let row = &a.data[i * n..(i + 1) * n];
        for (cs, &x0) in col_sq.iter_mut().zip(row) {
            let x = r::scale_pow2_rn(x0, k);
            *cs = x.mul_add(x, *cs);
            abs_total += x.abs();
        }
    }
    let (mut lo21, mut hi21) = (0.0f64, 0.0f64);
    for &cs in &col_sq {
        lo21 = r::add_rd(lo21, r::sqrt_rd(r::nonneg_sum_rd(cs, m)));
        hi21 = r::add_ru(hi21, r::sqrt_ru(r::nonneg_sum_ru(cs, m)));
    }
    let lo11 = r::nonneg_sum_rd(abs_total, m * n);
    let hi11 = r::nonneg_sum_ru(abs_total, m * n);
    let n21 = Enclosure::new(r::scale_pow2_rd(lo21, -k), r::scale_pow2_ru(hi21, -k))
        .ok_or_else(|| Inconclusive::new("(2,1)-norm overflowed"))?;
    let n11 = Enclosure::new(r::scale_pow2_rd(lo11, -k), r::scale_pow2_ru(hi11, -k))
        .ok_or_else(|| Inconclusive::new("(1,1)-norm overflowed"))?;
    Ok((n21, n11))
}

/// Certified summary of one matrix from its certified singular values and
/// its entries (L15).
pub fn summarize(a: &DenseMatrix, sv: &SingularValues) -> Result<SpectralSummary, Inconclusive> {
    let xs = sv_intervals(sv);
    let zero = Interval::try_from((0.0, 0.0)).expect("zero");
    let spectral = sv
        .values
        .first()
        .map(|v| v.enclosure)
        .unwrap_or(Enclosure::exact(0.0).expect("zero"));
    let nuclear = enc(xs.iter().fold(zero, |acc, &x| acc + x), "nuclear norm")?;
    let frob_sv = enc(
        xs.iter().fold(zero, |acc, &x| acc + x.sqr()).sqrt(),
        "Frobenius norm",
    )?;
    let sumsq = enclose_sum_of_squares(a)?;
    let frob_direct = enc(sumsq.to_interval().sqrt(), "Frobenius norm")?;
    let frobenius = frob_sv.intersect(&frob_direct).ok_or_else(|| {
        Inconclusive::new(
            "internal consistency check failed: the two Frobenius enclosures are disjoint",
        )
    })?;
    let (norm_21, norm_11) = enclose_entry_norms(a)?;
    let stable_rank = if spectral.lo() > 0.0 {
        let f = frobenius.to_interval();
        let s = spectral.to_interval();
        Enclosure::from_interval(f.sqr() / s.sqr())
    } else {
        None
    };
    Ok(SpectralSummary {
        spectral_norm: spectral,
        frobenius_norm: frobenius,
        nuclear_norm: nuclear,
        norm_21,
        norm_11,
        stable_rank,
        rank: enclose_rank(sv),
    })
}
