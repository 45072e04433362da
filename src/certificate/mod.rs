//! The certificate: one typed value that `certify` produces and that every
//! later command (`verify`, `diff`, `audit`, the CSV tables, the text
//! summary) reads. Its JSON form is derived from the type (serde), never
//! built by hand; the format is documented in `docs/certificate.md` and
//! `docs/certificate.schema.json`.
//!
//! Intervals in a certificate are [`CertInterval`]s: certified enclosures
//! when this tool has just produced them, *claims* when read from a file
//! until `verify` has confirmed them. Reading an untrusted file is
//! [`Certificate::read`] (or [`Certificate::parse`]): a capped read, a
//! strict parse (unknown keys, duplicate keys, wrong types and oversized
//! arrays are errors naming the JSON path) and `Certificate::validate`
//! (finite `lo <= hi`, counts and grid consistent, every matrix present
//! exactly once).

/// Declares a struct whose first fields are the fifteen spectral keys of a
/// matrix entry (declared here once: [`SpectrumEntry`] has only them,
/// [`MatrixEntry`] adds the proxies after them, so both serialise the same
/// keys in the same order), with `id()`, `spectral_fields()` (what
/// validation reads) and `spectrum()`.
macro_rules! with_spectrum_fields {
    (
        $(#[$meta:meta])*
        pub struct $name:ident { $($(#[$fmeta:meta])* pub $field:ident: $ty:ty,)* }
    ) => {
        $(#[$meta])*
        pub struct $name {
        /// Layer from 0.
        pub layer: usize,
        /// Head of a per-head matrix; written `-1` for layer matrices.
        #[serde(with = "read::head_column")]
        pub head: Option<usize>,
        /// The expert of a mixture-of-experts `M_in` or `M_out`: its index,
        /// or `"shared"`; absent for every other matrix (and in certificates
        /// written before the key).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub expert: Option<$crate::arch::Expert>,
        /// Family.
        #[serde(rename = "type")]
        pub kind: MatrixType,
        /// Rows.
        pub rows: usize,
        /// Columns.
        pub cols: usize,
        /// Encloses sigma_1.
        pub spectral_norm: CertInterval,
        /// Encloses the Frobenius norm.
        pub frobenius_norm: CertInterval,
        /// Encloses the nuclear norm.
        pub nuclear_norm: CertInterval,
        /// Encloses the (2,1)-norm (sum of column 2-norms).
        pub norm_21: CertInterval,
        /// Encloses the (1,1)-norm.
        pub norm_11: CertInterval,
        /// Encloses the stable rank; `None` when sigma_1 > 0 was not certified.
        pub stable_rank: Option<CertInterval>,
        /// Bounds of the exact rank.
        pub rank: CertInterval<u64>,
        /// Nonzero part of the spectrum, largest first, index-matched.
        #[serde(deserialize_with = "read::vec_max::<_, _, { read::MAX_DIM }>")]
        pub singular_values: Vec<CertInterval>,
        /// How many further singular values are exactly zero.
        pub structural_zeros: usize,
        /// Methods that certified the values, and notes on stages that failed.
        #[serde(deserialize_with = "read::vec_max::<_, _, 64>")]
        pub method: Vec<String>,
            $($(#[$fmeta])* pub $field: $ty,)*
        }

        impl $name {
            /// Which matrix this is.
            pub fn id(&self) -> $crate::arch::MatrixId {
                $crate::arch::MatrixId {
                    layer: self.layer,
                    head: self.head,
                    kind: self.kind,
                    expert: self.expert,
                }
            }

            /// The certified spectral quantities alone: what a part holds of
            /// this matrix (the proxies are computed from them).
            pub fn spectrum(&self) -> $crate::certificate::SpectrumEntry {
                $crate::certificate::SpectrumEntry {
                    layer: self.layer,
                    head: self.head,
                    expert: self.expert,
                    kind: self.kind,
                    rows: self.rows,
                    cols: self.cols,
                    spectral_norm: self.spectral_norm,
                    frobenius_norm: self.frobenius_norm,
                    nuclear_norm: self.nuclear_norm,
                    norm_21: self.norm_21,
                    norm_11: self.norm_11,
                    stable_rank: self.stable_rank,
                    rank: self.rank,
                    singular_values: self.singular_values.clone(),
                    structural_zeros: self.structural_zeros,
                    method: self.method.clone(),
                }
            }

            /// This entry's spectral keys, as validation reads them.
            #[allow(dead_code)]
            pub(crate) fn spectral_fields(&self) -> read::SpectralFields<'_> {
                read::SpectralFields {
                    kind: self.kind,
                    head: self.head,
                    expert: self.expert,
                    rows: self.rows,
                    cols: self.cols,
                    norms: [
                        ("spectral_norm", &self.spectral_norm),
                        ("frobenius_norm", &self.frobenius_norm),
                        ("nuclear_norm", &self.nuclear_norm),
                        ("norm_21", &self.norm_21),
                        ("norm_11", &self.norm_11),
                    ],
                    stable_rank: self.stable_rank.as_ref(),
                    singular_values: &self.singular_values,
                    structural_zeros: self.structural_zeros,
                    rank: self.rank,
                }
            }
        }
    };
}
pub(crate) use with_spectrum_fields;

mod part;
mod quantity;
mod read;

use serde::{Deserialize, Serialize};

pub(crate) use part::HeaderDifference;
pub use part::{Header, Part, ShardSpec, SpectrumEntry};
pub(crate) use quantity::{spectrum_quantities, Quantity, QuantityFields, QuantityId, Subject};
pub use read::{CertificateError, MAX_GRID_M};

use crate::arch::{MatrixId, MatrixType};
pub use crate::enclosure::CertInterval;
use crate::linalg::Precision;

/// Certificate format name.
pub(crate) const FORMAT: &str = "specbound-certificate";
/// Certificate format version.
pub(crate) const VERSION: u32 = 1;
/// Certificate format version of a certificate with the measures section:
/// version 1 plus the keys `init_model`, `raw_weights` and `measures`
/// (`docs/measures.md`). A certificate without measures is still written as
/// version 1, and version-1 certificates are read and verified unchanged.
pub(crate) const VERSION_MEASURES: u32 = 2;
/// Certificate format version of a certificate **without a bound**: the
/// family's block is outside the paper's reasoning (QK-norm, ...), so the
/// certificate states the certified spectra and norms of every proxy matrix
/// in `spectra`, the reason in `bound_absent`, and no `bounds` (its
/// `matrices` and `layers`, which hold the bound's proxies, are empty). The
/// measures section may accompany it. Certificates of versions 1 and 2 are
/// read and verified unchanged (`docs/certificate.md`, "Certificates
/// without a bound").
pub(crate) const VERSION_NO_BOUND: u32 = 3;

/// A point `k/m` of the grid `P_m = {0, 1/m, ..., 2}`, written `"k/m"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GridPoint {
    /// Numerator.
    pub k: usize,
    /// Denominator (the grid resolution m).
    pub m: usize,
}

impl GridPoint {
    /// The nearest f64 to `k/m` (for display; the exact value is the fraction).
    pub(crate) fn approx(&self) -> f64 {
        self.k as f64 / self.m as f64
    }

    /// The fraction in lowest terms (for matching points of different grids).
    pub(crate) fn reduced(&self) -> (usize, usize) {
        let g = gcd(self.k, self.m).max(1);
        (self.k / g, self.m / g)
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl std::fmt::Display for GridPoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.k, self.m)
    }
}

impl std::str::FromStr for GridPoint {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (k, m) = s
            .split_once('/')
            .ok_or_else(|| format!("expected \"k/m\", found \"{s}\""))?;
        let digits =
            |t: &str| !t.is_empty() && t.len() <= 12 && t.bytes().all(|b| b.is_ascii_digit());
        if !(digits(k) && digits(m)) {
            return Err(format!(
                "expected \"k/m\" with decimal integers, found \"{s}\""
            ));
        }
        Ok(GridPoint {
            k: k.parse().map_err(|_| format!("bad numerator in \"{s}\""))?,
            m: m.parse()
                .map_err(|_| format!("bad denominator in \"{s}\""))?,
        })
    }
}

impl Serialize for GridPoint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for GridPoint {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = read::BoundedStr::<32>::deserialize(d)?;
        s.0.parse().map_err(serde::de::Error::custom)
    }
}

/// The program that wrote the certificate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tool {
    /// `specbound`.
    pub name: String,
    /// Its version.
    pub version: String,
    /// Where the bulk products and the approximate eigensolver ran
    /// (`linalg::backend`), when not on the CPU: `cuda:0 NVIDIA H200`, for
    /// example. The certification itself always runs on the CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
}

/// One weight file read, with its SHA-256.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileEntry {
    /// File name relative to the model directory.
    pub file: String,
    /// Lower-case hex SHA-256 of the whole file.
    pub sha256: String,
}

/// The model a certificate describes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelInfo {
    /// As given on the command line (informative).
    pub path: String,
    /// Every weight file read.
    #[serde(deserialize_with = "read::vec_max::<_, _, 100_000>")]
    pub files: Vec<FileEntry>,
    /// Family (`bert`, `gpt2`, `llama`, ...).
    pub architecture: String,
    /// Tensor-name prefix.
    pub tensor_prefix: String,
    /// Layers L.
    pub layers: usize,
    /// Hidden size N.
    pub hidden: usize,
    /// Attention heads H.
    pub heads: usize,
    /// Key/value heads.
    pub kv_heads: usize,
    /// Head dimension.
    pub head_dim: usize,
    /// Feed-forward width.
    pub intermediate: usize,
    /// The feed-forward of each layer of a mixture-of-experts model (routed
    /// experts, 0 for a dense layer, and whether it has a shared expert):
    /// which `M_in`/`M_out` the certificate holds. Absent for a model
    /// without experts (and in certificates written before the key).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "read::opt_vec_max::<_, _, { read::MAX_LAYERS }>"
    )]
    pub experts: Option<Vec<crate::arch::LayerFfn>>,
    /// Whether every block is a decoder block with a cross-attention (T5,
    /// BART, Whisper decoders): the certificate then holds its `QK_cross`
    /// and `V_tilde_cross` heads in every layer. Written only when true, so
    /// that a certificate without one (every one written before the key)
    /// reads and hashes unchanged.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cross_attention: bool,
}

/// Parameters that change a number of the certificate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Parameters {
    /// `L_phi` as an exact decimal.
    pub l_phi: String,
    /// Grid resolution m.
    pub grid_m: usize,
    /// The grid `0/m, ..., 2m/m`.
    #[serde(deserialize_with = "read::vec_max::<_, _, { 2 * read::MAX_GRID_M + 1 }>")]
    pub grid: Vec<GridPoint>,
    /// N used in the formulas.
    pub n: usize,
    /// L used in the formulas.
    pub depth: usize,
    /// Singular-value method.
    pub precision: Precision,
    /// Statement that ranks are exact ranks.
    pub rank: String,
    /// The heads given by `--heads` and what they replaced; absent when the
    /// heads are the file's (and in certificates written before the key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heads_override: Option<HeadsOverrideEntry>,
    /// The stack certified, for a model of several stacks (an encoder and a
    /// decoder, a text and a vision tower); absent for a model of one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<StackEntry>,
}

/// `parameters.stack`: which stack of blocks of a model of several the
/// certificate is about, and how it was chosen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StackEntry {
    /// The stack (`encoder`, `decoder`, `text`, `vision`).
    pub name: String,
    /// Every stack of the model type, in the table's order.
    pub stacks: Vec<String>,
    /// Named by `--stack` (`true`), or the first stack the files hold.
    pub by_flag: bool,
}

/// `parameters.heads_override`: the number of heads came from `--heads`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeadsOverrideEntry {
    /// The heads given (equal to `model.heads`).
    pub heads: usize,
    /// The heads the file states (config.json or GGUF metadata), or `null`
    /// when it states none.
    pub replaced: Option<usize>,
    /// Where the file states them (`'num_attention_heads' in config.json`),
    /// or `null`.
    pub source: Option<String>,
}

impl HeadsOverrideEntry {
    /// The notice for stderr when the flag changed the file's number:
    /// `None` when the file states none or the same number.
    pub(crate) fn notice(&self) -> Option<String> {
        match (self.replaced, &self.source) {
            (Some(r), Some(src)) if r != self.heads => Some(format!(
                "--heads {} overrides the {r} heads of {src}; the certificate records it \
                 (parameters.heads_override)",
                self.heads,
                src = crate::io::escape(src)
            )),
            _ => None,
        }
    }
}

/// The value of `c(W, p)` at one grid point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Contribution {
    /// The nearest f64 to the grid point (approximate).
    pub p: f64,
    /// The exact grid point.
    pub p_fraction: GridPoint,
    /// Encloses `c(W, p)`.
    pub value: CertInterval,
}

with_spectrum_fields! {
    /// Everything certified about one proxy matrix: the spectral keys of
    /// [`SpectrumEntry`], then the proxies computed from them.
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct MatrixEntry {
        /// Encloses `alpha^(l)` of the matrix's layer.
        pub alpha: CertInterval,
        /// Encloses `gamma(W)`.
        pub gamma: CertInterval,
        /// Encloses `gamma alpha L`.
        pub scale: CertInterval,
        /// `c(W, p)` at every grid point, in grid order.
        #[serde(deserialize_with = "read::vec_max::<_, _, { 2 * read::MAX_GRID_M + 1 }>")]
        pub contributions: Vec<Contribution>,
        /// Approximate values of `p_opt_fraction`.
        #[serde(deserialize_with = "read::vec_max::<_, _, { 2 * read::MAX_GRID_M + 1 }>")]
        pub p_opt: Vec<f64>,
        /// Every grid point the enclosures allow as a minimiser of `c(W, .)`.
        #[serde(deserialize_with = "read::vec_max::<_, _, { 2 * read::MAX_GRID_M + 1 }>")]
        pub p_opt_fraction: Vec<GridPoint>,
        /// Encloses `min_p c(W, p)`.
        pub min_contribution: CertInterval,
    }
}

impl MatrixEntry {
    /// `min(rows, cols)`: the number of singular values.
    pub fn min_dim(&self) -> usize {
        self.rows.min(self.cols)
    }

    /// The i-th singular value (0-based), counting the structural zeros.
    pub fn singular_value(&self, i: usize) -> Option<CertInterval> {
        if i < self.singular_values.len() {
            Some(self.singular_values[i])
        } else if i < self.min_dim() {
            Some(CertInterval::point(0.0))
        } else {
            None
        }
    }

    /// The contribution at grid point `p` (exact match of the fraction).
    pub fn contribution_at(&self, p: GridPoint) -> Option<CertInterval> {
        self.contributions
            .iter()
            .find(|c| c.p_fraction == p)
            .map(|c| c.value)
    }
}

/// `alpha^(l)` and `xi^(l)` of one layer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayerEntry {
    /// Layer from 0.
    pub layer: usize,
    /// Encloses `alpha^(l)`.
    pub alpha: CertInterval,
    /// Encloses `xi^(l)`.
    pub xi: CertInterval,
}

/// The two bounds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoundsEntry {
    /// Encloses `B_ours`.
    pub ours: CertInterval,
    /// Encloses `B_Edel`.
    pub edelman: CertInterval,
}

/// A whole certificate (see the module documentation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Certificate {
    /// `FORMAT`.
    pub format: String,
    /// `VERSION`, or `VERSION_MEASURES` with the measures section.
    pub version: u32,
    /// The program that wrote it.
    pub tool: Tool,
    /// The model.
    pub model: ModelInfo,
    /// The parameters.
    pub parameters: Parameters,
    /// One entry per proxy matrix, ordered by [`MatrixId`].
    #[serde(deserialize_with = "read::vec_max::<_, _, { read::MAX_MATRICES }>")]
    pub matrices: Vec<MatrixEntry>,
    /// One entry per layer.
    #[serde(deserialize_with = "read::vec_max::<_, _, { read::MAX_LAYERS }>")]
    pub layers: Vec<LayerEntry>,
    /// The bounds; absent exactly in a certificate without a bound
    /// (`VERSION_NO_BOUND`), which says why in [`Certificate::bound_absent`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bounds: Option<BoundsEntry>,
    /// Why the paper's reasoning gives no bound for this model (its
    /// family's reason, `docs/architectures.md`); present exactly when
    /// `bounds` is absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_absent: Option<String>,
    /// The certified spectral quantities of every proxy matrix, in
    /// [`MatrixId`] order, in a certificate without a bound (whose
    /// `matrices` are empty); absent otherwise.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "read::opt_vec_max::<_, _, { read::MAX_MATRICES }>"
    )]
    pub spectra: Option<Vec<SpectrumEntry>>,
    /// Where the proxies go beyond the paper's setting.
    #[serde(deserialize_with = "read::vec_max::<_, _, 64>")]
    pub extensions: Vec<String>,
    /// The initialisation the distance measures are taken from (`certify
    /// --init`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_model: Option<InitModel>,
    /// Certified norms of the raw weight matrices of the blocks, in layer
    /// then role order; absent in a certificate without measures
    /// (certificates of version 1 before the measures are read unchanged).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "read::opt_vec_max::<_, _, { read::MAX_MATRICES }>"
    )]
    pub raw_weights: Option<Vec<RawWeightEntry>>,
    /// The norm-based measures computed from [`Certificate::raw_weights`]
    /// (`docs/measures.md`); present exactly when they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measures: Option<MeasuresEntry>,
}

/// The initialisation of `certify --init`: where it was read, and the
/// hashes of its weight files.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InitModel {
    /// As given on the command line (informative).
    pub path: String,
    /// Every weight file read.
    #[serde(deserialize_with = "read::vec_max::<_, _, 100_000>")]
    pub files: Vec<FileEntry>,
}

/// Certified norms of one matrix as a map `x -> A x` (torch's `[out, in]`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NormsEntry {
    /// Encloses `||A||_2`.
    pub spectral_norm: CertInterval,
    /// Encloses `||A||_F`.
    pub frobenius_norm: CertInterval,
    /// Encloses `||A^T||_{2,1}`: the sum of the l2 norms of `A`'s rows.
    pub norm_21_rows: CertInterval,
}

/// One raw weight matrix `W` of a block and its certified norms.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWeightEntry {
    /// Layer from 0.
    pub layer: usize,
    /// `query`, `key`, `value`, `output`, `ffn_gate`, `ffn_in` or `ffn_out`.
    pub role: String,
    /// How `W` is formed from the stored tensor (`name[rows, cols]^T`).
    pub tensor: String,
    /// Rows of `W` (output width).
    pub rows: usize,
    /// Columns of `W` (input width).
    pub cols: usize,
    /// Encloses `||W||_2`.
    pub spectral_norm: CertInterval,
    /// Encloses `||W||_F`.
    pub frobenius_norm: CertInterval,
    /// Encloses `||W^T||_{2,1}`: the sum of the l2 norms of `W`'s rows.
    pub norm_21_rows: CertInterval,
    /// Certified norms of `W - W0` (with `init_model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_distance: Option<NormsEntry>,
}

/// The norm-based measures (`docs/measures.md` defines each one).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeasuresEntry {
    /// The number d of raw weight matrices.
    pub d: usize,
    /// Encloses `sum_i ln ||W_i||_2^2` (absent when -inf or undefined:
    /// [`MeasuresEntry::absent`] says why, as for every measure below).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_prod_of_spec: Option<CertInterval>,
    /// Encloses `ln d + (1/d) sum_i ln ||W_i||_2^2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_sum_of_spec: Option<CertInterval>,
    /// Encloses `sum_i ln ||W_i||_F^2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_prod_of_fro: Option<CertInterval>,
    /// Encloses `ln d + (1/d) sum_i ln ||W_i||_F^2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_sum_of_fro: Option<CertInterval>,
    /// Encloses `sum_i ||W_i||_F^2` (absent above binary64's range).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param_norm: Option<CertInterval>,
    /// Encloses `ln( prod_i ||W_i||_2^2 sum_i ||W_i||_F^2 / ||W_i||_2^2 )`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_spec_orig: Option<CertInterval>,
    /// Encloses the spectral complexity with reference 0; absent when it
    /// exceeds binary64 (then `log_bartlett` states it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bartlett: Option<CertInterval>,
    /// Encloses `ln` of the spectral complexity with reference 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_bartlett: Option<CertInterval>,
    /// Encloses `sum_i ||W_i - W0_i||_F^2` (with `init_model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frobenius_distance: Option<CertInterval>,
    /// Encloses `sum_i ||W_i - W0_i||_2^2` (with `init_model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dist_spec_init: Option<CertInterval>,
    /// Encloses `ln( prod_i ||W_i||_2^2 sum_i ||W_i - W0_i||_F^2 / ||W_i||_2^2 )`
    /// (with `init_model`; absent when the distance is 0: the log is -inf).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_spec_init: Option<CertInterval>,
    /// Encloses the spectral complexity with `M_i = W0_i` (with
    /// `init_model`; absent when it exceeds binary64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bartlett_init: Option<CertInterval>,
    /// Encloses its `ln` (with `init_model`; absent when the distance is 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_bartlett_init: Option<CertInterval>,
    /// Why each absent measure is absent, by name (a raw weight whose
    /// norm may be 0 under a log or a ratio, or a value beyond binary64's
    /// range); the init measures are named only with `init_model`.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub absent: std::collections::BTreeMap<String, String>,
}

impl RawWeightEntry {
    /// The certified norms of `W`.
    pub(crate) fn norms(&self) -> NormsEntry {
        NormsEntry {
            spectral_norm: self.spectral_norm,
            frobenius_norm: self.frobenius_norm,
            norm_21_rows: self.norm_21_rows,
        }
    }
}

impl MeasuresEntry {
    /// Every measure stated, `(name, interval)`, in the order above.
    pub fn stated(&self) -> Vec<(&'static str, CertInterval)> {
        self.all()
            .into_iter()
            .filter_map(|(k, x)| x.map(|x| (k, x)))
            .collect()
    }

    /// Every measure by name, in the order above, `None` where absent.
    pub(crate) fn all(&self) -> [(&'static str, Option<CertInterval>); 13] {
        [
            ("log_prod_of_spec", self.log_prod_of_spec),
            ("log_sum_of_spec", self.log_sum_of_spec),
            ("log_prod_of_fro", self.log_prod_of_fro),
            ("log_sum_of_fro", self.log_sum_of_fro),
            ("param_norm", self.param_norm),
            ("log_spec_orig", self.log_spec_orig),
            ("bartlett", self.bartlett),
            ("log_bartlett", self.log_bartlett),
            ("frobenius_distance", self.frobenius_distance),
            ("dist_spec_init", self.dist_spec_init),
            ("log_spec_init", self.log_spec_init),
            ("bartlett_init", self.bartlett_init),
            ("log_bartlett_init", self.log_bartlett_init),
        ]
    }
}

impl Certificate {
    /// The matrix entry of `id`. Entries are kept in [`MatrixId`] order
    /// (`Certificate::validate` insists on it), so this is a binary search.
    pub fn matrix(&self, id: MatrixId) -> Option<&MatrixEntry> {
        self.position(id).map(|i| &self.matrices[i])
    }

    /// Position of `id` in [`Certificate::matrices`].
    pub(crate) fn position(&self, id: MatrixId) -> Option<usize> {
        self.matrices
            .binary_search_by_key(&id, MatrixEntry::id)
            .ok()
    }

    /// The JSON text (pretty-printed), exactly as `certify --out` writes it.
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).expect("a certificate always serialises")
    }
}

/// The proxy matrices of the model `md` (its layers, heads, whether its
/// blocks have a cross-attention and, for a mixture-of-experts model, the
/// experts of each layer), in certificate order (layer, then `QK` heads,
/// `V_tilde` heads, `QK_cross` and `V_tilde_cross` heads, `M_in` per
/// feed-forward block, `M_out` per block).
pub(crate) fn expected_ids(md: &ModelInfo) -> Vec<MatrixId> {
    (0..md.layers)
        .flat_map(|l| {
            md.experts
                .as_ref()
                .and_then(|e| e.get(l).copied())
                .unwrap_or(crate::arch::LayerFfn::DENSE)
                .ids(l, md.heads, md.cross_attention)
        })
        .collect()
}
