//! Integration tests that drive the real `specbound` binary.

mod common;

use common::bundled_npy;

use common::{assert_bad as bad, ok_json, root, run};
use std::path::{Path, PathBuf};

use specbound::io::{read_npy, write_npy_f32, write_npy_f64};
use specbound::matrix::DenseMatrix;

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
    let d = common::process_scratch().join("cli");
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
    let p = bundled_npy();
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
    let p = bundled_npy();
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
    let m = read_npy(&bundled_npy()).unwrap().matrix;
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
        bundled_npy().to_str().unwrap(),
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
    let m = read_npy(&bundled_npy()).unwrap().matrix;
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
    let a = json_of(&run(&["svd", bundled_npy().to_str().unwrap(), "--json"]));
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
    let m = read_npy(&bundled_npy()).unwrap().matrix;
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
    let out = run(&["svd", bundled_npy().to_str().unwrap()]);
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
    let b = json_of(&run(&["svd", bundled_npy().to_str().unwrap(), "--json"]));
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
    let full = std::fs::read(bundled_npy()).unwrap();
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
        &[
            "svd",
            bundled_npy().to_str().unwrap(),
            "--precision",
            "quad",
        ],
        &["quad"],
    );
    bad(
        &["svd", bundled_npy().to_str().unwrap(), "--schatten-p", "-1"],
        &["-1"],
    );
    bad(
        &[
            "svd",
            bundled_npy().to_str().unwrap(),
            "--schatten-p",
            "abc",
        ],
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
    let out = run(&["inspect", bundled_npy().to_str().unwrap(), "--l-phi", "-1"]);
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

#[test]
fn docs_state_the_rust_version_both_crates_need() {
    let rust_version = |toml: &str| {
        let text = std::fs::read_to_string(root().join(toml)).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("rust-version = \""))
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or_else(|| panic!("{toml} has no rust-version"))
            .to_string()
    };
    let v = rust_version("Cargo.toml");
    // The Python crate builds the library: it needs at least as much.
    assert_eq!(rust_version("python/Cargo.toml"), v);
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    assert!(
        readme.contains(&format!("Rust {v} or newer")),
        "README.md must say Rust {v}"
    );
    let python = std::fs::read_to_string(root().join("docs/python.md")).unwrap();
    assert!(
        python.contains(&format!("Rust {v}+")),
        "docs/python.md must say Rust {v}+"
    );
}

/// The character offset at which the last column (after the last run of two
/// or more spaces) starts in each of `rows`.
fn last_column_starts(rows: &[&str]) -> Vec<usize> {
    rows.iter()
        .map(|r| r[..r.rfind("  ").expect("a padded column")].chars().count() + 2)
        .collect()
}

#[test]
fn wide_mpfr_decimals_keep_the_svd_table_columns_aligned() {
    let dir = common::process_scratch().join("cli-align");
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("diag.npy");
    // Values whose MPFR decimal ends differ in length (0.1 is not dyadic).
    let m = DenseMatrix {
        rows: 3,
        cols: 3,
        data: vec![0.1, 0.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0, 1e-5],
    };
    write_npy_f64(&f, &m).unwrap();
    let out = run(&["svd", f.to_str().unwrap(), "--precision", "mpfr:256"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("singular values"))
        .skip(1)
        .collect();
    assert_eq!(table.len(), 4, "{text}");
    // Decimals far wider than the default column of 44 characters ...
    assert!(table[1..].iter().any(|r| r.len() > 60), "{text}");
    // ... and the method column starts at the same place on every row.
    let starts = last_column_starts(&table);
    assert!(starts.iter().all(|&s| s == starts[0]), "{starts:?}\n{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn certify_text_keeps_the_contributors_columns_aligned_in_every_style() {
    let out = run(&["certify", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let cert = specbound::certificate::Certificate::parse(&out.stdout, "cert.json").unwrap();
    for style in [
        specbound::cmd::Style::Shared,
        specbound::cmd::Style::PlusMinus,
        specbound::cmd::Style::Bounds,
    ] {
        let text = specbound::report::summary_text_with(&cert, 1.0, style);
        for head in ["largest contributions to B_ours", "largest term of B_Edel"] {
            let rows: Vec<&str> = text
                .lines()
                .skip_while(|l| !l.starts_with(head))
                .skip(1)
                .take_while(|l| l.starts_with("  "))
                .collect();
            assert!(rows.len() > 1, "{head}: {text}");
            // The share column: where the `%` falls.
            let pct: Vec<usize> = rows
                .iter()
                .map(|r| r[..r.find('%').unwrap()].chars().count())
                .collect();
            assert!(
                pct.iter().all(|&p| p == pct[0]),
                "{style:?} {head}: {pct:?}\n{text}"
            );
        }
        let layers: Vec<usize> = text
            .lines()
            .filter(|l| l.starts_with("  layer ") && l.contains(": alpha "))
            .map(|l| l[..l.find(" xi ").unwrap()].chars().count())
            .collect();
        assert!(
            layers.iter().all(|&p| p == layers[0]),
            "{style:?}: {layers:?}\n{text}"
        );
    }
}

/// A version-1 `.npy` file of `descr` and shape (rows, cols) holding `data`.
fn npy_bytes(descr: &str, rows: usize, cols: usize, data: &[u8]) -> Vec<u8> {
    let mut h =
        format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({rows}, {cols}), }}");
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(h.len() as u16).to_le_bytes());
    b.extend_from_slice(h.as_bytes());
    b.extend_from_slice(data);
    b
}

#[test]
fn big_endian_npy_gives_the_same_certificate_as_little_endian() {
    let d = common::tmpdir("big-endian");
    let vals = [1.5f64, -0.1, 3.0e-3, 65504.0, -2.0, 0.0];
    type Enc = fn(f64, bool) -> Vec<u8>;
    let encoders: [(&str, Enc); 3] = [
        ("f8", |x, be| {
            if be {
                x.to_be_bytes().to_vec()
            } else {
                x.to_le_bytes().to_vec()
            }
        }),
        ("f4", |x, be| {
            let y = x as f32;
            if be {
                y.to_be_bytes().to_vec()
            } else {
                y.to_le_bytes().to_vec()
            }
        }),
        ("f2", |x, be| {
            let y = half::f16::from_f64(x);
            if be {
                y.to_be_bytes().to_vec()
            } else {
                y.to_le_bytes().to_vec()
            }
        }),
    ];
    for (code, enc) in encoders {
        let mut outs = Vec::new();
        for (order, be) in [("<", false), (">", true)] {
            let data: Vec<u8> = vals.iter().flat_map(|&x| enc(x, be)).collect();
            let f = d.join(format!("m-{code}-{}.npy", if be { "be" } else { "le" }));
            std::fs::write(&f, npy_bytes(&format!("{order}{code}"), 2, 3, &data)).unwrap();
            let mut j = ok_json(&run(&["svd", f.to_str().unwrap(), "--json"]));
            j.as_object_mut().unwrap().remove("input");
            outs.push(j);
        }
        assert_eq!(outs[0], outs[1], "{code}");
    }
    // A big-endian NaN is found: read as little-endian it would be finite.
    let f = d.join("nan.npy");
    std::fs::write(&f, npy_bytes(">f8", 1, 1, &f64::NAN.to_be_bytes())).unwrap();
    let out = run(&["svd", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("NaN"));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_bin_that_is_not_a_state_dict_is_said_as_what_it_is_never_told_to_rename() {
    let d = common::tmpdir("not-state-dict");
    // A zip archive that is not a PyTorch checkpoint, and plain text.
    let mut z = b"PK\x03\x04".to_vec();
    z.extend_from_slice(&[0u8; 22]);
    z.extend_from_slice(&9u16.to_le_bytes());
    z.extend_from_slice(&[0, 0]);
    z.extend_from_slice(b"notes.txt");
    z.extend_from_slice(&[0u8; 64]);
    let zip = d.join("zip.bin");
    std::fs::write(&zip, &z).unwrap();
    let text = d.join("text.bin");
    std::fs::write(&text, b"just text, not a checkpoint").unwrap();
    let pickle = d.join("pickle.pt");
    std::fs::write(&pickle, b"\x80\x02\x8a\x0aplain pickle, no magic").unwrap();
    for (file, says) in [
        (&zip, "is a zip archive"),
        (
            &text,
            "is not a PyTorch checkpoint (neither a zip archive nor a pickle stream)",
        ),
        (&pickle, "is a pickle stream without the magic number"),
    ] {
        let f = file.to_str().unwrap();
        for args in [vec!["svd", f], vec!["certify", f, "--heads", "1"]] {
            let out = run(&args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert!(!err.contains("rename"), "{args:?}: {err}");
            assert!(!err.contains("safetensors file: header"), "{args:?}: {err}");
            assert!(!err.contains("extension is none of"), "{args:?}: {err}");
            if args[0] == "svd" || file != &zip {
                assert!(err.contains(says), "{args:?}: {err}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn integer_arrays_convert_exactly_or_are_refused_with_the_index() {
    use specbound::io::npy::matrix_from_int_le_bytes as ints;
    let name = Path::new("array");
    let i8s: Vec<u8> = [-128i8, -1, 0, 127].iter().map(|&x| x as u8).collect();
    let m = ints(name, true, 1, 2, 2, &i8s).unwrap();
    assert_eq!(m.matrix.data, vec![-128.0, -1.0, 0.0, 127.0]);
    assert_eq!(m.dtype.to_string(), "I8");
    let i32s: Vec<u8> = [i32::MIN, i32::MAX]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let m = ints(name, true, 4, 1, 2, &i32s).unwrap();
    assert_eq!(m.matrix.data, vec![-2147483648.0, 2147483647.0]);
    let m = ints(name, false, 4, 1, 1, &u32::MAX.to_le_bytes()).unwrap();
    assert_eq!(m.matrix.data, vec![4294967295.0]);
    // 64 bits: 2^53, -2^63 and 2^63 + 2^11 are floats; 2^53 + 1 and
    // i64::MAX are not.
    let ok: Vec<u8> = [1i64 << 53, i64::MIN, -(1 << 53)]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let m = ints(name, true, 8, 1, 3, &ok).unwrap();
    assert_eq!(
        m.matrix.data,
        vec![2f64.powi(53), -(2f64.powi(63)), -(2f64.powi(53))]
    );
    let u = ((1u64 << 63) + (1 << 11)).to_le_bytes();
    let m = ints(name, false, 8, 1, 1, &u).unwrap();
    assert_eq!(m.matrix.data[0], 2f64.powi(63) + 2048.0);
    for (v, shown) in [
        ((1i64 << 53) + 1, "9007199254740993"),
        (i64::MAX, "9223372036854775807"),
    ] {
        let b: Vec<u8> = [0i64, v].iter().flat_map(|x| x.to_le_bytes()).collect();
        let msg = ints(name, true, 8, 1, 2, &b).unwrap_err().to_string();
        assert!(
            msg.contains(&format!(
                "I64 value {shown} at [0, 1] is not exactly a float64"
            )),
            "{msg}"
        );
    }
    let msg = ints(name, false, 8, 1, 1, &u64::MAX.to_le_bytes())
        .unwrap_err()
        .to_string();
    assert!(msg.contains("U64 value 18446744073709551615"), "{msg}");
    assert!(ints(name, true, 3, 1, 1, &[0, 0, 0]).is_err());
    assert!(ints(name, true, 1, 2, 2, &[0, 0, 0]).is_err());
}

/// Regression: docs/architectures.md and docs/spectra.md cited reference
/// notes by absolute paths of one machine. The docs cite public sources
/// and name no absolute path of anybody's machine.
#[test]
fn docs_name_no_absolute_machine_paths() {
    let root = common::root();
    let mut files = vec![root.join("README.md")];
    for e in std::fs::read_dir(root.join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            files.push(p);
        }
    }
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for bad in ["/work/", "/home/", "/Users/", "/root/", "/tmp/shared"] {
            assert!(!text.contains(bad), "{} names {bad}", f.display());
        }
    }
}

/// The synopsis lines of `cmd` in a document: the lines starting with
/// `specbound CMD` and the indented `[...]` lines continuing them.
fn synopsis(doc: &str, cmd: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for l in doc.lines() {
        if l.starts_with(&format!("specbound {cmd} ")) {
            inside = true;
        } else if !(inside && l.starts_with(' ') && l.trim_start().starts_with('[')) {
            inside = false;
        }
        if inside {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

/// Regression: the synopses of certify, study and audit did not list
/// `--measures`, `--init` and `--stack`. Each synopsis lists every one of
/// them its command accepts (as `--help` says).
#[test]
fn synopses_list_measures_init_and_stack() {
    let root = common::root();
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
    for (file, cmd) in [
        ("docs/certify.md", "certify"),
        ("README.md", "certify"),
        ("docs/study.md", "study"),
        ("README.md", "study"),
        ("README.md", "audit"),
    ] {
        let syn = synopsis(&read(file), cmd);
        assert!(!syn.is_empty(), "{file}: no synopsis of {cmd}");
        let help = String::from_utf8(run(&[cmd, "--help"]).stdout).unwrap();
        for opt in ["--measures", "--init", "--stack"] {
            if help.contains(&format!("{opt} ")) || help.contains(&format!("{opt}\n")) {
                assert!(
                    syn.contains(opt),
                    "{file}: the synopsis of {cmd} lacks {opt}:\n{syn}"
                );
            }
        }
    }
}

/// `tests/README.md` is the map of the test suite: every test file
/// (`tests/*.rs`) is named in it, so a new file cannot go unlisted.
#[test]
fn tests_readme_names_every_test_file() {
    let dir = root().join("tests");
    let map = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".rs") && !map.contains(&format!("`{name}`")) {
            missing.push(name);
        }
    }
    missing.sort();
    assert!(
        missing.is_empty(),
        "tests/README.md does not name: {missing:?}"
    );
}

/// Run in a child process by
/// `regression_suite_scratch_is_removed_when_the_test_process_exits`: makes
/// a scratch folder with a file in it and prints the folder's path.
#[test]
#[ignore = "a helper: run in a child process by the regression test below it"]
fn scratch_helper_prints_its_folder() {
    let d = common::tmpdir("exit");
    std::fs::write(d.join("f"), b"x").unwrap();
    println!("SCRATCH={}", d.display());
}

/// Regression: every suite run left its scratch folders (about 2.6 GB) in
/// the system's temporary directory, and a CI run found the disk full.
#[test]
fn regression_suite_scratch_is_removed_when_the_test_process_exits() {
    let o = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "scratch_helper_prints_its_folder"])
        .arg("--nocapture")
        .env_remove(common::KEEP_SCRATCH)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    let folder = out.lines().find_map(|l| l.strip_prefix("SCRATCH="));
    let folder = Path::new(folder.expect("the helper printed its folder"));
    let process_folder = folder.parent().unwrap();
    assert!(process_folder
        .to_string_lossy()
        .contains("specbound-tests/cli-"));
    assert!(
        !folder.exists(),
        "{} outlived its process",
        folder.display()
    );
    assert!(!process_folder.exists());
}
