//! The norm-based measures of a model (`docs/measures.md`): every raw
//! weight of its blocks certified ([`super::norms`]), the measures
//! evaluated from the norms as the certificate states them, and the
//! initialisation checked to have the model's architecture.

use super::assemble::iv;
use super::norms::{certify_distance_norms, certify_raw_norms_with};
use super::shard;
use super::{CertifyError, CertifyOptions, Outcome};
use crate::arch::{self, Architecture, MatrixId, MatrixType, ModelError};
use crate::bounds::measures::NormIntervals;
use crate::bounds::{self};
use crate::certificate::{
    CertInterval, Certificate, FileEntry, Header, InitModel, MeasuresEntry, NormsEntry,
    RawWeightEntry, ShardSpec, SpectrumEntry,
};
use crate::enclosure::{Enclosure, Inconclusive};
use crate::io::checkpoint::Checkpoint;
use crate::linalg::SvdOptions;
use crate::progress::Progress;
use faer::Par;
use inari::Interval;
use std::path::Path;

/// What [`certify_measures`] certified: the raw weights' norms, the
/// measures computed from them, and the initialisation read.
#[derive(Clone, Debug)]
pub struct MeasuresRun {
    /// One entry per raw weight matrix, layer then role order.
    pub raw_weights: Vec<RawWeightEntry>,
    /// The measures.
    pub measures: MeasuresEntry,
    /// The initialisation (with `init`).
    pub init_model: Option<InitModel>,
}

impl MeasuresRun {
    /// Adds the raw weights, the measures and the initialisation to `cert`
    /// (a certificate without a bound keeps its version, which allows them).
    pub fn attach(self, cert: &mut Certificate) {
        if cert.version != crate::certificate::VERSION_NO_BOUND {
            cert.version = crate::certificate::VERSION_MEASURES;
        }
        cert.raw_weights = Some(self.raw_weights);
        cert.measures = Some(self.measures);
        cert.init_model = self.init_model;
    }
}

/// Checks that the initialisation has the model's architecture (family,
/// layout and every width); the error is one line naming the first fact
/// that differs.
fn check_same_architecture(
    init: &Path,
    a: &Architecture,
    a0: &Architecture,
) -> Result<(), CertifyError> {
    let facts = |x: &Architecture| {
        [
            ("family", x.family.clone()),
            ("layout", x.layout().to_string()),
            ("layers", x.layers.to_string()),
            ("hidden size", x.hidden.to_string()),
            ("heads", x.heads.to_string()),
            ("key/value heads", x.kv_heads.to_string()),
            ("head dimension", x.head_dim.to_string()),
            ("feed-forward width", x.intermediate.to_string()),
        ]
    };
    for ((what, m), (_, i)) in facts(a).into_iter().zip(facts(a0)) {
        if m != i {
            return Err(CertifyError::Param(format!(
                "{}: the initialisation is not the model's architecture: {what} {} (the model's: {})",
                init.display(),
                crate::arch::clean(&i),
                crate::arch::clean(&m)
            )));
        }
    }
    Ok(())
}

/// An initialisation whose architecture was checked to be the model's: only
/// `check_init_architecture` makes one, so a [`super::Job`] that holds one
/// needs no second check.
#[derive(Clone, Copy, Debug)]
pub struct MatchingInit<'a> {
    path: &'a Path,
}

impl<'a> MatchingInit<'a> {
    /// The initialisation's checkpoint.
    pub fn path(&self) -> &'a Path {
        self.path
    }
}

/// Refuses an initialisation `init` whose architecture is not the model's
/// at `path` (one line naming the first fact that differs), before anything
/// is computed; `certify --init` calls it first and hands the
/// [`MatchingInit`] to the job.
pub(crate) fn check_init_architecture<'a>(
    path: &Path,
    init: &'a Path,
    opts: &CertifyOptions,
) -> Result<MatchingInit<'a>, CertifyError> {
    let ck = Checkpoint::open(path).map_err(ModelError::from)?;
    let arch = arch::detect(&ck, &opts.overrides)?;
    let ck0 = Checkpoint::open(init).map_err(ModelError::from)?;
    let a0 = arch::detect(&ck0, &opts.overrides)?;
    // Named as the checkpoint names itself: `<memory>` for tensors in
    // memory, whose key is no path to show.
    check_same_architecture(ck0.path(), &arch, &a0)?;
    arch::describe(&ck0, &a0)?;
    Ok(MatchingInit { path: init })
}

/// The norm-based measures of a model (`docs/measures.md`): every raw
/// weight matrix of its blocks is read through the layer recipes
/// (`arch::extract_raw_layer`), its spectral norm, Frobenius norm and
/// row-(2,1) norm certified ([`super::certify_raw_norms`]), a layer at a time
/// (its matrices in parallel), and the measures evaluated from the
/// certified norms as the certificate states them. With `init`, a
/// checkpoint of the same architecture (refused otherwise), the distances
/// `W - W0` are certified as well ([`certify_distance_norms`]) and the
/// measures that need them added.
///
/// *Guarantee: certified enclosure* of every norm and measure
/// ([`super::certify_raw_norms`], [`certify_distance_norms`],
/// `bounds::measures::evaluate`, [`proofs/measures.md`](crate::proofs::measures), L26); `Err` for bad
/// input, [`Outcome::Inconclusive`] when a norm or a required measure could
/// not be certified.
pub fn certify_measures(
    path: &Path,
    init: Option<&Path>,
    opts: &CertifyOptions,
    progress: &dyn Progress,
) -> Result<Outcome<MeasuresRun>, CertifyError> {
    certify_measures_reusing(path, init, opts, None, progress)
}

/// [`certify_measures`], reusing the certified spectral norms of the proxy
/// matrices `M_in` and `M_out` of `proxies` (a certificate of the same
/// weight files, e.g. the one `certify` has just made) for the raw
/// feed-forward weights of an ungated block, which are their transposes
/// (`M_in = W_in^T`, `M_out = W_out^T`): their spectra are then not
/// certified a second time. A certificate of other files (hashes) or
/// shapes is not used.
///
/// *Guarantee: certified enclosure*, as [`certify_measures`] (the lemmas
/// it names), given that the proxies' spectral norms are enclosures.
pub(crate) fn certify_measures_reusing(
    path: &Path,
    init: Option<&Path>,
    opts: &CertifyOptions,
    proxies: Option<&Certificate>,
    progress: &dyn Progress,
) -> Result<Outcome<MeasuresRun>, CertifyError> {
    let sigma = |id: MatrixId| {
        proxies
            .and_then(|c| c.matrix(id))
            .map(|e| (e.rows, e.cols, e.spectral_norm))
    };
    let files = proxies.map(|c| c.model.files.as_slice());
    let raw = match certify_raw_weights(
        path,
        init,
        opts,
        &RawWanted {
            want: &|_, _| true,
            proxy_files: files,
            sigma: &sigma,
        },
        progress,
    )? {
        Outcome::Certified(r) => r,
        Outcome::Inconclusive(inc) => return Ok(Outcome::Inconclusive(inc)),
    };
    Ok(
        match measures_of_raw_weights(&raw.raw_weights, raw.init_model.is_some()) {
            Ok(measures) => Outcome::Certified(MeasuresRun {
                raw_weights: raw.raw_weights,
                measures,
                init_model: raw.init_model,
            }),
            Err(inc) => Outcome::Inconclusive(inc),
        },
    )
}

/// The raw weights one run certified (all of them, or a shard's), with the
/// initialisation read.
#[derive(Clone, Debug)]
pub(crate) struct RawWeightsRun {
    /// Layer then role order.
    pub raw_weights: Vec<RawWeightEntry>,
    /// The initialisation (with `init`).
    pub init_model: Option<InitModel>,
}

/// The raw weights of shard `shard` of a sharded run with measures
/// ([`shard::raw_shards`]), certified as [`certify_measures_reusing`]
/// certifies them, reusing the certified sigma_1 of the proxies `M_in`,
/// `M_out` of `spectra` (the shard's own proxies, which [`shard::raw_shards`]
/// makes hold every proxy reused), so that the entries are those of an
/// unsharded run. `merge` computes the measures from the entries of all
/// shards.
///
/// *Guarantee: certified enclosure* of every norm, as
/// [`certify_measures_reusing`].
pub(crate) fn certify_shard_raw_weights(
    path: &Path,
    init: Option<&Path>,
    opts: &CertifyOptions,
    header: &Header,
    shard: ShardSpec,
    spectra: &[SpectrumEntry],
    progress: &dyn Progress,
) -> Result<Outcome<RawWeightsRun>, CertifyError> {
    let ck = Checkpoint::open(path).map_err(ModelError::from)?;
    let arch = arch::detect(&ck, &opts.overrides)?;
    let raws = shard::raw_plan(&header.model, arch.gated());
    let of = shard::raw_shards(&arch, opts.precision, &raws, shard.count);
    let mine: Vec<(usize, arch::Role)> = raws
        .iter()
        .zip(&of)
        .filter(|(_, s)| **s + 1 == shard.index)
        .map(|(r, _)| (r.layer, r.role))
        .collect();
    let sigma = |id: MatrixId| {
        spectra
            .iter()
            .find(|e| e.id() == id)
            .map(|e| (e.rows, e.cols, e.spectral_norm))
    };
    let wanted = RawWanted {
        want: &|l, r| mine.contains(&(l, r)),
        proxy_files: Some(&header.model.files),
        sigma: &sigma,
    };
    certify_raw_weights(path, init, opts, &wanted, progress)
}

/// Which raw weights [`certify_raw_weights`] certifies, and the proxies'
/// certified sigma_1 it may reuse.
struct RawWanted<'a> {
    /// The raw weights wanted, by layer and role.
    want: &'a (dyn Fn(usize, arch::Role) -> bool + Sync),
    /// The weight files the proxies were certified from: their sigma_1 is
    /// reused only when these are this model's files.
    proxy_files: Option<&'a [FileEntry]>,
    /// A proxy's `(rows, cols, certified sigma_1)`.
    sigma: &'a (dyn Fn(MatrixId) -> Option<(usize, usize, CertInterval)> + Sync),
}

/// The raw weights `wanted` selects (by layer and role), certified
/// ([`certify_raw_norms_with`], [`certify_distance_norms`] with `init`),
/// reusing a proxy's certified sigma_1 for the raw feed-forward weights of
/// an ungated block when the proxies' files are this model's weight files
/// and the shape is the transpose's.
///
/// *Guarantee: certified enclosure* of every norm, as
/// [`certify_measures_reusing`].
fn certify_raw_weights(
    path: &Path,
    init: Option<&Path>,
    opts: &CertifyOptions,
    wanted: &RawWanted<'_>,
    progress: &dyn Progress,
) -> Result<Outcome<RawWeightsRun>, CertifyError> {
    let ck = Checkpoint::open(path).map_err(ModelError::from)?;
    let arch = arch::detect(&ck, &opts.overrides)?;
    arch::describe(&ck, &arch)?;
    let hashes = super::file_entries(&ck.file_hashes().map_err(ModelError::from)?);
    let init_ck = match init {
        None => None,
        Some(p) => {
            let ck0 = Checkpoint::open(p).map_err(ModelError::from)?;
            let a0 = arch::detect(&ck0, &opts.overrides)?;
            check_same_architecture(ck0.path(), &arch, &a0)?;
            arch::describe(&ck0, &a0)?;
            Some((ck0, a0))
        }
    };
    let layers = RawLayers {
        ck: &ck,
        arch: &arch,
        init: init_ck.as_ref().map(|(ck0, a0)| (ck0, a0)),
        wanted,
        reuse: wanted.proxy_files.is_some_and(|f| f == hashes.as_slice()) && !arch.gated(),
        svd: SvdOptions {
            precision: opts.precision,
            par: Par::Seq,
            ..SvdOptions::default()
        },
    };
    let mut raw_weights = Vec::new();
    for l in 0..arch.layers {
        if progress.cancelled() {
            return Err(CertifyError::Cancelled);
        }
        match layers.certify(l)? {
            Outcome::Certified(entries) => raw_weights.extend(entries),
            Outcome::Inconclusive(inc) => return Ok(Outcome::Inconclusive(inc)),
        }
    }
    let init_model = match (init, &init_ck) {
        (Some(p), Some((ck0, _))) => Some(InitModel {
            path: p.display().to_string(),
            files: super::file_entries(&ck0.file_hashes().map_err(ModelError::from)?),
        }),
        _ => None,
    };
    Ok(Outcome::Certified(RawWeightsRun {
        raw_weights,
        init_model,
    }))
}

/// The raw weights of a model (and of its initialisation) certified a
/// layer at a time, its matrices in parallel.
struct RawLayers<'a> {
    ck: &'a Checkpoint,
    arch: &'a Architecture,
    init: Option<(&'a Checkpoint, &'a Architecture)>,
    wanted: &'a RawWanted<'a>,
    /// Whether the proxies' sigma_1 may be reused (the same files, an
    /// ungated block).
    reuse: bool,
    svd: SvdOptions,
}

impl RawLayers<'_> {
    /// Layer `l`'s wanted raw weights of `ck`.
    fn extract(
        &self,
        ck: &Checkpoint,
        a: &Architecture,
        l: usize,
    ) -> Result<Vec<arch::RawWeight>, CertifyError> {
        Ok(arch::extract_raw_layer(ck, a, l)?
            .into_iter()
            .filter(|w| (self.wanted.want)(l, w.role))
            .collect())
    }

    /// The certified sigma_1 of the proxy that is `w` transposed, when it
    /// may be reused.
    fn known(&self, l: usize, w: &arch::RawWeight) -> Option<Enclosure> {
        let kind = match w.role {
            arch::Role::FfnIn => MatrixType::MIn,
            arch::Role::FfnOut => MatrixType::MOut,
            _ => return None,
        };
        if !self.reuse {
            return None;
        }
        let (rows, cols, s) = (self.wanted.sigma)(MatrixId::layer(l, kind))?;
        ((rows, cols) == (w.in_dim(), w.out_dim()))
            .then(|| Enclosure::new(s.lo, s.hi))
            .flatten()
    }

    /// Layer `l`'s entries, in role order; inconclusive at the first weight
    /// whose norms (or distance) could not be certified or stated.
    fn certify(&self, l: usize) -> Result<Outcome<Vec<RawWeightEntry>>, CertifyError> {
        use rayon::prelude::*;
        let raw = self.extract(self.ck, self.arch, l)?;
        if raw.is_empty() {
            return Ok(Outcome::Certified(Vec::new()));
        }
        let raw0 = match self.init {
            Some((ck0, a0)) => Some(self.extract(ck0, a0, l)?),
            None => None,
        };
        let done: Vec<Result<_, Inconclusive>> = raw
            .par_iter()
            .enumerate()
            .map(|(k, w)| self.norms(l, w, raw0.as_ref().map(|r| &r[k])))
            .collect();
        let mut entries = Vec::with_capacity(raw.len());
        for (w, r) in raw.iter().zip(done) {
            match r.and_then(|(n, d)| raw_weight_entry(l, w, &n, d.as_ref())) {
                Ok(e) => entries.push(e),
                Err(inc) => return Ok(Outcome::Inconclusive(inc)),
            }
        }
        Ok(Outcome::Certified(entries))
    }

    /// The certified norms of `w` and, with its initialisation `w0`, of
    /// their difference.
    fn norms(
        &self,
        l: usize,
        w: &arch::RawWeight,
        w0: Option<&arch::RawWeight>,
    ) -> Result<(NormIntervals, Option<NormIntervals>), Inconclusive> {
        let what = format!("layer {l} {}", w.role.name());
        let wrap = |e: Inconclusive| Inconclusive::new(format!("{what}: {}", e.reason));
        let n = certify_raw_norms_with(&w.transposed, &self.svd, self.known(l, w)).map_err(wrap)?;
        let d = match w0 {
            Some(w0) => Some(
                certify_distance_norms(&w.transposed, &w0.transposed, &self.svd).map_err(|e| {
                    Inconclusive::new(format!("{what} minus its initialisation: {}", e.reason))
                })?,
            ),
            None => None,
        };
        Ok((n, d))
    }
}

/// The certificate's entry of raw weight `w` of layer `l` from its
/// certified norms `n` (and distance `d`): each stated as binary64 ends.
fn raw_weight_entry(
    l: usize,
    w: &arch::RawWeight,
    n: &NormIntervals,
    d: Option<&NormIntervals>,
) -> Result<RawWeightEntry, Inconclusive> {
    let what = format!("layer {l} {}", w.role.name());
    let entry = |x: &NormIntervals| -> Result<NormsEntry, Inconclusive> {
        Ok(NormsEntry {
            spectral_norm: iv(x.spectral, &format_args!("{what}: the spectral norm"))?,
            frobenius_norm: iv(x.frobenius, &format_args!("{what}: the Frobenius norm"))?,
            norm_21_rows: iv(x.norm_21_rows, &format_args!("{what}: the (2,1)-norm"))?,
        })
    };
    let ne = entry(n)?;
    let de = d.map(entry).transpose()?;
    Ok(RawWeightEntry {
        layer: l,
        role: w.role.name().to_string(),
        tensor: w.tensor.clone(),
        rows: w.out_dim(),
        cols: w.in_dim(),
        spectral_norm: ne.spectral_norm,
        frobenius_norm: ne.frobenius_norm,
        norm_21_rows: ne.norm_21_rows,
        init_distance: de,
    })
}

/// The measures of the certified raw weights `raw` (every raw weight of a
/// model, in certificate order), with the distance measures when `init`
/// (every entry then states its distance): [`measures_entry`] of their
/// stated norms. `certify`, `merge` and `verify` evaluate them so.
///
/// *Guarantee: certified enclosure* of every measure given enclosures
/// ([`proofs/measures.md`](crate::proofs::measures), L26); inconclusive as [`measures_entry`], or
/// when `init` and an entry states no distance.
pub(crate) fn measures_of_raw_weights(
    raw: &[RawWeightEntry],
    init: bool,
) -> Result<MeasuresEntry, Inconclusive> {
    let norms: Vec<NormsEntry> = raw.iter().map(RawWeightEntry::norms).collect();
    let dists: Option<Vec<NormsEntry>> = if init {
        Some(
            raw.iter()
                .map(|w| {
                    w.init_distance.ok_or_else(|| {
                        Inconclusive::new(format!(
                            "layer {} {}: no distance to the initialisation",
                            w.layer, w.role
                        ))
                    })
                })
                .collect::<Result<_, _>>()?,
        )
    } else {
        None
    };
    measures_entry(&norms, dists.as_deref())
}

/// The measures of the certified norms `norms` (and the distances `dist`,
/// index-matched, with an initialisation), as a certificate states them:
/// evaluated from exactly the intervals stated (`bounds::measures`). A
/// measure that is not finite (-inf or undefined for a weight that may be
/// 0, or beyond binary64's range) is absent, with the reason in
/// `absent`; every other measure is still stated.
///
/// *Guarantee: certified enclosure* of every measure stated, given
/// enclosures ([`proofs/measures.md`](crate::proofs::measures), L26); inconclusive only when a stated
/// norm is not an interval.
pub fn measures_entry(
    norms: &[NormsEntry],
    dist: Option<&[NormsEntry]>,
) -> Result<MeasuresEntry, Inconclusive> {
    use bounds::measures::{evaluate, evaluate_init, NormIntervals};
    let to = |n: &NormsEntry| -> Result<NormIntervals, Inconclusive> {
        let bad = || Inconclusive::new("a stated norm is not an interval");
        Ok(NormIntervals {
            spectral: n.spectral_norm.to_inari().ok_or_else(bad)?,
            frobenius: n.frobenius_norm.to_inari().ok_or_else(bad)?,
            norm_21_rows: n.norm_21_rows.to_inari().ok_or_else(bad)?,
        })
    };
    let w: Vec<NormIntervals> = norms.iter().map(to).collect::<Result<_, _>>()?;
    let m = evaluate(&w);
    let mut absent = std::collections::BTreeMap::new();
    let zero = |at: &str, n: &[NormIntervals], f: fn(&NormIntervals) -> Interval, what: &str| {
        n.iter().position(|x| f(x).inf() <= 0.0).map(|i| {
            format!("{at}[{i}]: the {what} is not certified positive (it may be 0, where the measure is -inf or undefined)")
        })
    };
    let spec = zero("raw_weights", &w, |x| x.spectral, "spectral norm");
    let fro = zero("raw_weights", &w, |x| x.frobenius, "Frobenius norm");
    let mut get = |x: Interval, name: &str, why: &Option<String>| {
        let v = CertInterval::of_inari(x);
        if v.is_none() {
            let r = why.clone().unwrap_or_else(|| {
                "not finite in binary64 (beyond its range, or undefined)".into()
            });
            absent.insert(name.to_string(), r);
        }
        v
    };
    let mut out = MeasuresEntry {
        d: w.len(),
        log_prod_of_spec: get(m.log_prod_of_spec, "log_prod_of_spec", &spec),
        log_sum_of_spec: get(m.log_sum_of_spec, "log_sum_of_spec", &spec),
        log_prod_of_fro: get(m.log_prod_of_fro, "log_prod_of_fro", &fro),
        log_sum_of_fro: get(m.log_sum_of_fro, "log_sum_of_fro", &fro),
        param_norm: get(m.param_norm, "param_norm", &None),
        log_spec_orig: get(m.log_spec_orig, "log_spec_orig", &spec),
        bartlett: get(m.bartlett, "bartlett", &spec),
        log_bartlett: get(m.log_bartlett, "log_bartlett", &spec),
        frobenius_distance: None,
        dist_spec_init: None,
        log_spec_init: None,
        bartlett_init: None,
        log_bartlett_init: None,
        absent: Default::default(),
    };
    if let Some(dist) = dist {
        let e: Vec<NormIntervals> = dist.iter().map(to).collect::<Result<_, _>>()?;
        let i = evaluate_init(&w, &e);
        let dfro = zero("raw_weights", &w, |x| x.spectral, "spectral norm").or_else(|| {
            (e.iter().all(|x| x.frobenius.inf() <= 0.0)).then(|| {
                "every distance to the initialisation may be 0 (the log is -inf)".to_string()
            })
        });
        out.frobenius_distance = get(i.frobenius_distance, "frobenius_distance", &None);
        out.dist_spec_init = get(i.dist_spec_init, "dist_spec_init", &None);
        out.log_spec_init = get(i.log_spec_init, "log_spec_init", &dfro);
        out.bartlett_init = get(i.bartlett_init, "bartlett_init", &spec);
        out.log_bartlett_init = get(i.log_bartlett_init, "log_bartlett_init", &dfro);
    }
    out.absent = absent;
    Ok(out)
}
