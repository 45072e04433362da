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

use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::Stdio;

use common::Rng;

/// The shape: hidden 1024, 8 heads of 128, gated feed-forward 2816 (the
/// LLaMA ratio), float16. A layer holds 16 factored head matrices and the
/// dense M_in (1024 x 5632) and M_out (2816 x 1024): tens of MiB in f64,
/// well above the process baseline.
const N: usize = 1024;
const HEADS: usize = 8;
const DH: usize = 128;
const FF: usize = 2816;

fn layer_tensors(l: usize) -> Vec<(String, usize, usize)> {
    let p = format!("model.layers.{l}");
    vec![
        (format!("{p}.self_attn.q_proj.weight"), HEADS * DH, N),
        (format!("{p}.self_attn.k_proj.weight"), HEADS * DH, N),
        (format!("{p}.self_attn.v_proj.weight"), HEADS * DH, N),
        (format!("{p}.self_attn.o_proj.weight"), N, HEADS * DH),
        (format!("{p}.mlp.gate_proj.weight"), FF, N),
        (format!("{p}.mlp.up_proj.weight"), FF, N),
        (format!("{p}.mlp.down_proj.weight"), N, FF),
    ]
}

/// Writes a `layers`-layer float16 LLaMA checkpoint of random dyadic
/// entries (`k / 2^16`, `|k| <= 1000`: exact in float16), streaming.
fn write_llama_f16(dir: &Path, layers: usize, seed: u64) {
    std::fs::create_dir_all(dir).unwrap();
    let tensors: Vec<(String, usize, usize)> = (0..layers).flat_map(layer_tensors).collect();
    let mut header = serde_json::Map::new();
    let mut off = 0usize;
    for (name, r, c) in &tensors {
        header.insert(
            name.clone(),
            serde_json::json!({"dtype": "F16", "shape": [r, c], "data_offsets": [off, off + 2 * r * c]}),
        );
        off += 2 * r * c;
    }
    let mut h = serde_json::to_vec(&serde_json::Value::Object(header)).unwrap();
    while h.len() % 8 != 0 {
        h.push(b' ');
    }
    let file = std::fs::File::create(dir.join("model.safetensors")).unwrap();
    let mut w = BufWriter::new(file);
    w.write_all(&(h.len() as u64).to_le_bytes()).unwrap();
    w.write_all(&h).unwrap();
    let mut rng = Rng(seed);
    for (_, r, c) in &tensors {
        for _ in 0..r * c {
            let x = (rng.below(2001) as f64 - 1000.0) / 65536.0;
            w.write_all(&half::f16::from_f64(x).to_bits().to_le_bytes())
                .unwrap();
        }
    }
    w.flush().unwrap();
    let config = serde_json::json!({
        "model_type": "llama", "num_hidden_layers": layers, "hidden_size": N,
        "num_attention_heads": HEADS, "num_key_value_heads": HEADS,
        "intermediate_size": FF, "hidden_act": "silu", "torch_dtype": "float16"
    });
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
}

/// Runs `specbound certify MODEL -q --out OUT` and returns its peak resident
/// set size in KiB (`wait4`'s `ru_maxrss`), after asserting success.
fn certify_peak_kib(model: &Path, out: &Path) -> i64 {
    let child = common::bin()
        .args(["certify", "-q", "--out"])
        .arg(out)
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
        "certify {} failed: status {status}",
        model.display()
    );
    ru.ru_maxrss
}

#[test]
fn peak_memory_of_a_4_layer_run_is_that_of_one_layer() {
    let tmp = std::env::temp_dir().join(format!("specbound-memory-{}", std::process::id()));
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
