//! Proxy matrices of Sakai & Imaizumi (arXiv 2605.07297), extracted from a
//! checkpoint in row-vector orientation (`../shared/reference/paper-proxies.md` §3.2):
//!
//! * `QK` (layer l, head h) = `Q_h^T K_h`, N x N, kept factored (rank <= head_dim);
//! * `V_tilde` = `V_h^T O_h`, with `O_h` the head-h row slice of the
//!   transposed attention output projection, kept factored;
//! * `M_in` = `(intermediate.dense.weight)^T`, N x I;
//! * `M_out` = `(output.dense.weight)^T`, I x N.
//!
//! Values are the stored weights converted exactly to f64; slicing and
//! transposing move numbers without arithmetic, so every proxy matrix is
//! exactly the one the paper's formulas define for the stored weights.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::io::checkpoint::Checkpoint;
use crate::io::{DenseMatrix, ReadError};

/// The four proxy matrix families.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MatrixType {
    /// Query-key product of one head.
    QK,
    /// Value-output product of one head.
    VTilde,
    /// Feed-forward input matrix.
    MIn,
    /// Feed-forward output matrix.
    MOut,
}

impl MatrixType {
    /// The name used in certificates and CSV tables.
    pub fn name(self) -> &'static str {
        match self {
            MatrixType::QK => "QK",
            MatrixType::VTilde => "V_tilde",
            MatrixType::MIn => "M_in",
            MatrixType::MOut => "M_out",
        }
    }

    /// Parses a name written by [`MatrixType::name`].
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "QK" => Some(MatrixType::QK),
            "V_tilde" => Some(MatrixType::VTilde),
            "M_in" => Some(MatrixType::MIn),
            "M_out" => Some(MatrixType::MOut),
            _ => None,
        }
    }
}

/// Architecture facts the proxies need.
#[derive(Clone, Debug, PartialEq)]
pub struct Architecture {
    /// Model family (`bert` or `roberta`).
    pub family: String,
    /// Tensor-name prefix before `encoder.layer.` (`""`, `"bert."`, `"roberta."`).
    pub prefix: String,
    /// Number of layers L.
    pub layers: usize,
    /// Hidden size N.
    pub hidden: usize,
    /// Attention heads H.
    pub heads: usize,
    /// Head dimension N / H.
    pub head_dim: usize,
    /// Feed-forward width I.
    pub intermediate: usize,
}

/// Values that override (or supply) architecture facts.
#[derive(Clone, Debug, Default)]
pub struct ArchOverrides {
    /// Number of attention heads (required when there is no config.json).
    pub heads: Option<usize>,
    /// Number of layers.
    pub layers: Option<usize>,
}

/// A proxy matrix, factored or dense.
#[derive(Clone, Debug)]
pub enum ProxySource {
    /// `A = B C`, `B` is N x r, `C` is r x N.
    Factored {
        /// Left factor.
        b: DenseMatrix,
        /// Right factor.
        c: DenseMatrix,
    },
    /// A dense matrix.
    Dense(DenseMatrix),
}

/// One proxy matrix with its place in the model.
#[derive(Clone, Debug)]
pub struct ProxyMatrix {
    /// Layer index from 0.
    pub layer: usize,
    /// Head index, or -1 for layer matrices.
    pub head: i64,
    /// Family.
    pub kind: MatrixType,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// The matrix.
    pub source: ProxySource,
}

/// Errors about the model as a whole (one line, naming file and tensor/key).
#[derive(Debug)]
pub enum ModelError {
    /// A file or tensor could not be read.
    Read(ReadError),
    /// The model is not what the proxies need.
    Invalid {
        /// The file concerned.
        path: PathBuf,
        /// The tensor or config key concerned.
        key: Option<String>,
        /// What is wrong.
        message: String,
    },
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::Read(e) => write!(f, "{e}"),
            ModelError::Invalid { path, key, message } => match key {
                Some(k) => write!(f, "{}: '{k}': {message}", path.display()),
                None => write!(f, "{}: {message}", path.display()),
            },
        }
    }
}

impl std::error::Error for ModelError {}

impl From<ReadError> for ModelError {
    fn from(e: ReadError) -> Self {
        ModelError::Read(e)
    }
}

fn invalid(path: &Path, key: Option<&str>, message: impl Into<String>) -> ModelError {
    ModelError::Invalid {
        path: path.to_path_buf(),
        key: key.map(str::to_string),
        message: message.into(),
    }
}

/// Architectures whose tensor layout this module maps.
pub const SUPPORTED: &str =
    "bert, roberta (BERT-family encoders: BertModel, RobertaModel, MiniLM, ...)";

const LAYER_TENSORS: [&str; 6] = [
    "attention.self.query.weight",
    "attention.self.key.weight",
    "attention.self.value.weight",
    "attention.output.dense.weight",
    "intermediate.dense.weight",
    "output.dense.weight",
];

fn config_usize(ck: &Checkpoint, key: &str) -> Result<Option<usize>, ModelError> {
    let Some(cfg) = ck.config() else {
        return Ok(None);
    };
    match cfg.get(key) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(|x| Some(x as usize)).ok_or_else(|| {
            invalid(
                ck.config_path().unwrap_or(Path::new("config.json")),
                Some(key),
                format!("expected a non-negative integer, found {v}"),
            )
        }),
    }
}

/// Recognises a BERT-family checkpoint and reads its architecture facts from
/// `config.json` (checked against the tensor shapes) or from the tensors.
pub fn detect(ck: &Checkpoint, ov: &ArchOverrides) -> Result<Architecture, ModelError> {
    let cfg_path = ck
        .config_path()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("config.json"));
    let mut family = "bert".to_string();
    if let Some(cfg) = ck.config() {
        let mt = cfg.get("model_type").and_then(|v| v.as_str()).unwrap_or("");
        let archs: Vec<String> = cfg
            .get("architectures")
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_lowercase))
                    .collect()
            })
            .unwrap_or_default();
        let known = |s: &str| s == "bert" || s == "roberta" || s == "xlm-roberta";
        if known(mt) {
            family = mt.to_string();
        } else if mt.is_empty()
            && archs
                .iter()
                .any(|a| a.starts_with("bert") || a.starts_with("roberta"))
        {
            family = if archs.iter().any(|a| a.starts_with("roberta")) {
                "roberta"
            } else {
                "bert"
            }
            .into();
        } else {
            return Err(invalid(
                &cfg_path,
                Some("model_type"),
                format!(
                    "unsupported architecture '{}' (supported: {SUPPORTED})",
                    if mt.is_empty() {
                        archs.join(",")
                    } else {
                        mt.to_string()
                    }
                ),
            ));
        }
    }
    // Find the prefix from the layer-0 query weight.
    let suffix = "encoder.layer.0.attention.self.query.weight";
    let prefix = ck
        .names()
        .find_map(|n| n.strip_suffix(suffix).map(str::to_string))
        .ok_or_else(|| {
            invalid(
                &ck.file_of(suffix),
                Some(suffix),
                format!(
                    "no BERT-family layer tensors found (expected names like \
                     '[bert.|roberta.]{suffix}'; supported: {SUPPORTED})"
                ),
            )
        })?;
    if !prefix.is_empty() && !prefix.ends_with('.') {
        return Err(invalid(
            &ck.file_of(suffix),
            Some(&format!("{prefix}{suffix}")),
            "unrecognised tensor-name prefix",
        ));
    }
    let layer_prefix = format!("{prefix}encoder.layer.");
    let mut found_layers = 0usize;
    while ck.contains(&format!(
        "{layer_prefix}{found_layers}.attention.self.query.weight"
    )) {
        found_layers += 1;
    }
    let layers = match (ov.layers, config_usize(ck, "num_hidden_layers")?) {
        (Some(l), _) => l,
        (None, Some(l)) => l,
        (None, None) => found_layers,
    };
    if layers == 0 {
        return Err(invalid(
            &cfg_path,
            Some("num_hidden_layers"),
            "the model has no layers",
        ));
    }
    let qname = format!("{prefix}{suffix}");
    let (qshape, _) = ck.info(&qname).expect("found above");
    if qshape.len() != 2 || qshape[0] != qshape[1] {
        return Err(invalid(
            &ck.file_of(&qname),
            Some(&qname),
            format!("expected a square 2-D query weight, found shape {qshape:?}"),
        ));
    }
    let hidden = qshape[1];
    if let Some(h) = config_usize(ck, "hidden_size")? {
        if h != hidden {
            return Err(invalid(
                &ck.file_of(&qname),
                Some(&qname),
                format!(
                    "shape {qshape:?} disagrees with hidden_size = {h} in {}",
                    cfg_path.display()
                ),
            ));
        }
    }
    let heads = match (ov.heads, config_usize(ck, "num_attention_heads")?) {
        (Some(h), _) => h,
        (None, Some(h)) => h,
        (None, None) => {
            return Err(invalid(
                &ck.file_of(&qname),
                None,
                "the number of attention heads cannot be inferred from tensor shapes: \
                 put config.json beside the file or pass --heads",
            ))
        }
    };
    if heads == 0 || hidden % heads != 0 {
        return Err(invalid(
            &cfg_path,
            Some("num_attention_heads"),
            format!("hidden size {hidden} is not divisible by {heads} heads"),
        ));
    }
    let iname = format!("{layer_prefix}0.intermediate.dense.weight");
    let intermediate = match ck.info(&iname) {
        Some((s, _)) if s.len() == 2 => s[0],
        Some((s, _)) => {
            return Err(invalid(
                &ck.file_of(&iname),
                Some(&iname),
                format!("expected a 2-D tensor, found shape {s:?}"),
            ))
        }
        None => {
            return Err(invalid(&ck.file_of(&iname), Some(&iname), "missing tensor"));
        }
    };
    if let Some(i) = config_usize(ck, "intermediate_size")? {
        if i != intermediate {
            return Err(invalid(
                &ck.file_of(&iname),
                Some(&iname),
                format!(
                    "{intermediate} rows disagree with intermediate_size = {i} in {}",
                    cfg_path.display()
                ),
            ));
        }
    }
    Ok(Architecture {
        family,
        prefix,
        layers,
        hidden,
        heads,
        head_dim: hidden / heads,
        intermediate,
    })
}

fn transpose(x: &DenseMatrix) -> DenseMatrix {
    let mut data = vec![0.0; x.data.len()];
    for i in 0..x.rows {
        for j in 0..x.cols {
            data[j * x.rows + i] = x.data[i * x.cols + j];
        }
    }
    DenseMatrix {
        rows: x.cols,
        cols: x.rows,
        data,
    }
}

fn rows_slice(x: &DenseMatrix, start: usize, count: usize) -> DenseMatrix {
    DenseMatrix {
        rows: count,
        cols: x.cols,
        data: x.data[start * x.cols..(start + count) * x.cols].to_vec(),
    }
}

/// Reads the layer tensors and builds all proxy matrices, in the order
/// layer, then QK heads, V_tilde heads, M_in, M_out.
pub fn extract(ck: &Checkpoint, arch: &Architecture) -> Result<Vec<ProxyMatrix>, ModelError> {
    let (n, i, dh) = (arch.hidden, arch.intermediate, arch.head_dim);
    let mut out = Vec::new();
    for l in 0..arch.layers {
        let mut mats = Vec::with_capacity(6);
        for (t, want) in LAYER_TENSORS
            .iter()
            .zip([(n, n), (n, n), (n, n), (n, n), (i, n), (n, i)])
        {
            let name = format!("{}encoder.layer.{l}.{t}", arch.prefix);
            if !ck.contains(&name) {
                return Err(invalid(
                    &ck.file_of(&name),
                    Some(&name),
                    format!(
                        "missing tensor (layer {l} of {}; needed for the proxies)",
                        arch.layers
                    ),
                ));
            }
            let m = ck.read(&name)?.matrix;
            if (m.rows, m.cols) != want {
                return Err(invalid(&ck.file_of(&name), Some(&name), format!(
                    "shape [{}, {}] disagrees with the architecture (expected [{}, {}] for hidden {n}, intermediate {i})",
                    m.rows, m.cols, want.0, want.1)));
            }
            mats.push(m);
        }
        let (q, k, v, o, ff1, ff2) = (&mats[0], &mats[1], &mats[2], &mats[3], &mats[4], &mats[5]);
        let ot = transpose(o); // rows = input units of the output projection
        for h in 0..arch.heads {
            let qh = rows_slice(q, h * dh, dh);
            let kh = rows_slice(k, h * dh, dh);
            out.push(ProxyMatrix {
                layer: l,
                head: h as i64,
                kind: MatrixType::QK,
                rows: n,
                cols: n,
                source: ProxySource::Factored {
                    b: transpose(&qh),
                    c: kh,
                },
            });
        }
        for h in 0..arch.heads {
            let vh = rows_slice(v, h * dh, dh);
            let oh = rows_slice(&ot, h * dh, dh);
            out.push(ProxyMatrix {
                layer: l,
                head: h as i64,
                kind: MatrixType::VTilde,
                rows: n,
                cols: n,
                source: ProxySource::Factored {
                    b: transpose(&vh),
                    c: oh,
                },
            });
        }
        out.push(ProxyMatrix {
            layer: l,
            head: -1,
            kind: MatrixType::MIn,
            rows: n,
            cols: i,
            source: ProxySource::Dense(transpose(ff1)),
        });
        out.push(ProxyMatrix {
            layer: l,
            head: -1,
            kind: MatrixType::MOut,
            rows: i,
            cols: n,
            source: ProxySource::Dense(transpose(ff2)),
        });
    }
    Ok(out)
}
