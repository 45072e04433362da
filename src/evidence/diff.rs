//! `specbound diff`: compares two certificates.
//!
//! First what makes the two incomparable or differently parameterised:
//! model hashes, architecture and parameters (`l_phi`, grid, precision).
//! Then every certified quantity (`Certificate::quantities`), each once,
//! matched by subject and quantity, with grid points matched by their exact
//! fraction (`2/12` matches `1/6`); a quantity present in only one
//! certificate is counted and listed, never dropped.
//!
//! For enclosures `a` of the old value and `b` of the new one, the change
//! `b - a` lies in `[b.lo - a.hi, b.hi - a.lo]` (outward rounded); it is
//! *certainly larger* when `b.lo > a.hi`, *certainly smaller* when
//! `b.hi < a.lo`, and *indistinguishable* when the enclosures overlap.

use std::collections::BTreeMap;

use serde::Serialize;

use super::Answer;
use crate::certificate::{CertInterval, Certificate, Quantity, QuantityFields, Subject};
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

/// What kind of header difference.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HeaderKind {
    /// A weight file's hash (a different model, or a changed one).
    Model,
    /// The architecture (family, shapes, heads, layers).
    Architecture,
    /// A parameter of the bounds (`l_phi`, grid, precision): a certain change.
    Parameter,
}

/// One difference in what the certificates are about.
#[derive(Clone, Debug, Serialize)]
pub struct HeaderChange {
    /// Kind.
    pub kind: HeaderKind,
    /// The key (`model.files[model.safetensors].sha256`, `parameters.grid_m`, ...).
    pub key: String,
    /// Value in A (`absent` when missing).
    pub a: String,
    /// Value in B.
    pub b: String,
}

/// One compared quantity.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Layer, head, type, quantity name, index and p as separate fields.
    #[serde(flatten)]
    pub what: QuantityFields,
    /// The whole name (`layer 3 head 0 QK spectral_norm`).
    pub label: String,
    /// Old enclosure.
    pub a: [f64; 2],
    /// New enclosure.
    pub b: [f64; 2],
    /// Certified range of `b - a`.
    pub change: [f64; 2],
    /// Direction.
    pub verdict: Change,
    /// Certified range of the relative change `(b - a) / a` (`None` when
    /// the old enclosure is not positive).
    pub relative_change: Option<[f64; 2]>,
    /// Whether the change certainly exceeds `rtol` relative to the old value.
    pub exceeds_rtol: bool,
}

/// One matrix's changes, for leading with the cause: whether its own
/// certified spectrum or norms changed (its weights changed) or only the
/// aggregates built on other matrices (alpha, gamma, contributions).
#[derive(Clone, Debug, Serialize)]
pub struct MatrixChange {
    /// The matrix (`layer 3 M_in`).
    pub matrix: String,
    /// Layer.
    pub layer: usize,
    /// Head, for per-head matrices.
    pub head: Option<usize>,
    /// Matrix type.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Whether a spectral quantity of the matrix itself (singular values,
    /// norms, stable rank, rank) certainly changed.
    pub own_weights_changed: bool,
    /// Certainly changed quantities of the matrix itself.
    pub own_changes: usize,
    /// Certainly changed aggregates of the matrix (alpha, gamma, scale,
    /// contributions), which move when any matrix of its layer moves.
    pub knock_on_changes: usize,
    /// The quantity with the largest certain relative change.
    pub largest: Option<String>,
    /// Its certified relative change.
    pub largest_relative_change: Option<[f64; 2]>,
}

/// A quantity present in one certificate only.
#[derive(Clone, Debug, Serialize)]
pub struct Unmatched {
    /// Layer, head, type, quantity name, index and p.
    #[serde(flatten)]
    pub what: QuantityFields,
    /// The whole name.
    pub label: String,
    /// `"a"` or `"b"`.
    pub only_in: &'static str,
}

/// The comparison.
#[derive(Clone, Debug, Serialize)]
pub struct DiffReport {
    /// Relative tolerance used.
    pub rtol: f64,
    /// Differences in model hashes, architecture and parameters.
    pub header: Vec<HeaderChange>,
    /// Quantities compared (each once).
    pub compared: usize,
    /// Certainly larger.
    pub larger: usize,
    /// Certainly smaller.
    pub smaller: usize,
    /// Overlapping.
    pub indistinguishable: usize,
    /// Certainly changed by more than rtol (relative).
    pub beyond_rtol: usize,
    /// Quantities in A only.
    pub only_in_a: usize,
    /// Quantities in B only.
    pub only_in_b: usize,
    /// Whether the certificates certainly differ beyond the tolerance: a
    /// quantity both hold beyond rtol, or a parameter or architecture
    /// change (exit 1). A quantity present in one certificate only (made
    /// with other options: `--measures`, `--init`) is listed in
    /// [`DiffReport::unmatched`] and does not count.
    pub certainly_changed: bool,
    /// Every compared quantity: beyond rtol first, then changed, then the rest.
    pub rows: Vec<Row>,
    /// Every quantity present in one certificate only.
    pub unmatched: Vec<Unmatched>,
    /// Per matrix with a certain change: those whose own weights changed
    /// first, by the size of their largest certain relative change, then
    /// those changed only through aggregates.
    pub matrices: Vec<MatrixChange>,
    /// The norm-based measures (`docs/measures.md`) stated in both
    /// certificates, in the certificate's order, each with its certified
    /// change; a measure stated in one certificate only is in
    /// [`DiffReport::unmatched`]. Not counted in `compared`.
    pub measures: Vec<Row>,
    /// Measures certainly changed by more than rtol (relative).
    pub measures_beyond_rtol: usize,
}

impl DiffReport {
    /// `Refuted` ("unchanged within rtol" is refuted) when the certificates
    /// certainly differ beyond the tolerance, else `Holds`; never
    /// `Undecided` (overlapping enclosures count as unchanged).
    pub fn answer(&self) -> Answer {
        Answer::of(self.certainly_changed, false)
    }
}

fn row(what: QuantityFields, label: String, a: CertInterval, b: CertInterval, rtol: f64) -> Row {
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
    // (b - a) / a for a in [a.lo, a.hi] > 0: each end divided by the end
    // of a that makes it extreme, rounded outward.
    let relative_change = (a.lo > 0.0).then(|| {
        let lo = r::div_rd(change[0], if change[0] >= 0.0 { a.hi } else { a.lo });
        let hi = r::div_ru(change[1], if change[1] >= 0.0 { a.lo } else { a.hi });
        [lo, hi]
    });
    Row {
        what,
        label,
        a: [a.lo, a.hi],
        b: [b.lo, b.hi],
        change,
        verdict,
        relative_change,
        exceeds_rtol,
    }
}

fn header(a: &Certificate, b: &Certificate) -> Vec<HeaderChange> {
    let mut v = Vec::new();
    let mut push = |kind, key: &str, x: String, y: String| {
        if x != y {
            v.push(HeaderChange {
                kind,
                key: key.to_string(),
                a: x,
                b: y,
            });
        }
    };
    let files = |c: &Certificate| -> BTreeMap<String, String> {
        c.model
            .files
            .iter()
            .map(|f| (f.file.clone(), f.sha256.clone()))
            .collect()
    };
    let (fa, fb) = (files(a), files(b));
    let names: std::collections::BTreeSet<&String> = fa.keys().chain(fb.keys()).collect();
    for n in names {
        let get =
            |m: &BTreeMap<String, String>| m.get(n).cloned().unwrap_or_else(|| "absent".into());
        push(
            HeaderKind::Model,
            &format!("model.files[{n}].sha256"),
            get(&fa),
            get(&fb),
        );
    }
    let (ma, mb) = (&a.model, &b.model);
    push(
        HeaderKind::Architecture,
        "model.architecture",
        ma.architecture.clone(),
        mb.architecture.clone(),
    );
    for (key, x, y) in [
        ("model.layers", ma.layers, mb.layers),
        ("model.hidden", ma.hidden, mb.hidden),
        ("model.heads", ma.heads, mb.heads),
        ("model.kv_heads", ma.kv_heads, mb.kv_heads),
        ("model.head_dim", ma.head_dim, mb.head_dim),
        ("model.intermediate", ma.intermediate, mb.intermediate),
    ] {
        push(HeaderKind::Architecture, key, x.to_string(), y.to_string());
    }
    let (pa, pb) = (&a.parameters, &b.parameters);
    push(
        HeaderKind::Parameter,
        "parameters.l_phi",
        pa.l_phi.clone(),
        pb.l_phi.clone(),
    );
    push(
        HeaderKind::Parameter,
        "parameters.grid_m",
        pa.grid_m.to_string(),
        pb.grid_m.to_string(),
    );
    push(
        HeaderKind::Parameter,
        "parameters.precision",
        pa.precision.to_string(),
        pb.precision.to_string(),
    );
    v
}

/// Compares two validated certificates.
pub fn diff(a: &Certificate, b: &Certificate, rtol: f64) -> DiffReport {
    let header = header(a, b);
    let key_map = |c: &Certificate| -> BTreeMap<
        (Subject, Quantity),
        (crate::certificate::QuantityId, CertInterval),
    > { c.quantities().map(|(q, x)| (q.key(), (q, x))).collect() };
    let (qa, qb) = (key_map(a), key_map(b));
    let mut rows = Vec::new();
    let mut unmatched = Vec::new();
    for (k, (qid, xa)) in &qa {
        match qb.get(k) {
            Some((_, xb)) => rows.push(row(qid.fields(), qid.to_string(), *xa, *xb, rtol)),
            None => unmatched.push(Unmatched {
                what: qid.fields(),
                label: qid.to_string(),
                only_in: "a",
            }),
        }
    }
    for (k, (qid, _)) in &qb {
        if !qa.contains_key(k) {
            unmatched.push(Unmatched {
                what: qid.fields(),
                label: qid.to_string(),
                only_in: "b",
            });
        }
    }
    sort_grid_points_by_p(&mut rows);
    rows.sort_by_key(|x| (!x.exceeds_rtol, x.verdict == Change::Indistinguishable));
    let matrices = matrix_changes(&rows);
    let measures = measure_rows(a, b, rtol, &mut unmatched);
    let measures_beyond_rtol = measures.iter().filter(|x| x.exceeds_rtol).count();
    let count = |c: Change| rows.iter().filter(|x| x.verdict == c).count();
    let beyond_rtol = rows.iter().filter(|x| x.exceeds_rtol).count();
    let only_in_a = unmatched.iter().filter(|u| u.only_in == "a").count();
    let only_in_b = unmatched.len() - only_in_a;
    // A quantity in one certificate only (one made with `--measures` or
    // `--init`, the other without) is listed, not a change: exit 1 says a
    // quantity both certificates hold certainly changed.
    let certainly_changed = beyond_rtol > 0
        || measures_beyond_rtol > 0
        || header.iter().any(|h| h.kind != HeaderKind::Model);
    DiffReport {
        rtol,
        compared: rows.len(),
        larger: count(Change::Larger),
        smaller: count(Change::Smaller),
        indistinguishable: count(Change::Indistinguishable),
        beyond_rtol,
        only_in_a,
        only_in_b,
        certainly_changed,
        header,
        rows,
        unmatched,
        matrices,
        measures,
        measures_beyond_rtol,
    }
}

/// The measures of both certificates compared by name (rows in `a`'s
/// order); those stated in one only are pushed onto `unmatched`.
fn measure_rows(
    a: &Certificate,
    b: &Certificate,
    rtol: f64,
    unmatched: &mut Vec<Unmatched>,
) -> Vec<Row> {
    let stated = |c: &Certificate| c.measures.as_ref().map(|m| m.stated()).unwrap_or_default();
    let (ma, mb) = (stated(a), stated(b));
    let fields = |name: &'static str| QuantityFields {
        layer: None,
        head: None,
        expert: None,
        kind: None,
        quantity: name,
        index: None,
        p: None,
    };
    let label = |name: &str| format!("measure {name}");
    let mut rows = Vec::new();
    for &(name, xa) in &ma {
        match mb.iter().find(|(n, _)| *n == name) {
            Some(&(_, xb)) => rows.push(row(fields(name), label(name), xa, xb, rtol)),
            None => unmatched.push(Unmatched {
                what: fields(name),
                label: label(name),
                only_in: "a",
            }),
        }
    }
    for &(name, _) in &mb {
        if !ma.iter().any(|(n, _)| *n == name) {
            unmatched.push(Unmatched {
                what: fields(name),
                label: label(name),
                only_in: "b",
            });
        }
    }
    rows
}

/// The exact value of a grid point `k/m` as a pair, compared by cross
/// multiplication.
fn grid_point(p: &Option<String>) -> Option<(u128, u128)> {
    let (k, m) = p.as_ref()?.split_once('/').unwrap_or((p.as_deref()?, "1"));
    Some((k.parse().ok()?, m.parse().ok()?))
}

/// Within each run of rows of one subject and quantity, grid points in
/// the order of their exact value (the certificate's key order is by
/// reduced fraction, `5/12` after `3/4`).
fn sort_grid_points_by_p(rows: &mut [Row]) {
    let same = |x: &Row, y: &Row| {
        (x.what.layer, x.what.head, x.what.kind, x.what.quantity)
            == (y.what.layer, y.what.head, y.what.kind, y.what.quantity)
    };
    let mut start = 0;
    while start < rows.len() {
        let mut end = start + 1;
        while end < rows.len() && same(&rows[start], &rows[end]) {
            end += 1;
        }
        rows[start..end].sort_by(
            |x, y| match (grid_point(&x.what.p), grid_point(&y.what.p)) {
                (Some((a, b)), Some((c, d))) => (a * d).cmp(&(c * b)),
                _ => std::cmp::Ordering::Equal,
            },
        );
        start = end;
    }
}

/// Whether a matrix quantity is the matrix's own (its spectrum and
/// norms), not an aggregate over its layer.
fn is_own(quantity: &str) -> bool {
    matches!(
        quantity,
        "spectral_norm"
            | "frobenius_norm"
            | "nuclear_norm"
            | "norm_21"
            | "norm_11"
            | "stable_rank"
            | "rank"
            | "singular_value"
            | "singular_values"
    )
}

/// The smallest certain size of a relative change (0 when not certain).
fn certain_size(r: &Row) -> f64 {
    match (r.verdict, r.relative_change) {
        (Change::Indistinguishable, _) | (_, None) => 0.0,
        (Change::Larger, Some([lo, _])) => lo.max(0.0),
        (Change::Smaller, Some([_, hi])) => (-hi).max(0.0),
    }
}

fn matrix_changes(rows: &[Row]) -> Vec<MatrixChange> {
    let mut by: BTreeMap<(usize, Option<usize>, &'static str), MatrixChange> = BTreeMap::new();
    let mut best: BTreeMap<(usize, Option<usize>, &'static str), f64> = BTreeMap::new();
    for r in rows
        .iter()
        .filter(|r| r.verdict != Change::Indistinguishable)
    {
        let (Some(layer), Some(kind)) = (r.what.layer, r.what.kind) else {
            continue;
        };
        let key = (layer, r.what.head, kind);
        let e = by.entry(key).or_insert_with(|| MatrixChange {
            matrix: match r.what.head {
                Some(h) => format!("layer {layer} head {h} {kind}"),
                None => format!("layer {layer} {kind}"),
            },
            layer,
            head: r.what.head,
            kind,
            own_weights_changed: false,
            own_changes: 0,
            knock_on_changes: 0,
            largest: None,
            largest_relative_change: None,
        });
        if is_own(r.what.quantity) {
            e.own_weights_changed = true;
            e.own_changes += 1;
        } else {
            e.knock_on_changes += 1;
        }
        let size = certain_size(r);
        let b = best.entry(key).or_insert(-1.0);
        // The cause first: an own quantity outranks any aggregate.
        let rank = size + if is_own(r.what.quantity) { 1e300 } else { 0.0 };
        if rank > *b {
            *b = rank;
            e.largest = Some(r.label.clone());
            e.largest_relative_change = r.relative_change;
        }
    }
    let mut v: Vec<(f64, MatrixChange)> = by
        .into_iter()
        .map(|(k, m)| (best.get(&k).copied().unwrap_or(0.0), m))
        .collect();
    v.sort_by(|(a, x), (b, y)| {
        (!x.own_weights_changed, std::cmp::Reverse(a.to_bits()))
            .cmp(&(!y.own_weights_changed, std::cmp::Reverse(b.to_bits())))
    });
    v.into_iter().map(|(_, m)| m).collect()
}

/// One row for people: label, direction, certified change, relative change.
fn change_line(r: &Row, width: usize, st: crate::report::fmt::Style) -> String {
    let rel = r
        .relative_change
        .map(|[lo, hi]| format!(" (relative {})", crate::report::fmt::interval(lo, hi, st)))
        .unwrap_or_default();
    format!(
        "{:<width$} {:?}: change in {}{rel}{}",
        r.label,
        r.verdict,
        crate::report::fmt::interval(r.change[0], r.change[1], st),
        if r.exceeds_rtol { "  > rtol" } else { "" }
    )
}

impl DiffReport {
    /// The comparison for people: a header with the counts, the header
    /// differences, at most `max_rows` changed quantities, the quantities
    /// in one certificate only, and a footer whose counts are the header's.
    pub fn to_text(&self, max_rows: usize) -> String {
        self.to_text_with(max_rows, crate::report::fmt::Style::default())
    }

    /// [`DiffReport::to_text`] with every change interval rounded outward
    /// in style `st` (`crate::report::fmt`).
    pub(crate) fn to_text_with(&self, max_rows: usize, st: crate::report::fmt::Style) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let counts = format!(
            "{} quantities compared: {} certainly larger, {} certainly smaller, {} indistinguishable; \
             {} certainly changed by more than rtol = {}; {} only in A, {} only in B",
            self.compared,
            self.larger,
            self.smaller,
            self.indistinguishable,
            self.beyond_rtol,
            self.rtol,
            self.only_in_a,
            self.only_in_b
        );
        let _ = writeln!(s, "{counts}");
        for h in &self.header {
            let what = match h.kind {
                HeaderKind::Model => "model",
                HeaderKind::Architecture => "ARCHITECTURE",
                HeaderKind::Parameter => "PARAMETER",
            };
            let e = crate::io::escape;
            let _ = writeln!(
                s,
                "  {what} differs: {}: {} -> {}",
                e(&h.key),
                e(&h.a),
                e(&h.b)
            );
        }
        self.write_matrices(&mut s, max_rows, st);
        self.write_measures(&mut s, st);
        self.write_changed(&mut s, max_rows, st);
        self.write_unmatched(&mut s, max_rows);
        let _ = writeln!(s, "total: {counts}");
        s
    }

    /// The matrices with a certain change, those whose own weights changed
    /// listed (at most `max_rows`).
    fn write_matrices(&self, s: &mut String, max_rows: usize, st: crate::report::fmt::Style) {
        use std::fmt::Write;
        let own: Vec<&MatrixChange> = self
            .matrices
            .iter()
            .filter(|m| m.own_weights_changed)
            .collect();
        if !self.matrices.is_empty() {
            let _ = writeln!(
                s,
                "  {} matrices whose own spectrum or norms certainly changed (largest certain relative change first), {} changed only through aggregates (alpha, gamma, contributions):",
                own.len(),
                self.matrices.len() - own.len()
            );
        }
        for m in own.iter().take(max_rows) {
            let rel = m
                .largest_relative_change
                .map(|[lo, hi]| {
                    format!(
                        ", relative change {}",
                        crate::report::fmt::interval(lo, hi, st)
                    )
                })
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "    {:<28} {} own, {} knock-on changes; largest: {}{rel}",
                m.matrix,
                m.own_changes,
                m.knock_on_changes,
                m.largest.as_deref().unwrap_or("-")
            );
        }
        if own.len() > max_rows {
            let _ = writeln!(s, "    ... {} more (use --json)", own.len() - max_rows);
        }
    }

    /// Every measure compared, with its change.
    fn write_measures(&self, s: &mut String, st: crate::report::fmt::Style) {
        use std::fmt::Write;
        if !self.measures.is_empty() {
            let _ = writeln!(
                s,
                "  norm-based measures (docs/measures.md): {} compared, {} certainly changed, {} by more than rtol:",
                self.measures.len(),
                self.measures
                    .iter()
                    .filter(|r| r.verdict != Change::Indistinguishable)
                    .count(),
                self.measures_beyond_rtol
            );
        }
        for r in &self.measures {
            let _ = writeln!(s, "    {}", change_line(r, 26, st));
        }
    }

    /// The quantities certainly changed (at most `max_rows`): beyond rtol
    /// first; the matrices' own ones before the aggregates that moved
    /// because of them.
    fn write_changed(&self, s: &mut String, max_rows: usize, st: crate::report::fmt::Style) {
        use std::fmt::Write;
        let mut changed: Vec<&Row> = self
            .rows
            .iter()
            .filter(|r| r.verdict != Change::Indistinguishable)
            .collect();
        changed.sort_by_key(|r| (!r.exceeds_rtol, !is_own(r.what.quantity)));
        for r in changed.iter().take(max_rows) {
            let _ = writeln!(s, "  {}", change_line(r, 48, st));
        }
        if changed.len() > max_rows {
            let _ = writeln!(
                s,
                "  ... {} more certainly changed quantities (use --json)",
                changed.len() - max_rows
            );
        }
    }

    /// The quantities in one certificate only (at most `max_rows`).
    fn write_unmatched(&self, s: &mut String, max_rows: usize) {
        use std::fmt::Write;
        if !self.unmatched.is_empty() {
            let _ = writeln!(
                s,
                "  in one certificate only (not compared; made with other options such as --measures or --init, they do not change the exit status): {} in A only, {} in B only:",
                self.only_in_a, self.only_in_b
            );
        }
        for u in self.unmatched.iter().take(max_rows) {
            let _ = writeln!(s, "    only in {}: {}", u.only_in.to_uppercase(), u.label);
        }
        if self.unmatched.len() > max_rows {
            let _ = writeln!(
                s,
                "    ... {} more quantities in one certificate only (use --json)",
                self.unmatched.len() - max_rows
            );
        }
    }
}
