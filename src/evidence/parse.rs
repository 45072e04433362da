//! Reading a certificate back as untrusted input: every key, type and
//! count is checked, every interval must have finite `lo <= hi`, and sizes
//! are bounded before anything is allocated from them. Errors name the JSON
//! path of the first problem.

use std::path::Path;

use serde_json::Value;

use super::EvidenceError;
use crate::arch::MatrixType;

/// Largest certificate file read (bytes).
pub const MAX_BYTES: u64 = 1 << 30;
/// Largest number of proxy matrices accepted.
pub const MAX_MATRICES: usize = 1 << 20;
/// Largest grid resolution accepted.
pub const MAX_GRID_M: usize = 1_000;

/// A closed interval read from a certificate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CI {
    /// Lower end.
    pub lo: f64,
    /// Upper end.
    pub hi: f64,
}

/// One matrix entry of a certificate.
#[derive(Clone, Debug)]
pub struct CertMatrix {
    /// JSON path of this entry (for messages).
    pub at: String,
    /// Layer.
    pub layer: usize,
    /// Head (-1 for layer matrices).
    pub head: i64,
    /// Family.
    pub kind: MatrixType,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Spectral norm.
    pub spectral_norm: CI,
    /// Frobenius norm.
    pub frobenius_norm: CI,
    /// Nuclear norm.
    pub nuclear_norm: CI,
    /// (2,1)-norm.
    pub norm_21: CI,
    /// (1,1)-norm.
    pub norm_11: CI,
    /// Stable rank (absent when not certified).
    pub stable_rank: Option<CI>,
    /// Rank bounds.
    pub rank: (u64, u64),
    /// Nonzero singular values, largest first.
    pub singular_values: Vec<CI>,
    /// Exact zeros after them.
    pub structural_zeros: usize,
    /// alpha of the layer.
    pub alpha: CI,
    /// gamma.
    pub gamma: CI,
    /// gamma alpha L.
    pub scale: CI,
    /// `(k, c(W, k/m))`.
    pub contributions: Vec<(usize, CI)>,
    /// Grid indices stated as possible minimisers.
    pub p_opt: Vec<usize>,
    /// Minimum contribution.
    pub min_contribution: CI,
}

impl CertMatrix {
    /// Every enclosure of this entry with its JSON key (norms, proxies,
    /// singular values by index, contributions by grid index), in a fixed
    /// order shared by `verify --model` and `diff`.
    pub fn named_intervals(&self) -> Vec<(String, CI)> {
        let mut v = vec![
            ("spectral_norm".to_string(), self.spectral_norm),
            ("frobenius_norm".into(), self.frobenius_norm),
            ("nuclear_norm".into(), self.nuclear_norm),
            ("norm_21".into(), self.norm_21),
            ("norm_11".into(), self.norm_11),
            ("alpha".into(), self.alpha),
            ("gamma".into(), self.gamma),
            ("scale".into(), self.scale),
            ("min_contribution".into(), self.min_contribution),
        ];
        if let Some(s) = self.stable_rank {
            v.push(("stable_rank".into(), s));
        }
        for (i, s) in self.singular_values.iter().enumerate() {
            v.push((format!("singular_values[{i}]"), *s));
        }
        for (k, x) in &self.contributions {
            v.push((format!("contributions[{k}].value"), *x));
        }
        v
    }
}

/// A parsed certificate.
#[derive(Clone, Debug)]
pub struct Cert {
    /// File it came from.
    pub file: String,
    /// `(file, sha256)` of the weight files.
    pub files: Vec<(String, String)>,
    /// Architecture family.
    pub architecture: String,
    /// Layers.
    pub layers: usize,
    /// Hidden size.
    pub hidden: usize,
    /// Heads.
    pub heads: usize,
    /// `L_phi` as written.
    pub l_phi: String,
    /// Grid resolution.
    pub grid_m: usize,
    /// Precision name.
    pub precision: String,
    /// Matrices.
    pub matrices: Vec<CertMatrix>,
    /// `(alpha, xi)` per layer.
    pub layer_values: Vec<(CI, CI)>,
    /// B_ours.
    pub ours: CI,
    /// B_Edel.
    pub edelman: CI,
}

struct Ctx<'a> {
    file: &'a str,
}

impl Ctx<'_> {
    fn err(&self, at: &str, message: impl Into<String>) -> EvidenceError {
        EvidenceError::Malformed {
            file: self.file.to_string(),
            at: at.to_string(),
            message: message.into(),
        }
    }
    fn get<'v>(&self, v: &'v Value, at: &str, key: &str) -> Result<&'v Value, EvidenceError> {
        v.as_object()
            .ok_or_else(|| self.err(at, "expected an object"))?
            .get(key)
            .ok_or_else(|| self.err(at, format!("missing key '{key}'")))
    }
    fn uint(&self, v: &Value, at: &str, key: &str, max: u64) -> Result<u64, EvidenceError> {
        let x = self.get(v, at, key)?;
        let n = x.as_u64().ok_or_else(|| {
            self.err(
                &format!("{at}.{key}"),
                format!("expected a non-negative integer, found {}", short(x)),
            )
        })?;
        if n > max {
            return Err(self.err(
                &format!("{at}.{key}"),
                format!("{n} exceeds the limit {max}"),
            ));
        }
        Ok(n)
    }
    fn string(&self, v: &Value, at: &str, key: &str) -> Result<String, EvidenceError> {
        let x = self.get(v, at, key)?;
        x.as_str().map(str::to_string).ok_or_else(|| {
            self.err(
                &format!("{at}.{key}"),
                format!("expected a string, found {}", short(x)),
            )
        })
    }
    fn interval_value(&self, x: &Value, at: &str) -> Result<CI, EvidenceError> {
        let lo = self.get(x, at, "lo")?;
        let hi = self.get(x, at, "hi")?;
        let lo = lo.as_f64().ok_or_else(|| {
            self.err(
                &format!("{at}.lo"),
                format!("expected a number, found {}", short(lo)),
            )
        })?;
        let hi = hi.as_f64().ok_or_else(|| {
            self.err(
                &format!("{at}.hi"),
                format!("expected a number, found {}", short(hi)),
            )
        })?;
        if !(lo.is_finite() && hi.is_finite()) {
            return Err(self.err(at, "interval ends must be finite"));
        }
        if !(lo <= hi) {
            return Err(self.err(at, format!("lo = {lo:e} is greater than hi = {hi:e}")));
        }
        Ok(CI { lo, hi })
    }
    fn interval(&self, v: &Value, at: &str, key: &str) -> Result<CI, EvidenceError> {
        let x = self.get(v, at, key)?;
        self.interval_value(x, &format!("{at}.{key}"))
    }
    fn array<'v>(
        &self,
        v: &'v Value,
        at: &str,
        key: &str,
        max: usize,
    ) -> Result<&'v Vec<Value>, EvidenceError> {
        let x = self.get(v, at, key)?;
        let a = x.as_array().ok_or_else(|| {
            self.err(
                &format!("{at}.{key}"),
                format!("expected an array, found {}", short(x)),
            )
        })?;
        if a.len() > max {
            return Err(self.err(
                &format!("{at}.{key}"),
                format!("{} entries exceed the limit {max}", a.len()),
            ));
        }
        Ok(a)
    }
    fn fraction(&self, x: &Value, at: &str, m: usize) -> Result<usize, EvidenceError> {
        let s = x
            .as_str()
            .ok_or_else(|| self.err(at, format!("expected \"k/m\", found {}", short(x))))?;
        let (k, mm) = s
            .split_once('/')
            .ok_or_else(|| self.err(at, format!("expected \"k/m\", found \"{s}\"")))?;
        let k: usize = k
            .parse()
            .map_err(|_| self.err(at, format!("bad numerator in \"{s}\"")))?;
        let mm: usize = mm
            .parse()
            .map_err(|_| self.err(at, format!("bad denominator in \"{s}\"")))?;
        if mm != m || k > 2 * m {
            return Err(self.err(at, format!("\"{s}\" is not a point of the grid P_{m}")));
        }
        Ok(k)
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 40 {
        format!(
            "{}...",
            &s[..s.char_indices().nth(37).map(|(i, _)| i).unwrap_or(37)]
        )
    } else {
        s
    }
}

/// Reads and validates a certificate file.
pub fn read_certificate(path: &Path) -> Result<Cert, EvidenceError> {
    let file = path.display().to_string();
    let io = |e: std::io::Error| EvidenceError::Io {
        file: file.clone(),
        message: e.to_string(),
    };
    let len = std::fs::metadata(path).map_err(io)?.len();
    if len > MAX_BYTES {
        return Err(EvidenceError::Malformed {
            file: file.clone(),
            at: "(file)".into(),
            message: format!("{len} bytes exceed the limit of {MAX_BYTES}"),
        });
    }
    let bytes = std::fs::read(path).map_err(io)?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| EvidenceError::Malformed {
        file: file.clone(),
        at: format!("line {} column {}", e.line(), e.column()),
        message: format!("invalid JSON: {e}"),
    })?;
    parse_certificate(&v, &file)
}

/// Validates a certificate already parsed as JSON.
pub fn parse_certificate(v: &Value, file: &str) -> Result<Cert, EvidenceError> {
    let c = Ctx { file };
    let format = c.string(v, "$", "format")?;
    if format != crate::certify::FORMAT {
        return Err(c.err(
            "$.format",
            format!(
                "expected \"{}\", found \"{format}\"",
                crate::certify::FORMAT
            ),
        ));
    }
    let version = c.uint(v, "$", "version", u32::MAX as u64)?;
    if version != crate::certify::VERSION as u64 {
        return Err(c.err(
            "$.version",
            format!(
                "unsupported version {version} (this tool reads version {})",
                crate::certify::VERSION
            ),
        ));
    }
    let model = c.get(v, "$", "model")?;
    let files = c
        .array(model, "$.model", "files", 100_000)?
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let at = format!("$.model.files[{i}]");
            let name = c.string(f, &at, "file")?;
            let sha = c.string(f, &at, "sha256")?;
            if sha.len() != 64 || !sha.chars().all(|ch| ch.is_ascii_hexdigit()) {
                return Err(c.err(&format!("{at}.sha256"), "expected 64 hexadecimal digits"));
            }
            Ok((name, sha.to_lowercase()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let architecture = c.string(model, "$.model", "architecture")?;
    let layers = c.uint(model, "$.model", "layers", 100_000)? as usize;
    let hidden = c.uint(model, "$.model", "hidden", 1 << 24)? as usize;
    let heads = c.uint(model, "$.model", "heads", 1 << 16)? as usize;
    let params = c.get(v, "$", "parameters")?;
    let l_phi = c.string(params, "$.parameters", "l_phi")?;
    let grid_m = c.uint(params, "$.parameters", "grid_m", MAX_GRID_M as u64)? as usize;
    if grid_m == 0 {
        return Err(c.err("$.parameters.grid_m", "must be at least 1"));
    }
    let precision = c.string(params, "$.parameters", "precision")?;
    let mats = c.array(v, "$", "matrices", MAX_MATRICES)?;
    let mut matrices = Vec::with_capacity(mats.len());
    for (i, w) in mats.iter().enumerate() {
        let at = format!("$.matrices[{i}]");
        let kind_s = c.string(w, &at, "type")?;
        let kind = MatrixType::parse(&kind_s).ok_or_else(|| {
            c.err(
                &format!("{at}.type"),
                format!("unknown matrix type \"{kind_s}\""),
            )
        })?;
        let head_v = c.get(w, &at, "head")?;
        let head = head_v.as_i64().filter(|&h| h >= -1).ok_or_else(|| {
            c.err(
                &format!("{at}.head"),
                format!("expected an integer >= -1, found {}", short(head_v)),
            )
        })?;
        let rows = c.uint(w, &at, "rows", 1 << 24)? as usize;
        let cols = c.uint(w, &at, "cols", 1 << 24)? as usize;
        let kmin = rows.min(cols);
        let svs = c.array(w, &at, "singular_values", kmin)?;
        let singular_values = svs
            .iter()
            .enumerate()
            .map(|(j, x)| c.interval_value(x, &format!("{at}.singular_values[{j}]")))
            .collect::<Result<Vec<_>, _>>()?;
        let structural_zeros = c.uint(w, &at, "structural_zeros", kmin as u64)? as usize;
        if singular_values.len() + structural_zeros != kmin {
            return Err(c.err(&format!("{at}.singular_values"), format!(
                "{} values plus {structural_zeros} structural zeros do not make min(rows, cols) = {kmin}",
                singular_values.len())));
        }
        let rank_v = c.get(w, &at, "rank")?;
        let rank = (
            c.uint(rank_v, &format!("{at}.rank"), "lo", kmin as u64)?,
            c.uint(rank_v, &format!("{at}.rank"), "hi", kmin as u64)?,
        );
        if rank.0 > rank.1 {
            return Err(c.err(&format!("{at}.rank"), "lo is greater than hi"));
        }
        let stable_rank = match c.get(w, &at, "stable_rank")? {
            Value::Null => None,
            x => Some(c.interval_value(x, &format!("{at}.stable_rank"))?),
        };
        let contribs = c.array(w, &at, "contributions", 2 * grid_m + 1)?;
        if contribs.len() != 2 * grid_m + 1 {
            return Err(c.err(
                &format!("{at}.contributions"),
                format!(
                    "expected {} grid points, found {}",
                    2 * grid_m + 1,
                    contribs.len()
                ),
            ));
        }
        let mut contributions = Vec::with_capacity(contribs.len());
        for (j, x) in contribs.iter().enumerate() {
            let cat = format!("{at}.contributions[{j}]");
            let k = c.fraction(
                c.get(x, &cat, "p_fraction")?,
                &format!("{cat}.p_fraction"),
                grid_m,
            )?;
            if k != j {
                return Err(c.err(
                    &format!("{cat}.p_fraction"),
                    format!("grid points out of order (expected {j}/{grid_m})"),
                ));
            }
            contributions.push((k, c.interval(x, &cat, "value")?));
        }
        let p_opt = c
            .array(w, &at, "p_opt_fraction", 2 * grid_m + 1)?
            .iter()
            .enumerate()
            .map(|(j, x)| c.fraction(x, &format!("{at}.p_opt_fraction[{j}]"), grid_m))
            .collect::<Result<Vec<_>, _>>()?;
        let p_opt_num = c.array(w, &at, "p_opt", 2 * grid_m + 1)?;
        if p_opt_num.len() != p_opt.len()
            || p_opt_num
                .iter()
                .zip(&p_opt)
                .any(|(x, &k)| x.as_f64() != Some(k as f64 / grid_m as f64))
        {
            return Err(c.err(&format!("{at}.p_opt"), "does not match p_opt_fraction"));
        }
        let nonneg = |x: CI, key: &str| {
            if x.lo < 0.0 {
                Err(c.err(&format!("{at}.{key}"), "a norm cannot be negative"))
            } else {
                Ok(x)
            }
        };
        matrices.push(CertMatrix {
            at: at.clone(),
            layer: c.uint(w, &at, "layer", layers.saturating_sub(1) as u64)? as usize,
            head,
            kind,
            rows,
            cols,
            spectral_norm: nonneg(c.interval(w, &at, "spectral_norm")?, "spectral_norm")?,
            frobenius_norm: nonneg(c.interval(w, &at, "frobenius_norm")?, "frobenius_norm")?,
            nuclear_norm: nonneg(c.interval(w, &at, "nuclear_norm")?, "nuclear_norm")?,
            norm_21: nonneg(c.interval(w, &at, "norm_21")?, "norm_21")?,
            norm_11: nonneg(c.interval(w, &at, "norm_11")?, "norm_11")?,
            stable_rank,
            rank,
            singular_values,
            structural_zeros,
            alpha: nonneg(c.interval(w, &at, "alpha")?, "alpha")?,
            gamma: nonneg(c.interval(w, &at, "gamma")?, "gamma")?,
            scale: nonneg(c.interval(w, &at, "scale")?, "scale")?,
            contributions,
            p_opt,
            min_contribution: c.interval(w, &at, "min_contribution")?,
        });
    }
    let lv = c.array(v, "$", "layers", layers)?;
    if lv.len() != layers {
        return Err(c.err(
            "$.layers",
            format!("expected {layers} entries, found {}", lv.len()),
        ));
    }
    let layer_values = lv
        .iter()
        .enumerate()
        .map(|(l, x)| {
            let at = format!("$.layers[{l}]");
            Ok((c.interval(x, &at, "alpha")?, c.interval(x, &at, "xi")?))
        })
        .collect::<Result<Vec<_>, EvidenceError>>()?;
    let bounds = c.get(v, "$", "bounds")?;
    Ok(Cert {
        file: file.to_string(),
        files,
        architecture,
        layers,
        hidden,
        heads,
        l_phi,
        grid_m,
        precision,
        matrices,
        layer_values,
        ours: c.interval(bounds, "$.bounds", "ours")?,
        edelman: c.interval(bounds, "$.bounds", "edelman")?,
    })
}
