//! Broken and hostile files: a corpus of hand-made bad files (regression
//! tests, `tests/data/hostile/`), and a deterministic mutation run over valid
//! files (the stable-toolchain counterpart of the cargo-fuzz targets in
//! `fuzz/`). Every case must end in a clear error, never a panic.

mod common;

use common::{root, run, Rng};
use specbound::matrix::DenseMatrix;
use std::path::{Path, PathBuf};

fn corpus() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join("tests/data/hostile"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e != "md"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_corpus_file_gives_a_one_line_error_naming_it() {
    let files = corpus();
    assert!(files.len() >= 30, "corpus too small: {}", files.len());
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let fs = f.to_str().unwrap();
        let cmds: Vec<Vec<&str>> = if name.ends_with(".json") {
            vec![vec!["verify", fs], vec!["diff", fs, fs]]
        } else if name.ends_with(".npy") {
            vec![vec!["svd", fs]]
        } else {
            vec![
                vec!["svd", fs, "--tensor", "w"],
                vec!["certify", fs, "--heads", "1"],
                vec!["inspect", fs, "--heads", "1"],
            ]
        };
        for args in cmds {
            let out = run(&args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert!(!err.contains("panicked"), "{args:?}: {err}");
            assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
            assert!(err.contains(&name), "{args:?} must name the file: {err}");
            assert!(out.stdout.is_empty(), "{args:?}: no partial output");
        }
    }
}

fn mutate(base: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut b = base.to_vec();
    match rng.below(6) {
        0 => {
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
        }
        1 => b.truncate(rng.below(b.len())),
        2 => {
            // Overwrite 8 bytes with an extreme little-endian integer.
            let i = rng.below(b.len().saturating_sub(8).max(1));
            let v: u64 = [u64::MAX, 1 << 40, 0, 1 << 31, 3][rng.below(5)];
            let end = (i + 8).min(b.len());
            b[i..end].copy_from_slice(&v.to_le_bytes()[..end - i]);
        }
        3 => {
            let i = rng.below(b.len());
            let j = (i + rng.below(64)).min(b.len());
            let chunk = b[i..j].to_vec();
            b.splice(i..i, chunk);
        }
        4 => {
            let i = rng.below(b.len());
            b[i] = [b'{', b'}', b'"', b'[', 0, 0xff][rng.below(6)];
        }
        _ => {
            let i = rng.below(b.len());
            b.insert(i, rng.below(256) as u8);
        }
    }
    b
}

fn no_panic(what: &str, f: impl FnOnce() + std::panic::UnwindSafe) {
    if std::panic::catch_unwind(f).is_err() {
        panic!("{what}: the reader panicked");
    }
}

#[test]
fn mutated_files_never_panic_the_readers() {
    let dir = common::process_scratch().join("mutate");
    std::fs::create_dir_all(&dir).unwrap();
    let m = DenseMatrix {
        rows: 8,
        cols: 32,
        data: (0..256).map(|i| (i as f64 - 100.0) / 64.0).collect(),
    };
    // Valid seeds: npy, safetensors (two tensors), GGUF (F32 and Q8_0), a certificate.
    let npy = dir.join("seed.npy");
    specbound::io::write_npy_f64(&npy, &m).unwrap();
    let gg = dir.join("seed.gguf");
    specbound::io::gguf::write_gguf(
        &gg,
        &[(
            "general.architecture",
            specbound::io::gguf::MetaValue::Str("llama".into()),
        )],
        &[
            ("w".into(), 8, 32, specbound::io::gguf::F32, m.data.clone()),
            ("q".into(), 8, 32, specbound::io::gguf::Q8_0, m.data.clone()),
        ],
    )
    .unwrap();
    let st = dir.join("seed.safetensors");
    {
        let mut data = Vec::new();
        for x in &m.data {
            data.extend_from_slice(&(*x as f32).to_le_bytes());
        }
        let h = format!(
            "{{\"w\":{{\"dtype\":\"F32\",\"shape\":[8,32],\"data_offsets\":[0,{}]}},\"b\":{{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[{},{}]}}}}",
            data.len(),
            data.len(),
            data.len() + 8
        );
        data.extend_from_slice(&[0u8; 8]);
        let mut out = (h.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(&data);
        std::fs::write(&st, out).unwrap();
    }
    let cert = {
        let out = run(&["certify", "--json"]);
        assert!(out.status.success());
        out.stdout
    };
    let seeds: Vec<(&str, Vec<u8>)> = vec![
        ("npy", std::fs::read(&npy).unwrap()),
        ("safetensors", std::fs::read(&st).unwrap()),
        ("gguf", std::fs::read(&gg).unwrap()),
    ];
    let cases: usize = std::env::var("SPECBOUND_TEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(400);
    let mut rng = Rng(20261130);
    for (kind, base) in &seeds {
        let p = dir.join(format!("mut.{kind}"));
        for _ in 0..cases {
            let b = mutate(base, &mut rng);
            std::fs::write(&p, &b).unwrap();
            let pp: &Path = &p;
            no_panic(kind, || {
                for t in [Some("w"), Some("q"), Some("b"), None] {
                    let _ = specbound::io::read_matrix(pp, t);
                }
                let _ = specbound::io::checkpoint::Checkpoint::open(pp).map(|c| {
                    let names: Vec<String> = c.names().map(str::to_string).collect();
                    for n in names {
                        let _ = c.read(&n);
                    }
                });
            });
        }
    }
    for _ in 0..cases / 4 {
        let b = mutate(&cert, &mut rng);
        no_panic("certificate", || {
            if let Ok(c) = specbound::certificate::Certificate::parse(&b, "mutated") {
                let _ = specbound::evidence::verify::verify_internal(&c);
                let _ = specbound::evidence::diff::diff(&c, &c, 0.0);
            }
        });
    }
    let _ = std::fs::remove_dir_all(&dir);
}
