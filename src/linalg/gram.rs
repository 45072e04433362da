//! The exact-Gram route: singular values of `A` (`m >= n`) as square roots
//! of the certified eigenvalues of `G = A^T A`, for matrices whose Gram
//! matrix a floating-point GEMM computes **exactly**.
//!
//! Weights stored in float16 (and other matrices whose entries share a
//! fine common grid and whose columns are not too long) have this property:
//! every entry is an integer multiple of `2^q`, so every product and every
//! partial sum of `A^T A` is an integer multiple of `2^(2q)`, and when no
//! column's squared norm reaches `2^(53 + 2q)` all of them are representable
//! and every rounding is exact, in any order ([`proofs/exact-gram.md`](crate::proofs::exact_gram), L23).
//! Then `G` is known exactly after one (symmetric) GEMM, and the symmetric
//! residual theorem with cluster counting ([`proofs/gram-eigen.md`](crate::proofs::gram_eigen), L24)
//! certifies all its eigenvalues from one `n x n x n` product `G V`, instead
//! of the two `m x n x n` products `A V` and `A^T U` of the direct route.
//! The relative radius of `sigma_i` grows like `(sigma_1 / sigma_i)^2`
//! (the Gram matrix squares the condition number), so the caller keeps this
//! route only where it meets the target and otherwise continues with the
//! residual theorem on `A` itself, reusing the eigenvectors computed here
//! as the approximation.

use faer::{Mat, MatRef, Par};

use super::cluster::Group;
use super::dense::{self, pair_bounds_and_merge, product_col_err, residual_col_bounds};
use super::rounding as r;
use super::{CertifiedValue, Method};
use crate::enclosure::{Enclosure, Inconclusive};

/// The test of L23 ([`proofs/exact-gram.md`](crate::proofs::exact_gram)): every evaluation of `A^T A`
/// in the GEMM model (any order, FMA allowed) returns the exact product.
///
/// With `2^q` the largest power of two dividing every nonzero entry, it
/// holds when `2q >= -1074` and an upper bound of the largest squared
/// column norm is `< 2^(53 + 2q)`. A `false` means only "not proved exact".
pub fn gram_is_exact(a: MatRef<'_, f64>) -> bool {
    let m = a.nrows();
    // Per column: the lowest set bit of its nonzero entries (the smallest
    // `lowest_bit_key`) and an upper bound of its squared norm (each
    // column's own sequential sum, so the same bits whichever thread
    // computes it); `None` if not finite.
    let column = |col: &[f64]| -> Option<(i32, f64)> {
        let low = col
            .iter()
            .fold(u64::MAX, |lo, &x| lo.min(dense::lowest_bit_key(x)));
        let q = if low == u64::MAX {
            i32::MAX
        } else {
            dense::lowest_bit(f64::from_bits(low))
        };
        let s = r::nonneg_sum_ru(r::sum_sq(col), m);
        s.is_finite().then_some((q, s))
    };
    let Some(cols) = dense::map_columns(a, column)
        .into_iter()
        .collect::<Option<Vec<_>>>()
    else {
        return false;
    };
    let q = cols.iter().map(|c| c.0).min().unwrap_or(i32::MAX);
    let s_max = cols.iter().fold(0.0f64, |acc, c| acc.max(c.1));
    if q == i32::MAX {
        return true; // a zero matrix: every product and sum is an exact 0
    }
    let e = 53 + 2 * q;
    if 2 * q < -1074 {
        return false;
    }
    // 2^e is representable for -1021 <= e <= 1023; above, s_max (finite) is smaller.
    e > 1023 || s_max < r::scale_pow2_rn(1.0, e)
}

/// `A^T A` by the backend in use ([`super::backend::Backend::gram`]): a
/// symmetric (lower-triangle) product mirrored to a full matrix. Exact when
/// [`gram_is_exact`] holds, in any order of evaluation (L23), and then the
/// same bits on any number of threads; otherwise a rounded approximation,
/// whose last bits may depend on `par` (the CPU splits it into column
/// slabs), for uses that need no guarantee.
pub fn gram(a: MatRef<'_, f64>, par: Par) -> Mat<f64> {
    super::backend::current().gram(a, par)
}

pub use super::backend::EigenSolver;

/// An approximate eigendecomposition of a Gram matrix (no guarantee):
/// eigenvalues clipped at 0 and sorted in decreasing order, with their
/// eigenvectors as columns.
pub struct GramEigen {
    /// The Gram matrix the decomposition is of.
    pub g: Mat<f64>,
    /// Whether `g` is exactly `A^T A` ([`gram_is_exact`]).
    pub exact: bool,
    /// Approximate eigenvalues, `>= 0`, decreasing.
    pub lam: Vec<f64>,
    /// Approximate eigenvectors (columns), in the order of `lam`.
    pub v: Mat<f64>,
    /// The eigensolver that computed `lam` and `v`.
    pub solver: EigenSolver,
}

/// Rows of `A` per product when the Gram matrix is only approximated
/// ([`gram_eigen`]): a fixed number, so that the sum's order, and so its
/// bits, do not depend on the machine.
pub(crate) const APPROX_GRAM_CHUNK: usize = 4096;

/// `G = A^T A` (exact when [`gram_is_exact`] holds) and an approximate
/// eigendecomposition of it (no guarantee); `None` if the eigensolvers
/// fail or return non-finite values.
///
/// An exact Gram matrix is formed by the symmetric product and decomposed
/// by `super::symeig` with the parallelism `par` (faer's eigensolver if
/// that fails; [`GramEigen::with_faer`] redoes it with faer when its
/// certification falls short). Otherwise (the Gram matrix is then only an
/// approximation for `approx_thin_svd_from_gram`) the product summed
/// over `APPROX_GRAM_CHUNK` rows at a time and faer's eigensolver are
/// used, as before the exact route existed. Every
/// step gives the same bits on any number of threads (faer's eigensolver
/// runs with the fixed `dense::solver_par`).
pub fn gram_eigen(a: MatRef<'_, f64>, par: Par) -> Option<GramEigen> {
    let exact = gram_is_exact(a);
    let backend = super::backend::current();
    if exact {
        let g = backend.gram(a, par);
        return match backend.sym_eigen(g.as_ref(), EigenSolver::Tridiagonal, par) {
            Some((raw, vecs, solver)) => sorted(g, true, raw, vecs, solver),
            None => faer_eigen(g, true),
        };
    }
    // Only an approximation is needed, summed over chunks of rows: one
    // product over all of a tall matrix's rows would have the GEMM pack a
    // second copy of it, kept by its thread for the rest of the run
    // (docs/spectra.md, "Memory"; tests/memory_tall.rs).
    let g = backend.chunked_product(a.transpose(), a, APPROX_GRAM_CHUNK, par);
    match backend.sym_eigen(g.as_ref(), EigenSolver::Faer, par) {
        Some((raw, vecs, solver)) => sorted(g, false, raw, vecs, solver),
        None => None,
    }
}

impl GramEigen {
    /// The same Gram matrix decomposed again by faer's eigensolver on the
    /// CPU (the fallback when the vectors of the first solver do not
    /// certify to the target).
    pub fn with_faer(self) -> Option<GramEigen> {
        faer_eigen(self.g, self.exact)
    }
}

/// faer's `self_adjoint_evd` of `g` as a [`GramEigen`].
fn faer_eigen(g: Mat<f64>, exact: bool) -> Option<GramEigen> {
    let (raw, vecs) = super::backend::faer_evd(g.as_ref())?;
    sorted(g, exact, raw, vecs, EigenSolver::Faer)
}

/// Pairs sorted by decreasing eigenvalue, eigenvalues clipped at 0.
fn sorted(
    g: Mat<f64>,
    exact: bool,
    raw: Vec<f64>,
    vecs: Mat<f64>,
    solver: EigenSolver,
) -> Option<GramEigen> {
    let n = raw.len();
    if raw.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| {
        raw[j]
            .partial_cmp(&raw[i])
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let lam = order.iter().map(|&i| raw[i].max(0.0)).collect();
    let mut v = vecs;
    permute_columns(&mut v, &order);
    Some(GramEigen {
        g,
        exact,
        lam,
        v,
        solver,
    })
}

/// Column `j` of `v` becomes its former column `order[j]` (`order` a
/// permutation), in place, one cycle at a time: no second `n x n` buffer,
/// whose first touch was a serial tenth of a second on an LLM-sized Gram
/// matrix. The numbers are moved, not computed.
fn permute_columns(v: &mut Mat<f64>, order: &[usize]) {
    let mut placed = vec![false; order.len()];
    let (mut held, mut moving) = (vec![0.0; v.nrows()], vec![0.0; v.nrows()]);
    for start in 0..order.len() {
        if placed[start] || order[start] == start {
            continue;
        }
        held.copy_from_slice(v.col_as_slice(start));
        let mut j = start;
        while order[j] != start {
            let src = order[j];
            moving.copy_from_slice(v.col_as_slice(src));
            v.col_as_slice_mut(j).copy_from_slice(&moving);
            placed[j] = true;
            j = src;
        }
        v.col_as_slice_mut(j).copy_from_slice(&held);
        placed[j] = true;
    }
}

/// Certified, index-matched enclosures of all `n` singular values of `A`
/// (the `m x n`, `m >= n` matrix whose Gram matrix `e.g` is) scaled by
/// `2^scale_exp`, from the eigendecomposition `e`, which must have
/// `e.exact`.
///
/// *Guarantee: certified enclosure.* `values[i]` contains `2^-scale_exp`
/// times the exact i-th largest singular value of `A`:
/// `G = A^T A` exactly ([`proofs/exact-gram.md`](crate::proofs::exact_gram), L23); the residual
/// `G V - V diag(lam)` is bounded with the product error of
/// [`proofs/dot-product-error.md`](crate::proofs::dot_product_error) (L4, blocked form) and
/// `beta >= || |G| ||_2` ([`proofs/collatz-bound.md`](crate::proofs::collatz_bound), L5); per-pair
/// intervals are merged into disjoint clusters with exact counts
/// ([`proofs/gram-eigen.md`](crate::proofs::gram_eigen), L24, with [`proofs/near-orthogonal.md`](crate::proofs::near_orthogonal), L8);
/// `sigma_i = sqrt(lambda_i(G))` index by index (L24), and the square roots
/// and the unscaling are rounded outward ([`proofs/rn-directed-scalar.md`](crate::proofs::rn_directed_scalar),
/// L3; [`proofs/power-of-two-scaling.md`](crate::proofs::power_of_two_scaling), L2).
pub fn certify_from_gram(
    e: &GramEigen,
    scale_exp: i32,
    par: Par,
) -> Result<Vec<CertifiedValue>, Inconclusive> {
    if !e.exact {
        return Err(Inconclusive::new(
            "the Gram matrix is not exact: the exact-Gram route does not apply",
        ));
    }
    let groups = certify_eigen_groups(e.g.as_ref(), &e.lam, e.v.as_ref(), par)?;
    let mut out = Vec::with_capacity(e.lam.len());
    for g in &groups {
        let size = g.members.len();
        let lo = r::scale_pow2_rd(r::sqrt_rd(g.lo), -scale_exp).max(0.0);
        let hi = r::scale_pow2_ru(r::sqrt_ru(g.hi), -scale_exp);
        let enclosure = Enclosure::new(lo, hi)
            .ok_or_else(|| Inconclusive::new("singular value bound overflowed"))?;
        for _ in 0..size {
            out.push(CertifiedValue {
                enclosure,
                method: Method::GramEigen(e.solver),
                cluster_size: size,
                exact: None,
            });
        }
    }
    Ok(out)
}

/// Disjoint eigenvalue groups of the symmetric positive semidefinite `g`
/// from all `n` approximate pairs `(lam_j, v_j)`, largest first: each hull
/// contains exactly `members.len()` eigenvalues (L24, L8, L4, L5).
pub(crate) fn certify_eigen_groups(
    g: MatRef<'_, f64>,
    lam: &[f64],
    v: MatRef<'_, f64>,
    par: Par,
) -> Result<Vec<Group<f64>>, Inconclusive> {
    let n = g.nrows();
    // The Collatz bound (memory-bound passes over G, with serial steps
    // between them) beside the product (compute-bound): each is the same
    // computation as alone, so the same bits.
    let (beta, (p, depth)) = super::symeig::join_on_pool(
        par,
        || dense::abs_norm2_ru(g),
        || dense::chunked_product_wide(g, v, par),
    );
    if !beta.is_finite() {
        return Err(Inconclusive::new("|| |G| || bound overflowed"));
    }
    let bounded = dense::BoundedProduct {
        computed: p,
        col_err: product_col_err(depth, n, n, beta, v),
    };
    let res = residual_col_bounds(&bounded, v, lam);
    drop(bounded);
    let zeros = vec![0.0; n];
    pair_bounds_and_merge(lam, &res, &zeros, v)
}

/// Largest estimated condition number for which [`approx_thin_svd_gram`] is
/// used: its residuals grow like `u kappa sigma_1`, so beyond this the
/// direct thin SVD gives tighter enclosures.
pub const GRAM_MAX_KAPPA: f64 = 100.0;

/// Fast approximate thin SVD through the Gram matrix (no guarantee):
/// eigenvectors `V` of `fl(A^T A)`, `s_j = sqrt(lambda_j)`, `U = A V S^-1`.
/// About twice as fast as the direct thin SVD; returns `None` when the
/// estimated condition number exceeds [`GRAM_MAX_KAPPA`] (its residuals would
/// be too large to be useful), so the caller uses [`dense::approx_thin_svd`].
pub fn approx_thin_svd_gram(a: MatRef<'_, f64>, par: Par) -> Option<dense::ApproxSvd> {
    let e = gram_eigen(a, par)?;
    approx_thin_svd_from_gram(a, &e, par)
}

/// [`approx_thin_svd_gram`] from an eigendecomposition of the Gram matrix
/// already computed (no guarantee).
pub(crate) fn approx_thin_svd_from_gram(
    a: MatRef<'_, f64>,
    e: &GramEigen,
    par: Par,
) -> Option<dense::ApproxSvd> {
    let s: Vec<f64> = e.lam.iter().map(|&l| l.sqrt()).collect();
    let (top, bottom) = (s[0], s[s.len() - 1]);
    if !(top > 0.0) || !(bottom * GRAM_MAX_KAPPA >= top) || s.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let v = e.v.clone();
    let (p, depth) = dense::chunked_product_by_rows(a, v.as_ref(), par);
    // U = fl(A V) diag(fl(1 / s_j)), formed where it is read: the m x n
    // product is held once.
    let inv = s.iter().map(|&sj| 1.0 / sj).collect();
    Some(dense::ApproxSvd {
        u: dense::LeftVectors::Scaled { p, depth, inv },
        s,
        v,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    quickcheck::quickcheck! {
        /// The in-place permutation moves the columns exactly as a copy
        /// into a second buffer did: column `j` is the former `order[j]`,
        /// for permutations with cycles of every length (the sort by
        /// decreasing eigenvalue of `sorted`, ties included).
        fn permute_columns_is_the_copy_by_order(keys: Vec<u8>, rows: u8) -> bool {
            let n = keys.len();
            let rows = usize::from(rows % 5) + 1;
            let mut order: Vec<usize> = (0..n).collect();
            order.sort_by_key(|&i| std::cmp::Reverse(keys[i]));
            let v = Mat::<f64>::from_fn(rows, n, |i, j| (j * 10 + i) as f64);
            let copy = Mat::<f64>::from_fn(rows, n, |i, j| v[(i, order[j])]);
            let mut moved = v.clone();
            permute_columns(&mut moved, &order);
            moved == copy
        }

        /// `gram_is_exact` decides as the test of L23 read entry by entry:
        /// `q` the smallest `lowest_bit` of a nonzero entry, and every
        /// column's squared norm bounded below `2^(53 + 2q)`; for entries of
        /// every magnitude (subnormals and powers of two among them), zeros,
        /// and non-finite values (never exact).
        fn gram_is_exact_is_the_test_of_l23_entry_by_entry(bits: Vec<u64>, rows: u8, spread: u8) -> bool {
            let m = usize::from(rows % 6) + 1;
            let n = bits.len() / m;
            let spread = u32::from(spread % 64);
            // Exponent fields from 1023 to 1023 + spread, zeros,
            // subnormals and a few non-finite entries.
            let entry = |b: u64| match b % 101 {
                0 if b & 128 == 0 => f64::INFINITY,
                0 => f64::NAN,
                1..=9 => 0.0,
                10..=18 => f64::from_bits(b >> 12), // a subnormal
                _ => {
                    let e = (1023 + (b >> 52) as i64 % (i64::from(spread) + 1)) as u64;
                    let low = (1u64 << (b % 53)) - 1; // cleared: a coarser grid
                    f64::from_bits((b & (1 << 63)) | (e << 52) | (b & ((1 << 52) - 1) & !low))
                }
            };
            let a = Mat::<f64>::from_fn(m, n, |i, j| entry(bits[j * m + i]));
            let (mut q, mut finite, mut s_max) = (i32::MAX, true, 0.0f64);
            for j in 0..n {
                let col: Vec<f64> = a.col(j).iter().copied().collect();
                for &x in col.iter().filter(|&&x| x != 0.0) {
                    q = q.min(dense::lowest_bit(x));
                }
                let s = r::nonneg_sum_ru(r::sum_sq(&col), m);
                finite &= s.is_finite();
                s_max = s_max.max(s);
            }
            let want = finite
                && (q == i32::MAX
                    || (2 * q >= -1074 && (53 + 2 * q > 1023 || s_max < r::scale_pow2_rn(1.0, 53 + 2 * q))));
            gram_is_exact(a.as_ref()) == want
        }
    }
}
