//! Certified linear algebra: index-matched enclosures of all singular values.
//!
//! Every routine follows "approximate, then certify": faer computes an
//! approximate SVD with no guarantee, and a separate verifier turns residual
//! bounds into enclosures. No assumption is made about the quality of the
//! approximation: a bad one gives wide or inconclusive results, never wrong
//! ones.
//!
//! Methods (each value records which one certified it):
//! - [`Method::F64Residual`]: Stage 1, binary64 round-to-nearest with a priori
//!   bounds ([`dense`]).
//! - [`Method::ExtendedResidual`]: the same theorem with residuals computed
//!   error-free by Ozaki splitting (`extended`).
//! - [`Method::Mpfr`]: Ogita–Aishima refinement and a directed-rounding MPFR
//!   residual (`mpfr`).
//! - [`Method::GramEigen`] (`gram-eigen-symeig`, `gram-eigen-faer`): square roots of the certified eigenvalues of an
//!   exactly computed Gram matrix `A^T A` ([`gram`]).
//! - [`Method::Structural`]: an exact zero forced by the rank of a factored
//!   product ([`factored`]).

pub mod backend;
pub mod cluster;
pub(crate) mod cost;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;
pub mod dense;
pub(crate) mod eft;
pub(crate) mod extended;
pub mod factored;
pub mod gram;
pub mod kernel;
pub(crate) mod mpfr;
pub mod rounding;
pub mod shuffled;
mod stages;
pub(crate) mod symeig;
pub(crate) mod two_column;

use faer::Par;
use serde::Serialize;

use crate::enclosure::{Enclosure, Inconclusive};
use crate::matrix::DenseMatrix;
use cluster::Group;

/// Which enclosure method to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    /// Stage 1 only (binary64 residuals).
    F64,
    /// Stage 1, then error-free (Ozaki) residuals.
    Extended,
    /// MPFR refinement and certification at the given number of bits.
    Mpfr(u32),
    /// Escalate f64 -> extended -> MPFR-128 -> MPFR-256 until sigma_1 and
    /// every value of at least `AUTO_RELEVANT_FRACTION` times sigma_1 has a
    /// relative radius of at most `rtol`: MPFR only for matrices small enough
    /// (`AUTO_MPFR_MAX_WORK`), 256 bits only when 128 bits were the limit
    /// (`AUTO_MPFR_PRECISION_LIMITED`). A target not met, a stage skipped
    /// or inconclusive is stated in [`SingularValues::notes`]. The default.
    Auto,
}

/// Smallest MPFR precision accepted by [`Precision::from_str`](std::str::FromStr::from_str) (bits).
pub(crate) const MPFR_MIN_BITS: u32 = 64;
/// Largest MPFR precision accepted by [`Precision::from_str`](std::str::FromStr::from_str) (bits).
pub(crate) const MPFR_MAX_BITS: u32 = 1_000_000;

impl std::fmt::Display for Precision {
    /// The name accepted by [`Precision::from_str`](std::str::FromStr::from_str): `f64`, `extended`,
    /// `mpfr:BITS` or `auto`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Precision::F64 => f.write_str("f64"),
            Precision::Extended => f.write_str("extended"),
            Precision::Mpfr(b) => write!(f, "mpfr:{b}"),
            Precision::Auto => f.write_str("auto"),
        }
    }
}

impl std::str::FromStr for Precision {
    type Err = String;

    /// Parses `f64`, `extended`, `auto` or `mpfr:BITS` with
    /// `MPFR_MIN_BITS`` <= BITS <= ``MPFR_MAX_BITS`; the one parser used by
    /// the command line, the certificate reader and `verify`.
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "f64" => Precision::F64,
            "extended" => Precision::Extended,
            "auto" => Precision::Auto,
            _ => match s.strip_prefix("mpfr:") {
                Some(b) => {
                    let bits: u32 = b
                        .parse()
                        .map_err(|_| format!("invalid MPFR precision '{b}'"))?;
                    if !(MPFR_MIN_BITS..=MPFR_MAX_BITS).contains(&bits) {
                        return Err(format!(
                            "MPFR precision must be between {MPFR_MIN_BITS} and {MPFR_MAX_BITS} bits, got {bits}"
                        ));
                    }
                    Precision::Mpfr(bits)
                }
                None => {
                    return Err(format!(
                        "unknown precision '{s}' (expected f64, extended, mpfr:BITS or auto)"
                    ))
                }
            },
        })
    }
}

impl Serialize for Precision {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Precision {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Precision;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a precision (f64, extended, mpfr:BITS, auto)")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Precision, E> {
                let shown: String = s.chars().take(40).collect();
                s.parse().map_err(|_| {
                    E::custom(format!(
                        "unknown precision \"{shown}\" (f64, extended, mpfr:BITS with 64..=1000000 bits, auto)"
                    ))
                })
            }
        }
        d.deserialize_str(V)
    }
}

/// Largest `m * n * n` (`m >= n`) for which `Auto` escalates to MPFR. The
/// MPFR stage works on thin factors, so its cost is O(m n^2) operations at
/// 128 bits: at this limit (for example 2048 x 32 or 128 x 128) a few
/// seconds, while the f64 and extended stages stay in O(m n^2) binary64
/// operations (see `docs/svd.md` for measured times).
pub(crate) const AUTO_MPFR_MAX_WORK: usize = 1 << 21;

/// `Auto` runs the 256-bit stage only when the 128-bit one left a relative
/// radius at most this (2^-100), measured on the exact decimal ends of the
/// MPFR values ([`CertifiedValue::rel_rad`]; their binary64 ends are never
/// narrower than about 1.1e-16 relative), or left the rank undecided: only
/// then is the radius set by the working precision, which more bits reduce.
pub(crate) const AUTO_MPFR_PRECISION_LIMITED: f64 = f64::from_bits((1023 - 100) << 52);

/// Largest `m * n * n` for which `Auto` runs its graded stage: MPFR at
/// [`graded_precision`] bits (up to about 2200) with the Jacobi start.
pub(crate) const AUTO_GRADED_MAX_WORK: usize = 1 << 15;

/// The precision of `Auto`'s graded stage for the (prepared) matrix `a`:
/// 128 bits plus the binary orders its nonzero entries span, rounded up to
/// a multiple of 64, when that exceeds 256 (else `None`: the 256-bit stage
/// covers it). The residuals of the small values of a graded matrix `D B D`
/// are computed to about `2^-bits` times the largest entry, so the span
/// sets the precision at which they separate from 0.
pub(crate) fn graded_precision(a: faer::MatRef<'_, f64>) -> Option<u32> {
    let (mut hi, mut lo) = (i32::MIN, i32::MAX);
    for j in 0..a.ncols() {
        for &x in a.col(j).iter() {
            if x != 0.0 {
                let e = dense::exponent_of(x.abs());
                hi = hi.max(e);
                lo = lo.min(e);
            }
        }
    }
    let span = u32::try_from(hi.checked_sub(lo)?).ok()?;
    let bits = (128 + span).div_ceil(64) * 64;
    (bits > 256).then_some(bits.min(MPFR_MAX_BITS))
}

/// `Auto` asks relative accuracy `rtol` of the values above this fraction of
/// sigma_1; smaller values keep whatever absolute accuracy the first stage
/// that satisfied the others gave.
pub(crate) const AUTO_RELEVANT_FRACTION: f64 = 1e-6;

/// A value wider than the target whose absolute radius exceeds this many
/// times sigma_1's is "loose" ([`SingularValues::loose_small_value_at`]):
/// the residual routes give radii of the same order for every index, so a
/// larger ratio means the route that certified it (the exact-Gram route,
/// whose radius of sigma_i grows like sigma_1 / sigma_i) can be improved.
pub(crate) const LOOSE_SMALL_VALUE_FACTOR: f64 = 16.0;

/// How `auto`'s note of what its stages left open begins.
const AFTER_STAGES: &str = "after every stage run: ";

/// How [`SingularValues::unsettled`] names an undecided rank.
const RANK_UNDECIDED: &str = "the rank undecided";

/// How the note on an undecided rank the exact kernel certificate did not
/// try begins.
const KERNEL_NOT_ATTEMPTED: &str =
    "exact kernel certificate not attempted for the undecided rank: ";

/// The target relative radius of [`Precision::Auto`] unless asked
/// otherwise: sigma_1 and every value >= 1e-6 sigma_1 to 11 digits.
pub(crate) const DEFAULT_RTOL: f64 = 1e-11;

/// Options of [`certify_singular_values`].
#[derive(Clone, Copy, Debug)]
pub struct SvdOptions {
    /// Method selection.
    pub precision: Precision,
    /// Target relative radius for `Auto` (ignored otherwise).
    pub rtol: f64,
    /// Parallelism of the matrix products and SVDs.
    pub par: Par,
}

impl Default for SvdOptions {
    fn default() -> Self {
        Self {
            precision: Precision::Auto,
            rtol: DEFAULT_RTOL,
            par: faer::get_global_parallelism(),
        }
    }
}

/// How a value was certified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Stage 1 binary64 residual bound.
    F64Residual,
    /// Eigenvalues of the exactly computed Gram matrix, certified in
    /// binary64 ([`proofs/exact-gram.md`](crate::proofs::exact_gram), [`proofs/gram-eigen.md`](crate::proofs::gram_eigen)), from the
    /// approximate pairs of the named eigensolver (the certification
    /// assumes nothing of them; the solver only sets the width).
    GramEigen(gram::EigenSolver),
    /// Error-free (Ozaki) residual bound.
    ExtendedResidual,
    /// MPFR at the given precision.
    Mpfr(u32),
    /// Exactly zero by structure (rank of a factored product, or a zero matrix).
    Structural,
    /// Exactly zero by an exact kernel certificate: null vectors checked in
    /// exact rational arithmetic ([`kernel`], [`proofs/exact-kernel.md`](crate::proofs::exact_kernel), L30).
    ExactKernel,
    /// Both values of a two-column (or two-row) matrix from its exact
    /// Frobenius norm and Gram determinant ([`proofs/two-column.md`](crate::proofs::two_column), L32).
    ExactTwoColumn,
}

impl Method {
    /// Stable name used in JSON output.
    pub fn name(&self) -> String {
        match self {
            Method::F64Residual => "f64-residual".into(),
            Method::GramEigen(gram::EigenSolver::Tridiagonal) => "gram-eigen-symeig".into(),
            Method::GramEigen(gram::EigenSolver::Faer) => "gram-eigen-faer".into(),
            Method::GramEigen(gram::EigenSolver::Cusolver) => "gram-eigen-cusolver".into(),
            Method::ExtendedResidual => "extended-residual".into(),
            Method::Mpfr(b) => format!("mpfr-{b}"),
            Method::Structural => "structural".into(),
            Method::ExactKernel => "exact-kernel".into(),
            Method::ExactTwoColumn => "exact-two-column".into(),
        }
    }
}

impl Serialize for Method {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

/// Decimal strings enclosing the exact value more tightly than f64 can show.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExactBounds {
    /// A decimal lower bound (rounded towards -inf).
    pub lo: String,
    /// A decimal upper bound (rounded towards +inf).
    pub hi: String,
}

/// One certified singular value.
#[derive(Clone, Debug, PartialEq)]
pub struct CertifiedValue {
    /// Contains the exact singular value of this index.
    pub enclosure: Enclosure,
    /// The method that produced `enclosure`.
    pub method: Method,
    /// Number of singular values sharing this enclosure (the cluster size).
    pub cluster_size: usize,
    /// Tighter decimal bounds (MPFR only).
    pub exact: Option<ExactBounds>,
}

impl CertifiedValue {
    /// Relative radius of the value (tightness reporting and stage
    /// selection only, no guarantee): from the decimal ends [`Self::exact`]
    /// where a stage gave them (they are narrower than any binary64
    /// interval), else from the binary64 enclosure ([`Enclosure::rel_rad`]):
    /// 0 for an exactly known value, 1 for an interval `[0, h]`, `h > 0`.
    pub fn rel_rad(&self) -> f64 {
        if let Some(x) = &self.exact {
            if let Some(r) = exact_rel_rad(&x.lo, &x.hi) {
                return r;
            }
        }
        self.enclosure.rel_rad()
    }

    /// Whether the value is certainly positive: its lower end is, or the
    /// lower of its decimal ends [`Self::exact`] is (a positive value below
    /// the least positive double, whose binary64 lower end can only be 0).
    pub(crate) fn positive(&self) -> bool {
        self.enclosure.lo() > 0.0
            || self.exact.as_ref().is_some_and(|x| {
                rug::Float::parse(&x.lo).is_ok_and(|f| rug::Float::with_val(64, f) > 0)
            })
    }
}

/// `(hi - lo) / (hi + lo)` of two nonnegative decimal ends, evaluated in
/// MPFR at a precision above their number of digits and rounded up to
/// binary64; `None` if an end does not parse (the caller then uses the
/// binary64 ends).
fn exact_rel_rad(lo: &str, hi: &str) -> Option<f64> {
    use rug::float::Round;
    use rug::Float;
    let digits = lo.len().max(hi.len()) as u32;
    let prec = 64 + digits.saturating_mul(4);
    let lo = Float::with_val(prec, Float::parse(lo).ok()?);
    let hi = Float::with_val(prec, Float::parse(hi).ok()?);
    if lo == hi {
        return Some(0.0);
    }
    if !(lo > 0) {
        return Some(1.0);
    }
    let num = Float::with_val(prec, &hi - &lo);
    let den = Float::with_val(prec, &hi + &lo);
    let r = Float::with_val(prec, &num / &den);
    Some(r.to_f64_round(Round::Up).min(1.0))
}

/// Index-matched enclosures of all `min(rows, cols)` singular values,
/// largest first: the exact i-th largest singular value lies in `values[i]`.
#[derive(Clone, Debug)]
pub struct SingularValues {
    /// Rows of the input.
    pub rows: usize,
    /// Columns of the input.
    pub cols: usize,
    /// Largest first.
    pub values: Vec<CertifiedValue>,
    /// How many trailing values are exactly zero by structure.
    pub structural_zeros: usize,
    /// What the method selection did that the values alone do not show: a
    /// stage that was inconclusive and replaced by another, a stage skipped
    /// for its cost, a `Precision::Auto` target that was not met. Empty
    /// when the requested method ran as asked and met its target.
    pub notes: Vec<String>,
}

impl SingularValues {
    /// The enclosures alone.
    pub fn enclosures(&self) -> Vec<Enclosure> {
        self.values.iter().map(|v| v.enclosure).collect()
    }

    /// Largest relative radius ([`CertifiedValue::rel_rad`]: from the
    /// exact ends where present) over sigma_1 and the values whose upper
    /// bound is at least `fraction * sigma_1`. Exactly known values count
    /// 0, intervals `[0, h]` count 1.
    pub fn max_rel_rad_above(&self, fraction: f64) -> f64 {
        let top = self.values.first().map(|v| v.enclosure.hi()).unwrap_or(0.0);
        self.values
            .iter()
            .enumerate()
            .filter(|(i, v)| *i == 0 || v.enclosure.hi() >= fraction * top)
            .map(|(_, v)| v.rel_rad())
            .fold(0.0, f64::max)
    }

    /// Largest relative radius over all values ([`CertifiedValue::rel_rad`]:
    /// 0 for an exactly known value, zeros included; 1 for an interval
    /// `[0, h]` with `h > 0`; from the exact decimal ends where a stage gave
    /// them). The `max_relative_radius` of the JSON reports.
    pub fn max_rel_rad(&self) -> f64 {
        self.values.iter().map(|v| v.rel_rad()).fold(0.0, f64::max)
    }

    /// `k` such that `sigma_1..sigma_k` are certainly positive: one more
    /// than the last index whose value is [`CertifiedValue::positive`]
    /// (the values are non-increasing, so every earlier one is positive as
    /// well; [`proofs/sorting-lemma.md`](crate::proofs::sorting_lemma), L10 c). A lower bound of the rank
    /// (L15 c).
    pub(crate) fn certainly_positive(&self) -> usize {
        self.values
            .iter()
            .rposition(|v| v.positive())
            .map_or(0, |i| i + 1)
    }

    /// The first value not certainly positive whose enclosure is `[0, h]`
    /// with `h > 0`: whether it is zero is not decided, so neither is the
    /// rank (L15 c).
    pub(crate) fn rank_undecided_at(&self) -> Option<usize> {
        (self.certainly_positive()..self.values.len())
            .find(|&i| self.values[i].enclosure.hi() > 0.0)
    }

    /// The first value wider than `rtol` (relative) whose absolute radius
    /// exceeds [`LOOSE_SMALL_VALUE_FACTOR`] times that of sigma_1: the
    /// signature of a route whose radius grows as the value shrinks (the
    /// exact-Gram route squares the range, [`proofs/gram-eigen.md`](crate::proofs::gram_eigen)), which a
    /// residual route on `A` itself (radii of the order of sigma_1's for
    /// every index) narrows. Values of 0 or `[0, h]` are left to
    /// [`Self::rank_undecided_at`].
    pub(crate) fn loose_small_value_at(&self, rtol: f64) -> Option<usize> {
        let rad1 = self.values.first()?.enclosure.rad();
        self.values.iter().position(|v| {
            v.enclosure.lo() > 0.0
                && v.rel_rad() > rtol
                && v.enclosure.rad() > LOOSE_SMALL_VALUE_FACTOR * rad1
        })
    }

    /// What a cheaper stage left open that a further one may close: the
    /// rank undecided, or a small value loose as [`Self::loose_small_value_at`]
    /// says; `None` when neither (the stage is settled).
    pub(crate) fn unsettled(&self, rtol: f64) -> Option<String> {
        let show = |i: usize| {
            let e = self.values[i].enclosure;
            format!("sigma_{} in [{:e}, {:e}]", i + 1, e.lo(), e.hi())
        };
        if let Some(i) = self.rank_undecided_at() {
            return Some(format!("{RANK_UNDECIDED} ({})", show(i)));
        }
        self.loose_small_value_at(rtol).map(|i| {
            format!(
                "{} at relative radius {:.2e} > rtol {rtol:e}",
                show(i),
                self.values[i].rel_rad()
            )
        })
    }

    /// Sets the `k` smallest values to exact zeros when `k` exact null
    /// vectors of the (prepared) matrix are certified ([`kernel::exact_kernel`]:
    /// `rank <= n - k`, so `sigma_{n-k+1..n} = 0`, [`proofs/exact-kernel.md`](crate::proofs::exact_kernel),
    /// L30), and says so in [`Self::notes`]; only when the rank is undecided.
    /// `kernel` is the memoised certificate (its nullity) or why it was not
    /// attempted. An `Err` only if a certified value excludes 0 where the
    /// certificate proves a zero (two proofs disagree: inconclusive).
    fn apply_exact_kernel(
        &mut self,
        kernel: impl FnOnce() -> Result<usize, kernel::KernelSkipped>,
    ) -> Result<(), Inconclusive> {
        if self.rank_undecided_at().is_none() {
            return Ok(());
        }
        // Where the limits exclude it, `certify_prepared` says so once the
        // rank is still undecided after every stage.
        let Ok(k) = kernel() else {
            return Ok(());
        };
        let n = self.values.len();
        if k == 0 || k > n {
            return Ok(());
        }
        if let Some(i) = (n - k..n).find(|&i| self.values[i].positive()) {
            return Err(Inconclusive::new(format!(
                "internal consistency check failed: sigma_{} has a positive lower bound, \
                 but an exact kernel certificate proves the rank at most {}",
                i + 1,
                n - k
            )));
        }
        for v in &mut self.values[n - k..] {
            *v = CertifiedValue {
                enclosure: Enclosure::exact(0.0).expect("0 is finite"),
                method: Method::ExactKernel,
                cluster_size: k,
                exact: None,
            };
        }
        self.notes.push(format!(
            "exact kernel certificate: {k} null vector(s) checked in exact arithmetic \
             (rank <= {}, sigma_{}..sigma_{n} = 0)",
            n - k,
            n - k + 1
        ));
        Ok(())
    }

    /// Decides the rank from below where it is still undecided: with an
    /// exact elimination `elim` of the (prepared) matrix `a = 2^scale_exp A`
    /// (or its transpose), whose `r x r` submatrix has the exact nonzero
    /// determinant `det` ([`kernel::det_of`]), `sigma_r(A) >=
    /// |det| 2^(-r scale_exp) / prod_{i<r} hi_i` with `hi_i` the certified
    /// upper ends ([`proofs/exact-rank.md`](crate::proofs::exact_rank), L37; L2 for the scaling),
    /// evaluated in MPFR with directed rounding (L13). The lower end of
    /// `sigma_r` is raised to it (in binary64 where it is representable,
    /// else in the decimal ends); with the kernel certificate's
    /// `n - r` zeros (L30) the rank is then decided exactly. An `Err` only if
    /// the bound exceeds a certified upper end (two proofs disagree).
    fn apply_rank_lower_bound(
        &mut self,
        a: faer::MatRef<'_, f64>,
        scale_exp: i32,
        elim: &kernel::Elimination,
    ) -> Result<(), Inconclusive> {
        use rug::float::Round;
        use rug::Float;
        const PREC: u32 = 128;
        let r = elim.rows.len();
        if self.rank_undecided_at().is_none() || r == 0 || r > self.values.len() {
            return Ok(());
        }
        if self.values[r - 1].positive() {
            return Ok(());
        }
        let Some(det) = kernel::det_of(a, &elim.rows, &elim.cols).filter(|d| *d != 0) else {
            return Ok(());
        };
        let det = det.abs();
        let mut num = Float::with_val_round(PREC, &det, Round::Down).0;
        let Ok(shift) = i32::try_from(i64::from(scale_exp) * r as i64) else {
            return Ok(());
        };
        num >>= shift; // exact (MPFR's exponent range)
        let mut den = Float::with_val(PREC, 1);
        for v in &self.values[..r - 1] {
            den = Float::with_val_round(PREC, &den * v.enclosure.hi(), Round::Up).0;
        }
        if !(den > 0) || !num.is_finite() || !den.is_finite() {
            return Ok(());
        }
        let bound = Float::with_val_round(PREC, &num / &den, Round::Down).0;
        let v = &mut self.values[r - 1];
        let hi = v.enclosure.hi();
        if bound > hi {
            return Err(Inconclusive::new(format!(
                "internal consistency check failed: an exact determinant bounds sigma_{r} \
                 below by more than its certified upper end {hi:e}"
            )));
        }
        let lo64 = bound.to_f64_round(Round::Down);
        if lo64 > v.enclosure.lo() {
            v.enclosure = Enclosure::new(lo64, hi).expect("lo64 <= bound <= hi");
        }
        if lo64 == 0.0 || v.exact.is_some() {
            // Below the least positive double (or beside MPFR's ends): the
            // decimal lower end carries it.
            let lo = bound.to_string_radix_round(10, Some(40), Round::Down);
            let hi_text = match &v.exact {
                Some(x) => x.hi.clone(),
                None => Float::with_val(PREC, hi).to_string_radix_round(10, Some(40), Round::Up),
            };
            let keep_old = v.exact.as_ref().is_some_and(|x| {
                Float::parse(&x.lo).is_ok_and(|f| Float::with_val(PREC, f) >= bound)
            });
            if !keep_old {
                v.exact = Some(ExactBounds { lo, hi: hi_text });
            }
        }
        self.tighten_by_order();
        let how = match (elim.nullity(), r + elim.nullity() == self.values.len()) {
            (0, true) => format!("rank = {r}"),
            (k, true) => format!("rank >= {r}, and <= {r} by {k} exact null vector(s)"),
            (_, false) => format!("rank >= {r}"),
        };
        self.notes.push(format!(
            "exact rank: a {r} x {r} submatrix has a nonzero determinant, checked in exact \
             arithmetic ({how}; sigma_{r} >= |det| / the upper ends of sigma_1..sigma_{})",
            r.saturating_sub(1)
        ));
        Ok(())
    }

    /// Once the rank is decided (by a later certificate: exact zeros,
    /// an exact kernel), drops the notes that said it was not: `auto`'s
    /// note of what its stages left open and the exact kernel's note.
    pub(crate) fn drop_notes_of_an_undecided_rank(&mut self) {
        if self.rank_undecided_at().is_some() {
            return;
        }
        let open = format!("{AFTER_STAGES}{RANK_UNDECIDED}");
        self.notes
            .retain(|n| !n.starts_with(&open) && !n.starts_with(KERNEL_NOT_ATTEMPTED));
    }

    /// Keeps, index by index, the narrower of two index-matched enclosures of
    /// the same matrix (both contain the exact value; [`proofs/sorting-lemma.md`](crate::proofs::sorting_lemma), L10).
    /// Then restores the order of the ends with [`Self::tighten_by_order`]
    /// (the two stages may group values differently).
    pub(crate) fn keep_narrower(&mut self, other: SingularValues) {
        for (mine, theirs) in self.values.iter_mut().zip(other.values) {
            let w_mine = mine.enclosure.hi() - mine.enclosure.lo();
            let w_theirs = theirs.enclosure.hi() - theirs.enclosure.lo();
            // Where both stages gave exact decimal ends, those decide (the
            // binary64 ends of a 256-bit and a 128-bit value are the same
            // few ulps); otherwise the binary64 widths.
            // Equal binary64 widths: the value with decimal ends (tighter
            // than binary64 states, as below the least positive double).
            let narrower = if mine.exact.is_some() && theirs.exact.is_some() {
                theirs.rel_rad() < mine.rel_rad()
            } else {
                w_theirs < w_mine
                    || (w_theirs == w_mine && mine.exact.is_none() && theirs.exact.is_some())
            };
            if narrower {
                *mine = theirs;
            }
        }
        self.tighten_by_order();
    }

    /// Makes the lower ends and the upper ends non-increasing, as the exact
    /// values are: `lo_i := max_{j >= i} lo_j` and `hi_i := min_{j <= i} hi_j`
    /// (`sigma_i >= sigma_j >= lo_j` for `j >= i`, `sigma_i <= sigma_j <= hi_j`
    /// for `j <= i`; [`proofs/sorting-lemma.md`](crate::proofs::sorting_lemma), L10 c). A no-op on the
    /// output of one stage, whose disjoint groups are already ordered.
    pub(crate) fn tighten_by_order(&mut self) {
        let n = self.values.len();
        let mut los: Vec<f64> = self.values.iter().map(|v| v.enclosure.lo()).collect();
        let mut his: Vec<f64> = self.values.iter().map(|v| v.enclosure.hi()).collect();
        for i in (0..n.saturating_sub(1)).rev() {
            los[i] = los[i].max(los[i + 1]);
        }
        for i in 1..n {
            his[i] = his[i].min(his[i - 1]);
        }
        for ((v, lo), hi) in self.values.iter_mut().zip(los).zip(his) {
            if lo != v.enclosure.lo() || hi != v.enclosure.hi() {
                // Both ends contain sigma_i, so lo <= hi; keep the old
                // enclosure rather than guess if that ever failed.
                if let Some(e) = Enclosure::new(lo, hi) {
                    v.enclosure = e;
                }
            }
        }
    }
}

/// Converts disjoint groups of a matrix scaled by `2^scale_exp` into
/// unscaled index-matched values (L2, L7).
pub(crate) fn values_from_groups(
    groups: &[Group<f64>],
    scale_exp: i32,
    method: Method,
) -> Result<Vec<CertifiedValue>, Inconclusive> {
    values_from_groups_capped(groups, scale_exp, method, || f64::INFINITY)
}

/// An upper bound of every singular value of `a`: `sigma_i <= sigma_1 <=
/// ||A||_F <= sqrt(nnz) max |a_ij|` ([`proofs/derived-quantities.md`](crate::proofs::derived_quantities), L15 d),
/// rounded up (L3).
pub(crate) fn sigma_cap(a: faer::MatRef<'_, f64>) -> f64 {
    let (mut maxabs, mut nnz) = (0.0f64, 0usize);
    for j in 0..a.ncols() {
        for &x in a.col(j).iter() {
            maxabs = maxabs.max(x.abs());
            nnz += usize::from(x != 0.0);
        }
    }
    if nnz <= 1 {
        return maxabs; // one nonzero entry: ||A||_F = max |a_ij| exactly
    }
    rounding::mul_ru(rounding::sqrt_ru(nnz as f64), maxabs)
}

/// [`values_from_groups`] with every upper end first clamped to `cap()`,
/// an upper bound of every singular value of the scaled matrix
/// ([`sigma_cap`], L15 d), evaluated only where an unscaled upper end
/// overflows (a matrix holding values near the largest double).
pub(crate) fn values_from_groups_capped(
    groups: &[Group<f64>],
    scale_exp: i32,
    method: Method,
    cap: impl Fn() -> f64,
) -> Result<Vec<CertifiedValue>, Inconclusive> {
    let mut out = Vec::new();
    let known = std::cell::OnceCell::new();
    for (lo, hi, size) in cluster::index_matched(groups) {
        let lo = rounding::scale_pow2_rd(lo, -scale_exp).max(0.0);
        let mut hi_u = rounding::scale_pow2_ru(hi, -scale_exp);
        if !hi_u.is_finite() {
            let c = *known.get_or_init(&cap);
            hi_u = rounding::scale_pow2_ru(hi.min(c), -scale_exp);
        }
        let hi = hi_u;
        let enclosure = Enclosure::new(lo, hi)
            .ok_or_else(|| Inconclusive::new("singular value bound overflowed"))?;
        out.push(CertifiedValue {
            enclosure,
            method,
            cluster_size: size,
            exact: None,
        });
    }
    Ok(out)
}

fn zero_matrix(rows: usize, cols: usize) -> SingularValues {
    let k = rows.min(cols);
    SingularValues {
        rows,
        cols,
        values: (0..k)
            .map(|_| CertifiedValue {
                enclosure: Enclosure::exact(0.0).expect("0 is finite"),
                method: Method::Structural,
                cluster_size: k,
                exact: None,
            })
            .collect(),
        structural_zeros: k,
        notes: Vec::new(),
    }
}

/// Certified, index-matched enclosures of all singular values of `a`.
///
/// *Guarantee: certified enclosure.* For every i, the exact i-th largest
/// singular value of the matrix whose entries are exactly `a.data` lies in
/// `values[i].enclosure`. Justification: [`proofs/residual-single-pair.md`](crate::proofs::residual_single_pair) (L6),
/// [`proofs/residual-cluster.md`](crate::proofs::residual_cluster) (L7), [`proofs/near-orthogonal.md`](crate::proofs::near_orthogonal) (L8),
/// [`proofs/dot-product-error.md`](crate::proofs::dot_product_error) (L4), [`proofs/collatz-bound.md`](crate::proofs::collatz_bound) (L5),
/// [`proofs/power-of-two-scaling.md`](crate::proofs::power_of_two_scaling) (L2), and for the higher stages
/// [`proofs/ozaki-exact-product.md`](crate::proofs::ozaki_exact_product) (L11), [`proofs/compensated-sum.md`](crate::proofs::compensated_sum) (L12),
/// [`proofs/mpfr-directed.md`](crate::proofs::mpfr_directed) (L13); [`proofs/sorting-lemma.md`](crate::proofs::sorting_lemma) (L10) for
/// combining stages.
///
/// Non-finite entries must have been rejected by the reader; an `Err` means
/// "inconclusive" (with the reason), never a wrong answer.
pub fn certify_singular_values(
    a: &DenseMatrix,
    opts: &SvdOptions,
) -> Result<SingularValues, Inconclusive> {
    match prepare_checked(a)? {
        None => Ok(zero_matrix(a.rows, a.cols)),
        Some(prep) => certify_prepared(&prep, a.rows, a.cols, opts),
    }
}

/// Prepares a matrix for [`certify_prepared`]: rejects non-finite entries
/// and empty dimensions (inconclusive, as [`certify_singular_values`]), and
/// returns `None` for a zero matrix, whose values are exact zeros
/// (`zero_singular_values`).
pub(crate) fn prepare_checked(a: &DenseMatrix) -> Result<Option<dense::Prepared>, Inconclusive> {
    check_preparable(a)?;
    Ok(dense::prepare(a.rows, a.cols, &a.data))
}

/// The checks of [`prepare_checked`] alone: inconclusive for non-finite
/// entries or an empty dimension.
pub(crate) fn check_preparable(a: &DenseMatrix) -> Result<(), Inconclusive> {
    let non_finite = |c: &[f64]| crate::matrix::first_non_finite(c).is_some();
    let any_non_finite = if dense::split_pass(a.data.len()) {
        use rayon::prelude::*;
        a.data.par_chunks(dense::PAR_PASS_MIN / 4).any(non_finite)
    } else {
        non_finite(&a.data)
    };
    if any_non_finite {
        return Err(Inconclusive::new("matrix has non-finite entries"));
    }
    if a.rows == 0 || a.cols == 0 {
        return Err(Inconclusive::new("matrix has a zero-sized dimension"));
    }
    Ok(())
}

/// [`prepare_checked`] of a matrix the caller gives up and whose
/// [`check_preparable`] it has already run (not repeated: one pass less over
/// an LLM-sized matrix): the same entries and scale, prepared in the
/// matrix's own buffer where its layout allows ([`dense::prepare_owned`]).
pub(crate) fn prepare_owned_after_check(a: DenseMatrix) -> Option<dense::Prepared> {
    dense::prepare_owned(a.rows, a.cols, a.data)
}

/// The singular values of the zero `rows x cols` matrix: exact zeros (by
/// definition: `A^T A = 0`), as [`certify_singular_values`] returns them.
pub(crate) fn zero_singular_values(rows: usize, cols: usize) -> SingularValues {
    zero_matrix(rows, cols)
}

/// [`certify_singular_values`] of the `rows x cols` matrix `A` from its
/// preparation `prep` (`dense::prepare`: `2^k A` or `2^k A^T`, exactly, L2),
/// so that a caller may drop `A` itself before the certification allocates
/// its working set.
///
/// *Guarantee: certified enclosure*, as [`certify_singular_values`], by the
/// same lemmas: [`proofs/residual-single-pair.md`](crate::proofs::residual_single_pair) (L6),
/// [`proofs/residual-cluster.md`](crate::proofs::residual_cluster) (L7), [`proofs/near-orthogonal.md`](crate::proofs::near_orthogonal) (L8),
/// [`proofs/dot-product-error.md`](crate::proofs::dot_product_error) (L4), [`proofs/collatz-bound.md`](crate::proofs::collatz_bound) (L5),
/// [`proofs/power-of-two-scaling.md`](crate::proofs::power_of_two_scaling) (L2), [`proofs/exact-gram.md`](crate::proofs::exact_gram) (L23),
/// [`proofs/gram-eigen.md`](crate::proofs::gram_eigen) (L24), [`proofs/ozaki-exact-product.md`](crate::proofs::ozaki_exact_product) (L11),
/// [`proofs/compensated-sum.md`](crate::proofs::compensated_sum) (L12), [`proofs/mpfr-directed.md`](crate::proofs::mpfr_directed) (L13) and
/// [`proofs/sorting-lemma.md`](crate::proofs::sorting_lemma) (L10).
///
/// A matrix with two columns (or rows) is also certified in closed form
/// from exact rationals ([`proofs/two-column.md`](crate::proofs::two_column), L32, [`two_column`]): the
/// narrower enclosure is kept index by index (L10), and it stands alone
/// where the stages are inconclusive.
pub(crate) fn certify_prepared(
    prep: &dense::Prepared,
    rows: usize,
    cols: usize,
    opts: &SvdOptions,
) -> Result<SingularValues, Inconclusive> {
    // The exact elimination (L30, L37), computed at most once and only
    // where a stage leaves the rank undecided.
    let elim: ElimCell = std::cell::OnceCell::new();
    let stages = stages::Stages {
        prep,
        rows,
        cols,
        opts,
        kernel_cell: &elim,
        direct_svd: std::cell::OnceCell::new(),
    };
    let staged = stages::run_precision(&stages);
    let mut result = match (staged, two_column::certify(prep, rows, cols)) {
        (Ok(mut sv), Some(exact)) => {
            sv.keep_narrower(exact);
            Ok(sv)
        }
        (Err(_), Some(exact)) => Ok(exact),
        (staged, None) => staged,
    };
    // Whatever is still undecided after every stage: the rank from below,
    // by an exact determinant (L37), at every precision alike.
    if let Ok(r) = &mut result {
        if r.rank_undecided_at().is_some() {
            let a = prep.a();
            if let Ok(Some(e)) = elim.get_or_init(|| kernel::eliminate(a)) {
                r.apply_exact_kernel(|| Ok(e.nullity()))?;
                r.apply_rank_lower_bound(a, prep.scale_exp, e)?;
            }
            r.drop_notes_of_an_undecided_rank();
        }
        if r.rank_undecided_at().is_some() {
            if let Some(Err(why)) = elim.get() {
                r.notes.push(format!("{KERNEL_NOT_ATTEMPTED}{why}"));
            }
        }
    }
    result
}

/// The memoised exact elimination of [`certify_prepared`].
type ElimCell = std::cell::OnceCell<Result<Option<kernel::Elimination>, kernel::KernelSkipped>>;

#[cfg(test)]
mod tests {
    use super::*;

    fn sv(ends: &[(f64, f64)], method: Method) -> SingularValues {
        SingularValues {
            rows: ends.len(),
            cols: ends.len(),
            values: ends
                .iter()
                .map(|&(lo, hi)| CertifiedValue {
                    enclosure: Enclosure::new(lo, hi).unwrap(),
                    method,
                    cluster_size: 1,
                    exact: None,
                })
                .collect(),
            structural_zeros: 0,
            notes: Vec::new(),
        }
    }

    #[test]
    fn mixing_stages_keeps_both_ends_non_increasing() {
        // Stage A groups sigma_2, sigma_3 into one hull [1, 2.5]; stage B
        // isolates sigma_2 tightly but is wider than A at sigma_3. Taking the
        // narrower per index alone would give hi_3 = 2.5 > hi_2 = 2.2.
        let mut a = sv(&[(2.9, 3.1), (1.0, 2.5), (1.0, 2.5)], Method::F64Residual);
        let b = sv(
            &[(2.95, 3.05), (2.1, 2.2), (0.5, 2.05)],
            Method::ExtendedResidual,
        );
        a.keep_narrower(b);
        let e = a.enclosures();
        for w in e.windows(2) {
            assert!(w[1].lo() <= w[0].lo() && w[1].hi() <= w[0].hi(), "{e:?}");
        }
        assert_eq!((e[2].lo(), e[2].hi()), (1.0, 2.2));
        assert_eq!(a.values[1].method, Method::ExtendedResidual);
    }
}
