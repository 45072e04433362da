//! Fuzz target: the pickle allow-list scanner must return an error or
//! accept, never panic, on any opcode stream (one pickle in memory, and a
//! stream of pickles as a legacy checkpoint holds them).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = specbound::io::pickle_scan::scan_bytes(data, 1 << 16);
    let mut s = specbound::io::pickle_scan::Scanner::new(1 << 16, 1 << 20);
    let mut r = data;
    let mut offset = 0u64;
    for k in 0..5 {
        s.collect_strings(k == 4);
        match s.scan(&mut r, offset) {
            Ok(n) => offset += n,
            Err(_) => break,
        }
    }
    let _ = s.take_strings();
});
