//! GGUF (llama.cpp) files, versions 2 and 3: metadata, tensor directory and
//! exact decoding of F32, F16, BF16, Q8_0, Q4_0 and Q4_1 tensors into f64.
//!
//! Every value of these formats is exactly representable in binary64 and
//! is computed exactly ([`proofs/gguf-exact-decode.md`](crate::proofs::gguf_exact_decode), L19). The parser
//! treats the file as hostile: every count, length, dimension and offset is
//! checked against the file size before anything is allocated from it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use super::limits::{MAX_GGUF_META_BYTES, MAX_GGUF_NAME};
use super::weight_file::WeightFile;
use super::{check_finite, LoadedMatrix, ReadError};
use crate::matrix::{DenseMatrix, SourceDtype};

/// A metadata value (arrays keep only their length and, for scalars, values).
#[derive(Clone, Debug, PartialEq)]
pub enum MetaValue {
    /// Any integer type.
    Int(i128),
    /// f32 or f64.
    Float(f64),
    /// bool.
    Bool(bool),
    /// UTF-8 string (lossy).
    Str(String),
    /// An array: element count (elements are skipped).
    Array(u64),
}

/// One tensor of the directory.
#[derive(Clone, Debug)]
pub struct GgufTensor {
    /// Name.
    pub name: String,
    /// Dimensions as listed (fastest-varying first).
    pub dims: Vec<u64>,
    /// ggml type id.
    pub ggml_type: u32,
    /// Absolute byte offset of the data in the file.
    pub start: usize,
    /// Byte length of the data.
    pub len: usize,
}

/// A mapped, validated GGUF file.
pub struct GgufFile {
    path: PathBuf,
    mmap: Mmap,
    /// The open file and the map's registration (super::mapped).
    guard: super::mapped::MapGuard,
    /// Format version (2 or 3).
    pub version: u32,
    /// Metadata key-value pairs.
    pub meta: BTreeMap<String, MetaValue>,
    /// Tensor directory by name.
    pub tensors: BTreeMap<String, GgufTensor>,
}

const MAGIC: &[u8; 4] = b"GGUF";
const MAX_KV: u64 = 1 << 20;
const MAX_TENSORS: u64 = 1 << 20;
const MAX_STRING: u64 = 1 << 24;

/// ggml type ids this reader decodes.
pub const F32: u32 = 0;
/// f16.
pub const F16: u32 = 1;
/// 4-bit blocks with a scale.
pub const Q4_0: u32 = 2;
/// 4-bit blocks with a scale and a minimum.
pub const Q4_1: u32 = 3;
/// 8-bit blocks with a scale.
pub const Q8_0: u32 = 8;
/// bfloat16.
pub const BF16: u32 = 30;

/// `(elements per block, bytes per block)` of a supported type.
pub fn block_layout(t: u32) -> Option<(u64, u64)> {
    match t {
        F32 => Some((1, 4)),
        F16 => Some((1, 2)),
        BF16 => Some((1, 2)),
        Q8_0 => Some((32, 34)),
        Q4_0 => Some((32, 18)),
        Q4_1 => Some((32, 20)),
        _ => None,
    }
}

/// Name of a ggml type id (for messages).
pub(crate) fn type_name(t: u32) -> String {
    match t {
        F32 => "F32".into(),
        F16 => "F16".into(),
        Q4_0 => "Q4_0".into(),
        Q4_1 => "Q4_1".into(),
        Q8_0 => "Q8_0".into(),
        BF16 => "BF16".into(),
        6 => "Q5_0".into(),
        7 => "Q5_1".into(),
        9 => "Q8_1".into(),
        10..=15 => format!("Q{}_K", t - 8),
        _ => format!("type {t}"),
    }
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    path: &'a Path,
}

impl<'a> Cursor<'a> {
    fn err(&self, msg: impl Into<String>) -> ReadError {
        ReadError::format(
            self.path,
            None,
            format!("GGUF at byte {}: {}", self.pos, msg.into()),
        )
    }
    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8], ReadError> {
        let end = (self.pos as u64)
            .checked_add(n)
            .filter(|&e| e <= self.buf.len() as u64);
        match end {
            Some(e) => {
                let s = &self.buf[self.pos..e as usize];
                self.pos = e as usize;
                Ok(s)
            }
            None => Err(self.err(format!(
                "{what} of {n} bytes runs past the end of the file ({} bytes)",
                self.buf.len()
            ))),
        }
    }
    fn u32(&mut self, what: &str) -> Result<u32, ReadError> {
        Ok(u32::from_le_bytes(
            self.take(4, what)?.try_into().expect("4"),
        ))
    }
    fn u64(&mut self, what: &str) -> Result<u64, ReadError> {
        Ok(u64::from_le_bytes(
            self.take(8, what)?.try_into().expect("8"),
        ))
    }
    /// A string of at most `max` bytes, bounds-checked before anything is
    /// allocated; `None` (skipped, nothing allocated) unless `keep`.
    fn string_of(&mut self, what: &str, max: u64, keep: bool) -> Result<Option<String>, ReadError> {
        let n = self.u64(what)?;
        if n > max {
            return Err(self.err(format!("{what} length {n} exceeds {max}")));
        }
        let bytes = self.take(n, what)?;
        Ok(keep.then(|| String::from_utf8_lossy(bytes).into_owned()))
    }
    fn string(&mut self, what: &str, max: u64) -> Result<String, ReadError> {
        Ok(self.string_of(what, max, true)?.unwrap_or_default())
    }
    /// A metadata value; array elements are checked and skipped.
    fn value(&mut self, t: u32, depth: u32) -> Result<MetaValue, ReadError> {
        Ok(match t {
            0 => MetaValue::Int(self.take(1, "u8")?[0] as i128),
            1 => MetaValue::Int(self.take(1, "i8")?[0] as i8 as i128),
            2 => MetaValue::Int(
                u16::from_le_bytes(self.take(2, "u16")?.try_into().expect("2")) as i128,
            ),
            3 => MetaValue::Int(
                i16::from_le_bytes(self.take(2, "i16")?.try_into().expect("2")) as i128,
            ),
            4 => MetaValue::Int(self.u32("u32")? as i128),
            5 => MetaValue::Int(self.u32("i32")? as i32 as i128),
            6 => MetaValue::Float(
                f32::from_le_bytes(self.take(4, "f32")?.try_into().expect("4")) as f64,
            ),
            7 => MetaValue::Bool(self.take(1, "bool")?[0] != 0),
            8 => {
                // Strings inside arrays (vocabularies) are skipped unkept.
                let keep = depth == 0;
                MetaValue::Str(
                    self.string_of("string", MAX_STRING, keep)?
                        .unwrap_or_default(),
                )
            }
            9 => {
                if depth > 4 {
                    return Err(self.err("arrays nested too deeply"));
                }
                let et = self.u32("array type")?;
                let n = self.u64("array length")?;
                // Each element takes at least one byte: bound n by what is left.
                if n > (self.buf.len() - self.pos) as u64 {
                    return Err(self.err(format!("array of {n} elements cannot fit in the file")));
                }
                for _ in 0..n {
                    self.value(et, depth + 1)?;
                }
                MetaValue::Array(n)
            }
            10 => MetaValue::Int(self.u64("u64")? as i128),
            11 => MetaValue::Int(self.u64("i64")? as i64 as i128),
            12 => MetaValue::Float(f64::from_le_bytes(
                self.take(8, "f64")?.try_into().expect("8"),
            )),
            other => return Err(self.err(format!("unknown metadata value type {other}"))),
        })
    }
}

/// One directory entry as listed: name, dimensions, ggml type, offset.
type DirEntry = (String, Vec<u64>, u32, u64);

impl Cursor<'_> {
    /// The magic, version and the two counts, each checked before use.
    fn header(&mut self) -> Result<(u32, u64, u64), ReadError> {
        let path = self.path;
        if self.take(4, "magic")? != MAGIC {
            return Err(ReadError::format(
                path,
                None,
                "not a GGUF file (bad magic; expected \"GGUF\")",
            ));
        }
        let version = self.u32("version")?;
        if !(version == 2 || version == 3) {
            return Err(ReadError::format(
                path,
                None,
                format!("unsupported GGUF version {version} (supported: 2, 3)"),
            ));
        }
        let n_tensors = self.u64("tensor count")?;
        let n_kv = self.u64("metadata count")?;
        if n_tensors > MAX_TENSORS || n_kv > MAX_KV {
            return Err(ReadError::format(
                path,
                None,
                format!("implausible counts: {n_tensors} tensors, {n_kv} metadata entries"),
            ));
        }
        Ok((version, n_tensors, n_kv))
    }

    /// The `n_kv` metadata pairs; the kept keys and strings are bounded
    /// together by `MAX_GGUF_META_BYTES`.
    fn metadata(&mut self, n_kv: u64) -> Result<BTreeMap<String, MetaValue>, ReadError> {
        let mut meta = BTreeMap::new();
        let mut kept: u64 = 0;
        for _ in 0..n_kv {
            let key = self.string("metadata key", MAX_GGUF_NAME)?;
            let t = self.u32("metadata type")?;
            let v = self.value(t, 0)?;
            kept += key.len() as u64;
            if let MetaValue::Str(s) = &v {
                kept += s.len() as u64;
            }
            if kept > MAX_GGUF_META_BYTES {
                return Err(self.err(format!(
                    "metadata keys and strings exceed the limit of {MAX_GGUF_META_BYTES} bytes"
                )));
            }
            meta.insert(key, v);
        }
        Ok(meta)
    }

    /// The `n_tensors` directory entries, each with 1 to 4 dimensions.
    fn directory(&mut self, n_tensors: u64) -> Result<Vec<DirEntry>, ReadError> {
        let mut infos = Vec::with_capacity(n_tensors.min(1 << 16) as usize);
        for _ in 0..n_tensors {
            let name = self.string("tensor name", MAX_GGUF_NAME)?;
            let nd = self.u32("dimension count")?;
            if nd == 0 || nd > 4 {
                return Err(ReadError::format(
                    self.path,
                    Some(&name),
                    format!("{nd} dimensions (1 to 4 supported)"),
                ));
            }
            let mut dims = Vec::with_capacity(nd as usize);
            for _ in 0..nd {
                dims.push(self.u64("dimension")?);
            }
            let t = self.u32("tensor type")?;
            let off = self.u64("tensor offset")?;
            infos.push((name, dims, t, off));
        }
        Ok(infos)
    }
}

/// `general.alignment` (default 32): a power of two of at most 2^16.
fn alignment(meta: &BTreeMap<String, MetaValue>, path: &Path) -> Result<u64, ReadError> {
    match meta.get("general.alignment") {
        None => Ok(32u64),
        Some(MetaValue::Int(a)) if *a > 0 && (*a as u64).is_power_of_two() && *a <= 1 << 16 => {
            Ok(*a as u64)
        }
        Some(v) => Err(ReadError::format(
            path,
            Some("general.alignment"),
            format!("alignment must be a power of two, found {v:?}"),
        )),
    }
}

/// Where the tensors' data lies: after the directory, aligned, up to the end.
struct DataSection<'a> {
    path: &'a Path,
    alignment: u64,
    data_start: u64,
    file_len: u64,
}

impl DataSection<'_> {
    /// Checks one directory entry against the data section and records its
    /// span; unsupported types are listed with an empty span.
    fn place(
        &self,
        (name, dims, t, off): DirEntry,
        spans: &mut Vec<(u64, u64, String)>,
    ) -> Result<GgufTensor, ReadError> {
        let (path, alignment, data_start, file_len) =
            (self.path, self.alignment, self.data_start, self.file_len);
        let n = dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        let n = n.ok_or_else(|| {
            ReadError::format(path, Some(&name), format!("shape {dims:?} overflows"))
        })?;
        if n == 0 {
            return Err(ReadError::Empty {
                path: path.to_path_buf(),
                tensor: Some(name),
                shape: dims.iter().map(|&d| d as usize).collect(),
            });
        }
        if off % alignment != 0 {
            return Err(ReadError::format(
                path,
                Some(&name),
                format!("offset {off} is not a multiple of the alignment {alignment}"),
            ));
        }
        let (start, len) = match byte_len(path, &name, &dims, t, n)? {
            Some(len) => {
                let start = data_start
                    .checked_add(off)
                    .filter(|s| s.checked_add(len).is_some_and(|e| e <= file_len));
                let start = start.ok_or_else(|| ReadError::format(path, Some(&name), format!(
                    "data [{off}, +{len}) lies outside the file's data section ({} bytes from {data_start})", file_len.saturating_sub(data_start))))?;
                spans.push((start, start + len, name.clone()));
                (start as usize, len as usize)
            }
            None => (0, 0),
        };
        Ok(GgufTensor {
            name,
            dims,
            ggml_type: t,
            start,
            len,
        })
    }
}

/// The byte length of `n` elements of type `t`, `None` for a type this
/// reader does not decode (listed but unreadable).
fn byte_len(
    path: &Path,
    name: &str,
    dims: &[u64],
    t: u32,
    n: u64,
) -> Result<Option<u64>, ReadError> {
    let Some((per, bytes)) = block_layout(t) else {
        return Ok(None);
    };
    if dims[0] % per != 0 {
        return Err(ReadError::format(
            path,
            Some(name),
            format!(
                "first dimension {} is not a multiple of the block size {per} of {}",
                dims[0],
                type_name(t)
            ),
        ));
    }
    // An overflow is an error naming the tensor, never
    // taken for an unsupported type.
    let len = (n / per)
        .checked_mul(bytes)
        .filter(|_| usize::try_from(n).is_ok())
        .ok_or_else(|| {
            ReadError::format(
                path,
                Some(name),
                format!(
                    "shape {} of {} overflows the byte length computation",
                    super::fmt_shape(dims),
                    type_name(t)
                ),
            )
        })?;
    Ok(Some(len))
}

/// No two tensors' data may overlap.
fn check_overlaps(path: &Path, mut spans: Vec<(u64, u64, String)>) -> Result<(), ReadError> {
    spans.sort();
    for w in spans.windows(2) {
        if w[1].0 < w[0].1 {
            return Err(ReadError::format(
                path,
                Some(&w[1].2),
                format!("data overlaps tensor '{}'", w[0].2),
            ));
        }
    }
    Ok(())
}

impl GgufFile {
    /// Maps and validates a GGUF file.
    pub fn open(path: &Path) -> Result<Self, ReadError> {
        let (mut file, _) = super::limits::open_regular(path, "GGUF file")?;
        let mut head = [0u8; super::HEAD_BYTES];
        let n = super::read_head(&mut file, &mut head).map_err(|e| ReadError::io(path, e))?;
        if !head[..n].starts_with(MAGIC) {
            if let Some(what) = super::foreign_format(&head[..n]) {
                return Err(ReadError::format(path, None, what));
            }
        }
        // Truncation while mapped: an error naming the file (super::mapped).
        let (mmap, guard) = super::mapped::map(&file, path)?;
        let buf: &[u8] = &mmap;
        let mut c = Cursor { buf, pos: 0, path };
        let (version, n_tensors, n_kv) = c.header()?;
        let meta = c.metadata(n_kv)?;
        let alignment = alignment(&meta, path)?;
        let infos = c.directory(n_tensors)?;
        let data_start = (c.pos as u64).div_ceil(alignment) * alignment;
        let section = DataSection {
            path,
            alignment,
            data_start,
            file_len: buf.len() as u64,
        };
        let mut tensors = BTreeMap::new();
        let mut spans: Vec<(u64, u64, String)> = Vec::new();
        for info in infos {
            let t = section.place(info, &mut spans)?;
            let name = t.name.clone();
            if tensors.insert(name.clone(), t).is_some() {
                return Err(ReadError::format(
                    path,
                    Some(&name),
                    "duplicate tensor name",
                ));
            }
        }
        check_overlaps(path, spans)?;
        Ok(Self {
            path: path.to_path_buf(),
            mmap,
            guard,
            version,
            meta,
            tensors,
        })
    }

    /// The 2-D tensors of a type [`read`](Self::read) decodes, in natural
    /// name order (for messages naming what the file has).
    pub(crate) fn two_d_candidates(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .tensors
            .values()
            .filter(|t| t.dims.len() == 2 && block_layout(t.ggml_type).is_some())
            .map(|t| t.name.clone())
            .collect();
        v.sort_by(|a, b| super::safetensors::natural_cmp(a, b));
        v
    }

    /// The raw bytes (for hashing).
    pub fn bytes(&self) -> &[u8] {
        &self.mmap
    }

    /// The file mapping (for [`super::release_pages`]).
    pub(crate) fn bytes_map(&self) -> &Mmap {
        &self.mmap
    }

    /// Releases the file pages of a tensor from resident memory
    /// (`release_pages`); a no-op for an unknown name.
    pub(crate) fn release(&self, name: &str) {
        if let Some(t) = self.tensors.get(name) {
            super::release_pages(&self.mmap, t.start, t.len);
        }
    }

    /// Reads a 2-D tensor as a row-major matrix: GGUF lists dimensions
    /// fastest-first, so dims `[cols, rows]` is a `rows x cols` matrix
    /// (the same layout as PyTorch's `[out, in]`). Decoding is exact (L19).
    pub fn read(&self, name: &str) -> Result<LoadedMatrix, ReadError> {
        let t = self
            .tensors
            .get(name)
            .ok_or_else(|| ReadError::MissingTensor {
                path: self.path.clone(),
                tensor: name.to_string(),
                available: self.two_d_candidates(),
            })?;
        if t.dims.len() != 2 {
            return Err(ReadError::NotTwoD {
                path: self.path.clone(),
                tensor: Some(name.into()),
                shape: t.dims.iter().map(|&d| d as usize).collect(),
            });
        }
        if block_layout(t.ggml_type).is_none() {
            return Err(ReadError::UnsupportedDtype {
                path: self.path.clone(),
                tensor: Some(name.into()),
                dtype: type_name(t.ggml_type),
                supported: "F32, F16, BF16, Q8_0, Q4_0, Q4_1",
                note: None,
            });
        }
        let (cols, rows) = (t.dims[0] as usize, t.dims[1] as usize);
        // The file may have been truncated since it was mapped.
        self.guard.check_len()?;
        let bytes = &self.mmap[t.start..t.start + t.len];
        let data = decode_into(
            t.ggml_type,
            bytes,
            rows * cols,
            super::f64_buffer(&self.path, Some(name), rows, cols)?,
        );
        let dtype = match t.ggml_type {
            F16 => SourceDtype::F16,
            BF16 => SourceDtype::BF16,
            F32 => SourceDtype::F32,
            Q8_0 => SourceDtype::Quantized("Q8_0"),
            Q4_0 => SourceDtype::Quantized("Q4_0"),
            _ => SourceDtype::Quantized("Q4_1"),
        };
        let matrix = DenseMatrix { rows, cols, data };
        check_finite(&self.path, Some(name), &matrix)?;
        Ok(LoadedMatrix { matrix, dtype })
    }
}

/// A GGUF file in a checkpoint: matrices as [`GgufFile::read`] reads
/// them (shapes `[rows, cols]`, GGUF's dimensions reversed); its metadata
/// holds the model's facts. A flattened read is a plain read; a slice or
/// a vector is refused.
impl WeightFile for GgufFile {
    fn path(&self) -> &Path {
        &self.path
    }
    fn hashes(&self) -> Result<Vec<(PathBuf, String)>, ReadError> {
        let sha = super::sha256_of_map(self.bytes_map());
        Ok(vec![(self.path.clone(), sha)])
    }
    fn release(&self, name: &str) {
        GgufFile::release(self, name)
    }
    fn names(&self) -> Vec<String> {
        self.tensors.keys().cloned().collect()
    }
    fn info(&self, name: &str) -> Option<(Vec<usize>, String)> {
        self.tensors.get(name).map(|t| {
            let mut d: Vec<usize> = t.dims.iter().map(|&x| x as usize).collect();
            d.reverse();
            (d, type_name(t.ggml_type))
        })
    }
    fn two_d_candidates(&self) -> Vec<String> {
        GgufFile::two_d_candidates(self)
    }
    fn read(&self, name: &str) -> Result<LoadedMatrix, ReadError> {
        GgufFile::read(self, name)
    }
}

/// A block format's float16 scale (its two little-endian bytes), by the
/// one exact decoder ([`super::le`], L1).
fn f16(b: &[u8]) -> f64 {
    super::le::f16([b[0], b[1]])
}

/// Decodes `n` values of a supported type. Exact (L19): f16/bf16/f32 widen
/// exactly; block values `d * q` and `d * q + m` are computed in f64 without
/// rounding because every intermediate is a multiple of 2^-24 below 2^47.
pub fn decode(t: u32, bytes: &[u8], n: usize) -> Vec<f64> {
    decode_into(t, bytes, n, Vec::with_capacity(n))
}

/// [`decode`] appending to `out` (allocated by the caller, fallibly:
/// [`super::f64_buffer`]).
fn decode_into(t: u32, bytes: &[u8], n: usize, mut out: Vec<f64>) -> Vec<f64> {
    match t {
        // The dense types by the one exact decoder (L1).
        F32 => super::decode_le(SourceDtype::F32, bytes, &mut out),
        F16 => super::decode_le(SourceDtype::F16, bytes, &mut out),
        BF16 => super::decode_le(SourceDtype::BF16, bytes, &mut out),
        Q8_0 => {
            for blk in bytes.chunks_exact(34) {
                let d = f16(&blk[0..2]);
                out.extend(blk[2..34].iter().map(|&q| d * (q as i8) as f64));
            }
        }
        Q4_0 => {
            for blk in bytes.chunks_exact(18) {
                let d = f16(&blk[0..2]);
                let qs = &blk[2..18];
                out.extend(qs.iter().map(|&b| d * ((b & 0x0f) as f64 - 8.0)));
                out.extend(qs.iter().map(|&b| d * ((b >> 4) as f64 - 8.0)));
            }
        }
        Q4_1 => {
            for blk in bytes.chunks_exact(20) {
                let d = f16(&blk[0..2]);
                let m = f16(&blk[2..4]);
                let qs = &blk[4..20];
                out.extend(qs.iter().map(|&b| d * (b & 0x0f) as f64 + m));
                out.extend(qs.iter().map(|&b| d * (b >> 4) as f64 + m));
            }
        }
        _ => unreachable!("checked by the caller"),
    }
    out.truncate(n);
    out
}

/// Encodes values into a block format (round to nearest scale and integer),
/// for tests and fixtures: returns the bytes. The values actually stored are
/// whatever [`decode`] gives back, which tests use as the exact reference.
pub fn encode(t: u32, values: &[f64]) -> Vec<u8> {
    let mut out = Vec::new();
    let h = |x: f64| half::f16::from_f64(x).to_bits().to_le_bytes();
    match t {
        F32 => values
            .iter()
            .for_each(|&x| out.extend_from_slice(&(x as f32).to_le_bytes())),
        F16 => values.iter().for_each(|&x| out.extend_from_slice(&h(x))),
        BF16 => values
            .iter()
            .for_each(|&x| out.extend_from_slice(&half::bf16::from_f64(x).to_bits().to_le_bytes())),
        Q8_0 => {
            for blk in values.chunks(32) {
                let amax = blk.iter().fold(0.0f64, |a, x| a.max(x.abs()));
                let d = half::f16::from_f64(amax / 127.0).to_f64();
                out.extend_from_slice(&h(d));
                for &x in blk {
                    let q = if d == 0.0 {
                        0.0
                    } else {
                        (x / d).round().clamp(-127.0, 127.0)
                    };
                    out.push(q as i8 as u8);
                }
            }
        }
        Q4_0 | Q4_1 => {
            for blk in values.chunks(32) {
                let (d, m) = if t == Q4_0 {
                    let amax = blk.iter().fold(0.0f64, |a, x| a.max(x.abs()));
                    (half::f16::from_f64(amax / 8.0).to_f64(), 0.0)
                } else {
                    let lo = blk.iter().fold(f64::INFINITY, |a, &x| a.min(x));
                    let hi = blk.iter().fold(f64::NEG_INFINITY, |a, &x| a.max(x));
                    (
                        half::f16::from_f64((hi - lo) / 15.0).to_f64(),
                        half::f16::from_f64(lo).to_f64(),
                    )
                };
                out.extend_from_slice(&h(d));
                if t == Q4_1 {
                    out.extend_from_slice(&h(m));
                }
                let q = |x: f64| -> u8 {
                    if d == 0.0 {
                        return if t == Q4_0 { 8 } else { 0 };
                    }
                    let v = if t == Q4_0 {
                        (x / d).round() + 8.0
                    } else {
                        ((x - m) / d).round()
                    };
                    v.clamp(0.0, 15.0) as u8
                };
                for i in 0..16 {
                    out.push(q(blk[i]) | (q(blk[i + 16]) << 4));
                }
            }
        }
        _ => panic!("unsupported type for encoding"),
    }
    out
}

/// Writes a GGUF v3 file (for tests and fixtures): metadata of string and
/// integer values (u32, u64 or i64 as the value needs), and 2-D tensors
/// `(name, rows, cols, type, values)`.
pub fn write_gguf(
    path: &Path,
    meta: &[(&str, MetaValue)],
    tensors: &[(String, usize, usize, u32, Vec<f64>)],
) -> std::io::Result<()> {
    let mut h: Vec<u8> = Vec::new();
    h.extend_from_slice(MAGIC);
    h.extend_from_slice(&3u32.to_le_bytes());
    h.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    h.extend_from_slice(&(meta.len() as u64).to_le_bytes());
    let s = |h: &mut Vec<u8>, x: &str| {
        h.extend_from_slice(&(x.len() as u64).to_le_bytes());
        h.extend_from_slice(x.as_bytes());
    };
    for (k, v) in meta {
        s(&mut h, k);
        match v {
            MetaValue::Str(x) => {
                h.extend_from_slice(&8u32.to_le_bytes());
                s(&mut h, x);
            }
            // u32 where it fits; u64 above, i64 below zero (hostile-input tests).
            MetaValue::Int(x) => match (u32::try_from(*x), u64::try_from(*x)) {
                (Ok(v), _) => {
                    h.extend_from_slice(&4u32.to_le_bytes());
                    h.extend_from_slice(&v.to_le_bytes());
                }
                (_, Ok(v)) => {
                    h.extend_from_slice(&10u32.to_le_bytes());
                    h.extend_from_slice(&v.to_le_bytes());
                }
                _ => {
                    h.extend_from_slice(&11u32.to_le_bytes());
                    h.extend_from_slice(&(*x as i64).to_le_bytes());
                }
            },
            _ => panic!("only strings and integers in test metadata"),
        }
    }
    let mut data: Vec<u8> = Vec::new();
    for (name, rows, cols, t, vals) in tensors {
        s(&mut h, name);
        h.extend_from_slice(&2u32.to_le_bytes());
        h.extend_from_slice(&(*cols as u64).to_le_bytes());
        h.extend_from_slice(&(*rows as u64).to_le_bytes());
        h.extend_from_slice(&t.to_le_bytes());
        while data.len() % 32 != 0 {
            data.push(0);
        }
        h.extend_from_slice(&(data.len() as u64).to_le_bytes());
        data.extend_from_slice(&encode(*t, vals));
    }
    while h.len() % 32 != 0 {
        h.push(0);
    }
    h.extend_from_slice(&data);
    std::fs::write(path, h)
}
