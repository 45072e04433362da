//! The study's figures read back as SVG and checked geometrically: the
//! legend covers no data, markers are the legend's shapes, legend entries
//! are told apart, x ticks are the models' widths and depths, one notation
//! per axis, figure 5 tells layers apart, and each subtitle's widest width
//! is the one computed from the tables. Over a generated family (every
//! figure drawn), the bundled MiniLM family that `scripts/study-family`
//! writes (the documented command, run as the docs say), and the figures
//! committed under docs/study/.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::{run, Rng};
use specbound::certificate::CertInterval;
use specbound::matrix::DenseMatrix;
use specbound::report::figures::{FILE_NAMES, WIDEST_WIDTH};
use specbound::report::fmt::approx;
use specbound::report::set::ratio;

// ---------------------------------------------------------------- SVG ----

/// One element of the SVG: its tag, attributes, text (for `<text>`), and
/// the classes and attributes of the groups around it (outermost first).
#[derive(Clone, Debug)]
struct El {
    tag: String,
    attrs: BTreeMap<String, String>,
    text: String,
    groups: Vec<BTreeMap<String, String>>,
}

impl El {
    fn a(&self, k: &str) -> &str {
        self.attrs.get(k).map(String::as_str).unwrap_or("")
    }
    fn num(&self, k: &str) -> f64 {
        self.a(k)
            .parse()
            .unwrap_or_else(|_| panic!("{} {k}={:?}", self.tag, self.a(k)))
    }
    fn class(&self) -> &str {
        self.a("class")
    }
    fn in_group(&self, class: &str) -> Option<&BTreeMap<String, String>> {
        self.groups
            .iter()
            .rev()
            .find(|g| g.get("class").map(String::as_str) == Some(class))
    }
}

fn attrs(s: &str) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let mut rest = s;
    while let Some(eq) = rest.find("=\"") {
        let key = rest[..eq].trim().to_string();
        let after = &rest[eq + 2..];
        let end = after.find('"').expect("closed attribute");
        m.insert(key, after[..end].to_string());
        rest = &after[end + 1..];
    }
    m
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// The elements of an SVG as the figures write it (no comments, no CDATA).
fn parse(svg: &str) -> Vec<El> {
    let mut out = Vec::new();
    let mut stack: Vec<BTreeMap<String, String>> = Vec::new();
    let mut rest = svg;
    while let Some(i) = rest.find('<') {
        rest = &rest[i + 1..];
        let j = rest.find('>').expect("closed tag");
        let tag_text = &rest[..j];
        rest = &rest[j + 1..];
        if let Some(name) = tag_text.strip_prefix('/') {
            if name.trim() == "g" {
                stack.pop();
            }
            continue;
        }
        let self_closing = tag_text.ends_with('/');
        let body = tag_text.trim_end_matches('/');
        let (tag, a) = body.split_once(' ').unwrap_or((body, ""));
        let a = attrs(a);
        if tag == "g" {
            stack.push(a);
            continue;
        }
        let mut text = String::new();
        if tag == "text" && !self_closing {
            let k = rest.find("</text>").expect("closed text");
            text = unescape(&rest[..k]);
        }
        out.push(El {
            tag: tag.to_string(),
            attrs: a,
            text,
            groups: stack.clone(),
        });
    }
    out
}

/// A box `(x0, y0, x1, y1)`.
type Box2 = (f64, f64, f64, f64);

fn numbers(s: &str) -> Vec<f64> {
    s.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .map(|t| t.parse().unwrap_or_else(|_| panic!("not a number: {t}")))
        .collect()
}

fn points(s: &str) -> Vec<(f64, f64)> {
    numbers(s).chunks(2).map(|c| (c[0], c[1])).collect()
}

/// Whether the segment `a`-`b` meets the closed box (Liang-Barsky).
fn segment_meets(a: (f64, f64), b: (f64, f64), r: Box2) -> bool {
    let (dx, dy) = (b.0 - a.0, b.1 - a.1);
    let mut t0 = 0.0f64;
    let mut t1 = 1.0f64;
    for (p, q) in [
        (-dx, a.0 - r.0),
        (dx, r.2 - a.0),
        (-dy, a.1 - r.1),
        (dy, r.3 - a.1),
    ] {
        if p == 0.0 {
            if q < 0.0 {
                return false;
            }
        } else {
            let t = q / p;
            if p < 0.0 {
                t0 = t0.max(t);
            } else {
                t1 = t1.min(t);
            }
        }
    }
    t0 <= t1
}

/// The pixel extent of a marker path `M x,y <relative commands>` (its
/// centre and the largest coordinate offset of the shape).
fn marker_box(d: &str) -> Box2 {
    let (x, y) = centre(d);
    (x - 5.5, y - 5.5, x + 5.5, y + 5.5)
}

fn centre(d: &str) -> (f64, f64) {
    let rest = d
        .strip_prefix("M ")
        .expect("marker path starts at its centre");
    let xy = rest.split(' ').next().unwrap();
    let (x, y) = xy.split_once(',').unwrap();
    (x.parse().unwrap(), y.parse().unwrap())
}

/// The shape of a marker path: the relative commands after its centre.
fn shape(d: &str) -> &str {
    let rest = d.strip_prefix("M ").unwrap();
    rest.split_once(' ').unwrap().1
}

/// Every segment and box of the data drawn (lines, band edges, bars,
/// markers).
/// A line segment's two ends.
type Segment = ((f64, f64), (f64, f64));
/// A legend's box and its entries (sample, label) by row.
type Legend = (Box2, BTreeMap<usize, (Sample, String)>);

fn data_geometry(els: &[El]) -> (Vec<Segment>, Vec<Box2>) {
    let mut segs = Vec::new();
    let mut boxes = Vec::new();
    for e in els.iter().filter(|e| e.in_group("data").is_some()) {
        match (e.tag.as_str(), e.class()) {
            ("polyline", _) | ("polygon", _) => {
                let p = points(e.a("points"));
                for w in p.windows(2) {
                    segs.push((w[0], w[1]));
                }
                if e.tag == "polygon" && p.len() > 2 {
                    segs.push((p[p.len() - 1], p[0]));
                }
            }
            ("path", "bar") => {
                // M x,lo V hi M x-4,lo h 8 M x-4,hi h 8
                let t: Vec<&str> = e.a("d").split(' ').collect();
                let (x, lo) = t[1].split_once(',').unwrap();
                let (x, lo): (f64, f64) = (x.parse().unwrap(), lo.parse().unwrap());
                let hi: f64 = t[3].parse().unwrap();
                segs.push(((x, lo), (x, hi)));
                segs.push(((x - 4.0, lo), (x + 4.0, lo)));
                segs.push(((x - 4.0, hi), (x + 4.0, hi)));
            }
            ("path", "marker") => boxes.push(marker_box(e.a("d"))),
            _ => {}
        }
    }
    (segs, boxes)
}

fn overlaps(a: Box2, b: Box2) -> bool {
    a.0 <= b.2 && b.0 <= a.2 && a.1 <= b.3 && b.1 <= a.3
}

/// A legend entry's sample: line colour and dash, marker shape and fill.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Sample {
    stroke: String,
    dash: String,
    shape: String,
    fill: String,
}

/// The legend entries of each legend (by the legend's order in the SVG).
fn legends(els: &[El]) -> Vec<Legend> {
    let mut out: Vec<Legend> = Vec::new();
    for e in els {
        if e.class() == "legend-box" {
            let (x, y) = (e.num("x"), e.num("y"));
            out.push((
                (x, y, x + e.num("width"), y + e.num("height")),
                BTreeMap::new(),
            ));
            continue;
        }
        let Some(g) = e.in_group("legend-entry") else {
            continue;
        };
        let i: usize = g["data-entry"].parse().unwrap();
        let (_, entries) = out.last_mut().expect("entries after the legend box");
        let (s, label) = entries.entry(i).or_insert((
            Sample {
                stroke: String::new(),
                dash: String::new(),
                shape: String::new(),
                fill: String::new(),
            },
            String::new(),
        ));
        match (e.tag.as_str(), e.class()) {
            ("line", "sample") => {
                s.stroke = e.a("stroke").into();
                s.dash = e.a("stroke-dasharray").into();
            }
            ("path", "marker") => {
                s.shape = shape(e.a("d")).into();
                s.fill = e.a("fill").into();
            }
            ("text", _) => *label = e.text.clone(),
            _ => {}
        }
    }
    out
}

/// The elements of each panel: split where a legend ends (each panel is
/// drawn axes, data, legend in that order).
fn panels(els: &[El]) -> Vec<Vec<El>> {
    let mut out = vec![Vec::new()];
    let mut in_legend = false;
    for e in els {
        let legend = e.in_group("legend").is_some();
        if in_legend && !legend {
            out.push(Vec::new());
        }
        in_legend = legend;
        out.last_mut().unwrap().push(e.clone());
    }
    out.retain(|p| p.iter().any(|e| e.class() == "legend-box"));
    out
}

/// The label notation: plain decimal or scientific.
fn notation(label: &str) -> &'static str {
    let plain = {
        let s = label.strip_prefix('-').unwrap_or(label);
        let (a, b) = s.split_once('.').unwrap_or((s, "0"));
        !a.is_empty()
            && a.chars().all(|c| c.is_ascii_digit())
            && !b.is_empty()
            && b.chars().all(|c| c.is_ascii_digit())
    };
    if plain {
        return "plain";
    }
    let sci = label.split_once('e').is_some_and(|(m, e)| {
        let m = m.strip_prefix('-').unwrap_or(m);
        let (a, b) = m.split_once('.').unwrap_or((m, "0"));
        let e = e.strip_prefix('-').unwrap_or(e);
        a.len() == 1
            && a.chars().all(|c| c.is_ascii_digit())
            && b.chars().all(|c| c.is_ascii_digit())
            && !e.is_empty()
            && e.chars().all(|c| c.is_ascii_digit())
    });
    if sci {
        "sci"
    } else {
        "other"
    }
}

fn subtitle(els: &[El]) -> String {
    els.iter()
        .filter(|e| e.class() == "subtitle")
        .map(|e| e.text.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

fn ticks(els: &[El], class: &str) -> Vec<String> {
    els.iter()
        .filter(|e| e.class() == class)
        .map(|e| e.text.clone())
        .collect()
}

/// The checks every drawn figure passes, whatever its data.
fn check_figure(name: &str, svg: &str) {
    let els = parse(svg);
    let ps = panels(&els);
    assert!(!ps.is_empty(), "{name}: no panel with a legend");
    for p in &ps {
        let legend = legends(p);
        assert_eq!(legend.len(), 1, "{name}: one legend per panel");
        let (lbox, entries) = &legend[0];
        // The legend covers no data.
        let (segs, boxes) = data_geometry(p);
        assert!(!segs.is_empty(), "{name}: no data drawn");
        for (a, b) in &segs {
            assert!(
                !segment_meets(*a, *b, *lbox),
                "{name}: legend {lbox:?} covers the data segment {a:?}-{b:?}"
            );
        }
        for b in &boxes {
            assert!(
                !overlaps(*b, *lbox),
                "{name}: legend covers a marker at {b:?}"
            );
        }
        // Different legend entries are told apart by their samples.
        let samples: BTreeSet<&Sample> = entries.values().map(|(s, _)| s).collect();
        assert_eq!(
            samples.len(),
            entries.len(),
            "{name}: two legend entries look the same: {entries:?}"
        );
        // Every marker drawn is the shape of a legend entry of its series,
        // in that entry's colour.
        for e in p.iter().filter(|e| e.class() == "marker") {
            let Some(g) = e.in_group("series") else {
                continue;
            };
            let keys: Vec<usize> = g["data-legend"]
                .split(' ')
                .map(|k| k.parse().unwrap())
                .collect();
            let ok = keys.iter().any(|k| {
                entries
                    .get(k)
                    .is_some_and(|(s, _)| s.shape == shape(e.a("d")) && s.fill == e.a("fill"))
            });
            assert!(
                ok,
                "{name}: marker {} of a series described by entries {keys:?} is not shown in the legend ({entries:?})",
                e.a("d")
            );
        }
        // One notation per axis.
        for class in ["xtick", "ytick"] {
            let labels = ticks(p, class);
            assert!(labels.len() >= 2, "{name}: fewer than two {class} labels");
            let kinds: BTreeSet<&str> = labels.iter().map(|l| notation(l)).collect();
            assert!(
                kinds.len() == 1 && !kinds.contains("other"),
                "{name}: {class} labels in more than one notation: {labels:?}"
            );
        }
    }
    assert!(
        subtitle(&els).contains(WIDEST_WIDTH),
        "{name}: the subtitle does not give the widest width"
    );
}

/// The widest relative width the subtitle states.
fn stated_widest(svg: &str) -> String {
    let s = subtitle(&parse(svg));
    s.split(WIDEST_WIDTH)
        .nth(1)
        .expect("widest width")
        .trim()
        .to_string()
}

// -------------------------------------------------------------- tables ---

type Row = BTreeMap<String, String>;

fn csv(path: &Path) -> Vec<Row> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
    lines
        .map(|l| {
            header
                .iter()
                .cloned()
                .zip(l.split(',').map(String::from))
                .collect()
        })
        .collect()
}

fn iv(r: &Row, col: &str) -> CertInterval {
    CertInterval {
        lo: r[&format!("{col}_lo")].parse().unwrap(),
        hi: r[&format!("{col}_hi")].parse().unwrap(),
    }
}

fn widest<'a>(xs: impl Iterator<Item = &'a CertInterval>) -> String {
    approx(
        xs.filter(|x| x.lo > 0.0)
            .map(|x| (x.hi - x.lo) / x.lo)
            .fold(0.0, f64::max),
    )
}

/// The widest widths of figures 1 to 5 computed from the tables of a
/// study in `out` whose primary model is `primary` (figure 1 over layers
/// 0-3), for the figures drawn.
fn widest_from_tables(out: &Path, primary: &str) -> BTreeMap<usize, String> {
    let t = out.join("tables");
    let mut w = BTreeMap::new();
    let sv = csv(&t.join("singular_values.csv"));
    let fig1: Vec<CertInterval> = sv
        .iter()
        .filter(|r| r["model_id"] == primary && r["layer"].parse::<usize>().unwrap() < 4)
        .map(|r| iv(r, "sigma"))
        .collect();
    w.insert(1, widest(fig1.iter()));
    let scaling = csv(&t.join("scaling.csv"));
    for (n, axis) in [(2, "hidden_size"), (3, "num_hidden_layers")] {
        // Groups: models with the same anchor; drawn when two x values.
        let rows: Vec<&Row> = scaling.iter().filter(|r| r["axis"] == axis).collect();
        let mut xs: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for r in &rows {
            xs.entry(&r["anchor_model_id"]).or_default().insert(&r["x"]);
        }
        let drawn: Vec<CertInterval> = rows
            .iter()
            .filter(|r| xs[r["anchor_model_id"].as_str()].len() >= 2)
            .map(|r| iv(r, "ratio"))
            .collect();
        if !drawn.is_empty() {
            w.insert(n, widest(drawn.iter()));
        }
    }
    let ms = csv(&t.join("matrix_summary.csv"));
    let depth = ms
        .iter()
        .map(|r| r["num_hidden_layers"].parse::<usize>().unwrap())
        .min()
        .unwrap();
    let at: Vec<&Row> = ms
        .iter()
        .filter(|r| r["num_hidden_layers"] == depth.to_string())
        .collect();
    let widths: BTreeSet<&str> = at.iter().map(|r| r["hidden_size"].as_str()).collect();
    if widths.len() >= 2 {
        let norms: Vec<CertInterval> = at
            .iter()
            .flat_map(|r| ["norm_21", "norm_11", "spectral_norm"].map(|c| iv(r, c)))
            .collect();
        w.insert(4, widest(norms.iter()));
    }
    let pc = csv(&t.join("p_contribution_raw.csv"));
    let mut c0: BTreeMap<(String, String, String), CertInterval> = BTreeMap::new();
    let key = |r: &Row| {
        (
            r["layer"].clone(),
            r["head"].clone(),
            r["matrix_type"].clone(),
        )
    };
    for r in pc
        .iter()
        .filter(|r| r["model_id"] == primary && r["p"] == "0")
    {
        c0.insert(key(r), iv(r, "contribution"));
    }
    let ratios: Vec<CertInterval> = pc
        .iter()
        .filter(|r| r["model_id"] == primary && r["p"] != "0")
        .filter_map(|r| ratio(&iv(r, "contribution"), &c0[&key(r)]))
        .collect();
    w.insert(5, widest(ratios.iter()));
    w
}

// ------------------------------------------------------------ families ---

/// Writes a generated BERT checkpoint (`config.json`, `model.safetensors`)
/// of `layers` layers, width `hidden`, heads of 32, feed-forward 2N;
/// layer `l`'s weights scaled by `1 + l` so that layers differ.
fn bert(dir: &Path, layers: usize, hidden: usize, seed: u64) {
    std::fs::create_dir_all(dir).unwrap();
    let mut rng = Rng(seed);
    let mut mat = |rows: usize, cols: usize, scale: f64| DenseMatrix {
        rows,
        cols,
        data: (0..rows * cols)
            .map(|_| ((rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * scale)
            .collect(),
    };
    let mut t = Vec::new();
    for l in 0..layers {
        let s = 0.2 * (1 + l) as f64;
        let p = format!("encoder.layer.{l}.");
        for m in ["query", "key", "value"] {
            t.push((
                format!("{p}attention.self.{m}.weight"),
                mat(hidden, hidden, s),
            ));
        }
        t.push((
            format!("{p}attention.output.dense.weight"),
            mat(hidden, hidden, s),
        ));
        t.push((
            format!("{p}intermediate.dense.weight"),
            mat(2 * hidden, hidden, s),
        ));
        t.push((
            format!("{p}output.dense.weight"),
            mat(hidden, 2 * hidden, s),
        ));
    }
    let refs: Vec<(String, &DenseMatrix)> = t.iter().map(|(n, m)| (n.clone(), m)).collect();
    common::write_safetensors(&dir.join("model.safetensors"), &refs, "F32");
    let config = serde_json::json!({
        "model_type": "bert",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": hidden / 32,
        "intermediate_size": 2 * hidden,
        "hidden_act": "gelu",
    });
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
}

/// A generated family that draws every figure: depths 1, 2, 3 at width 32,
/// widths 32 and 64 at depths 1 and 2; the study's output directory.
fn generated_study() -> &'static PathBuf {
    static S: OnceLock<PathBuf> = OnceLock::new();
    S.get_or_init(|| {
        let dir = common::target_tmpdir("generated");
        let mut args = vec!["study".to_string()];
        for (i, (l, n)) in [(1, 32), (1, 64), (2, 32), (2, 64), (3, 32)]
            .iter()
            .enumerate()
        {
            let p = dir.join(format!("gen-L{l}-H{n}"));
            bert(&p, *l, *n, 0x5EED + i as u64);
            args.push(p.display().to_string());
        }
        let out = dir.join("out");
        args.extend(["--out".into(), out.display().to_string(), "--quiet".into()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = run(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        out
    })
}

fn figure(out: &Path, n: usize) -> String {
    std::fs::read_to_string(out.join("figures").join(FILE_NAMES[n - 1]))
        .unwrap_or_else(|e| panic!("figure {n}: {e}"))
}

#[test]
fn legends_cover_no_data_markers_are_the_legends_shapes_and_axes_use_one_notation() {
    let out = generated_study();
    for n in 1..=5 {
        check_figure(&format!("figure {n}"), &figure(out, n));
    }
}

#[test]
fn x_ticks_of_the_scaling_and_norm_figures_are_the_models_widths_and_depths() {
    let out = generated_study();
    let xt = |n| ticks(&parse(&figure(out, n)), "xtick");
    assert_eq!(
        xt(2),
        ["32", "64"],
        "figure 2: widths of the depths with two widths"
    );
    assert_eq!(
        xt(3),
        ["1", "2", "3"],
        "figure 3: depths of the width with several"
    );
    // Figure 4: three panels, each ticked at the widths of depth 1.
    assert_eq!(xt(4), ["32", "64", "32", "64", "32", "64"]);
}

#[test]
fn subtitles_state_the_widest_width_computed_from_the_tables() {
    let out = generated_study();
    let from_tables = widest_from_tables(out, "gen-L2-H64");
    assert_eq!(from_tables.len(), 5);
    for (n, w) in from_tables {
        assert_eq!(stated_widest(&figure(out, n)), w, "figure {n}");
    }
}

#[test]
fn figure_5_draws_one_colour_per_layer_with_its_legend_entry() {
    let out = generated_study();
    let els = parse(&figure(out, 5));
    let legend = legends(&els);
    let entries = &legend[0].1;
    let mut colours: BTreeMap<usize, BTreeSet<String>> = BTreeMap::new();
    for e in els.iter().filter(|e| e.class() == "line") {
        let g = e.in_group("series").unwrap();
        let layer: usize = g["data-layer"].parse().unwrap();
        colours
            .entry(layer)
            .or_default()
            .insert(e.a("stroke").into());
        // The series names its layer's legend entry.
        let first: usize = g["data-legend"].split(' ').next().unwrap().parse().unwrap();
        assert_eq!(entries[&first].1, format!("layer {layer}"));
    }
    assert_eq!(
        colours.keys().copied().collect::<Vec<_>>(),
        [0, 1],
        "gen-L2-H64 has two layers"
    );
    let per_layer: Vec<&String> = colours
        .values()
        .map(|c| {
            assert_eq!(c.len(), 1, "one colour per layer: {c:?}");
            c.iter().next().unwrap()
        })
        .collect();
    assert_ne!(per_layer[0], per_layer[1], "layers share a colour");
    for (l, c) in per_layer.iter().enumerate() {
        let (s, label) = entries
            .values()
            .find(|(_, t)| *t == format!("layer {l}"))
            .unwrap();
        assert_eq!(&&s.stroke, c, "legend of {label}");
    }
}

#[test]
fn ours_and_edelman_are_drawn_with_different_line_styles() {
    // (The note naming curves that coincide is pinned by the unit test
    // `coinciding_curves_are_named_in_a_note` in src/report/figures.rs.)
    let out = generated_study();
    let els = parse(&figure(out, 2));
    let legend = legends(&els);
    let entries = &legend[0].1;
    let dashes: BTreeSet<&str> = entries.values().map(|(s, _)| s.dash.as_str()).collect();
    assert_eq!(
        dashes.len(),
        2,
        "Ours and Edelman are drawn with different line styles: {entries:?}"
    );
}

// ------------------------------------------- the documented MiniLM family --

fn header(path: &Path) -> (serde_json::Map<String, serde_json::Value>, Vec<u8>) {
    let bytes = std::fs::read(path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let h = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    (h, bytes[8 + n..].to_vec())
}

fn tensor<'a>(
    h: &serde_json::Map<String, serde_json::Value>,
    data: &'a [u8],
    name: &str,
) -> &'a [u8] {
    let off = h[name]["data_offsets"].as_array().unwrap();
    &data[off[0].as_u64().unwrap() as usize..off[1].as_u64().unwrap() as usize]
}

/// `scripts/study-family OUT`, then `specbound study OUT/* --out STUDY`, as
/// docs/study.md says; the study's output directory.
fn documented_study() -> &'static PathBuf {
    static S: OnceLock<PathBuf> = OnceLock::new();
    S.get_or_init(|| {
        let root = common::root();
        let dir = common::target_tmpdir("documented");
        let fam = dir.join("family");
        let o = Command::new("python3")
            .arg(root.join("scripts/study-family"))
            .arg(&fam)
            .current_dir(&root)
            .env_remove("SPECBOUND_BUNDLE")
            .output()
            .expect("python3 runs scripts/study-family");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let members: Vec<PathBuf> = String::from_utf8(o.stdout)
            .unwrap()
            .lines()
            .map(PathBuf::from)
            .collect();
        assert_eq!(
            members,
            ["minilm-L2", "minilm-L4", "minilm-L6"].map(|m| fam.join(m)),
            "the script prints the members it wrote"
        );
        let out = dir.join("study");
        let mut args = vec!["study".to_string()];
        args.extend(members.iter().map(|p| p.display().to_string()));
        args.extend(["--out".into(), out.display().to_string(), "--quiet".into()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = run(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let stdout = String::from_utf8_lossy(&o.stdout);
        for n in [2, 4] {
            assert!(stdout.contains(&format!("figure {n} skipped:")), "{stdout}");
        }
        out
    })
}

#[test]
fn study_family_script_keeps_the_first_layers_byte_for_byte() {
    let out = documented_study();
    let fam = out.parent().unwrap().join("family");
    let bundle = common::root().join("data/all-MiniLM-L6-v2");
    let (bh, bdata) = header(&bundle.join("model.safetensors"));
    for l in [2usize, 4, 6] {
        let m = fam.join(format!("minilm-L{l}"));
        let (h, data) = header(&m.join("model.safetensors"));
        let config: serde_json::Value =
            serde_json::from_slice(&std::fs::read(m.join("config.json")).unwrap()).unwrap();
        assert_eq!(config["num_hidden_layers"], l);
        for name in bh.keys().filter(|k| *k != "__metadata__") {
            let layer: usize = name.split('.').nth(2).unwrap().parse().unwrap();
            assert_eq!(h.contains_key(name), layer < l, "{name} in minilm-L{l}");
            if layer < l {
                assert_eq!(tensor(&h, &data, name), tensor(&bh, &bdata, name), "{name}");
                assert_eq!(h[name]["shape"], bh[name]["shape"]);
            }
        }
    }
}

#[test]
fn documented_minilm_family_draws_figures_1_3_5_that_pass_the_figure_checks() {
    let out = documented_study();
    for n in [1, 3, 5] {
        check_figure(&format!("figure {n}"), &figure(out, n));
    }
    for n in [2, 4] {
        assert!(!out.join("figures").join(FILE_NAMES[n - 1]).exists());
    }
    assert_eq!(ticks(&parse(&figure(out, 3)), "xtick"), ["2", "4", "6"]);
    let widest = widest_from_tables(out, "minilm-L6");
    for n in [1, 3, 5] {
        assert_eq!(stated_widest(&figure(out, n)), widest[&n], "figure {n}");
    }
}

#[test]
fn docs_show_figures_1_3_5_of_the_minilm_family_and_say_why_2_and_4_are_not_drawn() {
    let root = common::root();
    let doc = std::fs::read_to_string(root.join("docs/study.md")).unwrap();
    assert!(doc.contains("scripts/study-family /tmp/family"));
    for n in [1, 3, 5] {
        let file = FILE_NAMES[n - 1];
        assert!(
            doc.contains(&format!("(study/{file})")),
            "docs/study.md does not show {file}"
        );
        let svg = std::fs::read_to_string(root.join("docs/study").join(file)).unwrap();
        check_figure(&format!("docs/study/{file}"), &svg);
    }
    for n in [2, 4] {
        let file = FILE_NAMES[n - 1];
        assert!(
            !root.join("docs/study").join(file).exists(),
            "{file} is not from this family"
        );
        assert!(
            doc.contains(&format!("figure {n} skipped:")),
            "docs say why figure {n} is not drawn"
        );
    }
    let sub = |n: usize| {
        subtitle(&parse(
            &std::fs::read_to_string(root.join("docs/study").join(FILE_NAMES[n - 1])).unwrap(),
        ))
    };
    assert!(
        sub(1).starts_with("minilm-L6 (L = 6, N = 384)"),
        "{}",
        sub(1)
    );
    assert!(
        sub(5).starts_with("minilm-L6 (L = 6, N = 384"),
        "{}",
        sub(5)
    );
    let fig3 = std::fs::read_to_string(root.join("docs/study").join(FILE_NAMES[2])).unwrap();
    assert_eq!(ticks(&parse(&fig3), "xtick"), ["2", "4", "6"]);
}

// --------------------------------------------------------- trajectory ---

/// A trajectory of one run of generated checkpoints (depth 2, width 32),
/// listed from the initialisation (step 0) to step 10000, so that step 0
/// is its own initialisation: `log_spec_orig`'s and `log_prod_of_spec`'s
/// values are logs (negative here, the weights being small) and the
/// distance measures start at 0, as a Pythia run does. The study's
/// output directory.
fn trajectory_study() -> &'static PathBuf {
    static S: OnceLock<PathBuf> = OnceLock::new();
    S.get_or_init(|| {
        let dir = common::target_tmpdir("trajectory");
        let mut list = String::new();
        for (i, step) in [0u64, 100, 10000].iter().enumerate() {
            let name = format!("run-step{step}");
            bert(&dir.join(&name), 2, 32, 0x7EA + i as u64);
            list.push_str(&format!("{name} step={step} run=r\n"));
        }
        std::fs::write(dir.join("models.txt"), list).unwrap();
        let out = dir.join("out");
        let o = run(&[
            "study",
            "--models",
            dir.join("models.txt").to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--quiet",
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        out
    })
}

fn fig6(out: &Path) -> String {
    std::fs::read_to_string(out.join("figures/fig6_trajectory.svg")).unwrap()
}

#[test]
fn figure_6_passes_the_checks_of_every_figure() {
    let out = trajectory_study();
    check_figure("figure 6", &fig6(out));
}

/// Regression: figure 6 drew every ratio on one axis that fell back to
/// linear when one ratio was negative, flattening the other curves. Now
/// the ratios (linear-scale quantities certainly positive at step 0) are
/// on log axes, the differences of the others on linear axes, each panel
/// naming its quantities, and the subtitle's widest width is the one of
/// the intervals of `trajectory.csv` drawn.
#[test]
fn figure_6_draws_ratios_on_log_axes_and_differences_on_linear_axes() {
    let out = trajectory_study();
    let svg = fig6(out);
    let els = parse(&svg);
    let ps = panels(&els);
    assert!(ps.len() >= 2, "ratios and differences in their own panels");
    let rows = csv(&out.join("tables/trajectory.csv"));
    let mut drawn = Vec::new();
    let mut seen = BTreeSet::new();
    for p in &ps {
        let caption = p
            .iter()
            .find(|e| e.class() == "panel-caption")
            .map(|e| e.text.clone())
            .unwrap_or_default();
        let ratio = caption.starts_with("Ratio");
        for e in p.iter().filter(|e| e.tag == "polyline") {
            let q = e.in_group("series").unwrap()["data-quantity"].clone();
            assert_eq!(
                ratio,
                !q.starts_with("log_")
                    && rows
                        .iter()
                        .any(|r| r["bound"] == q && !r["ratio_lo"].is_empty()),
                "{q} in the panel '{caption}'"
            );
            seen.insert(q.clone());
            for r in rows.iter().filter(|r| r["bound"] == q) {
                drawn.push(iv(r, if ratio { "ratio" } else { "difference" }));
            }
        }
    }
    for q in [
        "ours",
        "edelman",
        "log_prod_of_spec",
        "log_spec_orig",
        "frobenius_distance",
    ] {
        assert!(seen.contains(q), "{q} is drawn: {seen:?}");
    }
    assert_eq!(stated_widest(&svg), widest(drawn.iter()));
}

/// Regression: a trajectory study's figures 1 and 5 showed the model
/// listed first (the initialisation); they show the run's last step.
#[test]
fn trajectory_study_figures_1_and_5_show_the_last_step() {
    let out = trajectory_study();
    for n in [1, 5] {
        let s = subtitle(&parse(&figure(out, n)));
        assert!(s.starts_with("run-step10000 "), "figure {n}: {s}");
    }
}

/// Regression: `scripts/study-family` looked for the bundle only under the
/// current directory and beside a `specbound` on PATH, so run from another
/// directory of a checkout it failed; and a wrong `SPECBOUND_BUNDLE` was
/// used as given. It searches as specbound does (docs/study.md): a set
/// `SPECBOUND_BUNDLE` alone (refused in one line when not a bundle), then
/// `data/` under the current directory, `share/specbound/` beside the
/// `specbound` on PATH, then the checkout the script is in.
#[test]
fn study_family_finds_the_bundle_from_any_directory_as_docs_say() {
    let dir = common::target_tmpdir("study-family-cwd");
    let script = common::root().join("scripts/study-family");
    let o = Command::new("python3")
        .arg(&script)
        .arg(dir.join("fam"))
        .args(["--layers", "1"])
        .current_dir(&dir)
        .env_remove("SPECBOUND_BUNDLE")
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("python3 runs scripts/study-family");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(dir.join("fam/minilm-L1/model.safetensors").is_file());
    let o = Command::new("python3")
        .arg(&script)
        .arg(dir.join("fam2"))
        .current_dir(&dir)
        .env("SPECBOUND_BUNDLE", dir.join("nowhere"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("SPECBOUND_BUNDLE="), "{err}");
    assert!(!dir.join("fam2").exists());
    let doc = std::fs::read_to_string(common::root().join("docs/study.md")).unwrap();
    let flat = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("`data/all-MiniLM-L6-v2` of the checkout the script is in"));
}

/// Regression: the figures committed under docs/study/ had subtitles of an
/// older run (`2.081e-11` where the documented command now writes
/// `2.08e-11`). They are the documented command's figures: each subtitle
/// as the documented family's run writes it, and docs/study.md quotes
/// figure 1's.
#[test]
fn committed_figures_have_the_subtitles_of_the_documented_run() {
    let out = documented_study();
    let root = common::root();
    for n in [1, 3, 5] {
        let file = FILE_NAMES[n - 1];
        let committed = std::fs::read_to_string(root.join("docs/study").join(file)).unwrap();
        assert_eq!(
            subtitle(&parse(&committed)),
            subtitle(&parse(&figure(out, n))),
            "docs/study/{file}: regenerate it with the commands of docs/study.md"
        );
    }
    let doc = std::fs::read_to_string(root.join("docs/study.md")).unwrap();
    let w = stated_widest(&figure(out, 1));
    assert!(
        doc.contains(&format!("{WIDEST_WIDTH}{w}`")),
        "docs/study.md quotes figure 1's widest width {w}"
    );
}
