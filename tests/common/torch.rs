//! PyTorch checkpoints written byte by byte as `torch.save` writes them (no
//! torch needed): the pickle of a state dict (protocol 2: an `OrderedDict`
//! rebuilt by `REDUCE`, each tensor by `torch._utils._rebuild_tensor_v2` on a
//! storage given by a persistent id), in the zip container of torch 1.6 and
//! later (`archive/data.pkl`, `archive/data/N`, `archive/byteorder`,
//! `archive/version`, stored entries with CRC-32) or the legacy stream
//! (magic, protocol 1001, system info, the object, the storage keys, then
//! each storage as an `i64` element count and its bytes).

use std::path::Path;

/// One tensor: name, storage class (`FloatStorage`, `LongStorage`, ...),
/// shape, stride, and its storage's raw little-endian bytes.
#[derive(Clone)]
pub struct TorchTensor {
    pub name: String,
    pub storage: &'static str,
    pub itemsize: usize,
    pub shape: Vec<usize>,
    pub stride: Vec<usize>,
    pub bytes: Vec<u8>,
}

impl TorchTensor {
    /// A contiguous row-major tensor.
    pub fn contiguous(
        name: &str,
        storage: &'static str,
        itemsize: usize,
        shape: &[usize],
        bytes: Vec<u8>,
    ) -> Self {
        let mut stride = vec![1usize; shape.len()];
        for k in (0..shape.len().saturating_sub(1)).rev() {
            stride[k] = stride[k + 1] * shape[k + 1];
        }
        Self {
            name: name.into(),
            storage,
            itemsize,
            shape: shape.to_vec(),
            stride,
            bytes,
        }
    }

    /// A 2-D f32 tensor from row-major values.
    pub fn f32(name: &str, rows: usize, cols: usize, values: &[f64]) -> Self {
        let bytes = values
            .iter()
            .flat_map(|&v| (v as f32).to_le_bytes())
            .collect();
        Self::contiguous(name, "FloatStorage", 4, &[rows, cols], bytes)
    }

    /// A 2-D f32 tensor saved as `W.t()` is: the storage holds the
    /// transpose row-major, stride `[1, rows]`.
    pub fn f32_transposed_view(name: &str, rows: usize, cols: usize, values: &[f64]) -> Self {
        let mut bytes = Vec::new();
        for j in 0..cols {
            for i in 0..rows {
                bytes.extend_from_slice(&(values[i * cols + j] as f32).to_le_bytes());
            }
        }
        Self {
            name: name.into(),
            storage: "FloatStorage",
            itemsize: 4,
            shape: vec![rows, cols],
            stride: vec![1, rows],
            bytes,
        }
    }
}

/// Pickle opcodes (protocol 2), the subset torch.save emits.
pub struct Pickle(pub Vec<u8>);

impl Pickle {
    pub fn new() -> Self {
        Pickle(vec![0x80, 2])
    }
    pub fn op(&mut self, b: u8) -> &mut Self {
        self.0.push(b);
        self
    }
    pub fn global(&mut self, module: &str, name: &str) -> &mut Self {
        self.0.push(b'c');
        self.0
            .extend_from_slice(format!("{module}\n{name}\n").as_bytes());
        self
    }
    pub fn str(&mut self, s: &str) -> &mut Self {
        self.0.push(b'X');
        self.0.extend_from_slice(&(s.len() as u32).to_le_bytes());
        self.0.extend_from_slice(s.as_bytes());
        self
    }
    pub fn int(&mut self, v: usize) -> &mut Self {
        if v < 256 {
            self.0.extend_from_slice(&[b'K', v as u8]);
        } else if v < 65536 {
            self.0.push(b'M');
            self.0.extend_from_slice(&(v as u16).to_le_bytes());
        } else {
            self.0.push(b'J');
            self.0.extend_from_slice(&(v as i32).to_le_bytes());
        }
        self
    }
    pub fn tuple(&mut self, items: &[usize]) -> &mut Self {
        self.op(b'(');
        for &i in items {
            self.int(i);
        }
        self.op(b't')
    }
    /// `_rebuild_tensor_v2(storage(pid), 0, shape, stride, False, OrderedDict())`;
    /// `legacy_view` adds the sixth persistent-id field the legacy format writes (None).
    pub fn tensor(&mut self, t: &TorchTensor, key: &str, legacy: bool) -> &mut Self {
        self.global("torch._utils", "_rebuild_tensor_v2");
        self.op(b'(');
        self.op(b'(')
            .str("storage")
            .global("torch", t.storage)
            .str(key)
            .str("cpu")
            .int(t.bytes.len() / t.itemsize);
        if legacy {
            self.op(b'N');
        }
        self.op(b't').op(b'Q');
        self.int(0).tuple(&t.shape).tuple(&t.stride).op(0x89);
        self.global("collections", "OrderedDict").op(b')').op(b'R');
        self.op(b't').op(b'R')
    }
    /// An `OrderedDict` of the tensors, then STOP.
    pub fn state_dict(tensors: &[TorchTensor], legacy: bool) -> Vec<u8> {
        let mut p = Pickle::new();
        p.global("collections", "OrderedDict").op(b')').op(b'R');
        p.op(b'(');
        for (k, t) in tensors.iter().enumerate() {
            p.str(&t.name);
            p.tensor(t, &k.to_string(), legacy);
        }
        p.op(b'u').op(b'.');
        p.0
    }
}

impl Default for Pickle {
    fn default() -> Self {
        Self::new()
    }
}

/// CRC-32 (IEEE), as zip stores it.
pub fn crc32(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c ^= b as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// A zip archive of stored entries (no compression).
pub fn zip(entries: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in entries {
        let offset = out.len() as u32;
        let crc = crc32(data);
        let header = |sig: u32, central: bool| {
            let mut h = sig.to_le_bytes().to_vec();
            if central {
                h.extend_from_slice(&20u16.to_le_bytes()); // version made by
            }
            h.extend_from_slice(&20u16.to_le_bytes()); // version needed
            h.extend_from_slice(&0u16.to_le_bytes()); // flags
            h.extend_from_slice(&0u16.to_le_bytes()); // stored
            h.extend_from_slice(&0u32.to_le_bytes()); // time, date
            h.extend_from_slice(&crc.to_le_bytes());
            h.extend_from_slice(&(data.len() as u32).to_le_bytes());
            h.extend_from_slice(&(data.len() as u32).to_le_bytes());
            h.extend_from_slice(&(name.len() as u16).to_le_bytes());
            h.extend_from_slice(&0u16.to_le_bytes()); // extra
            if central {
                h.extend_from_slice(&[0u8; 6]); // comment, disk, internal attrs
                h.extend_from_slice(&0u32.to_le_bytes()); // external attrs
                h.extend_from_slice(&offset.to_le_bytes());
            }
            h.extend_from_slice(name.as_bytes());
            h
        };
        out.extend(header(0x0403_4b50, false));
        out.extend_from_slice(data);
        central.extend(header(0x0201_4b50, true));
    }
    let cd_offset = out.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0u8; 4]);
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&cd_offset.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

/// The zip container around a given pickle and storages.
pub fn torch_zip_with_pickle(pickle: Vec<u8>, tensors: &[TorchTensor]) -> Vec<u8> {
    let mut entries = vec![("archive/data.pkl".to_string(), pickle)];
    entries.push(("archive/byteorder".into(), b"little".to_vec()));
    for (k, t) in tensors.iter().enumerate() {
        entries.push((format!("archive/data/{k}"), t.bytes.clone()));
    }
    entries.push(("archive/version".into(), b"3\n".to_vec()));
    zip(&entries)
}

/// A state dict as torch 1.6 and later save it.
pub fn write_torch_zip(path: &Path, tensors: &[TorchTensor]) {
    let bytes = torch_zip_with_pickle(Pickle::state_dict(tensors, false), tensors);
    std::fs::write(path, bytes).unwrap();
}

/// The legacy stream around a given object pickle.
pub fn torch_legacy_with_pickle(object: Vec<u8>, tensors: &[TorchTensor]) -> Vec<u8> {
    let mut out = Vec::new();
    // Magic number 0x1950a86a20f9469cfc6c as LONG1.
    out.extend_from_slice(&[0x80, 2, 0x8a, 10]);
    out.extend_from_slice(&[0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19]);
    out.push(b'.');
    // Protocol version 1001.
    out.extend_from_slice(&[0x80, 2, b'M']);
    out.extend_from_slice(&1001u16.to_le_bytes());
    out.push(b'.');
    // System info.
    let mut p = Pickle::new();
    p.op(b'}').op(b'(');
    p.str("protocol_version").int(1001);
    p.str("little_endian").op(0x88);
    p.str("type_sizes").op(b'}').op(b'(');
    p.str("short").int(2).str("int").int(4).str("long").int(4);
    p.op(b'u').op(b'u').op(b'.');
    out.extend_from_slice(&p.0);
    out.extend_from_slice(&object);
    // Storage keys.
    let mut p = Pickle::new();
    p.op(b']').op(b'(');
    for k in 0..tensors.len() {
        p.str(&k.to_string());
    }
    p.op(b'e').op(b'.');
    out.extend_from_slice(&p.0);
    for t in tensors {
        out.extend_from_slice(&((t.bytes.len() / t.itemsize) as i64).to_le_bytes());
        out.extend_from_slice(&t.bytes);
    }
    out
}

/// A state dict as torch 0.1.10 to 1.5 (or `_use_new_zipfile_serialization=False`) save it.
pub fn write_torch_legacy(path: &Path, tensors: &[TorchTensor]) {
    let bytes = torch_legacy_with_pickle(Pickle::state_dict(tensors, true), tensors);
    std::fs::write(path, bytes).unwrap();
}

/// Every tensor of a safetensors file as it is stored (raw bytes, shape,
/// dtype), for re-emitting it as a PyTorch checkpoint.
pub fn tensors_of_safetensors(path: &Path) -> Vec<TorchTensor> {
    let blob = std::fs::read(path).unwrap();
    let n = u64::from_le_bytes(blob[..8].try_into().unwrap()) as usize;
    let header: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&blob[8..8 + n]).unwrap();
    let mut out = Vec::new();
    for (name, v) in header {
        if name == "__metadata__" {
            continue;
        }
        let (storage, itemsize) = match v["dtype"].as_str().unwrap() {
            "F32" => ("FloatStorage", 4),
            "F64" => ("DoubleStorage", 8),
            "F16" => ("HalfStorage", 2),
            "BF16" => ("BFloat16Storage", 2),
            "I64" => ("LongStorage", 8),
            other => panic!("dtype {other}"),
        };
        let shape: Vec<usize> = v["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap() as usize)
            .collect();
        let o = v["data_offsets"].as_array().unwrap();
        let (a, b) = (
            o[0].as_u64().unwrap() as usize,
            o[1].as_u64().unwrap() as usize,
        );
        out.push(TorchTensor::contiguous(
            &name,
            storage,
            itemsize,
            &shape,
            blob[8 + n + a..8 + n + b].to_vec(),
        ));
    }
    out
}
