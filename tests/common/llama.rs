//! A float16 LLaMA-shaped checkpoint of random dyadic entries, written
//! streaming (tests/memory.rs measures the child's peak memory, which also
//! counts this process's peak up to the child's `exec`; tests/threads.rs
//! certifies it at several thread counts).

use std::io::{BufWriter, Write};
use std::path::Path;

use super::Rng;

/// The shape: hidden 1024, 8 heads of 128, gated feed-forward 2816 (the
/// LLaMA ratio), float16. A layer holds 16 factored head matrices and the
/// dense M_in (1024 x 5632) and M_out (2816 x 1024): tens of MiB in f64,
/// well above the process baseline.
pub const N: usize = 1024;
pub const HEADS: usize = 8;
pub const DH: usize = 128;
pub const FF: usize = 2816;

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
pub fn write_llama_f16(dir: &Path, layers: usize, seed: u64) {
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
