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

/// The determinant by Gaussian elimination over the rationals (the
/// oracle; shares no code with `src/linalg/kernel.rs`).
fn rational_det(mut m: Vec<Vec<Rational>>) -> Rational {
    let n = m.len();
    let mut det = Rational::from(1);
    for c in 0..n {
        let Some(p) = (c..n).find(|&r| m[r][c] != 0) else {
            return Rational::new();
        };
        if p != c {
            m.swap(p, c);
            det = -det;
        }
        det *= &m[c][c];
        let pivot_row = m[c].clone();
        for row in m.iter_mut().skip(c + 1) {
            if row[c] != 0 {
                let f = Rational::from(&row[c] / &pivot_row[c]);
                for (x, p) in row[c..].iter_mut().zip(&pivot_row[c..]) {
                    *x -= Rational::from(&f * p);
                }
            }
        }
    }
    det
}

/// `a` with row `i` scaled by `2^d_i` and column `j` by `2^e_j` (exact:
/// small integers times powers of two well inside binary64's range).
fn graded_copy(a: &DenseMatrix, rng: &mut common::Rng, span: usize) -> DenseMatrix {
    let mut exps = |n: usize| -> Vec<i32> {
        (0..n)
            .map(|_| rng.below(2 * span + 1) as i32 - span as i32)
            .collect()
    };
    let (d, e) = (exps(a.rows), exps(a.cols));
    let mut data = a.data.clone();
    for i in 0..a.rows {
        for j in 0..a.cols {
            data[i * a.cols + j] *= 2f64.powi(d[i]) * 2f64.powi(e[j]);
        }
    }
    DenseMatrix {
        rows: a.rows,
        cols: a.cols,
        data,
    }
}

/// L37: `kernel::det_of` is the exact determinant of the submatrix it is
/// given, on entries spanning up to 2^+-600 (checked against
/// [`rational_det`]).
#[test]
fn prop_det_of_is_the_exact_determinant() {
    fn prop(seed: u64, k: u8, r: u8) -> TestResult {
        let k = 1 + k as usize % 7;
        let r = r as usize % (k + 1);
        let mut rng = common::Rng(seed | 1);
        let a = low_rank(k + 1, k, r.max(1), 40, 1.0, &mut rng);
        let a = graded_copy(&a, &mut rng, 300);
        let m = faer::Mat::from_fn(a.rows, a.cols, |i, j| a.data[i * a.cols + j]);
        // The submatrix on rows 1..=k (all columns), in an arbitrary order.
        let rows: Vec<usize> = (1..=k).rev().collect();
        let cols: Vec<usize> = (0..k).collect();
        let exact = rational_det(
            rows.iter()
                .map(|&i| {
                    cols.iter()
                        .map(|&j| Rational::from_f64(a.data[i * a.cols + j]).unwrap())
                        .collect()
                })
                .collect(),
        );
        match specbound::linalg::kernel::det_of(m.as_ref(), &rows, &cols) {
            Some(d) if d == exact => TestResult::passed(),
            got => TestResult::error(format!("{k}x{k}: {got:?} against {exact}")),
        }
    }
    QuickCheck::new()
        .tests(cases(60))
        .quickcheck(prop as fn(u64, u8, u8) -> TestResult);
}

/// Every enclosure and decimal end of `a` at `p` contains the exact
/// singular value (exact inertia), and the rank interval the exact rank.
fn assert_contained_with_rank(a: &DenseMatrix, p: Precision, what: &str) {
    let o = SvdOptions {
        precision: p,
        ..SvdOptions::default()
    };
    let Ok(sv) = certify_singular_values(a, &o) else {
        return; // inconclusive is allowed
    };
    let g = inertia::exact_gram(a);
    for (i, v) in sv.values.iter().enumerate() {
        assert!(
            inertia::sigma_in(&g, i + 1, &v.enclosure),
            "{what} {p}: sigma_{} not in {:?}",
            i + 1,
            v.enclosure
        );
        if let Some(x) = &v.exact {
            let (lo, hi) = (inertia::decimal(&x.lo), inertia::decimal(&x.hi));
            assert!(
                inertia::sigma_in_rational(&g, i + 1, &lo.unwrap(), &hi.unwrap()),
                "{what} {p}: sigma_{} not in [{}, {}]",
                i + 1,
                x.lo,
                x.hi
            );
        }
    }
    let (rk, exact) = (enclose_rank(&sv), inertia::exact_rank(&g) as u64);
    assert!(
        rk.lo <= exact && exact <= rk.hi,
        "{what} {p}: rank [{}, {}] against {exact}",
        rk.lo,
        rk.hi
    );
}

/// L37 through the whole pipeline, on low-rank matrices graded by random
/// powers of two up to 2^+-300 per row and column (binary64 routes leave
/// their small values touching 0): every enclosure and decimal end,
/// raised by the exact determinant's bound, still contains the exact value.
#[test]
fn prop_exact_rank_bounds_contain_the_exact_values() {
    fn prop(seed: u64, rows: u8, cols: u8, r: u8) -> TestResult {
        let rows = 1 + rows as usize % 7;
        let cols = 1 + cols as usize % 7;
        let r = r as usize % (rows.min(cols) + 1);
        let mut rng = common::Rng(seed | 1);
        let a = low_rank(rows, cols, r, 40, 1.0, &mut rng);
        let a = graded_copy(&a, &mut rng, 300);
        for p in [Precision::F64, Precision::Mpfr(128), Precision::Auto] {
            assert_contained_with_rank(&a, p, &format!("{rows}x{cols} rank {r}"));
        }
        TestResult::passed()
    }
    QuickCheck::new()
        .tests(cases(30))
        .quickcheck(prop as fn(u64, u8, u8, u8) -> TestResult);
}

/// Issue 33: the matrices whose ranks are now decided by an exact
/// determinant (L37): `2^-1074 [[1, 0], [2, 1]]` (sigma_2 below the least
/// positive double, so only its decimal lower end is positive), a wide
/// 4 x 3 of rank 2, and two-sided graded `D B D`: contained exactly at
/// every precision.
#[test]
fn exact_rank_decided_matrices_are_contained_exactly() {
    let t = 2f64.powi(-1074);
    let sub = DenseMatrix {
        rows: 2,
        cols: 2,
        data: vec![t, 0.0, 2.0 * t, t],
    };
    let (c1, c2) = ([1.0, 3.0, -5.0, 7.0], [2.0, -1.0, 0.0, 4.0]);
    let mut data = Vec::new();
    for i in 0..4 {
        data.extend([
            c1[i],
            c2[i] * 2f64.powi(500),
            (c1[i] + 3.0 * c2[i]) * 2f64.powi(-1000),
        ]);
    }
    let wide = DenseMatrix {
        rows: 4,
        cols: 3,
        data,
    };
    let cases = [
        ("subnormal 2x2", sub),
        ("wide 4x3", wide),
        ("graded 6x6", common::graded(6, 6, 400, 1)),
        ("graded 7x5", common::graded(7, 5, 500, 3)),
    ];
    for (what, a) in &cases {
        for p in [
            Precision::F64,
            Precision::Extended,
            Precision::Mpfr(128),
            Precision::Mpfr(256),
            Precision::Mpfr(1000),
            Precision::Auto,
        ] {
            assert_contained_with_rank(a, p, what);
        }
    }
}

/// L37 e: a factored product whose factor has dependent columns (rank 31
/// of 32, no zero row): every enclosure, the factors' exact zeros included,
/// contains the exact singular value of the exact product (exact inertia;
/// the product of these `k 2^-8` entries is exact in binary64), and the
/// rank interval the exact rank.
#[test]
fn dependent_factor_products_are_contained_exactly() {
    use specbound::linalg::factored::certify_factored;
    let mut rng = common::Rng(11);
    let (m, r, n) = (40, 6, 36);
    let mut draw = |k: usize| -> Vec<f64> {
        (0..k)
            .map(|_| (rng.below(201) as f64 - 100.0) * 2f64.powi(-8))
            .collect()
    };
    let mut b = draw(m * r);
    for i in 0..m {
        b[i * r + 2] = b[i * r] - b[i * r + 1];
    }
    let c = draw(r * n);
    let mut prod = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            // Integers times 2^-16 below 2^53: every sum is exact.
            prod[i * n + j] = (0..r).map(|k| b[i * r + k] * c[k * n + j]).sum();
        }
    }
    let (b, c, a) = (
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
        DenseMatrix {
            rows: m,
            cols: n,
            data: prod,
        },
    );
    let g = inertia::exact_gram(&a);
    assert_eq!(inertia::exact_rank(&g), r - 1);
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
        let sv = certify_factored(&b, &c, &o).unwrap();
        for (i, v) in sv.values.iter().enumerate() {
            assert!(
                inertia::sigma_in(&g, i + 1, &v.enclosure),
                "{p}: sigma_{} not in {:?}",
                i + 1,
                v.enclosure
            );
        }
        let (rk, exact) = (enclose_rank(&sv), (r - 1) as u64);
        assert!(rk.lo <= exact && exact <= rk.hi, "{p}: {rk:?}");
    }
}
