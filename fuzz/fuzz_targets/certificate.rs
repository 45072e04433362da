//! Fuzz target: the certificate reader, `verify` (internal) and `diff`, and
//! the reader of `--resume-dir` layer parts, must return errors, never
//! panic, on any input.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(c) = specbound::certificate::Certificate::parse(data, "fuzz") {
        let _ = specbound::evidence::verify::verify_internal(&c);
        let _ = specbound::evidence::diff::diff(&c, &c, 0.0);
    }
    let _ = specbound::certificate::Part::parse(data, "fuzz");
});
