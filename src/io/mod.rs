//! Matrix input: dense real matrices from NumPy `.npy` files and from
//! `.safetensors` files.
//!
//! Every reader returns the matrix exactly as stored, converted to `f64`
//! without rounding (F16, BF16 and F32 are all exactly representable in
//! `f64`), in row-major order, and checks that every value is finite.
//! Errors are a [`ReadError`] whose `Display` is one line naming the file
//! and, for safetensors, the tensor.
//!
//! Exactness of the conversion: [`proofs/exact-conversion.md`](crate::proofs::exact_conversion) (L1).

use std::fmt;
use std::path::{Path, PathBuf};

pub mod bundle;
pub mod checkpoint;
pub(crate) mod flax;
pub mod gguf;
pub(crate) mod hub;
pub mod limits;
pub(crate) mod mapped;
pub mod memory;
pub mod model_ref;
pub mod npy;
pub(crate) mod onnx;
pub mod output;
pub mod pickle_scan;
pub mod pytorch;
pub mod safetensors;
pub(crate) mod stored;
pub(crate) mod weight_file;

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

/// Longest error message (bytes) before it is cut.
const MAX_MESSAGE: usize = 4096;

/// At most this many tensor names are listed in [`ReadError::MissingTensor`]
/// and [`ReadError::TensorNeeded`] messages.
pub(crate) const MAX_LISTED_TENSORS: usize = 10;

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
        /// (the message lists at most `MAX_LISTED_TENSORS`).
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
    pub(crate) fn path(&self) -> &Path {
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
    pub(crate) fn tensor(&self) -> Option<&str> {
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
        write!(out, "{}: ", shown_path(self.path()))?;
        match self {
            ReadError::MissingTensor { .. } | ReadError::TensorNeeded { .. } => {}
            _ => {
                if let Some(t) = self.tensor() {
                    write!(out, "tensor '{}': ", fmt_name(t))?;
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
                "expected a 2-D {}, found shape {}",
                if tensor.is_some() { "tensor" } else { "array" },
                fmt_shape(shape)
            ),
            ReadError::MissingTensor {
                tensor, available, ..
            } => {
                write!(out, "no tensor named '{}'; ", fmt_name(tensor))?;
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
                write!(
                    out,
                    "empty matrix: shape {} has a zero dimension",
                    fmt_shape(shape)
                )
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
        write!(out, "'{}'", fmt_name(name))?;
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
        // Bounded, whatever names or numbers a hostile file put in it.
        if s.len() > MAX_MESSAGE {
            let mut end = MAX_MESSAGE;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            let more = s.len() - end;
            s.truncate(end);
            fmt::Write::write_fmt(&mut s, format_args!("... ({more} more bytes)"))?;
        }
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
/// (`.npy`, `.safetensors`, `.gguf`, and `.bin`/`.pt`/`.pth` for PyTorch
/// checkpoints, case-insensitive) or, for any other extension, by content:
/// the `\x93NUMPY` magic means npy, a plausible safetensors header (8-byte
/// little-endian length followed by `{`) means safetensors, `GGUF` means
/// GGUF, a zip archive holding `data.pkl` or a legacy torch pickle stream
/// means PyTorch. A NumPy `.npz`, another zip archive or an HDF5 file is
/// named as such (see `foreign_format`).
///
/// `tensor` selects a tensor in a safetensors, GGUF or PyTorch file; it is
/// ignored for npy files, which hold a single array.
pub fn read_matrix(path: &Path, tensor: Option<&str>) -> Result<LoadedMatrix, ReadError> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("npy") => return read_npy(path),
        Some("safetensors") => return read_safetensors(path, tensor),
        Some("gguf") => return read_gguf(path, tensor),
        Some("pt" | "pth") => return read_pytorch(path, tensor),
        Some("onnx") => return onnx::read_onnx(path, tensor),
        Some("msgpack") => return flax::read_flax(path, tensor),
        _ => {}
    }
    let (mut f, _) = limits::open_regular(
        path,
        "matrix file (.npy, .safetensors, .gguf or a PyTorch checkpoint)",
    )?;
    let mut head = [0u8; HEAD_BYTES];
    let n = read_head(&mut f, &mut head).map_err(|e| ReadError::io(path, e))?;
    drop(f);
    let head = &head[..n];
    if head.starts_with(npy::MAGIC) {
        return read_npy(path);
    }
    if head.len() >= 9 && head[8] == b'{' {
        return read_safetensors(path, tensor);
    }
    if head.starts_with(b"GGUF") {
        return read_gguf(path, tensor);
    }
    match pytorch::container_of(head) {
        Some(pytorch::Container::Legacy | pytorch::Container::Tar) => {
            return read_pytorch(path, tensor)
        }
        Some(pytorch::Container::Zip) if pytorch::zip_looks_like_torch(head) => {
            return read_pytorch(path, tensor)
        }
        _ => {}
    }
    if ext.as_deref() == Some("bin") {
        return Err(ReadError::format(path, None, not_a_state_dict(head)));
    }
    if let Some(what) = foreign_format(head) {
        return Err(ReadError::format(path, None, what));
    }
    Err(ReadError::format(
        path,
        None,
        "unrecognised file kind: the extension is none of .npy, .safetensors, .gguf, .bin, .pt, .pth, \
         and the content starts with none of the NumPy magic \\x93NUMPY, a safetensors header, \
         the GGUF magic, a PyTorch zip archive or legacy pickle stream",
    ))
}

/// How many leading bytes [`foreign_format`] looks at.
pub(crate) const HEAD_BYTES: usize = 512;

/// Reads up to `buf.len()` bytes from the current position (fewer only at
/// the end of the file); returns how many.
pub(crate) fn read_head(f: &mut impl std::io::Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// [`foreign_format`] of a file of which `pre` (fewer than [`HEAD_BYTES`])
/// has been read already and `rest` continues.
pub(crate) fn foreign_head(rest: &mut impl std::io::Read, pre: &[u8]) -> Option<String> {
    let mut head = [0u8; HEAD_BYTES];
    let k = pre.len().min(HEAD_BYTES);
    head[..k].copy_from_slice(&pre[..k]);
    let n = k + read_head(rest, &mut head[k..]).unwrap_or(0);
    foreign_format(&head[..n])
}

/// What to do with a PyTorch checkpoint met where another format was
/// expected (said in the messages).
pub(crate) const CONVERT_PYTORCH: &str =
    "specbound reads PyTorch checkpoints under a .bin, .pt or .pth \
     name (or as pytorch_model.bin in a model directory): rename the file";

/// What a `.bin` (`.pt`, `.pth`) file is that is no PyTorch checkpoint
/// (nor any other format read by content), by its first bytes `head`: the
/// name already is a PyTorch name, so the message never says to rename it.
pub(crate) fn not_a_state_dict(head: &[u8]) -> String {
    const READ_AS: &str =
        "a file named .bin, .pt or .pth is read as a PyTorch state dict, and this one is not";
    let zip = head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06");
    let pickle = head.len() >= 2 && head[0] == 0x80 && (2..=5).contains(&head[1]);
    if head.starts_with(npy::MAGIC) {
        return format!("is a NumPy .npy array (name it .npy to read it): {READ_AS}");
    }
    if head.starts_with(b"GGUF") {
        return format!("is a GGUF file (name it .gguf to read it): {READ_AS}");
    }
    if head.get(8) == Some(&b'{') {
        return format!(
            "looks like a safetensors file (a length, then a JSON header; name it .safetensors \
             to read it): {READ_AS}"
        );
    }
    match foreign_format(head) {
        Some(what) if !what.contains(CONVERT_PYTORCH) => what,
        _ if zip => format!(
            "is a zip archive whose first entry is neither .../data.pkl nor under .../data/, \
             not a PyTorch checkpoint: {READ_AS}"
        ),
        _ if pickle => format!(
            "is a pickle stream without the magic number of a legacy PyTorch checkpoint: {READ_AS}"
        ),
        _ => format!(
            "is not a PyTorch checkpoint (neither a zip archive nor a pickle stream), nor by its \
             first bytes a .npy, safetensors or GGUF file: {READ_AS}"
        ),
    }
}

/// Names a file that none of the readers accepts by its first bytes
/// (`head`, up to 512), with what to do: a PyTorch checkpoint
/// (a zip archive holding `data.pkl`, or a legacy pickle stream starting
/// with `\x80` and protocol 2 to 5), a NumPy `.npz` archive, another zip
/// archive, or an HDF5 file (Keras/TensorFlow). `None` for anything else,
/// and for anything whose ninth byte is `{`, which could be a safetensors
/// header. The message has no path (the caller's error adds it).
pub(crate) fn foreign_format(head: &[u8]) -> Option<String> {
    if head.get(8) == Some(&b'{') {
        return None;
    }
    if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
        // First local file header: name length at byte 26, name at byte 30.
        let name: &[u8] = match head.get(26..28) {
            Some(l) => {
                let len = u16::from_le_bytes([l[0], l[1]]) as usize;
                head.get(30..).map_or(&[][..], |r| &r[..len.min(r.len())])
            }
            None => &[],
        };
        return Some(if name.ends_with(b".npy") {
            "is a NumPy .npz archive, a format specbound does not read: save the array with \
             numpy.save (.npy) or as safetensors"
                .to_string()
        } else if name.ends_with(b"data.pkl") || name.windows(6).any(|w| w == b"/data/") {
            format!("is a PyTorch checkpoint (zip archive); {CONVERT_PYTORCH}")
        } else {
            format!("is a zip archive (as PyTorch checkpoints are); {CONVERT_PYTORCH}")
        });
    }
    if head.len() >= 2 && head[0] == 0x80 && (2..=5).contains(&head[1]) {
        return Some(format!(
            "is a PyTorch checkpoint (legacy pickle format); {CONVERT_PYTORCH}"
        ));
    }
    if head.starts_with(b"\x89HDF\r\n\x1a\n") {
        return Some(
            "is an HDF5 file (a Keras/TensorFlow checkpoint such as tf_model.h5), a format \
             specbound does not read; it reads safetensors and GGUF: convert it first, e.g. in \
             Python `AutoModel.from_pretrained(DIR, from_tf=True).save_pretrained(OUT)` \
             (transformers)"
                .to_string(),
        );
    }
    None
}

/// A name from a file, for messages: [`escape`] (control characters and
/// other non-printables escaped; names longer than 200 bytes, which a
/// hostile header can make megabytes long, cut to their first 100 bytes and
/// their length).
pub(crate) fn fmt_name(name: &str) -> std::borrow::Cow<'_, str> {
    escape(name)
}

/// Longest string [`escape`] passes through whole, in bytes.
pub(crate) const ESCAPE_MAX_BYTES: usize = 200;

/// Whether `c` is shown as itself in a message: printable, not a control
/// character (C0, DEL, C1: newlines and the ESC of ANSI sequences included),
/// not a line or paragraph separator, not an invisible format character
/// (zero-width characters, bidirectional overrides and isolates, the byte
/// order mark) and not a private-use or unassigned-looking code point that
/// terminals render unpredictably.
fn shown_as_is(c: char) -> bool {
    !(c.is_control()
        || matches!(c,
            '\u{00ad}'
            | '\u{061c}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{e000}'..='\u{f8ff}'
            | '\u{f0000}'..='\u{10ffff}'))
}

/// THE escape of untrusted text (a string from an input file or argument:
/// a tensor or file name, a certificate's string fields, a claim) for every
/// message and text report: control characters, newlines, ANSI escape
/// sequences (their ESC) and other non-printables become Rust-style escapes
/// (`\n`, `\u{1b}`), so that one message stays one line and cannot
/// rewrite what the terminal shows; a string longer than
/// `ESCAPE_MAX_BYTES` is cut to its first 100 bytes (at a character
/// boundary) followed by `... (N bytes)`. Borrowed when nothing changes.
pub fn escape(s: &str) -> std::borrow::Cow<'_, str> {
    escape_to(s, ESCAPE_MAX_BYTES)
}

/// A path or file name from the user or the input, as every message and
/// report shows it: [`escape_to`] with a bound of 4096 bytes (a path is
/// never cut short of `PATH_MAX`), so that a name holding a newline or an
/// escape sequence stays on its line and cannot rewrite the terminal.
/// Escaping is idempotent (an escaped string has no control characters),
/// so a name escaped where it was recorded is shown unchanged.
pub(crate) fn shown(s: &str) -> std::borrow::Cow<'_, str> {
    escape_to(s, 4096)
}

/// [`shown`] of a path.
pub(crate) fn shown_path(p: &Path) -> String {
    shown(&p.display().to_string()).into_owned()
}

/// [`escape`] with another length bound: a string longer than `max_bytes`
/// is cut to its first `max_bytes / 2` bytes (at a character boundary)
/// followed by `... (N bytes)`.
pub(crate) fn escape_to(s: &str, max_bytes: usize) -> std::borrow::Cow<'_, str> {
    if s.len() <= max_bytes && s.chars().all(shown_as_is) {
        return s.into();
    }
    let (head, cut) = if s.len() > max_bytes {
        let mut end = max_bytes / 2;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        (&s[..end], true)
    } else {
        (s, false)
    };
    let mut out = String::with_capacity(head.len() + 16);
    for c in head.chars() {
        if shown_as_is(c) {
            out.push(c);
        } else {
            out.extend(c.escape_default());
        }
    }
    if cut {
        out.push_str(&format!("... ({} bytes)", s.len()));
    }
    out.into()
}

/// `{shape:?}` for messages, eliding the middle of shapes with more than
/// eight dimensions (a hostile header can list millions).
pub(crate) fn fmt_shape<T: fmt::Debug>(shape: &[T]) -> String {
    if shape.len() <= 8 {
        return format!("{shape:?}");
    }
    let head: Vec<String> = shape[..4].iter().map(|d| format!("{d:?}")).collect();
    format!("[{}, ... ({} dimensions)]", head.join(", "), shape.len())
}

/// Reads one 2-D tensor of a PyTorch checkpoint (exact conversion, L1);
/// without a name the file must hold exactly one 2-D float tensor.
pub(crate) fn read_pytorch(path: &Path, tensor: Option<&str>) -> Result<LoadedMatrix, ReadError> {
    let f = pytorch::PytorchFile::open(path)?;
    match tensor {
        Some(n) => f.read(n),
        None => {
            let c = f.two_d_candidates();
            if c.len() == 1 {
                f.read(&c[0])
            } else {
                Err(ReadError::TensorNeeded {
                    path: path.to_path_buf(),
                    available: c,
                })
            }
        }
    }
}

/// Reads one 2-D tensor of a GGUF file (exact decoding, L19); without a
/// name the file must hold exactly one 2-D tensor.
pub(crate) fn read_gguf(path: &Path, tensor: Option<&str>) -> Result<LoadedMatrix, ReadError> {
    let f = gguf::GgufFile::open(path)?;
    let name = match tensor {
        Some(n) => n.to_string(),
        None => {
            let two_d = f.two_d_candidates();
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

/// Reads the tensor `tensor` with `read`, or without a name the only one of
/// `candidates` (the file's 2-D float tensors); more or fewer is
/// [`ReadError::TensorNeeded`].
pub(crate) fn read_named_or_only(
    path: &Path,
    tensor: Option<&str>,
    candidates: Vec<String>,
    read: impl Fn(&str) -> Result<LoadedMatrix, ReadError>,
) -> Result<LoadedMatrix, ReadError> {
    match tensor {
        Some(n) => read(n),
        None if candidates.len() == 1 => read(&candidates[0]),
        None => Err(ReadError::TensorNeeded {
            path: path.to_path_buf(),
            available: candidates,
        }),
    }
}

/// Drops the pages `start..start + len` of a read-only file mapping from
/// this process's resident memory: the bytes stay in the kernel's page
/// cache and a later access reads them again, unchanged. Called once a
/// tensor has been converted (and while hashing), so that resident memory
/// follows the tensors in use rather than the size of the files.
pub(crate) fn release_pages(map: &memmap2::Mmap, start: usize, len: usize) {
    if len == 0 || start >= map.len() {
        return;
    }
    let len = len.min(map.len() - start);
    #[cfg(unix)]
    // SAFETY: `map` is a read-only shared mapping of a file (memmap2's
    // `Mmap`): MADV_DONTNEED only removes this process's page-table entries,
    // and the next access faults the same file bytes in again; no data is
    // lost or changed. Failure only means that the pages stay resident.
    unsafe {
        let _ = map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, len);
    }
}

/// Lower-case hex SHA-256 of a mapped file, hashed in 64 MiB chunks whose
/// pages are released from resident memory after use ([`release_pages`]).
pub(crate) fn sha256_of_map(map: &memmap2::Mmap) -> String {
    use sha2::{Digest, Sha256};
    const CHUNK: usize = 64 << 20;
    let mut h = Sha256::new();
    for (k, chunk) in map.chunks(CHUNK).enumerate() {
        h.update(chunk);
        release_pages(map, k * CHUNK, chunk.len());
    }
    format!("{:x}", h.finalize())
}

/// An empty vector with room for the `rows * cols` float64 values of a
/// matrix read from `path`: where that memory cannot be had (an address
/// space or data limit, a machine without it), one error naming the tensor
/// and the bytes needed, instead of the abort of an infallible
/// allocation. Every reader allocates its f64 copy here.
pub(crate) fn f64_buffer(
    path: &Path,
    tensor: Option<&str>,
    rows: usize,
    cols: usize,
) -> Result<Vec<f64>, ReadError> {
    let fail = || {
        let bytes = (rows as u128) * (cols as u128) * 8;
        ReadError::format(
            path,
            tensor,
            format!(
                "cannot allocate the {bytes} bytes of its float64 copy ({rows} x {cols}): \
                 out of memory"
            ),
        )
    };
    let n = rows.checked_mul(cols).ok_or_else(fail)?;
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| fail())?;
    Ok(v)
}

/// Elements per task of [`decode_le`] on large inputs: enough that a task
/// outweighs its scheduling.
const DECODE_CHUNK: usize = 1 << 18;

/// Appends the little-endian elements of `bytes` (whole elements of
/// `dtype`, a dense type) converted to f64 exactly (L1).
///
/// Large inputs are converted in parallel, chunk by chunk, into the
/// vector's spare capacity: each element is converted on its own, so the
/// result is the same on any number of threads, and the destination is
/// written once (first touched by the conversion, not by zeroing first).
pub(crate) fn decode_le(dtype: SourceDtype, bytes: &[u8], out: &mut Vec<f64>) {
    use rayon::prelude::*;
    let size = dtype.itemsize();
    let n = bytes.len() / size;
    out.reserve(n);
    let start = out.len();
    let (src, dst) = (&bytes[..n * size], &mut out.spare_capacity_mut()[..n]);
    if n < 2 * DECODE_CHUNK || rayon::current_num_threads() < 2 {
        decode_le_into(dtype, src, dst);
    } else {
        dst.par_chunks_mut(DECODE_CHUNK)
            .zip(src.par_chunks(DECODE_CHUNK * size))
            .for_each(|(d, s)| decode_le_into(dtype, s, d));
    }
    // SAFETY: the first `n` spare elements were all written above: by one
    // call, or by chunks that pair up one to one (each `src` chunk holding
    // exactly `dst.len()` whole elements) and cover them.
    unsafe { out.set_len(start + n) };
}

/// The elements of `src` converted as by [`decode_le`], written into `dst`
/// (as many as `src` holds whole elements).
fn decode_le_into(dtype: SourceDtype, src: &[u8], dst: &mut [std::mem::MaybeUninit<f64>]) {
    fn fill<const K: usize>(
        src: &[u8],
        dst: &mut [std::mem::MaybeUninit<f64>],
        f: fn([u8; K]) -> f64,
    ) {
        for (d, b) in dst.iter_mut().zip(src.chunks_exact(K)) {
            d.write(f(b.try_into().expect("K bytes")));
        }
    }
    match dtype {
        SourceDtype::F64 => fill(src, dst, le::f64),
        SourceDtype::F32 => fill(src, dst, le::f32),
        SourceDtype::F16 => fill(src, dst, le::f16),
        SourceDtype::BF16 => fill(src, dst, le::bf16),
        SourceDtype::Quantized(_) | SourceDtype::Int(_) => {
            unreachable!("block formats and integers are decoded by their reader")
        }
    }
}

/// One little-endian element of a dense `dtype` (its first bytes) converted
/// to f64 exactly (L1), by the same conversions as [`decode_le`].
pub(crate) fn decode_le_one(dtype: SourceDtype, b: &[u8]) -> f64 {
    let take = |k: usize| &b[..k];
    match dtype {
        SourceDtype::F64 => le::f64(take(8).try_into().expect("8 bytes")),
        SourceDtype::F32 => le::f32(take(4).try_into().expect("4 bytes")),
        SourceDtype::F16 => le::f16(take(2).try_into().expect("2 bytes")),
        SourceDtype::BF16 => le::bf16(take(2).try_into().expect("2 bytes")),
        SourceDtype::Quantized(_) | SourceDtype::Int(_) => {
            unreachable!("block formats and integers are decoded by their reader")
        }
    }
}

/// The exact conversions of one little-endian element of each dense type
/// to f64 (L1: every float16, bfloat16, float32 and float64 value is a
/// float64 value): the one decoder of these types in `io`.
pub(crate) mod le {
    /// A float64 from its little-endian bytes (the identity on values).
    pub(crate) fn f64(b: [u8; 8]) -> f64 {
        f64::from_le_bytes(b)
    }
    /// A float32 from its little-endian bytes, widened exactly.
    pub(crate) fn f32(b: [u8; 4]) -> f64 {
        f32::from_le_bytes(b) as f64
    }
    /// A float16 from its little-endian bytes, widened exactly.
    pub(crate) fn f16(b: [u8; 2]) -> f64 {
        half::f16::from_bits(u16::from_le_bytes(b)).to_f64()
    }
    /// A bfloat16 from its little-endian bytes, widened exactly.
    pub(crate) fn bf16(b: [u8; 2]) -> f64 {
        half::bf16::from_bits(u16::from_le_bytes(b)).to_f64()
    }
}

/// Returns the position and value of the first non-finite entry (row-major).
pub(crate) fn check_finite(
    path: &Path,
    tensor: Option<&str>,
    m: &DenseMatrix,
) -> Result<(), ReadError> {
    match crate::matrix::first_non_finite(&m.data) {
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
    /// The parallel conversion of large inputs gives the same values as the
    /// element-by-element one, for every dense type, on a pool of 3
    /// threads, after a prefix already in the vector.
    #[test]
    fn decode_le_in_parallel_equals_the_sequential_decode_bit_for_bit() {
        use crate::matrix::SourceDtype;
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let bytes: Vec<u8> = (0..(5 * super::DECODE_CHUNK * 8 + 24))
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 24) as u8
            })
            .collect();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        for dtype in [
            SourceDtype::F64,
            SourceDtype::F32,
            SourceDtype::F16,
            SourceDtype::BF16,
        ] {
            let mut seq = vec![7.0];
            seq.extend(
                bytes
                    .chunks_exact(dtype.itemsize())
                    .map(|b| super::decode_le_one(dtype, b)),
            );
            let mut par = vec![7.0];
            pool.install(|| super::decode_le(dtype, &bytes, &mut par));
            assert_eq!(seq.len(), 1 + bytes.len() / dtype.itemsize());
            assert!(seq
                .iter()
                .zip(&par)
                .all(|(a, b)| a.to_bits() == b.to_bits()));
            assert_eq!(seq.len(), par.len());
        }
    }

    #[test]
    fn escape_neutralises_terminal_control_and_bounds_length() {
        use super::escape;
        assert!(matches!(
            escape("model.safetensors"),
            std::borrow::Cow::Borrowed(_)
        ));
        let hostile = "x.safetensors'\n\u{1b}[1A\u{1b}[2K\rall quantities confirmed\u{7}";
        let e = escape(hostile);
        assert!(!e.chars().any(|c| c.is_control()), "{e}");
        assert!(e.contains("\\n") && e.contains("\\u{1b}"), "{e}");
        for c in [
            '\u{202e}', '\u{2066}', '\u{200b}', '\u{feff}', '\u{2028}', '\u{85}', '\u{9b}',
        ] {
            let s = format!("a{c}b");
            let e = escape(&s);
            assert!(!e.contains(c), "{c:?} shown raw: {e}");
        }
        assert_eq!(escape("é ü 中文"), "é ü 中文");
        let long = "\u{1b}".repeat(100_000);
        let e = escape(&long);
        assert!(
            e.len() < 1_000 && e.ends_with("(100000 bytes)"),
            "{}",
            e.len()
        );
        let s = "é".repeat(300);
        let e = super::escape_to(&s, 101);
        assert!(e.starts_with("é") && e.contains("... (600 bytes)"), "{e}");
    }

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

    #[test]
    fn foreign_formats_are_named_and_safetensors_never_is() {
        let zip = |name: &str| {
            let mut z = b"PK\x03\x04".to_vec();
            z.extend_from_slice(&[0u8; 22]);
            z.extend_from_slice(&(name.len() as u16).to_le_bytes());
            z.extend_from_slice(&[0, 0]);
            z.extend_from_slice(name.as_bytes());
            z
        };
        let kind = |h: &[u8]| foreign_format(h).unwrap_or_default();
        assert!(kind(&zip("archive/data.pkl")).starts_with("is a PyTorch checkpoint (zip"));
        assert!(kind(&zip("x.npy")).starts_with("is a NumPy .npz"));
        assert!(kind(&zip("other.txt")).starts_with("is a zip archive"));
        assert!(kind(b"\x80\x02\x8a\x0a").contains("legacy pickle"));
        assert!(kind(b"\x80\x05\x95").contains("legacy pickle"));
        assert!(kind(b"\x89HDF\r\n\x1a\n\0\0").starts_with("is an HDF5 file"));
        assert_eq!(foreign_format(b"\x80\x01"), None);
        assert_eq!(foreign_format(b"GGUF\x03\0\0\0"), None);
        // A safetensors header starts at byte 8 with '{', whatever its length.
        for n in [0x0280u64, 0x0403_4b50] {
            let mut h = n.to_le_bytes().to_vec();
            h.push(b'{');
            assert_eq!(foreign_format(&h), None, "{n:#x}");
        }
    }

    #[test]
    fn long_names_and_shapes_are_cut_in_messages() {
        let err = ReadError::NotTwoD {
            path: PathBuf::from("f.safetensors"),
            tensor: Some("é".repeat(300)),
            shape: vec![1; 1000],
        };
        let msg = err.to_string();
        assert!(msg.contains("... (600 bytes)"), "{msg}");
        assert!(
            msg.ends_with("[1, 1, 1, 1, ... (1000 dimensions)]"),
            "{msg}"
        );
        let err = ReadError::format(Path::new("f"), None, "x".repeat(100_000));
        let msg = err.to_string();
        assert!(msg.len() < MAX_MESSAGE + 40, "{}", msg.len());
        assert!(msg.ends_with("more bytes)"), "{msg}");
    }
}
