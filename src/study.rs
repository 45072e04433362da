//! The paper's study: many checkpoints, one after another, each certified
//! (or its certificate from an earlier run reused when its model hashes and
//! parameters match), then the multi-model tables, the five figures and
//! the HTML report, all read from the certificates.
//!
//! Output directory `DIR`:
//!
//! * `certificates/<model_id>.json`: one certificate per model, each
//!   written atomically as soon as its model is done, so that an
//!   interrupted study resumes where it stopped;
//! * `tables/`, `figures/`, `report.html`: staged together and written all
//!   or nothing once every model is done, `report.html` last (a new report
//!   implies new tables and figures).
//!
//! Models run one after another, each using the cores as `certify` does;
//! what a study keeps between models is the certificates (their JSON is
//! 1.8 MB for all-MiniLM-L6-v2), never the weights or the spectra's
//! working data.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::arch::{self, Architecture};
use crate::bounds::default_grid_m;
use crate::certificate::{Certificate, CertificateError};
use crate::certify::{certify_run, CertifyError, CertifyOptions, Outcome, Run, RunScope};
use crate::io::checkpoint::Checkpoint;
use crate::io::model_ref::ResolvedModel;
use crate::io::output::{OutputError, Outputs};
use crate::progress::Progress;
use crate::report::figures::{self, Figure};
use crate::report::set::{ModelCert, StudySet};
use crate::report::{html, tables, trajectory};

/// Largest `--models` file read.
pub(crate) const MAX_LIST_BYTES: u64 = 1 << 20;
/// Longest model id.
pub(crate) const MAX_ID_LEN: usize = 128;

/// One model of a study: the argument as given and its id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StudyModel {
    /// The model (a directory or file `certify` accepts).
    pub path: PathBuf,
    /// Its id: the file name under `certificates/` and the `model_id` column.
    pub id: String,
    /// Its training step, when it belongs to a trajectory.
    pub step: Option<u64>,
    /// The trajectory it belongs to (`run=NAME`); `None` is the default
    /// run (`DEFAULT_RUN`). Only meaningful with a step.
    pub run: Option<String>,
    /// The initialisation of its distance measures (`init=MODEL`, or by
    /// default the step-0 model of its run: `assign_inits`), a local
    /// path; `None`: the measures without an initialisation.
    pub init: Option<PathBuf>,
}

/// The name of the trajectory of stepped models given no `run=NAME`.
pub(crate) const DEFAULT_RUN: &str = "default";

/// The `key=value` fields a model can carry (after it on a `--models`
/// line, or as `--step`, `--run`, `--revision` after a MODEL argument).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelFields {
    /// `step=N`: the training step.
    pub step: Option<u64>,
    /// `run=NAME`: the trajectory the model belongs to.
    pub run: Option<String>,
    /// `revision=REV`: the Hugging Face revision of an `org/name` id
    /// (`stepN`, Pythia's naming, gives step N).
    pub revision: Option<String>,
    /// `init=MODEL`: the initialisation of the model's distance measures
    /// (`certify --init`; in a models file a relative path is the file's
    /// neighbour, as the model's).
    pub init: Option<PathBuf>,
}

/// The known fields, as messages list them.
const KNOWN_FIELDS: &str = "step=N, run=NAME, revision=REV, init=MODEL";

/// One line of a `--models` file: the model and its fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ListEntry {
    /// The model (relative paths already taken from the file's directory).
    pub path: PathBuf,
    /// Its fields.
    pub fields: ModelFields,
    /// The 1-based line number (for messages).
    pub line: usize,
}

/// The step a Hugging Face revision names: `stepN` (Pythia's naming,
/// `step0` ... `step143000`) is step N; any other revision names none.
pub(crate) fn step_of_revision(rev: &str) -> Option<u64> {
    let digits = rev.strip_prefix("step")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Parses a step value (a whole number, decimal digits only).
pub(crate) fn parse_step(text: &str) -> Result<u64, String> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(n) = text.parse() {
            return Ok(n);
        }
    }
    Err(format!(
        "step '{}' is not a whole number from 0 to {}",
        crate::io::escape_to(text, 60),
        u64::MAX
    ))
}

impl ModelFields {
    /// Sets `key` to `value`; `Err` for an unknown or repeated key or a bad
    /// value (the message names the key, values escaped).
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let repeated = || format!("'{key}' given twice");
        match key {
            "step" => {
                if self.step.is_some() {
                    return Err(repeated());
                }
                self.step = Some(parse_step(value)?);
            }
            "run" => {
                if self.run.is_some() {
                    return Err(repeated());
                }
                check_id(value).map_err(|_| {
                    format!(
                        "run name '{}' is not usable: names are 1 to {MAX_ID_LEN} characters from \
                         A-Z a-z 0-9 . _ + - and do not start with '.' or '-'",
                        crate::io::escape_to(value, 60)
                    )
                })?;
                self.run = Some(value.to_string());
            }
            "revision" => {
                if self.revision.is_some() {
                    return Err(repeated());
                }
                self.revision = Some(value.to_string());
            }
            "init" => {
                if self.init.is_some() {
                    return Err(repeated());
                }
                if value.is_empty() {
                    return Err("init= names no model".into());
                }
                self.init = Some(PathBuf::from(value));
            }
            other => {
                return Err(format!(
                    "unknown field '{}' (known: {KNOWN_FIELDS})",
                    crate::io::escape_to(other, 60)
                ))
            }
        }
        Ok(())
    }

    /// The step: `step=N`, or the one the revision names (`stepN`); `Err`
    /// when both are given and disagree.
    pub(crate) fn resolved_step(&self) -> Result<Option<u64>, String> {
        let from_rev = self.revision.as_deref().and_then(step_of_revision);
        match (self.step, from_rev) {
            (Some(a), Some(b)) if a != b => Err(format!(
                "step {a} contradicts the revision step{b} (give one of them)"
            )),
            (Some(a), _) => Ok(Some(a)),
            (None, b) => Ok(b),
        }
    }
}

/// What a study is run with.
#[derive(Clone, Debug)]
pub(crate) struct StudyOptions {
    /// Options of every certification.
    pub certify: CertifyOptions,
    /// Id of the primary model (figures 1 and 5); default the largest.
    pub primary: Option<String>,
    /// Layers of the primary model figure 1 draws.
    pub spectrum_layers: Vec<usize>,
}

/// Why a study could not run (one line each; the model errors name the file).
#[derive(Debug)]
pub(crate) enum StudyError {
    /// The `--models` file cannot be read or has a bad line.
    List {
        /// The file.
        file: PathBuf,
        /// What is wrong (with the line number where there is one).
        message: String,
    },
    /// Bad arguments: ids, the primary model, no model at all.
    Usage(String),
    /// A model cannot be read or is not what the proxies need.
    Model(CertifyError),
    /// An output cannot be written.
    Output(OutputError),
}

impl fmt::Display for StudyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StudyError::List { file, message } => {
                write!(f, "{}: {message}", crate::io::shown_path(file))
            }
            StudyError::Usage(m) => f.write_str(m),
            StudyError::Model(e) => write!(f, "{e}"),
            StudyError::Output(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for StudyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StudyError::Model(e) => e.source(),
            StudyError::Output(e) => e.source(),
            _ => None,
        }
    }
}

impl From<OutputError> for StudyError {
    fn from(e: OutputError) -> Self {
        StudyError::Output(e)
    }
}

impl From<CertifyError> for StudyError {
    fn from(e: CertifyError) -> Self {
        StudyError::Model(e)
    }
}

/// The models listed in `file` with their fields: each line is a model,
/// then optional whitespace-separated `key=value` fields (`step=N`,
/// `run=NAME`, `revision=REV`, `init=MODEL`); blank lines and lines whose first
/// non-blank character is `#` are skipped. A line that names an existing
/// file or directory as a whole is that model (a path with spaces). A
/// relative path is taken relative to the directory of `file`. `Err`
/// names the file and the line of an unknown key or a bad value.
pub(crate) fn read_model_entries(file: &Path) -> Result<Vec<ListEntry>, StudyError> {
    let text = crate::io::limits::read_capped_string(file, MAX_LIST_BYTES, "models file").map_err(
        |e| {
            let msg = e.to_string();
            let prefix = format!("{}: ", crate::io::shown_path(file));
            StudyError::List {
                file: file.to_path_buf(),
                message: msg.strip_prefix(&prefix).unwrap_or(&msg).to_string(),
            }
        },
    )?;
    let base = file.parent().unwrap_or(Path::new(""));
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let exists = |m: &str| std::fs::symlink_metadata(base.join(m)).is_ok();
        let (model, rest): (&str, Vec<&str>) = if exists(t) {
            (t, Vec::new())
        } else {
            let mut words = t.split_whitespace();
            let first = words.next().unwrap_or(t);
            (first, words.collect())
        };
        let mut fields = ModelFields::default();
        for w in rest {
            let bad = |message: String| StudyError::List {
                file: file.to_path_buf(),
                message: format!("line {}: {message}", n + 1),
            };
            let Some((k, v)) = w.split_once('=') else {
                return Err(bad(format!(
                    "'{}' after the model is not a key=value field (known: {KNOWN_FIELDS})",
                    crate::io::escape_to(w, 60)
                )));
            };
            fields.set(k, v).map_err(bad)?;
        }
        // A relative initialisation is the file's neighbour, as a model is.
        if let Some(i) = fields.init.take() {
            let id = !exists(&i.to_string_lossy())
                && crate::io::hub::looks_like_id(&i.to_string_lossy());
            fields.init = Some(if i.is_absolute() || id {
                i
            } else {
                base.join(i)
            });
        }
        let p = PathBuf::from(model);
        // A relative path is the file's neighbour; an `org/name` that is
        // no such neighbour stays as written, a Hugging Face id.
        let near = base.join(&p);
        let id = !exists(model) && crate::io::hub::looks_like_id(model);
        out.push(ListEntry {
            path: if p.is_absolute() || id { p } else { near },
            fields,
            line: n + 1,
        });
    }
    Ok(out)
}

/// Checks that `id` can name a file and a CSV field as it is: 1 to 128
/// characters from `A-Z a-z 0-9 . _ + -`, not starting with `.` or `-`.
pub(crate) fn check_id(id: &str) -> Result<(), String> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || "._+-".contains(c);
    if id.is_empty()
        || id.len() > MAX_ID_LEN
        || id.starts_with(['.', '-'])
        || !id.chars().all(ok_char)
    {
        let shown: String = id.chars().take(60).flat_map(char::escape_default).collect();
        return Err(format!(
            "model id '{shown}' is not usable: ids are 1 to {MAX_ID_LEN} characters from A-Z a-z 0-9 . _ + - \
             and do not start with '.' or '-' (pass --model-id)"
        ));
    }
    Ok(())
}

/// Pairs models with ids: `ids` in order when given (as many as models),
/// else each model's default id ([`ResolvedModel::default_id`]). Every id
/// must pass [`check_id`] and be distinct.
pub(crate) fn assign_ids(
    paths: Vec<ResolvedModel>,
    ids: &[String],
) -> Result<Vec<StudyModel>, StudyError> {
    if paths.is_empty() {
        return Err(StudyError::Usage(
            "no model given: pass MODEL arguments or --models FILE".into(),
        ));
    }
    if !ids.is_empty() && ids.len() != paths.len() {
        return Err(StudyError::Usage(format!(
            "{} --model-id values for {} models: give one per model, in order, or none",
            ids.len(),
            paths.len()
        )));
    }
    let models: Vec<StudyModel> = paths
        .into_iter()
        .enumerate()
        .map(|(i, r)| StudyModel {
            id: ids.get(i).cloned().unwrap_or_else(|| default_study_id(&r)),
            path: r.path,
            step: None,
            run: None,
            init: None,
        })
        .collect();
    for (i, m) in models.iter().enumerate() {
        check_id(&m.id).map_err(|e| StudyError::Usage(format!("{}: {e}", m.path.display())))?;
        if let Some(o) = models[..i].iter().find(|o| o.id == m.id) {
            return Err(StudyError::Usage(format!(
                "two models have the id '{}' ({} and {}): pass --model-id",
                m.id,
                o.path.display(),
                m.path.display()
            )));
        }
    }
    Ok(models)
}

/// The default id of a study model: [`ResolvedModel::default_id`], with
/// `.REV` appended for a Hugging Face id at a revision other than `main`
/// (so that the checkpoints of a trajectory, `pythia-70m` at `step0`,
/// `step1000`, ..., get distinct ids: `pythia-70m.step0`, ...).
pub(crate) fn default_study_id(r: &ResolvedModel) -> String {
    match &r.hub {
        Some(h) if h.revision != "main" => format!("{}.{}", h.name(), h.revision),
        _ => r.default_id(),
    }
}

/// Gives the models their steps and runs from `fields` (index-matched;
/// missing entries are no fields): the step of `step=N` or of a revision
/// `stepN`. `Err` when a step contradicts its revision, a run is named
/// without a step, or two models of one run have the same step.
pub(crate) fn assign_steps(
    models: &mut [StudyModel],
    fields: &[ModelFields],
) -> Result<(), StudyError> {
    for (m, f) in models.iter_mut().zip(fields) {
        let step = f
            .resolved_step()
            .map_err(|e| StudyError::Usage(format!("{}: {e}", m.path.display())))?;
        if f.run.is_some() && step.is_none() {
            return Err(StudyError::Usage(format!(
                "{}: run={} needs a step (step=N, --step N or a revision stepN)",
                m.path.display(),
                f.run.as_deref().unwrap_or_default()
            )));
        }
        m.step = step;
        m.run = f.run.clone();
    }
    for (i, m) in models.iter().enumerate() {
        let Some(s) = m.step else { continue };
        if let Some(o) = models[..i]
            .iter()
            .find(|o| o.step == Some(s) && o.run == m.run)
        {
            return Err(StudyError::Usage(format!(
                "two models of the run '{}' have step {s} ({} and {}): steps are unique within a run",
                m.run.as_deref().unwrap_or(DEFAULT_RUN),
                o.id,
                m.id
            )));
        }
    }
    Ok(())
}

/// Gives the models their initialisations: `inits[i]` (index-matched, the
/// resolved `init=MODEL` fields; missing entries are none) where given;
/// otherwise, for a model with a step whose run has a model at step 0,
/// that model's path: a run that starts at step 0 (Pythia's `step0`) starts
/// at its initialisation (`docs/study.md`, "Initialisation"). The step-0
/// model is then its own initialisation (every distance 0).
pub(crate) fn assign_inits(models: &mut [StudyModel], inits: &[Option<PathBuf>]) {
    let start: Vec<Option<PathBuf>> = models
        .iter()
        .map(|m| {
            m.step?;
            models
                .iter()
                .find(|o| o.step == Some(0) && o.run == m.run)
                .map(|o| o.path.clone())
        })
        .collect();
    for (i, (m, s)) in models.iter_mut().zip(start).enumerate() {
        m.init = inits.get(i).cloned().flatten().or(s);
    }
}

/// Parses a layer list: `0-3`, `0,2,5` or a mix (`0-2,7`).
pub fn parse_layers(text: &str) -> Result<Vec<usize>, String> {
    let bad = || format!("invalid layer list '{text}' (examples: 0-3, 0,2,5)");
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (
                    a.trim().parse().map_err(|_| bad())?,
                    b.trim().parse().map_err(|_| bad())?,
                );
                if a > b || b - a > 100_000 {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// What became of one model.
#[derive(Clone, Debug)]
pub(crate) enum ModelStatus {
    /// Its certificate from an earlier run was reused.
    Reused,
    /// Certified now, in this many seconds.
    Certified(f64),
    /// Could not be certified (the reason names the matrix).
    Inconclusive(String),
}

/// Reported as each model finishes.
pub(crate) struct ModelDone<'a> {
    /// 1-based position.
    pub index: usize,
    /// Number of models.
    pub total: usize,
    /// The model.
    pub model: &'a StudyModel,
    /// What happened.
    pub status: &'a ModelStatus,
    /// Why an existing certificate was not reused, if there was one.
    pub not_reused: Option<&'a str>,
    /// Why the model's measures could not be certified (its certificate
    /// then has the bounds alone).
    pub measures_note: Option<&'a str>,
    /// The certificate, when there is one.
    pub cert: Option<&'a Certificate>,
    /// Where it is.
    pub cert_path: &'a Path,
}

/// What a finished study wrote.
#[derive(Clone, Debug)]
pub struct StudyOutcome {
    /// Models certified in this run.
    pub certified: usize,
    /// Models whose certificate was reused.
    pub reused: usize,
    /// `(id, reason)` of the models that could not be certified.
    pub inconclusive: Vec<(String, String)>,
    /// Every figure: its path when drawn, the reason when skipped.
    pub figures: Vec<(usize, Result<PathBuf, String>)>,
    /// Figure files of an earlier run that this run skipped and removed.
    pub removed: Vec<PathBuf>,
    /// The report, when at least one model was certified.
    pub report: Option<PathBuf>,
    /// The primary model drawn (its id).
    pub primary: Option<String>,
    /// A note when `--primary` named a model that could not be certified.
    pub primary_note: Option<String>,
    /// The trajectory figure (6): its path when drawn, the reason when
    /// skipped; `None` when no model has a step.
    pub trajectory_figure: Option<Result<PathBuf, String>>,
}

/// `DIR/certificates/<id>.json`.
pub(crate) fn certificate_path(out: &Path, id: &str) -> PathBuf {
    out.join("certificates").join(format!("{id}.json"))
}

/// Why the certificate at `path` cannot stand for `model` under `opts`, or
/// `Ok(cert)` when its model hashes and parameters match.
fn reusable(
    path: &Path,
    model: &Path,
    arch: &Architecture,
    opts: &CertifyOptions,
) -> Result<Certificate, String> {
    let cert = Certificate::read(path).map_err(|e: CertificateError| match e {
        CertificateError::Io { source, .. } => format!("unreadable ({source})"),
        CertificateError::Invalid { at, message, .. } => format!("invalid at {at}: {message}"),
    })?;
    let p = &cert.parameters;
    let want_m = opts
        .grid_m
        .unwrap_or_else(|| default_grid_m(arch.layers, arch.hidden));
    if p.l_phi != opts.l_phi.as_str() {
        return Err(format!(
            "L_phi differs ({} there, {} now)",
            crate::io::escape(&p.l_phi),
            crate::io::escape(opts.l_phi.as_str())
        ));
    }
    if p.grid_m != want_m {
        return Err(format!("grid m differs ({} there, {want_m} now)", p.grid_m));
    }
    if p.precision != opts.precision {
        return Err(format!(
            "precision differs ({} there, {} now)",
            p.precision, opts.precision
        ));
    }
    let md = &cert.model;
    if (md.architecture.as_str(), md.layers, md.hidden, md.heads)
        != (arch.family.as_str(), arch.layers, arch.hidden, arch.heads)
    {
        return Err(format!(
            "architecture differs ({} L={} N={} H={} there, {} L={} N={} H={} now)",
            crate::io::escape(&md.architecture),
            md.layers,
            md.hidden,
            md.heads,
            arch.family,
            arch.layers,
            arch.hidden,
            arch.heads
        ));
    }
    let ck = Checkpoint::open(model).map_err(|e| format!("model unreadable: {e}"))?;
    let now: Vec<(String, String)> = ck
        .file_hashes()
        .map_err(|e| format!("model unreadable: {e}"))?
        .into_iter()
        .map(|h| (h.file, h.sha256))
        .collect();
    let there: Vec<(String, String)> = md
        .files
        .iter()
        .map(|f| (f.file.clone(), f.sha256.clone()))
        .collect();
    if now != there {
        return Err("the model's files differ (SHA-256)".into());
    }
    // Evidence, not just a file that parses: what `verify` checks without
    // the model (last: it is the costliest check).
    if let Some(check) = crate::evidence::verify::verify_internal(&cert).failure {
        return Err(format!("not consistent ({check})"));
    }
    Ok(cert)
}

/// Runs a study of `models` into `out` (see the module documentation).
/// `progress` receives the matrices of each model as `certify` reports
/// them; `on_model` is called once per model as it finishes. `Err` for bad
/// input (before any computation where it can be told then: every model is
/// opened and recognised first) or an output that cannot be written;
/// certificates of models finished before an error stay in place.
pub(crate) fn run_study(
    models: &[StudyModel],
    opts: &StudyOptions,
    out: &Path,
    progress: &dyn Progress,
    on_model: &mut dyn FnMut(&ModelDone),
) -> Result<StudyOutcome, StudyError> {
    let archs = check_before_computing(models, opts, out)?;
    let mut done: Vec<ModelCert> = Vec::with_capacity(models.len());
    let mut inconclusive = Vec::new();
    let (mut certified, mut reused) = (0, 0);
    for (i, (m, a)) in models.iter().zip(&archs).enumerate() {
        let path = certificate_path(out, &m.id);
        let r = study_model(m, a, opts, out, &path, progress)?;
        match r.status {
            ModelStatus::Reused => reused += 1,
            ModelStatus::Certified(_) => certified += 1,
            ModelStatus::Inconclusive(_) => {}
        }
        on_model(&ModelDone {
            index: i + 1,
            total: models.len(),
            model: m,
            status: &r.status,
            not_reused: r.not_reused.as_deref(),
            measures_note: r.measures_note.as_deref(),
            cert: r.cert.as_ref(),
            cert_path: &path,
        });
        match (r.cert, r.status) {
            (Some(c), _) => done.push(ModelCert {
                id: m.id.clone(),
                cert: c,
            }),
            (None, ModelStatus::Inconclusive(why)) => inconclusive.push((m.id.clone(), why)),
            (None, _) => unreachable!("a reused or certified model has a certificate"),
        }
    }
    let mut outcome = StudyOutcome {
        certified,
        reused,
        inconclusive: inconclusive.clone(),
        figures: Vec::new(),
        removed: Vec::new(),
        report: None,
        primary: None,
        primary_note: None,
        trajectory_figure: None,
    };
    if done.is_empty() {
        return Ok(outcome);
    }
    let set = study_set(models, opts, done, inconclusive, &mut outcome)?;
    write_study_outputs(&set, models, out, &mut outcome)?;
    Ok(outcome)
}

/// Everything told before the first computation: `--primary` names a
/// model, every output can be written, the parameters parse, and every
/// model (and initialisation) opens and is recognised; the models'
/// architectures, in order.
fn check_before_computing(
    models: &[StudyModel],
    opts: &StudyOptions,
    out: &Path,
) -> Result<Vec<Architecture>, StudyError> {
    if let Some(p) = &opts.primary {
        if !models.iter().any(|m| &m.id == p) {
            return Err(StudyError::Usage(format!(
                "--primary '{p}' is not the id of a model of this study"
            )));
        }
    }
    planned_outputs(models, out).check()?;
    if let Some(m) = opts.certify.grid_m {
        crate::certify::check_grid_m(m)?;
    }
    let mut archs = Vec::with_capacity(models.len());
    for m in models {
        let ck = Checkpoint::open(&m.path).map_err(|e| CertifyError::Model(e.into()))?;
        archs.push(arch::detect(&ck, &opts.certify.overrides).map_err(CertifyError::Model)?);
        if let Some(init) = &m.init {
            crate::certify::check_init_architecture(&m.path, init, &opts.certify)?;
        }
    }
    Ok(archs)
}

/// Every file and directory a study of `models` may write under `out`
/// (empty contents), so that a bad output target is refused before any
/// computation.
fn planned_outputs(models: &[StudyModel], out: &Path) -> Outputs {
    let mut planned = Outputs::new();
    planned.create_dir(out);
    planned.create_dir(out.join("certificates"));
    for m in models {
        planned.stage(certificate_path(out, &m.id), Vec::new());
    }
    planned.create_dir(out.join("tables"));
    for name in tables::STUDY_TABLE_NAMES {
        planned.stage(out.join("tables").join(name), Vec::new());
    }
    planned.create_dir(out.join("figures"));
    for name in trajectory::TABLE_NAMES {
        planned.stage(out.join("tables").join(name), Vec::new());
    }
    for name in figures::FILE_NAMES {
        planned.stage(out.join("figures").join(name), Vec::new());
    }
    planned.stage(
        out.join("figures").join(trajectory::FIGURE_FILE),
        Vec::new(),
    );
    planned.stage(out.join("report.html"), Vec::new());
    planned
}

/// What became of one model of a study ([`study_model`]).
struct ModelResult {
    status: ModelStatus,
    /// Its certificate, unless inconclusive.
    cert: Option<Certificate>,
    /// Why an existing certificate was not reused, if there was one.
    not_reused: Option<String>,
    /// Why its measures could not be certified.
    measures_note: Option<String>,
}

/// One model `m` (of architecture `a`) of a study: its certificate at
/// `path` reused when it matches, else certified now and written there.
fn study_model(
    m: &StudyModel,
    a: &Architecture,
    opts: &StudyOptions,
    out: &Path,
    path: &Path,
    progress: &dyn Progress,
) -> Result<ModelResult, StudyError> {
    let mut not_reused = None;
    let mut cert = None;
    if path.exists() {
        match reusable(path, &m.path, a, &opts.certify) {
            Ok(c) => cert = Some(c),
            Err(why) => not_reused = Some(why),
        }
    }
    let mut measures_note = None;
    let status = if let Some(c) = cert.as_mut() {
        // A certificate whose measures an earlier run could not
        // certify, or made with another initialisation: the measures
        // alone are certified again.
        if c.measures.is_none() || !same_init(c, m.init.as_deref())? {
            measures_note = add_measures(&m.path, m.init.as_deref(), c, &opts.certify, progress)?;
            // Written either way: measures of another initialisation
            // are not left in the file.
            write_certificate(out, path, c)?;
        }
        ModelStatus::Reused
    } else {
        let t = Instant::now();
        match certify_run(&m.path, &opts.certify, &RunScope::default(), progress)?
            .and_then(Run::into_certificate)
        {
            Outcome::Certified((mut c, results)) => {
                drop(results);
                measures_note =
                    add_measures(&m.path, m.init.as_deref(), &mut c, &opts.certify, progress)?;
                let secs = t.elapsed().as_secs_f64();
                write_certificate(out, path, &c)?;
                cert = Some(c);
                ModelStatus::Certified(secs)
            }
            Outcome::Inconclusive(why) => ModelStatus::Inconclusive(why.reason),
        }
    };
    Ok(ModelResult {
        status,
        cert,
        not_reused,
        measures_note,
    })
}

/// The set of the certified models `done` with their steps; the primary
/// drawn (and a note when `--primary`'s model could not be certified)
/// go into `outcome`.
fn study_set(
    models: &[StudyModel],
    opts: &StudyOptions,
    done: Vec<ModelCert>,
    inconclusive: Vec<(String, String)>,
    outcome: &mut StudyOutcome,
) -> Result<StudySet, StudyError> {
    let mut primary = opts.primary.clone();
    if let Some(p) = &primary {
        if !done.iter().any(|d| &d.id == p) {
            outcome.primary_note = Some(format!(
                "the primary model '{p}' could not be certified; figures 1 and 5 show the largest certified model instead"
            ));
            primary = None;
        }
    }
    let set = StudySet::new(
        done,
        primary.as_deref(),
        opts.spectrum_layers.clone(),
        inconclusive,
    )
    .map_err(StudyError::Usage)?
    .with_steps(
        |id| {
            let m = models.iter().find(|m| m.id == id)?;
            Some((
                m.run.clone().unwrap_or_else(|| DEFAULT_RUN.to_string()),
                m.step?,
            ))
        },
        primary.is_some(),
    );
    outcome.primary = Some(set.primary().id.clone());
    Ok(set)
}

/// The tables, figures and report of `set` written under `out` together
/// (the report last), stale figures removed; what was drawn, skipped and
/// removed goes into `outcome`.
fn write_study_outputs(
    set: &StudySet,
    models: &[StudyModel],
    out: &Path,
    outcome: &mut StudyOutcome,
) -> Result<(), StudyError> {
    let figs = figures::all(set);
    // The trajectory of the certified models with steps.
    let traj = trajectory::Trajectory::new(models.iter().filter_map(|m| {
        let i = set.models.iter().position(|d| d.id == m.id)?;
        Some((
            m.run.clone().unwrap_or_else(|| DEFAULT_RUN.to_string()),
            m.step?,
            i,
        ))
    }));
    let stepped = models.iter().any(|m| m.step.is_some());
    let traj_fig = trajectory::figure(set, &traj);
    let section = stepped.then(|| trajectory::section(set, &traj, &traj_fig));
    let page = html::page_with(set, &figs, section.as_deref());
    let mut o = Outputs::new();
    o.create_dir(out);
    o.create_dir(out.join("tables"));
    for (name, text) in tables::study_tables(set) {
        o.stage(out.join("tables").join(name), text.into_bytes());
    }
    for (name, text) in trajectory::tables(set, &traj) {
        o.stage(out.join("tables").join(name), text.into_bytes());
    }
    o.create_dir(out.join("figures"));
    for f in &figs {
        let p = out.join("figures").join(f.file);
        match &f.svg {
            Ok(svg) => {
                o.stage(&p, svg.as_bytes());
                outcome.figures.push((f.number, Ok(p)));
            }
            Err(why) => outcome.figures.push((f.number, Err(why.clone()))),
        }
    }
    let traj_path = out.join("figures").join(trajectory::FIGURE_FILE);
    if let Ok(svg) = &traj_fig.svg {
        o.stage(&traj_path, svg.as_bytes());
    }
    if stepped {
        outcome.trajectory_figure = Some(
            traj_fig
                .svg
                .as_ref()
                .map(|_| traj_path.clone())
                .map_err(Clone::clone),
        );
    }
    // Last: a new report implies new tables and figures.
    o.stage(out.join("report.html"), page.into_bytes());
    o.commit()?;
    let mut all_figs = figs;
    all_figs.push(traj_fig);
    outcome.removed = remove_stale(out, &all_figs);
    outcome.report = Some(out.join("report.html"));
    Ok(())
}

/// Adds the raw weights' norms and the norm-based measures to `cert` (a
/// certificate of the model at `path`), as `certify --measures` does,
/// reusing the proxies' spectral norms where the raw weights are their
/// transposes. `Ok(Some(why))` when they could not be certified: `cert`
/// is then left with its bounds alone, which stay certified.
///
/// *Guarantee: certified enclosure* of every interval added, as
/// [`crate::certify::certify_measures_reusing`].
fn add_measures(
    path: &Path,
    init: Option<&Path>,
    cert: &mut Certificate,
    opts: &CertifyOptions,
    progress: &dyn Progress,
) -> Result<Option<String>, StudyError> {
    match crate::certify::certify_measures_reusing(path, init, opts, Some(cert), progress)? {
        Outcome::Certified(m) => {
            m.attach(cert);
            Ok(None)
        }
        Outcome::Inconclusive(why) => {
            // Measures of another initialisation are not kept.
            cert.raw_weights = None;
            cert.measures = None;
            cert.init_model = None;
            if cert.version == crate::certificate::VERSION_MEASURES {
                cert.version = crate::certificate::VERSION;
            }
            Ok(Some(why.reason))
        }
    }
}

/// Whether `cert`'s measures were made with the initialisation `init`
/// (the same weight files, by SHA-256), or both without one.
fn same_init(cert: &Certificate, init: Option<&Path>) -> Result<bool, StudyError> {
    Ok(match (&cert.init_model, init) {
        (None, None) => true,
        (Some(im), Some(p)) => {
            let ck = Checkpoint::open(p).map_err(|e| CertifyError::Model(e.into()))?;
            let now = ck
                .file_hashes()
                .map_err(|e| CertifyError::Model(e.into()))?;
            now.len() == im.files.len()
                && now
                    .iter()
                    .zip(&im.files)
                    .all(|(h, f)| h.file == f.file && h.sha256 == f.sha256)
        }
        _ => false,
    })
}

/// Writes `cert` to `path` under `out` atomically.
fn write_certificate(out: &Path, path: &Path, cert: &Certificate) -> Result<(), StudyError> {
    let mut o = Outputs::new();
    o.create_dir(out);
    o.create_dir(out.join("certificates"));
    o.stage(path, cert.to_json_pretty().into_bytes());
    o.commit()?;
    Ok(())
}

/// Removes the files of skipped figures left by an earlier run, so that
/// `figures/` holds only what this run drew (best effort). Nothing is
/// removed through a link: `DIR/figures` must be a directory itself (not a
/// link to one) and each file a regular file (a link there is left alone).
fn remove_stale(out: &Path, figs: &[Figure]) -> Vec<PathBuf> {
    let dir = out.join("figures");
    if !std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
        return Vec::new();
    }
    figs.iter()
        .filter(|f| f.svg.is_err())
        .map(|f| dir.join(f.file))
        .filter(|p| p.symlink_metadata().is_ok_and(|m| m.is_file()))
        .filter(|p| std::fs::remove_file(p).is_ok())
        .collect()
}

/// The report page of existing certificates: `specbound report`. Ids are
/// `ids` in order when given, else each file's stem; the certificates are
/// read as evidence ([`crate::evidence::read_rederived`]: strict parse,
/// validation and the re-derivation of `verify` without `--model`), so a
/// certificate that `verify` rejects is refused, naming the file and the
/// first failed check. A report establishes that the certificates it draws
/// are consistent, not that they belong to their weights (`verify --model`).
pub(crate) fn report_from_certificates(
    certs: &[PathBuf],
    ids: &[String],
    primary: Option<&str>,
    spectrum_layers: Vec<usize>,
) -> Result<(StudySet, Vec<Figure>, String), Box<dyn std::error::Error + Send + Sync>> {
    if certs.is_empty() {
        return Err("no certificate given".into());
    }
    if !ids.is_empty() && ids.len() != certs.len() {
        return Err(format!(
            "{} --model-id values for {} certificates: give one per certificate, in order, or none",
            ids.len(),
            certs.len()
        )
        .into());
    }
    let mut models: Vec<ModelCert> = Vec::with_capacity(certs.len());
    for (i, p) in certs.iter().enumerate() {
        let id = match ids.get(i) {
            Some(id) => id.clone(),
            None => p
                .file_stem()
                .map(|s| s.to_string_lossy().to_string())
                .unwrap_or_default(),
        };
        check_id(&id).map_err(|e| format!("{}: {e}", p.display()))?;
        if models.iter().any(|m| m.id == id) {
            return Err(format!(
                "{}: the id '{id}' is used twice: pass --model-id",
                p.display()
            )
            .into());
        }
        let cert = crate::evidence::read_rederived(p)?;
        models.push(ModelCert { id, cert });
    }
    let set = StudySet::new(models, primary, spectrum_layers, Vec::new())?;
    let figs = figures::all(&set);
    let page = html::page(&set, &figs);
    Ok((set, figs, page))
}
