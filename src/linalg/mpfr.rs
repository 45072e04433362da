//! The MPFR path: Ogita–Aishima refinement of a full SVD in high precision,
//! then certification with directed-rounding MPFR residuals.
//!
//! Refinement has no guarantee ([`proofs/ogita-aishima.md`](crate::proofs::ogita_aishima), L16); it only
//! produces better inputs for the residual theorem, which holds for any
//! approximation (L6, L7). The residuals, norms and Gram defects are bounded
//! with MPFR's directed rounding ([`proofs/mpfr-directed.md`](crate::proofs::mpfr_directed), L13), so the
//! result carries decimal bounds far tighter than f64 can show.
//!
//! The factors are thin (U is m x n): a refinement step and the
//! certification each cost O(m n^2) MPFR operations, so the time grows
//! like that of the f64 stages (`Precision::Auto` caps `m n^2`).

// Index loops mirror the matrix formulas of the refinement.
#![allow(clippy::needless_range_loop)]

use faer::MatRef;
use rayon::prelude::*;
use rug::float::Round;
use rug::ops::AssignRound;
use rug::Float;

use super::cluster::{index_matched, merge_groups, DirectedScalar, PairBounds};
use super::{CertifiedValue, ExactBounds, Method};
use crate::enclosure::{Enclosure, Inconclusive};

impl DirectedScalar for Float {
    fn zero_like(&self) -> Self {
        Float::new(self.prec())
    }
    fn one_like(&self) -> Self {
        Float::with_val(self.prec(), 1)
    }
    fn add_ru(&self, o: &Self) -> Self {
        Float::with_val_round(self.prec(), self + o, Round::Up).0
    }
    fn sub_rd(&self, o: &Self) -> Self {
        Float::with_val_round(self.prec(), self - o, Round::Down).0
    }
    fn div_ru(&self, o: &Self) -> Self {
        Float::with_val_round(self.prec(), self / o, Round::Up).0
    }
    fn sqrt_ru(&self) -> Self {
        Float::with_val_round(self.prec(), self.sqrt_ref(), Round::Up).0
    }
    fn sqrt_rd(&self) -> Self {
        if self.is_sign_negative() || self.is_zero() {
            return Float::new(self.prec());
        }
        Float::with_val_round(self.prec(), self.sqrt_ref(), Round::Down).0
    }
    fn is_finite(&self) -> bool {
        Float::is_finite(self)
    }
    fn is_positive(&self) -> bool {
        Float::is_sign_positive(self) && !self.is_zero()
    }
}

/// Column-major matrix of MPFR numbers.
#[derive(Clone)]
struct FMat {
    rows: usize,
    cols: usize,
    data: Vec<Float>,
}

impl FMat {
    fn from_faer(a: MatRef<'_, f64>, prec: u32) -> Self {
        let (rows, cols) = (a.nrows(), a.ncols());
        let mut data = Vec::with_capacity(rows * cols);
        for j in 0..cols {
            for i in 0..rows {
                data.push(Float::with_val(prec, a[(i, j)]));
            }
        }
        Self { rows, cols, data }
    }
    fn col(&self, j: usize) -> &[Float] {
        &self.data[j * self.rows..(j + 1) * self.rows]
    }
    fn at(&self, i: usize, j: usize) -> &Float {
        &self.data[j * self.rows + i]
    }
}

/// Round-to-nearest dot product at `prec` (refinement only: no guarantee).
fn dot_rn(x: &[Float], y: &[Float], prec: u32) -> Float {
    let mut acc = Float::new(prec);
    let mut tmp = Float::new(prec);
    for (a, b) in x.iter().zip(y) {
        tmp.assign_round(a.mul_add_ref(b, &acc), Round::Nearest);
        std::mem::swap(&mut tmp, &mut acc);
    }
    acc
}

/// Directed dot product: a lower bound (`Round::Down`) or an upper bound
/// (`Round::Up`) of the exact `x . y` (L13).
fn dot_directed(x: &[Float], y: &[Float], prec: u32, round: Round) -> Float {
    let mut acc = Float::new(prec);
    let mut tmp = Float::new(prec);
    for (a, b) in x.iter().zip(y) {
        tmp.assign_round(a.mul_add_ref(b, &acc), round);
        std::mem::swap(&mut tmp, &mut acc);
    }
    acc
}

/// `X^T Y` in round-to-nearest.
fn mul_tn(x: &FMat, y: &FMat, prec: u32) -> FMat {
    let cols: Vec<Vec<Float>> = (0..y.cols)
        .into_par_iter()
        .map(|j| {
            (0..x.cols)
                .map(|i| dot_rn(x.col(i), y.col(j), prec))
                .collect()
        })
        .collect();
    FMat {
        rows: x.cols,
        cols: y.cols,
        data: cols.into_iter().flatten().collect(),
    }
}

/// `X Y` in round-to-nearest (Y given column-major; X is read by rows).
fn mul_nn(x: &FMat, y: &FMat, prec: u32) -> FMat {
    let xt = transpose(x);
    let cols: Vec<Vec<Float>> = (0..y.cols)
        .into_par_iter()
        .map(|j| {
            (0..x.rows)
                .map(|i| dot_rn(xt.col(i), y.col(j), prec))
                .collect()
        })
        .collect();
    FMat {
        rows: x.rows,
        cols: y.cols,
        data: cols.into_iter().flatten().collect(),
    }
}

fn transpose(x: &FMat) -> FMat {
    let mut data = Vec::with_capacity(x.rows * x.cols);
    for i in 0..x.rows {
        for j in 0..x.cols {
            data.push(x.at(i, j).clone());
        }
    }
    FMat {
        rows: x.cols,
        cols: x.rows,
        data,
    }
}

/// One Ogita–Aishima step (L16) on thin factors: `u` is m x n, `v` is
/// n x n, `m >= n`. The n x n blocks are the paper's formulas; the part of
/// each new left vector outside span(U), which the square form gets from the
/// completion `U_2 U_2^T`, is taken as `(I - U U^T)(A v_i / s_i - u_i)`
/// (equal when `[U U_2]` is orthogonal, and within second-order terms
/// otherwise). Cost: four m x n x n products and two n x n x n ones, instead
/// of the O(m^3) of a completed m x m U.
/// Returns the new approximate singular values and the largest correction.
fn refine_step(a: &FMat, u: &mut FMat, v: &mut FMat, prec: u32) -> (Vec<Float>, f64) {
    let (m, n) = (a.rows, a.cols);
    debug_assert!(u.rows == m && u.cols == n && v.rows == n && v.cols == n);
    let mut r = mul_tn(u, u, prec); // U^T U, n x n
    let mut s = mul_tn(v, v, prec); // V^T V
    for x in r.data.iter_mut().chain(s.data.iter_mut()) {
        *x = -x.clone();
    }
    for i in 0..n {
        r.data[i * n + i] += 1;
        s.data[i * n + i] += 1;
    }
    let av = mul_nn(a, v, prec); // m x n
    let t = mul_tn(u, &av, prec); // U^T A V, n x n
    let f = |x: f64| Float::with_val(prec, x);
    let sig: Vec<Float> = (0..n)
        .map(|i| {
            let d = f(1.0) - (Float::with_val(prec, r.at(i, i) + s.at(i, i)) / 2u32);
            Float::with_val(prec, t.at(i, i) / &d)
        })
        .collect();
    let step = Step {
        r: &r,
        s: &s,
        t: &t,
        sig: &sig,
        prec,
    };
    // U' = U (I + F) + W and V' = V (I + G).
    let (ff, gg, mut maxcorr) = step.in_span();
    let w = step.outside_span(&av, u, &mut maxcorr);
    let mut un = mul_nn(u, &ff, prec);
    for (x, wv) in un.data.iter_mut().zip(w.data.iter()) {
        *x += wv;
    }
    *u = un;
    *v = mul_nn(v, &gg, prec);
    (sig, maxcorr)
}

/// What one [`refine_step`] computes from: `R = I - U^T U`,
/// `S = I - V^T V`, `T = U^T A V` and the approximate singular values.
struct Step<'a> {
    r: &'a FMat,
    s: &'a FMat,
    t: &'a FMat,
    sig: &'a [Float],
    prec: u32,
}

impl Step<'_> {
    /// `I + F` and `I + G` of the in-span correction (the paper's n x n
    /// formulas), with the largest correction taken.
    fn in_span(&self) -> (FMat, FMat, f64) {
        let (n, prec) = (self.sig.len(), self.prec);
        let (r, s) = (self.r, self.s);
        let zero = || FMat {
            rows: n,
            cols: n,
            data: vec![Float::new(prec); n * n],
        };
        let (mut ff, mut gg) = (zero(), zero());
        let mut maxcorr = 0.0f64;
        for i in 0..n {
            ff.data[i * n + i] = Float::with_val(prec, r.at(i, i) / 2u32);
            gg.data[i * n + i] = Float::with_val(prec, s.at(i, i) / 2u32);
            for j in 0..n {
                if i == j {
                    continue;
                }
                match self.pair(i, j) {
                    Some((fij, gij, big)) => {
                        maxcorr = maxcorr.max(big);
                        ff.data[j * n + i] = fij; // F[i][j]
                        gg.data[j * n + i] = gij; // G[i][j]
                    }
                    None => {
                        // Re-orthogonalise only (F + F^T = R).
                        ff.data[j * n + i] = Float::with_val(prec, r.at(i, j) / 2u32);
                        gg.data[j * n + i] = Float::with_val(prec, s.at(i, j) / 2u32);
                    }
                }
            }
        }
        for i in 0..n {
            ff.data[i * n + i] += 1;
            gg.data[i * n + i] += 1;
        }
        (ff, gg, maxcorr)
    }

    /// `(F[i][j], G[i][j], the larger magnitude)` of the Ogita-Aishima
    /// formula; `None` where the pair is left to re-orthogonalisation:
    /// clustered or repeated values (the formula divides by the gap; pairs
    /// closer than 2^-24 relative to sigma_i^2 + sigma_j^2), or a
    /// correction above 2^-10 (the pair is not resolved yet, a cluster in
    /// disguise).
    fn pair(&self, i: usize, j: usize) -> Option<(Float, Float, f64)> {
        let (prec, sig, r, s, t) = (self.prec, self.sig, self.r, self.s, self.t);
        let tiny_gap = Float::with_val(prec, 1u32) >> 24;
        let sj2 = Float::with_val(prec, sig[j].square_ref());
        let si2 = Float::with_val(prec, sig[i].square_ref());
        let den = Float::with_val(prec, &sj2 - &si2);
        let scale = Float::with_val(prec, &si2 + &sj2);
        let cluster_gap = Float::with_val(prec, &scale * &tiny_gap);
        if den.clone().abs() <= cluster_gap {
            return None;
        }
        let alpha = Float::with_val(
            prec,
            t.at(i, j) + Float::with_val(prec, &sig[j] * r.at(i, j)),
        );
        let beta = Float::with_val(
            prec,
            t.at(j, i) + Float::with_val(prec, &sig[j] * s.at(i, j)),
        );
        let fij = Float::with_val(
            prec,
            Float::with_val(prec, &alpha * &sig[j]) + Float::with_val(prec, &beta * &sig[i]),
        ) / &den;
        let gij = Float::with_val(
            prec,
            Float::with_val(prec, &alpha * &sig[i]) + Float::with_val(prec, &beta * &sig[j]),
        ) / &den;
        let big = fij.to_f64().abs().max(gij.to_f64().abs());
        // `!(>)`, as before: a NaN correction is taken, not re-orthogonalised.
        (!(big > 1.0 / 1024.0)).then_some((fij, gij, big))
    }

    /// `W`, the part of the new left vectors outside span(U):
    /// `w_i = y_i - U c_i` with `y_i = A v_i / s_i - u_i` and
    /// `c_i = U^T y_i = T e_i / s_i - (I - R) e_i` (reusing T and R); a
    /// column not resolved yet (a tiny or badly approximated value, or a
    /// correction above 2^-10) is left to the in-span correction only.
    fn outside_span(&self, av: &FMat, u: &FMat, maxcorr: &mut f64) -> FMat {
        let (n, prec, sig) = (self.sig.len(), self.prec, self.sig);
        let m = av.rows;
        let f = |x: f64| Float::with_val(prec, x);
        let tiny = Float::with_val(prec, 1u32) >> (prec as i32 / 2);
        let mut y = FMat {
            rows: m,
            cols: n,
            data: vec![Float::new(prec); m * n],
        };
        let mut c = FMat {
            rows: n,
            cols: n,
            data: vec![Float::new(prec); n * n],
        };
        let mut active = vec![false; n];
        for i in 0..n {
            let si = &sig[i];
            if si.is_zero() || si.clone().abs() <= tiny {
                continue;
            }
            active[i] = true;
            for k in 0..m {
                let q = Float::with_val(prec, av.at(k, i) / si);
                y.data[i * m + k] = Float::with_val(prec, q - u.at(k, i));
            }
            for k in 0..n {
                let q = Float::with_val(prec, self.t.at(k, i) / si);
                let e = if k == i { f(1.0) } else { f(0.0) };
                c.data[i * n + k] =
                    Float::with_val(prec, q - Float::with_val(prec, e - self.r.at(k, i)));
            }
        }
        let uc = mul_nn(u, &c, prec);
        let mut w = y;
        for i in (0..n).filter(|&i| active[i]) {
            let col = &mut w.data[i * m..(i + 1) * m];
            let mut w_max = 0.0f64;
            for (x, q) in col.iter_mut().zip(uc.col(i)) {
                *x -= q;
                w_max = w_max.max(x.to_f64().abs());
            }
            if w_max <= 1.0 / 1024.0 {
                *maxcorr = maxcorr.max(w_max);
            } else {
                col.iter_mut().for_each(|x| *x = Float::new(prec));
            }
        }
        w
    }
}

/// Largest `m * n * n` for which [`certify`] tries the one-sided Jacobi
/// start (`jacobi_svd`) after faer's double-precision start left a value
/// loose: each Jacobi sweep costs about `3 m n^2 / 2` MPFR operations, and
/// graded matrices take some ten sweeps (under a second at this limit at
/// 128 bits, a few seconds at 2048).
pub(crate) const JACOBI_MAX_WORK: usize = 1 << 18;

/// Sweeps after which [`jacobi_svd`] stops even if a rotation was applied
/// in the last one (its output is only an approximation either way).
const JACOBI_MAX_SWEEPS: usize = 60;

/// An approximate thin SVD `A ~ U diag(s) V^T` by one-sided (Hestenes)
/// Jacobi rotations in MPFR at `prec` bits, largest value first: `u` is
/// m x n, `v` n x n, `m >= n`. No guarantee (the certification assumes
/// nothing of it). Unlike faer's binary64 SVD it neither overflows nor
/// underflows on entries near 2^+-1000 (MPFR's exponent range), and it
/// resolves the small values of graded matrices (`D B D`) to high relative
/// accuracy, which the residual certification then confirms at a
/// precision that covers the grading.
fn jacobi_svd(a: &FMat, prec: u32) -> (FMat, FMat, Vec<Float>) {
    let (m, n) = (a.rows, a.cols);
    let mut w = a.clone();
    let mut v = FMat {
        rows: n,
        cols: n,
        data: (0..n * n)
            .map(|k| Float::with_val(prec, u32::from(k % (n + 1) == 0)))
            .collect(),
    };
    // Rotate while |u_p . u_q| > tol ||u_p|| ||u_q||.
    let tol = Float::with_val(prec, 1u32) >> (prec as i32 - 4);
    let rotate = |x: &mut FMat, p: usize, q: usize, c: &Float, sn: &Float| {
        let rows = x.rows;
        let (lo, hi) = x.data.split_at_mut(q * rows);
        let xp = &mut lo[p * rows..(p + 1) * rows];
        let xq = &mut hi[..rows];
        for (a, b) in xp.iter_mut().zip(xq.iter_mut()) {
            let na = Float::with_val(prec, c * &*a) - Float::with_val(prec, sn * &*b);
            let nb = Float::with_val(prec, sn * &*a) + Float::with_val(prec, c * &*b);
            *a = na;
            *b = nb;
        }
    };
    for _ in 0..JACOBI_MAX_SWEEPS {
        let mut rotated = false;
        for p in 0..n {
            for q in p + 1..n {
                let alpha = dot_rn(w.col(p), w.col(p), prec);
                let beta = dot_rn(w.col(q), w.col(q), prec);
                let gamma = dot_rn(w.col(p), w.col(q), prec);
                if gamma.is_zero() {
                    continue;
                }
                let ab = Float::with_val(prec, &alpha * &beta).sqrt();
                if Float::with_val(prec, gamma.abs_ref()) <= Float::with_val(prec, &ab * &tol) {
                    continue;
                }
                rotated = true;
                // zeta = (beta - alpha) / (2 gamma); t = sign(zeta) / (|zeta| + sqrt(1 + zeta^2)).
                let zeta =
                    Float::with_val(prec, &beta - &alpha) / Float::with_val(prec, &gamma * 2u32);
                let root =
                    Float::with_val(prec, Float::with_val(prec, zeta.square_ref()) + 1u32).sqrt();
                let mut t =
                    Float::with_val(prec, Float::with_val(prec, zeta.abs_ref()) + &root).recip();
                if zeta.is_sign_negative() {
                    t = -t;
                }
                let c = Float::with_val(prec, Float::with_val(prec, t.square_ref()) + 1u32)
                    .sqrt()
                    .recip();
                let sn = Float::with_val(prec, &c * &t);
                rotate(&mut w, p, q, &c, &sn);
                rotate(&mut v, p, q, &c, &sn);
            }
        }
        if !rotated {
            break;
        }
    }
    let norms: Vec<Float> = (0..n)
        .map(|j| dot_rn(w.col(j), w.col(j), prec).sqrt())
        .collect();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| {
        norms[j]
            .partial_cmp(&norms[i])
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let mut u = FMat {
        rows: m,
        cols: n,
        data: Vec::with_capacity(m * n),
    };
    let mut vs = FMat {
        rows: n,
        cols: n,
        data: Vec::with_capacity(n * n),
    };
    for &j in &order {
        let s = &norms[j];
        for x in w.col(j) {
            u.data.push(if s.is_zero() {
                Float::new(prec)
            } else {
                Float::with_val(prec, x / s)
            });
        }
        vs.data.extend(v.col(j).iter().cloned());
    }
    let sig = order.iter().map(|&j| norms[j].clone()).collect();
    (u, vs, sig)
}

/// Certified, index-matched enclosures of all singular values of `a`
/// (`m >= n`, holding `2^scale_exp` times the input exactly), with decimal
/// bounds at `bits` of precision.
///
/// *Guarantee: certified enclosure.* The i-th returned interval (and its
/// decimal `exact` bounds) contains the exact i-th largest singular value of
/// `2^-scale_exp a`. Justification: [`proofs/residual-single-pair.md`](crate::proofs::residual_single_pair) (L6),
/// [`proofs/residual-cluster.md`](crate::proofs::residual_cluster) (L7), [`proofs/near-orthogonal.md`](crate::proofs::near_orthogonal) (L8),
/// [`proofs/mpfr-directed.md`](crate::proofs::mpfr_directed) (L13); [`proofs/power-of-two-scaling.md`](crate::proofs::power_of_two_scaling) (L2).
pub(crate) fn certify(
    a: MatRef<'_, f64>,
    scale_exp: i32,
    bits: u32,
) -> Result<Vec<CertifiedValue>, Inconclusive> {
    let (m, n) = (a.nrows(), a.ncols());
    let prec = bits.max(64);
    let af = FMat::from_faer(a, prec);
    // faer's binary64 SVD, refined (L16), is the fast start; it fails (or
    // leaves the small values unresolved) on graded matrices whose entries
    // span much of the binary64 range.
    let faer_start = super::dense::faer_thin_svd(a).and_then(|svd| {
        let sig: Vec<Float> = svd
            .s
            .iter()
            .map(|&x| Float::with_val(prec, x.max(0.0)))
            .collect();
        let finite = sig.iter().all(|x| x.is_finite())
            && svd
                .u
                .col_iter()
                .chain(svd.v.col_iter())
                .all(|c| c.iter().all(|x| x.is_finite()));
        finite.then(|| {
            (
                FMat::from_faer(svd.u.as_ref(), prec),
                FMat::from_faer(svd.v.as_ref(), prec),
                sig,
            )
        })
    });
    let first = match faer_start {
        Some(start) => certify_start(&af, start, prec, true, scale_exp),
        None => Err(Inconclusive::new("the approximate SVD did not converge")),
    };
    // A value wider than half the working precision: try the Jacobi start
    // as well, where affordable, and keep the narrower per index (each
    // enclosure contains the exact value, L10).
    let loose_at = 2f64.powi(-(prec.min(2000) as i32) / 2);
    let loose = first
        .as_ref()
        .map_or(true, |vals| vals.iter().any(|v| v.rel_rad() > loose_at));
    if !loose || m.saturating_mul(n).saturating_mul(n) > JACOBI_MAX_WORK {
        return first;
    }
    let second = certify_start(&af, jacobi_svd(&af, prec), prec, false, scale_exp);
    match (first, second) {
        (Ok(mut f), Ok(s)) => {
            for (mine, theirs) in f.iter_mut().zip(s) {
                if theirs.rel_rad() < mine.rel_rad() {
                    *mine = theirs;
                }
            }
            Ok(f)
        }
        (Ok(f), Err(_)) => Ok(f),
        (Err(_), s) => s,
    }
}

/// Refines (when `refine`) and certifies one approximate SVD `start`
/// (`u` m x n, `v` n x n, values), returning unscaled index-matched values
/// with decimal ends (L6, L7, L8, L13, L2).
fn certify_start(
    af: &FMat,
    start: (FMat, FMat, Vec<Float>),
    prec: u32,
    refine: bool,
    scale_exp: i32,
) -> Result<Vec<CertifiedValue>, Inconclusive> {
    let n = af.cols;
    let (u0, v0, sig0) = start;
    let (mut u, mut v, mut sig) = (u0.clone(), v0.clone(), sig0.clone());
    // Quadratic convergence: 53 -> 106 -> 212 -> ... bits; stop early when
    // the corrections reach the working precision or stop shrinking.
    let target = 2f64.powi(-(prec as i32) + 8);
    let mut last = f64::INFINITY;
    for _ in 0..if refine { 12 } else { 0 } {
        let (s_new, corr) = refine_step(af, &mut u, &mut v, prec);
        sig = s_new.into_iter().map(|x| x.abs()).collect();
        if corr <= target || !(corr < last * 0.5) {
            break;
        }
        last = corr;
    }
    // Certification with directed rounding (L13). Refinement carries no
    // guarantee: if the refined factors cannot be certified, certify the
    // unrefined ones instead (both are valid inputs to L6/L7).
    let groups = match certify_factors(af, &u, &v, &sig, prec) {
        Ok(g) => g,
        Err(_) => certify_factors(af, &u0, &v0, &sig0, prec)?,
    };
    let digits = ((prec as f64) * std::f64::consts::LOG10_2).ceil() as usize + 2;
    let mut out = Vec::with_capacity(n);
    for (lo, hi, size) in index_matched(&groups) {
        // Undo the exact power-of-two prescaling (exact in MPFR's exponent range).
        let lo = lo >> scale_exp;
        let hi = hi >> scale_exp;
        let lo64 = lo.to_f64_round(Round::Down).max(0.0);
        let hi64 = hi.to_f64_round(Round::Up);
        let enclosure = Enclosure::new(lo64, hi64)
            .ok_or_else(|| Inconclusive::new("singular value bound outside the f64 range"))?;
        out.push(CertifiedValue {
            enclosure,
            method: Method::Mpfr(prec),
            cluster_size: size,
            exact: Some(ExactBounds {
                lo: lo.to_string_radix_round(10, Some(digits), Round::Down),
                hi: hi.to_string_radix_round(10, Some(digits), Round::Up),
            }),
        });
    }
    Ok(out)
}

/// Disjoint certified groups for given factors (`u` is m x n,
/// `v` n x n, `sig` n values) with directed-rounding residuals (L6, L7, L13).
fn certify_factors(
    af: &FMat,
    u: &FMat,
    v: &FMat,
    sig: &[Float],
    prec: u32,
) -> Result<Vec<super::cluster::Group<Float>>, Inconclusive> {
    let (m, n) = (af.rows, af.cols);
    let vt = v.clone();
    let rows_a = transpose(af); // row i of A as a contiguous column
    let per_col: Vec<(Float, Float)> = (0..n)
        .into_par_iter()
        .map(|j| {
            let vj = vt.col(j);
            let uj = u.col(j);
            // ||A v_j - s_j u_j||^2 + ||A^T u_j - s_j v_j||^2 (first n columns of U), upper bound
            let e2 = residual_sq_ru(&rows_a, m, vj, uj, &sig[j], prec);
            let f2 = residual_sq_ru(af, n, uj, vj, &sig[j], prec);
            let e2 = Float::with_val_round(prec, &e2 + &f2, Round::Up).0;
            let vn2 = dot_directed(vj, vj, prec, Round::Down);
            (e2, vn2.sqrt_rd())
        })
        .collect();
    let (res2_hi, ynorm_lo): (Vec<Float>, Vec<Float>) = per_col.into_iter().unzip();
    let pb = PairBounds {
        s: sig.to_vec(),
        res2_hi,
        ynorm_lo,
    };
    merge_groups(&pb, |mu| gram_defect_mpfr(v, mu, prec))
}

/// Upper bound of `||M y - s x||_2^2` where `M` has `rows` rows stored as
/// the columns of `mt` (so row i of M is `mt.col(i)`), by directed dot
/// products (L13).
fn residual_sq_ru(mt: &FMat, rows: usize, y: &[Float], x: &[Float], s: &Float, prec: u32) -> Float {
    let mut e2 = Float::new(prec);
    for i in 0..rows {
        let lo = dot_directed(mt.col(i), y, prec, Round::Down);
        let hi = dot_directed(mt.col(i), y, prec, Round::Up);
        let sx_hi = Float::with_val_round(prec, s * &x[i], Round::Up).0;
        let sx_lo = Float::with_val_round(prec, s * &x[i], Round::Down).0;
        let el = Float::with_val_round(prec, &lo - &sx_hi, Round::Down)
            .0
            .abs();
        let eh = Float::with_val_round(prec, &hi - &sx_lo, Round::Up).0.abs();
        let big = if el > eh { el } else { eh };
        let sq = Float::with_val_round(prec, big.square_ref(), Round::Up).0;
        e2 = Float::with_val_round(prec, &e2 + &sq, Round::Up).0;
    }
    e2
}

/// Upper bound of `||I - V_mu^T V_mu||_F` with directed rounding (L8, L13).
fn gram_defect_mpfr(v: &FMat, members: &[usize], prec: u32) -> Option<Float> {
    let mut acc = Float::new(prec);
    for (a, &i) in members.iter().enumerate() {
        for &j in &members[a..] {
            let lo = dot_directed(v.col(i), v.col(j), prec, Round::Down);
            let hi = dot_directed(v.col(i), v.col(j), prec, Round::Up);
            let (dlo, dhi) = if i == j {
                (
                    Float::with_val_round(prec, 1 - &hi, Round::Down).0,
                    Float::with_val_round(prec, 1 - &lo, Round::Up).0,
                )
            } else {
                (lo, hi)
            };
            let big = if dlo.clone().abs() > dhi.clone().abs() {
                dlo.abs()
            } else {
                dhi.abs()
            };
            let mut sq = Float::with_val_round(prec, big.square_ref(), Round::Up).0;
            if i != j {
                sq = Float::with_val_round(prec, &sq * 2u32, Round::Up).0;
            }
            acc = Float::with_val_round(prec, &acc + &sq, Round::Up).0;
        }
    }
    let r = Float::with_val_round(prec, acc.sqrt_ref(), Round::Up).0;
    r.is_finite().then_some(r)
}
