//! The bounds and the norm-based measures of a certificate as one list of
//! named certified intervals, in a fixed order (`B_ours`, `B_Edel`, then the
//! measures of `docs/measures.md`), as the study's tables, the trajectory
//! and the report show them. Every interval is the certificate's own, as
//! stated there (nothing is computed here).

use crate::certificate::{CertInterval, Certificate};

/// The names of the bounds and measures, in table order: `ours` and
/// `edelman` (as `observed_bounds.csv` names them), then the measures (as
/// the certificate's `measures` section names them).
pub(crate) const QUANTITY_NAMES: [&str; 15] = [
    "ours",
    "edelman",
    "log_prod_of_spec",
    "log_sum_of_spec",
    "log_prod_of_fro",
    "log_sum_of_fro",
    "param_norm",
    "log_spec_orig",
    "bartlett",
    "log_bartlett",
    "frobenius_distance",
    "dist_spec_init",
    "log_spec_init",
    "bartlett_init",
    "log_bartlett_init",
];

/// Every bound and measure of `cert` by name (`QUANTITY_NAMES` order),
/// `None` where the certificate states none (a certificate without a
/// bound or without measures; a measure that exceeds binary64 or needs `--init`).
pub fn quantities(cert: &Certificate) -> [(&'static str, Option<CertInterval>); 15] {
    let b = cert.bounds.as_ref();
    let m = cert.measures.as_ref();
    let get = |f: fn(&crate::certificate::MeasuresEntry) -> Option<CertInterval>| m.and_then(f);
    [
        (QUANTITY_NAMES[0], b.map(|b| b.ours)),
        (QUANTITY_NAMES[1], b.map(|b| b.edelman)),
        (QUANTITY_NAMES[2], get(|m| m.log_prod_of_spec)),
        (QUANTITY_NAMES[3], get(|m| m.log_sum_of_spec)),
        (QUANTITY_NAMES[4], get(|m| m.log_prod_of_fro)),
        (QUANTITY_NAMES[5], get(|m| m.log_sum_of_fro)),
        (QUANTITY_NAMES[6], get(|m| m.param_norm)),
        (QUANTITY_NAMES[7], get(|m| m.log_spec_orig)),
        (QUANTITY_NAMES[8], get(|m| m.bartlett)),
        (QUANTITY_NAMES[9], get(|m| m.log_bartlett)),
        (QUANTITY_NAMES[10], get(|m| m.frobenius_distance)),
        (QUANTITY_NAMES[11], get(|m| m.dist_spec_init)),
        (QUANTITY_NAMES[12], get(|m| m.log_spec_init)),
        (QUANTITY_NAMES[13], get(|m| m.bartlett_init)),
        (QUANTITY_NAMES[14], get(|m| m.log_bartlett_init)),
    ]
}

/// The measures of `cert` that it states (the bounds left out), by name.
pub fn measure_rows(cert: &Certificate) -> Vec<(&'static str, CertInterval)> {
    quantities(cert)
        .into_iter()
        .skip(2)
        .filter_map(|(n, v)| v.map(|v| (n, v)))
        .collect()
}
