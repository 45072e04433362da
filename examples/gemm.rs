use faer::{Accum, Mat, Par};
use std::time::Instant;
fn main() {
    let a = Mat::<f64>::from_fn(3072, 768, |i, j| {
        ((i * 7 + j * 13) % 101) as f64 / 101.0 - 0.5
    });
    let v = Mat::<f64>::from_fn(768, 768, |i, j| ((i * 3 + j * 5) % 97) as f64 / 97.0 - 0.5);
    let u = Mat::<f64>::from_fn(3072, 768, |i, j| {
        ((i * 11 + j * 5) % 89) as f64 / 89.0 - 0.5
    });
    for par in [Par::Seq, Par::rayon(2), Par::rayon(0)] {
        let mut c = Mat::<f64>::zeros(3072, 768);
        let mut q = Mat::<f64>::zeros(768, 768);
        for _ in 0..2 {
            let t = Instant::now();
            faer::linalg::matmul::matmul(&mut c, Accum::Replace, a.as_ref(), v.as_ref(), 1.0, par);
            let t1 = t.elapsed();
            let t = Instant::now();
            faer::linalg::matmul::matmul(
                &mut q,
                Accum::Replace,
                a.transpose(),
                u.as_ref(),
                1.0,
                par,
            );
            let t2 = t.elapsed();
            let t = Instant::now();
            let at = a.transpose().to_owned();
            faer::linalg::matmul::matmul(&mut q, Accum::Replace, at.as_ref(), u.as_ref(), 1.0, par);
            let t3 = t.elapsed();
            println!("{par:?} AV {t1:?} A^T U {t2:?} (owned transpose {t3:?})");
        }
    }
    println!("global {:?}", faer::get_global_parallelism());
}
