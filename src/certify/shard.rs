//! Which proxy matrices shard `K/N` of a model certifies: every matrix gets
//! an estimated cost, and the matrices are dealt to the `N` shards by the
//! greedy longest-processing-time rule, so that shards take about the same
//! time rather than the same number of matrices (a model's two feed-forward
//! matrices per layer cost hundreds of times more than one head's `QK`).
//!
//! The assignment depends only on the architecture and the precision (never
//! on timing or the machine), and every tie is broken by a fixed order, so
//! every shard of a job array computes the same assignment independently.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::arch::{Architecture, MatrixId, MatrixType, Role};
use crate::certificate::ShardSpec;
use crate::linalg::cost::matrix_cost;
use crate::linalg::Precision;

/// One proxy matrix of a model with its estimated cost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PlannedMatrix {
    /// Which matrix.
    pub id: MatrixId,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// The inner dimension of a matrix kept as a product of two thin
    /// factors (`QK`, `V_tilde`: the head dimension); `None` when dense.
    pub inner: Option<usize>,
    /// Estimated cost ([`crate::linalg::cost::matrix_cost`]).
    pub cost: u128,
}

/// Every proxy matrix of the model, in certificate order, with its shape
/// (as the architecture's recipe forms it) and estimated cost.
pub(crate) fn plan(arch: &Architecture, precision: Precision) -> Vec<PlannedMatrix> {
    let n = arch.hidden;
    // An expert's width is its own (routed, shared), a dense layer's the model's.
    let width_in = |i: usize| if arch.gated() { i.saturating_mul(2) } else { i };
    arch.matrix_ids()
        .into_iter()
        .map(|id| {
            let i = arch.ffn_width(id.expert);
            let (rows, cols, inner) = match id.kind {
                MatrixType::QK
                | MatrixType::VTilde
                | MatrixType::QKCross
                | MatrixType::VTildeCross => (n, n, Some(arch.head_dim)),
                MatrixType::MIn => (n, width_in(i), None),
                MatrixType::MOut => (i, n, None),
            };
            PlannedMatrix {
                id,
                rows,
                cols,
                inner,
                cost: matrix_cost(rows, cols, inner, precision),
            }
        })
        .collect()
}

/// Deals items of the given costs to `count` shards by the greedy
/// longest-processing-time rule: items by decreasing cost (equal costs in
/// their given order), each to the shard with the least cost so far (equal
/// loads: the lowest shard). Returns the shard (0-based) of each item. The
/// largest shard costs at most 4/3 of the best possible split (Graham).
pub(crate) fn assign(costs: &[u128], count: usize) -> Vec<usize> {
    assert!(count >= 1, "at least one shard");
    assign_onto(costs, vec![0; count.min(costs.len().max(1))])
}

/// The matrices of shard `shard` (in certificate order) and the shard's
/// share of the estimated cost of the whole model, out of 1.
pub(crate) fn shard_matrices(
    arch: &Architecture,
    precision: Precision,
    shard: ShardSpec,
) -> (Vec<PlannedMatrix>, f64) {
    let all = plan(arch, precision);
    if shard.count == 1 {
        return (all, 1.0);
    }
    let costs: Vec<u128> = all.iter().map(|m| m.cost).collect();
    let of = assign(&costs, shard.count);
    let total: u128 = costs.iter().sum();
    let mine: Vec<PlannedMatrix> = all
        .into_iter()
        .zip(of)
        .filter(|(_, s)| *s + 1 == shard.index)
        .map(|(m, _)| m)
        .collect();
    let share = if total == 0 {
        0.0
    } else {
        mine.iter().map(|m| m.cost).sum::<u128>() as f64 / total as f64
    };
    (mine, share)
}

/// One raw weight matrix of the norm-based measures (`docs/measures.md`),
/// as the map `x -> W x`: its layer, role and `[out, in]` shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PlannedRaw {
    /// Layer from 0.
    pub layer: usize,
    /// Role in the block.
    pub role: Role,
    /// Rows of `W` (output width).
    pub rows: usize,
    /// Columns of `W` (input width).
    pub cols: usize,
}

/// Every raw weight matrix of a model with these widths, in the order the
/// certificate lists them (layer, then query, key, value, attention output,
/// the gate when `gated`, feed-forward input and output), with the shapes
/// `arch::extract_raw_layer` forms. Merge checks a sharded run's raw
/// weights against this list.
pub(crate) fn raw_plan(md: &crate::certificate::ModelInfo, gated: bool) -> Vec<PlannedRaw> {
    let (n, q, kv, i) = (
        md.hidden,
        md.heads.saturating_mul(md.head_dim),
        md.kv_heads.saturating_mul(md.head_dim),
        md.intermediate,
    );
    let mut out = Vec::new();
    for layer in 0..md.layers {
        for (role, rows, cols) in [
            (Role::Query, q, n),
            (Role::Key, kv, n),
            (Role::Value, kv, n),
            (Role::Output, n, q),
            (Role::FfnGate, i, n),
            (Role::FfnIn, i, n),
            (Role::FfnOut, n, i),
        ] {
            if role != Role::FfnGate || gated {
                out.push(PlannedRaw {
                    layer,
                    role,
                    rows,
                    cols,
                });
            }
        }
    }
    out
}

/// The shard (0-based, of `count`) that certifies each raw weight of
/// `raws` ([`raw_plan`] order) in a sharded run with measures. In an
/// ungated block the feed-forward raw weights are the transposes of the
/// proxies `M_in`, `M_out`, whose certified sigma_1 `certify` reuses: each
/// goes to the shard that certifies that proxy ([`shard_matrices`]), which
/// reuses it as an unsharded run does, so the merged norms are the
/// unsharded ones. The others are dealt by estimated cost ([`assign`]).
/// Depends only on the architecture and the precision, as
/// [`shard_matrices`].
pub(crate) fn raw_shards(
    arch: &Architecture,
    precision: Precision,
    raws: &[PlannedRaw],
    count: usize,
) -> Vec<usize> {
    let proxies = plan(arch, precision);
    let proxy_of = assign(&proxies.iter().map(|m| m.cost).collect::<Vec<_>>(), count);
    let reused = |r: &PlannedRaw| -> Option<usize> {
        let kind = match r.role {
            Role::FfnIn if !arch.gated() => MatrixType::MIn,
            Role::FfnOut if !arch.gated() => MatrixType::MOut,
            _ => return None,
        };
        let id = MatrixId::layer(r.layer, kind);
        proxies.iter().position(|m| m.id == id).map(|k| proxy_of[k])
    };
    let cost = |r: &PlannedRaw| matrix_cost(r.cols, r.rows, None, precision);
    // The others continue the proxies' dealing, from the shards' loads.
    let mut loads = vec![0u128; count];
    for (m, &s) in proxies.iter().zip(&proxy_of) {
        loads[s] = loads[s].saturating_add(m.cost);
    }
    let mut of: Vec<usize> = raws.iter().map(|r| reused(r).unwrap_or(0)).collect();
    for (r, &s) in raws.iter().zip(&of) {
        if reused(r).is_some() {
            loads[s] = loads[s].saturating_add(cost(r));
        }
    }
    let dealt: Vec<usize> = (0..raws.len())
        .filter(|&k| reused(&raws[k]).is_none())
        .collect();
    let costs: Vec<u128> = dealt.iter().map(|&k| cost(&raws[k])).collect();
    for (&k, s) in dealt.iter().zip(assign_onto(&costs, loads)) {
        of[k] = s;
    }
    of
}

/// [`assign`] onto shards that already carry `loads` (one per shard).
fn assign_onto(costs: &[u128], loads: Vec<u128>) -> Vec<usize> {
    let mut order: Vec<usize> = (0..costs.len()).collect();
    order.sort_by_key(|&i| (Reverse(costs[i]), i));
    let mut heap: BinaryHeap<Reverse<(u128, usize)>> = loads
        .into_iter()
        .enumerate()
        .map(|(s, l)| Reverse((l, s)))
        .collect();
    let mut shard_of = vec![0; costs.len()];
    for i in order {
        let Reverse((load, s)) = heap.pop().expect("at least one shard");
        shard_of[i] = s;
        heap.push(Reverse((load.saturating_add(costs[i]), s)));
    }
    shard_of
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignment_is_greedy_by_decreasing_cost_with_fixed_ties() {
        // 10, 7, 7, 5, 1 to two shards: 10 -> 0 (loads 10, 0), the first 7
        // -> 1 (10, 7), the second 7 -> 1 (10, 14), 5 -> 0 (15, 14), 1 -> 1.
        assert_eq!(assign(&[5, 7, 10, 1, 7], 2), vec![0, 1, 0, 1, 1]);
        // Equal costs go round the shards in order.
        assert_eq!(assign(&[1, 1, 1, 1], 3), vec![0, 1, 2, 0]);
        // More shards than items: the later shards stay empty.
        assert_eq!(assign(&[3, 2], 5), vec![0, 1]);
        assert_eq!(assign(&[], 4), Vec::<usize>::new());
    }

    #[test]
    fn lpt_stays_within_four_thirds_of_the_best_split() {
        // Brute force over every split of small instances.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..200 {
            let n = 1 + (seed % 8) as usize;
            let k = 1 + (seed / 8 % 3) as usize;
            let costs: Vec<u128> = (0..n)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    (seed % 50 + 1) as u128
                })
                .collect();
            let of = assign(&costs, k);
            let mut loads = vec![0u128; k];
            for (c, s) in costs.iter().zip(&of) {
                loads[*s] += c;
            }
            let lpt = *loads.iter().max().unwrap();
            let mut best = u128::MAX;
            for code in 0..k.pow(n as u32) {
                let mut l = vec![0u128; k];
                let mut c = code;
                for x in &costs {
                    l[c % k] += x;
                    c /= k;
                }
                best = best.min(*l.iter().max().unwrap());
            }
            assert!(3 * lpt <= 4 * best, "{costs:?} in {k}: {lpt} vs {best}");
        }
    }

    fn arch(
        layout: &str,
        layers: usize,
        hidden: usize,
        heads: usize,
        kv: usize,
        ff: usize,
    ) -> Architecture {
        let spec: &'static crate::arch::FamilySpec = crate::arch::FAMILIES
            .iter()
            .find(|f| f.layout == layout)
            .expect("a layout of the table");
        Architecture {
            family: layout.to_lowercase(),
            spec,
            prefix: String::new(),
            layers,
            hidden,
            heads,
            kv_heads: kv,
            head_dim: hidden / heads,
            intermediate: ff,
            activation: None,
            heads_override: None,
            moe: None,
            stack: None,
            tensors: spec.tensors,
            notes: Vec::new(),
            sharing: None,
        }
    }

    /// The largest shard's estimated cost over the ideal `total / count`.
    fn makespan_ratio(a: &Architecture, count: usize) -> f64 {
        let costs: Vec<u128> = plan(a, Precision::F64).iter().map(|m| m.cost).collect();
        let mut loads = vec![0u128; count];
        for (c, s) in costs.iter().zip(assign(&costs, count)) {
            loads[s] += c;
        }
        let total: u128 = costs.iter().sum();
        *loads.iter().max().unwrap() as f64 * count as f64 / total as f64
    }

    #[test]
    fn shards_of_llm_shapes_are_balanced_by_cost() {
        let llama7b = arch("Llama", 32, 4096, 32, 32, 11008);
        let llama70b = arch("Llama", 80, 8192, 64, 8, 28672);
        for (a, n) in [
            (&llama7b, 3),
            (&llama7b, 32),
            (&llama70b, 7),
            (&llama70b, 32),
        ] {
            let r = makespan_ratio(a, n);
            assert!(r < 1.03, "{} layers in {n} shards: {r}", a.layers);
        }
        // MiniLM in 7 shards: 12 feed-forward matrices cannot be split
        // evenly by 7; the shards with one of them are filled up with heads,
        // so the shards hold very different numbers of matrices for about
        // the same cost.
        let minilm = arch("Bert", 6, 384, 12, 12, 1536);
        let r = makespan_ratio(&minilm, 7);
        assert!(r < 1.1, "{r}");
        let costs: Vec<u128> = plan(&minilm, Precision::F64)
            .iter()
            .map(|m| m.cost)
            .collect();
        let mut counts = [0usize; 7];
        for s in assign(&costs, 7) {
            counts[s] += 1;
        }
        assert_eq!(counts.iter().sum::<usize>(), 156);
        assert!(
            counts.iter().max().unwrap() > &(3 * counts.iter().min().unwrap()),
            "{counts:?}"
        );
    }

    #[test]
    fn plan_shapes_are_the_recipe_shapes() {
        let a = arch("Llama", 2, 64, 4, 2, 96);
        let p = plan(&a, Precision::F64);
        assert_eq!(p.len(), 2 * (2 * 4 + 2));
        let m_in = p.iter().find(|m| m.id.kind == MatrixType::MIn).unwrap();
        assert_eq!((m_in.rows, m_in.cols, m_in.inner), (64, 192, None));
        let m_out = p.iter().find(|m| m.id.kind == MatrixType::MOut).unwrap();
        assert_eq!((m_out.rows, m_out.cols), (96, 64));
        let qk = &p[0];
        assert_eq!((qk.rows, qk.cols, qk.inner), (64, 64, Some(16)));
    }

    #[test]
    fn factored_matrices_cost_less_than_dense_ones_of_the_same_shape() {
        let f = matrix_cost(384, 384, Some(32), Precision::F64);
        let d = matrix_cost(384, 384, None, Precision::F64);
        assert!(f * 10 < d);
        // Auto keeps the factored route where it meets its target;
        // extended and MPFR certify the product densely.
        assert_eq!(matrix_cost(384, 384, Some(32), Precision::Auto), f);
        assert!(matrix_cost(384, 384, Some(32), Precision::Extended) > d);
        assert!(matrix_cost(384, 384, Some(32), Precision::Mpfr(128)) > d);
        // An inner dimension as large as the matrix is a dense matrix.
        assert_eq!(
            matrix_cost(8, 8, Some(8), Precision::F64),
            matrix_cost(8, 8, None, Precision::F64)
        );
    }
}
