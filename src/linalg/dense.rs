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

/// Transposes to `m >= n` and scales by an exact power of two so that the
/// largest magnitude lies in `[1, 2)` (L2); keeps the original scale when
/// the scaling would not be exact. `data` is row-major `rows x cols`.
/// Returns `None` for an all-zero matrix.
pub fn prepare(rows: usize, cols: usize, data: &[f64]) -> Option<Prepared> {
    let maxabs = data.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    if maxabs == 0.0 {
        return None;
    }
    let mut k = -exponent_of(maxabs);
    if data.iter().any(|&x| r::scale_pow2_exact(x, k).is_none()) {
        k = 0;
    }
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
    for _ in 0..6 {
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

/// `fl(A B)` with column error bounds `gamma_k beta ||B e_j|| + sqrt(m) k eta`
/// where `beta >= || |A| ||_2` (L4).
pub fn product_with_bound(
    a: MatRef<'_, f64>,
    b: MatRef<'_, f64>,
    beta: f64,
    par: Par,
) -> BoundedProduct {
    let (m, k) = (a.nrows(), a.ncols());
    let mut c = Mat::<f64>::zeros(m, b.ncols());
    faer::linalg::matmul::matmul(&mut c, Accum::Replace, a, b, 1.0, par);
    let g = r::mul_ru(r::gamma_ru(k), beta);
    let under = r::mul_ru(r::sqrt_ru(m as f64), r::mul_ru(k as f64, ETA));
    let col_err = (0..b.ncols())
        .map(|j| {
            let bj: Vec<f64> = b.col(j).iter().copied().collect();
            r::add_ru(r::mul_ru(g, r::norm2_ru(&bj)), under)
        })
        .collect();
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
    let pv = product_with_bound(a, svd.v.as_ref(), beta, par);
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
