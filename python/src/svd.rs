//! `specbound.svd`: certified singular values of one NumPy array.

use std::path::Path;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use specbound::cmd::defaults;
use specbound::cmd::svd::{MatrixSource, SvdRequest};
use specbound::io::ReadError;
use specbound::linalg::Precision;
use specbound::matrix::SourceDtype;
use specbound::spectral::SchattenP;

use crate::interval::{Interval, RankInterval};
use crate::{
    cmd_error, decimal_arg, error, is_pathlike, model_ref, on_device, run_command, type_name,
};

/// What an array is called in messages (where the command line names its file).
const ARRAY: &str = "array";

/// The certified singular values and norms of one matrix (see :func:`svd`).
///
/// When ``certified`` is ``False`` the values are ``None`` and ``reason``
/// says why; otherwise every :class:`Interval` contains the exact value for
/// the array as stored.
///
/// Example:
///
/// >>> import numpy as np, specbound
/// >>> r = specbound.svd(np.array([[3.0, 0.0], [0.0, 4.0]], dtype=np.float32))
/// >>> r.certified, 4.0 in r.spectral_norm, r.rank.lo
/// (True, True, 2)
#[pyclass(frozen, module = "specbound")]
pub struct SvdResult {
    /// Whether every value below is certified.
    #[pyo3(get)]
    certified: bool,
    /// Why not, when not.
    #[pyo3(get)]
    reason: Option<String>,
    /// Rows of the array.
    #[pyo3(get)]
    rows: usize,
    /// Columns of the array.
    #[pyo3(get)]
    cols: usize,
    /// The NumPy dtype the values were converted from (exactly).
    #[pyo3(get)]
    dtype: String,
    /// The method asked for.
    #[pyo3(get)]
    precision: String,
    /// Lower ends, largest value first (read-only float64 array).
    #[pyo3(get)]
    lo: Option<Py<PyAny>>,
    /// Upper ends, index-matched with `lo`.
    #[pyo3(get)]
    hi: Option<Py<PyAny>>,
    /// One Interval per singular value, largest first.
    #[pyo3(get)]
    singular_values: Option<Vec<Interval>>,
    /// The method that certified each value.
    #[pyo3(get)]
    methods: Option<Vec<String>>,
    /// How many values share each value's enclosure (a certified cluster).
    #[pyo3(get)]
    cluster_sizes: Option<Vec<usize>>,
    /// Trailing values exactly zero by structure.
    #[pyo3(get)]
    structural_zeros: Option<usize>,
    /// sigma_1.
    #[pyo3(get)]
    spectral_norm: Option<Interval>,
    /// Frobenius norm.
    #[pyo3(get)]
    frobenius_norm: Option<Interval>,
    /// Nuclear norm.
    #[pyo3(get)]
    nuclear_norm: Option<Interval>,
    /// (2,1)-norm: the sum of the 2-norms of the columns (second index).
    #[pyo3(get)]
    norm_21: Option<Interval>,
    /// (1,1)-norm: the sum of the absolute values of the entries.
    #[pyo3(get)]
    norm_11: Option<Interval>,
    /// Stable rank; None also when sigma_1 > 0 could not be certified.
    #[pyo3(get)]
    stable_rank: Option<Interval>,
    /// The exact rank's integer bounds.
    #[pyo3(get)]
    rank: Option<RankInterval>,
    /// p -> (Interval of sum sigma^p, Interval of the Schatten norm).
    #[pyo3(get)]
    schatten: Option<Py<PyDict>>,
    /// Largest radius / midpoint over the values (tightness, not a guarantee).
    #[pyo3(get)]
    max_relative_radius: Option<f64>,
    json: Option<String>,
}

#[pymethods]
impl SvdResult {
    /// The result as the command line's ``specbound svd --json`` writes it
    /// (``"input": "array"``); ``ValueError`` when inconclusive.
    ///
    /// >>> import json, numpy as np, specbound
    /// >>> json.loads(specbound.svd(np.eye(3)).to_json())["rank"]
    /// {'lo': 3, 'hi': 3}
    fn to_json(&self) -> PyResult<String> {
        self.json.clone().ok_or_else(|| {
            PyValueError::new_err(format!(
                "nothing certified to write: inconclusive: {}",
                self.reason.as_deref().unwrap_or("")
            ))
        })
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(match (&self.spectral_norm, &self.rank) {
            (Some(s), Some(r)) => format!(
                "SvdResult({} x {} {}, certified, spectral_norm={}, rank=[{}, {}])",
                self.rows,
                self.cols,
                self.dtype,
                s.clone().into_pyobject(py)?.repr()?,
                r.lo,
                r.hi
            ),
            _ => format!(
                "SvdResult({} x {} {}, inconclusive: {})",
                self.rows,
                self.cols,
                self.dtype,
                self.reason.as_deref().unwrap_or("")
            ),
        })
    }
}

/// The array as the library's exact matrix: any 2-D float16/32/64 or
/// integer array, any strides or byte order (NumPy copies it to
/// little-endian row-major bytes, which the `.npy` decoder converts
/// exactly; a 64-bit integer that is not a float64 is refused, not rounded).
fn to_matrix(a: &Bound<'_, PyAny>) -> PyResult<(specbound::io::LoadedMatrix, String)> {
    let py = a.py();
    let np = py.import("numpy")?;
    let ndarray = a.is_instance(&np.getattr("ndarray")?)?;
    let bf16 = ndarray && a.getattr("dtype")?.getattr("name")?.extract::<String>()? == "bfloat16";
    if bf16 || (!ndarray && a.hasattr("__dlpack__")?) {
        return dlpack_matrix(a);
    }
    let arr = np.call_method1("asarray", (a,))?;
    let name = Path::new(ARRAY);
    let shape: Vec<usize> = arr.getattr("shape")?.extract()?;
    let dtype = arr.getattr("dtype")?;
    let dtype_name: String = dtype.getattr("name")?.extract()?;
    let kind: String = dtype.getattr("kind")?.extract()?;
    let itemsize: usize = dtype.getattr("itemsize")?.extract()?;
    let integer = matches!((kind.as_str(), itemsize), ("i" | "u", 1 | 2 | 4 | 8));
    let source = match (kind.as_str(), itemsize) {
        ("f", 2) => SourceDtype::F16,
        ("f", 4) => SourceDtype::F32,
        ("f", 8) => SourceDtype::F64,
        _ if integer => SourceDtype::F64,
        _ => {
            let e = ReadError::UnsupportedDtype {
                path: name.into(),
                tensor: None,
                dtype: dtype_name,
                supported: "float16, float32, float64, and integers (int8 to int64, uint8 to \
                            uint64; 64-bit values only where each is exactly a float64)",
                note: None,
            };
            return Err(error(&e, &[]));
        }
    };
    if shape.len() != 2 {
        let e = ReadError::NotTwoD {
            path: name.into(),
            tensor: None,
            shape,
        };
        return Err(error(&e, &[]));
    }
    if integer {
        // Integers: little-endian bytes, converted exactly or refused
        // (a 64-bit value that is not a float64) by the library.
        let kwargs = PyDict::new(py);
        kwargs.set_item("dtype", format!("<{kind}{itemsize}"))?;
        let le = np.call_method("ascontiguousarray", (arr,), Some(&kwargs))?;
        let bytes = le.call_method0("tobytes")?;
        let bytes = bytes.cast::<PyBytes>()?.as_bytes();
        let m = specbound::io::npy::matrix_from_int_le_bytes(
            name,
            kind == "i",
            itemsize,
            shape[0],
            shape[1],
            bytes,
        )
        .map_err(|e| error(&e, &[]))?;
        return Ok((m, dtype_name));
    }
    let kwargs = PyDict::new(py);
    kwargs.set_item("dtype", format!("<f{itemsize}"))?;
    let le = np.call_method("ascontiguousarray", (arr,), Some(&kwargs))?;
    let bytes = le.call_method0("tobytes")?;
    let bytes = bytes.cast::<PyBytes>()?.as_bytes();
    let m = specbound::io::npy::matrix_from_le_bytes(name, source, shape[0], shape[1], bytes)
        .map_err(|e| error(&e, &[]))?;
    Ok((m, dtype_name))
}

/// A float array that NumPy cannot convert exactly (bfloat16) or that is
/// not NumPy's (a DLPack producer: torch, JAX, CuPy after `.cpu()`), as
/// [`crate::arrays`] reads it: its stored elements, converted exactly.
fn dlpack_matrix(a: &Bound<'_, PyAny>) -> PyResult<(specbound::io::LoadedMatrix, String)> {
    let name = Path::new(ARRAY);
    let arr = crate::arrays::to_array(a, ARRAY)?;
    if arr.shape.len() != 2 {
        let e = ReadError::NotTwoD {
            path: name.into(),
            tensor: None,
            shape: arr.shape.clone(),
        };
        return Err(error(&e, &[]));
    }
    let m = specbound::io::npy::matrix_from_le_bytes(
        name,
        arr.dtype,
        arr.shape[0],
        arr.shape[1],
        arr.bytes(),
    )
    .map_err(|e| error(&e, &[]))?;
    let dtype = match arr.dtype {
        SourceDtype::F16 => "float16",
        SourceDtype::BF16 => "bfloat16",
        SourceDtype::F32 => "float32",
        _ => "float64",
    };
    Ok((m, dtype.to_string()))
}

/// A read-only float64 NumPy array.
fn float_array(py: Python<'_>, values: impl IntoIterator<Item = f64>) -> PyResult<Py<PyAny>> {
    let list = PyList::new(py, values)?;
    let arr = py
        .import("numpy")?
        .call_method1("array", (list, "float64"))?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("write", false)?;
    arr.call_method("setflags", (), Some(&kwargs))?;
    Ok(arr.unbind())
}

/// The NumPy name of a file's storage type as the report names it
/// (`bfloat16` and quantized types, which NumPy lacks, by the library's name).
fn numpy_dtype(d: &str) -> String {
    match d {
        "f16" => "float16".into(),
        "bf16" => "bfloat16".into(),
        "f32" => "float32".into(),
        "f64" => "float64".into(),
        other => other.to_string(),
    }
}

/// The most Schatten exponents one call takes.
const MAX_SCHATTEN_P: usize = 1024;

/// The Schatten exponents of a `schatten_p` argument (default `(1, 2)`),
/// each with the object it was given as (the key of a result's
/// `schatten`): a sequence of exact decimals, at most [`MAX_SCHATTEN_P`].
pub(crate) fn schatten_arg(
    py: Python<'_>,
    schatten_p: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<(Py<PyAny>, SchattenP)>> {
    let mut ps: Vec<(Py<PyAny>, SchattenP)> = Vec::new();
    let given: Vec<Bound<'_, PyAny>> = match schatten_p {
        None => vec![
            1i64.into_pyobject(py)?.into_any(),
            2i64.into_pyobject(py)?.into_any(),
        ],
        Some(seq) if seq.is_instance_of::<pyo3::types::PyString>() => {
            return Err(PyTypeError::new_err(
                "schatten_p must be a sequence of exponents, e.g. (1, 2), not a str",
            ))
        }
        Some(seq) => {
            // Bounded: an endless iterator must not exhaust memory
            // (issue 18, class 15); the CLI takes a list of the same size.
            let mut given = Vec::new();
            for p in seq.try_iter().map_err(|_| {
                PyTypeError::new_err(format!(
                    "schatten_p must be a sequence of exponents, got {}",
                    type_name(seq)
                ))
            })? {
                if given.len() == MAX_SCHATTEN_P {
                    return Err(PyValueError::new_err(format!(
                        "schatten_p: more than {MAX_SCHATTEN_P} exponents"
                    )));
                }
                given.push(p?);
            }
            given
        }
    };
    for p in given {
        let text = decimal_arg(&p, "a Schatten exponent")?;
        let parsed = SchattenP::parse(&text).map_err(PyValueError::new_err)?;
        ps.push((p.unbind(), parsed));
    }
    Ok(ps)
}

/// Certified enclosures of all singular values of a 2-D array, and of its
/// norms, rank and Schatten quantities (the command line's ``specbound svd``).
///
/// ``a`` is anything ``numpy.asarray`` turns into a 2-D float16, float32,
/// float64 or integer array (int8 to int64, uint8 to uint64), in any order,
/// strides or byte order; its values are converted to float64 exactly (a
/// 64-bit integer that no float64 equals is refused with its index, never
/// rounded), and every result is about that exact matrix. Or ``a``
/// is a path (``str`` or ``os.PathLike``) as the command line takes it: a
/// 2-D ``.npy``, a ``.safetensors``, GGUF or PyTorch file, or a model
/// directory or Hugging Face id (``org/name``, in the local cache at
/// ``revision``), with ``tensor`` naming the tensor where the input holds
/// several. ``precision`` is ``"auto"`` (escalate until ``rtol`` is met),
/// ``"f64"``, ``"extended"`` or ``"mpfr:BITS"``; ``schatten_p`` lists the
/// exponents ``p >= 0`` (str as written, float as printed, so ``0.1`` means
/// one tenth; ``0`` is the rank). The computation runs without the
/// interpreter lock; Ctrl-C returns at once with ``KeyboardInterrupt``
/// (the computation under way finishes in the background and is dropped).
///
/// Raises ``ValueError`` for an array that is not 2-D, empty, neither
/// float nor integer, or holds NaN, infinities or an inexact 64-bit integer, and for a bad ``precision``, ``rtol`` or ``p``
/// (``FileNotFoundError`` for a path that does not exist). An array that
/// cannot be certified gives ``certified = False``.
///
/// Example:
///
/// >>> import numpy as np, specbound
/// >>> from fractions import Fraction
/// >>> r = specbound.svd(np.ones((2, 3), dtype=np.float16))
/// >>> r.lo.shape, Fraction(r.spectral_norm.lo) ** 2 <= 6 <= Fraction(r.spectral_norm.hi) ** 2
/// ((2,), True)
#[pyfunction]
#[pyo3(
    signature = (a, *, precision = defaults::SVD_PRECISION, schatten_p = None, rtol = defaults::RTOL, tensor = None, revision = None, device = defaults::DEVICE),
    text_signature = "(a, *, precision='auto', schatten_p=(1, 2), rtol=1e-11, tensor=None, revision=None, device='cpu')"
)]
// Each keyword argument of the Python function is one parameter here (pyo3).
#[allow(clippy::too_many_arguments)]
pub fn svd(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    precision: &str,
    schatten_p: Option<&Bound<'_, PyAny>>,
    rtol: f64,
    tensor: Option<String>,
    revision: Option<&str>,
    device: &str,
) -> PyResult<SvdResult> {
    let prec: Precision = precision.parse().map_err(PyValueError::new_err)?;
    let ps = schatten_arg(py, schatten_p)?;
    let (source, numpy_name) = matrix_source(a, tensor, revision)?;
    let req = SvdRequest {
        source,
        schatten_p: ps.iter().map(|(_, p)| p.clone()).collect(),
        precision: prec,
        rtol,
    };
    let report = on_device(py, device, || {
        run_command(py, false, move |ui| specbound::cmd::svd::run(req, ui))
    })?
    .map_err(|e| cmd_error(&e, &[]))?;
    let (rows, cols) = report.shape;
    let mut r = SvdResult::uncertified(rows, cols, numpy_name.unwrap_or_default(), precision);
    match report.outcome {
        Ok(c) => r.fill(py, &c, &ps)?,
        Err(why) => r.reason = Some(why),
    }
    Ok(r)
}

/// What `svd` certifies: a tensor of a model (a path or a Hugging Face
/// id) or an array (with its NumPy dtype's name).
fn matrix_source(
    a: &Bound<'_, PyAny>,
    tensor: Option<String>,
    revision: Option<&str>,
) -> PyResult<(MatrixSource, Option<String>)> {
    let is_path = a.is_instance_of::<pyo3::types::PyString>() || is_pathlike(a)?;
    if is_path {
        let source = MatrixSource::Model {
            model: model_ref(Some(a), revision)?,
            tensor,
        };
        return Ok((source, None));
    }
    if tensor.is_some() || revision.is_some() {
        return Err(PyValueError::new_err(
            "tensor and revision apply to a path or a Hugging Face id, not to an array",
        ));
    }
    let (matrix, dtype_name) = to_matrix(a)?;
    let source = MatrixSource::Matrix {
        name: ARRAY.into(),
        matrix,
    };
    Ok((source, Some(dtype_name)))
}

impl SvdResult {
    /// A result with nothing certified (yet).
    fn uncertified(rows: usize, cols: usize, dtype: String, precision: &str) -> Self {
        SvdResult {
            certified: false,
            reason: None,
            rows,
            cols,
            dtype,
            precision: precision.to_string(),
            lo: None,
            hi: None,
            singular_values: None,
            methods: None,
            cluster_sizes: None,
            structural_zeros: None,
            spectral_norm: None,
            frobenius_norm: None,
            nuclear_norm: None,
            norm_21: None,
            norm_11: None,
            stable_rank: None,
            rank: None,
            schatten: None,
            max_relative_radius: None,
            json: None,
        }
    }

    /// Everything certified, from the command's answer `c` (the Schatten
    /// quantities keyed as the caller gave the exponents, `ps`).
    fn fill(
        &mut self,
        py: Python<'_>,
        c: &specbound::cmd::svd::SvdCertified,
        ps: &[(Py<PyAny>, SchattenP)],
    ) -> PyResult<()> {
        let r = self;
        if r.dtype.is_empty() {
            r.dtype = numpy_dtype(&c.json.dtype);
        }
        r.json =
            Some(serde_json::to_string(&c.json).map_err(|e| PyValueError::new_err(e.to_string()))?);
        let (sv, summary) = (&c.sv, &c.summary);
        r.certified = true;
        r.lo = Some(float_array(py, sv.values.iter().map(|v| v.enclosure.lo()))?);
        r.hi = Some(float_array(py, sv.values.iter().map(|v| v.enclosure.hi()))?);
        r.singular_values = Some(
            sv.values
                .iter()
                .map(|v| Interval::with_exact(&v.enclosure, v.exact.as_ref()))
                .collect(),
        );
        r.methods = Some(sv.values.iter().map(|v| v.method.name()).collect());
        r.cluster_sizes = Some(sv.values.iter().map(|v| v.cluster_size).collect());
        r.structural_zeros = Some(sv.structural_zeros);
        // sigma_1's MPFR decimals also bound the spectral norm when the
        // summary kept sigma_1's enclosure unchanged.
        let first = sv.values.first();
        let exact_first = first
            .filter(|v| v.enclosure == summary.spectral_norm)
            .and_then(|v| v.exact.as_ref());
        r.spectral_norm = Some(Interval::with_exact(&summary.spectral_norm, exact_first));
        r.frobenius_norm = Some(Interval::of(&summary.frobenius_norm));
        r.nuclear_norm = Some(Interval::of(&summary.nuclear_norm));
        r.norm_21 = Some(Interval::of(&summary.norm_21));
        r.norm_11 = Some(Interval::of(&summary.norm_11));
        r.stable_rank = summary.stable_rank.as_ref().map(Interval::of);
        r.rank = Some(RankInterval {
            lo: summary.rank.lo,
            hi: summary.rank.hi,
        });
        r.schatten = Some(schatten_dict(py, ps, &c.schatten)?);
        r.max_relative_radius = Some(sv.max_rel_rad());
        Ok(())
    }
}

/// The Schatten quantities as `{p: (power, norm)}`, keyed as the caller
/// gave the exponents.
fn schatten_dict(
    py: Python<'_>,
    ps: &[(Py<PyAny>, SchattenP)],
    schatten: &[specbound::spectral::SchattenEnclosure],
) -> PyResult<Py<PyDict>> {
    let dict = PyDict::new(py);
    for ((key, _), s) in ps.iter().zip(schatten) {
        let pair = PyTuple::new(
            py,
            [
                s.power
                    .as_ref()
                    .map(Interval::of)
                    .into_pyobject(py)?
                    .into_any(),
                s.norm
                    .as_ref()
                    .map(Interval::of)
                    .into_pyobject(py)?
                    .into_any(),
            ],
        )?;
        dict.set_item(key.bind(py), pair)?;
    }
    Ok(dict.unbind())
}
