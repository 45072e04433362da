//! Size caps applied while reading, not after: a file (or a device such as
//! `/dev/zero`, or a FIFO) is read through `take(cap + 1)`, so memory for a
//! rejected input stays within the cap plus one read buffer, whatever the
//! file claims to be.

use std::io::Read;
use std::path::Path;

use super::ReadError;

/// Largest `config.json` or sharded `*.index.json` read (bytes).
pub const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// Reads the whole of `path` into memory, refusing it as soon as more than
/// `cap` bytes arrive. `what` names the kind of file in the message
/// (`config.json`, `certificate`, `claims file`).
pub fn read_capped(path: &Path, cap: u64, what: &str) -> Result<Vec<u8>, ReadError> {
    let file = std::fs::File::open(path).map_err(|e| ReadError::io(path, e))?;
    let meta = file.metadata().map_err(|e| ReadError::io(path, e))?;
    if meta.is_dir() {
        return Err(ReadError::format(
            path,
            None,
            format!("is a directory, expected a {what}"),
        ));
    }
    if meta.is_file() && meta.len() > cap {
        return Err(too_large(path, cap, what));
    }
    let mut buf = Vec::with_capacity(if meta.is_file() {
        meta.len() as usize
    } else {
        0
    });
    file.take(cap + 1)
        .read_to_end(&mut buf)
        .map_err(|e| ReadError::io(path, e))?;
    if buf.len() as u64 > cap {
        return Err(too_large(path, cap, what));
    }
    Ok(buf)
}

/// [`read_capped`], then UTF-8.
pub fn read_capped_string(path: &Path, cap: u64, what: &str) -> Result<String, ReadError> {
    let bytes = read_capped(path, cap, what)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_zero_is_refused_at_the_cap() {
        let p = Path::new("/dev/zero");
        if !p.exists() {
            return;
        }
        let err = read_capped(p, 1 << 20, "claims file").unwrap_err();
        assert!(err.to_string().contains("larger than the limit"), "{err}");
    }

    #[test]
    fn directory_is_refused() {
        let err = read_capped(Path::new("."), 10, "certificate").unwrap_err();
        assert!(err.to_string().contains("is a directory"), "{err}");
    }
}
