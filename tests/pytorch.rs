//! PyTorch checkpoints: files PyTorch wrote (tests/data/torch), files
//! written byte by byte as torch.save writes them (tests/common/torch.rs),
//! the MiniLM weights as a `pytorch_model.bin` against the safetensors copy,
//! and hostile pickles (every global a state dict does not need is refused,
//! naming the file and the global, with no side effect).

mod common;

use common::tmpdir;

use std::path::{Path, PathBuf};

use common::torch::{
    torch_legacy_with_pickle, torch_zip_with_pickle, write_torch_legacy, write_torch_zip, Pickle,
    TorchTensor,
};
use specbound::io::read_matrix;
use specbound::matrix::{DenseMatrix, SourceDtype};

fn data(name: &str) -> PathBuf {
    common::root().join("tests/data/torch").join(name)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn files_written_by_torch_read_exactly() {
    // zip container, torch.save of {"tensor": [[1, 2], [3, 4], [5, 6]]} (float32).
    let m = read_matrix(&data("tensor_2d.pt"), None).unwrap();
    assert_eq!(m.dtype, SourceDtype::F32);
    assert_eq!(
        m.matrix,
        DenseMatrix {
            rows: 3,
            cols: 2,
            data: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        }
    );
    // A stride-0 view of arange(32)[1:4] expanded to 2 x 3.
    let m = read_matrix(&data("non_contiguous.pt"), Some("expanded")).unwrap();
    assert_eq!(m.matrix.data, vec![1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
    // Protocol 4 (STACK_GLOBAL, MEMOIZE, FRAME).
    let m = read_matrix(&data("protocol4.pt"), Some("weight")).unwrap();
    assert_eq!(m.matrix.data, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    // The legacy stream: read, 2 x 3, and the same values through the CLI.
    let m = read_matrix(&data("simple_legacy.pt"), Some("weight")).unwrap();
    assert_eq!((m.matrix.rows, m.matrix.cols), (2, 3));
    let out = common::run(&[
        "svd",
        s(&data("simple_legacy.pt")),
        "--tensor",
        "weight",
        "--json",
    ]);
    let j = common::ok_json(&out);
    assert_eq!(j["rows"], 2);
    assert_eq!(j["dtype"], "f32");
    // A tensor that is not 2-D, and one that is not there, are named.
    common::assert_bad(
        &["svd", s(&data("float16.pt")), "--tensor", "tensor"],
        &["float16.pt", "tensor 'tensor'", "expected a 2-D tensor"],
    );
    common::assert_bad(
        &["svd", s(&data("state_dict.pt")), "--tensor", "nope"],
        &["state_dict.pt", "no tensor named 'nope'", "'weight'"],
    );
}

#[test]
fn full_model_save_is_refused_naming_the_global() {
    // torch.save(model) pickles the module class itself.
    common::assert_bad(
        &["svd", s(&data("full_model.pt"))],
        &[
            "full_model.pt",
            "'__main__.Net'",
            "nothing in the file was executed",
        ],
    );
}

fn sample(rows: usize, cols: usize, seed: u64) -> Vec<f64> {
    let mut rng = common::Rng(seed);
    (0..rows * cols)
        .map(|_| (rng.next_u64() % 2001) as f64 / 1024.0 - 0.9765625)
        .collect()
}

#[test]
fn every_dtype_and_container_converts_exactly() {
    let d = tmpdir("dtypes");
    let (r, c) = (5, 7);
    let v = sample(r, c, 3);
    let f16: Vec<u8> = v
        .iter()
        .flat_map(|&x| half::f16::from_f64(x).to_bits().to_le_bytes())
        .collect();
    let bf16: Vec<u8> = v
        .iter()
        .flat_map(|&x| half::bf16::from_f64(x).to_bits().to_le_bytes())
        .collect();
    let f64b: Vec<u8> = v.iter().flat_map(|&x| x.to_le_bytes()).collect();
    let tensors = vec![
        TorchTensor::f32("w32", r, c, &v),
        TorchTensor::contiguous("w16", "HalfStorage", 2, &[r, c], f16),
        TorchTensor::contiguous("wbf", "BFloat16Storage", 2, &[r, c], bf16),
        TorchTensor::contiguous("w64", "DoubleStorage", 8, &[r, c], f64b),
        TorchTensor::f32_transposed_view("wt", r, c, &v),
        TorchTensor::contiguous("ids", "LongStorage", 8, &[1, 3], vec![0u8; 24]),
    ];
    let expect = |name: &str| -> (Vec<f64>, SourceDtype) {
        match name {
            "w32" | "wt" => (
                v.iter().map(|&x| x as f32 as f64).collect(),
                SourceDtype::F32,
            ),
            "w16" => (
                v.iter().map(|&x| half::f16::from_f64(x).to_f64()).collect(),
                SourceDtype::F16,
            ),
            "wbf" => (
                v.iter()
                    .map(|&x| half::bf16::from_f64(x).to_f64())
                    .collect(),
                SourceDtype::BF16,
            ),
            _ => (v.clone(), SourceDtype::F64),
        }
    };
    for (file, legacy) in [("z.pth", false), ("l.pt", true)] {
        let p = d.join(file);
        if legacy {
            write_torch_legacy(&p, &tensors);
        } else {
            write_torch_zip(&p, &tensors);
        }
        for name in ["w32", "w16", "wbf", "w64", "wt"] {
            let m = read_matrix(&p, Some(name)).unwrap();
            let (want, dt) = expect(name);
            assert_eq!(m.dtype, dt, "{file} {name}");
            assert_eq!((m.matrix.rows, m.matrix.cols), (r, c), "{file} {name}");
            // Bit for bit: the conversion to f64 is exact (L1).
            assert_eq!(
                m.matrix
                    .data
                    .iter()
                    .map(|x| x.to_bits())
                    .collect::<Vec<_>>(),
                want.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                "{file} {name}"
            );
        }
        common::assert_bad(
            &["svd", s(&p), "--tensor", "ids"],
            &[file, "tensor 'ids'", "unsupported dtype I64"],
        );
        // Without a name, several candidates are listed.
        common::assert_bad(&["svd", s(&p)], &[file, "a tensor name is needed", "'w16'"]);
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// The certificate without what names the files: the path, file names and hashes.
fn without_files(mut j: serde_json::Value) -> serde_json::Value {
    j["model"].as_object_mut().unwrap().remove("path");
    j["model"].as_object_mut().unwrap().remove("files");
    j
}

#[test]
fn minilm_as_pytorch_model_bin_certifies_identically_to_the_safetensors_copy() {
    let bundle = common::root().join("data/all-MiniLM-L6-v2");
    let tensors = common::torch::tensors_of_safetensors(&bundle.join("model.safetensors"));
    let d = tmpdir("minilm-bin");
    std::fs::copy(bundle.join("config.json"), d.join("config.json")).unwrap();
    write_torch_zip(&d.join("pytorch_model.bin"), &tensors);
    let st = common::ok_json(&common::run(&["certify", s(&bundle), "--json"]));
    let pt = common::ok_json(&common::run(&["certify", s(&d), "--json"]));
    assert_eq!(pt["model"]["files"][0]["file"], "pytorch_model.bin");
    assert_ne!(
        pt["model"]["files"][0]["sha256"],
        st["model"]["files"][0]["sha256"]
    );
    assert!(
        without_files(pt) == without_files(st.clone()),
        "certificates differ"
    );

    // Sharded: pytorch_model.bin.index.json over two legacy-format shards.
    let sd = tmpdir("minilm-sharded");
    std::fs::copy(bundle.join("config.json"), sd.join("config.json")).unwrap();
    let (a, b) = tensors.split_at(tensors.len() / 2);
    write_torch_legacy(&sd.join("pytorch_model-00001-of-00002.bin"), a);
    write_torch_zip(&sd.join("pytorch_model-00002-of-00002.bin"), b);
    let mut map = serde_json::Map::new();
    for (part, file) in [
        (a, "pytorch_model-00001-of-00002.bin"),
        (b, "pytorch_model-00002-of-00002.bin"),
    ] {
        for t in part {
            map.insert(t.name.clone(), file.into());
        }
    }
    std::fs::write(
        sd.join("pytorch_model.bin.index.json"),
        serde_json::to_vec(&serde_json::json!({"metadata": {}, "weight_map": map})).unwrap(),
    )
    .unwrap();
    let sh = common::ok_json(&common::run(&["certify", s(&sd), "--json"]));
    assert_eq!(sh["model"]["files"].as_array().unwrap().len(), 2);
    assert!(
        without_files(sh) == without_files(st),
        "sharded certificate differs"
    );
    // verify --model confirms the .bin certificate against the .bin weights.
    let cert = d.join("cert.json");
    assert!(common::run(&["certify", s(&d), "--out", s(&cert)])
        .status
        .success());
    let out = common::run(&["verify", s(&cert), "--model", s(&d)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&d);
    let _ = std::fs::remove_dir_all(&sd);
}

#[test]
fn bert_miniature_key_names_are_recognised_and_heads_ignored() {
    // The BERT Miniatures' pytorch_model.bin: bert.encoder.layer.N...,
    // plus pooler and masked-LM heads that are not proxies.
    let d = tmpdir("miniature");
    let (n, ff, layers) = (8, 16, 2);
    let mut ts = Vec::new();
    let mut seed = 10;
    for l in 0..layers {
        for (name, r, c) in [
            ("attention.self.query", n, n),
            ("attention.self.key", n, n),
            ("attention.self.value", n, n),
            ("attention.output.dense", n, n),
            ("intermediate.dense", ff, n),
            ("output.dense", n, ff),
        ] {
            seed += 1;
            ts.push(TorchTensor::f32(
                &format!("bert.encoder.layer.{l}.{name}.weight"),
                r,
                c,
                &sample(r, c, seed),
            ));
        }
    }
    ts.push(TorchTensor::f32(
        "bert.pooler.dense.weight",
        n,
        n,
        &sample(n, n, 99),
    ));
    ts.push(TorchTensor::f32(
        "cls.predictions.transform.dense.weight",
        n,
        n,
        &sample(n, n, 98),
    ));
    write_torch_zip(&d.join("pytorch_model.bin"), &ts);
    std::fs::write(
        d.join("config.json"),
        serde_json::to_vec(&serde_json::json!({
            "model_type": "bert", "num_hidden_layers": layers, "hidden_size": n,
            "num_attention_heads": 2, "intermediate_size": ff, "hidden_act": "gelu"
        }))
        .unwrap(),
    )
    .unwrap();
    let j = common::ok_json(&common::run(&["inspect", s(&d), "--json"]));
    assert_eq!(j["architecture"], "bert");
    assert_eq!(j["tensor_prefix"], "bert.");
    let unmapped: Vec<&str> = j["unmapped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["tensor"].as_str().unwrap())
        .collect();
    assert!(
        unmapped.contains(&"cls.predictions.transform.dense.weight"),
        "{unmapped:?}"
    );
    let c = common::ok_json(&common::run(&["certify", s(&d), "--json"]));
    assert_eq!(
        c["matrices"].as_array().unwrap().len(),
        layers * (2 * 2 + 2)
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// A zip checkpoint around `pickle` (one small f32 tensor as storage 0).
fn hostile_zip(d: &Path, name: &str, pickle: Vec<u8>) -> PathBuf {
    let t = [TorchTensor::f32("w", 2, 2, &[1.0, 2.0, 3.0, 4.0])];
    let p = d.join(name);
    std::fs::write(&p, torch_zip_with_pickle(pickle, &t)).unwrap();
    p
}

/// `os.system('touch MARKER')` as a pickle `__reduce__` writes it.
fn os_system_pickle(marker: &Path, proto4: bool) -> Vec<u8> {
    let cmd = format!("touch {}", marker.display());
    if proto4 {
        let lit = |v: &mut Vec<u8>, s: &str| {
            v.push(0x8c);
            v.push(s.len() as u8);
            v.extend_from_slice(s.as_bytes());
            v.push(0x94);
        };
        let mut v = vec![0x80, 4];
        lit(&mut v, "posix");
        lit(&mut v, "system");
        v.push(0x93);
        lit(&mut v, &cmd);
        v.extend_from_slice(&[0x85, b'R', b'.']);
        v
    } else {
        let mut p = Pickle::new();
        p.global("os", "system")
            .str(&cmd)
            .op(0x85)
            .op(b'R')
            .op(b'.');
        p.0
    }
}

#[test]
fn hostile_pickles_are_refused_naming_the_global_with_no_side_effect() {
    let d = tmpdir("hostile");
    let marker = d.join("EXECUTED");
    let w = [TorchTensor::f32("w", 2, 2, &[1.0, 2.0, 3.0, 4.0])];
    let cases: Vec<(PathBuf, &str)> = vec![
        (
            hostile_zip(&d, "os_system.bin", os_system_pickle(&marker, false)),
            "'os.system'",
        ),
        (
            hostile_zip(&d, "posix_system_p4.pt", os_system_pickle(&marker, true)),
            "'posix.system'",
        ),
        (
            {
                // builtins.eval smuggled inside a valid state dict (as a value).
                let mut p = Pickle::new();
                p.global("collections", "OrderedDict")
                    .op(b')')
                    .op(b'R')
                    .op(b'(');
                p.str("w").tensor(&w[0], "0", false);
                p.str("x")
                    .global("builtins", "eval")
                    .str("1+1")
                    .op(0x85)
                    .op(b'R');
                p.op(b'u').op(b'.');
                hostile_zip(&d, "eval_value.bin", p.0)
            },
            "'builtins.eval'",
        ),
        (
            {
                // A __reduce__ trick: a rebuild function outside the list.
                let mut p = Pickle::new();
                p.global("torch._utils", "_rebuild_device_tensor_from_numpy")
                    .op(b')')
                    .op(b'R')
                    .op(b'.');
                hostile_zip(&d, "device_numpy.bin", p.0)
            },
            "'torch._utils._rebuild_device_tensor_from_numpy'",
        ),
        (
            {
                // INST (protocol 0) creates an instance of an inline global.
                let mut p = Pickle::new();
                p.op(b'(').str("id");
                p.0.extend_from_slice(b"isubprocess\nPopen\n.");
                hostile_zip(&d, "inst.bin", p.0)
            },
            "'subprocess.Popen'",
        ),
        (
            {
                // The extension registry reaches a callable by number.
                hostile_zip(&d, "ext.bin", vec![0x80, 2, 0x82, 1, b')', b'R', b'.'])
            },
            "extension registry",
        ),
        (
            {
                // The legacy stream: the object pickle calls os.system.
                let p = d.join("legacy_os_system.bin");
                std::fs::write(
                    &p,
                    torch_legacy_with_pickle(os_system_pickle(&marker, false), &w),
                )
                .unwrap();
                p
            },
            "'os.system'",
        ),
    ];
    for (p, global) in &cases {
        let name = p.file_name().unwrap().to_str().unwrap();
        for cmd in [
            vec!["svd", s(p)],
            vec!["certify", s(p)],
            vec!["inspect", s(p)],
        ] {
            common::assert_bad(&cmd, &[name, global, "nothing in the file was executed"]);
        }
        assert!(!marker.exists(), "{name}: a pickle was executed");
    }
    // In a model directory, and through audit and verify --model.
    let md = d.join("model");
    std::fs::create_dir(&md).unwrap();
    std::fs::copy(&cases[0].0, md.join("pytorch_model.bin")).unwrap();
    common::assert_bad(&["certify", s(&md)], &["pytorch_model.bin", "'os.system'"]);
    let claims = d.join("claims.csv");
    std::fs::write(&claims, "tensor,quantity,value\nw,sigma_max,5\n").unwrap();
    common::assert_bad(
        &["audit", s(&md), s(&claims)],
        &["pytorch_model.bin", "'os.system'"],
    );
    assert!(!marker.exists());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn malformed_containers_name_the_file() {
    let d = tmpdir("malformed");
    let w = [TorchTensor::f32("w", 2, 2, &[1.0, 2.0, 3.0, 4.0])];
    // A storage entry missing from the archive.
    let mut entries = vec![(
        "archive/data.pkl".to_string(),
        Pickle::state_dict(&w, false),
    )];
    entries.push(("archive/version".into(), b"3\n".to_vec()));
    let p = d.join("missing_storage.pt");
    std::fs::write(&p, common::torch::zip(&entries)).unwrap();
    common::assert_bad(
        &["svd", s(&p), "--tensor", "w"],
        &["missing_storage.pt", "tensor 'w'", "cannot read"],
    );
    // A tensor larger than its storage.
    let mut big = w[0].clone();
    big.shape = vec![3, 3];
    big.stride = vec![3, 1];
    let p = d.join("short_storage.pt");
    std::fs::write(
        &p,
        torch_zip_with_pickle(Pickle::state_dict(&[big], false), &w),
    )
    .unwrap();
    common::assert_bad(&["svd", s(&p)], &["short_storage.pt", "needs 9 elements"]);
    // Two data.pkl: ambiguous.
    let entries = vec![
        ("a/data.pkl".to_string(), Pickle::state_dict(&w, false)),
        ("b/data.pkl".to_string(), Pickle::state_dict(&w, false)),
    ];
    let p = d.join("two.pt");
    std::fs::write(&p, common::torch::zip(&entries)).unwrap();
    common::assert_bad(&["svd", s(&p)], &["two.pt", "2 data.pkl entries"]);
    // NaN in a weight.
    let p = d.join("nan.pt");
    write_torch_zip(
        &p,
        &[TorchTensor::f32("w", 2, 2, &[1.0, f64::NAN, 3.0, 4.0])],
    );
    common::assert_bad(
        &["svd", s(&p)],
        &[
            "nan.pt",
            "tensor 'w'",
            "non-finite value NaN at row 0, col 1",
        ],
    );
    // A tar-format checkpoint (torch before 0.1.10).
    let mut tar = vec![0u8; 1024];
    tar[..8].copy_from_slice(b"sys_info");
    tar[257..262].copy_from_slice(b"ustar");
    let p = d.join("old.tar");
    std::fs::write(&p, &tar).unwrap();
    common::assert_bad(
        &["svd", s(&p)],
        &["old.tar", "tar-format PyTorch checkpoint"],
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn pickle_over_the_caps_is_refused_in_bounded_memory() {
    let d = tmpdir("caps");
    let w = [TorchTensor::f32("w", 2, 2, &[1.0, 2.0, 3.0, 4.0])];
    // 2^20 + 1 one-byte opcodes (EMPTY_DICT): each would cost the reader
    // about 100 bytes of stack.
    let mut p = vec![0x80, 2];
    p.extend(std::iter::repeat_n(b'}', (1 << 20) + 1));
    p.push(b'.');
    let f = d.join("many_ops.pt");
    std::fs::write(&f, torch_zip_with_pickle(p, &w)).unwrap();
    let out = common::run_with_data_limit(&["svd", s(&f)], 200 << 20);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("many_ops.pt") && err.contains("more than 1048576 opcodes"),
        "{err}"
    );
    // A data.pkl over 16 MiB.
    let mut p = Pickle::new();
    p.str(&"x".repeat(17 << 20)).op(b'.');
    let f = d.join("big_pickle.pt");
    std::fs::write(&f, torch_zip_with_pickle(p.0, &w)).unwrap();
    common::assert_bad(
        &["svd", s(&f)],
        &["big_pickle.pt", "larger than the limit of 16777216 bytes"],
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn fused_moe_experts_in_a_bin_certify_as_in_safetensors() {
    // tests/data/torch/mixtral_fused_{bin,st}: one transformers 5 Mixtral
    // state dict (fused 3-D `mlp.experts.gate_up_proj` / `down_proj`) saved
    // by torch.save and by safetensors (scripts/make_moe_bin_fixture.py).
    // Before, certify exited 2 on the .bin and spectra skipped every expert.
    let (bin, st) = (data("mixtral_fused_bin"), data("mixtral_fused_st"));
    let c = |d: &Path| common::ok_json(&common::run(&["certify", s(d), "--json"]));
    assert!(without_files(c(&bin)) == without_files(c(&st)));
    let sp = |d: &Path| common::ok_json(&common::run(&["spectra", s(d), "--json"]));
    let (a, b) = (sp(&bin), sp(&st));
    assert!(a["matrices"] == b["matrices"] && a["skipped"] == b["skipped"]);
    let experts = a["matrices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["tensor"].as_str().unwrap().contains("experts"))
        .count();
    assert!(experts > 0, "{a}");
    // Each expert's slice reads as the safetensors one, exactly.
    let (kb, ks) = (
        specbound::io::checkpoint::Checkpoint::open(&bin).unwrap(),
        specbound::io::checkpoint::Checkpoint::open(&st).unwrap(),
    );
    for name in [
        "model.layers.1.mlp.experts.gate_up_proj",
        "model.layers.1.mlp.experts.down_proj",
    ] {
        for e in 0..4 {
            assert_eq!(
                kb.read_slice(name, e).unwrap().matrix,
                ks.read_slice(name, e).unwrap().matrix,
                "{name}[{e}]"
            );
        }
        assert!(kb.read_slice(name, 4).is_err());
    }
}
