//! The value every stage passes on: a dense real matrix exactly as stored
//! (after exact conversion to f64, [`proofs/exact-conversion.md`](crate::proofs::exact_conversion), L1), and the
//! storage type it came from. `io` produces these; `arch`, `linalg` and
//! `spectral` consume them without depending on the file readers.

use std::fmt;

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

impl DenseMatrix {
    /// Entry in row `i`, column `j` (0-based).
    pub fn get(&self, i: usize, j: usize) -> f64 {
        self.data[i * self.cols + j]
    }

    /// The transpose (values moved, not computed: exact).
    pub fn transposed(&self) -> DenseMatrix {
        let mut data = vec![0.0; self.data.len()];
        for i in 0..self.rows {
            for j in 0..self.cols {
                data[j * self.rows + i] = self.data[i * self.cols + j];
            }
        }
        DenseMatrix {
            rows: self.cols,
            cols: self.rows,
            data,
        }
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

impl From<&nalgebra::DMatrix<f64>> for DenseMatrix {
    /// Copies a nalgebra matrix (exact).
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

impl From<&DenseMatrix> for nalgebra::DMatrix<f64> {
    /// Copies into a nalgebra matrix (exact).
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
