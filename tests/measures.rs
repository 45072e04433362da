//! The norm-based measures (`docs/measures.md`): soundness against exact
//! oracles on small exact matrices (every norm known exactly, each measure
//! a rational or the log of a rational bracketed by MPFR with directed
//! rounding), a float64 consistency check on the bundled MiniLM, the
//! certificate section (round trip, schema, versions) and `verify`'s
//! re-derivation (a tampered measure fails).

mod common;

use common::bundled;

use std::path::Path;

use rug::float::Round;
use rug::{Float, Rational};
use specbound::certificate::{CertInterval, Certificate, MeasuresEntry, NormsEntry};
use specbound::certify::{
    certify_distance_norms, certify_measures, certify_raw_norms, certify_run, measures_entry,
    CertifyOptions, Run, RunScope,
};
use specbound::evidence::verify::verify_internal;
use specbound::evidence::Answer;
use specbound::linalg::SvdOptions;
use specbound::matrix::DenseMatrix;
use specbound::progress::NoProgress;

const P: u32 = 256;

/// `W^T` of the row-major `rows x cols` matrix `w` (what the certified
/// norms take: the raw weight transposed).
fn transposed(rows: usize, cols: usize, w: &[f64]) -> DenseMatrix {
    let mut data = vec![0.0; rows * cols];
    for i in 0..rows {
        for j in 0..cols {
            data[j * rows + i] = w[i * cols + j];
        }
    }
    DenseMatrix {
        rows: cols,
        cols: rows,
        data,
    }
}

fn scaled_identity(n: usize, c: f64) -> (usize, usize, Vec<f64>) {
    let mut w = vec![0.0; n * n];
    for i in 0..n {
        w[i * n + i] = c;
    }
    (n, n, w)
}

/// `c H_64 / 8` restricted to its first `rows` rows: orthonormal rows
/// scaled by `c` (entries `+-c/8`, exact).
fn hadamard_rows(rows: usize, c: f64) -> (usize, usize, Vec<f64>) {
    let h = common::hadamard(6);
    let w = h[..rows]
        .iter()
        .flat_map(|r| r.iter().map(|x| x * c / 8.0))
        .collect();
    (rows, 64, w)
}

/// Five weights whose norms are exactly known: `(W, s, F^2, n21)`.
/// 3 I_8; the first 8 rows of H_64/8 (8 x 64: rows orthonormal, so the
/// row-(2,1) norm is 8 while the column sum would be 8 sqrt 8); H_64/4;
/// 1.5 I_27; -H_64/2. Every ratio n21/s is a cube (8, 8, 64, 27, 64), so
/// sum (n21/s)^(2/3) = 4 + 4 + 16 + 9 + 16 = 49 and its 3/2 power is 343.
#[allow(clippy::type_complexity)]
fn exact_weights() -> Vec<((usize, usize, Vec<f64>), Rational, Rational, Rational)> {
    let q = |n: i64, d: i64| Rational::from((n, d));
    vec![
        (scaled_identity(8, 3.0), q(3, 1), q(72, 1), q(24, 1)),
        (hadamard_rows(8, 1.0), q(1, 1), q(8, 1), q(8, 1)),
        (hadamard_rows(64, 2.0), q(2, 1), q(256, 1), q(128, 1)),
        (scaled_identity(27, 1.5), q(3, 2), q(243, 4), q(81, 2)),
        (hadamard_rows(64, -4.0), q(4, 1), q(1024, 1), q(256, 1)),
    ]
}

fn certified(w: &(usize, usize, Vec<f64>)) -> NormsEntry {
    let n = certify_raw_norms(&transposed(w.0, w.1, &w.2), &SvdOptions::default()).unwrap();
    NormsEntry {
        spectral_norm: CertInterval::of_inari(n.spectral).unwrap(),
        frobenius_norm: CertInterval::of_inari(n.frobenius).unwrap(),
        norm_21_rows: CertInterval::of_inari(n.norm_21_rows).unwrap(),
    }
}

fn rat(x: f64) -> Rational {
    Rational::from_f64(x).unwrap()
}

/// The certified interval contains the exact rational `q`.
fn assert_contains_rational(x: CertInterval, q: &Rational, what: &str) {
    assert!(
        rat(x.lo) <= *q && *q <= rat(x.hi),
        "{what}: [{:e}, {:e}] misses the exact {}",
        x.lo,
        x.hi,
        q.to_f64()
    );
}

/// The certified interval contains `sqrt(q)` exactly: `lo^2 <= q <= hi^2`.
fn assert_contains_sqrt_rational(x: CertInterval, q: &Rational, what: &str) {
    let (lo, hi) = (rat(x.lo.max(0.0)), rat(x.hi));
    assert!(
        lo.clone() * &lo <= *q && *q <= hi.clone() * &hi,
        "{what}: [{:e}, {:e}] misses the exact sqrt {}",
        x.lo,
        x.hi,
        q.to_f64()
    );
}

/// `[lo, hi]` containing `ln q` for a positive rational (MPFR, directed).
fn ln_bracket(q: &Rational) -> (Float, Float) {
    let mut lo = Float::with_val_round(P, q, Round::Down).0;
    lo.ln_round(Round::Down);
    let mut hi = Float::with_val_round(P, q, Round::Up).0;
    hi.ln_round(Round::Up);
    (lo, hi)
}

/// `ln d + ln(q) / d`, bracketed (`ln q > 0` here, so dividing by d is
/// increasing in each end).
fn ln_sum_bracket(d: u32, q: &Rational) -> (Float, Float) {
    let (dl, dh) = ln_bracket(&Rational::from(d));
    let (ql, qh) = ln_bracket(q);
    assert!(ql > 0);
    let lo = Float::with_val_round(P, &ql / d, Round::Down).0;
    let hi = Float::with_val_round(P, &qh / d, Round::Up).0;
    (
        Float::with_val_round(P, &lo + &dl, Round::Down).0,
        Float::with_val_round(P, &hi + &dh, Round::Up).0,
    )
}

fn assert_contains_bracket(x: CertInterval, b: &(Float, Float), what: &str) {
    assert!(
        Float::with_val(P, x.lo) <= b.0 && b.1 <= Float::with_val(P, x.hi),
        "{what}: [{:e}, {:e}] misses the exact value in [{}, {}]",
        x.lo,
        x.hi,
        b.0.to_f64(),
        b.1.to_f64()
    );
}

#[test]
fn raw_norms_contain_the_exact_norms_of_exact_weights() {
    for (k, (w, s, f2, n21)) in exact_weights().iter().enumerate() {
        let n = certified(w);
        assert_contains_rational(n.spectral_norm, s, &format!("weight {k} spectral"));
        assert_contains_sqrt_rational(n.frobenius_norm, f2, &format!("weight {k} Frobenius"));
        assert_contains_rational(n.norm_21_rows, n21, &format!("weight {k} rows (2,1)"));
    }
}

/// Issue 33: at `extended` and `mpfr:N` the Frobenius and (2,1) norms are
/// also summed in MPFR and intersected; they still contain the exact
/// norms (the exact weights, and a random weight on a 2^-30 grid whose
/// squared Frobenius norm is an exact rational).
#[test]
fn raw_norms_at_higher_precisions_contain_the_exact_norms() {
    use specbound::linalg::Precision;
    let mut g = 0x9E37_79B9_7F4A_7C15u64;
    let random: Vec<f64> = (0..96 * 64)
        .map(|_| {
            g ^= g << 13;
            g ^= g >> 7;
            g ^= g << 17;
            ((g >> 34) as f64 - 2f64.powi(29)) * 2f64.powi(-30)
        })
        .collect();
    let f2: Rational = random.iter().map(|&x| rat(x) * rat(x)).sum();
    for p in [Precision::Extended, Precision::Mpfr(160)] {
        let o = SvdOptions {
            precision: p,
            ..SvdOptions::default()
        };
        for (k, (w, s, f2, n21)) in exact_weights().iter().enumerate() {
            let n = certify_raw_norms(&transposed(w.0, w.1, &w.2), &o).unwrap();
            let at = |x| CertInterval::of_inari(x).unwrap();
            let what = format!("{p:?} weight {k}");
            assert_contains_rational(at(n.spectral), s, &format!("{what} spectral"));
            assert_contains_sqrt_rational(at(n.frobenius), f2, &format!("{what} Frobenius"));
            assert_contains_rational(at(n.norm_21_rows), n21, &format!("{what} (2,1)"));
        }
        let n = certify_raw_norms(&transposed(96, 64, &random), &o).unwrap();
        let fro = CertInterval::of_inari(n.frobenius).unwrap();
        assert_contains_sqrt_rational(fro, &f2, &format!("{p:?} random Frobenius"));
    }
}

#[test]
fn every_measure_contains_its_exact_value_on_exact_weights() {
    let ws = exact_weights();
    let norms: Vec<NormsEntry> = ws.iter().map(|x| certified(&x.0)).collect();
    let m = measures_entry(&norms, None).unwrap();
    assert_eq!(m.d, 5);
    let prod_s2: Rational = ws.iter().map(|x| x.1.clone() * &x.1).product();
    assert_eq!(prod_s2, 1296);
    let prod_f2: Rational = ws.iter().map(|x| x.2.clone()).product();
    let sum_f2: Rational = ws.iter().map(|x| x.2.clone()).sum();
    let ratio: Rational = ws.iter().map(|x| x.2.clone() / (x.1.clone() * &x.1)).sum();
    assert_eq!(ratio, 171);
    assert_contains_bracket(
        m.log_prod_of_spec.unwrap(),
        &ln_bracket(&prod_s2),
        "log_prod_of_spec",
    );
    assert_contains_bracket(
        m.log_sum_of_spec.unwrap(),
        &ln_sum_bracket(5, &prod_s2),
        "log_sum_of_spec",
    );
    assert_contains_bracket(
        m.log_prod_of_fro.unwrap(),
        &ln_bracket(&prod_f2),
        "log_prod_of_fro",
    );
    assert_contains_bracket(
        m.log_sum_of_fro.unwrap(),
        &ln_sum_bracket(5, &prod_f2),
        "log_sum_of_fro",
    );
    assert_contains_rational(m.param_norm.unwrap(), &sum_f2, "param_norm");
    assert_contains_bracket(
        m.log_spec_orig.unwrap(),
        &ln_bracket(&(prod_s2.clone() * &ratio)),
        "log_spec_orig",
    );
    // prod s = 36, (sum (n21/s)^(2/3))^(3/2) = 49^(3/2) = 343.
    let bartlett = Rational::from(36 * 343);
    assert_contains_rational(m.bartlett.unwrap(), &bartlett, "bartlett");
    assert_contains_bracket(
        m.log_bartlett.unwrap(),
        &ln_bracket(&bartlett),
        "log_bartlett",
    );
    assert!(m.frobenius_distance.is_none() && m.log_spec_init.is_none());
}

#[test]
fn init_measures_contain_their_exact_values_when_w0_is_seven_eighths_of_w() {
    // W0 = 7/8 W (exact), so W - W0 = W/8 exactly: every distance norm is
    // the weight's over 8, and sum (n21/8/s)^(2/3) = 49/4, whose 3/2 power
    // is 343/8.
    let ws = exact_weights();
    let norms: Vec<NormsEntry> = ws.iter().map(|x| certified(&x.0)).collect();
    let dists: Vec<NormsEntry> = ws
        .iter()
        .enumerate()
        .map(|(k, (w, s, f2, n21))| {
            let w0: Vec<f64> = w.2.iter().map(|x| x * 0.875).collect();
            let d = certify_distance_norms(
                &transposed(w.0, w.1, &w.2),
                &transposed(w.0, w.1, &w0),
                &SvdOptions::default(),
            )
            .unwrap();
            let e = NormsEntry {
                spectral_norm: CertInterval::of_inari(d.spectral).unwrap(),
                frobenius_norm: CertInterval::of_inari(d.frobenius).unwrap(),
                norm_21_rows: CertInterval::of_inari(d.norm_21_rows).unwrap(),
            };
            let eighth = Rational::from((1, 8));
            assert_contains_rational(e.spectral_norm, &(s.clone() * &eighth), &format!("{k}"));
            assert_contains_sqrt_rational(e.frobenius_norm, &(f2.clone() / 64), &format!("{k} F"));
            assert_contains_rational(e.norm_21_rows, &(n21.clone() * &eighth), &format!("{k}"));
            e
        })
        .collect();
    let m = measures_entry(&norms, Some(&dists)).unwrap();
    let sum_f2: Rational = ws.iter().map(|x| x.2.clone()).sum();
    let sum_s2: Rational = ws.iter().map(|x| x.1.clone() * &x.1).sum();
    assert_contains_rational(
        m.frobenius_distance.unwrap(),
        &(sum_f2 / 64),
        "frobenius_distance",
    );
    assert_contains_rational(m.dist_spec_init.unwrap(), &(sum_s2 / 64), "dist_spec_init");
    let q = Rational::from(1296) * Rational::from((171, 64));
    assert_contains_bracket(m.log_spec_init.unwrap(), &ln_bracket(&q), "log_spec_init");
    let b = Rational::from((36 * 343, 8));
    assert_contains_rational(m.bartlett_init.unwrap(), &b, "bartlett_init");
    assert_contains_bracket(
        m.log_bartlett_init.unwrap(),
        &ln_bracket(&b),
        "log_bartlett_init",
    );
}

#[test]
fn an_inexact_float_difference_is_widened_to_contain_the_exact_distance() {
    // 1 - 2^-60 is not a binary64 number: fl(1 - 2^-60) = 1, and the
    // TwoSum error -2^-60 widens the enclosures (L25 c).
    let t = 2f64.powi(-60);
    let w = [1.0, 0.0, 0.0, 1.0];
    let w0 = [t, 0.0, 0.0, 0.0];
    let d = certify_distance_norms(
        &transposed(2, 2, &w),
        &transposed(2, 2, &w0),
        &SvdOptions::default(),
    )
    .unwrap();
    let e = Rational::from(1) - Rational::from_f64(t).unwrap();
    let iv = |x: inari::Interval| CertInterval::of_inari(x).unwrap();
    // sigma_1 = 1 (diag(1 - 2^-60, 1)), ||D||_F^2 = e^2 + 1, rows: e + 1.
    assert_contains_rational(iv(d.spectral), &Rational::from(1), "spectral");
    assert_contains_sqrt_rational(iv(d.frobenius), &(e.clone() * &e + 1), "Frobenius");
    assert_contains_rational(iv(d.norm_21_rows), &(e + 1), "rows (2,1)");
}

#[test]
fn a_zero_distance_leaves_the_init_logs_unstated() {
    let ws = exact_weights();
    let norms: Vec<NormsEntry> = ws.iter().map(|x| certified(&x.0)).collect();
    let zero = NormsEntry {
        spectral_norm: CertInterval::point(0.0),
        frobenius_norm: CertInterval::point(0.0),
        norm_21_rows: CertInterval::point(0.0),
    };
    let m = measures_entry(&norms, Some(&vec![zero; norms.len()])).unwrap();
    assert_eq!(m.frobenius_distance, Some(CertInterval::point(0.0)));
    assert!(m.log_spec_init.is_none() && m.log_bartlett_init.is_none());
    assert!(m.bartlett_init.unwrap().contains(&CertInterval::point(0.0)));
}

/// Regression (issue 33): the measures squared sigma_1 and `||W||_F` in
/// binary64, so norms of 2^-600 and 2^601 made every log measure
/// non-finite (and the run fail). Evaluated in log space, each measure
/// contains its exact value: prod s^2 = 4, prod F^2 = 64, sum F^2/s^2 = 8,
/// bartlett^2 = 512; `param_norm` (about 2^1204) is absent with the reason.
#[test]
fn measures_squared_in_binary64_were_not_finite_at_extreme_norms() {
    let ws = [
        scaled_identity(4, 2f64.powi(-600)),
        scaled_identity(4, 2f64.powi(601)),
    ];
    let norms: Vec<NormsEntry> = ws.iter().map(certified).collect();
    let m = measures_entry(&norms, None).unwrap();
    let q = |x: u32| Rational::from(x);
    let lp = m.log_prod_of_spec.unwrap();
    assert_contains_bracket(lp, &ln_bracket(&q(4)), "log_prod_of_spec");
    let ls = m.log_sum_of_spec.unwrap();
    assert_contains_bracket(ls, &ln_sum_bracket(2, &q(4)), "log_sum_of_spec");
    let lf = m.log_prod_of_fro.unwrap();
    assert_contains_bracket(lf, &ln_bracket(&q(64)), "log_prod_of_fro");
    let lsf = m.log_sum_of_fro.unwrap();
    assert_contains_bracket(lsf, &ln_sum_bracket(2, &q(64)), "log_sum_of_fro");
    let lo = m.log_spec_orig.unwrap();
    assert_contains_bracket(lo, &ln_bracket(&q(32)), "log_spec_orig");
    assert_contains_sqrt_rational(m.bartlett.unwrap(), &q(512), "bartlett");
    let (l, h) = ln_bracket(&q(512));
    let half = (l / 2u32, h / 2u32); // exact halving
    assert_contains_bracket(m.log_bartlett.unwrap(), &half, "log_bartlett");
    assert!(m.param_norm.is_none());
    assert!(
        m.absent["param_norm"].contains("binary64"),
        "{:?}",
        m.absent
    );
    assert_eq!(m.absent.len(), 1, "{:?}", m.absent);
}

/// Regression (issue 33): one all-zero raw weight made every measure
/// fail. The measures that are -inf or undefined are absent, with the
/// reason naming the weight (`raw_weights[5]`); `param_norm` contains its
/// exact value; with an initialisation, the distances' sums are stated.
#[test]
fn one_zero_weight_made_every_measure_fail() {
    let ws = exact_weights();
    let mut norms: Vec<NormsEntry> = ws.iter().map(|x| certified(&x.0)).collect();
    norms.push(certified(&scaled_identity(4, 0.0)));
    let sum_f2: Rational = ws.iter().map(|x| x.2.clone()).sum();
    let m = measures_entry(&norms, Some(&norms)).unwrap();
    assert_contains_rational(m.param_norm.unwrap(), &sum_f2, "param_norm");
    assert_contains_rational(m.frobenius_distance.unwrap(), &sum_f2, "frobenius_distance");
    assert_contains_rational(
        m.dist_spec_init.unwrap(),
        &Rational::from((129, 4)),
        "dist_spec_init",
    );
    for k in [
        "log_prod_of_spec",
        "log_sum_of_spec",
        "log_prod_of_fro",
        "log_sum_of_fro",
        "log_spec_orig",
        "bartlett",
        "log_bartlett",
        "log_spec_init",
        "bartlett_init",
        "log_bartlett_init",
    ] {
        assert!(
            m.absent[k].contains("raw_weights[5]"),
            "{k}: {:?}",
            m.absent
        );
    }
    assert_eq!(m.stated().len(), 3, "{:?}", m.stated());
}

/// The bundled model's certificate with measures, built once per test.
fn bundled_certificate() -> Certificate {
    let opts = CertifyOptions::default();
    let (mut cert, _) = certify_run(&bundled(), &opts, &RunScope::default(), &NoProgress)
        .unwrap()
        .and_then(Run::into_certificate)
        .into_result()
        .unwrap();
    certify_measures(&bundled(), None, &opts, &NoProgress)
        .unwrap()
        .into_result()
        .unwrap()
        .attach(&mut cert);
    cert
}

/// Consistency, not soundness: the certified norms and measures of the
/// bundled MiniLM agree with a float64 evaluation (nalgebra's SVD, plain
/// sums) within their width plus a float64 error margin of 1e-9 relative
/// (the float64 SVD and sums are accurate to a few hundred ulps of
/// `||W||`, about 1e-13 relative, for these 384 x 1536 matrices; the
/// measures add d = 36 terms of them).
#[test]
fn bundled_measures_agree_with_a_float64_evaluation() {
    use specbound::io::checkpoint::Checkpoint;
    let cert = bundled_certificate();
    let raw = cert.raw_weights.as_ref().unwrap();
    let m = cert.measures.as_ref().unwrap();
    assert_eq!((raw.len(), m.d), (36, 36));
    let ck = Checkpoint::open(&bundled()).unwrap();
    let arch = specbound::arch::detect(&ck, &Default::default()).unwrap();
    let near = |x: CertInterval, v: f64, what: &str| {
        let margin = 1e-9 * v.abs().max(1.0);
        assert!(
            x.lo - margin <= v && v <= x.hi + margin,
            "{what}: [{:e}, {:e}] and the float64 {v:e}",
            x.lo,
            x.hi
        );
    };
    let roles = ["query", "key", "value", "output", "ffn_in", "ffn_out"];
    let mut f64_norms = Vec::new();
    for l in 0..arch.layers {
        for w in specbound::arch::extract_raw_layer(&ck, &arch, l).unwrap() {
            let at = &w.transposed; // W^T: in x out
            let m = nalgebra::DMatrix::from_row_slice(at.rows, at.cols, &at.data);
            let s = m.singular_values().max();
            let f = m.norm();
            let rows: f64 = m.column_iter().map(|c| c.norm()).sum();
            f64_norms.push((s, f, rows));
        }
    }
    for (k, (e, &(s, f, n))) in raw.iter().zip(&f64_norms).enumerate() {
        assert_eq!(e.layer, k / 6);
        assert_eq!(e.role, roles[k % 6]);
        near(e.spectral_norm, s, &format!("{k} spectral"));
        near(e.frobenius_norm, f, &format!("{k} Frobenius"));
        near(e.norm_21_rows, n, &format!("{k} rows (2,1)"));
    }
    let d = 36.0f64;
    let ls: f64 = f64_norms.iter().map(|x| (x.0 * x.0).ln()).sum();
    let lf: f64 = f64_norms.iter().map(|x| (x.1 * x.1).ln()).sum();
    let pn: f64 = f64_norms.iter().map(|x| x.1 * x.1).sum();
    let ratio: f64 = f64_norms.iter().map(|x| (x.1 / x.0).powi(2)).sum();
    let t: f64 = f64_norms.iter().map(|x| (x.2 / x.0).powf(2.0 / 3.0)).sum();
    let prod: f64 = f64_norms.iter().map(|x| x.0).product();
    near(m.log_prod_of_spec.unwrap(), ls, "log_prod_of_spec");
    near(
        m.log_sum_of_spec.unwrap(),
        d.ln() + ls / d,
        "log_sum_of_spec",
    );
    near(m.log_prod_of_fro.unwrap(), lf, "log_prod_of_fro");
    near(m.log_sum_of_fro.unwrap(), d.ln() + lf / d, "log_sum_of_fro");
    near(m.param_norm.unwrap(), pn, "param_norm");
    near(m.log_spec_orig.unwrap(), ls + ratio.ln(), "log_spec_orig");
    near(m.bartlett.unwrap(), prod * t.powf(1.5), "bartlett");
    near(
        m.log_bartlett.unwrap(),
        prod.ln() + 1.5 * t.ln(),
        "log_bartlett",
    );

    // The section reads back, validates against the schema, and verifies.
    let json = cert.to_json_pretty();
    let back = Certificate::parse(json.as_bytes(), "cert.json").unwrap();
    assert_eq!(back, cert);
    assert_eq!(back.version, 2);
    let schema: serde_json::Value = serde_json::from_slice(
        &std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/certificate.schema.json"))
            .unwrap(),
    )
    .unwrap();
    common::schema::validate(&schema, &serde_json::from_str(&json).unwrap()).unwrap();
    let v = verify_internal(&cert);
    assert_eq!(v.answer(), Answer::Holds, "{:?}", v.failure);

    // Every tampered measure fails verify, naming it.
    let names: Vec<&str> = m.stated().into_iter().map(|(k, _)| k).collect();
    for name in names {
        let mut bad = cert.clone();
        let ms = bad.measures.as_mut().unwrap();
        let slot = measure_slot(ms, name);
        let w = (slot.hi - slot.lo).max(slot.hi.abs() * 1e-12);
        *slot = CertInterval {
            lo: slot.hi + 10.0 * w,
            hi: slot.hi + 20.0 * w,
        };
        let v = verify_internal(&bad);
        let why = v.failure.expect("a tampered measure fails");
        assert!(why.contains(&format!("$.measures.{name}")), "{why}");
    }
    // So does a tampered raw norm.
    let mut bad = cert.clone();
    bad.raw_weights.as_mut().unwrap()[3].spectral_norm.lo *= 2.0;
    bad.raw_weights.as_mut().unwrap()[3].spectral_norm.hi *= 2.0;
    assert!(verify_internal(&bad).failure.is_some());
    // An absent measure that is finite fails too.
    let mut bad = cert.clone();
    bad.measures.as_mut().unwrap().bartlett = None;
    let why = verify_internal(&bad).failure.unwrap();
    assert!(why.contains("$.measures.bartlett: absent"), "{why}");

    // Versions: measures need version 2, version 2 needs measures.
    let mut v1 = cert.clone();
    v1.version = 1;
    let e = Certificate::parse(v1.to_json_pretty().as_bytes(), "c.json").unwrap_err();
    assert!(e.to_string().contains("$.version"), "{e}");
    let mut bare = cert.clone();
    bare.raw_weights = None;
    bare.measures = None;
    let e = Certificate::parse(bare.to_json_pretty().as_bytes(), "c.json").unwrap_err();
    assert!(e.to_string().contains("$.version"), "{e}");
    bare.version = 1;
    Certificate::parse(bare.to_json_pretty().as_bytes(), "c.json").unwrap();
}

fn measure_slot<'a>(m: &'a mut MeasuresEntry, name: &str) -> &'a mut CertInterval {
    match name {
        "log_prod_of_spec" => m.log_prod_of_spec.as_mut().unwrap(),
        "log_sum_of_spec" => m.log_sum_of_spec.as_mut().unwrap(),
        "log_prod_of_fro" => m.log_prod_of_fro.as_mut().unwrap(),
        "log_sum_of_fro" => m.log_sum_of_fro.as_mut().unwrap(),
        "param_norm" => m.param_norm.as_mut().unwrap(),
        "log_spec_orig" => m.log_spec_orig.as_mut().unwrap(),
        "bartlett" => m.bartlett.as_mut().unwrap(),
        "log_bartlett" => m.log_bartlett.as_mut().unwrap(),
        other => panic!("no init measure here: {other}"),
    }
}

#[test]
fn init_of_another_architecture_is_refused_in_one_line() {
    // The bundled weights under a config saying 2 layers: another architecture.
    let dir = common::process_scratch().join("measures");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        bundled().join("model.safetensors"),
        dir.join("model.safetensors"),
    )
    .unwrap();
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bundled().join("config.json")).unwrap()).unwrap();
    config["num_hidden_layers"] = 2.into();
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let out = common::run(&[
        "certify",
        "-q",
        "--init",
        dir.to_str().unwrap(),
        bundled().to_str().unwrap(),
    ]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(
            "the initialisation is not the model's architecture: layers 2 (the model's: 6)"
        ),
        "{err}"
    );
}

/// The raw weights of the bundled MiniLM's first layer re-emitted as a
/// one-layer GPT-NeoX (`query_key_value` interleaved per head, `[q_h; k_h;
/// v_h]` for each head, as `tests/architectures.rs` re-emits it) have
/// exactly the norms and measures of the same layer in BERT's names: the
/// de-interleaved `W_Q`, `W_K`, `W_V` are the BERT matrices. A split of
/// the fused tensor in thirds would give other matrices, other norms.
#[test]
fn gpt_neox_fused_per_head_gives_the_bert_measures_exactly() {
    use specbound::io::checkpoint::Checkpoint;
    let (n, i, dh, heads) = (384usize, 1536usize, 32usize, 12usize);
    let ck = Checkpoint::open(&bundled()).unwrap();
    let names = [
        "attention.self.query",
        "attention.self.key",
        "attention.self.value",
        "attention.output.dense",
        "intermediate.dense",
        "output.dense",
    ];
    let w: Vec<DenseMatrix> = names
        .iter()
        .map(|t| {
            ck.read(&format!("encoder.layer.0.{t}.weight"))
                .unwrap()
                .matrix
        })
        .collect();
    let base = common::process_scratch().join("measures-neox");
    let write = |name: &str, ts: Vec<(String, &DenseMatrix)>, cfg: serde_json::Value| {
        let d = base.join(name);
        std::fs::create_dir_all(&d).unwrap();
        common::write_safetensors(&d.join("model.safetensors"), &ts, "F32");
        std::fs::write(d.join("config.json"), cfg.to_string()).unwrap();
        d
    };
    let bert = write(
        "bert",
        names
            .iter()
            .zip(&w)
            .map(|(t, m)| (format!("encoder.layer.0.{t}.weight"), m))
            .collect(),
        serde_json::json!({"model_type": "bert", "num_hidden_layers": 1, "hidden_size": n,
                           "num_attention_heads": heads, "intermediate_size": i}),
    );
    // [q_0; k_0; v_0; q_1; ...]: head h's rows of each of W_Q, W_K, W_V.
    let mut data = Vec::with_capacity(3 * n * n);
    for h in 0..heads {
        for m in &w[..3] {
            data.extend_from_slice(&m.data[h * dh * n..(h + 1) * dh * n]);
        }
    }
    let qkv = DenseMatrix {
        rows: 3 * n,
        cols: n,
        data,
    };
    let p = "gpt_neox.layers.0.";
    let neox = write(
        "neox",
        vec![
            (format!("{p}attention.query_key_value.weight"), &qkv),
            (format!("{p}attention.dense.weight"), &w[3]),
            (format!("{p}mlp.dense_h_to_4h.weight"), &w[4]),
            (format!("{p}mlp.dense_4h_to_h.weight"), &w[5]),
        ],
        serde_json::json!({"model_type": "gpt_neox", "num_hidden_layers": 1, "hidden_size": n,
                           "num_attention_heads": heads, "intermediate_size": i,
                           "hidden_act": "gelu", "use_parallel_residual": true,
                           "rotary_pct": 0.25}),
    );
    let opts = CertifyOptions::default();
    let measured = |d: &Path| {
        certify_measures(d, None, &opts, &NoProgress)
            .unwrap()
            .into_result()
            .unwrap()
    };
    let (b, x) = (measured(&bert), measured(&neox));
    let _ = std::fs::remove_dir_all(&base);
    assert_eq!(x.raw_weights.len(), 6);
    for (rb, rx) in b.raw_weights.iter().zip(&x.raw_weights) {
        assert_eq!(
            (rb.role.as_str(), rb.rows, rb.cols),
            (rx.role.as_str(), rx.rows, rx.cols)
        );
        assert_eq!(
            (rb.spectral_norm, rb.frobenius_norm, rb.norm_21_rows),
            (rx.spectral_norm, rx.frobenius_norm, rx.norm_21_rows),
            "{}",
            rx.role
        );
    }
    // The key's blocks are found where the interleaving puts them.
    assert!(
        x.raw_weights[1]
            .tensor
            .contains("query_key_value.weight[32:64, :]"),
        "{}",
        x.raw_weights[1].tensor
    );
    assert_eq!(b.measures, x.measures);
}
