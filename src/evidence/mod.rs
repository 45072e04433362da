//! Certificates as evidence: checking one ([`verify`]), comparing two
//! ([`diff`]) and checking published numbers against certified values
//! ([`audit`]). All of them read typed [`crate::certificate::Certificate`]s
//! (an untrusted file through `Certificate::read`), none re-lists quantities.
//!
//! The re-derivation in [`verify`] is deliberately independent of the code
//! that wrote the certificate: it uses MPFR intervals with explicit directed
//! rounding ([`mpfr_interval`]) and rational exponents evaluated as integer
//! powers and roots, where the producer used inari's `pow`.

pub mod audit;
pub mod diff;
pub mod mpfr_interval;
pub mod spectrum;
pub mod verify;

use std::fmt;

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
}

impl fmt::Display for EvidenceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvidenceError::Malformed { file, at, message } => write!(f, "{file}: {at}: {message}"),
            EvidenceError::Io { file, message } => write!(f, "{file}: {message}"),
            EvidenceError::Model(m) => write!(f, "{m}"),
            EvidenceError::Read(e) => write!(f, "{e}"),
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
