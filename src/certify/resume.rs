//! The resume directory: each finished layer's part is written there
//! atomically, and a rerun with the same arguments reads it back after
//! checking that this program wrote it for this model, these parameters
//! and this shard (else it refuses, naming the file).

use super::CertifyError;
use crate::arch::MatrixId;
use crate::certificate::{Header, Part, ShardSpec, SpectrumEntry};
use crate::io::output::Outputs;
use std::path::Path;

/// The file name of layer `layer`'s part of shard `shard` in a resume
/// directory: `shard-K-of-N.layer-LLLLL.json`.
pub(crate) fn layer_part_name(shard: ShardSpec, layer: usize) -> String {
    format!(
        "shard-{}-of-{}.layer-{layer:05}.json",
        shard.index, shard.count
    )
}

/// Refuses a resume directory that exists as something else.
pub(super) fn check_resume_dir(dir: &Path) -> Result<(), CertifyError> {
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => Err(CertifyError::Resume(format!(
            "{}: the resume directory exists and is not a directory",
            dir.display()
        ))),
        _ => Ok(()),
    }
}

/// Reads back a layer's part from a resume directory: it must be a valid
/// part of this program's version, for this model (hashes, architecture),
/// these parameters and this shard, holding exactly the matrices `ids`.
pub(super) fn read_layer_part(
    file: &Path,
    header: &Header,
    shard: ShardSpec,
    ids: &[MatrixId],
) -> Result<Vec<SpectrumEntry>, CertifyError> {
    let refuse = |why: String| {
        CertifyError::Resume(format!(
            "{}: {why}; remove it or choose another --resume-dir",
            file.display()
        ))
    };
    let part = Part::read(file).map_err(|e| CertifyError::Resume(e.to_string()))?;
    if let Some((_, d)) = part.header().difference(header) {
        return Err(refuse(format!("written by another run: {d} as here")));
    }
    if part.shard != shard {
        return Err(refuse(format!(
            "written by another run (shard {}, this run is shard {shard})",
            part.shard
        )));
    }
    if !part
        .matrices
        .iter()
        .map(SpectrumEntry::id)
        .eq(ids.iter().copied())
    {
        let first = part
            .matrices
            .first()
            .map_or_else(|| "nothing".to_string(), |m| format!("{} first", m.id()));
        return Err(refuse(format!(
            "holds {} matrices ({first}), not the {} matrices of layer {} in shard {shard}",
            part.matrices.len(),
            ids.len(),
            ids[0].layer
        )));
    }
    Ok(part.matrices)
}

/// The parts an earlier run left in `dir` for the layers of `by_layer`
/// (layer `l`'s matrices in this shard), each checked as
/// [`read_layer_part`] checks it; `None` for a layer without one.
pub(super) fn read_back(
    dir: &Path,
    header: &Header,
    shard: ShardSpec,
    by_layer: &[Vec<MatrixId>],
) -> Result<Vec<Option<Vec<SpectrumEntry>>>, CertifyError> {
    check_resume_dir(dir)?;
    let mut done = vec![None; by_layer.len()];
    for (l, ids) in by_layer.iter().enumerate() {
        if ids.is_empty() {
            continue;
        }
        let file = dir.join(layer_part_name(shard, l));
        if std::fs::symlink_metadata(&file).is_ok() {
            done[l] = Some(read_layer_part(&file, header, shard, ids)?);
        }
    }
    Ok(done)
}

/// Writes layer `l`'s part (its certified `entries`) into `dir`
/// atomically, creating `dir` if needed, before the next layer starts.
pub(super) fn write_layer_part(
    dir: &Path,
    header: &Header,
    shard: ShardSpec,
    l: usize,
    entries: &[SpectrumEntry],
) -> Result<(), CertifyError> {
    let part = Part::new(header.clone(), shard, entries.to_vec());
    let mut out = Outputs::new();
    out.create_dir(dir);
    out.stage(dir.join(layer_part_name(shard, l)), part.to_json_pretty());
    out.commit().map_err(CertifyError::Output)
}
