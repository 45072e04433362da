//! Peak memory of `spectra` and `svd` on a tall matrix: the 30522 x 384
//! float32 word-embedding matrix of all-MiniLM-L6-v2 (the shared model)
//! is certified within 3 times its size in f64 (`docs/spectra.md`,
//! "Memory"): the matrix is dropped once its exactly scaled copy and its
//! entry norms are formed, the Gram route holds `fl(A V)` and forms the
//! rows of `U` from it where they are read, and the residual products are
//! computed a block of rows (or a chunk of `U`) at a time.
//!
//! The peak is the child's own `ru_maxrss` from `wait4`, which also counts
//! this process's peak up to the child's `exec` (small here: nothing is
//! read before). One test in this file, so that no other test of the same
//! process raises that peak.

mod common;

use std::path::PathBuf;

const TENSOR: &str = "embeddings.word_embeddings.weight";
const ROWS: u64 = 30522;
const COLS: u64 = 384;

/// The shared model: `shared/models/all-MiniLM-L6-v2` beside the
/// repository (or beside a folder holding it, for a worktree), the same
/// place the other tests look (`../shared/models/...`).
fn shared_model() -> Option<PathBuf> {
    common::root()
        .ancestors()
        .skip(1)
        .take(3)
        .map(|d| d.join("shared/models/all-MiniLM-L6-v2"))
        .find(|p| p.join("model.safetensors").is_file())
}

#[test]
fn spectra_and_svd_of_the_embedding_matrix_peak_below_3x_its_f64_size() {
    let Some(model) = shared_model() else {
        eprintln!(
            "skipped: shared/models/all-MiniLM-L6-v2 is absent beside {} (only on the dev/CI machine)",
            common::root().display()
        );
        return;
    };
    let f64_kib = (ROWS * COLS * 8 / 1024) as i64;
    let include = format!("^{}$", TENSOR.replace('.', "\\."));
    let spectra = common::peak_kib(&["spectra", "-q", "--json", "--include", &include], &model);
    let svd = common::peak_kib(&["svd", "-q", "--json", "--tensor", TENSOR], &model);
    eprintln!(
        "peak RSS: spectra {spectra} KiB ({:.2}x), svd {svd} KiB ({:.2}x) of the matrix in f64 ({f64_kib} KiB)",
        spectra as f64 / f64_kib as f64,
        svd as f64 / f64_kib as f64
    );
    // The run is dominated by the matrix, not the baseline.
    assert!(spectra > f64_kib, "spectra peak {spectra} KiB too small");
    assert!(
        spectra <= 3 * f64_kib,
        "spectra: {spectra} KiB > 3 x {f64_kib} KiB"
    );
    assert!(svd <= 3 * f64_kib, "svd: {svd} KiB > 3 x {f64_kib} KiB");
}
