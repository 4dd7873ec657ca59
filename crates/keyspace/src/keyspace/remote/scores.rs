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

/// The state of member `name` of `z` as a counter (a plain member: its
/// score assigned at its version, having seen every older increment).
pub(crate) fn member_state(z: &ZSetValue, name: &[u8]) -> Option<ScoreCounter> {
    match z.counter(name) {
        Some(c) => Some(c.clone()),
        None => z
            .get(name)
            .map(|m| ScoreCounter::from_plain(m.score, m.version)),
    }
}

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
    let mut state = match (member_state(merged, name), member_state(incoming, name)) {
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
