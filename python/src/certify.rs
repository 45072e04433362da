//! `specbound.certify`, `specbound.load` and the `Certificate` they return.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict};

use specbound::arch::ArchOverrides;
use specbound::certificate::{CertInterval, Certificate as Cert, SpectrumEntry};
use specbound::certify::CertifyOptions;
use specbound::cmd::certify::{Certified, CertifyRequest};
use specbound::cmd::defaults;
use specbound::cmd::{CertInput, CmdError};
use specbound::io::output::Outputs;
use specbound::linalg::Precision;
use specbound::report::csv::{tables, TABLE_NAMES};

use crate::interval::Interval;
use crate::{
    cmd_error, error, json_to_py, l_phi_arg, pandas, path_arg, positive, run_interruptibly,
    OnInterrupt, PyUi, Watch,
};

/// The two certified bounds of a certificate: ``ours`` (B_ours) and
/// ``edelman`` (B_Edel), each an :class:`Interval`.
///
/// Example:
///
/// >>> import specbound
/// >>> b = specbound.certify().bounds
/// >>> b.ours.lo <= b.ours.hi
/// True
#[pyclass(frozen, eq, module = "specbound")]
#[derive(Clone, PartialEq)]
pub struct Bounds {
    /// Encloses B_ours.
    #[pyo3(get)]
    ours: Interval,
    /// Encloses B_Edel.
    #[pyo3(get)]
    edelman: Interval,
}

#[pymethods]
impl Bounds {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Bounds(ours={}, edelman={})",
            self.ours.clone().into_pyobject(py)?.repr()?,
            self.edelman.clone().into_pyobject(py)?.repr()?
        ))
    }
}

/// A certificate: every proxy matrix's certified spectrum and norms, and the
/// bounds (the command line's ``specbound certify``), or, when
/// ``certified`` is ``False``, the reason nothing could be certified.
///
/// ``to_json()`` and ``save(path)`` give exactly what
/// ``specbound certify --json`` / ``--out`` write; ``matrices()``,
/// ``contributions()``, ``singular_values()`` and ``tables()`` give pandas
/// DataFrames in the authors' column names: each certified column holds the
/// midpoint, with the certified ends beside it in ``<column>_lo`` and
/// ``<column>_hi`` (the ``--csv`` tables).
///
/// Example:
///
/// >>> import specbound
/// >>> cert = specbound.certify()
/// >>> cert.certified, len(cert.matrices())
/// (True, 156)
#[pyclass(frozen, module = "specbound")]
pub struct Certificate {
    cert: Option<Cert>,
    /// Why nothing was certified, when not.
    #[pyo3(get)]
    reason: Option<String>,
    /// The model_id column of the observed-bounds table.
    model_id: String,
}

impl Certificate {
    fn inner(&self, what: &str) -> PyResult<&Cert> {
        self.cert.as_ref().ok_or_else(|| {
            PyValueError::new_err(format!(
                "no certificate to {what}: inconclusive: {}",
                self.reason.as_deref().unwrap_or("")
            ))
        })
    }

    /// A certificate or a certificate file as a command's input: a file is
    /// read by the command (strictly), a `Certificate` object is handed over.
    pub(crate) fn cert_input(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<CertInput> {
        if let Ok(c) = obj.cast::<Certificate>() {
            let cert = c.get().inner("compare")?.clone();
            return Ok(CertInput::Loaded {
                name: "certificate".into(),
                cert: Box::new(cert),
            });
        }
        Ok(CertInput::File(path_arg(obj, what)?))
    }

    /// A certificate (certified, or inconclusive with the reason) with the
    /// model_id of its tables.
    pub(crate) fn new(cert: Result<Cert, String>, model_id: String) -> Self {
        match cert {
            Ok(c) => Certificate {
                cert: Some(c),
                reason: None,
                model_id,
            },
            Err(why) => Certificate {
                cert: None,
                reason: Some(why),
                model_id,
            },
        }
    }

    fn table<'py>(&self, py: Python<'py>, name: &str, what: &str) -> PyResult<Bound<'py, PyAny>> {
        let pd = pandas(py, what)?;
        let cert = self.inner("tabulate")?;
        let text = tables(cert, &self.model_id)
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| t)
            .expect("a table of the layout");
        read_csv(py, &pd, &text)
    }
}

/// A CSV table of the library (`report::csv`, the authors' layout) as a
/// DataFrame. The cells are parsed here, not by pandas, so that every
/// number is exactly the float written (the tables hold shortest
/// round-trip decimals; Rust's parser rounds correctly, and pandas' did not
/// before 3.0): a column of integers becomes integers, a column of numbers
/// (empty cells: NaN) floats, anything else strings. The tables quote
/// nothing (`report::csv` writes no comma inside a cell).
fn read_csv<'py>(
    py: Python<'py>,
    pd: &Bound<'py, PyModule>,
    text: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let mut columns: Vec<Vec<&str>> = vec![Vec::new(); header.len()];
    for line in lines {
        for (col, cell) in columns.iter_mut().zip(line.split(',')) {
            col.push(cell);
        }
    }
    frame_of(py, pd, &header, &columns)
}

/// A DataFrame of CSV columns, each typed as [`read_csv`] says (a number
/// too large for a float64, such as a decimal bound `1.5e400`, keeps its
/// column as strings: it is never read as infinity; an empty cell of a
/// column of strings is None).
pub(crate) fn frame_of<'py, S: AsRef<str>>(
    py: Python<'py>,
    pd: &Bound<'py, PyModule>,
    header: &[S],
    columns: &[Vec<S>],
) -> PyResult<Bound<'py, PyAny>> {
    let frame = PyDict::new(py);
    for (name, cells) in header.iter().zip(columns) {
        let (name, cells): (&str, Vec<&str>) =
            (name.as_ref(), cells.iter().map(AsRef::as_ref).collect());
        let ints: Option<Vec<i64>> = cells.iter().map(|c| c.parse().ok()).collect();
        let floats: Option<Vec<f64>> = cells
            .iter()
            .map(|c| {
                if c.is_empty() {
                    Some(f64::NAN)
                } else {
                    c.parse::<f64>().ok().filter(|v| v.is_finite())
                }
            })
            .collect();
        match (ints, floats) {
            (Some(v), _) if !cells.is_empty() => frame.set_item(name, v)?,
            (_, Some(v)) if !cells.is_empty() => frame.set_item(name, v)?,
            // Text, an empty cell missing (None), as pandas.read_csv reads it.
            _ => frame.set_item(
                name,
                cells
                    .iter()
                    .map(|c| (!c.is_empty()).then_some(*c))
                    .collect::<Vec<_>>(),
            )?,
        }
    }
    pd.call_method1("DataFrame", (frame,))
}

fn read(path: &Path) -> PyResult<Cert> {
    Cert::read(path).map_err(|e| error(&e, &[path]))
}

/// The options of a certification, as the command line's flags give them
/// (`--l-phi`, `--grid-m`, `--precision`, `--heads`, `--layers`, `--stack`).
pub(crate) fn certify_options(
    l_phi: Option<&Bound<'_, PyAny>>,
    grid_m: Option<i64>,
    precision: &str,
    heads: Option<i64>,
    layers: Option<i64>,
    stack: Option<String>,
) -> PyResult<CertifyOptions> {
    let l_phi = l_phi_arg(l_phi)?;
    let precision: Precision = precision.parse().map_err(PyValueError::new_err)?;
    let grid_m = match grid_m {
        Some(m) if m < 1 => {
            return Err(PyValueError::new_err(format!(
                "grid m must be between 1 and {}, got {m}",
                specbound::certificate::MAX_GRID_M
            )))
        }
        m => m.map(|m| m as usize),
    };
    Ok(CertifyOptions {
        precision,
        l_phi,
        grid_m,
        overrides: ArchOverrides {
            heads: positive(heads, "heads")?,
            layers: positive(layers, "layers")?,
            stack,
        },
    })
}

/// Whether a command ended because it was cancelled (Ctrl-C).
pub(crate) fn cancelled(e: &CmdError) -> bool {
    e.kind() == specbound::cmd::ErrorKind::Cancelled
}

#[pymethods]
impl Certificate {
    /// Whether this is a certificate (else see ``reason``).
    #[getter]
    fn certified(&self) -> bool {
        self.cert.is_some()
    }

    /// The bounds B_ours and B_Edel (``None`` when inconclusive, or when
    /// the model's family has no bound: see the certificate's ``bound_absent``).
    ///
    /// >>> import specbound
    /// >>> 0 < specbound.certify().bounds.edelman.lo
    /// True
    #[getter]
    fn bounds(&self) -> Option<Bounds> {
        let b = self.cert.as_ref()?.bounds.as_ref()?;
        Some(Bounds {
            ours: Interval::of_cert(&b.ours),
            edelman: Interval::of_cert(&b.edelman),
        })
    }

    /// The norm-based measures (``certify(..., measures=True)`` or
    /// ``init=...``; ``docs/measures.md``) as a dict of name -> certified
    /// :class:`Interval`; ``None`` when the certificate has none.
    ///
    /// >>> import specbound
    /// >>> specbound.certify().measures is None
    /// True
    #[getter]
    fn measures<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(m) = self.cert.as_ref().and_then(|c| c.measures.as_ref()) else {
            return Ok(None);
        };
        let d = PyDict::new(py);
        for (name, x) in m.stated() {
            d.set_item(name, Interval::of_cert(&x))?;
        }
        Ok(Some(d))
    }

    /// The certificate JSON, exactly as ``specbound certify --out`` writes it.
    ///
    /// >>> import json, specbound
    /// >>> json.loads(specbound.certify().to_json())["format"]
    /// 'specbound-certificate'
    fn to_json(&self) -> PyResult<String> {
        Ok(self.inner("write")?.to_json_pretty())
    }

    /// The certificate as Python objects (``json.loads(to_json())``).
    ///
    /// >>> import specbound
    /// >>> specbound.certify().to_dict()["model"]["architecture"]
    /// 'bert'
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_to_py(py, &self.to_json()?)
    }

    /// Writes the certificate JSON to ``path`` atomically (all or nothing,
    /// as ``specbound certify --out``).
    ///
    /// >>> import os, tempfile, specbound
    /// >>> path = os.path.join(tempfile.mkdtemp(), "cert.json")
    /// >>> specbound.certify().save(path); os.path.getsize(path) > 0
    /// True
    fn save(&self, path: &Bound<'_, PyAny>) -> PyResult<()> {
        let path = path_arg(path, "path")?;
        let doc = self.inner("save")?.to_json_pretty();
        let mut out = Outputs::new();
        out.stage(&path, doc.as_bytes());
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        out.commit().map_err(|e| error(&e, &[&parent]))
    }

    /// One row per proxy matrix: the authors' ``matrix_summary`` table
    /// (``specbound certify --csv``): ``layer``, ``head`` (-1 for layer
    /// matrices), ``matrix_type``, ``rows``, ``cols``, the rank and the
    /// norms, each as midpoint, ``_lo`` and ``_hi``. For a family without a
    /// bound (mixtures of experts, decoder stacks, DeBERTa), one row per
    /// matrix of its ``spectra``, with an ``expert`` column when the model
    /// has experts. Needs pandas.
    ///
    /// >>> import specbound
    /// >>> df = specbound.certify().matrices()
    /// >>> bool((df.spectral_norm_lo <= df.spectral_norm_hi).all())
    /// True
    fn matrices<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.table(py, "matrix_summary.csv", "Certificate.matrices()")
    }

    /// One row per proxy matrix and grid point p: the authors'
    /// ``p_contribution_raw`` table (``contribution``, ``_lo``, ``_hi``).
    /// Needs pandas.
    ///
    /// >>> import specbound
    /// >>> list(specbound.certify().contributions().columns)[-3:]
    /// ['contribution', 'contribution_lo', 'contribution_hi']
    fn contributions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.table(py, "p_contribution_raw.csv", "Certificate.contributions()")
    }

    /// One row per singular value of every proxy matrix, largest first
    /// (``i`` from 0, structural zeros included): ``layer``, ``head``,
    /// ``matrix_type``, ``i``, ``singular_value`` (midpoint),
    /// ``singular_value_lo``, ``singular_value_hi``; for a family without a
    /// bound, of every matrix of its ``spectra``, with an ``expert`` column
    /// (``""`` for no expert) when the model has experts. Needs pandas.
    ///
    /// >>> import specbound
    /// >>> df = specbound.certify().singular_values()
    /// >>> int(df.query("layer == 0 and matrix_type == 'M_in'").shape[0])
    /// 384
    fn singular_values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let pd = pandas(py, "Certificate.singular_values()")?;
        let cert = self.inner("tabulate")?;
        let spectra: Vec<SpectrumEntry> = match &cert.spectra {
            Some(s) => s.clone(),
            None => cert.matrices.iter().map(|m| m.spectrum()).collect(),
        };
        let n: usize = spectra.iter().map(|m| m.rows.min(m.cols)).sum();
        let experts = specbound::report::csv::has_experts(cert);
        let mut expert = Vec::with_capacity(if experts { n } else { 0 });
        let (mut layer, mut head, mut kind, mut index) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        let (mut mid, mut lo, mut hi) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        for m in &spectra {
            let id = m.id();
            for i in 0..m.rows.min(m.cols) {
                // Past the nonzero values, the structural zeros.
                let v = m
                    .singular_values
                    .get(i)
                    .copied()
                    .unwrap_or(CertInterval::point(0.0));
                if experts {
                    expert.push(
                        id.expert
                            .map(specbound::report::csv::expert_cell)
                            .unwrap_or_default(),
                    );
                }
                layer.push(id.layer);
                head.push(id.head_column());
                kind.push(id.kind.name());
                index.push(i);
                mid.push(v.mid());
                lo.push(v.lo);
                hi.push(v.hi);
            }
        }
        let cols = PyDict::new(py);
        cols.set_item("layer", layer)?;
        cols.set_item("head", head)?;
        cols.set_item("matrix_type", kind)?;
        cols.set_item("i", index)?;
        cols.set_item("singular_value", mid)?;
        cols.set_item("singular_value_lo", lo)?;
        cols.set_item("singular_value_hi", hi)?;
        if experts {
            cols.set_item("expert", expert)?;
        }
        pd.call_method1("DataFrame", (cols,))
    }

    /// The four tables of ``specbound certify --csv`` as DataFrames, by file
    /// name (``matrix_summary.csv``, ``schatten_opt.csv``,
    /// ``observed_bounds.csv``, ``p_contribution_raw.csv``). ``model_id``
    /// fills the observed-bounds table's column (default: the model
    /// directory's name). Needs pandas.
    ///
    /// >>> import specbound
    /// >>> specbound.certify().tables()["observed_bounds.csv"].bound.tolist()
    /// ['ours', 'edelman']
    #[pyo3(signature = (model_id = None))]
    fn tables<'py>(
        &self,
        py: Python<'py>,
        model_id: Option<String>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let pd = pandas(py, "Certificate.tables()")?;
        let cert = self.inner("tabulate")?;
        let id = model_id.unwrap_or_else(|| self.model_id.clone());
        let out = PyDict::new(py);
        for (name, text) in tables(cert, &id) {
            out.set_item(name, read_csv(py, &pd, &text)?)?;
        }
        debug_assert_eq!(out.len(), TABLE_NAMES.len());
        Ok(out)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(match &self.cert {
            Some(c) => format!(
                "Certificate({} {}, {} matrices, {})",
                c.model.architecture,
                c.model.path,
                c.matrices.len(),
                self.bounds()
                    .expect("certified")
                    .into_pyobject(py)?
                    .repr()?
            ),
            None => format!(
                "Certificate(inconclusive: {})",
                self.reason.as_deref().unwrap_or("")
            ),
        })
    }
}

/// How progress is shown.
enum Sink {
    Off,
    Stderr,
    Call(Py<PyAny>),
}

/// Certifies a whole checkpoint: extracts the proxy matrices, certifies
/// their spectra and norms, and evaluates the bounds B_ours and B_Edel (the
/// command line's ``specbound certify``).
///
/// ``model`` is what the command line takes: a Hugging Face model directory
/// (config.json and safetensors, sharded or not, or pytorch_model.bin), a
/// ``.safetensors``, PyTorch or ``.gguf`` file, or a Hugging Face id
/// (``org/name``) in the local cache, at ``revision`` (a branch, tag or
/// commit; default main), never downloaded; ``None`` is the bundled
/// all-MiniLM-L6-v2. ``model`` may also be held in memory: a mapping of
/// tensor names to arrays (a ``dict`` of NumPy arrays, a torch
/// ``state_dict``: anything with ``__dlpack__`` on the CPU or
/// ``__array__``; float16, bfloat16, float32 or float64, read exactly),
/// with ``config`` a ``dict`` as in ``config.json`` or a transformers
/// config (``to_dict()``). Its certificate is that of the same tensors
/// saved as ``model.safetensors`` beside that ``config.json``, except the
/// file section: ``model.path`` and ``model.files[0].file`` are
/// ``"<memory>"`` and the hash is that of the tensors' safetensors
/// serialisation (what ``safetensors.numpy.save_file`` writes for the same
/// dict). ``l_phi`` (the activation's Lipschitz constant) is
/// read as an exact decimal (str as written, float as printed); ``grid_m``
/// overrides the grid resolution; ``precision`` is ``"f64"``,
/// ``"extended"``, ``"auto"`` or ``"mpfr:BITS"``; ``heads`` and ``layers``
/// override the architecture of a file without config.json; ``stack``
/// names the stack of blocks of a model of several (``certify --stack``:
/// ``"encoder"``, ``"decoder"``, ``"text"``, ``"vision"``; default the
/// first the files hold); ``model_id``
/// fills the ``model_id`` column of :meth:`Certificate.tables` (default:
/// the model's directory name, or the name of a Hugging Face id).
/// ``progress=True`` writes ``done/total matrices`` to ``sys.stderr``; a
/// callable is called as ``progress(done, total)`` instead.
/// ``measures=True`` adds the raw weights' norms and the norm-based measures
/// (``certify --measures``, :attr:`Certificate.measures`); ``init`` (a model
/// as ``model``, of the same architecture) adds the distance measures from
/// that initialisation (``certify --init``; implies ``measures``). An
/// ``init`` held in memory (a mapping of names to arrays) is read with the
/// model's own ``config`` (the architecture is the model's by definition),
/// so the model must be in memory too; its certificate entry
/// ``init_model`` names it ``"<memory>"`` with the hash of its safetensors
/// serialisation.
///
/// The computation runs without the interpreter lock. Ctrl-C raises
/// ``KeyboardInterrupt`` after the matrices under way have finished (no
/// further one is started). Bad input raises ``ValueError`` (or
/// ``FileNotFoundError``); a model that cannot be certified gives
/// ``certified = False`` and the reason.
///
/// Example:
///
/// >>> import specbound
/// >>> b = specbound.certify().bounds
/// >>> b.ours.hi < b.edelman.lo
/// True
#[pyfunction]
#[pyo3(signature = (model = None, config = None, *, l_phi = None, grid_m = None, precision = defaults::PRECISION, progress = None, heads = None, layers = None, revision = None, model_id = None, measures = false, init = None, stack = None, device = defaults::DEVICE),
       text_signature = "(model=None, config=None, *, l_phi='1.13', grid_m=None, precision='f64', progress=False, heads=None, layers=None, revision=None, model_id=None, measures=False, init=None, stack=None, device='cpu')")]
// Each keyword argument of the Python function is one parameter here (pyo3).
#[allow(clippy::too_many_arguments)]
pub fn certify(
    py: Python<'_>,
    model: Option<&Bound<'_, PyAny>>,
    config: Option<&Bound<'_, PyAny>>,
    l_phi: Option<&Bound<'_, PyAny>>,
    grid_m: Option<i64>,
    precision: &str,
    progress: Option<&Bound<'_, PyAny>>,
    heads: Option<i64>,
    layers: Option<i64>,
    revision: Option<&str>,
    model_id: Option<String>,
    measures: bool,
    init: Option<&Bound<'_, PyAny>>,
    stack: Option<String>,
    device: &str,
) -> PyResult<Certificate> {
    let options = certify_options(l_phi, grid_m, precision, heads, layers, stack)?;
    let sink = match progress {
        None => Sink::Off,
        Some(p) if p.is_instance_of::<PyBool>() => {
            if p.extract::<bool>()? {
                Sink::Stderr
            } else {
                Sink::Off
            }
        }
        Some(p) if p.is_callable() => Sink::Call(p.clone().unbind()),
        Some(p) => {
            return Err(PyTypeError::new_err(format!(
                "progress must be a bool or a callable progress(done, total), got {}",
                crate::type_name(p)
            )))
        }
    };
    let mut req = CertifyRequest::new(crate::model_input(model, config, revision)?, options);
    req.model_id = model_id;
    req.measures = measures;
    req.init = crate::init_input(init, model, config)?;
    let watch = Arc::new(Watch::default());
    let ui = PyUi(Arc::clone(&watch));
    let mut shown = (usize::MAX, usize::MAX);
    let tick_watch = Arc::clone(&watch);
    let tick = move |py: Python<'_>| -> PyResult<()> {
        let now = tick_watch.counts();
        if now == shown || now.1 == 0 {
            return Ok(());
        }
        shown = now;
        match &sink {
            Sink::Off => Ok(()),
            Sink::Call(f) => f.call1(py, now).map(|_| ()),
            Sink::Stderr => {
                let err = py.import("sys")?.getattr("stderr")?;
                let end = if now.0 == now.1 { "\n" } else { "" };
                err.call_method1(
                    "write",
                    (format!("\rspecbound: {}/{} matrices{end}", now.0, now.1),),
                )?;
                err.call_method0("flush").map(|_| ())
            }
        }
    };
    let report = crate::on_device(py, device, || {
        run_interruptibly(
            py,
            move || specbound::cmd::certify::run(&req, &ui),
            OnInterrupt::Cancel(watch),
            tick,
        )
    })?;
    let report = match report {
        Ok(r) => r,
        Err(e) if cancelled(&e) => {
            return Err(pyo3::exceptions::PyKeyboardInterrupt::new_err("cancelled"))
        }
        Err(e) => return Err(cmd_error(&e, &[])),
    };
    let cert = match report.outcome {
        Certified::Whole(c) => Ok(*c),
        Certified::Inconclusive(why) => Err(why),
        Certified::Shard { .. } => {
            return Err(pyo3::exceptions::PyRuntimeError::new_err(
                "internal error in specbound (a bug, please report): a shard's part where the whole model was asked for",
            ))
        }
    };
    Ok(Certificate::new(cert, report.model_id))
}

/// Reads a certificate file (JSON) strictly, as ``verify`` and ``diff`` do:
/// unknown or duplicate keys, wrong types and inconsistent counts are
/// errors naming the JSON path. Its intervals are claims until
/// :func:`verify` with the model has confirmed them.
///
/// Example:
///
/// >>> import os, tempfile, specbound
/// >>> path = os.path.join(tempfile.mkdtemp(), "cert.json")
/// >>> specbound.certify().save(path)
/// >>> specbound.load(path).certified
/// True
#[pyfunction]
pub fn load(path: &Bound<'_, PyAny>) -> PyResult<Certificate> {
    let path = path_arg(path, "path")?;
    let cert = read(&path)?;
    let model_id = Path::new(&cert.model.path)
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| cert.model.path.clone());
    Ok(Certificate {
        cert: Some(cert),
        reason: None,
        model_id,
    })
}
