//! The layering of the crate, pinned: every module under `src/` imports
//! only modules at or below its own level of the pipeline, and no two
//! modules import each other, directly or through others, at any depth
//! (a parent module and its own children excepted: the parent is their
//! namespace). The fronts (`src/bin/`, `python/`) sit above everything and
//! are not checked here.
//!
//! The order (lib.rs, "Layering"): values -> io -> arch -> linalg ->
//! spectral -> bounds -> certificate -> certify -> report -> evidence ->
//! study -> cmd. A new top-level module must be given its level in
//! [`LEVELS`], which is the point: where it goes is a decision.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module and its level; a module may import modules of a
/// lower level, or of its own level when that makes no circle.
const LEVELS: &[(&str, usize)] = &[
    ("matrix", 0),
    ("enclosure", 0),
    // Documentation only (docs/guarantees.md in rustdoc).
    ("guarantees", 0),
    // The lemmas' pages (proofs/*.md in rustdoc), documentation only.
    ("proofs", 0),
    ("io", 1),
    ("arch", 2),
    ("progress", 2),
    ("linalg", 3),
    ("spectral", 4),
    ("bounds", 5),
    ("certificate", 6),
    ("certify", 7),
    ("report", 8),
    ("evidence", 9),
    ("study", 10),
    // Merging parts re-derives them as evidence first (evidence::verify::verify_part).
    ("merge", 10),
    ("cmd", 11),
];

type Module = Vec<String>;

fn src() -> PathBuf {
    common::root().join("src")
}

/// Every module file of the library (not the binary), with its module path.
fn modules() -> Vec<(Module, PathBuf)> {
    fn walk(dir: &Path, prefix: &[String], out: &mut Vec<(Module, PathBuf)>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if p.is_dir() {
                if prefix.is_empty() && name == "bin" {
                    continue;
                }
                let mut m = prefix.to_vec();
                m.push(name);
                walk(&p, &m, out);
            } else if let Some(stem) = name.strip_suffix(".rs") {
                let mut m = prefix.to_vec();
                if stem != "mod" && stem != "lib" {
                    m.push(stem.to_string());
                }
                out.push((m, p));
            }
        }
    }
    let mut out = Vec::new();
    walk(&src(), &[], &mut out);
    out
}

fn is_module(m: &[String]) -> bool {
    let base = src().join(m.join("/"));
    base.with_extension("rs").is_file() || base.join("mod.rs").is_file()
}

/// The deepest module named by `path` (a `crate::a::b::Item` names `a::b`
/// when that is a module, else `a`).
fn resolve(mut base: Module, path: &[String]) -> Module {
    for seg in path {
        let mut next = base.clone();
        next.push(seg.clone());
        if is_module(&next) {
            base = next;
        } else {
            break;
        }
    }
    base
}

/// The code of a file without comments and without its test module.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The modules a file's code refers to: `crate::...`, `$crate::...`,
/// `super::...` paths and `use crate::{...}` groups.
fn imports(m: &Module, is_mod_rs: bool, text: &str) -> BTreeSet<Module> {
    let ident = regex::Regex::new(r"^[a-z_][a-z0-9_]*").unwrap();
    let mut out = BTreeSet::new();
    let code = code(text);
    let bytes = code.as_str();
    let starts = regex::Regex::new(r"(\$?crate|(?:super::)+)(::)?").unwrap();
    for c in starts.captures_iter(bytes) {
        let whole = c.get(0).unwrap();
        // Only whole path starts (not `my_crate::` or `xsuper::`).
        if whole.start() > 0 {
            let prev = bytes.as_bytes()[whole.start() - 1];
            if prev.is_ascii_alphanumeric() || prev == b'_' {
                continue;
            }
        }
        let head = c.get(1).unwrap().as_str();
        let (base, rest) = if head.ends_with("crate") {
            if c.get(2).is_none() {
                continue;
            }
            (Vec::new(), &bytes[whole.end()..])
        } else {
            let ups = head.matches("super").count();
            // In `a/mod.rs` (module `a`), `super` is `a`'s parent; in
            // `a/b.rs` (module `a::b`) it is `a`.
            let _ = is_mod_rs;
            let keep = m.len().saturating_sub(ups);
            (m[..keep].to_vec(), &bytes[whole.end()..])
        };
        for path in use_paths(rest, &ident) {
            out.insert(resolve(base.clone(), &path));
        }
    }
    out
}

/// The paths at the start of `rest`: `a::b::...` or a group `{a::b, c, d::{e}}`
/// (first two segments of each member).
fn use_paths(rest: &str, ident: &regex::Regex) -> Vec<Vec<String>> {
    let rest = rest.trim_start();
    if let Some(group) = rest.strip_prefix('{') {
        let mut depth = 1;
        let mut end = group.len();
        for (i, ch) in group.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let inner = &group[..end];
        let mut members = Vec::new();
        let (mut depth, mut startm) = (0, 0);
        for (i, ch) in inner.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    members.push(&inner[startm..i]);
                    startm = i + 1;
                }
                _ => {}
            }
        }
        members.push(&inner[startm..]);
        return members
            .into_iter()
            .flat_map(|m| use_paths(m, ident))
            .collect();
    }
    let mut path = Vec::new();
    let mut s = rest;
    while let Some(m) = ident.find(s) {
        path.push(m.as_str().to_string());
        s = &s[m.end()..];
        match s.strip_prefix("::") {
            Some(t) if path.len() < 2 => {
                if t.trim_start().starts_with('{') {
                    let mut inner = use_paths(t, ident);
                    for p in &mut inner {
                        p.insert(0, path[0].clone());
                        p.truncate(2);
                    }
                    return inner;
                }
                s = t;
            }
            _ => break,
        }
    }
    if path.is_empty() {
        Vec::new()
    } else {
        vec![path]
    }
}

fn level(top: &str) -> usize {
    LEVELS
        .iter()
        .find(|(n, _)| *n == top)
        .map(|(_, l)| *l)
        .unwrap_or_else(|| panic!("module `{top}` has no level in tests/layering.rs: give it one"))
}

/// The import graph between modules (each file a node).
fn graph() -> BTreeMap<Module, BTreeSet<Module>> {
    let mut g = BTreeMap::new();
    for (m, path) in modules() {
        if m.is_empty() {
            continue; // lib.rs declares the modules.
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let is_mod_rs = path.file_name().unwrap() == "mod.rs";
        let deps: BTreeSet<Module> = imports(&m, is_mod_rs, &text)
            .into_iter()
            .filter(|d| !d.is_empty() && d != &m)
            .collect();
        g.insert(m, deps);
    }
    g
}

#[test]
fn no_module_imports_one_above_its_level() {
    let mut wrong = Vec::new();
    for (m, deps) in graph() {
        for d in deps {
            if level(&d[0]) > level(&m[0]) {
                wrong.push(format!(
                    "{} (level {}) imports {} (level {})",
                    m.join("::"),
                    level(&m[0]),
                    d.join("::"),
                    level(&d[0])
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "upward imports:\n{}", wrong.join("\n"));
}

/// A circle in `g` (a path back to its start), if any.
fn find_cycle(g: &BTreeMap<Module, BTreeSet<Module>>) -> Option<Vec<Module>> {
    fn dfs(
        n: &Module,
        g: &BTreeMap<Module, BTreeSet<Module>>,
        state: &mut BTreeMap<Module, u8>,
        stack: &mut Vec<Module>,
    ) -> Option<Vec<Module>> {
        state.insert(n.clone(), 1);
        stack.push(n.clone());
        for d in g.get(n).into_iter().flatten() {
            match state.get(d).copied().unwrap_or(0) {
                1 => {
                    let i = stack.iter().position(|x| x == d).unwrap();
                    let mut c = stack[i..].to_vec();
                    c.push(d.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = dfs(d, g, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.clone(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in g.keys() {
        if state.get(n).copied().unwrap_or(0) == 0 {
            let mut stack = Vec::new();
            if let Some(c) = dfs(n, g, &mut state, &mut stack) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn no_circle_between_modules_at_any_depth() {
    // Between top-level modules.
    let mut top: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (m, deps) in graph() {
        let e = top.entry(vec![m[0].clone()]).or_default();
        for d in deps {
            if d[0] != m[0] {
                e.insert(vec![d[0].clone()]);
            }
        }
    }
    if let Some(c) = find_cycle(&top) {
        panic!(
            "circle between top-level modules: {}",
            c.iter()
                .map(|m| m.join("::"))
                .collect::<Vec<_>>()
                .join(" -> ")
        );
    }
    // Between modules inside each, a parent and its own descendants excepted.
    let mut inner: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (m, deps) in graph() {
        let e = inner.entry(m.clone()).or_default();
        for d in deps {
            let related = d.starts_with(&m) || m.starts_with(&d);
            if d[0] == m[0] && !related {
                e.insert(d);
            }
        }
    }
    if let Some(c) = find_cycle(&inner) {
        panic!(
            "circle between modules: {}",
            c.iter()
                .map(|m| m.join("::"))
                .collect::<Vec<_>>()
                .join(" -> ")
        );
    }
}

/// The checker itself: a known upward import and a known circle are seen
/// (so that the two tests above cannot pass by reading nothing).
#[test]
fn the_checker_sees_imports_groups_and_super_paths() {
    let ident = regex::Regex::new(r"^[a-z_][a-z0-9_]*").unwrap();
    let m: Module = vec!["linalg".into(), "gram".into()];
    let deps = imports(
        &m,
        false,
        "use crate::{enclosure::Inconclusive, io::output::Outputs};\nuse super::dense::{self, x};\nfn f() { crate::report::fmt::interval(); }\n// crate::study::x\n",
    );
    let names: BTreeSet<String> = deps.iter().map(|d| d.join("::")).collect();
    assert!(names.contains("enclosure"), "{names:?}");
    assert!(names.contains("io::output"), "{names:?}");
    assert!(names.contains("linalg::dense"), "{names:?}");
    assert!(names.contains("report::fmt"), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("study")),
        "comments are not code: {names:?}"
    );
    assert_eq!(
        use_paths("a::{b, c}", &ident),
        vec![
            vec!["a".to_string(), "b".to_string()],
            vec!["a".into(), "c".into()]
        ]
    );
    // The real graph is read: certify imports linalg, cmd imports certify.
    let g = graph();
    assert!(g[&vec!["certify".to_string()]]
        .iter()
        .any(|d| d[0] == "linalg"));
    assert!(g[&vec!["cmd".to_string(), "certify".to_string()]]
        .iter()
        .any(|d| d[0] == "certify"));
    let mut cyc = BTreeMap::new();
    cyc.insert(
        vec!["a".to_string()],
        BTreeSet::from([vec!["b".to_string()]]),
    );
    cyc.insert(
        vec!["b".to_string()],
        BTreeSet::from([vec!["a".to_string()]]),
    );
    assert!(find_cycle(&cyc).is_some());
}
