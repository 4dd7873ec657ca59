//! Changes from other sites (the WAN receiver), resolved on the primary.
//!
//! Two sites can change a key concurrently; each ships what it logged to the
//! other, in log order. [`Keyspace::apply_remote`] decides, under the
//! partition lock, what of an incoming change wins against what the
//! partition holds, and applies and logs only that (with the change's own
//! version, through the normal log, so backups and near caches follow). The
//! rules make every site end with the same contents whatever the
//! interleaving of the streams, given tombstones (see
//! [`crate::tombstones`]):
//!
//! - Versions `(hlc, site)` order everything: last writer wins.
//! - Hash fields carry their own versions and merge field by field; a field
//!   removal (HDEL) leaves a field tombstone, a key removal a floor.
//! - The type of a key is last writer wins too: a string write (SET,
//!   APPEND...) against a hash of a newer version loses, but still removes
//!   the fields older than itself (it overwrote the key); a hash operation
//!   newer than a string replaces it. A hash that loses its last field
//!   leaves its version as a tombstone, so that an older string arriving
//!   later still loses to it.
//! - A delta on a string (and an expiry change) needs the exact version it
//!   was made from; on any other version the answer is
//!   [`RemoteOutcome::NeedFull`]: the sender ships the key as it now holds
//!   it ([`Partition::full_changes`]). A full hash is merged field by
//!   field whatever its version (it may carry fields whose own changes could
//!   not be applied here); the merge is logged as a full value at the newer
//!   of the two versions.
//!
//! Only changes that originated at this site may be shipped on (filter the
//! log by `version.site`): what this logs keeps the remote version, except
//! an Expire of a key found expired here, which is this site's own change.
//!
//! Known limits: a key's expiry has no version of its own, so an EXPIRE
//! racing, from another site, a field write to the same hash or a write of
//! the other type can end differently at the sites. Tombstones are kept
//! until every other site passed them ([`Keyspace::settle_tombstones`]);
//! only one evicted over `tombstone_bytes` before that (counted) lets a
//! change older than it bring data back.

use bytes::Bytes;

mod counters;
mod members;
mod raises;
mod scores;
mod whole;

use whole::{emptied_at, settled_away};

use super::Keyspace;
use crate::apply::{apply_change_at, ApplyError};
use crate::change::{Change, ChangeKind, DeltaOp};
use crate::partition::Partition;
use crate::tombstones::{Coll, Tombstones};
use crate::value::{Entry, Value};
use crate::version::Version;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteOutcome {
    /// The change (or the part of it that won) was applied and logged.
    Applied,
    /// This exact change was already applied: nothing to do.
    Duplicate,
    /// What this copy holds is newer: the change lost (a part of it that
    /// still applies, e.g. a string write removing older hash fields, may
    /// have been logged).
    ConflictLost,
    /// A delta whose base this copy does not hold: the sender must ship the
    /// full value ([`Partition::full_changes`]).
    NeedFull,
}

use RemoteOutcome::*;

impl Keyspace {
    /// Applies a change that originated at another site, on a partition this
    /// node is primary for, resolving conflicts by version (last writer wins
    /// on `(hlc, site)`; hash fields merge field by field; see the module
    /// docs). What it changes is logged with the change's own version (a
    /// merged full hash: the newer of its and the held one), through the
    /// same path as local writes (so the [`crate::ReplicationSink`],
    /// backups and the [`crate::ChangeObserver`] see it), as a change that
    /// replayed by [`apply_change`](crate::apply::apply_change) on a backup gives the same result.
    /// `origin` is the client the observer is told about.
    ///
    /// On a partition held as a backup it refuses with
    /// [`ApplyError::NotPrimary`]; a change whose version lies further
    /// ahead of this node's clock than `max_clock_offset` with
    /// [`ApplyError::ClockAhead`] (counted; the sender retries, and it
    /// applies once this clock has caught up). An error leaves the change
    /// unapplied.
    pub fn apply_remote(&self, change: Change, origin: u64) -> Result<RemoteOutcome, ApplyError> {
        if let Some(ahead_ms) = self.hlc.too_far_ahead(change.version.hlc) {
            return Err(ApplyError::ClockAhead {
                ahead_ms,
                max_ms: self.hlc.max_offset_ms(),
            });
        }
        self.hlc.observe(change.version.hlc);
        let key = change.key.clone();
        let mut touched = false;
        let result = {
            let mut part = self.parts[self.partition_of(&key)].lock();
            if part.replica {
                return Err(ApplyError::NotPrimary);
            }
            // As on the write path: an expired key is removed first, by a
            // logged Expire of this site. The key is hashed once: what
            // follows goes by index.
            let now = self.now_ms();
            let mut at = part.index_of(&key);
            if at
                .and_then(|i| part.get_index(i))
                .is_some_and(|(_, e)| e.is_expired(now))
            {
                let expire = Change {
                    key: key.clone(),
                    version: self.version(),
                    kind: ChangeKind::Expire,
                };
                // Removing a key cannot fail.
                let _ = apply_change_at(&mut part, at, &expire);
                self.record(&mut part, &expire, 0);
                touched = true;
                at = None;
            }
            let (outcome, effect) = resolve(&part, at, change);
            match effect {
                // The effect is a change of the same key.
                Some(effect) => apply_change_at(&mut part, at, &effect).map(|()| {
                    self.record(&mut part, &effect, 0);
                    touched = true;
                    outcome
                }),
                None => {
                    self.written_through_now(&part);
                    Ok(outcome)
                }
            }
        };
        if touched {
            if let Some(o) = self.observer() {
                o.changed(&[key], origin);
            }
        }
        result
    }

    /// What to ship to a site that answered [`RemoteOutcome::NeedFull`] for
    /// `key`; see [`Partition::full_changes`].
    pub fn full_changes(&self, key: &[u8]) -> Vec<Change> {
        let key = Bytes::copy_from_slice(key);
        self.parts[self.partition_of(&key)]
            .lock()
            .full_changes(&key)
    }
}

/// Same version: this change was seen; older: it lost.
fn lost(held: Version, v: Version) -> RemoteOutcome {
    if held == v {
        Duplicate
    } else {
        ConflictLost
    }
}

/// What of `change` wins against `part`, and the change to apply and log
/// for it (None: nothing). Reads only.
/// `at`: where the partition's map holds the change's key, if it does.
fn resolve(
    part: &Partition,
    at: Option<usize>,
    mut change: Change,
) -> (RemoteOutcome, Option<Change>) {
    let v = change.version;
    let tombs = &part.tombstones;
    // The key was removed at or after v: everything v wrote is gone. A
    // whole string at exactly the removal's version is the HyperLogLog
    // raises made from nothing after it (see raises).
    let made_at_floor = matches!(&change.kind, ChangeKind::Full { value: Value::Str(b), .. }
        if crate::hll::encoding_of(b).is_ok());
    if let Some(floor) = tombs
        .key(&change.key)
        .filter(|f| *f > v || (*f == v && !made_at_floor))
    {
        return (lost(floor, v), None);
    }
    let entry = at.and_then(|i| part.get_index(i)).map(|(_, e)| e);
    if settled_away(tombs.settled(), entry, &mut change) {
        return (ConflictLost, None);
    }
    let key = &change.key;
    let coll_of_change = match &change.kind {
        ChangeKind::Full { value, .. } => value.coll(),
        ChangeKind::Delta { op, .. } => op.coll(),
        _ => None,
    };
    if let (None, Some(c)) = (entry, coll_of_change) {
        // The key was a collection of another kind after v: this write
        // lost to it (and removes what is older, when it arrives).
        if tombs.emptied_other(key, Some(c)).is_some_and(|m| m >= v) {
            return overwrite_loses(None, tombs, change);
        }
    }
    let hash = entry.and_then(Entry::as_hash);
    let coll = entry.map(|e| &e.value).filter(|v| v.is_collection());
    match &change.kind {
        ChangeKind::Full {
            value: Value::Set(_) | Value::ZSet(_),
            ..
        } => members::full(entry, tombs, change),
        ChangeKind::Delta {
            op: DeltaOp::SetAdd { .. } | DeltaOp::ZAdd { .. },
            ..
        } => members::add(entry, tombs, change),
        ChangeKind::Delta {
            op: DeltaOp::Remove { .. },
            ..
        } => members::remove(entry, tombs, change),
        ChangeKind::Delta {
            op: DeltaOp::Count { .. } | DeltaOp::FloatCount { .. },
            ..
        } => counters::count(entry, tombs, change),
        ChangeKind::Delta {
            op: DeltaOp::ZCount { .. },
            ..
        } => scores::count(entry, tombs, change),
        ChangeKind::Delta {
            op: DeltaOp::ZAssign { .. },
            ..
        } => scores::assign(entry, tombs, change),
        ChangeKind::Delta {
            op: DeltaOp::HllMax { .. } | DeltaOp::BitsOr { .. },
            ..
        } => raises::max(entry, tombs, change),
        ChangeKind::Full {
            value: Value::Str(theirs),
            ..
        } if raises::same_assignment(entry, v, theirs) => raises::join(entry, change),
        ChangeKind::Delta {
            op: DeltaOp::HashCount { .. } | DeltaOp::HashFloatCount { .. },
            ..
        } => match entry.filter(|_| hash.is_none()) {
            Some(e) => type_conflict(e, tombs, change),
            None => counters::count_field(hash, tombs, change),
        },
        ChangeKind::Full { value, .. } if counters::meets(entry, value) => match entry {
            Some(e) => counters::join(e, tombs, change),
            None => unreachable!("meets a held counter"),
        },
        ChangeKind::Full {
            value: Value::Str(_) | Value::Counter(_) | Value::List(_),
            ..
        } => match entry {
            None if tombs.emptied_other(key, None).is_some_and(|h| h >= v) => {
                overwrite_loses(None, tombs, change)
            }
            Some(e) if e.version >= v => match (coll, &e.value, &change.kind) {
                (Some(c), ..) => overwrite_loses(Some(c), tombs, change),
                // A list overwrote the key at v: what of a newer counter
                // is older goes, as where the counter replaced the list.
                (
                    None,
                    Value::Counter(c),
                    ChangeKind::Full {
                        value: Value::List(_),
                        ..
                    },
                ) if c.has_older_than(v) => overwrite_loses(Some(&e.value), tombs, change),
                (None, ..) => (lost(e.version, v), None),
            },
            _ => (Applied, Some(change)),
        },
        ChangeKind::Full {
            value: Value::Hash(incoming),
            expire_at,
        } => {
            // A full hash is the sender's state (an answer to NeedFull, a
            // snapshot): merged whatever the versions, because it may carry
            // fields whose own changes could not be applied here.
            if let Some(e) = entry.filter(|e| hash.is_none() && e.version >= v) {
                // A string or another collection newer than all of it.
                return type_conflict(e, tombs, change);
            }
            // Each field keeps its newest version; fields removed here after
            // the incoming version (tombstones, or a string's overwrite)
            // stay removed.
            let string_floor = entry
                .filter(|_| hash.is_none())
                .map(|e| e.version)
                .max(tombs.emptied_other(key, Some(Coll::Hash)));
            let mut merged = hash.cloned().unwrap_or_default();
            let mut changed = false;
            for (name, f) in incoming.iter() {
                let removal = string_floor.max(tombs.field_or_key(key, name));
                if merged.counter(name).is_some() || incoming.counter(name).is_some() {
                    // A counter on either side: joined (counters::field).
                    changed |= counters::join_field(&mut merged, incoming, name, removal);
                    continue;
                }
                let removed = removal.is_some_and(|r| r >= f.version);
                let newer_here = merged
                    .get(name)
                    .is_some_and(|here| here.version >= f.version);
                if !removed && !newer_here {
                    merged.set(
                        Bytes::copy_from_slice(name),
                        Bytes::copy_from_slice(f.value),
                        f.version,
                    );
                    changed = true;
                }
            }
            let (version, expire_at) = match entry.filter(|_| hash.is_some()) {
                Some(e) if e.version > v && !changed => return (lost(e.version, v), None),
                Some(e) if e.version == v && !changed && e.expire_at == *expire_at => {
                    return (lost(e.version, v), None)
                }
                // The newer of the two decides the expiry; at the same version
                // the sender's (its state at that version: an expiry applied
                // there whose change could not be applied here comes so).
                Some(e) if e.version > v => (e.version, e.expire_at),
                _ => (v, *expire_at),
            };
            if merged.is_empty() {
                // Nothing of it survives here, but the key was a hash at v:
                // an older string goes, and the hash version is kept.
                let string = entry.is_some();
                return match string || (tombs.enabled() && tombs.hash(key).is_none_or(|h| h < v)) {
                    true => (
                        if string { Applied } else { ConflictLost },
                        Some(hash_at(change.key.clone(), v)),
                    ),
                    false => (ConflictLost, None),
                };
            }
            let kind = ChangeKind::Full {
                value: Value::Hash(merged),
                expire_at,
            };
            (
                Applied,
                Some(Change {
                    key: change.key.clone(),
                    version,
                    kind,
                }),
            )
        }
        ChangeKind::Delta {
            base,
            op:
                op @ (DeltaOp::Splice { .. }
                | DeltaOp::Patch { .. }
                | DeltaOp::Checked { .. }
                | DeltaOp::IncrBy(_)
                | DeltaOp::ListEdit { .. }
                | DeltaOp::SetExpiry(_)),
        } => match entry {
            // The key was a hash after v: a string write lost to it, an
            // expiry change is older than what removed the hash.
            None if tombs.emptied_other(key, None).is_some_and(|h| h >= v) => match op.needs_base()
            {
                true => overwrite_loses(None, tombs, change),
                false => (ConflictLost, None),
            },
            None => (NeedFull, None),
            Some(e) if e.version == v => (Duplicate, None),
            // A string written whole (an assignment) against a counter:
            // joined from the sender's full value (see counters).
            Some(Entry {
                value: Value::Counter(c),
                ..
            }) => match op.needs_base() {
                true if c.assigned() == v => (Duplicate, None),
                true => (NeedFull, None),
                false => counters::expiry(c, change),
            },
            // A string write against a newer hash loses (removing older
            // fields); against an older one it wins, with its full value.
            Some(e) if coll.is_some() && op.needs_base() => match coll {
                Some(c) if e.version > v => overwrite_loses(Some(c), tombs, change),
                _ => (NeedFull, None),
            },
            Some(e) if e.version > v => (ConflictLost, None),
            // A string delta made on other bytes of the same version (raised
            // here or there): the sender's full value.
            Some(e) if e.version == *base => match op {
                DeltaOp::Checked { base_hash, .. }
                    if e.as_str()
                        .is_none_or(|b| crate::bits::bytes_hash(b) != *base_hash) =>
                {
                    (NeedFull, None)
                }
                // Edits that do not fit the list held (or no list): the
                // sender's whole list.
                DeltaOp::ListEdit { edits } if e.as_list().is_none_or(|l| !l.fits(edits)) => {
                    (NeedFull, None)
                }
                _ => (Applied, Some(change)),
            },
            Some(_) => (NeedFull, None),
        },
        ChangeKind::Delta {
            base,
            op: DeltaOp::HashSet { fields },
        } => {
            if let Some(e) = entry.filter(|e| e.value.is_collection() && hash.is_none()) {
                return type_conflict(e, tombs, change);
            }
            if let Some(e) = entry.filter(|e| matches!(e.value, Value::Counter(_))) {
                return type_conflict(e, tombs, change);
            }
            if let Some(e) = entry.filter(|_| hash.is_none()) {
                // A string here: older, the sender's hash replaces it.
                return match e.version >= v {
                    true => (lost(e.version, v), None),
                    false => (NeedFull, None),
                };
            }
            if hash.is_some_and(|h| fields.iter().any(|(n, _)| h.counter(n).is_some())) {
                // A counter field written whole: joined as an assignment,
                // from the sender's hash (see counters::join_field).
                return (NeedFull, None);
            }
            let mut seen = false;
            let mut wins = Vec::new();
            for (name, value) in fields {
                let here = hash
                    .and_then(|h| h.get(name))
                    .map(|f| f.version)
                    .max(tombs.field(key, name));
                match here {
                    Some(h) if h >= v => seen |= h == v,
                    _ => wins.push((name.clone(), value.clone())),
                }
            }
            winners(
                change.key.clone(),
                v,
                *base,
                fields.len(),
                wins,
                seen,
                change,
                |fields| DeltaOp::HashSet { fields },
            )
        }
        ChangeKind::Delta {
            base,
            op: DeltaOp::HashDel { fields },
        } => {
            if let Some(e) = entry.filter(|_| hash.is_none()) {
                // The key was a hash at v: an older value of another type
                // lost to it (the change removes it, see apply_change).
                return match e.version >= v {
                    true => type_conflict(e, tombs, change),
                    false => (Applied, Some(change)),
                };
            }
            if fields.is_empty() {
                // Only "a hash at v" (a resync of a key that lost its last
                // field): it raises the hash's version.
                let held = match hash {
                    Some(_) => entry.map(|e| e.version),
                    None if tombs.enabled() => tombs.hash(key),
                    None => return (Duplicate, None),
                };
                return match held {
                    Some(h) if h >= v => (lost(h, v), None),
                    _ => (Applied, Some(change)),
                };
            }
            let mut seen = false;
            let mut doomed = Vec::new();
            for name in fields {
                match hash.and_then(|h| h.get(name)) {
                    // A counter written since still loses what is older.
                    Some(f)
                        if f.version > v
                            && hash
                                .and_then(|h| h.counter(name))
                                .is_some_and(|c| c.has_older_than(v)) =>
                    {
                        doomed.push(name.clone())
                    }
                    Some(f) if f.version >= v => seen |= f.version == v,
                    Some(_) => doomed.push(name.clone()),
                    // Not held: only a field tombstone to record, so that
                    // an older write of the field arriving later loses.
                    None => match tombs.field(key, name) {
                        Some(t) if t >= v => seen |= t == v,
                        _ if tombs.enabled() => doomed.push(name.clone()),
                        // Without tombstones a field not held needs nothing.
                        _ => seen = true,
                    },
                }
            }
            winners(
                change.key.clone(),
                v,
                *base,
                fields.len(),
                doomed,
                seen,
                change,
                |fields| DeltaOp::HashDel { fields },
            )
        }
        // Never shipped between sites (an eviction is local): ignored.
        ChangeKind::Evict => (Duplicate, None),
        ChangeKind::Delete | ChangeKind::Expire => match entry {
            None if tombs.enabled() => (Applied, Some(change)),
            None => (Duplicate, None),
            Some(e) if e.version < v => (Applied, Some(change)),
            // A counter newer than the removal keeps what is newer of it
            // (see apply_change).
            Some(Entry {
                value: Value::Counter(c),
                ..
            }) if c.has_older_than(v) => (Applied, Some(change)),
            Some(e) if !e.value.is_collection() => (lost(e.version, v), None),
            // A collection newer than the removal keeps its newer
            // elements; the change (see apply_change) removes the older
            // ones and leaves the floor.
            Some(e) if e.value.has_element_older_than(v) => (Applied, Some(change)),
            Some(_) if tombs.enabled() => (ConflictLost, Some(change)),
            Some(_) => (ConflictLost, None),
        },
    }
}

/// A string write (full or delta) at version v against a collection (a
/// hash, set or sorted set) of a newer
/// version (held, or gone with its last field): the string loses, but it
/// overwrote the key, so the fields older than v go, now or when they
/// arrive. Logged as a Delete at v, which removes exactly those (see
/// apply_change) and leaves the floor.
fn overwrite_loses(
    coll: Option<&Value>,
    tombs: &Tombstones,
    change: Change,
) -> (RemoteOutcome, Option<Change>) {
    if tombs.enabled() || coll.is_some_and(|c| c.has_element_older_than(change.version)) {
        let delete = Change {
            key: change.key,
            version: change.version,
            kind: ChangeKind::Delete,
        };
        return (ConflictLost, Some(delete));
    }
    (ConflictLost, None)
}

/// A write at version v against a held value of another type: an older
/// one needs the sender's full value (which replaces it); a newer string
/// makes it lose; a newer collection makes it lose too, but the write
/// overwrote the key, so the collection's elements older than v go
/// ([`overwrite_loses`]).
fn type_conflict(e: &Entry, tombs: &Tombstones, change: Change) -> (RemoteOutcome, Option<Change>) {
    let v = change.version;
    let mark = matches!(&change.kind, ChangeKind::Delta { op: DeltaOp::SetAdd { members }, .. } if members.is_empty())
        || matches!(&change.kind, ChangeKind::Delta { op: DeltaOp::ZAdd { members }, .. } if members.is_empty());
    match (e.version >= v, e.value.is_collection()) {
        // "The key was a collection at v, and emptied": what is older
        // goes (see apply_change).
        (false, _) if mark => (Applied, Some(change)),
        (false, _) => (NeedFull, None),
        // A counter keeps what is newer than the write (see counters).
        (true, false) => match &e.value {
            Value::Counter(c) if c.has_older_than(v) => {
                overwrite_loses(Some(&e.value), tombs, change)
            }
            _ => (lost(e.version, v), None),
        },
        (true, true) => overwrite_loses(Some(&e.value), tombs, change),
    }
}

/// "The key was a collection at v" (it lost its last element): an HDEL of
/// no field.
fn hash_at(key: Bytes, v: Version) -> Change {
    Change {
        key,
        version: v,
        kind: ChangeKind::Delta {
            base: Version::ZERO,
            op: DeltaOp::HashDel { fields: Vec::new() },
        },
    }
}

/// The outcome of a hash field operation of which `kept` of `total`
/// fields won: all of them log the change as it came, some log an op of
/// just those; none is a duplicate when some field is at exactly v (this
/// change was applied: versions are unique), else the change lost.
#[allow(clippy::too_many_arguments)]
fn winners<T>(
    key: Bytes,
    v: Version,
    base: Version,
    total: usize,
    kept: Vec<T>,
    seen: bool,
    change: Change,
    op: impl FnOnce(Vec<T>) -> DeltaOp,
) -> (RemoteOutcome, Option<Change>) {
    if kept.is_empty() {
        return (if seen { Duplicate } else { ConflictLost }, None);
    }
    if kept.len() == total {
        return (Applied, Some(change));
    }
    (
        Applied,
        Some(Change {
            key,
            version: v,
            kind: ChangeKind::Delta { base, op: op(kept) },
        }),
    )
}

#[cfg(test)]
mod tests;
