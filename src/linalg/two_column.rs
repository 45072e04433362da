//! Both singular values of a matrix with two columns (or two rows) from two
//! exact rationals ([`proofs/two-column.md`](crate::proofs::two_column), L32): `sigma_1^2 + sigma_2^2` is
//! the squared Frobenius norm and `sigma_1^2 sigma_2^2 = det(A^T A)`, both
//! sums of products of binary64 entries, so exact rationals; the two roots
//! of `t^2 - F t + D` are then evaluated in MPFR with directed rounding.
//! A 2 x 2 (or m x 2) matrix with extreme entries, whose smallest value the
//! residual routes leave touching 0 (cancellation in binary64), is decided
//! this way as tightly as binary64 can state it.

use rug::float::Round;
use rug::{Float, Rational};

use super::{CertifiedValue, ExactBounds, Method, SingularValues};
use crate::enclosure::Enclosure;

/// Entries above which the exact route is not taken (the rationals are sums
/// of `rows` products of up to 2100-bit numbers).
const MAX_ROWS: usize = 1 << 16;

/// Bits of the MPFR evaluation.
const PREC: u32 = 256;

fn q(x: f64) -> Rational {
    Rational::from_f64(x).expect("finite")
}

fn fl(x: &Rational, r: Round) -> Float {
    Float::with_val_round(PREC, x, r).0
}

/// Enclosures of `sigma_1 >= sigma_2` of `2^-k [x y]`, the `rows x 2`
/// matrix whose columns are `x` and `y` (binary64 entries, exact) scaled by
/// `2^-k` (exactly, in MPFR), or `None` when a value leaves binary64's
/// range or the matrix is too large.
///
/// *Guarantee: certified enclosure* of both singular values
/// ([`proofs/two-column.md`](crate::proofs::two_column), L32; [`proofs/mpfr-directed.md`](crate::proofs::mpfr_directed), L13).
#[cfg(test)]
pub(crate) fn enclose(x: &[f64], y: &[f64], k: i32) -> Option<[Enclosure; 2]> {
    enclose_with_ends(x, y, k).map(|v| v.map(|(e, _)| e))
}

/// [`enclose`], with each value's MPFR ends as decimal strings rounded
/// outward (tighter than binary64 can state where a value lies below the
/// least positive double).
///
/// *Guarantee: certified enclosure* of both singular values, by both the
/// binary64 and the decimal ends ([`proofs/two-column.md`](crate::proofs::two_column), L32;
/// [`proofs/mpfr-directed.md`](crate::proofs::mpfr_directed), L13).
pub(crate) fn enclose_with_ends(
    x: &[f64],
    y: &[f64],
    k: i32,
) -> Option<[(Enclosure, ExactBounds); 2]> {
    if x.len() != y.len() || x.len() > MAX_ROWS || x.iter().chain(y).any(|v| !v.is_finite()) {
        return None;
    }
    let (mut sxx, mut syy, mut sxy) = (Rational::new(), Rational::new(), Rational::new());
    for (&a, &b) in x.iter().zip(y) {
        let (a, b) = (q(a), q(b));
        sxx += a.clone() * &a;
        syy += b.clone() * &b;
        sxy += a * b;
    }
    let f = Rational::from(&sxx + &syy);
    let d = Rational::from(&sxx * &syy) - Rational::from(&sxy * &sxy);
    let disc = Rational::from(&f * &f) - Rational::from(4 * &d);
    let root = |r: Round| {
        let mut s = fl(&disc, r);
        s.sqrt_round(r);
        s
    };
    let (s_lo, s_hi) = (root(Round::Down), root(Round::Up));
    // sigma_1^2 = (F + s) / 2, increasing in F and s.
    let s1sq = |r: Round, s: &Float| {
        let t = Float::with_val_round(PREC, &fl(&f, r) + s, r).0;
        Float::with_val_round(PREC, &t / 2u32, r).0
    };
    // sigma_2^2 = 2 D / (F + s), increasing in D, decreasing in F and s.
    let s2sq = |r: Round, rev: Round, s: &Float| {
        let den = Float::with_val_round(PREC, &fl(&f, rev) + s, rev).0;
        let num = Float::with_val_round(PREC, &fl(&d, r) * 2u32, r).0;
        Float::with_val_round(PREC, &num / &den, r).0
    };
    // sqrt, then times 2^-k: exact in MPFR (its exponent range is far wider
    // than binary64's), then one directed rounding to binary64.
    let root = |mut v: Float, r: Round| {
        v.sqrt_round(r);
        v >>= k;
        v
    };
    let both = |lo: Float, hi: Float| {
        let e = Enclosure::new(lo.to_f64_round(Round::Down), hi.to_f64_round(Round::Up))?;
        let ends = ExactBounds {
            lo: lo.to_string_radix_round(10, Some(DIGITS), Round::Down),
            hi: hi.to_string_radix_round(10, Some(DIGITS), Round::Up),
        };
        Some((e, ends))
    };
    let s1 = both(
        root(s1sq(Round::Down, &s_lo), Round::Down),
        root(s1sq(Round::Up, &s_hi), Round::Up),
    )?;
    let s2 = if d == 0 {
        both(Float::new(PREC), Float::new(PREC))?
    } else {
        both(
            root(s2sq(Round::Down, Round::Up, &s_hi), Round::Down),
            root(s2sq(Round::Up, Round::Down, &s_lo), Round::Up),
        )?
    };
    Some([s1, s2])
}

/// Significant digits of the decimal ends (above the 256-bit evaluation's
/// 77, so that they round only outward once).
const DIGITS: usize = 80;

/// The singular values of the `rows x cols` matrix `A` from its
/// preparation (`2^k A` or `2^k A^T`, exactly, `m >= n`) when
/// `min(rows, cols) == 2`, by [`enclose`], as a stage's result (method
/// `exact-two-column`); `None` otherwise.
///
/// *Guarantee: certified enclosure*, as [`enclose`] ([`proofs/two-column.md`](crate::proofs::two_column),
/// L32; [`proofs/power-of-two-scaling.md`](crate::proofs::power_of_two_scaling), L2).
pub(crate) fn certify(
    prep: &super::dense::Prepared,
    rows: usize,
    cols: usize,
) -> Option<SingularValues> {
    let a = prep.a();
    if a.ncols() != 2 || a.nrows() < 2 {
        return None;
    }
    let x: Vec<f64> = a.col(0).iter().copied().collect();
    let y: Vec<f64> = a.col(1).iter().copied().collect();
    let [s1, s2] = enclose_with_ends(&x, &y, prep.scale_exp)?;
    // The decimal ends only where binary64 cannot state the value: a
    // value below the least positive double (its lower end 0 otherwise).
    let value = |(e, ends): (Enclosure, ExactBounds)| CertifiedValue {
        enclosure: e,
        method: Method::ExactTwoColumn,
        cluster_size: 1,
        exact: (e.lo() == 0.0 && e.hi() > 0.0).then_some(ends),
    };
    Some(SingularValues {
        rows,
        cols,
        values: vec![value(s1), value(s2)],
        structural_zeros: 0,
        notes: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extreme_two_by_two_is_decided() {
        let t = 2f64.powi(-149);
        let [s1, s2] = enclose(&[f64::from(f32::MAX), t], &[t, 0.0], 0).unwrap();
        assert!(s2.lo() > 0.0, "{s2:?}");
        // sigma_1 sigma_2 = |det| = 2^-298 exactly (products exact here).
        let det = 2f64.powi(-298);
        assert!(s1.lo() * s2.lo() <= det && det <= s1.hi() * s2.hi());
        let [_, z] = enclose(&[1.0, 2.0], &[2.0, 4.0], 0).unwrap();
        assert_eq!(z.hi(), 0.0);
        // 2^-1074 [[1, 0], [2, 1]]: sigma_2 = (sqrt 2 - 1) 2^-1074 lies
        // below the least positive double: [0, 2^-1074].
        let [_, s2] = enclose(&[1.0, 2.0], &[0.0, 1.0], 1074).unwrap();
        assert_eq!((s2.lo(), s2.hi()), (0.0, 2f64.powi(-1074)));
    }
}
