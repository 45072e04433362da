//! Process set-up of the binary: the allocator and its parameters, and the
//! signal disposition a Unix tool wants. Nothing here changes a result.

/// The system allocator, with transparent huge pages asked for on every
/// allocation of at least [`HUGE_MIN`] bytes (`madvise(MADV_HUGEPAGE)`
/// before first touch): the matrices of an LLM layer are gigabytes, and
/// faulting them in 4 KiB pages costs several percent of a run's CPU time
/// (`benches/scale.sh`). Only advice: where the kernel has no huge pages
/// to give, or THP is off, nothing changes.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub struct HugePageAlloc;

/// One huge page: a block of 2 MiB or more can hold a whole aligned one.
/// The 4096 x 128 factors of a LLaMA-7B head (4 MiB) and the products
/// formed from them are mapped afresh for each head (the 1 MiB mmap
/// threshold of [`init`]); with 8 MiB here they were faulted in 4 KiB
/// pages: `certify` of the `benches/scale.sh` layer took 260 thousand
/// minor faults at one thread and a million at two, against 187 and 589
/// thousand with 2 MiB, at the same peak RSS.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const HUGE_MIN: usize = 2 << 20;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
// SAFETY: every call is forwarded to the system allocator unchanged; the
// added madvise only advises on pages of the block just returned.
unsafe impl std::alloc::GlobalAlloc for HugePageAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { std::alloc::System.alloc(layout) };
        advise_huge(p, layout.size());
        p
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { std::alloc::System.alloc_zeroed(layout) };
        advise_huge(p, layout.size());
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's arguments.
        let p = unsafe { std::alloc::System.realloc(ptr, layout, new) };
        advise_huge(p, new);
        p
    }
}

/// `madvise(MADV_HUGEPAGE)` on the whole 2 MiB-aligned pages inside
/// `[p, p + size)`, for blocks of at least [`HUGE_MIN`] bytes.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn advise_huge(p: *mut u8, size: usize) {
    const HUGE: usize = 2 << 20;
    if p.is_null() || size < HUGE_MIN {
        return;
    }
    let start = (p as usize).div_ceil(HUGE) * HUGE;
    let end = (p as usize + size) / HUGE * HUGE;
    if end > start {
        // SAFETY: the range lies inside the block just allocated; the
        // advice changes no contents and its failure is harmless.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[global_allocator]
static ALLOC: HugePageAlloc = HugePageAlloc;

/// Before any thread starts: the default SIGPIPE disposition and a fixed
/// mmap threshold.
pub fn init() {
    // Die quietly on a closed pipe (`specbound ... | head`), like other Unix tools,
    // instead of panicking in println!.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // A fixed mmap threshold: every allocation of 1 MiB or more (the matrices
    // and their working sets) is its own mapping and goes back to the system
    // when freed. glibc's default raises the threshold after each large free,
    // so that later matrices of up to 32 MiB come from the heap and stay
    // resident, fragmented, after their layer: peak memory then grows with
    // the number of layers (docs/certify.md, "Memory"; tests/memory.rs).
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes an allocator parameter, before any thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}
