//! Proxy matrices of Sakai & Imaizumi (arXiv 2605.07297), extracted from a
//! checkpoint in row-vector orientation (`docs/certify.md`):
//!
//! * `QK` (layer l, head h) = `Q_h^T K_h`, N x N, kept factored (rank <= head_dim);
//! * `V_tilde` = `V_h^T O_h`, with `O_h` the head-h row slice of the
//!   transposed attention output projection, kept factored;
//! * `M_in` = `(intermediate.dense.weight)^T`, N x I;
//! * `M_out` = `(output.dense.weight)^T`, I x N;
//! * in a decoder block with a cross-attention, `QK_cross` = `Q_c,h^T K_c,h`
//!   and `V_tilde_cross` = `V_c,h^T O_c,h`, formed as `QK` and `V_tilde` from
//!   the cross-attention's own weights (spectra only: no bound uses them).
//!
//! Families are data ([`families::FAMILIES`]): [`detect`] recognises one and
//! reads its facts, and one recipe per layer, built from the table, is both
//! run by [`extract`] and shown by [`describe`], so `inspect` shows exactly
//! what `certify` computes and fails where it fails.
//!
//! Values are the stored weights converted exactly to f64; slicing and
//! transposing move numbers without arithmetic, so every proxy matrix is
//! exactly the one the paper's formulas define for the stored weights.

use std::fmt;
use std::path::{Path, PathBuf};

mod detect;
pub mod families;
mod id;
mod recipe;

pub use detect::detect;
pub use families::{FamilySpec, Fusion, MoeSpec, Orientation, Role, Stack, TensorSpec, FAMILIES};
pub use id::{Expert, LayerFfn, MatrixId, MatrixType};
pub(crate) use id::{MAX_EXPERTS, MAX_HEADS, MAX_LAYERS};
pub use recipe::{
    describe, extract, extract_layer, extract_raw_layer, ProxyDescription, RawWeight,
    UnmappedTensor,
};

use crate::io::ReadError;
use crate::matrix::DenseMatrix;

/// The paper's `L_phi` (its bound for GELU), as `certify --l-phi` defaults to it.
pub(crate) const PAPER_L_PHI: &str = "1.13";

/// The activation function of a model and where it was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Activation {
    /// Name as the file gives it (`gelu`, `gelu_new`, `silu`, `relu`, ...),
    /// control characters escaped and cut to 64 characters.
    pub name: String,
    /// Where it comes from, for messages (`'hidden_act' in config.json`).
    pub source: String,
}

impl Activation {
    /// GELU or one of its usual approximations (`families::GELU_VARIANTS`).
    pub fn is_gelu(&self) -> bool {
        families::GELU_VARIANTS.contains(&self.name.to_ascii_lowercase().as_str())
    }
}

/// Architecture facts the proxies need.
#[derive(Clone, Debug, PartialEq)]
pub struct Architecture {
    /// Model family as named in config.json or GGUF metadata (`bert`, `gpt2`, `llama`, ...).
    pub family: String,
    /// The layout table entry that maps its tensors.
    pub spec: &'static FamilySpec,
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
    /// The activation, when config.json or GGUF metadata tells it.
    pub activation: Option<Activation>,
    /// What `--heads` replaced, when the number of heads came from the flag.
    pub heads_override: Option<HeadsOverride>,
    /// The experts of a mixture-of-experts family ([`FamilySpec::moe`]).
    pub moe: Option<MoeLayout>,
    /// The stack read, for a model of several stacks ([`FamilySpec::stack`]).
    pub stack: Option<StackChoice>,
    /// The weights of a layer in the layout `config.json` chose
    /// (`FamilySpec::choose`; the family's own tensors for most).
    pub tensors: &'static [TensorSpec],
    /// The family's departures from the paper's model that hold for this
    /// model, rotary embeddings first (`FamilySpec::notes_where`).
    pub notes: Vec<&'static str>,
    /// How the blocks share stored weights (ALBERT), when they do.
    pub sharing: Option<Sharing>,
}

/// The experts of a mixture-of-experts model, as detected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MoeLayout {
    /// The feed-forward of each layer (dense layers: `LayerFfn::DENSE`).
    pub layers: Vec<LayerFfn>,
    /// Width of one routed expert (`moe_intermediate_size`; Mixtral's `intermediate_size`).
    pub expert_width: usize,
    /// Width of the shared expert (0 without one).
    pub shared_width: usize,
    /// Experts each token is routed to (`num_experts_per_tok`), when stated.
    pub experts_per_token: Option<usize>,
    /// The routed experts are stored as transformers v5's fused 3-D tensors
    /// ([`families::FusedExperts`]), not as tensors per expert.
    pub fused: bool,
}

impl Architecture {
    /// The feed-forward of layer `l`: dense unless the model has experts there.
    pub(crate) fn layer_ffn(&self, l: usize) -> LayerFfn {
        self.moe
            .as_ref()
            .and_then(|m| m.layers.get(l).copied())
            .unwrap_or(LayerFfn::DENSE)
    }

    /// The width of the feed-forward block `expert` (`None`: a dense
    /// layer's, the model's `intermediate`).
    pub(crate) fn ffn_width(&self, expert: Option<Expert>) -> usize {
        match (expert, &self.moe) {
            (Some(Expert::Routed(_)), Some(m)) => m.expert_width,
            (Some(Expert::Shared), Some(m)) => m.shared_width,
            _ => self.intermediate,
        }
    }

    /// Every proxy matrix of the model, in certificate order (with the
    /// cross-attention's `QK_cross` and `V_tilde_cross` heads of a decoder).
    pub(crate) fn matrix_ids(&self) -> Vec<MatrixId> {
        let cross = self.cross_attention();
        (0..self.layers)
            .flat_map(|l| self.layer_ffn(l).ids(l, self.heads, cross))
            .collect()
    }

    /// The per-layer feed-forwards a certificate records (`model.experts`):
    /// `None` for a model without experts.
    pub(crate) fn experts_entry(&self) -> Option<Vec<LayerFfn>> {
        self.moe.as_ref().map(|m| m.layers.clone())
    }
}

/// Which stack of a model of several stacks is read, and how it was chosen:
/// recorded in a certificate's parameters (`parameters.stack`) so that
/// `verify` reads the same one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackChoice {
    /// The stack read (`encoder`, `decoder`, `text`, `vision`).
    pub name: String,
    /// Every stack of the model type, in the table's order.
    pub stacks: Vec<String>,
    /// Named by `--stack`; otherwise the first stack the files hold.
    pub by_flag: bool,
}

impl StackChoice {
    /// The notice for stderr when no `--stack` chose: which stack is read
    /// of which; `None` when the flag chose.
    pub(crate) fn notice(&self, family: &str) -> Option<String> {
        (!self.by_flag && self.stacks.len() > 1).then(|| {
            format!(
                "model type '{}' has {} stacks of blocks ({}): reading '{}', the first the files \
                 hold; pass --stack NAME for another (recorded as parameters.stack)",
                clean_to(family, 64),
                self.stacks.len(),
                self.stacks.join(", "),
                self.name
            )
        })
    }
}

/// How the `layers` blocks of a model with shared layers map to stored
/// weights ([`families::SharedLayers`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sharing {
    /// Groups of stored layers.
    pub groups: usize,
    /// Stored layers per group, applied in turn at each depth.
    pub inner: usize,
    /// Depths (`num_hidden_layers`); the model has `depths * inner` blocks.
    pub depths: usize,
}

impl Sharing {
    /// The group and the layer within it whose weights block `b` applies:
    /// depth `b / inner` uses group `depth / (depths / groups)` (`depths`
    /// a multiple of `groups`, checked when read).
    pub(crate) fn stored(&self, b: usize) -> (usize, usize) {
        let depth = b / self.inner;
        (depth / (self.depths / self.groups), b % self.inner)
    }
}

/// The number of heads given by `--heads`, with what the file states (when
/// it states a number): recorded in a certificate's parameters so that a
/// reader knows the heads are the user's, not the file's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeadsOverride {
    /// The heads given by the flag (the model's heads).
    pub heads: usize,
    /// The heads the file states (config.json or GGUF metadata), if any.
    pub replaced: Option<usize>,
    /// Where the file states it (`'num_attention_heads' in config.json`).
    pub source: Option<String>,
}

impl Architecture {
    /// Layout name (`Bert`, `Gpt2`, `Llama`, `Gguf`, ...).
    pub fn layout(&self) -> &'static str {
        self.spec.layout
    }

    /// Gated (GLU) feed-forward: `M_in = [W_gate, W_up]`, an extension of the paper.
    pub fn gated(&self) -> bool {
        self.tensors
            .iter()
            .any(|t| t.roles.contains(&Role::FfnGate))
    }

    /// A decoder whose blocks have a cross-attention: its `QK_cross` and
    /// `V_tilde_cross` heads are proxy matrices of every layer (certificate
    /// key `model.cross_attention`).
    pub fn cross_attention(&self) -> bool {
        self.tensors
            .iter()
            .any(|t| t.roles.contains(&Role::CrossQuery))
    }

    /// Rotary position embeddings (ignored in `QK`, an extension).
    pub fn rotary(&self) -> bool {
        self.notes.contains(&families::ROTARY)
    }

    /// The stored name of `t` in block `l` (its group's, in a model with
    /// shared layers).
    pub(crate) fn tensor_name(&self, t: &TensorSpec, l: usize) -> String {
        let (g, i) = self.sharing.map_or((l, 0), |s| s.stored(l));
        t.name_at(&self.prefix, g, i)
    }

    /// The stored name of `t`'s scale vector in block `l`, if it has one.
    pub(crate) fn scale_name(&self, t: &TensorSpec, l: usize) -> Option<String> {
        let (g, i) = self.sharing.map_or((l, 0), |s| s.stored(l));
        t.scale_at(&self.prefix, g, i)
    }

    /// Every place where this model departs from the paper's model, one
    /// sentence each, for the certificate's `extensions` and `inspect`:
    ///
    /// * a gated feed-forward (LLaMA family): how `M_in`/`M_out` are formed;
    /// * rotary position embeddings (LLaMA family, GGUF): ignored in `QK`;
    /// * the family's own notes ([`FamilySpec::notes`]: parallel residual,
    ///   position biases, Gemma 2's logit scale and cap), and those its
    ///   `config.json` flags choose ([`FamilySpec::flag_notes`]);
    /// * shared layers ([`families::SharedLayers`]): each shared matrix
    ///   counted at every depth where it is applied;
    /// * `L_phi`: when `paper_l_phi` (the run's `L_phi` is the paper's GELU
    ///   bound `1.13`, the default) and the activation is not GELU or a GELU approximation
    ///   (`families::GELU_VARIANTS`), or is unknown (no config.json or
    ///   GGUF metadata said it). A user who passes another `--l-phi` has
    ///   chosen the constant, and no note is made.
    ///
    /// A family for which the paper's reasoning gives no bound
    /// ([`FamilySpec::no_bound`]) has none: there is no bound to extend,
    /// and its reason says why.
    pub fn extensions(&self, paper_l_phi: bool) -> Vec<String> {
        let mut out = Vec::new();
        if self.spec.no_bound.is_some() {
            return out;
        }
        if self.gated() {
            out.push(format!(
                "gated (GLU: SwiGLU, GeGLU) feed-forward is outside the paper's theorem: M_in is taken as \
                 [W_gate, W_up] side by side ({} x {}) and M_out as W_down ({} x {}); the bounds \
                 of this model are an extension of the paper",
                self.hidden,
                self.intermediate.saturating_mul(2),
                self.intermediate,
                self.hidden
            ));
        }
        out.extend(self.notes.iter().map(|n| n.to_string()));
        if let (Some(_), Some(shared)) = (self.sharing, self.spec.shared) {
            out.push(shared.note.to_string());
        }
        if paper_l_phi {
            match &self.activation {
                Some(a) if a.is_gelu() => {}
                Some(a) => out.push(format!(
                    "L_phi = {PAPER_L_PHI} is the paper's Lipschitz bound for GELU, but the \
                     activation of this model is '{}' ({}); the bounds use L_phi = {PAPER_L_PHI} \
                     as given: pass --l-phi with a Lipschitz constant of '{}' for bounds about \
                     this model",
                    a.name, a.source, a.name
                )),
                None => out.push(format!(
                    "L_phi = {PAPER_L_PHI} is the paper's Lipschitz bound for GELU, and the \
                     activation of this model is unknown (config.json or GGUF metadata does not \
                     name it); the bounds use L_phi = {PAPER_L_PHI} as given: pass --l-phi with a \
                     Lipschitz constant of its activation for bounds about this model"
                )),
            }
        }
        out
    }
}

impl Architecture {
    /// How the paper's bound applies to this model, one line for `inspect`
    /// (`docs/architectures.md`): exactly, when [`Architecture::extensions`]
    /// is empty at `paper_l_phi`; otherwise as an extension, for the reasons
    /// listed there; not at all for a family whose [`FamilySpec::no_bound`]
    /// says why.
    pub(crate) fn bound_applies(&self, paper_l_phi: bool) -> String {
        if let Some(reason) = self.spec.no_bound {
            return format!("the paper's bound does not apply, and none is computed: {reason}");
        }
        match self.extensions(paper_l_phi).len() {
            0 => "the paper's bound applies exactly (the paper's block and proxies)".to_string(),
            n => format!(
                "the paper's bound applies as an extension ({n} departure{} from the paper's model, \
                 listed below; docs/architectures.md)",
                if n == 1 { "" } else { "s" }
            ),
        }
    }
}

/// Values that override (or supply) architecture facts.
#[derive(Clone, Debug, Default)]
pub struct ArchOverrides {
    /// Number of attention heads (required when there is no config.json).
    pub heads: Option<usize>,
    /// Number of layers.
    pub layers: Option<usize>,
    /// The stack of a model of several stacks (`--stack`: `encoder`,
    /// `decoder`, `text`, `vision`); by default the first the files hold.
    pub stack: Option<String>,
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
                Some(k) => write!(
                    f,
                    "{}: '{}': {message}",
                    crate::io::shown_path(path),
                    clean(k)
                ),
                None => write!(f, "{}: {message}", crate::io::shown_path(path)),
            },
        }
    }
}

// No `source()`: the message already ends with the cause, and `{:#}` would
// print it twice.
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

/// A string from a file, fit for a one-line message: control characters
/// escaped, at most `max` characters kept.
pub(crate) fn clean_to(s: &str, max: usize) -> String {
    let mut out = String::new();
    for (k, c) in s.chars().enumerate() {
        if k == max {
            out.push_str("...");
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// [`clean_to`] with room for the longest real tensor names.
pub(crate) fn clean(s: &str) -> String {
    clean_to(s, 256)
}
