//! Memory maps of input files, guarded against the file changing under
//! them.
//!
//! A mapped file that another process truncates faults on the next access
//! to a page past the new end: the kernel sends `SIGBUS`, which would kill
//! the process (exit 135) with no word of which file. Two guards, neither
//! on the per-element path:
//!
//! 1. [`MapGuard::check_len`], called before each tensor is read from a
//!    map (one `fstat`, about a microsecond per tensor): a file now shorter
//!    than its map is an ordinary [`ReadError`] naming it (exit 2 from the
//!    binary, an exception from Python).
//! 2. A `SIGBUS` handler, installed when the first map is registered, for a
//!    truncation that lands while a tensor (or the hash of the file) is
//!    being read: it looks up the faulting address among the registered
//!    maps, writes the one-line message prepared for that file when it was
//!    mapped, and ends the process with exit status 2 (`_exit`, so nothing
//!    half-written is renamed into place: outputs are written to a
//!    temporary file and renamed only when complete). A fault outside
//!    every registered map is passed on to the handler that was there
//!    before (by default, the usual `SIGBUS` death).
//!
//! Reading files into memory instead of mapping them would avoid the
//! signal entirely but costs a copy of every byte and twice the resident
//! memory of the largest file; a lock cannot help (Linux has no mandatory
//! locks). The handler does only async-signal-safe work: atomic loads, a
//! `write(2)` and `_exit(2)`.

use std::cell::UnsafeCell;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use memmap2::Mmap;

use super::ReadError;

/// Registered maps at once (a 70B model has about 30 shards; beyond this
/// a map is still read, guarded by [`MapGuard::check_len`] only).
const SLOTS: usize = 256;
/// Longest message kept per map (longer ones are cut, ending in a newline).
const MSG: usize = 1024;

const FREE: u8 = 0;
const BUSY: u8 = 1;
const LIVE: u8 = 2;

struct Slot {
    state: AtomicU8,
    start: AtomicUsize,
    len: AtomicUsize,
    msg_len: AtomicUsize,
    msg: UnsafeCell<[u8; MSG]>,
}

struct Table([Slot; SLOTS]);

// SAFETY: a slot's message is written only by the thread that moved its
// state from FREE to BUSY, and read (by the signal handler) only while the
// state is LIVE; the state is published with release/acquire ordering.
unsafe impl Sync for Table {}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    state: AtomicU8::new(FREE),
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    msg_len: AtomicUsize::new(0),
    msg: UnsafeCell::new([0; MSG]),
};

static TABLE: Table = Table([EMPTY; SLOTS]);

/// The `SIGBUS` action before ours, restored for faults that are not ours.
struct Previous(UnsafeCell<std::mem::MaybeUninit<libc::sigaction>>);
// SAFETY: written once, inside `INSTALL`, before the handler can run.
unsafe impl Sync for Previous {}
static PREVIOUS: Previous = Previous(UnsafeCell::new(std::mem::MaybeUninit::uninit()));
static INSTALL: std::sync::Once = std::sync::Once::new();

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    for slot in &TABLE.0 {
        if slot.state.load(Ordering::Acquire) != LIVE {
            continue;
        }
        let start = slot.start.load(Ordering::Relaxed);
        let len = slot.len.load(Ordering::Relaxed);
        if addr >= start && addr - start < len {
            let n = slot.msg_len.load(Ordering::Relaxed).min(MSG);
            // SAFETY: the slot is LIVE, so its message is complete and not
            // being written; write(2) and _exit(2) are async-signal-safe.
            unsafe {
                let p = slot.msg.get().cast::<u8>();
                libc::write(2, p.cast(), n);
                libc::_exit(2);
            }
        }
    }
    // Not one of our maps: put the previous action back and return, so the
    // faulting access runs again under it.
    // SAFETY: PREVIOUS was filled before this handler was installed.
    unsafe {
        libc::sigaction(sig, (*PREVIOUS.0.get()).as_ptr(), std::ptr::null_mut());
    }
}

fn install() {
    INSTALL.call_once(|| {
        // SAFETY: a plain sigaction call with a zeroed, then filled struct;
        // PREVIOUS receives the old action before any SIGBUS can reach us.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_sigbus as *const () as usize;
            act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(libc::SIGBUS, &act, (*PREVIOUS.0.get()).as_mut_ptr());
        }
    });
}

/// What a mapped file's reader holds besides the map: the open file (to
/// check its length again) and its slot in the `SIGBUS` table.
pub(crate) struct MapGuard {
    file: File,
    path: PathBuf,
    len: u64,
    slot: Option<usize>,
}

impl Drop for MapGuard {
    fn drop(&mut self) {
        if let Some(k) = self.slot {
            TABLE.0[k].state.store(FREE, Ordering::Release);
        }
    }
}

/// The error for a file that changed while mapped.
fn changed(path: &Path, now: Option<u64>, mapped: u64) -> ReadError {
    let what = match now {
        Some(n) => format!("shrank from {mapped} to {n} bytes"),
        None => "was truncated".to_string(),
    };
    ReadError::format(
        path,
        None,
        format!(
            "the file {what} while specbound was reading it (it changed under the reader): \
             make sure nothing writes the model's files during a run, then run again"
        ),
    )
}

/// Maps `file` (opened from `path` by [`super::limits::open_regular`]) read-only
/// and registers the map with the `SIGBUS` handler.
pub(crate) fn map(file: &File, path: &Path) -> Result<(Mmap, MapGuard), ReadError> {
    // SAFETY: the map is only ever read. A file truncated while mapped
    // faults on access; the guard turns that into a message and exit 2
    // (module documentation).
    let mmap = unsafe { Mmap::map(file) }.map_err(|e| ReadError::io(path, e))?;
    let file = file.try_clone().map_err(|e| ReadError::io(path, e))?;
    let mut guard = MapGuard {
        file,
        path: path.to_path_buf(),
        len: mmap.len() as u64,
        slot: None,
    };
    if !mmap.is_empty() {
        install();
        guard.slot = register(mmap.as_ptr() as usize, mmap.len(), path);
    }
    Ok((mmap, guard))
}

fn register(start: usize, len: usize, path: &Path) -> Option<usize> {
    let mut msg = changed(path, None, len as u64).to_string().into_bytes();
    if msg.len() >= MSG {
        msg.truncate(MSG - 1);
    }
    msg.push(b'\n');
    for (k, slot) in TABLE.0.iter().enumerate() {
        if slot
            .state
            .compare_exchange(FREE, BUSY, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            // SAFETY: this thread owns the slot (BUSY) until it stores LIVE.
            unsafe {
                std::ptr::copy_nonoverlapping(msg.as_ptr(), slot.msg.get().cast::<u8>(), msg.len());
            }
            slot.msg_len.store(msg.len(), Ordering::Relaxed);
            slot.start.store(start, Ordering::Relaxed);
            slot.len.store(len, Ordering::Relaxed);
            slot.state.store(LIVE, Ordering::Release);
            return Some(k);
        }
    }
    None
}

impl MapGuard {
    /// Refuses a file now shorter than its map (it was truncated since it
    /// was mapped): one `fstat`, called before each tensor is read.
    pub(crate) fn check_len(&self) -> Result<(), ReadError> {
        let now = self
            .file
            .metadata()
            .map_err(|e| ReadError::io(&self.path, e))?
            .len();
        if now < self.len {
            return Err(changed(&self.path, Some(now), self.len));
        }
        Ok(())
    }
}
