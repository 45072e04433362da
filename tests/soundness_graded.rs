//! Soundness on two-sided graded matrices `D B D` whose entries span most
//! of the binary64 range (issue 19, item 4): every enclosure, at every
//! precision that returns one, contains the exact singular value, checked
//! by the exact inertia of `A^T A - x I` in rationals. Widths are checked
//! in `tightness_escalation.rs`.

mod common;
#[path = "common/inertia.rs"]
mod inertia;

use common::graded;
use specbound::linalg::{certify_singular_values, Precision, SvdOptions};

#[test]
fn graded_matrices_are_contained_exactly_at_every_precision() {
    for (m, n, e, seed) in [
        (6, 6, 400, 1u64),
        (6, 6, 500, 2),
        (7, 5, 500, 3),
        (5, 7, 450, 4),
    ] {
        let a = graded(m, n, e, seed);
        let g = inertia::exact_gram(&a);
        assert_eq!(inertia::decimal("-1.25e2"), Some(rug::Rational::from(-125)));
        assert_eq!(inertia::decimal("25e-1"), Some(rug::Rational::from((5, 2))));
        for p in [
            Precision::F64,
            Precision::Extended,
            Precision::Mpfr(128),
            Precision::Mpfr(2240),
            Precision::Auto,
        ] {
            let o = SvdOptions {
                precision: p,
                ..SvdOptions::default()
            };
            // f64 and extended may be inconclusive here (binary64 overflow);
            // whatever is returned must contain the exact values.
            let Ok(sv) = certify_singular_values(&a, &o) else {
                continue;
            };
            for (i, v) in sv.values.iter().enumerate() {
                assert!(
                    inertia::sigma_in(&g, i + 1, &v.enclosure),
                    "{m}x{n} 2^+-{e} {p}: sigma_{} not in {:?}",
                    i + 1,
                    v.enclosure
                );
                if let Some(x) = &v.exact {
                    let lo = inertia::decimal(&x.lo).expect("a decimal");
                    let hi = inertia::decimal(&x.hi).expect("a decimal");
                    assert!(
                        inertia::sigma_in_rational(&g, i + 1, &lo, &hi),
                        "{m}x{n} 2^+-{e} {p}: sigma_{} not in the decimal ends [{}, {}]",
                        i + 1,
                        x.lo,
                        x.hi
                    );
                }
            }
        }
    }
}
