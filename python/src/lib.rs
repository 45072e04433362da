//! `specbound._specbound`: the Python module, a thin front over the
//! library's command layer (`specbound::cmd`), beside the command line
//! (`src/bin/specbound`). Every function turns its Python arguments into a
//! command's request, runs the command off the interpreter lock,
//! interruptibly, and converts the command's report; no function has logic
//! of its own.
//!
//! Conventions shared by every function:
//! - a model argument is what the command line takes: a path, a Hugging
//!   Face id (`org/name`, looked up offline in the local cache, at
//!   `revision`), or `None` for the bundled model ([`model_ref`]);
//! - bad input raises `ValueError` (or `FileNotFoundError` when a named input
//!   does not exist) with the command line's one-line message
//!   ([`specbound::cmd::CmdError`]); wrong argument types raise `TypeError`;
//! - a computation that cannot be certified raises nothing: the result says
//!   `certified = False` and why;
//! - computations run in a worker thread while the calling thread, without
//!   the interpreter lock, waits and checks for signals (Ctrl-C) every
//!   [`POLL`]; see [`run_interruptibly`].

mod arrays;
mod certify;
mod commands;
mod evidence;
mod interval;
mod spectra;
mod svd;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use pyo3::exceptions::{PyFileNotFoundError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyFloat, PyString};

use specbound::arch::MatrixId;
use specbound::cmd::{CmdError, ModelRef, Ui};
use specbound::progress::Progress;

/// How often the waiting thread checks for signals and reports progress.
const POLL: Duration = Duration::from_millis(50);

#[pymodule]
fn _specbound(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Name the library's thread pool (its threads would otherwise inherit
    // the name of the first worker that used it): `specbound` is the worker
    // of one call, `specbound-rayon` the pool's. Fails harmlessly when
    // something else built the global pool first.
    let _ = rayon::ThreadPoolBuilder::new()
        .thread_name(|i| format!("specbound-rayon-{i}"))
        .build_global();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("DEFAULTS", defaults(m.py())?)?;
    m.add_class::<interval::Interval>()?;
    m.add_class::<interval::RankInterval>()?;
    m.add_class::<svd::SvdResult>()?;
    m.add_class::<spectra::SpectraResult>()?;
    m.add_class::<certify::Certificate>()?;
    m.add_class::<certify::Bounds>()?;
    m.add_class::<evidence::VerifyResult>()?;
    m.add_class::<evidence::AuditResult>()?;
    m.add_class::<evidence::DiffResult>()?;
    m.add_class::<evidence::SpectrumAuditResult>()?;
    m.add_function(wrap_pyfunction!(svd::svd, m)?)?;
    m.add_function(wrap_pyfunction!(spectra::spectra, m)?)?;
    m.add_function(wrap_pyfunction!(certify::certify, m)?)?;
    m.add_function(wrap_pyfunction!(certify::load, m)?)?;
    m.add_function(wrap_pyfunction!(evidence::verify, m)?)?;
    m.add_function(wrap_pyfunction!(evidence::audit, m)?)?;
    m.add_function(wrap_pyfunction!(evidence::diff, m)?)?;
    m.add_function(wrap_pyfunction!(commands::inspect, m)?)?;
    m.add_function(wrap_pyfunction!(commands::study, m)?)?;
    m.add_function(wrap_pyfunction!(commands::merge, m)?)?;
    m.add_function(wrap_pyfunction!(commands::report, m)?)?;
    Ok(())
}

/// The commands' defaults ([`specbound::cmd::defaults`], declared once),
/// as `DEFAULTS` of the module: `python/tests/test_defaults.py` pins every
/// signature's text and stub to them.
fn defaults(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
    use specbound::cmd::defaults as d;
    let out = pyo3::types::PyDict::new(py);
    out.set_item("device", d::DEVICE)?;
    out.set_item("l_phi", d::L_PHI)?;
    out.set_item("precision", d::PRECISION)?;
    out.set_item("svd_precision", d::SVD_PRECISION)?;
    out.set_item("rtol", d::RTOL)?;
    let schatten: Vec<u32> = d::SCHATTEN_P
        .split(',')
        .map(|p| p.parse().expect("the default exponents are integers"))
        .collect();
    out.set_item("schatten_p", pyo3::types::PyTuple::new(py, schatten)?)?;
    out.set_item("spectrum_layers", d::SPECTRUM_LAYERS)?;
    out.set_item("claim_rtol", d::CLAIM_RTOL)?;
    out.set_item("claim_atol", d::CLAIM_ATOL)?;
    out.set_item("rounding_units", d::ROUNDING_UNITS)?;
    Ok(out)
}

/// Whether one of `paths` does not exist.
fn any_missing(paths: &[&Path]) -> bool {
    paths.iter().any(|p| {
        matches!(std::fs::symlink_metadata(p), Err(err) if err.kind() == std::io::ErrorKind::NotFound)
    })
}

/// A library error as a Python exception: `FileNotFoundError` when one of
/// the named input `paths` does not exist, else `ValueError`; the message is
/// the command line's line ([`specbound::cmd::error_line`]).
pub(crate) fn error(e: &(dyn std::error::Error + 'static), paths: &[&Path]) -> PyErr {
    let msg = specbound::cmd::error_line(e);
    if any_missing(paths) {
        PyFileNotFoundError::new_err(msg)
    } else {
        PyValueError::new_err(msg)
    }
}

/// A command's error as a Python exception: `FileNotFoundError` when it
/// says a named input does not exist ([`CmdError::is_missing_input`]) or one
/// of the named input `paths` does not exist, else `ValueError`; the message
/// is the command line's line.
pub(crate) fn cmd_error(e: &CmdError, paths: &[&Path]) -> PyErr {
    if e.is_missing_input() || any_missing(paths) {
        PyFileNotFoundError::new_err(e.to_string())
    } else {
        PyValueError::new_err(e.to_string())
    }
}

/// A path argument: `str` or `os.PathLike`.
pub(crate) fn path_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<PathBuf> {
    obj.extract::<PathBuf>().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be a path (str or os.PathLike), got {}",
            type_name(obj)
        ))
    })
}

/// A list of path arguments (any iterable of `str` or `os.PathLike`, not a
/// single `str`).
pub(crate) fn paths_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<PathBuf>> {
    if obj.is_instance_of::<PyString>() || is_pathlike(obj)? {
        return Err(PyTypeError::new_err(format!(
            "{what} must be a list of paths, not a single path"
        )));
    }
    obj.try_iter()
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "{what} must be a list of paths, got {}",
                type_name(obj)
            ))
        })?
        .map(|p| path_arg(&p?, what))
        .collect()
}

/// A list of strings (model ids), `None` being the empty list.
pub(crate) fn strings_arg(obj: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Vec<String>> {
    let Some(obj) = obj else {
        return Ok(Vec::new());
    };
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be a list of str, not a single str"
        )));
    }
    obj.try_iter()
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "{what} must be a list of str, got {}",
                type_name(obj)
            ))
        })?
        .map(|s| {
            let s = s?;
            s.extract::<String>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "{what} must be a list of str, got an item of type {}",
                    type_name(&s)
                ))
            })
        })
        .collect()
}

/// Whether `obj` is an `os.PathLike` (has `__fspath__`).
pub(crate) fn is_pathlike(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    let pathlike = obj.py().import("os")?.getattr("PathLike")?;
    obj.is_instance(&pathlike)
}

/// The one place where a `model` argument becomes the command layer's
/// [`ModelRef`], as the command line reads its argument
/// ([`ModelRef::parse`]): `None` is the bundled all-MiniLM-L6-v2, a path
/// that exists is a path, an `org/name` that is not a path a Hugging Face
/// id in the local cache (at `revision`), anything else a path (reported
/// missing when the command resolves it).
pub(crate) fn model_ref(
    model: Option<&Bound<'_, PyAny>>,
    revision: Option<&str>,
) -> PyResult<ModelRef> {
    let path = match model {
        None => None,
        Some(m) => Some(path_arg(m, "model")?),
    };
    model_ref_of(path.as_deref(), revision)
}

/// A `model` argument that may also be held in memory: a mapping of
/// tensor names to arrays (a `dict` of NumPy arrays, a torch `state_dict`:
/// [`arrays`]) with its `config` (a `dict` as in `config.json`, or an
/// object with `to_dict()`), else what [`model_ref`] takes (then `config`
/// must be `None`: a path's config is its `config.json`).
pub(crate) fn model_input(
    model: Option<&Bound<'_, PyAny>>,
    config: Option<&Bound<'_, PyAny>>,
    revision: Option<&str>,
) -> PyResult<ModelRef> {
    match model {
        Some(m) if is_mapping(m)? => {
            if revision.is_some() {
                return Err(PyValueError::new_err(
                    "revision applies to a Hugging Face id, not to a model in memory",
                ));
            }
            Ok(ModelRef::Memory(arrays::memory_model(m, config)?))
        }
        _ if config.is_some() => Err(PyValueError::new_err(
            "config applies to a model in memory (a mapping of names to arrays); a model on \
             disk is read with its config.json",
        )),
        _ => model_ref(model, revision),
    }
}

/// An `init` argument (the initialisation of the distance measures, of
/// the model's architecture by definition): a mapping of names to arrays
/// is read with the model's own `config`, so it needs the model in memory
/// too; anything else is what [`model_ref`] takes (a path or a Hugging
/// Face id, read with its own config.json).
pub(crate) fn init_input(
    init: Option<&Bound<'_, PyAny>>,
    model: Option<&Bound<'_, PyAny>>,
    config: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<ModelRef>> {
    let Some(init) = init else {
        return Ok(None);
    };
    if !is_mapping(init)? {
        return model_ref(Some(init), None).map(Some);
    }
    let model_in_memory = match model {
        Some(m) => is_mapping(m)?,
        None => false,
    };
    if !model_in_memory {
        return Err(PyValueError::new_err(
            "an init in memory is read with the model's config=, so the model must be in memory \
             too; for a model on disk, save the initialisation beside its config.json \
             (safetensors' save_file) and pass that directory",
        ));
    }
    Ok(Some(ModelRef::Memory(arrays::memory_model(init, config)?)))
}

/// Whether `obj` is a mapping (has `items()`) and not a path.
fn is_mapping(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(!obj.is_instance_of::<PyString>() && !is_pathlike(obj)? && obj.hasattr("items")?)
}

/// [`model_ref`] of an argument already converted to a path.
pub(crate) fn model_ref_of(path: Option<&Path>, revision: Option<&str>) -> PyResult<ModelRef> {
    ModelRef::parse(path, revision).map_err(|e| cmd_error(&CmdError::from_error(e), &[]))
}

/// The layer list of `--spectrum-layers` (`"0-3"`, `"0,2,5"`).
pub(crate) fn layers_arg(text: &str) -> PyResult<Vec<usize>> {
    specbound::study::parse_layers(text).map_err(PyValueError::new_err)
}

/// `l_phi` as the library takes it, read once here ([`decimal_arg`], then
/// `certify::parse_l_phi`: the command line's message for a value that is
/// not a positive decimal); the paper's 1.13 when not given.
pub(crate) fn l_phi_arg(obj: Option<&Bound<'_, PyAny>>) -> PyResult<specbound::bounds::LPhi> {
    match obj {
        None => Ok(specbound::bounds::LPhi::paper()),
        Some(x) => specbound::certify::parse_l_phi(&decimal_arg(x, "l_phi")?)
            .map_err(|e| PyValueError::new_err(e.to_string())),
    }
}

/// A number the library reads as an exact decimal (`l_phi`, a Schatten
/// `p`): a `str` as written, an integer in full, a `decimal.Decimal` as its
/// exact `str`, a float (also a NumPy float) as its shortest round-trip
/// decimal (`repr`, so `0.1` means one tenth). Other rationals
/// (`fractions.Fraction`) have no decimal in general: `TypeError`.
pub(crate) fn decimal_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    let py = obj.py();
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(s.to_string());
    }
    let numbers = py.import("numbers")?;
    let decimal = py.import("decimal")?.getattr("Decimal")?;
    if obj.is_instance_of::<pyo3::types::PyBool>() {
        // bool is an int to Python, never an exponent to a reader.
    } else if obj.is_instance(&numbers.getattr("Integral")?)? {
        return Ok(py
            .import("operator")?
            .call_method1("index", (obj,))?
            .str()?
            .to_string());
    } else if obj.is_instance(&decimal)? {
        return Ok(obj.str()?.to_string());
    } else if obj.is_instance_of::<PyFloat>()
        || (obj.is_instance(&numbers.getattr("Real")?)?
            && !obj.is_instance(&numbers.getattr("Rational")?)?)
    {
        let f: f64 = obj.extract()?;
        return Ok(PyFloat::new(py, f).repr()?.to_string());
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be a str, int, float or decimal.Decimal, got {}",
        type_name(obj)
    )))
}

/// A positive integer argument (`grid_m`, `heads`, `layers`).
pub(crate) fn positive(v: Option<i64>, what: &str) -> PyResult<Option<usize>> {
    match v {
        None => Ok(None),
        Some(n) if n >= 1 => Ok(Some(n as usize)),
        Some(n) => Err(PyValueError::new_err(format!(
            "{what} must be a positive integer, got {n}"
        ))),
    }
}

pub(crate) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// Progress of a run, shared between the worker (through the library's
/// [`Progress`] hooks) and the waiting thread; `cancel` asks the library to
/// start no further matrix.
#[derive(Default)]
pub(crate) struct Watch {
    cancel: AtomicBool,
    total: AtomicUsize,
    done: AtomicUsize,
}

impl Progress for Watch {
    fn matrices_total(&self, n: usize) {
        self.total.store(n, Ordering::Relaxed);
    }
    fn matrix_done(&self, _id: MatrixId) {
        self.done.fetch_add(1, Ordering::Relaxed);
    }
    fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}

/// The shared [`Watch`] as a progress sink a command owns (a command asks
/// its [`Ui`] for a boxed sink and drops it when the run ends).
pub(crate) struct ArcProgress(pub(crate) Arc<Watch>);

impl Progress for ArcProgress {
    fn matrices_total(&self, n: usize) {
        self.0.matrices_total(n);
    }
    fn matrix_done(&self, id: MatrixId) {
        self.0.matrix_done(id);
    }
    fn message(&self, text: &str) {
        self.0.message(text);
    }
    fn line(&self, text: &str) {
        self.0.line(text);
    }
    fn cancelled(&self) -> bool {
        self.0.cancelled()
    }
}

/// The module's [`Ui`]: every sink a command asks for is the call's
/// [`Watch`], which the waiting thread reads (progress) and sets (cancel).
pub(crate) struct PyUi(pub(crate) Arc<Watch>);

impl Ui for PyUi {
    fn matrices(&self, _label: &str) -> Box<dyn Progress + '_> {
        Box::new(ArcProgress(Arc::clone(&self.0)))
    }
    fn spinner(&self, _label: &str, _message: &str) -> Box<dyn Progress + '_> {
        Box::new(ArcProgress(Arc::clone(&self.0)))
    }
}

/// Runs `f` with the bulk arithmetic on `device` (`"cpu"`, `"cuda"` or
/// `"auto"`, as `--device`; `specbound::linalg::backend`), restoring the
/// previous device after. An unknown name raises `ValueError`, a device that
/// cannot be used `RuntimeError` (the command line's one line); `"auto"`
/// falling back to the CPU says so with a `RuntimeWarning`.
pub(crate) fn on_device<R>(
    py: Python<'_>,
    device: &str,
    f: impl FnOnce() -> PyResult<R>,
) -> PyResult<R> {
    use specbound::linalg::backend::{self, Device, DEVICE_NAMES};
    let d = Device::parse(device).ok_or_else(|| {
        PyValueError::new_err(format!(
            "device must be one of {}, got {}",
            DEVICE_NAMES.join(", "),
            specbound::io::escape(device)
        ))
    })?;
    backend::with_device(d, |note| {
        if let Some(n) = note {
            let kind = py.get_type::<pyo3::exceptions::PyRuntimeWarning>();
            PyErr::warn(py, &kind, &std::ffi::CString::new(n).unwrap_or_default(), 1)?;
        }
        f()
    })
    .map_err(|e| PyRuntimeError::new_err(e.to_string()))?
}

/// Runs a command in a worker thread ([`run_interruptibly`]) with a fresh
/// [`Watch`] as its [`Ui`], without progress display: Ctrl-C cancels it
/// (between matrices) when `cancel`, else abandons it.
pub(crate) fn run_command<T: Send + 'static>(
    py: Python<'_>,
    cancel: bool,
    job: impl FnOnce(&PyUi) -> T + Send + 'static,
) -> PyResult<T> {
    let watch = Arc::new(Watch::default());
    let ui = PyUi(Arc::clone(&watch));
    let interrupt = if cancel {
        OnInterrupt::Cancel(watch)
    } else {
        OnInterrupt::Abandon
    };
    run_interruptibly(py, move || job(&ui), interrupt, |_| Ok(()))
}

impl Watch {
    /// `(done, total)` matrices.
    pub(crate) fn counts(&self) -> (usize, usize) {
        (
            self.done.load(Ordering::Relaxed),
            self.total.load(Ordering::Relaxed),
        )
    }
}

/// What to do with the worker when the caller is interrupted.
pub(crate) enum OnInterrupt {
    /// Ask it to stop between matrices and wait until it has (certify).
    Cancel(Arc<Watch>),
    /// Return at once; the worker finishes on its own and its result is
    /// dropped (one matrix, or a library stage without a cancellation hook).
    Abandon,
}

/// Runs `job` in a worker thread while this thread waits without the
/// interpreter lock, taking it back every [`POLL`] to run `tick` (progress)
/// and the signal handlers: Ctrl-C raises `KeyboardInterrupt` here, as does
/// an exception from `tick`, after `interrupt` is applied. A panic in the
/// library becomes a `RuntimeError` (never a `PanicException`, which
/// `except Exception` does not catch).
pub(crate) fn run_interruptibly<T: Send + 'static>(
    py: Python<'_>,
    job: impl FnOnce() -> T + Send + 'static,
    interrupt: OnInterrupt,
    mut tick: impl FnMut(Python<'_>) -> PyResult<()>,
) -> PyResult<T> {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::Builder::new()
        .name("specbound".into())
        .spawn(move || {
            let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)));
        })
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start a worker thread: {e}")))?;
    let mut rx = rx;
    loop {
        // The receiver goes into the lock-free section and comes back: it is
        // not `Sync`, so it cannot be borrowed there.
        let (back, got) = py.detach(move || {
            let got = rx.recv_timeout(POLL);
            (rx, got)
        });
        rx = back;
        match got {
            Ok(result) => {
                let _ = worker.join();
                let value = result.map_err(|p| {
                    let msg = p
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| p.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "unknown panic".into());
                    PyRuntimeError::new_err(format!(
                        "internal error in specbound (a bug, please report): {msg}"
                    ))
                })?;
                tick(py)?;
                py.check_signals()?;
                return Ok(value);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Err(e) = tick(py).and_then(|()| py.check_signals()) {
                    if let OnInterrupt::Cancel(watch) = &interrupt {
                        watch.cancel.store(true, Ordering::Relaxed);
                        py.detach(move || {
                            let _ = worker.join();
                        });
                    }
                    return Err(e);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(PyRuntimeError::new_err(
                    "internal error in specbound: the worker thread ended without a result",
                ))
            }
        }
    }
}

/// `json.loads(text)`: library values (serde) as Python objects. serde_json
/// writes the shortest decimals that round-trip and Python's parser rounds
/// correctly, so every float arrives exactly.
pub(crate) fn json_to_py<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?.call_method1("loads", (text,))
}

/// `import pandas`, or an `ImportError` that says what needs it.
pub(crate) fn pandas<'py>(py: Python<'py>, what: &str) -> PyResult<Bound<'py, PyModule>> {
    py.import("pandas").map_err(|e| {
        let err = pyo3::exceptions::PyImportError::new_err(format!(
            "{what} returns a pandas DataFrame: install pandas (pip install pandas)"
        ));
        err.set_cause(py, Some(e));
        err
    })
}
