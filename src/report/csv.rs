//! The four tables in the layout the paper's authors published
//! (`matrix_summary.csv`, `schatten_opt.csv`, `observed_bounds.csv`,
//! `p_contribution_raw.csv`). Each certified column holds the enclosure's
//! midpoint (an approximation) with the certified bounds beside it in
//! `<column>_lo` and `<column>_hi`.

use crate::certificate::{CertInterval, Certificate};

/// Shortest round-trip decimal, in exponent form for very large or small
/// magnitudes (so no long runs of padding zeros suggest false precision).
/// Zero is `0` whatever its sign: `-0` and `0` are one value, and a table
/// never writes `-0`.
pub fn num(x: f64) -> String {
    let a = x.abs();
    if a == 0.0 {
        "0".into()
    } else if !(1e-5..1e16).contains(&a) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

/// `mid,lo,hi` of an interval.
pub(crate) fn mid(e: &CertInterval) -> String {
    format!("{},{},{}", num(e.mid()), num(e.lo), num(e.hi))
}

fn opt(e: &Option<CertInterval>) -> String {
    e.as_ref().map(mid).unwrap_or_else(|| ",,".into())
}

/// The file names of the four tables, in the order [`tables`] returns them.
pub const TABLE_NAMES: [&str; 4] = [
    "matrix_summary.csv",
    "schatten_opt.csv",
    "observed_bounds.csv",
    "p_contribution_raw.csv",
];

/// The columns that lead every row of the study's multi-model tables
/// (`report::tables`) and of the measures table.
pub(crate) const MODEL_COLUMNS: &str = "model_id,hidden_size,num_hidden_layers,num_heads";

/// `measures.csv` of the certificates `models` (`(model_id, certificate)`,
/// ids used as given): `model_id, hidden_size, num_hidden_layers,
/// num_heads, measure, value, value_lo, value_hi`, one row per measure each
/// certificate states, its stated interval (nothing computed but the
/// midpoint). The study's table, and `certify --csv`'s for one model.
pub(crate) fn measures_csv<'a>(
    models: impl IntoIterator<Item = (&'a str, &'a crate::certificate::Certificate)>,
) -> String {
    let mut t = format!("{MODEL_COLUMNS},measure,value,value_lo,value_hi\n");
    for (id, cert) in models {
        let md = &cert.model;
        for (name, v) in super::measures::measure_rows(cert) {
            t.push_str(&format!(
                "{id},{},{},{},{name},{}\n",
                md.hidden,
                md.layers,
                md.heads,
                mid(&v)
            ));
        }
    }
    t
}

/// The table of the norm-based measures that [`tables`] adds for a
/// certificate with measures (the study's `measures.csv`, one model).
pub const MEASURES_TABLE: &str = "measures.csv";

/// The certified quantities of `spectra --csv`, in column order (each
/// written as `<name>_lo` and `<name>_hi`), and the ones `audit` reads back
/// from such a table.
pub(crate) const SPECTRA_QUANTITIES: [&str; 12] = [
    "spectral_norm",
    "sv_min",
    "frobenius_norm",
    "nuclear_norm",
    "norm_21",
    "norm_11",
    "stable_rank",
    "rank",
    "norm",
    "log_norm",
    "lambda_max",
    "log_spectral_norm",
];

/// Header of `matrix_summary.csv` (without a newline).
pub(crate) const MATRIX_SUMMARY_HEADER: &str =
    "layer,head,matrix_type,rows,cols,rank,rank_lo,rank_hi,spectral_norm,spectral_norm_lo,spectral_norm_hi,\
frobenius_norm,frobenius_norm_lo,frobenius_norm_hi,nuclear_norm,nuclear_norm_lo,nuclear_norm_hi,\
norm_21,norm_21_lo,norm_21_hi,norm_11,norm_11_lo,norm_11_hi,stable_rank,stable_rank_lo,stable_rank_hi";

/// Header of `schatten_opt.csv`.
pub(crate) const SCHATTEN_OPT_HEADER: &str =
    "layer,head,matrix_type,alpha_mh,alpha_mh_lo,alpha_mh_hi,gamma,gamma_lo,gamma_hi,\
scale_gamma_alpha_L,scale_gamma_alpha_L_lo,scale_gamma_alpha_L_hi,p_grid_m,p_opt,\
min_contribution,min_contribution_lo,min_contribution_hi";

/// Header of `p_contribution_raw.csv`.
pub(crate) const P_CONTRIBUTION_HEADER: &str =
    "layer,head,matrix_type,p,contribution,contribution_lo,contribution_hi";

/// The `expert` column a certificate with experts adds at the end of
/// `matrix_summary.csv` (a routed expert's index, `shared`, or empty for a
/// matrix of no expert); the authors' columns keep their places.
pub(crate) const EXPERT_COLUMN: &str = "expert";

/// Whether `cert`'s `matrix_summary.csv` has the `EXPERT_COLUMN`: some
/// matrix of it belongs to an expert (mixtures of experts only).
pub fn has_experts(cert: &Certificate) -> bool {
    let spectra = cert.spectra.iter().flatten().map(|s| s.expert);
    cert.matrices
        .iter()
        .map(|m| m.expert)
        .chain(spectra)
        .any(|e| e.is_some())
}

/// One `matrix_summary.csv` row of a matrix's certified spectrum (the
/// authors' columns, then the expert when `experts`).
fn summary_row(w: &crate::certificate::SpectrumEntry, experts: bool) -> String {
    let id = w.id();
    let rank_mid = if w.rank.lo == w.rank.hi {
        w.rank.lo.to_string()
    } else {
        format!("{}", (w.rank.lo + w.rank.hi) as f64 / 2.0)
    };
    let mut row = format!(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
        id.layer,
        id.head_column(),
        id.kind.name(),
        w.rows,
        w.cols,
        rank_mid,
        w.rank.lo,
        w.rank.hi,
        mid(&w.spectral_norm),
        mid(&w.frobenius_norm),
        mid(&w.nuclear_norm),
        mid(&w.norm_21),
        mid(&w.norm_11),
        opt(&w.stable_rank),
    );
    if experts {
        row.push(',');
        if let Some(e) = id.expert {
            row.push_str(&expert_cell(e));
        }
    }
    row
}

/// An expert as the `EXPERT_COLUMN` writes it: its index, or `shared`
/// (as the certificate's `expert` key).
pub fn expert_cell(e: crate::arch::Expert) -> String {
    match e {
        crate::arch::Expert::Routed(i) => i.to_string(),
        crate::arch::Expert::Shared => "shared".into(),
    }
}

/// The header of `cert`'s `matrix_summary.csv` (without a newline):
/// [`MATRIX_SUMMARY_HEADER`], with [`EXPERT_COLUMN`] when [`has_experts`].
pub(crate) fn matrix_summary_header(cert: &Certificate) -> String {
    if has_experts(cert) {
        format!("{MATRIX_SUMMARY_HEADER},{EXPERT_COLUMN}")
    } else {
        MATRIX_SUMMARY_HEADER.to_string()
    }
}

/// The rows (without newlines) of `matrix_summary.csv`, `schatten_opt.csv`
/// and `p_contribution_raw.csv` for one certificate, in certificate order.
/// A certificate without a bound has spectra and no proxies: a
/// `matrix_summary.csv` row for each of its matrices, and no rows in the
/// two tables of proxies.
pub(crate) fn matrix_rows(cert: &Certificate) -> [Vec<String>; 3] {
    let m = cert.parameters.grid_m;
    let experts = has_experts(cert);
    let mut summary = Vec::with_capacity(cert.matrices.len());
    let mut opt_t = Vec::with_capacity(cert.matrices.len());
    let mut raw = Vec::with_capacity(cert.matrices.len() * (2 * m + 1));
    for w in cert.spectra.iter().flatten() {
        summary.push(summary_row(w, experts));
    }
    for w in &cert.matrices {
        let id = w.id();
        summary.push(summary_row(&w.spectrum(), experts));
        // p_opt: the smallest p among those with the least midpoint.
        let best = w
            .contributions
            .iter()
            .map(|c| (c.p_fraction, c.value.mid()))
            .fold(
                None::<(crate::certificate::GridPoint, f64)>,
                |acc, (g, v)| match acc {
                    Some((_, bv)) if bv <= v => acc,
                    _ => Some((g, v)),
                },
            )
            .map(|(g, _)| num(g.approx()));
        opt_t.push(format!(
            "{},{},{},{},{},{},{},{},{}",
            id.layer,
            id.head_column(),
            id.kind.name(),
            mid(&w.alpha),
            mid(&w.gamma),
            mid(&w.scale),
            m,
            best.unwrap_or_default(),
            mid(&w.min_contribution),
        ));
        for c in &w.contributions {
            raw.push(format!(
                "{},{},{},{},{}",
                id.layer,
                id.head_column(),
                id.kind.name(),
                num(c.p_fraction.approx()),
                mid(&c.value)
            ));
        }
    }
    [summary, opt_t, raw]
}

/// `bound,value,value_lo,value_hi` rows of the two bounds (`ours`,
/// `edelman`); none for a certificate without a bound.
pub(crate) fn bound_rows(cert: &Certificate) -> Vec<String> {
    cert.bounds
        .iter()
        .flat_map(|b| {
            [
                format!("ours,{}", mid(&b.ours)),
                format!("edelman,{}", mid(&b.edelman)),
            ]
        })
        .collect()
}

/// `(file name, contents)` of the four tables, and [`MEASURES_TABLE`]
/// when `cert` states measures. `model_id` fills the `model_id` column of
/// `observed_bounds.csv` and of the measures table.
pub fn tables(cert: &Certificate, model_id: &str) -> Vec<(&'static str, String)> {
    let [summary, opt_t, raw] = matrix_rows(cert);
    let join = |header: &str, rows: Vec<String>| {
        let mut s = String::with_capacity(rows.iter().map(|r| r.len() + 1).sum::<usize>() + 256);
        s.push_str(header);
        s.push('\n');
        for r in rows {
            s.push_str(&r);
            s.push('\n');
        }
        s
    };
    let id = model_id.replace([',', '\n', '"'], "_");
    let mut bounds = String::from("model_id,bound,value,value_lo,value_hi\n");
    for r in bound_rows(cert) {
        bounds.push_str(&format!("{id},{r}\n"));
    }
    let mut out: Vec<(&'static str, String)> = TABLE_NAMES
        .into_iter()
        .zip([
            join(&matrix_summary_header(cert), summary),
            join(SCHATTEN_OPT_HEADER, opt_t),
            bounds,
            join(P_CONTRIBUTION_HEADER, raw),
        ])
        .collect();
    if cert.measures.is_some() {
        out.push((MEASURES_TABLE, measures_csv([(id.as_str(), cert)])));
    }
    out
}
