//! Merging sorted-set scores that ZINCRBY made counters (see
//! [`crate::value::ScoreCounter`]): an increment is applied as its site's
//! running total of the member's increments (newer than what is held of
//! that site, else it was seen); a ZADD of a member held as a counter, and
//! a member in a full sorted set meeting one, are joined (the newer
//! assignment wins, every site's newest total is kept), so sites agree
//! whatever order the changes arrive in.

use bytes::Bytes;

use super::{lost, type_conflict, RemoteOutcome};
use crate::change::{Change, ChangeKind, DeltaOp};
use crate::tombstones::{Coll, Tombstones};
use crate::value::{Entry, ScoreCounter, Value, ZSetValue};
use crate::version::Version;

use RemoteOutcome::*;

/// The newest removal of member `name` of `key` here: its tombstone (the
/// version the removal observed) or the key's floor.
pub(crate) fn removal(tombs: &Tombstones, key: &[u8], name: &[u8]) -> Option<Version> {
    tombs
        .member(key, Coll::ZSet, name)
        .max(tombs.key(key))
        .max(tombs.emptied_other(key, Some(Coll::ZSet)))
}

/// An increment of a member's score from another site.
pub(super) fn count(
    entry: Option<&Entry>,
    tombs: &Tombstones,
    change: Change,
) -> (RemoteOutcome, Option<Change>) {
    let v = change.version;
    let ChangeKind::Delta {
        op: DeltaOp::ZCount { member, .. },
        ..
    } = &change.kind
    else {
        unreachable!("a score increment")
    };
    if let Some(e) = entry.filter(|e| e.value.coll() != Some(Coll::ZSet)) {
        return type_conflict(e, tombs, change);
    }
    if let Some(r) = removal(tombs, &change.key, member).filter(|r| *r >= v) {
        // Removed by a write that saw it.
        return (lost(r, v), None);
    }
    let z = entry.and_then(|e| match &e.value {
        Value::ZSet(z) => Some(z),
        _ => None,
    });
    match (
        z.and_then(|z| z.counter(member)),
        z.and_then(|z| z.get(member)),
    ) {
        (Some(c), _) => match c.held(v.site) {
            Some(held) if held.version >= v => (lost(held.version, v), None),
            _ if v <= c.floor() => (ConflictLost, None),
            _ => (Applied, Some(change)),
        },
        // A plain score written after the increment saw it.
        (None, Some(m)) if m.version >= v => (lost(m.version, v), None),
        _ => (Applied, Some(change)),
    }
}

/// A ZADD from another site naming members that were score counters
/// there: the plain members as a ZADD (joined into a counter held here),
/// each counter's state joined into what is held of the member. What
/// changes something here is applied and logged.
pub(super) fn assign(
    entry: Option<&Entry>,
    tombs: &Tombstones,
    change: Change,
) -> (RemoteOutcome, Option<Change>) {
    let v = change.version;
    if let Some(e) = entry.filter(|e| e.value.coll() != Some(Coll::ZSet)) {
        return type_conflict(e, tombs, change);
    }
    let z = entry.and_then(|e| match &e.value {
        Value::ZSet(z) => Some(z),
        _ => None,
    });
    let Change { key, kind, .. } = change;
    let ChangeKind::Delta {
        base,
        op: DeltaOp::ZAssign { members, counters },
    } = kind
    else {
        unreachable!("a score assignment")
    };
    let mut seen = false;
    let mut plain = Vec::new();
    for (m, score) in members {
        let wins = match z.filter(|z| z.counter(&m).is_some()) {
            Some(z) => assign_changes(z, tombs, &key, &m, score, v) == Some(true),
            None => {
                let here = z
                    .and_then(|z| z.version_of(&m))
                    .max(tombs.member(&key, Coll::ZSet, &m));
                here.is_none_or(|h| h < v)
            }
        };
        match wins {
            true => plain.push((m, score)),
            false => seen |= z.and_then(|z| z.version_of(&m)) == Some(v),
        }
    }
    let mut joined = Vec::new();
    for (m, theirs) in counters {
        let removal = removal(tombs, &key, &m);
        let mut before = z
            .and_then(|z| z.state_of(&m))
            .unwrap_or_else(ScoreCounter::from_nothing);
        if let Some(r) = removal {
            before.prune(r);
        }
        let mut after = before.clone();
        after.join(&theirs);
        if let Some(r) = removal {
            after.prune(r);
        }
        match after != before {
            true => joined.push((m, theirs)),
            false => seen |= z.and_then(|z| z.version_of(&m)) == Some(v),
        }
    }
    if plain.is_empty() && joined.is_empty() {
        return (if seen { Duplicate } else { ConflictLost }, None);
    }
    let kind = ChangeKind::Delta {
        base,
        op: DeltaOp::ZAssign {
            members: plain,
            counters: joined,
        },
    };
    (
        Applied,
        Some(Change {
            key,
            version: v,
            kind,
        }),
    )
}

/// Whether a ZADD of `name` at `v` from another site changes the state of
/// a member held as a counter (joined as an assignment that saw every
/// older increment); None: the member is not a counter here.
pub(super) fn assign_changes(
    z: &ZSetValue,
    tombs: &Tombstones,
    key: &[u8],
    name: &[u8],
    score: f64,
    v: Version,
) -> Option<bool> {
    let mut state = z.counter(name)?.clone();
    if removal(tombs, key, name).is_some_and(|r| r >= v) {
        // Removed by a write that saw it.
        return Some(false);
    }
    Some(state.assign_at(score, v))
}

/// Joins member `name` of `incoming` into `merged` (either holding a
/// counter there), above `removal` (the newest removal of it here); true
/// when `merged` changed.
pub(super) fn join_member(
    merged: &mut ZSetValue,
    incoming: &ZSetValue,
    name: &Bytes,
    removal: Option<Version>,
) -> bool {
    let before = merged.clone();
    let mut state = match (merged.state_of(name), incoming.state_of(name)) {
        (Some(mut mine), Some(theirs)) => {
            mine.join(&theirs);
            mine
        }
        (Some(mine), None) => mine,
        (None, Some(theirs)) => theirs,
        (None, None) => return false,
    };
    if let Some(r) = removal {
        state.prune(r);
    }
    merged.set_counter(name, state);
    *merged != before
}
