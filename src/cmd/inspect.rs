//! `specbound inspect`: the recognised architecture and its proxy
//! matrices, without computing any spectrum.

use super::{CmdError, Exit, ModelRef, Report, Style};
use crate::arch::{self, ArchOverrides, Architecture, ProxyDescription, UnmappedTensor};

/// What to inspect.
#[derive(Clone, Debug)]
pub struct InspectRequest {
    /// The model.
    pub model: ModelRef,
    /// Heads, for a file without config.json or metadata.
    pub heads: Option<usize>,
    /// The L_phi that certify would use (decides the L_phi extension note).
    pub l_phi: crate::bounds::LPhi,
    /// The stack of a model of several (`--stack`; default the first).
    pub stack: Option<String>,
}

/// The report of `inspect`.
#[derive(Debug)]
pub struct InspectReport {
    /// The model as the user named it.
    pub shown: String,
    /// The architecture recognised.
    pub arch: Architecture,
    /// Every proxy matrix and what it is formed from.
    pub matrices: Vec<ProxyDescription>,
    /// Tensors not used by the proxies: name, shape, dtype.
    pub unmapped: Vec<UnmappedTensor>,
    /// Where the certificate goes beyond the paper.
    pub extensions: Vec<String>,
    /// How the paper's bound applies (`Architecture::bound_applies`).
    pub bound: String,
}

/// Runs `inspect`.
///
/// ```
/// use specbound::cmd::inspect::{run, InspectRequest};
/// use specbound::cmd::{defaults, ModelRef};
///
/// let req = InspectRequest {
///     model: ModelRef::Bundled,
///     heads: None,
///     l_phi: defaults::L_PHI.parse().unwrap(),
///     stack: None,
/// };
/// let report = run(&req).unwrap();
/// assert_eq!(report.arch.layers, 6);
/// ```
pub fn run(req: &InspectRequest) -> Result<InspectReport, CmdError> {
    let resolved = req.model.resolve()?;
    let ck = crate::io::checkpoint::Checkpoint::open(&resolved.path)?;
    let arch = arch::detect(
        &ck,
        &ArchOverrides {
            heads: req.heads,
            layers: None,
            stack: req.stack.clone(),
        },
    )?;
    let (matrices, unmapped) = arch::describe(&ck, &arch)?;
    let extensions = arch.extensions(req.l_phi.is_paper());
    let bound = arch.bound_applies(req.l_phi.is_paper());
    Ok(InspectReport {
        bound,
        shown: resolved.shown,
        arch,
        matrices,
        unmapped,
        extensions,
    })
}

impl Report for InspectReport {
    fn exit(&self) -> Exit {
        Exit::Success
    }

    fn notices(&self) -> Vec<String> {
        let a = &self.arch;
        a.stack.iter().filter_map(|s| s.notice(&a.family)).collect()
    }

    fn text(&self, _style: Style) -> String {
        use std::fmt::Write;
        let a = &self.arch;
        let activation = a.activation.as_ref().map_or_else(
            || "unknown".to_string(),
            |x| format!("{} ({})", x.name, x.source),
        );
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{}: {} ({} layout, prefix '{}'): {} layers, hidden {}, {} heads of {} ({} key/value heads), feed-forward {}, activation {activation}",
            self.shown, a.family, a.layout(), a.prefix, a.layers, a.hidden, a.heads, a.head_dim, a.kv_heads, a.intermediate
        );
        if let Some(st) = &a.stack {
            let _ = writeln!(
                s,
                "stack: {} (of {}; {})",
                st.name,
                st.stacks.join(", "),
                if st.by_flag {
                    "given by --stack"
                } else {
                    "the first the files hold"
                }
            );
        }
        let _ = writeln!(s, "bound: {}", self.bound);
        if let Some(m) = &a.moe {
            let _ = writeln!(s, "experts: {}", experts_line(m));
        }
        let cross = cross_tensors(a);
        if !cross.is_empty() {
            let _ = writeln!(
                s,
                "cross-attention (QK_cross, V_tilde_cross per head; spectra only, no bound uses them): {}",
                cross
                    .iter()
                    .map(|(r, t)| format!("{r} {t}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        for n in &self.extensions {
            let _ = writeln!(s, "EXTENSION OF THE PAPER: {n}");
        }
        let _ = writeln!(s, "{} proxy matrices:", self.matrices.len());
        for m in self.matrices.iter().filter(|m| m.head <= 0 || m.layer == 0) {
            let kind = match m.expert {
                Some(e) => format!("{} ({e})", m.kind),
                None => m.kind.to_string(),
            };
            let _ = writeln!(
                s,
                "  layer {:>3} head {:>3} {:<13} {:>6} x {:<6} {}",
                m.layer, m.head, kind, m.rows, m.cols, m.formed_from
            );
        }
        let _ = writeln!(s, "  (heads other than 0 shown for layer 0 only)");
        let _ = writeln!(
            s,
            "{} tensors not used by the proxies:",
            self.unmapped.len()
        );
        for (n, sh, d) in self.unmapped.iter().take(40) {
            let _ = writeln!(s, "  {n} {sh:?} {d}");
        }
        if self.unmapped.len() > 40 {
            let _ = writeln!(
                s,
                "  ... and {} more (use --json)",
                self.unmapped.len() - 40
            );
        }
        s
    }

    fn json(&self) -> Option<String> {
        let a = &self.arch;
        let j = serde_json::json!({
            "model": self.shown,
            "architecture": a.family,
            "layout": a.layout(),
            "tensor_prefix": a.prefix,
            "layers": a.layers,
            "hidden": a.hidden,
            "heads": a.heads,
            "kv_heads": a.kv_heads,
            "head_dim": a.head_dim,
            "intermediate": a.intermediate,
            "experts": a.moe.as_ref().map(|m| serde_json::json!({
                "layers": m.layers,
                "expert_width": m.expert_width,
                "shared_width": m.shared_width,
                "experts_per_token": m.experts_per_token,
            })),
            "stack": a.stack.as_ref().map(|s| serde_json::json!({"name": s.name, "stacks": s.stacks, "by_flag": s.by_flag})),
            "cross_attention": a.cross_attention().then(|| cross_tensors(a).iter().map(|(r, t)| serde_json::json!({"role": r, "tensor": t})).collect::<Vec<_>>()),
            "activation": a.activation.as_ref().map(|x| serde_json::json!({"name": x.name, "source": x.source})),
            "bound": self.bound,
            "extensions": self.extensions,
            "matrices": self.matrices,
            "unmapped": self.unmapped.iter().map(|(n, s, d)| serde_json::json!({"tensor": n, "shape": s, "dtype": d})).collect::<Vec<_>>(),
        });
        Some(serde_json::to_string_pretty(&j).expect("JSON serialises"))
    }
}

/// The cross-attention weights of a decoder block, `(role, tensor)` with
/// `{l}` standing for the layer (none for a stack without one), as the
/// layout table names them.
fn cross_tensors(a: &Architecture) -> Vec<(&'static str, String)> {
    a.tensors
        .iter()
        .flat_map(|t| {
            t.roles.iter().filter(|r| r.cross()).map(move |r| {
                (
                    r.name(),
                    crate::arch::clean_to(&format!("{}{}", a.prefix, t.name), 256),
                )
            })
        })
        .collect()
}

/// The experts of a mixture-of-experts model, one line: routed experts and
/// their width, the shared expert, the routing, and the dense layers.
fn experts_line(m: &crate::arch::MoeLayout) -> String {
    let sparse: Vec<_> = m.layers.iter().filter(|f| f.experts > 0).collect();
    let dense: Vec<String> = m
        .layers
        .iter()
        .enumerate()
        .filter(|(_, f)| f.experts == 0)
        .map(|(l, _)| l.to_string())
        .collect();
    let mut s = format!(
        "{} routed experts of width {} in {} sparse layer{}",
        sparse.first().map_or(0, |f| f.experts),
        m.expert_width,
        sparse.len(),
        if sparse.len() == 1 { "" } else { "s" }
    );
    if m.shared_width > 0 {
        s += &format!(", a shared expert of width {}", m.shared_width);
    }
    if let Some(k) = m.experts_per_token {
        s += &format!(", {k} per token (top-k routing)");
    }
    if !dense.is_empty() {
        s += &format!("; dense layers: {}", dense.join(", "));
    }
    s + "; every expert's M_in and M_out is certified, the router is not a proxy matrix"
}
