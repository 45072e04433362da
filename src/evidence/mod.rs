//! Certificates as evidence: reading a certificate back (strictly, as
//! untrusted input), checking it ([`verify`]), comparing two ([`diff`]) and
//! checking published numbers against certified values ([`audit`]).
//!
//! The re-derivation in [`verify`] is deliberately independent of the code
//! that wrote the certificate: it uses MPFR intervals with explicit directed
//! rounding ([`mpfr_interval`]) and rational exponents evaluated as integer
//! powers and roots, where the producer used inari's `pow`.

pub mod audit;
pub mod diff;
pub mod mpfr_interval;
pub mod parse;
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
}

impl fmt::Display for EvidenceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvidenceError::Malformed { file, at, message } => write!(f, "{file}: {at}: {message}"),
            EvidenceError::Io { file, message } => write!(f, "{file}: {message}"),
            EvidenceError::Model(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for EvidenceError {}
