//! `specbound merge`: the parts of a sharded run (`certify --shard K/N`)
//! into one certificate.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::{CertOutputs, CmdError, Exit, Report, Style};
use crate::certificate::Certificate;
use crate::certify::Outcome;

/// What to merge.
#[derive(Clone, Debug)]
pub struct MergeRequest {
    /// The parts, in any order.
    pub parts: Vec<PathBuf>,
    /// The certificate and tables to write.
    pub outputs: CertOutputs,
    /// The `model_id` of the tables (default: the model's default id, from
    /// the certificate's `model.path`).
    pub model_id: Option<String>,
}

/// The report of `merge`.
#[derive(Debug)]
pub struct MergeReport {
    /// Parts merged.
    pub parts: usize,
    /// The certificate, or why there is none.
    pub outcome: Result<Box<Certificate>, String>,
    /// Seconds.
    pub secs: f64,
    /// Where it went.
    pub outputs: CertOutputs,
}

/// Runs `merge`.
///
/// *Guarantee: certified enclosure* of every interval, as the parts'
/// (re-derived by `crate::merge::merge`).
///
/// ```
/// use specbound::certificate::ShardSpec;
/// use specbound::certify::CertifyOptions;
/// use specbound::cmd::certify::{self, CertifyRequest};
/// use specbound::cmd::merge::{run, MergeRequest};
/// use specbound::cmd::{CertOutputs, ModelRef, Silent};
///
/// let dir = std::env::temp_dir().join(format!("specbound-doc-merge-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// // Two shards of the bundled model, each written as a part ...
/// let mut parts = Vec::new();
/// for index in 1..=2 {
///     let part = dir.join(format!("part-{index}.json"));
///     let mut req = CertifyRequest::new(ModelRef::Bundled, CertifyOptions::default());
///     req.shard = Some(ShardSpec { index, count: 2 });
///     req.outputs.out = Some(part.clone());
///     certify::run(&req, &Silent).unwrap();
///     parts.push(part);
/// }
/// // ... merged into the certificate of the whole model.
/// let req = MergeRequest { parts, outputs: CertOutputs::default(), model_id: None };
/// let merged = run(&req).unwrap();
/// assert_eq!(merged.outcome.unwrap().model.layers, 6);
/// std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub fn run(req: &MergeRequest) -> Result<MergeReport, CmdError> {
    req.outputs.check()?;
    let t = Instant::now();
    let outcome = match crate::merge::merge_files(&req.parts)? {
        Outcome::Certified(c) => {
            let doc = c.to_json_pretty();
            let id = req.model_id.clone().unwrap_or_else(|| {
                crate::io::model_ref::default_id_of_path(Path::new(&c.model.path))
            });
            req.outputs.write(&c, &doc, &id)?;
            Ok(Box::new(c))
        }
        Outcome::Inconclusive(why) => Err(why.reason),
    };
    Ok(MergeReport {
        parts: req.parts.len(),
        outcome,
        secs: t.elapsed().as_secs_f64(),
        outputs: req.outputs.clone(),
    })
}

impl Report for MergeReport {
    fn exit(&self) -> Exit {
        if self.outcome.is_ok() {
            Exit::Success
        } else {
            Exit::Failed
        }
    }

    fn reason(&self) -> Option<String> {
        self.outcome
            .as_ref()
            .err()
            .map(|why| format!("inconclusive: {why}"))
    }

    fn text(&self, style: Style) -> String {
        let Ok(cert) = &self.outcome else {
            return String::new();
        };
        let mut s = format!(
            "{} parts merged in {:.2} s: {} proxy matrices of {} ({})\n",
            self.parts,
            self.secs,
            cert.matrices.len(),
            cert.model.path,
            cert.model.architecture
        );
        match (&cert.bounds, &cert.bound_absent) {
            (Some(b), _) => {
                // The bounds as certify prints them: one formatter for every
                // command (crate::report::fmt, rounded outward).
                let iv = |x: &crate::certificate::CertInterval| {
                    crate::report::fmt::interval(x.lo, x.hi, style)
                };
                s.push_str("certified bounds (each interval, read as decimals, contains the exact value):\n");
                s.push_str(&format!("  B_ours    {}\n", iv(&b.ours)));
                s.push_str(&format!("  B_Edel    {}\n", iv(&b.edelman)));
            }
            (None, why) => s.push_str(&format!(
                "no bound: {}\n",
                crate::io::escape_to(why.as_deref().unwrap_or(""), 4096)
            )),
        }
        if self.outputs.out.is_none() {
            s.push_str(
                "(use --out FILE or --json for the certificate, --csv DIR for the tables)\n",
            );
        }
        s
    }

    fn json(&self) -> Option<String> {
        Some(match &self.outcome {
            Ok(c) => c.to_json_pretty(),
            Err(_) => String::new(),
        })
    }
}
