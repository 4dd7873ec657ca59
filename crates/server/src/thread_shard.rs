//! A small number per thread, for state kept in per-thread shards so that
//! threads running commands do not write each other's cache lines (command
//! stats, the EXEC gate, the allocation count).

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

static NEXT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    // Const-initialised and without a destructor, so usable inside the
    // global allocator: reading it never allocates and it is never torn
    // down.
    static NUMBER: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// This thread's shard among `shards` (threads are numbered as they first
/// ask, then wrap around).
pub fn thread_shard(shards: usize) -> usize {
    let n = NUMBER
        .try_with(|n| {
            if n.get() == usize::MAX {
                n.set(NEXT.fetch_add(1, Ordering::Relaxed));
            }
            n.get()
        })
        .unwrap_or(0);
    n % shards
}
