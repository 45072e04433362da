//! Tightness of ranks decided exactly (kept apart from soundness): a
//! pruned head's `V_tilde` (structural zeros of its factors, L14 e) has its
//! rank decided, and the bound is as tight as the unpruned model's.

mod common;

use serde_json::Value;
use std::path::{Path, PathBuf};

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("specbound-tr-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

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

/// Issue 33: where a rank stays undecided (here rows 5..31 of head 0's
/// value weight are copies of row 0: the exact rank is 5, but no factor
/// has a zero row or column), the summary names the matrix, its rank
/// interval and the relative radius of `B_ours` it leaves.
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
                let first = bytes[..row].to_vec();
                for i in 5..32 {
                    bytes[i * row..(i + 1) * row].copy_from_slice(&first);
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
