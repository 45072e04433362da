//! The entry norms of a matrix from **exact integer sums**: when every
//! entry lies on one grid `2^q Z` and spans few enough bits above it (every
//! float16 matrix, most float32 and bfloat16 ones), `|a_ij| 2^-q` is an
//! integer read off the entry's bits, and the sums of those integers and of
//! their squares (whole and by column) are exact in 64- and 128-bit integer
//! arithmetic, in any order. The norms are then enclosed by one directed
//! conversion each (and a square root), which is tighter than any
//! compensated floating-point sum, and the sums split over threads with the
//! same result on any number of them.
//!
//! Where the entries do not qualify (binary64 weights, a range too wide,
//! a non-finite entry), [`exact_entry_sums`] returns `None` and the callers
//! use the compensated binary64 sums of `spectral` ([`proofs/compensated-sum.md`](crate::proofs::compensated_sum),
//! L12).

use crate::enclosure::Enclosure;
use crate::linalg::dense::{lowest_bit_key, significand};
use crate::linalg::eft::Sum2;
use crate::linalg::rounding as r;
use crate::matrix::DenseMatrix;

/// Largest bit span `top - q` of the entries accepted: `|a| 2^-q < 2^63`
/// fits a `u64`, and its square a `u128` (L39 a).
const MAX_SPAN: i32 = 63;

/// Rows per task of the parallel pass: a fixed number, though any split
/// gives the same sums (integer addition is exact and associative).
const ROWS_PER_TASK: usize = 256;

/// Exact integer sums of a matrix's entries on the grid `2^q Z` (L39).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ExactEntrySums {
    /// The grid exponent: every entry is an integer multiple of `2^q`.
    q: i32,
    /// `sum_ij |a_ij| 2^-q`.
    abs: u128,
    /// `sum_i (a_ij 2^-q)^2` of each column `j`.
    col_sq: Vec<u128>,
}

/// `|x| 2^-q` as an integer, given that `2^q` divides `x` and
/// `|x| < 2^(q + 63)` (so the shifts drop no set bit and do not overflow).
/// A zero is 0 (its encoding's exponent says nothing of the grid).
#[inline]
fn grid_integer(x: f64, q: i32) -> u64 {
    let (m, e) = significand(x);
    if m == 0 {
        return 0;
    }
    let sh = e - q;
    if sh >= 0 {
        m << sh
    } else {
        m >> (-sh)
    }
}

/// The grid of the entries: `(q, top)` with every nonzero entry a multiple
/// of `2^q` and below `2^top` in magnitude; `None` for a zero matrix or a
/// non-finite entry. Split over the pool when `par` allows (a minimum and
/// a maximum: the same on any split).
fn grid(data: &[f64], par: faer::Par) -> Option<(i32, i32)> {
    // Per chunk, the smallest lowest-bit key and the bit pattern of the
    // largest magnitude: for nonnegative binary64 numbers the patterns
    // order as the values do, so integer minima and maxima (no branch, no
    // early exit: it vectorises) find them.
    let chunk = |c: &[f64]| {
        c.iter().fold((u64::MAX, 0u64), |(lo, hi), &x| {
            (lo.min(lowest_bit_key(x)), hi.max(x.abs().to_bits()))
        })
    };
    let merge = |a: (u64, u64), b: (u64, u64)| (a.0.min(b.0), a.1.max(b.1));
    const CHUNK: usize = 1 << 16;
    let (lo, hi) = match par {
        faer::Par::Rayon(t) if t.get() > 1 && data.len() > CHUNK => {
            use rayon::prelude::*;
            data.par_chunks(CHUNK)
                .map(chunk)
                .reduce(|| (u64::MAX, 0), merge)
        }
        _ => data.chunks(CHUNK).map(chunk).fold((u64::MAX, 0), merge),
    };
    // A NaN or an infinity has the largest pattern of all (abs clears the
    // sign); a zero matrix has no lowest bit.
    if hi >= f64::INFINITY.to_bits() || lo == u64::MAX {
        return None;
    }
    let (m, e) = significand(f64::from_bits(hi));
    let top = e + (64 - m.leading_zeros()) as i32;
    Some((crate::linalg::dense::lowest_bit(f64::from_bits(lo)), top))
}

/// Bits needed to count to `n`.
fn bits_of(n: usize) -> i32 {
    (usize::BITS - n.leading_zeros()) as i32
}

/// The exact sums of `a`'s entries on their grid, or `None` when an entry
/// is not finite, the matrix is zero, or the span of the entries is too
/// wide for the integer sums to be exact (L39 a, b: `span <= 63` and
/// `2 span + bits(rows cols) <= 127`). In parallel over fixed blocks of rows
/// when `par` allows; the sums are the same on any number of threads.
pub(crate) fn exact_entry_sums(a: &DenseMatrix, par: faer::Par) -> Option<ExactEntrySums> {
    let (q, top) = grid(&a.data, par)?;
    let span = top - q;
    if span > MAX_SPAN || 2 * span + bits_of(a.data.len()) > 127 {
        return None;
    }
    let n = a.cols;
    let run = binary64_run(q, span);
    // Within a block, 64-bit column sums where they cannot wrap (float16
    // weights span about 21 bits: squares below 2^42, 256 of them below
    // 2^50); else 128-bit ones (L39 b, with the block's count).
    let narrow = 2 * span + bits_of(ROWS_PER_TASK) <= 64 && span + bits_of(ROWS_PER_TASK * n) <= 64;
    let block = |rows: &[f64]| match run {
        Some(run) => binary64_block_sums(rows, n, q, run),
        None => integer_block_sums(rows, n, q, narrow),
    };
    let chunk = ROWS_PER_TASK * n.max(1);
    let parts: Vec<(u128, Vec<u128>)> = match par {
        faer::Par::Rayon(t) if t.get() > 1 && a.data.len() > chunk => {
            use rayon::prelude::*;
            a.data.par_chunks(chunk).map(block).collect()
        }
        _ => a.data.chunks(chunk.max(1)).map(block).collect(),
    };
    let mut abs = 0u128;
    let mut col_sq = vec![0u128; n];
    for (pa, pc) in parts {
        abs += pa;
        col_sq.iter_mut().zip(pc).for_each(|(c, p)| *c += p);
    }
    Some(ExactEntrySums { q, abs, col_sq })
}

/// The exact sums of a block of `rows` (row-major, `n` columns) on the
/// grid `2^q Z` in integer arithmetic (L39 a, b): 64-bit column sums when
/// `narrow` says they cannot wrap, else 128-bit ones.
fn integer_block_sums(rows: &[f64], n: usize, q: i32, narrow: bool) -> (u128, Vec<u128>) {
    if narrow {
        let mut abs = 0u64;
        let mut col_sq = vec![0u64; n];
        for row in rows.chunks_exact(n.max(1)) {
            for (c, &x) in col_sq.iter_mut().zip(row) {
                let v = grid_integer(x, q);
                abs += v;
                *c += v * v;
            }
        }
        return (abs as u128, col_sq.into_iter().map(u128::from).collect());
    }
    let mut abs = 0u128;
    let mut col_sq = vec![0u128; n];
    for row in rows.chunks_exact(n.max(1)) {
        for (c, &x) in col_sq.iter_mut().zip(row) {
            let v = grid_integer(x, q) as u128;
            abs += v;
            *c += v * v;
        }
    }
    (abs, col_sq)
}

/// Rows per run of [`binary64_block_sums`] for entries on the grid
/// `2^q Z` spanning `span` bits, or `None` where that path is not exact:
/// `2^-q` must be a normal binary64 number (so `|x| 2^-q` is computed
/// exactly, L2) and a run of `R` rows must keep every column's sum of
/// squares, `R 2^(2 span)` at most, within binary64's integers
/// (`<= 2^53`, L39 e). At most [`ROWS_PER_TASK`] (a block's rows).
fn binary64_run(q: i32, span: i32) -> Option<usize> {
    let room = 53 - 2 * span;
    ((-1000..=1000).contains(&q) && room >= 0).then(|| 1usize << room.min(bits_of(ROWS_PER_TASK)))
}

/// The exact sums of a block of `rows` (row-major, `n` columns) on the
/// grid `2^q Z`, computed in binary64 a run of `run` rows at a time
/// ([`binary64_run`]): every entry `a = |x| 2^-q` is an integer below
/// `2^span`, each column's running sums `sum a^2` (by fused multiply-adds)
/// and `sum a` stay integers of at most 53 bits, so every operation is
/// exact (L39 e), and the sums of each run are moved into 128-bit integers
/// exactly. The same integers as the integer path, with one multiply-add
/// per entry side by side over the columns (it vectorises).
fn binary64_block_sums(rows: &[f64], n: usize, q: i32, run: usize) -> (u128, Vec<u128>) {
    let scale = r::pow2(-q);
    let mut sq = vec![0.0f64; n];
    let mut ab = vec![0.0f64; n];
    let (mut abs, mut col_sq) = (0u128, vec![0u128; n]);
    for part in rows.chunks(run * n.max(1)) {
        for row in part.chunks_exact(n.max(1)) {
            for ((s, b), &x) in sq.iter_mut().zip(ab.iter_mut()).zip(row) {
                let a = x.abs() * scale;
                *s = a.mul_add(a, *s);
                *b += a;
            }
        }
        for ((c, s), b) in col_sq.iter_mut().zip(sq.iter_mut()).zip(ab.iter_mut()) {
            // Integers below 2^53: the conversions are exact.
            *c += *s as u128;
            abs += *b as u128;
            (*s, *b) = (0.0, 0.0);
        }
    }
    (abs, col_sq)
}

/// `[lo, hi]` with `lo <= s <= hi` and both within one ulp of `s` (L39 c):
/// the nearest binary64 number, compared with `s` exactly.
fn u128_bounds(s: u128) -> (f64, f64) {
    let f = s as f64; // round to nearest; s < 2^127, so f <= 2^127
    let back = f as u128; // exact: f is an integer below 2^128
    match back.cmp(&s) {
        std::cmp::Ordering::Equal => (f, f),
        std::cmp::Ordering::Greater => (f.next_down(), f),
        std::cmp::Ordering::Less => (f, f.next_up()),
    }
}

impl ExactEntrySums {
    /// `2^q [lo, hi]` rounded outward (L2 d); `None` past binary64's range.
    fn unscaled(&self, lo: f64, hi: f64) -> Option<Enclosure> {
        Enclosure::new(r::scale_pow2_rd(lo, self.q), r::scale_pow2_ru(hi, self.q))
    }

    /// *Guarantee: certified enclosure* of `||A||_F = 2^q sqrt(sum of
    /// squares)` ([`proofs/exact-integer-sums.md`](crate::proofs::exact_integer_sums), L39; [`proofs/rn-directed-scalar.md`](crate::proofs::rn_directed_scalar),
    /// L3 a, for the square roots; [`proofs/power-of-two-scaling.md`](crate::proofs::power_of_two_scaling), L2 d).
    pub(crate) fn frobenius(&self) -> Option<Enclosure> {
        let total: u128 = self.col_sq.iter().sum(); // <= 2^127 by the span test
        let (lo, hi) = u128_bounds(total);
        self.unscaled(r::sqrt_rd(lo), r::sqrt_ru(hi))
    }

    /// *Guarantee: certified enclosure* of `||A||_{1,1} = 2^q sum |a_ij| 2^-q`
    /// ([`proofs/exact-integer-sums.md`](crate::proofs::exact_integer_sums), L39; [`proofs/power-of-two-scaling.md`](crate::proofs::power_of_two_scaling),
    /// L2 d).
    pub(crate) fn norm_11(&self) -> Option<Enclosure> {
        let (lo, hi) = u128_bounds(self.abs);
        self.unscaled(lo, hi)
    }

    /// *Guarantee: certified enclosure* of the (2,1)-norm, the sum of the
    /// column norms `2^q sqrt(col_sq_j)`: each enclosed by directed square
    /// roots of its exact sum's bounds, the lower and the upper ends summed
    /// by Sum2 with the bound of L12 ([`proofs/exact-integer-sums.md`](crate::proofs::exact_integer_sums), L39;
    /// [`proofs/compensated-sum.md`](crate::proofs::compensated_sum), L12; [`proofs/rn-directed-scalar.md`](crate::proofs::rn_directed_scalar),
    /// L3 a; [`proofs/power-of-two-scaling.md`](crate::proofs::power_of_two_scaling), L2 d).
    pub(crate) fn norm_21(&self) -> Option<Enclosure> {
        let (mut lo_sum, mut hi_sum) = (Sum2::new(), Sum2::new());
        for &c in &self.col_sq {
            let (lo, hi) = u128_bounds(c);
            lo_sum.add(r::sqrt_rd(lo));
            hi_sum.add(r::sqrt_ru(hi));
        }
        self.unscaled(lo_sum.bounds().0.max(0.0), hi_sum.bounds().1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::quickcheck;

    fn matrix(rows: usize, cols: usize, data: Vec<f64>) -> DenseMatrix {
        DenseMatrix { rows, cols, data }
    }

    /// The grid over chunks on a pool is the one of a single pass, and a
    /// non-finite entry anywhere (here in the last chunk) refuses it.
    #[test]
    fn grid_split_over_a_pool_is_the_grid_of_one_pass() {
        let n = 5 << 16;
        let mut data: Vec<f64> = (0..n).map(|i| ((i % 97) as f64 - 48.0) * 0.125).collect();
        data[3 << 16] = 3.0 * 2f64.powi(-20); // lowest bit 2^-20
        data[(4 << 16) + 7] = 1.5 * 2f64.powi(9); // top 2^10
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let on_pool = |d: &[f64]| pool.install(|| grid(d, faer::Par::rayon(3)));
        assert_eq!(grid(&data, faer::Par::Seq), Some((-20, 10)));
        assert_eq!(on_pool(&data), Some((-20, 10)));
        assert_eq!(on_pool(&vec![0.0; n]), None);
        data[n - 1] = f64::NAN;
        assert_eq!(on_pool(&data), None);
        assert_eq!(grid(&data, faer::Par::Seq), None);
    }

    /// The grid of entries one by one, from their encodings (L39 a).
    fn grid_by_entries(data: &[f64]) -> Option<(i32, i32)> {
        if data.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let nz: Vec<(u64, i32)> = data
            .iter()
            .filter(|&&x| x != 0.0)
            .map(|&x| significand(x))
            .collect();
        let q = nz
            .iter()
            .map(|&(m, e)| e + m.trailing_zeros() as i32)
            .min()?;
        let top = nz
            .iter()
            .map(|&(m, e)| e + (64 - m.leading_zeros()) as i32)
            .max()?;
        Some((q, top))
    }

    #[test]
    fn grid_of_extreme_entries_is_the_grid_entry_by_entry() {
        let tiny = f64::from_bits(1);
        let cases: Vec<Vec<f64>> = vec![
            vec![1.0, -0.5, 0.75],
            vec![0.0, -0.0, 3.0 * 2f64.powi(-20)],
            vec![tiny, 1.0],
            vec![f64::MAX, -f64::MIN_POSITIVE],
            vec![f64::from_bits(0x000f_ffff_ffff_ffff), 2.0],
            vec![1.0 + f64::EPSILON, 2f64.powi(-1022)],
            vec![0.0, 0.0],
            vec![1.0, f64::INFINITY],
            vec![f64::NAN, 1.0],
            vec![-f64::INFINITY],
        ];
        for c in cases {
            assert_eq!(grid(&c, faer::Par::Seq), grid_by_entries(&c), "{c:?}");
        }
    }

    quickcheck! {
        /// Any bit patterns (zeros, subnormals, infinities and NaNs among
        /// them): the grid is that of the entries one by one.
        fn grid_is_the_grid_entry_by_entry(bits: Vec<u64>, small: Vec<u16>) -> bool {
            let mut data: Vec<f64> = bits.iter().map(|&b| f64::from_bits(b)).collect();
            // float16-like entries too, so that most cases are finite.
            data.extend(small.iter().map(|&h| half::f16::from_bits(h).to_f64()));
            let finite: Vec<f64> = data.iter().copied().filter(|x| x.is_finite()).collect();
            grid(&data, faer::Par::Seq) == grid_by_entries(&data)
                && grid(&finite, faer::Par::Seq) == grid_by_entries(&finite)
        }
    }

    #[test]
    fn grid_integers_are_the_entries_on_their_grid() {
        for &(x, q) in &[
            (0.75, -2),
            (3.0, 0),
            (2f64.powi(-1074), -1074),
            (1.5 * 2f64.powi(950), 900),
            (0.0, -30),
        ] {
            let v = grid_integer(x, q);
            assert_eq!(r::scale_pow2_rn(v as f64, q), x, "{x} on 2^{q}");
        }
    }

    #[test]
    fn sums_of_a_small_matrix_are_exact() {
        // [[1, -2], [0.5, 3]]: grid 2^-1, integers [[2, 4], [1, 6]].
        let a = matrix(2, 2, vec![1.0, -2.0, 0.5, 3.0]);
        let s = exact_entry_sums(&a, faer::Par::Seq).expect("on a grid");
        assert_eq!((s.q, s.abs, s.col_sq.clone()), (-1, 13, vec![5, 52]));
        let n11 = s.norm_11().expect("finite");
        assert_eq!((n11.lo(), n11.hi()), (6.5, 6.5));
        // ||A||_F^2 = 1 + 4 + 0.25 + 9 = 14.25, enclosed by directed roots.
        let f = s.frobenius().expect("finite");
        assert!(f.lo() <= 14.25f64.sqrt() && 14.25f64.sqrt() <= f.hi());
    }

    #[test]
    fn too_wide_a_span_or_a_non_finite_entry_is_refused() {
        let wide = matrix(1, 2, vec![1.0, 2f64.powi(-80)]);
        assert!(exact_entry_sums(&wide, faer::Par::Seq).is_none());
        let nan = matrix(1, 2, vec![1.0, f64::NAN]);
        assert!(exact_entry_sums(&nan, faer::Par::Seq).is_none());
        assert!(exact_entry_sums(&matrix(1, 2, vec![0.0, 0.0]), faer::Par::Seq).is_none());
    }

    #[test]
    fn u128_bounds_bracket_values_that_binary64_cannot_hold() {
        for s in [
            0u128,
            1,
            (1 << 53) + 1,
            (1 << 100) + 12345,
            (1u128 << 127) - 1,
        ] {
            let (lo, hi) = u128_bounds(s);
            assert!(
                (lo as u128) <= s && s <= hi as u128 || hi >= 2f64.powi(127),
                "{s}"
            );
            assert!(lo == hi || hi == lo.next_up());
        }
    }

    /// A block of `rows x cols` entries on the grid `2^q Z` spanning
    /// exactly `span` bits (the top entry `2^span - 1` times `2^q`, the
    /// others random below it, some zero, signs mixed).
    fn block_on_grid(rows: usize, cols: usize, q: i32, span: i32, seed: u64) -> Vec<f64> {
        let mut s = seed | 1;
        let top = (1u64 << span) - 1;
        (0..rows * cols)
            .map(|k| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                let v = if k == 0 { top } else { (s >> 11) % (top + 1) };
                let v = if s % 7 == 0 { 0 } else { v };
                let sign = if s % 3 == 0 { -1.0 } else { 1.0 };
                sign * r::scale_pow2_rn(v as f64, q)
            })
            .collect()
    }

    #[test]
    fn binary64_runs_give_the_integer_sums_bit_for_bit() {
        let (rows, cols) = (ROWS_PER_TASK, 9);
        for span in 1..=26 {
            for (q, seed) in [(-24, 1u64), (-60, 7), (3, 99)] {
                let data = block_on_grid(rows, cols, q, span, seed + span as u64);
                let run = binary64_run(q, span).expect("span <= 26");
                // A run never holds more squares than binary64's integers can.
                assert!(run as u128 * (1u128 << (2 * span)) <= 1 << 53 || run == 1 << 9);
                let ints = integer_block_sums(&data, cols, q, false);
                assert_eq!(
                    binary64_block_sums(&data, cols, q, run),
                    ints,
                    "span {span}, q {q}"
                );
                let a = matrix(rows, cols, data);
                let sums = exact_entry_sums(&a, faer::Par::Seq).expect("on a grid");
                assert_eq!((sums.abs, sums.col_sq), ints);
            }
        }
        assert_eq!(binary64_run(-24, 27), None);
        assert_eq!(binary64_run(-1074, 10), None);
        assert_eq!(binary64_run(-24, 21), Some(1 << 9));
        assert_eq!(binary64_run(-24, 26), Some(2));
    }

    quickcheck! {
        /// Float16-like entries (11-bit significands over a few binades):
        /// the split over threads gives the same sums, and the sums equal
        /// those of an independent 256-bit MPFR evaluation exactly.
        fn parallel_and_sequential_sums_agree(seed: u64) -> bool {
            let (rows, cols) = (300usize, 7usize);
            let mut s = seed | 1;
            let data: Vec<f64> = (0..rows * cols)
                .map(|_| {
                    s ^= s << 13; s ^= s >> 7; s ^= s << 17;
                    let m = (s % 2048) as f64 - 1024.0;
                    m * 2f64.powi(-(((s >> 20) % 12) as i32) - 10)
                })
                .collect();
            let a = matrix(rows, cols, data.clone());
            let seq = exact_entry_sums(&a, faer::Par::Seq);
            let par = exact_entry_sums(&a, faer::Par::rayon(4));
            let Some(x) = seq.clone() else { return data.iter().all(|&v| v == 0.0) };
            let abs = data.iter().fold(rug::Float::with_val(256, 0), |acc, v| acc + v.abs());
            let back = rug::Float::with_val(256, x.abs) << x.q;
            seq == par && back == abs
        }
    }
}
