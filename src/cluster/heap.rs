//! What the process asks of glibc's allocator, so that a list of the whole cluster leaves no
//! memory behind: the crate's only `unsafe` code (`unsafe_code` is denied everywhere else),
//! two FFI calls with no pointers to uphold. Elsewhere (musl, other systems) both do nothing.

/// Serves every allocation of 128 KiB or more with its own mapping, returned to the kernel
/// when freed, for the life of the process. glibc starts with that threshold but raises it to
/// the size of each large block freed, up to 32 MiB: the hash tables a list of 150,000 Pods
/// grows through (1 to 4 MiB each, freed as they double) then land in the arenas, where the
/// smaller allocations around them keep their pages (BENCHMARKS.md, "autopath", has what the
/// pod index costs with it). Called once at start-up, before the runtime's threads exist.
#[allow(unsafe_code)]
pub fn fix_mmap_threshold() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt takes two integers and changes only the allocator's settings; called
    // before other threads allocate.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// Hands the heap pages a completed list freed back to the kernel. A list of 150,000 Pods
/// decodes every object; glibc keeps those freed pages in its arenas, which was 15 MB of
/// steady RSS that the zone does not use. Once per list, so the cost (a walk of the arenas)
/// does not matter.
#[allow(unsafe_code)]
pub fn release_freed_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases memory glibc's allocator holds free; it takes no
    // pointers and is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}
