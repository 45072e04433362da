//! Hostile input, round three (issue 18), the output classes: links planted
//! at the fixed output names inside a directory the user named never
//! redirect a write or a removal outside it, and outputs of one command
//! that cannot coexist are found before anything is written. Each test is
//! named after the failure it pins.
#![cfg(unix)]

mod common;

use common::{code, text};

use common::{bundled, tmpdir};

use common::run;
use specbound::io::output::{OutputError, Outputs};
use std::os::unix::fs::symlink;
use std::path::Path;

/// Every entry under `d`, recursively, links shown as `name -> target`.
fn tree(d: &Path) -> Vec<String> {
    let mut v = Vec::new();
    fn walk(base: &Path, d: &Path, v: &mut Vec<String>) {
        let mut es: Vec<_> = std::fs::read_dir(d).unwrap().map(|e| e.unwrap()).collect();
        es.sort_by_key(|e| e.file_name());
        for e in es {
            let p = e.path();
            let rel = p.strip_prefix(base).unwrap().display().to_string();
            let ft = std::fs::symlink_metadata(&p).unwrap().file_type();
            if ft.is_symlink() {
                v.push(format!(
                    "{rel} -> {}",
                    std::fs::read_link(&p).unwrap().display()
                ));
            } else if ft.is_dir() {
                v.push(format!("{rel}/"));
                walk(base, &p, v);
            } else {
                v.push(rel);
            }
        }
    }
    walk(d, d, &mut v);
    v
}

#[test]
fn outputs_of_one_run_that_cannot_coexist_were_found_after_four_renames() {
    let d = tmpdir("conflicts");
    let x = d.join("X");
    type Build = fn(&Path) -> Outputs;
    let cases: Vec<(&str, Build)> = vec![
        // The reported case: `certify --out X --csv X`.
        ("file is a created directory", |x| {
            let mut o = Outputs::new();
            o.create_dir(x);
            for n in ["a.csv", "b.csv", "c.csv", "d.csv"] {
                o.stage(x.join(n), "t");
            }
            o.stage(x, "{}");
            o
        }),
        // Variants: a file inside another staged file; a staged file that is
        // the directory of another; a directory created below a file.
        ("file inside a file", |x| {
            let mut o = Outputs::new();
            o.stage(x, "1");
            o.create_dir(x);
            o.stage(x.join("y"), "2");
            o
        }),
        ("file is another's directory, staged first", |x| {
            let mut o = Outputs::new();
            o.stage(x, "1");
            o.stage(x.join("deeper/y"), "2");
            o.create_dir(x.join("deeper"));
            o
        }),
        ("directory created below a file", |x| {
            let mut o = Outputs::new();
            o.create_dir(x.join("sub/dir"));
            o.stage(x.join("sub"), "1");
            o
        }),
    ];
    for (what, build) in cases {
        let o = build(&x);
        let err = o.check().unwrap_err();
        assert!(
            matches!(err, OutputError::Conflict { .. }),
            "{what}: check: {err}"
        );
        let err = build(&x).commit().unwrap_err();
        assert!(
            matches!(err, OutputError::Conflict { .. }),
            "{what}: commit: {err}"
        );
        assert!(
            tree(&d).is_empty(),
            "{what}: nothing written: {:?}",
            tree(&d)
        );
    }
    // The same path twice stays a Duplicate; distinct outputs still commit.
    let err = Outputs::new()
        .stage(d.join("x"), "1")
        .stage(d.join("x"), "2")
        .commit()
        .unwrap_err();
    assert!(matches!(err, OutputError::Duplicate { .. }), "{err}");
    Outputs::new()
        .create_dir(d.join("csv"))
        .stage(d.join("csv/a.csv"), "a")
        .stage(d.join("x.json"), "x")
        .commit()
        .unwrap();
    assert_eq!(tree(&d), ["csv/", "csv/a.csv", "x.json"]);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn certify_out_x_csv_x_failed_after_four_renames() {
    let d = tmpdir("certify-x-x");
    let x = d.join("X");
    let out = run(&[
        "certify",
        "--out",
        x.to_str().unwrap(),
        "--csv",
        x.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("X"), "{err}");
    assert!(tree(&d).is_empty(), "nothing written: {:?}", tree(&d));
    // The same with X an existing directory.
    std::fs::create_dir(&x).unwrap();
    let out = run(&[
        "certify",
        "--out",
        x.to_str().unwrap(),
        "--csv",
        x.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 2, "{}", text(&out));
    assert_eq!(tree(&d), ["X/"]);
    let _ = std::fs::remove_dir_all(&d);
}

/// `study --out DIR` with links planted at the fixed names, pointing to
/// victims outside DIR: each output replaces its link, the victims keep
/// their contents.
#[test]
fn study_links_at_fixed_output_names_redirected_writes_outside_dir() {
    let d = tmpdir("study-links");
    let out = d.join("out");
    let elsewhere = d.join("elsewhere");
    std::fs::create_dir_all(out.join("certificates")).unwrap();
    std::fs::create_dir_all(out.join("tables")).unwrap();
    std::fs::create_dir_all(out.join("figures")).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let names = [
        "certificates/all-MiniLM-L6-v2.json",
        "report.html",
        "tables/matrix_summary.csv",
        "tables/observed_bounds.csv",
        "figures/fig1_spectral_decay.svg",
        // Skipped by a one-model study: its removal must not follow the link.
        "figures/fig2_bound_vs_width.svg",
    ];
    for (i, n) in names.iter().enumerate() {
        let victim = elsewhere.join(format!("victim{i}"));
        std::fs::write(&victim, format!("precious {i}")).unwrap();
        symlink(&victim, out.join(n)).unwrap();
    }
    let r = run(&[
        "study",
        "--out",
        out.to_str().unwrap(),
        bundled().to_str().unwrap(),
    ]);
    assert_eq!(code(&r), 0, "{}", text(&r));
    for (i, n) in names.iter().enumerate() {
        assert_eq!(
            std::fs::read_to_string(elsewhere.join(format!("victim{i}"))).unwrap(),
            format!("precious {i}"),
            "{n}: written through"
        );
    }
    for n in &names[..5] {
        let m = std::fs::symlink_metadata(out.join(n)).unwrap();
        assert!(m.is_file(), "{n}: the output replaces the link itself");
    }
    // The skipped figure's link is left alone (not deleted, not followed).
    assert!(std::fs::symlink_metadata(out.join(names[5]))
        .unwrap()
        .file_type()
        .is_symlink());
    let verify = run(&["verify", out.join(names[0]).to_str().unwrap()]);
    assert_eq!(code(&verify), 0, "{}", text(&verify));
    let _ = std::fs::remove_dir_all(&d);
}

/// `DIR/figures` (and `DIR/certificates`, `DIR/tables`) as a link to a
/// folder outside DIR: refused before anything is written, and nothing in
/// that folder is removed or written.
#[test]
fn study_figures_link_to_another_folder_redirected_writes_and_removals() {
    let d = tmpdir("study-dir-links");
    for sub in ["figures", "certificates", "tables"] {
        let out = d.join(format!("out-{sub}"));
        let other = d.join(format!("other-{sub}"));
        std::fs::create_dir_all(&out).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        // A file a skipped figure's removal would delete through the link.
        std::fs::write(other.join("fig2_bound_vs_width.svg"), "keep").unwrap();
        std::fs::write(other.join("all-MiniLM-L6-v2.json"), "keep").unwrap();
        symlink(&other, out.join(sub)).unwrap();
        let before = tree(&other);
        let r = run(&[
            "study",
            "--out",
            out.to_str().unwrap(),
            bundled().to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(code(&r), 2, "{sub}: {}", text(&r));
        assert!(err.contains(sub) && err.contains("link"), "{sub}: {err}");
        assert_eq!(tree(&other), before, "{sub}: the other folder is untouched");
        assert_eq!(tree(&out), [format!("{sub} -> {}", other.display())]);
    }
    // A link that stays inside DIR is followed.
    let out = d.join("out-inside");
    std::fs::create_dir_all(out.join("real-figures")).unwrap();
    symlink("real-figures", out.join("figures")).unwrap();
    let r = run(&[
        "study",
        "--out",
        out.to_str().unwrap(),
        bundled().to_str().unwrap(),
    ]);
    assert_eq!(code(&r), 0, "{}", text(&r));
    assert!(out.join("real-figures/fig1_spectral_decay.svg").is_file());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn certify_csv_dir_links_at_table_names_redirected_writes() {
    let d = tmpdir("csv-links");
    let csv = d.join("csv");
    std::fs::create_dir_all(&csv).unwrap();
    let victim = d.join("victim");
    std::fs::write(&victim, "precious").unwrap();
    symlink(&victim, csv.join("schatten_opt.csv")).unwrap();
    let r = run(&["certify", "--csv", csv.to_str().unwrap()]);
    assert_eq!(code(&r), 0, "{}", text(&r));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert!(std::fs::symlink_metadata(csv.join("schatten_opt.csv"))
        .unwrap()
        .is_file());
    let _ = std::fs::remove_dir_all(&d);
}
