//! PyTorch checkpoints (`pytorch_model.bin`, `.pt`, `.pth`): the zip
//! container of torch 1.6 and later and the legacy pickle stream of torch
//! 0.1.10 to 1.5, read with `pytorch-reader` (from the Burn project).
//!
//! Safety: nothing in a pickle is ever executed (the reader is a Rust stack
//! machine that interprets only the tensor-rebuild calls), and before the
//! reader sees a pickle, [`super::pickle_scan`] refuses every global a
//! state dict does not need, naming it. Tensor bytes are read lazily, one
//! tensor at a time, and converted to f64 exactly
//! ([`proofs/exact-conversion.md`](crate::proofs::exact_conversion), L1), as for safetensors.
//!
//! The file is opened once; the scan reads the pickle through that
//! descriptor and the reader opens the same file again through
//! `/proc/self/fd/N` (Linux), so a file replaced between the scan and the
//! read cannot slip past the allow-list.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use pytorch_reader::{DType, PytorchReader, Tensor};

use super::limits::{MAX_PICKLE_BYTES, MAX_PICKLE_OPS};
use super::pickle_scan::Scanner;
use super::weight_file::WeightFile;
use super::{check_finite, fmt_shape, LoadedMatrix, ReadError};
use crate::matrix::{DenseMatrix, SourceDtype};

const SUPPORTED: &str = "F16, BF16, F32, F64";

/// The legacy container's magic number 0x1950a86a20f9469cfc6c, as protocol
/// 2 and later write it (little-endian in a LONG1), and as protocols 0 and
/// 1 write it (decimal text): the reader looks for either in the first 64
/// bytes, and so do we.
const LEGACY_MAGIC_BYTES: [u8; 10] = [0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19];
const LEGACY_MAGIC_TEXT: &[u8] = b"119547037146038801333356";

/// Which container a file is, judged from its first bytes as the reader
/// judges it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Container {
    /// The zip archive of torch 1.6 and later (`data.pkl` + `data/N`).
    Zip,
    /// The legacy pickle stream of torch 0.1.10 to 1.5.
    Legacy,
    /// The tar archive of torch before 0.1.10 (not read).
    Tar,
}

/// The container of a file whose first bytes (at least 262 where the file
/// has them) are `head`, or `None` when it is none of them.
pub(crate) fn container_of(head: &[u8]) -> Option<Container> {
    if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
        return Some(Container::Zip);
    }
    if head.get(257..262) == Some(b"ustar") {
        return Some(Container::Tar);
    }
    let w = &head[..head.len().min(64)];
    if w.windows(LEGACY_MAGIC_BYTES.len())
        .any(|x| x == LEGACY_MAGIC_BYTES)
        || w.windows(LEGACY_MAGIC_TEXT.len())
            .any(|x| x == LEGACY_MAGIC_TEXT)
    {
        return Some(Container::Legacy);
    }
    None
}

/// Whether a zip archive's first entry names a PyTorch checkpoint
/// (`.../data.pkl` or under `.../data/`), judged from the first bytes.
pub(crate) fn zip_looks_like_torch(head: &[u8]) -> bool {
    let name: &[u8] = match head.get(26..28) {
        Some(l) => {
            let len = u16::from_le_bytes([l[0], l[1]]) as usize;
            head.get(30..).map_or(&[][..], |r| &r[..len.min(r.len())])
        }
        None => &[],
    };
    name.ends_with(b"data.pkl") || name.windows(6).any(|w| w == b"/data/")
}

fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::F64 => "F64",
        DType::F32 => "F32",
        DType::F16 => "F16",
        DType::BF16 => "BF16",
        DType::I64 => "I64",
        DType::I32 => "I32",
        DType::I16 => "I16",
        DType::I8 => "I8",
        DType::U64 => "U64",
        DType::U32 => "U32",
        DType::U16 => "U16",
        DType::U8 => "U8",
        DType::Bool => "BOOL",
    }
}

/// An opened, scanned PyTorch checkpoint whose tensors are read one at a
/// time (every read converts exactly to f64 and checks finiteness).
pub struct PytorchFile {
    path: PathBuf,
    /// Held open: the reader reads this file, and hashing reads it too.
    file: File,
    /// The file's length when opened: no tensor may materialise more bytes
    /// than this ([`materialised_bytes`]).
    len: u64,
    tensors: HashMap<String, Tensor>,
    names: Vec<String>,
}

impl PytorchFile {
    /// Opens `path` (a regular file), checks its container, scans every
    /// pickle in it against the allow-list (refusing, with the global's
    /// name, anything a state dict does not need), then parses it with the
    /// reader. No tensor bytes are read here.
    pub fn open(path: &Path) -> Result<Self, ReadError> {
        let (mut file, meta) = super::limits::open_regular(path, "PyTorch checkpoint")?;
        let mut head = [0u8; 512];
        let n = super::read_head(&mut file, &mut head).map_err(|e| ReadError::io(path, e))?;
        let container = container_of(&head[..n])
            .ok_or_else(|| ReadError::format(path, None, super::not_a_state_dict(&head[..n])))?;
        match container {
            Container::Tar => {
                return Err(ReadError::format(
                    path,
                    None,
                    "is a tar-format PyTorch checkpoint (torch before 0.1.10), which specbound \
                     does not read: load it with torch and save the state dict again",
                ))
            }
            Container::Zip => scan_zip(path, &file, meta.len())?,
            Container::Legacy => scan_legacy(path, &mut file)?,
        }
        // The reader opens the file by path: give it the descriptor we
        // scanned, so that both see the same file.
        let via = descriptor_path(&file).unwrap_or_else(|| path.to_path_buf());
        let reader = PytorchReader::new(&via).map_err(|e| {
            ReadError::format(
                path,
                None,
                format!("cannot read the PyTorch checkpoint: {e}"),
            )
        })?;
        let tensors = reader.into_tensors();
        let mut names: Vec<String> = tensors.keys().cloned().collect();
        names.sort_by(|a, b| super::safetensors::natural_cmp(a, b));
        Ok(Self {
            path: path.to_path_buf(),
            file,
            len: meta.len(),
            tensors,
            names,
        })
    }

    /// All tensor names, naturally sorted.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Shape and dtype name of a tensor, if present.
    pub fn info(&self, name: &str) -> Option<(Vec<usize>, String)> {
        self.tensors
            .get(name)
            .map(|t| (t.shape().to_vec(), dtype_name(t.dtype()).to_string()))
    }

    /// SHA-256 (lower-case hex) of the whole file, read through the
    /// descriptor opened at [`open`](Self::open).
    pub(crate) fn sha256(&self) -> Result<String, ReadError> {
        use sha2::{Digest, Sha256};
        let mut f = self
            .file
            .try_clone()
            .map_err(|e| ReadError::io(&self.path, e))?;
        f.seek(SeekFrom::Start(0))
            .map_err(|e| ReadError::io(&self.path, e))?;
        let mut h = Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let k = f.read(&mut buf).map_err(|e| ReadError::io(&self.path, e))?;
            if k == 0 {
                break;
            }
            h.update(&buf[..k]);
        }
        Ok(format!("{:x}", h.finalize()))
    }

    /// Reads one 2-D float tensor as a row-major f64 matrix (exact
    /// conversion, L1; strided and transposed views are gathered by the
    /// reader into the tensor's logical row-major order).
    pub fn read(&self, name: &str) -> Result<LoadedMatrix, ReadError> {
        self.read_part(name, None, false)
    }

    /// Reads a float tensor of rank >= 2 flattened to `[shape[0], product
    /// of the rest]` (PyTorch's row-major order); 2-D tensors as
    /// [`Self::read`].
    pub(crate) fn read_flattened(&self, name: &str) -> Result<LoadedMatrix, ReadError> {
        self.read_part(name, None, true)
    }

    /// Reads slice `index` of a 3-D float tensor `[n, rows, cols]` (the
    /// fused experts of a Mixtral or Qwen-MoE state dict) as a `rows x cols`
    /// matrix, exactly as [`Self::read`] reads a 2-D one. The reader
    /// materialises the whole tensor, so each slice costs one read of it.
    pub(crate) fn read_slice(&self, name: &str, index: usize) -> Result<LoadedMatrix, ReadError> {
        self.read_part(name, Some(index), false)
    }

    fn read_part(
        &self,
        name: &str,
        slice: Option<usize>,
        flatten: bool,
    ) -> Result<LoadedMatrix, ReadError> {
        let Some(t) = self.tensors.get(name) else {
            return Err(ReadError::MissingTensor {
                path: self.path.clone(),
                tensor: name.to_string(),
                available: self.two_d_candidates(),
            });
        };
        let tname = Some(name);
        let dtype = match t.dtype() {
            DType::F64 => SourceDtype::F64,
            DType::F32 => SourceDtype::F32,
            DType::F16 => SourceDtype::F16,
            DType::BF16 => SourceDtype::BF16,
            other => {
                return Err(ReadError::UnsupportedDtype {
                    path: self.path.clone(),
                    tensor: Some(name.to_string()),
                    dtype: dtype_name(other).to_string(),
                    supported: SUPPORTED,
                    note: None,
                })
            }
        };
        let shape = t.shape().to_vec();
        let flat = || {
            shape[1..]
                .iter()
                .try_fold(1usize, |a, &d| a.checked_mul(d))
                .map(|rest| (1, shape[0], rest))
        };
        let (n, rows, cols) = match (shape.as_slice(), slice) {
            (&[r, c], None) => (1, r, c),
            (s, None) if flatten && s.len() > 2 && flat().is_some() => flat().expect("checked"),
            (&[n, r, c], Some(i)) if i < n => (n, r, c),
            (&[n, _, _], Some(i)) => {
                return Err(ReadError::format(
                    &self.path,
                    tname,
                    format!("slice {i} of a tensor of {n} slices"),
                ))
            }
            _ => {
                return Err(ReadError::NotTwoD {
                    path: self.path.clone(),
                    tensor: Some(name.to_string()),
                    shape,
                })
            }
        };
        if rows == 0 || cols == 0 {
            return Err(ReadError::Empty {
                path: self.path.clone(),
                tensor: Some(name.to_string()),
                shape,
            });
        }
        // Before the reader allocates anything: the bytes this tensor
        // materialises must exist in the file.
        materialised_bytes(&self.path, name, &shape, itemsize_of(t.dtype()), self.len)?;
        let bytes = t
            .read()
            .map_err(|e| ReadError::format(&self.path, tname, format!("cannot read: {e}")))?;
        let itemsize = dtype.itemsize();
        let want = rows
            .checked_mul(cols)
            .and_then(|e| e.checked_mul(n))
            .and_then(|e| e.checked_mul(itemsize));
        if want != Some(bytes.len()) {
            return Err(ReadError::format(
                &self.path,
                tname,
                format!(
                    "shape {} of {dtype} needs {} bytes, the reader returned {}",
                    fmt_shape(&shape),
                    want.map_or_else(|| "more than usize::MAX".into(), |b| b.to_string()),
                    bytes.len()
                ),
            ));
        }
        // The reader returns native-endian, row-major bytes; slice i is
        // the i-th run of rows * cols elements. The f64 copy is allocated
        // fallibly first (one line giving the bytes needed).
        let one = rows * cols * itemsize;
        let at = slice.unwrap_or(0) * one;
        let mut data = super::f64_buffer(&self.path, tname, rows, cols)?;
        Self::decode_ne(dtype, &bytes[at..at + one], &mut data);
        let matrix = DenseMatrix { rows, cols, data };
        check_finite(&self.path, tname, &matrix)?;
        Ok(LoadedMatrix { matrix, dtype })
    }

    /// Native-endian elements of a dense float dtype (the reader's
    /// order), each converted to f64 exactly (L1) by the one decoder of
    /// little-endian elements, appended to `data`. Native order is little
    /// on a little-endian target, so the bytes go to the decoder as they
    /// are; on a big-endian one each element's bytes are reversed first.
    fn decode_ne(dtype: SourceDtype, bytes: &[u8], data: &mut Vec<f64>) {
        if cfg!(target_endian = "little") {
            super::decode_le(dtype, bytes, data)
        } else {
            Self::decode_swapped(dtype, bytes, data)
        }
    }

    /// Elements of a dense float dtype whose bytes are in big-endian order,
    /// each reversed into little-endian order and converted by
    /// [`super::decode_le_one`] (exact, L1), appended to `data`.
    fn decode_swapped(dtype: SourceDtype, bytes: &[u8], data: &mut Vec<f64>) {
        let size = dtype.itemsize();
        data.extend(bytes.chunks_exact(size).map(|b| {
            let mut le = [0u8; 8];
            le[..size].copy_from_slice(b);
            le[..size].reverse();
            super::decode_le_one(dtype, &le)
        }));
    }

    /// All 2-D tensors of a supported dtype, in natural name order.
    pub(crate) fn two_d_candidates(&self) -> Vec<String> {
        self.names
            .iter()
            .filter(|n| {
                self.tensors.get(*n).is_some_and(|t| {
                    t.shape().len() == 2
                        && matches!(
                            t.dtype(),
                            DType::F64 | DType::F32 | DType::F16 | DType::BF16
                        )
                })
            })
            .cloned()
            .collect()
    }
}

/// A PyTorch checkpoint in a checkpoint directory: the inherent readers
/// (flattened reads and 3-D slices included); nothing to release, the
/// file being read, not mapped; hashed through its open descriptor.
impl WeightFile for PytorchFile {
    fn path(&self) -> &Path {
        &self.path
    }
    fn hashes(&self) -> Result<Vec<(PathBuf, String)>, ReadError> {
        Ok(vec![(self.path.clone(), self.sha256()?)])
    }
    fn names(&self) -> Vec<String> {
        self.names.clone()
    }
    fn info(&self, name: &str) -> Option<(Vec<usize>, String)> {
        PytorchFile::info(self, name)
    }
    fn two_d_candidates(&self) -> Vec<String> {
        PytorchFile::two_d_candidates(self)
    }
    fn read(&self, name: &str) -> Result<LoadedMatrix, ReadError> {
        PytorchFile::read(self, name)
    }
    fn read_flattened(&self, name: &str) -> Result<LoadedMatrix, ReadError> {
        PytorchFile::read_flattened(self, name)
    }
    fn read_slice(&self, name: &str, index: usize) -> Result<LoadedMatrix, ReadError> {
        PytorchFile::read_slice(self, name, index)
    }
}

fn itemsize_of(d: DType) -> u64 {
    d.size() as u64
}

/// The bytes a tensor of `shape` with `itemsize`-byte elements
/// materialises, refused (naming the tensor) when the product overflows or
/// when it exceeds the whole file's `file_len` (the one rule of every
/// strided source, [`super::limits::view_materialised_bytes`]).
///
/// The reader already checks that a view stays within its storage, and
/// [`scan_zip`] that no storage entry is larger than the file, but a view
/// may repeat its storage (a stride of 0, as `expand` makes, or strides
/// that overlap), so a few hundred bytes could claim gigabytes: such a
/// view is refused before any allocation. A view that does not alias its
/// storage takes at most the storage's bytes, which lie in the file (both
/// containers store them uncompressed), so no real checkpoint is refused,
/// and reading a tensor costs at most about `8 / itemsize + 2` times the
/// file's size whatever the file claims.
pub(crate) fn materialised_bytes(
    path: &Path,
    name: &str,
    shape: &[usize],
    itemsize: u64,
    file_len: u64,
) -> Result<u64, ReadError> {
    super::limits::view_materialised_bytes(
        shape,
        itemsize,
        file_len,
        "the whole file",
        "save tensor.contiguous() instead",
    )
    .map_err(|m| ReadError::format(path, Some(name), m))
}

/// `/proc/self/fd/N` for an open file, where the system has it.
fn descriptor_path(file: &File) -> Option<PathBuf> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::io::AsRawFd;
        let p = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        if p.exists() {
            return Some(p);
        }
    }
    let _ = file;
    None
}

fn scan_error(path: &Path, what: &str, e: super::pickle_scan::ScanError) -> ReadError {
    ReadError::format(path, None, format!("{what}: {e}"))
}

/// Scans `data.pkl` of a zip checkpoint. The reader takes the `data.pkl`
/// with the shortest directory prefix; an archive with more than one is
/// refused, so there is no doubt which one is read.
fn scan_zip(path: &Path, file: &File, len: u64) -> Result<(), ReadError> {
    let f = file.try_clone().map_err(|e| ReadError::io(path, e))?;
    let bad = |m: String| ReadError::format(path, None, m);
    let mut archive = zip::ZipArchive::new(BufReader::new(f))
        .map_err(|e| bad(format!("not a readable zip archive: {e}")))?;
    if archive.has_duplicate_names() {
        return Err(bad(
            "zip archive lists an entry name twice in its central directory (data.pkl or a \
             data/N storage): ambiguous PyTorch checkpoint"
                .to_string(),
        ));
    }
    // Every entry's bytes must exist in the file: torch.save stores
    // entries uncompressed, so an entry that claims more than the whole
    // file is a decompression bomb (a storage read would inflate it).
    for i in 0..archive.len() {
        let e = archive
            .by_index_data(i)
            .map_err(|e| bad(format!("not a readable zip archive: {e}")))?;
        if e.size() > len {
            let n = e.name().map(|n| n.to_string()).unwrap_or_default();
            return Err(bad(format!(
                "zip entry '{}' claims {} bytes uncompressed, more than the whole file ({len} \
                 bytes); torch.save stores entries uncompressed",
                super::fmt_name(&n),
                e.size()
            )));
        }
    }
    let names = archive
        .file_names()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("not a readable zip archive: {e}")))?;
    let pickles: Vec<String> = names
        .iter()
        .filter(|n| {
            n.strip_suffix("data.pkl")
                .is_some_and(|root| root.is_empty() || root.ends_with('/'))
        })
        .map(|n| n.to_string())
        .collect();
    drop(names);
    let name = match pickles.as_slice() {
        [one] => one.clone(),
        [] => {
            return Err(bad(
                "is a zip archive without data.pkl: not a PyTorch checkpoint".to_string(),
            ))
        }
        many => {
            return Err(bad(format!(
                "zip archive holds {} data.pkl entries ({}, ...): ambiguous PyTorch checkpoint",
                many.len(),
                super::fmt_name(&many[0])
            )))
        }
    };
    let mut entry = archive
        .by_name(&name)
        .map_err(|e| bad(format!("{name}: {e}")))?;
    if entry.size() > MAX_PICKLE_BYTES {
        return Err(bad(format!(
            "{name} is {} bytes, larger than the limit of {MAX_PICKLE_BYTES} bytes",
            entry.size()
        )));
    }
    if entry.size() == 0 {
        return Err(bad(format!(
            "{name} is empty (0 bytes): not a PyTorch checkpoint's pickle"
        )));
    }
    let mut pickle = Vec::with_capacity(entry.size().min(len) as usize);
    (&mut entry)
        .take(MAX_PICKLE_BYTES + 1)
        .read_to_end(&mut pickle)
        .map_err(|e| bad(format!("{name}: {e}")))?;
    if pickle.len() as u64 > MAX_PICKLE_BYTES {
        return Err(bad(format!(
            "{name} is larger than the limit of {MAX_PICKLE_BYTES} bytes"
        )));
    }
    super::pickle_scan::scan_bytes(&pickle, MAX_PICKLE_OPS).map_err(|e| scan_error(path, &name, e))
}

/// Scans the five pickles at the start of a legacy stream (magic number,
/// protocol version, system info, the saved object, the storage keys), in
/// the order the reader parses them.
fn scan_legacy(path: &Path, file: &mut File) -> Result<(), ReadError> {
    file.seek(SeekFrom::Start(0))
        .map_err(|e| ReadError::io(path, e))?;
    let mut r = BufReader::new(file.try_clone().map_err(|e| ReadError::io(path, e))?);
    let mut s = Scanner::new(MAX_PICKLE_OPS, MAX_PICKLE_BYTES);
    let mut offset = 0u64;
    for what in [
        "magic number",
        "protocol version",
        "system info",
        "saved object",
        "storage key list",
    ] {
        s.collect_strings(what == "storage key list");
        offset += s
            .scan(&mut r, offset)
            .map_err(|e| scan_error(path, &format!("legacy pickle ({what})"), e))?;
    }
    // The storages follow the key list in its order: a key listed twice
    // would make two storages claim one name (the reader would keep the
    // later), so it is refused.
    let mut keys = s.take_strings();
    keys.sort_unstable();
    if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
        return Err(ReadError::format(
            path,
            None,
            format!(
                "legacy storage key list names storage '{}' twice: ambiguous PyTorch checkpoint",
                super::fmt_name(&w[0])
            ),
        ));
    }
    file.seek(SeekFrom::Start(0))
        .map_err(|e| ReadError::io(path, e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swapped_elements_decode_as_their_little_endian_bytes() {
        // The big-endian path of decode_ne, run here: each element's bytes
        // reversed give the values of the one little-endian decoder.
        let values = [1.0, -0.5, 65504.0, 2f64.powi(-24), 0.0, -3.75];
        for (dtype, size) in [
            (SourceDtype::F64, 8),
            (SourceDtype::F32, 4),
            (SourceDtype::F16, 2),
            (SourceDtype::BF16, 2),
        ] {
            let le: Vec<u8> = values
                .iter()
                .flat_map(|&v| match dtype {
                    SourceDtype::F64 => v.to_le_bytes().to_vec(),
                    SourceDtype::F32 => (v as f32).to_le_bytes().to_vec(),
                    SourceDtype::F16 => half::f16::from_f64(v).to_le_bytes().to_vec(),
                    _ => half::bf16::from_f64(v).to_le_bytes().to_vec(),
                })
                .collect();
            let be: Vec<u8> = le
                .chunks_exact(size)
                .flat_map(|c| c.iter().rev().copied())
                .collect();
            let (mut want, mut got, mut ne) = (Vec::new(), Vec::new(), Vec::new());
            crate::io::decode_le(dtype, &le, &mut want);
            PytorchFile::decode_swapped(dtype, &be, &mut got);
            let native = if cfg!(target_endian = "little") {
                &le
            } else {
                &be
            };
            PytorchFile::decode_ne(dtype, native, &mut ne);
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "{dtype}");
            assert_eq!(bits(&ne), bits(&want), "{dtype}");
            assert_eq!(want.len(), values.len());
        }
    }

    #[test]
    fn materialised_bytes_are_checked_against_the_file_and_for_overflow() {
        let p = Path::new("m.pt");
        assert_eq!(materialised_bytes(p, "w", &[10, 10], 4, 400).unwrap(), 400);
        let e = materialised_bytes(p, "w", &[10, 10], 4, 399).unwrap_err();
        assert!(
            e.to_string()
                .contains("tensor 'w': shape [10, 10] of 4-byte elements would materialise 400 bytes, more than the whole file (399 bytes)"),
            "{e}"
        );
        let e = materialised_bytes(p, "w", &[usize::MAX, 2], 4, u64::MAX).unwrap_err();
        assert!(
            e.to_string().contains(
                "tensor 'w': shape [18446744073709551615, 2] of 4-byte elements overflows"
            ),
            "{e}"
        );
    }
}
