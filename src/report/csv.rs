//! The four tables in the layout the paper's authors published
//! (`matrix_summary.csv`, `schatten_opt.csv`, `observed_bounds.csv`,
//! `p_contribution_raw.csv`). Each certified column holds the enclosure's
//! midpoint (an approximation) with the certified bounds beside it in
//! `<column>_lo` and `<column>_hi`.

use inari::Interval;

use crate::certify::ModelCertificate;
use crate::enclosure::Enclosure;

/// Shortest round-trip decimal, in exponent form for very large or small
/// magnitudes (so no long runs of padding zeros suggest false precision).
pub fn num(x: f64) -> String {
    let a = x.abs();
    if a != 0.0 && !(1e-5..1e16).contains(&a) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

fn mid(e: &Enclosure) -> String {
    format!("{},{},{}", num(e.mid()), num(e.lo()), num(e.hi()))
}

fn mid_iv(x: Interval) -> String {
    match Enclosure::from_interval(x) {
        Some(e) => mid(&e),
        None => ",,".into(),
    }
}

fn opt(e: &Option<Enclosure>) -> String {
    e.as_ref().map(mid).unwrap_or_else(|| ",,".into())
}

/// `(file name, contents)` of the four tables. `model_id` fills the
/// `model_id` column of `observed_bounds.csv`.
pub fn tables(cert: &ModelCertificate, model_id: &str) -> Vec<(&'static str, String)> {
    let m = cert.params.grid_m;
    let mut summary = String::from(
        "layer,head,matrix_type,rows,cols,rank,rank_lo,rank_hi,spectral_norm,spectral_norm_lo,spectral_norm_hi,\
frobenius_norm,frobenius_norm_lo,frobenius_norm_hi,nuclear_norm,nuclear_norm_lo,nuclear_norm_hi,\
norm_21,norm_21_lo,norm_21_hi,norm_11,norm_11_lo,norm_11_hi,stable_rank,stable_rank_lo,stable_rank_hi\n",
    );
    let mut opt_t = String::from(
        "layer,head,matrix_type,alpha_mh,alpha_mh_lo,alpha_mh_hi,gamma,gamma_lo,gamma_hi,\
scale_gamma_alpha_L,scale_gamma_alpha_L_lo,scale_gamma_alpha_L_hi,p_grid_m,p_opt,\
min_contribution,min_contribution_lo,min_contribution_hi\n",
    );
    let mut raw =
        String::from("layer,head,matrix_type,p,contribution,contribution_lo,contribution_hi\n");
    for (r, p) in cert.results.iter().zip(&cert.proxies.matrices) {
        let s = &r.summary;
        let rank_mid = if s.rank.lo == s.rank.hi {
            s.rank.lo.to_string()
        } else {
            format!("{}", (s.rank.lo + s.rank.hi) as f64 / 2.0)
        };
        summary.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
            r.id.layer,
            r.id.head_column(),
            r.id.kind.name(),
            r.rows,
            r.cols,
            rank_mid,
            s.rank.lo,
            s.rank.hi,
            mid(&s.spectral_norm),
            mid(&s.frobenius_norm),
            mid(&s.nuclear_norm),
            mid(&s.norm_21),
            mid(&s.norm_11),
            opt(&s.stable_rank),
        ));
        // p_opt: the smallest p among those with the least midpoint.
        let best = p
            .contributions
            .iter()
            .filter_map(|(k, c)| Enclosure::from_interval(*c).map(|e| (*k, e.mid())))
            .fold(None::<(usize, f64)>, |acc, (k, v)| match acc {
                Some((_, bv)) if bv <= v => acc,
                _ => Some((k, v)),
            })
            .map(|(k, _)| num(k as f64 / m as f64));
        opt_t.push_str(&format!(
            "{},{},{},{},{},{},{},{},{}\n",
            r.id.layer,
            r.id.head_column(),
            r.id.kind.name(),
            mid_iv(p.alpha),
            mid_iv(p.gamma),
            mid_iv(p.scale),
            m,
            best.unwrap_or_default(),
            mid_iv(p.min_contribution),
        ));
        for (k, c) in &p.contributions {
            raw.push_str(&format!(
                "{},{},{},{},{}\n",
                r.id.layer,
                r.id.head_column(),
                r.id.kind.name(),
                num(*k as f64 / m as f64),
                mid_iv(*c)
            ));
        }
    }
    let id = model_id.replace([',', '\n', '"'], "_");
    let bounds = format!(
        "model_id,bound,value,value_lo,value_hi\n{id},ours,{}\n{id},edelman,{}\n",
        mid_iv(cert.proxies.ours),
        mid_iv(cert.proxies.edelman)
    );
    vec![
        ("matrix_summary.csv", summary),
        ("schatten_opt.csv", opt_t),
        ("observed_bounds.csv", bounds),
        ("p_contribution_raw.csv", raw),
    ]
}
