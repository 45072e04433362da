//! The exact-oracle soundness suite through the shuffled test backend
//! (`specbound::linalg::shuffled`): every product evaluated by another
//! tree of A0.10 (shuffled order, FMA or not, split-K, pairwise) and every
//! approximate eigendecomposition deliberately poor. This is what makes the
//! GPU route (`--device cuda`) trustworthy without a GPU in CI: its
//! certificates rest on the lemmas (`proofs/device-arithmetic.md`, L35), and
//! the lemmas are what this suite tests, not a library.
//!
//! The backend is installed before `main` (a constructor in `.init_array`),
//! so that every test of the included suites runs through it; containment
//! is checked exactly, as in `soundness.rs`, whose tests are included here
//! unchanged.

// Each included suite brings its own `mod common;`, as when it is built alone.
#![allow(clippy::duplicate_mod)]

use specbound::linalg::{backend, shuffled::Shuffled};

/// The seed: `SPECBOUND_SHUFFLE_SEED` when set (to replay a failure), else
/// the process id (a new set of trees at every run), printed either way.
extern "C" fn install_shuffled_backend() {
    let seed = std::env::var("SPECBOUND_SHUFFLE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(std::process::id() as u64);
    eprintln!("soundness_device: shuffled backend, SPECBOUND_SHUFFLE_SEED={seed}");
    backend::install(Shuffled::leak(seed));
}

#[used]
#[link_section = ".init_array"]
static INSTALL: extern "C" fn() = install_shuffled_backend;

#[path = "soundness.rs"]
mod soundness;

#[path = "soundness_graded.rs"]
mod graded;

#[test]
fn the_shuffled_backend_is_the_one_in_use() {
    assert!(
        backend::current()
            .describe()
            .starts_with("cpu-shuffled-test:"),
        "{}",
        backend::current().describe()
    );
}
