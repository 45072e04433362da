//! Byte-level writers of ONNX protobuf and Flax msgpack, as onnx and
//! flax.serialization write them, for variants the committed files made by
//! the formats' own writers (tests/data/formats) do not cover, and for
//! hostile inputs.

/// A protobuf varint.
pub fn varint(mut v: u64, out: &mut Vec<u8>) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// Field `tag` of wire type 0.
pub fn pb_int(tag: u64, v: u64, out: &mut Vec<u8>) {
    varint(tag << 3, out);
    varint(v, out);
}

/// Field `tag` of wire type 2.
pub fn pb_len(tag: u64, b: &[u8], out: &mut Vec<u8>) {
    varint((tag << 3) | 2, out);
    varint(b.len() as u64, out);
    out.extend_from_slice(b);
}

/// A TensorProto of FLOAT (data_type 1) with `raw_data` (little-endian f32).
pub fn tensor_f32(name: &str, dims: &[i64], values: &[f32]) -> Vec<u8> {
    let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    tensor_raw(name, dims, 1, &raw)
}

/// A TensorProto with `raw_data`.
pub fn tensor_raw(name: &str, dims: &[i64], data_type: u64, raw: &[u8]) -> Vec<u8> {
    let mut t = Vec::new();
    let mut d = Vec::new();
    for &x in dims {
        varint(x as u64, &mut d);
    }
    pb_len(1, &d, &mut t);
    pb_int(2, data_type, &mut t);
    pb_len(8, name.as_bytes(), &mut t);
    pb_len(9, raw, &mut t);
    t
}

/// A FLOAT TensorProto whose data is external (`location`, `offset`, `length`).
pub fn tensor_external(name: &str, dims: &[i64], entries: &[(&str, &str)]) -> Vec<u8> {
    let mut t = Vec::new();
    let mut d = Vec::new();
    for &x in dims {
        varint(x as u64, &mut d);
    }
    pb_len(1, &d, &mut t);
    pb_int(2, 1, &mut t);
    pb_len(8, name.as_bytes(), &mut t);
    for (k, v) in entries {
        let mut e = Vec::new();
        pb_len(1, k.as_bytes(), &mut e);
        pb_len(2, v.as_bytes(), &mut e);
        pb_len(13, &e, &mut t);
    }
    pb_int(14, 1, &mut t);
    t
}

/// A NodeProto; `trans_b` adds the Gemm attribute.
pub fn node(op: &str, name: &str, inputs: &[&str], output: &str, trans_b: Option<i64>) -> Vec<u8> {
    let mut n = Vec::new();
    for i in inputs {
        pb_len(1, i.as_bytes(), &mut n);
    }
    pb_len(2, output.as_bytes(), &mut n);
    pb_len(3, name.as_bytes(), &mut n);
    pb_len(4, op.as_bytes(), &mut n);
    if let Some(t) = trans_b {
        let mut a = Vec::new();
        pb_len(1, b"transB", &mut a);
        pb_int(3, t as u64, &mut a);
        pb_int(20, 2, &mut a);
        pb_len(5, &a, &mut n);
    }
    n
}

/// A ModelProto (ir_version 8, opset 17) whose graph has these nodes and initializers.
pub fn model(nodes: &[Vec<u8>], inits: &[Vec<u8>]) -> Vec<u8> {
    let mut g = Vec::new();
    for n in nodes {
        pb_len(1, n, &mut g);
    }
    pb_len(2, b"main_graph", &mut g);
    for t in inits {
        pb_len(5, t, &mut g);
    }
    let mut m = Vec::new();
    pb_int(1, 8, &mut m);
    pb_len(2, b"pytorch", &mut m);
    pb_len(7, &g, &mut m);
    let mut op = Vec::new();
    pb_int(2, 17, &mut op);
    pb_len(8, &op, &mut m);
    m
}

/// msgpack: a map header of `n` entries (map32 when `wide`).
pub fn mp_map(n: u32, wide: bool, out: &mut Vec<u8>) {
    if n < 16 && !wide {
        out.push(0x80 | n as u8);
    } else {
        out.push(0xdf);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// msgpack: a string.
pub fn mp_str(s: &str, out: &mut Vec<u8>) {
    assert!(s.len() < 256);
    if s.len() < 32 {
        out.push(0xa0 | s.len() as u8);
    } else {
        out.push(0xd9);
        out.push(s.len() as u8);
    }
    out.extend_from_slice(s.as_bytes());
}

/// msgpack: an unsigned integer.
pub fn mp_uint(v: u64, out: &mut Vec<u8>) {
    out.push(0xcf);
    out.extend_from_slice(&v.to_be_bytes());
}

/// msgpack: a binary value.
pub fn mp_bin(b: &[u8], out: &mut Vec<u8>) {
    out.push(0xc6);
    out.extend_from_slice(&(b.len() as u32).to_be_bytes());
    out.extend_from_slice(b);
}

/// Flax's array leaf: extension type 1 holding `(shape, dtype, bytes)`.
pub fn mp_array(shape: &[u64], dtype: &str, data: &[u8], out: &mut Vec<u8>) {
    let mut p = vec![0x93, 0x90 | shape.len() as u8];
    for &d in shape {
        mp_uint(d, &mut p);
    }
    mp_str(dtype, &mut p);
    mp_bin(data, &mut p);
    out.push(0xc9);
    out.extend_from_slice(&(p.len() as u32).to_be_bytes());
    out.push(1);
    out.extend_from_slice(&p);
}

/// Little-endian f32 bytes.
pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
