//! Merging counters from another site (see [`crate::value::CounterValue`]):
//! an increment is applied as its site's running total (newer than what is
//! held of that site, else it was seen), and a whole string meeting a
//! counter joins it (the newer assignment wins, every site's newest total
//! is kept), so sites agree whatever order the changes arrive in.

use super::{lost, overwrite_loses, RemoteOutcome};
use crate::change::{Change, ChangeKind, DeltaOp};
use crate::tombstones::Tombstones;
use crate::value::{CounterValue, Entry, HashValue, Value};
use crate::version::Version;

use RemoteOutcome::*;

/// Whether a whole string (`incoming`) meets a counter, here or in it:
/// then it is joined ([`join`]) rather than compared by version.
pub(super) fn meets(entry: Option<&Entry>, incoming: &Value) -> bool {
    match entry.map(|e| &e.value) {
        Some(Value::Counter(_)) => matches!(incoming, Value::Str(_) | Value::Counter(_)),
        Some(Value::Str(_)) => matches!(incoming, Value::Counter(_)),
        _ => false,
    }
}

/// The state of a string value written at `version`, as a counter.
fn as_counter(value: &Value, version: crate::Version) -> Option<CounterValue> {
    match value {
        Value::Counter(c) => Some((**c).clone()),
        Value::Str(t) => Some(CounterValue::from_plain(t.to_bytes(), version)),
        _ => None,
    }
}

/// The version of the write that last set a string value's time to live
/// (a plain string's own: its version is its last write's).
fn expiry_of(value: &Value, version: crate::Version) -> crate::Version {
    match value {
        Value::Counter(c) => c.expiry(),
        _ => version,
    }
}

/// An EXPIRE or PERSIST from another site on a counter: the newer write
/// that set the time to live wins.
pub(super) fn expiry(c: &CounterValue, change: Change) -> (RemoteOutcome, Option<Change>) {
    match c.expiry() >= change.version {
        true => (lost(c.expiry(), change.version), None),
        false => (Applied, Some(change)),
    }
}

/// A whole string meeting a counter: the join of both, logged as a whole
/// counter at the newer of the two versions (with that one's expiry).
pub(super) fn join(
    e: &Entry,
    tombs: &Tombstones,
    change: Change,
) -> (RemoteOutcome, Option<Change>) {
    let v = change.version;
    let ChangeKind::Full { value, expire_at } = &change.kind else {
        unreachable!("a join takes a whole value")
    };
    let (Some(mut merged), Some(theirs)) = (as_counter(&e.value, e.version), as_counter(value, v))
    else {
        unreachable!("both are strings")
    };
    let mut changed = merged.join(&theirs);
    if let Some(floor) = tombs.key(&change.key) {
        // What the key's last removal here covers stays removed.
        let before = merged.clone();
        merged.prune_older(floor);
        changed |= merged != before;
    }
    // The time to live goes with the newer write that set it (an
    // assignment, EXPIRE, PERSIST; an increment keeps it); none newer than
    // the floor: none.
    let (mine, their) = (expiry_of(&e.value, e.version), theirs.expiry());
    let expire_at = match mine >= their {
        true => e.expire_at,
        false => *expire_at,
    };
    let expire_at = if merged.expiry() == crate::Version::ZERO {
        0
    } else {
        expire_at
    };
    let version = e.version.max(v);
    if !changed && expire_at == e.expire_at && version == e.version {
        return (lost(e.version, v), None);
    }
    (
        Applied,
        Some(Change {
            key: change.key,
            version,
            kind: ChangeKind::Full {
                // The same value, as the plain string it equals when it
                // does (whichever way round the two met).
                value: match merged.is_plain() && merged.assigned() == version {
                    true => Value::str(merged.text().clone()),
                    false => Value::Counter(Box::new(merged)),
                },
                expire_at,
            },
        }),
    )
}

/// An increment from another site.
pub(super) fn count(
    entry: Option<&Entry>,
    tombs: &Tombstones,
    change: Change,
) -> (RemoteOutcome, Option<Change>) {
    let v = change.version;
    let float = matches!(
        change.kind,
        ChangeKind::Delta {
            op: DeltaOp::FloatCount { .. },
            ..
        }
    );
    match entry {
        // The key was a collection after v: this string write lost to it.
        None if tombs
            .emptied_other(&change.key, None)
            .is_some_and(|m| m >= v) =>
        {
            overwrite_loses(None, tombs, change)
        }
        None => (Applied, Some(change)),
        Some(e) if e.value.is_collection() => match e.version >= v {
            true => overwrite_loses(Some(&e.value), tombs, change),
            false => (NeedFull, None),
        },
        Some(e) => match &e.value {
            // A list (a whole value, as a string of its own type): newer,
            // it wins; older, the sender's counter replaces it.
            Value::List(_) => match e.version >= v {
                true => (lost(e.version, v), None),
                false => (NeedFull, None),
            },
            Value::Counter(c) => match c.held(v.site, float) {
                Some(held) if held >= v => (lost(held, v), None),
                _ if v < c.floor() => (ConflictLost, None),
                _ => (Applied, Some(change)),
            },
            // A plain string written after the increment: it saw it (see
            // CounterValue::from_plain).
            _ if e.version >= v => (lost(e.version, v), None),
            _ => (Applied, Some(change)),
        },
    }
}

/// An increment of a counter in a hash field from another site (the key
/// holds this hash, or nothing).
pub(super) fn count_field(
    hash: Option<&HashValue>,
    tombs: &Tombstones,
    change: Change,
) -> (RemoteOutcome, Option<Change>) {
    let v = change.version;
    let (field, float) = match &change.kind {
        ChangeKind::Delta {
            op: DeltaOp::HashCount { field, .. },
            ..
        } => (field, false),
        ChangeKind::Delta {
            op: DeltaOp::HashFloatCount { field, .. },
            ..
        } => (field, true),
        _ => unreachable!("a field increment"),
    };
    if let Some(t) = tombs.field(&change.key, field).filter(|t| *t >= v) {
        return (lost(t, v), None);
    }
    match (
        hash.and_then(|h| h.counter(field)),
        hash.and_then(|h| h.get(field)),
    ) {
        (Some(c), _) => match c.held(v.site, float) {
            Some(held) if held >= v => (lost(held, v), None),
            _ if v < c.floor() => (ConflictLost, None),
            _ => (Applied, Some(change)),
        },
        // A plain value written after the increment saw it.
        (None, Some(f)) if f.version >= v => (lost(f.version, v), None),
        _ => (Applied, Some(change)),
    }
}

/// The state of field `name` of `h` as a counter (a plain value: written
/// at its version, having seen every older increment).
pub(crate) fn field_counter(h: &HashValue, name: &[u8]) -> Option<CounterValue> {
    match h.counter(name) {
        Some(c) => Some(c.clone()),
        None => h
            .get(name)
            .map(|f| CounterValue::from_plain(bytes::Bytes::copy_from_slice(f.value), f.version)),
    }
}

/// Joins field `name` of `incoming` into `merged` (either holding a
/// counter there), above `removal` (the newest removal of the field here);
/// true when `merged` changed.
pub(super) fn join_field(
    merged: &mut HashValue,
    incoming: &HashValue,
    name: &[u8],
    removal: Option<Version>,
) -> bool {
    let before = merged.clone();
    let theirs = field_counter(incoming, name);
    let mut state = match (field_counter(merged, name), theirs) {
        (Some(mut mine), Some(theirs)) => {
            mine.join(&theirs);
            mine
        }
        (Some(mine), None) => mine,
        (None, Some(theirs)) => theirs,
        (None, None) => return false,
    };
    if let Some(r) = removal {
        state.prune_older(r);
    }
    let version = [merged.get(name), incoming.get(name)]
        .into_iter()
        .flatten()
        .map(|f| f.version)
        .max()
        .unwrap_or_default();
    if removal.is_some_and(|r| r >= version) {
        // Everything of it is older than its removal here.
        merged.remove(name);
    } else if state.is_plain() && state.assigned() == version {
        merged.set(
            bytes::Bytes::copy_from_slice(name),
            state.text().clone(),
            version,
        );
        merged.drop_counter(name);
    } else {
        merged.set_counter(&bytes::Bytes::copy_from_slice(name), state, version);
    }
    *merged != before
}
