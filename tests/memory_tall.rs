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

use std::path::{Path, PathBuf};
use std::process::Stdio;

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

/// Runs the binary with `args`, asserts success, and returns its peak
/// resident set size in KiB (`wait4`'s `ru_maxrss`).
fn peak_kib(args: &[&str], model: &Path) -> i64 {
    let child = common::bin()
        .args(args)
        .arg(model)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("binary runs");
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: plain wait4 on our own child, with valid out-pointers; the
    // child is reaped here and its `Child` handle is never waited on.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    std::mem::forget(child);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{args:?} {} failed: status {status}",
        model.display()
    );
    ru.ru_maxrss
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
    let spectra = peak_kib(&["spectra", "-q", "--json", "--include", &include], &model);
    let svd = peak_kib(&["svd", "-q", "--json", "--tensor", TENSOR], &model);
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
