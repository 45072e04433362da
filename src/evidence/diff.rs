//! `specbound diff`: compares two certificates.
//!
//! First what makes the two incomparable or differently parameterised:
//! model hashes, architecture and parameters (`l_phi`, grid, precision).
//! Then every certified quantity ([`Certificate::quantities`]), each once,
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
    /// Whether the change certainly exceeds `rtol` relative to the old value.
    pub exceeds_rtol: bool,
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
    /// quantity beyond rtol, a parameter or architecture change, or a
    /// quantity present in one certificate only (exit 1).
    pub certainly_changed: bool,
    /// Every compared quantity: beyond rtol first, then changed, then the rest.
    pub rows: Vec<Row>,
    /// Every quantity present in one certificate only.
    pub unmatched: Vec<Unmatched>,
}

impl DiffReport {
    /// The exit code of `specbound diff` for this report: 1 when the
    /// certificates certainly differ beyond the tolerance, else 0.
    pub fn exit_code(&self) -> u8 {
        u8::from(self.certainly_changed)
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
    Row {
        what,
        label,
        a: [a.lo, a.hi],
        b: [b.lo, b.hi],
        change,
        verdict,
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
    rows.sort_by_key(|x| (!x.exceeds_rtol, x.verdict == Change::Indistinguishable));
    let count = |c: Change| rows.iter().filter(|x| x.verdict == c).count();
    let beyond_rtol = rows.iter().filter(|x| x.exceeds_rtol).count();
    let only_in_a = unmatched.iter().filter(|u| u.only_in == "a").count();
    let only_in_b = unmatched.len() - only_in_a;
    let certainly_changed = beyond_rtol > 0
        || !unmatched.is_empty()
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
    }
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
    pub fn to_text_with(&self, max_rows: usize, st: crate::report::fmt::Style) -> String {
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
        let changed: Vec<&Row> = self
            .rows
            .iter()
            .filter(|r| r.verdict != Change::Indistinguishable)
            .collect();
        for r in changed.iter().take(max_rows) {
            let _ = writeln!(
                s,
                "  {:<48} {:?}: change in {}{}",
                r.label,
                r.verdict,
                crate::report::fmt::interval(r.change[0], r.change[1], st),
                if r.exceeds_rtol { "  > rtol" } else { "" }
            );
        }
        if changed.len() > max_rows {
            let _ = writeln!(
                s,
                "  ... {} more certainly changed quantities (use --json)",
                changed.len() - max_rows
            );
        }
        for u in self.unmatched.iter().take(max_rows) {
            let _ = writeln!(s, "  only in {}: {}", u.only_in.to_uppercase(), u.label);
        }
        if self.unmatched.len() > max_rows {
            let _ = writeln!(
                s,
                "  ... {} more quantities in one certificate only (use --json)",
                self.unmatched.len() - max_rows
            );
        }
        let _ = writeln!(s, "total: {counts}");
        s
    }
}
