//! The main job's build (the README's first command, `cargo run --release
//! -- certify`) compiles no crate that the engine never runs: nalgebra and
//! what it brings (simba, wide, matrixmultiply) come only with the
//! `nalgebra` feature, which the tests turn on through the dev-dependency
//! on this package. Asked of cargo itself (`cargo tree`, offline, on this
//! repository's Cargo.lock), so a dependency made non-optional again fails
//! here rather than as a slower first run nobody times.

mod common;

use std::process::Command;

/// The normal (non-dev) dependencies of the binary with the given
/// features, one crate name per entry, from `cargo tree`.
fn normal_dependencies(features: &[&str]) -> Vec<String> {
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(common::root()).args([
        "tree",
        "--offline",
        "--locked",
        "--package",
        "specbound",
        "--edges",
        "normal",
        "--prefix",
        "none",
        "--format",
        "{p}",
    ]);
    if !features.is_empty() {
        cmd.args(["--features", &features.join(",")]);
    }
    let out = cmd.output().expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("cargo tree prints UTF-8")
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

#[test]
fn the_main_jobs_build_has_no_nalgebra_and_the_feature_brings_it() {
    const NEVER_RUN: [&str; 4] = ["nalgebra", "simba", "wide", "matrixmultiply"];
    let default = normal_dependencies(&[]);
    assert!(
        default.iter().any(|c| c == "faer"),
        "the engine's faer is a dependency"
    );
    for name in NEVER_RUN {
        assert!(
            !default.iter().any(|c| c == name),
            "the default build compiles {name}, which the engine never runs"
        );
    }
    let with_feature = normal_dependencies(&["nalgebra"]);
    assert!(
        with_feature.iter().any(|c| c == "nalgebra"),
        "the `nalgebra` feature brings nalgebra"
    );
}
