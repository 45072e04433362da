//! The bound proxies of Sakai & Imaizumi (arXiv 2605.07297) and the
//! Edelman-style baseline, evaluated in interval arithmetic from certified
//! spectral quantities (the paper's §3.4–§4.1; [`proofs/proxy-formulas.md`](crate::proofs::proxy_formulas) restates the formulas).
//!
//! Every quantity is an inari interval that contains the exact value of the
//! paper's formula for the stored weights: the formulas are compositions of
//! monotone or interval-extended operations (inari's outward-rounded `+`,
//! `*`, `/`, `sqrt`, `pow`), applied to enclosures ([`proofs/derived-quantities.md`](crate::proofs::derived_quantities),
//! L15, and [`proofs/proxy-formulas.md`](crate::proofs::proxy_formulas), L18). Exponents such as `p = k/m`,
//! `2/3` and `L_phi = 1.13` are held as intervals containing the exact
//! rational or decimal, never as their binary64 neighbours.

mod l_phi;
pub(crate) mod measures;

pub use l_phi::LPhi;

use inari::Interval;

use crate::arch::{MatrixId, MatrixType};
use crate::enclosure::{Enclosure, IntEnclosure};

/// The proxy matrix families the paper's bound is made of, and the only
/// ones [`evaluate`] reads: the block's self-attention (`QK`, `V_tilde`)
/// and feed-forward (`M_in`, `M_out`). A decoder block's cross-attention
/// (`QK_cross`, `V_tilde_cross`) is deliberately absent: the block is then a
/// function of two sequences, which the paper's per-block accounting in the
/// block's input does not cover, so no bound is ever formed from it.
pub(crate) const BOUND_KINDS: [MatrixType; 4] = [
    MatrixType::QK,
    MatrixType::VTilde,
    MatrixType::MIn,
    MatrixType::MOut,
];

/// Parameters that change a number of the certificate.
#[derive(Clone, Debug)]
pub(crate) struct ProxyParams {
    /// `L_phi`, the exact decimal as written and its enclosure.
    pub l_phi: LPhi,
    /// Grid resolution m: `P_m = {0, 1/m, ..., 2}`.
    pub grid_m: usize,
}

/// `m = ceil(L + ln max(N, 2))`, computed exactly in every build.
///
/// With `L` an integer and `N >= 2`, `ln N` is irrational, so
/// `ceil(L + ln N) = L + ceil(ln N)` and `ceil(ln N)` is the least `k` with
/// `e^k > N` (`e^k` is irrational for `k >= 1`, never equal to `N`). Each
/// comparison `e^k > N` is decided by `exp_exceeds` with MPFR enclosures
/// of `e^k`, so the answer never depends on a rounding
/// ([`proofs/proxy-formulas.md`](crate::proofs::proxy_formulas), L18 item 4). Saturates at `usize::MAX` for
/// an absurd `L` (which any grid limit then refuses).
pub fn default_grid_m(layers: usize, hidden: usize) -> usize {
    let n = hidden.max(2) as u64;
    let mut k = 1u32; // e^0 = 1 < 2 <= N
    while !exp_exceeds(k, n) {
        k += 1;
    }
    layers.saturating_add(k as usize)
}

/// Whether `e^k > n` for `k >= 1`, decided exactly: `e^k` is enclosed by
/// MPFR's exponential rounded down and up ([`proofs/mpfr-directed.md`](crate::proofs::mpfr_directed), L13)
/// at increasing precision until the enclosure excludes the integer `n`,
/// which always happens because `e^k` is irrational (Lindemann).
pub(crate) fn exp_exceeds(k: u32, n: u64) -> bool {
    use rug::float::Round;
    use rug::Float;
    assert!(k >= 1, "e^0 = 1 is rational");
    let mut prec = 64u32;
    loop {
        // k and n are exact at prec >= 64 bits.
        let mut lo = Float::with_val(prec, k);
        lo.exp_round(Round::Down);
        let mut hi = Float::with_val(prec, k);
        hi.exp_round(Round::Up);
        if lo > n {
            return true;
        }
        if hi < n {
            return false;
        }
        prec *= 2;
    }
}

/// What the proxies need of one certified matrix: exactly what a
/// certificate's (or a part's) matrix entry states of it, so that `certify`
/// and `merge` evaluate the proxies from the same numbers.
pub(crate) struct MatrixInput<'a> {
    /// Which matrix.
    pub id: MatrixId,
    /// Enclosures of the singular values, largest first, index-matched;
    /// the values after the last one given are exactly zero (structural
    /// zeros contribute nothing to `sum sigma^p` for p > 0).
    pub singular_values: &'a [Enclosure],
    /// Encloses sigma_1.
    pub spectral_norm: Enclosure,
    /// Encloses the (2,1)-norm.
    pub norm_21: Enclosure,
    /// Encloses the exact rank.
    pub rank: IntEnclosure,
}

/// Certified proxy quantities of one matrix.
#[derive(Clone, Debug)]
pub(crate) struct MatrixProxies {
    /// `alpha^(l)` of the matrix's layer.
    pub alpha: Interval,
    /// `gamma(W)`.
    pub gamma: Interval,
    /// `s = gamma alpha L`.
    pub scale: Interval,
    /// `(k, c(W, k/m))` for k = 0..=2m.
    pub contributions: Vec<(usize, Interval)>,
    /// Grid indices k that can be the minimiser (a single one when certified unique).
    pub p_opt: Vec<usize>,
    /// Encloses `min_p c(W, p)`.
    pub min_contribution: Interval,
}

/// Certified per-layer quantities.
#[derive(Clone, Debug)]
pub(crate) struct LayerProxies {
    /// `alpha^(l)`.
    pub alpha: Interval,
    /// `xi^(l)` of the Edelman-style proxy.
    pub xi: Interval,
}

/// Certified proxies of the whole model.
#[derive(Clone, Debug)]
pub(crate) struct ModelProxies {
    /// Per matrix of a family of [`BOUND_KINDS`], in input order.
    pub matrices: Vec<MatrixProxies>,
    /// Per layer.
    pub layers: Vec<LayerProxies>,
    /// `B_ours = sum of minima + sqrt(L)`.
    pub ours: Interval,
    /// `B_Edel = (1 + sum alpha^(2/3) xi)^(3/2)`.
    pub edelman: Interval,
}

fn pt(x: f64) -> Interval {
    Interval::try_from((x, x)).expect("finite point")
}

fn iv(e: &crate::enclosure::Enclosure) -> Interval {
    e.to_interval()
}

fn rank_iv(r: IntEnclosure) -> Interval {
    Interval::try_from((r.lo as f64, r.hi as f64)).expect("finite")
}

/// The grid exponent `k/m` as an interval containing the exact rational.
pub(crate) fn grid_p(k: usize, m: usize) -> Interval {
    pt(k as f64) / pt(m as f64)
}

/// Encloses `S_{k/m} = sum_i sigma_i^(k/m)` for k = 1..=2m at once, from
/// enclosures of the singular values (largest first; values not given are
/// exactly zero): with
/// `r_i` enclosing `(sigma_i / 2^e)^(1/m)` (one interval `pow` per value) and
/// `t` enclosing `2^(e/m)`, `sigma_i^(k/m) = (t r_i)^k`, evaluated by repeated
/// outward-rounded multiplication (L15 b). Index 0 of the result is unused.
pub(crate) fn grid_power_sums(values: &[Enclosure], m: usize) -> Vec<Interval> {
    let zero = pt(0.0);
    let mut sums = vec![zero; 2 * m + 1];
    let top = values.first().map(|v| v.hi()).unwrap_or(0.0);
    if top == 0.0 {
        return sums;
    }
    let e = crate::linalg::dense::exponent_of(top);
    let inv_m = pt(1.0) / pt(m as f64);
    let two_e = Interval::try_from((
        crate::linalg::rounding::scale_pow2_rd(1.0, e),
        crate::linalg::rounding::scale_pow2_ru(1.0, e),
    ))
    .expect("finite");
    let t = two_e.pow(inv_m);
    for v in values {
        if v.hi() == 0.0 {
            continue; // exact zeros contribute 0 for p > 0
        }
        let lo = crate::linalg::rounding::scale_pow2_rd(v.lo(), -e);
        let hi = crate::linalg::rounding::scale_pow2_ru(v.hi(), -e);
        let x = Interval::try_from((lo, hi)).expect("ordered");
        let r = x.pow(inv_m);
        let mut acc = pt(1.0);
        for sum in sums.iter_mut().skip(1) {
            acc *= r;
            *sum += acc;
        }
    }
    // Multiply the scaled sums by (2^(e/m))^k.
    let mut tk = pt(1.0);
    for sum in sums.iter_mut().skip(1) {
        tk *= t;
        *sum *= tk;
    }
    sums
}

/// `c(W, p) = S_p^(1/(p+2)) s^(p/(p+2)) N^((p+1)/(p+2))` at `p = k/m` from
/// an enclosure `sp` of `S_p`; for p = 0 the Schatten quantity is the rank
/// and the term is `sqrt(rank N)`.
///
/// *Guarantee: certified enclosure* of `c(W, k/m)` whenever `sp`, `rank`
/// and `s` enclose their exact values ([`proofs/proxy-formulas.md`](crate::proofs::proxy_formulas), L18).
pub(crate) fn contribution(
    sp: Interval,
    rank: IntEnclosure,
    k: usize,
    m: usize,
    s: Interval,
    n: usize,
) -> Interval {
    let nn = pt(n as f64);
    if k == 0 {
        return (rank_iv(rank) * nn).sqrt();
    }
    let p = grid_p(k, m);
    let two = pt(2.0);
    let one = pt(1.0);
    let e1 = (p + two).recip();
    let e2 = p / (p + two);
    let e3 = (p + one) / (p + two);
    sp.pow(e1) * s.pow(e2) * nn.pow(e3)
}

/// Evaluates every proxy of §3.4–§4.1 from certified matrix quantities.
///
/// *Guarantee: certified enclosure* of every alpha, xi, gamma, scale,
/// contribution, minimum and both bounds, given enclosures as inputs; the
/// `p_opt` sets contain every minimiser ([`proofs/proxy-formulas.md`](crate::proofs::proxy_formulas), L18).
/// `inputs` must hold, for each of the `layers` layers, the `heads` QK and
/// V_tilde matrices and one M_in and M_out. Only the families of
/// [`BOUND_KINDS`] are read: an input of another family has no proxies and
/// no entry in [`ModelProxies::matrices`], which lists the others in their
/// order.
pub(crate) fn evaluate(
    inputs: &[MatrixInput<'_>],
    layers: usize,
    heads: usize,
    hidden: usize,
    params: &ProxyParams,
) -> ModelProxies {
    let norms = Stated {
        index: inputs.iter().map(|x| (x.id, x)).collect(),
    };
    let alpha = alphas(&norms, layers, heads, params.l_phi.interval());
    let xi = xis(&norms, layers, heads);
    let ll = pt(layers as f64);
    // Each matrix's proxies depend on its own values and the stated norms
    // alone: over the pool, in the inputs' order (the same bits as one
    // after the other). Its grid sums take one interval power per singular
    // value, serial at the end of a run otherwise (0.15 s of a LLaMA-7B
    // layer's 66 matrices, some seconds for a whole model).
    use rayon::prelude::*;
    let matrices: Vec<MatrixProxies> = inputs
        .par_iter()
        .filter(|w| BOUND_KINDS.contains(&w.id.kind))
        .filter_map(|w| matrix_proxies(w, &norms, &alpha, ll, params.grid_m, hidden))
        .collect();
    let ours = matrices
        .iter()
        .fold(pt(0.0), |acc, x| acc + x.min_contribution)
        + ll.sqrt();
    let two_thirds = pt(2.0) / pt(3.0);
    let three_halves = pt(3.0) / pt(2.0);
    let inner = (0..layers).fold(pt(1.0), |acc, l| acc + alpha[l].pow(two_thirds) * xi[l]);
    let edelman = inner.pow(three_halves);
    ModelProxies {
        matrices,
        layers: (0..layers)
            .map(|l| LayerProxies {
                alpha: alpha[l],
                xi: xi[l],
            })
            .collect(),
        ours,
        edelman,
    }
}

/// The stated norms of the proxy matrices, by id.
struct Stated<'a> {
    index: std::collections::HashMap<MatrixId, &'a MatrixInput<'a>>,
}

impl Stated<'_> {
    fn find(&self, l: usize, kind: MatrixType, h: Option<usize>) -> &MatrixInput<'_> {
        self.index
            .get(&MatrixId {
                layer: l,
                head: h,
                kind,
                expert: None,
            })
            .expect("every proxy matrix present")
    }

    /// C2: the spectral norm.
    fn c2(&self, l: usize, kind: MatrixType, h: Option<usize>) -> Interval {
        iv(&self.find(l, kind, h).spectral_norm)
    }

    /// The (2,1)-norm.
    fn n21(&self, l: usize, kind: MatrixType, h: Option<usize>) -> Interval {
        iv(&self.find(l, kind, h).norm_21)
    }
}

/// alpha_l: the product of the later layers' factors
/// L_phi C2(M_in) C2(M_out) sum_h C2(V_h)(1 + 4 C2(QK_h)).
fn alphas(norms: &Stated<'_>, layers: usize, heads: usize, l_phi: Interval) -> Vec<Interval> {
    let (one, four) = (pt(1.0), pt(4.0));
    let factor: Vec<Interval> = (0..layers)
        .map(|k| {
            let mut sum = pt(0.0);
            for h in (0..heads).map(Some) {
                sum += norms.c2(k, MatrixType::VTilde, h)
                    * (one + four * norms.c2(k, MatrixType::QK, h));
            }
            l_phi * norms.c2(k, MatrixType::MIn, None) * norms.c2(k, MatrixType::MOut, None) * sum
        })
        .collect();
    (0..layers)
        .map(|l| factor[l + 1..].iter().fold(one, |acc, &f| acc * f))
        .collect()
}

/// xi_l of the Edelman et al. bound.
fn xis(norms: &Stated<'_>, layers: usize, heads: usize) -> Vec<Interval> {
    let two_thirds = pt(2.0) / pt(3.0);
    (0..layers)
        .map(|l| {
            let (cin, cout) = (
                norms.c2(l, MatrixType::MIn, None),
                norms.c2(l, MatrixType::MOut, None),
            );
            let mut x = pt(0.0);
            for h in (0..heads).map(Some) {
                let cv = norms.c2(l, MatrixType::VTilde, h);
                x += (cout * cin * cv * norms.n21(l, MatrixType::QK, h)).pow(two_thirds);
                x += (cout * cin * norms.n21(l, MatrixType::VTilde, h)).pow(two_thirds);
            }
            x += (cout * norms.n21(l, MatrixType::MIn, None)).pow(two_thirds);
            x += norms.n21(l, MatrixType::MOut, None).pow(two_thirds);
            x
        })
        .collect()
}

/// The proxies of matrix `w` (its gamma, scale and contribution on every
/// grid point of resolution `m`, and their minimum); `None` for a kind
/// outside [`BOUND_KINDS`].
fn matrix_proxies(
    w: &MatrixInput<'_>,
    norms: &Stated<'_>,
    alpha: &[Interval],
    ll: Interval,
    m: usize,
    hidden: usize,
) -> Option<MatrixProxies> {
    let l = w.id.layer;
    let (cin, cout) = (
        norms.c2(l, MatrixType::MIn, None),
        norms.c2(l, MatrixType::MOut, None),
    );
    let gamma = match w.id.kind {
        MatrixType::QK => pt(2.0) * norms.c2(l, MatrixType::VTilde, w.id.head) * cout * cin,
        MatrixType::VTilde => cout * cin,
        MatrixType::MIn => cout,
        MatrixType::MOut => pt(1.0),
        // Not in BOUND_KINDS: no gamma, no proxy.
        MatrixType::QKCross | MatrixType::VTildeCross => return None,
    };
    let scale = gamma * alpha[l] * ll;
    let sums = grid_power_sums(w.singular_values, m);
    let contributions: Vec<(usize, Interval)> = (0..=2 * m)
        .map(|k| (k, contribution(sums[k], w.rank, k, m, scale, hidden)))
        .collect();
    let min_hi = contributions
        .iter()
        .map(|(_, c)| c.sup())
        .fold(f64::INFINITY, f64::min);
    let min_lo = contributions
        .iter()
        .map(|(_, c)| c.inf())
        .fold(f64::INFINITY, f64::min);
    let p_opt = contributions
        .iter()
        .filter(|(_, c)| c.inf() <= min_hi)
        .map(|(k, _)| *k)
        .collect();
    let min_contribution = Interval::try_from((min_lo, min_hi)).unwrap_or(Interval::ENTIRE);
    Some(MatrixProxies {
        alpha: alpha[l],
        gamma,
        scale,
        contributions,
        p_opt,
        min_contribution,
    })
}
