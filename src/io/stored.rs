//! The tensors of a container whose layout specbound parses itself (ONNX,
//! Flax msgpack): for each tensor, where its bytes lie in one or more
//! memory-mapped files, its stored shape and element type, and whether it
//! is presented transposed (a weight stored `[in, out]`, presented as
//! PyTorch stores it, `[out, in]`).
//!
//! Every byte range is checked against its file and against
//! dtype × shape when the table is built, and again (the file's length)
//! before each read; elements are little-endian and converted to f64
//! exactly ([`proofs/exact-conversion.md`](crate::proofs::exact_conversion), L1). A transposed read moves the
//! converted values, never computes with them, so the matrix is the stored
//! one with rows and columns exchanged, exactly.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use super::mapped::MapGuard;
use super::weight_file::WeightFile;
use super::{check_finite, fmt_name, LoadedMatrix, ReadError};
use crate::matrix::{DenseMatrix, SourceDtype};

/// The element types these readers convert.
pub(crate) const SUPPORTED: &str = "F16, BF16, F32, F64";

/// One mapped file of a table (the container, or an ONNX external data file).
pub(crate) struct MappedFile {
    pub path: PathBuf,
    pub map: Mmap,
    guard: MapGuard,
}

impl MappedFile {
    /// Opens `path` (a regular file only) and maps it read-only.
    pub(crate) fn open(path: &Path, what: &str) -> Result<Self, ReadError> {
        let (file, _) = super::limits::open_regular(path, what)?;
        let (map, guard) = super::mapped::map(&file, path)?;
        Ok(Self {
            path: path.to_path_buf(),
            map,
            guard,
        })
    }

    /// Lower-case hex SHA-256 of the whole file, hashed in chunks whose
    /// pages are released after use ([`super::release_pages`]).
    pub(crate) fn sha256(&self) -> String {
        super::sha256_of_map(&self.map)
    }
}

/// A byte range of one of the table's files.
#[derive(Clone, Debug)]
pub(crate) struct Segment {
    /// Index into [`Table::files`].
    pub file: usize,
    /// First byte.
    pub start: usize,
    /// Length in bytes.
    pub len: usize,
}

/// One tensor as stored.
#[derive(Clone, Debug)]
pub(crate) struct Stored {
    /// The shape as stored (row-major).
    pub shape: Vec<usize>,
    /// The element type, or its name in the file when it is not one of
    /// [`SUPPORTED`].
    pub dtype: Result<SourceDtype, String>,
    /// The bytes, in order (several for a chunked Flax array).
    pub segments: Vec<Segment>,
    /// Presented transposed: a 2-D tensor stored `[a, b]` reads as `[b, a]`.
    pub transpose: bool,
    /// Whether a tensor of rank above 2 may be read flattened to
    /// `[shape[0], rest]` (its stored order is PyTorch's).
    pub flatten_ok: bool,
    /// 8-bit integers that the graph dequantizes (ONNX `DequantizeLinear`):
    /// read as the graph's binary32 weights ([`Dequant`]); `None` for
    /// stored floats.
    pub dequant: Option<Dequant>,
}

/// How a 2-D tensor of 8-bit integers `q` is read as ONNX's
/// `DequantizeLinear` computes it: `fl32((q - z) s)` with its binary32
/// scales `s` and zero points `z` (of the weights' type), one per tensor
/// or one per index along a stored axis.
#[derive(Clone, Debug)]
pub(crate) struct Dequant {
    /// int8 weights (and zero points); uint8 otherwise.
    pub signed: bool,
    /// The binary32 scales, little-endian: one, or one per index along `axis`.
    pub scale: Segment,
    /// The zero points (as many as the scales, 8-bit like the weights);
    /// `None`: zero.
    pub zero_point: Option<Segment>,
    /// The stored axis (0 or 1) the scales run along; `None`: per tensor.
    pub axis: Option<usize>,
}

impl Dequant {
    /// How many scales (and zero points) a stored `shape` needs.
    fn count(&self, shape: &[usize]) -> usize {
        self.axis.map_or(1, |a| shape.get(a).copied().unwrap_or(0))
    }

    /// The 8-bit integer of byte `b`.
    fn int(&self, b: u8) -> i32 {
        if self.signed {
            i32::from(b as i8)
        } else {
            i32::from(b)
        }
    }

    /// Appends the dequantized values of the stored row-major `[_, cols]`
    /// bytes `q` (the first at element `first` of the tensor) to `out`.
    ///
    /// *Guarantee: exact*: each value is `fl32((q - z) s)`, the binary32
    /// value the graph computes: `q - z` is an integer below `2^9` in
    /// magnitude, its product with a binary32 scale is a binary64 number
    /// (so the binary64 multiplication is exact), and one conversion to
    /// binary32 rounds it as the graph's binary32 multiplication does (L38,
    /// [`proofs/exact-dequantize.md`](crate::proofs::exact_dequantize); the result converts back exactly, L1).
    fn decode(
        &self,
        files: &[MappedFile],
        q: &[u8],
        first: usize,
        cols: usize,
        out: &mut Vec<f64>,
    ) {
        let bytes = |s: &Segment| &files[s.file].map[s.start..s.start + s.len];
        let scales: Vec<f32> = bytes(&self.scale)
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let zeros: Vec<i32> = match &self.zero_point {
            Some(z) => bytes(z).iter().map(|&b| self.int(b)).collect(),
            None => vec![0; scales.len()],
        };
        out.extend(q.iter().enumerate().map(|(i, &b)| {
            let k = first + i;
            let c = match self.axis {
                Some(0) => k / cols,
                Some(_) => k % cols,
                None => 0,
            };
            // Exact in binary64 (L38 (b)), then rounded once to binary32 (L38 (c)).
            let d = f64::from(self.int(b) - zeros[c]);
            f64::from((d * f64::from(scales[c])) as f32)
        }));
    }
}

impl Stored {
    /// The shape as presented.
    pub(crate) fn shown_shape(&self) -> Vec<usize> {
        let mut s = self.shape.clone();
        if self.transpose && s.len() == 2 {
            s.swap(0, 1);
        }
        s
    }
}

/// Name of a supported dtype as the other readers write it.
pub(crate) fn dtype_name(d: &Result<SourceDtype, String>) -> String {
    match d {
        Ok(SourceDtype::F16) => "F16".into(),
        Ok(SourceDtype::BF16) => "BF16".into(),
        Ok(SourceDtype::F32) => "F32".into(),
        Ok(SourceDtype::F64) => "F64".into(),
        Ok(SourceDtype::Quantized(q) | SourceDtype::Int(q)) => (*q).into(),
        Err(name) => name.clone(),
    }
}

/// Checks, before any tensor is read, that a tensor's segments lie in
/// their files and hold exactly dtype × shape bytes (a supported dtype);
/// the message names what disagrees.
pub(crate) fn check_extent(files: &[MappedFile], name: &str, t: &Stored) -> Result<(), String> {
    let mut total: usize = 0;
    for s in &t.segments {
        let flen = files[s.file].map.len();
        if s.start.checked_add(s.len).is_none_or(|e| e > flen) {
            return Err(format!(
                "tensor '{}': its data (bytes {} to {}) runs past the end of {} ({flen} bytes)",
                fmt_name(name),
                s.start,
                s.start as u128 + s.len as u128,
                files[s.file].path.display()
            ));
        }
        total = total
            .checked_add(s.len)
            .ok_or_else(|| format!("tensor '{}': data length overflows", fmt_name(name)))?;
    }
    if let Some(dq) = &t.dequant {
        let n = dq.count(&t.shape);
        for (s, each, what) in [
            (Some(&dq.scale), 4, "scale"),
            (dq.zero_point.as_ref(), 1, "zero point"),
        ] {
            let Some(s) = s else { continue };
            let flen = files[s.file].map.len();
            if n.checked_mul(each) != Some(s.len)
                || s.start.checked_add(s.len).is_none_or(|e| e > flen)
            {
                return Err(format!(
                    "tensor '{}': its {what} data ({} bytes) is not {n} values within {}",
                    fmt_name(name),
                    s.len,
                    files[s.file].path.display()
                ));
            }
        }
    }
    if let Ok(d) = t.dtype {
        let need = t
            .shape
            .iter()
            .try_fold(d.itemsize(), |a, &x| a.checked_mul(x));
        if need != Some(total) {
            return Err(format!(
                "tensor '{}': shape {:?} of {} needs {} bytes, the file gives {total}",
                fmt_name(name),
                t.shape,
                dtype_name(&t.dtype),
                need.map_or_else(|| "more than usize::MAX".to_string(), |b| b.to_string()),
            ));
        }
    }
    Ok(())
}

/// The tensors of a parsed container, read one at a time.
pub(crate) struct Table {
    /// The container first, then any external data files.
    pub files: Vec<MappedFile>,
    pub tensors: HashMap<String, Stored>,
    /// All names, naturally sorted.
    pub names: Vec<String>,
}

impl Table {
    /// A table of `tensors` over `files`, every extent checked
    /// ([`check_extent`]; the error names the container).
    pub(crate) fn new(
        files: Vec<MappedFile>,
        tensors: HashMap<String, Stored>,
    ) -> Result<Self, ReadError> {
        for (n, t) in &tensors {
            check_extent(&files, n, t).map_err(|m| ReadError::format(&files[0].path, None, m))?;
        }
        let mut names: Vec<String> = tensors.keys().cloned().collect();
        names.sort_by(|a, b| super::safetensors::natural_cmp(a, b));
        Ok(Self {
            files,
            tensors,
            names,
        })
    }

    /// The container's path.
    pub(crate) fn path(&self) -> &Path {
        &self.files[0].path
    }

    /// Shape (as presented) and dtype name of a tensor.
    pub(crate) fn info(&self, name: &str) -> Option<(Vec<usize>, String)> {
        let t = self.tensors.get(name)?;
        Some((t.shown_shape(), dtype_name(&t.dtype)))
    }

    /// Every 2-D tensor of a supported dtype, in natural order.
    pub(crate) fn two_d_candidates(&self) -> Vec<String> {
        self.names
            .iter()
            .filter(|n| {
                let t = &self.tensors[*n];
                t.shape.len() == 2 && t.dtype.is_ok()
            })
            .cloned()
            .collect()
    }

    /// Reads a 2-D tensor as presented (exact conversion, L1; finiteness
    /// checked).
    pub(crate) fn read(&self, name: &str) -> Result<LoadedMatrix, ReadError> {
        self.read_as(name, false)
    }

    /// Reads a tensor of rank >= 2 whose stored order is PyTorch's
    /// flattened to `[shape[0], product of the rest]`; other tensors as
    /// [`Self::read`].
    pub(crate) fn read_flattened(&self, name: &str) -> Result<LoadedMatrix, ReadError> {
        self.read_as(name, true)
    }

    fn read_as(&self, name: &str, flatten: bool) -> Result<LoadedMatrix, ReadError> {
        let path = self.path();
        let Some(t) = self.tensors.get(name) else {
            return Err(ReadError::MissingTensor {
                path: path.to_path_buf(),
                tensor: name.to_string(),
                available: self.two_d_candidates(),
            });
        };
        let dtype = t.dtype.clone().map_err(|d| ReadError::UnsupportedDtype {
            path: path.to_path_buf(),
            tensor: Some(name.to_string()),
            dtype: d,
            supported: SUPPORTED,
            note: None,
        })?;
        let shape = t.shown_shape();
        let (rows, cols) = match shape.len() {
            2 => (shape[0], shape[1]),
            k if k > 2 && flatten && t.flatten_ok => {
                let rest = shape[1..]
                    .iter()
                    .try_fold(1usize, |a, &d| a.checked_mul(d))
                    .ok_or_else(|| ReadError::format(path, Some(name), "the shape overflows"))?;
                (shape[0], rest)
            }
            _ => {
                return Err(ReadError::NotTwoD {
                    path: path.to_path_buf(),
                    tensor: Some(name.to_string()),
                    shape,
                })
            }
        };
        if rows == 0 || cols == 0 {
            return Err(ReadError::Empty {
                path: path.to_path_buf(),
                tensor: Some(name.to_string()),
                shape,
            });
        }
        check_extent(&self.files, name, t).map_err(|m| ReadError::format(path, None, m))?;
        let mut data = super::f64_buffer(path, Some(name), rows, cols)?;
        for s in &t.segments {
            let f = &self.files[s.file];
            // The file may have been truncated since it was mapped.
            f.guard.check_len()?;
            let bytes = &f.map[s.start..s.start + s.len];
            match &t.dequant {
                Some(dq) => {
                    for p in std::iter::once(&dq.scale).chain(&dq.zero_point) {
                        self.files[p.file].guard.check_len()?;
                    }
                    dq.decode(&self.files, bytes, data.len(), t.shape[1], &mut data)
                }
                None => super::decode_le(dtype, bytes, &mut data),
            }
        }
        let data = if t.transpose {
            // Stored [cols, rows]: entry (i, j) of the result is stored (j, i).
            let mut out = super::f64_buffer(path, Some(name), rows, cols)?;
            for i in 0..rows {
                for j in 0..cols {
                    out.push(data[j * rows + i]);
                }
            }
            out
        } else {
            data
        };
        let matrix = DenseMatrix { rows, cols, data };
        check_finite(path, Some(name), &matrix)?;
        Ok(LoadedMatrix { matrix, dtype })
    }

    /// Releases a tensor's mapped pages from resident memory.
    pub(crate) fn release(&self, name: &str) {
        if let Some(t) = self.tensors.get(name) {
            for s in &t.segments {
                super::release_pages(&self.files[s.file].map, s.start, s.len);
            }
        }
    }

    /// SHA-256 of every file of the table (the container first).
    pub(crate) fn hashes(&self) -> Vec<(PathBuf, String)> {
        self.files
            .iter()
            .map(|f| (f.path.clone(), f.sha256()))
            .collect()
    }
}

/// A format read through a [`Table`] (ONNX, Flax): every [`WeightFile`]
/// method is the table's. A flattened read follows each tensor's
/// `flatten_ok` (Flax sets it on none, so its higher-rank tensors are
/// refused as not 2-D); a slice or a vector is refused.
pub(crate) trait TableFile: Send + Sync {
    /// The file's tensor table.
    fn table(&self) -> &Table;
}

impl<T: TableFile> WeightFile for T {
    fn path(&self) -> &Path {
        self.table().path()
    }
    fn hashes(&self) -> Result<Vec<(PathBuf, String)>, ReadError> {
        Ok(self.table().hashes())
    }
    fn release(&self, name: &str) {
        self.table().release(name)
    }
    fn names(&self) -> Vec<String> {
        self.table().names.clone()
    }
    fn info(&self, name: &str) -> Option<(Vec<usize>, String)> {
        self.table().info(name)
    }
    fn two_d_candidates(&self) -> Vec<String> {
        self.table().two_d_candidates()
    }
    fn read(&self, name: &str) -> Result<LoadedMatrix, ReadError> {
        self.table().read(name)
    }
    fn read_flattened(&self, name: &str) -> Result<LoadedMatrix, ReadError> {
        self.table().read_flattened(name)
    }
}

#[cfg(test)]
mod tests {
    use rug::Rational;

    /// L38 (b), checked exactly: for every 8-bit difference `d` in
    /// `[-255, 255]` and binary32 scales across the whole range (the
    /// smallest subnormal, the smallest normal, 1, the largest, and
    /// pseudo-random bit patterns), the binary64 product `d s` is the exact
    /// rational product, and rounding it once to binary32 gives the value
    /// nearest it among binary32 numbers (checked against both neighbours).
    #[test]
    fn dequantized_products_are_exact_in_binary64() {
        let mut scales = vec![f32::from_bits(1), f32::MIN_POSITIVE, 1.0, f32::MAX, 0.0];
        let mut x: u32 = 0x9e37_79b9;
        while scales.len() < 400 {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let s = f32::from_bits(x & 0x7fff_ffff);
            if s.is_finite() {
                scales.push(s);
            }
        }
        for s in scales {
            for d in -255i32..=255 {
                let p = f64::from(d) * f64::from(s);
                let exact = Rational::from(d) * Rational::from_f64(f64::from(s)).unwrap();
                assert_eq!(Rational::from_f64(p).unwrap(), exact, "{d} * {s:e}");
                let y = p as f32;
                if y.is_finite() {
                    let dist = |v: f32| (Rational::from_f64(f64::from(v)).unwrap() - &exact).abs();
                    let (lo, hi) = (
                        f32::from_bits(y.to_bits().wrapping_sub(1)),
                        f32::from_bits(y.to_bits() + 1),
                    );
                    for n in [lo, hi].into_iter().filter(|n| n.is_finite() && y != 0.0) {
                        assert!(dist(y) <= dist(n), "{d} * {s:e}: {y:e} is not the nearest");
                    }
                }
            }
        }
    }
}
