//! `specbound diff`: two certificates compared quantity by quantity.

use super::{check_nonnegative, CertInput, CmdError, Exit, Report, Style};
use crate::evidence::diff::{diff, DiffReport, HeaderKind};

/// What to compare.
#[derive(Clone, Debug)]
pub struct DiffRequest {
    /// The old certificate.
    pub a: CertInput,
    /// The new certificate.
    pub b: CertInput,
    /// Exit 1 only for quantities that certainly changed by more than this (relative).
    pub rtol: f64,
}

/// The report of `diff`.
#[derive(Debug)]
pub struct DiffCmdReport {
    /// The comparison.
    pub diff: DiffReport,
}

/// Runs `diff`.
///
/// ```
/// use specbound::certify::CertifyOptions;
/// use specbound::cmd::certify::{self, CertifyRequest};
/// use specbound::cmd::diff::{run, DiffRequest};
/// use specbound::cmd::{defaults, CertInput, ModelRef, Silent};
/// use specbound::evidence::Answer;
///
/// let made = certify::run(
///     &CertifyRequest::new(ModelRef::Bundled, CertifyOptions::default()),
///     &Silent,
/// )
/// .unwrap();
/// let cert = Box::new(made.certificate().unwrap().clone());
/// let input = |name: &str| CertInput::Loaded { name: name.into(), cert: cert.clone() };
/// let req = DiffRequest { a: input("a"), b: input("b"), rtol: defaults::CLAIM_RTOL };
/// // A certificate against itself: nothing certainly changed.
/// assert_eq!(run(&req).unwrap().diff.answer(), Answer::Holds);
/// ```
pub fn run(req: &DiffRequest) -> Result<DiffCmdReport, CmdError> {
    check_nonnegative("--rtol", req.rtol)?;
    // Both are evidence: re-derived before they are compared.
    let ca = req.a.read_as_evidence()?;
    let cb = req.b.read_as_evidence()?;
    Ok(DiffCmdReport {
        diff: diff(&ca, &cb, req.rtol),
    })
}

impl Report for DiffCmdReport {
    fn exit(&self) -> Exit {
        Exit::of_answer(self.diff.answer())
    }

    fn reason(&self) -> Option<String> {
        let d = &self.diff;
        d.certainly_changed.then(|| {
            format!(
                "certainly changed: {} quantities and {} measures beyond rtol = {}, {} parameter or architecture differences",
                d.beyond_rtol,
                d.measures_beyond_rtol,
                d.rtol,
                d.header.iter().filter(|h| h.kind != HeaderKind::Model).count(),
            )
        })
    }

    fn text(&self, style: Style) -> String {
        self.diff.to_text_with(25, style)
    }

    fn json(&self) -> Option<String> {
        Some(serde_json::to_string_pretty(&self.diff).expect("JSON serialises"))
    }
}
