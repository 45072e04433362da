//! Hostile output targets: every case runs the real binary on the bundled
//! model inside its own temporary directory and compares the exact set of
//! files (with their kinds) before and after. A failed run must leave no new
//! file, and no existing target may be touched; a successful one must leave
//! exactly its outputs and no temporary file.

mod common;

use common::tmpdir;

use std::os::unix::fs::{symlink, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const TABLES: [&str; 4] = [
    "matrix_summary.csv",
    "observed_bounds.csv",
    "p_contribution_raw.csv",
    "schatten_opt.csv",
];

struct Case {
    /// Named after the failure it pins.
    name: &'static str,
    /// Why the case cannot run here, if it cannot.
    requires: fn() -> Option<&'static str>,
    /// Builds the input in the case directory.
    setup: fn(&Path),
    /// Shell run by the process that then `exec`s the binary (so `$$` is
    /// the binary's pid); empty for none.
    plant: &'static str,
    args: &'static [&'static str],
    /// Run as an unprivileged user (uid/gid 65534) when the tests run as
    /// root, so that directory permissions apply.
    unprivileged: bool,
    code: i32,
    /// A substring of the one-line error ("" for a successful run).
    message: &'static str,
    /// The exact listing after the run: `name/` a directory, `name|` a
    /// FIFO, `name (char device)`, `name -> target` a symbolic link, plain
    /// `name` a regular file;
    /// `{pid}` stands for the binary's process id. `None`: same as before.
    after: Option<&'static [&'static str]>,
    /// Further checks on the directory after the run.
    check: fn(&Path),
}

fn nothing(_: &Path) {}

fn anywhere() -> Option<&'static str> {
    None
}

fn listing(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, rel: &Path, out: &mut Vec<String>) {
        let mut entries: Vec<_> = std::fs::read_dir(base.join(rel))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        entries.sort();
        for n in entries {
            let r = rel.join(&n);
            let p = base.join(&r);
            let ft = std::fs::symlink_metadata(&p).unwrap().file_type();
            let shown = r.display().to_string();
            use std::os::unix::fs::FileTypeExt;
            if ft.is_symlink() {
                out.push(format!(
                    "{shown} -> {}",
                    std::fs::read_link(&p).unwrap().display()
                ));
            } else if ft.is_dir() {
                out.push(format!("{shown}/"));
                walk(base, &r, out);
            } else if ft.is_fifo() {
                out.push(format!("{shown}|"));
            } else if ft.is_char_device() {
                out.push(format!("{shown} (char device)"));
            } else {
                out.push(shown);
            }
        }
    }
    let mut v = Vec::new();
    walk(dir, Path::new(""), &mut v);
    v
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn mkfifo(p: &Path) {
    let st = Command::new("mkfifo").arg(p).status().unwrap();
    assert!(st.success());
}

fn is_certificate(p: &Path) {
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
    assert!(
        v.get("bounds").is_some(),
        "{} is not a certificate",
        p.display()
    );
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "csv_then_missing_out_dir_left_four_tables",
            requires: anywhere,
            setup: nothing,
            plant: "",
            args: &["--csv", "D", "--out", "missing/x.json"],
            unprivileged: false,
            code: 2,
            message: "missing/x.json: cannot write: directory missing does not exist",
            after: None,
            check: nothing,
        },
        Case {
            name: "out_fifo_replaced_by_regular_file",
            requires: anywhere,
            setup: |d| mkfifo(&d.join("f")),
            plant: "",
            args: &["--out", "f"],
            unprivileged: false,
            code: 2,
            message: "f: is a FIFO, not a regular file; refusing to replace it",
            after: None,
            check: nothing,
        },
        Case {
            // A node of the null device (1, 3) made in the temporary
            // directory, never a real /dev entry.
            name: "out_device_node_replaced_by_regular_file",
            requires: || (!is_root()).then_some("mknod needs root"),
            setup: |d| {
                let st = Command::new("mknod")
                    .arg(d.join("nul"))
                    .args(["c", "1", "3"])
                    .status()
                    .unwrap();
                assert!(st.success(), "mknod");
            },
            plant: "",
            args: &["--csv", "D", "--out", "nul"],
            unprivileged: false,
            code: 2,
            message: "nul: is a character device, not a regular file; refusing to replace it",
            after: None,
            check: |d| {
                use std::os::unix::fs::FileTypeExt;
                let ft = std::fs::symlink_metadata(d.join("nul"))
                    .unwrap()
                    .file_type();
                assert!(ft.is_char_device());
            },
        },
        Case {
            name: "out_directory_half_written",
            requires: anywhere,
            setup: |d| std::fs::create_dir(d.join("dir")).unwrap(),
            plant: "",
            args: &["--csv", "D", "--out", "dir"],
            unprivileged: false,
            code: 2,
            message: "dir: is a directory, not a regular file",
            after: None,
            check: nothing,
        },
        Case {
            name: "out_symlink_to_dev_null_replaced_by_regular_file",
            requires: anywhere,
            setup: |d| symlink("/dev/null", d.join("n")).unwrap(),
            plant: "",
            args: &["--out", "n"],
            unprivileged: false,
            code: 2,
            message: "n: is a symbolic link to a character device, not a regular file",
            after: None,
            check: nothing,
        },
        Case {
            name: "out_dangling_symlink_followed",
            requires: anywhere,
            setup: |d| symlink("nowhere/x.json", d.join("l")).unwrap(),
            plant: "",
            args: &["--out", "l"],
            unprivileged: false,
            code: 2,
            message: "l: is a symbolic link that does not resolve",
            after: None,
            check: nothing,
        },
        Case {
            name: "csv_dir_is_a_regular_file",
            requires: anywhere,
            setup: |d| std::fs::write(d.join("F"), "keep").unwrap(),
            plant: "",
            args: &["--csv", "F", "--out", "x.json"],
            unprivileged: false,
            code: 2,
            message: "F: exists and is not a directory",
            after: None,
            check: |d| assert_eq!(std::fs::read(d.join("F")).unwrap(), b"keep"),
        },
        Case {
            name: "out_is_one_of_the_csv_tables",
            requires: anywhere,
            setup: nothing,
            plant: "",
            args: &["--csv", "D", "--out", "D/matrix_summary.csv"],
            unprivileged: false,
            code: 2,
            message: "D/matrix_summary.csv: the same file is written twice",
            after: None,
            check: nothing,
        },
        Case {
            name: "out_with_trailing_slash_written_as_file",
            requires: anywhere,
            setup: nothing,
            plant: "",
            args: &["--out", "x.json/"],
            unprivileged: false,
            code: 2,
            message: "x.json/: does not name a file",
            after: None,
            check: nothing,
        },
        Case {
            // The old temporary name was `.x.json.tmp-<pid>`, opened with
            // O_CREAT|O_TRUNC: a link planted there received the certificate
            // and was renamed to x.json.
            name: "planted_symlink_at_temporary_name_redirected_write",
            requires: anywhere,
            setup: |d| std::fs::write(d.join("victim"), "precious").unwrap(),
            plant: "ln -s victim .x.json.tmp-$$",
            args: &["--out", "x.json"],
            unprivileged: false,
            code: 0,
            message: "",
            after: Some(&[".x.json.tmp-{pid} -> victim", "victim", "x.json"]),
            check: |d| {
                assert_eq!(std::fs::read(d.join("victim")).unwrap(), b"precious");
                is_certificate(&d.join("x.json"));
            },
        },
        Case {
            // Permission checks do not apply to root: as root the binary runs
            // as uid/gid 65534. The new CSV directory must be removed again.
            name: "unwritable_out_directory_left_csv_tables",
            requires: anywhere,
            setup: |d| {
                std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
                std::fs::create_dir(d.join("ro")).unwrap();
                std::fs::set_permissions(d.join("ro"), std::fs::Permissions::from_mode(0o555))
                    .unwrap();
            },
            plant: "",
            args: &["--csv", "D", "--out", "ro/x.json"],
            unprivileged: true,
            code: 2,
            message: "ro/x.json: cannot create a temporary file beside it: Permission denied",
            after: None,
            check: nothing,
        },
        Case {
            name: "replacing_existing_certificate_lost_its_mode",
            requires: anywhere,
            setup: |d| {
                std::fs::write(d.join("x.json"), "old").unwrap();
                std::fs::set_permissions(d.join("x.json"), std::fs::Permissions::from_mode(0o640))
                    .unwrap();
                std::fs::create_dir(d.join("D")).unwrap();
                std::fs::write(d.join("D/matrix_summary.csv"), "old").unwrap();
            },
            plant: "",
            args: &["--csv", "D", "--out", "x.json"],
            unprivileged: false,
            code: 0,
            message: "",
            after: Some(&[
                "D/",
                "D/matrix_summary.csv",
                "D/observed_bounds.csv",
                "D/p_contribution_raw.csv",
                "D/schatten_opt.csv",
                "x.json",
            ]),
            check: |d| {
                is_certificate(&d.join("x.json"));
                assert_eq!(mode(&d.join("x.json")), 0o640);
                for t in TABLES {
                    let text = std::fs::read_to_string(d.join("D").join(t)).unwrap();
                    assert!(text.lines().count() > 1, "{t}: {text}");
                }
            },
        },
        Case {
            name: "new_csv_dir_holding_the_certificate",
            requires: anywhere,
            setup: nothing,
            plant: "",
            args: &["--csv", "D/E", "--out", "D/E/x.json"],
            unprivileged: false,
            code: 0,
            message: "",
            after: Some(&[
                "D/",
                "D/E/",
                "D/E/matrix_summary.csv",
                "D/E/observed_bounds.csv",
                "D/E/p_contribution_raw.csv",
                "D/E/schatten_opt.csv",
                "D/E/x.json",
            ]),
            check: |d| is_certificate(&d.join("D/E/x.json")),
        },
        Case {
            // A link to a regular file is written through: the file it names
            // is replaced (keeping its mode), the link is kept.
            name: "symlink_to_regular_file_replaced_by_file",
            requires: anywhere,
            setup: |d| {
                std::fs::create_dir(d.join("real")).unwrap();
                std::fs::write(d.join("real/cert.json"), "old").unwrap();
                std::fs::set_permissions(
                    d.join("real/cert.json"),
                    std::fs::Permissions::from_mode(0o600),
                )
                .unwrap();
                symlink("real/cert.json", d.join("latest.json")).unwrap();
            },
            plant: "",
            args: &["--out", "latest.json"],
            unprivileged: false,
            code: 0,
            message: "",
            after: Some(&["latest.json -> real/cert.json", "real/", "real/cert.json"]),
            check: |d| {
                is_certificate(&d.join("real/cert.json"));
                assert_eq!(mode(&d.join("real/cert.json")), 0o600);
            },
        },
    ]
}

/// Makes every directory under `d` writable again so it can be removed.
fn unlock(d: &Path) {
    let _ = std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755));
    if let Ok(rd) = std::fs::read_dir(d) {
        for e in rd.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                unlock(&e.path());
            }
        }
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn hostile_output_targets() {
    let bin = env!("CARGO_BIN_EXE_specbound");
    let mut failures = Vec::new();
    for c in cases() {
        if let Some(why) = (c.requires)() {
            eprintln!("skipped {}: {why}", c.name);
            continue;
        }
        let d = tmpdir(c.name);
        (c.setup)(&d);
        let before = listing(&d);
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(format!("{}\nexec \"$0\" certify \"$@\"", c.plant))
            .arg(bin)
            .args(c.args)
            .current_dir(&d)
            .env_remove(specbound::io::bundle::ENV)
            .stdin(Stdio::null());
        if c.unprivileged && is_root() {
            cmd.uid(65534).gid(65534);
        }
        let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
        let child = child.unwrap();
        let pid = child.id();
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        let after = listing(&d);
        let expected: Vec<String> = match c.after {
            None => before.clone(),
            Some(l) => l
                .iter()
                .map(|s| s.replace("{pid}", &pid.to_string()))
                .collect(),
        };
        let mut problems = Vec::new();
        if out.status.code() != Some(c.code) {
            problems.push(format!("exit {:?}, expected {}", out.status.code(), c.code));
        }
        if c.code == 2 {
            if err.trim_end().lines().count() != 1 || !err.contains(c.message) {
                problems.push(format!("message '{}' expected", c.message));
            }
            if !out.stdout.is_empty() {
                problems.push("output on stdout".into());
            }
        }
        if err.contains("panicked") {
            problems.push("panic".into());
        }
        if after != expected {
            problems.push(format!("files {after:?}, expected {expected:?}"));
        }
        if problems.is_empty() {
            if let Err(e) = std::panic::catch_unwind(|| (c.check)(&d)) {
                problems.push(format!("check failed: {e:?}"));
            }
        }
        if !problems.is_empty() {
            failures.push(format!(
                "{}: {} (stderr: {err})",
                c.name,
                problems.join("; ")
            ));
        }
        unlock(&d);
        std::fs::remove_dir_all(&d).unwrap();
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// The installed-binary cases: the bundle is found from another directory
/// through `SPECBOUND_BUNDLE`, beside the executable, or (source tree still
/// present here) at the path it was built from; a wrong variable is an error.
#[test]
fn installed_binary_finds_the_bundle_or_says_where_it_looked() {
    let bundle = common::root()
        .join("data")
        .join(specbound::io::bundle::NAME);
    let d = tmpdir("installed");
    // PREFIX/bin/specbound with the bundle in PREFIX/share/specbound.
    std::fs::create_dir_all(d.join("prefix/bin")).unwrap();
    std::fs::create_dir_all(d.join("prefix/share/specbound")).unwrap();
    std::fs::copy(
        env!("CARGO_BIN_EXE_specbound"),
        d.join("prefix/bin/specbound"),
    )
    .unwrap();
    symlink(
        &bundle,
        d.join("prefix/share/specbound")
            .join(specbound::io::bundle::NAME),
    )
    .unwrap();
    let work = d.join("elsewhere");
    std::fs::create_dir(&work).unwrap();
    let installed = d.join("prefix/bin/specbound");
    let built = PathBuf::from(env!("CARGO_BIN_EXE_specbound"));
    let share = d
        .join("prefix/share/specbound")
        .join(specbound::io::bundle::NAME);
    let missing = d.join("no-such-bundle");
    // (binary, SPECBOUND_BUNDLE, expected exit, substring of the first
    // stdout line (the model path) or of the error)
    let table: Vec<(&Path, Option<&Path>, i32, String)> = vec![
        (
            &built,
            Some(&bundle),
            0,
            format!("{}: bert", bundle.display()),
        ),
        (&installed, None, 0, format!("{}: bert", share.display())),
        (&built, None, 0, format!("{}: bert", bundle.display())),
        (
            &built,
            Some(&missing),
            2,
            format!(
                "SPECBOUND_BUNDLE={}: not a directory holding config.json and model.safetensors",
                missing.display()
            ),
        ),
    ];
    for (exe, var, code, needle) in table {
        let mut cmd = Command::new(exe);
        cmd.arg("certify").current_dir(&work);
        match var {
            Some(v) => cmd.env(specbound::io::bundle::ENV, v),
            None => cmd.env_remove(specbound::io::bundle::ENV),
        };
        let out = cmd.output().unwrap();
        let text = if code == 0 {
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .to_string()
        } else {
            String::from_utf8_lossy(&out.stderr).to_string()
        };
        assert_eq!(
            out.status.code(),
            Some(code),
            "{} with {var:?}: {}",
            exe.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains(&needle),
            "{} with {var:?}: '{needle}' not in '{text}'",
            exe.display()
        );
    }
    std::fs::remove_dir_all(&d).unwrap();
}
