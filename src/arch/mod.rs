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
mod id;

pub use id::{MatrixId, MatrixType};

use crate::io::ReadError;
use crate::matrix::DenseMatrix;

/// Tensor layouts this module maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// BERT, RoBERTa, MiniLM: `encoder.layer.N.attention.self.query.weight`, ...
    Bert,
    /// ViT: `encoder.layer.N.attention.attention.query.weight`, ...
    Vit,
    /// DistilBERT: `transformer.layer.N.attention.q_lin.weight`, `ffn.lin1`, ...
    DistilBert,
    /// GPT-2: `h.N.attn.c_attn.weight` (HF Conv1D, stored `[in, out]`, Q|K|V fused).
    Gpt2,
    /// LLaMA, Mistral, Qwen2, SmolLM: `layers.N.self_attn.q_proj.weight`, gated MLP.
    Llama,
    /// llama.cpp GGUF names: `blk.N.attn_q.weight`, gated MLP.
    Gguf,
}

/// Architecture facts the proxies need.
#[derive(Clone, Debug, PartialEq)]
pub struct Architecture {
    /// Model family as named in config.json or GGUF metadata (`bert`, `gpt2`, `llama`, ...).
    pub family: String,
    /// Tensor layout.
    pub layout: Layout,
    /// Tensor-name prefix before the layer list (`""`, `"bert."`, `"model."`, ...).
    pub prefix: String,
    /// Number of layers L.
    pub layers: usize,
    /// Hidden size N.
    pub hidden: usize,
    /// Attention (query) heads H.
    pub heads: usize,
    /// Key/value heads (grouped-query attention); equals `heads` otherwise.
    pub kv_heads: usize,
    /// Head dimension.
    pub head_dim: usize,
    /// Feed-forward width I (for gated MLPs the width F of each of gate/up).
    pub intermediate: usize,
    /// Gated (SwiGLU) feed-forward: `M_in = [W_gate, W_up]`, an extension of the paper.
    pub gated: bool,
}

impl Architecture {
    /// The statement to record when the proxies extend the paper's setting.
    pub fn extension_note(&self) -> Option<String> {
        self.gated.then(|| {
            format!(
                "gated (SwiGLU) feed-forward is outside the paper's theorem: M_in is taken as \
                 [W_gate, W_up] side by side ({} x {}) and M_out as W_down ({} x {}); the bounds \
                 of this model are an extension of the paper",
                self.hidden,
                2 * self.intermediate,
                self.intermediate,
                self.hidden
            )
        })
    }
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
    /// Which matrix.
    pub id: MatrixId,
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
    "bert, roberta, xlm-roberta, distilbert, vit, gpt2, llama, mistral, qwen2 \
(also SmolLM and other LLaMA-layout models), and llama.cpp GGUF files of those";

/// Per-layer tensor names (before the prefix) of a layout, in the order
/// query, key, value, output, then feed-forward.
fn layer_names(layout: Layout, l: usize) -> Vec<String> {
    let f = |v: &[&str]| v.iter().map(|t| t.replace("{l}", &l.to_string())).collect();
    match layout {
        Layout::Bert => f(&[
            "encoder.layer.{l}.attention.self.query.weight",
            "encoder.layer.{l}.attention.self.key.weight",
            "encoder.layer.{l}.attention.self.value.weight",
            "encoder.layer.{l}.attention.output.dense.weight",
            "encoder.layer.{l}.intermediate.dense.weight",
            "encoder.layer.{l}.output.dense.weight",
        ]),
        Layout::Vit => f(&[
            "encoder.layer.{l}.attention.attention.query.weight",
            "encoder.layer.{l}.attention.attention.key.weight",
            "encoder.layer.{l}.attention.attention.value.weight",
            "encoder.layer.{l}.attention.output.dense.weight",
            "encoder.layer.{l}.intermediate.dense.weight",
            "encoder.layer.{l}.output.dense.weight",
        ]),
        Layout::DistilBert => f(&[
            "transformer.layer.{l}.attention.q_lin.weight",
            "transformer.layer.{l}.attention.k_lin.weight",
            "transformer.layer.{l}.attention.v_lin.weight",
            "transformer.layer.{l}.attention.out_lin.weight",
            "transformer.layer.{l}.ffn.lin1.weight",
            "transformer.layer.{l}.ffn.lin2.weight",
        ]),
        Layout::Gpt2 => f(&[
            "h.{l}.attn.c_attn.weight",
            "h.{l}.attn.c_proj.weight",
            "h.{l}.mlp.c_fc.weight",
            "h.{l}.mlp.c_proj.weight",
        ]),
        Layout::Llama => f(&[
            "layers.{l}.self_attn.q_proj.weight",
            "layers.{l}.self_attn.k_proj.weight",
            "layers.{l}.self_attn.v_proj.weight",
            "layers.{l}.self_attn.o_proj.weight",
            "layers.{l}.mlp.gate_proj.weight",
            "layers.{l}.mlp.up_proj.weight",
            "layers.{l}.mlp.down_proj.weight",
        ]),
        Layout::Gguf => f(&[
            "blk.{l}.attn_q.weight",
            "blk.{l}.attn_k.weight",
            "blk.{l}.attn_v.weight",
            "blk.{l}.attn_output.weight",
            "blk.{l}.ffn_gate.weight",
            "blk.{l}.ffn_up.weight",
            "blk.{l}.ffn_down.weight",
        ]),
    }
}

fn family_layout(family: &str) -> Option<Layout> {
    Some(match family {
        "bert" | "roberta" | "xlm-roberta" | "camembert" | "electra" => Layout::Bert,
        "vit" => Layout::Vit,
        "distilbert" => Layout::DistilBert,
        "gpt2" => Layout::Gpt2,
        "llama" | "mistral" | "qwen2" | "smollm" => Layout::Llama,
        _ => return None,
    })
}

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

fn gguf_usize(ck: &Checkpoint, arch: &str, key: &str) -> Option<usize> {
    match ck.gguf_meta()?.get(&format!("{arch}.{key}"))? {
        crate::io::gguf::MetaValue::Int(v) if *v >= 0 => Some(*v as usize),
        _ => None,
    }
}

fn shape(ck: &Checkpoint, name: &str) -> Result<(usize, usize), ModelError> {
    match ck.info(name) {
        Some((s, _)) if s.len() == 2 => Ok((s[0], s[1])),
        Some((s, _)) => Err(invalid(
            &ck.file_of(name),
            Some(name),
            format!("expected a 2-D tensor, found shape {s:?}"),
        )),
        None => Err(invalid(&ck.file_of(name), Some(name), "missing tensor")),
    }
}

/// Recognises the architecture from config.json (`model_type`,
/// `architectures`), GGUF metadata, or tensor names, and reads its facts
/// (checked against the tensor shapes).
pub fn detect(ck: &Checkpoint, ov: &ArchOverrides) -> Result<Architecture, ModelError> {
    let cfg_path = ck
        .config_path()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("config.json"));
    let mut family: Option<String> = None;
    let mut gguf_arch: Option<String> = None;
    if let Some(meta) = ck.gguf_meta() {
        let a = match meta.get("general.architecture") {
            Some(crate::io::gguf::MetaValue::Str(s)) => s.clone(),
            _ => "llama".to_string(),
        };
        if family_layout(&a) != Some(Layout::Llama) {
            return Err(invalid(
                &ck.file_of(""),
                Some("general.architecture"),
                format!("unsupported GGUF architecture '{a}' (supported: {SUPPORTED})"),
            ));
        }
        family = Some(a.clone());
        gguf_arch = Some(a);
    } else if let Some(cfg) = ck.config() {
        let mt = cfg
            .get("model_type")
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_lowercase();
        let archs: Vec<String> = cfg
            .get("architectures")
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_lowercase))
                    .collect()
            })
            .unwrap_or_default();
        if family_layout(&mt).is_some() {
            family = Some(mt.clone());
        } else if mt.is_empty() {
            for (pfx, fam) in [
                ("bert", "bert"),
                ("roberta", "roberta"),
                ("distilbert", "distilbert"),
                ("gpt2", "gpt2"),
                ("vit", "vit"),
                ("llama", "llama"),
                ("mistral", "mistral"),
                ("qwen2", "qwen2"),
            ] {
                if archs.iter().any(|a| a.starts_with(pfx)) {
                    family = Some(fam.into());
                    break;
                }
            }
        }
        if family.is_none() {
            let what = if mt.is_empty() { archs.join(",") } else { mt };
            return Err(invalid(
                &cfg_path,
                Some("model_type"),
                format!("unsupported architecture '{what}' (supported: {SUPPORTED})"),
            ));
        }
    }
    // The layout and prefix from the layer-0 tensor names.
    let layouts = [
        Layout::Bert,
        Layout::Vit,
        Layout::DistilBert,
        Layout::Gpt2,
        Layout::Llama,
        Layout::Gguf,
    ];
    let mut found: Option<(Layout, String)> = None;
    for lay in layouts {
        if let Some(f) = &family {
            let want = if gguf_arch.is_some() {
                Layout::Gguf
            } else {
                family_layout(f).expect("known")
            };
            if lay != want {
                continue;
            }
        }
        let first = &layer_names(lay, 0)[0];
        if let Some(prefix) = ck
            .names()
            .find_map(|n| n.strip_suffix(first.as_str()).map(str::to_string))
        {
            if prefix.is_empty() || prefix.ends_with('.') {
                found = Some((lay, prefix));
                break;
            }
        }
    }
    let Some((layout, prefix)) = found else {
        let msg = match &family {
            Some(f) => {
                let lay = if gguf_arch.is_some() {
                    Layout::Gguf
                } else {
                    family_layout(f).expect("known")
                };
                format!(
                    "the model type '{f}' expects tensors like '{}', but there are none",
                    layer_names(lay, 0)[0]
                )
            }
            None => {
                format!("no layer tensors of a supported layout found (supported: {SUPPORTED})")
            }
        };
        return Err(invalid(&ck.file_of(""), None, msg));
    };
    let family = family.unwrap_or_else(|| {
        match layout {
            Layout::Bert => "bert",
            Layout::Vit => "vit",
            Layout::DistilBert => "distilbert",
            Layout::Gpt2 => "gpt2",
            Layout::Llama | Layout::Gguf => "llama",
        }
        .to_string()
    });
    let first = format!("{prefix}{}", layer_names(layout, 0)[0]);
    let mut found_layers = 0usize;
    while ck.contains(&format!("{prefix}{}", layer_names(layout, found_layers)[0])) {
        found_layers += 1;
    }
    let g = |k: &str| gguf_arch.as_deref().and_then(|a| gguf_usize(ck, a, k));
    let cfg_first = |keys: &[&str]| -> Result<Option<usize>, ModelError> {
        for k in keys {
            if let Some(v) = config_usize(ck, k)? {
                return Ok(Some(v));
            }
        }
        Ok(None)
    };
    let layers = ov
        .layers
        .or(g("block_count"))
        .or(cfg_first(&["num_hidden_layers", "n_layer", "n_layers"])?)
        .unwrap_or(found_layers);
    if layers == 0 {
        return Err(invalid(
            &cfg_path,
            Some("num_hidden_layers"),
            "the model has no layers",
        ));
    }
    // Hidden size from the query (or fused) weight: [out, in] everywhere but GPT-2's [in, out].
    let (r0, c0) = shape(ck, &first)?;
    let hidden = match layout {
        Layout::Gpt2 => r0,
        _ => c0,
    };
    if let Some(h) = g("embedding_length").or(cfg_first(&["hidden_size", "n_embd", "dim"])?) {
        if h != hidden {
            return Err(invalid(
                &ck.file_of(&first),
                Some(&first),
                format!(
                    "shape [{r0}, {c0}] disagrees with the hidden size {h} in {}",
                    cfg_path.display()
                ),
            ));
        }
    }
    let heads = match ov.heads.or(g("attention.head_count")).or(cfg_first(&[
        "num_attention_heads",
        "n_head",
        "n_heads",
    ])?) {
        Some(h) => h,
        None => {
            return Err(invalid(
                &ck.file_of(&first),
                None,
                "the number of attention heads cannot be inferred from tensor shapes: \
                 put config.json beside the file or pass --heads",
            ))
        }
    };
    if heads == 0 {
        return Err(invalid(
            &cfg_path,
            Some("num_attention_heads"),
            "zero attention heads",
        ));
    }
    let q_out = match layout {
        Layout::Gpt2 => {
            if c0 != 3 * hidden {
                return Err(invalid(
                    &ck.file_of(&first),
                    Some(&first),
                    format!("fused c_attn must be [N, 3N], found [{r0}, {c0}]"),
                ));
            }
            hidden
        }
        _ => r0,
    };
    let head_dim = match g("attention.key_length").or(cfg_first(&["head_dim"])?) {
        Some(d) => d,
        None => {
            if hidden % heads != 0 {
                return Err(invalid(
                    &cfg_path,
                    Some("num_attention_heads"),
                    format!("hidden size {hidden} is not divisible by {heads} heads"),
                ));
            }
            hidden / heads
        }
    };
    if head_dim == 0 || q_out != heads * head_dim {
        return Err(invalid(
            &ck.file_of(&first),
            Some(&first),
            format!("{q_out} query rows disagree with {heads} heads of dimension {head_dim}"),
        ));
    }
    let kv_heads = match layout {
        Layout::Llama | Layout::Gguf => {
            let kname = format!("{prefix}{}", layer_names(layout, 0)[1]);
            let (kr, _) = shape(ck, &kname)?;
            let kv = ov
                .heads
                .map(|_| kr / head_dim)
                .or(g("attention.head_count_kv"))
                .or(cfg_first(&["num_key_value_heads"])?)
                .unwrap_or(heads);
            if kv == 0 || kr != kv * head_dim || heads % kv != 0 {
                return Err(invalid(&ck.file_of(&kname), Some(&kname), format!(
                    "{kr} key rows do not give a divisor of {heads} heads of dimension {head_dim} (key/value heads {kv})")));
            }
            kv
        }
        _ => heads,
    };
    let ffn = layer_names(layout, 0);
    let (fname, intermediate) = match layout {
        Layout::Gpt2 => {
            let n = format!("{prefix}{}", ffn[2]);
            let (_, c) = shape(ck, &n)?;
            (n, c)
        }
        _ => {
            let n = format!("{prefix}{}", ffn[4]);
            let (r, _) = shape(ck, &n)?;
            (n, r)
        }
    };
    if let Some(i) =
        g("feed_forward_length").or(cfg_first(&["intermediate_size", "n_inner", "hidden_dim"])?)
    {
        if i != intermediate {
            return Err(invalid(
                &ck.file_of(&fname),
                Some(&fname),
                format!(
                    "{intermediate} disagrees with the feed-forward width {i} in {}",
                    cfg_path.display()
                ),
            ));
        }
    }
    Ok(Architecture {
        family,
        layout,
        prefix,
        layers,
        hidden,
        heads,
        kv_heads,
        head_dim,
        intermediate,
        gated: matches!(layout, Layout::Llama | Layout::Gguf),
    })
}

fn rows_slice(x: &DenseMatrix, start: usize, count: usize) -> DenseMatrix {
    DenseMatrix {
        rows: count,
        cols: x.cols,
        data: x.data[start * x.cols..(start + count) * x.cols].to_vec(),
    }
}

fn hcat(a: &DenseMatrix, b: &DenseMatrix) -> DenseMatrix {
    let mut data = Vec::with_capacity(a.data.len() + b.data.len());
    for i in 0..a.rows {
        data.extend_from_slice(&a.data[i * a.cols..(i + 1) * a.cols]);
        data.extend_from_slice(&b.data[i * b.cols..(i + 1) * b.cols]);
    }
    DenseMatrix {
        rows: a.rows,
        cols: a.cols + b.cols,
        data,
    }
}

/// The tensors a layer's proxies are built from (for `inspect` and messages).
pub fn layer_sources(arch: &Architecture, l: usize) -> Vec<String> {
    layer_names(arch.layout, l)
        .into_iter()
        .map(|n| format!("{}{n}", arch.prefix))
        .collect()
}

/// Reads the layer tensors and builds all proxy matrices, in the order
/// layer, then QK heads, V_tilde heads, M_in, M_out. Query head h uses
/// key/value head `floor(h / (heads / kv_heads))` (grouped-query attention).
pub fn extract(ck: &Checkpoint, arch: &Architecture) -> Result<Vec<ProxyMatrix>, ModelError> {
    let (n, i, dh) = (arch.hidden, arch.intermediate, arch.head_dim);
    let (h, kv) = (arch.heads, arch.kv_heads);
    let mut out = Vec::new();
    for l in 0..arch.layers {
        let names = layer_sources(arch, l);
        let read = |name: &str, want: (usize, usize)| -> Result<DenseMatrix, ModelError> {
            if !ck.contains(name) {
                return Err(invalid(
                    &ck.file_of(name),
                    Some(name),
                    format!(
                        "missing tensor (layer {l} of {}; needed for the proxies)",
                        arch.layers
                    ),
                ));
            }
            let m = ck.read(name)?.matrix;
            if (m.rows, m.cols) != want {
                return Err(invalid(
                    &ck.file_of(name),
                    Some(name),
                    format!(
                        "shape [{}, {}] disagrees with the architecture (expected [{}, {}])",
                        m.rows, m.cols, want.0, want.1
                    ),
                ));
            }
            Ok(m)
        };
        // Q, K, V, O in [out, in] orientation; M_in and M_out as the paper's row-vector matrices.
        let (q, k, v, o, m_in, m_out) = match arch.layout {
            Layout::Gpt2 => {
                let fused = read(&names[0], (n, 3 * n))?.transposed(); // [3N, N]
                let o = read(&names[1], (n, n))?.transposed();
                let q = rows_slice(&fused, 0, n);
                let k = rows_slice(&fused, n, n);
                let v = rows_slice(&fused, 2 * n, n);
                (
                    q,
                    k,
                    v,
                    o,
                    read(&names[2], (n, i))?,
                    read(&names[3], (i, n))?,
                )
            }
            Layout::Llama | Layout::Gguf => {
                let q = read(&names[0], (h * dh, n))?;
                let k = read(&names[1], (kv * dh, n))?;
                let v = read(&names[2], (kv * dh, n))?;
                let o = read(&names[3], (n, h * dh))?;
                let gate = read(&names[4], (i, n))?;
                let up = read(&names[5], (i, n))?;
                let down = read(&names[6], (n, i))?;
                (
                    q,
                    k,
                    v,
                    o,
                    hcat(&gate.transposed(), &up.transposed()),
                    down.transposed(),
                )
            }
            _ => {
                let q = read(&names[0], (n, n))?;
                let k = read(&names[1], (n, n))?;
                let v = read(&names[2], (n, n))?;
                let o = read(&names[3], (n, n))?;
                (
                    q,
                    k,
                    v,
                    o,
                    read(&names[4], (i, n))?.transposed(),
                    read(&names[5], (n, i))?.transposed(),
                )
            }
        };
        let ot = o.transposed(); // rows = input units of the output projection
        let group = h / kv;
        for hh in 0..h {
            let g = hh / group;
            out.push(ProxyMatrix {
                id: MatrixId::head(l, hh, MatrixType::QK),
                rows: n,
                cols: n,
                source: ProxySource::Factored {
                    b: rows_slice(&q, hh * dh, dh).transposed(),
                    c: rows_slice(&k, g * dh, dh),
                },
            });
        }
        for hh in 0..h {
            let g = hh / group;
            out.push(ProxyMatrix {
                id: MatrixId::head(l, hh, MatrixType::VTilde),
                rows: n,
                cols: n,
                source: ProxySource::Factored {
                    b: rows_slice(&v, g * dh, dh).transposed(),
                    c: rows_slice(&ot, hh * dh, dh),
                },
            });
        }
        let (ir, ic) = (m_in.rows, m_in.cols);
        out.push(ProxyMatrix {
            id: MatrixId::layer(l, MatrixType::MIn),
            rows: ir,
            cols: ic,
            source: ProxySource::Dense(m_in),
        });
        let (or, oc) = (m_out.rows, m_out.cols);
        out.push(ProxyMatrix {
            id: MatrixId::layer(l, MatrixType::MOut),
            rows: or,
            cols: oc,
            source: ProxySource::Dense(m_out),
        });
    }
    Ok(out)
}

/// One proxy matrix as `inspect` describes it, without reading its values.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ProxyDescription {
    /// Layer.
    pub layer: usize,
    /// Head or -1.
    pub head: i64,
    /// Family name.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// How it is formed from stored tensors.
    pub formed_from: String,
}

/// A tensor no proxy uses: `(name, shape, dtype)`.
pub type UnmappedTensor = (String, Vec<usize>, String);

/// Describes every proxy matrix and lists the tensors that no proxy uses
/// (embeddings, norms, biases, heads, buffers, anything unrecognised).
pub fn describe(
    ck: &Checkpoint,
    arch: &Architecture,
) -> (Vec<ProxyDescription>, Vec<UnmappedTensor>) {
    let (n, dh) = (arch.hidden, arch.head_dim);
    let group = arch.heads / arch.kv_heads;
    let mut used = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for l in 0..arch.layers {
        let t = layer_sources(arch, l);
        used.extend(t.iter().cloned());
        let (q, k, v, o) = match arch.layout {
            Layout::Gpt2 => (
                format!("{}[:, 0:{n}]^T", t[0]),
                format!("{}[:, {n}:{}]^T", t[0], 2 * n),
                format!("{}[:, {}:{}]^T", t[0], 2 * n, 3 * n),
                format!("{}^T", t[1]),
            ),
            _ => (t[0].clone(), t[1].clone(), t[2].clone(), t[3].clone()),
        };
        for h in 0..arch.heads {
            let g = h / group;
            out.push(ProxyDescription {
                layer: l,
                head: h as i64,
                kind: MatrixType::QK.name(),
                rows: n,
                cols: n,
                formed_from: format!(
                    "({q} rows {}..{})^T ({k} rows {}..{}), factored",
                    h * dh,
                    (h + 1) * dh,
                    g * dh,
                    (g + 1) * dh
                ),
            });
        }
        for h in 0..arch.heads {
            let g = h / group;
            out.push(ProxyDescription {
                layer: l,
                head: h as i64,
                kind: MatrixType::VTilde.name(),
                rows: n,
                cols: n,
                formed_from: format!(
                    "({v} rows {}..{})^T ({o}^T rows {}..{}), factored",
                    g * dh,
                    (g + 1) * dh,
                    h * dh,
                    (h + 1) * dh
                ),
            });
        }
        let (min_from, mout_from, icols) = match arch.layout {
            Layout::Gpt2 => (t[2].clone(), t[3].clone(), arch.intermediate),
            Layout::Llama | Layout::Gguf => (
                format!("[{}^T, {}^T] (gated: extension)", t[4], t[5]),
                format!("{}^T", t[6]),
                2 * arch.intermediate,
            ),
            _ => (
                format!("{}^T", t[4]),
                format!("{}^T", t[5]),
                arch.intermediate,
            ),
        };
        out.push(ProxyDescription {
            layer: l,
            head: -1,
            kind: MatrixType::MIn.name(),
            rows: n,
            cols: icols,
            formed_from: min_from,
        });
        out.push(ProxyDescription {
            layer: l,
            head: -1,
            kind: MatrixType::MOut.name(),
            rows: arch.intermediate,
            cols: n,
            formed_from: mout_from,
        });
    }
    let unmapped = ck
        .names()
        .filter(|name| !used.contains(*name))
        .map(|name| {
            let (shape, dtype) = ck.info(name).unwrap_or_default();
            (name.to_string(), shape, dtype)
        })
        .collect();
    (out, unmapped)
}
