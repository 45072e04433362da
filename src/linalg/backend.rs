//! The backend seam: the few bulk operations the certification uses, and
//! where they run (the CPU, a CUDA device, or the shuffled test backend).
//!
//! What a backend computes is either bounded by a lemma **whatever the order
//! of evaluation**, or needs no guarantee at all:
//! - [`Backend::gram`]: `fl(A^T A)`, exact in any order when
//!   `gram::gram_is_exact` holds ([`proofs/exact-gram.md`](crate::proofs::exact_gram), L23);
//! - [`Backend::chunked_product`]: `fl(A B)` by inner-dimension chunks, each
//!   chunk product by any evaluation tree of A0.10 and the chunks added in
//!   order with one rounding each, so that the a priori bound of
//!   [`proofs/dot-product-error.md`](crate::proofs::dot_product_error) (L4, blocked form) holds;
//! - [`Backend::sym_eigen`]: an approximate symmetric eigendecomposition, of
//!   which the residual certification assumes nothing
//!   ([`proofs/gram-eigen.md`](crate::proofs::gram_eigen), L24).
//!
//! Everything else (the residual theorems, clusters, rank decisions, the
//! directed-rounding norms and the decimal output) stays on the CPU and is
//! shared by every backend. What a device backend must provide for the
//! lemmas to apply (IEEE binary64, round to nearest, gradual underflow, no
//! reduced-precision or emulated modes) is stated, and how the code checks
//! it, in [`proofs/device-arithmetic.md`](crate::proofs::device_arithmetic) (L35).
//!
//! The backend is chosen once per process (or per call, through
//! [`with_device`]) and read by the linear algebra through [`current`]: the
//! device is a property of the run, recorded in its certificate, not of one
//! matrix.

use std::sync::RwLock;

use faer::{Accum, Mat, MatMut, MatRef, Par};

use faer::linalg::matmul::triangular::{self, BlockStructure};

/// Which machine a run's bulk arithmetic uses, as the user asks for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// This machine's cores (faer).
    Cpu,
    /// The first CUDA device (cuBLAS, cuSOLVER), or an error if there is
    /// none or it cannot be put in the mode the lemmas need.
    Cuda,
    /// The CUDA device when one is usable, else the CPU (said on stderr by
    /// the front that asked).
    Auto,
}

impl Device {
    /// The device named `s` (`cpu`, `cuda`, `auto`).
    ///
    /// ```
    /// use specbound::linalg::backend::Device;
    /// assert_eq!(Device::parse("cuda"), Some(Device::Cuda));
    /// assert_eq!(Device::parse("tpu"), None);
    /// ```
    pub fn parse(s: &str) -> Option<Device> {
        [Device::Cpu, Device::Cuda, Device::Auto]
            .into_iter()
            .find(|d| d.name() == s)
    }

    /// The name [`Device::parse`] reads.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Device::Cpu => "cpu",
            Device::Cuda => "cuda",
            Device::Auto => "auto",
        }
    }
}

/// The names `--device` accepts, in the order `--help` lists them.
pub const DEVICE_NAMES: [&str; 3] = [Device::Cpu.name(), Device::Cuda.name(), Device::Auto.name()];

/// The bulk operations of the certification (module docs). Implementations
/// must compute exactly what each method's contract says; the contracts are
/// the hypotheses of the lemmas the certificates rest on.
pub trait Backend: Send + Sync {
    /// What the certificate records as its device (`cpu`, `cuda:0 NVIDIA
    /// H200`, ...).
    fn describe(&self) -> String;

    /// `fl(A^T A)` as a full symmetric matrix: the lower triangle by
    /// evaluation trees of A0.10 (any order, FMA allowed), the upper one a
    /// copy of it. Exact when `gram::gram_is_exact(a)` holds (L23).
    fn gram(&self, a: MatRef<'_, f64>, par: Par) -> Mat<f64>;

    /// One GEMM: `c = fl(A B)` ([`Accum::Replace`]) by evaluation trees of
    /// A0.10 (any order, FMA allowed), or `c = fl(c + A B)`
    /// ([`Accum::Add`]) by such trees with `c` as one more leaf; callers use
    /// the second only where every such evaluation is exact (L27).
    fn gemm(
        &self,
        c: MatMut<'_, f64>,
        accum: Accum,
        a: MatRef<'_, f64>,
        b: MatRef<'_, f64>,
        par: Par,
    );

    /// `fl(A B)` with the inner dimension `k` split into consecutive chunks
    /// of `chunk` indices (one chunk when `chunk >= k`): each chunk product
    /// by [`Backend::gemm`], the chunk products added in chunk order with
    /// one rounded addition per entry (L4, blocked form; rounding depth
    /// `dense::product_depth(k)` for `chunk = dense::CHUNK`).
    fn chunked_product(
        &self,
        a: MatRef<'_, f64>,
        b: MatRef<'_, f64>,
        chunk: usize,
        par: Par,
    ) -> Mat<f64> {
        let mut c = Mat::<f64>::zeros(a.nrows(), b.ncols());
        chunked_product_into(self, c.as_mut(), a, b, chunk, par);
        c
    }

    /// [`Backend::chunked_product`] for a `B` of many independent columns
    /// (`G V`): every entry is the same chunked sum, with the same error
    /// bound (L4, blocked form); a backend may split the product among its
    /// workers (the CPU: `WIDE_SLABS_PER_THREAD` slabs of rows of `A` per
    /// thread, each slab's product on one thread).
    fn chunked_product_wide(
        &self,
        a: MatRef<'_, f64>,
        b: MatRef<'_, f64>,
        chunk: usize,
        par: Par,
    ) -> Mat<f64> {
        self.chunked_product(a, b, chunk, par)
    }

    /// An approximate eigendecomposition of the symmetric `g` (lower
    /// triangle read): eigenvalues in any order with their eigenvectors as
    /// columns, and the solver that made them. **No guarantee** (L24
    /// assumes nothing of it); `prefer` names the CPU solver to use where
    /// the backend has a choice. `None` where the solver fails.
    fn sym_eigen(
        &self,
        g: MatRef<'_, f64>,
        prefer: EigenSolver,
        par: Par,
    ) -> Option<(Vec<f64>, Mat<f64>, EigenSolver)>;
}

/// The CPU backend: faer's GEMMs and the eigensolvers of this crate.
pub(crate) struct Cpu;

impl Backend for Cpu {
    fn describe(&self) -> String {
        "cpu".into()
    }

    fn gram(&self, a: MatRef<'_, f64>, par: Par) -> Mat<f64> {
        gram_on_cpu(a, par)
    }

    fn chunked_product_wide(
        &self,
        a: MatRef<'_, f64>,
        b: MatRef<'_, f64>,
        chunk: usize,
        par: Par,
    ) -> Mat<f64> {
        let t = match par {
            Par::Rayon(t) if t.get() > 1 => t.get(),
            _ => return self.chunked_product(a, b, chunk, par),
        };
        use rayon::prelude::*;
        let mut c = Mat::<f64>::zeros(a.nrows(), b.ncols());
        let rows = a.nrows().div_ceil(WIDE_SLABS_PER_THREAD * t).max(1);
        c.par_row_chunks_mut(rows)
            .enumerate()
            .for_each(|(s, slab)| {
                let a_rows = a.subrows(s * rows, slab.nrows());
                chunked_product_into(self, slab, a_rows, b, chunk, Par::Seq);
            });
        c
    }

    fn gemm(
        &self,
        c: MatMut<'_, f64>,
        accum: Accum,
        a: MatRef<'_, f64>,
        b: MatRef<'_, f64>,
        par: Par,
    ) {
        faer::linalg::matmul::matmul(c, accum, a, b, 1.0, par);
    }

    fn sym_eigen(
        &self,
        g: MatRef<'_, f64>,
        prefer: EigenSolver,
        par: Par,
    ) -> Option<(Vec<f64>, Mat<f64>, EigenSolver)> {
        match prefer {
            EigenSolver::Faer | EigenSolver::Cusolver => {
                faer_evd(g).map(|(l, v)| (l, v, EigenSolver::Faer))
            }
            EigenSolver::Tridiagonal => super::symeig::approx_symmetric_eigen(g, par)
                .map(|(l, v)| (l, v, EigenSolver::Tridiagonal)),
        }
    }
}

/// One inner-dimension chunk of a blocked product by `b`: `c = fl(ac bc)`
/// for the first chunk, else `c += fl(ac bc)` formed in the separate buffer
/// `part` and added entry by entry (one rounding per chunk, so the depth of
/// every term is known whatever order the GEMM uses inside a chunk; L4,
/// blocked form). The step of [`Backend::chunked_product`] and of the
/// streamed `A^T U` of `dense`.
pub(crate) fn add_chunk_product<B: Backend + ?Sized>(
    b: &B,
    c: MatMut<'_, f64>,
    part: &mut Mat<f64>,
    first: bool,
    ac: MatRef<'_, f64>,
    bc: MatRef<'_, f64>,
    par: Par,
) {
    if first {
        b.gemm(c, Accum::Replace, ac, bc, par);
        return;
    }
    b.gemm(part.as_mut(), Accum::Replace, ac, bc, par);
    add_in_place(c, part.as_ref(), par);
}

/// [`Backend::chunked_product`] written into `c` (`A`'s rows by `B`'s
/// columns): the chunk products by `backend`'s `gemm`, added in chunk order
/// with one rounded addition per entry (L4, blocked form).
pub(crate) fn chunked_product_into<B: Backend + ?Sized>(
    backend: &B,
    mut c: MatMut<'_, f64>,
    a: MatRef<'_, f64>,
    b: MatRef<'_, f64>,
    chunk: usize,
    par: Par,
) {
    let k = a.ncols();
    let chunk = chunk.max(1);
    let mut part = Mat::<f64>::zeros(if k > chunk { a.nrows() } else { 0 }, b.ncols());
    for lo in (0..k.max(1)).step_by(chunk) {
        let len = chunk.min(k - lo);
        let (ac, bc) = (a.subcols(lo, len), b.subrows(lo, len));
        add_chunk_product(backend, c.as_mut(), &mut part, lo == 0, ac, bc, par);
    }
}

/// `c += part`, one rounded addition per entry (column slices: the
/// matrices this crate allocates are column-major and contiguous), split
/// by columns over the pool when `par` allows: each entry's one addition is
/// the same whichever thread makes it, so the bits are too.
pub(crate) fn add_in_place(c: MatMut<'_, f64>, part: MatRef<'_, f64>, par: Par) {
    match par {
        Par::Rayon(t) if t.get() > 1 && c.ncols() > 1 => {
            use rayon::prelude::*;
            let width = c.ncols().div_ceil(4 * t.get());
            c.par_col_chunks_mut(width)
                .enumerate()
                .for_each(|(b, block)| {
                    let n = block.ncols();
                    add_columns(block, part.subcols(b * width, n));
                });
        }
        _ => add_columns(c, part),
    }
}

/// `c += part` on the calling thread, column by column.
fn add_columns(mut c: MatMut<'_, f64>, part: MatRef<'_, f64>) {
    for j in 0..c.ncols() {
        let src = part.col(j);
        for (i, d) in c.as_mut().col_mut(j).iter_mut().enumerate() {
            *d += src[i];
        }
    }
}

/// Which eigensolver produced a `gram::GramEigen` (approximations both).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EigenSolver {
    /// `symeig`: blocked tridiagonalization, QL and inverse
    /// iteration; tried first on exact Gram matrices (the faster one).
    Tridiagonal,
    /// faer's `self_adjoint_evd` (divide and conquer): orthogonal vectors
    /// to working precision; the fallback.
    Faer,
    /// cuSOLVER's `syevd` on a CUDA device (`--device cuda`).
    Cusolver,
}

/// How many tasks faer's SVD and eigensolver divide their work into. Their
/// results depend on this number, not on how many threads run the tasks,
/// so one fixed number makes every approximation, and with it every
/// certificate, the same on one thread and on many (`tests/threads.rs`).
/// faer's products (GEMM) give the same bits however they are split, and
/// take the caller's parallelism.
pub(crate) const SOLVER_TASKS: usize = 16;

/// Smallest `min(rows, cols)` for which faer's SVD and eigensolver are
/// split into tasks: below it (the thin factors of attention heads, small
/// models) one task is faster, and the many such matrices of a layer run in
/// parallel with each other instead.
pub(crate) const SOLVER_PAR_MIN: usize = 512;

/// The parallelism given to faer's SVD and eigensolver of a `rows x cols`
/// matrix: [`SOLVER_TASKS`] tasks from [`SOLVER_PAR_MIN`] on, else one; a
/// function of the shape alone, never of the thread count.
pub(crate) fn solver_par(rows: usize, cols: usize) -> Par {
    if rows.min(cols) >= SOLVER_PAR_MIN {
        Par::rayon(SOLVER_TASKS)
    } else {
        Par::Seq
    }
}

/// Slabs per thread of [`gram_on_cpu`]: equal areas are not equal times
/// (a slab's triangle and its rectangle run at different speeds, and a
/// thread may be slowed down by the machine's other work), so several per
/// thread let a thread that finishes early steal the rest. On the Gram of
/// a LLaMA-7B `M_in` at 2 threads, 4 took 2.81-2.90 s and 2 took
/// 2.74-3.43 s, against 3.04-3.46 s for the column slabs before.
const GRAM_SLABS_PER_THREAD: usize = 4;

/// Slabs of rows per thread of [`Cpu`]'s `chunked_product_wide` (`G V`):
/// each slab packs its own rows of `A` and reads all of `B`, so a few: on a
/// LLaMA-7B `M_in`'s `G V` at 2 threads, 2 took 1.47-1.57 s, 4 took
/// 1.62-1.74 s and 8 took 1.70-2.14 s, against 1.76-2.54 s for the 16 slabs
/// of columns before (each packed all of `A`).
const WIDE_SLABS_PER_THREAD: usize = 2;

/// The CPU's `gram::gram`: faer's symmetric (lower-triangle) product, mirrored.
///
/// With a pool of `t > 1` threads the lower triangle is cut into about
/// `GRAM_SLABS_PER_THREAD * t` slabs of consecutive *rows* of equal area
/// ([`gram_row_slab_bounds`]), each slab's two products (the block left of
/// the diagonal and the triangle on it) on one thread, side by side. A row
/// slab packs only its own columns of `A` (`A[:, i0..i1]^T`), so the slabs
/// together pack `A` about twice whatever their number; column slabs each
/// packed all the columns right of them (the 4096-column Gram of a
/// LLaMA-7B `M_in` at 2 threads: 13% of the samples in packing, then a
/// tail of 0.9 s on one thread). Each entry is still one length-`m` dot
/// product in some order, so the split changes nothing where the Gram is
/// exact (L23), the one case its callers use.
pub(crate) fn gram_on_cpu(a: MatRef<'_, f64>, par: Par) -> Mat<f64> {
    let n = a.ncols();
    let mut g = Mat::<f64>::zeros(n, n);
    match par {
        Par::Rayon(t) if t.get() > 1 && n >= 2 * super::symeig::SLAB_MIN => {
            use rayon::prelude::*;
            let bounds = gram_row_slab_bounds(n, GRAM_SLABS_PER_THREAD * t.get());
            lower_triangle_row_slabs(g.as_mut(), &bounds)
                .into_par_iter()
                .for_each(|(i0, left, diag)| {
                    let rows = a.subcols(i0, diag.nrows());
                    lower_gram_block(diag, rows, Par::Seq);
                    if i0 > 0 {
                        let (lhs, rhs) = (rows.transpose(), a.subcols(0, i0));
                        faer::linalg::matmul::matmul(left, Accum::Replace, lhs, rhs, 1.0, Par::Seq);
                    }
                });
        }
        _ => lower_gram_block(g.as_mut(), a, par),
    }
    // Mirror in tiles (a copy of the same numbers: exact).
    const T: usize = 64;
    for jb in (0..n).step_by(T) {
        for ib in (0..jb + T).step_by(T) {
            for j in jb..(jb + T).min(n) {
                for i in ib..(ib + T).min(j) {
                    g[(i, j)] = g[(j, i)];
                }
            }
        }
    }
    g
}

/// The lower triangle of the Gram matrix `fl(X^T X)` into `c` (the lower
/// triangle of a square block on its diagonal), by faer's triangular
/// product.
fn lower_gram_block(c: MatMut<'_, f64>, x: MatRef<'_, f64>, par: Par) {
    triangular::matmul(
        c,
        BlockStructure::TriangularLower,
        Accum::Replace,
        x.transpose(),
        BlockStructure::Rectangular,
        x,
        BlockStructure::Rectangular,
        1.0,
        par,
    );
}

/// Row bounds `0 = b_0 < b_1 < ... = n` of `k` slabs of about equal area of
/// an `n x n` lower triangle (the slab of rows `b_s..b_{s+1}` holds
/// `i + 1` entries of each row `i`): the column bounds of
/// [`gram_slab_bounds`] reflected, since `i -> n - 1 - i` maps a row slab
/// of the lower triangle onto a column slab of the same area.
fn gram_row_slab_bounds(n: usize, k: usize) -> Vec<usize> {
    gram_slab_bounds(n, k)
        .iter()
        .rev()
        .map(|&j| n - j)
        .collect()
}

/// The lower triangle of the square `a` cut into slabs of consecutive rows
/// at `cuts` (increasing, from 0 to the order): each slab's first row
/// `i0`, its block left of the diagonal (`i0` columns) and its square block
/// on the diagonal, disjoint from every other slab's.
fn lower_triangle_row_slabs<'a>(
    a: MatMut<'a, f64>,
    cuts: &[usize],
) -> Vec<(usize, MatMut<'a, f64>, MatMut<'a, f64>)> {
    let mut slabs = Vec::with_capacity(cuts.len().saturating_sub(1));
    let mut rest = a;
    for w in cuts.windows(2) {
        let (top, below) = rest.split_at_row_mut(w[1] - w[0]);
        let (left, right) = top.split_at_col_mut(w[0]);
        slabs.push((w[0], left, right.subcols_mut(0, w[1] - w[0])));
        rest = below;
    }
    slabs
}

/// Column bounds `0 = b_0 < b_1 < ... = n` of `k` slabs of about equal
/// area of an `n x n` lower triangle (the slab from column `j` holds
/// `n - j` entries per column).
fn gram_slab_bounds(n: usize, k: usize) -> Vec<usize> {
    // Entries of the lower triangle left of column j: j n - j (j - 1) / 2.
    let area = |j: usize| j * n - j * j.saturating_sub(1) / 2;
    let total = area(n);
    let mut bounds = vec![0];
    for s in 1..k {
        let target = total * s / k;
        let j = (0..=n).find(|&j| area(j) >= target).unwrap_or(n);
        if j > *bounds.last().expect("starts with 0") && j < n {
            bounds.push(j);
        }
    }
    bounds.push(n);
    bounds
}

/// faer's `self_adjoint_evd` of `g` (lower triangle read), with the fixed
/// parallelism [`solver_par`] (the same bits on any thread count):
/// eigenvalues in faer's order and eigenvectors as columns. No guarantee.
pub(crate) fn faer_evd(g: MatRef<'_, f64>) -> Option<(Vec<f64>, Mat<f64>)> {
    let n = g.nrows();
    let par = solver_par(n, n);
    let mut vecs = Mat::<f64>::zeros(n, n);
    let mut vals = faer::diag::Diag::<f64>::zeros(n);
    let scratch = faer::linalg::evd::self_adjoint_evd_scratch::<f64>(
        n,
        faer::linalg::evd::ComputeEigenvectors::Yes,
        par,
        Default::default(),
    );
    let mut mem = faer::dyn_stack::MemBuffer::new(scratch);
    faer::linalg::evd::self_adjoint_evd(
        g,
        vals.as_mut(),
        Some(vecs.as_mut()),
        par,
        faer::dyn_stack::MemStack::new(&mut mem),
        Default::default(),
    )
    .ok()?;
    let raw: Vec<f64> = vals.column_vector().iter().copied().collect();
    Some((raw, vecs))
}

static CPU: Cpu = Cpu;

/// The backend in use, with the device it was chosen for.
static CURRENT: RwLock<Option<&'static dyn Backend>> = RwLock::new(None);

/// The backend the linear algebra uses now (the CPU unless [`install`] or
/// [`with_device`] chose another).
pub fn current() -> &'static dyn Backend {
    match *CURRENT.read().unwrap_or_else(|e| e.into_inner()) {
        Some(b) => b,
        None => &CPU,
    }
}

/// What a certificate records as its device: `None` for the CPU (the
/// default, and every certificate before devices existed), else
/// [`Backend::describe`] of the backend in use.
pub(crate) fn recorded_device() -> Option<String> {
    let d = current().describe();
    (d != "cpu").then_some(d)
}

/// Makes `b` the backend of every later computation in this process.
pub fn install(b: &'static dyn Backend) {
    *CURRENT.write().unwrap_or_else(|e| e.into_inner()) = Some(b);
}

/// Why a device cannot be used (one line; the fronts exit 2 with it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceError(pub String);

impl std::fmt::Display for DeviceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DeviceError {}

/// The backend for `device`: the CPU, the CUDA device, or for
/// [`Device::Auto`] the CUDA device where usable and else the CPU with the
/// reason it was not used (the second value, for the front to print).
pub(crate) fn open(device: Device) -> Result<(&'static dyn Backend, Option<String>), DeviceError> {
    match device {
        Device::Cpu => Ok((&CPU, None)),
        Device::Cuda => open_cuda()
            .map(|b| (b, None))
            .map_err(|e| DeviceError(format!("--device cuda: {e}"))),
        Device::Auto => match open_cuda() {
            Ok(b) => Ok((b, None)),
            Err(e) => Ok((
                &CPU,
                Some(format!("no usable CUDA device ({e}); using the CPU")),
            )),
        },
    }
}

#[cfg(feature = "cuda")]
fn open_cuda() -> Result<&'static dyn Backend, DeviceError> {
    super::cuda::open()
}

#[cfg(not(feature = "cuda"))]
fn open_cuda() -> Result<&'static dyn Backend, DeviceError> {
    Err(DeviceError(
        "this specbound was built without the `cuda` feature (cargo build --features cuda)".into(),
    ))
}

/// Opens `device` (`open`) and makes it the process's backend
/// ([`install`]); returns the fallback note of [`Device::Auto`], if any.
///
/// ```
/// use specbound::linalg::backend::{self, Device};
/// assert_eq!(backend::select(Device::Cpu).unwrap(), None);
/// assert_eq!(backend::current().describe(), "cpu");
/// ```
pub fn select(device: Device) -> Result<Option<String>, DeviceError> {
    let (b, note) = open(device)?;
    install(b);
    Ok(note)
}

/// Runs `f` with `device`'s backend and restores the previous one after
/// (for library callers choosing a device per call, such as Python's
/// `device=`). The choice is process-wide while `f` runs: calls on other
/// threads at the same time use it too.
pub fn with_device<R>(
    device: Device,
    f: impl FnOnce(Option<String>) -> R,
) -> Result<R, DeviceError> {
    /// Puts the previous backend back, also when `f` panics.
    struct Restore(Option<&'static dyn Backend>);
    impl Drop for Restore {
        fn drop(&mut self) {
            *CURRENT.write().unwrap_or_else(|e| e.into_inner()) = self.0;
        }
    }
    let (b, note) = open(device)?;
    let _restore = Restore(*CURRENT.read().unwrap_or_else(|e| e.into_inner()));
    install(b);
    Ok(f(note))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `bounds` of `k` slabs of an `n x n` lower triangle: ordered, from 0
    /// to `n`, at most `k` slabs, and (from order 512 on) each slab within
    /// one row's or column's entries of an equal share, `area(lo, hi)`
    /// being a slab's number of entries.
    fn assert_equal_area_slabs(
        b: &[usize],
        n: usize,
        k: usize,
        area: impl Fn(usize, usize) -> usize,
    ) {
        assert_eq!((b[0], *b.last().unwrap()), (0, n), "n {n}, k {k}");
        assert!(b.windows(2).all(|w| w[0] < w[1]), "n {n}, k {k}: {b:?}");
        assert!(b.len() <= k + 1);
        if n >= 512 {
            let (total, share) = (n * (n + 1) / 2, n * (n + 1) / 2 / k);
            let slabs: Vec<usize> = b.windows(2).map(|w| area(w[0], w[1])).collect();
            assert_eq!(slabs.iter().sum::<usize>(), total);
            assert!(slabs.iter().all(|&s| s.abs_diff(share) <= n), "{slabs:?}");
        }
    }

    const SLAB_CASES: [(usize, usize); 6] =
        [(512, 4), (4096, 4), (4096, 8), (600, 6), (1000, 32), (3, 8)];

    #[test]
    fn gram_slab_bounds_cut_the_triangle_into_ordered_slabs_of_about_equal_area() {
        for (n, k) in SLAB_CASES {
            // Column j of the lower triangle holds n - j entries.
            let area = |j0: usize, j1: usize| (j0..j1).map(|j| n - j).sum::<usize>();
            assert_equal_area_slabs(&gram_slab_bounds(n, k), n, k, area);
        }
    }

    #[test]
    fn gram_row_slab_bounds_cut_the_triangle_into_row_slabs_of_about_equal_area() {
        for (n, k) in SLAB_CASES {
            // Row i of the lower triangle holds i + 1 entries.
            let area = |i0: usize, i1: usize| (i0..i1).map(|i| i + 1).sum::<usize>();
            assert_equal_area_slabs(&gram_row_slab_bounds(n, k), n, k, area);
        }
    }

    /// `on(Par::rayon(t))` on a fresh pool of `t` threads, for `t` = 2 and
    /// 3, has every bit of `seq` (the same computation on the calling
    /// thread).
    fn same_bits_on_pools_of_2_and_3(seq: &Mat<f64>, on: impl Fn(Par) -> Mat<f64> + Sync) {
        for t in [2, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .unwrap();
            let par = pool.install(|| on(Par::rayon(t)));
            for j in 0..seq.ncols() {
                for i in 0..seq.nrows() {
                    let (x, y) = (par[(i, j)].to_bits(), seq[(i, j)].to_bits());
                    assert_eq!(x, y, "({i}, {j}) at {t}");
                }
            }
        }
    }

    /// `G V` by slabs of rows over pools of 2 and 3 threads has the bits of
    /// the one chunked product on the calling thread: entries that round
    /// (random fractions, three chunks of the inner dimension), and orders
    /// that are not multiples of the GEMM's tiles.
    #[test]
    fn wide_product_by_row_slabs_has_the_bits_of_the_sequential_product() {
        let (m, k, p) = (601, 1100, 37);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        let a = Mat::from_fn(m, k, |_, _| next());
        let b = Mat::from_fn(k, p, |_, _| next());
        let seq = Cpu.chunked_product(a.as_ref(), b.as_ref(), 512, Par::Seq);
        same_bits_on_pools_of_2_and_3(&seq, |par| {
            Cpu.chunked_product_wide(a.as_ref(), b.as_ref(), 512, par)
        });
    }

    /// An exact Gram (integer entries: L23) by slabs over pools of 2 and 3
    /// threads has the bits of the one product on the calling thread.
    #[test]
    fn gram_by_slabs_is_the_sequential_exact_gram() {
        let (m, n) = (70, 600);
        let a = Mat::from_fn(m, n, |i, j| (((i * 31 + j * 17) % 23) as f64) - 11.0);
        let seq = gram_on_cpu(a.as_ref(), Par::Seq);
        same_bits_on_pools_of_2_and_3(&seq, |par| gram_on_cpu(a.as_ref(), par));
        // And it is A^T A: one entry computed by hand.
        let want: f64 = (0..m).map(|i| a[(i, 5)] * a[(i, 599)]).sum();
        assert_eq!(seq[(599, 5)], want);
        assert_eq!(seq[(5, 599)], want);
    }
}
