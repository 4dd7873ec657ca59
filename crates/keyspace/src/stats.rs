//! Counters of changes logged, by kind, and of bytes deltas saved. Updated
//! on the write path with relaxed atomics; read by `/metrics` and `INFO`.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct ChangeStats {
    count: [AtomicU64; 4],
    bytes: [AtomicU64; 4],
    delta_saved: AtomicU64,
}

impl ChangeStats {
    pub fn record(&self, kind: usize, bytes: usize, saved: usize) {
        self.count[kind].fetch_add(1, Ordering::Relaxed);
        self.bytes[kind].fetch_add(bytes as u64, Ordering::Relaxed);
        if saved > 0 {
            self.delta_saved.fetch_add(saved as u64, Ordering::Relaxed);
        }
    }

    pub fn count(&self, kind: usize) -> u64 {
        self.count[kind].load(Ordering::Relaxed)
    }

    pub fn bytes(&self, kind: usize) -> u64 {
        self.bytes[kind].load(Ordering::Relaxed)
    }

    pub fn delta_bytes_saved(&self) -> u64 {
        self.delta_saved.load(Ordering::Relaxed)
    }
}
