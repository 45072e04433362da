//! Stage 1: certified enclosures of all singular values of a dense matrix,
//! computed in binary64 round-to-nearest with a priori error bounds.
//!
//! Pipeline: exact power-of-two prescaling (L2), approximate thin SVD by faer
//! (no guarantee), residual products `A V~` and `A^T U~` by faer GEMM with the
//! order-independent bound of L4 (using `beta >= || |A| ||_2` from L5),
//! per-pair bounds (L6), cluster merging (L7, L8), index matching.

use faer::{Accum, Mat, MatRef, Par};

use super::cluster::{merge_groups, Group, PairBounds};
use super::rounding::{self as r, ETA, U};
use crate::enclosure::Inconclusive;

/// A matrix prepared for certification: `m >= n`, prescaled by `2^scale_exp`.
pub struct Prepared {
    /// The (possibly transposed, exactly scaled) matrix, `m >= n`.
    pub a: Mat<f64>,
    /// Whether the input was transposed to get `m >= n`.
    pub transposed: bool,
    /// The matrix holds `2^scale_exp` times the input, exactly.
    pub scale_exp: i32,
}

/// Binary exponent `e` with `2^e <= x < 2^(e+1)` for finite `x > 0`.
pub fn exponent_of(x: f64) -> i32 {
    debug_assert!(x > 0.0 && x.is_finite());
    let mut e = x.log2().floor() as i32;
    while r::scale_pow2_rn(x, -e) >= 2.0 {
        e += 1;
    }
    while r::scale_pow2_rn(x, -e) < 1.0 {
        e -= 1;
    }
    e
}

/// Exponent of the lowest set bit of a finite nonzero `x`: `x` is an odd
/// integer times `2^lowest_bit(x)`, and `-1074 <= lowest_bit(x) <= 971`.
pub(crate) fn lowest_bit(x: f64) -> i32 {
    let bits = x.to_bits() & 0x7fff_ffff_ffff_ffff;
    let biased = (bits >> 52) as i32;
    let frac = bits & ((1u64 << 52) - 1);
    // Normal: (2^52 + frac) 2^(biased - 1075); subnormal: frac 2^-1074.
    let (int, e) = if biased == 0 {
        (frac, -1074)
    } else {
        (frac | (1u64 << 52), biased - 1075)
    };
    e + int.trailing_zeros() as i32
}

/// Exponent `k` such that `2^k maxabs` lies in `[1, 2)` when scaling every
/// entry by `2^k` is exact (L2); otherwise the `k` closest to it that is
/// still exact for every entry. Scaling up (k >= 0) cannot lose bits (no
/// overflow, as the result stays below 2); scaling down by `2^k` is exact
/// for an entry `x` iff `x 2^k` keeps its lowest set bit, i.e.
/// `lowest_bit(x) + k >= -1074` (entries that stay normal satisfy it).
pub fn exact_scale_exponent(maxabs: f64, data: &[f64]) -> i32 {
    if maxabs == 0.0 {
        return 0;
    }
    let k = -exponent_of(maxabs);
    if k >= 0 {
        return k;
    }
    // |x| 2^k < 2^-1022  <=>  |x| < 2^(-1022 - k): only such entries can lose bits.
    let limit = r::scale_pow2_rn(1.0, -1022 - k);
    let lowest = data
        .iter()
        .filter(|x| **x != 0.0 && x.abs() < limit)
        .map(|&x| lowest_bit(x))
        .min();
    match lowest {
        None => k,
        // The smallest downward scaling that keeps every such bit.
        Some(b) => k.max(-1074 - b).min(0),
    }
}

/// Transposes to `m >= n` and scales by an exact power of two so that the
/// largest magnitude lies in `[1, 2)` (L2); keeps the original scale when
/// the scaling would not be exact. `data` is row-major `rows x cols`.
/// Returns `None` for an all-zero matrix.
pub fn prepare(rows: usize, cols: usize, data: &[f64]) -> Option<Prepared> {
    let maxabs = data.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    if maxabs == 0.0 {
        return None;
    }
    let k = exact_scale_exponent(maxabs, data);
    let transposed = rows < cols;
    let (m, n) = if transposed {
        (cols, rows)
    } else {
        (rows, cols)
    };
    let a = Mat::from_fn(m, n, |i, j| {
        let x = if transposed {
            data[j * cols + i]
        } else {
            data[i * cols + j]
        };
        r::scale_pow2_rn(x, k)
    });
    Some(Prepared {
        a,
        transposed,
        scale_exp: k,
    })
}

/// Upper bound `beta >= || |A| ||_2` by Collatz iterations on `|A|^T |A|` (L5).
pub fn abs_norm2_ru(a: MatRef<'_, f64>) -> f64 {
    let (m, n) = (a.nrows(), a.ncols());
    let mut x = vec![1.0f64; n];
    let mut z = vec![0.0f64; m];
    let mut y = vec![0.0f64; n];
    let abs_mv = |x: &[f64], z: &mut [f64]| {
        z.iter_mut().for_each(|v| *v = 0.0);
        for (j, &xj) in x.iter().enumerate() {
            let col = a.col(j);
            for (zi, &aij) in z.iter_mut().zip(col.iter()) {
                *zi = aij.abs().mul_add(xj, *zi);
            }
        }
    };
    let abs_tmv = |z: &[f64], y: &mut [f64]| {
        for (j, yj) in y.iter_mut().enumerate() {
            let col = a.col(j);
            *yj = col
                .iter()
                .zip(z.iter())
                .fold(0.0, |acc, (&aij, &zi)| aij.abs().mul_add(zi, acc));
        }
    };
    for _ in 0..4 {
        abs_mv(&x, &mut z);
        abs_tmv(&z, &mut y);
        let ymax = y.iter().fold(0.0f64, |m, &v| m.max(v));
        if !(ymax > 0.0) || !ymax.is_finite() {
            break;
        }
        for (xj, &yj) in x.iter_mut().zip(y.iter()) {
            // Any strictly positive x is valid for Collatz; keep it away from 0.
            *xj = (yj / ymax).max(1.0 / 1_099_511_627_776.0);
        }
    }
    // Rigorous final step: z_up >= |A| x, then y_up >= |A|^T z_up (monotone).
    abs_mv(&x, &mut z);
    for zi in z.iter_mut() {
        *zi = r::nonneg_sum_ru(*zi, n);
    }
    abs_tmv(&z, &mut y);
    let mut ratio = 0.0f64;
    for (&yj, &xj) in y.iter().zip(x.iter()) {
        let q = r::div_ru(r::nonneg_sum_ru(yj, m), xj);
        if !q.is_finite() {
            return f64::INFINITY; // never let max() swallow a NaN or inf
        }
        ratio = ratio.max(q);
    }
    r::sqrt_ru(ratio)
}

/// An approximate thin SVD `A ~ U diag(s) V^T` (no guarantee).
pub struct ApproxSvd {
    /// Left vectors, `m x p`.
    pub u: Mat<f64>,
    /// Approximate singular values, `p`.
    pub s: Vec<f64>,
    /// Right vectors, `n x p`.
    pub v: Mat<f64>,
    /// `fl(A V)` and its rounding depth, when the approximation already
    /// computed it (reused by the certification, which bounds its error).
    pub av: Option<(Mat<f64>, usize)>,
}

/// Approximate thin SVD by faer (no guarantee).
pub fn approx_thin_svd(a: MatRef<'_, f64>) -> Result<ApproxSvd, Inconclusive> {
    let svd = a
        .thin_svd()
        .map_err(|_| Inconclusive::new("the approximate SVD did not converge"))?;
    let s: Vec<f64> = svd.S().column_vector().iter().copied().collect();
    if s.iter().any(|x| !x.is_finite()) {
        return Err(Inconclusive::new(
            "the approximate SVD returned non-finite values",
        ));
    }
    // The residual theorem centres intervals at |s_j| (L6): use |s_j| throughout.
    let s = s.into_iter().map(f64::abs).collect();
    Ok(ApproxSvd {
        u: svd.U().to_owned(),
        s,
        v: svd.V().to_owned(),
        av: None,
    })
}

/// A computed product with per-column bounds of its rounding error:
/// `||(computed - exact) e_j||_2 <= col_err[j]`.
pub struct BoundedProduct {
    /// The round-to-nearest product.
    pub computed: Mat<f64>,
    /// Column-wise error bounds (L4).
    pub col_err: Vec<f64>,
}

/// Inner-dimension chunk of [`product_with_bound`]: every term of the
/// product then passes through at most `CHUNK + chunks - 1` roundings instead
/// of `k`, which tightens the a priori bound (L4, blocked form).
pub const CHUNK: usize = 512;

/// `fl(A B)` computed as a sequential sum of GEMMs over inner-dimension
/// chunks of at most [`CHUNK`]. Returns the product and the rounding depth
/// `d`: every term of every entry passes through at most `d` roundings
/// (`d = k` for one chunk, `CHUNK + chunks - 1` otherwise; L4, blocked form).
pub fn chunked_product(a: MatRef<'_, f64>, b: MatRef<'_, f64>, par: Par) -> (Mat<f64>, usize) {
    let (m, k) = (a.nrows(), a.ncols());
    let p = b.ncols();
    let chunks = k.div_ceil(CHUNK).max(1);
    let mut c = Mat::<f64>::zeros(m, p);
    if chunks == 1 {
        faer::linalg::matmul::matmul(&mut c, Accum::Replace, a, b, 1.0, par);
        return (c, k.max(1));
    }
    // Separate buffers and explicit additions: the depth of every term is
    // then known whatever order the GEMM kernel uses inside a chunk.
    let mut part = Mat::<f64>::zeros(m, p);
    for ch in 0..chunks {
        let lo = ch * CHUNK;
        let hi = (lo + CHUNK).min(k);
        let ac = a.subcols(lo, hi - lo);
        let bc = b.subrows(lo, hi - lo);
        if ch == 0 {
            faer::linalg::matmul::matmul(&mut c, Accum::Replace, ac, bc, 1.0, par);
        } else {
            faer::linalg::matmul::matmul(&mut part, Accum::Replace, ac, bc, 1.0, par);
            for j in 0..p {
                let dst = c.col_as_slice_mut(j);
                let src = part.col_as_slice(j);
                for (d, &s) in dst.iter_mut().zip(src) {
                    *d += s;
                }
            }
        }
    }
    (c, (CHUNK + chunks - 1).min(k))
}

/// Column error bounds of a product `fl(A B)` of rounding depth `depth`,
/// inner dimension `k`, `rows` rows: `gamma_depth beta ||B e_j|| + sqrt(rows) k eta`
/// with `beta >= || |A| ||_2` (L4).
pub fn product_col_err(
    depth: usize,
    k: usize,
    rows: usize,
    beta: f64,
    b: MatRef<'_, f64>,
) -> Vec<f64> {
    let g = r::mul_ru(r::gamma_ru(depth), beta);
    let under = r::mul_ru(r::sqrt_ru(rows as f64), r::mul_ru(k as f64, ETA));
    (0..b.ncols())
        .map(|j| {
            let bj: Vec<f64> = b.col(j).iter().copied().collect();
            r::add_ru(r::mul_ru(g, r::norm2_ru(&bj)), under)
        })
        .collect()
}

/// `fl(A B)` (chunked) with its column error bounds (L4).
pub fn product_with_bound(
    a: MatRef<'_, f64>,
    b: MatRef<'_, f64>,
    beta: f64,
    par: Par,
) -> BoundedProduct {
    let (c, depth) = chunked_product(a, b, par);
    let col_err = product_col_err(depth, a.ncols(), a.nrows(), beta, b);
    BoundedProduct {
        computed: c,
        col_err,
    }
}

/// Upper bound of `||(P_exact - s_j X) e_j||_2` per column, where `P` is a
/// bounded product and the residual is evaluated as `fma(-s_j, x_ij, p_ij)`
/// (one rounding each; L3, L4).
pub fn residual_col_bounds(p: &BoundedProduct, x: MatRef<'_, f64>, s: &[f64]) -> Vec<f64> {
    let rows = x.nrows();
    let one_plus = 1.0 + 2.0 * U; // >= 1 + u, representable
    let under = r::mul_ru(r::sqrt_ru(rows as f64), ETA);
    (0..s.len())
        .map(|j| {
            let pc = p.computed.col(j);
            let xc = x.col(j);
            let mut e2 = 0.0f64;
            for (&pij, &xij) in pc.iter().zip(xc.iter()) {
                let e = (-s[j]).mul_add(xij, pij);
                e2 = e.mul_add(e, e2);
            }
            let norm = r::sqrt_ru(r::nonneg_sum_ru(e2, rows));
            r::add_ru(r::add_ru(r::mul_ru(norm, one_plus), under), p.col_err[j])
        })
        .collect()
}

/// Upper bound of `||I - Y^T Y||_2` for the given columns of `y` (L8).
pub fn gram_defect_ru(y: MatRef<'_, f64>, members: &[usize]) -> Option<f64> {
    let n = y.nrows();
    let p = members.len();
    let cols: Vec<Vec<f64>> = members
        .iter()
        .map(|&j| y.col(j).iter().copied().collect())
        .collect();
    let mut d2 = 0.0f64;
    let mut sum_norm2 = 0.0f64;
    for a in 0..p {
        sum_norm2 = r::add_ru(sum_norm2, r::nonneg_sum_ru(r::sum_sq(&cols[a]), n));
        for b in a..p {
            let g = cols[a]
                .iter()
                .zip(cols[b].iter())
                .fold(0.0, |acc, (&x, &z)| x.mul_add(z, acc));
            let d = if a == b {
                if (0.5..=2.0).contains(&g) {
                    1.0 - g // exact by Sterbenz
                } else {
                    r::sub_ru(1.0, g).abs().max(r::sub_rd(1.0, g).abs())
                }
            } else {
                g
            };
            let w = if a == b { 1.0 } else { 2.0 };
            d2 = r::add_ru(d2, r::mul_ru(w, r::mul_ru(d, d)));
        }
    }
    let frob = r::sqrt_ru(d2);
    let err = r::add_ru(
        r::mul_ru(r::gamma_ru(n), sum_norm2),
        r::mul_ru((p * n) as f64, ETA),
    );
    let alpha = r::add_ru(frob, err);
    alpha.is_finite().then_some(alpha)
}

/// Certified groups for the approximate SVD of `a` (`m >= n`), all `n` pairs.
/// Each returned hull contains exactly `members.len()` singular values (L7).
pub fn certify_pairs(
    a: MatRef<'_, f64>,
    svd: &ApproxSvd,
    par: Par,
) -> Result<Vec<Group<f64>>, Inconclusive> {
    let beta = abs_norm2_ru(a);
    if !beta.is_finite() {
        return Err(Inconclusive::new("|| |A| || bound overflowed"));
    }
    let pv = match &svd.av {
        Some((p, depth)) => BoundedProduct {
            computed: p.clone(),
            col_err: product_col_err(*depth, a.ncols(), a.nrows(), beta, svd.v.as_ref()),
        },
        None => product_with_bound(a, svd.v.as_ref(), beta, par),
    };
    let qu = product_with_bound(a.transpose(), svd.u.as_ref(), beta, par);
    let e = residual_col_bounds(&pv, svd.u.as_ref(), &svd.s);
    let f = residual_col_bounds(&qu, svd.v.as_ref(), &svd.s);
    pair_bounds_and_merge(&svd.s, &e, &f, svd.v.as_ref())
}

/// Common tail of the f64 certifiers: per-pair bounds, then merging.
pub fn pair_bounds_and_merge(
    s: &[f64],
    e: &[f64],
    f: &[f64],
    v: MatRef<'_, f64>,
) -> Result<Vec<Group<f64>>, Inconclusive> {
    let res2_hi: Vec<f64> = e
        .iter()
        .zip(f.iter())
        .map(|(&e, &f)| r::add_ru(r::mul_ru(e, e), r::mul_ru(f, f)))
        .collect();
    let ynorm_lo: Vec<f64> = (0..s.len())
        .map(|j| {
            let c: Vec<f64> = v.col(j).iter().copied().collect();
            r::norm2_rd(&c)
        })
        .collect();
    if res2_hi.iter().any(|x| !x.is_finite()) {
        return Err(Inconclusive::new(
            "residual bound overflowed (entries too large)",
        ));
    }
    if s.iter().any(|&x| !(x >= 0.0)) {
        return Err(Inconclusive::new(
            "approximate singular values must be >= 0 (residuals are formed with the same s)",
        ));
    }
    let pb = PairBounds {
        s: s.to_vec(),
        res2_hi,
        ynorm_lo,
    };
    merge_groups(&pb, |mu| gram_defect_ru(v, mu))
}
