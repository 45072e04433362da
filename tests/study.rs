//! `specbound study` and `specbound report` over a family of real-format
//! checkpoints made here (tests/common/family.rs): every table row, every
//! certified ratio checked exactly, resume after a kill, skipped figures,
//! refusals before any computation, and the report in headless Chromium.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{bin, family, run, target_tmpdir};
use rug::Rational;
use specbound::certificate::Certificate;
use specbound::report::figures::{FILE_NAMES, TITLES};

/// The family's model directories, built once per test process.
fn family_paths() -> &'static [PathBuf] {
    static F: OnceLock<Vec<PathBuf>> = OnceLock::new();
    F.get_or_init(|| {
        let dir = target_tmpdir("family");
        family::build(&dir, &common::root().join("data/all-MiniLM-L6-v2"))
    })
}

fn args_of<'a>(paths: &'a [PathBuf], extra: &[&'a str]) -> Vec<&'a str> {
    let mut v: Vec<&str> = vec!["study"];
    v.extend(paths.iter().map(|p| p.to_str().unwrap()));
    v.extend_from_slice(extra);
    v
}

/// One uninterrupted study over the whole family, run once and shared.
fn study() -> &'static (PathBuf, Output) {
    static S: OnceLock<(PathBuf, Output)> = OnceLock::new();
    S.get_or_init(|| {
        let out = target_tmpdir("full").join("out");
        let o = run(&args_of(family_paths(), &["--out", out.to_str().unwrap()]));
        assert!(
            o.status.success(),
            "study failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        (out, o)
    })
}

/// A CSV file as rows of named fields.
fn csv(path: &Path) -> Vec<BTreeMap<String, String>> {
    common::csv_rows(path)
}

fn f(row: &BTreeMap<String, String>, col: &str) -> f64 {
    row[col]
        .parse()
        .unwrap_or_else(|_| panic!("{col} = '{}' is not a number", row[col]))
}

fn q(x: f64) -> Rational {
    Rational::from_f64(x).expect("finite")
}

fn certificates(out: &Path) -> BTreeMap<String, Certificate> {
    family::MEMBERS
        .iter()
        .map(|id| {
            let c = Certificate::read(&out.join("certificates").join(format!("{id}.json")))
                .expect("a valid certificate per model");
            (id.to_string(), c)
        })
        .collect()
}

#[test]
fn study_over_the_family_writes_every_table_row_figure_and_the_report() {
    let (out, o) = study();
    let stderr = String::from_utf8_lossy(&o.stderr);
    for id in family::MEMBERS {
        assert!(
            stderr.contains(&format!("] {id}: certified in")),
            "no progress line for {id}: {stderr}"
        );
    }
    let certs = certificates(out);
    let t = out.join("tables");
    let lead = |row: &BTreeMap<String, String>| -> &Certificate {
        let c = &certs[&row["model_id"]];
        assert_eq!(row["hidden_size"], c.model.hidden.to_string());
        assert_eq!(row["num_hidden_layers"], c.model.layers.to_string());
        assert_eq!(row["num_heads"], c.model.heads.to_string());
        c
    };
    // matrix_summary and schatten_opt: one row per matrix, values as certified.
    for name in ["matrix_summary.csv", "schatten_opt.csv"] {
        let rows = csv(&t.join(name));
        let mut per: BTreeMap<String, usize> = BTreeMap::new();
        for r in &rows {
            let c = lead(r);
            let id = specbound::arch::MatrixId::from_columns(
                r["layer"].parse().unwrap(),
                r["head"].parse().unwrap(),
                specbound::arch::MatrixType::parse(&r["matrix_type"]).unwrap(),
            )
            .unwrap();
            let w = c.matrix(id).expect("row names a matrix of the model");
            if name == "matrix_summary.csv" {
                assert_eq!(f(r, "spectral_norm_lo"), w.spectral_norm.lo);
                assert_eq!(f(r, "spectral_norm_hi"), w.spectral_norm.hi);
                assert_eq!(f(r, "norm_21_hi"), w.norm_21.hi);
            } else {
                assert_eq!(f(r, "min_contribution_lo"), w.min_contribution.lo);
                assert_eq!(f(r, "min_contribution_hi"), w.min_contribution.hi);
            }
            *per.entry(r["model_id"].clone()).or_default() += 1;
        }
        for (id, c) in &certs {
            assert_eq!(per.get(id), Some(&c.matrices.len()), "{name}: rows of {id}");
        }
    }
    // observed_bounds: two rows per model.
    let rows = csv(&t.join("observed_bounds.csv"));
    assert_eq!(rows.len(), 2 * certs.len());
    for r in &rows {
        let c = lead(r);
        let b = match r["bound"].as_str() {
            "ours" => c.bounds.as_ref().unwrap().ours,
            "edelman" => c.bounds.as_ref().unwrap().edelman,
            other => panic!("bound {other}"),
        };
        assert_eq!((f(r, "value_lo"), f(r, "value_hi")), (b.lo, b.hi));
    }
    // p_contribution_raw: one row per matrix and grid point.
    let rows = csv(&t.join("p_contribution_raw.csv"));
    let want: usize = certs
        .values()
        .flat_map(|c| &c.matrices)
        .map(|w| w.contributions.len())
        .sum();
    assert_eq!(rows.len(), want);
    rows.iter().for_each(|r| {
        lead(r);
    });
    // singular_values: every value of every matrix, structural zeros included;
    // sigma_normalized encloses every quotient of the two certified intervals.
    let rows = csv(&t.join("singular_values.csv"));
    let want: usize = certs
        .values()
        .flat_map(|c| &c.matrices)
        .map(|w| w.min_dim())
        .sum();
    assert_eq!(rows.len(), want);
    type Row = BTreeMap<String, String>;
    let mut by_matrix: BTreeMap<(String, String, String, String), Vec<&Row>> = BTreeMap::new();
    for r in &rows {
        by_matrix
            .entry((
                r["model_id"].clone(),
                r["layer"].clone(),
                r["head"].clone(),
                r["matrix_type"].clone(),
            ))
            .or_default()
            .push(r);
    }
    for ((model, layer, head, kind), rs) in by_matrix {
        let c = &certs[&model];
        let id = specbound::arch::MatrixId::from_columns(
            layer.parse().unwrap(),
            head.parse().unwrap(),
            specbound::arch::MatrixType::parse(&kind).unwrap(),
        )
        .unwrap();
        let w = c.matrix(id).unwrap();
        assert_eq!(rs.len(), w.min_dim());
        let s1 = w.spectral_norm;
        for (i, r) in rs.iter().enumerate() {
            assert_eq!(r["rank_index"], (i + 1).to_string());
            let s = w.singular_value(i).unwrap();
            assert_eq!((f(r, "sigma_lo"), f(r, "sigma_hi")), (s.lo, s.hi));
            let (nlo, nhi) = (f(r, "sigma_normalized_lo"), f(r, "sigma_normalized_hi"));
            if i == 0 {
                assert_eq!((nlo, nhi), (1.0, 1.0));
            } else {
                // Every quotient u/v, u in sigma_i, v in sigma_1, clamped to [0, 1].
                let low = (q(s.lo) / q(s1.hi)).max(Rational::from(0));
                let high = (q(s.hi) / q(s1.lo)).min(Rational::from(1));
                assert!(
                    q(nlo) <= low && high <= q(nhi),
                    "{model} {id} sigma_{}: [{nlo:e}, {nhi:e}]",
                    i + 1
                );
            }
        }
    }
    // Figures and report.
    for (file, title) in FILE_NAMES.iter().zip(TITLES) {
        let svg = std::fs::read_to_string(out.join("figures").join(file)).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains(title), "{file}");
    }
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    for id in family::MEMBERS {
        assert!(page.contains(id), "{id} not in the report");
    }
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("7 models (7 certified now, 0 reused)"),
        "{stdout}"
    );
}

#[test]
fn every_ratio_interval_contains_the_ratio_of_the_float64_values() {
    let (out, _) = study();
    let certs = certificates(out);
    let values: BTreeMap<(String, String), f64> = csv(&out.join("tables/observed_bounds.csv"))
        .iter()
        .map(|r| ((r["model_id"].clone(), r["bound"].clone()), f(r, "value")))
        .collect();
    let rows = csv(&out.join("tables/scaling.csv"));
    assert_eq!(
        rows.len(),
        4 * certs.len(),
        "two bounds x two axes per model"
    );
    let mut checked = 0;
    for r in &rows {
        let (m, a, b) = (&r["model_id"], &r["anchor_model_id"], &r["bound"]);
        let (cm, ca) = (&certs[m], &certs[a]);
        // The anchor: the narrowest of equal depth / the shallowest of equal width.
        let key = |c: &Certificate| match r["axis"].as_str() {
            "hidden_size" => (c.model.hidden, c.model.layers),
            "num_hidden_layers" => (c.model.layers, c.model.hidden),
            other => panic!("axis {other}"),
        };
        assert_eq!(key(ca).1, key(cm).1, "{m}: anchor {a} not in its group");
        let least = certs
            .values()
            .filter(|c| key(c).1 == key(cm).1)
            .map(|c| key(c).0)
            .min()
            .unwrap();
        assert_eq!(key(ca).0, least, "{m}: anchor {a} is not the least");
        assert_eq!(r["x"], key(cm).0.to_string());
        let (lo, hi) = (q(f(r, "ratio_lo")), q(f(r, "ratio_hi")));
        // The ratio of the two float64 values (exactly, as a rational).
        let fr = q(values[&(m.clone(), b.clone())]) / q(values[&(a.clone(), b.clone())]);
        assert!(
            lo <= fr && fr <= hi,
            "{m}/{a} {b}: {fr} not in the ratio interval"
        );
        // And every quotient of the certified intervals, hence the exact ratio.
        let get = |c: &Certificate| {
            if b == "ours" {
                c.bounds.as_ref().unwrap().ours
            } else {
                c.bounds.as_ref().unwrap().edelman
            }
        };
        let (x, y) = (get(cm), get(ca));
        if m == a {
            assert_eq!((f(r, "ratio_lo"), f(r, "ratio_hi")), (1.0, 1.0));
        } else {
            assert!(
                lo <= q(x.lo) / q(y.hi) && q(x.hi) / q(y.lo) <= hi,
                "{m}/{a} {b}"
            );
        }
        checked += 1;
    }
    assert_eq!(checked, 28);
}

/// `(inode, modification time, bytes)` of a file.
/// `audit` reads the study's `singular_values.csv` back: every `sigma` of
/// the audited model's matrices (structural zeros included) is a stated
/// interval containing the certified one (exit 0), the other models' rows
/// are counted as theirs, and a moved interval is inconsistent (exit 1).
#[test]
fn audit_reads_the_study_singular_values_table_back() {
    let (out, _) = study();
    let table = out.join("tables/singular_values.csv");
    let (id, model) = (family::MEMBERS[4], &family_paths()[4]);
    let rows = csv(&table);
    let mine = rows.iter().filter(|r| r["model_id"] == id).count();
    assert!(mine > 0 && mine < rows.len());
    let audit = |claims: &Path| {
        run(&[
            "audit",
            model.to_str().unwrap(),
            claims.to_str().unwrap(),
            "--model-id",
            id,
            "--json",
        ])
    };
    let o = audit(&table);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["layout"], "singular_values");
    assert_eq!(j["consistent"].as_u64(), Some(mine as u64));
    assert_eq!(
        (j["inconsistent"].as_u64(), j["undecided"].as_u64()),
        (Some(0), Some(0))
    );
    // sigma_1 of the model's first matrix stated at twice its upper end.
    let text = std::fs::read_to_string(&table).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let header: Vec<String> = lines[0].split(',').map(String::from).collect();
    let at = |n: &str| header.iter().position(|h| h == n).unwrap();
    let k = 1 + rows.iter().position(|r| r["model_id"] == id).unwrap();
    let mut cells: Vec<String> = lines[k].split(',').map(String::from).collect();
    let moved = (cells[at("sigma_hi")].parse::<f64>().unwrap() * 2.0).to_string();
    for c in ["sigma", "sigma_lo", "sigma_hi"] {
        cells[at(c)] = moved.clone();
    }
    lines[k] = cells.join(",");
    let bad = target_tmpdir("audit-sv").join("moved.csv");
    std::fs::write(&bad, lines.join("\n") + "\n").unwrap();
    let o = audit(&bad);
    assert_eq!(o.status.code(), Some(1));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["inconsistent"], 1);
}

fn stamp(p: &Path) -> (u64, std::time::SystemTime, Vec<u8>) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(p).unwrap();
    (m.ino(), m.modified().unwrap(), std::fs::read(p).unwrap())
}

#[test]
fn resume_after_a_kill_reuses_finished_certificates() {
    let out = target_tmpdir("resume").join("out");
    let mut child = bin()
        .args(args_of(family_paths(), &["--out", out.to_str().unwrap()]))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let certs = out.join("certificates");
    let t = Instant::now();
    let (finished, timed_out) = loop {
        let done: Vec<PathBuf> = std::fs::read_dir(&certs)
            .map(|d| {
                d.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "json"))
                    .collect()
            })
            .unwrap_or_default();
        let timed_out = t.elapsed() > Duration::from_secs(120);
        if !done.is_empty() || timed_out {
            break (done, timed_out);
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let exited = matches!(child.try_wait(), Ok(Some(_)));
    let _ = child.kill(); // SIGKILL
    let _ = child.wait();
    assert!(!timed_out, "no certificate appeared");
    assert!(!exited, "the study finished before it could be killed");
    // Certificates are renamed into place whole: what is there is complete.
    let finished: Vec<PathBuf> = std::fs::read_dir(&certs)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect::<Vec<_>>()
        .into_iter()
        .chain(finished)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert!(!finished.is_empty() && finished.len() < family::MEMBERS.len());
    let before: Vec<_> = finished.iter().map(|p| stamp(p)).collect();
    for p in &finished {
        Certificate::read(p).expect("a finished certificate is complete and valid");
    }
    assert!(
        !out.join("report.html").exists(),
        "no report from a killed run"
    );
    let o = run(&args_of(family_paths(), &["--out", out.to_str().unwrap()]));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    for (p, b) in finished.iter().zip(&before) {
        let id = p.file_stem().unwrap().to_str().unwrap();
        assert!(
            err.contains(&format!("] {id}: reused")),
            "{id} was not reused: {err}"
        );
        assert!(&stamp(p) == b, "{id}: the reused certificate was rewritten");
    }
    assert_eq!(
        err.matches(": reused ").count(),
        finished.len(),
        "only finished models are reused: {err}"
    );
    // The resumed study writes what an uninterrupted one writes.
    let (full, _) = study();
    for name in specbound::report::tables::STUDY_TABLE_NAMES {
        assert!(
            std::fs::read(out.join("tables").join(name)).unwrap()
                == std::fs::read(full.join("tables").join(name)).unwrap(),
            "{name} differs after resuming"
        );
    }
    assert!(
        std::fs::read(out.join("report.html")).unwrap()
            == std::fs::read(full.join("report.html")).unwrap()
    );
}

#[test]
fn changed_parameters_or_weights_are_certified_again() {
    let dir = target_tmpdir("changed");
    // A private copy of one model whose weights we change.
    let src = &family_paths()[0];
    let model = dir.join("bert-L2-H128");
    std::fs::create_dir_all(&model).unwrap();
    for f in ["config.json", "model.safetensors"] {
        std::fs::copy(src.join(f), model.join(f)).unwrap();
    }
    let out = dir.join("out");
    let args = |extra: &[&str]| {
        let mut v = vec![
            "study",
            model.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ];
        v.extend_from_slice(extra);
        run(&v)
    };
    let first = args(&[]);
    assert!(first.status.success());
    let again = args(&[]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("bert-L2-H128: reused"));
    let other = args(&["--l-phi", "1.2"]);
    let err = String::from_utf8_lossy(&other.stderr);
    assert!(
        err.contains("certified in")
            && err.contains("not reused: L_phi differs (1.13 there, 1.2 now)"),
        "{err}"
    );
    // Change one weight (the last byte of the data section).
    let st = model.join("model.safetensors");
    let mut bytes = std::fs::read(&st).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&st, bytes).unwrap();
    let changed = args(&["--l-phi", "1.2"]);
    let err = String::from_utf8_lossy(&changed.stderr);
    assert!(
        err.contains("not reused: the model's files differ (SHA-256)"),
        "{err}"
    );
}

#[test]
fn a_figure_without_its_data_is_skipped_with_the_reason() {
    let out = target_tmpdir("skipped").join("out");
    let one = &family_paths()[..1];
    // An earlier run's figure that this run cannot draw must not stay behind.
    std::fs::create_dir_all(out.join("figures")).unwrap();
    std::fs::write(out.join("figures").join(FILE_NAMES[1]), "<svg/>").unwrap();
    let o = run(&args_of(one, &["--out", out.to_str().unwrap(), "--quiet"]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stderr.is_empty(), "--quiet prints no progress");
    let stdout = String::from_utf8_lossy(&o.stdout);
    for n in [2, 3] {
        assert!(
            stdout.contains(&format!("figure {n} skipped: no two models share a")),
            "{stdout}"
        );
    }
    assert!(stdout.contains("figure 4 skipped: the models of the smallest depth (L = 2: bert-L2-H128) have one width only"));
    for (i, file) in FILE_NAMES.iter().enumerate() {
        let drawn = i == 0 || i == 4;
        assert_eq!(out.join("figures").join(file).exists(), drawn, "{file}");
    }
    assert!(stdout.contains("removed"), "{stdout}");
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert_eq!(page.matches("Not drawn: skipped:").count(), 3);
}

#[test]
fn bad_input_is_refused_before_any_computation_and_writes_nothing() {
    let dir = target_tmpdir("bad");
    let out = dir.join("out");
    let list = dir.join("models.txt");
    let fam = family_paths();
    std::fs::write(
        &list,
        format!(
            "# the family\n{}\n\n  # indented comment\n{}\nno-such-model\n",
            fam[0].display(),
            fam[1].display()
        ),
    )
    .unwrap();
    let o = out.to_str().unwrap();
    let l = list.to_str().unwrap();
    common::assert_bad(&["study", "--models", l, "--out", o], &["no-such-model"]);
    assert!(!out.exists(), "nothing may be written");
    let f0 = fam[0].to_str().unwrap();
    let f1 = fam[1].to_str().unwrap();
    common::assert_bad(
        &["study", f0, f1, "--out", o, "--model-id", "a"],
        &["1 --model-id values for 2 models"],
    );
    common::assert_bad(
        &[
            "study",
            f0,
            f1,
            "--out",
            o,
            "--model-id",
            "a",
            "--model-id",
            "a",
        ],
        &["two models have the id 'a'"],
    );
    common::assert_bad(
        &["study", f0, "--out", o, "--model-id", "a,b"],
        &["model id 'a,b' is not usable"],
    );
    common::assert_bad(
        &["study", f0, "--out", o, "--primary", "nope"],
        &["--primary 'nope' is not the id of a model of this study"],
    );
    common::assert_bad(&["study", "--out", o], &["no model given"]);
    common::assert_bad(
        &["study", f0, "--out", o, "--spectrum-layers", "3-1"],
        &["invalid layer list '3-1'"],
    );
    assert!(!out.exists(), "nothing may be written");
    // An output directory that is a file.
    let file = dir.join("a-file");
    std::fs::write(&file, "x").unwrap();
    common::assert_bad(
        &["study", f0, "--out", file.to_str().unwrap()],
        &["a-file", "not a directory"],
    );
    // A models file: comments skipped, relative paths from the file's directory.
    let rel = fam[0].parent().unwrap().join("list.txt");
    std::fs::write(&rel, "# relative\nbert-L2-H128\n").unwrap();
    let o2 = run(&[
        "study",
        "--models",
        rel.to_str().unwrap(),
        "--out",
        o,
        "--quiet",
    ]);
    assert!(
        o2.status.success(),
        "{}",
        String::from_utf8_lossy(&o2.stderr)
    );
    assert!(out.join("certificates/bert-L2-H128.json").is_file());
}

#[test]
fn report_command_makes_the_same_page_from_the_certificates() {
    let (out, _) = study();
    let dir = target_tmpdir("report");
    let page = dir.join("page.html");
    let mut args: Vec<String> = vec!["report".into()];
    for id in family::MEMBERS {
        args.push(
            out.join("certificates")
                .join(format!("{id}.json"))
                .display()
                .to_string(),
        );
    }
    args.push("--out".into());
    args.push(page.display().to_string());
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = run(&a);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        std::fs::read(&page).unwrap() == std::fs::read(out.join("report.html")).unwrap(),
        "report from the certificates differs from the study's"
    );
    // A certificate that is not one: exit 2 naming it, no page.
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{}").unwrap();
    let page2 = dir.join("page2.html");
    common::assert_bad(
        &[
            "report",
            bad.to_str().unwrap(),
            "--out",
            page2.to_str().unwrap(),
        ],
        &["bad.json"],
    );
    assert!(!page2.exists());
}

// ---------------------------------------------------------------------------
// The report in a real browser.

/// The Chromium binary, if installed (`scripts/setup --tests` installs Debian's
/// `chromium`). In CI (`CI` set) a missing browser fails the test.
fn chromium() -> Option<PathBuf> {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        if let Ok(o) = Command::new("sh")
            .args(["-c", &format!("command -v {name}")])
            .output()
        {
            let p = String::from_utf8_lossy(&o.stdout).trim().to_string();
            if o.status.success() && !p.is_empty() {
                return Some(PathBuf::from(p));
            }
        }
    }
    let why = "headless Chromium is not installed (run ./scripts/setup --tests, which installs Debian's chromium)";
    if std::env::var_os("CI").is_some() {
        panic!("{why}");
    }
    eprintln!("SKIPPED (developer machine, CI not set): {why}");
    None
}

/// Runs Chromium headless on `url` with `action` (`--dump-dom` or
/// `--screenshot=...`), the network off, a fresh profile, and console
/// messages logged to stderr; kills it after 90 s.
fn chromium_run(browser: &Path, url: &str, action: &str) -> (String, String) {
    let profile = target_tmpdir(&format!("chromium-profile-{}", action.len()));
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            &format!("--user-data-dir={}", profile.display()),
            // Network off: every request goes to a closed local port, every
            // host name fails to resolve.
            "--proxy-server=http://127.0.0.1:9",
            "--proxy-bypass-list=<-loopback>",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            // Console messages (CSP violations included) to stderr.
            "--enable-logging=stderr",
            "--log-level=0",
            "--v=0",
            "--window-size=1280,3000",
            "--hide-scrollbars",
            action,
            url,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium starts");
    let (mut so, mut se) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut so, &mut s).ok();
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut se, &mut s).ok();
        s
    });
    let t = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if t.elapsed() > Duration::from_secs(90) {
            child.kill().ok();
            child.wait().ok();
            panic!("chromium did not finish in 90 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_dir_all(&profile);
    (out_t.join().unwrap(), err_t.join().unwrap())
}

/// Console messages Chromium logged for the page.
fn console_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.contains(":CONSOLE")).collect()
}

/// Every URL-bearing attribute or style reference of the DOM that points
/// outside the page (anything but `#fragment` links).
fn outside_references(dom: &str) -> Vec<String> {
    let attr = regex::Regex::new(
        r#"(?i)\s(src|href|xlink:href|srcset|poster|action|data|formaction|background|ping)\s*=\s*("[^"]*"|'[^']*'|[^\s>]+)"#,
    )
    .unwrap();
    let mut found: Vec<String> = attr
        .captures_iter(dom)
        .filter(|c| !c[2].trim_matches(['"', '\'']).starts_with('#'))
        .map(|c| c[0].trim().to_string())
        .collect();
    for needle in [
        "://", "url(", "@import", "<script", "<link", "<iframe", "<object", "<embed",
    ] {
        if dom.to_ascii_lowercase().contains(needle) {
            found.push(needle.to_string());
        }
    }
    found
}

#[test]
fn the_report_in_headless_chromium_offline() {
    let Some(browser) = chromium() else { return };
    let (out, _) = study();
    let page = std::fs::canonicalize(out.join("report.html")).unwrap();
    let url = format!("file://{}", page.display());

    // The page as the browser parsed it.
    let (dom, log) = chromium_run(&browser, &url, "--dump-dom");
    assert!(
        dom.contains("</html>"),
        "no DOM dumped; chromium said: {log}"
    );
    let console = console_lines(&log);
    assert!(console.is_empty(), "console messages: {console:#?}");
    for title in TITLES {
        assert!(
            dom.contains(title),
            "figure title '{title}' not on the page"
        );
    }
    for id in family::MEMBERS {
        assert!(dom.contains(id), "model id {id} not on the page");
    }
    assert_eq!(dom.matches("<svg").count(), 5, "five inline figures");
    let refs = outside_references(&dom);
    assert!(
        refs.is_empty(),
        "the page references outside itself: {refs:?}"
    );

    // A screenshot that is not blank.
    let shot = target_tmpdir("screenshot").join("report.png");
    let (_, log) = chromium_run(&browser, &url, &format!("--screenshot={}", shot.display()));
    assert!(console_lines(&log).is_empty(), "console messages: {log}");
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let bytes = &buf[..info.buffer_size()];
    let channels = info.color_type.samples();
    let px: Vec<&[u8]> = bytes.chunks(channels).collect();
    let mut counts: BTreeMap<&[u8], usize> = BTreeMap::new();
    for p in &px {
        *counts.entry(&p[..3.min(channels)]).or_default() += 1;
    }
    let background = counts.values().max().copied().unwrap();
    let ink = px.len() - background;
    let size = std::fs::metadata(&shot).unwrap().len();
    println!(
        "screenshot {}: {} x {} px, {size} bytes, {} colours, {:.1}% of pixels not background",
        shot.display(),
        info.width,
        info.height,
        counts.len(),
        100.0 * ink as f64 / px.len() as f64
    );
    assert!(counts.len() >= 50, "only {} colours: blank?", counts.len());
    assert!(
        ink * 50 >= px.len(),
        "less than 2% of the pixels are drawn: blank?"
    );
}

#[test]
fn the_browser_check_sees_a_page_that_loads_from_outside() {
    // The harness itself: an external image in a copy of the report must
    // show up both as a console message (the policy blocks it) and as an
    // outside reference, or the test above could not fail.
    let Some(browser) = chromium() else { return };
    let (out, _) = study();
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    let leaky = page.replacen(
        "<h1>",
        "<img src=\"http://example.invalid/x.png\" alt=\"\"><h1>",
        1,
    );
    let p = target_tmpdir("leaky").join("leaky.html");
    std::fs::write(&p, leaky).unwrap();
    let (dom, log) = chromium_run(&browser, &format!("file://{}", p.display()), "--dump-dom");
    assert!(
        !console_lines(&log).is_empty(),
        "the blocked load was not logged: {log}"
    );
    assert!(!outside_references(&dom).is_empty());
}

#[test]
fn an_inconclusive_model_is_reported_and_the_others_written() {
    // The smallest family member with every weight times 1e30: B_Edel
    // overflows binary64, so the certificate is inconclusive.
    let dir = target_tmpdir("inconclusive");
    let src = &family_paths()[0];
    let big = dir.join("huge");
    std::fs::create_dir_all(&big).unwrap();
    std::fs::copy(src.join("config.json"), big.join("config.json")).unwrap();
    let bytes = std::fs::read(src.join("model.safetensors")).unwrap();
    let n = 8 + u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut out = bytes[..n].to_vec();
    for c in bytes[n..].chunks(4) {
        let x = f32::from_le_bytes(c.try_into().unwrap()) * 1e30;
        out.extend_from_slice(&x.to_le_bytes());
    }
    std::fs::write(big.join("model.safetensors"), out).unwrap();
    let dest = dir.join("out");
    let o = run(&[
        "study",
        big.to_str().unwrap(),
        family_paths()[1].to_str().unwrap(),
        "--out",
        dest.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("[1/2] huge: inconclusive: B_Edel overflowed f64"),
        "{err}"
    );
    assert!(
        err.contains("specbound: 1 of 2 models inconclusive (huge: "),
        "{err}"
    );
    assert!(!dest.join("certificates/huge.json").exists());
    let rows = csv(&dest.join("tables/observed_bounds.csv"));
    assert!(rows.iter().all(|r| r["model_id"] == "bert-L2-H256") && rows.len() == 2);
    let page = std::fs::read_to_string(dest.join("report.html")).unwrap();
    assert!(page.contains("Not certified (inconclusive") && page.contains("<b>huge</b>"));
}

/// Regression: the report's measures table had 13 interval columns and ran
/// far past a 1280 px page. The tables are transposed (a row per measure,
/// a column per model, a few models per table); in headless Chromium at
/// 1280 px, every measures table ends inside the window and the page does
/// not scroll sideways. (A copy of the page without its policy runs a
/// script that writes the measurements into the DOM.)
#[test]
fn measures_table_fits_a_1280_px_page() {
    let Some(browser) = chromium() else { return };
    let (out, _) = study();
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        page.contains("<table class=\"measures\">"),
        "no measures table"
    );
    let start = page
        .find("<meta http-equiv=\"Content-Security-Policy\"")
        .unwrap();
    let end = start + page[start..].find('>').unwrap() + 1;
    let probe = "<script>(function(){var r=0;document.querySelectorAll('table.measures').forEach(function(t){\
r=Math.max(r,t.getBoundingClientRect().right)});document.body.setAttribute('data-measures-right',String(Math.ceil(r)));\
document.body.setAttribute('data-page-width',String(document.documentElement.scrollWidth));})();</script></body>";
    let copy = format!("{}{}", &page[..start], &page[end..]).replacen("</body>", probe, 1);
    let p = target_tmpdir("measures-width").join("report.html");
    std::fs::write(&p, copy).unwrap();
    let (dom, log) = chromium_run(&browser, &format!("file://{}", p.display()), "--dump-dom");
    let attr = |name: &str| -> f64 {
        let k = dom
            .find(&format!("{name}=\""))
            .unwrap_or_else(|| panic!("{name} not measured: {log}"));
        let rest = &dom[k + name.len() + 2..];
        rest[..rest.find('"').unwrap()].parse().unwrap()
    };
    let (right, width) = (attr("data-measures-right"), attr("data-page-width"));
    println!("measures tables end at {right} px; page width {width} px");
    assert!(
        right > 0.0 && right <= 1280.0,
        "measures table ends at {right} px"
    );
    assert!(width <= 1280.0, "the page is {width} px wide");
}

/// A screenshot's size, colour count and share of non-background pixels.
fn shot_stats(shot: &Path) -> (u32, u32, usize, f64) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let px: Vec<&[u8]> = buf[..info.buffer_size()].chunks(channels).collect();
    let mut counts: BTreeMap<&[u8], usize> = BTreeMap::new();
    for p in &px {
        *counts.entry(&p[..3.min(channels)]).or_default() += 1;
    }
    let background = counts.values().max().copied().unwrap();
    let ink = (px.len() - background) as f64 / px.len() as f64;
    (info.width, info.height, counts.len(), ink)
}

/// Figure 6 in the browser: a trajectory of the family's smallest member
/// (step 0, its own initialisation) and a copy with every weight times 1.1
/// (step 100). The report holds six inline figures and no console
/// message; figure 6 and the page render to screenshots that are not
/// blank (what they show was looked at by hand; see the figure's checks in
/// tests/figures.rs).
#[test]
fn figure_6_renders_in_headless_chromium() {
    let Some(browser) = chromium() else { return };
    let dir = target_tmpdir("trajectory-browser");
    let src = &family_paths()[0];
    let grown = dir.join("grown");
    std::fs::create_dir_all(&grown).unwrap();
    std::fs::copy(src.join("config.json"), grown.join("config.json")).unwrap();
    let bytes = std::fs::read(src.join("model.safetensors")).unwrap();
    let n = 8 + u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut body = bytes[..n].to_vec();
    for c in bytes[n..].chunks(4) {
        let x = f32::from_le_bytes(c.try_into().unwrap()) * 1.1;
        body.extend_from_slice(&x.to_le_bytes());
    }
    std::fs::write(grown.join("model.safetensors"), body).unwrap();
    let list = dir.join("models.txt");
    std::fs::write(
        &list,
        format!("{} step=0 run=r\ngrown step=100 run=r\n", src.display()),
    )
    .unwrap();
    let out = dir.join("out");
    let o = run(&[
        "study",
        "--models",
        list.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::canonicalize(out.join("report.html")).unwrap();
    let (dom, log) = chromium_run(
        &browser,
        &format!("file://{}", page.display()),
        "--dump-dom",
    );
    assert!(console_lines(&log).is_empty(), "console messages: {log}");
    assert!(dom.contains("Figure 6: Bounds and measures over training"));
    assert!(dom.contains("Difference from the first step: log-scale measures"));
    for (url, name) in [
        (
            format!(
                "file://{}",
                out.join("figures/fig6_trajectory.svg").display()
            ),
            "fig6.png",
        ),
        (format!("file://{}", page.display()), "page.png"),
    ] {
        let shot = dir.join(name);
        let (_, log) = chromium_run(&browser, &url, &format!("--screenshot={}", shot.display()));
        assert!(console_lines(&log).is_empty(), "console messages: {log}");
        let (w, h, colours, ink) = shot_stats(&shot);
        println!(
            "{name}: {w} x {h} px, {colours} colours, {:.1}% not background",
            100.0 * ink
        );
        assert!(
            colours >= 20 && ink >= 0.02,
            "{name}: blank? {colours} colours, {ink}"
        );
    }
}
