//! The main job: read a checkpoint, extract the proxy matrices, certify
//! their spectra and norms, evaluate the bound proxies, and assemble the
//! certificate. Every quantity in the certificate is an enclosure.

use std::path::{Path, PathBuf};

use faer::Par;
use inari::Interval;
use rayon::prelude::*;
use serde_json::{json, Value};

use crate::arch::{self, ArchOverrides, Architecture, MatrixId, ModelError, ProxySource};
use crate::bounds::{self, MatrixInput, ModelProxies, ProxyParams};
use crate::enclosure::{Enclosure, Inconclusive};
use crate::io::checkpoint::{Checkpoint, FileHash};
use crate::linalg::factored::certify_factored;
use crate::linalg::{certify_singular_values, Precision, SingularValues, SvdOptions};
use crate::spectral::{summarize, summarize_factored, SpectralSummary};

/// Certificate format name.
pub const FORMAT: &str = "specbound-certificate";
/// Certificate format version.
pub const VERSION: u32 = 1;

/// Options of [`certify_model`].
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
            l_phi: "1.13".into(),
            grid_m: None,
            overrides: ArchOverrides::default(),
        }
    }
}

/// Why no certificate was produced.
#[derive(Debug)]
pub enum CertifyError {
    /// Bad model input.
    Model(ModelError),
    /// A bad parameter.
    Param(String),
    /// Something could not be certified (the reason names the matrix).
    Inconclusive(String),
}

impl std::fmt::Display for CertifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CertifyError::Model(e) => write!(f, "{e}"),
            CertifyError::Param(s) => write!(f, "{s}"),
            CertifyError::Inconclusive(s) => write!(f, "inconclusive: {s}"),
        }
    }
}

impl std::error::Error for CertifyError {}

impl From<ModelError> for CertifyError {
    fn from(e: ModelError) -> Self {
        CertifyError::Model(e)
    }
}

/// Certified results of one proxy matrix.
pub struct MatrixResult {
    /// Which matrix.
    pub id: MatrixId,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Certified singular values.
    pub sv: SingularValues,
    /// Certified norms and rank.
    pub summary: SpectralSummary,
}

/// A complete certificate.
pub struct ModelCertificate {
    /// What was given on the command line.
    pub model_path: PathBuf,
    /// SHA-256 of every weight file read.
    pub hashes: Vec<FileHash>,
    /// Architecture.
    pub arch: Architecture,
    /// Parameters.
    pub params: ProxyParams,
    /// Method used.
    pub precision: Precision,
    /// Per matrix.
    pub results: Vec<MatrixResult>,
    /// Proxies and bounds.
    pub proxies: ModelProxies,
}

/// Parses a positive decimal parameter into an interval containing it exactly.
pub fn parse_decimal(text: &str, what: &str) -> Result<Interval, CertifyError> {
    let v = crate::spectral::parse_decimal_interval(text)
        .ok_or_else(|| CertifyError::Param(format!("invalid {what} '{text}'")))?;
    if !(v.inf() > 0.0) {
        return Err(CertifyError::Param(format!(
            "{what} must be a positive finite number, got '{text}'"
        )));
    }
    Ok(v)
}

/// Runs the whole pipeline on a model directory or `.safetensors` file.
///
/// *Guarantee: certified enclosure* for every interval of the result; see
/// `docs/certify.md` for which paper quantity each one is.
pub fn certify_model(path: &Path, opts: &CertifyOptions) -> Result<ModelCertificate, CertifyError> {
    let l_phi = parse_decimal(&opts.l_phi, "L_phi")?;
    let ck = Checkpoint::open(path).map_err(ModelError::from)?;
    let arch = arch::detect(&ck, &opts.overrides)?;
    let grid_m = opts
        .grid_m
        .unwrap_or_else(|| bounds::default_grid_m(arch.layers, arch.hidden));
    if grid_m == 0 {
        return Err(CertifyError::Param("grid m must be at least 1".into()));
    }
    let mats = arch::extract(&ck, &arch)?;
    let hashes = ck.file_hashes();
    let svd_opts = SvdOptions {
        precision: opts.precision,
        par: Par::Seq, // parallel over matrices instead
        ..SvdOptions::default()
    };
    let results: Vec<Result<MatrixResult, CertifyError>> = mats
        .into_par_iter()
        .map(|pm| {
            let id = pm.id;
            let wrap = |e: Inconclusive| CertifyError::Inconclusive(format!("{id}: {}", e.reason));
            let (sv, summary) = match &pm.source {
                ProxySource::Factored { b, c } => {
                    let sv = certify_factored(b, c, &svd_opts).map_err(wrap)?;
                    let s = summarize_factored(b, c, &sv).map_err(wrap)?;
                    (sv, s)
                }
                ProxySource::Dense(a) => {
                    let sv = certify_singular_values(a, &svd_opts).map_err(wrap)?;
                    let s = summarize(a, &sv).map_err(wrap)?;
                    (sv, s)
                }
            };
            Ok(MatrixResult {
                id: pm.id,
                rows: pm.rows,
                cols: pm.cols,
                sv,
                summary,
            })
        })
        .collect();
    let results: Vec<MatrixResult> = results.into_iter().collect::<Result<_, _>>()?;
    let params = ProxyParams {
        l_phi_text: opts.l_phi.trim().to_string(),
        l_phi,
        grid_m,
    };
    let inputs: Vec<MatrixInput<'_>> = results
        .iter()
        .map(|r| MatrixInput {
            id: r.id,
            sv: &r.sv,
            summary: &r.summary,
        })
        .collect();
    let proxies = bounds::evaluate(&inputs, arch.layers, arch.heads, arch.hidden, &params);
    let cert = ModelCertificate {
        model_path: path.to_path_buf(),
        hashes,
        arch,
        params,
        precision: opts.precision,
        results,
        proxies,
    };
    cert.check_finite()?;
    Ok(cert)
}

fn enc_json(x: Interval) -> Option<Value> {
    let e = Enclosure::from_interval(x)?;
    Some(json!({"lo": e.lo(), "hi": e.hi()}))
}

fn e_json(e: &Enclosure) -> Value {
    json!({"lo": e.lo(), "hi": e.hi()})
}

/// Decimal of the nearest f64 to k/m (for display; the exact p is `p_fraction`).
fn p_value(k: usize, m: usize) -> f64 {
    k as f64 / m as f64
}

impl ModelCertificate {
    fn check_finite(&self) -> Result<(), CertifyError> {
        let bad = |x: Interval| Enclosure::from_interval(x).is_none();
        for (r, p) in self.results.iter().zip(&self.proxies.matrices) {
            let id = r.id;
            if bad(p.alpha) || bad(p.gamma) || bad(p.scale) || bad(p.min_contribution) {
                return Err(CertifyError::Inconclusive(format!(
                    "{id}: a proxy overflowed f64"
                )));
            }
            if p.contributions.iter().any(|(_, c)| bad(*c)) {
                return Err(CertifyError::Inconclusive(format!(
                    "{id}: a contribution overflowed f64"
                )));
            }
        }
        if bad(self.proxies.ours) || bad(self.proxies.edelman) {
            return Err(CertifyError::Inconclusive("a bound overflowed f64".into()));
        }
        Ok(())
    }

    /// The certificate as JSON (see `docs/certificate.md`).
    pub fn to_json(&self) -> Value {
        let m = self.params.grid_m;
        let matrices: Vec<Value> = self
            .results
            .iter()
            .zip(&self.proxies.matrices)
            .map(|(r, p)| {
                let nz = r.sv.values.len() - r.sv.structural_zeros;
                let mut methods: Vec<String> = r.sv.values.iter().map(|v| v.method.name()).collect();
                methods.sort();
                methods.dedup();
                json!({
                    "layer": r.id.layer,
                    "head": r.id.head_column(),
                    "type": r.id.kind.name(),
                    "rows": r.rows,
                    "cols": r.cols,
                    "spectral_norm": e_json(&r.summary.spectral_norm),
                    "frobenius_norm": e_json(&r.summary.frobenius_norm),
                    "nuclear_norm": e_json(&r.summary.nuclear_norm),
                    "norm_21": e_json(&r.summary.norm_21),
                    "norm_11": e_json(&r.summary.norm_11),
                    "stable_rank": r.summary.stable_rank.as_ref().map(e_json),
                    "rank": {"lo": r.summary.rank.lo, "hi": r.summary.rank.hi},
                    "singular_values": r.sv.values[..nz].iter().map(|v| e_json(&v.enclosure)).collect::<Vec<_>>(),
                    "structural_zeros": r.sv.structural_zeros,
                    "method": methods,
                    "alpha": enc_json(p.alpha),
                    "gamma": enc_json(p.gamma),
                    "scale": enc_json(p.scale),
                    "contributions": p.contributions.iter().map(|(k, c)| json!({
                        "p": p_value(*k, m),
                        "p_fraction": format!("{k}/{m}"),
                        "value": enc_json(*c),
                    })).collect::<Vec<_>>(),
                    "p_opt": p.p_opt.iter().map(|&k| p_value(k, m)).collect::<Vec<_>>(),
                    "p_opt_fraction": p.p_opt.iter().map(|&k| format!("{k}/{m}")).collect::<Vec<_>>(),
                    "min_contribution": enc_json(p.min_contribution),
                })
            })
            .collect();
        json!({
            "format": FORMAT,
            "version": VERSION,
            "tool": {"name": "specbound", "version": env!("CARGO_PKG_VERSION")},
            "model": {
                "path": self.model_path.display().to_string(),
                "files": self.hashes.iter().map(|h| json!({"file": h.file, "sha256": h.sha256})).collect::<Vec<_>>(),
                "architecture": self.arch.family,
                "tensor_prefix": self.arch.prefix,
                "layers": self.arch.layers,
                "hidden": self.arch.hidden,
                "heads": self.arch.heads,
                "kv_heads": self.arch.kv_heads,
                "head_dim": self.arch.head_dim,
                "intermediate": self.arch.intermediate,
            },
            "parameters": {
                "l_phi": self.params.l_phi_text,
                "grid_m": m,
                "grid": (0..=2 * m).map(|k| format!("{k}/{m}")).collect::<Vec<_>>(),
                "n": self.arch.hidden,
                "depth": self.arch.layers,
                "precision": self.precision.to_string(),
                "rank": "exact rank of the stored matrix (certified), not a numerical rank",
            },
            "matrices": matrices,
            "layers": self.proxies.layers.iter().enumerate().map(|(l, x)| json!({
                "layer": l, "alpha": enc_json(x.alpha), "xi": enc_json(x.xi)
            })).collect::<Vec<_>>(),
            "bounds": {
                "ours": enc_json(self.proxies.ours),
                "edelman": enc_json(self.proxies.edelman),
            },
            "extensions": self.arch.extensions(&self.params.l_phi_text),
        })
    }
}
