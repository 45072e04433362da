use specbound::io::checkpoint::Checkpoint;
use specbound::linalg::{
    certify_singular_values, factored::certify_factored, Precision, SvdOptions,
};
use specbound::proxy::{self, ProxySource};
use specbound::spectral::{summarize, summarize_factored};
use std::time::Instant;
fn main() {
    let p = std::path::Path::new("data/all-MiniLM-L6-v2");
    let t = Instant::now();
    let ck = Checkpoint::open(p).unwrap();
    let arch = proxy::detect(&ck, &Default::default()).unwrap();
    let mats = proxy::extract(&ck, &arch).unwrap();
    println!("open+extract {:?}", t.elapsed());
    let t = Instant::now();
    let _h = ck.file_hashes();
    println!("hash {:?}", t.elapsed());
    let o = SvdOptions {
        precision: Precision::F64,
        par: faer::Par::Seq,
        ..Default::default()
    };
    let (mut tf, mut tfs, mut td, mut tds) = (0.0, 0.0, 0.0, 0.0);
    for m in &mats {
        match &m.source {
            ProxySource::Factored { b, c } => {
                let t = Instant::now();
                let sv = certify_factored(b, c, &o).unwrap();
                tf += t.elapsed().as_secs_f64();
                let t = Instant::now();
                summarize_factored(b, c, &sv).unwrap();
                tfs += t.elapsed().as_secs_f64();
            }
            ProxySource::Dense(a) => {
                let t = Instant::now();
                let sv = certify_singular_values(a, &o).unwrap();
                td += t.elapsed().as_secs_f64();
                let t = Instant::now();
                summarize(a, &sv).unwrap();
                tds += t.elapsed().as_secs_f64();
            }
        }
    }
    println!("factored sv {tf:.3} summary {tfs:.3} | dense sv {td:.3} summary {tds:.3}");
}
