//! The text summary `certify` prints, read from the certificate. Every
//! interval is printed rounded outward ([`super::fmt`]).

use std::collections::BTreeMap;
use std::fmt::Write;

use inari::Interval;

use super::fmt::{interval, Style};
use crate::arch::MatrixType;
use crate::certificate::{CertInterval, Certificate, MatrixEntry};
use crate::io::escape;

fn iv(x: &CertInterval, st: Style) -> String {
    interval(x.lo, x.hi, st)
}

/// How many matrices are listed as contributing most to each bound.
const TOP: usize = 5;

/// The summary of a certificate (model, parameters, bounds, per-layer
/// alpha and xi, extensions), `secs` being the time it took, in interval
/// style `st`. Besides the bounds it gives the p_opt distribution per matrix type, the matrices contributing
/// most to each bound and, when every p_opt is 0, the plain consequence.
pub fn summary_text_with(c: &Certificate, secs: f64, st: Style) -> String {
    let mut s = String::new();
    let md = &c.model;
    let _ = writeln!(
        s,
        "{}: {} (layers {}, hidden {}, heads {} x {}, intermediate {})",
        crate::io::escape_to(&md.path, 4096),
        escape(&md.architecture),
        md.layers,
        md.hidden,
        md.heads,
        md.head_dim,
        md.intermediate
    );
    for f in &md.files {
        let _ = writeln!(s, "  sha256 {}  {}", escape(&f.sha256), escape(&f.file));
    }
    let _ = writeln!(
        s,
        "L_phi = {}, grid m = {}, precision {}, {} proxy matrices certified in {:.2} s",
        escape(&c.parameters.l_phi),
        c.parameters.grid_m,
        c.parameters.precision,
        c.matrices.len() + c.spectra.as_ref().map_or(0, Vec::len),
        secs
    );
    if let Some(o) = &c.parameters.heads_override {
        let _ = writeln!(
            s,
            "heads {} given by --heads{}",
            o.heads,
            match (o.replaced, &o.source) {
                (Some(r), Some(src)) => format!(" (the file states {r}: {})", escape(src)),
                _ => " (the file states none)".into(),
            }
        );
    }
    if let Some(st) = &c.parameters.stack {
        let _ = writeln!(
            s,
            "stack '{}' of {} ({})",
            escape(&st.name),
            escape(&st.stacks.join(", ")),
            if st.by_flag {
                "given by --stack"
            } else {
                "the first the files hold"
            }
        );
    }
    for e in &c.extensions {
        let _ = writeln!(
            s,
            "EXTENSION OF THE PAPER: {}",
            crate::io::escape_to(e, 4096)
        );
    }
    let Some(bounds) = &c.bounds else {
        no_bound_text(&mut s, c, st);
        return s;
    };
    let _ = writeln!(
        s,
        "certified bounds (each interval, read as decimals, contains the exact value):"
    );
    let _ = writeln!(s, "  B_ours    {}", iv(&bounds.ours, st));
    let _ = writeln!(s, "  B_Edel    {}", iv(&bounds.edelman, st));
    undecided_ranks(&mut s, c, &bounds.ours);
    let _ = writeln!(s, "per layer:");
    let alphas: Vec<String> = c.layers.iter().map(|x| iv(&x.alpha, st)).collect();
    let (wa, wl) = (
        width(&alphas),
        c.layers.len().saturating_sub(1).to_string().len(),
    );
    for (x, alpha) in c.layers.iter().zip(&alphas) {
        let _ = writeln!(
            s,
            "  layer {:>wl$}: alpha {alpha:<wa$}  xi {}",
            x.layer,
            iv(&x.xi, st)
        );
    }
    p_opt_distribution(&mut s, c);
    top_contributors(&mut s, c, st);
    let _ = writeln!(
        s,
        "(use --json or --out for the full certificate, --csv DIR for the tables)"
    );
    s
}

/// A line naming the matrices whose rank the certificate leaves open (the
/// first one, and how many) and what that costs: the relative radius of
/// `B_ours`, which takes the rank at p = 0 (`docs/guarantees.md`, "Ranks").
fn undecided_ranks(s: &mut String, c: &Certificate, ours: &CertInterval) {
    let open: Vec<&MatrixEntry> = c
        .matrices
        .iter()
        .filter(|w| w.rank.lo < w.rank.hi)
        .collect();
    let Some(first) = open.first() else {
        return;
    };
    let rel = (ours.hi - ours.lo) / (ours.hi + ours.lo);
    let _ = writeln!(
        s,
        "  rank undecided for {} matrices ({} rank [{}, {}]{}); B_ours is {rel:.1e} relative radius wide with them",
        open.len(),
        first.id(),
        first.rank.lo,
        first.rank.hi,
        if open.len() > 1 { " first" } else { "" }
    );
}

/// The rest of the summary of a certificate without a bound: its reason,
/// and the five proxy matrices of largest certified spectral norm.
fn no_bound_text(s: &mut String, c: &Certificate, st: Style) {
    let _ = writeln!(
        s,
        "NO BOUND: {}",
        crate::io::escape_to(c.bound_absent.as_deref().unwrap_or(""), 4096)
    );
    let mut spectra: Vec<_> = c.spectra.iter().flatten().collect();
    spectra.sort_by(|a, b| b.spectral_norm.hi.total_cmp(&a.spectral_norm.hi));
    let _ = writeln!(
        s,
        "largest certified spectral norms (each interval contains the exact value):"
    );
    for w in spectra.iter().take(5) {
        let _ = writeln!(s, "  {}  {}", w.id(), iv(&w.spectral_norm, st));
    }
    let _ = writeln!(
        s,
        "(use --json or --out for the certified spectra of every proxy matrix)"
    );
}

/// The p_opt set of a matrix as text: `0`, `1/6`, or `{0, 1/12}` when the
/// certified contributions leave several minimisers.
fn p_opt_text(w: &MatrixEntry) -> String {
    let one = |g: &crate::certificate::GridPoint| {
        let (k, m) = g.reduced();
        if k == 0 {
            "0".to_string()
        } else if m == 1 {
            k.to_string()
        } else {
            format!("{k}/{m}")
        }
    };
    match w.p_opt_fraction.as_slice() {
        [g] => one(g),
        gs => format!("{{{}}}", gs.iter().map(one).collect::<Vec<_>>().join(", ")),
    }
}

fn p_opt_distribution(s: &mut String, c: &Certificate) {
    let _ = writeln!(
        s,
        "p_opt (the grid point minimising each matrix's contribution to B_ours), per matrix type:"
    );
    // The families of a bound: only a certificate with one has matrices.
    for kind in crate::bounds::BOUND_KINDS {
        let mut hist: BTreeMap<(usize, usize, String), usize> = BTreeMap::new();
        let mut n = 0;
        for w in c.matrices.iter().filter(|w| w.kind == kind) {
            n += 1;
            let key = w
                .p_opt_fraction
                .first()
                .map(|g| (w.p_opt_fraction.len(), g.k * 1_000_000 / g.m.max(1)))
                .unwrap_or((0, 0));
            *hist.entry((key.0, key.1, p_opt_text(w))).or_default() += 1;
        }
        if n == 0 {
            continue;
        }
        let parts: Vec<String> = hist
            .iter()
            .map(|((_, _, t), k)| format!("{t} x{k}"))
            .collect();
        let _ = writeln!(s, "  {:<8} ({n:>3}): {}", kind.name(), parts.join(", "));
    }
    let all_zero = c
        .matrices
        .iter()
        .all(|w| w.p_opt_fraction.len() == 1 && w.p_opt_fraction[0].k == 0);
    if all_zero {
        let _ = writeln!(
            s,
            "  Every p_opt is 0, so B_ours = sqrt(L) + sum over matrices of sqrt(N rank(W)): it \
             depends on the weights only through their ranks, not on the trained singular \
             values."
        );
    }
}

/// The per-matrix term of B_Edel's inner sum, `alpha_l^(2/3) (f(W)
/// ||W||_{2,1})^(2/3)` with `f` = [`xi_factor`] ([`proofs/proxy-formulas.md`](crate::proofs::proxy_formulas),
/// L18): *certified enclosure* given the certificate's enclosures, or
/// `None` on overflow.
fn edelman_term(c: &Certificate, w: &MatrixEntry) -> Option<Interval> {
    let find = |kind: MatrixType, head: Option<usize>| {
        c.matrix(crate::arch::MatrixId {
            layer: w.layer,
            head,
            kind,
            expert: None,
        })
    };
    let c2 = |kind, head| find(kind, head)?.spectral_norm.to_inari();
    let cin = c2(MatrixType::MIn, None)?;
    let cout = c2(MatrixType::MOut, None)?;
    let n21 = w.norm_21.to_inari()?;
    let base = match w.kind {
        MatrixType::QK => cout * cin * c2(MatrixType::VTilde, w.head)? * n21,
        MatrixType::VTilde => cout * cin * n21,
        MatrixType::MIn => cout * n21,
        MatrixType::MOut => n21,
        // Never in a bound (crate::bounds::BOUND_KINDS): no term.
        MatrixType::QKCross | MatrixType::VTildeCross => return None,
    };
    let two_thirds = Interval::try_from((2.0, 2.0)).ok()? / Interval::try_from((3.0, 3.0)).ok()?;
    let alpha = c.layers.get(w.layer)?.alpha.to_inari()?;
    let t = alpha.pow(two_thirds) * base.pow(two_thirds);
    (t.inf().is_finite() && t.sup().is_finite()).then_some(t)
}

/// The factor of `||W||_{2,1}` in B_Edel's term of a matrix type, as the
/// summary labels it: `gamma/2` for `QK` (the factor 2 of `gamma(QK)` is
/// `B_ours`'s only), `gamma` for the others (docs/certify.md, "B_Edel in
/// full").
fn xi_factor(kind: MatrixType) -> &'static str {
    match kind {
        MatrixType::QK | MatrixType::QKCross => "gamma/2",
        _ => "gamma",
    }
}

/// The largest term of B_Edel's inner sum of each matrix type, with its
/// share of the sum and the factor it uses; nothing when some term is not
/// finite.
fn edelman_terms(s: &mut String, c: &Certificate, st: Style) {
    let terms: Vec<(&MatrixEntry, Interval)> = c
        .matrices
        .iter()
        .filter_map(|w| edelman_term(c, w).map(|t| (w, t)))
        .collect();
    if terms.len() != c.matrices.len() {
        return;
    }
    let total: f64 = terms.iter().map(|(_, t)| t.mid()).sum();
    let mut top: Vec<(&MatrixEntry, Interval)> = Vec::new();
    for kind in MatrixType::ALL {
        let best = terms
            .iter()
            .filter(|(w, _)| w.kind == kind)
            .max_by(|a, b| a.1.mid().total_cmp(&b.1.mid()));
        top.extend(best.copied());
    }
    let _ = writeln!(
        s,
        "largest term of B_Edel's inner sum per matrix type (alpha_l^(2/3) (f ||W||_2,1)^(2/3); share about):"
    );
    let cells: Vec<String> = top
        .iter()
        .map(|(_, t)| interval(t.inf(), t.sup(), st))
        .collect();
    let wd = width(&cells);
    for ((w, t), cell) in top.iter().zip(&cells) {
        let _ = writeln!(
            s,
            "  {:<8} {:<28} {cell:<wd$}  {:>5.1}%  f = {}",
            w.kind.name(),
            w.id().to_string(),
            100.0 * t.mid() / total,
            xi_factor(w.kind)
        );
    }
}

/// The width of a column: its widest cell, in characters.
fn width(cells: &[String]) -> usize {
    cells.iter().map(|c| c.chars().count()).max().unwrap_or(0)
}

fn top_contributors(s: &mut String, c: &Certificate, st: Style) {
    let name = |w: &MatrixEntry| w.id().to_string();
    let total_ours: f64 = c.matrices.iter().map(|w| w.min_contribution.mid()).sum();
    let mut by_ours: Vec<&MatrixEntry> = c.matrices.iter().collect();
    by_ours.sort_by(|a, b| {
        b.min_contribution
            .mid()
            .total_cmp(&a.min_contribution.mid())
    });
    let _ = writeln!(
        s,
        "largest contributions to B_ours (min over the grid of c(W, p); share of the sum about):"
    );
    // The interval column as wide as its widest cell (full-precision and
    // MPFR intervals differ in length), so that the shares stay aligned.
    let cells: Vec<String> = by_ours
        .iter()
        .take(TOP)
        .map(|w| iv(&w.min_contribution, st))
        .collect();
    let wd = width(&cells);
    for (w, cell) in by_ours.iter().zip(&cells) {
        let _ = writeln!(
            s,
            "  {:<28} {cell:<wd$}  {:>5.1}%  at p = {}",
            name(w),
            100.0 * w.min_contribution.mid() / total_ours,
            p_opt_text(w)
        );
    }
    edelman_terms(s, c, st);
}
