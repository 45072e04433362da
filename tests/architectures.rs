//! Every supported layout, built by re-emitting the real MiniLM matrices in
//! that layout (renamed, transposed, fused, GQA-shared, GGUF-encoded), must
//! give the certified results of the BERT-layout run wherever the
//! mathematics says they are equal.

mod common;

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

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("specbound-arch-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The real weights of layer l: q, k, v, o, ff1, ff2 ([out, in]).
fn layer(l: usize) -> Vec<DenseMatrix> {
    let ck = Checkpoint::open(&root().join("data/all-MiniLM-L6-v2")).unwrap();
    [
        "attention.self.query",
        "attention.self.key",
        "attention.self.value",
        "attention.output.dense",
        "intermediate.dense",
        "output.dense",
    ]
    .iter()
    .map(|t| {
        ck.read(&format!("encoder.layer.{l}.{t}.weight"))
            .unwrap()
            .matrix
    })
    .collect()
}

fn t(x: &DenseMatrix) -> DenseMatrix {
    let mut data = vec![0.0; x.data.len()];
    for i in 0..x.rows {
        for j in 0..x.cols {
            data[j * x.rows + i] = x.data[i * x.cols + j];
        }
    }
    DenseMatrix {
        rows: x.cols,
        cols: x.rows,
        data,
    }
}

fn rows(x: &DenseMatrix, idx: &[usize]) -> DenseMatrix {
    let mut data = Vec::with_capacity(idx.len() * x.cols);
    for &r in idx {
        data.extend_from_slice(&x.data[r * x.cols..(r + 1) * x.cols]);
    }
    DenseMatrix {
        rows: idx.len(),
        cols: x.cols,
        data,
    }
}

fn hcat(mats: &[&DenseMatrix]) -> DenseMatrix {
    let r = mats[0].rows;
    let mut data = Vec::new();
    for i in 0..r {
        for m in mats {
            data.extend_from_slice(&m.data[i * m.cols..(i + 1) * m.cols]);
        }
    }
    DenseMatrix {
        rows: r,
        cols: mats.iter().map(|m| m.cols).sum(),
        data,
    }
}

fn write_st(dir: &Path, tensors: &[(String, DenseMatrix)], f64_dtype: bool, config: Value) {
    if !f64_dtype {
        for (n, m) in tensors {
            assert!(
                m.data.iter().all(|&x| (x as f32) as f64 == x),
                "{n}: re-emitting must not round"
            );
        }
    }
    let refs: Vec<(String, &DenseMatrix)> = tensors.iter().map(|(n, m)| (n.clone(), m)).collect();
    common::write_safetensors(
        &dir.join("model.safetensors"),
        &refs,
        if f64_dtype { "F64" } else { "F32" },
    );
    std::fs::write(
        dir.join("config.json"),
        serde_json::to_vec(&config).unwrap(),
    )
    .unwrap();
}

fn certify(path: &Path) -> Value {
    ok_json(&run(&["certify", path.to_str().unwrap(), "--json"]))
}

fn bert_reference(dir: &Path, transform_kv: impl Fn(&DenseMatrix) -> DenseMatrix) -> Value {
    let mut ts = Vec::new();
    for l in 0..LAYERS {
        let w = layer(l);
        let names = [
            "attention.self.query",
            "attention.self.key",
            "attention.self.value",
            "attention.output.dense",
            "intermediate.dense",
            "output.dense",
        ];
        for (k, (name, m)) in names.iter().zip(w.iter()).enumerate() {
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
