//! The result types of certified computations, one per guarantee, and the
//! one serialisable view of an interval.
//!
//! | type | guarantee |
//! | --- | --- |
//! | [`Enclosure`] | a closed interval of finite f64 ends *claimed to contain an exact real value* by the certified routine that built it (which names its lemma) |
//! | [`OpenEnclosure`] | the same claim with an upper end that may be `+inf` (a quantity beyond binary64) |
//! | [`IntEnclosure`] | the same claim for a nonnegative integer (a rank) |
//! | [`CertInterval`] | no claim: an interval *as a file states it* (a certificate, a part, a JSON answer); [`Enclosure`] and [`IntEnclosure`] are written through it, and one read back is re-derived before anything relies on it |
//! | [`Inconclusive`] | no value: why a certified routine gives none |
//!
//! Arithmetic runs on two engines that are not result types: `inari::Interval`
//! (binary64, directed rounding; `Enclosure::to_interval` and
//! `Enclosure::from_interval` are the bridges, which the view's
//! `CertInterval::to_inari` and [`CertInterval::of_inari`] go through) and
//! `evidence::mpfr_interval::MI` (MPFR, the independent re-derivation of
//! `verify`). Nothing converts an `f64` into an `Enclosure` implicitly: every
//! constructor is an explicit claim made by a certified routine that names its
//! lemma in `proofs/`.

use serde::{Deserialize, Serialize};

/// A closed interval `[lo, hi]` with finite endpoints and `lo <= hi`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(into = "CertInterval")]
pub struct Enclosure {
    lo: f64,
    hi: f64,
}

impl Enclosure {
    /// Builds `[lo, hi]`; `None` unless both are finite and `lo <= hi`.
    pub fn new(lo: f64, hi: f64) -> Option<Self> {
        (lo.is_finite() && hi.is_finite() && lo <= hi).then_some(Self { lo, hi })
    }

    /// The point interval `[x, x]` of an exactly known value.
    pub fn exact(x: f64) -> Option<Self> {
        Self::new(x, x)
    }

    /// Lower endpoint.
    pub fn lo(&self) -> f64 {
        self.lo
    }

    /// Upper endpoint.
    pub fn hi(&self) -> f64 {
        self.hi
    }

    /// Midpoint (an approximation, no guarantee beyond lying in the interval).
    pub fn mid(&self) -> f64 {
        let m = self.lo * 0.5 + self.hi * 0.5;
        m.clamp(self.lo, self.hi)
    }

    /// An upper bound of the radius `(hi - lo) / 2`; exactly 0 for a point
    /// interval (an exactly known value).
    pub fn rad(&self) -> f64 {
        if self.lo == self.hi {
            return 0.0;
        }
        ((self.hi - self.lo) * 0.5).next_up()
    }

    /// Relative radius `rad / |mid|` (an approximation used for tightness
    /// reporting only): 0 for a point interval (an exactly known value,
    /// zero included), 1 for `[0, h]` and `[-h, 0]` with `h > 0` (the radius
    /// equals the midpoint: nothing is known but the sign), `+inf` only for
    /// an interval with `lo < 0 < hi`.
    pub fn rel_rad(&self) -> f64 {
        if self.lo == self.hi {
            return 0.0;
        }
        if self.lo < 0.0 && self.hi > 0.0 {
            return f64::INFINITY;
        }
        if self.lo == 0.0 || self.hi == 0.0 {
            return 1.0;
        }
        // Same sign: (hi - lo) / |hi + lo| <= 1; halved first only where the
        // sum could overflow (halving subnormals would lose their bits).
        let (lo, hi) = if self.hi.abs().max(self.lo.abs()) > 1e300 {
            (self.lo * 0.5, self.hi * 0.5)
        } else {
            (self.lo, self.hi)
        };
        ((hi - lo).abs() / (hi + lo).abs()).min(1.0)
    }

    /// Whether `x` lies in the interval (exact comparison).
    pub fn contains(&self, x: f64) -> bool {
        self.lo <= x && x <= self.hi
    }

    /// Intersection of two enclosures of the same value (`None` if disjoint,
    /// which proves that one of the two claims is wrong).
    pub(crate) fn intersect(&self, other: &Self) -> Option<Self> {
        Self::new(self.lo.max(other.lo), self.hi.min(other.hi))
    }

    /// Converts to an inari interval (exact).
    pub(crate) fn to_interval(self) -> inari::Interval {
        inari::Interval::try_from((self.lo, self.hi)).expect("finite lo <= hi")
    }

    /// Converts from an inari interval; `None` if empty or unbounded.
    pub(crate) fn from_interval(x: inari::Interval) -> Option<Self> {
        if x.is_empty() {
            return None;
        }
        Self::new(x.inf(), x.sup())
    }
}

/// An enclosure whose upper end may be `+inf`: `[lo, hi]`, or `[lo, +inf)`
/// where the exact value (or its outward rounding) exceeds the largest
/// double. JSON has no infinity, so the unbounded upper end is written
/// `"hi": null`; the lower end is always a finite number. A quantity beyond
/// binary64 (a Schatten power `sum sigma_i^p` near `2^2000`) is still an
/// interval this way, never a bare `null`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct OpenEnclosure {
    lo: f64,
    hi: Option<f64>,
}

impl OpenEnclosure {
    /// `[lo, +inf)`; `None` unless `lo` is finite.
    pub(crate) fn above(lo: f64) -> Option<Self> {
        lo.is_finite().then_some(Self { lo, hi: None })
    }

    /// From an inari interval: `[inf, sup]`, with `sup = +inf` kept as an
    /// open upper end; `None` if empty or its lower end is not finite.
    pub(crate) fn from_interval(x: inari::Interval) -> Option<Self> {
        if x.is_empty() || !x.inf().is_finite() {
            return None;
        }
        let hi = x.sup().is_finite().then_some(x.sup());
        Some(Self { lo: x.inf(), hi })
    }

    /// Lower endpoint (finite).
    pub fn lo(&self) -> f64 {
        self.lo
    }

    /// Upper endpoint; `None` for `+inf`.
    pub fn hi(&self) -> Option<f64> {
        self.hi
    }

    /// The finite enclosure, where the upper end is finite.
    pub(crate) fn bounded(&self) -> Option<Enclosure> {
        self.hi.and_then(|hi| Enclosure::new(self.lo, hi))
    }
}

impl From<Enclosure> for OpenEnclosure {
    fn from(e: Enclosure) -> Self {
        Self {
            lo: e.lo,
            hi: Some(e.hi),
        }
    }
}

/// An enclosure of a nonnegative integer (a rank), `lo <= exact <= hi`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(into = "CertInterval<u64>")]
pub struct IntEnclosure {
    /// Lower bound.
    pub lo: u64,
    /// Upper bound.
    pub hi: u64,
}

/// An interval `[lo, hi]` as a file states it: the one serialisable view of
/// every interval, real (`CertInterval`, the default `f64`) or integer
/// (`CertInterval<u64>`, a rank). It claims nothing: a certificate read back
/// may hold any two numbers until `certificate::read` has validated them
/// (finite ends, `lo <= hi`) and `verify` has re-derived them. Reals are
/// written as the shortest decimals that parse back to the f64 held, so the
/// printed interval is exactly the one held.
///
/// ```
/// use specbound::enclosure::{CertInterval, Enclosure};
///
/// let e = Enclosure::new(1.0, 2.0).unwrap();
/// let stated = CertInterval::from(e);
/// assert_eq!(serde_json::to_string(&stated).unwrap(), r#"{"lo":1.0,"hi":2.0}"#);
/// // An enclosure is written through the view: the same bytes.
/// assert_eq!(serde_json::to_string(&e).unwrap(), serde_json::to_string(&stated).unwrap());
/// assert!(stated.contains(&CertInterval::point(1.5)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CertInterval<T = f64> {
    /// Lower end.
    pub lo: T,
    /// Upper end.
    pub hi: T,
}

impl CertInterval {
    /// The interval of an inari interval (through `Enclosure::from_interval`);
    /// `None` when it is empty or unbounded.
    pub fn of_inari(x: inari::Interval) -> Option<Self> {
        Enclosure::from_interval(x).map(Self::from)
    }

    /// The exact point `[x, x]`.
    pub fn point(x: f64) -> Self {
        Self { lo: x, hi: x }
    }

    /// Whether every point of `inner` lies in `self` (exact comparison).
    pub fn contains(&self, inner: &CertInterval) -> bool {
        self.lo <= inner.lo && inner.hi <= self.hi
    }

    /// Whether the two intervals share no point (exact comparison).
    pub fn disjoint(&self, other: &CertInterval) -> bool {
        self.hi < other.lo || other.hi < self.lo
    }

    /// Midpoint (an approximation lying in the interval).
    pub fn mid(&self) -> f64 {
        (self.lo * 0.5 + self.hi * 0.5).clamp(self.lo, self.hi)
    }

    /// As an inari interval (exact, through `Enclosure::to_interval`);
    /// `None` unless finite with `lo <= hi`.
    pub(crate) fn to_inari(self) -> Option<inari::Interval> {
        Enclosure::new(self.lo, self.hi).map(Enclosure::to_interval)
    }
}

impl From<Enclosure> for CertInterval {
    fn from(e: Enclosure) -> Self {
        Self { lo: e.lo, hi: e.hi }
    }
}

impl From<IntEnclosure> for CertInterval<u64> {
    fn from(e: IntEnclosure) -> Self {
        Self { lo: e.lo, hi: e.hi }
    }
}

/// Why a certified routine returns no result. "Inconclusive" is always an
/// allowed answer; a wrong enclosure never is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inconclusive {
    /// Human-readable reason (one line).
    pub reason: String,
}

impl Inconclusive {
    /// Builds a reason.
    pub(crate) fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
        }
    }
}

impl std::fmt::Display for Inconclusive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "inconclusive: {}", self.reason)
    }
}
