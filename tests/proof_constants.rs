//! Ties the Rust constants to the theorems machine-checked in `proofs/coq/`
//! (`./proofs/check`). Each table entry is checked against exact rational
//! arithmetic (rug) using the closed forms proved there.

mod common;

use rug::Rational;
use specbound::linalg::{gram, rounding};

#[test]
fn unit_roundoff_and_eta_are_the_coq_definitions() {
    // Binary64.v: u = bpow radix2 (-53), eta = bpow radix2 (-1074).
    assert_eq!(
        Rational::from_f64(rounding::U).unwrap(),
        common::pow2_rational(-53)
    );
    assert_eq!(
        Rational::from_f64(rounding::ETA).unwrap(),
        common::pow2_rational(-1074)
    );
}

#[test]
fn gamma_ru_bounds_the_coq_gamma() {
    // Binary64.v: gamma n = INR n * u / (1 - INR n * u), and
    // Theorem gamma_closed_form: gamma n = n / (2^53 - n) for n < 2^53.
    // DotProductError.v (Theorem dot_product_error) needs n u < 1/2, i.e.
    // n < 2^52; rounding::gamma_ru returns +inf from n u >= 1/2 on.
    let two53 = rug::Integer::from(1) << 53u32;
    let table: [u64; 16] = [
        1,
        2,
        3,
        4,
        7,
        512,
        513,
        1000,
        4096,
        65_536,
        1 << 20,
        11_008,
        1 << 30,
        (1 << 40) + 1,
        (1 << 51) + 3,
        (1 << 52) - 1,
    ];
    for &n in &table {
        let g = rounding::gamma_ru(n as usize);
        assert!(g.is_finite(), "gamma_ru({n}) not finite");
        let exact = Rational::from((rug::Integer::from(n), two53.clone() - n));
        let got = Rational::from_f64(g).unwrap();
        assert!(got >= exact, "gamma_ru({n}) = {g:e} is below gamma_{n}");
        // and it is tight: within 4 ulps of the exact value (relative 2^-50).
        let slack = exact.clone() * (Rational::from(1) + common::pow2_rational(-50));
        assert!(got <= slack, "gamma_ru({n}) = {g:e} is far above gamma_{n}");
    }
    assert!(rounding::gamma_ru(1 << 52).is_infinite());
    assert!(rounding::gamma_ru(usize::MAX).is_infinite());
}

#[test]
fn nonneg_sum_bounds_match_the_coq_enclosure() {
    // RnDirectedScalar.v, Theorem nonneg_sum_enclosure:
    // (S - n eta)/(1 + gamma_n) <= s <= (S + n eta)/(1 - gamma_n).
    for &(s, n) in &[
        (1.0f64, 1usize),
        (3.5, 7),
        (1e-310, 4),
        (12345.678, 100_000),
    ] {
        let exact_g = Rational::from((n as u64, (rug::Integer::from(1) << 53u32) - n as u64));
        let sr = Rational::from_f64(s).unwrap();
        let neta = Rational::from(n as u64) * common::pow2_rational(-1074);
        let hi = (sr.clone() + &neta) / (Rational::from(1) - &exact_g);
        let lo = (sr - &neta) / (Rational::from(1) + &exact_g);
        let up = Rational::from_f64(rounding::nonneg_sum_ru(s, n)).unwrap();
        let dn = Rational::from_f64(rounding::nonneg_sum_rd(s, n)).unwrap();
        assert!(up >= hi, "nonneg_sum_ru({s:e}, {n}) below the Coq bound");
        assert!(
            dn <= lo.max(Rational::new()),
            "nonneg_sum_rd({s:e}, {n}) above the Coq bound"
        );
    }
}

#[test]
fn exact_gram_threshold_is_the_coq_one() {
    // ExactGram.v, Theorem exact_gram_f16: grid 2^-24, column norms^2 <= S < 32.
    let col = |ones: usize| {
        let mut v = vec![1.0f64; ones];
        v.push(2f64.powi(-24));
        faer::Mat::from_fn(v.len(), 1, |i, _| v[i])
    };
    // 31 + 2^-48 < 32: exact.
    assert!(gram::gram_is_exact(col(31).as_ref()));
    // 32 + 2^-48 >= 32: the theorem does not apply and the test declines.
    assert!(!gram::gram_is_exact(col(32).as_ref()));
}
