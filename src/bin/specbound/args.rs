//! The command line's definition: flags are declared once (shared groups
//! flattened into the commands), parsed into typed values, and turned into
//! the command layer's requests (`specbound::cmd`).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use specbound::arch::ArchOverrides;
use specbound::certificate::ShardSpec;
use specbound::certify::CertifyOptions;
use specbound::cmd::{self, defaults, CertOutputs, CmdError, ModelRef, Style};
use specbound::linalg::backend::{Device, DEVICE_NAMES};
use specbound::linalg::Precision;
use specbound::spectral::SchattenP;

/// The exit codes, in `--help` and the manual page.
const EXIT_CODES: &str =
    "Exit codes: 0 certified, holds, consistent or unchanged; 1 inconclusive, a failed \
check or refuted quantity (verify), an inconsistent claim (audit) or a certain change (diff), \
with the reason on stderr; 2 bad input or usage (one line on stderr); 3 undecided: audit claims \
undecided or verify quantities unconfirmed, none wrong.";

#[derive(Parser)]
#[command(
    name = "specbound",
    version,
    about = "Certified spectral quantities of weight matrices",
    after_help = EXIT_CODES
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// No progress bar (it is drawn on stderr only when stderr is a terminal).
    #[arg(long, short, global = true)]
    pub quiet: bool,
    /// How text output prints intervals, each rounded outward: shared
    /// (common digits, then the differing tails: 20573.029732297[44, 68]),
    /// pm (mid ± rad) or bounds ([lo, hi] in full). JSON and CSV are exact.
    #[arg(long, global = true, default_value = defaults::STYLE, value_name = "STYLE")]
    pub intervals: Style,
}

/// Revision of a Hugging Face id.
#[derive(Args, Clone)]
pub struct RevisionArg {
    /// Revision of a Hugging Face id (branch, tag or commit; default main).
    #[arg(long)]
    pub revision: Option<String>,
}

/// `--device`: where the bulk products and the approximate eigensolver run
/// (`specbound::linalg::backend`); the certification stays on the CPU.
#[derive(Args, Clone)]
pub struct DeviceArg {
    /// cpu | cuda (the first CUDA GPU; a binary built with --features cuda) | auto (cuda
    /// where usable, else cpu, said on stderr). The certificate records a device other
    /// than the CPU.
    #[arg(long, default_value = defaults::DEVICE, value_parser = device, value_name = "DEVICE")]
    pub device: Device,
}

fn device(s: &str) -> Result<Device, String> {
    Device::parse(s).ok_or_else(|| format!("expected one of {}", DEVICE_NAMES.join(", ")))
}

/// `--json`.
#[derive(Args, Clone)]
pub struct JsonArg {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The parameters of a certification.
#[derive(Args, Clone)]
pub struct CertifyParams {
    /// Lipschitz constant L_phi of the activation (exact decimal).
    #[arg(long, default_value = defaults::L_PHI, allow_hyphen_values = true)]
    pub l_phi: String,
    /// Grid resolution m of P_m = {0, 1/m, ..., 2} (default ceil(L + ln N)).
    #[arg(long)]
    pub grid_m: Option<usize>,
    /// f64 (default) | extended | auto | mpfr:BITS, for the singular values.
    #[arg(long, default_value = defaults::PRECISION)]
    pub precision: Precision,
    /// Number of attention heads (needed for a .safetensors file without config.json).
    #[arg(long)]
    pub heads: Option<usize>,
    /// Number of layers (default: from config.json or the tensors).
    #[arg(long)]
    pub layers: Option<usize>,
    /// The stack of blocks of a model of several: encoder | decoder (T5,
    /// BART, Whisper), text | vision (CLIP, SigLIP); default the first.
    #[arg(long)]
    pub stack: Option<String>,
}

impl CertifyParams {
    /// The library's options; `L_phi` is read here, once (`certify::parse_l_phi`).
    fn options(&self) -> Result<CertifyOptions, CmdError> {
        Ok(CertifyOptions {
            precision: self.precision,
            l_phi: specbound::certify::parse_l_phi(&self.l_phi)?,
            grid_m: self.grid_m,
            overrides: ArchOverrides {
                heads: self.heads,
                layers: self.layers,
                stack: self.stack.clone(),
            },
        })
    }
}

/// Where a certificate and its tables go.
#[derive(Args, Clone)]
pub struct OutputArgs {
    /// Write the certificate (JSON) to this file (a new or regular file), atomically.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write the four CSV tables (the authors' layout) into this directory.
    #[arg(long)]
    pub csv: Option<PathBuf>,
}

impl OutputArgs {
    fn outputs(&self) -> CertOutputs {
        CertOutputs {
            out: self.out.clone(),
            csv: self.csv.clone(),
        }
    }
}

/// The study's figures.
#[derive(Args, Clone)]
pub struct FigureArgs {
    /// Id of the primary model of figures 1 and 5 (default: the largest, L N^2).
    #[arg(long)]
    pub primary: Option<String>,
    /// Layers of the primary model in figure 1 (`0-3`, `0,2,5`).
    #[arg(long, default_value = defaults::SPECTRUM_LAYERS, value_parser = layers)]
    pub spectrum_layers: Layers,
}

/// A layer list (`0-3`, `0,2,5`).
#[derive(Clone, Debug)]
pub struct Layers(pub Vec<usize>);

fn layers(s: &str) -> Result<Layers, String> {
    specbound::study::parse_layers(s).map(Layers)
}

fn schatten(s: &str) -> Result<SchattenP, String> {
    SchattenP::parse(s)
}

// The arguments of `specbound svd` (a plain comment: a doc comment would
// replace the subcommand's about text).
#[derive(Args)]
pub struct SvdArgs {
    /// A 2-D `.npy` file (f2/f4/f8, either byte order, C or Fortran order), a `.safetensors`, `.gguf` or
    /// PyTorch (`.bin`, `.pt`, `.pth`) file, or a model directory or Hugging Face id
    /// (with --tensor).
    pub input: PathBuf,
    /// Tensor name inside a safetensors, GGUF or PyTorch file or a model.
    #[arg(long)]
    pub tensor: Option<String>,
    #[command(flatten)]
    pub revision: RevisionArg,
    /// Comma-separated Schatten exponents p >= 0 (decimals are exact; 0 = rank).
    #[arg(long, value_delimiter = ',', default_value = defaults::SCHATTEN_P, value_parser = schatten)]
    pub schatten_p: Vec<SchattenP>,
    /// auto (default: escalate until --rtol is met) | f64 | extended | mpfr:BITS
    #[arg(long, default_value = defaults::SVD_PRECISION)]
    pub precision: Precision,
    /// Target relative radius for `--precision auto` (sigma_1 and every value >= 1e-6 sigma_1).
    #[arg(long, default_value_t = defaults::RTOL)]
    pub rtol: f64,
    #[command(flatten)]
    pub json: JsonArg,
    #[command(flatten)]
    pub device: DeviceArg,
}

// The arguments of `specbound spectra` (a plain comment: a doc comment would
// replace the subcommand's about text).
#[derive(Args)]
pub struct SpectraArgs {
    /// A model directory, a .safetensors, PyTorch (.bin, .pt, .pth) or .gguf file, or a
    /// Hugging Face id in the local cache.
    pub model: PathBuf,
    #[command(flatten)]
    pub revision: RevisionArg,
    #[command(flatten)]
    pub json: JsonArg,
    /// Write spectra.csv (one row per matrix, exact lo/hi columns) into this directory.
    #[arg(long, value_name = "DIR")]
    pub csv: Option<PathBuf>,
    /// Also every certified singular value of each matrix: in the text and the JSON,
    /// and with --csv in DIR/singular_values.csv (one row per value, keyed by tensor).
    #[arg(long)]
    pub singular_values: bool,
    /// Only tensors whose full name matches this regular expression.
    #[arg(long, value_name = "REGEX")]
    pub include: Option<String>,
    /// No tensor whose full name matches this regular expression.
    #[arg(long, value_name = "REGEX")]
    pub exclude: Option<String>,
    /// Skip tensors with more elements than this.
    #[arg(long, value_name = "N")]
    pub max_elements: Option<u64>,
    /// Comma-separated Schatten exponents p >= 0 (decimals are exact; 0 = rank).
    #[arg(long, value_delimiter = ',', default_value = defaults::SCHATTEN_P, value_parser = schatten)]
    pub schatten_p: Vec<SchattenP>,
    /// f64 (default) | extended | auto | mpfr:BITS, for the singular values.
    #[arg(long, default_value = defaults::PRECISION)]
    pub precision: Precision,
    /// Target relative radius for `--precision auto`.
    #[arg(long, default_value_t = defaults::RTOL)]
    pub rtol: f64,
    #[command(flatten)]
    pub device: DeviceArg,
}

// The arguments of `specbound certify` (a plain comment: a doc comment would
// replace the subcommand's about text).
#[derive(Args)]
pub struct CertifyArgs {
    /// A Hugging Face model directory (config.json + model.safetensors or
    /// pytorch_model.bin, or a sharded index), a single .safetensors, PyTorch (.bin,
    /// .pt, .pth) or .gguf file, or a Hugging Face id (org/name) in the local cache.
    /// Default: the bundled all-MiniLM-L6-v2.
    pub model: Option<PathBuf>,
    #[command(flatten)]
    pub revision: RevisionArg,
    #[command(flatten)]
    pub outputs: OutputArgs,
    #[command(flatten)]
    pub json: JsonArg,
    #[command(flatten)]
    pub params: CertifyParams,
    /// The model_id column of observed_bounds.csv (default: the model's directory name).
    #[arg(long)]
    pub model_id: Option<String>,
    /// Certify only shard K of N (balanced by estimated cost) and write a part, not a
    /// certificate; `merge` makes the certificate from the N parts.
    #[arg(long, value_name = "K/N")]
    pub shard: Option<ShardSpec>,
    /// Keep each finished layer's part in DIR; rerun with the same arguments to skip them.
    #[arg(long, value_name = "DIR")]
    pub resume_dir: Option<PathBuf>,
    /// Also certify the raw weights' norms and the norm-based measures (log_prod_of_spec,
    /// param_norm, bartlett, ...; docs/measures.md) into the certificate.
    #[arg(long)]
    pub measures: bool,
    /// The initialisation (a checkpoint of the same architecture) for the distance
    /// measures (frobenius_distance, dist_spec_init, log_spec_init, bartlett_init);
    /// implies --measures.
    #[arg(long, value_name = "MODEL")]
    pub init: Option<PathBuf>,
    #[command(flatten)]
    pub device: DeviceArg,
}

// The arguments of `specbound merge` (a plain comment: a doc comment would
// replace the subcommand's about text).
#[derive(Args)]
pub struct MergeArgs {
    /// The parts, in any order (every matrix of the model exactly once).
    #[arg(required = true)]
    pub parts: Vec<PathBuf>,
    #[command(flatten)]
    pub outputs: OutputArgs,
    #[command(flatten)]
    pub json: JsonArg,
    /// The model_id column of observed_bounds.csv (default: the last component of model.path).
    #[arg(long)]
    pub model_id: Option<String>,
}

// The arguments of `specbound study` (a plain comment: a doc comment would
// replace the subcommand's about text).
#[derive(Args)]
pub struct StudyArgs {
    /// Models: directories, files or Hugging Face ids, as `certify` takes them.
    #[arg(value_name = "MODEL")]
    pub model: Vec<PathBuf>,
    /// A file listing models, one per line (`#` comment lines; relative paths are
    /// taken from the file's directory), after any MODEL arguments.
    #[arg(long = "models", value_name = "FILE")]
    pub models_file: Option<PathBuf>,
    /// Output directory (created if absent): certificates/, tables/, figures/, report.html.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Model ids, one per model in order (default: each directory or file name).
    #[arg(long = "model-id", value_name = "ID")]
    pub model_id: Vec<String>,
    /// The training step of the MODEL argument before it (a trajectory; docs/study.md).
    #[arg(long = "step", value_name = "N")]
    pub step: Vec<String>,
    /// The run (trajectory) of the MODEL argument before it (default: one run).
    #[arg(long = "run", value_name = "NAME")]
    pub run: Vec<String>,
    /// The Hugging Face revision of the MODEL argument before it (`stepN` gives step N).
    #[arg(long = "revision", value_name = "REV")]
    pub revision: Vec<String>,
    /// The initialisation (of the models' architecture) for every model's distance
    /// measures, as certify --init; a --models line's own init= wins over it, and it
    /// replaces the step-0 default (docs/study.md, Initialisation).
    #[arg(long, value_name = "MODEL")]
    pub init: Option<PathBuf>,
    /// Where MODEL, --step, --run and --revision were on the command line
    /// (clap's indices), set by [`StudyArgs::place`].
    #[arg(skip)]
    pub indices: [Vec<usize>; 4],
    #[command(flatten)]
    pub figures: FigureArgs,
    #[command(flatten)]
    pub params: CertifyParams,
    #[command(flatten)]
    pub device: DeviceArg,
}

// The arguments of `specbound report` (a plain comment: a doc comment would
// replace the subcommand's about text).
#[derive(Args)]
pub struct ReportArgs {
    /// Certificates (JSON), e.g. a study's DIR/certificates/*.json.
    #[arg(value_name = "CERT", required = true)]
    pub certs: Vec<PathBuf>,
    /// The HTML file to write (atomically).
    #[arg(long, value_name = "FILE.html")]
    pub out: PathBuf,
    /// Model ids, one per certificate in order (default: each file's stem).
    #[arg(long = "model-id", value_name = "ID")]
    pub model_id: Vec<String>,
    #[command(flatten)]
    pub figures: FigureArgs,
}

// The arguments of `specbound inspect` (a plain comment: a doc comment would
// replace the subcommand's about text).
#[derive(Args)]
pub struct InspectArgs {
    /// A model directory, a .safetensors, PyTorch or .gguf file, or a Hugging Face id.
    pub model: PathBuf,
    #[command(flatten)]
    pub revision: RevisionArg,
    #[command(flatten)]
    pub json: JsonArg,
    /// Number of attention heads (for a file without config.json or metadata).
    #[arg(long)]
    pub heads: Option<usize>,
    /// L_phi that certify would use (decides the L_phi extension note).
    #[arg(long, default_value = defaults::L_PHI, allow_hyphen_values = true)]
    pub l_phi: String,
    /// The stack of blocks of a model of several (as certify --stack).
    #[arg(long)]
    pub stack: Option<String>,
}

// The arguments of `specbound verify` (a plain comment: a doc comment would
// replace the subcommand's about text).
#[derive(Args)]
pub struct VerifyArgs {
    /// The certificate (JSON).
    pub cert: PathBuf,
    /// The model directory, file or Hugging Face id the certificate describes.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Revision of a Hugging Face id given to --model (default main).
    #[arg(long)]
    pub revision: Option<String>,
    /// The largest MPFR precision (bits) a certificate may state for its
    /// recomputation from the weights; a certificate stating more is refused.
    #[arg(long, value_name = "BITS", default_value_t = defaults::MAX_MPFR_BITS)]
    pub max_precision_bits: u32,
    #[command(flatten)]
    pub json: JsonArg,
}

// The arguments of `specbound audit` (a plain comment: a doc comment would
// replace the subcommand's about text).
#[derive(Args)]
pub struct AuditArgs {
    /// The model (directory, file or Hugging Face id); with a .npy of claimed singular
    /// values, any `svd` input (with --tensor where it needs one).
    pub model: PathBuf,
    /// The claims: a certify --csv table, a generic claims CSV, a WeightWatcher details
    /// CSV, or a 1-D .npy of claimed singular values (any float dtype, any order).
    pub claims: PathBuf,
    #[command(flatten)]
    pub json: JsonArg,
    /// Relative tolerance: CSV claims without a tolerance column get at least the window
    /// c ± (atol + rtol |c|); claimed singular values must meet |c - sigma| <= atol + rtol sigma.
    #[arg(long, default_value_t = defaults::CLAIM_RTOL)]
    pub rtol: f64,
    /// Absolute tolerance (see --rtol).
    #[arg(long, default_value_t = defaults::CLAIM_ATOL)]
    pub atol: f64,
    /// Method for the certified singular values: f64 (default) | extended | auto | mpfr:BITS.
    #[arg(long, default_value = defaults::PRECISION)]
    pub precision: Precision,
    /// A gap counts as float32 / float64 rounding when it is at most this many unit
    /// roundoffs (2^-24, 2^-53) of the certified value.
    #[arg(long, default_value_t = defaults::ROUNDING_UNITS)]
    pub rounding_units: f64,
    /// Tensor name, for claimed singular values of a tensor of a file or model.
    #[arg(long)]
    pub tensor: Option<String>,
    /// In a table with a model_id column (a study's tables), the rows to audit
    /// (default: the model's id as study gives it, its directory or file name).
    #[arg(long)]
    pub model_id: Option<String>,
    /// The initialisation, for claimed distance measures (frobenius_distance, ...)
    /// and raw-weight init_distance_* norms, as certify --init.
    #[arg(long, value_name = "MODEL")]
    pub init: Option<PathBuf>,
    /// The stack of blocks the claims are about, of a model of several (as certify
    /// --stack: encoder | decoder, text | vision); default the first.
    #[arg(long)]
    pub stack: Option<String>,
    #[command(flatten)]
    pub revision: RevisionArg,
}

// The arguments of `specbound completions` (a plain comment: a doc comment would
// replace the subcommand's about text).
#[derive(Args)]
pub struct CompletionsArgs {
    /// The shell.
    pub shell: clap_complete::Shell,
}

// The arguments of `specbound diff` (a plain comment: a doc comment would
// replace the subcommand's about text).
#[derive(Args)]
pub struct DiffArgs {
    /// The old certificate.
    pub a: PathBuf,
    /// The new certificate.
    pub b: PathBuf,
    /// Relative tolerance: exit 1 only for quantities that certainly changed by more.
    #[arg(long, default_value_t = defaults::CLAIM_RTOL)]
    pub rtol: f64,
    #[command(flatten)]
    pub json: JsonArg,
}

#[derive(Subcommand)]
pub enum Command {
    /// Certified enclosures of all singular values and derived norms of one matrix.
    Svd(SvdArgs),
    /// Certified spectra and norms of every weight matrix of any checkpoint, known family
    /// or not, one row per tensor (WeightWatcher's quantities that are Schatten quantities).
    Spectra(SpectraArgs),
    /// Certify a whole checkpoint: proxy matrices, their spectra, and the bound proxies.
    Certify(CertifyArgs),
    /// Merge the parts of a sharded run (certify --shard K/N) into one certificate.
    Merge(MergeArgs),
    /// Certify many checkpoints and write the paper's tables, five figures and an HTML report.
    Study(StudyArgs),
    /// The study's HTML report from existing certificates.
    Report(ReportArgs),
    /// Show the recognised architecture and the proxy matrices, without computing spectra.
    Inspect(InspectArgs),
    /// Check a certificate: re-derive every aggregate; with --model, also the hashes and every matrix.
    Verify(VerifyArgs),
    /// Check claimed numbers against certified values: a CSV of claims about a model, or
    /// another tool's singular values (a 1-D .npy) of one matrix.
    Audit(AuditArgs),
    /// Print a shell completion script for SHELL (bash, zsh, fish, elvish, powershell).
    Completions(CompletionsArgs),
    /// Print the manual page (roff) to stdout: `specbound man | man -l -`.
    Man,
    /// Compare two certificates quantity by quantity.
    ///
    /// Exit 1 when a quantity both certificates hold certainly changed (by more than --rtol
    /// relative), or a parameter or the architecture differs; else 0. Quantities present in one
    /// certificate only (one made with --measures or --init, the other without) are listed in
    /// their own section and do not make the exit 1 by themselves.
    Diff(DiffArgs),
}

fn model(arg: &std::path::Path, revision: &RevisionArg) -> Result<ModelRef, CmdError> {
    Ok(ModelRef::parse(Some(arg), revision.revision.as_deref())?)
}

/// A parsed command line as a command of the command layer.
pub enum Request {
    /// `svd`.
    Svd(cmd::svd::SvdRequest),
    /// `spectra`.
    Spectra(cmd::spectra::SpectraRequest),
    /// `certify`.
    Certify(cmd::certify::CertifyRequest),
    /// `merge`.
    Merge(cmd::merge::MergeRequest),
    /// `study`.
    Study(cmd::study::StudyRequest),
    /// `report`.
    Report(cmd::report::ReportRequest),
    /// `inspect`.
    Inspect(cmd::inspect::InspectRequest),
    /// `verify`.
    Verify(cmd::verify::VerifyRequest),
    /// `audit`.
    Audit(cmd::audit::AuditRequest),
    /// `diff`.
    Diff(cmd::diff::DiffRequest),
}

impl Command {
    /// `--device` of the command, when it has one.
    pub fn device(&self) -> Option<Device> {
        match self {
            Command::Svd(SvdArgs { device, .. })
            | Command::Spectra(SpectraArgs { device, .. })
            | Command::Certify(CertifyArgs { device, .. })
            | Command::Study(StudyArgs { device, .. }) => Some(device.device),
            _ => None,
        }
    }

    /// `--json` of the command, when it has one.
    pub fn json(&self) -> bool {
        match self {
            Command::Svd(SvdArgs { json, .. })
            | Command::Spectra(SpectraArgs { json, .. })
            | Command::Certify(CertifyArgs { json, .. })
            | Command::Merge(MergeArgs { json, .. })
            | Command::Inspect(InspectArgs { json, .. })
            | Command::Verify(VerifyArgs { json, .. })
            | Command::Audit(AuditArgs { json, .. })
            | Command::Diff(DiffArgs { json, .. }) => json.json,
            _ => false,
        }
    }

    /// The request of a computing command (completions and man are the
    /// binary's own, answered before).
    pub fn request(self, style: Style) -> Result<Request, CmdError> {
        match self {
            Command::Completions(_) | Command::Man => {
                Err(CmdError::usage("completions and man compute nothing"))
            }
            Command::Svd(a) => a.request(),
            Command::Spectra(a) => a.request(),
            Command::Certify(a) => a.request(),
            Command::Merge(a) => a.request(),
            Command::Study(a) => a.request(style),
            Command::Report(a) => a.request(),
            Command::Inspect(a) => a.request(),
            Command::Verify(a) => a.request(),
            Command::Audit(a) => a.request(),
            Command::Diff(a) => a.request(),
        }
    }
}

impl SvdArgs {
    /// The command layer's request.
    fn request(self) -> Result<Request, CmdError> {
        let SvdArgs {
            input,
            tensor,
            revision,
            schatten_p,
            precision,
            rtol,
            ..
        } = self;
        Ok(Request::Svd(cmd::svd::SvdRequest {
            source: cmd::svd::MatrixSource::Model {
                model: model(&input, &revision)?,
                tensor,
            },
            schatten_p,
            precision,
            rtol,
        }))
    }
}

impl SpectraArgs {
    /// The command layer's request.
    fn request(self) -> Result<Request, CmdError> {
        let SpectraArgs {
            model: m,
            revision,
            csv,
            include,
            exclude,
            max_elements,
            schatten_p,
            precision,
            rtol,
            singular_values,
            ..
        } = self;
        Ok(Request::Spectra(cmd::spectra::SpectraRequest {
            model: model(&m, &revision)?,
            include,
            exclude,
            max_elements,
            schatten_p,
            precision,
            rtol,
            csv,
            singular_values,
        }))
    }
}

impl CertifyArgs {
    /// The command layer's request.
    fn request(self) -> Result<Request, CmdError> {
        let CertifyArgs {
            model: m,
            revision,
            outputs,
            params,
            model_id,
            shard,
            resume_dir,
            measures,
            init,
            ..
        } = self;
        let options = params.options()?;
        Ok(Request::Certify(cmd::certify::CertifyRequest {
            model: ModelRef::parse(m.as_deref(), revision.revision.as_deref())?,
            options,
            outputs: outputs.outputs(),
            model_id,
            shard,
            resume_dir,
            keep_results: false,
            measures,
            init: init
                .as_deref()
                .map(|p| ModelRef::parse(Some(p), None))
                .transpose()?,
        }))
    }
}

impl MergeArgs {
    /// The command layer's request.
    fn request(self) -> Result<Request, CmdError> {
        let MergeArgs {
            parts,
            outputs,
            model_id,
            ..
        } = self;
        Ok(Request::Merge(cmd::merge::MergeRequest {
            parts,
            outputs: outputs.outputs(),
            model_id,
        }))
    }
}

impl StudyArgs {
    /// Records where the MODEL arguments and the per-model options were
    /// among `matches` (the study subcommand's), so that each `--step`,
    /// `--run` and `--revision` applies to the MODEL before it.
    pub fn place(&mut self, matches: &clap::ArgMatches) {
        for (i, id) in ["model", "step", "run", "revision"].into_iter().enumerate() {
            self.indices[i] = matches
                .indices_of(id)
                .map(|v| v.collect())
                .unwrap_or_default();
        }
    }

    /// The fields of each MODEL argument: each `--step`, `--run` and
    /// `--revision` belongs to the nearest MODEL before it on the line.
    fn fields(&self) -> Result<Vec<specbound::study::ModelFields>, CmdError> {
        let mut out = vec![specbound::study::ModelFields::default(); self.model.len()];
        let values = [&self.step, &self.run, &self.revision];
        for (k, key) in ["step", "run", "revision"].into_iter().enumerate() {
            for (j, v) in values[k].iter().enumerate() {
                let at = self.indices[k + 1].get(j).copied().unwrap_or(usize::MAX);
                let Some(m) = self.indices[0].iter().rposition(|&i| i < at) else {
                    return Err(CmdError::usage(format!(
                        "--{key} applies to the MODEL argument before it, and there is none"
                    )));
                };
                out[m].set(key, v).map_err(|e| {
                    CmdError::usage(format!(
                        "{} (--{key}): {e}",
                        specbound::io::escape(&self.model[m].display().to_string())
                    ))
                })?;
            }
        }
        Ok(out)
    }

    /// The command layer's request.
    fn request(self, style: Style) -> Result<Request, CmdError> {
        let model_fields = self.fields()?;
        let StudyArgs {
            model: models,
            models_file,
            out,
            model_id,
            figures,
            params,
            init,
            ..
        } = self;
        Ok(Request::Study(cmd::study::StudyRequest {
            models: models
                .iter()
                .zip(&model_fields)
                .map(|(m, f)| ModelRef::parse(Some(m), f.revision.as_deref()))
                .collect::<Result<_, _>>()?,
            model_fields,
            models_file,
            model_ids: model_id,
            init: init
                .as_deref()
                .map(|p| ModelRef::parse(Some(p), None))
                .transpose()?,
            out,
            certify: params.options()?,
            primary: figures.primary,
            spectrum_layers: figures.spectrum_layers.0,
            style,
        }))
    }
}

impl ReportArgs {
    /// The command layer's request.
    fn request(self) -> Result<Request, CmdError> {
        let ReportArgs {
            certs,
            out,
            model_id,
            figures,
        } = self;
        Ok(Request::Report(cmd::report::ReportRequest {
            certs,
            out,
            model_ids: model_id,
            primary: figures.primary,
            spectrum_layers: figures.spectrum_layers.0,
        }))
    }
}

impl InspectArgs {
    /// The command layer's request.
    fn request(self) -> Result<Request, CmdError> {
        let InspectArgs {
            model: m,
            revision,
            heads,
            l_phi,
            stack,
            ..
        } = self;
        let l_phi = specbound::certify::parse_l_phi(&l_phi)?;
        Ok(Request::Inspect(cmd::inspect::InspectRequest {
            model: model(&m, &revision)?,
            heads,
            l_phi,
            stack,
        }))
    }
}

impl VerifyArgs {
    /// The command layer's request.
    fn request(self) -> Result<Request, CmdError> {
        let VerifyArgs {
            cert,
            model: m,
            revision,
            max_precision_bits,
            ..
        } = self;
        Ok(Request::Verify(cmd::verify::VerifyRequest {
            cert: cmd::CertInput::File(cert),
            model: match m {
                Some(m) => Some(model(&m, &RevisionArg { revision })?),
                None => None,
            },
            options: specbound::evidence::verify::VerifyOptions {
                max_mpfr_bits: max_precision_bits,
            },
        }))
    }
}

impl AuditArgs {
    /// The command layer's request.
    fn request(self) -> Result<Request, CmdError> {
        let AuditArgs {
            model: m,
            claims,
            rtol,
            atol,
            precision,
            rounding_units,
            tensor,
            model_id,
            init,
            stack,
            revision,
            ..
        } = self;
        Ok(Request::Audit(cmd::audit::AuditRequest {
            model: model(&m, &revision)?,
            claims,
            claims_text: None,
            tensor,
            rtol,
            atol,
            precision,
            rounding_units,
            model_id,
            init: init
                .as_deref()
                .map(|p| ModelRef::parse(Some(p), None))
                .transpose()?,
            stack,
        }))
    }
}

impl DiffArgs {
    /// The command layer's request.
    fn request(self) -> Result<Request, CmdError> {
        let DiffArgs { a, b, rtol, .. } = self;
        Ok(Request::Diff(cmd::diff::DiffRequest {
            a: cmd::CertInput::File(a),
            b: cmd::CertInput::File(b),
            rtol,
        }))
    }
}
