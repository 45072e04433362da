//! `specbound.inspect`, `specbound.study`, `specbound.merge`,
//! `specbound.report`: the commands that have no result class of their own
//! (their results are the command line's JSON as Python objects, a dict, a
//! path or a :class:`Certificate`).

use std::path::{Path, PathBuf};

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyString};

use specbound::cmd::defaults;
use specbound::cmd::inspect::InspectRequest;
use specbound::cmd::merge::MergeRequest;
use specbound::cmd::report::ReportRequest;
use specbound::cmd::study::StudyRequest;
use specbound::cmd::{CertOutputs, Report, Style};
use specbound::study::ModelFields;

use crate::certify::{cancelled, certify_options, Certificate};
use crate::{
    cmd_error, json_to_py, l_phi_arg, layers_arg, model_input, model_ref_of, path_arg, paths_arg,
    positive, run_command, strings_arg,
};

/// The command's JSON, which every command called here has.
fn json_of(report: &dyn Report) -> PyResult<String> {
    report.json().ok_or_else(|| {
        PyRuntimeError::new_err("internal error in specbound (a bug, please report): no JSON")
    })
}

/// An optional path argument.
fn opt_path(obj: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<PathBuf>> {
    obj.map(|o| path_arg(o, what)).transpose()
}

/// The recognised architecture and its proxy matrices, without computing
/// any spectrum (the command line's ``specbound inspect --json``), as a
/// dict: ``model``, ``architecture``, ``layout``, ``tensor_prefix``,
/// ``layers``, ``hidden``, ``heads``, ``kv_heads``, ``head_dim``,
/// ``intermediate``, ``activation``, ``extensions`` (where a certificate
/// would go beyond the paper, given ``l_phi``), ``matrices`` (every proxy
/// matrix and what it is formed from) and ``unmapped`` (tensors the
/// proxies do not use).
///
/// ``model`` is a path or a Hugging Face id in the local cache (at
/// ``revision``), or a mapping of tensor names to arrays with its
/// ``config``, as :func:`certify` takes it; ``heads`` is needed for a
/// file without config.json or metadata; ``stack`` names the stack of
/// blocks of a model of several (``inspect --stack``). Bad input raises ``ValueError``
/// (or ``FileNotFoundError``).
///
/// Example:
///
/// >>> import specbound
/// >>> i = specbound.inspect("data/all-MiniLM-L6-v2")
/// >>> i["architecture"], i["layers"], len(i["matrices"])
/// ('bert', 6, 156)
#[pyfunction]
#[pyo3(signature = (model, config = None, *, heads = None, l_phi = None, revision = None, stack = None),
       text_signature = "(model, config=None, *, heads=None, l_phi='1.13', revision=None, stack=None)")]
pub fn inspect<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyAny>,
    config: Option<&Bound<'py, PyAny>>,
    heads: Option<i64>,
    l_phi: Option<&Bound<'py, PyAny>>,
    revision: Option<&str>,
    stack: Option<String>,
) -> PyResult<Bound<'py, PyAny>> {
    let req = InspectRequest {
        model: model_input(Some(model), config, revision)?,
        heads: positive(heads, "heads")?,
        l_phi: l_phi_arg(l_phi)?,
        stack,
    };
    let report = run_command(py, false, move |_| specbound::cmd::inspect::run(&req))?
        .map_err(|e| cmd_error(&e, &[]))?;
    json_to_py(py, &json_of(&report)?)
}

/// Certifies many checkpoints and writes the paper's tables, five figures
/// and an HTML report into the directory ``out`` (the command line's
/// ``specbound study``; ``out/certificates/``, ``out/tables/``,
/// ``out/figures/``, ``out/report.html``). A certificate already in
/// ``out/certificates/`` whose model hashes and parameters match is reused.
///
/// ``models`` is a list of models as :func:`certify` takes them (paths or
/// Hugging Face ids); ``models_file`` a file listing further models, one
/// per line; ``model_ids`` their ids, one per model in order (default: each
/// directory or file name). ``primary`` is the id of the primary model of
/// figures 1 and 5 (default: the largest), ``spectrum_layers`` its layers
/// in figure 1 (``"0-3"``, ``"0,2,5"``); ``l_phi``, ``grid_m``,
/// ``precision``, ``heads``, ``layers`` and ``stack`` are :func:`certify`'s.
///
/// Trajectories (the command line's ``--step``, ``--run``, ``--revision``
/// and ``--init``): ``steps``, ``runs`` and ``revisions`` are lists index-
/// matched with ``models``, each entry the model's training step (an int
/// >= 0), its run's name, its Hugging Face revision (``"stepN"`` gives step
/// N), or None for none; ``init`` is the initialisation of every model's
/// distance measures (a path or id, as :func:`certify`'s ``init``). Models
/// with steps make figure 6 and the trajectory tables.
///
/// Returns a dict: ``certified`` and ``reused`` (numbers of models),
/// ``inconclusive`` (id -> why), ``report`` (the HTML file, or None when no
/// model was certified), ``figures`` (number -> file of every figure
/// drawn, figure 6 included), ``skipped_figures`` (number -> why), ``exit_code`` (0, or 1 when
/// some model was inconclusive) and ``reason`` (the command line's last
/// line, or None). Runs without the interpreter lock; Ctrl-C stops it
/// between matrices. Bad input raises ``ValueError`` (or
/// ``FileNotFoundError``).
///
/// Example:
///
/// >>> import os, tempfile, specbound
/// >>> s = specbound.study(["data/all-MiniLM-L6-v2"], out=tempfile.mkdtemp())
/// >>> s["certified"], s["exit_code"], os.path.basename(s["report"])
/// (1, 0, 'report.html')
#[pyfunction]
#[pyo3(signature = (models, *, out, model_ids = None, models_file = None, primary = None, spectrum_layers = defaults::SPECTRUM_LAYERS, l_phi = None, grid_m = None, precision = defaults::PRECISION, heads = None, layers = None, device = defaults::DEVICE, steps = None, runs = None, revisions = None, init = None, stack = None),
       text_signature = "(models, *, out, model_ids=None, models_file=None, primary=None, spectrum_layers='0-3', l_phi='1.13', grid_m=None, precision='f64', heads=None, layers=None, device='cpu', steps=None, runs=None, revisions=None, init=None, stack=None)")]
// Each keyword argument of the Python function is one parameter here (pyo3).
#[allow(clippy::too_many_arguments)]
pub fn study<'py>(
    py: Python<'py>,
    models: &Bound<'py, PyAny>,
    out: &Bound<'py, PyAny>,
    model_ids: Option<&Bound<'py, PyAny>>,
    models_file: Option<&Bound<'py, PyAny>>,
    primary: Option<String>,
    spectrum_layers: &str,
    l_phi: Option<&Bound<'py, PyAny>>,
    grid_m: Option<i64>,
    precision: &str,
    heads: Option<i64>,
    layers: Option<i64>,
    device: &str,
    steps: Option<&Bound<'py, PyAny>>,
    runs: Option<&Bound<'py, PyAny>>,
    revisions: Option<&Bound<'py, PyAny>>,
    init: Option<&Bound<'py, PyAny>>,
    stack: Option<String>,
) -> PyResult<Bound<'py, PyDict>> {
    let paths = paths_arg(models, "models")?;
    let fields = model_fields(paths.len(), steps, runs, revisions)?;
    let refs = paths
        .iter()
        .zip(&fields)
        .map(|(p, f)| model_ref_of(Some(p), f.revision.as_deref()))
        .collect::<PyResult<Vec<_>>>()?;
    let req = StudyRequest {
        models: refs,
        model_fields: fields,
        models_file: opt_path(models_file, "models_file")?,
        model_ids: strings_arg(model_ids, "model_ids")?,
        init: crate::init_input(init, None, None)?,
        out: path_arg(out, "out")?,
        certify: certify_options(l_phi, grid_m, precision, heads, layers, stack)?,
        primary,
        spectrum_layers: layers_arg(spectrum_layers)?,
        style: Style::Shared,
    };
    let named: Vec<PathBuf> = req.models_file.iter().cloned().collect();
    let report = crate::on_device(py, device, || {
        run_command(py, true, move |ui| specbound::cmd::study::run(&req, ui))
    })?;
    let report = match report {
        Ok(r) => r,
        Err(e) if cancelled(&e) => {
            return Err(pyo3::exceptions::PyKeyboardInterrupt::new_err("cancelled"))
        }
        Err(e) => {
            let named: Vec<&Path> = named.iter().map(|p| p.as_path()).collect();
            return Err(cmd_error(&e, &named));
        }
    };
    let o = &report.outcome;
    let d = PyDict::new(py);
    d.set_item("certified", o.certified)?;
    d.set_item("reused", o.reused)?;
    let inconclusive = PyDict::new(py);
    for (id, why) in &o.inconclusive {
        inconclusive.set_item(id, why)?;
    }
    d.set_item("inconclusive", inconclusive)?;
    d.set_item("report", o.report.as_ref().map(|p| p.display().to_string()))?;
    let (figures, skipped) = (PyDict::new(py), PyDict::new(py));
    for (n, f) in &o.figures {
        match f {
            Ok(p) => figures.set_item(n, p.display().to_string())?,
            Err(why) => skipped.set_item(n, why)?,
        }
    }
    match &o.trajectory_figure {
        Some(Ok(p)) => figures.set_item(6, p.display().to_string())?,
        Some(Err(why)) => skipped.set_item(6, why)?,
        None => {}
    }
    d.set_item("figures", figures)?;
    d.set_item("skipped_figures", skipped)?;
    d.set_item("exit_code", report.exit().code())?;
    d.set_item("reason", report.reason())?;
    Ok(d)
}

/// The fields of `n` models from the lists `steps`, `runs` and `revisions`
/// (each index-matched with the models, None entries for none), checked
/// as the command line checks `--step`, `--run` and `--revision`.
fn model_fields(
    n: usize,
    steps: Option<&Bound<'_, PyAny>>,
    runs: Option<&Bound<'_, PyAny>>,
    revisions: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<ModelFields>> {
    let mut out = vec![ModelFields::default(); n];
    for (key, list) in [("step", steps), ("run", runs), ("revision", revisions)] {
        let Some(list) = list else { continue };
        let what = format!("{key}s");
        if list.is_instance_of::<PyString>() {
            return Err(PyTypeError::new_err(format!(
                "{what} must be a list (one entry per model), not a str"
            )));
        }
        let items: Vec<Bound<'_, PyAny>> = list
            .try_iter()
            .map_err(|_| {
                PyTypeError::new_err(format!("{what} must be a list, one entry per model"))
            })?
            .collect::<PyResult<_>>()?;
        if items.len() != n {
            return Err(PyValueError::new_err(format!(
                "{what}: {} entries for {n} models (one per model, None for none)",
                items.len()
            )));
        }
        for (f, item) in out.iter_mut().zip(items) {
            if item.is_none() {
                continue;
            }
            let text = if key == "step" {
                if item.is_instance_of::<PyBool>() || !item.is_instance_of::<PyInt>() {
                    return Err(PyTypeError::new_err(format!(
                        "steps must hold ints (or None), got an item of type {}",
                        item.get_type().name()?
                    )));
                }
                item.str()?.to_string()
            } else {
                item.extract::<String>()
                    .map_err(|_| PyTypeError::new_err(format!("{what} must hold str (or None)")))?
            };
            f.set(key, &text)
                .map_err(|e| PyValueError::new_err(format!("{what}: {e}")))?;
        }
    }
    Ok(out)
}

/// Merges the parts of a sharded run (``specbound certify --shard K/N
/// --out PART``) into one certificate (the command line's ``specbound
/// merge``), re-deriving every aggregate from the parts.
///
/// ``parts`` is a list of part files, in any order (every matrix of the
/// model exactly once). ``out`` writes the certificate (atomically) and
/// ``csv`` the four tables into a directory, as the command line's
/// ``--out`` and ``--csv``; ``model_id`` fills the tables' ``model_id``
/// column (default: the last component of the certificate's
/// ``model.path``). Returns the :class:`Certificate` (``certified =
/// False`` with the reason when the bounds could not be certified). Bad
/// input raises ``ValueError`` (or ``FileNotFoundError``).
///
/// Example:
///
/// >>> import specbound
/// >>> specbound.merge(["no-such-part.json"])
/// Traceback (most recent call last):
/// ...
/// FileNotFoundError: no-such-part.json...
#[pyfunction]
#[pyo3(signature = (parts, *, out = None, csv = None, model_id = None))]
pub fn merge(
    py: Python<'_>,
    parts: &Bound<'_, PyAny>,
    out: Option<&Bound<'_, PyAny>>,
    csv: Option<&Bound<'_, PyAny>>,
    model_id: Option<String>,
) -> PyResult<Certificate> {
    let req = MergeRequest {
        parts: paths_arg(parts, "parts")?,
        outputs: CertOutputs {
            out: opt_path(out, "out")?,
            csv: opt_path(csv, "csv")?,
        },
        model_id,
    };
    let (named, id) = (req.parts.clone(), req.model_id.clone());
    let report =
        run_command(py, false, move |_| specbound::cmd::merge::run(&req))?.map_err(|e| {
            let named: Vec<&Path> = named.iter().map(|p| p.as_path()).collect();
            cmd_error(&e, &named)
        })?;
    Ok(match report.outcome {
        Ok(c) => {
            let id = id.unwrap_or_else(|| {
                specbound::io::model_ref::default_id_of_path(Path::new(&c.model.path))
            });
            Certificate::new(Ok(*c), id)
        }
        Err(why) => Certificate::new(Err(why), id.unwrap_or_default()),
    })
}

/// Writes the study's HTML report (tables and figures) from existing
/// certificates (the command line's ``specbound report``), atomically, to
/// ``out``, and returns its path.
///
/// ``certs`` is a list of certificate files (e.g. a study's
/// ``certificates/*.json``); ``model_ids`` their ids, one per certificate
/// in order (default: each file's stem); ``primary`` and
/// ``spectrum_layers`` are :func:`study`'s. Bad input raises
/// ``ValueError`` (or ``FileNotFoundError``).
///
/// Example:
///
/// >>> import os, tempfile, specbound
/// >>> d = tempfile.mkdtemp()
/// >>> specbound.certify().save(os.path.join(d, "minilm.json"))
/// >>> page = specbound.report([os.path.join(d, "minilm.json")], out=os.path.join(d, "r.html"))
/// >>> os.path.getsize(page) > 0
/// True
#[pyfunction]
#[pyo3(signature = (certs, *, out, model_ids = None, primary = None, spectrum_layers = defaults::SPECTRUM_LAYERS),
       text_signature = "(certs, *, out, model_ids=None, primary=None, spectrum_layers='0-3')")]
pub fn report(
    py: Python<'_>,
    certs: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    model_ids: Option<&Bound<'_, PyAny>>,
    primary: Option<String>,
    spectrum_layers: &str,
) -> PyResult<String> {
    let req = ReportRequest {
        certs: paths_arg(certs, "certs")?,
        out: path_arg(out, "out")?,
        model_ids: strings_arg(model_ids, "model_ids")?,
        primary,
        spectrum_layers: layers_arg(spectrum_layers)?,
    };
    let named = req.certs.clone();
    let report =
        run_command(py, false, move |_| specbound::cmd::report::run(&req))?.map_err(|e| {
            let named: Vec<&Path> = named.iter().map(|p| p.as_path()).collect();
            cmd_error(&e, &named)
        })?;
    Ok(report.out.display().to_string())
}
