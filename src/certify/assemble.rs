//! The certificate from the certified spectra of every proxy matrix: the
//! one place where the proxies and bounds are evaluated ([`assemble`]), for
//! a run and for `merge` alike, so that a merged certificate is the
//! unsharded run's, number for number.

use crate::arch::MatrixId;
use crate::bounds::{self, MatrixInput, ProxyParams};
use crate::certificate::{
    BoundsEntry, CertInterval, Certificate, Contribution, GridPoint, Header, LayerEntry,
    MatrixEntry, SpectrumEntry, FORMAT, VERSION,
};
use crate::enclosure::{Enclosure, Inconclusive, IntEnclosure};
use inari::Interval;

pub(super) fn iv(x: Interval, what: &dyn std::fmt::Display) -> Result<CertInterval, Inconclusive> {
    CertInterval::of_inari(x).ok_or_else(|| Inconclusive::new(format!("{what} overflowed f64")))
}

/// The certificate of a model from the certified spectral quantities of
/// every one of its proxy matrices: the one place where the proxies and
/// bounds are computed, for `certify` and `merge` alike, so that a merged
/// certificate is the unsharded run's, number for number.
///
/// *Guarantee: certified enclosure* of every proxy and bound, given
/// enclosures as inputs (`bounds::evaluate`, [`proofs/proxy-formulas.md`](crate::proofs::proxy_formulas),
/// L18); inconclusive when a proxy overflows f64, or when `spectra` is not
/// one entry per matrix of the model (in any order).
///
/// For a family whose block the paper's reasoning does not cover
/// ([`crate::arch::families::bound_absent_reason`] of the model's
/// architecture), no proxy and no bound is computed: the certificate
/// ([`crate::certificate::VERSION_NO_BOUND`]) states the given spectra, in
/// certificate order, and the family's reason.
pub(crate) fn assemble(
    header: &Header,
    spectra: &[SpectrumEntry],
) -> Result<Certificate, Inconclusive> {
    let md = &header.model;
    let mut order: Vec<&SpectrumEntry> = spectra.iter().collect();
    order.sort_by_key(|e| e.id());
    let expected = crate::certificate::expected_ids(md);
    if !order.iter().map(|e| e.id()).eq(expected.iter().copied()) {
        return Err(Inconclusive::new(format!(
            "{} matrix entries are not the {} matrices of the model, once each",
            spectra.len(),
            expected.len()
        )));
    }
    let mut cert = Certificate {
        format: FORMAT.into(),
        version: VERSION,
        tool: header.tool.clone(),
        model: header.model.clone(),
        parameters: header.parameters.clone(),
        matrices: Vec::new(),
        layers: Vec::new(),
        bounds: None,
        bound_absent: None,
        spectra: None,
        extensions: header.extensions.clone(),
        init_model: None,
        raw_weights: None,
        measures: None,
    };
    if let Some(reason) = crate::arch::families::bound_absent_reason(
        &md.architecture,
        header.parameters.stack.as_ref().map(|s| s.name.as_str()),
    ) {
        cert.version = crate::certificate::VERSION_NO_BOUND;
        cert.bound_absent = Some(reason.to_string());
        cert.spectra = Some(order.into_iter().cloned().collect());
        return Ok(cert);
    }
    // A bound is made of the paper's families only (a cross-attention is in
    // no family with a bound; the table test): never form one otherwise.
    if let Some(e) = order
        .iter()
        .find(|e| !bounds::BOUND_KINDS.contains(&e.kind))
    {
        return Err(Inconclusive::new(format!(
            "{}: not one of the paper's matrices, and the family has a bound",
            e.id()
        )));
    }
    let p = &header.parameters;
    let l_phi: bounds::LPhi = p
        .l_phi
        .parse()
        .map_err(|e| Inconclusive::new(format!("invalid L_phi: {e}")))?;
    let params = ProxyParams {
        l_phi,
        grid_m: p.grid_m,
    };
    let stated = order
        .iter()
        .map(|e| Stated::of(e))
        .collect::<Result<Vec<_>, _>>()?;
    let inputs: Vec<MatrixInput<'_>> = stated.iter().map(Stated::input).collect();
    let proxies = bounds::evaluate(&inputs, md.layers, md.heads, md.hidden, &params);
    cert.matrices = order
        .iter()
        .zip(&proxies.matrices)
        .map(|(e, px)| matrix_entry(e, px, params.grid_m))
        .collect::<Result<_, _>>()?;
    cert.layers = layer_entries(&proxies.layers)?;
    cert.bounds = Some(BoundsEntry {
        ours: iv(proxies.ours, &"B_ours")?,
        edelman: iv(proxies.edelman, &"B_Edel")?,
    });
    Ok(cert)
}

/// What a spectrum entry states, as the enclosures the proxies take.
struct Stated {
    id: MatrixId,
    singular_values: Vec<Enclosure>,
    spectral_norm: Enclosure,
    norm_21: Enclosure,
    rank: IntEnclosure,
}

impl Stated {
    /// The entry's stated intervals; inconclusive for one that is not an
    /// interval (naming the matrix and the quantity).
    fn of(e: &SpectrumEntry) -> Result<Stated, Inconclusive> {
        let id = e.id();
        let enc = |x: &CertInterval, what: &str| {
            Enclosure::new(x.lo, x.hi)
                .ok_or_else(|| Inconclusive::new(format!("{id}: {what} is not an interval")))
        };
        Ok(Stated {
            id,
            singular_values: e
                .singular_values
                .iter()
                .map(|x| enc(x, "a singular value"))
                .collect::<Result<Vec<Enclosure>, _>>()?,
            spectral_norm: enc(&e.spectral_norm, "the spectral norm")?,
            norm_21: enc(&e.norm_21, "the (2,1)-norm")?,
            rank: IntEnclosure {
                lo: e.rank.lo,
                hi: e.rank.hi,
            },
        })
    }

    fn input(&self) -> MatrixInput<'_> {
        MatrixInput {
            id: self.id,
            singular_values: &self.singular_values,
            spectral_norm: self.spectral_norm,
            norm_21: self.norm_21,
            rank: self.rank,
        }
    }
}

/// The certificate's entry of matrix `e` with its proxies `px` on the grid
/// of resolution `m`.
fn matrix_entry(
    e: &SpectrumEntry,
    px: &bounds::MatrixProxies,
    m: usize,
) -> Result<MatrixEntry, Inconclusive> {
    let id = e.id();
    let contributions = px
        .contributions
        .iter()
        .map(|(k, c)| {
            let g = GridPoint { k: *k, m };
            Ok(Contribution {
                p: g.approx(),
                p_fraction: g,
                value: iv(*c, &format_args!("{id}: the contribution at p = {g}"))?,
            })
        })
        .collect::<Result<Vec<_>, Inconclusive>>()?;
    let p_opt_fraction: Vec<GridPoint> = px.p_opt.iter().map(|&k| GridPoint { k, m }).collect();
    Ok(MatrixEntry {
        layer: e.layer,
        head: e.head,
        expert: e.expert,
        kind: e.kind,
        rows: e.rows,
        cols: e.cols,
        spectral_norm: e.spectral_norm,
        frobenius_norm: e.frobenius_norm,
        nuclear_norm: e.nuclear_norm,
        norm_21: e.norm_21,
        norm_11: e.norm_11,
        stable_rank: e.stable_rank,
        rank: e.rank,
        singular_values: e.singular_values.clone(),
        structural_zeros: e.structural_zeros,
        method: e.method.clone(),
        alpha: iv(px.alpha, &format_args!("{id}: alpha"))?,
        gamma: iv(px.gamma, &format_args!("{id}: gamma"))?,
        scale: iv(px.scale, &format_args!("{id}: gamma alpha L"))?,
        contributions,
        p_opt: p_opt_fraction.iter().map(GridPoint::approx).collect(),
        p_opt_fraction,
        min_contribution: iv(
            px.min_contribution,
            &format_args!("{id}: the minimum contribution"),
        )?,
    })
}

/// The certificate's per-layer entries (alpha and xi of each layer).
fn layer_entries(layers: &[bounds::LayerProxies]) -> Result<Vec<LayerEntry>, Inconclusive> {
    layers
        .iter()
        .enumerate()
        .map(|(l, x)| {
            Ok(LayerEntry {
                layer: l,
                alpha: iv(x.alpha, &format_args!("layer {l} alpha"))?,
                xi: iv(x.xi, &format_args!("layer {l} xi"))?,
            })
        })
        .collect()
}
