//! All-or-nothing output of a run: every file a command produces is staged
//! first and put in place only when all of it is ready.
//!
//! [`Outputs::commit`] works in three phases:
//!
//! 1. **check** every target, touching nothing: the directory a file goes into
//!    exists or is one this commit creates ([`Outputs::create_dir`]); the target
//!    is absent, a regular file, or a symbolic link that resolves to a regular
//!    file. Anything else (a directory, a FIFO, a device such as `/dev/full`, a
//!    socket, a link to one of those, a dangling link) is refused, and so is the
//!    same target staged twice. Outputs of the one run that cannot coexist are
//!    refused here too, before anything is written ([`OutputError::Conflict`]):
//!    a file that is also a directory of the run (created with
//!    [`Outputs::create_dir`], or the directory of another staged file), or a
//!    file inside another staged file (`certify --out X --csv X`). A
//!    directory of the run nested in another (`DIR/figures` in `DIR`) that is
//!    a symbolic link out of its parent is refused
//!    ([`OutputError::LinkLeaves`]); a link that stays inside is followed;
//! 2. **write** every file to a temporary file in its target's directory and
//!    `fsync` it. Temporary files are created with create-new semantics
//!    (`O_CREAT | O_EXCL`, plus `O_NOFOLLOW`), so a name planted in advance,
//!    a symbolic link included, is never opened: the create fails and a fresh
//!    random name is tried. Names are `.<target>.<16 hex digits>.tmp` with 64
//!    bits from the operating system's random source, so they cannot be
//!    predicted;
//! 3. **rename** every temporary file over its target, in the order staged;
//!    the directories of all but the last are `fsync`ed before the last
//!    rename, and its own directory after it (best effort: some file systems
//!    refuse to sync a directory).
//!
//! An error in phase 1 or 2 (a missing directory, a full disk, a directory
//! without write permission) removes every temporary file and every directory
//! this commit created: nothing new is left and no existing file has changed.
//!
//! What cannot be atomic: POSIX has no rename of several files at once. Each
//! rename is atomic (a reader sees the old file or the complete new one, never
//! a truncated one), but a crash or `SIGKILL` *between* two renames of phase 3
//! leaves the targets renamed so far new and the others old. Callers therefore
//! stage the file whose presence should imply the others **last** (`certify`
//! stages the certificate after the tables): it is renamed only once the
//! earlier renames are on disk, so a new last file implies new earlier ones,
//! power loss included (where the file system honours a directory `fsync`).
//! A crash during phase 2 leaves `.<target>.<hex>.tmp` files behind (no code
//! runs after a crash to remove them); they are never mistaken for outputs
//! and can be deleted. A rename that fails in phase 3 (the target changed
//! under us) stops the commit: the remaining temporary files are removed and
//! the error lists what was already replaced. The checks of phase 1 are not a lock: another process changing a
//! target between the check and the rename can still make the rename replace
//! it, but a rename only ever replaces a *name*; no byte is ever written into
//! a device, a FIFO or a file a link points to by surprise.
//!
//! Replacing an existing file keeps its permission bits (owner and group
//! become those of the running user; other hard links to the old file keep
//! the old contents). A new file gets `0666` minus the umask, like any file a
//! shell redirection creates. A symbolic link naming a regular file is written
//! *through*: the file it resolves to is replaced (atomically, in its own
//! directory) and the link is kept, **except** at a derived name, a file
//! staged directly in a directory of the run (`DIR/report.html`,
//! `DIR/tables/*.csv`, `CSV_DIR/*.csv`): there the program chose the name, not
//! the user, so a link planted at it is replaced itself (the rename replaces
//! the link; the file it pointed to is untouched). Nothing here ever deletes
//! through a link.

use std::ffi::OsString;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// Attempts at a fresh temporary name before giving up (each collision means
/// that a file with 64 random bits in its name already exists).
const NAME_TRIES: usize = 16;

/// The files of one run, staged in memory until [`Outputs::commit`].
#[derive(Default)]
pub struct Outputs {
    dirs: Vec<PathBuf>,
    files: Vec<(PathBuf, Vec<u8>)>,
}

/// Why a commit failed. Every variant names the path as given; the I/O
/// cause, where there is one, is the [`std::error::Error::source`] (not
/// repeated in the message).
#[derive(Debug)]
pub enum OutputError {
    /// The target exists and is not a regular file (or a link to one).
    NotRegular {
        /// The target as given.
        path: PathBuf,
        /// What it is, e.g. "a FIFO" or "a symbolic link to a character device".
        what: String,
    },
    /// The path cannot name a file (empty, `..`, or ends with `/`).
    NotAFilePath {
        /// The path as given.
        path: PathBuf,
    },
    /// The directory a file goes into does not exist and is not created here.
    MissingDirectory {
        /// The target as given.
        path: PathBuf,
        /// Its directory.
        dir: PathBuf,
    },
    /// A directory to create (or the parent of a file) exists as a non-directory.
    NotADirectory {
        /// The path that should be a directory.
        path: PathBuf,
    },
    /// Two staged files resolve to the same target.
    Duplicate {
        /// The second one, as given.
        path: PathBuf,
    },
    /// Two outputs of this run cannot both exist: a file that is also a
    /// directory of the run, or a file inside another file of the run.
    Conflict {
        /// The file, as given.
        path: PathBuf,
        /// The directory or file it collides with, as given.
        other: PathBuf,
    },
    /// A directory of derived names inside a directory of the run (e.g.
    /// `DIR/figures`) is a symbolic link that leaves the directory it is in.
    LinkLeaves {
        /// The link, as given.
        path: PathBuf,
        /// Where it resolves to.
        to: PathBuf,
    },
    /// An operating-system call failed before anything was replaced.
    Io {
        /// The path it concerned.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// The cause.
        source: io::Error,
    },
    /// A rename of phase 3 failed after `replaced` were already in place.
    Partial {
        /// The target whose rename failed.
        path: PathBuf,
        /// Targets already replaced by new files.
        replaced: Vec<PathBuf>,
        /// The cause.
        source: io::Error,
    },
}

impl fmt::Display for OutputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotRegular { path, what } => write!(
                f,
                "{}: is {what}, not a regular file; refusing to replace it",
                crate::io::shown_path(path)
            ),
            Self::NotAFilePath { path } => {
                write!(f, "{}: does not name a file", crate::io::shown_path(path))
            }
            Self::MissingDirectory { path, dir } => write!(
                f,
                "{}: cannot write: directory {} does not exist",
                crate::io::shown_path(path),
                crate::io::shown_path(dir)
            ),
            Self::NotADirectory { path } => {
                write!(
                    f,
                    "{}: exists and is not a directory",
                    crate::io::shown_path(path)
                )
            }
            Self::Duplicate { path } => write!(
                f,
                "{}: the same file is written twice by this run",
                crate::io::shown_path(path)
            ),
            Self::Conflict { path, other } => write!(
                f,
                "{}: this run writes it as a file and needs {} as a directory or file too; \
                 give the outputs different paths",
                crate::io::shown_path(path),
                crate::io::shown_path(other)
            ),
            Self::LinkLeaves { path, to } => write!(
                f,
                "{}: is a symbolic link to {}, outside the directory it is in; refusing to write \
                 through it (remove the link)",
                crate::io::shown_path(path),
                crate::io::shown_path(to)
            ),
            Self::Io { path, action, .. } => write!(f, "{}: {action}", crate::io::shown_path(path)),
            Self::Partial { path, replaced, .. } => {
                write!(
                    f,
                    "{}: cannot rename into place",
                    crate::io::shown_path(path)
                )?;
                if replaced.is_empty() {
                    Ok(())
                } else {
                    let list: Vec<String> =
                        replaced.iter().map(|p| p.display().to_string()).collect();
                    write!(f, " (already replaced: {})", list.join(", "))
                }
            }
        }
    }
}

impl std::error::Error for OutputError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io { source, .. } | Self::Partial { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// One checked target.
struct Plan {
    /// As given (for messages).
    shown: PathBuf,
    /// The path renamed over: `shown`, or the file a symbolic link resolves to.
    target: PathBuf,
    /// The directory of `target`, where the temporary file goes.
    dir: PathBuf,
    /// Permission bits of the file replaced, if any.
    mode: Option<u32>,
}

impl Outputs {
    /// Nothing staged.
    pub fn new() -> Self {
        Self::default()
    }

    /// Creates `dir` (and missing ancestors) at commit time if absent; on a
    /// failed commit every directory created is removed again.
    pub fn create_dir(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.dirs.push(dir.into());
        self
    }

    /// Stages `bytes` for `path`. Renames happen in staging order: stage the
    /// file whose presence should imply the others last.
    pub fn stage(&mut self, path: impl Into<PathBuf>, bytes: impl Into<Vec<u8>>) -> &mut Self {
        self.files.push((path.into(), bytes.into()));
        self
    }

    /// Runs the checks of [`Outputs::commit`] (phase 1) without writing
    /// anything, so that a run can refuse a bad target before spending
    /// minutes on the computation. `commit` checks again.
    pub fn check(&self) -> Result<(), OutputError> {
        let to_create = check_dirs(&self.dirs)?;
        let plans = check_files(&self.files, &self.dirs, &to_create)?;
        check_conflicts(&plans, &self.dirs)
    }

    /// Checks every target, writes every temporary file, then renames all
    /// (see the module documentation for what is and is not atomic). Takes
    /// the staged entries; `Ok` means every file is in place.
    pub fn commit(&mut self) -> Result<(), OutputError> {
        let dirs = std::mem::take(&mut self.dirs);
        let files = std::mem::take(&mut self.files);
        let to_create = check_dirs(&dirs)?;
        let plans = check_files(&files, &dirs, &to_create)?;
        check_conflicts(&plans, &dirs)?;
        write_and_rename(&files, &plans, &to_create)
    }
}

/// Phases 2 and 3 of [`Outputs::commit`].
fn write_and_rename(
    files: &[(PathBuf, Vec<u8>)],
    plans: &[Plan],
    to_create: &[PathBuf],
) -> Result<(), OutputError> {
    let mut guard = Cleanup::default();
    for d in to_create {
        match std::fs::create_dir(d) {
            Ok(()) => guard.dirs.push(d.clone()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && d.is_dir() => {}
            Err(source) => {
                return Err(OutputError::Io {
                    path: d.clone(),
                    action: "cannot create the directory",
                    source,
                })
            }
        }
    }
    for ((_, bytes), plan) in files.iter().zip(plans) {
        let (tmp, mut file) = create_temp(&plan.dir, &plan.target, plan.mode, &mut random_u64)
            .map_err(|source| OutputError::Io {
                path: plan.shown.clone(),
                action: "cannot create a temporary file beside it",
                source,
            })?;
        guard.temps.push(Some(tmp));
        write_all_synced(&mut file, bytes, plan.mode).map_err(|source| OutputError::Io {
            path: plan.shown.clone(),
            action: "cannot write",
            source,
        })?;
    }
    let mut replaced = Vec::new();
    for (i, plan) in plans.iter().enumerate() {
        if i + 1 == plans.len() && i > 0 {
            // The renames before the last one reach the disk first, so that a
            // new last file (the certificate) implies new earlier ones even
            // after a power loss.
            sync_dirs(
                plans[..i]
                    .iter()
                    .map(|p| p.dir.as_path())
                    .chain(to_create.iter().map(|d| parent_dir(d))),
            );
        }
        let tmp = guard.temps[i].as_ref().expect("created above");
        if let Err(source) = std::fs::rename(tmp, &plan.target) {
            if replaced.is_empty() {
                return Err(OutputError::Io {
                    path: plan.shown.clone(),
                    action: "cannot rename into place",
                    source,
                });
            }
            // Directories created here now hold new files: keep them.
            guard.dirs.clear();
            return Err(OutputError::Partial {
                path: plan.shown.clone(),
                replaced,
                source,
            });
        }
        guard.temps[i] = None;
        replaced.push(plan.shown.clone());
    }
    guard.dirs.clear();
    sync_dirs(
        plans
            .iter()
            .rev()
            .take(1)
            .map(|p| p.dir.as_path())
            .chain(to_create.iter().map(|d| parent_dir(d))),
    );
    Ok(())
}

/// `fsync`s each distinct directory once, so that renames and new entries in
/// it are durable. Best effort: some file systems refuse to sync a directory,
/// and the files themselves are already synced.
fn sync_dirs<'a>(dirs: impl Iterator<Item = &'a Path>) {
    let mut done: Vec<&Path> = Vec::new();
    for d in dirs {
        if !done.contains(&d) {
            if let Ok(f) = File::open(d) {
                let _ = f.sync_all();
            }
            done.push(d);
        }
    }
}

/// Removes temporary files and created directories unless disarmed (runs on
/// every early return, panics included).
#[derive(Default)]
struct Cleanup {
    temps: Vec<Option<PathBuf>>,
    dirs: Vec<PathBuf>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for t in self.temps.iter().flatten() {
            let _ = std::fs::remove_file(t);
        }
        // Deepest first; remove_dir never removes a non-empty directory.
        for d in self.dirs.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// The directory of `p` ("." for a bare name).
fn parent_dir(p: &Path) -> &Path {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// The directories to create, outermost first; checks that the nearest
/// existing ancestor of each is a directory.
fn check_dirs(dirs: &[PathBuf]) -> Result<Vec<PathBuf>, OutputError> {
    let mut create = Vec::new();
    for d in dirs {
        check_derived_dir_link(d, dirs)?;
        let mut missing = Vec::new();
        let mut cur = d.as_path();
        loop {
            match std::fs::metadata(cur) {
                Ok(m) if m.is_dir() => break,
                Ok(_) => {
                    return Err(OutputError::NotADirectory {
                        path: cur.to_path_buf(),
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    missing.push(cur.to_path_buf());
                    match cur.parent() {
                        Some(p) if !p.as_os_str().is_empty() => cur = p,
                        _ => break,
                    }
                }
                Err(source) => {
                    return Err(OutputError::Io {
                        path: cur.to_path_buf(),
                        action: "cannot inspect the directory",
                        source,
                    })
                }
            }
        }
        for m in missing.into_iter().rev() {
            if !create.contains(&m) {
                create.push(m);
            }
        }
    }
    Ok(create)
}

/// `p` made absolute without requiring it to exist: the longest existing
/// ancestor resolved (links, `.`, `..`), the rest appended lexically.
fn absolute(p: &Path) -> PathBuf {
    if let Ok(c) = std::fs::canonicalize(p) {
        return c;
    }
    let mut rest = Vec::new();
    let mut cur = p;
    loop {
        match cur.file_name() {
            Some(n) => rest.push(n.to_os_string()),
            None => {
                // `..` or `.` at the end of a missing path: resolve lexically below.
                if let Some(c) = cur.components().next_back() {
                    rest.push(c.as_os_str().to_os_string());
                }
            }
        }
        match cur.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => {
                if let Ok(c) = std::fs::canonicalize(parent) {
                    let mut out = c;
                    for n in rest.iter().rev() {
                        match n.to_str() {
                            Some(".") => {}
                            Some("..") => {
                                out.pop();
                            }
                            _ => out.push(n),
                        }
                    }
                    return out;
                }
                cur = parent;
            }
            _ => {
                let mut out = std::env::current_dir().unwrap_or_default();
                for n in rest.iter().rev() {
                    match n.to_str() {
                        Some(".") => {}
                        Some("..") => {
                            out.pop();
                        }
                        _ => out.push(n),
                    }
                }
                return out;
            }
        }
    }
}

/// Whether `d` is a directory of derived names inside another directory of
/// the run (its parent is staged with [`Outputs::create_dir`] too, as
/// `DIR/figures` is in `DIR`).
fn nested_in_run(d: &Path, dirs: &[PathBuf]) -> bool {
    let parent = parent_dir(d);
    dirs.iter().any(|o| o.as_path() == parent)
}

/// A directory of derived names inside a directory of the run must not be
/// a symbolic link out of it: writes (and the removal of stale files)
/// would land elsewhere. A link within it is followed.
fn check_derived_dir_link(d: &Path, dirs: &[PathBuf]) -> Result<(), OutputError> {
    if !nested_in_run(d, dirs) {
        return Ok(());
    }
    let Ok(m) = std::fs::symlink_metadata(d) else {
        return Ok(());
    };
    if !m.file_type().is_symlink() {
        return Ok(());
    }
    let inside = absolute(parent_dir(d));
    match std::fs::canonicalize(d) {
        Ok(to) if to.starts_with(&inside) && to != inside => Ok(()),
        Ok(to) => Err(OutputError::LinkLeaves {
            path: d.to_path_buf(),
            to,
        }),
        Err(_) => Err(OutputError::NotRegular {
            path: d.to_path_buf(),
            what: "a symbolic link that does not resolve".into(),
        }),
    }
}

/// Outputs of one run that cannot coexist, found before anything is
/// written: a file that is also a directory of the run (staged with
/// [`Outputs::create_dir`] or the directory of another file), or a file
/// inside another file of the run. (The same file twice is
/// [`OutputError::Duplicate`], found by `check_files`.)
fn check_conflicts(plans: &[Plan], dirs: &[PathBuf]) -> Result<(), OutputError> {
    let dirs_abs: Vec<(PathBuf, &Path)> = dirs
        .iter()
        .map(|d| (absolute(d), d.as_path()))
        .chain(plans.iter().map(|q| (absolute(&q.dir), q.shown.as_path())))
        .collect();
    for p in plans {
        let target = absolute(&p.target);
        if let Some((_, shown)) = dirs_abs.iter().find(|(d, _)| d.starts_with(&target)) {
            return Err(OutputError::Conflict {
                path: p.shown.clone(),
                other: shown.to_path_buf(),
            });
        }
    }
    Ok(())
}

/// "a FIFO", "a directory", ... for a file type that is not a regular file.
fn describe(ft: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "a FIFO";
        }
        if ft.is_char_device() {
            return "a character device";
        }
        if ft.is_block_device() {
            return "a block device";
        }
        if ft.is_socket() {
            return "a socket";
        }
    }
    if ft.is_dir() {
        "a directory"
    } else if ft.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

#[cfg(unix)]
fn mode_of(m: &std::fs::Metadata) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    Some(m.permissions().mode() & 0o777)
}

#[cfg(not(unix))]
fn mode_of(_: &std::fs::Metadata) -> Option<u32> {
    None
}

/// One [`Plan`] per file to write, every check made before anything is
/// written: a file path (not a directory's), in a directory that exists
/// or is to be created, a regular file or nothing (or a link to a regular
/// file), and no two paths naming the same target.
fn check_files(
    files: &[(PathBuf, Vec<u8>)],
    dirs: &[PathBuf],
    to_create: &[PathBuf],
) -> Result<Vec<Plan>, OutputError> {
    let mut plans: Vec<Plan> = Vec::new();
    for (path, _) in files {
        let text = path.as_os_str().to_string_lossy();
        let Some(name) = path.file_name() else {
            return Err(OutputError::NotAFilePath { path: path.clone() });
        };
        if text.ends_with('/') || text.ends_with("/.") {
            return Err(OutputError::NotAFilePath { path: path.clone() });
        }
        let dir = parent_dir(path);
        let planned = to_create.iter().chain(dirs).any(|d| d == dir);
        let dir_abs = directory_of(path, dir, planned)?;
        let in_run_dir = dirs.iter().any(|d| d.as_path() == dir);
        let plan = plan_for(path, dir_abs.join(name), dir_abs, in_run_dir)?;
        if plans.iter().any(|p| p.target == plan.target) {
            return Err(OutputError::Duplicate { path: path.clone() });
        }
        plans.push(plan);
    }
    Ok(plans)
}

/// The absolute directory `dir` of `path`: an existing directory, or one
/// not yet there that the run creates (`planned`).
fn directory_of(path: &Path, dir: &Path, planned: bool) -> Result<PathBuf, OutputError> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => std::fs::canonicalize(dir).map_err(|source| OutputError::Io {
            path: dir.to_path_buf(),
            action: "cannot resolve the directory",
            source,
        }),
        Ok(_) => Err(OutputError::NotADirectory {
            path: dir.to_path_buf(),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound && planned => Ok(absolute(dir)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(OutputError::MissingDirectory {
            path: path.to_path_buf(),
            dir: dir.to_path_buf(),
        }),
        Err(source) => Err(OutputError::Io {
            path: path.to_path_buf(),
            action: "cannot inspect its directory",
            source,
        }),
    }
}

/// The plan for `path` (at `target` in `dir_abs`) by what is there now:
/// nothing, a regular file, or a symbolic link (replaced itself in a
/// directory of the run, else written through to the regular file it
/// resolves to); anything else is refused.
fn plan_for(
    path: &Path,
    target: PathBuf,
    dir_abs: PathBuf,
    in_run_dir: bool,
) -> Result<Plan, OutputError> {
    let here = |mode| Plan {
        shown: path.to_path_buf(),
        target,
        dir: dir_abs,
        mode,
    };
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(here(None)),
        Err(source) => Err(OutputError::Io {
            path: path.to_path_buf(),
            action: "cannot inspect the file",
            source,
        }),
        Ok(m) if m.file_type().is_file() => Ok(here(mode_of(&m))),
        // A derived name in a directory of the run (`DIR/report.html`,
        // `CSV_DIR/tables.csv`): a link planted there is replaced
        // itself, never written through.
        Ok(m) if m.file_type().is_symlink() && in_run_dir => Ok(here(None)),
        Ok(m) if m.file_type().is_symlink() => through_link(path),
        Ok(m) => Err(OutputError::NotRegular {
            path: path.to_path_buf(),
            what: describe(&m.file_type()).to_string(),
        }),
    }
}

/// The plan for a symbolic link given as an output: written through to
/// the regular file it resolves to, refused if it resolves to nothing or
/// to something else.
fn through_link(path: &Path) -> Result<Plan, OutputError> {
    let resolved = std::fs::metadata(path).ok().filter(|r| r.is_file());
    match (resolved, std::fs::canonicalize(path)) {
        (Some(r), Ok(target)) => Ok(Plan {
            shown: path.to_path_buf(),
            dir: parent_dir(&target).to_path_buf(),
            target,
            mode: mode_of(&r),
        }),
        _ => {
            let what = match std::fs::metadata(path) {
                Ok(r) => format!("a symbolic link to {}", describe(&r.file_type())),
                Err(_) => "a symbolic link that does not resolve".to_string(),
            };
            Err(OutputError::NotRegular {
                path: path.to_path_buf(),
                what,
            })
        }
    }
}

/// 64 bits from the operating system's random source.
fn random_u64() -> io::Result<u64> {
    let mut b = [0u8; 8];
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        // SAFETY: `b` is a valid writable buffer of 8 bytes.
        let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
        if n == b.len() as isize {
            return Ok(u64::from_ne_bytes(b));
        }
    }
    File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(u64::from_ne_bytes(b))
}

/// `.<name>.<16 hex>.tmp`, the name cut to 64 bytes so the result stays
/// well within NAME_MAX.
fn temp_name(target: &Path, r: u64) -> OsString {
    let name = target.file_name().unwrap_or_default();
    #[cfg(unix)]
    let short = {
        use std::os::unix::ffi::OsStrExt;
        let b = name.as_bytes();
        std::ffi::OsStr::from_bytes(&b[..b.len().min(64)]).to_os_string()
    };
    #[cfg(not(unix))]
    let short = OsString::from(name.to_string_lossy().chars().take(64).collect::<String>());
    let mut s = OsString::from(".");
    s.push(short);
    s.push(format!(".{r:016x}.tmp"));
    s
}

/// Creates a new temporary file in `dir` for `target`, never opening an
/// existing path (`O_EXCL`, `O_NOFOLLOW`): on a collision it draws a new name
/// from `next`, up to [`NAME_TRIES`] times.
fn create_temp(
    dir: &Path,
    target: &Path,
    mode: Option<u32>,
    next: &mut dyn FnMut() -> io::Result<u64>,
) -> io::Result<(PathBuf, File)> {
    let mut last = None;
    for _ in 0..NAME_TRIES {
        let tmp = dir.join(temp_name(target, next()?));
        let mut o = OpenOptions::new();
        o.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            // A replaced file's mode is set exactly after the write; until
            // then the temporary is private.
            o.mode(if mode.is_some() { 0o600 } else { 0o666 })
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
        }
        #[cfg(not(unix))]
        let _ = mode;
        match o.open(&tmp) {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no temporary name available")))
}

fn write_all_synced(f: &mut File, bytes: &[u8], mode: Option<u32>) -> io::Result<()> {
    f.write_all(bytes)?;
    #[cfg(unix)]
    if let Some(m) = mode {
        use std::os::unix::fs::PermissionsExt;
        f.set_permissions(std::fs::Permissions::from_mode(m))?;
    }
    #[cfg(not(unix))]
    let _ = mode;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("specbound-output-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn listing(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[cfg(unix)]
    #[test]
    fn planted_symlink_at_temporary_name_is_not_followed_and_a_new_name_is_drawn() {
        let d = tmpdir("planted");
        let victim = d.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let target = d.join("x.json");
        let planted = d.join(temp_name(&target, 1));
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        let mut seq = [1u64, 2].into_iter();
        let (tmp, mut f) = create_temp(&d, &target, None, &mut || Ok(seq.next().unwrap())).unwrap();
        assert_eq!(tmp, d.join(temp_name(&target, 2)));
        f.write_all(b"new").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert!(std::fs::symlink_metadata(&planted)
            .unwrap()
            .file_type()
            .is_symlink());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn every_temporary_name_taken_is_an_error_and_creates_nothing() {
        let d = tmpdir("taken");
        let target = d.join("x.json");
        let planted = d.join(temp_name(&target, 7));
        std::os::unix::fs::symlink("/dev/null", &planted).unwrap();
        let before = listing(&d);
        let err = create_temp(&d, &target, None, &mut || Ok(7)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(listing(&d), before);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn temporary_names_are_distinct_and_hidden() {
        let a = temp_name(Path::new("d/x.json"), random_u64().unwrap());
        let b = temp_name(Path::new("d/x.json"), random_u64().unwrap());
        assert_ne!(a, b);
        let a = a.to_string_lossy();
        assert!(a.starts_with(".x.json.") && a.ends_with(".tmp"), "{a}");
        let long = "y".repeat(250);
        assert!(temp_name(Path::new(&long), 0).len() <= 64 + 22);
    }

    #[test]
    fn failed_commit_removes_created_directories_and_temporaries() {
        let d = tmpdir("rollback");
        let csv = d.join("a/b");
        let err = Outputs::new()
            .create_dir(&csv)
            .stage(csv.join("t.csv"), "x")
            .stage(d.join("missing/x.json"), "y")
            .commit()
            .unwrap_err();
        assert!(matches!(err, OutputError::MissingDirectory { .. }), "{err}");
        assert!(listing(&d).is_empty());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn commit_writes_everything_and_leaves_no_temporary() {
        let d = tmpdir("ok");
        let csv = d.join("t");
        Outputs::new()
            .create_dir(&csv)
            .stage(csv.join("a.csv"), "a")
            .stage(d.join("x.json"), "x")
            .commit()
            .unwrap();
        assert_eq!(listing(&d), ["t", "x.json"]);
        assert_eq!(listing(&csv), ["a.csv"]);
        assert_eq!(std::fs::read(csv.join("a.csv")).unwrap(), b"a");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn same_target_twice_is_refused() {
        let d = tmpdir("dup");
        let err = Outputs::new()
            .stage(d.join("x"), "1")
            .stage(d.join(".").join("x"), "2")
            .commit()
            .unwrap_err();
        assert!(matches!(err, OutputError::Duplicate { .. }), "{err}");
        assert!(listing(&d).is_empty());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
