//! What a person at a terminal sees: the progress bar on stderr when it is
//! a pseudo-terminal (and nothing with --quiet or when stderr is a pipe),
//! shell completions and the man page.

mod common;

use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};

/// Runs the binary with stderr on a new pseudo-terminal (120 columns) and
/// stdout on a pipe; returns (exit code, stdout, everything written to the
/// terminal).
fn run_on_pty(args: &[&str]) -> (Option<i32>, String, String) {
    let (mut master, mut slave) = (0, 0);
    let ws = libc::winsize {
        ws_row: 40,
        ws_col: 120,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: out-pointers to two ints; null name and termios; a valid winsize.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &ws,
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: openpty returned two fresh descriptors that we now own.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let child = Command::new(env!("CARGO_BIN_EXE_specbound"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(slave))
        .spawn()
        .unwrap();
    // The parent's copy of the slave moved into the child's Stdio and was
    // closed at spawn: the master reads until the child's side closes.
    let reader = std::thread::spawn(move || {
        let mut f = std::fs::File::from(master);
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            match f.read(&mut chunk) {
                Ok(0) | Err(_) => break, // EIO once the slave is closed
                Ok(k) => buf.extend_from_slice(&chunk[..k]),
            }
        }
        String::from_utf8_lossy(&buf).into_owned()
    });
    let out = child.wait_with_output().unwrap();
    let tty = reader.join().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        tty,
    )
}

#[test]
fn certify_draws_a_progress_bar_on_a_terminal_only() {
    let (code, stdout, tty) = run_on_pty(&["certify"]);
    assert_eq!(code, Some(0), "{tty}");
    // The bar: label, a bar of '=' and '>', matrices done of the total,
    // elapsed time, an estimate of the time left, and the last matrix.
    assert!(tty.contains("certify ["), "{tty:?}");
    assert!(tty.contains("/156 matrices"), "{tty:?}");
    assert!(tty.contains("elapsed, ETA"), "{tty:?}");
    assert!(tty.contains("layer "), "{tty:?}");
    // It is cleared at the end (an erase-line sequence), and the summary
    // goes to stdout untouched.
    assert!(tty.contains("\x1b["), "{tty:?}");
    assert!(stdout.contains("B_ours"), "{stdout}");
    assert!(!stdout.contains("matrices,"), "{stdout}");
    // --quiet: nothing on the terminal.
    let (code, _, tty) = run_on_pty(&["certify", "--quiet"]);
    assert_eq!(code, Some(0));
    assert!(!tty.contains("matrices"), "{tty:?}");
    // stderr a pipe: nothing either.
    let out = common::run(&["certify"]);
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn verify_and_svd_report_progress_on_a_terminal() {
    let d = common::process_scratch().join("term");
    std::fs::create_dir_all(&d).unwrap();
    let cert = d.join("c.json");
    let bundle = common::root().join("data/all-MiniLM-L6-v2");
    let bs = bundle.to_str().unwrap();
    assert!(
        common::run(&["certify", bs, "--out", cert.to_str().unwrap()])
            .status
            .success()
    );
    let (code, _, tty) = run_on_pty(&["verify", cert.to_str().unwrap(), "--model", bs]);
    assert_eq!(code, Some(0), "{tty}");
    assert!(
        tty.contains("verify [") && tty.contains("/156 matrices"),
        "{tty:?}"
    );
    // One large matrix: a spinner with what runs and the elapsed time.
    let (code, _, tty) = run_on_pty(&[
        "svd",
        bs,
        "--tensor",
        "encoder.layer.0.intermediate.dense.weight",
        "--precision",
        "extended",
    ]);
    assert_eq!(code, Some(0), "{tty}");
    assert!(
        tty.contains("svd") && tty.contains("certifying all singular values of 1536 x 384"),
        "{tty:?}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn completions_and_man_page_come_from_the_clap_definitions() {
    let out = common::run(&["completions", "bash"]);
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        s.contains("_specbound()") && s.contains("certify") && s.contains("--rtol"),
        "{s}"
    );
    let out = common::run(&["completions", "zsh"]);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("#compdef specbound"));
    let out = common::run(&["completions", "fish"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("complete -c specbound"));
    common::assert_bad(&["completions", "tcsh"], &["tcsh"]);
    let out = common::run(&["man"]);
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(s.starts_with(".ie") || s.starts_with(".TH"), "{s}");
    assert!(s.contains(".TH specbound 1"), "{s}");
    for sub in [
        "SVD",
        "CERTIFY",
        "INSPECT",
        "VERIFY",
        "AUDIT",
        "DIFF",
        "COMPLETIONS",
        "MAN",
    ] {
        assert!(s.contains(&format!(".SH \"SPECBOUND {sub}\"")), "{sub}");
    }
    assert!(
        s.contains("\\-\\-rounding\\-units"),
        "audit options are in the page"
    );
    // Regression (issue 17): the page refers to no page that does not
    // exist (there is one page), and it lists the exit codes.
    assert!(!s.contains("specbound\\-svd(1)"), "{s}");
    assert!(!s.contains("(1)"), "{s}");
    assert!(s.contains("Exit codes"), "{s}");
}

#[test]
fn study_draws_its_progress_bar_and_model_lines_on_a_terminal_only() {
    let dir = common::process_scratch().join("terminal-study");
    let _ = std::fs::remove_dir_all(&dir);
    let out = dir.join("out");
    let out_s = out.to_str().expect("utf-8 path");
    let model = common::root().join("data/all-MiniLM-L6-v2");
    let model_s = model.to_str().expect("utf-8 path");
    let (code, _, tty) = run_on_pty(&["study", model_s, "--out", out_s]);
    assert_eq!(code, Some(0), "{tty}");
    // The bar counts the model's matrices; the finished model's line is
    // printed above it.
    assert!(tty.contains("study ["), "{tty:?}");
    assert!(tty.contains("/156 matrices"), "{tty:?}");
    assert!(tty.contains("study: [1/1]"), "{tty:?}");
    // --quiet: nothing on the terminal (the second run reuses the certificate).
    let (code, _, tty) = run_on_pty(&["study", model_s, "--out", out_s, "--quiet"]);
    assert_eq!(code, Some(0), "{tty}");
    assert!(
        !tty.contains("matrices") && !tty.contains("study: ["),
        "{tty:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
