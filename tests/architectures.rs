//! Every supported layout, built by re-emitting the real MiniLM matrices in
//! that layout (renamed, transposed, fused, GQA-shared, GGUF-encoded), must
//! give the certified results of the BERT-layout run wherever the
//! mathematics says they are equal.

mod common;

use common::tmpdir;

use common::reemit::{
    certify, hcat, layer, one_dimensional_gains, rows, slice, t, vstack, write_st, BERT,
};
use common::{ok_json, root, run};
use serde_json::{json, Value};
use specbound::io::checkpoint::Checkpoint;
use specbound::io::gguf::{self, MetaValue};
use specbound::matrix::DenseMatrix;
use std::path::{Path, PathBuf};

const LAYERS: usize = 2;
const N: usize = 384;
const I: usize = 1536;
const DH: usize = 32;

fn bert_reference(dir: &Path, transform_kv: impl Fn(&DenseMatrix) -> DenseMatrix) -> Value {
    let mut ts = Vec::new();
    for l in 0..LAYERS {
        let w = layer(l);
        for (k, (name, m)) in BERT.iter().zip(w.iter()).enumerate() {
            let m = if k == 1 || k == 2 {
                transform_kv(m)
            } else {
                m.clone()
            };
            ts.push((format!("encoder.layer.{l}.{name}.weight"), m));
        }
    }
    write_st(
        dir,
        &ts,
        false,
        json!({"model_type": "bert", "num_hidden_layers": LAYERS, "hidden_size": N, "num_attention_heads": 12, "intermediate_size": I}),
    );
    certify(dir)
}

#[test]
fn renamed_and_transposed_layouts_certify_identically() {
    let reference = bert_reference(&tmpdir("bert"), |m| m.clone());
    // DistilBERT names.
    let d = tmpdir("distilbert");
    let mut ts = Vec::new();
    for l in 0..LAYERS {
        let w = layer(l);
        for (name, m) in [
            "attention.q_lin",
            "attention.k_lin",
            "attention.v_lin",
            "attention.out_lin",
            "ffn.lin1",
            "ffn.lin2",
        ]
        .iter()
        .zip(w)
        {
            ts.push((format!("distilbert.transformer.layer.{l}.{name}.weight"), m));
        }
    }
    write_st(
        &d,
        &ts,
        false,
        json!({"model_type": "distilbert", "n_layers": LAYERS, "dim": N, "n_heads": 12, "hidden_dim": I}),
    );
    let c = certify(&d);
    assert_eq!(c["model"]["architecture"], "distilbert");
    assert_eq!(c["matrices"], reference["matrices"]);
    assert_eq!(c["bounds"], reference["bounds"]);
    // ViT names (vit. prefix, attention.attention.*).
    let d = tmpdir("vit");
    let mut ts = Vec::new();
    for l in 0..LAYERS {
        let w = layer(l);
        for (name, m) in [
            "attention.attention.query",
            "attention.attention.key",
            "attention.attention.value",
            "attention.output.dense",
            "intermediate.dense",
            "output.dense",
        ]
        .iter()
        .zip(w)
        {
            ts.push((format!("vit.encoder.layer.{l}.{name}.weight"), m));
        }
    }
    ts.push((
        "vit.embeddings.patch_embeddings.projection.weight".into(),
        DenseMatrix {
            rows: 1,
            cols: 1,
            data: vec![1.0],
        },
    ));
    write_st(
        &d,
        &ts,
        false,
        json!({"model_type": "vit", "num_hidden_layers": LAYERS, "hidden_size": N, "num_attention_heads": 12, "intermediate_size": I}),
    );
    let c = certify(&d);
    assert_eq!(c["model"]["architecture"], "vit");
    assert_eq!(c["matrices"], reference["matrices"]);
    // GPT-2: HF Conv1D stores [in, out]; Q, K, V fused along the columns.
    let d = tmpdir("gpt2");
    let mut ts = Vec::new();
    for l in 0..LAYERS {
        let w = layer(l);
        ts.push((
            format!("h.{l}.attn.c_attn.weight"),
            hcat(&[&t(&w[0]), &t(&w[1]), &t(&w[2])]),
        ));
        ts.push((format!("h.{l}.attn.c_proj.weight"), t(&w[3])));
        ts.push((format!("h.{l}.mlp.c_fc.weight"), t(&w[4])));
        ts.push((format!("h.{l}.mlp.c_proj.weight"), t(&w[5])));
        ts.push((
            format!("h.{l}.attn.bias"),
            DenseMatrix {
                rows: 1,
                cols: 1,
                data: vec![1.0],
            },
        ));
    }
    write_st(
        &d,
        &ts,
        false,
        json!({"model_type": "gpt2", "n_layer": LAYERS, "n_embd": N, "n_head": 12, "n_inner": I}),
    );
    let c = certify(&d);
    assert_eq!(c["model"]["architecture"], "gpt2");
    assert_eq!(c["matrices"], reference["matrices"]);
    assert_eq!(c["bounds"], reference["bounds"]);
    assert_eq!(c["extensions"], json!([]));
    let out = run(&["inspect", d.to_str().unwrap(), "--json"]);
    let j = ok_json(&out);
    assert_eq!(j["layout"], "Gpt2");
    assert!(j["unmapped"]
        .as_array()
        .unwrap()
        .iter()
        .any(|x| x["tensor"] == "h.0.attn.bias"));
}

/// LLaMA tensors with 6 key/value heads (query head h uses kv head h/2):
/// k/v head g carries BERT head 2g, up_proj is zero (so M_in = [FF1^T, 0]).
fn llama_tensors(l: usize, perm: bool) -> Vec<(String, DenseMatrix)> {
    let w = layer(l);
    let kv_rows: Vec<usize> = (0..6)
        .flat_map(|g| (2 * g * DH)..(2 * g * DH + DH))
        .collect();
    // llama.cpp's RoPE permutation inside each head: interleave the halves.
    let p = |m: &DenseMatrix, heads: usize| -> DenseMatrix {
        if !perm {
            return m.clone();
        }
        let idx: Vec<usize> = (0..heads)
            .flat_map(|h| {
                (0..DH).map(move |r| h * DH + if r % 2 == 0 { r / 2 } else { DH / 2 + r / 2 })
            })
            .collect();
        rows(m, &idx)
    };
    let zero = DenseMatrix {
        rows: I,
        cols: N,
        data: vec![0.0; I * N],
    };
    vec![
        (
            format!("model.layers.{l}.self_attn.q_proj.weight"),
            p(&w[0], 12),
        ),
        (
            format!("model.layers.{l}.self_attn.k_proj.weight"),
            p(&rows(&w[1], &kv_rows), 6),
        ),
        (
            format!("model.layers.{l}.self_attn.v_proj.weight"),
            rows(&w[2], &kv_rows),
        ),
        (
            format!("model.layers.{l}.self_attn.o_proj.weight"),
            w[3].clone(),
        ),
        (
            format!("model.layers.{l}.mlp.gate_proj.weight"),
            w[4].clone(),
        ),
        (format!("model.layers.{l}.mlp.up_proj.weight"), zero),
        (
            format!("model.layers.{l}.mlp.down_proj.weight"),
            w[5].clone(),
        ),
    ]
}

fn llama_config() -> Value {
    json!({"model_type": "llama", "num_hidden_layers": LAYERS, "hidden_size": N, "num_attention_heads": 12,
           "num_key_value_heads": 6, "intermediate_size": I, "head_dim": DH})
}

fn interval(v: &Value) -> (f64, f64) {
    (v["lo"].as_f64().unwrap(), v["hi"].as_f64().unwrap())
}

fn meets(a: &Value, b: &Value, what: &str) {
    let (al, ah) = interval(a);
    let (bl, bh) = interval(b);
    assert!(
        al <= bh && bl <= ah,
        "{what}: [{al:e},{ah:e}] and [{bl:e},{bh:e}] are disjoint"
    );
}

#[test]
fn llama_gqa_gguf_quantized_and_rope_permuted_layouts() {
    // The BERT-layout reference with K/V heads duplicated as GQA shares them.
    let kv_dup = |m: &DenseMatrix| {
        let idx: Vec<usize> = (0..12)
            .flat_map(|h| (2 * (h / 2) * DH)..(2 * (h / 2) * DH + DH))
            .collect();
        rows(m, &idx)
    };
    let reference = bert_reference(&tmpdir("bert-gqa"), kv_dup);
    let d = tmpdir("llama");
    let ts: Vec<(String, DenseMatrix)> =
        (0..LAYERS).flat_map(|l| llama_tensors(l, false)).collect();
    write_st(&d, &ts, false, llama_config());
    let c = certify(&d);
    assert_eq!(c["model"]["kv_heads"], 6);
    let ext = c["extensions"][0].as_str().unwrap();
    assert!(
        ext.contains("[W_gate, W_up]") && ext.contains("extension"),
        "{ext}"
    );
    // Rotary embeddings ignored in QK, and the GELU constant for SiLU.
    let ext = c["extensions"][1].as_str().unwrap();
    assert!(
        ext.starts_with("rotary position embeddings are ignored"),
        "{ext}"
    );
    let ext = c["extensions"][2].as_str().unwrap();
    assert!(
        ext.starts_with("L_phi = 1.13") && ext.contains("'silu'"),
        "{ext}"
    );
    assert_eq!(c["extensions"].as_array().unwrap().len(), 3);
    let (cm, rm) = (
        c["matrices"].as_array().unwrap(),
        reference["matrices"].as_array().unwrap(),
    );
    for (a, b) in cm.iter().zip(rm) {
        assert_eq!(
            (&a["layer"], &a["head"], &a["type"]),
            (&b["layer"], &b["head"], &b["type"])
        );
        match a["type"].as_str().unwrap() {
            // Same factors exactly: identical certified values.
            "QK" | "V_tilde" => {
                assert_eq!(a["singular_values"], b["singular_values"]);
                assert_eq!(a["norm_21"], b["norm_21"]);
            }
            // [FF1^T, 0] has the singular values and norms of FF1^T: enclosures must meet.
            "M_in" => {
                assert_eq!(a["cols"], 2 * I);
                for k in [
                    "spectral_norm",
                    "frobenius_norm",
                    "nuclear_norm",
                    "norm_21",
                    "norm_11",
                ] {
                    meets(&a[k], &b[k], k);
                }
                assert_eq!(a["rank"], b["rank"]);
            }
            _ => assert_eq!(a["singular_values"], b["singular_values"]),
        }
    }
    meets(&c["bounds"]["ours"], &reference["bounds"]["ours"], "B_ours");
    meets(
        &c["bounds"]["edelman"],
        &reference["bounds"]["edelman"],
        "B_Edel",
    );

    // The same weights as a GGUF file (F32: exact) give the same certificate values.
    let meta = |t: &str| {
        vec![
            ("general.architecture", MetaValue::Str("llama".into())),
            ("llama.block_count", MetaValue::Int(LAYERS as i128)),
            ("llama.embedding_length", MetaValue::Int(N as i128)),
            ("llama.attention.head_count", MetaValue::Int(12)),
            ("llama.attention.head_count_kv", MetaValue::Int(6)),
            ("llama.feed_forward_length", MetaValue::Int(I as i128)),
            ("general.name", MetaValue::Str(t.into())),
        ]
    };
    let gg = |perm: bool, ty: u32| -> Vec<(String, usize, usize, u32, Vec<f64>)> {
        (0..LAYERS)
            .flat_map(|l| {
                let names = [
                    "attn_q",
                    "attn_k",
                    "attn_v",
                    "attn_output",
                    "ffn_gate",
                    "ffn_up",
                    "ffn_down",
                ];
                llama_tensors(l, perm)
                    .into_iter()
                    .zip(names)
                    .map(move |((_, m), n)| {
                        (format!("blk.{l}.{n}.weight"), m.rows, m.cols, ty, m.data)
                    })
            })
            .collect()
    };
    let g = tmpdir("gguf");
    let f = g.join("model.gguf");
    gguf::write_gguf(&f, &meta("f32"), &gg(false, gguf::F32)).unwrap();
    let cg = certify(&f);
    assert_eq!(cg["matrices"], c["matrices"]);
    assert_eq!(cg["bounds"], c["bounds"]);
    let ext = cg["extensions"].as_array().unwrap();
    assert_eq!(ext.len(), 3);
    assert!(ext[2]
        .as_str()
        .unwrap()
        .contains("GGUF general.architecture 'llama'"));

    // llama.cpp's RoPE row permutation of Q and K inside each head leaves QK unchanged.
    let fp = g.join("permuted.gguf");
    gguf::write_gguf(&fp, &meta("perm"), &gg(true, gguf::F32)).unwrap();
    let cp = certify(&fp);
    for (a, b) in cp["matrices"].as_array().unwrap().iter().zip(cm) {
        for k in [
            "spectral_norm",
            "frobenius_norm",
            "nuclear_norm",
            "norm_21",
            "norm_11",
            "min_contribution",
        ] {
            meets(&a[k], &b[k], &format!("permuted {} {k}", a["type"]));
        }
        assert_eq!(a["rank"], b["rank"]);
    }
    meets(
        &cp["bounds"]["ours"],
        &c["bounds"]["ours"],
        "permuted B_ours",
    );

    // Quantized tensors: the certificate is that of the exactly decoded values.
    for (ty, name) in [
        (gguf::Q8_0, "q8_0"),
        (gguf::Q4_0, "q4_0"),
        (gguf::Q4_1, "q4_1"),
        (gguf::F16, "f16"),
        (gguf::BF16, "bf16"),
    ] {
        let fq = g.join(format!("{name}.gguf"));
        let tensors = gg(false, ty);
        gguf::write_gguf(&fq, &meta(name), &tensors).unwrap();
        // The exact decoded values, re-emitted as F64 safetensors in LLaMA names.
        let file = gguf::GgufFile::open(&fq).unwrap();
        let dq = tmpdir(&format!("dq-{name}"));
        let ts: Vec<(String, DenseMatrix)> = (0..LAYERS)
            .flat_map(|l| {
                let hf = [
                    "self_attn.q_proj",
                    "self_attn.k_proj",
                    "self_attn.v_proj",
                    "self_attn.o_proj",
                    "mlp.gate_proj",
                    "mlp.up_proj",
                    "mlp.down_proj",
                ];
                let gn = [
                    "attn_q",
                    "attn_k",
                    "attn_v",
                    "attn_output",
                    "ffn_gate",
                    "ffn_up",
                    "ffn_down",
                ];
                let file = &file;
                hf.iter()
                    .zip(gn)
                    .map(move |(h, n)| {
                        (
                            format!("model.layers.{l}.{h}.weight"),
                            file.read(&format!("blk.{l}.{n}.weight")).unwrap().matrix,
                        )
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        write_st(&dq, &ts, true, llama_config());
        let a = certify(&fq);
        let b = certify(&dq);
        assert_eq!(a["matrices"], b["matrices"], "{name}");
        assert_eq!(a["bounds"], b["bounds"], "{name}");
    }
}

#[test]
fn gguf_block_decoding_is_exact() {
    // Every decoded value equals d * q (+ m) computed exactly in rationals.
    use rug::Rational;
    let vals: Vec<f64> = (0..256)
        .map(|i| ((i * 37 % 101) as f64 - 50.0) / 97.0)
        .collect();
    for ty in [gguf::Q8_0, gguf::Q4_0, gguf::Q4_1] {
        let bytes = gguf::encode(ty, &vals);
        let dec = gguf::decode(ty, &bytes, vals.len());
        let (per, size) = gguf::block_layout(ty).unwrap();
        for (b, blk) in bytes.chunks(size as usize).enumerate() {
            let h = |o: usize| {
                Rational::from_f64(
                    half::f16::from_bits(u16::from_le_bytes([blk[o], blk[o + 1]])).to_f64(),
                )
                .unwrap()
            };
            for e in 0..per as usize {
                let exact = match ty {
                    gguf::Q8_0 => h(0) * Rational::from(blk[2 + e] as i8),
                    gguf::Q4_0 => {
                        let byte = blk[2 + e % 16];
                        let q = if e < 16 { byte & 15 } else { byte >> 4 };
                        h(0) * Rational::from(q as i32 - 8)
                    }
                    _ => {
                        let byte = blk[4 + e % 16];
                        let q = if e < 16 { byte & 15 } else { byte >> 4 };
                        h(0) * Rational::from(q) + h(2)
                    }
                };
                assert_eq!(
                    Rational::from_f64(dec[b * per as usize + e]).unwrap(),
                    exact
                );
            }
        }
    }
}

/// Every entry of the layout table, fed the real MiniLM layer 0 re-emitted
/// in that entry's names, orientations and fusions (GQA entries with 6
/// key/value heads, gated entries with W_gate = W_up = FF1, a decoder's
/// cross-attention from MiniLM layer 1's q, k, v, o), through its own
/// config keys or GGUF metadata, must give exactly (bit for bit) the paper's
/// proxies computed here from the [out, in] weights (and the cross-attention
/// products of layer 1's, which `inspect` lists by role). A family added to the
/// table is tested here without a line of test code.
#[test]
fn every_family_in_the_table_extracts_the_paper_proxies_exactly() {
    use specbound::arch::families::{Cond, KvHeads};
    use specbound::arch::{self, ArchOverrides, Fusion, Orientation, ProxySource, Role, FAMILIES};
    let w = layer(0); // q, k, v, o, ff1, ff2, [out, in]
    let w1 = layer(1); // a decoder's cross-attention: other known matrices
                       // Every layout of every entry, its config.json flags choosing it.
    let layouts = FAMILIES.iter().flat_map(|spec| {
        let choices = spec.choices();
        (0..choices.len()).map(move |k| (spec, k, choices.clone()))
    });
    for (spec, k, choices) in layouts {
        // A mixture of experts stores one feed-forward per expert, not the
        // table's dense ones: tests/architectures_moe.rs re-emits those.
        if spec.moe.is_some() {
            continue;
        }
        let choice = choices[k];
        // Its conditions hold, and one of each earlier layout's does not.
        let mut model_type = spec.model_types.first().copied().unwrap_or_default();
        let mut flags = serde_json::Map::new();
        for c in choice.when {
            match c {
                Cond::Is(f, v) => {
                    flags.insert(f.key.into(), json!(v));
                }
                Cond::ModelType(m) => model_type = m[0],
            }
        }
        for c in choices[..k].iter().flat_map(|e| e.when) {
            match c {
                Cond::Is(f, v) if !flags.contains_key(f.key) => {
                    flags.insert(f.key.into(), json!(!v));
                }
                Cond::ModelType(m) if m.contains(&model_type) => {
                    model_type = spec.model_types.iter().find(|t| !m.contains(t)).unwrap();
                }
                _ => {}
            }
        }
        let kv = match choice.kv_heads {
            KvHeads::Read => 6,
            KvHeads::One => 1,
            KvHeads::PerHead => 12,
        };
        // Key/value head g carries BERT head g * 12 / kv.
        let kv_rows: Vec<usize> = (0..kv)
            .flat_map(|g| (g * (12 / kv) * DH)..(g * (12 / kv) * DH + DH))
            .collect();
        let role = |r: Role| match r {
            Role::Query => w[0].clone(),
            Role::Key => rows(&w[1], &kv_rows),
            Role::Value => rows(&w[2], &kv_rows),
            Role::Output => w[3].clone(),
            Role::FfnGate | Role::FfnIn => w[4].clone(),
            Role::FfnOut => w[5].clone(),
            Role::CrossQuery => w1[0].clone(),
            Role::CrossKey => w1[1].clone(),
            Role::CrossValue => w1[2].clone(),
            Role::CrossOutput => w1[3].clone(),
        };
        let is_gguf = !spec.gguf_architectures.is_empty();
        let prefix = if is_gguf { "" } else { "base." };
        let mut tensors: Vec<(String, DenseMatrix)> = choice
            .tensors
            .iter()
            .map(|ts| {
                let stacked = match ts.fusion {
                    Fusion::Stacked => {
                        vstack(&ts.roles.iter().map(|&r| role(r)).collect::<Vec<_>>())
                    }
                    // Per key/value group: its query heads, its key head, its value head.
                    Fusion::PerGroup => {
                        let (q, k, v) = (role(Role::Query), role(Role::Key), role(Role::Value));
                        let r = 12 / kv;
                        let mut parts = Vec::new();
                        for g in 0..kv {
                            for j in 0..r {
                                parts.push(slice(&q, (g * r + j) * DH, DH, false));
                            }
                            parts.push(slice(&k, g * DH, DH, false));
                            parts.push(slice(&v, g * DH, DH, false));
                        }
                        vstack(&parts)
                    }
                };
                let stored = match ts.orientation {
                    Orientation::OutIn => stacked,
                    Orientation::InOut => t(&stacked),
                };
                (ts.name_in(prefix, 0), stored)
            })
            .collect();
        // LayerScale vectors of ones (1-D, as stored): the proxies unchanged.
        let scales: Vec<String> = choice
            .tensors
            .iter()
            .filter_map(|ts| ts.scale_at(prefix, 0, 0))
            .collect();
        for name in &scales {
            let ones = DenseMatrix {
                rows: 1,
                cols: N,
                data: vec![1.0; N],
            };
            tensors.push((name.clone(), ones));
        }
        let dir = tmpdir(&format!("table-{}-{k}", spec.layout));
        let model = if is_gguf {
            let a = spec.gguf_architectures[0];
            let keys = &spec.gguf;
            let mut meta = vec![("general.architecture".to_string(), MetaValue::Str(a.into()))];
            for (ks, v) in [
                (keys.layers, 1),
                (keys.hidden, N),
                (keys.heads, 12),
                (keys.kv_heads, kv),
                (keys.head_dim, DH),
                (keys.intermediate, I),
            ] {
                if let Some(k) = ks.first() {
                    meta.push((format!("{a}.{k}"), MetaValue::Int(v as i128)));
                }
            }
            let meta: Vec<(&str, MetaValue)> =
                meta.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
            let f = dir.join("model.gguf");
            let ts: Vec<(String, usize, usize, u32, Vec<f64>)> = tensors
                .into_iter()
                .map(|(n, m)| (n, m.rows, m.cols, gguf::F32, m.data))
                .collect();
            gguf::write_gguf(&f, &meta, &ts).unwrap();
            f
        } else {
            let keys = &spec.config;
            let mut cfg = serde_json::Map::new();
            cfg.insert("model_type".into(), json!(model_type));
            cfg.extend(flags.clone());
            for (ks, v) in [
                (keys.layers, 1),
                (keys.hidden, N),
                (keys.heads, 12),
                (
                    keys.kv_heads,
                    if choice.kv_heads == KvHeads::Read {
                        kv
                    } else {
                        0
                    },
                ),
                (keys.head_dim, DH),
                (keys.intermediate, I),
            ] {
                if let Some(k) = ks.first() {
                    cfg.insert(k.to_string(), json!(v));
                }
            }
            cfg.retain(|_, v| v != &json!(0));
            write_st(&dir, &tensors, false, Value::Object(cfg));
            if !scales.is_empty() {
                one_dimensional_gains(&dir, N);
            }
            dir.clone()
        };
        let ck = Checkpoint::open(&model).unwrap();
        let a = arch::detect(&ck, &ArchOverrides::default()).unwrap();
        assert_eq!(
            (
                a.layout(),
                a.prefix.as_str(),
                a.layers,
                a.hidden,
                a.heads,
                a.kv_heads,
                a.head_dim,
                a.intermediate
            ),
            (spec.layout, prefix, 1, N, 12, kv, DH, I)
        );
        assert!(a.tensors == choice.tensors, "{} layout {k}", spec.layout);
        let mats = arch::extract(&ck, &a).unwrap();
        let (descs, unmapped) = arch::describe(&ck, &a).unwrap();
        assert!(unmapped.is_empty(), "{}: {unmapped:?}", spec.layout);
        let attention = if a.cross_attention() { 4 } else { 2 };
        assert_eq!(
            a.cross_attention(),
            spec.cross_attention(),
            "{}",
            spec.layout
        );
        assert_eq!(mats.len(), attention * 12 + 2, "{}", spec.layout);
        assert_eq!(descs.len(), mats.len());
        for (m, d) in mats.iter().zip(&descs) {
            assert_eq!(
                (
                    m.id.layer as i64,
                    m.id.head_column(),
                    m.id.kind.name(),
                    m.rows,
                    m.cols
                ),
                (d.layer as i64, d.head, d.kind, d.rows, d.cols),
                "{}: description and extraction disagree",
                spec.layout
            );
        }
        let group = 12 / kv;
        let k_src = role(Role::Key);
        let v_src = role(Role::Value);
        let o_t = t(&w[3]);
        let o1_t = t(&w1[3]);
        for m in &mats {
            let what = format!("{}: {}", spec.layout, m.id);
            match (&m.source, m.id.head) {
                (ProxySource::Factored { b, c }, Some(h)) => {
                    let g = h / group;
                    // The cross-attention's own heads: one key/value head per head.
                    let (rb, rc) = match m.id.kind {
                        specbound::arch::MatrixType::QK => (
                            slice(&w[0], h * DH, DH, true),
                            slice(&k_src, g * DH, DH, false),
                        ),
                        specbound::arch::MatrixType::VTilde => (
                            slice(&v_src, g * DH, DH, true),
                            slice(&o_t, h * DH, DH, false),
                        ),
                        specbound::arch::MatrixType::QKCross => (
                            slice(&w1[0], h * DH, DH, true),
                            slice(&w1[1], h * DH, DH, false),
                        ),
                        specbound::arch::MatrixType::VTildeCross => (
                            slice(&w1[2], h * DH, DH, true),
                            slice(&o1_t, h * DH, DH, false),
                        ),
                        kind => panic!("{what}: {kind} is not per head"),
                    };
                    assert!(*b == rb && *c == rc, "{what}");
                }
                (ProxySource::Dense(x), None) => {
                    let want = match m.id.kind {
                        specbound::arch::MatrixType::MIn if a.gated() => {
                            hcat(&[&t(&w[4]), &t(&w[4])])
                        }
                        specbound::arch::MatrixType::MIn => t(&w[4]),
                        _ => t(&w[5]),
                    };
                    assert!(*x == want, "{what}");
                }
                _ => panic!("{what}: unexpected source"),
            }
        }
        // inspect reports the entry, and names each of its extensions.
        let j = ok_json(&run(&["inspect", model.to_str().unwrap(), "--json"]));
        assert_eq!(j["layout"], spec.layout);
        assert_eq!(j["matrices"].as_array().unwrap().len(), mats.len());
        let cross: Vec<(String, String)> = choice
            .tensors
            .iter()
            .filter(|ts| ts.roles[0].cross())
            .map(|ts| {
                (
                    ts.roles[0].name().to_string(),
                    format!("{prefix}{}", ts.name),
                )
            })
            .collect();
        match j["cross_attention"].as_array() {
            None => assert!(cross.is_empty(), "{}", spec.layout),
            Some(listed) => {
                let listed: Vec<(String, String)> = listed
                    .iter()
                    .map(|e| {
                        let s = |k: &str| e[k].as_str().unwrap().to_string();
                        (s("role"), s("tensor"))
                    })
                    .collect();
                assert_eq!(listed, cross, "{}", spec.layout);
                assert_eq!(listed.len(), 4, "{}", spec.layout);
            }
        }
        let ext: Vec<String> = j["extensions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_str().unwrap().to_string())
            .collect();
        assert_eq!(ext, a.extensions(true), "{}", spec.layout);
        if let Some(reason) = spec.no_bound {
            // No bound, so nothing to extend: the reason says why.
            assert!(ext.is_empty(), "{}: {ext:?}", spec.layout);
            assert!(j["bound"].as_str().unwrap().contains(reason));
            continue;
        }
        assert_eq!(
            ext.iter().any(|e| e.contains("[W_gate, W_up]")),
            a.gated(),
            "{}",
            spec.layout
        );
        assert_eq!(
            ext.iter().any(|e| e.contains("rotary position embeddings")),
            a.rotary(),
            "{}",
            spec.layout
        );
        let gelu = a.activation.as_ref().is_some_and(|x| x.is_gelu());
        assert_eq!(
            ext.iter().any(|e| e.starts_with("L_phi = 1.13")),
            !gelu,
            "{}: {:?}",
            spec.layout,
            a.activation
        );
    }
}

/// Everything the layout table says (layouts, model types, `architectures`
/// prefixes, GGUF architectures, config and GGUF keys, tensor names) is in
/// `docs/certify.md`.
#[test]
fn every_family_in_the_table_is_documented() {
    let doc = std::fs::read_to_string(root().join("docs/certify.md")).unwrap();
    for spec in specbound::arch::FAMILIES {
        let keys = |k: &specbound::arch::families::FactKeys, pre: &str| -> Vec<String> {
            [
                k.layers,
                k.hidden,
                k.heads,
                k.kv_heads,
                k.head_dim,
                k.intermediate,
                k.activation,
            ]
            .concat()
            .iter()
            .map(|x| format!("{pre}{x}"))
            .collect()
        };
        let mut names: Vec<String> = spec
            .model_types
            .iter()
            .chain(spec.architectures)
            .chain(spec.gguf_architectures)
            .chain(spec.default_activation.as_slice())
            .map(|m| m.to_string())
            .collect();
        names.extend(keys(&spec.config, ""));
        names.extend(keys(&spec.gguf, "{arch}."));
        names.extend(
            spec.tensors
                .iter()
                .map(|t| t.name.replace("{l}", "N").replace("{i}", "M")),
        );
        for name in names {
            assert!(
                doc.contains(&format!("`{name}`")),
                "docs/certify.md does not mention `{name}` ({})",
                spec.layout
            );
        }
        assert!(
            doc.contains(&format!("| {} |", spec.layout)),
            "{}",
            spec.layout
        );
    }
}

/// A one-layer BERT directory (hidden 8, 2 heads, feed-forward 16) with `cfg`.
fn tiny_bert(name: &str, cfg: Option<Value>) -> PathBuf {
    let d = tmpdir(name);
    let m = |r: usize, c: usize| DenseMatrix {
        rows: r,
        cols: c,
        data: (0..r * c).map(|k| (k % 7) as f64 / 4.0 - 0.75).collect(),
    };
    let ts: Vec<(String, DenseMatrix)> = [
        ("attention.self.query", 8, 8),
        ("attention.self.key", 8, 8),
        ("attention.self.value", 8, 8),
        ("attention.output.dense", 8, 8),
        ("intermediate.dense", 16, 8),
        ("output.dense", 8, 16),
    ]
    .iter()
    .map(|&(n, r, c)| (format!("encoder.layer.0.{n}.weight"), m(r, c)))
    .collect();
    let refs: Vec<(String, &DenseMatrix)> = ts.iter().map(|(n, m)| (n.clone(), m)).collect();
    common::write_safetensors(&d.join("model.safetensors"), &refs, "F32");
    if let Some(c) = cfg {
        std::fs::write(d.join("config.json"), serde_json::to_vec(&c).unwrap()).unwrap();
    }
    d
}

fn inspect_extensions(args: &[&str]) -> Vec<String> {
    let mut a = vec!["inspect"];
    a.extend_from_slice(args);
    a.push("--json");
    ok_json(&run(&a))["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn l_phi_note_fires_for_a_non_gelu_or_unknown_activation_at_the_default_l_phi() {
    let cfg = |act: Value| {
        json!({"model_type": "bert", "num_hidden_layers": 1, "hidden_size": 8,
               "num_attention_heads": 2, "intermediate_size": 16, "hidden_act": act})
    };
    // GELU and its approximations: no note.
    for act in ["gelu", "gelu_new", "GELU_pytorch_tanh"] {
        let d = tiny_bert(&format!("act-{act}"), Some(cfg(json!(act))));
        assert_eq!(
            inspect_extensions(&[d.to_str().unwrap()]),
            Vec::<String>::new(),
            "{act}"
        );
    }
    // Not named: BERT's configuration default is GELU.
    let d = tiny_bert("act-default", Some(cfg(Value::Null)));
    assert!(inspect_extensions(&[d.to_str().unwrap()]).is_empty());
    // Another activation: the note names it and where it was read.
    let d = tiny_bert("act-relu", Some(cfg(json!("relu"))));
    let ext = inspect_extensions(&[d.to_str().unwrap()]);
    assert_eq!(ext.len(), 1, "{ext:?}");
    assert!(
        ext[0].contains("L_phi = 1.13")
            && ext[0].contains("'relu'")
            && ext[0].contains("'hidden_act' in config.json"),
        "{}",
        ext[0]
    );
    // A constant chosen by the user: no note.
    assert!(inspect_extensions(&[d.to_str().unwrap(), "--l-phi", "1"]).is_empty());
    // No config.json: the activation is unknown.
    let d = tiny_bert("act-unknown", None);
    let f = d.join("model.safetensors");
    let ext = inspect_extensions(&[f.to_str().unwrap(), "--heads", "2"]);
    assert_eq!(ext.len(), 1, "{ext:?}");
    assert!(ext[0].contains("unknown"), "{}", ext[0]);
    // A hostile activation name stays on one line, cut short.
    let d = tiny_bert(
        "act-hostile",
        Some(cfg(json!(format!("x\n\u{1b}[31m{}", "y".repeat(5000))))),
    );
    let out = run(&["inspect", d.to_str().unwrap()]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.contains("L_phi")).unwrap();
    assert!(
        line.contains("x\\n\\u{1b}[31m") && line.len() < 1000,
        "{line}"
    );
    // The certificate carries the same notes as inspect.
    let d = tiny_bert("act-cert", Some(cfg(json!("relu"))));
    let c = ok_json(&run(&["certify", d.to_str().unwrap(), "--json"]));
    assert_eq!(
        c["extensions"],
        json!(inspect_extensions(&[d.to_str().unwrap()]))
    );
}

/// The families added for issue 20, each re-emitted from the real MiniLM
/// layers in its own tensor names and config keys (as transformers writes
/// them), certify exactly as the BERT layout they are equivalent to: GPT-NeoX
/// and BLOOM with `query_key_value` interleaved per head (`[q_h; k_h; v_h]`
/// for each head; a split in thirds would give other matrices), GPT-J, OPT
/// and MPNet with separate projections. Their extensions are their own.
#[test]
fn added_families_certify_as_the_bert_layout_they_are_equivalent_to() {
    let reference = bert_reference(&tmpdir("bert-added"), |m| m.clone());
    let per_head = |w: &[DenseMatrix]| {
        let mut parts = Vec::new();
        for h in 0..12 {
            for m in &w[..3] {
                parts.push(slice(m, h * DH, DH, false));
            }
        }
        vstack(&parts)
    };
    type Emit = fn(
        usize,
        &[DenseMatrix],
        &dyn Fn(&[DenseMatrix]) -> DenseMatrix,
    ) -> Vec<(String, DenseMatrix)>;
    let cases: Vec<(&str, Value, Emit, &[&str])> = vec![
        (
            "gpt_neox",
            json!({"model_type": "gpt_neox", "num_hidden_layers": LAYERS, "hidden_size": N,
                   "num_attention_heads": 12, "intermediate_size": I, "hidden_act": "gelu",
                   "use_parallel_residual": true, "rotary_pct": 0.25}),
            |l, w, ph| {
                let p = format!("gpt_neox.layers.{l}.");
                vec![
                    (format!("{p}attention.query_key_value.weight"), ph(w)),
                    (format!("{p}attention.dense.weight"), w[3].clone()),
                    (format!("{p}mlp.dense_h_to_4h.weight"), w[4].clone()),
                    (format!("{p}mlp.dense_4h_to_h.weight"), w[5].clone()),
                ]
            },
            &["rotary position embeddings", "parallel residual"],
        ),
        (
            "bloom",
            json!({"model_type": "bloom", "n_layer": LAYERS, "hidden_size": N, "n_head": 12}),
            |l, w, ph| {
                let p = format!("transformer.h.{l}.");
                vec![
                    (format!("{p}self_attention.query_key_value.weight"), ph(w)),
                    (format!("{p}self_attention.dense.weight"), w[3].clone()),
                    (format!("{p}mlp.dense_h_to_4h.weight"), w[4].clone()),
                    (format!("{p}mlp.dense_4h_to_h.weight"), w[5].clone()),
                ]
            },
            &["position bias"],
        ),
        (
            "gptj",
            json!({"model_type": "gptj", "n_layer": LAYERS, "n_embd": N, "n_head": 12,
                   "n_inner": null, "rotary_dim": 8}),
            |l, w, _| {
                let p = format!("transformer.h.{l}.");
                [
                    "attn.q_proj",
                    "attn.k_proj",
                    "attn.v_proj",
                    "attn.out_proj",
                    "mlp.fc_in",
                    "mlp.fc_out",
                ]
                .iter()
                .zip(w)
                .map(|(n, m)| (format!("{p}{n}.weight"), m.clone()))
                .collect()
            },
            &["rotary position embeddings", "parallel residual"],
        ),
        (
            "opt",
            json!({"model_type": "opt", "num_hidden_layers": LAYERS, "hidden_size": N,
                   "num_attention_heads": 12, "ffn_dim": I, "activation_function": "gelu"}),
            |l, w, _| {
                let p = format!("model.decoder.layers.{l}.");
                [
                    "self_attn.q_proj",
                    "self_attn.k_proj",
                    "self_attn.v_proj",
                    "self_attn.out_proj",
                    "fc1",
                    "fc2",
                ]
                .iter()
                .zip(w)
                .map(|(n, m)| (format!("{p}{n}.weight"), m.clone()))
                .collect()
            },
            &[],
        ),
        (
            "mpnet",
            json!({"model_type": "mpnet", "num_hidden_layers": LAYERS, "hidden_size": N,
                   "num_attention_heads": 12, "intermediate_size": I}),
            |l, w, _| {
                let p = format!("mpnet.encoder.layer.{l}.");
                [
                    "attention.attn.q",
                    "attention.attn.k",
                    "attention.attn.v",
                    "attention.attn.o",
                    "intermediate.dense",
                    "output.dense",
                ]
                .iter()
                .zip(w)
                .map(|(n, m)| (format!("{p}{n}.weight"), m.clone()))
                .collect()
            },
            &["position bias"],
        ),
    ];
    // XLM-RoBERTa and ELECTRA: BERT names under their own prefixes.
    let bert_cfg = |mt: &str| {
        json!({"model_type": mt, "num_hidden_layers": LAYERS, "hidden_size": N,
               "num_attention_heads": 12, "intermediate_size": I, "hidden_act": "gelu"})
    };
    let mut cases = cases;
    cases.push((
        "xlm-roberta",
        bert_cfg("xlm-roberta"),
        |l, w, _| {
            [
                "attention.self.query",
                "attention.self.key",
                "attention.self.value",
                "attention.output.dense",
                "intermediate.dense",
                "output.dense",
            ]
            .iter()
            .zip(w)
            .map(|(n, m)| (format!("roberta.encoder.layer.{l}.{n}.weight"), m.clone()))
            .collect()
        },
        &[],
    ));
    cases.push((
        "electra",
        bert_cfg("electra"),
        |l, w, _| {
            let mut v: Vec<(String, DenseMatrix)> = [
                "attention.self.query",
                "attention.self.key",
                "attention.self.value",
                "attention.output.dense",
                "intermediate.dense",
                "output.dense",
            ]
            .iter()
            .zip(w)
            .map(|(n, m)| (format!("electra.encoder.layer.{l}.{n}.weight"), m.clone()))
            .collect();
            if l == 0 {
                // ELECTRA's embeddings projection (embedding size 128 -> hidden): not a proxy.
                v.push((
                    "electra.embeddings_project.weight".into(),
                    slice(&w[0], 0, N, false),
                ));
            }
            v
        },
        &[],
    ));
    for (mt, cfg, emit, notes) in cases {
        let d = tmpdir(&format!("added-{mt}"));
        let mut ts = Vec::new();
        for l in 0..LAYERS {
            ts.extend(emit(l, &layer(l), &per_head));
        }
        write_st(&d, &ts, false, cfg);
        let c = certify(&d);
        assert_eq!(c["model"]["architecture"], mt);
        assert_eq!(c["matrices"], reference["matrices"], "{mt}");
        assert_eq!(c["bounds"], reference["bounds"], "{mt}");
        let ext: Vec<&str> = c["extensions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_str().unwrap())
            .collect();
        assert_eq!(ext.len(), notes.len(), "{mt}: {ext:?}");
        for n in notes {
            assert!(
                ext.iter().any(|e| e.contains(n)),
                "{mt}: {n} not in {ext:?}"
            );
        }
        // inspect says how the paper's bound applies.
        let j = ok_json(&run(&["inspect", d.to_str().unwrap(), "--json"]));
        let bound = j["bound"].as_str().unwrap();
        assert_eq!(
            bound.contains("applies exactly"),
            notes.is_empty(),
            "{mt}: {bound}"
        );
        assert_eq!(
            bound.contains("as an extension"),
            !notes.is_empty(),
            "{mt}: {bound}"
        );
    }
    // Splitting GPT-NeoX's interleaved tensor in thirds is another model:
    // the same tensor read as GPT-2-style stacked thirds certifies otherwise.
    let d = tmpdir("added-thirds");
    let mut ts = Vec::new();
    for l in 0..LAYERS {
        let w = layer(l);
        ts.push((format!("h.{l}.attn.c_attn.weight"), t(&per_head(&w))));
        ts.push((format!("h.{l}.attn.c_proj.weight"), t(&w[3])));
        ts.push((format!("h.{l}.mlp.c_fc.weight"), t(&w[4])));
        ts.push((format!("h.{l}.mlp.c_proj.weight"), t(&w[5])));
    }
    write_st(
        &d,
        &ts,
        false,
        json!({"model_type": "gpt2", "n_layer": LAYERS, "n_embd": N, "n_head": 12, "n_inner": I}),
    );
    assert_ne!(certify(&d)["matrices"], reference["matrices"]);
}

/// Phi-3 (fused `qkv_proj` [Q | K | V] with grouped-query attention, fused
/// `gate_up_proj` [gate; up]) and Gemma (LLaMA's tensors, its own keys and
/// GELU default) certify as the LLaMA layout they are equivalent to.
/// The certificate of the LLaMA re-emission of every layer (directory `name`).
fn llama_reference(name: &str) -> Value {
    let d = tmpdir(name);
    let mut ts = Vec::new();
    for l in 0..LAYERS {
        ts.extend(llama_tensors(l, false));
    }
    write_st(&d, &ts, false, llama_config());
    certify(&d)
}

#[test]
fn phi3_and_gemma_certify_as_the_llama_layout() {
    let reference = llama_reference("llama-added");
    // Phi-3: the LLaMA tensors fused.
    let d = tmpdir("phi3");
    let mut ts = Vec::new();
    for l in 0..LAYERS {
        let w = llama_tensors(l, false);
        let m = |k: usize| w[k].1.clone();
        let p = format!("model.layers.{l}.");
        ts.push((
            format!("{p}self_attn.qkv_proj.weight"),
            vstack(&[m(0), m(1), m(2)]),
        ));
        ts.push((format!("{p}self_attn.o_proj.weight"), m(3)));
        ts.push((format!("{p}mlp.gate_up_proj.weight"), vstack(&[m(4), m(5)])));
        ts.push((format!("{p}mlp.down_proj.weight"), m(6)));
    }
    let mut cfg = llama_config();
    cfg["model_type"] = json!("phi3");
    write_st(&d, &ts, false, cfg);
    let c = certify(&d);
    assert_eq!(c["model"]["architecture"], "phi3");
    assert_eq!(c["matrices"], reference["matrices"]);
    assert_eq!(c["bounds"], reference["bounds"]);
    // gated, rotary, and L_phi for SiLU, as LLaMA (the last names the family).
    let ext = |c: &Value| c["extensions"].as_array().unwrap().len();
    assert_eq!((ext(&c), ext(&reference)), (3, 3));
    // --heads alone: the key/value heads come from the fused height.
    let j = ok_json(&run(&[
        "inspect",
        d.join("model.safetensors").to_str().unwrap(),
        "--heads",
        "12",
        "--json",
    ]));
    assert_eq!(
        (j["layout"].as_str(), j["kv_heads"].as_u64()),
        (Some("Phi3"), Some(6))
    );
    // Gemma and Gemma 2: LLaMA's tensors, a GELU default (no L_phi note).
    for (mt, extra) in [("gemma", 0), ("gemma2", 1)] {
        let d = tmpdir(mt);
        let mut ts = Vec::new();
        for l in 0..LAYERS {
            ts.extend(llama_tensors(l, false));
        }
        let mut cfg = llama_config();
        cfg["model_type"] = json!(mt);
        cfg["query_pre_attn_scalar"] = json!(DH);
        write_st(&d, &ts, false, cfg);
        let c = certify(&d);
        assert_eq!(c["model"]["architecture"], mt);
        assert_eq!(c["matrices"], reference["matrices"]);
        assert_eq!(c["bounds"], reference["bounds"]);
        let ext = c["extensions"].as_array().unwrap();
        // gated + rotary (+ Gemma 2's logits); no L_phi note: GELU.
        assert_eq!(ext.len(), 2 + extra, "{mt}: {ext:?}");
        assert!(ext
            .iter()
            .all(|e| !e.as_str().unwrap().starts_with("L_phi")));
    }
}

/// A LLaMA checkpoint with QK-norm (Qwen3's and Gemma 3's names: per-head
/// `q_norm`/`k_norm` gains, and Gemma 3's `pre_feedforward_layernorm`)
/// under `model_type` `mt`.
fn qk_norm_model(name: &str, mt: &str, gemma: bool) -> PathBuf {
    let d = tmpdir(name);
    let gain = |n: usize| DenseMatrix {
        rows: 1,
        cols: n,
        data: (0..n).map(|i| 1.0 + i as f64 / 64.0).collect(),
    };
    let mut ts = Vec::new();
    for l in 0..LAYERS {
        ts.extend(llama_tensors(l, false));
        let p = format!("model.layers.{l}.");
        ts.push((format!("{p}self_attn.q_norm.weight"), gain(DH)));
        ts.push((format!("{p}self_attn.k_norm.weight"), gain(DH)));
        if gemma {
            ts.push((format!("{p}pre_feedforward_layernorm.weight"), gain(N)));
        }
    }
    let mut cfg = llama_config();
    cfg["model_type"] = json!(mt);
    if gemma {
        cfg["query_pre_attn_scalar"] = json!(DH);
    }
    write_st(&d, &ts, false, cfg);
    one_dimensional_gains(&d, DH);
    one_dimensional_gains(&d, N);
    d
}

/// Qwen3, OLMo 2 and Gemma 3 (QK-norm) are LLaMA's tensors beside the
/// norms' gains: the certificate (version 3) states exactly the LLaMA
/// certificate's spectra of every proxy matrix, the family's reason, and
/// no bound, no proxy and no extension; it matches the published schema,
/// and `inspect` says the bound does not apply, with config.json and from
/// the tensor names alone.
#[test]
fn qk_norm_families_certify_the_llama_spectra_without_a_bound() {
    let reference = llama_reference("llama-qknorm");
    let want: Vec<Value> = reference["matrices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let o = m.as_object().unwrap();
            Value::Object(
                common::SPECTRAL_KEYS
                    .iter()
                    .map(|k| (k.to_string(), o[*k].clone()))
                    .collect(),
            )
        })
        .collect();
    assert_eq!(want.len(), LAYERS * (2 * 12 + 2));
    let schema: Value = serde_json::from_slice(
        &std::fs::read(root().join("docs/certificate.schema.json")).unwrap(),
    )
    .unwrap();
    for (mt, gemma, layout) in [
        ("qwen3", false, "Qwen3"),
        ("olmo2", false, "Qwen3"),
        ("gemma3_text", true, "Gemma3"),
    ] {
        let d = qk_norm_model(mt, mt, gemma);
        let c = certify(&d);
        assert_eq!(c["model"]["architecture"], mt);
        assert_eq!(c["version"], 3, "{mt}");
        assert!(c.get("bounds").is_none(), "{mt}: a bound was computed");
        assert_eq!(
            c["bound_absent"].as_str(),
            Some(specbound::arch::families::QK_NORM)
        );
        assert_eq!(c["matrices"], json!([]));
        assert_eq!(c["layers"], json!([]));
        assert_eq!(c["extensions"], json!([]));
        assert_eq!(c["spectra"].as_array().unwrap(), &want, "{mt}");
        common::schema::validate(&schema, &c).unwrap();
        // The text summary says why, and names no bound.
        let out = run(&["certify", d.to_str().unwrap()]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("NO BOUND: QK-norm"), "{text}");
        assert!(!text.contains("B_ours"), "{text}");
        // inspect: with config.json, and from the tensor names alone.
        let j = ok_json(&run(&["inspect", d.to_str().unwrap(), "--json"]));
        assert_eq!(j["layout"], layout);
        assert!(
            j["bound"]
                .as_str()
                .unwrap()
                .starts_with("the paper's bound does not apply"),
            "{}",
            j["bound"]
        );
        std::fs::remove_file(d.join("config.json")).unwrap();
        let st = d.join("model.safetensors");
        let j = ok_json(&run(&[
            "inspect",
            st.to_str().unwrap(),
            "--heads",
            "12",
            "--json",
        ]));
        assert_eq!(j["layout"], layout, "{mt} from tensor names");
    }
    // The same tensors without the norms are LLaMA's, with a bound.
    let j = ok_json(&run(&[
        "inspect",
        reference["model"]["path"].as_str().unwrap(),
        "--json",
    ]));
    assert_eq!(j["layout"], "Llama");
}

fn write_value(dir: &Path, name: &str, v: &Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
    p
}

/// A certificate without a bound through every command that reads one,
/// with the real binary: `verify` re-derives it (alone and against the
/// weights) and refuses a bound stated for a family without one, a bound
/// left out for a family with one, another reason, and the new keys in a
/// version-1 certificate; `diff` compares its spectra; `report` lists it as
/// having no bound beside a certificate with one, and refuses it alone in
/// one line; `audit` refuses a bound claim about it in one line.
#[test]
fn a_certificate_without_a_bound_verifies_diffs_reports_and_audits() {
    let d = qk_norm_model("qwen3-commands", "qwen3", false);
    let dir = tmpdir("qwen3-commands-out");
    let c = certify(&d);
    let good = write_value(&dir, "qwen3.json", &c);
    let code = |args: &[&str]| {
        let out = run(args);
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            err,
        )
    };
    let g = good.to_str().unwrap();
    let (rc, out, err) = code(&["verify", g]);
    assert_eq!(rc, Some(0), "{out}{err}");
    let (rc, out, err) = code(&["verify", g, "--model", d.to_str().unwrap()]);
    assert_eq!(rc, Some(0), "{out}{err}");
    assert!(out.contains("hashes and weights"), "{out}");
    // Tampered: a singular value moved away from the weights' value.
    let mut bad = c.clone();
    bad["spectra"][0]["singular_values"][0] = json!({"lo": 1e6, "hi": 1e6});
    bad["spectra"][0]["spectral_norm"] = json!({"lo": 1e6, "hi": 1e6});
    let p = write_value(&dir, "moved.json", &bad);
    let (rc, _, err) = code(&[
        "verify",
        p.to_str().unwrap(),
        "--model",
        d.to_str().unwrap(),
    ]);
    assert_eq!(rc, Some(1), "{err}");
    // Another reason.
    let mut bad = c.clone();
    bad["bound_absent"] = json!("no reason");
    let p = write_value(&dir, "reason.json", &bad);
    let (rc, out, err) = code(&["verify", p.to_str().unwrap()]);
    assert_eq!(rc, Some(1), "{out}{err}");
    assert!(err.contains("bound_absent"), "{err}");
    // No reason at all, or a bound beside it: refused when read (exit 2).
    for (what, edit) in [
        ("no reason", json!({"bound_absent": null})),
        (
            "bounds",
            json!({"bounds": {"ours": {"lo": 1.0, "hi": 2.0}, "edelman": {"lo": 1.0, "hi": 2.0}}}),
        ),
        ("version 1", json!({"version": 1})),
    ] {
        let mut bad = c.clone();
        for (k, v) in edit.as_object().unwrap() {
            if v.is_null() {
                bad.as_object_mut().unwrap().remove(k);
            } else {
                bad[k] = v.clone();
            }
        }
        let p = write_value(&dir, "edited.json", &bad);
        let (rc, _, err) = code(&["verify", p.to_str().unwrap()]);
        assert_eq!(rc, Some(2), "{what}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{what}: {err}");
    }
    // A family with a bound whose certificate states none, and the converse.
    let bert = certify(&root().join("data/all-MiniLM-L6-v2"));
    let mut bad = c.clone();
    bad["model"]["architecture"] = json!("llama");
    let p = write_value(&dir, "llama-unbound.json", &bad);
    let (rc, _, err) = code(&["verify", p.to_str().unwrap()]);
    assert_eq!(rc, Some(1), "{err}");
    let mut bad = bert.clone();
    bad["model"]["architecture"] = json!("qwen3");
    let p = write_value(&dir, "qwen3-bound.json", &bad);
    let (rc, _, err) = code(&["verify", p.to_str().unwrap()]);
    assert_eq!(rc, Some(1), "{err}");
    assert!(err.contains("$.bounds"), "{err}");
    // diff: equal to itself; a moved spectrum is a change.
    let (rc, out, err) = code(&["diff", g, g]);
    assert_eq!(rc, Some(0), "{out}{err}");
    // report: beside a certificate with a bound, listed with its reason.
    let b = write_value(&dir, "bert.json", &bert);
    let page = dir.join("page.html");
    let (rc, out, err) = code(&[
        "report",
        g,
        b.to_str().unwrap(),
        "--out",
        page.to_str().unwrap(),
    ]);
    assert_eq!(rc, Some(0), "{out}{err}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("no bound"),
        "the page does not list the certificate without a bound"
    );
    let (rc, _, err) = code(&["report", g, "--out", page.to_str().unwrap()]);
    assert_eq!(rc, Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("no bound"), "{err}");
    // audit: a claim of a bound about the model is refused with the reason.
    let claims = dir.join("claims.csv");
    std::fs::write(&claims, "model_id,bound,value\nqwen3,ours,1.0\n").unwrap();
    let (rc, _, err) = code(&["audit", d.to_str().unwrap(), claims.to_str().unwrap()]);
    assert_eq!(rc, Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("QK-norm"), "{err}");
}
