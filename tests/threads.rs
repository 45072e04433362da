//! The thread count changes neither soundness nor a single bit: the same
//! exact-oracle matrices certified with the whole pool at 1, 2 and 4
//! threads contain their exact singular values at each count and give
//! bit-identical enclosures (fixed blocking and reduction orders,
//! `certify::certify_batch`), and `certify` writes byte-identical
//! certificates at `RAYON_NUM_THREADS` = 1, 2 and 4.
//!
//! Soundness (exact containment) and determinism (equality) only; no
//! timing and no width is asserted here.

mod common;

use common::*;
use faer::Par;
use specbound::enclosure::Enclosure;
use specbound::linalg::{certify_singular_values, Method, Precision, SvdOptions};
use specbound::matrix::DenseMatrix;

const THREADS: [usize; 3] = [1, 2, 4];

/// `certify_singular_values(a)` at precision f64 with the whole pool of a
/// fresh `t`-thread rayon pool (`Par::Seq` at 1).
fn certify_on(a: &DenseMatrix, t: usize) -> (Vec<Enclosure>, Vec<Method>) {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(t)
        .build()
        .expect("pool");
    let par = if t == 1 { Par::Seq } else { Par::rayon(t) };
    let opts = SvdOptions {
        precision: Precision::F64,
        par,
        ..SvdOptions::default()
    };
    let sv = pool
        .install(|| certify_singular_values(a, &opts))
        .unwrap_or_else(|e| panic!("{t} threads: inconclusive: {}", e.reason));
    let methods = sv.values.iter().map(|v| v.method).collect();
    (sv.enclosures(), methods)
}

/// Certifies `a` at every count of [`THREADS`]: exact containment of
/// `oracle` at each, bit-identical enclosures and methods across counts;
/// returns the methods (to check which route the case exercised).
fn same_at_every_count(a: &DenseMatrix, oracle: &[f64], what: &str) -> Vec<Method> {
    let (first, methods) = certify_on(a, THREADS[0]);
    assert_contains_all(&first, oracle, &format!("{what}, 1 thread"));
    for &t in &THREADS[1..] {
        let (encs, m) = certify_on(a, t);
        assert_contains_all(&encs, oracle, &format!("{what}, {t} threads"));
        assert_eq!(m, methods, "{what}: methods at {t} threads");
        for (i, (x, y)) in first.iter().zip(&encs).enumerate() {
            assert!(
                x.lo().to_bits() == y.lo().to_bits() && x.hi().to_bits() == y.hi().to_bits(),
                "{what}: sigma_{} is [{:e}, {:e}] on 1 thread, [{:e}, {:e}] on {t}",
                i + 1,
                x.lo(),
                x.hi(),
                y.lo(),
                y.hi()
            );
        }
    }
    methods
}

/// Singular values exactly `|d|` (1000 to 1499, well conditioned) with
/// exact repeats (a cluster of 128) and distinct values, float16-like entries `d_i * +-2^-3`: the exact-Gram
/// route, with a Gram matrix of order 1152, large enough for the
/// tridiagonalization's symmetric products to be split into several
/// column blocks.
#[test]
fn exact_gram_route_is_sound_and_identical_at_1_2_and_4_threads() {
    let mut rng = Rng(41);
    let d: Vec<f64> = (0..1152)
        .map(|i| {
            if i % 9 == 0 {
                1200.0
            } else {
                (1000 + rng.below(500)) as f64
            }
        })
        .collect();
    let a = dq_t(2048, &d, 3, 5);
    let methods = same_at_every_count(&a, &sorted_abs(&d), "exact Gram 2048 x 1152");
    assert!(
        methods.iter().all(|m| matches!(m, Method::GramEigen(_))),
        "the case must exercise the exact-Gram route: {methods:?}"
    );
}

/// Singular values `|d|` spanning 2^-40 to 2^10: the Gram matrix is not
/// exact, so faer's eigensolver and SVD (with the pool's parallelism) and
/// the residual theorem on the matrix itself certify it.
#[test]
fn residual_route_is_sound_and_identical_at_1_2_and_4_threads() {
    let mut rng = Rng(43);
    let d: Vec<f64> = (0..300)
        .map(|i| (1 + 2 * rng.below(500)) as f64 * 2f64.powi(-(i % 50)))
        .collect();
    let a = scaled_rows(&d, 512, true, &mut rng);
    let methods = same_at_every_count(&a, &sorted_abs(&d), "graded 512 x 300");
    assert!(
        methods.iter().any(|m| !matches!(m, Method::GramEigen(_))),
        "the case must exercise a residual route: {methods:?}"
    );
}

/// `certify` of a float16 LLaMA-shaped layer (hidden 1024, its M_in's Gram
/// matrix of order 1024 is split into column blocks) and of the bundled
/// MiniLM at 1, 2 and 4 threads: byte-identical certificates.
#[test]
fn certificates_are_byte_identical_at_1_2_and_4_threads() {
    let tmp = common::process_scratch().join("threads");
    let llama = tmp.join("llama");
    common::llama::write_llama_f16(&llama, 1, 7);
    for (name, model) in [
        ("llama", llama.clone()),
        ("minilm", root().join("data/all-MiniLM-L6-v2")),
    ] {
        let mut first: Option<Vec<u8>> = None;
        for t in THREADS {
            let out = tmp.join(format!("{name}-{t}.json"));
            let run = bin()
                .env("RAYON_NUM_THREADS", t.to_string())
                .args(["certify", "-q", "--out"])
                .arg(&out)
                .arg(&model)
                .output()
                .expect("binary runs");
            assert!(
                run.status.success(),
                "{name} at {t} threads: {}",
                String::from_utf8_lossy(&run.stderr)
            );
            let bytes = std::fs::read(&out).unwrap();
            match &first {
                None => first = Some(bytes),
                Some(f) => assert!(
                    *f == bytes,
                    "{name}: the certificate at {t} threads differs from the one at 1 thread"
                ),
            }
        }
        // `diff` of the two ends finds no certain change.
        let d = bin()
            .args(["diff"])
            .arg(tmp.join(format!("{name}-1.json")))
            .arg(tmp.join(format!("{name}-4.json")))
            .output()
            .expect("binary runs");
        let text = String::from_utf8_lossy(&d.stdout);
        assert!(
            d.status.success(),
            "diff: {}",
            String::from_utf8_lossy(&d.stderr)
        );
        assert!(
            !text.contains("certainly changed:"),
            "{name}: diff across thread counts reports a certain change:\n{text}"
        );
    }
    std::fs::remove_dir_all(&tmp).unwrap();
}
