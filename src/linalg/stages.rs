//! The stages of a prepared dense matrix and the ladder that chooses among
//! them for a precision: binary64 (the exact-Gram route, then the residual
//! theorem with the Gram eigenvectors, then with the direct SVD), extended
//! (double-double residuals), MPFR at a chosen precision, and `auto`, which
//! climbs the ladder until the target is met. Each stage's values are
//! certified enclosures on their own; combining two keeps the narrower
//! enclosure index by index ([`proofs/sorting-lemma.md`](crate::proofs::sorting_lemma), L10), so a stage
//! can only narrow what another left.

use std::cell::OnceCell;

use super::{
    dense, extended, gram, kernel, mpfr, sigma_cap, values_from_groups_capped, CertifiedValue,
    ElimCell, Method, Precision, SingularValues, SvdOptions, AFTER_STAGES, AUTO_GRADED_MAX_WORK,
    AUTO_MPFR_MAX_WORK, AUTO_MPFR_PRECISION_LIMITED, AUTO_RELEVANT_FRACTION,
};
use crate::enclosure::Inconclusive;

type Certified = Result<SingularValues, Inconclusive>;

/// The stages of [`super::certify_prepared`] on one prepared matrix (its
/// guarantee and lemmas), sharing the direct thin SVD (computed lazily:
/// the binary64 stage tries the cheaper Gram-based routes first) and the
/// memoised exact elimination.
pub(super) struct Stages<'a> {
    pub(super) prep: &'a dense::Prepared,
    pub(super) rows: usize,
    pub(super) cols: usize,
    pub(super) opts: &'a SvdOptions,
    pub(super) kernel_cell: &'a ElimCell,
    pub(super) direct_svd: OnceCell<Result<dense::ApproxSvd, Inconclusive>>,
}

impl Stages<'_> {
    /// The values of a stage, without notes or structural zeros.
    fn values(&self, values: Vec<CertifiedValue>) -> SingularValues {
        SingularValues {
            rows: self.rows,
            cols: self.cols,
            values,
            structural_zeros: 0,
            notes: Vec::new(),
        }
    }

    fn direct(&self) -> Result<&dense::ApproxSvd, Inconclusive> {
        self.direct_svd
            .get_or_init(|| dense::approx_thin_svd(self.prep.a()))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// `r` with the exact kernel certificate (L30) of the memoised
    /// elimination applied.
    fn with_kernel(&self, r: Certified) -> Certified {
        let mut r = r?;
        r.apply_exact_kernel(|| {
            self.kernel_cell
                .get_or_init(|| kernel::eliminate(self.prep.a()))
                .as_ref()
                .map(|e| e.as_ref().map_or(0, kernel::Elimination::nullity))
                .map_err(Clone::clone)
        })?;
        Ok(r)
    }

    /// The binary64 residual theorem on `A` with the approximate `svd`;
    /// split products (L27) where their a priori term would be above a
    /// quarter of the target.
    fn residual(&self, svd: &dense::ApproxSvd) -> Certified {
        let a = self.prep.a();
        let groups = dense::certify_pairs_within(a, svd, self.opts.par, self.opts.rtol / 4.0)?;
        Ok(self.values(values_from_groups_capped(
            &groups,
            self.prep.scale_exp,
            Method::F64Residual,
            || sigma_cap(a),
        )?))
    }

    /// Whether `r` meets the target above the relevant fraction.
    fn meets(&self, r: &SingularValues) -> bool {
        r.max_rel_rad_above(AUTO_RELEVANT_FRACTION) <= self.opts.rtol
    }

    /// Settled: the values above the fraction meet the target, and the
    /// rank and the smaller values are as decided as a residual route
    /// would leave them; otherwise the next route runs (no answer wider
    /// than it needs to be), at no cost where the first one settles.
    fn settled(&self, r: &SingularValues) -> bool {
        self.meets(r) && r.unsettled(self.opts.rtol).is_none()
    }

    /// The binary64 stage, with the exact kernel certificate.
    pub(super) fn f64(&self) -> Certified {
        self.with_kernel(self.f64_routes())
    }

    /// Cheapest first, each kept only if it meets `rtol` (else combined
    /// with the next, index by index, L10): the exact-Gram route (one
    /// symmetric GEMM, an n x n eigensolver and one n x n x n product), the
    /// residual theorem on A with the Gram eigenvectors, then with the
    /// direct SVD.
    fn f64_routes(&self) -> Certified {
        let mut best: Option<SingularValues> = None;
        let mut notes: Vec<String> = Vec::new();
        let eig = match self.exact_gram(&mut best, &mut notes) {
            GramRoute::Settled(r) => return Ok(r),
            GramRoute::Left(eig) => eig,
        };
        let with_notes = |mut r: SingularValues, notes: Vec<String>| {
            r.notes.extend(notes);
            r
        };
        if let Some(eig) = eig {
            let fast = gram::approx_thin_svd_from_gram(self.prep.a(), &eig, self.opts.par);
            drop(eig);
            if let Some(Ok(r)) = fast.map(|f| self.residual(&f)) {
                keep(&mut best, r);
                if best.as_ref().is_some_and(|b| self.settled(b)) {
                    return Ok(with_notes(best.expect("just set"), notes));
                }
            }
        }
        match (self.direct().and_then(|d| self.residual(d)), best) {
            (Ok(r), Some(mut b)) => {
                b.keep_narrower(r);
                Ok(with_notes(b, notes))
            }
            (Ok(r), None) => Ok(with_notes(r, notes)),
            (Err(_), Some(b)) => Ok(with_notes(b, notes)),
            (Err(e), None) => Err(e),
        }
    }

    /// The exact-Gram route, the fast eigensolver first and faer's when its
    /// vectors fall short: a settled answer, or the eigendecomposition left
    /// for the residual route (none where there is none), what it
    /// certified kept in `best`.
    fn exact_gram(&self, best: &mut Option<SingularValues>, notes: &mut Vec<String>) -> GramRoute {
        let mut eig = gram::gram_eigen(self.prep.a(), self.opts.par);
        let Some(mut e) = eig.take_if(|e| e.exact) else {
            return GramRoute::Left(eig);
        };
        loop {
            let mut squared = false;
            if let Ok(values) = gram::certify_from_gram(&e, self.prep.scale_exp, self.opts.par) {
                let r = self.values(values);
                if self.settled(&r) {
                    return GramRoute::Settled(r);
                }
                if self.meets(&r) {
                    // What is open is set by the squared range of the
                    // Gram matrix, which another eigensolver keeps.
                    notes.push(format!(
                        "the exact-Gram route left {}; the residual route on the matrix itself was run",
                        r.unsettled(self.opts.rtol).unwrap_or_default()
                    ));
                    squared = true;
                }
                keep(best, r);
            }
            if squared || e.solver == gram::EigenSolver::Faer {
                return GramRoute::Left(Some(e));
            }
            match e.with_faer() {
                Some(f) => e = f,
                None => return GramRoute::Left(None),
            }
        }
    }

    /// The extended (double-double residual) stage, with the exact kernel
    /// certificate.
    pub(super) fn extended(&self) -> Certified {
        let stage = || -> Certified {
            let a = self.prep.a();
            let groups = extended::certify_pairs(a, self.direct()?, self.opts.par)?;
            Ok(self.values(values_from_groups_capped(
                &groups,
                self.prep.scale_exp,
                Method::ExtendedResidual,
                || sigma_cap(a),
            )?))
        };
        self.with_kernel(stage())
    }

    /// The MPFR stage at `bits`, with the exact kernel certificate.
    pub(super) fn mpfr(&self, bits: u32) -> Certified {
        let stage = || -> Certified {
            Ok(self.values(mpfr::certify(self.prep.a(), self.prep.scale_exp, bits)?))
        };
        self.with_kernel(stage())
    }
}

/// What the exact-Gram route ended with.
enum GramRoute {
    /// An answer that meets the target and leaves nothing unsettled.
    Settled(SingularValues),
    /// The eigendecomposition for the residual route, if any.
    Left(Option<gram::GramEigen>),
}

/// `r` into `best`: the narrower enclosure index by index (L10).
fn keep(best: &mut Option<SingularValues>, r: SingularValues) {
    match best {
        Some(b) => b.keep_narrower(r),
        None => *best = Some(r),
    }
}

/// The stage selection of [`super::certify_prepared`] for
/// `opts.precision`, over the stages (each with the exact kernel
/// certificate applied, L30).
pub(super) fn run_precision(s: &Stages<'_>) -> Certified {
    match s.opts.precision {
        Precision::F64 => s.f64(),
        Precision::Extended => extended_over_f64(s),
        Precision::Mpfr(bits) => mpfr_never_looser_than_auto(s, bits),
        Precision::Auto => auto(s),
    }
}

/// `mpfr:N`: the MPFR stage at `N` bits. On a graded matrix whose entries
/// span more binary orders than `N` bits cover, that stage leaves the small
/// values loose where `auto` climbs to a stage at a precision covering the
/// span; that stage is then run too (within `auto`'s size limit for it) and
/// the narrower enclosure kept index by index (L10), so that an explicit
/// precision is never looser than `auto` (issue 33). Said in a note.
fn mpfr_never_looser_than_auto(s: &Stages<'_>, bits: u32) -> Certified {
    let first = s.mpfr(bits);
    let work = auto_work(s.prep.a().nrows(), s.prep.a().ncols());
    let graded =
        super::graded_precision(s.prep.a()).filter(|&g| g > bits && work <= AUTO_GRADED_MAX_WORK);
    let Some(g) = graded else {
        return first;
    };
    let rtol = s.opts.rtol;
    if first
        .as_ref()
        .is_ok_and(|v| v.values.iter().all(|x| x.rel_rad() <= rtol))
    {
        return first;
    }
    let note = format!(
        "mpfr-graded stage at {g} bits also run: the entries span more binary orders than \
         {bits} bits cover (as auto does; the narrower enclosure kept per index)"
    );
    let mut out = match (first, s.mpfr(g)) {
        (Ok(mut a), Ok(b)) => {
            a.keep_narrower(b);
            a
        }
        (Err(_), Ok(b)) => b,
        (first, Err(_)) => return first,
    };
    out.notes.push(note);
    Ok(out)
}

/// `extended`: the binary64 stage narrowed by the extended one; either
/// alone where the other is inconclusive (said in a note).
fn extended_over_f64(s: &Stages<'_>) -> Certified {
    match (s.f64(), s.extended()) {
        (Ok(mut b), Ok(e)) => {
            b.keep_narrower(e);
            Ok(b)
        }
        (Err(_), Ok(e)) => Ok(e),
        (Ok(mut b), Err(why)) => {
            b.notes.push(format!(
                "extended stage inconclusive ({}); the values are those of the f64 stage",
                why.reason
            ));
            Ok(b)
        }
        (Err(f), Err(e)) => Err(Inconclusive::new(format!(
            "{}; extended stage: {}",
            f.reason, e.reason
        ))),
    }
}

/// The relative radius `auto` judges, on the exact ends where a stage gave
/// them (CertifiedValue::rel_rad), so that the 256-bit stage is reachable.
fn target(r: &SingularValues) -> f64 {
    r.max_rel_rad_above(AUTO_RELEVANT_FRACTION)
}

/// A rung of `auto`'s ladder above binary64.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rung {
    Extended,
    Mpfr128,
    Mpfr256,
    /// A precision that covers a graded matrix's span of binary orders.
    Graded(u32),
}

impl Rung {
    fn name(self) -> &'static str {
        match self {
            Rung::Extended => "extended",
            Rung::Mpfr128 => "mpfr-128",
            Rung::Mpfr256 => "mpfr-256",
            Rung::Graded(_) => "mpfr-graded",
        }
    }

    fn run(self, s: &Stages<'_>) -> Certified {
        match self {
            Rung::Extended => s.extended(),
            Rung::Mpfr128 => s.mpfr(128),
            Rung::Mpfr256 => s.mpfr(256),
            Rung::Graded(bits) => s.mpfr(bits),
        }
    }
}

/// The rungs `auto` may climb for an `m x n` matrix of `work = m n^2`:
/// MPFR where it is affordable, and for graded matrices (entries spanning
/// more binary orders than 256 bits cover) one more stage at a precision
/// that covers the span, where the Jacobi start is affordable.
fn rungs(s: &Stages<'_>, work: usize) -> Vec<Rung> {
    let mut rungs = vec![Rung::Extended];
    if work <= AUTO_MPFR_MAX_WORK {
        rungs.extend([Rung::Mpfr128, Rung::Mpfr256]);
    }
    if work <= AUTO_GRADED_MAX_WORK {
        if let Some(bits) = super::graded_precision(s.prep.a()) {
            rungs.push(Rung::Graded(bits));
        }
    }
    rungs
}

/// Whether `auto` stops before `rung`, given the best so far: the graded
/// stage runs only for an undecided rank (the small values of a graded
/// matrix left as [0, h]); the 256-bit stage not where 128 bits left a
/// radius far above their rounding level (what limits it, a cluster the
/// refinement cannot split, does not yield to more bits: said in a note).
fn stop_before(rung: Rung, best: &Certified, notes: &mut Vec<String>) -> bool {
    match rung {
        Rung::Graded(_) => best.as_ref().is_ok_and(|v| v.rank_undecided_at().is_none()),
        Rung::Mpfr256 => {
            let limited = best.as_ref().is_ok_and(|v| {
                target(v) > AUTO_MPFR_PRECISION_LIMITED && v.rank_undecided_at().is_none()
            });
            if limited {
                notes.push(
                    "mpfr-256 stage not run: mpfr-128 left a relative radius above 2^-100, \
                     which more precision does not reduce"
                        .into(),
                );
            }
            limited
        }
        _ => false,
    }
}

/// `auto`: binary64, then up the ladder until sigma_1 and every value
/// above the relevant fraction meet `rtol` and nothing is left unsettled;
/// what it could not reach is said in notes.
fn auto(s: &Stages<'_>) -> Certified {
    let rtol = s.opts.rtol;
    let done = |r: &SingularValues| auto_settles(r, rtol);
    let mut best = s.f64();
    if best.as_ref().is_ok_and(done) {
        return best;
    }
    let mut notes: Vec<String> = Vec::new();
    let work = auto_work(s.prep.a().nrows(), s.prep.a().ncols());
    for rung in rungs(s, work) {
        if stop_before(rung, &best, &mut notes) {
            break;
        }
        best = match (best, rung.run(s)) {
            (Ok(mut b), Ok(e)) => {
                b.keep_narrower(e);
                Ok(b)
            }
            (Err(_), Ok(e)) => Ok(e),
            (b, Err(why)) => {
                notes.push(format!(
                    "{} stage inconclusive ({})",
                    rung.name(),
                    why.reason
                ));
                b
            }
        };
        if best.as_ref().is_ok_and(done) {
            break;
        }
    }
    let best = best.map_err(|e| {
        let mut why = e.reason;
        for n in &notes {
            why.push_str("; ");
            why.push_str(n);
        }
        Inconclusive::new(why)
    })?;
    Ok(auto_notes(best, notes, rtol, work))
}

/// `m n^2` of a `rows x cols` matrix oriented with `m >= n`: the size by
/// which `auto` decides which stages it runs (saturating).
pub(super) fn auto_work(rows: usize, cols: usize) -> usize {
    let (m, n) = (rows.max(cols), rows.min(cols));
    m.saturating_mul(n).saturating_mul(n)
}

/// Whether `r` is an answer at which `auto` stops: sigma_1 and every value
/// above the relevant fraction within `rtol`, nothing left unsettled.
pub(super) fn auto_settles(r: &SingularValues, rtol: f64) -> bool {
    target(r) <= rtol && r.unsettled(rtol).is_none()
}

/// How `auto`'s note on a stage skipped for the matrix's size begins.
const MPFR_NOT_RUN: &str = "MPFR stage not run: m n^2 = ";
/// How `auto`'s note on a target it did not reach begins.
const TARGET_NOT_MET: &str = "auto target not met: ";

/// `best`, an answer of `auto` since narrowed by another certified stage
/// (L10), with the notes in which `auto` judged the earlier values
/// ([`auto_notes`]) judged again on these (`work = m n^2` of the matrix).
pub(super) fn rejudge_auto(mut best: SingularValues, rtol: f64, work: usize) -> SingularValues {
    best.notes.retain(|n| {
        ![MPFR_NOT_RUN, TARGET_NOT_MET, AFTER_STAGES]
            .iter()
            .any(|p| n.starts_with(p))
    });
    auto_notes(best, Vec::new(), rtol, work)
}

/// `auto`'s answer with its notes: the stages inconclusive, the MPFR
/// stage not run for its size, the target not met, and what is still
/// unsettled.
fn auto_notes(
    mut best: SingularValues,
    mut notes: Vec<String>,
    rtol: f64,
    work: usize,
) -> SingularValues {
    let reached = target(&best);
    if !(reached <= rtol) {
        if work > AUTO_MPFR_MAX_WORK {
            notes.push(format!(
                "{MPFR_NOT_RUN}{work} exceeds the auto limit {AUTO_MPFR_MAX_WORK} \
                 (--precision mpfr:BITS runs it)"
            ));
        }
        notes.push(format!(
            "{TARGET_NOT_MET}relative radius {reached:.3e} > rtol {rtol:e} \
             (sigma_1 and every value >= {AUTO_RELEVANT_FRACTION:e} sigma_1)"
        ));
    }
    if let Some(open) = best.unsettled(rtol) {
        notes.push(format!("{AFTER_STAGES}{open}"));
    }
    best.notes.extend(notes);
    best
}
