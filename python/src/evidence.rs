//! `specbound.verify`, `specbound.audit`, `specbound.diff`: the evidence
//! commands, with the command line's verdicts and exit codes.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use serde_json::Value;

use specbound::cmd::audit::{AuditCmdReport, AuditRequest};
use specbound::cmd::defaults;
use specbound::cmd::diff::DiffRequest;
use specbound::cmd::verify::VerifyRequest;
use specbound::cmd::{CertInput, Report};
use specbound::evidence::audit::{AuditReport, Verdict as ClaimVerdict};
use specbound::evidence::diff::DiffReport;
use specbound::evidence::Answer;
use specbound::linalg::Precision;
use std::path::{Path, PathBuf};

use crate::certify::Certificate;
use crate::{cmd_error, init_input, json_to_py, model_input, pandas, path_arg, run_command};

/// `answer` as the Python enum `specbound.Answer` (a `str` enum defined in
/// Python, so that it compares equal to its value).
fn py_answer(py: Python<'_>, answer: Answer) -> PyResult<Bound<'_, PyAny>> {
    py.import("specbound._answer")?
        .getattr("Answer")?
        .call1((answer.as_str(),))
}

/// The file of a certificate input, to tell a missing file.
fn cert_path(c: &CertInput) -> Vec<&std::path::Path> {
    match c {
        CertInput::File(p) => vec![p.as_path()],
        CertInput::Loaded { .. } => Vec::new(),
    }
}

/// The outcome of :func:`verify`, with the command line's verdict and exit
/// code: ``"holds"`` (0), ``"failed"`` (1: a check failed or a stated
/// interval is refuted, ``failure`` says which) or ``"unconfirmed"`` (3:
/// quantities neither confirmed nor refuted, listed in ``unconfirmed``).
///
/// Example:
///
/// >>> import specbound
/// >>> v = specbound.verify(specbound.certify())
/// >>> v.verdict, v.exit_code, v.with_model
/// ('holds', 0, False)
#[pyclass(frozen, module = "specbound")]
pub struct VerifyResult {
    /// "holds", "failed" or "unconfirmed".
    #[pyo3(get)]
    verdict: &'static str,
    /// The command line's exit code (0, 1 or 3).
    #[pyo3(get)]
    exit_code: u8,
    /// Whether the certificate holds (exit code 0).
    #[pyo3(get)]
    holds: bool,
    /// Checks that passed.
    #[pyo3(get)]
    checks: usize,
    /// The first failed check or refuted quantity.
    #[pyo3(get)]
    failure: Option<String>,
    /// Quantities neither confirmed nor refuted.
    #[pyo3(get)]
    unconfirmed: Vec<String>,
    /// Whether the weights were checked too (``model`` given).
    #[pyo3(get)]
    with_model: bool,
    answer: Answer,
}

#[pymethods]
impl VerifyResult {
    /// The verdict as a :class:`Answer`: ``HOLDS`` (0), ``REFUTED`` (1:
    /// "failed") or ``UNDECIDED`` (3: "unconfirmed").
    ///
    /// >>> import specbound
    /// >>> specbound.verify(specbound.certify()).answer
    /// <Answer.HOLDS: 'holds'>
    #[getter]
    fn answer<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        py_answer(py, self.answer)
    }

    fn __repr__(&self) -> String {
        format!(
            "VerifyResult({}, exit_code={}, checks={}{}{})",
            self.verdict,
            self.exit_code,
            self.checks,
            self.failure
                .as_ref()
                .map(|f| format!(", failure={f:?}"))
                .unwrap_or_default(),
            if self.unconfirmed.is_empty() {
                String::new()
            } else {
                format!(", {} unconfirmed", self.unconfirmed.len())
            }
        )
    }
}

/// Checks a certificate (the command line's ``specbound verify``): re-derives
/// every aggregate from the stated values; with ``model``, also checks the
/// file hashes and recomputes every matrix, confirming or refuting every
/// stated interval.
///
/// ``path`` is a certificate file, or a :class:`Certificate`; ``model`` a
/// path or a Hugging Face id in the local cache (at ``revision``), or a
/// model held in memory with its ``config``, as :func:`certify` takes it:
/// a certificate of weights in memory names them ``"<memory>"`` with the
/// SHA-256 of their safetensors serialisation, which the same tensors in
/// memory (or saved by ``safetensors``' ``save_file``) reproduce, and other
/// weights do not.
/// ``max_precision_bits`` raises the largest MPFR precision a certificate
/// may state for its recomputation (the command line's
/// ``--max-precision-bits``). Runs without
/// the interpreter lock; Ctrl-C returns at once (a check with the model
/// under way finishes in the background and is dropped). Bad input raises
/// ``ValueError`` (or ``FileNotFoundError``); a certificate that does not
/// hold is a result, not an exception.
///
/// Example:
///
/// >>> import specbound
/// >>> specbound.verify(specbound.certify(), model="data/all-MiniLM-L6-v2").holds
/// True
#[pyfunction]
#[pyo3(signature = (path, model = None, config = None, *, revision = None, max_precision_bits = None))]
pub fn verify(
    py: Python<'_>,
    path: &Bound<'_, PyAny>,
    model: Option<&Bound<'_, PyAny>>,
    config: Option<&Bound<'_, PyAny>>,
    revision: Option<&str>,
    max_precision_bits: Option<u32>,
) -> PyResult<VerifyResult> {
    let cert = Certificate::cert_input(path, "path")?;
    let model = match model {
        Some(m) => Some(model_input(Some(m), config, revision)?),
        None if revision.is_some() => {
            return Err(PyValueError::new_err(
                "revision applies to a Hugging Face id given as model",
            ))
        }
        None if config.is_some() => {
            return Err(PyValueError::new_err(
                "config applies to a model in memory given as model",
            ))
        }
        None => None,
    };
    let mut options = specbound::evidence::verify::VerifyOptions::default();
    if let Some(bits) = max_precision_bits {
        options.max_mpfr_bits = bits;
    }
    let req = VerifyRequest {
        cert,
        model,
        options,
    };
    let job = req.clone();
    let report = run_command(py, false, move |ui| specbound::cmd::verify::run(&job, ui))?
        .map_err(|e| cmd_error(&e, &cert_path(&req.cert)))?;
    let exit_code = report.exit().code();
    let v = report.verdict;
    let answer = v.answer();
    Ok(VerifyResult {
        verdict: match answer {
            Answer::Holds => "holds",
            Answer::Refuted => "failed",
            Answer::Undecided => "unconfirmed",
        },
        exit_code,
        holds: answer == Answer::Holds,
        checks: v.checks,
        failure: v.failure,
        unconfirmed: v.unconfirmed,
        with_model: report.with_model,
        answer,
    })
}

/// The outcome of :func:`audit`, with the command line's verdict and exit
/// code: ``"consistent"`` (0), ``"inconsistent"`` (1: some claim is
/// certainly wrong at its precision) or ``"undecided"`` (3: some claim is
/// finer than the certified width, none wrong).
///
/// Example:
///
/// >>> import os, tempfile, specbound
/// >>> claims = os.path.join(tempfile.mkdtemp(), "claims.csv")
/// >>> _ = open(claims, "w").write("model_id,bound,value\nm,ours,20573.03\n")
/// >>> specbound.audit("data/all-MiniLM-L6-v2", claims).verdict
/// 'consistent'
#[pyclass(frozen, module = "specbound")]
pub struct AuditResult {
    /// "consistent", "inconsistent" or "undecided".
    #[pyo3(get)]
    verdict: &'static str,
    /// The command line's exit code (0, 1 or 3).
    #[pyo3(get)]
    exit_code: u8,
    /// The layout recognised in the claims file.
    #[pyo3(get)]
    layout: String,
    /// Claims confirmed.
    #[pyo3(get)]
    consistent: usize,
    /// Claims certainly wrong.
    #[pyo3(get)]
    inconsistent: usize,
    /// Claims finer than the certified width.
    #[pyo3(get)]
    undecided: usize,
    report: AuditReport,
}

#[pymethods]
impl AuditResult {
    /// The verdict as a :class:`Answer`: ``HOLDS`` (0: "consistent"),
    /// ``REFUTED`` (1: "inconsistent") or ``UNDECIDED`` (3).
    ///
    /// >>> import os, tempfile, specbound
    /// >>> claims = os.path.join(tempfile.mkdtemp(), "claims.csv")
    /// >>> _ = open(claims, "w").write("model_id,bound,value\nm,ours,20573.03\n")
    /// >>> specbound.audit("data/all-MiniLM-L6-v2", claims).answer
    /// <Answer.HOLDS: 'holds'>
    #[getter]
    fn answer<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        py_answer(py, self.report.answer())
    }

    /// Per claim, a dict: ``line`` (of the CSV, 1 = header), ``subject``,
    /// ``quantity``, ``claim`` (as written), ``tolerance``,
    /// ``certified_lo``, ``certified_hi``, ``verdict``, and ``distance`` and
    /// ``relative_error`` (inconsistent) or ``width`` (undecided), else None.
    ///
    /// >>> import os, tempfile, specbound
    /// >>> claims = os.path.join(tempfile.mkdtemp(), "claims.csv")
    /// >>> _ = open(claims, "w").write("model_id,bound,value\nm,ours,20573.03\n")
    /// >>> specbound.audit("data/all-MiniLM-L6-v2", claims).results[0]["verdict"]
    /// 'consistent'
    #[getter]
    fn results<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let rows = PyList::empty(py);
        for r in &self.report.results {
            let d = PyDict::new(py);
            d.set_item("line", r.line)?;
            d.set_item("subject", &r.subject)?;
            d.set_item("quantity", &r.quantity)?;
            d.set_item("claim", &r.claim)?;
            d.set_item("tolerance", r.tolerance)?;
            d.set_item("certified_lo", r.certified[0])?;
            d.set_item("certified_hi", r.certified[1])?;
            let none = || py.None();
            let (verdict, distance, rel, width) = match &r.verdict {
                ClaimVerdict::Consistent => ("consistent", none(), none(), none()),
                ClaimVerdict::Inconsistent {
                    distance,
                    relative_error,
                    ..
                } => (
                    "inconsistent",
                    distance.into_pyobject(py)?.into_any().unbind(),
                    relative_error.into_pyobject(py)?.into_any().unbind(),
                    none(),
                ),
                ClaimVerdict::Undecided { width } => (
                    "undecided",
                    none(),
                    none(),
                    width.into_pyobject(py)?.into_any().unbind(),
                ),
            };
            d.set_item("verdict", verdict)?;
            d.set_item("distance", distance)?;
            d.set_item("relative_error", rel)?;
            d.set_item("width", width)?;
            rows.append(d)?;
        }
        Ok(rows)
    }

    /// ``results`` as a pandas DataFrame. Needs pandas.
    ///
    /// >>> import os, tempfile, specbound
    /// >>> claims = os.path.join(tempfile.mkdtemp(), "claims.csv")
    /// >>> _ = open(claims, "w").write("model_id,bound,value\nm,ours,20573.03\n")
    /// >>> specbound.audit("data/all-MiniLM-L6-v2", claims).to_frame().shape
    /// (1, 11)
    fn to_frame<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let pd = pandas(py, "AuditResult.to_frame()")?;
        let kwargs = PyDict::new(py);
        kwargs.set_item(
            "columns",
            vec![
                "line",
                "subject",
                "quantity",
                "claim",
                "tolerance",
                "certified_lo",
                "certified_hi",
                "verdict",
                "distance",
                "relative_error",
                "width",
            ],
        )?;
        pd.call_method("DataFrame", (self.results(py)?,), Some(&kwargs))
    }

    /// The audit as ``specbound audit --json`` prints it.
    ///
    /// >>> import json, os, tempfile, specbound
    /// >>> claims = os.path.join(tempfile.mkdtemp(), "claims.csv")
    /// >>> _ = open(claims, "w").write("model_id,bound,value\nm,ours,20573.03\n")
    /// >>> json.loads(specbound.audit("data/all-MiniLM-L6-v2", claims).to_json())["layout"]
    /// 'observed_bounds'
    fn to_json(&self) -> PyResult<String> {
        serde_json::to_string_pretty(&self.report).map_err(|e| PyValueError::new_err(e.to_string()))
    }

    fn __repr__(&self) -> String {
        format!(
            "AuditResult({}, exit_code={}, layout={}, {} claims: {} consistent, {} inconsistent, {} undecided)",
            self.verdict,
            self.exit_code,
            self.layout,
            self.report.results.len(),
            self.consistent,
            self.inconsistent,
            self.undecided
        )
    }
}

/// The outcome of :func:`audit` for claimed singular values (a 1-D
/// ``.npy``) of one matrix, with the command line's verdict and exit code:
/// ``"pass"`` (0: every claimed value meets ``|c - sigma| <= atol + rtol
/// sigma``), ``"fail"`` (1: some value certainly does not), ``"undecided"``
/// (3: some enclosure too wide to decide, none failing) or
/// ``"inconclusive"`` (1: the matrix could not be certified; ``reason``
/// says why).
///
/// Example:
///
/// >>> import os, tempfile, numpy as np, specbound
/// >>> d = tempfile.mkdtemp()
/// >>> np.save(os.path.join(d, "m.npy"), np.diag([3.0, 1.0]))
/// >>> np.save(os.path.join(d, "claimed.npy"), np.array([3.0, 1.0]))
/// >>> r = specbound.audit(os.path.join(d, "m.npy"), os.path.join(d, "claimed.npy"), rtol=1e-12)
/// >>> r.verdict, r.exit_code
/// ('pass', 0)
#[pyclass(frozen, module = "specbound")]
pub struct SpectrumAuditResult {
    /// "pass", "fail", "undecided" or "inconclusive".
    #[pyo3(get)]
    verdict: &'static str,
    /// The command line's exit code (0, 1 or 3).
    #[pyo3(get)]
    exit_code: u8,
    /// Why the verdict is not "pass" (the command line's last line), else None.
    #[pyo3(get)]
    reason: Option<String>,
    json: Option<String>,
    answer: Option<Answer>,
}

#[pymethods]
impl SpectrumAuditResult {
    /// The verdict as a :class:`Answer`: ``HOLDS`` (0: "pass"), ``REFUTED``
    /// (1: "fail") or ``UNDECIDED`` (3); None when "inconclusive" (the matrix
    /// could not be certified: no answer either way).
    ///
    /// >>> import os, tempfile, numpy as np, specbound
    /// >>> d = tempfile.mkdtemp()
    /// >>> np.save(os.path.join(d, "m.npy"), np.diag([3.0, 1.0]))
    /// >>> np.save(os.path.join(d, "claimed.npy"), np.array([3.0, 2.0]))
    /// >>> specbound.audit(os.path.join(d, "m.npy"), os.path.join(d, "claimed.npy")).answer
    /// <Answer.REFUTED: 'refuted'>
    #[getter]
    fn answer<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.answer.map(|a| py_answer(py, a)).transpose()
    }

    /// The audit as ``specbound audit --json`` prints it; ``ValueError``
    /// when the matrix could not be certified.
    ///
    /// >>> import json, os, tempfile, numpy as np, specbound
    /// >>> d = tempfile.mkdtemp()
    /// >>> np.save(os.path.join(d, "m.npy"), np.diag([3.0, 1.0]))
    /// >>> np.save(os.path.join(d, "claimed.npy"), np.array([3.0, 1.0]))
    /// >>> r = specbound.audit(os.path.join(d, "m.npy"), os.path.join(d, "claimed.npy"), rtol=1e-12)
    /// >>> json.loads(r.to_json())["pass"]
    /// 2
    fn to_json(&self) -> PyResult<String> {
        self.json.clone().ok_or_else(|| {
            PyValueError::new_err(format!(
                "nothing certified to write: {}",
                self.reason.as_deref().unwrap_or("")
            ))
        })
    }

    /// The audit as Python objects (``json.loads(to_json())``).
    ///
    /// >>> import os, tempfile, numpy as np, specbound
    /// >>> d = tempfile.mkdtemp()
    /// >>> np.save(os.path.join(d, "m.npy"), np.diag([3.0, 1.0]))
    /// >>> np.save(os.path.join(d, "claimed.npy"), np.array([3.0, 1.0]))
    /// >>> r = specbound.audit(os.path.join(d, "m.npy"), os.path.join(d, "claimed.npy"), rtol=1e-12)
    /// >>> r.to_dict()["verdict"]
    /// 'pass'
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_to_py(py, &self.to_json()?)
    }

    fn __repr__(&self) -> String {
        format!(
            "SpectrumAuditResult({}, exit_code={}{})",
            self.verdict,
            self.exit_code,
            self.reason
                .as_ref()
                .map(|r| format!(", reason={r:?}"))
                .unwrap_or_default()
        )
    }
}

/// The claims argument of [`audit`]: a path, or a table with `to_csv`
/// (a pandas DataFrame, as WeightWatcher's `analyze()` returns), whose CSV
/// text (index included: WeightWatcher's is a plain row number) is audited
/// as a file of that content would be, named `<DataFrame>` in messages.
fn claims_arg(claims: &Bound<'_, PyAny>) -> PyResult<(PathBuf, Option<String>)> {
    if let Ok(p) = claims.extract::<PathBuf>() {
        return Ok((p, None));
    }
    if claims.hasattr("to_csv")? {
        let text: String = claims.call_method0("to_csv")?.extract()?;
        let name = format!("<{}>", claims.get_type().name()?);
        return Ok((PathBuf::from(name), Some(text)));
    }
    path_arg(claims, "claims (a path or a pandas DataFrame)").map(|p| (p, None))
}

/// Checks published numbers against certified values (the command line's
/// ``specbound audit``).
///
/// ``claims`` is a CSV file about the model ``model`` (a path, a Hugging
/// Face id in the local cache at ``revision``, or a model in memory with
/// its ``config``, as :func:`certify` takes it): a ``specbound certify
/// --csv`` table (the authors' layout), a generic claims table, or a
/// WeightWatcher details table (a path, or the pandas DataFrame that
/// ``WeightWatcher.analyze()`` returns, rows matched by ``longname``); the
/// result is an :class:`AuditResult`. Or
/// ``claims`` is a 1-D ``.npy`` of another tool's singular values of one
/// matrix: ``model`` is then anything :func:`svd` takes as a path (a
/// ``.npy``, a tensor ``tensor`` of a file or model), and the result is a
/// :class:`SpectrumAuditResult`. ``rtol`` and ``atol`` widen claims
/// without a tolerance column to ``c ± (atol + rtol |c|)`` (claimed
/// singular values must meet ``|c - sigma| <= atol + rtol sigma``);
/// ``precision`` is the method of the certified singular values (``"f64"``,
/// ``"extended"``, ``"auto"``, ``"mpfr:BITS"``); a gap counts as float32 /
/// float64 rounding when at most ``rounding_units`` unit roundoffs. In a
/// table with a ``model_id`` column (a study's tables), ``model_id`` picks
/// the rows to audit (default: the model's id as :func:`study` gives it).
/// A measures table (``measure,value`` rows, or a column per measure) or
/// a raw-weights table (``layer,role`` and norm columns) is audited against
/// the model's certified measures (``docs/measures.md``); ``init`` is the
/// initialisation for the distance measures, as :func:`certify`'s ``init``
/// (in memory, it is read with the model's ``config``). ``stack`` is the
/// stack of blocks the claims are about, of a model of several
/// (``"decoder"``, as :func:`certify`'s ``stack``; default the first).
///
/// Runs without the interpreter lock; Ctrl-C returns at once (the audit
/// under way finishes in the background and is dropped). Bad input raises
/// ``ValueError`` (or ``FileNotFoundError``).
///
/// Example:
///
/// >>> import os, tempfile, specbound
/// >>> claims = os.path.join(tempfile.mkdtemp(), "claims.csv")
/// >>> _ = open(claims, "w").write("model_id,bound,value\nm,ours,20573.03\n")
/// >>> specbound.audit("data/all-MiniLM-L6-v2", claims).exit_code
/// 0
#[pyfunction]
#[pyo3(signature = (model, claims, *, rtol = defaults::CLAIM_RTOL, atol = defaults::CLAIM_ATOL, precision = defaults::PRECISION, rounding_units = defaults::ROUNDING_UNITS, tensor = None, revision = None, model_id = None, init = None, config = None, stack = None),
       text_signature = "(model, claims, *, rtol=0.0, atol=0.0, precision='f64', rounding_units=1.0, tensor=None, revision=None, model_id=None, init=None, config=None, stack=None)")]
// Each keyword argument of the Python function is one parameter here (pyo3).
#[allow(clippy::too_many_arguments)]
pub fn audit(
    py: Python<'_>,
    model: &Bound<'_, PyAny>,
    claims: &Bound<'_, PyAny>,
    rtol: f64,
    atol: f64,
    precision: &str,
    rounding_units: f64,
    tensor: Option<String>,
    revision: Option<&str>,
    model_id: Option<String>,
    init: Option<&Bound<'_, PyAny>>,
    config: Option<&Bound<'_, PyAny>>,
    stack: Option<String>,
) -> PyResult<Py<PyAny>> {
    let (claims_path, claims_text) = claims_arg(claims)?;
    let req = AuditRequest {
        model: model_input(Some(model), config, revision)?,
        claims: claims_path,
        claims_text,
        tensor,
        rtol,
        atol,
        precision: precision
            .parse::<Precision>()
            .map_err(PyValueError::new_err)?,
        rounding_units,
        model_id,
        init: init_input(init, Some(model), config)?,
        stack,
    };
    let job = req.clone();
    // A DataFrame's name (`<DataFrame>`) is no file: a bad claim in it is a
    // ValueError, not a missing file.
    let named: Vec<&Path> = match req.claims_text {
        None => vec![&req.claims],
        Some(_) => Vec::new(),
    };
    let report = run_command(py, false, move |ui| specbound::cmd::audit::run(&job, ui))?
        .map_err(|e| cmd_error(&e, &named))?;
    let exit_code = report.exit().code();
    let reason = report.reason();
    let json = report.json();
    match report {
        AuditCmdReport::Claims { report, .. } => Ok(AuditResult {
            verdict: match report.answer() {
                Answer::Holds => "consistent",
                Answer::Refuted => "inconsistent",
                Answer::Undecided => "undecided",
            },
            exit_code,
            layout: report.layout.clone(),
            consistent: report.consistent,
            inconsistent: report.inconsistent,
            undecided: report.undecided,
            report,
        }
        .into_pyobject(py)?
        .into_any()
        .unbind()),
        AuditCmdReport::Spectrum { audit, .. } => Ok(SpectrumAuditResult {
            verdict: match audit.as_ref().map(|a| a.answer()) {
                Err(_) => "inconclusive",
                Ok(Answer::Holds) => "pass",
                Ok(Answer::Refuted) => "fail",
                Ok(Answer::Undecided) => "undecided",
            },
            exit_code,
            reason,
            json: audit.is_ok().then_some(json).flatten(),
            answer: audit.as_ref().ok().map(|a| a.answer()),
        }
        .into_pyobject(py)?
        .into_any()
        .unbind()),
    }
}

/// The outcome of :func:`diff`, with the command line's exit code: 1 when
/// the certificates certainly differ beyond ``rtol`` (a quantity, a
/// parameter or the architecture, or a quantity in one certificate only),
/// else 0.
///
/// Example:
///
/// >>> import specbound
/// >>> c = specbound.certify()
/// >>> specbound.diff(c, c).certainly_changed
/// False
#[pyclass(frozen, module = "specbound")]
pub struct DiffResult {
    /// Whether the certificates certainly differ beyond `rtol`.
    #[pyo3(get)]
    certainly_changed: bool,
    /// The command line's exit code (0 or 1).
    #[pyo3(get)]
    exit_code: u8,
    /// The relative tolerance used.
    #[pyo3(get)]
    rtol: f64,
    /// Quantities compared.
    #[pyo3(get)]
    compared: usize,
    /// Certainly larger in b.
    #[pyo3(get)]
    larger: usize,
    /// Certainly smaller in b.
    #[pyo3(get)]
    smaller: usize,
    /// Overlapping enclosures.
    #[pyo3(get)]
    indistinguishable: usize,
    /// Certainly changed by more than rtol.
    #[pyo3(get)]
    beyond_rtol: usize,
    /// Quantities in a only.
    #[pyo3(get)]
    only_in_a: usize,
    /// Quantities in b only.
    #[pyo3(get)]
    only_in_b: usize,
    report: DiffReport,
}

/// Splits `[lo, hi]` pairs of a row into `<key>_lo`, `<key>_hi`.
fn flatten_pairs(row: &Value) -> serde_json::Map<String, Value> {
    let mut out = serde_json::Map::new();
    if let Value::Object(m) = row {
        for (k, v) in m {
            match v {
                Value::Array(pair) if pair.len() == 2 => {
                    out.insert(format!("{k}_lo"), pair[0].clone());
                    out.insert(format!("{k}_hi"), pair[1].clone());
                }
                _ => {
                    out.insert(k.clone(), v.clone());
                }
            }
        }
    }
    out
}

#[pymethods]
impl DiffResult {
    /// Whether the certificates are unchanged within ``rtol``, as a
    /// :class:`Answer`: ``HOLDS`` (0) or ``REFUTED`` (1: certainly changed);
    /// never ``UNDECIDED``.
    ///
    /// >>> import specbound
    /// >>> c = specbound.certify()
    /// >>> specbound.diff(c, c).answer
    /// <Answer.HOLDS: 'holds'>
    #[getter]
    fn answer<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        py_answer(py, self.report.answer())
    }

    /// Differences in model hashes, architecture and parameters: a list of
    /// dicts with ``kind``, ``key``, ``a``, ``b``.
    ///
    /// >>> import specbound
    /// >>> a, b = specbound.certify(), specbound.certify(l_phi="1.2")
    /// >>> [h["key"] for h in specbound.diff(a, b).header]
    /// ['parameters.l_phi']
    #[getter]
    fn header<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let text = serde_json::to_string(&self.report.header)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        json_to_py(py, &text)
    }

    /// One row per compared quantity (beyond rtol first, then changed, then
    /// the rest): ``layer``, ``head``, ``type``, ``quantity``, ``index``,
    /// ``p``, ``label``, ``a_lo``, ``a_hi``, ``b_lo``, ``b_hi``,
    /// ``change_lo``, ``change_hi``, ``verdict``, ``exceeds_rtol``. Needs
    /// pandas.
    ///
    /// >>> import specbound
    /// >>> c = specbound.certify()
    /// >>> set(specbound.diff(c, c).to_frame().verdict)
    /// {'indistinguishable'}
    fn to_frame<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let pd = pandas(py, "DiffResult.to_frame()")?;
        let rows = serde_json::to_value(&self.report.rows)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let flat: Vec<Value> = rows
            .as_array()
            .map(|a| a.iter().map(|r| Value::Object(flatten_pairs(r))).collect())
            .unwrap_or_default();
        let text =
            serde_json::to_string(&flat).map_err(|e| PyValueError::new_err(e.to_string()))?;
        pd.call_method1("DataFrame", (json_to_py(py, &text)?,))
    }

    /// The comparison as ``specbound diff`` prints it, at most ``max_rows``
    /// quantities listed.
    ///
    /// >>> import specbound
    /// >>> c = specbound.certify()
    /// >>> print(specbound.diff(c, c).to_text())
    /// 65534 quantities compared: 0 certainly larger, 0 certainly smaller, 65534 indistinguishable; ...
    #[pyo3(signature = (max_rows = 25))]
    fn to_text(&self, max_rows: usize) -> String {
        self.report.to_text(max_rows)
    }

    /// The comparison as ``specbound diff --json`` prints it.
    ///
    /// >>> import json, specbound
    /// >>> c = specbound.certify()
    /// >>> json.loads(specbound.diff(c, c).to_json())["certainly_changed"]
    /// False
    fn to_json(&self) -> PyResult<String> {
        serde_json::to_string_pretty(&self.report).map_err(|e| PyValueError::new_err(e.to_string()))
    }

    fn __repr__(&self) -> String {
        format!(
            "DiffResult(certainly_changed={}, exit_code={}, rtol={}, {} compared: {} larger, {} smaller, {} indistinguishable, {} beyond rtol, {} only in a, {} only in b, {} header differences)",
            if self.certainly_changed { "True" } else { "False" },
            self.exit_code,
            self.rtol,
            self.compared,
            self.larger,
            self.smaller,
            self.indistinguishable,
            self.beyond_rtol,
            self.only_in_a,
            self.only_in_b,
            self.report.header.len()
        )
    }
}

/// Compares two certificates quantity by quantity (the command line's
/// ``specbound diff``): a quantity has certainly changed when the
/// enclosures are disjoint, and is counted beyond ``rtol`` when it
/// certainly changed by more than ``rtol`` relative to ``a``.
///
/// ``a`` and ``b`` are certificate files or :class:`Certificate` objects.
/// Bad input raises ``ValueError`` (or ``FileNotFoundError``).
///
/// Example:
///
/// >>> import specbound
/// >>> c = specbound.certify()
/// >>> specbound.diff(c, c, rtol=0.01).exit_code
/// 0
#[pyfunction]
#[pyo3(signature = (a, b, rtol = defaults::CLAIM_RTOL), text_signature = "(a, b, rtol=0.0)")]
pub fn diff(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    rtol: f64,
) -> PyResult<DiffResult> {
    let req = DiffRequest {
        a: Certificate::cert_input(a, "a")?,
        b: Certificate::cert_input(b, "b")?,
        rtol,
    };
    let job = req.clone();
    let done = py
        .detach(move || specbound::cmd::diff::run(&job))
        .map_err(|e| {
            let mut paths = cert_path(&req.a);
            paths.extend(cert_path(&req.b));
            cmd_error(&e, &paths)
        })?;
    let exit_code = done.exit().code();
    let report = done.diff;
    Ok(DiffResult {
        certainly_changed: report.certainly_changed,
        exit_code,
        rtol: report.rtol,
        compared: report.compared,
        larger: report.larger,
        smaller: report.smaller,
        indistinguishable: report.indistinguishable,
        beyond_rtol: report.beyond_rtol,
        only_in_a: report.only_in_a,
        only_in_b: report.only_in_b,
        report,
    })
}
