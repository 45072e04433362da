//! Stage 2: the residual theorem of Stage 1 with the residuals `A V~ - U~ S`
//! and `A^T U~ - V~ S` computed (almost) error-free.
//!
//! Ozaki splitting (`proofs/ozaki-exact-product.md`, L11) cuts the rows of the
//! left factor and the columns of the right factor into slices of `t` bits
//! on a per-line grid, so that every slice product is computed *exactly* by
//! an ordinary f64 GEMM (any order, FMA or not). The kept slice products and
//! the error-free `s_j u_ij` (TwoProduct by FMA) are summed per entry by a
//! cascaded TwoSum (Sum2, `proofs/compensated-sum.md`, L12); the dropped
//! low-order slice products and remainders are bounded by Frobenius norms.
//! The residual is then known to about one unit roundoff *of the residual*,
//! so the enclosure width is set by how good the approximate SVD really is.

use faer::{Accum, Mat, MatRef, Par};

use super::cluster::Group;
use super::dense::{exponent_of, pair_bounds_and_merge, ApproxSvd};
use super::rounding::{self as r, ETA, U};
use crate::enclosure::Inconclusive;

/// Number of slices per operand.
const SLICES: usize = 3;

/// An exact splitting `x = slices[0] + slices[1] + slices[2] + rest` along
/// rows (`by_rows`) or columns, with the smallest grid used by each slice.
struct Split {
    slices: Vec<Mat<f64>>,
    rest: Mat<f64>,
    /// Smallest grid (power of two) of each slice over all nonzero lines.
    min_grid: Vec<f64>,
}

fn split(x: MatRef<'_, f64>, by_rows: bool, t: i32) -> Result<Split, Inconclusive> {
    let (m, n) = (x.nrows(), x.ncols());
    let lines = if by_rows { m } else { n };
    let len = if by_rows { n } else { m };
    let at = |l: usize, k: usize| if by_rows { (l, k) } else { (k, l) };
    let mut rest = x.to_owned();
    let mut slices: Vec<Mat<f64>> = (0..SLICES).map(|_| Mat::zeros(m, n)).collect();
    let mut min_grid = vec![f64::INFINITY; SLICES];
    for l in 0..lines {
        let mu = (0..len).fold(0.0f64, |acc, k| acc.max(rest[at(l, k)].abs()));
        if mu == 0.0 {
            continue;
        }
        // mu < 2^e
        let e = exponent_of(mu) + 1;
        for (p, slice) in slices.iter_mut().enumerate() {
            let gexp = e - t - (p as i32) * (t + 1);
            if gexp < -1022 {
                break; // keep the rest in the remainder (bounded, not exact)
            }
            let grid = r::scale_pow2_rn(1.0, gexp);
            min_grid[p] = min_grid[p].min(grid);
            for k in 0..len {
                let idx = at(l, k);
                let v = rest[idx];
                if v == 0.0 {
                    continue;
                }
                let q = r::scale_pow2_rn(v, -gexp).round();
                let hi = r::scale_pow2_rn(q, gexp);
                slice[idx] = hi;
                rest[idx] = v - hi; // exact (L11)
            }
        }
    }
    Ok(Split {
        slices,
        rest,
        min_grid,
    })
}

fn frob_ru(x: MatRef<'_, f64>) -> f64 {
    let mut acc = 0.0f64;
    for j in 0..x.ncols() {
        let c: Vec<f64> = x.col(j).iter().copied().collect();
        acc = r::add_ru(acc, r::nonneg_sum_ru(r::sum_sq(&c), c.len()));
    }
    r::sqrt_ru(acc)
}

fn col_norms_ru(x: MatRef<'_, f64>) -> Vec<f64> {
    (0..x.ncols())
        .map(|j| {
            let c: Vec<f64> = x.col(j).iter().copied().collect();
            r::norm2_ru(&c)
        })
        .collect()
}

#[inline]
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bp = s - a;
    (s, (a - (s - bp)) + (b - bp))
}

/// Upper bounds of `||(A Y - X diag(s)) e_j||_2` per column, computed with
/// error-free slice products (L11) and Sum2 (L12). `a` is `rows x k`, `y` is
/// `k x p`, `x` is `rows x p`.
pub fn residual_col_bounds_exact(
    a: MatRef<'_, f64>,
    y: MatRef<'_, f64>,
    x: MatRef<'_, f64>,
    s: &[f64],
    par: Par,
) -> Result<Vec<f64>, Inconclusive> {
    let (rows, k) = (a.nrows(), a.ncols());
    let p = y.ncols();
    let logk = (k.max(2) as f64).log2().ceil() as i32;
    let t = (53 - logk) / 2;
    if t < 8 {
        return Err(Inconclusive::new(
            "inner dimension too large for Ozaki splitting",
        ));
    }
    let sa = split(a, true, t)?;
    let sy = split(y, false, t)?;
    // Keep pairs with p + q <= 2 (0-based): 6 exact GEMMs.
    let pairs: Vec<(usize, usize)> = (0..SLICES)
        .flat_map(|i| (0..SLICES).map(move |j| (i, j)))
        .filter(|&(i, j)| i + j <= 2)
        .collect();
    for &(i, j) in &pairs {
        let g = sa.min_grid[i] * sy.min_grid[j];
        if sa.min_grid[i].is_finite() && sy.min_grid[j].is_finite() && !(g >= ETA) {
            return Err(Inconclusive::new(
                "dynamic range too large for error-free slice products",
            ));
        }
    }
    let mut prods: Vec<Mat<f64>> = Vec::with_capacity(pairs.len());
    for &(i, j) in &pairs {
        let mut c = Mat::<f64>::zeros(rows, p);
        faer::linalg::matmul::matmul(
            &mut c,
            Accum::Replace,
            sa.slices[i].as_ref(),
            sy.slices[j].as_ref(),
            1.0,
            par,
        );
        prods.push(c);
    }
    // Dropped terms: slice pairs with i + j > 2, A_rest Y, (A - A_rest) Y_rest.
    let fa: Vec<f64> = sa.slices.iter().map(|m| frob_ru(m.as_ref())).collect();
    let fa_rest = frob_ru(sa.rest.as_ref());
    let fa_all = r::add_ru(frob_ru(a), fa_rest);
    let cy: Vec<Vec<f64>> = sy.slices.iter().map(|m| col_norms_ru(m.as_ref())).collect();
    let cy_rest = col_norms_ru(sy.rest.as_ref());
    let cy_all = col_norms_ru(y);
    let n_terms = pairs.len() + 2;
    let g = r::gamma_ru(n_terms);
    let g2 = r::mul_ru(g, g);
    let mut out = Vec::with_capacity(p);
    for j in 0..p {
        let mut dropped = r::add_ru(r::mul_ru(fa_rest, cy_all[j]), r::mul_ru(fa_all, cy_rest[j]));
        for i in 0..SLICES {
            for q in 0..SLICES {
                if i + q > 2 {
                    dropped = r::add_ru(dropped, r::mul_ru(fa[i], cy[q][j]));
                }
            }
        }
        let xc = x.col(j);
        let sj = s[j];
        let mut res2 = 0.0f64; // sum of res_ij^2 (RN; bounded below)
        let mut err2 = 0.0f64; // upper bound of sum of err_ij^2
        for i in 0..rows {
            let ph = -sj * xc[i];
            let pl = (-sj).mul_add(xc[i], -ph); // exact unless underflow (eta term)
            let mut sum = ph;
            let mut comp = 0.0f64;
            let mut abs_sum = r::add_ru(ph.abs(), pl.abs());
            for c in &prods {
                let v = c[(i, j)];
                let (s2, e2) = two_sum(sum, v);
                sum = s2;
                comp += e2;
                abs_sum = r::add_ru(abs_sum, v.abs());
            }
            let (s2, e2) = two_sum(sum, pl);
            sum = s2;
            comp += e2;
            let res = sum + comp;
            let big_g = r::add_ru(r::mul_ru(g2, abs_sum), r::mul_ru((n_terms + 1) as f64, ETA));
            let err = r::add_ru(
                r::div_ru(r::mul_ru(U, r::add_ru(res.abs(), big_g)), 1.0 - 2.0 * U),
                big_g,
            );
            res2 = res.mul_add(res, res2);
            err2 = r::add_ru(err2, r::mul_ru(err, err));
        }
        let bound = r::add_ru(
            r::add_ru(r::sqrt_ru(r::nonneg_sum_ru(res2, rows)), r::sqrt_ru(err2)),
            dropped,
        );
        if !bound.is_finite() {
            return Err(Inconclusive::new("extended residual bound overflowed"));
        }
        out.push(bound);
    }
    Ok(out)
}

/// Certified groups for the approximate SVD of `a` (`m >= n`) with
/// error-free residuals. Same guarantee as [`super::dense::certify_pairs`]:
/// each returned hull contains exactly `members.len()` singular values.
/// Justification: `proofs/residual-single-pair.md` (L6),
/// `proofs/residual-cluster.md` (L7), `proofs/near-orthogonal.md` (L8),
/// `proofs/ozaki-exact-product.md` (L11), `proofs/compensated-sum.md` (L12).
pub fn certify_pairs(
    a: MatRef<'_, f64>,
    svd: &ApproxSvd,
    par: Par,
) -> Result<Vec<Group<f64>>, Inconclusive> {
    let e = residual_col_bounds_exact(a, svd.v.as_ref(), svd.u.as_ref(), &svd.s, par)?;
    let f = residual_col_bounds_exact(a.transpose(), svd.u.as_ref(), svd.v.as_ref(), &svd.s, par)?;
    pair_bounds_and_merge(&svd.s, &e, &f, svd.v.as_ref())
}
