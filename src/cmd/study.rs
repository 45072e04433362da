//! `specbound study`: many checkpoints certified, then the paper's tables,
//! five figures and an HTML report.

use std::path::PathBuf;
use std::time::Instant;

use super::{CmdError, Exit, ModelRef, Report, Style, Ui};
use crate::certify::CertifyOptions;
use crate::study::{
    self, ModelDone, ModelFields, ModelStatus, StudyModel, StudyOptions, StudyOutcome,
};

/// What to study.
#[derive(Clone, Debug)]
pub struct StudyRequest {
    /// The models, in order (MODEL arguments, then a `--models` file's lines).
    pub models: Vec<ModelRef>,
    /// The `--step`, `--run` and `--revision` of each MODEL argument,
    /// index-matched with `models` (missing entries: none; a revision is
    /// already in its [`ModelRef`], it is kept here for its step).
    pub model_fields: Vec<ModelFields>,
    /// A file listing further models, one per line, each with optional
    /// `key=value` fields (`step=N`, `run=NAME`, `revision=REV`,
    /// `init=MODEL`).
    pub models_file: Option<PathBuf>,
    /// Model ids, one per model in order (default: each model's default id).
    pub model_ids: Vec<String>,
    /// The initialisation of every model's distance measures (`--init`),
    /// where a `--models` line's own `init=MODEL` does not name one; it
    /// replaces the step-0 default (`study::assign_inits`).
    pub init: Option<ModelRef>,
    /// The output directory.
    pub out: PathBuf,
    /// Options of every certification.
    pub certify: CertifyOptions,
    /// The primary model of figures 1 and 5.
    pub primary: Option<String>,
    /// Layers of the primary model in figure 1.
    pub spectrum_layers: Vec<usize>,
    /// How the per-model progress lines print intervals.
    pub style: Style,
}

/// The report of `study`.
#[derive(Debug)]
pub struct StudyReport {
    /// The models and ids.
    pub models: Vec<StudyModel>,
    /// What was written.
    pub outcome: StudyOutcome,
    /// The output directory.
    pub out: PathBuf,
    /// Seconds the study took.
    pub secs: f64,
}

/// The models of a request with their fields: the MODEL arguments (with
/// `fields`, index-matched), then the file's lines (a line's `revision=`
/// applies to its Hugging Face id).
pub(crate) fn model_refs(
    models: &[ModelRef],
    fields: &[ModelFields],
    file: Option<&std::path::Path>,
) -> Result<Vec<(ModelRef, ModelFields)>, CmdError> {
    let mut all: Vec<(ModelRef, ModelFields)> = models
        .iter()
        .enumerate()
        .map(|(i, m)| (m.clone(), fields.get(i).cloned().unwrap_or_default()))
        .collect();
    if let Some(f) = file {
        for e in study::read_model_entries(f)? {
            let r =
                ModelRef::parse(Some(&e.path), e.fields.revision.as_deref()).map_err(|err| {
                    CmdError::from(study::StudyError::List {
                        file: f.to_path_buf(),
                        message: format!("line {}: {err}", e.line),
                    })
                })?;
            all.push((r, e.fields));
        }
    }
    Ok(all)
}

/// Runs `study`.
///
/// *Guarantee: certified enclosure* of every interval written, as
/// [`crate::certify::certify_run`] and the tables' ratio enclosures
/// ([`proofs/ratio-enclosure.md`](crate::proofs::ratio_enclosure), L20).
///
/// ```
/// use specbound::certify::CertifyOptions;
/// use specbound::cmd::study::{run, StudyRequest};
/// use specbound::cmd::{ModelRef, Silent};
///
/// let out = std::env::temp_dir().join(format!("specbound-doc-study-{}", std::process::id()));
/// let req = StudyRequest {
///     models: vec![ModelRef::Bundled],
///     model_fields: Vec::new(),
///     models_file: None,
///     model_ids: vec!["minilm".into()],
///     init: None,
///     out: out.clone(),
///     certify: CertifyOptions::default(),
///     primary: None,
///     spectrum_layers: vec![0],
///     style: Default::default(),
/// };
/// let report = run(&req, &Silent).unwrap();
/// assert_eq!(report.outcome.certified, 1);
/// assert!(out.join("report.html").exists());
/// std::fs::remove_dir_all(&out).unwrap();
/// ```
pub fn run(req: &StudyRequest, ui: &dyn Ui) -> Result<StudyReport, CmdError> {
    let refs = model_refs(&req.models, &req.model_fields, req.models_file.as_deref())?;
    let resolved = refs
        .iter()
        .map(|(r, _)| r.resolve())
        .collect::<Result<Vec<_>, _>>()?;
    let mut models = study::assign_ids(resolved, &req.model_ids)?;
    let fields: Vec<ModelFields> = refs.into_iter().map(|(_, f)| f).collect();
    study::assign_steps(&mut models, &fields)?;
    // `init=MODEL`: a local path or a Hugging Face id in the cache; a
    // line's own wins over `--init`, which applies to every other model.
    let common = req
        .init
        .as_ref()
        .map(|i| i.resolve().map(|r| r.path))
        .transpose()?;
    let inits = fields
        .iter()
        .map(|f| match &f.init {
            Some(i) => ModelRef::parse(Some(i.as_path()), None)?
                .resolve()
                .map(|r| Some(r.path)),
            None => Ok(common.clone()),
        })
        .collect::<Result<Vec<_>, _>>()?;
    study::assign_inits(&mut models, &inits);
    let opts = StudyOptions {
        certify: req.certify.clone(),
        primary: req.primary.clone(),
        spectrum_layers: req.spectrum_layers.clone(),
    };
    let t = Instant::now();
    let st = req.style;
    let outcome = {
        // Models and the matrices within each: the bar restarts per model;
        // one line per finished model is said above it.
        let progress = ui.matrices("study");
        let mut line = |d: &ModelDone| {
            let what = match d.status {
                ModelStatus::Reused => format!(
                    "reused {} (model hashes and parameters match)",
                    super::shown(d.cert_path)
                ),
                ModelStatus::Certified(secs) => format!("certified in {secs:.2} s"),
                ModelStatus::Inconclusive(why) => format!("inconclusive: {why}"),
            };
            let fmt_iv =
                |x: &crate::certificate::CertInterval| crate::report::fmt::interval(x.lo, x.hi, st);
            let bounds = d
                .cert
                .map(|c| match &c.bounds {
                    Some(b) => format!(
                        ": B_ours {}, B_Edel {}",
                        fmt_iv(&b.ours),
                        fmt_iv(&b.edelman)
                    ),
                    None => ": no bound (spectra only)".to_string(),
                })
                .unwrap_or_default();
            let not = d
                .not_reused
                .map(|w| format!(" (existing certificate not reused: {w})"))
                .unwrap_or_default();
            let not = match d.measures_note {
                Some(w) => format!("{not} (measures inconclusive, bounds only: {w})"),
                None => not,
            };
            progress.line(&format!(
                "study: [{}/{}] {}: {what}{not}{bounds}",
                d.index, d.total, d.model.id
            ));
        };
        study::run_study(&models, &opts, &req.out, &*progress, &mut line)?
    };
    Ok(StudyReport {
        models,
        outcome,
        out: req.out.clone(),
        secs: t.elapsed().as_secs_f64(),
    })
}

impl Report for StudyReport {
    fn exit(&self) -> Exit {
        if self.outcome.inconclusive.is_empty() {
            Exit::Success
        } else {
            Exit::Failed
        }
    }

    fn reason(&self) -> Option<String> {
        let o = &self.outcome;
        if o.inconclusive.is_empty() {
            return None;
        }
        let list: Vec<String> = o
            .inconclusive
            .iter()
            .map(|(id, why)| format!("{id}: {why}"))
            .collect();
        Some(format!(
            "{} of {} models inconclusive ({}){}",
            o.inconclusive.len(),
            self.models.len(),
            list.join("; "),
            if o.report.is_none() {
                "; nothing to report"
            } else {
                ""
            }
        ))
    }

    fn text(&self, _style: Style) -> String {
        use std::fmt::Write;
        let o = &self.outcome;
        let mut s = String::new();
        for (n, f) in &o.figures {
            let _ = match f {
                Ok(p) => writeln!(s, "figure {n}: {}", super::shown(p)),
                Err(why) => writeln!(s, "figure {n} {why}"),
            };
        }
        match &o.trajectory_figure {
            Some(Ok(p)) => {
                let _ = writeln!(s, "figure 6: {}", super::shown(p));
            }
            Some(Err(why)) => {
                let _ = writeln!(s, "figure 6 {why}");
            }
            None => {}
        }
        for p in &o.removed {
            let _ = writeln!(
                s,
                "removed {} (left by an earlier run; not drawn now)",
                super::shown(p)
            );
        }
        if let Some(note) = &o.primary_note {
            let _ = writeln!(s, "note: {note}");
        }
        if let Some(r) = &o.report {
            let n = o.certified + o.reused;
            let _ = writeln!(
                s,
                "{}: {n} model{} ({} certified now, {} reused), tables in {}, in {:.2} s",
                super::shown(r),
                if n == 1 { "" } else { "s" },
                o.certified,
                o.reused,
                super::shown(&self.out.join("tables")),
                self.secs
            );
        }
        s
    }

    fn json(&self) -> Option<String> {
        None
    }
}
