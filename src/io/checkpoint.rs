//! Checkpoints: a Hugging Face model directory (`config.json` plus
//! `model.safetensors` or `pytorch_model.bin`, or a sharded
//! `model.safetensors.index.json` / `pytorch_model.bin.index.json` with its
//! shards), a single `.safetensors` file, a PyTorch checkpoint (`.bin`,
//! `.pt`, `.pth`: see [`super::pytorch`]), or a llama.cpp `.gguf` file.
//!
//! safetensors and GGUF files are memory-mapped and validated when opened,
//! PyTorch pickles scanned against the allow-list and parsed; tensors are
//! converted to f64 exactly when read ([`proofs/exact-conversion.md`](crate::proofs::exact_conversion), L1).
//! Every error names the file and, where it applies, the tensor or key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::flax::FlaxFile;
use super::gguf::GgufFile;
use super::limits::{self, MAX_CONFIG_BYTES, MAX_INDEX_BYTES};
use super::memory::MemoryModel;
use super::onnx::OnnxFile;
use super::pytorch::PytorchFile;
use super::weight_file::WeightFile;
use super::{LoadedMatrix, ReadError, SafetensorsFile};

/// An opened checkpoint.
pub struct Checkpoint {
    /// The path given to [`Checkpoint::open`].
    given: PathBuf,
    root: PathBuf,
    /// Each weight file, read through its format's [`WeightFile`].
    files: Vec<Box<dyn WeightFile>>,
    gguf_meta: Option<std::collections::BTreeMap<String, super::gguf::MetaValue>>,
    /// tensor name -> index into `files`
    index: BTreeMap<String, usize>,
    config: Option<serde_json::Value>,
    config_path: Option<PathBuf>,
}

/// SHA-256 of one weight file read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileHash {
    /// File name as given (relative to the model directory when there is one).
    pub file: String,
    /// Lower-case hex SHA-256 of the whole file.
    pub sha256: String,
}

fn read_config(path: &Path) -> Result<serde_json::Value, ReadError> {
    let text = limits::read_capped_regular_string(path, MAX_CONFIG_BYTES, "config.json")?;
    serde_json::from_str(&text)
        .map_err(|e| ReadError::format(path, None, format!("invalid JSON: {e}")))
}

/// The shard files of a sharded index, sorted and distinct, each checked to
/// be a plain file name in `dir`. The index is parsed without building a
/// JSON tree: only the distinct shard names are kept (with the first tensor
/// naming each, for messages).
fn shards_of_index(dir: &Path, index: &Path) -> Result<Vec<PathBuf>, ReadError> {
    let text = limits::read_capped_regular_string(index, MAX_INDEX_BYTES, "sharded index")?;
    let parsed: IndexFile = serde_json::from_str(&text).map_err(|e| {
        let msg = if e.is_data() {
            e.to_string()
        } else {
            format!("invalid JSON: {e}")
        };
        ReadError::format(index, None, msg)
    })?;
    drop(text);
    let Some(map) = parsed.weight_map else {
        return Err(ReadError::format(
            index,
            None,
            "missing object key 'weight_map'",
        ));
    };
    if let Some(tensor) = &map.not_a_name {
        return Err(ReadError::format(
            index,
            Some(tensor),
            "weight_map value is not a file name",
        ));
    }
    if map.shards.is_empty() {
        return Err(ReadError::format(
            index,
            None,
            "weight_map is empty: the index names no tensors and no shard files",
        ));
    }
    let mut files = Vec::with_capacity(map.shards.len());
    for (f, tensor) in &map.shards {
        if f.is_empty() || f == "." || f == ".." || f.contains(['/', '\\', '\0']) {
            return Err(ReadError::format(
                index,
                Some(tensor),
                format!("shard name '{f}' must be a plain file name in the model directory"),
            ));
        }
        files.push(dir.join(f));
    }
    Ok(files)
}

/// `model.safetensors.index.json` or `pytorch_model.bin.index.json`: only
/// `weight_map` is used.
struct IndexFile {
    weight_map: Option<WeightMap>,
}

/// Distinct shard file names of `weight_map`, each with the first tensor
/// that names it, and the first tensor whose value is not a string.
#[derive(Default)]
struct WeightMap {
    shards: BTreeMap<String, String>,
    not_a_name: Option<String>,
}

impl<'de> serde::Deserialize<'de> for IndexFile {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = IndexFile;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object with the key 'weight_map'")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<IndexFile, A::Error> {
                let mut weight_map = None;
                while let Some(k) = a.next_key::<std::borrow::Cow<'de, str>>()? {
                    if k == "weight_map" {
                        weight_map = Some(a.next_value::<WeightMap>()?);
                    } else {
                        a.next_value::<serde::de::IgnoredAny>()?;
                    }
                }
                Ok(IndexFile { weight_map })
            }
        }
        d.deserialize_map(V)
    }
}

impl<'de> serde::Deserialize<'de> for WeightMap {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = WeightMap;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("'weight_map' to be an object mapping tensor names to shard file names")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<WeightMap, A::Error> {
                let mut w = WeightMap::default();
                while let Some(tensor) = a.next_key::<String>()? {
                    match a.next_value::<ShardName>()?.0 {
                        Some(f) => {
                            w.shards.entry(f).or_insert(tensor);
                        }
                        None => {
                            w.not_a_name.get_or_insert(tensor);
                        }
                    }
                }
                Ok(w)
            }
        }
        d.deserialize_map(V)
    }
}

/// A `weight_map` value: the file name, or `None` for any non-string
/// (consumed without being kept).
struct ShardName(Option<String>);

impl<'de> serde::Deserialize<'de> for ShardName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = ShardName;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a shard file name")
            }
            fn visit_str<E>(self, v: &str) -> Result<ShardName, E> {
                Ok(ShardName(Some(v.to_string())))
            }
            fn visit_bool<E>(self, _: bool) -> Result<ShardName, E> {
                Ok(ShardName(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<ShardName, E> {
                Ok(ShardName(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<ShardName, E> {
                Ok(ShardName(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<ShardName, E> {
                Ok(ShardName(None))
            }
            fn visit_unit<E>(self) -> Result<ShardName, E> {
                Ok(ShardName(None))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<ShardName, A::Error> {
                while a.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(ShardName(None))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<ShardName, A::Error> {
                while a
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(ShardName(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// The error for a model directory without `model.safetensors` or its
/// index: names what the directory holds instead when it is a checkpoint
/// of another kind (PyTorch, TensorFlow, Flax), a GGUF file, or
/// safetensors files under other names.
fn no_weights_error(dir: &Path) -> ReadError {
    const NEITHER: &str = "none of model.safetensors, model.safetensors.index.json, \
                           pytorch_model.bin, pytorch_model.bin.index.json, model.onnx, onnx/model.onnx, \
                           flax_model.msgpack";
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|it| {
            it.filter_map(Result::ok)
                .take(10_000)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let with_ext = |exts: &[&str]| {
        names
            .iter()
            .find(|n| {
                let l = n.to_ascii_lowercase();
                exts.iter().any(|e| l.ends_with(e))
            })
            .cloned()
    };
    let msg = if let Some(f) = with_ext(&[".safetensors"]) {
        format!(
            "model directory holds {f} but {NEITHER}: pass the file itself \
             (specbound certify {})",
            dir.join(&f).display()
        )
    } else if let Some(f) = with_ext(&[".gguf"]) {
        format!(
            "model directory holds {f} but {NEITHER}: pass the GGUF file itself \
             (specbound certify {})",
            dir.join(&f).display()
        )
    } else if let Some(f) = with_ext(&[".bin", ".pt", ".pth"]) {
        format!(
            "model directory holds {f} but {NEITHER}: pass the PyTorch checkpoint itself \
             (specbound certify {})",
            dir.join(&f).display()
        )
    } else if let Some(f) = with_ext(&[".h5"]) {
        format!(
            "model directory holds {f} (a TensorFlow checkpoint) but {NEITHER}; specbound \
             reads safetensors and GGUF: convert it first, e.g. in Python \
             `AutoModel.from_pretrained(DIR, from_tf=True).save_pretrained(OUT)` (transformers)"
        )
    } else if let Some(f) = with_ext(&[".msgpack", ".onnx"]) {
        format!(
            "model directory holds {f} but {NEITHER}: pass the file itself \
             (specbound certify {})",
            dir.join(&f).display()
        )
    } else {
        format!("model directory holds {NEITHER}")
    };
    ReadError::format(dir, None, msg)
}

/// What a weight file is, by extension or, for any other, by content.
enum Kind {
    Safetensors,
    Gguf,
    Torch,
    Onnx,
    Flax,
}

fn weight_kind(p: &Path) -> Result<Kind, ReadError> {
    let ext = p
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("gguf") => return Ok(Kind::Gguf),
        Some("onnx") => return Ok(Kind::Onnx),
        Some("msgpack") => return Ok(Kind::Flax),
        _ => {}
    }
    let (mut f, _) = limits::open_regular(p, "weight file (safetensors, PyTorch or GGUF)")?;
    let mut head = [0u8; 512];
    let n = super::read_head(&mut f, &mut head).map_err(|e| ReadError::io(p, e))?;
    let head = &head[..n];
    // Files that are no checkpoint, said as what they are (a safetensors
    // reader would call them "header too large").
    let not_a_model = |what: &str| {
        ReadError::format(
            p,
            None,
            format!("this is {what}, not a model checkpoint (safetensors, PyTorch or GGUF)"),
        )
    };
    if head.starts_with(b"\x93NUMPY") {
        return Err(not_a_model(
            "a NumPy .npy array (one matrix: certify its singular values with `specbound svd FILE`)",
        ));
    }
    let text = head.trim_ascii_start();
    // Byte 8 is a safetensors header's `{` (after its 8-byte length, whose
    // first byte may itself be `{`).
    if text.starts_with(b"{") && head.get(8) != Some(&b'{') {
        let s = String::from_utf8_lossy(text);
        return Err(if s.contains("\"format\"") && s.contains("specbound") {
            not_a_model(
                "a specbound certificate or part (check it with `specbound verify FILE`, draw it with `specbound report`)",
            )
        } else {
            not_a_model("a JSON file")
        });
    }
    // A PyTorch name on a file that is no PyTorch checkpoint (nor, by its
    // first bytes, safetensors or GGUF): said as what it is, not read as
    // safetensors ("header too large").
    let torch_name = matches!(ext.as_deref(), Some("bin" | "pt" | "pth"));
    if torch_name
        && head.get(8) != Some(&b'{')
        && !head.starts_with(b"GGUF")
        && super::pytorch::container_of(head).is_none()
    {
        return Err(ReadError::format(p, None, super::not_a_state_dict(head)));
    }
    Ok(if head.starts_with(b"GGUF") {
        Kind::Gguf
    } else if head.get(8) != Some(&b'{') && super::pytorch::container_of(head).is_some() {
        Kind::Torch
    } else {
        Kind::Safetensors
    })
}

impl Checkpoint {
    /// Opens a model directory or a single `.safetensors`, PyTorch or
    /// `.gguf` file. A directory must hold (looked for in this order, as
    /// transformers does) `model.safetensors.index.json`,
    /// `model.safetensors`, `pytorch_model.bin.index.json` or
    /// `pytorch_model.bin`; `config.json` is read when present
    /// (in the directory, or beside a single file). Every file read must be
    /// a regular file (a FIFO or device is refused, never read), and
    /// `config.json` and the index are read under the caps of
    /// [`super::limits`].
    ///
    /// The [key](MemoryModel::key) of a model in memory that lives opens
    /// that model (`Checkpoint::from_memory`).
    pub fn open(path: &Path) -> Result<Self, ReadError> {
        if let Some(m) = MemoryModel::lookup(path) {
            return Ok(Self::from_memory(&m));
        }
        let meta = std::fs::metadata(path).map_err(|e| ReadError::io(path, e))?;
        let (root, file_paths, config_path) = if meta.is_dir() {
            let single = path.join("model.safetensors");
            let index = path.join("model.safetensors.index.json");
            let pt_single = path.join("pytorch_model.bin");
            let pt_index = path.join("pytorch_model.bin.index.json");
            let files = if limits::entry_exists(&index) {
                shards_of_index(path, &index)?
            } else if limits::entry_exists(&single) {
                vec![single]
            } else if limits::entry_exists(&pt_index) {
                shards_of_index(path, &pt_index)?
            } else if limits::entry_exists(&pt_single) {
                vec![pt_single]
            } else if limits::entry_exists(&path.join("model.onnx")) {
                vec![path.join("model.onnx")]
            } else if limits::entry_exists(&path.join("onnx").join("model.onnx")) {
                // sentence-transformers and Optimum ship ONNX in onnx/,
                // beside config.json and no weights at the top.
                vec![path.join("onnx").join("model.onnx")]
            } else if limits::entry_exists(&path.join("flax_model.msgpack")) {
                vec![path.join("flax_model.msgpack")]
            } else {
                return Err(no_weights_error(path));
            };
            let cfg = path.join("config.json");
            (
                path.to_path_buf(),
                files,
                limits::entry_exists(&cfg).then_some(cfg),
            )
        } else {
            let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
            let mut cfg = dir.join("config.json");
            // sentence-transformers repositories keep their ONNX exports in
            // onnx/ and config.json one level up.
            let is_onnx = path
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("onnx"));
            if is_onnx
                && !limits::entry_exists(&cfg)
                && dir.file_name().is_some_and(|n| n == "onnx")
            {
                if let Some(up) = dir.parent() {
                    cfg = up.join("config.json");
                }
            }
            (
                dir,
                vec![path.to_path_buf()],
                limits::entry_exists(&cfg).then_some(cfg),
            )
        };
        let config = match &config_path {
            Some(p) => Some(read_config(p)?),
            None => None,
        };
        let mut files = Vec::with_capacity(file_paths.len());
        let mut index = BTreeMap::new();
        let mut gguf_meta = None;
        for p in &file_paths {
            let f: Box<dyn WeightFile> = match weight_kind(p)? {
                Kind::Gguf => {
                    let g = GgufFile::open(p)?;
                    gguf_meta = Some(g.meta.clone());
                    Box::new(g)
                }
                Kind::Torch => Box::new(PytorchFile::open(p)?),
                Kind::Onnx => Box::new(OnnxFile::open(p)?),
                Kind::Flax => Box::new(FlaxFile::open(p)?),
                Kind::Safetensors => Box::new(SafetensorsFile::open(p)?),
            };
            for n in f.names() {
                if index.insert(n.clone(), files.len()).is_some() {
                    return Err(ReadError::format(
                        p,
                        Some(&n),
                        "tensor appears in more than one shard",
                    ));
                }
            }
            files.push(f);
        }
        Ok(Self {
            given: path.to_path_buf(),
            root,
            files,
            gguf_meta,
            index,
            config,
            config_path,
        })
    }

    /// A model held in memory: its tensors, and its config when it has
    /// one; read as the same tensors in a safetensors file are. The path
    /// (for messages) is [`MEMORY_LABEL`](super::memory::MEMORY_LABEL),
    /// its config's [`MEMORY_CONFIG_LABEL`](super::memory::MEMORY_CONFIG_LABEL),
    /// and its one weight file is the serialisation
    /// ([`Checkpoint::file_hashes`] gives its SHA-256).
    pub(crate) fn from_memory(model: &MemoryModel) -> Self {
        let label = PathBuf::from(super::memory::MEMORY_LABEL);
        let index = model
            .file()
            .names()
            .iter()
            .map(|n| (n.clone(), 0))
            .collect();
        Self {
            given: label,
            root: PathBuf::new(),
            files: vec![Box::new(model.clone())],
            gguf_meta: None,
            index,
            config: model.config().cloned(),
            config_path: model
                .config()
                .map(|_| PathBuf::from(super::memory::MEMORY_CONFIG_LABEL)),
        }
    }

    /// Whether the checkpoint is a model in memory.
    pub(crate) fn is_memory(&self) -> bool {
        matches!(self.files.as_slice(), [f] if f.is_memory())
    }

    /// The path the checkpoint was opened from (a directory or a file).
    pub(crate) fn path(&self) -> &Path {
        &self.given
    }

    /// The parsed `config.json`, if there was one.
    pub(crate) fn config(&self) -> Option<&serde_json::Value> {
        self.config.as_ref()
    }

    /// GGUF metadata, when the checkpoint is a GGUF file.
    pub(crate) fn gguf_meta(
        &self,
    ) -> Option<&std::collections::BTreeMap<String, super::gguf::MetaValue>> {
        self.gguf_meta.as_ref()
    }

    /// Path of `config.json`, if there was one.
    pub(crate) fn config_path(&self) -> Option<&Path> {
        self.config_path.as_deref()
    }

    /// All tensor names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.index.keys().map(String::as_str)
    }

    /// Whether a tensor exists.
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    /// Shape and dtype name of a tensor.
    pub fn info(&self, name: &str) -> Option<(Vec<usize>, String)> {
        self.index.get(name).and_then(|&i| self.files[i].info(name))
    }

    /// The file that holds a tensor (for messages); for a tensor that is
    /// not there, the first weight file, or the path the checkpoint was
    /// opened from. Never empty.
    pub(crate) fn file_of(&self, name: &str) -> PathBuf {
        match self.index.get(name) {
            Some(&i) => self.files[i].path().to_path_buf(),
            None => self
                .files
                .first()
                .map(|f| f.path().to_path_buf())
                .unwrap_or_else(|| self.given.clone()),
        }
    }

    /// Reads a 2-D tensor (exact conversion to f64, finiteness checked).
    ///
    /// The tensor's pages of a mapped file are released from this process's
    /// resident memory once it is converted (the bytes stay in the kernel's
    /// page cache), so that resident memory follows the tensors in use, not
    /// the size of the files (docs/certify.md, "Memory").
    pub fn read(&self, name: &str) -> Result<LoadedMatrix, ReadError> {
        self.read_released(name, |f| f.read(name))
    }

    /// Reads `name` from the file that holds it by `how`, then releases
    /// the tensor's mapped pages (whatever the outcome); a tensor that is
    /// not there is [`ReadError::MissingTensor`], listing
    /// [`two_d_readable`](Self::two_d_readable).
    fn read_released(
        &self,
        name: &str,
        how: impl FnOnce(&dyn WeightFile) -> Result<LoadedMatrix, ReadError>,
    ) -> Result<LoadedMatrix, ReadError> {
        match self.index.get(name) {
            Some(&i) => {
                let f = &*self.files[i];
                let r = how(f);
                f.release(name);
                r
            }
            None => Err(ReadError::MissingTensor {
                path: self.file_of(name),
                tensor: name.to_string(),
                available: self.two_d_readable(),
            }),
        }
    }

    /// Every 2-D tensor of the checkpoint's files that [`read`](Self::read)
    /// can read (float, and GGUF's block formats), in natural order: what
    /// a message about a missing tensor lists.
    pub(crate) fn two_d_readable(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .files
            .iter()
            .flat_map(|f| f.two_d_candidates())
            .collect();
        v.sort_by(|a, b| super::safetensors::natural_cmp(a, b));
        v.dedup();
        v
    }

    /// Reads a 1-D float tensor as a `1 x n` matrix (exact conversion to
    /// f64, finiteness checked); safetensors files only, the format of the
    /// checkpoints whose vectors are read (DINOv2's LayerScale).
    pub(crate) fn read_vector(&self, name: &str) -> Result<LoadedMatrix, ReadError> {
        self.read_released(name, |f| f.read_vector(name))
    }

    /// Reads a float tensor of rank >= 2 flattened to
    /// `[shape[0], product of the other dimensions]`, row-major (the stored
    /// order); 2-D tensors as [`Self::read`]. A higher-rank tensor of a
    /// GGUF or Flax file is refused as not 2-D.
    pub fn read_flattened(&self, name: &str) -> Result<LoadedMatrix, ReadError> {
        self.read_released(name, |f| f.read_flattened(name))
    }

    /// Reads slice `index` of a 3-D float tensor (`tensor[index]`, the
    /// matrix of its last two dimensions; exact conversion to f64,
    /// finiteness checked), decoding that slice only. Only safetensors
    /// files hold such tensors for this reader: a tensor of another format
    /// is refused, naming it.
    pub fn read_slice(&self, name: &str, index: usize) -> Result<LoadedMatrix, ReadError> {
        self.read_released(name, |f| f.read_slice(name, index))
    }

    /// SHA-256 of every weight file, in a stable order (an error only when
    /// a PyTorch checkpoint, read through its descriptor, fails to read).
    pub fn file_hashes(&self) -> Result<Vec<FileHash>, ReadError> {
        let mut out = Vec::new();
        for f in &self.files {
            for (p, sha256) in f.hashes()? {
                let file = p
                    .strip_prefix(&self.root)
                    .unwrap_or(&p)
                    .display()
                    .to_string();
                out.push(FileHash { file, sha256 });
            }
        }
        Ok(out)
    }

    /// Tensor names of the checkpoint that hold a 2-D float matrix, in
    /// natural order (for `svd --tensor` messages).
    pub fn two_d_float_tensors(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .names()
            .filter(|n| {
                self.info(n).is_some_and(|(s, d)| {
                    s.len() == 2 && matches!(d.as_str(), "F16" | "BF16" | "F32" | "F64")
                })
            })
            .map(str::to_string)
            .collect();
        v.sort_by(|a, b| super::safetensors::natural_cmp(a, b));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::TempPath;
    use super::*;

    fn shards(index_json: &str) -> Result<Vec<String>, String> {
        let t = TempPath::new("model.safetensors.index.json");
        std::fs::write(t.path(), index_json).unwrap();
        let dir = t.path().parent().unwrap();
        shards_of_index(dir, t.path())
            .map(|v| {
                v.iter()
                    .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                    .collect()
            })
            .map_err(|e| {
                let msg = e.to_string();
                assert!(msg.starts_with(&t.path().display().to_string()), "{msg}");
                msg
            })
    }

    #[test]
    fn index_shards_are_distinct_sorted_and_other_keys_ignored() {
        let got = shards(
            r#"{"metadata": {"total_size": 8, "x": [1, {"y": null}]},
                "weight_map": {"b": "s2.safetensors", "a": "s1.safetensors", "c": "s2.safetensors"}}"#,
        );
        assert_eq!(got.unwrap(), ["s1.safetensors", "s2.safetensors"]);
    }

    #[test]
    fn index_errors_name_the_index_and_the_tensor() {
        for (json, needle) in [
            (r#"{"weight_map": {}}"#, "weight_map is empty"),
            (r#"{"metadata": {}}"#, "missing object key 'weight_map'"),
            (
                r#"{"weight_map": "x"}"#,
                "expected 'weight_map' to be an object",
            ),
            (
                r#"{"weight_map": {"w": 3}}"#,
                "tensor 'w': weight_map value is not",
            ),
            (
                r#"{"weight_map": {"w": {"a": [1]}}}"#,
                "tensor 'w': weight_map value",
            ),
            (
                r#"{"weight_map": {"w": "../x"}}"#,
                "tensor 'w': shard name '../x'",
            ),
            (r#"{"weight_map": {"w": "."}}"#, "shard name '.'"),
            (r#"[1, 2]"#, "expected an object with the key 'weight_map'"),
            (r#"{"weight_map": {"w": "a""#, "invalid JSON"),
        ] {
            let msg = shards(json).unwrap_err();
            assert!(msg.contains(needle), "{json}: {msg}");
        }
    }
}
