//! The hostile-input tests' shared pieces: the check of one refused run
//! (exit 2, one line, bounded memory and time), the report of a class's
//! failures, and small models built from exact matrices.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use specbound::matrix::DenseMatrix;

/// A path as a command-line argument.
pub fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

/// What a refused run must show: its exit code, one line on stderr holding
/// every needle (and `once` exactly once: a cause not repeated), nothing on
/// stdout, and at most `max_mib` of peak memory.
pub struct Refusal<'a> {
    pub code: i32,
    pub needles: &'a [&'a str],
    pub once: Option<&'a str>,
    pub max_mib: Option<u64>,
}

/// The ways the run `o` misses `want` (empty when it held), and the one
/// failure line of case `case` when there is any: the one check of every
/// hostile-input class.
pub fn misses(case: &str, o: &super::Outcome, want: &Refusal<'_>) -> Option<String> {
    let err = o.stderr.trim_end();
    let mut why = Vec::new();
    if o.code != Some(want.code) {
        why.push(format!("exit {:?}, expected {}", o.code, want.code));
    }
    if err.lines().count() != 1 {
        why.push("message is not one line".to_string());
    }
    if err.contains("panicked") {
        why.push("panicked".to_string());
    }
    if !o.stdout.is_empty() {
        why.push("output on stdout".to_string());
    }
    for n in want.needles {
        if !err.contains(n) {
            why.push(format!("'{n}' missing"));
        }
    }
    if let Some(once) = want.once {
        let k = err.matches(once).count();
        if k != 1 {
            why.push(format!("'{once}' occurs {k} times"));
        }
    }
    if let Some(mib) = want.max_mib.filter(|&mib| o.max_rss_kib > mib * 1024) {
        why.push(format!(
            "peak memory {} MiB exceeds {mib} MiB",
            o.max_rss_kib / 1024
        ));
    }
    if why.is_empty() {
        return None;
    }
    let shown: String = err.chars().take(400).collect();
    Some(format!("{case}: {}; stderr: {shown}", why.join(", ")))
}

/// Runs the binary with `args`; expects exit 2, one line holding every
/// needle, nothing on stdout, at most `max_mib` of peak memory and `max_s`
/// seconds ([`misses`]). Returns the failures (empty when it held).
pub fn refused(
    case: &str,
    args: &[String],
    needles: &[&str],
    max_mib: u64,
    max_s: u64,
) -> Vec<String> {
    let mut cmd = super::bin();
    cmd.args(args);
    let t = Instant::now();
    let o = super::run_measured(cmd, Duration::from_secs(120));
    let took = t.elapsed();
    let want = Refusal {
        code: 2,
        needles,
        once: None,
        max_mib: Some(max_mib),
    };
    let mut failures: Vec<String> = misses(case, &o, &want).into_iter().collect();
    if took > Duration::from_secs(max_s) {
        failures.push(format!("{case}: took {took:?}, over {max_s} s"));
    }
    failures
}

/// Fails with every failure of a class, one a line.
pub fn assert_none(failures: Vec<String>) {
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// A small exact matrix (multiples of 1/8) that differs with `seed`.
pub fn mat(rows: usize, cols: usize, seed: usize) -> DenseMatrix {
    DenseMatrix {
        rows,
        cols,
        data: (0..rows * cols)
            .map(|k| ((k * 7 + seed * 3) % 11) as f64 / 8.0 - 0.625)
            .collect(),
    }
}

/// `model.safetensors` (float32) and `config.json` in `dir`; returns `dir`
/// as an argument.
pub fn write_model(dir: &Path, tensors: &[(String, DenseMatrix)], cfg: &Value) -> String {
    let refs: Vec<(String, &DenseMatrix)> = tensors.iter().map(|(n, m)| (n.clone(), m)).collect();
    super::write_safetensors(&dir.join("model.safetensors"), &refs, "F32");
    std::fs::write(dir.join("config.json"), serde_json::to_vec(cfg).unwrap()).unwrap();
    s(dir)
}
