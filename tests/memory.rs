//! Peak memory follows one layer, not the model: `certify` reads, certifies
//! and releases one layer at a time (and releases the mapped pages of what
//! it has read and hashed), so a 4-layer checkpoint of a small LLaMA shape
//! needs no more than 1.25 times the peak resident memory of its 1-layer
//! cut (docs/certify.md, "Memory").
//!
//! The peak is the child's own `ru_maxrss` from `wait4`, which also counts
//! the test process's peak up to the child's `exec`: the checkpoint is
//! therefore written streaming, so that this process stays far below the
//! child's working set. One test in this file, so that no other test of
//! the same process raises that peak.

mod common;

use std::path::Path;

use common::llama::{write_llama_f16, HEADS};

/// `specbound certify -q --out OUT MODEL`'s peak resident set size in KiB.
fn certify_peak_kib(model: &Path, out: &Path) -> i64 {
    let out = out.to_str().expect("a UTF-8 temporary path");
    common::peak_kib(&["certify", "-q", "--out", out], model)
}

#[test]
fn peak_memory_of_a_4_layer_run_is_that_of_one_layer() {
    let tmp = common::process_scratch().join("memory");
    let (one, four) = (tmp.join("llama-1"), tmp.join("llama-4"));
    write_llama_f16(&one, 1, 11);
    write_llama_f16(&four, 4, 11);
    let peak1 = certify_peak_kib(&one, &tmp.join("one.json"));
    let peak4 = certify_peak_kib(&four, &tmp.join("four.json"));
    // Both certificates are complete: every matrix of every layer.
    for (f, layers) in [("one.json", 1usize), ("four.json", 4)] {
        let c: serde_json::Value =
            serde_json::from_slice(&std::fs::read(tmp.join(f)).unwrap()).unwrap();
        assert_eq!(
            c["matrices"].as_array().unwrap().len(),
            layers * (2 * HEADS + 2),
            "{f}"
        );
    }
    let file_kib = |d: &Path| {
        std::fs::metadata(d.join("model.safetensors"))
            .unwrap()
            .len()
            / 1024
    };
    eprintln!(
        "peak RSS: 1 layer {peak1} KiB, 4 layers {peak4} KiB (ratio {:.3}); files {} and {} KiB",
        peak4 as f64 / peak1 as f64,
        file_kib(&one),
        file_kib(&four)
    );
    // The 1-layer run's peak is dominated by the layer, not the baseline.
    assert!(
        peak1 > 100 * 1024,
        "1-layer peak {peak1} KiB is too small to measure"
    );
    assert!(
        (peak4 as f64) <= 1.25 * peak1 as f64,
        "4 layers {peak4} KiB > 1.25 x 1 layer {peak1} KiB"
    );
    std::fs::remove_dir_all(&tmp).unwrap();
}
