//! `audit` on per-layer tables written by WeightWatcher itself
//! (`tests/data/weightwatcher/`, made by `scripts/make_ww_tables.py` with
//! weightwatcher 0.7.7): rows are matched by `longname` (WeightWatcher's
//! `name` is the module's short name, `dense` for many layers), the
//! float64 table's 17 digits get the `--rtol` hint, and its float64 results
//! are not labelled float32 rounding. Also specbound's own `spectra.csv`,
//! the table users take to other tools, audits back against its model.

mod common;

use common::bundled_arg;

use common::{assert_bad, root, run};
use serde_json::Value;
use std::path::PathBuf;

fn table(name: &str) -> PathBuf {
    root().join("tests/data/weightwatcher").join(name)
}

fn json(args: &[&str]) -> (Option<i32>, Value) {
    let out = run(args);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let j = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("not JSON: {err}"));
    (out.status.code(), j)
}

fn tmp(name: &str) -> PathBuf {
    let d = common::process_scratch().join("auditww");
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// The table's column `col`, row by row.
fn column(text: &str, col: &str) -> Vec<String> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let i = header.iter().position(|h| *h == col).unwrap();
    lines
        .map(|l| l.split(',').nth(i).unwrap().to_string())
        .collect()
}

#[test]
fn weightwatcher_short_names_are_matched_by_longname() {
    let t = table("minilm_encoder.csv");
    let text = std::fs::read_to_string(&t).unwrap();
    // The table is WeightWatcher's: `dense` names 18 of its 36 rows.
    let names = column(&text, "name");
    assert_eq!(names.iter().filter(|n| *n == "dense").count(), 18);
    let (b, ts) = (bundled_arg(), t.display().to_string());
    let (code, j) = json(&["audit", &b, &ts, "--rtol", "1e-12", "--json"]);
    assert_eq!(j["layout"], "weightwatcher", "{j}");
    assert_eq!(j["inconsistent"], 0, "{j}");
    // 9 certifiable columns a row (sv_max, sv_min, spectral_norm,
    // lambda_max, norm, log_norm, log_spectral_norm, stable_rank,
    // matrix_rank); sv_min's absolute f64 width exceeds 1e-12 relative.
    let results = j["results"].as_array().unwrap();
    assert_eq!(results.len(), 36 * 9, "{j}");
    assert_eq!(j["undecided"], 36, "{j}");
    assert_eq!(code, Some(3));
    let longnames = column(&text, "longname");
    for r in results {
        let line = r["line"].as_u64().unwrap() as usize;
        assert_eq!(
            r["subject"].as_str().unwrap(),
            format!("{}.weight", longnames[line - 2]),
            "{r}"
        );
    }
}

#[test]
fn weightwatcher_17_digits_get_the_rtol_hint_and_no_float32_label() {
    let (b, ts) = (
        bundled_arg(),
        table("minilm_encoder.csv").display().to_string(),
    );
    let (code, j) = json(&["audit", &b, &ts, "--json"]);
    // Its float64 `norm` (a sum of float64 eigenvalues) is a few float64
    // units off in 4 rows: inconsistent at 17 digits, and no float32 value.
    assert_eq!(code, Some(1), "{j}");
    assert_eq!(j["within_float32_rounding"], 0, "{j}");
    for r in j["results"].as_array().unwrap() {
        if r["verdict"] == "inconsistent" {
            assert_eq!(r["quantity"], "norm", "{r}");
            assert_eq!(r["rounding"]["float32_value"], false, "{r}");
            assert_eq!(r["rounding"]["float64"]["verdict"], "beyond", "{r}");
        }
    }
    assert!(j["undecided"].as_u64().unwrap() > 200, "{j}");
    assert!(j["hint"].as_str().unwrap().contains("--rtol 1e-12"), "{j}");
    let out = run(&["audit", &b, &ts]);
    let text = String::from_utf8_lossy(&out.stdout);
    let hints: Vec<&str> = text.lines().filter(|l| l.starts_with("hint:")).collect();
    assert_eq!(hints.len(), 1, "{text}");
    assert!(hints[0].contains("--rtol 1e-12"), "{text}");
    assert!(text.contains("not a float32 value"), "{text}");
    // With a tolerance, no hint.
    let (_, j) = json(&["audit", &b, &ts, "--rtol", "1e-12", "--json"]);
    assert!(j.get("hint").is_none(), "{j}");
}

#[test]
fn weightwatcher_short_name_without_longname_is_refused_as_ambiguous() {
    let text = std::fs::read_to_string(table("minilm_encoder.csv")).unwrap();
    // The table without its longname column: `dense` is ambiguous.
    let i = text
        .lines()
        .next()
        .unwrap()
        .split(',')
        .position(|h| h == "longname")
        .unwrap();
    let cut: String = text
        .lines()
        .map(|l| {
            let mut f: Vec<&str> = l.split(',').collect();
            f.remove(i);
            f.join(",") + "\n"
        })
        .collect();
    let p = tmp("no_longname.csv");
    std::fs::write(&p, cut).unwrap();
    assert_bad(
        &["audit", &bundled_arg(), p.to_str().unwrap()],
        &["'query' names 6 tensors", "longname"],
    );
}

#[test]
fn weightwatcher_longname_with_a_wrapper_prefix_names_the_tensor() {
    // A SentenceTransformer analysed whole: module paths start `0.auto_model.`.
    let text = std::fs::read_to_string(table("minilm_encoder.csv")).unwrap();
    let p = tmp("prefixed.csv");
    std::fs::write(
        &p,
        text.replace(",encoder.layer.", ",0.auto_model.encoder.layer."),
    )
    .unwrap();
    let (code, j) = json(&[
        "audit",
        &bundled_arg(),
        p.to_str().unwrap(),
        "--rtol",
        "1e-12",
        "--json",
    ]);
    assert_eq!(
        (code, &j["inconsistent"]),
        (Some(3), &Value::from(0)),
        "{j}"
    );
    assert_eq!(
        j["results"][0]["subject"],
        "encoder.layer.0.attention.self.query.weight"
    );
}

#[test]
fn weightwatcher_full_minilm_table_audits_against_the_full_model() {
    let full = root().join("../shared/models/all-MiniLM-L6-v2");
    let full = if full.is_dir() {
        full
    } else {
        PathBuf::from("/work/shared/models/all-MiniLM-L6-v2")
    };
    if !full.is_dir() {
        eprintln!("skipped: {} is absent", full.display());
        return;
    }
    let ts = table("minilm_full.csv").display().to_string();
    let (code, j) = json(&[
        "audit",
        full.to_str().unwrap(),
        &ts,
        "--rtol",
        "1e-12",
        "--json",
    ]);
    assert_ne!(code, Some(2), "{j}");
    assert_eq!(j["inconsistent"], 0, "{j}");
    // 39 rows: word and position embeddings, 36 encoder layers, the pooler.
    let subjects: std::collections::BTreeSet<&str> = j["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["subject"].as_str().unwrap())
        .collect();
    assert_eq!(subjects.len(), 39, "{subjects:?}");
    assert!(subjects.contains("embeddings.word_embeddings.weight"));
    assert!(subjects.contains("pooler.dense.weight"));
}

#[test]
fn spectra_csv_audits_against_the_model_it_came_from() {
    let m = root().join("tests/data/formats/safetensors");
    let dir = tmp("spectra_csv");
    let _ = std::fs::remove_dir_all(&dir);
    let out = run(&[
        "spectra",
        m.to_str().unwrap(),
        "--csv",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = dir.join("spectra.csv");
    let (code, j) = json(&[
        "audit",
        m.to_str().unwrap(),
        csv.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(j["layout"], "spectra", "{j}");
    // 8 matrices, 12 interval columns each (the Schatten columns aside).
    assert_eq!(j["results"].as_array().unwrap().len(), 8 * 12, "{j}");
    assert_eq!((code, &j["consistent"]), (Some(0), &Value::from(96)), "{j}");
    // A stated interval moved off the certified value is inconsistent.
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let header: Vec<&str> = lines[0].split(',').collect();
    let (lo, hi) = (
        header
            .iter()
            .position(|h| *h == "spectral_norm_lo")
            .unwrap(),
        header
            .iter()
            .position(|h| *h == "spectral_norm_hi")
            .unwrap(),
    );
    let mut f: Vec<String> = lines[1].split(',').map(String::from).collect();
    for i in [lo, hi] {
        f[i] = format!("{}", f[i].parse::<f64>().unwrap() * 1.001);
    }
    lines[1] = f.join(",");
    std::fs::write(&csv, lines.join("\n") + "\n").unwrap();
    let (code, j) = json(&[
        "audit",
        m.to_str().unwrap(),
        csv.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(
        (code, &j["inconsistent"]),
        (Some(1), &Value::from(1)),
        "{j}"
    );
}
