//! The node's keyspace: partitions behind their own locks, the HLC, change
//! counters, and the one write path.
//!
//! A command locks the partitions of its keys (in index order, so multi-key
//! commands cannot deadlock) by opening a [`Txn`], reads through it (expired
//! keys are removed lazily, as a logged `Expire` change) and writes through
//! [`Txn::write`]. When the `Txn` is dropped the locks are released first and
//! then the observer (client tracking) hears which keys changed. A
//! std-style blocking mutex is right here: critical sections are short and
//! never await.
//!
//! The parts, a file each below `keyspace/`: the write path ([`Txn`], in
//! `txn`, and the change a write makes, in `plan`), the mirror path for
//! changes made elsewhere (`mirror`), which partitions are held as a
//! backup and the batches a backup received (`replica_role`), who hears
//! about changes and how a change is logged (`observers`), where the logs
//! may let changes go (`log_marks`), active expiry (`expiry`), prefetching
//! partition headers (`prefetch`), backup copies (`backup_copy`) and
//! changes from other sites (`remote`). This file holds the [`Keyspace`]
//! itself: its construction, configuration and keyspace-wide queries.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::change::{Change, ChangeKind};
use crate::clock::Clock;
use crate::partition::Partition;
use crate::partition_bits::PartitionBits;
use crate::received::{Counts, Received};
use crate::slot;
use crate::stats::ChangeStats;
use crate::version::{Hlc, Version};

mod backup_copy;
mod evict;
mod expiry;
mod log_marks;
mod mirror;
mod observers;
mod plan;
mod prefetch;
mod recovery;
mod remote;
#[cfg(test)]
mod replay_tests;
mod replica_role;
mod txn;

pub use backup_copy::PartitionCopy;
pub use evict::Policy;
pub use mirror::ReplicaError;
pub use observers::{
    last_written, take_written, ChangeObserver, LogListener, Persist, ReplicationSink,
};
pub use plan::{Write, WriteError};
pub use prefetch::prefetch_line;
pub use recovery::{CopyForDisk, RecoveryError};
pub use remote::RemoteOutcome;
pub use txn::Txn;

#[derive(Clone, Debug)]
pub struct KeyspaceConfig {
    /// 1..=16384 contiguous slot ranges.
    pub partitions: u16,
    pub site_id: u16,
    /// Bytes of partition log kept per node when no consumer needs more.
    pub log_retain_bytes: usize,
    /// Bytes of tombstones (removed keys and hash fields, for resolving
    /// changes from other sites) kept per node; 0 keeps none.
    pub tombstone_bytes: usize,
    /// Bytes of key names remembered per node for incremental backups
    /// (keys changed since the last one); 0 makes every backup full.
    pub changed_keys_bytes: usize,
}

impl Default for KeyspaceConfig {
    fn default() -> Self {
        KeyspaceConfig {
            partitions: 271,
            site_id: 1,
            log_retain_bytes: 16 << 20,
            tombstone_bytes: 0,
            changed_keys_bytes: 64 << 20,
        }
    }
}

/// A partition behind its lock, starting on a cache line of its own so
/// that the lock and the header's first fields share one line.
#[repr(align(64))]
struct Slot(Mutex<Partition>);

impl std::ops::Deref for Slot {
    type Target = Mutex<Partition>;

    fn deref(&self) -> &Mutex<Partition> {
        &self.0
    }
}

/// Where a partition's log may let changes go, moved without its lock
/// (see [`Keyspace::advance_log_needed_from`] and
/// [`Keyspace::release_log_before`]).
#[derive(Debug, Default)]
struct LogMarks {
    /// The lowest seq a consumer needs (0: no consumer); the log catches
    /// up whenever the partition is locked to log a change or read its log.
    needed: AtomicU64,
    /// The seq before which every remote site applied the changes (0: not
    /// known), caught up the same way.
    released: AtomicU64,
}

pub struct Keyspace {
    parts: Box<[Slot]>,
    partitions: u16,
    site: u16,
    hlc: Hlc,
    observer: OnceLock<Arc<dyn ChangeObserver>>,
    sink: OnceLock<Arc<dyn ReplicationSink>>,
    listener: OnceLock<Arc<dyn LogListener>>,
    persist: OnceLock<Arc<dyn Persist>>,
    expire_cursor: AtomicUsize,
    /// Where [`Keyspace::trim_idle_logs`] goes on from.
    log_trim_cursor: AtomicUsize,
    /// Partitions holding keys with a time to live.
    expiring: Arc<PartitionBits>,
    /// Bytes of all partition logs (each log keeps it in step).
    log_bytes: Arc<AtomicUsize>,
    /// Per partition, where its log may let changes go, read together by
    /// every logged change (one line; at 16,384 partitions two arrays were
    /// two cache misses per write).
    log_marks: Box<[LogMarks]>,
    /// The replication batches this node received as a backup, which its
    /// copies' logs stand for (they store nothing themselves).
    received: Mutex<Received>,
    /// The bytes `received` holds, read without its lock.
    received_bytes: Arc<Counts>,
    /// Moves whenever some partition's released seq grew (see `Received::trim`).
    release_generation: AtomicU64,
    holds_received: bool,
    /// Keyspace notifications are on: writes leave [`crate::notices`].
    notices: std::sync::atomic::AtomicBool,
    encodings: crate::encodings::Encodings,
    evictor: evict::Evictor,
}

impl Keyspace {
    pub fn new(cfg: KeyspaceConfig, clock: Arc<dyn Clock>) -> Self {
        let partitions = cfg.partitions.clamp(1, slot::SLOTS);
        let per_part = cfg.log_retain_bytes / partitions as usize;
        let tomb_per_part = match cfg.tombstone_bytes {
            0 => 0,
            n => (n / partitions as usize).max(1),
        };
        let changed_per_part = cfg.changed_keys_bytes / partitions as usize;
        let log_bytes = Arc::new(AtomicUsize::new(0));
        let expiring = Arc::new(PartitionBits::new(partitions as usize));
        let received = Received::new(partitions as usize, cfg.log_retain_bytes);
        Keyspace {
            parts: (0..partitions)
                .map(|p| {
                    let mut part = Partition::new(p, per_part)
                        .with_tombstones(tomb_per_part)
                        .with_changed_keys(changed_per_part);
                    part.log.count_in(log_bytes.clone());
                    part.count_expiring_in(expiring.clone());
                    Slot(Mutex::new(part))
                })
                .collect(),
            log_bytes,
            log_marks: (0..partitions).map(|_| LogMarks::default()).collect(),
            received_bytes: received.counts(),
            release_generation: AtomicU64::new(0),
            holds_received: received.enabled(),
            received: Mutex::new(received),
            partitions,
            site: cfg.site_id,
            hlc: Hlc::new(clock),
            observer: OnceLock::new(),
            sink: OnceLock::new(),
            listener: OnceLock::new(),
            persist: OnceLock::new(),
            expire_cursor: AtomicUsize::new(0),
            log_trim_cursor: AtomicUsize::new(0),
            expiring,
            notices: Default::default(),
            encodings: Default::default(),
            evictor: Default::default(),
        }
    }

    /// The small-encoding thresholds (CONFIG SET hash-max-listpack-*).
    pub fn encodings(&self) -> &crate::encodings::Encodings {
        &self.encodings
    }

    /// Switches [`crate::notices`] on or off (`notify-keyspace-events`).
    pub fn set_notices(&self, on: bool) {
        self.notices.store(on, Ordering::Relaxed);
    }

    pub fn partitions(&self) -> u16 {
        self.partitions
    }

    pub fn site(&self) -> u16 {
        self.site
    }

    pub fn partition_of(&self, key: &[u8]) -> usize {
        slot::slot_partition(slot::key_slot(key), self.partitions) as usize
    }

    pub fn now_ms(&self) -> u64 {
        self.hlc.clock().now_ms()
    }

    pub fn hlc(&self) -> &Hlc {
        &self.hlc
    }

    /// Changes logged so far, summed over the partitions (each one locked
    /// in turn).
    pub fn stats(&self) -> ChangeStats {
        let mut total = ChangeStats::default();
        for p in self.parts.iter() {
            total.add(&p.lock().stats);
        }
        total
    }

    /// Read-only access to one partition, with the current time.
    pub fn with_partition<R>(&self, p: usize, f: impl FnOnce(&Partition, u64) -> R) -> R {
        let now = self.now_ms();
        let mut part = self.parts[p].lock();
        if self.catch_up_log(&mut part) {
            part.log.trim();
        }
        f(&part, now)
    }

    #[cfg(test)]
    pub(crate) fn with_partition_mut<R>(&self, p: usize, f: impl FnOnce(&mut Partition) -> R) -> R {
        f(&mut self.parts[p].lock())
    }

    /// Keys held (expired ones not yet removed included, like Redis's DBSIZE).
    pub fn len(&self) -> usize {
        self.parts.iter().map(|p| p.lock().len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn expires_len(&self) -> usize {
        self.parts.iter().map(|p| p.lock().expires_len()).sum()
    }

    /// Estimated bytes held by keys and values.
    pub fn footprint(&self) -> usize {
        self.parts.iter().map(|p| p.lock().footprint()).sum()
    }

    /// Bytes held by partition logs (a running total: no partition is
    /// locked, so WAN publishers may ask often).
    pub fn log_bytes(&self) -> usize {
        self.log_bytes.load(Ordering::Relaxed) + self.received_bytes.total()
    }

    /// Removes every key, logging a Delete for each.
    pub fn flush(&self, origin: u64) {
        for part in self.parts.iter() {
            let mut part = part.lock();
            if part.replica {
                // A backup's copy changes only with its primary's changes.
                continue;
            }
            for key in part.drain_keys() {
                let change = Change {
                    key,
                    version: self.version(),
                    kind: ChangeKind::Delete,
                };
                part.tombstones.deleted(&change.key, change.version);
                self.record(&mut part, &change, 0);
            }
        }
        if let Some(o) = self.observer.get() {
            o.flushed(origin);
        }
        crate::memory::purge();
    }

    fn version(&self) -> Version {
        Version {
            hlc: self.hlc.tick(),
            site: self.site,
        }
    }
}
