//! `specbound verify`: re-derives every aggregate of a certificate; with a
//! model, also its hashes and every matrix.

use super::{CertInput, CmdError, Exit, ModelRef, Report, Style, Ui};
use crate::evidence::verify::{verify_internal, verify_with_model_options, Verdict, VerifyOptions};

/// What to verify.
#[derive(Clone, Debug)]
pub struct VerifyRequest {
    /// The certificate.
    pub cert: CertInput,
    /// The model it describes, to check the hashes and every matrix.
    pub model: Option<ModelRef>,
    /// What checking against the model may spend (the largest MPFR
    /// precision a certificate may state).
    pub options: VerifyOptions,
}

/// The report of `verify`.
#[derive(Debug)]
pub struct VerifyReport {
    /// The certificate's name (its file).
    pub cert: String,
    /// Whether the weights were checked too.
    pub with_model: bool,
    /// The checks.
    pub verdict: Verdict,
}

/// Runs `verify`: internal consistency first; the weights only when it holds.
///
/// ```
/// use specbound::certify::CertifyOptions;
/// use specbound::cmd::certify::{self, CertifyRequest};
/// use specbound::cmd::verify::{run, VerifyRequest};
/// use specbound::cmd::{CertInput, ModelRef, Silent};
/// use specbound::evidence::Answer;
///
/// let made = certify::run(
///     &CertifyRequest::new(ModelRef::Bundled, CertifyOptions::default()),
///     &Silent,
/// )
/// .unwrap();
/// let cert = made.certificate().unwrap().clone();
/// // Its internal consistency (every aggregate re-derived); with
/// // `model: Some(..)` the weights too.
/// let req = VerifyRequest {
///     cert: CertInput::Loaded { name: "minilm".into(), cert: Box::new(cert) },
///     model: None,
///     options: Default::default(),
/// };
/// assert_eq!(run(&req, &Silent).unwrap().verdict.answer(), Answer::Holds);
/// ```
pub fn run(req: &VerifyRequest, ui: &dyn Ui) -> Result<VerifyReport, CmdError> {
    let c = req.cert.read()?;
    let mut v = verify_internal(&c);
    if v.failure.is_none() {
        if let Some(m) = &req.model {
            let m = m.resolve()?.path;
            let progress = ui.matrices("verify");
            v = v.merge(verify_with_model_options(&c, &m, &req.options, &*progress)?);
        }
    }
    Ok(VerifyReport {
        cert: req.cert.name(),
        with_model: req.model.is_some(),
        verdict: v,
    })
}

impl Report for VerifyReport {
    fn exit(&self) -> Exit {
        Exit::of_answer(self.verdict.answer())
    }

    fn reason(&self) -> Option<String> {
        let v = &self.verdict;
        if let Some(f) = &v.failure {
            return Some(format!("{}: FAILED: {f}", self.cert));
        }
        v.unconfirmed.first().map(|first| {
            format!(
                "{}: UNCONFIRMED: {} quantities (first: {first})",
                self.cert,
                v.unconfirmed.len()
            )
        })
    }

    fn text(&self, _style: Style) -> String {
        use std::fmt::Write;
        let v = &self.verdict;
        let mut s = String::new();
        if v.failure.is_some() {
            return s;
        }
        if !v.unconfirmed.is_empty() {
            let _ = writeln!(
                s,
                "{}: {} checks passed; {} quantities could be neither confirmed nor refuted:",
                self.cert,
                v.checks,
                v.unconfirmed.len()
            );
            for u in v.unconfirmed.iter().take(50) {
                let _ = writeln!(s, "  {u}");
            }
            if v.unconfirmed.len() > 50 {
                let _ = writeln!(s, "  ... and {} more", v.unconfirmed.len() - 50);
            }
            return s;
        }
        let _ = writeln!(
            s,
            "{}: certificate holds ({} checks{})",
            self.cert,
            v.checks,
            if self.with_model {
                ", hashes and weights included: every interval contains the recomputed enclosure"
            } else {
                "; internal consistency only, pass --model to check against the weights"
            }
        );
        s
    }

    fn json(&self) -> Option<String> {
        let v = &self.verdict;
        let exit = self.exit();
        let j = serde_json::json!({
            "certificate": self.cert.to_string(),
            "with_model": self.with_model,
            "holds": exit == Exit::Success,
            "checks": v.checks,
            "failure": v.failure,
            "unconfirmed": v.unconfirmed,
            "exit_code": exit.code(),
        });
        Some(serde_json::to_string_pretty(&j).expect("JSON serialises"))
    }
}
