//! Turning per-pair residual bounds into index-matched enclosures of ALL
//! singular values: the component-merging step of Rump & Lange (2023).
//!
//! Per-column intervals are not enclosures by themselves (Rump & Lange give
//! counterexamples). This module merges overlapping intervals into groups,
//! re-bounds each group with the cluster theorem, repeats until the group
//! hulls are pairwise disjoint, and then hands out index-matched enclosures.
//! Justification: [`proofs/residual-single-pair.md`](crate::proofs::residual_single_pair) (L6),
//! [`proofs/residual-cluster.md`](crate::proofs::residual_cluster) (L7) and [`proofs/near-orthogonal.md`](crate::proofs::near_orthogonal) (L8).
//!
//! The algorithm is generic over `DirectedScalar`, so the same code runs
//! in f64 (bounds from round-to-nearest, L3) and in MPFR (directed rounding, L13).

use super::rounding as r;
use crate::enclosure::Inconclusive;

/// Scalars with directed (outward) operations. Every method returns a bound of
/// the exact result in the direction its name says.
pub(crate) trait DirectedScalar: Clone + PartialOrd + std::fmt::Debug {
    /// Zero with the same precision as `self`.
    fn zero_like(&self) -> Self;
    /// One with the same precision as `self`.
    fn one_like(&self) -> Self;
    /// Upper bound of `self + o`.
    fn add_ru(&self, o: &Self) -> Self;
    /// Lower bound of `self - o`.
    fn sub_rd(&self, o: &Self) -> Self;
    /// Upper bound of `self / o` for `self >= 0`, `o > 0`.
    fn div_ru(&self, o: &Self) -> Self;
    /// Upper bound of `sqrt(self)`.
    fn sqrt_ru(&self) -> Self;
    /// Lower bound of `sqrt(self)` (0 for nonpositive input).
    fn sqrt_rd(&self) -> Self;
    /// Whether the value is finite.
    fn is_finite(&self) -> bool;
    /// Whether the value is strictly positive.
    fn is_positive(&self) -> bool;
}

impl DirectedScalar for f64 {
    fn zero_like(&self) -> Self {
        0.0
    }
    fn one_like(&self) -> Self {
        1.0
    }
    fn add_ru(&self, o: &Self) -> Self {
        r::add_ru(*self, *o)
    }
    fn sub_rd(&self, o: &Self) -> Self {
        r::sub_rd(*self, *o)
    }
    fn div_ru(&self, o: &Self) -> Self {
        r::div_ru(*self, *o)
    }
    fn sqrt_ru(&self) -> Self {
        r::sqrt_ru(*self)
    }
    fn sqrt_rd(&self) -> Self {
        r::sqrt_rd(*self)
    }
    fn is_finite(&self) -> bool {
        f64::is_finite(*self)
    }
    fn is_positive(&self) -> bool {
        *self > 0.0
    }
}

/// Inputs of the merging step for one set of `p` approximate singular pairs.
pub(crate) struct PairBounds<T> {
    /// Approximate singular values `s_j >= 0` (the centres).
    pub s: Vec<T>,
    /// Upper bounds of `||E e_j||^2 + ||F e_j||^2` (exact residual columns).
    pub res2_hi: Vec<T>,
    /// Lower bounds of `||y_j||` (right approximate vectors).
    pub ynorm_lo: Vec<T>,
}

/// A group of approximate pairs whose hull `[lo, hi]` contains exactly
/// `members.len()` singular values once the groups are pairwise disjoint (L7).
#[derive(Clone, Debug)]
pub struct Group<T> {
    /// Indices `j` of the approximate pairs in this group.
    pub members: Vec<usize>,
    /// Lower end of the hull (>= 0).
    pub lo: T,
    /// Upper end of the hull.
    pub hi: T,
}

fn hull<T: DirectedScalar>(pb: &PairBounds<T>, members: &[usize], delta: &T) -> (T, T) {
    let mut lo: Option<T> = None;
    let mut hi: Option<T> = None;
    for &j in members {
        let l = pb.s[j].sub_rd(delta);
        let h = pb.s[j].add_ru(delta);
        if lo.as_ref().is_none_or(|x| l < *x) {
            lo = Some(l);
        }
        if hi.as_ref().is_none_or(|x| h > *x) {
            hi = Some(h);
        }
    }
    let lo = lo.expect("nonempty group");
    let zero = lo.zero_like();
    let lo = if lo < zero { zero } else { lo };
    (lo, hi.expect("nonempty group"))
}

/// Merges the per-pair intervals into pairwise disjoint groups (L6, L7).
///
/// `gram_defect(members)` must return an upper bound `alpha` of
/// `||I - Y_mu^T Y_mu||_2` for the right vectors of the given members (L8),
/// or `None` when it cannot be bounded.
///
/// Returns the groups sorted from the largest hull to the smallest. The
/// hulls are pairwise disjoint and each contains exactly `members.len()`
/// singular values **provided** the pairs are all `n` columns of a thin SVD
/// of an `m x n` matrix with `m >= n` (the caller's responsibility; L7
/// corollary), or the positivity condition of [`proofs/factored-product.md`](crate::proofs::factored_product)
/// (L14) holds.
pub(crate) fn merge_groups<T: DirectedScalar>(
    pb: &PairBounds<T>,
    mut gram_defect: impl FnMut(&[usize]) -> Option<T>,
) -> Result<Vec<Group<T>>, Inconclusive> {
    let p = pb.s.len();
    let mut groups: Vec<Group<T>> = Vec::with_capacity(p);
    for j in 0..p {
        if !pb.ynorm_lo[j].is_positive() {
            return Err(Inconclusive::new(format!(
                "approximate singular vector {j} has no positive norm bound"
            )));
        }
        let delta = pb.res2_hi[j].sqrt_ru().div_ru(&pb.ynorm_lo[j]);
        if !delta.is_finite() || !pb.s[j].is_finite() {
            return Err(Inconclusive::new(format!(
                "residual bound of pair {j} is not finite"
            )));
        }
        let (lo, hi) = hull(pb, &[j], &delta);
        groups.push(Group {
            members: vec![j],
            lo,
            hi,
        });
    }
    loop {
        groups.sort_by(|a, b| a.lo.partial_cmp(&b.lo).expect("finite bounds"));
        let mut merged: Vec<Group<T>> = Vec::with_capacity(groups.len());
        let mut changed = false;
        for g in groups {
            match merged.last_mut() {
                Some(last) if g.lo <= last.hi => {
                    last.members.extend_from_slice(&g.members);
                    if g.hi > last.hi {
                        last.hi = g.hi;
                    }
                    changed = true;
                }
                _ => merged.push(g),
            }
        }
        if !changed {
            merged.reverse();
            return Ok(merged);
        }
        // Re-bound every group that has more than one member (L7 + L8).
        for g in merged.iter_mut().filter(|g| g.members.len() > 1) {
            g.members.sort_unstable();
            let alpha = gram_defect(&g.members).ok_or_else(|| {
                Inconclusive::new(format!(
                    "could not bound the orthogonality defect of a cluster of {} vectors",
                    g.members.len()
                ))
            })?;
            let one = alpha.one_like();
            if !(alpha < one) || !alpha.is_finite() {
                return Err(Inconclusive::new(format!(
                    "approximate singular vectors of a cluster of {} values are not \
                     near-orthogonal (defect bound {alpha:?} >= 1)",
                    g.members.len()
                )));
            }
            let mut num = alpha.zero_like();
            for &j in &g.members {
                num = num.add_ru(&pb.res2_hi[j]);
            }
            let denom = one.sub_rd(&alpha).sqrt_rd();
            if !denom.is_positive() {
                return Err(Inconclusive::new("cluster defect bound leaves no margin"));
            }
            let delta = num.sqrt_ru().div_ru(&denom);
            if !delta.is_finite() {
                return Err(Inconclusive::new("cluster residual bound is not finite"));
            }
            let (lo, hi) = hull(pb, &g.members, &delta);
            g.lo = lo;
            g.hi = hi;
        }
        groups = merged;
    }
}

/// Index-matched enclosures from disjoint groups sorted descending (L7
/// corollary): the i-th largest singular value lies in entry i.
pub fn index_matched<T: Clone>(groups: &[Group<T>]) -> Vec<(T, T, usize)> {
    let mut out = Vec::new();
    for g in groups {
        for _ in 0..g.members.len() {
            out.push((g.lo.clone(), g.hi.clone(), g.members.len()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separated_pairs_stay_singletons() {
        let pb = PairBounds {
            s: vec![3.0, 2.0, 1.0],
            res2_hi: vec![1e-20; 3],
            ynorm_lo: vec![1.0; 3],
        };
        let g = merge_groups(&pb, |_| Some(0.0)).unwrap();
        assert_eq!(g.len(), 3);
        assert!(g[0].lo <= 3.0 && 3.0 <= g[0].hi);
        assert!(g[2].lo <= 1.0 && 1.0 <= g[2].hi);
    }

    #[test]
    fn overlapping_pairs_merge_and_cascade() {
        // 1 and 1+1e-12 overlap; after merging, the wider cluster radius must
        // also swallow 1+3e-10 if it reaches it.
        let pb = PairBounds {
            s: vec![1.0 + 3e-10, 1.0 + 1e-12, 1.0],
            res2_hi: vec![1e-22, 1e-20, 1e-20],
            ynorm_lo: vec![1.0; 3],
        };
        let g = merge_groups(&pb, |m| Some(1e-3 * m.len() as f64)).unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!(g[1].members.len(), 2);
        for w in g.windows(2) {
            assert!(w[0].lo > w[1].hi, "hulls must be disjoint");
        }
    }

    #[test]
    fn non_orthogonal_cluster_is_inconclusive() {
        let pb = PairBounds {
            s: vec![1.0, 1.0],
            res2_hi: vec![1e-20; 2],
            ynorm_lo: vec![1.0; 2],
        };
        assert!(merge_groups(&pb, |_| Some(1.5)).is_err());
        assert!(merge_groups(&pb, |_| None).is_err());
    }
}
