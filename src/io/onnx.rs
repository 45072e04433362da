//! ONNX models (`model.onnx`, any `.onnx`): the graph's initializers,
//! read from the protobuf without an inference engine, with their data in
//! the file (`raw_data`, packed `float_data` / `double_data`) or in external
//! data files (`data_location = EXTERNAL`, `location` / `offset` /
//! `length`).
//!
//! The protobuf is walked by a reader of its wire format written here
//! (varints, the four wire types ONNX uses; `docs/models.md`, "ONNX", says
//! why not a generated decoder): only the fields below are looked at,
//! everything is bounded while read ([`super::limits`]: kept records, name
//! lengths, rank, external files) and nothing recurses (subgraphs of
//! `If`/`Loop` attributes are skipped as bytes). Field numbers are those of
//! `onnx.proto`: ModelProto.graph = 7; GraphProto.node = 1,
//! .initializer = 5; NodeProto.input = 1, .name = 3, .op_type = 4,
//! .attribute = 5; AttributeProto.name = 1, .i = 3, .ints = 8;
//! TensorProto.dims = 1, .data_type = 2, .float_data = 4, .name = 8,
//! .raw_data = 9, .double_data = 10, .external_data = 13,
//! .data_location = 14.
//!
//! **Names and orientation.** torch.onnx exports fold each Linear weight
//! into a constant `onnx::MatMul_N` stored `[in, out]` and feed it to a
//! MatMul node named after the module (`/encoder/layer.0/attention/self/query/MatMul`).
//! Every 2-D initializer that is the weight operand (input B) of a MatMul or
//! Gemm, directly or through a 2-D Transpose, is presented as PyTorch
//! stores the Linear weight, `[out, in]` (MatMul: transposed; Gemm: as
//! `transB` says), and, when its own name is not a parameter name (it
//! starts with `onnx::` or holds a `/`), named after its node:
//! `encoder.layer.0.attention.self.query.weight`. Wrapper prefixes in
//! node names (`/0/auto_model/...`) become name prefixes
//! (`0.auto_model.encoder...`), which the family detection strips as it
//! strips `bert.`. A name already taken, or a second use of a weight,
//! leaves the tensor as stored.
//!
//! **Quantized weights.** A 2-D int8/uint8 initializer that a
//! `DequantizeLinear` node dequantizes with a binary32 scale is read as the
//! graph's binary32 weight, exactly (L38, [`proofs/exact-dequantize.md`](crate::proofs::exact_dequantize)),
//! and followed to the MatMul or Gemm it feeds; integer weights the graph
//! multiplies as integers (`MatMulInteger`, `QLinearMatMul`) or of other
//! types are refused in one line naming them, never skipped.

use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path};

use super::limits::{MAX_EXTERNAL_FILES, MAX_ONNX_KEPT_BYTES, MAX_ONNX_NAME, MAX_RANK};
use super::stored::{Dequant, MappedFile, Segment, Stored, Table, TableFile};
use super::{fmt_name, LoadedMatrix, ReadError};
use crate::matrix::SourceDtype;

/// One protobuf field value.
enum Val<'a> {
    Int(u64),
    /// A length-delimited field: its bytes and their offset in the file.
    Len(&'a [u8], usize),
    Fixed,
}

/// A cursor over one message's bytes, at `base` in the file.
struct Wire<'a> {
    buf: &'a [u8],
    pos: usize,
    base: usize,
}

impl<'a> Wire<'a> {
    fn new(buf: &'a [u8], base: usize) -> Self {
        Self { buf, pos: 0, base }
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut v: u64 = 0;
        for k in 0..10 {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(format!("truncated varint at byte {}", self.base + self.pos));
            };
            self.pos += 1;
            if k == 9 && b > 1 {
                return Err(format!(
                    "varint longer than 64 bits at byte {}",
                    self.base + self.pos - 1
                ));
            }
            v |= u64::from(b & 0x7f) << (7 * k);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        unreachable!("the tenth byte ends the varint or is refused")
    }

    /// The next field (tag, value), or `None` at the end of the message.
    fn next(&mut self) -> Result<Option<(u64, Val<'a>)>, String> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let at = self.base + self.pos;
        let key = self.varint()?;
        let tag = key >> 3;
        if tag == 0 {
            return Err(format!("field number 0 at byte {at}"));
        }
        let val = match key & 7 {
            0 => Val::Int(self.varint()?),
            1 | 5 => {
                let n = if key & 7 == 1 { 8 } else { 4 };
                if self.buf.len() - self.pos < n {
                    return Err(format!("truncated fixed-width field at byte {at}"));
                }
                self.pos += n;
                Val::Fixed
            }
            2 => {
                let len = self.varint()?;
                let left = (self.buf.len() - self.pos) as u64;
                if len > left {
                    return Err(format!(
                        "field {tag} at byte {at} claims {len} bytes, but only {left} remain \
                         (truncated or a lying length)"
                    ));
                }
                let s = self.pos;
                self.pos += len as usize;
                Val::Len(&self.buf[s..self.pos], self.base + s)
            }
            w => {
                return Err(format!(
                    "wire type {w} at byte {at} (groups, which ONNX never uses, or not protobuf)"
                ))
            }
        };
        Ok(Some((tag, val)))
    }
}

/// A string field, bounded and UTF-8.
fn string(b: &[u8], what: &str) -> Result<String, String> {
    if b.len() as u64 > MAX_ONNX_NAME {
        return Err(format!(
            "{what} of {} bytes is longer than the {MAX_ONNX_NAME}-byte limit",
            b.len()
        ));
    }
    String::from_utf8(b.to_vec()).map_err(|_| format!("{what} is not UTF-8"))
}

/// What the walk keeps of an initializer.
struct Init {
    name: String,
    dims: Vec<i64>,
    data_type: u64,
    /// Offset and length of the in-file data, and which field held it.
    data: Option<(usize, usize, &'static str)>,
    external: Vec<(String, String)>,
    location: u64,
}

/// What the walk keeps of a MatMul, Gemm or Transpose node.
struct Node {
    name: String,
    op: String,
    inputs: Vec<String>,
    output: Option<String>,
    trans_b: bool,
    /// Transpose's `perm`, when given.
    perm: Option<Vec<u64>>,
    /// The module path that torch.onnx's dynamo exporter records in the
    /// node's metadata (`namespace`), e.g. `encoder.layer.0.attention.self.query`.
    module: Option<String>,
    /// `DequantizeLinear`'s `axis` (default 1) and `block_size` attributes.
    axis: Option<i64>,
    block_size: Option<i64>,
}

/// Ops that consume stored integer weights (quantized graphs).
const QUANTIZED_OPS: [&[u8]; 5] = [
    b"DequantizeLinear",
    b"MatMulInteger",
    b"QLinearMatMul",
    b"ConvInteger",
    b"QLinearConv",
];

/// The module path in a dynamo `namespace` entry: its segments are
/// `path: class`, joined by `/`, the last one the op itself
/// (`.../encoder.layer.0.attention.self.query: torch.nn.modules.linear.Linear/linear: aten.linear.default`).
fn module_of_namespace(ns: &str) -> Option<String> {
    let segs: Vec<&str> = ns.split('/').collect();
    let module = segs.len().checked_sub(2).map(|i| segs[i])?;
    let (path, _class) = module.split_once(": ")?;
    let ok = !path.is_empty()
        && path
            .split('.')
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    ok.then(|| path.to_string())
}

/// How the message of [`Budget::take`] starts: it is about the whole
/// graph, so the walk does not prefix it with the record it stopped at.
const OVER_BUDGET: &str = "the records specbound keeps of the graph";

/// The running total of kept bytes, refused over [`MAX_ONNX_KEPT_BYTES`].
struct Budget(u64);

impl Budget {
    fn take(&mut self, n: usize) -> Result<(), String> {
        self.0 += n as u64 + 64;
        if self.0 > MAX_ONNX_KEPT_BYTES {
            return Err(format!(
                "{OVER_BUDGET} (initializers, node inputs and outputs) exceed the \
                 {MAX_ONNX_KEPT_BYTES}-byte limit"
            ));
        }
        Ok(())
    }
}

/// Records where a tensor's in-file data lies; a second data field is refused.
fn set_data(t: &mut Init, d: (usize, usize, &'static str)) -> Result<(), String> {
    if let Some((_, _, f)) = t.data {
        return Err(format!("holds its data twice ({f} and {})", d.2));
    }
    t.data = Some(d);
    Ok(())
}

fn parse_tensor(b: &[u8], base: usize, budget: &mut Budget) -> Result<Init, String> {
    let mut t = Init {
        name: String::new(),
        dims: Vec::new(),
        data_type: 0,
        data: None,
        external: Vec::new(),
        location: 0,
    };
    let mut w = Wire::new(b, base);
    while let Some((tag, v)) = w.next()? {
        match (tag, v) {
            (1, Val::Int(d)) => t.dims.push(d as i64),
            (1, Val::Len(p, pb)) => {
                let mut pw = Wire::new(p, pb);
                while pw.pos < p.len() {
                    if t.dims.len() > MAX_RANK {
                        break;
                    }
                    t.dims.push(pw.varint()? as i64);
                }
            }
            (2, Val::Int(d)) => t.data_type = d,
            (4, Val::Len(p, pb)) => set_data(&mut t, (pb, p.len(), "float_data"))?,
            (10, Val::Len(p, pb)) => set_data(&mut t, (pb, p.len(), "double_data"))?,
            (9, Val::Len(p, pb)) => set_data(&mut t, (pb, p.len(), "raw_data"))?,
            (4 | 10, _) => return Err("holds unpacked float_data or double_data".into()),
            // Integers (zero points, shapes, quantized weights) packed in
            // int32_data/int64_data: kept as bytes, never read as floats.
            (5 | 7 | 11, Val::Len(p, pb))
                if onnx_type(t.data_type).is_err() && t.data_type != 0 =>
            {
                set_data(&mut t, (pb, p.len(), "int32_data"))?
            }
            (5..=7 | 11, _) => {
                return Err(
                    "holds its data in int32_data, string_data, int64_data or uint64_data, \
                     which specbound does not read (float weights are written as raw_data)"
                        .into(),
                )
            }
            (3, _) => return Err("is a segmented tensor, which specbound does not read".into()),
            (8, Val::Len(p, _)) => t.name = string(p, "initializer name")?,
            (13, Val::Len(p, pb)) => {
                let (mut k, mut val) = (String::new(), String::new());
                let mut ew = Wire::new(p, pb);
                while let Some((et, ev)) = ew.next()? {
                    match (et, ev) {
                        (1, Val::Len(s, _)) => k = string(s, "external_data key")?,
                        (2, Val::Len(s, _)) => val = string(s, "external_data value")?,
                        _ => {}
                    }
                }
                if t.external.len() >= 16 {
                    return Err("has more than 16 external_data entries".into());
                }
                // onnx's loader keeps the last of a repeated key, a reader
                // the first: the file means two things, so it is refused.
                if t.external.iter().any(|(a, _)| *a == k) {
                    return Err(format!(
                        "lists the external_data key '{}' twice",
                        fmt_name(&k)
                    ));
                }
                budget.take(k.len() + val.len())?;
                t.external.push((k, val));
            }
            (14, Val::Int(d)) => t.location = d,
            _ => {}
        }
        if t.dims.len() > MAX_RANK {
            return Err(format!("has more than {MAX_RANK} dimensions"));
        }
    }
    budget.take(t.name.len() + 8 * t.dims.len())?;
    check_data_field(&t)?;
    Ok(t)
}

/// The data field must be the one onnx reads for the type: `float_data`
/// only for FLOAT (1), `double_data` only for DOUBLE (11), `raw_data` for
/// any; onnx's `numpy_helper.to_array` refuses the others, so specbound
/// does not reinterpret their bytes as another type.
fn check_data_field(t: &Init) -> Result<(), String> {
    let want = match t.data {
        Some((_, _, f @ "float_data")) => (f, 1),
        Some((_, _, f @ "double_data")) => (f, 11),
        _ => return Ok(()),
    };
    if t.data_type != want.1 {
        let ty = match onnx_type(t.data_type) {
            Ok(d) => format!("{d:?} (ONNX data_type {})", t.data_type),
            Err(name) => name,
        };
        return Err(format!(
            "holds its data in {}, which ONNX uses only for data_type {}, but its type is {ty}",
            want.0, want.1
        ));
    }
    Ok(())
}

/// A node: its outputs added to `outputs` (every node's, so that the
/// names a kept node reads can be checked against the graph), and, for a
/// MatMul, Gemm or Transpose node, what the walk keeps of it.
fn parse_node(
    b: &[u8],
    base: usize,
    budget: &mut Budget,
    outputs: &mut Vec<String>,
) -> Result<Option<Node>, String> {
    // First pass: the op type and the outputs (nothing else kept for
    // other nodes).
    let mut w = Wire::new(b, base);
    let mut op: &[u8] = b"";
    while let Some((tag, v)) = w.next()? {
        match (tag, v) {
            (4, Val::Len(p, _)) => op = p,
            (2, Val::Len(p, _)) => {
                let o = string(p, "node output")?;
                budget.take(o.len())?;
                outputs.push(o);
            }
            _ => {}
        }
    }
    if !matches!(op, b"MatMul" | b"Gemm" | b"Transpose") && !QUANTIZED_OPS.contains(&op) {
        return Ok(None);
    }
    let mut n = Node {
        name: String::new(),
        op: String::from_utf8_lossy(op).into_owned(),
        inputs: Vec::new(),
        output: None,
        trans_b: false,
        perm: None,
        module: None,
        axis: None,
        block_size: None,
    };
    let mut w = Wire::new(b, base);
    while let Some((tag, v)) = w.next()? {
        match (tag, v) {
            (1, Val::Len(p, _)) if n.inputs.len() < 3 => n.inputs.push(string(p, "node input")?),
            (2, Val::Len(p, _)) if n.output.is_none() => n.output = Some(string(p, "node output")?),
            (3, Val::Len(p, _)) => n.name = string(p, "node name")?,
            // metadata_props: StringStringEntryProto key = 1, value = 2.
            (9, Val::Len(p, pb)) if n.module.is_none() => {
                let mut mw = Wire::new(p, pb);
                let (mut key, mut value): (&[u8], &[u8]) = (b"", b"");
                while let Some((mt, mv)) = mw.next()? {
                    match (mt, mv) {
                        (1, Val::Len(x, _)) => key = x,
                        (2, Val::Len(x, _)) => value = x,
                        _ => {}
                    }
                }
                if key == b"namespace" && value.len() as u64 <= MAX_ONNX_NAME {
                    n.module = std::str::from_utf8(value)
                        .ok()
                        .and_then(module_of_namespace);
                }
            }
            (5, Val::Len(p, pb)) => {
                let mut aw = Wire::new(p, pb);
                let (mut name, mut i, mut ints) = (Vec::new(), None, Vec::new());
                while let Some((at, av)) = aw.next()? {
                    match (at, av) {
                        (1, Val::Len(s, _)) => name = s.to_vec(),
                        (3, Val::Int(x)) => i = Some(x),
                        (8, Val::Int(x)) if ints.len() < MAX_RANK => ints.push(x),
                        (8, Val::Len(s, sb)) => {
                            let mut iw = Wire::new(s, sb);
                            while iw.pos < s.len() && ints.len() < MAX_RANK {
                                ints.push(iw.varint()?);
                            }
                        }
                        _ => {}
                    }
                }
                match name.as_slice() {
                    b"transB" => n.trans_b = i.unwrap_or(0) != 0,
                    b"perm" => n.perm = Some(ints),
                    // An int64 attribute: a negative value is its two's complement.
                    b"axis" => n.axis = i.map(|x| x as i64),
                    b"block_size" => n.block_size = i.map(|x| x as i64),
                    _ => {}
                }
            }
            _ => {}
        }
    }
    budget.take(
        n.name.len()
            + n.inputs.iter().map(String::len).sum::<usize>()
            + n.module.as_ref().map_or(0, String::len),
    )?;
    Ok(Some(n))
}

/// ONNX element types by number (`TensorProto.DataType`), for messages.
fn onnx_type(t: u64) -> Result<SourceDtype, String> {
    Ok(match t {
        1 => SourceDtype::F32,
        10 => SourceDtype::F16,
        11 => SourceDtype::F64,
        16 => SourceDtype::BF16,
        _ => {
            let name = match t {
                0 => "UNDEFINED",
                2 => "UINT8",
                3 => "INT8",
                4 => "UINT16",
                5 => "INT16",
                6 => "INT32",
                7 => "INT64",
                8 => "STRING",
                9 => "BOOL",
                12 => "UINT32",
                13 => "UINT64",
                14 => "COMPLEX64",
                15 => "COMPLEX128",
                17..=20 => "FLOAT8",
                21 | 22 => "INT4/UINT4",
                _ => "an unknown type",
            };
            return Err(format!("{name} (ONNX data_type {t})"));
        }
    })
}

/// Whether `loc` names a file inside the model's directory: relative, no
/// `..`, no root or drive, no NUL.
fn confined(loc: &str) -> bool {
    !loc.is_empty()
        && !loc.contains('\0')
        && !loc.starts_with(['/', '\\'])
        && !loc.contains(':')
        && loc.split(['/', '\\']).all(|c| c != "..")
        && Path::new(loc)
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// An opened ONNX model: its initializers, named and oriented as
/// PyTorch would give them (module documentation).
pub(crate) struct OnnxFile {
    table: Table,
}

impl OnnxFile {
    /// Maps `path`, walks its graph and external data references (every
    /// size checked against the files; external files confined to the
    /// model's directory). No tensor bytes are converted here.
    pub(crate) fn open(path: &Path) -> Result<Self, ReadError> {
        let main = MappedFile::open(path, "ONNX model")?;
        let bad = |m: String| ReadError::format(path, None, m);
        let graph = walk(&main.map)
            .and_then(|g| check_values(&g).map(|()| g))
            .map_err(|m| bad(format!("not a readable ONNX model: {m}")))?;
        let Graph { inits, nodes, .. } = graph;
        let mut data = DataFiles {
            dir: path.parent().unwrap_or(Path::new(".")),
            files: vec![main],
            by_location: BTreeMap::new(),
        };
        let mut tensors: HashMap<String, Stored> = HashMap::new();
        // Integer initializers: their ONNX type, and whether their values
        // are packed varints (int32_data) rather than raw bytes.
        let mut ints: HashMap<String, (u64, bool)> = HashMap::new();
        for t in inits {
            let tn = Some(t.name.as_str());
            let err = |m: String| ReadError::format(path, tn, m);
            if t.name.is_empty() {
                return Err(bad("an initializer has no name".into()));
            }
            let shape = init_shape(&t, &err)?;
            let dtype = onnx_type(t.data_type);
            if dtype.is_err() {
                let packed = matches!(t.data, Some((_, _, "int32_data")));
                ints.insert(t.name.clone(), (t.data_type, packed));
            }
            let segment = if t.location == 1 {
                let need = dtype.as_ref().ok().and_then(|d| {
                    shape
                        .iter()
                        .try_fold(d.itemsize(), |a, &x| a.checked_mul(x))
                });
                data.external_segment(&t, need, &err)?
            } else {
                let Some((start, len, _)) = t.data else {
                    return Err(err(
                        "has no data (no raw_data, float_data or external data)".into(),
                    ));
                };
                Segment {
                    file: 0,
                    start,
                    len,
                }
            };
            let stored = Stored {
                shape,
                dtype,
                segments: vec![segment],
                transpose: false,
                flatten_ok: true,
                dequant: None,
            };
            if tensors.insert(t.name.clone(), stored).is_some() {
                return Err(err("two initializers have this name".into()));
            }
        }
        let dequantized = dequantize(path, &mut tensors, &nodes, &ints)?;
        refuse_quantized(path, &tensors, &nodes)?;
        rename_weights(&mut tensors, &nodes, &dequantized);
        Ok(Self {
            table: Table::new(data.files, tensors)?,
        })
    }
}

impl TableFile for OnnxFile {
    /// The tensors (names as presented, read one at a time; the
    /// checkpoint reads through them).
    fn table(&self) -> &Table {
        &self.table
    }
}

/// An initializer's dimensions as sizes: none negative, each a `usize`.
fn init_shape(t: &Init, err: &impl Fn(String) -> ReadError) -> Result<Vec<usize>, ReadError> {
    let mut shape = Vec::with_capacity(t.dims.len());
    for &d in &t.dims {
        if d < 0 {
            return Err(err(format!("negative dimension {d}")));
        }
        shape.push(usize::try_from(d).map_err(|_| err(format!("dimension {d} is too large")))?);
    }
    Ok(shape)
}

/// The model file (index 0) and the external data files it refers to,
/// each mapped once, at most [`MAX_EXTERNAL_FILES`] of them.
struct DataFiles<'a> {
    /// The model's directory, the only place external data may lie.
    dir: &'a Path,
    files: Vec<MappedFile>,
    by_location: BTreeMap<String, usize>,
}

impl DataFiles<'_> {
    /// The segment of an initializer stored outside the model: its
    /// location confined to the model's directory, its offset and length
    /// byte counts (`need`, the bytes its shape and type take, when the
    /// length is not given).
    fn external_segment(
        &mut self,
        t: &Init,
        need: Option<usize>,
        err: &impl Fn(String) -> ReadError,
    ) -> Result<Segment, ReadError> {
        let get = |k: &str| {
            t.external
                .iter()
                .find(|(a, _)| a == k)
                .map(|(_, v)| v.as_str())
        };
        let loc = get("location")
            .ok_or_else(|| err("data_location is EXTERNAL but no location is given".into()))?;
        if !confined(loc) {
            return Err(err(format!(
                "external data location '{}' is not a relative path inside the model's \
                 directory (no '..', no absolute path)",
                fmt_name(loc)
            )));
        }
        let num = |k: &str| -> Result<Option<usize>, ReadError> {
            get(k)
                .map(|v| {
                    v.parse::<usize>().map_err(|_| {
                        err(format!(
                            "external data {k} '{}' is not a byte count",
                            fmt_name(v)
                        ))
                    })
                })
                .transpose()
        };
        let offset = num("offset")?.unwrap_or(0);
        let file = self.file_at(loc, err)?;
        let flen = self.files[file].map.len();
        let len = match num("length")? {
            Some(l) => l,
            None => need.unwrap_or(flen.saturating_sub(offset)),
        };
        Ok(Segment {
            file,
            start: offset,
            len,
        })
    }

    /// The index of the external data file at `loc` (already confined),
    /// mapped on first use; a symbolic link out of the directory is refused.
    fn file_at(
        &mut self,
        loc: &str,
        err: &impl Fn(String) -> ReadError,
    ) -> Result<usize, ReadError> {
        if let Some(&i) = self.by_location.get(loc) {
            return Ok(i);
        }
        if self.by_location.len() >= MAX_EXTERNAL_FILES {
            return Err(err(format!(
                "more than {MAX_EXTERNAL_FILES} external data files"
            )));
        }
        let p = self.dir.join(loc);
        let f = MappedFile::open(&p, "ONNX external data file").map_err(|e| {
            err(format!(
                "external data file '{}' cannot be read ({e})",
                fmt_name(loc)
            ))
        })?;
        // Symbolic links must not lead out of the directory either.
        let (cd, cp) = (self.dir.canonicalize(), p.canonicalize());
        if !matches!((&cd, &cp), (Ok(d), Ok(q)) if q.starts_with(d)) {
            return Err(err(format!(
                "external data location '{}' leads out of the model's directory",
                fmt_name(loc)
            )));
        }
        self.files.push(f);
        self.by_location
            .insert(loc.to_string(), self.files.len() - 1);
        Ok(self.files.len() - 1)
    }
}

/// The weights of a graph that dequantizes 2-D int8 or uint8 initializers
/// by `DequantizeLinear` with binary32 scales (per tensor, or per axis;
/// zero points of the weights' type, or none): each such initializer is
/// read as the graph's binary32 weight, exactly ([`Dequant`], L38,
/// [`proofs/exact-dequantize.md`](crate::proofs::exact_dequantize)). Returns `DequantizeLinear` output ->
/// the initializer, to orient and name it as the float weight it feeds.
/// Other integer types (int4, int16, ...) are left to
/// [`refuse_quantized`]; a `DequantizeLinear` of such a weight that this
/// reader would read otherwise than the graph (blocked quantization, a
/// scale that is not binary32, an axis or a count that does not fit) is
/// refused in one line naming the weight.
fn dequantize(
    path: &Path,
    tensors: &mut HashMap<String, Stored>,
    nodes: &[Node],
    ints: &HashMap<String, (u64, bool)>,
) -> Result<HashMap<String, String>, ReadError> {
    let mut out: HashMap<String, String> = HashMap::new();
    let mut seen: std::collections::HashSet<&str> = Default::default();
    for n in nodes.iter().filter(|n| n.op == "DequantizeLinear") {
        let Some(x) = n.inputs.first() else { continue };
        let (Some(&(ty, packed)), Some(t)) = (ints.get(x), tensors.get(x)) else {
            continue;
        };
        if !matches!(ty, 2 | 3) || t.shape.len() != 2 {
            continue;
        }
        let err = |m: String| ReadError::format(path, Some(x), m);
        let plan = dequant_plan(n, t, ty, packed, tensors, ints).map_err(err)?;
        if !seen.insert(x) {
            return Err(err("is dequantized by two DequantizeLinear nodes".into()));
        }
        if let Some(o) = &n.output {
            out.insert(o.clone(), x.clone());
        }
        let t = tensors.get_mut(x).expect("present");
        t.dtype = Ok(SourceDtype::Quantized(if ty == 3 {
            "INT8_DQ"
        } else {
            "UINT8_DQ"
        }));
        t.dequant = Some(plan);
    }
    Ok(out)
}

/// How the `DequantizeLinear` node `n` dequantizes the 2-D 8-bit
/// initializer `t` (ONNX type `ty`), or why specbound would not read it as
/// the graph does.
fn dequant_plan(
    n: &Node,
    t: &Stored,
    ty: u64,
    packed: bool,
    tensors: &HashMap<String, Stored>,
    ints: &HashMap<String, (u64, bool)>,
) -> Result<Dequant, String> {
    let what = "its DequantizeLinear";
    if packed {
        return Err(format!(
            "{what} weights are packed in int32_data, which specbound does not decode (raw_data only)"
        ));
    }
    if n.block_size.is_some_and(|b| b != 0) {
        return Err(format!(
            "{what} has a block_size (blocked quantization), which specbound does not read"
        ));
    }
    let input = |k: usize| n.inputs.get(k).filter(|s| !s.is_empty());
    let s_name = input(1).ok_or(format!("{what} has no scale"))?;
    let s = tensors.get(s_name).ok_or(format!(
        "{what} scale '{}' is not an initializer",
        fmt_name(s_name)
    ))?;
    if s.dtype != Ok(SourceDtype::F32) || s.segments.len() != 1 {
        return Err(format!(
            "{what} scale '{}' is {}, not float32 (L38 covers binary32 scales)",
            fmt_name(s_name),
            super::stored::dtype_name(&s.dtype)
        ));
    }
    let numel = |shape: &[usize]| shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let count = numel(&s.shape).ok_or(format!("{what} scale's shape overflows"))?;
    let axis = match (count, s.shape.len()) {
        (1, _) => None,
        (_, 1) => {
            let a = n.axis.unwrap_or(1);
            let a = if a < 0 { a + 2 } else { a };
            match usize::try_from(a) {
                Ok(a @ (0 | 1)) if t.shape[a] == count => Some(a),
                _ => {
                    return Err(format!(
                    "{what} scale has {count} values, not one per index of axis {} of shape {:?}",
                    n.axis.unwrap_or(1),
                    t.shape
                ))
                }
            }
        }
        _ => {
            return Err(format!(
                "{what} scale has shape {:?}, not a scalar or 1-D",
                s.shape
            ))
        }
    };
    let zero_point = match input(2) {
        None => None,
        Some(z) => {
            let zt = tensors.get(z).filter(|zt| zt.segments.len() == 1);
            match (ints.get(z), zt) {
                (Some(&(zty, false)), Some(zt))
                    if zty == ty && numel(&zt.shape) == Some(count) =>
                {
                    Some(zt.segments[0].clone())
                }
                _ => {
                    return Err(format!(
                        "{what} zero point '{}' is not an initializer of the weights' type with                          one value per scale, in raw_data",
                        fmt_name(z)
                    ))
                }
            }
        }
    };
    if t.segments.len() != 1 {
        return Err(format!("{what} weights are not one byte range"));
    }
    Ok(Dequant {
        signed: ty == 3,
        scale: s.segments[0].clone(),
        zero_point,
        axis,
    })
}

/// Refuses a quantized graph: matrices stored as integers that the graph
/// does not dequantize to float weights as [`dequantize`] reads them
/// (`MatMulInteger`, `QLinearMatMul` multiply the integers; int4 or int16
/// weights) are weights that would otherwise be skipped as non-float
/// tensors, leaving only their scale vectors to certify; one line names
/// them.
fn refuse_quantized(
    path: &Path,
    tensors: &HashMap<String, Stored>,
    nodes: &[Node],
) -> Result<(), ReadError> {
    let mut quantized: Vec<&str> = nodes
        .iter()
        .filter(|n| QUANTIZED_OPS.contains(&n.op.as_bytes()))
        .flat_map(|n| n.inputs.iter())
        .filter(|i| {
            tensors
                .get(i.as_str())
                .is_some_and(|t| t.shape.len() >= 2 && t.dtype.is_err())
        })
        .map(String::as_str)
        .collect();
    quantized.sort_unstable();
    quantized.dedup();
    let Some(first) = quantized.first() else {
        return Ok(());
    };
    let shown: Vec<String> = quantized
        .iter()
        .take(4)
        .map(|n| fmt_name(n).to_string())
        .collect();
    Err(ReadError::format(
        path,
        Some(first),
        format!(
            "a quantized ONNX model: {} weight matrices are stored as integers that the graph \
             multiplies or dequantizes in a way specbound does not read ({}{}); specbound reads \
             int8/uint8 weights dequantized by DequantizeLinear with float32 scales, not \
             MatMulInteger, QLinearMatMul or other integer types (certify the float model they \
             were quantized from)",
            quantized.len(),
            shown.join(", "),
            if quantized.len() > 4 { ", ..." } else { "" }
        ),
    ))
}

/// What the walk keeps of a graph.
struct Graph {
    inits: Vec<Init>,
    nodes: Vec<Node>,
    /// The outputs of every node, in order.
    outputs: Vec<String>,
    /// The names of the graph's inputs (GraphProto.input = 11).
    inputs: Vec<String>,
}

/// Walks ModelProto.graph: its initializers, MatMul/Gemm/Transpose nodes,
/// every node's outputs and the graph's inputs.
fn walk(buf: &[u8]) -> Result<Graph, String> {
    let mut w = Wire::new(buf, 0);
    let mut graph = None;
    while let Some((tag, v)) = w.next()? {
        if let (7, Val::Len(b, base)) = (tag, v) {
            if graph.is_some() {
                return Err("ModelProto holds two graphs".into());
            }
            graph = Some((b, base));
        }
    }
    let Some((g, gbase)) = graph else {
        return Err("ModelProto has no graph (field 7)".into());
    };
    let mut budget = Budget(0);
    let (mut inits, mut nodes, mut outputs, mut inputs) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut w = Wire::new(g, gbase);
    while let Some((tag, v)) = w.next()? {
        match (tag, v) {
            (1, Val::Len(b, base)) => {
                if let Some(n) = parse_node(b, base, &mut budget, &mut outputs)
                    .map_err(|m| in_record("a node:", m))?
                {
                    nodes.push(n);
                }
            }
            (11, Val::Len(b, base)) => {
                let mut vw = Wire::new(b, base);
                while let Some((t, v)) = vw.next()? {
                    if let (1, Val::Len(p, _)) = (t, v) {
                        let name = string(p, "graph input name")?;
                        budget.take(name.len())?;
                        inputs.push(name);
                    }
                }
            }
            (5, Val::Len(b, base)) => {
                let t = parse_tensor(b, base, &mut budget)
                    .map_err(|m| in_record("an initializer", m))?;
                inits.push(t);
            }
            _ => {}
        }
    }
    Ok(Graph {
        inits,
        nodes,
        outputs,
        inputs,
    })
}

/// An error of one record, prefixed with what it is (`an initializer
/// holds ...`), unless it is about the whole graph (the budget).
fn in_record(what: &str, m: String) -> String {
    if m.starts_with(OVER_BUDGET) {
        m
    } else {
        format!("{what} {m}")
    }
}

/// Where specbound's reading of the graph and onnx's could disagree, the
/// model is refused: a value produced twice (by two nodes, or by a node and
/// an initializer: not single static assignment, which onnx's checker
/// refuses), or a MatMul or Gemm node whose weight operand (B), or a
/// Transpose node whose input, is a value that no initializer, graph input
/// or node gives (the weight's orientation is read from these operands).
fn check_values(g: &Graph) -> Result<(), String> {
    let mut defined: std::collections::HashSet<&str> =
        g.inputs.iter().map(String::as_str).collect();
    for t in &g.inits {
        defined.insert(&t.name);
    }
    let inits: std::collections::HashSet<&str> = g.inits.iter().map(|t| t.name.as_str()).collect();
    let mut produced: std::collections::HashSet<&str> = Default::default();
    for o in g.outputs.iter().filter(|o| !o.is_empty()) {
        if !produced.insert(o) || inits.contains(o.as_str()) {
            return Err(format!(
                "the value '{}' is given twice (by two nodes, or a node and an initializer): \
                 the graph is not in single static assignment form",
                fmt_name(o)
            ));
        }
        defined.insert(o);
    }
    for n in &g.nodes {
        // The operands the orientation is read from: B of MatMul and Gemm,
        // the input of Transpose.
        let read = if n.op == "Transpose" {
            n.inputs.first()
        } else {
            n.inputs.get(1)
        };
        if let Some(i) = read.filter(|i| !i.is_empty() && !defined.contains(i.as_str())) {
            return Err(format!(
                "the {} node '{}' reads '{}', a value not in the graph (no initializer, graph \
                 input or node output has that name)",
                n.op,
                fmt_name(&n.name),
                fmt_name(i)
            ));
        }
    }
    Ok(())
}

/// A parameter name: not a folded constant (`onnx::...`, the dynamo
/// exporter's `val_N`), no graph path.
fn is_param_name(n: &str) -> bool {
    let generated = n
        .strip_prefix("val_")
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
    !n.starts_with("onnx::") && !n.contains('/') && !n.is_empty() && !generated
}

/// `encoder.layer.0.attention.self.query.weight` from the node name
/// `/encoder/layer.0/attention/self/query/MatMul`.
fn name_from_node(node: &str) -> Option<String> {
    let parts: Vec<&str> = node.trim_start_matches('/').split('/').collect();
    if parts.len() < 2 || parts.iter().any(|p| p.is_empty()) {
        return None;
    }
    Some(format!("{}.weight", parts[..parts.len() - 1].join(".")))
}

/// A weight name taken from a node, with the prefix of its module's bias
/// when the bias (a parameter name, as the exporter keeps it) has a
/// shorter one: the legacy exporter scopes a wrapped sentence-transformers
/// model's nodes `/model/model.0/auto_model/...`, doubling the prefix of
/// `model.0.auto_model....bias`. One rule for both: the weight takes the
/// longest dotted suffix of its path under which its bias exists.
fn named_like_bias(weight: &str, tensors: &HashMap<String, Stored>) -> String {
    let Some(module) = weight.strip_suffix(".weight") else {
        return weight.to_string();
    };
    let mut rest = module;
    loop {
        if tensors.contains_key(&format!("{rest}.bias")) {
            return format!("{rest}.weight");
        }
        match rest.split_once('.') {
            Some((_, tail)) => rest = tail,
            None => return weight.to_string(),
        }
    }
}

/// Orients (and, where needed, names) the weight operand of every MatMul
/// and Gemm node (module documentation).
fn rename_weights(
    tensors: &mut HashMap<String, Stored>,
    nodes: &[Node],
    dequantized: &HashMap<String, String>,
) {
    let transposes: HashMap<&str, &Node> = nodes
        .iter()
        .filter(|n| n.op == "Transpose")
        .filter_map(|n| n.output.as_deref().map(|o| (o, n)))
        .collect();
    let mut done: std::collections::HashSet<String> = Default::default();
    for n in nodes.iter().filter(|n| n.op == "MatMul" || n.op == "Gemm") {
        let Some(b) = n.inputs.get(1) else { continue };
        // Through a 2-D Transpose: the initializer and whether it swaps.
        let (init, swapped) = match transposes.get(b.as_str()) {
            Some(t) => match (t.inputs.first(), t.perm.as_deref()) {
                (Some(i), None | Some([1, 0])) => (i.clone(), true),
                (Some(i), Some([0, 1])) => (i.clone(), false),
                _ => continue,
            },
            None => (b.clone(), false),
        };
        // Through a DequantizeLinear: its 8-bit initializer, read dequantized.
        let init = dequantized.get(&init).cloned().unwrap_or(init);
        let Some(t) = tensors.get(&init) else {
            continue;
        };
        if t.shape.len() != 2 || !done.insert(init.clone()) {
            continue;
        }
        // What the operand B is, stored [k, n] = [in, out] unless swapped;
        // Gemm with transB takes B as [out, in].
        let b_is_out_in = swapped ^ (n.op == "Gemm" && n.trans_b);
        let transpose = !b_is_out_in;
        // onnxruntime's quantizer names a quantized parameter `{name}_quantized`.
        let unquantized = init
            .strip_suffix("_quantized")
            .filter(|b| is_param_name(b) && !tensors.contains_key(*b));
        let new_name = if let Some(b) = unquantized {
            b.to_string()
        } else if is_param_name(&init) {
            init.clone()
        } else {
            let from_meta = n.module.as_ref().map(|m| format!("{m}.weight"));
            match from_meta
                .or_else(|| name_from_node(&n.name))
                .map(|x| named_like_bias(&x, tensors))
            {
                Some(x) if !tensors.contains_key(&x) => x,
                Some(_) | None => continue,
            }
        };
        let mut t = tensors.remove(&init).expect("present");
        t.transpose = transpose;
        t.flatten_ok = false;
        tensors.insert(new_name, t);
    }
}

/// Reads one 2-D tensor of an ONNX model (as presented); without a name
/// the model must hold exactly one 2-D float tensor.
pub(crate) fn read_onnx(path: &Path, tensor: Option<&str>) -> Result<LoadedMatrix, ReadError> {
    let f = OnnxFile::open(path)?;
    super::read_named_or_only(path, tensor, f.table.two_d_candidates(), |n| {
        f.table.read(n)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn external_locations_outside_the_directory_are_refused() {
        for ok in ["model.onnx_data", "data/w.bin", "./w"] {
            assert!(confined(ok), "{ok}");
        }
        for bad in [
            "",
            "../w",
            "a/../../w",
            "/etc/passwd",
            "\\\\host\\w",
            "C:w",
            "a\0b",
            "a\\..\\w",
        ] {
            assert!(!confined(bad), "{bad:?}");
        }
    }

    #[test]
    fn dynamo_namespaces_name_the_module() {
        let ns = ": transformers.models.bert.modeling_bert.BertModel/encoder: \
                  transformers.models.bert.modeling_bert.BertEncoder/encoder.layer.0.attention.self.query: \
                  torch.nn.modules.linear.Linear/linear: aten.linear.default";
        assert_eq!(
            module_of_namespace(ns).as_deref(),
            Some("encoder.layer.0.attention.self.query")
        );
        assert_eq!(module_of_namespace("linear: aten.linear.default"), None);
        assert_eq!(module_of_namespace(": M/a b: C/x: y"), None);
        assert!(
            !is_param_name("val_37") && is_param_name("val_x") && is_param_name("value.weight")
        );
    }

    #[test]
    fn node_names_become_parameter_names() {
        assert_eq!(
            name_from_node("/encoder/layer.0/attention/self/query/MatMul").as_deref(),
            Some("encoder.layer.0.attention.self.query.weight")
        );
        assert_eq!(
            name_from_node("/0/auto_model/encoder/layer.0/output/dense/MatMul").as_deref(),
            Some("0.auto_model.encoder.layer.0.output.dense.weight")
        );
        assert_eq!(name_from_node("MatMul_3"), None);
        assert_eq!(name_from_node("//MatMul"), None);
    }

    #[test]
    fn varints_over_64_bits_and_lying_lengths_are_refused() {
        let mut w = Wire::new(&[0xff; 11], 0);
        assert!(w.varint().unwrap_err().contains("longer than 64 bits"));
        // Field 7, length-delimited, claims 100 bytes of 2.
        let mut w = Wire::new(&[0x3a, 100, 1, 2], 0);
        assert!(w.next().err().unwrap().contains("claims 100 bytes"));
        let mut w = Wire::new(&[0x3b], 0);
        assert!(w.next().err().unwrap().contains("wire type 3"));
    }
}
