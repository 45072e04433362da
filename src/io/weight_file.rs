//! One weight file of a checkpoint, whatever its format: the interface
//! [`super::checkpoint::Checkpoint`] reads every file through. Each format
//! implements it in its own module (safetensors, GGUF, PyTorch, a model
//! in memory); the formats whose tensor table specbound parses itself
//! (ONNX, Flax: [`super::stored::Table`]) share one implementation through
//! [`super::stored::TableFile`].

use std::path::{Path, PathBuf};

use super::{LoadedMatrix, ReadError};

/// One weight file. Every read converts exactly to f64 and checks
/// finiteness ([`proofs/exact-conversion.md`](crate::proofs::exact_conversion), L1); every error names this
/// file's [`path`](Self::path) and, where it applies, the tensor.
pub(crate) trait WeightFile: Send + Sync {
    /// The file, as opened (for messages and hashes).
    fn path(&self) -> &Path;

    /// Lower-case hex SHA-256 of each file read (one, or an ONNX model and
    /// its external data files). A mapped file is hashed in chunks whose
    /// pages are released after use ([`super::release_pages`]), so that
    /// hashing a model does not leave all of it resident.
    fn hashes(&self) -> Result<Vec<(PathBuf, String)>, ReadError>;

    /// Releases the mapped pages of a tensor from resident memory; a no-op
    /// for a file that is read, not mapped (PyTorch).
    fn release(&self, _name: &str) {}

    /// Every tensor name of the file.
    fn names(&self) -> Vec<String>;

    /// Shape as a matrix would be read (`[rows, cols]` for 2-D) and dtype
    /// name; `None` for a tensor the file does not hold.
    fn info(&self, name: &str) -> Option<(Vec<usize>, String)>;

    /// The 2-D tensors this file's reader can read.
    fn two_d_candidates(&self) -> Vec<String>;

    /// Reads a 2-D tensor.
    fn read(&self, name: &str) -> Result<LoadedMatrix, ReadError>;

    /// Reads a 1-D float tensor as a `1 x n` matrix; refused, naming the
    /// tensor, by every format but safetensors files.
    fn read_vector(&self, name: &str) -> Result<LoadedMatrix, ReadError> {
        Err(ReadError::format(
            self.path(),
            Some(name),
            "a 1-D tensor is read from safetensors files only",
        ))
    }

    /// Reads a float tensor of rank >= 2 flattened to `[shape[0], product
    /// of the rest]` where the format stores it in that order; by default
    /// as [`read`](Self::read) (a higher-rank tensor refused as not 2-D).
    fn read_flattened(&self, name: &str) -> Result<LoadedMatrix, ReadError> {
        self.read(name)
    }

    /// Reads slice `index` of a 3-D float tensor (the matrix of its last
    /// two dimensions); refused, naming the tensor, by formats that hold
    /// no such tensors for this reader.
    fn read_slice(&self, name: &str, index: usize) -> Result<LoadedMatrix, ReadError> {
        let _ = index;
        Err(ReadError::format(
            self.path(),
            Some(name),
            "a slice of a 3-D tensor is read from safetensors and PyTorch files only",
        ))
    }

    /// Whether this is a model in memory ([`super::memory`]).
    fn is_memory(&self) -> bool {
        false
    }
}
