//! `certify --csv` of families without a bound (a mixture of experts with a
//! shared expert, DeBERTa-v2, a BART decoder), built by re-emitting the
//! real MiniLM layer 0 in each family's tensor names: `matrix_summary.csv`
//! has one row per matrix of the certificate's `spectra` (the experts in an
//! `expert` column), each `_lo`/`_hi` the certificate's interval ends
//! exactly; the proxy tables have no rows; `audit` reads the table back
//! (exit 0 against the model it came from, exit 1 for a moved interval).
//! Regression: these tables were header-only, with exit 0.

mod common;

use common::tmpdir;

use common::reemit::{layer, write_st};
use common::{csv_rows, ok_json, run};
use serde_json::{json, Value};
use specbound::matrix::DenseMatrix;
use std::path::Path;

const N: usize = 384;
const I: usize = 1536;
const HEADS: usize = 12;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `m[r0..r0 + nr, ..]`: stored numbers moved, none computed.
fn top_rows(m: &DenseMatrix, r0: usize, nr: usize) -> DenseMatrix {
    DenseMatrix {
        rows: nr,
        cols: m.cols,
        data: m.data[r0 * m.cols..(r0 + nr) * m.cols].to_vec(),
    }
}

/// `m[.., c0..c0 + nc]`.
fn cols(m: &DenseMatrix, c0: usize, nc: usize) -> DenseMatrix {
    let data = (0..m.rows)
        .flat_map(|i| m.data[i * m.cols + c0..i * m.cols + c0 + nc].to_vec())
        .collect();
    DenseMatrix {
        rows: m.rows,
        cols: nc,
        data,
    }
}

/// Qwen2-MoE, one layer: MiniLM layer 0's attention, two routed experts
/// and a shared one, each a distinct 384-wide block of its feed-forward.
fn qwen2_moe() -> std::path::PathBuf {
    let w = layer(0);
    let d = tmpdir("csv-qwen2moe");
    let p = "model.layers.0.";
    let mut ts: Vec<(String, DenseMatrix)> = ["q_proj", "k_proj", "v_proj", "o_proj"]
        .iter()
        .zip(&w[..4])
        .map(|(n, m)| (format!("{p}self_attn.{n}.weight"), m.clone()))
        .collect();
    let block = |b: usize| {
        [
            top_rows(&w[4], b * N, N),
            top_rows(&w[4], ((b + 1) % 4) * N, N),
            cols(&w[5], b * N, N),
        ]
    };
    for (e, prefix) in ["experts.0", "experts.1", "shared_expert"]
        .iter()
        .enumerate()
    {
        for (n, m) in ["gate_proj", "up_proj", "down_proj"].iter().zip(block(e)) {
            ts.push((format!("{p}mlp.{prefix}.{n}.weight"), m));
        }
    }
    let router = |rows: usize| DenseMatrix {
        rows,
        cols: N,
        data: (0..rows * N).map(|i| (i % 7) as f64 / 8.0 - 0.25).collect(),
    };
    ts.push((format!("{p}mlp.gate.weight"), router(2)));
    ts.push((format!("{p}mlp.shared_expert_gate.weight"), router(1)));
    write_st(
        &d,
        &ts,
        false,
        json!({"model_type": "qwen2_moe", "num_hidden_layers": 1, "hidden_size": N,
               "num_attention_heads": HEADS, "num_key_value_heads": HEADS, "head_dim": 32,
               "intermediate_size": N, "num_experts_per_tok": 1, "num_experts": 2,
               "moe_intermediate_size": N, "shared_expert_intermediate_size": N,
               "decoder_sparse_step": 1}),
    );
    d
}

/// DeBERTa-v2, one layer of MiniLM layer 0.
fn deberta() -> std::path::PathBuf {
    let w = layer(0);
    let d = tmpdir("csv-deberta");
    let p = "deberta.encoder.layer.0.";
    let names = [
        "attention.self.query_proj",
        "attention.self.key_proj",
        "attention.self.value_proj",
        "attention.output.dense",
        "intermediate.dense",
        "output.dense",
    ];
    let ts: Vec<(String, DenseMatrix)> = names
        .iter()
        .zip(&w)
        .map(|(n, m)| (format!("{p}{n}.weight"), m.clone()))
        .collect();
    write_st(
        &d,
        &ts,
        false,
        json!({"model_type": "deberta-v2", "num_hidden_layers": 1, "hidden_size": N,
               "num_attention_heads": HEADS, "intermediate_size": I, "hidden_act": "gelu",
               "relative_attention": true, "pos_att_type": ["p2c", "c2p"]}),
    );
    d
}

/// BART, one encoder and one decoder layer of MiniLM layer 0 (the decoder's
/// cross-attention too).
fn bart() -> std::path::PathBuf {
    let w = layer(0);
    let d = tmpdir("csv-bart");
    let attn = ["q_proj", "k_proj", "v_proj", "out_proj"];
    let mut ts = Vec::new();
    for (stack, parts) in [
        ("encoder", vec!["self_attn"]),
        ("decoder", vec!["self_attn", "encoder_attn"]),
    ] {
        let p = format!("model.{stack}.layers.0.");
        for part in parts {
            for (n, m) in attn.iter().zip(&w[..4]) {
                ts.push((format!("{p}{part}.{n}.weight"), m.clone()));
            }
        }
        ts.push((format!("{p}fc1.weight"), w[4].clone()));
        ts.push((format!("{p}fc2.weight"), w[5].clone()));
    }
    write_st(
        &d,
        &ts,
        false,
        json!({"model_type": "bart", "d_model": N, "encoder_layers": 1, "decoder_layers": 1,
               "encoder_attention_heads": HEADS, "decoder_attention_heads": HEADS,
               "encoder_ffn_dim": I, "decoder_ffn_dim": I, "activation_function": "gelu"}),
    );
    d
}

/// The interval `[lo, hi]` of a certificate value, as f64 ends.
fn ends(v: &Value) -> (f64, f64) {
    (v["lo"].as_f64().unwrap(), v["hi"].as_f64().unwrap())
}

/// Each row of `matrix_summary.csv` is the certificate's spectrum entry of
/// the same position: ids, shape, rank and every interval end exactly.
fn check_rows(rows: &[std::collections::BTreeMap<String, String>], c: &Value, what: &str) {
    let spectra = c["spectra"].as_array().unwrap();
    assert_eq!(rows.len(), spectra.len(), "{what}: a row per matrix");
    for (r, e) in rows.iter().zip(spectra) {
        let at = format!(
            "{what}: layer {} {} head {}",
            e["layer"], e["type"], e["head"]
        );
        assert_eq!(r["layer"], e["layer"].to_string(), "{at}");
        assert_eq!(r["head"], e["head"].to_string(), "{at}");
        assert_eq!(r["matrix_type"], e["type"].as_str().unwrap(), "{at}");
        assert_eq!(r["rows"], e["rows"].to_string(), "{at}");
        assert_eq!(r["cols"], e["cols"].to_string(), "{at}");
        assert_eq!(r["rank_lo"], e["rank"]["lo"].to_string(), "{at}");
        assert_eq!(r["rank_hi"], e["rank"]["hi"].to_string(), "{at}");
        if let Some(x) = r.get("expert") {
            let want = match &e["expert"] {
                Value::Null => String::new(),
                Value::String(s) => s.clone(),
                v => v.to_string(),
            };
            assert_eq!(x, &want, "{at}: expert");
        }
        for q in [
            "spectral_norm",
            "frobenius_norm",
            "nuclear_norm",
            "norm_21",
            "norm_11",
            "stable_rank",
        ] {
            let (lo, hi) = ends(&e[q]);
            let cell = |k: &str| r[&format!("{q}_{k}")].parse::<f64>().unwrap();
            assert_eq!((cell("lo"), cell("hi")), (lo, hi), "{at}: {q}");
        }
    }
}

/// `certify MODEL --csv DIR` of each family without a bound: rows, the
/// proxy tables empty, and `audit` of the table against the model.
#[test]
fn certify_csv_of_families_without_a_bound_has_their_spectra_and_audits_cleanly() {
    let cases = [
        ("qwen2_moe", qwen2_moe(), vec![], true),
        ("deberta-v2", deberta(), vec![], false),
        ("bart decoder", bart(), vec!["--stack", "decoder"], false),
    ];
    for (what, model, extra, experts) in cases {
        let out = model.join("tables");
        let mut args = vec!["certify", s(&model), "--json", "--csv", s(&out)];
        args.extend(&extra);
        let c = ok_json(&run(&args));
        assert!(c.get("bounds").is_none(), "{what}: no bound expected");
        let rows = csv_rows(&out.join("matrix_summary.csv"));
        check_rows(&rows, &c, what);
        assert_eq!(rows[0].contains_key("expert"), experts, "{what}");
        if experts {
            let col: Vec<&str> = rows.iter().map(|r| r["expert"].as_str()).collect();
            assert!(col.contains(&"0") && col.contains(&"1") && col.contains(&"shared"));
        }
        for t in [
            "schatten_opt.csv",
            "observed_bounds.csv",
            "p_contribution_raw.csv",
        ] {
            let text = std::fs::read_to_string(out.join(t)).unwrap();
            assert_eq!(
                text.lines().count(),
                1,
                "{what}: {t} has proxies' rows only"
            );
        }
        // audit certifies the stack the table is about (`--stack`, as certify).
        let table = out.join("matrix_summary.csv");
        let mut audit = vec!["audit", s(&model), s(&table), "--json"];
        audit.extend(&extra);
        let a = run(&audit);
        let j = ok_json(&a);
        assert_eq!(j["layout"], "matrix_summary", "{what}");
        assert_eq!(j["inconsistent"], 0, "{what}");
        assert_eq!(j["undecided"], 0, "{what}");
        assert_eq!(
            j["consistent"].as_u64(),
            Some(9 * rows.len() as u64),
            "{what}"
        );
        // One interval moved above the certified one: inconsistent, exit 1.
        let text = std::fs::read_to_string(&table).unwrap();
        let mut lines: Vec<String> = text.lines().map(String::from).collect();
        let header: Vec<&str> = lines[0].split(',').collect();
        let at = |n: &str| header.iter().position(|h| *h == n).unwrap();
        let (v, lo, hi) = (
            at("spectral_norm"),
            at("spectral_norm_lo"),
            at("spectral_norm_hi"),
        );
        let mut cells: Vec<String> = lines[1].split(',').map(String::from).collect();
        let moved = format!("{}", cells[hi].parse::<f64>().unwrap() * 2.0);
        cells[v] = moved.clone();
        cells[lo] = moved.clone();
        cells[hi] = moved;
        lines[1] = cells.join(",");
        let bad = model.join("moved.csv");
        std::fs::write(&bad, lines.join("\n") + "\n").unwrap();
        audit[2] = s(&bad);
        let a = run(&audit);
        assert_eq!(a.status.code(), Some(1), "{what}: a moved interval");
        let j: Value = serde_json::from_slice(&a.stdout).unwrap();
        assert_eq!(j["inconsistent"], 1, "{what}");
    }
}
