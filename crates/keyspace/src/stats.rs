//! Counters of changes logged, by kind, and of bytes deltas saved, for
//! `/metrics` and `INFO` ([`crate::Keyspace::stats`]).
//!
//! They are kept per node in [`ChangeCounters`], one shard per thread
//! (relaxed atomic adds on a line the thread keeps in its cache), not in the
//! partitions: at 16,384 partitions a partition's counters were one more
//! line a write missed in cache, at both the primary and its backup.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// A sum of [`ChangeCounters`] at one moment.
#[derive(Clone, Debug, Default)]
pub struct ChangeStats {
    count: [u64; 4],
    bytes: [u64; 4],
    delta_saved: u64,
}

impl ChangeStats {
    pub fn count(&self, kind: usize) -> u64 {
        self.count[kind]
    }

    pub fn bytes(&self, kind: usize) -> u64 {
        self.bytes[kind]
    }

    pub fn delta_bytes_saved(&self) -> u64 {
        self.delta_saved
    }
}

const SHARDS: usize = 16;

#[derive(Default)]
#[repr(align(128))]
struct Shard {
    count: [AtomicU64; 4],
    bytes: [AtomicU64; 4],
    delta_saved: AtomicU64,
}

/// The counters of one node, sharded by thread.
pub(crate) struct ChangeCounters {
    shards: Box<[Shard]>,
}

impl Default for ChangeCounters {
    fn default() -> Self {
        ChangeCounters { shards: (0..SHARDS).map(|_| Shard::default()).collect() }
    }
}

fn thread_shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    SHARD
        .try_with(|s| {
            if s.get() == usize::MAX {
                s.set(NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS);
            }
            s.get()
        })
        .unwrap_or(0)
}

impl ChangeCounters {
    pub(crate) fn record(&self, kind: usize, bytes: usize, saved: usize) {
        let s = &self.shards[thread_shard()];
        s.count[kind].fetch_add(1, Ordering::Relaxed);
        s.bytes[kind].fetch_add(bytes as u64, Ordering::Relaxed);
        if saved > 0 {
            s.delta_saved.fetch_add(saved as u64, Ordering::Relaxed);
        }
    }

    pub(crate) fn total(&self) -> ChangeStats {
        let mut t = ChangeStats::default();
        for s in self.shards.iter() {
            for k in 0..4 {
                t.count[k] += s.count[k].load(Ordering::Relaxed);
                t.bytes[k] += s.bytes[k].load(Ordering::Relaxed);
            }
            t.delta_saved += s.delta_saved.load(Ordering::Relaxed);
        }
        t
    }
}
