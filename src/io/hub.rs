//! Models named by their Hugging Face id (`org/name`), found in the local
//! Hugging Face cache, offline. Nothing here reaches the network: a model
//! that is not cached is an error that says how to download it.
//!
//! The cache is the first of `$HF_HUB_CACHE`, `$HUGGINGFACE_HUB_CACHE`,
//! `$HF_HOME/hub`, `$XDG_CACHE_HOME/huggingface/hub` and
//! `~/.cache/huggingface/hub` that is set (as `huggingface_hub` chooses
//! it). A model `org/name` lives in `models--org--name/`: `refs/REV` holds
//! the commit of a branch or tag, `snapshots/COMMIT/` the files (symbolic
//! links into `blobs/`, which the readers follow).

use std::path::{Path, PathBuf};

/// A model argument resolved to a path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Resolved {
    /// The directory or file to open.
    pub path: PathBuf,
    /// Set when the argument was a Hugging Face id found in the cache.
    pub hub: Option<HubModel>,
}

/// Where a Hugging Face id was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HubModel {
    /// The id as given (`org/name`).
    pub id: String,
    /// The revision asked for (`main` by default).
    pub revision: String,
    /// The commit of the snapshot used.
    pub commit: String,
}

impl HubModel {
    /// The model's name (the part after the last `/`), e.g. for the
    /// `model_id` column of the tables.
    pub(crate) fn name(&self) -> &str {
        self.id.rsplit('/').next().unwrap_or(&self.id)
    }
}

/// Why a model argument could not be resolved (one line each).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HubError {
    /// Neither a path nor a cached id: says where it looked and how to download it.
    NotCached(String),
    /// A bad argument or revision, or a cache entry without that revision.
    Bad(String),
}

impl std::fmt::Display for HubError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HubError::NotCached(m) | HubError::Bad(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for HubError {}

/// The Hugging Face cache directory this process would use (see the
/// module documentation), whether or not it exists.
pub(crate) fn cache_dir() -> Option<PathBuf> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("HF_HUB_CACHE")
        .or_else(|| var("HUGGINGFACE_HUB_CACHE"))
        .or_else(|| var("HF_HOME").map(|h| h.join("hub")))
        .or_else(|| var("XDG_CACHE_HOME").map(|c| c.join("huggingface/hub")))
        .or_else(|| var("HOME").map(|h| h.join(".cache/huggingface/hub")))
}

/// Whether `s` has the form of a Hugging Face model id `org/name`: two
/// parts of letters, digits, `-`, `_`, `.`, each not starting or ending
/// with `.` or `-`, without `..` or `--` (the Hub refuses those, and the
/// cache writes `/` as `--`, so `org--tiny` would name `org/tiny`'s
/// entry). A bare `name` is never looked up: it is a path (a mistyped
/// `missing.npy` is a missing file, not a model to download).
pub(crate) fn looks_like_id(s: &str) -> bool {
    let part = |p: &str| {
        !p.is_empty()
            && p.len() <= 96
            && !p.starts_with(['.', '-'])
            && !p.ends_with(['.', '-'])
            && !p.contains("..")
            && !p.contains("--")
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    let mut it = s.split('/');
    match (it.next(), it.next(), it.next()) {
        (Some(a), Some(b), None) => part(a) && part(b),
        _ => false,
    }
}

fn valid_revision(r: &str) -> bool {
    !r.is_empty()
        && r.len() <= 256
        && !r.starts_with(['/', '.'])
        && !r.split('/').any(|p| p.is_empty() || p == "." || p == "..")
        && r.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn is_commit(r: &str) -> bool {
    r.len() == 40 && r.chars().all(|c| c.is_ascii_hexdigit())
}

/// How to download a model (for messages).
pub(crate) fn download_hint(id: &str, revision: Option<&str>) -> String {
    match revision {
        Some(r) => format!(
            "`huggingface-cli download {id} --revision {r}` (or in Python: `from huggingface_hub \
             import snapshot_download; snapshot_download(\"{id}\", revision=\"{r}\")`)"
        ),
        None => format!(
            "`huggingface-cli download {id}` (or in Python: `from huggingface_hub import \
             snapshot_download; snapshot_download(\"{id}\")`)"
        ),
    }
}

/// Resolves a model argument: a path that exists is used as it is (a
/// `revision` is then an error); otherwise an id of the form `org/name`
/// is looked up in the cache ([`resolve_in`] with [`cache_dir`]).
pub(crate) fn resolve(arg: &Path, revision: Option<&str>) -> Result<Resolved, HubError> {
    resolve_in(arg, revision, cache_dir().as_deref())
}

/// [`resolve`] with an explicit cache directory.
pub(crate) fn resolve_in(
    arg: &Path,
    revision: Option<&str>,
    cache: Option<&Path>,
) -> Result<Resolved, HubError> {
    let text = arg.to_str().unwrap_or("");
    if std::fs::symlink_metadata(arg).is_ok() {
        if revision.is_some() {
            return Err(HubError::Bad(format!(
                "{}: --revision applies to a Hugging Face id (org/name), not to a path",
                arg.display()
            )));
        }
        return Ok(Resolved {
            path: arg.to_path_buf(),
            hub: None,
        });
    }
    if !looks_like_id(text) {
        // Not an id: let the reader report the missing path.
        if revision.is_some() {
            return Err(HubError::Bad(format!(
                "{}: --revision applies to a Hugging Face id (org/name)",
                arg.display()
            )));
        }
        return Ok(Resolved {
            path: arg.to_path_buf(),
            hub: None,
        });
    }
    let id = text;
    if let Some(r) = revision {
        if !valid_revision(r) {
            return Err(HubError::Bad(format!(
                "--revision '{}' is not a branch, tag or commit name",
                super::fmt_name(r)
            )));
        }
    }
    let Some(cache) = cache else {
        return Err(HubError::NotCached(format!(
            "{id}: no such file or directory, and no Hugging Face cache is configured (HOME, \
             HF_HOME and HF_HUB_CACHE are unset); specbound never downloads: fetch it with {}",
            download_hint(id, revision)
        )));
    };
    let repo = cache.join(format!("models--{}", id.replace('/', "--")));
    if !repo.is_dir() {
        return Err(HubError::NotCached(format!(
            "{id}: no such file or directory, and not in the Hugging Face cache ({}); \
             specbound never downloads: fetch it with {}, then run this again",
            repo.display(),
            download_hint(id, revision)
        )));
    }
    let rev = revision.unwrap_or("main");
    let commit = commit_of(id, &repo, rev, revision)?;
    let snap = repo.join("snapshots").join(&commit);
    if !snap.is_dir() {
        return Err(HubError::NotCached(format!(
            "{id}: revision '{rev}' is commit {commit}, whose snapshot {} is not in the cache; \
             fetch it with {}",
            snap.display(),
            download_hint(id, revision)
        )));
    }
    Ok(Resolved {
        path: snap,
        hub: Some(HubModel {
            id: id.to_string(),
            revision: rev.to_string(),
            commit,
        }),
    })
}

/// The commit `rev` names in the cache entry `repo` of `id`: `rev` itself
/// when it is a commit with a snapshot, else what `refs/<rev>` holds
/// (`revision` as asked, for the download hint).
fn commit_of(id: &str, repo: &Path, rev: &str, revision: Option<&str>) -> Result<String, HubError> {
    if is_commit(rev) && repo.join("snapshots").join(rev).is_dir() {
        return Ok(rev.to_string());
    }
    let refp = repo.join("refs").join(rev);
    // The one open of every file read (limits::open_regular): a FIFO,
    // a device or a directory at refs/<rev> is refused without reading
    // or blocking, and the read stops at MAX_REF_BYTES.
    match super::limits::read_capped_string(&refp, super::limits::MAX_REF_BYTES, "revision ref") {
        Ok(s) if is_commit(s.trim()) => Ok(s.trim().to_string()),
        Ok(_) => Err(HubError::Bad(format!(
            "{}: does not hold a commit hash (40 hex digits)",
            refp.display()
        ))),
        Err(e) if super::limits::entry_exists(&refp) => {
            // There is something at refs/<rev>, but not a readable ref:
            // say what (a directory, a FIFO, too large, not UTF-8).
            Err(HubError::Bad(e.to_string()))
        }
        Err(_) => {
            let have = cached_snapshots(repo);
            Err(HubError::NotCached(format!(
                "{id}: the Hugging Face cache ({}) has no revision '{rev}' (no {}); cached \
                 snapshots: {}; pass --revision COMMIT, or fetch it with {}",
                repo.display(),
                refp.display(),
                if have.is_empty() {
                    "none".to_string()
                } else {
                    have.join(", ")
                },
                download_hint(id, revision)
            )))
        }
    }
}

/// The names of the first 100 snapshots of a cache entry, sorted (for the
/// message naming what is cached).
fn cached_snapshots(repo: &Path) -> Vec<String> {
    let mut have: Vec<String> = std::fs::read_dir(repo.join("snapshots"))
        .map(|it| {
            it.filter_map(Result::ok)
                .take(100)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    have.sort();
    have
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_revisions() {
        for ok in ["google/bert_uncased_L-2_H-128_A-2", "a.b/c-d_e.1"] {
            assert!(looks_like_id(ok), "{ok}");
        }
        for bad in [
            "",
            "/abs",
            "a/b/c",
            "../x",
            "a/..",
            ".hidden/x",
            "a b/c",
            "-x/y",
            "x/",
            // Regression (hub ids with `--` resolved to another repository's
            // cache entry): `org--tiny` is the cache's spelling of `org/tiny`.
            "org--tiny/x",
            "org/ti--ny",
            // A bare name is a path, never a Hub id.
            "bert-base-uncased",
            "missing.npy",
        ] {
            assert!(!looks_like_id(bad), "{bad}");
        }
        assert!(valid_revision("main") && valid_revision("refs/pr/1") && valid_revision("v1.0"));
        assert!(!valid_revision("../x") && !valid_revision("a//b") && !valid_revision("/x"));
    }
}
