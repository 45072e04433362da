//! Which proxy matrix: the key every stage after extraction uses.

use std::fmt;

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

impl fmt::Display for MatrixType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl MatrixType {
    /// Whether matrices of this family belong to one attention head
    /// (`QK`, `V_tilde`) rather than to the whole layer (`M_in`, `M_out`).
    pub fn per_head(self) -> bool {
        matches!(self, MatrixType::QK | MatrixType::VTilde)
    }
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
                f.write_str("a matrix type (QK, V_tilde, M_in, M_out)")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<MatrixType, E> {
                MatrixType::parse(s).ok_or_else(|| {
                    let shown: String = s.chars().take(40).collect();
                    E::custom(format!(
                        "unknown matrix type \"{shown}\" (QK, V_tilde, M_in, M_out)"
                    ))
                })
            }
        }
        d.deserialize_str(V)
    }
}

/// One proxy matrix of a model: layer, head (per-head families only) and
/// family. Ordered as certificates list matrices: by layer, then family
/// (`QK`, `V_tilde`, `M_in`, `M_out`), then head.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatrixId {
    /// Layer from 0.
    pub layer: usize,
    /// Attention head for `QK` and `V_tilde`; `None` for `M_in` and `M_out`.
    pub head: Option<usize>,
    /// Family.
    pub kind: MatrixType,
}

impl MatrixId {
    /// A per-head matrix.
    pub fn head(layer: usize, head: usize, kind: MatrixType) -> Self {
        Self {
            layer,
            head: Some(head),
            kind,
        }
    }

    /// A layer matrix (`M_in`, `M_out`).
    pub fn layer(layer: usize, kind: MatrixType) -> Self {
        Self {
            layer,
            head: None,
            kind,
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

    fn sort_key(&self) -> (usize, MatrixType, Option<usize>) {
        (self.layer, self.kind, self.head)
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
    /// `layer L head H TYPE`, or `layer L TYPE` for layer matrices.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.head {
            Some(h) => write!(f, "layer {} head {h} {}", self.layer, self.kind),
            None => write!(f, "layer {} {}", self.layer, self.kind),
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
