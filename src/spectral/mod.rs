//! Spectral quantities derived from certified singular values, plus direct
//! enclosures computed from the matrix entries.
//!
//! Every function returns an enclosure of the exact quantity of the exact
//! matrix; justification [`proofs/derived-quantities.md`](crate::proofs::derived_quantities) (L15), with sums
//! bounded by [`proofs/rn-directed-scalar.md`](crate::proofs::rn_directed_scalar) (L3) and
//! [`proofs/compensated-sum.md`](crate::proofs::compensated_sum) (L12), and power-of-two scaling by
//! [`proofs/power-of-two-scaling.md`](crate::proofs::power_of_two_scaling) (L2).

mod exact_sums;
mod mpfr_norms;
pub(crate) mod wide;

pub(crate) use mpfr_norms::{enclose_entry_norms_mpfr, enclose_product_entry_norms_mpfr};

use inari::Interval;
use serde::Serialize;

use crate::enclosure::{Enclosure, Inconclusive, IntEnclosure, OpenEnclosure};
use crate::linalg::eft::Sum2;
use crate::linalg::rounding as r;
use crate::linalg::ExactBounds;
use crate::linalg::SingularValues;
use crate::matrix::DenseMatrix;

pub(crate) mod decimal;

pub(crate) use decimal::{positive_decimal_interval, DecimalError, ExactDecimal};

/// A Schatten exponent `p >= 0`, held as an interval that contains the exact
/// decimal the user wrote (so `0.1` means one tenth, not its binary64 neighbour).
#[derive(Clone, Debug)]
pub struct SchattenP {
    /// The exact decimal, as a JSON number literal of the same value
    /// (`1e-400` stays `1e-400`; it is not the binary64 number 0).
    pub text: String,
    /// Encloses the exact exponent.
    pub value: Interval,
    /// Whether the exponent is exactly zero (decided on the decimal, not on
    /// `value`, which is `[0, 2^-1074]` for `1e-400`).
    zero: bool,
}

impl SchattenP {
    /// Parses a decimal exponent (see `decimal` for the syntax and limits);
    /// rejects negative, out-of-range or malformed input.
    pub fn parse(text: &str) -> Result<Self, String> {
        let d: ExactDecimal = text
            .parse()
            .map_err(|e| format!("invalid Schatten exponent: {e}"))?;
        if d.negative {
            return Err(format!(
                "Schatten exponent '{}' must be a number >= 0",
                text.trim()
            ));
        }
        let value = d.to_interval().ok_or_else(|| {
            format!(
                "Schatten exponent '{}' is outside the binary64 range",
                text.trim()
            )
        })?;
        Ok(Self {
            text: d.to_json_literal(),
            value,
            zero: d.is_zero(),
        })
    }

    /// Whether the exponent is exactly zero (the rank).
    pub fn is_zero(&self) -> bool {
        self.zero
    }
}

/// Enclosures of `S_p^p = sum_i sigma_i^p` and of the Schatten (quasi-)norm
/// `S_p = (S_p^p)^(1/p)`; `None` where the bound overflowed f64.
#[derive(Clone, Debug)]
pub struct SchattenEnclosure {
    /// The exponent: the exact decimal given, as a JSON number literal of
    /// the same value ([`SchattenP::text`]).
    pub p: String,
    /// Encloses `sum sigma_i^p` (for p = 0: the rank).
    pub power: Option<Enclosure>,
    /// Encloses `(sum sigma_i^p)^(1/p)` (for p = 0: `None`).
    pub norm: Option<Enclosure>,
    /// Decimal ends of `sum sigma_i^p` where `power` overflowed binary64
    /// (`wide::schatten_exact`).
    pub power_exact: Option<ExactBounds>,
    /// Decimal ends of the norm where `norm` overflowed (p > 0).
    pub norm_exact: Option<ExactBounds>,
    /// Encloses `ln sum sigma_i^p` where `power` overflowed binary64
    /// (p > 0): the power in log form, always a finite interval there.
    pub log_power: Option<Enclosure>,
    /// Where `power` overflowed binary64: a finite lower end of
    /// `sum sigma_i^p` (at most the largest double), so that the power is
    /// still the interval `[power_from, +inf)` ([`Self::power_interval`]).
    pub power_from: Option<f64>,
    /// Where `norm` overflowed binary64 (p > 0): a finite lower end of the
    /// norm (`Self::norm_interval`).
    pub norm_from: Option<f64>,
    /// Why a quantity is `None` or given by decimal ends only (empty otherwise).
    pub notes: Vec<String>,
}

impl SchattenEnclosure {
    /// `sum sigma_i^p` as an interval in every case it is enclosed: `power`
    /// where it is finite, else `[power_from, +inf)` (the binary64 lower end
    /// of the same enclosure, its upper end past the largest double); `None`
    /// only where no lower end was formed either.
    ///
    /// *Guarantee: certified enclosure*, as [`enclose_schatten`]
    /// ([`proofs/derived-quantities.md`](crate::proofs::derived_quantities), L15 b).
    pub fn power_interval(&self) -> Option<OpenEnclosure> {
        self.power
            .map(OpenEnclosure::from)
            .or_else(|| self.power_from.and_then(OpenEnclosure::above))
    }

    /// The norm as an interval where it is enclosed: `norm`, else
    /// `[norm_from, +inf)`; `None` for p = 0 (no norm).
    ///
    /// *Guarantee: certified enclosure*, as [`enclose_schatten`]
    /// ([`proofs/derived-quantities.md`](crate::proofs::derived_quantities), L15 b).
    pub(crate) fn norm_interval(&self) -> Option<OpenEnclosure> {
        self.norm
            .map(OpenEnclosure::from)
            .or_else(|| self.norm_from.and_then(OpenEnclosure::above))
    }
}

/// The lower end of an enclosure of a nonnegative quantity whose upper end
/// overflowed: rounded down, so at most the largest double, and `+0` for a
/// lower end `<= 0`; `None` if empty or not finite.
fn lower_end(x: Interval) -> Option<f64> {
    let lo = x.inf();
    (!x.is_empty() && lo.is_finite()).then_some(if lo > 0.0 { lo } else { 0.0 })
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

/// An enclosure of a nonnegative quantity: a lower end `<= 0` (such as the
/// `-0` inari may return on underflow) becomes `+0`; `None` if unbounded.
fn nonneg(x: Interval) -> Option<Enclosure> {
    if x.is_empty() {
        return None;
    }
    let lo = if x.inf() <= 0.0 { 0.0 } else { x.inf() };
    Enclosure::new(lo, x.sup())
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

/// Encloses the rank: from below the number of values certainly positive
/// (`SingularValues::certainly_positive`: a binary64 or decimal lower
/// end above 0, and every larger value), from above `#{hi_i > 0}` (L15 c,
/// L10 c).
pub fn enclose_rank(sv: &SingularValues) -> IntEnclosure {
    let lo = sv.certainly_positive() as u64;
    let hi = sv.values.iter().filter(|v| v.enclosure.hi() > 0.0).count() as u64;
    IntEnclosure { lo, hi }
}

/// Largest exponent `p` for which [`scaled_power_sum`] scales by a power of
/// two: the largest scaled term is then below `2^p <= 2^1000`, far from
/// overflow, and the scaling is exact. Beyond it, the values are divided by
/// an upper bound of sigma_1 so that the largest term is at most 1.
const POW2_SCALE_MAX_P: f64 = 1000.0;

/// Encloses `sum_i sigma_i^p` for an exponent `p > 0` known to lie in the
/// interval `p` (L15 b), as `t * c^p` with a scale `c > 0` chosen so that no
/// term overflows: `c = 2^k` near sigma_1 (exact, L2) while `p <= 1000`, and
/// otherwise `c` = the upper bound of sigma_1 (a float, so that the largest
/// term `(sigma_1 / c)^p <= 1` stays representable for any `p`). Returns
/// the enclosure of the scaled sum `t` and of `c`; `None` for a zero matrix.
/// Since `sum sigma_i^p = c^p sum (sigma_i / c)^p` for every `c > 0`, the
/// power is `t * c^p` and the norm `c * t^(1/p)`.
fn scaled_power_sum(sv: &SingularValues, p: Interval) -> Option<(Interval, Interval)> {
    let top = sv.values.first().map(|v| v.enclosure.hi()).unwrap_or(0.0);
    if top == 0.0 {
        return None;
    }
    let mut t = Interval::try_from((0.0, 0.0)).expect("zero");
    if p.sup() <= POW2_SCALE_MAX_P {
        let k = crate::linalg::dense::exponent_of(top);
        for v in &sv.values {
            let lo = r::scale_pow2_rd(v.enclosure.lo(), -k);
            let hi = r::scale_pow2_ru(v.enclosure.hi(), -k);
            if hi == 0.0 {
                continue; // exact zeros contribute 0 for p > 0
            }
            let x = Interval::try_from((lo, hi)).expect("ordered");
            t += x.pow(p);
        }
        let two_k = Interval::try_from((r::scale_pow2_rd(1.0, k), r::scale_pow2_ru(1.0, k)))
            .expect("finite");
        return Some((t, two_k));
    }
    let c = Interval::try_from((top, top)).expect("finite");
    for v in &sv.values {
        if v.enclosure.hi() == 0.0 {
            continue;
        }
        let x = v.enclosure.to_interval() / c;
        t += x.pow(p);
    }
    Some((t, c))
}

/// Encloses `sum_i sigma_i^p` for every exact `p` in the interval `p`
/// (`p.inf() > 0`), as an inari interval (unbounded on overflow) (L15 b).
pub(crate) fn enclose_power_sum(sv: &SingularValues, p: Interval) -> Interval {
    match scaled_power_sum(sv, p) {
        None => Interval::try_from((0.0, 0.0)).expect("zero"),
        Some((t, c)) => t * c.pow(p),
    }
}

/// Encloses `sum sigma_i^p` and `(sum sigma_i^p)^(1/p)` for `p > 0`, or the
/// rank for `p = 0` (L15 b, c). The norm is formed as `c * t^(1/p)` from the
/// scaled sum, so it is finite whenever the norm itself is (even when the
/// power `sum sigma_i^p` is not); a power beyond binary64 is also given in
/// log form, `ln t + p ln c` (L15 b with the inclusion property of `ln`).
///
/// *Guarantee: certified enclosures* ([`proofs/derived-quantities.md`](crate::proofs::derived_quantities) L15 b, c).
pub fn enclose_schatten(sv: &SingularValues, p: &SchattenP) -> SchattenEnclosure {
    let mut out = SchattenEnclosure {
        p: p.text.clone(),
        power: None,
        norm: None,
        power_exact: None,
        norm_exact: None,
        log_power: None,
        power_from: None,
        norm_from: None,
        notes: Vec::new(),
    };
    if p.is_zero() {
        let rk = enclose_rank(sv);
        out.power = Enclosure::new(rk.lo as f64, rk.hi as f64);
        return out;
    }
    match scaled_power_sum(sv, p.value) {
        None => {
            out.power = Enclosure::exact(0.0);
            out.norm = Enclosure::exact(0.0);
        }
        Some((t, c)) => {
            let power = t * c.pow(p.value);
            let norm = c * t.pow(p.value.recip());
            out.power = nonneg(power);
            out.norm = nonneg(norm);
            if out.power.is_none() {
                // ln(t c^p) = ln t + p ln c: finite where the power is not.
                out.log_power = Enclosure::from_interval(t.ln() + p.value * c.ln());
                out.power_from = lower_end(power);
            }
            if out.norm.is_none() {
                out.norm_from = lower_end(norm);
            }
        }
    }
    if out.power.is_none() || out.norm.is_none() {
        // Beyond binary64: decimal ends from MPFR (L13, L15 b).
        let (pw, nm) = wide::schatten_exact(&sv.enclosures(), p.value);
        for (name, f64_end, exact, slot) in [
            ("sum sigma^p", out.power.is_none(), pw, &mut out.power_exact),
            ("the norm", out.norm.is_none(), nm, &mut out.norm_exact),
        ] {
            if !f64_end {
                continue;
            }
            let note = if exact.is_some() {
                wide::DECIMAL_ONLY
            } else {
                wide::BEYOND_MPFR
            };
            out.notes.push(format!("{name} {note}"));
            *slot = exact;
        }
    }
    out
}

/// Exact power-of-two exponent `k` that brings the largest magnitude into
/// `[1, 2)`, or the nearest one to it that is exact for every entry (L2).
fn entry_scale(a: &DenseMatrix) -> i32 {
    crate::linalg::dense::exact_scale_of(&a.data)
}

/// `2^-k x` rounded outward: both ends of an enclosure of a quantity held
/// scaled by `2^k` (L2 d); `None` when an end is not finite.
fn unscale(lo: f64, hi: f64, k: i32, what: &str) -> Result<Enclosure, Inconclusive> {
    Enclosure::new(r::scale_pow2_rd(lo.max(0.0), -k), r::scale_pow2_ru(hi, -k))
        .ok_or_else(|| Inconclusive::new(format!("{what} overflowed")))
}

/// Encloses `||A||_F = sqrt(sum_ij a_ij^2)` directly from the entries:
/// error-free products (TwoProduct by FMA) summed by Sum2 with the bound of
/// L12, on the entries exactly rescaled by `2^k` (L2), then an outward
/// square root and the exact unscaling by `2^-k`. The sum of squares itself
/// is never formed unscaled, so it cannot underflow or overflow where the
/// norm does not (tiny and huge matrices alike).
///
/// Where no one power of two scales every entry exactly and keeps the
/// squares in range (entries spanning more than binary64's range, as a
/// two-sided graded `D B D`), the sum is formed in MPFR at 128 bits
/// instead (`enclose_entry_norms_mpfr`; issue 33).
///
/// First of all, entries on a grid `2^q Z` spanning at most 63 bits above
/// it (every float16 matrix, most float32 ones) are summed exactly as
/// integers (`exact_sums`), and the norm is enclosed from that exact sum.
///
/// *Guarantee: certified enclosure* of `||A||_F` ([`proofs/exact-integer-sums.md`](crate::proofs::exact_integer_sums)
/// L39; [`proofs/compensated-sum.md`](crate::proofs::compensated_sum) L12 f, [`proofs/power-of-two-scaling.md`](crate::proofs::power_of_two_scaling)
/// L2, [`proofs/derived-quantities.md`](crate::proofs::derived_quantities) L15 d, g; [`proofs/mpfr-directed.md`](crate::proofs::mpfr_directed)
/// L13 for the MPFR sum).
pub fn enclose_frobenius_from_entries(a: &DenseMatrix) -> Result<Enclosure, Inconclusive> {
    if let Some(f) = exact_sums::exact_entry_sums(a, faer::Par::Seq).and_then(|s| s.frobenius()) {
        return Ok(f);
    }
    frobenius_binary64(a).or_else(|e| enclose_entry_norms_mpfr(a, 128).map(|x| x.0).map_err(|_| e))
}

/// The binary64 route of [`enclose_frobenius_from_entries`] (its lemmas).
fn frobenius_binary64(a: &DenseMatrix) -> Result<Enclosure, Inconclusive> {
    let k = entry_scale(a);
    let mut acc = Sum2::new();
    for &x0 in &a.data {
        let x = r::scale_pow2_rn(x0, k); // exact (L2)
        acc.add_prod(x, x);
    }
    let (lo, hi) = acc.bounds();
    let s = Interval::try_from((lo.max(0.0), hi))
        .map_err(|_| Inconclusive::new("sum of squares overflowed"))?
        .sqrt();
    // max|a| <= ||A||_F <= sqrt(nnz) max|a| (L15 d), on the same exactly
    // scaled entries: keeps an upper end that rounding pushed past the
    // binary64 range (a 1 x 1 matrix holding the largest double) finite.
    let maxabs = a
        .data
        .iter()
        .fold(0.0f64, |m, &x| m.max(r::scale_pow2_rn(x, k).abs()));
    let nnz = a.data.iter().filter(|&&x| x != 0.0).count();
    let cap = if nnz <= 1 {
        maxabs // one nonzero entry: exactly the norm
    } else {
        r::mul_ru(r::sqrt_ru(nnz as f64), maxabs)
    };
    unscale(s.inf().max(maxabs), s.sup().min(cap), k, "Frobenius norm")
}

/// [`enclose_frobenius_from_entries`] and [`enclose_entry_norms`] of `a`:
/// from one pass of exact integer sums where the entries allow (split over
/// the pool's threads, the same sums on any number of them), else the two
/// binary64 passes side by side on two threads of the pool when `par`
/// allows: each is the same sequential computation either way, so the
/// results are the same bits on any number of threads.
///
/// *Guarantee: certified enclosures*, as the two functions (their lemmas;
/// [`proofs/exact-integer-sums.md`](crate::proofs::exact_integer_sums), L39, for the exact sums).
pub(crate) fn enclose_entry_summaries(
    a: &DenseMatrix,
    par: faer::Par,
) -> (
    Result<Enclosure, Inconclusive>,
    Result<(Enclosure, Enclosure), Inconclusive>,
) {
    if let Some(s) = exact_sums::exact_entry_sums(a, par) {
        if let (Some(f), Some(n)) = (s.frobenius(), exact_norms(&s)) {
            return (Ok(f), Ok(n));
        }
    }
    crate::linalg::symeig::join_on_pool(
        par,
        || enclose_frobenius_from_entries(a),
        || enclose_entry_norms(a),
    )
}

/// Encloses the (2,1)-norm `sum_j ||A e_j||_2` (column = second index) and
/// the (1,1)-norm `sum_ij |a_ij|` from the entries exactly rescaled by `2^k`
/// (L2, L12, L3, L15 e).
///
/// Entries beyond what one exact power of two brings into range are summed
/// in MPFR at 128 bits instead, as for [`enclose_frobenius_from_entries`];
/// entries on a narrow enough grid, exactly as integers first (as there).
///
/// *Guarantee: certified enclosures* of both norms ([`proofs/exact-integer-sums.md`](crate::proofs::exact_integer_sums),
/// L39; [`proofs/compensated-sum.md`](crate::proofs::compensated_sum),
/// [`proofs/rn-directed-scalar.md`](crate::proofs::rn_directed_scalar), [`proofs/derived-quantities.md`](crate::proofs::derived_quantities) L15 e, g;
/// [`proofs/mpfr-directed.md`](crate::proofs::mpfr_directed) L13 for the MPFR sums).
pub fn enclose_entry_norms(a: &DenseMatrix) -> Result<(Enclosure, Enclosure), Inconclusive> {
    if let Some(n) = exact_sums::exact_entry_sums(a, faer::Par::Seq).and_then(|s| exact_norms(&s)) {
        return Ok(n);
    }
    entry_norms_binary64(a).or_else(|e| {
        enclose_entry_norms_mpfr(a, 128)
            .map(|x| (x.1, x.2))
            .map_err(|_| e)
    })
}

/// The (2,1)- and (1,1)-norms from exact integer sums, when both are in
/// binary64's range ([`proofs/exact-integer-sums.md`](crate::proofs::exact_integer_sums), L39).
fn exact_norms(s: &exact_sums::ExactEntrySums) -> Option<(Enclosure, Enclosure)> {
    Some((s.norm_21()?, s.norm_11()?))
}

/// The binary64 route of [`enclose_entry_norms`] (its lemmas).
fn entry_norms_binary64(a: &DenseMatrix) -> Result<(Enclosure, Enclosure), Inconclusive> {
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
    // max|a| <= ||A||_{2,1} <= ||A||_{1,1} <= nnz max|a| (L15 e; each
    // column norm is at most its 1-norm): clamps that keep a representable
    // norm (one entry holding the largest double) finite.
    let maxabs = a
        .data
        .iter()
        .fold(0.0f64, |m, &x| m.max(r::scale_pow2_rn(x, k).abs()));
    let nnz = a.data.iter().filter(|&&x| x != 0.0).count();
    let cap = if nnz <= 1 {
        maxabs
    } else {
        r::mul_ru(nnz as f64, maxabs)
    };
    let (lo11, hi11) = abs.bounds();
    let hi11 = hi11.min(cap);
    let n21 = unscale(
        lo_sum.bounds().0.max(maxabs),
        hi_sum.bounds().1.min(hi11),
        k,
        "(2,1)-norm",
    )?;
    let n11 = unscale(lo11.max(maxabs), hi11, k, "(1,1)-norm")?;
    Ok((n21, n11))
}

/// Bits of the MPFR sums of [`enclose_entry_norms_at`]: the sums are of
/// nonnegative terms, so `k` terms at 128 bits are within a relative
/// `k 2^-128` of the exact sum, far below the binary64 ulp the result is
/// stated in (more bits would not move its ends, and `mpfr:1000000` would
/// make every entry cost a million-bit operation).
pub(crate) const ENTRY_NORMS_BITS: u32 = 128;

/// The Frobenius, (2,1) and (1,1) norms of `a` from its entries, as tight
/// as `precision` asks: in binary64 ([`enclose_frobenius_from_entries`],
/// [`enclose_entry_norms`]) and, at `extended` and `mpfr:N`, also summed in
/// MPFR at `ENTRY_NORMS_BITS` bits (`enclose_entry_norms_mpfr`),
/// each norm the intersection of its two enclosures, so that the norms (and
/// what is formed from them: `spectra`'s `norm` and `log_norm`, the
/// measures' Frobenius and (2,1) parts) tighten with the precision as the
/// singular values do (issue 33). A failed MPFR evaluation (an end beyond
/// binary64) leaves the binary64 enclosures.
///
/// *Guarantee: certified enclosures* of the three norms
/// ([`proofs/compensated-sum.md`](crate::proofs::compensated_sum), L12; [`proofs/mpfr-directed.md`](crate::proofs::mpfr_directed), L13;
/// [`proofs/derived-quantities.md`](crate::proofs::derived_quantities), L15 d, e, g; an intersection of two
/// enclosures of one value, [`proofs/sorting-lemma.md`](crate::proofs::sorting_lemma), L10 b).
pub fn enclose_entry_norms_at(
    a: &DenseMatrix,
    precision: crate::linalg::Precision,
) -> Result<(Enclosure, Enclosure, Enclosure), Inconclusive> {
    enclose_entry_norms_par(a, precision, faer::Par::Seq)
}

/// [`enclose_entry_norms_at`], with its two binary64 passes side by side on
/// two threads of the pool when `par` allows. Each pass is the same
/// sequential computation either way, so the results are the same bits on
/// any number of threads.
///
/// *Guarantee: certified enclosures*, as [`enclose_entry_norms_at`] (its
/// lemmas).
pub(crate) fn enclose_entry_norms_par(
    a: &DenseMatrix,
    precision: crate::linalg::Precision,
    par: faer::Par,
) -> Result<(Enclosure, Enclosure, Enclosure), Inconclusive> {
    use crate::linalg::Precision;
    let (frob, norms) = enclose_entry_summaries(a, par);
    let frob = frob?;
    let (n21, n11) = norms?;
    if matches!(precision, Precision::F64 | Precision::Auto) {
        return Ok((frob, n21, n11));
    }
    let Ok((f, n, s)) = enclose_entry_norms_mpfr(a, ENTRY_NORMS_BITS) else {
        return Ok((frob, n21, n11));
    };
    let both = |x: Enclosure, y: Enclosure| {
        x.intersect(&y).ok_or_else(|| {
            Inconclusive::new("internal consistency check failed: two norm enclosures are disjoint")
        })
    };
    Ok((both(frob, f)?, both(n21, n)?, both(n11, s)?))
}

/// Certified summary of one matrix from its certified singular values and
/// its entries (L15).
pub fn summarize(a: &DenseMatrix, sv: &SingularValues) -> Result<SpectralSummary, Inconclusive> {
    let frob = enclose_frobenius_from_entries(a)?;
    let (norm_21, norm_11) = enclose_entry_norms(a)?;
    summarize_with(sv, frob, norm_21, norm_11)
}

/// [`crate::linalg::certify_singular_values`] of `a`, then [`summarize`],
/// for a matrix the caller gives up: the same values and the same first
/// error as the two calls, with `a` held no longer than needed. The matrix
/// is checked, its entry norms are enclosed, and it is prepared (exactly
/// scaled, L2: in its own buffer when wide, else as a copy after which it
/// is dropped, `dense::prepare_owned`) before the certification allocates
/// its working set (`docs/spectra.md`, "Memory").
///
/// *Guarantee: certified enclosure* of every value: the singular values by
/// [`crate::linalg::certify_prepared`] (which names its lemmas, as
/// [`crate::linalg::certify_singular_values`]), the summary by
/// [`enclose_entry_norms_at`] (at `opts.precision`) and
/// [`summarize_with`] ([`proofs/derived-quantities.md`](crate::proofs::derived_quantities) L15,
/// [`proofs/compensated-sum.md`](crate::proofs::compensated_sum) L12, [`proofs/mpfr-directed.md`](crate::proofs::mpfr_directed) L13).
pub(crate) fn certify_and_summarize(
    a: DenseMatrix,
    opts: &crate::linalg::SvdOptions,
) -> Result<(SingularValues, SpectralSummary), Inconclusive> {
    let (rows, cols) = (a.rows, a.cols);
    crate::linalg::check_preparable(&a)?;
    if a.data.iter().all(|&x| x == 0.0) {
        let sv = crate::linalg::zero_singular_values(rows, cols);
        let summary = summarize(&a, &sv)?;
        return Ok((sv, summary));
    }
    let norms = enclose_entry_norms_par(&a, opts.precision, opts.par);
    // Checked above: not a second pass over the entries.
    let prep = crate::linalg::prepare_owned_after_check(a)
        .expect("a matrix with a nonzero entry is prepared");
    let sv = crate::linalg::certify_prepared(&prep, rows, cols, opts)?;
    drop(prep);
    let (frob, norm_21, norm_11) = norms?;
    let summary = summarize_with(&sv, frob, norm_21, norm_11)?;
    Ok((sv, summary))
}

/// Certified summary of `A = B C` from its certified singular values and
/// enclosures of its entries formed from the factors (L4, L12, L15).
pub fn summarize_factored(
    b: &DenseMatrix,
    c: &DenseMatrix,
    sv: &SingularValues,
) -> Result<SpectralSummary, Inconclusive> {
    let (frob, norm_21, norm_11) = enclose_product_entry_norms(b, c)?;
    summarize_with(sv, frob, norm_21, norm_11)
}

/// Encloses the Frobenius norm, the (2,1)-norm and the (1,1)-norm of
/// `X = B C` without the exact product. Both factors are first rescaled
/// exactly, `B' = 2^kb B` and `C' = 2^kc C` (L2), so that `X' = B' C'` is
/// `2^(kb+kc) X` and nothing under- or overflows where the norms of `X` do
/// not. `Y = fl(B' C')` differs from `X'` entrywise by at most
/// `gamma_r (|B'||C'|)_ij + r eta` (L4), so column `j` of `X' - Y` has
/// 1-norm at most `e_j = gamma_r (1^T|B'|) |c'_j| + m r eta`, a dot product
/// of two r-vectors bounded from above (L3 b). Then
/// `| ||x'_j|| - ||y_j|| | <= e_j` and `| ||x'_j||_1 - ||y_j||_1 | <= e_j`
/// (triangle inequality), the norms of the computed `Y` are bounded with
/// L3 b, and the results are unscaled by `2^-(kb+kc)`.
///
/// *Guarantee: certified enclosures* of the three norms of the exact
/// product ([`proofs/dot-product-error.md`](crate::proofs::dot_product_error) L4, [`proofs/rn-directed-scalar.md`](crate::proofs::rn_directed_scalar)
/// L3, [`proofs/compensated-sum.md`](crate::proofs::compensated_sum) L12, [`proofs/derived-quantities.md`](crate::proofs::derived_quantities) L15 g).
pub fn enclose_product_entry_norms(
    b: &DenseMatrix,
    c: &DenseMatrix,
) -> Result<(Enclosure, Enclosure, Enclosure), Inconclusive> {
    use faer::{Accum, Mat, Par};
    let (m, rr, n) = (b.rows, b.cols, c.cols);
    let (kb, kc) = (entry_scale(b), entry_scale(c));
    let bm = crate::linalg::dense::to_faer_scaled(b, kb);
    let cm = crate::linalg::dense::to_faer_scaled(c, kc);
    // Y is formed a block of columns at a time (each entry is the same
    // length-r dot product, in whatever order the GEMM takes it: L4 covers
    // any order), so that the m x n product never lives in memory whole.
    const BLOCK: usize = 256;
    let mut y = Mat::<f64>::zeros(m, BLOCK.min(n));
    // w = upper bound of 1^T |B'| (column sums of |B'|), an r-vector.
    let w: Vec<f64> = (0..rr)
        .map(|k| r::nonneg_sum_ru((0..m).fold(0.0, |acc, i| acc + bm[(i, k)].abs()), m))
        .collect();
    let gam = r::gamma_ru(rr);
    let under = r::mul_ru((m * rr) as f64, crate::linalg::rounding::ETA);
    let (mut sq_lo, mut sq_hi) = (Sum2::new(), Sum2::new());
    let (mut a_lo, mut a_hi) = (Sum2::new(), Sum2::new());
    let (mut n21_lo, mut n21_hi) = (Sum2::new(), Sum2::new());
    // Each column's sum of squares and of magnitudes (four columns side by
    // side: the same bits as one at a time).
    let mut sums = Vec::with_capacity(BLOCK);
    for j in 0..n {
        let jj = j % BLOCK;
        if jj == 0 {
            let width = BLOCK.min(n - j);
            faer::linalg::matmul::matmul(
                y.as_mut().subcols_mut(0, width),
                Accum::Replace,
                bm.as_ref(),
                cm.as_ref().subcols(j, width),
                1.0,
                Par::Seq,
            );
            sums.clear();
            let mut q = 0;
            while q + 4 <= width {
                sums.extend(r::sum_sq_and_abs_many(std::array::from_fn::<_, 4, _>(
                    |l| y.col_as_slice(q + l),
                )));
                q += 4;
            }
            sums.extend((q..width).map(|q| r::sum_sq_and_abs(y.col_as_slice(q))));
        }
        let dot = (0..rr).fold(0.0, |acc, k| w[k].mul_add(cm[(k, j)].abs(), acc));
        let e = r::add_ru(r::mul_ru(gam, r::nonneg_sum_ru(dot, rr)), under);
        let (s2, s1) = sums[jj];
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
    let k = kb + kc;
    let frob = Interval::try_from((sq_lo.bounds().0.max(0.0), sq_hi.bounds().1))
        .map_err(|_| Inconclusive::new("sum of squares overflowed"))?
        .sqrt();
    Ok((
        unscale(frob.inf(), frob.sup(), k, "Frobenius norm")?,
        unscale(n21_lo.bounds().0, n21_hi.bounds().1, k, "(2,1)-norm")?,
        unscale(a_lo.bounds().0, a_hi.bounds().1, k, "(1,1)-norm")?,
    ))
}

/// `2^e` with `e` the binary exponent of the upper end of sigma_1 (0 for a
/// zero matrix): scaling every value by `2^-e` keeps squares and quotients
/// in range for tiny and huge matrices (L2).
fn sigma_scale(sv: &SingularValues) -> i32 {
    let top = sv.values.first().map(|v| v.enclosure.hi()).unwrap_or(0.0);
    if top > 0.0 {
        crate::linalg::dense::exponent_of(top)
    } else {
        0
    }
}

/// The interval `2^-e [lo, hi]`, rounded outward (L2).
fn scaled_iv(x: &Enclosure, e: i32) -> Interval {
    Interval::try_from((r::scale_pow2_rd(x.lo(), -e), r::scale_pow2_ru(x.hi(), -e)))
        .expect("ordered finite ends")
}

/// Certified summary from certified singular values and direct enclosures
/// of the Frobenius norm, the (2,1)-norm and the (1,1)-norm (L15). The sum
/// of squared singular values and the stable rank are formed on the values
/// scaled by `2^-e` (sigma_1 near 1, L2), so they neither underflow for tiny
/// matrices nor overflow for huge ones.
///
/// *Guarantee: certified enclosure* of every field, given enclosures as
/// inputs ([`proofs/derived-quantities.md`](crate::proofs::derived_quantities) L15, [`proofs/sorting-lemma.md`](crate::proofs::sorting_lemma) L10 b
/// for the Frobenius intersection).
pub(crate) fn summarize_with(
    sv: &SingularValues,
    frob_direct: Enclosure,
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
    let e = sigma_scale(sv);
    let frob_sv_scaled = sv
        .values
        .iter()
        .fold(zero, |acc, v| acc + scaled_iv(&v.enclosure, e).sqr())
        .sqrt();
    // The singular-value route may overflow where the direct one does not
    // (its upper end is a sum of rounded-up squares): the direct enclosure
    // alone is then the answer.
    let frobenius = match unscale(
        frob_sv_scaled.inf(),
        frob_sv_scaled.sup(),
        -e,
        "Frobenius norm",
    ) {
        Ok(frob_sv) => frob_sv.intersect(&frob_direct).ok_or_else(|| {
            Inconclusive::new(
                "internal consistency check failed: the two Frobenius enclosures are disjoint",
            )
        })?,
        Err(_) => frob_direct,
    };
    let rank = enclose_rank(sv);
    let stable_rank = if spectral.lo() > 0.0 {
        let f = scaled_iv(&frobenius, e);
        let s = scaled_iv(&spectral, e);
        // 1 <= srank <= rank for A != 0 (L15 f): a quotient left unbounded
        // (sigma_1's lower end far below its upper end) still gives that.
        let bound = Interval::try_from((1.0, (rank.hi as f64).max(1.0))).expect("1 <= hi");
        let q = f.sqr() / s.sqr();
        let q = if q.is_common_interval() {
            q.intersection(bound)
        } else {
            bound
        };
        if q.is_empty() {
            return Err(Inconclusive::new(
                "internal consistency check failed: the stable rank lies outside [1, rank]",
            ));
        }
        Enclosure::from_interval(q)
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
        rank,
    })
}
