//! Sharded, merged and resumed runs against the unsharded run, byte for
//! byte, on the real MiniLM weights and on generated LLaMA-layout
//! checkpoints; every way `merge` and `--resume-dir` refuse their input.

mod common;

use common::{bundled, tmpdir};

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use common::{assert_bad, bin, root, run, Rng};
use serde_json::Value;
use specbound::certificate::Part;
use specbound::matrix::DenseMatrix;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn ok(out: Output, what: &str) -> Output {
    assert!(
        out.status.success(),
        "{what}: exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `certify MODEL --out OUT EXTRA...`, which must succeed; the bytes written.
fn certify(model: &Path, out: &Path, extra: &[&str]) -> Vec<u8> {
    let mut args = vec!["certify", s(model), "--out", s(out)];
    args.extend_from_slice(extra);
    ok(run(&args), &format!("certify {args:?}"));
    std::fs::read(out).unwrap()
}

/// Runs shards 1..=n of `model` (two processes at a time) into `dir/part-K.json`.
fn shards(model: &Path, n: usize, dir: &Path, extra: &[&str]) -> Vec<PathBuf> {
    let parts: Vec<PathBuf> = (1..=n)
        .map(|k| dir.join(format!("part-{k}.json")))
        .collect();
    std::thread::scope(|scope| {
        for lane in 0..2 {
            let parts = &parts;
            scope.spawn(move || {
                for k in (1..=n).filter(|k| k % 2 == lane) {
                    let shard = format!("{k}/{n}");
                    let mut args = vec![
                        "certify",
                        s(model),
                        "--shard",
                        &shard,
                        "--out",
                        s(&parts[k - 1]),
                    ];
                    args.extend_from_slice(extra);
                    ok(run(&args), &format!("certify {args:?}"));
                }
            });
        }
    });
    parts
}

fn merge(parts: &[PathBuf], out: &Path) -> Output {
    let mut args = vec!["merge".to_string()];
    args.extend(parts.iter().map(|p| p.display().to_string()));
    args.extend(["--out".to_string(), out.display().to_string()]);
    bin().args(&args).output().unwrap()
}

/// The unsharded MiniLM certificate (computed once).
fn minilm_reference() -> &'static Vec<u8> {
    static REF: OnceLock<Vec<u8>> = OnceLock::new();
    REF.get_or_init(|| {
        let d = tmpdir("minilm-ref");
        certify(&bundled(), &d.join("ref.json"), &[])
    })
}

/// MiniLM in 3 shards (computed once; the parts are read-only for the tests).
fn minilm_parts3() -> &'static Vec<PathBuf> {
    static PARTS: OnceLock<Vec<PathBuf>> = OnceLock::new();
    PARTS.get_or_init(|| shards(&bundled(), 3, &tmpdir("minilm-3"), &[]))
}

fn assert_merges_to(parts: &[PathBuf], reference: &[u8], what: &str) {
    let out = parts[0].parent().unwrap().join("merged.json");
    // Any order: the parts are given last to first.
    let rev: Vec<PathBuf> = parts.iter().rev().cloned().collect();
    ok(merge(&rev, &out), what);
    let merged = std::fs::read(&out).unwrap();
    assert!(
        merged == reference,
        "{what}: the merged certificate differs from the unsharded one"
    );
}

#[test]
fn sharded_and_unsharded_certificates_are_identical_on_minilm() {
    let reference = minilm_reference();
    for n in [1usize, 2, 7] {
        let parts = shards(&bundled(), n, &tmpdir(&format!("minilm-{n}")), &[]);
        assert_merges_to(&parts, reference, &format!("MiniLM in {n} shards"));
    }
    let parts = minilm_parts3();
    assert_merges_to(parts, reference, "MiniLM in 3 shards");
    let merged = parts[0].parent().unwrap().join("merged.json");
    ok(
        run(&["verify", s(&merged)]),
        "verify the merged certificate",
    );
    ok(
        run(&["verify", s(&merged), "--model", s(&bundled())]),
        "verify --model the merged certificate",
    );
    // Each of the 3 parts holds about a third of the matrices, balanced by
    // cost: each has 4 of the 12 feed-forward matrices.
    for p in parts {
        let part = Part::read(p).unwrap();
        let ffn = part.matrices.iter().filter(|m| m.head.is_none()).count();
        assert_eq!(ffn, 4, "{}", p.display());
    }
    // The part format is the published schema's.
    let schema: Value = serde_json::from_slice(
        &std::fs::read(root().join("docs/certificate.schema.json")).unwrap(),
    )
    .unwrap();
    let j: Value = serde_json::from_slice(&std::fs::read(&parts[0]).unwrap()).unwrap();
    common::schema::validate_def(&schema, "part", &j).unwrap();
    let mut bad = j.clone();
    bad["matrices"][0]["alpha"] = serde_json::json!({"lo": 1.0, "hi": 1.0});
    assert!(common::schema::validate_def(&schema, "part", &bad).is_err());
    let mut bad = j.clone();
    bad["shard"]["of"] = serde_json::json!(3);
    assert!(common::schema::validate_def(&schema, "part", &bad).is_err());
    // A part is not a certificate, nor a certificate a part.
    assert!(common::schema::validate(&schema, &j).is_err());
    let cert: Value = serde_json::from_slice(reference).unwrap();
    assert!(common::schema::validate_def(&schema, "part", &cert).is_err());
}

#[test]
fn more_shards_than_matrices_leave_empty_parts_that_merge() {
    let d = tmpdir("minilm-157");
    let parts = shards(&bundled(), 157, &d, &[]);
    let empty: Vec<&PathBuf> = parts
        .iter()
        .filter(|p| Part::read(p).unwrap().matrices.is_empty())
        .collect();
    // 156 matrices in 157 shards: one matrix each, the last shard empty.
    assert_eq!(empty, [&parts[156]]);
    assert_merges_to(&parts, minilm_reference(), "MiniLM in 157 shards");
}

/// A LLaMA-layout checkpoint (grouped-query attention: 4 query heads of 16
/// sharing 2 key/value heads; gated feed-forward of width 96) with random
/// weights; layer 1's down projection is zero when `zero_down`.
fn llama(dir: &Path, layers: usize, seed: u64, zero_down: bool) {
    let (n, heads, kv, dh, ff) = (64usize, 4usize, 2usize, 16usize, 96usize);
    let mut rng = Rng(seed);
    let mut random = |rows: usize, cols: usize| DenseMatrix {
        rows,
        cols,
        // Short dyadic values: exact in F32.
        data: (0..rows * cols)
            .map(|_| (rng.below(2001) as f64 - 1000.0) / 4096.0)
            .collect(),
    };
    let mut ts: Vec<(String, DenseMatrix)> = Vec::new();
    for l in 0..layers {
        let p = format!("model.layers.{l}");
        ts.push((
            format!("{p}.self_attn.q_proj.weight"),
            random(heads * dh, n),
        ));
        ts.push((format!("{p}.self_attn.k_proj.weight"), random(kv * dh, n)));
        ts.push((format!("{p}.self_attn.v_proj.weight"), random(kv * dh, n)));
        ts.push((
            format!("{p}.self_attn.o_proj.weight"),
            random(n, heads * dh),
        ));
        ts.push((format!("{p}.mlp.gate_proj.weight"), random(ff, n)));
        ts.push((format!("{p}.mlp.up_proj.weight"), random(ff, n)));
        let mut down = random(n, ff);
        if zero_down && l == 1 {
            down.data.iter_mut().for_each(|x| *x = 0.0);
        }
        ts.push((format!("{p}.mlp.down_proj.weight"), down));
    }
    std::fs::create_dir_all(dir).unwrap();
    let refs: Vec<(String, &DenseMatrix)> = ts.iter().map(|(k, m)| (k.clone(), m)).collect();
    common::write_safetensors(&dir.join("model.safetensors"), &refs, "F32");
    let config = serde_json::json!({
        "model_type": "llama", "num_hidden_layers": layers, "hidden_size": n,
        "num_attention_heads": heads, "num_key_value_heads": kv,
        "intermediate_size": ff, "hidden_act": "silu"
    });
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
}

#[test]
fn sharded_and_unsharded_certificates_are_identical_on_generated_llama_checkpoints() {
    for (layers, zero_down) in [(2usize, false), (3, true)] {
        let d = tmpdir(&format!("llama-{layers}"));
        let model = d.join("model");
        llama(&model, layers, 7 + layers as u64, zero_down);
        let reference = certify(&model, &d.join("ref.json"), &[]);
        let cert: Value = serde_json::from_slice(&reference).unwrap();
        let mats = cert["matrices"].as_array().unwrap();
        assert_eq!(mats.len(), layers * 10);
        // QK and V_tilde are 64 x 64 products of rank <= 16: structural zeros.
        assert!(mats
            .iter()
            .all(|m| m["head"] == -1 || m["structural_zeros"].as_u64().unwrap() >= 48));
        assert!(cert["extensions"].as_array().unwrap().len() >= 2);
        if zero_down {
            // The zero M_out of layer 1: no nonzero singular value at all.
            let z = mats
                .iter()
                .find(|m| m["layer"] == 1 && m["type"] == "M_out")
                .unwrap();
            assert_eq!(z["singular_values"].as_array().unwrap().len(), 0);
            assert_eq!(z["structural_zeros"], 64);
        }
        for n in [1usize, 2, 3, 7, 10 * layers + 5] {
            let dn = d.join(format!("n{n}"));
            std::fs::create_dir_all(&dn).unwrap();
            let parts = shards(&model, n, &dn, &[]);
            assert_merges_to(
                &parts,
                &reference,
                &format!("{layers}-layer LLaMA in {n} shards"),
            );
        }
        // The same with other parameters.
        let extra = ["--l-phi", "1.1", "--grid-m", "5", "--precision", "extended"];
        let reference = certify(&model, &d.join("ref-params.json"), &extra);
        let dn = d.join("params");
        std::fs::create_dir_all(&dn).unwrap();
        let parts = shards(&model, 3, &dn, &extra);
        assert_merges_to(&parts, &reference, "LLaMA in 3 shards, other parameters");
    }
}

/// A small BERT (hidden 16, 2 heads, feed-forward 32) of random dyadic
/// weights, exact in F32.
fn tiny_bert(dir: &Path, layers: usize, seed: u64) {
    let mut rng = Rng(seed);
    let mut ts: Vec<(String, DenseMatrix)> = Vec::new();
    for l in 0..layers {
        for (t, rows, cols) in [
            ("attention.self.query", 16, 16),
            ("attention.self.key", 16, 16),
            ("attention.self.value", 16, 16),
            ("attention.output.dense", 16, 16),
            ("intermediate.dense", 32, 16),
            ("output.dense", 16, 32),
        ] {
            let data = (0..rows * cols)
                .map(|_| (rng.below(2001) as f64 - 1000.0) / 4096.0)
                .collect();
            ts.push((
                format!("encoder.layer.{l}.{t}.weight"),
                DenseMatrix { rows, cols, data },
            ));
        }
    }
    std::fs::create_dir_all(dir).unwrap();
    let refs: Vec<(String, &DenseMatrix)> = ts.iter().map(|(k, m)| (k.clone(), m)).collect();
    common::write_safetensors(&dir.join("model.safetensors"), &refs, "F32");
    let config = serde_json::json!({
        "model_type": "bert", "num_hidden_layers": layers, "hidden_size": 16,
        "num_attention_heads": 2, "intermediate_size": 32, "hidden_act": "gelu"
    });
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
}

/// With `--measures` (and `--init`) every shard certifies its share of the
/// raw weights into its part, and `merge` derives the measures from all
/// of them: the merged certificate is the unsharded one, byte for byte
/// (an ungated BERT, whose feed-forward raw weights reuse the proxies'
/// sigma_1, with an initialisation; a gated LLaMA without). Parts with
/// and without measures, or of other initialisations, do not merge, nor do
/// parts that leave a raw weight out.
#[test]
fn sharded_runs_with_measures_merge_to_the_unsharded_certificate() {
    let d = tmpdir("measures");
    let (model, init) = (d.join("model"), d.join("init"));
    tiny_bert(&model, 2, 11);
    tiny_bert(&init, 2, 12);
    let with = ["--measures", "--init", s(&init)];
    let reference = certify(&model, &d.join("ref.json"), &with);
    let cert: Value = serde_json::from_slice(&reference).unwrap();
    assert_eq!(cert["measures"]["d"], 12);
    assert!(cert["measures"]["frobenius_distance"].is_object());
    // 2 x (2 x 2 + 2) = 12 proxies: 20 shards leave some with raw weights only.
    for n in [2usize, 3, 20] {
        let dn = d.join(format!("n{n}"));
        std::fs::create_dir_all(&dn).unwrap();
        let parts = shards(&model, n, &dn, &with);
        assert_merges_to(
            &parts,
            &reference,
            &format!("BERT with measures in {n} shards"),
        );
        if n == 20 {
            // A part holding raw weights and no proxy, left out: refused.
            let only_raw = parts
                .iter()
                .find(|p| {
                    let part = Part::read(p).unwrap();
                    part.matrices.is_empty() && !part.raw_weights.unwrap().is_empty()
                })
                .expect("a shard with raw weights only");
            let rest: Vec<PathBuf> = parts.iter().filter(|p| p != &only_raw).cloned().collect();
            let out = merge(&rest, &dn.join("gap.json"));
            assert_eq!(out.status.code(), Some(2));
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("no part holds raw weight layer"), "{err}");
            assert!(!dn.join("gap.json").exists());
        }
    }
    // Mixed: one part with measures, one without; or another initialisation.
    let dm = d.join("mixed");
    std::fs::create_dir_all(&dm).unwrap();
    let measured = shards(&model, 2, &dm, &with);
    let plain = dm.join("plain-2.json");
    certify(&model, &plain, &["--shard", "2/2"]);
    let out = merge(&[measured[0].clone(), plain.clone()], &dm.join("m.json"));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("parts with and without measures"), "{err}");
    let other = dm.join("other-2.json");
    certify(&model, &other, &["--shard", "2/2", "--init", s(&model)]);
    let out = merge(&[measured[0].clone(), other], &dm.join("m.json"));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("another initialisation"), "{err}");
    // A gated LLaMA, measures without an initialisation.
    let llama_dir = d.join("llama");
    llama(&llama_dir, 2, 5, false);
    let reference = certify(&llama_dir, &d.join("llama-ref.json"), &["--measures"]);
    let cert: Value = serde_json::from_slice(&reference).unwrap();
    assert_eq!(cert["measures"]["d"], 14);
    let dl = d.join("llama-3");
    std::fs::create_dir_all(&dl).unwrap();
    let parts = shards(&llama_dir, 3, &dl, &["--measures"]);
    assert_merges_to(&parts, &reference, "LLaMA with measures in 3 shards");
}

/// Writes `text` to `dir/name` and returns the path.
fn write(dir: &Path, name: &str, text: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn merge_args<'a>(parts: &'a [&'a Path], out: &'a Path) -> Vec<&'a str> {
    let mut v = vec!["merge"];
    v.extend(parts.iter().map(|p| s(p)));
    v.extend(["--out", s(out)]);
    v
}

#[test]
fn merge_refuses_overlaps_gaps_foreign_and_mixed_parts_naming_the_part() {
    let d = tmpdir("merge-errors");
    let out = d.join("cert.json");
    let p3 = minilm_parts3();
    let (a, b, c) = (p3[0].as_path(), p3[1].as_path(), p3[2].as_path());
    let bad = |parts: &[&Path], needles: &[&str]| {
        assert_bad(&merge_args(parts, &out), needles);
        assert!(!out.exists(), "nothing is written on an error");
    };
    // A gap: shard 2 of 3 missing.
    bad(&[a, c], &["no part holds", "shard 2/3 is missing"]);
    // The same part twice.
    bad(&[a, b, c, b], &[s(b), "the same part as", "given twice"]);
    // An overlap: a shard of another split of the same model.
    let two = d.join("two");
    std::fs::create_dir_all(&two).unwrap();
    let parts2 = shards(&bundled(), 2, &two, &[]);
    bad(
        &[a, b, c, &parts2[0]],
        &[s(&parts2[0]), "overlaps", "is in both"],
    );
    // Mixed parameters: a shard certified with another L_phi or grid.
    let lphi = d.join("lphi");
    std::fs::create_dir_all(&lphi).unwrap();
    let mixed = lphi.join("part-2.json");
    ok(
        run(&[
            "certify",
            s(&bundled()),
            "--shard",
            "2/3",
            "--l-phi",
            "2",
            "--out",
            s(&mixed),
        ]),
        "certify --l-phi 2",
    );
    bad(
        &[a, &mixed, c],
        &[s(&mixed), "mixed parameters", "l_phi = 2, not 1.13", s(a)],
    );
    let grid = lphi.join("part-3.json");
    ok(
        run(&[
            "certify",
            s(&bundled()),
            "--shard",
            "3/3",
            "--grid-m",
            "5",
            "--out",
            s(&grid),
        ]),
        "certify --grid-m 5",
    );
    bad(
        &[a, b, &grid],
        &[s(&grid), "mixed parameters", "grid m = 5, not 12"],
    );
    // A foreign part: the same architecture, one weight changed.
    let other = d.join("other-model");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::copy(bundled().join("config.json"), other.join("config.json")).unwrap();
    let mut bytes = std::fs::read(bundled().join("model.safetensors")).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01; // the last byte of the last tensor's data
    std::fs::write(other.join("model.safetensors"), &bytes).unwrap();
    let foreign = d.join("foreign-2.json");
    ok(
        run(&["certify", s(&other), "--shard", "2/3", "--out", s(&foreign)]),
        "certify the other model",
    );
    bad(
        &[a, &foreign, c],
        &[
            s(&foreign),
            "a part of another model",
            "model.safetensors has sha256",
        ],
    );
    // A part of another architecture reading (--layers 5 of the same file).
    let five = d.join("five-2.json");
    ok(
        run(&[
            "certify",
            s(&bundled()),
            "--shard",
            "2/3",
            "--layers",
            "5",
            "--out",
            s(&five),
        ]),
        "certify --layers 5",
    );
    bad(
        &[a, &five, c],
        &[s(&five), "another architecture", "model.layers = 5, not 6"],
    );
}

#[test]
fn merge_refuses_parts_of_other_versions_tampered_parts_and_non_parts() {
    let d = tmpdir("merge-files");
    let out = d.join("cert.json");
    let p3 = minilm_parts3();
    let (a, b, c) = (p3[0].as_path(), p3[1].as_path(), p3[2].as_path());
    let text = std::fs::read_to_string(b).unwrap();
    let bad = |parts: &[&Path], needles: &[&str]| {
        assert_bad(&merge_args(parts, &out), needles);
        assert!(!out.exists(), "nothing is written on an error");
    };
    // Another version of the program (a valid part with its digest).
    let mut old = Part::read(b).unwrap();
    old.tool.version = "0.0.1".into();
    old.sha256 = old.content_sha256();
    let older = write(&d, "older.json", old.to_json_pretty().as_bytes());
    bad(
        &[a, &older, c],
        &[
            s(&older),
            "written by specbound 0.0.1",
            "version that wrote them",
        ],
    );
    // Another format version.
    let v2 = write(
        &d,
        "v2.json",
        text.replacen("\"version\": 1", "\"version\": 2", 1)
            .as_bytes(),
    );
    bad(
        &[a, &v2, c],
        &[s(&v2), "$.version", "unsupported version 2"],
    );
    // A certificate is not a part.
    let cert = write(&d, "certificate.json", minilm_reference());
    bad(
        &[a, &cert, c],
        &[
            s(&cert),
            "$.format",
            "expected \"specbound-part\", found \"specbound-certificate\"",
        ],
    );
    // Tampered: one singular value changed (still a valid-looking part).
    let part: Value = serde_json::from_str(&text).unwrap();
    let sv = part["matrices"][0]["singular_values"][0]["hi"].clone();
    let needle = format!("\"hi\": {sv}");
    assert!(text.contains(&needle));
    let tampered = write(
        &d,
        "tampered.json",
        text.replacen(&needle, "\"hi\": 1e300", 1).as_bytes(),
    );
    bad(
        &[a, &tampered, c],
        &[s(&tampered), "$.sha256", "changed after it was written"],
    );
    // A matrix moved between parts with fresh digests is an overlap, not a silent merge.
    let mut moved = Part::read(c).unwrap();
    moved
        .matrices
        .push(Part::read(b).unwrap().matrices.pop().unwrap());
    moved.matrices.sort_by_key(|m| m.id());
    moved.sha256 = moved.content_sha256();
    let moved = write(&d, "moved.json", moved.to_json_pretty().as_bytes());
    bad(&[a, b, &moved], &[s(&moved), "overlaps", s(b)]);
    // Strict reading: an unknown key, a duplicate key, truncation, a missing file.
    let unknown = write(
        &d,
        "unknown.json",
        text.replacen("\"shard\": {", "\"shard\": {\"of\": 3, ", 1)
            .as_bytes(),
    );
    bad(
        &[a, &unknown, c],
        &[s(&unknown), "$.shard", "unknown key 'of'"],
    );
    let dup = write(
        &d,
        "dup.json",
        text.replacen("\"format\": ", "\"format\": \"x\", \"format\": ", 1)
            .as_bytes(),
    );
    bad(&[a, &dup, c], &[s(&dup), "duplicate"]);
    let cut = write(&d, "cut.json", &text.as_bytes()[..text.len() / 2]);
    bad(&[a, &cut, c], &[s(&cut), "invalid JSON"]);
    let missing = d.join("missing.json");
    bad(&[a, &missing, c], &[s(&missing), "cannot read"]);
    // Out of order or outside the model.
    let mut swapped: Value = part.clone();
    swapped["matrices"].as_array_mut().unwrap().swap(0, 1);
    let sw = write(&d, "swapped.json", swapped.to_string().as_bytes());
    bad(&[a, &sw, c], &[s(&sw), "$.matrices[1]", "ordered by layer"]);
    // And the three good parts still merge.
    ok(merge(&[a.into(), b.into(), c.into()], &out), "good parts");
}

fn layer_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|r| {
            r.map(|e| e.unwrap().path())
                .filter(|p| {
                    let n = p.file_name().unwrap().to_string_lossy();
                    n.starts_with("shard-") && n.ends_with(".json")
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn a_killed_run_resumes_from_its_finished_layers() {
    let d = tmpdir("resume");
    let resume = d.join("resume");
    let out = d.join("cert.json");
    let m = bundled();
    let args = [
        "certify",
        s(&m),
        "--out",
        s(&out),
        "--resume-dir",
        s(&resume),
    ];
    let mut child = bin()
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    while layer_files(&resume).is_empty() && t.elapsed().as_secs() < 120 {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let done = layer_files(&resume);
    assert!(!done.is_empty(), "no layer finished in 120 s");
    assert!(
        done.len() < 6,
        "the run finished all 6 layers before it could be killed"
    );
    assert!(!out.exists(), "a killed run writes no certificate");
    // Each finished layer is a complete part.
    for f in &done {
        assert_eq!(Part::read(f).unwrap().matrices.len(), 26);
    }
    // Rerun with the same arguments: the finished layers are read back.
    let r = ok(run(&args), "resumed run");
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains(&format!("{} finished layers read back", done.len())),
        "{err}"
    );
    assert!(std::fs::read(&out).unwrap() == *minilm_reference());
    assert_eq!(layer_files(&resume).len(), 6);
    // A third run reads everything back and certifies nothing.
    let r = ok(run(&args), "third run");
    assert!(String::from_utf8_lossy(&r.stderr)
        .contains("6 finished layers read back (156 matrices), 0 matrices certified now"));
    assert!(std::fs::read(&out).unwrap() == *minilm_reference());
    // The layer files are parts: merging them gives the certificate too.
    let merged = d.join("merged.json");
    ok(
        merge(&layer_files(&resume), &merged),
        "merge the layer parts",
    );
    assert!(std::fs::read(&merged).unwrap() == *minilm_reference());
}

#[test]
fn resume_refuses_parts_of_other_arguments_models_and_versions() {
    let d = tmpdir("resume-refuse");
    let resume = d.join("resume");
    let out = d.join("cert.json");
    let m = bundled();
    // A finished run for shard 2/3, resumable.
    let base = [
        "certify",
        s(&m),
        "--shard",
        "2/3",
        "--resume-dir",
        s(&resume),
        "--out",
        s(&out),
    ];
    ok(run(&base), "shard 2/3 with --resume-dir");
    let part = std::fs::read(&out).unwrap();
    let files = layer_files(&resume);
    assert_eq!(files.len(), 6);
    assert!(files[0].ends_with("shard-2-of-3.layer-00000.json"));
    // Rerun: every layer read back, the same part.
    let r = ok(run(&base), "rerun");
    assert!(String::from_utf8_lossy(&r.stderr).contains("6 finished layers read back"));
    assert_eq!(std::fs::read(&out).unwrap(), part);
    // Other parameters with the same directory and shard: refused, naming the file.
    let mut other = base.to_vec();
    other.extend(["--l-phi", "2"]);
    assert_bad(
        &other,
        &[
            s(&files[0]),
            "written by another run",
            "l_phi = 1.13, not 2",
            "--resume-dir",
        ],
    );
    let mut prec = base.to_vec();
    prec.extend(["--precision", "extended"]);
    assert_bad(&prec, &[s(&files[0]), "precision f64, not extended"]);
    // Another model (one weight changed) with the same directory.
    let om = d.join("other-model");
    std::fs::create_dir_all(&om).unwrap();
    std::fs::copy(m.join("config.json"), om.join("config.json")).unwrap();
    let mut bytes = std::fs::read(m.join("model.safetensors")).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    std::fs::write(om.join("model.safetensors"), &bytes).unwrap();
    let mut foreign = base.to_vec();
    foreign[1] = s(&om);
    assert_bad(&foreign, &[s(&files[0]), "sha256"]);
    // Another shard's files are other names: shard 1/3 starts afresh beside them.
    let mut one = base.to_vec();
    one[3] = "1/3";
    let p1 = d.join("p1.json");
    one[7] = s(&p1);
    ok(run(&one), "shard 1/3 in the same directory");
    assert_eq!(layer_files(&resume).len(), 12);
    // A part of another version, or a tampered one, at a layer's name: refused.
    let mut old = Part::read(&files[3]).unwrap();
    old.tool.version = "0.0.1".into();
    old.sha256 = old.content_sha256();
    std::fs::write(&files[3], old.to_json_pretty()).unwrap();
    assert_bad(&base, &[s(&files[3]), "written by specbound 0.0.1"]);
    let text = std::fs::read_to_string(&files[4]).unwrap();
    std::fs::write(
        &files[4],
        text.replacen("\"rows\": 384", "\"rows\": 385", 1),
    )
    .unwrap();
    std::fs::remove_file(&files[3]).unwrap();
    assert_bad(&base, &[s(&files[4]), "$.sha256"]);
    // A file that holds other matrices than the layer's share.
    std::fs::remove_file(&files[4]).unwrap();
    std::fs::copy(&files[5], &files[4]).unwrap();
    assert_bad(&base, &[s(&files[4]), "not the"]);
    // Removing the bad files resumes the rest and gives the same part.
    std::fs::remove_file(&files[4]).unwrap();
    let r = ok(run(&base), "after removing the refused files");
    assert!(String::from_utf8_lossy(&r.stderr).contains("4 finished layers read back"));
    assert_eq!(std::fs::read(&out).unwrap(), part);
    // A resume directory that is a file.
    let file = write(&d, "not-a-dir", b"x");
    let mut nd = base.to_vec();
    nd[5] = s(&file);
    assert_bad(&nd, &[s(&file), "not a directory"]);
}

#[test]
fn shard_arguments_are_checked() {
    let m = bundled();
    for bad in [
        "0/3",
        "4/3",
        "3",
        "1/0",
        "a/b",
        "1/3/4",
        "-1/3",
        "",
        "1/9999999999999",
    ] {
        assert_bad(&["certify", s(&m), &format!("--shard={bad}")], &["--shard"]);
    }
    let d = tmpdir("shard-args");
    assert_bad(
        &["certify", s(&m), "--shard", "1/2", "--csv", s(&d.join("t"))],
        &["--csv", "merge"],
    );
    // Without --out, a shard says what it did and how to keep it.
    let r = ok(run(&["certify", s(&m), "--shard", "40/40"]), "shard 40/40");
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(text.contains("shard 40/40"), "{text}");
    assert!(text.contains("--out"), "{text}");
}

#[test]
fn the_cluster_page_shows_the_tested_job_scripts() {
    let doc = std::fs::read_to_string(root().join("docs/cluster.md")).unwrap();
    let mut n = 0;
    for e in std::fs::read_dir(root().join("scripts/slurm")).unwrap() {
        let p = e.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(
            doc.contains(&format!("```bash\n{text}```")),
            "docs/cluster.md does not show {} as it is",
            p.display()
        );
        n += 1;
    }
    assert_eq!(n, 6);
}

/// Regression: `merge` printed the bounds as raw `[{:e}, {:e}]` while
/// `certify` prints them through the one text formatter (outward-rounded
/// shared digits). Both commands print the same bound lines now, in every
/// `--intervals` style.
#[test]
fn merge_prints_the_bounds_as_certify_does() {
    let parts = minilm_parts3();
    let out = parts[0].parent().unwrap().join("merged-text.json");
    for style in ["shared", "pm", "bounds"] {
        let bounds = |o: Output| -> Vec<String> {
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            String::from_utf8(o.stdout)
                .unwrap()
                .lines()
                .filter(|l| l.starts_with("  B_ours ") || l.starts_with("  B_Edel "))
                .map(str::to_string)
                .collect()
        };
        let mut args: Vec<String> = vec!["merge".into()];
        args.extend(parts.iter().map(|p| p.display().to_string()));
        args.extend([
            "--out".into(),
            out.display().to_string(),
            "--intervals".into(),
            style.into(),
        ]);
        let merged = bounds(bin().args(&args).output().unwrap());
        let certified = bounds(run(&["certify", s(&bundled()), "--intervals", style]));
        assert_eq!(merged.len(), 2, "{merged:?}");
        assert_eq!(merged, certified, "--intervals {style}");
    }
}
