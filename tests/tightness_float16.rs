//! Tightness on float16 weights and exact clusters (issue 19, items 2 and 6).
//! Every matrix here has exactly known singular values (block-Hadamard
//! D Q constructions), and each width asserted is preceded by an exact
//! containment check of the same result; the containment tests proper are
//! in `soundness.rs`.

mod common;

use common::*;
use specbound::linalg::{certify_singular_values, Precision, SingularValues, SvdOptions};
use specbound::matrix::DenseMatrix;

fn opts(p: Precision) -> SvdOptions {
    SvdOptions {
        precision: p,
        ..SvdOptions::default()
    }
}

fn report(what: &str, sv: &SingularValues) {
    let worst = sv
        .values
        .iter()
        .enumerate()
        .map(|(i, v)| (v.rel_rad(), i))
        .fold((0.0, 0), |a, b| if b.0 > a.0 { b } else { a });
    eprintln!(
        "{what}: max rel rad {:.3e} at sigma_{} ({:?}, cluster {}); sigma_1 {:.3e}; notes {:?}",
        worst.0,
        worst.1 + 1,
        sv.values[worst.1].method,
        sv.values[worst.1].cluster_size,
        sv.values[0].rel_rad(),
        sv.notes
    );
}

#[test]
#[ignore]
fn measure() {
    let k = 600;
    let d: Vec<f64> = (0..k)
        .map(|i| f16(29f64.powf(-(i as f64) / (k - 1) as f64)))
        .collect();
    let a = dq_t(2048, &d, 4, 1);
    let oracle = sorted_abs(&d);
    for p in [Precision::F64, Precision::Extended] {
        let t = std::time::Instant::now();
        let sv = certify_singular_values(&a, &opts(p)).unwrap();
        assert_contains_all(&sv.enclosures(), &oracle, "dq");
        report(&format!("2048x600 cond 29 {p} {:?}", t.elapsed()), &sv);
    }
}

#[test]
#[ignore]
fn measure_clusters() {
    // D Q with each value repeated 64 times: exact clusters of 64.
    let d: Vec<f64> = [1.0, 0.75, 0.5, 0.375]
        .iter()
        .flat_map(|&x| std::iter::repeat_n(x, 64))
        .collect();
    let a = dq_t(1024, &d, 3, 2);
    let oracle = sorted_abs(&d);
    for p in [Precision::F64, Precision::Extended, Precision::Auto] {
        let t = std::time::Instant::now();
        let sv = certify_singular_values(&a, &opts(p)).unwrap();
        assert_contains_all(&sv.enclosures(), &oracle, "dq clusters");
        report(&format!("1024x256 D Q, 4 clusters of 64, {p} {:?}", t.elapsed()), &sv);
    }
    let (a, _b) = kron_blocks(32, 16, 8, 3);
    for p in [Precision::F64, Precision::Extended, Precision::Auto] {
        let t = std::time::Instant::now();
        let sv = certify_singular_values(&a, &opts(p)).unwrap();
        report(&format!("kron(I_32, B 16x8), {p} {:?}", t.elapsed()), &sv);
    }
}
