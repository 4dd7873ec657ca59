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

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use parking_lot::{Mutex, MutexGuard};
use smallvec::SmallVec;

use crate::apply::{apply_change, apply_change_at, apply_owned_at, ApplyError};
use crate::change::{Change, ChangeKind, DeltaOp};
use crate::clock::Clock;
use crate::delta::{self, StringOpError};
use crate::notices::{self, Notice, Noticed};
use crate::partition::{Partition, ReplicaSource};
use crate::partition_bits::PartitionBits;
use crate::received::{Counts, HeldChanges, HeldRun, Pinned, Received};
use crate::slot;
use crate::stats::ChangeStats;
use crate::value::{Entry, Value};
use crate::version::{Hlc, Version};

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
    /// Tombstones this much older than the newest one are dropped.
    pub tombstone_ttl_ms: u64,
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
            tombstone_ttl_ms: 3_600_000,
            changed_keys_bytes: 64 << 20,
        }
    }
}

/// Hears about every change, from any source, after locks are released.
pub trait ChangeObserver: Send + Sync {
    /// False when nobody listens, so the write path collects nothing.
    fn active(&self) -> bool;
    /// `origin` is the client id that caused the changes (0: the node itself).
    fn changed(&self, keys: &[Bytes], origin: u64);
    /// Every key is gone (FLUSHALL).
    fn flushed(&self, origin: u64);
}

/// Hears every change a primary logs, in seq order per partition, while the
/// partition is still locked (replication to backups).
pub trait ReplicationSink: Send + Sync {
    /// `encoded`: the change as [`codec::encode`](crate::codec::encode)
    /// writes it, when the log holds it (None: the log keeps nothing).
    fn logged(&self, partition: usize, seq: u64, change: &Change, encoded: Option<&[u8]>);
    /// A backup to storage named `id` now holds the partition up to `seq`
    /// (its copies anchor their changed-keys sets there too).
    fn backup_taken(&self, _partition: usize, _seq: u64, _id: &str) {}
}

/// Hears that a partition's log grew (WAN publishers), while the partition
/// is locked: it must only take note, never lock or block.
pub trait LogListener: Send + Sync {
    fn appended(&self, partition: usize, change: &Change);
}

thread_local! {
    /// (partition, seq) of the changes this thread logged since the last
    /// [`take_written`]; how a connection learns what it must wait for.
    static WRITTEN: std::cell::RefCell<SmallVec<[(usize, u64); 4]>> = std::cell::RefCell::new(SmallVec::new());
}

/// The (partition, seq) of every change this thread logged since the last
/// call, in order. A command runs on one thread from start to end, so a
/// connection calls this around the commands it runs.
pub fn take_written() -> SmallVec<[(usize, u64); 4]> {
    WRITTEN.with(|w| std::mem::take(&mut *w.borrow_mut()))
}

/// The (partition, seq) of the last change this thread logged since the
/// last [`take_written`], left in place (WAIT asks what its connection
/// wrote last).
pub fn last_written() -> Option<(usize, u64)> {
    WRITTEN.with(|w| w.borrow().last().copied())
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReplicaError {
    #[error("change seq {got} after {have}: the copy missed changes and needs a snapshot")]
    Gap { have: u64, got: u64 },
    /// The copy holds seq `got` (and up to `have`) from another node than
    /// the one now sending it: a history its primary does not share.
    #[error("change seq {got} already held (up to {have}) from another node: the copy diverged and needs a snapshot")]
    Diverged { have: u64, got: u64 },
    /// This node is not a backup of the partition (any more): a primary
    /// that lost its role is fenced here.
    #[error("not a backup of this partition")]
    NotReplica,
    #[error(transparent)]
    Apply(#[from] ApplyError),
}

/// What a command wants to do to one key; [`Txn::write`] makes it a Change.
#[derive(Debug)]
pub enum Write {
    /// Replace the whole value; a similar old string makes this a delta.
    Set {
        value: Value,
        expire_at: u64,
    },
    /// A string operation (Splice, Patch, IncrBy) on the current string;
    /// on a missing key it applies to "" (or 0 for IncrBy).
    Str(DeltaOp),
    HashSet(Vec<(Bytes, Bytes)>),
    HashDel(Vec<Bytes>),
    /// Set or clear (0) the expiry of an existing key.
    SetExpiry(u64),
    Delete,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    #[error("WRONGTYPE Operation against a key holding the wrong kind of value")]
    WrongType,
    #[error(transparent)]
    StringOp(#[from] StringOpError),
}

impl From<ApplyError> for WriteError {
    fn from(e: ApplyError) -> Self {
        match e {
            ApplyError::StringOp(e) => WriteError::StringOp(e),
            // A base mismatch cannot happen locally: the delta was made from
            // the entry under the same lock. Report it as a type error
            // rather than panic.
            ApplyError::WrongType | ApplyError::BaseMismatch { .. } | ApplyError::NotPrimary => {
                WriteError::WrongType
            }
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

/// Partition headers taking more than this are prefetched (see
/// [`Keyspace::prefetch`]); below it they stay in a core's L2.
const PREFETCH_ABOVE: usize = 1 << 20;
/// The header lines a command reads first (see [`Partition`]'s layout).
const PREFETCH_LINES: usize = 4;

/// Asks the CPU to load the line holding `at` (a hint: it never faults).
#[inline]
pub fn prefetch_line<T>(at: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint; it reads nothing the program sees
    // and does not fault, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
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
    expire_cursor: AtomicUsize,
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
                        .with_tombstones(tomb_per_part, cfg.tombstone_ttl_ms)
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
            expire_cursor: AtomicUsize::new(0),
            expiring,
            notices: Default::default(),
            encodings: Default::default(),
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

    /// Installs the observer; only the first call has an effect.
    pub fn set_observer(&self, observer: Arc<dyn ChangeObserver>) {
        let _ = self.observer.set(observer);
    }

    /// Installs the replication sink; only the first call has an effect.
    pub fn set_sink(&self, sink: Arc<dyn ReplicationSink>) {
        let _ = self.sink.set(sink);
    }

    /// Installs the log listener; only the first call has an effect.
    pub fn set_listener(&self, listener: Arc<dyn LogListener>) {
        let _ = self.listener.set(listener);
    }

    /// Tells partition `p`'s log the lowest seq a consumer (WAN) still
    /// needs, None when nobody does; see [`crate::PartitionLog::set_needed_from`].
    pub fn set_log_needed_from(&self, p: usize, seq: Option<u64>) {
        if let Some(part) = self.parts.get(p) {
            let mut part = part.lock();
            self.log_marks[p]
                .needed
                .store(seq.unwrap_or(0), Ordering::SeqCst);
            part.log.set_needed_from(seq);
        }
    }

    /// Moves partition `p`'s lowest needed seq forward to what `low`
    /// computes, without locking the partition (an acknowledgement must not
    /// cost a cold lock per partition it covers): its log trims the next
    /// time the partition is locked to log a change or read the log. Never
    /// registers a consumer nor moves back; that takes
    /// [`Keyspace::set_log_needed_from`]. `low` is computed after the current
    /// value is read, so a lower value stored meanwhile by that locked call
    /// makes the exchange fail and `low` is computed again, never overwritten.
    pub fn advance_log_needed_from(&self, p: usize, low: impl Fn() -> Option<u64>) {
        let Some(cell) = self.log_marks.get(p).map(|m| &m.needed) else {
            return;
        };
        let mut current = cell.load(Ordering::SeqCst);
        loop {
            match low() {
                Some(seq) if current != 0 && seq > current => {
                    match cell.compare_exchange(current, seq, Ordering::SeqCst, Ordering::SeqCst) {
                        Ok(_) => return,
                        Err(now) => current = now,
                    }
                }
                _ => return,
            }
        }
    }

    /// Every remote site applied partition `p`'s changes before `seq` (a
    /// backup hears it from the primary): the held batches holding only
    /// such changes go (see [`crate::received`]), and a promoted copy's
    /// log lets them go when the partition is next locked to log a change
    /// or read its log (a marker per partition ten times a second must not
    /// cost a cold lock each); see [`crate::PartitionLog::release_before`].
    pub fn release_log_before(&self, p: usize, seq: u64) {
        if let Some(cell) = self.log_marks.get(p).map(|m| &m.released) {
            if cell.fetch_max(seq, Ordering::Relaxed) < seq {
                self.release_generation.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Brings a locked partition's log up to [`Keyspace::advance_log_needed_from`]
    /// and [`Keyspace::release_log_before`]; true when the first lets
    /// changes go (trimmed by the caller's append or trim).
    fn catch_up_log(&self, part: &mut Partition) -> bool {
        let p = part.id as usize;
        let marks = &self.log_marks[p];
        let released = marks.released.load(Ordering::Relaxed);
        if released != 0 {
            part.log.release_before(released);
        }
        let needed = marks.needed.load(Ordering::Relaxed);
        needed != 0 && part.log.advance_needed_from(needed)
    }

    /// Marks partitions this node holds as a backup: they change only by
    /// [`Keyspace::apply_replicated`], never expire keys on their own (a
    /// read sees an expired key as missing but leaves it for the primary's
    /// Expire change), so their logs stay identical to the primary's.
    ///
    /// A copy turning into a backup hands what its log holds to the
    /// received batches; a backup promoted gets its log back from them
    /// (see [`crate::received`]), as far as they reach.
    pub fn set_replica(&self, partition: usize, replica: bool) {
        self.set_replica_with(partition, replica, None);
    }

    /// [`Keyspace::set_replica`] for many partitions: the received batches
    /// are read once for all the copies promoted (not once per copy).
    pub fn set_replicas(&self, changes: &[(usize, bool)]) {
        let promoted: Vec<usize> = changes
            .iter()
            .filter(|&&(p, replica)| !replica && p < self.parts.len())
            .map(|&(p, _)| p)
            .collect();
        let mut held = match promoted.len() {
            0 | 1 => Default::default(),
            _ => self.received.lock().changes_of(&promoted),
        };
        for &(p, replica) in changes {
            self.set_replica_with(p, replica, held.remove(&p));
        }
    }

    /// `held`: partition `partition`'s received changes, read beforehand
    /// (see [`Keyspace::set_replicas`]).
    fn set_replica_with(&self, partition: usize, replica: bool, held: Option<HeldRun>) {
        let mut part = self.parts[partition].lock();
        let (was, diverged) = (part.replica, part.source == ReplicaSource::Diverged);
        part.replica = replica;
        part.source = ReplicaSource::Unknown;
        if was == replica {
            return;
        }
        let mut received = self.received.lock();
        match (was, replica) {
            (false, true) => {
                received.forget(partition);
                if let Some((payload, held)) = part.log.take_held(partition as u16) {
                    received.hold(
                        payload,
                        HeldChanges::from_vec(held),
                        None,
                        self.release_generation(),
                        |p| self.released(p),
                    );
                }
            }
            (true, false) => {
                if !diverged {
                    let released = self.released(partition);
                    let next = part.log.next_seq();
                    let run = match &held {
                        Some(ahead) => received.run_with(partition, ahead, next),
                        None => received.run(partition, next),
                    };
                    let from = run.partition_point(|&(seq, _)| seq < released);
                    part.log.restore(&run[from..]);
                }
                part.promoted_through = part.log.next_seq().saturating_sub(1);
                received.forget(partition);
            }
            _ => {}
        }
    }

    /// Holds a replication batch this node received as a backup (the
    /// `changes` in `payload`, read into the buffer `pin` counts), before
    /// applying it: a copy promoted meanwhile finds its changes there.
    pub fn hold_received(&self, payload: Bytes, changes: HeldChanges, pin: Option<Arc<Pinned>>) {
        let generation = self.release_generation();
        self.received
            .lock()
            .hold(payload, changes, pin, generation, |p| self.released(p));
    }

    /// What the received batches hold of partitions `parts` is of no use
    /// here any more: a stale primary's changes of a partition this node
    /// leads, or of a copy it no longer holds. Nothing would release them
    /// (no marker comes for them), so they go now rather than keep the
    /// queue's front until the budget trims it.
    pub fn forget_received(&self, parts: &[usize]) {
        if parts.is_empty() || !self.holds_received {
            return;
        }
        let mut received = self.received.lock();
        for &p in parts {
            received.forget(p);
        }
        received.trim(self.release_generation(), |p| self.released(p));
    }

    fn release_generation(&self) -> u64 {
        self.release_generation.load(Ordering::Relaxed)
    }

    /// Whether received batches are held at all (WAN replication keeps a
    /// log; see [`crate::received`]).
    pub fn holds_received(&self) -> bool {
        self.holds_received
    }

    /// The seq before which every remote site applied partition `p`'s
    /// changes (0: not known).
    fn released(&self, p: usize) -> u64 {
        self.log_marks
            .get(p)
            .map_or(0, |m| m.released.load(Ordering::Relaxed))
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

    /// Starts loading the first lines of `key`'s partition header (its
    /// lock, the map and log headers: what a command reads first) into
    /// cache, for a command that runs soon, such as the next one of a
    /// pipeline: with 16,384 partitions the headers (11 MiB) are not in
    /// cache and a write's first miss cost it more than anything else
    /// partition count adds. Nothing when the headers fit in cache anyway.
    /// Returns the partition when it prefetched, for the caller to
    /// prefetch what it keeps per partition too.
    pub fn prefetch(&self, key: &[u8]) -> Option<usize> {
        if !self.prefetching() {
            return None;
        }
        let p = self.partition_of(key);
        self.prefetch_header(p);
        Some(p)
    }

    /// [`Keyspace::prefetch`] by partition number (out of range: nothing),
    /// for a loop over changes of many partitions; true when it prefetched.
    pub fn prefetch_partition(&self, p: usize) -> bool {
        let worth = self.prefetching() && p < self.parts.len();
        if worth {
            self.prefetch_header(p);
        }
        worth
    }

    /// Whether [`Keyspace::prefetch`] does anything here: callers may skip
    /// the work of finding what to prefetch when it does not.
    pub fn prefetching(&self) -> bool {
        self.parts.len() * std::mem::size_of::<Slot>() >= PREFETCH_ABOVE
    }

    fn prefetch_header(&self, p: usize) {
        let at = (&self.parts[p] as *const Slot).cast::<u8>();
        for line in 0..PREFETCH_LINES {
            prefetch_line(at.wrapping_add(line * 64));
        }
        // A write reads them (`catch_up_log`).
        prefetch_line(&self.log_marks[p]);
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

    fn observer(&self) -> Option<&Arc<dyn ChangeObserver>> {
        self.observer.get().filter(|o| o.active())
    }

    /// Opens a transaction over the partitions holding `keys`.
    pub fn txn<'k>(&self, keys: impl IntoIterator<Item = &'k [u8]>, origin: u64) -> Txn<'_> {
        let mut idx: SmallVec<[usize; 2]> =
            keys.into_iter().map(|k| self.partition_of(k)).collect();
        idx.sort_unstable();
        idx.dedup();
        self.txn_partitions(idx, origin)
    }

    /// Opens a transaction over one whole partition.
    pub fn txn_partition(&self, p: usize, origin: u64) -> Txn<'_> {
        self.txn_partitions(smallvec::smallvec![p.min(self.parts.len() - 1)], origin)
    }

    fn txn_partitions(&self, sorted: SmallVec<[usize; 2]>, origin: u64) -> Txn<'_> {
        let guards = sorted
            .into_iter()
            .map(|p| (p, self.parts[p].lock()))
            .collect();
        let notify = self.observer().is_some();
        Txn {
            ks: self,
            guards,
            now: self.now_ms(),
            origin,
            touched: Vec::new(),
            notify,
            found: None,
        }
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
    }

    /// Active expiry: removes up to `max_keys` keys whose time ran out,
    /// visiting partitions round-robin so every one gets its turn. Returns
    /// how many were removed (== max_keys means there may be more).
    pub fn expire_cycle(&self, max_keys: usize) -> usize {
        let start = self.expire_cursor.load(Ordering::Relaxed);
        let now = self.now_ms();
        let mut removed = 0;
        // Only partitions holding keys with a time to live are visited.
        for p in self.expiring.members_from(start) {
            {
                let part = self.parts[p].lock();
                match part.next_expiry() {
                    None => {
                        self.expiring.remove(p);
                        continue;
                    }
                    Some(at) if part.replica || at > now => continue,
                    Some(_) => {}
                }
            }
            let mut txn = self.txn_partition(p, 0);
            if txn.guards[0].1.replica {
                continue;
            }
            let due = txn.guards[0].1.due(txn.now, max_keys - removed);
            for key in due {
                txn.expire_key(0, &key);
                removed += 1;
            }
            if removed >= max_keys {
                self.expire_cursor.store(p, Ordering::Relaxed);
                return removed;
            }
        }
        removed
    }

    /// The mirror of the write path: applies a change made elsewhere (a
    /// primary, a remote site, a backup layer), logs and announces it.
    pub fn apply(&self, change: Change, origin: u64) -> Result<u64, ApplyError> {
        self.hlc.observe(change.version.hlc);
        let key = change.key.clone();
        let seq = {
            let mut part = self.parts[self.partition_of(&key)].lock();
            apply_change(&mut part, &change)?;
            self.record(&mut part, &change, 0)
        };
        if let Some(o) = self.observer() {
            o.changed(&[key], origin);
        }
        Ok(seq)
    }

    /// [`Keyspace::apply`] for many changes of partition `p` under one lock
    /// (a restore's batch). A change of another partition is refused, as
    /// are those after it.
    pub fn apply_batch(
        &self,
        p: usize,
        changes: Vec<Change>,
        origin: u64,
    ) -> Result<(), ApplyError> {
        let mut keys = Vec::with_capacity(if self.observer().is_some() {
            changes.len()
        } else {
            0
        });
        let result = (|| {
            let mut part = self.parts.get(p).ok_or(ApplyError::NotPrimary)?.lock();
            for change in changes {
                if self.partition_of(&change.key) != p {
                    return Err(ApplyError::NotPrimary);
                }
                self.hlc.observe(change.version.hlc);
                apply_change(&mut part, &change)?;
                if keys.capacity() > 0 {
                    keys.push(change.key.clone());
                }
                self.record(&mut part, &change, 0);
            }
            Ok(())
        })();
        if let Some(o) = self.observer().filter(|_| !keys.is_empty()) {
            o.changed(&keys, origin);
        }
        result
    }

    fn version(&self) -> Version {
        Version {
            hlc: self.hlc.tick(),
            site: self.site,
        }
    }

    /// Applies a change a primary (site member `from`) logged at `seq`,
    /// counting it at the same seq in the partition's log (which stores
    /// nothing on a backup: its batch is held, see `hold_received`). A
    /// seq already held is skipped when `from` sent it (a re-sent batch
    /// changes nothing) and is a divergence otherwise (see
    /// [`crate::partition::ReplicaSource`]); a seq past the next one is a
    /// gap.
    /// `encoded` is the change as the primary encoded it (counted in the
    /// partition's change statistics).
    pub fn apply_replicated(
        &self,
        seq: u64,
        change: Change,
        encoded: &[u8],
        from: u16,
    ) -> Result<(), ReplicaError> {
        self.hlc.observe(change.version.hlc);
        let key = change.key.clone();
        {
            let mut part = self.parts[self.partition_of(&key)].lock();
            if !part.replica {
                return Err(ReplicaError::NotReplica);
            }
            let next = part.log.next_seq();
            if part.source == ReplicaSource::Diverged {
                return Err(ReplicaError::Diverged {
                    have: next - 1,
                    got: seq,
                });
            }
            if seq < next {
                if part.source == ReplicaSource::Node(from) {
                    return Ok(());
                }
                part.source = ReplicaSource::Diverged;
                return Err(ReplicaError::Diverged {
                    have: next - 1,
                    got: seq,
                });
            }
            if seq > next {
                // Also on a log that never held anything: a copy that starts
                // after its primary's first changes starts from a snapshot
                // (a process restarted without its data must not take the
                // primary's next change as the start of its copy).
                return Err(ReplicaError::Gap {
                    have: next - 1,
                    got: seq,
                });
            }
            part.source = ReplicaSource::Node(from);
            let kind = change.kind.index();
            apply_owned_at(&mut part, None, change)?;
            // Its batch is held instead (`hold_received`).
            part.log.skip(&key);
            part.stats.record(kind, encoded.len(), 0);
        }
        if let Some(o) = self.observer() {
            o.changed(&[key], 0);
        }
        Ok(())
    }

    /// A backup starts loading a snapshot of partition `p` taken when the
    /// primary's next seq was `next_seq`: its copy is emptied (nothing is
    /// logged: the copy is being replaced, not changed) and its log resumes
    /// at `next_seq`.
    pub fn reset_replica(&self, p: usize, next_seq: u64, from: u16) -> Result<(), ReplicaError> {
        let Some(part) = self.parts.get(p) else {
            return Err(ReplicaError::NotReplica);
        };
        let mut part = part.lock();
        if !part.replica {
            return Err(ReplicaError::NotReplica);
        }
        part.source = ReplicaSource::Node(from);
        part.drain_keys();
        part.tombstones.clear();
        part.log.reset_to(next_seq);
        // What was released counted the old copy's seqs.
        self.log_marks[p].released.store(0, Ordering::Relaxed);
        // Under the partition's lock, as a promotion reads the queue.
        self.forget_received(&[p]);
        Ok(())
    }

    /// One entry of a snapshot being loaded: applied, not logged.
    pub fn load_replica_entry(&self, change: Change) -> Result<(), ReplicaError> {
        let key = change.key.clone();
        {
            let mut part = self.parts[self.partition_of(&key)].lock();
            if !part.replica {
                return Err(ReplicaError::NotReplica);
            }
            self.hlc.observe(change.version.hlc);
            apply_owned_at(&mut part, None, change)?;
        }
        if let Some(o) = self.observer() {
            o.changed(&[key], 0);
        }
        Ok(())
    }

    /// A remote change that changed nothing (a duplicate, or older than
    /// what is held) was decided by what the partition holds, which may be
    /// an earlier attempt's change whose backups never acknowledged it (its
    /// sender retries after a failed wait): the caller waits, as for a
    /// write, until the backups hold the partition's log so far. Not for
    /// what was logged before this copy became primary: no backup
    /// acknowledges that again (an idle partition handed over would wait
    /// for ever; found by test_wan_chaos.py).
    pub(crate) fn written_through_now(&self, part: &Partition) {
        if let Some(last) = part
            .logged_as_primary()
            .filter(|_| self.sink.get().is_some())
        {
            WRITTEN.with(|w| w.borrow_mut().push((part.id as usize, last)));
        }
    }

    fn record(&self, part: &mut Partition, change: &Change, saved: usize) -> u64 {
        if let Some(l) = self.listener.get() {
            l.appended(part.id as usize, change);
        }
        // The append trims what this lets go.
        self.catch_up_log(part);
        let (seq, size) = part.log.append(change);
        if let Some(sink) = self.sink.get() {
            sink.logged(part.id as usize, seq, change, part.log.get(seq));
            WRITTEN.with(|w| w.borrow_mut().push((part.id as usize, seq)));
        }
        part.stats.record(change.kind.index(), size, saved);
        seq
    }
}

pub struct Txn<'a> {
    ks: &'a Keyspace,
    guards: SmallVec<[(usize, MutexGuard<'a, Partition>); 2]>,
    now: u64,
    origin: u64,
    touched: Vec<Bytes>,
    notify: bool,
    /// (guard slot, map index) of the key [`Txn::get`] found last, so that
    /// a write of the same key that follows (INCR, HSET...) does not hash
    /// and probe for it again. Cleared whenever the map changes.
    found: Option<(usize, usize)>,
}

impl<'a> Txn<'a> {
    pub fn now_ms(&self) -> u64 {
        self.now
    }

    pub fn keyspace(&self) -> &'a Keyspace {
        self.ks
    }

    fn slot(&self, key: &[u8]) -> usize {
        // Most commands lock one partition: no need to hash the key again.
        if self.guards.len() == 1 {
            debug_assert_eq!(
                self.guards[0].0,
                self.ks.partition_of(key),
                "a key outside the locked partition"
            );
            return 0;
        }
        let p = self.ks.partition_of(key);
        self.guards
            .iter()
            .position(|(i, _)| *i == p)
            .expect("a command touched a key outside the partitions it locked")
    }

    /// The live entry for `key`; an expired one is removed (and logged) here.
    pub fn get(&mut self, key: &[u8]) -> Option<&Entry> {
        let s = self.slot(key);
        let i = self.index_of(s, key)?;
        let part = &self.guards[s].1;
        if part.get_index(i)?.1.is_expired(self.now) {
            if !part.replica {
                self.expire_key(s, key);
            }
            return None;
        }
        self.found = Some((s, i));
        self.guards[s].1.get_index(i).map(|(_, e)| e)
    }

    /// Where the map holds `key`: from the last [`Txn::get`] or
    /// [`Txn::write`] when that left this key there, else by lookup.
    fn index_of(&self, s: usize, key: &[u8]) -> Option<usize> {
        let part = &self.guards[s].1;
        match self.found {
            Some((fs, i)) if fs == s && part.get_index(i).is_some_and(|(k, _)| k[..] == *key) => {
                Some(i)
            }
            _ => part.index_of(key),
        }
    }

    pub fn exists(&mut self, key: &[u8]) -> bool {
        self.get(key).is_some()
    }

    /// The only way a command changes the keyspace.
    pub fn write(&mut self, key: &[u8], w: Write) -> Result<(), WriteError> {
        let s = self.slot(key);
        let now = self.now;
        // One hashed lookup at most: later reads go by index.
        let mut index = self.index_of(s, key);
        self.found = None;
        if let Some(i) = index {
            if self.guards[s]
                .1
                .get_index(i)
                .is_some_and(|(_, e)| e.is_expired(now))
            {
                self.expire_key(s, key);
                index = None;
            }
        }
        let part = &mut self.guards[s].1;
        let (stored_key, old) = match index.and_then(|i| part.get_index(i)) {
            Some((k, e)) => (Some(k.clone()), Some(e)),
            None => (None, None),
        };
        let noticed = self.ks.notices.load(Ordering::Relaxed).then_some(match &w {
            Write::Set { expire_at, .. } => Noticed::Set {
                expire_at: *expire_at,
            },
            Write::Str(_) => Noticed::Str,
            Write::HashSet(_) => Noticed::HashSet,
            Write::HashDel(_) => Noticed::HashDel,
            Write::SetExpiry(at) => Noticed::Expiry(*at),
            Write::Delete => Noticed::Deleted,
        });
        let created = old.is_none();
        let Some(Planned {
            kind,
            saved,
            new_value,
        }) = plan(old, w)?
        else {
            return Ok(());
        };
        // An existing key's bytes are shared, not copied, into the change.
        let key = stored_key.unwrap_or_else(|| Bytes::copy_from_slice(key));
        let noticed = noticed.map(|what| (what, key.clone()));
        let change = Change {
            key,
            version: self.ks.version(),
            kind,
        };
        if self.notify {
            self.touched.push(change.key.clone());
        }
        match (new_value, index) {
            // A SET logged as a delta (against the entry at `index`): the
            // value is at hand, so it is stored as it is instead of rebuilt
            // from the old one.
            (Some(value), Some(i)) => {
                let version = change.version;
                part.update_at(i, |e| {
                    e.value = value;
                    e.version = version;
                });
                self.ks.record(part, &change, saved);
            }
            // A whole value or hash fields cannot fail to apply (`plan`
            // checked the type): logged first, they then move into the map.
            _ if change.kind.moves_into_entry() => {
                self.ks.record(part, &change, saved);
                apply_owned_at(part, index, change)?;
            }
            _ => {
                apply_change_at(part, index, &change)?;
                self.ks.record(part, &change, saved);
            }
        }
        if let Some((what, key)) = noticed {
            let removed = what == Noticed::HashDel && self.guards[s].1.get(&key).is_none();
            notices::push(Notice {
                key,
                what,
                created,
                removed,
            });
            self.found = None;
            return Ok(());
        }
        // A key written in place stays at its index (checked on use: a
        // removal may have moved another key there).
        self.found = index.map(|i| (s, i));
        Ok(())
    }

    fn expire_key(&mut self, s: usize, key: &[u8]) {
        self.found = None;
        let change = Change {
            key: Bytes::copy_from_slice(key),
            version: self.ks.version(),
            kind: ChangeKind::Expire,
        };
        let part = &mut self.guards[s].1;
        // Removing a key cannot fail.
        let _ = apply_change(part, &change);
        if self.notify {
            self.touched.push(change.key.clone());
        }
        if self.ks.notices.load(Ordering::Relaxed) {
            notices::push(Notice {
                key: change.key.clone(),
                what: Noticed::Expired,
                created: false,
                removed: true,
            });
        }
        self.ks.record(part, &change, 0);
    }
}

impl Drop for Txn<'_> {
    fn drop(&mut self) {
        self.guards.clear();
        if !self.touched.is_empty() {
            if let Some(o) = self.ks.observer.get() {
                o.changed(&self.touched, self.origin);
            }
        }
    }
}

/// What a write changes: the change to log, the bytes a delta saves over
/// shipping the full value, and for a SET logged as a delta the value the
/// entry takes (the same as applying the delta to the old value).
struct Planned {
    kind: ChangeKind,
    saved: usize,
    new_value: Option<Value>,
}

/// Turns an intended write into the change to log. None: nothing to change.
fn plan(old: Option<&Entry>, w: Write) -> Result<Option<Planned>, WriteError> {
    let base = old.map_or(Version::ZERO, |e| e.version);
    let kind_and_saved = match w {
        Write::Set { value, expire_at } => {
            let delta = match (old, &value) {
                (Some(e), Value::Str(new)) if e.expire_at == expire_at => {
                    e.as_str().and_then(|o| delta::diff(o, new))
                }
                _ => None,
            };
            return Ok(Some(match delta {
                Some(op) => {
                    let saved = value
                        .payload_len()
                        .saturating_sub(delta::op_payload_len(&op));
                    Planned {
                        kind: ChangeKind::Delta { base, op },
                        saved,
                        new_value: Some(value),
                    }
                }
                None => Planned {
                    kind: ChangeKind::Full { value, expire_at },
                    saved: 0,
                    new_value: None,
                },
            }));
        }
        Write::Str(op) => match old {
            Some(e) => {
                let held = e.as_str().ok_or(WriteError::WrongType)?;
                // A failing op (overflow...) fails in apply_change, which
                // changes nothing, so nothing is logged either.
                let saved = held.len().saturating_sub(delta::op_payload_len(&op));
                (ChangeKind::Delta { base, op }, saved)
            }
            None => {
                let empty: &[u8] = if matches!(op, DeltaOp::IncrBy(_)) {
                    b"0"
                } else {
                    b""
                };
                let value = Value::Str(delta::apply_string_op(empty, &op)?);
                (
                    ChangeKind::Full {
                        value,
                        expire_at: 0,
                    },
                    0,
                )
            }
        },
        Write::HashSet(fields) => {
            let held = match old {
                Some(e) => e.as_hash().ok_or(WriteError::WrongType)?.payload_len(),
                None => 0,
            };
            let op = DeltaOp::HashSet { fields };
            let saved = held.saturating_sub(delta::op_payload_len(&op));
            // Field operations merge onto any version: no base to ship.
            (
                ChangeKind::Delta {
                    base: Version::ZERO,
                    op,
                },
                saved,
            )
        }
        Write::HashDel(fields) => {
            let Some(e) = old else { return Ok(None) };
            let held = e.as_hash().ok_or(WriteError::WrongType)?.payload_len();
            let op = DeltaOp::HashDel { fields };
            let saved = held.saturating_sub(delta::op_payload_len(&op));
            (
                ChangeKind::Delta {
                    base: Version::ZERO,
                    op,
                },
                saved,
            )
        }
        Write::SetExpiry(at) => {
            let Some(e) = old else { return Ok(None) };
            let saved = e.value.payload_len();
            (
                ChangeKind::Delta {
                    base,
                    op: DeltaOp::SetExpiry(at),
                },
                saved,
            )
        }
        Write::Delete => {
            if old.is_none() {
                return Ok(None);
            }
            (ChangeKind::Delete, 0)
        }
    };
    let (kind, saved) = kind_and_saved;
    Ok(Some(Planned {
        kind,
        saved,
        new_value: None,
    }))
}

#[path = "backup_copy.rs"]
mod backup_copy;
pub use backup_copy::PartitionCopy;

#[path = "remote.rs"]
mod remote;
pub use remote::RemoteOutcome;

#[cfg(test)]
#[path = "replay_tests.rs"]
mod replay_tests;

#[cfg(test)]
mod log_needed_tests {
    use super::*;
    use crate::clock::DebugClock;

    fn set(ks: &Keyspace, key: &str) {
        let mut txn = ks.txn([key.as_bytes()], 0);
        txn.write(
            key.as_bytes(),
            Write::Set {
                value: Value::Str(Bytes::from(key.to_owned())),
                expire_at: 0,
            },
        )
        .unwrap();
    }

    #[test]
    fn an_advanced_needed_seq_trims_when_the_partition_is_next_locked_and_never_goes_back() {
        let cfg = KeyspaceConfig {
            partitions: 1,
            log_retain_bytes: 0,
            ..Default::default()
        };
        let ks = Keyspace::new(cfg, Arc::new(DebugClock::default()));
        ks.advance_log_needed_from(0, || Some(5));
        for i in 0..4 {
            set(&ks, &format!("k{i}"));
        }
        assert_eq!(
            ks.with_partition(0, |p, _| p.log.len()),
            0,
            "no consumer registered: advancing does nothing"
        );
        ks.set_log_needed_from(0, Some(5));
        for i in 4..10 {
            set(&ks, &format!("k{i}"));
        }
        assert_eq!(ks.with_partition(0, |p, _| p.log.first_seq()), 5);
        ks.advance_log_needed_from(0, || Some(8));
        ks.advance_log_needed_from(0, || Some(6));
        assert_eq!(
            ks.with_partition(0, |p, _| p.log.first_seq()),
            8,
            "trimmed on the next lock, not moved back"
        );
        ks.advance_log_needed_from(0, || Some(9));
        set(&ks, "k10");
        // The append trims when it needs a new chunk (this one has room).
        assert_eq!(
            ks.with_partition(0, |p, _| (p.log.first_seq(), p.log.next_seq())),
            (8, 12)
        );
        assert_eq!(
            ks.with_partition_mut(0, |p| {
                p.log.trim();
                p.log.first_seq()
            }),
            9
        );
        ks.set_log_needed_from(0, None);
        assert_eq!(ks.with_partition(0, |p, _| p.log.len()), 0);
    }

    #[test]
    fn a_release_lets_retained_changes_go_once_the_partition_is_next_locked() {
        let cfg = KeyspaceConfig {
            partitions: 1,
            log_retain_bytes: 1 << 20,
            ..Default::default()
        };
        let ks = Keyspace::new(cfg, Arc::new(DebugClock::default()));
        for i in 0..10 {
            set(&ks, &format!("k{i}"));
        }
        ks.release_log_before(0, 6);
        ks.release_log_before(0, 3);
        assert_eq!(
            ks.with_partition_mut(0, |p| {
                p.log.trim();
                p.log.first_seq()
            }),
            1,
            "not before the next lock that logs"
        );
        set(&ks, "k10");
        assert_eq!(
            ks.with_partition_mut(0, |p| {
                p.log.trim();
                p.log.first_seq()
            }),
            6,
            "and never moved back"
        );
    }
}

#[cfg(test)]
mod prefetch_tests {
    use super::*;
    use crate::clock::DebugClock;

    #[test]
    fn prefetching_is_only_done_for_many_partitions_and_never_reads_out_of_range() {
        for (partitions, prefetching) in [(271, false), (16384, true)] {
            let cfg = KeyspaceConfig {
                partitions,
                ..Default::default()
            };
            let ks = Keyspace::new(cfg, Arc::new(DebugClock::default()));
            assert_eq!(ks.prefetching(), prefetching, "{partitions} partitions");
            for key in [&b""[..], b"k", b"{tag}key", &[0xff; 300]] {
                ks.prefetch(key);
            }
            for p in [0, partitions as usize - 1, partitions as usize, usize::MAX] {
                ks.prefetch_partition(p);
            }
        }
    }
}
