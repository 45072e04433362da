//! Hostile input, round three (issue 18), the reader classes, driven
//! through the real binary: every case is named after the failure it pins,
//! builds its input as real files, and states the arguments, the exit code
//! (2), substrings of the one-line message and, where memory was the
//! failure, a bound on the child's peak memory (from `wait4`).
//!
//! Classes: views that demand gigabytes from a few bytes (PyTorch zip and
//! legacy containers); size arithmetic that overflows (GGUF); files that
//! are not the model's own (`refs/<revision>`, `--resume-dir` parts,
//! certificates) that are FIFOs, devices, directories or too large;
//! duplicate entries in PyTorch containers; misleading messages. The
//! SIGBUS class (a mapped file truncated under the reader) is pinned by
//! the two tests at the end, through the library in a child process.

mod common;

use common::hostile::{self, s};

use common::tmpdir;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::torch::{
    torch_legacy_with_pickle, torch_zip_with_pickle, write_torch_legacy, write_torch_zip, zip,
    Pickle, TorchTensor,
};

struct Case {
    name: &'static str,
    /// Builds the input under the given empty directory; returns the CLI
    /// arguments and environment (`None`: cannot be built here).
    build: fn(&Path) -> Option<Vec<String>>,
    needles: &'static [&'static str],
    /// Bound on the child's peak resident memory (MiB).
    max_rss_mib: Option<u64>,
}

fn args(v: &[&str]) -> Option<Vec<String>> {
    Some(v.iter().map(|a| a.to_string()).collect())
}

fn mkfifo(path: &Path) -> bool {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    unsafe { libc::mkfifo(c.as_ptr(), 0o600) == 0 }
}

/// One f32 element expanded to `shape` with `stride` (as `expand` saves).
fn aliasing_view(shape: &[usize], stride: &[usize], storage_elems: usize) -> TorchTensor {
    TorchTensor {
        name: "w".into(),
        storage: "FloatStorage",
        itemsize: 4,
        shape: shape.to_vec(),
        stride: stride.to_vec(),
        bytes: vec![0x3f; 4 * storage_elems],
    }
}

fn small() -> TorchTensor {
    TorchTensor::f32("w", 2, 2, &[1.0, 2.0, 3.0, 4.0])
}

/// A GGUF v3 file of one tensor `w` with `dims` and `ggml_type`, offset 0,
/// and `data` bytes after the aligned header.
fn gguf(path: &Path, tensors: &[(&str, &[u64], u32)], data: usize) {
    let mut b = b"GGUF".to_vec();
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes());
    let mut off = 0u64;
    for (name, dims, t) in tensors {
        b.extend_from_slice(&(name.len() as u64).to_le_bytes());
        b.extend_from_slice(name.as_bytes());
        b.extend_from_slice(&(dims.len() as u32).to_le_bytes());
        for d in *dims {
            b.extend_from_slice(&d.to_le_bytes());
        }
        b.extend_from_slice(&t.to_le_bytes());
        b.extend_from_slice(&off.to_le_bytes());
        // F32 tensors of the "good" kind: 4 bytes per element, aligned 32.
        let n: u64 = dims.iter().product::<u64>().min(1 << 20);
        off += (n * 4).div_ceil(32) * 32;
    }
    while b.len() % 32 != 0 {
        b.push(0);
    }
    b.extend(std::iter::repeat_n(0u8, data));
    std::fs::write(path, b).unwrap();
}

/// A Hugging Face cache under `d` holding `org/name` with one snapshot;
/// returns the repo directory (its `refs/` exists, `refs/main` does not).
fn hf_repo(d: &Path) -> PathBuf {
    let repo = d.join("hub/models--org--name");
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::create_dir_all(repo.join("snapshots").join("a".repeat(40))).unwrap();
    repo
}

/// Writes `argv[1]` as torch.save lays out a state dict holding one
/// 46000 x 46000 view of a one-element storage (stride 0), with Python's
/// own pickle (protocol 2, persistent ids) and zipfile: stand-ins for
/// `torch.FloatStorage` and `torch._utils._rebuild_tensor_v2` give the
/// globals their names, so no torch is needed.
const PY_EXPAND: &str = r#"
import pickle, sys, types, zipfile, collections, io
torch = types.ModuleType("torch"); utils = types.ModuleType("torch._utils")
sys.modules["torch"] = torch; sys.modules["torch._utils"] = utils; torch._utils = utils
class FloatStorage: pass
FloatStorage.__module__ = "torch"; FloatStorage.__qualname__ = "FloatStorage"; torch.FloatStorage = FloatStorage
def _rebuild_tensor_v2(*a): pass
_rebuild_tensor_v2.__module__ = "torch._utils"; utils._rebuild_tensor_v2 = _rebuild_tensor_v2
class Storage:
    def __init__(s, key, n): s.key, s.n = key, n
class T:
    def __init__(s, st, shape, stride): s.st, s.shape, s.stride = st, shape, stride
    def __reduce__(s): return (_rebuild_tensor_v2, (s.st, 0, s.shape, s.stride, False, collections.OrderedDict()))
class P(pickle.Pickler):
    def persistent_id(s, o):
        if isinstance(o, Storage): return ("storage", FloatStorage, o.key, "cpu", o.n)
        return None
buf = io.BytesIO()
P(buf, protocol=2).dump(collections.OrderedDict([("w", T(Storage("0", 1), (46000, 46000), (0, 0)))]))
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_STORED) as z:
    z.writestr("archive/data.pkl", buf.getvalue())
    z.writestr("archive/byteorder", "little")
    z.writestr("archive/data/0", b"\x00\x00\x80\x3f")
    z.writestr("archive/version", "3\n")
"#;

fn minilm() -> String {
    s(&common::root().join("data/all-MiniLM-L6-v2"))
}

fn cases() -> Vec<Case> {
    vec![
        // Class 2: a few hundred bytes demanding gigabytes.
        Case {
            name: "torch_zip_stride_0_view_of_one_element_demands_gigabytes",
            build: |d| {
                let p = d.join("expand.pt");
                // 46000 x 46000 f32 = 8.5 GB from one 4-byte storage.
                write_torch_zip(&p, &[aliasing_view(&[46000, 46000], &[0, 0], 1)]);
                args(&["svd", &s(&p), "--tensor", "w"])
            },
            needles: &[
                "expand.pt: tensor 'w'",
                "would materialise 8464000000 bytes, more than the whole file",
                "stride 0",
            ],
            max_rss_mib: Some(100),
        },
        Case {
            // The same file written by Python's pickle and zipfile (skipped
            // where there is no python3).
            name: "torch_zip_stride_0_view_written_by_python_pickle_demands_gigabytes",
            build: |d| {
                let p = d.join("expand-py.pt");
                let ok = std::process::Command::new("python3")
                    .args(["-c", PY_EXPAND, &s(&p)])
                    .status()
                    .is_ok_and(|st| st.success());
                if !ok {
                    return None;
                }
                args(&["svd", &s(&p), "--tensor", "w"])
            },
            needles: &[
                "expand-py.pt: tensor 'w'",
                "would materialise 8464000000 bytes, more than the whole file",
            ],
            max_rss_mib: Some(100),
        },
        Case {
            name: "torch_legacy_stride_0_view_of_one_element_demands_gigabytes",
            build: |d| {
                let p = d.join("expand-legacy.bin");
                write_torch_legacy(&p, &[aliasing_view(&[46000, 46000], &[0, 0], 1)]);
                args(&["svd", &s(&p), "--tensor", "w"])
            },
            needles: &[
                "expand-legacy.bin: tensor 'w'",
                "would materialise 8464000000 bytes, more than the whole file",
            ],
            max_rss_mib: Some(100),
        },
        Case {
            // Our own variant: no stride is 0, but the rows overlap (stride
            // [1, 1]): 40000 x 40000 from a 80000-element storage.
            name: "torch_zip_overlapping_strides_demand_gigabytes",
            build: |d| {
                let p = d.join("overlap.pt");
                write_torch_zip(&p, &[aliasing_view(&[40000, 40000], &[1, 1], 79999)]);
                args(&["svd", &s(&p), "--tensor", "w"])
            },
            needles: &[
                "overlap.pt: tensor 'w'",
                "would materialise 6400000000 bytes",
            ],
            max_rss_mib: Some(100),
        },
        Case {
            // Our own variant: a stride-0 row broadcast in a model directory
            // (certify reads every matrix it needs through the same reader).
            name: "torch_stride_0_view_in_a_model_directory_is_refused_by_name",
            build: |d| {
                let p = d.join("pytorch_model.bin");
                let mut t = aliasing_view(&[30000, 30000], &[0, 1], 30000);
                t.name = "x.weight".into();
                write_torch_zip(&p, &[t]);
                args(&["svd", &s(&p), "--tensor", "x.weight"])
            },
            needles: &[
                "pytorch_model.bin: tensor 'x.weight'",
                "more than the whole file",
            ],
            max_rss_mib: Some(100),
        },
        Case {
            // Our own variant: a zip entry that claims more bytes than the
            // whole file (what a deflate bomb would claim).
            name: "torch_zip_entry_claiming_more_than_the_file_is_refused",
            build: |d| {
                let p = d.join("bomb.pt");
                let t = small();
                let mut z = torch_zip_with_pickle(
                    Pickle::state_dict(std::slice::from_ref(&t), false),
                    &[t],
                );
                // Central directory entry of archive/data/0: its
                // uncompressed size field (offset 24 of the entry) claims 1 GB.
                let name = b"archive/data/0";
                let cd = z
                    .windows(4)
                    .enumerate()
                    .filter(|(_, w)| *w == b"PK\x01\x02")
                    .map(|(i, _)| i)
                    .find(|&i| z[i + 46..].starts_with(name))
                    .unwrap();
                z[cd + 24..cd + 28].copy_from_slice(&(1u32 << 30).to_le_bytes());
                std::fs::write(&p, z).unwrap();
                args(&["svd", &s(&p), "--tensor", "w"])
            },
            needles: &[
                "bomb.pt:",
                "claims 1073741824 bytes uncompressed, more than the whole file",
            ],
            max_rss_mib: Some(100),
        },
        // Class 4: size arithmetic that overflows.
        Case {
            name: "gguf_byte_length_overflow_is_an_error_not_an_unsupported_type",
            build: |d| {
                let p = d.join("overflow.gguf");
                // F32 (type 0): 2^31 x 2^31 elements, 2^64 bytes.
                gguf(&p, &[("w", &[1 << 31, 1 << 31], 0)], 64);
                args(&["svd", &s(&p), "--tensor", "w"])
            },
            needles: &[
                "overflow.gguf: tensor 'w'",
                "overflows the byte length computation",
            ],
            max_rss_mib: None,
        },
        Case {
            // Our own variant: a block format, whose element count fits but
            // whose byte count (34 bytes per 32 elements) does not.
            name: "gguf_q8_0_byte_length_overflow_names_the_tensor",
            build: |d| {
                let p = d.join("overflow-q8.gguf");
                gguf(&p, &[("blk.0.w", &[1 << 32, (1 << 32) - 1], 8)], 64);
                args(&["certify", &s(&p)])
            },
            needles: &[
                "overflow-q8.gguf: tensor 'blk.0.w'",
                "of Q8_0 overflows the byte length computation",
            ],
            max_rss_mib: None,
        },
        // Class 5: files that are not the model's own.
        Case {
            name: "hf_ref_that_is_a_fifo_hangs",
            build: |d| {
                let repo = hf_repo(d);
                if !mkfifo(&repo.join("refs/main")) {
                    return None;
                }
                args(&["inspect", "org/name"])
            },
            needles: &["refs/main: is a FIFO (named pipe), expected a revision ref"],
            max_rss_mib: None,
        },
        Case {
            name: "hf_ref_linked_to_dev_zero_is_read_unbounded",
            build: |d| {
                if !Path::new("/dev/zero").exists() {
                    return None;
                }
                let repo = hf_repo(d);
                std::os::unix::fs::symlink("/dev/zero", repo.join("refs/main")).unwrap();
                args(&["inspect", "org/name"])
            },
            needles: &["refs/main: is a character device, expected a revision ref"],
            max_rss_mib: Some(100),
        },
        Case {
            // Our own variant: a regular ref of a megabyte.
            name: "hf_ref_of_a_megabyte_stops_at_its_cap",
            build: |d| {
                let repo = hf_repo(d);
                std::fs::write(repo.join("refs/main"), vec![b'a'; 1 << 20]).unwrap();
                args(&["inspect", "org/name"])
            },
            needles: &["refs/main: revision ref larger than the limit of 42 bytes"],
            max_rss_mib: None,
        },
        Case {
            name: "resume_dir_part_that_is_a_fifo_hangs",
            build: |d| {
                let r = d.join("resume");
                std::fs::create_dir_all(&r).unwrap();
                if !mkfifo(&r.join("shard-1-of-1.layer-00000.json")) {
                    return None;
                }
                args(&[
                    "certify",
                    &minilm(),
                    "--out",
                    &s(&d.join("c.json")),
                    "--resume-dir",
                    &s(&r),
                ])
            },
            needles: &[
                "shard-1-of-1.layer-00000.json: (file): is a FIFO (named pipe), expected a \
                 certificate part (a regular file)",
            ],
            max_rss_mib: None,
        },
        Case {
            // Our own variant: a certificate to verify that is a FIFO.
            name: "certificate_that_is_a_fifo_is_refused_unread",
            build: |d| {
                let p = d.join("cert.json");
                if !mkfifo(&p) {
                    return None;
                }
                args(&["verify", &s(&p)])
            },
            needles: &[
                "cert.json: (file): is a FIFO (named pipe), expected a certificate (a regular",
            ],
            max_rss_mib: None,
        },
        Case {
            // Our own variant: a certificate that is /dev/zero (a 1 GiB cap
            // read by doubling peaked at 2.1 GB): refused unread.
            name: "certificate_from_dev_zero_read_to_twice_its_cap",
            build: |_| {
                if !Path::new("/dev/zero").exists() {
                    return None;
                }
                args(&["verify", "/dev/zero"])
            },
            needles: &["/dev/zero: (file): is a character device, expected a certificate"],
            max_rss_mib: Some(100),
        },
        Case {
            // Our own variant: a resume part that links to /dev/zero.
            name: "resume_dir_part_linked_to_dev_zero_is_read_unbounded",
            build: |d| {
                if !Path::new("/dev/zero").exists() {
                    return None;
                }
                let r = d.join("resume");
                std::fs::create_dir_all(&r).unwrap();
                std::os::unix::fs::symlink("/dev/zero", r.join("shard-1-of-1.layer-00000.json"))
                    .unwrap();
                args(&[
                    "certify",
                    &minilm(),
                    "--out",
                    &s(&d.join("c.json")),
                    "--resume-dir",
                    &s(&r),
                ])
            },
            needles: &["shard-1-of-1.layer-00000.json: (file): is a character device"],
            max_rss_mib: Some(200),
        },
        // Class 13: duplicates.
        Case {
            name: "torch_zip_with_two_data_pkl_entries_is_accepted",
            build: |d| {
                let p = d.join("two-pickles.pt");
                let t = small();
                let pk = Pickle::state_dict(std::slice::from_ref(&t), false);
                let z = zip(&[
                    ("archive/data.pkl".into(), pk.clone()),
                    ("archive/data.pkl".into(), pk),
                    ("archive/data/0".into(), t.bytes.clone()),
                    ("archive/version".into(), b"3\n".to_vec()),
                ]);
                std::fs::write(&p, z).unwrap();
                args(&["svd", &s(&p), "--tensor", "w"])
            },
            needles: &["two-pickles.pt:", "lists an entry name twice", "ambiguous"],
            max_rss_mib: None,
        },
        Case {
            name: "torch_zip_with_two_data_0_entries_is_accepted",
            build: |d| {
                let p = d.join("two-storages.pt");
                let t = small();
                let z = zip(&[
                    (
                        "archive/data.pkl".into(),
                        Pickle::state_dict(std::slice::from_ref(&t), false),
                    ),
                    ("archive/data/0".into(), t.bytes.clone()),
                    ("archive/data/0".into(), vec![0u8; 16]),
                    ("archive/version".into(), b"3\n".to_vec()),
                ]);
                std::fs::write(&p, z).unwrap();
                args(&["svd", &s(&p), "--tensor", "w"])
            },
            needles: &["two-storages.pt:", "lists an entry name twice"],
            max_rss_mib: None,
        },
        Case {
            name: "torch_legacy_with_a_storage_key_listed_twice_is_accepted",
            build: |d| {
                let p = d.join("two-keys.bin");
                let a = small();
                let mut b = small();
                b.name = "v".into();
                // Both tensors on storage key "0", and the key list "0", "0".
                let mut pk = Pickle::new();
                pk.global("collections", "OrderedDict").op(b')').op(b'R');
                pk.op(b'(');
                for t in [&a, &b] {
                    pk.str(&t.name);
                    pk.tensor(t, "0", true);
                }
                pk.op(b'u').op(b'.');
                let mut bytes = torch_legacy_with_pickle(pk.0, &[]);
                let keys_at = bytes.len() - 6; // PROTO 2, ] ( e . : the empty key list
                let mut keys = Pickle::new();
                keys.op(b']').op(b'(').str("0").str("0").op(b'e').op(b'.');
                bytes.truncate(keys_at);
                bytes.extend_from_slice(&keys.0);
                for t in [&a, &b] {
                    bytes.extend_from_slice(&4i64.to_le_bytes());
                    bytes.extend_from_slice(&t.bytes);
                }
                std::fs::write(&p, bytes).unwrap();
                args(&["svd", &s(&p), "--tensor", "w"])
            },
            needles: &["two-keys.bin:", "names storage '0' twice"],
            max_rss_mib: None,
        },
        // Class 16: misleading messages.
        Case {
            name: "torch_empty_data_pkl_is_larger_than_the_limit_of_0_bytes",
            build: |d| {
                let p = d.join("empty-pickle.pt");
                let t = small();
                std::fs::write(&p, torch_zip_with_pickle(Vec::new(), &[t])).unwrap();
                args(&["svd", &s(&p), "--tensor", "w"])
            },
            needles: &["empty-pickle.pt:", "archive/data.pkl is empty (0 bytes)"],
            max_rss_mib: None,
        },
        Case {
            name: "hf_ref_that_is_a_directory_says_no_refs_main",
            build: |d| {
                let repo = hf_repo(d);
                std::fs::create_dir_all(repo.join("refs/main")).unwrap();
                args(&["inspect", "org/name"])
            },
            needles: &["refs/main: is a directory, expected a revision ref"],
            max_rss_mib: None,
        },
        Case {
            name: "hf_ref_that_is_not_utf8_says_no_refs_main",
            build: |d| {
                let repo = hf_repo(d);
                std::fs::write(repo.join("refs/main"), b"\xff\xfe").unwrap();
                args(&["inspect", "org/name"])
            },
            needles: &["refs/main: revision ref is not UTF-8 text"],
            max_rss_mib: None,
        },
        Case {
            name: "gguf_wrong_tensor_says_the_file_has_no_2d_tensors",
            build: |d| {
                let p = d.join("two.gguf");
                gguf(
                    &p,
                    &[
                        ("a.weight", &[4, 4], 0),
                        ("b.weight", &[4, 4], 0),
                        ("c", &[4], 0),
                    ],
                    256,
                );
                args(&["svd", &s(&p), "--tensor", "nope"])
            },
            needles: &[
                "two.gguf: no tensor named 'nope'",
                "2-D float tensors in the file (2): 'a.weight', 'b.weight'",
            ],
            max_rss_mib: None,
        },
        Case {
            name: "model_directory_wrong_tensor_says_the_file_has_no_2d_tensors",
            build: |_| args(&["svd", &minilm(), "--tensor", "no.such.weight"]),
            needles: &[
                "model.safetensors: no tensor named 'no.such.weight'",
                "2-D float tensors in the file (36): 'encoder.layer.0.",
            ],
            max_rss_mib: None,
        },
    ]
}

use common::Outcome;

/// Runs the binary (with `HF_HUB_CACHE` at `dir/hub`, in `dir`), killing it
/// after `limit` ([`common::run_measured`]).
fn run_measured(args: &[String], dir: &Path, limit: Duration) -> Outcome {
    let mut cmd = common::bin();
    for k in [
        "HF_HUB_CACHE",
        "HUGGINGFACE_HUB_CACHE",
        "HF_HOME",
        "XDG_CACHE_HOME",
    ] {
        cmd.env_remove(k);
    }
    cmd.env("HF_HUB_CACHE", dir.join("hub"))
        .current_dir(dir)
        .args(args);
    common::run_measured(cmd, limit)
}

#[test]
fn hostile_io_3_cases_exit_2_with_one_line_naming_the_file() {
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
        let o = run_measured(&args, &dir, Duration::from_secs(60));
        let want = hostile::Refusal {
            code: 2,
            needles: c.needles,
            once: None,
            max_mib: c.max_rss_mib,
        };
        failures.extend(hostile::misses(c.name, &o, &want));
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert!(ran >= 15, "only {ran} cases could be built");
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

/// A wrong tensor name on a model directory listed no tensors ("the file
/// has no 2-D tensors" on a checkpoint with 40): the library's message now
/// lists the 2-D tensors it has.
#[test]
fn wrong_tensor_on_a_model_directory_says_the_file_has_no_2d_tensors() {
    let ck =
        specbound::io::checkpoint::Checkpoint::open(&common::root().join("data/all-MiniLM-L6-v2"))
            .unwrap();
    let e = ck.read("no.such.weight").unwrap_err().to_string();
    assert!(e.contains("no tensor named 'no.such.weight'"), "{e}");
    assert!(e.contains("2-D float tensors in the file ("), "{e}");
    assert!(
        e.contains("'embeddings.word_embeddings.weight'") || e.contains("weight'"),
        "{e}"
    );
    assert!(!e.contains("has no 2-D"), "{e}");
}

/// Run in a child by the two tests below: maps `SPECBOUND_TEST_FILE`
/// (safetensors or GGUF, by extension), truncates it to 8 bytes, then
/// touches its last byte (`touch`) or reads its tensor (`read`).
#[test]
#[ignore = "run as a child by the truncated-while-mapped tests"]
fn child_truncates_a_mapped_file() {
    let Ok(p) = std::env::var("SPECBOUND_TEST_FILE") else {
        return;
    };
    let p = PathBuf::from(p);
    let how = std::env::var("SPECBOUND_TEST_HOW").unwrap();
    let gguf = p.extension().is_some_and(|e| e == "gguf");
    let st = (!gguf).then(|| specbound::io::safetensors::SafetensorsFile::open(&p).unwrap());
    let gg = gguf.then(|| specbound::io::gguf::GgufFile::open(&p).unwrap());
    let bytes: &[u8] = match (&st, &gg) {
        (Some(f), _) => f.bytes(),
        (_, Some(g)) => g.bytes(),
        _ => unreachable!(),
    };
    let len = bytes.len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(8)
        .unwrap();
    if how == "touch" {
        // The page past the new end faults: SIGBUS, caught by the guard.
        let b = std::hint::black_box(bytes[len - 1]);
        println!("read {b} past the end");
        std::process::exit(0);
    }
    let r = match (&st, &gg) {
        (Some(f), _) => f.read("w").map(|_| ()),
        (_, Some(g)) => g.read("w").map(|_| ()),
        _ => unreachable!(),
    };
    eprintln!("{}", r.unwrap_err());
    std::process::exit(2);
}

fn truncated_child(file: &Path, how: &str) -> std::process::Output {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_truncates_a_mapped_file",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SPECBOUND_TEST_FILE", file)
        .env("SPECBOUND_TEST_HOW", how)
        .output()
        .unwrap()
}

fn big_files(d: &Path) -> Vec<PathBuf> {
    // Larger than a page, so the last byte lies on a page past the new end.
    let st = d.join("w.safetensors");
    let m = specbound::matrix::DenseMatrix {
        rows: 64,
        cols: 64,
        data: (0..4096).map(|k| k as f64).collect(),
    };
    common::write_safetensors(&st, &[("w".to_string(), &m)], "F32");
    let gg = d.join("w.gguf");
    gguf(&gg, &[("w", &[64, 64], 0)], 64 * 64 * 4);
    vec![st, gg]
}

#[test]
fn safetensors_or_gguf_truncated_while_mapped_dies_of_sigbus() {
    let d = tmpdir("sigbus");
    for f in big_files(&d) {
        let o = truncated_child(&f, "touch");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{}: {err}", f.display());
        let line = err
            .lines()
            .find(|l| l.contains("was truncated while specbound was reading it"))
            .unwrap_or_else(|| panic!("{}: no message in {err}", f.display()));
        assert!(line.starts_with(&format!("{}: ", f.display())), "{line}");
        assert!(!String::from_utf8_lossy(&o.stdout).contains("past the end"));
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn safetensors_or_gguf_truncated_before_a_tensor_read_is_an_error_naming_it() {
    let d = tmpdir("shrank");
    for f in big_files(&d) {
        let o = truncated_child(&f, "read");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{}: {err}", f.display());
        let want = format!("{}: the file shrank from ", f.display());
        assert!(err.contains(&want), "{err}");
        assert!(
            err.contains(" to 8 bytes while specbound was reading it"),
            "{err}"
        );
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn views_that_alias_in_memory_are_refused_by_one_rule() {
    use specbound::io::limits::{strided_span_bytes, view_materialised_bytes};
    // The DLPack input of the round: 8 bytes as a (40000, 40000) stride-0
    // view of float64: 12.8 GB from a span of 8 bytes.
    let cases: [(&[usize], &[i64], u64); 5] = [
        (&[40_000, 40_000], &[0, 0], 8),
        (&[40_000, 40_000], &[1, 0], 8),
        (&[46_000, 46_000], &[0, 1], 4),
        // Overlapping strides: each row starts one element after the last.
        (&[100_000, 1000], &[1, 1], 4),
        // Negative strides that overlap.
        (&[1000, 1000], &[-1, 1], 2),
    ];
    for (shape, strides, item) in cases {
        let span = strided_span_bytes(shape, strides, item).unwrap();
        let e = view_materialised_bytes(shape, item, span, "the memory", "copy it").unwrap_err();
        assert!(
            e.contains("would materialise") && e.contains("stride 0"),
            "{e}"
        );
    }
    // Honest views: contiguous, transposed, sliced, reversed, empty.
    let honest: [(&[usize], &[i64], u64); 5] = [
        (&[300, 400], &[400, 1], 4),
        (&[400, 300], &[1, 400], 4),
        (&[100, 50], &[400, 2], 8),
        (&[300, 400], &[-400, -1], 2),
        (&[0, 400], &[0, 0], 4),
    ];
    for (shape, strides, item) in honest {
        let span = strided_span_bytes(shape, strides, item).unwrap();
        view_materialised_bytes(shape, item, span, "the memory", "copy it").unwrap();
    }
    // Sizes that overflow are refused, not wrapped.
    assert!(strided_span_bytes(&[usize::MAX, 2], &[i64::MAX, 1], 8).is_none());
    assert!(
        view_materialised_bytes(&[usize::MAX, 4], 8, u64::MAX, "m", "c")
            .unwrap_err()
            .contains("overflows")
    );
}
