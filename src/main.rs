//! The `specbound` command line: a thin layer over the library.
//!
//! Exit codes: 0 = certified / holds / consistent / unchanged; 1 =
//! inconclusive, a failed check or refuted quantity (verify), an
//! inconsistent claim (audit) or a certain change (diff), with the reason
//! printed; 2 = error (bad input or usage); 3 = undecided: audit claims
//! undecided or verify quantities unconfirmed (none wrong).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::{Parser, Subcommand};

use specbound::arch::ArchOverrides;
use specbound::certificate::{Certificate, ShardSpec};
use specbound::certify::{certify_run, CertifyOptions, Outcome as Certification, RunScope};
use specbound::linalg::{certify_singular_values, Precision, SvdOptions};
use specbound::report::SvdReport;
use specbound::spectral::{enclose_schatten, summarize, SchattenP};

#[derive(Parser)]
#[command(
    name = "specbound",
    version,
    about = "Certified spectral quantities of weight matrices"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// No progress bar (it is drawn on stderr only when stderr is a terminal).
    #[arg(long, short, global = true)]
    quiet: bool,
    /// How text output prints intervals, each rounded outward: shared
    /// (common digits, then the differing tails: 20573.029732297[44, 68]),
    /// pm (mid ± rad) or bounds ([lo, hi] in full). JSON and CSV are exact.
    #[arg(long, global = true, default_value = "shared", value_name = "STYLE")]
    intervals: specbound::report::fmt::Style,
}

#[derive(Subcommand)]
enum Command {
    /// Certified enclosures of all singular values and derived norms of one matrix.
    Svd {
        /// A 2-D `.npy` file (f2/f4/f8, C or Fortran order), a `.safetensors`, `.gguf` or
        /// PyTorch (`.bin`, `.pt`, `.pth`) file, or a model directory or Hugging Face id
        /// (with --tensor).
        input: PathBuf,
        /// Tensor name inside a safetensors, GGUF or PyTorch file or a model.
        #[arg(long)]
        tensor: Option<String>,
        /// Revision of a Hugging Face id (branch, tag or commit; default main).
        #[arg(long)]
        revision: Option<String>,
        /// Comma-separated Schatten exponents p >= 0 (decimals are exact; 0 = rank).
        #[arg(long, value_delimiter = ',', default_value = "1,2")]
        schatten_p: Vec<String>,
        /// auto (default: escalate until --rtol is met) | f64 | extended | mpfr:BITS
        #[arg(long, default_value = "auto")]
        precision: String,
        /// Target relative radius for `--precision auto` (sigma_1 and every value >= 1e-6 sigma_1).
        #[arg(long, default_value_t = 1e-11)]
        rtol: f64,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Certify a whole checkpoint: proxy matrices, their spectra, and the bound proxies.
    Certify {
        /// A Hugging Face model directory (config.json + model.safetensors or
        /// pytorch_model.bin, or a sharded index), a single .safetensors, PyTorch (.bin,
        /// .pt, .pth) or .gguf file, or a Hugging Face id (org/name) in the local cache.
        /// Default: the bundled all-MiniLM-L6-v2.
        model: Option<PathBuf>,
        /// Revision of a Hugging Face id (branch, tag or commit; default main).
        #[arg(long)]
        revision: Option<String>,
        /// Write the certificate (JSON) to this file (a new or regular file), atomically.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Write the four CSV tables (the authors' layout) into this directory.
        #[arg(long)]
        csv: Option<PathBuf>,
        /// Print the certificate JSON to stdout instead of a summary.
        #[arg(long)]
        json: bool,
        /// Lipschitz constant L_phi of the activation (exact decimal).
        #[arg(long, default_value = specbound::arch::PAPER_L_PHI)]
        l_phi: String,
        /// Grid resolution m of P_m = {0, 1/m, ..., 2} (default ceil(L + ln N)).
        #[arg(long)]
        grid_m: Option<usize>,
        /// f64 (default) | extended | auto | mpfr:BITS, for the singular values.
        #[arg(long, default_value = "f64")]
        precision: String,
        /// Number of attention heads (needed for a .safetensors file without config.json).
        #[arg(long)]
        heads: Option<usize>,
        /// Number of layers (default: from config.json or the tensors).
        #[arg(long)]
        layers: Option<usize>,
        /// The model_id column of observed_bounds.csv (default: the model's directory name).
        #[arg(long)]
        model_id: Option<String>,
        /// Certify only shard K of N (balanced by estimated cost) and write a part, not a
        /// certificate; `merge` makes the certificate from the N parts.
        #[arg(long, value_name = "K/N")]
        shard: Option<String>,
        /// Keep each finished layer's part in DIR; rerun with the same arguments to skip them.
        #[arg(long, value_name = "DIR")]
        resume_dir: Option<PathBuf>,
    },
    /// Merge the parts of a sharded run (certify --shard K/N) into one certificate.
    Merge {
        /// The parts, in any order (every matrix of the model exactly once).
        #[arg(required = true)]
        parts: Vec<PathBuf>,
        /// Write the certificate (JSON) to this file (a new or regular file), atomically.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Write the four CSV tables (the authors' layout) into this directory.
        #[arg(long)]
        csv: Option<PathBuf>,
        /// Print the certificate JSON to stdout instead of a summary.
        #[arg(long)]
        json: bool,
        /// The model_id column of observed_bounds.csv (default: the last component of model.path).
        #[arg(long)]
        model_id: Option<String>,
    },
    /// Certify many checkpoints and write the paper's tables, five figures and an HTML report.
    Study {
        /// Models: directories or files, as `certify` takes them.
        #[arg(value_name = "MODEL")]
        model: Vec<PathBuf>,
        /// A file listing models, one per line (`#` comment lines; relative paths are
        /// taken from the file's directory), after any MODEL arguments.
        #[arg(long = "models", value_name = "FILE")]
        models_file: Option<PathBuf>,
        /// Output directory (created if absent): certificates/, tables/, figures/, report.html.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// Model ids, one per model in order (default: each directory or file name).
        #[arg(long = "model-id", value_name = "ID")]
        model_id: Vec<String>,
        /// Id of the primary model of figures 1 and 5 (default: the largest, L N^2).
        #[arg(long)]
        primary: Option<String>,
        /// Layers of the primary model in figure 1 (`0-3`, `0,2,5`).
        #[arg(long, default_value = "0-3")]
        spectrum_layers: String,
        /// Lipschitz constant L_phi of the activation (exact decimal).
        #[arg(long, default_value = specbound::arch::PAPER_L_PHI)]
        l_phi: String,
        /// Grid resolution m of P_m = {0, 1/m, ..., 2} (default ceil(L + ln N) per model).
        #[arg(long)]
        grid_m: Option<usize>,
        /// f64 (default) | extended | auto | mpfr:BITS, for the singular values.
        #[arg(long, default_value = "f64")]
        precision: String,
        /// Number of attention heads (for .safetensors files without config.json).
        #[arg(long)]
        heads: Option<usize>,
        /// Number of layers (default: from config.json or the tensors).
        #[arg(long)]
        layers: Option<usize>,
    },
    /// The study's HTML report from existing certificates.
    Report {
        /// Certificates (JSON), e.g. a study's DIR/certificates/*.json.
        #[arg(value_name = "CERT", required = true)]
        certs: Vec<PathBuf>,
        /// The HTML file to write (atomically).
        #[arg(long, value_name = "FILE.html")]
        out: PathBuf,
        /// Model ids, one per certificate in order (default: each file's stem).
        #[arg(long = "model-id", value_name = "ID")]
        model_id: Vec<String>,
        /// Id of the primary model of figures 1 and 5 (default: the largest).
        #[arg(long)]
        primary: Option<String>,
        /// Layers of the primary model in figure 1 (`0-3`, `0,2,5`).
        #[arg(long, default_value = "0-3")]
        spectrum_layers: String,
    },
    /// Show the recognised architecture and the proxy matrices, without computing spectra.
    Inspect {
        /// A model directory, a .safetensors, PyTorch or .gguf file, or a Hugging Face id.
        model: PathBuf,
        /// Revision of a Hugging Face id (branch, tag or commit; default main).
        #[arg(long)]
        revision: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Number of attention heads (for a file without config.json or metadata).
        #[arg(long)]
        heads: Option<usize>,
        /// L_phi that certify would use (decides the L_phi extension note).
        #[arg(long, default_value = specbound::arch::PAPER_L_PHI)]
        l_phi: String,
    },
    /// Check a certificate: re-derive every aggregate; with --model, also the hashes and every matrix.
    Verify {
        /// The certificate (JSON).
        cert: PathBuf,
        /// The model directory, file or Hugging Face id the certificate describes.
        #[arg(long)]
        model: Option<PathBuf>,
        /// Revision of a Hugging Face id given to --model (default main).
        #[arg(long)]
        revision: Option<String>,
    },
    /// Check claimed numbers against certified values: a CSV of claims about a model, or
    /// another tool's singular values (a 1-D .npy) of one matrix.
    Audit {
        /// The model (directory, file or Hugging Face id); with a .npy of claimed singular
        /// values, any `svd` input (with --tensor where it needs one).
        model: PathBuf,
        /// The claims: a certify --csv table, a generic claims CSV, a WeightWatcher details
        /// CSV, or a 1-D .npy of claimed singular values (any float dtype, any order).
        claims: PathBuf,
        /// Print the audit as JSON.
        #[arg(long)]
        json: bool,
        /// Relative tolerance: CSV claims without a tolerance column get at least the window
        /// c ± (atol + rtol |c|); claimed singular values must meet |c - sigma| <= atol + rtol sigma.
        #[arg(long, default_value_t = 0.0)]
        rtol: f64,
        /// Absolute tolerance (see --rtol).
        #[arg(long, default_value_t = 0.0)]
        atol: f64,
        /// Method for the certified singular values: f64 (default) | extended | auto | mpfr:BITS.
        #[arg(long, default_value = "f64")]
        precision: String,
        /// A gap counts as float32 / float64 rounding when it is at most this many unit
        /// roundoffs (2^-24, 2^-53) of the certified value.
        #[arg(long, default_value_t = 1.0)]
        rounding_units: f64,
        /// Tensor name, for claimed singular values of a tensor of a file or model.
        #[arg(long)]
        tensor: Option<String>,
        /// Revision of a Hugging Face id (default main).
        #[arg(long)]
        revision: Option<String>,
    },
    /// Print a shell completion script for SHELL (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff) to stdout: `specbound man | man -l -`.
    Man,
    /// Compare two certificates quantity by quantity.
    Diff {
        /// The old certificate.
        a: PathBuf,
        /// The new certificate.
        b: PathBuf,
        /// Relative tolerance: exit 1 only for quantities that certainly changed by more.
        #[arg(long, default_value_t = 0.0)]
        rtol: f64,
        /// Print the comparison as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// The bundled model (search order in `specbound::bundle`).
fn default_model() -> Result<PathBuf> {
    Ok(specbound::bundle::locate()?)
}

/// A model argument: a path, or a Hugging Face id found in the local cache
/// (never downloaded).
fn model_arg(
    arg: &std::path::Path,
    revision: Option<&str>,
) -> Result<specbound::io::hub::Resolved> {
    Ok(specbound::io::hub::resolve(arg, revision)?)
}

/// The progress bar of a command (drawn only on a terminal, never with --quiet).
fn bar(label: &str, quiet: bool) -> specbound::progress::Bar {
    specbound::progress::Bar::matrices(label, quiet)
}

/// The matrix of an `svd` or spectrum-audit input: a matrix file, or a
/// tensor of a model directory or Hugging Face id.
fn load_matrix(
    input: &std::path::Path,
    tensor: Option<&str>,
    revision: Option<&str>,
) -> Result<(PathBuf, specbound::io::LoadedMatrix)> {
    let r = model_arg(input, revision)?;
    if r.path.is_dir() {
        let ck = specbound::io::checkpoint::Checkpoint::open(&r.path)?;
        let Some(t) = tensor else {
            let names = ck.two_d_float_tensors();
            bail!(
                "{}: a model: pass --tensor NAME ({} 2-D float tensors, e.g. {})",
                input.display(),
                names.len(),
                names.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
            );
        };
        return Ok((r.path, ck.read(t)?));
    }
    let m = specbound::io::read_matrix(&r.path, tensor)?;
    Ok((r.path, m))
}

/// Whether one certified SVD of an `rows x cols` matrix may take long
/// enough to deserve a spinner.
fn svd_is_large(rows: usize, cols: usize, prec: Precision) -> bool {
    let (m, n) = (rows.max(cols) as f64, rows.min(cols) as f64);
    match prec {
        Precision::Mpfr(_) => n >= 24.0,
        Precision::Auto => {
            m * n * n >= (1u64 << 26) as f64 || (m * n * n <= 2f64.powi(21) && n >= 48.0)
        }
        _ => m * n * n >= (1u64 << 26) as f64,
    }
}

fn parse_precision(s: &str) -> Result<Precision> {
    s.parse::<Precision>().map_err(anyhow::Error::msg)
}

enum Outcome {
    Certified,
    Inconclusive(String),
    /// A check failed (verify), a claim is wrong (audit), a quantity changed (diff): exit 1.
    Failed(String),
    /// Audit: some claims undecided, none inconsistent: exit 3.
    Undecided(String),
}

fn run(cli: Cli) -> Result<Outcome> {
    let st = cli.intervals;
    match cli.command {
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "specbound", &mut std::io::stdout());
            Ok(Outcome::Certified)
        }
        Command::Man => {
            let cmd = <Cli as clap::CommandFactory>::command();
            let mut out = Vec::new();
            clap_mangen::Man::new(cmd.clone()).render(&mut out)?;
            // One page: then, per subcommand, its synopsis and options.
            for sub in cmd.get_subcommands() {
                let name = sub.get_name().to_string();
                let sub = sub.clone().bin_name(format!("specbound {name}"));
                out.extend_from_slice(
                    format!(".SH \"SPECBOUND {}\"\n", name.to_uppercase()).as_bytes(),
                );
                let man = clap_mangen::Man::new(sub);
                man.render_synopsis_section(&mut out)?;
                man.render_description_section(&mut out)?;
                man.render_options_section(&mut out)?;
            }
            std::io::Write::write_all(&mut std::io::stdout(), &out)?;
            Ok(Outcome::Certified)
        }
        Command::Inspect {
            model,
            revision,
            json,
            heads,
            l_phi,
        } => {
            let resolved = model_arg(&model, revision.as_deref())?;
            let ck = specbound::io::checkpoint::Checkpoint::open(&resolved.path)?;
            let arch = specbound::arch::detect(
                &ck,
                &ArchOverrides {
                    heads,
                    layers: None,
                },
            )?;
            let (mats, unmapped) = specbound::arch::describe(&ck, &arch)?;
            let extensions = arch.extensions(&l_phi);
            let activation = arch.activation.as_ref().map_or_else(
                || "unknown".to_string(),
                |a| format!("{} ({})", a.name, a.source),
            );
            if json {
                let j = serde_json::json!({
                    "model": model.display().to_string(),
                    "architecture": arch.family,
                    "layout": arch.layout(),
                    "tensor_prefix": arch.prefix,
                    "layers": arch.layers,
                    "hidden": arch.hidden,
                    "heads": arch.heads,
                    "kv_heads": arch.kv_heads,
                    "head_dim": arch.head_dim,
                    "intermediate": arch.intermediate,
                    "activation": arch.activation.as_ref().map(|a| serde_json::json!({"name": a.name, "source": a.source})),
                    "extensions": extensions,
                    "matrices": mats,
                    "unmapped": unmapped.iter().map(|(n, s, d)| serde_json::json!({"tensor": n, "shape": s, "dtype": d})).collect::<Vec<_>>(),
                });
                println!("{}", serde_json::to_string_pretty(&j)?);
            } else {
                println!(
                    "{}: {} ({} layout, prefix '{}'): {} layers, hidden {}, {} heads of {} ({} key/value heads), feed-forward {}, activation {activation}",
                    model.display(), arch.family, arch.layout(), arch.prefix, arch.layers, arch.hidden, arch.heads, arch.head_dim, arch.kv_heads, arch.intermediate
                );
                for n in &extensions {
                    println!("EXTENSION OF THE PAPER: {n}");
                }
                println!("{} proxy matrices:", mats.len());
                for m in mats.iter().filter(|m| m.head <= 0 || m.layer == 0) {
                    println!(
                        "  layer {:>3} head {:>3} {:<8} {:>6} x {:<6} {}",
                        m.layer, m.head, m.kind, m.rows, m.cols, m.formed_from
                    );
                }
                println!("  (heads other than 0 shown for layer 0 only)");
                println!("{} tensors not used by the proxies:", unmapped.len());
                for (n, s, d) in unmapped.iter().take(40) {
                    println!("  {n} {s:?} {d}");
                }
                if unmapped.len() > 40 {
                    println!("  ... and {} more (use --json)", unmapped.len() - 40);
                }
            }
            Ok(Outcome::Certified)
        }
        Command::Verify {
            cert,
            model,
            revision,
        } => {
            let c = Certificate::read(&cert)?;
            let mut v = specbound::evidence::verify::verify_internal(&c);
            if v.failure.is_none() {
                if let Some(m) = &model {
                    let m = model_arg(m, revision.as_deref())?.path;
                    let b = bar("verify", cli.quiet);
                    v = v.merge(specbound::evidence::verify::verify_with_model_progress(
                        &c, &m, &b,
                    )?);
                }
            }
            if let Some(f) = v.failure {
                return Ok(Outcome::Failed(format!("{}: FAILED: {f}", cert.display())));
            }
            if !v.unconfirmed.is_empty() {
                println!(
                    "{}: {} checks passed; {} quantities could be neither confirmed nor refuted:",
                    cert.display(),
                    v.checks,
                    v.unconfirmed.len()
                );
                for u in v.unconfirmed.iter().take(50) {
                    println!("  {u}");
                }
                if v.unconfirmed.len() > 50 {
                    println!("  ... and {} more", v.unconfirmed.len() - 50);
                }
                return Ok(Outcome::Undecided(format!(
                    "{}: UNCONFIRMED: {} quantities (first: {})",
                    cert.display(),
                    v.unconfirmed.len(),
                    v.unconfirmed[0]
                )));
            }
            println!(
                "{}: certificate holds ({} checks{})",
                cert.display(),
                v.checks,
                if model.is_some() {
                    ", hashes and weights included: every interval contains the recomputed enclosure"
                } else {
                    "; internal consistency only, pass --model to check against the weights"
                }
            );
            Ok(Outcome::Certified)
        }
        Command::Audit {
            model,
            claims,
            json,
            rtol,
            atol,
            precision,
            rounding_units,
            tensor,
            revision,
        } => {
            use specbound::evidence::audit::Verdict;
            for (name, v) in [
                ("--rtol", rtol),
                ("--atol", atol),
                ("--rounding-units", rounding_units),
            ] {
                if !(v >= 0.0 && v.is_finite()) {
                    bail!("{name} must be a nonnegative number, got {v}");
                }
            }
            let prec = parse_precision(&precision)?;
            if is_npy(&claims) {
                return audit_spectrum(
                    &model,
                    &claims,
                    tensor.as_deref(),
                    revision.as_deref(),
                    prec,
                    rtol,
                    atol,
                    rounding_units,
                    json,
                    cli.quiet,
                    st,
                );
            }
            if tensor.is_some() {
                bail!("--tensor applies to claimed singular values (a .npy), not to a claims CSV");
            }
            let model = model_arg(&model, revision.as_deref())?.path;
            let opts = specbound::evidence::audit::AuditOptions {
                rtol,
                atol,
                precision: prec,
                rounding_units,
            };
            let b = bar("audit", cli.quiet);
            let rep = specbound::evidence::audit::audit_with(&model, &claims, &opts, &b)?;
            b.finish();
            if json {
                println!("{}", serde_json::to_string_pretty(&rep)?);
            } else {
                println!(
                    "{} ({} layout): {} claims: {} consistent, {} inconsistent ({} within float32 rounding, {} within float64 rounding), {} undecided",
                    claims.display(),
                    rep.layout,
                    rep.results.len(),
                    rep.consistent,
                    rep.inconsistent,
                    rep.within_float32_rounding,
                    rep.within_float64_rounding,
                    rep.undecided
                );
                println!(
                    "  {:>5}  {:<40} {:<20} {:>24}  {:<50} verdict",
                    "line", "subject", "quantity", "claim", "certified"
                );
                for r in &rep.results {
                    let v = match &r.verdict {
                        Verdict::Consistent => "consistent".to_string(),
                        Verdict::Inconsistent {
                            distance,
                            relative_error,
                            rounding,
                        } => {
                            let r = rounding
                                .as_ref()
                                .map(|r| format!(": {}", rounding_text(r)))
                                .unwrap_or_default();
                            format!("INCONSISTENT (off by {distance:.3e}, relative {relative_error:.3e}{r})")
                        }
                        Verdict::Undecided { width } => {
                            format!("undecided (certified interval {width:.3e} wide)")
                        }
                    };
                    println!(
                        "  {:>5}  {:<40} {:<20} {:>24}  {:<50} {v}",
                        r.line,
                        r.subject,
                        r.quantity,
                        r.claim,
                        specbound::report::fmt::interval(r.certified[0], r.certified[1], st)
                    );
                    if let Some(note) = &r.note {
                        println!("         note: {note}");
                    }
                }
            }
            if rep.inconsistent > 0 {
                Ok(Outcome::Failed(format!(
                    "{} of {} claims are inconsistent",
                    rep.inconsistent,
                    rep.results.len()
                )))
            } else if rep.undecided > 0 {
                Ok(Outcome::Undecided(format!(
                    "{} of {} claims are undecided",
                    rep.undecided,
                    rep.results.len()
                )))
            } else {
                Ok(Outcome::Certified)
            }
        }
        Command::Diff { a, b, rtol, json } => {
            if !(rtol >= 0.0 && rtol.is_finite()) {
                bail!("--rtol must be a nonnegative number, got {rtol}");
            }
            let ca = Certificate::read(&a)?;
            let cb = Certificate::read(&b)?;
            let d = specbound::evidence::diff::diff(&ca, &cb, rtol);
            if json {
                println!("{}", serde_json::to_string_pretty(&d)?);
            } else {
                print!("{}", d.to_text_with(25, st));
            }
            if d.certainly_changed {
                Ok(Outcome::Failed(format!(
                    "certainly changed: {} quantities beyond rtol = {}, {} parameter or architecture differences, {} quantities in one certificate only",
                    d.beyond_rtol,
                    d.rtol,
                    d.header
                        .iter()
                        .filter(|h| h.kind != specbound::evidence::diff::HeaderKind::Model)
                        .count(),
                    d.only_in_a + d.only_in_b
                )))
            } else {
                Ok(Outcome::Certified)
            }
        }
        Command::Study {
            model,
            models_file,
            out,
            model_id,
            primary,
            spectrum_layers,

            l_phi,
            grid_m,
            precision,
            heads,
            layers,
        } => {
            use specbound::study::{self, ModelStatus};
            let mut paths = model;
            if let Some(f) = &models_file {
                paths.extend(study::read_model_list(f)?);
            }
            let models = study::assign_ids(paths, &model_id)?;
            let opts = study::StudyOptions {
                certify: CertifyOptions {
                    precision: parse_precision(&precision)?,
                    l_phi,
                    grid_m,
                    overrides: ArchOverrides { heads, layers },
                },
                primary,
                spectrum_layers: study::parse_layers(&spectrum_layers)
                    .map_err(anyhow::Error::msg)?,
            };
            let t = std::time::Instant::now();
            // Models and the matrices within each: the bar restarts per model;
            // one line per finished model is printed above it.
            let quiet = cli.quiet;
            let progress = bar("study", quiet);
            let mut line = |d: &study::ModelDone| {
                if quiet {
                    return;
                }
                let what = match d.status {
                    ModelStatus::Reused => format!(
                        "reused {} (model hashes and parameters match)",
                        d.cert_path.display()
                    ),
                    ModelStatus::Certified(secs) => format!("certified in {secs:.2} s"),
                    ModelStatus::Inconclusive(why) => format!("inconclusive: {why}"),
                };
                let fmt_iv = |x: &specbound::certificate::CertInterval| {
                    specbound::report::fmt::interval(x.lo, x.hi, st)
                };
                let bounds = d
                    .cert
                    .map(|c| {
                        format!(
                            ": B_ours {}, B_Edel {}",
                            fmt_iv(&c.bounds.ours),
                            fmt_iv(&c.bounds.edelman)
                        )
                    })
                    .unwrap_or_default();
                let not = d
                    .not_reused
                    .map(|w| format!(" (existing certificate not reused: {w})"))
                    .unwrap_or_default();
                progress.println(&format!(
                    "study: [{}/{}] {}: {what}{not}{bounds}",
                    d.index, d.total, d.model.id
                ));
            };
            let o = study::run_study(&models, &opts, &out, &progress, &mut line)?;
            progress.finish();
            for (n, f) in &o.figures {
                match f {
                    Ok(p) => println!("figure {n}: {}", p.display()),
                    Err(why) => println!("figure {n} {why}"),
                }
            }
            for p in &o.removed {
                println!(
                    "removed {} (left by an earlier run; not drawn now)",
                    p.display()
                );
            }
            if let Some(note) = &o.primary_note {
                println!("note: {note}");
            }
            if let Some(r) = &o.report {
                let n = o.certified + o.reused;
                println!(
                    "{}: {n} model{} ({} certified now, {} reused), tables in {}, in {:.2} s",
                    r.display(),
                    if n == 1 { "" } else { "s" },
                    o.certified,
                    o.reused,
                    out.join("tables").display(),
                    t.elapsed().as_secs_f64()
                );
            }
            if o.inconclusive.is_empty() {
                Ok(Outcome::Certified)
            } else {
                let list: Vec<String> = o
                    .inconclusive
                    .iter()
                    .map(|(id, why)| format!("{id}: {why}"))
                    .collect();
                Ok(Outcome::Inconclusive(format!(
                    "{} of {} models inconclusive ({}){}",
                    o.inconclusive.len(),
                    models.len(),
                    list.join("; "),
                    if o.report.is_none() {
                        "; nothing to report"
                    } else {
                        ""
                    }
                )))
            }
        }
        Command::Report {
            certs,
            out,
            model_id,
            primary,
            spectrum_layers,
        } => {
            let layers =
                specbound::study::parse_layers(&spectrum_layers).map_err(anyhow::Error::msg)?;
            let mut planned = specbound::io::output::Outputs::new();
            planned.stage(&out, Vec::new());
            planned.check()?;
            let (_, figs, page) = specbound::study::report_from_certificates(
                &certs,
                &model_id,
                primary.as_deref(),
                layers,
            )
            .map_err(|e| anyhow::anyhow!("{e}"))?;
            let mut o = specbound::io::output::Outputs::new();
            o.stage(&out, page.into_bytes());
            o.commit()?;
            for f in &figs {
                if let Err(why) = &f.svg {
                    println!("figure {} {why}", f.number);
                }
            }
            println!("{}: {} certificates", out.display(), certs.len());
            Ok(Outcome::Certified)
        }
        Command::Certify {
            model,
            revision,
            out,
            csv,
            json,
            l_phi,
            grid_m,
            precision,
            heads,
            layers,
            model_id,
            shard,
            resume_dir,
        } => {
            let (model, hub) = match model {
                Some(m) => {
                    let r = model_arg(&m, revision.as_deref())?;
                    (r.path, r.hub)
                }
                None if revision.is_some() => {
                    bail!("--revision needs a Hugging Face id (org/name)")
                }
                None => (default_model()?, None),
            };
            let model_id = model_id.or_else(|| hub.as_ref().map(|h| h.name().to_string()));
            let opts = CertifyOptions {
                precision: parse_precision(&precision)?,
                l_phi,
                grid_m,
                overrides: ArchOverrides { heads, layers },
            };
            let shard = match &shard {
                Some(s) => Some(
                    s.parse::<ShardSpec>()
                        .map_err(|e| anyhow::anyhow!("--shard: {e}"))?,
                ),
                None => None,
            };
            if shard.is_some() && csv.is_some() {
                bail!("--csv needs the bounds, which a shard does not have: pass --csv to merge");
            }
            // Refuse a bad output target before the computation, not after.
            let mut planned = specbound::io::output::Outputs::new();
            if let Some(dir) = &csv {
                planned.create_dir(dir);
                for name in specbound::report::csv::TABLE_NAMES {
                    planned.stage(dir.join(name), Vec::new());
                }
            }
            if let Some(p) = &out {
                planned.stage(p, Vec::new());
            }
            planned.check()?;
            let t = std::time::Instant::now();
            let scope = RunScope {
                shard: shard.unwrap_or(ShardSpec::WHOLE),
                resume_dir: resume_dir.clone(),
                // Only the certificate's entries are needed here.
                keep_results: false,
            };
            let b = bar("certify", cli.quiet);
            let outcome = certify_run(&model, &opts, &scope, &b)?;
            b.finish();
            let run = match outcome {
                Certification::Certified(r) => r,
                Certification::Inconclusive(why) => {
                    return Ok(Outcome::Inconclusive(format!(
                        "{}: inconclusive: {}",
                        model.display(),
                        why.reason
                    )))
                }
            };
            if let (Some(dir), false) = (&resume_dir, run.reused_layers.is_empty()) {
                eprintln!(
                    "specbound: resumed from {}: {} finished layers read back ({} matrices), {} matrices certified now",
                    dir.display(),
                    run.reused_layers.len(),
                    run.spectra.len() - run.certified,
                    run.certified
                );
            }
            let secs = t.elapsed().as_secs_f64();
            if let Some(shard) = shard {
                let (n, share, total) = (
                    run.spectra.len(),
                    run.cost_share,
                    run.header.model.layers * (2 * run.header.model.heads + 2),
                );
                let part = run.into_part();
                let doc = part.to_json_pretty();
                if let Some(p) = &out {
                    specbound::io::output::Outputs::new()
                        .stage(p, doc.as_bytes())
                        .commit()?;
                }
                if json {
                    println!("{doc}");
                } else {
                    println!(
                        "{}: shard {shard}: {n} of {total} proxy matrices ({:.1}% of the estimated cost) certified in {secs:.2} s{}",
                        model.display(),
                        100.0 * share,
                        match &out {
                            Some(p) => format!(", part written to {}", p.display()),
                            None => " (use --out FILE to write the part, then merge the parts)".into(),
                        }
                    );
                }
                return Ok(Outcome::Certified);
            }
            let cert = match run.certificate() {
                Ok(c) => c,
                Err(why) => {
                    return Ok(Outcome::Inconclusive(format!(
                        "{}: inconclusive: {}",
                        model.display(),
                        why.reason
                    )))
                }
            };
            let doc = cert.to_json_pretty();
            // Everything is computed, then staged; nothing is written unless all of it can be.
            let mut outputs = specbound::io::output::Outputs::new();
            if let Some(dir) = &csv {
                let id = model_id.clone().unwrap_or_else(|| {
                    std::fs::canonicalize(&model)
                        .ok()
                        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().to_string()))
                        .unwrap_or_else(|| model.display().to_string())
                });
                outputs.create_dir(dir);
                for (name, text) in specbound::report::csv::tables(&cert, &id) {
                    outputs.stage(dir.join(name), text);
                }
            }
            if let Some(p) = &out {
                // Last: a new certificate implies new tables.
                outputs.stage(p, doc.as_bytes());
            }
            outputs.commit()?;
            if json {
                println!("{doc}");
            } else {
                print!("{}", specbound::report::summary_text_with(&cert, secs, st));
            }
            Ok(Outcome::Certified)
        }
        Command::Merge {
            parts,
            out,
            csv,
            json,
            model_id,
        } => {
            let mut planned = specbound::io::output::Outputs::new();
            if let Some(dir) = &csv {
                planned.create_dir(dir);
                for name in specbound::report::csv::TABLE_NAMES {
                    planned.stage(dir.join(name), Vec::new());
                }
            }
            if let Some(p) = &out {
                planned.stage(p, Vec::new());
            }
            planned.check()?;
            let t = std::time::Instant::now();
            let cert = match specbound::merge::merge_files(&parts)? {
                Certification::Certified(c) => c,
                Certification::Inconclusive(why) => {
                    return Ok(Outcome::Inconclusive(format!(
                        "inconclusive: {}",
                        why.reason
                    )))
                }
            };
            let secs = t.elapsed().as_secs_f64();
            let doc = cert.to_json_pretty();
            let mut outputs = specbound::io::output::Outputs::new();
            if let Some(dir) = &csv {
                let id = model_id.clone().unwrap_or_else(|| {
                    let p = std::path::Path::new(&cert.model.path);
                    std::fs::canonicalize(p)
                        .ok()
                        .and_then(|c| c.file_name().map(|n| n.to_string_lossy().to_string()))
                        .or_else(|| p.file_name().map(|n| n.to_string_lossy().to_string()))
                        .unwrap_or_else(|| cert.model.path.clone())
                });
                outputs.create_dir(dir);
                for (name, text) in specbound::report::csv::tables(&cert, &id) {
                    outputs.stage(dir.join(name), text);
                }
            }
            if let Some(p) = &out {
                outputs.stage(p, doc.as_bytes());
            }
            outputs.commit()?;
            if json {
                println!("{doc}");
            } else {
                println!(
                    "{} parts merged in {secs:.2} s: {} proxy matrices of {} ({})",
                    parts.len(),
                    cert.matrices.len(),
                    cert.model.path,
                    cert.model.architecture
                );
                println!("certified bounds (each interval contains the exact value):");
                println!(
                    "  B_ours    [{:e}, {:e}]",
                    cert.bounds.ours.lo, cert.bounds.ours.hi
                );
                println!(
                    "  B_Edel    [{:e}, {:e}]",
                    cert.bounds.edelman.lo, cert.bounds.edelman.hi
                );
                if out.is_none() {
                    println!(
                        "(use --out FILE or --json for the certificate, --csv DIR for the tables)"
                    );
                }
            }
            Ok(Outcome::Certified)
        }
        Command::Svd {
            input,
            tensor,
            revision,
            schatten_p,
            precision,
            rtol,
            json,
        } => {
            let prec = parse_precision(&precision)?;
            if !(rtol > 0.0 && rtol.is_finite()) {
                bail!("--rtol must be a positive number, got {rtol}");
            }
            let ps = schatten_p
                .iter()
                .map(|p| SchattenP::parse(p))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(anyhow::Error::msg)?;
            let (_, loaded) = load_matrix(&input, tensor.as_deref(), revision.as_deref())?;
            let opts = SvdOptions {
                precision: prec,
                rtol,
                ..SvdOptions::default()
            };
            let a = &loaded.matrix;
            let spin = if svd_is_large(a.rows, a.cols, prec) {
                specbound::progress::Bar::spinner(
                    "svd",
                    &format!(
                        "certifying all singular values of {} x {} ({precision})",
                        a.rows, a.cols
                    ),
                    cli.quiet,
                )
            } else {
                specbound::progress::Bar::hidden()
            };
            let sv = certify_singular_values(a, &opts);
            spin.finish();
            let sv = match sv {
                Ok(sv) => sv,
                Err(inc) => {
                    return Ok(Outcome::Inconclusive(format!("{}: {inc}", input.display())))
                }
            };
            let summary = match summarize(a, &sv) {
                Ok(s) => s,
                Err(inc) => {
                    return Ok(Outcome::Inconclusive(format!("{}: {inc}", input.display())))
                }
            };
            let schatten: Vec<_> = ps.iter().map(|p| enclose_schatten(&sv, p)).collect();
            let report = SvdReport::new(
                input.display().to_string(),
                tensor,
                loaded.dtype.to_string().to_lowercase(),
                precision,
                &sv,
                &summary,
                &schatten,
            );
            if json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                print!("{}", report.to_table_with(40, st));
            }
            Ok(Outcome::Certified)
        }
    }
}

/// The system allocator, with transparent huge pages asked for on every
/// allocation of at least [`HUGE_MIN`] bytes (`madvise(MADV_HUGEPAGE)`
/// before first touch): the matrices of an LLM layer are gigabytes, and
/// faulting them in 4 KiB pages costs several percent of a run's CPU time
/// (`benches/scale.sh`). Only advice: where the kernel has no huge pages
/// to give, or THP is off, nothing changes.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
struct HugePageAlloc;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
const HUGE_MIN: usize = 8 << 20;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
// SAFETY: every call is forwarded to the system allocator unchanged; the
// added madvise only advises on pages of the block just returned.
unsafe impl std::alloc::GlobalAlloc for HugePageAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { std::alloc::System.alloc(layout) };
        advise_huge(p, layout.size());
        p
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { std::alloc::System.alloc_zeroed(layout) };
        advise_huge(p, layout.size());
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's arguments.
        let p = unsafe { std::alloc::System.realloc(ptr, layout, new) };
        advise_huge(p, new);
        p
    }
}

/// `madvise(MADV_HUGEPAGE)` on the whole 2 MiB-aligned pages inside
/// `[p, p + size)`, for blocks of at least [`HUGE_MIN`] bytes.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn advise_huge(p: *mut u8, size: usize) {
    const HUGE: usize = 2 << 20;
    if p.is_null() || size < HUGE_MIN {
        return;
    }
    let start = (p as usize).div_ceil(HUGE) * HUGE;
    let end = (p as usize + size) / HUGE * HUGE;
    if end > start {
        // SAFETY: the range lies inside the block just allocated; the
        // advice changes no contents and its failure is harmless.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[global_allocator]
static ALLOC: HugePageAlloc = HugePageAlloc;

fn main() -> ExitCode {
    // Die quietly on a closed pipe (`specbound ... | head`), like other Unix tools,
    // instead of panicking in println!.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // A fixed mmap threshold: every allocation of 1 MiB or more (the matrices
    // and their working sets) is its own mapping and goes back to the system
    // when freed. glibc's default raises the threshold after each large free,
    // so that later matrices of up to 32 MiB come from the heap and stay
    // resident, fragmented, after their layer: peak memory then grows with
    // the number of layers (docs/certify.md, "Memory"; tests/memory.rs).
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes an allocator parameter, before any thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                print!("{e}");
                return ExitCode::SUCCESS;
            }
            if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                eprint!("{e}");
                return ExitCode::from(2);
            }
            // One line: clap's first line (the tip and usage lines follow it).
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("invalid arguments");
            eprintln!(
                "specbound: {} (see --help)",
                first.trim_start_matches("error: ")
            );
            return ExitCode::from(2);
        }
    };
    match run(cli) {
        Ok(Outcome::Certified) => ExitCode::SUCCESS,
        Ok(Outcome::Inconclusive(why)) | Ok(Outcome::Failed(why)) => {
            eprintln!("specbound: {why}");
            ExitCode::from(1)
        }
        Ok(Outcome::Undecided(why)) => {
            eprintln!("specbound: {why}");
            ExitCode::from(3)
        }
        Err(e) => {
            eprintln!("specbound: error: {}", error_line(&e));
            ExitCode::from(2)
        }
    }
}

/// The error and its causes on one line, each cause once: library errors
/// say their cause in their own message (and keep it as `source()` for
/// programs), so a cause is appended only when the line does not already
/// say it (`with_context` errors do not).
fn error_line(e: &anyhow::Error) -> String {
    let mut line = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !line.contains(&c) {
            line.push_str(": ");
            line.push_str(&c);
        }
    }
    line
}

/// Whether a claims file is a NumPy array (by extension or magic).
fn is_npy(p: &std::path::Path) -> bool {
    if p.extension().is_some_and(|e| e.eq_ignore_ascii_case("npy")) {
        return true;
    }
    let mut head = [0u8; 6];
    std::fs::File::open(p)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
        .is_ok()
        && head == *b"\x93NUMPY"
}

/// One line on a gap against float32 and float64 rounding.
fn rounding_text(r: &specbound::evidence::audit::Rounding) -> String {
    use specbound::evidence::audit::{FormatGap, RoundingVerdict};
    let one = |name: &str, g: &FormatGap| {
        let units = match g.units {
            [Some(a), Some(b)] => {
                specbound::report::fmt::interval(a, b, specbound::report::fmt::Style::Shared)
            }
            [Some(a), None] => format!("at least {a:.3}"),
            _ => "unbounded".into(),
        };
        let k = if r.k == 1.0 {
            String::new()
        } else {
            format!("{} ", r.k)
        };
        match g.verdict {
            RoundingVerdict::Within => {
                format!("within {name} rounding ({units} u_{name}, <= {k}u)")
            }
            RoundingVerdict::Beyond => format!("beyond {name} rounding ({units} u_{name})"),
            RoundingVerdict::Undecided => format!("{name} rounding undecided ({units} u_{name})"),
        }
    };
    if r.float64.verdict == RoundingVerdict::Within {
        one("f64", &r.float64)
    } else {
        format!("{}; {}", one("f32", &r.float32), one("f64", &r.float64))
    }
}

/// `audit MATRIX CLAIMED.npy`: claimed singular values against certified ones.
#[allow(clippy::too_many_arguments)]
fn audit_spectrum(
    input: &std::path::Path,
    claims: &std::path::Path,
    tensor: Option<&str>,
    revision: Option<&str>,
    prec: Precision,
    rtol: f64,
    atol: f64,
    rounding_units: f64,
    json: bool,
    quiet: bool,
    st: specbound::report::fmt::Style,
) -> Result<Outcome> {
    use specbound::evidence::spectrum::{audit_spectrum, Check, SpectrumOptions};
    use specbound::report::fmt::interval;
    let claimed = specbound::io::npy::read_npy_vector(claims)?;
    let (_, loaded) = load_matrix(input, tensor, revision)?;
    let a = &loaded.matrix;
    let spin = if svd_is_large(a.rows, a.cols, prec) {
        specbound::progress::Bar::spinner(
            "audit",
            &format!(
                "certifying the singular values of {} x {} ({prec})",
                a.rows, a.cols
            ),
            quiet,
        )
    } else {
        specbound::progress::Bar::hidden()
    };
    let opts = SvdOptions {
        precision: prec,
        ..SvdOptions::default()
    };
    let sv = certify_singular_values(a, &opts);
    spin.finish();
    let sv = match sv {
        Ok(sv) => sv,
        Err(inc) => return Ok(Outcome::Inconclusive(format!("{}: {inc}", input.display()))),
    };
    let rep = audit_spectrum(
        &claimed.matrix.data,
        claimed.dtype,
        &sv,
        &SpectrumOptions {
            rtol,
            atol,
            rounding_units,
        },
    )
    .map_err(|e| anyhow::anyhow!("{}: {e}", claims.display()))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&rep)?);
    } else {
        let max_rel = match rep.max_relative_error {
            [Some(lo), Some(hi)] => interval(lo, hi, st),
            [Some(lo), None] => format!("at least {lo:e} (some sigma may be 0)"),
            _ => "unknown".into(),
        };
        println!(
            "{} ({} claimed {} values{}) against the certified singular values of {} ({} x {}, precision {prec}):",
            claims.display(),
            rep.claimed,
            rep.claimed_dtype,
            if rep.sorted { ", sorted largest first" } else { "" },
            input.display(),
            a.rows,
            a.cols
        );
        println!(
            "  certified max relative error {max_rel}; max error {} ulps of {}",
            interval(rep.max_ulps[0], rep.max_ulps[1], st),
            rep.claimed_dtype
        );
        println!(
            "  verdict against |c - sigma| <= {atol:e} + {rtol:e} sigma: {} pass, {} fail, {} undecided",
            rep.pass, rep.fail, rep.undecided
        );
        println!(
            "  {:>5}  {:<16} {:<36} {:<30} {:<30} {:<24} verdict",
            "i", "claimed", "certified sigma", "error", "relative error", "ulps"
        );
        let n = rep.indices.len();
        for (k, r) in rep.indices.iter().enumerate() {
            if n > 40 && (10..n - 10).contains(&k) {
                if k == 10 {
                    println!("  ... {} more (use --json for all)", n - 20);
                }
                continue;
            }
            println!(
                "  {:>5}  {:<16} {:<36} {:<30} {:<30} {:<24} {:?}",
                r.index,
                claimed_text(r.claimed, &rep.claimed_dtype),
                interval(r.certified[0], r.certified[1], st),
                interval(r.abs_error[0], r.abs_error[1], st),
                r.rel_error
                    .map(|e| interval(e[0], e[1], st))
                    .unwrap_or_else(|| "unbounded".into()),
                interval(r.ulps[0], r.ulps[1], st),
                r.verdict
            );
        }
    }
    Ok(match rep.verdict {
        Check::Pass => Outcome::Certified,
        Check::Fail => Outcome::Failed(format!(
            "{} of {} claimed singular values fail |c - sigma| <= {atol:e} + {rtol:e} sigma",
            rep.fail, rep.claimed
        )),
        Check::Undecided => Outcome::Undecided(format!(
            "{} of {} claimed singular values undecided at {prec} (try --precision extended or auto)",
            rep.undecided, rep.claimed
        )),
    })
}

/// A claimed value as its own dtype prints it (shortest round trip).
fn claimed_text(x: f64, dtype: &str) -> String {
    match dtype {
        "f32" => format!("{}", x as f32),
        "f16" => format!("{}", half::f16::from_f64(x)),
        _ => format!("{x}"),
    }
}
