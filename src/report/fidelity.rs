//! Where the authors' float64 computation departs from the exact values,
//! and by how much: the notes the study report, the docs and `audit` carry.
//!
//! The authors form every per-head matrix (`QK = Q_h^T K_h`, `V_tilde =
//! V_h^T O_h`) as a dense N x N float64 product and take its float64 SVD.
//! The exact product has rank at most `head_dim`, so `N - head_dim` of its
//! singular values are exactly zero; the float SVD returns them as
//! round-off values near `1e-16 sigma_1`. Their numerical rank (values above
//! `1e-10 k max(sigma_1, 1)`) ignores them, so `c(W, 0)` is exact, but
//! `S_p = sum sigma^p` for `p > 0` counts `(N - head_dim) t^p`, which at
//! small p is not small (`t^(1/12)` is about `0.05` for `t = 1e-16`).
//!
//! Everything here is a *float model* of that computation, evaluated in
//! float64 from the certificate's midpoints: an explanation of a published
//! number, never a certified quantity. The certified values stay those of
//! the certificate.

use crate::certificate::{CertInterval, Certificate, GridPoint, MatrixEntry};

use super::fmt;

/// The note on per-head round-off values (docs, report).
pub(crate) const ROUNDOFF_NOTE: &str = "The authors compute per-head singular values from the dense N x N \
float64 product (Q_h^T K_h, V_h^T O_h), so their spectra carry N - head_dim round-off values near \
1e-16 sigma_1 where the exact product has exact zeros (its rank is at most head_dim; specbound keeps the \
product factored and knows these values to be exactly 0). Their rank at p = 0 uses a tolerance \
(1e-10 k max(sigma_1, 1)) and is exact, but their S_p = sum sigma^p at p > 0 counts the round-off values: \
at small p this inflates c(W, p) for QK and V_tilde heads, and where the exact optimum is near p = 1/m their p_opt can lean towards 0. specbound certifies the exact \
values; `specbound audit` says so when a published number is off for this reason, stating the certified \
exact value and the size of the float artefact.";

/// The note on the scale floor (docs, report).
pub(crate) const SCALE_FLOOR_NOTE: &str = "The authors floor the scale s = gamma alpha L at the smallest \
normal float64 number (2.2250738585072014e-308) before raising it to the power p/(p+2); specbound keeps \
an exact s = 0 when the certified scale is exactly zero (some C_2 in gamma or alpha is exactly 0), so its \
c(W, p) for p > 0 is exactly 0 there, where the authors' value is tiny but positive.";

/// The authors' tolerance factor of the numerical rank.
pub(crate) const AUTHORS_RANK_TOL: f64 = 1e-10;

/// The authors' floor of the scale: the smallest normal float64 number.
pub(crate) const AUTHORS_SCALE_FLOOR: f64 = f64::MIN_POSITIVE;

/// The authors' float64 evaluation of `c(W, p)` on the grid for one matrix
/// whose `z` exactly-zero singular values are replaced by round-off values
/// of one size `t` (a float model, from midpoints).
#[derive(Clone, Debug)]
pub(crate) struct FloatCurve {
    /// Midpoints of the certified nonzero singular values.
    sigma: Vec<f64>,
    /// Exact zeros (structural).
    z: usize,
    /// `min(rows, cols)`.
    k: usize,
    /// Scale, floored as the authors do.
    scale: f64,
    n: f64,
    m: usize,
}

impl FloatCurve {
    /// The curve of `w` in a model of hidden size `n` on the grid `P_m`.
    pub(crate) fn of(w: &MatrixEntry, n: usize, m: usize) -> Self {
        Self {
            sigma: w.singular_values.iter().map(|v| v.mid()).collect(),
            z: w.structural_zeros,
            k: w.min_dim(),
            scale: w.scale.mid().max(AUTHORS_SCALE_FLOOR),
            n: n as f64,
            m,
        }
    }

    /// How many values are exactly zero.
    pub(crate) fn zeros(&self) -> usize {
        self.z
    }

    /// `sigma_1` (midpoint).
    pub(crate) fn sigma1(&self) -> f64 {
        self.sigma.first().copied().unwrap_or(0.0)
    }

    /// The authors' zero tolerance `1e-10 k max(sigma_1, 1)`.
    pub(crate) fn rank_tolerance(&self) -> f64 {
        AUTHORS_RANK_TOL * self.k.max(1) as f64 * self.sigma1().max(1.0)
    }

    /// The largest round-off value a float64 SVD of the dense product can
    /// plausibly leave where the exact value is 0: `k u ||W||_F` (`u =
    /// 2^-53`), the size of the backward error of a backward-stable SVD with
    /// a modest constant. A heuristic ceiling for explanations, far above
    /// the values such SVDs return (about `1e-16 sigma_1` on MiniLM) and
    /// far below any real singular value of these matrices.
    pub(crate) fn roundoff_ceiling(&self) -> f64 {
        let fro = self.sigma.iter().map(|s| s * s).sum::<f64>().sqrt();
        self.k as f64 * (f64::EPSILON / 2.0) * fro
    }

    /// `sum sigma^p` over the nonzero part at `p = j/m` (float64).
    fn power_sum(&self, j: usize) -> f64 {
        let p = j as f64 / self.m as f64;
        self.sigma.iter().map(|s| s.max(0.0).powf(p)).sum()
    }

    /// The numerical rank the authors would find with round-off values `t`.
    fn rank(&self, t: f64) -> f64 {
        let tol = self.rank_tolerance();
        let nz = self.sigma.iter().filter(|s| **s > tol).count();
        (nz + if t > tol { self.z } else { 0 }) as f64
    }

    /// `c(W, j/m)` as the authors compute it, the zeros replaced by `t`.
    pub(crate) fn c(&self, j: usize, t: f64) -> f64 {
        if j == 0 {
            return (self.rank(t) * self.n).sqrt();
        }
        let p = j as f64 / self.m as f64;
        let sp = self.power_sum(j) + self.z as f64 * t.powf(p);
        sp.powf(1.0 / (p + 2.0))
            * self.scale.powf(p / (p + 2.0))
            * self.n.powf((p + 1.0) / (p + 2.0))
    }

    /// The authors' argmin (the first minimum in grid order) with zeros `t`.
    pub(crate) fn argmin(&self, t: f64) -> usize {
        let mut best = 0;
        let mut bv = f64::INFINITY;
        for j in 0..=2 * self.m {
            let v = self.c(j, t);
            if v < bv {
                bv = v;
                best = j;
            }
        }
        best
    }

    /// `min_j c(W, j/m)` with zeros `t`.
    pub(crate) fn min(&self, t: f64) -> f64 {
        (0..=2 * self.m)
            .map(|j| self.c(j, t))
            .fold(f64::INFINITY, f64::min)
    }

    /// The round-off size `t` at which `c(W, j/m)` equals `claim`, if any
    /// (`c` grows with `t`; `None` for `j = 0` or a claim not above `t = 0`).
    pub(crate) fn t_for(&self, j: usize, claim: f64) -> Option<f64> {
        if j == 0 || self.z == 0 || !(claim > 0.0) {
            return None;
        }
        let p = j as f64 / self.m as f64;
        // S_p implied by the claim, through logarithms (s can be huge).
        let ln_s = (p + 2.0) * claim.ln() - p * self.scale.ln() - (p + 1.0) * self.n.ln();
        let extra = ln_s.exp() - self.power_sum(j);
        (extra > 0.0).then(|| (extra / self.z as f64).powf(1.0 / p))
    }
}

/// A typical size of the round-off values of a float64 SVD of a matrix
/// with largest singular value `sigma1`: `u sigma_1`, `u = 2^-53`.
pub(crate) fn typical_roundoff(sigma1: f64) -> f64 {
    sigma1 * f64::EPSILON / 2.0
}

/// How far above the certified upper end a claim lies, in percent.
fn pct(claim: f64, exact: &CertInterval) -> String {
    let v = (claim / exact.hi - 1.0) * 100.0;
    if v >= 0.01 {
        format!("{v:.2}")
    } else {
        fmt::approx(v)
    }
}

fn t_text(t: f64, curve: &FloatCurve) -> String {
    format!(
        "(as much as {} values of {} each, {} sigma_1)",
        curve.zeros(),
        fmt::approx(t),
        fmt::approx(t / curve.sigma1())
    )
}

/// Why an inconsistent claim of `c(W, k/m)` is the authors' float artefact,
/// or `None` when it is not explained by round-off values below their rank
/// tolerance (a float model; the certified value is `w`'s).
pub(crate) fn explain_contribution(
    w: &MatrixEntry,
    n: usize,
    m: usize,
    k: usize,
    claim: f64,
) -> Option<String> {
    let exact = w
        .contributions
        .iter()
        .find(|c| c.p_fraction == GridPoint { k, m })?
        .value;
    if !(claim > exact.hi) {
        return None;
    }
    let curve = FloatCurve::of(w, n, m);
    let t = curve.t_for(k, claim)?;
    (t <= curve.roundoff_ceiling()).then(|| {
        format!(
            "float artefact: this is c(W, {k}/{m}) with the {} exactly-zero singular values of this rank-<= {} \
             per-head product replaced by round-off values {}, of the size a float64 SVD of the dense {n} x {n} \
             product leaves (at most {}); below the authors' rank tolerance {} they drop out at p = 0 but enter \
             S_p at p = {k}/{m}. Certified exact value {}; the claim is {}% above it.",
            curve.zeros(),
            w.singular_values.len(),
            t_text(t, &curve),
            fmt::approx(curve.roundoff_ceiling()),
            fmt::approx(curve.rank_tolerance()),
            fmt::cert_interval(&exact),
            pct(claim, &exact)
        )
    })
}

/// Why an inconsistent claim of `min_p c(W, p)` is the float artefact:
/// round-off values up to the rank tolerance can raise the minimum to it.
pub(crate) fn explain_min_contribution(
    w: &MatrixEntry,
    n: usize,
    m: usize,
    claim: f64,
) -> Option<String> {
    let exact = w.min_contribution;
    if !(claim > exact.hi) || w.structural_zeros == 0 {
        return None;
    }
    let curve = FloatCurve::of(w, n, m);
    let top = curve.roundoff_ceiling();
    if !(claim <= curve.min(top) * (1.0 + 1e-12)) {
        return None;
    }
    // The t that gives the claim (the minimum grows with t): bisection in log space.
    let (mut lo, mut hi) = (top * 1e-80, top);
    for _ in 0..200 {
        let mid = (lo * hi).sqrt();
        if curve.min(mid) < claim {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(format!(
        "float artefact: the minimum over p of c(W, p) with the {} exactly-zero singular values replaced by \
         round-off values {}, of the size a float64 SVD of the dense product leaves (at most {}). \
         Certified exact value {}; the claim is {}% above it.",
        curve.zeros(),
        t_text(hi, &curve),
        fmt::approx(top),
        fmt::cert_interval(&exact),
        pct(claim, &exact)
    ))
}

/// Why a claimed minimiser `claim_k / m` outside the certified argmin set
/// is the float artefact: some round-off size below the rank tolerance
/// makes it the authors' argmin.
pub(crate) fn explain_p_opt(w: &MatrixEntry, n: usize, m: usize, claim_k: usize) -> Option<String> {
    if w.structural_zeros == 0 || w.p_opt_fraction.iter().any(|g| g.k == claim_k) {
        return None;
    }
    let curve = FloatCurve::of(w, n, m);
    let top = curve.roundoff_ceiling();
    let ts: Vec<f64> = (0..=320)
        .map(|j| top * 10f64.powf(-(j as f64) / 4.0))
        .filter(|t| curve.argmin(*t) == claim_k)
        .collect();
    let (tmin, tmax) = (ts.last()?, ts.first()?);
    let set: Vec<String> = w.p_opt_fraction.iter().map(|g| g.to_string()).collect();
    Some(format!(
        "float artefact: with the {} exactly-zero singular values replaced by round-off values between {} and {} \
         (a float64 SVD of the dense product leaves at most {}) the float64 argmin is {claim_k}/{m}: round-off \
         raises c(W, p) at small p > 0 but not at p = 0, so p_opt leans towards 0. Certified argmin set: {{{}}}.",
        curve.zeros(),
        fmt::approx(*tmin),
        fmt::approx(*tmax),
        fmt::approx(top),
        set.join(", ")
    ))
}

/// Why an inconsistent claim of `B_ours` is the float artefact: per-head
/// round-off values up to each matrix's rank tolerance can raise the sum
/// of minima to it.
pub(crate) fn explain_bound_ours(cert: &Certificate, claim: f64) -> Option<String> {
    let exact = cert.bounds.as_ref()?.ours;
    if !(claim > exact.hi) || cert.matrices.iter().all(|w| w.structural_zeros == 0) {
        return None;
    }
    let (n, m) = (cert.model.hidden, cert.parameters.grid_m);
    let curves: Vec<FloatCurve> = cert
        .matrices
        .iter()
        .map(|w| FloatCurve::of(w, n, m))
        .collect();
    let sqrt_l = (cert.model.layers as f64).sqrt();
    let top: f64 = curves
        .iter()
        .map(|c| c.min(c.roundoff_ceiling()))
        .sum::<f64>()
        + sqrt_l;
    (claim <= top * (1.0 + 1e-12)).then(|| {
        format!(
            "float artefact: round-off values in place of the exact zeros of the per-head products (each of the \
             size a float64 SVD of the dense product leaves) can raise B_ours from the certified exact value {} up \
             to {}; the claim is {}% above the exact value.",
            fmt::cert_interval(&exact),
            fmt::approx(top),
            pct(claim, &exact)
        )
    })
}

/// How much the float artefact would change `c(W, p)` in one model: for
/// each per-head matrix type, the largest relative inflation
/// `c_t(p)/c(p) - 1` at `p = k/m` for `k = 1..`, with round-off values
/// `t = u sigma_1`, until it falls below `1e-8`; and the matrices whose
/// float argmin leaves the certified argmin set.
#[derive(Clone, Debug)]
pub(crate) struct ArtefactEstimate {
    /// `(type name, [(k, largest inflation)])`.
    pub inflation: Vec<(&'static str, Vec<(usize, f64)>)>,
    /// Matrices whose float argmin (with `t = u sigma_1`) is not certified possible.
    pub argmin_moved: Vec<String>,
    /// The grid resolution m.
    pub m: usize,
}

/// The [`ArtefactEstimate`] of one certificate (a float model).
pub(crate) fn estimate(cert: &Certificate) -> ArtefactEstimate {
    let (n, m) = (cert.model.hidden, cert.parameters.grid_m);
    let mut inflation = Vec::new();
    for kind in [crate::arch::MatrixType::QK, crate::arch::MatrixType::VTilde] {
        let mut rows: Vec<(usize, f64)> = Vec::new();
        for k in 1..=2 * m {
            let worst = cert
                .matrices
                .iter()
                .filter(|w| w.kind == kind && w.structural_zeros > 0)
                .map(|w| {
                    let c = FloatCurve::of(w, n, m);
                    let t = typical_roundoff(c.sigma1());
                    c.c(k, t) / c.c(k, 0.0) - 1.0
                })
                .fold(0.0, f64::max);
            rows.push((k, worst));
            if worst < 1e-8 {
                break;
            }
        }
        if cert
            .matrices
            .iter()
            .any(|w| w.kind == kind && w.structural_zeros > 0)
        {
            inflation.push((kind.name(), rows));
        }
    }
    let argmin_moved = cert
        .matrices
        .iter()
        .filter(|w| w.structural_zeros > 0)
        .filter(|w| {
            let c = FloatCurve::of(w, n, m);
            let a = c.argmin(typical_roundoff(c.sigma1()));
            !w.p_opt_fraction.iter().any(|g| g.k == a)
        })
        .map(|w| w.id().to_string())
        .collect();
    ArtefactEstimate {
        inflation,
        argmin_moved,
        m,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::MatrixType;
    use crate::certificate::Contribution;

    const N: usize = 64;
    const M: usize = 8;

    /// A rank-16 per-head matrix of a 64-wide model, sigma_j = j^-2, scale
    /// 10^(5/4): its exact optimum is p = 1/8 (c(1/8) is 0.6% below c(0)),
    /// with 48 exact zeros. Values are float64 (point intervals): these
    /// tests are about the explanations, not about enclosures.
    fn entry() -> MatrixEntry {
        let sigma: Vec<f64> = (1..=16).map(|j| (j as f64).powi(-2)).collect();
        let scale = 10f64.powf(1.25);
        let curve = FloatCurve {
            sigma: sigma.clone(),
            z: 48,
            k: N,
            scale,
            n: N as f64,
            m: M,
        };
        let pt = CertInterval::point;
        let contributions: Vec<Contribution> = (0..=2 * M)
            .map(|k| Contribution {
                p: k as f64 / M as f64,
                p_fraction: GridPoint { k, m: M },
                value: pt(curve.c(k, 0.0)),
            })
            .collect();
        let best = curve.argmin(0.0);
        assert_eq!(best, 1, "the construction has its optimum at 1/m");
        MatrixEntry {
            layer: 0,
            head: Some(0),
            expert: None,
            kind: MatrixType::QK,
            rows: N,
            cols: N,
            spectral_norm: pt(1.0),
            frobenius_norm: pt(1.0),
            nuclear_norm: pt(1.0),
            norm_21: pt(1.0),
            norm_11: pt(1.0),
            stable_rank: None,
            rank: CertInterval { lo: 16, hi: 16 },
            singular_values: sigma.into_iter().map(pt).collect(),
            structural_zeros: 48,
            method: vec![],
            alpha: pt(1.0),
            gamma: pt(1.0),
            scale: pt(scale),
            p_opt: vec![best as f64 / M as f64],
            p_opt_fraction: vec![GridPoint { k: best, m: M }],
            min_contribution: pt(curve.c(best, 0.0)),
            contributions,
        }
    }

    #[test]
    fn p_opt_leaning_to_zero_is_the_float_artefact() {
        let w = entry();
        let note = explain_p_opt(&w, N, M, 0).expect("explained");
        assert!(note.contains("the float64 argmin is 0/8"), "{note}");
        assert!(note.contains("Certified argmin set: {1/8}"), "{note}");
        // A minimiser no round-off size produces, and the certified one itself.
        assert_eq!(explain_p_opt(&w, N, M, 9), None);
        assert_eq!(explain_p_opt(&w, N, M, 1), None);
    }

    #[test]
    fn inflated_contributions_are_explained_and_wrong_ones_are_not() {
        let w = entry();
        let curve = FloatCurve::of(&w, N, M);
        let t = typical_roundoff(1.0);
        let float = curve.c(1, t);
        assert!(float > w.contributions[1].value.hi);
        let note = explain_contribution(&w, N, M, 1, float).expect("explained");
        assert!(
            note.starts_with("float artefact: this is c(W, 1/8)"),
            "{note}"
        );
        let exact = w.contributions[1].value.hi;
        assert_eq!(explain_contribution(&w, N, M, 1, exact * 1.5), None);
        assert_eq!(explain_contribution(&w, N, M, 1, exact * 0.99), None);
        assert_eq!(explain_contribution(&w, N, M, 0, exact * 1.01), None);
        let mut full = w.clone();
        full.structural_zeros = 0;
        assert_eq!(explain_contribution(&full, N, M, 1, float), None);
        // The minimum over p: the float minimum is explained, 50% more is not.
        let fmin = curve.min(t);
        assert!(explain_min_contribution(&w, N, M, fmin).is_some());
        assert_eq!(explain_min_contribution(&w, N, M, fmin * 1.5), None);
    }

    #[test]
    fn round_off_below_its_ceiling_is_the_size_float_svds_leave() {
        // u sigma_1 is far below the ceiling k u ||W||_F, which is far below
        // the smallest real singular value here.
        let c = FloatCurve::of(&entry(), N, M);
        assert!(typical_roundoff(c.sigma1()) * 10.0 < c.roundoff_ceiling());
        assert!(c.roundoff_ceiling() < 1e-10 * c.sigma.last().unwrap());
    }
}
