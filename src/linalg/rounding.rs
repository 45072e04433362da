//! Directed bounds from round-to-nearest arithmetic only.
//!
//! The FPU rounding mode is never changed. An upper (lower) bound of the
//! exact result of ONE correctly rounded operation is `next_up` (`next_down`)
//! of its round-to-nearest result; chains of such steps stay valid as long as
//! each step is monotone in its (already directed) inputs. Justification:
//! [`proofs/rn-directed-scalar.md`](crate::proofs::rn_directed_scalar) (L3) under [`proofs/assumptions.md`](crate::proofs::assumptions) (A0).
//!
//! Every helper returns a non-finite value when the bound overflows; callers
//! treat any non-finite bound as "inconclusive", never as a result.

/// Unit roundoff of binary64 in round-to-nearest, 2^-53.
pub const U: f64 = 1.0 / 9_007_199_254_740_992.0;
/// Smallest positive subnormal binary64 number, 2^-1074.
pub const ETA: f64 = f64::from_bits(1);

/// Upper bound of `a + b`.
#[inline]
pub(crate) fn add_ru(a: f64, b: f64) -> f64 {
    (a + b).next_up()
}
/// Upper bound of `a - b`.
#[inline]
pub(crate) fn sub_ru(a: f64, b: f64) -> f64 {
    (a - b).next_up()
}
/// Lower bound of `a - b`.
#[inline]
pub(crate) fn sub_rd(a: f64, b: f64) -> f64 {
    (a - b).next_down()
}
/// Upper bound of `a * b`.
#[inline]
pub(crate) fn mul_ru(a: f64, b: f64) -> f64 {
    (a * b).next_up()
}
/// Lower bound of `a * b`.
#[inline]
pub(crate) fn mul_rd(a: f64, b: f64) -> f64 {
    (a * b).next_down()
}
/// Upper bound of `a / b` (b != 0).
#[inline]
pub(crate) fn div_ru(a: f64, b: f64) -> f64 {
    (a / b).next_up()
}
/// Lower bound of `a / b` (b != 0).
#[inline]
pub(crate) fn div_rd(a: f64, b: f64) -> f64 {
    (a / b).next_down()
}
/// Upper bound of `sqrt(a)`, a >= 0.
#[inline]
pub(crate) fn sqrt_ru(a: f64) -> f64 {
    // NaN must propagate (f64::max would turn it into 0).
    if a.is_nan() {
        return f64::NAN;
    }
    a.max(0.0).sqrt().next_up()
}
/// Lower bound of `sqrt(a)`; 0 for a <= 0.
#[inline]
pub(crate) fn sqrt_rd(a: f64) -> f64 {
    if a.is_nan() {
        return f64::NAN;
    }
    if a <= 0.0 {
        0.0
    } else {
        a.sqrt().next_down().max(0.0)
    }
}

/// Upper bound of `gamma_k = k u / (1 - k u)`; `+inf` when `k u >= 1/2`.
pub fn gamma_ru(k: usize) -> f64 {
    let ku = mul_ru(k as f64, U);
    if ku >= 0.5 {
        return f64::INFINITY;
    }
    div_ru(ku, sub_rd(1.0, ku))
}

/// Upper bound of the exact sum of `k` nonnegative products whose
/// round-to-nearest evaluation (any order, FMA allowed) returned `computed`:
/// `s <= (computed + k eta) / (1 - gamma_k)` (L3 part b).
pub fn nonneg_sum_ru(computed: f64, k: usize) -> f64 {
    let g = gamma_ru(k);
    if !(g < 0.5) {
        return f64::INFINITY;
    }
    div_ru(add_ru(computed, mul_ru(k as f64, ETA)), sub_rd(1.0, g))
}

/// Lower bound of the exact sum of `k` nonnegative products whose
/// round-to-nearest evaluation returned `computed`:
/// `s >= (computed - k eta) / (1 + gamma_k)`, clipped at 0 (L3 part b).
pub fn nonneg_sum_rd(computed: f64, k: usize) -> f64 {
    let g = gamma_ru(k);
    if !g.is_finite() {
        return 0.0;
    }
    div_rd(sub_rd(computed, mul_ru(k as f64, ETA)), add_ru(1.0, g)).max(0.0)
}

/// Sum of squares of `x`, round-to-nearest (the raw value for the bounds above).
#[inline]
pub(crate) fn sum_sq(x: &[f64]) -> f64 {
    let mut acc = [0.0f64; 4];
    let mut chunks = x.chunks_exact(4);
    for c in &mut chunks {
        acc[0] = c[0].mul_add(c[0], acc[0]);
        acc[1] = c[1].mul_add(c[1], acc[1]);
        acc[2] = c[2].mul_add(c[2], acc[2]);
        acc[3] = c[3].mul_add(c[3], acc[3]);
    }
    for &v in chunks.remainder() {
        acc[0] = v.mul_add(v, acc[0]);
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

#[cfg(test)]
/// Round-to-nearest `sum |x_i|` in four lanes (bounded by L3 b, which
/// holds for any summation order).
pub(crate) fn sum_abs(x: &[f64]) -> f64 {
    let mut acc = [0.0f64; 4];
    let mut chunks = x.chunks_exact(4);
    for c in &mut chunks {
        for l in 0..4 {
            acc[l] += c[l].abs();
        }
    }
    for &v in chunks.remainder() {
        acc[0] += v.abs();
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

/// `(sum_sq(x), sum_abs(x))` in one pass, each summed in the same order
/// as those two functions alone (the same bits, bounded by L3 b).
pub(crate) fn sum_sq_and_abs(x: &[f64]) -> (f64, f64) {
    sum_sq_and_abs_many([x])[0]
}

/// [`sum_sq_and_abs`] of `K` slices of one length side by side: each
/// slice's two sums in the order of that function alone (the same bits);
/// the `K` independent chains only hide each other's latency.
pub(crate) fn sum_sq_and_abs_many<const K: usize>(xs: [&[f64]; K]) -> [(f64, f64); K] {
    let len = xs[0].len();
    assert!(xs.iter().all(|x| x.len() == len), "slices of one length");
    let (mut sq, mut ab) = ([[0.0f64; 4]; K], [[0.0f64; 4]; K]);
    let body = len / 4 * 4;
    for i in (0..body).step_by(4) {
        for q in 0..K {
            let c = &xs[q][i..i + 4];
            for l in 0..4 {
                sq[q][l] = c[l].mul_add(c[l], sq[q][l]);
                ab[q][l] += c[l].abs();
            }
        }
    }
    std::array::from_fn(|q| {
        let (mut s, mut a) = (sq[q], ab[q]);
        for &v in &xs[q][body..] {
            s[0] = v.mul_add(v, s[0]);
            a[0] += v.abs();
        }
        ((s[0] + s[1]) + (s[2] + s[3]), (a[0] + a[1]) + (a[2] + a[3]))
    })
}

/// Upper bound of the Euclidean norm of `x` (exact entries).
pub(crate) fn norm2_ru(x: &[f64]) -> f64 {
    sqrt_ru(nonneg_sum_ru(sum_sq(x), x.len()))
}

/// Lower bound of the Euclidean norm of `x` (exact entries).
pub(crate) fn norm2_rd(x: &[f64]) -> f64 {
    sqrt_rd(nonneg_sum_rd(sum_sq(x), x.len()))
}

/// Multiplies by 2^k exactly when possible (k may exceed the exponent range
/// of a single power of two). Returns `None` if the result is not exact.
pub(crate) fn scale_pow2_exact(x: f64, k: i32) -> Option<f64> {
    let y = scale_pow2_rn(x, k);
    if y.is_finite() && scale_pow2_rn(y, -k) == x {
        Some(y)
    } else {
        None
    }
}

/// Round-to-nearest `x * 2^k` by at most three exact power-of-two steps.
pub(crate) fn scale_pow2_rn(mut x: f64, mut k: i32) -> f64 {
    // Steps of one sign, each an exact normal power of two (L2 part e).
    while k != 0 {
        let step = k.clamp(-1000, 1000);
        x *= pow2(step);
        k -= step;
    }
    x
}

/// The exact power of two `2^k` for `-1022 <= k <= 1023` (built from its bits).
#[inline]
pub(crate) fn pow2(k: i32) -> f64 {
    debug_assert!((-1022..=1023).contains(&k));
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// Upper bound of `x * 2^k` (L2).
pub(crate) fn scale_pow2_ru(x: f64, k: i32) -> f64 {
    match scale_pow2_exact(x, k) {
        Some(y) => y,
        None => scale_pow2_rn(x, k).next_up(),
    }
}

/// Lower bound of `x * 2^k` (L2), never below 0 for x >= 0.
pub(crate) fn scale_pow2_rd(x: f64, k: i32) -> f64 {
    match scale_pow2_exact(x, k) {
        Some(y) => y,
        None => {
            let y = scale_pow2_rn(x, k).next_down();
            if x >= 0.0 {
                y.max(0.0)
            } else {
                y
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regression_nan_is_not_masked_by_directed_sqrt() {
        // f64::max(NaN, 0) = 0 once turned a NaN residual into a tiny bound.
        assert!(sqrt_ru(f64::NAN).is_nan());
        assert!(sqrt_rd(f64::NAN).is_nan());
        assert!(!nonneg_sum_ru(f64::NAN, 3).is_finite());
    }

    quickcheck::quickcheck! {
        fn sum_sq_and_abs_has_the_bits_of_the_two_sums(x: Vec<f64>) -> bool {
            let x: Vec<f64> = x.into_iter().filter(|v| v.is_finite()).collect();
            let (sq, ab) = sum_sq_and_abs(&x);
            sq.to_bits() == sum_sq(&x).to_bits() && ab.to_bits() == sum_abs(&x).to_bits()
        }

        fn sum_sq_and_abs_many_has_the_bits_of_each_alone(x: Vec<f64>, len: u8) -> bool {
            let x: Vec<f64> = x.into_iter().filter(|v| v.is_finite()).collect();
            let len = (len as usize).min(x.len() / 3);
            let xs = [&x[..len], &x[len..2 * len], &x[2 * len..3 * len]];
            let sums = sum_sq_and_abs_many(xs);
            let same = sums.iter().zip(xs).all(|(&(s, a), x)| {
                (s.to_bits(), a.to_bits()) == (sum_sq(x).to_bits(), sum_abs(x).to_bits())
            });
            same
        }
    }

    #[test]
    fn constants_are_exact_powers_of_two() {
        assert_eq!(U, f64::EPSILON / 2.0);
        assert_eq!(ETA * 2f64.powi(1074 - 1000) * 2f64.powi(1000), 1.0);
    }

    #[test]
    fn directed_bounds_bracket_exact_rationals() {
        // 1/3 is not representable: the bounds must differ and bracket it.
        let lo = div_rd(1.0, 3.0);
        let hi = div_ru(1.0, 3.0);
        assert!(lo < hi);
        assert!((3.0f64).mul_add(lo, -1.0) < 0.0);
        assert!((3.0f64).mul_add(hi, -1.0) > 0.0);
    }

    #[test]
    fn scaling_detects_inexact_subnormals() {
        // 3 * 2^-1076 = 0.75 eta is not representable; 3 * 2^-1074 is.
        assert_eq!(scale_pow2_exact(3.0, -1076), None);
        assert_eq!(scale_pow2_exact(3.0, -1074), Some(3.0 * ETA));
        assert_eq!(scale_pow2_exact(1.0, -1074), Some(ETA));
        assert_eq!(scale_pow2_exact(ETA, 1074), Some(1.0));
        let up = scale_pow2_ru(3.0, -1076);
        let dn = scale_pow2_rd(3.0, -1076);
        assert!(dn == 0.0 && up >= ETA);
    }
}
