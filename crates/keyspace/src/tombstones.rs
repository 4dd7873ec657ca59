//! Tombstones: what a partition remembers about removals, so that a change
//! from another site that is older than a delete does not bring data back.
//!
//! Three kinds, all kept by [`crate::apply::apply_change`] (so a backup that
//! replays its primary's log ends with the same tombstones):
//!
//! - a key's *floor*: the version of its latest Delete/Expire (or of a string
//!   overwrite that a hash later replaced). Everything of the key older than
//!   the floor is gone. A hash keeps its floor while it lives, because fields
//!   older than the floor may still arrive from another site; a string put
//!   drops it (the string's own version now holds older writes back).
//! - a key's *hash version*: the key was a hash at this version and then
//!   lost its last field (HDEL). A string written before it lost to the
//!   hash; fields are not affected. A hash created again starts from it.
//! - a field's tombstone: the version of the latest HDEL of that field.
//!
//! Memory is bounded per partition in bytes (key and field length plus an
//! overhead); over budget the oldest inserted go first. Tombstones whose
//! version is more than `ttl_ms` older than the newest one are dropped as
//! well, checked on insert. A budget of 0 disables tombstones: every method
//! is then a no-op and a node without WAN pays nothing.

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;

use crate::version::Version;

const KEY_OVERHEAD: usize = 64;
const FIELD_OVERHEAD: usize = 48;

type Map<K, V> = HashMap<K, V, ahash::RandomState>;

#[derive(Debug, Default)]
struct KeyTombs {
    floor: Option<Version>,
    hash: Option<Version>,
    fields: Map<Bytes, Version>,
}

impl KeyTombs {
    fn is_empty(&self) -> bool {
        self.floor.is_none() && self.hash.is_none() && self.fields.is_empty()
    }
}

/// What a tombstone is about.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tomb {
    /// The key's floor.
    Key,
    /// The key's hash version.
    Hash,
    /// One hash field.
    Field(Bytes),
}

/// `budget` and `keys` first: a write reads only them while no tombstone is held.
#[derive(Debug)]
#[repr(C)]
pub struct Tombstones {
    budget: usize,
    keys: Map<Bytes, KeyTombs>,
    ttl_ms: u64,
    /// Every insertion, oldest first. An entry whose version is no longer
    /// the live one is stale and skipped.
    order: VecDeque<(Bytes, Tomb, Version)>,
    live: usize,
    bytes: usize,
    newest_ms: u64,
}

fn cost(key: &[u8], what: &Tomb) -> usize {
    match what {
        Tomb::Key | Tomb::Hash => KEY_OVERHEAD + key.len(),
        Tomb::Field(f) => FIELD_OVERHEAD + key.len() + f.len(),
    }
}

impl Tombstones {
    /// `budget` bytes (0: disabled); tombstones more than `ttl_ms` older
    /// than the newest are dropped.
    pub fn new(budget: usize, ttl_ms: u64) -> Self {
        Tombstones {
            budget,
            ttl_ms,
            keys: Map::default(),
            order: VecDeque::new(),
            live: 0,
            bytes: 0,
            newest_ms: 0,
        }
    }

    pub fn enabled(&self) -> bool {
        self.budget > 0
    }

    /// Estimated bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Tombstones held (of every kind).
    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// The key's floor: the version of its latest removal.
    pub fn key(&self, key: &[u8]) -> Option<Version> {
        self.keys.get(key)?.floor
    }

    /// The version at which the key was last a hash, if it then lost its
    /// last field.
    pub fn hash(&self, key: &[u8]) -> Option<Version> {
        self.keys.get(key)?.hash
    }

    /// The field's own tombstone (not the key's floor).
    pub fn field(&self, key: &[u8], field: &[u8]) -> Option<Version> {
        self.keys.get(key)?.fields.get(field).copied()
    }

    /// The newest removal covering a field: its own tombstone or the key's
    /// floor.
    pub fn field_or_key(&self, key: &[u8], field: &[u8]) -> Option<Version> {
        let k = self.keys.get(key)?;
        k.floor.max(k.fields.get(field).copied())
    }

    /// Keys holding any tombstone, in no order.
    pub fn keys(&self) -> impl Iterator<Item = &Bytes> {
        self.keys.keys()
    }

    /// The key's field tombstones (not its floor), in no order.
    pub fn fields(&self, key: &[u8]) -> impl Iterator<Item = (&Bytes, Version)> {
        self.keys
            .get(key)
            .into_iter()
            .flat_map(|k| k.fields.iter().map(|(f, v)| (f, *v)))
    }

    /// Every tombstone, oldest inserted first. For snapshots and tests.
    pub fn iter(&self) -> impl Iterator<Item = (&Bytes, &Tomb, Version)> {
        self.order
            .iter()
            .filter(|(k, t, v)| current(&self.keys, k, t) == Some(*v))
            .map(|(k, t, v)| (k, t, *v))
    }

    /// The key was removed at `v`: its floor becomes at least `v`; the
    /// tombstones the floor covers go.
    pub(crate) fn deleted(&mut self, key: &Bytes, v: Version) {
        if !self.enabled() || self.key(key).is_some_and(|f| f >= v) {
            return;
        }
        self.drop_below(key, v, true);
        self.set(key, Tomb::Key, v);
    }

    /// The key was a hash at `v` (and holds no field now, or is created
    /// again: see [`Tombstones::take_hash`]).
    pub(crate) fn hash_seen(&mut self, key: &Bytes, v: Version) {
        if !self.enabled()
            || self.key(key).is_some_and(|f| f >= v)
            || self.hash(key).is_some_and(|h| h >= v)
        {
            return;
        }
        self.set(key, Tomb::Hash, v);
    }

    /// A hash is created: its version starts from the hash version, which
    /// it now holds itself.
    pub(crate) fn take_hash(&mut self, key: &[u8]) -> Option<Version> {
        let v = self.hash(key)?;
        self.remove(key, &Tomb::Hash);
        Some(v)
    }

    /// Hash fields removed at `v` (those the key's floor covers need nothing).
    pub(crate) fn fields_deleted(&mut self, key: &Bytes, fields: &[Bytes], v: Version) {
        if !self.enabled() || self.key(key).is_some_and(|f| f >= v) {
            return;
        }
        for f in fields {
            if self.field(key, f).is_some_and(|old| old >= v) {
                continue;
            }
            self.set(key, Tomb::Field(f.clone()), v);
        }
    }

    /// A string was put at `v`: tombstones older than it are no longer
    /// needed (the string's version holds older writes back).
    pub(crate) fn overwritten(&mut self, key: &Bytes, v: Version) {
        if self.keys.contains_key(key) {
            self.drop_below(key, v, false);
        }
    }

    /// Forgets everything (a backup about to load a snapshot).
    pub(crate) fn clear(&mut self) {
        self.keys.clear();
        self.order.clear();
        self.live = 0;
        self.bytes = 0;
        self.newest_ms = 0;
    }

    /// Drops the key's tombstones older than `v` (also equal ones with
    /// `inclusive`).
    fn drop_below(&mut self, key: &Bytes, v: Version, inclusive: bool) {
        let Some(k) = self.keys.get_mut(key) else {
            return;
        };
        let older = |x: Version| x < v || (inclusive && x == v);
        let (mut freed, mut dropped) = (0, 0);
        if k.floor.is_some_and(older) {
            k.floor = None;
            freed += cost(key, &Tomb::Key);
            dropped += 1;
        }
        if k.hash.is_some_and(older) {
            k.hash = None;
            freed += cost(key, &Tomb::Hash);
            dropped += 1;
        }
        k.fields.retain(|f, fv| {
            let keep = !older(*fv);
            if !keep {
                freed += FIELD_OVERHEAD + key.len() + f.len();
                dropped += 1;
            }
            keep
        });
        let empty = k.is_empty();
        self.bytes -= freed;
        self.live -= dropped;
        if empty {
            self.keys.remove(key);
        }
    }

    /// Sets (or raises) one tombstone and queues it.
    fn set(&mut self, key: &Bytes, what: Tomb, v: Version) {
        let k = self.keys.entry(key.clone()).or_default();
        let slot = match &what {
            Tomb::Key => &mut k.floor,
            Tomb::Hash => &mut k.hash,
            Tomb::Field(f) => {
                let fresh = k.fields.insert(f.clone(), v).is_none();
                if fresh {
                    self.bytes += cost(key, &what);
                    self.live += 1;
                }
                return self.inserted(key, what, v);
            }
        };
        if slot.replace(v).is_none() {
            self.bytes += cost(key, &what);
            self.live += 1;
        }
        self.inserted(key, what, v);
    }

    fn inserted(&mut self, key: &Bytes, what: Tomb, v: Version) {
        self.order.push_back((key.clone(), what, v));
        self.newest_ms = self.newest_ms.max(v.millis());
        self.evict();
    }

    fn evict(&mut self) {
        while let Some((_, _, v)) = self.order.front() {
            let over = self.bytes > self.budget;
            let aged = v.millis().saturating_add(self.ttl_ms) < self.newest_ms;
            if !over && !aged {
                break;
            }
            let Some((k, what, v)) = self.order.pop_front() else {
                break;
            };
            if current(&self.keys, &k, &what) == Some(v) {
                self.remove(&k, &what);
            }
        }
        // Superseded insertions stay queued until they reach the front;
        // drop them in one pass when they outnumber the live ones.
        if self.order.len() > 2 * self.live + 32 {
            let keys = &self.keys;
            self.order
                .retain(|(k, t, v)| current(keys, k, t) == Some(*v));
        }
    }

    fn remove(&mut self, key: &[u8], what: &Tomb) {
        let Some(k) = self.keys.get_mut(key) else {
            return;
        };
        let gone = match what {
            Tomb::Key => k.floor.take().is_some(),
            Tomb::Hash => k.hash.take().is_some(),
            Tomb::Field(f) => k.fields.remove(f).is_some(),
        };
        let empty = k.is_empty();
        if gone {
            self.bytes -= cost(key, what);
            self.live -= 1;
        }
        if empty {
            self.keys.remove(key);
        }
    }
}

fn current(keys: &Map<Bytes, KeyTombs>, key: &[u8], what: &Tomb) -> Option<Version> {
    let k = keys.get(key)?;
    match what {
        Tomb::Key => k.floor,
        Tomb::Hash => k.hash,
        Tomb::Field(f) => k.fields.get(f).copied(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(ms: u64, n: u64) -> Version {
        Version {
            hlc: (ms << 16) | n,
            site: 1,
        }
    }

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn disabled_tombstones_record_nothing() {
        let mut t = Tombstones::new(0, 1000);
        t.deleted(&b("k"), v(1, 0));
        t.fields_deleted(&b("k"), &[b("f")], v(1, 1));
        assert!(t.is_empty());
        assert_eq!(t.key(b"k"), None);
        assert_eq!(t.bytes(), 0);
    }

    #[test]
    fn floors_cover_older_field_tombstones_and_puts_drop_older_ones() {
        let mut t = Tombstones::new(1 << 20, u64::MAX / 2);
        let k = b("k");
        t.fields_deleted(&k, &[b("a"), b("b")], v(1, 0));
        t.fields_deleted(&k, &[b("b")], v(3, 0));
        assert_eq!(t.len(), 2);
        t.deleted(&k, v(2, 0));
        assert_eq!(
            (t.key(b"k"), t.field(b"k", b"a"), t.field(b"k", b"b")),
            (Some(v(2, 0)), None, Some(v(3, 0)))
        );
        assert_eq!(t.field_or_key(b"k", b"a"), Some(v(2, 0)));
        assert_eq!(t.field_or_key(b"k", b"b"), Some(v(3, 0)));
        assert_eq!(t.len(), 2);
        assert_eq!(
            t.bytes(),
            cost(b"k", &Tomb::Key) + cost(b"k", &Tomb::Field(b("b")))
        );
        // An older delete changes nothing.
        t.deleted(&k, v(1, 5));
        assert_eq!(t.key(b"k"), Some(v(2, 0)));
        t.overwritten(&k, v(2, 5));
        assert_eq!((t.key(b"k"), t.field(b"k", b"b")), (None, Some(v(3, 0))));
        t.overwritten(&k, v(4, 0));
        assert!(t.is_empty());
        assert_eq!(t.bytes(), 0);
        assert_eq!(t.iter().count(), 0);
    }

    #[test]
    fn a_hash_version_holds_until_a_newer_floor_or_the_hash_comes_back() {
        let mut t = Tombstones::new(1 << 20, u64::MAX / 2);
        let k = b("k");
        t.hash_seen(&k, v(5, 0));
        t.hash_seen(&k, v(4, 0));
        assert_eq!(t.hash(b"k"), Some(v(5, 0)));
        assert_eq!(t.take_hash(b"k"), Some(v(5, 0)));
        assert!(t.is_empty() && t.bytes() == 0);
        t.hash_seen(&k, v(5, 0));
        t.deleted(&k, v(4, 0));
        assert_eq!((t.key(b"k"), t.hash(b"k")), (Some(v(4, 0)), Some(v(5, 0))));
        t.deleted(&k, v(6, 0));
        assert_eq!(
            (t.key(b"k"), t.hash(b"k"), t.len()),
            (Some(v(6, 0)), None, 1)
        );
        t.hash_seen(&k, v(5, 5));
        assert_eq!(t.hash(b"k"), None, "the floor covers it");
        assert_eq!(
            t.iter()
                .map(|(k, w, v)| (k.clone(), w.clone(), v))
                .collect::<Vec<_>>(),
            vec![(k, Tomb::Key, v(6, 0))]
        );
    }

    #[test]
    fn over_budget_the_oldest_go_first() {
        let per = cost(b"key00", &Tomb::Key);
        let mut t = Tombstones::new(per * 10, u64::MAX / 2);
        for i in 0..25u64 {
            t.deleted(&b(&format!("key{i:02}")), v(1, i));
        }
        assert_eq!(t.len(), 10);
        assert!(t.bytes() <= per * 10);
        assert_eq!(t.key(b"key14"), None);
        assert_eq!(t.key(b"key15"), Some(v(1, 15)));
        // Re-deleting an old key moves it to the back.
        t.deleted(&b("key15"), v(2, 0));
        t.deleted(&b("new"), v(2, 1));
        assert_eq!(t.key(b"key15"), Some(v(2, 0)));
        assert_eq!(t.key(b"key16"), None);
        assert!(t.order.len() <= 2 * t.len() + 32);
    }

    #[test]
    fn tombstones_older_than_the_ttl_go_on_insert() {
        let mut t = Tombstones::new(1 << 20, 1000);
        t.deleted(&b("a"), v(10_000, 0));
        t.deleted(&b("b"), v(10_500, 0));
        t.deleted(&b("c"), v(11_001, 0));
        assert_eq!((t.key(b"a"), t.key(b"b").is_some()), (None, true));
        t.fields_deleted(&b("h"), &[b("f")], v(12_000, 0));
        assert_eq!(t.key(b"b"), None);
        assert!(t.key(b"c").is_some());
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn many_updates_of_one_key_keep_the_queue_short() {
        let mut t = Tombstones::new(1 << 20, u64::MAX / 2);
        for i in 0..10_000 {
            t.deleted(&b("k"), v(1, i));
        }
        assert_eq!(t.len(), 1);
        assert!(t.order.len() <= 40);
    }
}
