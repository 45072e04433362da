//! One recipe per layer, built from the layout table: which block of which
//! stored tensor forms each proxy matrix. [`extract`] runs it on the stored
//! numbers; [`describe`] prints it. Both check every tensor of the layer
//! (presence, 2-D, shape) by the same code before anything else, so
//! `inspect` fails exactly where `certify` fails, with the same message.

use std::ops::Range;

use rayon::prelude::*;

use super::families::{Fusion, Orientation, Role};
use super::{
    clean, invalid, Architecture, Expert, LayerFfn, MatrixId, MatrixType, ModelError, ProxyMatrix,
    ProxySource,
};
use crate::io::checkpoint::Checkpoint;
use crate::matrix::{transpose_into, DenseMatrix, SourceDtype};

/// The `[rows, cols]` of a layer tensor, or the error `certify` and
/// `inspect` both report: missing, not 2-D.
pub(super) fn tensor_shape(
    ck: &Checkpoint,
    name: &str,
    layer: usize,
    layers: usize,
) -> Result<(usize, usize), ModelError> {
    match ck.info(name) {
        Some((s, _)) if s.len() == 2 => Ok((s[0], s[1])),
        Some((s, _)) => Err(invalid(
            &ck.file_of(name),
            Some(name),
            format!("expected a 2-D tensor, found shape {s:?}"),
        )),
        None => Err(invalid(
            &ck.file_of(name),
            Some(name),
            format!("missing tensor (layer {layer} of {layers}; needed for the proxies)"),
        )),
    }
}

/// The `[experts, rows, cols]` of a fused 3-D expert tensor of layer
/// `layer` (transformers v5), or the error `certify` and `inspect` both
/// report: missing, not 3-D.
pub(super) fn tensor_shape3(
    ck: &Checkpoint,
    name: &str,
    layer: usize,
    layers: usize,
) -> Result<[usize; 3], ModelError> {
    match ck.info(name) {
        Some((s, _)) => <[usize; 3]>::try_from(s.as_slice()).map_err(|_| {
            invalid(
                &ck.file_of(name),
                Some(name),
                format!(
                    "expected a 3-D tensor [experts, rows, columns] (transformers v5's fused \
                     experts), found shape {s:?}"
                ),
            )
        }),
        None => Err(invalid(
            &ck.file_of(name),
            Some(name),
            format!("missing tensor (layer {layer} of {layers}; needed for the proxies)"),
        )),
    }
}

/// The `[rows, cols]` of one expert's slice of a fused 3-D expert tensor,
/// after checking that the tensor holds `experts` slices.
fn slice_shape(
    ck: &Checkpoint,
    name: &str,
    experts: usize,
    layer: usize,
    layers: usize,
) -> Result<(usize, usize), ModelError> {
    let [e, r, c] = tensor_shape3(ck, name, layer, layers)?;
    if e != experts {
        return Err(invalid(
            &ck.file_of(name),
            Some(name),
            format!(
                "shape [{e}, {r}, {c}] holds {e} expert slices, not the architecture's \
                 {experts} (transformers v5's fused experts: [experts, rows, columns])"
            ),
        ));
    }
    Ok((r, c))
}

/// A block of one stored tensor (rows, columns), transposed or not: its
/// entries are stored numbers moved, never computed.
#[derive(Clone, Debug)]
struct Block {
    /// Index into the layer's tensors.
    tensor: usize,
    rows: Range<usize>,
    cols: Range<usize>,
    transpose: bool,
}

impl Block {
    fn shape(&self) -> (usize, usize) {
        let (r, c) = (self.rows.len(), self.cols.len());
        if self.transpose {
            (c, r)
        } else {
            (r, c)
        }
    }

    /// The block of `m` (whose shape the plan has checked).
    fn take(&self, m: &DenseMatrix) -> DenseMatrix {
        debug_assert!(self.rows.end <= m.rows && self.cols.end <= m.cols);
        let (r, c) = (self.rows.len(), self.cols.len());
        let row = |i: usize| &m.data[i * m.cols + self.cols.start..i * m.cols + self.cols.end];
        if !self.transpose {
            let mut data = Vec::with_capacity(r * c);
            for i in self.rows.clone() {
                data.extend_from_slice(row(i));
            }
            DenseMatrix {
                rows: r,
                cols: c,
                data,
            }
        } else {
            let mut data = vec![0.0; r * c];
            let block = (self.rows.clone(), self.cols.clone());
            transpose_into((&m.data, m.cols), block, (&mut data, r, 0), |x| x);
            DenseMatrix {
                rows: c,
                cols: r,
                data,
            }
        }
    }

    /// `name[a:b, :]^T` (full ranges as `:`, no brackets for the whole tensor).
    fn render(&self, tensors: &[Stored]) -> String {
        let s = &tensors[self.tensor];
        let span = |r: &Range<usize>, n: usize| {
            if r.start == 0 && r.end == n {
                ":".to_string()
            } else {
                format!("{}:{}", r.start, r.end)
            }
        };
        let name = match s.slice {
            Some(e) => format!("{}[{e}]", clean(&s.name)),
            None => clean(&s.name),
        };
        let mut t = match &s.scale {
            Some(v) => format!("(diag({}) {name})", clean(v)),
            None => name,
        };
        if !(self.rows == (0..s.shape.0) && self.cols == (0..s.shape.1)) {
            t += &format!(
                "[{}, {}]",
                span(&self.rows, s.shape.0),
                span(&self.cols, s.shape.1)
            );
        }
        if self.transpose {
            t += "^T";
        }
        t
    }
}

/// How a proxy matrix is formed from blocks.
#[derive(Clone, Debug)]
enum Formula {
    /// `B C`, kept factored.
    Factored(Block, Block),
    /// The blocks side by side.
    Dense(Vec<Block>),
}

/// One proxy matrix of a layer and how to form it.
#[derive(Clone, Debug)]
struct Recipe {
    id: MatrixId,
    rows: usize,
    cols: usize,
    formula: Formula,
}

/// A layer tensor and the shape the architecture requires of it.
#[derive(Clone, Debug)]
struct Stored {
    name: String,
    shape: (usize, usize),
    orientation: Orientation,
    /// Its LayerScale vector ([`super::TensorSpec::scale`]), if any.
    scale: Option<String>,
    /// The expert whose slice `name[e]` of a fused 3-D expert tensor this
    /// is (transformers v5), if it is one.
    slice: Option<usize>,
}

/// Whether every number of this storage format times every number of
/// another such format is exact in binary64: formats of at most 26
/// significant bits whose exponents stay far inside binary64's range
/// ([`proofs/exact-layerscale.md`](crate::proofs::exact_layerscale)).
fn exact_factor(d: SourceDtype) -> bool {
    matches!(d, SourceDtype::F32 | SourceDtype::F16 | SourceDtype::BF16)
}

/// Reads the layer tensor `s` (shape checked) as the block applies it:
/// with a LayerScale vector `lambda`, output `o` of the weight times
/// `lambda[o]`, i.e. `diag(lambda) W`. Guarantee: every entry is the exact
/// product of two stored numbers (exact conversion, then a binary64 product
/// that is exact for float32, float16 and bfloat16 factors by
/// [`proofs/exact-layerscale.md`](crate::proofs::exact_layerscale)); any other storage format (float64,
/// integers, block formats) is refused, naming the tensor, rather than
/// rounded.
fn read_stored(ck: &Checkpoint, s: &Stored) -> Result<DenseMatrix, ModelError> {
    let loaded = match s.slice {
        Some(e) => ck.read_slice(&s.name, e)?,
        None => ck.read(&s.name)?,
    };
    let mut m = loaded.matrix;
    if (m.rows, m.cols) != s.shape {
        return Err(invalid(
            &ck.file_of(&s.name),
            Some(&s.name),
            format!(
                "shape [{}, {}] disagrees with the architecture (expected [{}, {}])",
                m.rows, m.cols, s.shape.0, s.shape.1
            ),
        ));
    }
    let Some(vname) = &s.scale else {
        return Ok(m);
    };
    let v = ck.read_vector(vname)?;
    for (name, dtype) in [(&s.name, loaded.dtype), (vname, v.dtype)] {
        if !exact_factor(dtype) {
            return Err(invalid(
                &ck.file_of(name),
                Some(name),
                format!(
                    "LayerScale is folded into the weight by products of stored numbers, exact \
                     only for float32, float16 or bfloat16 (proofs/exact-layerscale.md); this \
                     tensor is stored as {dtype:?}, whose products could round: not certified"
                ),
            ));
        }
    }
    let outputs = match s.orientation {
        Orientation::OutIn => m.rows,
        Orientation::InOut => m.cols,
    };
    if v.matrix.cols != outputs {
        return Err(invalid(
            &ck.file_of(vname),
            Some(vname),
            format!(
                "{} entries disagree with the {outputs} outputs of '{}'",
                v.matrix.cols,
                clean(&s.name)
            ),
        ));
    }
    let cols = m.cols;
    for (k, x) in m.data.iter_mut().enumerate() {
        let o = match s.orientation {
            Orientation::OutIn => k / cols,
            Orientation::InOut => k % cols,
        };
        // Exact (proofs/exact-layerscale.md): both factors checked above.
        *x *= v.matrix.data[o];
    }
    Ok(m)
}

/// Where a role's matrix `R` (in `[out, in]` orientation) lies in a stored tensor.
#[derive(Clone, Copy, Debug)]
struct RoleAt {
    tensor: usize,
    orientation: Orientation,
    /// First row of `R` along the stored output axis (fused tensors).
    offset: usize,
    out: usize,
    inn: usize,
    /// Per-group interleaving ([`Fusion::PerGroup`]): the rows of one
    /// group, this role's first row within a group, and its heads per group;
    /// `R`'s head block `b` (of `dh` rows) starts at stored row
    /// `(b / heads) * per_group + within + (b % heads) * dh`.
    group: Option<Grouped>,
}

/// Where the heads of a role of a per-group fused tensor lie.
#[derive(Clone, Copy, Debug)]
struct Grouped {
    per_group: usize,
    within: usize,
    heads: usize,
    dh: usize,
}

impl RoleAt {
    /// `R[o, i]`, transposed when `t`, as a block of the stored tensor.
    fn block(&self, o: Range<usize>, i: Range<usize>, t: bool) -> Block {
        let o = self.offset + o.start..self.offset + o.end;
        match self.orientation {
            Orientation::OutIn => Block {
                tensor: self.tensor,
                rows: o,
                cols: i,
                transpose: t,
            },
            Orientation::InOut => Block {
                tensor: self.tensor,
                rows: i,
                cols: o,
                transpose: !t,
            },
        }
    }

    /// Rows `start..start + n` of `R` (all columns). In a per-group fused
    /// tensor the rows of `R` are one head block (`start` a multiple of the
    /// head dimension, `n` the head dimension), found where the
    /// interleaving puts it.
    fn rows(&self, start: usize, n: usize, t: bool) -> Block {
        match self.group {
            None => self.block(start..start + n, 0..self.inn, t),
            Some(g) => {
                debug_assert!(start % g.dh == 0 && n == g.dh);
                let b = start / g.dh;
                let at = (b / g.heads) * g.per_group + g.within + (b % g.heads) * g.dh;
                let plain = RoleAt {
                    offset: 0,
                    group: None,
                    ..*self
                };
                plain.block(at..at + n, 0..self.inn, t)
            }
        }
    }

    /// Columns `start..start + n` of `R` (all rows).
    fn cols(&self, start: usize, n: usize, t: bool) -> Block {
        self.block(0..self.out, start..start + n, t)
    }

    /// All of `R` (contiguous: never a role of a per-group fused tensor).
    fn whole(&self, t: bool) -> Block {
        debug_assert!(self.group.is_none());
        self.block(0..self.out, 0..self.inn, t)
    }
}

/// Widths the recipe uses, checked once.
struct Dims {
    n: usize,
    dh: usize,
    q: usize,
    kv: usize,
    i: usize,
}

fn dims(ck: &Checkpoint, a: &Architecture) -> Result<Dims, ModelError> {
    let bad = || {
        invalid(
            &ck.file_of(""),
            None,
            format!(
                "inconsistent architecture: hidden size {}, {} heads, {} key/value heads, \
                 head dimension {}, feed-forward width {}",
                a.hidden, a.heads, a.kv_heads, a.head_dim, a.intermediate
            ),
        )
    };
    if a.hidden == 0
        || a.intermediate == 0
        || a.head_dim == 0
        || a.kv_heads == 0
        || a.heads % a.kv_heads != 0
    {
        return Err(bad());
    }
    let q = a.heads.checked_mul(a.head_dim).ok_or_else(bad)?;
    Ok(Dims {
        n: a.hidden,
        dh: a.head_dim,
        q,
        kv: a.kv_heads * a.head_dim, // kv_heads <= heads
        i: a.intermediate,
    })
}

/// The `(out, in)` widths of a role's matrix, `i` the width of its feed-forward block.
fn role_width(d: &Dims, i: usize, r: Role) -> (usize, usize) {
    match r {
        Role::Query => (d.q, d.n),
        Role::Key | Role::Value => (d.kv, d.n),
        Role::Output => (d.n, d.q),
        Role::FfnGate | Role::FfnIn => (i, d.n),
        Role::FfnOut => (d.n, i),
        // The decoder's heads (no grouped key/value heads); keys and values
        // read the encoder's output, whose width must be the decoder's N.
        Role::CrossQuery | Role::CrossKey | Role::CrossValue => (d.q, d.n),
        Role::CrossOutput => (d.n, d.q),
    }
}

/// A layer's tensors (checked against the architecture) and its recipes,
/// in the order layer, QK heads, V_tilde heads, (a decoder's) QK_cross
/// heads, V_tilde_cross heads, M_in, M_out.
struct LayerPlan {
    tensors: Vec<Stored>,
    recipes: Vec<Recipe>,
    /// Where each role of the family lies in `tensors`.
    roles: Vec<(Role, RoleAt)>,
}

/// One stored tensor of layer `l` as the plan reads it: its name, roles,
/// storage, and the feed-forward block its feed-forward roles belong to.
struct LayerTensor {
    name: String,
    roles: &'static [Role],
    orientation: Orientation,
    fusion: Fusion,
    block: Option<Expert>,
    /// The stored LayerScale vector folded into it (DINOv2), if any.
    scale: Option<String>,
    /// The expert's slice of a fused 3-D expert tensor ([`Stored::slice`]).
    slice: Option<usize>,
}

/// The stored tensors of layer `l`: the family's, except that in a sparse
/// layer of a mixture-of-experts family the feed-forward tensors are each
/// expert's (routed experts, then the shared one).
fn layer_tensors(a: &Architecture, l: usize) -> Vec<LayerTensor> {
    let ffn = a.layer_ffn(l);
    let moe = a.spec.moe.filter(|_| ffn != LayerFfn::DENSE);
    let is_ffn = |r: &Role| matches!(r, Role::FfnGate | Role::FfnIn | Role::FfnOut);
    let mut out: Vec<LayerTensor> = a
        .tensors
        .iter()
        .filter(|ts| moe.is_none() || !ts.roles.iter().any(is_ffn))
        .map(|ts| LayerTensor {
            name: a.tensor_name(ts, l),
            roles: ts.roles,
            orientation: ts.orientation,
            fusion: ts.fusion,
            block: None,
            scale: a.scale_name(ts, l),
            slice: None,
        })
        .collect();
    if let Some(m) = moe {
        let name = |pat: &str, e: &str| {
            let n = pat.replace("{l}", &l.to_string()).replace("{e}", e);
            format!("{}{n}", a.prefix)
        };
        let fused = m.fused.filter(|_| a.moe.as_ref().is_some_and(|x| x.fused));
        for block in ffn.blocks().into_iter().flatten() {
            let mut push = |name: String, roles: &'static [Role], slice: Option<usize>| {
                out.push(LayerTensor {
                    name,
                    roles,
                    orientation: Orientation::OutIn,
                    fusion: Fusion::Stacked,
                    block: Some(block),
                    scale: None,
                    slice,
                })
            };
            match (block, fused) {
                // transformers v5: expert e's [W_gate; W_up] and W_down are
                // the slices e of two 3-D tensors.
                (Expert::Routed(e), Some(f)) => {
                    push(name(f.gate_up, ""), &[Role::FfnGate, Role::FfnIn], Some(e));
                    push(name(f.down, ""), &[Role::FfnOut], Some(e));
                }
                _ => {
                    let (names, e) = match block {
                        Expert::Routed(e) => (m.experts, e.to_string()),
                        Expert::Shared => (
                            m.shared
                                .expect("a shared expert is stated only with its names"),
                            String::new(),
                        ),
                    };
                    for (pat, role) in
                        names
                            .iter()
                            .zip([&[Role::FfnGate], &[Role::FfnIn], &[Role::FfnOut]])
                    {
                        push(name(pat, &e), role, None);
                    }
                }
            }
        }
    }
    out
}

/// The per-head products of one attention of a layer.
#[derive(Clone, Copy)]
struct Heads {
    layer: usize,
    heads: usize,
    /// Query heads per key/value head.
    group: usize,
    n: usize,
    dh: usize,
}

impl Heads {
    /// Pushes the query-key product `Q_h^T K_g` of every head (kind
    /// `kinds[0]`), then the value-output product `V_g^T O_h` (kind
    /// `kinds[1]`), `g` the key/value head of query head `h` and `O_h` the
    /// head-h row slice of the transposed output weight, from the roles'
    /// places `[q, k, v, o]`.
    fn push(&self, recipes: &mut Vec<Recipe>, [q, k, v, o]: [RoleAt; 4], kinds: [MatrixType; 2]) {
        let (n, dh) = (self.n, self.dh);
        for h in 0..self.heads {
            let g = h / self.group;
            recipes.push(Recipe {
                id: MatrixId::head(self.layer, h, kinds[0]),
                rows: n,
                cols: n,
                formula: Formula::Factored(q.rows(h * dh, dh, true), k.rows(g * dh, dh, false)),
            });
        }
        for h in 0..self.heads {
            let g = h / self.group;
            recipes.push(Recipe {
                id: MatrixId::head(self.layer, h, kinds[1]),
                rows: n,
                cols: n,
                formula: Formula::Factored(v.rows(g * dh, dh, true), o.cols(h * dh, dh, true)),
            });
        }
    }
}

/// Where each role of a layer lies among its stored tensors, with the
/// feed-forward block (a mixture of experts' expert) it belongs to.
struct Places(Vec<(Role, Option<Expert>, RoleAt)>);

impl Places {
    /// Where role `r` of block `b` lies, if the layer has it.
    fn find(&self, r: Role, b: Option<Expert>) -> Option<RoleAt> {
        self.0
            .iter()
            .find(|(x, y, _)| *x == r && *y == b)
            .map(|(_, _, p)| *p)
    }

    /// Where role `r` of block `b` lies: a role every layer has.
    fn need(&self, r: Role, b: Option<Expert>) -> RoleAt {
        self.find(r, b)
            .expect("every family has every role of the paper's block (table test)")
    }
}

/// A layer's tensors, checked against the architecture, and the recipes of
/// its proxy matrices: the attention's per-head products, a decoder's
/// cross-attention's, then each feed-forward block's `M_in` and `M_out`.
fn plan_layer(
    ck: &Checkpoint,
    a: &Architecture,
    d: &Dims,
    l: usize,
) -> Result<LayerPlan, ModelError> {
    let mut tensors = Vec::new();
    let mut places = Places(Vec::new());
    for (k, ts) in layer_tensors(a, l).into_iter().enumerate() {
        let want = place_roles(ck, a, d, k, &ts, &mut places)?;
        check_stored_shape(ck, a, l, &ts, want)?;
        tensors.push(Stored {
            name: ts.name,
            shape: want,
            orientation: ts.orientation,
            scale: ts.scale,
            slice: ts.slice,
        });
    }
    let blocks = a.layer_ffn(l).blocks();
    let mut recipes = Vec::with_capacity(4 * a.heads + 2 * blocks.len());
    attention_recipes(a, d, l, &places, &mut recipes);
    feed_forward_recipes(ck, d, l, &blocks, &places, &mut recipes)?;
    // The raw weights' places: the layer's own roles (an expert's are not
    // raw weights of the measures, which a mixture of experts refuses).
    let roles = places
        .0
        .iter()
        .filter(|(_, b, _)| b.is_none())
        .map(|&(r, _, p)| (r, p))
        .collect();
    Ok(LayerPlan {
        tensors,
        recipes,
        roles,
    })
}

/// Records where each role of the `k`-th stored tensor `ts` lies (stacked
/// along its output axis, or interleaved per group) and returns the
/// stored shape the architecture expects of it.
fn place_roles(
    ck: &Checkpoint,
    a: &Architecture,
    d: &Dims,
    k: usize,
    ts: &LayerTensor,
    places: &mut Places,
) -> Result<(usize, usize), ModelError> {
    // A per-group fused [query; key; value]: each group holds its query
    // heads, then one key head, then one value head.
    let group_q = a.heads / a.kv_heads;
    let per_group = (group_q + 2).saturating_mul(d.dh); // the fused height is checked next
    let fw = if ts.block.is_some() {
        a.ffn_width(ts.block)
    } else {
        d.i
    };
    let (mut out, mut inn) = (0usize, 0usize);
    for &role in ts.roles {
        let (o, i) = role_width(d, fw, role);
        let group = (ts.fusion == Fusion::PerGroup).then(|| Grouped {
            per_group,
            within: match role {
                Role::Query => 0,
                Role::Key => group_q * d.dh,
                _ => (group_q + 1) * d.dh,
            },
            heads: if role == Role::Query { group_q } else { 1 },
            dh: d.dh,
        });
        places.0.push((
            role,
            ts.block,
            RoleAt {
                tensor: k,
                orientation: ts.orientation,
                offset: out,
                out: o,
                inn: i,
                group,
            },
        ));
        // At most three roles of widths bounded by a checked product.
        out = out.checked_add(o).ok_or_else(|| {
            invalid(
                &ck.file_of(&ts.name),
                Some(&ts.name),
                "the tensor's height overflows",
            )
        })?;
        inn = i;
    }
    Ok(match ts.orientation {
        Orientation::OutIn => (out, inn),
        Orientation::InOut => (inn, out),
    })
}

/// That the stored tensor `ts` of layer `l` (or its expert's slice) has
/// the shape `want`; a cross-attention key or value weight of another
/// input width is named as reading an encoder of another width.
fn check_stored_shape(
    ck: &Checkpoint,
    a: &Architecture,
    l: usize,
    ts: &LayerTensor,
    want: (usize, usize),
) -> Result<(), ModelError> {
    let name = &ts.name;
    let got = match ts.slice {
        Some(_) => {
            let experts = a.layer_ffn(l).experts;
            slice_shape(ck, name, experts, l, a.layers)?
        }
        None => tensor_shape(ck, name, l, a.layers)?,
    };
    let reads_encoder = ts
        .roles
        .iter()
        .any(|r| matches!(r, Role::CrossKey | Role::CrossValue));
    if got != want && reads_encoder && got.0 == want.0 {
        // The encoder's width is the input width of these weights.
        return Err(invalid(
            &ck.file_of(name),
            Some(name),
            format!(
                "cross-attention input width {} (the encoder's) differs from the decoder's \
                 hidden size {}: only a cross-attention whose encoder and decoder widths \
                 are equal is read",
                got.1, want.1
            ),
        ));
    }
    if got != want {
        let what = match ts.slice {
            Some(e) => format!("expert {e}'s slice"),
            None => "shape".to_string(),
        };
        return Err(invalid(
            &ck.file_of(name),
            Some(name),
            format!(
                "{what} [{}, {}] disagrees with the architecture (expected [{}, {}])",
                got.0, got.1, want.0, want.1
            ),
        ));
    }
    Ok(())
}

/// Pushes the per-head products of layer `l`'s attention, then (a decoder
/// block's) of its cross-attention.
fn attention_recipes(
    a: &Architecture,
    d: &Dims,
    l: usize,
    places: &Places,
    recipes: &mut Vec<Recipe>,
) {
    let [q, k, v, o] =
        [Role::Query, Role::Key, Role::Value, Role::Output].map(|r| places.need(r, None));
    let heads = Heads {
        layer: l,
        heads: a.heads,
        group: a.heads / a.kv_heads,
        n: d.n,
        dh: d.dh,
    };
    heads.push(recipes, [q, k, v, o], [MatrixType::QK, MatrixType::VTilde]);
    // A decoder block's cross-attention: the same products of its own
    // weights (the table test: all four roles or none), one key/value head
    // per head.
    let cross = [
        Role::CrossQuery,
        Role::CrossKey,
        Role::CrossValue,
        Role::CrossOutput,
    ]
    .map(|r| places.find(r, None));
    if let [Some(q_c), Some(k_c), Some(v_c), Some(o_c)] = cross {
        let cross_heads = Heads { group: 1, ..heads };
        cross_heads.push(
            recipes,
            [q_c, k_c, v_c, o_c],
            [MatrixType::QKCross, MatrixType::VTildeCross],
        );
    }
}

/// Pushes, per feed-forward block of layer `l` (the layer's, or each
/// expert's), `M_in = W_in^T` or `[W_gate^T, W_up^T]` for a gated
/// feed-forward; then every block's `M_out`.
fn feed_forward_recipes(
    ck: &Checkpoint,
    d: &Dims,
    l: usize,
    blocks: &[Option<Expert>],
    places: &Places,
    recipes: &mut Vec<Recipe>,
) -> Result<(), ModelError> {
    let n = d.n;
    let mut m_outs = Vec::with_capacity(blocks.len());
    for &b in blocks {
        let (gate, up, down) = (
            places.find(Role::FfnGate, b),
            places.need(Role::FfnIn, b),
            places.need(Role::FfnOut, b),
        );
        let m_in: Vec<Block> = gate.iter().chain([&up]).map(|r| r.whole(true)).collect();
        let m_in_cols = m_in
            .iter()
            .try_fold(0usize, |acc, b| acc.checked_add(b.shape().1))
            .ok_or_else(|| invalid(&ck.file_of(""), None, "the feed-forward width overflows"))?;
        let id = |kind| MatrixId {
            expert: b,
            ..MatrixId::layer(l, kind)
        };
        recipes.push(Recipe {
            id: id(MatrixType::MIn),
            rows: n,
            cols: m_in_cols,
            formula: Formula::Dense(m_in),
        });
        m_outs.push(Recipe {
            id: id(MatrixType::MOut),
            rows: down.inn,
            cols: n,
            formula: Formula::Dense(vec![down.whole(true)]),
        });
    }
    recipes.extend(m_outs);
    Ok(())
}

/// The blocks side by side (all of the same height).
fn side_by_side<'a>(blocks: &[Block], get: &dyn Fn(usize) -> &'a DenseMatrix) -> DenseMatrix {
    if let [one] = blocks {
        return one.take(get(one.tensor));
    }
    // Straight from the tensors into the result (no copy of each block).
    let rows = blocks[0].shape().0;
    let cols: usize = blocks.iter().map(|b| b.shape().1).sum();
    let mut data = vec![0.0; rows * cols];
    let mut off = 0;
    for b in blocks {
        let m = get(b.tensor);
        let (br, bc) = b.shape();
        assert_eq!(br, rows, "blocks side by side have equal row counts");
        debug_assert!(b.rows.end <= m.rows && b.cols.end <= m.cols);
        if b.transpose {
            let block = (b.rows.clone(), b.cols.clone());
            transpose_into((&m.data, m.cols), block, (&mut data, cols, off), |x| x);
        } else {
            for (ii, i) in b.rows.clone().enumerate() {
                let src = &m.data[i * m.cols + b.cols.start..i * m.cols + b.cols.end];
                data[ii * cols + off..ii * cols + off + bc].copy_from_slice(src);
            }
        }
        off += bc;
    }
    DenseMatrix { rows, cols, data }
}

/// Reads the layer tensors and builds all proxy matrices, in the order
/// layer, then QK heads, V_tilde heads, a decoder block's QK_cross and
/// V_tilde_cross heads (its cross-attention's own weights), M_in, M_out.
/// Query head h uses
/// key/value head `floor(h / (heads / kv_heads))` (grouped-query attention).
/// Every entry is a stored number moved (exact).
pub fn extract(ck: &Checkpoint, arch: &Architecture) -> Result<Vec<ProxyMatrix>, ModelError> {
    let mut out = Vec::new();
    for l in 0..arch.layers {
        out.extend(extract_layer(ck, arch, l, &|_| true)?);
    }
    Ok(out)
}

/// The proxy matrices of layer `l` that `want` selects, in the order of
/// [`extract`], built exactly as [`extract`] builds them. Every tensor of the
/// layer is checked (presence, shape) as [`describe`] checks it, but only
/// the tensors the selected matrices are formed from are read.
pub fn extract_layer(
    ck: &Checkpoint,
    arch: &Architecture,
    l: usize,
    want: &dyn Fn(MatrixId) -> bool,
) -> Result<Vec<ProxyMatrix>, ModelError> {
    let d = dims(ck, arch)?;
    let plan = plan_layer(ck, arch, &d, l)?;
    let recipes: Vec<Recipe> = plan.recipes.into_iter().filter(|r| want(r.id)).collect();
    let mut needed = vec![false; plan.tensors.len()];
    for r in &recipes {
        match &r.formula {
            Formula::Factored(b, c) => {
                needed[b.tensor] = true;
                needed[c.tensor] = true;
            }
            Formula::Dense(blocks) => blocks.iter().for_each(|b| needed[b.tensor] = true),
        }
    }
    // The tensors are read (converted to f64) in parallel; an error is the
    // first in tensor order, as a sequential read reports it.
    let mut mats = plan
        .tensors
        .par_iter()
        .zip(&needed)
        .map(|(s, &need)| {
            if !need {
                return Ok(None);
            }
            read_stored(ck, s).map(Some)
        })
        .collect::<Vec<Result<_, ModelError>>>()
        .into_iter()
        .collect::<Result<Vec<_>, ModelError>>()?;
    // Each tensor is freed after the last matrix formed from it, so that
    // the layer's tensors and its matrices are not all alive at once
    // (docs/certify.md, "Memory").
    let mut last_use = vec![0usize; plan.tensors.len()];
    for (i, r) in recipes.iter().enumerate() {
        match &r.formula {
            Formula::Factored(b, c) => {
                last_use[b.tensor] = i;
                last_use[c.tensor] = i;
            }
            Formula::Dense(blocks) => blocks.iter().for_each(|b| last_use[b.tensor] = i),
        }
    }
    // Consecutive recipes of one kind (the factored heads, then the dense
    // feed-forward matrices) are formed in parallel; the tensors whose last
    // use falls in a group are freed after it.
    let mut out = Vec::with_capacity(recipes.len());
    let mut start = 0;
    while start < recipes.len() {
        let factored = |r: &Recipe| matches!(r.formula, Formula::Factored(..));
        let kind = factored(&recipes[start]);
        let end = (start..recipes.len())
            .find(|&i| factored(&recipes[i]) != kind)
            .unwrap_or(recipes.len());
        let get = |k: usize| {
            mats[k]
                .as_ref()
                .expect("read above and kept until its last use")
        };
        let formed: Vec<ProxyMatrix> = recipes[start..end]
            .par_iter()
            .map(|r| ProxyMatrix {
                id: r.id,
                rows: r.rows,
                cols: r.cols,
                source: match &r.formula {
                    Formula::Factored(b, c) => ProxySource::Factored {
                        b: b.take(get(b.tensor)),
                        c: c.take(get(c.tensor)),
                    },
                    Formula::Dense(blocks) => ProxySource::Dense(side_by_side(blocks, &get)),
                },
            })
            .collect();
        out.extend(formed);
        for (t, m) in mats.iter_mut().enumerate() {
            if needed[t] && (start..end).contains(&last_use[t]) {
                *m = None;
            }
        }
        start = end;
    }
    Ok(out)
}

/// One proxy matrix as `inspect` describes it, without reading its values.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ProxyDescription {
    /// Layer.
    pub layer: usize,
    /// Head or -1.
    pub head: i64,
    /// The expert of a mixture-of-experts feed-forward matrix (an index
    /// or `"shared"`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expert: Option<Expert>,
    /// Family name.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// How it is formed from stored tensors: blocks as `name[rows, cols]`
    /// (`a:b` ranges, `:` for all), `^T` for a transpose.
    pub formed_from: String,
}

/// A tensor no proxy uses: `(name, shape, dtype)`.
pub type UnmappedTensor = (String, Vec<usize>, String);

/// Describes every proxy matrix by the recipe [`extract`] runs, and lists
/// the tensors that no proxy uses (embeddings, norms, biases, heads,
/// buffers, anything unrecognised). Fails where [`extract`] fails before
/// reading values (a missing or misshapen tensor), with the same error.
pub fn describe(
    ck: &Checkpoint,
    arch: &Architecture,
) -> Result<(Vec<ProxyDescription>, Vec<UnmappedTensor>), ModelError> {
    let d = dims(ck, arch)?;
    let mut used = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for l in 0..arch.layers {
        let plan = plan_layer(ck, arch, &d, l)?;
        for r in &plan.recipes {
            let formed_from = match &r.formula {
                Formula::Factored(b, c) => format!(
                    "{} @ {} (factored)",
                    b.render(&plan.tensors),
                    c.render(&plan.tensors)
                ),
                Formula::Dense(blocks) if blocks.len() == 1 => blocks[0].render(&plan.tensors),
                Formula::Dense(blocks) => format!(
                    "[{}] side by side (gated: extension)",
                    blocks
                        .iter()
                        .map(|b| b.render(&plan.tensors))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            out.push(ProxyDescription {
                layer: l,
                head: r.id.head_column(),
                expert: r.id.expert,
                kind: r.id.kind.name(),
                rows: r.rows,
                cols: r.cols,
                formed_from,
            });
        }
        for s in plan.tensors {
            used.extend(s.scale);
            used.insert(s.name);
        }
    }
    let unmapped = ck
        .names()
        .filter(|name| !used.contains(*name))
        .map(|name| {
            let (shape, dtype) = ck.info(name).unwrap_or_default();
            (name.to_string(), shape, dtype)
        })
        .collect();
    Ok((out, unmapped))
}

/// One raw weight matrix of a block, as the map `x -> W x` (torch's
/// `[out, in]` orientation), for the norm-based measures
/// (`bounds::measures`). The entries are held transposed (`W^T`, `in x
/// out`), so that the sum of `W^T`'s column norms is `||W^T||_{2,1}`, the
/// sum of `W`'s row norms. Every entry is a stored number moved (exact).
#[derive(Clone, Debug)]
pub struct RawWeight {
    /// Layer from 0.
    pub layer: usize,
    /// What the matrix is in the block.
    pub role: Role,
    /// How `W` is formed from the stored tensor (`name[rows, cols]^T`, as
    /// `inspect` writes blocks; control characters escaped).
    pub tensor: String,
    /// `W^T` (`in x out`).
    pub transposed: DenseMatrix,
}

impl RawWeight {
    /// Rows of `W` (its output width).
    pub(crate) fn out_dim(&self) -> usize {
        self.transposed.cols
    }

    /// Columns of `W` (its input width).
    pub(crate) fn in_dim(&self) -> usize {
        self.transposed.rows
    }
}

/// The raw weight matrices of layer `l`, in role order (query, key, value,
/// attention output, then the feed-forward gate when gated, input and
/// output), read through the layer's recipe plan (presence and shapes
/// checked as [`extract`] checks them). Fused tensors are split by role.
pub fn extract_raw_layer(
    ck: &Checkpoint,
    arch: &Architecture,
    l: usize,
) -> Result<Vec<RawWeight>, ModelError> {
    if arch.spec.moe.is_some() {
        // Which experts a token passes depends on the token: a measure over
        // the raw weights of the block is not defined by the block's weights.
        return Err(invalid(
            &ck.file_of(""),
            None,
            "the raw-weight measures are not defined for a mixture-of-experts model \
             (its feed-forward depends on the routing); certify without --measures",
        ));
    }
    let d = dims(ck, arch)?;
    let plan = plan_layer(ck, arch, &d, l)?;
    let mut mats: Vec<Option<DenseMatrix>> = vec![None; plan.tensors.len()];
    let mut out = Vec::new();
    for role in [
        Role::Query,
        Role::Key,
        Role::Value,
        Role::Output,
        Role::FfnGate,
        Role::FfnIn,
        Role::FfnOut,
    ] {
        let Some(&(_, at)) = plan.roles.iter().find(|(r, _)| *r == role) else {
            continue;
        };
        let s = &plan.tensors[at.tensor];
        if mats[at.tensor].is_none() {
            mats[at.tensor] = Some(read_stored(ck, s)?);
        }
        let m = mats[at.tensor].as_ref().expect("read above");
        // W's rows: the whole role, or, fused per head (GPT-NeoX, BLOOM),
        // its head blocks in head order, gathered from where the
        // interleaving puts them (the rows of the proxies' per-head
        // slicing); `W^T` is then their transposes side by side.
        let blocks: Vec<Block> = match at.group {
            None => vec![at.whole(false)],
            Some(g) => (0..at.out / g.dh)
                .map(|b| at.rows(b * g.dh, g.dh, false))
                .collect(),
        };
        let transposed_blocks: Vec<Block> = blocks
            .iter()
            .map(|b| Block {
                transpose: !b.transpose,
                ..b.clone()
            })
            .collect();
        let tensor = match blocks.as_slice() {
            [one] => one.render(&plan.tensors),
            many => format!(
                "[{}] stacked (heads interleaved)",
                many.iter()
                    .map(|b| b.render(&plan.tensors))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let get = |_: usize| m;
        out.push(RawWeight {
            layer: l,
            role,
            tensor,
            transposed: side_by_side(&transposed_blocks, &get),
        });
    }
    Ok(out)
}
