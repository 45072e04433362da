//! The supported model families as data: one [`FamilySpec`] per tensor
//! layout, saying how the family is recognised, where its facts are read,
//! which stored tensor plays which role (with its orientation and fusion),
//! and where it departs from the paper's model. Detection, extraction and
//! `inspect` all interpret this table and nothing else, so a new family is
//! one entry here plus its test (`tests/architectures.rs` runs every entry).

/// What a stored weight is to the proxies. Widths are in `[out, in]`
/// orientation: `H` heads, `K` key/value heads, `d` the head dimension, `N`
/// the hidden size, `I` the feed-forward width.
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
        }
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
    pub const NONE: FactKeys = FactKeys {
        layers: &[],
        hidden: &[],
        heads: &[],
        kv_heads: &[],
        head_dim: &[],
        intermediate: &[],
        activation: &[],
    };
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
    /// A fused 3-D expert tensor (transformers v5) refused by name.
    pub fused: &'static [&'static str],
}

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
    }
}

/// A fused query/key/value tensor laid out per key/value group ([`Fusion::PerGroup`]).
const fn per_group(name: &'static str) -> TensorSpec {
    TensorSpec {
        name,
        roles: &[Query, Key, Value],
        orientation: OutIn,
        fusion: Fusion::PerGroup,
    }
}

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
    fused: &[
        "layers.{l}.mlp.experts.gate_up_proj",
        "layers.{l}.block_sparse_moe.experts.gate_up_proj",
    ],
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
    fused: &["layers.{l}.mlp.experts.gate_up_proj"],
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
computed, and the certificate states the certified spectra and norms of the self-attention and \
feed-forward proxy matrices of every block; the cross-attention matrices (Q_c^T K_c and \
V_c^T O_c per head) are not included yet";

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
/// (`encoder.`, `decoder.`); a decoder's `encoder_attn` is not a proxy yet.
macro_rules! bart_stack {
    ($stack:literal) => {
        &[
            t(
                concat!($stack, "layers.{l}.self_attn.q_proj.weight"),
                &[Query],
                OutIn,
            ),
            t(
                concat!($stack, "layers.{l}.self_attn.k_proj.weight"),
                &[Key],
                OutIn,
            ),
            t(
                concat!($stack, "layers.{l}.self_attn.v_proj.weight"),
                &[Value],
                OutIn,
            ),
            t(
                concat!($stack, "layers.{l}.self_attn.out_proj.weight"),
                &[Output],
                OutIn,
            ),
            t(concat!($stack, "layers.{l}.fc1.weight"), &[FfnIn], OutIn),
            t(concat!($stack, "layers.{l}.fc2.weight"), &[FfnOut], OutIn),
        ]
    };
}

/// The self-attention of a T5 stack (`encoder.`, `decoder.`) and its
/// feed-forward (sublayer `ff`: 1 in the encoder, 2 in the decoder, after
/// `EncDecAttention`), plain (`wi`, ReLU) or gated (`wi_0` activated, `wi_1`).
macro_rules! t5_stack {
    ($stack:literal, $ff:literal, plain) => {
        &[
            t5_stack!(@attn $stack, "q", Query),
            t5_stack!(@attn $stack, "k", Key),
            t5_stack!(@attn $stack, "v", Value),
            t5_stack!(@attn $stack, "o", Output),
            t5_stack!(@ff $stack, $ff, "wi", FfnIn),
            t5_stack!(@ff $stack, $ff, "wo", FfnOut),
        ]
    };
    ($stack:literal, $ff:literal, gated) => {
        &[
            t5_stack!(@attn $stack, "q", Query),
            t5_stack!(@attn $stack, "k", Key),
            t5_stack!(@attn $stack, "v", Value),
            t5_stack!(@attn $stack, "o", Output),
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
        gguf_architectures: &[],
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
        gguf: FactKeys::NONE,
        default_activation: Some("gelu"),
        rotary: false,
        notes: &[],
        no_bound: None,
        markers: &[],
        moe: None,
        stack: None,
    },
    FamilySpec {
        layout: "Vit",
        family: "vit",
        model_types: &["vit"],
        architectures: &["vit"],
        gguf_architectures: &[],
        tensors: &[
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
        gguf: FactKeys::NONE,
        default_activation: Some("gelu"),
        rotary: false,
        notes: &[],
        no_bound: None,
        markers: &[],
        moe: None,
        stack: None,
    },
    FamilySpec {
        layout: "DistilBert",
        family: "distilbert",
        model_types: &["distilbert"],
        architectures: &["distilbert"],
        gguf_architectures: &[],
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
        gguf: FactKeys::NONE,
        default_activation: Some("gelu"),
        rotary: false,
        notes: &[],
        no_bound: None,
        markers: &[],
        moe: None,
        stack: None,
    },
    FamilySpec {
        layout: "Gpt2",
        family: "gpt2",
        model_types: &["gpt2"],
        architectures: &["gpt2"],
        gguf_architectures: &[],
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
        gguf: FactKeys::NONE,
        default_activation: Some("gelu_new"),
        rotary: false,
        notes: &[],
        no_bound: None,
        markers: &[],
        moe: None,
        stack: None,
    },
    FamilySpec {
        layout: "Mpnet",
        family: "mpnet",
        model_types: &["mpnet"],
        architectures: &["mpnet"],
        gguf_architectures: &[],
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
        gguf: FactKeys::NONE,
        default_activation: Some("gelu"),
        rotary: false,
        notes: &[POSITION_BIAS],
        no_bound: None,
        markers: &[],
        moe: None,
        stack: None,
    },
    FamilySpec {
        layout: "GptNeoX",
        family: "gpt_neox",
        model_types: &["gpt_neox"],
        architectures: &[],
        gguf_architectures: &[],
        tensors: &[
            per_group("layers.{l}.attention.query_key_value.weight"),
            t("layers.{l}.attention.dense.weight", &[Output], OutIn),
            t("layers.{l}.mlp.dense_h_to_4h.weight", &[FfnIn], OutIn),
            t("layers.{l}.mlp.dense_4h_to_h.weight", &[FfnOut], OutIn),
        ],
        config: HF,
        gguf: FactKeys::NONE,
        default_activation: Some("gelu"),
        rotary: true,
        notes: &[PARALLEL],
        no_bound: None,
        markers: &[],
        moe: None,
        stack: None,
    },
    FamilySpec {
        layout: "Bloom",
        family: "bloom",
        model_types: &["bloom"],
        architectures: &["bloom"],
        gguf_architectures: &[],
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
        gguf: FactKeys::NONE,
        // BLOOM's bloom_gelu_forward: the tanh approximation of GELU.
        default_activation: Some("gelu_pytorch_tanh"),
        rotary: false,
        notes: &[POSITION_BIAS],
        no_bound: None,
        markers: &[],
        moe: None,
        stack: None,
    },
    FamilySpec {
        layout: "GptJ",
        family: "gptj",
        model_types: &["gptj"],
        architectures: &["gptj"],
        gguf_architectures: &[],
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
        gguf: FactKeys::NONE,
        default_activation: Some("gelu_new"),
        rotary: true,
        notes: &[PARALLEL],
        no_bound: None,
        markers: &[],
        moe: None,
        stack: None,
    },
    FamilySpec {
        layout: "ClipText",
        family: "clip",
        model_types: &["clip", "clip_text_model"],
        architectures: &[],
        gguf_architectures: &[],
        tensors: clip_tower!("text_model."),
        config: TOWER,
        gguf: FactKeys::NONE,
        default_activation: Some("quick_gelu"),
        rotary: false,
        notes: &[],
        no_bound: None,
        markers: &[],
        stack: Some(Stack {
            name: "text",
            section: Some("text_config"),
            defaults: CLIP_TEXT_DEFAULTS,
        }),
        moe: None,
    },
    FamilySpec {
        layout: "ClipVision",
        family: "clip",
        model_types: &["clip", "clip_vision_model"],
        architectures: &[],
        gguf_architectures: &[],
        tensors: clip_tower!("vision_model."),
        config: TOWER,
        gguf: FactKeys::NONE,
        default_activation: Some("quick_gelu"),
        rotary: false,
        notes: &[],
        no_bound: None,
        markers: &[],
        stack: Some(Stack {
            name: "vision",
            section: Some("vision_config"),
            defaults: VIT_BASE_DEFAULTS,
        }),
        moe: None,
    },
    FamilySpec {
        layout: "SiglipText",
        family: "siglip",
        model_types: &["siglip", "siglip_text_model"],
        architectures: &[],
        gguf_architectures: &[],
        tensors: clip_tower!("text_model."),
        config: TOWER,
        gguf: FactKeys::NONE,
        default_activation: Some("gelu_pytorch_tanh"),
        rotary: false,
        notes: &[],
        no_bound: None,
        markers: &[],
        stack: Some(Stack {
            name: "text",
            section: Some("text_config"),
            defaults: VIT_BASE_DEFAULTS,
        }),
        moe: None,
    },
    FamilySpec {
        layout: "SiglipVision",
        family: "siglip",
        model_types: &["siglip", "siglip_vision_model"],
        architectures: &[],
        gguf_architectures: &[],
        tensors: clip_tower!("vision_model."),
        config: TOWER,
        gguf: FactKeys::NONE,
        default_activation: Some("gelu_pytorch_tanh"),
        rotary: false,
        notes: &[],
        no_bound: None,
        markers: &[],
        stack: Some(Stack {
            name: "vision",
            section: Some("vision_config"),
            defaults: VIT_BASE_DEFAULTS,
        }),
        moe: None,
    },
    // T5 v1.1, flan-T5, mT5, umT5 (gated `wi_0`, `wi_1`) before T5 v1.0
    // (`wi`): the same model types, told apart by the gate's tensor.
    FamilySpec {
        layout: "T5GatedEncoder",
        family: "t5",
        model_types: &["t5", "mt5", "umt5"],
        architectures: &[],
        gguf_architectures: &[],
        tensors: t5_stack!("encoder.", "1", gated),
        config: T5_ENCODER,
        gguf: FactKeys::NONE,
        default_activation: Some("gated-gelu"),
        rotary: false,
        notes: &[POSITION_BIAS],
        no_bound: None,
        markers: &["encoder.block.{l}.layer.1.DenseReluDense.wi_0.weight"],
        stack: flat("encoder"),
        moe: None,
    },
    FamilySpec {
        layout: "T5Encoder",
        family: "t5",
        model_types: &["t5", "mt5", "umt5"],
        architectures: &[],
        gguf_architectures: &[],
        tensors: t5_stack!("encoder.", "1", plain),
        config: T5_ENCODER,
        gguf: FactKeys::NONE,
        default_activation: Some("relu"),
        rotary: false,
        notes: &[POSITION_BIAS],
        no_bound: None,
        markers: &[],
        stack: flat("encoder"),
        moe: None,
    },
    FamilySpec {
        layout: "T5GatedDecoder",
        family: "t5",
        model_types: &["t5", "mt5", "umt5"],
        architectures: &[],
        gguf_architectures: &[],
        tensors: t5_stack!("decoder.", "2", gated),
        config: T5_DECODER,
        gguf: FactKeys::NONE,
        default_activation: Some("gated-gelu"),
        rotary: false,
        notes: &[],
        no_bound: Some(CROSS_ATTENTION),
        markers: &["decoder.block.{l}.layer.2.DenseReluDense.wi_0.weight"],
        stack: flat("decoder"),
        moe: None,
    },
    FamilySpec {
        layout: "T5Decoder",
        family: "t5",
        model_types: &["t5", "mt5", "umt5"],
        architectures: &[],
        gguf_architectures: &[],
        tensors: t5_stack!("decoder.", "2", plain),
        config: T5_DECODER,
        gguf: FactKeys::NONE,
        default_activation: Some("relu"),
        rotary: false,
        notes: &[],
        no_bound: Some(CROSS_ATTENTION),
        markers: &["decoder.block.{l}.layer.2.DenseReluDense.wi.weight"],
        stack: flat("decoder"),
        moe: None,
    },
    FamilySpec {
        layout: "BartEncoder",
        family: "bart",
        model_types: &["bart", "mbart"],
        architectures: &[],
        gguf_architectures: &[],
        tensors: bart_stack!("encoder."),
        config: BART_ENCODER,
        gguf: FactKeys::NONE,
        default_activation: Some("gelu"),
        rotary: false,
        notes: &[],
        no_bound: None,
        markers: &[],
        stack: flat("encoder"),
        moe: None,
    },
    // Before OPT, whose tensors a decoder's are: its cross-attention tells it apart.
    FamilySpec {
        layout: "BartDecoder",
        family: "bart",
        model_types: &["bart", "mbart"],
        architectures: &[],
        gguf_architectures: &[],
        tensors: bart_stack!("decoder."),
        config: BART_DECODER,
        gguf: FactKeys::NONE,
        default_activation: Some("gelu"),
        rotary: false,
        notes: &[],
        no_bound: Some(CROSS_ATTENTION),
        markers: &["decoder.layers.{l}.encoder_attn.q_proj.weight"],
        stack: flat("decoder"),
        moe: None,
    },
    FamilySpec {
        layout: "WhisperEncoder",
        family: "whisper",
        model_types: &["whisper"],
        architectures: &[],
        gguf_architectures: &[],
        tensors: bart_stack!("encoder."),
        config: BART_ENCODER,
        gguf: FactKeys::NONE,
        default_activation: Some("gelu"),
        rotary: false,
        notes: &[],
        no_bound: None,
        markers: &[],
        stack: flat("encoder"),
        moe: None,
    },
    FamilySpec {
        layout: "WhisperDecoder",
        family: "whisper",
        model_types: &["whisper"],
        architectures: &[],
        gguf_architectures: &[],
        tensors: bart_stack!("decoder."),
        config: BART_DECODER,
        gguf: FactKeys::NONE,
        default_activation: Some("gelu"),
        rotary: false,
        notes: &[],
        no_bound: Some(CROSS_ATTENTION),
        markers: &["decoder.layers.{l}.encoder_attn.q_proj.weight"],
        stack: flat("decoder"),
        moe: None,
    },
    FamilySpec {
        layout: "Opt",
        family: "opt",
        model_types: &["opt"],
        architectures: &["opt"],
        gguf_architectures: &[],
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
        gguf: FactKeys::NONE,
        default_activation: Some("relu"),
        rotary: false,
        notes: &[],
        no_bound: None,
        markers: &[],
        moe: None,
        stack: None,
    },
    FamilySpec {
        layout: "Gemma3",
        family: "gemma3_text",
        model_types: &["gemma3_text"],
        architectures: &[],
        gguf_architectures: &[],
        tensors: LLAMA_TENSORS,
        config: GEMMA,
        gguf: FactKeys::NONE,
        default_activation: Some("gelu_pytorch_tanh"),
        rotary: true,
        notes: &[],
        no_bound: Some(QK_NORM),
        markers: GEMMA3_MARKERS,
        moe: None,
        stack: None,
    },
    FamilySpec {
        layout: "Qwen3Moe",
        family: "qwen3_moe",
        model_types: &["qwen3_moe"],
        architectures: &[],
        gguf_architectures: &[],
        tensors: LLAMA_TENSORS,
        config: HF_GQA,
        gguf: FactKeys::NONE,
        default_activation: Some("silu"),
        rotary: true,
        notes: &[],
        no_bound: Some(MOE_QK_NORM),
        markers: &[
            "layers.{l}.self_attn.q_norm.weight",
            "layers.{l}.self_attn.k_norm.weight",
            "layers.{l}.mlp.gate.weight",
        ],
        moe: Some(&QWEN3_MOE),
        stack: None,
    },
    FamilySpec {
        layout: "Gemma3Multimodal",
        family: "gemma3",
        model_types: &["gemma3"],
        architectures: &[],
        gguf_architectures: &[],
        tensors: LLAMA_TENSORS,
        config: GEMMA,
        gguf: FactKeys::NONE,
        default_activation: Some("gelu_pytorch_tanh"),
        rotary: true,
        notes: &[],
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
        moe: None,
    },
    FamilySpec {
        layout: "Qwen3",
        family: "qwen3",
        model_types: &["qwen3", "olmo2"],
        architectures: &["qwen3"],
        gguf_architectures: &[],
        tensors: LLAMA_TENSORS,
        config: HF_GQA,
        gguf: FactKeys::NONE,
        default_activation: Some("silu"),
        rotary: true,
        notes: &[],
        no_bound: Some(QK_NORM),
        markers: QK_NORM_MARKERS,
        moe: None,
        stack: None,
    },
    FamilySpec {
        layout: "Mixtral",
        family: "mixtral",
        model_types: &["mixtral"],
        architectures: &["mixtral"],
        gguf_architectures: &[],
        tensors: LLAMA_TENSORS,
        config: HF_GQA,
        gguf: FactKeys::NONE,
        default_activation: Some("silu"),
        rotary: true,
        notes: &[],
        no_bound: Some(MOE),
        markers: &["layers.{l}.block_sparse_moe.gate.weight"],
        moe: Some(&MIXTRAL_MOE),
        stack: None,
    },
    FamilySpec {
        layout: "Qwen2Moe",
        family: "qwen2_moe",
        model_types: &["qwen2_moe"],
        architectures: &[],
        gguf_architectures: &[],
        tensors: LLAMA_TENSORS,
        config: HF_GQA,
        gguf: FactKeys::NONE,
        default_activation: Some("silu"),
        rotary: true,
        notes: &[],
        no_bound: Some(MOE),
        markers: &["layers.{l}.mlp.shared_expert_gate.weight"],
        moe: Some(&QWEN2_MOE),
        stack: None,
    },
    FamilySpec {
        layout: "Llama",
        family: "llama",
        model_types: &["llama", "mistral", "qwen2", "smollm"],
        architectures: &["llama", "mistral", "qwen2"],
        gguf_architectures: &[],
        tensors: LLAMA_TENSORS,
        config: HF_GQA,
        gguf: FactKeys::NONE,
        default_activation: Some("silu"),
        rotary: true,
        notes: &[],
        no_bound: None,
        markers: &[],
        moe: None,
        stack: None,
    },
    FamilySpec {
        layout: "Phi3",
        family: "phi3",
        model_types: &["phi3"],
        architectures: &["phi3"],
        gguf_architectures: &[],
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
        gguf: FactKeys::NONE,
        default_activation: Some("silu"),
        rotary: true,
        notes: &[],
        no_bound: None,
        markers: &[],
        moe: None,
        stack: None,
    },
    FamilySpec {
        layout: "Gemma2",
        family: "gemma2",
        model_types: &["gemma2"],
        architectures: &["gemma2"],
        gguf_architectures: &[],
        tensors: LLAMA_TENSORS,
        config: GEMMA,
        gguf: FactKeys::NONE,
        default_activation: Some("gelu_pytorch_tanh"),
        rotary: true,
        notes: &[GEMMA2_LOGITS],
        no_bound: None,
        markers: &[],
        moe: None,
        stack: None,
    },
    FamilySpec {
        layout: "Gemma",
        family: "gemma",
        model_types: &["gemma"],
        architectures: &["gemma"],
        gguf_architectures: &[],
        tensors: LLAMA_TENSORS,
        config: GEMMA,
        gguf: FactKeys::NONE,
        default_activation: Some("gelu_pytorch_tanh"),
        rotary: true,
        notes: &[],
        no_bound: None,
        markers: &[],
        moe: None,
        stack: None,
    },
    FamilySpec {
        layout: "Gguf",
        family: "llama",
        model_types: &[],
        architectures: &[],
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
        notes: &[],
        no_bound: None,
        markers: &[],
        moe: None,
        stack: None,
    },
];

/// Activation names that are GELU or one of its usual approximations (the
/// paper's `L_phi = 1.13` is a bound for GELU).
pub const GELU_VARIANTS: &[&str] = &[
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
pub fn bound_absent_reason(architecture: &str, stack: Option<&str>) -> Option<&'static str> {
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
    pub fn anchor(&self) -> &TensorSpec {
        &self.tensors[0]
    }

    /// The tensor that holds `role`, with the role's position among its roles.
    pub fn holder(&self, role: Role) -> Option<(&TensorSpec, usize)> {
        self.tensors
            .iter()
            .find_map(|t| t.roles.iter().position(|&r| r == role).map(|k| (t, k)))
    }

    /// Gated feed-forward (`M_in = [W_gate, W_up]`): an extension of the paper.
    pub fn gated(&self) -> bool {
        self.holder(Role::FfnGate).is_some()
    }

    /// Grouped-query attention: key/value heads are read from the file.
    pub fn grouped_query(&self) -> bool {
        !self.config.kv_heads.is_empty() || !self.gguf.kv_heads.is_empty()
    }
}

impl TensorSpec {
    /// The name in layer `l`, after `prefix`.
    pub fn name_in(&self, prefix: &str, l: usize) -> String {
        format!("{prefix}{}", self.name.replace("{l}", &l.to_string()))
    }
}

/// Said after the list of supported families when a model is not one of
/// them: `spectra` certifies the spectra of any checkpoint's matrices.
pub const SPECTRA_HINT: &str = "; `specbound spectra MODEL` certifies the spectra and norms of \
every weight matrix of any checkpoint, known family or not";

/// Every recognised `model_type` and GGUF architecture, for messages.
pub fn supported() -> String {
    let hf: Vec<&str> = FAMILIES
        .iter()
        .flat_map(|f| f.model_types.iter().copied())
        .collect();
    let gguf: Vec<&str> = FAMILIES
        .iter()
        .flat_map(|f| f.gguf_architectures.iter().copied())
        .collect();
    format!(
        "{}; llama.cpp GGUF files of {}",
        hf.join(", "),
        gguf.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
        }
    }

    /// What the generic code relies on, checked for every entry: the first
    /// tensor holds the query; every role of the paper's block appears
    /// exactly once; the roles fused in one tensor share their input width;
    /// feed-forward inputs are stored alone (their height is the width I);
    /// grouped-query families store the key alone (its height gives the
    /// key/value heads); names are per layer; every family can be recognised.
    #[test]
    fn every_family_spec_is_well_formed() {
        let in_width = |r: Role| match r {
            Role::Output => "Hd",
            Role::FfnOut => "I",
            _ => "N",
        };
        for f in FAMILIES {
            assert_eq!(f.anchor().roles[0], Role::Query, "{}", f.layout);
            for role in [
                Role::Query,
                Role::Key,
                Role::Value,
                Role::Output,
                Role::FfnIn,
                Role::FfnOut,
            ] {
                let n = f
                    .tensors
                    .iter()
                    .flat_map(|t| t.roles)
                    .filter(|&&r| r == role)
                    .count();
                assert_eq!(n, 1, "{}: {}", f.layout, role.name());
            }
            assert!(
                f.tensors
                    .iter()
                    .flat_map(|t| t.roles)
                    .filter(|&&r| r == Role::FfnGate)
                    .count()
                    <= 1
            );
            for t in f.tensors {
                assert!(t.name.contains("{l}"), "{}", t.name);
                assert!(!t.roles.is_empty(), "{}", t.name);
                assert!(
                    t.roles.iter().all(|&r| in_width(r) == in_width(t.roles[0])),
                    "{}",
                    t.name
                );
                // Feed-forward inputs are stored alone or as [gate; up]
                // (the height over the role count is the width I).
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
            // The key's height gives the key/value heads: stored alone, or
            // in a stacked [query; key; value].
            if f.grouped_query() {
                let kt = f.holder(Role::Key).unwrap().0;
                assert!(
                    kt.roles == [Role::Key]
                        || (kt.roles == [Role::Query, Role::Key, Role::Value]
                            && kt.fusion == Fusion::Stacked),
                    "{}",
                    f.layout
                );
            }
            // Markers are per layer (layer 0 is looked up), and only a
            // family without a bound needs them here (its tensors are
            // another's; the table tries it first).
            assert!(f.markers.iter().all(|m| m.contains("{l}")), "{}", f.layout);
            if f.no_bound.is_some() {
                assert!(!f.markers.is_empty(), "{}", f.layout);
                let shared = FAMILIES
                    .iter()
                    .position(|g| g.no_bound.is_none() && g.anchor().name == f.anchor().name);
                let me = FAMILIES.iter().position(|g| g.layout == f.layout);
                assert!(shared.is_none_or(|k| me < Some(k)), "{}", f.layout);
            }
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
                    .chain(m.fused)
                    .all(|n| n.contains("{l}") && !n.contains("{e}")));
                assert_eq!(m.shared.is_some(), !m.shared_width.is_empty());
            }
            assert!(!f.model_types.is_empty() || !f.gguf_architectures.is_empty());
            assert!(f.architectures.iter().all(|a| f.model_types.contains(a)));
            assert!(!f.config.heads.is_empty() || !f.gguf.heads.is_empty());
        }
        // Layout names are distinct, and so are the query tensor names,
        // except for families of one tensor layout told apart by
        // config.json alone (Gemma's tensors are LLaMA's).
        for (i, a) in FAMILIES.iter().enumerate() {
            for b in &FAMILIES[i + 1..] {
                assert_ne!(a.layout, b.layout);
                // Or by their markers (T5's gated feed-forward).
                assert!(
                    a.anchor().name != b.anchor().name
                        || a.tensors == b.tensors
                        || a.markers != b.markers,
                    "{} {}",
                    a.layout,
                    b.layout
                );
            }
        }
    }
}
