//! `specbound certify`: a whole checkpoint's proxy matrices, their
//! certified spectra, and the bound proxies (or one shard of them).

use std::path::PathBuf;
use std::time::Instant;

use super::{CertOutputs, CmdError, Exit, ModelRef, Report, ResolvedModel, Style, Ui};
use crate::certificate::{Certificate, ShardSpec};
use crate::certify::{CertifyOptions, Job, MatrixResult, Outcome};

/// What to certify and where the results go.
#[derive(Clone, Debug)]
pub struct CertifyRequest {
    /// The model.
    pub model: ModelRef,
    /// Precision, L_phi, grid, architecture overrides.
    pub options: CertifyOptions,
    /// The certificate and tables to write.
    pub outputs: CertOutputs,
    /// The `model_id` column of the tables (default: the model's default id).
    pub model_id: Option<String>,
    /// Certify only this shard and make a part, not a certificate.
    pub shard: Option<ShardSpec>,
    /// Keep finished layers' parts here and skip them on a rerun.
    pub resume_dir: Option<PathBuf>,
    /// Keep every matrix's certified singular values in the report
    /// ([`CertifyReport::results`]), for callers that want more than the
    /// certificate holds.
    pub keep_results: bool,
    /// Certify the raw weights' norms and the norm-based measures
    /// (`docs/measures.md`) into the certificate (`--measures`); with a
    /// shard, its share of the raw weights' norms into the part (merge
    /// derives the measures).
    pub measures: bool,
    /// The initialisation for the distance measures (`--init`; implies
    /// [`CertifyRequest::measures`]); must have the model's architecture.
    pub init: Option<ModelRef>,
}

impl CertifyRequest {
    /// A request for the whole of `model` with `options`, writing nothing.
    pub fn new(model: ModelRef, options: CertifyOptions) -> Self {
        CertifyRequest {
            model,
            options,
            outputs: CertOutputs::default(),
            model_id: None,
            shard: None,
            resume_dir: None,
            keep_results: false,
            measures: false,
            init: None,
        }
    }
}

/// What a certification ended with.
#[derive(Debug)]
pub enum Certified {
    /// The certificate of the whole model.
    Whole(Box<Certificate>),
    /// One shard's part (its JSON), with what it covers.
    Shard {
        /// The part, as written.
        doc: String,
        /// The shard.
        shard: ShardSpec,
        /// Matrices in the part.
        matrices: usize,
        /// Matrices of the model.
        total: usize,
        /// The shard's share of the estimated cost, out of 1.
        cost_share: f64,
    },
    /// Nothing could be certified: why.
    Inconclusive(String),
}

/// The report of `certify`.
#[derive(Debug)]
pub struct CertifyReport {
    /// The model as resolved.
    pub model: ResolvedModel,
    /// The `model_id` of its tables.
    pub model_id: String,
    /// The outcome.
    pub outcome: Certified,
    /// Certified singular values of every matrix certified now (only with
    /// [`CertifyRequest::keep_results`]).
    pub results: Vec<MatrixResult>,
    /// Seconds the run took.
    pub secs: f64,
    /// Where the outputs went.
    pub outputs: CertOutputs,
    /// `(directory, layers, matrices read back, matrices certified now)`
    /// when a run resumed.
    pub resumed: Option<(PathBuf, usize, usize, usize)>,
    /// What `--heads` replaced, when it changed the file's number of heads
    /// (said on stderr; the certificate or part records it).
    pub heads_override: Option<crate::certificate::HeadsOverrideEntry>,
    /// Which stack was read when no `--stack` chose (said on stderr; the
    /// certificate or part records it as `parameters.stack`).
    pub stack_notice: Option<String>,
}

impl CertifyReport {
    /// The certificate, when the whole model was certified.
    pub fn certificate(&self) -> Option<&Certificate> {
        match &self.outcome {
            Certified::Whole(c) => Some(c),
            _ => None,
        }
    }
}

/// Runs `certify`: checks the request, resolves the models, runs the
/// library's one entry point ([`crate::certify::certify`]) and writes
/// what it made.
///
/// *Guarantee: certified enclosure* for every interval of the certificate
/// or part ([`crate::certify::certify`], which names the lemmas).
///
/// ```
/// use specbound::certify::CertifyOptions;
/// use specbound::cmd::certify::{run, CertifyRequest};
/// use specbound::cmd::{ModelRef, Silent};
///
/// // The bundled MiniLM, whole, at the default precision.
/// let req = CertifyRequest::new(ModelRef::Bundled, CertifyOptions::default());
/// let report = run(&req, &Silent).unwrap();
/// let bounds = report.certificate().unwrap().bounds.clone().unwrap();
/// assert!(0.0 < bounds.ours.lo && bounds.ours.lo <= bounds.ours.hi);
/// ```
pub fn run(req: &CertifyRequest, ui: &dyn Ui) -> Result<CertifyReport, CmdError> {
    if req.shard.is_some() && req.outputs.csv.is_some() {
        return Err(CmdError::usage(
            "--csv needs the bounds, which a shard does not have: pass --csv to merge",
        ));
    }
    let model = req.model.resolve()?;
    let init = req.init.as_ref().map(ModelRef::resolve).transpose()?;
    if model.is_memory() && (req.shard.is_some() || req.resume_dir.is_some()) {
        return Err(CmdError::usage(
            "a model in memory is certified whole: --shard and --resume-dir need its files \
             (save it, e.g. with safetensors' save_file, and certify the directory)",
        ));
    }
    // A wrong initialisation is refused before the outputs are checked.
    let init = init
        .as_ref()
        .map(|i| crate::certify::check_init_architecture(&model.path, &i.path, &req.options))
        .transpose()?;
    req.outputs.check()?;
    let t = Instant::now();
    let job = Job {
        model: &model.path,
        options: &req.options,
        shard: req.shard,
        resume_dir: req.resume_dir.as_deref(),
        keep_results: req.keep_results,
        measures: req.measures,
        init,
    };
    let outcome = crate::certify::certify(&job, ui)?;
    let mut report = CertifyReport {
        model_id: req.model_id.clone().unwrap_or_else(|| model.default_id()),
        model,
        outcome: Certified::Inconclusive(String::new()),
        results: Vec::new(),
        secs: 0.0,
        outputs: req.outputs.clone(),
        resumed: None,
        heads_override: None,
        stack_notice: None,
    };
    let done = match outcome {
        Outcome::Certified(done) => done,
        Outcome::Inconclusive(why) => {
            report.outcome = Certified::Inconclusive(why.reason);
            return Ok(report);
        }
    };
    if let (Some(dir), false) = (&req.resume_dir, done.reused_layers.is_empty()) {
        report.resumed = Some((
            dir.clone(),
            done.reused_layers.len(),
            done.read_back,
            done.certified_now,
        ));
    }
    let header = &done.header;
    report.heads_override = header.parameters.heads_override.clone();
    report.stack_notice = header.parameters.stack.as_ref().and_then(|s| {
        crate::arch::StackChoice {
            name: s.name.clone(),
            stacks: s.stacks.clone(),
            by_flag: s.by_flag,
        }
        .notice(&header.model.architecture)
    });
    report.secs = t.elapsed().as_secs_f64();
    report.outcome = match done.made {
        Err(why) => Certified::Inconclusive(why.reason),
        Ok(made) => write(req, made, &mut report)?,
    };
    Ok(report)
}

/// Writes what the job made where the request says (all or none), and
/// keeps the certificate's singular values in the report.
fn write(
    req: &CertifyRequest,
    made: crate::certify::Certified,
    report: &mut CertifyReport,
) -> Result<Certified, CmdError> {
    use crate::certify::Certified as Made;
    Ok(match made {
        Made::Part {
            part,
            matrices,
            total,
            cost_share,
        } => {
            let doc = part.to_json_pretty();
            if let Some(p) = &req.outputs.out {
                crate::io::output::Outputs::new()
                    .stage(p, doc.as_bytes())
                    .commit()?;
            }
            Certified::Shard {
                doc,
                shard: part.shard,
                matrices,
                total,
                cost_share,
            }
        }
        Made::Whole {
            mut certificate,
            results,
        } => {
            name_memory_models(&mut certificate);
            let doc = certificate.to_json_pretty();
            req.outputs.write(&certificate, &doc, &report.model_id)?;
            report.results = results;
            Certified::Whole(certificate)
        }
    })
}

/// A model in memory is read through its key (a path no file has, with a
/// NUL byte): the certificate names it `<memory>` instead
/// (docs/certificate.md, "Weights from memory").
fn name_memory_models(cert: &mut Certificate) {
    let label = crate::io::memory::MEMORY_LABEL;
    if crate::io::memory::is_memory_key(std::path::Path::new(&cert.model.path)) {
        cert.model.path = label.to_string();
    }
    if let Some(i) = &mut cert.init_model {
        if crate::io::memory::is_memory_key(std::path::Path::new(&i.path)) {
            i.path = label.to_string();
        }
    }
}

impl Report for CertifyReport {
    fn exit(&self) -> Exit {
        match self.outcome {
            Certified::Inconclusive(_) => Exit::Failed,
            _ => Exit::Success,
        }
    }

    fn reason(&self) -> Option<String> {
        match &self.outcome {
            Certified::Inconclusive(why) => Some(format!(
                "{}: inconclusive: {why}",
                super::shown(&self.model.path)
            )),
            _ => None,
        }
    }

    fn notices(&self) -> Vec<String> {
        let heads = self.heads_override.as_ref().and_then(|o| o.notice());
        heads
            .into_iter()
            .chain(self.stack_notice.clone())
            .chain(self.resumed.iter().map(|(dir, layers, back, now)| {
                format!(
                    "resumed from {}: {layers} finished layers read back ({back} matrices), {now} matrices certified now",
                    super::shown(dir)
                )
            }))
            .collect()
    }

    fn text(&self, style: Style) -> String {
        match &self.outcome {
            Certified::Whole(cert) => {
                let mut t = crate::report::summary_text_with(cert, self.secs, style);
                if let Some(m) = &cert.measures {
                    t.push_str(&format!(
                        "norm-based measures of the {} raw weight matrices (docs/measures.md):\n",
                        m.d
                    ));
                    for (name, x) in m.stated() {
                        t.push_str(&format!(
                            "  {name:<20} {}\n",
                            crate::report::fmt::interval(x.lo, x.hi, style)
                        ));
                    }
                    for (name, why) in &m.absent {
                        t.push_str(&format!(
                            "  {:<20} absent: {}\n",
                            crate::io::escape_to(name, 64),
                            crate::io::escape_to(why, 512)
                        ));
                    }
                }
                t
            }
            Certified::Shard {
                shard,
                matrices,
                total,
                cost_share,
                ..
            } => format!(
                "{}: shard {shard}: {matrices} of {total} proxy matrices ({:.1}% of the estimated cost) certified in {:.2} s{}\n",
                super::shown(&self.model.path),
                100.0 * cost_share,
                self.secs,
                match &self.outputs.out {
                    Some(p) => format!(", part written to {}", super::shown(p)),
                    None => " (use --out FILE to write the part, then merge the parts)".into(),
                }
            ),
            Certified::Inconclusive(_) => String::new(),
        }
    }

    fn json(&self) -> Option<String> {
        Some(match &self.outcome {
            Certified::Whole(cert) => cert.to_json_pretty(),
            Certified::Shard { doc, .. } => doc.clone(),
            Certified::Inconclusive(_) => String::new(),
        })
    }
}
