//! Criterion benches: approximate SVD (no guarantee) vs certified enclosures
//! at Transformer shapes. Seeded inputs, so runs are comparable.
//!
//! `cargo bench --bench svd` (takes a few minutes on 2 cores).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use specbound::linalg::{certify_singular_values, dense, Precision, SvdOptions};
use specbound::matrix::DenseMatrix;

/// Deterministic N(0, 0.02^2) entries (xorshift64* + Box–Muller).
fn gaussian(rows: usize, cols: usize, seed: u64) -> DenseMatrix {
    let mut s = seed | 1;
    let mut next = || {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    };
    let data = (0..rows * cols)
        .map(|_| {
            let (u1, u2) = (next().max(1e-300), next());
            0.02 * (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
        })
        .collect();
    DenseMatrix { rows, cols, data }
}

fn bench_shapes(c: &mut Criterion) {
    let mut g = c.benchmark_group("svd");
    g.sample_size(10);
    for (m, n) in [(768usize, 768usize), (768, 3072), (3072, 768)] {
        let a = gaussian(m, n, (m * 31 + n) as u64);
        let id = format!("{m}x{n}");
        let prep = dense::prepare(a.rows, a.cols, &a.data).expect("nonzero");
        g.bench_with_input(
            BenchmarkId::new("approx_thin_svd_faer", &id),
            &prep,
            |b, p| b.iter(|| dense::approx_thin_svd(p.a()).expect("converges")),
        );
        for (name, precision) in [
            ("certify_auto", Precision::Auto),
            ("certify_extended", Precision::Extended),
        ] {
            let opts = SvdOptions {
                precision,
                ..SvdOptions::default()
            };
            g.bench_with_input(BenchmarkId::new(name, &id), &a, |b, a| {
                b.iter(|| certify_singular_values(a, &opts).expect("certifies"))
            });
        }
    }
    g.finish();
}

fn bench_mpfr(c: &mut Criterion) {
    let mut g = c.benchmark_group("mpfr");
    g.sample_size(10);
    for n in [32usize, 64] {
        let a = gaussian(n, n, n as u64);
        let opts = SvdOptions {
            precision: Precision::Mpfr(256),
            ..SvdOptions::default()
        };
        g.bench_with_input(BenchmarkId::new("certify_mpfr256", n), &a, |b, a| {
            b.iter(|| certify_singular_values(a, &opts).expect("certifies"))
        });
    }
    g.finish();
}

criterion_group!(benches, bench_shapes, bench_mpfr);
criterion_main!(benches);
