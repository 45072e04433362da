//! Fuzz target: the pickle allow-list scanner must return an error or
//! accept, never panic, on any opcode stream (one pickle in memory, and a
//! stream of pickles as a legacy checkpoint holds them).
//! The body is in `../bodies.rs`, shared with the stable-Rust replay
//! that CI runs (`tests/fuzz_replay.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

include!("../bodies.rs");

fuzz_target!(|data: &[u8]| fuzz_pickle(data));
