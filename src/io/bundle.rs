//! Where `certify` finds the bundled all-MiniLM-L6-v2 weights when no model
//! is given.
//!
//! Search order (the first directory holding `config.json` and
//! `model.safetensors` wins):
//!
//! 1. the directory named by the environment variable `SPECBOUND_BUNDLE`
//!    (when set and not empty it is the only place looked at: a wrong value
//!    is an error, never silently replaced by another copy);
//! 2. `data/all-MiniLM-L6-v2` under the current directory (a checkout);
//! 3. `share/specbound/all-MiniLM-L6-v2` beside the executable's directory
//!    (`~/.cargo/share/specbound/...` for `~/.cargo/bin/specbound`, the usual
//!    `PREFIX/bin` + `PREFIX/share` layout);
//! 4. `data/all-MiniLM-L6-v2` in the source tree the binary was built from
//!    (gone once the tree is deleted after `cargo install`).

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

/// The environment variable naming the bundle directory.
pub const ENV: &str = "SPECBOUND_BUNDLE";

/// The bundled model's directory name.
pub const NAME: &str = "all-MiniLM-L6-v2";

/// The bundle was not found.
#[derive(Debug)]
pub enum BundleError {
    /// `SPECBOUND_BUNDLE` is set to something that is not a bundle.
    BadEnv {
        /// Its value.
        value: PathBuf,
    },
    /// None of the places searched holds the bundle.
    NotFound {
        /// Every place looked at, in order.
        looked: Vec<PathBuf>,
    },
}

impl fmt::Display for BundleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadEnv { value } => write!(
                f,
                "{ENV}={}: not a directory holding config.json and model.safetensors \
                 (unset it to search the default places, or pass MODEL)",
                value.display()
            ),
            Self::NotFound { looked } => {
                let list: Vec<String> = looked.iter().map(|p| p.display().to_string()).collect();
                write!(
                    f,
                    "no MODEL given and the bundled {NAME} weights were not found (looked in {}); \
                     pass MODEL, or set {ENV} to the directory holding the bundle's \
                     config.json and model.safetensors",
                    list.join(", ")
                )
            }
        }
    }
}

impl std::error::Error for BundleError {}

/// True when `dir` holds the two files of a bundle.
fn is_bundle(dir: &Path) -> bool {
    dir.join("config.json").is_file() && dir.join("model.safetensors").is_file()
}

/// Searches the places of the module documentation for this process.
pub fn locate() -> Result<PathBuf, BundleError> {
    search(
        std::env::var_os(ENV),
        Path::new(""),
        std::env::current_exe().ok().as_deref(),
        Path::new(env!("CARGO_MANIFEST_DIR")),
    )
}

/// The search itself: `env` is the variable's value, `cwd` the directory
/// `data/` is looked for in (empty: the current one), `exe` the executable,
/// `source_tree` the directory the binary was built from.
pub(crate) fn search(
    env: Option<OsString>,
    cwd: &Path,
    exe: Option<&Path>,
    source_tree: &Path,
) -> Result<PathBuf, BundleError> {
    if let Some(v) = env.filter(|v| !v.is_empty()) {
        let value = PathBuf::from(v);
        return if is_bundle(&value) {
            Ok(value)
        } else {
            Err(BundleError::BadEnv { value })
        };
    }
    let mut looked = vec![cwd.join("data").join(NAME)];
    if let Some(prefix) = exe.and_then(Path::parent).and_then(Path::parent) {
        looked.push(prefix.join("share/specbound").join(NAME));
    }
    looked.push(source_tree.join("data").join(NAME));
    match looked.iter().find(|p| is_bundle(p)) {
        Some(p) => Ok(p.clone()),
        None => Err(BundleError::NotFound { looked }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_found_names_every_place_and_the_variable() {
        let gone = std::env::temp_dir().join(format!("specbound-no-tree-{}", std::process::id()));
        let e = search(None, &gone, Some(Path::new("/opt/x/bin/specbound")), &gone).unwrap_err();
        let msg = e.to_string();
        for needle in [
            "/opt/x/share/specbound/all-MiniLM-L6-v2",
            &gone.join("data").join(NAME).display().to_string(),
            "SPECBOUND_BUNDLE",
            "pass MODEL",
        ] {
            assert!(msg.contains(needle), "'{needle}' not in: {msg}");
        }
        assert_eq!(msg.lines().count(), 1);
    }

    #[test]
    fn an_empty_variable_counts_as_unset() {
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        let found = search(Some(OsString::new()), Path::new(""), None, here).unwrap();
        assert!(found.ends_with(Path::new("data").join(NAME)));
    }

    #[test]
    fn a_wrong_variable_is_an_error_not_a_fallback() {
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        let e = search(Some("/nonexistent/bundle".into()), here, None, here).unwrap_err();
        assert!(matches!(e, BundleError::BadEnv { .. }), "{e}");
        assert!(e
            .to_string()
            .contains("SPECBOUND_BUNDLE=/nonexistent/bundle"));
    }
}
