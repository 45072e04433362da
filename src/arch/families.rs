//! The supported model families as data: one [`FamilySpec`] per tensor
//! layout, saying how the family is recognised, where its facts are read,
//! which stored tensor plays which role (with its orientation and fusion),
//! and where it departs from the paper's model. Detection, extraction and
//! `inspect` all interpret this table and nothing else, so a new family is
//! one entry here plus its test (`tests/architectures.rs` runs every entry).

/// What a stored weight is to the proxies. Widths are in `[out, in]`
/// orientation: `H` heads, `K` key/value heads, `d` the head dimension, `N`
/// the hidden size, `I` the feed-forward width. The cross-attention of a
/// decoder block has the decoder's `H` heads of dimension `d` (no grouped
/// key/value heads in the families that have one); its keys and values read
/// the encoder's output, of the encoder's width, which is `N` in these
/// families (checked on the stored shapes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Query projection, `H d x N`.
    Query,
    /// Key projection, `K d x N`.
    Key,
    /// Value projection, `K d x N`.
    Value,
    /// Attention output projection, `N x H d`.
    Output,
    /// Gate projection of a gated feed-forward, `I x N`.
    FfnGate,
    /// Feed-forward input (BERT `intermediate.dense`, LLaMA `up_proj`), `I x N`.
    FfnIn,
    /// Feed-forward output, `N x I`.
    FfnOut,
    /// Query projection of a decoder block's cross-attention, `H d x N`.
    CrossQuery,
    /// Key projection of a decoder block's cross-attention, `H d x N`
    /// (its input the encoder's output).
    CrossKey,
    /// Value projection of a decoder block's cross-attention, `H d x N`
    /// (its input the encoder's output).
    CrossValue,
    /// Output projection of a decoder block's cross-attention, `N x H d`.
    CrossOutput,
}

impl Role {
    /// The role's name in `inspect` and in messages.
    pub fn name(self) -> &'static str {
        match self {
            Role::Query => "query",
            Role::Key => "key",
            Role::Value => "value",
            Role::Output => "output",
            Role::FfnGate => "ffn_gate",
            Role::FfnIn => "ffn_in",
            Role::FfnOut => "ffn_out",
            Role::CrossQuery => "cross_query",
            Role::CrossKey => "cross_key",
            Role::CrossValue => "cross_value",
            Role::CrossOutput => "cross_output",
        }
    }

    /// Whether the role belongs to a decoder block's cross-attention.
    pub fn cross(self) -> bool {
        matches!(
            self,
            Role::CrossQuery | Role::CrossKey | Role::CrossValue | Role::CrossOutput
        )
    }
}

/// How a weight is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Orientation {
    /// `nn.Linear`, GGUF: `[out, in]`.
    OutIn,
    /// Hugging Face `Conv1D` (GPT-2): `[in, out]`.
    InOut,
}

/// How the roles of a fused tensor share its output axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fusion {
    /// One role after the other, each whole (GPT-2's `c_attn`: all query
    /// rows, then all key rows, then all value rows; Phi-3's `gate_up_proj`).
    Stacked,
    /// Per key/value group `g`: the group's query heads, then its key head,
    /// then its value head, `head_dim` rows each. Without grouped-query
    /// attention a group is one head, `[q_h; k_h; v_h]` for each head `h`
    /// (GPT-NeoX and BLOOM `query_key_value`, whose reshape is
    /// `view(..., heads, 3 * head_dim)`): splitting such a tensor in thirds
    /// would be wrong. Only for `[Query, Key, Value]`.
    PerGroup,
}

/// One stored tensor of a layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorSpec {
    /// Name after the prefix; `{l}` stands for the layer.
    pub name: &'static str,
    /// The roles stacked along its output axis, in order; more than one
    /// means fused (GPT-2's `c_attn` holds query, key and value).
    pub roles: &'static [Role],
    /// Storage orientation.
    pub orientation: Orientation,
    /// How fused roles share the output axis (one role: [`Fusion::Stacked`]).
    pub fusion: Fusion,
    /// A vector tensor (`{l}` the layer) whose entry `o` multiplies output
    /// `o` of this weight in the block as applied (DINOv2's LayerScale
    /// `lambda1` after the attention output and the feed-forward output):
    /// the proxies are formed from `diag(scale) W`, each product of two
    /// stored numbers exact ([`proofs/exact-layerscale.md`](crate::proofs::exact_layerscale)).
    pub scale: Option<&'static str>,
}

/// Keys that hold the architecture facts, each list in order of preference.
/// For GGUF the keys follow the `general.architecture` value and a dot
/// (`llama.block_count`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FactKeys {
    /// Number of layers.
    pub layers: &'static [&'static str],
    /// Hidden size.
    pub hidden: &'static [&'static str],
    /// Attention (query) heads.
    pub heads: &'static [&'static str],
    /// Key/value heads (grouped-query attention); empty for families without it.
    pub kv_heads: &'static [&'static str],
    /// Head dimension (default: hidden size / heads).
    pub head_dim: &'static [&'static str],
    /// Feed-forward width.
    pub intermediate: &'static [&'static str],
    /// Activation function name.
    pub activation: &'static [&'static str],
}

impl FactKeys {
    /// No keys (a family not read from this kind of file).
    pub(crate) const NONE: FactKeys = FactKeys {
        layers: &[],
        hidden: &[],
        heads: &[],
        kv_heads: &[],
        head_dim: &[],
        intermediate: &[],
        activation: &[],
    };
}

/// A boolean `config.json` key, with the value a file that leaves it out
/// (or sets it to `null`) means: the default of the Hugging Face
/// configuration class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flag {
    /// The key.
    pub key: &'static str,
    /// Its value when absent.
    pub default: bool,
}

/// A condition on a checkpoint's `config.json` (without one, every flag
/// has its default and the model type is the recognised family's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cond {
    /// The flag has this value.
    Is(Flag, bool),
    /// `model_type` (lower-cased) is one of these (old checkpoints whose
    /// configuration predates the flags, such as Falcon's `RefinedWeb`).
    ModelType(&'static [&'static str]),
}

/// How a layout's key/value heads are found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvHeads {
    /// From the family's key/value-head keys (as many as query heads when
    /// absent; with `--heads`, from the key's height), checked against the
    /// key's height: grouped-query attention.
    Read,
    /// One key/value head shared by every query head (multi-query attention).
    One,
    /// As many as query heads.
    PerHead,
}

/// A tensor layout of a family, chosen by `config.json` flags (Falcon's
/// `new_decoder_architecture` and `multi_query` choose how
/// `query_key_value` is fused and how many key/value heads it holds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    /// Holds when every condition holds (an empty list always holds).
    pub when: &'static [Cond],
    /// The weights of layer `{l}` in this layout (the first holds the query).
    pub tensors: &'static [TensorSpec],
    /// Its key/value heads.
    pub kv_heads: KvHeads,
}

/// A departure from the paper's model that a family has when every
/// condition holds (Falcon's parallel residual, ALiBi or rotary
/// embeddings, by its `parallel_attn` and `alibi` flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlagNote {
    /// Holds when every condition holds.
    pub when: &'static [Cond],
    /// The sentence for the certificate's `extensions` ([`ROTARY`] for
    /// rotary embeddings).
    pub note: &'static str,
}

/// Layers that share one set of weights (ALBERT): the stored tensors
/// are per group `{l}` and per layer `{i}` of a group; the model applies
/// `layers` blocks, each group to `layers / groups` consecutive depths,
/// and at each depth every layer of the group in turn (transformers'
/// `AlbertTransformer` and `AlbertLayerGroup`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedLayers {
    /// Keys of the number of groups (1 when absent).
    pub groups: &'static [&'static str],
    /// Keys of the number of layers per group (1 when absent).
    pub inner: &'static [&'static str],
    /// Why the certificate counts each shared matrix at every depth where
    /// it is applied, for the certificate's `extensions`.
    pub note: &'static str,
}

/// One supported family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FamilySpec {
    /// Layout name (`inspect`'s `layout`).
    pub layout: &'static str,
    /// Family reported when only the tensor names identify it.
    pub family: &'static str,
    /// `config.json` `model_type` values of this layout.
    pub model_types: &'static [&'static str],
    /// Prefixes of lower-cased `config.json` `architectures` entries that
    /// identify the family when `model_type` is absent (the prefix is
    /// reported as the family).
    pub architectures: &'static [&'static str],
    /// GGUF `general.architecture` values of this layout (GGUF files only).
    pub gguf_architectures: &'static [&'static str],
    /// The weights of layer `{l}`; the first holds the query.
    pub tensors: &'static [TensorSpec],
    /// Facts in `config.json`.
    pub config: FactKeys,
    /// Facts in GGUF metadata.
    pub gguf: FactKeys,
    /// The activation when the family is known from `config.json` or GGUF
    /// metadata that does not name it: the default of the Hugging Face
    /// configuration class (which `save_pretrained` leaves out), or the one
    /// llama.cpp's graph for the architecture uses.
    pub default_activation: Option<&'static str>,
    /// Position information enters as rotary embeddings inside the
    /// query-key product (ignored by the QK proxy: an extension).
    pub rotary: bool,
    /// Further places where the family departs from the paper's model, one
    /// sentence each, for the certificate's `extensions` (parallel residual,
    /// a logit scale other than the paper's, position biases).
    pub notes: &'static [&'static str],
    /// Why the paper's reasoning gives no bound for this family, when it
    /// gives none (QK-norm): `certify` then states the certified spectra and
    /// norms of every proxy matrix and this reason, and computes no proxy
    /// and no bound (`docs/architectures.md`).
    pub no_bound: Option<&'static str>,
    /// Tensors (after the prefix, `{l}` the layer) whose presence in layer
    /// 0 is needed to recognise the family from tensor names alone: a
    /// family whose other tensors are another's (Qwen3's `q_norm` beside
    /// LLaMA's projections) is recognised by them, and tried first.
    pub markers: &'static [&'static str],
    /// The mixture-of-experts feed-forward, for a family that has one: in
    /// its sparse layers the feed-forward roles of [`FamilySpec::tensors`]
    /// are replaced by one gated feed-forward per expert.
    pub moe: Option<&'static MoeSpec>,
    /// The stack of blocks this entry reads, for a model with several
    /// (an encoder and a decoder, a text and a vision tower): the entries of
    /// one model type are its stacks, in order, and a certificate is about
    /// one of them (`--stack`); `None` for a model of one stack.
    pub stack: Option<Stack>,
    /// Layouts chosen by `config.json` flags: the first whose conditions
    /// hold replaces [`FamilySpec::tensors`] and the key/value heads;
    /// when none holds (or the list is empty), `tensors` with key/value
    /// heads read when `FamilySpec::grouped_query`.
    pub variants: &'static [Variant],
    /// Departures that hold by `config.json` flags (each sentence once).
    pub flag_notes: &'static [FlagNote],
    /// Layers that share weights, when they do.
    pub shared: Option<SharedLayers>,
}

/// A mixture-of-experts feed-forward (Mixtral, Qwen2-MoE, Qwen3-MoE): where
/// its experts are stored and where its facts are read. In a sparse layer
/// every expert `e` is a gated feed-forward of its own (`{e}` in the names
/// stands for it), with its own `M_in = [W_gate, W_up]` and `M_out =
/// W_down`; the router (`gate`) and the shared expert's gate are `1 x N`
/// or `E x N` maps that no proxy uses. A layer is dense (the family's own
/// feed-forward tensors, of width `intermediate_size`) when it is listed in
/// `mlp_only_layers` or its index plus one is not a multiple of
/// `decoder_sparse_step` (transformers' Qwen2-MoE and Qwen3-MoE rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoeSpec {
    /// One expert's gate, up and down projections (`{l}` the layer, `{e}` the expert).
    pub experts: [&'static str; 3],
    /// The shared expert's gate, up and down projections, when it has one.
    pub shared: Option<[&'static str; 3]>,
    /// config.json keys of the number of routed experts.
    pub num_experts: &'static [&'static str],
    /// config.json keys of an expert's width (absent: `intermediate_size`).
    pub expert_width: &'static [&'static str],
    /// config.json keys of the shared expert's width.
    pub shared_width: &'static [&'static str],
    /// config.json key of the sparse step (absent: every layer is sparse).
    pub sparse_step: Option<&'static str>,
    /// config.json key of the list of dense layers.
    pub dense_layers: Option<&'static str>,
    /// Where transformers v5 keeps all routed experts of a layer in two
    /// 3-D tensors instead of three per expert ([`FusedExperts`]).
    pub fused: Option<FusedExperts>,
}

/// transformers v5's fused 3-D expert tensors of a layer (`{l}` the layer),
/// as transformers itself lays them out: `integrations/moe.py` (revision
/// 8b584a67b474f3dfdedcdda7acb96a33dcc3b5e3: `gate_up_proj` is
/// `[num_experts, 2 * intermediate_dim, hidden_dim]`, applied as
/// `linear(x, gate_up_proj[e]).chunk(2, dim=-1)`, the first half the gate;
/// `down_proj` is `[num_experts, hidden_dim, intermediate_dim]`) and
/// `conversion_mapping.py` (revision 000c33fdfde12e1ffafbfcdb3c926df5727a00b6,
/// which builds them from a v4 checkpoint: each expert's gate (`w1`,
/// `gate_proj`) and up (`w3`, `up_proj`) stacked over experts and
/// concatenated along dim 1, gate first; `w2`/`down_proj` stacked). So
/// expert `e`'s `W_gate` is `gate_up[e, 0:I, :]`, `W_up` is
/// `gate_up[e, I:2I, :]` and `W_down` is `down[e]`, each `[out, in]`:
/// slices of stored numbers, nothing computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FusedExperts {
    /// `[E, 2I, N]`: every expert's `[W_gate; W_up]`.
    pub gate_up: &'static str,
    /// `[E, N, I]`: every expert's `W_down`.
    pub down: &'static str,
}

/// The fused experts of transformers v5's Mixtral, Qwen2-MoE and Qwen3-MoE
/// (all under `mlp.experts`: v5 renames Mixtral's `block_sparse_moe`).
const V5_EXPERTS: FusedExperts = FusedExperts {
    gate_up: "layers.{l}.mlp.experts.gate_up_proj",
    down: "layers.{l}.mlp.experts.down_proj",
};

/// One stack of blocks of a model with several (`docs/architectures.md`,
/// "Models with several stacks").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stack {
    /// Its name for `--stack` and the certificate's `parameters.stack`
    /// (`encoder`, `decoder`, `text`, `vision`).
    pub name: &'static str,
    /// The config.json object that holds its facts (`text_config`), read
    /// instead of the top level when config.json has it (a single tower's
    /// own config, `clip_text_model`, is flat).
    pub section: Option<&'static str>,
    /// The defaults of the configuration class of the stack, for keys its
    /// config leaves out (transformers drops defaults from saved nested
    /// configs): `(key, value)`.
    pub defaults: &'static [(&'static str, usize)],
}

use Orientation::{InOut, OutIn};
use Role::*;

const fn t(name: &'static str, roles: &'static [Role], orientation: Orientation) -> TensorSpec {
    TensorSpec {
        name,
        roles,
        orientation,
        fusion: Fusion::Stacked,
        scale: None,
    }
}

/// An `[out, in]` weight whose outputs a LayerScale vector multiplies.
const fn scaled(name: &'static str, roles: &'static [Role], scale: &'static str) -> TensorSpec {
    TensorSpec {
        name,
        roles,
        orientation: OutIn,
        fusion: Fusion::Stacked,
        scale: Some(scale),
    }
}

/// A fused query/key/value tensor laid out per key/value group ([`Fusion::PerGroup`]).
const fn per_group(name: &'static str) -> TensorSpec {
    TensorSpec {
        name,
        roles: &[Query, Key, Value],
        orientation: OutIn,
        fusion: Fusion::PerGroup,
        scale: None,
    }
}

/// Rotary position embeddings, ignored by the QK proxy ([`FamilySpec::rotary`]).
pub const ROTARY: &str = "rotary position embeddings are ignored: this model rotates queries and \
keys inside each head by position-dependent angles, so its attention logits are \
x_i Q_h^T R_(j-i) K_h x_j^T with an orthogonal rotation R_(j-i), while QK is taken as Q_h^T K_h \
as in the paper's model, which has no rotation; the bounds of this model are an extension of \
the paper";

/// The parallel-residual note (GPT-NeoX, GPT-J).
const PARALLEL: &str = "parallel residual is outside the paper's model: this block computes \
x + attn(LN1(x)) + mlp(LN2(x)), the feed-forward reading the block's input rather than the \
attention output, while the paper's depth factor alpha composes attention and feed-forward in \
sequence; the proxy matrices are the same, and the bounds of this model are an extension of \
the paper";

/// Input-independent position biases added to the logits (ALiBi, relative buckets).
const POSITION_BIAS: &str = "a position bias is added to the attention logits (ALiBi or \
relative-position buckets): the logits are x_i Q_h^T K_h x_j^T + b_h(i, j) with b fixed by the \
positions, which the paper's model does not have; QK is taken as Q_h^T K_h, and the bounds of \
this model are an extension of the paper";

/// Gemma 2's logit scale and soft cap.
const GEMMA2_LOGITS: &str = "Gemma 2 scales the logits by query_pre_attn_scalar^(-1/2) instead \
of head_dim^(-1/2) and soft-caps them as c tanh(x / c); QK is taken as Q_h^T K_h without any \
scale, as the paper's proxy drops 1/sqrt(d_h), and the cap (a 1-Lipschitz map) is outside the \
paper's model: the bounds of this model are an extension of the paper";

/// QK-norm (Qwen3, Gemma 3): why the paper's reasoning gives no bound.
pub const QK_NORM: &str = "QK-norm: q_norm and k_norm (an RMSNorm with learned gains over each \
head's query and key in Qwen3 and Gemma 3, over the whole query and key in OLMo 2) sit between W_Q, W_K and the attention logit, which is \
RMSNorm(x_i Q_h^T) RMSNorm(x_j K_h^T)^T (per head): a function of x_i and x_j that is not the bilinear form \
x_i Q_h^T K_h x_j^T, so Q_h^T K_h is not the score matrix and the paper's Lipschitz accounting \
of attention through ||QK||_2 (its factor 1 + 4 ||QK||_2, the sensitivity gamma and the \
contributions of QK) does not hold for this block; no proxy and no bound is computed, and the \
certificate states the certified spectra and norms of every proxy matrix";

/// Mixture of experts: why the paper's reasoning gives no bound.
pub const MOE: &str = "mixture of experts: the feed-forward is sum_e g_e(x) FFN_e(x) with \
router weights g(x) = softmax over the k largest router logits x W_r^T (top-k routing), and \
the choice of the k largest is a discontinuous function of x (where two logits tie, an \
infinitesimal change of x swaps an expert for another, and the output jumps by the difference \
of their outputs), so the block is not Lipschitz in general and the paper's Lipschitz \
accounting of the feed-forward through ||M_in||_2 ||M_out||_2 does not hold for it; a bound \
for one fixed routing would not bound the model, so no proxy and no bound is computed, and the \
certificate states the certified spectra and norms of every proxy matrix, each expert's M_in \
= [W_gate, W_up] and M_out = W_down included (the router's matrix is not a proxy matrix)";

/// Mixture of experts with QK-norm (Qwen3-MoE): both reasons.
pub const MOE_QK_NORM: &str = "mixture of experts with QK-norm: two reasons, each enough. \
(1) QK-norm: q_norm and k_norm (RMSNorm with learned gains over each head's query and key) sit \
between W_Q, W_K and the attention logit, so Q_h^T K_h is not the score matrix and the paper's \
Lipschitz accounting of attention through ||QK||_2 does not hold; (2) top-k routing: the \
feed-forward is sum_e g_e(x) FFN_e(x) over the k experts of largest router logit, a \
discontinuous choice, so the block is not Lipschitz in general; no proxy and no bound is \
computed, and the certificate states the certified spectra and norms of every proxy matrix, \
each expert's M_in and M_out included";

/// Mixtral's experts (`block_sparse_moe`; w1 the gate, w3 the up, w2 the down projection).
const MIXTRAL_MOE: MoeSpec = MoeSpec {
    experts: [
        "layers.{l}.block_sparse_moe.experts.{e}.w1.weight",
        "layers.{l}.block_sparse_moe.experts.{e}.w3.weight",
        "layers.{l}.block_sparse_moe.experts.{e}.w2.weight",
    ],
    shared: None,
    num_experts: &["num_local_experts"],
    expert_width: &["intermediate_size"],
    shared_width: &[],
    sparse_step: None,
    dense_layers: None,
    fused: Some(V5_EXPERTS),
};

/// The routed experts of Qwen2-MoE and Qwen3-MoE.
const QWEN_EXPERTS: [&str; 3] = [
    "layers.{l}.mlp.experts.{e}.gate_proj.weight",
    "layers.{l}.mlp.experts.{e}.up_proj.weight",
    "layers.{l}.mlp.experts.{e}.down_proj.weight",
];

/// Qwen2-MoE: routed experts, a shared expert, dense layers by rule.
const QWEN2_MOE: MoeSpec = MoeSpec {
    experts: QWEN_EXPERTS,
    shared: Some([
        "layers.{l}.mlp.shared_expert.gate_proj.weight",
        "layers.{l}.mlp.shared_expert.up_proj.weight",
        "layers.{l}.mlp.shared_expert.down_proj.weight",
    ]),
    num_experts: &["num_experts"],
    expert_width: &["moe_intermediate_size"],
    shared_width: &["shared_expert_intermediate_size"],
    sparse_step: Some("decoder_sparse_step"),
    dense_layers: Some("mlp_only_layers"),
    fused: Some(V5_EXPERTS),
};

/// Qwen3-MoE: Qwen2-MoE's experts without a shared expert.
const QWEN3_MOE: MoeSpec = MoeSpec {
    shared: None,
    shared_width: &[],
    ..QWEN2_MOE
};

/// The QK-norm tensors of a LLaMA-style layer.
const QK_NORM_MARKERS: &[&str] = &[
    "layers.{l}.self_attn.q_norm.weight",
    "layers.{l}.self_attn.k_norm.weight",
];

/// The standard Hugging Face keys (BERT, ViT, LLaMA and their kin).
const HF: FactKeys = FactKeys {
    layers: &["num_hidden_layers"],
    hidden: &["hidden_size"],
    heads: &["num_attention_heads"],
    kv_heads: &[],
    head_dim: &[],
    intermediate: &["intermediate_size"],
    activation: &["hidden_act"],
};

/// LLaMA-family keys: grouped-query attention and an explicit head dimension.
const HF_GQA: FactKeys = FactKeys {
    kv_heads: &["num_key_value_heads"],
    head_dim: &["head_dim"],
    ..HF
};

/// The LLaMA layout (also Gemma's).
const LLAMA_TENSORS: &[TensorSpec] = &[
    t("layers.{l}.self_attn.q_proj.weight", &[Query], OutIn),
    t("layers.{l}.self_attn.k_proj.weight", &[Key], OutIn),
    t("layers.{l}.self_attn.v_proj.weight", &[Value], OutIn),
    t("layers.{l}.self_attn.o_proj.weight", &[Output], OutIn),
    t("layers.{l}.mlp.gate_proj.weight", &[FfnGate], OutIn),
    t("layers.{l}.mlp.up_proj.weight", &[FfnIn], OutIn),
    t("layers.{l}.mlp.down_proj.weight", &[FfnOut], OutIn),
];

/// Gemma's keys: its activation is `hidden_activation` (Gemma 1 also has
/// `hidden_act`, which its code overrides by `hidden_activation`).
const GEMMA: FactKeys = FactKeys {
    activation: &["hidden_activation", "hidden_act"],
    ..HF_GQA
};

/// Gemma 3's QK-norm and its extra feed-forward norm (text model alone or
/// inside the multimodal model).
const GEMMA3_MARKERS: &[&str] = &[
    "layers.{l}.self_attn.q_norm.weight",
    "layers.{l}.self_attn.k_norm.weight",
    "layers.{l}.pre_feedforward_layernorm.weight",
];

/// Cross-attention (the decoders of T5, BART, Whisper): why the paper's
/// reasoning gives no bound for a decoder stack.
pub const CROSS_ATTENTION: &str = "cross-attention: each block of this decoder has, between its \
self-attention and its feed-forward, an attention whose keys and values are computed from the \
encoder's output rather than from the block's input, so the block is a function of two \
sequences, and the paper's per-block Lipschitz accounting in the block's input (the depth factor \
alpha, the sensitivity gamma and the contributions) does not cover it; no proxy and no bound is \
computed, and the certificate states the certified spectra and norms of every block's \
self-attention (QK, V_tilde per head), cross-attention (QK_cross = Q_c^T K_c and \
V_tilde_cross = V_c^T O_c per head, from the cross-attention's own weights) and feed-forward \
(M_in, M_out) matrices";

/// The layers of a CLIP or SigLIP tower under `tower` (`text_model.`, `vision_model.`).
macro_rules! clip_tower {
    ($tower:literal) => {
        &[
            t(
                concat!($tower, "encoder.layers.{l}.self_attn.q_proj.weight"),
                &[Query],
                OutIn,
            ),
            t(
                concat!($tower, "encoder.layers.{l}.self_attn.k_proj.weight"),
                &[Key],
                OutIn,
            ),
            t(
                concat!($tower, "encoder.layers.{l}.self_attn.v_proj.weight"),
                &[Value],
                OutIn,
            ),
            t(
                concat!($tower, "encoder.layers.{l}.self_attn.out_proj.weight"),
                &[Output],
                OutIn,
            ),
            t(
                concat!($tower, "encoder.layers.{l}.mlp.fc1.weight"),
                &[FfnIn],
                OutIn,
            ),
            t(
                concat!($tower, "encoder.layers.{l}.mlp.fc2.weight"),
                &[FfnOut],
                OutIn,
            ),
        ]
    };
}

/// The self-attention and feed-forward of a BART or Whisper stack
/// (`encoder.`, `decoder.`), and with `cross` a decoder's cross-attention
/// (`encoder_attn`) between them.
macro_rules! bart_stack {
    ($stack:literal $(, $cross:ident)?) => {
        &[
            bart_stack!(@t $stack, "self_attn.q_proj", Query),
            bart_stack!(@t $stack, "self_attn.k_proj", Key),
            bart_stack!(@t $stack, "self_attn.v_proj", Value),
            bart_stack!(@t $stack, "self_attn.out_proj", Output),
            $(
                bart_stack!(@t $stack, "encoder_attn.q_proj", CrossQuery $cross),
                bart_stack!(@t $stack, "encoder_attn.k_proj", CrossKey $cross),
                bart_stack!(@t $stack, "encoder_attn.v_proj", CrossValue $cross),
                bart_stack!(@t $stack, "encoder_attn.out_proj", CrossOutput $cross),
            )?
            bart_stack!(@t $stack, "fc1", FfnIn),
            bart_stack!(@t $stack, "fc2", FfnOut),
        ]
    };
    // `$cross` only places the tensor inside the optional group.
    (@t $stack:literal, $w:literal, $role:ident $($cross:ident)?) => {
        t(
            concat!($stack, "layers.{l}.", $w, ".weight"),
            &[$role],
            OutIn,
        )
    };
}

/// The self-attention of a T5 stack (`encoder.`, `decoder.`) and its
/// feed-forward (sublayer `ff`: 1 in the encoder, 2 in the decoder, after
/// `EncDecAttention`), plain (`wi`, ReLU) or gated (`wi_0` activated,
/// `wi_1`); with `cross`, a decoder's cross-attention
/// (`layer.1.EncDecAttention`) between them.
macro_rules! t5_stack {
    ($stack:literal, $ff:literal, plain $(, $cross:ident)?) => {
        &[
            t5_stack!(@attn $stack, "q", Query),
            t5_stack!(@attn $stack, "k", Key),
            t5_stack!(@attn $stack, "v", Value),
            t5_stack!(@attn $stack, "o", Output),
            $(
                t5_stack!(@enc $stack, "q", CrossQuery $cross),
                t5_stack!(@enc $stack, "k", CrossKey $cross),
                t5_stack!(@enc $stack, "v", CrossValue $cross),
                t5_stack!(@enc $stack, "o", CrossOutput $cross),
            )?
            t5_stack!(@ff $stack, $ff, "wi", FfnIn),
            t5_stack!(@ff $stack, $ff, "wo", FfnOut),
        ]
    };
    ($stack:literal, $ff:literal, gated $(, $cross:ident)?) => {
        &[
            t5_stack!(@attn $stack, "q", Query),
            t5_stack!(@attn $stack, "k", Key),
            t5_stack!(@attn $stack, "v", Value),
            t5_stack!(@attn $stack, "o", Output),
            $(
                t5_stack!(@enc $stack, "q", CrossQuery $cross),
                t5_stack!(@enc $stack, "k", CrossKey $cross),
                t5_stack!(@enc $stack, "v", CrossValue $cross),
                t5_stack!(@enc $stack, "o", CrossOutput $cross),
            )?
            t5_stack!(@ff $stack, $ff, "wi_0", FfnGate),
            t5_stack!(@ff $stack, $ff, "wi_1", FfnIn),
            t5_stack!(@ff $stack, $ff, "wo", FfnOut),
        ]
    };
    (@attn $stack:literal, $w:literal, $role:ident) => {
        t(
            concat!($stack, "block.{l}.layer.0.SelfAttention.", $w, ".weight"),
            &[$role],
            OutIn,
        )
    };
    // `$cross` only places the tensor inside the optional group.
    (@enc $stack:literal, $w:literal, $role:ident $($cross:ident)?) => {
        t(
            concat!($stack, "block.{l}.layer.1.EncDecAttention.", $w, ".weight"),
            &[$role],
            OutIn,
        )
    };
    (@ff $stack:literal, $ff:literal, $w:literal, $role:ident) => {
        t(
            concat!($stack, "block.{l}.layer.", $ff, ".DenseReluDense.", $w, ".weight"),
            &[$role],
            OutIn,
        )
    };
}

/// CLIP's and SigLIP's tower keys (the standard ones, in `text_config` /
/// `vision_config`).
const TOWER: FactKeys = HF;

/// T5's keys (`d_kv` is the head dimension, not `d_model / num_heads` in
/// general); `dense_act_fn` is what `feed_forward_proj` means (`gated-gelu`
/// runs `gelu_new`), saved by newer transformers.
const T5_ENCODER: FactKeys = FactKeys {
    layers: &["num_layers"],
    hidden: &["d_model"],
    heads: &["num_heads"],
    kv_heads: &[],
    head_dim: &["d_kv"],
    intermediate: &["d_ff"],
    activation: &["dense_act_fn", "feed_forward_proj"],
};

/// T5's decoder: `num_decoder_layers`, which defaults to `num_layers`.
const T5_DECODER: FactKeys = FactKeys {
    layers: &["num_decoder_layers", "num_layers"],
    ..T5_ENCODER
};

/// BART's, mBART's and Whisper's encoder keys.
const BART_ENCODER: FactKeys = FactKeys {
    layers: &["encoder_layers"],
    hidden: &["d_model"],
    heads: &["encoder_attention_heads"],
    kv_heads: &[],
    head_dim: &[],
    intermediate: &["encoder_ffn_dim"],
    activation: &["activation_function"],
};

/// BART's, mBART's and Whisper's decoder keys.
const BART_DECODER: FactKeys = FactKeys {
    layers: &["decoder_layers"],
    heads: &["decoder_attention_heads"],
    intermediate: &["decoder_ffn_dim"],
    ..BART_ENCODER
};

/// A stack whose facts are top-level keys (T5, BART, Whisper).
const fn flat(name: &'static str) -> Option<Stack> {
    Some(Stack {
        name,
        section: None,
        defaults: &[],
    })
}

/// CLIPTextConfig's defaults.
const CLIP_TEXT_DEFAULTS: &[(&str, usize)] = &[
    ("num_hidden_layers", 12),
    ("hidden_size", 512),
    ("num_attention_heads", 8),
    ("intermediate_size", 2048),
];

/// CLIPVisionConfig's, SiglipTextConfig's and SiglipVisionConfig's defaults.
const VIT_BASE_DEFAULTS: &[(&str, usize)] = &[
    ("num_hidden_layers", 12),
    ("hidden_size", 768),
    ("num_attention_heads", 12),
    ("intermediate_size", 3072),
];

/// Falcon's flags (transformers' `FalconConfig` defaults).
const NEW_ARCH: Flag = Flag {
    key: "new_decoder_architecture",
    default: false,
};
const MULTI_QUERY: Flag = Flag {
    key: "multi_query",
    default: true,
};
const PARALLEL_ATTN: Flag = Flag {
    key: "parallel_attn",
    default: true,
};
const ALIBI: Flag = Flag {
    key: "alibi",
    default: false,
};

/// Falcon's weights after `query_key_value` (BLOOM's names).
const FALCON_REST: [TensorSpec; 3] = [
    t("h.{l}.self_attention.dense.weight", &[Output], OutIn),
    t("h.{l}.mlp.dense_h_to_4h.weight", &[FfnIn], OutIn),
    t("h.{l}.mlp.dense_4h_to_h.weight", &[FfnOut], OutIn),
];

/// Falcon's `query_key_value` per key/value group (new decoder
/// architecture; per head when every head is its own group).
const FALCON_PER_GROUP: &[TensorSpec] = &[
    per_group("h.{l}.self_attention.query_key_value.weight"),
    FALCON_REST[0],
    FALCON_REST[1],
    FALCON_REST[2],
];

/// Falcon's multi-query `query_key_value`: all query heads, then the one
/// key head, then the one value head.
const FALCON_MULTI_QUERY: &[TensorSpec] = &[
    t(
        "h.{l}.self_attention.query_key_value.weight",
        &[Query, Key, Value],
        OutIn,
    ),
    FALCON_REST[0],
    FALCON_REST[1],
    FALCON_REST[2],
];

/// ALBERT's shared layers: why every depth counts.
const ALBERT_SHARING: &str = "shared layers (ALBERT): the L blocks apply the weights of \
num_hidden_groups groups, group g at depths g L / num_hidden_groups to (g + 1) L / \
num_hidden_groups - 1, so the proxy matrices of different layers are equal rather than \
independent; the certificate counts each shared matrix at every depth where it is applied \
(layer l's proxies are its group's matrices), as the network computes it, so the paper's \
bound, a statement about the composition of the L blocks as applied, holds for the network \
(networks with tied weights are networks of the paper's class), while the paper's model \
has weights of its own in each layer; the factorised embedding \
(embedding_hidden_mapping_in, E to N) precedes the first block and is not a block matrix";

/// DeBERTa's disentangled attention: why the paper's reasoning gives no bound.
pub const DISENTANGLED: &str = "disentangled attention (DeBERTa): the logit of positions i and \
j is x_i Q_h^T K_h x_j^T plus a content-to-position term x_i Q_h^T (P K_h^T)_(delta(i,j)) and \
a position-to-content term (P Q_h^T)_(delta(j,i)) K_h x_j^T, with P the learned (normalised) \
relative-position embeddings projected by the query and key weights (or pos_key_proj and \
pos_query_proj): terms linear in the input that depend on it, unlike a fixed position bias, \
and that the bilinear form of Q_h^T K_h does not contain; the paper's Lipschitz accounting of \
attention through ||QK||_2 (its factor 1 + 4 ||QK||_2, the sensitivity gamma and the \
contributions of QK) does not bound their derivative, which involves ||Q_h^T K_h P^T|| rather \
than a proxy matrix; no proxy and no bound is computed, and the certificate states the \
certified spectra and norms of every proxy matrix";

/// DeBERTa's weights after the query, key and value (BERT's names).
const DEBERTA_REST: [TensorSpec; 3] = [
    t(
        "encoder.layer.{l}.attention.output.dense.weight",
        &[Output],
        OutIn,
    ),
    t(
        "encoder.layer.{l}.intermediate.dense.weight",
        &[FfnIn],
        OutIn,
    ),
    t("encoder.layer.{l}.output.dense.weight", &[FfnOut], OutIn),
];

/// DeBERTa-v2 (no bound: disentangled attention).
const DEBERTA_V2: FamilySpec = FamilySpec {
    layout: "DebertaV2",
    family: "deberta-v2",
    model_types: &["deberta-v2"],
    tensors: &[
        t(
            "encoder.layer.{l}.attention.self.query_proj.weight",
            &[Query],
            OutIn,
        ),
        t(
            "encoder.layer.{l}.attention.self.key_proj.weight",
            &[Key],
            OutIn,
        ),
        t(
            "encoder.layer.{l}.attention.self.value_proj.weight",
            &[Value],
            OutIn,
        ),
        DEBERTA_REST[0],
        DEBERTA_REST[1],
        DEBERTA_REST[2],
    ],
    config: HF,
    default_activation: Some("gelu"),
    no_bound: Some(DISENTANGLED),
    ..BASE
};

/// DINOv2's LayerScale vectors (the attention output's, the feed-forward output's).
const LAYER_SCALE_1: &str = "encoder.layer.{l}.layer_scale1.lambda1";
const LAYER_SCALE_2: &str = "encoder.layer.{l}.layer_scale2.lambda1";

/// ViT's query, key and value (also DINOv2's).
const VIT_QKV: [TensorSpec; 3] = [
    t(
        "encoder.layer.{l}.attention.attention.query.weight",
        &[Query],
        OutIn,
    ),
    t(
        "encoder.layer.{l}.attention.attention.key.weight",
        &[Key],
        OutIn,
    ),
    t(
        "encoder.layer.{l}.attention.attention.value.weight",
        &[Value],
        OutIn,
    ),
];

/// DINOv2's attention (ViT's names, LayerScale folded into the output).
const DINOV2_ATTENTION: [TensorSpec; 4] = [
    VIT_QKV[0],
    VIT_QKV[1],
    VIT_QKV[2],
    scaled(
        "encoder.layer.{l}.attention.output.dense.weight",
        &[Output],
        LAYER_SCALE_1,
    ),
];

/// DINOv2 giant's SwiGLU feed-forward (`use_swiglu_ffn`): `weights_in`
/// holds [x1; x2] with `silu(x1) * x2` (the first half activated: the gate).
const DINOV2_SWIGLU: &[TensorSpec] = &[
    DINOV2_ATTENTION[0],
    DINOV2_ATTENTION[1],
    DINOV2_ATTENTION[2],
    DINOV2_ATTENTION[3],
    t(
        "encoder.layer.{l}.mlp.weights_in.weight",
        &[FfnGate, FfnIn],
        OutIn,
    ),
    scaled(
        "encoder.layer.{l}.mlp.weights_out.weight",
        &[FfnOut],
        LAYER_SCALE_2,
    ),
];

/// The defaults of a table entry: no other names, no facts in a file of
/// that kind, no activation default, no departures, no experts, one stack,
/// one layout, no shared layers. Each entry states what differs (`..BASE`),
/// so a new field touches this constant and not every entry.
const BASE: FamilySpec = FamilySpec {
    layout: "",
    family: "",
    model_types: &[],
    architectures: &[],
    gguf_architectures: &[],
    tensors: &[],
    config: FactKeys::NONE,
    gguf: FactKeys::NONE,
    default_activation: None,
    rotary: false,
    notes: &[],
    no_bound: None,
    markers: &[],
    moe: None,
    stack: None,
    variants: &[],
    flag_notes: &[],
    shared: None,
};

/// The supported families, in the order tensor names are tried (OPT's
/// `decoder.layers.N.self_attn.q_proj` before LLaMA's `layers.N...`, which
/// it ends with; Gemma's tensors are LLaMA's, so without config.json a
/// Gemma checkpoint is read as LLaMA).
pub const FAMILIES: &[FamilySpec] = &[
    FamilySpec {
        layout: "Bert",
        family: "bert",
        model_types: &["bert", "roberta", "xlm-roberta", "camembert", "electra"],
        architectures: &["bert", "roberta"],
        tensors: &[
            t(
                "encoder.layer.{l}.attention.self.query.weight",
                &[Query],
                OutIn,
            ),
            t("encoder.layer.{l}.attention.self.key.weight", &[Key], OutIn),
            t(
                "encoder.layer.{l}.attention.self.value.weight",
                &[Value],
                OutIn,
            ),
            t(
                "encoder.layer.{l}.attention.output.dense.weight",
                &[Output],
                OutIn,
            ),
            t(
                "encoder.layer.{l}.intermediate.dense.weight",
                &[FfnIn],
                OutIn,
            ),
            t("encoder.layer.{l}.output.dense.weight", &[FfnOut], OutIn),
        ],
        config: HF,
        default_activation: Some("gelu"),
        ..BASE
    },
    FamilySpec {
        layout: "Dinov2",
        family: "dinov2",
        model_types: &["dinov2", "dinov2_with_registers"],
        architectures: &["dinov2"],
        tensors: &[
            DINOV2_ATTENTION[0],
            DINOV2_ATTENTION[1],
            DINOV2_ATTENTION[2],
            DINOV2_ATTENTION[3],
            t("encoder.layer.{l}.mlp.fc1.weight", &[FfnIn], OutIn),
            scaled("encoder.layer.{l}.mlp.fc2.weight", &[FfnOut], LAYER_SCALE_2),
        ],
        // The feed-forward width is mlp_ratio times the hidden size: read
        // from fc1's height.
        config: FactKeys {
            intermediate: &[],
            ..HF
        },
        default_activation: Some("gelu"),
        // ViT's tensors with LayerScale: tried before ViT by its vectors.
        markers: &[LAYER_SCALE_1, LAYER_SCALE_2],
        variants: &[Variant {
            when: &[Cond::Is(
                Flag {
                    key: "use_swiglu_ffn",
                    default: false,
                },
                true,
            )],
            tensors: DINOV2_SWIGLU,
            kv_heads: KvHeads::PerHead,
        }],
        ..BASE
    },
    FamilySpec {
        layout: "Vit",
        family: "vit",
        model_types: &["vit"],
        architectures: &["vit"],
        tensors: &[
            VIT_QKV[0],
            VIT_QKV[1],
            VIT_QKV[2],
            t(
                "encoder.layer.{l}.attention.output.dense.weight",
                &[Output],
                OutIn,
            ),
            t(
                "encoder.layer.{l}.intermediate.dense.weight",
                &[FfnIn],
                OutIn,
            ),
            t("encoder.layer.{l}.output.dense.weight", &[FfnOut], OutIn),
        ],
        config: HF,
        default_activation: Some("gelu"),
        ..BASE
    },
    FamilySpec {
        layout: "DistilBert",
        family: "distilbert",
        model_types: &["distilbert"],
        architectures: &["distilbert"],
        tensors: &[
            t(
                "transformer.layer.{l}.attention.q_lin.weight",
                &[Query],
                OutIn,
            ),
            t(
                "transformer.layer.{l}.attention.k_lin.weight",
                &[Key],
                OutIn,
            ),
            t(
                "transformer.layer.{l}.attention.v_lin.weight",
                &[Value],
                OutIn,
            ),
            t(
                "transformer.layer.{l}.attention.out_lin.weight",
                &[Output],
                OutIn,
            ),
            t("transformer.layer.{l}.ffn.lin1.weight", &[FfnIn], OutIn),
            t("transformer.layer.{l}.ffn.lin2.weight", &[FfnOut], OutIn),
        ],
        config: FactKeys {
            layers: &["n_layers"],
            hidden: &["dim"],
            heads: &["n_heads"],
            kv_heads: &[],
            head_dim: &[],
            intermediate: &["hidden_dim"],
            activation: &["activation"],
        },
        default_activation: Some("gelu"),
        ..BASE
    },
    FamilySpec {
        layout: "Gpt2",
        family: "gpt2",
        model_types: &["gpt2"],
        architectures: &["gpt2"],
        tensors: &[
            t("h.{l}.attn.c_attn.weight", &[Query, Key, Value], InOut),
            t("h.{l}.attn.c_proj.weight", &[Output], InOut),
            t("h.{l}.mlp.c_fc.weight", &[FfnIn], InOut),
            t("h.{l}.mlp.c_proj.weight", &[FfnOut], InOut),
        ],
        config: FactKeys {
            layers: &["n_layer"],
            hidden: &["n_embd"],
            heads: &["n_head"],
            kv_heads: &[],
            head_dim: &[],
            intermediate: &["n_inner"],
            activation: &["activation_function"],
        },
        default_activation: Some("gelu_new"),
        ..BASE
    },
    FamilySpec {
        layout: "Mpnet",
        family: "mpnet",
        model_types: &["mpnet"],
        architectures: &["mpnet"],
        tensors: &[
            t("encoder.layer.{l}.attention.attn.q.weight", &[Query], OutIn),
            t("encoder.layer.{l}.attention.attn.k.weight", &[Key], OutIn),
            t("encoder.layer.{l}.attention.attn.v.weight", &[Value], OutIn),
            t(
                "encoder.layer.{l}.attention.attn.o.weight",
                &[Output],
                OutIn,
            ),
            t(
                "encoder.layer.{l}.intermediate.dense.weight",
                &[FfnIn],
                OutIn,
            ),
            t("encoder.layer.{l}.output.dense.weight", &[FfnOut], OutIn),
        ],
        config: HF,
        default_activation: Some("gelu"),
        notes: &[POSITION_BIAS],
        ..BASE
    },
    FamilySpec {
        layout: "GptNeoX",
        family: "gpt_neox",
        model_types: &["gpt_neox"],
        tensors: &[
            per_group("layers.{l}.attention.query_key_value.weight"),
            t("layers.{l}.attention.dense.weight", &[Output], OutIn),
            t("layers.{l}.mlp.dense_h_to_4h.weight", &[FfnIn], OutIn),
            t("layers.{l}.mlp.dense_4h_to_h.weight", &[FfnOut], OutIn),
        ],
        config: HF,
        default_activation: Some("gelu"),
        rotary: true,
        notes: &[PARALLEL],
        ..BASE
    },
    FamilySpec {
        layout: "Bloom",
        family: "bloom",
        model_types: &["bloom"],
        architectures: &["bloom"],
        tensors: &[
            per_group("h.{l}.self_attention.query_key_value.weight"),
            t("h.{l}.self_attention.dense.weight", &[Output], OutIn),
            t("h.{l}.mlp.dense_h_to_4h.weight", &[FfnIn], OutIn),
            t("h.{l}.mlp.dense_4h_to_h.weight", &[FfnOut], OutIn),
        ],
        config: FactKeys {
            layers: &["n_layer", "num_hidden_layers"],
            hidden: &["hidden_size", "n_embed"],
            heads: &["n_head", "num_attention_heads"],
            kv_heads: &[],
            head_dim: &[],
            intermediate: &[],
            activation: &[],
        },
        // BLOOM's bloom_gelu_forward: the tanh approximation of GELU.
        default_activation: Some("gelu_pytorch_tanh"),
        notes: &[POSITION_BIAS],
        ..BASE
    },
    FamilySpec {
        layout: "GptJ",
        family: "gptj",
        model_types: &["gptj"],
        architectures: &["gptj"],
        tensors: &[
            t("h.{l}.attn.q_proj.weight", &[Query], OutIn),
            t("h.{l}.attn.k_proj.weight", &[Key], OutIn),
            t("h.{l}.attn.v_proj.weight", &[Value], OutIn),
            t("h.{l}.attn.out_proj.weight", &[Output], OutIn),
            t("h.{l}.mlp.fc_in.weight", &[FfnIn], OutIn),
            t("h.{l}.mlp.fc_out.weight", &[FfnOut], OutIn),
        ],
        config: FactKeys {
            layers: &["n_layer"],
            hidden: &["n_embd"],
            heads: &["n_head"],
            kv_heads: &[],
            head_dim: &[],
            intermediate: &["n_inner"],
            activation: &["activation_function"],
        },
        default_activation: Some("gelu_new"),
        rotary: true,
        notes: &[PARALLEL],
        ..BASE
    },
    FamilySpec {
        layout: "Falcon",
        family: "falcon",
        model_types: &["falcon", "refinedweb", "refinedwebmodel"],
        architectures: &["falcon"],
        // Per head [q_h; k_h; v_h] (neither flag): BLOOM's tensors, so
        // without config.json a Falcon checkpoint is read as BLOOM.
        tensors: FALCON_PER_GROUP,
        config: FactKeys {
            layers: &["num_hidden_layers", "n_layer"],
            hidden: &["hidden_size", "n_embed"],
            heads: &["num_attention_heads", "n_head"],
            kv_heads: &["num_kv_heads", "n_head_kv"],
            head_dim: &[],
            intermediate: &["ffn_hidden_size"],
            activation: &["activation"],
        },
        default_activation: Some("gelu"),
        // transformers' FalconAttention._split_heads; the original
        // RefinedWeb (Falcon-40B) code is the new decoder architecture.
        variants: &[
            Variant {
                when: &[Cond::ModelType(&["refinedweb"])],
                tensors: FALCON_PER_GROUP,
                kv_heads: KvHeads::Read,
            },
            Variant {
                when: &[Cond::Is(NEW_ARCH, true)],
                tensors: FALCON_PER_GROUP,
                kv_heads: KvHeads::Read,
            },
            Variant {
                when: &[Cond::Is(MULTI_QUERY, true)],
                tensors: FALCON_MULTI_QUERY,
                kv_heads: KvHeads::One,
            },
            Variant {
                when: &[],
                tensors: FALCON_PER_GROUP,
                kv_heads: KvHeads::PerHead,
            },
        ],
        // FalconDecoderLayer: the new decoder architecture is always
        // parallel; otherwise parallel_attn decides.
        flag_notes: &[
            FlagNote {
                when: &[Cond::Is(ALIBI, false)],
                note: ROTARY,
            },
            FlagNote {
                when: &[Cond::Is(ALIBI, true)],
                note: POSITION_BIAS,
            },
            FlagNote {
                when: &[Cond::ModelType(&["refinedweb"])],
                note: PARALLEL,
            },
            FlagNote {
                when: &[Cond::Is(NEW_ARCH, true)],
                note: PARALLEL,
            },
            FlagNote {
                when: &[Cond::Is(PARALLEL_ATTN, true)],
                note: PARALLEL,
            },
        ],
        ..BASE
    },
    FamilySpec {
        layout: "Albert",
        family: "albert",
        model_types: &["albert"],
        architectures: &["albert"],
        // `{l}` is the group, `{i}` the layer within it.
        tensors: &[
            t(
                "encoder.albert_layer_groups.{l}.albert_layers.{i}.attention.query.weight",
                &[Query],
                OutIn,
            ),
            t(
                "encoder.albert_layer_groups.{l}.albert_layers.{i}.attention.key.weight",
                &[Key],
                OutIn,
            ),
            t(
                "encoder.albert_layer_groups.{l}.albert_layers.{i}.attention.value.weight",
                &[Value],
                OutIn,
            ),
            t(
                "encoder.albert_layer_groups.{l}.albert_layers.{i}.attention.dense.weight",
                &[Output],
                OutIn,
            ),
            t(
                "encoder.albert_layer_groups.{l}.albert_layers.{i}.ffn.weight",
                &[FfnIn],
                OutIn,
            ),
            t(
                "encoder.albert_layer_groups.{l}.albert_layers.{i}.ffn_output.weight",
                &[FfnOut],
                OutIn,
            ),
        ],
        config: HF,
        // AlbertConfig's default hidden_act.
        default_activation: Some("gelu_new"),
        shared: Some(SharedLayers {
            groups: &["num_hidden_groups"],
            inner: &["inner_group_num"],
            note: ALBERT_SHARING,
        }),
        ..BASE
    },
    FamilySpec {
        layout: "ModernBert",
        family: "modernbert",
        model_types: &["modernbert"],
        architectures: &["modernbert"],
        tensors: &[
            t("layers.{l}.attn.Wqkv.weight", &[Query, Key, Value], OutIn),
            t("layers.{l}.attn.Wo.weight", &[Output], OutIn),
            // `input, gate = Wi(x).chunk(2)`, `Wo(act(input) * gate)`: the
            // first half is activated (LLaMA's gate_proj), the second is
            // linear (up_proj).
            t("layers.{l}.mlp.Wi.weight", &[FfnGate, FfnIn], OutIn),
            t("layers.{l}.mlp.Wo.weight", &[FfnOut], OutIn),
        ],
        config: FactKeys {
            activation: &["hidden_activation"],
            ..HF
        },
        default_activation: Some("gelu"),
        rotary: true,
        ..BASE
    },
    DEBERTA_V2,
    FamilySpec {
        layout: "Deberta",
        family: "deberta",
        model_types: &["deberta"],
        tensors: &[
            // `in_proj` viewed as (heads, 3 head_dim) and chunked in three:
            // per head [q_h; k_h; v_h].
            per_group("encoder.layer.{l}.attention.self.in_proj.weight"),
            DEBERTA_REST[0],
            DEBERTA_REST[1],
            DEBERTA_REST[2],
        ],
        ..DEBERTA_V2
    },
    FamilySpec {
        layout: "ClipText",
        family: "clip",
        model_types: &["clip", "clip_text_model"],
        tensors: clip_tower!("text_model."),
        config: TOWER,
        default_activation: Some("quick_gelu"),
        stack: Some(Stack {
            name: "text",
            section: Some("text_config"),
            defaults: CLIP_TEXT_DEFAULTS,
        }),
        ..BASE
    },
    FamilySpec {
        layout: "ClipVision",
        family: "clip",
        model_types: &["clip", "clip_vision_model"],
        tensors: clip_tower!("vision_model."),
        config: TOWER,
        default_activation: Some("quick_gelu"),
        stack: Some(Stack {
            name: "vision",
            section: Some("vision_config"),
            defaults: VIT_BASE_DEFAULTS,
        }),
        ..BASE
    },
    FamilySpec {
        layout: "SiglipText",
        family: "siglip",
        model_types: &["siglip", "siglip_text_model"],
        tensors: clip_tower!("text_model."),
        config: TOWER,
        default_activation: Some("gelu_pytorch_tanh"),
        stack: Some(Stack {
            name: "text",
            section: Some("text_config"),
            defaults: VIT_BASE_DEFAULTS,
        }),
        ..BASE
    },
    FamilySpec {
        layout: "SiglipVision",
        family: "siglip",
        model_types: &["siglip", "siglip_vision_model"],
        tensors: clip_tower!("vision_model."),
        config: TOWER,
        default_activation: Some("gelu_pytorch_tanh"),
        stack: Some(Stack {
            name: "vision",
            section: Some("vision_config"),
            defaults: VIT_BASE_DEFAULTS,
        }),
        ..BASE
    },
    // T5 v1.1, flan-T5, mT5, umT5 (gated `wi_0`, `wi_1`) before T5 v1.0
    // (`wi`): the same model types, told apart by the gate's tensor.
    FamilySpec {
        layout: "T5GatedEncoder",
        family: "t5",
        model_types: &["t5", "mt5", "umt5"],
        tensors: t5_stack!("encoder.", "1", gated),
        config: T5_ENCODER,
        default_activation: Some("gated-gelu"),
        notes: &[POSITION_BIAS],
        markers: &["encoder.block.{l}.layer.1.DenseReluDense.wi_0.weight"],
        stack: flat("encoder"),
        ..BASE
    },
    FamilySpec {
        layout: "T5Encoder",
        family: "t5",
        model_types: &["t5", "mt5", "umt5"],
        tensors: t5_stack!("encoder.", "1", plain),
        config: T5_ENCODER,
        default_activation: Some("relu"),
        notes: &[POSITION_BIAS],
        stack: flat("encoder"),
        ..BASE
    },
    FamilySpec {
        layout: "T5GatedDecoder",
        family: "t5",
        model_types: &["t5", "mt5", "umt5"],
        tensors: t5_stack!("decoder.", "2", gated, cross),
        config: T5_DECODER,
        default_activation: Some("gated-gelu"),
        no_bound: Some(CROSS_ATTENTION),
        markers: &["decoder.block.{l}.layer.2.DenseReluDense.wi_0.weight"],
        stack: flat("decoder"),
        ..BASE
    },
    FamilySpec {
        layout: "T5Decoder",
        family: "t5",
        model_types: &["t5", "mt5", "umt5"],
        tensors: t5_stack!("decoder.", "2", plain, cross),
        config: T5_DECODER,
        default_activation: Some("relu"),
        no_bound: Some(CROSS_ATTENTION),
        markers: &["decoder.block.{l}.layer.2.DenseReluDense.wi.weight"],
        stack: flat("decoder"),
        ..BASE
    },
    FamilySpec {
        layout: "BartEncoder",
        family: "bart",
        model_types: &["bart", "mbart"],
        tensors: bart_stack!("encoder."),
        config: BART_ENCODER,
        default_activation: Some("gelu"),
        stack: flat("encoder"),
        ..BASE
    },
    // Before OPT, whose tensors a decoder's are: its cross-attention tells it apart.
    FamilySpec {
        layout: "BartDecoder",
        family: "bart",
        model_types: &["bart", "mbart"],
        tensors: bart_stack!("decoder.", cross),
        config: BART_DECODER,
        default_activation: Some("gelu"),
        no_bound: Some(CROSS_ATTENTION),
        markers: &["decoder.layers.{l}.encoder_attn.q_proj.weight"],
        stack: flat("decoder"),
        ..BASE
    },
    FamilySpec {
        layout: "WhisperEncoder",
        family: "whisper",
        model_types: &["whisper"],
        tensors: bart_stack!("encoder."),
        config: BART_ENCODER,
        default_activation: Some("gelu"),
        stack: flat("encoder"),
        ..BASE
    },
    FamilySpec {
        layout: "WhisperDecoder",
        family: "whisper",
        model_types: &["whisper"],
        tensors: bart_stack!("decoder.", cross),
        config: BART_DECODER,
        default_activation: Some("gelu"),
        no_bound: Some(CROSS_ATTENTION),
        markers: &["decoder.layers.{l}.encoder_attn.q_proj.weight"],
        stack: flat("decoder"),
        ..BASE
    },
    FamilySpec {
        layout: "Opt",
        family: "opt",
        model_types: &["opt"],
        architectures: &["opt"],
        tensors: &[
            t(
                "decoder.layers.{l}.self_attn.q_proj.weight",
                &[Query],
                OutIn,
            ),
            t("decoder.layers.{l}.self_attn.k_proj.weight", &[Key], OutIn),
            t(
                "decoder.layers.{l}.self_attn.v_proj.weight",
                &[Value],
                OutIn,
            ),
            t(
                "decoder.layers.{l}.self_attn.out_proj.weight",
                &[Output],
                OutIn,
            ),
            t("decoder.layers.{l}.fc1.weight", &[FfnIn], OutIn),
            t("decoder.layers.{l}.fc2.weight", &[FfnOut], OutIn),
        ],
        config: FactKeys {
            intermediate: &["ffn_dim"],
            activation: &["activation_function"],
            ..HF
        },
        default_activation: Some("relu"),
        ..BASE
    },
    FamilySpec {
        layout: "Gemma3",
        family: "gemma3_text",
        model_types: &["gemma3_text"],
        tensors: LLAMA_TENSORS,
        config: GEMMA,
        default_activation: Some("gelu_pytorch_tanh"),
        rotary: true,
        no_bound: Some(QK_NORM),
        markers: GEMMA3_MARKERS,
        ..BASE
    },
    FamilySpec {
        layout: "Qwen3Moe",
        family: "qwen3_moe",
        model_types: &["qwen3_moe"],
        tensors: LLAMA_TENSORS,
        config: HF_GQA,
        default_activation: Some("silu"),
        rotary: true,
        no_bound: Some(MOE_QK_NORM),
        markers: &[
            "layers.{l}.self_attn.q_norm.weight",
            "layers.{l}.self_attn.k_norm.weight",
            "layers.{l}.mlp.gate.weight",
        ],
        moe: Some(&QWEN3_MOE),
        ..BASE
    },
    FamilySpec {
        layout: "Gemma3Multimodal",
        family: "gemma3",
        model_types: &["gemma3"],
        tensors: LLAMA_TENSORS,
        config: GEMMA,
        default_activation: Some("gelu_pytorch_tanh"),
        rotary: true,
        no_bound: Some(QK_NORM),
        markers: GEMMA3_MARKERS,
        // Gemma3TextConfig's defaults, which a saved text_config leaves out.
        stack: Some(Stack {
            name: "text",
            section: Some("text_config"),
            defaults: &[
                ("num_hidden_layers", 26),
                ("hidden_size", 2304),
                ("num_attention_heads", 8),
                ("num_key_value_heads", 4),
                ("head_dim", 256),
                ("intermediate_size", 9216),
            ],
        }),
        ..BASE
    },
    // Its vision tower: a SigLIP vision encoder under `vision_tower.`
    // (`model.vision_tower.` in newer transformers), its facts in
    // `vision_config` with SiglipVisionConfig's defaults (Gemma3Config
    // builds a SiglipVisionConfig from it).
    FamilySpec {
        layout: "Gemma3Vision",
        family: "gemma3",
        model_types: &["gemma3"],
        tensors: clip_tower!("vision_model."),
        config: TOWER,
        default_activation: Some("gelu_pytorch_tanh"),
        stack: Some(Stack {
            name: "vision",
            section: Some("vision_config"),
            defaults: VIT_BASE_DEFAULTS,
        }),
        ..BASE
    },
    FamilySpec {
        layout: "Qwen3",
        family: "qwen3",
        model_types: &["qwen3", "olmo2"],
        architectures: &["qwen3"],
        tensors: LLAMA_TENSORS,
        config: HF_GQA,
        default_activation: Some("silu"),
        rotary: true,
        no_bound: Some(QK_NORM),
        markers: QK_NORM_MARKERS,
        ..BASE
    },
    FamilySpec {
        layout: "Mixtral",
        family: "mixtral",
        model_types: &["mixtral"],
        architectures: &["mixtral"],
        tensors: LLAMA_TENSORS,
        config: HF_GQA,
        default_activation: Some("silu"),
        rotary: true,
        no_bound: Some(MOE),
        markers: &["layers.{l}.block_sparse_moe.gate.weight"],
        moe: Some(&MIXTRAL_MOE),
        ..BASE
    },
    FamilySpec {
        layout: "Qwen2Moe",
        family: "qwen2_moe",
        model_types: &["qwen2_moe"],
        tensors: LLAMA_TENSORS,
        config: HF_GQA,
        default_activation: Some("silu"),
        rotary: true,
        no_bound: Some(MOE),
        markers: &["layers.{l}.mlp.shared_expert_gate.weight"],
        moe: Some(&QWEN2_MOE),
        ..BASE
    },
    FamilySpec {
        layout: "Llama",
        family: "llama",
        model_types: &["llama", "mistral", "qwen2", "smollm"],
        architectures: &["llama", "mistral", "qwen2"],
        tensors: LLAMA_TENSORS,
        config: HF_GQA,
        default_activation: Some("silu"),
        rotary: true,
        ..BASE
    },
    FamilySpec {
        layout: "Phi3",
        family: "phi3",
        model_types: &["phi3"],
        architectures: &["phi3"],
        tensors: &[
            t(
                "layers.{l}.self_attn.qkv_proj.weight",
                &[Query, Key, Value],
                OutIn,
            ),
            t("layers.{l}.self_attn.o_proj.weight", &[Output], OutIn),
            t(
                "layers.{l}.mlp.gate_up_proj.weight",
                &[FfnGate, FfnIn],
                OutIn,
            ),
            t("layers.{l}.mlp.down_proj.weight", &[FfnOut], OutIn),
        ],
        config: HF_GQA,
        default_activation: Some("silu"),
        rotary: true,
        ..BASE
    },
    FamilySpec {
        layout: "Gemma2",
        family: "gemma2",
        model_types: &["gemma2"],
        architectures: &["gemma2"],
        tensors: LLAMA_TENSORS,
        config: GEMMA,
        default_activation: Some("gelu_pytorch_tanh"),
        rotary: true,
        notes: &[GEMMA2_LOGITS],
        ..BASE
    },
    FamilySpec {
        layout: "Gemma",
        family: "gemma",
        model_types: &["gemma"],
        architectures: &["gemma"],
        tensors: LLAMA_TENSORS,
        config: GEMMA,
        default_activation: Some("gelu_pytorch_tanh"),
        rotary: true,
        ..BASE
    },
    FamilySpec {
        layout: "Gguf",
        family: "llama",
        model_types: &[],
        gguf_architectures: &["llama", "mistral", "qwen2", "smollm"],
        tensors: &[
            t("blk.{l}.attn_q.weight", &[Query], OutIn),
            t("blk.{l}.attn_k.weight", &[Key], OutIn),
            t("blk.{l}.attn_v.weight", &[Value], OutIn),
            t("blk.{l}.attn_output.weight", &[Output], OutIn),
            t("blk.{l}.ffn_gate.weight", &[FfnGate], OutIn),
            t("blk.{l}.ffn_up.weight", &[FfnIn], OutIn),
            t("blk.{l}.ffn_down.weight", &[FfnOut], OutIn),
        ],
        // A config.json beside a GGUF file is read after its metadata.
        config: HF_GQA,
        gguf: FactKeys {
            layers: &["block_count"],
            hidden: &["embedding_length"],
            heads: &["attention.head_count"],
            kv_heads: &["attention.head_count_kv"],
            head_dim: &["attention.key_length"],
            intermediate: &["feed_forward_length"],
            activation: &[],
        },
        // llama.cpp's graph for these architectures: SiLU-gated feed-forward.
        default_activation: Some("silu"),
        rotary: true,
        ..BASE
    },
];

/// Activation names that are GELU or one of its usual approximations (the
/// paper's `L_phi = 1.13` is a bound for GELU).
pub(crate) const GELU_VARIANTS: &[&str] = &[
    "gelu",
    "gelu_new",
    "gelu_fast",
    "gelu_pytorch_tanh",
    "gelu_accurate",
    "gelu_python",
    // T5's `feed_forward_proj`: its gate runs `gelu_new` (T5Config).
    "gated-gelu",
];

/// Why the paper's reasoning gives no bound for the model of
/// `architecture` (a certificate's `model.architecture`: a `model_type`, a
/// GGUF architecture or a family name of the table) and, for a model of
/// several stacks, its stack `stack` (`parameters.stack`), or `None` when
/// it gives one ([`FamilySpec::no_bound`]).
pub(crate) fn bound_absent_reason(architecture: &str, stack: Option<&str>) -> Option<&'static str> {
    FAMILIES
        .iter()
        .find(|f| {
            (f.model_types.contains(&architecture)
                || f.gguf_architectures.contains(&architecture)
                || f.family == architecture)
                && stack.is_none_or(|s| f.stack.is_some_and(|t| t.name == s))
        })
        .and_then(|f| f.no_bound)
}

impl FamilySpec {
    /// The tensor that holds the query (names the layout in detection).
    pub(crate) fn anchor(&self) -> &TensorSpec {
        &self.tensors[0]
    }

    /// The tensor that holds `role`, with the role's position among its roles.
    pub(crate) fn holder(&self, role: Role) -> Option<(&TensorSpec, usize)> {
        self.tensors
            .iter()
            .find_map(|t| t.roles.iter().position(|&r| r == role).map(|k| (t, k)))
    }

    /// Gated feed-forward (`M_in = [W_gate, W_up]`): an extension of the paper.
    #[cfg(test)]
    pub(crate) fn gated(&self) -> bool {
        self.holder(Role::FfnGate).is_some()
    }

    /// A decoder block with a cross-attention (`QK_cross`, `V_tilde_cross`).
    pub fn cross_attention(&self) -> bool {
        self.holder(Role::CrossQuery).is_some()
    }

    /// Grouped-query attention: key/value heads are read from the file.
    pub(crate) fn grouped_query(&self) -> bool {
        !self.config.kv_heads.is_empty() || !self.gguf.kv_heads.is_empty()
    }

    /// Every layout of the family, in the order they are tried: its
    /// variants, then (unless a variant always holds) its own tensors.
    pub fn choices(&self) -> Vec<Variant> {
        let mut out = self.variants.to_vec();
        if !out.iter().any(|v| v.when.is_empty()) {
            out.push(Variant {
                when: &[],
                tensors: self.tensors,
                kv_heads: if self.grouped_query() {
                    KvHeads::Read
                } else {
                    KvHeads::PerHead
                },
            });
        }
        out
    }

    /// The layout whose conditions hold first, `holds` telling whether a
    /// condition holds (an error about a flag's value passes through).
    pub(crate) fn choose<E>(&self, holds: impl Fn(&Cond) -> Result<bool, E>) -> Result<Variant, E> {
        for v in self.choices() {
            if v.when
                .iter()
                .try_fold(true, |all, c| Ok(all && holds(c)?))?
            {
                return Ok(v);
            }
        }
        unreachable!("choices() ends with a layout that always holds")
    }

    /// The notes of [`FamilySpec::flag_notes`] that hold, after the rotary
    /// note ([`FamilySpec::rotary`]) and [`FamilySpec::notes`], each once.
    pub(crate) fn notes_where<E>(
        &self,
        holds: impl Fn(&Cond) -> Result<bool, E>,
    ) -> Result<Vec<&'static str>, E> {
        let mut out: Vec<&'static str> = Vec::new();
        if self.rotary {
            out.push(ROTARY);
        }
        out.extend(self.notes.iter().copied());
        for n in self.flag_notes {
            if n.when
                .iter()
                .try_fold(true, |all, c| Ok(all && holds(c)?))?
                && !out.contains(&n.note)
            {
                out.push(n.note);
            }
        }
        Ok(out)
    }
}

impl Variant {
    /// The tensor that holds the query.
    pub(crate) fn anchor(&self) -> &TensorSpec {
        &self.tensors[0]
    }

    /// The tensor that holds `role`, with the role's position among its roles.
    pub(crate) fn holder(&self, role: Role) -> Option<(&TensorSpec, usize)> {
        self.tensors
            .iter()
            .find_map(|t| t.roles.iter().position(|&r| r == role).map(|k| (t, k)))
    }
}

impl TensorSpec {
    /// The name in layer `l`, after `prefix` (in a family of shared
    /// layers, group `l`'s first layer).
    pub fn name_in(&self, prefix: &str, l: usize) -> String {
        self.name_at(prefix, l, 0)
    }

    /// The name in layer (or group) `l` and layer `i` of a group of shared
    /// layers ([`SharedLayers`]), after `prefix`.
    pub(crate) fn name_at(&self, prefix: &str, l: usize, i: usize) -> String {
        format!(
            "{prefix}{}",
            self.name
                .replace("{l}", &l.to_string())
                .replace("{i}", &i.to_string())
        )
    }

    /// The scale vector's name in layer (or group) `l`, layer `i` of a group.
    pub fn scale_at(&self, prefix: &str, l: usize, i: usize) -> Option<String> {
        self.scale.map(|s| {
            format!(
                "{prefix}{}",
                s.replace("{l}", &l.to_string())
                    .replace("{i}", &i.to_string())
            )
        })
    }
}

/// Said after the list of supported families when a model is not one of
/// them: `spectra` certifies the spectra of any checkpoint's matrices.
pub(crate) const SPECTRA_HINT: &str =
    "; `specbound spectra MODEL` certifies the spectra and norms of \
every weight matrix of any checkpoint, known family or not";

/// Every recognised `model_type` and GGUF architecture, for messages: each
/// once, in table order (a model of several stacks has an entry per stack).
pub(crate) fn supported() -> String {
    fn each_once<'a>(names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
        let mut seen = Vec::new();
        for n in names {
            if !seen.contains(&n) {
                seen.push(n);
            }
        }
        seen
    }
    let hf = each_once(FAMILIES.iter().flat_map(|f| f.model_types.iter().copied()));
    let gguf = each_once(
        FAMILIES
            .iter()
            .flat_map(|f| f.gguf_architectures.iter().copied()),
    );
    format!(
        "{}; llama.cpp GGUF files of {}",
        hf.join(", "),
        gguf.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: the list of supported types repeated a model type once
    /// per stack (`t5, mt5, umt5` four times).
    #[test]
    fn supported_names_each_model_type_once() {
        let list = supported();
        let (hf, _) = list.split_once("; ").unwrap();
        let names: Vec<&str> = hf.split(", ").collect();
        for n in &names {
            assert_eq!(names.iter().filter(|m| *m == n).count(), 1, "{n} in {list}");
        }
        for f in FAMILIES {
            for t in f.model_types {
                assert!(names.contains(t), "{t}");
            }
        }
    }

    /// The entries of a model type are one entry of one stack, or all
    /// stacks of one family; a stack's defaults are keys of its facts; a
    /// decoder stack (cross-attention) has no bound.
    #[test]
    fn stacks_of_a_model_type_are_consistent() {
        for f in FAMILIES {
            for mt in f.model_types {
                let of: Vec<&FamilySpec> = FAMILIES
                    .iter()
                    .filter(|g| g.model_types.contains(mt))
                    .collect();
                if f.stack.is_none() {
                    assert_eq!(of.len(), 1, "{mt}");
                } else {
                    assert!(
                        of.iter().all(|g| g.stack.is_some() && g.family == f.family),
                        "{mt}"
                    );
                }
            }
            let Some(s) = f.stack else { continue };
            let k = &f.config;
            let keys = [
                k.layers,
                k.hidden,
                k.heads,
                k.kv_heads,
                k.head_dim,
                k.intermediate,
            ]
            .concat();
            assert!(
                s.defaults.iter().all(|(d, _)| keys.contains(d)),
                "{}",
                f.layout
            );
            assert_eq!(
                s.name == "decoder",
                f.no_bound == Some(CROSS_ATTENTION),
                "{}",
                f.layout
            );
            assert_eq!(s.name == "decoder", f.cross_attention(), "{}", f.layout);
        }
    }

    /// What the generic code relies on, checked for every entry and every
    /// layout of it ([`FamilySpec::choices`]): the first tensor holds the
    /// query, under the family's anchor name (the prefix is found by it);
    /// every role of the paper's block appears exactly once; the roles
    /// fused in one tensor share their input width; feed-forward inputs are
    /// stored alone or as [gate; up] (their height gives the width I);
    /// layouts whose key/value heads are read store the key alone or in a
    /// fused [query; key; value] (its height gives the key/value heads);
    /// names (and scale vectors) are per layer, and per layer of a group
    /// exactly in families of shared layers; the last layout always holds;
    /// a flag has one default in a family; every family can be recognised.
    #[test]
    fn every_family_spec_is_well_formed() {
        let in_width = |r: Role| match r {
            Role::Output | Role::CrossOutput => "Hd",
            Role::FfnOut => "I",
            _ => "N",
        };
        for f in FAMILIES {
            let choices = f.choices();
            assert!(choices.last().unwrap().when.is_empty(), "{}", f.layout);
            let mut conds: Vec<&Cond> = Vec::new();
            for v in &choices {
                conds.extend(v.when);
                check_layout(f, v, in_width);
            }
            for n in f.flag_notes {
                assert!(!n.when.is_empty() && !n.note.is_empty(), "{}", f.layout);
                conds.extend(n.when);
            }
            for c in &conds {
                match c {
                    Cond::ModelType(m) => {
                        assert!(m.iter().all(|m| f.model_types.contains(m)), "{}", f.layout)
                    }
                    Cond::Is(flag, _) => assert!(
                        conds.iter().all(|d| match d {
                            Cond::Is(g, _) => g.key != flag.key || g.default == flag.default,
                            _ => true,
                        }),
                        "{}: {}",
                        f.layout,
                        flag.key
                    ),
                }
            }
            if let Some(sh) = f.shared {
                assert!(!sh.groups.is_empty() && !sh.inner.is_empty() && !sh.note.is_empty());
                assert!(!f.config.layers.is_empty(), "{}", f.layout);
            }
            // Markers are per layer (layer 0 is looked up). A family whose
            // query tensor is an earlier family's must have the same
            // tensors (told apart by config.json alone), or the earlier one
            // must have markers that tell them apart by tensor names; a
            // family without a bound is never read by a later family's
            // tensors with a bound.
            assert!(f.markers.iter().all(|m| m.contains("{l}")), "{}", f.layout);
            // Experts: per layer and per expert, gated, and without a bound
            // (top-k routing is discontinuous).
            if let Some(m) = f.moe {
                assert!(f.gated() && f.no_bound.is_some(), "{}", f.layout);
                assert!(
                    m.experts
                        .iter()
                        .all(|n| n.contains("{l}") && n.contains("{e}")),
                    "{}",
                    f.layout
                );
                assert!(m
                    .shared
                    .iter()
                    .flatten()
                    .chain(m.fused.iter().flat_map(|f| [&f.gate_up, &f.down]))
                    .all(|n| n.contains("{l}") && !n.contains("{e}")));
                assert_eq!(m.shared.is_some(), !m.shared_width.is_empty());
            }
            assert!(!f.model_types.is_empty() || !f.gguf_architectures.is_empty());
            assert!(f.architectures.iter().all(|a| f.model_types.contains(a)));
            assert!(!f.config.heads.is_empty() || !f.gguf.heads.is_empty());
        }
        // Layout names are distinct; query tensor names are distinct except
        // for families of one tensor layout told apart by config.json alone
        // (Gemma's tensors are LLaMA's) or by the earlier one's markers
        // (DINOv2's LayerScale, Qwen3's q_norm); a family without a bound
        // that shares its query tensor with a family with one comes first.
        for (i, a) in FAMILIES.iter().enumerate() {
            for b in &FAMILIES[i + 1..] {
                assert_ne!(a.layout, b.layout);
                if a.anchor().name == b.anchor().name {
                    assert!(
                        a.tensors == b.tensors || !a.markers.is_empty(),
                        "{} {}",
                        a.layout,
                        b.layout
                    );
                    assert!(
                        b.no_bound.is_none() || a.no_bound.is_some(),
                        "{} {}",
                        a.layout,
                        b.layout
                    );
                    if a.no_bound.is_some() && b.no_bound.is_none() {
                        assert!(!a.markers.is_empty(), "{}", a.layout);
                    }
                }
            }
        }
    }

    fn check_layout(f: &FamilySpec, v: &Variant, in_width: impl Fn(Role) -> &'static str) {
        assert_eq!(v.anchor().roles[0], Role::Query, "{}", f.layout);
        assert_eq!(v.anchor().name, f.anchor().name, "{}", f.layout);
        for role in [
            Role::Query,
            Role::Key,
            Role::Value,
            Role::Output,
            Role::FfnIn,
            Role::FfnOut,
        ] {
            let n = v
                .tensors
                .iter()
                .flat_map(|t| t.roles)
                .filter(|&&r| r == role)
                .count();
            assert_eq!(n, 1, "{}: {}", f.layout, role.name());
        }
        // A cross-attention has all four weights, each alone (never fused:
        // the recipe reads each whole), or none; only a stack without a
        // bound has one (the bound never sums over it).
        let cross: Vec<Role> = v
            .tensors
            .iter()
            .flat_map(|t| t.roles)
            .copied()
            .filter(|r| r.cross())
            .collect();
        assert!(
            cross.is_empty()
                || cross
                    == [
                        Role::CrossQuery,
                        Role::CrossKey,
                        Role::CrossValue,
                        Role::CrossOutput
                    ],
            "{}",
            f.layout
        );
        assert!(
            v.tensors
                .iter()
                .all(|t| t.roles.len() == 1 || !t.roles.iter().any(|r| r.cross())),
            "{}",
            f.layout
        );
        assert!(cross.is_empty() || f.no_bound.is_some(), "{}", f.layout);
        assert!(
            v.tensors
                .iter()
                .flat_map(|t| t.roles)
                .filter(|&&r| r == Role::FfnGate)
                .count()
                <= 1
        );
        for t in v.tensors {
            let per_layer =
                |n: &str| n.contains("{l}") && (n.contains("{i}") == f.shared.is_some());
            assert!(per_layer(t.name), "{}", t.name);
            assert!(t.scale.is_none_or(per_layer), "{}", t.name);
            assert!(!t.roles.is_empty(), "{}", t.name);
            assert!(
                t.roles.iter().all(|&r| in_width(r) == in_width(t.roles[0])),
                "{}",
                t.name
            );
            if t.roles
                .iter()
                .any(|r| matches!(r, Role::FfnIn | Role::FfnGate))
            {
                assert!(
                    t.roles == [Role::FfnIn]
                        || t.roles == [Role::FfnGate]
                        || t.roles == [Role::FfnGate, Role::FfnIn],
                    "{}",
                    t.name
                );
            }
            if t.fusion == Fusion::PerGroup {
                assert_eq!(t.roles, &[Role::Query, Role::Key, Role::Value]);
            }
        }
        // The key's height gives the key/value heads: stored alone, or in a
        // fused [query; key; value] (stacked or per group, of one height).
        if v.kv_heads == KvHeads::Read {
            let kt = v.holder(Role::Key).unwrap().0;
            assert!(
                kt.roles == [Role::Key] || kt.roles == [Role::Query, Role::Key, Role::Value],
                "{}",
                f.layout
            );
        }
    }
}
