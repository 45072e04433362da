//! `specbound report`: the study's HTML report from existing certificates.

use std::path::PathBuf;

use super::{CmdError, Exit, Report, Style};
use crate::io::output::Outputs;

/// What to draw.
#[derive(Clone, Debug)]
pub struct ReportRequest {
    /// The certificates.
    pub certs: Vec<PathBuf>,
    /// The HTML file to write (atomically).
    pub out: PathBuf,
    /// Model ids, one per certificate in order (default: each file's stem).
    pub model_ids: Vec<String>,
    /// The primary model of figures 1 and 5.
    pub primary: Option<String>,
    /// Layers of the primary model in figure 1.
    pub spectrum_layers: Vec<usize>,
}

/// The report of `report`.
#[derive(Debug)]
pub struct ReportReport {
    /// The page written.
    pub out: PathBuf,
    /// Certificates drawn.
    pub certs: usize,
    /// `(figure, why)` of every figure skipped.
    pub skipped: Vec<(usize, String)>,
}

/// Runs `report`: the study's HTML page (tables and figures) from
/// certificates already made.
///
/// ```
/// use specbound::certify::CertifyOptions;
/// use specbound::cmd::certify::{self, CertifyRequest};
/// use specbound::cmd::report::{run, ReportRequest};
/// use specbound::cmd::{ModelRef, Silent};
///
/// let dir = std::env::temp_dir().join(format!("specbound-doc-report-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let cert = dir.join("minilm.json");
/// let mut req = CertifyRequest::new(ModelRef::Bundled, CertifyOptions::default());
/// req.outputs.out = Some(cert.clone());
/// certify::run(&req, &Silent).unwrap();
/// let req = ReportRequest {
///     certs: vec![cert],
///     out: dir.join("report.html"),
///     model_ids: vec!["minilm".into()],
///     primary: None,
///     spectrum_layers: vec![0, 1],
/// };
/// let report = run(&req).unwrap();
/// let page = std::fs::read_to_string(&report.out).unwrap();
/// assert!(page.contains("minilm"));
/// std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub fn run(req: &ReportRequest) -> Result<ReportReport, CmdError> {
    let mut planned = Outputs::new();
    planned.stage(&req.out, Vec::new());
    planned.check()?;
    let (_, figs, page) = crate::study::report_from_certificates(
        &req.certs,
        &req.model_ids,
        req.primary.as_deref(),
        req.spectrum_layers.clone(),
    )
    .map_err(|e| CmdError::usage(e.to_string()))?;
    let mut o = Outputs::new();
    o.stage(&req.out, page.into_bytes());
    o.commit()?;
    Ok(ReportReport {
        out: req.out.clone(),
        certs: req.certs.len(),
        skipped: figs
            .iter()
            .filter_map(|f| f.svg.as_ref().err().map(|w| (f.number, w.clone())))
            .collect(),
    })
}

impl Report for ReportReport {
    fn exit(&self) -> Exit {
        Exit::Success
    }

    fn text(&self, _style: Style) -> String {
        let mut s = String::new();
        for (n, why) in &self.skipped {
            s.push_str(&format!("figure {n} {why}\n"));
        }
        s.push_str(&format!(
            "{}: {} certificates\n",
            super::shown(&self.out),
            self.certs
        ));
        s
    }

    fn json(&self) -> Option<String> {
        None
    }
}
