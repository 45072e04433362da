//! A model held in memory (`io::memory::MemoryModel`, the Python module's
//! `certify(state_dict)`) certifies as the same tensors on disk: the same
//! certificate apart from the file section, the same spectra; its hash is
//! that of the tensors' safetensors serialisation, and `verify` against a
//! model on disk says what the hash can and cannot show.

mod common;

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use specbound::certificate::Certificate;
use specbound::certify::CertifyOptions;
use specbound::cmd::certify::{Certified, CertifyRequest};
use specbound::cmd::spectra::SpectraRequest;
use specbound::cmd::{ModelRef, Silent};
use specbound::evidence::Answer;
use specbound::io::memory::{MemoryModel, MemoryTensor, MEMORY_LABEL};
use specbound::linalg::Precision;
use specbound::matrix::SourceDtype;

/// A fresh directory under the target directory.
fn temp_dir(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("in-memory-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The tensors of a safetensors file: (name, dtype, shape, bytes).
fn tensors_of(path: &Path) -> Vec<(String, SourceDtype, Vec<usize>, Vec<u8>)> {
    let bytes = std::fs::read(path).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut out = Vec::new();
    for (name, t) in st.tensors() {
        let dtype = match t.dtype() {
            safetensors::Dtype::F32 => SourceDtype::F32,
            safetensors::Dtype::F16 => SourceDtype::F16,
            other => panic!("unexpected dtype {other:?}"),
        };
        out.push((name, dtype, t.shape().to_vec(), t.data().to_vec()));
    }
    out
}

/// The one-layer MiniLM on disk, and the same tensors and config in memory.
fn one_layer() -> (PathBuf, MemoryModel) {
    let dir = temp_dir("one-layer");
    common::family::minilm(&common::root().join("data/all-MiniLM-L6-v2"), &dir, 1);
    let owned = tensors_of(&dir.join("model.safetensors"));
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("config.json")).unwrap()).unwrap();
    let model = memory_of(&owned, Some(config));
    (dir, model)
}

fn certify(model: ModelRef) -> Certificate {
    let req = CertifyRequest::new(model, CertifyOptions::default());
    match specbound::cmd::certify::run(&req, &Silent).unwrap().outcome {
        Certified::Whole(c) => *c,
        _ => panic!("not certified"),
    }
}

/// The certificate's JSON without its file section (`model.path`,
/// `model.files`).
fn without_files(c: &Certificate) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_str(&c.to_json_pretty()).unwrap();
    let m = v["model"].as_object_mut().unwrap();
    m.remove("path").unwrap();
    m.remove("files").unwrap();
    v
}

#[test]
fn memory_certifies_as_disk_and_verify_says_what_the_hash_shows() {
    let (dir, mem) = one_layer();
    // The serialisation is the safetensors crate's, byte for byte.
    let owned = tensors_of(&dir.join("model.safetensors"));
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = owned
        .iter()
        .map(|(n, _, shape, data)| {
            let v =
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), data)
                    .unwrap();
            (n.clone(), v)
        })
        .collect();
    let canonical = safetensors::tensor::serialize(views, None).unwrap();
    assert_eq!(mem.bytes(), &canonical[..]);
    assert_eq!(mem.sha256(), format!("{:x}", Sha256::digest(&canonical)));

    let on_disk = certify(ModelRef::Path(dir.clone()));
    let in_memory = certify(ModelRef::Memory(mem.clone()));
    assert_eq!(without_files(&on_disk), without_files(&in_memory));
    assert_eq!(in_memory.model.path, MEMORY_LABEL);
    assert_eq!(in_memory.model.files.len(), 1);
    assert_eq!(in_memory.model.files[0].file, MEMORY_LABEL);
    assert_eq!(in_memory.model.files[0].sha256, mem.sha256());
    // The certificate reads back (the schema holds it).
    let back = Certificate::parse(in_memory.to_json_pretty().as_bytes(), "memory.json").unwrap();
    assert_eq!(back, in_memory);

    // Against the directory written by another writer: the hash differs,
    // and the line says why it cannot vouch for the weights.
    let v = specbound::evidence::verify::verify_with_model(&in_memory, &dir).unwrap();
    let why = v
        .failure
        .expect("a memory certificate against another file");
    assert!(
        why.contains("weights in memory") && why.contains("save_file"),
        "{why}"
    );
    // Against the tensors saved canonically (what safetensors' save_file
    // writes): the hash matches and every matrix is checked.
    let saved = temp_dir("saved");
    std::fs::write(saved.join("model.safetensors"), mem.bytes()).unwrap();
    std::fs::copy(dir.join("config.json"), saved.join("config.json")).unwrap();
    let v = specbound::evidence::verify::verify_with_model(&in_memory, &saved).unwrap();
    assert_eq!(v.answer(), Answer::Holds, "{:?}", v.failure);
    assert!(v.checks > 1);
    // The disk certificate is unaffected: it verifies against its own files.
    let v = specbound::evidence::verify::verify_with_model(&on_disk, &dir).unwrap();
    assert_eq!(v.answer(), Answer::Holds, "{:?}", v.failure);

    // spectra: the same table from memory as from the directory.
    let spectra = |model: ModelRef| {
        let req = SpectraRequest {
            model,
            include: Some(r"attention\.self\.(query|key)\.weight".into()),
            exclude: None,
            max_elements: None,
            schatten_p: vec![],
            precision: Precision::F64,
            rtol: 1e-11,
            csv: None,
            singular_values: false,
        };
        specbound::cmd::spectra::run(&req, &Silent).unwrap()
    };
    let a = spectra(ModelRef::Path(dir.clone()));
    let b = spectra(ModelRef::Memory(mem.clone()));
    assert_eq!(a.rows.len(), 2);
    assert_eq!(a.csv(), b.csv());

    // The key opens the model only while a handle lives.
    let key = mem.key().to_path_buf();
    drop(mem);
    assert!(specbound::io::checkpoint::Checkpoint::open(&key).is_err());
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&saved);
}

#[test]
fn memory_errors_name_the_tensor_and_the_key() {
    let w = [0u8; 16];
    let tensors = [MemoryTensor {
        name: "encoder.layer.0.attention.self.query.weight",
        dtype: SourceDtype::F32,
        shape: &[2, 2],
        data: &w,
    }];
    // A config without the facts: the architecture cannot be told, said
    // in one line naming the model in memory.
    let m = MemoryModel::new(&tensors, Some(serde_json::json!({"model_type": "bert"}))).unwrap();
    let req = CertifyRequest::new(ModelRef::Memory(m), CertifyOptions::default());
    let Err(e) = specbound::cmd::certify::run(&req, &Silent) else {
        panic!("certified a model without its facts")
    };
    let line = e.to_string();
    assert!(line.starts_with(MEMORY_LABEL), "{line}");
    assert!(!line.contains('\n'), "{line}");
    // A shard of a model in memory is refused: it has no files to resume.
    let m = MemoryModel::new(&tensors, None).unwrap();
    let mut req = CertifyRequest::new(ModelRef::Memory(m), CertifyOptions::default());
    req.resume_dir = Some(temp_dir("resume"));
    let Err(e) = specbound::cmd::certify::run(&req, &Silent) else {
        panic!("resumed a model in memory")
    };
    let line = e.to_string();
    assert!(line.contains("model in memory"), "{line}");
}

/// A fact a model in memory lacks is asked of its `config=` by the
/// family's key (the Python module's words); the same model on disk keeps
/// the file's hint (config.json, `--heads`).
#[test]
fn a_missing_fact_in_memory_names_the_config_key_to_give() {
    let dir = temp_dir("missing-heads");
    common::family::minilm(&common::root().join("data/all-MiniLM-L6-v2"), &dir, 1);
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("config.json")).unwrap()).unwrap();
    config
        .as_object_mut()
        .unwrap()
        .remove("num_attention_heads");
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let owned = tensors_of(&dir.join("model.safetensors"));
    let line = |model: ModelRef| {
        let req = CertifyRequest::new(model, CertifyOptions::default());
        match specbound::cmd::certify::run(&req, &Silent) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("certified without the number of heads"),
        }
    };
    let fact = "the number of attention heads cannot be inferred from tensor shapes: ";
    let mem = memory_of(&owned, Some(config));
    assert_eq!(
        line(ModelRef::Memory(mem)),
        format!("{MEMORY_LABEL}: {fact}give 'num_attention_heads' in config= or pass heads=")
    );
    // Without any config: the same key, the same place to give it.
    let bare = memory_of(&owned, None);
    assert!(line(ModelRef::Memory(bare))
        .ends_with("give 'num_attention_heads' in config= or pass heads="));
    let on_disk = line(ModelRef::Path(dir.clone()));
    assert!(
        on_disk.ends_with(&format!(
            "{fact}put config.json beside the file or pass --heads"
        )),
        "{on_disk}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `verify` against tensors in memory compares the hash of their
/// serialisation with the certificate's: the same tensors hold (every
/// matrix rechecked), other tensors fail in one line saying so.
#[test]
fn verify_against_tensors_in_memory_compares_their_serialisation() {
    let dir = temp_dir("verify-memory");
    common::family::minilm(&common::root().join("data/all-MiniLM-L6-v2"), &dir, 1);
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("config.json")).unwrap()).unwrap();
    let mut owned = tensors_of(&dir.join("model.safetensors"));
    let mem = memory_of(&owned, Some(config.clone()));
    let c = certify(ModelRef::Memory(mem.clone()));
    let verify = |model: MemoryModel| {
        let req = specbound::cmd::verify::VerifyRequest {
            cert: specbound::cmd::CertInput::Loaded {
                name: "certificate".into(),
                cert: Box::new(c.clone()),
            },
            model: Some(ModelRef::Memory(model)),
            options: Default::default(),
        };
        specbound::cmd::verify::run(&req, &Silent).unwrap().verdict
    };
    let v = verify(mem.clone());
    assert_eq!(v.answer(), Answer::Holds, "{:?}", v.failure);
    assert!(v.checks > c.matrices.len());
    // One element of one tensor changed (the lowest bit of its first f32).
    owned[0].3[0] ^= 1;
    let v = verify(memory_of(&owned, Some(config)));
    let why = v.failure.expect("other tensors");
    assert!(
        why.starts_with("$.model.files[0].sha256: the weights in memory have SHA-256")
            && why.contains("the certificate is for other tensors")
            && !why.contains('\n'),
        "{why}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A model in memory of `tensors_of`'s tensors and `config`.
fn memory_of(
    owned: &[(String, SourceDtype, Vec<usize>, Vec<u8>)],
    config: Option<serde_json::Value>,
) -> MemoryModel {
    let tensors: Vec<MemoryTensor<'_>> = owned
        .iter()
        .map(|(name, dtype, shape, data)| MemoryTensor {
            name,
            dtype: *dtype,
            shape,
            data,
        })
        .collect();
    MemoryModel::new(&tensors, config).unwrap()
}
