//! Arrays from Python as the exact little-endian bytes of a float tensor,
//! without importing torch: a NumPy array (also an `ml_dtypes.bfloat16`
//! one, read as its raw 16-bit words), a DLPack producer (`__dlpack__`:
//! torch, JAX, CuPy after `.cpu()`), or anything with `__array__`. No value
//! is converted here: the bytes are the stored elements, and the library
//! converts them to f64 exactly when it reads a matrix
//! (`proofs/exact-conversion.md`, L1).
//!
//! A C-contiguous array is borrowed, not copied; a strided one is gathered
//! into one buffer, after the one rule of every strided source
//! ([`specbound::io::limits::view_materialised_bytes`]): a view that would
//! materialise more bytes than the span of memory its strides reach (a
//! stride of 0, as `broadcast_to` or `expand` make, or overlapping
//! strides) is refused before anything is allocated. A DLPack producer
//! that lies about its pointer or strides cannot be detected by any
//! consumer (docs/python.md). Integer, bool and complex arrays are
//! refused, naming the key.

use std::ffi::c_void;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods, PyDict};

use specbound::io::memory::MEMORY_LABEL;
use specbound::io::ReadError;
use specbound::matrix::SourceDtype;

/// What an array may hold.
const SUPPORTED: &str = "float16, bfloat16, float32, float64";

/// One array's elements as stored, with what keeps them alive.
pub(crate) struct Array {
    /// The element type.
    pub dtype: SourceDtype,
    /// The shape.
    pub shape: Vec<usize>,
    data: Data,
    /// The Python objects that own borrowed memory (an array, a capsule).
    _keep: Py<PyAny>,
}

enum Data {
    /// Memory owned by `_keep`: a pointer and a length in bytes.
    Borrowed(*const u8, usize),
    /// A gathered copy.
    Owned(Vec<u8>),
}

impl Array {
    /// The elements, row-major, little-endian.
    pub fn bytes(&self) -> &[u8] {
        match &self.data {
            // SAFETY: the pointer and length describe the buffer of the
            // array or DLPack tensor that `_keep` owns, which lives as
            // long as `self`; a zero length is never dereferenced.
            Data::Borrowed(p, n) if *n > 0 => unsafe { std::slice::from_raw_parts(*p, *n) },
            Data::Borrowed(..) => &[],
            Data::Owned(v) => v,
        }
    }
}

/// A one-line error about the tensor `key` of a model in memory.
fn tensor_error(key: &str, msg: impl Into<String>) -> PyErr {
    let e = ReadError::Format {
        path: MEMORY_LABEL.into(),
        tensor: Some(key.to_string()),
        message: msg.into(),
    };
    crate::error(&e, &[])
}

fn unsupported(key: &str, dtype: String) -> PyErr {
    let e = ReadError::UnsupportedDtype {
        path: MEMORY_LABEL.into(),
        tensor: Some(key.to_string()),
        dtype,
        supported: SUPPORTED,
        note: None,
    };
    crate::error(&e, &[])
}

/// The array `obj` (the value of `key`): a NumPy array as it is; else by
/// DLPack when it has `__dlpack__`; else `numpy.asarray` of it when it has
/// `__array__`.
pub(crate) fn to_array(obj: &Bound<'_, PyAny>, key: &str) -> PyResult<Array> {
    let py = obj.py();
    let np = py.import("numpy")?;
    if obj.is_instance(&np.getattr("ndarray")?)? {
        return from_numpy(&np, obj, key);
    }
    if obj.hasattr("__dlpack__")? {
        return from_dlpack(obj, key);
    }
    if obj.hasattr("__array__")? {
        let arr = np.call_method1("asarray", (obj,))?;
        return from_numpy(&np, &arr, key);
    }
    Err(PyTypeError::new_err(format!(
        "{MEMORY_LABEL}: tensor '{}': expected an array (NumPy, or an object with __dlpack__ \
         or __array__), got {}",
        specbound::io::escape(key),
        crate::type_name(obj)
    )))
}

/// Refuses a strided view of `key` that would materialise more bytes than
/// the span its strides reach (`strides` in units of `unit` bytes), before
/// anything is gathered.
fn check_view(key: &str, shape: &[usize], strides: &[i64], unit: u64, item: u64) -> PyResult<()> {
    use specbound::io::limits::{strided_span_bytes, view_materialised_bytes};
    // The span in bytes: the reach of the strides, then the last element.
    let span = strided_span_bytes(shape, strides, unit)
        .and_then(|b| b.checked_add(item.saturating_sub(unit)))
        .ok_or_else(|| tensor_error(key, format!("strides {strides:?} overflow")))?;
    let span = if shape.contains(&0) { 0 } else { span };
    view_materialised_bytes(
        shape,
        item,
        span,
        "the memory its strides reach",
        "pass a contiguous copy (numpy.ascontiguousarray, tensor.contiguous()) instead",
    )
    .map_err(|m| tensor_error(key, m))?;
    Ok(())
}

/// A NumPy array: its dtype (bfloat16 of ml_dtypes as its raw words), its
/// view checked ([`check_view`]), made C-contiguous little-endian (no copy
/// when it already is), and borrowed.
fn from_numpy(np: &Bound<'_, PyModule>, arr: &Bound<'_, PyAny>, key: &str) -> PyResult<Array> {
    let dtype = arr.getattr("dtype")?;
    let name: String = dtype.getattr("name")?.extract()?;
    let kind: String = dtype.getattr("kind")?.extract()?;
    let itemsize: usize = dtype.getattr("itemsize")?.extract()?;
    let (source, le) = match (kind.as_str(), itemsize) {
        _ if name == "bfloat16" && itemsize == 2 => (SourceDtype::BF16, "<u2"),
        ("f", 2) => (SourceDtype::F16, "<f2"),
        ("f", 4) => (SourceDtype::F32, "<f4"),
        ("f", 8) => (SourceDtype::F64, "<f8"),
        // Integer and bool buffers: carried as on disk, never a proxy.
        ("i", 1) => (SourceDtype::Int("I8"), "<i1"),
        ("i", 2) => (SourceDtype::Int("I16"), "<i2"),
        ("i", 4) => (SourceDtype::Int("I32"), "<i4"),
        ("i", 8) => (SourceDtype::Int("I64"), "<i8"),
        ("u", 1) | ("b", 1) => (SourceDtype::Int("U8"), "<u1"),
        ("u", 2) => (SourceDtype::Int("U16"), "<u2"),
        ("u", 4) => (SourceDtype::Int("U32"), "<u4"),
        ("u", 8) => (SourceDtype::Int("U64"), "<u8"),
        _ => return Err(unsupported(key, name)),
    };
    let shape: Vec<usize> = arr.getattr("shape")?.extract()?;
    let strides: Vec<i64> = arr.getattr("strides")?.extract()?;
    check_view(key, &shape, &strides, 1, itemsize as u64)?;
    let arr = if source == SourceDtype::BF16 {
        arr.call_method1("view", (np.getattr("uint16")?,))?
    } else {
        arr.clone()
    };
    let kwargs = PyDict::new(arr.py());
    kwargs.set_item("dtype", le)?;
    let c = np.call_method("ascontiguousarray", (arr,), Some(&kwargs))?;
    let nbytes: usize = c.getattr("nbytes")?.extract()?;
    let ptr: usize = c
        .getattr("__array_interface__")?
        .get_item("data")?
        .get_item(0)?
        .extract()?;
    Ok(Array {
        dtype: source,
        shape,
        data: Data::Borrowed(ptr as *const u8, nbytes),
        _keep: c.unbind(),
    })
}

/// DLPack's `DLDevice`.
#[repr(C)]
#[derive(Clone, Copy)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

/// DLPack's `DLDataType`.
#[repr(C)]
#[derive(Clone, Copy)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

/// DLPack's `DLTensor`.
#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *const i64,
    strides: *const i64,
    byte_offset: u64,
}

/// DLPack's `DLManagedTensor` (the unversioned capsule `dltensor`).
#[repr(C)]
struct DlManagedTensor {
    dl_tensor: DlTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensor)>,
}

/// DLPack device types whose memory this process can read.
const KDL_CPU: i32 = 1;
const KDL_CUDA_HOST: i32 = 3;
const KDL_CUDA_MANAGED: i32 = 13;

fn device_name(t: i32) -> String {
    match t {
        2 => "CUDA".into(),
        4 => "OpenCL".into(),
        7 => "Vulkan".into(),
        8 => "Metal".into(),
        9 => "VPI".into(),
        10 => "ROCm".into(),
        14 => "oneAPI".into(),
        other => format!("DLPack device type {other}"),
    }
}

fn check_device(key: &str, t: i32) -> PyResult<()> {
    if matches!(t, KDL_CPU | KDL_CUDA_HOST | KDL_CUDA_MANAGED) {
        return Ok(());
    }
    Err(tensor_error(
        key,
        format!(
            "the array is on the {} device, not in this process's memory: call .cpu() first",
            device_name(t)
        ),
    ))
}

/// A DLPack producer: the device checked (before export, when it says
/// it), the tensor borrowed when C-contiguous, else gathered by its
/// strides. The capsule is kept, unconsumed, so that its destructor frees
/// the tensor when the array is dropped.
fn from_dlpack(obj: &Bound<'_, PyAny>, key: &str) -> PyResult<Array> {
    if obj.hasattr("__dlpack_device__")? {
        let (t, _id): (i32, i32) = obj.call_method0("__dlpack_device__")?.extract()?;
        check_device(key, t)?;
    }
    let cap = obj.call_method0("__dlpack__")?;
    let capsule = cap
        .cast::<PyCapsule>()
        .map_err(|_| tensor_error(key, "__dlpack__ did not return a DLPack capsule"))?;
    let ptr = capsule
        .pointer_checked(Some(c"dltensor"))
        .map_err(|_| tensor_error(key, "__dlpack__ did not return a 'dltensor' capsule"))?;
    // SAFETY: a capsule named `dltensor` holds a `DLManagedTensor` (the
    // DLPack protocol), valid until the capsule's destructor runs; the
    // capsule is kept in the returned array.
    let t = unsafe { &(*ptr.as_ptr().cast::<DlManagedTensor>()).dl_tensor };
    check_device(key, t.device.device_type)?;
    let source = dlpack_dtype(key, t.dtype)?;
    let ndim = usize::try_from(t.ndim).map_err(|_| tensor_error(key, "negative ndim"))?;
    // SAFETY: DLPack: `shape` holds `ndim` entries, `strides` is NULL (C
    // order) or holds `ndim` entries, both valid while the capsule lives.
    let dims: &[i64] = if ndim == 0 {
        &[]
    } else {
        unsafe { std::slice::from_raw_parts(t.shape, ndim) }
    };
    let strides: Option<&[i64]> = if t.strides.is_null() || ndim == 0 {
        None
    } else {
        Some(unsafe { std::slice::from_raw_parts(t.strides, ndim) })
    };
    let shape: Vec<usize> = dims
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<Result<_, _>>()
        .map_err(|_| tensor_error(key, format!("negative dimension in shape {dims:?}")))?;
    let item = source.itemsize();
    let count = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .and_then(|n| n.checked_mul(item))
        .ok_or_else(|| tensor_error(key, format!("shape {shape:?} overflows")))?;
    let base = (t.data as *const u8).wrapping_add(t.byte_offset as usize);
    let data = match strides {
        Some(s) if count != 0 && !c_contiguous(dims, s) => {
            check_view(key, &shape, s, item as u64, item as u64)?;
            Data::Owned(gather(key, base, &shape, s, item, count)?)
        }
        _ => Data::Borrowed(base, count),
    };
    Ok(Array {
        dtype: source,
        shape,
        data,
        _keep: cap.unbind(),
    })
}

/// The source type of a DLPack dtype (floats certified; integer and bool
/// buffers, such as `position_ids`, carried as on disk); anything else
/// refused, naming it.
fn dlpack_dtype(key: &str, dt: DlDataType) -> PyResult<SourceDtype> {
    Ok(match (dt.code, dt.bits, dt.lanes) {
        (2, 16, 1) => SourceDtype::F16,
        (2, 32, 1) => SourceDtype::F32,
        (2, 64, 1) => SourceDtype::F64,
        (4, 16, 1) => SourceDtype::BF16,
        (0, 8, 1) => SourceDtype::Int("I8"),
        (0, 16, 1) => SourceDtype::Int("I16"),
        (0, 32, 1) => SourceDtype::Int("I32"),
        (0, 64, 1) => SourceDtype::Int("I64"),
        (1, 8, 1) | (6, 8, 1) => SourceDtype::Int("U8"),
        (1, 16, 1) => SourceDtype::Int("U16"),
        (1, 32, 1) => SourceDtype::Int("U32"),
        (1, 64, 1) => SourceDtype::Int("U64"),
        (code, bits, lanes) => {
            let kind = match code {
                0 => format!("int{bits}"),
                1 => format!("uint{bits}"),
                2 => format!("float{bits}"),
                4 => format!("bfloat{bits}"),
                5 => format!("complex{bits}"),
                6 => "bool".into(),
                other => format!("DLPack type code {other}, {bits} bits"),
            };
            let kind = if lanes == 1 {
                kind
            } else {
                format!("{kind} x{lanes} lanes")
            };
            return Err(unsupported(key, kind));
        }
    })
}

/// Whether `strides` (in elements) are C order for `dims`; a dimension of
/// size 1 may have any stride.
fn c_contiguous(dims: &[i64], strides: &[i64]) -> bool {
    let mut want: i64 = 1;
    let mut ok = true;
    for (&d, &st) in dims.iter().zip(strides).rev() {
        if d != 1 && st != want {
            ok = false;
        }
        want = want.saturating_mul(d);
    }
    ok
}

/// A C-order copy of the `count` bytes of a strided view at `base`
/// (strides in elements of `item` bytes, checked by `check_view` to stay
/// within the shape); `MemoryError` when the copy cannot be allocated.
fn gather(
    key: &str,
    base: *const u8,
    shape: &[usize],
    strides: &[i64],
    item: usize,
    count: usize,
) -> PyResult<Vec<u8>> {
    let mut out = Vec::new();
    out.try_reserve_exact(count).map_err(|_| {
        pyo3::exceptions::PyMemoryError::new_err(format!(
            "{MEMORY_LABEL}: tensor '{}': cannot allocate the {count} bytes of its gathered copy",
            specbound::io::escape(key)
        ))
    })?;
    let ndim = shape.len();
    let mut idx = vec![0usize; ndim];
    for _ in 0..count / item {
        let off: i64 = idx.iter().zip(strides).map(|(&i, &st)| i as i64 * st).sum();
        let p = base.wrapping_offset(off as isize * item as isize);
        // SAFETY: every index is within the shape, so the element lies in
        // the producer's buffer (DLPack strides are in elements).
        out.extend_from_slice(unsafe { std::slice::from_raw_parts(p, item) });
        for k in (0..ndim).rev() {
            idx[k] += 1;
            if idx[k] < shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    Ok(out)
}

/// The arrays of a mapping `name -> array-like` (a `dict`, a torch
/// `state_dict`, any object with `items()`), each converted by
/// [`to_array`]; names must be `str`.
pub(crate) fn mapping_arrays(model: &Bound<'_, PyAny>) -> PyResult<Vec<(String, Array)>> {
    let items = model.call_method0("items")?;
    let mut out = Vec::new();
    for item in items.try_iter()? {
        let item = item?;
        let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
        let key: String = k.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "model: a mapping of tensor names (str) to arrays, got a key of type {}",
                crate::type_name(&k)
            ))
        })?;
        let a = to_array(&v, &key)?;
        out.push((key, a));
    }
    Ok(out)
}

/// A `config` argument as JSON: a `dict` as in `config.json`, or an object
/// with `to_dict()` (a transformers config); converted with `json.dumps`,
/// so only JSON values are accepted.
pub(crate) fn config_json(config: &Bound<'_, PyAny>) -> PyResult<serde_json::Value> {
    let py = config.py();
    let d = if config.is_instance_of::<PyDict>() {
        config.clone()
    } else if config.hasattr("to_dict")? {
        config.call_method0("to_dict")?
    } else {
        return Err(PyTypeError::new_err(format!(
            "config must be a dict (as in config.json) or an object with to_dict() (a \
             transformers config), got {}",
            crate::type_name(config)
        )));
    };
    let kwargs = PyDict::new(py);
    // NaN and infinities are not JSON: refused here, naming the key (not
    // a column of a JSON text the user never saw).
    kwargs.set_item("allow_nan", false)?;
    let text: String = match py
        .import("json")?
        .call_method("dumps", (&d,), Some(&kwargs))
    {
        Ok(t) => t.extract()?,
        Err(e) => {
            let msg = match non_finite(&d, "", 0)? {
                Some((key, v)) => format!(
                    "config: key '{}' is {v}, not a JSON number (JSON has no NaN or infinity)",
                    specbound::io::escape(&key)
                ),
                None => format!("config: not JSON: {e}"),
            };
            return Err(PyValueError::new_err(msg));
        }
    };
    serde_json::from_str(&text).map_err(|e| PyValueError::new_err(format!("config: {e}")))
}

/// The first non-finite float in a config (dicts and lists walked to a
/// bounded depth), as its dotted key path (`text_config.rope_theta`, list
/// items by index) and its value as Python writes it.
fn non_finite(
    v: &Bound<'_, PyAny>,
    path: &str,
    depth: usize,
) -> PyResult<Option<(String, String)>> {
    use pyo3::types::{PyFloat, PyList, PyTuple};
    if depth > 64 {
        return Ok(None);
    }
    let join = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    if let Ok(f) = v.cast::<PyFloat>() {
        let x = f.value();
        return Ok((!x.is_finite()).then(|| (path.to_string(), x.to_string())));
    }
    if let Ok(dict) = v.cast::<PyDict>() {
        for (k, item) in dict.iter() {
            if let Some(found) = non_finite(&item, &join(&k.str()?.to_string_lossy()), depth + 1)? {
                return Ok(Some(found));
            }
        }
    } else if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        for (i, item) in v.try_iter()?.enumerate() {
            if let Some(found) = non_finite(&item?, &join(&i.to_string()), depth + 1)? {
                return Ok(Some(found));
            }
        }
    }
    Ok(None)
}

/// A model in memory from a mapping of arrays and a config: the tensors are
/// copied once, into their safetensors serialisation.
pub(crate) fn memory_model(
    model: &Bound<'_, PyAny>,
    config: Option<&Bound<'_, PyAny>>,
) -> PyResult<specbound::io::memory::MemoryModel> {
    let arrays = mapping_arrays(model)?;
    let config = config.map(config_json).transpose()?;
    let tensors: Vec<specbound::io::memory::MemoryTensor<'_>> = arrays
        .iter()
        .map(|(name, a)| specbound::io::memory::MemoryTensor {
            name,
            dtype: a.dtype,
            shape: &a.shape,
            data: a.bytes(),
        })
        .collect();
    specbound::io::memory::MemoryModel::new(&tensors, config).map_err(|e| crate::error(&e, &[]))
}
