//! NumPy `.npy` reader (format versions 1.0, 2.0 and 3.0) and small writers.
//!
//! Layout: the magic `\x93NUMPY`, a major and a minor version byte, the
//! header length (u16 little-endian for 1.0, u32 for 2.0 and 3.0), the header
//! (a Python dict literal with the keys `descr`, `fortran_order` and `shape`,
//! padded with spaces and ended by `\n`; Latin-1 for 1.0/2.0, UTF-8 for
//! 3.0), then the raw array data.
//!
//! Only 2-D little-endian float arrays are read: `<f2`, `<f4`, `<f8` (plain
//! `f2`/`f4`/`f8` and `=` mean native order and are taken as little-endian,
//! the only byte order this crate is built for). The data size is checked
//! against the file size before anything is allocated, so a hostile header
//! can never make the reader allocate more than `8 / itemsize` times the
//! file size.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::Path;

use super::limits::MAX_NPY_HEADER;
use super::{check_finite, foreign_head, LoadedMatrix, ReadError};
use crate::matrix::{DenseMatrix, SourceDtype};

/// The first six bytes of every `.npy` file.
pub(crate) const MAGIC: &[u8; 6] = b"\x93NUMPY";

const SUPPORTED: &str = "'<f2', '<f4', '<f8' and '>f2', '>f4', '>f8' (float16/32/64, little- \
                         or big-endian; 'f2', 'f4', 'f8' and '=' native order are read as \
                         little-endian)";

/// Nesting limit of the header literal (a real header nests two levels).
const MAX_DEPTH: usize = 16;

/// Reads a 2-D float array from a `.npy` file. Fortran-ordered arrays are
/// converted to row-major. Every value must be finite.
pub fn read_npy(path: &Path) -> Result<LoadedMatrix, ReadError> {
    read_npy_shaped(path, false)
}

/// Reads a 1-D float array (f2, f4 or f8, converted exactly, L1) from a
/// `.npy` file, as a 1 x n matrix. Every value must be finite.
pub(crate) fn read_npy_vector(path: &Path) -> Result<LoadedMatrix, ReadError> {
    read_npy_shaped(path, true)
}

/// Whether `path` is a regular file that starts with the `.npy` magic
/// (opened by [`super::limits::open_regular`], so a FIFO or a device is
/// `false` at once, never a blocked open or read).
pub(crate) fn is_npy_file(path: &Path) -> bool {
    let Ok((mut f, _)) = super::limits::open_regular(path, "NumPy .npy file") else {
        return false;
    };
    let mut head = [0u8; 6];
    f.read_exact(&mut head).is_ok() && head == *MAGIC
}

fn read_npy_shaped(path: &Path, vector: bool) -> Result<LoadedMatrix, ReadError> {
    let (mut file, meta) = super::limits::open_regular(path, "NumPy .npy file")?;
    let file_len = meta.len();
    let (header, data_start) = read_header(&mut file, path, file_len)?;

    // dtype
    let (dtype, big) =
        npy_dtype(&header.descr).map_err(|(dtype, note)| ReadError::UnsupportedDtype {
            path: path.to_path_buf(),
            tensor: None,
            dtype,
            supported: SUPPORTED,
            note,
        })?;
    let (rows, cols) = matrix_shape(path, &header, vector)?;
    check_data_len(
        path,
        &header,
        rows,
        cols,
        dtype.itemsize(),
        file_len - data_start,
    )?;

    // Allocation: rows*cols*8 bytes = nbytes * 8 / itemsize <= file_len * 8 / itemsize.
    let mut data = super::f64_buffer(path, None, rows, cols)?;
    let mut reader = io::BufReader::with_capacity(1 << 16, &mut file);
    if !big && !header.fortran_order {
        read_row_major_le(&mut reader, path, dtype, rows * cols, &mut data)?;
    } else if !big {
        read_column_major_le(&mut reader, path, dtype, (rows, cols), &mut data)?;
    } else {
        let fortran = header.fortran_order.then_some((rows, cols));
        read_by_element(
            &mut reader,
            path,
            dtype,
            big,
            fortran,
            rows * cols,
            &mut data,
        )?;
    }
    finish_npy(path, reader, rows, cols, data, dtype)
}

/// The magic, the version, the header length and the header itself, each
/// checked against the file's length and the limits before it is read;
/// returns the parsed header and where the data starts.
fn read_header(file: &mut File, path: &Path, file_len: u64) -> Result<(Header, u64), ReadError> {
    let fmt_err = |msg: String| ReadError::format(path, None, msg);
    // Magic and version.
    let mut pre = [0u8; 8];
    if file_len < pre.len() as u64 {
        return Err(fmt_err(format!(
            "file is {file_len} bytes, too short for an npy header (\\x93NUMPY magic + version)"
        )));
    }
    read_exact_or_format(file, &mut pre, path, "npy magic")?;
    if &pre[..6] != MAGIC {
        if let Some(what) = foreign_head(file, &pre) {
            return Err(fmt_err(what));
        }
        return Err(fmt_err(
            "not an npy file: it does not start with the magic \\x93NUMPY".into(),
        ));
    }
    let (major, minor) = (pre[6], pre[7]);
    let len_bytes = match (major, minor) {
        (1, 0) => 2,
        (2, 0) | (3, 0) => 4,
        _ => {
            return Err(fmt_err(format!(
                "unsupported npy format version {major}.{minor} (supported: 1.0, 2.0, 3.0)"
            )))
        }
    };
    let mut lb = [0u8; 4];
    read_exact_or_format(file, &mut lb[..len_bytes], path, "npy header length")?;
    let header_len = u32::from_le_bytes(lb) as u64;
    let data_start = 8 + len_bytes as u64 + header_len;
    if data_start > file_len {
        return Err(fmt_err(format!(
            "npy header length {header_len} exceeds the file: header would end at byte \
             {data_start}, file is {file_len} bytes"
        )));
    }
    if header_len > MAX_NPY_HEADER {
        return Err(fmt_err(format!(
            "npy header length {header_len} exceeds the limit of {MAX_NPY_HEADER} bytes \
             (NumPy writes about 100)"
        )));
    }
    // header_len <= MAX_NPY_HEADER, so this allocation is small.
    let mut hbytes = vec![0u8; header_len as usize];
    read_exact_or_format(file, &mut hbytes, path, "npy header")?;
    let header_text: String = if major == 3 {
        String::from_utf8(hbytes)
            .map_err(|e| fmt_err(format!("npy 3.0 header is not UTF-8: {e}")))?
    } else {
        // Latin-1: every byte is the code point of the same value.
        hbytes.iter().map(|&b| b as char).collect()
    };
    let header = parse_header(&header_text).map_err(|m| fmt_err(format!("bad npy header: {m}")))?;
    Ok((header, data_start))
}

/// `(rows, cols)` of the array: 2-D, or 1-D read as one row when `vector`;
/// neither may be zero.
fn matrix_shape(path: &Path, header: &Header, vector: bool) -> Result<(usize, usize), ReadError> {
    if vector {
        if header.shape.len() != 1 {
            return Err(ReadError::format(
                path,
                None,
                format!(
                    "expected a 1-D array (the claimed singular values), found shape {}",
                    super::fmt_shape(&header.shape)
                ),
            ));
        }
    } else if header.shape.len() != 2 {
        return Err(ReadError::NotTwoD {
            path: path.to_path_buf(),
            tensor: None,
            shape: header.shape.clone(),
        });
    }
    let (rows, cols) = if vector {
        (1, header.shape[0])
    } else {
        (header.shape[0], header.shape[1])
    };
    if rows == 0 || cols == 0 {
        return Err(ReadError::Empty {
            path: path.to_path_buf(),
            tensor: None,
            shape: header.shape.clone(),
        });
    }
    Ok((rows, cols))
}

/// The data's `found` bytes must be exactly what the shape needs (checked
/// before anything is allocated from the shape).
fn check_data_len(
    path: &Path,
    header: &Header,
    rows: usize,
    cols: usize,
    itemsize: usize,
    found: u64,
) -> Result<(), ReadError> {
    let fmt_err = |msg: String| ReadError::format(path, None, msg);
    let nbytes = rows
        .checked_mul(cols)
        .and_then(|n| n.checked_mul(itemsize))
        .and_then(|n| u64::try_from(n).ok())
        .ok_or_else(|| {
            fmt_err(format!(
                "shape ({rows}, {cols}) with {itemsize}-byte elements overflows the address space"
            ))
        })?;
    if found != nbytes {
        let what = if found < nbytes {
            "file is truncated"
        } else {
            "file has trailing bytes"
        };
        return Err(fmt_err(format!(
            "{what}: shape ({rows}, {cols}) of {} needs {nbytes} data bytes, found {found}",
            header.descr_text
        )));
    }
    Ok(())
}

/// Row-major little-endian: whole blocks through the one decoder (in
/// parallel for large blocks), each entry written once.
fn read_row_major_le<R: Read>(
    reader: &mut R,
    path: &Path,
    dtype: SourceDtype,
    n: usize,
    data: &mut Vec<f64>,
) -> Result<(), ReadError> {
    let itemsize = dtype.itemsize();
    let mut block = vec![0u8; NPY_BLOCK_BYTES.min(n * itemsize)];
    let mut k = 0usize;
    while k < n {
        let take = (n - k).min(block.len() / itemsize);
        let buf = &mut block[..take * itemsize];
        read_exact_or_format(reader, buf, path, "npy data")?;
        super::decode_le(dtype, buf, data);
        k += take;
    }
    Ok(())
}

/// Little-endian Fortran-ordered (column-major) data: blocks of whole
/// columns decoded as row-major data is (`decode_le`, exact: L1) and
/// written into the row-major matrix a row segment at a time, so that
/// neither the reads nor the writes stride across the whole matrix (one
/// element at a time, a transposed 4096 x 22016 float16 matrix took 1.8 s
/// to read; issue 28).
fn read_column_major_le<R: Read>(
    reader: &mut R,
    path: &Path,
    dtype: SourceDtype,
    (rows, cols): (usize, usize),
    data: &mut Vec<f64>,
) -> Result<(), ReadError> {
    let itemsize = dtype.itemsize();
    if rows * cols >= 1 << 20 && rayon::current_num_threads() > 1 {
        // First touch (the kernel's page zeroing) split over the pool too.
        use rayon::prelude::*;
        data.par_extend(rayon::iter::repeat_n(
            0.0,
            (rows * cols).saturating_sub(data.len()),
        ));
    }
    data.resize(rows * cols, 0.0);
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    // About 2 MiB of raw columns: a row segment's reads (one per column)
    // then touch few enough cache lines to stay in the first-level cache.
    let width = ((2 << 20) / (rows * itemsize)).clamp(1, cols);
    let mut raw = vec![0u8; width * rows * itemsize];
    let mut block: Vec<f64> = Vec::with_capacity(width * rows);
    for j0 in (0..cols).step_by(width) {
        let w = width.min(cols - j0);
        let buf = &mut raw[..w * rows * itemsize];
        read_exact_or_format(reader, buf, path, "npy data")?;
        block.clear();
        super::decode_le(dtype, buf, &mut block);
        // Rows are independent: split over the pool for large blocks (each
        // entry is a copy of one decoded value, the same on any split).
        let scatter = |(r0, rows_out): (usize, &mut [f64])| {
            for (k, row) in rows_out.chunks_exact_mut(cols).enumerate() {
                for (q, d) in row[j0..j0 + w].iter_mut().enumerate() {
                    *d = block[q * rows + r0 + k];
                }
            }
        };
        const ROWS: usize = 256;
        if rows * w >= 1 << 20 && rayon::current_num_threads() > 1 {
            use rayon::prelude::*;
            data.par_chunks_mut(ROWS * cols)
                .enumerate()
                .for_each(|(b, c)| scatter((b * ROWS, c)));
        } else {
            scatter((0, &mut data[..]));
        }
    }
    Ok(())
}

/// Big-endian or Fortran-ordered data, one element at a time; `fortran`
/// holds `(rows, cols)` when the storage order is column-major.
fn read_by_element<R: Read>(
    reader: &mut R,
    path: &Path,
    dtype: SourceDtype,
    big: bool,
    fortran: Option<(usize, usize)>,
    n: usize,
    data: &mut Vec<f64>,
) -> Result<(), ReadError> {
    let itemsize = dtype.itemsize();
    data.resize(n, 0.0);
    let mut chunk = vec![0u8; (1 << 16) / itemsize * itemsize];
    let (mut i, mut j) = (0usize, 0usize); // storage-order cursor (Fortran only)
    let mut k = 0usize;
    while k < n {
        let take = (n - k).min(chunk.len() / itemsize);
        let buf = &mut chunk[..take * itemsize];
        read_exact_or_format(reader, buf, path, "npy data")?;
        for bytes in buf.chunks_exact(itemsize) {
            let v = if big {
                // Big-endian: the same value from the bytes reversed.
                let mut le = [0u8; 8];
                le[..itemsize].copy_from_slice(bytes);
                le[..itemsize].reverse();
                super::decode_le_one(dtype, &le[..itemsize])
            } else {
                super::decode_le_one(dtype, bytes)
            };
            if let Some((rows, cols)) = fortran {
                data[i * cols + j] = v;
                i += 1;
                if i == rows {
                    i = 0;
                    j += 1;
                }
            } else {
                data[k] = v;
            }
            k += 1;
        }
    }
    Ok(())
}

/// Bytes of the data read per block on the row-major little-endian path
/// ([`read_row_major_le`]; a multiple of every element size).
const NPY_BLOCK_BYTES: usize = 16 << 20;

/// The end of [`read_npy_shaped`]: no bytes past the data (the file may
/// have grown since its length was read), and every value finite.
fn finish_npy<R: Read>(
    path: &Path,
    mut reader: R,
    rows: usize,
    cols: usize,
    data: Vec<f64>,
    dtype: SourceDtype,
) -> Result<LoadedMatrix, ReadError> {
    let fmt_err = |m: String| ReadError::format(path, None, m);
    let mut extra = [0u8; 1];
    match reader.read(&mut extra) {
        Ok(0) => {}
        Ok(_) => {
            return Err(fmt_err(
                "file has trailing bytes after the array data".into(),
            ))
        }
        Err(e) => return Err(ReadError::io(path, e)),
    }

    let matrix = DenseMatrix { rows, cols, data };
    check_finite(path, None, &matrix)?;
    Ok(LoadedMatrix { matrix, dtype })
}

/// The in-memory counterpart of [`read_npy`]: a `rows` x `cols` float
/// array given as little-endian bytes in row-major (C) order (what NumPy's
/// `ndarray.tobytes()` gives for a `<f2`, `<f4` or `<f8` array), converted
/// to f64 exactly by the same decoder ([`proofs/exact-conversion.md`](crate::proofs::exact_conversion), L1) and
/// held to the same checks: no zero dimension, the byte count of the shape,
/// every value finite. `name` stands for the file in error messages.
pub fn matrix_from_le_bytes(
    name: &Path,
    dtype: SourceDtype,
    rows: usize,
    cols: usize,
    bytes: &[u8],
) -> Result<LoadedMatrix, ReadError> {
    if let SourceDtype::Quantized(q) | SourceDtype::Int(q) = dtype {
        return Err(ReadError::UnsupportedDtype {
            path: name.to_path_buf(),
            tensor: None,
            dtype: q.to_string(),
            supported: SUPPORTED,
            note: None,
        });
    }
    if rows == 0 || cols == 0 {
        return Err(ReadError::Empty {
            path: name.to_path_buf(),
            tensor: None,
            shape: vec![rows, cols],
        });
    }
    let itemsize = dtype.itemsize();
    let needed = rows.checked_mul(cols).and_then(|n| n.checked_mul(itemsize));
    if needed != Some(bytes.len()) {
        return Err(ReadError::format(
            name,
            None,
            format!(
                "shape ({rows}, {cols}) of {dtype} needs {} bytes, found {}",
                needed.map_or_else(
                    || "more than the address space of".into(),
                    |n| n.to_string()
                ),
                bytes.len()
            ),
        ));
    }
    let data: Vec<f64> = bytes
        .chunks_exact(itemsize)
        .map(|b| super::decode_le_one(dtype, b))
        .collect();
    let matrix = DenseMatrix { rows, cols, data };
    check_finite(name, None, &matrix)?;
    Ok(LoadedMatrix { matrix, dtype })
}

/// The integer counterpart of [`matrix_from_le_bytes`]: a `rows` x `cols`
/// array of little-endian integers (`signed`, `itemsize` 1, 2, 4 or 8
/// bytes) in row-major order, every value converted to f64 exactly. Up to
/// 32 bits every integer is a binary64 number; a 64-bit value is one
/// exactly when its significant bits (from the highest set bit down to the
/// lowest) number at most 53, and any other value is refused with its
/// index and the reason, never rounded ([`proofs/exact-conversion.md`](crate::proofs::exact_conversion), L1:
/// the conversion is exact or refused). `name` stands for the file.
pub fn matrix_from_int_le_bytes(
    name: &Path,
    signed: bool,
    itemsize: usize,
    rows: usize,
    cols: usize,
    bytes: &[u8],
) -> Result<LoadedMatrix, ReadError> {
    let dtype: &'static str = match (signed, itemsize) {
        (true, 1) => "I8",
        (true, 2) => "I16",
        (true, 4) => "I32",
        (true, 8) => "I64",
        (false, 1) => "U8",
        (false, 2) => "U16",
        (false, 4) => "U32",
        (false, 8) => "U64",
        _ => {
            return Err(ReadError::format(
                name,
                None,
                format!("integers of {itemsize} bytes are not read (1, 2, 4 or 8)"),
            ))
        }
    };
    if rows == 0 || cols == 0 {
        return Err(ReadError::Empty {
            path: name.to_path_buf(),
            tensor: None,
            shape: vec![rows, cols],
        });
    }
    let needed = rows.checked_mul(cols).and_then(|n| n.checked_mul(itemsize));
    if needed != Some(bytes.len()) {
        return Err(ReadError::format(
            name,
            None,
            format!(
                "shape ({rows}, {cols}) of {dtype} needs {} bytes, found {}",
                needed.map_or_else(
                    || "more than the address space of".into(),
                    |n| n.to_string()
                ),
                bytes.len()
            ),
        ));
    }
    let mut data = Vec::with_capacity(rows * cols);
    for (k, b) in bytes.chunks_exact(itemsize).enumerate() {
        let mut w = [0u8; 8];
        w[..itemsize].copy_from_slice(b);
        // Sign-extend a negative signed value to 64 bits.
        if signed && b[itemsize - 1] & 0x80 != 0 {
            w[itemsize..].fill(0xff);
        }
        let raw = u64::from_le_bytes(w);
        let (negative, magnitude) = if signed {
            let v = raw as i64;
            (v < 0, v.unsigned_abs())
        } else {
            (false, raw)
        };
        let significant = match magnitude {
            0 => 0,
            m => 64 - m.leading_zeros() - m.trailing_zeros(),
        };
        if significant > 53 {
            let shown = if signed {
                (raw as i64).to_string()
            } else {
                raw.to_string()
            };
            return Err(ReadError::format(
                name,
                None,
                format!(
                    "{dtype} value {shown} at [{}, {}] is not exactly a float64 ({significant} \
                     significant bits, at most 53 fit): it would be rounded, so the array is \
                     refused; convert it yourself if the rounded values are what you mean",
                    k / cols,
                    k % cols
                ),
            ));
        }
        // Exact: at most 53 significant bits (L1).
        let x = magnitude as f64;
        data.push(if negative { -x } else { x });
    }
    Ok(LoadedMatrix {
        matrix: DenseMatrix { rows, cols, data },
        dtype: SourceDtype::Int(dtype),
    })
}

fn read_exact_or_format<R: Read>(
    r: &mut R,
    buf: &mut [u8],
    path: &Path,
    what: &str,
) -> Result<(), ReadError> {
    r.read_exact(buf).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            ReadError::format(
                path,
                None,
                format!("file is truncated (while reading {what})"),
            )
        } else {
            ReadError::io(path, e)
        }
    })
}

/// Maps a `descr` to a dtype and whether it is big-endian (`>`), or gives
/// (descr as written, note) for the error.
fn npy_dtype(descr: &PyValue) -> Result<(SourceDtype, bool), (String, Option<&'static str>)> {
    let s = match descr {
        PyValue::Str(s) => s.as_str(),
        other => {
            return Err((
                other.to_string(),
                Some("structured and sub-array dtypes are not supported"),
            ))
        }
    };
    let (order, code) = match s.chars().next() {
        Some(c @ ('<' | '>' | '=' | '|')) => (Some(c), &s[1..]),
        _ => (None, s),
    };
    let dtype = match code {
        "f2" | "e" => Some(SourceDtype::F16),
        "f4" | "f" => Some(SourceDtype::F32),
        "f8" | "d" => Some(SourceDtype::F64),
        _ => None,
    };
    let quoted = format!("'{s}'");
    match (order, dtype) {
        (Some('>'), Some(d)) => Ok((d, true)),
        (Some('|'), Some(_)) => Err((
            quoted,
            Some("byte order '|' (not applicable) is meaningless for a multi-byte float"),
        )),
        (_, Some(d)) => Ok((d, false)),
        (_, None) => Err((quoted, None)),
    }
}

// ---------------------------------------------------------------------------
// Header literal parser

/// A value of the Python literal subset used by npy headers.
#[derive(Clone, Debug, PartialEq)]
enum PyValue {
    Str(String),
    Int(i128),
    Bool(bool),
    None,
    Tuple(Vec<PyValue>),
    List(Vec<PyValue>),
    Dict(Vec<(PyValue, PyValue)>),
}

impl std::fmt::Display for PyValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        fn seq(f: &mut std::fmt::Formatter<'_>, items: &[PyValue]) -> std::fmt::Result {
            for (k, v) in items.iter().enumerate() {
                if k > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{v}")?;
            }
            Ok(())
        }
        match self {
            PyValue::Str(s) => write!(f, "'{s}'"),
            PyValue::Int(i) => write!(f, "{i}"),
            PyValue::Bool(b) => f.write_str(if *b { "True" } else { "False" }),
            PyValue::None => f.write_str("None"),
            PyValue::Tuple(v) => {
                f.write_str("(")?;
                seq(f, v)?;
                f.write_str(if v.len() == 1 { ",)" } else { ")" })
            }
            PyValue::List(v) => {
                f.write_str("[")?;
                seq(f, v)?;
                f.write_str("]")
            }
            PyValue::Dict(kv) => {
                f.write_str("{")?;
                for (k, (key, v)) in kv.iter().enumerate() {
                    if k > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{key}: {v}")?;
                }
                f.write_str("}")
            }
        }
    }
}

#[derive(Debug)]
struct Header {
    descr: PyValue,
    /// `descr` as it should appear in messages.
    descr_text: String,
    fortran_order: bool,
    shape: Vec<usize>,
}

fn parse_header(text: &str) -> Result<Header, String> {
    let mut p = Parser {
        s: text.as_bytes(),
        pos: 0,
        text,
    };
    let v = p.value(0)?;
    p.skip_ws();
    if p.pos != p.s.len() {
        return Err(format!(
            "unexpected {} after the header dict at byte {}",
            p.describe_here(),
            p.pos
        ));
    }
    let PyValue::Dict(items) = v else {
        return Err(format!("expected a dict literal, found {v}"));
    };
    let mut descr = None;
    let mut fortran = None;
    let mut shape = None;
    for (k, v) in items {
        let PyValue::Str(k) = k else {
            continue; // not one of ours; numpy would reject, we ignore
        };
        let slot = match k.as_str() {
            "descr" => &mut descr,
            "fortran_order" => &mut fortran,
            "shape" => &mut shape,
            _ => continue,
        };
        if slot.is_some() {
            return Err(format!("duplicate key '{k}'"));
        }
        *slot = Some(v);
    }
    let descr = descr.ok_or("missing key 'descr'")?;
    let fortran_order = match fortran.ok_or("missing key 'fortran_order'")? {
        PyValue::Bool(b) => b,
        other => {
            return Err(format!(
                "'fortran_order' must be True or False, found {other}"
            ))
        }
    };
    let shape = match shape.ok_or("missing key 'shape'")? {
        PyValue::Tuple(v) | PyValue::List(v) => v
            .iter()
            .map(|d| match d {
                PyValue::Int(i) if *i < 0 => Err(format!("negative dimension {i} in shape")),
                PyValue::Int(i) => usize::try_from(*i)
                    .map_err(|_| format!("dimension {i} in shape does not fit in usize")),
                other => Err(format!("shape entries must be integers, found {other}")),
            })
            .collect::<Result<Vec<_>, _>>()?,
        other => {
            return Err(format!(
                "'shape' must be a tuple of integers, found {other}"
            ))
        }
    };
    let descr_text = descr.to_string();
    Ok(Header {
        descr,
        descr_text,
        fortran_order,
        shape,
    })
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
    text: &'a str,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while self.pos < self.s.len() && matches!(self.s[self.pos], b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn describe_here(&self) -> String {
        match self.text[self.pos..].chars().next() {
            None => "end of header".into(),
            Some(c) => format!("{:?}", c),
        }
    }

    fn expected(&self, what: &str) -> String {
        format!(
            "expected {what} at byte {}, found {}",
            self.pos,
            self.describe_here()
        )
    }

    fn value(&mut self, depth: usize) -> Result<PyValue, String> {
        if depth > MAX_DEPTH {
            return Err(format!("literal nested deeper than {MAX_DEPTH} levels"));
        }
        self.skip_ws();
        match self.peek() {
            Some(b'{') => self.dict(depth),
            Some(open @ (b'(' | b'[')) => self.sequence(open, depth),
            Some(q @ (b'\'' | b'"')) => self.string(q),
            Some(c) if c.is_ascii_digit() || c == b'-' || c == b'+' => self.int(c),
            Some(c) if c.is_ascii_alphabetic() => self.name(),
            _ => Err(self.expected("a value")),
        }
    }

    /// `{k: v, ...}`, at the opening brace.
    fn dict(&mut self, depth: usize) -> Result<PyValue, String> {
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            if self.peek() == Some(b'}') {
                self.pos += 1;
                return Ok(PyValue::Dict(items));
            }
            let k = self.value(depth + 1)?;
            self.skip_ws();
            if self.peek() != Some(b':') {
                return Err(self.expected("':'"));
            }
            self.pos += 1;
            let v = self.value(depth + 1)?;
            items.push((k, v));
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {}
                _ => return Err(self.expected("',' or '}'")),
            }
        }
    }

    /// A tuple or a list, at its opening `open` bracket.
    fn sequence(&mut self, open: u8, depth: usize) -> Result<PyValue, String> {
        let close = if open == b'(' { b')' } else { b']' };
        self.pos += 1;
        let mut items = Vec::new();
        let mut trailing_comma = false;
        loop {
            self.skip_ws();
            if self.peek() == Some(close) {
                self.pos += 1;
                break;
            }
            items.push(self.value(depth + 1)?);
            self.skip_ws();
            trailing_comma = false;
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    trailing_comma = true;
                }
                Some(c) if c == close => {}
                _ => return Err(self.expected(&format!("',' or '{}'", close as char))),
            }
        }
        if open == b'[' {
            Ok(PyValue::List(items))
        } else if items.len() == 1 && !trailing_comma {
            // `(x)` is just a parenthesised x in Python.
            Ok(items.pop().expect("one item"))
        } else {
            Ok(PyValue::Tuple(items))
        }
    }

    /// A string literal quoted by `q`, at the opening quote.
    fn string(&mut self, q: u8) -> Result<PyValue, String> {
        self.pos += 1;
        let start = self.pos;
        let mut out = String::new();
        let mut seg = start;
        loop {
            match self.peek() {
                None => {
                    return Err(format!(
                        "unterminated string starting at byte {}",
                        start - 1
                    ))
                }
                Some(c) if c == q => {
                    out.push_str(&self.text[seg..self.pos]);
                    self.pos += 1;
                    return Ok(PyValue::Str(out));
                }
                Some(b'\\') => {
                    out.push_str(&self.text[seg..self.pos]);
                    self.pos += 1;
                    let c = self.text[self.pos..].chars().next().ok_or_else(|| {
                        format!("unterminated string starting at byte {}", start - 1)
                    })?;
                    out.push(match c {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        '0' => '\0',
                        other => other,
                    });
                    self.pos += c.len_utf8();
                    seg = self.pos;
                }
                Some(_) => {
                    // advance one whole char (the text is valid UTF-8)
                    let c = self.text[self.pos..].chars().next().expect("not at end");
                    self.pos += c.len_utf8();
                }
            }
        }
    }

    /// An integer whose first byte is `c` (a digit or a sign).
    fn int(&mut self, c: u8) -> Result<PyValue, String> {
        let start = self.pos;
        let neg = c == b'-';
        if c == b'-' || c == b'+' {
            self.pos += 1;
        }
        let digits_start = self.pos;
        let mut acc: i128 = 0;
        while let Some(d) = self.peek().filter(u8::is_ascii_digit) {
            acc = acc
                .checked_mul(10)
                .and_then(|a| a.checked_add(i128::from(d - b'0')))
                .ok_or_else(|| format!("integer too large at byte {start}"))?;
            self.pos += 1;
            // Python 3 allows '_' separators; tolerate them.
            while self.peek() == Some(b'_') {
                self.pos += 1;
            }
        }
        if self.pos == digits_start {
            return Err(self.expected("a digit"));
        }
        // Python 2 long suffix, as in old numpy headers: (3L, 4L)
        if matches!(self.peek(), Some(b'L' | b'l')) {
            self.pos += 1;
        }
        if matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || c == b'.') {
            return Err(self.expected("an integer"));
        }
        Ok(PyValue::Int(if neg { -acc } else { acc }))
    }

    /// `True`, `False` or `None` (any other name is an error).
    fn name(&mut self) -> Result<PyValue, String> {
        let start = self.pos;
        while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || c == b'_') {
            self.pos += 1;
        }
        match &self.text[start..self.pos] {
            "True" => Ok(PyValue::Bool(true)),
            "False" => Ok(PyValue::Bool(false)),
            "None" => Ok(PyValue::None),
            word => Err(format!("unexpected name '{word}' at byte {start}")),
        }
    }
}

// ---------------------------------------------------------------------------
// Writers

/// Writes an npy 1.0 file: header padded with spaces so that the data starts
/// at a multiple of 64 bytes, ended by `\n`, then `data` verbatim.
fn write_npy_bytes(
    path: &Path,
    descr: &str,
    shape: &[usize],
    fortran: bool,
    data: &[u8],
) -> io::Result<()> {
    let shape_text = match shape {
        [d] => format!("({d},)"),
        dims => format!(
            "({})",
            dims.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!(
        "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape_text}, }}",
        if fortran { "True" } else { "False" }
    );
    let unpadded = MAGIC.len() + 2 + 2 + header.len() + 1;
    header.extend(std::iter::repeat_n(
        ' ',
        unpadded.next_multiple_of(64) - unpadded,
    ));
    header.push('\n');
    let hlen = u16::try_from(header.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "npy header too long for v1.0"))?;
    let mut w = BufWriter::new(File::create(path)?);
    w.write_all(MAGIC)?;
    w.write_all(&[1, 0])?;
    w.write_all(&hlen.to_le_bytes())?;
    w.write_all(header.as_bytes())?;
    w.write_all(data)?;
    w.into_inner().map_err(|e| e.into_error())?.sync_all()
}

fn check_len(rows: usize, cols: usize, len: usize) -> io::Result<()> {
    if rows.checked_mul(cols) != Some(len) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("data has {len} elements, shape ({rows}, {cols}) needs rows*cols"),
        ));
    }
    Ok(())
}

/// Writes `m` as a C-order `<f8` npy 1.0 file.
pub fn write_npy_f64(path: &Path, m: &DenseMatrix) -> io::Result<()> {
    check_len(m.rows, m.cols, m.data.len())?;
    let bytes: Vec<u8> = m.data.iter().flat_map(|v| v.to_le_bytes()).collect();
    write_npy_bytes(path, "<f8", &[m.rows, m.cols], false, &bytes)
}

/// Writes a `<f4` npy 1.0 file of shape `(rows, cols)`. `data` is written
/// verbatim in storage order: row-major if `fortran` is false, column-major
/// (and `fortran_order: True` in the header) if it is true.
pub fn write_npy_f32(
    path: &Path,
    rows: usize,
    cols: usize,
    data: &[f32],
    fortran: bool,
) -> io::Result<()> {
    check_len(rows, cols, data.len())?;
    let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
    write_npy_bytes(path, "<f4", &[rows, cols], fortran, &bytes)
}

#[cfg(test)]
mod tests {
    use super::super::test_util::TempPath;
    use super::*;

    #[test]
    fn is_npy_file_never_blocks_on_a_fifo_or_reads_a_device() {
        let t = TempPath::new("claims-fifo");
        let c = std::ffi::CString::new(t.path().to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } == 0 {
            assert!(!is_npy_file(t.path()));
        }
        assert!(!is_npy_file(Path::new("/dev/zero")));
        let t = TempPath::new("a.npy");
        write_npy_f64(
            t.path(),
            &DenseMatrix {
                rows: 1,
                cols: 1,
                data: vec![1.0],
            },
        )
        .unwrap();
        assert!(is_npy_file(t.path()));
    }

    /// Raw npy file: given version, literal header text (padded here), data.
    fn raw_npy(major: u8, header: &str, data: &[u8]) -> Vec<u8> {
        let len_bytes = if major == 1 { 2 } else { 4 };
        let mut h = header.to_string();
        let unpadded = 8 + len_bytes + h.len() + 1;
        h.extend(std::iter::repeat_n(
            ' ',
            unpadded.next_multiple_of(64) - unpadded,
        ));
        h.push('\n');
        let mut out = MAGIC.to_vec();
        out.extend([major, 0]);
        if major == 1 {
            out.extend((h.len() as u16).to_le_bytes());
        } else {
            out.extend((h.len() as u32).to_le_bytes());
        }
        out.extend(h.as_bytes());
        out.extend(data);
        out
    }

    fn write_tmp(name: &str, bytes: &[u8]) -> TempPath {
        let t = TempPath::new(name);
        std::fs::write(t.path(), bytes).unwrap();
        t
    }

    fn err_of(t: &TempPath) -> (ReadError, String) {
        let e = read_npy(t.path()).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with(&format!("{}: ", t.path().display())),
            "message does not start with the path: {msg}"
        );
        assert!(!msg.contains('\n'));
        (e, msg)
    }

    fn f64_bytes(v: &[f64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// Regression (issue 28): Fortran-ordered little-endian data is read a
    /// block of whole columns at a time; across several blocks (a column of
    /// 300 000 float32 values is 1.2 MB, so each 2 MiB block holds one), the
    /// matrix is the one the element-by-element big-endian path reads from
    /// the same values, and entry (i, j) is column j's element i.
    #[test]
    fn fortran_order_little_endian_blocks_match_the_element_path() {
        let (rows, cols) = (300_000usize, 3usize);
        let value = |i: usize, j: usize| ((i * 7 + j * 13) % 1000) as f32 * 0.25 - 100.0;
        let col_major: Vec<f32> = (0..cols)
            .flat_map(|j| (0..rows).map(move |i| value(i, j)))
            .collect();
        let shape = format!("'shape': ({rows}, {cols}), }}");
        let le: Vec<u8> = col_major.iter().flat_map(|x| x.to_le_bytes()).collect();
        let be: Vec<u8> = col_major.iter().flat_map(|x| x.to_be_bytes()).collect();
        let t_le = write_tmp(
            "f-le.npy",
            &raw_npy(
                1,
                &format!("{{'descr': '<f4', 'fortran_order': True, {shape}"),
                &le,
            ),
        );
        let t_be = write_tmp(
            "f-be.npy",
            &raw_npy(
                1,
                &format!("{{'descr': '>f4', 'fortran_order': True, {shape}"),
                &be,
            ),
        );
        let a = read_npy(t_le.path()).unwrap().matrix;
        let b = read_npy(t_be.path()).unwrap().matrix;
        assert_eq!((a.rows, a.cols), (rows, cols));
        assert_eq!(a.data, b.data);
        for (i, j) in [(0, 0), (1, 2), (rows - 1, 1), (123_456, 2)] {
            assert_eq!(a.data[i * cols + j], value(i, j) as f64, "entry ({i}, {j})");
        }
    }

    #[test]
    fn round_trip_f64_c_order_bit_exact() {
        let data = vec![
            1.0,
            -0.0,
            f64::MAX,
            f64::MIN_POSITIVE,
            5e-324,
            -1.0 / 3.0,
            std::f64::consts::PI,
            -2.5e300,
            0.1,
            7.0,
            -8.0,
            1e-310,
        ];
        let m = DenseMatrix {
            rows: 3,
            cols: 4,
            data,
        };
        let t = TempPath::new("rt64.npy");
        write_npy_f64(t.path(), &m).unwrap();
        let bytes = std::fs::read(t.path()).unwrap();
        assert_eq!(bytes.len(), 128 + 12 * 8, "header padded to 64 bytes");
        assert_eq!(bytes[127], b'\n');
        let got = read_npy(t.path()).unwrap();
        assert_eq!(got.dtype, SourceDtype::F64);
        assert_eq!((got.matrix.rows, got.matrix.cols), (3, 4));
        for (a, b) in got.matrix.data.iter().zip(&m.data) {
            assert_eq!(a.to_bits(), b.to_bits());
        }
        assert_eq!(got.matrix.get(1, 2), std::f64::consts::PI);
    }

    #[test]
    fn round_trip_f32_c_and_fortran_give_same_matrix() {
        let (rows, cols) = (3, 5);
        let val = |i: usize, j: usize| (i as f32 + 1.0) * 0.1 - (j as f32) * 1.7e-3 + 1e-30;
        let c: Vec<f32> = (0..rows)
            .flat_map(|i| (0..cols).map(move |j| val(i, j)))
            .collect();
        let f: Vec<f32> = (0..cols)
            .flat_map(|j| (0..rows).map(move |i| val(i, j)))
            .collect();
        let tc = TempPath::new("c.npy");
        let tf = TempPath::new("f.npy");
        write_npy_f32(tc.path(), rows, cols, &c, false).unwrap();
        write_npy_f32(tf.path(), rows, cols, &f, true).unwrap();
        let mc = read_npy(tc.path()).unwrap();
        let mf = read_npy(tf.path()).unwrap();
        assert_eq!(mc.dtype, SourceDtype::F32);
        assert_eq!(mf.dtype, SourceDtype::F32);
        assert_eq!(mc.matrix, mf.matrix);
        for i in 0..rows {
            for j in 0..cols {
                assert_eq!(mc.matrix.get(i, j), val(i, j) as f64);
            }
        }
        // 1 x n and n x 1 Fortran arrays too.
        let t = TempPath::new("f1.npy");
        write_npy_f32(t.path(), 1, 4, &[1.0, 2.0, 3.0, 4.0], true).unwrap();
        assert_eq!(
            read_npy(t.path()).unwrap().matrix.data,
            [1.0, 2.0, 3.0, 4.0]
        );
        write_npy_f32(t.path(), 4, 1, &[1.0, 2.0, 3.0, 4.0], true).unwrap();
        assert_eq!(
            read_npy(t.path()).unwrap().matrix.data,
            [1.0, 2.0, 3.0, 4.0]
        );
    }

    #[test]
    fn fortran_order_larger_than_one_chunk() {
        // More than the 64 KiB read chunk, to exercise the streaming cursor.
        let (rows, cols) = (97, 301);
        let val = |i: usize, j: usize| (i * 1000 + j) as f32;
        let f: Vec<f32> = (0..cols)
            .flat_map(|j| (0..rows).map(move |i| val(i, j)))
            .collect();
        let t = TempPath::new("big-f.npy");
        write_npy_f32(t.path(), rows, cols, &f, true).unwrap();
        let m = read_npy(t.path()).unwrap().matrix;
        for i in 0..rows {
            for j in 0..cols {
                assert_eq!(m.get(i, j), val(i, j) as f64);
            }
        }
    }

    #[test]
    fn bytes_in_memory_give_the_matrix_the_file_gives() {
        let vals = [1.5f32, -0.0, 3.0e-39, f32::MAX, -2.0, 0.1];
        let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        let t = TempPath::new("mem-f32.npy");
        write_npy_f32(t.path(), 2, 3, &vals, false).unwrap();
        let from_file = read_npy(t.path()).unwrap();
        let name = Path::new("array");
        let from_bytes = matrix_from_le_bytes(name, SourceDtype::F32, 2, 3, &bytes).unwrap();
        assert_eq!(from_bytes, from_file);
        // f16 and f64 decode bit for bit too.
        let h: Vec<u8> = [half::f16::MIN_POSITIVE_SUBNORMAL, half::f16::MAX]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let m = matrix_from_le_bytes(name, SourceDtype::F16, 1, 2, &h).unwrap();
        assert_eq!(m.matrix.data, vec![2f64.powi(-24), 65504.0]);
        let d: Vec<u8> = [f64::MIN_POSITIVE / 4.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let m = matrix_from_le_bytes(name, SourceDtype::F64, 1, 1, &d).unwrap();
        assert_eq!(
            m.matrix.data[0].to_bits(),
            (f64::MIN_POSITIVE / 4.0).to_bits()
        );
    }

    #[test]
    fn bytes_in_memory_are_checked_like_a_file() {
        let name = Path::new("array");
        let msg = |r: Result<LoadedMatrix, ReadError>| r.unwrap_err().to_string();
        let nan: Vec<u8> = [1.0f64, f64::NAN]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(
            msg(matrix_from_le_bytes(name, SourceDtype::F64, 1, 2, &nan)),
            "array: non-finite value NaN at row 0, col 1 (0-based)"
        );
        assert_eq!(
            msg(matrix_from_le_bytes(name, SourceDtype::F64, 0, 2, &[])),
            "array: empty matrix: shape [0, 2] has a zero dimension"
        );
        assert_eq!(
            msg(matrix_from_le_bytes(name, SourceDtype::F32, 2, 2, &[0; 12])),
            "array: shape (2, 2) of F32 needs 16 bytes, found 12"
        );
        assert!(msg(matrix_from_le_bytes(
            name,
            SourceDtype::F64,
            usize::MAX,
            2,
            &[]
        ))
        .contains("more than the address space"));
        assert!(msg(matrix_from_le_bytes(
            name,
            SourceDtype::Quantized("Q8_0"),
            1,
            1,
            &[0]
        ))
        .starts_with("array: unsupported dtype Q8_0"));
    }

    #[test]
    fn round_trip_f16() {
        let vals = [
            1.0f32,
            -2.5,
            65504.0,
            6.1035156e-5,
            5.9604645e-8,
            0.333_251_95,
        ];
        let h: Vec<half::f16> = vals.iter().map(|&v| half::f16::from_f32(v)).collect();
        for (a, b) in h.iter().zip(&vals) {
            assert_eq!(a.to_f32(), *b, "test values must be exact in f16");
        }
        let bytes: Vec<u8> = h.iter().flat_map(|v| v.to_bits().to_le_bytes()).collect();
        let t = write_tmp(
            "h.npy",
            &raw_npy(
                1,
                "{'descr': '<f2', 'fortran_order': False, 'shape': (2, 3), }",
                &bytes,
            ),
        );
        let got = read_npy(t.path()).unwrap();
        assert_eq!(got.dtype, SourceDtype::F16);
        let want: Vec<f64> = vals.iter().map(|&v| v as f64).collect();
        assert_eq!(got.matrix.data, want);
    }

    #[test]
    fn header_variants_versions_2_and_3() {
        let data = f64_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let want = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let headers = [
            "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }",
            "{'shape': (2,3), 'fortran_order': False, 'descr': '<f8'}",
            "{ \"fortran_order\" : False ,\"descr\":\"<f8\",  'shape' : ( 2 , 3 , ) , }",
            "{'descr': '<f8', 'fortran_order': False, 'shape': [2, 3]}",
            "{'descr': 'f8', 'fortran_order': False, 'shape': (2L, 3L), }",
            "{'descr': '=d', 'fortran_order': False, 'shape': (2, 3), 'extra': None}",
        ];
        for (k, h) in headers.iter().enumerate() {
            for major in [1u8, 2, 3] {
                let t = write_tmp(&format!("v{major}-{k}.npy"), &raw_npy(major, h, &data));
                let got = read_npy(t.path()).unwrap_or_else(|e| panic!("{h} v{major}: {e}"));
                assert_eq!(got.matrix.data, want, "{h}");
                assert_eq!((got.matrix.rows, got.matrix.cols), (2, 3));
            }
        }
        // Fortran flag honoured in v2 as well.
        let t = write_tmp(
            "v2f.npy",
            &raw_npy(
                2,
                "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }",
                &data,
            ),
        );
        assert_eq!(
            read_npy(t.path()).unwrap().matrix.data,
            vec![1.0, 3.0, 5.0, 2.0, 4.0, 6.0]
        );
    }

    #[test]
    fn unsupported_dtypes() {
        let cases: [(&str, &str); 6] = [
            (">i8", "'>i8'"),
            ("<i8", "'<i8'"),
            ("|f4", "'|'"),
            ("<c16", "'<c16'"),
            ("|u1", "'|u1'"),
            ("[('a', '<f8'), ('b', '<f4')]", "structured"),
        ];
        for (k, (descr, needle)) in cases.iter().enumerate() {
            let d = if descr.starts_with('[') {
                descr.to_string()
            } else {
                format!("'{descr}'")
            };
            let h = format!("{{'descr': {d}, 'fortran_order': False, 'shape': (1, 1), }}");
            let t = write_tmp(&format!("dt{k}.npy"), &raw_npy(1, &h, &[0u8; 16]));
            let (e, msg) = err_of(&t);
            assert!(matches!(e, ReadError::UnsupportedDtype { .. }), "{e:?}");
            assert!(msg.contains(needle), "{msg}");
            assert!(msg.contains("'<f2', '<f4', '<f8'"), "{msg}");
        }
    }

    #[test]
    fn not_two_d() {
        for (k, (shape, dims, nbytes)) in [
            ("()", vec![], 8usize),
            ("(384,)", vec![384usize], 384 * 8),
            ("(2, 3, 4)", vec![2, 3, 4], 24 * 8),
        ]
        .into_iter()
        .enumerate()
        {
            let h = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}");
            let t = write_tmp(&format!("nd{k}.npy"), &raw_npy(1, &h, &vec![0u8; nbytes]));
            let (e, msg) = err_of(&t);
            match &e {
                ReadError::NotTwoD { shape, .. } => assert_eq!(shape, &dims),
                other => panic!("{other:?}"),
            }
            assert!(
                msg.ends_with(&format!("expected a 2-D array, found shape {dims:?}")),
                "{msg}"
            );
        }
    }

    #[test]
    fn empty_dimension() {
        let t = write_tmp(
            "empty.npy",
            &raw_npy(
                1,
                "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 3), }",
                &[],
            ),
        );
        let (e, msg) = err_of(&t);
        assert!(matches!(e, ReadError::Empty { .. }), "{e:?}");
        assert!(msg.contains("[0, 3]"), "{msg}");
    }

    #[test]
    fn truncated_and_trailing_data() {
        let m = DenseMatrix {
            rows: 4,
            cols: 4,
            data: (0..16).map(|v| v as f64).collect(),
        };
        let t = TempPath::new("full.npy");
        write_npy_f64(t.path(), &m).unwrap();
        let full = std::fs::read(t.path()).unwrap();

        let tt = write_tmp("trunc.npy", &full[..full.len() - 5]);
        let (e, msg) = err_of(&tt);
        assert!(matches!(e, ReadError::Format { .. }), "{e:?}");
        assert!(msg.contains("truncated"), "{msg}");
        assert!(msg.contains("needs 128 data bytes, found 123"), "{msg}");

        let mut longer = full.clone();
        longer.extend([0u8; 3]);
        let tl = write_tmp("long.npy", &longer);
        let (e, msg) = err_of(&tl);
        assert!(matches!(e, ReadError::Format { .. }), "{e:?}");
        assert!(msg.contains("trailing bytes"), "{msg}");
        assert!(msg.contains("needs 128 data bytes, found 131"), "{msg}");

        // Truncated inside the header and inside the magic.
        for (k, cut) in [3usize, 9, 40].into_iter().enumerate() {
            let t = write_tmp(&format!("cut{k}.npy"), &full[..cut]);
            let (e, msg) = err_of(&t);
            assert!(matches!(e, ReadError::Format { .. }), "{e:?}");
            assert!(
                msg.contains("short")
                    || msg.contains("truncated")
                    || msg.contains("exceeds the file"),
                "{msg}"
            );
        }
    }

    #[test]
    fn hostile_shapes_fail_fast_without_allocating() {
        let start = std::time::Instant::now();
        for (k, shape) in [
            "(1099511627776, 1099511627776)", // (1<<40, 1<<40): overflows
            "(1073741824, 1073741824)",       // 2^60 elements * 8 fits in u64 but not the file
            "(18446744073709551615, 2)",      // u64::MAX rows
            "(340282366920938463463374607431768211455, 1)", // > u64
        ]
        .into_iter()
        .enumerate()
        {
            let h = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}");
            let t = write_tmp(&format!("huge{k}.npy"), &raw_npy(1, &h, &[0u8; 64]));
            let (e, msg) = err_of(&t);
            assert!(matches!(e, ReadError::Format { .. }), "{shape}: {e:?}");
            assert!(
                msg.contains("overflow")
                    || msg.contains("needs")
                    || msg.contains("usize")
                    || msg.contains("too large"),
                "{msg}"
            );
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn malformed_headers() {
        let data = f64_bytes(&[1.0; 4]);
        let cases = [
            (
                "{'descr': '<f8', 'shape': (2, 2), }",
                "missing key 'fortran_order'",
            ),
            (
                "{'descr': '<f8', 'fortran_order': False}",
                "missing key 'shape'",
            ),
            (
                "{'fortran_order': False, 'shape': (2, 2)}",
                "missing key 'descr'",
            ),
            (
                "{'descr': '<f8', 'fortran_order': 0, 'shape': (2, 2)}",
                "True or False",
            ),
            (
                "{'descr': '<f8', 'fortran_order': False, 'shape': (2, -2)}",
                "negative",
            ),
            (
                "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2.0)}",
                "integer",
            ),
            (
                "{'descr': '<f8', 'fortran_order': False, 'shape': 4}",
                "tuple",
            ),
            (
                "{'descr': '<f8, 'fortran_order': False, 'shape': (2, 2)}",
                "expected",
            ),
            (
                "{'descr': '<f8' 'fortran_order': False, 'shape': (2, 2)}",
                "expected ',' or '}'",
            ),
            (
                "{'descr': '<f8', 'fortran_order': false, 'shape': (2, 2)}",
                "unexpected name",
            ),
            (
                "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2)} x",
                "after the header",
            ),
            (
                "{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': (2, 2)}",
                "duplicate",
            ),
            ("['descr', '<f8']", "expected a dict"),
            (
                "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2)",
                "expected ',' or '}'",
            ),
            ("{'descr': '<f8", "unterminated string"),
        ];
        for (k, (h, needle)) in cases.iter().enumerate() {
            let t = write_tmp(&format!("bad{k}.npy"), &raw_npy(1, h, &data));
            let (e, msg) = err_of(&t);
            assert!(matches!(e, ReadError::Format { .. }), "{h}: {e:?}");
            assert!(msg.contains("bad npy header"), "{msg}");
            assert!(msg.contains(needle), "{h}: {msg}");
        }
        // Deep nesting is refused, not a stack overflow.
        let deep = format!("{}{}", "(".repeat(10_000), ")".repeat(10_000));
        let t = write_tmp("deep.npy", &raw_npy(2, &deep, &data));
        let (_, msg) = err_of(&t);
        assert!(msg.contains("nested deeper"), "{msg}");
        // v3 header that is not UTF-8.
        let mut bytes = raw_npy(
            3,
            "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }",
            &data,
        );
        bytes[20] = 0xff;
        let t = write_tmp("latin.npy", &bytes);
        let (_, msg) = err_of(&t);
        assert!(msg.contains("UTF-8"), "{msg}");
        // ... while in v1 the same byte is Latin-1 and harmless inside a string.
        let h = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), 'x': 'Xy'}";
        let mut bytes = raw_npy(1, h, &data);
        let pos = bytes.windows(2).position(|w| w == b"Xy").unwrap();
        bytes[pos] = 0xe9;
        let t = write_tmp("latin1.npy", &bytes);
        read_npy(t.path()).unwrap();
    }

    #[test]
    fn bad_magic_version_and_header_length() {
        let t = write_tmp("magic.npy", b"\x93NUMPZ\x01\x00\x10\x00{}              ");
        let (_, msg) = err_of(&t);
        assert!(msg.contains("magic"), "{msg}");

        let mut bytes = raw_npy(
            1,
            "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1), }",
            &[0u8; 8],
        );
        bytes[6] = 4;
        let t = write_tmp("v4.npy", &bytes);
        let (_, msg) = err_of(&t);
        assert!(msg.contains("version 4.0"), "{msg}");

        bytes[6] = 2; // v2 reads a u32 header length: now garbage and far too large
        bytes[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        let t = write_tmp("hlen.npy", &bytes);
        let (_, msg) = err_of(&t);
        assert!(
            msg.contains("header length 4294967295 exceeds the file"),
            "{msg}"
        );

        let t = write_tmp("empty-file.npy", b"");
        let (_, msg) = err_of(&t);
        assert!(msg.contains("file is 0 bytes"), "{msg}");
    }

    #[test]
    fn non_finite_values_report_first_position() {
        let mut data = vec![0.5f64; 12];
        data[6] = f64::NAN; // row 1, col 2 of 3x4
        data[9] = f64::INFINITY;
        let m = DenseMatrix {
            rows: 3,
            cols: 4,
            data,
        };
        let t = TempPath::new("nan.npy");
        write_npy_f64(t.path(), &m).unwrap();
        let (e, msg) = err_of(&t);
        match e {
            ReadError::NonFinite { row, col, .. } => assert_eq!((row, col), (1, 2)),
            other => panic!("{other:?}"),
        }
        assert!(msg.contains("NaN at row 1, col 2"), "{msg}");

        // Fortran order: the first in row-major order of the result, not in storage order.
        // Matrix 2x2 [[1, -inf], [inf, 1]] stored column-major: 1, inf, -inf, 1.
        let t = TempPath::new("inf.npy");
        write_npy_f32(
            t.path(),
            2,
            2,
            &[1.0, f32::INFINITY, f32::NEG_INFINITY, 1.0],
            true,
        )
        .unwrap();
        let (e, msg) = err_of(&t);
        match e {
            ReadError::NonFinite {
                row, col, value, ..
            } => {
                assert_eq!((row, col), (0, 1));
                assert_eq!(value, f64::NEG_INFINITY);
            }
            other => panic!("{other:?}"),
        }
        assert!(msg.contains("-inf at row 0, col 1"), "{msg}");

        // f16 infinity
        let bytes: Vec<u8> = [half::f16::ONE, half::f16::INFINITY]
            .iter()
            .flat_map(|v| v.to_bits().to_le_bytes())
            .collect();
        let t = write_tmp(
            "hinf.npy",
            &raw_npy(
                1,
                "{'descr': '<f2', 'fortran_order': False, 'shape': (1, 2), }",
                &bytes,
            ),
        );
        let (e, _) = err_of(&t);
        assert!(
            matches!(e, ReadError::NonFinite { row: 0, col: 1, .. }),
            "{e:?}"
        );
    }

    #[test]
    fn writers_reject_wrong_length() {
        let t = TempPath::new("w.npy");
        assert!(write_npy_f32(t.path(), 2, 2, &[1.0; 3], false).is_err());
        let m = DenseMatrix {
            rows: 2,
            cols: 2,
            data: vec![1.0; 5],
        };
        assert!(write_npy_f64(t.path(), &m).is_err());
    }

    #[test]
    fn header_parser_values() {
        let h =
            parse_header("{'descr': '<f4', 'fortran_order': True, 'shape': (3, 4), }\n").unwrap();
        assert_eq!(h.descr, PyValue::Str("<f4".into()));
        assert!(h.fortran_order);
        assert_eq!(h.shape, vec![3, 4]);
        let h = parse_header("{'descr':'<f4','fortran_order':False,'shape':(384,)}").unwrap();
        assert_eq!(h.shape, vec![384]);
        let h = parse_header("{'descr':'<f4','fortran_order':False,'shape':((7))}").unwrap_err();
        assert!(h.contains("tuple"), "{h}");
        let h = parse_header("{'descr':'<f4','fortran_order':False,'shape':(1_000, 2)}").unwrap();
        assert_eq!(h.shape, vec![1000, 2]);
        let h =
            parse_header(r"{'descr':'<f4','x':'a\'b','fortran_order':False,'shape':()}").unwrap();
        assert!(h.shape.is_empty());
    }
}
