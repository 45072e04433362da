//! The main job: read a checkpoint, extract the proxy matrices, certify
//! their spectra and norms, evaluate the bound proxies, and assemble the
//! typed [`Certificate`]. Every interval in it is a certified enclosure.
//!
//! One entry point, [`certify`], takes a [`Job`] (a model, a shard or the
//! whole, with or without the norm-based measures) to a certificate or a
//! shard's part; the `certify` command and the Python module come here.
//! The pipeline it runs, one file each:
//!
//! - `run`: a model's matrices layer by layer ([`certify_run`]), the
//!   next layer read while this one is certified;
//! - `schedule`: one layer's matrices on the thread pool
//!   (`certify_batch`: the critical path first, with the whole pool);
//! - `matrix`: one matrix ([`certify_matrix`]);
//! - `resume`: finished layers kept in a resume directory and read back;
//! - `norms` and `measures`: the raw weights' norms and the
//!   norm-based measures (`docs/measures.md`);
//! - `assemble`: the proxies and bounds from the certified spectra, for
//!   a run and for `merge` alike;
//! - `shard`: which matrices shard `K/N` certifies.
//!
//! (`merge` of shards' parts is a module of its own, above `evidence`: it
//! re-derives each part as evidence before using it.)

pub(crate) mod assemble;
pub(crate) mod matrix;
pub(crate) mod measures;
pub(crate) mod norms;
pub(crate) mod resume;
pub(crate) mod run;
pub(crate) mod schedule;
pub(crate) mod shard;

pub(crate) use assemble::assemble;
pub use matrix::{certify_matrix, MatrixResult};
pub use measures::{certify_measures, measures_entry, MatchingInit, MeasuresRun};
pub(crate) use measures::{
    certify_measures_reusing, certify_shard_raw_weights, check_init_architecture,
    measures_of_raw_weights,
};
pub use norms::{certify_distance_norms, certify_raw_norms};
pub use run::{certify_run, Run, RunScope};

use crate::arch::{ArchOverrides, ModelError};
use crate::certificate::{Certificate, FileEntry, Header, Part, ShardSpec, MAX_GRID_M};
use crate::enclosure::Inconclusive;
use crate::io::output::OutputError;
use crate::linalg::Precision;
use crate::progress::Ui;
use std::path::Path;

/// Options of [`certify_run`].
#[derive(Clone, Debug)]
pub struct CertifyOptions {
    /// Method for the singular values (default f64: enough for the targets).
    pub precision: Precision,
    /// `L_phi` (default 1.13, the GELU bound of the paper's code).
    pub l_phi: crate::bounds::LPhi,
    /// Grid resolution override (default `ceil(L + ln N)`).
    pub grid_m: Option<usize>,
    /// Architecture facts for a file without config.json.
    pub overrides: ArchOverrides,
}

impl Default for CertifyOptions {
    fn default() -> Self {
        Self {
            precision: Precision::F64,
            l_phi: crate::bounds::LPhi::paper(),
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

/// Reads `L_phi` at a front (the command line, Python): the one message
/// for a value that is not a positive decimal within the parser's limits.
pub fn parse_l_phi(text: &str) -> Result<crate::bounds::LPhi, CertifyError> {
    text.parse()
        .map_err(|e| CertifyError::Param(format!("invalid L_phi: {e}")))
}

/// Checks a grid resolution against the one limit that `certify`, `verify`
/// and the certificate reader share ([`MAX_GRID_M`]).
pub(crate) fn check_grid_m(m: usize) -> Result<usize, CertifyError> {
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

/// A certification to run: a model, the whole of it or one shard, with or
/// without the norm-based measures (`docs/measures.md`).
///
/// ```no_run
/// use specbound::certify::{certify, CertifyOptions, Job};
/// use specbound::progress::Silent;
///
/// let options = CertifyOptions::default();
/// let job = Job::new(std::path::Path::new("all-MiniLM-L6-v2"), &options);
/// let done = certify(&job, &Silent).expect("a readable model");
/// ```
#[derive(Clone, Debug)]
pub struct Job<'a> {
    /// The model's directory or file (or a key of a model in memory).
    pub model: &'a Path,
    /// Precision, `L_phi`, grid, architecture overrides.
    pub options: &'a CertifyOptions,
    /// Certify only this shard and make its part, not a certificate (a
    /// shard `1/1` too).
    pub shard: Option<ShardSpec>,
    /// Keep finished layers' parts here and skip them on a rerun.
    pub resume_dir: Option<&'a Path>,
    /// Keep every certified matrix's singular values
    /// ([`RunScope::keep_results`]).
    pub keep_results: bool,
    /// Certify the raw weights' norms and the measures too (with a shard,
    /// its share of the raw weights' norms, from which `merge` derives
    /// the measures).
    pub measures: bool,
    /// The initialisation of the distance measures (implies
    /// [`Job::measures`]), checked to have the model's architecture
    /// (`check_init_architecture`).
    pub init: Option<MatchingInit<'a>>,
}

impl<'a> Job<'a> {
    /// The whole of `model` with `options`, without the measures, keeping
    /// only the certificate's entries.
    pub fn new(model: &'a Path, options: &'a CertifyOptions) -> Self {
        Job {
            model,
            options,
            shard: None,
            resume_dir: None,
            keep_results: false,
            measures: false,
            init: None,
        }
    }

    fn scope(&self) -> RunScope {
        RunScope {
            shard: self.shard.unwrap_or(ShardSpec::WHOLE),
            resume_dir: self.resume_dir.map(Path::to_path_buf),
            keep_results: self.keep_results,
        }
    }

    fn with_measures(&self) -> bool {
        self.measures || self.init.is_some()
    }
}

/// What a job made: the certificate of the whole model, or a shard's part.
#[derive(Debug)]
pub enum Certified {
    /// The whole model's certificate (with its measures when asked), and
    /// the singular values of every matrix this run certified (only with
    /// [`RunScope::keep_results`]).
    Whole {
        /// The certificate.
        certificate: Box<Certificate>,
        /// What [`Run::results`] kept.
        results: Vec<MatrixResult>,
    },
    /// One shard's part (with its raw weights' norms when asked).
    Part {
        /// The part.
        part: Box<Part>,
        /// Matrices in the part.
        matrices: usize,
        /// Matrices of the model.
        total: usize,
        /// The shard's share of the estimated cost, out of 1.
        cost_share: f64,
    },
}

/// A job's run: its header (the model, the parameters, among them what
/// `--heads` replaced and which stack was read), what it read back from
/// the resume directory, and what it made.
#[derive(Debug)]
pub struct Certification {
    /// The program, model, parameters and extensions.
    pub header: Header,
    /// Layers whose part was read back from the resume directory.
    pub reused_layers: Vec<usize>,
    /// Matrices read back from the resume directory.
    pub read_back: usize,
    /// Matrices this run certified.
    pub certified_now: usize,
    /// The certificate or part, or why the proxies, the bounds or the
    /// measures could not be certified.
    pub made: Result<Certified, Inconclusive>,
}

/// The one entry point of certifying a model: runs `job` ([`certify_run`]
/// over its matrices, then for the whole model `assemble` and, with the
/// measures, `certify_measures_reusing`; for a shard its part, with its
/// share of the raw weights with the measures,
/// `certify_shard_raw_weights`), reporting progress through `ui`.
///
/// An initialisation comes checked to have the model's architecture
/// ([`MatchingInit`]).
///
/// *Guarantee: certified enclosure* for every interval of the certificate
/// or part (the functions above name their lemmas); `Err` for bad input,
/// [`Outcome::Inconclusive`] at the first matrix that could not be
/// certified, and [`Certification::made`] `Err` when the matrices were
/// certified but a proxy, bound or measure was not.
pub fn certify(job: &Job<'_>, ui: &dyn Ui) -> Result<Outcome<Certification>, CertifyError> {
    let run = {
        let progress = ui.matrices("certify");
        match certify_run(job.model, job.options, &job.scope(), &*progress)? {
            Outcome::Certified(run) => run,
            Outcome::Inconclusive(why) => return Ok(Outcome::Inconclusive(why)),
        }
    };
    let (header, reused_layers) = (run.header.clone(), run.reused_layers.clone());
    let (read_back, certified_now) = (run.spectra.len() - run.certified, run.certified);
    let made = match job.shard {
        None => whole(job, run, ui)?,
        Some(shard) => part(job, shard, run, ui)?,
    };
    Ok(Outcome::Certified(Certification {
        header,
        reused_layers,
        read_back,
        certified_now,
        made,
    }))
}

/// The whole model's certificate from its run, with the measures when the
/// job asks for them.
fn whole(
    job: &Job<'_>,
    run: Run,
    ui: &dyn Ui,
) -> Result<Result<Certified, Inconclusive>, CertifyError> {
    let (mut certificate, results) = match run.into_certificate() {
        Ok(c) => c,
        Err(why) => return Ok(Err(why)),
    };
    if job.with_measures() {
        let progress = ui.spinner("certify", "certifying the raw weights' norms");
        let m = certify_measures_reusing(
            job.model,
            job.init.map(|i| i.path()),
            job.options,
            Some(&certificate),
            &*progress,
        )?;
        match m {
            Outcome::Certified(m) => m.attach(&mut certificate),
            Outcome::Inconclusive(why) => return Ok(Err(why)),
        }
    }
    Ok(Ok(Certified::Whole {
        certificate: Box::new(certificate),
        results,
    }))
}

/// A shard's part from its run, with its share of the raw weights' norms
/// when the job asks for the measures (merge derives the measures from
/// those of every shard).
fn part(
    job: &Job<'_>,
    shard: ShardSpec,
    run: Run,
    ui: &dyn Ui,
) -> Result<Result<Certified, Inconclusive>, CertifyError> {
    let (matrices, cost_share, total) = (
        run.spectra.len(),
        run.cost_share,
        run.header.model.layers * (2 * run.header.model.heads + 2),
    );
    let raw = if job.with_measures() {
        let progress = ui.spinner("certify", "certifying the shard's raw weights' norms");
        match certify_shard_raw_weights(
            job.model,
            job.init.map(|i| i.path()),
            job.options,
            &run.header,
            shard,
            &run.spectra,
            &*progress,
        )? {
            Outcome::Certified(r) => Some(r),
            Outcome::Inconclusive(why) => return Ok(Err(why)),
        }
    } else {
        None
    };
    let part = run.into_part();
    let part = match raw {
        Some(r) => part.with_raw_weights(r.raw_weights, r.init_model),
        None => part,
    };
    Ok(Ok(Certified::Part {
        part: Box::new(part),
        matrices,
        total,
        cost_share,
    }))
}
