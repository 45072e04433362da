//! transformers v5's fused 3-D expert tensors (Mixtral, Qwen2-MoE,
//! Qwen3-MoE): the known per-expert matrices of `tests/architectures_moe.rs`
//! (the real MiniLM weights, sliced into expert-sized blocks) re-emitted as
//! `mlp.experts.gate_up_proj` `[E, 2I, N]` (each expert's gate rows, then its
//! up rows) and `mlp.experts.down_proj` `[E, N, I]`, the layout of
//! transformers' `integrations/moe.py` and `conversion_mapping.py`: the
//! certificate must equal the per-expert layout's certificate exactly (but
//! for the files and their hashes), and a fused tensor of the wrong rank or
//! shape is refused in one line naming it.

mod common;

use common::tmpdir;

use common::{ok_json, root, run};
use serde_json::{json, Value};
use specbound::io::checkpoint::Checkpoint;
use specbound::matrix::DenseMatrix;
use std::path::{Path, PathBuf};

/// MiniLM's hidden size, heads and head dimension.
const N: usize = 384;
const H: usize = 12;
const DH: usize = 32;
/// The width of every expert here (a quarter of MiniLM's 1536).
const W: usize = 384;

fn minilm(name: &str) -> DenseMatrix {
    let ck = Checkpoint::open(&root().join("data/all-MiniLM-L6-v2")).unwrap();
    ck.read(&format!("encoder.layer.{name}.weight"))
        .unwrap()
        .matrix
}

/// `m[r0..r0 + nr, c0..c0 + nc]`: stored numbers moved, none computed.
fn block(m: &DenseMatrix, r0: usize, nr: usize, c0: usize, nc: usize) -> DenseMatrix {
    let data = (r0..r0 + nr)
        .flat_map(|i| m.data[i * m.cols + c0..i * m.cols + c0 + nc].to_vec())
        .collect();
    DenseMatrix {
        rows: nr,
        cols: nc,
        data,
    }
}

/// Expert block `b` as `[gate, up, down]` (`[out, in]`), as
/// `tests/architectures_moe.rs` builds it: gate and up are rows
/// `b W .. (b + 1) W` of MiniLM layers 0's and 1's `intermediate.dense`,
/// down the same columns of layer 0's `output.dense`.
fn ffn(b: usize) -> [DenseMatrix; 3] {
    [
        block(&minilm("0.intermediate.dense"), b * W, W, 0, N),
        block(&minilm("1.intermediate.dense"), b * W, W, 0, N),
        block(&minilm("0.output.dense"), 0, N, b * W, W),
    ]
}

/// MiniLM layer 0's attention as LLaMA's `q, k, v, o` of layer `l`.
fn attention(l: usize) -> Vec<(String, DenseMatrix)> {
    ["q_proj", "k_proj", "v_proj", "o_proj"]
        .iter()
        .zip([
            "0.attention.self.query",
            "0.attention.self.key",
            "0.attention.self.value",
            "0.attention.output.dense",
        ])
        .map(|(n, m)| (format!("model.layers.{l}.self_attn.{n}.weight"), minilm(m)))
        .collect()
}

/// The blocks `blocks` as three tensors per expert, under `pats` (`{e}`).
fn per_expert(l: usize, pats: [&str; 3], blocks: &[usize]) -> Vec<(String, DenseMatrix)> {
    let mut ts = Vec::new();
    for (e, &b) in blocks.iter().enumerate() {
        for (p, m) in pats.iter().zip(ffn(b)) {
            let p = p.replace("{e}", &e.to_string());
            ts.push((format!("model.layers.{l}.{p}.weight"), m));
        }
    }
    ts
}

/// A tensor of shape `shape` whose row-major entries are `data`, stored
/// as the 2-D `[shape[0], rest]` (the same bytes) until [`reshape`].
struct Shaped {
    name: String,
    shape: Vec<usize>,
    flat: DenseMatrix,
}

/// The same blocks as transformers v5's two 3-D tensors of layer `l`:
/// `gate_up_proj[e] = [gate_b; up_b]` (`[2W, N]`), `down_proj[e] = down_b`.
fn fused(l: usize, blocks: &[usize]) -> [Shaped; 2] {
    let e = blocks.len();
    let (mut gu, mut down) = (Vec::new(), Vec::new());
    for &b in blocks {
        let [g, u, d] = ffn(b);
        gu.extend(g.data.iter().chain(&u.data));
        down.extend(d.data);
    }
    let p = format!("model.layers.{l}.mlp.experts");
    [
        Shaped {
            name: format!("{p}.gate_up_proj"),
            shape: vec![e, 2 * W, N],
            flat: DenseMatrix {
                rows: e,
                cols: 2 * W * N,
                data: gu,
            },
        },
        Shaped {
            name: format!("{p}.down_proj"),
            shape: vec![e, N, W],
            flat: DenseMatrix {
                rows: e,
                cols: N * W,
                data: down,
            },
        },
    ]
}

/// A `rows x N` matrix of small dyadic numbers (a router, exact in f32).
fn router(rows: usize) -> DenseMatrix {
    DenseMatrix {
        rows,
        cols: N,
        data: (0..rows * N).map(|i| (i % 7) as f64 / 8.0 - 0.25).collect(),
    }
}

/// Writes `model.safetensors` (F32) and `config.json`; the `shaped`
/// tensors get their own shapes in the header (same bytes).
fn write(dir: &Path, tensors: &[(String, DenseMatrix)], shaped: &[Shaped], config: &Value) {
    let mut refs: Vec<(String, &DenseMatrix)> =
        tensors.iter().map(|(n, m)| (n.clone(), m)).collect();
    refs.extend(shaped.iter().map(|s| (s.name.clone(), &s.flat)));
    let f = dir.join("model.safetensors");
    common::write_safetensors(&f, &refs, "F32");
    for s in shaped {
        reshape(&f, &s.name, &s.shape);
    }
    std::fs::write(dir.join("config.json"), serde_json::to_vec(config).unwrap()).unwrap();
}

/// Sets the header shape of tensor `name` of the safetensors file `f`
/// (its bytes, and so its element count, unchanged).
fn reshape(f: &Path, name: &str, shape: &[usize]) {
    let bytes = std::fs::read(f).unwrap();
    let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut header: Value = serde_json::from_slice(&bytes[8..8 + len]).unwrap();
    header[name]["shape"] = json!(shape);
    let mut h = serde_json::to_vec(&header).unwrap();
    while h.len() % 8 != 0 {
        h.push(b' ');
    }
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&h);
    out.extend_from_slice(&bytes[8 + len..]);
    std::fs::write(f, out).unwrap();
}

fn config(model_type: &str, layers: usize, extra: Value) -> Value {
    let mut c = json!({"model_type": model_type, "num_hidden_layers": layers, "hidden_size": N,
        "num_attention_heads": H, "num_key_value_heads": H, "head_dim": DH,
        "intermediate_size": W, "num_experts_per_tok": 2});
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

fn certify(dir: &Path) -> Value {
    ok_json(&run(&["certify", dir.to_str().unwrap(), "--json"]))
}

/// The certificate without what names the files (their paths and hashes).
fn unnamed(mut c: Value) -> Value {
    let model = c["model"].as_object_mut().unwrap();
    assert!(model.remove("path").is_some() && model.remove("files").is_some());
    c
}

/// `(exit code, stderr)`, never a panic.
fn code(args: &[&str]) -> (Option<i32>, String) {
    let out = run(args);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    (out.status.code(), err)
}

const QWEN_EXPERT: [&str; 3] = [
    "mlp.experts.{e}.gate_proj",
    "mlp.experts.{e}.up_proj",
    "mlp.experts.{e}.down_proj",
];
const QWEN_SHARED: [&str; 3] = [
    "mlp.shared_expert.gate_proj",
    "mlp.shared_expert.up_proj",
    "mlp.shared_expert.down_proj",
];

/// Mixtral (three experts; v5 renames `block_sparse_moe` to `mlp`),
/// Qwen2-MoE (a dense layer by `mlp_only_layers`, then two fused experts
/// beside a shared expert, which v5 keeps as tensors of its own) and
/// Qwen3-MoE (QK-norm): each fused checkpoint's certificate is the
/// per-expert checkpoint's, key for key (the experts, their spectra, the
/// reason for no bound); `verify --model` re-reads the fused weights.
#[test]
fn fused_v5_experts_certify_as_the_per_expert_layout() {
    // Mixtral: w1 gate, w3 up, w2 down, per expert.
    let blocks = [0, 1, 2];
    let cfg = config("mixtral", 1, json!({"num_local_experts": 3}));
    let a = tmpdir("mixtral-v4");
    let mut ts = attention(0);
    ts.extend(per_expert(
        0,
        [
            "block_sparse_moe.experts.{e}.w1",
            "block_sparse_moe.experts.{e}.w3",
            "block_sparse_moe.experts.{e}.w2",
        ],
        &blocks,
    ));
    ts.push((
        "model.layers.0.block_sparse_moe.gate.weight".into(),
        router(3),
    ));
    write(&a, &ts, &[], &cfg);
    let b = tmpdir("mixtral-v5");
    let mut ts = attention(0);
    ts.push(("model.layers.0.mlp.gate.weight".into(), router(3)));
    write(&b, &ts, &fused(0, &blocks), &cfg);
    let per = unnamed(certify(&a));
    assert_eq!(
        per["model"]["experts"],
        json!([{"experts": 3, "shared": false}])
    );
    assert_eq!(per["spectra"].as_array().unwrap().len(), 2 * H + 6);
    assert_eq!(unnamed(certify(&b)), per, "mixtral");
    same_proxies(&a, &b);

    // Qwen2-MoE: layer 0 dense, layer 1 two fused experts and a shared one.
    let cfg = config(
        "qwen2_moe",
        2,
        json!({"num_experts": 2, "moe_intermediate_size": W,
               "shared_expert_intermediate_size": W, "mlp_only_layers": [0]}),
    );
    let dense = |ts: &mut Vec<(String, DenseMatrix)>| {
        ts.extend(attention(0));
        ts.extend(per_expert(
            0,
            ["mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"],
            &[3],
        ));
        ts.extend(attention(1));
        ts.extend(per_expert(1, QWEN_SHARED, &[0]));
        ts.push(("model.layers.1.mlp.gate.weight".into(), router(2)));
        ts.push((
            "model.layers.1.mlp.shared_expert_gate.weight".into(),
            router(1),
        ));
    };
    let a = tmpdir("qwen2-v4");
    let mut ts = Vec::new();
    dense(&mut ts);
    ts.extend(per_expert(1, QWEN_EXPERT, &[2, 1]));
    write(&a, &ts, &[], &cfg);
    let b = tmpdir("qwen2-v5");
    let mut ts = Vec::new();
    dense(&mut ts);
    write(&b, &ts, &fused(1, &[2, 1]), &cfg);
    let per = unnamed(certify(&a));
    assert_eq!(
        per["model"]["experts"],
        json!([{"experts": 0, "shared": false}, {"experts": 2, "shared": true}])
    );
    let v5 = certify(&b);
    assert_eq!(unnamed(v5.clone()), per, "qwen2_moe");
    same_proxies(&a, &b);
    let out = run(&[
        "verify",
        write_cert(&b, &v5).to_str().unwrap(),
        "--model",
        b.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Qwen3-MoE: QK-norm beside two fused experts.
    let cfg = config(
        "qwen3_moe",
        1,
        json!({"num_experts": 2, "moe_intermediate_size": W}),
    );
    let gains = |ts: &mut Vec<(String, DenseMatrix)>| {
        ts.extend(attention(0));
        for n in ["q_norm", "k_norm"] {
            let g = DenseMatrix {
                rows: 1,
                cols: DH,
                data: (0..DH).map(|i| 1.0 + i as f64 / 64.0).collect(),
            };
            ts.push((format!("model.layers.0.self_attn.{n}.weight"), g));
        }
        ts.push(("model.layers.0.mlp.gate.weight".into(), router(2)));
    };
    let a = tmpdir("qwen3-v4");
    let mut ts = Vec::new();
    gains(&mut ts);
    ts.extend(per_expert(0, QWEN_EXPERT, &[1, 3]));
    write(&a, &ts, &[], &cfg);
    let b = tmpdir("qwen3-v5");
    let mut ts = Vec::new();
    gains(&mut ts);
    write(&b, &ts, &fused(0, &[1, 3]), &cfg);
    let per = unnamed(certify(&a));
    assert_eq!(
        per["bound_absent"].as_str(),
        Some(specbound::arch::families::MOE_QK_NORM)
    );
    assert_eq!(unnamed(certify(&b)), per, "qwen3_moe");
    same_proxies(&a, &b);
}

/// The proxy matrices of the checkpoints `a` and `b` are the same, entry
/// for entry (spectra alone would not see a permutation of `[gate; up]`'s
/// rows or a transposed `down`).
fn same_proxies(a: &Path, b: &Path) {
    use specbound::arch::{self, ArchOverrides, ProxySource};
    let read = |d: &Path| {
        let ck = Checkpoint::open(d).unwrap();
        let a = arch::detect(&ck, &ArchOverrides::default()).unwrap();
        arch::extract(&ck, &a).unwrap()
    };
    let (x, y) = (read(a), read(b));
    assert_eq!(x.len(), y.len());
    for (m, n) in x.iter().zip(&y) {
        assert_eq!(m.id, n.id);
        match (&m.source, &n.source) {
            (ProxySource::Dense(p), ProxySource::Dense(q)) => assert!(p == q, "{:?}", m.id),
            (ProxySource::Factored { b: p, c: q }, ProxySource::Factored { b: r, c: t }) => {
                assert!(p == r && q == t, "{:?}", m.id)
            }
            _ => panic!("{:?}: formed differently", m.id),
        }
    }
}

fn write_cert(dir: &Path, c: &Value) -> PathBuf {
    let p = dir.join("cert.json");
    std::fs::write(&p, serde_json::to_vec_pretty(c).unwrap()).unwrap();
    p
}

/// `inspect` shows each expert's matrices formed from its slice of the
/// fused tensors (`name[e][rows, cols]^T`), and those tensors are not
/// unmapped.
#[test]
fn inspect_forms_each_expert_from_its_slice() {
    let d = tmpdir("inspect");
    let mut ts = attention(0);
    ts.push(("model.layers.0.mlp.gate.weight".into(), router(2)));
    write(
        &d,
        &ts,
        &fused(0, &[0, 1]),
        &config("mixtral", 1, json!({"num_local_experts": 2})),
    );
    let j = ok_json(&run(&["inspect", d.to_str().unwrap(), "--json"]));
    let m = j["matrices"].as_array().unwrap();
    assert_eq!(m.len(), 2 * H + 4);
    let g = "model.layers.0.mlp.experts.gate_up_proj[1]";
    assert_eq!(
        m[2 * H + 1]["formed_from"],
        format!("[{g}[0:384, :]^T, {g}[384:768, :]^T] side by side (gated: extension)")
    );
    assert_eq!(m[2 * H + 3]["expert"], 1);
    assert_eq!(
        m[2 * H + 3]["formed_from"],
        "model.layers.0.mlp.experts.down_proj[1]^T"
    );
    let unmapped: Vec<&str> = j["unmapped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["tensor"].as_str().unwrap())
        .collect();
    assert_eq!(unmapped, ["model.layers.0.mlp.gate.weight"]);
}

/// Fused tensors that do not have transformers v5's layout: each refused
/// by `certify` (and `inspect`) with exit 2 in one line naming the tensor,
/// never read as something else.
#[test]
fn misshapen_fused_experts_are_refused_naming_the_tensor() {
    let gu = "model.layers.0.mlp.experts.gate_up_proj";
    let dn = "model.layers.0.mlp.experts.down_proj";
    let cfg = |experts: usize, layers: usize| {
        config(
            "qwen3_moe",
            layers,
            json!({"num_experts": experts, "moe_intermediate_size": W}),
        )
    };
    let [g, d] = fused(0, &[0, 1]);
    let with = |shape: Vec<usize>, of: &Shaped| Shaped {
        name: of.name.clone(),
        shape,
        flat: of.flat.clone(),
    };
    let cases: Vec<(&str, Vec<Shaped>, Value, &str, &str)> = vec![
        (
            "gate_up 2-D",
            vec![with(vec![2, 2 * W * N], &g), with(d.shape.clone(), &d)],
            cfg(2, 1),
            gu,
            "3-D",
        ),
        (
            "gate_up [E, N, 2I] (transposed)",
            vec![with(vec![2, N, 2 * W], &g), with(d.shape.clone(), &d)],
            cfg(2, 1),
            gu,
            "fused 3-D expert tensors",
        ),
        (
            "config states three experts",
            vec![with(g.shape.clone(), &g), with(d.shape.clone(), &d)],
            cfg(3, 1),
            gu,
            "'num_experts'",
        ),
        (
            "down_proj missing",
            vec![with(g.shape.clone(), &g)],
            cfg(2, 1),
            dn,
            "missing tensor",
        ),
        (
            "down_proj of four experts",
            vec![with(g.shape.clone(), &g), with(vec![4, N, W / 2], &d)],
            cfg(2, 1),
            dn,
            "fused 3-D expert tensors",
        ),
        (
            "gate_up 4-D",
            vec![with(vec![2, 2, W, N], &g), with(d.shape.clone(), &d)],
            cfg(2, 1),
            gu,
            "3-D",
        ),
    ];
    for (what, shaped, config, tensor, needle) in cases {
        let dir = tmpdir("bad");
        write(&dir, &attention(0), &shaped, &config);
        for cmd in ["certify", "inspect"] {
            let (rc, e) = code(&[cmd, dir.to_str().unwrap()]);
            assert_eq!(rc, Some(2), "{what}: {e}");
            assert!(e.contains(tensor) && e.contains(needle), "{what}: {e}");
            assert_eq!(e.trim_end().lines().count(), 1, "{what}: {e}");
        }
    }
    // A later layer with fewer experts than the first: its tensor is named.
    let dir = tmpdir("bad-layer");
    let mut ts = attention(0);
    ts.extend(attention(1));
    let mut shaped: Vec<Shaped> = fused(0, &[0, 1]).into();
    shaped.extend(fused(1, &[2]));
    write(&dir, &ts, &shaped, &cfg(2, 2));
    let (rc, e) = code(&["certify", dir.to_str().unwrap()]);
    assert_eq!(rc, Some(2), "{e}");
    assert!(e.contains("model.layers.1.mlp.experts.gate_up_proj"), "{e}");
    assert!(e.contains("holds 1 expert slices"), "{e}");
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
}
