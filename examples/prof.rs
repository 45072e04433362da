use specbound::linalg::dense;
use std::time::Instant;
fn main() {
    let p = std::env::args().nth(1).unwrap();
    let t = Instant::now();
    let m = specbound::io::read_matrix(std::path::Path::new(&p), None)
        .unwrap()
        .matrix;
    println!("read {:?}", t.elapsed());
    let t = Instant::now();
    let prep = dense::prepare(m.rows, m.cols, &m.data).unwrap();
    println!("prepare {:?}", t.elapsed());
    let par = faer::get_global_parallelism();
    let t = Instant::now();
    let svd = dense::approx_thin_svd(prep.a.as_ref()).unwrap();
    println!("thin svd {:?}", t.elapsed());
    let t = Instant::now();
    let sv = m.rows.min(m.cols);
    let s = prep.a.as_ref().singular_values().unwrap();
    println!("values only {:?} {}", t.elapsed(), s.len() == sv);
    let t = Instant::now();
    let beta = dense::abs_norm2_ru(prep.a.as_ref());
    println!("collatz {:?}", t.elapsed());
    let t = Instant::now();
    let pv = dense::product_with_bound(prep.a.as_ref(), svd.v.as_ref(), beta, par);
    let qu = dense::product_with_bound(prep.a.transpose(), svd.u.as_ref(), beta, par);
    println!("gemms {:?}", t.elapsed());
    let t = Instant::now();
    let e = dense::residual_col_bounds(&pv, svd.u.as_ref(), &svd.s);
    let f = dense::residual_col_bounds(&qu, svd.v.as_ref(), &svd.s);
    println!("residuals {:?}", t.elapsed());
    println!(
        "beta {beta:e} e0 {:e} f0 {:e} perr {:e} qerr {:e} s0 {:e}",
        e[0], f[0], pv.col_err[0], qu.col_err[0], svd.s[0]
    );
    let t = Instant::now();
    let g = dense::pair_bounds_and_merge(&svd.s, &e, &f, svd.v.as_ref()).unwrap();
    println!("merge {:?} groups {}", t.elapsed(), g.len());
    let t = Instant::now();
    let full = specbound::linalg::certify_singular_values(
        &m,
        &specbound::linalg::SvdOptions {
            precision: specbound::linalg::Precision::F64,
            ..Default::default()
        },
    )
    .unwrap();
    println!("certify total {:?}", t.elapsed());
    let t = Instant::now();
    let _s = specbound::spectral::summarize(&m, &full).unwrap();
    println!("summary {:?}", t.elapsed());
}
#[allow(dead_code)]
fn unused() {}
