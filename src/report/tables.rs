//! The study's tables (`DIR/tables/`): the authors' four tables for all
//! models together, each row led by `model_id, hidden_size,
//! num_hidden_layers, num_heads` as in their multi-model tables;
//! `singular_values.csv`; `scaling.csv`, the certified ratios of
//! figures 2 and 3; and `measures.csv`, the norm-based measures beside the
//! bounds of `observed_bounds.csv` (same columns, `measure` for `bound`;
//! a table of its own, so that `observed_bounds.csv` keeps holding the two
//! bounds that `audit` reads). Certified columns hold the enclosure's midpoint with
//! the certified ends in `<column>_lo` and `<column>_hi`; an empty triple
//! means no finite enclosure (a ratio whose denominator is not certified
//! positive).

use super::csv::{
    bound_rows, matrix_rows, mid, MATRIX_SUMMARY_HEADER, P_CONTRIBUTION_HEADER,
    SCHATTEN_OPT_HEADER, TABLE_NAMES,
};
use super::set::{normalized_spectrum, scaling, StudySet};
use crate::certificate::CertInterval;

/// The file names of the study's tables, in the order `study_tables` returns them.
pub const STUDY_TABLE_NAMES: [&str; 7] = [
    TABLE_NAMES[0],
    TABLE_NAMES[1],
    TABLE_NAMES[2],
    TABLE_NAMES[3],
    "singular_values.csv",
    "scaling.csv",
    "measures.csv",
];

pub(crate) use super::csv::{measures_csv, MODEL_COLUMNS};

fn opt_mid(x: &Option<CertInterval>) -> String {
    x.as_ref().map(mid).unwrap_or_else(|| ",,".into())
}

/// `(file name, contents)` of the seven tables for every model of `set`.
/// Ids are used as given: the caller keeps them free of `,`, `"` and line
/// breaks (the study's id rule does).
pub(crate) fn study_tables(set: &StudySet) -> Vec<(&'static str, String)> {
    let mut out: [String; 7] = Default::default();
    out[0] = format!("{MODEL_COLUMNS},{MATRIX_SUMMARY_HEADER}\n");
    out[1] = format!("{MODEL_COLUMNS},{SCHATTEN_OPT_HEADER}\n");
    out[2] = format!("{MODEL_COLUMNS},bound,value,value_lo,value_hi\n");
    out[3] = format!("{MODEL_COLUMNS},{P_CONTRIBUTION_HEADER}\n");
    out[4] = "model_id,layer,head,matrix_type,rank_index,sigma,sigma_lo,sigma_hi,\
sigma_normalized,sigma_normalized_lo,sigma_normalized_hi\n"
        .to_string();
    out[5] = "model_id,bound,axis,x,anchor_model_id,ratio,ratio_lo,ratio_hi\n".to_string();
    out[6] = measures_csv(set.models.iter().map(|mc| (mc.id.as_str(), &mc.cert)));
    for mc in &set.models {
        let md = &mc.cert.model;
        let lead = format!("{},{},{},{}", mc.id, md.hidden, md.layers, md.heads);
        let [summary, opt_t, raw] = matrix_rows(&mc.cert);
        for (t, rows) in [(0, summary), (1, opt_t), (3, raw)] {
            for r in rows {
                out[t].push_str(&lead);
                out[t].push(',');
                out[t].push_str(&r);
                out[t].push('\n');
            }
        }
        for r in bound_rows(&mc.cert) {
            out[2].push_str(&format!("{lead},{r}\n"));
        }
        for w in &mc.cert.matrices {
            let id = w.id();
            let norm = normalized_spectrum(w);
            for (i, nv) in norm.iter().enumerate() {
                let s = w.singular_value(i).expect("i < min(rows, cols)");
                out[4].push_str(&format!(
                    "{},{},{},{},{},{},{}\n",
                    mc.id,
                    id.layer,
                    id.head_column(),
                    id.kind.name(),
                    i + 1,
                    mid(&s),
                    opt_mid(nv)
                ));
            }
        }
    }
    for r in scaling(set) {
        out[5].push_str(&format!(
            "{},{},{},{},{},{}\n",
            set.models[r.model].id,
            r.bound.name(),
            r.axis.name(),
            r.x,
            set.models[r.anchor].id,
            opt_mid(&r.ratio)
        ));
    }
    STUDY_TABLE_NAMES.into_iter().zip(out).collect()
}
