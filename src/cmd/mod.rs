//! The command layer: one module per command, each taking a typed request
//! and returning a typed report that knows its exit code and renders
//! itself as text and as JSON ([`Report`]). Both fronts (the `specbound`
//! binary and the Python module) call this layer and nothing else above
//! `certify`; they only turn their arguments into requests and print or
//! convert the reports.
//!
//! Every model argument is a [`ModelRef`], resolved in one place
//! ([`crate::io::model_ref`]). Progress is drawn through the front's
//! [`Ui`]; printing choices (`--json`, `--intervals`, `--quiet`) are
//! parameters of the rendering ([`render`]) or of the [`Ui`], never
//! branches of a command.
//!
//! Exit codes ([`Exit`]): 0 = certified / holds / consistent / unchanged;
//! 1 = inconclusive, a failed check or refuted quantity (verify), an
//! inconsistent claim (audit) or a certain change (diff), with the reason;
//! 2 = error (bad input or usage); 3 = undecided: audit claims undecided
//! or verify quantities unconfirmed (none wrong).

pub mod audit;
pub mod certify;
pub mod defaults;
pub mod diff;
pub mod inspect;
pub mod merge;
pub mod report;
pub mod spectra;
pub mod study;
pub mod svd;
pub mod verify;

use std::fmt;
use std::path::PathBuf;

use crate::evidence::Answer;
pub use crate::io::model_ref::{ModelRef, ResolvedModel};
use crate::io::output::{OutputError, Outputs};
pub use crate::report::fmt::Style;

/// How a command ended, as the process exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// 0: certified, holds, consistent, unchanged.
    Success = 0,
    /// 1: inconclusive, a failed check, an inconsistent claim, a certain change.
    Failed = 1,
    /// 2: bad input or usage.
    Error = 2,
    /// 3: undecided (audit) or unconfirmed (verify), nothing wrong.
    Undecided = 3,
}

impl Exit {
    /// The process exit code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The exit of a three-valued answer of the evidence commands
    /// (`verify`, `audit`, `diff`): holds 0, refuted 1, undecided 3. The
    /// one place where an [`Answer`] becomes an exit code.
    pub(crate) fn of_answer(answer: Answer) -> Exit {
        match answer {
            Answer::Holds => Exit::Success,
            Answer::Refuted => Exit::Failed,
            Answer::Undecided => Exit::Undecided,
        }
    }
}

/// What every command returns: it knows its exit code and renders itself.
pub trait Report {
    /// The exit code.
    fn exit(&self) -> Exit;
    /// The one line said on stderr when the exit is not 0 (why).
    fn reason(&self) -> Option<String> {
        None
    }
    /// Lines said on stderr whatever the exit (notices, e.g. a resumed run).
    fn notices(&self) -> Vec<String> {
        Vec::new()
    }
    /// The text for stdout, intervals printed in `style` (outward rounded).
    fn text(&self, style: Style) -> String;
    /// The JSON for stdout (`--json`); `None` when the command has none
    /// (then [`Report::text`] is printed).
    fn json(&self) -> Option<String>;
}

/// A report rendered for a front: what goes to stdout and stderr, and the
/// exit code. A front says the notices, then prints stdout, then says the
/// reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rendered {
    /// Lines for stderr before stdout (without the `specbound: ` prefix).
    pub notices: Vec<String>,
    /// The whole of stdout (each line ending in a newline).
    pub stdout: String,
    /// The line for stderr after stdout, when the exit is not 0.
    pub reason: Option<String>,
    /// The exit code.
    pub exit: Exit,
}

/// Renders `report` as JSON (when `json` and the command has JSON) or as
/// text in `style`.
pub fn render(report: &dyn Report, json: bool, style: Style) -> Rendered {
    let mut stdout = match json.then(|| report.json()).flatten() {
        Some(j) => j,
        None => report.text(style),
    };
    if !stdout.is_empty() && !stdout.ends_with('\n') {
        stdout.push('\n');
    }
    Rendered {
        notices: report.notices(),
        stdout,
        reason: report.reason(),
        exit: report.exit(),
    }
}

pub use crate::progress::{Silent, Ui};

/// Why a command could not run: bad input or usage (exit 2). The message
/// is one line naming the file, tensor or key; the library error it came
/// from is kept as `source()`, and its [`ErrorKind`] says what kind of
/// failure it is, so that a front chooses by the kind (the Python module
/// its exception), never by the message.
#[derive(Debug)]
pub struct CmdError {
    line: String,
    kind: ErrorKind,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

/// The kind of a [`CmdError`].
///
/// ```
/// use specbound::cmd::{CmdError, ErrorKind};
/// assert_eq!(CmdError::usage("--rtol must be positive").kind(), ErrorKind::Usage);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// A bad option value or a missing argument.
    Usage,
    /// A named input (a file, a directory, a model not in the cache) does
    /// not exist.
    MissingInput,
    /// An input that exists but is malformed, hostile or unusable (names
    /// the file, tensor or key).
    BadInput,
    /// An output could not be written (nothing was).
    Output,
    /// The run was cancelled before it finished (an interrupt).
    Cancelled,
}

impl CmdError {
    /// A usage error (a bad option value, a missing argument).
    pub fn usage(msg: impl Into<String>) -> Self {
        CmdError {
            line: msg.into(),
            kind: ErrorKind::Usage,
            source: None,
        }
    }

    /// A library error, its causes on one line ([`error_line`]), of the
    /// kind its type says ([`ErrorKind`]).
    pub fn from_error(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        CmdError {
            line: error_line(&e),
            kind: kind_of(&e),
            source: Some(Box::new(e)),
        }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Whether the error says that a named input does not exist (the
    /// Python module raises `FileNotFoundError` for it).
    pub fn is_missing_input(&self) -> bool {
        self.kind == ErrorKind::MissingInput
    }
}

/// The kind of a library error, by its type.
fn kind_of(e: &(dyn std::any::Any + Send + Sync)) -> ErrorKind {
    use crate::io::model_ref::ModelRefError;
    if let Some(e) = e.downcast_ref::<ModelRefError>() {
        if matches!(
            e,
            ModelRefError::Missing(_)
                | ModelRefError::Bundle(_)
                | ModelRefError::Hub(crate::io::hub::HubError::NotCached(_))
        ) {
            return ErrorKind::MissingInput;
        }
    }
    if let Some(crate::certify::CertifyError::Cancelled) = e.downcast_ref() {
        return ErrorKind::Cancelled;
    }
    if e.is::<crate::io::output::OutputError>() {
        return ErrorKind::Output;
    }
    ErrorKind::BadInput
}

impl fmt::Display for CmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.line)
    }
}

impl std::error::Error for CmdError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

macro_rules! from_library_errors {
    ($($t:ty),* $(,)?) => {
        $(impl From<$t> for CmdError {
            fn from(e: $t) -> Self {
                CmdError::from_error(e)
            }
        })*
    };
}

from_library_errors!(
    crate::io::model_ref::ModelRefError,
    crate::io::ReadError,
    crate::io::output::OutputError,
    crate::arch::ModelError,
    crate::certify::CertifyError,
    crate::certificate::CertificateError,
    crate::evidence::EvidenceError,
    crate::merge::MergeError,
    crate::study::StudyError,
);

/// An error and its causes on one line, each cause once, as the command
/// line prints it after `specbound: error: `. Library errors say their cause
/// in their own message (and keep it as `source()` for programs), so a cause
/// is appended only when the line does not already say it.
pub fn error_line(e: &(dyn std::error::Error + 'static)) -> String {
    let mut line = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = c.source();
    }
    line
}

/// A certificate a command reads: a file (read strictly), or one already
/// in memory (the Python module's certificates).
#[derive(Clone, Debug)]
pub enum CertInput {
    /// A certificate file (JSON).
    File(PathBuf),
    /// A certificate in memory, with the name it is reported under.
    Loaded {
        /// The name in messages.
        name: String,
        /// The certificate.
        cert: Box<crate::certificate::Certificate>,
    },
}

impl CertInput {
    /// The name in messages (escaped: it came from an argument).
    pub(crate) fn name(&self) -> String {
        match self {
            CertInput::File(p) => crate::io::escape(&p.display().to_string()).into_owned(),
            CertInput::Loaded { name, .. } => crate::io::escape(name).into_owned(),
        }
    }

    /// The certificate as a claim to check (`verify`): read strictly
    /// ([`crate::certificate::Certificate::read`]), not yet re-derived.
    pub(crate) fn read(&self) -> Result<crate::certificate::Certificate, CmdError> {
        match self {
            CertInput::File(p) => Ok(crate::certificate::Certificate::read(p)?),
            CertInput::Loaded { cert, .. } => Ok((**cert).clone()),
        }
    }

    /// The certificate as evidence for another command (`diff`): read
    /// strictly and re-derived ([`crate::evidence::read_rederived`]); an
    /// inconsistent one is refused, naming the first failed check.
    pub(crate) fn read_as_evidence(&self) -> Result<crate::certificate::Certificate, CmdError> {
        match self {
            CertInput::File(p) => Ok(crate::evidence::read_rederived(p)?),
            CertInput::Loaded { name, cert } => {
                crate::evidence::rederive(cert, name)?;
                Ok((**cert).clone())
            }
        }
    }
}

/// Checks that a nonnegative tolerance is finite (`--rtol`, `--atol`).
pub(crate) fn check_nonnegative(name: &str, v: f64) -> Result<(), CmdError> {
    if v >= 0.0 && v.is_finite() {
        Ok(())
    } else {
        Err(CmdError::usage(format!(
            "{name} must be a nonnegative number, got {v}"
        )))
    }
}

/// Where a certificate and its CSV tables go (`certify`, `merge`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CertOutputs {
    /// The certificate (JSON), written atomically.
    pub out: Option<PathBuf>,
    /// A directory for the four CSV tables (and `measures.csv` when the
    /// certificate states measures).
    pub csv: Option<PathBuf>,
}

impl CertOutputs {
    /// Refuses a bad output target before the computation, not after.
    pub(crate) fn check(&self) -> Result<(), OutputError> {
        let mut planned = Outputs::new();
        if let Some(dir) = &self.csv {
            planned.create_dir(dir);
            // The measures table is checked too: whether it is written is
            // known only after the run.
            for name in crate::report::csv::TABLE_NAMES
                .into_iter()
                .chain([crate::report::csv::MEASURES_TABLE])
            {
                planned.stage(dir.join(name), Vec::new());
            }
        }
        if let Some(p) = &self.out {
            planned.stage(p, Vec::new());
        }
        planned.check()
    }

    /// Writes the tables (model id `model_id`) and the certificate, all or
    /// none; the certificate last (a new certificate implies new tables).
    pub(crate) fn write(
        &self,
        cert: &crate::certificate::Certificate,
        doc: &str,
        model_id: &str,
    ) -> Result<(), OutputError> {
        let mut outputs = Outputs::new();
        if let Some(dir) = &self.csv {
            outputs.create_dir(dir);
            for (name, text) in crate::report::csv::tables(cert, model_id) {
                outputs.stage(dir.join(name), text);
            }
        }
        if let Some(p) = &self.out {
            outputs.stage(p, doc.as_bytes());
        }
        outputs.commit()
    }
}

/// A path as messages and text show it: escaped, since it came from an
/// argument or a file ([`crate::io::escape`]).
pub(crate) fn shown(p: &std::path::Path) -> String {
    crate::io::escape(&p.display().to_string()).into_owned()
}

#[cfg(test)]
mod tests {
    use super::error_line;
    use std::fmt;

    #[derive(Debug)]
    struct E(&'static str, Option<Box<E>>);

    impl fmt::Display for E {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for E {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|e| e as _)
        }
    }

    #[test]
    fn error_line_says_each_cause_once() {
        let inner = E("No such file or directory (os error 2)", None);
        let said = E(
            "m.npy: cannot read file: No such file or directory (os error 2)",
            Some(Box::new(E("No such file or directory (os error 2)", None))),
        );
        assert_eq!(error_line(&said), said.0);
        let unsaid = E("reading the claims", Some(Box::new(inner)));
        assert_eq!(
            error_line(&unsaid),
            "reading the claims: No such file or directory (os error 2)"
        );
    }
}
