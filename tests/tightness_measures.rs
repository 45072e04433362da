//! Tightness of the measures' norms (kept apart from soundness): the
//! Frobenius and (2,1) norms of the raw weights tighten with the precision
//! as the singular values do (issue 33).

mod common;

use specbound::certify::certify_raw_norms;
use specbound::linalg::{Precision, SvdOptions};
use specbound::matrix::DenseMatrix;

/// A 384 x 96 weight with entries on a 2^-30 grid (float32-like), transposed.
fn weight() -> DenseMatrix {
    let mut g = 0x2545_F491_4F6C_DD1Du64;
    let data = (0..384 * 96)
        .map(|_| {
            g ^= g << 13;
            g ^= g >> 7;
            g ^= g << 17;
            ((g >> 34) as f64 - 2f64.powi(29)) * 2f64.powi(-30)
        })
        .collect();
    DenseMatrix {
        rows: 96,
        cols: 384,
        data,
    }
}

fn rel(x: inari::Interval) -> f64 {
    (x.sup() - x.inf()) / (x.sup() + x.inf())
}

/// Issue 33: the Frobenius and (2,1) parts of the measures were identical
/// at f64, extended and mpfr. At `mpfr:128` and `extended` the (2,1) norm
/// is at least 4 times narrower than at f64 (measured: 7.3e-16 -> 1.05e-16
/// relative radius) and the Frobenius norm at least 2 times (2.6e-16 ->
/// 6.4e-17).
#[test]
fn measure_norms_did_not_tighten_with_the_precision() {
    let w = weight();
    let at = |p| {
        certify_raw_norms(
            &w,
            &SvdOptions {
                precision: p,
                ..SvdOptions::default()
            },
        )
        .unwrap()
    };
    let f64_ = at(Precision::F64);
    for p in [Precision::Extended, Precision::Mpfr(128)] {
        let hi = at(p);
        let (n0, n1) = (rel(f64_.norm_21_rows), rel(hi.norm_21_rows));
        eprintln!(
            "{p:?}: (2,1) {n0:e} -> {n1:e}; Frobenius {:e} -> {:e}",
            rel(f64_.frobenius),
            rel(hi.frobenius)
        );
        assert!(
            n1 <= 2.3e-16 && n1 * 4.0 <= n0,
            "{p:?}: (2,1) {n0:e} -> {n1:e}"
        );
        assert!(rel(hi.frobenius) <= rel(f64_.frobenius), "{p:?}: Frobenius");
    }
}

/// Relative width `(hi - lo) / (hi + lo)` of a JSON interval `{lo, hi}`.
fn rel_json(v: &serde_json::Value) -> f64 {
    let (lo, hi) = (v["lo"].as_f64().unwrap(), v["hi"].as_f64().unwrap());
    (hi - lo) / (hi.abs() + lo.abs())
}

/// Issue 33: `spectra`'s norms (WeightWatcher's `norm` = `||W||_F^2` and
/// `log_norm`, the Frobenius, (2,1) and (1,1) norms) were identical at
/// f64, extended and mpfr. At `extended` and `mpfr:128` each is at least as
/// narrow as at f64, and the norms summed from the entries 2 to 4 times
/// narrower (on this 40 x 24 float64 matrix).
#[test]
fn spectra_norms_did_not_tighten_with_the_precision() {
    let dir = common::process_scratch().join("tight-spectra");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("model.safetensors");
    let mut w = weight();
    w.rows = 40;
    w.cols = 24;
    w.data.truncate(40 * 24);
    common::write_safetensors(&path, &[("w".into(), &w)], "F64");
    let run = |p: &str| {
        let out = common::run(&[
            "spectra",
            "-q",
            "--json",
            "--precision",
            p,
            path.to_str().unwrap(),
        ]);
        common::ok_json(&out)["matrices"][0].clone()
    };
    let base = run("f64");
    for p in ["extended", "mpfr:128"] {
        let hi = run(p);
        for key in ["frobenius_norm", "norm_21", "norm_11", "norm", "log_norm"] {
            let (w0, w1) = (rel_json(&base[key]), rel_json(&hi[key]));
            eprintln!("{p} {key}: {w0:e} -> {w1:e}");
            assert!(w1 <= w0, "{p} {key}: {w0:e} -> {w1:e}");
        }
        // Measured: Frobenius 2.95e-16 -> 9.8e-17, (2,1) 6.4e-16 -> 8.0e-17,
        // (1,1) 2.3e-16 -> 0 (a point), norm 7.0e-16 -> 3.5e-16 (the square
        // of the Frobenius enclosure, two roundings wider than it).
        for (key, by) in [
            ("frobenius_norm", 2.0),
            ("norm_21", 4.0),
            ("norm_11", 4.0),
            ("norm", 1.5),
        ] {
            let (w0, w1) = (rel_json(&base[key]), rel_json(&hi[key]));
            assert!(w1 * by <= w0, "{p} {key}: {w0:e} -> {w1:e}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
