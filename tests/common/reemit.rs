//! Re-emitting known matrices (the bundled MiniLM's) in other layouts:
//! the helpers of `tests/architectures.rs` and `tests/architectures_more.rs`.
#![allow(dead_code)]

use super::{ok_json, root, run};
use serde_json::Value;
use specbound::io::checkpoint::Checkpoint;
use specbound::matrix::DenseMatrix;
use std::path::Path;

/// BERT names of the six weights of a layer, in [`layer`]'s order.
pub const BERT: [&str; 6] = [
    "attention.self.query",
    "attention.self.key",
    "attention.self.value",
    "attention.output.dense",
    "intermediate.dense",
    "output.dense",
];

/// The real weights of layer l: q, k, v, o, ff1, ff2 ([out, in]).
pub fn layer(l: usize) -> Vec<DenseMatrix> {
    let ck = Checkpoint::open(&root().join("data/all-MiniLM-L6-v2")).unwrap();
    BERT.iter()
        .map(|t| {
            ck.read(&format!("encoder.layer.{l}.{t}.weight"))
                .unwrap()
                .matrix
        })
        .collect()
}

pub fn t(x: &DenseMatrix) -> DenseMatrix {
    let mut data = vec![0.0; x.data.len()];
    for i in 0..x.rows {
        for j in 0..x.cols {
            data[j * x.rows + i] = x.data[i * x.cols + j];
        }
    }
    DenseMatrix {
        rows: x.cols,
        cols: x.rows,
        data,
    }
}

pub fn rows(x: &DenseMatrix, idx: &[usize]) -> DenseMatrix {
    let mut data = Vec::with_capacity(idx.len() * x.cols);
    for &r in idx {
        data.extend_from_slice(&x.data[r * x.cols..(r + 1) * x.cols]);
    }
    DenseMatrix {
        rows: idx.len(),
        cols: x.cols,
        data,
    }
}

pub fn hcat(mats: &[&DenseMatrix]) -> DenseMatrix {
    let r = mats[0].rows;
    let mut data = Vec::new();
    for i in 0..r {
        for m in mats {
            data.extend_from_slice(&m.data[i * m.cols..(i + 1) * m.cols]);
        }
    }
    DenseMatrix {
        rows: r,
        cols: mats.iter().map(|m| m.cols).sum(),
        data,
    }
}

pub fn write_st(dir: &Path, tensors: &[(String, DenseMatrix)], f64_dtype: bool, config: Value) {
    if !f64_dtype {
        for (n, m) in tensors {
            assert!(
                m.data.iter().all(|&x| (x as f32) as f64 == x),
                "{n}: re-emitting must not round"
            );
        }
    }
    let refs: Vec<(String, &DenseMatrix)> = tensors.iter().map(|(n, m)| (n.clone(), m)).collect();
    super::write_safetensors(
        &dir.join("model.safetensors"),
        &refs,
        if f64_dtype { "F64" } else { "F32" },
    );
    std::fs::write(
        dir.join("config.json"),
        serde_json::to_vec(&config).unwrap(),
    )
    .unwrap();
}

pub fn certify(path: &Path) -> Value {
    ok_json(&run(&["certify", path.to_str().unwrap(), "--json"]))
}

/// Rows `r0..r0 + n` of `x`, transposed or not (the reference slicing,
/// written independently of the library's recipes).
pub fn slice(x: &DenseMatrix, r0: usize, n: usize, transpose: bool) -> DenseMatrix {
    let s = rows(x, &(r0..r0 + n).collect::<Vec<_>>());
    if transpose {
        t(&s)
    } else {
        s
    }
}

pub fn vstack(mats: &[DenseMatrix]) -> DenseMatrix {
    DenseMatrix {
        rows: mats.iter().map(|m| m.rows).sum(),
        cols: mats[0].cols,
        data: mats.iter().flat_map(|m| m.data.iter().copied()).collect(),
    }
}

/// Rewrites the shapes `[1, n]` of the safetensors file in `dir` as `[n]`
/// (padded with spaces, so the header keeps its length): the 1-D gains of
/// an RMSNorm as transformers stores them.
pub fn one_dimensional_gains(dir: &Path, n: usize) {
    let f = dir.join("model.safetensors");
    let mut bytes = std::fs::read(&f).unwrap();
    let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = String::from_utf8(bytes[8..8 + len].to_vec()).unwrap();
    let from = format!("\"shape\":[1,{n}]");
    let to = format!(
        "\"shape\":[{n}]{}",
        " ".repeat(from.len() - n.to_string().len() - 10)
    );
    assert_eq!(from.len(), to.len());
    let header = header.replace(&from, &to);
    bytes[8..8 + len].copy_from_slice(header.as_bytes());
    std::fs::write(&f, bytes).unwrap();
}
