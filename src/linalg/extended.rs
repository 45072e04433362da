//! Stage 2: the residual theorem of Stage 1 with the residuals `A V~ - U~ S`
//! and `A^T U~ - V~ S` computed (almost) error-free.
//!
//! Ozaki splitting ([`proofs/ozaki-exact-product.md`](crate::proofs::ozaki_exact_product), L11) cuts the rows of the
//! left factor and the columns of the right factor into slices of `t` bits
//! on a per-line grid, so that every slice product is computed *exactly* by
//! an ordinary f64 GEMM (any order, FMA or not). The kept slice products and
//! the error-free `s_j u_ij` (TwoProduct by FMA) are summed per entry by a
//! cascaded TwoSum (Sum2, [`proofs/compensated-sum.md`](crate::proofs::compensated_sum), L12); the dropped
//! low-order slice products and remainders are bounded by Frobenius norms.
//! The residual is then known to about one unit roundoff *of the residual*,
//! so the enclosure width is set by how good the approximate SVD really is.

use faer::{Accum, Mat, MatRef, Par};

use inari::Interval;

use super::cluster::Group;
use super::dense::{exponent_of, pair_bounds_and_merge, ApproxSvd};
use super::eft::Sum2;
use super::rounding::{self as r, ETA};
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
        // mu < 2^e; e <= 1000 keeps every grid multiple far from overflow (L11).
        let e = exponent_of(mu) + 1;
        if e > 1000 {
            return Err(Inconclusive::new(
                "entries too large for error-free splitting",
            ));
        }
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
    super::dense::map_columns(x, r::norm2_ru)
}

/// `A Y` held as exactly computed slice products plus a bound of what was
/// dropped: `A Y e_j = sum_c prods[c] e_j + D e_j` with `||D e_j|| <= dropped[j]`
/// (L11).
pub(crate) struct ExactProduct {
    prods: Vec<Mat<f64>>,
    dropped: Vec<f64>,
}

/// Error-free slice products of `A Y` (L11). `a` is `rows x k`, `y` is `k x p`.
pub(crate) fn exact_product(
    a: MatRef<'_, f64>,
    y: MatRef<'_, f64>,
    par: Par,
) -> Result<ExactProduct, Inconclusive> {
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
    let dropped = (0..p)
        .map(|j| {
            let mut d = r::add_ru(r::mul_ru(fa_rest, cy_all[j]), r::mul_ru(fa_all, cy_rest[j]));
            for (i, fai) in fa.iter().enumerate() {
                for (q, cyq) in cy.iter().enumerate() {
                    if i + q > 2 {
                        d = r::add_ru(d, r::mul_ru(*fai, cyq[j]));
                    }
                }
            }
            d
        })
        .collect();
    Ok(ExactProduct { prods, dropped })
}

/// Upper bounds of `||(A Y - X diag(s)) e_j||_2` per column from an exact
/// product (L11, L12).
pub(crate) fn residual_col_bounds_exact(
    prod: &ExactProduct,
    x: MatRef<'_, f64>,
    s: &[f64],
) -> Result<Vec<f64>, Inconclusive> {
    let rows = x.nrows();
    let mut out = Vec::with_capacity(s.len());
    for (j, &sj) in s.iter().enumerate() {
        let xc = x.col(j);
        let mut res2 = 0.0f64; // sum of res_ij^2 (RN; bounded below)
        let mut err2 = 0.0f64; // upper bound of sum of err_ij^2
        for i in 0..rows {
            let mut acc = Sum2::new();
            acc.add_prod(-sj, xc[i]);
            for c in &prod.prods {
                acc.add(c[(i, j)]);
            }
            let (res, err) = acc.finish();
            res2 = res.mul_add(res, res2);
            err2 = r::add_ru(err2, r::mul_ru(err, err));
        }
        let bound = r::add_ru(
            r::add_ru(r::sqrt_ru(r::nonneg_sum_ru(res2, rows)), r::sqrt_ru(err2)),
            prod.dropped[j],
        );
        if !bound.is_finite() {
            return Err(Inconclusive::new("extended residual bound overflowed"));
        }
        out.push(bound);
    }
    Ok(out)
}

/// Encloses `x_j^T (A y_j)` from the exact product (L11, L12).
fn rayleigh_numerator(
    prod: &ExactProduct,
    x: MatRef<'_, f64>,
    j: usize,
    xnorm_hi: f64,
) -> Interval {
    let xc = x.col(j);
    let mut acc = Sum2::new();
    for c in &prod.prods {
        let cc = c.col(j);
        for (&xi, &ci) in xc.iter().zip(cc.iter()) {
            acc.add_prod(xi, ci);
        }
    }
    let (res, err) = acc.finish();
    let err = r::add_ru(err, r::mul_ru(xnorm_hi, prod.dropped[j]));
    Interval::try_from((r::sub_rd(res, err), r::add_ru(res, err))).unwrap_or(Interval::ENTIRE)
}

/// Encloses `||x_j||^2` (L12).
fn norm2_sq_enclosure(x: MatRef<'_, f64>, j: usize) -> Interval {
    let mut acc = Sum2::new();
    for &v in x.col(j).iter() {
        acc.add_prod(v, v);
    }
    let (res, err) = acc.finish();
    Interval::try_from((r::sub_rd(res, err).max(0.0), r::add_ru(res, err)))
        .unwrap_or(Interval::ENTIRE)
}

/// Certified groups for the approximate SVD of `a` (`m >= n`) with
/// error-free residuals, then Kato–Temple refinement of isolated values.
/// Same guarantee as [`super::dense::certify_pairs`]: each returned hull
/// contains exactly `members.len()` singular values.
/// Justification: [`proofs/residual-single-pair.md`](crate::proofs::residual_single_pair) (L6),
/// [`proofs/residual-cluster.md`](crate::proofs::residual_cluster) (L7), [`proofs/near-orthogonal.md`](crate::proofs::near_orthogonal) (L8),
/// [`proofs/ozaki-exact-product.md`](crate::proofs::ozaki_exact_product) (L11), [`proofs/compensated-sum.md`](crate::proofs::compensated_sum) (L12),
/// [`proofs/kato-temple.md`](crate::proofs::kato_temple) (L17).
pub(crate) fn certify_pairs(
    a: MatRef<'_, f64>,
    svd: &ApproxSvd,
    par: Par,
) -> Result<Vec<Group<f64>>, Inconclusive> {
    let u_mat = svd.u.to_mat();
    let u = faer::Mat::as_ref(&u_mat);
    let pv = exact_product(a, svd.v.as_ref(), par)?;
    let qu = exact_product(a.transpose(), u, par)?;
    let e = residual_col_bounds_exact(&pv, u, &svd.s)?;
    let f = residual_col_bounds_exact(&qu, svd.v.as_ref(), &svd.s)?;
    let mut groups = pair_bounds_and_merge(&svd.s, &e, &f, svd.v.as_ref())?;
    kato_temple_refine(&mut groups, &pv, u, svd, &e, &f);
    Ok(groups)
}

/// Tightens every isolated (singleton) group with the Kato–Temple
/// inequality for `B = [[0, A^T], [A, 0]]` (L17): the Rayleigh quotient
/// `theta = 2 u^T A v / (||u||^2 + ||v||^2)` is enclosed with error-free
/// products, `eps^2 <= (||E||^2 + ||F||^2) / (||u||^2 + ||v||^2)` (the
/// Rayleigh quotient minimises the residual over shifts), and the
/// neighbouring groups give `alpha`, `beta` with no other eigenvalue of `B`
/// in `(alpha, beta)`. The result is intersected with the old hull.
fn kato_temple_refine(
    groups: &mut [Group<f64>],
    pv: &ExactProduct,
    u: MatRef<'_, f64>,
    svd: &ApproxSvd,
    e: &[f64],
    f: &[f64],
) {
    let ng = groups.len();
    let bounds: Vec<(f64, f64)> = groups.iter().map(|g| (g.lo, g.hi)).collect();
    for gi in 0..ng {
        if groups[gi].members.len() != 1 {
            continue;
        }
        let j = groups[gi].members[0];
        // Other eigenvalues of B: larger singular values >= beta, smaller ones,
        // zeros and negatives <= alpha (groups are sorted descending).
        let beta = if gi == 0 {
            f64::INFINITY
        } else {
            bounds[gi - 1].0
        };
        let alpha = if gi + 1 < ng {
            bounds[gi + 1].1.max(0.0)
        } else {
            0.0
        };
        let u2 = norm2_sq_enclosure(u, j);
        let v2 = norm2_sq_enclosure(svd.v.as_ref(), j);
        let z2 = u2 + v2;
        if !(z2.inf() > 0.0) {
            continue;
        }
        let num = rayleigh_numerator(pv, u, j, u2.sqrt().sup());
        let two = Interval::try_from((2.0, 2.0)).expect("2");
        let theta = two * num / z2;
        let res2 = r::add_ru(r::mul_ru(e[j], e[j]), r::mul_ru(f[j], f[j]));
        let eps2 = r::div_ru(res2, z2.inf());
        let (tl, th) = (theta.inf(), theta.sup());
        if !(tl.is_finite() && th.is_finite() && eps2.is_finite() && alpha < tl && th < beta) {
            continue;
        }
        let lo = r::sub_rd(tl, r::div_ru(eps2, r::sub_rd(beta, th)));
        let hi = r::add_ru(th, r::div_ru(eps2, r::sub_rd(tl, alpha)));
        let g = &mut groups[gi];
        let new_lo = if lo.is_finite() { lo.max(g.lo) } else { g.lo };
        let new_hi = if hi.is_finite() { hi.min(g.hi) } else { g.hi };
        // Both enclosures are valid, so they intersect; if they did not, one
        // claim would be wrong: keep the hull of L7 rather than guess.
        debug_assert!(
            new_lo <= new_hi,
            "Kato-Temple and L7 enclosures are disjoint"
        );
        if new_lo <= new_hi {
            g.lo = new_lo.max(0.0);
            g.hi = new_hi;
        }
    }
}
