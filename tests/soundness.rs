//! Soundness: every enclosure contains the exact value, asserted exactly
//! against exact oracles (no tolerance anywhere in this file).
//! Tightness is tested separately in `tightness.rs`.

mod common;

use common::*;
use quickcheck::{QuickCheck, TestResult};
use rug::{Float, Rational};
use specbound::enclosure::Enclosure;
use specbound::linalg::factored::certify_factored;
use specbound::linalg::{certify_singular_values, Precision, SvdOptions};
use specbound::matrix::DenseMatrix;
use specbound::spectral::{enclose_schatten, summarize, SchattenP};

fn opts(p: Precision) -> SvdOptions {
    SvdOptions {
        precision: p,
        ..SvdOptions::default()
    }
}

/// Test-case count knob (like PROPTEST_CASES): SPECBOUND_TEST_CASES.
fn cases(default: u64) -> u64 {
    std::env::var("SPECBOUND_TEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Spectrum families with exactly representable entries in D Q.
fn spectrum(kind: u8, len: usize, rng: &mut Rng) -> Vec<f64> {
    match kind % 9 {
        // distinct small integers
        0 => (0..len).map(|i| (i + 1) as f64).collect(),
        // exact repeats
        1 => (0..len).map(|i| (1 + i % 3) as f64).collect(),
        // a tight cluster 1 + k 2^-50 (far below the Stage-1 radius)
        2 => (0..len)
            .map(|i| 1.0 + (i as f64) * 2f64.powi(-50))
            .collect(),
        // rank deficiency: exact zeros
        3 => (0..len)
            .map(|i| if i % 2 == 0 { 0.0 } else { (i + 1) as f64 })
            .collect(),
        // graded powers of two down to 2^-1000
        4 => (0..len)
            .map(|i| 2f64.powi(-((i * 1000 / len.max(1)) as i32)))
            .collect(),
        // subnormal scaling: 2^-1074 * integers (< 2^10 keeps d_i q_ij exact)
        5 => (0..len)
            .map(|_| (1 + rng.below(1000)) as f64 * 2f64.powi(-1074) * 2f64.powi(30))
            .collect(),
        // near overflow: 2^1000 * small integers
        6 => (0..len)
            .map(|_| (1 + rng.below(100)) as f64 * 2f64.powi(1000))
            .collect(),
        // random signs of random integers (singular values are |d|)
        7 => (0..len)
            .map(|_| rng.sign() * (rng.below(1 << 20) as f64))
            .collect(),
        // 2^-60 relative smallest value next to O(1) values
        _ => (0..len)
            .map(|i| {
                if i == 0 {
                    2f64.powi(-60)
                } else {
                    (i % 7 + 1) as f64
                }
            })
            .collect(),
    }
}

fn check_dq(seed: u64, m: u8, extra: u8, kind: u8, transpose: bool, p: Precision) -> TestResult {
    let m = (m % 24) as usize + 1;
    let n = m + (extra % 24) as usize;
    let mut rng = Rng(seed | 1);
    let d = spectrum(kind, m, &mut rng);
    let a = scaled_rows(&d, n, transpose, &mut rng);
    match certify_singular_values(&a, &opts(p)) {
        Ok(sv) => {
            assert_contains_all(
                &sv.enclosures(),
                &sorted_abs(&d),
                &format!("kind {kind} {m}x{n}"),
            );
            TestResult::passed()
        }
        // Inconclusive is an allowed answer; only a wrong one is not.
        Err(_) => TestResult::discard(),
    }
}

#[test]
fn prop_f64_contains_exact_singular_values() {
    fn prop(seed: u64, m: u8, extra: u8, kind: u8, t: bool) -> TestResult {
        check_dq(seed, m, extra, kind, t, Precision::F64)
    }
    QuickCheck::new()
        .tests(cases(300))
        .max_tests(cases(300) * 4)
        .quickcheck(prop as fn(u64, u8, u8, u8, bool) -> TestResult);
}

#[test]
fn prop_extended_contains_exact_singular_values() {
    fn prop(seed: u64, m: u8, extra: u8, kind: u8, t: bool) -> TestResult {
        check_dq(seed, m, extra, kind, t, Precision::Extended)
    }
    QuickCheck::new()
        .tests(cases(150))
        .max_tests(cases(150) * 4)
        .quickcheck(prop as fn(u64, u8, u8, u8, bool) -> TestResult);
}

#[test]
fn prop_mpfr_contains_exact_singular_values() {
    fn prop(seed: u64, m: u8, extra: u8, kind: u8, t: bool) -> TestResult {
        check_dq(seed, m % 10, extra % 8, kind, t, Precision::Mpfr(128))
    }
    QuickCheck::new()
        .tests(cases(60))
        .max_tests(cases(60) * 4)
        .quickcheck(prop as fn(u64, u8, u8, u8, bool) -> TestResult);
}

#[test]
fn every_family_certifies_without_error_in_f64() {
    // Soundness allows "inconclusive", but these families must be conclusive.
    for kind in 0..9u8 {
        for (m, n) in [(1usize, 1usize), (1, 17), (7, 7), (13, 40)] {
            let mut rng = Rng(7 + kind as u64);
            let d = spectrum(kind, m, &mut rng);
            let a = scaled_rows(&d, n, false, &mut rng);
            let sv = certify_singular_values(&a, &opts(Precision::F64))
                .unwrap_or_else(|e| panic!("kind {kind} {m}x{n}: {e}"));
            assert_contains_all(&sv.enclosures(), &sorted_abs(&d), "family");
        }
    }
}

#[test]
fn lauchli_matrix_contains_sqrt_n_plus_eps2_and_eps() {
    // L = [1^T; eps I], (n+1) x n: sigma = sqrt(n + eps^2) once, eps (n-1 times).
    for (n, j) in [(2usize, 1i32), (5, 10), (16, 30), (40, 27), (9, 600)] {
        let eps = 2f64.powi(-j);
        let mut data = vec![0.0; (n + 1) * n];
        for c in 0..n {
            data[c] = 1.0;
            data[(c + 1) * n + c] = eps;
        }
        let a = DenseMatrix {
            rows: n + 1,
            cols: n,
            data,
        };
        for p in [Precision::F64, Precision::Extended, Precision::Mpfr(200)] {
            let sv = certify_singular_values(&a, &opts(p)).unwrap();
            let e = sv.enclosures();
            let q = Rational::from(n) + Rational::from_f64(eps).unwrap().square();
            assert_contains_sqrt(&e[0], &q, "Lauchli sigma_1");
            for x in &e[1..] {
                assert!(
                    x.contains(eps),
                    "Lauchli eps={eps:e} not in [{:e},{:e}] ({p:?})",
                    x.lo(),
                    x.hi()
                );
            }
        }
    }
}

#[test]
fn tridiagonal_toeplitz_closed_form() {
    // tridiag(-1, 2, -1): sigma_k = 2 - 2 cos(k pi / (n + 1)). Oracle: MPFR at
    // 600 bits (pi, the quotient, cos and the products each within a few ulps,
    // so the value is within 2^-580 of the oracle); the enclosure must contain
    // [x - 2^-580, x + 2^-580], compared exactly.
    use rug::float::Constant;
    // With n + 1 divisible by 2 or 3 some values are rational (cos = 0, +-1/2):
    // n = 1 gives {2} and n = 2 gives {3, 1}, checked exactly here; the
    // irrational cases (n + 1 coprime to 6) use the MPFR oracle below.
    let one = DenseMatrix {
        rows: 1,
        cols: 1,
        data: vec![2.0],
    };
    let two = DenseMatrix {
        rows: 2,
        cols: 2,
        data: vec![2.0, -1.0, -1.0, 2.0],
    };
    for p in [Precision::F64, Precision::Extended, Precision::Mpfr(128)] {
        let e = certify_singular_values(&one, &opts(p))
            .unwrap()
            .enclosures();
        assert_contains_all(&e, &[2.0], "tridiag n=1");
        let e = certify_singular_values(&two, &opts(p))
            .unwrap()
            .enclosures();
        assert_contains_all(&e, &[3.0, 1.0], "tridiag n=2");
    }
    for n in [4usize, 6, 10, 30, 64] {
        let mut data = vec![0.0; n * n];
        for i in 0..n {
            data[i * n + i] = 2.0;
            if i + 1 < n {
                data[i * n + i + 1] = -1.0;
                data[(i + 1) * n + i] = -1.0;
            }
        }
        let a = DenseMatrix {
            rows: n,
            cols: n,
            data,
        };
        let slack = Float::with_val(600, 1u32) >> 580;
        let mut oracle: Vec<(Float, Float)> = (1..=n)
            .map(|k| {
                let pi = Float::with_val(600, Constant::Pi);
                let x = Float::with_val(600, &pi * k as u32) / (n as u32 + 1);
                let c = Float::with_val(600, x.cos_ref());
                let v = Float::with_val(600, 2u32) - Float::with_val(600, &c * 2u32);
                (
                    Float::with_val(600, &v - &slack),
                    Float::with_val(600, &v + &slack),
                )
            })
            .collect();
        oracle.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap());
        for p in [Precision::F64, Precision::Extended, Precision::Mpfr(128)] {
            let sv = certify_singular_values(&a, &opts(p)).unwrap();
            for (e, (olo, ohi)) in sv.enclosures().iter().zip(&oracle) {
                assert!(
                    Float::with_val(600, e.lo()) <= *olo && *ohi <= Float::with_val(600, e.hi()),
                    "n={n} {p:?}: oracle {} not inside [{:e},{:e}]",
                    olo.to_f64(),
                    e.lo(),
                    e.hi()
                );
            }
        }
    }
}

#[test]
fn all_ones_and_hadamard_clusters() {
    // All-ones m x n: sqrt(mn) once, zeros otherwise.
    for (m, n) in [(1usize, 1usize), (3, 5), (16, 4), (30, 30)] {
        let a = DenseMatrix {
            rows: m,
            cols: n,
            data: vec![1.0; m * n],
        };
        let sv = certify_singular_values(&a, &opts(Precision::F64)).unwrap();
        let e = sv.enclosures();
        assert_contains_sqrt(&e[0], &Rational::from(m * n), "all-ones sigma_1");
        for x in &e[1..] {
            assert!(x.contains(0.0));
        }
    }
    // Hadamard H_64: all singular values equal 8 (one cluster of 64).
    let h = hadamard(6);
    let a = DenseMatrix {
        rows: 64,
        cols: 64,
        data: h.concat(),
    };
    for p in [Precision::F64, Precision::Extended] {
        let sv = certify_singular_values(&a, &opts(p)).unwrap();
        assert_contains_all(&sv.enclosures(), &[8.0; 64], "Hadamard");
    }
}

#[test]
fn zero_matrix_is_exactly_zero() {
    let a = DenseMatrix {
        rows: 3,
        cols: 5,
        data: vec![0.0; 15],
    };
    let sv = certify_singular_values(&a, &opts(Precision::F64)).unwrap();
    assert!(sv
        .enclosures()
        .iter()
        .all(|e| e.lo() == 0.0 && e.hi() == 0.0));
}

#[test]
fn invariance_under_transpose_and_scaling_contains_exact_values() {
    let mut rng = Rng(99);
    let d: Vec<f64> = (0..12).map(|i| ((i * 37) % 11 + 1) as f64).collect();
    for k in [-1070, -500, 0, 7, 900] {
        let dk: Vec<f64> = d
            .iter()
            .map(|x| x * 2f64.powi(k.clamp(-1000, 1000)) * 2f64.powi(k - k.clamp(-1000, 1000)))
            .collect();
        for t in [false, true] {
            let a = scaled_rows(&dk, 20, t, &mut rng);
            let sv = certify_singular_values(&a, &opts(Precision::F64)).unwrap();
            assert_contains_all(&sv.enclosures(), &sorted_abs(&dk), &format!("scale 2^{k}"));
        }
    }
}

/// B = Q1[:, :r] diag(d), C = Q2[:r, :]: the exact product has singular values |d|.
fn factored_case(m: usize, n: usize, d: &[f64], rng: &mut Rng) -> (DenseMatrix, DenseMatrix) {
    let r = d.len();
    let q1 = dyadic_orthogonal(m, rng, true);
    let q2 = dyadic_orthogonal(n, rng, true);
    let mut b = vec![0.0; m * r];
    for i in 0..m {
        for j in 0..r {
            b[i * r + j] = q1[i * m + j] * d[j];
        }
    }
    let c: Vec<f64> = q2[..r * n].to_vec();
    (
        DenseMatrix {
            rows: m,
            cols: r,
            data: b,
        },
        DenseMatrix {
            rows: r,
            cols: n,
            data: c,
        },
    )
}

#[test]
fn prop_factored_contains_exact_values_and_structural_zeros() {
    fn prop(seed: u64, m: u8, n: u8, r: u8, kind: u8) -> TestResult {
        let m = (m % 40) as usize + 2;
        let n = (n % 40) as usize + 2;
        let r = (r as usize % m.min(n)).max(1);
        let mut rng = Rng(seed | 1);
        let d = spectrum(kind % 4, r, &mut rng);
        let (b, c) = factored_case(m, n, &d, &mut rng);
        let sv = match certify_factored(&b, &c, &SvdOptions::default()) {
            Ok(sv) => sv,
            Err(_) => return TestResult::discard(),
        };
        let mut oracle = sorted_abs(&d);
        oracle.resize(m.min(n), 0.0);
        assert_eq!(sv.values.len(), m.min(n));
        assert_contains_all(&sv.enclosures(), &oracle, "factored");
        for v in &sv.values[m.min(n) - sv.structural_zeros..] {
            assert!(v.enclosure.lo() == 0.0 && v.enclosure.hi() == 0.0);
        }
        TestResult::passed()
    }
    QuickCheck::new()
        .tests(cases(200))
        .max_tests(cases(200) * 4)
        .quickcheck(prop as fn(u64, u8, u8, u8, u8) -> TestResult);
}

fn rat(e: &Enclosure) -> (Rational, Rational) {
    (
        Rational::from_f64(e.lo()).unwrap(),
        Rational::from_f64(e.hi()).unwrap(),
    )
}

#[test]
fn derived_quantities_contain_exact_oracles() {
    let mut rng = Rng(5);
    for kind in [0u8, 1, 3, 7] {
        let d = spectrum(kind, 9, &mut rng);
        let a = scaled_rows(&d, 14, kind % 2 == 1, &mut rng);
        let sv = certify_singular_values(&a, &opts(Precision::F64)).unwrap();
        let s = summarize(&a, &sv).unwrap();
        // Frobenius^2 = sum d^2 = sum a_ij^2 (exact rationals).
        let fro2: Rational = d
            .iter()
            .map(|&x| Rational::from_f64(x).unwrap().square())
            .sum();
        assert_contains_sqrt(&s.frobenius_norm, &fro2, "Frobenius");
        // Nuclear = sum |d|.
        let nuc: Rational = d
            .iter()
            .map(|&x| Rational::from_f64(x.abs()).unwrap())
            .sum();
        let (lo, hi) = rat(&s.nuclear_norm);
        assert!(lo <= nuc && nuc <= hi, "nuclear");
        // Spectral = max |d|.
        let top = d.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        assert!(s.spectral_norm.contains(top), "spectral");
        // (1,1)-norm exactly.
        let n11: Rational = a
            .data
            .iter()
            .map(|&x| Rational::from_f64(x.abs()).unwrap())
            .sum();
        let (lo, hi) = rat(&s.norm_11);
        assert!(lo <= n11 && n11 <= hi, "(1,1)-norm");
        // (2,1)-norm: oracle bounds by MPFR directed rounding at 300 bits.
        let (mut olo, mut ohi) = (Float::new(300), Float::new(300));
        for j in 0..a.cols {
            let col2: Rational = (0..a.rows)
                .map(|i| Rational::from_f64(a.get(i, j)).unwrap().square())
                .sum();
            let c_lo = Float::with_val_round(300, &col2, rug::float::Round::Down).0;
            let c_hi = Float::with_val_round(300, &col2, rug::float::Round::Up).0;
            let sl = Float::with_val_round(300, c_lo.sqrt_ref(), rug::float::Round::Down).0;
            let sh = Float::with_val_round(300, c_hi.sqrt_ref(), rug::float::Round::Up).0;
            olo = Float::with_val_round(300, &olo + &sl, rug::float::Round::Down).0;
            ohi = Float::with_val_round(300, &ohi + &sh, rug::float::Round::Up).0;
        }
        // The exact value lies in [olo, ohi] (directed MPFR); our interval must
        // intersect it, and contain it unless an endpoint falls inside that
        // 2^-290-wide oracle interval.
        assert!(Float::with_val(300, s.norm_21.lo()) <= ohi, "(2,1)-norm lo");
        assert!(Float::with_val(300, s.norm_21.hi()) >= olo, "(2,1)-norm hi");
        // rank: exact count of nonzero d.
        let rank = d.iter().filter(|&&x| x != 0.0).count() as u64;
        assert!(s.rank.lo <= rank && rank <= s.rank.hi, "rank");
        // Schatten p = 2: sum d^2 exactly; p = 0: rank.
        let sc = enclose_schatten(&sv, &SchattenP::parse("2").unwrap());
        let (lo, hi) = rat(&sc.power.unwrap());
        assert!(lo <= fro2 && fro2 <= hi, "S_2^2");
        let sc0 = enclose_schatten(&sv, &SchattenP::parse("0").unwrap());
        let p0 = sc0.power.unwrap();
        assert!(p0.lo() <= rank as f64 && rank as f64 <= p0.hi(), "S_0");
        // Schatten p = 0.5: oracle via MPFR directed sqrt sums.
        let sc = enclose_schatten(&sv, &SchattenP::parse("0.5").unwrap());
        let pw = sc.power.unwrap();
        let (mut slo, mut shi) = (Float::new(200), Float::new(200));
        for &x in &d {
            let q = Float::with_val(200, x.abs());
            let a = Float::with_val_round(200, q.sqrt_ref(), rug::float::Round::Down).0;
            let b = Float::with_val_round(200, q.sqrt_ref(), rug::float::Round::Up).0;
            slo = Float::with_val_round(200, &slo + &a, rug::float::Round::Down).0;
            shi = Float::with_val_round(200, &shi + &b, rug::float::Round::Up).0;
        }
        assert!(
            Float::with_val(200, pw.lo()) <= shi && Float::with_val(200, pw.hi()) >= slo,
            "S_0.5"
        );
    }
}

#[test]
fn nalgebra_matrices_enter_the_library_exactly() {
    // The library accepts nalgebra::DMatrix (copied exactly into DenseMatrix).
    let d = nalgebra::DMatrix::from_row_slice(2, 3, &[3.0, 0.0, 0.0, 0.0, -2.0, 0.0]);
    let a = DenseMatrix::from(&d);
    assert_eq!(nalgebra::DMatrix::from(&a), d);
    let sv = certify_singular_values(&a, &opts(Precision::F64)).unwrap();
    assert_contains_all(&sv.enclosures(), &[3.0, 2.0], "nalgebra input");
}
