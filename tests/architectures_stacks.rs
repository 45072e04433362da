//! Models with several stacks of blocks (CLIP and SigLIP towers, T5, BART,
//! Whisper, multimodal Gemma 3), each built by re-emitting the real MiniLM
//! layers in the family's own tensor names and config keys (as transformers
//! writes them), a different layer in each stack: the certificate of a stack
//! equals that of the BERT, LLaMA or Gemma 3 layout it is equivalent to, the
//! stack is chosen by `--stack` (by default the first the files hold, said on
//! stderr and recorded as `parameters.stack`), `verify` reads the same stack,
//! and a stack the model type does not have is a one-line error.

mod common;

use common::tmpdir;

use common::{assert_bad, ok_json, root, run};
use serde_json::{json, Value};
use specbound::io::checkpoint::Checkpoint;
use specbound::matrix::DenseMatrix;
use std::path::Path;

const N: usize = 384;
const I: usize = 1536;
const DH: usize = 32;

/// The real weights of MiniLM's layer l: q, k, v, o, ff1, ff2 ([out, in]).
fn layer(l: usize) -> Vec<DenseMatrix> {
    let ck = Checkpoint::open(&root().join("data/all-MiniLM-L6-v2")).unwrap();
    BERT_NAMES
        .iter()
        .map(|t| {
            ck.read(&format!("encoder.layer.{l}.{t}.weight"))
                .unwrap()
                .matrix
        })
        .collect()
}

const BERT_NAMES: [&str; 6] = [
    "attention.self.query",
    "attention.self.key",
    "attention.self.value",
    "attention.output.dense",
    "intermediate.dense",
    "output.dense",
];

/// The first `n` rows of `x`.
fn top(x: &DenseMatrix, n: usize) -> DenseMatrix {
    DenseMatrix {
        rows: n,
        cols: x.cols,
        data: x.data[..n * x.cols].to_vec(),
    }
}

/// The first `n` columns of `x`.
fn left(x: &DenseMatrix, n: usize) -> DenseMatrix {
    DenseMatrix {
        rows: x.rows,
        cols: n,
        data: (0..x.rows)
            .flat_map(|i| x.data[i * x.cols..i * x.cols + n].to_vec())
            .collect(),
    }
}

fn gain(n: usize) -> DenseMatrix {
    DenseMatrix {
        rows: 1,
        cols: n,
        data: (0..n).map(|i| 1.0 + i as f64 / 64.0).collect(),
    }
}

/// `names[k]` (with `{p}` the prefix) for the k-th matrix of `w`.
fn named(p: &str, names: &[&str], w: &[DenseMatrix]) -> Vec<(String, DenseMatrix)> {
    names
        .iter()
        .zip(w)
        .map(|(n, m)| (format!("{p}{n}.weight"), m.clone()))
        .collect()
}

fn write(dir: &Path, tensors: &[(String, DenseMatrix)], config: &Value) {
    let refs: Vec<(String, &DenseMatrix)> = tensors.iter().map(|(n, m)| (n.clone(), m)).collect();
    common::write_safetensors(&dir.join("model.safetensors"), &refs, "F32");
    std::fs::write(dir.join("config.json"), serde_json::to_vec(config).unwrap()).unwrap();
}

fn certify(dir: &Path, extra: &[&str]) -> (Value, String) {
    let mut args = vec!["certify", dir.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    let out = run(&args);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    (ok_json(&out), stderr)
}

/// The certificate of a one-layer BERT holding MiniLM's layer l, in a
/// directory of its own for test `test` (tests run in parallel).
fn bert_reference(test: &str, l: usize) -> Value {
    let d = tmpdir(&format!("{test}-bert-{l}"));
    write(
        &d,
        &named("encoder.layer.0.", &BERT_NAMES, &layer(l)),
        &json!({"model_type": "bert", "num_hidden_layers": 1, "hidden_size": N,
                "num_attention_heads": 12, "intermediate_size": I}),
    );
    certify(&d, &[]).0
}

/// The fifteen spectral keys of every matrix entry of a certificate with a
/// bound: what a certificate without one states in `spectra`.
fn spectra_of(c: &Value) -> Vec<Value> {
    c["matrices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            Value::Object(
                common::SPECTRAL_KEYS
                    .iter()
                    .map(|k| (k.to_string(), m[*k].clone()))
                    .collect(),
            )
        })
        .collect()
}

fn same_bound(c: &Value, reference: &Value, what: &str) {
    assert_eq!(c["matrices"], reference["matrices"], "{what}");
    assert_eq!(c["layers"], reference["layers"], "{what}");
    assert_eq!(c["bounds"], reference["bounds"], "{what}");
}

fn no_bound(c: &Value, reference: &Value, reason: &str, what: &str) {
    assert_eq!(c["version"], 3, "{what}");
    assert!(c.get("bounds").is_none(), "{what}");
    assert_eq!(c["bound_absent"].as_str(), Some(reason), "{what}");
    assert_eq!(c["extensions"], json!([]), "{what}");
    // A decoder's cross-attention kinds are checked exactly in
    // tests/architectures_cross.rs; here the self-attention and feed-forward.
    let own: Vec<Value> = c["spectra"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| !m["type"].as_str().unwrap().ends_with("_cross"))
        .cloned()
        .collect();
    assert_eq!(own, spectra_of(reference), "{what}");
}

fn verify(cert: &Value, model: &Path, name: &str) -> std::process::Output {
    let p = tmpdir(&format!("verify-{name}")).join("cert.json");
    std::fs::write(&p, serde_json::to_vec_pretty(cert).unwrap()).unwrap();
    run(&[
        "verify",
        p.to_str().unwrap(),
        "--model",
        model.to_str().unwrap(),
    ])
}

fn extensions(c: &Value) -> Vec<String> {
    c["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap().to_string())
        .collect()
}

const CLIP_NAMES: [&str; 6] = [
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn.out_proj",
    "mlp.fc1",
    "mlp.fc2",
];

/// CLIP with MiniLM's layer 0 as its text tower and layer 1 as its vision
/// tower (nested `text_config` / `vision_config`; the vision tower's heads
/// left out, as transformers saves CLIPVisionConfig's default 12): the text
/// tower by default (said on stderr, recorded), the vision tower with
/// `--stack vision`, each the BERT certificate of its layer; CLIP's
/// `quick_gelu` gets the `L_phi` note; `verify` re-reads the stack; a
/// SigLIP vision tower alone (`siglip_vision_model`, flat config) certifies
/// as BERT with the paper's bound exactly.
#[test]
fn clip_and_siglip_towers_certify_as_bert_one_stack_at_a_time() {
    let (bert0, bert1) = (bert_reference("clip", 0), bert_reference("clip", 1));
    let d = tmpdir("clip");
    let mut ts = named("text_model.encoder.layers.0.", &CLIP_NAMES, &layer(0));
    ts.extend(named(
        "vision_model.encoder.layers.0.",
        &CLIP_NAMES,
        &layer(1),
    ));
    ts.push(("text_projection.weight".into(), layer(0)[0].clone()));
    let cfg = json!({
        "model_type": "clip",
        "architectures": ["CLIPModel"],
        "text_config": {"hidden_size": N, "intermediate_size": I, "num_attention_heads": 12,
                        "num_hidden_layers": 1},
        "vision_config": {"hidden_size": N, "intermediate_size": I, "num_hidden_layers": 1},
    });
    write(&d, &ts, &cfg);
    let (text, stderr) = certify(&d, &[]);
    same_bound(&text, &bert0, "clip text");
    assert_eq!(
        text["parameters"]["stack"],
        json!({"name": "text", "stacks": ["text", "vision"], "by_flag": false})
    );
    let notice: Vec<&str> = stderr.lines().filter(|l| l.contains("stacks")).collect();
    assert_eq!(notice.len(), 1, "{stderr}");
    assert!(
        notice[0].contains("reading 'text'") && notice[0].contains("--stack"),
        "{stderr}"
    );
    let ext = extensions(&text);
    assert_eq!(ext.len(), 1, "{ext:?}");
    assert!(ext[0].contains("'quick_gelu'"), "{}", ext[0]);
    let (vision, stderr) = certify(&d, &["--stack", "vision"]);
    same_bound(&vision, &bert1, "clip vision");
    assert_eq!(vision["parameters"]["stack"]["by_flag"], json!(true));
    assert!(!stderr.contains("reading"), "{stderr}");
    // The vision tower's 12 heads are CLIPVisionConfig's default.
    assert_eq!(vision["model"]["heads"], 12);
    // verify reads the stack the certificate names, and no other.
    let out = verify(&vision, &d, "clip-vision");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut forged = vision.clone();
    forged["parameters"]["stack"]["name"] = json!("text");
    assert!(!verify(&forged, &d, "clip-forged").status.success());
    // inspect shows the same stack.
    let j = ok_json(&run(&[
        "inspect",
        d.to_str().unwrap(),
        "--stack",
        "vision",
        "--json",
    ]));
    assert_eq!(j["layout"], "ClipVision");
    assert_eq!(j["stack"]["name"], "vision");
    // Stacks the model type does not have: one line listing its stacks.
    let ds = d.to_str().unwrap();
    assert_bad(
        &["certify", ds, "--stack", "decoder"],
        &["--stack 'decoder'", "'clip'", "text, vision"],
    );
    assert_bad(
        &["inspect", ds, "--stack", "x\u{1b}[31m"],
        &["--stack 'x\\u{1b}[31m'", "text, vision"],
    );
    let b = bert0["model"]["path"].as_str().unwrap();
    assert_bad(
        &["certify", b, "--stack", "encoder"],
        &["'bert' has one stack", "clip"],
    );

    // SigLIP's vision tower alone: GELU (tanh), the paper's bound exactly.
    let s = tmpdir("siglip-vision");
    write(
        &s,
        &named("vision_model.encoder.layers.0.", &CLIP_NAMES, &layer(1)),
        &json!({"model_type": "siglip_vision_model", "hidden_size": N, "intermediate_size": I,
                "num_attention_heads": 12, "num_hidden_layers": 1}),
    );
    let (c, stderr) = certify(&s, &[]);
    same_bound(&c, &bert1, "siglip vision");
    assert_eq!(c["extensions"], json!([]));
    assert_eq!(
        c["parameters"]["stack"],
        json!({"name": "vision", "stacks": ["vision"], "by_flag": false})
    );
    assert!(
        !stderr.contains("reading"),
        "one stack, nothing to say: {stderr}"
    );
}

/// T5 (v1.0: `wi`, ReLU) with MiniLM's layer 0 as its encoder and layer 1
/// as its decoder's self-attention and feed-forward: the encoder is BERT's
/// certificate (a position-bias extension and the ReLU `L_phi` note); the
/// decoder (`--stack decoder`) states BERT's layer-1 spectra without a
/// bound (cross-attention), and verifies against the weights. A gated T5
/// encoder (`wi_0`, `wi_1`; flan-T5) of 6 heads of `d_kv` 32 (not
/// `d_model / num_heads` = 64) is the LLaMA certificate of those heads.
#[test]
fn t5_encoder_and_decoder_with_d_kv() {
    use specbound::arch::families::CROSS_ATTENTION;
    let (bert0, bert1) = (bert_reference("t5", 0), bert_reference("t5", 1));
    let attn = [
        "layer.0.SelfAttention.q",
        "layer.0.SelfAttention.k",
        "layer.0.SelfAttention.v",
        "layer.0.SelfAttention.o",
    ];
    let d = tmpdir("t5");
    let (w0, w1) = (layer(0), layer(1));
    let mut enc = attn.to_vec();
    enc.extend(["layer.1.DenseReluDense.wi", "layer.1.DenseReluDense.wo"]);
    let mut ts = named("encoder.block.0.", &enc, &w0);
    let mut dec = attn.to_vec();
    dec.extend(["layer.2.DenseReluDense.wi", "layer.2.DenseReluDense.wo"]);
    ts.extend(named("decoder.block.0.", &dec, &w1));
    ts.extend(named(
        "decoder.block.0.",
        &[
            "layer.1.EncDecAttention.q",
            "layer.1.EncDecAttention.k",
            "layer.1.EncDecAttention.v",
            "layer.1.EncDecAttention.o",
        ],
        &w0,
    ));
    let cfg = json!({"model_type": "t5", "d_model": N, "num_heads": 12, "d_kv": DH, "d_ff": I,
                     "num_layers": 1, "num_decoder_layers": 1, "feed_forward_proj": "relu"});
    write(&d, &ts, &cfg);
    let (c, stderr) = certify(&d, &[]);
    same_bound(&c, &bert0, "t5 encoder");
    assert!(stderr.contains("reading 'encoder'"), "{stderr}");
    let ext = extensions(&c);
    assert_eq!(ext.len(), 2, "{ext:?}");
    assert!(
        ext[0].contains("position bias") && ext[1].contains("'relu'"),
        "{ext:?}"
    );
    let (c, _) = certify(&d, &["--stack", "decoder"]);
    no_bound(&c, &bert1, CROSS_ATTENTION, "t5 decoder");
    assert_eq!(c["parameters"]["stack"]["name"], "decoder");
    let out = verify(&c, &d, "t5-decoder");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j = ok_json(&run(&[
        "inspect",
        d.to_str().unwrap(),
        "--stack",
        "decoder",
        "--json",
    ]));
    assert_eq!(j["layout"], "T5Decoder");
    assert!(j["bound"].as_str().unwrap().contains("cross-attention"));

    // Gated, 6 heads of d_kv 32: LLaMA's certificate of the same heads.
    let heads = 6;
    let q = heads * DH;
    let attn_w = [
        top(&w0[0], q),
        top(&w0[1], q),
        top(&w0[2], q),
        left(&w0[3], q),
    ];
    let ffn_w = [w0[4].clone(), w0[4].clone(), w0[5].clone()];
    let l = tmpdir("t5-llama");
    let mut lt = named(
        "model.layers.0.",
        &[
            "self_attn.q_proj",
            "self_attn.k_proj",
            "self_attn.v_proj",
            "self_attn.o_proj",
        ],
        &attn_w,
    );
    lt.extend(named(
        "model.layers.0.",
        &["mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"],
        &ffn_w,
    ));
    write(
        &l,
        &lt,
        &json!({"model_type": "llama", "num_hidden_layers": 1, "hidden_size": N,
                "num_attention_heads": heads, "num_key_value_heads": heads, "head_dim": DH,
                "intermediate_size": I}),
    );
    let llama = certify(&l, &[]).0;
    let g = tmpdir("t5-gated");
    let mut gt = named("encoder.block.0.", &attn, &attn_w);
    gt.extend(named(
        "encoder.block.0.",
        &[
            "layer.1.DenseReluDense.wi_0",
            "layer.1.DenseReluDense.wi_1",
            "layer.1.DenseReluDense.wo",
        ],
        &ffn_w,
    ));
    write(
        &g,
        &gt,
        &json!({"model_type": "t5", "d_model": N, "num_heads": heads, "d_kv": DH, "d_ff": I,
                "num_layers": 1, "feed_forward_proj": "gated-gelu", "dense_act_fn": "gelu_new",
                "is_gated_act": true}),
    );
    let (c, _) = certify(&g, &[]);
    same_bound(&c, &llama, "t5 gated encoder");
    assert_eq!(
        (c["model"]["heads"].clone(), c["model"]["head_dim"].clone()),
        (json!(6), json!(32))
    );
    let ext = extensions(&c);
    assert_eq!(
        ext.len(),
        2,
        "gated and position bias, no L_phi note: {ext:?}"
    );
    assert!(
        ext[0].contains("[W_gate, W_up]") && ext[1].contains("position bias"),
        "{ext:?}"
    );
}

const BART_NAMES: [&str; 6] = [
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn.out_proj",
    "fc1",
    "fc2",
];

/// BART (MiniLM's layer 0 as its encoder, layer 1 as its decoder, beside
/// the decoder's `encoder_attn`) and Whisper's encoder: the encoders are
/// BERT's certificate, the paper's bound exactly; BART's decoder states
/// BERT's layer-1 spectra without a bound, and verifies against the weights.
#[test]
fn bart_encoder_and_decoder_and_whisper_encoder() {
    use specbound::arch::families::CROSS_ATTENTION;
    let (bert0, bert1) = (bert_reference("bart", 0), bert_reference("bart", 1));
    let keys = |mt: &str| {
        json!({"model_type": mt, "d_model": N, "encoder_layers": 1, "decoder_layers": 1,
               "encoder_attention_heads": 12, "decoder_attention_heads": 12,
               "encoder_ffn_dim": I, "decoder_ffn_dim": I, "activation_function": "gelu"})
    };
    let d = tmpdir("bart");
    let mut ts = named("model.encoder.layers.0.", &BART_NAMES, &layer(0));
    ts.extend(named("model.decoder.layers.0.", &BART_NAMES, &layer(1)));
    ts.extend(named(
        "model.decoder.layers.0.",
        &[
            "encoder_attn.q_proj",
            "encoder_attn.k_proj",
            "encoder_attn.v_proj",
            "encoder_attn.out_proj",
        ],
        &layer(0),
    ));
    write(&d, &ts, &keys("bart"));
    let (c, stderr) = certify(&d, &[]);
    same_bound(&c, &bert0, "bart encoder");
    assert_eq!(c["extensions"], json!([]));
    assert!(stderr.contains("'bart' has 2 stacks"), "{stderr}");
    let (c, _) = certify(&d, &["--stack", "decoder"]);
    no_bound(&c, &bert1, CROSS_ATTENTION, "bart decoder");
    let out = verify(&c, &d, "bart-decoder");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The decoder's certificate without its stack is another model's reading.
    let mut forged = c.clone();
    forged["parameters"]
        .as_object_mut()
        .unwrap()
        .remove("stack");
    assert!(!verify(&forged, &d, "bart-unstacked").status.success());

    let w = tmpdir("whisper");
    write(
        &w,
        &named("model.encoder.layers.0.", &BART_NAMES, &layer(0)),
        &keys("whisper"),
    );
    let (c, _) = certify(&w, &[]);
    same_bound(&c, &bert0, "whisper encoder");
    assert_eq!(c["model"]["architecture"], "whisper");
    let j = ok_json(&run(&["inspect", w.to_str().unwrap(), "--json"]));
    assert_eq!(j["layout"], "WhisperEncoder");
    assert!(j["bound"].as_str().unwrap().contains("applies exactly"));
}

/// Multimodal Gemma 3 (`gemma3`): its text stack under
/// `language_model.model.` (facts in `text_config`), beside a SigLIP vision
/// tower whose tensors also end in `layers.0.self_attn.q_proj.weight`,
/// states exactly the spectra of the same layer as a `gemma3_text` model,
/// without a bound (QK-norm); newer transformers' `model.language_model.`
/// prefix is read too.
#[test]
fn multimodal_gemma3_is_its_text_model() {
    use specbound::arch::families::QK_NORM;
    let w = layer(0);
    let text = |p: &str| {
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
            &[
                w[0].clone(),
                w[1].clone(),
                w[2].clone(),
                w[3].clone(),
                w[4].clone(),
                w[4].clone(),
                w[5].clone(),
            ],
        );
        ts.push((format!("{p}self_attn.q_norm.weight"), gain(DH)));
        ts.push((format!("{p}self_attn.k_norm.weight"), gain(DH)));
        ts.push((format!("{p}pre_feedforward_layernorm.weight"), gain(N)));
        ts
    };
    let facts = json!({"num_hidden_layers": 1, "hidden_size": N, "num_attention_heads": 12,
                       "num_key_value_heads": 12, "head_dim": DH, "intermediate_size": I});
    let r = tmpdir("gemma3-text");
    let mut flat = facts.clone();
    flat["model_type"] = json!("gemma3_text");
    write(&r, &text("model.layers.0."), &flat);
    let reference = certify(&r, &[]).0;
    assert_eq!(reference["bound_absent"].as_str(), Some(QK_NORM));
    for prefix in ["language_model.model.", "model.language_model."] {
        let d = tmpdir(&format!("gemma3-{prefix}"));
        let vision = prefix.replace("language_model.", "vision_tower.");
        let mut ts = named(
            &format!("{vision}vision_model.encoder.layers.0."),
            &CLIP_NAMES,
            &layer(1),
        );
        ts.extend(text(&format!("{prefix}layers.0.")));
        let mut tc = facts.clone();
        tc["model_type"] = json!("gemma3_text");
        write(
            &d,
            &ts,
            &json!({"model_type": "gemma3", "text_config": tc,
                    "vision_config": {"model_type": "siglip_vision_model", "hidden_size": N}}),
        );
        let (c, _) = certify(&d, &[]);
        assert_eq!(c["spectra"], reference["spectra"], "{prefix}");
        assert_eq!(c["bound_absent"].as_str(), Some(QK_NORM));
        assert_eq!(c["model"]["tensor_prefix"], format!("{prefix}"));
        assert_eq!(
            c["parameters"]["stack"],
            json!({"name": "text", "stacks": ["text", "vision"], "by_flag": false})
        );
        let out = verify(&c, &d, &format!("gemma3-{prefix}"));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
