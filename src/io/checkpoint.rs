//! Checkpoints: a Hugging Face model directory (`config.json` plus
//! `model.safetensors`, or a sharded `model.safetensors.index.json` with its
//! shards), a single `.safetensors` file, or a llama.cpp `.gguf` file.
//!
//! Files are memory-mapped and validated when opened; tensors are converted
//! to f64 exactly when read (`proofs/exact-conversion.md`, L1). Every error
//! names the file and, where it applies, the tensor or key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::gguf::GgufFile;
use super::{LoadedMatrix, ReadError, SafetensorsFile};

/// One weight file.
enum Source {
    St(SafetensorsFile),
    Gguf(GgufFile),
}

impl Source {
    fn path(&self) -> &Path {
        match self {
            Source::St(f) => f.path(),
            Source::Gguf(f) => f.path(),
        }
    }
    fn bytes(&self) -> &[u8] {
        match self {
            Source::St(f) => f.bytes(),
            Source::Gguf(f) => f.bytes(),
        }
    }
    fn names(&self) -> Vec<String> {
        match self {
            Source::St(f) => f.names().to_vec(),
            Source::Gguf(f) => f.tensors.keys().cloned().collect(),
        }
    }
    /// Shape as a matrix would be read (`[rows, cols]` for 2-D) and dtype name.
    fn info(&self, name: &str) -> Option<(Vec<usize>, String)> {
        match self {
            Source::St(f) => f.info(name),
            Source::Gguf(f) => f.tensors.get(name).map(|t| {
                let mut d: Vec<usize> = t.dims.iter().map(|&x| x as usize).collect();
                d.reverse();
                (d, super::gguf::type_name(t.ggml_type))
            }),
        }
    }
    fn read(&self, name: &str) -> Result<LoadedMatrix, ReadError> {
        match self {
            Source::St(f) => f.read(name),
            Source::Gguf(f) => f.read(name),
        }
    }
}

/// An opened checkpoint.
pub struct Checkpoint {
    root: PathBuf,
    files: Vec<Source>,
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

fn read_json(path: &Path) -> Result<serde_json::Value, ReadError> {
    let text = std::fs::read_to_string(path).map_err(|e| ReadError::io(path, e))?;
    serde_json::from_str(&text)
        .map_err(|e| ReadError::format(path, None, format!("invalid JSON: {e}")))
}

impl Checkpoint {
    /// Opens a model directory or a single `.safetensors` file. A directory
    /// must hold `model.safetensors` or `model.safetensors.index.json`;
    /// `config.json` is read when present (in the directory, or beside a
    /// single file).
    pub fn open(path: &Path) -> Result<Self, ReadError> {
        let meta = std::fs::metadata(path).map_err(|e| ReadError::io(path, e))?;
        let (root, file_paths, config_path) = if meta.is_dir() {
            let single = path.join("model.safetensors");
            let index = path.join("model.safetensors.index.json");
            let files = if index.is_file() {
                let j = read_json(&index)?;
                let map = j
                    .get("weight_map")
                    .and_then(|m| m.as_object())
                    .ok_or_else(|| {
                        ReadError::format(&index, None, "missing object key 'weight_map'")
                    })?;
                let mut shards: Vec<String> = Vec::new();
                for (tensor, v) in map {
                    let f = v.as_str().ok_or_else(|| {
                        ReadError::format(
                            &index,
                            Some(tensor),
                            "weight_map value is not a file name",
                        )
                    })?;
                    if f.contains('/') || f.contains('\\') || f == ".." {
                        return Err(ReadError::format(
                            &index,
                            Some(tensor),
                            format!(
                                "shard name '{f}' must be a plain file name in the model directory"
                            ),
                        ));
                    }
                    if !shards.iter().any(|s| s == f) {
                        shards.push(f.to_string());
                    }
                }
                shards.sort();
                shards.into_iter().map(|s| path.join(s)).collect()
            } else if single.is_file() {
                vec![single]
            } else {
                return Err(ReadError::format(
                    path,
                    None,
                    "model directory holds neither model.safetensors nor model.safetensors.index.json",
                ));
            };
            let cfg = path.join("config.json");
            (path.to_path_buf(), files, cfg.is_file().then_some(cfg))
        } else {
            let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
            let cfg = dir.join("config.json");
            (dir, vec![path.to_path_buf()], cfg.is_file().then_some(cfg))
        };
        let config = match &config_path {
            Some(p) => Some(read_json(p)?),
            None => None,
        };
        let mut files = Vec::with_capacity(file_paths.len());
        let mut index = BTreeMap::new();
        let mut gguf_meta = None;
        for p in &file_paths {
            let is_gguf = p.extension().is_some_and(|e| e == "gguf")
                || std::fs::File::open(p)
                    .and_then(|mut f| {
                        let mut m = [0u8; 4];
                        std::io::Read::read_exact(&mut f, &mut m).map(|_| m == *b"GGUF")
                    })
                    .unwrap_or(false);
            let f = if is_gguf {
                let g = GgufFile::open(p)?;
                gguf_meta = Some(g.meta.clone());
                Source::Gguf(g)
            } else {
                Source::St(SafetensorsFile::open(p)?)
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
            root,
            files,
            gguf_meta,
            index,
            config,
            config_path,
        })
    }

    /// The parsed `config.json`, if there was one.
    pub fn config(&self) -> Option<&serde_json::Value> {
        self.config.as_ref()
    }

    /// GGUF metadata, when the checkpoint is a GGUF file.
    pub fn gguf_meta(&self) -> Option<&std::collections::BTreeMap<String, super::gguf::MetaValue>> {
        self.gguf_meta.as_ref()
    }

    /// Path of `config.json`, if there was one.
    pub fn config_path(&self) -> Option<&Path> {
        self.config_path.as_deref()
    }

    /// All tensor names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.index.keys().map(String::as_str)
    }

    /// Whether a tensor exists.
    pub fn contains(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    /// Shape and dtype name of a tensor.
    pub fn info(&self, name: &str) -> Option<(Vec<usize>, String)> {
        self.index.get(name).and_then(|&i| self.files[i].info(name))
    }

    /// The file that holds a tensor (for messages).
    pub fn file_of(&self, name: &str) -> PathBuf {
        match self.index.get(name) {
            Some(&i) => self.files[i].path().to_path_buf(),
            None => self
                .files
                .first()
                .map(|f| f.path().to_path_buf())
                .unwrap_or_default(),
        }
    }

    /// Reads a 2-D tensor (exact conversion to f64, finiteness checked).
    pub fn read(&self, name: &str) -> Result<LoadedMatrix, ReadError> {
        match self.index.get(name) {
            Some(&i) => self.files[i].read(name),
            None => Err(ReadError::MissingTensor {
                path: self.file_of(name),
                tensor: name.to_string(),
                available: Vec::new(),
            }),
        }
    }

    /// SHA-256 of every weight file, in a stable order.
    pub fn file_hashes(&self) -> Vec<FileHash> {
        self.files
            .iter()
            .map(|f| {
                let mut h = Sha256::new();
                h.update(f.bytes());
                let file = f
                    .path()
                    .strip_prefix(&self.root)
                    .unwrap_or(f.path())
                    .display()
                    .to_string();
                FileHash {
                    file,
                    sha256: format!("{:x}", h.finalize()),
                }
            })
            .collect()
    }
}
