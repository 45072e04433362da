//! The paper's five figures as SVG, written here by hand (no plotting
//! library), drawn from certificates, each point with its certified
//! interval: error bars where there are few points, bands (the region
//! between the lower and upper ends) along curves. Colours are the
//! authors' (QK tomato, V_tilde royal blue, M_in dark olive green, M_out
//! dark sea green; ours orange, Edelman slate blue); figure 5 colours by
//! layer instead, and draws the matrix types with distinct line styles. A
//! figure whose data are missing is not drawn: its `Figure::svg` is `Err`
//! with the reason. Figure 6 (the trajectory, `super::trajectory`) is drawn
//! by the same `render` from its own panels: log-y panels of ratios and
//! linear-y panels of signed differences (`Panel::linear_y`).
//!
//! What every drawn figure promises (and `tests/figures.rs` checks on the
//! SVG): the legend sits in its own column right of the plot area, so it
//! never covers data; every marker drawn is a shape its legend entry shows
//! (one path per shape, the same in both); two curves of different legend
//! entries that lie within a pixel of each other at every point are named
//! in a note under the figure, and different entries never share the same
//! colour, line style and marker; the x ticks of figures 2 to 4 are the
//! models' widths or depths; the tick labels of one axis share one
//! notation (plain decimals, or all `d.ddde±x`); each subtitle ends with the
//! widest relative width `(hi - lo)/lo` of the intervals drawn.
//!
//! The SVG marks its parts for readers and tests: `class="plot"` (the plot
//! area's frame), `"series"` groups (with `data-legend`, the indices of the
//! legend entries describing it, for figure 5 `data-layer`, for figure 6
//! `data-quantity`), `"panel-caption"` titles of panels,
//! `"legend"` (its frame `"legend-box"` and one `"legend-entry"` per entry
//! with `data-entry`), `"marker"` paths, `"xtick"`/`"ytick"` labels,
//! `"subtitle"` lines and `"note"` lines.
//!
//! Ratios drawn (normalised bounds, `c(W,p)/c(W,0)`) are certified interval
//! divisions ([`proofs/ratio-enclosure.md`](crate::proofs::ratio_enclosure)); positions on a log axis of an
//! interval end that is 0 are clamped to the axis' lower edge.

use std::fmt::Write as _;
use std::ops::Range;

use super::fmt::approx;
use super::fmt::esc;
use super::set::{ratio, scaling, Axis, Bound, ScalingRow, StudySet};
use crate::arch::MatrixType;
use crate::certificate::CertInterval;

/// The five figure titles, in order.
pub const TITLES: [&str; 5] = [
    "Spectral decay of the primary model",
    "Scaling with hidden dimension at fixed depth",
    "Scaling with depth at fixed hidden dimension",
    "Norms of the proxy matrices at the smallest depth",
    "Proxy contribution by head and layer",
];

/// The five file names under `figures/`, in order.
pub const FILE_NAMES: [&str; 5] = [
    "fig1_spectral_decay.svg",
    "fig2_bound_vs_width.svg",
    "fig3_bound_vs_depth.svg",
    "fig4_norms_vs_width.svg",
    "fig5_contribution_vs_p.svg",
];

/// The words every subtitle ends with, before the widest relative width of
/// the intervals drawn (as [`approx`] writes it).
pub const WIDEST_WIDTH: &str = "widest relative width (hi - lo)/lo of the intervals drawn: ";

/// One figure: drawn, or skipped with the reason.
#[derive(Clone, Debug)]
pub(crate) struct Figure {
    /// 1 to 5.
    pub number: usize,
    /// File name under `figures/`.
    pub file: &'static str,
    /// Title (also the SVG's caption).
    pub title: &'static str,
    /// What the figure shows, for the report (one paragraph).
    pub caption: String,
    /// The SVG text, or why the figure is not drawn.
    pub svg: Result<String, String>,
}

/// An sRGB colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rgb(pub u8, pub u8, pub u8);

impl Rgb {
    /// `#RRGGBB`.
    pub(crate) fn hex(self) -> String {
        format!("#{:02X}{:02X}{:02X}", self.0, self.1, self.2)
    }
}

/// The authors' colour of a matrix type.
pub(crate) fn type_colour(kind: MatrixType) -> Rgb {
    match kind {
        MatrixType::QK => Rgb(255, 99, 71),      // tomato
        MatrixType::VTilde => Rgb(65, 105, 225), // royal blue
        // Not the authors' (they have no cross-attention): lighter QK, V_tilde.
        MatrixType::QKCross => Rgb(255, 160, 122), // light salmon
        MatrixType::VTildeCross => Rgb(135, 206, 250), // light sky blue
        MatrixType::MIn => Rgb(85, 107, 47),       // dark olive green
        MatrixType::MOut => Rgb(143, 188, 143),    // dark sea green
    }
}

/// The authors' colour of a bound.
pub(crate) fn bound_colour(b: Bound) -> Rgb {
    match b {
        Bound::Ours => Rgb(255, 165, 0),     // orange
        Bound::Edelman => Rgb(106, 90, 205), // slate blue
    }
}

/// The colour of layer `l` in figure 5 (twelve distinct colours, then
/// again, with a marker per round of twelve).
pub(crate) fn layer_colour(l: usize) -> Rgb {
    const P: [Rgb; 12] = [
        Rgb(31, 119, 180),
        Rgb(214, 39, 40),
        Rgb(44, 160, 44),
        Rgb(148, 103, 189),
        Rgb(255, 127, 14),
        Rgb(140, 86, 75),
        Rgb(227, 119, 194),
        Rgb(23, 190, 207),
        Rgb(188, 189, 34),
        Rgb(127, 127, 127),
        Rgb(0, 0, 128),
        Rgb(128, 0, 0),
    ];
    P[l % P.len()]
}

/// The authors' legend name of a matrix type.
pub(crate) fn type_label(kind: MatrixType) -> &'static str {
    match kind {
        MatrixType::QK => "QK head",
        MatrixType::VTilde => "Ṽ = V Wᴼ head",
        MatrixType::QKCross => "QK cross-attention head",
        MatrixType::VTildeCross => "Ṽ cross-attention head",
        MatrixType::MIn => "M_in",
        MatrixType::MOut => "M_out",
    }
}

fn bound_label(b: Bound) -> &'static str {
    match b {
        Bound::Ours => "Ours",
        Bound::Edelman => "Edelman et al.",
    }
}

fn bound_dash(b: Bound) -> Option<&'static str> {
    match b {
        Bound::Ours => None,
        Bound::Edelman => Some("7 4"),
    }
}

/// Line style of a matrix type in figure 5 (colours are the layers').
fn type_dash(kind: MatrixType) -> Option<&'static str> {
    match kind {
        MatrixType::QK => None,
        MatrixType::VTilde => Some("5 3"),
        MatrixType::QKCross => Some("2 2"),
        MatrixType::VTildeCross => Some("6 2 1 2"),
        MatrixType::MIn => Some("1.5 2.5"),
        MatrixType::MOut => Some("9 3 2 3"),
    }
}

const TYPES: [MatrixType; 6] = MatrixType::ALL;

const FONT: &str = "serif";
const WIDTH: f64 = 860.0;
const PANEL_HEIGHT: f64 = 470.0;
const GREY: Rgb = Rgb(80, 80, 80);
const BLACK: Rgb = Rgb(0, 0, 0);

/// A marker shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Shape {
    Circle,
    Square,
    Triangle,
    Diamond,
    Plus,
}

pub(super) const SHAPES: [Shape; 5] = [
    Shape::Circle,
    Shape::Square,
    Shape::Triangle,
    Shape::Diamond,
    Shape::Plus,
];

impl Shape {
    /// The shape as relative path commands from its centre: the same text
    /// wherever the shape is drawn, in the plot and in the legend.
    fn path(self) -> &'static str {
        match self {
            Shape::Circle => "m -4,0 a 4,4 0 1,0 8,0 a 4,4 0 1,0 -8,0 z",
            Shape::Square => "m -4,-4 h 8 v 8 h -8 z",
            Shape::Triangle => "m 0,-5 l 4.5,8 h -9 z",
            Shape::Diamond => "m 0,-5 l 5,5 l -5,5 l -5,-5 z",
            Shape::Plus => {
                "m -1.5,-5 h 3 v 3.5 h 3.5 v 3 h -3.5 v 3.5 h -3 v -3.5 h -3.5 v -3 h 3.5 z"
            }
        }
    }
}

/// How a curve's intervals are drawn.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Show {
    /// A vertical bar with caps at every point, and the line of midpoints.
    Bars,
    /// A filled band between the lower and upper ends, and the line of
    /// midpoints.
    Band,
    /// Markers only, at the midpoints.
    Marks,
}

/// How a curve looks.
#[derive(Clone, Copy)]
pub(super) struct Style {
    pub(super) colour: Rgb,
    pub(super) opacity: f64,
    pub(super) width: f64,
    pub(super) dash: Option<&'static str>,
    pub(super) marker: Option<Shape>,
}

impl Style {
    pub(super) fn line(colour: Rgb, width: f64) -> Self {
        Self {
            colour,
            opacity: 1.0,
            width,
            dash: None,
            marker: None,
        }
    }
}

/// A curve: points `(x, interval)` in x order.
pub(super) struct Curve {
    pub(super) style: Style,
    pub(super) points: Vec<(f64, CertInterval)>,
    pub(super) show: Show,
    /// Indices of the legend entries that describe it.
    pub(super) legend: Vec<usize>,
    /// Extra attributes of its group (`data-layer="3"`), or empty.
    pub(super) attrs: String,
}

/// A legend entry: its label and sample (a line, a marker, or both).
pub(super) struct Entry {
    pub(super) label: String,
    pub(super) line: Option<(Rgb, f64, Option<&'static str>)>,
    pub(super) marker: Option<(Shape, Rgb)>,
}

impl Entry {
    pub(super) fn line(label: impl Into<String>, colour: Rgb, dash: Option<&'static str>) -> Self {
        Self {
            label: label.into(),
            line: Some((colour, 2.0, dash)),
            marker: None,
        }
    }
}

/// A tick value `mant * 10^exp`, exact as written.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Tick {
    pub(super) mant: u64,
    pub(super) exp: i32,
}

impl Tick {
    fn value(self) -> f64 {
        format!("{}e{}", self.mant, self.exp)
            .parse()
            .unwrap_or(f64::NAN)
    }

    /// Plain decimal: `0.05`, `20`, `1.5`.
    fn plain(self) -> String {
        let d = self.mant.to_string();
        if self.mant == 0 {
            return "0".into();
        }
        if self.exp >= 0 {
            return d + &"0".repeat(self.exp as usize);
        }
        let k = self.exp.unsigned_abs() as usize;
        let s = if d.len() > k {
            format!("{}.{}", &d[..d.len() - k], &d[d.len() - k..])
        } else {
            format!("0.{}{d}", "0".repeat(k - d.len()))
        };
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }

    /// Scientific: `1e-5`, `2.5e3`.
    fn sci(self) -> String {
        if self.mant == 0 {
            return "0e0".into();
        }
        let d = self.mant.to_string();
        let d = d.trim_end_matches('0');
        let e = self.exp + (self.mant.to_string().len() as i32) - 1;
        if d.len() == 1 {
            format!("{d}e{e}")
        } else {
            format!("{}.{}e{e}", &d[..1], &d[1..])
        }
    }
}

/// The labels of one axis' ticks, in one notation: plain decimals when
/// every tick is 0 or between 1e-4 and 1e6, scientific for all otherwise.
fn tick_labels(ticks: &[Tick]) -> Vec<String> {
    let plain = ticks.iter().all(|t| {
        let v = t.value();
        v == 0.0 || (1e-4..1e6).contains(&v)
    });
    ticks
        .iter()
        .map(|t| if plain { t.plain() } else { t.sci() })
        .collect()
}

/// Ticks `k * step` inside `[lo, hi]`, `k >= 0`, with `step` one of 1, 2,
/// 5 times a power of ten chosen for at most `most` ticks.
fn linear_ticks(lo: f64, hi: f64, most: usize) -> Vec<Tick> {
    if !(hi > lo) || !lo.is_finite() || !hi.is_finite() {
        return Vec::new();
    }
    let raw = (hi - lo) / most.max(1) as f64;
    let mut e = raw.log10().floor() as i32;
    let mut m = 1u64;
    'find: for _ in 0..4 {
        for cand in [1u64, 2, 5] {
            if (Tick { mant: cand, exp: e }).value() >= raw {
                m = cand;
                break 'find;
            }
        }
        e += 1;
    }
    let step = Tick { mant: m, exp: e }.value();
    let first = (lo / step).ceil().max(0.0) as u64;
    let last = (hi / step).floor();
    if last < 0.0 {
        return Vec::new();
    }
    (first..=last as u64)
        .map(|k| Tick {
            mant: k * m,
            exp: e,
        })
        .collect()
}

/// Ticks of a log axis over `[lo, hi]`: powers of ten (every k-th, for at
/// most 8) when two or more lie inside; else 1, 2, 5 times powers of ten;
/// else 1 to 9 times; else linear ticks.
fn log_ticks(lo: f64, hi: f64) -> Vec<Tick> {
    let e_lo = lo.log10().floor() as i32 - 1;
    let e_hi = hi.log10().ceil() as i32 + 1;
    let inside = |t: &Tick| {
        let v = t.value();
        v >= lo && v <= hi
    };
    let decades: Vec<Tick> = (e_lo..=e_hi)
        .map(|e| Tick { mant: 1, exp: e })
        .filter(inside)
        .collect();
    if decades.len() >= 2 {
        let step = decades.len().div_ceil(8) as i32;
        return decades
            .into_iter()
            .filter(|t| t.exp.rem_euclid(step) == 0)
            .collect();
    }
    for mants in [&[1u64, 2, 5][..], &[1, 2, 3, 4, 5, 6, 7, 8, 9]] {
        let t: Vec<Tick> = (e_lo..=e_hi)
            .flat_map(|e| mants.iter().map(move |&m| Tick { mant: m, exp: e }))
            .filter(inside)
            .collect();
        if t.len() >= 2 {
            return t;
        }
    }
    linear_ticks(lo, hi, 5)
}

/// Most decades a log axis spans: the data's largest positive value and
/// `MAX_LOG_DECADES` decades below it. Values further down (a genuine
/// certificate can hold singular values hundreds of decades apart) are
/// drawn at the axis' lower edge and the caption says so
/// (`clamp_note`), so that drawing a figure takes time bounded by its
/// data, whatever the numbers.
pub(crate) const MAX_LOG_DECADES: f64 = 24.0;

/// The smallest and largest positive finite ends of the curves.
fn positive_extent(curves: &[Curve]) -> Option<(f64, f64)> {
    let mut lo = f64::INFINITY;
    let mut hi = 0.0f64;
    for c in curves {
        for (_, x) in &c.points {
            for v in [x.lo, x.mid(), x.hi] {
                if v > 0.0 && v.is_finite() {
                    lo = lo.min(v);
                    hi = hi.max(v);
                }
            }
        }
    }
    (hi > 0.0).then_some((lo, hi))
}

/// The lowest value a log axis of `hi` shows: `MAX_LOG_DECADES` below
/// `hi`, never below the smallest normal number.
fn floor_of(hi: f64) -> f64 {
    (hi / 10f64.powf(MAX_LOG_DECADES)).max(f64::MIN_POSITIVE)
}

/// The y range of a log axis holding every positive end of the curves,
/// padded by a factor and clamped to [`MAX_LOG_DECADES`] decades (finite,
/// normal ends); `None` when there is nothing positive to draw.
fn y_range(curves: &[Curve]) -> Option<Range<f64>> {
    let (lo, hi) = positive_extent(curves)?;
    let lo = lo.max(floor_of(hi));
    let span = (hi / lo).log10();
    let pad = 10f64.powf((span * 0.06).max(0.05));
    Some((lo / pad).max(f64::MIN_POSITIVE)..(hi * pad).min(f64::MAX))
}

/// A y axis: log over a positive range, or linear over any finite range.
#[derive(Clone, Copy, Debug)]
enum YScale {
    Log(f64, f64),
    Linear(f64, f64),
}

impl YScale {
    /// The log axis of the curves' positive ends ([`y_range`]).
    fn log(curves: &[Curve]) -> Option<Self> {
        y_range(curves).map(|r| Self::Log(r.start, r.end))
    }

    /// A linear axis holding every finite end of the curves, padded by 6%
    /// of the span (a span of 0 is widened to show its value).
    fn linear(curves: &[Curve]) -> Option<Self> {
        let ends = curves
            .iter()
            .flat_map(|c| c.points.iter().flat_map(|(_, v)| [v.lo, v.hi]))
            .filter(|v| v.is_finite());
        let (lo, hi) = ends.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
        if !(lo <= hi) {
            return None;
        }
        let pad = if hi > lo {
            (hi - lo) * 0.06
        } else {
            lo.abs().max(1.0) * 0.5
        };
        Some(Self::Linear(lo - pad, hi + pad))
    }

    /// Where `v` lies between the bottom (0) and the top (1), clamped;
    /// on a log axis values at or below the lower edge are drawn there.
    fn frac(self, v: f64) -> f64 {
        match self {
            Self::Log(lo, hi) => {
                let v = if v > lo { v.min(hi) } else { lo };
                (v.log10() - lo.log10()) / (hi.log10() - lo.log10())
            }
            Self::Linear(lo, hi) => ((v - lo) / (hi - lo)).clamp(0.0, 1.0),
        }
    }

    /// The tick values and their labels, one notation for the axis (a
    /// linear axis' negative ticks carry a leading `-`).
    fn ticks(self) -> (Vec<f64>, Vec<String>) {
        match self {
            Self::Log(lo, hi) => {
                let t = log_ticks(lo, hi);
                (t.iter().map(|t| t.value()).collect(), tick_labels(&t))
            }
            Self::Linear(lo, hi) => {
                let t = signed_linear_ticks(lo, hi, 6);
                let mags: Vec<Tick> = t.iter().map(|p| p.1).collect();
                let labels = tick_labels(&mags)
                    .into_iter()
                    .zip(&t)
                    .map(|(l, (neg, _))| if *neg { format!("-{l}") } else { l })
                    .collect();
                let values = t
                    .iter()
                    .map(|(neg, m)| if *neg { -m.value() } else { m.value() })
                    .collect();
                (values, labels)
            }
        }
    }
}

/// Ticks `k * step` inside `[lo, hi]` for any sign of `k`, as (negative,
/// magnitude), `step` one of 1, 2, 5 times a power of ten chosen for at
/// most `most` ticks.
fn signed_linear_ticks(lo: f64, hi: f64, most: usize) -> Vec<(bool, Tick)> {
    let Some(&step) = linear_ticks(0.0, hi - lo, most).get(1) else {
        return Vec::new();
    };
    // The first positive tick of 0..(hi - lo) is the step.
    let sv = step.value();
    if !(sv > 0.0) || (hi - lo) / sv > 4.0 * most as f64 {
        return Vec::new();
    }
    let (first, last) = ((lo / sv).ceil() as i64, (hi / sv).floor() as i64);
    (first..=last)
        .map(|k| {
            (
                k < 0,
                Tick {
                    mant: k.unsigned_abs() * step.mant,
                    exp: step.exp,
                },
            )
        })
        .collect()
}

/// The caption's note when some panel's values span more than
/// [`MAX_LOG_DECADES`] decades (their axis is clamped), else `None`.
fn clamp_note<'a>(panels: impl IntoIterator<Item = &'a [Curve]>) -> Option<String> {
    let mut widest: Option<(f64, f64)> = None;
    for curves in panels {
        if let Some((lo, hi)) = positive_extent(curves) {
            if lo < floor_of(hi)
                && widest.is_none_or(|(l, h)| hi.log10() - lo.log10() > h.log10() - l.log10())
            {
                widest = Some((lo, hi));
            }
        }
    }
    let (lo, hi) = widest?;
    Some(format!(
        " The values span {:.0} decades ({} to {}); the log axis shows the top {MAX_LOG_DECADES:.0} decades \
         and draws smaller values at its lower edge.",
        (hi.log10() - lo.log10()).floor(),
        approx(lo),
        approx(hi)
    ))
}

fn x_range(curves: &[Curve], ticks: &[f64]) -> Range<f64> {
    let xs = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.0))
        .chain(ticks.iter().copied());
    let (lo, hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    });
    if !(lo < hi) {
        return lo - 1.0..lo + 1.0;
    }
    let pad = (hi - lo) * 0.05;
    lo - pad..hi + pad
}

/// A pixel coordinate, two decimals at most.
fn px(v: f64) -> String {
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

fn dash_attr(dash: Option<&str>) -> String {
    dash.map(|d| format!(" stroke-dasharray=\"{d}\""))
        .unwrap_or_default()
}

fn marker_svg(o: &mut String, shape: Shape, (x, y): (f64, f64), fill: Rgb, opacity: f64) {
    let _ = writeln!(
        o,
        "<path class=\"marker\" d=\"M {},{} {}\" fill=\"{}\" fill-opacity=\"{}\" stroke=\"none\"/>",
        px(x),
        px(y),
        shape.path(),
        fill.hex(),
        px(opacity)
    );
}

/// How the x axis is ticked.
pub(super) enum XTicks {
    /// At these values (the models' widths or depths), integers.
    At(Vec<usize>),
    /// Nice linear ticks.
    Nice,
    /// At these positions, labelled with these values (a log axis drawn
    /// on `log10` positions).
    Placed(Vec<(f64, Tick)>),
}

/// One chart: log y, or linear y when `linear_y`.
pub(super) struct Panel {
    pub(super) caption: Option<String>,
    pub(super) x_desc: String,
    pub(super) y_desc: String,
    pub(super) curves: Vec<Curve>,
    pub(super) legend: Vec<Entry>,
    pub(super) x_ticks: XTicks,
    /// A linear y axis (signed values: differences) instead of a log one.
    pub(super) linear_y: bool,
}

/// The label of the legend entries `keys` together (`Ours, L = 2`).
fn key_label(legend: &[Entry], keys: &[usize]) -> String {
    keys.iter()
        .filter_map(|&k| legend.get(k).map(|e| e.label.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A curve's legend entries and its midpoint line in pixels.
type KeyedLine = (Vec<usize>, Vec<(f64, f64)>);

/// Pairs of curves of different legend entries whose midpoint lines lie
/// within a pixel of each other at every (common) point, by their entries'
/// labels; at most `most`, and how many more pairs there are.
fn coincident(
    legend: &[Entry],
    lines: &[KeyedLine],
    most: usize,
) -> (Vec<(String, String)>, usize) {
    let mut seen: Vec<(Vec<usize>, Vec<usize>)> = Vec::new();
    for (i, (ka, a)) in lines.iter().enumerate() {
        for (kb, b) in &lines[i + 1..] {
            if ka == kb || a.len() < 2 || a.len() != b.len() {
                continue;
            }
            let same = a
                .iter()
                .zip(b)
                .all(|(p, q)| (p.0 - q.0).abs() < 0.5 && (p.1 - q.1).abs() <= 1.0);
            let pair = if ka < kb {
                (ka.clone(), kb.clone())
            } else {
                (kb.clone(), ka.clone())
            };
            if same && !seen.contains(&pair) {
                seen.push(pair);
            }
        }
    }
    let more = seen.len().saturating_sub(most);
    let named = seen
        .iter()
        .take(most)
        .map(|(a, b)| (key_label(legend, a), key_label(legend, b)))
        .collect();
    (named, more)
}

/// Where a panel is drawn: its plot area in pixels, the data ranges it
/// maps onto it, and the legend column's width.
struct Frame {
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
    x: Range<f64>,
    ys: YScale,
    legend_w: f64,
}

impl Frame {
    /// The frame of `panel` in the box at `(x, y)` of size `(w, h)`: the
    /// legend column as wide as its longest label allows, or an error when
    /// the plot area left is too small.
    fn of(panel: &Panel, (bx, by, bw, bh): (f64, f64, f64, f64)) -> Result<Frame, String> {
        let ys = if panel.linear_y {
            YScale::linear(&panel.curves)
        } else {
            YScale::log(&panel.curves)
        }
        .ok_or("nothing to draw on the y axis")?;
        let x_at: Vec<f64> = match &panel.x_ticks {
            XTicks::At(v) => v.iter().map(|&x| x as f64).collect(),
            XTicks::Nice => Vec::new(),
            XTicks::Placed(v) => v.iter().map(|p| p.0).collect(),
        };
        let x = x_range(&panel.curves, &x_at);
        let chars = panel
            .legend
            .iter()
            .map(|e| e.label.chars().count())
            .max()
            .unwrap_or(0) as f64;
        let legend_w = (40.0 + 7.2 * chars).clamp(110.0, 280.0);
        let top = by + if panel.caption.is_some() { 30.0 } else { 8.0 };
        let (left, right, bottom) = (bx + 84.0, bx + bw - legend_w - 24.0, by + bh - 52.0);
        if !(right > left + 50.0 && bottom > top + 50.0) {
            return Err("the figure is too small for its legend".into());
        }
        Ok(Frame {
            left,
            right,
            top,
            bottom,
            x,
            ys,
            legend_w,
        })
    }

    /// The pixel column of the value `v` on the x axis.
    fn sx(&self, v: f64) -> f64 {
        self.left + (v - self.x.start) / (self.x.end - self.x.start) * (self.right - self.left)
    }

    /// The pixel row of the value `v` on the y axis.
    fn sy(&self, v: f64) -> f64 {
        self.bottom - self.ys.frac(v) * (self.bottom - self.top)
    }
}

/// Draws `panel` into the box at `(x, y)` of size `(w, h)`; returns the
/// notes to print under the figure (coinciding curves).
fn draw_panel(
    o: &mut String,
    bbox: (f64, f64, f64, f64),
    panel: &Panel,
) -> Result<Vec<String>, String> {
    let f = Frame::of(panel, bbox)?;
    if let Some(c) = &panel.caption {
        let _ = writeln!(
            o,
            "<text class=\"panel-caption\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-family=\"{FONT}\" font-size=\"16\">{}</text>",
            px((f.left + f.right) / 2.0),
            px(bbox.1 + 18.0),
            esc(c)
        );
    }
    draw_axes(o, &f, panel, bbox.0);
    // Data: bands first, under every line.
    let _ = writeln!(o, "<g class=\"data\">");
    let lines: Vec<KeyedLine> = panel
        .curves
        .iter()
        .filter_map(|c| draw_curve(o, &f, c, panel.linear_y))
        .collect();
    let _ = writeln!(o, "</g>");
    draw_legend(o, &f, &panel.legend);
    Ok(coincidence_notes(panel, &lines))
}

/// The x ticks of `panel` over the range `x`: their positions and values.
fn x_ticks(panel: &Panel, x: &Range<f64>) -> (Vec<f64>, Vec<Tick>) {
    match &panel.x_ticks {
        XTicks::At(v) => v
            .iter()
            .map(|&m| {
                let t = Tick {
                    mant: m as u64,
                    exp: 0,
                };
                (t.value(), t)
            })
            .unzip(),
        XTicks::Nice => linear_ticks(x.start, x.end, 9)
            .into_iter()
            .map(|t| (t.value(), t))
            .unzip(),
        XTicks::Placed(v) => v.iter().copied().unzip(),
    }
}

/// The axes of a panel in the frame `f` (whose box starts at the pixel
/// column `bx`): grid lines, ticks, tick and axis labels, the plot's border.
fn draw_axes(o: &mut String, f: &Frame, panel: &Panel, bx: f64) {
    let (left, right, top, bottom) = (f.left, f.right, f.top, f.bottom);
    let (xpos, xt) = x_ticks(panel, &f.x);
    let (yt, ylabels) = f.ys.ticks();
    let _ = writeln!(
        o,
        "<g class=\"axes\" font-family=\"{FONT}\" font-size=\"13\">"
    );
    for (pos, label) in xpos.iter().zip(tick_labels(&xt)) {
        let xp = f.sx(*pos);
        let _ = writeln!(
            o,
            "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#000000\" stroke-opacity=\"0.1\"/>\n\
             <line x1=\"{0}\" y1=\"{2}\" x2=\"{0}\" y2=\"{3}\" stroke=\"#000000\"/>\n\
             <text class=\"xtick\" x=\"{0}\" y=\"{4}\" text-anchor=\"middle\">{5}</text>",
            px(xp),
            px(top),
            px(bottom),
            px(bottom + 5.0),
            px(bottom + 19.0),
            esc(&label)
        );
    }
    for (t, label) in yt.iter().zip(ylabels) {
        let yp = f.sy(*t);
        let _ = writeln!(
            o,
            "<line x1=\"{0}\" y1=\"{2}\" x2=\"{1}\" y2=\"{2}\" stroke=\"#000000\" stroke-opacity=\"0.1\"/>\n\
             <line x1=\"{3}\" y1=\"{2}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#000000\"/>\n\
             <text class=\"ytick\" x=\"{4}\" y=\"{5}\" text-anchor=\"end\">{6}</text>",
            px(left),
            px(right),
            px(yp),
            px(left - 5.0),
            px(left - 8.0),
            px(yp + 4.5),
            esc(&label)
        );
    }
    let _ = writeln!(
        o,
        "<text class=\"axis-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"15\">{}</text>",
        px((left + right) / 2.0),
        px(bottom + 40.0),
        esc(&panel.x_desc)
    );
    let (yx, yy) = (px(bx + 18.0), px((top + bottom) / 2.0));
    let _ = writeln!(
        o,
        "<text class=\"axis-label\" x=\"{yx}\" y=\"{yy}\" text-anchor=\"middle\" font-size=\"15\" transform=\"rotate(-90 {yx} {yy})\">{}</text>\n</g>",
        esc(&panel.y_desc)
    );
    let _ = writeln!(
        o,
        "<rect class=\"plot\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#000000\" stroke-opacity=\"0.5\"/>",
        px(left),
        px(top),
        px(right - left),
        px(bottom - top)
    );
}

/// One curve in the frame `f` (a series group: its band, midpoint line,
/// bars and markers); its legend entries and midpoint line when a line was
/// drawn (for [`coincident`]). Points of `v.mid() <= 0` leave the line on a
/// log axis (`!linear_y`).
fn draw_curve(o: &mut String, f: &Frame, c: &Curve, linear_y: bool) -> Option<KeyedLine> {
    let st = c.style;
    let keys = c
        .legend
        .iter()
        .map(|k| k.to_string())
        .collect::<Vec<_>>()
        .join(" ");
    let _ = writeln!(o, "<g class=\"series\" data-legend=\"{keys}\"{}>", c.attrs);
    if c.show == Show::Band && c.points.len() >= 2 {
        let mut pts: Vec<String> = c
            .points
            .iter()
            .map(|(x, v)| format!("{},{}", px(f.sx(*x)), px(f.sy(v.lo))))
            .collect();
        pts.extend(
            c.points
                .iter()
                .rev()
                .map(|(x, v)| format!("{},{}", px(f.sx(*x)), px(f.sy(v.hi)))),
        );
        let _ = writeln!(
            o,
            "<polygon class=\"band\" points=\"{}\" fill=\"{}\" fill-opacity=\"{}\" stroke=\"none\"/>",
            pts.join(" "),
            st.colour.hex(),
            px(0.25 * st.opacity)
        );
    }
    let line: Vec<(f64, f64)> = c
        .points
        .iter()
        .filter(|(_, v)| linear_y || v.mid() > 0.0)
        .map(|(x, v)| (f.sx(*x), f.sy(v.mid())))
        .collect();
    let mut drawn = None;
    if c.show != Show::Marks && line.len() >= 2 {
        let pts: Vec<String> = line
            .iter()
            .map(|(a, b)| format!("{},{}", px(*a), px(*b)))
            .collect();
        let _ = writeln!(
            o,
            "<polyline class=\"line\" points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-opacity=\"{}\" stroke-width=\"{}\"{}/>",
            pts.join(" "),
            st.colour.hex(),
            px(st.opacity),
            px(st.width),
            dash_attr(st.dash)
        );
        drawn = Some((c.legend.clone(), line.clone()));
    }
    if c.show == Show::Bars {
        for (x, v) in &c.points {
            let (xp, lo, hi) = (f.sx(*x), f.sy(v.lo), f.sy(v.hi));
            let _ = writeln!(
                o,
                "<path class=\"bar\" d=\"M {0},{1} V {2} M {3},{1} h 8 M {3},{2} h 8\" fill=\"none\" stroke=\"{4}\" stroke-opacity=\"{5}\"/>",
                px(xp),
                px(lo),
                px(hi),
                px(xp - 4.0),
                st.colour.hex(),
                px(st.opacity)
            );
        }
    }
    if let Some(shape) = st.marker {
        for p in &line {
            marker_svg(o, shape, *p, st.colour, st.opacity);
        }
    }
    let _ = writeln!(o, "</g>");
    drawn
}

/// The legend, in its own column right of the plot area of `f`.
fn draw_legend(o: &mut String, f: &Frame, legend: &[Entry]) {
    let (top, bottom) = (f.top, f.bottom);
    let lx = f.right + 16.0;
    let row = ((bottom - top - 12.0) / legend.len().max(1) as f64).clamp(12.0, 20.0);
    let lh = 12.0 + row * legend.len() as f64;
    let _ = writeln!(
        o,
        "<g class=\"legend\" font-family=\"{FONT}\" font-size=\"13\">\n\
         <rect class=\"legend-box\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#FFFFFF\" stroke=\"#000000\" stroke-opacity=\"0.3\"/>",
        px(lx),
        px(top),
        px(f.legend_w),
        px(lh)
    );
    for (i, e) in legend.iter().enumerate() {
        let ey = top + 6.0 + row / 2.0 + row * i as f64;
        let _ = writeln!(o, "<g class=\"legend-entry\" data-entry=\"{i}\">");
        if let Some((colour, width, dash)) = e.line {
            let _ = writeln!(
                o,
                "<line class=\"sample\" x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{}\" stroke-width=\"{}\"{}/>",
                px(lx + 8.0),
                px(lx + 34.0),
                colour.hex(),
                px(width),
                dash_attr(dash),
                y = px(ey),
            );
        }
        if let Some((shape, fill)) = e.marker {
            marker_svg(o, shape, (lx + 21.0, ey), fill, 1.0);
        }
        let _ = writeln!(
            o,
            "<text x=\"{}\" y=\"{}\">{}</text>\n</g>",
            px(lx + 40.0),
            px(ey + 4.5),
            esc(&e.label)
        );
    }
    let _ = writeln!(o, "</g>");
}

/// The notes under the figure for the curves of `panel` whose drawn
/// midpoint `lines` coincide within a pixel (at most four pairs named).
fn coincidence_notes(panel: &Panel, lines: &[KeyedLine]) -> Vec<String> {
    let (pairs, more) = coincident(&panel.legend, lines, 4);
    let mut notes: Vec<String> = pairs
        .into_iter()
        .map(|(a, b)| {
            format!(
                "{}{a} and {b} coincide within a pixel (drawn over each other; told apart by line style or marker).",
                panel.caption.as_ref().map(|c| format!("{c}: ")).unwrap_or_default()
            )
        })
        .collect();
    if more > 0 {
        notes.push(format!(
            "{more} more pairs of curves coincide within a pixel."
        ));
    }
    notes
}

/// Splits `s` into lines of at most about `width` characters at spaces.
fn wrap(s: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for word in s.split(' ') {
        if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    lines
}

/// The SVG of a figure: title, subtitle (wrapped), the panels one above
/// the other, then the notes.
pub(super) fn render(title: &str, subtitle: &str, panels: &[Panel]) -> Result<String, String> {
    let sub = wrap(subtitle, 118);
    let head = 40.0 + 17.0 * sub.len() as f64;
    let mut body = String::new();
    let mut notes = Vec::new();
    for (i, p) in panels.iter().enumerate() {
        let b = (0.0, head + PANEL_HEIGHT * i as f64, WIDTH, PANEL_HEIGHT);
        notes.extend(draw_panel(&mut body, b, p)?);
    }
    let note_lines: Vec<String> = notes.iter().flat_map(|n| wrap(n, 118)).collect();
    let height = head + PANEL_HEIGHT * panels.len() as f64 + 17.0 * note_lines.len() as f64 + 8.0;
    let mut o = String::with_capacity(body.len() + 4096);
    let _ = writeln!(
        o,
        "<svg width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" xmlns=\"http://www.w3.org/2000/svg\">\n\
         <rect x=\"0\" y=\"0\" width=\"{w}\" height=\"{h}\" fill=\"#FFFFFF\"/>\n\
         <text class=\"title\" x=\"{}\" y=\"28\" text-anchor=\"middle\" font-family=\"{FONT}\" font-size=\"22\">{}</text>",
        px(WIDTH / 2.0),
        esc(title),
        w = px(WIDTH),
        h = px(height),
    );
    for (i, l) in sub.iter().enumerate() {
        let _ = writeln!(
            o,
            "<text class=\"subtitle\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-family=\"{FONT}\" font-size=\"13\" fill=\"#444444\">{}</text>",
            px(WIDTH / 2.0),
            px(50.0 + 17.0 * i as f64),
            esc(l)
        );
    }
    o.push_str(&body);
    let base = head + PANEL_HEIGHT * panels.len() as f64;
    for (i, l) in note_lines.iter().enumerate() {
        let _ = writeln!(
            o,
            "<text class=\"note\" x=\"20\" y=\"{}\" font-family=\"{FONT}\" font-size=\"13\">{}</text>",
            px(base + 17.0 * i as f64),
            esc(l)
        );
    }
    o.push_str("</svg>\n");
    Ok(o)
}

/// The widest relative width `(hi - lo) / lo` among positive intervals.
fn widest_rel<'a>(xs: impl Iterator<Item = &'a CertInterval>) -> f64 {
    xs.filter(|x| x.lo > 0.0)
        .map(|x| (x.hi - x.lo) / x.lo)
        .fold(0.0, f64::max)
}

/// The subtitle's last clause for the intervals `xs`.
pub(super) fn widest_clause<'a>(xs: impl Iterator<Item = &'a CertInterval>) -> (f64, String) {
    let rel = widest_rel(xs);
    (rel, format!("{WIDEST_WIDTH}{}", approx(rel)))
}

/// Every figure of the study, drawn or skipped.
pub(crate) fn all(set: &StudySet) -> Vec<Figure> {
    vec![
        spectral_decay(set),
        bound_scaling(set, Axis::HiddenSize),
        bound_scaling(set, Axis::Layers),
        norms_vs_width(set),
        contribution_vs_p(set),
    ]
}

fn figure(number: usize, caption: String, svg: Result<String, String>) -> Figure {
    Figure {
        number,
        file: FILE_NAMES[number - 1],
        title: TITLES[number - 1],
        caption,
        svg,
    }
}

/// Figure 1: singular values of the primary model's matrices in the chosen
/// layers, all heads, by index; exact zeros are not drawn on the log axis.
fn spectral_decay(set: &StudySet) -> Figure {
    let p = set.primary();
    let c = &p.cert;
    let layers: Vec<usize> = set
        .spectrum_layers
        .iter()
        .copied()
        .filter(|&l| l < c.model.layers)
        .collect();
    let shown = layer_list(&set.spectrum_layers);
    if layers.is_empty() {
        let why = format!(
            "skipped: the primary model {} has {} layers, none of them among the layers asked for ({shown})",
            p.id, c.model.layers
        );
        return figure(1, why.clone(), Err(why));
    }
    let kinds: Vec<MatrixType> = TYPES
        .iter()
        .copied()
        .filter(|k| c.matrices.iter().any(|w| w.kind == *k))
        .collect();
    let legend: Vec<Entry> = kinds
        .iter()
        .map(|k| Entry::line(type_label(*k), type_colour(*k), None))
        .collect();
    let mut curves = Vec::new();
    let mut zeros = 0usize;
    let mut all_iv = Vec::new();
    for w in c.matrices.iter().filter(|w| layers.contains(&w.layer)) {
        zeros += w.structural_zeros;
        let pts: Vec<(f64, CertInterval)> = w
            .singular_values
            .iter()
            .enumerate()
            .map(|(i, v)| ((i + 1) as f64, *v))
            .collect();
        all_iv.extend(w.singular_values.iter().copied());
        let mut style = Style::line(
            type_colour(w.kind),
            if w.kind.per_head() { 1.0 } else { 2.0 },
        );
        style.opacity = if w.kind.per_head() { 0.55 } else { 0.95 };
        curves.push(Curve {
            style,
            points: pts,
            show: Show::Band,
            legend: vec![kinds.iter().position(|k| *k == w.kind).unwrap_or(0)],
            attrs: format!(" data-layer=\"{}\"", w.layer),
        });
    }
    let (rel, widest) = widest_clause(all_iv.iter());
    let layers_text = layer_list(&layers);
    let sub = format!(
        "{} (L = {}, N = {}), layers {layers_text}, all heads; bands: certified intervals; {widest}",
        p.id, c.model.layers, c.model.hidden,
    );
    let caption = format!(
        "Singular values sigma_i of every proxy matrix of {} in layers {layers_text} (all heads), largest first, \
         coloured by matrix type as in the paper. Each curve is drawn with the band between the certified lower and \
         upper ends; the widest relative width (hi - lo)/lo is {}. Not drawn: the {zeros} singular values that are \
         exactly zero (N - head_dim per head), which the authors' float64 spectra show as round-off values near 1e-16 sigma_1.",
        p.id,
        approx(rel)
    );
    let caption = caption + &clamp_note([curves.as_slice()]).unwrap_or_default();
    let panel = Panel {
        caption: None,
        x_desc: "Singular value index i".into(),
        y_desc: "Singular value".into(),
        curves,
        legend,
        x_ticks: XTicks::Nice,
        linear_y: false,
    };
    figure(1, caption, render(TITLES[0], &sub, &[panel]))
}

fn layer_list(layers: &[usize]) -> String {
    let mut v = layers.to_vec();
    v.sort_unstable();
    v.dedup();
    let contiguous = v.windows(2).all(|w| w[1] == w[0] + 1);
    match v.as_slice() {
        [] => "none".into(),
        [a] => a.to_string(),
        [a, .., b] if contiguous => format!("{a}-{b}"),
        _ => v
            .iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// Figures 2 and 3: both bounds normalised by their anchor, one curve per
/// group of models sharing the fixed coordinate, groups with at least two
/// distinct x values only; the x ticks are the drawn models' widths or
/// depths.
fn bound_scaling(set: &StudySet, axis: Axis) -> Figure {
    let number = if axis == Axis::HiddenSize { 2 } else { 3 };
    let (fixed_name, x_desc) = match axis {
        Axis::HiddenSize => ("L", "Hidden dimension N"),
        Axis::Layers => ("N", "Depth L"),
    };
    let rows: Vec<ScalingRow> = scaling(set)
        .into_iter()
        .filter(|r| r.axis == axis)
        .collect();
    let groups = scaling_groups(&rows);
    if groups.is_empty() {
        let why = no_scaling_groups(set, axis);
        return figure(number, why.clone(), Err(why));
    }
    let ScalingCurves {
        curves,
        legend,
        undefined,
        ivs,
        xs,
    } = scaling_curves(set, &rows, &groups, fixed_name);
    let anchor_word = if axis == Axis::HiddenSize {
        "narrowest"
    } else {
        "shallowest"
    };
    let (rel, widest) = widest_clause(ivs.iter());
    let sub = format!(
        "each curve divided by its value at the {anchor_word} model of its group (certified interval division); bars: certified intervals; {widest}"
    );
    let mut caption = format!(
        "B_ours (orange, solid) and B_Edel (slate blue, dashed) against {}, one curve per fixed {fixed_name} (marker per \
         {fixed_name}), each divided by the value of the {anchor_word} model with the same {fixed_name} (the paper normalises at {}). \
         Every point is a certified interval (interval division of the two certified bounds; bars, widest relative width {}). Log scale.",
        if axis == Axis::HiddenSize { "the hidden dimension N" } else { "the depth L" },
        if axis == Axis::HiddenSize { "N = 128" } else { "L = 2" },
        approx(rel)
    );
    if !undefined.is_empty() {
        caption.push_str(&format!(
            " Not drawn (anchor bound not certified positive): {}.",
            undefined.join(", ")
        ));
    }
    caption.push_str(&clamp_note([curves.as_slice()]).unwrap_or_default());
    let panel = Panel {
        caption: None,
        x_desc: x_desc.into(),
        y_desc: "Bound / bound of the anchor model".into(),
        curves,
        legend,
        x_ticks: XTicks::At(xs),
        linear_y: false,
    };
    figure(number, caption, render(TITLES[number - 1], &sub, &[panel]))
}

/// The fixed values (depths or widths) of the ratio `rows` of one axis at
/// which at least two different x values are certified: one group of
/// curves each, ascending.
fn scaling_groups(rows: &[ScalingRow]) -> Vec<usize> {
    let mut groups: Vec<usize> = rows.iter().map(|r| r.fixed).collect();
    groups.sort_unstable();
    groups.dedup();
    groups
        .into_iter()
        .filter(|g| {
            let mut xs: Vec<usize> = rows.iter().filter(|r| r.fixed == *g).map(|r| r.x).collect();
            xs.sort_unstable();
            xs.dedup();
            xs.len() >= 2
        })
        .collect()
}

/// Why figure 2 or 3 (`axis`) is skipped when no group has two x values:
/// every model's depth and width.
fn no_scaling_groups(set: &StudySet, axis: Axis) -> String {
    let (x_name, fixed_word) = match axis {
        Axis::HiddenSize => ("width", "depth"),
        Axis::Layers => ("depth", "width"),
    };
    format!(
        "skipped: no two models share a {fixed_word} with different {x_name}s (models: {})",
        set.models
            .iter()
            .map(|m| format!(
                "{} L={} N={}",
                m.id, m.cert.model.layers, m.cert.model.hidden
            ))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The curves of figure 2 or 3 and what their caption and ticks need.
struct ScalingCurves {
    curves: Vec<Curve>,
    legend: Vec<Entry>,
    /// Models whose ratio is undefined (anchor not certified positive),
    /// sorted, once each.
    undefined: Vec<String>,
    /// Every ratio drawn (for the widest relative width).
    ivs: Vec<CertInterval>,
    /// The x values of the rows, ascending, once each (the x ticks).
    xs: Vec<usize>,
}

/// One curve and legend entry per group and bound (a marker per group,
/// colour and dash per bound) from the ratio `rows`.
fn scaling_curves(
    set: &StudySet,
    rows: &[ScalingRow],
    groups: &[usize],
    fixed_name: &str,
) -> ScalingCurves {
    let mut curves = Vec::new();
    let mut legend = Vec::new();
    let mut undefined = Vec::new();
    let mut ivs = Vec::new();
    let mut xs = Vec::new();
    for (gi, g) in groups.iter().enumerate() {
        let shape = SHAPES[gi % SHAPES.len()];
        for bound in Bound::ALL {
            let mut pts: Vec<(f64, CertInterval)> = Vec::new();
            for r in rows.iter().filter(|r| r.fixed == *g && r.bound == bound) {
                xs.push(r.x);
                match r.ratio {
                    Some(q) => {
                        pts.push((r.x as f64, q));
                        ivs.push(q);
                    }
                    None => undefined.push(set.models[r.model].id.clone()),
                }
            }
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let colour = bound_colour(bound);
            let dash = bound_dash(bound);
            legend.push(Entry {
                label: format!("{}, {fixed_name} = {g}", bound_label(bound)),
                line: Some((colour, 2.0, dash)),
                marker: Some((shape, colour)),
            });
            curves.push(Curve {
                style: Style {
                    colour,
                    opacity: 1.0,
                    width: 2.0,
                    dash,
                    marker: Some(shape),
                },
                points: pts,
                show: Show::Bars,
                legend: vec![legend.len() - 1],
                attrs: String::new(),
            });
        }
    }
    undefined.sort();
    undefined.dedup();
    xs.sort_unstable();
    xs.dedup();
    ScalingCurves {
        curves,
        legend,
        undefined,
        ivs,
        xs,
    }
}

/// Figure 4: (2,1), (1,1) and spectral norms of every proxy matrix against
/// N, for the models of the smallest depth; one line per (type, layer,
/// head), a marker per type; the x ticks are the models' widths.
fn norms_vs_width(set: &StudySet) -> Figure {
    let (depth, at_depth, widths) = match smallest_depth_widths(set) {
        Ok(d) => d,
        Err(why) => return figure(4, why.clone(), Err(why)),
    };
    type NormOf = fn(&crate::certificate::MatrixEntry) -> CertInterval;
    let norms: [(&str, NormOf); 3] = [
        ("(2,1) norm", |w| w.norm_21),
        ("(1,1) norm", |w| w.norm_11),
        ("Spectral norm", |w| w.spectral_norm),
    ];
    let kinds: Vec<MatrixType> = TYPES
        .iter()
        .copied()
        .filter(|k| {
            at_depth
                .iter()
                .any(|&i| set.models[i].cert.matrices.iter().any(|w| w.kind == *k))
        })
        .collect();
    let mut panels = Vec::new();
    let mut ivs = Vec::new();
    for (name, get) in norms {
        let curves = norm_curves(set, &at_depth, &kinds, get, &mut ivs);
        let legend = kinds
            .iter()
            .map(|k| Entry {
                label: type_label(*k).into(),
                line: Some((type_colour(*k), 2.0, None)),
                marker: Some((kind_shape(&kinds, *k), type_colour(*k))),
            })
            .collect();
        panels.push(Panel {
            caption: Some(format!("{name} of the proxy matrices, L = {depth}")),
            x_desc: "Hidden dimension N".into(),
            y_desc: name.into(),
            curves,
            legend,
            x_ticks: XTicks::At(widths.clone()),
            linear_y: false,
        });
    }
    let (rel, widest) = widest_clause(ivs.iter());
    let ids: Vec<&str> = at_depth
        .iter()
        .map(|&i| set.models[i].id.as_str())
        .collect();
    let sub = format!(
        "L = {depth}: {}; one line per matrix (per head for QK and Ṽ); bars: certified intervals; {widest}",
        ids.join(", ")
    );
    let caption = format!(
        "The (2,1), (1,1) and spectral norms of every proxy matrix of the models of the smallest depth (L = {depth}: {}) \
         against the hidden dimension N, one line per matrix type, layer and head, a marker per type (the paper shows L = 2). \
         Bars are the certified intervals (widest relative width {}). Log scale.",
        ids.join(", "),
        approx(rel)
    );
    let caption =
        caption + &clamp_note(panels.iter().map(|p| p.curves.as_slice())).unwrap_or_default();
    figure(4, caption, render(TITLES[3], &sub, &panels))
}

/// The smallest depth of `set`, the indices of its models of that depth
/// and their widths (ascending, once each); or why figure 4 is skipped
/// (those models have one width only).
fn smallest_depth_widths(set: &StudySet) -> Result<(usize, Vec<usize>, Vec<usize>), String> {
    let depth = set
        .models
        .iter()
        .map(|m| m.cert.model.layers)
        .min()
        .unwrap_or(0);
    let at_depth: Vec<usize> = (0..set.models.len())
        .filter(|&i| set.models[i].cert.model.layers == depth)
        .collect();
    let mut widths: Vec<usize> = at_depth
        .iter()
        .map(|&i| set.models[i].cert.model.hidden)
        .collect();
    widths.sort_unstable();
    widths.dedup();
    if widths.len() < 2 {
        return Err(format!(
            "skipped: the models of the smallest depth (L = {depth}: {}) have one width only (N = {})",
            at_depth
                .iter()
                .map(|&i| set.models[i].id.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            widths.first().copied().unwrap_or(0)
        ));
    }
    Ok((depth, at_depth, widths))
}

/// The marker of matrix type `k` in figure 4: one per type of `kinds`.
fn kind_shape(kinds: &[MatrixType], k: MatrixType) -> Shape {
    SHAPES[kinds.iter().position(|x| *x == k).unwrap_or(0) % SHAPES.len()]
}

/// One curve of the norm `get` against N per (type, layer, head) of the
/// models `at_depth` (a head's line lighter than a layer matrix's); every
/// norm is pushed onto `ivs`.
fn norm_curves(
    set: &StudySet,
    at_depth: &[usize],
    kinds: &[MatrixType],
    get: fn(&crate::certificate::MatrixEntry) -> CertInterval,
    ivs: &mut Vec<CertInterval>,
) -> Vec<Curve> {
    type Key = (MatrixType, usize, i64);
    let mut lines: std::collections::BTreeMap<Key, Vec<(f64, CertInterval)>> = Default::default();
    for &i in at_depth {
        let c = &set.models[i].cert;
        for w in &c.matrices {
            let v = get(w);
            ivs.push(v);
            lines
                .entry((w.kind, w.layer, w.id().head_column()))
                .or_default()
                .push((c.model.hidden as f64, v));
        }
    }
    lines
        .into_iter()
        .map(|((kind, layer, head), mut pts)| {
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            Curve {
                style: Style {
                    colour: type_colour(kind),
                    opacity: if head >= 0 { 0.55 } else { 0.95 },
                    width: if head >= 0 { 1.0 } else { 2.0 },
                    dash: None,
                    marker: Some(kind_shape(kinds, kind)),
                },
                points: pts,
                show: Show::Bars,
                legend: vec![kinds.iter().position(|x| *x == kind).unwrap_or(0)],
                attrs: format!(" data-layer=\"{layer}\""),
            }
        })
        .collect()
}

/// Figure 5: `c(W, p) / c(W, 0)` against p for every matrix of the primary
/// model, coloured by layer, a line style per matrix type, with the
/// certified minimiser set marked.
fn contribution_vs_p(set: &StudySet) -> Figure {
    let p = set.primary();
    let c = &p.cert;
    let m = c.parameters.grid_m;
    let layers = c.model.layers;
    let kinds: Vec<MatrixType> = TYPES
        .iter()
        .copied()
        .filter(|k| c.matrices.iter().any(|w| w.kind == *k))
        .collect();
    let legend = contribution_legend(layers, &kinds);
    let argmin_entry = legend.len() - 1;
    let mut curves = Vec::new();
    let mut marks = Vec::new();
    let mut undefined = 0usize;
    let mut ivs = Vec::new();
    let mut unique = 0usize;
    for w in &c.matrices {
        let Some(pts) = contribution_ratios(w, m) else {
            undefined += 1;
            continue;
        };
        ivs.extend(pts.iter().map(|(_, r)| *r));
        if w.p_opt_fraction.len() == 1 {
            unique += 1;
        }
        for g in &w.p_opt_fraction {
            if let Some((_, r)) = pts.iter().find(|(x, _)| *x == g.approx()) {
                marks.push((g.approx(), CertInterval::point(r.mid())));
            }
        }
        let type_entry = layers + kinds.iter().position(|k| *k == w.kind).unwrap_or(0);
        curves.push(Curve {
            style: Style {
                colour: layer_colour(w.layer),
                opacity: if w.kind.per_head() { 0.45 } else { 0.95 },
                width: if w.kind.per_head() { 1.0 } else { 2.0 },
                dash: type_dash(w.kind),
                marker: layer_marker(layers, w.layer),
            },
            points: pts,
            show: Show::Band,
            legend: vec![w.layer, type_entry],
            attrs: format!(" data-layer=\"{}\"", w.layer),
        });
    }
    if curves.is_empty() {
        let why = format!(
            "skipped: no matrix of {} has c(W, 0) certified positive, so no ratio c(W, p)/c(W, 0) is defined",
            p.id
        );
        return figure(5, why.clone(), Err(why));
    }
    let drawn = curves.len();
    curves.push(argmin_marks(marks, argmin_entry));
    let (rel, widest) = widest_clause(ivs.iter());
    let sub = format!(
        "{} (L = {}, N = {}, m = {m}); colour: layer, line style: matrix type; bands: certified intervals; \
         circles: every grid point the certificate allows as the minimiser; {widest}",
        p.id, c.model.layers, c.model.hidden
    );
    let mut caption = format!(
        "c(W, p)/c(W, 0) on the grid P_m = {{0, 1/{m}, ..., 2}} for every head and layer matrix of {} ({drawn} matrices), \
         one colour per layer and one line style per matrix type, as certified interval divisions (bands, widest relative \
         width {}). Black circles mark the certified argmin set of each matrix: {unique} of {drawn} minimisers are \
         certified unique. Log scale.",
        p.id,
        approx(rel),
    );
    if undefined > 0 {
        caption.push_str(&format!(
            " {undefined} matrices are not drawn: c(W, 0) is not certified positive."
        ));
    }
    caption.push_str(&clamp_note([curves.as_slice()]).unwrap_or_default());
    let panel = Panel {
        caption: None,
        x_desc: "Schatten index p".into(),
        y_desc: "c(W, p) / c(W, 0)".into(),
        curves,
        legend,
        x_ticks: XTicks::Nice,
        linear_y: false,
    };
    figure(5, caption, render(TITLES[4], &sub, &[panel]))
}

/// The marker of layer `l` of `layers` in figure 5: none up to 12 layers
/// (the colours tell them apart), else one per twelve layers.
fn layer_marker(layers: usize, l: usize) -> Option<Shape> {
    (layers > 12).then(|| SHAPES[(l / 12) % SHAPES.len()])
}

/// Figure 5's legend: one entry per layer (its colour), one per type of
/// `kinds` (its line style), and last the argmin marker.
fn contribution_legend(layers: usize, kinds: &[MatrixType]) -> Vec<Entry> {
    let mut legend: Vec<Entry> = (0..layers)
        .map(|l| Entry {
            label: format!("layer {l}"),
            line: Some((layer_colour(l), 2.0, None)),
            marker: layer_marker(layers, l).map(|s| (s, layer_colour(l))),
        })
        .collect();
    legend.extend(
        kinds
            .iter()
            .map(|k| Entry::line(type_label(*k), GREY, type_dash(*k))),
    );
    legend.push(Entry {
        label: "certified argmin set".into(),
        line: None,
        marker: Some((Shape::Circle, BLACK)),
    });
    legend
}

/// The certified ratios `c(W, p) / c(W, 0)` of the matrix `w` on the grid
/// of resolution `m` (the defined ones), or `None` when none is defined
/// (`c(W, 0)` not certified, or not certified positive).
fn contribution_ratios(
    w: &crate::certificate::MatrixEntry,
    m: usize,
) -> Option<Vec<(f64, CertInterval)>> {
    let c0 = w.contribution_at(crate::certificate::GridPoint { k: 0, m })?;
    let mut pts = Vec::new();
    for cp in &w.contributions {
        let r = if cp.p_fraction.k == 0 {
            // c(W, 0) / c(W, 0) = 1 exactly when c(W, 0) > 0 (L20 (b)).
            (c0.lo > 0.0).then_some(CertInterval::point(1.0))
        } else {
            ratio(&cp.value, &c0)
        };
        if let Some(r) = r {
            pts.push((cp.p_fraction.approx(), r));
        }
    }
    (!pts.is_empty()).then_some(pts)
}

/// The black circles of every certified minimiser (`marks`, sorted and
/// once each), in the legend entry `entry`.
fn argmin_marks(mut marks: Vec<(f64, CertInterval)>, entry: usize) -> Curve {
    marks.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.lo.total_cmp(&b.1.lo)));
    marks.dedup_by(|a, b| a.0 == b.0 && a.1.lo == b.1.lo);
    Curve {
        style: Style {
            colour: BLACK,
            opacity: 1.0,
            width: 1.0,
            dash: None,
            marker: Some(Shape::Circle),
        },
        points: marks,
        show: Show::Marks,
        legend: vec![entry],
        attrs: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve(entry: usize, dash: Option<&'static str>) -> Curve {
        let mut style = Style::line(Rgb(255, 165, 0), 2.0);
        style.dash = dash;
        Curve {
            style,
            points: vec![
                (1.0, CertInterval::point(1.0)),
                (2.0, CertInterval::point(3.0)),
                (3.0, CertInterval::point(7.0)),
            ],
            show: Show::Bars,
            legend: vec![entry],
            attrs: String::new(),
        }
    }

    #[test]
    fn coinciding_curves_are_named_in_a_note() {
        let panel = Panel {
            caption: None,
            x_desc: "x".into(),
            y_desc: "y".into(),
            curves: vec![curve(0, None), curve(1, Some("7 4"))],
            legend: vec![
                Entry::line("Ours, N = 32", Rgb(255, 165, 0), None),
                Entry::line("Ours, N = 64", Rgb(255, 165, 0), Some("7 4")),
            ],
            x_ticks: XTicks::At(vec![1, 2, 3]),
            linear_y: false,
        };
        let svg = render("t", "s", &[panel]).unwrap();
        assert!(
            svg.contains("Ours, N = 32 and Ours, N = 64 coincide within a pixel"),
            "{svg}"
        );
        assert!(svg.contains("stroke-dasharray=\"7 4\""));
        // Curves apart get no note.
        let mut far = curve(1, Some("7 4"));
        far.points[1].1 = CertInterval::point(4.0);
        let panel = Panel {
            caption: None,
            x_desc: "x".into(),
            y_desc: "y".into(),
            curves: vec![curve(0, None), far],
            legend: vec![
                Entry::line("a", Rgb(1, 2, 3), None),
                Entry::line("b", Rgb(1, 2, 3), Some("7 4")),
            ],
            x_ticks: XTicks::Nice,
            linear_y: false,
        };
        assert!(!render("t", "s", &[panel])
            .unwrap()
            .contains("class=\"note\""));
    }

    #[test]
    fn tick_labels_share_one_notation_per_axis() {
        let t = |mant, exp| Tick { mant, exp };
        assert_eq!(
            tick_labels(&[t(5, -2), t(1, -1), t(15, -1)]),
            ["0.05", "0.1", "1.5"]
        );
        assert_eq!(
            tick_labels(&[t(1, 0), t(1, 3), t(1, 6)]),
            ["1e0", "1e3", "1e6"]
        );
        assert_eq!(tick_labels(&[t(25, 2), t(1, 7)]), ["2.5e3", "1e7"]);
        for (lo, hi) in [(0.9, 1.1), (1e-30, 1e10), (2.0, 30.0), (1.0, 1.0000001)] {
            let ticks = log_ticks(lo, hi);
            assert!(ticks.len() >= 2, "{lo}..{hi}: {ticks:?}");
            assert!(
                ticks.iter().all(|t| (lo..=hi).contains(&t.value())),
                "{lo}..{hi}: {ticks:?}"
            );
        }
    }
}
