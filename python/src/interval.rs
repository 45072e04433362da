//! `specbound.Interval`: one certified enclosure as Python sees it.

use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyFloat;
use rug::{Integer, Rational};

use specbound::certificate::CertInterval;
use specbound::enclosure::Enclosure;
use specbound::linalg::ExactBounds;

/// A closed interval ``[lo, hi]`` that contains an exact value: a certified
/// enclosure when it comes from :func:`svd` or :func:`certify`, a claim
/// when it comes from a certificate file read by :func:`load` (until
/// :func:`verify` has confirmed it).
///
/// ``lo`` and ``hi`` are floats (the enclosure itself, exactly); ``mid`` is
/// the midpoint (an approximation that lies in the interval) and ``rad`` an
/// upper bound of the radius ``(hi - lo) / 2``. Where MPFR certified a
/// singular value more tightly than a float can show, ``lo_exact`` and
/// ``hi_exact`` hold decimal strings (rounded outward) that enclose it too;
/// otherwise they are ``None``.
///
/// ``x in interval`` decides exactly whether the real number ``x`` (a
/// float, an int, a ``fractions.Fraction``, a ``decimal.Decimal``: anything
/// with ``as_integer_ratio()``) lies in the enclosure, the decimal bounds
/// included where there are any. NaN and infinities lie in no interval.
/// Two intervals are equal when their ends (and decimal bounds) are.
///
/// Example:
///
/// >>> import numpy as np, specbound
/// >>> from fractions import Fraction
/// >>> r = specbound.svd(np.diag([3.0, 0.1]))
/// >>> Fraction(0.1) in r.singular_values[1]  # the double nearest 0.1, exactly
/// True
/// >>> Fraction(1, 10) in r.singular_values[1]  # a 2 x 2 is certified exactly (L32)
/// False
#[pyclass(frozen, eq, module = "specbound")]
#[derive(Clone, Debug, PartialEq)]
pub struct Interval {
    /// Lower end.
    #[pyo3(get)]
    pub lo: f64,
    /// Upper end.
    #[pyo3(get)]
    pub hi: f64,
    /// A decimal lower bound tighter than `lo` (MPFR only).
    #[pyo3(get)]
    pub lo_exact: Option<String>,
    /// A decimal upper bound tighter than `hi` (MPFR only).
    #[pyo3(get)]
    pub hi_exact: Option<String>,
}

impl Interval {
    /// The interval of an enclosure.
    pub fn of(e: &Enclosure) -> Self {
        Self::from_ends(e.lo(), e.hi())
    }

    /// The interval of a certificate's entry.
    pub fn of_cert(c: &CertInterval) -> Self {
        Self::from_ends(c.lo, c.hi)
    }

    /// An enclosure with MPFR's decimal bounds, where there are any.
    pub fn with_exact(e: &Enclosure, exact: Option<&ExactBounds>) -> Self {
        Self {
            lo_exact: exact.map(|x| x.lo.clone()),
            hi_exact: exact.map(|x| x.hi.clone()),
            ..Self::of(e)
        }
    }

    /// `[lo, hi]` as given (the caller vouches that it is an enclosure).
    pub fn from_ends(lo: f64, hi: f64) -> Self {
        Self {
            lo,
            hi,
            lo_exact: None,
            hi_exact: None,
        }
    }

    fn enclosure(&self) -> Enclosure {
        Enclosure::new(self.lo, self.hi).expect("intervals are built from enclosures")
    }
}

/// A Python `int` as a rug `Integer`, through its bytes
/// (`int.to_bytes`), never its decimal string: Python refuses to turn an
/// int of more than 4300 digits into a string.
fn big_int(v: &Bound<'_, PyAny>) -> PyResult<Integer> {
    let negative: bool = v.lt(0)?;
    let a = if negative { v.neg()? } else { v.clone() };
    let bits: u64 = a.call_method0("bit_length")?.extract()?;
    let bytes: Vec<u8> = a
        .call_method1("to_bytes", (bits.div_ceil(8).max(1), "little"))?
        .extract()?;
    let n = Integer::from_digits(&bytes, rug::integer::Order::Lsf);
    Ok(if negative { -n } else { n })
}

/// The exact value of a Python real number, through `as_integer_ratio()`
/// (float, int, Fraction, Decimal, NumPy scalars); `None` for NaN and
/// infinities; `TypeError` for anything else.
fn exact_value(x: &Bound<'_, PyAny>) -> PyResult<Option<Rational>> {
    let py = x.py();
    let ratio = match x.call_method0("as_integer_ratio") {
        Ok(r) => r,
        Err(e)
            if e.is_instance_of::<PyValueError>(py) || e.is_instance_of::<PyOverflowError>(py) =>
        {
            return Ok(None); // NaN, infinities
        }
        Err(_) => match py.import("operator")?.call_method1("index", (x,)) {
            Ok(i) => {
                pyo3::types::PyTuple::new(py, [i, 1i64.into_pyobject(py)?.into_any()])?.into_any()
            }
            Err(_) => {
                return Err(PyTypeError::new_err(format!(
                    "'in <Interval>' needs a real number (float, int, fractions.Fraction, \
                     decimal.Decimal), got {}",
                    crate::type_name(x)
                )))
            }
        },
    };
    let (n, d): (Bound<'_, PyAny>, Bound<'_, PyAny>) = ratio.extract()?;
    Ok(Some(Rational::from((big_int(&n)?, big_int(&d)?))))
}

/// The sign and decimal order of a `decimal.Decimal` from its tuple, without
/// computing its value: `Some((negative, zero, order))` with
/// `10^(order - 1) <= |x| < 10^order` for a nonzero `x`; `None` when `x` is
/// not a finite `Decimal` (NaN and infinities are answered by
/// `exact_value`).
fn decimal_order(x: &Bound<'_, PyAny>) -> PyResult<Option<(bool, bool, i64)>> {
    let py = x.py();
    let dec = py.import("decimal")?.getattr("Decimal")?;
    if !x.is_instance(&dec)? {
        return Ok(None);
    }
    let t = x.call_method0("as_tuple")?;
    let sign: i64 = t.getattr("sign")?.extract()?;
    let Ok(exponent) = t.getattr("exponent")?.extract::<i64>() else {
        return Ok(None); // 'n', 'N', 'F': NaN and infinities
    };
    let digits: Vec<u8> = t.getattr("digits")?.extract()?;
    let significant = digits.iter().skip_while(|&&d| d == 0).count() as i64;
    Ok(Some((
        sign == 1,
        significant == 0,
        exponent.saturating_add(significant),
    )))
}

/// Decimal orders `(lo, hi)` with `10^lo < |r| < 10^hi` for a nonzero `r`
/// (from the bit lengths of numerator and denominator, widened by one).
fn rational_order(r: &Rational) -> (i64, i64) {
    let (bp, bq) = (
        r.numer().significant_bits() as i64,
        r.denom().significant_bits() as i64,
    );
    let log10_2 = std::f64::consts::LOG10_2;
    (
        ((bp - bq - 1) as f64 * log10_2).floor() as i64 - 1,
        ((bp - bq + 1) as f64 * log10_2).ceil() as i64 + 1,
    )
}

#[pymethods]
impl Interval {
    /// The midpoint (an approximation lying in the interval).
    ///
    /// >>> import numpy as np, specbound
    /// >>> specbound.svd(np.eye(2)).spectral_norm.mid
    /// 1.0
    #[getter]
    fn mid(&self) -> f64 {
        self.enclosure().mid()
    }

    /// An upper bound of the radius ``(hi - lo) / 2``.
    ///
    /// >>> import numpy as np, specbound
    /// >>> specbound.svd(np.eye(2)).spectral_norm.rad < 1e-12
    /// True
    #[getter]
    fn rad(&self) -> f64 {
        self.enclosure().rad()
    }

    fn __contains__(&self, x: &Bound<'_, PyAny>) -> PyResult<bool> {
        let decimal = |s: &Option<String>| {
            s.as_deref()
                .and_then(specbound::evidence::audit::parse_claim)
                .map(|(value, _)| value)
        };
        let lows: Vec<Rational> = std::iter::once(Rational::from_f64(self.lo).expect("finite"))
            .chain(decimal(&self.lo_exact))
            .collect();
        let highs: Vec<Rational> = std::iter::once(Rational::from_f64(self.hi).expect("finite"))
            .chain(decimal(&self.hi_exact))
            .collect();
        // A Decimal far above or below every bound is answered from its
        // exponent: its value (`Decimal('1e-999999999').as_integer_ratio()`)
        // would take minutes to compute.
        if let Some((negative, false, order)) = decimal_order(x)? {
            let orders: Vec<(i64, i64)> = lows
                .iter()
                .chain(&highs)
                .filter(|b| **b != 0)
                .map(rational_order)
                .collect();
            let max_hi = orders.iter().map(|o| o.1).max().unwrap_or(i64::MIN);
            let min_lo = orders.iter().map(|o| o.0).min().unwrap_or(i64::MAX);
            let positive = !negative;
            if order.saturating_sub(1) > max_hi {
                // |x| exceeds every bound: only its sign matters.
                return Ok(false);
            }
            if order < min_lo {
                // 0 < |x| < every nonzero bound: x compares with each bound
                // as a number of its sign next to 0.
                let le = |b: &Rational| *b > 0 || (*b == 0 && negative);
                let ge = |b: &Rational| *b < 0 || (*b == 0 && positive);
                return Ok(lows.iter().all(ge) && highs.iter().all(le));
            }
        }
        let Some(v) = exact_value(x)? else {
            return Ok(false);
        };
        Ok(lows.iter().all(|lo| *lo <= v) && highs.iter().all(|hi| v <= *hi))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let r = |x: f64| -> PyResult<String> { Ok(PyFloat::new(py, x).repr()?.to_string()) };
        let mut s = format!("Interval({}, {}", r(self.lo)?, r(self.hi)?);
        if let (Some(lo), Some(hi)) = (&self.lo_exact, &self.hi_exact) {
            s.push_str(&format!(", lo_exact='{lo}', hi_exact='{hi}'"));
        }
        s.push(')');
        Ok(s)
    }
}

/// The exact rank of a matrix, bounded by two integers: ``lo <= rank <= hi``
/// (equal when the rank is decided). ``lo`` and ``hi`` are ``int``; ``x in
/// r`` is whether the real number ``x`` is an integer in ``[lo, hi]``.
///
/// Example:
///
/// >>> import numpy as np, specbound
/// >>> r = specbound.svd(np.eye(3)).rank
/// >>> r.lo, r.hi, 3 in r, 2.5 in r
/// (3, 3, True, False)
#[pyclass(frozen, eq, module = "specbound")]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankInterval {
    /// The least the rank can be.
    #[pyo3(get)]
    pub lo: u64,
    /// The most the rank can be.
    #[pyo3(get)]
    pub hi: u64,
}

#[pymethods]
impl RankInterval {
    /// Whether the rank is decided (``lo == hi``).
    #[getter]
    fn decided(&self) -> bool {
        self.lo == self.hi
    }

    fn __contains__(&self, x: &Bound<'_, PyAny>) -> PyResult<bool> {
        let Some(v) = exact_value(x)? else {
            return Ok(false);
        };
        Ok(*v.denom() == 1 && self.lo <= v && v <= self.hi)
    }

    fn __repr__(&self) -> String {
        format!("RankInterval({}, {})", self.lo, self.hi)
    }
}
