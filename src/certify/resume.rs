//! The resume directory: each finished layer's part is written there
//! atomically, and a rerun with the same arguments reads it back after
//! checking that this program wrote it for this model, these parameters
//! and this shard (else it refuses, naming the file).

use super::CertifyError;
use crate::arch::MatrixId;
use crate::certificate::{Header, Part, ShardSpec, SpectrumEntry};
use std::path::Path;

/// The file name of layer `layer`'s part of shard `shard` in a resume
/// directory: `shard-K-of-N.layer-LLLLL.json`.
pub fn layer_part_name(shard: ShardSpec, layer: usize) -> String {
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
