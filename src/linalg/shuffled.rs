//! The shuffled test backend: every bulk operation computed the way a
//! device might, within the contracts of [`Backend`] and no better.
//!
//! It exists so that the GPU route can be trusted without a GPU: what makes
//! a device certificate right is that the lemmas hold for **every**
//! evaluation they allow, so this backend evaluates each entry of each
//! product by a different tree of A0.10 ([`proofs/assumptions.md`](crate::proofs::assumptions)): a
//! shuffled order of the terms, with or without FMA, sequential, split into
//! 2 to 4 interleaved partial sums (split-K, SIMD lanes) or pairwise; and it
//! returns a deliberately poor eigendecomposition (noisy, unnormalised,
//! mislabelled pairs), of which [`proofs/gram-eigen.md`](crate::proofs::gram_eigen) (L24) assumes
//! nothing. The exact-oracle soundness suite runs through it
//! (`tests/soundness_device.rs`). It is slow (a scalar loop per entry) and
//! meant for tests only.

use std::sync::atomic::{AtomicU64, Ordering};

use faer::{Accum, Mat, MatMut, MatRef, Par};
use rayon::prelude::*;

use super::backend::{Backend, Cpu, EigenSolver};

/// The shuffled test backend (module docs); `seed` makes a run repeatable
/// given the order of the calls.
pub struct Shuffled {
    seed: u64,
    calls: AtomicU64,
}

impl Shuffled {
    /// A shuffled backend that lives for the rest of the process (for
    /// [`super::backend::install`]).
    ///
    /// ```
    /// use specbound::linalg::{backend, shuffled::Shuffled};
    /// let b = Shuffled::leak(7);
    /// assert_eq!(backend::Backend::describe(b), "cpu-shuffled-test:7");
    /// ```
    pub fn leak(seed: u64) -> &'static Shuffled {
        Box::leak(Box::new(Shuffled {
            seed,
            calls: AtomicU64::new(0),
        }))
    }

    /// A fresh random stream for one call.
    fn stream(&self) -> u64 {
        let c = self.calls.fetch_add(1, Ordering::Relaxed);
        mix(self.seed ^ c.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }
}

/// SplitMix64's finaliser: a well-mixed 64-bit hash.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One dot product `sum_l x[l] y[l]` by the evaluation tree `key` selects:
/// every tree here is one of A0.10's (each product formed once, by a
/// rounded multiplication or inside one FMA; round-to-nearest additions).
fn dot_by_tree(x: &[f64], y: &[f64], key: u64) -> f64 {
    let k = x.len();
    if k == 0 {
        return 0.0;
    }
    // A permutation of the terms: a rotation and a stride coprime to k.
    let rot = (key >> 8) as usize % k;
    let mut stride = 1 + ((key >> 24) as usize % k.max(1));
    while gcd(stride, k) != 1 {
        stride += 1;
    }
    let idx = |t: usize| (rot + t * stride) % k;
    let fma = key & 1 == 1;
    let term = |t: usize| x[idx(t)] * y[idx(t)];
    let acc_add = |acc: f64, t: usize| {
        if fma {
            x[idx(t)].mul_add(y[idx(t)], acc)
        } else {
            acc + term(t)
        }
    };
    match (key >> 1) % 3 {
        0 => (1..k).fold(term(0), acc_add),
        1 => {
            let lanes = 2 + ((key >> 4) % 3) as usize;
            let mut part = vec![0.0f64; lanes];
            for t in 0..k {
                part[t % lanes] = acc_add(part[t % lanes], t);
            }
            part.iter().rev().fold(0.0, |a, &p| a + p)
        }
        _ => pairwise(&(0..k).map(term).collect::<Vec<_>>()),
    }
}

/// A pairwise (balanced tree) sum.
fn pairwise(v: &[f64]) -> f64 {
    match v.len() {
        0 => 0.0,
        1 => v[0],
        n => pairwise(&v[..n / 2]) + pairwise(&v[n / 2..]),
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Row `i` of `a` and column `j` of `b` as vectors.
fn row(a: MatRef<'_, f64>, i: usize) -> Vec<f64> {
    (0..a.ncols()).map(|l| a[(i, l)]).collect()
}

impl Backend for Shuffled {
    fn describe(&self) -> String {
        format!("cpu-shuffled-test:{}", self.seed)
    }

    fn gram(&self, a: MatRef<'_, f64>, _par: Par) -> Mat<f64> {
        let n = a.ncols();
        let s = self.stream();
        let cols: Vec<Vec<f64>> = (0..n).map(|j| a.col(j).iter().copied().collect()).collect();
        let lower: Vec<Vec<f64>> = (0..n)
            .into_par_iter()
            .map(|j| {
                (j..n)
                    .map(|i| dot_by_tree(&cols[i], &cols[j], mix(s ^ ((i * n + j) as u64))))
                    .collect()
            })
            .collect();
        Mat::from_fn(n, n, |i, j| {
            if i >= j {
                lower[j][i - j]
            } else {
                lower[i][j - i]
            }
        })
    }

    fn gemm(
        &self,
        mut c: MatMut<'_, f64>,
        accum: Accum,
        a: MatRef<'_, f64>,
        b: MatRef<'_, f64>,
        _par: Par,
    ) {
        let s = self.stream();
        let (m, p) = (a.nrows(), b.ncols());
        let rows: Vec<Vec<f64>> = (0..m).map(|i| row(a, i)).collect();
        let out: Vec<Vec<f64>> = (0..p)
            .into_par_iter()
            .map(|j| {
                let bj: Vec<f64> = b.col(j).iter().copied().collect();
                (0..m)
                    .map(|i| dot_by_tree(&rows[i], &bj, mix(s ^ ((j * m + i) as u64))))
                    .collect()
            })
            .collect();
        for (j, col) in out.iter().enumerate() {
            for (i, &x) in col.iter().enumerate() {
                // Accum::Add is used only where every evaluation is exact
                // (L27): one more rounded addition is such an evaluation.
                c[(i, j)] = match accum {
                    Accum::Replace => x,
                    Accum::Add => c[(i, j)] + x,
                };
            }
        }
    }

    fn sym_eigen(
        &self,
        g: MatRef<'_, f64>,
        prefer: EigenSolver,
        par: Par,
    ) -> Option<(Vec<f64>, Mat<f64>, EigenSolver)> {
        let (mut lam, mut v, solver) = Cpu.sym_eigen(g, prefer, par)?;
        spoil(&mut lam, &mut v, self.stream());
        Some((lam, v, solver))
    }
}

/// Makes an eigendecomposition poor in one of four ways `key` chooses:
/// relative noise `2^-20` in every vector, the same with vectors scaled by
/// `1 + 2^-10`, two eigenvalues swapped between their vectors, or noise
/// `2^-40` (nearly good).
fn spoil(lam: &mut [f64], v: &mut Mat<f64>, key: u64) {
    let n = lam.len();
    let noise = |v: &mut Mat<f64>, scale: f64, key: u64| {
        for j in 0..v.ncols() {
            for i in 0..v.nrows() {
                let r = mix(key ^ ((j * v.nrows() + i) as u64));
                let unit = (r >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
                v[(i, j)] += scale * unit;
            }
        }
    };
    match key % 4 {
        0 => noise(v, 2f64.powi(-20), key),
        1 => {
            noise(v, 2f64.powi(-20), key);
            for j in 0..v.ncols() {
                for i in 0..v.nrows() {
                    v[(i, j)] *= 1.0 + 2f64.powi(-10);
                }
            }
        }
        2 if n >= 2 => {
            let i = (key >> 8) as usize % n;
            let j = (i + 1 + (key >> 32) as usize % (n - 1)) % n;
            lam.swap(i, j);
        }
        _ => noise(v, 2f64.powi(-40), key),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rug::Rational;

    /// A matrix of random binary floats spanning a few binades, both signs.
    fn random(rows: usize, cols: usize, seed: u64) -> Mat<f64> {
        Mat::from_fn(rows, cols, |i, j| {
            let r = mix(seed ^ ((i * 7919 + j) as u64));
            let m = (r >> 11) as f64 / (1u64 << 53) as f64;
            let s = if r & 1 == 1 { -1.0 } else { 1.0 };
            s * m * 2f64.powi(((r >> 3) % 9) as i32 - 4)
        })
    }

    /// Every entry of the shuffled GEMM is within L4's bound of the exact
    /// product (checked in rationals): the backend is inside its contract.
    #[test]
    fn shuffled_products_stay_within_the_a_priori_bound_exactly() {
        let b = Shuffled::leak(11);
        let (m, k, p) = (9, 37, 5);
        let (x, y) = (random(m, k, 1), random(k, p, 2));
        let mut c = Mat::<f64>::zeros(m, p);
        for _ in 0..8 {
            b.gemm(c.as_mut(), Accum::Replace, x.as_ref(), y.as_ref(), Par::Seq);
            let gamma = Rational::from_f64(super::super::rounding::gamma_ru(k)).unwrap();
            for i in 0..m {
                for j in 0..p {
                    let mut exact = Rational::new();
                    let mut abs = Rational::new();
                    for l in 0..k {
                        let t = Rational::from_f64(x[(i, l)]).unwrap()
                            * Rational::from_f64(y[(l, j)]).unwrap();
                        abs += t.clone().abs();
                        exact += t;
                    }
                    let err = (Rational::from_f64(c[(i, j)]).unwrap() - exact).abs();
                    assert!(err <= gamma.clone() * abs, "entry ({i}, {j})");
                }
            }
        }
    }

    /// The trees differ between calls: the same product is not always the
    /// same bits (else the suite would test one order only).
    #[test]
    fn shuffled_products_change_with_the_call() {
        let b = Shuffled::leak(3);
        let (x, y) = (random(16, 200, 5), random(200, 16, 6));
        let mut first = Mat::<f64>::zeros(16, 16);
        b.gemm(
            first.as_mut(),
            Accum::Replace,
            x.as_ref(),
            y.as_ref(),
            Par::Seq,
        );
        let differs = (0..6).any(|_| {
            let mut c = Mat::<f64>::zeros(16, 16);
            b.gemm(c.as_mut(), Accum::Replace, x.as_ref(), y.as_ref(), Par::Seq);
            c != first
        });
        assert!(differs);
    }
}
