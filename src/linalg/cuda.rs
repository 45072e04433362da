//! The CUDA backend (`--device cuda`, cargo feature `cuda`): the bulk
//! operations of [`Backend`] on the first CUDA device, with cuBLAS (DGEMM,
//! DSYRK, DGEAM) and cuSOLVER (DSYEVD), loaded at run time (cudarc's dynamic
//! loading: building needs no CUDA toolkit, running needs the CUDA 12
//! driver and libraries on the loader's path).
//!
//! What the certificates need of the device is the hypothesis of
//! [`proofs/device-arithmetic.md`](crate::proofs::device_arithmetic) (L35): IEEE binary64 operations rounded to
//! nearest, gradual underflow, and every GEMM entry an evaluation tree of
//! A0.10 (no TF32, no reduced-precision or emulated FP64 modes). The code
//! establishes what it can before the first product: it sets cuBLAS's
//! pedantic math mode and reads it back, forbids atomics (so that a product
//! is the same at every call), and runs probes whose exact answers are
//! known: an integer Gram matrix whose entries need 28 bits (wrong under
//! any reduced-precision accumulation), a dot product of binary64 numbers
//! whose round-to-nearest result differs from every coarser evaluation,
//! and a product whose exact value is subnormal (zero under flush to zero).
//! A library or mode that fails any of these is refused, with the reason.
//!
//! A call that fails later (out of memory, a dimension beyond 32 bits) is
//! computed on the CPU instead, said once on stderr: the result is the same
//! kind of approximation or bounded product, so nothing certified changes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::cublas::{sys as bsys, CudaBlas};
use cudarc::cusolver::{sys as ssys, DnHandle};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use faer::{Accum, Mat, MatMut, MatRef, Par};

use super::backend::{Backend, Cpu, DeviceError, EigenSolver};

/// The CUDA backend (module docs).
pub(crate) struct Cuda {
    /// The device, its stream and library handles; one call at a time.
    inner: Mutex<Inner>,
    /// `cuda:0 <device name>`.
    name: String,
    /// Whether a CPU fallback was said on stderr already.
    warned: AtomicBool,
}

struct Inner {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    blas: CudaBlas,
    solver: DnHandle,
}

/// What a CUDA step failed with (one line).
type Fail = String;

static OPENED: OnceLock<Result<&'static Cuda, DeviceError>> = OnceLock::new();

/// The CUDA backend, opened and checked once per process (module docs);
/// an error says why the device cannot be used.
pub(crate) fn open() -> Result<&'static dyn Backend, DeviceError> {
    OPENED
        .get_or_init(|| {
            std::panic::catch_unwind(open_checked)
                .unwrap_or_else(|_| Err(fail("the CUDA libraries could not be loaded")))
                .map(|c| &*Box::leak(Box::new(c)))
        })
        .clone()
        .map(|c| c as &'static dyn Backend)
}

fn fail(why: impl std::fmt::Display) -> DeviceError {
    DeviceError(why.to_string())
}

/// Loads the libraries, opens device 0, pins the math mode and runs the
/// probes (module docs).
fn open_checked() -> Result<Cuda, DeviceError> {
    // SAFETY: only tries to dlopen the named libraries.
    let present = unsafe {
        (
            cudarc::driver::sys::is_culib_present(),
            bsys::is_culib_present(),
            ssys::is_culib_present(),
        )
    };
    match present {
        (false, _, _) => return Err(fail("no CUDA driver (libcuda.so.1) was found")),
        (_, false, _) => {
            return Err(fail(
                "cuBLAS (libcublas.so.12) was not found on the loader's path",
            ))
        }
        (_, _, false) => {
            return Err(fail(
                "cuSOLVER (libcusolver.so.11) was not found on the loader's path",
            ))
        }
        _ => {}
    }
    let ctx = CudaContext::new(0).map_err(|e| fail(format!("no usable CUDA device ({e:?})")))?;
    let name = format!(
        "cuda:0 {}",
        ctx.name().unwrap_or_else(|_| "unknown device".into())
    );
    let stream = ctx.default_stream();
    let blas = CudaBlas::new(stream.clone()).map_err(|e| fail(format!("cuBLAS: {e:?}")))?;
    let solver = DnHandle::new(stream.clone()).map_err(|e| fail(format!("cuSOLVER: {e:?}")))?;
    let inner = Inner {
        ctx,
        stream,
        blas,
        solver,
    };
    inner.pin_modes().map_err(fail)?;
    inner.probe().map_err(fail)?;
    Ok(Cuda {
        inner: Mutex::new(inner),
        name,
        warned: AtomicBool::new(false),
    })
}

/// A column-major matrix on the device: its first entry's address and
/// leading dimension.
#[derive(Clone, Copy)]
struct DevMat {
    ptr: u64,
    ld: usize,
}

/// The [`DevMat`] at `ptr` with leading dimension `ld`.
fn dev(ptr: u64, ld: usize) -> DevMat {
    DevMat { ptr, ld }
}

fn cublas(status: bsys::cublasStatus_t, what: &str) -> Result<(), Fail> {
    if status == bsys::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what} failed ({status:?})"))
    }
}

fn int(x: usize) -> Result<i32, Fail> {
    i32::try_from(x).map_err(|_| format!("dimension {x} is beyond cuBLAS's 32-bit interface"))
}

impl Inner {
    /// Pedantic math (no tensor cores, TF32 or emulation: the prescribed
    /// precision in every phase), read back; atomics off.
    fn pin_modes(&self) -> Result<(), Fail> {
        let h = *self.blas.handle();
        // SAFETY: a valid handle; plain setters and getters.
        unsafe {
            cublas(
                bsys::cublasSetMathMode(h, bsys::cublasMath_t::CUBLAS_PEDANTIC_MATH),
                "cublasSetMathMode(PEDANTIC)",
            )?;
            let mut mode = bsys::cublasMath_t::CUBLAS_DEFAULT_MATH;
            cublas(bsys::cublasGetMathMode(h, &mut mode), "cublasGetMathMode")?;
            if mode != bsys::cublasMath_t::CUBLAS_PEDANTIC_MATH {
                return Err(format!("cuBLAS kept math mode {mode:?}, not PEDANTIC"));
            }
            cublas(
                bsys::cublasSetAtomicsMode(
                    h,
                    bsys::cublasAtomicsMode_t::CUBLAS_ATOMICS_NOT_ALLOWED,
                ),
                "cublasSetAtomicsMode(NOT_ALLOWED)",
            )?;
        }
        Ok(())
    }

    fn upload(&self, a: MatRef<'_, f64>) -> Result<CudaSlice<f64>, Fail> {
        let mut v = Vec::with_capacity(a.nrows() * a.ncols());
        for j in 0..a.ncols() {
            v.extend(a.col(j).iter().copied());
        }
        self.stream
            .clone_htod(&v)
            .map_err(|e| format!("copy to the device: {e:?}"))
    }

    fn zeros(&self, len: usize) -> Result<CudaSlice<f64>, Fail> {
        self.stream
            .alloc_zeros::<f64>(len.max(1))
            .map_err(|e| format!("device allocation of {} bytes: {e:?}", len * 8))
    }

    fn download(&self, s: &CudaSlice<f64>, rows: usize, cols: usize) -> Result<Mat<f64>, Fail> {
        let v = self
            .stream
            .clone_dtoh(s)
            .map_err(|e| format!("copy from the device: {e:?}"))?;
        Ok(Mat::from_fn(rows, cols, |i, j| v[i + j * rows]))
    }

    /// `c = A^T A` (lower triangle) by DSYRK, mirrored on the host.
    fn gram(&self, a: MatRef<'_, f64>) -> Result<Mat<f64>, Fail> {
        self.ctx.bind_to_thread().map_err(|e| format!("{e:?}"))?;
        let (m, n) = (a.nrows(), a.ncols());
        let da = self.upload(a)?;
        let mut dc = self.zeros(n * n)?;
        {
            let (pa, _ra) = da.device_ptr(&self.stream);
            let (pc, _rc) = dc.device_ptr_mut(&self.stream);
            let (one, zero) = (1.0f64, 0.0f64);
            // SAFETY: device buffers of the sizes the dimensions say.
            cublas(
                unsafe {
                    bsys::cublasDsyrk_v2(
                        *self.blas.handle(),
                        bsys::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER,
                        bsys::cublasOperation_t::CUBLAS_OP_T,
                        int(n)?,
                        int(m)?,
                        &one,
                        pa as *const f64,
                        int(m.max(1))?,
                        &zero,
                        pc as *mut f64,
                        int(n.max(1))?,
                    )
                },
                "cublasDsyrk",
            )?;
        }
        let mut g = self.download(&dc, n, n)?;
        for j in 0..n {
            for i in 0..j {
                g[(i, j)] = g[(j, i)];
            }
        }
        Ok(g)
    }

    /// `C = A B (+ beta C)` by DGEMM on device pointers (column-major,
    /// `A` is `m x k`, `B` is `k x p`, leading dimensions as given).
    fn dgemm(
        &self,
        (m, p, k): (usize, usize, usize),
        (a, b): (DevMat, DevMat),
        beta: f64,
        c: DevMat,
    ) -> Result<(), Fail> {
        let one = 1.0f64;
        // SAFETY: the caller passes device pointers to buffers of these sizes.
        cublas(
            unsafe {
                bsys::cublasDgemm_v2(
                    *self.blas.handle(),
                    bsys::cublasOperation_t::CUBLAS_OP_N,
                    bsys::cublasOperation_t::CUBLAS_OP_N,
                    int(m)?,
                    int(p)?,
                    int(k)?,
                    &one,
                    a.ptr as *const f64,
                    int(a.ld.max(1))?,
                    b.ptr as *const f64,
                    int(b.ld.max(1))?,
                    &beta,
                    c.ptr as *mut f64,
                    int(c.ld.max(1))?,
                )
            },
            "cublasDgemm",
        )
    }

    /// `c = c + part`, entrywise (DGEAM with unit scalars: one rounding).
    fn add(&self, c: u64, part: u64, (m, p): (usize, usize)) -> Result<(), Fail> {
        let one = 1.0f64;
        // SAFETY: two m x p device buffers; in place as cuBLAS allows (C = A, ldc = lda).
        cublas(
            unsafe {
                bsys::cublasDgeam(
                    *self.blas.handle(),
                    bsys::cublasOperation_t::CUBLAS_OP_N,
                    bsys::cublasOperation_t::CUBLAS_OP_N,
                    int(m)?,
                    int(p)?,
                    &one,
                    c as *const f64,
                    int(m.max(1))?,
                    &one,
                    part as *const f64,
                    int(m.max(1))?,
                    c as *mut f64,
                    int(m.max(1))?,
                )
            },
            "cublasDgeam",
        )
    }

    /// The chunked product of [`Backend::chunked_product`], on the device.
    fn chunked_product(
        &self,
        a: MatRef<'_, f64>,
        b: MatRef<'_, f64>,
        chunk: usize,
    ) -> Result<Mat<f64>, Fail> {
        self.ctx.bind_to_thread().map_err(|e| format!("{e:?}"))?;
        let (m, k, p) = (a.nrows(), a.ncols(), b.ncols());
        let chunk = chunk.max(1);
        let da = self.upload(a)?;
        let db = self.upload(b)?;
        let mut dc = self.zeros(m * p)?;
        let mut dpart = self.zeros(if k > chunk { m * p } else { 1 })?;
        {
            let (pa, _ra) = da.device_ptr(&self.stream);
            let (pb, _rb) = db.device_ptr(&self.stream);
            let (pc, _rc) = dc.device_ptr_mut(&self.stream);
            let (pp, _rp) = dpart.device_ptr_mut(&self.stream);
            let first = chunk.min(k);
            self.dgemm((m, p, first), (dev(pa, m), dev(pb, k)), 0.0, dev(pc, m))?;
            for lo in (chunk..k).step_by(chunk) {
                let len = chunk.min(k - lo);
                let (ac, bc) = (pa + (lo * m * 8) as u64, pb + (lo * 8) as u64);
                self.dgemm((m, p, len), (dev(ac, m), dev(bc, k)), 0.0, dev(pp, m))?;
                self.add(pc, pp, (m, p))?;
            }
        }
        self.download(&dc, m, p)
    }

    /// One GEMM with `accum` (`Add`: beta = 1, used only where exact, L27).
    fn gemm(
        &self,
        c: MatRef<'_, f64>,
        accum: Accum,
        a: MatRef<'_, f64>,
        b: MatRef<'_, f64>,
    ) -> Result<Mat<f64>, Fail> {
        self.ctx.bind_to_thread().map_err(|e| format!("{e:?}"))?;
        let (m, k, p) = (a.nrows(), a.ncols(), b.ncols());
        let da = self.upload(a)?;
        let db = self.upload(b)?;
        let (mut dc, beta) = match accum {
            Accum::Replace => (self.zeros(m * p)?, 0.0),
            Accum::Add => (self.upload(c)?, 1.0),
        };
        {
            let (pa, _ra) = da.device_ptr(&self.stream);
            let (pb, _rb) = db.device_ptr(&self.stream);
            let (pc, _rc) = dc.device_ptr_mut(&self.stream);
            self.dgemm((m, p, k), (dev(pa, m), dev(pb, k)), beta, dev(pc, m))?;
        }
        self.download(&dc, m, p)
    }

    /// cuSOLVER's DSYEVD of the lower triangle: eigenvalues ascending,
    /// eigenvectors as columns.
    fn sym_eigen(&self, g: MatRef<'_, f64>) -> Result<(Vec<f64>, Mat<f64>), Fail> {
        self.ctx.bind_to_thread().map_err(|e| format!("{e:?}"))?;
        let n = g.nrows();
        let mut da = self.upload(g)?;
        let mut dw = self.zeros(n)?;
        let mut dinfo = self
            .stream
            .alloc_zeros::<i32>(1)
            .map_err(|e| format!("device allocation: {e:?}"))?;
        let jobz = ssys::cusolverEigMode_t::CUSOLVER_EIG_MODE_VECTOR;
        let lower = ssys::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER;
        {
            let (pa, _ra) = da.device_ptr_mut(&self.stream);
            let (pw, _rw) = dw.device_ptr_mut(&self.stream);
            let (pi, _ri) = dinfo.device_ptr_mut(&self.stream);
            let mut lwork = 0i32;
            // SAFETY: an n x n matrix, n eigenvalues, a workspace of the queried size.
            let st = unsafe {
                ssys::cusolverDnDsyevd_bufferSize(
                    self.solver.cu(),
                    jobz,
                    lower,
                    int(n)?,
                    pa as *const f64,
                    int(n.max(1))?,
                    pw as *const f64,
                    &mut lwork,
                )
            };
            if st != ssys::cusolverStatus_t::CUSOLVER_STATUS_SUCCESS {
                return Err(format!("cusolverDnDsyevd_bufferSize failed ({st:?})"));
            }
            let mut work = self.zeros(lwork.max(1) as usize)?;
            let (pwk, _rwk) = work.device_ptr_mut(&self.stream);
            // SAFETY: as above.
            let st = unsafe {
                ssys::cusolverDnDsyevd(
                    self.solver.cu(),
                    jobz,
                    lower,
                    int(n)?,
                    pa as *mut f64,
                    int(n.max(1))?,
                    pw as *mut f64,
                    pwk as *mut f64,
                    lwork,
                    pi as *mut i32,
                )
            };
            if st != ssys::cusolverStatus_t::CUSOLVER_STATUS_SUCCESS {
                return Err(format!("cusolverDnDsyevd failed ({st:?})"));
            }
        }
        let info = self
            .stream
            .clone_dtoh(&dinfo)
            .map_err(|e| format!("{e:?}"))?;
        if info.first().copied().unwrap_or(-1) != 0 {
            return Err(format!("cusolverDnDsyevd did not converge (info {info:?})"));
        }
        let w = self.stream.clone_dtoh(&dw).map_err(|e| format!("{e:?}"))?;
        Ok((w, self.download(&da, n, n)?))
    }

    /// The probes of the module docs; an error names the one that failed.
    fn probe(&self) -> Result<(), Fail> {
        // 1. An integer Gram matrix with 28-bit entries: exact in binary64
        //    in any order (L23), wrong under any coarser accumulation.
        let (m, n) = (64usize, 8usize);
        let a = Mat::from_fn(m, n, |i, j| (((i * 131 + j * 977) % 4093) as f64) - 2046.0);
        let g = self.gram(a.as_ref())?;
        for j in 0..n {
            for i in 0..n {
                let exact: i64 = (0..m).map(|l| a[(l, i)] as i64 * a[(l, j)] as i64).sum();
                if g[(i, j)] != exact as f64 {
                    return Err("the integer Gram probe was not exact: the device does not compute in binary64".into());
                }
            }
        }
        // 2. (1 + 2^-30)^2 + (-1) = 2^-29 + 2^-60: binary64 gives 2^-29
        //    (product rounded first) or 2^-29 + 2^-60 (FMA); any coarser
        //    format gives 0 (1 + 2^-30 is not a float32) or worse.
        let x = Mat::from_fn(
            1,
            2,
            |_, j| if j == 0 { 1.0 + 2f64.powi(-30) } else { -1.0 },
        );
        let y = Mat::from_fn(2, 1, |i, _| if i == 0 { 1.0 + 2f64.powi(-30) } else { 1.0 });
        let d = self.gemm(
            Mat::<f64>::zeros(1, 1).as_ref(),
            Accum::Replace,
            x.as_ref(),
            y.as_ref(),
        )?[(0, 0)];
        if d != 2f64.powi(-29) && d != 2f64.powi(-29) + 2f64.powi(-60) {
            return Err(format!(
                "the rounding probe gave {d:e}: not binary64 rounded to nearest"
            ));
        }
        // 3. 2^-537 * 2^-537 + 2^-537 * 2^-537 = 2^-1073, a subnormal.
        let s = Mat::from_fn(1, 2, |_, _| 2f64.powi(-537));
        let t = Mat::from_fn(2, 1, |_, _| 2f64.powi(-537));
        let d = self.gemm(
            Mat::<f64>::zeros(1, 1).as_ref(),
            Accum::Replace,
            s.as_ref(),
            t.as_ref(),
        )?[(0, 0)];
        if d != 2f64.powi(-1073) {
            return Err(format!(
                "the subnormal probe gave {d:e}, not 2^-1073: the device flushes subnormals"
            ));
        }
        Ok(())
    }
}

impl Cuda {
    /// Runs `op` on the device, or says why not once and returns `None`
    /// (the caller then computes on the CPU).
    fn run<R>(&self, what: &str, op: impl FnOnce(&Inner) -> Result<R, Fail>) -> Option<R> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        match op(&inner) {
            Ok(r) => Some(r),
            Err(e) => {
                if !self.warned.swap(true, Ordering::Relaxed) {
                    eprintln!(
                        "specbound: {what} on {} failed ({e}); computed on the CPU instead",
                        self.name
                    );
                }
                None
            }
        }
    }
}

impl Backend for Cuda {
    fn describe(&self) -> String {
        self.name.clone()
    }

    fn gram(&self, a: MatRef<'_, f64>, par: Par) -> Mat<f64> {
        self.run("the Gram product", |d| d.gram(a))
            .unwrap_or_else(|| Cpu.gram(a, par))
    }

    fn gemm(
        &self,
        mut c: MatMut<'_, f64>,
        accum: Accum,
        a: MatRef<'_, f64>,
        b: MatRef<'_, f64>,
        par: Par,
    ) {
        match self.run("a product", |d| d.gemm(c.as_ref(), accum, a, b)) {
            Some(r) => c.copy_from(r.as_ref()),
            None => Cpu.gemm(c, accum, a, b, par),
        }
    }

    fn chunked_product(
        &self,
        a: MatRef<'_, f64>,
        b: MatRef<'_, f64>,
        chunk: usize,
        par: Par,
    ) -> Mat<f64> {
        self.run("a chunked product", |d| d.chunked_product(a, b, chunk))
            .unwrap_or_else(|| Cpu.chunked_product(a, b, chunk, par))
    }

    fn sym_eigen(
        &self,
        g: MatRef<'_, f64>,
        prefer: EigenSolver,
        par: Par,
    ) -> Option<(Vec<f64>, Mat<f64>, EigenSolver)> {
        match self.run("the eigensolver", |d| d.sym_eigen(g)) {
            Some((l, v)) if l.iter().all(|x| x.is_finite()) => Some((l, v, EigenSolver::Cusolver)),
            _ => Cpu.sym_eigen(g, prefer, par),
        }
    }
}
