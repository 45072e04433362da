//! The one parser of exact decimals (`--l-phi`, `--schatten-p`, the audit's
//! `p`, and through [`ExactDecimal::to_rational`] the `l_phi` that `verify`
//! reads from a certificate).
//!
//! A decimal such as `1.13` or `1e-400` is read exactly, as the rational
//! number it denotes, never as its binary64 neighbour. The exponent and the
//! number of digits are bounded ([`DECIMAL_MAX_DIGITS`],
//! [`DECIMAL_MAX_EXPONENT`]) before any arithmetic, so that a hostile input
//! such as `1e999999999` is refused at once instead of costing a
//! 10^999999999 computation. Every sensible input lies far inside the limits:
//! binary64 spans about 1e-324 to 1e308, and 4096 digits are more than any
//! constant is written with.

use inari::Interval;
use rug::float::Round;
use rug::{Float, Integer, Rational};

/// Most digits accepted in the significand (before and after the point).
pub(crate) const DECIMAL_MAX_DIGITS: usize = 4096;

/// Largest `|e|` accepted in an exponent `e` of `1.5e-7` style notation.
pub(crate) const DECIMAL_MAX_EXPONENT: i64 = 4096;

/// A parsed decimal `(-1)^negative * digits * 10^exp10`, exactly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ExactDecimal {
    /// Sign (false for zero).
    pub negative: bool,
    /// The significand as an integer, without leading zeros ("0" for zero).
    pub digits: String,
    /// Decimal exponent of the last significand digit.
    pub exp10: i64,
}

/// Why a decimal was refused (one line, for error messages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecimalError(pub String);

impl std::fmt::Display for DecimalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DecimalError {}

impl std::str::FromStr for ExactDecimal {
    type Err = DecimalError;

    /// Parses `[+-]digits[.digits][(e|E)[+-]digits]` (at least one
    /// significand digit; `.5` and `5.` are accepted), surrounding white
    /// space ignored, with at most [`DECIMAL_MAX_DIGITS`] significand digits
    /// and an exponent of at most [`DECIMAL_MAX_EXPONENT`] in magnitude.
    fn from_str(text: &str) -> Result<Self, DecimalError> {
        let t = text.trim();
        let bad = || DecimalError(format!("'{}' is not a decimal number", shorten(t)));
        let (negative, rest) = match t.as_bytes().first() {
            Some(b'-') => (true, &t[1..]),
            Some(b'+') => (false, &t[1..]),
            _ => (false, t),
        };
        let (mant, exp) = match rest.find(['e', 'E']) {
            Some(i) => (&rest[..i], Some(&rest[i + 1..])),
            None => (rest, None),
        };
        let (int, frac) = match mant.find('.') {
            Some(i) => (&mant[..i], &mant[i + 1..]),
            None => (mant, ""),
        };
        let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if int.len() + frac.len() == 0 || !all_digits(int) || !all_digits(frac) {
            return Err(bad());
        }
        if int.len() + frac.len() > DECIMAL_MAX_DIGITS {
            return Err(DecimalError(format!(
                "'{}' has more than {DECIMAL_MAX_DIGITS} digits",
                shorten(t)
            )));
        }
        let e: i64 = match exp {
            None => 0,
            Some(s) => {
                let (eneg, edigits) = match s.as_bytes().first() {
                    Some(b'-') => (true, &s[1..]),
                    Some(b'+') => (false, &s[1..]),
                    _ => (false, s),
                };
                if edigits.is_empty() || !all_digits(edigits) {
                    return Err(bad());
                }
                let trimmed = edigits.trim_start_matches('0');
                // Compare as text first: no integer parse can overflow.
                let too_big = trimmed.len() > 5
                    || (!trimmed.is_empty()
                        && trimmed
                            .parse::<i64>()
                            .map_or(true, |v| v > DECIMAL_MAX_EXPONENT));
                if too_big {
                    return Err(DecimalError(format!(
                        "the exponent of '{}' is out of range (at most {DECIMAL_MAX_EXPONENT} in magnitude)",
                        shorten(t)
                    )));
                }
                let v: i64 = if trimmed.is_empty() {
                    0
                } else {
                    trimmed.parse().expect("checked above")
                };
                if eneg {
                    -v
                } else {
                    v
                }
            }
        };
        let joined = format!("{int}{frac}");
        let digits = joined.trim_start_matches('0');
        let (digits, negative) = if digits.is_empty() {
            ("0".to_string(), false)
        } else {
            (digits.to_string(), negative)
        };
        Ok(Self {
            negative,
            digits,
            exp10: e - frac.len() as i64,
        })
    }
}

/// At most 40 characters of `t`, for messages about hostile inputs.
fn shorten(t: &str) -> String {
    if t.chars().count() <= 40 {
        t.to_string()
    } else {
        format!("{}...", t.chars().take(40).collect::<String>())
    }
}

impl ExactDecimal {
    /// Whether the number is exactly zero.
    pub(crate) fn is_zero(&self) -> bool {
        self.digits == "0"
    }

    /// The exact value as a rational number.
    pub(crate) fn to_rational(&self) -> Rational {
        let m: Integer = self.digits.parse().expect("digits only");
        let m = if self.negative { -m } else { m };
        let p = Integer::from(Integer::u_pow_u(10, self.exp10.unsigned_abs() as u32));
        if self.exp10 >= 0 {
            Rational::from(m * p)
        } else {
            Rational::from((m, p))
        }
    }

    /// The tightest binary64 interval containing the value; `None` when the
    /// value lies outside the finite binary64 range.
    ///
    /// *Guarantee: certified enclosure* of the exact rational, by MPFR's
    /// directed conversion ([`proofs/mpfr-directed.md`](crate::proofs::mpfr_directed), L13).
    pub(crate) fn to_interval(&self) -> Option<Interval> {
        let q = self.to_rational();
        // 53 bits with an unbounded exponent, then one more directed rounding
        // into binary64 (subnormals included): rounding twice in the same
        // direction gives the same bound, because binary64 numbers are also
        // 53-bit numbers.
        let lo = Float::with_val_round(53, &q, Round::Down)
            .0
            .to_f64_round(Round::Down);
        let hi = Float::with_val_round(53, &q, Round::Up)
            .0
            .to_f64_round(Round::Up);
        (lo.is_finite() && hi.is_finite())
            .then(|| Interval::try_from((lo, hi)).ok())
            .flatten()
    }

    /// The number as a JSON number literal denoting exactly the same value:
    /// positional when that is short (`.5` becomes `0.5`, `+2.50` becomes
    /// `2.5`, `1e3` becomes `1000`), otherwise `DIGITSeEXP` (`1e-400` stays
    /// `1e-400`).
    pub(crate) fn to_json_literal(&self) -> String {
        if self.is_zero() {
            return "0".into();
        }
        let sign = if self.negative { "-" } else { "" };
        let trimmed = self.digits.trim_end_matches('0');
        let e = self.exp10 + (self.digits.len() - trimmed.len()) as i64;
        let d = trimmed;
        if (0..=20).contains(&e) {
            format!("{sign}{d}{}", "0".repeat(e as usize))
        } else if e < 0 && -e <= d.len() as i64 + 20 {
            let point = d.len() as i64 + e; // digits before the point
            if point > 0 {
                let (a, b) = d.split_at(point as usize);
                format!("{sign}{a}.{b}")
            } else {
                format!("{sign}0.{}{d}", "0".repeat((-point) as usize))
            }
        } else {
            format!("{sign}{d}e{e}")
        }
    }
}

/// The tightest interval containing the exact value of a decimal number
/// (`"1.13"` is 113/100, not its binary64 neighbour), or why there is none:
/// malformed, more digits or a larger exponent than the limits, or outside
/// the finite binary64 range.
///
/// *Guarantee: certified enclosure* (see [`ExactDecimal::to_interval`]).
#[cfg(test)]
pub(crate) fn decimal_interval(text: &str) -> Result<Interval, DecimalError> {
    let d: ExactDecimal = text.parse()?;
    d.to_interval().ok_or_else(|| {
        DecimalError(format!(
            "'{}' is outside the binary64 range",
            shorten(text.trim())
        ))
    })
}

/// The tightest interval of a decimal that must be positive; positivity is
/// decided on the decimal itself, so `1e-400` is positive although its
/// enclosure starts at 0.
///
/// *Guarantee: certified enclosure* (see [`ExactDecimal::to_interval`]).
pub(crate) fn positive_decimal_interval(text: &str) -> Result<Interval, DecimalError> {
    let d: ExactDecimal = text.parse()?;
    if d.negative || d.is_zero() {
        return Err(DecimalError(format!(
            "must be a positive number, got '{}'",
            shorten(text.trim())
        )));
    }
    d.to_interval().ok_or_else(|| {
        DecimalError(format!(
            "'{}' is outside the binary64 range",
            shorten(text.trim())
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_values_and_limits() {
        let d: ExactDecimal = "1.13".parse().unwrap();
        assert_eq!(d.to_rational(), Rational::from((113, 100)));
        let d: ExactDecimal = "-.5e1".parse().unwrap();
        assert_eq!(d.to_rational(), Rational::from(-5));
        assert_eq!(d.to_json_literal(), "-5");
        let d: ExactDecimal = "1e-400".parse().unwrap();
        assert!(!d.is_zero());
        let iv = d.to_interval().unwrap();
        assert_eq!((iv.inf(), iv.sup()), (0.0, f64::from_bits(1)));
        assert_eq!(d.to_json_literal(), "1e-400");
        assert!("0.000".parse::<ExactDecimal>().unwrap().is_zero());
        for bad in [
            "", "e5", ".", "1e", "1e+", "--1", "1.2.3", "inf", "nan", "0x10", "1_0",
        ] {
            assert!(bad.parse::<ExactDecimal>().is_err(), "{bad}");
        }
        assert!("1e4096".parse::<ExactDecimal>().is_ok());
        assert!("1e4097".parse::<ExactDecimal>().is_err());
        assert!("1e999999999999999999999999"
            .parse::<ExactDecimal>()
            .is_err());
        assert!("1e-000000000000000000004".parse::<ExactDecimal>().is_ok());
        let d: ExactDecimal = "+007.50e+0".parse().unwrap();
        assert_eq!(d.to_json_literal(), "7.5");
        assert_eq!(d.to_rational(), Rational::from((15, 2)));
        assert!("1".repeat(4096).parse::<ExactDecimal>().is_ok());
        assert!("1".repeat(4097).parse::<ExactDecimal>().is_err());
        assert!(decimal_interval("1e400").is_err());
        for (t, lit) in [
            (".5", "0.5"),
            ("1e3", "1000"),
            ("0.001", "0.001"),
            ("12.3400", "12.34"),
            ("1e-400", "1e-400"),
            ("5e40", "5e40"),
            ("-0", "0"),
        ] {
            let d: ExactDecimal = t.parse().unwrap();
            assert_eq!(d.to_json_literal(), lit, "{t}");
            let back: ExactDecimal = lit.parse().unwrap();
            assert_eq!(back.to_rational(), d.to_rational(), "{t}");
        }
    }
}
