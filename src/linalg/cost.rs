//! The one cost model of certifying a matrix: shards are balanced by it
//! (`crate::certify::shard`), a layer's matrices are scheduled largest first by it
//! (`crate::certify`), and the fronts decide by it whether a computation is
//! long enough to deserve a spinner ([`is_long`]). Estimates only: they
//! decide order and display, never a result.

use super::Precision;

/// How many times more a multiply-add of the thin-factor route costs than
/// one of the dense route (small, memory-bound operations against large
/// matrix products). `cargo bench --bench shard_cost` measured 2.5 to 3.4 ms
/// for a 384 x 384 product of rank 32 and 121 to 154 ms for the dense
/// 384 x 1536 and 1536 x 384 matrices of MiniLM (about 47 times as long),
/// whose multiply-add counts below differ 176 times; the weight 4 brings
/// the estimate to 44 times.
pub(crate) const FACTORED_WEIGHT: u128 = 4;

/// Estimated cost of certifying one matrix, in multiply-adds of the dense
/// route (leading terms, for comparing matrices, not for predicting seconds).
///
/// With `p = max(rows, cols)` and `q = min(rows, cols)`:
/// * dense: `6 p q^2 + 8 q^3` for the singular values (an approximate thin
///   SVD, then the residual products `A V` and `A^T U` and the Gram defects
///   of the certification) and `4 p q` for the norms from the entries;
/// * a product of thin factors of inner dimension `r < q`, certified in
///   binary64 through the factors (at `f64`, and at `auto`, which stops
///   there where that meets its target): [`FACTORED_WEIGHT`] times
///   `6 (rows + cols) r^2 + 8 r^3` for the singular values plus
///   `rows cols (r + 4)` for the norms, whose entries are formed from the
///   factors;
/// * a thin product under `extended` or `mpfr:BITS` (certified densely,
///   after forming the product): the dense cost plus `rows cols r`.
pub(crate) fn matrix_cost(
    rows: usize,
    cols: usize,
    inner: Option<usize>,
    precision: Precision,
) -> u128 {
    let (p, q) = (rows.max(cols) as u128, rows.min(cols) as u128);
    let entries = rows as u128 * cols as u128;
    let dense = 6 * p * q * q + 8 * q * q * q + 4 * entries;
    match inner {
        Some(r) if (r as u128) < q => {
            let r = r as u128;
            if matches!(precision, Precision::F64 | Precision::Auto) {
                let sv = 6 * (rows as u128 + cols as u128) * r * r + 8 * r * r * r;
                FACTORED_WEIGHT * (sv + entries * (r + 4))
            } else {
                dense + entries * r
            }
        }
        _ => dense,
    }
}

/// Estimated cost of certifying a dense `rows x cols` matrix whose Gram
/// matrix is exact (float16 weights, the exact-Gram route of
/// [`super::gram`]), in the multiply-adds of [`matrix_cost`]: with
/// `p = max(rows, cols)`, `q = min(rows, cols)`, `p q^2 / 2` for the
/// symmetric Gram product and `4 q^3` for the eigensolver (its
/// tridiagonalization, memory-bound, costs about two GEMMs of order `q`),
/// its back-transformation and the residual product `G V`, plus `4 p q`
/// for the entry norms. Measured on a 22016 x 4096 float16 matrix on one
/// thread here: 22.7 s for the Gram product, 16.2 + 9.0 + 8.9 s for the
/// tridiagonalization, back-transformation and `G V` (`1.8e11` and
/// `2.7e11` multiply-adds in this estimate). For scheduling only.
pub(crate) fn exact_gram_cost(rows: usize, cols: usize) -> u128 {
    let (p, q) = (rows.max(cols) as u128, rows.min(cols) as u128);
    p * q * q / 2 + 4 * q * q * q + 4 * p * q
}

/// Whether entries look like float16 weights (every sampled entry has at
/// most 11 significant bits), so that the exact-Gram route and
/// [`exact_gram_cost`] are likely to apply: a guess for scheduling only,
/// from at most 4096 evenly spaced entries.
pub(crate) fn looks_half(data: &[f64]) -> bool {
    let step = (data.len() / 4096).max(1);
    data.iter()
        .step_by(step)
        .all(|x| x.to_bits() & ((1u64 << 42) - 1) == 0)
}

/// Whether certifying all singular values of one `rows x cols` matrix at
/// `precision` takes long enough (about a second or more here) to show a
/// spinner: a dense estimate ([`matrix_cost`]) of at least `6 * 2^26`
/// multiply-adds in binary64; an MPFR stage from `min(rows, cols) >= 24`;
/// `auto`, which escalates to MPFR on small matrices (`m n^2 <= 2^21`),
/// from `min >= 48` there.
pub(crate) fn is_long(rows: usize, cols: usize, precision: Precision) -> bool {
    let (m, n) = (rows.max(cols) as u128, rows.min(cols) as u128);
    let dense_long = matrix_cost(rows, cols, None, Precision::F64) >= 6 << 26;
    match precision {
        Precision::Mpfr(_) => n >= 24,
        Precision::Auto => dense_long || (m * n * n <= 1 << 21 && n >= 48),
        _ => dense_long,
    }
}
