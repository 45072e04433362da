//! A small interval type over MPFR with explicit directed rounding, used to
//! re-derive certificate quantities independently of inari
//! ([`proofs/mpfr-directed.md`](crate::proofs::mpfr_directed), L13). Values in certificates are nonnegative,
//! and every operation here requires (and checks) nonnegative operands, so
//! each endpoint is a monotone function of the operand endpoints.

use rug::float::Round;
use rug::ops::Pow;
use rug::Float;

/// Working precision (bits).
pub(crate) const PREC: u32 = 160;

/// `[lo, hi]` with `0 <= lo <= hi`, MPFR endpoints.
#[derive(Clone, Debug)]
pub(crate) struct MI {
    /// Lower end.
    pub lo: Float,
    /// Upper end.
    pub hi: Float,
}

macro_rules! dn {
    ($e:expr) => {
        Float::with_val_round(PREC, $e, Round::Down).0
    };
}

macro_rules! up {
    ($e:expr) => {
        Float::with_val_round(PREC, $e, Round::Up).0
    };
}

impl MI {
    /// The exact interval `[lo, hi]` of two f64 (requires `0 <= lo <= hi`).
    pub(crate) fn from_f64(lo: f64, hi: f64) -> Option<Self> {
        (lo >= 0.0 && lo <= hi && hi.is_finite()).then(|| Self {
            lo: Float::with_val(PREC, lo),
            hi: Float::with_val(PREC, hi),
        })
    }

    /// An exact nonnegative integer.
    pub(crate) fn int(n: u64) -> Self {
        Self {
            lo: Float::with_val(PREC, n),
            hi: Float::with_val(PREC, n),
        }
    }

    /// The exact value of a nonnegative decimal string, enclosed (directed
    /// conversion of the exact rational). Read by the one bounded decimal
    /// parser (`crate::spectral::decimal`), so an exponent such as
    /// `1e999999999` is refused at once instead of being evaluated; `None`
    /// for malformed, negative or out-of-limit input.
    pub(crate) fn decimal(text: &str) -> Option<Self> {
        let d: crate::spectral::ExactDecimal = text.parse().ok()?;
        if d.negative {
            return None;
        }
        let q = d.to_rational();
        let lo = dn!(&q);
        let hi = up!(&q);
        (lo.is_finite() && hi.is_finite()).then_some(Self { lo, hi })
    }

    /// Sum.
    pub(crate) fn add(&self, o: &MI) -> MI {
        MI {
            lo: dn!(&self.lo + &o.lo),
            hi: up!(&self.hi + &o.hi),
        }
    }

    /// Product of nonnegative intervals.
    pub(crate) fn mul(&self, o: &MI) -> MI {
        MI {
            lo: dn!(&self.lo * &o.lo),
            hi: up!(&self.hi * &o.hi),
        }
    }

    /// Quotient of nonnegative by positive intervals (`None` if `o` may be 0).
    pub(crate) fn div(&self, o: &MI) -> Option<MI> {
        if o.lo.is_zero() {
            return None;
        }
        Some(MI {
            lo: dn!(&self.lo / &o.hi),
            hi: up!(&self.hi / &o.lo),
        })
    }

    /// `x^(num/den)` for `x >= 0`, as `root(x^num, den)` with directed rounding
    /// at each step (both steps are increasing in x).
    pub(crate) fn pow_q(&self, num: u32, den: u32) -> MI {
        let f = |x: &Float, r: Round| {
            let mut p = Float::with_val_round(PREC, x.pow(num), r).0;
            p.root_round(den, r);
            p
        };
        MI {
            lo: f(&self.lo, Round::Down),
            hi: f(&self.hi, Round::Up),
        }
    }

    /// Square root.
    pub(crate) fn sqrt(&self) -> MI {
        self.pow_q(1, 2)
    }

    /// Whether the f64 interval `[lo, hi]` contains this interval entirely.
    pub(crate) fn inside(&self, lo: f64, hi: f64) -> bool {
        Float::with_val(PREC, lo) <= self.lo && self.hi <= Float::with_val(PREC, hi)
    }

    /// Whether this interval and `[lo, hi]` share a point.
    pub(crate) fn meets(&self, lo: f64, hi: f64) -> bool {
        Float::with_val(PREC, lo) <= self.hi && self.lo <= Float::with_val(PREC, hi)
    }

    /// A short description for messages.
    pub(crate) fn describe(&self) -> String {
        format!(
            "[{:e}, {:e}]",
            self.lo.to_f64_round(Round::Down),
            self.hi.to_f64_round(Round::Up)
        )
    }
}
