//! Readable numbers for the HTML report and the figures' captions: the one
//! place that turns a certified interval into decimals for a reader (the
//! CSV tables and the certificate keep the exact binary64 ends instead).

use rug::float::Round;
use rug::Float;

use crate::certificate::CertInterval;

/// Significant digits shown for an interval whose ends agree to fewer digits.
const MIN_DIGITS: usize = 6;
/// At most this many (enough to tell any two distinct binary64 numbers apart).
const MAX_DIGITS: usize = 17;

/// `x` in decimal scientific notation with `digits` significant digits,
/// rounded towards `-inf` (`round = Down`) or `+inf` (`Up`).
///
/// *Guarantee:* the decimal printed is `<= x` (Down) or `>= x` (Up): MPFR
/// converts the exact binary64 value with the requested rounding
/// (`proofs/mpfr-directed.md`, L13 item 6).
pub fn directed(x: f64, digits: usize, round: Round) -> String {
    if x == 0.0 {
        return "0".into();
    }
    // 53 bits hold every binary64 number exactly.
    let f = Float::with_val(53, x);
    let s = f.to_string_radix_round(10, Some(digits.clamp(1, MAX_DIGITS)), round);
    tidy(&s)
}

/// MPFR writes `1.2345e3` or `-1.2345e-7`; drop trailing zeros of the
/// mantissa and a `+`/leading-zero-free exponent (`e0` removed).
fn tidy(s: &str) -> String {
    let (mant, exp) = match s.find('e') {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let mant = if mant.contains('.') {
        mant.trim_end_matches('0').trim_end_matches('.')
    } else {
        mant
    };
    match exp.map(|e| e.trim_start_matches('+')) {
        Some(e) if e.parse::<i32>().ok() != Some(0) => format!("{mant}e{e}"),
        _ => mant.to_string(),
    }
}

/// A certified interval for a reader: `[lo, hi]` with the lower end
/// rounded down and the upper end rounded up in decimal, with as many
/// significant digits (at least 6, at most 17) as it takes for the two ends
/// to differ, so the printed interval contains the certified one and hence
/// the exact value. A point interval prints as one number.
///
/// *Guarantee:* the printed decimal interval contains `[x.lo, x.hi]`
/// (outward directed conversion, `proofs/mpfr-directed.md`, L13 item 6).
/// Swap this function to change how every interval of the report reads.
pub fn interval(x: &CertInterval) -> String {
    if x.lo == x.hi {
        // Exactly representable and exact: print it as the shortest decimal
        // only when that decimal is the number itself (small integers, 0, 1).
        if x.lo == x.lo.trunc() && x.lo.abs() < 1e15 {
            return format!("{}", x.lo as i64);
        }
    }
    let mut digits = MIN_DIGITS;
    loop {
        let lo = directed(x.lo, digits, Round::Down);
        let hi = directed(x.hi, digits, Round::Up);
        if lo != hi || digits >= MAX_DIGITS {
            return if lo == hi {
                lo
            } else {
                format!("[{lo}, {hi}]")
            };
        }
        digits += 1;
    }
}

/// An approximate number for axis labels and prose (`1.23e4`, `0.5`): 4
/// significant digits, no claim of enclosure.
pub fn approx(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let a = x.abs();
    if (1e-3..1e5).contains(&a) {
        let s = format!("{x:.4}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        s.to_string()
    } else {
        let s = format!("{x:.3e}");
        tidy(&s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rug::ops::Pow;
    use rug::Rational;

    fn dec(s: &str) -> Rational {
        let (m, e) = match s.find('e') {
            Some(i) => (&s[..i], s[i + 1..].parse::<i32>().unwrap()),
            None => (s, 0),
        };
        let neg = m.starts_with('-');
        let m = m.trim_start_matches('-');
        let (int, frac) = m.split_once('.').unwrap_or((m, ""));
        let digits: rug::Integer = format!("{int}{frac}").parse().unwrap();
        let scale = e - frac.len() as i32;
        let ten = rug::Integer::from(10);
        let mut v = Rational::from(digits);
        if scale >= 0 {
            v *= Rational::from(ten.pow(scale as u32));
        } else {
            v /= Rational::from(ten.pow((-scale) as u32));
        }
        if neg {
            -v
        } else {
            v
        }
    }

    fn ends(s: &str) -> (String, String) {
        match s.strip_prefix('[') {
            Some(r) => {
                let (a, b) = r.trim_end_matches(']').split_once(", ").unwrap();
                (a.into(), b.into())
            }
            None => (s.into(), s.into()),
        }
    }

    #[test]
    fn printed_interval_contains_the_certified_one() {
        let cases = [
            (2.057302973229744e4, 2.0573029732297677e4),
            (6.85367905253727e28, 6.8536790527015545e28),
            (0.1, 0.1),
            (1.0 / 3.0, 1.0 / 3.0),
            (-2.5e-300, 3.0e-310),
            (1.0, 1.0000000000000002),
            (123456.0, 123456.0),
            (5e-324, 1e-323),
        ];
        for (lo, hi) in cases {
            let s = interval(&CertInterval { lo, hi });
            let (a, b) = ends(&s);
            assert!(
                dec(&a) <= Rational::from_f64(lo).unwrap()
                    && Rational::from_f64(hi).unwrap() <= dec(&b),
                "{s} does not contain [{lo:e}, {hi:e}]"
            );
        }
    }

    #[test]
    fn ends_differ_when_the_interval_is_not_a_point() {
        let s = interval(&CertInterval {
            lo: 1.0,
            hi: 1.0000000000000002,
        });
        let (a, b) = ends(&s);
        assert_ne!(a, b, "{s}");
    }
}
