//! Fuzz target: the ONNX reader (the graph walk, external data, weights
//! oriented by their nodes) must return an error, never panic, on any input.
//! The body is in `../bodies.rs`, shared with the stable-Rust replay
//! that CI runs (`tests/fuzz_replay.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

include!("../bodies.rs");

fuzz_target!(|data: &[u8]| fuzz_onnx(data));
