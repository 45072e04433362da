//! Output of certified results: JSON (machine-readable, exact round-trip
//! decimals), readable tables, the authors' CSV layout ([`csv`]),
//! all-or-nothing file output (`crate::io::output`), and the study's products read
//! from several certificates ([`set`]): multi-model tables ([`tables`]),
//! the paper's figures as SVG ([`figures`]), the self-contained HTML page
//! (`html`) and the notes on where the authors' float computation departs
//! from the exact values (`fidelity`); the bounds and measures by name
//! ([`measures`]) and their trajectory over training (`trajectory`).
//!
//! In JSON, every `lo`/`hi` denotes a binary64 number, written as the
//! shortest decimal that parses back to that very f64 (serde_json uses the
//! shortest round-trip representation): a reader must parse it as binary64
//! (not as an exact decimal) to get the certified interval. Text output
//! rounds every interval outward instead ([`fmt`]), so the printed
//! decimals themselves contain the exact value.

pub mod csv;
pub(crate) mod fidelity;
pub mod figures;
pub mod fmt;
pub(crate) mod html;
pub mod measures;
pub mod set;
pub mod tables;
mod text;
pub(crate) mod trajectory;

pub use text::summary_text_with;

use serde::Serialize;

use crate::enclosure::{Enclosure, OpenEnclosure};
use crate::linalg::{CertifiedValue, ExactBounds, SingularValues};
use crate::spectral::{SchattenEnclosure, SpectralSummary};

/// JSON form of one certified singular value.
#[derive(Clone, Debug, Serialize)]
pub struct ValueJson {
    /// Lower bound.
    pub lo: f64,
    /// Upper bound.
    pub hi: f64,
    /// Certifying method.
    pub method: String,
    /// Number of values sharing this enclosure.
    pub cluster_size: usize,
    /// Decimal lower bound tighter than f64 (MPFR only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lo_exact: Option<String>,
    /// Decimal upper bound tighter than f64 (MPFR only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hi_exact: Option<String>,
}

impl From<&CertifiedValue> for ValueJson {
    fn from(v: &CertifiedValue) -> Self {
        Self {
            lo: v.enclosure.lo(),
            hi: v.enclosure.hi(),
            method: v.method.name(),
            cluster_size: v.cluster_size,
            lo_exact: v.exact.as_ref().map(|e| e.lo.clone()),
            hi_exact: v.exact.as_ref().map(|e| e.hi.clone()),
        }
    }
}

/// The serialised view of one Schatten quantity ([`SchattenEnclosure`]),
/// the one both commands write: its exponent as `P` (a JSON number in
/// `svd`'s report, `SchattenJson`; the decimal as a string in `spectra`'s
/// rows, `cmd::spectra::SchattenRow`), its enclosures, and why any is open
/// or given by decimal ends only.
#[derive(Clone, Debug, Serialize)]
pub struct SchattenView<P> {
    /// The exponent: the exact decimal given (`1e-400` stays `1e-400`,
    /// never the binary64 `0.0`).
    pub p: P,
    /// Encloses `sum sigma^p` (the rank for p = 0); where it overflowed
    /// binary64, `{"lo": <finite>, "hi": null}`: the interval `[lo, +inf)`
    /// ([`SchattenEnclosure::power_interval`]).
    pub power: Option<OpenEnclosure>,
    /// Encloses the Schatten (quasi-)norm, `[lo, +inf)` (`"hi": null`)
    /// where it overflowed binary64; null for p = 0.
    pub norm: Option<OpenEnclosure>,
    /// Where `power` overflowed (its `hi` null): decimal ends (rounded
    /// outward) that enclose it, from MPFR (`lo`, `hi` strings).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub power_exact: Option<ExactBounds>,
    /// Where `norm` is null for overflow (p > 0): its decimal ends.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub norm_exact: Option<ExactBounds>,
    /// Where `power` overflowed (p > 0): `ln sum sigma^p`, an interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_power: Option<Enclosure>,
    /// Why a quantity is null or given by decimal ends only.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl<P> SchattenView<P> {
    /// The view of `s` with its exponent written as `p`.
    ///
    /// *Guarantee: certified enclosure*, as `s`'s (the same intervals,
    /// [`SchattenEnclosure::power_interval`] and `norm_interval` for the
    /// open ones).
    pub(crate) fn of(s: &SchattenEnclosure, p: P) -> Self {
        Self {
            p,
            power: s.power_interval(),
            norm: s.norm_interval(),
            power_exact: s.power_exact.clone(),
            norm_exact: s.norm_exact.clone(),
            log_power: s.log_power,
            notes: s.notes.clone(),
        }
    }
}

/// `svd`'s view of a Schatten quantity: the exponent as a JSON number.
pub(crate) type SchattenJson = SchattenView<Box<serde_json::value::RawValue>>;

impl From<&SchattenEnclosure> for SchattenJson {
    fn from(s: &SchattenEnclosure) -> Self {
        // `s.p` is a JSON number literal when it comes from SchattenP::parse;
        // anything else is written as a JSON string rather than trusted.
        let p = serde_json::value::RawValue::from_string(s.p.clone())
            .ok()
            .filter(|raw| serde_json::from_str::<serde_json::Number>(raw.get()).is_ok())
            .unwrap_or_else(|| serde_json::value::to_raw_value(&s.p).expect("a string serialises"));
        Self::of(s, p)
    }
}

/// The serialisable view of `svd`'s certified answer (`cmd::svd::SvdCertified`):
/// what `specbound svd --json` writes.
#[derive(Clone, Debug, Serialize)]
pub struct SvdJson {
    /// Input file.
    pub input: String,
    /// Tensor name (safetensors only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tensor: Option<String>,
    /// Storage type the values were converted from (exactly).
    pub dtype: String,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Requested precision.
    pub precision: String,
    /// Index-matched enclosures, largest first, `min(rows, cols)` entries.
    pub singular_values: Vec<ValueJson>,
    /// Trailing values that are exactly zero by structure.
    pub structural_zeros: usize,
    /// The certified norms, stable rank and rank (flattened into the object).
    #[serde(flatten)]
    pub summary: SpectralSummary,
    /// One entry per requested p.
    pub schatten: Vec<SchattenJson>,
    /// Largest relative radius over the singular values (tightness, not a guarantee).
    pub max_relative_radius: f64,
    /// What the method selection did that the values do not show (an
    /// inconclusive stage replaced by another, a stage skipped for its cost,
    /// an `auto` target not met); empty when the method ran as asked.
    pub notes: Vec<String>,
}

impl SvdJson {
    /// Assembles the report.
    pub(crate) fn new(
        input: String,
        tensor: Option<String>,
        dtype: String,
        precision: String,
        sv: &SingularValues,
        summary: &SpectralSummary,
        schatten: &[SchattenEnclosure],
    ) -> Self {
        Self {
            input,
            tensor,
            dtype,
            rows: sv.rows,
            cols: sv.cols,
            precision,
            singular_values: sv.values.iter().map(ValueJson::from).collect(),
            structural_zeros: sv.structural_zeros,
            summary: summary.clone(),
            schatten: schatten.iter().map(SchattenJson::from).collect(),
            max_relative_radius: sv.max_rel_rad(),
            notes: sv.notes.clone(),
        }
    }

    /// A readable table, every interval rounded outward in style `st`.
    pub(crate) fn to_table_with(&self, max_rows: usize, st: fmt::Style) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        self.write_summary(&mut s, st);
        self.write_schatten(&mut s, st);
        let _ = writeln!(s, "  max relative radius {:.2e}", self.max_relative_radius);
        for note in &self.notes {
            let _ = writeln!(s, "note: {note}");
        }
        self.write_singular_values(&mut s, max_rows, st);
        s
    }

    /// The input line and the certified norms, stable rank and rank.
    fn write_summary(&self, s: &mut String, st: fmt::Style) {
        use std::fmt::Write;
        let fmt = |e: &Enclosure| fmt::interval(e.lo(), e.hi(), st);
        let _ = writeln!(
            s,
            "{}{}: {} x {} ({}), precision {}",
            self.input,
            self.tensor
                .as_ref()
                .map(|t| format!(" [{t}]"))
                .unwrap_or_default(),
            self.rows,
            self.cols,
            self.dtype,
            self.precision
        );
        let _ = writeln!(
            s,
            "certified quantities (each interval, read as decimals, contains the exact value):"
        );
        let _ = writeln!(s, "  spectral norm   {}", fmt(&self.summary.spectral_norm));
        let _ = writeln!(s, "  Frobenius norm  {}", fmt(&self.summary.frobenius_norm));
        let _ = writeln!(s, "  nuclear norm    {}", fmt(&self.summary.nuclear_norm));
        let _ = writeln!(s, "  (2,1)-norm      {}", fmt(&self.summary.norm_21));
        let _ = writeln!(s, "  (1,1)-norm      {}", fmt(&self.summary.norm_11));
        match &self.summary.stable_rank {
            Some(e) => {
                let _ = writeln!(s, "  stable rank     {}", fmt(e));
            }
            None => {
                let _ = writeln!(
                    s,
                    "  stable rank     inconclusive (sigma_1 not certified > 0)"
                );
            }
        }
        let _ = writeln!(
            s,
            "  rank            {}",
            fmt::interval(self.summary.rank.lo as f64, self.summary.rank.hi as f64, st)
        );
    }

    /// One line per Schatten index (power sum, and norm when stated) with
    /// its notes.
    fn write_schatten(&self, s: &mut String, st: fmt::Style) {
        use std::fmt::Write;
        let fmt = |e: &Enclosure| fmt::interval(e.lo(), e.hi(), st);
        for sc in &self.schatten {
            let p = &sc.p;
            // The binary64 interval, else the decimal ends, else `[lo, inf]`.
            let wide = |e: Option<&OpenEnclosure>, x: Option<&ExactBounds>| match (
                e.map(|e| (e.bounded(), e.lo())),
                x,
            ) {
                (Some((Some(b), _)), _) => fmt(&b),
                (_, Some(x)) => format!("[{}, {}]", x.lo, x.hi),
                (Some((None, lo)), None) => fmt::interval(lo, f64::INFINITY, st),
                (None, None) => "overflow".into(),
            };
            let pw = wide(sc.power.as_ref(), sc.power_exact.as_ref());
            if sc.norm.is_some() || sc.norm_exact.is_some() {
                let nm = wide(sc.norm.as_ref(), sc.norm_exact.as_ref());
                let _ = writeln!(s, "  Schatten p={p}: sum sigma^p {pw}, norm {nm}");
            } else {
                let _ = writeln!(s, "  Schatten p={p}: {pw}");
            }
            for note in &sc.notes {
                let _ = writeln!(s, "    note: {note}");
            }
        }
    }

    /// The singular values, at most `max_rows` of them (the first and
    /// last halves, a line saying how many more between).
    fn write_singular_values(&self, s: &mut String, max_rows: usize, st: fmt::Style) {
        use std::fmt::Write;
        let _ = writeln!(s, "singular values (largest first):");
        // The rows first, then the enclosure column as wide as its widest
        // cell: MPFR's decimal ends can be far wider than binary64's, and
        // the method column stays aligned.
        let n = self.singular_values.len();
        let shown = |i: usize| n <= max_rows || i < max_rows / 2 || i >= n - max_rows / 2;
        let rows: Vec<(usize, String, String)> = self
            .singular_values
            .iter()
            .enumerate()
            .filter(|(i, _)| shown(*i))
            .map(|(i, v)| {
                // MPFR values carry decimal bounds tighter than binary64.
                let enc = match (&v.lo_exact, &v.hi_exact) {
                    (Some(l), Some(h)) => format!("[{l}, {h}]"),
                    _ => fmt::interval(v.lo, v.hi, st),
                };
                let method = if v.cluster_size > 1 {
                    format!("{} (cluster of {})", v.method, v.cluster_size)
                } else {
                    v.method.clone()
                };
                (i, enc, method)
            })
            .collect();
        let w = rows
            .iter()
            .map(|(_, e, _)| e.chars().count())
            .fold(44, usize::max);
        let _ = writeln!(s, "  {:>5}  {:<w$}  method", "i", "enclosure");
        let more = format!("  ... {} more (use --json for all)\n", n - rows.len());
        let mut next = 0;
        for (i, enc, method) in &rows {
            if *i != next {
                s.push_str(&more);
            }
            next = i + 1;
            let _ = writeln!(s, "  {:>5}  {enc:<w$}  {method}", i + 1);
        }
        if next < n {
            s.push_str(&more);
        }
    }
}
