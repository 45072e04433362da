//! The fuzz targets on stable Rust, for CI (`cargo fuzz` needs nightly, so
//! the targets in `fuzz/` are otherwise never built): every target's body
//! (`fuzz/bodies.rs`, the very code the cargo-fuzz targets run) over its
//! committed corpus (`fuzz/corpus/<target>/`, written by
//! `scripts/make_fuzz_corpus.py`) and a few thousand deterministic
//! mutations of it. No input may panic; the run is bounded in time and in
//! peak memory. A panicking input is written to
//! `target/fuzz-replay-failures/<target>-<n>` so that `cargo fuzz run
//! <target> <file>` reproduces it.

mod common;

use std::time::{Duration, Instant};

use common::{root, Rng};

// The targets' bodies (items `fuzz_*` and `FUZZ_TARGETS`).
include!("../fuzz/bodies.rs");

/// Mutations per target (and per target thread).
const MUTATIONS: usize = 3000;

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = root().join("fuzz/corpus").join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// One mutation of `base`: bit flips, byte runs overwritten with
/// interesting values, cuts, duplicated ranges, inserted bytes, splices
/// with another seed.
fn mutate(base: &[u8], other: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut b = base.to_vec();
    if b.is_empty() {
        b.push(0);
    }
    for _ in 0..1 + rng.below(3) {
        let n = b.len();
        match rng.below(7) {
            0 => {
                let i = rng.below(n);
                b[i] ^= 1 << rng.below(8);
            }
            1 => {
                let vals = [0u8, 0xff, 0x7f, 0x80, 1, b'0', b'"', b'{'];
                let i = rng.below(n);
                let j = (i + 1 + rng.below(8)).min(n);
                for x in &mut b[i..j] {
                    *x = vals[rng.below(vals.len())];
                }
            }
            2 => b.truncate(rng.below(n + 1).max(1)),
            3 => {
                let i = rng.below(n);
                let j = (i + 1 + rng.below(64)).min(n);
                let chunk = b[i..j].to_vec();
                let at = rng.below(n);
                b.splice(at..at, chunk);
            }
            4 => {
                let at = rng.below(n + 1);
                let v = (rng.next_u64() & 0xff) as u8;
                b.insert(at.min(b.len()), v);
            }
            5 if !other.is_empty() => {
                let i = rng.below(n);
                let j = rng.below(other.len());
                b.truncate(i);
                b.extend_from_slice(&other[j..]);
            }
            _ => {
                // A 64-bit little-endian length or count replaced.
                let i = rng.below(n);
                let v = [u64::MAX, 1 << 40, 1 << 31, 0, 65535][rng.below(5)];
                for (k, byte) in v.to_le_bytes().iter().enumerate() {
                    if let Some(x) = b.get_mut(i + k) {
                        *x = *byte;
                    }
                }
            }
        }
        if b.len() > 1 << 20 {
            b.truncate(1 << 20);
        }
    }
    b
}

/// Runs `body` on `input`; a panic is saved for cargo-fuzz and reported.
fn replay(target: &str, n: usize, body: FuzzBody, input: &[u8]) -> Option<String> {
    let ok = std::panic::catch_unwind(|| body(input)).is_ok();
    if ok {
        return None;
    }
    let dir = root().join("target/fuzz-replay-failures");
    let _ = std::fs::create_dir_all(&dir);
    let p = dir.join(format!("{target}-{n}"));
    let _ = std::fs::write(&p, input);
    Some(format!(
        "{target}: input {n} panics (saved as {})",
        p.display()
    ))
}

fn peak_rss_kib() -> i64 {
    // SAFETY: getrusage fills a plain struct for this process.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    u.ru_maxrss
}

#[test]
fn fuzz_targets_replay_their_corpus_and_mutations_without_panicking() {
    let names: Vec<&str> = FUZZ_TARGETS.iter().map(|(n, _)| *n).collect();
    // Every cargo-fuzz target has a body here and a corpus, and back.
    for entry in std::fs::read_dir(root().join("fuzz/fuzz_targets")).unwrap() {
        let p = entry.unwrap().path();
        let stem = p.file_stem().unwrap().to_string_lossy().to_string();
        assert!(
            names.contains(&stem.as_str()),
            "{stem}: no body in FUZZ_TARGETS"
        );
    }
    assert!(names.len() >= 10, "{names:?}");
    let start = Instant::now();
    let failures: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = FUZZ_TARGETS
            .iter()
            .enumerate()
            .map(|(t, &(name, body))| {
                s.spawn(move || {
                    let seeds = corpus(name);
                    assert!(!seeds.is_empty(), "{name}: empty corpus");
                    let mut out = Vec::new();
                    for (k, seed) in seeds.iter().enumerate() {
                        out.extend(replay(name, k, body, seed));
                    }
                    let mut rng = Rng(0x5eed_0000 + t as u64);
                    for k in 0..MUTATIONS {
                        let base = &seeds[rng.below(seeds.len())];
                        let other = &seeds[rng.below(seeds.len())];
                        let m = mutate(base, other, &mut rng);
                        out.extend(replay(name, seeds.len() + k, body, &m));
                        if out.len() > 5 {
                            break;
                        }
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a target thread"))
            .collect()
    });
    let took = start.elapsed();
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    // Bounded: a few thousand inputs per target in well under two minutes
    // on two cores, and no input that makes the readers hold gigabytes.
    assert!(took < Duration::from_secs(240), "took {took:?}");
    let peak = peak_rss_kib();
    assert!(peak < 2 << 20, "peak memory {} MiB", peak / 1024);
    eprintln!(
        "{} targets x ({} mutations + corpus) in {took:?}, peak {} MiB",
        FUZZ_TARGETS.len(),
        MUTATIONS,
        peak / 1024
    );
}
