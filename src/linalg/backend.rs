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
        let (m, k) = (a.nrows(), a.ncols());
        let p = b.ncols();
        let chunk = chunk.max(1);
        let mut c = Mat::<f64>::zeros(m, p);
        let mut part = Mat::<f64>::zeros(if k > chunk { m } else { 0 }, p);
        for lo in (0..k.max(1)).step_by(chunk) {
            let len = chunk.min(k - lo);
            let (ac, bc) = (a.subcols(lo, len), b.subrows(lo, len));
            add_chunk_product(self, &mut c, &mut part, lo == 0, ac, bc, par);
        }
        c
    }

    /// [`Backend::chunked_product`] for a `B` of many independent columns
    /// (`G V`): every entry is the same chunked sum, with the same error
    /// bound (L4, blocked form); a backend may split `B`'s columns among its
    /// workers (the CPU: `symeig::by_column_slabs`, each slab's product on one
    /// thread, which scales better than one product over the pool).
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
        if !matches!(par, Par::Rayon(t) if t.get() > 1) {
            return self.chunked_product(a, b, chunk, par);
        }
        let mut c = Mat::<f64>::zeros(a.nrows(), b.ncols());
        super::symeig::by_column_slabs(c.as_mut(), par, |mut slab, j0| {
            let p = self.chunked_product(a, b.subcols(j0, slab.ncols()), chunk, Par::Seq);
            slab.copy_from(p.as_ref());
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
    c: &mut Mat<f64>,
    part: &mut Mat<f64>,
    first: bool,
    ac: MatRef<'_, f64>,
    bc: MatRef<'_, f64>,
    par: Par,
) {
    if first {
        b.gemm(c.as_mut(), Accum::Replace, ac, bc, par);
        return;
    }
    b.gemm(part.as_mut(), Accum::Replace, ac, bc, par);
    add_in_place(c.as_mut(), part.as_ref(), par);
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
/// thread may be slowed down by the machine's other work), and with two
/// slabs per thread one thread of two sat idle for up to a fifth of the
/// Gram of a LLaMA-7B `M_in`; more slabs let the other steal the rest.
/// Each slab packs the columns under it once more, so not many more.
const GRAM_SLABS_PER_THREAD: usize = 4;

/// The CPU's `gram::gram`: faer's symmetric (lower-triangle) product, mirrored.
///
/// With a pool of `t > 1` threads the lower triangle is cut into about
/// `GRAM_SLABS_PER_THREAD * t` slabs of consecutive columns of equal area
/// ([`gram_slab_bounds`], [`GRAM_SLABS_PER_THREAD`]), each slab's products
/// on one thread, side by side: that scales better than one triangular
/// product split over the pool (the 4096-column Gram of a LLaMA-7B `M_in`:
/// 1.6x at 2 threads as one product). Each entry is still one length-`m`
/// dot product in some order, so the split changes nothing where the Gram
/// is exact (L23), the one case its callers use.
pub(crate) fn gram_on_cpu(a: MatRef<'_, f64>, par: Par) -> Mat<f64> {
    let n = a.ncols();
    let mut g = Mat::<f64>::zeros(n, n);
    // Columns j0.. of the lower triangle: a triangle on the diagonal, the
    // rectangle under it.
    let lower = |(j0, diag, below): super::symeig::LowerSlab<'_>, par: Par| {
        let w = diag.ncols();
        triangular::matmul(
            diag,
            BlockStructure::TriangularLower,
            Accum::Replace,
            a.subcols(j0, w).transpose(),
            BlockStructure::Rectangular,
            a.subcols(j0, w),
            BlockStructure::Rectangular,
            1.0,
            par,
        );
        faer::linalg::matmul::matmul(
            below,
            Accum::Replace,
            a.subcols(j0 + w, n - j0 - w).transpose(),
            a.subcols(j0, w),
            1.0,
            par,
        );
    };
    match par {
        Par::Rayon(t) if t.get() > 1 && n >= 2 * super::symeig::SLAB_MIN => {
            use rayon::prelude::*;
            let bounds = gram_slab_bounds(n, GRAM_SLABS_PER_THREAD * t.get());
            super::symeig::lower_triangle_slabs(g.as_mut(), &bounds)
                .into_par_iter()
                .for_each(|slab| lower(slab, Par::Seq));
        }
        _ => {
            for slab in super::symeig::lower_triangle_slabs(g.as_mut(), &[0, n]) {
                lower(slab, par);
            }
        }
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

    #[test]
    fn gram_slab_bounds_cut_the_triangle_into_ordered_slabs_of_about_equal_area() {
        for (n, k) in [(512, 4), (4096, 4), (600, 6), (1000, 32), (3, 8)] {
            let b = gram_slab_bounds(n, k);
            assert_eq!((b[0], *b.last().unwrap()), (0, n), "n {n}, k {k}");
            assert!(b.windows(2).all(|w| w[0] < w[1]), "n {n}, k {k}: {b:?}");
            assert!(b.len() <= k + 1);
            if n >= 512 {
                let area = |j0: usize, j1: usize| (j0..j1).map(|j| n - j).sum::<usize>();
                let (total, share) = (n * (n + 1) / 2, n * (n + 1) / 2 / k);
                let slabs: Vec<usize> = b.windows(2).map(|w| area(w[0], w[1])).collect();
                assert_eq!(slabs.iter().sum::<usize>(), total);
                // Each slab within one column's entries of an equal share.
                assert!(slabs.iter().all(|&s| s.abs_diff(share) <= n), "{slabs:?}");
            }
        }
    }

    /// An exact Gram (integer entries: L23) by slabs over pools of 2 and 3
    /// threads has the bits of the one product on the calling thread.
    #[test]
    fn gram_by_slabs_is_the_sequential_exact_gram() {
        let (m, n) = (70, 600);
        let a = Mat::from_fn(m, n, |i, j| (((i * 31 + j * 17) % 23) as f64) - 11.0);
        let seq = gram_on_cpu(a.as_ref(), Par::Seq);
        for t in [2, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .unwrap();
            let par = pool.install(|| gram_on_cpu(a.as_ref(), Par::rayon(t)));
            for j in 0..n {
                for i in 0..n {
                    assert_eq!(
                        par[(i, j)].to_bits(),
                        seq[(i, j)].to_bits(),
                        "({i}, {j}) at {t}"
                    );
                }
            }
        }
        // And it is A^T A: one entry computed by hand.
        let want: f64 = (0..m).map(|i| a[(i, 5)] * a[(i, 599)]).sum();
        assert_eq!(seq[(599, 5)], want);
        assert_eq!(seq[(5, 599)], want);
    }
}
