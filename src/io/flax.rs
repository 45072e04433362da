//! Flax checkpoints (`flax_model.msgpack`, as transformers and
//! `flax.serialization.to_bytes` write them), read with the `rmp` msgpack
//! crate.
//!
//! The format (flax/serialization.py): a msgpack tree of maps whose keys
//! are strings; each array leaf is msgpack extension type 1 holding the
//! msgpack array `(shape, dtype name, C-order bytes)` (bytes as numpy
//! writes them on a little-endian machine, the only kind JAX runs on); an
//! array over 2^30 bytes is the map `{"__msgpack_chunked_array__": true,
//! "shape": {"0": d0, ...}, "chunks": {"0": flat array, ...}}`, whose chunks
//! concatenate to the flat array. Extension types 2 (complex) and 3 (NumPy
//! scalar), lists and scalars are walked and skipped.
//!
//! **Names.** Map keys are joined with `.`; a leaf named `kernel` of rank 2
//! (a Dense layer, stored `[in, out]`) is presented as PyTorch's
//! `weight`, `[out, in]` (transposed); `scale` (LayerNorm) and
//! `embedding` (Embed, `[vocab, features]` as in PyTorch) are presented as
//! `weight` unchanged. A name already taken keeps the Flax name. Kernels
//! of higher rank (convolutions, DenseGeneral) keep their name and layout
//! and are not read flattened (their order is not PyTorch's).
//!
//! Bounded: at most [`MAX_FLAX_VALUES`] values and [`MAX_FLAX_DEPTH`]
//! levels (the walk recurses once per level), keys of at most
//! [`MAX_FLAX_KEY`] bytes, joined names within a [`NameBudget`] (checked
//! before each is built); every length is checked against the bytes that
//! remain before it is used. Time is linear in the file: a chunked array's
//! entries are placed by index, not searched for.

use std::collections::HashMap;
use std::path::Path;

use rmp::decode;
use rmp::Marker;

use super::limits::{
    check_joined_name, NameBudget, MAX_FLAX_DEPTH, MAX_FLAX_KEY, MAX_FLAX_VALUES, MAX_RANK,
};
use super::stored::{MappedFile, Segment, Stored, Table, TableFile};
use super::{fmt_name, LoadedMatrix, ReadError};
use crate::matrix::SourceDtype;

/// An array leaf as stored.
struct Leaf {
    shape: Vec<usize>,
    dtype: Result<SourceDtype, String>,
    start: usize,
    len: usize,
}

/// What the walk keeps of a value.
enum Node {
    Map(Vec<(String, Node)>),
    Array(Leaf),
    Int(u64),
    Bool(bool),
    Other,
}

struct Walk<'a> {
    rd: &'a [u8],
    total: usize,
    values: u64,
}

fn dtype_of(name: &str) -> Result<SourceDtype, String> {
    match name {
        "float32" => Ok(SourceDtype::F32),
        "float16" => Ok(SourceDtype::F16),
        "bfloat16" => Ok(SourceDtype::BF16),
        "float64" => Ok(SourceDtype::F64),
        other => Err(other.to_string()),
    }
}

impl<'a> Walk<'a> {
    fn at(&self) -> usize {
        self.total - self.rd.len()
    }

    fn peek(&self) -> Result<Marker, String> {
        self.rd
            .first()
            .map(|&b| Marker::from_u8(b))
            .ok_or_else(|| format!("truncated at byte {}", self.at()))
    }

    fn err<E: std::fmt::Debug>(&self, what: &'static str) -> impl FnOnce(E) -> String {
        let at = self.at();
        move |_| format!("truncated or malformed {what} at byte {at}")
    }

    /// `n` bytes, checked against what remains.
    fn take(&mut self, n: u64, what: &str) -> Result<(&'a [u8], usize), String> {
        if n > self.rd.len() as u64 {
            return Err(format!(
                "{what} at byte {} claims {n} bytes, but only {} remain (truncated or a lying length)",
                self.at(),
                self.rd.len()
            ));
        }
        let start = self.at();
        let (a, b) = self.rd.split_at(n as usize);
        self.rd = b;
        Ok((a, start))
    }

    fn count(&mut self) -> Result<(), String> {
        self.values += 1;
        if self.values > MAX_FLAX_VALUES {
            return Err(format!("more than {MAX_FLAX_VALUES} values in the tree"));
        }
        Ok(())
    }

    fn str_bytes(&mut self) -> Result<&'a [u8], String> {
        let n = decode::read_str_len(&mut self.rd).map_err(self.err("string"))?;
        Ok(self.take(u64::from(n), "a string")?.0)
    }

    fn value(&mut self, depth: usize) -> Result<Node, String> {
        self.count()?;
        if depth > MAX_FLAX_DEPTH {
            return Err(format!("nested deeper than {MAX_FLAX_DEPTH} levels"));
        }
        let m = self.peek()?;
        Ok(match m {
            Marker::FixMap(_) | Marker::Map16 | Marker::Map32 => {
                let n = decode::read_map_len(&mut self.rd).map_err(self.err("map"))?;
                let mut entries = Vec::new();
                for _ in 0..n {
                    let at = self.at();
                    let key = match self.peek()? {
                        Marker::FixStr(_) | Marker::Str8 | Marker::Str16 | Marker::Str32 => {
                            let b = self.str_bytes()?;
                            if b.len() as u64 > MAX_FLAX_KEY {
                                return Err(format!(
                                    "a key of {} bytes at byte {at} is longer than the {MAX_FLAX_KEY}-byte limit",
                                    b.len()
                                ));
                            }
                            String::from_utf8(b.to_vec())
                                .map_err(|_| format!("the key at byte {at} is not UTF-8"))?
                        }
                        _ => return Err(format!("a map key at byte {at} is not a string")),
                    };
                    let v = self.value(depth + 1)?;
                    entries.push((key, v));
                }
                Node::Map(entries)
            }
            Marker::FixArray(_) | Marker::Array16 | Marker::Array32 => {
                let n = decode::read_array_len(&mut self.rd).map_err(self.err("array"))?;
                for _ in 0..n {
                    self.value(depth + 1)?;
                }
                Node::Other
            }
            Marker::FixExt1
            | Marker::FixExt2
            | Marker::FixExt4
            | Marker::FixExt8
            | Marker::FixExt16
            | Marker::Ext8
            | Marker::Ext16
            | Marker::Ext32 => {
                let meta = decode::read_ext_meta(&mut self.rd).map_err(self.err("extension"))?;
                let (payload, base) = self.take(u64::from(meta.size), "an extension value")?;
                if meta.typeid == 1 {
                    Node::Array(array_payload(payload, base)?)
                } else {
                    Node::Other
                }
            }
            Marker::True | Marker::False => {
                self.rd = &self.rd[1..];
                Node::Bool(m == Marker::True)
            }
            Marker::FixPos(_)
            | Marker::U8
            | Marker::U16
            | Marker::U32
            | Marker::U64
            | Marker::FixNeg(_)
            | Marker::I8
            | Marker::I16
            | Marker::I32
            | Marker::I64 => match decode::read_int::<i128, _>(&mut self.rd) {
                Ok(v) if v >= 0 => Node::Int(v as u64),
                Ok(_) => Node::Other,
                Err(_) => return Err(format!("truncated integer at byte {}", self.at())),
            },
            Marker::Null => {
                self.rd = &self.rd[1..];
                Node::Other
            }
            Marker::F32 | Marker::F64 => {
                let n = if m == Marker::F32 { 5 } else { 9 };
                self.take(n, "a float")?;
                Node::Other
            }
            Marker::FixStr(_) | Marker::Str8 | Marker::Str16 | Marker::Str32 => {
                self.str_bytes()?;
                Node::Other
            }
            Marker::Bin8 | Marker::Bin16 | Marker::Bin32 => {
                let n = decode::read_bin_len(&mut self.rd).map_err(self.err("binary"))?;
                self.take(u64::from(n), "a binary value")?;
                Node::Other
            }
            Marker::Reserved => {
                return Err(format!(
                    "the reserved msgpack byte 0xc1 at byte {}",
                    self.at()
                ))
            }
        })
    }
}

/// Extension type 1: the msgpack array `(shape, dtype name, bytes)`.
fn array_payload(p: &[u8], base: usize) -> Result<Leaf, String> {
    let mut w = Walk {
        rd: p,
        total: p.len(),
        values: 0,
    };
    let bad = |what: &str| format!("the array at byte {base}: {what}");
    let n = decode::read_array_len(&mut w.rd).map_err(|_| bad("not (shape, dtype, bytes)"))?;
    if n != 3 {
        return Err(bad("not (shape, dtype, bytes)"));
    }
    let rank = decode::read_array_len(&mut w.rd).map_err(|_| bad("the shape is not a list"))?;
    if rank as usize > MAX_RANK {
        return Err(bad(&format!("more than {MAX_RANK} dimensions")));
    }
    let mut shape = Vec::with_capacity(rank as usize);
    for _ in 0..rank {
        let d: u64 = decode::read_int(&mut w.rd).map_err(|_| bad("a dimension is not a count"))?;
        shape.push(usize::try_from(d).map_err(|_| bad("a dimension is too large"))?);
    }
    let name = match w.peek().map_err(|e| bad(&e))? {
        Marker::Bin8 | Marker::Bin16 | Marker::Bin32 => {
            let n = decode::read_bin_len(&mut w.rd).map_err(|_| bad("bad dtype"))?;
            w.take(u64::from(n), "the dtype").map_err(|e| bad(&e))?.0
        }
        _ => w.str_bytes().map_err(|_| bad("the dtype is not a name"))?,
    };
    if name.len() > 64 {
        return Err(bad("the dtype name is longer than 64 bytes"));
    }
    let dtype = dtype_of(&String::from_utf8_lossy(name));
    let len = decode::read_bin_len(&mut w.rd).map_err(|_| bad("the data is not bytes"))?;
    let (_, start) = w.take(u64::from(len), "the data").map_err(|e| bad(&e))?;
    Ok(Leaf {
        shape,
        dtype,
        start: base + start,
        len: len as usize,
    })
}

/// Collects the leaves under `prefix` (chunked arrays assembled); every
/// name is accounted for in `budget` before it is built.
fn collect(
    prefix: &str,
    node: Node,
    budget: &mut NameBudget,
    out: &mut Vec<(String, Stored)>,
) -> Result<(), String> {
    let leaf_name = |budget: &mut NameBudget| {
        budget.take(prefix.len())?;
        Ok::<_, String>(prefix.to_string())
    };
    match node {
        Node::Array(l) => out.push((
            leaf_name(budget)?,
            Stored {
                shape: l.shape,
                dtype: l.dtype,
                segments: vec![Segment {
                    file: 0,
                    start: l.start,
                    len: l.len,
                }],
                transpose: false,
                flatten_ok: false,
                dequant: None,
            },
        )),
        Node::Map(entries) => {
            let chunked = entries
                .iter()
                .any(|(k, v)| k == "__msgpack_chunked_array__" && matches!(v, Node::Bool(true)));
            if chunked {
                let stored = unchunk(prefix, entries)?;
                out.push((leaf_name(budget)?, stored));
                return Ok(());
            }
            for (k, v) in entries {
                let name = if prefix.is_empty() {
                    k
                } else {
                    // Checked before it is built; the leaf's name is
                    // accounted for when it is kept.
                    check_joined_name(prefix.len() + 1 + k.len())?;
                    format!("{prefix}.{k}")
                };
                collect(&name, v, budget, out)?;
            }
        }
        Node::Int(_) | Node::Bool(_) | Node::Other => {}
    }
    Ok(())
}

/// The values of a map keyed "0", "1", ... in index order, placed by
/// their index in one pass (linear in the entries); a key that is not an
/// index below the count (or a second entry for an index) leaves an index
/// without its entry, which is the error.
fn indexed(what: &str, v: Option<Node>) -> Result<Vec<Node>, String> {
    let Some(Node::Map(e)) = v else {
        return Err(format!("its {what} is not a map"));
    };
    let n = e.len();
    let mut slots: Vec<Option<Node>> = Vec::with_capacity(n);
    slots.resize_with(n, || None);
    for (k, v) in e {
        let canonical = k == "0" || (!k.starts_with('0') && k.bytes().all(|b| b.is_ascii_digit()));
        let Some(i) = canonical.then(|| k.parse::<usize>().ok()).flatten() else {
            continue;
        };
        if let Some(slot @ None) = slots.get_mut(i) {
            *slot = Some(v);
        }
    }
    slots
        .into_iter()
        .enumerate()
        .map(|(i, s)| s.ok_or_else(|| format!("its {what} lacks entry '{i}'")))
        .collect()
}

fn unchunk(name: &str, entries: Vec<(String, Node)>) -> Result<Stored, String> {
    let ctx = |m: String| format!("chunked array '{}': {m}", fmt_name(name));
    let mut shape_v = None;
    let mut chunks_v = None;
    for (k, v) in entries {
        match k.as_str() {
            "shape" => shape_v = Some(v),
            "chunks" => chunks_v = Some(v),
            _ => {}
        }
    }
    let mut shape = Vec::new();
    for d in indexed("shape", shape_v).map_err(ctx)? {
        match d {
            Node::Int(x) => {
                shape.push(usize::try_from(x).map_err(|_| ctx("a dimension is too large".into()))?)
            }
            _ => return Err(ctx("a dimension is not a count".into())),
        }
        if shape.len() > MAX_RANK {
            return Err(ctx(format!("more than {MAX_RANK} dimensions")));
        }
    }
    let mut dtype = None;
    let mut segments = Vec::new();
    for c in indexed("chunks", chunks_v).map_err(ctx)? {
        let Node::Array(l) = c else {
            return Err(ctx("a chunk is not an array".into()));
        };
        if l.shape.len() != 1 {
            return Err(ctx("a chunk is not flat".into()));
        }
        if dtype
            .as_ref()
            .is_some_and(|d: &Result<SourceDtype, String>| *d != l.dtype)
        {
            return Err(ctx("the chunks differ in dtype".into()));
        }
        dtype = Some(l.dtype);
        segments.push(Segment {
            file: 0,
            start: l.start,
            len: l.len,
        });
    }
    Ok(Stored {
        shape,
        dtype: dtype.ok_or_else(|| ctx("it has no chunks".into()))?,
        segments,
        transpose: false,
        flatten_ok: false,
        dequant: None,
    })
}

/// PyTorch's name and orientation for a Flax leaf (module documentation).
fn torch_name(name: &str, t: &Stored) -> Option<(String, bool)> {
    let (stem, last) = name.rsplit_once('.').unwrap_or(("", name));
    let join = |x: &str| {
        if stem.is_empty() {
            x.to_string()
        } else {
            format!("{stem}.{x}")
        }
    };
    match last {
        "kernel" if t.shape.len() == 2 => Some((join("weight"), true)),
        "scale" | "embedding" => Some((join("weight"), false)),
        _ => None,
    }
}

/// An opened Flax checkpoint.
pub(crate) struct FlaxFile {
    table: Table,
}

impl FlaxFile {
    /// Maps `path` and walks its tree (bounded; module documentation); no
    /// tensor bytes are converted here.
    pub(crate) fn open(path: &Path) -> Result<Self, ReadError> {
        let main = MappedFile::open(path, "Flax checkpoint")?;
        let bad = |m: String| {
            ReadError::format(path, None, format!("not a readable Flax checkpoint: {m}"))
        };
        let mut w = Walk {
            rd: &main.map,
            total: main.map.len(),
            values: 0,
        };
        let root = w.value(0).map_err(bad)?;
        if !w.rd.is_empty() {
            return Err(bad(format!("{} bytes after the tree", w.rd.len())));
        }
        if !matches!(root, Node::Map(_)) {
            return Err(bad("the top level is not a map of parameters".into()));
        }
        let mut leaves = Vec::new();
        collect("", root, &mut NameBudget::default(), &mut leaves).map_err(bad)?;
        let mut tensors: HashMap<String, Stored> = HashMap::new();
        for (n, t) in leaves {
            if tensors.insert(n.clone(), t).is_some() {
                return Err(ReadError::format(
                    path,
                    Some(&n),
                    "two leaves have this name",
                ));
            }
        }
        let names: Vec<String> = tensors.keys().cloned().collect();
        for n in names {
            let Some((new, transpose)) = torch_name(&n, &tensors[&n]) else {
                continue;
            };
            if tensors.contains_key(&new) {
                continue;
            }
            let mut t = tensors.remove(&n).expect("present");
            t.transpose = transpose;
            tensors.insert(new, t);
        }
        Ok(Self {
            table: Table::new(vec![main], tensors)?,
        })
    }
}

impl TableFile for FlaxFile {
    /// The tensors (names as presented, read one at a time; the
    /// checkpoint reads through them).
    fn table(&self) -> &Table {
        &self.table
    }
}

/// Reads one 2-D tensor of a Flax checkpoint (as presented); without a
/// name the file must hold exactly one 2-D float tensor.
pub(crate) fn read_flax(path: &Path, tensor: Option<&str>) -> Result<LoadedMatrix, ReadError> {
    let f = FlaxFile::open(path)?;
    super::read_named_or_only(path, tensor, f.table.two_d_candidates(), |n| {
        f.table.read(n)
    })
}
