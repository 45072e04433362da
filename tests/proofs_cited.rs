//! Every lemma file cited in `src/` exists in `proofs/`, and every lemma file
//! in `proofs/` is cited somewhere in `src/` (a proof nobody relies on, or a
//! citation of a missing proof, both fail).

mod common;

use std::collections::BTreeSet;
use std::path::Path;

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn cited() -> BTreeSet<String> {
    let root = &common::root();
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    // src/proofs.rs brings every page into rustdoc: it cites nothing, and
    // would make every lemma look cited.
    files.retain(|f| f != &root.join("src/proofs.rs"));
    let mut set = BTreeSet::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let mut rest = text.as_str();
        while let Some(i) = rest.find("proofs/") {
            let tail = &rest[i..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || "/-_.".contains(c)))
                .unwrap_or(tail.len());
            let name = tail[..end].trim_end_matches('.');
            if name.ends_with(".md") {
                set.insert(name.to_string());
            }
            rest = &tail[7..];
        }
    }
    set
}

#[test]
fn every_cited_lemma_file_exists() {
    let root = &common::root();
    let set = cited();
    assert!(set.len() >= 10, "too few citations found: {set:?}");
    for c in &set {
        assert!(root.join(c).is_file(), "cited lemma file {c} is missing");
    }
}

#[test]
fn every_lemma_file_is_cited() {
    let root = &common::root();
    let set = cited();
    for e in std::fs::read_dir(root.join("proofs")).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if name == "README.md" || !name.ends_with(".md") {
            continue;
        }
        let rel = format!("proofs/{name}");
        assert!(set.contains(&rel), "{rel} is not cited by any code in src/");
    }
}

#[test]
fn every_lemma_file_has_the_required_sections() {
    let root = &common::root();
    for e in std::fs::read_dir(root.join("proofs")).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if name == "README.md" || name == "assumptions.md" || !name.ends_with(".md") {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        for sec in ["## Statement", "## Proof", "## Floating-point assumptions"] {
            assert!(text.contains(sec), "{name} lacks a '{sec}' section");
        }
    }
}
