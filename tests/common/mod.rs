//! Exact test matrices with known singular values, and exact containment checks.
//!
//! Constructions (reference: verified-numerics.md section 7): dyadic
//! orthogonal matrices (block-diagonal Sylvester–Hadamard blocks H_{4^j}/2^j
//! mixed by random signed permutations, and products of two such), and
//! A = D Q (rows scaled by d_i), whose singular values are exactly |d_i|
//! because every entry d_i q_ij is computed exactly.
#![allow(dead_code)]

pub mod authors_float;
pub mod family;
pub mod formats;
pub mod hostile;
pub mod llama;
pub mod reemit;
pub mod schema;
pub mod torch;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rug::Rational;
use specbound::enclosure::Enclosure;
use specbound::matrix::DenseMatrix;

/// A small deterministic generator (xorshift64*), so tests are reproducible.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    pub fn sign(&mut self) -> f64 {
        if self.next_u64() & 1 == 0 {
            1.0
        } else {
            -1.0
        }
    }
}

/// Sylvester–Hadamard H_{2^k} (entries +-1).
pub fn hadamard(k: u32) -> Vec<Vec<f64>> {
    let mut h = vec![vec![1.0]];
    for _ in 0..k {
        let n = h.len();
        let mut g = vec![vec![0.0; 2 * n]; 2 * n];
        for i in 0..n {
            for j in 0..n {
                g[i][j] = h[i][j];
                g[i][j + n] = h[i][j];
                g[i + n][j] = h[i][j];
                g[i + n][j + n] = -h[i][j];
            }
        }
        h = g;
    }
    h
}

/// `S_r P_r Q P_c S_c` for the `n x n` row-major `q`: random signed
/// permutations on both sides (exactly orthogonal if `q` is).
fn signed_permutations(q: &[f64], n: usize, rng: &mut Rng) -> Vec<f64> {
    let mut pr: Vec<usize> = (0..n).collect();
    let mut pc: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        pr.swap(i, rng.below(i + 1));
        pc.swap(i, rng.below(i + 1));
    }
    let sr: Vec<f64> = (0..n).map(|_| rng.sign()).collect();
    let sc: Vec<f64> = (0..n).map(|_| rng.sign()).collect();
    let mut out = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            out[i * n + j] = sr[i] * sc[j] * q[pr[i] * n + pc[j]];
        }
    }
    out
}

/// An exactly orthogonal dyadic n x n matrix (row-major), dense within blocks
/// of size up to 64, mixed by random signed permutations; `mix` multiplies
/// two such matrices (still exact: entries are short sums of powers of two).
pub fn dyadic_orthogonal(n: usize, rng: &mut Rng, mix: bool) -> Vec<f64> {
    let one = |rng: &mut Rng| -> Vec<f64> {
        let mut q = vec![0.0; n * n];
        let mut start = 0;
        while start < n {
            let left = n - start;
            let j = [3u32, 2, 1, 0]
                .into_iter()
                .find(|&j| 4usize.pow(j) <= left && (j == 0 || rng.below(3) != 0))
                .unwrap_or(0);
            let b = 4usize.pow(j);
            let h = hadamard(2 * j);
            let scale = 0.5f64.powi(j as i32);
            for a in 0..b {
                for c in 0..b {
                    q[(start + a) * n + start + c] = h[a][c] * scale;
                }
            }
            start += b;
        }
        signed_permutations(&q, n, rng)
    };
    let q1 = one(rng);
    if !mix {
        return q1;
    }
    let q2 = one(rng);
    let mut out = vec![0.0; n * n];
    for i in 0..n {
        for k in 0..n {
            let a = q1[i * n + k];
            if a == 0.0 {
                continue;
            }
            for j in 0..n {
                out[i * n + j] += a * q2[k * n + j];
            }
        }
    }
    out
}

/// A = D Q[0..m, :] (m <= n) or its transpose, with singular values exactly |d|.
/// Every entry is one exact product d_i q_ij (requires d_i q_ij exact: d_i with
/// few significant bits, or the caller accepts only powers of two).
pub fn scaled_rows(d: &[f64], n: usize, transpose: bool, rng: &mut Rng) -> DenseMatrix {
    let m = d.len();
    assert!(m <= n);
    let q = dyadic_orthogonal(n, rng, true);
    let mut a = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let x = d[i] * q[i * n + j];
            a[i * n + j] = x;
        }
    }
    if transpose {
        let mut t = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                t[j * m + i] = a[i * n + j];
            }
        }
        DenseMatrix {
            rows: n,
            cols: m,
            data: t,
        }
    } else {
        DenseMatrix {
            rows: m,
            cols: n,
            data: a,
        }
    }
}

/// `n x n` block-diagonal `H_b / sqrt(b)` (`b = 4^j`), rows and columns
/// permuted with random signs: exactly orthogonal, entries `+-2^-j`.
pub fn block_hadamard(n: usize, j: u32, rng: &mut Rng) -> Vec<f64> {
    let b = 4usize.pow(j);
    assert_eq!(n % b, 0);
    let h = hadamard(2 * j);
    let scale = 0.5f64.powi(j as i32);
    let mut q = vec![0.0; n * n];
    for i in 0..n {
        for c in (i / b * b)..(i / b * b + b) {
            q[i * n + c] = h[i % b][c % b] * scale;
        }
    }
    signed_permutations(&q, n, rng)
}

/// `rows x d.len()` matrix `(D Q[0..k, :])^T` with `Q` from
/// [`block_hadamard`]: its singular values are exactly `|d|`.
pub fn dq_t(rows: usize, d: &[f64], j: u32, seed: u64) -> DenseMatrix {
    let mut rng = Rng(seed);
    let q = block_hadamard(rows, j, &mut rng);
    let k = d.len();
    let mut data = vec![0.0; rows * k];
    for (i, &di) in d.iter().enumerate() {
        for c in 0..rows {
            data[c * k + i] = di * q[i * rows + c];
        }
    }
    DenseMatrix {
        rows,
        cols: k,
        data,
    }
}

/// Nearest float16 value of a positive normal-range `x` (11 significant bits).
pub fn f16(x: f64) -> f64 {
    let e = x.log2().floor() as i32;
    let q = 2f64.powi(e - 10);
    (x / q).round() * q
}

/// `kron(I_k, B)` for a `br x bc` block `B` of random float16 integers
/// times `2^-10` (row-major): every singular value of `B` repeated `k` times.
pub fn kron_blocks(k: usize, br: usize, bc: usize, seed: u64) -> (DenseMatrix, DenseMatrix) {
    let mut rng = Rng(seed);
    let b: Vec<f64> = (0..br * bc)
        .map(|_| rng.sign() * (1 + rng.below(2047)) as f64 * 2f64.powi(-10))
        .collect();
    let (rows, cols) = (k * br, k * bc);
    let mut data = vec![0.0; rows * cols];
    for blk in 0..k {
        for i in 0..br {
            for j in 0..bc {
                data[(blk * br + i) * cols + blk * bc + j] = b[i * bc + j];
            }
        }
    }
    (
        DenseMatrix { rows, cols, data },
        DenseMatrix {
            rows: br,
            cols: bc,
            data: b,
        },
    )
}

/// The exact singular values |d_i| sorted descending, padded with zeros to
/// min(rows, cols) (for the D Q construction min(rows, cols) = len(d)).
pub fn sorted_abs(d: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = d.iter().map(|x| x.abs()).collect();
    v.sort_by(|a, b| b.partial_cmp(a).unwrap());
    v
}

/// Exact containment of an exact f64 oracle value.
pub fn assert_contains_all(encs: &[Enclosure], oracle: &[f64], what: &str) {
    assert_eq!(encs.len(), oracle.len(), "{what}: count");
    for (i, (e, &x)) in encs.iter().zip(oracle).enumerate() {
        assert!(
            e.lo() <= x && x <= e.hi(),
            "{what}: sigma_{} = {x:e} not in [{:e}, {:e}]",
            i + 1,
            e.lo(),
            e.hi()
        );
    }
}

/// Exact containment of sqrt(q) for a rational q: lo^2 <= q <= hi^2 with lo >= 0.
pub fn assert_contains_sqrt(e: &Enclosure, q: &Rational, what: &str) {
    let lo = Rational::from_f64(e.lo()).unwrap();
    let hi = Rational::from_f64(e.hi()).unwrap();
    assert!(e.lo() >= 0.0, "{what}: negative lower bound");
    assert!(
        Rational::from(&lo * &lo) <= *q && *q <= Rational::from(&hi * &hi),
        "{what}: sqrt({q}) not in [{:e}, {:e}]",
        e.lo(),
        e.hi()
    );
}

/// The real `specbound` binary built for these tests.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_specbound"))
}

/// Runs the binary with `args`.
pub fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("binary runs")
}

/// The fifteen spectral keys of a certificate's matrix entry (a part's,
/// and a certificate-without-a-bound's `spectra[]` entries, hold them).
pub const SPECTRAL_KEYS: [&str; 15] = [
    "layer",
    "head",
    "type",
    "rows",
    "cols",
    "spectral_norm",
    "frobenius_norm",
    "nuclear_norm",
    "norm_21",
    "norm_11",
    "stable_rank",
    "rank",
    "singular_values",
    "structural_zeros",
    "method",
];

/// The exact power of two `2^k` as a binary64, for `-1074 <= k <= 1023`
/// (subnormals included): the product of two normal powers built from
/// their bits, exact.
pub fn pow2(k: i32) -> f64 {
    let half = k / 2;
    let bits = |e: i32| f64::from_bits(((e + 1023) as u64) << 52);
    bits(half) * bits(k - half)
}

/// `2^e` as an exact rational, any `e`.
pub fn pow2_rational(e: i32) -> rug::Rational {
    let one = rug::Integer::from(1);
    if e >= 0 {
        rug::Rational::from(one << e.unsigned_abs())
    } else {
        rug::Rational::from((rug::Integer::from(1), one << e.unsigned_abs()))
    }
}

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A fresh, empty scratch directory `name` in this test process's folder
/// of the system's temporary directory ([`process_scratch`]), which is
/// removed when the process exits.
pub fn tmpdir(name: &str) -> PathBuf {
    let d = process_scratch().join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Names the variable that keeps a test process's scratch folder after it
/// exits, for inspecting a failure.
pub const KEEP_SCRATCH: &str = "SPECBOUND_KEEP_SCRATCH";

/// This test process's folder `specbound-tests/<test file>-<pid>` in the
/// system's temporary directory. It is removed at exit (unless
/// [`KEEP_SCRATCH`] is set), and the folders of processes that are gone (a
/// killed run) are removed the first time. Each suite run used to leave
/// about 2.6 GB here, until a CI run found the disk full.
pub fn process_scratch() -> &'static Path {
    static D: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    extern "C" fn remove_at_exit() {
        if let Some(d) = D.get() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
    D.get_or_init(|| {
        // `module_path!()` here is `<test crate>::common`: the test file's name.
        let file = module_path!().split("::").next().unwrap_or("tests");
        let base = std::env::temp_dir().join("specbound-tests");
        std::fs::create_dir_all(&base).unwrap();
        remove_folders_of_gone_processes(&base);
        if std::env::var_os(KEEP_SCRATCH).is_none() {
            // SAFETY: registers a plain function with no captured state.
            unsafe { libc::atexit(remove_at_exit) };
        }
        base.join(format!("{file}-{}", std::process::id()))
    })
}

/// Removes the folders `<name>-<pid>` under `base` whose process is gone.
fn remove_folders_of_gone_processes(base: &Path) {
    for e in std::fs::read_dir(base).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let pid = name.rsplit('-').next().unwrap_or("");
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// A fresh directory `name` for large outputs (a study's family is about
/// 90 MB, figures' runs keep their SVGs for inspection): under cargo's
/// target tmp directory, not the system one, in this test file's folder
/// and this process's `pid-<id>`; the folders of test processes that are
/// gone are removed the first time.
pub fn target_tmpdir(name: &str) -> PathBuf {
    static D: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let scratch = D.get_or_init(|| {
        let file = module_path!().split("::").next().unwrap_or("tests");
        let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(file);
        std::fs::create_dir_all(&base).unwrap();
        for e in std::fs::read_dir(&base).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if let Some(pid) = name.strip_prefix("pid-") {
                if !Path::new("/proc").join(pid).exists() {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        base.join(format!("pid-{}", std::process::id()))
    });
    let d = scratch.join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The bundled model, `data/all-MiniLM-L6-v2`.
pub fn bundled() -> PathBuf {
    root().join("data/all-MiniLM-L6-v2")
}

/// [`bundled`] as a command-line argument.
pub fn bundled_arg() -> String {
    bundled().to_string_lossy().into_owned()
}

/// The bundled matrix, `data/minilm-l0-query.npy`.
pub fn bundled_npy() -> PathBuf {
    root().join("data/minilm-l0-query.npy")
}

/// Parses stdout as JSON after asserting success.
pub fn ok_json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

/// The bundled model's certificate (`certify --json`), certified once per
/// test process.
pub fn cert_json() -> serde_json::Value {
    use std::sync::OnceLock;
    static C: OnceLock<serde_json::Value> = OnceLock::new();
    C.get_or_init(|| ok_json(&run(&["certify", "--json"])))
        .clone()
}

/// A run's exit code (-1 when killed by a signal).
pub fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

/// A run's stdout then stderr, as text.
pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A bad-input run: exit code 2, one line on stderr containing every
/// needle, no panic, nothing on stdout.
pub fn assert_bad(args: &[&str], needles: &[&str]) {
    let out = run(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "args {args:?}: stderr {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "one line expected: {err}"
    );
    for n in needles {
        assert!(err.contains(n), "'{n}' not in: {err}");
    }
    assert!(out.stdout.is_empty(), "no partial output expected");
}

/// Writes a safetensors file of 2-D tensors stored as `dtype` ("F32",
/// "F64" or "BF16"; F32 and BF16 round to nearest).
pub fn write_safetensors(path: &Path, tensors: &[(String, &DenseMatrix)], dtype: &str) {
    let mut header = serde_json::Map::new();
    let mut data: Vec<u8> = Vec::new();
    for (name, m) in tensors {
        let start = data.len();
        for &x in &m.data {
            match dtype {
                "F64" => data.extend_from_slice(&x.to_le_bytes()),
                "F32" => data.extend_from_slice(&(x as f32).to_le_bytes()),
                "BF16" => data.extend_from_slice(&half::bf16::from_f64(x).to_bits().to_le_bytes()),
                other => panic!("unsupported test dtype {other}"),
            }
        }
        header.insert(
            name.clone(),
            serde_json::json!({"dtype": dtype, "shape": [m.rows, m.cols], "data_offsets": [start, data.len()]}),
        );
    }
    let mut h = serde_json::to_vec(&serde_json::Value::Object(header)).unwrap();
    while h.len() % 8 != 0 {
        h.push(b' ');
    }
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&h);
    out.extend_from_slice(&data);
    std::fs::write(path, out).unwrap();
}

/// Runs the binary with its data segment (heap, private writable mappings)
/// limited to `bytes` by `RLIMIT_DATA`: an input that makes it allocate more
/// ends in an allocation failure instead of an exit with a message. (Peak
/// RSS cannot be measured from a test process: a forked child's peak counts
/// the parent's pages until it execs.)
pub fn run_with_data_limit(args: &[&str], bytes: u64) -> Output {
    use std::os::unix::process::CommandExt;
    let mut cmd = bin();
    cmd.args(args);
    // SAFETY: setrlimit is async-signal-safe; nothing else runs in the hook.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: bytes as libc::rlim_t,
                rlim_max: bytes as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_DATA, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.output().expect("binary runs")
}

/// What a run of the binary gave.
#[allow(dead_code)]
pub struct Outcome {
    /// The exit code (None when killed by a signal).
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// The child's own peak resident memory.
    pub max_rss_kib: u64,
}

/// Runs `cmd` (the binary, its arguments and environment set), killing it
/// after `limit`; the peak memory is that of this child alone (`wait4`),
/// whatever else the tests run. Shared by the hostile-input tests.
// The child is reaped by `wait4` (which also gives its peak memory), not `wait`.
#[allow(clippy::zombie_processes, dead_code)]
pub fn run_measured(mut cmd: std::process::Command, limit: std::time::Duration) -> Outcome {
    use std::io::Read;
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let shown = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary runs");
    let pid = child.id() as libc::pid_t;
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let start = Instant::now();
    let (status, usage) = loop {
        let mut status = 0;
        // SAFETY: plain out-parameters for a child we spawned and have not reaped.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break (status, usage);
        }
        assert!(r == 0, "wait4 failed");
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{shown}: still running after {limit:?} (blocked or reading forever)");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    Outcome {
        code,
        stdout: String::from_utf8_lossy(&t_out.join().unwrap()).into_owned(),
        stderr: String::from_utf8_lossy(&t_err.join().unwrap()).into_owned(),
        max_rss_kib: usage.ru_maxrss as u64,
    }
}

/// A CSV file (no quoting) as rows of named fields; every row has the
/// header's number of cells.
pub fn csv_rows(path: &Path) -> Vec<std::collections::BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
    lines
        .map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            assert_eq!(cells.len(), header.len(), "{}: {l}", path.display());
            header
                .iter()
                .cloned()
                .zip(cells.iter().map(|c| c.to_string()))
                .collect()
        })
        .collect()
}

#[allow(dead_code)]
/// `D_l B D_r` with `D_l = diag(2^(e - 2e i/(m-1)))` (and `D_r` alike over
/// n) and `B` integers in [-127, 127]: entries from about `2^(2e+7)` down
/// to `2^-2e`, exactly representable (a 7-bit integer times a power of two).
pub fn graded(m: usize, n: usize, e: i32, seed: u64) -> DenseMatrix {
    let mut rng = Rng(seed);
    let d = |k: usize, len: usize| 2f64.powi(e - (2 * e * k as i32) / (len as i32 - 1));
    let mut data = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            data[i * n + j] = d(i, m) * (rng.below(255) as f64 - 127.0) * d(j, n);
        }
    }
    DenseMatrix {
        rows: m,
        cols: n,
        data,
    }
}

/// Runs the binary with `args` then `model`, asserts success, and returns
/// its peak resident set size in KiB (`wait4`'s `ru_maxrss`; the memory
/// tests, one test per file so that no other test raises the peak).
pub fn peak_kib(args: &[&str], model: &Path) -> i64 {
    let child = bin()
        .args(args)
        .arg(model)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("binary runs");
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: plain wait4 on our own child, with valid out-pointers; the
    // child is reaped here and its `Child` handle is never waited on.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    std::mem::forget(child);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{args:?} {} failed: status {status}",
        model.display()
    );
    ru.ru_maxrss
}
