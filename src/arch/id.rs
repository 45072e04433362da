//! Which proxy matrix: the key every stage after extraction uses.

use std::fmt;

/// The proxy matrix families: the paper's four, and the two of a decoder
/// block's cross-attention. Ordered as a block applies them (so as
/// certificates list a layer's matrices): self-attention, cross-attention,
/// feed-forward.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MatrixType {
    /// Query-key product of one head.
    QK,
    /// Value-output product of one head.
    VTilde,
    /// Query-key product `Q_c,h^T K_c,h` of one head of a decoder block's
    /// cross-attention (its own query and key weights; keys read the
    /// encoder's output). Not one of the paper's matrices: no bound uses it.
    QKCross,
    /// Value-output product `V_c,h^T O_c,h` of one head of a decoder
    /// block's cross-attention. Not one of the paper's matrices: no bound
    /// uses it.
    VTildeCross,
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
            MatrixType::QKCross => "QK_cross",
            MatrixType::VTildeCross => "V_tilde_cross",
            MatrixType::MIn => "M_in",
            MatrixType::MOut => "M_out",
        }
    }

    /// Parses a name written by [`MatrixType::name`].
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "QK" => Some(MatrixType::QK),
            "V_tilde" => Some(MatrixType::VTilde),
            "QK_cross" => Some(MatrixType::QKCross),
            "V_tilde_cross" => Some(MatrixType::VTildeCross),
            "M_in" => Some(MatrixType::MIn),
            "M_out" => Some(MatrixType::MOut),
            _ => None,
        }
    }
}

impl fmt::Display for MatrixType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl MatrixType {
    /// Whether matrices of this family belong to one attention head
    /// (`QK`, `V_tilde`, `QK_cross`, `V_tilde_cross`) rather than to the
    /// whole layer (`M_in`, `M_out`).
    pub(crate) fn per_head(self) -> bool {
        matches!(
            self,
            MatrixType::QK | MatrixType::VTilde | MatrixType::QKCross | MatrixType::VTildeCross
        )
    }

    /// Whether this family belongs to a decoder block's cross-attention
    /// (`QK_cross`, `V_tilde_cross`).
    #[cfg(test)]
    pub(crate) fn cross(self) -> bool {
        matches!(self, MatrixType::QKCross | MatrixType::VTildeCross)
    }

    /// Every family, in certificate order.
    pub(crate) const ALL: [MatrixType; 6] = [
        MatrixType::QK,
        MatrixType::VTilde,
        MatrixType::QKCross,
        MatrixType::VTildeCross,
        MatrixType::MIn,
        MatrixType::MOut,
    ];

    /// The names of every family, for messages.
    pub(crate) const NAMES: &'static str = "QK, V_tilde, QK_cross, V_tilde_cross, M_in, M_out";
}

impl serde::Serialize for MatrixType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for MatrixType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = MatrixType;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a matrix type ({})", MatrixType::NAMES)
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<MatrixType, E> {
                MatrixType::parse(s).ok_or_else(|| {
                    let shown: String = s.chars().take(40).collect();
                    E::custom(format!(
                        "unknown matrix type \"{shown}\" ({})",
                        MatrixType::NAMES
                    ))
                })
            }
        }
        d.deserialize_str(V)
    }
}

/// Which feed-forward block of a mixture-of-experts layer a matrix belongs
/// to (`M_in`, `M_out` only). Ordered routed experts by index, then the
/// shared expert.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Expert {
    /// Routed expert `e` (from 0): `experts.{e}` of the checkpoint.
    Routed(usize),
    /// The shared expert that every token passes (Qwen2-MoE `shared_expert`).
    Shared,
}

impl fmt::Display for Expert {
    /// `expert E`, or `shared expert`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expert::Routed(e) => write!(f, "expert {e}"),
            Expert::Shared => f.write_str("shared expert"),
        }
    }
}

/// The largest number of routed experts per layer a certificate may state
/// (and a config may give: `num_local_experts`, `num_experts`,
/// `n_routed_experts`); `num_experts_per_tok` is at most the experts.
pub(crate) const MAX_EXPERTS: usize = 1 << 16;

/// The largest number of blocks a model may have: `num_hidden_layers`
/// (and `--layers`, `layers=`), and a shared-layer model's depths times
/// `inner_group_num`; also the cap on `num_hidden_groups` and
/// `inner_group_num` themselves. The deepest public models have about 130
/// layers; the cap is checked before any per-layer list is built, so a
/// count that drives work without tensors behind it (ALBERT's shared
/// layers) cannot ask for millions of layers.
pub(crate) const MAX_LAYERS: usize = 1 << 12;

/// The largest number of attention heads, and of key/value heads, a config
/// may give (`num_attention_heads`, `num_key_value_heads`, `--heads`): real
/// models have at most a few hundred.
pub(crate) const MAX_HEADS: usize = 1 << 16;

impl serde::Serialize for Expert {
    /// A routed expert as its index, the shared expert as `"shared"`.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Expert::Routed(e) => s.serialize_u64(*e as u64),
            Expert::Shared => s.serialize_str("shared"),
        }
    }
}

impl<'de> serde::Deserialize<'de> for Expert {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Expert;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "an expert index below {MAX_EXPERTS} or \"shared\"")
            }
            fn visit_u64<E: serde::de::Error>(self, e: u64) -> Result<Expert, E> {
                if e < MAX_EXPERTS as u64 {
                    Ok(Expert::Routed(e as usize))
                } else {
                    Err(E::custom(format!(
                        "expert index {e} exceeds the limit {MAX_EXPERTS}"
                    )))
                }
            }
            fn visit_i64<E: serde::de::Error>(self, e: i64) -> Result<Expert, E> {
                u64::try_from(e)
                    .map_err(|_| E::custom(format!("expert index {e} is negative")))
                    .and_then(|e| self.visit_u64(e))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Expert, E> {
                match s {
                    "shared" => Ok(Expert::Shared),
                    _ => {
                        let shown: String =
                            s.chars().take(40).flat_map(char::escape_default).collect();
                        Err(E::custom(format!(
                            "unknown expert \"{shown}\" (an index or \"shared\")"
                        )))
                    }
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// The feed-forward of one layer, for the list of its proxy matrices: a
/// dense layer (`experts == 0`, no shared expert) has one `M_in` and one
/// `M_out`; a mixture-of-experts layer has one of each per routed expert,
/// and one more for the shared expert when it has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayerFfn {
    /// Routed experts (0: a dense feed-forward).
    pub experts: usize,
    /// Whether the layer has a shared expert.
    pub shared: bool,
}

impl LayerFfn {
    /// A dense feed-forward.
    pub(crate) const DENSE: LayerFfn = LayerFfn {
        experts: 0,
        shared: false,
    };

    /// The feed-forward blocks in certificate order: `None` for a dense
    /// layer, else the routed experts then the shared one.
    pub(crate) fn blocks(&self) -> Vec<Option<Expert>> {
        if *self == Self::DENSE {
            return vec![None];
        }
        (0..self.experts)
            .map(|e| Some(Expert::Routed(e)))
            .chain(self.shared.then_some(Some(Expert::Shared)))
            .collect()
    }

    /// The proxy matrices of layer `l` with `heads` heads and this
    /// feed-forward, in certificate order (`QK` heads, `V_tilde` heads,
    /// with `cross` the `QK_cross` heads and `V_tilde_cross` heads of a
    /// decoder block's cross-attention, then `M_in` per block, `M_out` per
    /// block).
    pub(crate) fn ids(&self, l: usize, heads: usize, cross: bool) -> Vec<MatrixId> {
        let mut v = Vec::new();
        let attention: &[MatrixType] = if cross {
            &[
                MatrixType::QK,
                MatrixType::VTilde,
                MatrixType::QKCross,
                MatrixType::VTildeCross,
            ]
        } else {
            &[MatrixType::QK, MatrixType::VTilde]
        };
        for &kind in attention {
            v.extend((0..heads).map(|h| MatrixId::head(l, h, kind)));
        }
        for kind in [MatrixType::MIn, MatrixType::MOut] {
            v.extend(self.blocks().into_iter().map(|e| MatrixId {
                expert: e,
                ..MatrixId::layer(l, kind)
            }));
        }
        v
    }
}

/// One proxy matrix of a model: layer, head (per-head families only),
/// expert (feed-forward matrices of a mixture-of-experts layer only) and
/// family. Ordered as certificates list matrices: by layer, then family
/// (`QK`, `V_tilde`, `QK_cross`, `V_tilde_cross`, `M_in`, `M_out`), then
/// expert, then head.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatrixId {
    /// Layer from 0.
    pub layer: usize,
    /// Attention head of a per-head family; `None` for `M_in` and `M_out`.
    pub head: Option<usize>,
    /// Family.
    pub kind: MatrixType,
    /// The expert of an `M_in` or `M_out` of a mixture-of-experts layer;
    /// `None` for a dense feed-forward and for attention matrices.
    pub expert: Option<Expert>,
}

impl MatrixId {
    /// A per-head matrix.
    pub fn head(layer: usize, head: usize, kind: MatrixType) -> Self {
        Self {
            layer,
            head: Some(head),
            kind,
            expert: None,
        }
    }

    /// A layer matrix (`M_in`, `M_out`).
    pub(crate) fn layer(layer: usize, kind: MatrixType) -> Self {
        Self {
            layer,
            head: None,
            kind,
            expert: None,
        }
    }

    /// The head as the authors' tables write it: `-1` for layer matrices.
    pub fn head_column(&self) -> i64 {
        self.head.map_or(-1, |h| h as i64)
    }

    /// Builds an id from the authors' table convention (`head = -1` for
    /// layer matrices); `None` when the head does not fit the family.
    pub fn from_columns(layer: usize, head: i64, kind: MatrixType) -> Option<Self> {
        match (kind.per_head(), head) {
            (true, h) if h >= 0 => Some(Self::head(layer, h as usize, kind)),
            (false, -1) => Some(Self::layer(layer, kind)),
            _ => None,
        }
    }

    fn sort_key(&self) -> (usize, MatrixType, Option<Expert>, Option<usize>) {
        (self.layer, self.kind, self.expert, self.head)
    }
}

impl PartialOrd for MatrixId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for MatrixId {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.sort_key().cmp(&other.sort_key())
    }
}

impl fmt::Display for MatrixId {
    /// `layer L head H TYPE`, `layer L TYPE` for layer matrices, `layer L
    /// expert E TYPE` or `layer L shared expert TYPE` for experts.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.head, self.expert) {
            (Some(h), _) => write!(f, "layer {} head {h} {}", self.layer, self.kind),
            (None, Some(e)) => write!(f, "layer {} {e} {}", self.layer, self.kind),
            (None, None) => write!(f, "layer {} {}", self.layer, self.kind),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_layer_family_head() {
        let mut v = [
            MatrixId::layer(1, MatrixType::MIn),
            MatrixId::head(0, 1, MatrixType::VTilde),
            MatrixId::layer(0, MatrixType::MOut),
            MatrixId::head(0, 0, MatrixType::VTilde),
            MatrixId::head(0, 1, MatrixType::QK),
            MatrixId::layer(0, MatrixType::MIn),
        ];
        v.sort();
        let labels: Vec<String> = v.iter().map(ToString::to_string).collect();
        assert_eq!(
            labels,
            [
                "layer 0 head 1 QK",
                "layer 0 head 0 V_tilde",
                "layer 0 head 1 V_tilde",
                "layer 0 M_in",
                "layer 0 M_out",
                "layer 1 M_in"
            ]
        );
    }

    #[test]
    fn experts_follow_the_layer_matrix_routed_then_shared() {
        let ffn = LayerFfn {
            experts: 2,
            shared: true,
        };
        let labels: Vec<String> = ffn
            .ids(0, 1, false)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            labels,
            [
                "layer 0 head 0 QK",
                "layer 0 head 0 V_tilde",
                "layer 0 expert 0 M_in",
                "layer 0 expert 1 M_in",
                "layer 0 shared expert M_in",
                "layer 0 expert 0 M_out",
                "layer 0 expert 1 M_out",
                "layer 0 shared expert M_out"
            ]
        );
        let mut sorted = ffn.ids(0, 1, false);
        sorted.reverse();
        sorted.sort();
        assert_eq!(sorted, ffn.ids(0, 1, false));
        assert_eq!(
            LayerFfn::DENSE.ids(3, 0, false),
            [
                MatrixId::layer(3, MatrixType::MIn),
                MatrixId::layer(3, MatrixType::MOut)
            ]
        );
    }

    /// A decoder block's cross-attention heads come between its
    /// self-attention heads and its feed-forward, in the order `Ord` sorts
    /// them; every name parses back to its family.
    #[test]
    fn cross_attention_follows_self_attention_and_names_round_trip() {
        let labels: Vec<String> = LayerFfn::DENSE
            .ids(1, 2, true)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            labels,
            [
                "layer 1 head 0 QK",
                "layer 1 head 1 QK",
                "layer 1 head 0 V_tilde",
                "layer 1 head 1 V_tilde",
                "layer 1 head 0 QK_cross",
                "layer 1 head 1 QK_cross",
                "layer 1 head 0 V_tilde_cross",
                "layer 1 head 1 V_tilde_cross",
                "layer 1 M_in",
                "layer 1 M_out"
            ]
        );
        let mut sorted = LayerFfn::DENSE.ids(1, 2, true);
        sorted.reverse();
        sorted.sort();
        assert_eq!(sorted, LayerFfn::DENSE.ids(1, 2, true));
        for kind in MatrixType::ALL {
            assert_eq!(MatrixType::parse(kind.name()), Some(kind));
            assert!(MatrixType::NAMES.contains(kind.name()));
            assert_eq!(kind.cross(), kind.name().ends_with("_cross"));
        }
        assert_eq!(MatrixType::parse("QK_Cross"), None);
    }

    #[test]
    fn head_column_round_trips_and_rejects_mismatches() {
        for id in [
            MatrixId::head(2, 3, MatrixType::QK),
            MatrixId::layer(2, MatrixType::MOut),
        ] {
            assert_eq!(
                MatrixId::from_columns(id.layer, id.head_column(), id.kind),
                Some(id)
            );
        }
        assert_eq!(MatrixId::from_columns(0, -1, MatrixType::QK), None);
        assert_eq!(MatrixId::from_columns(0, 0, MatrixType::MIn), None);
        assert_eq!(MatrixId::from_columns(0, -2, MatrixType::VTilde), None);
    }
}
