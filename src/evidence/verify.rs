//! `specbound verify`: checks a certificate.
//!
//! **Without a model** every aggregate is re-derived from the stated inputs
//! with an independent MPFR interval evaluation (`super::mpfr_interval`)
//! and must lie inside the stated interval; `p_opt` must be exactly the set
//! of grid points that the stated contributions allow as minimisers. This
//! proves the certificate consistent, not true.
//!
//! **With the model** the weight-file hashes and the architecture must
//! match, and every spectral quantity of every matrix (singular values,
//! structural zeros, norms, stable rank, rank) is recomputed from the
//! weights. A stated interval is *confirmed* only when it contains the
//! recomputed enclosure, which contains the exact value, so the stated
//! interval does too. When the recomputed enclosure sticks out of the stated
//! one, the matrix is recomputed at higher precision (extended, then MPFR at
//! 128 and 256 bits where its cost allows) until the enclosure lies inside
//! (confirmed), is disjoint from the stated interval (*refuted*: the stated
//! interval misses the exact value), or the stages run out (*unconfirmed*).
//! Every other quantity (alpha, xi, gamma, scale, contributions, minima,
//! p_opt, both bounds) is a function of the spectral quantities and the
//! parameters, so the internal re-derivation confirms it once its inputs are
//! confirmed: the exact value lies in the MPFR evaluation over intervals
//! that contain the exact inputs, which the stated interval contains.

use std::path::Path;

use rayon::prelude::*;

use rug::float::Round;

use super::mpfr_interval::{MI, PREC};
use super::{Answer, EvidenceError};
use crate::arch::{self, ArchOverrides, MatrixId, MatrixType, ProxyMatrix, ProxySource};
use crate::certificate::{
    spectrum_quantities, CertInterval, Certificate, MatrixEntry, MeasuresEntry, Quantity,
    QuantityId, RawWeightEntry,
};
use crate::certify::certify_matrix;
use crate::enclosure::{Enclosure, Inconclusive};
use crate::io::checkpoint::{Checkpoint, FileHash};
use crate::linalg::{Precision, SingularValues, SvdOptions, AUTO_MPFR_MAX_WORK};
use crate::spectral::{self, SpectralSummary};

/// Outcome of a verification.
#[derive(Debug, Default)]
pub struct Verdict {
    /// Checks that passed (containments confirmed, hashes matched, ...).
    pub checks: usize,
    /// The first failed check or refuted quantity (exit 1): which and why.
    pub failure: Option<String>,
    /// Quantities that could be neither confirmed nor refuted (exit 3),
    /// each naming the quantity and both intervals.
    pub unconfirmed: Vec<String>,
}

impl Verdict {
    /// `Refuted` when a check failed or a quantity is refuted, else
    /// `Undecided` when some quantity is unconfirmed, else `Holds` (the
    /// certificate holds).
    pub fn answer(&self) -> Answer {
        Answer::of(self.failure.is_some(), !self.unconfirmed.is_empty())
    }

    /// Adds the checks, the first failure and the unconfirmed quantities of `other`.
    pub(crate) fn merge(mut self, other: Verdict) -> Verdict {
        self.checks += other.checks;
        if self.failure.is_none() {
            self.failure = other.failure;
        }
        self.unconfirmed.extend(other.unconfirmed);
        self
    }
}

struct Checker {
    v: Verdict,
}

impl Checker {
    fn fail(&mut self, msg: String) {
        if self.v.failure.is_none() {
            self.v.failure = Some(msg);
        }
    }
    /// The stated interval must contain the implied one.
    fn contains(&mut self, at: &str, stated: CertInterval, implied: &MI, from: &str) {
        if self.v.failure.is_some() {
            return;
        }
        if implied.inside(stated.lo, stated.hi) {
            self.v.checks += 1;
        } else {
            self.fail(format!(
                "{at}: stated {} does not contain {} implied by {from}",
                bounds(stated.lo, stated.hi),
                implied.describe()
            ));
        }
    }
    /// Two enclosures of the same exact value must intersect.
    fn meets(&mut self, at: &str, stated: CertInterval, implied: &MI, from: &str) {
        if self.v.failure.is_some() {
            return;
        }
        if implied.meets(stated.lo, stated.hi) {
            self.v.checks += 1;
        } else {
            self.fail(format!(
                "{at}: stated {} is disjoint from {} implied by {from}",
                bounds(stated.lo, stated.hi),
                implied.describe()
            ));
        }
    }
}

fn mi(x: CertInterval) -> MI {
    MI::from_f64(x.lo.max(0.0), x.hi.max(0.0)).expect("validated finite lo <= hi")
}

/// `sum_i sigma_i^(k/m)` for k = 1..=2m, as `(root_m(sigma_i))^k` sums.
fn power_sums(w: &MatrixEntry, m: usize) -> Vec<MI> {
    let mut sums = vec![MI::int(0); 2 * m + 1];
    for s in &w.singular_values {
        let r = mi(*s).pow_q(1, m as u32);
        let mut acc = MI::int(1);
        for sum in sums.iter_mut().skip(1) {
            acc = acc.mul(&r);
            *sum = sum.add(&acc);
        }
    }
    sums
}

/// The quantities of one matrix that its singular values imply.
struct SpectrumView<'a> {
    singular_values: &'a [CertInterval],
    spectral_norm: CertInterval,
    nuclear_norm: CertInterval,
    frobenius_norm: CertInterval,
    rank: CertInterval<u64>,
    stable_rank: Option<CertInterval>,
}

impl<'a> SpectrumView<'a> {
    /// The stated spectral keys of a part's or spectra's entry.
    fn of(w: &'a crate::certificate::SpectrumEntry) -> Self {
        SpectrumView {
            singular_values: &w.singular_values,
            spectral_norm: w.spectral_norm,
            nuclear_norm: w.nuclear_norm,
            frobenius_norm: w.frobenius_norm,
            rank: w.rank,
            stable_rank: w.stable_rank,
        }
    }
}

/// The per-matrix re-derivation: sigma_1, the nuclear norm, the Frobenius
/// norm (intersects), the rank and the stable rank from the stated singular
/// values and norms.
fn check_spectrum(ck: &mut Checker, at: &str, w: &SpectrumView) {
    // No stated nonzero value: every singular value is a structural zero
    // (validation checks min(rows, cols) >= 1).
    let top = w
        .singular_values
        .first()
        .copied()
        .unwrap_or(CertInterval::point(0.0));
    ck.contains(
        &format!("{at}.spectral_norm"),
        w.spectral_norm,
        &mi(top),
        "sigma_1 (singular_values[0])",
    );
    let nuc = w
        .singular_values
        .iter()
        .fold(MI::int(0), |acc, s| acc.add(&mi(*s)));
    ck.contains(
        &format!("{at}.nuclear_norm"),
        w.nuclear_norm,
        &nuc,
        "the sum of the singular values",
    );
    let sq = w
        .singular_values
        .iter()
        .fold(MI::int(0), |acc, s| acc.add(&mi(*s).pow_q(2, 1)))
        .sqrt();
    ck.meets(
        &format!("{at}.frobenius_norm"),
        w.frobenius_norm,
        &sq,
        "sqrt(sum sigma^2)",
    );
    let rank_lo = w.singular_values.iter().filter(|s| s.lo > 0.0).count() as u64;
    let rank_hi = w.singular_values.iter().filter(|s| s.hi > 0.0).count() as u64;
    if ck.v.failure.is_none() {
        if w.rank.lo <= rank_lo && rank_hi <= w.rank.hi {
            ck.v.checks += 1;
        } else {
            ck.fail(format!("{at}.rank: stated [{}, {}] does not contain [{rank_lo}, {rank_hi}] implied by the singular values", w.rank.lo, w.rank.hi));
        }
    }
    if let Some(sr) = w.stable_rank {
        match mi(w.frobenius_norm)
            .pow_q(2, 1)
            .div(&mi(w.spectral_norm).pow_q(2, 1))
        {
            Some(x) => ck.contains(
                &format!("{at}.stable_rank"),
                sr,
                &x,
                "frobenius_norm^2 / spectral_norm^2",
            ),
            None => ck.fail(format!(
                "{at}.stable_rank: stated although spectral_norm may be 0"
            )),
        }
    }
}

/// Re-derives what a part allows (it has no proxies and no bounds): for
/// every matrix, sigma_1, the nuclear, Frobenius and stable-rank relations
/// and the rank from its stated singular values, as [`verify_internal`]
/// does for a certificate's matrices. This proves the part consistent, not
/// true.
pub(crate) fn verify_part(p: &crate::certificate::Part) -> Verdict {
    let mut ck = Checker {
        v: Verdict::default(),
    };
    for (i, w) in p.matrices.iter().enumerate() {
        check_spectrum(&mut ck, &format!("$.matrices[{i}]"), &SpectrumView::of(w));
        if ck.v.failure.is_some() {
            break;
        }
    }
    ck.v
}

/// Re-derives every aggregate of a validated certificate from its stated
/// inputs (see the module documentation).
pub fn verify_internal(c: &Certificate) -> Verdict {
    let mut ck = Checker {
        v: Verdict::default(),
    };
    if let Some(spectra) = &c.spectra {
        verify_no_bound(c, spectra, &mut ck);
        return ck.v;
    }
    if let Some(f) = bound_presence_failure(c) {
        ck.fail(f);
        return ck.v;
    }
    let Some(l_phi) = MI::decimal(&c.parameters.l_phi) else {
        ck.fail(format!(
            "$.parameters.l_phi: \"{}\" is not a nonnegative decimal",
            crate::io::escape(&c.parameters.l_phi)
        ));
        return ck.v;
    };
    // Per-matrix aggregates of the singular values.
    for (i, w) in c.matrices.iter().enumerate() {
        check_spectrum(
            &mut ck,
            &format!("$.matrices[{i}]"),
            &SpectrumView {
                singular_values: &w.singular_values,
                spectral_norm: w.spectral_norm,
                nuclear_norm: w.nuclear_norm,
                frobenius_norm: w.frobenius_norm,
                rank: w.rank,
                stable_rank: w.stable_rank,
            },
        );
    }
    let norms = StatedNorms(c);
    let alpha = norms.alphas(&l_phi);
    let xi = norms.xis();
    check_layers(&mut ck, c, &alpha, &xi);
    let ours = check_bound_terms(&mut ck, &norms, &alpha);
    let Some(bounds) = &c.bounds else {
        ck.fail("$.bounds: missing".into());
        return ck.v;
    };
    ck.contains(
        "$.bounds.ours",
        bounds.ours,
        &ours,
        "the stated minimum contributions plus sqrt(L)",
    );
    let inner = (0..c.model.layers).fold(MI::int(1), |acc, l| {
        acc.add(&alpha[l].pow_q(2, 3).mul(&xi[l]))
    });
    ck.contains(
        "$.bounds.edelman",
        bounds.edelman,
        &inner.pow_q(3, 2),
        "alpha and xi of every layer",
    );
    verify_measures(c, &mut ck);
    ck.v
}

/// The stated norms of a certificate's paper matrices, as MPFR intervals,
/// and the per-layer factors of the bounds made of them.
struct StatedNorms<'a>(&'a Certificate);

impl StatedNorms<'_> {
    fn entry(&self, layer: usize, head: Option<usize>, kind: MatrixType) -> &MatrixEntry {
        self.0
            .matrix(MatrixId {
                layer,
                head,
                kind,
                expert: None,
            })
            .expect("a validated certificate holds every matrix")
    }

    /// The stated spectral norm.
    fn c2(&self, l: usize, h: Option<usize>, k: MatrixType) -> MI {
        mi(self.entry(l, h, k).spectral_norm)
    }

    /// The stated (2,1)-norm.
    fn n21(&self, l: usize, h: Option<usize>, k: MatrixType) -> MI {
        mi(self.entry(l, h, k).norm_21)
    }

    /// alpha of every layer: the product of the later layers' factors
    /// `l_phi c(M_in) c(M_out) sum_h c(V~_h) (4 c(QK_h) + 1)`.
    fn alphas(&self, l_phi: &MI) -> Vec<MI> {
        let (layers, heads) = (self.0.model.layers, self.0.model.heads);
        let factor: Vec<MI> = (0..layers)
            .map(|k| {
                let mut sum = MI::int(0);
                for h in (0..heads).map(Some) {
                    let qk = self
                        .c2(k, h, MatrixType::QK)
                        .mul(&MI::int(4))
                        .add(&MI::int(1));
                    sum = sum.add(&self.c2(k, h, MatrixType::VTilde).mul(&qk));
                }
                l_phi
                    .mul(&self.c2(k, None, MatrixType::MIn))
                    .mul(&self.c2(k, None, MatrixType::MOut))
                    .mul(&sum)
            })
            .collect();
        (0..layers)
            .map(|l| factor[l + 1..].iter().fold(MI::int(1), |acc, f| acc.mul(f)))
            .collect()
    }

    /// xi of every layer (a sum of (2,1)-norm terms to the power 2/3).
    fn xis(&self) -> Vec<MI> {
        let (layers, heads) = (self.0.model.layers, self.0.model.heads);
        (0..layers)
            .map(|l| {
                let (cin, cout) = (
                    self.c2(l, None, MatrixType::MIn),
                    self.c2(l, None, MatrixType::MOut),
                );
                let mut x = MI::int(0);
                for h in (0..heads).map(Some) {
                    let cv = self.c2(l, h, MatrixType::VTilde);
                    x = x.add(
                        &cout
                            .mul(&cin)
                            .mul(&cv)
                            .mul(&self.n21(l, h, MatrixType::QK))
                            .pow_q(2, 3),
                    );
                    x = x.add(
                        &cout
                            .mul(&cin)
                            .mul(&self.n21(l, h, MatrixType::VTilde))
                            .pow_q(2, 3),
                    );
                }
                x = x.add(&cout.mul(&self.n21(l, None, MatrixType::MIn)).pow_q(2, 3));
                x.add(&self.n21(l, None, MatrixType::MOut).pow_q(2, 3))
            })
            .collect()
    }

    /// gamma of a matrix; `None` for a cross-attention matrix, of which no
    /// bound is made.
    fn gamma(&self, w: &MatrixEntry) -> Option<MI> {
        let l = w.layer;
        let (cin, cout) = (
            self.c2(l, None, MatrixType::MIn),
            self.c2(l, None, MatrixType::MOut),
        );
        Some(match w.kind {
            MatrixType::QK => MI::int(2)
                .mul(&self.c2(l, w.head, MatrixType::VTilde))
                .mul(&cout)
                .mul(&cin),
            MatrixType::VTilde => cout.mul(&cin),
            MatrixType::MIn => cout,
            MatrixType::MOut => MI::int(1),
            MatrixType::QKCross | MatrixType::VTildeCross => return None,
        })
    }
}

/// The stated alpha and xi of every layer contain the implied ones.
fn check_layers(ck: &mut Checker, c: &Certificate, alpha: &[MI], xi: &[MI]) {
    for (l, x) in c.layers.iter().enumerate() {
        ck.contains(
            &format!("$.layers[{l}].alpha"),
            x.alpha,
            &alpha[l],
            "the stated spectral norms and l_phi",
        );
        ck.contains(
            &format!("$.layers[{l}].xi"),
            x.xi,
            &xi[l],
            "the stated spectral and (2,1)-norms",
        );
    }
}

/// Checks every matrix's gamma, scale, contributions, minimum and p_opt;
/// returns the implied `B_ours` (sqrt(L) plus the stated minima).
fn check_bound_terms(ck: &mut Checker, norms: &StatedNorms, alpha: &[MI]) -> MI {
    let c = norms.0;
    let m = c.parameters.grid_m;
    let n = MI::int(c.model.hidden as u64);
    let ll = MI::int(c.model.layers as u64);
    let mut ours = ll.sqrt();
    for (i, w) in c.matrices.iter().enumerate() {
        let at = format!("$.matrices[{i}]");
        let l = w.layer;
        // A certificate with bounds holds none (validation refuses
        // `model.cross_attention` there): no bound is made of them.
        let Some(gamma) = norms.gamma(w) else {
            ck.fail(format!(
                "{at}: a cross-attention matrix in a certificate with bounds (the bound is \
                 made of the paper's matrices only)"
            ));
            break;
        };
        ck.contains(
            &format!("{at}.alpha"),
            w.alpha,
            &alpha[l],
            "the stated spectral norms and l_phi",
        );
        ck.contains(
            &format!("{at}.gamma"),
            w.gamma,
            &gamma,
            "the stated spectral norms",
        );
        let scale = gamma.mul(&alpha[l]).mul(&ll);
        ck.contains(&format!("{at}.scale"), w.scale, &scale, "gamma alpha L");
        if ck.v.failure.is_some() {
            break;
        }
        check_contributions(ck, &at, w, &scale, &n, m);
        check_minimum(ck, &at, w, m);
        ours = ours.add(&mi(w.min_contribution));
    }
    ours
}

/// Every stated contribution contains the one implied by the stated
/// singular values (the rank at p = 0), `scale` and `n`.
fn check_contributions(ck: &mut Checker, at: &str, w: &MatrixEntry, scale: &MI, n: &MI, m: usize) {
    let sums = power_sums(w, m);
    for (k, con) in w.contributions.iter().enumerate() {
        let implied = if k == 0 {
            MI::from_f64(w.rank.lo as f64, w.rank.hi as f64)
                .expect("ranks")
                .mul(n)
                .sqrt()
        } else {
            let (k32, m32) = (k as u32, m as u32);
            let d = k32 + 2 * m32;
            sums[k]
                .pow_q(m32, d)
                .mul(&scale.pow_q(k32, d))
                .mul(&n.pow_q(k32 + m32, d))
        };
        ck.contains(
            &format!("{at}.contributions[{k}].value"),
            con.value,
            &implied,
            "the stated singular values (rank at p = 0), scale and N",
        );
    }
}

/// The stated minimum contribution and minimisers follow from the stated
/// contributions.
fn check_minimum(ck: &mut Checker, at: &str, w: &MatrixEntry, m: usize) {
    let min_hi = w
        .contributions
        .iter()
        .map(|x| x.value.hi)
        .fold(f64::INFINITY, f64::min);
    let min_lo = w
        .contributions
        .iter()
        .map(|x| x.value.lo)
        .fold(f64::INFINITY, f64::min);
    let implied_min = MI::from_f64(min_lo.max(0.0), min_hi.max(min_lo.max(0.0))).expect("finite");
    ck.contains(
        &format!("{at}.min_contribution"),
        w.min_contribution,
        &implied_min,
        "the stated contributions",
    );
    let implied_opt: Vec<usize> = w
        .contributions
        .iter()
        .filter(|x| x.value.lo <= min_hi)
        .map(|x| x.p_fraction.k)
        .collect();
    let stated_opt: Vec<usize> = w.p_opt_fraction.iter().map(|g| g.k).collect();
    if ck.v.failure.is_none() {
        if implied_opt == stated_opt {
            ck.v.checks += 1;
        } else {
            ck.fail(format!(
                "{at}.p_opt: stated {stated_opt:?} but the stated contributions allow exactly {implied_opt:?} (as k/{m})"
            ));
        }
    }
}

/// Whether the certificate states a bound exactly when the paper's reasoning
/// gives one for its architecture (`arch::families::bound_absent_reason`),
/// and, when it states none, the family's reason: `Some(failure)` when not.
fn bound_presence_failure(c: &Certificate) -> Option<String> {
    let arch_name = crate::io::escape(&c.model.architecture);
    let want = arch::families::bound_absent_reason(
        &c.model.architecture,
        c.parameters.stack.as_ref().map(|s| s.name.as_str()),
    );
    match (want, &c.bounds, c.bound_absent.as_deref()) {
        (None, Some(_), None) => None,
        (None, _, _) => Some(format!(
            "$.bound_absent: the certificate states no bound, but the paper's reasoning gives one \
             for architecture '{arch_name}'"
        )),
        (Some(_), Some(_), _) => Some(format!(
            "$.bounds: stated, but the paper's reasoning gives no bound for architecture \
             '{arch_name}'"
        )),
        (Some(w), None, Some(s)) if w == s => None,
        (Some(_), None, Some(_)) => Some(format!(
            "$.bound_absent: not this program's reason for architecture '{arch_name}' \
             (docs/architectures.md)"
        )),
        (Some(_), None, None) => Some("$.bound_absent: missing".into()),
    }
}

/// [`verify_internal`] of a certificate without a bound: the architecture
/// has no bound and the reason is the family's; every stated spectrum is
/// consistent (sigma_1, nuclear, Frobenius, stable rank, rank from the
/// singular values); the measures, when stated, re-derive.
fn verify_no_bound(
    c: &Certificate,
    spectra: &[crate::certificate::SpectrumEntry],
    ck: &mut Checker,
) {
    if let Some(f) = bound_presence_failure(c) {
        ck.fail(f);
        return;
    }
    ck.v.checks += 1;
    for (i, w) in spectra.iter().enumerate() {
        check_spectrum(ck, &format!("$.spectra[{i}]"), &SpectrumView::of(w));
        if ck.v.failure.is_some() {
            return;
        }
    }
    verify_measures(c, ck);
}

/// A signed interval over MPFR for the log measures: `lo` may be `-inf`
/// (the log of an interval reaching 0), `hi` `+inf`.
struct Signed {
    lo: rug::Float,
    hi: rug::Float,
}

impl Signed {
    fn zero() -> Self {
        Signed {
            lo: rug::Float::with_val(PREC, 0),
            hi: rug::Float::with_val(PREC, 0),
        }
    }

    /// `ln x` of a nonnegative interval, rounded outward (`ln 0 = -inf`).
    fn ln(x: &MI) -> Self {
        Signed {
            lo: rug::Float::with_val_round(PREC, x.lo.ln_ref(), Round::Down).0,
            hi: rug::Float::with_val_round(PREC, x.hi.ln_ref(), Round::Up).0,
        }
    }

    fn add(&self, o: &Signed) -> Self {
        Signed {
            lo: rug::Float::with_val_round(PREC, &self.lo + &o.lo, Round::Down).0,
            hi: rug::Float::with_val_round(PREC, &self.hi + &o.hi, Round::Up).0,
        }
    }

    /// `self * q` for an exact positive rational `q = num/den` (two
    /// rounded steps, each outward: both are increasing in the operand).
    fn scale(&self, num: u32, den: u32) -> Self {
        let f = |x: &rug::Float, r: Round| {
            let p = rug::Float::with_val_round(PREC, x * num, r).0;
            rug::Float::with_val_round(PREC, &p / den, r).0
        };
        Signed {
            lo: f(&self.lo, Round::Down),
            hi: f(&self.hi, Round::Up),
        }
    }

    fn finite(&self) -> bool {
        self.lo.is_finite() && self.hi.is_finite()
    }

    fn inside(&self, x: CertInterval) -> bool {
        self.finite() && x.lo <= self.lo && self.hi <= x.hi
    }

    fn describe(&self) -> String {
        bounds(
            self.lo.to_f64_round(Round::Down),
            self.hi.to_f64_round(Round::Up),
        )
    }
}

/// `a / b` of nonnegative intervals, `[0, +inf]` when `b` may be 0.
fn div_or_unbounded(a: &MI, b: &MI) -> MI {
    a.div(b).unwrap_or_else(|| MI {
        lo: rug::Float::with_val(PREC, 0),
        hi: rug::Float::with_val(PREC, rug::float::Special::Infinity),
    })
}

/// Re-derives every measure from the stated raw norms (`docs/measures.md`)
/// in MPFR interval arithmetic: a stated measure must contain the implied
/// interval; a measure that may be absent (a spectral complexity beyond
/// binary64, an init log at a zero distance) may be absent only when the
/// implied interval is not finite in binary64.
fn verify_measures(c: &Certificate, ck: &mut Checker) {
    let (Some(raw), Some(ms)) = (&c.raw_weights, &c.measures) else {
        return;
    };
    let norms: Vec<(MI, MI, MI)> = raw
        .iter()
        .map(|w| {
            (
                mi(w.spectral_norm),
                mi(w.frobenius_norm),
                mi(w.norm_21_rows),
            )
        })
        .collect();
    let s = RawSums::of(&norms);
    let d = raw.len() as u32;
    let ln_d = Signed::ln(&MI::int(d as u64));
    ck.signed_measure("log_prod_of_spec", ms.log_prod_of_spec, &s.log_spec);
    ck.signed_measure(
        "log_sum_of_spec",
        ms.log_sum_of_spec,
        &ln_d.add(&s.log_spec.scale(1, d)),
    );
    ck.signed_measure("log_prod_of_fro", ms.log_prod_of_fro, &s.log_fro);
    ck.signed_measure(
        "log_sum_of_fro",
        ms.log_sum_of_fro,
        &ln_d.add(&s.log_fro.scale(1, d)),
    );
    ck.plain_measure("param_norm", ms.param_norm, &s.fro_sq);
    ck.signed_measure(
        "log_spec_orig",
        ms.log_spec_orig,
        &s.log_spec.add(&Signed::ln(&s.ratio)),
    );
    ck.plain_measure("bartlett", ms.bartlett, &s.prod.mul(&s.sum.pow_q(3, 2)));
    ck.signed_measure(
        "log_bartlett",
        ms.log_bartlett,
        &s.log_s.add(&Signed::ln(&s.sum).scale(3, 2)),
    );
    if c.init_model.is_some() {
        verify_init_measures(raw, &norms, &s, ms, ck);
    }
}

/// The measures of the distance to the initialisation
/// ([`verify_measures`]), from the stated `init_distance` norms.
fn verify_init_measures(
    raw: &[RawWeightEntry],
    norms: &[(MI, MI, MI)],
    s: &RawSums,
    ms: &MeasuresEntry,
    ck: &mut Checker,
) {
    let (mut fd, mut sd, mut ratio0, mut sum0) = (MI::int(0), MI::int(0), MI::int(0), MI::int(0));
    for (w, (sn, _, _)) in raw.iter().zip(norms) {
        let Some(e) = &w.init_distance else {
            return; // validation insists on it
        };
        let (es, ef, en) = (
            mi(e.spectral_norm),
            mi(e.frobenius_norm),
            mi(e.norm_21_rows),
        );
        let s2 = sn.mul(sn);
        let f2 = ef.mul(&ef);
        fd = fd.add(&f2);
        sd = sd.add(&es.mul(&es));
        ratio0 = ratio0.add(&div_or_unbounded(&f2, &s2));
        sum0 = sum0.add(&div_or_unbounded(&en, sn).pow_q(2, 3));
    }
    ck.plain_measure("frobenius_distance", ms.frobenius_distance, &fd);
    ck.plain_measure("dist_spec_init", ms.dist_spec_init, &sd);
    ck.signed_measure(
        "log_spec_init",
        ms.log_spec_init,
        &s.log_spec.add(&Signed::ln(&ratio0)),
    );
    ck.plain_measure(
        "bartlett_init",
        ms.bartlett_init,
        &s.prod.mul(&sum0.pow_q(3, 2)),
    );
    ck.signed_measure(
        "log_bartlett_init",
        ms.log_bartlett_init,
        &s.log_s.add(&Signed::ln(&sum0).scale(3, 2)),
    );
}

/// The sums over the layers' stated (spectral, Frobenius, (2,1)-rows)
/// norms that the measures are made of.
struct RawSums {
    /// sum ln s^2.
    log_spec: Signed,
    /// sum ln f^2.
    log_fro: Signed,
    /// sum ln s.
    log_s: Signed,
    /// sum f^2.
    fro_sq: MI,
    /// sum f^2 / s^2.
    ratio: MI,
    /// prod s.
    prod: MI,
    /// sum (n21 / s)^(2/3).
    sum: MI,
}

impl RawSums {
    fn of(norms: &[(MI, MI, MI)]) -> RawSums {
        let (mut log_spec, mut log_fro) = (Signed::zero(), Signed::zero());
        let (mut fro_sq, mut ratio, mut prod, mut sum) =
            (MI::int(0), MI::int(0), MI::int(1), MI::int(0));
        let mut log_s = Signed::zero();
        for (sn, f, n21) in norms {
            let s2 = sn.mul(sn);
            let f2 = f.mul(f);
            log_spec = log_spec.add(&Signed::ln(&s2));
            log_fro = log_fro.add(&Signed::ln(&f2));
            log_s = log_s.add(&Signed::ln(sn));
            fro_sq = fro_sq.add(&f2);
            ratio = ratio.add(&div_or_unbounded(&f2, &s2));
            prod = prod.mul(sn);
            sum = sum.add(&div_or_unbounded(n21, sn).pow_q(2, 3));
        }
        RawSums {
            log_spec,
            log_fro,
            log_s,
            fro_sq,
            ratio,
            prod,
            sum,
        }
    }
}

/// Where the measures are implied from, in messages.
const MEASURES_FROM: &str = "the stated raw_weights";

impl Checker {
    /// A measure that may be negative (a log): the stated interval must
    /// contain `x`; absent only when `x` is not finite in binary64.
    fn signed_measure(&mut self, name: &str, stated: Option<CertInterval>, x: &Signed) {
        if self.v.failure.is_some() {
            return;
        }
        let from = MEASURES_FROM;
        let at = format!("$.measures.{name}");
        match stated {
            Some(st) if x.inside(st) => self.v.checks += 1,
            Some(st) => self.fail(format!(
                "{at}: stated {} does not contain {} implied by {from}",
                bounds(st.lo, st.hi),
                x.describe()
            )),
            None if !(x.lo > f64::MIN && x.hi < f64::MAX) => self.v.checks += 1,
            None => self.fail(format!(
                "{at}: absent, but {from} imply the finite {}",
                x.describe()
            )),
        }
    }

    /// A nonnegative measure: the stated interval must contain `x`; absent
    /// only when `x` is not finite in binary64.
    fn plain_measure(&mut self, name: &str, stated: Option<CertInterval>, x: &MI) {
        if self.v.failure.is_some() {
            return;
        }
        let from = MEASURES_FROM;
        match stated {
            Some(st) => self.contains(&format!("$.measures.{name}"), st, x, from),
            None if !(x.hi < f64::MAX) => self.v.checks += 1,
            None => self.fail(format!(
                "$.measures.{name}: absent, but {from} imply the finite {}",
                x.describe()
            )),
        }
    }
}

/// One way to narrow a recomputed enclosure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// The singular values again, at this precision.
    Svd(Precision),
    /// The Frobenius, (2,1) and (1,1) norms from the entries in MPFR at
    /// 128 bits (`spectral::enclose_entry_norms_mpfr`).
    EntryNormsMpfr,
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stage::Svd(p) => write!(f, "{p}"),
            Stage::EntryNormsMpfr => f.write_str("MPFR entry norms"),
        }
    }
}

/// The refinement stages tried after the certificate's own precision, in
/// order, for a matrix of `rows x cols`: the extended stage (unless already
/// used), the entry norms in MPFR, then MPFR singular values at 128 and 256
/// bits where `max(rows, cols) * min(rows, cols)^2 <=` [`AUTO_MPFR_MAX_WORK`],
/// the cost limit of `--precision auto`.
pub(crate) fn refinement_stages(stated: Precision, rows: usize, cols: usize) -> Vec<Stage> {
    let (m, n) = (rows.max(cols), rows.min(cols));
    let mpfr_ok = m.saturating_mul(n).saturating_mul(n) <= AUTO_MPFR_MAX_WORK;
    let mut v = Vec::new();
    if matches!(stated, Precision::F64 | Precision::Auto) {
        v.push(Stage::Svd(Precision::Extended));
    }
    v.push(Stage::EntryNormsMpfr);
    if mpfr_ok {
        for bits in [128u32, 256] {
            if !matches!(stated, Precision::Mpfr(b) if b >= bits) {
                v.push(Stage::Svd(Precision::Mpfr(bits)));
            }
        }
    }
    v
}

/// The spectral quantities of a recomputed matrix, keyed as in the certificate.
fn recomputed(sv: &SingularValues, s: &SpectralSummary) -> Vec<(Quantity, CertInterval)> {
    let mut v = vec![
        (Quantity::SpectralNorm, CertInterval::from(s.spectral_norm)),
        (
            Quantity::FrobeniusNorm,
            CertInterval::from(s.frobenius_norm),
        ),
        (Quantity::NuclearNorm, CertInterval::from(s.nuclear_norm)),
        (Quantity::Norm21, CertInterval::from(s.norm_21)),
        (Quantity::Norm11, CertInterval::from(s.norm_11)),
        (
            Quantity::Rank,
            CertInterval {
                lo: s.rank.lo as f64,
                hi: s.rank.hi as f64,
            },
        ),
    ];
    if let Some(sr) = &s.stable_rank {
        v.push((Quantity::StableRank, CertInterval::from(*sr)));
    }
    for (j, x) in sv.values.iter().enumerate() {
        v.push((Quantity::SingularValue(j), CertInterval::from(x.enclosure)));
    }
    v
}

/// A stated or recomputed interval in a message, as the one formatter
/// prints intervals in full (`[lo, hi]`, outward-rounded decimals that
/// contain the binary64 ends; [`proofs/outward-decimal.md`](crate::proofs::outward_decimal), L21).
fn bounds(lo: f64, hi: f64) -> String {
    crate::report::fmt::interval(lo, hi, crate::report::fmt::Style::Bounds)
}

/// A recomputed enclosure for messages, rounded outward to decimals
/// (`crate::report::fmt`), as [`bounds`] quotes stated intervals.
fn outward(x: &CertInterval) -> String {
    crate::report::fmt::interval(x.lo, x.hi, crate::report::fmt::Style::Bounds)
}

/// What became of one matrix's spectral quantities.
struct MatrixCheck {
    confirmed: usize,
    refuted: Option<String>,
    unconfirmed: Vec<String>,
}

/// Enclosures of the Frobenius, the (2,1)- and the (1,1)-norm of a proxy
/// matrix from its entries (f64 routes, L12, L4; or MPFR, L13).
type EntryNorms = (Enclosure, Enclosure, Enclosure);

fn entry_norms(pm: &ProxyMatrix, mpfr: bool) -> Result<EntryNorms, Inconclusive> {
    match (&pm.source, mpfr) {
        (ProxySource::Dense(a), false) => {
            let frob = spectral::enclose_frobenius_from_entries(a)?;
            let (n21, n11) = spectral::enclose_entry_norms(a)?;
            Ok((frob, n21, n11))
        }
        (ProxySource::Factored { b, c }, false) => spectral::enclose_product_entry_norms(b, c),
        (ProxySource::Dense(a), true) => spectral::enclose_entry_norms_mpfr(a, 128),
        (ProxySource::Factored { b, c }, true) => {
            spectral::enclose_product_entry_norms_mpfr(b, c, 128)
        }
    }
}

/// Both enclose the same exact values: keep their intersection (disjoint
/// would contradict a lemma, so it is reported rather than papered over).
fn intersect(a: EntryNorms, b: EntryNorms) -> Result<EntryNorms, Inconclusive> {
    let both = |x: Enclosure, y: Enclosure| {
        x.intersect(&y).ok_or_else(|| {
            Inconclusive::new(
                "internal consistency check failed: two entry-norm enclosures are disjoint",
            )
        })
    };
    Ok((both(a.0, b.0)?, both(a.1, b.1)?, both(a.2, b.2)?))
}

fn check_matrix(
    at: &str,
    w: &crate::certificate::SpectrumEntry,
    pm: &ProxyMatrix,
    precision: Precision,
) -> Result<MatrixCheck, String> {
    if (pm.rows, pm.cols) != (w.rows, w.cols) {
        return Ok(MatrixCheck {
            confirmed: 0,
            refuted: Some(format!(
                "{at} ({}): the certificate says {} x {}, the model's matrix is {} x {}",
                w.id(),
                w.rows,
                w.cols,
                pm.rows,
                pm.cols
            )),
            unconfirmed: Vec::new(),
        });
    }
    let mut pending: Vec<_> = spectrum_quantities(w, at);
    let why = |e: Inconclusive| format!("{}: {}", w.id(), e.reason);
    let (mut sv, _) = certify_matrix(pm, &seq_svd_options(precision)).map_err(|e| e.reason)?;
    let mut norms = entry_norms(pm, false).map_err(why)?;
    let mut summary = spectral::summarize_with(&sv, norms.0, norms.1, norms.2).map_err(why)?;
    let mut method = precision.to_string();
    let mut stages = refinement_stages(precision, w.rows, w.cols).into_iter();
    let mut confirmed = 0;
    loop {
        let fresh = recomputed(&sv, &summary);
        pending = match settle(pending, &fresh, &method, &mut confirmed) {
            Ok(still) => still,
            Err(refuted) => {
                return Ok(MatrixCheck {
                    confirmed,
                    refuted: Some(refuted),
                    unconfirmed: Vec::new(),
                })
            }
        };
        if pending.is_empty() {
            break;
        }
        let Some(stage) = next_stage(&mut stages, &pending) else {
            return Ok(MatrixCheck {
                confirmed,
                refuted: None,
                unconfirmed: unconfirmed_lines(&pending, &fresh, &method),
            });
        };
        match stage {
            // Both enclosures contain the exact values: keep the narrower, index by index.
            Stage::Svd(p) => {
                if let Ok((better, _)) = certify_matrix(pm, &seq_svd_options(p)) {
                    sv.keep_narrower(better);
                }
            }
            Stage::EntryNormsMpfr => {
                if let Ok(m) = entry_norms(pm, true) {
                    norms = intersect(norms, m).map_err(why)?;
                }
            }
        }
        summary = spectral::summarize_with(&sv, norms.0, norms.1, norms.2).map_err(why)?;
        method = stage.to_string();
    }
    Ok(MatrixCheck {
        confirmed,
        refuted: None,
        unconfirmed: Vec::new(),
    })
}

/// A stated quantity of a matrix, not yet confirmed.
type Pending = Vec<(QuantityId, CertInterval)>;

/// The options of one recomputation at `precision`, sequential (the
/// matrices are checked in parallel).
fn seq_svd_options(precision: Precision) -> SvdOptions {
    SvdOptions {
        precision,
        par: faer::Par::Seq,
        ..SvdOptions::default()
    }
}

/// Compares each pending quantity with its `fresh` recomputation (by
/// `method`): counts the confirmed ones, returns those still open, or the
/// message of the first refuted one.
fn settle(
    pending: Pending,
    fresh: &[(Quantity, CertInterval)],
    method: &str,
    confirmed: &mut usize,
) -> Result<Pending, String> {
    let mut still = Vec::new();
    for (qid, stated) in pending {
        let Some((_, new)) = fresh.iter().find(|(q, _)| *q == qid.quantity) else {
            // Stated but not certified from the weights (a stable rank
            // whose sigma_1 > 0 was not certified): refinement may help.
            still.push((qid, stated));
            continue;
        };
        if stated.contains(new) {
            *confirmed += 1;
        } else if stated.disjoint(new) {
            return Err(format!(
                "{} ({qid}): stated {} is disjoint from {} recomputed from the model ({method}): the stated interval misses the exact value",
                qid.path, bounds(stated.lo, stated.hi), outward(new)
            ));
        } else {
            still.push((qid, stated));
        }
    }
    Ok(still)
}

/// The next refinement stage that can narrow a pending quantity: MPFR
/// entry norms for the entry-norm quantities, a finer SVD for the spectral
/// ones; `None` when the stages are spent.
fn next_stage(stages: &mut impl Iterator<Item = Stage>, pending: &Pending) -> Option<Stage> {
    let entry_norm_pending = pending.iter().any(|(q, _)| {
        matches!(
            q.quantity,
            Quantity::FrobeniusNorm | Quantity::Norm21 | Quantity::Norm11 | Quantity::StableRank
        )
    });
    let spectrum_pending = pending
        .iter()
        .any(|(q, _)| !matches!(q.quantity, Quantity::Norm21 | Quantity::Norm11));
    stages.find(|s| match s {
        Stage::EntryNormsMpfr => entry_norm_pending,
        Stage::Svd(_) => spectrum_pending,
    })
}

/// One line per quantity left unconfirmed after the last stage (`method`).
fn unconfirmed_lines(
    pending: &Pending,
    fresh: &[(Quantity, CertInterval)],
    method: &str,
) -> Vec<String> {
    pending
        .iter()
        .map(|(qid, stated)| {
            let new = fresh
                .iter()
                .find(|(q, _)| *q == qid.quantity)
                .map(|(_, x)| outward(x))
                .unwrap_or_else(|| "nothing (not certified)".into());
            format!(
                "{} ({qid}): stated {} neither contains nor excludes {new} recomputed from the model (last stage: {method})",
                qid.path, bounds(stated.lo, stated.hi)
            )
        })
        .collect()
}

/// Default of [`VerifyOptions::max_mpfr_bits`]: four times the 256 bits of
/// the last refinement stage. The cost of an MPFR singular value
/// decomposition grows faster than linearly in the bits (an 8 x 8 matrix at
/// `mpfr:1000000` takes minutes), and the precision is stated by the
/// untrusted certificate, so it must not set the cost of checking it.
pub const DEFAULT_MAX_MPFR_BITS: u32 = 1024;

/// What `verify --model` may spend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VerifyOptions {
    /// The largest MPFR precision a certificate may state (`mpfr:BITS` in
    /// `$.parameters.precision`) for its recomputation from the weights; a
    /// certificate stating more is refused before the model is read
    /// ([`EvidenceError::OverBudget`]) unless the user raises this
    /// (the fronts' `--max-precision-bits`).
    pub max_mpfr_bits: u32,
}

impl Default for VerifyOptions {
    fn default() -> Self {
        Self {
            max_mpfr_bits: DEFAULT_MAX_MPFR_BITS,
        }
    }
}

/// `Err(OverBudget)` when the certificate's stated precision is beyond
/// what `opts` allows.
pub fn check_budget(c: &Certificate, opts: &VerifyOptions) -> Result<(), EvidenceError> {
    match c.parameters.precision {
        Precision::Mpfr(bits) if bits > opts.max_mpfr_bits => Err(EvidenceError::OverBudget {
            at: "$.parameters.precision".into(),
            message: format!(
                "the certificate states mpfr:{bits}, beyond the budget of {} bits for recomputing \
                 it from the weights (the cost grows faster than the bits); raise the budget \
                 (--max-precision-bits) to check it",
                opts.max_mpfr_bits
            ),
        }),
        _ => Ok(()),
    }
}

/// The one line of a weight file whose SHA-256 is not the certificate's:
/// which file, the certificate's and the file's hash (first 12 hex digits),
/// and what it means.
fn hash_mismatch(i: usize, file: &str, stated: &str, found: &str) -> String {
    let short = |h: &str| h.chars().take(12).collect::<String>();
    format!(
        "$.model.files[{i}].sha256: '{}' has SHA-256 {}..., the certificate expects {}...: \
         the certificate is for other weights (a different or changed file), not for this model",
        crate::io::escape(file),
        short(found),
        crate::io::escape(&short(stated))
    )
}

/// Whether the certificate is of weights held in memory (its one weight
/// file is [`MEMORY_LABEL`](crate::io::memory::MEMORY_LABEL)).
fn is_memory_cert(c: &Certificate) -> bool {
    matches!(c.model.files.as_slice(), [f] if f.file == crate::io::memory::MEMORY_LABEL)
}

/// For a certificate of weights in memory: against a model on disk, the
/// one line saying why the hashes cannot vouch for the weights, unless the
/// model is one file whose SHA-256 is the certificate's (the file is the
/// tensors' safetensors serialisation, byte for byte); against a model in
/// memory (`in_memory`), whose one hash is of the same serialisation, a
/// different hash means other tensors.
fn memory_mismatch(c: &Certificate, hashes: &[FileHash], in_memory: bool) -> Option<String> {
    if !is_memory_cert(c) {
        return None;
    }
    let stated = &c.model.files[0].sha256;
    let short = |h: &str| crate::io::escape(&h.chars().take(12).collect::<String>()).into_owned();
    match hashes {
        [h] if &h.sha256 == stated => None,
        [h] if in_memory => Some(format!(
            "$.model.files[0].sha256: the weights in memory have SHA-256 {}..., the certificate \
             expects {}...: the certificate is for other tensors (different names, dtypes, \
             shapes or values), not for these",
            short(&h.sha256),
            short(stated)
        )),
        [h] => Some(format!(
            "$.model.files[0].sha256: the certificate is of weights in memory whose safetensors \
             serialisation has SHA-256 {}..., and '{}' has SHA-256 {}...: only the same tensors \
             saved by safetensors (save_file, no metadata) have that hash, so the hash cannot \
             show that this file holds the certified weights (check the certificate without a \
             model, or certify the file)",
            short(stated),
            crate::io::escape(&h.file),
            short(&h.sha256)
        )),
        _ => Some(format!(
            "$.model.files: the certificate is of weights in memory (one safetensors \
             serialisation, SHA-256 {}...), and the model has {} weight files: the hash can match \
             only one file, the tensors saved by safetensors (save_file, no metadata)",
            short(stated),
            hashes.len()
        )),
    }
}

/// Checks a validated certificate against the model it claims to describe
/// (see the module documentation): hashes, architecture, then every
/// spectral quantity recomputed, refined where needed. Default
/// [`VerifyOptions`].
pub fn verify_with_model(c: &Certificate, model: &Path) -> Result<Verdict, EvidenceError> {
    verify_with_model_progress(c, model, &crate::progress::NoProgress)
}

/// [`verify_with_model`], calling `progress` as each matrix is checked.
pub(crate) fn verify_with_model_progress(
    c: &Certificate,
    model: &Path,
    progress: &dyn crate::progress::Progress,
) -> Result<Verdict, EvidenceError> {
    verify_with_model_options(c, model, &VerifyOptions::default(), progress)
}

/// [`verify_with_model_progress`] under `opts`: a certificate whose stated
/// precision is over budget is refused before the model is opened.
pub(crate) fn verify_with_model_options(
    c: &Certificate,
    model: &Path,
    opts: &VerifyOptions,
    progress: &dyn crate::progress::Progress,
) -> Result<Verdict, EvidenceError> {
    check_budget(c, opts)?;
    let ckpt = Checkpoint::open(model).map_err(|e| EvidenceError::Model(e.to_string()))?;
    let hashes = ckpt
        .file_hashes()
        .map_err(|e| EvidenceError::Model(e.to_string()))?;
    let mut v = Verdict::default();
    if let Err(f) = check_files(c, &hashes, ckpt.is_memory(), &mut v) {
        return Ok(v.failed(f));
    }
    let a = arch::detect(
        &ckpt,
        &ArchOverrides {
            heads: Some(c.model.heads),
            layers: Some(c.model.layers),
            stack: c.parameters.stack.as_ref().map(|s| s.name.clone()),
        },
    )
    .map_err(|e| EvidenceError::Model(e.to_string()))?;
    if let Err(f) = check_stack_and_heads(c, &a, &mut v).and_then(|()| check_model(c, &a, &mut v)) {
        return Ok(v.failed(f));
    }
    let mats: std::collections::HashMap<MatrixId, ProxyMatrix> = arch::extract(&ckpt, &a)
        .map_err(|e| EvidenceError::Model(e.to_string()))?
        .into_iter()
        .map(|p| (p.id, p))
        .collect();
    if a.spec.no_bound.is_some() != c.bounds.is_none() {
        return Ok(v.failed(format!(
            "$.model.architecture: the model is read as '{}', for which the paper's reasoning \
             gives {}, but the certificate states {}",
            crate::io::escape(&a.family),
            if a.spec.no_bound.is_some() {
                "no bound"
            } else {
                "a bound"
            },
            if c.bounds.is_some() { "one" } else { "none" }
        )));
    }
    v.checks += 1;
    let precision = c.parameters.precision;
    check_matrices(c, &mats, progress, &mut v);
    if let Some(raw) = &c.raw_weights {
        check_raw_weights(&ckpt, &a, raw, precision, &mut v)?;
        if c.init_model.is_some() {
            v.unconfirmed.push(
                "$.raw_weights[*].init_distance: not recomputed (verify reads no initialisation)"
                    .into(),
            );
        }
    }
    Ok(v)
}

impl Verdict {
    /// This verdict with `failure` as its failure.
    fn failed(mut self, failure: String) -> Verdict {
        self.failure = Some(failure);
        self
    }
}

/// The model's weight files are the certificate's (by SHA-256, one check
/// each); `Err` is the failure.
fn check_files(
    c: &Certificate,
    hashes: &[FileHash],
    in_memory: bool,
    v: &mut Verdict,
) -> Result<(), String> {
    if let Some(line) = memory_mismatch(c, hashes, in_memory) {
        return Err(line);
    }
    let memory = is_memory_cert(c);
    for (i, f) in c.model.files.iter().enumerate() {
        // Weights from memory: the model's one file must be their
        // serialisation (checked by `memory_mismatch`).
        let found = if memory {
            hashes.first()
        } else {
            hashes.iter().find(|h| h.file == f.file)
        };
        match found {
            None => {
                return Err(format!(
                    "$.model.files[{i}]: the model has no weight file '{}'",
                    crate::io::escape(&f.file)
                ))
            }
            Some(h) if h.sha256 != f.sha256 => {
                return Err(hash_mismatch(i, &f.file, &f.sha256, &h.sha256))
            }
            Some(_) => v.checks += 1,
        }
    }
    if hashes.len() != c.model.files.len() {
        return Err(format!(
            "$.model.files: the model has {} weight files, the certificate lists {}",
            hashes.len(),
            c.model.files.len()
        ));
    }
    Ok(())
}

/// The model type's stacks are the ones the certificate lists, and the
/// number of heads its files state (under `--heads`) is the one it says.
fn check_stack_and_heads(
    c: &Certificate,
    a: &arch::Architecture,
    v: &mut Verdict,
) -> Result<(), String> {
    let stacks = a.stack.as_ref().map(|s| &s.stacks);
    if stacks != c.parameters.stack.as_ref().map(|s| &s.stacks) {
        let said = |s: Option<&Vec<String>>| {
            s.map_or("one stack".into(), |v| {
                format!("the stacks {}", v.join(", "))
            })
        };
        return Err(format!(
            "$.parameters.stack: the certificate says the model has {}, its files have {}",
            crate::io::escape(&said(c.parameters.stack.as_ref().map(|s| &s.stacks))),
            said(stacks)
        ));
    }
    // --heads: what the certificate says the file states is re-read.
    if let Some(o) = &c.parameters.heads_override {
        let found = a.heads_override.as_ref().and_then(|h| h.replaced);
        if found != o.replaced {
            let said =
                |n: Option<usize>| n.map_or("no number of heads".into(), |n| format!("{n} heads"));
            return Err(format!(
                "$.parameters.heads_override.replaced: the certificate says the model's files state {}, they state {}",
                said(o.replaced),
                said(found)
            ));
        }
        v.checks += 1;
    }
    Ok(())
}

/// Every field of `$.model` that the model's files state is re-read from
/// them (one check each).
fn check_model(c: &Certificate, a: &arch::Architecture, v: &mut Verdict) -> Result<(), String> {
    let md = &c.model;
    for (key, stated, actual) in [
        ("hidden", md.hidden, a.hidden),
        ("kv_heads", md.kv_heads, a.kv_heads),
        ("head_dim", md.head_dim, a.head_dim),
        ("intermediate", md.intermediate, a.intermediate),
    ] {
        if stated != actual {
            return Err(format!(
                "$.model.{key}: the certificate says {stated}, the model has {actual}"
            ));
        }
        v.checks += 1;
    }
    // Every field that names something in the model is re-read from it.
    for (key, stated, actual) in [
        ("architecture", md.architecture.as_str(), a.family.as_str()),
        (
            "tensor_prefix",
            md.tensor_prefix.as_str(),
            a.prefix.as_str(),
        ),
    ] {
        if stated != actual {
            return Err(format!(
                "$.model.{key}: the certificate says '{}', the model has '{}'",
                crate::io::escape(stated),
                crate::io::escape(actual)
            ));
        }
        v.checks += 1;
    }
    if md.experts != a.experts_entry() {
        return Err(
            "$.model.experts: the certificate's experts per layer are not the model's".into(),
        );
    }
    v.checks += 1;
    if md.cross_attention != a.cross_attention() {
        return Err(format!(
            "$.model.cross_attention: the certificate says {}, the model's blocks have {}",
            md.cross_attention,
            if a.cross_attention() {
                "a cross-attention"
            } else {
                "none"
            }
        ));
    }
    v.checks += 1;
    Ok(())
}

/// Recomputes every matrix's spectral keys from the model (in parallel)
/// and adds what they confirm, refute and leave open to `v`.
fn check_matrices(
    c: &Certificate,
    mats: &std::collections::HashMap<MatrixId, ProxyMatrix>,
    progress: &dyn crate::progress::Progress,
    v: &mut Verdict,
) {
    let precision = c.parameters.precision;
    // The spectral keys of every matrix, with the JSON path of its entry.
    let entries: Vec<(String, crate::certificate::SpectrumEntry)> = match &c.spectra {
        Some(s) => s
            .iter()
            .enumerate()
            .map(|(i, w)| (format!("$.spectra[{i}]"), w.clone()))
            .collect(),
        None => c
            .matrices
            .iter()
            .enumerate()
            .map(|(i, w)| (format!("$.matrices[{i}]"), w.spectrum()))
            .collect(),
    };
    progress.matrices_total(entries.len());
    let checks: Vec<Result<MatrixCheck, String>> = entries
        .par_iter()
        .map(|(at, w)| {
            let pm = mats
                .get(&w.id())
                .ok_or_else(|| format!("{at}: the model has no proxy matrix {}", w.id()))?;
            let r = check_matrix(at, w, pm, precision);
            progress.matrix_done(w.id());
            r
        })
        .collect();
    for r in checks {
        match r {
            Err(why) => {
                // A matrix the tool cannot certify from the weights cannot confirm anything.
                v.unconfirmed
                    .push(format!("recomputation inconclusive: {why}"));
            }
            Ok(mc) => {
                v.checks += mc.confirmed;
                if v.failure.is_none() {
                    v.failure = mc.refuted;
                }
                v.unconfirmed.extend(mc.unconfirmed);
            }
        }
    }
}

/// Recomputes the certified norms of every raw weight matrix from the model
/// (`certify::certify_raw_norms`) and compares them with the stated ones:
/// confirmed when the stated interval contains the recomputed enclosure,
/// refuted when they are disjoint, unconfirmed otherwise.
fn check_raw_weights(
    ckpt: &Checkpoint,
    a: &arch::Architecture,
    raw: &[crate::certificate::RawWeightEntry],
    precision: Precision,
    v: &mut Verdict,
) -> Result<(), EvidenceError> {
    let mut mats = Vec::new();
    for l in 0..a.layers {
        mats.extend(
            arch::extract_raw_layer(ckpt, a, l).map_err(|e| EvidenceError::Model(e.to_string()))?,
        );
    }
    if mats.len() != raw.len() {
        v.failure.get_or_insert(format!(
            "$.raw_weights: the model has {} raw weight matrices, the certificate lists {}",
            mats.len(),
            raw.len()
        ));
        return Ok(());
    }
    let opts = SvdOptions {
        precision,
        par: faer::Par::Seq,
        ..SvdOptions::default()
    };
    let results: Vec<Verdict> = raw
        .par_iter()
        .zip(&mats)
        .enumerate()
        .map(|(i, (w, m))| {
            let mut out = Verdict::default();
            let at = format!("$.raw_weights[{i}]");
            if (w.layer, w.role.as_str(), w.rows, w.cols)
                != (m.layer, m.role.name(), m.out_dim(), m.in_dim())
            {
                out.failure = Some(format!(
                    "{at}: the model's matrix here is layer {} {} ({}x{})",
                    m.layer,
                    m.role.name(),
                    m.out_dim(),
                    m.in_dim()
                ));
                return out;
            }
            // The evidence label: the source tensor must be the model's.
            if w.tensor != m.tensor {
                out.failure = Some(format!(
                    "{at}.tensor: the certificate says '{}', the model's matrix here is '{}'",
                    crate::io::escape(&w.tensor),
                    crate::io::escape(&m.tensor)
                ));
                return out;
            }
            out.checks += 1;
            let n = match crate::certify::certify_raw_norms(&m.transposed, &opts) {
                Ok(n) => n,
                Err(e) => {
                    out.unconfirmed
                        .push(format!("{at}: recomputation inconclusive: {}", e.reason));
                    return out;
                }
            };
            for (key, stated, got) in [
                ("spectral_norm", w.spectral_norm, n.spectral),
                ("frobenius_norm", w.frobenius_norm, n.frobenius),
                ("norm_21_rows", w.norm_21_rows, n.norm_21_rows),
            ] {
                let Some(got) = CertInterval::of_inari(got) else {
                    out.unconfirmed
                        .push(format!("{at}.{key}: the recomputed enclosure is unbounded"));
                    continue;
                };
                if stated.contains(&got) {
                    out.checks += 1;
                } else if stated.disjoint(&got) {
                    out.failure.get_or_insert(format!(
                        "{at}.{key}: stated {} is refuted by the recomputed {}",
                        bounds(stated.lo, stated.hi),
                        bounds(got.lo, got.hi)
                    ));
                } else {
                    out.unconfirmed.push(format!(
                        "{at}.{key}: stated {} does not contain the recomputed {}",
                        bounds(stated.lo, stated.hi),
                        bounds(got.lo, got.hi)
                    ));
                }
            }
            out
        })
        .collect();
    for r in results {
        let done = std::mem::take(v);
        *v = done.merge(r);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Answer, Verdict};

    #[test]
    fn answers_are_the_commands() {
        let mut v = Verdict::default();
        assert_eq!(v.answer(), Answer::Holds);
        v.unconfirmed.push("q".into());
        assert_eq!(v.answer(), Answer::Undecided);
        v.failure = Some("f".into());
        assert_eq!(
            v.answer(),
            Answer::Refuted,
            "a failure outweighs unconfirmed quantities"
        );
    }
}
