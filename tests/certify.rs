//! `specbound certify` end to end on the real all-MiniLM-L6-v2 weights
//! (the bundled copy), plus re-emitted layouts and broken models.

mod common;

use common::{bundled, tmpdir};

use common::{assert_bad, ok_json, root, run};
use std::path::Path;

use serde_json::Value;
use specbound::io::checkpoint::Checkpoint;
use specbound::matrix::DenseMatrix;

fn iv(v: &Value) -> (f64, f64) {
    let lo = v["lo"].as_f64().expect("lo");
    let hi = v["hi"].as_f64().expect("hi");
    assert!(lo <= hi, "lo > hi in {v}");
    (lo, hi)
}

/// `x` lies in the interval widened by `rel` relative (for independent
/// float computations, which carry their own rounding error).
fn near(x: f64, v: &Value, rel: f64, what: &str) {
    let (lo, hi) = iv(v);
    let slack = rel * hi.abs().max(lo.abs());
    assert!(
        lo - slack <= x && x <= hi + slack,
        "{what}: {x:e} not within float error of [{lo:e}, {hi:e}]"
    );
}

fn certificate() -> Value {
    use std::sync::OnceLock;
    static C: OnceLock<Value> = OnceLock::new();
    C.get_or_init(|| ok_json(&run(&["certify", "--json"])))
        .clone()
}

/// The files' SHA-256 is computed beside the certification when no resume
/// directory needs it first, and before anything else when one does: both
/// certificates record the digest `sha256sum` gives, for every file.
#[test]
fn recorded_sha256_is_the_files_digest_with_and_without_a_resume_directory() {
    let model = bundled();
    let expected = |file: &str| {
        let out = std::process::Command::new("sha256sum")
            .arg(model.join(file))
            .output()
            .expect("sha256sum (coreutils) runs");
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()[..64].to_string()
    };
    let d = tmpdir("certify-sha256");
    let out = d.join("cert.json");
    let m = model.to_string_lossy().into_owned();
    let resumed = run(&[
        "certify",
        &m,
        "-q",
        "--out",
        &out.to_string_lossy(),
        "--resume-dir",
        &d.join("resume").to_string_lossy(),
    ]);
    assert!(resumed.status.success(), "{resumed:?}");
    let with_resume: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    for c in [certificate(), with_resume] {
        let files = c["model"]["files"].as_array().expect("files").clone();
        assert_eq!(files.len(), 1, "{files:?}");
        for f in files {
            let name = f["file"].as_str().unwrap();
            assert_eq!(f["sha256"].as_str().unwrap(), expected(name), "{name}");
        }
    }
}

#[test]
fn default_run_certifies_the_bundled_model_with_all_keys() {
    let c = certificate();
    assert_eq!(c["format"], "specbound-certificate");
    assert_eq!(c["version"], 1);
    assert_eq!(c["tool"]["name"], "specbound");
    let m = &c["model"];
    assert_eq!(m["architecture"], "bert");
    assert_eq!(m["layers"], 6);
    assert_eq!(m["hidden"], 384);
    assert_eq!(m["heads"], 12);
    assert_eq!(m["head_dim"], 32);
    assert_eq!(m["intermediate"], 1536);
    assert_eq!(m["files"][0]["sha256"].as_str().unwrap().len(), 64);
    assert_eq!(c["parameters"]["l_phi"], "1.13");
    assert_eq!(c["parameters"]["grid_m"], 12); // ceil(6 + ln 384) = ceil(11.95)
    let mats = c["matrices"].as_array().unwrap();
    assert_eq!(mats.len(), 6 * (2 * 12 + 2));
    for w in mats {
        for k in [
            "spectral_norm",
            "frobenius_norm",
            "nuclear_norm",
            "norm_21",
            "norm_11",
            "stable_rank",
            "alpha",
            "gamma",
            "min_contribution",
        ] {
            let (lo, hi) = iv(&w[k]);
            assert!(lo > 0.0 && hi.is_finite(), "{k}");
        }
        let ty = w["type"].as_str().unwrap();
        let (rows, cols) = (w["rows"].as_u64().unwrap(), w["cols"].as_u64().unwrap());
        let sv = w["singular_values"].as_array().unwrap();
        let zeros = w["structural_zeros"].as_u64().unwrap();
        assert_eq!(sv.len() as u64 + zeros, rows.min(cols));
        match ty {
            "QK" | "V_tilde" => {
                assert!(w["head"].as_i64().unwrap() >= 0);
                assert_eq!((rows, cols), (384, 384));
                assert_eq!(sv.len(), 32, "rank <= head_dim, exact zeros counted");
                assert_eq!(w["rank"]["lo"], 32);
                assert_eq!(w["rank"]["hi"], 32);
            }
            "M_in" => assert_eq!((rows, cols, w["head"].as_i64().unwrap()), (384, 1536, -1)),
            "M_out" => assert_eq!((rows, cols, w["head"].as_i64().unwrap()), (1536, 384, -1)),
            t => panic!("unknown type {t}"),
        }
        assert_eq!(w["contributions"].as_array().unwrap().len(), 25);
        assert!(!w["p_opt"].as_array().unwrap().is_empty());
        let spec = iv(&w["spectral_norm"]);
        assert!(
            (spec.1 - spec.0) / spec.0 <= 1e-11,
            "spectral norm relative width (target 1e-11) {spec:?}"
        );
    }
    for b in ["ours", "edelman"] {
        let (lo, hi) = iv(&c["bounds"][b]);
        assert!(
            (hi - lo) / lo <= 1e-9,
            "{b} relative width {}",
            (hi - lo) / lo
        );
    }
}

fn read(ck: &Checkpoint, name: &str) -> DenseMatrix {
    ck.read(name).unwrap().matrix
}

/// Dense f64 product the way the authors' scripts form it.
fn dense_product(
    b_rows_t: &DenseMatrix,
    rows0: usize,
    c: &DenseMatrix,
    rows1: usize,
    dh: usize,
    c_transposed: bool,
) -> nalgebra::DMatrix<f64> {
    // b_rows_t: weight whose rows rows0..rows0+dh give B^T; c: weight for C.
    let n = b_rows_t.cols;
    nalgebra::DMatrix::from_fn(n, n, |i, j| {
        (0..dh)
            .map(|k| {
                let b = b_rows_t.get(rows0 + k, i);
                let cc = if c_transposed {
                    c.get(j, rows1 + k)
                } else {
                    c.get(rows1 + k, j)
                };
                b * cc
            })
            .sum::<f64>()
    })
}

#[test]
fn independent_float_computation_agrees_with_every_checked_interval() {
    let c = certificate();
    let ck = Checkpoint::open(&bundled()).unwrap();
    let mats = c["matrices"].as_array().unwrap();
    let find = |l: i64, h: i64, t: &str| {
        mats.iter()
            .find(|w| w["layer"] == l && w["head"] == h && w["type"] == t)
            .unwrap()
            .clone()
    };
    for l in [0usize, 5] {
        let q = read(
            &ck,
            &format!("encoder.layer.{l}.attention.self.query.weight"),
        );
        let k = read(&ck, &format!("encoder.layer.{l}.attention.self.key.weight"));
        let v = read(
            &ck,
            &format!("encoder.layer.{l}.attention.self.value.weight"),
        );
        let o = read(
            &ck,
            &format!("encoder.layer.{l}.attention.output.dense.weight"),
        );
        for h in [0usize, 7, 11] {
            let qk = dense_product(&q, 32 * h, &k, 32 * h, 32, false);
            let vo = dense_product(&v, 32 * h, &o, 32 * h, 32, true);
            for (mat, t) in [(qk, "QK"), (vo, "V_tilde")] {
                let w = find(l as i64, h as i64, t);
                let s = mat.clone().svd(false, false).singular_values;
                let mut s: Vec<f64> = s.iter().copied().collect();
                s.sort_by(|a, b| b.partial_cmp(a).unwrap());
                near(
                    s[0],
                    &w["spectral_norm"],
                    1e-12,
                    &format!("{t} {l}/{h} sigma_1"),
                );
                near(
                    s[31],
                    &w["singular_values"][31],
                    1e-9,
                    &format!("{t} {l}/{h} sigma_32"),
                );
                assert!(
                    s[32] < 1e-12 * s[0],
                    "beyond rank 32 the float values are noise"
                );
                let n21: f64 = (0..384).map(|j| mat.column(j).norm()).sum();
                near(n21, &w["norm_21"], 1e-12, &format!("{t} {l}/{h} norm_21"));
                let n11: f64 = mat.iter().map(|x| x.abs()).sum();
                near(n11, &w["norm_11"], 1e-12, &format!("{t} {l}/{h} norm_11"));
                near(
                    mat.norm(),
                    &w["frobenius_norm"],
                    1e-12,
                    &format!("{t} {l}/{h} frobenius"),
                );
            }
        }
        let ff1 = read(&ck, &format!("encoder.layer.{l}.intermediate.dense.weight"));
        let m_in = nalgebra::DMatrix::from_fn(384, 1536, |i, j| ff1.get(j, i));
        let w = find(l as i64, -1, "M_in");
        let s = m_in.clone().svd(false, false).singular_values;
        let top = s.iter().copied().fold(0.0, f64::max);
        near(top, &w["spectral_norm"], 1e-12, "M_in sigma_1");
        let n21: f64 = (0..1536).map(|j| m_in.column(j).norm()).sum();
        near(n21, &w["norm_21"], 1e-12, "M_in norm_21");
    }
}

#[test]
fn proxies_recomputed_in_plain_floats_fall_within_float_error() {
    // Re-implements paper-proxies.md §3.4-§4.1 independently (plain f64 on
    // the certified midpoints) and compares with the certified intervals.
    let c = certificate();
    let mats = c["matrices"].as_array().unwrap();
    let mid = |v: &Value| {
        let (lo, hi) = iv(v);
        0.5 * (lo + hi)
    };
    let get = |l: i64, h: i64, t: &str| {
        mats.iter()
            .find(|w| w["layer"] == l && w["head"] == h && w["type"] == t)
            .unwrap()
    };
    let (layers, heads, n) = (6i64, 12i64, 384.0f64);
    let c2 = |l, h, t| mid(&get(l, h, t)["spectral_norm"]);
    let factor: Vec<f64> = (0..layers)
        .map(|k| {
            let s: f64 = (0..heads)
                .map(|h| c2(k, h, "V_tilde") * (1.0 + 4.0 * c2(k, h, "QK")))
                .sum();
            1.13 * c2(k, -1, "M_in") * c2(k, -1, "M_out") * s
        })
        .collect();
    let alpha: Vec<f64> = (0..layers as usize)
        .map(|l| factor[l + 1..].iter().product())
        .collect();
    let mut ours = (layers as f64).sqrt();
    let mut inner = 1.0;
    for l in 0..layers {
        let (cin, cout) = (c2(l, -1, "M_in"), c2(l, -1, "M_out"));
        let mut xi = 0.0;
        for h in 0..heads {
            let n21 = |t| mid(&get(l, h, t)["norm_21"]);
            xi += (cout * cin * c2(l, h, "V_tilde") * n21("QK")).powf(2.0 / 3.0);
            xi += (cout * cin * n21("V_tilde")).powf(2.0 / 3.0);
        }
        xi += (cout * mid(&get(l, -1, "M_in")["norm_21"])).powf(2.0 / 3.0);
        xi += mid(&get(l, -1, "M_out")["norm_21"]).powf(2.0 / 3.0);
        inner += alpha[l as usize].powf(2.0 / 3.0) * xi;
        for w in mats.iter().filter(|w| w["layer"] == l) {
            let h = w["head"].as_i64().unwrap();
            let gamma = match w["type"].as_str().unwrap() {
                "QK" => 2.0 * c2(l, h, "V_tilde") * cout * cin,
                "V_tilde" => cout * cin,
                "M_in" => cout,
                _ => 1.0,
            };
            near(alpha[l as usize], &w["alpha"], 1e-10, "alpha");
            near(gamma, &w["gamma"], 1e-10, "gamma");
            let s = gamma * alpha[l as usize] * layers as f64;
            let svals: Vec<f64> = w["singular_values"]
                .as_array()
                .unwrap()
                .iter()
                .map(mid)
                .collect();
            let rank = w["rank"]["lo"].as_f64().unwrap();
            let m = 12.0;
            let mut best = f64::INFINITY;
            for (k, cw) in w["contributions"].as_array().unwrap().iter().enumerate() {
                let p = k as f64 / m;
                let sp: f64 = if k == 0 {
                    rank
                } else {
                    svals.iter().map(|x| x.powf(p)).sum()
                };
                let val = sp.powf(1.0 / (p + 2.0))
                    * s.powf(p / (p + 2.0))
                    * n.powf((p + 1.0) / (p + 2.0));
                near(val, &cw["value"], 1e-9, &format!("c(W, {k}/12)"));
                best = best.min(val);
            }
            near(best, &w["min_contribution"], 1e-9, "min contribution");
            ours += best;
        }
    }
    near(ours, &c["bounds"]["ours"], 1e-9, "B_ours");
    near(inner.powf(1.5), &c["bounds"]["edelman"], 1e-9, "B_Edel");
}

fn write_safetensors(path: &Path, tensors: &[(String, &DenseMatrix)], dtype_f64: bool) {
    common::write_safetensors(path, tensors, if dtype_f64 { "F64" } else { "F32" });
}

const NAMES: [&str; 6] = [
    "attention.self.query.weight",
    "attention.self.key.weight",
    "attention.self.value.weight",
    "attention.output.dense.weight",
    "intermediate.dense.weight",
    "output.dense.weight",
];

/// A one-layer model re-emitted from the real layer-0 weights.
fn one_layer(dir: &Path, prefix: &str, config: Option<Value>, skip: Option<&str>, f64_dtype: bool) {
    let ck = Checkpoint::open(&bundled()).unwrap();
    let mats: Vec<(String, DenseMatrix)> = NAMES
        .iter()
        .filter(|n| Some(**n) != skip)
        .map(|n| {
            (
                format!("{prefix}encoder.layer.0.{n}"),
                read(&ck, &format!("encoder.layer.0.{n}")),
            )
        })
        .collect();
    let refs: Vec<(String, &DenseMatrix)> = mats.iter().map(|(n, m)| (n.clone(), m)).collect();
    write_safetensors(&dir.join("model.safetensors"), &refs, f64_dtype);
    if let Some(cfg) = config {
        std::fs::write(dir.join("config.json"), serde_json::to_vec(&cfg).unwrap()).unwrap();
    }
}

fn cfg(layers: usize, hidden: usize, heads: usize, model_type: &str) -> Value {
    serde_json::json!({"model_type": model_type, "num_hidden_layers": layers, "hidden_size": hidden,
        "num_attention_heads": heads, "intermediate_size": 1536})
}

fn bounds_of(dir: &Path, extra: &[&str]) -> (Value, Value) {
    let mut args = vec!["certify", dir.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    let j = ok_json(&run(&args));
    (j["bounds"].clone(), j["matrices"].clone())
}

#[test]
fn prefixes_dtypes_shards_and_single_files_give_the_same_certificate() {
    let a = tmpdir("plain");
    one_layer(&a, "", Some(cfg(1, 384, 12, "bert")), None, false);
    let (b0, m0) = bounds_of(&a, &[]);
    // bert. prefix
    let b = tmpdir("prefixed");
    one_layer(&b, "bert.", Some(cfg(1, 384, 12, "bert")), None, false);
    assert_eq!(bounds_of(&b, &[]), (b0.clone(), m0.clone()));
    // roberta. prefix and model_type
    let r = tmpdir("roberta");
    one_layer(
        &r,
        "roberta.",
        Some(cfg(1, 384, 12, "roberta")),
        None,
        false,
    );
    assert_eq!(bounds_of(&r, &[]).0, b0);
    // the same values stored as F64: identical exact matrices, identical certificate
    let d = tmpdir("f64");
    one_layer(&d, "", Some(cfg(1, 384, 12, "bert")), None, true);
    assert_eq!(bounds_of(&d, &[]), (b0.clone(), m0.clone()));
    // a single .safetensors file without config.json, with --heads
    let s = tmpdir("single");
    one_layer(&s, "", None, None, false);
    let f = s.join("model.safetensors");
    let j = ok_json(&run(&[
        "certify",
        f.to_str().unwrap(),
        "--heads",
        "12",
        "--json",
    ]));
    assert_eq!(j["bounds"], b0);
    // without --heads: a clear error
    let out = run(&["certify", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--heads"));
    // sharded: two shards plus an index
    let sh = tmpdir("sharded");
    let ck = Checkpoint::open(&bundled()).unwrap();
    let mats: Vec<(String, DenseMatrix)> = NAMES
        .iter()
        .map(|n| {
            (
                format!("encoder.layer.0.{n}"),
                read(&ck, &format!("encoder.layer.0.{n}")),
            )
        })
        .collect();
    let refs: Vec<(String, &DenseMatrix)> = mats.iter().map(|(n, m)| (n.clone(), m)).collect();
    write_safetensors(
        &sh.join("model-00001-of-00002.safetensors"),
        &refs[..3],
        false,
    );
    write_safetensors(
        &sh.join("model-00002-of-00002.safetensors"),
        &refs[3..],
        false,
    );
    let mut map = serde_json::Map::new();
    for (i, (n, _)) in refs.iter().enumerate() {
        let f = if i < 3 {
            "model-00001-of-00002.safetensors"
        } else {
            "model-00002-of-00002.safetensors"
        };
        map.insert(n.clone(), Value::String(f.into()));
    }
    std::fs::write(
        sh.join("model.safetensors.index.json"),
        serde_json::to_vec(&serde_json::json!({"metadata": {}, "weight_map": map})).unwrap(),
    )
    .unwrap();
    std::fs::write(
        sh.join("config.json"),
        serde_json::to_vec(&cfg(1, 384, 12, "bert")).unwrap(),
    )
    .unwrap();
    let j = ok_json(&run(&["certify", sh.to_str().unwrap(), "--json"]));
    assert_eq!(j["bounds"], b0);
    assert_eq!(j["model"]["files"].as_array().unwrap().len(), 2);
}

#[test]
fn bad_models_give_one_line_errors_and_no_output() {
    let missing = tmpdir("missing");
    one_layer(
        &missing,
        "",
        Some(cfg(1, 384, 12, "bert")),
        Some("attention.self.value.weight"),
        false,
    );
    let out_file = missing.join("cert.json");
    let csv_dir = missing.join("csv");
    assert_bad(
        &[
            "certify",
            missing.to_str().unwrap(),
            "--out",
            out_file.to_str().unwrap(),
            "--csv",
            csv_dir.to_str().unwrap(),
        ],
        &[
            "model.safetensors",
            "attention.self.value.weight",
            "missing",
        ],
    );
    assert!(!out_file.exists() && !csv_dir.exists(), "no partial output");

    let shape = tmpdir("shape");
    one_layer(&shape, "", Some(cfg(1, 512, 8, "bert")), None, false);
    assert_bad(
        &["certify", shape.to_str().unwrap()],
        &["the hidden size 512"],
    );

    let div = tmpdir("div");
    one_layer(&div, "", Some(cfg(1, 384, 5, "bert")), None, false);
    assert_bad(
        &["certify", div.to_str().unwrap()],
        &["not divisible by 5 heads"],
    );

    let arch = tmpdir("arch");
    one_layer(&arch, "", Some(cfg(1, 384, 12, "mamba")), None, false);
    assert_bad(
        &["certify", arch.to_str().unwrap()],
        &["unsupported architecture 'mamba'", "supported: bert"],
    );
    let mismatch = tmpdir("mismatch");
    one_layer(&mismatch, "", Some(cfg(1, 384, 12, "gpt2")), None, false);
    assert_bad(
        &["certify", mismatch.to_str().unwrap()],
        &["model type 'gpt2' expects tensors like 'h.0.attn.c_attn.weight'"],
    );

    let layers = tmpdir("layers");
    one_layer(&layers, "", Some(cfg(2, 384, 12, "bert")), None, false);
    assert_bad(
        &["certify", layers.to_str().unwrap()],
        &["encoder.layer.1.", "missing tensor"],
    );

    let nan = tmpdir("nan");
    one_layer(&nan, "", Some(cfg(1, 384, 12, "bert")), None, false);
    let p = nan.join("model.safetensors");
    let mut bytes = std::fs::read(&p).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let at = 8 + n + 4 * 1000; // inside the first tensor (query)
    bytes[at..at + 4].copy_from_slice(&f32::NAN.to_le_bytes());
    std::fs::write(&p, &bytes).unwrap();
    assert_bad(
        &["certify", nan.to_str().unwrap()],
        &["query.weight", "NaN"],
    );

    let trunc = tmpdir("trunc");
    one_layer(&trunc, "", Some(cfg(1, 384, 12, "bert")), None, false);
    let p = trunc.join("model.safetensors");
    let bytes = std::fs::read(&p).unwrap();
    std::fs::write(&p, &bytes[..bytes.len() - 100]).unwrap();
    assert_bad(
        &["certify", trunc.to_str().unwrap()],
        &["model.safetensors"],
    );

    let empty = tmpdir("empty");
    assert_bad(
        &["certify", empty.to_str().unwrap()],
        &["none of model.safetensors"],
    );
    assert_bad(&["certify", "/nonexistent/model"], &["/nonexistent/model"]);
    assert_bad(
        &["certify", bundled().to_str().unwrap(), "--l-phi", "x"],
        &["L_phi"],
    );
}

#[test]
fn csv_tables_have_the_authors_layout_and_agree_with_the_certificate() {
    let d = tmpdir("csv");
    let cert = d.join("cert.json");
    let out = run(&[
        "certify",
        "--csv",
        d.join("tables").to_str().unwrap(),
        "--out",
        cert.to_str().unwrap(),
        "--model-id",
        "all-MiniLM-L6-v2",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c: Value = serde_json::from_slice(&std::fs::read(&cert).unwrap()).unwrap();
    let read = |n: &str| std::fs::read_to_string(d.join("tables").join(n)).unwrap();
    let summary = read("matrix_summary.csv");
    let mut lines = summary.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    for col in [
        "layer",
        "head",
        "matrix_type",
        "rows",
        "cols",
        "rank",
        "spectral_norm",
        "frobenius_norm",
        "nuclear_norm",
        "norm_21",
        "norm_11",
        "stable_rank",
    ] {
        assert!(header.contains(&col), "{col}");
        if !["layer", "head", "matrix_type", "rows", "cols"].contains(&col) {
            assert!(
                header.contains(&format!("{col}_lo").as_str())
                    && header.contains(&format!("{col}_hi").as_str())
            );
        }
    }
    assert_eq!(lines.count(), 156);
    let opt = read("schatten_opt.csv");
    assert!(opt.starts_with("layer,head,matrix_type,alpha_mh,"));
    for col in [
        "gamma",
        "scale_gamma_alpha_L",
        "p_grid_m",
        "p_opt",
        "min_contribution",
    ] {
        assert!(opt.lines().next().unwrap().contains(col));
    }
    assert_eq!(opt.lines().count(), 157);
    let bounds = read("observed_bounds.csv");
    let rows: Vec<Vec<&str>> = bounds.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(
        rows[0],
        ["model_id", "bound", "value", "value_lo", "value_hi"]
    );
    assert_eq!(rows[1][0], "all-MiniLM-L6-v2");
    assert_eq!(rows[1][1], "ours");
    let (lo, hi) = iv(&c["bounds"]["ours"]);
    assert_eq!(rows[1][3].parse::<f64>().unwrap(), lo);
    assert_eq!(rows[1][4].parse::<f64>().unwrap(), hi);
    let v: f64 = rows[1][2].parse().unwrap();
    assert!(lo <= v && v <= hi);
    assert_eq!(rows[2][1], "edelman");
    let raw = read("p_contribution_raw.csv");
    assert!(
        raw.starts_with("layer,head,matrix_type,p,contribution,contribution_lo,contribution_hi\n")
    );
    assert_eq!(raw.lines().count(), 1 + 156 * 25);
    // No temporary files are left behind.
    for e in std::fs::read_dir(d.join("tables")).unwrap() {
        let n = e.unwrap().file_name().to_string_lossy().to_string();
        assert!(n.ends_with(".csv"), "stray file {n}");
    }
}

#[test]
fn atomic_output_keeps_the_old_certificate_when_a_run_fails() {
    let d = tmpdir("atomic");
    let cert = d.join("cert.json");
    std::fs::write(&cert, b"previous certificate").unwrap();
    let bad = tmpdir("atomic-bad");
    one_layer(&bad, "", Some(cfg(1, 384, 5, "bert")), None, false);
    let out = run(&[
        "certify",
        bad.to_str().unwrap(),
        "--out",
        cert.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read(&cert).unwrap(), b"previous certificate");
    // Writing into a directory that does not exist fails cleanly.
    let out = run(&[
        "certify",
        "--out",
        d.join("no/such/dir/cert.json").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot write"));
    // A successful run replaces it completely.
    let out = run(&["certify", "--out", cert.to_str().unwrap()]);
    assert!(out.status.success());
    let c: Value = serde_json::from_slice(&std::fs::read(&cert).unwrap()).unwrap();
    assert_eq!(c["format"], "specbound-certificate");
    assert_eq!(
        std::fs::read_dir(&d).unwrap().count(),
        1,
        "no temporary files left"
    );
}

#[test]
fn bundled_tensors_are_byte_identical_to_the_source_model() {
    let src = root().join("../shared/models/all-MiniLM-L6-v2");
    if !src.is_dir() {
        eprintln!(
            "skipped: {} is absent (only on the dev/CI machine)",
            src.display()
        );
        return;
    }
    let a = Checkpoint::open(&src).unwrap();
    let b = Checkpoint::open(&bundled()).unwrap();
    let names: Vec<String> = b.names().map(str::to_string).collect();
    assert_eq!(names.len(), 36);
    for n in names {
        assert_eq!(a.read(&n).unwrap(), b.read(&n).unwrap(), "{n}");
    }
    // And the full model (with embeddings, biases, position_ids) certifies identically.
    let full = ok_json(&run(&["certify", src.to_str().unwrap(), "--json"]));
    assert_eq!(full["bounds"], certificate()["bounds"]);
    assert_eq!(full["matrices"], certificate()["matrices"]);
}

/// `certify` run by `args`, its exit code and stderr.
fn certify_to(args: &[&str]) -> (Option<i32>, String) {
    let out = run(args);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn heads_flag_overriding_config_is_said_recorded_in_parameters_and_verified() {
    let d = tmpdir("heads-override");
    one_layer(&d, "", Some(cfg(1, 384, 12, "bert")), None, false);
    let cert = d.join("cert.json");
    let (code, err) = certify_to(&[
        "certify",
        d.to_str().unwrap(),
        "--heads",
        "6",
        "--out",
        cert.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("--heads 6 overrides the 12 heads of 'num_attention_heads' in config.json"),
        "{err}"
    );
    let j: Value = serde_json::from_slice(&std::fs::read(&cert).unwrap()).unwrap();
    assert_eq!(j["model"]["heads"], 6);
    assert_eq!(
        j["parameters"]["heads_override"],
        serde_json::json!({"heads": 6, "replaced": 12,
            "source": "'num_attention_heads' in config.json"})
    );
    let schema: Value = serde_json::from_slice(
        &std::fs::read(root().join("docs/certificate.schema.json")).unwrap(),
    )
    .unwrap();
    common::schema::validate(&schema, &j).unwrap();
    // verify re-reads what the file states, with and without the weights.
    let verify = |c: &Path, model: bool| {
        let mut args = vec!["verify", c.to_str().unwrap()];
        if model {
            args.extend(["--model", d.to_str().unwrap()]);
        }
        let out = run(&args);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert_eq!(verify(&cert, true).0, Some(0), "{}", verify(&cert, true).1);
    assert_eq!(verify(&cert, false).0, Some(0));
    // A record that is not what the file states is refuted.
    let forged = d.join("forged.json");
    let mut bad = j.clone();
    bad["parameters"]["heads_override"]["replaced"] = serde_json::json!(16);
    std::fs::write(&forged, serde_json::to_vec(&bad).unwrap()).unwrap();
    let (code, err) = verify(&forged, true);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("$.parameters.heads_override.replaced"),
        "{err}"
    );
    // A record that disagrees with model.heads is refused on reading.
    let mut bad = j.clone();
    bad["parameters"]["heads_override"]["heads"] = serde_json::json!(12);
    std::fs::write(&forged, serde_json::to_vec(&bad).unwrap()).unwrap();
    let (code, err) = verify(&forged, false);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("$.parameters.heads_override.heads"), "{err}");
    // An older certificate (no key) of the same run still verifies.
    let mut old = j.clone();
    old["parameters"]
        .as_object_mut()
        .unwrap()
        .remove("heads_override");
    std::fs::write(&forged, serde_json::to_vec(&old).unwrap()).unwrap();
    assert_eq!(
        verify(&forged, true).0,
        Some(0),
        "{}",
        verify(&forged, true).1
    );
    // Without --heads: no key and no notice; --heads equal to the file's: a
    // record, no notice.
    let (code, err) = certify_to(&[
        "certify",
        d.to_str().unwrap(),
        "--out",
        cert.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("overrides"), "{err}");
    let j: Value = serde_json::from_slice(&std::fs::read(&cert).unwrap()).unwrap();
    assert!(j["parameters"].get("heads_override").is_none(), "{j}");
    let (code, err) = certify_to(&[
        "certify",
        d.to_str().unwrap(),
        "--heads",
        "12",
        "--out",
        cert.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("overrides"), "{err}");
    let j: Value = serde_json::from_slice(&std::fs::read(&cert).unwrap()).unwrap();
    assert_eq!(j["parameters"]["heads_override"]["replaced"], 12);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn verify_model_explains_a_file_hash_mismatch_in_one_line() {
    let a = tmpdir("hash-a");
    let b = tmpdir("hash-b");
    one_layer(&a, "", Some(cfg(1, 384, 12, "bert")), None, false);
    // The same layer under another prefix: another file of the same name.
    one_layer(&b, "bert.", Some(cfg(1, 384, 12, "bert")), None, false);
    let cert = a.join("cert.json");
    let (code, err) = certify_to(&[
        "certify",
        a.to_str().unwrap(),
        "--out",
        cert.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    let out = run(&[
        "verify",
        cert.to_str().unwrap(),
        "--model",
        b.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    let sha = |dir: &Path| {
        use sha2::Digest;
        let h = sha2::Sha256::digest(std::fs::read(dir.join("model.safetensors")).unwrap());
        h.iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    let (expected, found) = (sha(&a), sha(&b));
    assert!(err.contains("'model.safetensors'"), "{err}");
    assert!(
        err.contains(&format!("SHA-256 {}...", &found[..12])),
        "{err}"
    );
    assert!(
        err.contains(&format!("expects {}...", &expected[..12])),
        "{err}"
    );
    assert!(
        err.contains("the certificate is for other weights"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&a);
    let _ = std::fs::remove_dir_all(&b);
}

/// Regression: docs/certify.md stated B_Edel's terms as `(gamma
/// ||W||_2,1)^(2/3)` while the code uses `gamma/2` for QK, so an auditor
/// recomputing from the certificate's `gamma` got 1.168e29 instead of
/// 6.854e28. `scripts/recompute-bounds`, which applies the formulas the
/// docs state ("B_Edel in full") to the certificate's fields alone, lands
/// inside both certified intervals; putting `gamma(QK)` itself into `xi`
/// lands outside; the summary labels each type's largest term with the
/// factor it uses.
#[test]
fn b_edel_recomputed_from_the_certificate_with_the_docs_formulas_lands_inside() {
    let dir = tmpdir("recompute");
    std::fs::create_dir_all(&dir).unwrap();
    let cert = dir.join("cert.json");
    std::fs::write(&cert, serde_json::to_vec(&certificate()).unwrap()).unwrap();
    let script = common::root().join("scripts/recompute-bounds");
    let o = std::process::Command::new("python3")
        .arg(&script)
        .arg(&cert)
        .output()
        .expect("python3 runs scripts/recompute-bounds");
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(out.matches(" inside").count(), 2, "{out}");
    // The docs state the formula the script applies, factor by factor.
    let doc = std::fs::read_to_string(common::root().join("docs/certify.md")).unwrap();
    for row in [
        "| `QK` (head h) | `C_2(V_h) C_2(M_out) C_2(M_in)` | `gamma(QK_h) / 2` |",
        "| `V_tilde` (head h) | `C_2(M_out) C_2(M_in)` | `gamma(V_h)` |",
        "| `M_in` | `C_2(M_out)` | `gamma(M_in)` |",
        "| `M_out` | `1` | `gamma(M_out)` |",
    ] {
        assert!(doc.contains(row), "docs/certify.md lacks {row}");
    }
    let script_text = std::fs::read_to_string(&script).unwrap();
    assert!(script_text
        .contains(r#"XI_FACTOR = {"QK": 0.5, "V_tilde": 1.0, "M_in": 1.0, "M_out": 1.0}"#));
    // With gamma(QK) in place of gamma(QK)/2 the recomputation misses.
    let wrong = dir.join("wrong");
    std::fs::write(&wrong, script_text.replace(r#""QK": 0.5"#, r#""QK": 1.0"#)).unwrap();
    let o = std::process::Command::new("python3")
        .arg(&wrong)
        .arg(&cert)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("B_Edel")
            && String::from_utf8_lossy(&o.stdout).contains("OUTSIDE")
    );
    // The summary: the largest term of each matrix type, with its factor.
    let text = String::from_utf8(run(&["certify"]).stdout).unwrap();
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("largest term of B_Edel's inner sum per matrix type"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    let kinds: Vec<&str> = rows
        .iter()
        .map(|r| r.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(kinds, ["QK", "V_tilde", "M_in", "M_out"], "{text}");
    assert!(rows[0].ends_with("f = gamma/2"), "{}", rows[0]);
    assert!(
        rows[1..].iter().all(|r| r.ends_with("f = gamma")),
        "{rows:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
