//! One layer's matrices on the thread pool: the matrices that set the
//! critical path are certified one after another with the whole pool, the
//! rest one per thread, largest first ([`certify_batch`]). The schedule
//! changes which thread computes what, never the bits (`tests/threads.rs`).

use super::matrix::{certify_matrix_owned, MatrixResult};
use crate::arch::{ProxyMatrix, ProxySource};
use crate::enclosure::Inconclusive;
use crate::linalg::{Precision, SvdOptions};
use crate::progress::Progress;
use faer::Par;

/// The estimated cost of certifying a matrix ([`crate::linalg::cost`]),
/// for scheduling only: a dense matrix of float16-looking entries at f64
/// by the exact-Gram route's estimate, the rest by [`matrix_cost`].
///
/// [`matrix_cost`]: crate::linalg::cost::matrix_cost
fn schedule_cost(pm: &ProxyMatrix, precision: Precision) -> u128 {
    use crate::linalg::cost;
    match &pm.source {
        ProxySource::Dense(a) if precision == Precision::F64 && cost::looks_half(&a.data) => {
            cost::exact_gram_cost(pm.rows, pm.cols)
        }
        ProxySource::Dense(_) => cost::matrix_cost(pm.rows, pm.cols, None, precision),
        ProxySource::Factored { b, .. } => {
            cost::matrix_cost(pm.rows, pm.cols, Some(b.cols), precision)
        }
    }
}

/// Certifies a batch of matrices (one layer) on the current rayon pool of
/// `T` threads. Results come back in the order given; `progress` hears of
/// each matrix as it finishes and is asked before each one starts: once it
/// says cancelled, no further matrix starts and those not started come
/// back `None`.
///
/// The schedule follows the critical path, by the one cost model
/// ([`crate::linalg::cost`]), largest first (`split_dominant`): a matrix
/// that costs at least `1/T` of what is left of the batch would finish
/// last on one thread whatever the others do, so it is certified alone
/// with the whole pool (`Par::rayon(T)`: the Gram product, the
/// tridiagonalization's symmetric products and panel updates, the inverse
/// iteration over clusters, the back-transformation and the residual
/// products all split over the threads), one such matrix after another.
/// The rest are certified one per thread (`opts.par`, `Par::Seq` in
/// [`super::certify_run`]), each thread taking the next largest when it finishes
/// one (greedy list scheduling). Every routine gives the same bits on any
/// number of threads (fixed blocking and reduction orders), so the
/// certificate does not depend on `T` (`tests/threads.rs`).
///
/// At most one matrix per thread is in flight, and each is dropped once
/// prepared ([`certify_matrix_owned`]), so memory is the batch's matrices
/// plus the working sets of as many matrices as there are threads (one,
/// while a dominant matrix runs). `after_large` is called once, when every
/// matrix costing at least `1 / LARGE_SHARE` of the batch ([`LARGE_SHARE`])
/// has finished (at once if there is none; never if cancelled before): the
/// caller reads the next batch from then on, when the largest working sets
/// are gone.
///
/// *Guarantee: certified enclosure* of every value it returns, as
/// [`super::certify_matrix`] (the lemmas it names).
pub(crate) fn certify_batch(
    mats: Vec<ProxyMatrix>,
    opts: &SvdOptions,
    progress: &dyn Progress,
    after_large: &(dyn Fn() + Sync),
) -> Vec<Option<Result<MatrixResult, Inconclusive>>> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let n = mats.len();
    let costs: Vec<u128> = mats
        .iter()
        .map(|m| schedule_cost(m, opts.precision))
        .collect();
    let threads = rayon::current_num_threads().max(1);
    let (dominant, order) = split_dominant(&costs, threads);
    let total: u128 = costs.iter().sum();
    let is_large = |i: usize| costs[i].saturating_mul(LARGE_SHARE) >= total;
    let large_left = AtomicUsize::new((0..n).filter(|&i| is_large(i)).count());
    let after_once = std::sync::Once::new();
    let large_done = || after_once.call_once(after_large);
    if large_left.load(Ordering::Relaxed) == 0 {
        large_done();
    }
    let slots: Vec<Mutex<Option<ProxyMatrix>>> =
        mats.into_iter().map(|m| Mutex::new(Some(m))).collect();
    let results: Vec<Mutex<Option<Result<MatrixResult, Inconclusive>>>> =
        (0..n).map(|_| Mutex::new(None)).collect();
    let run_one = |i: usize, opts: &SvdOptions| {
        let pm = slots[i]
            .lock()
            .expect("no panic while holding the lock")
            .take()
            .expect("each matrix is taken once");
        let (id, rows, cols) = (pm.id, pm.rows, pm.cols);
        let done = certify_matrix_owned(pm, opts);
        progress.matrix_done(id);
        let r = done.map(|(sv, summary)| MatrixResult {
            id,
            rows,
            cols,
            sv,
            summary,
        });
        *results[i].lock().expect("no panic while holding the lock") = Some(r);
        if is_large(i) && large_left.fetch_sub(1, Ordering::AcqRel) == 1 {
            large_done();
        }
    };
    let whole_pool = SvdOptions {
        par: if threads > 1 {
            Par::rayon(threads)
        } else {
            Par::Seq
        },
        ..*opts
    };
    for &i in &dominant {
        if progress.cancelled() {
            break;
        }
        run_one(i, &whole_pool);
    }
    let next = AtomicUsize::new(0);
    let work = || loop {
        if progress.cancelled() {
            break;
        }
        let k = next.fetch_add(1, Ordering::Relaxed);
        let Some(&i) = order.get(k) else { break };
        run_one(i, opts);
    };
    let workers = threads.clamp(1, order.len().max(1));
    rayon::scope(|s| {
        for _ in 0..workers {
            s.spawn(|_| work());
        }
    });
    results
        .into_iter()
        .map(|r| r.into_inner().expect("no panic while holding the lock"))
        .collect()
}

/// A matrix of a batch is large for [`certify_batch`]'s `after_large` when
/// it costs at least `1 / LARGE_SHARE` of the batch (by the cost model):
/// the feed-forward matrices of a layer, not its heads.
pub(crate) const LARGE_SHARE: u128 = 8;

/// The schedule of [`certify_batch`] for matrices of estimated `costs` on
/// `threads` threads: the indices certified one after another with the
/// whole pool (largest first, as long as the largest left costs at least
/// `1/threads` of all that is left), then the rest, largest first, for one
/// thread each. Ties keep the given order (a stable sort).
fn split_dominant(costs: &[u128], threads: usize) -> (Vec<usize>, Vec<usize>) {
    let mut order: Vec<usize> = (0..costs.len()).collect();
    order.sort_by(|&i, &j| costs[j].cmp(&costs[i]));
    let mut left: u128 = costs.iter().sum();
    let mut k = 0;
    while k < order.len() {
        let c = costs[order[k]];
        if c.saturating_mul(threads as u128) < left {
            break;
        }
        left -= c;
        k += 1;
    }
    let rest = order.split_off(k);
    (order, rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_dominant_gives_the_whole_pool_to_the_critical_path_only() {
        // The cost model's shape of a LLaMA-7B layer: M_in, a small
        // matrix, M_out, then 64 heads.
        let costs: Vec<u128> = [2770u128, 30, 1660]
            .into_iter()
            .chain(std::iter::repeat_n(12u128, 64))
            .collect();
        // One thread: nothing is worth splitting but a lone matrix.
        let (dom, rest) = split_dominant(&costs, 1);
        assert!(dom.is_empty());
        assert_eq!(&rest[..3], &[0, 2, 1]);
        // Two threads: M_in (2770 of 5228) and then M_out (1660 of 2458)
        // each cost at least half of what is left; the rest do not.
        let mut rest = vec![1];
        rest.extend(3..67);
        assert_eq!(split_dominant(&costs, 2), (vec![0, 2], rest));
        // Sixteen threads: the same two; a lone matrix always.
        assert_eq!(split_dominant(&costs, 16).0, vec![0, 2]);
        assert_eq!(split_dominant(&[7], 4), (vec![0], vec![]));
        // Equal costs: nothing dominates.
        assert!(split_dominant(&[5; 8], 4).0.is_empty());
    }
}
