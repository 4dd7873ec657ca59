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

/// Where this thread adds in a set of `2 * shards` counters. Each of the
/// first `shards` threads to ask owns one of the first `shards` that no
/// other thread ever gets (numbers are not reused), so a counter there has
/// a single writer and is updated with a plain load and store instead of a
/// locked read-modify-write; later threads share the next `shards`.
#[derive(Clone, Copy)]
pub struct CounterShard {
    /// Index of the shard in the set.
    pub index: usize,
    owned: bool,
}

impl CounterShard {
    pub fn of_this_thread(shards: usize) -> Self {
        match number() {
            Some(n) if n < shards => CounterShard {
                index: n,
                owned: true,
            },
            n => CounterShard {
                index: shards + n.unwrap_or(0) % shards,
                owned: false,
            },
        }
    }

    /// Adds `v` (wrapping) to a counter of this shard: a plain load and
    /// store when the shard is this thread's alone (readers on other threads
    /// see the old or the new value, never a torn one), a locked add when
    /// it is shared.
    pub fn add(self, counter: &AtomicU64, v: u64) {
        if self.owned {
            counter.store(
                counter.load(Ordering::Relaxed).wrapping_add(v),
                Ordering::Relaxed,
            );
        } else {
            counter.fetch_add(v, Ordering::Relaxed);
        }
    }
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
        let own = |shards| {
            let s = CounterShard::of_this_thread(shards);
            s.owned.then_some(s.index)
        };
        let mine = own(usize::MAX / 2).expect("every thread owns one among usize::MAX / 2");
        let others: Vec<Option<usize>> = (0..8)
            .map(|_| {
                std::thread::spawn(move || own(usize::MAX / 2))
                    .join()
                    .unwrap()
            })
            .collect();
        assert!(
            others.iter().all(|o| o.is_some_and(|n| n != mine)),
            "{mine} {others:?}"
        );
        let mut seen: Vec<usize> = others.into_iter().flatten().collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 8, "no two threads share a number");
        // Past the first `shards` threads, none owns one.
        assert_eq!(std::thread::spawn(move || own(1)).join().unwrap(), None);
    }
}
