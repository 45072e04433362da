//! Mixture-of-experts families (Mixtral, Qwen2-MoE, Qwen3-MoE), built by
//! re-emitting known matrices (the real MiniLM weights, sliced into
//! expert-sized feed-forward blocks) in each family's tensor names and
//! config keys, as transformers names them: every expert's certified
//! spectra must equal, key for key, the LLaMA-layout certificate's spectra
//! of the same matrices, no bound may be computed (top-k routing), and
//! `verify`, `diff` and `inspect` must read the experts.

mod common;

use common::tmpdir;

use common::{ok_json, root, run};
use serde_json::{json, Value};
use specbound::io::checkpoint::Checkpoint;
use specbound::matrix::DenseMatrix;
use std::path::{Path, PathBuf};

/// MiniLM's hidden size, heads and head dimension.
const N: usize = 384;
const H: usize = 12;
const DH: usize = 32;
/// The width of every feed-forward block here (a quarter of MiniLM's 1536).
const W: usize = 384;
/// Distinct feed-forward blocks: reference layer `b` holds block `b`.
const BLOCKS: usize = 4;

fn minilm(name: &str) -> DenseMatrix {
    let ck = Checkpoint::open(&root().join("data/all-MiniLM-L6-v2")).unwrap();
    ck.read(&format!("encoder.layer.{name}.weight"))
        .unwrap()
        .matrix
}

/// `m[r0..r0 + nr, c0..c0 + nc]`: stored numbers moved, none computed.
fn block(m: &DenseMatrix, r0: usize, nr: usize, c0: usize, nc: usize) -> DenseMatrix {
    let mut data = Vec::with_capacity(nr * nc);
    for i in r0..r0 + nr {
        data.extend_from_slice(&m.data[i * m.cols + c0..i * m.cols + c0 + nc]);
    }
    DenseMatrix {
        rows: nr,
        cols: nc,
        data,
    }
}

/// The attention of MiniLM layer 0 as LLaMA's `q, k, v, o` (`[out, in]`).
fn attention() -> [DenseMatrix; 4] {
    [
        "0.attention.self.query",
        "0.attention.self.key",
        "0.attention.self.value",
        "0.attention.output.dense",
    ]
    .map(minilm)
}

/// Feed-forward block `b` as `[gate, up, down]` (`[out, in]`): gate and
/// up are rows `b W .. (b + 1) W` of MiniLM layers 0's and 1's
/// `intermediate.dense`, down the same columns of layer 0's `output.dense`;
/// the blocks are distinct known matrices.
fn ffn(b: usize) -> [DenseMatrix; 3] {
    [
        block(&minilm("0.intermediate.dense"), b * W, W, 0, N),
        block(&minilm("1.intermediate.dense"), b * W, W, 0, N),
        block(&minilm("0.output.dense"), 0, N, b * W, W),
    ]
}

fn attention_tensors(l: usize) -> Vec<(String, DenseMatrix)> {
    let names = ["q_proj", "k_proj", "v_proj", "o_proj"];
    names
        .iter()
        .zip(attention())
        .map(|(n, m)| (format!("model.layers.{l}.self_attn.{n}.weight"), m))
        .collect()
}

/// The three tensors of block `b` under the names `pats` (`{l}`, `{e}`).
fn ffn_tensors(pats: [&str; 3], l: usize, e: usize, b: usize) -> Vec<(String, DenseMatrix)> {
    pats.iter()
        .zip(ffn(b))
        .map(|(p, m)| {
            let name = p
                .replace("{l}", &l.to_string())
                .replace("{e}", &e.to_string());
            (format!("model.layers.{l}.{name}.weight"), m)
        })
        .collect()
}

const LLAMA_MLP: [&str; 3] = ["mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"];
const QWEN_EXPERT: [&str; 3] = [
    "mlp.experts.{e}.gate_proj",
    "mlp.experts.{e}.up_proj",
    "mlp.experts.{e}.down_proj",
];

/// A `rows x N` matrix of small dyadic numbers (a router, exact in f32).
fn router(rows: usize) -> DenseMatrix {
    DenseMatrix {
        rows,
        cols: N,
        data: (0..rows * N).map(|i| (i % 7) as f64 / 8.0 - 0.25).collect(),
    }
}

fn write(dir: &Path, tensors: &[(String, DenseMatrix)], config: Value) {
    let refs: Vec<(String, &DenseMatrix)> = tensors.iter().map(|(n, m)| (n.clone(), m)).collect();
    common::write_safetensors(&dir.join("model.safetensors"), &refs, "F32");
    std::fs::write(
        dir.join("config.json"),
        serde_json::to_vec(&config).unwrap(),
    )
    .unwrap();
}

fn config(model_type: &str, layers: usize, extra: Value) -> Value {
    let mut c = json!({"model_type": model_type, "num_hidden_layers": layers, "hidden_size": N,
        "num_attention_heads": H, "num_key_value_heads": H, "head_dim": DH,
        "intermediate_size": W, "num_experts_per_tok": 2});
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

/// One Mixtral layer: the attention, expert `e` holding block `blocks[e]`
/// (`w1` gate, `w3` up, `w2` down), and the router.
fn mixtral_tensors<const E: usize>(blocks: [usize; E]) -> Vec<(String, DenseMatrix)> {
    let mut ts = attention_tensors(0);
    for (e, b) in blocks.into_iter().enumerate() {
        let p = "block_sparse_moe.experts.{e}";
        let names = [format!("{p}.w1"), format!("{p}.w3"), format!("{p}.w2")];
        ts.extend(ffn_tensors(names.each_ref().map(|s| s.as_str()), 0, e, b));
    }
    ts.push((
        "model.layers.0.block_sparse_moe.gate.weight".into(),
        router(E),
    ));
    ts
}

fn mixtral_config(experts: usize) -> Value {
    config("mixtral", 1, json!({"num_local_experts": experts}))
}

fn certify(path: &Path) -> Value {
    ok_json(&run(&["certify", path.to_str().unwrap(), "--json"]))
}

/// The LLaMA-layout reference: layer `b` is the attention and block `b`.
/// Its matrix entries, by (layer, type, head).
fn reference() -> Vec<Value> {
    let d = tmpdir("llama");
    let mut ts = Vec::new();
    for b in 0..BLOCKS {
        ts.extend(attention_tensors(b));
        ts.extend(ffn_tensors(LLAMA_MLP, b, 0, b));
    }
    write(&d, &ts, config("llama", BLOCKS, json!({})));
    let c = certify(&d);
    c["matrices"].as_array().unwrap().clone()
}

/// The reference entry of `type` (head `head`) of layer `b`, with `layer`
/// set to `layer` and `expert` to `expert`: what the MoE certificate must
/// state, key for key (the spectral keys of a matrix entry, in order).
fn expected(
    reference: &[Value],
    b: usize,
    kind: &str,
    head: i64,
    layer: usize,
    expert: Option<Value>,
) -> Value {
    let m = reference
        .iter()
        .find(|m| m["layer"] == b && m["type"] == kind && m["head"] == head)
        .unwrap_or_else(|| panic!("reference layer {b} {kind} {head}"))
        .as_object()
        .unwrap();
    let mut o = serde_json::Map::new();
    for k in common::SPECTRAL_KEYS {
        o.insert(k.to_string(), m[k].clone());
        if k == "head" {
            if let Some(e) = &expert {
                o.insert("expert".into(), e.clone());
            }
        }
    }
    o["layer"] = json!(layer);
    Value::Object(o)
}

/// The spectra a certificate of layers `layout` must state: layer `l` has
/// the attention (reference layer 0's) and the blocks `blocks[l]` with
/// their experts (`None`: a dense layer).
fn expected_spectra(reference: &[Value], layout: &[Vec<(usize, Option<Value>)>]) -> Vec<Value> {
    let mut v = Vec::new();
    for (l, blocks) in layout.iter().enumerate() {
        for kind in ["QK", "V_tilde"] {
            for h in 0..H as i64 {
                v.push(expected(reference, 0, kind, h, l, None));
            }
        }
        for kind in ["M_in", "M_out"] {
            for (b, e) in blocks {
                v.push(expected(reference, *b, kind, -1, l, e.clone()));
            }
        }
    }
    v
}

fn assert_no_bound(c: &Value, reason: &str, what: &str) {
    assert_eq!(c["version"], 3, "{what}");
    assert!(c.get("bounds").is_none(), "{what}: a bound was computed");
    assert_eq!(c["bound_absent"].as_str(), Some(reason), "{what}");
    assert_eq!(c["matrices"], json!([]), "{what}");
    assert_eq!(c["layers"], json!([]), "{what}");
    assert_eq!(c["extensions"], json!([]), "{what}");
}

fn write_value(dir: &Path, name: &str, v: &Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
    p
}

/// `(exit code, stdout, stderr)`, never a panic.
fn code(args: &[&str]) -> (Option<i32>, String, String) {
    let out = run(args);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        err,
    )
}

/// Mixtral (one layer, three experts of distinct known matrices), Qwen2-MoE
/// (a dense layer by `mlp_only_layers`, then a sparse layer of two experts
/// and a shared expert) and Qwen3-MoE (QK-norm, two experts): each expert's
/// spectra are the LLaMA-layout certificate's spectra of the same matrices,
/// key for key, in certificate order; no bound is computed, for the
/// family's reason; the certificates match the published schema, verify
/// (alone and against the weights) and diff, and a moved expert spectrum
/// fails `verify --model`, named by its expert.
#[test]
fn moe_families_certify_every_expert_as_the_llama_layout_without_a_bound() {
    let reference = reference();
    let schema: Value = serde_json::from_slice(
        &std::fs::read(root().join("docs/certificate.schema.json")).unwrap(),
    )
    .unwrap();
    let out = tmpdir("out");

    // Mixtral: block_sparse_moe, w1 gate, w3 up, w2 down.
    let mixtral = tmpdir("mixtral");
    write(&mixtral, &mixtral_tensors([0, 1, 2]), mixtral_config(3));
    let c = certify(&mixtral);
    assert_eq!(c["model"]["architecture"], "mixtral");
    assert_no_bound(&c, specbound::arch::families::MOE, "mixtral");
    assert_eq!(
        c["model"]["experts"],
        json!([{"experts": 3, "shared": false}])
    );
    let want = expected_spectra(&reference, &[(0..3).map(|e| (e, Some(json!(e)))).collect()]);
    assert_eq!(c["spectra"].as_array().unwrap(), &want, "mixtral");
    common::schema::validate(&schema, &c).unwrap();
    let mixtral_cert = c;

    // Qwen2-MoE: layer 0 dense (mlp_only_layers), layer 1 two experts and a shared one.
    let qwen2 = tmpdir("qwen2moe");
    let mut ts = attention_tensors(0);
    ts.extend(ffn_tensors(LLAMA_MLP, 0, 0, 0));
    ts.extend(attention_tensors(1));
    for e in 0..2 {
        ts.extend(ffn_tensors(QWEN_EXPERT, 1, e, e + 1));
    }
    ts.extend(ffn_tensors(
        [
            "mlp.shared_expert.gate_proj",
            "mlp.shared_expert.up_proj",
            "mlp.shared_expert.down_proj",
        ],
        1,
        0,
        3,
    ));
    ts.push(("model.layers.1.mlp.gate.weight".into(), router(2)));
    ts.push((
        "model.layers.1.mlp.shared_expert_gate.weight".into(),
        router(1),
    ));
    write(
        &qwen2,
        &ts,
        config(
            "qwen2_moe",
            2,
            json!({"num_experts": 2, "moe_intermediate_size": W,
                   "shared_expert_intermediate_size": W, "decoder_sparse_step": 1,
                   "mlp_only_layers": [0]}),
        ),
    );
    let c = certify(&qwen2);
    assert_eq!(c["model"]["architecture"], "qwen2_moe");
    assert_no_bound(&c, specbound::arch::families::MOE, "qwen2_moe");
    assert_eq!(
        c["model"]["experts"],
        json!([{"experts": 0, "shared": false}, {"experts": 2, "shared": true}])
    );
    let want = expected_spectra(
        &reference,
        &[
            vec![(0, None)],
            vec![
                (1, Some(json!(0))),
                (2, Some(json!(1))),
                (3, Some(json!("shared"))),
            ],
        ],
    );
    assert_eq!(c["spectra"].as_array().unwrap(), &want, "qwen2_moe");
    common::schema::validate(&schema, &c).unwrap();
    let qwen2_cert = c;

    // Qwen3-MoE: QK-norm beside two experts; both reasons.
    let qwen3 = tmpdir("qwen3moe");
    let mut ts = attention_tensors(0);
    for e in 0..2 {
        ts.extend(ffn_tensors(QWEN_EXPERT, 0, e, 2 - e));
    }
    let gain = DenseMatrix {
        rows: 1,
        cols: DH,
        data: (0..DH).map(|i| 1.0 + i as f64 / 64.0).collect(),
    };
    for n in ["q_norm", "k_norm"] {
        ts.push((format!("model.layers.0.self_attn.{n}.weight"), gain.clone()));
    }
    ts.push(("model.layers.0.mlp.gate.weight".into(), router(2)));
    write(
        &qwen3,
        &ts,
        config(
            "qwen3_moe",
            1,
            json!({"num_experts": 2, "moe_intermediate_size": W}),
        ),
    );
    let c = certify(&qwen3);
    assert_no_bound(&c, specbound::arch::families::MOE_QK_NORM, "qwen3_moe");
    let want = expected_spectra(
        &reference,
        &[vec![(2, Some(json!(0))), (1, Some(json!(1)))]],
    );
    assert_eq!(c["spectra"].as_array().unwrap(), &want, "qwen3_moe");
    common::schema::validate(&schema, &c).unwrap();

    // verify (alone and against the weights) and diff accept them.
    let g = write_value(&out, "mixtral.json", &mixtral_cert);
    let g = g.to_str().unwrap();
    let (rc, o, e) = code(&["verify", g]);
    assert_eq!(rc, Some(0), "{o}{e}");
    let (rc, o, e) = code(&["verify", g, "--model", mixtral.to_str().unwrap()]);
    assert_eq!(rc, Some(0), "{o}{e}");
    assert!(o.contains("hashes and weights"), "{o}");
    let q = write_value(&out, "qwen2moe.json", &qwen2_cert);
    let (rc, o, e) = code(&[
        "verify",
        q.to_str().unwrap(),
        "--model",
        qwen2.to_str().unwrap(),
    ]);
    assert_eq!(rc, Some(0), "{o}{e}");
    let (rc, o, e) = code(&["diff", g, g]);
    assert_eq!(rc, Some(0), "{o}{e}");
    // Two shards merged: the unsharded certificate, experts and all.
    let parts: Vec<String> = (1..=2)
        .map(|k| {
            let p = out.join(format!("part-{k}.json")).display().to_string();
            let shard = format!("{k}/2");
            let (rc, o, e) = code(&[
                "certify",
                qwen2.to_str().unwrap(),
                "--shard",
                &shard,
                "--out",
                &p,
            ]);
            assert_eq!(rc, Some(0), "{o}{e}");
            p
        })
        .collect();
    let merged = out.join("merged.json");
    let (rc, o, e) = code(&[
        "merge",
        &parts[0],
        &parts[1],
        "--out",
        merged.to_str().unwrap(),
    ]);
    assert_eq!(rc, Some(0), "{o}{e}");
    let m: Value = serde_json::from_slice(&std::fs::read(&merged).unwrap()).unwrap();
    assert_eq!(m, qwen2_cert);
    // An expert's spectrum moved: verify against the weights fails, and
    // diff names the expert.
    let mut bad = mixtral_cert.clone();
    let k = 2 * H + 1; // layer 0 expert 1 M_in
    assert_eq!(bad["spectra"][k]["expert"], 1);
    bad["spectra"][k]["singular_values"][0] = json!({"lo": 1e6, "hi": 1e6});
    bad["spectra"][k]["spectral_norm"] = json!({"lo": 1e6, "hi": 1e6});
    let p = write_value(&out, "moved.json", &bad);
    let (rc, _, e) = code(&[
        "verify",
        p.to_str().unwrap(),
        "--model",
        mixtral.to_str().unwrap(),
    ]);
    assert_eq!(rc, Some(1), "{e}");
    // diff names the expert: the same Mixtral with expert 1 holding block 3.
    let other = tmpdir("mixtral-other");
    write(&other, &mixtral_tensors([0, 3, 2]), mixtral_config(3));
    let p = write_value(&out, "other.json", &certify(&other));
    let (rc, o, e) = code(&["diff", g, p.to_str().unwrap()]);
    assert_ne!(rc, Some(0), "{o}{e}");
    assert!(o.contains("layer 0 expert 1 M_in"), "{o}");
    assert!(!o.contains("expert 0") && !o.contains("expert 2"), "{o}");
    let (_, o, _) = code(&["diff", g, p.to_str().unwrap(), "--json"]);
    assert!(o.replace([' ', '\n'], "").contains("\"expert\":1"), "{o}");
}

/// A certificate's experts are read strictly: an expert on an attention
/// matrix, an unknown expert, experts that disagree with `model.experts`
/// or with the layer count, and experts in a certificate with a bound are
/// each refused in one line (exit 2); old certificates (no `expert`, no
/// `model.experts`) read as before.
#[test]
fn certificate_experts_are_validated_and_old_certificates_read_unchanged() {
    let d = tmpdir("strict");
    let mut ts = attention_tensors(0);
    for e in 0..2 {
        ts.extend(ffn_tensors(QWEN_EXPERT, 0, e, e));
    }
    ts.push((
        "model.layers.0.mlp.shared_expert_gate.weight".into(),
        router(1),
    ));
    write(
        &d,
        &ts,
        config(
            "qwen2_moe",
            1,
            json!({"num_experts": 2, "moe_intermediate_size": W}),
        ),
    );
    // Qwen2-MoE without the shared expert's tensors: refused, naming the tensor.
    let (rc, _, e) = code(&["certify", d.to_str().unwrap()]);
    assert_eq!(rc, Some(2), "{e}");
    assert!(
        e.contains("model.layers.0.mlp.shared_expert.gate_proj.weight"),
        "{e}"
    );
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    // As Qwen3-MoE (no shared expert) it certifies.
    let mut cfg = config("qwen3_moe", 1, json!({"num_experts": 2}));
    cfg["moe_intermediate_size"] = json!(W);
    std::fs::write(d.join("config.json"), serde_json::to_vec(&cfg).unwrap()).unwrap();
    let c = certify(&d);
    let dir = tmpdir("strict-out");
    for (what, edit) in [
        ("attention expert", json!({"at": 0, "expert": 0})),
        ("unknown expert", json!({"at": 2 * H, "expert": "some"})),
        ("negative expert", json!({"at": 2 * H, "expert": -1})),
        ("wrong expert", json!({"at": 2 * H, "expert": 1})),
        ("missing expert", json!({"at": 2 * H, "expert": null})),
    ] {
        let mut bad = c.clone();
        let at = edit["at"].as_u64().unwrap() as usize;
        if edit["expert"].is_null() {
            bad["spectra"][at].as_object_mut().unwrap().remove("expert");
        } else {
            bad["spectra"][at]["expert"] = edit["expert"].clone();
        }
        let p = write_value(&dir, "bad.json", &bad);
        let (rc, _, e) = code(&["verify", p.to_str().unwrap()]);
        assert_eq!(rc, Some(2), "{what}: {e}");
        assert_eq!(e.trim_end().lines().count(), 1, "{what}: {e}");
    }
    for (what, experts) in [
        (
            "two layers listed",
            json!([{"experts": 2, "shared": false}, {"experts": 2, "shared": false}]),
        ),
        ("three experts", json!([{"experts": 3, "shared": false}])),
        (
            "unknown key",
            json!([{"experts": 2, "shared": false, "k": 1}]),
        ),
    ] {
        let mut bad = c.clone();
        bad["model"]["experts"] = experts;
        let p = write_value(&dir, "bad.json", &bad);
        let (rc, _, e) = code(&["verify", p.to_str().unwrap()]);
        assert_eq!(rc, Some(2), "{what}: {e}");
        assert_eq!(e.trim_end().lines().count(), 1, "{what}: {e}");
    }
    // A certificate with a bound that states experts.
    let mut bert = certify(&root().join("data/all-MiniLM-L6-v2"));
    assert!(bert["model"].get("experts").is_none());
    assert!(bert["matrices"][0].get("expert").is_none());
    let p = write_value(&dir, "bert.json", &bert);
    let (rc, o, e) = code(&["verify", p.to_str().unwrap()]);
    assert_eq!(rc, Some(0), "{o}{e}");
    let layers = bert["model"]["layers"].as_u64().unwrap() as usize;
    bert["model"]["experts"] = json!(vec![json!({"experts": 0, "shared": false}); layers]);
    let p = write_value(&dir, "bert-experts.json", &bert);
    let (rc, _, e) = code(&["verify", p.to_str().unwrap()]);
    assert_eq!(rc, Some(2), "{e}");
    assert!(e.contains("model.experts"), "{e}");
}

/// `inspect` shows every expert's matrices (text and JSON), the experts
/// line and that no bound applies; without config.json Mixtral is
/// recognised by its router and its experts counted from the tensors; a
/// config that states more experts than are stored, and transformers v5's
/// fused 3-D expert tensors, are refused in one line naming the tensor.
#[test]
fn inspect_shows_the_experts_and_bad_expert_layouts_are_refused() {
    let d = tmpdir("inspect");
    let ts = mixtral_tensors([0, 1]);
    write(&d, &ts, mixtral_config(2));
    let j = ok_json(&run(&["inspect", d.to_str().unwrap(), "--json"]));
    assert_eq!(j["layout"], "Mixtral");
    assert!(j["bound"]
        .as_str()
        .unwrap()
        .starts_with("the paper's bound does not apply"));
    assert_eq!(
        j["experts"]["layers"],
        json!([{"experts": 2, "shared": false}])
    );
    assert_eq!(j["experts"]["experts_per_token"], 2);
    let m = j["matrices"].as_array().unwrap();
    assert_eq!(m.len(), 2 * H + 4);
    assert_eq!(m[2 * H + 1]["expert"], 1);
    assert_eq!(m[2 * H + 1]["type"], "M_in");
    assert_eq!(
        m[2 * H + 1]["formed_from"],
        "[model.layers.0.block_sparse_moe.experts.1.w1.weight^T, \
         model.layers.0.block_sparse_moe.experts.1.w3.weight^T] side by side (gated: extension)"
    );
    assert_eq!(m[2 * H + 2]["rows"], W);
    let unmapped: Vec<&str> = j["unmapped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["tensor"].as_str().unwrap())
        .collect();
    assert_eq!(unmapped, ["model.layers.0.block_sparse_moe.gate.weight"]);
    let out = run(&["inspect", d.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("experts: 2 routed experts of width 384"),
        "{text}"
    );
    assert!(text.contains("M_in (expert 1)"), "{text}");
    // No config.json: the router marks Mixtral, the tensors count the experts.
    std::fs::remove_file(d.join("config.json")).unwrap();
    let st = d.join("model.safetensors");
    let j = ok_json(&run(&[
        "inspect",
        st.to_str().unwrap(),
        "--heads",
        "12",
        "--json",
    ]));
    assert_eq!(j["layout"], "Mixtral");
    assert_eq!(
        j["experts"]["layers"],
        json!([{"experts": 2, "shared": false}])
    );
    // More experts stated than stored: the missing tensor is named.
    write(
        &d,
        &ts,
        config("mixtral", 1, json!({"num_local_experts": 3})),
    );
    let (rc, _, e) = code(&["certify", d.to_str().unwrap()]);
    assert_eq!(rc, Some(2), "{e}");
    assert!(
        e.contains("model.layers.0.block_sparse_moe.experts.2.w1.weight"),
        "{e}"
    );
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    // transformers v5: one [E, N, 2I] tensor for the experts' gate and up.
    let v5 = tmpdir("v5");
    let mut ts = attention_tensors(0);
    ts.push(("model.layers.0.mlp.gate.weight".into(), router(2)));
    write(&v5, &ts, config("qwen3_moe", 1, json!({"num_experts": 2})));
    add_3d(
        &v5.join("model.safetensors"),
        "model.layers.0.mlp.experts.gate_up_proj",
        [2, N, 2 * W],
    );
    let (rc, _, e) = code(&["certify", v5.to_str().unwrap()]);
    assert_eq!(rc, Some(2), "{e}");
    assert!(e.contains("model.layers.0.mlp.experts.gate_up_proj"), "{e}");
    assert!(e.contains("fused 3-D expert tensors"), "{e}");
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
}

/// Appends a zero F32 tensor of shape `shape` to the safetensors file `f`
/// (the header rewritten with its offsets).
fn add_3d(f: &Path, name: &str, shape: [usize; 3]) {
    let bytes = std::fs::read(f).unwrap();
    let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut header: serde_json::Map<String, Value> =
        serde_json::from_slice(&bytes[8..8 + len]).unwrap();
    let mut data = bytes[8 + len..].to_vec();
    let start = data.len();
    data.resize(start + 4 * shape.iter().product::<usize>(), 0);
    header.insert(
        name.into(),
        json!({"dtype": "F32", "shape": shape, "data_offsets": [start, data.len()]}),
    );
    let mut h = serde_json::to_vec(&Value::Object(header)).unwrap();
    while h.len() % 8 != 0 {
        h.push(b' ');
    }
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&h);
    out.extend_from_slice(&data);
    std::fs::write(f, out).unwrap();
}

/// docs/certify.md names every mixture-of-experts tensor and config key of
/// the table, and docs/architectures.md has a row for each family.
#[test]
fn every_moe_family_is_documented() {
    let doc = std::fs::read_to_string(root().join("docs/certify.md")).unwrap();
    let arch = std::fs::read_to_string(root().join("docs/architectures.md")).unwrap();
    for spec in specbound::arch::FAMILIES {
        let Some(m) = spec.moe else { continue };
        let mut names: Vec<String> = m
            .experts
            .iter()
            .chain(m.shared.iter().flatten())
            .map(|t| t.replace("{l}", "N").replace("{e}", "e"))
            .collect();
        names.extend(
            m.num_experts
                .iter()
                .chain(m.expert_width)
                .chain(m.shared_width)
                .chain(m.sparse_step.iter())
                .chain(m.dense_layers.iter())
                .map(|k| k.to_string()),
        );
        for name in names {
            assert!(
                doc.contains(&format!("`{name}`")),
                "docs/certify.md: `{name}`"
            );
        }
        assert!(
            arch.contains(&format!("({}) |", spec.layout)),
            "{}",
            spec.layout
        );
    }
}
