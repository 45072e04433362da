mod common;
use common::*;
use specbound::linalg::{certify_singular_values, Precision, SvdOptions};

#[test]
fn smoke_dq() {
    let mut rng = Rng(42);
    let d: Vec<f64> = (0..20).map(|i| (i as f64) + 1.0).collect();
    let a = scaled_rows(&d, 33, false, &mut rng);
    for prec in [Precision::F64, Precision::Mpfr(256)] {
        let t = std::time::Instant::now();
        let sv = certify_singular_values(&a, &SvdOptions { precision: prec, ..Default::default() }).unwrap();
        println!("{prec:?} {:?}", t.elapsed());
        assert_contains_all(&sv.enclosures(), &sorted_abs(&d), "dq");
        for v in sv.values.iter().take(3) { println!("{:e} {:e} {:?}", v.enclosure.lo(), v.enclosure.hi(), v.exact); }
    }
}
