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
}

use Orientation::{InOut, OutIn};
use Role::*;

const fn t(name: &'static str, roles: &'static [Role], orientation: Orientation) -> TensorSpec {
    TensorSpec {
        name,
        roles,
        orientation,
    }
}

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

/// The supported families, in the order tensor names are tried.
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
    },
    FamilySpec {
        layout: "Llama",
        family: "llama",
        model_types: &["llama", "mistral", "qwen2", "smollm"],
        architectures: &["llama", "mistral", "qwen2"],
        gguf_architectures: &[],
        tensors: &[
            t("layers.{l}.self_attn.q_proj.weight", &[Query], OutIn),
            t("layers.{l}.self_attn.k_proj.weight", &[Key], OutIn),
            t("layers.{l}.self_attn.v_proj.weight", &[Value], OutIn),
            t("layers.{l}.self_attn.o_proj.weight", &[Output], OutIn),
            t("layers.{l}.mlp.gate_proj.weight", &[FfnGate], OutIn),
            t("layers.{l}.mlp.up_proj.weight", &[FfnIn], OutIn),
            t("layers.{l}.mlp.down_proj.weight", &[FfnOut], OutIn),
        ],
        config: HF_GQA,
        gguf: FactKeys::NONE,
        default_activation: Some("silu"),
        rotary: true,
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
];

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
                if t.roles
                    .iter()
                    .any(|r| matches!(r, Role::FfnIn | Role::FfnGate))
                {
                    assert_eq!(t.roles.len(), 1, "{}", t.name);
                }
            }
            if f.grouped_query() {
                assert_eq!(f.holder(Role::Key).unwrap().0.roles, &[Role::Key]);
            }
            assert!(!f.model_types.is_empty() || !f.gguf_architectures.is_empty());
            assert!(f.architectures.iter().all(|a| f.model_types.contains(a)));
            assert!(!f.config.heads.is_empty() || !f.gguf.heads.is_empty());
        }
        // Layout names are distinct, and so are the query tensor names.
        for (i, a) in FAMILIES.iter().enumerate() {
            for b in &FAMILIES[i + 1..] {
                assert_ne!(a.layout, b.layout);
                assert_ne!(a.anchor().name, b.anchor().name);
            }
        }
    }
}
