//! Models held in memory (the Python module's `certify(state_dict)`): named
//! tensors given as little-endian bytes, read by everything downstream
//! exactly as a safetensors file on disk.
//!
//! The tensors are copied once, into the safetensors serialisation of
//! them (an anonymous memory map that the model owns); nothing else is
//! copied, and each matrix is then converted to f64 exactly when read, as
//! from a file ([`proofs/exact-conversion.md`](crate::proofs::exact_conversion), L1).
//!
//! The serialisation is the canonical one of the `safetensors` crate that
//! the Python package `safetensors` also uses: tensors ordered by
//! descending dtype alignment, then by name; header JSON without
//! `__metadata__`, padded with spaces to a multiple of 8 bytes. So its
//! SHA-256 ([`MemoryModel::sha256`]) is the SHA-256 of the file that
//! `safetensors.numpy.save_file(d, path)` (or `safetensors.torch.save_file`,
//! no metadata) writes for the same dict: a certificate of weights in
//! memory names the file they would be saved as (docs/certificate.md,
//! "Weights from memory").
//!
//! [`Checkpoint::open`](super::checkpoint::Checkpoint::open) also opens a
//! model in memory by its [`MemoryModel::key`], a path no file can have
//! (it holds a NUL byte), so that code that takes a model's path reads it
//! unchanged; the key is valid while a handle to the model lives.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use ::safetensors::tensor::{Dtype, SafeTensors, View};
use sha2::{Digest, Sha256};

use super::weight_file::WeightFile;
use super::{LoadedMatrix, ReadError, SafetensorsFile};
use crate::matrix::SourceDtype;

/// What stands for the weight file of a model in memory in messages and in
/// a certificate's `model.path` and `model.files[].file`.
pub const MEMORY_LABEL: &str = "<memory>";

/// What stands for the config of a model in memory in messages (where a
/// model on disk names its `config.json`).
pub(crate) const MEMORY_CONFIG_LABEL: &str = "<memory config>";

/// The element types a tensor in memory may have.
pub(crate) const SUPPORTED: &str = "F16, BF16, F32, F64";

/// One named tensor in memory: its elements, row-major (C order),
/// little-endian, as `dtype` stores them.
#[derive(Clone, Copy, Debug)]
pub struct MemoryTensor<'a> {
    /// The parameter name (`encoder.layer.0.attention.self.query.weight`).
    pub name: &'a str,
    /// The element type (F16, BF16, F32 or F64; anything else is refused).
    pub dtype: SourceDtype,
    /// The shape.
    pub shape: &'a [usize],
    /// The bytes: exactly `dtype.itemsize() * shape.iter().product()`.
    pub data: &'a [u8],
}

/// A model in memory: the safetensors serialisation of its tensors, its
/// SHA-256 and its `config.json` (as a JSON value). Cheap to clone (a
/// shared handle); the model's [`key`](Self::key) opens it while a handle
/// lives.
#[derive(Clone)]
pub struct MemoryModel(Arc<Inner>);

struct Inner {
    file: SafetensorsFile,
    sha256: String,
    config: Option<serde_json::Value>,
    key: PathBuf,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Ok(mut r) = REGISTRY.lock() {
            r.remove(&self.key);
        }
    }
}

/// The models in memory that live, by key.
static REGISTRY: Mutex<BTreeMap<PathBuf, Weak<Inner>>> = Mutex::new(BTreeMap::new());
static NEXT: AtomicU64 = AtomicU64::new(0);

impl std::fmt::Debug for MemoryModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MemoryModel({} tensors, sha256 {})",
            self.0.file.names().len(),
            self.0.sha256
        )
    }
}

/// Two handles are equal when they are the same model (not when two models
/// hold equal tensors: compare [`MemoryModel::sha256`] for that).
impl PartialEq for MemoryModel {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for MemoryModel {}

/// A tensor's dtype and shape, without its bytes: what the crate needs to
/// write the header.
struct HeaderOnly<'a> {
    dtype: Dtype,
    shape: &'a [usize],
    len: usize,
}

impl View for HeaderOnly<'_> {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&[])
    }
    fn data_len(&self) -> usize {
        self.len
    }
}

fn st_dtype(d: SourceDtype) -> Option<Dtype> {
    match d {
        SourceDtype::F16 => Some(Dtype::F16),
        SourceDtype::BF16 => Some(Dtype::BF16),
        SourceDtype::F32 => Some(Dtype::F32),
        SourceDtype::F64 => Some(Dtype::F64),
        // Integer buffers (`position_ids`, masks) travel as on disk: a
        // proxy never reads them, and a used one is refused by the reader,
        // naming it, as the same tensor in a file is.
        SourceDtype::Int(t) => match t {
            "I8" => Some(Dtype::I8),
            "I16" => Some(Dtype::I16),
            "I32" => Some(Dtype::I32),
            "I64" => Some(Dtype::I64),
            "U8" => Some(Dtype::U8),
            "U16" => Some(Dtype::U16),
            "U32" => Some(Dtype::U32),
            "U64" => Some(Dtype::U64),
            _ => None,
        },
        SourceDtype::Quantized(_) => None,
    }
}

impl MemoryModel {
    /// The model of `tensors` (distinct names, float dtypes, byte counts
    /// that match dtype × shape) and `config` (the parsed `config.json`,
    /// when there is one). The tensors' bytes are copied once, into the
    /// serialisation; every error names the tensor.
    pub fn new(
        tensors: &[MemoryTensor<'_>],
        config: Option<serde_json::Value>,
    ) -> Result<Self, ReadError> {
        let label = Path::new(MEMORY_LABEL);
        let mut seen = std::collections::HashSet::with_capacity(tensors.len());
        let mut views = Vec::with_capacity(tensors.len());
        let mut total: usize = 0;
        for t in tensors {
            if !seen.insert(t.name) {
                return Err(ReadError::format(label, Some(t.name), "tensor given twice"));
            }
            let Some(dtype) = st_dtype(t.dtype) else {
                return Err(ReadError::UnsupportedDtype {
                    path: label.to_path_buf(),
                    tensor: Some(t.name.to_string()),
                    dtype: format!("{:?}", t.dtype),
                    supported: SUPPORTED,
                    note: None,
                });
            };
            let need = t
                .shape
                .iter()
                .try_fold(t.dtype.itemsize(), |a, &d| a.checked_mul(d));
            if need != Some(t.data.len()) {
                return Err(ReadError::format(
                    label,
                    Some(t.name),
                    format!(
                        "shape {:?} of {} needs {} bytes, {} were given",
                        t.shape,
                        dtype,
                        need.map_or_else(|| "more than usize::MAX".into(), |n| n.to_string()),
                        t.data.len()
                    ),
                ));
            }
            total = total
                .checked_add(t.data.len())
                .ok_or_else(|| ReadError::format(label, Some(t.name), "sizes overflow"))?;
            views.push((
                t.name,
                HeaderOnly {
                    dtype,
                    shape: t.shape,
                    len: t.data.len(),
                },
            ));
        }
        // The crate writes the header (its order, its JSON, its padding);
        // the views give no bytes, so this is the 8-byte length and header.
        let head = ::safetensors::tensor::serialize(views, None)
            .map_err(|e| ReadError::format(label, None, format!("cannot serialise: {e}")))?;
        let size = head
            .len()
            .checked_add(total)
            .ok_or_else(|| ReadError::format(label, None, "sizes overflow"))?;
        let mut map = memmap2::MmapMut::map_anon(size).map_err(|e| ReadError::io(label, e))?;
        map[..head.len()].copy_from_slice(&head);
        let offsets: Vec<(usize, usize)> = {
            let (_, meta) = SafeTensors::read_metadata(&map).map_err(|e| {
                ReadError::format(label, None, format!("serialisation unreadable: {e}"))
            })?;
            tensors
                .iter()
                .map(|t| meta.info(t.name).map(|i| i.data_offsets))
                .collect::<Option<_>>()
                .ok_or_else(|| ReadError::format(label, None, "serialisation lost a tensor"))?
        };
        for (t, (b, e)) in tensors.iter().zip(offsets) {
            map[head.len() + b..head.len() + e].copy_from_slice(t.data);
        }
        let map = map.make_read_only().map_err(|e| ReadError::io(label, e))?;
        let sha256 = format!("{:x}", Sha256::digest(&map[..]));
        let file = SafetensorsFile::from_memory(label, map)?;
        let key = PathBuf::from(format!(
            "\u{0}specbound-memory-{}",
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let inner = Arc::new(Inner {
            file,
            sha256,
            config,
            key: key.clone(),
        });
        REGISTRY
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key, Arc::downgrade(&inner));
        Ok(MemoryModel(inner))
    }

    /// Lower-case hex SHA-256 of the serialisation (module documentation:
    /// the SHA-256 of the same tensors saved by `safetensors`).
    pub fn sha256(&self) -> &str {
        &self.0.sha256
    }

    /// The serialisation: the bytes of the safetensors file these tensors
    /// would be saved as.
    pub fn bytes(&self) -> &[u8] {
        self.0.file.bytes()
    }

    /// The model's `config.json`, when one was given.
    pub(crate) fn config(&self) -> Option<&serde_json::Value> {
        self.0.config.as_ref()
    }

    /// The path that opens this model ([`Checkpoint::open`]) while a
    /// handle lives: it holds a NUL byte, so no file has it.
    ///
    /// [`Checkpoint::open`]: super::checkpoint::Checkpoint::open
    pub fn key(&self) -> &Path {
        &self.0.key
    }

    /// The model whose [`key`](Self::key) is `path`, if it lives.
    pub(crate) fn lookup(path: &Path) -> Option<MemoryModel> {
        if !is_memory_key(path) {
            return None;
        }
        let r = REGISTRY
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        r.get(path).and_then(Weak::upgrade).map(MemoryModel)
    }

    pub(crate) fn file(&self) -> &SafetensorsFile {
        &self.0.file
    }
}

/// A model in memory in a checkpoint: read as its serialisation (a
/// safetensors file) is, hashed as that serialisation; a 1-D tensor is
/// refused as for any file but one on disk in safetensors.
impl WeightFile for MemoryModel {
    fn path(&self) -> &Path {
        self.file().path()
    }
    fn hashes(&self) -> Result<Vec<(PathBuf, String)>, ReadError> {
        Ok(vec![(
            self.file().path().to_path_buf(),
            self.sha256().to_string(),
        )])
    }
    fn release(&self, name: &str) {
        self.file().release(name)
    }
    fn names(&self) -> Vec<String> {
        self.file().names().to_vec()
    }
    fn info(&self, name: &str) -> Option<(Vec<usize>, String)> {
        self.file().info(name)
    }
    fn two_d_candidates(&self) -> Vec<String> {
        self.file().two_d_candidates()
    }
    fn read(&self, name: &str) -> Result<LoadedMatrix, ReadError> {
        self.file().read(name)
    }
    fn read_flattened(&self, name: &str) -> Result<LoadedMatrix, ReadError> {
        self.file().read_flattened(name)
    }
    fn read_slice(&self, name: &str, index: usize) -> Result<LoadedMatrix, ReadError> {
        self.file().read_slice(name, index)
    }
    fn is_memory(&self) -> bool {
        true
    }
}

/// Whether `path` is shaped like a [`MemoryModel::key`] (whether or not
/// that model still lives).
pub(crate) fn is_memory_key(path: &Path) -> bool {
    path.as_os_str()
        .to_str()
        .is_some_and(|s| s.starts_with("\u{0}specbound-memory-"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32_bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn the_serialisation_is_the_crates_and_the_key_lives_with_the_model() {
        let a = f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let b: Vec<u8> = [1.5f64, -2.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let tensors = [
            MemoryTensor {
                name: "w",
                dtype: SourceDtype::F32,
                shape: &[2, 3],
                data: &a,
            },
            MemoryTensor {
                name: "b",
                dtype: SourceDtype::F64,
                shape: &[2],
                data: &b,
            },
        ];
        let m = MemoryModel::new(&tensors, None).unwrap();
        let views: Vec<(&str, ::safetensors::tensor::TensorView<'_>)> = tensors
            .iter()
            .map(|t| {
                let d = st_dtype(t.dtype).unwrap();
                (
                    t.name,
                    ::safetensors::tensor::TensorView::new(d, t.shape.to_vec(), t.data).unwrap(),
                )
            })
            .collect();
        let want = ::safetensors::tensor::serialize(views, None).unwrap();
        assert_eq!(m.bytes(), &want[..]);
        assert_eq!(m.sha256(), format!("{:x}", Sha256::digest(&want)));
        let key = m.key().to_path_buf();
        assert!(MemoryModel::lookup(&key).is_some_and(|x| x == m));
        drop(m);
        assert!(MemoryModel::lookup(&key).is_none());
    }

    #[test]
    fn bad_tensors_are_named() {
        let a = f32_bytes(&[1.0, 2.0, 3.0]);
        let t = |name, dtype, shape: &'static [usize]| MemoryTensor {
            name,
            dtype,
            shape,
            data: &a,
        };
        let msg = |ts: &[MemoryTensor<'_>]| MemoryModel::new(ts, None).unwrap_err().to_string();
        assert!(msg(&[t("x", SourceDtype::F32, &[2, 2])]).contains("tensor 'x': shape [2, 2]"));
        assert!(msg(&[t("i", SourceDtype::Int("I32"), &[2, 2])]).contains("tensor 'i': shape"));
        let m = msg(&[
            t("d", SourceDtype::F32, &[3]),
            t("d", SourceDtype::F32, &[3]),
        ]);
        assert!(m.contains("tensor 'd': tensor given twice"), "{m}");
    }
}
