//! Hostile input, round three (issue 18), the evidence classes: every
//! certificate or part a command takes as input is re-derived before it is
//! used; figures on extreme but valid data finish; the untrusted
//! certificate does not set the cost of `verify --model`; `audit` with
//! nothing to check is an error; untrusted text never reaches the terminal
//! raw. Each test is named after the failure it pins.

mod common;

use common::{cert_json, code, text};

use common::{bundled, tmpdir};

use common::{assert_bad, run};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn read_json(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

fn write_json(p: &Path, v: &Value) {
    std::fs::write(p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
}

/// Edits a certificate cannot survive re-derivation (each keeps the file
/// valid JSON of a valid shape): the reported case and variants.
type CertEdit = Box<dyn Fn(&mut Value)>;

fn inconsistent_edits() -> Vec<(&'static str, CertEdit)> {
    vec![
        (
            "$.bounds.ours",
            Box::new(|c: &mut Value| {
                let hi = c["bounds"]["ours"]["hi"].as_f64().unwrap();
                c["bounds"]["ours"] = json!({"lo": hi * 0.25, "hi": hi * 0.5});
            }),
        ),
        (
            "$.bounds.edelman",
            Box::new(|c: &mut Value| {
                let hi = c["bounds"]["edelman"]["hi"].as_f64().unwrap();
                c["bounds"]["edelman"] = json!({"lo": hi * 2.0, "hi": hi * 4.0});
            }),
        ),
        (
            "$.matrices[3].min_contribution",
            Box::new(|c: &mut Value| {
                c["matrices"][3]["min_contribution"] = json!({"lo": 1e-300, "hi": 2e-300});
            }),
        ),
        (
            "$.matrices[0].spectral_norm",
            Box::new(|c: &mut Value| {
                let s = c["matrices"][0]["spectral_norm"]["lo"].as_f64().unwrap();
                c["matrices"][0]["spectral_norm"] = json!({"lo": s * 0.5, "hi": s * 0.6});
            }),
        ),
    ]
}

#[test]
fn report_renders_a_certificate_verify_rejects() {
    let d = tmpdir("report");
    for (at, edit) in inconsistent_edits() {
        let mut c = cert_json();
        edit(&mut c);
        let p = d.join("edited.json");
        write_json(&p, &c);
        let verify = run(&["verify", p.to_str().unwrap()]);
        assert_eq!(
            code(&verify),
            1,
            "verify must reject {at}: {}",
            text(&verify)
        );
        let html = d.join("r.html");
        assert_bad(
            &[
                "report",
                "--out",
                html.to_str().unwrap(),
                p.to_str().unwrap(),
            ],
            &["edited.json", at, "not a consistent certificate"],
        );
        assert!(!html.exists(), "{at}: nothing may be written");
    }
    // The genuine certificate still reports.
    let p = d.join("good.json");
    write_json(&p, &cert_json());
    let html = d.join("r.html");
    let out = run(&[
        "report",
        "--out",
        html.to_str().unwrap(),
        p.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(html.exists());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn library_reads_certificates_as_evidence_through_one_function() {
    let d = tmpdir("lib");
    let good = d.join("good.json");
    write_json(&good, &cert_json());
    specbound::evidence::read_rederived(&good).expect("a genuine certificate re-derives");
    for (at, edit) in inconsistent_edits() {
        let mut c = cert_json();
        edit(&mut c);
        let p = d.join("bad.json");
        write_json(&p, &c);
        let e = specbound::evidence::read_rederived(&p).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("bad.json") && msg.contains(at), "{msg}");
        assert_eq!(msg.lines().count(), 1, "{msg}");
        assert!(
            matches!(e, specbound::evidence::EvidenceError::Inconsistent { .. }),
            "{msg}"
        );
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn resumed_study_trusted_a_reused_certificate_without_rederivation() {
    let d = tmpdir("study");
    let out = d.join("out");
    let args = |o: &Path| {
        vec![
            "study".to_string(),
            "--out".into(),
            o.to_str().unwrap().into(),
            bundled().to_str().unwrap().into(),
        ]
    };
    let first = common::bin().args(args(&out)).output().unwrap();
    assert_eq!(code(&first), 0, "{}", text(&first));
    let cert = out.join("certificates/all-MiniLM-L6-v2.json");
    let genuine = read_json(&cert);
    // A consistent certificate is reused.
    let again = common::bin().args(args(&out)).output().unwrap();
    assert_eq!(code(&again), 0, "{}", text(&again));
    assert!(text(&again).contains("1 reused"), "{}", text(&again));
    for (at, edit) in inconsistent_edits().into_iter().take(3) {
        let mut c = genuine.clone();
        edit(&mut c);
        write_json(&cert, &c);
        let r = common::bin().args(args(&out)).output().unwrap();
        let t = text(&r);
        assert_eq!(code(&r), 0, "{t}");
        assert!(
            t.contains("not reused") && t.contains("not consistent") && t.contains(at),
            "{at}: the study must say why it certifies afresh: {t}"
        );
        // Certified afresh: the file holds the genuine values again, and the
        // report and tables come from them.
        let now = read_json(&cert);
        assert_eq!(now["bounds"], genuine["bounds"], "{at}");
        assert_eq!(now["matrices"][3], genuine["matrices"][3], "{at}");
        let verify = run(&["verify", cert.to_str().unwrap()]);
        assert_eq!(code(&verify), 0, "{}", text(&verify));
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// A part edited by hand with its digest recomputed (the digest is a
/// checksum, not a signature).
fn edited_part(src: &Path, dst: &Path, edit: impl Fn(&mut specbound::certificate::Part)) {
    let mut p = specbound::certificate::Part::read(src).unwrap();
    edit(&mut p);
    p.sha256 = p.content_sha256();
    std::fs::write(dst, p.to_json_pretty()).unwrap();
    specbound::certificate::Part::read(dst).expect("the edited part still parses and validates");
}

#[test]
fn merge_accepted_an_edited_part_its_spectrum_does_not_imply() {
    let d = tmpdir("merge");
    let mut parts = Vec::new();
    for k in 1..=2 {
        let p = d.join(format!("part-{k}.json"));
        let shard = format!("{k}/2");
        let out = run(&["certify", "--shard", &shard, "--out", p.to_str().unwrap()]);
        assert_eq!(code(&out), 0, "{}", text(&out));
        parts.push(p);
    }
    let good = run(&[
        "merge",
        parts[0].to_str().unwrap(),
        parts[1].to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code(&good), 0, "{}", text(&good));
    type Edit = Box<dyn Fn(&mut specbound::certificate::Part)>;
    let edits: Vec<(&str, Edit)> = vec![
        (
            "$.matrices[0].spectral_norm",
            Box::new(|p| {
                let s = &mut p.matrices[0].spectral_norm;
                s.lo *= 0.5;
                s.hi *= 0.5;
            }),
        ),
        (
            "$.matrices[1].nuclear_norm",
            Box::new(|p| {
                let s = &mut p.matrices[1].nuclear_norm;
                s.lo *= 3.0;
                s.hi *= 3.0;
            }),
        ),
        (
            "$.matrices[2].rank",
            Box::new(|p| {
                p.matrices[2].rank.lo = 0;
                p.matrices[2].rank.hi = 1;
            }),
        ),
    ];
    for (at, edit) in edits {
        let bad = d.join("part-2-edited.json");
        edited_part(&parts[1], &bad, edit);
        assert_bad(
            &[
                "merge",
                parts[0].to_str().unwrap(),
                bad.to_str().unwrap(),
                "--json",
            ],
            &["part-2-edited.json", at, "not a consistent part"],
        );
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// A one-layer model made of the bundle's layer-0 tensors stored as F64,
/// with `intermediate.dense.weight` (M_in) scaled by 1e-300: a genuine
/// model whose certified singular values span hundreds of decades.
fn extreme_model(dir: &Path) -> PathBuf {
    use specbound::io::checkpoint::Checkpoint;
    let m = dir.join("extreme");
    std::fs::create_dir_all(&m).unwrap();
    let ck = Checkpoint::open(&bundled()).unwrap();
    let mut mats: Vec<(String, specbound::matrix::DenseMatrix)> = ck
        .names()
        .filter(|n| n.starts_with("encoder.layer.0."))
        .map(|n| (n.to_string(), ck.read(n).unwrap().matrix))
        .collect();
    for (n, x) in mats.iter_mut() {
        if n.ends_with("intermediate.dense.weight") {
            for v in x.data.iter_mut() {
                *v *= 1e-300;
            }
        }
    }
    let refs: Vec<(String, &specbound::matrix::DenseMatrix)> =
        mats.iter().map(|(n, x)| (n.clone(), x)).collect();
    common::write_safetensors(&m.join("model.safetensors"), &refs, "F64");
    let mut cfg: Value =
        serde_json::from_slice(&std::fs::read(bundled().join("config.json")).unwrap()).unwrap();
    cfg["num_hidden_layers"] = json!(1);
    std::fs::write(m.join("config.json"), serde_json::to_vec(&cfg).unwrap()).unwrap();
    m
}

#[test]
fn figures_on_singular_values_spanning_hundreds_of_decades_never_finished() {
    let d = tmpdir("extreme");
    let model = extreme_model(&d);
    let cert = d.join("extreme.json");
    let out = run(&[
        "certify",
        model.to_str().unwrap(),
        "--out",
        cert.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let c = read_json(&cert);
    let smallest = c["matrices"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|w| w["singular_values"].as_array().unwrap().iter())
        .map(|s| s["hi"].as_f64().unwrap())
        .filter(|&x| x > 0.0)
        .fold(f64::INFINITY, f64::min);
    assert!(smallest < 1e-250, "the model must be extreme: {smallest:e}");
    let verify = run(&["verify", cert.to_str().unwrap()]);
    assert_eq!(code(&verify), 0, "a genuine certificate: {}", text(&verify));
    let html = d.join("r.html");
    let t = std::time::Instant::now();
    let out = std::process::Command::new("timeout")
        .args(["120", env!("CARGO_BIN_EXE_specbound")])
        .args([
            "report",
            "--out",
            html.to_str().unwrap(),
            cert.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(
        code(&out),
        0,
        "report must finish ({secs:.1} s): {}",
        text(&out)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("decades"),
        "the caption must say the axis is clamped"
    );
    // The same figures through `study`.
    let sdir = d.join("study");
    let out = std::process::Command::new("timeout")
        .args(["120", env!("CARGO_BIN_EXE_specbound")])
        .args([
            "study",
            "--out",
            sdir.to_str().unwrap(),
            model.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "study must finish: {}", text(&out));
    let page = std::fs::read_to_string(sdir.join("report.html")).unwrap();
    assert!(page.contains("decades"), "study's caption must say so too");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn untrusted_certificate_set_the_cost_of_verify_model() {
    use specbound::evidence::verify::{check_budget, VerifyOptions, DEFAULT_MAX_MPFR_BITS};
    let d = tmpdir("budget");
    for bits in [1_000_000u32, DEFAULT_MAX_MPFR_BITS + 1] {
        let mut c = cert_json();
        c["parameters"]["precision"] = json!(format!("mpfr:{bits}"));
        let p = d.join("costly.json");
        write_json(&p, &c);
        let t = std::time::Instant::now();
        let out = std::process::Command::new("timeout")
            .args(["60", env!("CARGO_BIN_EXE_specbound")])
            .args(["verify", p.to_str().unwrap(), "--model"])
            .arg(bundled())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(code(&out), 2, "mpfr:{bits}: {}", text(&out));
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(
            err.contains("$.parameters.precision") && err.contains(&format!("mpfr:{bits}")),
            "{err}"
        );
        assert!(t.elapsed().as_secs_f64() < 30.0, "refused before any work");
        // The library: the budget is an option, raised by the user only.
        let cert = specbound::certificate::Certificate::read(&p).unwrap();
        assert!(check_budget(&cert, &VerifyOptions::default()).is_err());
        assert!(check_budget(
            &cert,
            &VerifyOptions {
                max_mpfr_bits: bits
            }
        )
        .is_ok());
    }
    let mut c = cert_json();
    c["parameters"]["precision"] = json!(format!("mpfr:{DEFAULT_MAX_MPFR_BITS}"));
    let p = d.join("within.json");
    write_json(&p, &c);
    let cert = specbound::certificate::Certificate::read(&p).unwrap();
    assert!(check_budget(&cert, &VerifyOptions::default()).is_ok());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn audit_with_no_claim_at_all_exited_0_consistent() {
    let d = tmpdir("audit-empty");
    let files: [(&str, &str); 6] = [
        ("header_only.csv", "layer,head,matrix_type,spectral_norm\n"),
        (
            "empty_values.csv",
            "layer,head,matrix_type,spectral_norm,nuclear_norm\n0,-1,M_in,,\n1,-1,M_out,,\n",
        ),
        (
            "short_rows.csv",
            "layer,head,matrix_type,spectral_norm\n0,-1,M_in\n0,-1,M_out\n",
        ),
        (
            "generic_no_values.csv",
            "tensor,quantity,value\nx,spectral_norm,\n",
        ),
        ("bounds_header_only.csv", "model_id,bound,value\n"),
        (
            "schatten_blank.csv",
            "layer,head,matrix_type,min_contribution\n0,0,QK,   \n",
        ),
    ];
    for (name, body) in files {
        let p = d.join(name);
        std::fs::write(&p, body).unwrap();
        assert_bad(
            &["audit", bundled().to_str().unwrap(), p.to_str().unwrap()],
            &[name, "no claim to check"],
        );
    }
    // One claim is enough to run.
    let p = d.join("one.csv");
    std::fs::write(
        &p,
        "layer,head,matrix_type,spectral_norm,rows\n0,-1,M_in,,1536\n",
    )
    .unwrap();
    let out = run(&["audit", bundled().to_str().unwrap(), p.to_str().unwrap()]);
    assert!([0, 1].contains(&code(&out)), "{}", text(&out));
    assert!(
        text(&out).contains("1 claim") || text(&out).contains("claims"),
        "{}",
        text(&out)
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// Terminal control from a certificate's strings: a file name carrying a
/// newline and ANSI escapes erased `verify --model`'s FAILED line and
/// printed a fake "all quantities confirmed"; `diff` printed it raw too.
#[test]
fn certificate_strings_with_ansi_escapes_reached_the_terminal_raw() {
    let d = tmpdir("ansi");
    let hostile = [
        "model.safetensors\n\u{1b}[1A\u{1b}[2K\rall quantities confirmed",
        "model.safetensors\u{202e}lmth.exe",
        "x\u{85}\u{9b}2Ky\u{7}",
    ];
    for (i, name) in hostile.iter().enumerate() {
        let mut c = cert_json();
        c["model"]["files"][0]["file"] = json!(name);
        c["model"]["architecture"] = json!(format!("bert\u{1b}]0;owned\u{7}{i}"));
        let p = d.join(format!("h{i}.json"));
        write_json(&p, &c);
        let good = d.join("good.json");
        write_json(&good, &cert_json());
        let runs = [
            run(&[
                "verify",
                p.to_str().unwrap(),
                "--model",
                bundled().to_str().unwrap(),
            ]),
            run(&["diff", good.to_str().unwrap(), p.to_str().unwrap()]),
            run(&["verify", p.to_str().unwrap()]),
        ];
        for (k, out) in runs.iter().enumerate() {
            let t = text(out);
            assert!(!t.contains('\u{1b}'), "run {k} of {name:?}: raw ESC: {t:?}");
            assert!(!t.contains('\u{7}'), "run {k}: raw BEL: {t:?}");
            assert!(!t.contains('\u{202e}'), "run {k}: raw override: {t:?}");
            assert!(
                !t.contains('\u{9b}') && !t.contains('\u{85}'),
                "run {k}: raw C1: {t:?}"
            );
            assert!(!t.contains("\nall quantities confirmed"), "run {k}: {t:?}");
        }
        assert_ne!(code(&runs[0]), 0, "{}", text(&runs[0]));
    }
    // The library's one escape.
    let e = specbound::io::escape(hostile[0]);
    assert!(!e.contains('\n') && !e.contains('\u{1b}'), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}
