//! `--device` without a GPU (CI never has one): `cuda` is refused in one
//! line with exit 2 and nothing written, whichever command asks and
//! whether or not the binary was built with the `cuda` feature; `auto`
//! falls back to the CPU, says so on stderr, and certifies exactly what
//! `cpu` does (the certificate then records no device). The soundness of
//! the device route itself is tested in `soundness_device.rs`.

mod common;

use common::tmpdir;

use common::*;

fn npy() -> String {
    root()
        .join("data/minilm-l0-query.npy")
        .display()
        .to_string()
}

/// The one line `--device cuda` gets on a machine without a usable GPU.
fn assert_refused_in_one_line(out: &std::process::Output, what: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{what}: {err}");
    assert!(out.stdout.is_empty(), "{what}: stdout {:?}", out.stdout);
    assert_eq!(err.lines().count(), 1, "{what}: {err}");
    assert!(
        err.contains("--features cuda") || err.contains("--device cuda:"),
        "{what}: {err}"
    );
}

#[test]
fn device_cuda_without_a_gpu_is_one_line_exit_2_and_writes_nothing() {
    let d = tmpdir("cuda");
    let (out, csv, study) = (d.join("c.json"), d.join("csv"), d.join("study"));
    let model = root().join("data/all-MiniLM-L6-v2").display().to_string();
    let cases: Vec<(&str, Vec<String>)> = vec![
        (
            "svd",
            vec!["svd".into(), npy(), "--device".into(), "cuda".into()],
        ),
        (
            "spectra",
            vec![
                "spectra".into(),
                model.clone(),
                "--device".into(),
                "cuda".into(),
            ],
        ),
        (
            "certify",
            vec![
                "certify".into(),
                "--device".into(),
                "cuda".into(),
                "--out".into(),
                out.display().to_string(),
                "--csv".into(),
                csv.display().to_string(),
            ],
        ),
        (
            "study",
            vec![
                "study".into(),
                model.clone(),
                "--out".into(),
                study.display().to_string(),
                "--device".into(),
                "cuda".into(),
            ],
        ),
    ];
    for (what, args) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_refused_in_one_line(&run(&args), what);
    }
    assert!(
        !out.exists() && !csv.exists() && !study.exists(),
        "something was written"
    );
}

#[test]
fn device_auto_without_a_gpu_says_so_and_certifies_as_the_cpu_does() {
    let d = tmpdir("auto");
    let (cpu, auto) = (d.join("cpu.json"), d.join("auto.json"));
    let cpu_out = run(&["certify", "--device", "cpu", "--out", cpu.to_str().unwrap()]);
    assert_eq!(cpu_out.status.code(), Some(0));
    let auto_out = run(&[
        "certify",
        "--device",
        "auto",
        "--out",
        auto.to_str().unwrap(),
    ]);
    assert_eq!(auto_out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&auto_out.stderr);
    assert!(err.contains("using the CPU"), "{err}");
    let (a, b) = (std::fs::read(&cpu).unwrap(), std::fs::read(&auto).unwrap());
    assert!(a == b, "auto on the CPU wrote another certificate");
    let v: serde_json::Value = serde_json::from_slice(&a).unwrap();
    assert!(v["tool"].get("device").is_none(), "{}", v["tool"]);
}

#[test]
fn an_unknown_device_is_a_usage_error_naming_the_choices() {
    assert_bad(
        &["svd", &npy(), "--device", "tpu"],
        &["--device", "cpu, cuda, auto"],
    );
}
