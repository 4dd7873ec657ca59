//! A small number per thread, for state kept in per-thread shards so that
//! threads running commands do not write each other's cache lines (command
//! stats, the EXEC gate, the allocation count).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

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
    number().unwrap_or(0) % shards
}

/// This thread's own shard among `shards`, if it has one: each of the
/// first `shards` threads to ask owns one that no other thread ever gets
/// (numbers are not reused), so a counter in it has a single writer and
/// can be updated with a plain load and store ([`add_owned`]) instead of a
/// locked read-modify-write. Later threads get None and share shards.
pub fn own_shard(shards: usize) -> Option<usize> {
    number().filter(|&n| n < shards)
}

/// Adds to a counter only this thread writes (see [`own_shard`]): readers
/// on other threads see the old or the new value, never a torn one.
pub fn add_owned(counter: &AtomicU64, v: u64) {
    counter.store(counter.load(Ordering::Relaxed).wrapping_add(v), Ordering::Relaxed);
}

fn number() -> Option<usize> {
    NUMBER
        .try_with(|n| {
            if n.get() == usize::MAX {
                n.set(NEXT.fetch_add(1, Ordering::Relaxed));
            }
            n.get()
        })
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owned_shard_is_never_given_to_another_thread() {
        let mine = own_shard(usize::MAX).expect("every thread owns one among usize::MAX");
        let others: Vec<Option<usize>> =
            (0..8).map(|_| std::thread::spawn(|| own_shard(usize::MAX)).join().unwrap()).collect();
        assert!(others.iter().all(|o| o.is_some_and(|n| n != mine)), "{mine} {others:?}");
        let mut seen: Vec<usize> = others.into_iter().flatten().collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 8, "no two threads share a number");
        // Past the first `shards` threads, none owns one.
        assert_eq!(std::thread::spawn(|| own_shard(1)).join().unwrap(), None);
    }
}
