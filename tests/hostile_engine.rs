//! Hostile inputs and conditions of the engine (`svd`, the decimal parser,
//! method selection), table-driven: each case is named after the failure it
//! pins, builds its input as real files in a temporary directory, runs the
//! real binary, and states the expected exit code, a message (stderr for
//! errors, stdout otherwise) and, where needed, a check of the JSON.
//! Soundness of the rescaled paths is tested exactly in `soundness.rs`,
//! their tightness in `tightness.rs`.

mod common;

use common::tmpdir;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{bin, write_safetensors};
use specbound::io::write_npy_f64;
use specbound::matrix::DenseMatrix;

/// `[[3,0,0],[0,4,0],[0,0,0],[0,0,1]] * 2^k`: singular values 4, 3, 1 times `2^k`.
fn small_scaled(k: i32) -> DenseMatrix {
    let s = common::pow2(k);
    let base = [3.0, 0.0, 0.0, 0.0, 4.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0];
    DenseMatrix {
        rows: 4,
        cols: 3,
        data: base.iter().map(|x| x * s).collect(),
    }
}

/// tridiag(-1, 2, -1) of order n.
fn tridiag(n: usize) -> DenseMatrix {
    let mut data = vec![0.0; n * n];
    for i in 0..n {
        data[i * n + i] = 2.0;
        if i + 1 < n {
            data[i * n + i + 1] = -1.0;
            data[(i + 1) * n + i] = -1.0;
        }
    }
    DenseMatrix {
        rows: n,
        cols: n,
        data,
    }
}

fn npy(dir: &Path, name: &str, m: &DenseMatrix) -> String {
    let p = dir.join(name);
    write_npy_f64(&p, m).unwrap();
    p.to_str().unwrap().to_string()
}

/// A one-tensor safetensors file `w` (3 x 2, singular values 4 and 3).
fn model(dir: &Path) -> String {
    let p = dir.join("w.safetensors");
    let m = DenseMatrix {
        rows: 3,
        cols: 2,
        data: vec![3.0, 0.0, 0.0, 4.0, 0.0, 0.0],
    };
    write_safetensors(&p, &[("w".to_string(), &m)], "F64");
    p.to_str().unwrap().to_string()
}

fn claims(dir: &Path, body: &str) -> String {
    let p = dir.join("claims.csv");
    std::fs::write(&p, format!("tensor,quantity,p,value\n{body}\n")).unwrap();
    p.to_str().unwrap().to_string()
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON object")
}

fn notes(out: &Output) -> Vec<String> {
    json(out)["notes"]
        .as_array()
        .expect("notes array")
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

struct Case {
    /// Named after the failure it pins.
    name: &'static str,
    /// Builds the input files in the directory and returns the arguments.
    args: fn(&Path) -> Vec<String>,
    /// Expected exit code.
    code: i32,
    /// Expected substring of stderr (code 2) or stdout (otherwise).
    message: &'static str,
    /// Further checks of the output.
    check: fn(&Output),
    /// Wall-clock limit (the run is killed and the case fails beyond it).
    limit_s: u64,
}

fn no_check(_: &Output) {}

/// Runs the binary, killing it after `limit`; `Err` names the run that was killed.
fn run_limited(args: &[String], limit: Duration) -> Result<(Output, Duration), String> {
    let t = Instant::now();
    let mut child = bin()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary starts");
    // Drain the pipes on threads so a large output cannot block the child.
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let ho = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut so, &mut v).unwrap();
        v
    });
    let he = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut se, &mut v).unwrap();
        v
    });
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{args:?} ran past {limit:?} and was killed"));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = Output {
        status,
        stdout: ho.join().unwrap(),
        stderr: he.join().unwrap(),
    };
    Ok((out, t.elapsed()))
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "schatten_p_exponent_1e999999999_is_a_prompt_error",
            args: |d| {
                let f = npy(d, "a.npy", &small_scaled(0));
                s(&["svd", &f, "--schatten-p", "1e999999999"])
            },
            code: 2,
            message: "exponent of '1e999999999' is out of range",
            check: no_check,
            limit_s: 10,
        },
        Case {
            name: "l_phi_exponent_1e999999999_is_a_prompt_error",
            args: |d| {
                let f = model(d);
                s(&["certify", &f, "--heads", "1", "--l-phi", "1e999999999"])
            },
            code: 2,
            message: "L_phi",
            check: no_check,
            limit_s: 10,
        },
        Case {
            name: "audit_claim_p_exponent_1e999999999_is_a_prompt_error",
            args: |d| {
                let f = model(d);
                let c = claims(d, "w,schatten,1e999999999,1");
                s(&["audit", &f, &c])
            },
            code: 2,
            message: "exponent of '1e999999999' is out of range",
            check: no_check,
            limit_s: 10,
        },
        Case {
            name: "schatten_p_with_more_than_4096_digits_is_refused",
            args: |d| {
                let f = npy(d, "a.npy", &small_scaled(0));
                s(&["svd", &f, "--schatten-p", &"1".repeat(5000)])
            },
            code: 2,
            message: "more than 4096 digits",
            check: no_check,
            limit_s: 10,
        },
        Case {
            name: "negative_schatten_p_is_refused",
            args: |d| {
                let f = npy(d, "a.npy", &small_scaled(0));
                s(&["svd", &f, "--schatten-p=-0.5"])
            },
            code: 2,
            message: "must be a number >= 0",
            check: no_check,
            limit_s: 10,
        },
        Case {
            name: "matrix_with_singular_values_up_to_2_pow_1010_is_not_refused_as_overflowed",
            args: |d| {
                let f = npy(d, "huge.npy", &small_scaled(1010));
                s(&["svd", &f, "--json"])
            },
            code: 0,
            message: "\"frobenius_norm\"",
            check: |out| {
                let j = json(out);
                for k in ["frobenius_norm", "norm_21", "norm_11", "stable_rank"] {
                    assert!(j[k]["lo"].as_f64().unwrap() > 0.0, "{k}: {}", j[k]);
                }
            },
            limit_s: 60,
        },
        Case {
            name: "tiny_matrix_frobenius_norm_is_not_0_to_2e_162",
            args: |d| {
                let f = npy(d, "tiny.npy", &small_scaled(-540));
                s(&["svd", &f, "--json"])
            },
            code: 0,
            message: "\"frobenius_norm\"",
            check: |out| {
                let j = json(out);
                let (lo, hi) = (
                    j["frobenius_norm"]["lo"].as_f64().unwrap(),
                    j["frobenius_norm"]["hi"].as_f64().unwrap(),
                );
                assert!(lo > 0.0 && hi < lo * (1.0 + 1e-14), "[{lo:e}, {hi:e}]");
            },
            limit_s: 60,
        },
        Case {
            name: "tiny_matrix_stable_rank_is_not_null_with_the_wrong_reason",
            args: |d| {
                let f = npy(d, "tiny.npy", &small_scaled(-540));
                s(&["svd", &f])
            },
            code: 0,
            message: "stable rank     1.6",
            check: |out| {
                assert!(!String::from_utf8_lossy(&out.stdout).contains("inconclusive"));
            },
            limit_s: 60,
        },
        Case {
            name: "schatten_norm_for_p_5000_is_not_null",
            args: |d| {
                let m = DenseMatrix {
                    rows: 2,
                    cols: 2,
                    data: vec![1.5, 0.0, 0.0, 1.0],
                };
                let f = npy(d, "a.npy", &m);
                s(&["svd", &f, "--json", "--schatten-p", "5000"])
            },
            code: 0,
            message: "\"p\":5000",
            check: |out| {
                let n = &json(out)["schatten"][0]["norm"];
                // The exact norm (1.5^5000 + 1)^(1/5000) lies just above 1.5.
                assert!(n["lo"].as_f64().unwrap() <= 1.5 + 1e-12, "{n}");
                assert!(n["hi"].as_f64().unwrap() >= 1.5, "{n}");
            },
            limit_s: 60,
        },
        Case {
            name: "schatten_p_1e_minus_400_is_written_as_given_not_as_0",
            args: |d| {
                let m = DenseMatrix {
                    rows: 2,
                    cols: 2,
                    data: vec![1.5, 0.0, 0.0, 1.0],
                };
                let f = npy(d, "a.npy", &m);
                s(&["svd", &f, "--json", "--schatten-p", "1e-400,0,.5"])
            },
            code: 0,
            message: "\"p\":1e-400,",
            check: |out| {
                let text = String::from_utf8_lossy(&out.stdout);
                assert!(text.contains("\"p\":0,") && text.contains("\"p\":0.5,"));
                let sc = &json(out)["schatten"];
                // sum sigma^p at p = 1e-400 is 1.5^p + 1, just above 2, not the
                // rank itself (exactly 2); with sigma exact (the two-column
                // closed form, L32) the lower end may be 2 itself.
                let pw = &sc[0]["power"];
                assert!(pw["lo"].as_f64().unwrap() <= 2.0 && 2.0 < pw["hi"].as_f64().unwrap());
                // 2^(1e400) overflows binary64 and MPFR: still an interval,
                // [lo, +inf) with a finite lo, written "hi": null.
                let nm = &sc[0]["norm"];
                assert!(nm["hi"].is_null() && nm["lo"].as_f64().is_some(), "{nm}");
                assert_eq!(sc[1]["power"]["lo"], 2.0);
                assert_eq!(sc[1]["power"]["hi"], 2.0);
            },
            limit_s: 60,
        },
        Case {
            name: "audit_claim_at_p_1e_minus_400_is_not_refused_as_negative",
            args: |d| {
                let f = model(d);
                let c = claims(d, "w,schatten_power,1e-400,2");
                s(&["audit", &f, &c])
            },
            code: 0,
            message: "1 consistent",
            check: no_check,
            limit_s: 60,
        },
        Case {
            name: "failed_extended_stage_is_not_silently_replaced_by_f64",
            args: |d| {
                // Rows spanning 2^975 defeat the Ozaki slicing; f64 still certifies.
                let m = DenseMatrix {
                    rows: 4,
                    cols: 3,
                    data: vec![
                        1.0,
                        0.0,
                        0.0,
                        0.0,
                        0.5,
                        0.0,
                        0.0,
                        0.0,
                        common::pow2(-975),
                        0.0,
                        0.0,
                        0.0,
                    ],
                };
                let f = npy(d, "a.npy", &m);
                s(&["svd", &f, "--json", "--precision", "extended"])
            },
            code: 0,
            message: "extended stage inconclusive",
            check: |out| {
                let n = notes(out);
                assert!(n
                    .iter()
                    .any(|x| x.contains("values are those of the f64 stage")));
                for v in json(out)["singular_values"].as_array().unwrap() {
                    assert_eq!(v["method"], "f64-residual");
                }
            },
            limit_s: 60,
        },
        Case {
            name: "failed_extended_stage_is_reported_in_the_table",
            args: |d| {
                let m = DenseMatrix {
                    rows: 4,
                    cols: 3,
                    data: vec![
                        1.0,
                        0.0,
                        0.0,
                        0.0,
                        0.5,
                        0.0,
                        0.0,
                        0.0,
                        common::pow2(-975),
                        0.0,
                        0.0,
                        0.0,
                    ],
                };
                let f = npy(d, "a.npy", &m);
                s(&["svd", &f, "--precision", "extended"])
            },
            code: 0,
            message: "note: extended stage inconclusive",
            check: no_check,
            limit_s: 60,
        },
        Case {
            name: "auto_above_the_mpfr_limit_says_which_target_it_missed",
            args: |d| {
                let f = npy(d, "t.npy", &tridiag(160));
                s(&["svd", &f, "--json", "--rtol", "1e-20"])
            },
            code: 0,
            message: "auto target not met",
            check: |out| {
                let n = notes(out);
                assert!(n.iter().any(|x| x.contains("MPFR stage not run")), "{n:?}");
                assert!(n.iter().any(|x| x.contains("rtol 1e-20")), "{n:?}");
            },
            limit_s: 120,
        },
        Case {
            name: "auto_short_of_its_target_after_mpfr_says_so",
            args: |d| {
                let f = npy(d, "t.npy", &tridiag(8));
                s(&["svd", &f, "--json", "--rtol", "1e-80"])
            },
            code: 0,
            message: "auto target not met",
            check: |out| {
                let j = json(out);
                assert!(j["singular_values"][0]["method"]
                    .as_str()
                    .unwrap()
                    .starts_with("mpfr-"));
            },
            limit_s: 120,
        },
        Case {
            name: "auto_that_meets_its_target_has_no_notes",
            args: |d| {
                let f = npy(d, "t.npy", &tridiag(8));
                s(&["svd", &f, "--json"])
            },
            code: 0,
            message: "\"notes\":[]",
            check: no_check,
            limit_s: 60,
        },
        Case {
            name: "mpfr_stage_on_a_tall_matrix_does_not_refine_an_m_by_m_u",
            args: |d| {
                // 4096 x 2: a completed U would be 4096 x 4096 MPFR numbers and
                // 7e10 operations per refinement step; thin factors need 3e4.
                let m = 4096;
                let data = (0..m)
                    .flat_map(|i| [((i % 7) as f64) - 3.0, ((i * 3 % 5) as f64) + 1.0])
                    .collect();
                let f = npy(
                    d,
                    "tall.npy",
                    &DenseMatrix {
                        rows: m,
                        cols: 2,
                        data,
                    },
                );
                s(&["svd", &f, "--json", "--precision", "mpfr:128"])
            },
            code: 0,
            message: "\"method\":\"mpfr-128\"",
            check: no_check,
            limit_s: 60,
        },
    ]
}

#[test]
fn every_engine_case_gives_the_expected_exit_code_and_message() {
    let mut failures = Vec::new();
    for c in cases() {
        let dir = tmpdir(c.name);
        let args = (c.args)(&dir);
        let (out, took) = match run_limited(&args, Duration::from_secs(c.limit_s)) {
            Ok(r) => r,
            Err(why) => {
                failures.push(format!("{}: {why}", c.name));
                continue;
            }
        };
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let code = out.status.code();
        let ok = code == Some(c.code)
            && !err.contains("panicked")
            && if c.code == 2 {
                err.trim_end().lines().count() == 1 && err.contains(c.message)
            } else {
                stdout.contains(c.message)
            };
        if !ok {
            failures.push(format!(
                "{}: exit {code:?} (expected {}), {took:?}\nstderr: {err}\nstdout: {}",
                c.name,
                c.code,
                stdout.chars().take(2000).collect::<String>()
            ));
            continue;
        }
        let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (c.check)(&out)));
        if let Err(e) = checked {
            let why = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|x| x.to_string()))
                .unwrap_or_default();
            failures.push(format!("{}: check failed: {why}", c.name));
            continue;
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn verify_refuses_a_certificate_l_phi_beyond_the_decimal_limits() {
    // A real certificate of the bundled model with its l_phi replaced.
    let dir = tmpdir("verify-l-phi");
    let cert = dir.join("c.json");
    let out = Command::new(env!("CARGO_BIN_EXE_specbound"))
        .args(["certify", "--out", cert.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cert).unwrap()).unwrap();
    c["parameters"]["l_phi"] = serde_json::Value::String("1e999999999".into());
    std::fs::write(&cert, serde_json::to_string(&c).unwrap()).unwrap();
    let (out, _) = run_limited(
        &s(&["verify", cert.to_str().unwrap()]),
        Duration::from_secs(10),
    )
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("l_phi"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
