//! `specbound svd`: certified enclosures of all singular values of one
//! matrix, and its norms, rank and Schatten quantities.

use super::{CmdError, Exit, ModelRef, Report, Style, Ui};
use crate::io::LoadedMatrix;
use crate::linalg::{Precision, SingularValues, SvdOptions};
use crate::report::SvdJson;
use crate::spectral::{
    certify_and_summarize, enclose_schatten, SchattenEnclosure, SchattenP, SpectralSummary,
};

/// Where the matrix comes from.
#[derive(Clone, Debug)]
pub enum MatrixSource {
    /// A matrix file (`.npy`, or one tensor of a safetensors, GGUF or
    /// PyTorch file), or a tensor of a model directory or Hub id.
    Model {
        /// The file, directory or id.
        model: ModelRef,
        /// The tensor (needed for a model and for files of several tensors).
        tensor: Option<String>,
    },
    /// A matrix already in memory (the Python module's arrays), with the
    /// name it is reported under.
    Matrix {
        /// The name in messages and the report.
        name: String,
        /// The exact matrix.
        matrix: LoadedMatrix,
    },
}

impl MatrixSource {
    /// The matrix and the name it is shown under. A model directory needs
    /// a tensor; without one the error lists some of its 2-D tensors.
    pub(crate) fn load(self) -> Result<(String, LoadedMatrix), CmdError> {
        match self {
            MatrixSource::Matrix { name, matrix } => Ok((name, matrix)),
            MatrixSource::Model { model, tensor } => {
                let shown = match &model {
                    ModelRef::Path(p) => super::shown(p),
                    ModelRef::Hub { id, .. } => crate::io::escape(id).into_owned(),
                    ModelRef::Bundled => String::new(),
                    ModelRef::Memory(_) => crate::io::memory::MEMORY_LABEL.to_string(),
                };
                let r = model.resolve()?;
                let is_npy = r
                    .path
                    .extension()
                    .is_some_and(|e| e.eq_ignore_ascii_case("npy"));
                if let (true, Some(t)) = (is_npy, &tensor) {
                    return Err(CmdError::usage(format!(
                        "{shown}: a .npy file holds one matrix and no tensor names: --tensor '{}' does not apply (drop it)",
                        crate::io::escape(t)
                    )));
                }
                if r.path.is_dir() || r.is_memory() {
                    let ck = crate::io::checkpoint::Checkpoint::open(&r.path)?;
                    let Some(t) = tensor else {
                        let names = ck.two_d_float_tensors();
                        return Err(CmdError::usage(format!(
                            "{shown}: a model: pass --tensor NAME ({} 2-D float tensors, e.g. {})",
                            names.len(),
                            names.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
                        )));
                    };
                    return Ok((shown, ck.read(&t)?));
                }
                Ok((shown, crate::io::read_matrix(&r.path, tensor.as_deref())?))
            }
        }
    }
}

/// One matrix to certify.
#[derive(Clone, Debug)]
pub struct SvdRequest {
    /// The matrix.
    pub source: MatrixSource,
    /// Schatten exponents (exact decimals; 0 = rank).
    pub schatten_p: Vec<SchattenP>,
    /// The method.
    pub precision: Precision,
    /// The target relative radius of `auto`.
    pub rtol: f64,
}

/// What was certified of the matrix.
#[derive(Clone, Debug)]
pub struct SvdCertified {
    /// Every singular value.
    pub sv: SingularValues,
    /// Norms, stable rank, rank.
    pub summary: SpectralSummary,
    /// One per requested exponent.
    pub schatten: Vec<SchattenEnclosure>,
    /// The same values as `specbound svd --json` writes them (its
    /// serialisable view, also the table's source).
    pub json: SvdJson,
}

/// The answer of `svd`: the matrix, and what was certified of it or why
/// nothing was. One answer, three faces: [`SvdCertified`] is its certified
/// part, [`SvdJson`] that part's serialisable view, and the Python module's
/// `SvdResult` the same answer as Python objects.
#[derive(Debug)]
pub struct SvdReport {
    /// The input as shown.
    pub input: String,
    /// Rows and columns.
    pub shape: (usize, usize),
    /// The certified values, or why there are none.
    pub outcome: Result<Box<SvdCertified>, String>,
}

/// Runs `svd`.
///
/// *Guarantee: certified enclosure* of every value
/// (`certify_and_summarize`, [`enclose_schatten`], which name their
/// lemmas).
///
/// ```
/// use specbound::cmd::defaults;
/// use specbound::cmd::svd::{run, MatrixSource, SvdRequest};
/// use specbound::cmd::{ModelRef, Silent};
/// use specbound::spectral::SchattenP;
///
/// // A 384 x 384 query weight of MiniLM, stored as .npy.
/// let req = SvdRequest {
///     source: MatrixSource::Model {
///         model: ModelRef::Path("data/minilm-l0-query.npy".into()),
///         tensor: None,
///     },
///     schatten_p: vec![SchattenP::parse("1").unwrap(), SchattenP::parse("2").unwrap()],
///     precision: defaults::SVD_PRECISION.parse().unwrap(),
///     rtol: defaults::RTOL,
/// };
/// let report = run(req, &Silent).unwrap();
/// assert_eq!(report.shape, (384, 384));
/// let certified = report.outcome.unwrap();
/// assert!(certified.sv.values[0].enclosure.lo() > 0.0);
/// ```
pub fn run(req: SvdRequest, ui: &dyn Ui) -> Result<SvdReport, CmdError> {
    if !(req.rtol > 0.0 && req.rtol.is_finite()) {
        return Err(CmdError::usage(format!(
            "--rtol must be a positive number, got {}",
            req.rtol
        )));
    }
    let tensor = match &req.source {
        MatrixSource::Model { tensor, .. } => tensor.clone(),
        MatrixSource::Matrix { .. } => None,
    };
    let (input, loaded) = req.source.load()?;
    let LoadedMatrix { matrix: a, dtype } = loaded;
    let shape = (a.rows, a.cols);
    let opts = SvdOptions {
        precision: req.precision,
        rtol: req.rtol,
        ..SvdOptions::default()
    };
    // The matrix is given up: dropped once prepared (the peak memory).
    let certified = {
        let _spin = crate::linalg::cost::is_long(a.rows, a.cols, req.precision).then(|| {
            ui.spinner(
                "svd",
                &format!(
                    "certifying all singular values of {} x {} ({})",
                    a.rows, a.cols, req.precision
                ),
            )
        });
        certify_and_summarize(a, &opts)
    };
    let outcome = certified
        .map(|(sv, summary)| {
            let schatten: Vec<_> = req
                .schatten_p
                .iter()
                .map(|p| enclose_schatten(&sv, p))
                .collect();
            let json = SvdJson::new(
                input.clone(),
                tensor,
                dtype.to_string().to_lowercase(),
                req.precision.to_string(),
                &sv,
                &summary,
                &schatten,
            );
            Box::new(SvdCertified {
                sv,
                summary,
                schatten,
                json,
            })
        })
        .map_err(|inc| inc.reason);
    Ok(SvdReport {
        input,
        shape,
        outcome,
    })
}

impl Report for SvdReport {
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
            .map(|why| format!("{}: inconclusive: {why}", self.input))
    }

    fn text(&self, style: Style) -> String {
        match &self.outcome {
            Ok(c) => c.json.to_table_with(40, style),
            Err(_) => String::new(),
        }
    }

    fn json(&self) -> Option<String> {
        Some(match &self.outcome {
            Ok(c) => serde_json::to_string(&c.json).expect("the report serialises"),
            Err(_) => String::new(),
        })
    }
}
