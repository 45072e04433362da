//! `verify`, `audit` and `diff` on the real MiniLM weights, with tampered
//! certificates, hostile JSON, claim files (right, wrong, too precise,
//! WeightWatcher's conventions), a fine-tune and a bfloat16 cast.

mod common;

use common::{cert_json, code};

use common::{bundled, tmpdir};

use common::{ok_json, root, run};
use serde_json::Value;
use specbound::io::checkpoint::Checkpoint;
use specbound::matrix::DenseMatrix;
use std::path::{Path, PathBuf};

fn write_json(dir: &Path, name: &str, v: &Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
    p
}

#[test]
fn produced_certificates_validate_against_the_published_schema() {
    let schema: Value = serde_json::from_slice(
        &std::fs::read(root().join("docs/certificate.schema.json")).unwrap(),
    )
    .unwrap();
    common::schema::validate(&schema, &cert_json()).unwrap();
    // The schema is strict: an unknown key or a wrong type is rejected.
    let mut bad = cert_json();
    bad["bounds"]["extra"] = Value::from(1);
    assert!(common::schema::validate(&schema, &bad).is_err());
    let mut bad = cert_json();
    bad["matrices"][0]["spectral_norm"]["lo"] = Value::from("1.0");
    assert!(common::schema::validate(&schema, &bad).is_err());
    let full = root().join("../shared/models/all-MiniLM-L6-v2");
    if full.is_dir() {
        let j = ok_json(&run(&["certify", full.to_str().unwrap(), "--json"]));
        common::schema::validate(&schema, &j).unwrap();
    } else {
        eprintln!("skipped the full-model part: {} is absent", full.display());
    }
}

#[test]
fn verify_accepts_the_certificate_and_rejects_every_tampering() {
    let d = tmpdir("verify");
    let good = write_json(&d, "good.json", &cert_json());
    let out = run(&["verify", good.to_str().unwrap()]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let out = run(&[
        "verify",
        good.to_str().unwrap(),
        "--model",
        bundled().to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("hashes and weights"));

    type Edit = fn(&mut Value);
    let cases: Vec<(&str, Edit, &str, bool)> = vec![
        (
            "bound narrowed",
            |c| {
                let b = &mut c["bounds"]["ours"];
                let (lo, hi) = (b["lo"].as_f64().unwrap(), b["hi"].as_f64().unwrap());
                b["lo"] = Value::from(lo + 0.75 * (hi - lo));
            },
            "$.bounds.ours",
            false,
        ),
        (
            "edelman narrowed",
            |c| {
                let b = &mut c["bounds"]["edelman"];
                let hi = b["hi"].as_f64().unwrap();
                b["lo"] = Value::from(hi);
            },
            "$.bounds.edelman",
            false,
        ),
        (
            "singular value moved",
            |c| {
                let s = &mut c["matrices"][5]["singular_values"][3];
                for k in ["lo", "hi"] {
                    s[k] = Value::from(s[k].as_f64().unwrap() * (1.0 + 1e-6));
                }
            },
            "$.matrices[5]",
            false,
        ),
        (
            "p_opt changed",
            |c| {
                c["matrices"][30]["p_opt"] = serde_json::json!([1.0 / 12.0]);
                c["matrices"][30]["p_opt_fraction"] = serde_json::json!(["1/12"]);
            },
            "$.matrices[30].p_opt",
            false,
        ),
        (
            "alpha narrowed",
            |c| {
                let a = &mut c["layers"][1]["alpha"];
                let lo = a["lo"].as_f64().unwrap();
                a["hi"] = Value::from(lo);
            },
            "$.layers[1].alpha",
            false,
        ),
        (
            "contribution narrowed",
            |c| {
                let v = &mut c["matrices"][155]["contributions"][7]["value"];
                let hi = v["hi"].as_f64().unwrap();
                v["lo"] = Value::from(hi);
            },
            "$.matrices[155].contributions[7]",
            false,
        ),
        (
            "hash changed",
            |c| {
                c["model"]["files"][0]["sha256"] = Value::from("0".repeat(64));
            },
            "sha256",
            true,
        ),
        (
            "(2,1)-norm moved (caught through xi)",
            |c| {
                let n = &mut c["matrices"][2]["norm_21"];
                for k in ["lo", "hi"] {
                    n[k] = Value::from(n[k].as_f64().unwrap() * 1.001);
                }
            },
            "$.layers[0].xi",
            false,
        ),
        (
            "(1,1)-norm moved (only the weights can tell)",
            |c| {
                let n = &mut c["matrices"][2]["norm_11"];
                for k in ["lo", "hi"] {
                    n[k] = Value::from(n[k].as_f64().unwrap() * 1.001);
                }
            },
            "$.matrices[2].norm_11",
            true,
        ),
    ];
    for (what, edit, needle, with_model) in cases {
        let mut c = cert_json();
        edit(&mut c);
        let p = write_json(&d, "tampered.json", &c);
        let mut args = vec!["verify", p.to_str().unwrap()];
        let m = bundled();
        if with_model {
            args.extend_from_slice(&["--model", m.to_str().unwrap()]);
        }
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            code(&out),
            1,
            "{what}: expected a failed verification, got: {err}"
        );
        assert!(
            err.contains("FAILED") && err.contains(needle),
            "{what}: message should name {needle}: {err}"
        );
        assert!(!err.contains("panicked"));
    }
}

#[test]
fn verify_rejects_malformed_and_hostile_json_cleanly() {
    let d = tmpdir("hostile");
    let mut cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", b"".to_vec(), "invalid JSON"),
        ("not json", b"hello".to_vec(), "invalid JSON"),
        ("nan literal", b"{\"format\": NaN}".to_vec(), "invalid JSON"),
        ("deep", "[".repeat(100_000).into_bytes(), "invalid JSON"),
        ("array", b"[]".to_vec(), "expected an object"),
    ];
    let mut edits: Vec<(&str, Value, &str)> = Vec::new();
    let mut c = cert_json();
    c["matrices"][0]["spectral_norm"]["lo"] = Value::from("1.0");
    edits.push((
        "string for number",
        c,
        "spectral_norm.lo: expected a number",
    ));
    let mut c = cert_json();
    c["matrices"][0].as_object_mut().unwrap().remove("gamma");
    edits.push(("missing key", c, "missing key 'gamma'"));
    let mut c = cert_json();
    let s = c["matrices"][0]["spectral_norm"].clone();
    c["matrices"][0]["spectral_norm"] = serde_json::json!({"lo": s["hi"], "hi": s["lo"]});
    edits.push(("lo > hi", c, "greater than hi"));
    let mut c = cert_json();
    c["matrices"][0]["singular_values"] =
        Value::Array(vec![serde_json::json!({"lo": 1, "hi": 2}); 1_000_000]);
    edits.push(("huge array", c, "exceed the limit"));
    let mut c = cert_json();
    c["parameters"]["grid_m"] = Value::from(u64::MAX);
    edits.push(("huge grid", c, "exceeds the limit"));
    let mut c = cert_json();
    c["version"] = Value::from(99);
    edits.push(("future version", c, "unsupported version 99"));
    let mut c = cert_json();
    c["matrices"][0]["type"] = Value::from("QQ");
    edits.push(("bad type", c, "unknown matrix type"));
    let mut c = cert_json();
    c["matrices"][0]["head"] = Value::from(-7);
    edits.push(("bad head", c, "head"));
    for (what, v, needle) in edits {
        cases.push((what, serde_json::to_vec(&v).unwrap(), needle));
    }
    for (what, bytes, needle) in cases {
        let p = d.join("bad.json");
        std::fs::write(&p, &bytes).unwrap();
        let out = run(&["verify", p.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(code(&out), 2, "{what}: {err}");
        assert!(err.contains(needle), "{what}: '{needle}' not in {err}");
        assert!(!err.contains("panicked"), "{what}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{what}: {err}");
    }
}

/// Rounds `x` to `sig` significant digits as a decimal string.
fn round_sig(x: f64, sig: usize) -> String {
    format!("{:.*e}", sig - 1, x)
}

/// The shortest rounding (at most 12 digits, at least `min_sig`) whose
/// half-unit window contains the whole interval, as an author would print.
fn publishable(lo: f64, hi: f64, min_sig: usize) -> String {
    let mid = 0.5 * (lo + hi);
    for sig in min_sig..=12 {
        let s = round_sig(mid, sig);
        let v: f64 = s.parse().unwrap();
        let exp = mid.abs().log10().floor() as i32 - (sig as i32 - 1);
        let half = 0.5 * 10f64.powi(exp) * (1.0 - 1e-9);
        if v - half <= lo && hi <= v + half {
            return s;
        }
    }
    panic!("interval [{lo}, {hi}] too wide to publish at 12 digits");
}

#[test]
fn audit_judges_right_wrong_and_too_precise_claims() {
    let d = tmpdir("audit");
    let c = cert_json();
    let m = bundled();
    let ms = m.to_str().unwrap();
    // Right numbers, published at 6+ significant digits, in the authors' layout.
    let mut right = String::from("model_id,bound,value\n");
    let mut wrong = right.clone();
    let mut precise = right.clone();
    for b in ["ours", "edelman"] {
        let (lo, hi) = (
            c["bounds"][b]["lo"].as_f64().unwrap(),
            c["bounds"][b]["hi"].as_f64().unwrap(),
        );
        right.push_str(&format!("m,{b},{}\n", publishable(lo, hi, 6)));
        wrong.push_str(&format!("m,{b},{}\n", round_sig(0.5 * (lo + hi) * 1.01, 6)));
        precise.push_str(&format!("m,{b},{}\n", round_sig(0.5 * (lo + hi), 17)));
    }
    let f = d.join("right.csv");
    std::fs::write(&f, &right).unwrap();
    let out = run(&["audit", ms, f.to_str().unwrap()]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stdout));
    let f = d.join("wrong.csv");
    std::fs::write(&f, &wrong).unwrap();
    let out = run(&["audit", ms, f.to_str().unwrap(), "--json"]);
    assert_eq!(code(&out), 1);
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["inconsistent"], 2);
    let rel = j["results"][0]["relative_error"].as_f64().unwrap();
    assert!((0.009..0.011).contains(&rel), "relative error {rel}");
    let f = d.join("precise.csv");
    std::fs::write(&f, &precise).unwrap();
    let out = run(&["audit", ms, f.to_str().unwrap(), "--json"]);
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(code(&out), 3, "{j}");
    assert_eq!(j["undecided"], 2);
    assert!(j["results"][0]["width"].as_f64().unwrap() > 0.0);

    // The matrix_summary layout with published values, and a p_opt claim.
    let mut t = String::from("layer,head,matrix_type,rows,cols,rank,spectral_norm,norm_21\n");
    for w in c["matrices"].as_array().unwrap().iter().take(30) {
        let s = &w["spectral_norm"];
        let n = &w["norm_21"];
        t.push_str(&format!(
            "{},{},{},{},{},{},{},{}\n",
            w["layer"],
            w["head"],
            w["type"].as_str().unwrap(),
            w["rows"],
            w["cols"],
            w["rank"]["lo"],
            publishable(s["lo"].as_f64().unwrap(), s["hi"].as_f64().unwrap(), 6),
            publishable(n["lo"].as_f64().unwrap(), n["hi"].as_f64().unwrap(), 6)
        ));
    }
    let f = d.join("summary.csv");
    std::fs::write(&f, &t).unwrap();
    let out = run(&["audit", ms, f.to_str().unwrap(), "--json"]);
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(code(&out), 0, "{j}");
    assert_eq!(j["layout"], "matrix_summary");
    assert_eq!(j["consistent"], 30 * 5);
    let f = d.join("opt.csv");
    std::fs::write(
        &f,
        "layer,head,matrix_type,alpha_mh,p_opt,min_contribution\n0,3,QK,,0,\n0,3,QK,,0.5,\n",
    )
    .unwrap();
    let out = run(&["audit", ms, f.to_str().unwrap(), "--json"]);
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["consistent"], 1, "{j}");
    assert_eq!(j["inconsistent"], 1, "{j}");
}

#[test]
fn audit_generic_tensor_claims_and_weightwatcher_conventions() {
    let d = tmpdir("audit-generic");
    let m = bundled();
    let ms = m.to_str().unwrap();
    // Independent float values of the raw tensor (the way a user would compute them).
    let ck = Checkpoint::open(&m).unwrap();
    let name = "encoder.layer.0.attention.self.query";
    let w = ck.read(&format!("{name}.weight")).unwrap().matrix;
    let a = nalgebra::DMatrix::from_row_slice(w.rows, w.cols, &w.data);
    let s: Vec<f64> = a
        .clone()
        .svd(false, false)
        .singular_values
        .iter()
        .copied()
        .collect();
    let mut s = s;
    s.sort_by(|x, y| y.partial_cmp(x).unwrap());
    let fro2: f64 = w.data.iter().map(|x| x * x).sum();
    let t = format!("{name}.weight");
    let generic = format!(
        "tensor,quantity,p,value,tolerance\n\
         {t},sigma_max,,{},\n{t},sigma_i,2,{},\n{t},frobenius_norm,,{},\n{t},rank,,384,\n\
         {t},schatten_power,2,{},\n{t},schatten,1,{},\n{t},stable_rank,,{},\n\
         {t},spectral_norm,,6.2,0.1\n{t},spectral_norm,,6.13,\n",
        round_sig(s[0], 6),
        round_sig(s[1], 6),
        round_sig(fro2.sqrt(), 6),
        round_sig(fro2, 6),
        round_sig(s.iter().sum::<f64>(), 6),
        round_sig(fro2 / (s[0] * s[0]), 6),
    );
    let f = d.join("generic.csv");
    std::fs::write(&f, &generic).unwrap();
    let out = run(&["audit", ms, f.to_str().unwrap(), "--json"]);
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["layout"], "generic");
    let verdicts: Vec<&str> = j["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts[..8], ["consistent"; 8], "{j}");
    assert_eq!(
        verdicts[8], "inconsistent",
        "6.13 is wrong at 3 digits: {j}"
    );
    assert_eq!(code(&out), 1);

    // WeightWatcher details: spectral_norm is sigma_max^2, norm is ||W||_F^2,
    // log_* are base-10 logarithms of those.
    let ww = format!(
        "layer_id,name,M,N,alpha,sv_max,spectral_norm,norm,log_norm,log_spectral_norm,stable_rank\n\
         3,{name},384,384,3.1,{},{},{},{},{},{}\n",
        round_sig(s[0], 6),
        round_sig(s[0] * s[0], 6),
        round_sig(fro2, 6),
        round_sig(fro2.log10(), 6),
        round_sig((s[0] * s[0]).log10(), 6),
        round_sig(fro2 / (s[0] * s[0]), 6),
    );
    let f = d.join("ww.csv");
    std::fs::write(&f, &ww).unwrap();
    let out = run(&["audit", ms, f.to_str().unwrap(), "--json"]);
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["layout"], "weightwatcher");
    assert_eq!(j["consistent"], 6, "{j}");
    assert_eq!(code(&out), 0);
    // Reading WeightWatcher's spectral_norm as sigma_max (the classic mix-up) is caught.
    let mixed = ww.replace(&round_sig(s[0] * s[0], 6), &round_sig(s[0], 6));
    std::fs::write(&f, &mixed).unwrap();
    let out = run(&["audit", ms, f.to_str().unwrap()]);
    assert_eq!(code(&out), 1);
    // Bad claims files: clear errors.
    std::fs::write(&f, "foo,bar\n1,2\n").unwrap();
    let out = run(&["audit", ms, f.to_str().unwrap()]);
    assert_eq!(code(&out), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("unrecognised header"));
    std::fs::write(&f, "tensor,quantity,value\nno.such.weight,rank,3\n").unwrap();
    let out = run(&["audit", ms, f.to_str().unwrap()]);
    assert_eq!(code(&out), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no.such.weight"));
    std::fs::write(&f, format!("tensor,quantity,value\n{t},rank,abc\n")).unwrap();
    let out = run(&["audit", ms, f.to_str().unwrap()]);
    assert_eq!(code(&out), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 2"));
}

/// Re-emits the bundled model with every tensor transformed, as F32 or BF16.
fn variant(dir: &Path, f: impl Fn(&str, &DenseMatrix) -> DenseMatrix, bf16: bool) {
    let ck = Checkpoint::open(&bundled()).unwrap();
    let mats: Vec<(String, DenseMatrix)> = ck
        .names()
        .map(|n| (n.to_string(), f(n, &ck.read(n).unwrap().matrix)))
        .collect();
    let refs: Vec<(String, &DenseMatrix)> = mats.iter().map(|(n, m)| (n.clone(), m)).collect();
    common::write_safetensors(
        &dir.join("model.safetensors"),
        &refs,
        if bf16 { "BF16" } else { "F32" },
    );
    std::fs::copy(bundled().join("config.json"), dir.join("config.json")).unwrap();
}

/// Regression (issue 17: after one weight of layer 3 changed, every printed
/// row was a knock-on change elsewhere and the changed matrix was row 2028):
/// the per-matrix summary lists layer 3's QK matrices first, each with a
/// certified relative change containing the float64 one, grid points come
/// in the order of p, and the text names layer 3 before any aggregate.
fn diff_leads_with_the_matrices_whose_weights_changed(j: &Value, base: &Path, ftc: &Path) {
    let mats = j["matrices"].as_array().unwrap();
    assert!(!mats.is_empty());
    let first = &mats[0];
    assert_eq!(first["layer"], 3, "{first}");
    assert_eq!(first["type"], "QK", "{first}");
    assert_eq!(first["own_weights_changed"], true);
    // Own changes only in layer 3's QK matrices (the query weight enters
    // no other proxy matrix); the rest moved through aggregates.
    for m in mats.iter().filter(|m| m["own_weights_changed"] == true) {
        assert_eq!(
            (m["layer"].as_u64(), m["type"].as_str()),
            (Some(3), Some("QK")),
            "{m}"
        );
    }
    let rel = &first["largest_relative_change"];
    let (lo, hi) = (rel[0].as_f64().unwrap(), rel[1].as_f64().unwrap());
    assert!(lo <= hi && lo > 0.0, "{rel}");
    // Grid points of one quantity in the order of their exact value.
    let ps: Vec<(u64, u64)> = j["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            r["label"]
                .as_str()
                .unwrap()
                .starts_with("layer 3 head 0 QK contribution")
        })
        .map(|r| {
            let p = r["p"].as_str().unwrap();
            let (k, m) = p.split_once('/').unwrap_or((p, "1"));
            (k.parse().unwrap(), m.parse().unwrap())
        })
        .collect();
    let exceeds: Vec<bool> = j["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            r["label"]
                .as_str()
                .unwrap()
                .starts_with("layer 3 head 0 QK contribution")
        })
        .map(|r| r["exceeds_rtol"].as_bool().unwrap())
        .collect();
    if exceeds.iter().all(|e| *e == exceeds[0]) {
        for w in ps.windows(2) {
            assert!(
                w[0].0 * w[1].1 <= w[1].0 * w[0].1,
                "grid points out of order: {ps:?}"
            );
        }
    }
    let text = run(&["diff", base.to_str().unwrap(), ftc.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&text.stdout);
    let summary = text
        .lines()
        .find(|l| l.contains("matrices whose own spectrum or norms certainly changed"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        summary.contains("changed only through aggregates"),
        "{summary}"
    );
    let first_listed = text
        .lines()
        .skip_while(|l| !l.contains("matrices whose own spectrum"))
        .nth(1)
        .unwrap();
    assert!(
        first_listed.trim_start().starts_with("layer 3 head"),
        "{text}"
    );
}

#[test]
fn diff_tells_a_fine_tune_and_a_bf16_cast_from_the_original() {
    let d = tmpdir("diff");
    let base = write_json(&d, "base.json", &cert_json());
    let same = run(&[
        "diff",
        base.to_str().unwrap(),
        base.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code(&same), 0);
    let j: Value = serde_json::from_slice(&same.stdout).unwrap();
    assert_eq!(
        (j["larger"].as_u64(), j["smaller"].as_u64()),
        (Some(0), Some(0))
    );

    // A "fine-tune": layer 3's query weight scaled by 1.001 (largest singular
    // values of its QK products change by about 1e-3 relative).
    let ft = d.join("ft");
    std::fs::create_dir_all(&ft).unwrap();
    variant(
        &ft,
        |n, m| {
            let mut m = m.clone();
            if n == "encoder.layer.3.attention.self.query.weight" {
                m.data.iter_mut().for_each(|x| *x *= 1.001);
            }
            m
        },
        false,
    );
    let ftc = d.join("ft.json");
    assert!(run(&[
        "certify",
        ft.to_str().unwrap(),
        "--out",
        ftc.to_str().unwrap()
    ])
    .status
    .success());
    let out = run(&[
        "diff",
        base.to_str().unwrap(),
        ftc.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code(&out), 1);
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = j["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["label"] == "layer 3 head 0 QK spectral_norm")
        .unwrap();
    assert_eq!(row["verdict"], "larger");
    let rel = row["change"][0].as_f64().unwrap() / row["a"][1].as_f64().unwrap();
    assert!(
        rel > 9e-4 && rel < 1.1e-3,
        "certified relative change {rel}"
    );
    let untouched = j["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["label"] == "layer 3 head 0 V_tilde spectral_norm")
        .unwrap();
    assert_eq!(untouched["verdict"], "indistinguishable");
    diff_leads_with_the_matrices_whose_weights_changed(&j, &base, &ftc);
    // Tolerances: 1e-2 hides a 1e-3 change; 1e-4 does not.
    assert_eq!(
        code(&run(&[
            "diff",
            base.to_str().unwrap(),
            ftc.to_str().unwrap(),
            "--rtol",
            "1e-2"
        ])),
        0
    );
    assert_eq!(
        code(&run(&[
            "diff",
            base.to_str().unwrap(),
            ftc.to_str().unwrap(),
            "--rtol",
            "1e-4"
        ])),
        1
    );

    // A bfloat16 cast of every weight.
    let bf = d.join("bf16");
    std::fs::create_dir_all(&bf).unwrap();
    variant(&bf, |_, m| m.clone(), true);
    let bfc = d.join("bf16.json");
    assert!(run(&[
        "certify",
        bf.to_str().unwrap(),
        "--out",
        bfc.to_str().unwrap()
    ])
    .status
    .success());
    let out = run(&[
        "diff",
        base.to_str().unwrap(),
        bfc.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code(&out), 1);
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    let changed = j["larger"].as_u64().unwrap() + j["smaller"].as_u64().unwrap();
    assert!(
        changed > 1000,
        "a bf16 cast changes most quantities certainly, got {changed}"
    );
    let spec_changed = j["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["quantity"] == "spectral_norm" && r["verdict"] != "indistinguishable")
        .count();
    assert!(
        spec_changed >= 150,
        "spectral norms certainly changed: {spec_changed} of 156"
    );
    // And the bf16 certificate verifies against its own weights.
    assert_eq!(
        code(&run(&[
            "verify",
            bfc.to_str().unwrap(),
            "--model",
            bf.to_str().unwrap()
        ])),
        0
    );
    // ...but not against the original ones.
    let out = run(&[
        "verify",
        bfc.to_str().unwrap(),
        "--model",
        bundled().to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 1);
    assert!(String::from_utf8_lossy(&out.stderr).contains("sha256"));
}

/// Regression (issue 17: `audit MODEL observed_bounds.csv` of a study
/// compared the model with every row, so another model's rows came back
/// INCONSISTENT): in a table of several model_id values only the audited
/// model's rows are judged, the others are counted as another model's; an
/// id the table lacks is an error naming --model-id.
#[test]
fn audit_of_a_multi_model_table_judges_only_the_models_own_rows() {
    let d = tmpdir("multi");
    let c = cert_json();
    let ms = bundled();
    let ms = ms.to_str().unwrap();
    let mut t = String::from("model_id,bound,value\n");
    for b in ["ours", "edelman"] {
        let (lo, hi) = (
            c["bounds"][b]["lo"].as_f64().unwrap(),
            c["bounds"][b]["hi"].as_f64().unwrap(),
        );
        t.push_str(&format!(
            "all-MiniLM-L6-v2,{b},{}\n",
            publishable(lo, hi, 6)
        ));
        // Another model's (different) bounds.
        t.push_str(&format!(
            "other-model,{b},{}\n",
            round_sig(0.5 * (lo + hi) * 3.0, 6)
        ));
    }
    let f = d.join("observed_bounds.csv");
    std::fs::write(&f, &t).unwrap();
    let out = run(&["audit", ms, f.to_str().unwrap(), "--json"]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["consistent"], 2);
    assert_eq!(j["inconsistent"], 0);
    assert_eq!(j["other_models"], 2);
    assert_eq!(j["model_id"], "all-MiniLM-L6-v2");
    // The other model's rows, asked for by id, are judged (and wrong here).
    let out = run(&[
        "audit",
        ms,
        f.to_str().unwrap(),
        "--model-id",
        "other-model",
    ]);
    assert_eq!(code(&out), 1);
    // An id the table does not hold.
    let out = run(&["audit", ms, f.to_str().unwrap(), "--model-id", "absent"]);
    assert_eq!(code(&out), 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--model-id") && err.lines().count() == 1,
        "{err}"
    );
}

/// Regression (issue 17: `audit MODEL p_contribution_raw.csv` of
/// `certify --csv` exited 2, "p = 0 is too coarse to name one point of the
/// grid"), and then exited 3 ("undecided": the full-precision midpoint is
/// finer than the certified width): every table specbound writes states
/// each value's interval beside it, and audits cleanly (exit 0) against the
/// model it came from, judged by containment of the stated interval.
#[test]
fn every_table_certify_writes_audits_cleanly_against_its_model() {
    let d = tmpdir("tables");
    let csv = d.join("csv");
    let m = bundled();
    let ms = m.to_str().unwrap();
    let out = run(&["certify", ms, "--csv", csv.to_str().unwrap(), "--quiet"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for name in specbound::report::csv::TABLE_NAMES {
        let f = csv.join(name);
        let out = run(&["audit", ms, f.to_str().unwrap(), "--quiet"]);
        let c = code(&out);
        assert!(
            c == 0,
            "{name}: exit {c}: {}{}",
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .take(3)
                .collect::<Vec<_>>()
                .join("\n"),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A table's stated interval (`value_lo`, `value_hi`) is the claim: one
/// disjoint from the certified enclosure is inconsistent (exit 1), one that
/// only overlaps it is undecided (exit 3), whatever the value column says.
#[test]
fn audit_judges_a_stated_interval_by_containment() {
    let d = tmpdir("stated");
    let csv = d.join("csv");
    let m = bundled();
    let ms = m.to_str().unwrap();
    let out = run(&["certify", ms, "--csv", csv.to_str().unwrap(), "--quiet"]);
    assert!(out.status.success());
    let text = std::fs::read_to_string(csv.join("observed_bounds.csv")).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    assert_eq!(lines[0], "model_id,bound,value,value_lo,value_hi");
    let ours = lines.iter().position(|l| l.contains(",ours,")).unwrap();
    let cells: Vec<String> = lines[ours].split(',').map(String::from).collect();
    for (lo, hi, want) in [
        ("1".to_string(), "2".to_string(), 1),
        (cells[3].clone(), cells[3].clone(), 3),
        (cells[3].clone(), cells[4].clone(), 0),
    ] {
        lines[ours] = format!("{},{},{},{lo},{hi}", cells[0], cells[1], cells[2]);
        let f = d.join("claims.csv");
        std::fs::write(&f, lines.join("\n") + "\n").unwrap();
        let out = run(&["audit", ms, f.to_str().unwrap(), "--quiet"]);
        assert_eq!(
            code(&out),
            want,
            "[{lo}, {hi}]: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

/// Regression: `diff` of two certificates of the same weights, one made
/// with `--measures` and one without, exited 1 ("certainly changed")
/// because some quantities were present in one certificate only. They are
/// listed in a section of their own and exit 1 needs a quantity both hold
/// to have certainly changed; `--help`, the man page and docs/evidence.md
/// say so.
#[test]
fn diff_across_options_lists_one_sided_quantities_and_does_not_exit_1() {
    let d = tmpdir("diff-options");
    let base = write_json(&d, "base.json", &cert_json());
    let with = d.join("with-measures.json");
    let o = run(&["certify", "--measures", "--out", with.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for (a, b, side) in [(&base, &with, "B"), (&with, &base, "A")] {
        let out = run(&["diff", a.to_str().unwrap(), b.to_str().unwrap()]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(code(&out), 0, "{text}");
        let head = text
            .lines()
            .position(|l| l.starts_with("  in one certificate only"))
            .unwrap_or_else(|| panic!("no section of its own: {text}"));
        let listed: Vec<&str> = text
            .lines()
            .skip(head + 1)
            .take_while(|l| l.starts_with("    "))
            .collect();
        assert!(!listed.is_empty());
        assert!(
            listed.iter().all(
                |l| l.starts_with(&format!("    only in {side}: ")) || l.starts_with("    ...")
            ),
            "{listed:?}"
        );
        assert!(text.contains("measure log_prod_of_spec"), "{text}");
        let j: Value = serde_json::from_slice(
            &run(&["diff", a.to_str().unwrap(), b.to_str().unwrap(), "--json"]).stdout,
        )
        .unwrap();
        assert_eq!(j["certainly_changed"], false);
        assert!(j["only_in_a"].as_u64().unwrap() + j["only_in_b"].as_u64().unwrap() > 0);
    }
    let help = String::from_utf8(run(&["diff", "--help"]).stdout).unwrap();
    let man = String::from_utf8(run(&["man"]).stdout).unwrap();
    let doc = std::fs::read_to_string(root().join("docs/evidence.md")).unwrap();
    for (what, text) in [("--help", &help), ("man", &man), ("docs/evidence.md", &doc)] {
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(flat.contains("one certificate only"), "{what}");
        assert!(
            flat.contains("do not make the exit 1") || flat.contains("does not make the exit 1"),
            "{what}"
        );
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// Regression: `audit` wrote its approximate numbers (`off by`, `relative`,
/// an undecided width) as `{:.3e}` (`5.960e-8`) while the report and the
/// figures write them through `fmt::approx` (`5.96e-8`). One formatter
/// writes them in every command.
#[test]
fn audit_writes_approximate_numbers_with_the_one_formatter() {
    use specbound::report::fmt::approx;
    let d = tmpdir("approx");
    let f = d.join("claims.csv");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(&f, "model_id,bound,value\nm,ours,20000\n").unwrap();
    let m = bundled();
    let args = ["audit", m.to_str().unwrap(), f.to_str().unwrap(), "--quiet"];
    let text = String::from_utf8(run(&args).stdout).unwrap();
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let j: Value = serde_json::from_slice(&run(&json_args).stdout).unwrap();
    let claim = &j["results"][0];
    assert_eq!(claim["verdict"], "inconsistent", "{j}");
    let (dist, rel) = (
        claim["distance"].as_f64().unwrap(),
        claim["relative_error"].as_f64().unwrap(),
    );
    let want = format!(
        "INCONSISTENT (off by {}, relative {}",
        approx(dist),
        approx(rel)
    );
    assert!(text.contains(&want), "{want} not in {text}");
    let _ = std::fs::remove_dir_all(&d);
}
