//! A small number per thread, for state kept in per-thread shards so that
//! threads running commands do not write each other's cache lines.

use std::sync::atomic::{AtomicUsize, Ordering};

/// This thread's shard among `shards` (threads are numbered as they first
/// ask, then wrap around).
pub fn thread_shard(shards: usize) -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static NUMBER: usize = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    NUMBER.with(|n| *n % shards)
}
