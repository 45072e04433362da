//! Fuzz target: models in memory, as the Python module builds them from a
//! state dict and a config, must give an error, never a panic, on any
//! input (the input's layout: `fuzz_memory` in `../bodies.rs`).
//! The body is in `../bodies.rs`, shared with the stable-Rust replay
//! that CI runs (`tests/fuzz_replay.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

include!("../bodies.rs");

fuzz_target!(|data: &[u8]| fuzz_memory(data));
