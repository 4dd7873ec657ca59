//! The write path: a [`Txn`] locks the partitions of a command's keys (in
//! index order), reads through them (removing an expired key it finds, as
//! a logged `Expire`) and writes by [`Txn::write`], the only way a command
//! changes the keyspace; dropped, it releases the locks and then tells the
//! observer which keys changed.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use parking_lot::MutexGuard;
use smallvec::SmallVec;

use super::plan::{plan, Planned};
use super::{Keyspace, Write, WriteError};
use crate::apply::{apply_change, apply_change_at, apply_owned_at};
use crate::change::{Change, ChangeKind, DeltaOp};
use crate::notices::{self, Notice, Noticed};
use crate::partition::Partition;
use crate::value::Entry;

pub struct Txn<'a> {
    ks: &'a Keyspace,
    pub(super) guards: SmallVec<[(usize, MutexGuard<'a, Partition>); 2]>,
    pub(super) now: u64,
    origin: u64,
    touched: Vec<Bytes>,
    notify: bool,
    /// (guard slot, map index) of the key [`Txn::get`] found last, so that
    /// a write of the same key that follows (INCR, HSET...) does not hash
    /// and probe for it again. Cleared whenever the map changes.
    found: Option<(usize, usize)>,
}

impl Keyspace {
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
        let now = self.now_ms();
        crate::access::observe_now(now);
        Txn {
            ks: self,
            guards,
            now,
            origin,
            touched: Vec::new(),
            notify,
            found: None,
        }
    }
}

impl<'a> Txn<'a> {
    pub fn now_ms(&self) -> u64 {
        self.now
    }

    /// Whether writes of `key` merge with other sites' (WAN is on): an
    /// increment may then store more than the command computed, as the
    /// other sites' contributions are added.
    pub fn merges(&self, key: &[u8]) -> bool {
        self.guards[self.slot(key)].1.tombstones.enabled()
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

    /// The live entry for `key`; an expired one is removed (and logged)
    /// here. The access counts for eviction ([`crate::access`]).
    pub fn get(&mut self, key: &[u8]) -> Option<&Entry> {
        let (s, i) = self.live(key)?;
        self.guards[s].1.touch_at(i, self.now);
        self.guards[s].1.get_index(i).map(|(_, e)| e)
    }

    /// [`Txn::get`] without counting an access (`OBJECT IDLETIME`, `FREQ`).
    pub fn peek(&mut self, key: &[u8]) -> Option<&Entry> {
        let (s, i) = self.live(key)?;
        self.guards[s].1.get_index(i).map(|(_, e)| e)
    }

    /// `MEMORY USAGE` of the live `key` (see [`crate::memory_usage`]),
    /// without counting an access.
    pub fn memory_usage(&mut self, key: &[u8]) -> Option<usize> {
        let (s, _) = self.live(key)?;
        self.guards[s].1.memory_usage(key)
    }

    /// Sets what eviction knows of `key`'s use (RESTORE's IDLETIME/FREQ):
    /// local data, not logged (a replica's copy starts as a new key's).
    pub fn set_access(&mut self, key: &[u8], access: u32) {
        if let Some((s, i)) = self.live(key) {
            self.guards[s].1.set_access_at(i, access);
        }
    }

    /// Where the live entry for `key` is (guard slot, map index).
    fn live(&mut self, key: &[u8]) -> Option<(usize, usize)> {
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
        Some((s, i))
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
        let written = key;
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
        let old = index.and_then(|i| part.get_index(i)).map(|(_, e)| e);
        let noticed = self.ks.notices.load(Ordering::Relaxed).then_some(match &w {
            Write::Set { expire_at, .. } => Noticed::Set {
                expire_at: *expire_at,
            },
            Write::Str(_) | Write::Hll { .. } | Write::Bits { .. } => Noticed::Str,
            Write::FloatIncr { expire_at, .. } => Noticed::Set {
                expire_at: *expire_at,
            },
            Write::HashSet(_) | Write::HashIncr { .. } | Write::HashFloatIncr { .. } => {
                Noticed::HashSet
            }
            Write::HashDel(_) => Noticed::HashDel,
            Write::SetAdd(_) | Write::ZAdd(_) | Write::ZIncr { .. } => Noticed::Added,
            Write::Remove(_) => Noticed::Removed,
            Write::List(_) => Noticed::List,
            Write::SetExpiry(at) => Noticed::Expiry(*at),
            Write::Delete => Noticed::Deleted,
        });
        let created = old.is_none();
        // Only a HyperLogLog made from nothing needs the key's last removal.
        let removed = match (&w, old) {
            (Write::Hll { .. }, None) => crate::apply::removed_at(part, key),
            _ => None,
        };
        let Some(Planned {
            kind,
            saved,
            new_value,
        }) = plan(
            old,
            w,
            part.tombstones.enabled().then_some(self.ks.site()),
            removed,
        )?
        else {
            return Ok(());
        };
        let key = Bytes::copy_from_slice(key);
        let noticed = noticed.map(|what| (what, key.clone()));
        let mut kind = kind;
        let version = self.ks.version();
        match &mut kind {
            // A value a command built whole (SINTERSTORE, COPY, RESTORE...)
            // is this write's: each element takes its version.
            ChangeKind::Full { value, .. } => value.stamp(version),
            // The scores a ZADD assigned are this write's.
            ChangeKind::Delta {
                op: DeltaOp::ZAssign { counters, .. },
                ..
            } => counters.iter_mut().for_each(|(_, c)| c.stamp(version)),
            _ => {}
        }
        let change = Change { key, version, kind };
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
            let removed = matches!(what, Noticed::HashDel | Noticed::Removed | Noticed::List)
                && self.guards[s].1.get(&key).is_none();
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
        if let Some(i) = index {
            let part = &mut self.guards[s].1;
            if part.get_index(i).is_some_and(|(k, _)| k[..] == *written) {
                part.touch_at(i, now);
            }
        }
        Ok(())
    }

    pub(super) fn expire_key(&mut self, s: usize, key: &[u8]) {
        self.remove_key(s, key, ChangeKind::Expire);
    }

    /// Removes `key` by eviction (see [`ChangeKind::Evict`]).
    pub(super) fn evict_key(&mut self, s: usize, key: &[u8]) {
        self.remove_key(s, key, ChangeKind::Evict);
    }

    /// Removes `key` for the keyspace's own reasons (expiry, eviction),
    /// logged so that replicas do the same.
    fn remove_key(&mut self, s: usize, key: &[u8], kind: ChangeKind) {
        self.found = None;
        let what = match kind {
            ChangeKind::Evict => Noticed::Evicted,
            _ => Noticed::Expired,
        };
        let change = Change {
            key: Bytes::copy_from_slice(key),
            version: self.ks.version(),
            kind,
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
                what,
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
