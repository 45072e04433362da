//! `specbound diff`: compares two certificates quantity by quantity
//! (matched by layer, head, type, index and p). For enclosures `a` of the
//! old value and `b` of the new one, the change `b - a` lies in
//! `[b.lo - a.hi, b.hi - a.lo]` (outward rounded); it is *certainly larger*
//! when `b.lo > a.hi`, *certainly smaller* when `b.hi < a.lo`, and
//! *indistinguishable* when the enclosures overlap.

use serde::Serialize;

use super::parse::{Cert, CertMatrix, CI};
use crate::linalg::rounding as r;

/// Direction of a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// The new value is certainly larger.
    Larger,
    /// The new value is certainly smaller.
    Smaller,
    /// The enclosures overlap.
    Indistinguishable,
}

/// One compared quantity.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Which quantity (e.g. `layer 0 head 3 QK spectral_norm`).
    pub quantity: String,
    /// Old enclosure.
    pub a: [f64; 2],
    /// New enclosure.
    pub b: [f64; 2],
    /// Certified range of `b - a`.
    pub change: [f64; 2],
    /// Direction.
    pub verdict: Change,
    /// Whether the change certainly exceeds `rtol` relative to the old value.
    pub exceeds_rtol: bool,
}

/// The comparison.
#[derive(Clone, Debug, Serialize)]
pub struct DiffReport {
    /// Relative tolerance used.
    pub rtol: f64,
    /// Quantities compared.
    pub compared: usize,
    /// Certainly larger.
    pub larger: usize,
    /// Certainly smaller.
    pub smaller: usize,
    /// Overlapping.
    pub indistinguishable: usize,
    /// Certainly changed by more than rtol (relative).
    pub beyond_rtol: usize,
    /// Matrices present in only one certificate.
    pub unmatched: Vec<String>,
    /// Every compared quantity, changed ones first.
    pub rows: Vec<Row>,
}

fn row(quantity: String, a: CI, b: CI, rtol: f64) -> Row {
    let change = [r::sub_rd(b.lo, a.hi), r::sub_ru(b.hi, a.lo)];
    let verdict = if b.lo > a.hi {
        Change::Larger
    } else if b.hi < a.lo {
        Change::Smaller
    } else {
        Change::Indistinguishable
    };
    // |b - a| > rtol |a| certainly: the smallest possible |change| exceeds
    // rtol times the largest possible |a|.
    let min_abs_change = match verdict {
        Change::Larger => change[0],
        Change::Smaller => -change[1],
        Change::Indistinguishable => 0.0,
    };
    let amax = a.lo.abs().max(a.hi.abs());
    let exceeds_rtol = min_abs_change > 0.0 && min_abs_change > r::mul_ru(rtol, amax);
    Row {
        quantity,
        a: [a.lo, a.hi],
        b: [b.lo, b.hi],
        change,
        verdict,
        exceeds_rtol,
    }
}

fn quantities(w: &CertMatrix) -> Vec<(String, CI)> {
    let mut v = w.named_intervals();
    v.push((
        "rank".into(),
        CI {
            lo: w.rank.0 as f64,
            hi: w.rank.1 as f64,
        },
    ));
    let nz = w.singular_values.len();
    for i in 0..w.structural_zeros {
        v.push((
            format!("singular_values[{}]", nz + i),
            CI { lo: 0.0, hi: 0.0 },
        ));
    }
    v
}

fn name(w: &CertMatrix) -> String {
    match crate::arch::MatrixId::from_columns(w.layer, w.head, w.kind) {
        Some(id) => id.to_string(),
        None => format!("layer {} head {} {}", w.layer, w.head, w.kind),
    }
}

/// Compares two certificates.
pub fn diff(a: &Cert, b: &Cert, rtol: f64) -> DiffReport {
    let mut rows = Vec::new();
    let mut unmatched = Vec::new();
    for wa in &a.matrices {
        let Some(wb) = b
            .matrices
            .iter()
            .find(|x| (x.layer, x.head, x.kind) == (wa.layer, wa.head, wa.kind))
        else {
            unmatched.push(format!("{} (only in A)", name(wa)));
            continue;
        };
        // Contributions are comparable only on the same grid.
        let same_grid = a.grid_m == b.grid_m;
        let (qa, qb) = (quantities(wa), quantities(wb));
        for (na, va) in &qa {
            if !same_grid && na.starts_with("contributions") {
                continue;
            }
            if let Some((_, vb)) = qb.iter().find(|(nb, _)| nb == na) {
                rows.push(row(format!("{} {na}", name(wa)), *va, *vb, rtol));
            }
        }
        if a.grid_m == b.grid_m {
            for ((k, ca), (_, cb)) in wa.contributions.iter().zip(&wb.contributions) {
                rows.push(row(
                    format!("{} c(p={k}/{})", name(wa), a.grid_m),
                    *ca,
                    *cb,
                    rtol,
                ));
            }
        }
    }
    for wb in &b.matrices {
        if !a
            .matrices
            .iter()
            .any(|x| (x.layer, x.head, x.kind) == (wb.layer, wb.head, wb.kind))
        {
            unmatched.push(format!("{} (only in B)", name(wb)));
        }
    }
    for (l, ((aa, xa), (ab, xb))) in a.layer_values.iter().zip(&b.layer_values).enumerate() {
        rows.push(row(format!("layer {l} alpha"), *aa, *ab, rtol));
        rows.push(row(format!("layer {l} xi"), *xa, *xb, rtol));
    }
    rows.push(row("bound ours".into(), a.ours, b.ours, rtol));
    rows.push(row("bound edelman".into(), a.edelman, b.edelman, rtol));
    rows.sort_by_key(|x| (!x.exceeds_rtol, x.verdict == Change::Indistinguishable));
    let count = |c: Change| rows.iter().filter(|x| x.verdict == c).count();
    DiffReport {
        rtol,
        compared: rows.len(),
        larger: count(Change::Larger),
        smaller: count(Change::Smaller),
        indistinguishable: count(Change::Indistinguishable),
        beyond_rtol: rows.iter().filter(|x| x.exceeds_rtol).count(),
        unmatched,
        rows,
    }
}
