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
use specbound::spectral::{enclose_schatten, summarize, SchattenP, SpectralSummary};
use std::sync::atomic::{AtomicU64, Ordering};

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

/// Least share of the generated cases that a property test must decide
/// (certify rather than find inconclusive); below it the test fails.
const MIN_DECIDED_PERCENT: u64 = 95;

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

/// Counts of the cases a property test ran and decided (not inconclusive):
/// a property that discards its inconclusive cases must still decide most
/// of them, or it tests nothing.
struct Tally {
    decided: AtomicU64,
    total: AtomicU64,
}

impl Tally {
    const fn new() -> Self {
        Self {
            decided: AtomicU64::new(0),
            total: AtomicU64::new(0),
        }
    }
    fn record(&self, decided: bool) {
        self.total.fetch_add(1, Ordering::Relaxed);
        if decided {
            self.decided.fetch_add(1, Ordering::Relaxed);
        }
    }
    /// Fails unless at least `min_percent` % of the cases run were decided.
    fn assert_decided(&self, min_percent: u64, what: &str) {
        let (d, t) = (
            self.decided.load(Ordering::Relaxed),
            self.total.load(Ordering::Relaxed),
        );
        eprintln!("{what}: {d} of {t} cases decided");
        assert!(t > 0, "{what}: no case ran");
        assert!(
            d * 100 >= t * min_percent,
            "{what}: only {d} of {t} cases were decided (minimum {min_percent}%)"
        );
    }
}

static F64_TALLY: Tally = Tally::new();
static EXTENDED_TALLY: Tally = Tally::new();
static MPFR_TALLY: Tally = Tally::new();
static FACTORED_TALLY: Tally = Tally::new();

#[allow(clippy::too_many_arguments)]
fn check_dq(
    seed: u64,
    m: u8,
    extra: u8,
    kind: u8,
    transpose: bool,
    p: Precision,
    tally: &Tally,
) -> TestResult {
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
            tally.record(true);
            TestResult::passed()
        }
        // Inconclusive is an allowed answer; only a wrong one is not.
        Err(_) => {
            tally.record(false);
            TestResult::discard()
        }
    }
}

#[test]
fn prop_f64_contains_exact_singular_values() {
    fn prop(seed: u64, m: u8, extra: u8, kind: u8, t: bool) -> TestResult {
        check_dq(seed, m, extra, kind, t, Precision::F64, &F64_TALLY)
    }
    QuickCheck::new()
        .tests(cases(300))
        .max_tests(cases(300) * 4)
        .quickcheck(prop as fn(u64, u8, u8, u8, bool) -> TestResult);
    F64_TALLY.assert_decided(MIN_DECIDED_PERCENT, "f64");
}

#[test]
fn prop_extended_contains_exact_singular_values() {
    fn prop(seed: u64, m: u8, extra: u8, kind: u8, t: bool) -> TestResult {
        check_dq(
            seed,
            m,
            extra,
            kind,
            t,
            Precision::Extended,
            &EXTENDED_TALLY,
        )
    }
    QuickCheck::new()
        .tests(cases(150))
        .max_tests(cases(150) * 4)
        .quickcheck(prop as fn(u64, u8, u8, u8, bool) -> TestResult);
    EXTENDED_TALLY.assert_decided(MIN_DECIDED_PERCENT, "extended");
}

#[test]
fn prop_mpfr_contains_exact_singular_values() {
    fn prop(seed: u64, m: u8, extra: u8, kind: u8, t: bool) -> TestResult {
        check_dq(
            seed,
            m % 10,
            extra % 8,
            kind,
            t,
            Precision::Mpfr(128),
            &MPFR_TALLY,
        )
    }
    QuickCheck::new()
        .tests(cases(60))
        .max_tests(cases(60) * 4)
        .quickcheck(prop as fn(u64, u8, u8, u8, bool) -> TestResult);
    MPFR_TALLY.assert_decided(MIN_DECIDED_PERCENT, "mpfr-128");
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

/// The Lauchli matrix `[1^T; eps I]`, `(n+1) x n`: singular values
/// `sqrt(n + eps^2)` once and `eps` (n - 1 times).
fn lauchli(n: usize, eps: f64) -> DenseMatrix {
    let mut data = vec![0.0; (n + 1) * n];
    for c in 0..n {
        data[c] = 1.0;
        data[(c + 1) * n + c] = eps;
    }
    DenseMatrix {
        rows: n + 1,
        cols: n,
        data,
    }
}

#[test]
fn lauchli_matrix_contains_sqrt_n_plus_eps2_and_eps() {
    // L = [1^T; eps I], (n+1) x n: sigma = sqrt(n + eps^2) once, eps (n-1 times).
    for (n, j) in [(2usize, 1i32), (5, 10), (16, 30), (40, 27), (9, 600)] {
        let eps = 2f64.powi(-j);
        let a = lauchli(n, eps);
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
        // Extended takes the dense fallback; f64 is the factored route
        // itself (the one `certify` uses by default); auto keeps the
        // factored answer where it meets rtol, and with an rtol no stage
        // meets it climbs the dense ladder and keeps the narrower of each.
        let mut decided = false;
        let unreachable_rtol = SvdOptions {
            rtol: 1e-300,
            ..SvdOptions::default()
        };
        for o in [
            opts(Precision::Extended),
            SvdOptions::default(),
            unreachable_rtol,
            opts(Precision::F64),
        ] {
            let sv = match certify_factored(&b, &c, &o) {
                Ok(sv) => sv,
                Err(_) => continue,
            };
            decided = true;
            let mut oracle = sorted_abs(&d);
            oracle.resize(m.min(n), 0.0);
            assert_eq!(sv.values.len(), m.min(n));
            assert_contains_all(&sv.enclosures(), &oracle, "factored");
            for v in &sv.values[m.min(n) - sv.structural_zeros..] {
                assert!(v.enclosure.lo() == 0.0 && v.enclosure.hi() == 0.0);
            }
        }
        FACTORED_TALLY.record(decided);
        if !decided {
            return TestResult::discard();
        }
        TestResult::passed()
    }
    QuickCheck::new()
        .tests(cases(200))
        .max_tests(cases(200) * 4)
        .quickcheck(prop as fn(u64, u8, u8, u8, u8) -> TestResult);
    FACTORED_TALLY.assert_decided(MIN_DECIDED_PERCENT, "factored");
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

/// Applies an in-place directed MPFR function and returns the result.
fn dir_op(
    mut x: Float,
    r: rug::float::Round,
    f: fn(&mut Float, rug::float::Round) -> std::cmp::Ordering,
) -> Float {
    f(&mut x, r);
    x
}

/// Exact checks of every norm of the summary of a matrix whose exact
/// singular values are `|d|` (entries exact), against rationals, and of
/// the (2,1)-norm against a 400-bit directed MPFR enclosure.
fn assert_summary_contains_exact(a: &DenseMatrix, d: &[f64], s: &SpectralSummary, what: &str) {
    let q = |x: f64| Rational::from_f64(x).unwrap();
    let fro2: Rational = d.iter().map(|&x| q(x).square()).sum();
    assert_contains_sqrt(&s.frobenius_norm, &fro2, &format!("{what}: Frobenius"));
    let nuc: Rational = d.iter().map(|&x| q(x.abs())).sum();
    let (lo, hi) = rat(&s.nuclear_norm);
    assert!(lo <= nuc && nuc <= hi, "{what}: nuclear");
    let n11: Rational = a.data.iter().map(|&x| q(x.abs())).sum();
    let (lo, hi) = rat(&s.norm_11);
    assert!(lo <= n11 && n11 <= hi, "{what}: (1,1)-norm");
    let top = d.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    assert!(s.spectral_norm.contains(top), "{what}: spectral");
    // Stable rank ||A||_F^2 / sigma_1^2, exactly.
    let sr = &fro2 / q(top).square();
    let (lo, hi) = rat(s.stable_rank.as_ref().expect("stable rank certified"));
    assert!(lo <= sr && sr <= hi, "{what}: stable rank");
    // (2,1)-norm: sum of column norms; each sqrt enclosed at 400 bits.
    use rug::float::Round;
    let (mut olo, mut ohi) = (Float::new(400), Float::new(400));
    for j in 0..a.cols {
        let c2: Rational = (0..a.rows).map(|i| q(a.get(i, j)).square()).sum();
        let sl = Float::with_val_round(400, &c2, Round::Down).0;
        let sh = Float::with_val_round(400, &c2, Round::Up).0;
        olo = Float::with_val_round(
            400,
            &olo + dir_op(sl, Round::Down, Float::sqrt_round),
            Round::Down,
        )
        .0;
        ohi = Float::with_val_round(
            400,
            &ohi + dir_op(sh, Round::Up, Float::sqrt_round),
            Round::Up,
        )
        .0;
    }
    assert!(
        Float::with_val(400, s.norm_21.lo()) <= olo && ohi <= Float::with_val(400, s.norm_21.hi()),
        "{what}: (2,1)-norm"
    );
}

#[test]
fn norms_of_matrices_scaled_by_2_pow_pm_1000_contain_exact_values() {
    // Regression: singular values up to 2^1010 were refused ("sum of squares
    // overflowed"); below about 1e-154 the Frobenius norm came out as
    // [0, 2.2e-162] and the stable rank as null.
    for k in [1010, 1000, 600, -540, -1000, -1060] {
        for (kind, t) in [(0u8, false), (1, true), (7, false)] {
            if kind == 7 && k > 1000 {
                continue; // |d| up to 2^20: 2^20 2^1010 would overflow
            }
            let mut rng = Rng(31 + k as u64 + kind as u64);
            let d0 = spectrum(kind, 9, &mut rng);
            // |d0| < 2^20 and dyadic Q entries keep every d q exact at 2^k.
            let d: Vec<f64> = d0.iter().map(|x| x * common::pow2(k)).collect();
            let a = scaled_rows(&d, 14, t, &mut rng);
            let what = format!("2^{k} kind {kind}");
            let sv = certify_singular_values(&a, &opts(Precision::F64))
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_contains_all(&sv.enclosures(), &sorted_abs(&d), &what);
            let s = summarize(&a, &sv).unwrap_or_else(|e| panic!("{what}: {e}"));
            if kind == 0 || kind == 7 {
                assert_summary_contains_exact(&a, &d, &s, &what);
            }
        }
    }
}

#[test]
fn matrix_mixing_2_pow_1000_and_2_pow_minus_100_entries_is_scaled_exactly() {
    // The exact prescaling once fell back to no scaling at all when some
    // entry could not be scaled by 2^-1000 exactly; the nearest exact
    // exponent (2^-974) keeps every sum in range.
    let a = DenseMatrix {
        rows: 3,
        cols: 2,
        data: vec![
            common::pow2(1000),
            0.0,
            0.0,
            3.0 * common::pow2(-100),
            0.0,
            0.0,
        ],
    };
    let d = [common::pow2(1000), 3.0 * common::pow2(-100)];
    let sv = certify_singular_values(&a, &opts(Precision::F64)).unwrap();
    assert_contains_all(&sv.enclosures(), &d, "mixed range");
    let s = summarize(&a, &sv).unwrap();
    assert_summary_contains_exact(&a, &d, &s, "mixed range");
}

#[test]
fn factored_norms_with_factors_scaled_by_2_pow_pm_500_contain_exact_values() {
    // The factored (2,1), (1,1) and Frobenius sums were not rescaled at all.
    use specbound::spectral::summarize_factored;
    for (kb, kc) in [(500, 500), (-530, -530), (1000, -990), (0, 0)] {
        let mut rng = Rng(77 + kb as u64);
        let d0 = spectrum(0, 4, &mut rng);
        let (mut b, mut c) = factored_case(12, 10, &d0, &mut rng);
        b.data.iter_mut().for_each(|x| *x *= common::pow2(kb));
        c.data.iter_mut().for_each(|x| *x *= common::pow2(kc));
        let d: Vec<f64> = d0.iter().map(|x| x * common::pow2(kb + kc)).collect();
        let what = format!("factored 2^{kb} 2^{kc}");
        let mut oracle = sorted_abs(&d);
        oracle.resize(10, 0.0);
        // The dense fallback (extended, mpfr) bounds fl(BC) - BC with the
        // factors' norms, rescaled as well.
        let sv = certify_factored(&b, &c, &opts(Precision::Extended))
            .unwrap_or_else(|e| panic!("{what} (dense fallback): {e}"));
        assert_contains_all(&sv.enclosures(), &oracle, &what);
        let sv = certify_factored(&b, &c, &opts(Precision::F64))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_contains_all(&sv.enclosures(), &oracle, &what);
        let s = summarize_factored(&b, &c, &sv).unwrap_or_else(|e| panic!("{what}: {e}"));
        let q = |x: f64| Rational::from_f64(x).unwrap();
        let fro2: Rational = d.iter().map(|&x| q(x).square()).sum();
        assert_contains_sqrt(&s.frobenius_norm, &fro2, &format!("{what}: Frobenius"));
        // The product's entries, exactly.
        let entry = |i: usize, j: usize| -> Rational {
            (0..b.cols).map(|k| q(b.get(i, k)) * q(c.get(k, j))).sum()
        };
        let n11: Rational = (0..12)
            .flat_map(|i| (0..10).map(move |j| (i, j)))
            .map(|(i, j)| entry(i, j).abs())
            .sum();
        let (lo, hi) = rat(&s.norm_11);
        assert!(lo <= n11 && n11 <= hi, "{what}: (1,1)-norm");
        // (2,1): each column norm squared is exact; lo^2 <= ... per the sum
        // bound: the sum of column norms lies in [norm_21.lo, norm_21.hi]
        // iff lo <= sum sqrt(c_j) <= hi; checked with directed MPFR.
        use rug::float::Round;
        let (mut olo, mut ohi) = (Float::new(400), Float::new(400));
        for j in 0..10 {
            let c2: Rational = (0..12).map(|i| entry(i, j).square()).sum();
            let sl = Float::with_val_round(400, &c2, Round::Down).0;
            let sh = Float::with_val_round(400, &c2, Round::Up).0;
            olo = Float::with_val_round(
                400,
                &olo + dir_op(sl, Round::Down, Float::sqrt_round),
                Round::Down,
            )
            .0;
            ohi = Float::with_val_round(
                400,
                &ohi + dir_op(sh, Round::Up, Float::sqrt_round),
                Round::Up,
            )
            .0;
        }
        assert!(
            Float::with_val(400, s.norm_21.lo()) <= olo
                && ohi <= Float::with_val(400, s.norm_21.hi()),
            "{what}: (2,1)-norm"
        );
    }
}

#[test]
fn factored_entry_norms_over_several_column_blocks_contain_exact_values() {
    // The product is formed 256 columns at a time: 600 columns give two
    // full blocks and a partial one. Integer factors: every entry of B C is
    // an exact integer, so the oracle is exact.
    use rug::float::Round;
    use specbound::spectral::enclose_product_entry_norms;
    let (m, r, n) = (9usize, 3usize, 600usize);
    let mut rng = Rng(4242);
    let mut int = |rows: usize, cols: usize| DenseMatrix {
        rows,
        cols,
        data: (0..rows * cols)
            .map(|_| rng.below(201) as f64 - 100.0)
            .collect(),
    };
    let (b, c) = (int(m, r), int(r, n));
    let (fro, n21, n11) = enclose_product_entry_norms(&b, &c).unwrap();
    let entry = |i: usize, j: usize| -> i64 {
        (0..r)
            .map(|k| b.get(i, k) as i64 * c.get(k, j) as i64)
            .sum()
    };
    let col2: Vec<i64> = (0..n)
        .map(|j| (0..m).map(|i| entry(i, j).pow(2)).sum())
        .collect();
    let fro2 = Rational::from(col2.iter().sum::<i64>());
    assert_contains_sqrt(&fro, &fro2, "Frobenius over blocks");
    let abs: i64 = (0..m)
        .flat_map(|i| (0..n).map(move |j| (i, j)))
        .map(|(i, j)| entry(i, j).abs())
        .sum();
    assert!(
        n11.lo() <= abs as f64 && abs as f64 <= n11.hi(),
        "(1,1)-norm {abs} not in [{}, {}]",
        n11.lo(),
        n11.hi()
    );
    let (mut olo, mut ohi) = (Float::new(400), Float::new(400));
    for &c2 in &col2 {
        let x = Float::with_val(400, c2);
        let (sl, sh) = (
            dir_op(x.clone(), Round::Down, Float::sqrt_round),
            dir_op(x, Round::Up, Float::sqrt_round),
        );
        olo = Float::with_val_round(400, &olo + sl, Round::Down).0;
        ohi = Float::with_val_round(400, &ohi + sh, Round::Up).0;
    }
    assert!(
        Float::with_val(400, n21.lo()) <= olo && ohi <= Float::with_val(400, n21.hi()),
        "(2,1)-norm over blocks"
    );
}

#[test]
fn schatten_norm_for_p_5000_contains_the_exact_value() {
    // Regression: the norm was null (the scaled terms reached 2^5000).
    // Exact oracle: lo^p <= sum sigma_i^p <= hi^p with rationals.
    let cases: [(&[f64], &str); 3] = [
        (&[1.5, 1.0], "5000"),
        (&[1.875, 1.875, 0.5], "5000"),
        (&[1.5, 1.25], "1001"),
    ];
    for (d, p) in cases {
        let n = d.len();
        let mut data = vec![0.0; n * n];
        for i in 0..n {
            data[i * n + i] = d[i];
        }
        let a = DenseMatrix {
            rows: n,
            cols: n,
            data,
        };
        let sv = certify_singular_values(&a, &opts(Precision::F64)).unwrap();
        let sc = enclose_schatten(&sv, &SchattenP::parse(p).unwrap());
        let norm = sc.norm.unwrap_or_else(|| panic!("p={p}: norm is null"));
        use rug::ops::Pow;
        let pe: u32 = p.parse().unwrap();
        let sum: Rational = d
            .iter()
            .map(|&x| Rational::from_f64(x).unwrap().pow(pe))
            .sum();
        let (lo, hi) = rat(&norm);
        assert!(
            lo.clone().pow(pe) <= sum && sum <= hi.clone().pow(pe),
            "p={p}: norm [{:e}, {:e}]",
            norm.lo(),
            norm.hi()
        );
    }
}

#[test]
fn schatten_power_at_p_1e_minus_400_contains_the_exact_value_and_is_not_the_rank() {
    // Regression: p = 1e-400 was written as p = 0. Here sum sigma^p for the
    // exact p = 10^-400 is checked against a 4000-bit directed MPFR oracle.
    use rug::float::Round;
    let d = [3.0f64, 0.75, 0.0];
    let a = DenseMatrix {
        rows: 3,
        cols: 3,
        data: vec![3.0, 0.0, 0.0, 0.0, 0.75, 0.0, 0.0, 0.0, 0.0],
    };
    let sv = certify_singular_values(&a, &opts(Precision::F64)).unwrap();
    let sp = SchattenP::parse("1e-400").unwrap();
    assert!(!sp.is_zero());
    assert_eq!(sp.text, "1e-400");
    let pw = enclose_schatten(&sv, &sp).power.unwrap();
    let prec = 4000;
    let p_lo = Float::with_val_round(prec, Float::parse("1e-400").unwrap(), Round::Down).0;
    let p_hi = Float::with_val_round(prec, Float::parse("1e-400").unwrap(), Round::Up).0;
    let (mut olo, mut ohi) = (Float::new(prec), Float::new(prec));
    for &x in d.iter().filter(|x| **x > 0.0) {
        let l = dir_op(Float::with_val(prec, x), Round::Down, Float::ln_round);
        let h = dir_op(Float::with_val(prec, x), Round::Up, Float::ln_round);
        // p ln x is monotone in p with the sign of ln x.
        let (a_lo, a_hi) = if x >= 1.0 {
            (
                Float::with_val_round(prec, &p_lo * &l, Round::Down).0,
                Float::with_val_round(prec, &p_hi * &h, Round::Up).0,
            )
        } else {
            (
                Float::with_val_round(prec, &p_hi * &l, Round::Down).0,
                Float::with_val_round(prec, &p_lo * &h, Round::Up).0,
            )
        };
        olo = Float::with_val_round(
            prec,
            &olo + dir_op(a_lo, Round::Down, Float::exp_round),
            Round::Down,
        )
        .0;
        ohi = Float::with_val_round(
            prec,
            &ohi + dir_op(a_hi, Round::Up, Float::exp_round),
            Round::Up,
        )
        .0;
    }
    assert!(
        Float::with_val(prec, pw.lo()) <= olo && ohi <= Float::with_val(prec, pw.hi()),
        "[{:e}, {:e}]",
        pw.lo(),
        pw.hi()
    );
    // Not the rank: the exact value is 2 + 10^-400 ln(2.25) > 2.
    assert!(olo > 2u32 && ohi < 3u32);
}

#[test]
fn default_grid_m_is_exact_at_every_crossing_of_e_to_the_k() {
    // ceil(L + ln N) = L + k exactly when e^(k-1) < N <= e^k. The oracle
    // floor(e^k) comes from a 512-bit directed enclosure whose ends agree.
    use rug::float::Round;
    use specbound::bounds::default_grid_m;
    assert_eq!(default_grid_m(6, 384), 12);
    assert_eq!(default_grid_m(0, 0), 1);
    assert_eq!(default_grid_m(0, 2), 1);
    assert_eq!(default_grid_m(0, 3), 2);
    for k in 1..=44u32 {
        let lo = dir_op(Float::with_val(512, k), Round::Down, Float::exp_round);
        let hi = dir_op(Float::with_val(512, k), Round::Up, Float::exp_round);
        let f_lo = lo.to_integer_round(Round::Down).unwrap().0;
        let f_hi = hi.to_integer_round(Round::Down).unwrap().0;
        assert_eq!(f_lo, f_hi, "oracle for e^{k} undecided");
        let f = f_lo.to_u64().unwrap() as usize;
        if f >= 2 {
            assert_eq!(
                default_grid_m(5, f),
                5 + k as usize,
                "N = floor(e^{k}) = {f}"
            );
        }
        assert_eq!(
            default_grid_m(5, f + 1),
            6 + k as usize,
            "N = floor(e^{k}) + 1"
        );
    }
}

#[test]
fn blocked_products_with_inner_dimension_above_512_contain_exact_values() {
    // The chunked GEMM (depth 512 + chunks - 1, L4 blocked form) on inner
    // dimensions of 1100 and 1600.
    for (n, t) in [(1100usize, true), (1600, false)] {
        let mut rng = Rng(n as u64);
        let d = spectrum(0, 6, &mut rng);
        let a = scaled_rows(&d, n, t, &mut rng);
        for p in [Precision::F64, Precision::Extended] {
            let sv = certify_singular_values(&a, &opts(p)).unwrap();
            assert_contains_all(&sv.enclosures(), &sorted_abs(&d), &format!("n={n} {p:?}"));
        }
    }
}

#[test]
fn mpfr_on_thin_factors_contains_exact_values_of_tall_matrices() {
    // The MPFR stage refines an m x n U (not m x m): tall cases, exact oracle.
    for (kind, n, t) in [
        (0u8, 300usize, true),
        (1, 200, false),
        (3, 120, true),
        (8, 90, true),
    ] {
        let mut rng = Rng(5 + kind as u64);
        let d = spectrum(kind, 7, &mut rng);
        let a = scaled_rows(&d, n, t, &mut rng);
        let sv = certify_singular_values(&a, &opts(Precision::Mpfr(128))).unwrap();
        assert_contains_all(
            &sv.enclosures(),
            &sorted_abs(&d),
            &format!("kind {kind} n={n}"),
        );
        for (v, x) in sv.values.iter().zip(sorted_abs(&d)) {
            let e = v.exact.as_ref().unwrap();
            let lo = Rational::from_f64(x).unwrap();
            let dl = Float::parse(&e.lo).unwrap();
            let dh = Float::parse(&e.hi).unwrap();
            let dl = Float::with_val(600, dl);
            let dh = Float::with_val(600, dh);
            assert!(dl <= lo && lo <= dh, "kind {kind}: decimal bounds");
        }
    }
}

#[test]
fn kato_temple_at_a_zero_singular_value_keeps_zero_inside() {
    // An isolated zero singular value: the refinement's alpha is 0 and the
    // zero lies outside (alpha, beta) (L17 case b); the result must still
    // contain 0.
    for n in [3usize, 5, 9] {
        let mut rng = Rng(n as u64 + 100);
        let mut d: Vec<f64> = (0..n).map(|i| (i + 1) as f64).collect();
        d[0] = 0.0;
        let a = scaled_rows(&d, n + 2, n % 2 == 0, &mut rng);
        let sv = certify_singular_values(&a, &opts(Precision::Extended)).unwrap();
        assert_contains_all(&sv.enclosures(), &sorted_abs(&d), "zero singular value");
    }
}

// ---- The exact-Gram route (proofs/exact-gram.md L23, proofs/gram-eigen.md L24) ----

/// The exact-Gram route alone on `a`: `None` when `a` is zero or its Gram
/// matrix is not proved exact (the route does not apply).
fn gram_route(
    a: &DenseMatrix,
) -> Option<Result<Vec<specbound::linalg::CertifiedValue>, specbound::enclosure::Inconclusive>> {
    use specbound::linalg::{dense, gram};
    let prep = dense::prepare(a.rows, a.cols, &a.data)?;
    let e = gram::gram_eigen(prep.a(), faer::Par::Seq)?;
    e.exact
        .then(|| gram::certify_from_gram(&e, prep.scale_exp, faer::Par::Seq))
}

/// A matrix of float16 values (every entry `M 2^(e-10)`, `|M| < 2^11`,
/// `-14 <= e <= -3`, zeros and subnormals included): `rows x cols`.
fn f16_grid(rows: usize, cols: usize, rng: &mut Rng) -> DenseMatrix {
    let data = (0..rows * cols)
        .map(|_| match rng.below(16) {
            0 => 0.0,
            1 => rng.sign() * rng.below(1 << 10) as f64 * 2f64.powi(-24), // subnormal
            _ => {
                let e = -14 + rng.below(12) as i32;
                rng.sign() * (1024 + rng.below(1024)) as f64 * 2f64.powi(e - 10)
            }
        })
        .collect();
    DenseMatrix { rows, cols, data }
}

#[test]
fn exact_gram_test_passes_only_where_every_evaluation_is_exact() {
    // Float16 grids: the test of L23 holds, and the symmetric product equals
    // the exact Gram matrix, computed in integers (entries are multiples of
    // 2^-24, so 2^48 (A^T A)_ij is an integer far below 2^127).
    use specbound::linalg::gram::{gram, gram_is_exact};
    for (m, n, seed) in [
        (300usize, 70usize, 1u64),
        (1031, 129, 2),
        (64, 64, 3),
        (9, 1, 4),
    ] {
        let a = f16_grid(m, n, &mut Rng(seed));
        let am = faer::Mat::from_fn(m, n, |i, j| a.get(i, j));
        assert!(gram_is_exact(am.as_ref()), "{m}x{n}: test should pass");
        for par in [faer::Par::Seq, faer::Par::rayon(2)] {
            let g = gram(am.as_ref(), par);
            for i in 0..n {
                for j in 0..n {
                    let exact: i128 = (0..m)
                        .map(|k| {
                            let x = (a.get(k, i) * 2f64.powi(24)) as i128;
                            let y = (a.get(k, j) * 2f64.powi(24)) as i128;
                            x * y
                        })
                        .sum();
                    let got = g[(i, j)] * 2f64.powi(48);
                    assert!(
                        got.fract() == 0.0 && got as i128 == exact,
                        "{m}x{n} ({i},{j})"
                    );
                }
            }
        }
    }
    // Where the test fails, rounding does happen: (A^T A)_12 = 1 - 2^-54 is
    // not a float, so no evaluation returns it.
    let e = 2f64.powi(-27);
    let am = faer::mat![[1.0, 1.0], [e, -e]];
    assert!(!gram_is_exact(am.as_ref()));
    assert_eq!(gram(am.as_ref(), faer::Par::Seq)[(0, 1)], 1.0);
    // A long column on the float16 grid whose squared norm exceeds 2^(53-48).
    let col = faer::Mat::from_fn(4096, 1, |i, _| if i == 0 { 2f64.powi(-24) } else { 0.125 });
    // q = -24, S = 4095/64 + 2^-48 > 2^(53-48) = 32.
    assert!(!gram_is_exact(col.as_ref()));
}

static GRAM_TALLY: Tally = Tally::new();

#[test]
fn prop_exact_gram_route_contains_exact_singular_values() {
    // D Q with integer d (distinct, repeated, zeros, signs) and dyadic
    // orthogonal Q: the Gram matrix is exact, and the singular values |d_i|
    // (padded with zeros) must lie in the route's enclosures, index by index.
    fn prop(seed: u64, m: u8, extra: u8, kind: u8, t: bool) -> TestResult {
        let m = (m % 24) as usize + 1;
        let n = m + (extra % 24) as usize;
        let mut rng = Rng(seed | 1);
        let d: Vec<f64> = match kind % 4 {
            0 => (0..m).map(|i| (i + 1) as f64).collect(),
            1 => (0..m).map(|i| (1 + i % 3) as f64).collect(),
            2 => (0..m)
                .map(|i| if i % 2 == 0 { 0.0 } else { (i + 1) as f64 })
                .collect(),
            _ => (0..m)
                .map(|_| rng.sign() * rng.below(1 << 10) as f64)
                .collect(),
        };
        let a = scaled_rows(&d, n, t, &mut rng);
        match gram_route(&a) {
            None if d.iter().all(|&x| x == 0.0) => TestResult::discard(),
            None => panic!("kind {kind} {m}x{n}: the Gram matrix of D Q must be exact"),
            Some(Ok(values)) => {
                let encs: Vec<Enclosure> = values.iter().map(|v| v.enclosure).collect();
                assert_contains_all(&encs, &sorted_abs(&d), &format!("gram kind {kind} {m}x{n}"));
                GRAM_TALLY.record(true);
                TestResult::passed()
            }
            Some(Err(_)) => {
                GRAM_TALLY.record(false);
                TestResult::discard()
            }
        }
    }
    QuickCheck::new()
        .tests(cases(300))
        .max_tests(cases(300) * 10)
        .quickcheck(prop as fn(u64, u8, u8, u8, bool) -> TestResult);
    GRAM_TALLY.assert_decided(MIN_DECIDED_PERCENT, "exact-Gram route");
}

#[test]
fn exact_gram_route_on_lauchli_contains_sqrt_n_plus_eps2_and_eps() {
    // [1^T; eps I] with eps = 2^-j: q = -j and S = 1 + eps^2 < 2^(53-2j) for
    // j <= 26, so the route applies; eps^2 is far below the eigenvalue
    // radius for large j (the Gram route squares the dynamic range), and the
    // enclosure of eps must still contain it.
    for (n, j) in [(2usize, 1i32), (5, 10), (16, 20), (40, 26), (7, 3)] {
        let eps = 2f64.powi(-j);
        let a = lauchli(n, eps);
        let values = gram_route(&a)
            .expect("the Gram matrix is exact")
            .unwrap_or_else(|e| panic!("n {n} j {j}: {e}"));
        let q = Rational::from(n) + Rational::from_f64(eps).unwrap().square();
        assert_contains_sqrt(&values[0].enclosure, &q, "Lauchli sigma_1 (Gram)");
        for v in &values[1..] {
            assert!(
                v.enclosure.contains(eps),
                "n {n} j {j}: eps not in {:?}",
                v.enclosure
            );
        }
    }
}

#[test]
fn f64_stage_takes_the_exact_gram_route_on_float16_weights_and_contains_exact_values() {
    // Through the public entry point: a well-conditioned D Q on a float16-like
    // grid is certified by the exact-Gram route (method gram-eigen-symeig) and the
    // enclosures contain the exact values.
    let mut rng = Rng(99);
    let d: Vec<f64> = (0..40).map(|i| (64 + i) as f64).collect();
    let a = scaled_rows(&d, 200, true, &mut rng);
    let sv = certify_singular_values(&a, &opts(Precision::F64)).unwrap();
    assert!(
        sv.values
            .iter()
            .all(|v| matches!(v.method, specbound::linalg::Method::GramEigen(_))),
        "route not taken"
    );
    assert_contains_all(&sv.enclosures(), &sorted_abs(&d), "f64 stage, Gram route");
}

#[test]
fn both_eigensolvers_of_the_exact_gram_route_contain_exact_singular_values() {
    // The approximation comes from symeig (tridiagonal QL + inverse
    // iteration) first, and from faer's eigensolver when that falls short:
    // the certification must hold with either, on the same exact Gram matrix.
    use specbound::linalg::{dense, gram};
    let mut rng = Rng(7);
    let d: Vec<f64> = (0..48).map(|i| (2 * i + 1) as f64).collect();
    let a = scaled_rows(&d, 60, false, &mut rng);
    let prep = dense::prepare(a.rows, a.cols, &a.data).unwrap();
    let e = gram::gram_eigen(prep.a(), faer::Par::Seq).unwrap();
    assert!(e.exact);
    assert_eq!(e.solver, gram::EigenSolver::Tridiagonal);
    let mine = gram::certify_from_gram(&e, prep.scale_exp, faer::Par::Seq).unwrap();
    let f = e.with_faer().unwrap();
    assert_eq!(f.solver, gram::EigenSolver::Faer);
    let theirs = gram::certify_from_gram(&f, prep.scale_exp, faer::Par::Seq).unwrap();
    for (values, who) in [(mine, "symeig"), (theirs, "faer")] {
        let encs: Vec<Enclosure> = values.iter().map(|v| v.enclosure).collect();
        assert_contains_all(&encs, &sorted_abs(&d), who);
    }
}

#[test]
fn a_cluster_too_large_for_inverse_iteration_falls_back_to_faer_and_stays_contained() {
    // 520 equal singular values: one cluster larger than symeig orthogonalises
    // (MAX_CLUSTER = 512), so gram_eigen hands the matrix to faer; the
    // certified values (public entry point, f64 stage) must all contain 3.
    use specbound::linalg::{dense, gram};
    let mut rng = Rng(11);
    let d = vec![3.0; 520];
    let a = scaled_rows(&d, 530, true, &mut rng);
    let prep = dense::prepare(a.rows, a.cols, &a.data).unwrap();
    let e = gram::gram_eigen(prep.a(), faer::Par::Seq).unwrap();
    assert!(e.exact);
    assert_eq!(e.solver, gram::EigenSolver::Faer);
    let sv = certify_singular_values(&a, &opts(Precision::F64)).unwrap();
    assert_contains_all(&sv.enclosures(), &sorted_abs(&d), "cluster of 520");
}

/// The split product of L27 (`dense::split_product`) on a float16-grid
/// matrix: every column's error, computed exactly in rationals, is within
/// the bound it reports, and the product was split (so the test exercises
/// the exact slice).
#[test]
fn split_product_error_is_within_its_bound_exactly() {
    use specbound::linalg::dense;
    for seed in [1u64, 2, 3] {
        let mut rng = Rng(seed);
        let (m, k, p) = (40usize, 24usize, 7usize);
        // A: float16 values (11-bit integers times 2^-12); B: full doubles.
        let a = faer::Mat::<f64>::from_fn(m, k, |_, _| {
            rng.sign() * rng.below(2048) as f64 * 2f64.powi(-12)
        });
        let b = faer::Mat::<f64>::from_fn(k, p, |_, _| {
            (rng.next_u64() >> 11) as f64 * 2f64.powi(-53) - 0.5
        });
        let q = dense::grid_exponent(a.as_ref()).unwrap();
        let (row_max, _) = dense::max_row_col_norms_ru(a.as_ref());
        let beta = dense::abs_norm2_ru(a.as_ref());
        let cp = dense::split_product(a.as_ref(), b.as_ref(), Some((q, row_max)), faer::Par::Seq);
        assert!(cp.split, "seed {seed}: the product was not split");
        let bp = cp.bounded(beta);
        for j in 0..p {
            let mut err2 = Rational::new();
            for i in 0..m {
                let mut exact = Rational::new();
                for l in 0..k {
                    exact += Rational::from_f64(a[(i, l)]).unwrap()
                        * Rational::from_f64(b[(l, j)]).unwrap();
                }
                let d = Rational::from_f64(bp.computed[(i, j)]).unwrap() - exact;
                err2 += Rational::from(&d * &d);
            }
            let bound = Rational::from_f64(bp.col_err[j]).unwrap();
            assert!(
                err2 <= Rational::from(&bound * &bound),
                "seed {seed}, column {j}: error above the bound {:e}",
                bp.col_err[j]
            );
        }
    }
}

/// Issue 19 item 2: a float16 `(D Q)^T` with `Q` block-Hadamard (`|| |A| ||`
/// about 16 times `||A||`), condition 29, certified at f64 through the split
/// residual products (L27): every value contains the exact `|d_i|`.
#[test]
fn float16_weights_with_a_wide_abs_norm_gap_contain_exact_values_at_f64() {
    for (rows, k, j, seed) in [(256usize, 64usize, 2u32, 1u64), (512, 150, 3, 2)] {
        let d: Vec<f64> = (0..k)
            .map(|i| f16(29f64.powf(-(i as f64) / (k - 1) as f64)))
            .collect();
        let a = dq_t(rows, &d, j, seed);
        for p in [Precision::F64, Precision::Extended, Precision::Auto] {
            let sv = certify_singular_values(&a, &opts(p)).unwrap();
            assert_contains_all(
                &sv.enclosures(),
                &sorted_abs(&d),
                &format!("{rows}x{k} {p}"),
            );
        }
    }
}

/// Issue 19 item 6: exact clusters (each value of `D` repeated 32 times in
/// a float16 `(D Q)^T`, and `kron(I_16, B)`), contained at every precision;
/// the oracle of `kron` is the exact inertia of `B^T B` (each eigenvalue
/// of `kron(I_k, B^T B)` is one of `B^T B`'s, repeated `k` times).
#[test]
fn exact_clusters_of_float16_matrices_contain_exact_values() {
    #[path = "common/inertia.rs"]
    mod inertia;
    let d: Vec<f64> = [1.0, 0.75, 0.5, 0.375]
        .iter()
        .flat_map(|&x| std::iter::repeat_n(x, 32))
        .collect();
    let a = dq_t(256, &d, 2, 4);
    for p in [Precision::F64, Precision::Extended, Precision::Auto] {
        let sv = certify_singular_values(&a, &opts(p)).unwrap();
        assert_contains_all(
            &sv.enclosures(),
            &sorted_abs(&d),
            &format!("D Q clusters {p}"),
        );
    }
    let (a, b) = kron_blocks(16, 12, 6, 5);
    let g = inertia::exact_gram(&b);
    for p in [Precision::F64, Precision::Extended, Precision::Auto] {
        let sv = certify_singular_values(&a, &opts(p)).unwrap();
        for (i, v) in sv.values.iter().enumerate() {
            assert!(
                inertia::sigma_in(&g, i / 16 + 1, &v.enclosure),
                "kron {p}: sigma_{} not in {:?}",
                i + 1,
                v.enclosure
            );
        }
    }
}

/// `(B, C)` of [`factored_case`] embedded with structural zeros: zero rows
/// of `B` at 0, 7 and 14 (15 rows), an inner index 0 where `B`'s column is
/// zero (`C`'s row is not) and one, 3, where `C`'s row is zero (`B`'s
/// column is not), and zero columns of `C` at 3 and 11 (12 columns). The
/// exact product is that of the case with zero rows and columns inserted.
fn pruned_factored_case(d: &[f64], rng: &mut Rng) -> (DenseMatrix, DenseMatrix) {
    let (b, c) = factored_case(12, 10, d, rng);
    let r = d.len();
    let inner: Vec<usize> = (0..r + 2).filter(|&k| k != 0 && k != 3).collect();
    let rows: Vec<usize> = (0..15).filter(|i| ![0, 7, 14].contains(i)).collect();
    let cols: Vec<usize> = (0..12).filter(|j| ![3, 11].contains(j)).collect();
    let mut bb = DenseMatrix {
        rows: 15,
        cols: r + 2,
        data: vec![0.0; 15 * (r + 2)],
    };
    let mut cc = DenseMatrix {
        rows: r + 2,
        cols: 12,
        data: vec![0.0; (r + 2) * 12],
    };
    for (i0, &i) in rows.iter().enumerate() {
        for (k0, &k) in inner.iter().enumerate() {
            bb.data[i * (r + 2) + k] = b.get(i0, k0);
        }
        bb.data[i * (r + 2) + 3] = (i % 5) as f64 - 2.0; // meets C's zero row 3
    }
    for (k0, &k) in inner.iter().enumerate() {
        for (j0, &j) in cols.iter().enumerate() {
            cc.data[k * 12 + j] = c.get(k0, j0);
        }
    }
    for &j in &cols {
        cc.data[j] = (j % 3) as f64 + 0.5; // meets B's zero column 0
    }
    (bb, cc)
}

/// Issue 33 (pruned heads): a factored product whose factors have zero
/// rows, zero columns and inner indices where one factor is zero is
/// certified with those left out (L14 e); at every precision every
/// enclosure contains the exact value (the case's, then exact zeros), and
/// the summary's rank contains the exact rank.
#[test]
fn pruned_factored_product_contains_exact_values_at_every_precision() {
    use specbound::spectral::{enclose_rank, summarize_factored};
    for kind in [0u8, 1, 3, 5] {
        let mut rng = Rng(4242 + kind as u64);
        let d = spectrum(kind, 4, &mut rng);
        let (b, c) = pruned_factored_case(&d, &mut rng);
        let mut oracle = sorted_abs(&d);
        oracle.resize(12, 0.0);
        let rank = d.iter().filter(|&&x| x != 0.0).count();
        for p in [
            Precision::F64,
            Precision::Extended,
            Precision::Mpfr(128),
            Precision::Auto,
        ] {
            let what = format!("pruned factored, spectrum {kind}, {p:?}");
            let sv = certify_factored(&b, &c, &opts(p)).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!((sv.rows, sv.cols), (15, 12), "{what}");
            assert_contains_all(&sv.enclosures(), &oracle, &what);
            let rk = enclose_rank(&sv);
            assert!(
                rk.lo <= rank as u64 && rank as u64 <= rk.hi,
                "{what}: rank {rank} not in {rk:?}"
            );
            summarize_factored(&b, &c, &sv).unwrap_or_else(|e| panic!("{what}: {e}"));
        }
    }
}

/// Exact check that `sv` encloses the singular values of the two-column
/// (or two-row) matrix `a`: with `F = ||A||_F^2`, `D = det(A^T A)` and
/// `Delta = F^2 - 4 D` (exact rationals), `sigma_{1,2}^2 = (F +- sqrt Delta) / 2`,
/// and each comparison `lo <= sigma`, `sigma <= hi` is decided by squaring
/// twice with the signs checked (no rounding anywhere).
fn assert_two_column_contains(a: &DenseMatrix, encs: &[Enclosure], what: &str) {
    let q = |x: f64| Rational::from_f64(x).unwrap();
    let (x, y): (Vec<Rational>, Vec<Rational>) = if a.cols == 2 {
        (0..a.rows)
            .map(|i| (q(a.get(i, 0)), q(a.get(i, 1))))
            .unzip()
    } else {
        (0..a.cols)
            .map(|j| (q(a.get(0, j)), q(a.get(1, j))))
            .unzip()
    };
    let dot = |u: &[Rational], v: &[Rational]| -> Rational {
        u.iter().zip(v).map(|(s, t)| Rational::from(s * t)).sum()
    };
    let (sxx, syy, sxy) = (dot(&x, &x), dot(&y, &y), dot(&x, &y));
    let f = Rational::from(&sxx + &syy);
    let d = Rational::from(&sxx * &syy) - Rational::from(&sxy * &sxy);
    let delta = Rational::from(&f * &f) - Rational::from(4 * &d);
    let zero = Rational::new();
    // sqrt(Delta) >= t  <=>  t <= 0 or t^2 <= Delta; sqrt(Delta) <= t <=> t >= 0 and Delta <= t^2.
    let root_ge = |t: Rational| t <= zero || Rational::from(&t * &t) <= delta;
    let root_le = |t: Rational| t >= zero && delta <= Rational::from(&t * &t);
    let two_sq = |v: f64| 2 * (q(v) * q(v));
    let (s1, s2) = (encs[0], encs[1]);
    // sigma_1^2 = (F + r) / 2, sigma_2^2 = (F - r) / 2, r = sqrt(Delta).
    assert!(
        root_ge(two_sq(s1.lo()) - &f),
        "{what}: sigma_1 below [{:e}, ..]",
        s1.lo()
    );
    assert!(
        root_le(two_sq(s1.hi()) - &f),
        "{what}: sigma_1 above [.., {:e}]",
        s1.hi()
    );
    assert!(
        root_le(&f - two_sq(s2.lo())),
        "{what}: sigma_2 below [{:e}, ..]",
        s2.lo()
    );
    assert!(
        root_ge(&f - two_sq(s2.hi())),
        "{what}: sigma_2 above [.., {:e}]",
        s2.hi()
    );
    assert!(
        encs[2..].iter().all(|e| e.lo() <= 0.0),
        "{what}: only two values"
    );
}

/// Issue 33 (tiny matrices with extreme entries): two-column and two-row
/// matrices are certified in closed form from exact rationals (L32) at
/// every precision, and every enclosure contains the exact value: float32
/// `[[MAX, 2^-149], [2^-149, 0]]`, `2^-1074 [[1, 0], [2, 1]]`, a rank-one
/// 2 x 2, and random m x 2 and 2 x n matrices with entries spread over
/// 2^-600 .. 2^600.
#[test]
fn two_column_matrices_with_extreme_entries_contain_exact_values() {
    let t = 2f64.powi(-149);
    let d = 2f64.powi(-1074);
    let mut cases = vec![
        DenseMatrix {
            rows: 2,
            cols: 2,
            data: vec![f64::from(f32::MAX), t, t, 0.0],
        },
        DenseMatrix {
            rows: 2,
            cols: 2,
            data: vec![d, 0.0, 2.0 * d, d],
        },
        DenseMatrix {
            rows: 2,
            cols: 2,
            data: vec![1.0, 2.0, 3.0, 6.0],
        },
    ];
    let mut rng = Rng(3301);
    for (m, n) in [(7, 2), (2, 9), (40, 2)] {
        let data = (0..m * n)
            .map(|_| {
                rng.sign()
                    * (1 + rng.below(1000)) as f64
                    * common::pow2(rng.below(1200) as i32 - 600)
            })
            .collect();
        cases.push(DenseMatrix {
            rows: m,
            cols: n,
            data,
        });
    }
    for (k, a) in cases.iter().enumerate() {
        for p in [
            Precision::F64,
            Precision::Extended,
            Precision::Mpfr(256),
            Precision::Auto,
        ] {
            let what = format!("case {k} {p:?}");
            let sv = certify_singular_values(a, &opts(p)).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_two_column_contains(a, &sv.enclosures(), &what);
        }
    }
}

/// Issue 33 (overflowed powers): a 64 x 64 matrix with singular values
/// `(1 + i/64) 2^1000` wrote its Schatten p = 2 power as `null` only. It is
/// now an interval `[lo, +inf)` whose `lo` is at most the exact sum, and
/// also given in log form, `log_power` containing the exact
/// `ln sum sigma_i^2` (a rational under the log, bracketed by MPFR with
/// directed rounding).
#[test]
fn overflowed_schatten_power_is_an_interval_in_log_form() {
    use rug::float::Round;
    use specbound::spectral::{enclose_schatten, SchattenP};
    let n = 64;
    let d: Vec<f64> = (0..n)
        .map(|i| (1.0 + i as f64 / 64.0) * common::pow2(1000))
        .collect();
    let mut data = vec![0.0; n * n];
    for i in 0..n {
        data[i * n + (i * 7) % n] = d[i]; // a permuted diagonal
    }
    let a = DenseMatrix {
        rows: n,
        cols: n,
        data,
    };
    let sum: Rational = d
        .iter()
        .map(|&x| Rational::from_f64(x).unwrap().square())
        .sum();
    let ln = |r: Round| {
        let mut f = Float::with_val_round(300, &sum, r).0;
        f.ln_round(r);
        f
    };
    for p in [Precision::F64, Precision::Auto] {
        let sv = certify_singular_values(&a, &opts(p)).unwrap();
        let sc = enclose_schatten(&sv, &SchattenP::parse("2").unwrap());
        assert!(sc.power.is_none(), "2^2006 exceeds binary64");
        // Still an interval: [lo, +inf) with lo <= the exact sum (rationals).
        let pi = sc.power_interval().expect("[lo, +inf)");
        assert!(pi.hi().is_none());
        assert!(Rational::from_f64(pi.lo()).unwrap() <= sum, "{p:?}: {pi:?}");
        let lp = sc.log_power.expect("the power in log form");
        assert!(
            Float::with_val(300, lp.lo()) <= ln(Round::Down)
                && ln(Round::Up) <= Float::with_val(300, lp.hi()),
            "{p:?}: ln sum sigma^2 not in {lp:?}"
        );
        assert!(enclose_schatten(&sv, &SchattenP::parse("1").unwrap())
            .log_power
            .is_none());
    }
}

/// Issue 33 (two-sided grading): `D B D` with `D` from 2^500 to 2^-500 was
/// inconclusive at `auto` and `mpfr:256` ("sum of squares overflowed")
/// although sigma_1 is representable: no one power of two scales every
/// entry exactly with the squares in range. The entry norms are then summed
/// in MPFR; they contain the exact values, and the summary is certified.
#[test]
fn two_sided_graded_entry_norms_contain_exact_values() {
    use specbound::spectral::{enclose_entry_norms, enclose_frobenius_from_entries};
    let n = 6;
    let mut rng = Rng(500);
    let e: Vec<i32> = (0..n as i32).map(|i| 500 - 200 * i).collect();
    let data = (0..n * n)
        .map(|k| rng.sign() * (1 + rng.below(7)) as f64 / 8.0 * common::pow2(e[k / n] + e[k % n]))
        .collect();
    let a = DenseMatrix {
        rows: n,
        cols: n,
        data,
    };
    let q = |x: f64| Rational::from_f64(x).unwrap();
    let f2: Rational = a.data.iter().map(|&x| q(x).square()).sum();
    let n11: Rational = a.data.iter().map(|&x| q(x).abs()).sum();
    let f = enclose_frobenius_from_entries(&a).unwrap();
    assert_contains_sqrt(&f, &f2, "graded Frobenius");
    let (n21, m11) = enclose_entry_norms(&a).unwrap();
    let (lo, hi) = rat(&m11);
    assert!(lo <= n11 && n11 <= hi, "graded (1,1)-norm");
    // ||A||_F <= ||A||_{2,1} <= ||A||_{1,1}: exact necessary conditions.
    let (lo21, hi21) = rat(&n21);
    assert!(
        lo21 <= n11 && Rational::from(&hi21 * &hi21) >= f2,
        "graded (2,1)-norm"
    );
    let sv = certify_singular_values(&a, &opts(Precision::Auto)).unwrap();
    let s = summarize(&a, &sv).unwrap();
    assert_contains_sqrt(&s.frobenius_norm, &f2, "graded summary Frobenius");
}

/// Issue 33 (`spectra`'s norms tighten with the precision): the entry norms
/// at every precision (binary64 sums intersected with MPFR sums at
/// `extended` and `mpfr:N`) contain the exact values: the Frobenius norm's
/// square and the (1,1)-norm as rationals, the (2,1)-norm bracketed by
/// directed 400-bit square roots of the exact column sums.
#[test]
fn entry_norms_at_every_precision_contain_the_exact_values() {
    use rug::float::Round;
    use specbound::spectral::enclose_entry_norms_at;
    let mut rng = Rng(5);
    let (m, n) = (30, 20);
    let data: Vec<f64> = (0..m * n)
        .map(|k| {
            let x = (rng.below(1 << 24) as f64 - (1 << 23) as f64) * 2f64.powi(-24);
            x * 2f64.powi((k % 7) as i32 * 9 - 27)
        })
        .collect();
    let a = DenseMatrix {
        rows: m,
        cols: n,
        data,
    };
    let q = |x: f64| Rational::from_f64(x).unwrap();
    let cols: Vec<Rational> = (0..n)
        .map(|j| (0..m).map(|i| q(a.get(i, j)).square()).sum())
        .collect();
    let sq: Rational = cols.iter().sum();
    let abs: Rational = a.data.iter().map(|&x| q(x).abs()).sum();
    let root = |r: &Rational, rd: Round| {
        let mut f = Float::with_val_round(400, r, rd).0;
        f.sqrt_round(rd);
        f
    };
    let (n21_lo, n21_hi) = cols.iter().fold(
        (Float::with_val(400, 0), Float::with_val(400, 0)),
        |(l, h), c| {
            (
                Float::with_val_round(400, &l + &root(c, Round::Down), Round::Down).0,
                Float::with_val_round(400, &h + &root(c, Round::Up), Round::Up).0,
            )
        },
    );
    for p in [
        Precision::F64,
        Precision::Extended,
        Precision::Mpfr(128),
        Precision::Mpfr(300),
        Precision::Auto,
    ] {
        let (f, n21, n11) = enclose_entry_norms_at(&a, p).unwrap();
        assert_contains_sqrt(&f, &sq, &format!("{p:?} Frobenius"));
        assert!(
            q(n11.lo()) <= abs && abs <= q(n11.hi()),
            "{p:?}: (1,1) {n11:?}"
        );
        assert!(
            Float::with_val(400, n21.lo()) <= n21_lo && n21_hi <= Float::with_val(400, n21.hi()),
            "{p:?}: (2,1) {n21:?}"
        );
    }
}
