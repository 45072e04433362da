// The bodies of the fuzz targets, shared by the cargo-fuzz targets
// (`fuzz_targets/*.rs`, each `include!`s this file) and the stable-Rust
// replay in CI (`tests/fuzz_replay.rs`, which `include!`s it too and runs
// every target over the committed corpus `fuzz/corpus/<target>/` and a few
// thousand deterministic mutations of it). Each body must return, never
// panic, on any input: the readers' errors are discarded.
//
// Plain `//` comments: this file is included into other files.

/// A per-process, per-thread temporary path ending in `.{ext}` (the
/// readers take paths, and the replay test runs targets in threads).
pub fn fuzz_tmp(ext: &str) -> std::path::PathBuf {
    let thread: String = format!("{:?}", std::thread::current().id())
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect();
    std::env::temp_dir().join(format!(
        "specbound-fuzz-{}-{thread}.{ext}",
        std::process::id()
    ))
}

/// Everything downstream of an opened checkpoint: every tensor read, the
/// family detected, its recipe described and run.
pub fn fuzz_checkpoint(ck: &specbound::io::checkpoint::Checkpoint) {
    let names: Vec<String> = ck.names().map(str::to_string).collect();
    for n in names.iter().take(64) {
        let _ = ck.read(n);
    }
    if let Ok(arch) = specbound::arch::detect(ck, &Default::default()) {
        let _ = specbound::arch::describe(ck, &arch);
        let _ = specbound::arch::extract(ck, &arch);
    }
}

/// A model file of the kind `ext` names (safetensors, gguf, npy, onnx,
/// msgpack): read as one matrix, and opened as a checkpoint.
pub fn fuzz_model_file(ext: &str, data: &[u8]) {
    let path = fuzz_tmp(ext);
    if std::fs::write(&path, data).is_err() {
        return;
    }
    for tensor in [None, Some("w")] {
        let _ = specbound::io::read_matrix(&path, tensor);
    }
    if let Ok(ck) = specbound::io::checkpoint::Checkpoint::open(&path) {
        fuzz_checkpoint(&ck);
    }
    let _ = std::fs::remove_file(&path);
}

pub fn fuzz_safetensors(data: &[u8]) {
    fuzz_model_file("safetensors", data);
}

pub fn fuzz_gguf(data: &[u8]) {
    fuzz_model_file("gguf", data);
}

pub fn fuzz_npy(data: &[u8]) {
    fuzz_model_file("npy", data);
}

/// ONNX protobuf: the graph walk, external data (none can exist beside a
/// temporary file but the name is tried), orientation from the nodes.
pub fn fuzz_onnx(data: &[u8]) {
    fuzz_model_file("onnx", data);
}

/// Flax msgpack: the tree walk, joined names, chunked arrays.
pub fn fuzz_flax(data: &[u8]) {
    fuzz_model_file("msgpack", data);
}

pub fn fuzz_certificate(data: &[u8]) {
    if let Ok(c) = specbound::certificate::Certificate::parse(data, "fuzz") {
        let _ = specbound::evidence::verify::verify_internal(&c);
        let _ = specbound::evidence::diff::diff(&c, &c, 0.0);
    }
    let _ = specbound::certificate::Part::parse(data, "fuzz");
}

pub fn fuzz_pickle(data: &[u8]) {
    let _ = specbound::io::pickle_scan::scan_bytes(data, 1 << 16);
    let mut s = specbound::io::pickle_scan::Scanner::new(1 << 16, 1 << 20);
    let mut r = data;
    let mut offset = 0u64;
    for k in 0..5 {
        s.collect_strings(k == 4);
        match s.scan(&mut r, offset) {
            Ok(n) => offset += n,
            Err(_) => break,
        }
    }
    let _ = s.take_strings();
}

pub fn fuzz_pytorch(data: &[u8]) {
    let path = fuzz_tmp("pt");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    if let Ok(f) = specbound::io::pytorch::PytorchFile::open(&path) {
        let names: Vec<String> = f.names().to_vec();
        for n in names.iter().take(64) {
            let _ = f.info(n);
            let _ = f.read(n);
        }
        let _ = f.read("w");
    }
    let _ = specbound::io::read_matrix(&path, None);
    let _ = std::fs::remove_file(&path);
}

/// A sharded index (before the first NUL byte) and a config.json (after
/// it) in a directory.
pub fn fuzz_index(data: &[u8]) {
    let dir = fuzz_tmp("index.d");
    let _ = std::fs::remove_dir_all(&dir);
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let (index, config) = match data.iter().position(|&b| b == 0) {
        Some(k) => (&data[..k], Some(&data[k + 1..])),
        None => (data, None),
    };
    let ok = std::fs::write(dir.join("model.safetensors.index.json"), index).is_ok()
        && config.is_none_or(|c| std::fs::write(dir.join("config.json"), c).is_ok());
    if ok {
        if let Ok(ck) = specbound::io::checkpoint::Checkpoint::open(&dir) {
            let names: Vec<String> = ck.names().map(str::to_string).collect();
            for n in names.iter().take(64) {
                let _ = ck.read(n);
            }
            let _ = ck.read("w");
            let _ = specbound::arch::detect(&ck, &Default::default());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Names a model in memory may use: real parameter names (so that the
/// family detection runs), else the input's own bytes.
const FUZZ_NAMES: [&str; 8] = [
    "encoder.layer.0.attention.self.query.weight",
    "encoder.layer.0.attention.self.key.weight",
    "encoder.layer.0.attention.self.value.weight",
    "encoder.layer.0.attention.output.dense.weight",
    "encoder.layer.0.intermediate.dense.weight",
    "encoder.layer.0.output.dense.weight",
    "model.layers.0.self_attn.q_proj.weight",
    "w",
];

/// A model in memory (what the Python module's `certify(state_dict,
/// config=...)` builds): the input is a count byte, then per tensor a
/// name byte (an index into [`FUZZ_NAMES`], or 8 + a length of name bytes
/// that follow), a dtype byte, a rank byte (0 to 3) and 16-bit dimensions,
/// its data taken from what remains; the rest, when it parses, is the
/// config as JSON.
pub fn fuzz_memory(data: &[u8]) {
    use specbound::io::memory::{MemoryModel, MemoryTensor};
    use specbound::matrix::SourceDtype;
    let mut r = data;
    let byte = |r: &mut &[u8]| -> Option<u8> {
        let (&b, rest) = r.split_first()?;
        *r = rest;
        Some(b)
    };
    let Some(n) = byte(&mut r) else { return };
    let mut specs: Vec<(String, SourceDtype, Vec<usize>, usize)> = Vec::new();
    for _ in 0..n % 9 {
        let Some(nb) = byte(&mut r) else { break };
        let name = match FUZZ_NAMES.get(nb as usize) {
            Some(s) => s.to_string(),
            None => {
                let len = (nb as usize - FUZZ_NAMES.len()).min(r.len());
                let (a, b) = r.split_at(len);
                r = b;
                String::from_utf8_lossy(a).into_owned()
            }
        };
        let dtype = match byte(&mut r).unwrap_or(0) % 5 {
            0 => SourceDtype::F32,
            1 => SourceDtype::F16,
            2 => SourceDtype::BF16,
            3 => SourceDtype::F64,
            _ => SourceDtype::Int("I32"),
        };
        let rank = byte(&mut r).unwrap_or(0) % 4;
        let mut shape = Vec::new();
        for _ in 0..rank {
            let hi = byte(&mut r).unwrap_or(0);
            let lo = byte(&mut r).unwrap_or(1);
            shape.push(usize::from(u16::from_be_bytes([hi, lo])) % 512);
        }
        let len = shape.iter().product::<usize>() * dtype.itemsize();
        specs.push((name, dtype, shape, len));
    }
    // The data: each tensor's bytes in turn, cut short (and so refused)
    // where the input ends.
    let mut bufs: Vec<&[u8]> = Vec::new();
    for (_, _, _, len) in &specs {
        let take = (*len).min(r.len());
        let (a, b) = r.split_at(take);
        bufs.push(a);
        r = b;
    }
    let config = serde_json::from_slice::<serde_json::Value>(r).ok();
    let tensors: Vec<MemoryTensor<'_>> = specs
        .iter()
        .zip(&bufs)
        .map(|((name, dtype, shape, _), data)| MemoryTensor {
            name,
            dtype: *dtype,
            shape,
            data,
        })
        .collect();
    if let Ok(m) = MemoryModel::new(&tensors, config) {
        if let Ok(ck) = specbound::io::checkpoint::Checkpoint::open(m.key()) {
            fuzz_checkpoint(&ck);
        }
    }
}

/// A target's body.
pub type FuzzBody = fn(&[u8]);

/// Every target by name (the name of its `fuzz_targets/` file and of its
/// corpus directory).
pub const FUZZ_TARGETS: [(&str, FuzzBody); 10] = [
    ("safetensors", fuzz_safetensors),
    ("gguf", fuzz_gguf),
    ("npy", fuzz_npy),
    ("certificate", fuzz_certificate),
    ("pytorch", fuzz_pytorch),
    ("pickle", fuzz_pickle),
    ("index", fuzz_index),
    ("onnx", fuzz_onnx),
    ("flax", fuzz_flax),
    ("memory", fuzz_memory),
];
