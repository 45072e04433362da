//! The one place a model argument becomes files: every command and both
//! fronts name a model by a [`ModelRef`] and resolve it here.
//!
//! An argument is, in this order: a path that exists (a model directory or
//! a file of any format the readers take); an id shaped `org/name`, looked
//! up offline in the local Hugging Face cache (`super::hub`); otherwise a
//! path that does not exist, reported as a missing file. No argument is the
//! bundled all-MiniLM-L6-v2 ([`super::bundle`]).

use std::fmt;
use std::path::{Path, PathBuf};

use super::bundle::{self, BundleError};
use super::hub::{self, HubError, HubModel};

/// How a user named a model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelRef {
    /// The bundled all-MiniLM-L6-v2.
    Bundled,
    /// A file or directory.
    Path(PathBuf),
    /// A Hugging Face id (`org/name`) in the local cache, at a revision
    /// (branch, tag or commit; `main` when `None`).
    Hub {
        /// `org/name`.
        id: String,
        /// The revision asked for.
        revision: Option<String>,
    },
    /// Tensors held in memory (the Python module's `certify(state_dict)`),
    /// read through their [key](super::memory::MemoryModel::key).
    Memory(super::memory::MemoryModel),
}

/// A model argument resolved to files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedModel {
    /// The directory or file the readers open.
    pub path: PathBuf,
    /// Where a Hugging Face id was found, when the model was named by one.
    pub hub: Option<HubModel>,
    /// The argument as the user wrote it (for messages).
    pub shown: String,
}

/// Why a model argument names no model (one line each).
#[derive(Debug)]
pub enum ModelRefError {
    /// Not found in the cache, or a bad id or revision.
    Hub(HubError),
    /// The bundled model is not where it is looked for.
    Bundle(BundleError),
    /// A path that does not exist and is not shaped like a Hub id.
    Missing(PathBuf),
    /// `--revision` without a Hugging Face id.
    RevisionWithoutId(String),
}

impl fmt::Display for ModelRefError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelRefError::Hub(e) => write!(f, "{e}"),
            ModelRefError::Bundle(e) => write!(f, "{e}"),
            ModelRefError::Missing(p) => write!(
                f,
                "{}: cannot read file: No such file or directory",
                super::fmt_name(&p.display().to_string())
            ),
            ModelRefError::RevisionWithoutId(what) => write!(
                f,
                "{what}: --revision applies to a Hugging Face id (org/name), not to a path"
            ),
        }
    }
}

impl std::error::Error for ModelRefError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ModelRefError::Hub(e) => Some(e),
            ModelRefError::Bundle(e) => Some(e),
            _ => None,
        }
    }
}

impl ModelRef {
    /// Reads a model argument: `None` is the bundled model; a path that
    /// exists is a path; an `org/name` that is not a path is a Hub id; any
    /// other argument is a path (reported missing by `ModelRef::resolve`).
    /// A `revision` needs a Hub id.
    pub fn parse(arg: Option<&Path>, revision: Option<&str>) -> Result<ModelRef, ModelRefError> {
        let Some(arg) = arg else {
            return match revision {
                Some(_) => Err(ModelRefError::RevisionWithoutId("the bundled model".into())),
                None => Ok(ModelRef::Bundled),
            };
        };
        let exists = std::fs::symlink_metadata(arg).is_ok();
        match arg.to_str() {
            Some(text) if !exists && hub::looks_like_id(text) => Ok(ModelRef::Hub {
                id: text.to_string(),
                revision: revision.map(str::to_string),
            }),
            _ if revision.is_some() => Err(ModelRefError::RevisionWithoutId(
                super::fmt_name(&arg.display().to_string()).into_owned(),
            )),
            _ => Ok(ModelRef::Path(arg.to_path_buf())),
        }
    }

    /// The files of the model: the bundle located, a path checked to
    /// exist, an id looked up in the cache (never downloaded).
    pub(crate) fn resolve(&self) -> Result<ResolvedModel, ModelRefError> {
        match self {
            ModelRef::Bundled => {
                let path = bundle::locate().map_err(ModelRefError::Bundle)?;
                Ok(ResolvedModel {
                    shown: super::escape(&path.display().to_string()).into_owned(),
                    path,
                    hub: None,
                })
            }
            ModelRef::Path(p) => {
                if std::fs::symlink_metadata(p).is_err() {
                    return Err(ModelRefError::Missing(p.clone()));
                }
                Ok(ResolvedModel {
                    path: p.clone(),
                    hub: None,
                    shown: super::escape(&p.display().to_string()).into_owned(),
                })
            }
            ModelRef::Memory(m) => Ok(ResolvedModel {
                path: m.key().to_path_buf(),
                hub: None,
                shown: super::memory::MEMORY_LABEL.to_string(),
            }),
            ModelRef::Hub { id, revision } => {
                let r =
                    hub::resolve(Path::new(id), revision.as_deref()).map_err(ModelRefError::Hub)?;
                Ok(ResolvedModel {
                    path: r.path,
                    hub: r.hub,
                    shown: super::escape(id).into_owned(),
                })
            }
        }
    }
}

impl ResolvedModel {
    /// The id a model gets in tables and studies when none is given: a Hub
    /// model's name (the part after `/`), else the name of its directory or
    /// file (after resolving links, so `.` is the directory's name);
    /// `memory` for a model in memory.
    pub(crate) fn default_id(&self) -> String {
        match &self.hub {
            Some(h) => h.name().to_string(),
            None if super::memory::is_memory_key(&self.path) => "memory".to_string(),
            None => default_id_of_path(&self.path),
        }
    }

    /// Whether the model is held in memory ([`ModelRef::Memory`]).
    pub(crate) fn is_memory(&self) -> bool {
        super::memory::is_memory_key(&self.path)
    }
}

/// The default id of a model at `path` (see `ResolvedModel::default_id`).
pub fn default_id_of_path(path: &Path) -> String {
    std::fs::canonicalize(path)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().to_string()))
        .or_else(|| path.file_name().map(|n| n.to_string_lossy().to_string()))
        .unwrap_or_else(|| path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_bare_name_is_a_missing_file_not_a_hub_id() {
        let r = ModelRef::parse(Some(Path::new("missing.npy")), None).unwrap();
        assert_eq!(r, ModelRef::Path("missing.npy".into()));
        let e = r.resolve().unwrap_err();
        assert_eq!(
            e.to_string(),
            "missing.npy: cannot read file: No such file or directory"
        );
    }

    #[test]
    fn only_org_slash_name_is_looked_up() {
        assert!(matches!(
            ModelRef::parse(Some(Path::new("org/name")), Some("v1")).unwrap(),
            ModelRef::Hub { .. }
        ));
        assert!(matches!(
            ModelRef::parse(Some(Path::new("a/b/c")), None).unwrap(),
            ModelRef::Path(_)
        ));
        assert!(ModelRef::parse(Some(Path::new("a/b/c")), Some("main")).is_err());
        assert!(ModelRef::parse(None, Some("main")).is_err());
    }
}
