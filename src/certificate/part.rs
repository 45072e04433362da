//! A part: the certified spectral quantities of some of a model's proxy
//! matrices, with the model, the parameters and the program they belong to,
//! but no proxies and no bounds (those need every matrix). `certify --shard
//! K/N` writes one per shard, a resumable run (`certify --resume-dir`) one
//! per finished layer, and `merge` computes the certificate from parts that
//! cover every matrix exactly once. The format is documented in
//! `docs/certificate.md` ("Parts") and `docs/certificate.schema.json`
//! (`$defs/part`).
//!
//! A part is read as untrusted input by the rules of a certificate (a capped
//! read, a strict parse naming the JSON path, [`Part::validate`]), and it
//! carries the SHA-256 of its own contents, so that a part changed after it
//! was written (by hand or by a damaged disk) is refused. That digest is a
//! checksum, not a signature: the check of a certificate against the weights
//! is `verify --model`.

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::read::{self, CertificateError};
use super::{CertInterval, ModelInfo, Parameters, Tool};
use crate::arch::MatrixType;

/// Part format name.
pub(crate) const PART_FORMAT: &str = "specbound-part";
/// Part format version.
pub(crate) const PART_VERSION: u32 = 1;
/// Largest number of shards (as many as the largest number of matrices).
pub(crate) const MAX_SHARDS: usize = read::MAX_MATRICES;

/// Shard `index` of `count` (1-based), written `"K/N"` on the command line:
/// which share of a model's matrices a run certifies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardSpec {
    /// K, from 1.
    pub index: usize,
    /// N.
    pub count: usize,
}

impl ShardSpec {
    /// The whole model: shard 1 of 1.
    pub(crate) const WHOLE: ShardSpec = ShardSpec { index: 1, count: 1 };

    /// Shard `index` of `count`; `Err` unless `1 <= index <= count <= MAX_SHARDS`.
    pub(crate) fn new(index: usize, count: usize) -> Result<Self, String> {
        if count == 0 || count > MAX_SHARDS {
            return Err(format!(
                "the shard count must be between 1 and {MAX_SHARDS}, found {count}"
            ));
        }
        if index == 0 || index > count {
            return Err(format!(
                "the shard index must be between 1 and {count}, found {index}"
            ));
        }
        Ok(Self { index, count })
    }
}

impl std::fmt::Display for ShardSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl std::str::FromStr for ShardSpec {
    type Err = String;

    /// Parses `K/N` (decimal integers, `1 <= K <= N`).
    fn from_str(s: &str) -> Result<Self, String> {
        let shown: String = s.chars().take(40).collect();
        let bad = || format!("expected K/N with 1 <= K <= N (e.g. 2/8), found '{shown}'");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let digits =
            |t: &str| !t.is_empty() && t.len() <= 12 && t.bytes().all(|b| b.is_ascii_digit());
        if !(digits(k) && digits(n)) {
            return Err(bad());
        }
        let (k, n) = (k.parse().map_err(|_| bad())?, n.parse().map_err(|_| bad())?);
        ShardSpec::new(k, n)
    }
}

super::with_spectrum_fields! {
    /// What certification proves about one proxy matrix, before the proxies:
    /// the first fifteen keys of a certificate's matrix entry, with the same
    /// meaning.
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct SpectrumEntry {}
}

/// How a certificate or part was made: the program, the model, the
/// parameters and the extensions of the paper. Parts merge only when these
/// agree (the model's `path` aside, which is informative).
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    /// The program.
    pub tool: Tool,
    /// The model.
    pub model: ModelInfo,
    /// The parameters.
    pub parameters: Parameters,
    /// Where the proxies go beyond the paper's setting.
    pub extensions: Vec<String>,
}

/// How two headers differ, for [`Header::difference`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HeaderDifference {
    /// Another version of the program.
    ToolVersion,
    /// Other weight files (names or hashes): another model.
    Model,
    /// The same files read as another architecture (`--heads`, `--layers`).
    Architecture,
    /// Other parameters (`l_phi`, grid, precision).
    Parameters,
    /// Other extensions of the paper (another program's wording).
    Extensions,
}

impl Header {
    /// The first way `self` differs from `other` (the model's `path` aside,
    /// which is informative), as the kind and one phrase naming the key and
    /// both values (this one first); `None` when they agree.
    pub(crate) fn difference(&self, other: &Header) -> Option<(HeaderDifference, String)> {
        use HeaderDifference as D;
        let short = |s: &str| -> String {
            let c: String = s.chars().take(80).collect();
            crate::arch::clean_to(&c, 80)
        };
        if self.tool != other.tool {
            return Some((
                D::ToolVersion,
                format!(
                    "written by {} {}, not {} {}",
                    short(&self.tool.name),
                    short(&self.tool.version),
                    short(&other.tool.name),
                    short(&other.tool.version)
                ),
            ));
        }
        let (a, b) = (&self.model, &other.model);
        if a.files != b.files {
            let detail = match a.files.iter().zip(&b.files).find(|(x, y)| x != y) {
                Some((x, y)) if x.file == y.file => format!(
                    "weight file {} has sha256 {}, not {}",
                    short(&x.file),
                    x.sha256,
                    y.sha256
                ),
                Some((x, y)) => format!("weight file {}, not {}", short(&x.file), short(&y.file)),
                None => format!("{} weight files, not {}", a.files.len(), b.files.len()),
            };
            return Some((D::Model, detail));
        }
        let arch = [
            ("layers", a.layers, b.layers),
            ("hidden", a.hidden, b.hidden),
            ("heads", a.heads, b.heads),
            ("kv_heads", a.kv_heads, b.kv_heads),
            ("head_dim", a.head_dim, b.head_dim),
            ("intermediate", a.intermediate, b.intermediate),
        ];
        if a.architecture != b.architecture || a.tensor_prefix != b.tensor_prefix {
            return Some((
                D::Architecture,
                format!(
                    "architecture {} (prefix '{}'), not {} (prefix '{}')",
                    short(&a.architecture),
                    short(&a.tensor_prefix),
                    short(&b.architecture),
                    short(&b.tensor_prefix)
                ),
            ));
        }
        if let Some((k, x, y)) = arch.iter().find(|(_, x, y)| x != y) {
            return Some((D::Architecture, format!("model.{k} = {x}, not {y}")));
        }
        let (p, q) = (&self.parameters, &other.parameters);
        if p != q {
            let detail = if p.l_phi != q.l_phi {
                format!("l_phi = {}, not {}", short(&p.l_phi), short(&q.l_phi))
            } else if p.grid_m != q.grid_m {
                format!("grid m = {}, not {}", p.grid_m, q.grid_m)
            } else if p.precision != q.precision {
                format!("precision {}, not {}", p.precision, q.precision)
            } else {
                "other parameters".to_string()
            };
            return Some((D::Parameters, detail));
        }
        if self.extensions != other.extensions {
            return Some((D::Extensions, "other extensions of the paper".to_string()));
        }
        None
    }
}

/// Some matrices' certified spectral quantities (see the module documentation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Part {
    /// `PART_FORMAT`.
    pub format: String,
    /// `PART_VERSION`.
    pub version: u32,
    /// The program that wrote it.
    pub tool: Tool,
    /// The shard of the run that wrote it (`1/1` for an unsharded run).
    pub shard: ShardSpec,
    /// The model.
    pub model: ModelInfo,
    /// The parameters.
    pub parameters: Parameters,
    /// Where the proxies go beyond the paper's setting.
    #[serde(deserialize_with = "read::vec_max::<_, _, 64>")]
    pub extensions: Vec<String>,
    /// The matrices certified, in certificate order ([`crate::arch::MatrixId`]); may be
    /// empty (a shard of more shards than matrices).
    #[serde(deserialize_with = "read::vec_max::<_, _, { read::MAX_MATRICES }>")]
    pub matrices: Vec<SpectrumEntry>,
    /// With measures (`certify --shard --measures`): the raw weight
    /// matrices this shard certified (`crate::certify::shard::raw_shards`), layer
    /// then role order; possibly empty. Absent without measures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_weights: Option<Vec<super::RawWeightEntry>>,
    /// The initialisation of the distance measures (`--init`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_model: Option<super::InitModel>,
    /// Lower-case hex SHA-256 of the part's other keys ([`Part::content_sha256`]).
    pub sha256: String,
}

/// The keys a part's digest covers, in the order a part writes them.
#[derive(Serialize)]
struct Content<'a> {
    format: &'a str,
    version: u32,
    tool: &'a Tool,
    shard: &'a ShardSpec,
    model: &'a ModelInfo,
    parameters: &'a Parameters,
    extensions: &'a [String],
    matrices: &'a [SpectrumEntry],
    #[serde(skip_serializing_if = "Option::is_none")]
    raw_weights: Option<&'a [super::RawWeightEntry]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    init_model: Option<&'a super::InitModel>,
}

/// Feeds what serde writes into a hash, without holding the text.
struct HashWriter(Sha256);

impl Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Part {
    /// A part of this program's format, with its digest.
    pub(crate) fn new(header: Header, shard: ShardSpec, matrices: Vec<SpectrumEntry>) -> Part {
        let mut p = Part {
            format: PART_FORMAT.into(),
            version: PART_VERSION,
            tool: header.tool,
            shard,
            model: header.model,
            parameters: header.parameters,
            extensions: header.extensions,
            matrices,
            raw_weights: None,
            init_model: None,
            sha256: String::new(),
        };
        p.sha256 = p.content_sha256();
        p
    }

    /// This part with the raw weights a shard certified (and the
    /// initialisation), its digest recomputed.
    pub(crate) fn with_raw_weights(
        mut self,
        raw_weights: Vec<super::RawWeightEntry>,
        init_model: Option<super::InitModel>,
    ) -> Part {
        self.raw_weights = Some(raw_weights);
        self.init_model = init_model;
        self.sha256 = self.content_sha256();
        self
    }

    /// The program, model, parameters and extensions.
    pub(crate) fn header(&self) -> Header {
        Header {
            tool: self.tool.clone(),
            model: self.model.clone(),
            parameters: self.parameters.clone(),
            extensions: self.extensions.clone(),
        }
    }

    /// SHA-256 (lower-case hex) of the compact JSON of every key but
    /// `sha256`, in the order written: what `Part::new` stores and
    /// `Part::validate` checks. Numbers are written as the shortest
    /// decimals that read back to the same f64, so a part read from its file
    /// hashes to the same value.
    pub fn content_sha256(&self) -> String {
        let content = Content {
            format: &self.format,
            version: self.version,
            tool: &self.tool,
            shard: &self.shard,
            model: &self.model,
            parameters: &self.parameters,
            extensions: &self.extensions,
            matrices: &self.matrices,
            raw_weights: self.raw_weights.as_deref(),
            init_model: self.init_model.as_ref(),
        };
        let mut w = HashWriter(Sha256::new());
        serde_json::to_writer(&mut w, &content).expect("a part always serialises");
        format!("{:x}", w.0.finalize())
    }

    /// The JSON text (pretty-printed), as `certify --shard` writes it.
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).expect("a part always serialises")
    }

    /// Reads, parses and validates a part file (untrusted input), refusing
    /// more than `read::MAX_BYTES` bytes while reading.
    pub fn read(path: &Path) -> Result<Part, CertificateError> {
        let bytes = read::read_bytes(path, "certificate part")?;
        Part::parse(&bytes, &path.display().to_string())
    }

    /// Parses and validates part JSON (untrusted input); `file` names it in
    /// messages.
    pub fn parse(bytes: &[u8], file: &str) -> Result<Part, CertificateError> {
        let part: Part = read::parse_strict(bytes, file, PART_FORMAT, &[PART_VERSION])?;
        part.validate()
            .map_err(|(at, message)| read::invalid(file, at, message))?;
        Ok(part)
    }

    /// Checks everything the types cannot, by the rules of
    /// [`super::Certificate::validate`] where a part has the same keys (the
    /// program, the model, the parameters, each matrix's spectral fields),
    /// and: the shard is `K/N` with `1 <= K <= N`, the matrices lie in the
    /// model and are listed once each in certificate order, and `sha256` is
    /// the digest of the contents. Returns the JSON path and the problem.
    pub(crate) fn validate(&self) -> Result<(), (String, String)> {
        let err = |at: &str, m: String| Err((at.to_string(), m));
        if self.format != PART_FORMAT {
            return err("$.format", format!("expected \"{PART_FORMAT}\""));
        }
        if self.version != PART_VERSION {
            return err("$.version", format!("unsupported version {}", self.version));
        }
        read::validate_header(&self.tool, &self.model, &self.parameters)?;
        if let Err(e) = ShardSpec::new(self.shard.index, self.shard.count) {
            return err("$.shard", e);
        }
        let md = &self.model;
        for (i, w) in self.matrices.iter().enumerate() {
            let at = format!("$.matrices[{i}]");
            read::validate_spectrum(&w.spectral_fields(), &at)?;
            let id = w.id();
            if w.layer >= md.layers || w.head.is_some_and(|h| h >= md.heads) {
                return err(
                    &at,
                    format!(
                        "{id} is outside the model ({} layers, {} heads)",
                        md.layers, md.heads
                    ),
                );
            }
            if i > 0 {
                let prev = self.matrices[i - 1].id();
                if prev == id {
                    return err(&at, format!("duplicate matrix ({id})"));
                }
                if prev > id {
                    return err(
                        &at,
                        format!("{id} after {prev} (entries are ordered by layer, type, head)"),
                    );
                }
            }
        }
        if let Some(raw) = &self.raw_weights {
            read::validate_raw_weights(raw, md.layers, self.init_model.as_ref())?;
        } else if self.init_model.is_some() {
            return err("$.init_model", "stated without raw_weights".into());
        }
        let hex =
            |s: &str| s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if !hex(&self.sha256) {
            return err(
                "$.sha256",
                "expected 64 lower-case hexadecimal digits".into(),
            );
        }
        if self.sha256 != self.content_sha256() {
            return err(
                "$.sha256",
                "does not match the part's contents: the part was changed after it was \
                 written (parts are never edited: certify the shard again)"
                    .into(),
            );
        }
        Ok(())
    }
}
