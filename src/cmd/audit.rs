//! `specbound audit`: claimed numbers against certified values, either a
//! CSV of claims about a model or another tool's singular values (a 1-D
//! `.npy`) of one matrix.

use std::path::{Path, PathBuf};

use super::svd::MatrixSource;
use super::{check_nonnegative, CmdError, Exit, ModelRef, Report, Style, Ui};
use crate::evidence::audit::{
    audit_text, audit_with, AuditOptions, AuditReport, FormatGap, Rounding, RoundingVerdict,
    Verdict,
};
use crate::evidence::spectrum::{audit_spectrum, Check, SpectrumAudit, SpectrumOptions};
use crate::linalg::{certify_singular_values, Precision, SvdOptions};
use crate::report::fmt::{approx, interval};

/// What to audit.
#[derive(Clone, Debug)]
pub struct AuditRequest {
    /// The model (or, with claimed singular values, any `svd` input).
    pub model: ModelRef,
    /// The claims file (with `claims_text`, only the name shown for it).
    pub claims: PathBuf,
    /// The claims CSV itself when it is no file (a pandas DataFrame's
    /// `to_csv()` in Python); `None`: read `claims`.
    pub claims_text: Option<String>,
    /// Tensor of a file or model, for claimed singular values.
    pub tensor: Option<String>,
    /// Relative tolerance.
    pub rtol: f64,
    /// Absolute tolerance.
    pub atol: f64,
    /// Method of the certified singular values.
    pub precision: Precision,
    /// Unit roundoffs within which a gap counts as float32/float64 rounding.
    pub rounding_units: f64,
    /// The rows of a multi-model table to audit (default: the model's id).
    pub model_id: Option<String>,
    /// The initialisation, for claims of the distance measures.
    pub init: Option<ModelRef>,
    /// The stack of a model of several whose matrices the claims are about
    /// (`--stack`, as certify's); `None`: the first.
    pub stack: Option<String>,
}

/// The report of `audit`.
#[derive(Debug)]
pub enum AuditCmdReport {
    /// A claims CSV about a model.
    Claims {
        /// The claims file.
        claims: PathBuf,
        /// The audit.
        report: AuditReport,
    },
    /// Claimed singular values of one matrix.
    Spectrum {
        /// The claims file.
        claims: PathBuf,
        /// The matrix as shown.
        input: String,
        /// Its shape.
        shape: (usize, usize),
        /// Method of the certified values.
        precision: Precision,
        /// Tolerances.
        rtol: f64,
        /// Tolerances.
        atol: f64,
        /// The audit, or why the matrix could not be certified.
        audit: Result<SpectrumAudit, String>,
    },
}

/// Runs `audit`.
///
/// ```
/// use specbound::cmd::audit::{run, AuditCmdReport, AuditRequest};
/// use specbound::cmd::{defaults, ModelRef, Silent};
/// use specbound::evidence::Answer;
///
/// // A claim (as a CSV in memory) that the query weight of layer 0 of the
/// // bundled MiniLM has spectral norm 10^9: certainly refuted.
/// let claims = "tensor,quantity,value\n\
///               encoder.layer.0.attention.self.query.weight,sigma_max,1e9\n";
/// let req = AuditRequest {
///     model: ModelRef::Bundled,
///     claims: "claims.csv".into(),
///     claims_text: Some(claims.into()),
///     tensor: None,
///     rtol: defaults::CLAIM_RTOL,
///     atol: defaults::CLAIM_ATOL,
///     precision: defaults::PRECISION.parse().unwrap(),
///     rounding_units: defaults::ROUNDING_UNITS,
///     model_id: None,
///     init: None,
///     stack: None,
/// };
/// match run(&req, &Silent).unwrap() {
///     AuditCmdReport::Claims { report, .. } => assert_eq!(report.answer(), Answer::Refuted),
///     _ => unreachable!("a claims table, not claimed singular values"),
/// }
/// ```
pub fn run(req: &AuditRequest, ui: &dyn Ui) -> Result<AuditCmdReport, CmdError> {
    for (name, v) in [
        ("--rtol", req.rtol),
        ("--atol", req.atol),
        ("--rounding-units", req.rounding_units),
    ] {
        check_nonnegative(name, v)?;
    }
    if req.claims_text.is_none() && crate::io::npy::is_npy_file(&req.claims) {
        return run_spectrum(req, ui);
    }
    if req.tensor.is_some() {
        return Err(CmdError::usage(
            "--tensor applies to claimed singular values (a .npy), not to a claims CSV",
        ));
    }
    let resolved = req.model.resolve()?;
    let opts = AuditOptions {
        rtol: req.rtol,
        atol: req.atol,
        precision: req.precision,
        rounding_units: req.rounding_units,
        model_id: req.model_id.clone(),
        // A Hub model's id is its name, and a model in memory's `memory`,
        // which their paths (a cache entry, a key) do not show.
        default_id: (resolved.hub.is_some() || resolved.is_memory()).then(|| resolved.default_id()),
        init: req
            .init
            .as_ref()
            .map(ModelRef::resolve)
            .transpose()?
            .map(|i| i.path),
        stack: req.stack.clone(),
    };
    let model = resolved.path;
    let report = {
        let progress = ui.matrices("audit");
        match &req.claims_text {
            Some(text) => audit_text(&model, text, &req.claims, &opts, &*progress)?,
            None => audit_with(&model, &req.claims, &opts, &*progress)?,
        }
    };
    Ok(AuditCmdReport::Claims {
        claims: req.claims.clone(),
        report,
    })
}

/// `audit MATRIX CLAIMED.npy`: claimed singular values against certified ones.
fn run_spectrum(req: &AuditRequest, ui: &dyn Ui) -> Result<AuditCmdReport, CmdError> {
    let claimed = crate::io::npy::read_npy_vector(&req.claims)?;
    let (input, loaded) = MatrixSource::Model {
        model: req.model.clone(),
        tensor: req.tensor.clone(),
    }
    .load()?;
    let a = &loaded.matrix;
    let opts = SvdOptions {
        precision: req.precision,
        ..SvdOptions::default()
    };
    let sv = {
        let _spin = crate::linalg::cost::is_long(a.rows, a.cols, req.precision).then(|| {
            ui.spinner(
                "audit",
                &format!(
                    "certifying the singular values of {} x {} ({})",
                    a.rows, a.cols, req.precision
                ),
            )
        });
        certify_singular_values(a, &opts)
    };
    let audit = match sv {
        Ok(sv) => Ok(audit_spectrum(
            &claimed.matrix.data,
            claimed.dtype,
            &sv,
            &SpectrumOptions {
                rtol: req.rtol,
                atol: req.atol,
                rounding_units: req.rounding_units,
            },
        )
        .map_err(|e| CmdError::usage(format!("{}: {e}", super::shown(&req.claims))))?),
        Err(inc) => Err(inc.reason),
    };
    Ok(AuditCmdReport::Spectrum {
        claims: req.claims.clone(),
        input,
        shape: (a.rows, a.cols),
        precision: req.precision,
        rtol: req.rtol,
        atol: req.atol,
        audit,
    })
}

/// One line on a gap against float32 and float64 rounding.
fn rounding_text(r: &Rounding) -> String {
    let one = |name: &str, g: &FormatGap| {
        let units = match g.units {
            [Some(a), Some(b)] => interval(a, b, Style::Shared),
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
    } else if !r.float32_value {
        format!("not a float32 value; {}", one("f64", &r.float64))
    } else {
        format!("{}; {}", one("f32", &r.float32), one("f64", &r.float64))
    }
}

/// With no tolerance (the default `--rtol 0 --atol 0`), claims in floating
/// point almost never meet the certified values exactly: one line saying
/// that a tolerance is needed and which the claims' dtype suggests (its
/// unit roundoff).
fn tolerance_hint(rep: &SpectrumAudit, rtol: f64, atol: f64) -> Option<String> {
    if rtol != 0.0 || atol != 0.0 || rep.fail == 0 {
        return None;
    }
    let (u, name) = match rep.claimed_dtype.as_str() {
        "f16" => ("4.9e-4", "2^-11, the float16 unit roundoff"),
        "f32" => ("6e-8", "2^-24, the float32 unit roundoff"),
        _ => ("1.2e-16", "2^-53, the float64 unit roundoff"),
    };
    Some(format!(
        "note: with --rtol 0 a claim passes only when it is exact; {} claims need a tolerance: try --rtol {u} ({name}) or larger",
        rep.claimed_dtype
    ))
}

/// A claimed value as its own dtype prints it (shortest round trip).
fn claimed_text(x: f64, dtype: &str) -> String {
    match dtype {
        "f32" => format!("{}", x as f32),
        "f16" => format!("{}", half::f16::from_f64(x)),
        _ => format!("{x}"),
    }
}

fn claims_text(claims: &Path, rep: &AuditReport, st: Style) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} ({} layout): {} claims: {} consistent, {} inconsistent ({} within float32 rounding, {} within float64 rounding), {} undecided",
        super::shown(claims),
        rep.layout,
        rep.results.len(),
        rep.consistent,
        rep.inconsistent,
        rep.within_float32_rounding,
        rep.within_float64_rounding,
        rep.undecided
    );
    if let (Some(id), true) = (&rep.model_id, rep.other_models > 0) {
        let _ = writeln!(
            s,
            "  rows of model_id '{}' audited; {} rows of other models not this model's (not judged)",
            crate::io::escape(id),
            rep.other_models
        );
    }
    let _ = writeln!(
        s,
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
                // Approximate numbers as the report and figures write them
                // (one formatter: crate::report::fmt::approx).
                format!(
                    "INCONSISTENT (off by {}, relative {}{r})",
                    approx(*distance),
                    approx(*relative_error)
                )
            }
            Verdict::Undecided { width } => {
                format!("undecided (certified interval {} wide)", approx(*width))
            }
        };
        let _ = writeln!(
            s,
            "  {:>5}  {:<40} {:<20} {:>24}  {:<50} {v}",
            r.line,
            crate::io::escape(&r.subject),
            crate::io::escape(&r.quantity),
            crate::io::escape(&r.claim),
            interval(r.certified[0], r.certified[1], st)
        );
        if let Some(note) = &r.note {
            let _ = writeln!(s, "         note: {}", crate::io::escape_to(note, 4096));
        }
    }
    if let Some(h) = &rep.hint {
        let _ = writeln!(s, "{h}");
    }
    s
}

/// The text of a spectrum audit (its tolerances are the report's `rtol`
/// and `atol`, those of the request).
fn spectrum_text(
    claims: &Path,
    input: &str,
    shape: (usize, usize),
    prec: Precision,
    rep: &SpectrumAudit,
    st: Style,
) -> String {
    use std::fmt::Write;
    let (rtol, atol) = (rep.rtol, rep.atol);
    let mut s = String::new();
    let max_rel = match rep.max_relative_error {
        [Some(lo), Some(hi)] => interval(lo, hi, st),
        [Some(lo), None] => format!("at least {lo:e} (some sigma may be 0)"),
        _ => "unknown".into(),
    };
    let _ = writeln!(
        s,
        "{} ({} claimed {} values{}) against the certified singular values of {} ({} x {}, precision {prec}):",
        super::shown(claims),
        rep.claimed,
        rep.claimed_dtype,
        if rep.sorted { ", sorted largest first" } else { "" },
        input,
        shape.0,
        shape.1
    );
    let _ = writeln!(
        s,
        "  certified max relative error {max_rel}; max error {} ulps of {}",
        interval(rep.max_ulps[0], rep.max_ulps[1], st),
        rep.claimed_dtype
    );
    let _ = writeln!(
        s,
        "  verdict against |c - sigma| <= {atol:e} + {rtol:e} sigma: {} pass, {} fail, {} undecided",
        rep.pass, rep.fail, rep.undecided
    );
    if let Some(hint) = tolerance_hint(rep, rtol, atol) {
        let _ = writeln!(s, "  {hint}");
    }
    let _ = writeln!(
        s,
        "  {:>5}  {:<16} {:<36} {:<30} {:<30} {:<24} verdict",
        "i", "claimed", "certified sigma", "error", "relative error", "ulps"
    );
    // Failures first (then undecided ones), so that none hides behind the
    // elision of a long listing; then the first and last rows of the rest.
    let n = rep.indices.len();
    let failing: Vec<usize> = (0..n)
        .filter(|&k| rep.indices[k].verdict == Check::Fail)
        .chain((0..n).filter(|&k| rep.indices[k].verdict == Check::Undecided))
        .collect();
    let mut order: Vec<usize> = failing.iter().copied().take(40).collect();
    if failing.len() > 40 {
        let _ = writeln!(
            s,
            "  ({} failing or undecided indices; the first 40 shown, --json for all)",
            failing.len()
        );
    }
    let rest: Vec<usize> = (0..n).filter(|k| !failing.contains(k)).collect();
    let room = 40usize.saturating_sub(order.len()).max(10);
    if rest.len() <= room {
        order.extend(&rest);
    } else {
        order.extend(&rest[..room / 2]);
        order.push(usize::MAX);
        order.extend(&rest[rest.len() - room / 2..]);
    }
    for &k in &order {
        if k == usize::MAX {
            let _ = writeln!(
                s,
                "  ... {} more passing (use --json for all)",
                rest.len() - 2 * (room / 2)
            );
            continue;
        }
        let r = &rep.indices[k];
        let _ = writeln!(
            s,
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
    s
}

impl Report for AuditCmdReport {
    fn exit(&self) -> Exit {
        match self {
            AuditCmdReport::Claims { report, .. } => Exit::of_answer(report.answer()),
            AuditCmdReport::Spectrum { audit, .. } => match audit {
                // No certified values: inconclusive, as `certify` says it.
                Err(_) => Exit::Failed,
                Ok(a) => Exit::of_answer(a.answer()),
            },
        }
    }

    fn reason(&self) -> Option<String> {
        match self {
            AuditCmdReport::Claims { report: rep, .. } => {
                if rep.inconsistent > 0 {
                    Some(format!(
                        "{} of {} claims are inconsistent",
                        rep.inconsistent,
                        rep.results.len()
                    ))
                } else if rep.undecided > 0 {
                    Some(format!(
                        "{} of {} claims are undecided",
                        rep.undecided,
                        rep.results.len()
                    ))
                } else {
                    None
                }
            }
            AuditCmdReport::Spectrum {
                input,
                precision,
                rtol,
                atol,
                audit,
                ..
            } => match audit {
                Err(why) => Some(format!("{input}: inconclusive: {why}")),
                Ok(rep) => match rep.verdict {
                    Check::Pass => None,
                    Check::Fail => Some(format!(
                        "{} of {} claimed singular values fail |c - sigma| <= {atol:e} + {rtol:e} sigma",
                        rep.fail, rep.claimed
                    )),
                    Check::Undecided => Some(format!(
                        "{} of {} claimed singular values undecided at {precision} (try --precision extended or auto)",
                        rep.undecided, rep.claimed
                    )),
                },
            },
        }
    }

    fn text(&self, style: Style) -> String {
        match self {
            AuditCmdReport::Claims { claims, report } => claims_text(claims, report, style),
            AuditCmdReport::Spectrum {
                claims,
                input,
                shape,
                precision,
                audit,
                ..
            } => match audit {
                Ok(rep) => spectrum_text(claims, input, *shape, *precision, rep, style),
                Err(_) => String::new(),
            },
        }
    }

    fn json(&self) -> Option<String> {
        Some(match self {
            AuditCmdReport::Claims { report, .. } => {
                serde_json::to_string_pretty(report).expect("JSON serialises")
            }
            AuditCmdReport::Spectrum { audit, .. } => match audit {
                Ok(rep) => serde_json::to_string_pretty(rep).expect("JSON serialises"),
                Err(_) => String::new(),
            },
        })
    }
}
