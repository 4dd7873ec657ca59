//! The allocator, as memory accounting sees it, and giving freed memory
//! back to the system. The allocator is the system's (glibc's malloc: it
//! held the least RSS per key of glibc, mimalloc and jemalloc, see
//! docs/benchmarks.md), which keeps freed small blocks in its heaps for
//! reuse; after a FLUSHALL, on `MEMORY PURGE`, and when the server's cron
//! sees much freed or the resident set well above the heap in use
//! (`server::memory::should_trim`), the free pages are handed back, so RSS
//! falls with what was deleted.

/// The bytes glibc's malloc takes for a request of `request` bytes: the
/// request and its 8-byte chunk header, rounded up to 16, at least 32 (the
/// smallest chunk); nothing for nothing (an empty `Vec` or `Bytes`
/// allocates no block). Requests glibc serves by `mmap` (from 128 KiB up)
/// are rounded to pages instead; at those sizes the difference is under
/// 4%, and this rounding is kept.
pub const fn chunk(request: usize) -> usize {
    const HEADER: usize = 8;
    const ALIGN: usize = 16;
    const MIN_CHUNK: usize = 32;
    if request == 0 {
        return 0;
    }
    let rounded = (request + HEADER + ALIGN - 1) & !(ALIGN - 1);
    if rounded < MIN_CHUNK {
        MIN_CHUNK
    } else {
        rounded
    }
}

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

#[cfg(test)]
mod tests {
    use super::chunk;

    #[test]
    fn chunks_are_glibc_sized() {
        assert_eq!(chunk(0), 0);
        assert_eq!(chunk(1), 32);
        assert_eq!(chunk(16), 32);
        assert_eq!(chunk(24), 32);
        assert_eq!(chunk(25), 48);
        assert_eq!(chunk(66), 80);
        assert_eq!(chunk(72), 80);
        assert_eq!(chunk(101), 112);
    }
}
