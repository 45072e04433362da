//! Hostile inputs to the readers, driven through the real binary: each case
//! is named after the failure it pins, builds its input as real files in a
//! temporary directory, and states the arguments, the exit code, substrings
//! of the one-line message, and where it matters a bound on the process's
//! peak memory (from `wait4`'s resource usage of that very child) or a
//! cause that must appear exactly once.

mod common;

use common::hostile::s;

use common::formats::{model, tensor_external};
use common::hostile;
use serde_json::json;

use common::tmpdir;

use std::path::Path;
use std::time::Duration;

use specbound::matrix::DenseMatrix;

/// One hostile-input case.
struct Case {
    /// After the failure it pins.
    name: &'static str,
    /// Builds the input under the given empty directory; returns the CLI
    /// arguments (`None`: the case cannot be built on this machine).
    build: fn(&Path) -> Option<Vec<String>>,
    /// Expected exit code.
    code: i32,
    /// Substrings of the message.
    needles: &'static [&'static str],
    /// A substring that must occur exactly once (a cause not repeated).
    once: Option<&'static str>,
    /// Bound on the peak resident memory of the process (MiB).
    max_rss_mib: Option<u64>,
}

fn args(v: &[&str]) -> Option<Vec<String>> {
    Some(v.iter().map(|a| a.to_string()).collect())
}

/// A valid small safetensors file (one 4 x 4 F32 tensor `w`).
fn small_safetensors(path: &Path) {
    let m = DenseMatrix {
        rows: 4,
        cols: 4,
        data: (0..16).map(|k| k as f64).collect(),
    };
    common::write_safetensors(path, &[("w".to_string(), &m)], "F32");
}

/// Writes `pre`, `unit` repeated `k` times, then `post` to `path`, through
/// a small buffer: the test process must stay small itself, or the peak
/// memory measured for the child (which starts as a copy of this process)
/// would be this process's.
fn write_repeated(path: &Path, pre: &[&[u8]], unit: &[u8], k: usize, post: &[&[u8]]) {
    use std::io::Write;
    let mut w = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for p in pre {
        w.write_all(p).unwrap();
    }
    let per = (1 << 16) / unit.len();
    let chunk = unit.repeat(per);
    for _ in 0..k / per {
        w.write_all(&chunk).unwrap();
    }
    w.write_all(&chunk[..(k % per) * unit.len()]).unwrap();
    for p in post {
        w.write_all(p).unwrap();
    }
    w.flush().unwrap();
}

/// `n` bytes of valid JSON: an object whose `junk` array holds zeros.
fn big_json(path: &Path, n: usize) {
    let head: &[u8] = b"{\"model_type\":\"bert\",\"junk\":[0";
    let k = (n - head.len() - 2) / 2;
    write_repeated(path, &[head], b",0", k, &[b"]}"]);
}

/// A safetensors file whose header is `pre`, `unit` repeated `k` times and
/// `post`, followed by `data`.
fn st_with_header(path: &Path, pre: &str, unit: &[u8], k: usize, post: &str, data: &[u8]) {
    let n = (pre.len() + unit.len() * k + post.len()) as u64;
    write_repeated(
        path,
        &[&n.to_le_bytes(), pre.as_bytes()],
        unit,
        k,
        &[post.as_bytes(), data],
    );
}

/// This process's own peak resident memory (KiB), from /proc.
fn own_peak_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// A zip archive's first local file header, naming `entry` (enough for
/// any reader that looks at the first bytes, as ours does).
fn zip_with_first_entry(entry: &str) -> Vec<u8> {
    let mut z = b"PK\x03\x04\x14\x00\x00\x00\x00\x00\x00\x00\x00\x00".to_vec();
    z.extend_from_slice(&[0u8; 12]); // crc, sizes
    z.extend_from_slice(&(entry.len() as u16).to_le_bytes());
    z.extend_from_slice(&0u16.to_le_bytes());
    z.extend_from_slice(entry.as_bytes());
    z.extend_from_slice(b"\x80\x02}q\x00.");
    z
}

/// The start of a legacy (pre-1.6) `torch.save` file: a protocol-2 pickle
/// of PyTorch's magic number.
const LEGACY_PICKLE: &[u8] = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19.\x80\x02M\xe9\x03.";

fn mkfifo(path: &Path) -> bool {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    unsafe { libc::mkfifo(c.as_ptr(), 0o600) == 0 }
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "config_json_of_100_mb_is_refused_at_the_cap_in_bounded_memory",
            build: |d| {
                small_safetensors(&d.join("model.safetensors"));
                big_json(&d.join("config.json"), 100_000_000);
                args(&["inspect", &s(d)])
            },
            code: 2,
            needles: &["config.json", "larger than the limit of 4194304 bytes"],
            once: None,
            max_rss_mib: Some(40),
        },
        Case {
            name: "config_json_just_under_the_cap_parses_in_bounded_memory",
            build: |d| {
                small_safetensors(&d.join("model.safetensors"));
                big_json(&d.join("config.json"), (4 << 20) - 16);
                args(&["inspect", &s(d)])
            },
            // Parsed (the junk is ignored), then the tiny model is refused.
            code: 2,
            needles: &["model.safetensors"],
            once: None,
            max_rss_mib: Some(160),
        },
        Case {
            name: "config_json_fifo_is_refused_without_blocking",
            build: |d| {
                small_safetensors(&d.join("model.safetensors"));
                if !mkfifo(&d.join("config.json")) {
                    return None;
                }
                args(&["inspect", &s(d)])
            },
            code: 2,
            needles: &[
                "config.json: is a FIFO",
                "expected a config.json (a regular file)",
            ],
            once: None,
            max_rss_mib: None,
        },
        Case {
            name: "config_json_directory_is_refused_not_ignored",
            build: |d| {
                small_safetensors(&d.join("model.safetensors"));
                std::fs::create_dir(d.join("config.json")).unwrap();
                args(&["certify", &s(d)])
            },
            code: 2,
            needles: &["config.json: is a directory, expected a config.json"],
            once: Some("is a directory"),
            max_rss_mib: None,
        },
        Case {
            name: "sharded_index_with_empty_weight_map_names_the_index",
            build: |d| {
                std::fs::write(
                    d.join("model.safetensors.index.json"),
                    br#"{"metadata": {}, "weight_map": {}}"#,
                )
                .unwrap();
                args(&["certify", &s(d)])
            },
            code: 2,
            needles: &["model.safetensors.index.json: weight_map is empty"],
            once: None,
            max_rss_mib: None,
        },
        Case {
            name: "sharded_index_over_the_cap_is_refused_in_bounded_memory",
            build: |d| {
                big_json(&d.join("model.safetensors.index.json"), 40_000_000);
                args(&["inspect", &s(d)])
            },
            code: 2,
            needles: &[
                "model.safetensors.index.json",
                "larger than the limit of 33554432 bytes",
            ],
            once: None,
            max_rss_mib: Some(40),
        },
        Case {
            name: "sharded_index_with_an_empty_shard_name_names_the_tensor",
            build: |d| {
                std::fs::write(
                    d.join("model.safetensors.index.json"),
                    br#"{"weight_map": {"w": ""}}"#,
                )
                .unwrap();
                args(&["inspect", &s(d)])
            },
            code: 2,
            needles: &[
                "model.safetensors.index.json: tensor 'w'",
                "must be a plain file name",
            ],
            once: None,
            max_rss_mib: None,
        },
        Case {
            name: "truncated_pytorch_zip_bin_given_to_certify_names_the_file",
            build: |d| {
                let p = d.join("pytorch_model.bin");
                std::fs::write(&p, zip_with_first_entry("archive/data.pkl")).unwrap();
                args(&["certify", &s(&p)])
            },
            code: 2,
            needles: &["pytorch_model.bin: not a readable zip archive"],
            once: None,
            max_rss_mib: None,
        },
        Case {
            name: "truncated_pytorch_zip_bin_given_to_svd_names_the_file",
            build: |d| {
                let p = d.join("pytorch_model.bin");
                std::fs::write(&p, zip_with_first_entry("archive/data.pkl")).unwrap();
                args(&["svd", &s(&p)])
            },
            code: 2,
            needles: &["pytorch_model.bin: not a readable zip archive"],
            once: None,
            max_rss_mib: None,
        },
        Case {
            name: "truncated_pytorch_zip_given_to_inspect_names_the_file",
            build: |d| {
                let p = d.join("model.pt");
                std::fs::write(&p, zip_with_first_entry("model/data.pkl")).unwrap();
                args(&["inspect", &s(&p)])
            },
            code: 2,
            needles: &["model.pt: not a readable zip archive"],
            once: None,
            max_rss_mib: None,
        },
        Case {
            name: "pytorch_zip_named_model_safetensors_is_read_as_pytorch",
            build: |d| {
                let p = d.join("model.safetensors");
                std::fs::write(&p, zip_with_first_entry("archive/data.pkl")).unwrap();
                args(&["certify", &s(d)])
            },
            code: 2,
            needles: &["model.safetensors: not a readable zip archive"],
            once: None,
            max_rss_mib: None,
        },
        Case {
            name: "truncated_legacy_pickle_bin_names_the_file_and_the_pickle",
            build: |d| {
                let p = d.join("pytorch_model.bin");
                std::fs::write(&p, LEGACY_PICKLE).unwrap();
                args(&["certify", &s(&p)])
            },
            code: 2,
            needles: &[
                "pytorch_model.bin: legacy pickle (system info): malformed pickle: truncated",
            ],
            once: None,
            max_rss_mib: None,
        },
        Case {
            name: "truncated_legacy_pickle_given_to_svd_names_the_file",
            build: |d| {
                let p = d.join("weights.pth");
                std::fs::write(&p, LEGACY_PICKLE).unwrap();
                args(&["svd", &s(&p)])
            },
            code: 2,
            needles: &["weights.pth: legacy pickle (system info): malformed pickle"],
            once: None,
            max_rss_mib: None,
        },
        Case {
            name: "npz_given_to_svd_is_named_as_such",
            build: |d| {
                let p = d.join("arrays.npz");
                std::fs::write(&p, zip_with_first_entry("w.npy")).unwrap();
                args(&["svd", &s(&p)])
            },
            code: 2,
            needles: &["arrays.npz: is a NumPy .npz archive", "numpy.save"],
            once: None,
            max_rss_mib: None,
        },
        Case {
            name: "directory_holding_a_truncated_pytorch_model_bin_names_it",
            build: |d| {
                std::fs::write(
                    d.join("pytorch_model.bin"),
                    zip_with_first_entry("archive/data.pkl"),
                )
                .unwrap();
                std::fs::write(d.join("config.json"), br#"{"model_type": "bert"}"#).unwrap();
                args(&["certify", &s(d)])
            },
            code: 2,
            needles: &["pytorch_model.bin: not a readable zip archive"],
            once: None,
            max_rss_mib: None,
        },
        Case {
            name: "directory_holding_a_truncated_legacy_pytorch_model_bin_names_it",
            build: |d| {
                std::fs::write(d.join("pytorch_model.bin"), LEGACY_PICKLE).unwrap();
                args(&["inspect", &s(d)])
            },
            code: 2,
            needles: &["pytorch_model.bin: legacy pickle (system info)"],
            once: None,
            max_rss_mib: None,
        },
        Case {
            name: "directory_holding_a_gguf_file_points_at_it",
            build: |d| {
                std::fs::write(d.join("model-q8_0.gguf"), b"GGUF").unwrap();
                args(&["certify", &s(d)])
            },
            code: 2,
            needles: &["holds model-q8_0.gguf", "pass the GGUF file itself"],
            once: None,
            max_rss_mib: None,
        },
        Case {
            // svd takes a matrix file or a tensor of a model directory: an
            // empty directory is a model directory without weights.
            name: "directory_given_to_svd_says_what_it_lacks_once",
            build: |d| args(&["svd", &s(d)]),
            code: 2,
            needles: &["model directory holds none of model.safetensors"],
            once: Some("holds none of"),
            max_rss_mib: None,
        },
        Case {
            name: "missing_npy_gives_the_os_error_once",
            build: |d| args(&["svd", &s(&d.join("absent.npy"))]),
            code: 2,
            needles: &["absent.npy: cannot read file: No such file or directory"],
            once: Some("No such file or directory"),
            max_rss_mib: None,
        },
        Case {
            name: "model_safetensors_that_is_a_directory_is_named",
            build: |d| {
                std::fs::create_dir(d.join("model.safetensors")).unwrap();
                args(&["certify", &s(d)])
            },
            code: 2,
            needles: &["model.safetensors: is a directory, expected a weight file (safetensors, PyTorch or GGUF)"],
            once: Some("is a directory"),
            max_rss_mib: None,
        },
        Case {
            name: "character_device_as_model_is_refused_without_reading",
            build: |_| {
                if !Path::new("/dev/zero").exists() {
                    return None;
                }
                args(&["certify", "/dev/zero"])
            },
            code: 2,
            needles: &["/dev/zero: is a character device"],
            once: None,
            max_rss_mib: Some(40),
        },
        Case {
            name: "fifo_given_to_svd_is_refused_without_blocking",
            build: |d| {
                let p = d.join("m.npy");
                if !mkfifo(&p) {
                    return None;
                }
                args(&["svd", &s(&p)])
            },
            code: 2,
            needles: &["m.npy: is a FIFO"],
            once: None,
            max_rss_mib: None,
        },
        Case {
            name: "npy_header_of_1_mb_is_refused_before_parsing",
            build: |d| {
                let p = d.join("big-header.npy");
                let mut h = "{'descr': '<f8', 'fortran_order': False, 'shape': (".to_string();
                while h.len() < 1_000_000 {
                    h.push_str("1, ");
                }
                h.push_str("), }\n");
                let mut b = b"\x93NUMPY\x02\x00".to_vec();
                b.extend_from_slice(&(h.len() as u32).to_le_bytes());
                b.extend_from_slice(h.as_bytes());
                b.extend_from_slice(&[0u8; 8]);
                std::fs::write(&p, b).unwrap();
                args(&["svd", &s(&p)])
            },
            code: 2,
            needles: &[
                "big-header.npy: npy header length",
                "exceeds the limit of 65536 bytes",
            ],
            once: None,
            max_rss_mib: Some(40),
        },
        Case {
            name: "safetensors_shape_of_8_million_dimensions_is_refused_in_bounded_memory",
            build: |d| {
                let p = d.join("dims.safetensors");
                st_with_header(
                    &p,
                    "{\"w\":{\"dtype\":\"F32\",\"shape\":[1",
                    b",1",
                    7_999_000,
                    "],\"data_offsets\":[0,4]}}",
                    &[0u8; 4],
                );
                args(&["svd", &s(&p)])
            },
            code: 2,
            needles: &["dims.safetensors", "more than 1048576 JSON values"],
            once: None,
            max_rss_mib: Some(40),
        },
        Case {
            name: "safetensors_header_over_16_mib_is_refused_before_parsing",
            build: |d| {
                let p = d.join("long-header.safetensors");
                st_with_header(
                    &p,
                    "{\"__metadata__\":{\"x\":\"",
                    b"a",
                    17 << 20,
                    "\"}}",
                    &[],
                );
                args(&["svd", &s(&p)])
            },
            code: 2,
            needles: &[
                "long-header.safetensors",
                "exceeds the limit of 16777216 bytes",
            ],
            once: None,
            max_rss_mib: Some(40),
        },
        Case {
            name: "megabyte_tensor_name_is_cut_in_the_message",
            build: |d| {
                let p = d.join("long-name.safetensors");
                let name = "n".repeat(1 << 20);
                let h = format!(
                    "{{\"{name}\":{{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,8]}}}}"
                );
                let mut b = (h.len() as u64).to_le_bytes().to_vec();
                b.extend_from_slice(h.as_bytes());
                b.extend_from_slice(&[0u8; 8]);
                std::fs::write(&p, b).unwrap();
                args(&["svd", &s(&p), "--tensor", "x"])
            },
            code: 2,
            needles: &[
                "long-name.safetensors: no tensor named 'x'",
                "(1048576 bytes)",
            ],
            once: None,
            max_rss_mib: None,
        },
        Case {
            name: "gguf_tensor_name_over_the_cap_is_refused_before_allocating",
            build: |d| {
                let p = d.join("long-name.gguf");
                let mut b = b"GGUF".to_vec();
                b.extend_from_slice(&3u32.to_le_bytes());
                b.extend_from_slice(&1u64.to_le_bytes()); // tensors
                b.extend_from_slice(&0u64.to_le_bytes()); // metadata
                b.extend_from_slice(&5000u64.to_le_bytes());
                b.extend_from_slice(&[b'a'; 5000]);
                std::fs::write(&p, b).unwrap();
                args(&["certify", &s(&p)])
            },
            code: 2,
            needles: &["long-name.gguf", "tensor name length 5000 exceeds 4096"],
            once: None,
            max_rss_mib: None,
        },
    ]
}

use common::Outcome;

/// Runs the binary with `args`, killing it after `limit` ([`common::run_measured`]).
fn run_measured(args: &[String], limit: Duration) -> Outcome {
    let mut cmd = common::bin();
    cmd.args(args);
    common::run_measured(cmd, limit)
}

#[test]
fn hostile_io_cases_give_their_exit_code_and_message() {
    let mut failures = Vec::new();
    let mut ran = 0;
    for c in cases() {
        let dir = tmpdir(c.name);
        let Some(args) = (c.build)(&dir) else {
            eprintln!("{}: skipped (cannot be built here)", c.name);
            let _ = std::fs::remove_dir_all(&dir);
            continue;
        };
        ran += 1;
        if let (Some(mib), Some(own)) = (c.max_rss_mib, own_peak_kib()) {
            // The child's figure is at least this process's peak (it starts
            // as a copy of it); the bound must leave room to measure.
            assert!(
                own * 2 < mib * 1024,
                "{}: this test process peaked at {own} KiB, too close to the {mib} MiB bound",
                c.name
            );
        }
        let o = run_measured(&args, Duration::from_secs(60));
        let want = hostile::Refusal {
            code: c.code,
            needles: c.needles,
            once: c.once,
            max_mib: c.max_rss_mib,
        };
        failures.extend(hostile::misses(c.name, &o, &want));
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert!(ran >= 20, "only {ran} cases could be built");
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn case_names_are_unique() {
    let mut names: Vec<&str> = cases().iter().map(|c| c.name).collect();
    let n = names.len();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), n);
}

/// A sparse file of `len` bytes whose first bytes are `head`.
fn sparse(path: &Path, head: &[u8], len: u64) {
    use std::io::Write;
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(head).unwrap();
    f.set_len(len).unwrap();
}

#[test]
fn allocation_failure_is_an_error_not_an_abort() {
    let d = tmpdir("alloc");
    let n: u64 = 25_000;
    let bytes = n * n * 4;
    let want = format!(
        "cannot allocate the {} bytes of its float64 copy",
        n * n * 8
    );
    // safetensors: a 2.5 GB sparse file of zeros.
    let st = d.join("w.safetensors");
    let mut h = serde_json::to_vec(
        &json!({"w": {"dtype": "F32", "shape": [n, n], "data_offsets": [0, bytes]}}),
    )
    .unwrap();
    while h.len() % 8 != 0 {
        h.push(b' ');
    }
    let mut head = (h.len() as u64).to_le_bytes().to_vec();
    head.extend_from_slice(&h);
    sparse(&st, &head, head.len() as u64 + bytes);
    // ONNX: the same zeros in a sparse external data file.
    let ox = d.join("m.onnx");
    let ext = tensor_external(
        "w",
        &[n as i64, n as i64],
        &[("location", "w.bin"), ("length", &bytes.to_string())],
    );
    std::fs::write(&ox, model(&[], &[ext])).unwrap();
    sparse(&d.join("w.bin"), &[], bytes);
    // .npy: a sparse float32 array.
    let np = d.join("w.npy");
    let mut hdr = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({n}, {n}), }}");
    while (10 + hdr.len() + 1) % 64 != 0 {
        hdr.push(' ');
    }
    hdr.push('\n');
    let mut head = b"\x93NUMPY\x01\x00".to_vec();
    head.extend_from_slice(&(hdr.len() as u16).to_le_bytes());
    head.extend_from_slice(hdr.as_bytes());
    sparse(&np, &head, head.len() as u64 + bytes);
    let mut failures = Vec::new();
    for p in [&st, &ox, &np] {
        let mut args = vec!["svd", p.to_str().unwrap()];
        if p != &np {
            args.extend(["--tensor", "w"]);
        }
        let o = common::run_with_data_limit(&args, 1 << 30);
        let err = String::from_utf8_lossy(&o.stderr);
        let err = err.trim_end();
        if o.status.code() != Some(2)
            || err.lines().count() != 1
            || !err.contains(&want)
            || !err.contains(p.to_str().unwrap())
        {
            failures.push(format!("{}: {:?}: {err}", p.display(), o.status.code()));
        }
    }
    let _ = std::fs::remove_dir_all(&d);
    hostile::assert_none(failures);
}
