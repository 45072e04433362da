//! The value every stage passes on: a dense real matrix exactly as stored
//! (after exact conversion to f64, [`proofs/exact-conversion.md`](crate::proofs::exact_conversion), L1), and the
//! storage type it came from. `io` produces these; `arch`, `linalg` and
//! `spectral` consume them without depending on the file readers.

use std::fmt;
use std::ops::Range;

/// A dense real matrix, row-major, exactly as stored (after exact conversion to f64).
#[derive(Clone, Debug, PartialEq)]
pub struct DenseMatrix {
    /// Number of rows.
    pub rows: usize,
    /// Number of columns.
    pub cols: usize,
    /// `rows * cols` entries, row by row.
    pub data: Vec<f64>,
}

/// The index of the first non-finite entry of `data`, if any: chunks of
/// 4096 folded without an early exit (that vectorises), then the entry
/// within the first bad chunk.
pub(crate) fn first_non_finite(data: &[f64]) -> Option<usize> {
    const CHUNK: usize = 4096;
    let bad = data
        .chunks(CHUNK)
        .position(|b| b.iter().fold(false, |bad, v| bad | !v.is_finite()))?;
    let start = bad * CHUNK;
    data[start..]
        .iter()
        .position(|v| !v.is_finite())
        .map(|k| start + k)
}

impl DenseMatrix {
    /// Entry in row `i`, column `j` (0-based).
    pub fn get(&self, i: usize, j: usize) -> f64 {
        self.data[i * self.cols + j]
    }

    /// The transpose (values moved, not computed: exact).
    pub(crate) fn transposed(&self) -> DenseMatrix {
        let mut data = vec![0.0; self.data.len()];
        let block = (0..self.rows, 0..self.cols);
        transpose_into(
            (&self.data, self.cols),
            block,
            (&mut data, self.rows, 0),
            |x| x,
        );
        DenseMatrix {
            rows: self.cols,
            cols: self.rows,
            data,
        }
    }
}

/// Writes `map` of the transpose of the block `(rows, cols)` of the
/// row-major `src` (`src_cols` columns) into `dst`: source entry
/// `(rows.start + ii, cols.start + jj)` goes to `dst[jj * stride + off + ii]`.
/// The one transpose of every stage (a matrix's transpose, the recipes'
/// transposed blocks, a tall matrix prepared column-major).
///
/// In square tiles, so that neither side is walked with a large stride
/// entry by entry (a plain loop spends most of its time in cache and TLB
/// misses on LLM-sized tensors), with contiguous writes, and in bands of
/// destination rows over the pool for large blocks. Each entry is
/// `map` of one source entry alone, so the bits do not depend on the split.
pub(crate) fn transpose_into(
    (src, src_cols): (&[f64], usize),
    (rows, cols): (Range<usize>, Range<usize>),
    (dst, stride, off): (&mut [f64], usize, usize),
    map: impl Fn(f64) -> f64 + Sync,
) {
    use rayon::prelude::*;
    const TILE: usize = 32;
    const PAR_MIN: usize = 1 << 20;
    let band_rows = cols.len().min(TILE);
    if band_rows == 0 {
        return;
    }
    let band = |(b, chunk): (usize, &mut [f64])| {
        let j0 = cols.start + b * TILE;
        let j1 = (j0 + TILE).min(cols.end);
        for i0 in rows.clone().step_by(TILE) {
            let i1 = (i0 + TILE).min(rows.end);
            let (ii0, ii1) = (i0 - rows.start, i1 - rows.start);
            for q in 0..j1 - j0 {
                let out = &mut chunk[q * stride + off + ii0..q * stride + off + ii1];
                for (o, i) in out.iter_mut().zip(i0..i1) {
                    *o = map(src[i * src_cols + j0 + q]);
                }
            }
        }
    };
    let dst = &mut dst[..cols.len() * stride];
    if rows.len() * cols.len() >= PAR_MIN && rayon::current_num_threads() > 1 {
        dst.par_chunks_mut(stride * band_rows)
            .enumerate()
            .for_each(band);
    } else {
        dst.chunks_mut(stride * band_rows)
            .enumerate()
            .for_each(band);
    }
}

/// Storage type the values were converted from (the conversion to f64 is exact).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceDtype {
    /// IEEE 754 binary16 (`<f2` in npy).
    F16,
    /// bfloat16 (safetensors only; npy has no bfloat16).
    BF16,
    /// IEEE 754 binary32 (`<f4`).
    F32,
    /// IEEE 754 binary64 (`<f8`).
    F64,
    /// A GGUF block format (Q8_0, Q4_0, Q4_1), decoded exactly (L19).
    Quantized(&'static str),
    /// An integer type (`I8` ... `U64`, arrays from Python), every value
    /// converted to f64 exactly or refused
    /// ([`crate::io::npy::matrix_from_int_le_bytes`]).
    Int(&'static str),
}

impl SourceDtype {
    /// Bytes per stored element (block formats: rounded up to whole bytes;
    /// only the dense formats use this).
    pub fn itemsize(self) -> usize {
        match self {
            SourceDtype::F16 | SourceDtype::BF16 => 2,
            SourceDtype::F32 => 4,
            SourceDtype::F64 => 8,
            SourceDtype::Quantized(_) => 1,
            SourceDtype::Int(t) => t[1..].parse::<usize>().map_or(8, |bits| bits / 8),
        }
    }
}

#[cfg(feature = "nalgebra")]
impl From<&nalgebra::DMatrix<f64>> for DenseMatrix {
    /// Copies a nalgebra matrix (exact). Feature `nalgebra`.
    fn from(m: &nalgebra::DMatrix<f64>) -> Self {
        let (rows, cols) = m.shape();
        let mut data = Vec::with_capacity(rows * cols);
        for i in 0..rows {
            for j in 0..cols {
                data.push(m[(i, j)]);
            }
        }
        DenseMatrix { rows, cols, data }
    }
}

#[cfg(feature = "nalgebra")]
impl From<&DenseMatrix> for nalgebra::DMatrix<f64> {
    /// Copies into a nalgebra matrix (exact). Feature `nalgebra`.
    fn from(m: &DenseMatrix) -> Self {
        nalgebra::DMatrix::from_row_slice(m.rows, m.cols, &m.data)
    }
}

impl fmt::Display for SourceDtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SourceDtype::F16 => "F16",
            SourceDtype::BF16 => "BF16",
            SourceDtype::F32 => "F32",
            SourceDtype::F64 => "F64",
            SourceDtype::Quantized(q) | SourceDtype::Int(q) => q,
        })
    }
}
