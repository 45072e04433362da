//! `L_phi`, the Lipschitz constant of the activation, typed once at the
//! edge: the exact positive decimal the user (or a certificate) wrote, kept
//! as written for the record, and an interval that contains its exact value
//! for the arithmetic. Everything past the fronts takes an [`LPhi`], so the
//! text is parsed in one place and compared nowhere else.

use std::fmt;
use std::str::FromStr;

use inari::Interval;

use crate::spectral::{positive_decimal_interval, DecimalError};

/// `L_phi` as an exact positive decimal.
///
/// *Guarantee: certified enclosure.* [`LPhi::interval`] contains the exact
/// value of the decimal [`LPhi::as_str`] (`"1.13"` is 113/100, not its
/// binary64 neighbour), by the bounded parser of `spectral::decimal` and a
/// directed conversion of the exact rational ([`proofs/mpfr-directed.md`](crate::proofs::mpfr_directed),
/// L13).
///
/// ```
/// use specbound::bounds::LPhi;
/// let l: LPhi = "1.13".parse().unwrap();
/// assert!(l.is_paper());
/// assert!(l.interval().inf() <= 1.13 && 1.13 <= l.interval().sup());
/// assert!(" 2 ".parse::<LPhi>().unwrap().as_str() == "2");
/// assert!("-1".parse::<LPhi>().is_err());
/// ```
#[derive(Clone, Debug)]
pub struct LPhi {
    text: String,
    value: Interval,
}

impl LPhi {
    /// The paper's GELU bound, `1.13` (`crate::arch::PAPER_L_PHI`), the
    /// default everywhere.
    pub fn paper() -> Self {
        crate::arch::PAPER_L_PHI
            .parse()
            .expect("the paper's L_phi is a positive decimal")
    }

    /// The decimal as written (surrounding white space removed).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// An interval containing the exact decimal (see the type's guarantee).
    pub fn interval(&self) -> Interval {
        self.value
    }

    /// Whether this is the paper's GELU bound as the paper writes it,
    /// `1.13` (the text, so that a user who writes another spelling has
    /// chosen the constant; [`crate::arch::Architecture::extensions`]).
    pub fn is_paper(&self) -> bool {
        self.text == crate::arch::PAPER_L_PHI
    }
}

impl FromStr for LPhi {
    type Err = DecimalError;

    /// Parses a positive decimal (bounded digits and exponent; `1e-400` is
    /// positive although its enclosure starts at 0).
    fn from_str(text: &str) -> Result<Self, DecimalError> {
        let text = text.trim();
        let value = positive_decimal_interval(text)?;
        Ok(LPhi {
            text: text.to_string(),
            value,
        })
    }
}

impl Default for LPhi {
    fn default() -> Self {
        LPhi::paper()
    }
}

impl fmt::Display for LPhi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_contains_the_exact_decimal_and_the_text_is_kept() {
        let l: LPhi = "1.13".parse().unwrap();
        let (lo, hi) = (l.interval().inf(), l.interval().sup());
        // 1.13 is not a binary64 number: the ends are its two neighbours.
        assert!(lo < hi && lo <= 1.13 && 1.13 <= hi);
        assert!(rug::Rational::from_f64(lo).unwrap() < rug::Rational::from((113, 100)));
        assert!(rug::Rational::from_f64(hi).unwrap() > rug::Rational::from((113, 100)));
        assert_eq!(l.as_str(), "1.13");
        assert!(l.is_paper());
        assert!(!"1.130".parse::<LPhi>().unwrap().is_paper());
    }

    #[test]
    fn only_positive_decimals_within_the_limits_are_accepted() {
        for bad in ["", "abc", "-1", "0", "0e5", "1e999999999", "nan", "inf"] {
            assert!(bad.parse::<LPhi>().is_err(), "{bad}");
        }
        let tiny: LPhi = "1e-400".parse().unwrap();
        assert_eq!(tiny.interval().inf(), 0.0);
        assert!(tiny.interval().sup() > 0.0);
    }
}
