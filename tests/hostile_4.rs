//! Hostile input, round four (issue 32), driven through the real binary:
//! one test per class, named after it, each with several inputs of the
//! class built as real files, and each asserting the exit code (2), one
//! line naming the file and key or tensor, and a bound on the child's peak
//! memory and time (`common::run_measured`, from `wait4`).
//!
//! Classes: names that multiply (Flax keys joined into names); counts that
//! drive work (config counts of layers, heads, experts, groups); quadratic
//! indexing (chunked Flax arrays); allocation failure (sparse files whose
//! float64 copy cannot be had); ONNX files that specbound and onnx's own
//! loader would read differently; views that alias in memory (the one rule
//! of every strided source, through the library); evidence labels
//! (certificate fields naming something in the model, re-checked by
//! `verify --model`).

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::formats::*;
use serde_json::{json, Value};
use specbound::matrix::DenseMatrix;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("specbound-hostile-4-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

/// Runs the binary with `args`; expects exit 2, one line holding every
/// needle, nothing on stdout, at most `max_mib` of peak memory and `max_s`
/// seconds. Returns the failures (empty when it held).
fn refused(case: &str, args: &[String], needles: &[&str], max_mib: u64, max_s: u64) -> Vec<String> {
    let mut cmd = common::bin();
    cmd.args(args);
    let t = Instant::now();
    let o = common::run_measured(cmd, Duration::from_secs(120));
    let took = t.elapsed();
    let err = o.stderr.trim_end();
    let mut why = Vec::new();
    if o.code != Some(2) {
        why.push(format!("exit {:?}, expected 2", o.code));
    }
    if err.lines().count() != 1 || err.contains("panicked") {
        why.push("not one line (or a panic)".into());
    }
    if !o.stdout.is_empty() {
        why.push("output on stdout".into());
    }
    for n in needles {
        if !err.contains(n) {
            why.push(format!("'{n}' missing"));
        }
    }
    if o.max_rss_kib > max_mib * 1024 {
        why.push(format!(
            "peak memory {} MiB over {max_mib} MiB",
            o.max_rss_kib / 1024
        ));
    }
    if took > Duration::from_secs(max_s) {
        why.push(format!("took {took:?}, over {max_s} s"));
    }
    if why.is_empty() {
        return why;
    }
    let shown: String = err.chars().take(400).collect();
    vec![format!("{case}: {}; stderr: {shown}", why.join(", "))]
}

fn assert_none(failures: Vec<String>) {
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// msgpack: a string of any length below 2^16.
fn mp_key(k: &str, out: &mut Vec<u8>) {
    if k.len() < 256 {
        mp_str(k, out);
    } else {
        out.push(0xda);
        out.extend_from_slice(&(k.len() as u16).to_be_bytes());
        out.extend_from_slice(k.as_bytes());
    }
}

/// A Flax file: `depth` nested maps keyed by `key_len`-byte keys, then a
/// map of `leaves` one-element arrays.
fn flax_chain(depth: usize, key_len: usize, leaves: u32) -> Vec<u8> {
    let mut f = Vec::new();
    for d in 0..depth {
        mp_map(1, false, &mut f);
        let key: String = std::iter::repeat_n((b'a' + (d % 26) as u8) as char, key_len).collect();
        mp_key(&key, &mut f);
    }
    mp_map(leaves, true, &mut f);
    for k in 0..leaves {
        mp_str(&format!("{k:x}"), &mut f);
        mp_array(&[1], "float32", &f32_bytes(&[1.0]), &mut f);
    }
    f
}

#[test]
fn names_that_multiply_are_bounded_before_they_are_built() {
    let d = tmpdir("names");
    let mut failures = Vec::new();
    let cases: [(&str, usize, usize, u32, &str); 4] = [
        // The round's input: 60 levels of 4000-byte keys, 40,000 leaves
        // (about 1 MB, names of 9.6 GB): refused at the first long name.
        (
            "deep-long",
            60,
            4000,
            40_000,
            "more than the 4096-byte limit",
        ),
        // Two levels of 2100 bytes: one name of 4201 bytes.
        ("two-long", 2, 2100, 4, "would be 4201 bytes"),
        // Names within the per-name cap, but 17,000 of 4000 bytes: over
        // the total.
        (
            "many-long",
            1,
            4000,
            17_000,
            "names together take more than the 67108864-byte limit",
        ),
        // 60 levels of 60 bytes (3.6 KB names) times 20,000 leaves.
        (
            "deep-many",
            60,
            66,
            20_000,
            "names together take more than the 67108864-byte limit",
        ),
    ];
    for (name, depth, key_len, leaves, needle) in cases {
        let p = d.join(format!("{name}.msgpack"));
        std::fs::write(&p, flax_chain(depth, key_len, leaves)).unwrap();
        for cmd in ["inspect", "svd"] {
            let mut args = vec![cmd.to_string(), s(&p)];
            if cmd == "svd" {
                args.extend(["--tensor".into(), "w".into()]);
            }
            failures.extend(refused(
                &format!("{name} {cmd}"),
                &args,
                &[&s(&p), "not a readable Flax checkpoint", needle],
                300,
                20,
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&d);
    assert_none(failures);
}

fn mat(rows: usize, cols: usize, seed: usize) -> DenseMatrix {
    DenseMatrix {
        rows,
        cols,
        data: (0..rows * cols)
            .map(|k| ((k * 7 + seed * 3) % 11) as f64 / 8.0 - 0.625)
            .collect(),
    }
}

fn write_model(dir: &Path, tensors: &[(String, DenseMatrix)], cfg: &Value) -> String {
    let refs: Vec<(String, &DenseMatrix)> = tensors.iter().map(|(n, m)| (n.clone(), m)).collect();
    common::write_safetensors(&dir.join("model.safetensors"), &refs, "F32");
    std::fs::write(dir.join("config.json"), serde_json::to_vec(cfg).unwrap()).unwrap();
    s(dir)
}

/// An ALBERT whose one shared group is stored once (hidden 8, 2 heads).
fn albert(dir: &Path, extra: Value) -> String {
    let names = [
        ("attention.query", 8, 8),
        ("attention.key", 8, 8),
        ("attention.value", 8, 8),
        ("attention.dense", 8, 8),
        ("ffn", 16, 8),
        ("ffn_output", 8, 16),
    ];
    let ts: Vec<(String, DenseMatrix)> = names
        .iter()
        .enumerate()
        .map(|(k, &(n, r, c))| {
            (
                format!("albert.encoder.albert_layer_groups.0.albert_layers.0.{n}.weight"),
                mat(r, c, k),
            )
        })
        .collect();
    let mut cfg = json!({"model_type": "albert", "num_hidden_layers": 3, "hidden_size": 8,
        "num_attention_heads": 2, "intermediate_size": 16, "hidden_act": "gelu",
        "num_hidden_groups": 1, "inner_group_num": 1, "embedding_size": 8});
    for (k, v) in extra.as_object().unwrap() {
        cfg[k] = v.clone();
    }
    write_model(dir, &ts, &cfg)
}

/// A one-layer Mixtral with three experts (hidden 8, 2 heads).
fn mixtral(dir: &Path, extra: Value) -> String {
    let mut ts = Vec::new();
    for (k, n) in ["q_proj", "k_proj", "v_proj", "o_proj"].iter().enumerate() {
        ts.push((format!("model.layers.0.self_attn.{n}.weight"), mat(8, 8, k)));
    }
    for e in 0..3 {
        let p = format!("model.layers.0.block_sparse_moe.experts.{e}");
        ts.push((format!("{p}.w1.weight"), mat(16, 8, e)));
        ts.push((format!("{p}.w3.weight"), mat(16, 8, e + 1)));
        ts.push((format!("{p}.w2.weight"), mat(8, 16, e + 2)));
    }
    ts.push((
        "model.layers.0.block_sparse_moe.gate.weight".into(),
        mat(3, 8, 9),
    ));
    let mut cfg = json!({"model_type": "mixtral", "num_hidden_layers": 1, "hidden_size": 8,
        "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 4,
        "intermediate_size": 16, "num_local_experts": 3, "num_experts_per_tok": 2});
    for (k, v) in extra.as_object().unwrap() {
        cfg[k] = v.clone();
    }
    write_model(dir, &ts, &cfg)
}

#[test]
fn counts_that_drive_work_are_capped_naming_the_key() {
    let mut failures = Vec::new();
    type Build = fn(&Path, Value) -> String;
    /// Name, model, config keys set, needles, extra flags.
    type CountCase = (
        &'static str,
        Build,
        Value,
        &'static [&'static str],
        Vec<&'static str>,
    );
    let cases: Vec<CountCase> = vec![
        (
            "albert-million-layers",
            albert,
            json!({"num_hidden_layers": 1_000_000}),
            &[
                "'num_hidden_layers'",
                "1000000 layers, more than the limit of 4096",
            ],
            vec![],
        ),
        (
            "albert-2^62-layers",
            albert,
            json!({"num_hidden_layers": 1u64 << 62}),
            &["'num_hidden_layers'", "more than the limit of 4096"],
            vec![],
        ),
        (
            "albert-inner-groups",
            albert,
            json!({"inner_group_num": 1u64 << 40}),
            &["'inner_group_num'", "layers per group, more than the limit"],
            vec![],
        ),
        (
            "albert-blocks",
            albert,
            json!({"num_hidden_layers": 4000, "inner_group_num": 4000}),
            &[
                "'inner_group_num'",
                "16000000 blocks, more than the limit of 4096",
            ],
            vec![],
        ),
        (
            "albert-groups",
            albert,
            json!({"num_hidden_groups": 1_000_000}),
            &["'num_hidden_groups'", "groups, more than the limit"],
            vec![],
        ),
        (
            "albert-heads",
            albert,
            json!({"num_attention_heads": 1u64 << 40}),
            &[
                "'num_attention_heads'",
                "attention heads, more than the limit of 65536",
            ],
            vec![],
        ),
        (
            "albert-layers-flag",
            albert,
            json!({}),
            &["--layers 1000000000", "layers, more than the limit of 4096"],
            vec!["--layers", "1000000000"],
        ),
        (
            "mixtral-experts",
            mixtral,
            json!({"num_local_experts": 1u64 << 40}),
            &[
                "'num_local_experts'",
                "experts, more than the limit of 65536",
            ],
            vec![],
        ),
        (
            "mixtral-per-token-2^63",
            mixtral,
            json!({"num_experts_per_tok": 1u64 << 63}),
            &[
                "'num_experts_per_tok'",
                "9223372036854775808 experts per token, more than the 3 experts there are",
            ],
            vec![],
        ),
        (
            "mixtral-per-token-4-of-3",
            mixtral,
            json!({"num_experts_per_tok": 4}),
            &[
                "'num_experts_per_tok'",
                "4 experts per token, more than the 3",
            ],
            vec![],
        ),
        (
            "mixtral-kv-heads",
            mixtral,
            json!({"num_key_value_heads": 1u64 << 33}),
            &[
                "'num_key_value_heads'",
                "key/value heads, more than the limit",
            ],
            vec![],
        ),
    ];
    for (name, build, extra, needles, flags) in cases {
        let d = tmpdir(name);
        let model = build(&d, extra);
        // `--layers` is a flag of certify only.
        let cmds: &[&str] = if flags.is_empty() {
            &["inspect", "certify"]
        } else {
            &["certify"]
        };
        for &cmd in cmds {
            let mut args = vec![cmd.to_string(), model.clone()];
            args.extend(flags.iter().map(|f| f.to_string()));
            let mut all = vec!["config.json"];
            all.extend_from_slice(needles);
            if flags.contains(&"--layers") {
                all.retain(|n| *n != "config.json");
            }
            failures.extend(refused(&format!("{name} {cmd}"), &args, &all, 150, 20));
        }
        let _ = std::fs::remove_dir_all(&d);
    }
    // The same models with sane counts are read (the caps refuse no real model).
    let d = tmpdir("counts-ok");
    let a = albert(&d.join("a").tap_mkdir(), json!({"num_hidden_layers": 12}));
    let m = mixtral(&d.join("m").tap_mkdir(), json!({}));
    for model in [a, m] {
        let o = common::run(&["inspect", &model, "--json"]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&d);
    assert_none(failures);
}

trait TapMkdir {
    fn tap_mkdir(self) -> Self;
}

impl TapMkdir for PathBuf {
    fn tap_mkdir(self) -> Self {
        std::fs::create_dir_all(&self).unwrap();
        self
    }
}

/// A chunked Flax array `w` of shape `[2, n / 2]` in `n` one-element
/// chunks, its chunk keys listed in `order`.
fn flax_chunked(n: usize, order: &[usize]) -> Vec<u8> {
    let mut f = Vec::new();
    mp_map(1, false, &mut f);
    mp_str("w", &mut f);
    mp_map(3, false, &mut f);
    mp_str("__msgpack_chunked_array__", &mut f);
    f.push(0xc3);
    mp_str("shape", &mut f);
    mp_map(2, false, &mut f);
    mp_str("0", &mut f);
    mp_uint(2, &mut f);
    mp_str("1", &mut f);
    mp_uint((n / 2) as u64, &mut f);
    mp_str("chunks", &mut f);
    mp_map(n as u32, true, &mut f);
    for &k in order {
        mp_str(&k.to_string(), &mut f);
        mp_array(&[1], "float32", &f32_bytes(&[(k % 5) as f32]), &mut f);
    }
    f
}

#[test]
fn quadratic_indexing_of_chunked_flax_arrays_is_linear() {
    let d = tmpdir("chunks");
    // 400,000 chunks (about 11 MB; 60 s and more before): in order,
    // reversed, and interleaved.
    let n = 400_000;
    let fwd: Vec<usize> = (0..n).collect();
    let rev: Vec<usize> = (0..n).rev().collect();
    let mixed: Vec<usize> = (0..n).map(|k| (k * 7919) % n).collect();
    for (name, order) in [("fwd", fwd), ("rev", rev), ("mixed", mixed)] {
        let p = d.join(format!("{name}.msgpack"));
        std::fs::write(&p, flax_chunked(n, &order)).unwrap();
        let mut cmd = common::bin();
        cmd.args(["svd", &s(&p), "--tensor", "w", "--json"]);
        let t = Instant::now();
        let o = common::run_measured(cmd, Duration::from_secs(120));
        let took = t.elapsed();
        assert_eq!(o.code, Some(0), "{name}: {}", o.stderr);
        assert!(took < Duration::from_secs(15), "{name}: took {took:?}");
        assert!(o.max_rss_kib < 400 * 1024, "{name}: {} KiB", o.max_rss_kib);
    }
    // A chunk missing, or keyed twice, or keyed "01": one line naming it.
    let mut failures = Vec::new();
    for (name, order, needle) in [
        ("missing", vec![0, 1, 2, 2], "lacks entry '3'"),
        ("twice", vec![0, 0, 1, 2], "lacks entry '3'"),
    ] {
        let p = d.join(format!("{name}.msgpack"));
        std::fs::write(&p, flax_chunked(4, &order)).unwrap();
        let args = ["svd".to_string(), s(&p), "--tensor".into(), "w".into()];
        failures.extend(refused(name, &args, &[&s(&p), needle], 100, 10));
    }
    let _ = std::fs::remove_dir_all(&d);
    assert_none(failures);
}

/// A sparse file of `len` bytes whose first bytes are `head`.
fn sparse(path: &Path, head: &[u8], len: u64) {
    use std::io::Write;
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(head).unwrap();
    f.set_len(len).unwrap();
}

#[test]
fn allocation_failure_is_an_error_not_an_abort() {
    let d = tmpdir("alloc");
    let n: u64 = 25_000;
    let bytes = n * n * 4;
    let want = format!(
        "cannot allocate the {} bytes of its float64 copy",
        n * n * 8
    );
    // safetensors: a 2.5 GB sparse file of zeros.
    let st = d.join("w.safetensors");
    let mut h = serde_json::to_vec(
        &json!({"w": {"dtype": "F32", "shape": [n, n], "data_offsets": [0, bytes]}}),
    )
    .unwrap();
    while h.len() % 8 != 0 {
        h.push(b' ');
    }
    let mut head = (h.len() as u64).to_le_bytes().to_vec();
    head.extend_from_slice(&h);
    sparse(&st, &head, head.len() as u64 + bytes);
    // ONNX: the same zeros in a sparse external data file.
    let ox = d.join("m.onnx");
    let ext = tensor_external(
        "w",
        &[n as i64, n as i64],
        &[("location", "w.bin"), ("length", &bytes.to_string())],
    );
    std::fs::write(&ox, model(&[], &[ext])).unwrap();
    sparse(&d.join("w.bin"), &[], bytes);
    // .npy: a sparse float32 array.
    let np = d.join("w.npy");
    let mut hdr = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({n}, {n}), }}");
    while (10 + hdr.len() + 1) % 64 != 0 {
        hdr.push(' ');
    }
    hdr.push('\n');
    let mut head = b"\x93NUMPY\x01\x00".to_vec();
    head.extend_from_slice(&(hdr.len() as u16).to_le_bytes());
    head.extend_from_slice(hdr.as_bytes());
    sparse(&np, &head, head.len() as u64 + bytes);
    let mut failures = Vec::new();
    for p in [&st, &ox, &np] {
        let mut args = vec!["svd", p.to_str().unwrap()];
        if p != &np {
            args.extend(["--tensor", "w"]);
        }
        let o = common::run_with_data_limit(&args, 1 << 30);
        let err = String::from_utf8_lossy(&o.stderr);
        let err = err.trim_end();
        if o.status.code() != Some(2)
            || err.lines().count() != 1
            || !err.contains(&want)
            || !err.contains(p.to_str().unwrap())
        {
            failures.push(format!("{}: {:?}: {err}", p.display(), o.status.code()));
        }
    }
    let _ = std::fs::remove_dir_all(&d);
    assert_none(failures);
}

/// A FLOAT tensor whose data is in protobuf field `field` (4 float_data,
/// 10 double_data, 9 raw_data), typed `data_type`.
fn tensor_in_field(name: &str, dims: &[i64], data_type: u64, field: u64, data: &[u8]) -> Vec<u8> {
    let mut t = Vec::new();
    let mut dd = Vec::new();
    for &x in dims {
        varint(x as u64, &mut dd);
    }
    pb_len(1, &dd, &mut t);
    pb_int(2, data_type, &mut t);
    pb_len(8, name.as_bytes(), &mut t);
    pb_len(field, data, &mut t);
    t
}

#[test]
fn onnx_readers_that_disagree_with_onnx_are_refused() {
    let d = tmpdir("onnx");
    std::fs::write(d.join("a.bin"), f32_bytes(&[1.0, 2.0, 3.0, 4.0])).unwrap();
    std::fs::write(d.join("b.bin"), f32_bytes(&[5.0, 6.0, 7.0, 8.0])).unwrap();
    let w = |entries: &[(&str, &str)]| tensor_external("w", &[2, 2], entries);
    let mm = |b: &str| node("MatMul", "/enc/q/MatMul", &["x", b], "y", None);
    let tr = |i: &str, o: &str| node("Transpose", "/enc/q/T", &[i], o, None);
    let ok = tensor_f32("w", &[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "location-twice",
            model(&[], &[w(&[("location", "a.bin"), ("location", "b.bin")])]),
            "lists the external_data key 'location' twice",
        ),
        (
            "offset-twice",
            model(
                &[],
                &[w(&[
                    ("location", "a.bin"),
                    ("offset", "0"),
                    ("offset", "4"),
                ])],
            ),
            "lists the external_data key 'offset' twice",
        ),
        (
            "float-data-as-float16",
            model(&[], &[tensor_in_field("w", &[2, 2], 10, 4, &[0; 8])]),
            "holds its data in float_data, which ONNX uses only for data_type 1",
        ),
        (
            "float-data-as-double",
            model(
                &[],
                &[tensor_in_field("w", &[2, 1], 11, 4, &f32_bytes(&[1.0; 4]))],
            ),
            "holds its data in float_data",
        ),
        (
            "double-data-as-float",
            model(&[], &[tensor_in_field("w", &[2, 2], 1, 10, &[0; 16])]),
            "holds its data in double_data, which ONNX uses only for data_type 11",
        ),
        (
            "matmul-reads-unknown-value",
            model(&[mm("nowhere")], std::slice::from_ref(&ok)),
            "the MatMul node '/enc/q/MatMul' reads 'nowhere', a value not in the graph",
        ),
        (
            "transpose-reads-unknown-value",
            model(&[tr("ghost", "wt"), mm("wt")], std::slice::from_ref(&ok)),
            "the Transpose node '/enc/q/T' reads 'ghost', a value not in the graph",
        ),
        (
            "node-output-shadows-initializer",
            model(&[tr("w", "w")], std::slice::from_ref(&ok)),
            "the value 'w' is given twice",
        ),
        (
            "two-nodes-one-output",
            model(&[tr("w", "t"), tr("w", "t")], std::slice::from_ref(&ok)),
            "the value 't' is given twice",
        ),
    ];
    // A node of a million empty outputs (2 bytes each on disk, 64 counted
    // each): over the budget, said of the whole graph (not "a node: ...").
    let mut many = Vec::new();
    for _ in 0..1_100_000 {
        pb_len(2, b"", &mut many);
    }
    pb_len(4, b"Relu", &mut many);
    let mut cases = cases;
    cases.push((
        "outputs-over-budget",
        model(&[many], std::slice::from_ref(&ok)),
        "not a readable ONNX model: the records specbound keeps of the graph (initializers, \
         node inputs and outputs) exceed the 67108864-byte limit",
    ));
    let mut failures = Vec::new();
    for (name, bytes, needle) in cases {
        let p = d.join(format!("{name}.onnx"));
        std::fs::write(&p, bytes).unwrap();
        for cmd in ["inspect", "svd"] {
            let mut args = vec![cmd.to_string(), s(&p)];
            if cmd == "svd" {
                args.extend(["--tensor".into(), "w".into()]);
            }
            failures.extend(refused(
                &format!("{name} {cmd}"),
                &args,
                &[&s(&p), needle],
                100,
                10,
            ));
        }
    }
    // A graph whose MatMul reads a graph input: the initializer is read,
    // oriented by its MatMul.
    let mut g = Vec::new();
    pb_len(1, &mm("w"), &mut g);
    pb_len(5, &ok, &mut g);
    let mut vi = Vec::new();
    pb_len(1, b"x", &mut vi);
    pb_len(11, &vi, &mut g);
    let mut m = Vec::new();
    pb_int(1, 8, &mut m);
    pb_len(7, &g, &mut m);
    let p = d.join("fine.onnx");
    std::fs::write(&p, m).unwrap();
    let o = common::run(&["svd", &s(&p), "--tensor", "w"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let _ = std::fs::remove_dir_all(&d);
    assert_none(failures);
}

#[test]
fn views_that_alias_in_memory_are_refused_by_one_rule() {
    use specbound::io::limits::{strided_span_bytes, view_materialised_bytes};
    // The DLPack input of the round: 8 bytes as a (40000, 40000) stride-0
    // view of float64: 12.8 GB from a span of 8 bytes.
    let cases: [(&[usize], &[i64], u64); 5] = [
        (&[40_000, 40_000], &[0, 0], 8),
        (&[40_000, 40_000], &[1, 0], 8),
        (&[46_000, 46_000], &[0, 1], 4),
        // Overlapping strides: each row starts one element after the last.
        (&[100_000, 1000], &[1, 1], 4),
        // Negative strides that overlap.
        (&[1000, 1000], &[-1, 1], 2),
    ];
    for (shape, strides, item) in cases {
        let span = strided_span_bytes(shape, strides, item).unwrap();
        let e = view_materialised_bytes(shape, item, span, "the memory", "copy it").unwrap_err();
        assert!(
            e.contains("would materialise") && e.contains("stride 0"),
            "{e}"
        );
    }
    // Honest views: contiguous, transposed, sliced, reversed, empty.
    let honest: [(&[usize], &[i64], u64); 5] = [
        (&[300, 400], &[400, 1], 4),
        (&[400, 300], &[1, 400], 4),
        (&[100, 50], &[400, 2], 8),
        (&[300, 400], &[-400, -1], 2),
        (&[0, 400], &[0, 0], 4),
    ];
    for (shape, strides, item) in honest {
        let span = strided_span_bytes(shape, strides, item).unwrap();
        view_materialised_bytes(shape, item, span, "the memory", "copy it").unwrap();
    }
    // Sizes that overflow are refused, not wrapped.
    assert!(strided_span_bytes(&[usize::MAX, 2], &[i64::MAX, 1], 8).is_none());
    assert!(
        view_materialised_bytes(&[usize::MAX, 4], 8, u64::MAX, "m", "c")
            .unwrap_err()
            .contains("overflows")
    );
}

#[test]
fn evidence_labels_are_rechecked_by_verify_model() {
    let d = tmpdir("labels");
    let ts: Vec<(String, DenseMatrix)> = [
        ("attention.self.query", 8, 8),
        ("attention.self.key", 8, 8),
        ("attention.self.value", 8, 8),
        ("attention.output.dense", 8, 8),
        ("intermediate.dense", 16, 8),
        ("output.dense", 8, 16),
    ]
    .iter()
    .enumerate()
    .map(|(k, &(n, r, c))| (format!("encoder.layer.0.{n}.weight"), mat(r, c, k + 1)))
    .collect();
    let cfg = json!({"model_type": "bert", "num_hidden_layers": 1, "hidden_size": 8,
           "num_attention_heads": 2, "intermediate_size": 16, "hidden_act": "gelu"});
    let model = write_model(&d, &ts, &cfg);
    let cert = d.join("c.json");
    let o = common::run(&["certify", &model, "--measures", "--out", &s(&cert)]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = common::run(&["verify", &s(&cert), "--model", &model]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let original: Value = serde_json::from_slice(&std::fs::read(&cert).unwrap()).unwrap();
    type Edit = Box<dyn Fn(&mut Value)>;
    let edits: Vec<(&str, Edit)> = vec![
        (
            "$.raw_weights[0].tensor",
            Box::new(|c: &mut Value| {
                c["raw_weights"][0]["tensor"] =
                    json!("encoder.layer.0.attention.self.key.weight[8, 8]^T")
            }),
        ),
        (
            "$.raw_weights[5].tensor",
            Box::new(|c: &mut Value| c["raw_weights"][5]["tensor"] = json!("w")),
        ),
        (
            "$.model.tensor_prefix",
            Box::new(|c: &mut Value| c["model"]["tensor_prefix"] = json!("bert.")),
        ),
        (
            "$.model.architecture",
            Box::new(|c: &mut Value| c["model"]["architecture"] = json!("roberta")),
        ),
    ];
    let mut failures = Vec::new();
    for (at, edit) in edits {
        let mut c = original.clone();
        edit(&mut c);
        let p = d.join("tampered.json");
        std::fs::write(&p, serde_json::to_vec_pretty(&c).unwrap()).unwrap();
        let o = common::run(&["verify", &s(&p), "--model", &model]);
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        if o.status.code() != Some(1) || !all.contains(at) || all.contains("certificate holds") {
            failures.push(format!("{at}: exit {:?}: {all}", o.status.code()));
        }
    }
    let _ = std::fs::remove_dir_all(&d);
    assert_none(failures);
}
