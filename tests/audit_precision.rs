//! Auditing other tools' numbers: `audit MATRIX CLAIMED.npy` (claimed
//! singular values against certified ones, with exact error intervals),
//! `--rtol`/`--atol`, the `tolerance` column in the WeightWatcher layout,
//! the certified float32/float64 rounding verdict, and `--precision`.
//! The matrix is D Q with Q exactly orthogonal, so its singular values are
//! exactly |d| (the oracle).

mod common;

use common::tmpdir;

use std::path::Path;

use rug::Rational;
use serde_json::Value;

const D: [f64; 8] = [4.0, 3.0, 2.0, 1.5, 1.0, 0.75, 0.5, 0.25];

fn matrix() -> specbound::matrix::DenseMatrix {
    let mut rng = common::Rng(77);
    common::scaled_rows(&D, 8, false, &mut rng)
}

/// A 1-D `.npy` of `code` (`<f8`, `<f4`, `<f2`).
fn write_vec(path: &Path, v: &[f64], code: &str) {
    let mut h = format!(
        "{{'descr': '{code}', 'fortran_order': False, 'shape': ({},), }}",
        v.len()
    );
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    out.extend_from_slice(h.as_bytes());
    for &x in v {
        match code {
            "<f8" => out.extend_from_slice(&x.to_le_bytes()),
            "<f4" => out.extend_from_slice(&(x as f32).to_le_bytes()),
            _ => out.extend_from_slice(&half::f16::from_f64(x).to_bits().to_le_bytes()),
        }
    }
    std::fs::write(path, out).unwrap();
}

fn run_json(args: &[&str]) -> (Option<i32>, Value) {
    let out = common::run(args);
    let j = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code(), j)
}

fn pair(v: &Value) -> (Rational, Rational) {
    let f = |x: &Value| Rational::from_f64(x.as_f64().unwrap()).unwrap();
    (f(&v[0]), f(&v[1]))
}

fn contains(v: &Value, x: &Rational) -> bool {
    let (a, b) = pair(v);
    a <= *x && *x <= b
}

#[test]
fn claimed_singular_values_get_exact_error_intervals_and_verdicts() {
    let d = tmpdir("spectrum");
    let m = d.join("a.npy");
    specbound::io::write_npy_f64(&m, &matrix()).unwrap();
    let ms = m.to_str().unwrap();
    let eps = 2f64.powi(-30);
    // Claims off by a relative 2^-30: the exact errors are sigma 2^-30.
    let off: Vec<f64> = D.iter().map(|x| x * (1.0 + eps)).collect();
    let c = d.join("off.npy");
    write_vec(&c, &off, "<f8");
    let cs = c.to_str().unwrap();
    let (code, j) = run_json(&["audit", ms, cs, "--rtol", "1e-12", "--json"]);
    assert_eq!(code, Some(1), "{j}");
    assert_eq!(j["fail"], 8);
    for (i, r) in j["indices"].as_array().unwrap().iter().enumerate() {
        let sigma = Rational::from_f64(D[i]).unwrap();
        let claim = Rational::from_f64(off[i]).unwrap();
        let err = Rational::from(&claim - &sigma);
        assert!(contains(&r["certified"], &sigma), "{r}");
        assert!(contains(&r["abs_error"], &err), "{r}");
        assert!(
            contains(&r["rel_error"], &Rational::from(&err / &sigma)),
            "{r}"
        );
        // ulp of a binary64 value c in [2^e, 2^(e+1)) is 2^(e-52).
        let e = off[i].log2().floor() as i32;
        let ulp = Rational::from_f64(2f64.powi(e - 52)).unwrap();
        assert!(contains(&r["ulps"], &Rational::from(&err / &ulp)), "{r}");
        // 2^-30 < 2^-24: certainly within float32 rounding of sigma.
        assert_eq!(r["float32"]["verdict"], "within", "{r}");
        assert_eq!(r["verdict"], "fail");
    }
    let rel = Rational::from_f64(eps).unwrap();
    let mr = &j["max_relative_error"];
    assert!(contains(mr, &rel), "{mr}");
    // Within a tolerance that admits the gap, everything passes.
    let (code, j) = run_json(&["audit", ms, cs, "--rtol", "1e-8", "--json"]);
    assert_eq!((code, j["pass"].as_u64()), (Some(0), Some(8)), "{j}");
    // At rtol = 2^-30 the exact sigma sits on the boundary: the enclosures
    // (points inside them on both sides) cannot decide: exit 3.
    let (code, j) = run_json(&["audit", ms, cs, "--rtol", &format!("{eps:e}"), "--json"]);
    assert_eq!(code, Some(3), "{j}");
    assert_eq!(j["verdict"], "undecided");

    // float32 claims, ascending (as some solvers return them): sorted, exact.
    let c32 = d.join("asc32.npy");
    let asc: Vec<f64> = D.iter().rev().copied().collect();
    write_vec(&c32, &asc, "<f4");
    let (code, j) = run_json(&[
        "audit",
        ms,
        c32.to_str().unwrap(),
        "--rtol",
        "1e-12",
        "--json",
    ]);
    assert_eq!(code, Some(0), "{j}");
    assert_eq!(j["sorted"], true);
    assert_eq!(j["claimed_dtype"], "f32");
    for r in j["indices"].as_array().unwrap() {
        assert!(contains(&r["abs_error"], &Rational::new()), "{r}");
    }
    // A truncated list (top 3, float16) is compared with the 3 largest.
    let c16 = d.join("top3.npy");
    write_vec(&c16, &D[..3], "<f2");
    let (code, j) = run_json(&[
        "audit",
        ms,
        c16.to_str().unwrap(),
        "--rtol",
        "1e-12",
        "--json",
    ]);
    assert_eq!((code, j["claimed"].as_u64()), (Some(0), Some(3)), "{j}");

    // The text form rounds every interval outward and says what it compared.
    let out = common::run(&["audit", ms, cs, "--rtol", "1e-12"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("certified max relative error"), "{text}");
    assert!(text.contains("8 fail"), "{text}");

    // Bad claims: too many values, 2-D, NaN; each exit 2, one line.
    let many = d.join("many.npy");
    write_vec(&many, &[1.0; 9], "<f8");
    common::assert_bad(
        &["audit", ms, many.to_str().unwrap()],
        &["many.npy", "9 claimed values"],
    );
    let two = d.join("two.npy");
    specbound::io::write_npy_f64(&two, &matrix()).unwrap();
    common::assert_bad(
        &["audit", ms, two.to_str().unwrap()],
        &["two.npy", "expected a 1-D array"],
    );
    let nan = d.join("nan.npy");
    write_vec(&nan, &[f64::NAN], "<f8");
    common::assert_bad(
        &["audit", ms, nan.to_str().unwrap()],
        &["nan.npy", "non-finite"],
    );
    common::assert_bad(
        &["audit", ms, cs, "--rtol=-1"],
        &["--rtol must be a nonnegative"],
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn csv_claims_get_rtol_atol_the_tolerance_column_and_a_rounding_verdict() {
    let d = tmpdir("csv");
    let st = d.join("w.safetensors");
    let a = matrix();
    common::write_safetensors(&st, &[("w".to_string(), &a)], "F64");
    let sts = st.to_str().unwrap();
    // sigma_max = 4 exactly; a float32-like claim 4.00000006 (9 digits,
    // float32's round-trip length), 1.5e-8 relative off.
    let f = d.join("claims.csv");
    std::fs::write(
        &f,
        "tensor,quantity,p,value\nw,sigma_max,,4.00000006e+00\nw,sigma_i,8,0.25\n",
    )
    .unwrap();
    let fs = f.to_str().unwrap();
    let (code, j) = run_json(&["audit", sts, fs, "--json"]);
    assert_eq!(code, Some(1), "{j}");
    let r = &j["results"][0];
    assert_eq!(r["verdict"], "inconsistent", "{r}");
    assert_eq!(r["rounding"]["float32"]["verdict"], "within", "{r}");
    assert_eq!(r["rounding"]["float64"]["verdict"], "beyond", "{r}");
    // The gap is 1.5e-8 sigma = 0.25165824 float32 unit roundoffs.
    let units = &r["rounding"]["float32"]["units"];
    assert!(
        contains(units, &Rational::from((25165824, 100000000))),
        "{units}"
    );
    assert_eq!(r["rounding"]["float32_value"], true, "{r}");
    assert_eq!(j["within_float32_rounding"], 1);
    let out = common::run(&["audit", sts, fs]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("within f32 rounding"), "{text}");
    // A 17-digit claim that is no float32 number (4 (1 + 2^-26)) is within
    // float32 rounding as a gap, but no float32 computation wrote it: it is
    // not counted as float32 rounding (issue 30: weightwatcher's float64
    // `norm` a few float64 units off was labelled float32).
    let f17 = d.join("claims17.csv");
    let claim = 4.0 * (1.0 + 2f64.powi(-26));
    std::fs::write(
        &f17,
        format!("tensor,quantity,value\nw,sigma_max,{claim:.17e}\n"),
    )
    .unwrap();
    let (code, j) = run_json(&["audit", sts, f17.to_str().unwrap(), "--json"]);
    assert_eq!(code, Some(1), "{j}");
    assert_eq!(j["results"][0]["rounding"]["float32"]["verdict"], "within");
    assert_eq!(j["results"][0]["rounding"]["float32_value"], false);
    assert_eq!(j["within_float32_rounding"], 0, "{j}");
    let out = common::run(&["audit", sts, f17.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("not a float32 value; beyond f64 rounding"),
        "{text}"
    );
    // --rtol widens the window: consistent.
    let (code, j) = run_json(&["audit", sts, fs, "--rtol", "1e-7", "--json"]);
    assert_eq!(code, Some(0), "{j}");
    assert_eq!(j["rtol"], 1e-7);
    // --atol likewise.
    let (code, _) = run_json(&["audit", sts, fs, "--atol", "1e-6", "--json"]);
    assert_eq!(code, Some(0));
    // --precision is used (and recorded).
    let (code, j) = run_json(&[
        "audit",
        sts,
        fs,
        "--atol",
        "1e-6",
        "--precision",
        "mpfr:128",
        "--json",
    ]);
    assert_eq!(
        (code, j["precision"].as_str()),
        (Some(0), Some("mpfr:128")),
        "{j}"
    );

    // WeightWatcher layout: the tolerance column is honoured.
    let ww = d.join("ww.csv");
    std::fs::write(
        &ww,
        "layer_id,name,sv_max,tolerance\n0,w,4.0000001,\n1,w,4.0000001,1e-6\n",
    )
    .unwrap();
    let (code, j) = run_json(&["audit", sts, ww.to_str().unwrap(), "--json"]);
    assert_eq!(code, Some(1), "{j}");
    assert_eq!(j["layout"], "weightwatcher");
    assert_eq!(j["results"][0]["verdict"], "inconsistent");
    assert_eq!(j["results"][1]["verdict"], "consistent");
    assert_eq!(j["results"][1]["tolerance"], 1e-6);
    let _ = std::fs::remove_dir_all(&d);
}
