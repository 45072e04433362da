//! The authors' float64 computation of the per-head proxies, reproduced
//! for comparison (not certified): the dense N x N product `Q_h^T K_h` or
//! `V_h^T O_h` formed in float64, its float64 SVD (nalgebra), the numerical
//! rank with tolerance `1e-10 k max(sigma_1, 1)`, and
//! `c(W, p) = S_p^(1/(p+2)) s^(p/(p+2)) N^((p+1)/(p+2))` with `S_p` the sum
//! of *all* computed singular values to the p (round-off values included)
//! and `s` floored at the smallest normal number. Self-contained, so that
//! `examples/float_artefact.rs` can use it too.
#![allow(dead_code)]

use nalgebra::DMatrix;
use specbound::io::checkpoint::Checkpoint;

/// The dense float64 per-head product of layer `layer`, head `head`:
/// `kind` is `"QK"` or `"V_tilde"`; tensor names are BERT's after `prefix`.
pub fn head_product(
    ck: &Checkpoint,
    prefix: &str,
    layer: usize,
    head: usize,
    head_dim: usize,
    kind: &str,
) -> DMatrix<f64> {
    let read = |name: &str| {
        ck.read(&format!("{prefix}encoder.layer.{layer}.{name}"))
            .unwrap_or_else(|e| panic!("{e}"))
            .matrix
    };
    let (a, b) = match kind {
        "QK" => (
            read("attention.self.query.weight"),
            read("attention.self.key.weight"),
        ),
        "V_tilde" => (
            read("attention.self.value.weight"),
            read("attention.output.dense.weight"),
        ),
        other => panic!("not a per-head kind: {other}"),
    };
    let n = a.cols;
    let rows = head * head_dim..(head + 1) * head_dim;
    // Head slices (head_dim x N) in row-vector orientation: query/key/value
    // rows of the head; for V_tilde, O_h = (out^T)[head rows, :].
    let left = DMatrix::from_fn(head_dim, n, |i, j| a.data[(rows.start + i) * n + j]);
    let right = match kind {
        "QK" => DMatrix::from_fn(head_dim, n, |i, j| b.data[(rows.start + i) * n + j]),
        _ => DMatrix::from_fn(head_dim, n, |i, j| b.data[j * b.cols + rows.start + i]),
    };
    left.transpose() * right
}

/// Singular values, largest first (float64, nalgebra).
pub fn svdvals(a: &DMatrix<f64>) -> Vec<f64> {
    let mut s: Vec<f64> = a.singular_values().iter().copied().collect();
    s.sort_by(|x, y| y.total_cmp(x));
    s
}

/// The authors' numerical rank.
pub fn numerical_rank(s: &[f64]) -> usize {
    let tol = 1e-10 * s.len().max(1) as f64 * s.first().copied().unwrap_or(0.0).max(1.0);
    s.iter().filter(|x| **x > tol).count()
}

/// The authors' `c(W, p)` from a whole float spectrum.
pub fn contribution(s: &[f64], p: f64, n: usize, scale: f64) -> f64 {
    let sp = if p == 0.0 {
        numerical_rank(s) as f64
    } else {
        s.iter().map(|x| x.max(0.0).powf(p)).sum()
    };
    let d = p + 2.0;
    let scale = scale.max(f64::MIN_POSITIVE);
    sp.powf(1.0 / d) * scale.powf(p / d) * (n as f64).powf((p + 1.0) / d)
}
