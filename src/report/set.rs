//! Several certificates read together: the models of a study under their
//! ids, which one is primary, and the certified ratios the paper's scaling
//! figures normalise by (every one an interval division of certified
//! intervals, [`proofs/ratio-enclosure.md`](crate::proofs::ratio_enclosure)).

use crate::arch::MatrixType;
use crate::certificate::{CertInterval, Certificate, MatrixEntry};

/// One certified model of a study.
#[derive(Clone, Debug)]
pub(crate) struct ModelCert {
    /// Its id (the `model_id` column of every table).
    pub id: String,
    /// Its certificate.
    pub cert: Certificate,
}

/// The models of a study and what the figures are drawn for.
#[derive(Clone, Debug)]
pub(crate) struct StudySet {
    /// The certified models, in the order given.
    pub models: Vec<ModelCert>,
    /// Index into `models` of the primary model (figures 1 and 5).
    pub primary: usize,
    /// Layers of the primary model whose spectra figure 1 draws.
    pub spectrum_layers: Vec<usize>,
    /// Models that could not be certified: `(id, reason)`.
    pub inconclusive: Vec<(String, String)>,
    /// Per model, `(run, step)` when it is a checkpoint of a trajectory
    /// (empty, or `None` for a model without a step).
    pub steps: Vec<Option<(String, u64)>>,
}

impl StudySet {
    /// The set with `primary` named by id, or by default the largest model
    /// (most weights in its proxy layers, `L N^2`; the first such in order).
    /// `Err` names an unknown primary id, or says that there is no model.
    pub(crate) fn new(
        models: Vec<ModelCert>,
        primary: Option<&str>,
        spectrum_layers: Vec<usize>,
        inconclusive: Vec<(String, String)>,
    ) -> Result<Self, String> {
        // A certificate without a bound has none of the proxies and bounds
        // the tables and figures draw: it is listed with its reason.
        let (models, unbound): (Vec<ModelCert>, Vec<ModelCert>) =
            models.into_iter().partition(|m| m.cert.bounds.is_some());
        let mut inconclusive = inconclusive;
        inconclusive.extend(unbound.into_iter().map(|m| {
            let why = m.cert.bound_absent.clone().unwrap_or_default();
            (
                m.id,
                format!("no bound (the certificate states spectra only): {why}"),
            )
        }));
        if models.is_empty() {
            return Err(match inconclusive.first() {
                Some((id, why)) => format!("no certified model with a bound ('{id}': {why})"),
                None => "no certified model".into(),
            });
        }
        let primary = match primary {
            Some(p) => models.iter().position(|m| m.id == p).ok_or_else(|| {
                let ids: Vec<&str> = models.iter().map(|m| m.id.as_str()).collect();
                format!(
                    "--primary '{p}' is not the id of a certified model (ids: {})",
                    ids.join(", ")
                )
            })?,
            None => default_primary(&models),
        };
        Ok(Self {
            models,
            primary,
            spectrum_layers,
            inconclusive,
            steps: Vec::new(),
        })
    }

    /// The set with the `(run, step)` of its checkpoints, by model id
    /// (`step_of`). Unless a primary model was named (`primary_named`),
    /// the primary becomes the largest model at its run's last step: in a
    /// trajectory study figures 1 and 5 show the trained model, not the
    /// initialisation.
    pub(crate) fn with_steps(
        mut self,
        step_of: impl Fn(&str) -> Option<(String, u64)>,
        primary_named: bool,
    ) -> Self {
        self.steps = self.models.iter().map(|m| step_of(&m.id)).collect();
        if !primary_named {
            self.primary = last_step_primary(&self.models, &self.steps);
        }
        self
    }

    /// Whether models `i` and `j` are two checkpoints of one run: they
    /// differ only by training step, so neither is the other's scaling
    /// anchor.
    pub(crate) fn same_run(&self, i: usize, j: usize) -> bool {
        let run = |k: usize| self.steps.get(k).and_then(|s| s.as_ref()).map(|s| &s.0);
        i != j && run(i).is_some() && run(i) == run(j)
    }
    /// The primary model.
    pub(crate) fn primary(&self) -> &ModelCert {
        &self.models[self.primary]
    }
}

/// [`default_primary`], ties broken by the greatest step (a model without
/// a step counting as step 0), then by order.
fn last_step_primary(models: &[ModelCert], steps: &[Option<(String, u64)>]) -> usize {
    let key = |i: usize| {
        let md = &models[i].cert.model;
        let size = (md.layers as u128) * (md.hidden as u128) * (md.hidden as u128);
        let step = steps.get(i).and_then(|s| s.as_ref()).map_or(0, |s| s.1);
        (size, step)
    };
    let mut best = 0;
    for i in 1..models.len() {
        if key(i) > key(best) {
            best = i;
        }
    }
    best
}

/// The largest model: greatest `L N^2`, the first in order among equals.
pub(crate) fn default_primary(models: &[ModelCert]) -> usize {
    let size = |m: &ModelCert| {
        let md = &m.cert.model;
        (md.layers as u128) * (md.hidden as u128) * (md.hidden as u128)
    };
    let mut best = 0;
    for (i, m) in models.iter().enumerate() {
        if size(m) > size(&models[best]) {
            best = i;
        }
    }
    best
}

/// Encloses `x / y` for `x` in `num` and `y` in `den`, or `None` when `den`
/// is not certified positive (the ratio could be unbounded) or the quotient
/// overflows.
///
/// *Guarantee: certified enclosure* of the exact quotient of the exact
/// values that `num` and `den` enclose (inari's outward-rounded interval
/// division; [`proofs/ratio-enclosure.md`](crate::proofs::ratio_enclosure), L20 (a) and (d)).
pub fn ratio(num: &CertInterval, den: &CertInterval) -> Option<CertInterval> {
    if !(den.lo > 0.0) {
        return None;
    }
    let q = num.to_inari()? / den.to_inari()?;
    CertInterval::of_inari(q)
}

/// [`ratio`] of a quantity known to lie in `[0, 1]` (`sigma_i / sigma_1`),
/// intersected with `[0, 1]`.
///
/// *Guarantee: certified enclosure* ([`proofs/ratio-enclosure.md`](crate::proofs::ratio_enclosure), L20 (c)).
pub(crate) fn ratio_in_unit(num: &CertInterval, den: &CertInterval) -> Option<CertInterval> {
    let r = ratio(num, den)?;
    let lo = r.lo.max(0.0);
    let hi = r.hi.min(1.0);
    (lo <= hi).then_some(CertInterval { lo, hi })
}

/// `sigma_i / sigma_1` of a matrix for `i` from 0 (structural zeros
/// included), or `None` for all when `sigma_1` is not certified positive.
/// The first is exactly 1 and the structural zeros exactly 0 (L20 (b)).
pub(crate) fn normalized_spectrum(w: &MatrixEntry) -> Vec<Option<CertInterval>> {
    let n = w.min_dim();
    let s1 = w.spectral_norm;
    if !(s1.lo > 0.0) {
        return vec![None; n];
    }
    (0..n)
        .map(|i| {
            if i == 0 {
                Some(CertInterval::point(1.0))
            } else if i >= w.singular_values.len() {
                Some(CertInterval::point(0.0))
            } else {
                ratio_in_unit(&w.singular_values[i], &s1)
            }
        })
        .collect()
}

/// Which bound a scaling row is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bound {
    /// `B_ours`.
    Ours,
    /// `B_Edel`.
    Edelman,
}

impl Bound {
    /// Both, in table order.
    pub(crate) const ALL: [Bound; 2] = [Bound::Ours, Bound::Edelman];

    /// The name in the tables (`ours`, `edelman`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Bound::Ours => "ours",
            Bound::Edelman => "edelman",
        }
    }

    /// The certified value of this bound in `cert` (the whole line when
    /// `cert` states no bound, which a [`StudySet`] never holds).
    pub(crate) fn of(self, cert: &Certificate) -> CertInterval {
        let none = CertInterval {
            lo: f64::NEG_INFINITY,
            hi: f64::INFINITY,
        };
        match (self, &cert.bounds) {
            (_, None) => none,
            (Bound::Ours, Some(b)) => b.ours,
            (Bound::Edelman, Some(b)) => b.edelman,
        }
    }
}

/// Which axis a scaling row normalises along.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Axis {
    /// Models of equal depth, against the narrowest (N = 128 in the paper).
    HiddenSize,
    /// Models of equal width, against the shallowest (L = 2 in the paper).
    Layers,
}

impl Axis {
    /// Both, in table order.
    pub(crate) const ALL: [Axis; 2] = [Axis::HiddenSize, Axis::Layers];

    /// The column name (`hidden_size`, `num_hidden_layers`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Axis::HiddenSize => "hidden_size",
            Axis::Layers => "num_hidden_layers",
        }
    }

    /// `(x, fixed)` of a model on this axis: (N, L) or (L, N).
    pub(crate) fn coords(self, cert: &Certificate) -> (usize, usize) {
        match self {
            Axis::HiddenSize => (cert.model.hidden, cert.model.layers),
            Axis::Layers => (cert.model.layers, cert.model.hidden),
        }
    }
}

/// One row of `scaling.csv`.
#[derive(Clone, Debug)]
pub(crate) struct ScalingRow {
    /// Index of the model.
    pub model: usize,
    /// Which bound.
    pub bound: Bound,
    /// Which axis.
    pub axis: Axis,
    /// The model's coordinate on the axis (N or L).
    pub x: usize,
    /// The coordinate held fixed (L or N).
    pub fixed: usize,
    /// Index of the anchor model: the first among those with the same fixed
    /// coordinate and the least `x`, never another checkpoint of the
    /// model's own run (checkpoints differing only by step are a
    /// trajectory, not a scaling).
    pub anchor: usize,
    /// Encloses `bound(model) / bound(anchor)`; `None` when the anchor's
    /// bound is not certified positive.
    pub ratio: Option<CertInterval>,
}

/// Every model's two bounds normalised by its anchor on both axes, in the
/// order model, bound, axis.
///
/// *Guarantee: certified enclosure* of every ratio: exactly 1 for a model
/// that is its own anchor, an interval division otherwise
/// ([`proofs/ratio-enclosure.md`](crate::proofs::ratio_enclosure), L20 (a), (b)).
pub(crate) fn scaling(set: &StudySet) -> Vec<ScalingRow> {
    let mut rows = Vec::with_capacity(set.models.len() * 4);
    for (i, m) in set.models.iter().enumerate() {
        for bound in Bound::ALL {
            for axis in Axis::ALL {
                let (x, fixed) = axis.coords(&m.cert);
                let anchor = set
                    .models
                    .iter()
                    .enumerate()
                    .filter(|(j, o)| axis.coords(&o.cert).1 == fixed && !set.same_run(i, *j))
                    .min_by_key(|(j, o)| (axis.coords(&o.cert).0, *j))
                    .map(|(j, _)| j)
                    .expect("the model itself qualifies");
                let ratio = if anchor == i {
                    // The same quantity divided by itself (L20 (b)).
                    (bound.of(&m.cert).lo > 0.0).then_some(CertInterval::point(1.0))
                } else {
                    ratio(&bound.of(&m.cert), &bound.of(&set.models[anchor].cert))
                };
                rows.push(ScalingRow {
                    model: i,
                    bound,
                    axis,
                    x,
                    fixed,
                    anchor,
                    ratio,
                });
            }
        }
    }
    rows
}

/// How the certified minimisers `p_opt` of one matrix type of one model
/// fall on the grid.
#[derive(Clone, Debug)]
pub(crate) struct POptCounts {
    /// Index of the model.
    pub model: usize,
    /// The matrix type.
    pub kind: MatrixType,
    /// `(k, count)`: matrices whose minimiser is certified unique and `k/m`.
    pub unique: Vec<(usize, usize)>,
    /// Matrices whose certified minimiser set has several points.
    pub ambiguous: usize,
    /// The grid resolution m.
    pub m: usize,
}

/// The p_opt distribution per model and matrix type (types absent from a
/// model are left out).
pub(crate) fn p_opt_counts(set: &StudySet) -> Vec<POptCounts> {
    let mut out = Vec::new();
    for (i, mc) in set.models.iter().enumerate() {
        let m = mc.cert.parameters.grid_m;
        // p_opt is a bound's: only its families have one.
        for kind in crate::bounds::BOUND_KINDS {
            let mut unique = std::collections::BTreeMap::new();
            let mut ambiguous = 0;
            let mut any = false;
            for w in mc.cert.matrices.iter().filter(|w| w.kind == kind) {
                any = true;
                match w.p_opt_fraction.as_slice() {
                    [g] => *unique.entry(g.k).or_insert(0) += 1,
                    _ => ambiguous += 1,
                }
            }
            if any {
                out.push(POptCounts {
                    model: i,
                    kind,
                    unique: unique.into_iter().collect(),
                    ambiguous,
                    m,
                });
            }
        }
    }
    out
}

/// One of the widest certified intervals of a study.
#[derive(Clone, Debug)]
pub(crate) struct Widest {
    /// Index of the model.
    pub model: usize,
    /// The quantity (`layer 0 head 3 QK singular_value[31]`).
    pub quantity: String,
    /// Its interval.
    pub interval: CertInterval,
    /// `(hi - lo) / min(|lo|, |hi|)` (infinite when an end is 0 and the other is not).
    pub relative_width: f64,
}

/// The `n` intervals of largest relative width over all models (the first
/// in certificate order among equals; exact points left out). Keeps only
/// `n` candidates at a time, so memory does not grow with the study.
pub(crate) fn widest(set: &StudySet, n: usize) -> Vec<Widest> {
    let mut kept: Vec<Widest> = Vec::with_capacity(n + 1);
    if n == 0 {
        return kept;
    }
    for (i, mc) in set.models.iter().enumerate() {
        for (q, x) in mc.cert.quantities() {
            if x.lo == x.hi {
                continue;
            }
            let base = x.lo.abs().min(x.hi.abs());
            let rel = if base > 0.0 && x.lo.signum() == x.hi.signum() {
                (x.hi - x.lo) / base
            } else {
                f64::INFINITY
            };
            if kept.len() == n && !(rel > kept[n - 1].relative_width) {
                continue;
            }
            // Insert after every kept entry at least as wide (stable order).
            let at = kept.partition_point(|k| k.relative_width >= rel);
            kept.insert(
                at,
                Widest {
                    model: i,
                    quantity: q.to_string(),
                    interval: x,
                    relative_width: rel,
                },
            );
            kept.truncate(n);
        }
    }
    kept
}
