//! The paper's five figures as SVG (plotters, SVG backend), drawn from
//! certificates, each point with its certified interval: error bars where
//! there are few points, bands (the region between the lower and upper
//! ends) along curves. Colours are the authors' (QK tomato, V_tilde royal
//! blue, M_in dark olive green, M_out dark sea green; ours orange, Edelman
//! slate blue). A figure whose data are missing is not drawn: its
//! [`Figure::svg`] is `Err` with the reason.
//!
//! Ratios drawn (normalised bounds, `c(W,p)/c(W,0)`) are certified interval
//! divisions (`proofs/ratio-enclosure.md`); positions on a log axis of an
//! interval end that is 0 are clamped to the axis' lower edge.

use std::error::Error;
use std::ops::Range;

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::fmt::approx;
use super::set::{ratio, scaling, Axis, Bound, StudySet};
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

/// One figure: drawn, or skipped with the reason.
#[derive(Clone, Debug)]
pub struct Figure {
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

/// The authors' colour of a matrix type.
pub fn type_colour(kind: MatrixType) -> RGBColor {
    match kind {
        MatrixType::QK => RGBColor(255, 99, 71),      // tomato
        MatrixType::VTilde => RGBColor(65, 105, 225), // royal blue
        MatrixType::MIn => RGBColor(85, 107, 47),     // dark olive green
        MatrixType::MOut => RGBColor(143, 188, 143),  // dark sea green
    }
}

/// The authors' colour of a bound.
pub fn bound_colour(b: Bound) -> RGBColor {
    match b {
        Bound::Ours => RGBColor(255, 165, 0),     // orange
        Bound::Edelman => RGBColor(106, 90, 205), // slate blue
    }
}

/// The authors' legend name of a matrix type.
pub fn type_label(kind: MatrixType) -> &'static str {
    match kind {
        MatrixType::QK => "QK head",
        MatrixType::VTilde => "Ṽ = V Wᴼ head",
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

const TYPES: [MatrixType; 4] = [
    MatrixType::QK,
    MatrixType::VTilde,
    MatrixType::MIn,
    MatrixType::MOut,
];

pub(super) const FONT: &str = "serif";
const SIZE: (u32, u32) = (820, 540);

type Res<T> = Result<T, Box<dyn Error>>;
type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, LogCoord<f64>>>;

/// How an interval is drawn along a curve.
#[derive(Clone, Copy, PartialEq)]
enum Show {
    /// A vertical bar with caps at every point.
    Bars,
    /// A filled band between the lower and upper ends.
    Band,
}

/// A curve: points `(x, interval)` in x order.
struct Curve {
    colour: RGBColor,
    opacity: f64,
    points: Vec<(f64, CertInterval)>,
    show: Show,
    /// Marker shape index (see [`marker`]), or none.
    marker: Option<usize>,
    width: u32,
}

/// A legend entry: a line, or a marker of a shape.
enum Legend {
    Line(String, RGBColor),
    Marker(String, usize, RGBColor),
}

/// Most decades a log axis spans: the data's largest positive value and
/// `MAX_LOG_DECADES` decades below it. Values further down (a genuine
/// certificate can hold singular values hundreds of decades apart) are
/// drawn at the axis' lower edge and the caption says so
/// ([`clamp_note`]), so that drawing a figure takes time bounded by its
/// data, whatever the numbers (the mesh of a log axis grows with its
/// decades, and a range reaching into the subnormals never finished).
pub const MAX_LOG_DECADES: f64 = 24.0;

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

fn x_range(curves: &[Curve]) -> Range<f64> {
    let xs = curves.iter().flat_map(|c| c.points.iter().map(|p| p.0));
    let (lo, hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    });
    if !(lo < hi) {
        return lo - 1.0..lo + 1.0;
    }
    let pad = (hi - lo) * 0.04;
    lo - pad..hi + pad
}

/// Draws a marker of shape `shape` (0 circle, 1 square, 2 triangle, 3
/// diamond, 4 cross, then again) at `(x, y)`.
fn marker(chart: &mut Chart, shape: usize, at: (f64, f64), style: ShapeStyle) -> Res<()> {
    match shape % 5 {
        0 => {
            chart.draw_series(std::iter::once(Circle::new(at, 4, style)))?;
        }
        1 => {
            chart.draw_series(std::iter::once(
                EmptyElement::at(at) + Rectangle::new([(-4, -4), (4, 4)], style),
            ))?;
        }
        2 => {
            chart.draw_series(std::iter::once(TriangleMarker::new(at, 5, style)))?;
        }
        3 => {
            chart.draw_series(std::iter::once(
                EmptyElement::at(at) + Polygon::new(vec![(0, -5), (5, 0), (0, 5), (-5, 0)], style),
            ))?;
        }
        _ => {
            chart.draw_series(std::iter::once(Cross::new(at, 4, style)))?;
        }
    }
    Ok(())
}

/// Draws one log-y chart of `curves` into `area`.
#[allow(clippy::too_many_arguments)]
fn log_chart(
    area: &DrawingArea<SVGBackend, Shift>,
    caption: Option<&str>,
    x_desc: &str,
    y_desc: &str,
    curves: &[Curve],
    legend: &[Legend],
    extra: &[(f64, f64)],
    integer_x: bool,
) -> Res<()> {
    let y = y_range(curves).ok_or("nothing positive to draw on a log axis")?;
    let y_lo = y.start;
    let x = x_range(curves);
    let mut builder = ChartBuilder::on(area);
    builder
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(72);
    if let Some(c) = caption {
        builder.caption(c, (FONT, 20));
    }
    let mut chart = builder.build_cartesian_2d(x, y.log_scale())?;
    let xfmt = |v: &f64| {
        if integer_x {
            if (v - v.round()).abs() < 1e-9 {
                format!("{}", v.round() as i64)
            } else {
                String::new()
            }
        } else {
            approx(*v)
        }
    };
    let yfmt = |v: &f64| approx(*v);
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .axis_desc_style((FONT, 16))
        .label_style((FONT, 13))
        .x_label_formatter(&xfmt)
        .y_label_formatter(&yfmt)
        .light_line_style(BLACK.mix(0.06))
        .bold_line_style(BLACK.mix(0.15))
        .draw()?;
    let clamp = |v: f64| if v > y_lo { v } else { y_lo };
    // Bands first, under the lines.
    for c in curves.iter().filter(|c| c.show == Show::Band) {
        if c.points.len() < 2 {
            continue;
        }
        let mut poly: Vec<(f64, f64)> = c.points.iter().map(|(x, v)| (*x, clamp(v.lo))).collect();
        poly.extend(c.points.iter().rev().map(|(x, v)| (*x, clamp(v.hi))));
        chart.draw_series(std::iter::once(Polygon::new(
            poly,
            c.colour.mix(0.25 * c.opacity).filled(),
        )))?;
    }
    for c in curves {
        let style = c.colour.mix(c.opacity).stroke_width(c.width);
        let line: Vec<(f64, f64)> = c
            .points
            .iter()
            .filter(|(_, v)| v.mid() > 0.0)
            .map(|(x, v)| (*x, clamp(v.mid())))
            .collect();
        if line.len() >= 2 {
            chart.draw_series(LineSeries::new(line.clone(), style))?;
        }
        if c.show == Show::Bars {
            chart.draw_series(c.points.iter().map(|(x, v)| {
                ErrorBar::new_vertical(
                    *x,
                    clamp(v.lo),
                    clamp(v.mid()),
                    clamp(v.hi),
                    c.colour.mix(c.opacity).stroke_width(1),
                    8,
                )
            }))?;
        }
        if let Some(shape) = c.marker {
            for p in &line {
                marker(&mut chart, shape, *p, c.colour.mix(c.opacity).filled())?;
            }
        }
    }
    for &(x, yv) in extra {
        if yv > 0.0 {
            let yv = clamp(yv);
            chart.draw_series(std::iter::once(Circle::new((x, yv), 3, BLACK.filled())))?;
        }
    }
    if !legend.is_empty() {
        for l in legend {
            match l {
                Legend::Line(text, colour) => {
                    let colour = *colour;
                    chart
                        .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())?
                        .label(text.clone())
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                        });
                }
                Legend::Marker(text, shape, colour) => {
                    let style = colour.filled();
                    let shape = *shape;
                    chart
                        .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())?
                        .label(text.clone())
                        .legend(move |(x, y)| legend_marker(shape, (x + 10, y), style));
                }
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .label_font((FONT, 14))
            .draw()?;
    }
    Ok(())
}

/// A legend marker in pixel coordinates (circles, squares and triangles;
/// the legend needs one element type).
fn legend_marker<DB: DrawingBackend>(
    shape: usize,
    at: (i32, i32),
    style: ShapeStyle,
) -> DynElement<'static, DB, (i32, i32)> {
    match shape % 5 {
        0 => Circle::new(at, 4, style).into_dyn(),
        1 => Rectangle::new([(at.0 - 4, at.1 - 4), (at.0 + 4, at.1 + 4)], style).into_dyn(),
        2 => TriangleMarker::new(at, 5, style).into_dyn(),
        3 => Polygon::new(
            vec![
                (at.0, at.1 - 5),
                (at.0 + 5, at.1),
                (at.0, at.1 + 5),
                (at.0 - 5, at.1),
            ],
            style,
        )
        .into_dyn(),
        _ => Cross::new(at, 4, style).into_dyn(),
    }
}

/// Renders into an SVG string of `size` with a title and a subtitle line.
pub(super) fn svg(
    size: (u32, u32),
    title: &str,
    subtitle: &str,
    draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> Res<()>,
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

/// The widest relative width `(hi - lo) / lo` among positive intervals.
fn widest_rel<'a>(xs: impl Iterator<Item = &'a CertInterval>) -> f64 {
    xs.filter(|x| x.lo > 0.0)
        .map(|x| (x.hi - x.lo) / x.lo)
        .fold(0.0, f64::max)
}

/// Every figure of the study, drawn or skipped.
pub fn all(set: &StudySet) -> Vec<Figure> {
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
        curves.push(Curve {
            colour: type_colour(w.kind),
            opacity: if w.kind.per_head() { 0.55 } else { 0.95 },
            points: pts,
            show: Show::Band,
            marker: None,
            width: if w.kind.per_head() { 1 } else { 2 },
        });
    }
    let legend: Vec<Legend> = TYPES
        .iter()
        .filter(|k| c.matrices.iter().any(|w| w.kind == **k))
        .map(|k| Legend::Line(type_label(*k).into(), type_colour(*k)))
        .collect();
    let rel = widest_rel(all_iv.iter());
    let layers_text = layer_list(&layers);
    let sub = format!(
        "{} (L = {}, N = {}), layers {layers_text}, all heads; bands: certified intervals (widest relative width {})",
        p.id,
        c.model.layers,
        c.model.hidden,
        approx(rel)
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
    let svg = svg(SIZE, TITLES[0], &sub, |a| {
        log_chart(
            a,
            None,
            "Singular value index i",
            "Singular value",
            &curves,
            &legend,
            &[],
            true,
        )
    });
    figure(1, caption, svg)
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
/// distinct x values only.
fn bound_scaling(set: &StudySet, axis: Axis) -> Figure {
    let number = if axis == Axis::HiddenSize { 2 } else { 3 };
    let (x_name, fixed_name, x_desc) = match axis {
        Axis::HiddenSize => ("width", "L", "Hidden dimension N"),
        Axis::Layers => ("depth", "N", "Depth L"),
    };
    let rows: Vec<_> = scaling(set)
        .into_iter()
        .filter(|r| r.axis == axis)
        .collect();
    let mut groups: Vec<usize> = rows.iter().map(|r| r.fixed).collect();
    groups.sort_unstable();
    groups.dedup();
    let groups: Vec<usize> = groups
        .into_iter()
        .filter(|g| {
            let mut xs: Vec<usize> = rows.iter().filter(|r| r.fixed == *g).map(|r| r.x).collect();
            xs.sort_unstable();
            xs.dedup();
            xs.len() >= 2
        })
        .collect();
    if groups.is_empty() {
        let why = format!(
            "skipped: no two models share a {} with different {x_name}s (models: {})",
            if axis == Axis::HiddenSize {
                "depth"
            } else {
                "width"
            },
            set.models
                .iter()
                .map(|m| format!(
                    "{} L={} N={}",
                    m.id, m.cert.model.layers, m.cert.model.hidden
                ))
                .collect::<Vec<_>>()
                .join(", ")
        );
        return figure(number, why.clone(), Err(why));
    }
    let mut curves = Vec::new();
    let mut undefined = Vec::new();
    let mut ivs = Vec::new();
    for (gi, g) in groups.iter().enumerate() {
        for bound in Bound::ALL {
            let mut pts: Vec<(f64, CertInterval)> = Vec::new();
            for r in rows.iter().filter(|r| r.fixed == *g && r.bound == bound) {
                match r.ratio {
                    Some(q) => {
                        pts.push((r.x as f64, q));
                        ivs.push(q);
                    }
                    None => undefined.push(set.models[r.model].id.clone()),
                }
            }
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            curves.push(Curve {
                colour: bound_colour(bound),
                opacity: 1.0,
                points: pts,
                show: Show::Bars,
                marker: Some(gi),
                width: 2,
            });
        }
    }
    let mut legend: Vec<Legend> = Bound::ALL
        .iter()
        .map(|b| Legend::Line(bound_label(*b).into(), bound_colour(*b)))
        .collect();
    legend.extend(
        groups.iter().enumerate().map(|(gi, g)| {
            Legend::Marker(format!("{fixed_name} = {g}"), gi, RGBColor(105, 105, 105))
        }),
    );
    let anchor_word = if axis == Axis::HiddenSize {
        "narrowest"
    } else {
        "shallowest"
    };
    let rel = widest_rel(ivs.iter());
    let sub = format!(
        "each curve divided by its value at the {anchor_word} model of its group (certified interval division); bars: certified intervals"
    );
    let mut caption = format!(
        "B_ours (orange) and B_Edel (slate blue) against {}, one curve per fixed {fixed_name}, each divided by the value of \
         the {anchor_word} model with the same {fixed_name} (the paper normalises at {}). Every point is a certified \
         interval (interval division of the two certified bounds; bars, widest relative width {}). Log scale.",
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
    let svg = svg(SIZE, TITLES[number - 1], &sub, |a| {
        log_chart(
            a,
            None,
            x_desc,
            "Bound / bound of the anchor model",
            &curves,
            &legend,
            &[],
            true,
        )
    });
    figure(number, caption, svg)
}

/// Figure 4: (2,1), (1,1) and spectral norms of every proxy matrix against
/// N, for the models of the smallest depth; one line per (type, layer, head).
fn norms_vs_width(set: &StudySet) -> Figure {
    let depth = set
        .models
        .iter()
        .map(|m| m.cert.model.layers)
        .min()
        .expect("a study has a model");
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
        let why = format!(
            "skipped: the models of the smallest depth (L = {depth}: {}) have one width only (N = {})",
            at_depth
                .iter()
                .map(|&i| set.models[i].id.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            widths[0]
        );
        return figure(4, why.clone(), Err(why));
    }
    type Key = (MatrixType, usize, i64);
    type NormOf = fn(&crate::certificate::MatrixEntry) -> CertInterval;
    let norms: [(&str, NormOf); 3] = [
        ("(2,1) norm", |w| w.norm_21),
        ("(1,1) norm", |w| w.norm_11),
        ("Spectral norm", |w| w.spectral_norm),
    ];
    let mut panels = Vec::new();
    let mut rels = Vec::new();
    for (name, get) in norms {
        let mut lines: std::collections::BTreeMap<Key, Vec<(f64, CertInterval)>> =
            Default::default();
        let mut ivs = Vec::new();
        for &i in &at_depth {
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
        rels.push(widest_rel(ivs.iter()));
        let curves: Vec<Curve> = lines
            .into_iter()
            .map(|((kind, _, head), mut pts)| {
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                Curve {
                    colour: type_colour(kind),
                    opacity: if head >= 0 { 0.55 } else { 0.95 },
                    points: pts,
                    show: Show::Bars,
                    marker: Some(0),
                    width: if head >= 0 { 1 } else { 2 },
                }
            })
            .collect();
        panels.push((name, curves));
    }
    let legend: Vec<Legend> = TYPES
        .iter()
        .map(|k| Legend::Line(type_label(*k).into(), type_colour(*k)))
        .collect();
    let rel = rels.iter().copied().fold(0.0, f64::max);
    let ids: Vec<&str> = at_depth
        .iter()
        .map(|&i| set.models[i].id.as_str())
        .collect();
    let sub = format!(
        "L = {depth}: {}; one line per matrix (per head for QK and Ṽ); bars: certified intervals",
        ids.join(", ")
    );
    let caption = format!(
        "The (2,1), (1,1) and spectral norms of every proxy matrix of the models of the smallest depth (L = {depth}: {}) \
         against the hidden dimension N, one line per matrix type, layer and head (the paper shows L = 2). Bars are the \
         certified intervals (widest relative width {}). Log scale.",
        ids.join(", "),
        approx(rel)
    );
    let caption =
        caption + &clamp_note(panels.iter().map(|(_, c)| c.as_slice())).unwrap_or_default();
    let size = (SIZE.0, 1400);
    let svg = svg(size, TITLES[3], &sub, |a| {
        let parts = a.split_evenly((3, 1));
        for (part, (name, curves)) in parts.iter().zip(&panels) {
            log_chart(
                part,
                Some(&format!("{name} of the proxy matrices, L = {depth}")),
                "Hidden dimension N",
                name,
                curves,
                &legend,
                &[],
                true,
            )?;
        }
        Ok(())
    });
    figure(4, caption, svg)
}

/// Figure 5: `c(W, p) / c(W, 0)` against p for every matrix of the primary
/// model, with the certified minimiser set marked.
fn contribution_vs_p(set: &StudySet) -> Figure {
    let p = set.primary();
    let c = &p.cert;
    let m = c.parameters.grid_m;
    let mut curves = Vec::new();
    let mut marks = Vec::new();
    let mut undefined = 0usize;
    let mut ivs = Vec::new();
    let mut unique = 0usize;
    for w in &c.matrices {
        let Some(c0) = w.contribution_at(crate::certificate::GridPoint { k: 0, m }) else {
            undefined += 1;
            continue;
        };
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
                ivs.push(r);
            }
        }
        if pts.is_empty() {
            undefined += 1;
            continue;
        }
        if w.p_opt_fraction.len() == 1 {
            unique += 1;
        }
        for g in &w.p_opt_fraction {
            if let Some((_, r)) = pts.iter().find(|(x, _)| *x == g.approx()) {
                marks.push((g.approx(), r.mid()));
            }
        }
        curves.push(Curve {
            colour: type_colour(w.kind),
            opacity: if w.kind.per_head() { 0.35 } else { 0.9 },
            points: pts,
            show: Show::Band,
            marker: None,
            width: if w.kind.per_head() { 1 } else { 2 },
        });
    }
    if curves.is_empty() {
        let why = format!(
            "skipped: no matrix of {} has c(W, 0) certified positive, so no ratio c(W, p)/c(W, 0) is defined",
            p.id
        );
        return figure(5, why.clone(), Err(why));
    }
    let mut legend: Vec<Legend> = TYPES
        .iter()
        .filter(|k| c.matrices.iter().any(|w| w.kind == **k))
        .map(|k| Legend::Line(type_label(*k).into(), type_colour(*k)))
        .collect();
    legend.push(Legend::Marker(
        "certified argmin set".into(),
        0,
        RGBColor(0, 0, 0),
    ));
    let rel = widest_rel(ivs.iter());
    let sub = format!(
        "{} (L = {}, N = {}, m = {m}); bands: certified intervals; circles: every grid point the certificate allows as the minimiser",
        p.id, c.model.layers, c.model.hidden
    );
    let mut caption = format!(
        "c(W, p)/c(W, 0) on the grid P_m = {{0, 1/{m}, ..., 2}} for every head and layer matrix of {} ({} matrices), \
         as certified interval divisions (bands, widest relative width {}). Black circles mark the certified argmin \
         set of each matrix: {unique} of {} minimisers are certified unique. Log scale.",
        p.id,
        curves.len(),
        approx(rel),
        curves.len()
    );
    if undefined > 0 {
        caption.push_str(&format!(
            " {undefined} matrices are not drawn: c(W, 0) is not certified positive."
        ));
    }
    caption.push_str(&clamp_note([curves.as_slice()]).unwrap_or_default());
    let svg = svg(SIZE, TITLES[4], &sub, |a| {
        log_chart(
            a,
            None,
            "Schatten index p",
            "c(W, p) / c(W, 0)",
            &curves,
            &legend,
            &marks,
            false,
        )
    });
    figure(5, caption, svg)
}
