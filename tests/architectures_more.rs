//! Falcon (its three `query_key_value` layouts), ALBERT (shared layers),
//! ModernBERT (fused `Wqkv` and GLU `Wi`), DeBERTa (no bound) and DINOv2
//! (LayerScale folded), each built by re-emitting the real MiniLM matrices
//! in the family's tensor names and config keys, must certify as the
//! layout they are equivalent to (`docs/architectures.md`). One-layer
//! models where one layer shows the layout, to keep the suite short.

mod common;

use common::tmpdir;

use common::reemit::{certify, layer, one_dimensional_gains, rows, slice, vstack, write_st, BERT};
use common::{assert_bad, ok_json, run};
use rug::Rational;
use serde_json::{json, Value};
use specbound::arch::families::{DISENTANGLED, ROTARY};
use specbound::matrix::DenseMatrix;
use std::path::Path;

const N: usize = 384;
const I: usize = 1536;
const DH: usize = 32;
const HEADS: usize = 12;

/// The BERT certificate of the given layers (q, k, v, o, ff1, ff2 each),
/// stored as float64 when `f64_dtype` (exact products that float32 cannot hold).
fn bert_of(name: &str, layers: &[Vec<DenseMatrix>], f64_dtype: bool) -> Value {
    let d = tmpdir(name);
    let mut ts = Vec::new();
    for (l, w) in layers.iter().enumerate() {
        for (n, m) in BERT.iter().zip(w) {
            ts.push((format!("encoder.layer.{l}.{n}.weight"), m.clone()));
        }
    }
    write_st(
        &d,
        &ts,
        f64_dtype,
        json!({"model_type": "bert", "num_hidden_layers": layers.len(), "hidden_size": N,
               "num_attention_heads": HEADS, "intermediate_size": I, "hidden_act": "gelu"}),
    );
    certify(&d)
}

/// Key/value rows of `kv` heads, head g being BERT head `g * HEADS / kv`.
fn kv_heads(m: &DenseMatrix, kv: usize) -> DenseMatrix {
    let idx: Vec<usize> = (0..kv)
        .flat_map(|g| (g * (HEADS / kv) * DH)..(g * (HEADS / kv) * DH + DH))
        .collect();
    rows(m, &idx)
}

/// The key/value rows each of the 12 query heads sees when `kv` heads are
/// shared (query head h uses head `h / (HEADS / kv)`): the BERT-layout
/// equivalent of grouped-query attention.
fn shared_kv(m: &DenseMatrix, kv: usize) -> DenseMatrix {
    let idx: Vec<usize> = (0..HEADS)
        .flat_map(|h| {
            let b = (h / (HEADS / kv)) * (HEADS / kv);
            (b * DH)..(b * DH + DH)
        })
        .collect();
    rows(m, &idx)
}

/// `query_key_value` per key/value group: each group's query heads, its
/// key head, its value head (`kv` = 12: per head `[q_h; k_h; v_h]`).
fn per_group(w: &[DenseMatrix], kv: usize) -> DenseMatrix {
    let (k, v) = (kv_heads(&w[1], kv), kv_heads(&w[2], kv));
    let r = HEADS / kv;
    let mut parts = Vec::new();
    for g in 0..kv {
        for j in 0..r {
            parts.push(slice(&w[0], (g * r + j) * DH, DH, false));
        }
        parts.push(slice(&k, g * DH, DH, false));
        parts.push(slice(&v, g * DH, DH, false));
    }
    vstack(&parts)
}

fn extensions(c: &Value) -> Vec<String> {
    c["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap().to_string())
        .collect()
}

fn inspect(d: &Path) -> Value {
    ok_json(&run(&["inspect", d.to_str().unwrap(), "--json"]))
}

/// A Falcon checkpoint of MiniLM layer 0 with `qkv` as `query_key_value`.
fn falcon(name: &str, qkv: DenseMatrix, cfg: Value) -> std::path::PathBuf {
    let w = layer(0);
    let d = tmpdir(name);
    let p = "transformer.h.0.";
    let ts = vec![
        (format!("{p}self_attention.query_key_value.weight"), qkv),
        (format!("{p}self_attention.dense.weight"), w[3].clone()),
        (format!("{p}mlp.dense_h_to_4h.weight"), w[4].clone()),
        (format!("{p}mlp.dense_4h_to_h.weight"), w[5].clone()),
    ];
    write_st(&d, &ts, false, cfg);
    d
}

/// Falcon's three layouts, chosen by `new_decoder_architecture` and
/// `multi_query`, certify as the BERT layout of the same matrices with the
/// shared key/value heads repeated for every query head they serve
/// (matrices and bounds equal); the grouped one also as the LLaMA layout
/// with `num_key_value_heads` (the spectra and norms of QK, V_tilde and
/// M_out equal; LLaMA's `M_in = [W_gate, W_up]` with a zero `W_up` is
/// wider, with the same singular values, whose enclosures meet Falcon's).
/// The extensions follow
/// `parallel_attn` and `alibi`.
#[test]
fn falcon_layouts_certify_as_the_layouts_they_are_equivalent_to() {
    let w = layer(0);
    let base = json!({"model_type": "falcon", "num_hidden_layers": 1, "hidden_size": N,
                      "num_attention_heads": HEADS});
    let with = |extra: Value| {
        let mut c = base.clone();
        c.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        c
    };
    let kv_ref = |name: &str, kv: usize| {
        let mut v = w.clone();
        v[1] = shared_kv(&w[1], kv);
        v[2] = shared_kv(&w[2], kv);
        bert_of(name, &[v], false)
    };

    // Per head: neither flag (multi_query set false; its default is true).
    let per_head_ref = bert_of("falcon-bert", std::slice::from_ref(&w), false);
    let d = falcon(
        "falcon-per-head",
        per_group(&w, HEADS),
        with(json!({"multi_query": false, "parallel_attn": true})),
    );
    let c = certify(&d);
    assert_eq!(c["model"]["architecture"], "falcon");
    assert_eq!(c["matrices"], per_head_ref["matrices"]);
    assert_eq!(c["bounds"], per_head_ref["bounds"]);
    let ext = extensions(&c);
    assert_eq!(ext.len(), 2, "{ext:?}");
    assert_eq!(ext[0], ROTARY);
    assert!(ext[1].starts_with("parallel residual"), "{ext:?}");

    // Multi-query (the default): [Q; K; V] with one key/value head, ALiBi,
    // sequential (parallel_attn false).
    let d = falcon(
        "falcon-mq",
        vstack(&[w[0].clone(), kv_heads(&w[1], 1), kv_heads(&w[2], 1)]),
        with(json!({"alibi": true, "parallel_attn": false})),
    );
    let j = inspect(&d);
    assert_eq!(
        (j["layout"].as_str(), j["kv_heads"].as_u64()),
        (Some("Falcon"), Some(1))
    );
    let c = certify(&d);
    let reference = kv_ref("falcon-mq-bert", 1);
    assert_eq!(c["matrices"], reference["matrices"]);
    assert_eq!(c["bounds"], reference["bounds"]);
    let ext = extensions(&c);
    assert_eq!(ext.len(), 1, "{ext:?}");
    assert!(ext[0].starts_with("a position bias"), "{ext:?}");

    // The new decoder architecture: 4 key/value groups of 3 query heads,
    // always parallel; and the original RefinedWeb (Falcon-40B) config.
    let qkv = per_group(&w, 4);
    let reference = kv_ref("falcon-gqa-bert", 4);
    let new_arch = with(json!({"new_decoder_architecture": true, "num_kv_heads": 4,
                               "parallel_attn": false, "ffn_hidden_size": I}));
    let refinedweb = json!({"model_type": "RefinedWeb", "n_layer": 1, "hidden_size": N,
                            "n_head": HEADS, "n_head_kv": 4, "parallel_attn": true});
    for (name, cfg) in [("falcon-gqa", new_arch), ("falcon-rw", refinedweb)] {
        let d = falcon(name, qkv.clone(), cfg);
        let j = inspect(&d);
        assert_eq!(j["kv_heads"].as_u64(), Some(4), "{name}");
        assert!(j["bound"].as_str().unwrap().contains("as an extension"));
        let c = certify(&d);
        assert_eq!(c["matrices"], reference["matrices"], "{name}");
        assert_eq!(c["bounds"], reference["bounds"], "{name}");
        let ext = extensions(&c);
        assert_eq!(ext.len(), 2, "{name}: {ext:?}");
        assert!(ext[1].starts_with("parallel residual"), "{name}: {ext:?}");
    }
    // The grouped layout against the LLaMA layout of the same matrices.
    let d = tmpdir("falcon-gqa-llama");
    let zero = DenseMatrix {
        rows: I,
        cols: N,
        data: vec![0.0; I * N],
    };
    let p = "model.layers.0.";
    let ts = vec![
        (format!("{p}self_attn.q_proj.weight"), w[0].clone()),
        (format!("{p}self_attn.k_proj.weight"), kv_heads(&w[1], 4)),
        (format!("{p}self_attn.v_proj.weight"), kv_heads(&w[2], 4)),
        (format!("{p}self_attn.o_proj.weight"), w[3].clone()),
        (format!("{p}mlp.gate_proj.weight"), w[4].clone()),
        (format!("{p}mlp.up_proj.weight"), zero),
        (format!("{p}mlp.down_proj.weight"), w[5].clone()),
    ];
    write_st(
        &d,
        &ts,
        false,
        json!({"model_type": "llama", "num_hidden_layers": 1, "hidden_size": N,
               "num_attention_heads": HEADS, "num_key_value_heads": 4, "intermediate_size": I}),
    );
    let llama = certify(&d);
    let (a, b) = (
        reference["matrices"].as_array().unwrap(),
        llama["matrices"].as_array().unwrap(),
    );
    assert_eq!(a.len(), b.len());
    // The spectra and norms of QK, V_tilde and M_out are equal; M_in's
    // enclosures (LLaMA's is 2I wide, computed otherwise) meet, as the
    // exact singular values are the same. The contributions to the bounds
    // differ in their last bits.
    let meet = |x: &Value, y: &Value| {
        let iv = |v: &Value| (v["lo"].as_f64().unwrap(), v["hi"].as_f64().unwrap());
        let ((a, b), (c, d)) = (iv(x), iv(y));
        a <= d && c <= b
    };
    for (x, y) in a.iter().zip(b) {
        for k in ["layer", "head", "type", "rows"] {
            assert_eq!(x[k], y[k]);
        }
        if x["type"] == "M_in" {
            let (sx, sy) = (
                x["singular_values"].as_array().unwrap(),
                y["singular_values"].as_array().unwrap(),
            );
            assert_eq!(sx.len(), sy.len());
            assert!(sx.iter().zip(sy).all(|(p, q)| meet(p, q)));
            assert!(meet(&x["spectral_norm"], &y["spectral_norm"]));
        } else {
            for k in [
                "singular_values",
                "spectral_norm",
                "frobenius_norm",
                "nuclear_norm",
            ] {
                assert_eq!(x[k], y[k], "{} {}: {k}", x["type"], x["head"]);
            }
        }
    }
}

/// ALBERT applies one group's weights at every depth: MiniLM layer 0 as
/// ALBERT's one group applied 3 times certifies as a BERT with that layer
/// repeated 3 times (matrices and bounds equal), with the shared-layers
/// note; 2 groups over 4 depths map depths 0-1 to group 0 and 2-3 to group
/// 1; depths that do not divide into the groups, and a model without
/// config.json, are refused.
#[test]
fn albert_counts_its_shared_layers_at_every_depth() {
    let w = layer(0);
    let emit = |name: &str, groups: &[&Vec<DenseMatrix>], cfg: Value| {
        let d = tmpdir(name);
        let names = [
            "attention.query",
            "attention.key",
            "attention.value",
            "attention.dense",
            "ffn",
            "ffn_output",
        ];
        let mut ts = Vec::new();
        for (g, w) in groups.iter().enumerate() {
            for (n, m) in names.iter().zip(w.iter()) {
                ts.push((
                    format!("albert.encoder.albert_layer_groups.{g}.albert_layers.0.{n}.weight"),
                    m.clone(),
                ));
            }
        }
        // The factorised embedding (E = 128 to N): not a block matrix.
        ts.push((
            "albert.encoder.embedding_hidden_mapping_in.weight".into(),
            slice(&w[4], 0, N, false),
        ));
        write_st(&d, &ts, false, cfg);
        d
    };
    let cfg = |layers: usize, groups: usize| {
        json!({"model_type": "albert", "num_hidden_layers": layers, "hidden_size": N,
               "num_attention_heads": HEADS, "intermediate_size": I, "hidden_act": "gelu",
               "num_hidden_groups": groups, "inner_group_num": 1, "embedding_size": 128})
    };
    let d = emit("albert-1x3", &[&w], cfg(3, 1));
    let c = certify(&d);
    let reference = bert_of("albert-bert", &[w.clone(), w.clone(), w.clone()], false);
    assert_eq!(c["model"]["architecture"], "albert");
    assert_eq!(c["matrices"], reference["matrices"]);
    assert_eq!(c["bounds"], reference["bounds"]);
    let ext = extensions(&c);
    assert_eq!(ext.len(), 1, "{ext:?}");
    assert!(ext[0].starts_with("shared layers (ALBERT)"), "{ext:?}");
    let j = inspect(&d);
    assert_eq!(j["layers"].as_u64(), Some(3));
    assert!(j["bound"].as_str().unwrap().contains("as an extension"));
    let unmapped = j.to_string();
    assert!(unmapped.contains("embedding_hidden_mapping_in"));

    // Two groups over four depths.
    let w1 = layer(1);
    let d = emit("albert-2x2", &[&w, &w1], cfg(4, 2));
    let j = inspect(&d);
    let formed: Vec<(u64, String)> = j["matrices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["type"] == "M_out")
        .map(|m| {
            (
                m["layer"].as_u64().unwrap(),
                m["formed_from"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(formed.len(), 4);
    for (l, f) in &formed {
        let g = if *l < 2 { 0 } else { 1 };
        assert!(
            f.contains(&format!(
                "albert_layer_groups.{g}.albert_layers.0.ffn_output"
            )),
            "{l}: {f}"
        );
    }
    // 3 depths in 2 groups: transformers' map is ambiguous; refused.
    let d = emit("albert-bad", &[&w, &w1], cfg(3, 2));
    assert_bad(
        &["inspect", d.to_str().unwrap()],
        &[
            "config.json",
            "num_hidden_groups",
            "3 layers do not divide into 2 groups",
        ],
    );
    std::fs::remove_file(d.join("config.json")).unwrap();
    assert_bad(
        &[
            "inspect",
            d.join("model.safetensors").to_str().unwrap(),
            "--heads",
            "12",
        ],
        &["cannot be inferred from tensor names", "--layers"],
    );
}

/// ModernBERT's fused `Wqkv` [Q; K; V] and GLU `Wi` [input; gate] (the
/// first half activated) certify as the LLaMA layout of the same matrices
/// (gate_proj the first half, up_proj the second): matrices, bounds and
/// extensions (gated, rotary; GELU on both sides) equal.
#[test]
fn modernbert_certifies_as_the_llama_layout() {
    let w = layer(0);
    // The linear half: W1 with its rows reversed (another I x N matrix).
    let up = rows(&w[4], &(0..I).rev().collect::<Vec<_>>());
    let d = tmpdir("modernbert");
    let p = "model.layers.0.";
    let ts = vec![
        (
            format!("{p}attn.Wqkv.weight"),
            vstack(&[w[0].clone(), w[1].clone(), w[2].clone()]),
        ),
        (format!("{p}attn.Wo.weight"), w[3].clone()),
        (
            format!("{p}mlp.Wi.weight"),
            vstack(&[w[4].clone(), up.clone()]),
        ),
        (format!("{p}mlp.Wo.weight"), w[5].clone()),
    ];
    write_st(
        &d,
        &ts,
        false,
        json!({"model_type": "modernbert", "num_hidden_layers": 1, "hidden_size": N,
               "num_attention_heads": HEADS, "intermediate_size": I,
               "hidden_activation": "gelu", "global_attn_every_n_layers": 3,
               "local_attention": 128}),
    );
    let c = certify(&d);
    let l = tmpdir("modernbert-llama");
    let p = "model.layers.0.";
    let ts = vec![
        (format!("{p}self_attn.q_proj.weight"), w[0].clone()),
        (format!("{p}self_attn.k_proj.weight"), w[1].clone()),
        (format!("{p}self_attn.v_proj.weight"), w[2].clone()),
        (format!("{p}self_attn.o_proj.weight"), w[3].clone()),
        (format!("{p}mlp.gate_proj.weight"), w[4].clone()),
        (format!("{p}mlp.up_proj.weight"), up),
        (format!("{p}mlp.down_proj.weight"), w[5].clone()),
    ];
    write_st(
        &l,
        &ts,
        false,
        json!({"model_type": "llama", "num_hidden_layers": 1, "hidden_size": N,
               "num_attention_heads": HEADS, "intermediate_size": I, "hidden_act": "gelu"}),
    );
    let reference = certify(&l);
    assert_eq!(c["model"]["architecture"], "modernbert");
    assert_eq!(c["matrices"], reference["matrices"]);
    assert_eq!(c["bounds"], reference["bounds"]);
    assert_eq!(c["extensions"], reference["extensions"]);
    assert_eq!(extensions(&c).len(), 2);
    // attn.Wo and mlp.Wo both end in `Wo`: each is its own proxy's tensor.
    let j = inspect(&d);
    let from = |kind: &str| -> Vec<String> {
        j["matrices"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["type"] == kind)
            .map(|m| m["formed_from"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(from("M_out")[0].contains("mlp.Wo.weight"));
    assert!(from("V_tilde").iter().all(|f| f.contains("attn.Wo.weight")));
}

/// DeBERTa-v2 (and v1, whose `in_proj` is fused per head) certify without
/// a bound (disentangled attention): the spectra are exactly the BERT
/// layout's, with the reason and no proxy, bound or extension.
#[test]
fn deberta_states_the_bert_spectra_without_a_bound() {
    let w = layer(0);
    let reference = bert_of("deberta-bert", std::slice::from_ref(&w), false);
    let cfg = |mt: &str| {
        json!({"model_type": mt, "num_hidden_layers": 1, "hidden_size": N,
               "num_attention_heads": HEADS, "intermediate_size": I, "hidden_act": "gelu",
               "relative_attention": true, "pos_att_type": ["p2c", "c2p"]})
    };
    let rest = |p: &str| {
        vec![
            (format!("{p}attention.output.dense.weight"), w[3].clone()),
            (format!("{p}intermediate.dense.weight"), w[4].clone()),
            (format!("{p}output.dense.weight"), w[5].clone()),
        ]
    };
    let p = "deberta.encoder.layer.0.";
    let mut v2 = vec![
        (format!("{p}attention.self.query_proj.weight"), w[0].clone()),
        (format!("{p}attention.self.key_proj.weight"), w[1].clone()),
        (format!("{p}attention.self.value_proj.weight"), w[2].clone()),
    ];
    v2.extend(rest(p));
    let mut v1 = vec![(
        format!("{p}attention.self.in_proj.weight"),
        per_group(&w, HEADS),
    )];
    v1.extend(rest(p));
    for (mt, ts) in [("deberta-v2", v2), ("deberta", v1)] {
        let d = tmpdir(mt);
        write_st(&d, &ts, false, cfg(mt));
        let c = certify(&d);
        assert_eq!(c["model"]["architecture"], mt);
        assert!(c.get("bounds").is_none(), "{mt}: a bound was computed");
        assert_eq!(c["bound_absent"].as_str(), Some(DISENTANGLED));
        assert_eq!(c["extensions"], json!([]));
        let spectra = c["spectra"].as_array().unwrap();
        let matrices = reference["matrices"].as_array().unwrap();
        assert_eq!(spectra.len(), matrices.len());
        for (s, m) in spectra.iter().zip(matrices) {
            for (k, v) in s.as_object().unwrap() {
                assert_eq!(v, &m[k], "{mt}: {k}");
            }
        }
        let j = inspect(&d);
        assert!(j["bound"].as_str().unwrap().contains(DISENTANGLED));
    }
}

/// `m` with row o multiplied by `lambda[o]`, each product checked exact
/// against rationals.
fn scale_rows(m: &DenseMatrix, lambda: &[f64]) -> DenseMatrix {
    let mut out = m.clone();
    for (k, x) in out.data.iter_mut().enumerate() {
        let (a, b) = (*x, lambda[k / m.cols]);
        let p = a * b;
        assert_eq!(
            Rational::from_f64(p).unwrap(),
            Rational::from_f64(a).unwrap() * Rational::from_f64(b).unwrap(),
            "the reference product must be exact"
        );
        *x = p;
    }
    out
}

/// A DINOv2 checkpoint of MiniLM layer 0 with LayerScale vectors `l1`, `l2`.
fn dinov2(name: &str, l1: &[f64], l2: &[f64], f64_dtype: bool) -> std::path::PathBuf {
    let w = layer(0);
    let d = tmpdir(name);
    let p = "encoder.layer.0.";
    let vec_of = |v: &[f64]| DenseMatrix {
        rows: 1,
        cols: v.len(),
        data: v.to_vec(),
    };
    let ts = vec![
        (format!("{p}attention.attention.query.weight"), w[0].clone()),
        (format!("{p}attention.attention.key.weight"), w[1].clone()),
        (format!("{p}attention.attention.value.weight"), w[2].clone()),
        (format!("{p}attention.output.dense.weight"), w[3].clone()),
        (format!("{p}layer_scale1.lambda1"), vec_of(l1)),
        (format!("{p}mlp.fc1.weight"), w[4].clone()),
        (format!("{p}mlp.fc2.weight"), w[5].clone()),
        (format!("{p}layer_scale2.lambda1"), vec_of(l2)),
    ];
    write_st(
        &d,
        &ts,
        f64_dtype,
        json!({"model_type": "dinov2", "num_hidden_layers": 1, "hidden_size": N,
               "num_attention_heads": HEADS, "mlp_ratio": 4, "hidden_act": "gelu",
               "layerscale_value": 1.0, "use_swiglu_ffn": false}),
    );
    one_dimensional_gains(&d, N);
    d
}

/// DINOv2's LayerScale folded into W_O and W_2: with powers of two the
/// certificate is the BERT certificate of the scaled float32 weights; with
/// general float32 vectors, that of the exact products (checked against
/// rationals, stored as float64); `inspect` shows the folding and that the
/// bound applies exactly; float64-stored weights are refused, naming the
/// tensor.
#[test]
fn dinov2_folds_layer_scale_exactly() {
    let w = layer(0);
    let pow2: Vec<f64> = (0..N).map(|o| 2f64.powi(o as i32 % 5 - 2)).collect();
    let pow2b: Vec<f64> = (0..N).map(|o| 2f64.powi(-(o as i32 % 3))).collect();
    let general: Vec<f64> = (0..N)
        .map(|o| f64::from(0.1f32 + o as f32 / 997.0))
        .collect();
    let generalb: Vec<f64> = (0..N)
        .map(|o| f64::from(1e-5f32 * (1 + o) as f32))
        .collect();
    let mut dirs = Vec::new();
    for (name, l1, l2) in [("pow2", &pow2, &pow2b), ("general", &general, &generalb)] {
        let d = dinov2(&format!("dinov2-{name}"), l1, l2, false);
        dirs.push(d.clone());
        let c = certify(&d);
        let mut v = w.clone();
        v[3] = scale_rows(&w[3], l1);
        v[5] = scale_rows(&w[5], l2);
        // Powers of two keep float32 weights float32; general products need float64.
        let reference = bert_of(&format!("dinov2-{name}-bert"), &[v], name == "general");
        assert_eq!(c["model"]["architecture"], "dinov2");
        assert_eq!(c["matrices"], reference["matrices"], "{name}");
        assert_eq!(c["bounds"], reference["bounds"], "{name}");
        assert_eq!(c["extensions"], json!([]), "{name}");
        // Not the unscaled model.
        let plain = bert_of(
            &format!("dinov2-{name}-plain"),
            std::slice::from_ref(&w),
            false,
        );
        assert_ne!(c["matrices"], plain["matrices"], "{name}");
    }
    let d = &dirs[0];
    let j = inspect(d);
    assert_eq!(j["layout"], "Dinov2");
    assert!(j["bound"].as_str().unwrap().contains("applies exactly"));
    assert!(j
        .to_string()
        .contains("(diag(encoder.layer.0.layer_scale2.lambda1) encoder.layer.0.mlp.fc2.weight)^T"));
    // Without config.json, DINOv2 is told from ViT by its LayerScale.
    std::fs::remove_file(d.join("config.json")).unwrap();
    let st = d.join("model.safetensors");
    let j = ok_json(&run(&[
        "inspect",
        st.to_str().unwrap(),
        "--heads",
        "12",
        "--json",
    ]));
    assert_eq!(j["layout"], "Dinov2");
    // Float64 weights: products could round, refused.
    let d = dinov2("dinov2-f64", &general, &generalb, true);
    assert_bad(
        &["certify", d.to_str().unwrap()],
        &[
            "encoder.layer.0.attention.output.dense.weight",
            "LayerScale",
            "proofs/exact-layerscale.md",
        ],
    );
}

/// Issue 33: DINOv2 with LayerScale `(0, ..., 0, 1e-3)` on the attention
/// (only the last output row of `W_O` survives) had every `V_tilde` of
/// exact rank 1 reported `[1, 2]` at every precision. The zero rows of the
/// folded `W_O` are left out of the factored product exactly (L14 e): the
/// rank is decided, `[1, 1]`, for every head.
#[test]
fn layer_scale_rank_one_value_heads_were_undecided() {
    let mut l1 = vec![0.0; N];
    l1[N - 1] = f64::from(1e-3f32);
    let ones = vec![1.0; N];
    let d = dinov2("dinov2-rank1", &l1, &ones, false);
    let c = certify(&d);
    let heads: Vec<&Value> = c["matrices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["type"] == "V_tilde")
        .collect();
    assert_eq!(heads.len(), HEADS);
    for m in heads {
        assert_eq!(m["rank"], json!({"lo": 1, "hi": 1}), "head {}", m["head"]);
    }
}
