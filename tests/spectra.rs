//! `specbound spectra`: every weight matrix of any checkpoint, certified,
//! driven through the real binary. Containment is checked exactly against
//! exact oracles: matrices of exactly known singular values, and sums of
//! squares and of absolute values of the stored entries in rationals.

mod common;

use common::{bundled_arg, tmpdir};
#[path = "common/inertia.rs"]
mod inertia;

use common::{assert_bad, assert_contains_sqrt, ok_json, root, run};
use rug::float::Round;
use rug::{Float, Rational};
use serde_json::Value;
use specbound::io::checkpoint::Checkpoint;
use std::path::{Path, PathBuf};

/// A tensor for [`write_st`]: name, dtype (`F64`, `F32`, `I64`), shape, values.
type Tensor = (String, &'static str, Vec<usize>, Vec<f64>);

/// Writes a safetensors file of tensors of any rank.
fn write_st(path: &Path, tensors: &[Tensor]) {
    let mut header = serde_json::Map::new();
    let mut data: Vec<u8> = Vec::new();
    for (name, dtype, shape, values) in tensors {
        assert_eq!(shape.iter().product::<usize>(), values.len(), "{name}");
        let start = data.len();
        for &x in values {
            match *dtype {
                "F64" => data.extend_from_slice(&x.to_le_bytes()),
                "F32" => data.extend_from_slice(&(x as f32).to_le_bytes()),
                "I64" => data.extend_from_slice(&(x as i64).to_le_bytes()),
                other => panic!("{other}"),
            }
        }
        header.insert(
            name.clone(),
            serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": [start, data.len()]}),
        );
    }
    let mut h = serde_json::to_vec(&Value::Object(header)).unwrap();
    while h.len() % 8 != 0 {
        h.push(b' ');
    }
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&h);
    out.extend_from_slice(&data);
    std::fs::write(path, out).unwrap();
}

fn lo_hi(v: &Value) -> (f64, f64) {
    (v["lo"].as_f64().unwrap(), v["hi"].as_f64().unwrap())
}

/// `lo <= x <= hi` exactly, for an exact rational `x`.
fn contains(v: &Value, x: &Rational, what: &str) {
    let (lo, hi) = lo_hi(v);
    assert!(
        Rational::from_f64(lo).unwrap() <= *x && *x <= Rational::from_f64(hi).unwrap(),
        "{what}: {} not in [{lo:e}, {hi:e}]",
        x.to_f64()
    );
}

/// `lo <= log10(x) <= hi` exactly: log10 is rounded down and up by MPFR
/// at 256 bits, and the enclosure must hold both (`x` is not a power of
/// ten, so log10(x) is irrational and no binary64 end can fall between).
fn contains_log10(v: &Value, x: &Rational, what: &str) {
    let (lo, hi) = lo_hi(v);
    let (mut d, _) = Float::with_val_round(256, x, Round::Down);
    d.log10_round(Round::Down);
    let (mut u, _) = Float::with_val_round(256, x, Round::Up);
    u.log10_round(Round::Up);
    assert!(
        Float::with_val(256, lo) <= d && u <= Float::with_val(256, hi),
        "{what}: log10 {} not in [{lo:e}, {hi:e}]",
        x.to_f64()
    );
}

fn q(x: f64) -> Rational {
    Rational::from_f64(x).unwrap()
}

fn spectra(args: &[&str]) -> Value {
    let mut a = vec!["spectra", "-q", "--json"];
    a.extend_from_slice(args);
    ok_json(&run(&a))
}

#[test]
fn spectra_certifies_every_2d_tensor_of_the_bundled_model() {
    let ck = Checkpoint::open(&root().join("data/all-MiniLM-L6-v2")).unwrap();
    let want = ck.two_d_float_tensors();
    let j = spectra(&[&bundled_arg()]);
    let rows = j["matrices"].as_array().unwrap();
    let got: Vec<&str> = rows.iter().map(|r| r["tensor"].as_str().unwrap()).collect();
    assert_eq!(got, want);
    assert!(rows.iter().all(|r| r["status"] == "certified"));
    // One tensor against exact oracles from its stored entries.
    let name = "encoder.layer.0.attention.self.query.weight";
    let m = ck.read(name).unwrap().matrix;
    let r = rows.iter().find(|r| r["tensor"] == name).unwrap();
    assert_eq!(
        (r["rows"].as_u64(), r["cols"].as_u64()),
        (Some(384), Some(384))
    );
    assert_eq!(r["dtype"], "f32");
    let fro2: Rational = m.data.iter().map(|&x| q(x) * q(x)).sum();
    let l11: Rational = m.data.iter().map(|&x| q(x.abs())).sum();
    contains(&r["norm"], &fro2, "||W||_F^2");
    contains_log10(&r["log_norm"], &fro2, "log_norm");
    contains(&r["norm_11"], &l11, "(1,1) norm");
    let (flo, fhi) = lo_hi(&r["frobenius_norm"]);
    assert_contains_sqrt(
        &specbound::enclosure::Enclosure::new(flo, fhi).unwrap(),
        &fro2,
        "Frobenius",
    );
    // sigma_max >= every column norm and sigma_max^2 <= ||W||_F^2, exactly.
    let (slo, shi) = lo_hi(&r["spectral_norm"]);
    let max_col2 = (0..m.cols)
        .map(|c| -> Rational {
            (0..m.rows)
                .map(|i| q(m.data[i * m.cols + c]).square())
                .sum()
        })
        .max()
        .unwrap();
    assert!(q(shi) * q(shi) >= max_col2, "sigma_max below a column norm");
    assert!(
        q(slo) * q(slo) <= fro2,
        "sigma_max above the Frobenius norm"
    );
    // log10 sigma_max^2 from the same ends (sigma_max is irrational here).
    let (llo, lhi) = lo_hi(&r["log_spectral_norm"]);
    assert!(llo <= lhi && llo > 0.0);
}

/// A non-Transformer checkpoint: an MLP's weights of exactly known singular
/// values, a 4-D convolution kernel, a bias, an integer buffer.
fn mlp_and_conv(dir: &Path) -> PathBuf {
    // 4 x 6, singular values exactly 3, 2, 1, 1/2.
    let mut w0 = vec![0.0; 24];
    for (i, d) in [3.0, -2.0, 1.0, 0.5].into_iter().enumerate() {
        w0[i * 6 + (i + 1) % 6] = d;
    }
    // [out 2, in 3, kh 2, kw 2]: slice (a, b) is k [[1,0,0],[0,2,0]] with
    // k = 1 + 2a + b (singular values 2k, k).
    let mut conv = vec![0.0; 2 * 3 * 4];
    for a in 0..2 {
        for b in 0..2 {
            let k = (1 + 2 * a + b) as f64;
            let s = a * 2 + b;
            // Flat index of (r, c, a, b) is 12 r + 4 c + s.
            conv[s] = k; // (0, 0, a, b)
            conv[12 + 4 + s] = 2.0 * k; // (1, 1, a, b)
        }
    }
    let f = dir.join("model.safetensors");
    write_st(
        &f,
        &[
            ("mlp.0.weight".into(), "F64", vec![4, 6], w0),
            ("mlp.0.bias".into(), "F64", vec![4], vec![1.0; 4]),
            ("conv.weight".into(), "F32", vec![2, 3, 2, 2], conv),
            ("steps".into(), "I64", vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]),
        ],
    );
    f
}

#[test]
fn spectra_of_a_non_transformer_checkpoint_contains_the_exact_values() {
    let d = tmpdir("mlp");
    let f = mlp_and_conv(&d);
    let j = spectra(&[f.to_str().unwrap(), "--schatten-p", "1,2,0.5"]);
    let rows = j["matrices"].as_array().unwrap();
    // The 2-D weight and the four slices of the kernel.
    let labels: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{}{}",
                r["tensor"].as_str().unwrap(),
                r["slice"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        labels,
        [
            "conv.weight[:, :, 0, 0]",
            "conv.weight[:, :, 0, 1]",
            "conv.weight[:, :, 1, 0]",
            "conv.weight[:, :, 1, 1]",
            "mlp.0.weight"
        ]
    );
    let w = &rows[4];
    contains(&w["spectral_norm"], &q(3.0), "sigma_max");
    contains(&w["sv_min"], &q(0.5), "sigma_min");
    contains(&w["nuclear_norm"], &q(6.5), "nuclear");
    contains(&w["norm"], &q(14.25), "||W||_F^2");
    contains(&w["lambda_max"], &q(9.0), "lambda_max");
    contains(&w["stable_rank"], &(q(14.25) / q(9.0)), "stable rank");
    contains_log10(&w["log_norm"], &q(14.25), "log_norm");
    contains_log10(&w["log_spectral_norm"], &q(9.0), "log_spectral_norm");
    assert_eq!(w["rank"], serde_json::json!({"lo": 4, "hi": 4}));
    let sch = w["schatten"].as_array().unwrap();
    assert_eq!(sch[0]["p"], "1");
    contains(&sch[0]["power"], &q(6.5), "S_1");
    contains(&sch[1]["power"], &q(14.25), "S_2^2");
    // sum sigma_i^(1/2) = sqrt 3 + sqrt 2 + 1 + sqrt(1/2) (irrational), by
    // MPFR rounded down and up at 256 bits.
    let (lo, hi) = lo_hi(&sch[2]["power"]);
    let sum_sqrt = |r: Round| {
        let mut acc = Float::with_val(256, 0);
        for x in [3.0, 2.0, 1.0, 0.5] {
            let mut s = Float::with_val(256, x);
            s.sqrt_round(r);
            rug::ops::AddAssignRound::add_assign_round(&mut acc, &s, r);
        }
        acc
    };
    assert!(
        Float::with_val(256, lo) <= sum_sqrt(Round::Down)
            && sum_sqrt(Round::Up) <= Float::with_val(256, hi),
        "S_1/2^1/2: [{lo}, {hi}]"
    );
    for (s, k) in rows[..4].iter().zip([1.0, 2.0, 3.0, 4.0]) {
        assert_eq!(s["shape"], serde_json::json!([2, 3, 2, 2]));
        assert_eq!((s["rows"].as_u64(), s["cols"].as_u64()), (Some(2), Some(3)));
        contains(&s["spectral_norm"], &q(2.0 * k), "slice sigma_max");
        contains(&s["sv_min"], &q(k), "slice sigma_min");
    }
    assert!(j["reshape"].as_str().unwrap().contains("W[:, :, i, j]"));
    let skipped: Vec<(&str, &str)> = j["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["tensor"].as_str().unwrap(), s["why"].as_str().unwrap()))
        .collect();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert!(skipped
        .iter()
        .any(|(n, w)| *n == "mlp.0.bias" && w.contains("1-D")));
    assert!(skipped
        .iter()
        .any(|(n, w)| *n == "steps" && w.contains("float")));
    // The text says how the kernel was cut.
    let out = run(&["spectra", "-q", f.to_str().unwrap()]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("conv.weight[:, :, 1, 1] 2 x 3 f32"), "{text}");
    assert!(text.contains("WeightWatcher"), "{text}");
    // certify refuses it, names what it supports and points at spectra.
    let mut c = std::fs::File::create(d.join("config.json")).unwrap();
    std::io::Write::write_all(&mut c, br#"{"model_type": "mamba"}"#).unwrap();
    assert_bad(
        &["certify", d.to_str().unwrap()],
        &[
            "unsupported architecture 'mamba'",
            "supported: bert",
            "specbound spectra",
        ],
    );
    // spectra takes the directory, config or not.
    let j = spectra(&[d.to_str().unwrap()]);
    assert_eq!(j["matrices"].as_array().unwrap().len(), 5);
}

#[test]
fn spectra_filters_by_name_and_size_and_writes_csv() {
    let j = spectra(&[
        &bundled_arg(),
        "--include",
        r"layer\.[01]\.",
        "--exclude",
        "query|key",
    ]);
    let names: Vec<&str> = j["matrices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["tensor"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 8, "{names:?}");
    assert!(names
        .iter()
        .all(|n| (n.contains("layer.0.") || n.contains("layer.1."))
            && !n.contains("query")
            && !n.contains("key")));
    assert_eq!(j["filtered_out"], 28);
    // Size: the feed-forward matrices (1536 x 384) are skipped, with the reason.
    let j = spectra(&[
        &bundled_arg(),
        "--include",
        r"layer\.0\.",
        "--max-elements",
        "147456",
    ]);
    assert_eq!(j["matrices"].as_array().unwrap().len(), 4);
    let sk = j["skipped"].as_array().unwrap();
    assert_eq!(sk.len(), 2);
    assert!(sk[0]["why"]
        .as_str()
        .unwrap()
        .contains("--max-elements 147456"));
    // A bad pattern: one line, exit 2.
    assert_bad(
        &["spectra", &bundled_arg(), "--include", "(unclosed"],
        &["--include"],
    );
    // Nothing left: an error, not an empty success.
    assert_bad(
        &["spectra", &bundled_arg(), "--include", "no-such-tensor"],
        &["no matrix to certify"],
    );
    // CSV: one row per matrix; the ends read back as the JSON's binary64 ends.
    let d = tmpdir("csv");
    let out_dir = d.join("tables");
    let j = spectra(&[
        &bundled_arg(),
        "--include",
        r"layer\.5\.",
        "--csv",
        out_dir.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(out_dir.join("spectra.csv")).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let body: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let rows = j["matrices"].as_array().unwrap();
    assert_eq!(body.len(), rows.len());
    let col = |n: &str| head.iter().position(|h| *h == n).unwrap();
    for (b, r) in body.iter().zip(rows) {
        assert_eq!(b.len(), head.len());
        assert_eq!(b[col("tensor")], r["tensor"].as_str().unwrap());
        for q in [
            "spectral_norm",
            "log_norm",
            "stable_rank",
            "schatten_norm_2",
        ] {
            let (lo, hi) = if q == "schatten_norm_2" {
                lo_hi(&r["schatten"][1]["norm"])
            } else {
                lo_hi(&r[q])
            };
            assert_eq!(
                b[col(&format!("{q}_lo"))].parse::<f64>().unwrap(),
                lo,
                "{q}"
            );
            assert_eq!(
                b[col(&format!("{q}_hi"))].parse::<f64>().unwrap(),
                hi,
                "{q}"
            );
        }
    }
}

#[test]
fn spectra_prints_hostile_tensor_names_escaped() {
    let d = tmpdir("hostile");
    let f = d.join("m.safetensors");
    write_st(
        &f,
        &[(
            "w\n\u{1b}[31m,\"x".into(),
            "F64",
            vec![2, 2],
            vec![1.0, 0.0, 0.0, 2.0],
        )],
    );
    let out = run(&["spectra", "-q", f.to_str().unwrap()]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains('\u{1b}'), "{text}");
    assert!(text.contains("w\\n\\u{1b}[31m"), "{text}");
    let c = d.join("csv");
    assert!(run(&[
        "spectra",
        "-q",
        f.to_str().unwrap(),
        "--csv",
        c.to_str().unwrap()
    ])
    .status
    .success());
    let csv = std::fs::read_to_string(c.join("spectra.csv")).unwrap();
    assert_eq!(csv.lines().count(), 2, "{csv}");
    assert!(csv.contains("\"w\\n\\u{1b}[31m,\"\"x\""), "{csv}");
}

/// `x` lies within the decimal ends `{"lo": "..", "hi": ".."}`, exactly.
fn within_decimals(v: &Value, x: &Rational, what: &str) {
    let lo = inertia::decimal(v["lo"].as_str().unwrap()).unwrap();
    let hi = inertia::decimal(v["hi"].as_str().unwrap()).unwrap();
    assert!(lo <= *x && *x <= hi, "{what}: not in {v}");
}

#[test]
fn quantities_beyond_binary64_get_decimal_ends_in_every_output() {
    // diag(2^1000, 2^999) in float64: sigma representable, but ||W||_F^2,
    // sigma_max^2 and sum sigma^2 (2^2000 + 2^1998) exceed binary64. They
    // were null with no note; now decimal ends (and a note) in the svd JSON
    // and text, the spectra JSON, CSV and text.
    let d = tmpdir("wide");
    let f = d.join("w.safetensors");
    let (a, b) = (2f64.powi(1000), 2f64.powi(999));
    write_st(&f, &[("w".into(), "F64", vec![2, 2], vec![a, 0.0, 0.0, b])]);
    let f = f.to_str().unwrap();
    let two = |e: u32| Rational::from(rug::Integer::from(1) << e);
    let sum_sq = two(2000) + two(1998);
    // svd --json: power [MAX, +inf) (`"hi": null`), power_exact holds the
    // exact value, a note says why.
    let j = ok_json(&run(&["svd", f, "--json", "--schatten-p", "2,1"]));
    let sc = &j["schatten"][0];
    assert_eq!(
        sc["power"]["lo"].as_f64(),
        Some(f64::MAX),
        "{}",
        sc["power"]
    );
    assert!(sc["power"]["hi"].is_null());
    within_decimals(&sc["power_exact"], &sum_sq, "svd sum sigma^2");
    assert!(sc["notes"][0]
        .as_str()
        .unwrap()
        .contains("exceeds the largest double"));
    assert!(!sc["norm"].is_null(), "the norm itself is representable");
    assert!(j["schatten"][1]["power_exact"].is_null(), "p = 1 is finite");
    // svd text.
    let out = run(&["svd", f, "--schatten-p", "2"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("note: sum sigma^p exceeds the largest double"),
        "{text}"
    );
    // spectra --json and --csv.
    let csv = d.join("csv");
    let j = spectra(&[f, "--schatten-p", "2", "--csv", csv.to_str().unwrap()]);
    let r = &j["matrices"][0];
    for key in ["norm", "lambda_max"] {
        assert_eq!(r[key]["lo"].as_f64(), Some(f64::MAX), "{key}: {}", r[key]);
        assert!(r[key]["hi"].is_null(), "{key}: [MAX, +inf)");
    }
    within_decimals(&r["norm_exact"], &sum_sq, "||W||_F^2");
    within_decimals(&r["lambda_max_exact"], &two(2000), "sigma_max^2");
    contains_log10(&r["log_norm"], &sum_sq, "log_norm");
    contains_log10(&r["log_spectral_norm"], &two(2000), "log_spectral_norm");
    within_decimals(&r["schatten"][0]["power_exact"], &sum_sq, "spectra S_2^2");
    let text = std::fs::read_to_string(csv.join("spectra.csv")).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    for col in ["norm", "schatten_power_2"] {
        let at = |end: &str| {
            let k = head
                .iter()
                .position(|h| *h == format!("{col}_{end}"))
                .unwrap();
            inertia::decimal(row[k]).unwrap_or_else(|| panic!("{col}_{end}: '{}'", row[k]))
        };
        assert!(at("lo") <= sum_sq && sum_sq <= at("hi"), "{col}");
    }
    // spectra text.
    let out = run(&["spectra", "-q", f, "--schatten-p", "2"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("note: sum sigma^p exceeds the largest double"),
        "{text}"
    );
    assert!(text.contains("lambda_max"), "{text}");
}

/// `spectra` on every family of the layout table: layer 0 of each entry's
/// every layout, stored under its real tensor names (with a prefix, the
/// experts of a mixture of experts, LayerScale vectors) beside a
/// config.json of its model type, gives one row per 2-D tensor keyed by its
/// full name with its stored shape, and each row contains the exact values:
/// tensor k holds d_i = (i + 1)(k + 1) / 8 at (i, (i + k) mod c) (a
/// scaled permutation, singular values d_i), so sigma_max, ||W||_F^2 and the
/// rank are known exactly; 1-D tensors are skipped, said so.
#[test]
fn spectra_of_every_family_contains_the_exact_values() {
    use specbound::arch::families::FAMILIES;
    use specbound::arch::Orientation;
    let mut layouts = 0;
    for (n, spec) in FAMILIES.iter().enumerate() {
        for (v, choice) in spec.choices().iter().enumerate() {
            let d = tmpdir(&format!("family-{n}-{v}"));
            let prefix = if spec.gguf_architectures.is_empty() {
                "model."
            } else {
                ""
            };
            // (name, [out, in]) of every 2-D tensor of layer 0.
            let mut mats: Vec<(String, usize, usize)> = Vec::new();
            let mut vectors: Vec<String> = Vec::new();
            for ts in choice.tensors {
                let (out, inp) = (4 * (ts.roles.len() + 1), 6);
                let (r, c) = match ts.orientation {
                    Orientation::OutIn => (out, inp),
                    Orientation::InOut => (inp, out),
                };
                mats.push((ts.name_in(prefix, 0), r, c));
                vectors.extend(ts.scale_at(prefix, 0, 0));
            }
            if let Some(m) = spec.moe {
                let experts = m.experts.iter().chain(m.shared.iter().flatten());
                for (j, pat) in experts.enumerate() {
                    for e in 0..2 {
                        let name = format!("{prefix}{}", pat.replace("{l}", "0"))
                            .replace("{e}", &e.to_string());
                        if !mats.iter().any(|(n, _, _)| *n == name) {
                            mats.push((name, 5 + (j % 3), 6));
                        }
                    }
                }
            }
            let mut tensors: Vec<Tensor> = Vec::new();
            let mut want: Vec<(String, Vec<usize>, Vec<Rational>)> = Vec::new();
            for (k, (name, r, c)) in mats.iter().enumerate() {
                let mut w = vec![0.0; r * c];
                let dk: Vec<Rational> = (0..(*r).min(*c))
                    .map(|i| Rational::from(((i + 1) * (k + 1)) as u32) / 8u32)
                    .collect();
                for (i, x) in dk.iter().enumerate() {
                    w[i * c + (i + k) % c] = x.to_f64();
                }
                tensors.push((name.clone(), "F32", vec![*r, *c], w));
                want.push((name.clone(), vec![*r, *c], dk));
            }
            for s in &vectors {
                tensors.push((s.clone(), "F32", vec![6], vec![1.0; 6]));
            }
            write_st(&d.join("model.safetensors"), &tensors);
            let model_type = spec.model_types.first().copied().unwrap_or("llama");
            std::fs::write(
                d.join("config.json"),
                format!(r#"{{"model_type": "{model_type}"}}"#),
            )
            .unwrap();
            let what = format!("{} layout {v}", spec.layout);
            let j = spectra(&[d.to_str().unwrap()]);
            let rows = j["matrices"].as_array().unwrap();
            let mut got: Vec<&str> = rows.iter().map(|r| r["tensor"].as_str().unwrap()).collect();
            let mut names: Vec<&str> = want.iter().map(|(n, _, _)| n.as_str()).collect();
            got.sort_unstable();
            names.sort_unstable();
            assert_eq!(got, names, "{what}");
            for (name, shape, dk) in &want {
                let row = rows.iter().find(|r| r["tensor"] == name.as_str()).unwrap();
                let at = format!("{what}: {name}");
                assert_eq!(row["shape"], serde_json::json!(shape), "{at}");
                contains(&row["spectral_norm"], dk.last().unwrap(), &at);
                let frob: Rational = dk.iter().map(|x| Rational::from(x * x)).sum();
                contains(&row["norm"], &frob, &at);
                assert_eq!(
                    row["rank"],
                    serde_json::json!({"lo": dk.len(), "hi": dk.len()}),
                    "{at}"
                );
            }
            let skipped = j["skipped"].as_array().unwrap();
            for s in &vectors {
                assert!(
                    skipped
                        .iter()
                        .any(|x| x["tensor"] == s.as_str()
                            && x["why"].as_str().unwrap().contains("1-D")),
                    "{what}: {s} not skipped as 1-D: {skipped:?}"
                );
            }
            layouts += 1;
        }
    }
    assert!(layouts > FAMILIES.len(), "{layouts} layouts");
}

/// `spectra --singular-values`: every certified singular value of each
/// matrix, in the JSON (`singular_values`), the text, and with `--csv` in
/// `singular_values.csv` keyed by tensor (and slice), the same binary64
/// ends. Each contains the exact value: known ones (3, 2, 1, 1/2; a
/// kernel's 2k, k), and every sigma_i of a pseudo-random dyadic 9 x 7 by
/// Sylvester inertia in rationals. `audit` reads the table back (exit 0
/// against the file; a moved value exit 1); the two tables are written
/// together or not at all.
#[test]
fn spectra_singular_values_are_certified_and_tabulated_by_tensor() {
    let d = tmpdir("sv");
    let f = mlp_and_conv(&d);
    // A second file: the known matrices and a 9 x 7 of dyadic entries.
    let rnd: Vec<f64> = (0..63u64)
        .map(|i| ((i * 2654435761 % 1021) as f64 - 510.0) / 64.0)
        .collect();
    let g = dir_with(&d, &f, rnd.clone());
    let csv_dir = d.join("tables");
    let j = spectra(&[
        g.to_str().unwrap(),
        "--singular-values",
        "--csv",
        csv_dir.to_str().unwrap(),
    ]);
    let rows = j["matrices"].as_array().unwrap();
    let by = |t: &str, slice: Option<&str>| -> &Value {
        rows.iter()
            .find(|r| r["tensor"] == t && r["slice"].as_str() == slice)
            .unwrap_or_else(|| panic!("{t}"))
    };
    let sv = |r: &Value| r["singular_values"].as_array().unwrap().clone();
    let known = sv(by("mlp.0.weight", None));
    assert_eq!(known.len(), 4);
    for (v, x) in known.iter().zip([3.0, 2.0, 1.0, 0.5]) {
        contains(v, &q(x), "mlp.0.weight sigma_i");
    }
    for (k, slice) in [
        "[:, :, 0, 0]",
        "[:, :, 0, 1]",
        "[:, :, 1, 0]",
        "[:, :, 1, 1]",
    ]
    .iter()
    .enumerate()
    {
        let s = sv(by("conv.weight", Some(slice)));
        let k = (k + 1) as f64;
        contains(&s[0], &q(2.0 * k), "slice sigma_1");
        contains(&s[1], &q(k), "slice sigma_2");
    }
    let a = specbound::matrix::DenseMatrix {
        rows: 9,
        cols: 7,
        data: rnd,
    };
    let gram = inertia::exact_gram(&a);
    let s = sv(by("rnd.weight", None));
    assert_eq!(s.len(), 7);
    for (i, v) in s.iter().enumerate() {
        let (lo, hi) = lo_hi(v);
        assert!(
            inertia::sigma_in_rational(&gram, i + 1, &q(lo), &q(hi)),
            "rnd sigma_{}: [{lo:e}, {hi:e}]",
            i + 1
        );
    }
    // The table: a row per value, keyed by tensor and slice, the JSON's ends.
    let table = csv_dir.join("singular_values.csv");
    let text = std::fs::read_to_string(&table).unwrap();
    let header = text.lines().next().unwrap();
    assert_eq!(
        header,
        "tensor,slice,rows,cols,rank_index,sigma,sigma_lo,sigma_hi"
    );
    let mut n = 0;
    for line in text.lines().skip(1) {
        // Slices hold commas: the field is quoted.
        let (tensor, slice, rest) = match line.split_once(",\"") {
            Some((t, r)) => {
                let (s, rest) = r.split_once("\",").unwrap();
                (t, Some(s), rest)
            }
            None => {
                let (t, r) = line.split_once(",,").unwrap();
                (t, None, r)
            }
        };
        let c: Vec<&str> = rest.split(',').collect();
        let i: usize = c[2].parse().unwrap();
        let v = &sv(by(tensor, slice))[i - 1];
        let (lo, hi) = lo_hi(v);
        assert_eq!(
            (c[4].parse::<f64>().unwrap(), c[5].parse::<f64>().unwrap()),
            (lo, hi)
        );
        n += 1;
    }
    let want: usize = rows.iter().map(|r| sv(r).len()).sum();
    assert_eq!(n, want);
    assert_eq!(want, 4 + 4 * 2 + 7);
    // audit: every 2-D tensor's value is a stated interval containing the
    // certified one (slices are not claims, as in spectra.csv).
    let o = run(&[
        "audit",
        g.to_str().unwrap(),
        table.to_str().unwrap(),
        "--json",
    ]);
    let a = ok_json(&o);
    assert_eq!(a["layout"], "singular_values");
    assert_eq!(a["consistent"].as_u64(), Some(4 + 7));
    assert_eq!(
        (a["inconsistent"].as_u64(), a["undecided"].as_u64()),
        (Some(0), Some(0))
    );
    // sigma_1 of mlp.0.weight (exactly 3) stated as [7, 7].
    let moved: String = text
        .lines()
        .map(|l| match l.starts_with("mlp.0.weight,,4,6,1,") {
            true => "mlp.0.weight,,4,6,1,7,7,7\n".to_string(),
            false => format!("{l}\n"),
        })
        .collect();
    assert_ne!(moved, text);
    let bad = d.join("moved.csv");
    std::fs::write(&bad, moved).unwrap();
    let o = run(&[
        "audit",
        g.to_str().unwrap(),
        bad.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // The text lists them.
    let out = run(&[
        "spectra",
        "-q",
        g.to_str().unwrap(),
        "--singular-values",
        "--include",
        "mlp",
    ]);
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(t.contains("singular values (4), largest first"), "{t}");
    assert!(t.contains("sigma_4 "), "{t}");
    // All or nothing: singular_values.csv cannot be written, so neither is.
    let blocked = d.join("blocked");
    std::fs::create_dir_all(blocked.join("singular_values.csv")).unwrap();
    let out = run(&[
        "spectra",
        "-q",
        g.to_str().unwrap(),
        "--singular-values",
        "--csv",
        blocked.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!blocked.join("spectra.csv").exists());
    // Without the flag, neither the key nor the table.
    let plain = d.join("plain");
    let j = spectra(&[g.to_str().unwrap(), "--csv", plain.to_str().unwrap()]);
    assert!(j["matrices"][0].get("singular_values").is_none());
    assert!(!plain.join("singular_values.csv").exists());
}

/// A copy of `f`'s tensors with `rnd.weight` (9 x 7, F64) added, in a
/// directory of its own.
fn dir_with(d: &Path, f: &Path, rnd: Vec<f64>) -> PathBuf {
    let ck = Checkpoint::open(f).unwrap();
    let mut ts: Vec<Tensor> = Vec::new();
    for name in ["mlp.0.weight", "conv.weight"] {
        let (shape, _) = ck.info(name).unwrap();
        let m = ck.read_flattened(name).unwrap().matrix;
        let dtype = if name == "conv.weight" { "F32" } else { "F64" };
        ts.push((name.into(), dtype, shape, m.data));
    }
    ts.push(("rnd.weight".into(), "F64", vec![9, 7], rnd));
    let out = d.join("with-rnd");
    std::fs::create_dir_all(&out).unwrap();
    let p = out.join("model.safetensors");
    write_st(&p, &ts);
    p
}
