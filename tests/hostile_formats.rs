//! Hostile ONNX and Flax files: truncated, oversized, lying lengths and
//! headers, deep nesting, external data that leaves the model's directory.
//! Each is one line naming the file, exit 2, no panic, nothing on stdout.

mod common;

use common::hostile;

use common::tmpdir;

use std::path::Path;
use std::time::{Duration, Instant};

use common::assert_bad;
use common::formats::*;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn real(rel: &str) -> Vec<u8> {
    std::fs::read(common::root().join("tests/data/formats").join(rel)).unwrap()
}

/// Writes `bytes` as `name` in `d` and expects certify and svd to refuse it.
fn refused(d: &Path, name: &str, bytes: &[u8], needles: &[&str]) {
    let p = d.join(name);
    std::fs::write(&p, bytes).unwrap();
    let file = p.display().to_string();
    let mut all = vec![file.as_str()];
    all.extend_from_slice(needles);
    assert_bad(&["certify", s(&p), "--heads", "2"], &all);
    assert_bad(&["svd", s(&p), "--tensor", "w"], &all);
}

#[test]
fn truncated_and_lying_onnx_files_are_one_line_errors() {
    let d = tmpdir("onnx");
    let m = real("onnx/model.onnx");
    for cut in [1, 7, m.len() / 3, m.len() / 2, m.len() - 1] {
        refused(&d, "cut.onnx", &m[..cut], &["not a readable ONNX model"]);
    }
    let ok = tensor_f32("w", &[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    // raw_data claims more bytes than the file has.
    let mut lying = Vec::new();
    pb_len(8, b"w", &mut lying);
    varint((9 << 3) | 2, &mut lying);
    varint(1 << 40, &mut lying);
    refused(
        &d,
        "lying.onnx",
        &model(&[], &[lying]),
        &["claims 1099511627776 bytes"],
    );
    // dims say 64 x 64, the data has 16 bytes.
    let small = tensor_f32("w", &[64, 64], &[1.0, 2.0, 3.0, 4.0]);
    refused(
        &d,
        "dims.onnx",
        &model(&[], &[small]),
        &["needs 16384 bytes, the file gives 16"],
    );
    // dims that overflow, negative dims, too many dims.
    let huge = tensor_f32("w", &[1 << 62, 1 << 62], &[1.0]);
    refused(
        &d,
        "huge.onnx",
        &model(&[], &[huge]),
        &["needs more than usize::MAX bytes"],
    );
    let neg = tensor_f32("w", &[-1, 2], &[1.0, 2.0]);
    refused(
        &d,
        "neg.onnx",
        &model(&[], &[neg]),
        &["negative dimension -1"],
    );
    let deep = tensor_f32("w", &[1; 65], &[1.0]);
    refused(
        &d,
        "rank.onnx",
        &model(&[], &[deep]),
        &["more than 64 dimensions"],
    );
    // A name over the limit, a group wire type, no graph, data twice.
    let long = tensor_f32(&"n".repeat(5000), &[1, 1], &[1.0]);
    refused(
        &d,
        "name.onnx",
        &model(&[], &[long]),
        &["longer than the 4096-byte limit"],
    );
    refused(&d, "group.onnx", &[0x3b, 0x3c], &["wire type 3"]);
    refused(&d, "nograph.onnx", &[0x08, 0x08], &["has no graph"]);
    let mut twice = ok.clone();
    pb_len(9, &[0; 16], &mut twice);
    refused(
        &d,
        "twice.onnx",
        &model(&[], &[twice]),
        &["holds its data twice"],
    );
    // A varint that never ends.
    refused(
        &d,
        "varint.onnx",
        &[
            0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
        ],
        &["longer than 64 bits"],
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn onnx_subgraphs_nested_deeply_are_skipped_without_recursion() {
    let d = tmpdir("onnx-deep");
    // An If node whose attribute holds a graph holding a node holding ...
    // 2,000 levels deep: walked as bytes, never recursed into.
    let mut inner = Vec::new();
    for _ in 0..2_000 {
        let mut a = Vec::new();
        pb_len(1, b"then_branch", &mut a);
        pb_len(6, &inner, &mut a);
        let mut n = Vec::new();
        pb_len(4, b"If", &mut n);
        pb_len(5, &a, &mut n);
        let mut g = Vec::new();
        pb_len(1, &n, &mut g);
        inner = g;
    }
    let mut n = Vec::new();
    pb_len(4, b"If", &mut n);
    let mut a = Vec::new();
    pb_len(6, &inner, &mut a);
    pb_len(5, &a, &mut n);
    let w = tensor_f32("w", &[2, 2], &[3.0, 0.0, 0.0, 4.0]);
    let p = d.join("deep.onnx");
    std::fs::write(&p, model(&[n], &[w])).unwrap();
    let out = common::run(&["svd", s(&p), "--tensor", "w", "--json"]);
    common::ok_json(&out);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn onnx_external_data_cannot_leave_the_model_directory() {
    let d = tmpdir("escape");
    let inner = d.join("model");
    std::fs::create_dir_all(&inner).unwrap();
    std::fs::write(d.join("secret.bin"), [0u8; 16]).unwrap();
    for (loc, needle) in [
        (
            "../secret.bin",
            "not a relative path inside the model's directory",
        ),
        ("sub/../../secret.bin", "not a relative path inside"),
        ("/etc/passwd", "not a relative path inside"),
        ("", "not a relative path inside"),
    ] {
        let m = model(&[], &[tensor_external("w", &[2, 2], &[("location", loc)])]);
        refused(&inner, "m.onnx", &m, &[needle]);
    }
    // A symbolic link inside the directory that points out of it.
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(d.join("secret.bin"), inner.join("link.bin")).unwrap();
        let m = model(
            &[],
            &[tensor_external("w", &[2, 2], &[("location", "link.bin")])],
        );
        refused(
            &inner,
            "m.onnx",
            &m,
            &["leads out of the model's directory"],
        );
    }
    // Inside, but past the end of the data file, or a lying length.
    std::fs::write(inner.join("data.bin"), [0u8; 16]).unwrap();
    for (entries, needle) in [
        (
            vec![("location", "data.bin"), ("offset", "8")],
            "runs past the end",
        ),
        (
            vec![("location", "data.bin"), ("length", "12")],
            "needs 16 bytes, the file gives 12",
        ),
        (
            vec![("location", "data.bin"), ("offset", "-3")],
            "is not a byte count",
        ),
        (vec![("location", "missing.bin")], "missing.bin"),
    ] {
        let m = model(&[], &[tensor_external("w", &[2, 2], &entries)]);
        refused(&inner, "m.onnx", &m, &[needle]);
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn truncated_lying_and_deep_flax_files_are_one_line_errors() {
    let d = tmpdir("flax");
    let f = real("flax/flax_model.msgpack");
    for cut in [1, 2, f.len() / 3, f.len() / 2, f.len() - 1] {
        refused(
            &d,
            "cut.msgpack",
            &f[..cut],
            &["not a readable Flax checkpoint"],
        );
    }
    let mut trailing = f.clone();
    trailing.push(0xc0);
    refused(&d, "trail.msgpack", &trailing, &["1 bytes after the tree"]);
    // A map that claims 2^32 - 1 entries.
    let mut wide = Vec::new();
    mp_map(u32::MAX, true, &mut wide);
    mp_str("w", &mut wide);
    refused(&d, "wide.msgpack", &wide, &["truncated"]);
    // An array leaf whose shape disagrees with its bytes.
    let mut lying = Vec::new();
    mp_map(1, false, &mut lying);
    mp_str("w", &mut lying);
    mp_array(&[64, 64], "float32", &[0; 16], &mut lying);
    refused(
        &d,
        "shape.msgpack",
        &lying,
        &["needs 16384 bytes, the file gives 16"],
    );
    // An extension whose length runs past the end.
    let mut ext = Vec::new();
    mp_map(1, false, &mut ext);
    mp_str("w", &mut ext);
    ext.extend_from_slice(&[0xc9, 0x7f, 0xff, 0xff, 0xff, 0x01]);
    refused(&d, "ext.msgpack", &ext, &["claims 2147483647 bytes"]);
    // 100,000 nested maps: refused at depth 64, without recursing further.
    let mut deep = Vec::new();
    for _ in 0..100_000 {
        mp_map(1, false, &mut deep);
        mp_str("a", &mut deep);
    }
    deep.push(0xc0);
    refused(&d, "deep.msgpack", &deep, &["nested deeper than 64 levels"]);
    // Over a million values.
    let n = (1u32 << 20) + 1;
    let mut many = Vec::new();
    mp_map(n, true, &mut many);
    for k in 0..n {
        mp_str(&format!("{k:x}"), &mut many);
        many.push(0xc0);
    }
    refused(&d, "many.msgpack", &many, &["more than 1048576 values"]);
    // A chunked array whose chunks do not add up to its shape.
    let mut ch = Vec::new();
    mp_map(1, false, &mut ch);
    mp_str("w", &mut ch);
    mp_map(3, false, &mut ch);
    mp_str("__msgpack_chunked_array__", &mut ch);
    ch.push(0xc3);
    mp_str("shape", &mut ch);
    mp_map(2, false, &mut ch);
    mp_str("0", &mut ch);
    mp_uint(4, &mut ch);
    mp_str("1", &mut ch);
    mp_uint(4, &mut ch);
    mp_str("chunks", &mut ch);
    mp_map(1, false, &mut ch);
    mp_str("0", &mut ch);
    mp_array(&[3], "float32", &[0; 12], &mut ch);
    refused(
        &d,
        "chunks.msgpack",
        &ch,
        &["needs 64 bytes, the file gives 12"],
    );
    // A top level that is no map, a key that is no string.
    refused(
        &d,
        "top.msgpack",
        &[0x93, 1, 2, 3],
        &["top level is not a map"],
    );
    refused(&d, "key.msgpack", &[0x81, 0x01, 0xc0], &["is not a string"]);
    let _ = std::fs::remove_dir_all(&d);
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
            let mut args = vec![cmd.to_string(), hostile::s(&p)];
            if cmd == "svd" {
                args.extend(["--tensor".into(), "w".into()]);
            }
            failures.extend(hostile::refused(
                &format!("{name} {cmd}"),
                &args,
                &[&hostile::s(&p), "not a readable Flax checkpoint", needle],
                300,
                20,
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&d);
    hostile::assert_none(failures);
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
        cmd.args(["svd", &hostile::s(&p), "--tensor", "w", "--json"]);
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
        let args = [
            "svd".to_string(),
            hostile::s(&p),
            "--tensor".into(),
            "w".into(),
        ];
        failures.extend(hostile::refused(
            name,
            &args,
            &[&hostile::s(&p), needle],
            100,
            10,
        ));
    }
    let _ = std::fs::remove_dir_all(&d);
    hostile::assert_none(failures);
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
            let mut args = vec![cmd.to_string(), hostile::s(&p)];
            if cmd == "svd" {
                args.extend(["--tensor".into(), "w".into()]);
            }
            failures.extend(hostile::refused(
                &format!("{name} {cmd}"),
                &args,
                &[&hostile::s(&p), needle],
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
    let o = common::run(&["svd", &hostile::s(&p), "--tensor", "w"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let _ = std::fs::remove_dir_all(&d);
    hostile::assert_none(failures);
}
