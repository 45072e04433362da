//! `.safetensors` reader: one 2-D F16 / BF16 / F32 / F64 tensor of a file.
//!
//! The file is memory-mapped and parsed with the `safetensors` crate, which
//! validates the header (JSON, offsets, byte counts against dtype × shape,
//! full coverage of the data section). Elements are decoded one by one with
//! `from_le_bytes`, so no alignment of the data is assumed.

use std::cmp::Ordering;
use std::path::{Path, PathBuf};

use ::safetensors::tensor::{Dtype, Metadata, SafeTensorError, SafeTensors, TensorInfo};
use memmap2::Mmap;

use super::limits::{MAX_SAFETENSORS_HEADER, MAX_SAFETENSORS_VALUES};
use super::weight_file::WeightFile;
use super::{check_finite, fmt_shape, foreign_format, LoadedMatrix, ReadError};
use crate::matrix::{DenseMatrix, SourceDtype};

const SUPPORTED: &str = "F16, BF16, F32, F64";

/// Largest header [`diagnose_offsets`] re-reads (bytes).
const DIAGNOSE_MAX_HEADER: usize = 1 << 20;

fn source_dtype(d: Dtype) -> Option<SourceDtype> {
    match d {
        Dtype::F16 => Some(SourceDtype::F16),
        Dtype::BF16 => Some(SourceDtype::BF16),
        Dtype::F32 => Some(SourceDtype::F32),
        Dtype::F64 => Some(SourceDtype::F64),
        _ => None,
    }
}

/// A memory-mapped, validated safetensors file from which tensors are read
/// one at a time (every read converts exactly to f64 and checks finiteness).
/// The header is parsed once, when the file is opened.
pub struct SafetensorsFile {
    path: std::path::PathBuf,
    mmap: Mmap,
    /// The open file and the map's registration (super::mapped); `None`
    /// for a serialisation held in anonymous memory ([`Self::from_memory`]),
    /// whose pages are never released (they are the only copy).
    guard: Option<super::mapped::MapGuard>,
    /// Where the data section starts (8 + header length).
    data_start: usize,
    meta: Metadata,
    names: Vec<String>,
}

impl SafetensorsFile {
    /// Maps and validates the file (header JSON, offsets, byte counts).
    pub fn open(path: &Path) -> Result<Self, ReadError> {
        let (mmap, guard, header_len, meta) = map_and_validate(path)?;
        let mut names: Vec<String> = meta.tensors().into_keys().collect();
        names.sort_by(|a, b| natural_cmp(a, b));
        Ok(Self {
            path: path.to_path_buf(),
            mmap,
            guard: Some(guard),
            data_start: 8 + header_len,
            meta,
            names,
        })
    }

    /// A safetensors serialisation held in memory (an anonymous map that
    /// this reader owns), validated as a file is; `label` stands for the
    /// file in messages.
    pub(crate) fn from_memory(label: &Path, mmap: Mmap) -> Result<Self, ReadError> {
        let (header_len, meta) = SafeTensors::read_metadata(&mmap)
            .map_err(|e| ReadError::format(label, None, describe_crate_error(&e, &mmap)))?;
        let mut names: Vec<String> = meta.tensors().into_keys().collect();
        names.sort_by(|a, b| natural_cmp(a, b));
        Ok(Self {
            path: label.to_path_buf(),
            mmap,
            guard: None,
            data_start: 8 + header_len,
            meta,
            names,
        })
    }

    /// The file's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// All tensor names, naturally sorted.
    pub(crate) fn names(&self) -> &[String] {
        &self.names
    }

    /// The raw bytes of the file (for hashing).
    pub fn bytes(&self) -> &[u8] {
        &self.mmap
    }

    /// Shape and dtype name of a tensor, if present.
    pub(crate) fn info(&self, name: &str) -> Option<(Vec<usize>, String)> {
        let t = self.meta.info(name)?;
        Some((t.shape.clone(), t.dtype.to_string()))
    }

    /// Reads one 2-D float tensor as a row-major f64 matrix (exact conversion).
    pub fn read(&self, name: &str) -> Result<LoadedMatrix, ReadError> {
        let Some(info) = self.meta.info(name) else {
            return Err(ReadError::MissingTensor {
                path: self.path.clone(),
                tensor: name.to_string(),
                available: self.two_d_candidates(),
            });
        };
        // The file may have been truncated since it was mapped.
        if let Some(g) = &self.guard {
            g.check_len()?;
        }
        // In range: the crate checked that the offsets tile the data section,
        // which ends at the end of the file.
        let (b, e) = info.data_offsets;
        let bytes = &self.mmap[self.data_start + b..self.data_start + e];
        decode_tensor(&self.path, name, info, bytes)
    }

    /// Reads a 1-D float tensor as a `1 x n` matrix (exact conversion, L1):
    /// a vector such as a LayerScale's.
    pub(crate) fn read_vector(&self, name: &str) -> Result<LoadedMatrix, ReadError> {
        let Some(info) = self.meta.info(name) else {
            return self.read(name);
        };
        if info.shape.len() != 1 {
            return Err(ReadError::format(
                &self.path,
                Some(name),
                format!("expected a 1-D tensor, found shape {:?}", info.shape),
            ));
        }
        if let Some(g) = &self.guard {
            g.check_len()?;
        }
        let mut flat = info.clone();
        flat.shape = vec![1, info.shape[0]];
        let (b, e) = info.data_offsets;
        let bytes = &self.mmap[self.data_start + b..self.data_start + e];
        decode_tensor(&self.path, name, &flat, bytes)
    }

    /// Reads a float tensor of rank >= 2 as the row-major matrix
    /// `[shape[0], shape[1] * ... * shape[k-1]]` (its bytes unchanged, so
    /// entry `(r, c)` is the stored element of flat index `r * cols + c`;
    /// exact conversion, L1). For 2-D tensors this is [`Self::read`].
    pub(crate) fn read_flattened(&self, name: &str) -> Result<LoadedMatrix, ReadError> {
        let Some(info) = self.meta.info(name) else {
            return self.read(name);
        };
        if info.shape.len() <= 2 {
            return self.read(name);
        }
        let cols = info.shape[1..]
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or_else(|| ReadError::format(&self.path, Some(name), "the shape overflows"))?;
        let mut flat = info.clone();
        flat.shape = vec![info.shape[0], cols];
        let (b, e) = info.data_offsets;
        let bytes = &self.mmap[self.data_start + b..self.data_start + e];
        decode_tensor(&self.path, name, &flat, bytes)
    }

    /// Reads slice `index` of a 3-D float tensor `[n, rows, cols]` as the
    /// row-major `rows x cols` matrix `tensor[index]` (exact conversion,
    /// L1): only that slice's bytes are decoded, so that one expert of
    /// transformers v5's fused expert tensors is read without the others.
    pub(crate) fn read_slice(&self, name: &str, index: usize) -> Result<LoadedMatrix, ReadError> {
        let Some(info) = self.meta.info(name) else {
            return self.read(name);
        };
        let [n, rows, cols] = <[usize; 3]>::try_from(info.shape.as_slice()).map_err(|_| {
            ReadError::format(
                &self.path,
                Some(name),
                format!("expected a 3-D tensor, found shape {:?}", info.shape),
            )
        })?;
        if index >= n {
            return Err(ReadError::format(
                &self.path,
                Some(name),
                format!("slice {index} of a tensor of {n} slices"),
            ));
        }
        if let Some(g) = &self.guard {
            g.check_len()?;
        }
        let (b, e) = info.data_offsets;
        // The crate checked that the offsets hold n * rows * cols elements,
        // so the slice's bytes lie inside them.
        let slice = (e - b) / n;
        let start = self.data_start + b + index * slice;
        let mut one = info.clone();
        one.shape = vec![rows, cols];
        decode_tensor(&self.path, name, &one, &self.mmap[start..start + slice])
    }

    /// The file mapping (for [`super::release_pages`]).
    pub(crate) fn bytes_map(&self) -> &Mmap {
        &self.mmap
    }

    /// Releases the file pages of a tensor from resident memory
    /// (`release_pages`); a no-op for an unknown name and for a
    /// serialisation in memory (releasing anonymous pages would lose them).
    pub(crate) fn release(&self, name: &str) {
        if self.guard.is_none() {
            return;
        }
        if let Some(info) = self.meta.info(name) {
            let (b, e) = info.data_offsets;
            super::release_pages(&self.mmap, self.data_start + b, e - b);
        }
    }

    /// All 2-D tensors of a supported dtype, in natural name order.
    pub(crate) fn two_d_candidates(&self) -> Vec<String> {
        self.names
            .iter()
            .filter(|n| {
                self.meta
                    .info(n)
                    .is_some_and(|t| t.shape.len() == 2 && source_dtype(t.dtype).is_some())
            })
            .cloned()
            .collect()
    }
}

/// A safetensors file in a checkpoint: the inherent readers, the
/// file's pages released after each read.
impl WeightFile for SafetensorsFile {
    fn path(&self) -> &Path {
        SafetensorsFile::path(self)
    }
    fn hashes(&self) -> Result<Vec<(PathBuf, String)>, ReadError> {
        let sha = super::sha256_of_map(self.bytes_map());
        Ok(vec![(self.path.clone(), sha)])
    }
    fn release(&self, name: &str) {
        SafetensorsFile::release(self, name)
    }
    fn names(&self) -> Vec<String> {
        SafetensorsFile::names(self).to_vec()
    }
    fn info(&self, name: &str) -> Option<(Vec<usize>, String)> {
        SafetensorsFile::info(self, name)
    }
    fn two_d_candidates(&self) -> Vec<String> {
        SafetensorsFile::two_d_candidates(self)
    }
    fn read(&self, name: &str) -> Result<LoadedMatrix, ReadError> {
        SafetensorsFile::read(self, name)
    }
    fn read_vector(&self, name: &str) -> Result<LoadedMatrix, ReadError> {
        SafetensorsFile::read_vector(self, name)
    }
    fn read_flattened(&self, name: &str) -> Result<LoadedMatrix, ReadError> {
        SafetensorsFile::read_flattened(self, name)
    }
    fn read_slice(&self, name: &str, index: usize) -> Result<LoadedMatrix, ReadError> {
        SafetensorsFile::read_slice(self, name, index)
    }
}

/// Opens (regular files only), maps and validates a safetensors file;
/// returns the map, the header length and the parsed header.
fn map_and_validate(
    path: &Path,
) -> Result<(Mmap, super::mapped::MapGuard, usize, Metadata), ReadError> {
    let (mut file, meta) = super::limits::open_regular(path, "safetensors file")?;
    let file_len = meta.len();
    if file_len < 8 {
        let mut head = [0u8; 8];
        let n = super::read_head(&mut file, &mut head).map_err(|e| ReadError::io(path, e))?;
        if let Some(what) = foreign_format(&head[..n]) {
            return Err(ReadError::format(path, None, what));
        }
        return Err(ReadError::format(
            path,
            None,
            format!(
                "file is {file_len} bytes, too short for a safetensors file \
                 (8-byte header length, then a JSON header)"
            ),
        ));
    }
    // A file truncated while mapped is an error naming it, not a SIGBUS
    // death (super::mapped); one rewritten in place may change values, as
    // with any reader.
    let (mmap, guard) = super::mapped::map(&file, path)?;
    let buf: &[u8] = &mmap;
    let declared = u64::from_le_bytes(buf[..8].try_into().expect("8 bytes"));
    // Our cap, below the crate's 100 MB: the parsed header costs several
    // times its size. Longer-than-the-file lengths are left to the crate's
    // message.
    if declared > MAX_SAFETENSORS_HEADER && declared <= file_len - 8 {
        if let Some(what) = foreign_format(&buf[..buf.len().min(super::HEAD_BYTES)]) {
            return Err(ReadError::format(path, None, what));
        }
        return Err(ReadError::format(
            path,
            None,
            format!(
                "safetensors header of {declared} bytes exceeds the limit of \
                 {MAX_SAFETENSORS_HEADER} bytes"
            ),
        ));
    }
    // The crate's parse costs about 40 bytes per JSON value (a shape of
    // millions of 1s is 20 times its text): bound the count first, in a
    // pass that allocates nothing.
    if let Some(values) = header_value_count(buf) {
        if values > MAX_SAFETENSORS_VALUES {
            return Err(ReadError::format(
                path,
                None,
                format!(
                    "safetensors header holds more than {MAX_SAFETENSORS_VALUES} JSON values \
                     (12 per 2-D tensor in a real file)"
                ),
            ));
        }
    }
    match SafeTensors::read_metadata(buf) {
        Ok((n, meta)) => Ok((mmap, guard, n, meta)),
        Err(e) => {
            if let Some(what) = foreign_format(&buf[..buf.len().min(super::HEAD_BYTES)]) {
                return Err(ReadError::format(path, None, what));
            }
            let mut msg = describe_crate_error(&e, buf);
            let culprit = match e {
                SafeTensorError::TensorInvalidInfo
                | SafeTensorError::InvalidOffset(_)
                | SafeTensorError::MetadataIncompleteBuffer
                | SafeTensorError::ValidationOverflow => diagnose_offsets(buf),
                _ => None,
            };
            let tensor = culprit.map(|(name, detail)| {
                msg.push_str(": ");
                msg.push_str(&detail);
                name
            });
            Err(ReadError::format(path, tensor.as_deref(), msg))
        }
    }
}

/// Reads one 2-D tensor of a safetensors file as a row-major `f64` matrix.
///
/// With `tensor == None` the file must hold exactly one 2-D tensor of a
/// supported dtype (F16, BF16, F32, F64), which is then read; otherwise the
/// error is [`ReadError::TensorNeeded`], listing the candidates.
pub fn read_safetensors(path: &Path, tensor: Option<&str>) -> Result<LoadedMatrix, ReadError> {
    let f = SafetensorsFile::open(path)?;
    match tensor {
        Some(n) => f.read(n),
        None => {
            let candidates = f.two_d_candidates();
            if candidates.len() == 1 {
                f.read(&candidates[0])
            } else {
                Err(ReadError::TensorNeeded {
                    path: path.to_path_buf(),
                    available: candidates,
                })
            }
        }
    }
}

fn decode_tensor(
    path: &Path,
    name: &str,
    info: &TensorInfo,
    bytes: &[u8],
) -> Result<LoadedMatrix, ReadError> {
    let tname = Some(name);
    let dtype = source_dtype(info.dtype).ok_or_else(|| ReadError::UnsupportedDtype {
        path: path.to_path_buf(),
        tensor: Some(name.to_string()),
        dtype: info.dtype.to_string(),
        supported: SUPPORTED,
        note: None,
    })?;
    let shape = info.shape.clone();
    if shape.len() != 2 {
        return Err(ReadError::NotTwoD {
            path: path.to_path_buf(),
            tensor: Some(name.to_string()),
            shape,
        });
    }
    let (rows, cols) = (shape[0], shape[1]);
    if rows == 0 || cols == 0 {
        return Err(ReadError::Empty {
            path: path.to_path_buf(),
            tensor: Some(name.to_string()),
            shape,
        });
    }
    let itemsize = dtype.itemsize();
    // The crate has validated this already; check again before allocating.
    let n = rows.checked_mul(cols);
    let nbytes = n.and_then(|n| n.checked_mul(itemsize));
    if nbytes != Some(bytes.len()) {
        return Err(ReadError::format(
            path,
            tname,
            format!(
                "shape {shape:?} of {dtype} needs {} bytes, the tensor has {}",
                nbytes.map_or_else(|| "more than usize::MAX".to_string(), |b| b.to_string()),
                bytes.len()
            ),
        ));
    }
    let mut data = super::f64_buffer(path, tname, rows, cols)?;
    super::decode_le(dtype, bytes, &mut data);
    let matrix = DenseMatrix { rows, cols, data };
    check_finite(path, tname, &matrix)?;
    Ok(LoadedMatrix { matrix, dtype })
}

/// The number of JSON values (scalars and containers) in the header, or
/// `None` when the length or the JSON is bad (the crate then says why).
/// Counting stops soon after [`MAX_SAFETENSORS_VALUES`]; nothing is
/// allocated (keys and strings are borrowed or skipped).
fn header_value_count(buf: &[u8]) -> Option<u64> {
    let n = usize::try_from(u64::from_le_bytes(buf.get(..8)?.try_into().ok()?)).ok()?;
    let header = buf.get(8..8usize.checked_add(n)?)?;
    let count = std::cell::Cell::new(0u64);
    let mut de = serde_json::Deserializer::from_slice(header);
    match serde::de::DeserializeSeed::deserialize(CountValues(&count), &mut de) {
        Ok(()) => Some(count.get()),
        // Stopped at the limit, or bad JSON: the count so far says which.
        Err(_) => (count.get() > MAX_SAFETENSORS_VALUES).then(|| count.get()),
    }
}

/// Counts every value it is handed, recursively, into the shared cell;
/// fails once past [`MAX_SAFETENSORS_VALUES`].
#[derive(Clone, Copy)]
struct CountValues<'c>(&'c std::cell::Cell<u64>);

impl CountValues<'_> {
    fn bump<E: serde::de::Error>(self) -> Result<(), E> {
        let k = self.0.get() + 1;
        self.0.set(k);
        if k > MAX_SAFETENSORS_VALUES {
            return Err(E::custom("too many values"));
        }
        Ok(())
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for CountValues<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for CountValues<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
        self.bump()
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
        self.bump()
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
        self.bump()
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
        self.bump()
    }
    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<(), E> {
        self.bump()
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.bump()
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<(), A::Error> {
        self.bump()?;
        while a.next_element_seed(self)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<(), A::Error> {
        self.bump()?;
        while a.next_key::<serde::de::IgnoredAny>()?.is_some() {
            self.bump()?;
            a.next_value_seed(self)?;
        }
        Ok(())
    }
}

/// The crate's message, with the numbers that make it actionable where we
/// can compute them cheaply.
fn describe_crate_error(e: &SafeTensorError, buf: &[u8]) -> String {
    let mut msg = format!("invalid safetensors file: {e}");
    if let SafeTensorError::InvalidHeaderLength | SafeTensorError::HeaderTooLarge = e {
        if let Some(n) = buf.get(..8) {
            let n = u64::from_le_bytes(n.try_into().expect("8 bytes"));
            msg.push_str(&format!(
                " (header length {n} declared, file has {} bytes after the 8-byte length)",
                buf.len() - 8
            ));
        }
    }
    msg
}

/// After the crate rejected the tensor table, finds the first tensor whose
/// byte range is wrong and says why, with the numbers. Best effort: `None`
/// if the header cannot be re-read or no single tensor is to blame.
fn diagnose_offsets(buf: &[u8]) -> Option<(String, String)> {
    let n = usize::try_from(u64::from_le_bytes(buf.get(..8)?.try_into().ok()?)).ok()?;
    // A JSON tree costs up to 16 times the text: diagnose real-size headers only.
    if n > DIAGNOSE_MAX_HEADER {
        return None;
    }
    let header = buf.get(8..8usize.checked_add(n)?)?;
    let table: std::collections::BTreeMap<String, serde_json::Value> =
        serde_json::from_slice(header).ok()?;
    let data_len = buf.len() - 8 - n;
    let mut infos: Vec<(String, TensorInfo)> = Vec::new();
    for (name, v) in table {
        if name == "__metadata__" {
            continue;
        }
        let info: TensorInfo = serde_json::from_value(v).ok()?;
        let (b, e) = info.data_offsets;
        let need = info
            .shape
            .iter()
            .try_fold(info.dtype.bitsize(), |acc, &d| acc.checked_mul(d))
            .map(|bits| bits.div_ceil(8));
        let Some(need) = need else {
            let detail = format!(
                "shape {} of {} overflows the address space",
                fmt_shape(&info.shape),
                info.dtype
            );
            return Some((name, detail));
        };
        if e < b || e - b != need {
            let detail = format!(
                "shape {} of {} needs {need} bytes, but data_offsets [{b}, {e}] give {}",
                fmt_shape(&info.shape),
                info.dtype,
                if e < b {
                    "a negative range".to_string()
                } else {
                    format!("{}", e - b)
                }
            );
            return Some((name, detail));
        }
        if e > data_len {
            let detail =
                format!("data_offsets [{b}, {e}] end beyond the {data_len}-byte data section");
            return Some((name, detail));
        }
        infos.push((name, info));
    }
    infos.sort_by_key(|(_, i)| i.data_offsets);
    let mut end = 0;
    for (name, info) in infos {
        let (b, e) = info.data_offsets;
        if b != end {
            let detail = format!(
                "data_offsets [{b}, {e}] do not start where the previous tensor ends \
                 (byte {end}); tensors must tile the data section"
            );
            return Some((name, detail));
        }
        end = e;
    }
    None
}

/// Orders names with digit runs compared as numbers, so that
/// `layer.2` < `layer.10`.
pub(crate) fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i].is_ascii_digit() && b[j].is_ascii_digit() {
            let si = i;
            while i < a.len() && a[i].is_ascii_digit() {
                i += 1;
            }
            let sj = j;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            let da = trim_zeros(&a[si..i]);
            let db = trim_zeros(&b[sj..j]);
            let ord = da.len().cmp(&db.len()).then_with(|| da.cmp(db));
            if ord != Ordering::Equal {
                return ord;
            }
        } else {
            if a[i] != b[j] {
                return a[i].cmp(&b[j]);
            }
            i += 1;
            j += 1;
        }
    }
    (a.len() - i).cmp(&(b.len() - j)).then_with(|| a.cmp(b))
}

fn trim_zeros(d: &[u8]) -> &[u8] {
    let k = d.iter().position(|&c| c != b'0').unwrap_or(d.len());
    &d[k..]
}

#[cfg(test)]
mod tests {
    use super::super::test_util::TempPath;
    use super::*;
    use ::safetensors::tensor::TensorView;

    /// Serialises (name, dtype, shape, bytes) tensors with the crate.
    fn st_file(name: &str, tensors: &[(&str, Dtype, Vec<usize>, Vec<u8>)]) -> TempPath {
        let views: Vec<(String, TensorView<'_>)> = tensors
            .iter()
            .map(|(n, d, s, b)| (n.to_string(), TensorView::new(*d, s.clone(), b).unwrap()))
            .collect();
        let bytes = ::safetensors::serialize(views, None).unwrap();
        let t = TempPath::new(name);
        std::fs::write(t.path(), bytes).unwrap();
        t
    }

    /// Hand-written file: 8-byte LE header length, header, data.
    fn raw_st(name: &str, header: &str, data: &[u8]) -> TempPath {
        let mut out = (header.len() as u64).to_le_bytes().to_vec();
        out.extend(header.as_bytes());
        out.extend(data);
        let t = TempPath::new(name);
        std::fs::write(t.path(), out).unwrap();
        t
    }

    fn f32_bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn err_of(t: &TempPath, tensor: Option<&str>) -> (ReadError, String) {
        let e = read_safetensors(t.path(), tensor).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with(&format!("{}: ", t.path().display())),
            "message does not start with the path: {msg}"
        );
        assert!(!msg.contains('\n'));
        (e, msg)
    }

    #[test]
    fn reads_every_supported_dtype_exactly() {
        let vals = [1.0f64, -2.5, 0.375, 1024.0, -0.0, 3.0];
        let f64b: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        let f32b: Vec<u8> = vals
            .iter()
            .flat_map(|&v| (v as f32).to_le_bytes())
            .collect();
        let f16b: Vec<u8> = vals
            .iter()
            .flat_map(|&v| half::f16::from_f64(v).to_bits().to_le_bytes())
            .collect();
        let bf16b: Vec<u8> = vals
            .iter()
            .flat_map(|&v| half::bf16::from_f64(v).to_bits().to_le_bytes())
            .collect();
        let t = st_file(
            "all.safetensors",
            &[
                ("a.f64", Dtype::F64, vec![2, 3], f64b),
                ("b.f32", Dtype::F32, vec![2, 3], f32b),
                ("c.f16", Dtype::F16, vec![3, 2], f16b),
                ("d.bf16", Dtype::BF16, vec![6, 1], bf16b),
            ],
        );
        for (name, dtype, rows, cols) in [
            ("a.f64", SourceDtype::F64, 2, 3),
            ("b.f32", SourceDtype::F32, 2, 3),
            ("c.f16", SourceDtype::F16, 3, 2),
            ("d.bf16", SourceDtype::BF16, 6, 1),
        ] {
            let got = read_safetensors(t.path(), Some(name)).unwrap();
            assert_eq!(got.dtype, dtype);
            assert_eq!((got.matrix.rows, got.matrix.cols), (rows, cols));
            for (a, b) in got.matrix.data.iter().zip(&vals) {
                assert_eq!(a.to_bits(), b.to_bits(), "{name}");
            }
        }
        // read_matrix dispatches on the extension
        let got = crate::io::read_matrix(t.path(), Some("c.f16")).unwrap();
        assert_eq!(got.matrix.get(2, 1), 3.0);
    }

    #[test]
    fn misaligned_data_is_decoded() {
        // Header of 9 bytes: data starts at offset 17, not 8-aligned.
        let vals = [1.5f64, -2.0, 3.25, 4.0];
        let data: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        let h = r#"{"w":{"dtype":"F64","shape":[2,2],"data_offsets":[0,32]}}"#;
        let mut h = h.to_string();
        if h.len() % 2 == 0 {
            h.push(' '); // odd length: the data is not even 2-byte aligned
        }
        let t = raw_st("odd.safetensors", &h, &data);
        assert_eq!(read_safetensors(t.path(), None).unwrap().matrix.data, vals);
    }

    #[test]
    fn auto_selects_the_only_2d_float_tensor() {
        let t = st_file(
            "one.safetensors",
            &[
                ("bias", Dtype::F32, vec![3], f32_bytes(&[1.0, 2.0, 3.0])),
                ("ids", Dtype::I64, vec![1, 2], vec![0u8; 16]),
                (
                    "weight",
                    Dtype::F32,
                    vec![1, 3],
                    f32_bytes(&[4.0, 5.0, 6.0]),
                ),
            ],
        );
        let got = read_safetensors(t.path(), None).unwrap();
        assert_eq!(got.matrix.data, [4.0, 5.0, 6.0]);
    }

    #[test]
    fn tensor_needed_lists_2d_tensors() {
        let t = st_file(
            "two.safetensors",
            &[
                ("layer.10.w", Dtype::F32, vec![1, 1], f32_bytes(&[1.0])),
                ("layer.2.w", Dtype::F32, vec![1, 1], f32_bytes(&[1.0])),
                ("bias", Dtype::F32, vec![1], f32_bytes(&[1.0])),
            ],
        );
        let (e, msg) = err_of(&t, None);
        match &e {
            ReadError::TensorNeeded { available, .. } => {
                assert_eq!(available, &["layer.2.w", "layer.10.w"])
            }
            other => panic!("{other:?}"),
        }
        assert!(msg.contains("a tensor name is needed"), "{msg}");
        assert!(msg.contains("'layer.2.w', 'layer.10.w'"), "{msg}");
        assert!(!msg.contains("bias"), "{msg}");

        let t = st_file(
            "none.safetensors",
            &[("bias", Dtype::F32, vec![1], f32_bytes(&[1.0]))],
        );
        let (e, msg) = err_of(&t, None);
        assert!(matches!(e, ReadError::TensorNeeded { .. }), "{e:?}");
        assert!(msg.contains("no 2-D"), "{msg}");
    }

    #[test]
    fn missing_tensor_lists_at_most_ten() {
        let tensors: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = (0..13)
            .map(|k| {
                (
                    format!("layer.{k}.w"),
                    Dtype::F32,
                    vec![1, 1],
                    f32_bytes(&[1.0]),
                )
            })
            .collect();
        let refs: Vec<(&str, Dtype, Vec<usize>, Vec<u8>)> = tensors
            .iter()
            .map(|(n, d, s, b)| (n.as_str(), *d, s.clone(), b.clone()))
            .collect();
        let t = st_file("many.safetensors", &refs);
        let (e, msg) = err_of(&t, Some("layer.99.w"));
        assert!(matches!(e, ReadError::MissingTensor { .. }), "{e:?}");
        assert_eq!(e.tensor(), Some("layer.99.w"));
        assert!(msg.contains("no tensor named 'layer.99.w'"), "{msg}");
        assert!(msg.contains("(13)"), "{msg}");
        assert!(
            msg.contains("'layer.0.w'") && msg.contains("'layer.9.w'"),
            "{msg}"
        );
        assert!(!msg.contains("'layer.10.w'"), "{msg}");
        assert!(msg.ends_with("... and 3 more"), "{msg}");
    }

    #[test]
    fn one_d_and_three_d_tensors_are_not_2d() {
        let t = st_file(
            "model.safetensors",
            &[
                ("bias", Dtype::F32, vec![384], vec![0u8; 384 * 4]),
                ("cube", Dtype::F32, vec![2, 2, 2], vec![0u8; 32]),
                ("scalar", Dtype::F64, vec![], vec![0u8; 8]),
            ],
        );
        let (e, msg) = err_of(&t, Some("bias"));
        assert!(matches!(e, ReadError::NotTwoD { .. }), "{e:?}");
        assert_eq!(
            msg,
            format!(
                "{}: tensor 'bias': expected a 2-D tensor, found shape [384]",
                t.path().display()
            )
        );
        let (_, msg) = err_of(&t, Some("cube"));
        assert!(msg.ends_with("tensor 'cube': expected a 2-D tensor, found shape [2, 2, 2]"));
        let (_, msg) = err_of(&t, Some("scalar"));
        assert!(msg.ends_with("found shape []"), "{msg}");
    }

    #[test]
    fn unsupported_dtype_names_it_and_lists_supported() {
        let t = st_file(
            "ints.safetensors",
            &[
                ("ids", Dtype::I64, vec![1, 2], vec![0u8; 16]),
                ("c", Dtype::C64, vec![1, 1], vec![0u8; 8]),
            ],
        );
        for (name, dt) in [("ids", "I64"), ("c", "C64")] {
            let (e, msg) = err_of(&t, Some(name));
            assert!(matches!(e, ReadError::UnsupportedDtype { .. }), "{e:?}");
            assert!(
                msg.ends_with(&format!(
                    "tensor '{name}': unsupported dtype {dt}; supported: F16, BF16, F32, F64"
                )),
                "{msg}"
            );
        }
    }

    #[test]
    fn empty_dimension() {
        let t = st_file(
            "empty.safetensors",
            &[("w", Dtype::F32, vec![0, 3], vec![])],
        );
        let (e, msg) = err_of(&t, Some("w"));
        assert!(matches!(e, ReadError::Empty { .. }), "{e:?}");
        assert!(
            msg.contains("tensor 'w': empty matrix: shape [0, 3]"),
            "{msg}"
        );
    }

    #[test]
    fn non_finite_reports_tensor_and_position() {
        let mut v = [0.0f32; 6];
        v[4] = f32::NAN; // (1, 1) of 2x3
        let t = st_file(
            "nan.safetensors",
            &[("w", Dtype::F32, vec![2, 3], f32_bytes(&v))],
        );
        let (e, msg) = err_of(&t, Some("w"));
        assert!(
            matches!(e, ReadError::NonFinite { row: 1, col: 1, .. }),
            "{e:?}"
        );
        assert!(
            msg.contains("tensor 'w': non-finite value NaN at row 1, col 1"),
            "{msg}"
        );

        let b: Vec<u8> = [half::bf16::ONE, half::bf16::NEG_INFINITY]
            .iter()
            .flat_map(|x| x.to_bits().to_le_bytes())
            .collect();
        let t = st_file("inf.safetensors", &[("w", Dtype::BF16, vec![2, 1], b)]);
        let (e, _) = err_of(&t, None);
        assert!(
            matches!(e, ReadError::NonFinite { row: 1, col: 0, .. }),
            "{e:?}"
        );
    }

    #[test]
    fn header_length_exceeding_the_file() {
        let mut bytes = 1000u64.to_le_bytes().to_vec();
        bytes.extend(br#"{"w":{"dtype":"F32","shape":[1,1],"data_offsets":[0,4]}}"#);
        let t = TempPath::new("hlen.safetensors");
        std::fs::write(t.path(), &bytes).unwrap();
        let (e, msg) = err_of(&t, Some("w"));
        assert!(matches!(e, ReadError::Format { .. }), "{e:?}");
        assert!(msg.contains("invalid header length"), "{msg}");
        assert!(msg.contains("header length 1000 declared"), "{msg}");

        // Absurd length: refused before anything is read or allocated.
        bytes[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        std::fs::write(t.path(), &bytes).unwrap();
        let (e, msg) = err_of(&t, None);
        assert!(matches!(e, ReadError::Format { .. }), "{e:?}");
        assert!(
            msg.contains("header too large") || msg.contains("header length"),
            "{msg}"
        );
    }

    #[test]
    fn malformed_files_are_format_errors() {
        let cases: Vec<(&str, String, Vec<u8>, &str)> = vec![
            ("json", "{not json".into(), vec![], "invalid JSON in header"),
            (
                "offsets",
                r#"{"w":{"dtype":"F32","shape":[1,1],"data_offsets":[0,400]}}"#.into(),
                vec![0u8; 4],
                "tensor 'w': invalid safetensors file: invalid shape, data type, or offset for tensor: shape [1, 1] of F32 needs 4 bytes, but data_offsets [0, 400] give 400",
            ),
            (
                "count",
                // 2x2 F32 needs 16 bytes; offsets give 12
                r#"{"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}}"#.into(),
                vec![0u8; 12],
                "needs 16 bytes, but data_offsets [0, 12] give 12",
            ),
            (
                "overflow",
                r#"{"w":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}}"#
                    .into(),
                vec![0u8; 8],
                "tensor 'w': invalid safetensors file",
            ),
            (
                "control",
                "{\"w\u{0}\": 1}".into(),
                vec![],
                "invalid JSON in header",
            ),
            (
                "gap",
                concat!(
                    r#"{"w":{"dtype":"F32","shape":[1,1],"data_offsets":[0,4]},"#,
                    r#""x":{"dtype":"F32","shape":[1,1],"data_offsets":[8,12]}}"#
                )
                .into(),
                vec![0u8; 12],
                "tensor 'x': invalid safetensors file: invalid offset for tensor `x`: \
                 data_offsets [8, 12] do not start where the previous tensor ends (byte 4)",
            ),
            (
                "beyond",
                r#"{"w":{"dtype":"F32","shape":[1,1],"data_offsets":[0,4]}}"#.into(),
                vec![],
                "tensor 'w': invalid safetensors file: incomplete metadata, file not fully \
                 covered: data_offsets [0, 4] end beyond the 0-byte data section",
            ),
            (
                "trailing",
                r#"{"w":{"dtype":"F32","shape":[1,1],"data_offsets":[0,4]}}"#.into(),
                vec![0u8; 9],
                "invalid safetensors file: incomplete metadata, file not fully covered",
            ),
        ];
        for (name, header, data, needle) in cases {
            let t = raw_st(&format!("{name}.safetensors"), &header, &data);
            let (e, msg) = err_of(&t, Some("w"));
            assert!(matches!(e, ReadError::Format { .. }), "{name}: {e:?}");
            assert!(msg.contains("invalid safetensors file"), "{msg}");
            assert!(msg.contains(needle), "{name}: {msg}");
        }
        // Truncated: a valid file with its last bytes cut off.
        let t = st_file(
            "ok.safetensors",
            &[("w", Dtype::F32, vec![2, 2], vec![0u8; 16])],
        );
        let full = std::fs::read(t.path()).unwrap();
        let tt = TempPath::new("trunc.safetensors");
        std::fs::write(tt.path(), &full[..full.len() - 3]).unwrap();
        let (e, msg) = err_of(&tt, Some("w"));
        assert!(matches!(e, ReadError::Format { .. }), "{e:?}");
        assert!(msg.contains("incomplete metadata"), "{msg}");
        assert_eq!(e.tensor(), Some("w"));
        assert!(
            msg.contains("data_offsets [0, 16] end beyond the 13-byte data section"),
            "{msg}"
        );
        // Header that is not UTF-8.
        let mut bytes = 4u64.to_le_bytes().to_vec();
        bytes.extend(b"{\xff}}");
        std::fs::write(tt.path(), &bytes).unwrap();
        let (e, msg) = err_of(&tt, None);
        assert!(matches!(e, ReadError::Format { .. }), "{e:?}");
        assert!(msg.contains("invalid UTF-8 in header"), "{msg}");
        // Too short to hold the length.
        std::fs::write(tt.path(), b"abc").unwrap();
        let (e, msg) = err_of(&tt, None);
        assert!(matches!(e, ReadError::Format { .. }), "{e:?}");
        assert!(msg.contains("file is 3 bytes"), "{msg}");
    }

    #[test]
    fn natural_order() {
        let mut v = vec!["l.10.w", "l.2.w", "l.1.w", "a", "l.02.x", "l.2.v"];
        v.sort_by(|a, b| natural_cmp(a, b));
        // "02" and "2" tie as numbers, so the rest decides.
        assert_eq!(v, ["a", "l.1.w", "l.2.v", "l.2.w", "l.02.x", "l.10.w"]);
    }

    const MINILM: &str = "/work/shared/models/all-MiniLM-L6-v2/model.safetensors";

    /// Real weights: the layer-0 query projection of all-MiniLM-L6-v2.
    #[test]
    fn real_minilm_query_weight() {
        let path = Path::new(MINILM);
        if !path.exists() {
            println!("skipping real_minilm_query_weight: {MINILM} does not exist");
            return;
        }
        let name = "encoder.layer.0.attention.self.query.weight";
        let got = read_safetensors(path, Some(name)).unwrap();
        assert_eq!(got.dtype, SourceDtype::F32);
        assert_eq!((got.matrix.rows, got.matrix.cols), (384, 384));
        let fro = got.matrix.data.iter().map(|v| v * v).sum::<f64>().sqrt();
        let reference = 36.655678621; // uncertified float reference
        assert!(
            ((fro - reference) / reference).abs() < 1e-6,
            "Frobenius norm {fro} vs {reference}"
        );
        // Same through the dispatcher.
        assert_eq!(
            crate::io::read_matrix(path, Some(name)).unwrap().matrix,
            got.matrix
        );

        let e = read_safetensors(path, Some("embeddings.position_ids")).unwrap_err();
        assert!(matches!(e, ReadError::UnsupportedDtype { .. }), "{e:?}");
        let msg = e.to_string();
        assert!(msg.starts_with(&format!("{MINILM}: tensor 'embeddings.position_ids': ")));
        assert!(msg.contains("I64"), "{msg}");

        let e = read_safetensors(path, None).unwrap_err();
        assert!(matches!(e, ReadError::TensorNeeded { .. }), "{e:?}");
        assert!(e.to_string().contains("more"), "{e}");
        let e = read_safetensors(path, Some("encoder.layer.0.nope")).unwrap_err();
        assert!(matches!(e, ReadError::MissingTensor { .. }), "{e:?}");
        assert!(
            e.to_string()
                .contains("'embeddings.word_embeddings.weight'"),
            "{e}"
        );
        let e =
            read_safetensors(path, Some("encoder.layer.0.attention.self.query.bias")).unwrap_err();
        assert!(e.to_string().ends_with("found shape [384]"), "{e}");
    }
}
