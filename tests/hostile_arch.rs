//! Hostile architecture facts: configs and GGUF metadata whose numbers wrap,
//! are zero, negative or of the wrong type, configs that do not say what
//! they are, and models whose tensors do not match their facts. Every case
//! is a real file set in a temporary directory, run through the real binary
//! (`certify` and `inspect` alike, which must give the same one-line error),
//! with the expected exit code and message.
//!
//! `SPECBOUND_BIN=/path/to/specbound cargo test --release --test hostile_arch
//! -- --nocapture` runs the table against another binary and prints what it
//! did (how the "before" column of a fix is recorded).

mod common;

use common::hostile::mat;

use common::hostile;

use common::{tmpdir, Rng};
use serde_json::{json, Value};
use specbound::arch::{self, ArchOverrides};
use specbound::io::checkpoint::Checkpoint;
use specbound::io::gguf::{self, MetaValue};
use specbound::matrix::DenseMatrix;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Tiny dimensions: hidden 8, 2 heads of 4, feed-forward 16.
const N: usize = 8;
const I: usize = 16;

fn write_st(path: &Path, tensors: &[(String, DenseMatrix)]) {
    let refs: Vec<(String, &DenseMatrix)> = tensors.iter().map(|(n, m)| (n.clone(), m)).collect();
    common::write_safetensors(path, &refs, "F32");
}

fn write_config(dir: &Path, cfg: &Value) {
    std::fs::write(dir.join("config.json"), serde_json::to_vec(cfg).unwrap()).unwrap();
}

/// BERT tensors of layer `l` ([out, in]), leaving out those named in `skip`;
/// `ffn_out_cols` is the width of `output.dense` (I when well formed).
fn bert_layer(l: usize, skip: &[&str], ffn_out_cols: usize) -> Vec<(String, DenseMatrix)> {
    [
        ("attention.self.query", N, N),
        ("attention.self.key", N, N),
        ("attention.self.value", N, N),
        ("attention.output.dense", N, N),
        ("intermediate.dense", I, N),
        ("output.dense", N, ffn_out_cols),
    ]
    .iter()
    .enumerate()
    .filter(|(_, (n, _, _))| !skip.contains(n))
    .map(|(k, &(n, r, c))| (format!("encoder.layer.{l}.{n}.weight"), mat(r, c, k)))
    .collect()
}

fn bert_config(layers: Value) -> Value {
    json!({"model_type": "bert", "num_hidden_layers": layers, "hidden_size": N,
           "num_attention_heads": 2, "intermediate_size": I, "hidden_act": "gelu"})
}

/// A one-layer BERT directory with the given config.
fn bert_dir(dir: &Path, cfg: Value) -> PathBuf {
    write_st(&dir.join("model.safetensors"), &bert_layer(0, &[], I));
    write_config(dir, &cfg);
    dir.to_path_buf()
}

/// LLaMA tensors of layer 0 with `q_rows` query rows and `kv_rows` key/value rows.
fn llama_layer(q_rows: usize, kv_rows: usize) -> Vec<(String, DenseMatrix)> {
    [
        ("self_attn.q_proj", q_rows, N),
        ("self_attn.k_proj", kv_rows, N),
        ("self_attn.v_proj", kv_rows, N),
        ("self_attn.o_proj", N, q_rows),
        ("mlp.gate_proj", I, N),
        ("mlp.up_proj", I, N),
        ("mlp.down_proj", N, I),
    ]
    .iter()
    .enumerate()
    .map(|(k, &(n, r, c))| (format!("model.layers.0.{n}.weight"), mat(r, c, k)))
    .collect()
}

/// A one-layer LLaMA directory whose config has `heads`, `kv_heads` and `head_dim`.
fn llama_dir(dir: &Path, heads: Value, kv_heads: Value, head_dim: Value) -> PathBuf {
    write_st(&dir.join("model.safetensors"), &llama_layer(N, N));
    write_config(
        dir,
        &json!({"model_type": "llama", "num_hidden_layers": 1, "hidden_size": N,
                "num_attention_heads": heads, "num_key_value_heads": kv_heads,
                "head_dim": head_dim, "intermediate_size": I}),
    );
    dir.to_path_buf()
}

/// A one-layer GGUF file (llama names) with `meta` after `general.architecture`.
fn gguf_file(dir: &Path, meta: &[(&str, i128)]) -> PathBuf {
    let mut m = vec![("general.architecture", MetaValue::Str("llama".into()))];
    m.extend(meta.iter().map(|&(k, v)| (k, MetaValue::Int(v))));
    let names = [
        "attn_q",
        "attn_k",
        "attn_v",
        "attn_output",
        "ffn_gate",
        "ffn_up",
        "ffn_down",
    ];
    let tensors: Vec<(String, usize, usize, u32, Vec<f64>)> = llama_layer(N, N)
        .into_iter()
        .zip(names)
        .map(|((_, m), n)| {
            (
                format!("blk.0.{n}.weight"),
                m.rows,
                m.cols,
                gguf::F32,
                m.data,
            )
        })
        .collect();
    let f = dir.join("model.gguf");
    gguf::write_gguf(&f, &m, &tensors).unwrap();
    f
}

const GGUF_OK: [(&str, i128); 5] = [
    ("llama.block_count", 1),
    ("llama.embedding_length", N as i128),
    ("llama.attention.head_count", 2),
    ("llama.attention.head_count_kv", 2),
    ("llama.feed_forward_length", I as i128),
];

/// GGUF metadata: the well-formed values with `edits` replacing (or adding) keys.
fn gguf_with(dir: &Path, edits: &[(&'static str, i128)]) -> PathBuf {
    let mut meta: Vec<(&str, i128)> = GGUF_OK
        .iter()
        .filter(|(k, _)| !edits.iter().any(|(e, _)| e == k))
        .copied()
        .collect();
    meta.extend_from_slice(edits);
    gguf_file(dir, &meta)
}

/// 2^63 + 4: two heads of this dimension wrap to 8 = N query rows in u64.
const WRAP_DIM: u64 = (1 << 63) + 4;
/// 2^62 + 2: this many heads of dimension 4 wrap to 8 query rows.
const WRAP_HEADS: u64 = (1 << 62) + 2;

struct Case {
    /// Named after the failure it pins.
    name: &'static str,
    /// Builds the input in an empty directory; returns the MODEL argument.
    build: fn(&Path) -> PathBuf,
    /// Subcommands to run (`certify`, `inspect`).
    commands: &'static [&'static str],
    /// Arguments after MODEL.
    args: &'static [&'static str],
    /// Expected exit code.
    code: i32,
    /// Substrings the one-line message must contain.
    needles: &'static [&'static str],
    /// Substrings it must not contain (a file that does not exist, a wrong key).
    absent: &'static [&'static str],
}

const BOTH: &[&str] = &["certify", "inspect"];

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "config_heads_times_head_dim_wraps",
            build: |d| llama_dir(d, json!(2), json!(2), json!(WRAP_DIM)),
            commands: BOTH,
            args: &[],
            code: 2,
            needles: &[
                "config.json",
                "'head_dim'",
                "9223372036854775812",
                "overflow",
            ],
            absent: &[],
        },
        Case {
            name: "config_many_heads_times_head_dim_wraps",
            build: |d| llama_dir(d, json!(WRAP_HEADS), json!(WRAP_HEADS), json!(4)),
            commands: BOTH,
            args: &[],
            code: 2,
            // Refused by the cap on heads (issue 32), before the product.
            needles: &[
                "config.json",
                "'num_attention_heads'",
                "4611686018427387906 attention heads, more than the limit of 65536",
            ],
            absent: &[],
        },
        Case {
            name: "gguf_head_count_times_key_length_wraps",
            build: |d| gguf_with(d, &[("llama.attention.key_length", WRAP_DIM as i128)]),
            commands: BOTH,
            args: &[],
            code: 2,
            needles: &["model.gguf", "'llama.attention.key_length'", "overflow"],
            absent: &["config.json"],
        },
        Case {
            name: "gguf_many_heads_times_key_length_wraps",
            build: |d| {
                gguf_with(
                    d,
                    &[
                        ("llama.attention.head_count", WRAP_HEADS as i128),
                        ("llama.attention.head_count_kv", WRAP_HEADS as i128),
                        ("llama.attention.key_length", 4),
                    ],
                )
            },
            commands: BOTH,
            args: &[],
            code: 2,
            needles: &[
                "model.gguf",
                "'llama.attention.head_count'",
                "attention heads, more than the limit of 65536",
            ],
            absent: &["config.json"],
        },
        Case {
            name: "gguf_head_count_zero_names_config_json",
            build: |d| gguf_with(d, &[("llama.attention.head_count", 0)]),
            commands: BOTH,
            args: &[],
            code: 2,
            needles: &["model.gguf", "'llama.attention.head_count'", "zero"],
            absent: &["config.json"],
        },
        Case {
            name: "gguf_head_count_kv_zero_names_the_key_tensor",
            build: |d| gguf_with(d, &[("llama.attention.head_count_kv", 0)]),
            commands: BOTH,
            args: &[],
            code: 2,
            needles: &["model.gguf", "'llama.attention.head_count_kv'", "zero"],
            absent: &["config.json"],
        },
        Case {
            name: "gguf_block_count_zero_names_config_json",
            build: |d| gguf_with(d, &[("llama.block_count", 0)]),
            commands: BOTH,
            args: &[],
            code: 2,
            needles: &["model.gguf", "'llama.block_count'", "no layers"],
            absent: &["config.json"],
        },
        Case {
            name: "gguf_embedding_length_mismatch_names_config_json",
            build: |d| gguf_with(d, &[("llama.embedding_length", 16)]),
            commands: BOTH,
            args: &[],
            code: 2,
            needles: &["model.gguf", "'llama.embedding_length'", "hidden size 16"],
            absent: &["config.json"],
        },
        Case {
            name: "gguf_negative_head_count_is_ignored",
            build: |d| gguf_with(d, &[("llama.attention.head_count", -12)]),
            commands: BOTH,
            args: &[],
            code: 2,
            needles: &["model.gguf", "'llama.attention.head_count'", "-12"],
            absent: &["config.json"],
        },
        Case {
            name: "gguf_head_count_above_u32_is_truncated",
            build: |d| gguf_with(d, &[("llama.attention.head_count", (1 << 40) + 2)]),
            commands: BOTH,
            args: &[],
            code: 2,
            needles: &["model.gguf", "'llama.attention.head_count'"],
            absent: &["config.json"],
        },
        Case {
            name: "config_without_model_type_says_unsupported_architecture_empty",
            build: |d| {
                bert_dir(
                    d,
                    json!({"num_hidden_layers": 1, "hidden_size": N, "num_attention_heads": 2}),
                )
            },
            commands: BOTH,
            args: &[],
            code: 2,
            needles: &[
                "config.json",
                "no 'model_type' key and no recognised 'architectures' entry",
            ],
            absent: &["''"],
        },
        Case {
            name: "config_without_model_type_with_unknown_architectures",
            build: |d| bert_dir(d, json!({"architectures": ["T5Model"]})),
            commands: BOTH,
            args: &[],
            code: 2,
            needles: &["config.json", "no 'model_type' key", "T5Model"],
            absent: &[],
        },
        Case {
            name: "config_model_type_not_a_string",
            build: |d| bert_dir(d, json!({"model_type": 5, "architectures": ["BertModel"]})),
            commands: BOTH,
            args: &[],
            code: 2,
            needles: &["config.json", "'model_type'", "not a string"],
            absent: &[],
        },
        Case {
            name: "inspect_describes_a_missing_layer",
            build: |d| bert_dir(d, bert_config(json!(2))),
            commands: BOTH,
            args: &[],
            code: 2,
            needles: &[
                "model.safetensors",
                "'encoder.layer.1.attention.self.query.weight'",
                "missing tensor",
            ],
            absent: &[],
        },
        Case {
            name: "inspect_describes_a_missing_value_tensor",
            build: |d| {
                write_st(
                    &d.join("model.safetensors"),
                    &bert_layer(0, &["attention.self.value"], I),
                );
                write_config(d, &bert_config(json!(1)));
                d.to_path_buf()
            },
            commands: BOTH,
            args: &[],
            code: 2,
            needles: &[
                "'encoder.layer.0.attention.self.value.weight'",
                "missing tensor",
            ],
            absent: &[],
        },
        Case {
            name: "inspect_describes_a_misshapen_ffn_tensor",
            build: |d| {
                write_st(&d.join("model.safetensors"), &bert_layer(0, &[], I - 1));
                write_config(d, &bert_config(json!(1)));
                d.to_path_buf()
            },
            commands: BOTH,
            args: &[],
            code: 2,
            needles: &[
                "'encoder.layer.0.output.dense.weight'",
                "[8, 15]",
                "[8, 16]",
            ],
            absent: &[],
        },
        Case {
            name: "inspect_huge_layer_count_exhausts_memory",
            build: |d| bert_dir(d, bert_config(json!(1_000_000_000_000_000u64))),
            commands: BOTH,
            args: &[],
            code: 2,
            // Refused by the cap on layers (issue 32), before any list.
            needles: &[
                "config.json",
                "'num_hidden_layers'",
                "1000000000000000 layers, more than the limit of 4096",
            ],
            absent: &[],
        },
        Case {
            name: "distilbert_zero_layers_names_num_hidden_layers",
            build: |d| {
                let ts: Vec<(String, DenseMatrix)> = bert_layer(0, &[], I)
                    .into_iter()
                    .zip([
                        "attention.q_lin",
                        "attention.k_lin",
                        "attention.v_lin",
                        "attention.out_lin",
                        "ffn.lin1",
                        "ffn.lin2",
                    ])
                    .map(|((_, m), n)| (format!("transformer.layer.0.{n}.weight"), m))
                    .collect();
                write_st(&d.join("model.safetensors"), &ts);
                write_config(
                    d,
                    &json!({"model_type": "distilbert", "n_layers": 0, "dim": N, "n_heads": 2, "hidden_dim": I}),
                );
                d.to_path_buf()
            },
            commands: BOTH,
            args: &[],
            code: 2,
            needles: &["config.json", "'n_layers'", "no layers"],
            absent: &["'num_hidden_layers'"],
        },
        Case {
            name: "heads_flag_zero_names_a_missing_config_json",
            build: |d| {
                let f = d.join("weights.safetensors");
                write_st(&f, &bert_layer(0, &[], I));
                f
            },
            commands: BOTH,
            args: &["--heads", "0"],
            code: 2,
            needles: &["weights.safetensors", "--heads 0"],
            absent: &["config.json"],
        },
        Case {
            name: "layers_flag_zero_names_a_missing_config_json",
            build: |d| {
                let f = d.join("weights.safetensors");
                write_st(&f, &bert_layer(0, &[], I));
                f
            },
            commands: &["certify"],
            args: &["--heads", "2", "--layers", "0"],
            code: 2,
            needles: &["weights.safetensors", "--layers 0"],
            absent: &["config.json"],
        },
    ]
}

/// The binary under test: `SPECBOUND_BIN` when set, else the one built here.
fn binary() -> PathBuf {
    std::env::var_os("SPECBOUND_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_specbound")))
}

/// Exit code (None: killed, by a signal or after 60 s), stdout, stderr,
/// with the address space capped at 4 GiB so that a runaway allocation
/// fails fast instead of taking the machine.
fn run_capped(args: &[&str]) -> (Option<i32>, String, String) {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(binary());
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 4 << 30,
                rlim_max: 4 << 30,
            };
            libc::setrlimit(libc::RLIMIT_AS, &lim);
            Ok(())
        });
    }
    let child = cmd.spawn().expect("binary runs");
    let pid = child.id() as libc::pid_t;
    // Pipes are drained while waiting, so a chatty child cannot block.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(out) => out,
        Err(_) => {
            // SAFETY: our own child, not yet reaped (its waiter has not returned).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            rx.recv().unwrap()
        }
    }
    .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn hostile_architecture_facts_give_one_line_errors_naming_file_and_key() {
    let base = common::process_scratch().join("hostile-arch");
    let mut failures = Vec::new();
    for case in cases() {
        let dir = base.join(case.name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let model = (case.build)(&dir);
        let mut messages = Vec::new();
        for cmd in case.commands {
            let mut args = vec![*cmd, model.to_str().unwrap()];
            args.extend_from_slice(case.args);
            let (code, stdout, stderr) = run_capped(&args);
            // The first non-empty line (with the message after a panic's location).
            let mut lines = stderr.lines().filter(|l| !l.trim().is_empty());
            let mut first = lines.next().unwrap_or("").to_string();
            if first.contains("panicked") {
                first = format!("{first} {}", lines.next().unwrap_or(""));
            }
            println!(
                "{} | {cmd} | exit {} | {}",
                case.name,
                code.map_or("killed".into(), |c| c.to_string()),
                if first.is_empty() {
                    stdout.lines().next().unwrap_or("").to_string()
                } else {
                    first.clone()
                }
            );
            let mut why = Vec::new();
            if code != Some(case.code) {
                why.push(format!("exit {code:?}, expected {}", case.code));
            }
            if stderr.contains("panicked") {
                why.push("panicked".into());
            }
            if stderr.trim_end().lines().count() != 1 {
                why.push(format!("{} lines on stderr", stderr.lines().count()));
            }
            if !stdout.is_empty() {
                why.push("output on stdout".into());
            }
            for n in case.needles {
                if !stderr.contains(n) {
                    why.push(format!("'{n}' missing"));
                }
            }
            for n in case.absent {
                if stderr.contains(n) {
                    why.push(format!("'{n}' present"));
                }
            }
            if !why.is_empty() {
                failures.push(format!(
                    "{} ({cmd}): {}: {stderr}",
                    case.name,
                    why.join(", ")
                ));
            }
            messages.push(stderr);
        }
        // inspect reports what certify reports, word for word.
        if messages.windows(2).any(|w| w[0] != w[1]) {
            failures.push(format!(
                "{}: certify and inspect disagree: {messages:?}",
                case.name
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&base);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Numbers a hostile config or GGUF file may hold.
const EXTREMES: [i128; 10] = [
    0,
    1,
    2,
    3,
    4,
    -1,
    1 << 32,
    (1 << 62) + 2,
    (1 << 63) + 4,
    u64::MAX as i128,
];

#[test]
fn extreme_fact_values_never_panic_detect_describe_or_extract() {
    let dir = common::process_scratch().join("arch-extremes");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cfg_keys = [
        "num_hidden_layers",
        "hidden_size",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "intermediate_size",
    ];
    let gguf_keys = [
        "llama.block_count",
        "llama.embedding_length",
        "llama.attention.head_count",
        "llama.attention.head_count_kv",
        "llama.attention.key_length",
        "llama.feed_forward_length",
    ];
    let mut rng = Rng(20260807);
    let llama = dir.join("llama");
    std::fs::create_dir_all(&llama).unwrap();
    write_st(&llama.join("model.safetensors"), &llama_layer(N, N));
    let check = |ck: &Checkpoint, what: &str| {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for ov in [
                ArchOverrides::default(),
                ArchOverrides {
                    heads: Some(2),
                    layers: None,
                    stack: None,
                },
            ] {
                if let Ok(a) = arch::detect(ck, &ov) {
                    let d = arch::describe(ck, &a);
                    let e = arch::extract(ck, &a);
                    // A recipe is described exactly when it is run.
                    assert_eq!(d.is_ok(), e.is_ok(), "{what}");
                    if let (Ok((descs, _)), Ok(mats)) = (d, e) {
                        assert_eq!(descs.len(), mats.len(), "{what}");
                    }
                }
            }
        }));
        assert!(r.is_ok(), "{what}: panicked");
    };
    for round in 0..300 {
        // Config values: some keys extreme, some of the wrong type or absent.
        let mut cfg = serde_json::Map::new();
        cfg.insert("model_type".into(), json!("llama"));
        let mut vals = vec![1i128, N as i128, 2, 2, 4, I as i128];
        for (k, key) in cfg_keys.iter().enumerate() {
            let v = match rng.below(4) {
                0 => EXTREMES[rng.below(EXTREMES.len())],
                1 => continue,
                _ => vals[k],
            };
            vals[k] = v;
            let jv = if v < 0 {
                json!(v as i64)
            } else if v > u64::MAX as i128 {
                json!("huge")
            } else {
                json!(v as u64)
            };
            cfg.insert(key.to_string(), jv);
        }
        write_config(&llama, &Value::Object(cfg.clone()));
        let ck = Checkpoint::open(&llama).unwrap();
        check(&ck, &format!("config {}", Value::Object(cfg)));
        // The same values as GGUF metadata.
        let meta: Vec<(&str, i128)> = gguf_keys
            .iter()
            .zip(&vals)
            .filter(|_| rng.below(5) != 0)
            .map(|(k, v)| (*k, *v))
            .collect();
        let gd = dir.join(format!("g{}", round % 2));
        std::fs::create_dir_all(&gd).unwrap();
        let f = gguf_file(&gd, &meta);
        let ck = Checkpoint::open(&f).unwrap();
        check(&ck, &format!("gguf {meta:?}"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// An ALBERT whose one shared group is stored once (hidden 8, 2 heads).
fn albert(dir: &Path, extra: Value) -> String {
    let names = [
        ("attention.query", 8, 8),
        ("attention.key", 8, 8),
        ("attention.value", 8, 8),
        ("attention.dense", 8, 8),
        ("ffn", 16, 8),
        ("ffn_output", 8, 16),
    ];
    let ts: Vec<(String, DenseMatrix)> = names
        .iter()
        .enumerate()
        .map(|(k, &(n, r, c))| {
            (
                format!("albert.encoder.albert_layer_groups.0.albert_layers.0.{n}.weight"),
                hostile::mat(r, c, k),
            )
        })
        .collect();
    let mut cfg = json!({"model_type": "albert", "num_hidden_layers": 3, "hidden_size": 8,
        "num_attention_heads": 2, "intermediate_size": 16, "hidden_act": "gelu",
        "num_hidden_groups": 1, "inner_group_num": 1, "embedding_size": 8});
    for (k, v) in extra.as_object().unwrap() {
        cfg[k] = v.clone();
    }
    hostile::write_model(dir, &ts, &cfg)
}

/// A one-layer Mixtral with three experts (hidden 8, 2 heads).
fn mixtral(dir: &Path, extra: Value) -> String {
    let mut ts = Vec::new();
    for (k, n) in ["q_proj", "k_proj", "v_proj", "o_proj"].iter().enumerate() {
        ts.push((
            format!("model.layers.0.self_attn.{n}.weight"),
            hostile::mat(8, 8, k),
        ));
    }
    for e in 0..3 {
        let p = format!("model.layers.0.block_sparse_moe.experts.{e}");
        ts.push((format!("{p}.w1.weight"), hostile::mat(16, 8, e)));
        ts.push((format!("{p}.w3.weight"), hostile::mat(16, 8, e + 1)));
        ts.push((format!("{p}.w2.weight"), hostile::mat(8, 16, e + 2)));
    }
    ts.push((
        "model.layers.0.block_sparse_moe.gate.weight".into(),
        hostile::mat(3, 8, 9),
    ));
    let mut cfg = json!({"model_type": "mixtral", "num_hidden_layers": 1, "hidden_size": 8,
        "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 4,
        "intermediate_size": 16, "num_local_experts": 3, "num_experts_per_tok": 2});
    for (k, v) in extra.as_object().unwrap() {
        cfg[k] = v.clone();
    }
    hostile::write_model(dir, &ts, &cfg)
}

#[test]
fn counts_that_drive_work_are_capped_naming_the_key() {
    let mut failures = Vec::new();
    type Build = fn(&Path, Value) -> String;
    /// Name, model, config keys set, needles, extra flags.
    type CountCase = (
        &'static str,
        Build,
        Value,
        &'static [&'static str],
        Vec<&'static str>,
    );
    let cases: Vec<CountCase> = vec![
        (
            "albert-million-layers",
            albert,
            json!({"num_hidden_layers": 1_000_000}),
            &[
                "'num_hidden_layers'",
                "1000000 layers, more than the limit of 4096",
            ],
            vec![],
        ),
        (
            "albert-2^62-layers",
            albert,
            json!({"num_hidden_layers": 1u64 << 62}),
            &["'num_hidden_layers'", "more than the limit of 4096"],
            vec![],
        ),
        (
            "albert-inner-groups",
            albert,
            json!({"inner_group_num": 1u64 << 40}),
            &["'inner_group_num'", "layers per group, more than the limit"],
            vec![],
        ),
        (
            "albert-blocks",
            albert,
            json!({"num_hidden_layers": 4000, "inner_group_num": 4000}),
            &[
                "'inner_group_num'",
                "16000000 blocks, more than the limit of 4096",
            ],
            vec![],
        ),
        (
            "albert-groups",
            albert,
            json!({"num_hidden_groups": 1_000_000}),
            &["'num_hidden_groups'", "groups, more than the limit"],
            vec![],
        ),
        (
            "albert-heads",
            albert,
            json!({"num_attention_heads": 1u64 << 40}),
            &[
                "'num_attention_heads'",
                "attention heads, more than the limit of 65536",
            ],
            vec![],
        ),
        (
            "albert-layers-flag",
            albert,
            json!({}),
            &["--layers 1000000000", "layers, more than the limit of 4096"],
            vec!["--layers", "1000000000"],
        ),
        (
            "mixtral-experts",
            mixtral,
            json!({"num_local_experts": 1u64 << 40}),
            &[
                "'num_local_experts'",
                "experts, more than the limit of 65536",
            ],
            vec![],
        ),
        (
            "mixtral-per-token-2^63",
            mixtral,
            json!({"num_experts_per_tok": 1u64 << 63}),
            &[
                "'num_experts_per_tok'",
                "9223372036854775808 experts per token, more than the 3 experts there are",
            ],
            vec![],
        ),
        (
            "mixtral-per-token-4-of-3",
            mixtral,
            json!({"num_experts_per_tok": 4}),
            &[
                "'num_experts_per_tok'",
                "4 experts per token, more than the 3",
            ],
            vec![],
        ),
        (
            "mixtral-kv-heads",
            mixtral,
            json!({"num_key_value_heads": 1u64 << 33}),
            &[
                "'num_key_value_heads'",
                "key/value heads, more than the limit",
            ],
            vec![],
        ),
    ];
    for (name, build, extra, needles, flags) in cases {
        let d = tmpdir(name);
        let model = build(&d, extra);
        // `--layers` is a flag of certify only.
        let cmds: &[&str] = if flags.is_empty() {
            &["inspect", "certify"]
        } else {
            &["certify"]
        };
        for &cmd in cmds {
            let mut args = vec![cmd.to_string(), model.clone()];
            args.extend(flags.iter().map(|f| f.to_string()));
            let mut all = vec!["config.json"];
            all.extend_from_slice(needles);
            if flags.contains(&"--layers") {
                all.retain(|n| *n != "config.json");
            }
            failures.extend(hostile::refused(
                &format!("{name} {cmd}"),
                &args,
                &all,
                150,
                20,
            ));
        }
        let _ = std::fs::remove_dir_all(&d);
    }
    // The same models with sane counts are read (the caps refuse no real model).
    let d = tmpdir("counts-ok");
    let a = albert(&d.join("a").tap_mkdir(), json!({"num_hidden_layers": 12}));
    let m = mixtral(&d.join("m").tap_mkdir(), json!({}));
    for model in [a, m] {
        let o = common::run(&["inspect", &model, "--json"]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&d);
    hostile::assert_none(failures);
}

trait TapMkdir {
    fn tap_mkdir(self) -> Self;
}

impl TapMkdir for PathBuf {
    fn tap_mkdir(self) -> Self {
        std::fs::create_dir_all(&self).unwrap();
        self
    }
}
