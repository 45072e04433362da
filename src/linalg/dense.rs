//! Stage 1: certified enclosures of all singular values of a dense matrix,
//! computed in binary64 round-to-nearest with a priori error bounds.
//!
//! Pipeline: exact power-of-two prescaling (L2), approximate thin SVD by faer
//! (no guarantee), residual products `A V~` and `A^T U~` by faer GEMM with the
//! order-independent bound of L4 (using `beta >= || |A| ||_2` from L5) or,
//! for matrices on a coarse grid such as float16 weights, split into an
//! exact slice product and a short tail ([`proofs/split-product.md`](crate::proofs::split_product), L27),
//! per-pair bounds (L6), cluster merging (L7, L8), index matching.

use faer::{Accum, Mat, MatRef, Par};

use super::backend;
use super::cluster::{merge_groups, Group, PairBounds};
use super::rounding::{self as r, ETA, U};
use crate::enclosure::Inconclusive;

/// A matrix prepared for certification: `m >= n`, prescaled by `2^scale_exp`.
pub struct Prepared {
    /// The entries of [`Prepared::a`].
    storage: Storage,
    /// Whether the input was transposed to get `m >= n`.
    pub transposed: bool,
    /// The matrix holds `2^scale_exp` times the input, exactly.
    pub scale_exp: i32,
}

/// Where a [`Prepared`] matrix lives: a copy, or the input's own buffer.
enum Storage {
    /// A transposed or scaled copy.
    Copy(Mat<f64>),
    /// A column-major `m x n` buffer (column stride `m`): the buffer of a
    /// wide row-major input read as its transpose, scaled in place, or a
    /// tall input's scaled transposed copy.
    InPlace { data: Vec<f64>, m: usize, n: usize },
}

impl Prepared {
    /// The (possibly transposed, exactly scaled) matrix, `m >= n`.
    pub fn a(&self) -> MatRef<'_, f64> {
        match &self.storage {
            Storage::Copy(a) => a.as_ref(),
            Storage::InPlace { data, m, n } => MatRef::from_column_major_slice(data, *m, *n),
        }
    }
}

/// Binary exponent `e` with `2^e <= x < 2^(e+1)` for finite `x > 0`.
pub(crate) fn exponent_of(x: f64) -> i32 {
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

/// `(M, E)` with `|x| = M 2^E` exactly, `M < 2^53` an integer, read from
/// the encoding of the finite `x` (normal: the hidden bit and `E = biased
/// exponent - 1075`; subnormal: `E = -1074`).
pub(crate) fn significand(x: f64) -> (u64, i32) {
    let bits = x.to_bits() & 0x7fff_ffff_ffff_ffff;
    let biased = (bits >> 52) as i32;
    let frac = bits & ((1u64 << 52) - 1);
    if biased == 0 {
        (frac, -1074)
    } else {
        (frac | (1u64 << 52), biased - 1075)
    }
}

/// Exponent of the lowest set bit of a finite nonzero `x`: `x` is an odd
/// integer times `2^lowest_bit(x)`, and `-1074 <= lowest_bit(x) <= 971`.
pub(crate) fn lowest_bit(x: f64) -> i32 {
    let (int, e) = significand(x);
    e + int.trailing_zeros() as i32
}

/// A key of the lowest set bit of `|x|` for an integer minimum: the bit
/// pattern of its value `2^lowest_bit(x)`, or `u64::MAX` for a zero (no
/// lowest bit). Nonnegative binary64 patterns order as their values do,
/// so the smallest key of a slice is its lowest bit (its [`lowest_bit`],
/// unless `u64::MAX`), found without branches or early exit (the minimum
/// vectorises). The value is `|x|` less `|x|` with that bit cleared: both
/// lie in one binade (or are subnormal), so the subtraction is exact
/// (Sterbenz); a power of two (fraction field zero) is its own lowest
/// bit. A NaN or an infinity gives a key that the caller discards.
#[inline(always)]
pub(crate) fn lowest_bit_key(x: f64) -> u64 {
    const FRACTION: u64 = (1 << 52) - 1;
    let a = x.abs();
    let b = a.to_bits();
    if a == 0.0 {
        u64::MAX
    } else if b & FRACTION == 0 {
        b
    } else {
        (a - f64::from_bits(b & (b - 1))).to_bits()
    }
}

/// Exponent `k` such that `2^k maxabs` lies in `[1, 2)` when scaling every
/// entry by `2^k` is exact (L2); otherwise the `k` closest to it that is
/// still exact for every entry. Scaling up (k >= 0) cannot lose bits (no
/// overflow, as the result stays below 2); scaling down by `2^k` is exact
/// for an entry `x` iff `x 2^k` keeps its lowest set bit, i.e.
/// `lowest_bit(x) + k >= -1074` (entries that stay normal satisfy it).
pub(crate) fn exact_scale_exponent(maxabs: f64, data: &[f64]) -> i32 {
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
    let k = prepare_scale(data)?;
    let transposed = rows < cols;
    let (m, n) = if transposed {
        (cols, rows)
    } else {
        (rows, cols)
    };
    let storage = if transposed {
        Storage::Copy(Mat::from_fn(m, n, |i, j| {
            r::scale_pow2_rn(data[j * cols + i], k)
        }))
    } else {
        // Column-major: the transpose of the row-major data, each entry
        // scaled exactly on its own (L2).
        let mut t = vec![0.0; rows * cols];
        let scale = |x| r::scale_pow2_rn(x, k);
        crate::matrix::transpose_into((data, cols), (0..rows, 0..cols), (&mut t, rows, 0), scale);
        Storage::InPlace { data: t, m, n }
    };
    Some(Prepared {
        storage,
        transposed,
        scale_exp: k,
    })
}

/// The exponent `k` of [`prepare`]'s exact scaling `2^k` of `data`
/// ([`exact_scale_exponent`], L2); `None` for an all-zero matrix.
fn prepare_scale(data: &[f64]) -> Option<i32> {
    let maxabs = max_abs(data);
    (maxabs != 0.0).then(|| exact_scale_exponent(maxabs, data))
}

/// Entries from which a pass over a matrix is split over the pool's
/// threads (about 8 MiB): below it, one thread is as fast.
pub(crate) const PAR_PASS_MIN: usize = 1 << 20;

/// Whether a pass over `len` entries is worth splitting over the pool.
pub(crate) fn split_pass(len: usize) -> bool {
    len >= PAR_PASS_MIN && rayon::current_num_threads() > 1
}

/// [`exact_scale_exponent`] of the entries `data` (their largest magnitude
/// into `[1, 2)` where that is exact, L2); 0 for a zero matrix.
pub(crate) fn exact_scale_of(data: &[f64]) -> i32 {
    exact_scale_exponent(max_abs(data), data)
}

/// The row-major `x` times `2^k` as a column-major faer matrix: each entry
/// `scale_pow2_rn(x_ij, k)` (exact where [`exact_scale_of`] chose `k`,
/// L2), read in tiles so that neither layout is walked across.
pub(crate) fn to_faer_scaled(x: &crate::matrix::DenseMatrix, k: i32) -> Mat<f64> {
    const TILE: usize = 32;
    let (rows, cols) = (x.rows, x.cols);
    let mut out = Mat::<f64>::zeros(rows, cols);
    // One multiplication by an exact power of two is what scale_pow2_rn
    // does for |k| <= 1000: the same bits.
    let step = (k.abs() <= 1000).then(|| r::pow2(k));
    for j0 in (0..cols).step_by(TILE) {
        for i0 in (0..rows).step_by(TILE) {
            let i1 = (i0 + TILE).min(rows);
            for j in j0..(j0 + TILE).min(cols) {
                let col = &mut out.col_as_slice_mut(j)[i0..i1];
                for (o, i) in col.iter_mut().zip(i0..i1) {
                    let v = x.data[i * cols + j];
                    *o = match step {
                        Some(p) => v * p,
                        None => r::scale_pow2_rn(v, k),
                    };
                }
            }
        }
    }
    out
}

/// `max |x|` (exact: a maximum rounds nothing, in any order or split).
pub(crate) fn max_abs(data: &[f64]) -> f64 {
    use rayon::prelude::*;
    let fold = |c: &[f64]| c.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    if split_pass(data.len()) {
        data.par_chunks(PAR_PASS_MIN / 4)
            .map(fold)
            .reduce(|| 0.0, f64::max)
    } else {
        fold(data)
    }
}

/// [`prepare`] of a matrix the caller gives up, with the same entries and
/// scale: a wide matrix (`rows < cols`) is prepared in its own buffer, whose
/// row-major layout is already the column-major layout of its transpose
/// (scaled in place by the same exact power of two, L2), so that the
/// largest matrices of a model (a gated feed-forward layer's `M_in`) are
/// not copied; a tall one is copied as by [`prepare`].
pub(crate) fn prepare_owned(rows: usize, cols: usize, mut data: Vec<f64>) -> Option<Prepared> {
    if rows >= cols {
        return prepare(rows, cols, &data);
    }
    let k = prepare_scale(&data)?;
    if k != 0 {
        // Each entry scaled exactly on its own (L2): the same bits on any split.
        use rayon::prelude::*;
        let scale = |c: &mut [f64]| c.iter_mut().for_each(|x| *x = r::scale_pow2_rn(*x, k));
        if split_pass(data.len()) {
            data.par_chunks_mut(PAR_PASS_MIN / 4).for_each(scale);
        } else {
            scale(&mut data);
        }
    }
    Some(Prepared {
        storage: Storage::InPlace {
            data,
            m: cols,
            n: rows,
        },
        transposed: true,
        scale_exp: k,
    })
}

/// Upper bound `beta >= || |A| ||_2` by Collatz iterations on `|A|^T |A|` (L5).
pub fn abs_norm2_ru(a: MatRef<'_, f64>) -> f64 {
    let (m, n) = (a.nrows(), a.ncols());
    let mut x = vec![1.0f64; n];
    let mut z = vec![0.0f64; m];
    let mut y = vec![0.0f64; n];
    // Both products split over the pool for large matrices, each entry's
    // sum in the same order whichever thread makes it (the same bits): `z`
    // by blocks of rows (every column's terms added in column order), `y`
    // one column's dot product per entry.
    use rayon::prelude::*;
    let split = split_pass(m * n);
    let abs_mv = |x: &[f64], z: &mut [f64]| {
        let rows = |i0: usize, zb: &mut [f64]| {
            zb.iter_mut().for_each(|v| *v = 0.0);
            for (j, &xj) in x.iter().enumerate() {
                let col = a.col(j).subrows(i0, zb.len());
                for (zi, &aij) in zb.iter_mut().zip(col.iter()) {
                    *zi = aij.abs().mul_add(xj, *zi);
                }
            }
        };
        const ROWS: usize = 512;
        if split {
            z.par_chunks_mut(ROWS)
                .enumerate()
                .for_each(|(b, zb)| rows(b * ROWS, zb));
        } else {
            rows(0, z);
        }
    };
    let abs_tmv = |z: &[f64], y: &mut [f64]| {
        // y_j = sum_i |a_ij| z_i, each one sequential sum in row order;
        // DOTS columns side by side only hide the latency of the chains.
        const DOTS: usize = 8;
        let dots = |j0: usize, yb: &mut [f64]| {
            let mut acc = [0.0f64; DOTS];
            let cols: Vec<_> = (0..yb.len()).map(|l| a.col(j0 + l)).collect();
            if cols.len() == DOTS {
                for (i, &zi) in z.iter().enumerate() {
                    for l in 0..DOTS {
                        acc[l] = cols[l][i].abs().mul_add(zi, acc[l]);
                    }
                }
            } else {
                for (l, col) in cols.iter().enumerate() {
                    acc[l] = col
                        .iter()
                        .zip(z.iter())
                        .fold(0.0, |acc, (&aij, &zi)| aij.abs().mul_add(zi, acc));
                }
            }
            yb.copy_from_slice(&acc[..yb.len()]);
        };
        if split {
            y.par_chunks_mut(DOTS)
                .enumerate()
                .for_each(|(b, yb)| dots(b * DOTS, yb));
        } else {
            y.chunks_mut(DOTS)
                .enumerate()
                .for_each(|(b, yb)| dots(b * DOTS, yb));
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

/// The left vectors of an approximate SVD (no guarantee).
pub enum LeftVectors {
    /// The `m x p` matrix as computed (faer's thin SVD).
    Stored(Mat<f64>),
    /// `U = fl(P diag(fl(1 / s_j)))` for `P = fl(A V)` of rounding depth
    /// `depth` (the Gram route): `P` alone is held, and the rows of `U` are
    /// formed where they are read, a block at a time, by the same one
    /// rounded product per entry (the numbers of a stored `U`), so that the
    /// two `m x p` matrices never live in memory together.
    Scaled {
        /// `fl(A V)`, reused by the certification, which bounds its error.
        p: Mat<f64>,
        /// Its rounding depth (L4, blocked form).
        depth: usize,
        /// `fl(1 / s_j)`.
        inv: Vec<f64>,
    },
}

impl LeftVectors {
    /// Rows `m`.
    pub(crate) fn nrows(&self) -> usize {
        match self {
            LeftVectors::Stored(u) => u.nrows(),
            LeftVectors::Scaled { p, .. } => p.nrows(),
        }
    }

    /// Columns `p`.
    pub(crate) fn ncols(&self) -> usize {
        match self {
            LeftVectors::Stored(u) => u.ncols(),
            LeftVectors::Scaled { p, .. } => p.ncols(),
        }
    }

    /// Column `j`.
    pub(crate) fn col(&self, j: usize) -> Vec<f64> {
        match self {
            LeftVectors::Stored(u) => u.col(j).iter().copied().collect(),
            LeftVectors::Scaled { p, inv, .. } => p.col(j).iter().map(|&x| x * inv[j]).collect(),
        }
    }

    /// `f` of rows `r0 .. r0 + len` (a view of a stored matrix, else formed).
    pub(crate) fn with_rows<R>(
        &self,
        r0: usize,
        len: usize,
        f: impl FnOnce(MatRef<'_, f64>) -> R,
    ) -> R {
        match self {
            LeftVectors::Stored(u) => f(u.as_ref().subrows(r0, len)),
            LeftVectors::Scaled { p, inv, .. } => {
                let b = Mat::from_fn(len, p.ncols(), |i, j| p[(r0 + i, j)] * inv[j]);
                f(b.as_ref())
            }
        }
    }

    /// The whole matrix: borrowed when stored, formed when scaled.
    pub(crate) fn to_mat(&self) -> std::borrow::Cow<'_, Mat<f64>> {
        match self {
            LeftVectors::Stored(u) => std::borrow::Cow::Borrowed(u),
            LeftVectors::Scaled { .. } => {
                std::borrow::Cow::Owned(self.with_rows(0, self.nrows(), |b| b.to_owned()))
            }
        }
    }
}

/// An approximate thin SVD `A ~ U diag(s) V^T` (no guarantee).
pub struct ApproxSvd {
    /// Left vectors, `m x p`.
    pub u: LeftVectors,
    /// Approximate singular values, `p`.
    pub s: Vec<f64>,
    /// Right vectors, `n x p`.
    pub v: Mat<f64>,
}

pub(crate) use super::backend::solver_par;

/// An approximate thin SVD `A ~ U diag(s) V^T` (no guarantee).
pub(crate) struct ThinSvd {
    /// Left vectors, `m x min(m, n)`.
    pub u: Mat<f64>,
    /// Approximate singular values as faer returns them.
    pub s: Vec<f64>,
    /// Right vectors, `n x min(m, n)`.
    pub v: Mat<f64>,
}

/// faer's thin SVD of `a` with [`solver_par`] (no guarantee); `None` if it
/// did not converge.
pub(crate) fn faer_thin_svd(a: MatRef<'_, f64>) -> Option<ThinSvd> {
    use faer::linalg::svd::{self, ComputeSvdVectors};
    let (m, n) = (a.nrows(), a.ncols());
    let k = m.min(n);
    let par = solver_par(m, n);
    let mut u = Mat::<f64>::zeros(m, k);
    let mut v = Mat::<f64>::zeros(n, k);
    let mut s = faer::diag::Diag::<f64>::zeros(k);
    let thin = ComputeSvdVectors::Thin;
    let scratch = svd::svd_scratch::<f64>(m, n, thin, thin, par, Default::default());
    let mut mem = faer::dyn_stack::MemBuffer::new(scratch);
    svd::svd(
        a,
        s.as_mut(),
        Some(u.as_mut()),
        Some(v.as_mut()),
        par,
        faer::dyn_stack::MemStack::new(&mut mem),
        Default::default(),
    )
    .ok()?;
    let s = s.column_vector().iter().copied().collect();
    Some(ThinSvd { u, s, v })
}

/// Approximate thin SVD by faer (no guarantee).
pub fn approx_thin_svd(a: MatRef<'_, f64>) -> Result<ApproxSvd, Inconclusive> {
    let svd = faer_thin_svd(a)
        .ok_or_else(|| Inconclusive::new("the approximate SVD did not converge"))?;
    let s = svd.s;
    if s.iter().any(|x| !x.is_finite()) {
        return Err(Inconclusive::new(
            "the approximate SVD returned non-finite values",
        ));
    }
    // The residual theorem centres intervals at |s_j| (L6): use |s_j| throughout.
    let s = s.into_iter().map(f64::abs).collect();
    Ok(ApproxSvd {
        u: LeftVectors::Stored(svd.u),
        s,
        v: svd.v,
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
pub(crate) const CHUNK: usize = 512;

/// `fl(A B)` computed as a sequential sum of GEMMs over inner-dimension
/// chunks of at most [`CHUNK`], by the backend in use
/// ([`super::backend::Backend::chunked_product`]). Returns the product and
/// the rounding depth `d` ([`product_depth`]): every term of every entry
/// passes through at most `d` roundings, whatever order the backend's GEMM
/// uses inside a chunk (L4, blocked form).
pub(crate) fn chunked_product(
    a: MatRef<'_, f64>,
    b: MatRef<'_, f64>,
    par: Par,
) -> (Mat<f64>, usize) {
    let c = super::backend::current().chunked_product(a, b, CHUNK, par);
    (c, product_depth(a.ncols()))
}

/// [`chunked_product`] of a `B` of many independent columns (`G V`), by
/// the backend's `chunked_product_wide` (on the CPU, slabs of `A`'s rows
/// side by side): every entry the same chunked sum, so the same rounding
/// depth.
pub(crate) fn chunked_product_wide(
    a: MatRef<'_, f64>,
    b: MatRef<'_, f64>,
    par: Par,
) -> (Mat<f64>, usize) {
    let c = super::backend::current().chunked_product_wide(a, b, CHUNK, par);
    (c, product_depth(a.ncols()))
}

/// [`chunked_product`] of a tall `A` a block of rows at a time
/// (`block_rows`, about a sixteenth of them), into one `m x p` result:
/// one product over all rows would have the GEMM pack a copy of the whole
/// of `A`, which its thread keeps for the rest of the run
/// (`tests/memory_tall.rs`). Rows are independent and the inner dimension
/// is chunked as before, so the rounding depth is [`chunked_product`]'s
/// (L4, blocked form, any order inside a chunk).
pub(crate) fn chunked_product_by_rows(
    a: MatRef<'_, f64>,
    b: MatRef<'_, f64>,
    par: Par,
) -> (Mat<f64>, usize) {
    let m = a.nrows();
    let rows = block_rows(m);
    if rows >= m {
        return chunked_product(a, b, par);
    }
    let mut c = Mat::<f64>::zeros(m, b.ncols());
    for r0 in (0..m).step_by(rows) {
        let len = rows.min(m - r0);
        let (block, _) = chunked_product(a.subrows(r0, len), b, par);
        c.as_mut().subrows_mut(r0, len).copy_from(block.as_ref());
    }
    (c, product_depth(a.ncols()))
}

/// The rounding depth of a [`chunked_product`] with inner dimension `k`:
/// `k` for one chunk, `CHUNK + chunks - 1` otherwise (L4, blocked form).
pub(crate) fn product_depth(k: usize) -> usize {
    let chunks = k.div_ceil(CHUNK).max(1);
    if chunks == 1 {
        k.max(1)
    } else {
        (CHUNK + chunks - 1).min(k)
    }
}

/// Column error bounds of a product `fl(A B)` of rounding depth `depth`,
/// inner dimension `k`, `rows` rows: `gamma_depth beta ||B e_j|| + sqrt(rows) k eta`
/// with `beta >= || |A| ||_2` (L4).
pub(crate) fn product_col_err(
    depth: usize,
    k: usize,
    rows: usize,
    beta: f64,
    b: MatRef<'_, f64>,
) -> Vec<f64> {
    let g = r::mul_ru(r::gamma_ru(depth), beta);
    let under = r::mul_ru(r::sqrt_ru(rows as f64), r::mul_ru(k as f64, ETA));
    map_columns(b, |bj| r::add_ru(r::mul_ru(g, r::norm2_ru(bj)), under))
}

/// `f` of every column of `b` as a slice, in column order: read in place
/// where the column is contiguous (the matrices this crate allocates),
/// else copied; the columns split over the pool for a large `b` (each
/// column's value is computed alone, so the same bits on any split).
pub(crate) fn map_columns<T: Send>(b: MatRef<'_, f64>, f: impl Fn(&[f64]) -> T + Sync) -> Vec<T> {
    let one = |j: usize| match b.col(j).try_as_col_major() {
        Some(c) => f(c.as_slice()),
        None => f(&b.col(j).iter().copied().collect::<Vec<f64>>()),
    };
    if split_pass(b.nrows() * b.ncols()) {
        use rayon::prelude::*;
        (0..b.ncols()).into_par_iter().map(one).collect()
    } else {
        (0..b.ncols()).map(one).collect()
    }
}

/// `fl(A B)` (chunked) with its column error bounds (L4).
pub(crate) fn product_with_bound(
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

/// Exponent `q` of the finest power-of-two grid holding every entry of `a`:
/// every entry is an integer multiple of `2^q` (`q` = the smallest
/// `lowest_bit` over the nonzero entries); `None` for a zero matrix.
pub fn grid_exponent(a: MatRef<'_, f64>) -> Option<i32> {
    let mut q: Option<i32> = None;
    for j in 0..a.ncols() {
        for &x in a.col(j).iter() {
            if x != 0.0 {
                let b = lowest_bit(x);
                q = Some(q.map_or(b, |q: i32| q.min(b)));
            }
        }
    }
    q
}

/// Upper bounds `(max_i ||a_{i,:}||_2, max_j ||a_{:,j}||_2)`: the largest
/// row and column norms of `a` (L3 b; non-finite when they overflow).
pub fn max_row_col_norms_ru(a: MatRef<'_, f64>) -> (f64, f64) {
    let (m, n) = (a.nrows(), a.ncols());
    let mut rows = vec![0.0f64; m];
    let mut col_max = 0.0f64;
    for j in 0..n {
        let col = a.col(j);
        let mut c2 = 0.0f64;
        for (ri, &x) in rows.iter_mut().zip(col.iter()) {
            *ri = x.mul_add(x, *ri);
            c2 = x.mul_add(x, c2);
        }
        // Entries are finite: an overflow gives +inf, which max keeps.
        col_max = col_max.max(r::sqrt_ru(r::nonneg_sum_ru(c2, m)));
    }
    let mut row_max = 0.0f64;
    for &ri in &rows {
        let b = r::sqrt_ru(r::nonneg_sum_ru(ri, n));
        if !b.is_finite() {
            return (f64::INFINITY, f64::INFINITY);
        }
        row_max = row_max.max(b);
    }
    if !col_max.is_finite() {
        return (f64::INFINITY, f64::INFINITY);
    }
    (row_max, col_max)
}

/// Columns of a split product keep at least this many bits in their exact
/// slice, or the product is not split (the gain would be below `2^-8`).
pub(crate) const MIN_SPLIT_BITS: i32 = 8;

/// A product `fl(A B)` with what its error bound needs: either computed
/// plainly (chunked, L4), or split as `fl(fl(A B_hi) + fl(A B_lo))` with
/// `fl(A B_hi)` exact ([`proofs/split-product.md`](crate::proofs::split_product), L27).
pub struct ComputedProduct {
    /// The computed product.
    pub computed: Mat<f64>,
    /// Rounding depth of the (tail) product (L4, blocked form).
    pub depth: usize,
    /// Inner dimension `k`.
    pub inner: usize,
    /// Upper bounds of `||B_lo e_j||_2` (split) or of `||B e_j||_2` (plain).
    pub tail_norm: Vec<f64>,
    /// Whether the product was split (then one more rounding per entry).
    pub split: bool,
}

impl ComputedProduct {
    /// The product with its column error bounds, `beta >= || |A| ||_2`:
    /// `gamma_d beta ||B e_j|| + sqrt(rows) k eta` (plain, L4), or
    /// `u/(1-u) ||C e_j|| + gamma_d beta ||B_lo e_j|| + sqrt(rows) k eta`
    /// (split, L27).
    pub fn bounded(self, beta: f64) -> BoundedProduct {
        let c_norm = self.split.then(|| {
            (0..self.computed.ncols())
                .map(|j| r::norm2_ru(self.computed.col_as_slice(j)))
                .collect::<Vec<_>>()
        });
        let col_err = computed_col_err(
            self.depth,
            self.inner,
            self.computed.nrows(),
            beta,
            &self.tail_norm,
            c_norm.as_deref(),
        );
        BoundedProduct {
            computed: self.computed,
            col_err,
        }
    }
}

/// The column error bounds of [`ComputedProduct::bounded`] from what they
/// need: `gamma_d beta t_j + sqrt(rows) k eta`, plus `u/(1-u) c_j` for a
/// split product, with `t_j` the tail norms and `c_j >= ||C e_j||_2` the
/// norms of the computed columns (`c_norm`, present iff split; L4, L27).
fn computed_col_err(
    depth: usize,
    inner: usize,
    rows: usize,
    beta: f64,
    tail_norm: &[f64],
    c_norm: Option<&[f64]>,
) -> Vec<f64> {
    let g = r::mul_ru(r::gamma_ru(depth), beta);
    let under = r::mul_ru(r::sqrt_ru(rows as f64), r::mul_ru(inner as f64, ETA));
    // u / (1 - u) rounded up; 1 - u is a float.
    let rel = r::div_ru(U, 1.0 - U);
    (0..tail_norm.len())
        .map(|j| {
            let mut e = r::add_ru(r::mul_ru(g, tail_norm[j]), under);
            if let Some(c) = c_norm {
                e = r::add_ru(e, r::mul_ru(rel, c[j]));
            }
            e
        })
        .collect()
}

/// [`r::sum_sq`] of a vector of `len` entries fed in pieces, in order: the
/// same lanes and the same operations, hence the same value, whatever the
/// pieces. [`LaneSumSq::norm2_ru`] is then [`r::norm2_ru`] of the vector.
#[derive(Clone)]
struct LaneSumSq {
    acc: [f64; 4],
    at: usize,
    len: usize,
}

impl LaneSumSq {
    fn new(len: usize) -> Self {
        LaneSumSq {
            acc: [0.0; 4],
            at: 0,
            len,
        }
    }

    fn feed(&mut self, x: impl IntoIterator<Item = f64>) {
        // Lane i % 4 for the entries of sum_sq's exact chunks of 4, lane 0
        // for the remainder.
        let main = self.len / 4 * 4;
        for v in x {
            let lane = if self.at < main { self.at % 4 } else { 0 };
            self.acc[lane] = v.mul_add(v, self.acc[lane]);
            self.at += 1;
        }
    }

    fn norm2_ru(&self) -> f64 {
        debug_assert_eq!(self.at, self.len);
        let a = &self.acc;
        r::sqrt_ru(r::nonneg_sum_ru((a[0] + a[1]) + (a[2] + a[3]), self.len))
    }
}

/// `B = B_hi + B_lo` exactly, column by column, with column `j` of `B_hi` on
/// the grid `2^h_j` such that every entry of `fl(A B_hi)` is exact for any
/// `A` on the grid `2^q` whose rows have norms at most `row_max`:
/// `row_max ||B_hi e_j|| < 2^(53 + q + h_j)` and `q + h_j >= -1074`
/// (L27, with the one-slice splitting of L11). Returns the two parts and
/// the fewest bits a nonzero column kept in `B_hi`; `None` when no column
/// can keep [`MIN_SPLIT_BITS`].
fn split_columns(b: MatRef<'_, f64>, q: i32, row_max: f64) -> Option<(Mat<f64>, Mat<f64>, i32)> {
    let col = |j: usize| b.col(j).iter().copied().collect();
    let (h, fewest) = split_exponents(b.nrows(), col, b.ncols(), q, row_max)?;
    let (hi, lo) = split_rows(b, &h);
    Some((hi, lo, fewest))
}

/// The grid exponents of [`split_columns`]: `h_j` for each nonzero column
/// (`None` for a zero column: all of it in `B_lo`) of the `k x p` matrix
/// whose column `j` is `col(j)`, and the fewest bits kept; `None` when the
/// product is not split. Column by column, so that `B` need not be stored
/// whole (L27, L11).
fn split_exponents(
    k: usize,
    col: impl Fn(usize) -> Vec<f64>,
    p: usize,
    q: i32,
    row_max: f64,
) -> Option<(Vec<Option<i32>>, i32)> {
    let mut out = vec![None; p];
    let mut fewest = i32::MAX;
    let mut hc = vec![0.0f64; k];
    for (j, hj) in out.iter_mut().enumerate() {
        let col = col(j);
        let maxabs = col.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        if maxabs == 0.0 {
            continue;
        }
        let x = r::mul_ru(row_max, r::norm2_ru(&col));
        if !(x > 0.0) || !x.is_finite() {
            return None;
        }
        // |b_lj| <= maxabs < 2^f (L11 with e = f <= 1000).
        let f = exponent_of(maxabs) + 1;
        // 2^(53 + q + h) >= 2^(exponent_of(x) + 2) > 2 x.
        if f > 1000 {
            return None;
        }
        let h0 = (exponent_of(x) + 2 - 53 - q).max(-1022).max(-1074 - q);
        for h in (h0.max(f - 52)..).take(3) {
            let t = f - h;
            if t < MIN_SPLIT_BITS {
                break;
            }
            for (l, &v) in col.iter().enumerate() {
                hc[l] = split_hi(v, h);
            }
            // The hypothesis of L27, checked on the slice itself.
            // A finite upper bound is below 2^1024, hence below 2^limit_exp
            // when limit_exp > 1023; an overflowed one proves nothing.
            let limit_exp = 53 + q + h;
            let bound = r::mul_ru(row_max, r::norm2_ru(&hc));
            let ok =
                bound.is_finite() && (limit_exp > 1023 || bound < r::scale_pow2_rn(1.0, limit_exp));
            if ok {
                *hj = Some(h);
                fewest = fewest.min(t);
                break;
            }
        }
        hj.as_ref()?;
    }
    (fewest != i32::MAX).then_some((out, fewest))
}

/// The exact slice of `v` on the grid `2^h` (L11 item 1).
fn split_hi(v: f64, h: i32) -> f64 {
    r::scale_pow2_rn(r::scale_pow2_rn(v, -h).round(), h)
}

/// `(B_hi, B_lo)` of the rows `b` of `B` for the exponents `h` of
/// [`split_exponents`]: `B_lo = B - B_hi` exactly (L11 item 2).
fn split_rows(b: MatRef<'_, f64>, h: &[Option<i32>]) -> (Mat<f64>, Mat<f64>) {
    let (k, p) = (b.nrows(), b.ncols());
    let mut hi = Mat::<f64>::zeros(k, p);
    let mut lo = b.to_owned();
    for (j, h) in h.iter().enumerate() {
        if let Some(h) = *h {
            for l in 0..k {
                let v = b[(l, j)];
                let x = split_hi(v, h);
                hi[(l, j)] = x;
                lo[(l, j)] = v - x; // exact (L11 item 2)
            }
        }
    }
    (hi, lo)
}

/// `fl(A B)`, split (L27) when `grid = Some((q, row_max))` describes `A`
/// (every entry a multiple of `2^q`, every row norm at most `row_max`) and
/// every column of `B` keeps `MIN_SPLIT_BITS` in its exact slice;
/// otherwise the plain chunked product (L4).
pub fn split_product(
    a: MatRef<'_, f64>,
    b: MatRef<'_, f64>,
    grid: Option<(i32, f64)>,
    par: Par,
) -> ComputedProduct {
    let inner = a.ncols();
    let norms = |x: MatRef<'_, f64>| -> Vec<f64> {
        (0..x.ncols())
            .map(|j| {
                let c: Vec<f64> = x.col(j).iter().copied().collect();
                r::norm2_ru(&c)
            })
            .collect()
    };
    if let Some((hi, lo, _)) = grid.and_then(|(q, rm)| split_columns(b, q, rm)) {
        // fl(A B_hi) is exact in any evaluation order (L27).
        let mut c = Mat::<f64>::zeros(a.nrows(), b.ncols());
        backend::current().gemm(c.as_mut(), Accum::Replace, a, hi.as_ref(), par);
        drop(hi);
        let (t, depth) = chunked_product(a, lo.as_ref(), par);
        backend::add_in_place(c.as_mut(), t.as_ref(), par);
        return ComputedProduct {
            computed: c,
            depth,
            inner,
            tail_norm: norms(lo.as_ref()),
            split: true,
        };
    }
    let (c, depth) = chunked_product(a, b, par);
    ComputedProduct {
        computed: c,
        depth,
        inner,
        tail_norm: norms(b),
        split: false,
    }
}

/// Upper bound of `||(P_exact - s_j X) e_j||_2` per column, where `P` is a
/// bounded product and the residual is evaluated as `fma(-s_j, x_ij, p_ij)`
/// (one rounding each; L3, L4).
pub(crate) fn residual_col_bounds(p: &BoundedProduct, x: MatRef<'_, f64>, s: &[f64]) -> Vec<f64> {
    let mut acc = ResidualSums::new(s.len());
    acc.feed(p.computed.as_ref(), x, s);
    acc.bounds(x.nrows(), &p.col_err)
}

/// The sums of squares of [`residual_col_bounds`], fed a block of rows at
/// a time, in order (the same operations, hence the same bounds, as one
/// call on all rows).
struct ResidualSums {
    e2: Vec<f64>,
}

impl ResidualSums {
    fn new(p: usize) -> Self {
        ResidualSums { e2: vec![0.0; p] }
    }

    /// Rows `p` of the computed product and the same rows `x`. Columns
    /// side by side over the pool for large blocks (each column's sum in
    /// row order whichever thread makes it: the same bits).
    fn feed(&mut self, p: MatRef<'_, f64>, x: MatRef<'_, f64>, s: &[f64]) {
        let column = |(j, e2): (usize, &mut f64)| {
            let (pc, xc) = (p.col(j), x.col(j));
            for (&pij, &xij) in pc.iter().zip(xc.iter()) {
                let e = (-s[j]).mul_add(xij, pij);
                *e2 = e.mul_add(e, *e2);
            }
        };
        if split_pass(p.nrows() * p.ncols()) {
            use rayon::prelude::*;
            self.e2.par_iter_mut().enumerate().for_each(column);
        } else {
            self.e2.iter_mut().enumerate().for_each(column);
        }
    }

    /// The bounds, for `rows` rows fed in all and the product's column
    /// error bounds `col_err`.
    fn bounds(&self, rows: usize, col_err: &[f64]) -> Vec<f64> {
        let one_plus = 1.0 + 2.0 * U; // >= 1 + u, representable
        let under = r::mul_ru(r::sqrt_ru(rows as f64), ETA);
        self.e2
            .iter()
            .zip(col_err)
            .map(|(&e2, &err)| {
                let norm = r::sqrt_ru(r::nonneg_sum_ru(e2, rows));
                r::add_ru(r::add_ru(r::mul_ru(norm, one_plus), under), err)
            })
            .collect()
    }
}

/// Rows per block of the products of [`certify_pairs_within`] whose
/// `m x p` result is only read a row at a time: about a sixteenth of the
/// `m` rows, a multiple of [`CHUNK`], so that the blocks add little to the
/// memory of `A` and `U` and each GEMM stays large.
fn block_rows(m: usize) -> usize {
    (m / 16).div_ceil(CHUNK).max(1) * CHUNK
}

/// The residual bounds `e_j >= ||(A V - U diag(s)) e_j||_2` (the exact
/// product; L4, L27 for the product, L3 for the residual): [`split_product`]
/// of `A` and `V` (split when `grid` allows, plain otherwise) bounded with
/// `beta >= || |A| ||_2`, then [`residual_col_bounds`], computed a block of
/// rows at a time so that the `m x p` product is never stored; where `U`
/// is [`LeftVectors::Scaled`] and the product is not split, its stored
/// `fl(A V)` is used. The GEMM of a block may sum in another order than
/// that of all rows: the bound of L4 holds for any order, with the depth of
/// the inner dimension `n`, unchanged by the blocking; the residual sums
/// run over the rows in order, as in [`residual_col_bounds`].
fn residual_av(
    a: MatRef<'_, f64>,
    u: &LeftVectors,
    v: MatRef<'_, f64>,
    s: &[f64],
    beta: f64,
    grid: Option<(i32, f64)>,
    par: Par,
) -> Vec<f64> {
    let (m, n) = (a.nrows(), a.ncols());
    let p = v.ncols();
    let parts = grid.and_then(|(q, rm)| split_columns(v, q, rm));
    let mut acc = ResidualSums::new(p);
    let rows = block_rows(m);
    if let (None, LeftVectors::Scaled { p: av, depth, .. }) = (&parts, u) {
        for r0 in (0..m).step_by(rows) {
            let len = rows.min(m - r0);
            u.with_rows(r0, len, |ub| acc.feed(av.as_ref().subrows(r0, len), ub, s));
        }
        return acc.bounds(m, &product_col_err(*depth, n, m, beta, v));
    }
    let mut c_sq = vec![LaneSumSq::new(m); p];
    let mut depth = n.max(1);
    for r0 in (0..m).step_by(rows) {
        let len = rows.min(m - r0);
        let ab = a.subrows(r0, len);
        let cb = match &parts {
            Some((hi, lo, _)) => {
                // fl(A B_hi) is exact in any evaluation order (L27).
                let mut cb = Mat::<f64>::zeros(len, p);
                backend::current().gemm(cb.as_mut(), Accum::Replace, ab, hi.as_ref(), par);
                let (t, d) = chunked_product(ab, lo.as_ref(), par);
                depth = d;
                for (j, sq) in c_sq.iter_mut().enumerate() {
                    let dst = cb.col_as_slice_mut(j);
                    for (d, &x) in dst.iter_mut().zip(t.col_as_slice(j)) {
                        *d += x;
                    }
                    sq.feed(dst.iter().copied());
                }
                cb
            }
            None => {
                let (cb, d) = chunked_product(ab, v, par);
                depth = d;
                cb
            }
        };
        u.with_rows(r0, len, |ub| acc.feed(cb.as_ref(), ub, s));
    }
    let col_err = match &parts {
        Some((_, lo, _)) => {
            let tail: Vec<f64> = (0..p).map(|j| r::norm2_ru(lo.col_as_slice(j))).collect();
            let c_norm: Vec<f64> = c_sq.iter().map(LaneSumSq::norm2_ru).collect();
            computed_col_err(depth, n, m, beta, &tail, Some(&c_norm))
        }
        None => product_col_err(depth, n, m, beta, v),
    };
    acc.bounds(m, &col_err)
}

/// `fl(A^T U)` as [`split_product`] of `A^T` and `U` computes it (split when
/// `grid` allows, plain otherwise; L27, L4), with the rows of `U` read (or
/// formed, [`LeftVectors::Scaled`]) a chunk of the inner dimension at a
/// time: neither `U` nor its two parts are stored whole. The exact part is
/// accumulated chunk by chunk (exact in any order, L27); the tail is the
/// chunked product of [`chunked_product`], term by term.
fn left_product(
    a: MatRef<'_, f64>,
    u: &LeftVectors,
    grid: Option<(i32, f64)>,
    par: Par,
) -> ComputedProduct {
    let (m, n) = (a.nrows(), a.ncols());
    let p = u.ncols();
    let exps = grid.and_then(|(q, cm)| split_exponents(m, |j| u.col(j), p, q, cm));
    if let (None, LeftVectors::Stored(um)) = (&exps, u) {
        return split_product(a.transpose(), um.as_ref(), None, par);
    }
    let at = a.transpose();
    let chunks = m.div_ceil(CHUNK).max(1);
    let mut c_hi = Mat::<f64>::zeros(n, p);
    let mut c = Mat::<f64>::zeros(n, p);
    let mut part = Mat::<f64>::zeros(n, p);
    let mut tail = vec![LaneSumSq::new(m); p];
    for ch in 0..chunks {
        let r0 = ch * CHUNK;
        let len = CHUNK.min(m - r0);
        let ac = at.subcols(r0, len);
        u.with_rows(r0, len, |ub| {
            let parts = exps.as_ref().map(|(h, _)| split_rows(ub, h));
            let bc = match &parts {
                Some((hi, lo)) => {
                    // fl(A^T B_hi) is exact in any evaluation order, its
                    // partial sums over chunks included (L27).
                    let acc = if ch == 0 { Accum::Replace } else { Accum::Add };
                    backend::current().gemm(c_hi.as_mut(), acc, ac, hi.as_ref(), par);
                    lo.as_ref()
                }
                None => ub,
            };
            for (j, t) in tail.iter_mut().enumerate() {
                t.feed(bc.col(j).iter().copied());
            }
            backend::add_chunk_product(
                backend::current(),
                c.as_mut(),
                &mut part,
                ch == 0,
                ac,
                bc,
                par,
            );
        });
    }
    let depth = product_depth(m);
    let split = exps.is_some();
    if split {
        backend::add_in_place(c_hi.as_mut(), c.as_ref(), par);
        c = c_hi;
    }
    ComputedProduct {
        computed: c,
        depth,
        inner: m,
        tail_norm: tail.iter().map(LaneSumSq::norm2_ru).collect(),
        split,
    }
}

/// Upper bound of `||I - Y^T Y||_2` for the given columns of `y` (L8).
pub(crate) fn gram_defect_ru(y: MatRef<'_, f64>, members: &[usize]) -> Option<f64> {
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
/// The products are split wherever that tightens them
/// ([`certify_pairs_within`] with a target of 0).
pub fn certify_pairs(
    a: MatRef<'_, f64>,
    svd: &ApproxSvd,
    par: Par,
) -> Result<Vec<Group<f64>>, Inconclusive> {
    certify_pairs_within(a, svd, par, 0.0)
}

/// [`certify_pairs`], with the products `A V~` and `A^T U~` split
/// ([`proofs/split-product.md`](crate::proofs::split_product), L27) only where their a priori error term
/// `gamma_d || |A| || / s_min` (relative to the smallest positive
/// approximate value) exceeds `rel_target`, and `A` lies on a grid coarse
/// enough for the exact slice (float16 weights): the term is then replaced
/// by one of the order of `u`, at the cost of one more GEMM per product.
/// Same guarantee: each returned hull contains exactly `members.len()`
/// singular values (L4, L5, L6, L7, L8, L27).
pub fn certify_pairs_within(
    a: MatRef<'_, f64>,
    svd: &ApproxSvd,
    par: Par,
    rel_target: f64,
) -> Result<Vec<Group<f64>>, Inconclusive> {
    let beta = abs_norm2_ru(a);
    if !beta.is_finite() {
        return Err(Inconclusive::new("|| |A| || bound overflowed"));
    }
    let (m, n) = (a.nrows(), a.ncols());
    let s_min = svd
        .s
        .iter()
        .copied()
        .filter(|&x| x > 0.0)
        .fold(f64::INFINITY, f64::min);
    let depth = |k: usize| {
        if k <= CHUNK {
            k
        } else {
            (CHUNK + k.div_ceil(CHUNK) - 1).min(k)
        }
    };
    let worth = |k: usize| !(r::mul_ru(r::gamma_ru(depth(k)), beta) <= rel_target * s_min);
    let grid = if worth(m.max(n)) {
        grid_exponent(a)
    } else {
        None
    };
    let (row_max, col_max) = match grid {
        Some(_) => max_row_col_norms_ru(a),
        None => (f64::INFINITY, f64::INFINITY),
    };
    // The m x p products are not stored: A V is formed a block of rows at
    // a time and read into the residual, A^T U a chunk of U at a time.
    let pv_grid = grid
        .filter(|_| worth(n) && row_max.is_finite())
        .map(|q| (q, row_max));
    let e = residual_av(a, &svd.u, svd.v.as_ref(), &svd.s, beta, pv_grid, par);
    let qu_grid = grid
        .filter(|_| worth(m) && col_max.is_finite())
        .map(|q| (q, col_max));
    let qu = left_product(a, &svd.u, qu_grid, par).bounded(beta);
    let f = residual_col_bounds(&qu, svd.v.as_ref(), &svd.s);
    pair_bounds_and_merge(&svd.s, &e, &f, svd.v.as_ref())
}

/// Common tail of the f64 certifiers: per-pair bounds, then merging.
pub(crate) fn pair_bounds_and_merge(
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
    let ynorm_lo = map_columns(v.subcols(0, s.len()), r::norm2_rd);
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

#[cfg(test)]
mod scaled_copy_tests {
    use super::*;
    use crate::matrix::DenseMatrix;

    quickcheck::quickcheck! {
        fn to_faer_scaled_is_scale_pow2_rn_entry_by_entry(rows: u8, cols: u8, k: i16, seed: u64) -> bool {
            let (rows, cols) = (rows as usize % 70 + 1, cols as usize % 70 + 1);
            let k = i32::from(k) % 1100;
            let mut s = seed | 1;
            let data = (0..rows * cols)
                .map(|_| {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    f64::from_bits(s >> 2) // finite: the top exponent bit is clear
                })
                .collect();
            let x = DenseMatrix { rows, cols, data };
            let m = to_faer_scaled(&x, k);
            (0..rows).all(|i| {
                (0..cols).all(|j| m[(i, j)].to_bits() == r::scale_pow2_rn(x.get(i, j), k).to_bits())
            })
        }
    }
}
