//! Tightness of ranks decided exactly (kept apart from soundness): a
//! pruned head's `V_tilde` (structural zeros of its factors, L14 e) has its
//! rank decided, and the bound is as tight as the unpruned model's.

mod common;

use common::tmpdir;

use serde_json::Value;
use std::path::Path;

fn certify(model: &Path, out: &Path) -> Value {
    let o = common::run(&[
        "certify",
        "-q",
        "--out",
        out.to_str().unwrap(),
        model.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap()
}

fn matrix<'a>(c: &'a Value, layer: i64, kind: &str, head: i64) -> &'a Value {
    c["matrices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["layer"] == layer && m["type"] == kind && m["head"] == head)
        .unwrap()
}

/// Issue 33: the real MiniLM with rows 5..31 of head 0's value weight in
/// layer 0 set to zero (structured pruning) had that head's `V_tilde`
/// rank `[5, 32]` and `B_ours` 0.3 % wide. With the zero rows left out of
/// the factored product (L14 e), the rank is exactly 5 and `B_ours` is
/// certified to full width (relative radius <= 1e-12) at the default
/// precision.
#[test]
fn pruned_head_rank_was_undecided_and_b_ours_wide() {
    let dir = tmpdir("pruned");
    let model = dir.join("model");
    let head_dim = 32;
    common::family::minilm_edited(
        &common::root().join("data/all-MiniLM-L6-v2"),
        &model,
        6,
        &|name, shape, bytes| {
            if name == "encoder.layer.0.attention.self.value.weight" {
                let row = 4 * shape[1];
                bytes[5 * row..head_dim * row].fill(0);
            }
        },
    );
    let c = certify(&model, &dir.join("c.json"));
    let v = matrix(&c, 0, "V_tilde", 0);
    assert_eq!(
        (v["rank"]["lo"].as_i64(), v["rank"]["hi"].as_i64()),
        (Some(5), Some(5)),
        "{}",
        v["rank"]
    );
    let other = matrix(&c, 0, "V_tilde", 1);
    assert_eq!(
        other["rank"]["lo"], other["rank"]["hi"],
        "{}",
        other["rank"]
    );
    let (lo, hi) = (
        c["bounds"]["ours"]["lo"].as_f64().unwrap(),
        c["bounds"]["ours"]["hi"].as_f64().unwrap(),
    );
    let rel = (hi - lo) / (hi + lo);
    assert!(
        rel <= 1e-12,
        "B_ours [{lo:e}, {hi:e}]: relative radius {rel:e}"
    );
}

/// Issue 33: where a rank stays undecided, the summary names the matrix,
/// its rank interval and the relative radius of `B_ours` it leaves. Here
/// rows 5..31 of head 0's value weight are row 0 (its columns 5..31 set to
/// 0) plus `1e-30` at column `i`: the exact rank is 32, but 27 values near
/// `1e-30 sigma_1` are below what binary64 separates from 0, and the
/// factors have full rank (no exact null vector: rows copied exactly are
/// now decided, `dependent_head_factor_rank_was_undecided`).
#[test]
fn summary_names_an_undecided_rank_and_its_cost() {
    let dir = tmpdir("copied");
    let model = dir.join("model");
    common::family::minilm_edited(
        &common::root().join("data/all-MiniLM-L6-v2"),
        &model,
        1,
        &|name, shape, bytes| {
            if name == "encoder.layer.0.attention.self.value.weight" {
                let row = 4 * shape[1];
                bytes[4 * 5..4 * 32].fill(0);
                let first = bytes[..row].to_vec();
                for i in 5..32 {
                    bytes[i * row..(i + 1) * row].copy_from_slice(&first);
                    bytes[i * row + 4 * i..i * row + 4 * i + 4]
                        .copy_from_slice(&1e-30f32.to_le_bytes());
                }
            }
        },
    );
    let o = common::run(&["certify", model.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("rank undecided for"))
        .unwrap_or_else(|| panic!("no undecided rank named:\n{text}"));
    assert!(
        line.contains("head 0") && line.contains("relative radius"),
        "{line}"
    );
}

/// Issue 33: float32 `[[MAX, 2^-149], [2^-149, 0]]` (rank 2, sigma_2 =
/// 2^-298 / sigma_1, about 5.77e-129) had rank `[1, 2]` at f64, extended
/// and mpfr:256; the two-column closed form (L32) decides it at every
/// precision, sigma_2 to a few ulps.
#[test]
fn extreme_two_by_two_rank_was_undecided_below_auto() {
    use specbound::linalg::{certify_singular_values, Precision, SvdOptions};
    use specbound::matrix::DenseMatrix;
    let t = 2f64.powi(-149);
    let a = DenseMatrix {
        rows: 2,
        cols: 2,
        data: vec![f64::from(f32::MAX), t, t, 0.0],
    };
    for p in [
        Precision::F64,
        Precision::Extended,
        Precision::Mpfr(256),
        Precision::Auto,
    ] {
        let sv = certify_singular_values(
            &a,
            &SvdOptions {
                precision: p,
                ..SvdOptions::default()
            },
        )
        .unwrap();
        let s2 = sv.values[1].enclosure;
        assert!(s2.lo() > 0.0, "{p:?}: sigma_2 {s2:?}");
        assert!(s2.rel_rad() <= 1e-15, "{p:?}: sigma_2 {s2:?}");
    }
}

fn certify_at(
    a: &specbound::matrix::DenseMatrix,
    p: specbound::linalg::Precision,
) -> specbound::linalg::SingularValues {
    specbound::linalg::certify_singular_values(
        a,
        &specbound::linalg::SvdOptions {
            precision: p,
            ..specbound::linalg::SvdOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("{p:?}: {}", e.reason))
}

fn rank_of(sv: &specbound::linalg::SingularValues) -> (u64, u64) {
    let r = specbound::spectral::enclose_rank(sv);
    (r.lo, r.hi)
}

/// Issue 33: on two-sided graded `D B D` (D from 2^e to 2^-e) `mpfr:256`
/// left the rank `[2, 6]` and `mpfr:1000` `[5, 6]` where `auto` (whose
/// graded stage runs at a precision covering the span) gave `[6, 6]`. An
/// exact determinant of a nonsingular submatrix (L37) now decides it at
/// every precision that certifies: an explicit precision is never left
/// with a rank `auto` decides.
#[test]
fn mpfr_n_left_graded_ranks_undecided_that_auto_decided() {
    use specbound::linalg::Precision;
    for (m, n, e, seed) in [(6, 6, 400, 1u64), (6, 6, 500, 2), (7, 5, 500, 3)] {
        let a = common::graded(m, n, e, seed);
        let auto = rank_of(&certify_at(&a, Precision::Auto));
        for p in [
            Precision::Mpfr(128),
            Precision::Mpfr(256),
            Precision::Mpfr(1000),
            Precision::Auto,
        ] {
            let sv = certify_at(&a, p);
            let full = m.min(n) as u64;
            assert_eq!(auto, (full, full), "{m}x{n} 2^+-{e} auto");
            assert_eq!(rank_of(&sv), auto, "{m}x{n} 2^+-{e} {p:?}: {:?}", sv.notes);
        }
    }
}

/// Issue 33: on the same graded matrices `mpfr:128`, `mpfr:256` and
/// `mpfr:1000` left the small values at a relative radius of 1 (ends
/// `[tiny, h]`) where `auto` gave about 2e-16 for every value: an explicit
/// precision whose bits do not cover the span now also runs `auto`'s graded
/// stage, so it is never looser than `auto` (within a factor 2 for the
/// stages `auto` combined that `mpfr:N` does not run).
#[test]
fn mpfr_n_was_looser_than_auto_on_graded_matrices() {
    use specbound::linalg::Precision;
    for (m, n, e, seed) in [(6, 6, 400, 1u64), (6, 6, 500, 2), (7, 5, 500, 3)] {
        let a = common::graded(m, n, e, seed);
        let auto = certify_at(&a, Precision::Auto);
        for p in [
            Precision::Mpfr(128),
            Precision::Mpfr(256),
            Precision::Mpfr(1000),
        ] {
            let sv = certify_at(&a, p);
            for (i, (x, y)) in sv.values.iter().zip(&auto.values).enumerate() {
                assert!(
                    x.rel_rad() <= 2.0 * y.rel_rad() + 1e-300,
                    "{m}x{n} 2^+-{e} {p:?}: sigma_{} radius {:e} against auto's {:e}",
                    i + 1,
                    x.rel_rad(),
                    y.rel_rad()
                );
            }
        }
    }
}

/// Issue 33: `2^-1074 [[1, 0], [2, 1]]` (rank 2, sigma_2 = (sqrt 2 - 1)
/// 2^-1074, below the least positive double) had rank `[1, 2]` at every
/// precision: its binary64 lower end can only be 0. The two-column closed
/// form (L32) now keeps its MPFR decimal ends there (where it could not,
/// the exact determinant, L37, bounds it from below): rank `[2, 2]`.
#[test]
fn subnormal_two_by_two_rank_was_undecided_at_every_precision() {
    use specbound::linalg::Precision;
    let t = 2f64.powi(-1074);
    let a = specbound::matrix::DenseMatrix {
        rows: 2,
        cols: 2,
        data: vec![t, 0.0, 2.0 * t, t],
    };
    for p in [
        Precision::F64,
        Precision::Extended,
        Precision::Mpfr(256),
        Precision::Auto,
    ] {
        let sv = certify_at(&a, p);
        assert_eq!(rank_of(&sv), (2, 2), "{p:?}: {:?}", sv.values);
        let x = sv.values[1].exact.as_ref().expect("decimal ends");
        // sigma_2 = (sqrt 2 - 1) 2^-1074 = 2.05e-324 (at 300 bits), its
        // decimal ends from the closed form's 256-bit MPFR: within 1e-15.
        let lo = rug::Float::with_val(300, rug::Float::parse(&x.lo).unwrap());
        let exact = (rug::Float::with_val(300, 2).sqrt() - 1u32) >> 1074u32;
        let within = rug::Float::with_val(300, &exact * (1.0 - 1e-15));
        assert!(lo >= within && lo <= exact, "{p:?}: {}", x.lo);
    }
}

/// Issue 33: exactly rank-deficient small matrices with entries of wide
/// range (binary64, too wide for the exact-Gram route) are decided exactly:
/// the kernel certificate (L30) from above, an exact determinant (L37)
/// from below, at every precision.
#[test]
fn small_rank_deficient_matrices_with_wide_entries_get_their_exact_rank() {
    use specbound::linalg::Precision;
    // 4 x 3, rank 2: column 3 = 2^-1000 * (column 1 + 3 column 2)
    // (each entry an exact binary64 number), column 2 at 2^500.
    let (c1, c2) = ([1.0, 3.0, -5.0, 7.0], [2.0, -1.0, 0.0, 4.0]);
    let mut data = Vec::new();
    for i in 0..4 {
        data.extend([
            c1[i],
            c2[i] * 2f64.powi(500),
            (c1[i] + 3.0 * c2[i]) * 2f64.powi(-1000),
        ]);
    }
    let a = specbound::matrix::DenseMatrix {
        rows: 4,
        cols: 3,
        data,
    };
    for p in [Precision::F64, Precision::Mpfr(256), Precision::Auto] {
        let sv = certify_at(&a, p);
        assert_eq!(
            rank_of(&sv),
            (2, 2),
            "{p:?}: {:?} {:?}",
            sv.values,
            sv.notes
        );
    }
}

/// A 384 x 32 value factor whose column 5 is column 3 plus column 4 (a
/// head with a duplicated direction, no zero row), and a 32 x 384 output
/// factor: entries `k 2^-8`, `|k| <= 100`, so the exact product has rank 31.
fn dependent_head() -> (
    specbound::matrix::DenseMatrix,
    specbound::matrix::DenseMatrix,
) {
    let mut rng = common::Rng(7);
    let mut draw = |n: usize| -> Vec<f64> {
        (0..n)
            .map(|_| (rng.below(201) as f64 - 100.0) * 2f64.powi(-8))
            .collect()
    };
    let mut b = draw(384 * 32);
    for i in 0..384 {
        b[i * 32 + 5] = b[i * 32 + 3] + b[i * 32 + 4];
    }
    let c = draw(32 * 384);
    (
        specbound::matrix::DenseMatrix {
            rows: 384,
            cols: 32,
            data: b,
        },
        specbound::matrix::DenseMatrix {
            rows: 32,
            cols: 384,
            data: c,
        },
    )
}

/// Issue 33: a head whose value factor has dependent columns but no zero
/// row (rank 31 of 32) kept its `V_tilde` rank `[31, 32]`: structure (L14)
/// only knows the head dimension. Exact null vectors of the factor (L30,
/// L37 e) decide it `[31, 31]` at every precision.
#[test]
fn dependent_head_factor_rank_was_undecided() {
    use specbound::linalg::{factored::certify_factored, Precision, SvdOptions};
    let (b, c) = dependent_head();
    for p in [Precision::F64, Precision::Extended, Precision::Auto] {
        let o = SvdOptions {
            precision: p,
            ..SvdOptions::default()
        };
        let sv = certify_factored(&b, &c, &o).unwrap_or_else(|e| panic!("{p:?}: {}", e.reason));
        assert_eq!(rank_of(&sv), (31, 31), "{p:?}: {:?}", sv.notes);
        // Undecided before the factors' null vectors (they say so).
        assert!(
            sv.notes.iter().any(|n| n.starts_with("exact factor rank")),
            "{p:?}: {:?}",
            sv.notes
        );
        assert!(
            !sv.notes.iter().any(|n| says_rank_undecided(n)),
            "{p:?}: {:?}",
            sv.notes
        );
    }
}

/// Whether a note says the rank is undecided: `auto`'s note of what its
/// stages left open, or the exact kernel's.
fn says_rank_undecided(n: &str) -> bool {
    n.starts_with("after every stage run: the rank undecided")
        || n.starts_with("exact kernel certificate not attempted for the undecided rank")
}

/// Regression: the dense route of a head (`extended`, `mpfr:BITS`, and
/// `auto` where it climbs) kept the notes its stages wrote before the
/// values past the head dimension were set to exact zeros (L14): "after
/// every stage run: the rank undecided" and "exact kernel certificate not
/// attempted for the undecided rank", on ranks the zeros decided (every
/// head of MiniLM at `--precision extended`). A 160 x 8 times 8 x 150
/// product (beyond the exact kernel's limits), entries `k 2^-8`.
#[test]
fn dense_route_of_a_head_said_its_decided_rank_was_undecided() {
    use specbound::linalg::{factored::certify_factored, Precision, SvdOptions};
    use specbound::matrix::DenseMatrix;
    let mut rng = common::Rng(29);
    let mut draw = |rows: usize, cols: usize| DenseMatrix {
        rows,
        cols,
        data: (0..rows * cols)
            .map(|_| (rng.below(201) as f64 - 100.0) * 2f64.powi(-8))
            .collect(),
    };
    let (b, c) = (draw(160, 8), draw(8, 150));
    let climbing = SvdOptions {
        rtol: 1e-300,
        ..SvdOptions::default()
    };
    let extended = SvdOptions {
        precision: Precision::Extended,
        ..SvdOptions::default()
    };
    for o in [extended, climbing] {
        let sv = certify_factored(&b, &c, &o).unwrap_or_else(|e| panic!("{e}"));
        let p = o.precision;
        assert_eq!(rank_of(&sv), (8, 8), "{p:?}: {:?}", sv.notes);
        assert!(
            !sv.notes.iter().any(|n| says_rank_undecided(n)),
            "{p:?}: {:?}",
            sv.notes
        );
    }
}
