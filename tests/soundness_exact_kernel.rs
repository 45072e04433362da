//! Soundness of the exact kernel certificate (`proofs/exact-kernel.md`,
//! L30): it never claims a rank below the exact rank, which an independent
//! oracle computes by rational Gaussian elimination; and every enclosure
//! of a rank-deficient matrix contains the exact singular value (exact
//! inertia of `A^T A - x I`). Widths are checked in `tightness_escalation.rs`.

mod common;
#[path = "common/inertia.rs"]
mod inertia;

use quickcheck::{QuickCheck, TestResult};
use rug::Rational;
use specbound::linalg::kernel::{check, exact_kernel};
use specbound::linalg::{certify_singular_values, dense, Method, Precision, SvdOptions};
use specbound::matrix::DenseMatrix;
use specbound::spectral::enclose_rank;

/// Test-case count knob (like PROPTEST_CASES): SPECBOUND_TEST_CASES.
fn cases(default: u64) -> u64 {
    std::env::var("SPECBOUND_TEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The exact rank by Gauss-Jordan elimination over the rationals (the
/// oracle; shares no code with `src/linalg/kernel.rs`).
fn rational_rank(a: &DenseMatrix) -> usize {
    let mut m: Vec<Vec<Rational>> = (0..a.rows)
        .map(|i| {
            (0..a.cols)
                .map(|j| Rational::from_f64(a.data[i * a.cols + j]).unwrap())
                .collect()
        })
        .collect();
    let mut rank = 0;
    for c in 0..a.cols {
        let Some(p) = (rank..a.rows).find(|&r| m[r][c] != 0) else {
            continue;
        };
        m.swap(rank, p);
        let pivot_row = m[rank].clone();
        for (r, row) in m.iter_mut().enumerate() {
            if r != rank && row[c] != 0 {
                let f = Rational::from(&row[c] / &pivot_row[c]);
                for (x, p) in row[c..].iter_mut().zip(&pivot_row[c..]) {
                    *x -= Rational::from(&f * p);
                }
            }
        }
        rank += 1;
    }
    rank
}

/// `rows x cols` of exact rank at most `r`: a product of integer factors
/// scaled onto a dyadic grid (`scale` = 2^-e), with entries drawn from
/// `-bound..=bound`; every product entry is an integer below 2^53 times
/// `scale`, so exactly representable.
fn low_rank(
    rows: usize,
    cols: usize,
    r: usize,
    bound: usize,
    scale: f64,
    rng: &mut common::Rng,
) -> DenseMatrix {
    let mut draw = |n: usize| -> Vec<f64> {
        (0..n)
            .map(|_| rng.below(2 * bound + 1) as f64 - bound as f64)
            .collect()
    };
    let b = draw(rows * r);
    let c = draw(r * cols);
    let mut data = vec![0.0; rows * cols];
    for i in 0..rows {
        for j in 0..cols {
            let s: f64 = (0..r).map(|k| b[i * r + k] * c[k * cols + j]).sum();
            data[i * cols + j] = s * scale;
        }
    }
    DenseMatrix { rows, cols, data }
}

#[test]
fn prop_exact_kernel_never_claims_a_rank_below_the_exact_rank() {
    fn prop(seed: u64, rows: u8, cols: u8, r: u8, small: bool) -> TestResult {
        let rows = 1 + rows as usize % 12;
        let cols = 1 + cols as usize % 12;
        let r = r as usize % (rows.min(cols) + 1);
        let bound = if small { 2 } else { 40 };
        let scale = if small { 1.0 } else { 2f64.powi(-7) };
        let a = low_rank(rows, cols, r, bound, scale, &mut common::Rng(seed | 1));
        let exact = rational_rank(&a) as u64;
        let n = rows.min(cols);
        let Some(prep) = dense::prepare(a.rows, a.cols, &a.data) else {
            return TestResult::from_bool(exact == 0);
        };
        // The certificate alone: n - nullity >= the exact rank.
        if let Ok(Some(c)) = exact_kernel(prep.a()) {
            if !check(prep.a(), &c) || ((n - c.nullity) as u64) < exact {
                return TestResult::error(format!(
                    "{rows}x{cols}: certificate nullity {} against exact rank {exact}",
                    c.nullity
                ));
            }
        }
        // Through the whole pipeline: the rank interval contains the exact rank.
        for p in [Precision::F64, Precision::Auto] {
            let o = SvdOptions {
                precision: p,
                ..SvdOptions::default()
            };
            let sv = certify_singular_values(&a, &o).unwrap();
            let rk = enclose_rank(&sv);
            if !(rk.lo <= exact && exact <= rk.hi) {
                return TestResult::error(format!(
                    "{rows}x{cols} {p}: rank [{}, {}] against exact {exact}",
                    rk.lo, rk.hi
                ));
            }
        }
        TestResult::passed()
    }
    QuickCheck::new()
        .tests(cases(60))
        .quickcheck(prop as fn(u64, u8, u8, u8, bool) -> TestResult);
}

#[test]
fn rank_deficient_values_are_contained_exactly_at_every_precision() {
    // 16 x 16 of rank 14 and 20 x 12 of rank 9, integer and dyadic entries.
    for (rows, cols, r, bound, scale, seed) in [
        (16, 16, 14, 3, 1.0, 1u64),
        (20, 12, 9, 30, 2f64.powi(-8), 2),
        (12, 20, 9, 30, 2f64.powi(-8), 3),
    ] {
        let a = low_rank(rows, cols, r, bound, scale, &mut common::Rng(seed));
        let g = inertia::exact_gram(&a);
        assert_eq!(
            rational_rank(&a),
            inertia::exact_rank(&g),
            "the two oracles"
        );
        for p in [
            Precision::F64,
            Precision::Extended,
            Precision::Mpfr(128),
            Precision::Auto,
        ] {
            let o = SvdOptions {
                precision: p,
                ..SvdOptions::default()
            };
            let sv = certify_singular_values(&a, &o).unwrap();
            for (i, v) in sv.values.iter().enumerate() {
                assert!(
                    inertia::sigma_in(&g, i + 1, &v.enclosure),
                    "{rows}x{cols} {p}: sigma_{} not in {:?} ({})",
                    i + 1,
                    v.enclosure,
                    v.method.name()
                );
                if v.method == Method::ExactKernel {
                    assert_eq!(v.enclosure.hi(), 0.0);
                }
            }
        }
    }
}

#[test]
fn forged_kernel_certificates_fail_the_exact_check() {
    // A null vector of the 3 x 3 matrix below, then the same vector moved
    // by one part in 2^60, and a certificate whose free rows are not the
    // identity: the check must refuse the last two.
    let a = DenseMatrix {
        rows: 3,
        cols: 3,
        data: vec![1.0, 2.0, 3.0, 4.0, 5.0, 9.0, 7.0, 8.0, 15.0],
    };
    let prep = dense::prepare(3, 3, &a.data).unwrap();
    let c = exact_kernel(prep.a())
        .unwrap()
        .expect("column 3 = col 1 + col 2");
    assert_eq!(c.nullity, 1);
    assert!(check(prep.a(), &c));
    let mut moved = c.clone();
    let f = c.free[0];
    let other = (0..3).find(|&j| j != f).unwrap();
    moved.vectors[0][other] += Rational::from((1, 1u64 << 60));
    assert!(!check(prep.a(), &moved));
    let mut doubled = c.clone();
    doubled.vectors[0].iter_mut().for_each(|x| *x *= 2);
    assert!(!check(prep.a(), &doubled));
    let mut twice = c;
    twice.nullity = 2;
    twice.vectors.push(twice.vectors[0].clone());
    twice.free.push(twice.free[0]);
    assert!(!check(prep.a(), &twice));
}
