//! Set and sorted-set changes from another site, resolved against what the
//! partition holds (the hash rules are in the parent module).
//!
//! - Members merge one by one, each by its own version: an add (SADD, a
//!   ZADD score) wins over what is held of the member when it is newer,
//!   and over a member tombstone when it is newer than the version that
//!   tombstone records. A removal records the version of the add it
//!   observed (an observed remove), not its own: an add the remover had
//!   not seen is newer than that and stays. So a concurrent add wins over
//!   a remove, and the sites agree whatever the order the changes arrive.
//! - Sorted-set scores are last writer wins per member (a ZADD), except
//!   where ZINCRBY made a member's score a counter: then increments sum
//!   and a ZADD is an assignment joined into it (see `scores`).
//! - A key of another type: the newer write decides (a newer one here
//!   makes the change lose; an older one is replaced by the sender's full
//!   value, asked for with `NeedFull`).
//! - A full set or sorted set (a re-sync, an answer to `NeedFull`) merges
//!   member by member whatever its version, as a full hash does.

use bytes::Bytes;

use super::{emptied_at, lost, scores, type_conflict, winners, RemoteOutcome};
use crate::change::{Change, ChangeKind, DeltaOp};
use crate::tombstones::{Coll, Tombstones};
use crate::value::{Entry, Value};
use crate::version::Version;

use RemoteOutcome::*;

/// The newest of what is held of member `name` and its tombstone.
fn here(
    entry: Option<&Entry>,
    tombs: &Tombstones,
    key: &[u8],
    coll: Coll,
    name: &[u8],
) -> Option<Version> {
    entry
        .and_then(|e| e.value.element_version(name))
        .max(tombs.member(key, coll, name))
}

/// An add of no member: "the key was a set (sorted set) at v, and
/// emptied". It raises a held one's version, or is kept as a mark.
fn mark(
    entry: Option<&Entry>,
    tombs: &Tombstones,
    coll: Coll,
    change: Change,
) -> (RemoteOutcome, Option<Change>) {
    let v = change.version;
    let key = &change.key;
    let held = match entry {
        Some(e) => Some(e.version),
        None if tombs.enabled() => tombs.emptied(key, coll),
        None => return (Duplicate, None),
    };
    match held {
        Some(h) if h >= v => (lost(h, v), None),
        _ => (Applied, Some(change)),
    }
}

/// SADD or ZADD at the change's version.
pub(super) fn add(
    entry: Option<&Entry>,
    tombs: &Tombstones,
    change: Change,
) -> (RemoteOutcome, Option<Change>) {
    let (coll, empty) = match &change.kind {
        ChangeKind::Delta {
            op: DeltaOp::SetAdd { members },
            ..
        } => (Coll::Set, members.is_empty()),
        ChangeKind::Delta {
            op: DeltaOp::ZAdd { members },
            ..
        } => (Coll::ZSet, members.is_empty()),
        _ => unreachable!("not an add"),
    };
    if let Some(e) = entry.filter(|e| e.value.coll() != Some(coll)) {
        return type_conflict(e, tombs, change);
    }
    if empty {
        return mark(entry, tombs, coll, change);
    }
    let Change { key, version, kind } = change;
    let ChangeKind::Delta { base, op } = kind else {
        unreachable!("an add is a delta")
    };
    let added = Added {
        entry,
        tombs,
        key,
        version,
        base,
        coll,
    };
    match op {
        DeltaOp::SetAdd { members } => added.winners(
            members,
            |m| m,
            |_| None,
            |members| DeltaOp::SetAdd { members },
        ),
        DeltaOp::ZAdd { members } => {
            // A member named twice takes its last score.
            let mut named = std::collections::HashSet::new();
            let mut members: Vec<(Bytes, f64)> = members
                .into_iter()
                .rev()
                .filter(|(m, _)| named.insert(m.clone()))
                .collect();
            members.reverse();
            let z = entry.and_then(|e| match &e.value {
                Value::ZSet(z) => Some(z),
                _ => None,
            });
            let key = added.key.clone();
            added.winners(
                members,
                |(m, _)| m,
                // A member whose score is a counter here: the assignment
                // is joined into it, and wins when that changes it.
                |(m, score)| {
                    z.and_then(|z| scores::assign_changes(z, tombs, &key, m, *score, version))
                },
                |members| DeltaOp::ZAdd { members },
            )
        }
        _ => unreachable!("not an add"),
    }
}

/// An add of members of a set or sorted set, taken apart.
struct Added<'a> {
    entry: Option<&'a Entry>,
    tombs: &'a Tombstones,
    key: Bytes,
    version: Version,
    base: Version,
    coll: Coll,
}

impl Added<'_> {
    /// The members that win (newer than what is held of them and their
    /// tombstone), as the add to apply and log: the whole add when all
    /// do. None: a duplicate (a member at exactly this version) or lost.
    /// `joined` decides a member that is joined rather than compared by
    /// version (Some(true): it changes what is held).
    fn winners<T>(
        self,
        members: Vec<T>,
        name: impl Fn(&T) -> &Bytes,
        joined: impl Fn(&T) -> Option<bool>,
        op: impl FnOnce(Vec<T>) -> DeltaOp,
    ) -> (RemoteOutcome, Option<Change>) {
        let v = self.version;
        let mut seen = false;
        let mut wins = Vec::with_capacity(members.len());
        for m in members {
            let here = here(self.entry, self.tombs, &self.key, self.coll, name(&m));
            match (joined(&m), here) {
                (Some(true), _) => wins.push(m),
                (Some(false), h) => seen |= h == Some(v),
                (None, Some(h)) if h >= v => seen |= h == v,
                (None, _) => wins.push(m),
            }
        }
        if wins.is_empty() {
            return (if seen { Duplicate } else { ConflictLost }, None);
        }
        let kind = ChangeKind::Delta {
            base: self.base,
            op: op(wins),
        };
        (
            Applied,
            Some(Change {
                key: self.key,
                version: v,
                kind,
            }),
        )
    }
}

/// An observed remove of members (SREM, ZREM, SPOP..., or an element
/// tombstone of any collection replayed by a re-sync).
pub(super) fn remove(
    entry: Option<&Entry>,
    tombs: &Tombstones,
    change: Change,
) -> (RemoteOutcome, Option<Change>) {
    let v = change.version;
    let key = &change.key;
    let ChangeKind::Delta {
        base,
        op: DeltaOp::Remove { coll, members },
    } = &change.kind
    else {
        unreachable!("not a remove")
    };
    let coll = *coll;
    if let Some(e) = entry.filter(|e| e.value.coll() != Some(coll)) {
        return type_conflict(e, tombs, change);
    }
    let mut seen = false;
    let mut doomed = Vec::new();
    for (m, upto) in members {
        let counter_floor = entry.and_then(|e| match &e.value {
            Value::ZSet(z) => z.counter(m).map(|c| c.floor()),
            _ => None,
        });
        match entry.and_then(|e| e.value.element_version(m)) {
            // A score counter written since: what of it the remover saw
            // goes (see apply_change).
            Some(held) if held > *upto && counter_floor.is_some_and(|f| f < *upto) => {
                doomed.push((m.clone(), *upto))
            }
            // Added again after what the remover saw: the add wins.
            Some(held) if held > *upto => seen = true,
            Some(_) => doomed.push((m.clone(), *upto)),
            None => match tombs.member(key, coll, m).max(tombs.key(key)) {
                Some(t) if t >= *upto => seen = true,
                // Only a tombstone to keep, so that the add it removed
                // loses when it arrives later.
                _ if tombs.enabled() => doomed.push((m.clone(), *upto)),
                _ => seen = true,
            },
        }
    }
    let raises = match entry {
        Some(e) => e.version < v,
        None => tombs.enabled() && tombs.emptied(key, coll).is_none_or(|m| m < v),
    };
    if doomed.is_empty() && raises {
        // Nothing left to remove here, but the removal was a write of the
        // key at v where it was made: its version follows (kept as the
        // mark a collection created later starts from, when none is held).
        return (Applied, Some(change));
    }
    let (total, base) = (members.len(), *base);
    winners(
        key.clone(),
        v,
        base,
        total,
        doomed,
        seen,
        change,
        |members| DeltaOp::Remove { coll, members },
    )
}

/// A whole set or sorted set from another site, merged member by member.
pub(super) fn full(
    entry: Option<&Entry>,
    tombs: &Tombstones,
    change: Change,
) -> (RemoteOutcome, Option<Change>) {
    let v = change.version;
    let key = &change.key;
    let ChangeKind::Full {
        value: incoming,
        expire_at,
    } = &change.kind
    else {
        unreachable!("not a full value")
    };
    // Another type held: newer, this lost (and removes what is older than
    // it); older, it was overwritten at its version, as far as that goes.
    let overwritten = match entry.filter(|e| !e.value.same_type(incoming)) {
        Some(e) if e.version >= v => return type_conflict(e, tombs, change),
        Some(e) => Some(e.version),
        None => None,
    };
    let same = entry.filter(|e| e.value.same_type(incoming));
    let mut merged = match same {
        Some(e) => e.value.clone(),
        None => match incoming {
            Value::Set(_) => Value::Set(Default::default()),
            _ => Value::ZSet(Default::default()),
        },
    };
    let mut changed = false;
    let coll = incoming.coll().unwrap_or(Coll::Set);
    // A collection of another kind emptied here after an element was
    // written: it overwrote the element.
    let other_kind = tombs.emptied_other(key, Some(coll));
    for (name, mv) in element_versions(incoming) {
        let removal = tombs
            .member(key, coll, &name)
            .max(tombs.key(key))
            .max(overwritten)
            .max(other_kind);
        if let (Value::ZSet(to), Value::ZSet(from)) = (&mut merged, incoming) {
            if to.counter(&name).is_some() || from.counter(&name).is_some() {
                // A score counter on either side: joined (see scores).
                changed |= scores::join_member(to, from, &name, removal);
                continue;
            }
        }
        let removed = removal.is_some_and(|t| t >= mv);
        let newer_here = merged.element_version(&name).is_some_and(|h| h >= mv);
        if !removed && !newer_here {
            copy_element(&mut merged, incoming, &name);
            changed = true;
        }
    }
    let (version, expire_at) = match same {
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
    if merged.is_empty_collection() {
        // Nothing of it survives here, but the key was a collection at v:
        // an older value of another type goes.
        let other = overwritten.is_some();
        return match other || (tombs.enabled() && tombs.emptied(key, coll).is_none_or(|h| h < v)) {
            true => (
                if other { Applied } else { ConflictLost },
                Some(emptied_at(key.clone(), coll, v)),
            ),
            false => (ConflictLost, None),
        };
    }
    let kind = ChangeKind::Full {
        value: merged,
        expire_at,
    };
    (
        Applied,
        Some(Change {
            key: key.clone(),
            version,
            kind,
        }),
    )
}

/// Every element of a set or sorted set with its version.
fn element_versions(value: &Value) -> Vec<(Bytes, Version)> {
    match value {
        Value::Set(s) => s
            .iter()
            .map(|(m, v)| (Bytes::copy_from_slice(m), v))
            .collect(),
        Value::ZSet(z) => z
            .iter()
            .map(|(m, x)| (Bytes::copy_from_slice(m), x.version))
            .collect(),
        _ => Vec::new(),
    }
}

/// Sets element `name` of `to` as `from` (of the same type) holds it.
fn copy_element(to: &mut Value, from: &Value, name: &Bytes) {
    match (to, from) {
        (Value::Set(to), Value::Set(from)) => {
            if let Some(v) = from.version_of(name) {
                to.remove(name);
                to.add(name, v);
            }
        }
        (Value::ZSet(to), Value::ZSet(from)) => {
            if let Some(x) = from.get(name) {
                to.remove(name);
                to.insert(name, x.score, x.version);
            }
        }
        _ => {}
    }
}
