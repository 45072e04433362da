//! The `specbound` command line: a thin layer over the library.
//!
//! Exit codes: 0 = every requested quantity certified; 1 = inconclusive
//! (the reason is printed); 2 = error (bad input or usage).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};

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
}

fn parse_precision(s: &str) -> Result<Precision> {
    Ok(match s {
        "f64" => Precision::F64,
        "extended" => Precision::Extended,
        "auto" => Precision::Auto,
        _ => match s.strip_prefix("mpfr:") {
            Some(b) => {
                let bits: u32 = b
                    .parse()
                    .with_context(|| format!("invalid MPFR precision '{b}'"))?;
                if !(64..=1_000_000).contains(&bits) {
                    bail!("MPFR precision must be between 64 and 1000000 bits, got {bits}");
                }
                Precision::Mpfr(bits)
            }
            None => bail!("unknown precision '{s}' (expected f64, extended, mpfr:BITS or auto)"),
        },
    })
}

enum Outcome {
    Certified,
    Inconclusive(String),
}

fn run(cli: Cli) -> Result<Outcome> {
    match cli.command {
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
                format!("{:?}", loaded.dtype).to_lowercase(),
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
        Ok(Outcome::Inconclusive(why)) => {
            eprintln!("specbound: {why}");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("specbound: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
