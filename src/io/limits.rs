//! Size caps applied while reading, not after, and the opening of input
//! files.
//!
//! Every file specbound reads is opened by `open_regular`: without
//! blocking (so a FIFO with no writer cannot hang the open), then checked
//! with `fstat` on the opened descriptor (after symbolic links are
//! followed) and refused unless it is a regular file, so a FIFO, a device
//! (`/dev/zero`) or a directory is a prompt one-line error instead of a
//! read that never ends. Files read whole (`read_capped`) are refused
//! when their length is over the cap, and read into a buffer sized from
//! that length, never past `cap + 1` bytes even if the file grows while
//! read.
//!
//! The caps, and why each is large enough for real files (the last column
//! is an estimate, except where it is the format's own rule):
//!
//! | what | cap | real files |
//! |---|---|---|
//! | `refs/<revision>` of the Hugging Face cache | `MAX_REF_BYTES` = 42 | 40 hex digits and a newline |
//! | `config.json` | `MAX_CONFIG_BYTES` = 4 MiB | a few KB; label maps of 22k-class image models about 2 MB |
//! | sharded `*.index.json` | `MAX_INDEX_BYTES` = 32 MiB | about 10 MB for the largest public models (about 90,000 tensors) |
//! | safetensors JSON header | `MAX_SAFETENSORS_HEADER` = 16 MiB, `MAX_SAFETENSORS_VALUES` = 2^20 values | about 100 bytes and 12 values per tensor |
//! | `.npy` header | `MAX_NPY_HEADER` = 64 KiB | about 100 bytes (NumPy itself refuses more than 10,000) |
//! | GGUF tensor name | `MAX_GGUF_NAME` = 4 KiB | at most 64 bytes (the format's own limit) |
//! | GGUF metadata kept | `MAX_GGUF_META_BYTES` = 64 MiB | kilobytes: vocabularies are arrays, which are skipped |
//! | PyTorch pickle | `MAX_PICKLE_BYTES` = 16 MiB, `MAX_PICKLE_OPS` = 2^20 opcodes | about 100 bytes and 30 opcodes per tensor |
//! | ONNX records kept (initializers, MatMul/Gemm/Transpose nodes) | `MAX_ONNX_KEPT_BYTES` = 64 MiB; names `MAX_ONNX_NAME` = 4 KiB; `MAX_RANK` = 64 dimensions; `MAX_EXTERNAL_FILES` = 4096 | about 200 bytes per weight |
//! | Flax msgpack tree | `MAX_FLAX_VALUES` = 2^20 values, `MAX_FLAX_DEPTH` = 64 levels, keys `MAX_FLAX_KEY` = 4 KiB | about 10 values and 8 levels per weight |
//! | a name joined from an input's keys (Flax leaves) | `MAX_JOINED_NAME` = 4 KiB each, `MAX_NAMES_BYTES` = 64 MiB in all (`NameBudget`) | under 200 bytes each, about 20 MB for 90,000 tensors |
//!
//! A `config.json` is parsed into a JSON tree, which costs up to about 16
//! times its size (`[0,0,...]`), so the largest accepted one costs about
//! 70 MiB (the peak of `specbound inspect` on such a file; `cargo test
//! --release --test hostile_io` bounds it); the index is parsed without
//! building a tree (memory about its size). A rejected file costs the cap
//! at most.

use std::fs::{File, Metadata};
use std::io::Read;
use std::path::Path;

use super::ReadError;

/// Largest `refs/<revision>` file of the Hugging Face cache read (bytes):
/// a commit hash of 40 hex digits, and a line end (`\n` or `\r\n`).
pub(crate) const MAX_REF_BYTES: u64 = 42;

/// Largest `config.json` read (bytes).
pub(crate) const MAX_CONFIG_BYTES: u64 = 4 << 20;

/// Largest sharded `model.safetensors.index.json` read (bytes).
pub(crate) const MAX_INDEX_BYTES: u64 = 32 << 20;

/// Largest safetensors JSON header parsed (bytes).
pub(crate) const MAX_SAFETENSORS_HEADER: u64 = 16 << 20;

/// Most JSON values (numbers, strings, arrays, objects, keys) in a
/// safetensors header: parsing and indexing it costs about 80 bytes per
/// value, so this bounds that memory to about 80 MiB whatever the header's
/// shape (the byte cap alone would allow a shape of 8 million 1s, parsed at
/// 20 times its size). A real header has 12 per 2-D tensor, so this allows
/// about 87,000 tensors per file.
pub(crate) const MAX_SAFETENSORS_VALUES: u64 = 1 << 20;

/// Largest `.npy` header parsed (bytes).
pub(crate) const MAX_NPY_HEADER: u64 = 64 << 10;

/// Longest GGUF tensor name or metadata key (bytes).
pub(crate) const MAX_GGUF_NAME: u64 = 4 << 10;

/// Largest total of GGUF metadata keys and string values kept in memory
/// (bytes); array elements are skipped, not kept.
pub(crate) const MAX_GGUF_META_BYTES: u64 = 64 << 20;

/// Largest pickle of a PyTorch checkpoint scanned and parsed (bytes): the
/// `data.pkl` of a zip checkpoint, or the pickles before the storages of a
/// legacy one. A state dict's pickle takes about 100 bytes per tensor.
pub(crate) const MAX_PICKLE_BYTES: u64 = 16 << 20;

/// Most pickle opcodes in one PyTorch checkpoint: the reader keeps about
/// 100 bytes per value on its stack, so this bounds that memory to about
/// 100 MiB. A state dict takes about 30 opcodes per tensor, so this allows
/// about 35,000 tensors per file.
pub(crate) const MAX_PICKLE_OPS: u64 = 1 << 20;

/// Largest total of what the ONNX reader keeps while walking the graph
/// (bytes): initializer records (name, dimensions, where the data lies) and
/// the MatMul, Gemm and Transpose nodes (name, first inputs), each counted
/// with 64 bytes of overhead; nodes of other kinds are walked, not kept.
pub(crate) const MAX_ONNX_KEPT_BYTES: u64 = 64 << 20;

/// Longest ONNX initializer, node or input name, attribute name or
/// external-data key or value kept (bytes).
pub(crate) const MAX_ONNX_NAME: u64 = 4 << 10;

/// Most dimensions of one ONNX or Flax tensor.
pub(crate) const MAX_RANK: usize = 64;

/// Most distinct external data files of one ONNX model.
pub(crate) const MAX_EXTERNAL_FILES: usize = 4096;

/// Most msgpack values (maps, keys, leaves) in a Flax checkpoint's tree:
/// each costs about 64 bytes while the tree is indexed, so this bounds that
/// memory to about 64 MiB.
pub(crate) const MAX_FLAX_VALUES: u64 = 1 << 20;

/// Deepest nesting of maps (and arrays) in a Flax checkpoint; the walk
/// recurses once per level.
pub(crate) const MAX_FLAX_DEPTH: usize = 64;

/// Longest map key of a Flax checkpoint (bytes).
pub(crate) const MAX_FLAX_KEY: u64 = 4 << 10;

/// Longest name specbound joins from an input's keys (a Flax leaf's
/// path, keys joined with `.`), in bytes: each key may be up to
/// [`MAX_FLAX_KEY`] long, but a joined name is bounded before it is built,
/// so that 64 levels of long keys cannot multiply into megabytes per leaf.
pub(crate) const MAX_JOINED_NAME: usize = 4 << 10;

/// Largest total of the names kept from one input (bytes): with
/// [`MAX_JOINED_NAME`] this bounds the memory names take whatever the
/// number of leaves (2^20 leaves of 4 KiB would be 4 GiB).
pub(crate) const MAX_NAMES_BYTES: u64 = 64 << 20;

/// Refuses a name joined from an input's keys that would be `len` bytes,
/// over [`MAX_JOINED_NAME`], before it is built.
pub(crate) fn check_joined_name(len: usize) -> Result<(), String> {
    if len > MAX_JOINED_NAME {
        return Err(format!(
            "a name joined from its keys would be {len} bytes, more than the \
             {MAX_JOINED_NAME}-byte limit"
        ));
    }
    Ok(())
}

/// The bytes of names built so far from one input, refused past
/// [`MAX_NAMES_BYTES`] before the next one is built.
#[derive(Debug, Default)]
pub(crate) struct NameBudget {
    used: u64,
}

impl NameBudget {
    /// Accounts for a name of `len` bytes about to be built: an error
    /// (saying both limits) when it is longer than [`MAX_JOINED_NAME`] or
    /// when the names together would pass [`MAX_NAMES_BYTES`].
    pub(crate) fn take(&mut self, len: usize) -> Result<(), String> {
        check_joined_name(len)?;
        self.used = self.used.saturating_add(len as u64);
        if self.used > MAX_NAMES_BYTES {
            return Err(format!(
                "its names together take more than the {MAX_NAMES_BYTES}-byte limit"
            ));
        }
        Ok(())
    }
}

/// The one rule for every strided source (PyTorch views on disk; NumPy
/// arrays and DLPack tensors from Python): the bytes a view of `shape`
/// with `itemsize`-byte elements materialises, refused before anything is
/// allocated when the product overflows or is more than `behind`, the
/// bytes the view is a view of (its storage, bounded by the file that
/// holds it; or, where a source does not say how large its buffer is, as
/// DLPack does not, the span of addresses its strides reach,
/// [`strided_span_bytes`]).
///
/// A view that does not alias its memory (no stride of 0, no overlapping
/// strides) takes at most those bytes, so no honest view is refused; one
/// that repeats them (`expand`, `broadcast_to`, `as_strided`) could claim
/// gigabytes from a few bytes. The message says `would materialise {n}
/// bytes, more than {what} ({behind} bytes)` and ends with `; {fix}`.
pub fn view_materialised_bytes(
    shape: &[usize],
    itemsize: u64,
    behind: u64,
    what: &str,
    fix: &str,
) -> Result<u64, String> {
    let shown = || {
        let dims: Vec<String> = shape.iter().map(ToString::to_string).collect();
        format!("[{}]", dims.join(", "))
    };
    let bytes = shape
        .iter()
        .try_fold(itemsize, |a, &d| a.checked_mul(d as u64))
        .ok_or_else(|| {
            format!(
                "shape {} of {itemsize}-byte elements overflows the size computation",
                shown()
            )
        })?;
    if bytes > behind {
        return Err(format!(
            "shape {} of {itemsize}-byte elements would materialise {bytes} bytes, more than \
             {what} ({behind} bytes): a view that repeats its storage (stride 0, as expand() \
             makes, or overlapping strides) is refused; {fix}",
            shown()
        ));
    }
    Ok(bytes)
}

/// The bytes a strided view reaches (strides in elements, of either
/// sign): from its lowest to its highest element address, inclusive; 0
/// for an empty view, `None` when it overflows. A view that does not alias
/// its memory materialises at most this many bytes.
pub fn strided_span_bytes(shape: &[usize], strides: &[i64], itemsize: u64) -> Option<u64> {
    if shape.contains(&0) {
        return Some(0);
    }
    let mut reach: u64 = 0;
    for (&d, &s) in shape.iter().zip(strides) {
        let steps = (d as u64).checked_sub(1)?;
        reach = reach.checked_add(steps.checked_mul(s.unsigned_abs())?)?;
    }
    reach.checked_add(1)?.checked_mul(itemsize)
}

/// Reads the whole of `path`, a regular file, into memory, refusing it as
/// soon as more than `cap` bytes arrive. `what` names the kind of file in
/// the message (`config.json`, `certificate`, `claims file`). The file is
/// opened by [`open_regular`] (the one open of every file specbound reads
/// whole), so a FIFO, a device, a socket or a directory is refused without
/// reading from it or blocking on it.
pub(crate) fn read_capped(path: &Path, cap: u64, what: &str) -> Result<Vec<u8>, ReadError> {
    let (file, meta) = open_regular(path, what)?;
    read_open_capped(path, file, &meta, cap, what)
}

/// [`read_capped`], then UTF-8.
pub(crate) fn read_capped_string(path: &Path, cap: u64, what: &str) -> Result<String, ReadError> {
    into_string(path, read_capped(path, cap, what)?, what)
}

/// [`read_capped_string`] (kept for its callers: every read is of a
/// regular file now).
pub(crate) fn read_capped_regular_string(
    path: &Path,
    cap: u64,
    what: &str,
) -> Result<String, ReadError> {
    read_capped_string(path, cap, what)
}

/// Reads an opened regular file of metadata length `meta.len()`: refused
/// at once when that length is over the cap, else read into a buffer of
/// exactly that length plus one byte (to see whether it grew). A file that
/// grows while read is read on in steps that never take the buffer's
/// capacity past `cap + 1` (a doubling `read_to_end` would reach twice
/// the cap), then refused once it passes the cap.
fn read_open_capped(
    path: &Path,
    file: File,
    meta: &Metadata,
    cap: u64,
    what: &str,
) -> Result<Vec<u8>, ReadError> {
    if meta.len() > cap {
        return Err(too_large(path, cap, what));
    }
    let limit = cap.saturating_add(1);
    let mut r = file;
    let mut buf: Vec<u8> = Vec::new();
    // First step: the metadata length and one byte.
    let mut step = meta.len().saturating_add(1).min(limit);
    loop {
        let step_usize = usize::try_from(step).map_err(|_| too_large(path, cap, what))?;
        buf.try_reserve_exact(step_usize)
            .map_err(|_| too_large(path, cap, what))?;
        let before = buf.len() as u64;
        (&mut r)
            .take(step)
            .read_to_end(&mut buf)
            .map_err(|e| ReadError::io(path, e))?;
        let got = buf.len() as u64 - before;
        if buf.len() as u64 > cap {
            return Err(too_large(path, cap, what));
        }
        if got < step {
            return Ok(buf);
        }
        // The file is longer than its metadata said: grow by at most the
        // size read so far (at least 64 KiB), within the cap.
        step = (buf.len() as u64)
            .max(64 << 10)
            .min(limit - buf.len() as u64);
    }
}

fn into_string(path: &Path, bytes: Vec<u8>, what: &str) -> Result<String, ReadError> {
    String::from_utf8(bytes).map_err(|e| {
        ReadError::format(
            path,
            None,
            format!(
                "{what} is not UTF-8 text (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

fn too_large(path: &Path, cap: u64, what: &str) -> ReadError {
    ReadError::format(
        path,
        None,
        format!("{what} larger than the limit of {cap} bytes"),
    )
}

/// Opens `path` for reading and returns it with its metadata, refusing
/// anything but a regular file: `"{path}: is a directory, expected a
/// {what}"`, `"{path}: is a FIFO, expected a {what} (a regular file)"`.
/// The file is opened non-blocking (so that opening a FIFO with no writer
/// returns at once) and checked with `fstat` on the opened descriptor, so
/// the check and the read are about the same file.
pub(crate) fn open_regular(path: &Path, what: &str) -> Result<(File, Metadata), ReadError> {
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NONBLOCK);
    }
    let file = opts.open(path).map_err(|e| ReadError::io(path, e))?;
    let meta = file.metadata().map_err(|e| ReadError::io(path, e))?;
    if meta.is_dir() {
        return Err(ReadError::format(
            path,
            None,
            format!("is a directory, expected {} {what}", article(what)),
        ));
    }
    if !meta.is_file() {
        return Err(ReadError::format(
            path,
            None,
            format!(
                "is a {}, expected {} {what} (a regular file)",
                kind_of(&meta),
                article(what)
            ),
        ));
    }
    #[cfg(unix)]
    {
        // Back to ordinary blocking reads (no effect on a regular file's
        // reads, but memory maps and later reads should not see the flag).
        use std::os::unix::io::AsRawFd;
        let fd = file.as_raw_fd();
        // SAFETY: fcntl on a descriptor we own; F_GETFL/F_SETFL take and
        // return plain integers.
        let ok = unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) >= 0
        };
        if !ok {
            return Err(ReadError::io(path, std::io::Error::last_os_error()));
        }
    }
    Ok((file, meta))
}

/// `an` before a vowel (`an ONNX model`), else `a`.
fn article(what: &str) -> &'static str {
    match what.chars().next() {
        Some('a' | 'e' | 'i' | 'o' | 'u' | 'A' | 'E' | 'I' | 'O' | 'U') => "an",
        _ => "a",
    }
}

/// Whether something (of any kind, a dangling symbolic link included)
/// exists at `path`.
pub(crate) fn entry_exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

fn kind_of(meta: &Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        if t.is_fifo() {
            return "FIFO (named pipe)";
        }
        if t.is_char_device() {
            return "character device";
        }
        if t.is_block_device() {
            return "block device";
        }
        if t.is_socket() {
            return "socket";
        }
    }
    let _ = meta;
    "special file"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_zero_is_refused_without_reading() {
        let p = Path::new("/dev/zero");
        if !p.exists() {
            return;
        }
        let err = read_capped(p, 1 << 20, "claims file").unwrap_err();
        assert!(
            err.to_string()
                .contains("is a character device, expected a claims file"),
            "{err}"
        );
    }

    #[test]
    fn capped_read_takes_exactly_the_cap() {
        let t = super::super::test_util::TempPath::new("capped.txt");
        std::fs::write(t.path(), b"0123456789").unwrap();
        let got = read_capped(t.path(), 10, "ref").unwrap();
        assert_eq!(got, b"0123456789");
        assert!(got.capacity() <= 11, "capacity {}", got.capacity());
        let err = read_capped(t.path(), 9, "ref").unwrap_err();
        assert!(
            err.to_string()
                .ends_with("ref larger than the limit of 9 bytes"),
            "{err}"
        );
        std::fs::write(t.path(), b"").unwrap();
        assert!(read_capped(t.path(), 0, "ref").unwrap().is_empty());
    }

    #[test]
    fn directory_is_refused() {
        let err = read_capped(Path::new("."), 10, "certificate").unwrap_err();
        assert!(err.to_string().contains("is a directory"), "{err}");
        let err = open_regular(Path::new("."), "config.json").unwrap_err();
        assert!(
            err.to_string()
                .ends_with("is a directory, expected a config.json"),
            "{err}"
        );
    }

    #[test]
    fn device_is_refused_where_a_regular_file_is_needed() {
        let p = Path::new("/dev/zero");
        if !p.exists() {
            return;
        }
        let err = read_capped_regular_string(p, 1 << 20, "config.json").unwrap_err();
        assert!(
            err.to_string()
                .contains("is a character device, expected a config.json (a regular file)"),
            "{err}"
        );
    }
}
