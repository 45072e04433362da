//! Hostile ONNX and Flax files: truncated, oversized, lying lengths and
//! headers, deep nesting, external data that leaves the model's directory.
//! Each is one line naming the file, exit 2, no panic, nothing on stdout.

mod common;

use std::path::{Path, PathBuf};

use common::assert_bad;
use common::formats::*;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "specbound-hostile-formats-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

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
