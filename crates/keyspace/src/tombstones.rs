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
//! - a key's *emptied version*, per kind of collection (hash, set, sorted
//!   set): the key was one at this version and then lost its last element
//!   (HDEL, SREM...). A write of another type made before it lost to the
//!   collection; elements of the same kind are not affected. A collection
//!   of that kind created again starts from it.
//! - a field's tombstone: the version of the latest HDEL of that field;
//! - a set or sorted-set member's tombstone: the version of the add that
//!   its latest removal observed (see [`crate::DeltaOp::Remove`]).
//!
//! A tombstone is kept until it is *settled*: every other site has applied
//! this partition's changes up to a version at or past its removal, so
//! none of them will ever send a change older than it (their clocks moved
//! past it), and every other site has applied this site's log past it, so
//! a removal made here reached them all (a re-sync copy carries
//! tombstones, not the log). The partition's primary works that point out
//! (`wan::settled`) and [`Tombstones::settle`] lets go of what is at or
//! below it, oldest inserted first; its replicas are told the same. However
//! long a site stays away, the tombstones wait for it; there is no age
//! limit (a limit by age brought deleted keys back after an outage longer
//! than it). What is at or below the settled point and not held is known
//! to be removed (see `keyspace::remote::settled_away`).
//!
//! Memory is bounded per partition in bytes (key and field length plus an
//! overhead); over budget the oldest inserted go first, settled or not. An
//! unsettled one that goes is counted ([`Tombstones::evicted_unsettled`],
//! shown by `wan status` and /metrics): from then on a change older than it from
//! the site that lags could bring its data back, which the operator is told
//! (see docs/data-types.md). A budget of 0 disables tombstones: every
//! method is then a no-op and a node without WAN pays nothing.

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;

use crate::version::Version;

const KEY_OVERHEAD: usize = 64;
const FIELD_OVERHEAD: usize = 48;

type Map<K, V> = HashMap<K, V, ahash::RandomState>;

/// The kinds of collection: values whose elements carry their own versions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Coll {
    Hash = 0,
    Set = 1,
    ZSet = 2,
}

#[derive(Debug, Default)]
struct KeyTombs {
    floor: Option<Version>,
    /// Per [`Coll`]: the version at which the key last was one and lost its
    /// last element.
    emptied: [Option<Version>; 3],
    fields: Map<Bytes, Version>,
    /// Per member kind (set, sorted set): member tombstones.
    members: [Map<Bytes, Version>; 2],
}

impl KeyTombs {
    fn is_empty(&self) -> bool {
        self.floor.is_none()
            && self.emptied.iter().all(Option::is_none)
            && self.fields.is_empty()
            && self.members.iter().all(|m| m.is_empty())
    }
}

/// The member tombstones' slot of a set or sorted set.
fn member_slot(coll: Coll) -> usize {
    match coll {
        Coll::ZSet => 1,
        _ => 0,
    }
}

/// What a tombstone is about.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tomb {
    /// The key's floor.
    Key,
    /// The version at which the key was last a collection of this kind
    /// (and lost its last element).
    Emptied(Coll),
    /// One hash field.
    Field(Bytes),
    /// One set or sorted-set member, at the version of the add its removal
    /// observed.
    Member(Coll, Bytes),
}

/// `budget` and `keys` first: a write reads only them while no tombstone is held.
#[derive(Debug)]
#[repr(C)]
pub struct Tombstones {
    budget: usize,
    keys: Map<Bytes, KeyTombs>,
    /// The hlc up to which every other site applied the partition (0: not
    /// known yet).
    settled: u64,
    /// Tombstones evicted over budget before they were settled.
    evicted_unsettled: u64,
    /// Every insertion, oldest first, with the hlc of the removal that
    /// made it (what settles it: a member's tombstone holds the version
    /// of the add its removal saw, older than the removal). An entry whose
    /// version is no longer the live one is stale and skipped.
    order: VecDeque<(Bytes, Tomb, Version, u64)>,
    live: usize,
    bytes: usize,
}

fn cost(key: &[u8], what: &Tomb) -> usize {
    match what {
        Tomb::Key | Tomb::Emptied(_) => KEY_OVERHEAD + key.len(),
        Tomb::Field(f) | Tomb::Member(_, f) => FIELD_OVERHEAD + key.len() + f.len(),
    }
}

impl Tombstones {
    /// `budget` bytes (0: disabled).
    pub fn new(budget: usize) -> Self {
        Tombstones {
            budget,
            settled: 0,
            evicted_unsettled: 0,
            keys: Map::default(),
            order: VecDeque::new(),
            live: 0,
            bytes: 0,
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

    /// Tombstones evicted over budget before every other site had passed
    /// them.
    pub fn evicted_unsettled(&self) -> u64 {
        self.evicted_unsettled
    }

    /// The hlc up to which every other site applied the partition.
    pub fn settled(&self) -> u64 {
        self.settled
    }

    /// Forgets the settled point (the data it was about is gone).
    pub(crate) fn unsettle(&mut self) {
        self.settled = 0;
    }

    /// Every other site applied the partition up to `hlc`, and this one's
    /// removals up to it reached every other site: the tombstones of
    /// removals at or below it go, oldest inserted first (one inserted
    /// later with an older removal goes once those before it went).
    pub(crate) fn settle(&mut self, hlc: u64) {
        if hlc <= self.settled {
            return;
        }
        self.settled = hlc;
        while let Some((_, _, _, at)) = self.order.front() {
            if *at > hlc {
                break;
            }
            let Some((k, what, v, _)) = self.order.pop_front() else {
                break;
            };
            if current(&self.keys, &k, &what) == Some(v) {
                self.remove(&k, &what);
            }
        }
        self.compact_order();
    }

    /// The key's floor: the version of its latest removal.
    pub fn key(&self, key: &[u8]) -> Option<Version> {
        self.keys.get(key)?.floor
    }

    /// The version at which the key was last a hash, if it then lost its
    /// last field.
    pub fn hash(&self, key: &[u8]) -> Option<Version> {
        self.emptied(key, Coll::Hash)
    }

    /// The version at which the key was last a collection of kind `coll`,
    /// if it then lost its last element.
    pub fn emptied(&self, key: &[u8], coll: Coll) -> Option<Version> {
        self.keys.get(key)?.emptied[coll as usize]
    }

    /// The newest version at which the key was a collection of any kind
    /// other than `except` (None: any kind) and lost its last element:
    /// a write of another type older than that lost to it.
    pub fn emptied_other(&self, key: &[u8], except: Option<Coll>) -> Option<Version> {
        let k = self.keys.get(key)?;
        [Coll::Hash, Coll::Set, Coll::ZSet]
            .into_iter()
            .filter(|c| Some(*c) != except)
            .filter_map(|c| k.emptied[c as usize])
            .max()
    }

    /// The field's own tombstone (not the key's floor).
    pub fn field(&self, key: &[u8], field: &[u8]) -> Option<Version> {
        self.keys.get(key)?.fields.get(field).copied()
    }

    /// A set's (or sorted set's) member's own tombstone (not the key's
    /// floor).
    pub fn member(&self, key: &[u8], coll: Coll, member: &[u8]) -> Option<Version> {
        self.keys.get(key)?.members[member_slot(coll)]
            .get(member)
            .copied()
    }

    /// The key's member tombstones of a set or sorted set, in no order.
    pub fn members(&self, key: &[u8], coll: Coll) -> impl Iterator<Item = (&Bytes, Version)> {
        self.keys
            .get(key)
            .into_iter()
            .flat_map(move |k| k.members[member_slot(coll)].iter().map(|(f, v)| (f, *v)))
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
            .filter(|(k, t, v, _)| current(&self.keys, k, t) == Some(*v))
            .map(|(k, t, v, _)| (k, t, *v))
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

    /// The key was a collection of kind `coll` at `v` (and holds no
    /// element now, or is created again: see [`Tombstones::take_emptied`]).
    pub(crate) fn emptied_at(&mut self, key: &Bytes, coll: Coll, v: Version) {
        if !self.enabled()
            || self.key(key).is_some_and(|f| f >= v)
            || self.emptied(key, coll).is_some_and(|h| h >= v)
        {
            return;
        }
        self.set(key, Tomb::Emptied(coll), v);
    }

    /// A collection of kind `coll` is created: its version starts from the
    /// version at which it last emptied, which it now holds itself.
    pub(crate) fn take_emptied(&mut self, key: &[u8], coll: Coll) -> Option<Version> {
        let v = self.emptied(key, coll)?;
        self.remove(key, &Tomb::Emptied(coll));
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

    /// Set or sorted-set members removed by a change of version `removal`,
    /// each as far as its version (an observed remove: see
    /// [`crate::DeltaOp::Remove`]); kept as field tombstones at those
    /// versions, settled as the removal.
    pub(crate) fn members_removed(
        &mut self,
        key: &Bytes,
        coll: Coll,
        members: &[(Bytes, Version)],
        removal: Version,
    ) {
        if !self.enabled() {
            return;
        }
        let floor = self.key(key);
        for (m, v) in members {
            if floor.is_some_and(|f| f >= *v)
                || self.member(key, coll, m).is_some_and(|old| old >= *v)
            {
                continue;
            }
            self.set_at(
                key,
                Tomb::Member(coll, m.clone()),
                *v,
                removal.hlc.max(v.hlc),
            );
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
        self.settled = 0;
        self.keys.clear();
        self.order.clear();
        self.live = 0;
        self.bytes = 0;
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
        for slot in &mut k.emptied {
            if slot.is_some_and(older) {
                *slot = None;
                freed += KEY_OVERHEAD + key.len();
                dropped += 1;
            }
        }
        let [set_members, zset_members] = &mut k.members;
        for map in [&mut k.fields, set_members, zset_members] {
            map.retain(|f, fv| {
                let keep = !older(*fv);
                if !keep {
                    freed += FIELD_OVERHEAD + key.len() + f.len();
                    dropped += 1;
                }
                keep
            });
        }
        let empty = k.is_empty();
        self.bytes -= freed;
        self.live -= dropped;
        if empty {
            self.keys.remove(key);
        }
    }

    /// Sets (or raises) one tombstone and queues it.
    fn set(&mut self, key: &Bytes, what: Tomb, v: Version) {
        self.set_at(key, what, v, v.hlc)
    }

    /// [`Tombstones::set`], settled once `at` is.
    fn set_at(&mut self, key: &Bytes, what: Tomb, v: Version, at: u64) {
        let k = self.keys.entry(key.clone()).or_default();
        let slot = match &what {
            Tomb::Key => &mut k.floor,
            Tomb::Emptied(c) => &mut k.emptied[*c as usize],
            Tomb::Field(f) | Tomb::Member(_, f) => {
                let map = match &what {
                    Tomb::Member(c, _) => &mut k.members[member_slot(*c)],
                    _ => &mut k.fields,
                };
                let fresh = map.insert(f.clone(), v).is_none();
                if fresh {
                    self.bytes += cost(key, &what);
                    self.live += 1;
                }
                return self.inserted(key, what, v, at);
            }
        };
        if slot.replace(v).is_none() {
            self.bytes += cost(key, &what);
            self.live += 1;
        }
        self.inserted(key, what, v, at);
    }

    fn inserted(&mut self, key: &Bytes, what: Tomb, v: Version, at: u64) {
        self.order.push_back((key.clone(), what, v, at));
        self.evict();
    }

    fn evict(&mut self) {
        while self.bytes > self.budget {
            let Some((k, what, v, at)) = self.order.pop_front() else {
                break;
            };
            if current(&self.keys, &k, &what) == Some(v) {
                if at > self.settled {
                    self.evicted_unsettled += 1;
                }
                self.remove(&k, &what);
            }
        }
        self.compact_order();
    }

    /// Superseded insertions stay queued until they reach the front; drops
    /// them in one pass when they outnumber the live ones.
    fn compact_order(&mut self) {
        if self.order.len() > 2 * self.live + 32 {
            let keys = &self.keys;
            self.order
                .retain(|(k, t, v, _)| current(keys, k, t) == Some(*v));
        }
    }

    fn remove(&mut self, key: &[u8], what: &Tomb) {
        let Some(k) = self.keys.get_mut(key) else {
            return;
        };
        let gone = match what {
            Tomb::Key => k.floor.take().is_some(),
            Tomb::Emptied(c) => k.emptied[*c as usize].take().is_some(),
            Tomb::Field(f) => k.fields.remove(f).is_some(),
            Tomb::Member(c, m) => k.members[member_slot(*c)].remove(m).is_some(),
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
        Tomb::Emptied(c) => k.emptied[*c as usize],
        Tomb::Field(f) => k.fields.get(f).copied(),
        Tomb::Member(c, m) => k.members[member_slot(*c)].get(m).copied(),
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
        let mut t = Tombstones::new(0);
        t.deleted(&b("k"), v(1, 0));
        t.fields_deleted(&b("k"), &[b("f")], v(1, 1));
        assert!(t.is_empty());
        assert_eq!(t.key(b"k"), None);
        assert_eq!(t.bytes(), 0);
    }

    #[test]
    fn floors_cover_older_field_tombstones_and_puts_drop_older_ones() {
        let mut t = Tombstones::new(1 << 20);
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
        let mut t = Tombstones::new(1 << 20);
        let k = b("k");
        t.emptied_at(&k, Coll::Hash, v(5, 0));
        t.emptied_at(&k, Coll::Hash, v(4, 0));
        assert_eq!(t.hash(b"k"), Some(v(5, 0)));
        assert_eq!(t.take_emptied(b"k", Coll::Hash), Some(v(5, 0)));
        assert!(t.is_empty() && t.bytes() == 0);
        t.emptied_at(&k, Coll::Hash, v(5, 0));
        t.deleted(&k, v(4, 0));
        assert_eq!((t.key(b"k"), t.hash(b"k")), (Some(v(4, 0)), Some(v(5, 0))));
        t.deleted(&k, v(6, 0));
        assert_eq!(
            (t.key(b"k"), t.hash(b"k"), t.len()),
            (Some(v(6, 0)), None, 1)
        );
        t.emptied_at(&k, Coll::Hash, v(5, 5));
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
        let mut t = Tombstones::new(per * 10);
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

    /// However old, a tombstone stays until the other sites passed it;
    /// then those at or below the settled hlc go, and one evicted over
    /// budget before that is counted.
    #[test]
    fn tombstones_go_when_settled_not_by_age() {
        let mut t = Tombstones::new(1 << 20);
        t.deleted(&b("a"), v(10_000, 0));
        t.deleted(&b("b"), v(10_500, 0));
        t.deleted(&b("c"), v(3_600_000_000, 0));
        t.fields_deleted(&b("h"), &[b("f")], v(7_200_000_000, 0));
        assert_eq!(t.len(), 4, "no age limit");
        t.settle(v(10_500, 0).hlc);
        assert_eq!((t.key(b"a"), t.key(b"b")), (None, None));
        assert!(t.key(b"c").is_some() && t.field(b"h", b"f").is_some());
        t.settle(v(10_000, 0).hlc);
        assert_eq!(
            t.settled(),
            { v(10_500, 0).hlc },
            "settled never moves back"
        );
        assert_eq!(t.evicted_unsettled(), 0);
        let per = cost(b"key00", &Tomb::Key);
        let mut t = Tombstones::new(per * 2);
        for i in 0..3u64 {
            t.deleted(&b(&format!("key{i:02}")), v(1, i));
        }
        assert_eq!(t.evicted_unsettled(), 1);
        t.settle(v(1, 2).hlc);
        assert!(t.is_empty());
    }

    #[test]
    fn many_updates_of_one_key_keep_the_queue_short() {
        let mut t = Tombstones::new(1 << 20);
        for i in 0..10_000 {
            t.deleted(&b("k"), v(1, i));
        }
        assert_eq!(t.len(), 1);
        assert!(t.order.len() <= 40);
    }
}
