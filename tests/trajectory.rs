//! A trajectory study over real checkpoints: the bundled MiniLM's first
//! layer (its trained weights), a checkpoint interpolated halfway from a
//! perturbation to it, and the perturbation itself as the initialisation,
//! at steps 0, 100 and 10000. Every row of `trajectory.csv` and
//! `trajectory_changes.csv` is checked against the certificates exactly,
//! with figure 6, the report's section, resume and the refusals.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::{assert_bad, run, write_safetensors, Rng};
use rug::Rational;
use specbound::certificate::{CertInterval, Certificate};
use specbound::matrix::DenseMatrix;
use specbound::report::measures::quantities;

const TENSORS: [&str; 6] = [
    "encoder.layer.0.attention.self.query.weight",
    "encoder.layer.0.attention.self.key.weight",
    "encoder.layer.0.attention.self.value.weight",
    "encoder.layer.0.attention.output.dense.weight",
    "encoder.layer.0.intermediate.dense.weight",
    "encoder.layer.0.output.dense.weight",
];

fn scratch(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("trajectory")
        .join(format!("pid-{}", std::process::id()))
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Writes a one-layer MiniLM checkpoint with the weights `f(name, W)`.
fn checkpoint(dir: &Path, f: &dyn Fn(usize, &DenseMatrix) -> DenseMatrix) {
    let bundle = common::root().join("data/all-MiniLM-L6-v2");
    std::fs::create_dir_all(dir).unwrap();
    let mats: Vec<(String, DenseMatrix)> = TENSORS
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let w = specbound::io::read_safetensors(&bundle.join("model.safetensors"), Some(n))
                .unwrap()
                .matrix;
            (n.to_string(), f(i, &w))
        })
        .collect();
    let refs: Vec<(String, &DenseMatrix)> = mats.iter().map(|(n, m)| (n.clone(), m)).collect();
    write_safetensors(&dir.join("model.safetensors"), &refs, "F32");
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bundle.join("config.json")).unwrap()).unwrap();
    config["num_hidden_layers"] = serde_json::json!(1);
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
}

/// A perturbation of the shape of `w` (entries about 0.05 in size).
fn noise(i: usize, w: &DenseMatrix) -> DenseMatrix {
    let mut r = Rng(0x5eed ^ ((i as u64) << 8));
    DenseMatrix {
        rows: w.rows,
        cols: w.cols,
        data: (0..w.data.len())
            .map(|_| ((r.next_u64() >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 0.1)
            .collect(),
    }
}

/// The three checkpoints (init, mid, trained) and the models file.
fn family() -> &'static (PathBuf, PathBuf) {
    static F: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    F.get_or_init(|| {
        let d = scratch("models");
        checkpoint(&d.join("init"), &noise);
        checkpoint(&d.join("mid"), &|i, w| {
            let p = noise(i, w);
            DenseMatrix {
                rows: w.rows,
                cols: w.cols,
                data: w
                    .data
                    .iter()
                    .zip(&p.data)
                    .map(|(a, b)| 0.5 * (a + b))
                    .collect(),
            }
        });
        checkpoint(&d.join("trained"), &|_, w| w.clone());
        let list = d.join("models.txt");
        std::fs::write(
            &list,
            "# a trajectory: the initialisation, halfway, trained\n\
             trained step=10000 run=minilm\n\
             init\tstep=0 run=minilm\n\
             mid step=100   run=minilm\n",
        )
        .unwrap();
        (d, list)
    })
}

/// `specbound study --models LIST --out OUT`.
fn run_study(list: &Path, out: &Path) -> std::process::Output {
    run(&[
        "study",
        "--models",
        list.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ])
}

/// The study, run once and shared: `(out dir, stderr)`.
fn study() -> &'static (PathBuf, String) {
    static S: OnceLock<(PathBuf, String)> = OnceLock::new();
    S.get_or_init(|| {
        let (d, list) = family();
        let out = d.join("out");
        let o = run_study(list, &out);
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(o.status.success(), "study failed: {err}");
        (out, err)
    })
}

fn csv(path: &Path) -> Vec<BTreeMap<String, String>> {
    common::csv_rows(path)
}

fn cert(out: &Path, id: &str) -> Certificate {
    Certificate::read(&out.join("certificates").join(format!("{id}.json"))).unwrap()
}

/// The written pair `lo, hi` as binary64 (the tables' decimals are the
/// shortest that parse back to the f64 held).
fn pair(row: &BTreeMap<String, String>, lo: &str, hi: &str) -> Option<CertInterval> {
    if row[lo].is_empty() {
        assert!(row[hi].is_empty(), "{row:?}");
        return None;
    }
    Some(CertInterval {
        lo: row[lo].parse().unwrap(),
        hi: row[hi].parse().unwrap(),
    })
}

fn q(x: f64) -> Rational {
    Rational::from_f64(x).expect("finite")
}

#[test]
fn trajectory_rows_equal_their_certificates_and_ratios_contain_every_quotient() {
    let (out, _) = study();
    let rows = csv(&out.join("tables/trajectory.csv"));
    let steps: BTreeMap<&str, u64> = [("init", 0), ("mid", 100), ("trained", 10000)].into();
    let mut by_quantity: BTreeMap<String, Vec<(u64, String)>> = BTreeMap::new();
    for r in &rows {
        assert_eq!(r["run"], "minilm");
        assert_eq!(
            steps[r["model_id"].as_str()],
            r["step"].parse::<u64>().unwrap()
        );
        by_quantity
            .entry(r["bound"].clone())
            .or_default()
            .push((r["step"].parse().unwrap(), r["model_id"].clone()));
        let c = cert(out, &r["model_id"]);
        let want = quantities(&c)
            .into_iter()
            .find(|(n, _)| *n == r["bound"])
            .unwrap_or_else(|| panic!("unknown quantity {}", r["bound"]))
            .1;
        assert_eq!(pair(r, "value_lo", "value_hi"), want, "{r:?}");
        // The ratio against the run's first step (init, step 0).
        let first = quantities(&cert(out, "init"))
            .into_iter()
            .find(|(n, _)| *n == r["bound"])
            .unwrap()
            .1;
        let ratio = pair(r, "ratio_lo", "ratio_hi");
        // The difference from the first step: exactly 0 there, else it
        // holds every difference of the two intervals' points.
        let diff = pair(r, "difference_lo", "difference_hi");
        match (want, first) {
            (Some(_), Some(_)) if r["model_id"] == "init" => {
                assert_eq!(diff, Some(CertInterval::point(0.0)), "{r:?}");
                assert_eq!(r["difference_lo"], "0", "never -0: {r:?}");
            }
            (Some(v), Some(d)) => {
                let diff = diff.unwrap_or_else(|| panic!("no difference: {r:?}"));
                for x in [v.lo, v.hi] {
                    for y in [d.lo, d.hi] {
                        let exact = q(x) - q(y);
                        assert!(q(diff.lo) <= exact && exact <= q(diff.hi), "{r:?}");
                    }
                }
            }
            _ => assert_eq!(diff, None, "{r:?}"),
        }
        match (want, first) {
            (Some(v), Some(d)) if d.lo > 0.0 && !r["bound"].starts_with("log_") => {
                let ratio = ratio.unwrap_or_else(|| panic!("no ratio: {r:?}"));
                if r["model_id"] == "init" {
                    assert_eq!(ratio, CertInterval::point(1.0));
                    continue;
                }
                for x in [v.lo, v.hi] {
                    for y in [d.lo, d.hi] {
                        let exact = q(x) / q(y);
                        assert!(
                            q(ratio.lo) <= exact && exact <= q(ratio.hi),
                            "{r:?}: {x}/{y} outside the ratio"
                        );
                    }
                }
                assert!(r["note"].is_empty());
            }
            _ => {
                assert_eq!(ratio, None, "{r:?}");
                assert!(!r["note"].is_empty(), "an empty ratio says why: {r:?}");
            }
        }
    }
    // Every bound and every measure the certificates state, each at all
    // three steps in step order.
    for name in [
        "ours",
        "edelman",
        "param_norm",
        "log_prod_of_spec",
        "log_spec_orig",
        "log_bartlett",
    ] {
        let v = &by_quantity[name];
        assert_eq!(
            v.iter().map(|x| x.0).collect::<Vec<_>>(),
            [0, 100, 10000],
            "{name}"
        );
    }
    let c = cert(out, "trained");
    let stated = quantities(&c).iter().filter(|(_, v)| v.is_some()).count();
    assert_eq!(by_quantity.len(), stated);
    assert!(stated >= 10, "bounds and measures: {stated}");
}

/// Regression: a log-scale measure (`log_prod_of_spec` negative at step 0
/// of a Pythia run) got a "ratio" of -14.10 although it rose, and
/// `log_spec_orig` near 0 at step 0 one of 3344. A log-scale quantity, or
/// one not certainly positive at the first step, has no ratio (empty
/// cells, the note says why) and is compared by its certified difference,
/// in the table, the report's section and figure 6.
#[test]
fn log_scale_or_not_positive_first_steps_get_a_difference_not_a_ratio() {
    let (out, _) = study();
    let rows = csv(&out.join("tables/trajectory.csv"));
    let first = quantities(&cert(out, "init"));
    let mut log_rows = 0;
    for r in &rows {
        let d = first.iter().find(|(n, _)| *n == r["bound"]).unwrap().1;
        let meaningless = r["bound"].starts_with("log_") || !d.is_some_and(|d| d.lo > 0.0);
        if meaningless {
            assert!(
                r["ratio_lo"].is_empty() && r["ratio_hi"].is_empty(),
                "{r:?}"
            );
            assert!(r["note"].starts_with("no "), "{r:?}");
        }
        if r["bound"].starts_with("log_") && !r["value_lo"].is_empty() && d.is_some() {
            log_rows += 1;
            assert!(r["note"].contains("log-scale"), "{r:?}");
            assert!(!r["difference_lo"].is_empty(), "{r:?}");
        }
    }
    assert!(
        log_rows >= 9,
        "log_prod_of_spec, log_spec_orig, log_bartlett, ..."
    );
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    let section = &page[page.find("<section id=\"trajectory\">").unwrap()..];
    assert!(section.contains("<th>difference last - first</th>"));
    let row = section
        .lines()
        .find(|l| l.contains("<td>log_prod_of_spec</td>"))
        .unwrap();
    assert!(row.contains("no ratio: a log-scale quantity"), "{row}");
    let svg = std::fs::read_to_string(out.join("figures/fig6_trajectory.svg")).unwrap();
    assert!(svg.contains("Difference from the first step: log-scale measures"));
    assert!(svg.contains("data-quantity=\"log_prod_of_spec\""));
}

/// Regression: the checkpoints of one run (same architecture, other
/// steps) were paired as width/depth anchors in `scaling.csv` and the
/// report's certified ratios. A checkpoint is never anchored to another
/// checkpoint of its own run.
#[test]
fn checkpoints_of_one_run_are_never_scaling_anchors() {
    let (out, _) = study();
    let rows = csv(&out.join("tables/scaling.csv"));
    assert!(!rows.is_empty());
    for r in &rows {
        assert_eq!(r["anchor_model_id"], r["model_id"], "{r:?}");
    }
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    for (a, b) in [("mid", "init"), ("trained", "init"), ("trained", "mid")] {
        assert!(
            !page.contains(&format!(
                "<td>{a}</td><td>ours</td><td>hidden_size</td><td>384</td><td>{b}</td>"
            )),
            "{a} anchored to {b}"
        );
    }
}

#[test]
fn trajectory_changes_are_exactly_the_disjoint_intervals_with_their_difference() {
    let (out, _) = study();
    let rows = csv(&out.join("tables/trajectory_changes.csv"));
    // Expected: every matrix quantity of consecutive steps whose intervals
    // are disjoint.
    let mut expected = 0;
    for (a, b) in [("init", "mid"), ("mid", "trained")] {
        let (ca, cb) = (cert(out, a), cert(out, b));
        for (wa, wb) in ca.matrices.iter().zip(&cb.matrices) {
            assert_eq!(wa.id(), wb.id());
            let ra = CertInterval {
                lo: wa.rank.lo as f64,
                hi: wa.rank.hi as f64,
            };
            let rb = CertInterval {
                lo: wb.rank.lo as f64,
                hi: wb.rank.hi as f64,
            };
            for (x, y) in [
                (wa.spectral_norm, wb.spectral_norm),
                (wa.frobenius_norm, wb.frobenius_norm),
                (ra, rb),
            ] {
                expected += usize::from(x.disjoint(&y));
            }
        }
        let (raw_a, raw_b) = (ca.raw_weights.unwrap(), cb.raw_weights.unwrap());
        for (wa, wb) in raw_a.iter().zip(&raw_b) {
            for (x, y) in [
                (wa.spectral_norm, wb.spectral_norm),
                (wa.frobenius_norm, wb.frobenius_norm),
            ] {
                expected += usize::from(x.disjoint(&y));
            }
        }
    }
    assert!(expected > 0, "the perturbation changes the norms");
    assert_eq!(rows.len(), expected);
    for r in &rows {
        let (ca, cb) = (cert(out, &r["from_model_id"]), cert(out, &r["to_model_id"]));
        let layer: usize = r["layer"].parse().unwrap();
        let head: i64 = r["head"].parse().unwrap();
        let get = |c: &Certificate| -> CertInterval {
            if let Some(role) = r["matrix_type"].strip_prefix("raw_") {
                let w = c
                    .raw_weights
                    .as_ref()
                    .unwrap()
                    .iter()
                    .find(|w| w.layer == layer && w.role == role)
                    .unwrap()
                    .clone();
                match r["quantity"].as_str() {
                    "spectral_norm" => w.spectral_norm,
                    "frobenius_norm" => w.frobenius_norm,
                    other => panic!("raw {other}"),
                }
            } else {
                let w = c
                    .matrices
                    .iter()
                    .find(|w| {
                        w.layer == layer
                            && w.id().head_column() == head
                            && w.kind.name() == r["matrix_type"]
                    })
                    .unwrap();
                match r["quantity"].as_str() {
                    "spectral_norm" => w.spectral_norm,
                    "frobenius_norm" => w.frobenius_norm,
                    "rank" => CertInterval {
                        lo: w.rank.lo as f64,
                        hi: w.rank.hi as f64,
                    },
                    other => panic!("{other}"),
                }
            }
        };
        let (x, y) = (get(&ca), get(&cb));
        assert_eq!(pair(r, "from_lo", "from_hi"), Some(x));
        assert_eq!(pair(r, "to_lo", "to_hi"), Some(y));
        assert!(x.disjoint(&y), "{r:?}");
        let d = pair(r, "change_lo", "change_hi").unwrap();
        assert!(q(d.lo) <= q(y.lo) - q(x.hi), "{r:?}");
        assert!(q(y.hi) - q(x.lo) <= q(d.hi), "{r:?}");
    }
}

#[test]
fn measures_csv_holds_every_measure_beside_the_bounds() {
    let (out, _) = study();
    let rows = csv(&out.join("tables/measures.csv"));
    let bounds = csv(&out.join("tables/observed_bounds.csv"));
    for id in ["init", "mid", "trained"] {
        let c = cert(out, id);
        assert!(c.measures.is_some(), "a study certifies the measures");
        let mine: Vec<_> = rows.iter().filter(|r| r["model_id"] == id).collect();
        let want: Vec<_> = quantities(&c)
            .into_iter()
            .skip(2)
            .filter(|(_, v)| v.is_some())
            .collect();
        assert_eq!(mine.len(), want.len(), "{id}");
        for (r, (name, v)) in mine.iter().zip(want) {
            assert_eq!(r["measure"], name);
            assert_eq!(pair(r, "value_lo", "value_hi"), v);
        }
        // observed_bounds.csv keeps its two bound rows per model.
        assert_eq!(bounds.iter().filter(|r| r["model_id"] == id).count(), 2);
    }
}

#[test]
fn figure_six_and_the_report_section_are_written() {
    let (out, _) = study();
    let svg = std::fs::read_to_string(out.join("figures/fig6_trajectory.svg")).unwrap();
    assert!(svg.trim_start().starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("Bounds and measures over training"));
    assert!(svg.contains("param_norm") && svg.contains("log_spec_orig"));
    // Tags balance (a well-formed document as far as elements go).
    let opened =
        svg.matches('<').count() - svg.matches("</").count() * 2 - svg.matches("/>").count();
    assert_eq!(opened, 0, "unbalanced tags in the SVG");
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(page.contains("<section id=\"trajectory\">"));
    assert!(page.contains("Figure 6: Bounds and measures over training"));
    assert!(page.contains("href=\"#trajectory\""));
    assert!(page.contains("log_bartlett"), "the measures table");
}

#[test]
fn a_second_run_reuses_every_certificate_and_writes_the_same_bytes() {
    let (out, _) = study();
    let (_, list) = family();
    let read = |p: &str| std::fs::read(out.join(p)).unwrap();
    let files = [
        "tables/trajectory.csv",
        "tables/trajectory_changes.csv",
        "tables/measures.csv",
        "figures/fig6_trajectory.svg",
        "report.html",
    ];
    let before: Vec<Vec<u8>> = files.iter().map(|f| read(f)).collect();
    let o = run_study(list, out);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(err.matches("reused").count(), 3, "{err}");
    for (f, b) in files.iter().zip(before) {
        assert_eq!(read(f), b, "{f} changed on resume");
    }
}

#[test]
fn duplicate_steps_and_unknown_keys_are_one_line_errors() {
    let (d, _) = family();
    let dir = scratch("bad");
    let out = dir.join("out");
    let bad = |name: &str, text: &str, needles: &[&str]| {
        let f = dir.join(name);
        std::fs::write(&f, text).unwrap();
        let f = f.to_str().unwrap().to_string();
        assert_bad(
            &["study", "--models", &f, "--out", out.to_str().unwrap()],
            needles,
        );
        assert!(!out.exists(), "nothing written");
    };
    let init = d.join("init");
    let mid = d.join("mid");
    let (i, m) = (init.to_str().unwrap(), mid.to_str().unwrap());
    bad(
        "dup.txt",
        &format!("{i} step=5\n{m} step=5\n"),
        &["step 5", "unique within a run"],
    );
    bad(
        "key.txt",
        &format!("# c\n{i} step=5\n{m} epoch=3\n"),
        &["key.txt", "line 3", "unknown field 'epoch'"],
    );
    bad(
        "val.txt",
        &format!("{i} step=-1\n"),
        &["line 1", "step '-1'"],
    );
    bad("bare.txt", &format!("{i} 5\n"), &["line 1", "key=value"]);
    bad("run.txt", &format!("{i} run=a\n"), &["needs a step"]);
    // On the command line each --step belongs to the MODEL before it.
    let o = out.to_str().unwrap();
    assert_bad(
        &["study", i, "--step", "7", m, "--step", "7", "--out", o],
        &["step 7", "unique within a run"],
    );
    assert_bad(
        &["study", "--step", "7", i, "--out", o],
        &["--step applies to the MODEL argument before it"],
    );
    assert_bad(&["study", i, "--step", "x", "--out", o], &["step 'x'"]);
    assert!(!out.exists());
}

/// A run that starts at step 0 measures the distances from its step-0
/// model by default (docs/study.md, "Initialisation"): every certificate
/// of the run names the step-0 model's files as its initialisation and
/// states the distance measures, the step-0 model's distance contains 0
/// (its logs are absent), and `trajectory.csv` lists the distances with
/// no ratio (the first step's value contains 0). The trained model's
/// `frobenius_distance` agrees with a float64 evaluation from the weights.
#[test]
fn a_run_starting_at_step_zero_measures_distances_from_it_by_default() {
    let (out, _) = study();
    let (d, _) = family();
    let init = cert(out, "init");
    for id in ["init", "mid", "trained"] {
        let c = cert(out, id);
        assert_eq!(
            c.init_model.as_ref().expect(id).files,
            init.model.files,
            "{id}"
        );
        let m = c.measures.as_ref().unwrap();
        assert!(m.frobenius_distance.is_some() && m.dist_spec_init.is_some());
    }
    let m0 = init.measures.as_ref().unwrap();
    assert!(m0
        .frobenius_distance
        .unwrap()
        .contains(&CertInterval::point(0.0)));
    assert!(m0.log_spec_init.is_none() && m0.log_bartlett_init.is_none());
    let rows = csv(&out.join("tables/trajectory.csv"));
    let fd: Vec<_> = rows
        .iter()
        .filter(|r| r["bound"] == "frobenius_distance")
        .collect();
    assert_eq!(fd.len(), 3);
    assert!(fd.iter().all(|r| r["ratio_lo"].is_empty()), "{fd:?}");
    // float64: sum over the six matrices of ||W - W0||_F^2.
    let read = |m: &str, n: &str| {
        specbound::io::read_safetensors(&d.join(m).join("model.safetensors"), Some(n))
            .unwrap()
            .matrix
    };
    let f64_dist: f64 = TENSORS
        .iter()
        .map(|n| {
            let (w, w0) = (read("trained", n), read("init", n));
            w.data
                .iter()
                .zip(&w0.data)
                .map(|(a, b)| (a - b) * (a - b))
                .sum::<f64>()
        })
        .sum();
    let x = cert(out, "trained")
        .measures
        .unwrap()
        .frobenius_distance
        .unwrap();
    let margin = 1e-9 * f64_dist;
    assert!(
        x.lo - margin <= f64_dist && f64_dist <= x.hi + margin,
        "[{:e}, {:e}] and the float64 {f64_dist:e}",
        x.lo,
        x.hi
    );
}

/// `init=MODEL` in a models file gives a model without a step its
/// initialisation (a relative path is the file's neighbour); one of
/// another architecture is refused before any computation, in one line.
#[test]
fn init_field_names_the_initialisation_and_refuses_another_architecture() {
    let (d, _) = family();
    let dir = scratch("init-field");
    let list = d.join("init-field.txt");
    std::fs::write(&list, "mid init=init\n").unwrap();
    let out = dir.join("out");
    let o = run_study(&list, &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let c = cert(&out, "mid");
    assert_eq!(
        c.init_model.as_ref().unwrap().files,
        cert(&study().0, "init").model.files
    );
    assert!(c.measures.unwrap().frobenius_distance.is_some());
    // The bundled six-layer MiniLM is not the one-layer model's architecture.
    let bundle = common::root().join("data/all-MiniLM-L6-v2");
    let bad = dir.join("bad.txt");
    std::fs::write(
        &bad,
        format!("{} init={}\n", d.join("mid").display(), bundle.display()),
    )
    .unwrap();
    let out2 = dir.join("out2");
    assert_bad(
        &[
            "study",
            "--models",
            bad.to_str().unwrap(),
            "--out",
            out2.to_str().unwrap(),
        ],
        &["the initialisation is not the model's architecture: layers 6 (the model's: 1)"],
    );
    assert!(!out2.exists(), "nothing written");
}

/// `study --init MODEL` gives every model its initialisation, except a
/// `--models` line with its own `init=`, which wins: the MODEL argument
/// `mid` measured from `init` states exactly the measures the shared study
/// states for `mid` (whose step-0 default is the same `init`), and the
/// line `trained init=mid` is measured from `mid`.
#[test]
fn study_init_applies_to_every_model_and_a_lines_own_init_wins() {
    let (d, _) = family();
    let dir = scratch("init-flag");
    let list = d.join("init-flag.txt");
    std::fs::write(&list, "trained init=mid\n").unwrap();
    let out = dir.join("out");
    let o = run(&[
        "study",
        d.join("mid").to_str().unwrap(),
        "--models",
        list.to_str().unwrap(),
        "--init",
        d.join("init").to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let shared = &study().0;
    let mid = cert(&out, "mid");
    assert_eq!(
        mid.init_model.as_ref().unwrap().files,
        cert(shared, "init").model.files
    );
    let by_default = cert(shared, "mid");
    assert_eq!(mid.measures, by_default.measures);
    assert_eq!(mid.raw_weights, by_default.raw_weights);
    let trained = cert(&out, "trained");
    assert_eq!(
        trained.init_model.as_ref().unwrap().files,
        cert(shared, "mid").model.files
    );
    assert!(trained.measures.unwrap().frobenius_distance.is_some());
}

/// Regression: CSV cells could read `-0` (a negative zero end). The one
/// CSV number formatter writes zero as `0` whatever its sign, and no table
/// of a trajectory study holds a `-0` cell.
#[test]
fn csvs_never_write_minus_zero() {
    use specbound::report::csv::num;
    assert_eq!(num(-0.0), "0");
    assert_eq!(num(0.0), "0");
    assert_eq!(num(-1.5), "-1.5");
    assert_eq!(num(-1e-300), "-1e-300");
    let (out, _) = study();
    for e in std::fs::read_dir(out.join("tables")).unwrap() {
        let p = e.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap();
        for (i, line) in text.lines().enumerate() {
            for cell in line.split(',') {
                let negative_zero = cell
                    .strip_prefix('-')
                    .and_then(|m| m.parse::<f64>().ok())
                    .is_some_and(|v| v == 0.0);
                assert!(!negative_zero, "{}:{}: {line}", p.display(), i + 1);
            }
        }
    }
}
