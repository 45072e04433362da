//! `specbound merge`: the certificate of a model from parts (written by
//! `certify --shard K/N`, or a resumable run's layer parts) that cover every
//! proxy matrix exactly once.
//!
//! The parts must have been written by this version of the program, for
//! the same model (weight-file hashes), architecture, parameters and
//! extensions; then the proxies and bounds are computed by
//! [`fn@certify::assemble`], the code `certify` itself uses, from the parts'
//! certified spectral quantities, so the merged certificate is the one an
//! unsharded run writes, number for number (only `model.path`, which is
//! informative, comes from the part of the lowest shard index). Parts of a
//! run with measures also hold every raw weight matrix once between them;
//! the measures are then computed from their norms by
//! [`certify::measures_of_raw_weights`], as `certify` computes them.

use std::fmt;
use std::path::PathBuf;

use crate::arch::MatrixId;
use crate::certificate::{
    expected_ids, Certificate, CertificateError, HeaderDifference, InitModel, Part, RawWeightEntry,
    SpectrumEntry,
};
use crate::certify::{self, Outcome};

/// Why parts cannot be merged. Every message is one line naming the part
/// concerned (or, for a gap, the missing shard or matrix).
#[derive(Debug)]
pub(crate) enum MergeError {
    /// No part was given.
    NoParts,
    /// A part could not be read or is not a valid part.
    Read(CertificateError),
    /// A part written by another version of the program.
    Version {
        /// The part.
        file: String,
        /// Its `tool.version`.
        found: String,
    },
    /// A part of another model, architecture or parameters than the first.
    Mismatch {
        /// The part.
        file: String,
        /// The part it was compared with.
        other: String,
        /// What differs.
        kind: HeaderDifference,
        /// The key and both values.
        detail: String,
    },
    /// Two parts hold the same matrix.
    Overlap {
        /// The later part.
        file: String,
        /// The earlier part holding it too.
        other: String,
        /// The first matrix both hold.
        id: MatrixId,
        /// Whether the two parts are the same part (given twice).
        same: bool,
    },
    /// A part whose re-derivation fails (`evidence::verify::verify_part`):
    /// its stated norms or rank are not implied by its singular values.
    Inconsistent {
        /// The part.
        file: String,
        /// The first failed check.
        check: String,
    },
    /// Parts that disagree on the measures (with and without, another
    /// initialisation), or whose raw weights overlap, miss one or are not
    /// the model's.
    RawWeights {
        /// The part concerned, or the first part when a raw weight is missing.
        file: String,
        /// What is wrong.
        detail: String,
    },
    /// No part holds some matrices.
    Gap {
        /// The first matrix missing (certificate order).
        first: MatrixId,
        /// How many are missing.
        count: usize,
        /// The shards missing, when every part comes from a run of the same
        /// number of shards (`K/N` strings).
        shards: Vec<String>,
    },
}

use crate::io::shown;

impl fmt::Display for MergeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MergeError::NoParts => write!(f, "no part to merge"),
            MergeError::Read(e) => write!(f, "{e}"),
            MergeError::Version { file, found } => write!(
                f,
                "{}: written by specbound {found}, and this is specbound {}: parts merge \
                 only with the version that wrote them (certify the shard again)",
                shown(file),
                env!("CARGO_PKG_VERSION")
            ),
            MergeError::Mismatch {
                file,
                other,
                kind,
                detail,
            } => {
                let what = match kind {
                    HeaderDifference::ToolVersion => "another version of the program",
                    HeaderDifference::Model => "a part of another model",
                    HeaderDifference::Architecture => "another architecture",
                    HeaderDifference::Parameters => "mixed parameters",
                    HeaderDifference::Extensions => "mixed extensions of the paper",
                };
                write!(
                    f,
                    "{}: {what}: {detail} as in {}",
                    shown(file),
                    shown(other)
                )
            }
            MergeError::Overlap {
                file,
                other,
                id,
                same,
            } => {
                if *same {
                    write!(
                        f,
                        "{}: the same part as {} (given twice?): {id} is in both",
                        shown(file),
                        shown(other)
                    )
                } else {
                    write!(
                        f,
                        "{}: overlaps {}: {id} is in both",
                        shown(file),
                        shown(other)
                    )
                }
            }
            MergeError::Inconsistent { file, check } => write!(
                f,
                "{}: not a consistent part (its re-derivation fails): {check}",
                shown(file)
            ),
            MergeError::RawWeights { file, detail } => write!(f, "{}: {detail}", shown(file)),
            MergeError::Gap {
                first,
                count,
                shards,
            } => {
                write!(f, "no part holds {first}")?;
                if *count > 1 {
                    write!(f, " (and {} more matrices)", count - 1)?;
                }
                match shards.len() {
                    0 => write!(f, ": a part is missing"),
                    1 => write!(f, ": shard {} is missing", shards[0]),
                    n if n <= 8 => write!(f, ": shards {} are missing", shards.join(", ")),
                    n => write!(
                        f,
                        ": {n} shards are missing ({}, ...)",
                        shards[..8].join(", ")
                    ),
                }
            }
        }
    }
}

impl std::error::Error for MergeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            MergeError::Read(e) => e.source(),
            _ => None,
        }
    }
}

/// Reads the part files as evidence and merges them ([`merge`]): each part
/// is read strictly ([`Part::read`]) and re-derived as far as a part allows
/// ([`crate::evidence::verify::verify_part`]: sigma_1, nuclear, Frobenius,
/// stable rank and rank from its singular values), so a part edited by
/// hand (its digest recomputed) whose norms its spectrum does not imply is
/// refused, naming the file and the first failed check.
pub(crate) fn merge_files(paths: &[PathBuf]) -> Result<Outcome<Certificate>, MergeError> {
    let parts = paths
        .iter()
        .map(|p| {
            let file = crate::io::shown_path(p);
            let part = Part::read(p).map_err(MergeError::Read)?;
            if let Some(check) = crate::evidence::verify::verify_part(&part).failure {
                return Err(MergeError::Inconsistent { file, check });
            }
            Ok((file, part))
        })
        .collect::<Result<Vec<_>, _>>()?;
    merge(&parts)
}

/// Merges validated parts, each with the name messages give it: checks
/// that every part comes from this version of the program, that all share
/// the model (weight-file hashes), architecture, parameters and extensions,
/// and that they cover every matrix of the model exactly once; then
/// computes the certificate ([`fn@certify::assemble`]).
///
/// *Guarantee: certified enclosure* of every proxy and bound, given that
/// the parts' intervals are enclosures (as `certify` wrote them; the parts'
/// digests refuse a part changed since).
pub(crate) fn merge(parts: &[(String, Part)]) -> Result<Outcome<Certificate>, MergeError> {
    let this = env!("CARGO_PKG_VERSION");
    for (file, p) in parts {
        if p.tool.version != this {
            return Err(MergeError::Version {
                file: file.clone(),
                found: crate::arch::clean_to(&p.tool.version, 80),
            });
        }
    }
    // The reference: the part of the lowest shard index (the first given among equals).
    let Some(first) = (0..parts.len()).min_by_key(|&i| (parts[i].1.shard.index, i)) else {
        return Err(MergeError::NoParts);
    };
    let (ref_file, ref_part) = &parts[first];
    let header = ref_part.header();
    for (file, p) in parts {
        if let Some((kind, detail)) = p.header().difference(&header) {
            return Err(MergeError::Mismatch {
                file: file.clone(),
                other: ref_file.clone(),
                kind,
                detail,
            });
        }
    }
    let mut holder: std::collections::HashMap<MatrixId, usize> = std::collections::HashMap::new();
    for (i, (file, p)) in parts.iter().enumerate() {
        for e in &p.matrices {
            if let Some(&j) = holder.get(&e.id()) {
                return Err(MergeError::Overlap {
                    file: file.clone(),
                    other: parts[j].0.clone(),
                    id: e.id(),
                    same: parts[j].1.sha256 == p.sha256,
                });
            }
            holder.insert(e.id(), i);
        }
    }
    let md = &header.model;
    let missing: Vec<MatrixId> = expected_ids(md)
        .into_iter()
        .filter(|id| !holder.contains_key(id))
        .collect();
    if let Some(&first_missing) = missing.first() {
        let count = parts[0].1.shard.count;
        let shards = if parts.iter().all(|(_, p)| p.shard.count == count) {
            let present: std::collections::BTreeSet<usize> =
                parts.iter().map(|(_, p)| p.shard.index).collect();
            (1..=count)
                .filter(|k| !present.contains(k))
                .map(|k| format!("{k}/{count}"))
                .collect()
        } else {
            Vec::new()
        };
        return Err(MergeError::Gap {
            first: first_missing,
            count: missing.len(),
            shards,
        });
    }
    let spectra: Vec<SpectrumEntry> = parts
        .iter()
        .flat_map(|(_, p)| p.matrices.iter().cloned())
        .collect();
    let raw = merged_raw_weights(parts, first, &spectra)?;
    let mut cert = match certify::assemble(&header, &spectra) {
        Ok(c) => c,
        Err(inc) => return Ok(Outcome::Inconclusive(inc)),
    };
    if let Some((raw_weights, init_model)) = raw {
        // Re-derived from the parts' norms, as certify derives them.
        match certify::measures_of_raw_weights(&raw_weights, init_model.is_some()) {
            Ok(measures) => certify::MeasuresRun {
                raw_weights,
                measures,
                init_model,
            }
            .attach(&mut cert),
            Err(inc) => return Ok(Outcome::Inconclusive(inc)),
        }
    }
    Ok(Outcome::Certified(cert))
}

/// The raw weights of parts with measures, in certificate order, and their
/// initialisation: `None` when no part has measures. Every part must have
/// them or none, with the same initialisation; together the parts hold
/// every raw weight of the model once ([`crate::certify::shard::raw_plan`], the
/// feed-forward gate when the merged `M_in` is `[W_gate, W_up]`), each of
/// its shape.
#[allow(clippy::type_complexity)]
fn merged_raw_weights(
    parts: &[(String, Part)],
    first: usize,
    spectra: &[SpectrumEntry],
) -> Result<Option<(Vec<RawWeightEntry>, Option<InitModel>)>, MergeError> {
    let (ref_file, ref_part) = &parts[first];
    let bad = |file: &str, detail: String| MergeError::RawWeights {
        file: file.to_string(),
        detail,
    };
    for (file, p) in parts {
        if p.raw_weights.is_some() != ref_part.raw_weights.is_some() {
            let (with, without) = if p.raw_weights.is_some() {
                (file, ref_file)
            } else {
                (ref_file, file)
            };
            return Err(bad(
                file,
                format!(
                    "parts with and without measures ({with} has them, {without} not): \
                     certify every shard with the same --measures and --init"
                ),
            ));
        }
        if p.init_model.as_ref().map(|i| &i.files) != ref_part.init_model.as_ref().map(|i| &i.files)
        {
            return Err(bad(
                file,
                format!("another initialisation than {ref_file} (--init)"),
            ));
        }
    }
    if ref_part.raw_weights.is_none() {
        return Ok(None);
    }
    let md = &ref_part.model;
    // Gated exactly when the merged M_in is [W_gate, W_up], 2 x the width.
    let gated = spectra
        .iter()
        .find(|e| e.id() == MatrixId::layer(0, crate::arch::MatrixType::MIn))
        .is_some_and(|e| e.cols == md.intermediate.saturating_mul(2));
    let plan = crate::certify::shard::raw_plan(md, gated);
    let key = |layer: usize, role: &str| {
        plan.iter()
            .position(|r| r.layer == layer && r.role.name() == role)
    };
    let mut slot: Vec<Option<(usize, RawWeightEntry)>> = vec![None; plan.len()];
    for (i, (file, p)) in parts.iter().enumerate() {
        for w in p.raw_weights.iter().flatten() {
            let role = crate::arch::clean_to(&w.role, 40);
            let Some(k) = key(w.layer, &w.role) else {
                return Err(bad(
                    file,
                    format!(
                        "raw weight layer {} {role} is not one of the model's",
                        w.layer
                    ),
                ));
            };
            if (w.rows, w.cols) != (plan[k].rows, plan[k].cols) {
                return Err(bad(
                    file,
                    format!(
                        "raw weight layer {} {role} is {} x {}, not the model's {} x {}",
                        w.layer, w.rows, w.cols, plan[k].rows, plan[k].cols
                    ),
                ));
            }
            if let Some((j, _)) = &slot[k] {
                return Err(bad(
                    file,
                    format!(
                        "overlaps {}: raw weight layer {} {role} is in both",
                        parts[*j].0, w.layer
                    ),
                ));
            }
            slot[k] = Some((i, w.clone()));
        }
    }
    if let Some(k) = slot.iter().position(Option::is_none) {
        return Err(bad(
            ref_file,
            format!(
                "no part holds raw weight layer {} {}: a part is missing",
                plan[k].layer,
                plan[k].role.name()
            ),
        ));
    }
    let raw = slot.into_iter().flatten().map(|(_, w)| w).collect();
    Ok(Some((raw, ref_part.init_model.clone())))
}
