//! HyperLogLogs from another site: raises (`DeltaOp::HllMax`) apply to the
//! assignment they were made on (the key's version, which raises keep),
//! and two copies of one assignment meet register by register, so
//! concurrent PFADDs and PFMERGEs at any sites end with the same registers
//! (and, canonical, the same bytes) whatever the order or duplication of
//! arrival. Against anything else the assignment decides as a string write
//! at its version does (the newer write decides the key's type): a raise
//! made on an older assignment than the one held (or than the key's last
//! removal) is lost; one made on a newer one asks for the sender's value.

use std::cmp::Ordering;

use bytes::Bytes;

use super::RemoteOutcome;
use crate::change::{Change, ChangeKind, DeltaOp};
use crate::hll::{encoding_of, merge};
use crate::tombstones::Tombstones;
use crate::value::{Entry, Value};

use RemoteOutcome::*;

/// Raises made at another site on the assignment at `base`.
pub(super) fn max(
    entry: Option<&Entry>,
    tombs: &Tombstones,
    change: Change,
) -> (RemoteOutcome, Option<Change>) {
    let ChangeKind::Delta {
        base,
        op: DeltaOp::HllMax { registers },
    } = &change.kind
    else {
        return (ConflictLost, None);
    };
    let key = &change.key;
    let held = match entry {
        Some(e) => e.version,
        // Made from nothing after the key's last removal there.
        None => tombs
            .key(key)
            .max(tombs.emptied_other(key, None))
            .unwrap_or_default(),
    };
    match held.cmp(base) {
        // The key was assigned or removed after the raises' assignment.
        Ordering::Greater => (ConflictLost, None),
        Ordering::Less => (NeedFull, None),
        Ordering::Equal => match entry.map(|e| &e.value) {
            None => (Applied, Some(change)),
            Some(Value::Str(bytes)) => match merge::raised(bytes, registers) {
                Ok(Some(_)) => (Applied, Some(change)),
                Ok(None) => (Duplicate, None),
                // Not a HyperLogLog: at this version it never was one.
                Err(_) => (ConflictLost, None),
            },
            // Versions are unique: another value at the raises' base is not
            // their assignment's (a counter it became: see docs).
            Some(_) => (ConflictLost, None),
        },
    }
}

/// Whether a whole string `theirs` at version `v` is another copy of the
/// HyperLogLog assignment held (same version, both HyperLogLogs, other
/// bytes): then the two meet register by register ([`join`]).
pub(super) fn same_assignment(entry: Option<&Entry>, v: crate::Version, theirs: &Bytes) -> bool {
    match entry {
        Some(Entry {
            value: Value::Str(mine),
            version,
            ..
        }) => {
            *version == v
                && mine != theirs
                && encoding_of(mine).is_ok()
                && encoding_of(theirs).is_ok()
        }
        _ => false,
    }
}

/// Two copies of one assignment: the registers theirs holds higher, logged
/// as raises of that assignment (at its version).
pub(super) fn join(entry: Option<&Entry>, change: Change) -> (RemoteOutcome, Option<Change>) {
    let (
        Some(Value::Str(mine)),
        ChangeKind::Full {
            value: Value::Str(theirs),
            ..
        },
    ) = (entry.map(|e| &e.value), &change.kind)
    else {
        return (ConflictLost, None);
    };
    let (Ok(mine), Ok(theirs)) = (merge::registers(mine), merge::registers(theirs)) else {
        return (ConflictLost, None);
    };
    let registers: Vec<(u16, u8)> = (0u16..)
        .zip(mine.iter().zip(&theirs))
        .filter(|(_, (m, t))| t > m)
        .map(|(i, (_, t))| (i, *t))
        .collect();
    if registers.is_empty() {
        return (Duplicate, None);
    }
    let v = change.version;
    (
        Applied,
        Some(Change {
            key: change.key,
            version: v,
            kind: ChangeKind::Delta {
                base: v,
                op: DeltaOp::HllMax { registers },
            },
        }),
    )
}
