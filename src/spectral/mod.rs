//! Spectral quantities derived from certified singular values, plus direct
//! enclosures computed from the matrix entries.
//!
//! Every function returns an enclosure of the exact quantity of the exact
//! matrix; justification `proofs/derived-quantities.md` (L15), with sums
//! bounded by `proofs/rn-directed-scalar.md` (L3) and
//! `proofs/compensated-sum.md` (L12), and power-of-two scaling by
//! `proofs/power-of-two-scaling.md` (L2).

mod mpfr_norms;

pub use mpfr_norms::{enclose_entry_norms_mpfr, enclose_product_entry_norms_mpfr};

use inari::Interval;
use serde::Serialize;

use crate::enclosure::{Enclosure, Inconclusive, IntEnclosure};
use crate::linalg::eft::Sum2;
use crate::linalg::rounding as r;
use crate::linalg::SingularValues;
use crate::matrix::DenseMatrix;

/// The tightest interval containing the exact value of a decimal number
/// (`"1.13"` is 113/100, not its binary64 neighbour), by inari's decimal
/// parser; `None` for malformed or non-finite input.
pub fn parse_decimal_interval(text: &str) -> Option<Interval> {
    let t = text.trim();
    let ok = !t.is_empty()
        && t.chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'));
    if !ok {
        return None;
    }
    let v: Interval = format!("[{t}]").parse().ok()?;
    (!v.is_empty() && v.inf().is_finite() && v.sup().is_finite()).then_some(v)
}

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
    /// Parses a decimal exponent; rejects negative, non-finite or malformed input.
    pub fn parse(text: &str) -> Result<Self, String> {
        let value = parse_decimal_interval(text)
            .ok_or_else(|| format!("invalid Schatten exponent '{text}'"))?;
        if !(value.inf() >= 0.0) {
            return Err(format!(
                "Schatten exponent '{text}' must be a finite number >= 0"
            ));
        }
        Ok(Self {
            text: text.trim().to_string(),
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

/// Encloses `sum_i sigma_i^p` for an exponent `p > 0` known to lie in the
/// interval `p` (L15 b). The values are scaled by a power of two near
/// sigma_1 first so that large `p` does not overflow needlessly. Returns the
/// enclosure of the scaled sum `t` and the scale `2^k` (so the power is
/// `t * (2^k)^p`); `None` for a zero matrix.
fn scaled_power_sum(sv: &SingularValues, p: Interval) -> Option<(Interval, Interval)> {
    let top = sv.values.first().map(|v| v.enclosure.hi()).unwrap_or(0.0);
    if top == 0.0 {
        return None;
    }
    let k = crate::linalg::dense::exponent_of(top);
    let mut t = Interval::try_from((0.0, 0.0)).expect("zero");
    for v in &sv.values {
        let lo = r::scale_pow2_rd(v.enclosure.lo(), -k);
        let hi = r::scale_pow2_ru(v.enclosure.hi(), -k);
        if hi == 0.0 {
            continue; // exact zeros contribute 0 for p > 0
        }
        let x = Interval::try_from((lo, hi)).expect("ordered");
        t += x.pow(p);
    }
    let two_k =
        Interval::try_from((r::scale_pow2_rd(1.0, k), r::scale_pow2_ru(1.0, k))).expect("finite");
    Some((t, two_k))
}

/// Encloses `sum_i sigma_i^p` for every exact `p` in the interval `p`
/// (`p.inf() > 0`), as an inari interval (unbounded on overflow) (L15 b).
pub fn enclose_power_sum(sv: &SingularValues, p: Interval) -> Interval {
    match scaled_power_sum(sv, p) {
        None => Interval::try_from((0.0, 0.0)).expect("zero"),
        Some((t, two_k)) => t * two_k.pow(p),
    }
}

/// Encloses `sum sigma_i^p` and `(sum sigma_i^p)^(1/p)` for `p > 0`, or the
/// rank for `p = 0` (L15 b, c).
pub fn enclose_schatten(sv: &SingularValues, p: &SchattenP) -> SchattenEnclosure {
    if p.is_zero() {
        let rk = enclose_rank(sv);
        return SchattenEnclosure {
            p: p.text.clone(),
            power: Enclosure::new(rk.lo as f64, rk.hi as f64),
            norm: None,
        };
    }
    match scaled_power_sum(sv, p.value) {
        None => {
            let zero = Enclosure::exact(0.0);
            SchattenEnclosure {
                p: p.text.clone(),
                power: zero,
                norm: zero,
            }
        }
        Some((t, two_k)) => SchattenEnclosure {
            p: p.text.clone(),
            power: Enclosure::from_interval(t * two_k.pow(p.value)),
            norm: Enclosure::from_interval(two_k * t.pow(p.value.recip())),
        },
    }
}

/// Exact power-of-two exponent `k` that brings the largest magnitude into
/// `[1, 2)`, or 0 when that scaling would not be exact (L2).
fn entry_scale(a: &DenseMatrix) -> i32 {
    let maxabs = a.data.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    crate::linalg::dense::exact_scale_exponent(maxabs, &a.data)
}

/// Encloses `sum_ij a_ij^2` directly from the entries: error-free products
/// (TwoProduct by FMA) summed by Sum2 with the bound of L12, on the exactly
/// rescaled entries (L2).
pub fn enclose_sum_of_squares(a: &DenseMatrix) -> Result<Enclosure, Inconclusive> {
    let k = entry_scale(a);
    let mut acc = Sum2::new();
    for &x0 in &a.data {
        let x = r::scale_pow2_rn(x0, k);
        acc.add_prod(x, x);
    }
    let (lo, hi) = acc.bounds();
    let lo = r::scale_pow2_rd(lo.max(0.0), -2 * k);
    let hi = r::scale_pow2_ru(hi, -2 * k);
    Enclosure::new(lo, hi).ok_or_else(|| Inconclusive::new("sum of squares overflowed"))
}

/// Encloses the (2,1)-norm `sum_j ||A e_j||_2` (column = second index) and
/// the (1,1)-norm `sum_ij |a_ij|` from the entries (L12, L3, L15 e).
pub fn enclose_entry_norms(a: &DenseMatrix) -> Result<(Enclosure, Enclosure), Inconclusive> {
    let k = entry_scale(a);
    let (m, n) = (a.rows, a.cols);
    let mut cols = vec![Sum2::new(); n];
    let mut abs = Sum2::new();
    for i in 0..m {
        let row = &a.data[i * n..(i + 1) * n];
        for (c, &x0) in cols.iter_mut().zip(row) {
            let x = r::scale_pow2_rn(x0, k);
            c.add_prod(x, x);
            abs.add(x.abs());
        }
    }
    // Sum the directed column-norm bounds error-free as well (Sum2 of exact terms).
    let (mut lo_sum, mut hi_sum) = (Sum2::new(), Sum2::new());
    for c in &cols {
        let (l, h) = c.bounds();
        lo_sum.add(r::sqrt_rd(l));
        hi_sum.add(r::sqrt_ru(h));
    }
    let lo21 = lo_sum.bounds().0;
    let hi21 = hi_sum.bounds().1;
    let (lo11, hi11) = abs.bounds();
    let n21 = Enclosure::new(
        r::scale_pow2_rd(lo21.max(0.0), -k),
        r::scale_pow2_ru(hi21, -k),
    )
    .ok_or_else(|| Inconclusive::new("(2,1)-norm overflowed"))?;
    let n11 = Enclosure::new(
        r::scale_pow2_rd(lo11.max(0.0), -k),
        r::scale_pow2_ru(hi11, -k),
    )
    .ok_or_else(|| Inconclusive::new("(1,1)-norm overflowed"))?;
    Ok((n21, n11))
}

/// Certified summary of one matrix from its certified singular values and
/// its entries (L15).
pub fn summarize(a: &DenseMatrix, sv: &SingularValues) -> Result<SpectralSummary, Inconclusive> {
    let sumsq = enclose_sum_of_squares(a)?;
    let (norm_21, norm_11) = enclose_entry_norms(a)?;
    summarize_with(sv, sumsq, norm_21, norm_11)
}

/// Certified summary of `A = B C` from its certified singular values and
/// enclosures of its entries formed from the factors (L4, L12, L15).
pub fn summarize_factored(
    b: &DenseMatrix,
    c: &DenseMatrix,
    sv: &SingularValues,
) -> Result<SpectralSummary, Inconclusive> {
    let (sumsq, norm_21, norm_11) = enclose_product_entry_norms(b, c)?;
    summarize_with(sv, sumsq, norm_21, norm_11)
}

/// Encloses `sum_ij x_ij^2`, the (2,1)-norm and the (1,1)-norm of `X = B C`
/// without the exact product. `Y = fl(B C)` differs from `X` entrywise by at
/// most `gamma_r (|B||C|)_ij + r eta` (L4), so column `j` of `X - Y` has
/// 1-norm at most `e_j = gamma_r (1^T|B|) |c_j| + m r eta`, a dot product of
/// two r-vectors bounded from above (L3 b). Then `| ||x_j|| - ||y_j|| | <= e_j`
/// and `| ||x_j||_1 - ||y_j||_1 | <= e_j` (triangle inequality), and the
/// norms of the computed `Y` are bounded with L3 b.
pub fn enclose_product_entry_norms(
    b: &DenseMatrix,
    c: &DenseMatrix,
) -> Result<(Enclosure, Enclosure, Enclosure), Inconclusive> {
    use faer::{Accum, Mat, Par};
    let (m, rr, n) = (b.rows, b.cols, c.cols);
    let bm = Mat::from_fn(m, rr, |i, j| b.get(i, j));
    let cm = Mat::from_fn(rr, n, |i, j| c.get(i, j));
    let mut y = Mat::<f64>::zeros(m, n);
    faer::linalg::matmul::matmul(
        &mut y,
        Accum::Replace,
        bm.as_ref(),
        cm.as_ref(),
        1.0,
        Par::Seq,
    );
    // w = upper bound of 1^T |B| (column sums of |B|), an r-vector.
    let w: Vec<f64> = (0..rr)
        .map(|k| r::nonneg_sum_ru((0..m).fold(0.0, |acc, i| acc + b.get(i, k).abs()), m))
        .collect();
    let gam = r::gamma_ru(rr);
    let under = r::mul_ru((m * rr) as f64, crate::linalg::rounding::ETA);
    let (mut sq_lo, mut sq_hi) = (Sum2::new(), Sum2::new());
    let (mut a_lo, mut a_hi) = (Sum2::new(), Sum2::new());
    let (mut n21_lo, mut n21_hi) = (Sum2::new(), Sum2::new());
    for j in 0..n {
        let dot = (0..rr).fold(0.0, |acc, k| w[k].mul_add(c.get(k, j).abs(), acc));
        let e = r::add_ru(r::mul_ru(gam, r::nonneg_sum_ru(dot, rr)), under);
        let col = y.col_as_slice(j);
        let s2 = r::sum_sq(col);
        let s1 = col.iter().fold(0.0, |acc, x| acc + x.abs());
        let norm_lo = r::sub_rd(r::sqrt_rd(r::nonneg_sum_rd(s2, m)), e).max(0.0);
        let norm_hi = r::add_ru(r::sqrt_ru(r::nonneg_sum_ru(s2, m)), e);
        let abs_lo = r::sub_rd(r::nonneg_sum_rd(s1, m), e).max(0.0);
        let abs_hi = r::add_ru(r::nonneg_sum_ru(s1, m), e);
        if !(norm_hi.is_finite() && abs_hi.is_finite()) {
            return Err(Inconclusive::new("product entries overflowed"));
        }
        n21_lo.add(norm_lo);
        n21_hi.add(norm_hi);
        a_lo.add(abs_lo);
        a_hi.add(abs_hi);
        sq_lo.add(r::mul_rd(norm_lo, norm_lo));
        sq_hi.add(r::mul_ru(norm_hi, norm_hi));
    }
    let mk = |lo: &Sum2, hi: &Sum2, what: &str| {
        Enclosure::new(lo.bounds().0.max(0.0), hi.bounds().1)
            .ok_or_else(|| Inconclusive::new(format!("{what} overflowed")))
    };
    Ok((
        mk(&sq_lo, &sq_hi, "sum of squares")?,
        mk(&n21_lo, &n21_hi, "(2,1)-norm")?,
        mk(&a_lo, &a_hi, "(1,1)-norm")?,
    ))
}

/// Certified summary from certified singular values and direct enclosures
/// of `sum a_ij^2`, the (2,1)-norm and the (1,1)-norm (L15).
pub fn summarize_with(
    sv: &SingularValues,
    sumsq: Enclosure,
    norm_21: Enclosure,
    norm_11: Enclosure,
) -> Result<SpectralSummary, Inconclusive> {
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
    let frob_direct = enc(sumsq.to_interval().sqrt(), "Frobenius norm")?;
    let frobenius = frob_sv.intersect(&frob_direct).ok_or_else(|| {
        Inconclusive::new(
            "internal consistency check failed: the two Frobenius enclosures are disjoint",
        )
    })?;
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
