//! Exact kernel certificates: an upper bound on the rank of a matrix with
//! binary64 entries, proven in exact integer and rational arithmetic.
//!
//! The residual and Gram routes can show that a singular value is positive
//! (a lower bound above 0) but never that one is exactly zero: an exactly
//! rank-deficient matrix keeps rank intervals `[r, n]`. This module finds
//! `k` rational vectors `N` (n x k) with `A N = 0` *exactly* and `rank N = k`
//! (an identity k x k submatrix), which proves `rank A <= n - k` and hence
//! `sigma_{n-k+1} = ... = sigma_n = 0` (`proofs/exact-kernel.md`, L30). How
//! `N` was found carries no guarantee; the two checks do.
//!
//! `N` is found by exact fraction-free elimination on the integer matrix
//! `A D` (each column scaled by an exact power of two, which leaves the
//! kernel as `D^{-1} ker A`), so the cost grows with the size and the bit
//! width of the entries: the certificate is only attempted within
//! [`EXACT_KERNEL_MAX_COLS`], [`EXACT_KERNEL_MAX_WORK`] and
//! [`EXACT_KERNEL_MAX_BITS`] (float16, bfloat16 and small-integer matrices
//! fit; binary64 entries of wide exponent range do not).

use faer::MatRef;
use rug::{Integer, Rational};

use super::dense::{exponent_of, lowest_bit};

/// Largest number of columns (`n`, after the transposition to `m >= n`)
/// for which [`exact_kernel`] runs.
pub const EXACT_KERNEL_MAX_COLS: usize = 128;

/// Largest `m * n * n` for which [`exact_kernel`] runs (the elimination
/// costs about this many operations on integers of a few hundred bits to a
/// few thousand, well under a second at the limit for float16 entries).
pub const EXACT_KERNEL_MAX_WORK: usize = 1 << 20;

/// Largest width in bits of a column's entries after exact scaling to
/// integers (highest set bit minus lowest, over the column): 40 for any
/// float16 column, 24 plus the exponent spread for float32.
pub const EXACT_KERNEL_MAX_BITS: i32 = 160;

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
    /// A column's entries span more than [`EXACT_KERNEL_MAX_BITS`] bits.
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
                "a column's entries span more than {EXACT_KERNEL_MAX_BITS} bits, the exact kernel \
                 certificate's limit"
            ),
        }
    }
}

/// The exact kernel of `a` (`m >= n`, finite entries), checked.
///
/// *Guarantee: certified bound.* If `Ok(Some(c))`, then `a c.vectors[j] = 0`
/// exactly for every j and the vectors have rank `c.nullity` (both checked
/// here in exact arithmetic, independently of how they were found), so the
/// rank of `a` is at most `n - c.nullity` and its `c.nullity` smallest
/// singular values are exactly 0 (`proofs/exact-kernel.md`, L30). `Ok(None)`
/// when no null vector was found (the kernel is then trivial, though that is
/// not claimed). `Err` when the size limits excluded the attempt.
pub fn exact_kernel(a: MatRef<'_, f64>) -> Result<Option<KernelCertificate>, KernelSkipped> {
    let (m, n) = (a.nrows(), a.ncols());
    if n > EXACT_KERNEL_MAX_COLS || m.saturating_mul(n).saturating_mul(n) > EXACT_KERNEL_MAX_WORK {
        return Err(KernelSkipped::TooLarge);
    }
    // Column j of the integer matrix is column j of A times 2^-low_j.
    let mut low = vec![0i32; n];
    for (j, lo) in low.iter_mut().enumerate() {
        let col: Vec<f64> = (0..m).map(|i| a[(i, j)]).filter(|x| *x != 0.0).collect();
        let Some(l) = col.iter().map(|&x| lowest_bit(x)).min() else {
            continue;
        };
        let high = col.iter().map(|&x| exponent_of(x.abs())).max().unwrap_or(l);
        if high - l + 1 > EXACT_KERNEL_MAX_BITS {
            return Err(KernelSkipped::TooWide);
        }
        *lo = l;
    }
    let int_entry = |i: usize, j: usize| -> Integer {
        let q = Rational::from_f64(a[(i, j)]).expect("finite entries");
        let q = if low[j] >= 0 {
            q >> low[j].unsigned_abs()
        } else {
            q << low[j].unsigned_abs()
        };
        debug_assert_eq!(*q.denom(), 1);
        q.into_numer_denom().0
    };
    // Incremental fraction-free echelon form of the rows (primitive rows).
    let mut basis: Vec<(usize, Vec<Integer>)> = Vec::new();
    for i in 0..m {
        let mut v: Vec<Integer> = (0..n).map(|j| int_entry(i, j)).collect();
        for (p, b) in &basis {
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
        basis.push((p, v));
        if basis.len() == n {
            return Ok(None);
        }
    }
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
            for (xj, &l) in x.iter_mut().zip(&low) {
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
    if !check(a, &cert) {
        return Ok(None);
    }
    Ok((cert.nullity > 0).then_some(cert))
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
