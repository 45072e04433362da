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
use crate::report::{html, tables};

/// Largest `--models` file read.
pub const MAX_LIST_BYTES: u64 = 1 << 20;
/// Longest model id.
pub const MAX_ID_LEN: usize = 128;

/// One model of a study: the argument as given and its id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StudyModel {
    /// The model (a directory or file `certify` accepts).
    pub path: PathBuf,
    /// Its id: the file name under `certificates/` and the `model_id` column.
    pub id: String,
}

/// What a study is run with.
#[derive(Clone, Debug)]
pub struct StudyOptions {
    /// Options of every certification.
    pub certify: CertifyOptions,
    /// Id of the primary model (figures 1 and 5); default the largest.
    pub primary: Option<String>,
    /// Layers of the primary model figure 1 draws.
    pub spectrum_layers: Vec<usize>,
}

/// Why a study could not run (one line each; the model errors name the file).
#[derive(Debug)]
pub enum StudyError {
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
            StudyError::List { file, message } => write!(f, "{}: {message}", file.display()),
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

/// The models listed in `file`, one per line; blank lines and lines whose
/// first non-blank character is `#` are skipped. A relative path is taken
/// relative to the directory of `file`.
pub fn read_model_list(file: &Path) -> Result<Vec<PathBuf>, StudyError> {
    let text = crate::io::limits::read_capped_string(file, MAX_LIST_BYTES, "models file").map_err(
        |e| {
            let msg = e.to_string();
            let prefix = format!("{}: ", file.display());
            StudyError::List {
                file: file.to_path_buf(),
                message: msg.strip_prefix(&prefix).unwrap_or(&msg).to_string(),
            }
        },
    )?;
    let base = file.parent().unwrap_or(Path::new(""));
    let mut out = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let p = PathBuf::from(t);
        // A relative path is the file's neighbour; an `org/name` that is
        // no such neighbour stays as written, a Hugging Face id.
        let near = base.join(&p);
        let id = std::fs::symlink_metadata(&near).is_err() && crate::io::hub::looks_like_id(t);
        out.push(if p.is_absolute() || id { p } else { near });
    }
    Ok(out)
}

/// Checks that `id` can name a file and a CSV field as it is: 1 to 128
/// characters from `A-Z a-z 0-9 . _ + -`, not starting with `.` or `-`.
pub fn check_id(id: &str) -> Result<(), String> {
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
pub fn assign_ids(
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
            id: ids.get(i).cloned().unwrap_or_else(|| r.default_id()),
            path: r.path,
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
pub enum ModelStatus {
    /// Its certificate from an earlier run was reused.
    Reused,
    /// Certified now, in this many seconds.
    Certified(f64),
    /// Could not be certified (the reason names the matrix).
    Inconclusive(String),
}

/// Reported as each model finishes.
pub struct ModelDone<'a> {
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
}

/// `DIR/certificates/<id>.json`.
pub fn certificate_path(out: &Path, id: &str) -> PathBuf {
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
    if p.l_phi != opts.l_phi.trim() {
        return Err(format!(
            "L_phi differs ({} there, {} now)",
            crate::io::escape(&p.l_phi),
            crate::io::escape(opts.l_phi.trim())
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
pub fn run_study(
    models: &[StudyModel],
    opts: &StudyOptions,
    out: &Path,
    progress: &dyn Progress,
    on_model: &mut dyn FnMut(&ModelDone),
) -> Result<StudyOutcome, StudyError> {
    if let Some(p) = &opts.primary {
        if !models.iter().any(|m| &m.id == p) {
            return Err(StudyError::Usage(format!(
                "--primary '{p}' is not the id of a model of this study"
            )));
        }
    }
    // Refuse a bad output target before any computation.
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
    for name in figures::FILE_NAMES {
        planned.stage(out.join("figures").join(name), Vec::new());
    }
    planned.stage(out.join("report.html"), Vec::new());
    planned.check()?;
    // Every model opened and recognised before the first computation.
    crate::certify::parse_decimal(&opts.certify.l_phi, "L_phi")?;
    if let Some(m) = opts.certify.grid_m {
        crate::certify::check_grid_m(m)?;
    }
    let mut archs = Vec::with_capacity(models.len());
    for m in models {
        let ck = Checkpoint::open(&m.path).map_err(|e| CertifyError::Model(e.into()))?;
        archs.push(arch::detect(&ck, &opts.certify.overrides).map_err(CertifyError::Model)?);
    }
    let mut done: Vec<ModelCert> = Vec::with_capacity(models.len());
    let mut inconclusive = Vec::new();
    let (mut certified, mut reused) = (0, 0);
    for (i, (m, a)) in models.iter().zip(&archs).enumerate() {
        let path = certificate_path(out, &m.id);
        let mut not_reused = None;
        let mut cert = None;
        if path.exists() {
            match reusable(&path, &m.path, a, &opts.certify) {
                Ok(c) => cert = Some(c),
                Err(why) => not_reused = Some(why),
            }
        }
        let status = if cert.is_some() {
            reused += 1;
            ModelStatus::Reused
        } else {
            let t = Instant::now();
            match certify_run(&m.path, &opts.certify, &RunScope::default(), progress)?
                .and_then(Run::into_certificate)
            {
                Outcome::Certified((c, results)) => {
                    drop(results);
                    let secs = t.elapsed().as_secs_f64();
                    let mut o = Outputs::new();
                    o.create_dir(out);
                    o.create_dir(out.join("certificates"));
                    o.stage(&path, c.to_json_pretty().into_bytes());
                    o.commit()?;
                    cert = Some(c);
                    certified += 1;
                    ModelStatus::Certified(secs)
                }
                Outcome::Inconclusive(why) => ModelStatus::Inconclusive(why.reason),
            }
        };
        on_model(&ModelDone {
            index: i + 1,
            total: models.len(),
            model: m,
            status: &status,
            not_reused: not_reused.as_deref(),
            cert: cert.as_ref(),
            cert_path: &path,
        });
        match (cert, status) {
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
    };
    if done.is_empty() {
        return Ok(outcome);
    }
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
    .map_err(StudyError::Usage)?;
    outcome.primary = Some(set.primary().id.clone());
    let figs = figures::all(&set);
    let page = html::page(&set, &figs);
    let mut o = Outputs::new();
    o.create_dir(out);
    o.create_dir(out.join("tables"));
    for (name, text) in tables::study_tables(&set) {
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
    // Last: a new report implies new tables and figures.
    o.stage(out.join("report.html"), page.into_bytes());
    o.commit()?;
    outcome.removed = remove_stale(out, &figs);
    outcome.report = Some(out.join("report.html"));
    Ok(outcome)
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
pub fn report_from_certificates(
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
