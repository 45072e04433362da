//! Bounds and measures over training: the models of a study that carry a
//! training step, grouped into runs and ordered by step, as
//! `tables/trajectory.csv` (every bound and measure at every step, its
//! certified difference from the run's first step, and its ratio to it
//! where a ratio means something), `tables/trajectory_changes.csv` (the
//! matrices whose spectral norm, Frobenius norm or rank certainly changed
//! between consecutive steps, with the certified change), figure 6 and the
//! report's trajectory section.
//!
//! Every value is a certificate's interval as stated; every ratio is an
//! outward-rounded interval quotient (inari) and every difference or
//! change an outward-rounded interval difference, each containing the
//! exact quotient or difference of the exact values
//! ([`proofs/trajectory-enclosure.md`](crate::proofs::trajectory_enclosure), L28). A ratio is claimed only for a
//! quantity on a linear scale whose first-step interval is certainly
//! positive: a quantity on a log scale (`log_*`: its ratio depends on the
//! unit and changes sign with it) or one whose first step may be 0 or
//! negative is compared by its difference alone; its ratio cells are empty
//! and the `note` column says why.

use std::fmt::Write;

use super::figures::{
    render, widest_clause, Curve, Entry, Figure, Panel, Rgb, Show, Style, Tick, XTicks, SHAPES,
};
use super::fmt::{approx, cert_interval};
use super::html::esc;
use super::measures::{quantities, QUANTITY_NAMES};
use super::set::StudySet;
use crate::certificate::CertInterval;

/// The file names of the two trajectory tables.
pub(crate) const TABLE_NAMES: [&str; 2] = ["trajectory.csv", "trajectory_changes.csv"];

/// The header of `trajectory.csv`.
pub(crate) const HEADER: &str =
    "run,model_id,step,bound,value_lo,value_hi,difference_lo,difference_hi,ratio_lo,ratio_hi,note";

/// The header of `trajectory_changes.csv`.
pub(crate) const CHANGES_HEADER: &str =
    "run,from_model_id,from_step,to_model_id,to_step,layer,head,\
matrix_type,quantity,from_lo,from_hi,to_lo,to_hi,change_lo,change_hi";

/// The trajectory figure's number, file name and title.
pub(crate) const FIGURE_NUMBER: usize = 6;
/// The trajectory figure's file under `figures/`.
pub(crate) const FIGURE_FILE: &str = "fig6_trajectory.svg";
/// The trajectory figure's title.
pub(crate) const FIGURE_TITLE: &str = "Bounds and measures over training";

/// One run: its name and its models (indices into the study's models)
/// with their steps, in increasing step order (steps distinct).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Run {
    /// The run's name (`run=NAME`, or the default run's).
    pub name: String,
    /// `(step, model index)`, by increasing step.
    pub points: Vec<(u64, usize)>,
}

/// The runs of a study, in order of first appearance.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Trajectory {
    /// The runs.
    pub runs: Vec<Run>,
}

impl Trajectory {
    /// The runs of `(run name, step, model index)` triples: grouped by name
    /// in order of first appearance, each sorted by step.
    pub(crate) fn new(points: impl IntoIterator<Item = (String, u64, usize)>) -> Self {
        let mut runs: Vec<Run> = Vec::new();
        for (name, step, model) in points {
            match runs.iter_mut().find(|r| r.name == name) {
                Some(r) => r.points.push((step, model)),
                None => runs.push(Run {
                    name,
                    points: vec![(step, model)],
                }),
            }
        }
        for r in &mut runs {
            r.points.sort_by_key(|p| p.0);
        }
        Self { runs }
    }

    /// Whether no model has a step.
    pub(crate) fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }
}

/// One row of `trajectory.csv`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Row {
    /// Index into the runs.
    pub run: usize,
    /// Index into the study's models.
    pub model: usize,
    /// The step.
    pub step: u64,
    /// The bound or measure ([`QUANTITY_NAMES`]).
    pub quantity: &'static str,
    /// The certificate's interval, `None` when it states none.
    pub value: Option<CertInterval>,
    /// Encloses `value - value at the run's first step`, when both are
    /// stated (and the difference is finite).
    pub difference: Option<CertInterval>,
    /// Encloses `value / value at the run's first step`, when claimed;
    /// else why not.
    pub ratio: Result<CertInterval, String>,
}

/// Whether the quantity `name` is on a log scale (`log_*` measures): its
/// values are logarithms, compared by their difference, never by a ratio.
pub(crate) fn log_scale(name: &str) -> bool {
    name.starts_with("log_")
}

/// Why the ratio of quantity `name` to its first-step interval `first`
/// means nothing, or `None` when it is claimed: a log-scale quantity, or a
/// first-step interval not certainly positive.
pub(crate) fn no_ratio_reason(name: &str, first: &CertInterval) -> Option<&'static str> {
    if log_scale(name) {
        Some("no ratio: a log-scale quantity (compare the difference)")
    } else if !(first.lo > 0.0) {
        Some("no ratio: the first step's interval is not certainly positive (compare the difference)")
    } else {
        None
    }
}

/// Encloses `x / y` for the exact `x` in `num` and `y` in `den`, or says
/// why not: `den` contains 0 (the quotient could be unbounded or
/// undefined), or the quotient overflows binary64.
///
/// *Guarantee: certified enclosure* of the exact quotient (inari's
/// outward-rounded division; [`proofs/trajectory-enclosure.md`](crate::proofs::trajectory_enclosure), L28 (a)).
pub(crate) fn signed_ratio(num: &CertInterval, den: &CertInterval) -> Result<CertInterval, String> {
    if den.lo <= 0.0 && 0.0 <= den.hi {
        return Err("no ratio: the first step's interval contains 0".into());
    }
    let (Some(n), Some(d)) = (num.to_inari(), den.to_inari()) else {
        return Err("no ratio: an interval is not finite".into());
    };
    CertInterval::of_inari(n / d).ok_or_else(|| "no ratio: the quotient exceeds binary64".into())
}

/// Encloses `b - a` for the exact `a` in `from` and `b` in `to`, or `None`
/// when the difference overflows binary64.
///
/// *Guarantee: certified enclosure* of the exact difference (inari's
/// outward-rounded subtraction; [`proofs/trajectory-enclosure.md`](crate::proofs::trajectory_enclosure), L28 (b)).
pub(crate) fn change(from: &CertInterval, to: &CertInterval) -> Option<CertInterval> {
    CertInterval::of_inari(to.to_inari()? - from.to_inari()?)
}

/// The ratio cell of a value `v` at position `pi` of its run against the
/// first step's `first`: exactly 1 at the first step (L28 (c)), an
/// interval quotient elsewhere (L28 (a)), or why not.
fn ratio_cell(
    name: &str,
    pi: usize,
    v: Option<CertInterval>,
    first: Option<CertInterval>,
) -> Result<CertInterval, String> {
    let (Some(v), Some(d)) = (v, first) else {
        return Err(match v {
            None => "no value: the certificate states none",
            Some(_) => "no ratio: the first step's certificate states no value",
        }
        .into());
    };
    if let Some(why) = no_ratio_reason(name, &d) {
        return Err(why.into());
    }
    if pi == 0 {
        return Ok(CertInterval::point(1.0));
    }
    signed_ratio(&v, &d)
}

/// Every row of `trajectory.csv`: each run's models by step, each with
/// every bound and measure some model of the run states. At the first step
/// the difference is exactly 0 (one exact value minus itself, L28 (d)).
pub(crate) fn rows(set: &StudySet, t: &Trajectory) -> Vec<Row> {
    let mut out = Vec::new();
    for (ri, run) in t.runs.iter().enumerate() {
        let all: Vec<_> = run
            .points
            .iter()
            .map(|&(_, m)| quantities(&set.models[m].cert))
            .collect();
        let first = &all[0];
        for (qi, name) in QUANTITY_NAMES.iter().enumerate() {
            if all.iter().all(|q| q[qi].1.is_none()) {
                continue;
            }
            let f = first[qi].1;
            for (pi, &(step, model)) in run.points.iter().enumerate() {
                let value = all[pi][qi].1;
                let difference = match (value, f) {
                    (Some(_), Some(_)) if pi == 0 => Some(CertInterval::point(0.0)),
                    (Some(v), Some(d)) => change(&d, &v),
                    _ => None,
                };
                out.push(Row {
                    run: ri,
                    model,
                    step,
                    quantity: name,
                    value,
                    difference,
                    ratio: ratio_cell(name, pi, value, f),
                });
            }
        }
    }
    out
}

/// One row of `trajectory_changes.csv`: a quantity of one matrix that
/// certainly changed between consecutive steps (the two intervals are
/// disjoint), with the certified change.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Change {
    /// Index into the runs.
    pub run: usize,
    /// `(step, model index)` of the earlier and the later step.
    pub from: (u64, usize),
    /// The later step.
    pub to: (u64, usize),
    /// Layer.
    pub layer: usize,
    /// Head (`-1` for a layer matrix).
    pub head: i64,
    /// `QK`, `V_tilde`, `M_in`, `M_out` (proxy matrices) or `raw_<role>`
    /// (raw weight matrices, the measures' `W_i`).
    pub matrix_type: String,
    /// `spectral_norm`, `frobenius_norm` or `rank`.
    pub quantity: &'static str,
    /// The interval at the earlier step.
    pub before: CertInterval,
    /// The interval at the later step.
    pub after: CertInterval,
    /// Encloses `after - before` (the exact change).
    pub change: CertInterval,
}

type Keyed = Vec<((usize, i64, String), [Option<CertInterval>; 3])>;

/// The keyed quantities of one certificate that changes are looked for in.
fn keyed(c: &crate::certificate::Certificate) -> Keyed {
    let mut v = Vec::new();
    for w in &c.matrices {
        let id = w.id();
        let rank = CertInterval {
            lo: w.rank.lo as f64,
            hi: w.rank.hi as f64,
        };
        v.push((
            (id.layer, id.head_column(), id.kind.name().to_string()),
            [Some(w.spectral_norm), Some(w.frobenius_norm), Some(rank)],
        ));
    }
    for r in c.raw_weights.iter().flatten() {
        // A raw weight's rank is not in the certificate.
        v.push((
            (r.layer, -1, format!("raw_{}", r.role)),
            [Some(r.spectral_norm), Some(r.frobenius_norm), None],
        ));
    }
    v
}

/// Every certain change between consecutive steps of every run.
pub(crate) fn changes(set: &StudySet, t: &Trajectory) -> Vec<Change> {
    const NAMES: [&str; 3] = ["spectral_norm", "frobenius_norm", "rank"];
    let mut out = Vec::new();
    for (ri, run) in t.runs.iter().enumerate() {
        for pair in run.points.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let after = keyed(&set.models[b.1].cert);
            for (key, before) in keyed(&set.models[a.1].cert) {
                let Some((_, now)) = after.iter().find(|(k, _)| *k == key) else {
                    continue;
                };
                for (qi, quantity) in NAMES.iter().enumerate() {
                    let (Some(x), Some(y)) = (before[qi], now[qi]) else {
                        continue;
                    };
                    if !x.disjoint(&y) {
                        continue;
                    }
                    // Ranks are integers and their differences exact in
                    // binary64 (below 2^53); norms through L28 (b).
                    let Some(d) = change(&x, &y) else { continue };
                    out.push(Change {
                        run: ri,
                        from: a,
                        to: b,
                        layer: key.0,
                        head: key.1,
                        matrix_type: key.2.clone(),
                        quantity,
                        before: x,
                        after: y,
                        change: d,
                    });
                }
            }
        }
    }
    out
}

fn num(x: f64) -> String {
    super::csv::num(x)
}

/// `(file name, contents)` of the two tables (headers only when no model
/// has a step). Ids and run names are used as given (the study's id rule
/// keeps them free of `,`, `"` and line breaks).
pub(crate) fn tables(set: &StudySet, t: &Trajectory) -> [(&'static str, String); 2] {
    let mut a = format!("{HEADER}\n");
    for r in rows(set, t) {
        let (vlo, vhi) = r.value.map(|v| (num(v.lo), num(v.hi))).unwrap_or_default();
        let (dlo, dhi) = r
            .difference
            .map(|v| (num(v.lo), num(v.hi)))
            .unwrap_or_default();
        let (qlo, qhi, note) = match &r.ratio {
            Ok(q) => (num(q.lo), num(q.hi), String::new()),
            Err(why) => (String::new(), String::new(), why.clone()),
        };
        let _ = writeln!(
            a,
            "{},{},{},{},{vlo},{vhi},{dlo},{dhi},{qlo},{qhi},{note}",
            t.runs[r.run].name, set.models[r.model].id, r.step, r.quantity
        );
    }
    let mut b = format!("{CHANGES_HEADER}\n");
    for c in changes(set, t) {
        let _ = writeln!(
            b,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            t.runs[c.run].name,
            set.models[c.from.1].id,
            c.from.0,
            set.models[c.to.1].id,
            c.to.0,
            c.layer,
            c.head,
            c.matrix_type,
            c.quantity,
            num(c.before.lo),
            num(c.before.hi),
            num(c.after.lo),
            num(c.after.hi),
            num(c.change.lo),
            num(c.change.hi)
        );
    }
    [(TABLE_NAMES[0], a), (TABLE_NAMES[1], b)]
}

/// A colour per bound and measure ([`QUANTITY_NAMES`] order; the bounds
/// in the authors' colours).
fn colour(i: usize) -> Rgb {
    const C: [Rgb; 15] = [
        Rgb(255, 165, 0),
        Rgb(106, 90, 205),
        Rgb(31, 119, 180),
        Rgb(174, 199, 232),
        Rgb(44, 160, 44),
        Rgb(152, 223, 138),
        Rgb(214, 39, 40),
        Rgb(148, 103, 189),
        Rgb(140, 86, 75),
        Rgb(196, 156, 148),
        Rgb(227, 119, 194),
        Rgb(127, 127, 127),
        Rgb(188, 189, 34),
        Rgb(23, 190, 207),
        Rgb(0, 0, 0),
    ];
    C[i % C.len()]
}

/// A line style per round of five runs (the marker tells runs apart
/// within a round).
fn run_dash(run: usize) -> Option<&'static str> {
    [None, Some("7 4"), Some("2 3"), Some("9 3 2 3")][(run / SHAPES.len()) % 4]
}

/// How the step axis is drawn.
#[derive(Clone, Copy, Debug)]
struct StepAxis {
    /// `log10` positions (steps span at least two decades).
    log: bool,
    /// Where step 0 is drawn on a log axis: one decade below the smallest
    /// positive step.
    zero_at: f64,
}

impl StepAxis {
    fn of(steps: &[u64]) -> Self {
        let pos: Vec<u64> = steps.iter().copied().filter(|&s| s > 0).collect();
        let (lo, hi) = (
            pos.iter().min().copied().unwrap_or(1),
            pos.iter().max().copied().unwrap_or(1),
        );
        let log = hi as f64 / lo as f64 >= 100.0;
        Self {
            log,
            zero_at: (lo as f64).log10().floor() - 1.0,
        }
    }

    fn x(&self, step: u64) -> f64 {
        match (self.log, step) {
            (false, s) => s as f64,
            (true, 0) => self.zero_at,
            (true, s) => (s as f64).log10(),
        }
    }

    /// The ticks: nice linear ones, or on a log axis `0` at its place and
    /// the powers of ten from the smallest positive step's decade (every
    /// k-th, for at most 8).
    fn ticks(&self, steps: &[u64]) -> XTicks {
        if !self.log {
            return XTicks::Nice;
        }
        let top = steps.iter().map(|&s| self.x(s)).fold(0.0, f64::max).floor() as i32;
        let from = self.zero_at as i32 + 1;
        let every = ((top - from + 1).max(1) as usize).div_ceil(8) as i32;
        let mut v = vec![(self.zero_at, Tick { mant: 0, exp: 0 })];
        v.extend(
            (from..=top)
                .filter(|e| (e - from) % every == 0)
                .map(|e| (e as f64, Tick { mant: 1, exp: e })),
        );
        XTicks::Placed(v)
    }
}

/// One curve of figure 6 before it is placed in a panel: run, quantity
/// index, whether it is a ratio, points `(x, interval)`.
struct Track {
    run: usize,
    qi: usize,
    ratio: bool,
    points: Vec<(f64, CertInterval)>,
}

impl Track {
    /// The decade of its largest magnitude (`log10` of the largest finite
    /// `|end|`), the key panels group curves by.
    fn top(&self) -> f64 {
        let m = self
            .points
            .iter()
            .flat_map(|(_, v)| [v.lo.abs(), v.hi.abs()])
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max);
        if m > 0.0 {
            m.log10()
        } else {
            f64::NEG_INFINITY
        }
    }
}

/// The curves of figure 6: a ratio curve for every quantity whose ratio is
/// claimed, a difference curve for every other one; and the quantities
/// with neither (no value at two steps), by name.
fn tracks(rows: &[Row], t: &Trajectory, axis: &StepAxis) -> (Vec<Track>, Vec<String>) {
    let mut out: Vec<Track> = Vec::new();
    let mut left_out = Vec::new();
    for (ri, run) in t.runs.iter().enumerate() {
        for (qi, name) in QUANTITY_NAMES.iter().enumerate() {
            let mine: Vec<&Row> = rows
                .iter()
                .filter(|r| r.run == ri && r.quantity == *name)
                .collect();
            if mine.is_empty() {
                continue;
            }
            let ratio = mine.iter().all(|r| r.value.is_none() || r.ratio.is_ok());
            let points: Vec<(f64, CertInterval)> = mine
                .iter()
                .filter_map(|r| {
                    let v = if ratio {
                        r.ratio.clone().ok()
                    } else {
                        r.difference
                    };
                    v.map(|v| (axis.x(r.step), v))
                })
                .collect();
            if points.len() < 2 {
                left_out.push(if t.runs.len() > 1 {
                    format!("{name} ({})", run.name)
                } else {
                    name.to_string()
                });
                continue;
            }
            out.push(Track {
                run: ri,
                qi,
                ratio,
                points,
            });
        }
    }
    (out, left_out)
}

/// Groups of tracks, largest first, each a panel: a new group starts when
/// a track's top lies more than `decades` below its group's first (so
/// that no curve of a panel is flattened by another's scale).
fn by_magnitude(mut v: Vec<Track>, decades: f64) -> Vec<Vec<Track>> {
    v.sort_by(|a, b| b.top().total_cmp(&a.top()));
    let mut groups: Vec<Vec<Track>> = Vec::new();
    for tr in v {
        match groups.last_mut() {
            Some(g) if !(g[0].top() - tr.top() > decades) || tr.top() == f64::NEG_INFINITY => {
                g.push(tr)
            }
            _ => groups.push(vec![tr]),
        }
    }
    groups
}

/// One panel of figure 6 from a group of tracks.
fn panel(group: Vec<Track>, t: &Trajectory, caption: String, xt: &XTicks) -> Panel {
    let ratio = group[0].ratio;
    let mut legend = Vec::new();
    let mut curves = Vec::new();
    for (i, tr) in group.into_iter().enumerate() {
        let name = QUANTITY_NAMES[tr.qi];
        let label = if t.runs.len() > 1 {
            format!("{name} ({})", t.runs[tr.run].name)
        } else {
            name.to_string()
        };
        let (col, shape, dash) = (
            colour(tr.qi),
            SHAPES[tr.run % SHAPES.len()],
            run_dash(tr.run),
        );
        let mut entry = Entry::line(label, col, dash);
        entry.marker = Some((shape, col));
        legend.push(entry);
        let mut style = Style::line(col, 2.0);
        style.dash = dash;
        style.marker = Some(shape);
        curves.push(Curve {
            style,
            points: tr.points,
            show: Show::Band,
            legend: vec![i],
            attrs: format!(" data-quantity=\"{name}\""),
        });
    }
    let xt = match xt {
        XTicks::Placed(v) => XTicks::Placed(v.clone()),
        _ => XTicks::Nice,
    };
    Panel {
        caption: Some(caption),
        x_desc: "Training step".into(),
        y_desc: if ratio {
            "Ratio to the first step".into()
        } else {
            "Difference from the first step".into()
        },
        curves,
        legend,
        x_ticks: xt,
        linear_y: !ratio,
    }
}

/// The panels of figure 6: the certified ratios on log axes, then the
/// certified differences of the log-scale measures, then those of the
/// other quantities without a ratio, on linear axes; each kind split by
/// magnitude (ratios 6 decades, differences 2) so that no curve lies flat.
fn panels(tracks: Vec<Track>, t: &Trajectory, xt: &XTicks) -> Vec<Panel> {
    let (ratios, diffs): (Vec<Track>, Vec<Track>) = tracks.into_iter().partition(|tr| tr.ratio);
    let (logs, others): (Vec<Track>, Vec<Track>) = diffs
        .into_iter()
        .partition(|tr| log_scale(QUANTITY_NAMES[tr.qi]));
    let kinds = [
        (
            by_magnitude(ratios, 6.0),
            "Ratio to the first step (log axis)",
        ),
        (
            by_magnitude(logs, 2.0),
            "Difference from the first step: log-scale measures",
        ),
        (
            by_magnitude(others, 2.0),
            "Difference from the first step: no certified ratio",
        ),
    ];
    let mut out = Vec::new();
    for (groups, what) in kinds {
        let n = groups.len();
        for (k, g) in groups.into_iter().enumerate() {
            let caption = if n > 1 {
                format!("{what}, part {} of {n}", k + 1)
            } else {
                what.to_string()
            };
            out.push(panel(g, t, caption, xt));
        }
    }
    out
}

/// Figure 6: every bound and measure against the step. A quantity with a
/// certified ratio (linear scale, first step certainly positive) is drawn
/// as its ratio to the run's first step on a log axis; every other one as
/// its certified difference from the first step on a linear axis; curves
/// are grouped into panels by magnitude, each with its legend beside it.
/// The step axis is logarithmic when the positive steps span two decades
/// or more; step 0, which a log axis has no place for, is drawn one decade
/// below the smallest positive step's decade and labelled `0`.
pub(crate) fn figure(set: &StudySet, t: &Trajectory) -> Figure {
    let fig = |caption: String, svg: Result<String, String>| Figure {
        number: FIGURE_NUMBER,
        file: FIGURE_FILE,
        title: FIGURE_TITLE,
        caption,
        svg,
    };
    if !t.runs.iter().any(|r| r.points.len() >= 2) {
        let why = if t.is_empty() {
            "skipped: no model has a step (step=N, --step N or a revision stepN)".to_string()
        } else {
            "skipped: no run has two steps".to_string()
        };
        return fig(why.clone(), Err(why));
    }
    let rows = rows(set, t);
    let steps: Vec<u64> = t
        .runs
        .iter()
        .flat_map(|r| r.points.iter().map(|p| p.0))
        .collect();
    let axis = StepAxis::of(&steps);
    let (tracks, left_out) = tracks(&rows, t, &axis);
    if tracks.is_empty() {
        let why = "skipped: no quantity has a value at two steps of a run".to_string();
        return fig(why.clone(), Err(why));
    }
    let (rel, widest) = widest_clause(tracks.iter().flat_map(|tr| tr.points.iter().map(|p| &p.1)));
    let subtitle = format!(
        "value / value at the run's first step (log axes), value - value at the first step (linear axes); \
bands: certified intervals; {widest}"
    );
    let panels = panels(tracks, t, &axis.ticks(&steps));
    let svg = render(FIGURE_TITLE, &subtitle, &panels);
    fig(caption(t, &axis, rel, &left_out), svg)
}

/// Figure 6's caption.
fn caption(t: &Trajectory, axis: &StepAxis, rel: f64, left_out: &[String]) -> String {
    let mut c = format!(
        "Every bound and measure of {} run{} against the training step. A quantity on a linear scale whose \
first-step interval is certainly positive is drawn as its ratio to the run's first step (certified interval \
quotients, exactly 1 at the first step, log axis); a log-scale measure, or one whose first step may be 0, as its \
certified difference from the first step (exactly 0 there, linear axis). Curves far apart in magnitude are drawn \
in panels of their own. Bands: certified intervals (widest relative width {}). {}",
        t.runs.len(),
        if t.runs.len() == 1 { "" } else { "s" },
        approx(rel),
        if axis.log {
            "The step axis is logarithmic; step 0, which a log axis has no place for, is drawn one decade \
below the smallest positive step and labelled 0."
        } else {
            "The step axis is linear (the steps span less than two decades)."
        }
    );
    if !left_out.is_empty() {
        let _ = write!(
            c,
            " Not drawn (no value at the run's first step, or values at fewer than two steps): {}.",
            left_out.join(", ")
        );
    }
    c
}

/// The report's trajectory section: the runs, figure 6, the difference
/// and (where claimed) the ratio of every bound and measure at the last
/// step of each run to its first, and the number
/// of certain changes per consecutive pair.
pub(crate) fn section(set: &StudySet, t: &Trajectory, fig: &Figure) -> String {
    let mut h = String::from(
        "<section id=\"trajectory\">\n<h2>Trajectory over training</h2>\n<p class=\"note\">Models with a \
training step, grouped by run and ordered by step. Differences are certified interval differences from the \
run's first step; ratios certified interval quotients by it, given only for a quantity on a linear scale whose \
first-step interval is certainly positive (a log-scale measure, or one that may be 0 at the first step, is \
compared by its difference; tables/trajectory.csv); a change is listed in tables/trajectory_changes.csv when the two \
certified intervals of a matrix's spectral norm, Frobenius norm or rank are disjoint.</p>\n",
    );
    let _ = writeln!(h, "<h3>Figure {}: {}</h3>", fig.number, esc(fig.title));
    match &fig.svg {
        Ok(svg) => {
            let _ = writeln!(
                h,
                "<figure>\n{}\n<figcaption>{}</figcaption>\n</figure>",
                super::html::inline_svg(svg, fig.title),
                esc(&fig.caption)
            );
        }
        Err(why) => {
            let _ = writeln!(h, "<p class=\"skipped\">Not drawn: {}</p>", esc(why));
        }
    }
    let rows = rows(set, t);
    let changes = changes(set, t);
    h.push_str("<table>\n<tr><th>run</th><th>steps</th><th>bound or measure</th><th>first step</th><th>last step</th><th>difference last - first</th><th>ratio last / first</th></tr>\n");
    for (ri, run) in t.runs.iter().enumerate() {
        let (first, last) = (run.points[0], run.points[run.points.len() - 1]);
        for name in QUANTITY_NAMES {
            let at = |m: usize| {
                rows.iter()
                    .find(|r| r.run == ri && r.model == m && r.quantity == name)
            };
            let (Some(a), Some(b)) = (at(first.1), at(last.1)) else {
                continue;
            };
            let show = |v: &Option<CertInterval>| {
                v.as_ref().map(cert_interval).unwrap_or_else(|| "-".into())
            };
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{} to {}</td><td>{name}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                esc(&run.name),
                first.0,
                last.0,
                show(&a.value),
                show(&b.value),
                show(&b.difference),
                match &b.ratio {
                    Ok(q) => cert_interval(q),
                    Err(why) => esc(why),
                }
            );
        }
    }
    h.push_str("</table>\n<table>\n<tr><th>run</th><th>from</th><th>to</th><th>certain changes (spectral, Frobenius, rank)</th></tr>\n");
    for (ri, run) in t.runs.iter().enumerate() {
        for pair in run.points.windows(2) {
            let count = |q: &str| {
                changes
                    .iter()
                    .filter(|c| c.run == ri && c.from == pair[0] && c.quantity == q)
                    .count()
            };
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{} (step {})</td><td>{} (step {})</td><td>{}, {}, {}</td></tr>",
                esc(&run.name),
                esc(&set.models[pair[0].1].id),
                pair[0].0,
                esc(&set.models[pair[1].1].id),
                pair[1].0,
                count("spectral_norm"),
                count("frobenius_norm"),
                count("rank")
            );
        }
    }
    h.push_str("</table>\n</section>\n");
    h
}
