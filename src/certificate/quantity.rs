//! Every certified quantity of a certificate, named once: the iterator that
//! `verify`, `diff` and the reports walk instead of listing fields again.

use std::fmt;

use serde::Serialize;

use super::{CertInterval, Certificate, GridPoint, MatrixEntry, SpectrumEntry};
use crate::arch::MatrixId;

/// What a quantity belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Subject {
    /// One proxy matrix.
    Matrix(MatrixId),
    /// One layer (`alpha`, `xi`).
    Layer(usize),
    /// The whole model (the bounds).
    Model,
}

/// Which quantity of its subject.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Quantity {
    /// sigma_1.
    SpectralNorm,
    /// Frobenius norm.
    FrobeniusNorm,
    /// Nuclear norm.
    NuclearNorm,
    /// (2,1)-norm.
    Norm21,
    /// (1,1)-norm.
    Norm11,
    /// Stable rank (present only when certified).
    StableRank,
    /// Rank (integer bounds, as an interval).
    Rank,
    /// The i-th singular value, 0-based, structural zeros included.
    SingularValue(usize),
    /// `alpha^(l)`.
    Alpha,
    /// `gamma(W)`.
    Gamma,
    /// `gamma alpha L`.
    Scale,
    /// `c(W, p)` at a grid point.
    Contribution(GridPoint),
    /// `min_p c(W, p)`.
    MinContribution,
    /// `xi^(l)`.
    Xi,
    /// `B_ours`.
    BoundOurs,
    /// `B_Edel`.
    BoundEdelman,
}

impl Quantity {
    /// The quantity's name, as a certificate key (without index or p).
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Quantity::SpectralNorm => "spectral_norm",
            Quantity::FrobeniusNorm => "frobenius_norm",
            Quantity::NuclearNorm => "nuclear_norm",
            Quantity::Norm21 => "norm_21",
            Quantity::Norm11 => "norm_11",
            Quantity::StableRank => "stable_rank",
            Quantity::Rank => "rank",
            Quantity::SingularValue(_) => "singular_value",
            Quantity::Alpha => "alpha",
            Quantity::Gamma => "gamma",
            Quantity::Scale => "scale",
            Quantity::Contribution(_) => "contribution",
            Quantity::MinContribution => "min_contribution",
            Quantity::Xi => "xi",
            Quantity::BoundOurs => "ours",
            Quantity::BoundEdelman => "edelman",
        }
    }

    /// The index of a singular value (0-based).
    pub(crate) fn index(&self) -> Option<usize> {
        match self {
            Quantity::SingularValue(i) => Some(*i),
            _ => None,
        }
    }

    /// The grid point of a contribution.
    pub(crate) fn p(&self) -> Option<GridPoint> {
        match self {
            Quantity::Contribution(g) => Some(*g),
            _ => None,
        }
    }
}

/// One certified quantity: its subject, which quantity, and where it is in
/// the JSON (`$.matrices[3].singular_values[5]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct QuantityId {
    /// What it belongs to.
    pub subject: Subject,
    /// Which quantity.
    pub quantity: Quantity,
    /// JSON path in the certificate it came from.
    pub path: String,
}

impl QuantityId {
    /// The key that matches this quantity across certificates: subject and
    /// quantity, with a grid point reduced to lowest terms (so `2/12` of one
    /// grid matches `1/6` of another).
    pub(crate) fn key(&self) -> (Subject, Quantity) {
        let q = match self.quantity {
            Quantity::Contribution(g) => {
                let (k, m) = g.reduced();
                Quantity::Contribution(GridPoint { k, m })
            }
            q => q,
        };
        (self.subject, q)
    }
}

impl fmt::Display for QuantityId {
    /// `layer 0 head 3 QK spectral_norm`, `layer 0 M_in singular_value[5]`,
    /// `layer 0 M_out contribution p=3/12`, `layer 2 alpha`, `bound ours`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.subject {
            Subject::Matrix(id) => write!(f, "{id} ")?,
            Subject::Layer(l) => write!(f, "layer {l} ")?,
            Subject::Model => f.write_str("bound ")?,
        }
        match self.quantity {
            Quantity::SingularValue(i) => write!(f, "singular_value[{i}]"),
            Quantity::Contribution(g) => write!(f, "contribution p={g}"),
            q => f.write_str(q.name()),
        }
    }
}

/// The fields of a quantity as separate values, for JSON output.
#[derive(Clone, Debug, Serialize)]
pub struct QuantityFields {
    /// Layer (matrix and layer quantities).
    pub layer: Option<usize>,
    /// Head (per-head matrices).
    pub head: Option<usize>,
    /// Expert (feed-forward matrices of a mixture-of-experts layer): an
    /// index or `"shared"`; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expert: Option<crate::arch::Expert>,
    /// Matrix type (matrix quantities).
    #[serde(rename = "type")]
    pub kind: Option<&'static str>,
    /// Quantity name.
    pub quantity: &'static str,
    /// Singular-value index (0-based).
    pub index: Option<usize>,
    /// Grid point, as the exact fraction.
    pub p: Option<String>,
}

impl QuantityId {
    /// Layer, head, type, quantity, index and p as separate fields.
    pub(crate) fn fields(&self) -> QuantityFields {
        let (layer, head, kind) = match self.subject {
            Subject::Matrix(id) => (Some(id.layer), id.head, Some(id.kind.name())),
            Subject::Layer(l) => (Some(l), None, None),
            Subject::Model => (None, None, None),
        };
        let expert = match self.subject {
            Subject::Matrix(id) => id.expert,
            _ => None,
        };
        QuantityFields {
            layer,
            head,
            expert,
            kind,
            quantity: self.quantity.name(),
            index: self.quantity.index(),
            p: self.quantity.p().map(|g| g.to_string()),
        }
    }
}

/// A quantity of `subject` at key `key` of the entry at JSON path `at`.
fn keyed(
    subject: Subject,
    at: &str,
) -> impl Fn(Quantity, String, CertInterval) -> (QuantityId, CertInterval) + '_ {
    move |quantity, key, v| {
        (
            QuantityId {
                subject,
                quantity,
                path: format!("{at}.{key}"),
            },
            v,
        )
    }
}

/// The spectral quantities of one matrix (its entry's JSON path `at`), in
/// a fixed order: norms, stable rank, rank, every singular value
/// (structural zeros as `[0, 0]`).
pub(crate) fn spectrum_quantities(w: &SpectrumEntry, at: &str) -> Vec<(QuantityId, CertInterval)> {
    let q = keyed(Subject::Matrix(w.id()), at);
    let mut v = vec![
        q(
            Quantity::SpectralNorm,
            "spectral_norm".into(),
            w.spectral_norm,
        ),
        q(
            Quantity::FrobeniusNorm,
            "frobenius_norm".into(),
            w.frobenius_norm,
        ),
        q(Quantity::NuclearNorm, "nuclear_norm".into(), w.nuclear_norm),
        q(Quantity::Norm21, "norm_21".into(), w.norm_21),
        q(Quantity::Norm11, "norm_11".into(), w.norm_11),
    ];
    if let Some(sr) = w.stable_rank {
        v.push(q(Quantity::StableRank, "stable_rank".into(), sr));
    }
    v.push(q(
        Quantity::Rank,
        "rank".into(),
        CertInterval {
            lo: w.rank.lo as f64,
            hi: w.rank.hi as f64,
        },
    ));
    let nz = w.singular_values.len();
    for j in 0..w.rows.min(w.cols) {
        let (key, x) = if j < nz {
            (format!("singular_values[{j}]"), w.singular_values[j])
        } else {
            ("structural_zeros".to_string(), CertInterval::point(0.0))
        };
        v.push(q(Quantity::SingularValue(j), key, x));
    }
    v
}

/// The quantities of one matrix entry (at position `i` of the certificate),
/// in a fixed order: its [`spectrum_quantities`], then the proxies.
pub(crate) fn matrix_quantities(w: &MatrixEntry, i: usize) -> Vec<(QuantityId, CertInterval)> {
    let at = format!("$.matrices[{i}]");
    let mut v = spectrum_quantities(&w.spectrum(), &at);
    let q = keyed(Subject::Matrix(w.id()), &at);
    v.push(q(Quantity::Alpha, "alpha".into(), w.alpha));
    v.push(q(Quantity::Gamma, "gamma".into(), w.gamma));
    v.push(q(Quantity::Scale, "scale".into(), w.scale));
    for (k, c) in w.contributions.iter().enumerate() {
        v.push(q(
            Quantity::Contribution(c.p_fraction),
            format!("contributions[{k}].value"),
            c.value,
        ));
    }
    v.push(q(
        Quantity::MinContribution,
        "min_contribution".into(),
        w.min_contribution,
    ));
    v
}

impl Certificate {
    /// Every certified quantity with its interval, each exactly once: the
    /// matrices in order ([`matrix_quantities`]), the spectra of a
    /// certificate without a bound ([`spectrum_quantities`]), then `alpha`
    /// and `xi` of every layer, then the two bounds when stated. Ranks appear as integer intervals.
    pub(crate) fn quantities(&self) -> impl Iterator<Item = (QuantityId, CertInterval)> + '_ {
        let mats = self
            .matrices
            .iter()
            .enumerate()
            .flat_map(|(i, w)| matrix_quantities(w, i));
        let layers = self.layers.iter().enumerate().flat_map(|(l, x)| {
            [
                (
                    QuantityId {
                        subject: Subject::Layer(l),
                        quantity: Quantity::Alpha,
                        path: format!("$.layers[{l}].alpha"),
                    },
                    x.alpha,
                ),
                (
                    QuantityId {
                        subject: Subject::Layer(l),
                        quantity: Quantity::Xi,
                        path: format!("$.layers[{l}].xi"),
                    },
                    x.xi,
                ),
            ]
        });
        let spectra = self
            .spectra
            .iter()
            .flatten()
            .enumerate()
            .flat_map(|(i, w)| spectrum_quantities(w, &format!("$.spectra[{i}]")));
        let bounds = self.bounds.iter().flat_map(|b| {
            [
                (
                    QuantityId {
                        subject: Subject::Model,
                        quantity: Quantity::BoundOurs,
                        path: "$.bounds.ours".into(),
                    },
                    b.ours,
                ),
                (
                    QuantityId {
                        subject: Subject::Model,
                        quantity: Quantity::BoundEdelman,
                        path: "$.bounds.edelman".into(),
                    },
                    b.edelman,
                ),
            ]
        });
        mats.chain(spectra).chain(layers).chain(bounds)
    }
}
