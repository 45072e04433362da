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
use specbound::certify::{
    certify_run, CertifyOptions, NoProgress, Outcome as Certification, RunScope,
};
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
}

#[derive(Subcommand)]
enum Command {
    /// Certified enclosures of all singular values and derived norms of one matrix.
    Svd {
        /// A 2-D `.npy` file (f2/f4/f8, C or Fortran order) or a `.safetensors` file.
        input: PathBuf,
        /// Tensor name inside a `.safetensors` file.
        #[arg(long)]
        tensor: Option<String>,
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
        /// A Hugging Face model directory (config.json + model.safetensors or a sharded
        /// index) or a single .safetensors file. Default: the bundled all-MiniLM-L6-v2.
        model: Option<PathBuf>,
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
    /// Show the recognised architecture and the proxy matrices, without computing spectra.
    Inspect {
        /// A model directory, .safetensors or .gguf file.
        model: PathBuf,
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
        /// The model directory or file the certificate describes.
        #[arg(long)]
        model: Option<PathBuf>,
    },
    /// Check claimed numbers (a CSV) against certified values of a model.
    Audit {
        /// The model directory or .safetensors file.
        model: PathBuf,
        /// The claims: a certify --csv table, a generic claims CSV, or a WeightWatcher details CSV.
        claims: PathBuf,
        /// Print the audit as JSON.
        #[arg(long)]
        json: bool,
    },
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
    match cli.command {
        Command::Inspect {
            model,
            json,
            heads,
            l_phi,
        } => {
            let ck = specbound::io::checkpoint::Checkpoint::open(&model)?;
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
        Command::Verify { cert, model } => {
            let c = Certificate::read(&cert)?;
            let mut v = specbound::evidence::verify::verify_internal(&c);
            if v.failure.is_none() {
                if let Some(m) = &model {
                    v = v.merge(specbound::evidence::verify::verify_with_model(&c, m)?);
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
        } => {
            use specbound::evidence::audit::Verdict;
            let rep = specbound::evidence::audit::audit(&model, &claims)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&rep)?);
            } else {
                println!(
                    "{} ({} layout): {} claims: {} consistent, {} inconsistent, {} undecided",
                    claims.display(),
                    rep.layout,
                    rep.results.len(),
                    rep.consistent,
                    rep.inconsistent,
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
                        } => {
                            format!("INCONSISTENT (off by {distance:.3e}, relative {relative_error:.3e})")
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
                        format!("[{:e}, {:e}]", r.certified[0], r.certified[1])
                    );
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
                print!("{}", d.to_text(25));
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
        Command::Certify {
            model,
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
            let model = match model {
                Some(m) => m,
                None => default_model()?,
            };
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
            let mut planned = specbound::report::output::Outputs::new();
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
            };
            let run = match certify_run(&model, &opts, &scope, &NoProgress)? {
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
                    run.spectra.len() - run.results.len(),
                    run.results.len()
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
                    specbound::report::output::Outputs::new()
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
            let mut outputs = specbound::report::output::Outputs::new();
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
                print!("{}", specbound::report::summary_text(&cert, secs));
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
            let mut planned = specbound::report::output::Outputs::new();
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
            let mut outputs = specbound::report::output::Outputs::new();
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
            let loaded = specbound::io::read_matrix(&input, tensor.as_deref())?;
            let opts = SvdOptions {
                precision: prec,
                rtol,
                ..SvdOptions::default()
            };
            let a = &loaded.matrix;
            let sv = match certify_singular_values(a, &opts) {
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
                print!("{}", report.to_table(40));
            }
            Ok(Outcome::Certified)
        }
    }
}

fn main() -> ExitCode {
    // Die quietly on a closed pipe (`specbound ... | head`), like other Unix tools,
    // instead of panicking in println!.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
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
