//! A partition: the keys of one slot range, their expiry index, the
//! partition log and the tombstones of removed keys and hash fields. Only
//! [`crate::apply`] mutates the map and the tombstones, through the methods
//! here that keep the expiry index and the memory estimate in step.

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;

use crate::entry_map::{EntryMap, Found};
use crate::map_key::MapKey;
use crate::partition_bits::PartitionBits;
use crate::partition_log::PartitionLog;
use crate::stats::ChangeStats;
use crate::tombstones::Tombstones;
use crate::value::Entry;

/// Where a backup copy's latest changes came from. A seq the copy already
/// holds may be sent again by the node that sent it (the same batch
/// again), and is skipped; from any other node it is a different history
/// (a new primary's change at a seq the old one had also used), and the
/// copy must be replaced by a snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicaSource {
    /// Nothing received since the copy became a backup.
    Unknown,
    /// The node (a site member index) whose changes or snapshot it holds.
    Node(u16),
    /// It holds changes its current primary does not: it takes nothing
    /// more until a snapshot replaces it.
    Diverged,
}

/// Fields in the order a write reads them (`repr(C)`: the compiler would
/// order them by alignment): at 16,384 partitions a partition's header is
/// not in cache when a command comes, and every 64-byte line it reads is a
/// miss. The lock (before this struct in its `Mutex`), the map header and
/// the log's header come first, in the first four lines; what only some
/// writes read (expiry index, tombstones' contents) comes last.
#[derive(Debug)]
#[repr(C)]
pub struct Partition {
    pub id: u16,
    /// Held as a backup: changed only by the primary's changes.
    pub replica: bool,
    /// As a backup, whose changes the copy holds.
    pub(crate) source: ReplicaSource,
    /// What the entries own ([`Entry::footprint`]; the map's room is
    /// added when asked).
    footprint: usize,
    map: EntryMap,
    pub log: PartitionLog,
    /// Changes logged here, by kind (see [`crate::Keyspace::stats`]).
    pub(crate) stats: ChangeStats,
    /// Removed keys and hash fields (disabled unless WAN needs them).
    pub tombstones: Tombstones,
    /// (expire_at, key) for every key with a time to live.
    expires: BTreeSet<(u64, MapKey)>,
    /// Told when `expires` stops being empty.
    expiring: Option<Arc<PartitionBits>>,
    /// The last seq the log held when this copy last became the primary's
    /// (0 if it never was a backup): what survived the failover or came
    /// with the handover, and so may leave the site (see
    /// `cluster::Replicator::durable_seq`).
    pub promoted_through: u64,
    /// Loaded from this node's disk at start: the seq the copy goes on at
    /// and the version of the last change it replayed, which a primary
    /// checks against its log to send only what the copy lacks
    /// ([`crate::Keyspace::begin_catch_up`]); gone once the copy is
    /// replaced.
    pub(crate) recovered_tail: Option<Box<(u64, crate::version::Version)>>,
}

impl Partition {
    pub fn new(id: u16, log_retain_bytes: usize) -> Self {
        Partition {
            id,
            map: EntryMap::default(),
            expires: BTreeSet::new(),
            expiring: None,
            log: PartitionLog::new(log_retain_bytes),
            stats: ChangeStats::default(),
            footprint: 0,
            replica: false,
            source: ReplicaSource::Unknown,
            tombstones: Tombstones::new(0),
            promoted_through: 0,
            recovered_tail: None,
        }
    }

    /// Keeps tombstones within `bytes` (0: none).
    pub fn with_tombstones(mut self, bytes: usize) -> Self {
        self.tombstones = Tombstones::new(bytes);
        self
    }

    /// Marks this partition in `expiring` whenever it holds keys with a
    /// time to live.
    pub fn count_expiring_in(&mut self, expiring: Arc<PartitionBits>) {
        if !self.expires.is_empty() {
            expiring.insert(self.id as usize);
        }
        self.expiring = Some(expiring);
    }

    /// The earliest expiry of a key held, if any key has a time to live.
    pub fn next_expiry(&self) -> Option<u64> {
        self.expires.first().map(|(at, _)| *at)
    }

    /// Remembers up to `bytes` of keys changed since the last backup to
    /// storage (0: incremental backups copy whole partitions).
    pub fn with_changed_keys(mut self, bytes: usize) -> Self {
        self.log.changed = crate::changed_keys::ChangedKeys::new(bytes);
        self
    }

    /// The entry as stored, expired or not (callers decide).
    pub fn get(&self, key: &[u8]) -> Option<&Entry> {
        self.map.get(key)
    }

    /// The last seq this copy logged since it became primary, if any: what
    /// only its backups' acknowledgements make durable (what it held when
    /// promoted survived a failover or came with a handover already).
    pub fn logged_as_primary(&self) -> Option<u64> {
        let last = self.log.next_seq().saturating_sub(1);
        (last > self.promoted_through).then_some(last)
    }

    /// How far this copy's log may leave the site, given the seq its
    /// in-sync backups hold: that, or what it held when promoted.
    pub fn durable_through(&self, backups_hold: u64) -> u64 {
        backups_hold.max(self.promoted_through)
    }

    /// Position of `key` in the map, for lookups by index that follow.
    /// Valid until the map changes.
    pub fn index_of(&self, key: &[u8]) -> Option<usize> {
        self.map.get_index_of(key)
    }

    pub fn get_index(&self, i: usize) -> Option<(&MapKey, &Entry)> {
        self.map.get_index(i)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn expires_len(&self) -> usize {
        self.expires.len()
    }

    /// Heap bytes of the keys and values held: what the entries own and
    /// the map's room ([`crate::memory_usage`]).
    pub fn footprint(&self) -> usize {
        self.footprint
            + crate::memory_usage::entry_map_bytes(
                self.map.capacity(),
                self.map.len(),
                self.map.table_bytes(),
            )
    }

    /// `MEMORY USAGE` of `key`: what its entry owns and its share of the
    /// map ([`crate::memory_usage::entry_usage`]).
    pub fn memory_usage(&self, key: &[u8]) -> Option<usize> {
        let entry = self.map.get(key)?;
        Some(crate::memory_usage::entry_usage(
            key,
            entry,
            self.map.capacity(),
            self.map.len(),
            self.map.table_bytes(),
        ))
    }

    pub fn iter(&self) -> impl Iterator<Item = (&MapKey, &Entry)> {
        self.map.iter()
    }

    /// Records an access of the entry at `index` (see [`crate::access`]).
    pub(crate) fn touch_at(&mut self, index: usize, now_ms: u64) {
        if let Some((_, e)) = self.map.get_index_mut(index) {
            e.access = crate::access::touched(e.access, now_ms);
        }
    }

    /// Sets the access data of the entry at `index`.
    pub(crate) fn set_access_at(&mut self, index: usize, access: u32) {
        if let Some((_, e)) = self.map.get_index_mut(index) {
            e.access = access;
        }
    }

    /// The keys with a time to live, from the first expiring at or after
    /// `at` on, wrapping round to the earliest (eviction samples them).
    pub fn expiring_from(&self, at: u64) -> impl Iterator<Item = (u64, &MapKey)> {
        let from = (at, MapKey::new(b""));
        self.expires
            .range(from.clone()..)
            .chain(self.expires.range(..from))
            .map(|(t, k)| (*t, k))
    }

    /// The earliest and latest expiry held.
    pub fn expiry_range(&self) -> Option<(u64, u64)> {
        Some((self.expires.first()?.0, self.expires.last()?.0))
    }

    /// Keys whose expiry is at or before `now`, earliest first, at most `max`.
    pub fn due(&self, now_ms: u64, max: usize) -> Vec<Bytes> {
        self.expires
            .iter()
            .take_while(|(at, _)| *at <= now_ms)
            .take(max)
            .map(|(_, k)| k.to_bytes())
            .collect()
    }

    /// Stores `entry` under `key`, replacing what it held (one lookup).
    pub(crate) fn put(&mut self, key: &[u8], entry: Entry) {
        match self.map.find(key) {
            Found::At(i) => {
                self.update_at(i, |e| *e = entry);
            }
            Found::Absent(hash) => {
                self.footprint += entry.footprint(key.len());
                let key = MapKey::new(key);
                let expiring = (entry.expire_at != 0).then(|| (entry.expire_at, key.clone()));
                self.map.insert_absent(hash, key, entry);
                if let Some((at, key)) = expiring {
                    self.index_expiry(at, key);
                }
            }
        }
    }

    pub(crate) fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let (k, old) = self.map.swap_remove(key)?;
        self.forget(&k, &old);
        Some(old)
    }

    /// Mutates an entry in place, keeping index and footprint right.
    pub(crate) fn update<R>(&mut self, key: &[u8], f: impl FnOnce(&mut Entry) -> R) -> Option<R> {
        let i = self.map.get_index_of(key)?;
        self.update_at(i, f)
    }

    /// [`Partition::update`] for the entry at `index` (from
    /// [`Partition::index_of`]), without hashing the key again.
    pub(crate) fn update_at<R>(
        &mut self,
        index: usize,
        f: impl FnOnce(&mut Entry) -> R,
    ) -> Option<R> {
        let (k, entry) = self.map.get_index_mut(index)?;
        let (old_expire, old_size) = (entry.expire_at, entry.footprint(k.len()));
        let r = f(entry);
        let (new_expire, new_size) = (entry.expire_at, entry.footprint(k.len()));
        // The key is only needed (and its count only touched) when the
        // expiry index changes.
        let moved = (old_expire != new_expire).then(|| k.clone());
        self.footprint = self.footprint + new_size - old_size;
        if let Some(k) = moved {
            if old_expire != 0 {
                self.expires.remove(&(old_expire, k.clone()));
            }
            if new_expire != 0 {
                self.index_expiry(new_expire, k);
            }
        }
        Some(r)
    }

    fn index_expiry(&mut self, at: u64, key: MapKey) {
        if self.expires.is_empty() {
            if let Some(e) = &self.expiring {
                e.insert(self.id as usize);
            }
        }
        self.expires.insert((at, key));
    }

    fn forget(&mut self, key: &MapKey, old: &Entry) {
        self.footprint -= old.footprint(key.len());
        if old.expire_at != 0 {
            self.expires.remove(&(old.expire_at, key.clone()));
        }
    }

    /// Removes every key, returning them (for logging one Delete each).
    /// The map's room goes too (a drained map keeps its capacity: after a
    /// FLUSHALL of a million keys, tens of MiB of empty slots).
    pub(crate) fn drain_keys(&mut self) -> Vec<Bytes> {
        self.expires.clear();
        self.footprint = 0;
        self.map
            .take()
            .into_iter()
            .map(|(k, _)| k.to_bytes())
            .collect()
    }
}
