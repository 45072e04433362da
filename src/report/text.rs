//! The text summary `certify` prints, read from the certificate.

use std::fmt::Write;

use crate::certificate::{CertInterval, Certificate};

fn iv(x: &CertInterval) -> String {
    format!("[{:e}, {:e}]", x.lo, x.hi)
}

/// The summary of a certificate (model, parameters, bounds, per-layer
/// alpha and xi, extensions), `secs` being the time it took.
pub fn summary_text(c: &Certificate, secs: f64) -> String {
    let mut s = String::new();
    let md = &c.model;
    let _ = writeln!(
        s,
        "{}: {} (layers {}, hidden {}, heads {} x {}, intermediate {})",
        md.path, md.architecture, md.layers, md.hidden, md.heads, md.head_dim, md.intermediate
    );
    for f in &md.files {
        let _ = writeln!(s, "  sha256 {}  {}", f.sha256, f.file);
    }
    let _ = writeln!(
        s,
        "L_phi = {}, grid m = {}, precision {}, {} proxy matrices certified in {:.2} s",
        c.parameters.l_phi,
        c.parameters.grid_m,
        c.parameters.precision,
        c.matrices.len(),
        secs
    );
    for e in &c.extensions {
        let _ = writeln!(s, "EXTENSION OF THE PAPER: {e}");
    }
    let _ = writeln!(
        s,
        "certified bounds (each interval contains the exact value):"
    );
    let _ = writeln!(s, "  B_ours    {}", iv(&c.bounds.ours));
    let _ = writeln!(s, "  B_Edel    {}", iv(&c.bounds.edelman));
    let _ = writeln!(s, "per layer:");
    for x in &c.layers {
        let _ = writeln!(
            s,
            "  layer {}: alpha {}  xi {}",
            x.layer,
            iv(&x.alpha),
            iv(&x.xi)
        );
    }
    let _ = writeln!(
        s,
        "(use --json or --out for the full certificate, --csv DIR for the tables)"
    );
    s
}
