//! Multimodal Gemma 3's SigLIP vision tower as a stack (`--stack vision`):
//! MiniLM's layer 1 re-emitted as the tower's layer 0 under
//! `vision_tower.vision_model.encoder.` (and newer transformers'
//! `model.vision_tower.`), beside a Gemma 3 text stack holding layer 0, in
//! one file with `text_config` and `vision_config`: its certificate states
//! exactly the matrices, layer terms and bounds of the same layer as a
//! standalone SigLIP vision tower and as BERT, `verify` reads the same
//! stack, and the text stack stays the default.

mod common;

use common::tmpdir;

use common::reemit::{certify, layer, write_st, BERT};
use common::{ok_json, run};
use serde_json::{json, Value};
use specbound::matrix::DenseMatrix;
use std::path::Path;

const N: usize = 384;
const I: usize = 1536;
const DH: usize = 32;

/// SigLIP's names of the six weights of a layer, in `layer`'s order.
const SIGLIP: [&str; 6] = [
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn.out_proj",
    "mlp.fc1",
    "mlp.fc2",
];

/// `names[k]` (with `{p}` before it) for the k-th matrix of `w`.
fn named(p: &str, names: &[&str], w: &[DenseMatrix]) -> Vec<(String, DenseMatrix)> {
    names
        .iter()
        .zip(w)
        .map(|(n, m)| (format!("{p}{n}.weight"), m.clone()))
        .collect()
}

/// MiniLM's layer 0 as a Gemma 3 text layer under `p` (its feed-forward
/// input as both gate and up, QK-norm and the pre-feed-forward norm).
fn gemma3_text(p: &str) -> Vec<(String, DenseMatrix)> {
    let w = layer(0);
    let ff = [
        w[0].clone(),
        w[1].clone(),
        w[2].clone(),
        w[3].clone(),
        w[4].clone(),
        w[4].clone(),
        w[5].clone(),
    ];
    let mut ts = named(
        p,
        &[
            "self_attn.q_proj",
            "self_attn.k_proj",
            "self_attn.v_proj",
            "self_attn.o_proj",
            "mlp.gate_proj",
            "mlp.up_proj",
            "mlp.down_proj",
        ],
        &ff,
    );
    let gain = |n: usize| DenseMatrix {
        rows: 1,
        cols: n,
        data: (0..n).map(|i| 1.0 + i as f64 / 64.0).collect(),
    };
    for (t, n) in [
        ("self_attn.q_norm", DH),
        ("self_attn.k_norm", DH),
        ("pre_feedforward_layernorm", N),
    ] {
        ts.push((format!("{p}{t}.weight"), gain(n)));
    }
    ts
}

/// A Gemma 3 multimodal checkpoint: text stack under `text`, vision tower
/// under `vision` (MiniLM's layer 1), the vision tower's facts `vision`
/// (heads left out: SiglipVisionConfig's default 12).
fn gemma3(dir: &Path, text: &str, vision: &str, vision_config: Value) {
    let mut ts = named(
        &format!("{vision}vision_model.encoder.layers.0."),
        &SIGLIP,
        &layer(1),
    );
    ts.extend(gemma3_text(&format!("{text}layers.0.")));
    let tc = json!({"model_type": "gemma3_text", "num_hidden_layers": 1, "hidden_size": N,
        "num_attention_heads": 12, "num_key_value_heads": 12, "head_dim": DH,
        "intermediate_size": I});
    write_st(
        dir,
        &ts,
        false,
        json!({"model_type": "gemma3", "text_config": tc, "vision_config": vision_config}),
    );
}

fn vision_config() -> Value {
    json!({"model_type": "siglip_vision_model", "hidden_size": N, "intermediate_size": I,
           "num_hidden_layers": 1})
}

fn run_json(args: &[&str]) -> (Value, String) {
    let out = run(args);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    (ok_json(&out), stderr)
}

/// What must equal between two certificates of the same matrices with a
/// bound: every matrix entry, the layer terms, the bounds, the extensions.
fn assert_same_bound(c: &Value, reference: &Value, what: &str) {
    assert!(c.get("bounds").is_some(), "{what}: no bound");
    for k in ["matrices", "layers", "bounds", "extensions"] {
        assert_eq!(c[k], reference[k], "{what}: {k}");
    }
}

#[test]
fn gemma3_vision_tower_certifies_as_siglip_vision_and_bert() {
    let bert_dir = tmpdir("g3v-bert");
    write_st(
        &bert_dir,
        &named("encoder.layer.0.", &BERT, &layer(1)),
        false,
        json!({"model_type": "bert", "num_hidden_layers": 1, "hidden_size": N,
               "num_attention_heads": 12, "intermediate_size": I}),
    );
    let bert = certify(&bert_dir);
    let siglip_dir = tmpdir("g3v-siglip");
    let mut sc = vision_config();
    sc["num_attention_heads"] = json!(12);
    write_st(
        &siglip_dir,
        &named("vision_model.encoder.layers.0.", &SIGLIP, &layer(1)),
        false,
        sc,
    );
    let siglip = certify(&siglip_dir);
    assert_same_bound(&siglip, &bert, "siglip vision");

    for (text, vision) in [
        ("language_model.model.", "vision_tower."),
        ("model.language_model.", "model.vision_tower."),
    ] {
        let d = tmpdir(&format!("g3v-{vision}"));
        gemma3(&d, text, vision, vision_config());
        let ds = d.to_str().unwrap();
        let (c, _) = run_json(&["certify", ds, "--json", "--stack", "vision"]);
        assert_same_bound(&c, &siglip, vision);
        assert_eq!(c["model"]["architecture"], "gemma3");
        assert_eq!(c["model"]["tensor_prefix"], vision);
        assert_eq!(
            c["parameters"]["stack"],
            json!({"name": "vision", "stacks": ["text", "vision"], "by_flag": true})
        );
        // verify re-reads the vision stack from the weights.
        let p = d.join("cert.json");
        std::fs::write(&p, serde_json::to_vec_pretty(&c).unwrap()).unwrap();
        let out = run(&["verify", p.to_str().unwrap(), "--model", ds]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Without --stack: the text stack, said on stderr.
        let (t, stderr) = run_json(&["certify", ds, "--json"]);
        assert_eq!(
            t["parameters"]["stack"],
            json!({"name": "text", "stacks": ["text", "vision"], "by_flag": false})
        );
        assert!(t.get("bounds").is_none(), "the text stack has QK-norm");
        assert!(stderr.contains("vision"), "{stderr}");
        let (j, _) = run_json(&["inspect", ds, "--json", "--stack", "vision"]);
        assert_eq!(j["layout"], "Gemma3Vision");
    }
}

/// The vision tower's facts come from `vision_config`: a hidden size
/// there that the tower's tensors do not have, or a layer count above the
/// stored layers (SiglipVisionConfig's default 12 when left out), is a
/// one-line error (exit 2) naming the tensor or the key.
#[test]
fn gemma3_vision_facts_disagreeing_with_the_tower_are_refused() {
    for (what, edit, needle) in [
        ("hidden size", json!({"hidden_size": 768}), "hidden_size"),
        (
            "default layer count",
            json!({"num_hidden_layers": null}),
            "layers.1",
        ),
    ] {
        let d = tmpdir(&format!("g3v-bad-{}", what.replace(' ', "-")));
        let mut vc = vision_config();
        for (k, v) in edit.as_object().unwrap() {
            if v.is_null() {
                vc.as_object_mut().unwrap().remove(k);
            } else {
                vc[k] = v.clone();
            }
        }
        gemma3(&d, "language_model.model.", "vision_tower.", vc);
        let out = run(&["certify", d.to_str().unwrap(), "--stack", "vision"]);
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{what}: {e}");
        assert!(!e.contains("panicked") && e.contains(needle), "{what}: {e}");
        assert_eq!(e.trim_end().lines().count(), 1, "{what}: {e}");
    }
}
