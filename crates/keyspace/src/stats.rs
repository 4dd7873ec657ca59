//! Counters of changes logged, by kind, and of bytes deltas saved. Each
//! partition keeps its own, updated under its lock with plain adds (an
//! atomic add per change costs a locked instruction on the write path);
//! `/metrics` and `INFO` read their sum ([`crate::Keyspace::stats`]).

/// Kinds of change counted ([`crate::change::ChangeKind::NAMES`]).
pub const KINDS: usize = crate::change::ChangeKind::NAMES.len();

#[derive(Clone, Debug, Default)]
pub struct ChangeStats {
    count: [u64; KINDS],
    bytes: [u64; KINDS],
    delta_saved: u64,
}

impl ChangeStats {
    pub fn record(&mut self, kind: usize, bytes: usize, saved: usize) {
        self.count[kind] += 1;
        self.bytes[kind] += bytes as u64;
        self.delta_saved += saved as u64;
    }

    /// Adds another partition's counters to these.
    pub fn add(&mut self, other: &ChangeStats) {
        for k in 0..KINDS {
            self.count[k] += other.count[k];
            self.bytes[k] += other.bytes[k];
        }
        self.delta_saved += other.delta_saved;
    }

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
