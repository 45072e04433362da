//! The study's family of real-format checkpoints (Hugging Face directories:
//! `config.json` plus `model.safetensors`): the bundled all-MiniLM-L6-v2
//! truncated to L = 2, 4 and 6 layers (its real weights, byte for byte) and
//! generated BERT checkpoints of widths 128 and 256 and depths 2 and 4
//! (heads of 64, feed-forward 4N, as the BERT Miniatures; pseudo-random
//! weights from a fixed seed, with biases and LayerNorms as real
//! checkpoints carry them). Self-contained, so that
//! `examples/study_family.rs` can build the same family.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// Directory names (= default model ids), smallest models first.
pub const MEMBERS: [&str; 7] = [
    "bert-L2-H128",
    "bert-L2-H256",
    "bert-L4-H128",
    "bert-L4-H256",
    "minilm-L2",
    "minilm-L4",
    "minilm-L6",
];

/// A tensor to write: name, shape, little-endian F32 bytes.
type Tensor = (String, Vec<usize>, Vec<u8>);

/// Writes a safetensors file (F32 tensors, in the order given).
fn write_safetensors(path: &Path, tensors: &[Tensor]) {
    let mut header = serde_json::Map::new();
    header.insert("__metadata__".into(), serde_json::json!({"format": "pt"}));
    let mut offset = 0usize;
    for (name, shape, bytes) in tensors {
        header.insert(
            name.clone(),
            serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + bytes.len()]}),
        );
        offset += bytes.len();
    }
    let mut h = serde_json::to_vec(&serde_json::Value::Object(header)).unwrap();
    while h.len() % 8 != 0 {
        h.push(b' ');
    }
    let mut out = Vec::with_capacity(8 + h.len() + offset);
    out.extend_from_slice(&(h.len() as u64).to_le_bytes());
    out.extend_from_slice(&h);
    for (_, _, bytes) in tensors {
        out.extend_from_slice(bytes);
    }
    std::fs::write(path, out).unwrap();
}

/// The bundled MiniLM's first `layers` layers, tensors byte-identical
/// (what `scripts/study-family` writes).
pub fn minilm(bundle: &Path, dir: &Path, layers: usize) {
    minilm_edited(bundle, dir, layers, &|_, _, _| {});
}

/// Edits a tensor's little-endian F32 bytes: `(name, shape, bytes)`.
pub type Edit<'a> = dyn Fn(&str, &[usize], &mut [u8]) + 'a;

/// [`minilm`], with `edit(name, shape, bytes)` applied to every tensor's
/// little-endian F32 bytes before they are written (a pruned or zeroed
/// weight).
pub fn minilm_edited(bundle: &Path, dir: &Path, layers: usize, edit: &Edit) {
    let bytes = std::fs::read(bundle.join("model.safetensors")).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let data = &bytes[8 + n..];
    let mut names: Vec<&String> = header.keys().filter(|k| *k != "__metadata__").collect();
    names.sort();
    let mut tensors = Vec::new();
    for name in names {
        let layer: usize = name
            .strip_prefix("encoder.layer.")
            .and_then(|r| r.split('.').next())
            .and_then(|l| l.parse().ok())
            .unwrap_or_else(|| panic!("unexpected bundled tensor {name}"));
        if layer >= layers {
            continue;
        }
        let t = &header[name];
        assert_eq!(t["dtype"], "F32");
        let shape: Vec<usize> = serde_json::from_value(t["shape"].clone()).unwrap();
        let off: Vec<usize> = serde_json::from_value(t["data_offsets"].clone()).unwrap();
        let mut b = data[off[0]..off[1]].to_vec();
        edit(name, &shape, &mut b);
        tensors.push((name.clone(), shape, b));
    }
    std::fs::create_dir_all(dir).unwrap();
    write_safetensors(&dir.join("model.safetensors"), &tensors);
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bundle.join("config.json")).unwrap()).unwrap();
    config["num_hidden_layers"] = serde_json::json!(layers);
    std::fs::write(
        dir.join("config.json"),
        serde_json::to_string_pretty(&config).unwrap(),
    )
    .unwrap();
}

/// xorshift64* from a seed; values roughly normal (sum of four uniforms).
struct Gen(u64);

impl Gen {
    fn uniform(&mut self) -> f64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
    fn normal_ish(&mut self) -> f64 {
        (0..4).map(|_| self.uniform()).sum::<f64>() - 2.0
    }
    fn tensor(&mut self, name: String, shape: Vec<usize>, scale: f64) -> Tensor {
        let count: usize = shape.iter().product();
        let mut bytes = Vec::with_capacity(4 * count);
        for _ in 0..count {
            bytes.extend_from_slice(&((self.normal_ish() * scale) as f32).to_le_bytes());
        }
        (name, shape, bytes)
    }
}

/// A generated BERT checkpoint of `layers` layers and width `hidden`.
fn bert(dir: &Path, layers: usize, hidden: usize) {
    let heads = hidden / 64;
    let inter = 4 * hidden;
    let mut g = Gen(0x9E37_79B9_7F4A_7C15 ^ ((layers as u64) << 32) ^ hidden as u64);
    let scale = 0.04;
    let mut t = Vec::new();
    for l in 0..layers {
        let p = format!("bert.encoder.layer.{l}.");
        for m in ["query", "key", "value"] {
            t.push(g.tensor(
                format!("{p}attention.self.{m}.weight"),
                vec![hidden, hidden],
                scale,
            ));
            t.push(g.tensor(format!("{p}attention.self.{m}.bias"), vec![hidden], scale));
        }
        t.push(g.tensor(
            format!("{p}attention.output.dense.weight"),
            vec![hidden, hidden],
            scale,
        ));
        t.push(g.tensor(
            format!("{p}attention.output.dense.bias"),
            vec![hidden],
            scale,
        ));
        t.push(g.tensor(
            format!("{p}attention.output.LayerNorm.weight"),
            vec![hidden],
            scale,
        ));
        t.push(g.tensor(
            format!("{p}intermediate.dense.weight"),
            vec![inter, hidden],
            scale,
        ));
        t.push(g.tensor(format!("{p}intermediate.dense.bias"), vec![inter], scale));
        t.push(g.tensor(
            format!("{p}output.dense.weight"),
            vec![hidden, inter],
            scale,
        ));
        t.push(g.tensor(format!("{p}output.dense.bias"), vec![hidden], scale));
        t.push(g.tensor(format!("{p}output.LayerNorm.weight"), vec![hidden], scale));
    }
    std::fs::create_dir_all(dir).unwrap();
    write_safetensors(&dir.join("model.safetensors"), &t);
    let config = serde_json::json!({
        "architectures": ["BertForMaskedLM"],
        "model_type": "bert",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": inter,
        "hidden_act": "gelu",
        "vocab_size": 30522,
        "max_position_embeddings": 512
    });
    std::fs::write(
        dir.join("config.json"),
        serde_json::to_string_pretty(&config).unwrap(),
    )
    .unwrap();
}

/// Builds every member of the family under `dir` (one directory each,
/// named as in [`MEMBERS`]) from the bundled model directory `bundle`;
/// returns their paths in [`MEMBERS`] order.
pub fn build(dir: &Path, bundle: &Path) -> Vec<PathBuf> {
    MEMBERS
        .iter()
        .map(|name| {
            let p = dir.join(name);
            match *name {
                "minilm-L2" => minilm(bundle, &p, 2),
                "minilm-L4" => minilm(bundle, &p, 4),
                "minilm-L6" => minilm(bundle, &p, 6),
                other => {
                    let (l, h) = other
                        .strip_prefix("bert-L")
                        .and_then(|r| r.split_once("-H"))
                        .unwrap();
                    bert(&p, l.parse().unwrap(), h.parse().unwrap());
                }
            }
            p
        })
        .collect()
}
