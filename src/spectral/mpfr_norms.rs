//! Entry norms of a matrix, or of a product `B C` of two matrices, in MPFR
//! with directed rounding: the route `verify --model` takes when the f64
//! enclosures of the Frobenius, (2,1) and (1,1) norms are too wide to
//! confirm a stated interval. Slow (one MPFR operation per term), so it is
//! used on demand only.

use rug::float::Round;
use rug::{Assign, Float};

use crate::enclosure::{Enclosure, Inconclusive};
use crate::matrix::DenseMatrix;

/// `[lo, hi]` of one entry (or of a sum), MPFR ends.
struct Bounds {
    lo: Float,
    hi: Float,
}

// The operands must be references: `&a + &b` is an incomplete value that
// MPFR evaluates once, rounded in the direction asked. (`a + b` by value
// would round to nearest first, and converting that is no bound.)
macro_rules! down {
    ($prec:expr, $e:expr) => {
        Float::with_val_round($prec, $e, Round::Down).0
    };
}

macro_rules! up {
    ($prec:expr, $e:expr) => {
        Float::with_val_round($prec, $e, Round::Up).0
    };
}

/// Enclosures of the Frobenius norm `sqrt(sum_ij a_ij^2)`, of the (2,1)-norm `sum_j ||a_j||` (columns
/// = second index) and of the (1,1)-norm `sum_ij |a_ij|`, where `a_ij` is
/// `entry(i, j)` with its bounds `[lo, hi]` (equal for an exact entry).
fn norms_of(
    rows: usize,
    cols: usize,
    prec: u32,
    entry: impl Fn(usize, usize) -> Bounds,
) -> Result<(Enclosure, Enclosure, Enclosure), Inconclusive> {
    let zero = || Float::with_val(prec, 0);
    let (mut sq_lo, mut sq_hi) = (zero(), zero());
    let (mut n21_lo, mut n21_hi) = (zero(), zero());
    let (mut n11_lo, mut n11_hi) = (zero(), zero());
    for j in 0..cols {
        let (mut c_lo, mut c_hi) = (zero(), zero());
        for i in 0..rows {
            let b = entry(i, j);
            // |a| lies in [alo, ahi], both >= 0 (L13 4: |.| is monotone on each side of 0).
            // Negation is exact.
            let (alo, ahi) = if b.lo >= 0 {
                (b.lo, b.hi)
            } else if b.hi <= 0 {
                (-b.hi, -b.lo)
            } else {
                let neg_lo = -b.lo;
                let m = if neg_lo > b.hi { neg_lo } else { b.hi };
                (zero(), m)
            };
            n11_lo = down!(prec, &n11_lo + &alo);
            n11_hi = up!(prec, &n11_hi + &ahi);
            let (s_lo, s_hi): (Float, Float) = (down!(prec, &alo * &alo), up!(prec, &ahi * &ahi));
            c_lo = down!(prec, &c_lo + &s_lo);
            c_hi = up!(prec, &c_hi + &s_hi);
        }
        let (mut r_lo, mut r_hi) = (c_lo.clone(), c_hi.clone());
        r_lo.sqrt_round(Round::Down);
        r_hi.sqrt_round(Round::Up);
        n21_lo = down!(prec, &n21_lo + &r_lo);
        n21_hi = up!(prec, &n21_hi + &r_hi);
        sq_lo = down!(prec, &sq_lo + &c_lo);
        sq_hi = up!(prec, &sq_hi + &c_hi);
    }
    // The Frobenius norm: directed square roots of the directed sums.
    sq_lo.sqrt_round(Round::Down);
    sq_hi.sqrt_round(Round::Up);
    three_enclosures([(&sq_lo, &sq_hi), (&n21_lo, &n21_hi), (&n11_lo, &n11_hi)])
}

/// Encloses the Frobenius norm, the (2,1)-norm and the (1,1)-norm of `a` in
/// MPFR at `prec >= 53` bits with directed rounding.
///
/// *Guarantee: certified enclosure* of each of the three exact values
/// ([`proofs/mpfr-directed.md`](crate::proofs::mpfr_directed), L13: exact inputs, directed sums and
/// products of nonnegative bounds, directed square roots and conversions;
/// [`proofs/derived-quantities.md`](crate::proofs::derived_quantities), L15 e, for the norms as monotone
/// functions of the entries' magnitudes).
pub(crate) fn enclose_entry_norms_mpfr(
    a: &DenseMatrix,
    prec: u32,
) -> Result<(Enclosure, Enclosure, Enclosure), Inconclusive> {
    let prec = prec.max(53);
    if prec >= 106 {
        return exact_entry_norms(a, prec);
    }
    norms_of(a.rows, a.cols, prec, |i, j| {
        let x = Float::with_val(prec, a.get(i, j));
        Bounds {
            lo: x.clone(),
            hi: x,
        }
    })
}

/// [`enclose_entry_norms_mpfr`] at `prec >= 106` bits, without allocating
/// per entry: each `|a_ij|` is a binary64 number, added to the (1,1) sums
/// with directed rounding, and its square is exact at 106 bits or more
/// (two 53-bit significands; MPFR's exponent range holds it), added to the
/// column's sums with directed rounding (L13).
fn exact_entry_norms(
    a: &DenseMatrix,
    prec: u32,
) -> Result<(Enclosure, Enclosure, Enclosure), Inconclusive> {
    use rug::ops::AddAssignRound;
    let zero = || Float::with_val(prec, 0);
    let (mut sq_lo, mut sq_hi) = (zero(), zero());
    let (mut n21_lo, mut n21_hi) = (zero(), zero());
    let (mut n11_lo, mut n11_hi) = (zero(), zero());
    // Row by row (the storage order), one pair of sums per column.
    let mut c_lo: Vec<Float> = (0..a.cols).map(|_| zero()).collect();
    let mut c_hi = c_lo.clone();
    let (mut x2, mut r) = (zero(), zero());
    for row in a.data.chunks_exact(a.cols.max(1)) {
        for ((&x, lo), hi) in row.iter().zip(&mut c_lo).zip(&mut c_hi) {
            let x = x.abs();
            if x == 0.0 {
                continue;
            }
            n11_lo.add_assign_round(x, Round::Down);
            n11_hi.add_assign_round(x, Round::Up);
            x2.assign(x);
            x2.square_mut(); // exact: 106 significant bits suffice
            lo.add_assign_round(&x2, Round::Down);
            hi.add_assign_round(&x2, Round::Up);
        }
    }
    for (c_lo, c_hi) in c_lo.iter().zip(&c_hi) {
        sq_lo.add_assign_round(c_lo, Round::Down);
        sq_hi.add_assign_round(c_hi, Round::Up);
        r.assign(c_lo);
        r.sqrt_round(Round::Down);
        n21_lo.add_assign_round(&r, Round::Down);
        r.assign(c_hi);
        r.sqrt_round(Round::Up);
        n21_hi.add_assign_round(&r, Round::Up);
    }
    sq_lo.sqrt_round(Round::Down);
    sq_hi.sqrt_round(Round::Up);
    three_enclosures([(&sq_lo, &sq_hi), (&n21_lo, &n21_hi), (&n11_lo, &n11_hi)])
}

/// Encloses the Frobenius norm, the (2,1)-norm and the (1,1)-norm of the
/// exact product `X = B C` in MPFR at `prec >= 106` bits: each entry is
/// enclosed by directed dot products of exact terms, then as for a dense
/// matrix.
///
/// *Guarantee: certified enclosure* of each of the three exact values
/// ([`proofs/mpfr-directed.md`](crate::proofs::mpfr_directed), L13 3 for the directed dot products, then as
/// [`enclose_entry_norms_mpfr`]).
pub(crate) fn enclose_product_entry_norms_mpfr(
    b: &DenseMatrix,
    c: &DenseMatrix,
    prec: u32,
) -> Result<(Enclosure, Enclosure, Enclosure), Inconclusive> {
    let prec = prec.max(106);
    norms_of(b.rows, c.cols, prec, |i, j| {
        let (mut lo, mut hi) = (Float::with_val(prec, 0), Float::with_val(prec, 0));
        for k in 0..b.cols {
            // Products of two f64 are exact at 106 bits or more (L13 2); the
            // sums are rounded in the direction of each bound (L13 3).
            let (x, y) = (
                Float::with_val(prec, b.get(i, k)),
                Float::with_val(prec, c.get(k, j)),
            );
            let p: Float = down!(prec, &x * &y);
            debug_assert_eq!(p, up!(prec, &x * &y));
            lo = down!(prec, &lo + &p);
            hi = up!(prec, &hi + &p);
        }
        Bounds { lo, hi }
    })
}

/// The Frobenius, (2,1) and (1,1) norms from their directed MPFR bounds
/// (each pair `(lo, hi)`), rounded outward to binary64 (L13).
fn three_enclosures(
    [f, n21, n11]: [(&Float, &Float); 3],
) -> Result<(Enclosure, Enclosure, Enclosure), Inconclusive> {
    let enc = |(lo, hi): (&Float, &Float), what: &str| {
        Enclosure::new(
            lo.to_f64_round(Round::Down).max(0.0),
            hi.to_f64_round(Round::Up),
        )
        .ok_or_else(|| Inconclusive::new(format!("{what} overflowed f64")))
    };
    Ok((
        enc(f, "Frobenius norm")?,
        enc(n21, "(2,1)-norm")?,
        enc(n11, "(1,1)-norm")?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rug::Rational;

    /// `sqrt(q)` lies in `e`, decided on squares (exact rationals).
    fn contains_sqrt(e: &Enclosure, q: &Rational) -> bool {
        let (lo, hi) = (
            Rational::from_f64(e.lo()).unwrap(),
            Rational::from_f64(e.hi()).unwrap(),
        );
        lo.clone() * lo <= *q && *q <= hi.clone() * hi
    }

    fn contains_rational(e: &Enclosure, q: &Rational) -> bool {
        Rational::from_f64(e.lo()).unwrap() <= *q && *q <= Rational::from_f64(e.hi()).unwrap()
    }

    #[test]
    fn dense_norms_contain_the_exact_rational_values() {
        // Columns (3, 4), (-6, 8), (0.75, -1) * 2^-600: column norms 5, 10
        // and 1.25 * 2^-600 exactly; the (1,1)-norm and squares are rational.
        let t = 2f64.powi(-600);
        let a = DenseMatrix {
            rows: 2,
            cols: 3,
            data: vec![3.0, -6.0, 0.75 * t, 4.0, 8.0, -t],
        };
        let (frob, n21, n11) = enclose_entry_norms_mpfr(&a, 128).unwrap();
        let q = |x: f64| Rational::from_f64(x).unwrap();
        let exact_sq: Rational = a.data.iter().map(|&x| q(x) * q(x)).sum();
        let exact_11: Rational = a.data.iter().map(|&x| q(x).abs()).sum();
        let exact_21 = q(15.0) + q(1.25 * t);
        assert!(contains_sqrt(&frob, &exact_sq));
        assert!(contains_rational(&n11, &exact_11));
        assert!(contains_rational(&n21, &exact_21));
    }

    #[test]
    fn product_norms_contain_the_exact_rational_values() {
        let b = DenseMatrix {
            rows: 3,
            cols: 2,
            data: vec![0.1, 0.2, -0.3, 1.0 / 3.0, 5.0, -7.25],
        };
        let c = DenseMatrix {
            rows: 2,
            cols: 2,
            data: vec![1.5, -0.1, 0.7, 2.0],
        };
        let q = |x: f64| Rational::from_f64(x).unwrap();
        let mut sq = Rational::new();
        let mut n11 = Rational::new();
        for i in 0..3 {
            for j in 0..2 {
                let x: Rational = (0..2).map(|k| q(b.get(i, k)) * q(c.get(k, j))).sum();
                n11 += x.clone().abs();
                sq += x.clone() * x;
            }
        }
        let (f, _, a) = enclose_product_entry_norms_mpfr(&b, &c, 128).unwrap();
        assert!(contains_sqrt(&f, &sq));
        assert!(contains_rational(&a, &n11));
        assert!(f.hi() - f.lo() <= 1e-15 * f.hi());
    }
}
