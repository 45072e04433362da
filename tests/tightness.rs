//! Tightness (kept apart from soundness so that tuning can never weaken a
//! containment test). Thresholds are the project's published targets.

mod common;

use common::*;
use rug::Float;
use specbound::io::{read_matrix, read_npy};
use specbound::linalg::{certify_singular_values, Precision, SingularValues, SvdOptions};
use specbound::matrix::DenseMatrix;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn opts(p: Precision) -> SvdOptions {
    SvdOptions {
        precision: p,
        ..SvdOptions::default()
    }
}

/// Relative radius of sigma_1 and the largest one among values >= 1e-6 sigma_1.
fn radii(sv: &SingularValues) -> (f64, f64) {
    (sv.values[0].enclosure.rel_rad(), sv.max_rel_rad_above(1e-6))
}

#[test]
fn bundled_minilm_matrix_meets_the_targets() {
    let a = read_npy(&root().join("data/minilm-l0-query.npy"))
        .unwrap()
        .matrix;
    let (s1, all) = radii(&certify_singular_values(&a, &opts(Precision::Auto)).unwrap());
    assert!(
        s1 <= 1e-11 && all <= 1e-11,
        "auto: sigma_1 {s1:e}, all {all:e}"
    );
    let (s1, _) = radii(&certify_singular_values(&a, &opts(Precision::F64)).unwrap());
    assert!(s1 <= 1e-11, "f64: sigma_1 {s1:e}");
    let (s1, _) = radii(&certify_singular_values(&a, &opts(Precision::Extended)).unwrap());
    assert!(s1 <= 1e-14, "extended: sigma_1 {s1:e}");
}

#[test]
fn every_minilm_weight_matrix_meets_the_targets() {
    let model = root().join("../shared/models/all-MiniLM-L6-v2/model.safetensors");
    if !model.is_file() {
        eprintln!(
            "skipped: {} is absent (only on the dev/CI machine)",
            model.display()
        );
        return;
    }
    let mut worst = (0.0f64, 0.0f64, 0.0f64);
    for l in 0..6 {
        for t in [
            "attention.self.query",
            "attention.self.key",
            "attention.self.value",
            "attention.output.dense",
            "intermediate.dense",
            "output.dense",
        ] {
            let name = format!("encoder.layer.{l}.{t}.weight");
            let a = read_matrix(&model, Some(&name)).unwrap().matrix;
            let (s1, all) = radii(&certify_singular_values(&a, &opts(Precision::Auto)).unwrap());
            assert!(
                s1 <= 1e-11 && all <= 1e-11,
                "{name}: sigma_1 {s1:e}, all {all:e}"
            );
            let (e1, _) = radii(&certify_singular_values(&a, &opts(Precision::Extended)).unwrap());
            assert!(e1 <= 1e-14, "{name}: extended sigma_1 {e1:e}");
            worst = (worst.0.max(s1), worst.1.max(all), worst.2.max(e1));
        }
    }
    eprintln!(
        "MiniLM worst relative radii: auto sigma_1 {:.2e}, auto all >= 1e-6 sigma_1 {:.2e}, extended sigma_1 {:.2e}",
        worst.0, worst.1, worst.2
    );
}

/// Relative radius from the MPFR decimal bounds.
fn mpfr_rel_rad(sv: &SingularValues) -> f64 {
    sv.values
        .iter()
        .map(|v| {
            let e = v.exact.as_ref().expect("MPFR values carry decimal bounds");
            let lo = Float::with_val(400, Float::parse(&e.lo).unwrap());
            let hi = Float::with_val(400, Float::parse(&e.hi).unwrap());
            let rad = Float::with_val(400, &hi - &lo) / 2u32;
            (rad / lo).to_f64()
        })
        .fold(0.0, f64::max)
}

fn separated(n: usize) -> DenseMatrix {
    let mut rng = Rng(1234 + n as u64);
    let d: Vec<f64> = (0..n).map(|i| (3 * i + 1) as f64).collect();
    scaled_rows(&d, n, false, &mut rng)
}

#[test]
fn mpfr_256_reaches_1e_60_on_well_separated_values() {
    let a = separated(48);
    let sv = certify_singular_values(&a, &opts(Precision::Mpfr(256))).unwrap();
    let r = mpfr_rel_rad(&sv);
    assert!(r <= 1e-60, "MPFR-256 relative radius {r:e}");
}

/// The 256 x 256 target (slow: run with `cargo test --release -- --ignored`).
#[test]
#[ignore]
fn mpfr_256_reaches_1e_60_at_256x256() {
    let a = separated(256);
    let t = std::time::Instant::now();
    let sv = certify_singular_values(&a, &opts(Precision::Mpfr(256))).unwrap();
    let r = mpfr_rel_rad(&sv);
    eprintln!(
        "256x256 MPFR-256: relative radius {r:e} in {:?}",
        t.elapsed()
    );
    assert!(r <= 1e-60, "MPFR-256 relative radius {r:e}");
}

#[test]
fn random_256_square_sigma_1_radius() {
    let mut rng = Rng(77);
    let data: Vec<f64> = (0..256 * 256)
        .map(|_| (rng.below(1 << 20) as f64 - (1 << 19) as f64) / (1 << 20) as f64)
        .collect();
    let a = DenseMatrix {
        rows: 256,
        cols: 256,
        data,
    };
    let (s1, _) = radii(&certify_singular_values(&a, &opts(Precision::F64)).unwrap());
    assert!(s1 <= 1e-11, "f64 sigma_1 {s1:e}");
    let (s1, _) = radii(&certify_singular_values(&a, &opts(Precision::Extended)).unwrap());
    assert!(s1 <= 1e-14, "extended sigma_1 {s1:e}");
}
