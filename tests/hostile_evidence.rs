//! The certificate as evidence that cannot be fooled: hostile certificate
//! and claims files (a table of cases, each with its exit code and message),
//! `verify --model` that confirms only by containment, and `diff` that
//! compares each quantity once. Each case is named after the failure it pins.

mod common;

use common::{cert_json, code};

use common::hostile;

use common::{bundled, tmpdir};

use common::{ok_json, run, run_with_data_limit};
use serde_json::{json, Value};
use specbound::matrix::DenseMatrix;
use std::path::{Path, PathBuf};

fn write(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p.to_str().unwrap().to_string()
}

/// A hostile input: how to make the file, the command, the exit code and a
/// message substring (stderr is one line and names the file).
struct Case {
    name: &'static str,
    file: Box<dyn Fn() -> Vec<u8>>,
    args: &'static [&'static str],
    code: i32,
    needle: &'static str,
}

fn edited(f: impl Fn(&mut Value) + 'static) -> Box<dyn Fn() -> Vec<u8>> {
    Box::new(move || {
        let mut c = cert_json();
        f(&mut c);
        serde_json::to_vec(&c).unwrap()
    })
}

fn raw_edit(f: impl Fn(String) -> String + 'static) -> Box<dyn Fn() -> Vec<u8>> {
    Box::new(move || f(serde_json::to_string(&cert_json()).unwrap()).into_bytes())
}

#[test]
fn hostile_certificates_and_claims_give_one_line_errors() {
    let d = tmpdir("table");
    // `{}` in args is replaced by the file's path.
    let cases = vec![
        Case {
            name: "certificate_unknown_key_is_refused",
            file: edited(|c| c["junk"] = json!([1, 2, 3])),
            args: &["verify", "{}"],
            code: 2,
            needle: "$.junk: unknown key 'junk'",
        },
        Case {
            name: "certificate_unknown_key_in_a_matrix_is_refused",
            file: edited(|c| c["matrices"][3]["note"] = json!("hi")),
            args: &["verify", "{}"],
            code: 2,
            needle: "$.matrices[3].note: unknown key 'note'",
        },
        Case {
            name: "certificate_duplicate_key_is_refused",
            file: raw_edit(|s| s.replacen("\"format\":", "\"format\":\"x\",\"format\":", 1)),
            args: &["verify", "{}"],
            code: 2,
            needle: "duplicate key 'format'",
        },
        Case {
            name: "certificate_duplicate_interval_end_is_refused",
            file: raw_edit(|s| s.replacen("\"lo\":", "\"lo\":0,\"lo\":", 1)),
            args: &["diff", "{}", "{}"],
            code: 2,
            needle: "duplicate key 'lo'",
        },
        Case {
            name: "certificate_top_level_array_is_refused",
            file: Box::new(|| b"[1, 2]".to_vec()),
            args: &["verify", "{}"],
            code: 2,
            needle: "expected an object",
        },
        Case {
            name: "certificate_duplicate_matrix_is_refused",
            file: edited(|c| {
                let m = c["matrices"][0].clone();
                c["matrices"][1] = m;
            }),
            args: &["verify", "{}"],
            code: 2,
            needle: "$.matrices[1]: duplicate matrix (layer 0 head 0 QK)",
        },
        Case {
            name: "certificate_head_on_a_layer_matrix_is_refused",
            file: edited(|c| c["matrices"][24]["head"] = json!(0)),
            args: &["verify", "{}"],
            code: 2,
            needle: "$.matrices[24].head: M_in is a layer matrix: head must be -1",
        },
        Case {
            name: "certificate_unknown_precision_is_refused",
            file: edited(|c| c["parameters"]["precision"] = json!("mpfr:7")),
            args: &["verify", "{}"],
            code: 2,
            needle: "$.parameters.precision: unknown precision \"mpfr:7\"",
        },
        Case {
            name: "certificate_grid_m_1001_is_refused",
            file: edited(|c| {
                c["parameters"]["grid_m"] = json!(1001);
            }),
            args: &["verify", "{}"],
            code: 2,
            needle: "$.parameters.grid_m: 1001 exceeds the limit 1000",
        },
        Case {
            name: "certificate_array_beyond_its_limit_is_refused_while_parsing",
            file: edited(|c| c["matrices"][0]["method"] = json!(vec!["x"; 65])),
            args: &["verify", "{}"],
            code: 2,
            needle: "$.matrices[0].method: more than 64 entries exceed the limit",
        },
        Case {
            name: "certificate_grid_point_off_the_grid_is_refused",
            file: edited(|c| c["matrices"][2]["p_opt_fraction"] = json!(["1/7"])),
            args: &["verify", "{}"],
            code: 2,
            needle: "$.matrices[2].p_opt_fraction[0]: \"1/7\" is not a point of the grid P_12",
        },
        Case {
            name: "certificate_wrong_matrix_count_is_refused",
            file: edited(|c| {
                c["matrices"].as_array_mut().unwrap().pop();
            }),
            args: &["verify", "{}"],
            code: 2,
            needle: "$.matrices: 155 entries, expected 156",
        },
        Case {
            name: "claims_from_dev_zero_are_refused_unread",
            file: Box::new(Vec::new),
            args: &["audit", "BUNDLE", "/dev/zero"],
            code: 2,
            needle: "/dev/zero: is a character device, expected a claims file (a regular file)",
        },
    ];
    for c in cases {
        let path = write(&d, &format!("{}.json", c.name), &(c.file)());
        let bundle = bundled();
        let args: Vec<&str> = c
            .args
            .iter()
            .map(|a| match *a {
                "{}" => path.as_str(),
                "BUNDLE" => bundle.to_str().unwrap(),
                a => a,
            })
            .collect();
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(code(&out), c.code, "{}: {err}", c.name);
        assert!(
            err.contains(c.needle),
            "{}: '{}' not in {err}",
            c.name,
            c.needle
        );
        assert_eq!(err.trim_end().lines().count(), 1, "{}: {err}", c.name);
        assert!(!err.contains("panicked"), "{}: {err}", c.name);
        if args.contains(&path.as_str()) {
            assert!(
                err.contains(&path),
                "{}: the message names the file: {err}",
                c.name
            );
        }
    }
}

#[test]
fn certificate_with_a_100_mb_junk_array_is_refused_in_bounded_memory() {
    let d = tmpdir("junk");
    // Built in a block and dropped before the child is spawned: a forked
    // child's peak RSS counts the parent's pages until it execs.
    let (p, mb) = {
        let mut text = serde_json::to_string(&cert_json()).unwrap();
        text.pop(); // the closing brace
        text.push_str(",\"junk\":[");
        while text.len() < 100 << 20 {
            text.push_str("1.5,2.5,3.5,4.5,");
        }
        text.push_str("0]}");
        (
            write(&d, "junk.json", text.as_bytes()),
            text.len() as u64 >> 20,
        )
    };
    // The bytes are read once (capped) and no tree is built from them: the
    // run fits in the file size plus 64 MiB of heap (before: about 16x).
    let out = run_with_data_limit(&["verify", &p], (mb + 64) << 20);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code(&out), 2, "{err}");
    assert!(err.contains("unknown key 'junk'"), "{err}");
    // Junk inside a known array is refused at its limit, before it is stored.
    let p = {
        let mut c = cert_json();
        c["matrices"][0]["method"] = Value::Array(vec![json!("x"); 3_000_000]);
        write(&d, "junk2.json", &serde_json::to_vec(&c).unwrap())
    };
    let size = std::fs::metadata(&p).unwrap().len();
    let out = run_with_data_limit(&["verify", &p], size + (64 << 20));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code(&out), 2, "{err}");
    assert!(err.contains("exceed the limit"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn certify_grid_m_has_the_one_limit_verify_enforces() {
    // Before: --grid-m 1001 wrote a certificate that verify rejected, and
    // --grid-m 1000000000 aborted on allocation.
    let d = tmpdir("grid-limit");
    let out = d.join("c.json");
    for m in ["1001", "1000000000", "0"] {
        let r = run(&["certify", "--grid-m", m, "--out", out.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(code(&r), 2, "--grid-m {m}: {err}");
        assert!(err.contains("grid m must be between 1 and 1000"), "{err}");
        assert!(!out.exists(), "no certificate for --grid-m {m}");
    }
    let r = run(&[
        "certify",
        "--grid-m",
        "1000",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code(&r), 0, "{}", String::from_utf8_lossy(&r.stderr));
    let r = run(&["verify", out.to_str().unwrap()]);
    assert_eq!(code(&r), 0, "{}", String::from_utf8_lossy(&r.stderr));
    let _ = std::fs::remove_dir_all(&d);
}

/// The exact `sigma_1` of layer 0's `M_in` lies in the extended-precision
/// enclosure (relative radius about 1e-15).
fn extended_sigma1_of_layer0_m_in() -> (f64, f64) {
    use std::sync::OnceLock;
    static S: OnceLock<(f64, f64)> = OnceLock::new();
    *S.get_or_init(|| {
        // The one matrix alone, by `svd` (the bundled file holds it).
        let f = bundled().join("model.safetensors");
        let t = "encoder.layer.0.intermediate.dense.weight";
        let j = ok_json(&run(&[
            "svd",
            f.to_str().unwrap(),
            "--tensor",
            t,
            "--precision",
            "extended",
            "--json",
        ]));
        let s = &j["singular_values"][0];
        (s["lo"].as_f64().unwrap(), s["hi"].as_f64().unwrap())
    })
}

#[test]
fn verify_model_refutes_sigma1_edited_below_the_true_value() {
    // Before: an M_in sigma_1 interval ending 2.7e-12 below the exact value
    // passed `verify --model` with exit 0, because overlapping was enough.
    let d = tmpdir("refute");
    let (true_lo, _) = extended_sigma1_of_layer0_m_in();
    let mut c = cert_json();
    c["matrices"][24]["singular_values"][0]["hi"] = json!(true_lo - 2.7e-12);
    let p = write(&d, "t.json", &serde_json::to_vec(&c).unwrap());
    // Internally consistent: verify alone cannot tell.
    assert_eq!(code(&run(&["verify", &p])), 0);
    let out = run(&["verify", &p, "--model", bundled().to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code(&out), 1, "{err}");
    assert!(
        err.contains("$.matrices[24].singular_values[0] (layer 0 M_in singular_value[0])")
            && err.contains("is disjoint from")
            && err.contains("misses the exact value"),
        "{err}"
    );
    // One number format (issue 31): the stated interval is quoted as every
    // command prints intervals in full, `[5.6…, 5.6…]`, not as `{:e}`'s `5.6e0`.
    assert!(
        err.contains("stated [") && !err.contains("e0,") && !err.contains("e0]"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn verify_model_confirms_a_narrower_true_interval_by_refining() {
    // The f64 recomputation is wider than the stated (true) interval; the
    // extended stage lies inside it: confirmed.
    let d = tmpdir("refine");
    let (lo, hi) = extended_sigma1_of_layer0_m_in();
    let mut c = cert_json();
    c["matrices"][24]["singular_values"][0] = json!({"lo": lo, "hi": hi});
    let p = write(&d, "n.json", &serde_json::to_vec(&c).unwrap());
    let out = run(&["verify", &p, "--model", bundled().to_str().unwrap()]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let _ = std::fs::remove_dir_all(&d);
}

/// A one-layer model made of the bundle's layer-0 tensors (real weights,
/// re-emitted as F32, which is exact), in `dir`.
fn one_layer_model(dir: &Path) -> PathBuf {
    use specbound::io::checkpoint::Checkpoint;
    let m = dir.join("one-layer");
    std::fs::create_dir_all(&m).unwrap();
    let ck = Checkpoint::open(&bundled()).unwrap();
    let mats: Vec<(String, specbound::matrix::DenseMatrix)> = ck
        .names()
        .filter(|n| n.starts_with("encoder.layer.0."))
        .map(|n| (n.to_string(), ck.read(n).unwrap().matrix))
        .collect();
    let refs: Vec<(String, &specbound::matrix::DenseMatrix)> =
        mats.iter().map(|(n, x)| (n.clone(), x)).collect();
    common::write_safetensors(&m.join("model.safetensors"), &refs, "F32");
    let mut cfg: Value =
        serde_json::from_slice(&std::fs::read(bundled().join("config.json")).unwrap()).unwrap();
    cfg["num_hidden_layers"] = json!(1);
    std::fs::write(m.join("config.json"), serde_json::to_vec(&cfg).unwrap()).unwrap();
    m
}

#[test]
fn verify_model_reports_unconfirmed_quantities_with_exit_3() {
    // A stated singular value of M_in narrower than any stage can certify
    // (M_in is beyond the MPFR cost limit, so the extended stage is the
    // last): it may well contain the exact value, but nothing can show it.
    let d = tmpdir("unconfirmed");
    let model = one_layer_model(&d);
    let ms = model.to_str().unwrap();
    let plain = ok_json(&run(&["certify", ms, "--json"]));
    let ext = ok_json(&run(&["certify", ms, "--precision", "extended", "--json"]));
    // Layer matrices follow the 12 QK and 12 V_tilde heads.
    assert_eq!(ext["matrices"][24]["type"], "M_in");
    let e = &ext["matrices"][24]["singular_values"][100];
    let (lo, hi) = (e["lo"].as_f64().unwrap(), e["hi"].as_f64().unwrap());
    assert!(lo < hi, "the extended enclosure has a width");
    let mid = lo + 0.5 * (hi - lo);
    let mut c = plain;
    c["matrices"][24]["singular_values"][100] = json!({"lo": mid, "hi": mid});
    let p = write(&d, "u.json", &serde_json::to_vec(&c).unwrap());
    // Consistent as a certificate...
    assert_eq!(code(&run(&["verify", &p])), 0);
    // ...but neither confirmed nor refuted by the weights.
    let out = run(&["verify", &p, "--model", ms]);
    let err = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(code(&out), 3, "{err}{stdout}");
    assert!(
        err.contains("UNCONFIRMED") && err.contains("$.matrices[24].singular_values[100]"),
        "{err}"
    );
    assert!(stdout.contains("neither contains nor excludes"), "{stdout}");
    let _ = std::fs::remove_dir_all(&d);
}

/// The exact (1,1)-norm of layer 0's `M_in` (the sum of the magnitudes of
/// the stored F32 entries), as a rational.
fn exact_norm11_of_layer0_m_in() -> rug::Rational {
    use specbound::io::checkpoint::Checkpoint;
    let ck = Checkpoint::open(&bundled()).unwrap();
    let m = ck
        .read("encoder.layer.0.intermediate.dense.weight")
        .unwrap()
        .matrix;
    m.data
        .iter()
        .map(|&x| rug::Rational::from_f64(x.abs()).unwrap())
        .sum()
}

/// The f64 neighbours of an exact rational: the largest f64 <= q and the smallest >= q.
fn f64_around(q: &rug::Rational) -> (f64, f64) {
    let x = q.to_f64();
    let rx = rug::Rational::from_f64(x).unwrap();
    if rx == *q {
        (x, x)
    } else if rx < *q {
        (x, x.next_up())
    } else {
        (x.next_down(), x)
    }
}

#[test]
fn verify_model_confirms_or_refutes_a_one_ulp_norm_by_mpfr_entry_norms() {
    let d = tmpdir("norm11");
    let (lo, hi) = f64_around(&exact_norm11_of_layer0_m_in());
    // The tightest f64 interval around the exact value: narrower than the
    // f64 route can certify, confirmed by the MPFR entry norms.
    let mut c = cert_json();
    c["matrices"][24]["norm_11"] = json!({"lo": lo, "hi": hi});
    let p = write(&d, "tight.json", &serde_json::to_vec(&c).unwrap());
    let out = run(&["verify", &p, "--model", bundled().to_str().unwrap()]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    // One ulp above the exact value: refuted.
    let mut c = cert_json();
    c["matrices"][24]["norm_11"] = json!({"lo": hi.next_up(), "hi": hi.next_up().next_up()});
    let p = write(&d, "above.json", &serde_json::to_vec(&c).unwrap());
    let out = run(&["verify", &p, "--model", bundled().to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code(&out), 1, "{err}");
    // Refuted by the MPFR entry norms, or directly by the recomputed ones:
    // the float32 entries' sums are exact integer sums since L39
    // (`proofs/exact-integer-sums.md`), a one-ulp enclosure of their own.
    assert!(
        err.contains("$.matrices[24].norm_11")
            && (err.contains("MPFR entry norms") || err.contains("misses the exact value")),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// The number of quantities a certificate holds, counted from the JSON.
fn count_quantities(c: &Value) -> usize {
    let m = c["parameters"]["grid_m"].as_u64().unwrap() as usize;
    let per_matrix: usize = c["matrices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            let k = w["rows"].as_u64().unwrap().min(w["cols"].as_u64().unwrap()) as usize;
            let stable = usize::from(!w["stable_rank"].is_null());
            // 5 norms, rank, k singular values, alpha, gamma, scale, 2m+1 contributions, minimum.
            5 + stable + 1 + k + 3 + (2 * m + 1) + 1
        })
        .sum();
    per_matrix + 2 * c["layers"].as_array().unwrap().len() + 2
}

#[test]
fn diff_compares_each_contribution_once() {
    // Before: every contribution was compared twice (contributions[k].value
    // and c(p=k/m)), inflating every count.
    let d = tmpdir("once");
    let c = cert_json();
    let p = write(&d, "a.json", &serde_json::to_vec(&c).unwrap());
    let out = run(&["diff", &p, &p, "--json"]);
    assert_eq!(code(&out), 0);
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        j["compared"].as_u64().unwrap() as usize,
        count_quantities(&c)
    );
    let rows = j["rows"].as_array().unwrap();
    let contributions = rows
        .iter()
        .filter(|r| r["quantity"] == "contribution")
        .count();
    let m = c["parameters"]["grid_m"].as_u64().unwrap() as usize;
    assert_eq!(contributions, 156 * (2 * m + 1));
    let mut seen = std::collections::HashSet::new();
    for r in rows {
        assert!(seen.insert(r["label"].as_str().unwrap().to_string()), "{r}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn diff_reports_parameter_changes_first_as_certain_changes() {
    let d = tmpdir("params");
    let a = write(&d, "a.json", &serde_json::to_vec(&cert_json()).unwrap());
    let b = d.join("b.json");
    assert_eq!(
        code(&run(&[
            "certify",
            "--l-phi",
            "1.2",
            "--out",
            b.to_str().unwrap()
        ])),
        0
    );
    let out = run(&["diff", &a, b.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(code(&out), 1, "{text}");
    let second = text.lines().nth(1).unwrap();
    assert!(
        second.contains("PARAMETER differs: parameters.l_phi: 1.13 -> 1.2"),
        "{text}"
    );
    // The footer counts what the header counts.
    let first = text.lines().next().unwrap();
    let last = text.lines().last().unwrap();
    assert_eq!(last, format!("total: {first}"));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn diff_matches_grid_points_by_their_exact_fraction() {
    let d = tmpdir("grid");
    let a = write(&d, "a.json", &serde_json::to_vec(&cert_json()).unwrap());
    let b = d.join("b.json");
    assert_eq!(
        code(&run(&[
            "certify",
            "--grid-m",
            "6",
            "--out",
            b.to_str().unwrap()
        ])),
        0
    );
    let out = run(&["diff", &a, b.to_str().unwrap(), "--json"]);
    assert_eq!(code(&out), 1);
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["header"][0]["key"], "parameters.grid_m");
    assert_eq!(j["header"][0]["kind"], "parameter");
    // 2/12 of A is 1/6 of B, with the same (certified) value.
    let row = j["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["label"] == "layer 1 head 2 V_tilde contribution p=2/12")
        .expect("matched across grids");
    assert_eq!(
        (&row["layer"], &row["head"], &row["type"], &row["p"]),
        (&json!(1), &json!(2), &json!("V_tilde"), &json!("2/12"))
    );
    // The odd twelfths exist in A only: counted and listed, never dropped.
    assert_eq!(j["only_in_a"].as_u64().unwrap(), 156 * 12);
    assert_eq!(j["only_in_b"].as_u64().unwrap(), 0);
    assert_eq!(j["unmatched"].as_array().unwrap().len(), 156 * 12);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn tiny_positive_l_phi_is_accepted_by_certify_and_verify_alike() {
    // Positivity is decided on the decimal: 1e-400 is positive although its
    // binary64 enclosure starts at 0. The certificate certify writes must be
    // one verify reads (one rule for both).
    let d = tmpdir("lphi");
    let out = d.join("c.json");
    let r = run(&[
        "certify",
        "--l-phi",
        "1e-400",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code(&r), 0, "{}", String::from_utf8_lossy(&r.stderr));
    let r = run(&["verify", out.to_str().unwrap()]);
    assert_eq!(code(&r), 0, "{}", String::from_utf8_lossy(&r.stderr));
    for bad in ["0", "-1", "1e400", "1e999999999"] {
        let r = run(&["certify", &format!("--l-phi={bad}")]);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(code(&r), 2, "{bad}: {err}");
        assert!(err.contains("L_phi"), "{bad}: {err}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn evidence_labels_are_rechecked_by_verify_model() {
    let d = tmpdir("labels");
    let ts: Vec<(String, DenseMatrix)> = [
        ("attention.self.query", 8, 8),
        ("attention.self.key", 8, 8),
        ("attention.self.value", 8, 8),
        ("attention.output.dense", 8, 8),
        ("intermediate.dense", 16, 8),
        ("output.dense", 8, 16),
    ]
    .iter()
    .enumerate()
    .map(|(k, &(n, r, c))| {
        (
            format!("encoder.layer.0.{n}.weight"),
            hostile::mat(r, c, k + 1),
        )
    })
    .collect();
    let cfg = json!({"model_type": "bert", "num_hidden_layers": 1, "hidden_size": 8,
           "num_attention_heads": 2, "intermediate_size": 16, "hidden_act": "gelu"});
    let model = hostile::write_model(&d, &ts, &cfg);
    let cert = d.join("c.json");
    let o = common::run(&["certify", &model, "--measures", "--out", &hostile::s(&cert)]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = common::run(&["verify", &hostile::s(&cert), "--model", &model]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let original: Value = serde_json::from_slice(&std::fs::read(&cert).unwrap()).unwrap();
    type Edit = Box<dyn Fn(&mut Value)>;
    let edits: Vec<(&str, Edit)> = vec![
        (
            "$.raw_weights[0].tensor",
            Box::new(|c: &mut Value| {
                c["raw_weights"][0]["tensor"] =
                    json!("encoder.layer.0.attention.self.key.weight[8, 8]^T")
            }),
        ),
        (
            "$.raw_weights[5].tensor",
            Box::new(|c: &mut Value| c["raw_weights"][5]["tensor"] = json!("w")),
        ),
        (
            "$.model.tensor_prefix",
            Box::new(|c: &mut Value| c["model"]["tensor_prefix"] = json!("bert.")),
        ),
        (
            "$.model.architecture",
            Box::new(|c: &mut Value| c["model"]["architecture"] = json!("roberta")),
        ),
    ];
    let mut failures = Vec::new();
    for (at, edit) in edits {
        let mut c = original.clone();
        edit(&mut c);
        let p = d.join("tampered.json");
        std::fs::write(&p, serde_json::to_vec_pretty(&c).unwrap()).unwrap();
        let o = common::run(&["verify", &hostile::s(&p), "--model", &model]);
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        if o.status.code() != Some(1) || !all.contains(at) || all.contains("certificate holds") {
            failures.push(format!("{at}: exit {:?}: {all}", o.status.code()));
        }
    }
    let _ = std::fs::remove_dir_all(&d);
    hostile::assert_none(failures);
}
