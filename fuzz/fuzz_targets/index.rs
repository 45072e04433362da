//! Fuzz target: a model directory's sharded index
//! (`model.safetensors.index.json`) and `config.json` must give an error,
//! never a panic, whatever they hold. The input is split at the first NUL:
//! the index before it, `config.json` after it (absent without a NUL).
//! The body is in `../bodies.rs`, shared with the stable-Rust replay
//! that CI runs (`tests/fuzz_replay.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

include!("../bodies.rs");

fuzz_target!(|data: &[u8]| fuzz_index(data));
