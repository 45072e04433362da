//! The cross-attention of a decoder stack (T5, BART, Whisper), built by
//! re-emitting real MiniLM layers in each family's own tensor names and
//! config keys: the self-attention from layer 0, the cross-attention
//! (`EncDecAttention`, `encoder_attn`) from layer 1, the feed-forward from
//! layer 0. Through the CLI, every head's `QK_cross` and `V_tilde_cross`
//! equal exactly (identical interval ends) the `QK` and `V_tilde` of the
//! BERT-from-MiniLM layer 1 certificate, and the self-attention and
//! feed-forward matrices those of layer 0 (BERT's, or LLaMA's for a gated
//! feed-forward); the certificate says `cross_attention: true`, has no
//! bound and gives the reason; `verify --model` holds; a sharded run merges
//! to the unsharded certificate byte for byte; an encoder has none of it.

mod common;

use common::tmpdir;

use common::reemit::{layer, write_st, BERT};
use common::{assert_bad, ok_json, run, SPECTRAL_KEYS};
use serde_json::{json, Value};
use specbound::arch::families::CROSS_ATTENTION;
use specbound::matrix::DenseMatrix;
use std::path::{Path, PathBuf};

const N: usize = 384;
const I: usize = 1536;
const DH: usize = 32;
const HEADS: usize = 12;

/// `{prefix}{name}.weight` for each name and matrix.
fn named(prefix: &str, names: &[&str], w: &[DenseMatrix]) -> Vec<(String, DenseMatrix)> {
    names
        .iter()
        .zip(w)
        .map(|(n, m)| (format!("{prefix}{n}.weight"), m.clone()))
        .collect()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `certify DIR --json EXTRA...`, which must succeed.
fn certify(dir: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["certify", s(dir), "--json"];
    args.extend_from_slice(extra);
    ok_json(&run(&args))
}

/// A one-layer BERT of MiniLM's layer `l` (the reference of `l`).
fn bert(test: &str, l: usize) -> Value {
    let d = tmpdir(&format!("cross-{test}-bert-{l}"));
    write_st(
        &d,
        &named("encoder.layer.0.", &BERT, &layer(l)),
        false,
        json!({"model_type": "bert", "num_hidden_layers": 1, "hidden_size": N,
               "num_attention_heads": HEADS, "intermediate_size": I}),
    );
    certify(&d, &[])
}

/// A one-layer LLaMA of MiniLM's layer 0 with `W_gate = W_up = FF1`: the
/// reference of a gated feed-forward.
fn llama(test: &str) -> Value {
    let w = layer(0);
    let d = tmpdir(&format!("cross-{test}-llama"));
    let mut ts = named(
        "model.layers.0.",
        &[
            "self_attn.q_proj",
            "self_attn.k_proj",
            "self_attn.v_proj",
            "self_attn.o_proj",
        ],
        &w[..4],
    );
    ts.extend(named(
        "model.layers.0.",
        &["mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"],
        &[w[4].clone(), w[4].clone(), w[5].clone()],
    ));
    write_st(
        &d,
        &ts,
        false,
        json!({"model_type": "llama", "num_hidden_layers": 1, "hidden_size": N,
               "num_attention_heads": HEADS, "num_key_value_heads": HEADS,
               "head_dim": DH, "intermediate_size": I}),
    );
    certify(&d, &[])
}

/// The entry of `c`'s `matrices` at (layer, head, type).
fn entry<'a>(c: &'a Value, e: &Value, kind: &str) -> &'a Value {
    c["matrices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["layer"] == e["layer"] && m["head"] == e["head"] && m["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} at layer {} head {}", e["layer"], e["head"]))
}

/// The decoder certificate `c` states no bound, the reason, a
/// cross-attention, and exactly the spectra of the references: a cross
/// kind's of `cross`'s `QK`/`V_tilde` (every spectral key but the type),
/// the self-attention's of `attn`, the feed-forward's of `ffn`.
fn check_decoder(c: &Value, attn: &Value, cross: &Value, ffn: &Value, what: &str) {
    assert_eq!(c["version"], 3, "{what}");
    assert!(c.get("bounds").is_none(), "{what}");
    assert_eq!(c["bound_absent"].as_str(), Some(CROSS_ATTENTION), "{what}");
    assert_eq!(c["model"]["cross_attention"], json!(true), "{what}");
    assert_eq!(c["parameters"]["stack"]["name"], "decoder", "{what}");
    let spectra = c["spectra"].as_array().unwrap();
    let types: Vec<&str> = spectra
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    let mut want = Vec::new();
    for kind in ["QK", "V_tilde", "QK_cross", "V_tilde_cross"] {
        want.extend(std::iter::repeat_n(kind, HEADS));
    }
    want.extend(["M_in", "M_out"]);
    assert_eq!(types, want, "{what}: certificate order");
    for e in spectra {
        let kind = e["type"].as_str().unwrap();
        let (reference, base) = match kind {
            "QK_cross" => (cross, "QK"),
            "V_tilde_cross" => (cross, "V_tilde"),
            "QK" | "V_tilde" => (attn, kind),
            _ => (ffn, kind),
        };
        let r = entry(reference, e, base);
        for k in SPECTRAL_KEYS.iter().filter(|&&k| k != "type") {
            assert_eq!(
                e[*k], r[*k],
                "{what}: layer {} head {} {kind}: {k}",
                e["layer"], e["head"]
            );
        }
    }
}

/// `verify CERT --model MODEL` of the certificate `c`.
fn verify(c: &Value, model: &Path, name: &str) -> std::process::Output {
    let p = tmpdir(&format!("cross-verify-{name}")).join("cert.json");
    std::fs::write(&p, serde_json::to_vec_pretty(c).unwrap()).unwrap();
    run(&["verify", s(&p), "--model", s(model)])
}

fn assert_ok(out: &std::process::Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: exit {:?}: {}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

const BART_SELF: [&str; 4] = [
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn.out_proj",
];

const BART_CROSS: [&str; 4] = [
    "encoder_attn.q_proj",
    "encoder_attn.k_proj",
    "encoder_attn.v_proj",
    "encoder_attn.out_proj",
];

fn bart_config(mt: &str) -> Value {
    json!({"model_type": mt, "d_model": N, "encoder_layers": 1, "decoder_layers": 1,
           "encoder_attention_heads": HEADS, "decoder_attention_heads": HEADS,
           "encoder_ffn_dim": I, "decoder_ffn_dim": I, "activation_function": "gelu"})
}

/// A BART or Whisper model (`model_type` `mt`): its encoder MiniLM layer 0,
/// its decoder self-attention layer 0, cross-attention layer 1 (with
/// `cross_k` as its key weight), feed-forward layer 0.
fn bart_like(name: &str, mt: &str, cross_k: Option<DenseMatrix>) -> PathBuf {
    let (w0, w1) = (layer(0), layer(1));
    let d = tmpdir(name);
    let mut ts = named("model.encoder.layers.0.", &BART_SELF, &w0[..4]);
    ts.extend(named("model.encoder.layers.0.", &["fc1", "fc2"], &w0[4..]));
    ts.extend(named("model.decoder.layers.0.", &BART_SELF, &w0[..4]));
    let mut cross = w1[..4].to_vec();
    if let Some(k) = cross_k {
        cross[1] = k;
    }
    ts.extend(named("model.decoder.layers.0.", &BART_CROSS, &cross));
    ts.extend(named("model.decoder.layers.0.", &["fc1", "fc2"], &w0[4..]));
    write_st(&d, &ts, false, bart_config(mt));
    d
}

/// BART's and Whisper's decoders: the cross-attention's spectra are BERT
/// layer 1's, the rest BERT layer 0's; no bound, the reason;
/// `verify --model` re-derives every matrix, the cross ones included; a
/// certificate that leaves the key out no longer lists its matrices, and
/// `inspect` names the four weights by role.
#[test]
fn bart_and_whisper_decoders_certify_their_cross_attention_as_bert_layer_1() {
    let (b0, b1) = (bert("bart", 0), bert("bart", 1));
    for mt in ["bart", "whisper"] {
        let d = bart_like(&format!("cross-{mt}"), mt, None);
        let c = certify(&d, &["--stack", "decoder"]);
        check_decoder(&c, &b0, &b1, &b0, mt);
        assert_ok(&verify(&c, &d, mt), &format!("{mt}: verify --model"));
        // Without the key, the spectra are not the model's matrices: refused on read.
        let mut forged = c.clone();
        forged["model"]
            .as_object_mut()
            .unwrap()
            .remove("cross_attention");
        let out = verify(&forged, &d, &format!("{mt}-forged"));
        assert_eq!(out.status.code(), Some(2), "{mt}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("$.spectra"),
            "{mt}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let j = ok_json(&run(&["inspect", s(&d), "--stack", "decoder", "--json"]));
        let roles: Vec<(String, String)> = j["cross_attention"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["role"].as_str().unwrap().to_string(),
                    e["tensor"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let want: Vec<(String, String)> =
            ["cross_query", "cross_key", "cross_value", "cross_output"]
                .iter()
                .zip(BART_CROSS)
                .map(|(r, t)| {
                    (
                        r.to_string(),
                        format!("model.decoder.layers.{{l}}.{t}.weight"),
                    )
                })
                .collect();
        assert_eq!(roles, want, "{mt}");
        assert_eq!(j["matrices"].as_array().unwrap().len(), 4 * HEADS + 2);
    }
}

/// A gated T5 decoder (flan-T5: `wi_0`, `wi_1`): its cross-attention
/// (`layer.1.EncDecAttention`) is BERT layer 1's, its self-attention BERT
/// layer 0's, its gated feed-forward LLaMA's of layer 0; `verify --model`
/// holds.
#[test]
fn a_gated_t5_decoder_certifies_its_cross_attention_as_bert_layer_1() {
    let (b0, b1, l0) = (bert("t5", 0), bert("t5", 1), llama("t5"));
    let (w0, w1) = (layer(0), layer(1));
    let d = tmpdir("cross-t5");
    let mut ts = named(
        "decoder.block.0.layer.0.SelfAttention.",
        &["q", "k", "v", "o"],
        &w0[..4],
    );
    ts.extend(named(
        "decoder.block.0.layer.1.EncDecAttention.",
        &["q", "k", "v", "o"],
        &w1[..4],
    ));
    ts.extend(named(
        "decoder.block.0.layer.2.DenseReluDense.",
        &["wi_0", "wi_1", "wo"],
        &[w0[4].clone(), w0[4].clone(), w0[5].clone()],
    ));
    write_st(
        &d,
        &ts,
        false,
        json!({"model_type": "t5", "d_model": N, "num_heads": HEADS, "d_kv": DH, "d_ff": I,
               "num_layers": 1, "num_decoder_layers": 1, "feed_forward_proj": "gated-gelu",
               "dense_act_fn": "gelu_new", "is_gated_act": true}),
    );
    let c = certify(&d, &["--stack", "decoder"]);
    check_decoder(&c, &b0, &b1, &l0, "t5 gated decoder");
    assert_eq!(c["extensions"], json!([]));
    assert_ok(&verify(&c, &d, "t5"), "t5: verify --model");
    let j = ok_json(&run(&["inspect", s(&d), "--stack", "decoder", "--json"]));
    assert_eq!(j["layout"], "T5GatedDecoder");
    assert_eq!(j["cross_attention"][1]["role"], "cross_key");
    assert_eq!(
        j["cross_attention"][1]["tensor"],
        "decoder.block.{l}.layer.1.EncDecAttention.k.weight"
    );
}

/// A cross-attention whose keys read an encoder of another width (320, not
/// the decoder's 384) is refused in one line naming the tensor, by
/// `certify` and `inspect` alike.
#[test]
fn a_cross_attention_of_another_encoder_width_is_refused_naming_the_tensor() {
    let k = layer(1)[1].clone();
    let narrow = DenseMatrix {
        rows: k.rows,
        cols: 320,
        data: (0..k.rows)
            .flat_map(|i| k.data[i * k.cols..i * k.cols + 320].to_vec())
            .collect(),
    };
    let d = bart_like("cross-narrow", "bart", Some(narrow));
    let tensor = "model.decoder.layers.0.encoder_attn.k_proj.weight";
    for cmd in ["certify", "inspect"] {
        assert_bad(
            &[cmd, s(&d), "--stack", "decoder"],
            &[tensor, "320", "384", "encoder"],
        );
    }
}

/// The encoder of the same model has no cross-attention: no
/// `cross_attention` key, no cross kind, the paper's bound exactly as
/// BERT's layer 0; a certificate with a bound that claims a
/// cross-attention is refused on read, naming the key.
#[test]
fn an_encoder_stack_has_no_cross_attention_kinds() {
    let b0 = bert("encoder", 0);
    let d = bart_like("cross-encoder", "bart", None);
    let c = certify(&d, &["--stack", "encoder"]);
    assert!(c["model"].get("cross_attention").is_none());
    assert!(c["matrices"]
        .as_array()
        .unwrap()
        .iter()
        .all(|m| !m["type"].as_str().unwrap().ends_with("_cross")));
    assert_eq!(c["matrices"], b0["matrices"]);
    assert_eq!(c["bounds"], b0["bounds"]);
    let j = ok_json(&run(&["inspect", s(&d), "--stack", "encoder", "--json"]));
    assert!(j["cross_attention"].is_null());
    let mut forged = c.clone();
    forged["model"]["cross_attention"] = json!(true);
    let p = tmpdir("cross-encoder-forged").join("cert.json");
    std::fs::write(&p, serde_json::to_vec_pretty(&forged).unwrap()).unwrap();
    assert_bad(&["verify", s(&p)], &["$.model.cross_attention"]);
}

/// A decoder certified in 3 shards and merged is the unsharded certificate,
/// byte for byte (the cross-attention's heads are dealt with the others).
#[test]
fn a_sharded_decoder_merges_to_the_unsharded_certificate() {
    let d = bart_like("cross-shard", "whisper", None);
    let out = tmpdir("cross-shard-out");
    let reference = out.join("ref.json");
    assert_ok(
        &run(&[
            "certify",
            s(&d),
            "--stack",
            "decoder",
            "--out",
            s(&reference),
        ]),
        "unsharded",
    );
    let parts: Vec<PathBuf> = (1..=3)
        .map(|k| out.join(format!("part-{k}.json")))
        .collect();
    for (k, p) in parts.iter().enumerate() {
        let shard = format!("{}/3", k + 1);
        assert_ok(
            &run(&[
                "certify",
                s(&d),
                "--stack",
                "decoder",
                "--shard",
                &shard,
                "--out",
                s(p),
            ]),
            &shard,
        );
    }
    let merged = out.join("merged.json");
    let mut args = vec!["merge"];
    args.extend(parts.iter().rev().map(|p| s(p)));
    args.extend(["--out", s(&merged)]);
    assert_ok(&run(&args), "merge");
    assert!(
        std::fs::read(&merged).unwrap() == std::fs::read(&reference).unwrap(),
        "the merged decoder certificate differs from the unsharded one"
    );
    let c: Value = serde_json::from_slice(&std::fs::read(&merged).unwrap()).unwrap();
    assert_eq!(c["model"]["cross_attention"], json!(true));
}
