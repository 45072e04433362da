use specbound::io::checkpoint::Checkpoint;
use specbound::linalg::{
    certify_singular_values, dense, factored::certify_factored, Precision, SvdOptions,
};
use specbound::proxy::{self, ProxySource};
use std::time::Instant;
fn main() {
    let ck = Checkpoint::open(std::path::Path::new("data/all-MiniLM-L6-v2")).unwrap();
    let arch = proxy::detect(&ck, &Default::default()).unwrap();
    let mats = proxy::extract(&ck, &arch).unwrap();
    let o = SvdOptions {
        precision: Precision::F64,
        par: faer::Par::Seq,
        ..Default::default()
    };
    for m in mats.iter().filter(|m| m.layer == 0) {
        match &m.source {
            ProxySource::Factored { b, c } if m.head == 0 => {
                let t = Instant::now();
                for _ in 0..10 {
                    certify_factored(b, c, &o).unwrap();
                }
                println!("factored {:?}/call", t.elapsed() / 10);
            }
            ProxySource::Dense(a) => {
                let sv = certify_singular_values(a, &o).unwrap();
                let k = sv.values[0].enclosure.hi() / sv.values.last().unwrap().enclosure.lo();
                let prep = dense::prepare(a.rows, a.cols, &a.data).unwrap();
                let t = Instant::now();
                let g = dense::approx_thin_svd_gram(prep.a.as_ref(), faer::Par::Seq);
                let tg = t.elapsed();
                let t = Instant::now();
                let _d = dense::approx_thin_svd(prep.a.as_ref()).unwrap();
                let td = t.elapsed();
                println!(
                    "{:?} kappa {k:.1} methods {:?} gram {tg:?} ({}) direct {td:?}",
                    m.kind,
                    sv.values[0].method,
                    g.is_some()
                );
            }
            _ => {}
        }
    }
}
