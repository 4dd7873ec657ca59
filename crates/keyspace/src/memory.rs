//! Giving freed memory back to the system. The allocator is the system's
//! (glibc's malloc: it held the least RSS per key of glibc, mimalloc and
//! jemalloc, see docs/benchmarks.md), which keeps freed small blocks in
//! its heaps for reuse; after a FLUSHALL, or on `MEMORY PURGE`, the free
//! pages are handed back, so RSS falls with what was deleted.

/// Returns the allocator's free memory to the system (glibc's
/// `malloc_trim`); nothing elsewhere.
pub fn purge() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; it
    // takes the allocator's locks like any allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}
