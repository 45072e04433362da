use faer::{Accum, Mat, Par, Side};
use std::time::Instant;
fn main() {
    let p = std::env::args().nth(1).unwrap();
    let m = specbound::io::read_matrix(std::path::Path::new(&p), None)
        .unwrap()
        .matrix;
    let prep = specbound::linalg::dense::prepare(m.rows, m.cols, &m.data).unwrap();
    let a = prep.a;
    let n = a.ncols();
    let t = Instant::now();
    let mut g = Mat::<f64>::zeros(n, n);
    faer::linalg::matmul::matmul(
        &mut g,
        Accum::Replace,
        a.transpose(),
        a.as_ref(),
        1.0,
        Par::rayon(0),
    );
    let t1 = t.elapsed();
    let t = Instant::now();
    let e = g.self_adjoint_eigen(Side::Lower).unwrap();
    let t2 = t.elapsed();
    let t = Instant::now();
    let mut u = Mat::<f64>::zeros(a.nrows(), n);
    faer::linalg::matmul::matmul(
        &mut u,
        Accum::Replace,
        a.as_ref(),
        e.U(),
        1.0,
        Par::rayon(0),
    );
    let t3 = t.elapsed();
    let t = Instant::now();
    let _s = a.thin_svd().unwrap();
    let t4 = t.elapsed();
    println!("gram {t1:?} eig {t2:?} AV {t3:?} | thin svd {t4:?}");
}
