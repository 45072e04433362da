//! Exact kernel certificates: an upper bound on the rank of a matrix with
//! binary64 entries, proven in exact integer and rational arithmetic.
//!
//! The residual and Gram routes can show that a singular value is positive
//! (a lower bound above 0) but never that one is exactly zero: an exactly
//! rank-deficient matrix keeps rank intervals `[r, n]`. This module finds
//! `k` rational vectors `N` (n x k) with `A N = 0` *exactly* and `rank N = k`
//! (an identity k x k submatrix), which proves `rank A <= n - k` and hence
//! `sigma_{n-k+1} = ... = sigma_n = 0` ([`proofs/exact-kernel.md`](crate::proofs::exact_kernel), L30). How
//! `N` was found carries no guarantee; the two checks do.
//!
//! `N` is found by exact fraction-free elimination on the integer matrix
//! `A D` (each column scaled by an exact power of two, which leaves the
//! kernel as `D^{-1} ker A`), so the cost grows with the size and the bit
//! width of the entries: the certificate is only attempted within
//! `EXACT_KERNEL_MAX_COLS`, `EXACT_KERNEL_MAX_WORK` and
//! `EXACT_KERNEL_MAX_BITS` (float16, bfloat16 and small-integer matrices
//! fit; binary64 entries of wide exponent range do not).

use faer::MatRef;
use rug::{Integer, Rational};

use super::dense::{exponent_of, lowest_bit};

/// Largest number of columns (`n`, after the transposition to `m >= n`)
/// for which [`exact_kernel`] runs.
pub(crate) const EXACT_KERNEL_MAX_COLS: usize = 128;

/// Largest `m * n * n` for which [`exact_kernel`] runs (the elimination
/// costs about this many operations on integers of a few hundred bits to a
/// few thousand, well under a second at the limit for float16 entries).
pub(crate) const EXACT_KERNEL_MAX_WORK: usize = 1 << 20;

/// Largest width in bits of a column's entries after exact scaling to
/// integers (highest set bit minus lowest, over the column): 40 for any
/// float16 column, 24 plus the exponent spread for float32. Wider columns
/// are accepted while `m n^2 * n * bits` stays within
/// [`EXACT_WIDE_MAX_BIT_WORK`] (a small graded matrix `D B D`).
pub(crate) const EXACT_KERNEL_MAX_BITS: i32 = 160;

/// Largest `m n^2 * n * bits` for which `echelon` runs on columns wider
/// than [`EXACT_KERNEL_MAX_BITS`]: the elimination's integers grow to about
/// `n * bits` bits, so this bounds its bit operations (a 6 x 6 matrix whose
/// entries span 2^+-800: about 2^20; well under a second at the limit).
pub(crate) const EXACT_WIDE_MAX_BIT_WORK: u128 = 1 << 28;

/// A proof that `rank A <= n - nullity` (L30): `vectors` are `nullity`
/// exact rational vectors with `A v = 0`, and rows `free` of the matrix
/// they form are the identity.
#[derive(Clone, Debug)]
pub struct KernelCertificate {
    /// `k`: the number of independent exact null vectors.
    pub nullity: usize,
    /// The null vectors (each of length n).
    pub vectors: Vec<Vec<Rational>>,
    /// The rows at which the vectors form the identity matrix.
    pub free: Vec<usize>,
}

/// Why [`exact_kernel`] did not run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelSkipped {
    /// The matrix exceeds the size limits.
    TooLarge,
    /// A column's entries span more than `EXACT_KERNEL_MAX_BITS` bits.
    TooWide,
}

impl std::fmt::Display for KernelSkipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KernelSkipped::TooLarge => write!(
                f,
                "the matrix exceeds the exact kernel certificate's limits (n <= {EXACT_KERNEL_MAX_COLS}, \
                 m n^2 <= {EXACT_KERNEL_MAX_WORK})"
            ),
            KernelSkipped::TooWide => write!(
                f,
                "a column's entries span more than {EXACT_KERNEL_MAX_BITS} bits and m n^3 bits \
                 exceeds {EXACT_WIDE_MAX_BIT_WORK}, the exact kernel certificate's limits"
            ),
        }
    }
}

/// A fraction-free echelon form of the rows of `A D` (`D` the diagonal of
/// powers of two `2^-low_j` that makes each column integral): `basis[k]`
/// is `(pivot column, source row, primitive integer row)`, each row zero at
/// the pivots of the rows before it. No guarantee rests on it: what is
/// claimed from it is checked afterwards ([`check`], [`det_of`]).
struct Echelon {
    low: Vec<i32>,
    basis: Vec<(usize, usize, Vec<Integer>)>,
}

/// [`Echelon`] of `a` within the size limits (the elimination stops at `n`
/// independent rows).
fn echelon(a: MatRef<'_, f64>) -> Result<Echelon, KernelSkipped> {
    let (m, n) = (a.nrows(), a.ncols());
    if n > EXACT_KERNEL_MAX_COLS || m.saturating_mul(n).saturating_mul(n) > EXACT_KERNEL_MAX_WORK {
        return Err(KernelSkipped::TooLarge);
    }
    // Column j of the integer matrix is column j of A times 2^-low_j.
    let mut low = vec![0i32; n];
    let mut widest = 0i32;
    for (j, lo) in low.iter_mut().enumerate() {
        let col: Vec<f64> = (0..m).map(|i| a[(i, j)]).filter(|x| *x != 0.0).collect();
        let Some(l) = col.iter().map(|&x| lowest_bit(x)).min() else {
            continue;
        };
        let high = col.iter().map(|&x| exponent_of(x.abs())).max().unwrap_or(l);
        widest = widest.max(high - l + 1);
        *lo = l;
    }
    let bit_work = (m * n * n * n) as u128 * widest.max(0) as u128;
    if widest > EXACT_KERNEL_MAX_BITS && bit_work > EXACT_WIDE_MAX_BIT_WORK {
        return Err(KernelSkipped::TooWide);
    }
    let int_entry = |i: usize, j: usize| scaled_integer(a[(i, j)], low[j]);
    // Incremental fraction-free echelon form of the rows (primitive rows).
    let mut basis: Vec<(usize, usize, Vec<Integer>)> = Vec::new();
    for i in 0..m {
        let mut v: Vec<Integer> = (0..n).map(|j| int_entry(i, j)).collect();
        for (p, _, b) in &basis {
            if v[*p] == 0 {
                continue;
            }
            let (bp, vp) = (b[*p].clone(), v[*p].clone());
            for (x, y) in v.iter_mut().zip(b) {
                *x *= &bp;
                *x -= Integer::from(&vp * y);
            }
        }
        let Some(p) = v.iter().position(|x| *x != 0) else {
            continue;
        };
        make_primitive(&mut v);
        basis.push((p, i, v));
        if basis.len() == n {
            break;
        }
    }
    Ok(Echelon { low, basis })
}

/// `x 2^-low` as an integer (exact: `low` is at most the lowest set bit of `x`).
fn scaled_integer(x: f64, low: i32) -> Integer {
    let q = Rational::from_f64(x).expect("finite entries");
    let q = if low >= 0 {
        q >> low.unsigned_abs()
    } else {
        q << low.unsigned_abs()
    };
    debug_assert_eq!(*q.denom(), 1);
    q.into_numer_denom().0
}

/// The exact kernel of `a` (`m >= n`, finite entries), checked.
///
/// *Guarantee: certified bound.* If `Ok(Some(c))`, then `a c.vectors[j] = 0`
/// exactly for every j and the vectors have rank `c.nullity` (both checked
/// here in exact arithmetic, independently of how they were found), so the
/// rank of `a` is at most `n - c.nullity` and its `c.nullity` smallest
/// singular values are exactly 0 ([`proofs/exact-kernel.md`](crate::proofs::exact_kernel), L30). `Ok(None)`
/// when no null vector was found (the kernel is then trivial, though that is
/// not claimed). `Err` when the size limits excluded the attempt.
pub fn exact_kernel(a: MatRef<'_, f64>) -> Result<Option<KernelCertificate>, KernelSkipped> {
    Ok(kernel_of(a, &echelon(a)?))
}

/// The checked kernel certificate from an echelon form of `a` ([`exact_kernel`]).
fn kernel_of(a: MatRef<'_, f64>, e: &Echelon) -> Option<KernelCertificate> {
    let n = a.ncols();
    if e.basis.len() == n {
        return None;
    }
    let low = &e.low;
    let mut basis: Vec<(usize, Vec<Integer>)> =
        e.basis.iter().map(|(p, _, v)| (*p, v.clone())).collect();
    // Reduced form: clear each pivot column in the other rows.
    for k in 0..basis.len() {
        let (p, b) = basis[k].clone();
        for (l, (_, row)) in basis.iter_mut().enumerate() {
            if l == k || row[p] == 0 {
                continue;
            }
            let (bp, rp) = (b[p].clone(), row[p].clone());
            for (x, y) in row.iter_mut().zip(&b) {
                *x *= &bp;
                *x -= Integer::from(&rp * y);
            }
            make_primitive(row);
        }
    }
    let pivots: Vec<usize> = basis.iter().map(|(p, _)| *p).collect();
    let free: Vec<usize> = (0..n).filter(|j| !pivots.contains(j)).collect();
    // For free column f: x_f = 1, x_p = -row[f] / row[p]; then x = D x'.
    let vectors: Vec<Vec<Rational>> = free
        .iter()
        .map(|&f| {
            let mut x = vec![Rational::new(); n];
            x[f] = Rational::from(1);
            for (p, row) in &basis {
                x[*p] = -Rational::from((row[f].clone(), row[*p].clone()));
            }
            // x = D x' with D = diag(2^-low_j), then x_f = 1 again.
            for (xj, &l) in x.iter_mut().zip(low) {
                *xj = if l >= 0 {
                    Rational::from(&*xj >> l.unsigned_abs())
                } else {
                    Rational::from(&*xj << l.unsigned_abs())
                };
            }
            let xf = x[f].clone();
            x.iter_mut().for_each(|xj| *xj /= &xf);
            x
        })
        .collect();
    let cert = KernelCertificate {
        nullity: free.len(),
        vectors,
        free,
    };
    // The certificate itself: checked on A, independently of the above.
    (cert.nullity > 0 && check(a, &cert)).then_some(cert)
}

/// What one exact elimination of `A` gives ([`proofs/exact-rank.md`](crate::proofs::exact_rank), L37):
/// a candidate nonsingular `r x r` submatrix on `rows` and `cols` (claimed
/// only once [`det_of`] finds its determinant nonzero: `rank A >= r`), and
/// the checked kernel certificate of the other `n - r` directions (L30:
/// `rank A <= n - nullity`).
#[derive(Clone, Debug)]
pub(crate) struct Elimination {
    /// The rows of the candidate submatrix (of the matrix given).
    pub rows: Vec<usize>,
    /// Its columns, increasing.
    pub cols: Vec<usize>,
    /// The checked kernel certificate (`None` for full column rank, or if
    /// the vectors failed their check).
    pub kernel: Option<KernelCertificate>,
}

impl Elimination {
    /// How many trailing singular values the kernel certificate proves zero.
    pub(crate) fn nullity(&self) -> usize {
        self.kernel.as_ref().map_or(0, |k| k.nullity)
    }
}

/// One exact elimination of `a` (`m >= n`, finite entries): the candidate
/// submatrix and the kernel certificate of [`Elimination`]; `Ok(None)` for
/// a zero matrix, `Err` outside the size limits.
///
/// *Guarantee:* the kernel certificate is checked as [`exact_kernel`]'s
/// ([`proofs/exact-kernel.md`](crate::proofs::exact_kernel), L30); the submatrix is only a candidate, on
/// which nothing is claimed until [`det_of`] computes its determinant.
pub(crate) fn eliminate(a: MatRef<'_, f64>) -> Result<Option<Elimination>, KernelSkipped> {
    let e = echelon(a)?;
    if e.basis.is_empty() {
        return Ok(None);
    }
    let rows: Vec<usize> = e.basis.iter().map(|(_, i, _)| *i).collect();
    let mut cols: Vec<usize> = e.basis.iter().map(|(p, _, _)| *p).collect();
    cols.sort_unstable();
    Ok(Some(Elimination {
        kernel: kernel_of(a, &e),
        rows,
        cols,
    }))
}

/// The exact determinant of `a[rows, cols]` (`rows.len() == cols.len()`):
/// Bareiss's fraction-free elimination on the integers `a_ij 2^-low_j`
/// (each column scaled by the exact power of two that makes it integral),
/// then `det = det(integers) * 2^(sum low_j)`. Exact integer arithmetic
/// throughout (GMP); every division in Bareiss's recurrence is exact.
///
/// *Guarantee: exact* (no rounding occurs; [`proofs/exact-rank.md`](crate::proofs::exact_rank), L37);
/// `None` only if a division in the recurrence left a remainder (which
/// exact arithmetic excludes: then nothing is claimed).
pub fn det_of(a: MatRef<'_, f64>, rows: &[usize], cols: &[usize]) -> Option<Rational> {
    let r = rows.len();
    assert_eq!(r, cols.len(), "a square submatrix");
    let low: Vec<i32> = cols
        .iter()
        .map(|&j| {
            rows.iter()
                .map(|&i| a[(i, j)])
                .filter(|x| *x != 0.0)
                .map(lowest_bit)
                .min()
                .unwrap_or(0)
        })
        .collect();
    let mut m: Vec<Vec<Integer>> = rows
        .iter()
        .map(|&i| {
            cols.iter()
                .zip(&low)
                .map(|(&j, &l)| scaled_integer(a[(i, j)], l))
                .collect()
        })
        .collect();
    let mut negate = false;
    let mut prev = Integer::from(1);
    for k in 0..r {
        let Some(p) = (k..r).find(|&i| m[i][k] != 0) else {
            return Some(Rational::new());
        };
        if p != k {
            m.swap(p, k);
            negate = !negate;
        }
        for i in k + 1..r {
            for j in k + 1..r {
                let t = Integer::from(&m[i][j] * &m[k][k]) - Integer::from(&m[i][k] * &m[k][j]);
                let (q, rem) = t.div_rem(prev.clone());
                if rem != 0 {
                    return None;
                }
                m[i][j] = q;
            }
            m[i][k] = Integer::new();
        }
        prev = m[k][k].clone();
    }
    let det = Rational::from(prev);
    let shift: i64 = low.iter().map(|&l| i64::from(l)).sum();
    let det = if shift >= 0 {
        det << u32::try_from(shift).expect("bounded exponents")
    } else {
        det >> u32::try_from(-shift).expect("bounded exponents")
    };
    Some(if negate { -det } else { det })
}

/// Whether `a v = 0` exactly for every vector of `c`, and the vectors form
/// the identity on the rows `c.free` (so they have rank `c.nullity`).
pub fn check(a: MatRef<'_, f64>, c: &KernelCertificate) -> bool {
    let (m, n) = (a.nrows(), a.ncols());
    if c.vectors.len() != c.nullity || c.free.len() != c.nullity {
        return false;
    }
    for (j, v) in c.vectors.iter().enumerate() {
        if v.len() != n {
            return false;
        }
        for (l, &f) in c.free.iter().enumerate() {
            if f >= n || v[f] != u32::from(l == j) {
                return false;
            }
        }
        for i in 0..m {
            let mut s = Rational::new();
            for (k, x) in v.iter().enumerate() {
                if *x != 0 && a[(i, k)] != 0.0 {
                    let q = Rational::from_f64(a[(i, k)]).expect("finite entries");
                    s += q * x;
                }
            }
            if s != 0 {
                return false;
            }
        }
    }
    true
}

/// Divides a nonzero integer vector by the gcd of its entries.
fn make_primitive(v: &mut [Integer]) {
    let mut g = Integer::new();
    for x in v.iter() {
        g.gcd_mut(x);
    }
    if g > 1 {
        for x in v.iter_mut() {
            x.div_exact_mut(&g);
        }
    }
}
