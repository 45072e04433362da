//! The study's report: one self-contained HTML page (figures as inline
//! SVG, no script, no font or style sheet from anywhere, a Content Security
//! Policy that forbids every load) that reads offline and prints.

use std::fmt::Write;

use super::fidelity::{self, ROUNDOFF_NOTE, SCALE_FLOOR_NOTE};
use super::figures::Figure;
use super::fmt::{approx, cert_interval as interval};
use super::set::{p_opt_counts, scaling, widest, StudySet};
use crate::certificate::GridPoint;

/// The policy the page declares: nothing may be loaded (inline styles only).
pub(crate) const CONTENT_SECURITY_POLICY: &str =
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'";

/// How many of the widest intervals the page lists.
pub(crate) const WIDEST_SHOWN: usize = 15;

const STYLE: &str = "
body{font-family:Georgia,'Times New Roman',serif;max-width:1100px;margin:1.5em auto;padding:0 1em;color:#222;line-height:1.4}
h1{font-size:1.7em}h2{margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:.2em .5em;text-align:left;vertical-align:top}
td.num{font-family:'DejaVu Sans Mono',monospace;white-space:nowrap}
th{background:#f2f2f2}
figure{margin:1em 0}svg{max-width:100%;height:auto}
figcaption,p.note{font-size:.92em;color:#333}
p.skipped{color:#8a3000;font-style:italic}
code{font-family:'DejaVu Sans Mono',monospace;font-size:.9em}
nav ul{columns:2}
@media print{nav{display:none}section,figure,table{break-inside:avoid}body{max-width:none}}
";

pub(crate) use super::fmt::esc;

/// The SVG for inlining: the namespace attribute (a name, not a link; HTML
/// does not need it) is replaced by an accessible label.
pub(crate) fn inline_svg(svg: &str, label: &str) -> String {
    let ns = " xmlns=\"http://www.w3.org/2000/svg\"";
    let labelled = format!(" role=\"img\" aria-label=\"{}\"", esc(label));
    let body = match svg.find("<svg") {
        Some(i) => &svg[i..],
        None => svg,
    };
    body.replacen(ns, &labelled, 1)
}

/// The whole page for `set` and its drawn or skipped `figures`.
pub(crate) fn page(set: &StudySet, figures: &[Figure]) -> String {
    page_with(set, figures, None)
}

/// [`page`] with a trajectory section (HTML from
/// [`super::trajectory::section`]) after the figures, and its entry in
/// the contents.
pub(crate) fn page_with(set: &StudySet, figures: &[Figure], trajectory: Option<&str>) -> String {
    let mut h = String::with_capacity(1 << 20);
    head(&mut h, set);
    nav(&mut h, trajectory.is_some());
    bounds_section(&mut h, set);
    figures_section(&mut h, figures);
    if let Some(t) = trajectory {
        h.push_str(t);
    }
    scaling_section(&mut h, set);
    p_opt_section(&mut h, set);
    widest_section(&mut h, set);
    fidelity_section(&mut h, set);
    parameters_section(&mut h, set);
    models_section(&mut h, set);
    let _ = writeln!(
        h,
        "<footer><p class=\"note\">specbound {}. This page loads nothing: figures are inline SVG, styles inline.</p></footer>\n</body>\n</html>",
        esc(env!("CARGO_PKG_VERSION"))
    );
    h
}

/// The document head and the page's title and introduction.
fn head(h: &mut String, set: &StudySet) {
    let n = set.models.len();
    let primary = set.primary();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<meta http-equiv=\"Content-Security-Policy\" content=\"{}\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
<title>specbound study: {n} model{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        esc(CONTENT_SECURITY_POLICY),
        if n == 1 { "" } else { "s" }
    );
    let _ = write!(
        h,
        "<h1>Certified study of the generalization-bound proxies</h1>\n\
<p>Sakai &amp; Imaizumi (arXiv 2605.07297), proxies B_ours and B_Edel of {n} model{} \
(primary: <b>{}</b>), written by specbound {}. Every interval on this page contains the exact value for \
the stored weights: certified by the certificates listed at the end, printed with the lower end rounded \
down and the upper end rounded up. Figures draw every certified interval (bars or bands).</p>\n",
        if n == 1 { "" } else { "s" },
        esc(&primary.id),
        esc(env!("CARGO_PKG_VERSION"))
    );
}

/// The contents; the trajectory's entry only when the page has that section.
fn nav(h: &mut String, trajectory: bool) {
    h.push_str(
        "<nav><ul><li><a href=\"#bounds\">Bounds per model</a></li>\
<li><a href=\"#figures\">Figures</a></li>",
    );
    if trajectory {
        h.push_str("<li><a href=\"#trajectory\">Trajectory over training</a></li>");
    }
    h.push_str(
        "<li><a href=\"#scaling\">Certified ratios</a></li>\
<li><a href=\"#p-opt\">p_opt distribution</a></li><li><a href=\"#widest\">Widest intervals</a></li>\
<li><a href=\"#fidelity\">Fidelity notes</a></li><li><a href=\"#parameters\">Parameters</a></li>\
<li><a href=\"#models\">Models and hashes</a></li></ul></nav>\n",
    );
}

/// The bounds of every model, their measures and the inconclusive models.
fn bounds_section(h: &mut String, set: &StudySet) {
    h.push_str("<section id=\"bounds\">\n<h2>Bounds per model</h2>\n<table>\n<tr><th>model_id</th><th>L</th><th>N</th><th>heads</th><th>B_ours</th><th>B_Edel</th></tr>\n");
    for m in &set.models {
        let md = &m.cert.model;
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            esc(&m.id),
            md.layers,
            md.hidden,
            md.heads,
            interval(&crate::report::set::Bound::Ours.of(&m.cert)),
            interval(&crate::report::set::Bound::Edelman.of(&m.cert))
        );
    }
    h.push_str("</table>\n");
    h.push_str(&measures_table(set));
    if !set.inconclusive.is_empty() {
        h.push_str("<p class=\"skipped\">Not certified (inconclusive; left out of every table and figure):</p>\n<ul>\n");
        for (id, why) in &set.inconclusive {
            let _ = writeln!(h, "<li><b>{}</b>: {}</li>", esc(id), esc(why));
        }
        h.push_str("</ul>\n");
    }
    h.push_str("</section>\n");
}

/// Every figure, drawn (inline SVG and caption) or skipped (the reason).
fn figures_section(h: &mut String, figures: &[Figure]) {
    h.push_str("<section id=\"figures\">\n<h2>Figures</h2>\n");
    for f in figures {
        let _ = writeln!(
            h,
            "<section id=\"figure-{}\">\n<h3>Figure {}: {}</h3>",
            f.number,
            f.number,
            esc(f.title)
        );
        match &f.svg {
            Ok(svg) => {
                let _ = writeln!(
                    h,
                    "<figure>\n{}\n<figcaption>{}</figcaption>\n</figure>",
                    inline_svg(svg, f.title),
                    esc(&f.caption)
                );
            }
            Err(why) => {
                let _ = writeln!(h, "<p class=\"skipped\">Not drawn: {}</p>", esc(why));
            }
        }
        h.push_str("</section>\n");
    }
    h.push_str("</section>\n");
}

/// The certified ratios of figures 2 and 3.
fn scaling_section(h: &mut String, set: &StudySet) {
    h.push_str(
        "<section id=\"scaling\">\n<h2>Certified ratios (figures 2 and 3)</h2>\n\
<p class=\"note\">Each bound divided by the same bound of its anchor: the narrowest model of equal depth \
(axis hidden_size) or the shallowest of equal width (axis num_hidden_layers). Interval division of the \
certified bounds; a model that is its own anchor has ratio exactly 1. Checkpoints of one run (differing only by \
training step) are never each other's anchor: the trajectory section compares them.</p>\n<table>\n\
<tr><th>model_id</th><th>bound</th><th>axis</th><th>x</th><th>anchor</th><th>ratio</th></tr>\n",
    );
    for r in scaling(set) {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td></tr>",
            esc(&set.models[r.model].id),
            r.bound.name(),
            r.axis.name(),
            r.x,
            esc(&set.models[r.anchor].id),
            r.ratio
                .as_ref()
                .map(interval)
                .unwrap_or_else(|| "undefined (anchor not certified positive)".into())
        );
    }
    h.push_str("</table>\n</section>\n");
}

/// The p_opt distribution per model and matrix type.
fn p_opt_section(h: &mut String, set: &StudySet) {
    h.push_str(
        "<section id=\"p-opt\">\n<h2>p_opt distribution per matrix type</h2>\n\
<p class=\"note\">For each model and matrix type: how many matrices have a certified unique minimiser \
p_opt = k/m, and how many have several grid points the certified contributions cannot separate.</p>\n<table>\n\
<tr><th>model_id</th><th>type</th><th>unique p_opt (p: count)</th><th>ambiguous</th></tr>\n",
    );
    for c in p_opt_counts(set) {
        let cells: Vec<String> = c
            .unique
            .iter()
            .map(|(k, count)| {
                let (a, b) = GridPoint { k: *k, m: c.m }.reduced();
                if a == 0 {
                    format!("0: {count}")
                } else if b == 1 {
                    format!("{a}: {count}")
                } else {
                    format!("{a}/{b}: {count}")
                }
            })
            .collect();
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&set.models[c.model].id),
            c.kind.name(),
            if cells.is_empty() {
                "-".into()
            } else {
                cells.join(", ")
            },
            c.ambiguous
        );
    }
    h.push_str("</table>\n</section>\n");
}

/// The [`WIDEST_SHOWN`] widest intervals.
fn widest_section(h: &mut String, set: &StudySet) {
    let _ = write!(
        h,
        "<section id=\"widest\">\n<h2>Widest intervals</h2>\n<p class=\"note\">The {WIDEST_SHOWN} certified \
intervals of largest relative width (hi - lo)/min(|lo|, |hi|) over all models (infinite when an end is 0).</p>\n\
<table>\n<tr><th>model_id</th><th>quantity</th><th>interval</th><th>relative width</th></tr>\n"
    );
    for w in widest(set, WIDEST_SHOWN) {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            esc(&set.models[w.model].id),
            esc(&w.quantity),
            interval(&w.interval),
            if w.relative_width.is_finite() {
                approx(w.relative_width)
            } else {
                "inf".into()
            }
        );
    }
    h.push_str("</table>\n</section>\n");
}

/// The fidelity notes: round-off (with the primary model's float
/// estimate), the scale floor, ranks and the paper's extensions.
fn fidelity_section(h: &mut String, set: &StudySet) {
    let primary = set.primary();
    let _ = write!(
        h,
        "<section id=\"fidelity\">\n<h2>Fidelity notes</h2>\n<p>{}</p>\n",
        esc(ROUNDOFF_NOTE)
    );
    inflation_table(h, &primary.id, &fidelity::estimate(&primary.cert));
    let _ = writeln!(h, "<p>{}</p>", esc(SCALE_FLOOR_NOTE));
    zero_scale_rank_and_extension_notes(h, set);
    h.push_str("</section>\n");
}

/// The float estimate's inflation table and argmin note for the primary
/// model `primary` (nothing when it has no inflation rows).
fn inflation_table(h: &mut String, primary: &str, est: &fidelity::ArtefactEstimate) {
    if est.inflation.is_empty() {
        return;
    }
    let _ = write!(
        h,
        "<p class=\"note\">A float model of that computation for the primary model {} (not a certified \
quantity): the largest relative inflation c_t(W, p)/c(W, p) - 1 over its heads when the exact zeros are \
replaced by round-off values t = u sigma_1 (u = 2^-53), at p = k/{}, until it falls below 1e-8.</p>\n<table>\n\
<tr><th>type</th><th>k: inflation</th></tr>\n",
        esc(primary),
        est.m
    );
    for (kind, rows) in &est.inflation {
        let cells: Vec<String> = rows
            .iter()
            .map(|(k, v)| format!("{k}: {}", approx(*v)))
            .collect();
        let _ = writeln!(
            h,
            "<tr><td>{kind}</td><td class=\"num\">{}</td></tr>",
            cells.join(", ")
        );
    }
    h.push_str("</table>\n");
    if est.argmin_moved.is_empty() {
        h.push_str("<p class=\"note\">With these round-off values every float argmin stays in its certified argmin set.</p>\n");
    } else {
        let _ = writeln!(
            h,
            "<p class=\"note\">With these round-off values the float argmin of {} matrices leaves its certified argmin set (first: {}).</p>",
            est.argmin_moved.len(),
            esc(&est.argmin_moved[0])
        );
    }
}

/// The notes after the round-off estimate: the matrices of zero scale,
/// exact against numerical ranks, and every extension of the paper used.
fn zero_scale_rank_and_extension_notes(h: &mut String, set: &StudySet) {
    let zero: Vec<String> = set
        .models
        .iter()
        .map(|m| {
            (
                m,
                m.cert.matrices.iter().filter(|w| w.scale.hi == 0.0).count(),
            )
        })
        .filter(|(_, c)| *c > 0)
        .map(|(m, c)| format!("{}: {c}", m.id))
        .collect();
    let _ = writeln!(
        h,
        "<p class=\"note\">Matrices with an exactly zero certified scale in this study: {}.</p>",
        if zero.is_empty() {
            "none".to_string()
        } else {
            esc(&zero.join(", "))
        }
    );
    h.push_str(
        "<p>Ranks are exact ranks of the stored matrices (certified); the authors use a numerical rank with \
tolerance 1e-10 k max(sigma_1, 1). The two agree whenever no nonzero singular value is below that tolerance.</p>\n",
    );
    let mut ext: Vec<&String> = set.models.iter().flat_map(|m| &m.cert.extensions).collect();
    ext.sort();
    ext.dedup();
    for e in ext {
        let _ = writeln!(h, "<p>EXTENSION OF THE PAPER: {}</p>", esc(e));
    }
}

/// The parameters of every certificate.
fn parameters_section(h: &mut String, set: &StudySet) {
    h.push_str("<section id=\"parameters\">\n<h2>Parameters</h2>\n<table>\n<tr><th>model_id</th><th>L_phi</th><th>grid m</th><th>precision</th><th>certificate written by</th></tr>\n");
    for m in &set.models {
        let p = &m.cert.parameters;
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} {}</td></tr>",
            esc(&m.id),
            esc(&p.l_phi),
            p.grid_m,
            esc(&p.precision.to_string()),
            esc(&m.cert.tool.name),
            esc(&m.cert.tool.version)
        );
    }
    h.push_str("</table>\n</section>\n");
}

/// Every model's architecture, path and file hashes.
fn models_section(h: &mut String, set: &StudySet) {
    h.push_str("<section id=\"models\">\n<h2>Models and their hashes</h2>\n<table>\n<tr><th>model_id</th><th>architecture</th><th>path</th><th>file: SHA-256</th></tr>\n");
    for m in &set.models {
        let md = &m.cert.model;
        let files: Vec<String> = md
            .files
            .iter()
            .map(|f| format!("{}: <code>{}</code>", esc(&f.file), esc(&f.sha256)))
            .collect();
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{} (L = {}, N = {}, {} heads of {}, feed-forward {})</td><td><code>{}</code></td><td>{}</td></tr>",
            esc(&m.id),
            esc(&md.architecture),
            md.layers,
            md.hidden,
            md.heads,
            md.head_dim,
            md.intermediate,
            esc(&md.path),
            files.join("<br>")
        );
    }
    h.push_str("</table>\n</section>\n");
}

/// Models per measures table: the tables are transposed (one row per
/// measure, one column per model) and split into groups of this many
/// models, so that a table of 13 measures fits a 1280 px page whatever the
/// number of models (an interval cell is up to about 30 characters).
pub(crate) const MEASURES_MODELS_PER_TABLE: usize = 3;

/// The report's tables of the measures of every model that has them: one
/// row per measure some model states, one column per model, at most
/// [`MEASURES_MODELS_PER_TABLE`] models per table (`class="measures"`), or
/// an empty string when no model has measures.
pub(crate) fn measures_table(set: &StudySet) -> String {
    let models: Vec<(&str, Vec<(&'static str, crate::certificate::CertInterval)>)> = set
        .models
        .iter()
        .map(|m| (m.id.as_str(), super::measures::measure_rows(&m.cert)))
        .filter(|(_, rows)| !rows.is_empty())
        .collect();
    let names: Vec<&str> = super::measures::QUANTITY_NAMES[2..]
        .iter()
        .copied()
        .filter(|n| {
            models
                .iter()
                .any(|(_, rows)| rows.iter().any(|(k, _)| k == n))
        })
        .collect();
    if names.is_empty() {
        return String::new();
    }
    let mut h = String::from(
        "<p class=\"note\">The norm-based measures of the raw weight matrices (docs/measures.md: Jiang et al. \
2019; Bartlett, Foster &amp; Telgarsky 2017), certified from the certified norms each certificate states: one row \
per measure, one column per model.</p>\n",
    );
    for group in models.chunks(MEASURES_MODELS_PER_TABLE) {
        h.push_str("<table class=\"measures\">\n<tr><th>measure</th>");
        for (id, _) in group {
            let _ = write!(h, "<th>{}</th>", esc(id));
        }
        h.push_str("</tr>\n");
        for n in &names {
            let _ = write!(h, "<tr><td>{n}</td>");
            for (_, rows) in group {
                match rows.iter().find(|(k, _)| k == n) {
                    Some((_, v)) => {
                        let _ = write!(h, "<td class=\"num\">{}</td>", interval(v));
                    }
                    None => h.push_str("<td>-</td>"),
                }
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</table>\n");
    }
    h
}
