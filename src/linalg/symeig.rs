//! An approximate eigendecomposition of a symmetric matrix, **no guarantee**:
//! blocked Householder tridiagonalization, eigenvalues of the tridiagonal
//! matrix by the implicit QL algorithm, eigenvectors by inverse iteration,
//! and the back-transformation with blocked reflectors.
//!
//! Why not faer's `self_adjoint_evd`: its tridiagonalization applies a
//! rank-2 update to the whole trailing matrix at every column (reading and
//! writing it), and its divide and conquer forms dense eigenvector blocks;
//! here the trailing matrix is only *read* once per column (one symmetric
//! matrix-vector product) and updated once per panel by a rank-`2 nb`
//! product (as LAPACK's `dsytrd`/`dlatrd`), and the eigenvectors of the
//! tridiagonal matrix cost `O(n)` each. On the exact Gram matrices of
//! LLM-sized feed-forward weights (`n = 4096`) this halves the eigensolver's
//! time (`benches/scale.sh`).
//!
//! Nothing here needs to be right for a certificate to be right: the result
//! is only the approximation that `gram::certify_eigen_groups` checks with
//! its residual bound ([`proofs/gram-eigen.md`](crate::proofs::gram_eigen), L24, which assumes nothing of
//! the approximate pairs). A poor approximation gives wide hulls, and the
//! caller then falls back to faer's eigensolver. The vectors are normalised
//! but only nearly orthogonal: L24 needs no orthogonality for hulls that are
//! disjoint, and near-orthogonality (L8) only inside merged groups, which
//! here are made of eigenvalues that inverse iteration orthogonalises
//! against each other.

use faer::linalg::matmul::triangular::{self, BlockStructure};
use faer::{Accum, Mat, MatMut, MatRef, Par};

/// Columns per panel of the tridiagonalization and the back-transformation.
const NB: usize = 32;

/// Eigenvalues closer than this (relative to `||T||`) are treated as one
/// cluster by inverse iteration, whose vectors are then orthogonalised
/// against each other.
const CLUSTER_GAP: f64 = 1e-9;

/// Largest cluster orthogonalised (larger: give up, the caller falls back).
const MAX_CLUSTER: usize = 512;

/// A symmetric tridiagonal matrix with the reflectors that produced it.
struct Tridiagonal {
    /// Diagonal, `n`.
    d: Vec<f64>,
    /// Sub-diagonal, `n - 1`.
    e: Vec<f64>,
    /// Panels of reflectors, in order.
    panels: Vec<Panel>,
}

/// The reflectors `H_c = I - tau v v^T` of columns `k0..k0 + tau.len()`.
struct Panel {
    /// First column of the panel.
    k0: usize,
    /// `n - k0 - 1` rows: column `i` is the `v` of column `k0 + i`, with 1
    /// at row `i` and zeros above.
    v: Mat<f64>,
    /// The scalars `tau`.
    tau: Vec<f64>,
}

/// `y[i] += sum_k cols[k][i] xk[k]` for every `i`, and the dots
/// `cols[k] . x` returned: four columns of a symmetric matrix-vector product
/// in one pass over `y` (memory traffic, not arithmetic, is what limits it).
///
/// The order of every sum is fixed, whatever the build: `y` gains the four
/// columns' terms in column order, one rounding each (a fused multiply-add),
/// and each dot keeps four partial sums (rows `i mod 4`), added pairwise at
/// the end, then the rows past the last multiple of four in order.
/// [`symv_cols4_avx`] computes exactly these operations with AVX2 vectors
/// (the build's floor is x86-64-v3); the portable loop below is the same
/// arithmetic, lane by lane, for other targets.
#[inline(always)]
fn symv_cols4(cols: [&[f64]; 4], x: &[f64], xk: [f64; 4], y: &mut [f64]) -> [f64; 4] {
    let len = y.len();
    let cols: [&[f64]; 4] = cols.map(|c| &c[..len]);
    let x = &x[..len];
    let body = len / 4 * 4;
    #[cfg(all(
        target_arch = "x86_64",
        target_feature = "avx2",
        target_feature = "fma"
    ))]
    // SAFETY: the build enables AVX2 and FMA (checked by the cfg above);
    // every slice has at least `body` entries.
    let acc = unsafe { symv_cols4_avx(cols, x, xk, &mut y[..body]) };
    #[cfg(not(all(
        target_arch = "x86_64",
        target_feature = "avx2",
        target_feature = "fma"
    )))]
    let acc = symv_cols4_lanes(cols, x, xk, &mut y[..body]);
    let mut out = acc.map(|p| (p[0] + p[1]) + (p[2] + p[3]));
    for i in body..len {
        let mut yv = y[i];
        for k in 0..4 {
            let a = cols[k][i];
            yv = a.mul_add(xk[k], yv);
            out[k] = a.mul_add(x[i], out[k]);
        }
        y[i] = yv;
    }
    out
}

/// The body of [`symv_cols4`] (`y.len()` a multiple of 4) lane by lane: the
/// partial dots of lanes `i mod 4`.
#[cfg(any(
    test,
    not(all(
        target_arch = "x86_64",
        target_feature = "avx2",
        target_feature = "fma"
    ))
))]
fn symv_cols4_lanes(cols: [&[f64]; 4], x: &[f64], xk: [f64; 4], y: &mut [f64]) -> [[f64; 4]; 4] {
    let mut acc = [[0.0f64; 4]; 4];
    for i in 0..y.len() {
        let mut yv = y[i];
        for k in 0..4 {
            yv = cols[k][i].mul_add(xk[k], yv);
            acc[k][i % 4] = cols[k][i].mul_add(x[i], acc[k][i % 4]);
        }
        y[i] = yv;
    }
    acc
}

/// The body of [`symv_cols4`] (`y.len()` a multiple of 4) with AVX2: one
/// vector of four rows at a time, the same operations in the same order as
/// [`symv_cols4`] states.
///
/// # Safety
/// The CPU must support AVX2 and FMA, and `x` and every column must hold at
/// least `y.len()` entries.
#[cfg(all(
    target_arch = "x86_64",
    target_feature = "avx2",
    target_feature = "fma"
))]
#[inline(always)]
unsafe fn symv_cols4_avx(
    cols: [&[f64]; 4],
    x: &[f64],
    xk: [f64; 4],
    y: &mut [f64],
) -> [[f64; 4]; 4] {
    use std::arch::x86_64::*;
    let n = y.len();
    debug_assert!(n % 4 == 0 && x.len() >= n && cols.iter().all(|c| c.len() >= n));
    let (c0, c1, c2, c3) = (
        cols[0].as_ptr(),
        cols[1].as_ptr(),
        cols[2].as_ptr(),
        cols[3].as_ptr(),
    );
    let (xp, yp) = (x.as_ptr(), y.as_mut_ptr());
    let b = [
        _mm256_set1_pd(xk[0]),
        _mm256_set1_pd(xk[1]),
        _mm256_set1_pd(xk[2]),
        _mm256_set1_pd(xk[3]),
    ];
    let mut acc = [_mm256_setzero_pd(); 4];
    let mut i = 0;
    while i < n {
        let xv = _mm256_loadu_pd(xp.add(i));
        let mut yv = _mm256_loadu_pd(yp.add(i));
        let a0 = _mm256_loadu_pd(c0.add(i));
        yv = _mm256_fmadd_pd(a0, b[0], yv);
        acc[0] = _mm256_fmadd_pd(a0, xv, acc[0]);
        let a1 = _mm256_loadu_pd(c1.add(i));
        yv = _mm256_fmadd_pd(a1, b[1], yv);
        acc[1] = _mm256_fmadd_pd(a1, xv, acc[1]);
        let a2 = _mm256_loadu_pd(c2.add(i));
        yv = _mm256_fmadd_pd(a2, b[2], yv);
        acc[2] = _mm256_fmadd_pd(a2, xv, acc[2]);
        let a3 = _mm256_loadu_pd(c3.add(i));
        yv = _mm256_fmadd_pd(a3, b[3], yv);
        acc[3] = _mm256_fmadd_pd(a3, xv, acc[3]);
        _mm256_storeu_pd(yp.add(i), yv);
        i += 4;
    }
    let mut out = [[0.0f64; 4]; 4];
    for k in 0..4 {
        _mm256_storeu_pd(out[k].as_mut_ptr(), acc[k]);
    }
    out
}

/// `f` of every item, the results in the items' order: on the pool when
/// `par` allows more than one thread, else on the calling thread. Each
/// result depends on its item alone, so it is the same bits either way.
fn map_in_order<I: Send, T: Send>(
    items: Vec<I>,
    par: Par,
    f: impl Fn(I) -> T + Sync + Send,
) -> Vec<T> {
    match par {
        Par::Rayon(t) if t.get() > 1 => {
            use rayon::prelude::*;
            items.into_par_iter().map(f).collect()
        }
        _ => items.into_iter().map(f).collect(),
    }
}

/// `(a(), b())`: side by side on the pool when `par` allows more than one
/// thread, else one after the other on the calling thread (so that a
/// matrix the scheduler gave one thread takes no other). Each result is
/// the one it would be alone.
pub(crate) fn join_on_pool<A: Send, B: Send>(
    par: Par,
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B + Send,
) -> (A, B) {
    match par {
        Par::Rayon(t) if t.get() > 1 => rayon::join(a, b),
        _ => (a(), b()),
    }
}

/// Entries of the lower triangle per column block of [`symv_lower`]: about
/// 4 MiB of matrix, so that a block's work outweighs its partial vector.
const SYMV_BLOCK_AREA: usize = 1 << 19;

/// The column blocks of [`symv_lower`] of order `p`: boundaries (multiples
/// of 4, starting at 0 and ending at `p`) that cut the lower triangle into
/// shares of about [`SYMV_BLOCK_AREA`] entries. They depend on `p` alone,
/// never on the thread count, so that the order of every sum, and with it
/// every bit of the result, is the same on one thread and on many.
fn symv_blocks(p: usize) -> Vec<usize> {
    let area = p * (p + 1) / 2;
    let k = area.div_ceil(SYMV_BLOCK_AREA).max(1);
    let mut cuts = vec![0];
    for b in 1..k {
        // Column j0 with (p - j0)^2 ~ p^2 (1 - b / k): equal areas.
        let rest = (p as f64) * (1.0 - b as f64 / k as f64).sqrt();
        let j = ((p as f64 - rest) as usize) / 4 * 4;
        if j > *cuts.last().expect("starts at 0") && j < p {
            cuts.push(j);
        }
    }
    cuts.push(p);
    cuts
}

/// `y = A x` for the symmetric `A = a[off.., off..]` of which only the
/// lower triangle is read (one pass over it, four columns at a time), by
/// column blocks ([`symv_blocks`]) whose partial results are added in block
/// order: in parallel over the blocks when `par` allows, with the same bits
/// as on one thread.
fn symv_lower(a: &Mat<f64>, off: usize, x: &[f64], y: &mut [f64], par: Par) {
    let p = a.nrows() - off;
    let cuts = symv_blocks(p);
    if cuts.len() == 2 {
        y.iter_mut().for_each(|v| *v = 0.0);
        symv_lower_cols(a, off, x, 0, p, y);
        return;
    }
    let block = |b: usize| {
        let (j0, j1) = (cuts[b], cuts[b + 1]);
        let mut part = vec![0.0; p - j0];
        symv_lower_cols(a, off, x, j0, j1, &mut part);
        part
    };
    let parts: Vec<Vec<f64>> = map_in_order((0..cuts.len() - 1).collect(), par, block);
    y.iter_mut().for_each(|v| *v = 0.0);
    for (b, part) in parts.iter().enumerate() {
        for (yv, &pv) in y[cuts[b]..].iter_mut().zip(part) {
            *yv += pv;
        }
    }
}

/// The part of `A x` (`A = a[off.., off..]`, lower triangle) that columns
/// `j0..j1` contribute, into `y` = rows `j0..p` (zeroed by the caller).
fn symv_lower_cols(a: &Mat<f64>, off: usize, x: &[f64], j0: usize, j1: usize, y: &mut [f64]) {
    let p = a.nrows() - off;
    let col = |j: usize, from: usize| &a.col_as_slice(off + j)[off + from..];
    let mut j = j0;
    while j < j1 {
        let kk = (j1 - j).min(4);
        // The kk x kk diagonal block (lower part, mirrored).
        for r in 0..kk {
            for q in 0..=r {
                let av = col(j + q, j + r)[0];
                y[j + r - j0] += av * x[j + q];
                if r != q {
                    y[j + q - j0] += av * x[j + r];
                }
            }
        }
        let st = j + kk;
        if st < p {
            let (xt, yt) = (&x[st..], &mut y[st - j0..]);
            let d: [f64; 4] = if kk == 4 {
                symv_cols4(
                    [col(j, st), col(j + 1, st), col(j + 2, st), col(j + 3, st)],
                    xt,
                    [x[j], x[j + 1], x[j + 2], x[j + 3]],
                    yt,
                )
            } else {
                let mut d = [0.0; 4];
                for q in 0..kk {
                    let (c, xq) = (col(j + q, st), x[j + q]);
                    for ((yv, &a), &xv) in yt.iter_mut().zip(c).zip(xt) {
                        *yv = a.mul_add(xq, *yv);
                        d[q] = a.mul_add(xv, d[q]);
                    }
                }
                d
            };
            for q in 0..kk {
                y[j + q - j0] += d[q];
            }
        }
        j = st;
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0f64; 4];
    let mut aa = a.chunks_exact(4);
    let mut bb = b.chunks_exact(4);
    for (x, y) in (&mut aa).zip(&mut bb) {
        for l in 0..4 {
            acc[l] = x[l].mul_add(y[l], acc[l]);
        }
    }
    let mut s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for (x, y) in aa.remainder().iter().zip(bb.remainder()) {
        s = x.mul_add(*y, s);
    }
    s
}

/// Rows per task of [`for_row_chunks`], at the least.
const ROW_CHUNK_MIN: usize = 1024;

/// `f(r0, chunk)` on consecutive chunks of `y` (`r0` the first row of the
/// chunk), one per thread of the pool when `par` allows and `y` is long,
/// else `f(0, y)`. For updates of each entry on its own (the panel's
/// corrections of the tridiagonalization): the same bits on any split.
fn for_row_chunks(y: &mut [f64], par: Par, f: impl Fn(usize, &mut [f64]) + Sync) {
    match par {
        Par::Rayon(t) if t.get() > 1 && y.len() >= 2 * ROW_CHUNK_MIN => {
            use rayon::prelude::*;
            let chunk = y.len().div_ceil(t.get()).max(ROW_CHUNK_MIN);
            y.par_chunks_mut(chunk)
                .enumerate()
                .for_each(|(k, c)| f(k * chunk, c));
        }
        _ => f(0, y),
    }
}

/// `y += alpha x` over the length of `y` (`x` at least as long).
fn axpy(alpha: f64, x: &[f64], y: &mut [f64]) {
    for (yv, &xv) in y.iter_mut().zip(x) {
        *yv = alpha.mul_add(xv, *yv);
    }
}

/// Householder tridiagonalization `Q^T G Q = T` of the symmetric `g`
/// (lower triangle read), blocked as LAPACK's `dsytrd` with `dlatrd`.
fn tridiagonalize(mut a: Mat<f64>, par: Par) -> Option<Tridiagonal> {
    let n = a.nrows();
    let mut d = vec![0.0; n];
    let mut e = vec![0.0; n.saturating_sub(1)];
    let mut panels = Vec::new();
    let mut k0 = 0;
    let mut w_col = vec![0.0; n];
    let mut t1 = vec![0.0; NB];
    let mut t2 = vec![0.0; NB];
    while k0 + 1 < n {
        let nb = NB.min(n - 1 - k0);
        let rows = n - k0;
        // V and W of the panel, rows k0..n (row r of the matrix is row r - k0).
        let mut v = Mat::<f64>::zeros(rows, nb);
        let mut w = Mat::<f64>::zeros(rows, nb);
        let mut tau = Vec::with_capacity(nb);
        for i in 0..nb {
            let c = k0 + i;
            let o = c - k0; // row of c in V and W
                            // Column c (rows c..n) receives the panel's earlier updates.
            for_row_chunks(&mut a.col_as_slice_mut(c)[c..], par, |r0, col| {
                for q in 0..i {
                    let (wcq, vcq) = (w[(o, q)], v[(o, q)]);
                    axpy(-wcq, &v.col_as_slice(q)[o + r0..], col);
                    axpy(-vcq, &w.col_as_slice(q)[o + r0..], col);
                }
            });
            d[c] = a[(c, c)];
            // Reflector annihilating rows c+2..n of column c.
            let col = &mut a.col_as_slice_mut(c)[c + 1..];
            let alpha = col[0];
            let xnorm = dot(&col[1..], &col[1..]).sqrt();
            let (beta, t) = if xnorm == 0.0 {
                (alpha, 0.0)
            } else {
                let beta = -alpha.hypot(xnorm).copysign(alpha);
                let scale = 1.0 / (alpha - beta);
                col[1..].iter_mut().for_each(|x| *x *= scale);
                (beta, (beta - alpha) / beta)
            };
            if !beta.is_finite() || !t.is_finite() {
                return None;
            }
            e[c] = beta;
            col[0] = 1.0;
            tau.push(t);
            v.col_as_slice_mut(i)[o + 1..].copy_from_slice(col);
            if t == 0.0 {
                continue; // W column stays 0: the reflector is the identity
            }
            // w = tau (A22 v - V (W^T v) - W (V^T v)), A22 = rows/cols c+1..n.
            let vc = &v.col_as_slice(i)[o + 1..];
            let wc = &mut w_col[..n - c - 1];
            // The panel's dots with v beside the symmetric product (the
            // dots were a serial twentieth of it).
            let (t1, t2) = (&mut t1[..i], &mut t2[..i]);
            join_on_pool(
                par,
                || symv_lower(&a, c + 1, vc, wc, par),
                || {
                    for q in 0..i {
                        t1[q] = dot(&w.col_as_slice(q)[o + 1..], vc);
                        t2[q] = dot(&v.col_as_slice(q)[o + 1..], vc);
                    }
                },
            );
            for_row_chunks(wc, par, |r0, wc| {
                for q in 0..i {
                    axpy(-t1[q], &v.col_as_slice(q)[o + 1 + r0..], wc);
                    axpy(-t2[q], &w.col_as_slice(q)[o + 1 + r0..], wc);
                }
            });
            wc.iter_mut().for_each(|x| *x *= t);
            let alpha2 = -0.5 * t * dot(wc, vc);
            axpy(alpha2, vc, wc);
            w.col_as_slice_mut(i)[o + 1..].copy_from_slice(wc);
        }
        let k1 = k0 + nb;
        trailing_update(
            a.as_mut(),
            k1,
            v.as_ref().subrows(nb, n - k1),
            w.as_ref().subrows(nb, n - k1),
            par,
        );
        panels.push(Panel {
            k0,
            v: v.as_ref().subrows(1, rows - 1).to_owned(),
            tau,
        });
        k0 = k1;
    }
    d[n - 1] = a[(n - 1, n - 1)];
    if d.iter().chain(e.iter()).any(|x| !x.is_finite()) {
        return None;
    }
    Some(Tridiagonal { d, e, panels })
}

/// The trailing update of the lower triangle of a panel of the
/// tridiagonalization: `A22 -= V W^T + W V^T`, `A22 = a[k1.., k1..]` and
/// `vs`, `ws` its rows of the panel's `V` and `W`.
///
/// By column slabs of about equal area ([`symv_blocks`], a function of the
/// order alone), each slab's products on one thread, the slabs side by
/// side when `par` allows: one triangular product split over the pool kept
/// two threads busy for no gain on this machine (the same wall time as
/// one). Every entry gets the same two rounded updates, `V W^T` first, in
/// any split, so the slabs change no bit.
fn trailing_update(
    a: MatMut<'_, f64>,
    k1: usize,
    vs: MatRef<'_, f64>,
    ws: MatRef<'_, f64>,
    par: Par,
) {
    let p = vs.nrows();
    if p == 0 {
        return;
    }
    let slabs = lower_triangle_slabs(a.submatrix_mut(k1, k1, p, p), &symv_blocks(p));
    let update = |(j0, mut diag, mut below): LowerSlab<'_>| {
        let w = diag.ncols();
        for (l, r) in [(vs, ws), (ws, vs)] {
            triangular::matmul(
                diag.as_mut(),
                BlockStructure::TriangularLower,
                Accum::Add,
                l.subrows(j0, w),
                BlockStructure::Rectangular,
                r.subrows(j0, w).transpose(),
                BlockStructure::Rectangular,
                -1.0,
                Par::Seq,
            );
            faer::linalg::matmul::matmul(
                below.as_mut(),
                Accum::Add,
                l.subrows(j0 + w, p - j0 - w),
                r.subrows(j0, w).transpose(),
                -1.0,
                Par::Seq,
            );
        }
    };
    map_in_order(slabs, par, update);
}

/// One slab of [`lower_triangle_slabs`]: its first column `j0`, its
/// square block on the diagonal and the block under it.
pub(crate) type LowerSlab<'a> = (usize, MatMut<'a, f64>, MatMut<'a, f64>);

/// The lower triangle of the square `a` cut into slabs of consecutive
/// columns at `cuts` (increasing, from 0 to the order): each slab's
/// diagonal block and the rectangle under it, disjoint from every other
/// slab's, so that the slabs can be filled or updated side by side.
pub(crate) fn lower_triangle_slabs<'a>(a: MatMut<'a, f64>, cuts: &[usize]) -> Vec<LowerSlab<'a>> {
    let mut slabs = Vec::with_capacity(cuts.len().saturating_sub(1));
    let mut rest = a;
    for w in cuts.windows(2) {
        let (slab, tail) = rest.split_at_col_mut(w[1] - w[0]);
        let (top, below) = slab.split_at_row_mut(w[1]);
        slabs.push((w[0], top.subrows_mut(w[0], w[1] - w[0]), below));
        rest = tail;
    }
    slabs
}

/// `sqrt(a^2 + b^2)` without overflow or harmful underflow, to a few ulps
/// (a division and a square root: about three times faster than the
/// libm's `f64::hypot`, which the serial QL sweeps spent a
/// tenth of their time in). Approximations only: nothing certified uses it.
#[inline]
fn hypot_approx(a: f64, b: f64) -> f64 {
    let (a, b) = (a.abs(), b.abs());
    let (big, small) = if a >= b { (a, b) } else { (b, a) };
    if big == 0.0 || !big.is_finite() || small.is_nan() {
        return big + small; // 0, inf or NaN, as hypot would give (or NaN)
    }
    let t = small / big;
    big * t.mul_add(t, 1.0).sqrt()
}

/// Eigenvalues of the symmetric tridiagonal matrix (diagonal `d`,
/// sub-diagonal `e`) by the implicit QL algorithm with Wilkinson shifts,
/// in increasing order; `None` if it does not converge.
fn tridiagonal_eigenvalues(d: &[f64], e: &[f64]) -> Option<Vec<f64>> {
    let n = d.len();
    let mut d = d.to_vec();
    let mut e: Vec<f64> = e.iter().copied().chain(std::iter::once(0.0)).collect();
    for l in 0..n {
        let mut iter = 0;
        loop {
            let mut m = l;
            while m + 1 < n {
                let dd = d[m].abs() + d[m + 1].abs();
                if e[m].abs() <= f64::EPSILON * dd {
                    break;
                }
                m += 1;
            }
            if m == l {
                break;
            }
            iter += 1;
            if iter > 60 {
                return None;
            }
            let mut g = (d[l + 1] - d[l]) / (2.0 * e[l]);
            let mut r = hypot_approx(g, 1.0);
            g = d[m] - d[l] + e[l] / (g + r.copysign(g));
            let (mut s, mut c, mut p) = (1.0f64, 1.0f64, 0.0f64);
            let mut i = m;
            let mut underflow = false;
            while i > l {
                i -= 1;
                let f = s * e[i];
                let b = c * e[i];
                r = hypot_approx(f, g);
                e[i + 1] = r;
                if r == 0.0 {
                    d[i + 1] -= p;
                    e[m] = 0.0;
                    underflow = true;
                    break;
                }
                s = f / r;
                c = g / r;
                g = d[i + 1] - p;
                r = (d[i] - g) * s + 2.0 * c * b;
                p = s * r;
                d[i + 1] = g + p;
                g = c * r - b;
            }
            if underflow {
                continue;
            }
            d[l] -= p;
            e[l] = g;
            e[m] = 0.0;
        }
    }
    if d.iter().any(|x| !x.is_finite()) {
        return None;
    }
    d.sort_by(f64::total_cmp);
    Some(d)
}

/// The LU factors with partial pivoting of `T - lam_l I` for `L` shifts at
/// once, stored row by row with the `L` lanes side by side: the factorization
/// and the solves are serial chains along the rows, and `L` independent
/// chains interleaved keep the processor busy where one chain waits on the
/// latency of each step. Every lane does exactly the operations of its
/// shift alone, so a lane's bits do not depend on `L` or on its neighbours.
struct ShiftedLu<const L: usize> {
    /// Reciprocals of `U`'s diagonal (zeros replaced by `tiny`).
    inv0: Vec<[f64; L]>,
    /// `U`'s first and second super-diagonals.
    u1: Vec<[f64; L]>,
    u2: Vec<[f64; L]>,
    /// The multipliers and the row interchanges of `L`.
    mult: Vec<[f64; L]>,
    swap: Vec<[bool; L]>,
}

impl<const L: usize> ShiftedLu<L> {
    /// Factors `T - lam_l I` (`d` diagonal, `e` sub-diagonal) for each lane.
    fn new(d: &[f64], e: &[f64], lam: [f64; L], tiny: f64) -> Self {
        let n = d.len();
        let mut u0: Vec<[f64; L]> = d.iter().map(|&x| lam.map(|l| x - l)).collect();
        let mut u1: Vec<[f64; L]> = e.iter().map(|&x| [x; L]).collect();
        let mut u2 = vec![[0.0; L]; n.saturating_sub(2)];
        let mut mult = vec![[0.0; L]; n.saturating_sub(1)];
        let mut swap = vec![[false; L]; n.saturating_sub(1)];
        for i in 0..n.saturating_sub(1) {
            let sub = e[i];
            for l in 0..L {
                if u0[i][l].abs() >= sub.abs() {
                    if u0[i][l] == 0.0 {
                        u0[i][l] = tiny;
                    }
                    let m = sub / u0[i][l];
                    mult[i][l] = m;
                    u0[i + 1][l] -= m * u1[i][l];
                } else {
                    let m = u0[i][l] / sub;
                    mult[i][l] = m;
                    swap[i][l] = true;
                    let old_u1 = u1[i][l];
                    u0[i][l] = sub;
                    let t = u0[i + 1][l];
                    u1[i][l] = t;
                    if i + 2 < n {
                        u2[i][l] = u1[i + 1][l];
                        u1[i + 1][l] = -m * u2[i][l];
                    }
                    u0[i + 1][l] = old_u1 - m * t;
                }
            }
        }
        // Reciprocal pivots: the back-substitutions are serial chains, and a
        // multiplication is several times shorter than a division.
        let inv0 = u0
            .iter()
            .map(|row| row.map(|x| 1.0 / if x == 0.0 { tiny } else { x }))
            .collect();
        ShiftedLu {
            inv0,
            u1,
            u2,
            mult,
            swap,
        }
    }

    /// `x <- (T - lam_l I)^-1 x` in each lane; `forward` applies `L^-1`
    /// first (not on the first step, whose start vector is random anyway).
    fn solve(&self, x: &mut [[f64; L]], forward: bool) {
        let n = x.len();
        if forward {
            for i in 0..n - 1 {
                let (head, tail) = x.split_at_mut(i + 1);
                let (xi, xn) = (&mut head[i], &mut tail[0]);
                let steps = self.swap[i].iter().zip(&self.mult[i]);
                for ((a, b), (&swap, &m)) in xi.iter_mut().zip(xn.iter_mut()).zip(steps) {
                    if swap {
                        std::mem::swap(a, b);
                    }
                    *b -= m * *a;
                }
            }
        }
        let zero = [0.0; L];
        for i in (0..n).rev() {
            let (head, tail) = x.split_at_mut(i + 1);
            let next = tail.first().unwrap_or(&zero);
            let next2 = tail.get(1).unwrap_or(&zero);
            for (l, xi) in head[i].iter_mut().enumerate() {
                let mut s = *xi;
                if i + 1 < n {
                    s -= self.u1[i][l] * next[l];
                }
                if i + 2 < n {
                    s -= self.u2[i][l] * next2[l];
                }
                *xi = s * self.inv0[i][l];
            }
        }
    }
}

/// The fixed pseudo-random start vector of seed `seed` (xorshift), the same
/// on every thread count.
fn start_vector(seed: u64, n: usize) -> Vec<f64> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        })
        .collect()
}

/// `x / ||x||`, scaled by its largest magnitude first; `false` for a zero
/// or non-finite `x`.
fn normalise(x: &mut [f64]) -> bool {
    let m = x.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    if !(m > 0.0) || !m.is_finite() {
        return false;
    }
    x.iter_mut().for_each(|v| *v /= m);
    let nrm = dot(x, x).sqrt();
    x.iter_mut().for_each(|v| *v /= nrm);
    true
}

/// Eigenvectors of the tridiagonal matrix for the `L` eigenvalues `lam`
/// (seeds `seeds`) by inverse iteration, side by side ([`ShiftedLu`]):
/// Gaussian elimination with partial pivoting of `T - lam_l I`, three
/// solves from a fixed pseudo-random start, each lane normalised and
/// orthogonalised against `others` (vectors of nearby eigenvalues, for
/// `L = 1` within a cluster; empty otherwise).
fn inverse_iteration<const L: usize>(
    (d, e): (&[f64], &[f64]),
    lam: [f64; L],
    tnorm: f64,
    seeds: [u64; L],
    others: &[Vec<f64>],
) -> Option<[Vec<f64>; L]> {
    let n = d.len();
    let tiny = f64::EPSILON * tnorm.max(f64::MIN_POSITIVE);
    let lu = ShiftedLu::new(d, e, lam, tiny);
    let starts = seeds.map(|s| start_vector(s, n));
    let mut x: Vec<[f64; L]> = (0..n)
        .map(|i| std::array::from_fn(|l| starts[l][i]))
        .collect();
    let mut lane = vec![0.0; n];
    for it in 0..3 {
        lu.solve(&mut x, it > 0);
        for l in 0..L {
            lane.iter_mut().zip(&x).for_each(|(v, row)| *v = row[l]);
            for o in others {
                let c = dot(o, &lane);
                axpy(-c, o, &mut lane);
            }
            if !normalise(&mut lane) {
                return None;
            }
            x.iter_mut().zip(&lane).for_each(|(row, &v)| row[l] = v);
        }
    }
    Some(std::array::from_fn(|l| {
        x.iter().map(|row| row[l]).collect()
    }))
}

/// Reflectors per block of the back-transformation: wider blocks than the
/// tridiagonalization's panels, so that `Z` is read and written fewer times.
const BT_PANELS: usize = 4;

/// One block of reflectors in compact WY form: `H = I - V T V^T` acting on
/// rows `k0 + 1..n`.
struct WyBlock {
    k0: usize,
    v: Mat<f64>,
    t: Mat<f64>,
}

/// The compact WY form of [`BT_PANELS`] consecutive panels (`T` upper
/// triangular, LAPACK's `dlarft`, forward, column-wise).
fn wy_block(group: &[Panel]) -> WyBlock {
    let k0 = group[0].k0;
    let rows = group[0].v.nrows(); // n - k0 - 1
    let nb: usize = group.iter().map(|p| p.tau.len()).sum();
    // V of the group: panel (k, v) occupies rows k - k0 onwards.
    let mut v = Mat::<f64>::zeros(rows, nb);
    let mut tau = Vec::with_capacity(nb);
    let mut c0 = 0;
    for p in group {
        let off = p.k0 - k0;
        for q in 0..p.tau.len() {
            v.col_as_slice_mut(c0 + q)[off..].copy_from_slice(p.v.col_as_slice(q));
        }
        tau.extend_from_slice(&p.tau);
        c0 += p.tau.len();
    }
    let mut tm = Mat::<f64>::zeros(nb, nb);
    for (i, &ti) in tau.iter().enumerate() {
        tm[(i, i)] = ti;
        if ti == 0.0 {
            continue;
        }
        let vi = v.col_as_slice(i);
        let s: Vec<f64> = (0..i)
            .map(|q| -ti * dot(&v.col_as_slice(q)[i..], &vi[i..]))
            .collect();
        for q in 0..i {
            tm[(q, i)] = (q..i).map(|k| tm[(q, k)] * s[k]).sum();
        }
    }
    WyBlock { k0, v, t: tm }
}

/// `Z <- H Z` for one block of reflectors, on the calling thread.
fn apply_wy(b: &WyBlock, z: MatMut<'_, f64>) {
    let (rows, nb, cols) = (b.v.nrows(), b.v.ncols(), z.ncols());
    let mut zs = z.subrows_mut(b.k0 + 1, rows);
    let mut vtz = Mat::<f64>::zeros(nb, cols);
    let seq = Par::Seq;
    faer::linalg::matmul::matmul(
        &mut vtz,
        Accum::Replace,
        b.v.transpose(),
        zs.as_ref(),
        1.0,
        seq,
    );
    let mut tvtz = Mat::<f64>::zeros(nb, cols);
    faer::linalg::matmul::matmul(
        &mut tvtz,
        Accum::Replace,
        b.t.as_ref(),
        vtz.as_ref(),
        1.0,
        seq,
    );
    faer::linalg::matmul::matmul(
        zs.as_mut(),
        Accum::Add,
        b.v.as_ref(),
        tvtz.as_ref(),
        -1.0,
        seq,
    );
}

/// The compact WY blocks of the tridiagonalization's reflectors,
/// [`BT_PANELS`] panels each, formed in parallel when `par` allows (each
/// depends on its own panels alone: the same bits on any pool; one after
/// the other they were a serial tenth of the back-transformation). The
/// panels are dropped once their blocks are formed.
fn wy_blocks(panels: Vec<Panel>, par: Par) -> Vec<WyBlock> {
    let groups: Vec<&[Panel]> = panels.chunks(BT_PANELS).collect();
    map_in_order(groups, par, wy_block)
}

/// `Z <- Q Z` for the `Q = H_0 H_1 ... H_{n-2}` of the tridiagonalization,
/// given as its compact WY blocks `I - V T V^T` ([`wy_blocks`]). The
/// columns of `Z` are independent: every block is applied to one slab of
/// columns at a time, the slabs side by side over the pool
/// ([`by_column_slabs`]; a product per block and slab on one
/// thread scales better than each block's products split over the pool).
fn back_transform(blocks: &[WyBlock], z: &mut Mat<f64>, par: Par) {
    by_column_slabs(z.as_mut(), par, |mut slab| {
        for b in blocks.iter().rev() {
            apply_wy(b, slab.as_mut());
        }
    });
}

/// The narrowest column slab of [`by_column_slabs`].
pub(crate) const SLAB_MIN: usize = 256;

/// Slabs per thread of [`by_column_slabs`]: several, so that a thread
/// slowed down (by the machine's other work) leaves a short tail.
const SLABS_PER_THREAD: usize = 8;

/// Runs `f` on slabs of consecutive columns of `z`: with a pool of `t > 1`
/// threads, about `8t` slabs ([`SLABS_PER_THREAD`]) of at least
/// [`SLAB_MIN`] columns side by side, else on the whole of `z` at once.
/// Meant for a product `Z <- f(Z)` whose columns are independent (the
/// back-transformation), each slab's products on one thread: that scales
/// better than each product split over the pool, and gives
/// the same bits, since faer's products do however their columns are split
/// (the assumption the pool's products already rest on, pinned by
/// `tests/threads.rs`).
fn by_column_slabs(z: MatMut<'_, f64>, par: Par, f: impl Fn(MatMut<'_, f64>) + Sync) {
    match par {
        Par::Rayon(t) if t.get() > 1 && z.ncols() > SLAB_MIN => {
            use rayon::prelude::*;
            let width = z.ncols().div_ceil(SLABS_PER_THREAD * t.get()).max(SLAB_MIN);
            z.par_col_chunks_mut(width).for_each(&f);
        }
        _ => f(z),
    }
}

/// Shifts whose eigenvectors inverse iteration computes side by side
/// ([`ShiftedLu`]) when they are isolated eigenvalues.
const LANES: usize = 4;

/// Eigenvectors of the tridiagonal matrix (`d`, `e`) for its eigenvalues
/// `lam` (increasing), as the columns of `Z`, by inverse iteration.
///
/// Clusters (runs of eigenvalues closer than [`CLUSTER_GAP`]) are
/// orthogonalised within themselves only, so they are computed
/// independently of each other: in parallel when `par` allows, each vector
/// from its own fixed seed (`j + 1`), so the same bits on any thread count.
/// Isolated eigenvalues go [`LANES`] at a time (each lane's bits are those
/// it has alone); `None` for a cluster over [`MAX_CLUSTER`] or a vector
/// that vanished.
fn tridiagonal_eigenvectors(
    (d, e): (&[f64], &[f64]),
    lam: &[f64],
    mut z: Mat<f64>,
    par: Par,
) -> Option<Mat<f64>> {
    let n = lam.len();
    debug_assert_eq!((z.nrows(), z.ncols()), (n, n));
    let tnorm = lam.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let mut pieces = Vec::new();
    let mut rest = z.as_mut();
    for (j0, len, cluster) in vector_units(lam, tnorm) {
        let (head, tail) = rest.split_at_col_mut(len);
        pieces.push((j0, cluster, head));
        rest = tail;
    }
    let fill = |(j0, cluster, mut cols): (usize, bool, faer::MatMut<'_, f64>)| -> Option<()> {
        let width = cols.ncols();
        let mut put = |q: usize, x: &[f64]| {
            cols.as_mut()
                .col_mut(q)
                .iter_mut()
                .zip(x)
                .for_each(|(d, &s)| *d = s)
        };
        if !cluster && width == LANES {
            let shifts = std::array::from_fn(|q| lam[j0 + q]);
            let seeds = std::array::from_fn(|q| (j0 + q) as u64 + 1);
            let xs = inverse_iteration::<LANES>((d, e), shifts, tnorm, seeds, &[])?;
            xs.iter().enumerate().for_each(|(q, x)| put(q, x));
            return Some(());
        }
        if width > MAX_CLUSTER {
            return None;
        }
        let mut vecs: Vec<Vec<f64>> = Vec::with_capacity(width);
        for q in 0..width {
            let j = j0 + q;
            let [x] = inverse_iteration::<1>((d, e), [lam[j]], tnorm, [j as u64 + 1], &vecs)?;
            put(q, &x);
            vecs.push(x);
        }
        Some(())
    };
    let filled: Option<Vec<()>> = map_in_order(pieces, par, fill).into_iter().collect();
    filled?;
    Some(z)
}

/// The columns of `Z` in units of work `(first column, columns, cluster)`:
/// each cluster of two or more eigenvalues alone, and the isolated ones
/// [`LANES`] at a time where that many are consecutive, else one by one.
fn vector_units(lam: &[f64], tnorm: f64) -> Vec<(usize, usize, bool)> {
    let n = lam.len();
    let mut starts = vec![0];
    starts.extend((1..n).filter(|&j| (lam[j] - lam[j - 1]).abs() > CLUSTER_GAP * tnorm));
    starts.push(n);
    let mut units = Vec::with_capacity(starts.len());
    let mut c = 0;
    while c + 1 < starts.len() {
        let (j0, len) = (starts[c], starts[c + 1] - starts[c]);
        let isolated_run =
            starts.len() > c + LANES && (0..LANES).all(|q| starts[c + q + 1] - starts[c + q] == 1);
        if len == 1 && isolated_run {
            units.push((j0, LANES, false));
            c += LANES;
        } else {
            units.push((j0, len, len > 1));
            c += 1;
        }
    }
    units
}

/// An approximate eigendecomposition `G ~ V diag(lam) V^T` of the symmetric
/// `g` (lower triangle read), eigenvalues in increasing order with their
/// eigenvectors as columns. **No guarantee**; `None` where a step did not
/// converge, produced non-finite numbers or met a cluster of more than
/// `MAX_CLUSTER` eigenvalues.
pub(crate) fn approx_symmetric_eigen(g: MatRef<'_, f64>, par: Par) -> Option<(Vec<f64>, Mat<f64>)> {
    on_a_pool_thread(par, || approx_symmetric_eigen_here(g, par))
}

/// `f()` on one of the pool's threads when `par` allows more than one and
/// the caller is not one of them (the `svd` command's main thread), else
/// on the calling thread. From outside the pool, each of the thousands of
/// parallel steps of the tridiagonalization handed its work over and woke
/// the caller again when it was done; from a pool thread the caller takes
/// its own share and the others steal the rest.
pub(crate) fn on_a_pool_thread<R: Send>(par: Par, f: impl FnOnce() -> R + Send) -> R {
    match par {
        Par::Rayon(t) if t.get() > 1 && rayon::current_thread_index().is_none() => {
            let mut out = None;
            rayon::scope(|_| out = Some(f()));
            out.expect("the scope runs its body")
        }
        _ => f(),
    }
}

/// [`approx_symmetric_eigen`] on the calling thread.
fn approx_symmetric_eigen_here(g: MatRef<'_, f64>, par: Par) -> Option<(Vec<f64>, Mat<f64>)> {
    let n = g.nrows();
    if n == 0 || g.ncols() != n {
        return None;
    }
    if n == 1 {
        return Some((vec![g[(0, 0)]], Mat::identity(1, 1)));
    }
    let Tridiagonal { d, e, panels } = tridiagonalize(g.to_owned(), par)?;
    // The eigenvalues (a serial sweep), the reflectors' WY blocks and the
    // eigenvectors' n x n buffer (its first touch is serial too) are
    // independent: side by side when the pool has two threads or more.
    let (lam, (blocks, z)) = join_on_pool(
        par,
        || tridiagonal_eigenvalues(&d, &e),
        || (wy_blocks(panels, par), Mat::<f64>::zeros(n, n)),
    );
    let lam = lam?;
    let mut z = tridiagonal_eigenvectors((&d, &e), &lam, z, par)?;
    back_transform(&blocks, &mut z, par);
    if z.as_ref().norm_max().is_finite() {
        Some((lam, z))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector body of `symv_cols4` and the portable loop other targets
    /// build compute the same bits (the order of every sum is the same).
    #[test]
    fn symv_cols4_vector_and_portable_bodies_agree_bit_for_bit() {
        let a = random_symmetric(67, 5);
        let n = 64;
        let cols: [&[f64]; 4] = std::array::from_fn(|k| &a.col_as_slice(k)[3..3 + n]);
        let x: Vec<f64> = a.col_as_slice(40)[..n].to_vec();
        let xk = [0.3, -1.25, 2.0e-3, 7.0];
        let y0: Vec<f64> = a.col_as_slice(41)[..n].to_vec();
        let mut y1 = y0.clone();
        let d1 = symv_cols4(cols, &x, xk, &mut y1);
        let mut y2 = y0.clone();
        let acc = symv_cols4_lanes(cols, &x, xk, &mut y2);
        let d2 = acc.map(|p| (p[0] + p[1]) + (p[2] + p[3]));
        assert_eq!(d1.map(f64::to_bits), d2.map(f64::to_bits));
        assert!(y1.iter().zip(&y2).all(|(p, q)| p.to_bits() == q.to_bits()));
        assert!(y1 != y0);
    }

    fn random_symmetric(n: usize, seed: u64) -> Mat<f64> {
        let mut s = seed | 1;
        let mut u = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        let a = Mat::<f64>::from_fn(n, n, |_, _| u());
        Mat::from_fn(n, n, |i, j| a[(i, j)] + a[(j, i)])
    }

    /// Residual `max_j ||G v_j - lam_j v_j||` and orthogonality defect
    /// `max |V^T V - I|` (approximation quality only: soundness does not
    /// depend on them).
    fn quality(g: &Mat<f64>, lam: &[f64], v: &Mat<f64>) -> (f64, f64) {
        let gv = g * v;
        let mut res = 0.0f64;
        for j in 0..lam.len() {
            let r: f64 = (0..g.nrows())
                .map(|i| (gv[(i, j)] - lam[j] * v[(i, j)]).powi(2))
                .sum::<f64>()
                .sqrt();
            res = res.max(r);
        }
        let vtv = v.transpose() * v;
        let mut orth = 0.0f64;
        for i in 0..lam.len() {
            for j in 0..lam.len() {
                let want = if i == j { 1.0 } else { 0.0 };
                orth = orth.max((vtv[(i, j)] - want).abs());
            }
        }
        (res, orth)
    }

    /// The trailing update by column slabs gives the bits of one
    /// triangular product over the whole trailing matrix (each entry gets
    /// the same two rounded updates), over orders of one slab and of many.
    #[test]
    fn trailing_update_by_slabs_has_the_bits_of_one_triangular_product() {
        for (p, nb) in [(37, 5), (1500, 32), (2100, 17)] {
            let a0 = random_symmetric(p + 3, p as u64);
            let vs = random_symmetric(p, 7).as_ref().subcols(0, nb).to_owned();
            let ws = random_symmetric(p, 9).as_ref().subcols(0, nb).to_owned();
            let mut slabs = a0.clone();
            trailing_update(slabs.as_mut(), 3, vs.as_ref(), ws.as_ref(), Par::Seq);
            let mut whole = a0.clone();
            let mut a22 = whole.as_mut().submatrix_mut(3, 3, p, p);
            for (l, r) in [(&vs, &ws), (&ws, &vs)] {
                triangular::matmul(
                    a22.as_mut(),
                    BlockStructure::TriangularLower,
                    Accum::Add,
                    l.as_ref(),
                    BlockStructure::Rectangular,
                    r.as_ref().transpose(),
                    BlockStructure::Rectangular,
                    -1.0,
                    Par::Seq,
                );
            }
            for j in 0..p + 3 {
                for i in j..p + 3 {
                    let (x, y) = (slabs[(i, j)], whole[(i, j)]);
                    assert_eq!(x.to_bits(), y.to_bits(), "p {p}, entry ({i}, {j})");
                }
            }
        }
    }

    /// On a matrix large enough for the panel's corrections to be split by
    /// rows ([`for_row_chunks`]) and the back-transformation by slabs, pools
    /// of 2 and 3 threads give the bits of one thread.
    #[test]
    fn eigen_on_pools_of_2_and_3_threads_has_the_bits_of_one() {
        let n = 2 * ROW_CHUNK_MIN + 100;
        let g = random_symmetric(n, 11);
        let (lam, v) = approx_symmetric_eigen(g.as_ref(), Par::Seq).expect("converges");
        for t in [2, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .unwrap();
            let (lam_t, v_t) = pool
                .install(|| approx_symmetric_eigen(g.as_ref(), Par::rayon(t)))
                .expect("converges");
            let bits = |x: &[f64]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&lam), bits(&lam_t), "eigenvalues at {t} threads");
            for j in 0..n {
                assert_eq!(
                    bits(v.col_as_slice(j)),
                    bits(v_t.col_as_slice(j)),
                    "vector {j} at {t}"
                );
            }
        }
    }

    #[test]
    fn small_residuals_on_random_symmetric_matrices_of_several_sizes() {
        // Sizes around the panel width, and one with several panels.
        for (n, seed) in [(2, 1), (3, 2), (31, 3), (32, 4), (33, 5), (64, 6), (150, 7)] {
            let g = random_symmetric(n, seed);
            let (lam, v) = approx_symmetric_eigen(g.as_ref(), Par::Seq).expect("converges");
            let norm = lam.iter().fold(0.0f64, |m, x| m.max(x.abs()));
            let (res, orth) = quality(&g, &lam, &v);
            assert!(res <= 1e-12 * norm, "n = {n}: residual {res:e}");
            assert!(orth <= 1e-9, "n = {n}: orthogonality defect {orth:e}");
            assert!(lam.windows(2).all(|w| w[0] <= w[1]));
        }
    }

    #[test]
    fn repeated_eigenvalues_get_orthogonal_vectors() {
        // diag(1, 1, 1, 2, 2, 3) rotated by a Householder reflector: exact
        // multiplicities 3 and 2.
        let n = 6;
        let diag = [1.0, 1.0, 1.0, 2.0, 2.0, 3.0];
        let u: Vec<f64> = (0..n).map(|i| (i as f64 + 1.0).sqrt()).collect();
        let uu: f64 = u.iter().map(|x| x * x).sum();
        let h = Mat::<f64>::from_fn(n, n, |i, j| {
            (if i == j { 1.0 } else { 0.0 }) - 2.0 * u[i] * u[j] / uu
        });
        let dm = Mat::<f64>::from_fn(n, n, |i, j| if i == j { diag[i] } else { 0.0 });
        let g = &h * &dm * &h;
        let (lam, v) = approx_symmetric_eigen(g.as_ref(), Par::Seq).expect("converges");
        let (res, orth) = quality(&g, &lam, &v);
        assert!(res <= 1e-13, "residual {res:e}");
        assert!(orth <= 1e-12, "orthogonality defect {orth:e}");
    }

    /// Inverse iteration side by side ([`ShiftedLu`] with four lanes)
    /// computes in each lane the bits the shift gets alone, whatever the
    /// pivoting of its neighbours (shifts that pivot and shifts that do
    /// not, an exact eigenvalue that meets a zero pivot).
    #[test]
    fn lanes_give_the_bits_of_one_shift_alone() {
        let n = 37;
        let d: Vec<f64> = (0..n).map(|i| ((i * 7 % 11) as f64) - 5.0).collect();
        let e: Vec<f64> = (0..n - 1).map(|i| 0.5 + (i % 3) as f64).collect();
        let lam = tridiagonal_eigenvalues(&d, &e).unwrap();
        let tnorm = lam.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        for shifts in [
            [lam[0], lam[5], lam[17], lam[36]],
            [d[3], 0.0, -7.25, lam[20]],
        ] {
            let seeds = [3, 1, 4, 1];
            let four = inverse_iteration::<4>((&d, &e), shifts, tnorm, seeds, &[]).unwrap();
            for q in 0..4 {
                let [one] =
                    inverse_iteration::<1>((&d, &e), [shifts[q]], tnorm, [seeds[q]], &[]).unwrap();
                let same = one
                    .iter()
                    .zip(&four[q])
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "lane {q} differs from its shift alone");
            }
        }
    }

    #[test]
    fn tridiagonal_eigenvalues_of_the_second_difference_matrix() {
        // Eigenvalues 2 - 2 cos(k pi / (n + 1)), k = 1..n (approximation check).
        let n = 50;
        let lam = tridiagonal_eigenvalues(&vec![2.0; n], &vec![-1.0; n - 1]).unwrap();
        for (k, l) in lam.iter().enumerate() {
            let want = 2.0 - 2.0 * ((k + 1) as f64 * std::f64::consts::PI / (n + 1) as f64).cos();
            assert!((l - want).abs() <= 1e-14 * 4.0, "k = {k}: {l} vs {want}");
        }
    }
}
