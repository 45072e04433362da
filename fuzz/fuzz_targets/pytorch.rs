//! Fuzz target: the PyTorch reader (zip container, legacy stream, the
//! allow-list scan of their pickles) must return an error, never panic,
//! never execute anything, on any input.
//! The body is in `../bodies.rs`, shared with the stable-Rust replay
//! that CI runs (`tests/fuzz_replay.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

include!("../bodies.rs");

fuzz_target!(|data: &[u8]| fuzz_pytorch(data));
