//! Bounds and measures over training: the models of a study that carry a
//! training step, grouped into runs and ordered by step, as
//! `tables/trajectory.csv` (every bound and measure at every step, and its
//! ratio to the run's first step), `tables/trajectory_changes.csv` (the
//! matrices whose spectral norm, Frobenius norm or rank certainly changed
//! between consecutive steps, with the certified change), figure 6 and the
//! report's trajectory section.
//!
//! Every value is a certificate's interval as stated; every ratio is an
//! outward-rounded interval quotient (inari) and every change an
//! outward-rounded interval difference, each containing the exact quotient
//! or difference of the exact values (`proofs/trajectory-enclosure.md`,
//! L28). A ratio whose denominator interval contains 0 is not claimed: its
//! cells are empty and the `note` column says why.

use std::fmt::Write;

use plotters::prelude::*;

use super::figures::Figure;
use super::fmt::{approx, cert_interval};
use super::html::esc;
use super::measures::{quantities, QUANTITY_NAMES};
use super::set::StudySet;
use crate::certificate::CertInterval;

/// The figure's font (figures 1-5 are written by hand in `figures.rs`;
/// figure 6 is drawn with plotters).
const FONT: &str = "serif";

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Renders into an SVG string of `size` with a title and a subtitle line.
fn svg(
    size: (u32, u32),
    title: &str,
    subtitle: &str,
    draw: impl FnOnce(&DrawingArea<SVGBackend, plotters::coord::Shift>) -> Res<()>,
) -> Result<String, String> {
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, size).into_drawing_area();
        let run = || -> Res<()> {
            root.fill(&WHITE)?;
            let area = root.titled(title, (FONT, 24))?;
            let area = area.titled(subtitle, (FONT, 14).into_font().color(&BLACK.mix(0.7)))?;
            draw(&area)?;
            root.present()?;
            Ok(())
        };
        run().map_err(|e| format!("drawing failed: {e}"))?;
    }
    Ok(buf)
}

/// One curve of figure 6: (run, quantity index, points (x, ratio)).
type Curve = (usize, usize, Vec<(f64, CertInterval)>);

/// The file names of the two trajectory tables.
pub const TABLE_NAMES: [&str; 2] = ["trajectory.csv", "trajectory_changes.csv"];

/// The header of `trajectory.csv`.
pub const HEADER: &str = "run,model_id,step,bound,value_lo,value_hi,ratio_lo,ratio_hi,note";

/// The header of `trajectory_changes.csv`.
pub const CHANGES_HEADER: &str = "run,from_model_id,from_step,to_model_id,to_step,layer,head,\
matrix_type,quantity,from_lo,from_hi,to_lo,to_hi,change_lo,change_hi";

/// The trajectory figure's number, file name and title.
pub const FIGURE_NUMBER: usize = 6;
/// The trajectory figure's file under `figures/`.
pub const FIGURE_FILE: &str = "fig6_trajectory.svg";
/// The trajectory figure's title.
pub const FIGURE_TITLE: &str = "Bounds and measures over training";

/// One run: its name and its models (indices into the study's models)
/// with their steps, in increasing step order (steps distinct).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// The run's name (`run=NAME`, or the default run's).
    pub name: String,
    /// `(step, model index)`, by increasing step.
    pub points: Vec<(u64, usize)>,
}

/// The runs of a study, in order of first appearance.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trajectory {
    /// The runs.
    pub runs: Vec<Run>,
}

impl Trajectory {
    /// The runs of `(run name, step, model index)` triples: grouped by name
    /// in order of first appearance, each sorted by step.
    pub fn new(points: impl IntoIterator<Item = (String, u64, usize)>) -> Self {
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
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }
}

/// One row of `trajectory.csv`.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
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
    /// Encloses `value / value at the run's first step`, when claimed.
    pub ratio: Result<CertInterval, String>,
}

/// Encloses `x / y` for the exact `x` in `num` and `y` in `den`, for any
/// sign of `den`, or says why not: `den` contains 0 (the quotient could be
/// unbounded or undefined), or the quotient overflows binary64.
///
/// *Guarantee: certified enclosure* of the exact quotient (inari's
/// outward-rounded division; `proofs/trajectory-enclosure.md`, L28 (a)).
pub fn signed_ratio(num: &CertInterval, den: &CertInterval) -> Result<CertInterval, String> {
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
/// outward-rounded subtraction; `proofs/trajectory-enclosure.md`, L28 (b)).
pub fn change(from: &CertInterval, to: &CertInterval) -> Option<CertInterval> {
    CertInterval::of_inari(to.to_inari()? - from.to_inari()?)
}

/// Every row of `trajectory.csv`: each run's models by step, each with
/// every bound and measure some model of the run states. The ratio of
/// the first step's own value is exactly 1 when its interval excludes 0
/// (one exact value divided by itself, L28 (c)).
pub fn rows(set: &StudySet, t: &Trajectory) -> Vec<Row> {
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
            for (pi, &(step, model)) in run.points.iter().enumerate() {
                let value = all[pi][qi].1;
                let ratio = match (value, first[qi].1) {
                    (None, _) => Err("no value: the certificate states none".into()),
                    (Some(_), None) => {
                        Err("no ratio: the first step's certificate states no value".into())
                    }
                    (Some(v), Some(d)) if pi == 0 => {
                        signed_ratio(&v, &d).map(|_| CertInterval::point(1.0))
                    }
                    (Some(v), Some(d)) => signed_ratio(&v, &d),
                };
                out.push(Row {
                    run: ri,
                    model,
                    step,
                    quantity: name,
                    value,
                    ratio,
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
pub struct Change {
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
pub fn changes(set: &StudySet, t: &Trajectory) -> Vec<Change> {
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
pub fn tables(set: &StudySet, t: &Trajectory) -> [(&'static str, String); 2] {
    let mut a = format!("{HEADER}\n");
    for r in rows(set, t) {
        let (vlo, vhi) = r.value.map(|v| (num(v.lo), num(v.hi))).unwrap_or_default();
        let (qlo, qhi, note) = match &r.ratio {
            Ok(q) => (num(q.lo), num(q.hi), String::new()),
            Err(why) => (String::new(), String::new(), why.clone()),
        };
        let _ = writeln!(
            a,
            "{},{},{},{},{vlo},{vhi},{qlo},{qhi},{note}",
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
fn colour(i: usize) -> RGBColor {
    const C: [RGBColor; 15] = [
        RGBColor(255, 165, 0),
        RGBColor(106, 90, 205),
        RGBColor(31, 119, 180),
        RGBColor(174, 199, 232),
        RGBColor(44, 160, 44),
        RGBColor(152, 223, 138),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(196, 156, 148),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
        RGBColor(0, 0, 0),
    ];
    C[i % C.len()]
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
            zero_at: (lo as f64).log10() - 1.0,
        }
    }

    fn x(&self, step: u64) -> f64 {
        match (self.log, step) {
            (false, s) => s as f64,
            (true, 0) => self.zero_at,
            (true, s) => (s as f64).log10(),
        }
    }

    fn label(&self, v: f64) -> String {
        if !self.log {
            return approx(v);
        }
        if (v - self.zero_at).abs() < 1e-9 {
            return "0".into();
        }
        decade_label(v, self.zero_at + 0.5)
    }
}

/// The label of a log axis at `log10` position `v`: the power of ten at
/// whole decades at or above `from`, nothing elsewhere.
fn decade_label(v: f64, from: f64) -> String {
    if v < from || (v - v.round()).abs() > 1e-9 {
        return String::new();
    }
    approx(10f64.powi(v.round() as i32))
}

/// Figure 6: every bound and measure against the step, normalised at each
/// run's first step (certified ratio bands; a quantity whose ratio is not
/// claimed is left out and the caption names it). The step axis is
/// logarithmic when the positive steps span two decades or more; step 0,
/// which a log axis has no place for, is drawn one decade below the
/// smallest positive step and labelled `0`. The ratio axis is
/// logarithmic (`log10` positions) when every ratio is positive and they
/// span two decades or more, else linear.
pub fn figure(set: &StudySet, t: &Trajectory) -> Figure {
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
    // Curves: (run, quantity index) -> points (x, ratio).
    let mut curves: Vec<Curve> = Vec::new();
    let mut left_out: Vec<String> = Vec::new();
    for r in &rows {
        let qi = QUANTITY_NAMES
            .iter()
            .position(|n| *n == r.quantity)
            .expect("a known name");
        let Ok(q) = r.ratio else {
            let name = format!("{} ({})", r.quantity, t.runs[r.run].name);
            if !left_out.contains(&name) {
                left_out.push(name);
            }
            continue;
        };
        match curves.iter_mut().find(|c| c.0 == r.run && c.1 == qi) {
            Some(c) => c.2.push((axis.x(r.step), q)),
            None => curves.push((r.run, qi, vec![(axis.x(r.step), q)])),
        }
    }
    let all: Vec<CertInterval> = curves
        .iter()
        .flat_map(|c| c.2.iter().map(|p| p.1))
        .collect();
    let (ymin, ymax) = all
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), q| {
            (a.min(q.lo), b.max(q.hi))
        });
    let log_y = ymin > 0.0 && ymax / ymin >= 100.0;
    let ty = |v: f64| if log_y { v.log10() } else { v };
    let (y0, y1) = (ty(ymin), ty(ymax));
    let pad = ((y1 - y0) * 0.05).max(0.05);
    let xs: Vec<f64> = steps.iter().map(|&s| axis.x(s)).collect();
    let (x0, x1) = xs
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    let xpad = ((x1 - x0) * 0.04).max(0.5);
    let widest = all
        .iter()
        .filter(|q| q.lo > 0.0)
        .map(|q| (q.hi - q.lo) / q.lo)
        .fold(0.0, f64::max);
    let multi_run = t.runs.len() > 1;
    let subtitle = format!(
        "value / value at the run's first step; certified bands (widest relative width {})",
        approx(widest)
    );
    let draw = |area: &DrawingArea<SVGBackend, plotters::coord::Shift>| -> Result<(), Box<dyn std::error::Error>> {
        let mut chart = ChartBuilder::on(area)
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(72)
            .build_cartesian_2d((x0 - xpad)..(x1 + xpad), (y0 - pad)..(y1 + pad))?;
        let xfmt = |v: &f64| axis.label(*v);
        let yfmt = |v: &f64| {
            if log_y {
                decade_label(*v, f64::NEG_INFINITY)
            } else {
                approx(*v)
            }
        };
        chart
            .configure_mesh()
            .x_desc(if axis.log { "Training step (log scale)" } else { "Training step" })
            .y_desc(if log_y { "Ratio to the first step (log scale)" } else { "Ratio to the first step" })
            .axis_desc_style((FONT, 16))
            .label_style((FONT, 13))
            .x_label_formatter(&xfmt)
            .y_label_formatter(&yfmt)
            .light_line_style(BLACK.mix(0.06))
            .bold_line_style(BLACK.mix(0.15))
            .draw()?;
        for (run, qi, pts) in &curves {
            let col = colour(*qi);
            if pts.len() >= 2 {
                let mut poly: Vec<(f64, f64)> = pts.iter().map(|(x, q)| (*x, ty(q.lo))).collect();
                poly.extend(pts.iter().rev().map(|(x, q)| (*x, ty(q.hi))));
                chart.draw_series(std::iter::once(Polygon::new(poly, col.mix(0.3).filled())))?;
            }
            let line: Vec<(f64, f64)> = pts.iter().map(|(x, q)| (*x, ty(q.mid()))).collect();
            let name = if multi_run {
                format!("{} ({})", QUANTITY_NAMES[*qi], t.runs[*run].name)
            } else {
                QUANTITY_NAMES[*qi].to_string()
            };
            chart
                .draw_series(LineSeries::new(line.clone(), col.stroke_width(2)))?
                .label(name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], col.stroke_width(2)));
            chart.draw_series(
                line.iter()
                    .map(|p| Circle::new(*p, 3, col.filled())),
            )?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .label_font((FONT, 12))
            .draw()?;
        Ok(())
    };
    let svg = svg((900, 600), FIGURE_TITLE, &subtitle, draw);
    let mut caption = format!(
        "Every bound and measure of {} run{} against the training step, divided by its value at the run's \
first step (certified interval quotients drawn as bands, exactly 1 at the first step). {}",
        t.runs.len(),
        if t.runs.len() == 1 { "" } else { "s" },
        if axis.log {
            "The step axis is logarithmic; step 0, which a log axis has no place for, is drawn one decade \
below the smallest positive step and labelled 0."
        } else {
            "The step axis is linear (the steps span less than two decades)."
        }
    );
    if !left_out.is_empty() {
        let _ = write!(
            caption,
            " Not drawn (no certified ratio): {}.",
            left_out.join(", ")
        );
    }
    fig(caption, svg)
}

/// The report's trajectory section: the runs, figure 6, the ratio of
/// every bound and measure at the last step of each run, and the number
/// of certain changes per consecutive pair.
pub fn section(set: &StudySet, t: &Trajectory, fig: &Figure) -> String {
    let mut h = String::from(
        "<section id=\"trajectory\">\n<h2>Trajectory over training</h2>\n<p class=\"note\">Models with a \
training step, grouped by run and ordered by step. Ratios are certified interval quotients by the run's \
first step (tables/trajectory.csv); a change is listed in tables/trajectory_changes.csv when the two \
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
    h.push_str("<table>\n<tr><th>run</th><th>steps</th><th>bound or measure</th><th>first step</th><th>last step</th><th>ratio last / first</th></tr>\n");
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
                "<tr><td>{}</td><td>{} to {}</td><td>{name}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                esc(&run.name),
                first.0,
                last.0,
                show(&a.value),
                show(&b.value),
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
