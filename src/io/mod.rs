//! Matrix input: dense real matrices from NumPy `.npy` files and from
//! `.safetensors` files.
//!
//! Every reader returns the matrix exactly as stored, converted to `f64`
//! without rounding (F16, BF16 and F32 are all exactly representable in
//! `f64`), in row-major order, and checks that every value is finite.
//! Errors are a [`ReadError`] whose `Display` is one line naming the file
//! and, for safetensors, the tensor.
//!
//! Exactness of the conversion: `proofs/exact-conversion.md` (L1).

use std::fmt;
use std::path::{Path, PathBuf};

pub mod checkpoint;
pub mod gguf;
pub mod limits;
pub mod npy;
pub mod safetensors;

pub use self::npy::{read_npy, write_npy_f32, write_npy_f64};
pub use self::safetensors::{read_safetensors, SafetensorsFile};

use crate::matrix::{DenseMatrix, SourceDtype};

/// A matrix together with the storage type it was read from.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadedMatrix {
    /// The values, converted exactly to `f64`.
    pub matrix: DenseMatrix,
    /// The element type they were stored as.
    pub dtype: SourceDtype,
}

/// At most this many tensor names are listed in [`ReadError::MissingTensor`]
/// and [`ReadError::TensorNeeded`] messages.
pub const MAX_LISTED_TENSORS: usize = 10;

/// Why a matrix could not be read.
///
/// `Display` gives one line that starts with the file path (as given by the
/// caller) and, where a tensor is involved, names it:
/// `model.safetensors: tensor 'w': expected a 2-D tensor, found shape [384]`.
/// Control characters coming from the path or from the file itself are
/// escaped so that the message stays on one line.
#[derive(Debug)]
pub enum ReadError {
    /// The file could not be opened, read or memory-mapped.
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The file is malformed: bad magic, bad header / JSON, truncated data,
    /// offsets out of range, a byte count that disagrees with dtype × shape,
    /// trailing bytes, or a file of unrecognised kind.
    Format {
        /// The file.
        path: PathBuf,
        /// The tensor at fault, where one can be named.
        tensor: Option<String>,
        /// What is wrong, with the numbers involved.
        message: String,
    },
    /// The element type is not one we read. `supported` lists those we do.
    UnsupportedDtype {
        /// The file.
        path: PathBuf,
        /// The tensor (safetensors), `None` for npy.
        tensor: Option<String>,
        /// The dtype as written in the file (`I64`, `>f8`, ...).
        dtype: String,
        /// Human-readable list of supported dtypes.
        supported: &'static str,
        /// Extra explanation (e.g. "big-endian data is not supported").
        note: Option<&'static str>,
    },
    /// The array is not two-dimensional.
    NotTwoD {
        /// The file.
        path: PathBuf,
        /// The tensor (safetensors), `None` for npy.
        tensor: Option<String>,
        /// The shape found.
        shape: Vec<usize>,
    },
    /// The requested tensor is not in the safetensors file.
    MissingTensor {
        /// The file.
        path: PathBuf,
        /// The name asked for.
        tensor: String,
        /// All 2-D tensors of a supported dtype, in natural name order
        /// (the message lists at most [`MAX_LISTED_TENSORS`]).
        available: Vec<String>,
    },
    /// A safetensors file was given without a tensor name and does not hold
    /// exactly one 2-D tensor of a supported dtype.
    TensorNeeded {
        /// The file.
        path: PathBuf,
        /// All 2-D tensors of a supported dtype, in natural name order.
        available: Vec<String>,
    },
    /// A NaN or infinite value; the first one in row-major order of the
    /// resulting matrix (0-based indices).
    NonFinite {
        /// The file.
        path: PathBuf,
        /// The tensor (safetensors), `None` for npy.
        tensor: Option<String>,
        /// Row of the first non-finite value (0-based).
        row: usize,
        /// Column of the first non-finite value (0-based).
        col: usize,
        /// The value: NaN, `inf` or `-inf`.
        value: f64,
    },
    /// A dimension is zero.
    Empty {
        /// The file.
        path: PathBuf,
        /// The tensor (safetensors), `None` for npy.
        tensor: Option<String>,
        /// The shape found.
        shape: Vec<usize>,
    },
}

impl ReadError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            ReadError::Io { path, .. }
            | ReadError::Format { path, .. }
            | ReadError::UnsupportedDtype { path, .. }
            | ReadError::NotTwoD { path, .. }
            | ReadError::MissingTensor { path, .. }
            | ReadError::TensorNeeded { path, .. }
            | ReadError::NonFinite { path, .. }
            | ReadError::Empty { path, .. } => path,
        }
    }

    /// The tensor the error is about, if any.
    pub fn tensor(&self) -> Option<&str> {
        match self {
            ReadError::Io { .. } | ReadError::TensorNeeded { .. } => None,
            ReadError::MissingTensor { tensor, .. } => Some(tensor),
            ReadError::Format { tensor, .. }
            | ReadError::UnsupportedDtype { tensor, .. }
            | ReadError::NotTwoD { tensor, .. }
            | ReadError::NonFinite { tensor, .. }
            | ReadError::Empty { tensor, .. } => tensor.as_deref(),
        }
    }

    pub(crate) fn format(path: &Path, tensor: Option<&str>, message: impl Into<String>) -> Self {
        ReadError::Format {
            path: path.to_path_buf(),
            tensor: tensor.map(str::to_owned),
            message: message.into(),
        }
    }

    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        ReadError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    fn write_unescaped(&self, out: &mut String) -> fmt::Result {
        use fmt::Write;
        write!(out, "{}: ", self.path().display())?;
        match self {
            ReadError::MissingTensor { .. } | ReadError::TensorNeeded { .. } => {}
            _ => {
                if let Some(t) = self.tensor() {
                    write!(out, "tensor '{t}': ")?;
                }
            }
        }
        match self {
            ReadError::Io { source, .. } => write!(out, "cannot read file: {source}"),
            ReadError::Format { message, .. } => write!(out, "{message}"),
            ReadError::UnsupportedDtype {
                dtype,
                supported,
                note,
                ..
            } => {
                write!(out, "unsupported dtype {dtype}")?;
                if let Some(note) = note {
                    write!(out, " ({note})")?;
                }
                write!(out, "; supported: {supported}")
            }
            ReadError::NotTwoD { shape, tensor, .. } => write!(
                out,
                "expected a 2-D {}, found shape {shape:?}",
                if tensor.is_some() { "tensor" } else { "array" }
            ),
            ReadError::MissingTensor {
                tensor, available, ..
            } => {
                write!(out, "no tensor named '{tensor}'; ")?;
                write_name_list(out, available)
            }
            ReadError::TensorNeeded { available, .. } => {
                write!(
                    out,
                    "a tensor name is needed unless the file holds exactly one 2-D float tensor; "
                )?;
                write_name_list(out, available)
            }
            ReadError::NonFinite {
                row, col, value, ..
            } => write!(
                out,
                "non-finite value {value} at row {row}, col {col} (0-based)"
            ),
            ReadError::Empty { shape, .. } => {
                write!(out, "empty matrix: shape {shape:?} has a zero dimension")
            }
        }
    }
}

fn write_name_list(out: &mut String, names: &[String]) -> fmt::Result {
    use fmt::Write;
    if names.is_empty() {
        return write!(out, "the file has no 2-D F16/BF16/F32/F64 tensors");
    }
    write!(out, "2-D float tensors in the file ({}): ", names.len())?;
    for (k, name) in names.iter().take(MAX_LISTED_TENSORS).enumerate() {
        if k > 0 {
            out.push_str(", ");
        }
        write!(out, "'{name}'")?;
    }
    if names.len() > MAX_LISTED_TENSORS {
        write!(out, " ... and {} more", names.len() - MAX_LISTED_TENSORS)?;
    }
    Ok(())
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        self.write_unescaped(&mut s)?;
        // One line, whatever the path, tensor names or header bytes contain.
        for c in s.chars() {
            if c.is_control() {
                write!(f, "{}", c.escape_default())?;
            } else {
                fmt::Write::write_char(f, c)?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReadError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Reads a 2-D matrix from `path`, choosing the reader by extension
/// (`.npy`, `.safetensors`, case-insensitive) or, for any other extension, by
/// content: the `\x93NUMPY` magic means npy, a plausible safetensors header
/// (8-byte little-endian length followed by `{`) means safetensors.
///
/// `tensor` selects a tensor in a safetensors file; it is ignored for npy
/// files, which hold a single array.
pub fn read_matrix(path: &Path, tensor: Option<&str>) -> Result<LoadedMatrix, ReadError> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("npy") => return read_npy(path),
        Some("safetensors") => return read_safetensors(path, tensor),
        Some("gguf") => return read_gguf(path, tensor),
        _ => {}
    }
    let mut head = [0u8; 9];
    let n = {
        use std::io::Read;
        let mut f = std::fs::File::open(path).map_err(|e| ReadError::io(path, e))?;
        let mut n = 0;
        while n < head.len() {
            match f.read(&mut head[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ReadError::io(path, e)),
            }
        }
        n
    };
    let head = &head[..n];
    if head.starts_with(npy::MAGIC) {
        return read_npy(path);
    }
    if head.len() == 9 && head[8] == b'{' {
        return read_safetensors(path, tensor);
    }
    if head.starts_with(b"GGUF") {
        return read_gguf(path, tensor);
    }
    Err(ReadError::format(
        path,
        None,
        "unrecognised file kind: the extension is neither .npy nor .safetensors, and the \
         content starts with neither the NumPy magic \\x93NUMPY nor a safetensors header",
    ))
}

/// Reads one 2-D tensor of a GGUF file (exact decoding, L19); without a
/// name the file must hold exactly one 2-D tensor.
pub fn read_gguf(path: &Path, tensor: Option<&str>) -> Result<LoadedMatrix, ReadError> {
    let f = gguf::GgufFile::open(path)?;
    let name = match tensor {
        Some(n) => n.to_string(),
        None => {
            let two_d: Vec<String> = f
                .tensors
                .values()
                .filter(|t| t.dims.len() == 2)
                .map(|t| t.name.clone())
                .collect();
            if two_d.len() == 1 {
                two_d[0].clone()
            } else {
                return Err(ReadError::TensorNeeded {
                    path: path.to_path_buf(),
                    available: two_d,
                });
            }
        }
    };
    f.read(&name)
}

/// Returns the position and value of the first non-finite entry (row-major).
pub(crate) fn check_finite(
    path: &Path,
    tensor: Option<&str>,
    m: &DenseMatrix,
) -> Result<(), ReadError> {
    match m.data.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(k) => Err(ReadError::NonFinite {
            path: path.to_path_buf(),
            tensor: tensor.map(str::to_owned),
            row: k / m.cols,
            col: k % m.cols,
            value: m.data[k],
        }),
    }
}

#[cfg(test)]
pub(crate) mod test_util {
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A file path under the system temp dir that no other test (or test
    /// process) uses; the file is removed on drop.
    pub struct TempPath(pub PathBuf);

    impl TempPath {
        pub fn new(name: &str) -> Self {
            static COUNTER: AtomicUsize = AtomicUsize::new(0);
            let k = COUNTER.fetch_add(1, Ordering::Relaxed);
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            let dir = std::env::temp_dir().join(format!(
                "specbound-io-test-{}-{}-{}",
                std::process::id(),
                k,
                nanos
            ));
            std::fs::create_dir_all(&dir).unwrap();
            TempPath(dir.join(name))
        }
        pub fn path(&self) -> &std::path::Path {
            &self.0
        }
    }

    impl Drop for TempPath {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
            if let Some(dir) = self.0.parent() {
                let _ = std::fs::remove_dir(dir);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_util::TempPath;
    use super::*;

    #[test]
    fn dispatch_by_extension_and_by_magic() {
        let m = DenseMatrix {
            rows: 2,
            cols: 3,
            data: vec![1.0, 2.0, 3.0, 4.0, 5.0, -6.5],
        };
        // .npy extension
        let t = TempPath::new("m.npy");
        write_npy_f64(t.path(), &m).unwrap();
        let got = read_matrix(t.path(), None).unwrap();
        assert_eq!(got.matrix, m);
        assert_eq!(got.dtype, SourceDtype::F64);
        // no extension: sniffed
        let t2 = TempPath::new("matrix_without_extension");
        std::fs::copy(t.path(), t2.path()).unwrap();
        assert_eq!(read_matrix(t2.path(), Some("ignored")).unwrap().matrix, m);

        // safetensors content under an unknown extension: sniffed
        let bytes: Vec<u8> = m.data.iter().flat_map(|v| v.to_le_bytes()).collect();
        let view =
            ::safetensors::tensor::TensorView::new(::safetensors::Dtype::F64, vec![2, 3], &bytes)
                .unwrap();
        let st = ::safetensors::serialize([("w", view)], None).unwrap();
        let t3 = TempPath::new("weights.bin");
        std::fs::write(t3.path(), st).unwrap();
        let got = read_matrix(t3.path(), None).unwrap();
        assert_eq!(got.matrix, m);
    }

    #[test]
    fn unknown_kind_names_file() {
        let t = TempPath::new("notes.txt");
        std::fs::write(t.path(), b"hello, this is not a matrix").unwrap();
        let err = read_matrix(t.path(), None).unwrap_err();
        assert!(matches!(err, ReadError::Format { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!("{}: ", t.path().display())),
            "{msg}"
        );
        assert!(msg.contains("unrecognised file kind"), "{msg}");
    }

    #[test]
    fn missing_file_is_io_error() {
        let t = TempPath::new("does-not-exist.npy");
        let err = read_matrix(t.path(), None).unwrap_err();
        assert!(matches!(err, ReadError::Io { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains("does-not-exist.npy"), "{msg}");
        assert!(std::error::Error::source(&err).is_some());
        let t = TempPath::new("does-not-exist.safetensors");
        let err = read_matrix(t.path(), Some("w")).unwrap_err();
        assert!(matches!(err, ReadError::Io { .. }), "{err:?}");
        let t = TempPath::new("does-not-exist");
        let err = read_matrix(t.path(), None).unwrap_err();
        assert!(matches!(err, ReadError::Io { .. }), "{err:?}");
    }

    #[test]
    fn error_is_send_sync_static() {
        fn check<E: std::error::Error + Send + Sync + 'static>() {}
        check::<ReadError>();
    }

    #[test]
    fn display_is_one_line_even_with_control_characters() {
        let err = ReadError::MissingTensor {
            path: PathBuf::from("a\nb.safetensors"),
            tensor: "evil\nname".into(),
            available: (0..13).map(|k| format!("layer.{k}.weight")).collect(),
        };
        let msg = err.to_string();
        assert!(!msg.contains('\n'), "{msg}");
        assert!(msg.starts_with("a\\nb.safetensors: no tensor named 'evil\\nname'"));
        assert!(msg.contains("'layer.9.weight' ... and 3 more"), "{msg}");
        assert!(!msg.contains("layer.10.weight"), "{msg}");
    }
}
