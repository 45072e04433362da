//! Certificates as evidence: checking one ([`verify`]), comparing two
//! ([`diff`]) and checking published numbers against certified values
//! ([`audit`]). All of them read typed [`crate::certificate::Certificate`]s
//! (an untrusted file through `Certificate::read`), none re-lists quantities.
//!
//! The re-derivation in [`verify`] is deliberately independent of the code
//! that wrote the certificate: it uses MPFR intervals with explicit directed
//! rounding (`mpfr_interval`) and rational exponents evaluated as integer
//! powers and roots, where the producer used inari's `pow`.

pub mod audit;
pub mod diff;
pub(crate) mod mpfr_interval;
pub(crate) mod spectrum;
pub mod verify;

use std::fmt;
use std::path::Path;

use crate::certificate::Certificate;

/// The three-valued answer of a check of evidence, in the spirit of Arb's
/// predicates: `Holds` and `Refuted` are proven (for the exact values the
/// intervals enclose), `Undecided` says that the enclosures are too wide to
/// tell, which is never a guess either way.
///
/// Every three-valued result of this layer has one:
/// [`verify::Verdict::answer`] (the certificate holds, a check failed or a
/// quantity is refuted, or some quantity is unconfirmed),
/// [`audit::AuditReport::answer`] (every claim consistent, one inconsistent,
/// or some undecided), `spectrum::SpectrumAudit::answer` and
/// [`diff::DiffReport::answer`] (unchanged within rtol, or certainly
/// changed; never undecided). The command layer maps it to exit codes.
///
/// ```
/// use specbound::evidence::{verify::Verdict, Answer};
///
/// let mut v = Verdict::default();
/// assert_eq!(v.answer(), Answer::Holds);
/// v.unconfirmed.push("sigma_1: neither confirmed nor refuted".into());
/// assert_eq!(v.answer(), Answer::Undecided);
/// v.failure = Some("sigma_1: refuted".into());
/// assert_eq!(v.answer(), Answer::Refuted);
/// assert_eq!(v.answer().to_string(), "refuted");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Answer {
    /// Proven true.
    Holds,
    /// Proven false.
    Refuted,
    /// Neither proven nor refuted at the precision used.
    Undecided,
}

impl Answer {
    /// The answer's name: `"holds"`, `"refuted"` or `"undecided"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Answer::Holds => "holds",
            Answer::Refuted => "refuted",
            Answer::Undecided => "undecided",
        }
    }

    /// `Refuted` when `refuted`, else `Undecided` when `undecided`, else
    /// `Holds`: the order in which every report of this layer decides.
    pub(crate) fn of(refuted: bool, undecided: bool) -> Answer {
        if refuted {
            Answer::Refuted
        } else if undecided {
            Answer::Undecided
        } else {
            Answer::Holds
        }
    }
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Reads a certificate **as evidence**: the strict read of an untrusted
/// file ([`Certificate::read`]: capped, strict parse, validation), then the
/// internal re-derivation that `specbound verify` runs without `--model`
/// ([`verify::verify_internal`]). `Err` names the file and the first failed
/// check. Every command that takes a certificate as input (`study` when it
/// reuses one, `report`, `diff`) reads it through this function, so a
/// certificate edited by hand, which `verify` rejects, is never used.
///
/// What it establishes: the certificate is *consistent* (every aggregate,
/// bound and minimiser set follows from its stated singular values, norms
/// and parameters). It does not establish that the stated values belong to
/// the weights named in it: that is `verify --model`.
pub fn read_rederived(path: &Path) -> Result<Certificate, EvidenceError> {
    let c = Certificate::read(path)?;
    rederive(&c, &path.display().to_string())?;
    Ok(c)
}

/// [`verify::verify_internal`] as a result: `Err(Inconsistent)` naming
/// `file` and the first failed check.
pub(crate) fn rederive(c: &Certificate, file: &str) -> Result<(), EvidenceError> {
    match verify::verify_internal(c).failure {
        None => Ok(()),
        Some(check) => Err(EvidenceError::Inconsistent {
            file: crate::io::escape(file).into_owned(),
            check,
        }),
    }
}

/// Errors of the evidence commands (one line each).
#[derive(Debug)]
pub enum EvidenceError {
    /// The certificate or claims file is malformed or hostile.
    Malformed {
        /// The file.
        file: String,
        /// Where in it (JSON path, or CSV line and column).
        at: String,
        /// What is wrong.
        message: String,
    },
    /// Reading a file failed.
    Io {
        /// The file.
        file: String,
        /// The OS error.
        message: String,
    },
    /// The model could not be read or certified.
    Model(String),
    /// A claims file could not be read (too large, not UTF-8, an OS error).
    Read(crate::io::ReadError),
    /// A certificate or part read as evidence that its own re-derivation
    /// refutes ([`read_rederived`]): an aggregate its stated inputs do not
    /// imply.
    Inconsistent {
        /// The file.
        file: String,
        /// The first failed check (JSON path, both values, escaped).
        check: String,
    },
    /// Checking the input would cost more than the budget allows
    /// ([`verify::VerifyOptions`]).
    OverBudget {
        /// The key that sets the cost.
        at: String,
        /// What it states and the budget.
        message: String,
    },
}

impl fmt::Display for EvidenceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvidenceError::Malformed { file, at, message } => {
                write!(f, "{}: {at}: {message}", crate::io::shown(file))
            }
            EvidenceError::Io { file, message } => {
                write!(f, "{}: {message}", crate::io::shown(file))
            }
            EvidenceError::Model(m) => write!(f, "{m}"),
            EvidenceError::Read(e) => write!(f, "{e}"),
            EvidenceError::OverBudget { at, message } => write!(f, "{at}: {message}"),
            EvidenceError::Inconsistent { file, check } => write!(
                f,
                "{}: not a consistent certificate (its re-derivation fails; specbound verify \
                 shows the same): {check}",
                crate::io::shown(file)
            ),
        }
    }
}

// No `source()`: every variant's message is already complete on one line
// (a `Read` error names the file and its OS cause), so a chain printer would
// only repeat it.
impl std::error::Error for EvidenceError {}

impl From<crate::certificate::CertificateError> for EvidenceError {
    fn from(e: crate::certificate::CertificateError) -> Self {
        match e {
            crate::certificate::CertificateError::Io { file, source } => EvidenceError::Io {
                file,
                message: source.to_string(),
            },
            crate::certificate::CertificateError::Invalid { file, at, message } => {
                EvidenceError::Malformed { file, at, message }
            }
        }
    }
}
