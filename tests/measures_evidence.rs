//! The measures as evidence: `diff` states each measure's certified change,
//! `audit` judges an authors' measures table (long `measure,value` rows or
//! a column per measure) and a raw-weights norms table against the
//! certified intervals. Soundness against exact oracles: the model `B` is
//! `2 A` entrywise (exact in float32), so the exact change of every log
//! measure is an integer multiple of `ln 2` (bracketed by MPFR with
//! directed rounding), and with `--init A` the distance `B - A = A`, so
//! `frobenius_distance` of `B` is the exact rational `param_norm` of `A`.

mod common;

use common::tmpdir;

use std::path::{Path, PathBuf};

use rug::float::Round;
use rug::{Float, Rational};
use serde_json::{json, Value};
use specbound::matrix::DenseMatrix;

/// Layers of the tiny model; each has 6 raw weight matrices.
const LAYERS: usize = 2;
const D: u32 = 6 * LAYERS as u32;

/// The weights of the tiny BERT (hidden 8, 2 heads, feed-forward 16),
/// scaled by `c` (a power of two: exact), as `(name, matrix)`; entries are
/// multiples of `c/8`.
fn weights(c: f64) -> Vec<(String, DenseMatrix)> {
    let mut v = Vec::new();
    for l in 0..LAYERS {
        for (t, (n, r, cols)) in [
            ("attention.self.query", 8, 8),
            ("attention.self.key", 8, 8),
            ("attention.self.value", 8, 8),
            ("attention.output.dense", 8, 8),
            ("intermediate.dense", 16, 8),
            ("output.dense", 8, 16),
        ]
        .into_iter()
        .enumerate()
        {
            let seed = 5 * l + 3 * t + 1;
            let data = (0..r * cols)
                .map(|k| c * (((k * 3 + seed * k / 5 + seed) % 11) as f64 / 8.0 - 0.625))
                .collect();
            v.push((
                format!("encoder.layer.{l}.{n}.weight"),
                DenseMatrix {
                    rows: r,
                    cols,
                    data,
                },
            ));
        }
    }
    v
}

fn write_model(name: &str, c: f64) -> PathBuf {
    write_model_as(name, c, "F32", None)
}

/// The tiny BERT scaled by `c`, stored as `dtype`, with the tensor named
/// `zero` (if any) all zeros.
fn write_model_as(name: &str, c: f64, dtype: &str, zero: Option<&str>) -> PathBuf {
    let d = tmpdir(name);
    let mut ts = weights(c);
    for (n, m) in &mut ts {
        if Some(n.as_str()) == zero {
            m.data.iter_mut().for_each(|x| *x = 0.0);
        }
    }
    let refs: Vec<(String, &DenseMatrix)> = ts.iter().map(|(n, m)| (n.clone(), m)).collect();
    common::write_safetensors(&d.join("model.safetensors"), &refs, dtype);
    let cfg = json!({"model_type": "bert", "num_hidden_layers": LAYERS, "hidden_size": 8,
                     "num_attention_heads": 2, "intermediate_size": 16, "hidden_act": "gelu"});
    std::fs::write(d.join("config.json"), cfg.to_string()).unwrap();
    d
}

fn certify(model: &Path, out: &Path, init: Option<&Path>) -> Value {
    let mut args = vec![
        "certify".to_string(),
        "-q".into(),
        "--measures".into(),
        "--out".into(),
        out.display().to_string(),
    ];
    if let Some(i) = init {
        args.extend(["--init".into(), i.display().to_string()]);
    }
    args.push(model.display().to_string());
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = common::run(&a);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap()
}

/// `[lo, hi]` f64 bounds of `k ln 2`, by MPFR with directed rounding.
fn k_ln2(k: u32) -> (f64, f64) {
    let lo = Float::with_val_round(128, Float::parse("2").unwrap(), Round::Down).0;
    let ln_lo = Float::with_val_round(128, lo.ln_ref(), Round::Down).0 * k;
    let ln_hi = Float::with_val_round(128, Float::with_val(128, 2).ln_ref(), Round::Up).0 * k;
    (
        ln_lo.to_f64_round(Round::Down),
        ln_hi.to_f64_round(Round::Up),
    )
}

/// The exact `sum_i ||W_i||_F^2` of the weights scaled by `c`.
fn exact_param_norm(c: f64) -> Rational {
    weights(c)
        .iter()
        .flat_map(|(_, m)| m.data.iter())
        .map(|x| Rational::from_f64(*x).unwrap().square())
        .sum()
}

fn iv(v: &Value) -> (f64, f64) {
    (v["lo"].as_f64().unwrap(), v["hi"].as_f64().unwrap())
}

#[test]
fn diff_states_every_measure_with_a_change_containing_the_exact_change() {
    let (a, b) = (write_model("diff-a", 1.0), write_model("diff-b", 2.0));
    let dir = tmpdir("diff");
    let ca = certify(&a, &dir.join("a.json"), None);
    certify(&b, &dir.join("b.json"), None);
    let out = common::run(&[
        "diff",
        "--json",
        dir.join("a.json").to_str().unwrap(),
        dir.join("b.json").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "every measure changed");
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = j["measures"].as_array().unwrap();
    let stated: Vec<&str> = ca["measures"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| *k != "d")
        .map(String::as_str)
        .collect();
    assert_eq!(rows.len(), stated.len(), "{rows:?}");
    // Exact change of each log measure under W -> 2W: a multiple of ln 2.
    let k_of = |name: &str| match name {
        "log_prod_of_spec" | "log_prod_of_fro" | "log_spec_orig" => Some(2 * D),
        "log_sum_of_spec" | "log_sum_of_fro" => Some(2),
        "log_bartlett" => Some(D),
        _ => None,
    };
    let mut checked = 0;
    for r in rows {
        let name = r["quantity"].as_str().unwrap();
        assert_eq!(r["label"], format!("measure {name}"));
        assert_eq!(r["verdict"], "larger", "{name}");
        let change = (
            r["change"][0].as_f64().unwrap(),
            r["change"][1].as_f64().unwrap(),
        );
        if let Some(k) = k_of(name) {
            let (lo, hi) = k_ln2(k);
            assert!(
                change.0 <= lo && hi <= change.1,
                "{name}: {change:?} misses {k} ln 2"
            );
            checked += 1;
        }
        if name == "param_norm" {
            let exact = exact_param_norm(1.0) * 3u32;
            assert!(
                Rational::from_f64(change.0).unwrap() <= exact
                    && exact <= Rational::from_f64(change.1).unwrap(),
                "param_norm change {change:?}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 7);
    assert_eq!(j["measures_beyond_rtol"], rows.len());
    // The text lists them after the per-matrix summary.
    let t = common::run(&[
        "diff",
        dir.join("a.json").to_str().unwrap(),
        dir.join("b.json").to_str().unwrap(),
    ]);
    let text = String::from_utf8(t.stdout).unwrap();
    let at = text
        .find("norm-based measures (docs/measures.md)")
        .expect(&text);
    assert!(
        text.find("matrices whose own spectrum").unwrap() < at,
        "{text}"
    );
    for n in &stated {
        assert!(text.contains(&format!("measure {n} ")), "{n}: {text}");
    }
    // Against itself: every measure indistinguishable, exit 0.
    let same = common::ok_json(&common::run(&[
        "diff",
        "--json",
        dir.join("a.json").to_str().unwrap(),
        dir.join("a.json").to_str().unwrap(),
    ]));
    assert!(same["measures"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["verdict"] == "indistinguishable"));
}

/// Runs `audit` and returns (exit code, JSON report).
fn audit(model: &Path, claims: &Path, extra: &[&str]) -> (i32, Value) {
    let mut args = vec!["audit", "--json"];
    args.extend_from_slice(extra);
    args.push(model.to_str().unwrap());
    args.push(claims.to_str().unwrap());
    let o = common::run(&args);
    let code = o.status.code().unwrap();
    assert!(code != 2, "{}", String::from_utf8_lossy(&o.stderr));
    (code, serde_json::from_slice(&o.stdout).unwrap())
}

#[test]
fn audit_judges_measures_tables_long_and_wide_and_raw_weight_norms() {
    let a = write_model("audit-a", 1.0);
    let b = write_model("audit-b", 2.0);
    let dir = tmpdir("audit");
    let cb = certify(&b, &dir.join("b.json"), Some(&a));
    let m = cb["measures"].as_object().unwrap();
    let mid = |v: &Value| {
        let (lo, hi) = iv(v);
        lo + (hi - lo) / 2.0
    };
    // Long shape: a row per measure, the certificate's midpoints (a
    // float64 value written in full), and a wrong one.
    let mut long = String::from("measure,value\n");
    let mut wide_h = Vec::new();
    let mut wide_v = Vec::new();
    for (k, v) in m.iter().filter(|(k, _)| *k != "d") {
        long.push_str(&format!("{k},{:e}\n", mid(v)));
        wide_h.push(k.clone());
        wide_v.push(format!("{:e}", mid(v)));
    }
    let exact = exact_param_norm(1.0);
    let exact_dec = exact.to_f64(); // multiples of 1/64: exact in binary64
    assert_eq!(Rational::from_f64(exact_dec).unwrap(), exact);
    long.push_str(&format!("frobenius_distance,{exact_dec}\n"));
    std::fs::write(dir.join("long.csv"), &long).unwrap();
    let init = ["--init", a.to_str().unwrap(), "--rtol", "1e-9"];
    let (code, j) = audit(&b, &dir.join("long.csv"), &init);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["layout"], "measures");
    assert_eq!(j["consistent"], m.len()); // the 13 measures + the exact one
                                          // Wide shape: one row, a column per measure (as a library's table), model_id too.
    let wide = format!("model_id,{}\nb,{}\n", wide_h.join(","), wide_v.join(","));
    std::fs::write(dir.join("wide.csv"), wide).unwrap();
    let (code, j) = audit(&b, &dir.join("wide.csv"), &init);
    assert_eq!((code, &j["layout"]), (0, &json!("measures_wide")), "{j}");
    assert_eq!(j["consistent"], m.len() - 1);
    // A wrong claim is inconsistent (exit 1).
    let (lo, _) = iv(&cb["measures"]["param_norm"]);
    std::fs::write(
        dir.join("wrong.csv"),
        format!("measure,value\nparam_norm,{}\n", lo * 0.5),
    )
    .unwrap();
    let (code, j) = audit(&b, &dir.join("wrong.csv"), &[]);
    assert_eq!((code, j["inconsistent"].as_u64()), (1, Some(1)), "{j}");
    // The raw weights' norms, per matrix.
    let mut raw = String::from(
        "layer,role,spectral_norm,frobenius_norm,norm_21_rows,init_distance_frobenius_norm\n",
    );
    for w in cb["raw_weights"].as_array().unwrap() {
        raw.push_str(&format!(
            "{},{},{:e},{:e},{:e},{:e}\n",
            w["layer"],
            w["role"].as_str().unwrap(),
            mid(&w["spectral_norm"]),
            mid(&w["frobenius_norm"]),
            mid(&w["norm_21_rows"]),
            mid(&w["init_distance"]["frobenius_norm"]),
        ));
    }
    std::fs::write(dir.join("raw.csv"), raw).unwrap();
    let (code, j) = audit(&b, &dir.join("raw.csv"), &init);
    assert_eq!((code, &j["layout"]), (0, &json!("raw_weights")), "{j}");
    assert_eq!(j["consistent"], 4 * 6 * LAYERS);
}

#[test]
fn audit_refuses_a_distance_measure_without_init_in_one_line() {
    let a = write_model("noinit", 1.0);
    let dir = tmpdir("noinit-claims");
    let c = dir.join("c.csv");
    std::fs::write(&c, "measure,value\nfrobenius_distance,1.5\n").unwrap();
    common::assert_bad(
        &["audit", a.to_str().unwrap(), c.to_str().unwrap()],
        &["frobenius_distance needs the initialisation: pass --init MODEL"],
    );
    std::fs::write(&c, "measure,value\nno_such,1.5\n").unwrap();
    common::assert_bad(
        &["audit", a.to_str().unwrap(), c.to_str().unwrap()],
        &["unknown measure 'no_such'"],
    );
}

/// Regression: auditing a `measures.csv` whose distance measures follow
/// other measures, without `--init`, certified the measures first (5.9 s on
/// MiniLM) and refused only at the distance row. It is refused before
/// anything is computed, naming the first such row; so is a raw-weights
/// table with an `init_distance_*` column.
#[test]
fn audit_of_measures_csv_without_init_refuses_before_computing() {
    let a = write_model("noinit-first", 1.0);
    let dir = tmpdir("noinit-first-claims");
    let c = dir.join("measures.csv");
    std::fs::write(
        &c,
        "model_id,measure,value\nm,log_prod_of_spec,1.0\nm,param_norm,2.0\nm,frobenius_distance,1.5\n",
    )
    .unwrap();
    common::assert_bad(
        &["audit", a.to_str().unwrap(), c.to_str().unwrap()],
        &[
            "line 4",
            "frobenius_distance needs the initialisation: pass --init MODEL (nothing was computed)",
        ],
    );
    let r = dir.join("raw.csv");
    std::fs::write(
        &r,
        "layer,role,spectral_norm,init_distance_frobenius_norm\n0,query,1.0,\n0,key,1.0,0.5\n",
    )
    .unwrap();
    common::assert_bad(
        &["audit", a.to_str().unwrap(), r.to_str().unwrap()],
        &[
            "line 3",
            "init_distance_frobenius_norm needs the initialisation",
            "(nothing was computed)",
        ],
    );
}

/// `certify --measures --csv DIR` writes `measures.csv` beside the four
/// tables, with the study's columns and the certificate's intervals; every
/// table it writes audits cleanly against the model (exit 0), the measures
/// table with the same `--init`. Without measures no such table is written.
#[test]
fn certify_csv_writes_a_measures_table_that_audits_cleanly() {
    let a = write_model("csv-a", 1.0);
    let b = write_model("csv-b", 2.0);
    let dir = tmpdir("csv");
    let csv = dir.join("tables");
    let o = common::run(&[
        "certify",
        "-q",
        "--init",
        a.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
        "--model-id",
        "b",
        "--out",
        dir.join("b.json").to_str().unwrap(),
        b.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let cert: specbound::certificate::Certificate =
        serde_json::from_slice(&std::fs::read(dir.join("b.json")).unwrap()).unwrap();
    let text = std::fs::read_to_string(csv.join("measures.csv")).unwrap();
    assert_eq!(
        text.lines().next().unwrap(),
        "model_id,hidden_size,num_hidden_layers,num_heads,measure,value,value_lo,value_hi"
    );
    let rows = common::csv_rows(&csv.join("measures.csv"));
    let want = specbound::report::measures::measure_rows(&cert);
    assert_eq!(rows.len(), want.len());
    assert_eq!(want.len(), 13, "every measure, the init ones included");
    for (r, (name, v)) in rows.iter().zip(&want) {
        assert_eq!(
            (r["model_id"].as_str(), r["hidden_size"].as_str()),
            ("b", "8")
        );
        assert_eq!(r["measure"], *name);
        let lo: f64 = r["value_lo"].parse().unwrap();
        let hi: f64 = r["value_hi"].parse().unwrap();
        assert_eq!((lo, hi), (v.lo, v.hi), "{name}");
    }
    let init = ["--init", a.to_str().unwrap()];
    for name in specbound::report::csv::TABLE_NAMES
        .into_iter()
        .chain([specbound::report::csv::MEASURES_TABLE])
    {
        let (code, j) = audit(&b, &csv.join(name), &init);
        assert_eq!(code, 0, "{name}: {j}");
        assert!(j["consistent"].as_u64().unwrap() > 0, "{name}: {j}");
    }
    // No measures: the four tables alone.
    let plain = dir.join("plain");
    let o = common::run(&[
        "certify",
        "-q",
        "--csv",
        plain.to_str().unwrap(),
        b.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    assert!(!plain.join("measures.csv").exists());
    assert!(plain.join("observed_bounds.csv").exists());
}

/// Regression (issue 33): one all-zero raw weight (a zero-initialised
/// step-0 checkpoint has them) made `certify --measures` fail with no
/// certificate. Now the certificate is written with its bound; the
/// measures that are -inf or undefined (logs and ratios of the zero
/// weight's norms) are absent, each with the reason naming the weight,
/// and every other measure is stated; `verify` accepts it.
#[test]
fn one_zero_weight_lost_the_whole_certificate() {
    let m = write_model_as(
        "zero",
        1.0,
        "F32",
        Some("encoder.layer.1.attention.self.value.weight"),
    );
    let dir = tmpdir("zero-out");
    let out = dir.join("c.json");
    let c = certify(&m, &out, None);
    assert!(c["bounds"]["ours"]["hi"].as_f64().unwrap().is_finite());
    let ms = &c["measures"];
    for k in [
        "log_prod_of_spec",
        "log_sum_of_spec",
        "log_prod_of_fro",
        "log_sum_of_fro",
        "log_spec_orig",
        "bartlett",
        "log_bartlett",
    ] {
        assert!(ms.get(k).is_none(), "{k} is -inf or undefined");
        let why = ms["absent"][k].as_str().unwrap();
        assert!(why.contains("raw_weights[8]"), "{k}: {why}");
    }
    // param_norm is finite: the exact sum of squares, zero weight included.
    let mut ws = weights(1.0);
    ws[8].1.data.iter_mut().for_each(|x| *x = 0.0);
    let exact: Rational = ws
        .iter()
        .flat_map(|(_, m)| m.data.iter())
        .map(|x| Rational::from_f64(*x).unwrap().square())
        .sum();
    let (lo, hi) = iv(&ms["param_norm"]);
    assert!(Rational::from_f64(lo).unwrap() <= exact && exact <= Rational::from_f64(hi).unwrap());
    let v = common::run(&[
        "verify",
        out.to_str().unwrap(),
        "--model",
        m.to_str().unwrap(),
    ]);
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stderr));
}

/// Regression (issue 33): float64 weights with sigma_1 below about
/// 1.5e-162 made `certify --measures` exit 1 (the squares underflowed
/// binary64). Scaled by 2^-600 the model certifies with its bound; every
/// log measure is stated and overlaps that of the unscaled model shifted
/// by the exact `-k ln 2` (both enclose the same exact value, up to the
/// rounding of the shift). Above 2^512 the bound's products overflow; the
/// measures there are covered in `measures.rs`.
#[test]
fn measures_squared_in_binary64_failed_the_run_at_extreme_scales() {
    let dir = tmpdir("extreme-out");
    let base = certify(
        &write_model_as("x1", 1.0, "F64", None),
        &dir.join("1.json"),
        None,
    );
    let m = write_model_as("lo", 2f64.powi(-600), "F64", None);
    let c = certify(&m, &dir.join("lo.json"), None);
    assert!(c["bounds"]["ours"]["hi"].as_f64().unwrap().is_finite());
    let ms = &c["measures"];
    // ln of a product of d squares moves by -1200 d ln 2; of a mean, -1200 ln 2.
    for (n, k) in [
        ("log_prod_of_spec", 1200 * D),
        ("log_prod_of_fro", 1200 * D),
        ("log_spec_orig", 1200 * D),
        ("log_sum_of_spec", 1200),
        ("log_sum_of_fro", 1200),
    ] {
        let (a, b) = iv(&base["measures"][n]);
        let (l, h) = k_ln2(k);
        let (sl, sh) = (a - h, b - l);
        let (lo, hi) = iv(&ms[n]);
        let ulps = 1e-12 * sh.abs().max(1.0);
        assert!(
            lo <= sh + ulps && sl - ulps <= hi,
            "{n}: [{lo}, {hi}] vs [{sl}, {sh}]"
        );
    }
    assert!(ms["log_bartlett"]["lo"].is_f64());
    assert!(ms["param_norm"]["hi"].as_f64().unwrap() < 1e-300);
    assert!(ms.get("absent").is_none(), "{ms}");
    let v = common::run(&[
        "verify",
        dir.join("lo.json").to_str().unwrap(),
        "--model",
        m.to_str().unwrap(),
    ]);
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stderr));
}
