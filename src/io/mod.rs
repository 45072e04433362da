//! TEMPORARY during bring-up; replaced by the reader module.
/// A dense real matrix, row-major, exactly as stored (after exact conversion to f64).
#[derive(Clone, Debug, PartialEq)]
pub struct DenseMatrix { pub rows: usize, pub cols: usize, pub data: Vec<f64> }
impl DenseMatrix { pub fn get(&self, i: usize, j: usize) -> f64 { self.data[i * self.cols + j] } }
#[derive(Debug)] pub enum SourceDtype { F64 }
pub struct LoadedMatrix { pub matrix: DenseMatrix, pub dtype: SourceDtype }
pub fn read_matrix(_p: &std::path::Path, _t: Option<&str>) -> Result<LoadedMatrix, std::io::Error> { Err(std::io::Error::other("temp")) }
