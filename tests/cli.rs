//! Integration tests that drive the real `specbound` binary.

mod common;

use common::{assert_bad as bad, ok_json, root, run};
use std::path::{Path, PathBuf};

use specbound::io::{read_npy, write_npy_f32, write_npy_f64};
use specbound::matrix::DenseMatrix;

fn bundled() -> PathBuf {
    root().join("data/minilm-l0-query.npy")
}

fn shared_model() -> Option<PathBuf> {
    let p = root().join("../shared/models/all-MiniLM-L6-v2/model.safetensors");
    if p.is_file() {
        Some(p)
    } else {
        eprintln!(
            "skipped: {} is absent (only present on the dev/CI machine)",
            p.display()
        );
        None
    }
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("specbound-cli-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn json_of(out: &std::process::Output) -> serde_json::Value {
    ok_json(out)
}

fn interval(v: &serde_json::Value) -> (f64, f64) {
    (v["lo"].as_f64().unwrap(), v["hi"].as_f64().unwrap())
}

#[test]
fn svd_json_has_the_documented_keys_and_valid_intervals() {
    let p = bundled();
    let out = run(&[
        "svd",
        p.to_str().unwrap(),
        "--json",
        "--schatten-p",
        "0,0.5,1,2,4",
    ]);
    let j = json_of(&out);
    assert_eq!(j["rows"], 384);
    assert_eq!(j["cols"], 384);
    let sv = j["singular_values"].as_array().unwrap();
    assert_eq!(sv.len(), 384);
    // Index-matched and sorted (proofs/sorting-lemma.md): lower ends and
    // upper ends are each non-increasing.
    let (mut prev_lo, mut prev_hi) = (f64::INFINITY, f64::INFINITY);
    for (i, v) in sv.iter().enumerate() {
        let (lo, hi) = interval(v);
        assert!(0.0 <= lo && lo <= hi, "sigma_{}: [{lo:e}, {hi:e}]", i + 1);
        assert!(
            lo <= prev_lo && hi <= prev_hi,
            "sigma_{}: [{lo:e}, {hi:e}] after [{prev_lo:e}, {prev_hi:e}]",
            i + 1
        );
        assert!(v["method"].is_string());
        (prev_lo, prev_hi) = (lo, hi);
    }
    for k in [
        "spectral_norm",
        "frobenius_norm",
        "nuclear_norm",
        "norm_21",
        "norm_11",
        "stable_rank",
    ] {
        let (lo, hi) = interval(&j[k]);
        assert!(lo <= hi && lo > 0.0, "{k}");
    }
    assert_eq!(j["rank"]["lo"], 384);
    assert_eq!(j["rank"]["hi"], 384);
    let sc = j["schatten"].as_array().unwrap();
    assert_eq!(sc.len(), 5);
    assert_eq!(sc[0]["p"], 0.0);
    // The bundled matrix meets the auto target: nothing to note.
    assert_eq!(j["notes"], serde_json::json!([]));
    assert_eq!(sc[0]["power"]["lo"], 384.0);
    assert!(sc[1]["norm"]["lo"].as_f64().unwrap() > 0.0);
    // Schatten p = 1 equals the nuclear norm enclosure; p = 2 the Frobenius route.
    assert_eq!(sc[2]["power"], j["nuclear_norm"]);
}

#[test]
fn json_decimals_round_trip_to_the_same_f64() {
    let p = bundled();
    let out = run(&["svd", p.to_str().unwrap(), "--json", "--precision", "f64"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    // Every number printed must be the shortest round-trip form of its f64:
    // re-formatting the parsed value gives back the same characters.
    let j: serde_json::Value = serde_json::from_str(&text).unwrap();
    for v in j["singular_values"].as_array().unwrap() {
        for k in ["lo", "hi"] {
            let x = v[k].as_f64().unwrap();
            let printed = serde_json::to_string(&v[k]).unwrap();
            assert_eq!(printed.parse::<f64>().unwrap(), x);
            assert!(text.contains(&printed));
        }
    }
}

#[test]
fn fortran_order_and_f64_copies_give_the_same_certificate() {
    // Re-emit the real matrix in other layouts: the stored values are equal,
    // so the certified output must be identical.
    let m = read_npy(&bundled()).unwrap().matrix;
    let f = tmp("fortran_f32.npy");
    let mut colmajor = vec![0f32; m.data.len()];
    for i in 0..m.rows {
        for jj in 0..m.cols {
            colmajor[jj * m.rows + i] = m.get(i, jj) as f32;
        }
    }
    write_npy_f32(&f, m.rows, m.cols, &colmajor, true).unwrap();
    let d = tmp("c_f64.npy");
    write_npy_f64(&d, &m).unwrap();
    let a = json_of(&run(&[
        "svd",
        bundled().to_str().unwrap(),
        "--json",
        "--precision",
        "f64",
    ]));
    let b = json_of(&run(&[
        "svd",
        f.to_str().unwrap(),
        "--json",
        "--precision",
        "f64",
    ]));
    let c = json_of(&run(&[
        "svd",
        d.to_str().unwrap(),
        "--json",
        "--precision",
        "f64",
    ]));
    assert_eq!(a["singular_values"], b["singular_values"]);
    assert_eq!(a["singular_values"], c["singular_values"]);
    assert_eq!(a["frobenius_norm"], c["frobenius_norm"]);
}

#[test]
fn transposed_input_gives_the_same_singular_values() {
    let m = read_npy(&bundled()).unwrap().matrix;
    let mut t = vec![0.0; m.data.len()];
    for i in 0..m.rows {
        for j in 0..m.cols {
            t[j * m.rows + i] = m.get(i, j);
        }
    }
    let tp = tmp("transposed.npy");
    write_npy_f64(
        &tp,
        &DenseMatrix {
            rows: m.cols,
            cols: m.rows,
            data: t,
        },
    )
    .unwrap();
    let a = json_of(&run(&["svd", bundled().to_str().unwrap(), "--json"]));
    let b = json_of(&run(&["svd", tp.to_str().unwrap(), "--json"]));
    // Both contain the same exact values, so corresponding intervals intersect.
    for (x, y) in a["singular_values"]
        .as_array()
        .unwrap()
        .iter()
        .zip(b["singular_values"].as_array().unwrap())
    {
        let (xl, xh) = interval(x);
        let (yl, yh) = interval(y);
        assert!(xl <= yh && yl <= xh);
    }
    // (2,1)-norm is not transpose-invariant: columns are the second index.
    assert_ne!(a["norm_21"], b["norm_21"]);
}

#[test]
fn mpfr_output_carries_exact_decimal_bounds() {
    let m = read_npy(&bundled()).unwrap().matrix;
    // The leading 24 x 24 block of the real matrix.
    let k = 24;
    let data: Vec<f64> = (0..k)
        .flat_map(|i| (0..k).map(move |j| (i, j)))
        .map(|(i, j)| m.get(i, j))
        .collect();
    let p = tmp("block24.npy");
    write_npy_f64(
        &p,
        &DenseMatrix {
            rows: k,
            cols: k,
            data,
        },
    )
    .unwrap();
    let j = json_of(&run(&[
        "svd",
        p.to_str().unwrap(),
        "--json",
        "--precision",
        "mpfr:200",
    ]));
    for v in j["singular_values"].as_array().unwrap() {
        let lo: f64 = v["lo"].as_f64().unwrap();
        let le = v["lo_exact"].as_str().unwrap();
        let he = v["hi_exact"].as_str().unwrap();
        assert!(le.len() > 50 && he.len() > 50);
        assert!(v["method"].as_str().unwrap().starts_with("mpfr"));
        // The f64 lo is a lower bound of the decimal lo (outward rounding).
        let le_f = rug::Float::with_val(300, rug::Float::parse(le).unwrap());
        assert!(
            rug::Float::with_val(300, lo) <= le_f,
            "lo {lo:e} lo_exact {le} hi_exact {he}"
        );
    }
}

#[test]
fn table_output_is_readable() {
    let out = run(&["svd", bundled().to_str().unwrap()]);
    assert!(out.status.success());
    let s = String::from_utf8(out.stdout).unwrap();
    assert!(s.contains("spectral norm") && s.contains("singular values (largest first)"));
}

#[test]
fn safetensors_input_with_tensor_name() {
    let Some(model) = shared_model() else { return };
    let m = model.to_str().unwrap();
    let j = json_of(&run(&[
        "svd",
        m,
        "--tensor",
        "encoder.layer.0.intermediate.dense.weight",
        "--json",
    ]));
    assert_eq!(j["rows"], 1536);
    assert_eq!(j["cols"], 384);
    assert_eq!(j["dtype"], "f32");
    // Same tensor as the bundled npy: identical certified values.
    let a = json_of(&run(&[
        "svd",
        m,
        "--tensor",
        "encoder.layer.0.attention.self.query.weight",
        "--json",
    ]));
    let b = json_of(&run(&["svd", bundled().to_str().unwrap(), "--json"]));
    assert_eq!(a["singular_values"], b["singular_values"]);
    bad(
        &["svd", m, "--tensor", "no.such.tensor"],
        &["no.such.tensor"],
    );
    bad(
        &["svd", m, "--tensor", "embeddings.position_ids"],
        &["position_ids"],
    );
    bad(
        &[
            "svd",
            m,
            "--tensor",
            "encoder.layer.0.attention.self.query.bias",
        ],
        &["query.bias"],
    );
}

#[test]
fn bad_inputs_give_one_line_errors_and_exit_2() {
    let missing = tmp("does-not-exist.npy");
    bad(&["svd", missing.to_str().unwrap()], &["does-not-exist.npy"]);
    // 1-D array
    let one_d = tmp("one_d.npy");
    write_npy_f32(&one_d, 1, 4, &[1.0, 2.0, 3.0, 4.0], false).unwrap();
    let mut bytes = std::fs::read(&one_d).unwrap();
    let hdr = String::from_utf8_lossy(&bytes[10..]).to_string();
    let pos = hdr.find("(1, 4)").unwrap();
    bytes[10 + pos..10 + pos + 6].copy_from_slice(b"(4,)  ");
    std::fs::write(&one_d, &bytes).unwrap();
    bad(&["svd", one_d.to_str().unwrap()], &["one_d.npy"]);
    // NaN entry
    let nan = tmp("nan.npy");
    write_npy_f64(
        &nan,
        &DenseMatrix {
            rows: 2,
            cols: 2,
            data: vec![1.0, f64::NAN, 0.0, 1.0],
        },
    )
    .unwrap();
    bad(&["svd", nan.to_str().unwrap()], &["nan.npy"]);
    // Truncated file
    let trunc = tmp("trunc.npy");
    let full = std::fs::read(bundled()).unwrap();
    std::fs::write(&trunc, &full[..full.len() / 2]).unwrap();
    bad(&["svd", trunc.to_str().unwrap()], &["trunc.npy"]);
    // Unsupported dtype (int64)
    let int = tmp("int.npy");
    let mut hdr = b"\x93NUMPY\x01\x00".to_vec();
    let dict = "{'descr': '<i8', 'fortran_order': False, 'shape': (1, 1), }";
    let mut d = dict.to_string();
    while (10 + d.len() + 1) % 64 != 0 {
        d.push(' ');
    }
    d.push('\n');
    hdr.extend_from_slice(&(d.len() as u16).to_le_bytes());
    hdr.extend_from_slice(d.as_bytes());
    hdr.extend_from_slice(&7i64.to_le_bytes());
    std::fs::write(&int, &hdr).unwrap();
    bad(&["svd", int.to_str().unwrap()], &["int.npy"]);
    // Garbage file
    let junk = tmp("junk.safetensors");
    std::fs::write(&junk, b"\xff\xff\xff\xff\xff\xff\xff\x7fnot a header").unwrap();
    bad(&["svd", junk.to_str().unwrap()], &["junk.safetensors"]);
    // Bad options
    bad(
        &["svd", bundled().to_str().unwrap(), "--precision", "quad"],
        &["quad"],
    );
    bad(
        &["svd", bundled().to_str().unwrap(), "--schatten-p", "-1"],
        &["-1"],
    );
    bad(
        &["svd", bundled().to_str().unwrap(), "--schatten-p", "abc"],
        &["abc"],
    );
}

#[test]
fn help_lists_the_svd_options() {
    let out = run(&["svd", "--help"]);
    let s = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--tensor",
        "--schatten-p",
        "--precision",
        "--rtol",
        "--json",
    ] {
        assert!(s.contains(flag), "{flag} missing from help");
    }
    let _ = Path::new("unused");
}

/// Regression (issue 17: a `.npy` or a certificate passed to `certify` was
/// "invalid safetensors file: header too large"): the error says what the
/// file is and which command takes it; usage errors name what is missing,
/// the nearest subcommand and the valid values; `--l-phi -1` is a value.
#[test]
fn certify_says_what_a_file_that_is_no_checkpoint_is() {
    let d = tmp("not-a-model");
    std::fs::create_dir_all(&d).unwrap();
    let npy = d.join("w.npy");
    let m = DenseMatrix {
        rows: 2,
        cols: 2,
        data: vec![1.0, 2.0, 3.0, 4.0],
    };
    write_npy_f64(&npy, &m).unwrap();
    let n = npy.to_str().unwrap();
    bad(&["certify", n], &["NumPy .npy array", "specbound svd"]);
    let cert = d.join("cert.json");
    let out = run(&["certify", "--out", cert.to_str().unwrap(), "--quiet"]);
    assert!(out.status.success());
    bad(
        &["certify", cert.to_str().unwrap()],
        &["specbound certificate", "verify"],
    );
    bad(&["certfy"], &["certify"]);
    bad(&["completions", "tcsh"], &["bash", "zsh"]);
    bad(&["report", "x.json"], &["--out"]);
    let out = run(&["inspect", bundled().to_str().unwrap(), "--l-phi", "-1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("unexpected argument"), "{err}");
    // --tensor on a .npy is an error, not ignored.
    bad(&["svd", n, "--tensor", "x"], &["--tensor"]);
}

/// `verify --json`, like the other commands.
#[test]
fn verify_prints_json_when_asked() {
    let d = tmp("verify-json");
    std::fs::create_dir_all(&d).unwrap();
    let cert = d.join("cert.json");
    assert!(
        run(&["certify", "--out", cert.to_str().unwrap(), "--quiet"])
            .status
            .success()
    );
    let j = ok_json(&run(&["verify", cert.to_str().unwrap(), "--json"]));
    assert_eq!(j["holds"], true);
    assert_eq!(j["exit_code"], 0);
    assert!(j["checks"].as_u64().unwrap() > 0);
}

/// Regression (issue 18, class 10: a full disk on stdout panicked most
/// commands, rc 101): one error line and exit 2. A full stderr is ignored
/// (there is nowhere left to say it), and the exit code still tells.
#[test]
fn a_full_disk_on_stdout_is_one_error_line_and_exit_2() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        eprintln!("skipped: no /dev/full on this system");
        return;
    };
    for args in [
        vec!["inspect", "data/all-MiniLM-L6-v2"],
        vec!["inspect", "data/all-MiniLM-L6-v2", "--json"],
        vec!["man"],
        vec!["completions", "bash"],
    ] {
        let out = common::bin()
            .args(&args)
            .current_dir(root())
            .stdout(full.try_clone().unwrap())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains("cannot write to standard output"), "{err}");
    }
    let out = common::bin()
        .args(["inspect", "no-such-dir/x"])
        .current_dir(root())
        .stderr(full.try_clone().unwrap())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
