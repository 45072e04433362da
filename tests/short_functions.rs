//! No function in `src/` or `python/src/` is longer than [`MAX_LINES`]
//! lines (issue 34's house rule: a function fits a screen, or two), data
//! tables excepted, each listed in [`TABLES`] with its reason.
//!
//! Lines are counted from the line of `fn` to the line of the body's
//! closing brace, on the source with comments and string and character
//! literals blanked (so a brace in a message or a doc comment counts for
//! nothing); a nested function counts in its own right and in its parent.

mod common;

use std::path::{Path, PathBuf};

/// The longest function allowed.
const MAX_LINES: usize = 100;

/// Functions allowed to be longer because they are data tables:
/// `(file under the repository root, function, why)`. None today.
const TABLES: &[(&str, &str, &str)] = &[];

/// `src` with comments, string literals (raw ones included) and character
/// literals replaced by spaces, newlines kept, so lines still count.
fn blank_literals(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to.min(b.len())] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        let next = if b[i..].starts_with(b"//") {
            b[i..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |p| i + p)
        } else if b[i..].starts_with(b"/*") {
            block_comment_end(b, i)
        } else if let Some(end) = raw_string_end(b, i) {
            end
        } else if b[i] == b'"' {
            string_end(b, i)
        } else if let Some(end) = char_literal_end(b, i) {
            end
        } else {
            i += 1;
            continue;
        };
        blank(&mut out, i, next);
        i = next;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The end (exclusive) of the nested block comment starting at `i`.
fn block_comment_end(b: &[u8], mut i: usize) -> usize {
    let mut depth = 0;
    while i < b.len() {
        if b[i..].starts_with(b"/*") {
            depth += 1;
            i += 2;
        } else if b[i..].starts_with(b"*/") {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    b.len()
}

/// The end of a raw string literal (`r"…"`, `r#"…"#`, `br"…"`) starting at `i`.
fn raw_string_end(b: &[u8], i: usize) -> Option<usize> {
    let ident_before = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
    let start = if b[i..].starts_with(b"br") {
        i + 2
    } else {
        i + 1
    };
    if ident_before || !(b[i] == b'r' || b[i..].starts_with(b"br")) {
        return None;
    }
    let hashes = b[start..].iter().take_while(|&&c| c == b'#').count();
    if b.get(start + hashes) != Some(&b'"') {
        return None;
    }
    let mut close = vec![b'"'];
    close.extend(std::iter::repeat_n(b'#', hashes));
    let body = start + hashes + 1;
    Some(
        b[body..]
            .windows(close.len())
            .position(|w| w == close.as_slice())
            .map_or(b.len(), |p| body + p + close.len()),
    )
}

/// The end of the string literal whose opening quote is at `i`.
fn string_end(b: &[u8], mut i: usize) -> usize {
    i += 1;
    while i < b.len() && b[i] != b'"' {
        i += if b[i] == b'\\' { 2 } else { 1 };
    }
    (i + 1).min(b.len())
}

/// The end of a character literal at `i` (`'x'`, `'\n'`, `'\u{7b}'`);
/// `None` for a lifetime or label (`'a`).
fn char_literal_end(b: &[u8], i: usize) -> Option<usize> {
    if b[i] != b'\'' {
        return None;
    }
    if b.get(i + 1) == Some(&b'\\') {
        // The escaped character is at i + 2; the closing quote follows it.
        let from = (i + 3).min(b.len());
        let close = b[from..].iter().take(10).position(|&c| c == b'\'')?;
        return Some(from + close + 1);
    }
    let len = {
        // One character, possibly several bytes of UTF-8.
        let s = std::str::from_utf8(&b[i + 1..(i + 5).min(b.len())]).unwrap_or_else(|e| {
            std::str::from_utf8(&b[i + 1..i + 1 + e.valid_up_to()]).expect("valid prefix")
        });
        s.chars().next()?.len_utf8()
    };
    (b.get(i + 1 + len) == Some(&b'\'')).then_some(i + len + 2)
}

/// Every function with a body in `text`: `(name, first line, lines)`.
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let b = text.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(p) = text[at..].find("fn ") {
        let start = at + p;
        at = start + 3;
        let word_start =
            start == 0 || !(b[start - 1].is_ascii_alphanumeric() || b[start - 1] == b'_');
        let name: String = text[at..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !word_start || name.is_empty() {
            continue;
        }
        let Some(open) = text[at..].find(['{', ';']).map(|q| at + q) else {
            break;
        };
        if b[open] == b';' {
            continue;
        }
        let mut depth = 0usize;
        let close = (open..b.len())
            .find(|&k| {
                match b[k] {
                    b'{' => depth += 1,
                    b'}' => depth -= 1,
                    _ => {}
                }
                depth == 0
            })
            .unwrap_or(b.len() - 1);
        let line = |k: usize| text[..k].matches('\n').count() + 1;
        found.push((name, line(start), line(close) - line(start) + 1));
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn no_function_in_src_or_python_src_is_over_100_lines() {
    let root = common::root();
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("python/src"), &mut files);
    assert!(files.len() > 100, "found only {} files", files.len());
    let mut long = Vec::new();
    let mut counted = 0;
    for f in &files {
        let rel = f
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let text = blank_literals(&std::fs::read_to_string(f).unwrap());
        for (name, line, lines) in functions(&text) {
            counted += 1;
            let table = TABLES
                .iter()
                .any(|(file, func, _)| *file == rel && *func == name);
            if lines > MAX_LINES && !table {
                long.push(format!("{rel}:{line} {name}: {lines} lines"));
            }
        }
    }
    assert!(counted > 1000, "counted only {counted} functions");
    assert!(
        long.is_empty(),
        "functions over {MAX_LINES} lines (split them along their seams, or list a data table in TABLES):\n{}",
        long.join("\n")
    );
}

#[test]
fn the_counter_sees_through_comments_strings_and_char_literals() {
    let src = r##"
fn a() {
    let s = "}}}";
    let r = r#"{"#;
    let c = '{';
    let l: &'static str = "x";
    // }
    /* { /* } */ } */
    if true { 1 } else { 2 };
}
fn decl();
fn b() {}
"##;
    let f = functions(&blank_literals(src));
    assert_eq!(
        f,
        vec![("a".to_string(), 2, 9), ("b".to_string(), 12, 1)],
        "{f:?}"
    );
    // A function one line too long is found.
    let body = "    let x = 1;\n".repeat(MAX_LINES - 1);
    let long = format!("fn long() {{\n{body}}}\n");
    assert_eq!(functions(&blank_literals(&long))[0].2, MAX_LINES + 1);
}
