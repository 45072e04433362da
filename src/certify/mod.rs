//! The main job: read a checkpoint, extract the proxy matrices, certify
//! their spectra and norms, evaluate the bound proxies, and assemble the
//! typed [`Certificate`]. Every interval in it is a certified enclosure.
//!
//! One entry point, [`certify`], takes a [`Job`] (a model, a shard or the
//! whole, with or without the norm-based measures) to a certificate or a
//! shard's part; the `certify` command and the Python module come here.
//! The pipeline it runs, one file each:
//!
//! - [`run`]: a model's matrices layer by layer ([`certify_run`]), the
//!   next layer read while this one is certified;
//! - [`schedule`]: one layer's matrices on the thread pool
//!   ([`certify_batch`]: the critical path first, with the whole pool);
//! - [`matrix`]: one matrix ([`certify_matrix`]);
//! - [`resume`]: finished layers kept in a resume directory and read back;
//! - [`norms`] and [`measures`]: the raw weights' norms and the
//!   norm-based measures (`docs/measures.md`);
//! - [`assemble`]: the proxies and bounds from the certified spectra, for
//!   a run and for `merge` alike;
//! - [`shard`]: which matrices shard `K/N` certifies.
//!
//! (`merge` of shards' parts is a module of its own, above `evidence`: it
//! re-derives each part as evidence before using it.)

pub mod assemble;
pub mod matrix;
pub mod measures;
pub mod norms;
pub mod resume;
pub mod run;
pub mod schedule;
pub mod shard;

pub use assemble::assemble;
pub use matrix::{certify_matrix, certify_matrix_owned, spectrum_entry, MatrixResult};
pub use measures::{
    certify_measures, certify_measures_reusing, certify_shard_raw_weights, check_init_architecture,
    measures_entry, measures_of_raw_weights, MeasuresRun, RawWeightsRun,
};
pub use norms::{certify_distance_norms, certify_raw_norms, certify_raw_norms_with};
pub use resume::layer_part_name;
pub use run::{certify_run, run_header, Run, RunScope};
pub use schedule::{certify_batch, LARGE_SHARE};

use crate::arch::{ArchOverrides, ModelError};
use crate::certificate::{FileEntry, MAX_GRID_M};
use crate::enclosure::Inconclusive;
use crate::io::output::OutputError;
use crate::linalg::Precision;
use inari::Interval;

/// Options of [`certify_run`].
#[derive(Clone, Debug)]
pub struct CertifyOptions {
    /// Method for the singular values (default f64: enough for the targets).
    pub precision: Precision,
    /// `L_phi` as a decimal string (default "1.13", the GELU bound of the paper's code).
    pub l_phi: String,
    /// Grid resolution override (default `ceil(L + ln N)`).
    pub grid_m: Option<usize>,
    /// Architecture facts for a file without config.json.
    pub overrides: ArchOverrides,
}

impl Default for CertifyOptions {
    fn default() -> Self {
        Self {
            precision: Precision::F64,
            l_phi: crate::arch::PAPER_L_PHI.into(),
            grid_m: None,
            overrides: ArchOverrides::default(),
        }
    }
}

/// Why no certificate could be attempted: bad input (the model, a
/// parameter), or the caller cancelled the run. A computation that cannot
/// be certified is not an error but the [`Outcome::Inconclusive`] outcome.
#[derive(Debug)]
pub enum CertifyError {
    /// Bad model input (names the file and tensor or key).
    Model(ModelError),
    /// A bad parameter (names it).
    Param(String),
    /// The run was stopped through [`crate::progress::Progress::cancelled`] before it finished.
    Cancelled,
    /// A part in the resume directory that this run cannot use (names the file).
    Resume(String),
    /// A finished layer's part could not be written (names the file).
    Output(OutputError),
}

impl std::fmt::Display for CertifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CertifyError::Model(e) => write!(f, "{e}"),
            CertifyError::Param(s) | CertifyError::Resume(s) => write!(f, "{s}"),
            CertifyError::Cancelled => write!(f, "cancelled before every matrix was certified"),
            CertifyError::Output(e) => write!(f, "{e}"),
        }
    }
}

// `Model` is transparent: it displays the model error and hands on that
// error's own source, so a chain printer shows each cause once.
impl std::error::Error for CertifyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CertifyError::Model(e) => e.source(),
            CertifyError::Output(e) => e.source(),
            CertifyError::Param(_) | CertifyError::Resume(_) | CertifyError::Cancelled => None,
        }
    }
}

impl From<ModelError> for CertifyError {
    fn from(e: ModelError) -> Self {
        CertifyError::Model(e)
    }
}

/// What a certification run ends with: a certificate, or "inconclusive"
/// with the reason (naming the matrix). Never a wrong interval.
#[derive(Debug)]
pub enum Outcome<T> {
    /// Every interval is a certified enclosure.
    Certified(T),
    /// Something could not be certified; the reason says what.
    Inconclusive(Inconclusive),
}

impl<T> Outcome<T> {
    /// The certified value, or `Err` with the reason.
    pub fn into_result(self) -> Result<T, Inconclusive> {
        match self {
            Outcome::Certified(t) => Ok(t),
            Outcome::Inconclusive(i) => Err(i),
        }
    }

    /// The next step on a certified value (inconclusive stays so).
    pub fn and_then<U>(self, f: impl FnOnce(T) -> Result<U, Inconclusive>) -> Outcome<U> {
        match self {
            Outcome::Certified(t) => match f(t) {
                Ok(u) => Outcome::Certified(u),
                Err(i) => Outcome::Inconclusive(i),
            },
            Outcome::Inconclusive(i) => Outcome::Inconclusive(i),
        }
    }
}

/// Parses a positive decimal parameter into an interval containing it
/// exactly (`spectral::positive_decimal_interval`, the bounded parser).
pub fn parse_decimal(text: &str, what: &str) -> Result<Interval, CertifyError> {
    crate::spectral::positive_decimal_interval(text)
        .map_err(|e| CertifyError::Param(format!("invalid {what}: {e}")))
}

/// Checks a grid resolution against the one limit that `certify`, `verify`
/// and the certificate reader share ([`MAX_GRID_M`]).
pub fn check_grid_m(m: usize) -> Result<usize, CertifyError> {
    if m == 0 || m > MAX_GRID_M {
        return Err(CertifyError::Param(format!(
            "grid m must be between 1 and {MAX_GRID_M}, got {m}"
        )));
    }
    Ok(m)
}

/// The certificate's entries of a checkpoint's weight files (name and
/// SHA-256, in the checkpoint's order).
pub(crate) fn file_entries(hashes: &[crate::io::checkpoint::FileHash]) -> Vec<FileEntry> {
    hashes
        .iter()
        .map(|h| FileEntry {
            file: h.file.clone(),
            sha256: h.sha256.clone(),
        })
        .collect()
}
