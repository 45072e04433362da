//! Criterion bench behind the shard cost model (`src/shard.rs`): the time
//! to certify one matrix of each kind of the bundled MiniLM's layer 0 (f64,
//! one thread, as `certify` runs each matrix), to compare with
//! `linalg::cost::matrix_cost`.
//!
//! `cargo bench --bench shard_cost` (about a minute on 2 cores).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use specbound::arch::{self, ArchOverrides};
use specbound::certify::certify_matrix;
use specbound::io::checkpoint::Checkpoint;
use specbound::linalg::{Precision, SvdOptions};

fn bench_kinds(c: &mut Criterion) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data/all-MiniLM-L6-v2");
    let ck = Checkpoint::open(&path).expect("the bundled model");
    let a = arch::detect(&ck, &ArchOverrides::default()).expect("BERT");
    let mats = arch::extract_layer(&ck, &a, 0, &|id| id.head.unwrap_or(0) == 0).expect("layer 0");
    let opts = SvdOptions {
        precision: Precision::F64,
        par: faer::Par::Seq,
        ..SvdOptions::default()
    };
    let mut g = c.benchmark_group("certify_matrix");
    g.sample_size(10);
    for pm in &mats {
        let name = pm.id.kind.name();
        let id = format!("{name} {}x{}", pm.rows, pm.cols);
        g.bench_with_input(BenchmarkId::new("minilm_layer0", &id), pm, |b, pm| {
            b.iter(|| certify_matrix(pm, &opts).expect("certifies"))
        });
    }
    g.finish();
}

criterion_group!(benches, bench_kinds);
criterion_main!(benches);
