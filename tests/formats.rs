//! ONNX and Flax checkpoints: files written by the formats' own writers
//! (tests/data/formats, made from the bundled MiniLM by
//! scripts/make_format_fixtures.py with onnx's helper and
//! flax.serialization) certify identically to the safetensors copy of the
//! same weights, and their weights are the MiniLM matrices in PyTorch's
//! orientation; byte-built variants cover wrapper prefixes, Gemm without
//! transB, Transpose-fed weights and external data.

mod common;

use common::tmpdir;

use std::path::{Path, PathBuf};

use common::formats::*;
use common::{ok_json, root, run};
use specbound::io::checkpoint::Checkpoint;
use specbound::matrix::DenseMatrix;

fn data(d: &str) -> PathBuf {
    root().join("tests/data/formats").join(d)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The certificate without what names the files: the path, file names and hashes.
fn without_files(mut j: serde_json::Value) -> serde_json::Value {
    j["model"].as_object_mut().unwrap().remove("path");
    j["model"].as_object_mut().unwrap().remove("files");
    j
}

#[test]
fn onnx_and_flax_files_certify_identically_to_the_safetensors_copy() {
    let st = ok_json(&run(&["certify", s(&data("safetensors")), "--json"]));
    for (dir, files) in [
        ("onnx", vec!["model.onnx"]),
        ("onnx_external", vec!["model.onnx", "model.onnx_data"]),
        ("flax", vec!["flax_model.msgpack"]),
    ] {
        let c = ok_json(&run(&["certify", s(&data(dir)), "--json"]));
        let got: Vec<&str> = c["model"]["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["file"].as_str().unwrap())
            .collect();
        assert_eq!(got, files, "{dir}");
        assert!(
            without_files(c) == without_files(st.clone()),
            "{dir}: certificate differs from the safetensors one"
        );
    }
    // spectra: the same rows (the ONNX graph also holds a 0-D INT64
    // constant, listed as skipped).
    let sp = |d: &str| ok_json(&run(&["spectra", s(&data(d)), "--json"]));
    let want = sp("safetensors");
    for dir in ["onnx", "onnx_external", "flax"] {
        assert!(
            sp(dir)["matrices"] == want["matrices"],
            "{dir}: spectra differ from the safetensors ones"
        );
    }
}

fn block(m: &DenseMatrix, rows: usize, cols: usize) -> DenseMatrix {
    let mut data = Vec::with_capacity(rows * cols);
    for i in 0..rows {
        data.extend_from_slice(&m.data[i * m.cols..i * m.cols + cols]);
    }
    DenseMatrix { rows, cols, data }
}

#[test]
fn onnx_and_flax_weights_are_the_minilm_matrices_as_pytorch_stores_them() {
    let full = Checkpoint::open(&root().join("data/all-MiniLM-L6-v2")).unwrap();
    for dir in ["onnx", "onnx_external", "flax"] {
        let ck = Checkpoint::open(&data(dir)).unwrap();
        for (name, rows, cols) in [
            ("encoder.layer.0.attention.self.query.weight", 64, 64),
            ("encoder.layer.0.attention.self.key.weight", 64, 64),
            ("encoder.layer.0.attention.output.dense.weight", 64, 64),
            ("encoder.layer.0.intermediate.dense.weight", 256, 64),
            ("encoder.layer.0.output.dense.weight", 64, 256),
        ] {
            let want = block(&full.read(name).unwrap().matrix, rows, cols);
            let got = ck.read(name).unwrap_or_else(|e| panic!("{dir}: {e}"));
            assert!(got.matrix == want, "{dir}: {name} differs");
        }
        // The pooler (a Gemm with transB=1 in the ONNX graph) and the
        // position embeddings (Flax `embedding`), which the bundled copy
        // lacks, as the safetensors copy holds them.
        let st = Checkpoint::open(&data("safetensors")).unwrap();
        for name in [
            "pooler.dense.weight",
            "embeddings.position_embeddings.weight",
        ] {
            assert!(
                ck.read(name).unwrap().matrix == st.read(name).unwrap().matrix,
                "{dir}: {name}"
            );
        }
        // No folded-constant or Flax names remain for the weights.
        assert!(
            !ck.names()
                .any(|n| n.starts_with("onnx::") || n.ends_with(".kernel")),
            "{dir}"
        );
    }
}

fn w(rows: usize, cols: usize, seed: u32) -> Vec<f32> {
    (0..rows * cols)
        .map(|k| (((k as u32).wrapping_mul(2654435761) ^ seed) % 1000) as f32 / 64.0 - 7.0)
        .collect()
}

fn transposed(v: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut t = vec![0.0; v.len()];
    for i in 0..rows {
        for j in 0..cols {
            t[j * rows + i] = v[i * cols + j];
        }
    }
    t
}

fn as_f64(v: &[f32], rows: usize, cols: usize) -> DenseMatrix {
    DenseMatrix {
        rows,
        cols,
        data: v.iter().map(|&x| x as f64).collect(),
    }
}

#[test]
fn wrapper_prefixes_gemm_orientations_and_transposes_are_recovered() {
    let d = tmpdir("variants");
    let (q, g0, g1, t) = (w(6, 4, 1), w(5, 4, 2), w(3, 4, 3), w(4, 2, 4));
    let bytes = model(
        &[
            // sentence-transformers prefix, torch's folded [in, out] constant.
            node(
                "MatMul",
                "/0/auto_model/encoder/layer.0/attention/self/query/MatMul",
                &["x", "onnx::MatMul_7"],
                "y",
                None,
            ),
            // Gemm with transB=0 takes B as [in, out].
            node(
                "Gemm",
                "/head/dense/Gemm",
                &["x", "onnx::Gemm_8", "b"],
                "z",
                Some(0),
            ),
            // Gemm with transB=1 on the parameter itself, [out, in].
            node("Gemm", "/proj/Gemm", &["x", "proj.weight"], "p", Some(1)),
            // A parameter [out, in] through Transpose into MatMul.
            node("Transpose", "/tied/Transpose", &["tied.weight"], "tt", None),
            node("MatMul", "/tied/MatMul", &["x", "tt"], "o", None),
        ],
        &[
            tensor_f32("onnx::MatMul_7", &[4, 6], &transposed(&q, 6, 4)),
            tensor_f32("onnx::Gemm_8", &[4, 5], &transposed(&g0, 5, 4)),
            tensor_f32("proj.weight", &[3, 4], &g1),
            tensor_f32("tied.weight", &[4, 2], &t),
        ],
    );
    let p = d.join("m.onnx");
    std::fs::write(&p, bytes).unwrap();
    let ck = Checkpoint::open(&p).unwrap();
    for (name, want) in [
        (
            "0.auto_model.encoder.layer.0.attention.self.query.weight",
            as_f64(&q, 6, 4),
        ),
        ("head.dense.weight", as_f64(&g0, 5, 4)),
        ("proj.weight", as_f64(&g1, 3, 4)),
        ("tied.weight", as_f64(&t, 4, 2)),
    ] {
        assert_eq!(ck.read(name).unwrap().matrix, want, "{name}");
    }
    // The same through the binary: svd --tensor reads the recovered name.
    let out = run(&["svd", s(&p), "--tensor", "head.dense.weight", "--json"]);
    ok_json(&out);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn onnx_external_data_at_an_offset_is_read() {
    let d = tmpdir("external");
    let v = w(3, 2, 9);
    let mut blob = vec![0u8; 12];
    blob.extend(f32_bytes(&v));
    std::fs::create_dir_all(d.join("weights")).unwrap();
    std::fs::write(d.join("weights/blob.bin"), &blob).unwrap();
    let m = model(
        &[],
        &[tensor_external(
            "w",
            &[3, 2],
            &[
                ("location", "weights/blob.bin"),
                ("offset", "12"),
                ("length", "24"),
            ],
        )],
    );
    std::fs::write(d.join("model.onnx"), m).unwrap();
    let ck = Checkpoint::open(&d.join("model.onnx")).unwrap();
    assert_eq!(ck.read("w").unwrap().matrix, as_f64(&v, 3, 2));
    let hashes = ck.file_hashes().unwrap();
    let files: Vec<&str> = hashes.iter().map(|h| h.file.as_str()).collect();
    assert_eq!(files, ["model.onnx", "weights/blob.bin"]);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn flax_plain_and_chunked_arrays_read_alike() {
    let d = tmpdir("flax");
    let k = w(4, 3, 5); // a Dense kernel [in 4, out 3]
    let mut plain = Vec::new();
    mp_map(1, false, &mut plain);
    mp_str("dense", &mut plain);
    mp_map(1, false, &mut plain);
    mp_str("kernel", &mut plain);
    mp_array(&[4, 3], "float32", &f32_bytes(&k), &mut plain);
    let mut chunked = Vec::new();
    mp_map(1, false, &mut chunked);
    mp_str("dense", &mut chunked);
    mp_map(1, false, &mut chunked);
    mp_str("kernel", &mut chunked);
    mp_map(3, false, &mut chunked);
    mp_str("__msgpack_chunked_array__", &mut chunked);
    chunked.push(0xc3);
    mp_str("shape", &mut chunked);
    mp_map(2, false, &mut chunked);
    mp_str("0", &mut chunked);
    mp_uint(4, &mut chunked);
    mp_str("1", &mut chunked);
    mp_uint(3, &mut chunked);
    mp_str("chunks", &mut chunked);
    mp_map(2, false, &mut chunked);
    // Keys out of order: chunks are taken by index, not position.
    mp_str("1", &mut chunked);
    mp_array(&[5], "float32", &f32_bytes(&k[7..]), &mut chunked);
    mp_str("0", &mut chunked);
    mp_array(&[7], "float32", &f32_bytes(&k[..7]), &mut chunked);
    let want = as_f64(&transposed(&k, 4, 3), 3, 4);
    for (n, bytes) in [("plain", plain), ("chunked", chunked)] {
        let p = d.join(format!("{n}.msgpack"));
        std::fs::write(&p, bytes).unwrap();
        let ck = Checkpoint::open(&p).unwrap();
        assert_eq!(ck.read("dense.weight").unwrap().matrix, want, "{n}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn torch_dynamo_export_in_an_onnx_directory_certifies_like_the_safetensors_copy() {
    // tests/data/formats/onnx_dynamo: torch.onnx.export(dynamo=True), torch
    // 2.15 (scripts/make_onnx_dynamo_fixtures.py): weights `val_N` stored
    // [in, out], module paths only in the nodes' metadata, laid out as
    // `onnx/model.onnx` (+ `.data`) beside config.json.
    let dir = data("onnx_dynamo");
    let st = ok_json(&run(&["certify", s(&data("safetensors")), "--json"]));
    let c = ok_json(&run(&["certify", s(&dir), "--json"]));
    let files: Vec<&str> = c["model"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["file"].as_str().unwrap())
        .collect();
    assert_eq!(files, ["onnx/model.onnx", "onnx/model.onnx.data"]);
    assert!(
        without_files(c) == without_files(st),
        "the dynamo export's certificate differs from the safetensors one"
    );
    let ck = Checkpoint::open(&dir).unwrap();
    let want = Checkpoint::open(&data("safetensors")).unwrap();
    for name in [
        "encoder.layer.0.attention.self.query.weight",
        "encoder.layer.0.attention.self.key.weight",
        "encoder.layer.0.attention.self.value.weight",
        "encoder.layer.0.attention.output.dense.weight",
        "encoder.layer.0.intermediate.dense.weight",
        "encoder.layer.0.output.dense.weight",
        "pooler.dense.weight",
    ] {
        let got = ck.read(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(got.matrix == want.read(name).unwrap().matrix, "{name}");
    }
    assert!(!ck
        .names()
        .any(|n| n.starts_with("val_") && ck.info(n).is_some_and(|(shape, _)| shape.len() == 2)));
}

#[test]
fn quantized_onnx_is_refused_naming_the_integer_weights() {
    // tests/data/formats/onnx_int8: onnxruntime 1.32's quantize_dynamic
    // (QInt8, per channel) of the dynamo export: every Linear weight is an
    // int8 `..._quantized` matrix fed to MatMulInteger. Before, `spectra`
    // exited 0 certifying the scale vectors with every weight skipped.
    let dir = data("onnx_int8");
    for cmd in ["inspect", "spectra", "certify"] {
        common::assert_bad(
            &[cmd, s(&dir)],
            &[
                "quantized ONNX model",
                "7 weight matrices",
                "val_100_quantized",
            ],
        );
    }
}

/// Regression (issue 30): a weight-only int8 ONNX model (QDQ) was refused,
/// and before that certified its scale vectors with every weight skipped.
/// tests/data/formats/onnx_qdq (scripts/make_onnx_qdq_fixture.py, onnx
/// 1.23.2's helpers and checker): the MiniLM cut's seven Linear weights
/// quantized to int8 and uint8 (per tensor and per channel along either
/// axis, with and without zero points, one through a Transpose, one named
/// `..._quantized` into a Gemm) and fed through DequantizeLinear. Each is
/// read as the graph computes it, bit for bit the reference evaluator's
/// output (onnx_qdq_expected, onnx.reference in binary32), and the model
/// certifies as that float32 copy does (L38).
#[test]
fn int8_dequantize_linear_weights_are_read_as_the_graph_computes_them() {
    let q = Checkpoint::open(&data("onnx_qdq")).unwrap();
    let e = Checkpoint::open(&data("onnx_qdq_expected")).unwrap();
    let names: Vec<&str> = e.names().collect();
    assert_eq!(names.len(), 7);
    for name in names {
        let got = q.read(name).unwrap_or_else(|err| panic!("{name}: {err}"));
        let want = e.read(name).unwrap().matrix;
        assert_eq!(
            (got.matrix.rows, got.matrix.cols),
            (want.rows, want.cols),
            "{name}"
        );
        let differ = got
            .matrix
            .data
            .iter()
            .zip(&want.data)
            .filter(|(a, b)| a.to_bits() != b.to_bits())
            .count();
        assert_eq!(
            differ, 0,
            "{name}: entries differ from onnx's DequantizeLinear"
        );
        let dtype = got.dtype.to_string();
        assert!(dtype.ends_with("INT8_DQ"), "{name}: {dtype}");
    }
    let st = ok_json(&run(&["certify", s(&data("onnx_qdq_expected")), "--json"]));
    let c = ok_json(&run(&["certify", s(&data("onnx_qdq")), "--json"]));
    assert!(
        without_files(c) == without_files(st),
        "certificate differs from the float32 copy's"
    );
    let sp = |d: &str| {
        let dir = data(d);
        let args = [
            "spectra",
            s(&dir),
            "--json",
            "--include",
            r"(encoder|pooler)\..*weight",
        ];
        ok_json(&run(&args))
    };
    let (got, want) = (sp("onnx_qdq"), sp("onnx_qdq_expected"));
    // The same rows but the stored type (int8_dq, uint8_dq against f32).
    let strip = |v: &serde_json::Value| -> Vec<serde_json::Value> {
        let mut rows = v["matrices"].as_array().unwrap().clone();
        for r in &mut rows {
            r.as_object_mut().unwrap().remove("dtype");
        }
        rows
    };
    assert_eq!(strip(&got), strip(&want));
    assert_eq!(strip(&got).len(), 7);
}

/// A DequantizeLinear that specbound would read otherwise than the graph
/// is refused in one line naming the weight: blocked quantization, a
/// float16 scale, a scale count that fits no axis, a zero point of another
/// type.
#[test]
fn dequantize_linear_weights_read_otherwise_are_refused() {
    let d = tmpdir("qdq-bad");
    let int8 = |name: &str, dims: &[i64], v: &[i8]| {
        let raw: Vec<u8> = v.iter().map(|&x| x as u8).collect();
        tensor_raw(name, dims, 3, &raw)
    };
    let q = int8("w_q", &[4, 6], &[1; 24]);
    let dq = |inputs: &[&str], attrs: Vec<u8>| {
        let mut n = node("DequantizeLinear", "dq", inputs, "w", None);
        n.extend(attrs);
        n
    };
    let mm = node("MatMul", "/layer/MatMul", &["x", "w"], "y", None);
    let attr_int = |name: &str, v: i64| {
        let mut a = Vec::new();
        pb_len(1, name.as_bytes(), &mut a);
        pb_int(3, v as u64, &mut a);
        pb_int(20, 2, &mut a);
        let mut out = Vec::new();
        pb_len(5, &a, &mut out);
        out
    };
    let scale = tensor_f32("s", &[], &[0.5]);
    // (the DequantizeLinear node, the initializers beside the weights, the message)
    type Case = (Vec<u8>, Vec<Vec<u8>>, &'static str);
    let cases: Vec<Case> = vec![
        (
            dq(&["w_q", "s"], attr_int("block_size", 2)),
            vec![scale.clone()],
            "block_size",
        ),
        (
            dq(&["w_q", "s16"], vec![]),
            vec![tensor_raw("s16", &[], 10, &[0, 0x38])],
            "not float32",
        ),
        (
            dq(&["w_q", "s5"], vec![]),
            vec![tensor_f32("s5", &[5], &[1.0; 5])],
            "not one per index of axis 1",
        ),
        (
            dq(&["w_q", "s", "zu"], vec![]),
            vec![scale.clone(), tensor_raw("zu", &[], 2, &[0])],
            "zero point 'zu'",
        ),
    ];
    for (i, (dq_node, extra, msg)) in cases.into_iter().enumerate() {
        let mut inits = vec![q.clone()];
        inits.extend(extra);
        let p = d.join(format!("m{i}.onnx"));
        std::fs::write(&p, model(&[dq_node, mm.clone()], &inits)).unwrap();
        common::assert_bad(&["spectra", s(&p)], &["w_q", msg]);
    }
    // Dimensions that overflow the scales' byte count: refused, no panic.
    let huge = 1i64 << 62;
    let p = d.join("huge.onnx");
    let bytes = model(
        &[dq(&["w_q", "sh"], attr_int("axis", 0)), mm.clone()],
        &[
            int8("w_q", &[huge, 1], &[1; 24]),
            tensor_f32("sh", &[huge], &[1.0; 4]),
        ],
    );
    std::fs::write(&p, bytes).unwrap();
    common::assert_bad(&["spectra", s(&p)], &["huge.onnx"]);
    // Per channel along axis 0, a scale per row: read, row r times s_r.
    let p = d.join("ok.onnx");
    let qs: Vec<i8> = (0..24).map(|k| (k as i8) - 12).collect();
    let bytes = model(
        &[dq(&["w_q", "s4", "z4"], attr_int("axis", 0)), mm.clone()],
        &[
            int8("w_q", &[4, 6], &qs),
            tensor_f32("s4", &[4], &[0.5, 0.25, 3.0, f32::MIN_POSITIVE]),
            int8("z4", &[4], &[0, 1, -128, 127]),
        ],
    );
    std::fs::write(&p, bytes).unwrap();
    let ck = Checkpoint::open(&p).unwrap();
    let m = ck.read("w_q").unwrap().matrix;
    // MatMul's B [4, 6] = [in, out], presented [out, in] = [6, 4].
    let (sc, zp) = ([0.5f32, 0.25, 3.0, f32::MIN_POSITIVE], [0i32, 1, -128, 127]);
    for r in 0..4 {
        for c in 0..6 {
            let want = ((f64::from(qs[r * 6 + c]) - f64::from(zp[r])) * f64::from(sc[r])) as f32;
            assert_eq!(m.data[c * 4 + r], f64::from(want), "({r}, {c})");
        }
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn doubled_sentence_transformers_prefix_takes_the_biases_prefix() {
    // The legacy exporter scopes a wrapped sentence-transformers model's
    // nodes `/model/model.0/auto_model/...`, its biases keep the parameter
    // names `model.0.auto_model....bias`: the weight follows its bias.
    let d = tmpdir("doubled");
    let q = w(6, 4, 5);
    let bytes = model(
        &[node(
            "MatMul",
            "/model/model.0/auto_model/encoder/layer.0/attention/self/query/MatMul",
            &["x", "onnx::MatMul_9"],
            "y",
            None,
        )],
        &[
            tensor_f32("onnx::MatMul_9", &[4, 6], &transposed(&q, 6, 4)),
            tensor_f32(
                "model.0.auto_model.encoder.layer.0.attention.self.query.bias",
                &[6],
                &[0.0; 6],
            ),
        ],
    );
    let p = d.join("m.onnx");
    std::fs::write(&p, bytes).unwrap();
    let ck = Checkpoint::open(&p).unwrap();
    let name = "model.0.auto_model.encoder.layer.0.attention.self.query.weight";
    assert_eq!(ck.read(name).unwrap().matrix, as_f64(&q, 6, 4));
    let _ = std::fs::remove_dir_all(&d);
}
