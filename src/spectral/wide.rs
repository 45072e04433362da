//! Quantities whose value exceeds binary64 (issue 19, item 5): `sum
//! sigma_i^p` or its root for singular values near 2^1000, `||W||_F^2`.
//! Their binary64 enclosure is unbounded, so they are enclosed here in MPFR,
//! whose exponent range is about 2^+-2^62, with directed rounding (L13) by
//! the monotone interval formulas of L15 b, and written as decimal ends
//! rounded outward ([`proofs/mpfr-directed.md`](crate::proofs::mpfr_directed), L13;
//! [`proofs/derived-quantities.md`](crate::proofs::derived_quantities), L15). Where even MPFR overflows, the note
//! says so ([`BEYOND_MPFR`]).

use inari::Interval;
use rug::float::Round;
use rug::ops::Pow;
use rug::Float;

use crate::enclosure::Enclosure;
use crate::linalg::ExactBounds;

/// Working precision (bits) of the wide enclosures.
const PREC: u32 = 128;

/// Significant decimal digits of the decimal ends.
const DIGITS: usize = 40;

/// The note of a quantity whose value exceeds even MPFR's exponent range
/// (the binary64 lower end stands, the upper end is unbounded).
pub(crate) const BEYOND_MPFR: &str = "exceeds the largest double and MPFR's exponent range: \
     the binary64 lower end stands, no finite upper end";

/// The note of a quantity given by decimal ends only.
pub(crate) const DECIMAL_ONLY: &str = "exceeds the largest double: enclosed by the decimal ends \
     `lo_exact`/`hi_exact` only";

/// `x^p` bounds over `x in [xl, xh]` (`0 <= xl <= xh`), `p in [pl, ph]`
/// (`pl > 0`): `x^p` increases with x, and with p for x >= 1 and decreases
/// with p for x < 1, so its extremes are at the corners.
fn pow_bounds(xl: &Float, xh: &Float, pl: &Float, ph: &Float) -> (Float, Float) {
    let pw = |x: &Float, p: &Float, r: Round| Float::with_val_round(PREC, x.pow(p), r).0;
    let lo1 = pw(xl, pl, Round::Down);
    let lo2 = pw(xl, ph, Round::Down);
    let hi1 = pw(xh, pl, Round::Up);
    let hi2 = pw(xh, ph, Round::Up);
    let lo = if lo1 <= lo2 { lo1 } else { lo2 };
    let hi = if hi1 >= hi2 { hi1 } else { hi2 };
    (lo, hi)
}

fn decimal(lo: &Float, hi: &Float) -> Option<ExactBounds> {
    if !(lo.is_finite() && hi.is_finite()) || lo.is_nan() || hi.is_nan() {
        return None;
    }
    Some(ExactBounds {
        lo: lo.to_string_radix_round(10, Some(DIGITS), Round::Down),
        hi: hi.to_string_radix_round(10, Some(DIGITS), Round::Up),
    })
}

fn float(x: f64) -> Float {
    Float::with_val(PREC, x)
}

/// Encloses `sum_i sigma_i^p` and `(sum_i sigma_i^p)^(1/p)` for every exact
/// `p` in `p` (`p.inf() > 0`) and singular values in `values`, as decimal
/// ends (`None` for an end pair that leaves MPFR's range).
///
/// *Guarantee: certified enclosure* of both quantities (L15 b, L13): the
/// terms are bounded by directed MPFR powers at the corners of the boxes,
/// summed with directed rounding, and the root is bounded by the same
/// corner argument with `1/p in [1/p_hi, 1/p_lo]` rounded outward.
pub(crate) fn schatten_exact(
    values: &[Enclosure],
    p: Interval,
) -> (Option<ExactBounds>, Option<ExactBounds>) {
    if !(p.inf() > 0.0) || !p.sup().is_finite() {
        return (None, None);
    }
    let (pl, ph) = (float(p.inf()), float(p.sup()));
    let mut s_lo = Float::new(PREC);
    let mut s_hi = Float::new(PREC);
    for v in values {
        if v.hi() == 0.0 {
            continue;
        }
        let (l, h) = pow_bounds(&float(v.lo()), &float(v.hi()), &pl, &ph);
        s_lo = Float::with_val_round(PREC, &s_lo + &l, Round::Down).0;
        s_hi = Float::with_val_round(PREC, &s_hi + &h, Round::Up).0;
    }
    let power = decimal(&s_lo, &s_hi);
    let qlo = Float::with_val_round(PREC, ph.recip_ref(), Round::Down).0;
    let qhi = Float::with_val_round(PREC, pl.recip_ref(), Round::Up).0;
    let (nl, nh) = pow_bounds(&s_lo, &s_hi, &qlo, &qhi);
    (power, decimal(&nl, &nh))
}

/// Encloses `x^2` for `x` in `e` as decimal ends (L13): `||W||_F^2` and
/// `sigma_max^2` beyond binary64.
///
/// *Guarantee: certified enclosure* (squares rounded down and up, L13).
pub(crate) fn square_exact(e: &Enclosure) -> Option<ExactBounds> {
    let lo = Float::with_val_round(PREC, float(e.lo()).square_ref(), Round::Down).0;
    let hi = Float::with_val_round(PREC, float(e.hi()).square_ref(), Round::Up).0;
    decimal(&lo, &hi)
}
