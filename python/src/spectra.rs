//! `specbound.spectra`: certified spectra of every 2-D weight tensor of a
//! checkpoint (the command line's `specbound spectra`).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use specbound::cmd::defaults;
use specbound::cmd::spectra::{SpectraReport, SpectraRequest};
use specbound::cmd::Report;
use specbound::linalg::Precision;

use crate::certify::frame_of;
use crate::{cmd_error, model_input, on_device, pandas, path_arg, run_command};

/// The certified spectra of a checkpoint's matrices (see :func:`spectra`).
///
/// ``certified`` is ``True`` when every matrix was certified; otherwise
/// ``reason`` says which were not and why. :meth:`to_frame` is the table
/// that ``specbound spectra --csv`` writes, :meth:`to_json` what
/// ``specbound spectra --json`` prints.
///
/// Example:
///
/// >>> import specbound
/// >>> s = specbound.spectra("data/all-MiniLM-L6-v2", include=r"layer\.0\.attention\.self\.query\.weight")
/// >>> s.certified, len(s)
/// (True, 1)
#[pyclass(frozen, module = "specbound")]
pub struct SpectraResult {
    /// Whether every matrix was certified.
    #[pyo3(get)]
    certified: bool,
    /// Why not (the command line's last line), or None.
    #[pyo3(get)]
    reason: Option<String>,
    /// The full names of the tensors certified, one per matrix (a tensor
    /// of rank 3 or 4 once per slice), in natural order.
    #[pyo3(get)]
    tensors: Vec<String>,
    /// ``(tensor, why)`` for each tensor that the filters kept but that was
    /// not certified (1-D, not a float type, above ``max_elements``).
    #[pyo3(get)]
    skipped: Vec<(String, String)>,
    csv: String,
    /// `singular_values.csv`, when kept (`singular_values=True`).
    sv_csv: Option<String>,
    json: String,
    shown: String,
}

impl SpectraResult {
    fn new(r: &SpectraReport) -> PyResult<Self> {
        let json = r.json().ok_or_else(|| {
            pyo3::exceptions::PyRuntimeError::new_err(
                "internal error in specbound (a bug, please report): no JSON",
            )
        })?;
        Ok(Self {
            certified: r.rows.iter().all(|row| row.values.is_some()),
            reason: r.reason(),
            tensors: r.rows.iter().map(|row| row.tensor.clone()).collect(),
            skipped: r
                .skipped
                .iter()
                .map(|s| (s.tensor.clone(), s.why.clone()))
                .collect(),
            csv: r.csv(),
            sv_csv: r
                .rows
                .iter()
                .any(|row| {
                    row.values
                        .as_ref()
                        .is_some_and(|v| v.singular_values.is_some())
                })
                .then(|| r.singular_values_csv()),
            json,
            shown: r.shown.clone(),
        })
    }
}

/// The fields of one CSV record as `spectra.csv` writes them (a field
/// holding a comma or quote is quoted, its quotes doubled; no field holds
/// a line break: the writer escapes control characters).
fn csv_record(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            (true, '"') => quoted = false,
            (false, '"') if field.is_empty() => quoted = true,
            (false, ',') => out.push(std::mem::take(&mut field)),
            _ => field.push(c),
        }
    }
    out.push(field);
    out
}

#[pymethods]
impl SpectraResult {
    /// The table of ``specbound spectra --csv`` as a pandas DataFrame, one
    /// row per matrix, indexed by the tensor's full parameter name (a
    /// tensor of rank 3 or 4 has one row per slice, told apart by
    /// ``slice``): each certified quantity as ``_lo``/``_hi`` columns, the
    /// exact binary64 ends of its enclosure (a bound beyond binary64 is a
    /// decimal string, outward rounded).
    fn to_frame<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let pd = pandas(py, "SpectraResult.to_frame()")?;
        let mut lines = self.csv.lines();
        let header = csv_record(lines.next().unwrap_or(""));
        let mut columns: Vec<Vec<String>> = vec![Vec::new(); header.len()];
        for line in lines {
            for (col, cell) in columns.iter_mut().zip(csv_record(line)) {
                col.push(cell);
            }
        }
        let frame = frame_of(py, &pd, &header, &columns)?;
        frame.call_method1("set_index", ("tensor",))
    }

    /// Every certified singular value of each matrix (``spectra(...,
    /// singular_values=True)``) as a pandas DataFrame, the table
    /// ``singular_values.csv`` that ``specbound spectra --csv DIR
    /// --singular-values`` writes: ``tensor``, ``slice``, ``rows``,
    /// ``cols``, ``rank_index`` (from 1, largest first), ``sigma`` (the
    /// midpoint), ``sigma_lo`` and ``sigma_hi`` (certified: the exact
    /// binary64 ends). Raises ``ValueError`` when they were not kept.
    ///
    /// >>> import specbound
    /// >>> s = specbound.spectra("data/all-MiniLM-L6-v2", include=r"layer\.0\.attention\.self\.query\.weight", singular_values=True)
    /// >>> f = s.singular_values(); len(f), list(f.rank_index[:2])
    /// (384, [1, 2])
    fn singular_values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let text = self.sv_csv.as_deref().ok_or_else(|| {
            PyValueError::new_err(
                "the singular values were not kept: call spectra(..., singular_values=True)",
            )
        })?;
        let pd = pandas(py, "SpectraResult.singular_values()")?;
        let mut lines = text.lines();
        let header = csv_record(lines.next().unwrap_or(""));
        let mut columns: Vec<Vec<String>> = vec![Vec::new(); header.len()];
        for line in lines {
            for (col, cell) in columns.iter_mut().zip(csv_record(line)) {
                col.push(cell);
            }
        }
        frame_of(py, &pd, &header, &columns)
    }

    /// The report as ``specbound spectra --json`` prints it.
    fn to_json(&self) -> String {
        self.json.clone()
    }

    fn __len__(&self) -> usize {
        self.tensors.len()
    }

    fn __repr__(&self) -> String {
        let status = if self.certified {
            "all certified".to_string()
        } else {
            format!(
                "not all certified: {}",
                self.reason.as_deref().unwrap_or("")
            )
        };
        format!(
            "<SpectraResult of {}: {} matrices, {} skipped, {status}>",
            self.shown,
            self.tensors.len(),
            self.skipped.len()
        )
    }
}

/// Certified spectra of every 2-D weight tensor of a checkpoint (the
/// command line's ``specbound spectra``): for each matrix, its spectral
/// norm, smallest singular value, Frobenius, nuclear, (2,1) and (1,1)
/// norms, stable rank, rank and the Schatten quantities of
/// ``schatten_p``, each a certified enclosure. Tensors of rank 3 and 4
/// are cut into matrices as WeightWatcher cuts convolution kernels.
///
/// ``model`` is a path or Hugging Face id (at ``revision``) as
/// :func:`certify` takes it, or a mapping of tensor names to arrays
/// (``config`` is then unused by this command but accepted, as for
/// :func:`certify`). ``include`` and ``exclude`` are regular expressions on
/// the full tensor names; ``max_elements`` skips larger tensors;
/// ``precision`` is ``"f64"``, ``"extended"``, ``"auto"`` (escalating until
/// ``rtol``) or ``"mpfr:BITS"``; ``csv`` a directory to write
/// ``spectra.csv`` into; ``singular_values=True`` keeps every certified
/// singular value (:meth:`SpectraResult.singular_values`, and
/// ``singular_values.csv`` beside ``spectra.csv``). Runs without the interpreter lock; Ctrl-C returns
/// with ``KeyboardInterrupt``. Bad input raises ``ValueError`` (or
/// ``FileNotFoundError``).
///
/// Example:
///
/// >>> import specbound
/// >>> f = specbound.spectra("data/all-MiniLM-L6-v2", include=r"layer\.0\..*query\.weight").to_frame()
/// >>> list(f.index), float(f["spectral_norm_lo"].iloc[0]) <= float(f["spectral_norm_hi"].iloc[0])
/// (['encoder.layer.0.attention.self.query.weight'], True)
#[pyfunction]
#[pyo3(
    signature = (model, config = None, *, schatten_p = None, include = None, exclude = None, max_elements = None, precision = defaults::PRECISION, rtol = defaults::RTOL, revision = None, csv = None, device = defaults::DEVICE, singular_values = false),
    text_signature = "(model, config=None, *, schatten_p=(1, 2), include=None, exclude=None, max_elements=None, precision='f64', rtol=1e-11, revision=None, csv=None, device='cpu', singular_values=False)"
)]
// Each keyword argument of the Python function is one parameter here (pyo3).
#[allow(clippy::too_many_arguments)]
pub fn spectra(
    py: Python<'_>,
    model: &Bound<'_, PyAny>,
    config: Option<&Bound<'_, PyAny>>,
    schatten_p: Option<&Bound<'_, PyAny>>,
    include: Option<String>,
    exclude: Option<String>,
    max_elements: Option<u64>,
    precision: &str,
    rtol: f64,
    revision: Option<&str>,
    csv: Option<&Bound<'_, PyAny>>,
    device: &str,
    singular_values: bool,
) -> PyResult<SpectraResult> {
    let prec: Precision = precision.parse().map_err(PyValueError::new_err)?;
    let ps = crate::svd::schatten_arg(py, schatten_p)?;
    let req = SpectraRequest {
        model: model_input(Some(model), config, revision)?,
        include,
        exclude,
        max_elements,
        schatten_p: ps.into_iter().map(|(_, p)| p).collect(),
        precision: prec,
        rtol,
        csv: csv.map(|c| path_arg(c, "csv")).transpose()?,
        singular_values,
    };
    let report = on_device(py, device, || {
        run_command(py, false, move |ui| specbound::cmd::spectra::run(&req, ui))
    })?
    .map_err(|e| cmd_error(&e, &[]))?;
    SpectraResult::new(&report)
}
