//! Raises of a string from another site: HyperLogLog registers
//! (`DeltaOp::HllMax`, PFADD, PFMERGE) and bits (`DeltaOp::BitsOr`,
//! SETBIT 1) apply to the assignment they were made on (the key's
//! version, which raises keep), and two copies of one assignment meet
//! register by register (both HyperLogLogs) or bit by bit (else), so
//! concurrent raises at any sites end with the same bytes whatever the
//! order or duplication of arrival. One set of rules for both kinds: only
//! what a raise does to the bytes differs ([`DeltaOp::raised`]). Against
//! anything else the assignment decides as a string write at its version
//! does (the newer write decides the key's type): a raise made on an
//! older assignment than the one held (or than the key's last removal) is
//! lost; one made on a newer one asks for the sender's value.

use std::cmp::Ordering;

use super::RemoteOutcome;
use crate::change::{Change, ChangeKind, DeltaOp};
use crate::hll::merge;
use crate::tombstones::Tombstones;
use crate::value::{Entry, Value};

use RemoteOutcome::*;

/// Raises made at another site on the assignment at `base`.
pub(super) fn max(
    entry: Option<&Entry>,
    tombs: &Tombstones,
    change: Change,
) -> (RemoteOutcome, Option<Change>) {
    let ChangeKind::Delta { base, op } = &change.kind else {
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
            Some(Value::Str(bytes)) => match op.raised(Some(bytes)) {
                Ok(Some(_)) => (Applied, Some(change)),
                Ok(None) => (Duplicate, None),
                // Registers of a string that is not a HyperLogLog: at this
                // version it never was one.
                Err(_) => (ConflictLost, None),
            },
            // Versions are unique: another value at the raises' base is not
            // their assignment's (a counter it became: see docs).
            Some(_) => (ConflictLost, None),
        },
    }
}

/// Whether a whole string `theirs` at version `v` is another copy of the
/// string assignment held (same version, other bytes: versions are unique,
/// so they differ by raises): then the two meet ([`join`]).
pub(super) fn same_assignment(entry: Option<&Entry>, v: crate::Version, theirs: &[u8]) -> bool {
    match entry {
        Some(Entry {
            value: Value::Str(mine),
            version,
            ..
        }) => *version == v && mine.as_bytes() != theirs,
        _ => false,
    }
}

/// Two copies of one assignment: the registers theirs holds higher (both
/// HyperLogLogs), else the bits theirs has set that mine lacks, logged as
/// raises of that assignment (at its version).
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
    let op = match (merge::registers(mine), merge::registers(theirs)) {
        (Ok(mine), Ok(theirs)) => DeltaOp::HllMax {
            registers: (0u16..)
                .zip(mine.iter().zip(&theirs))
                .filter(|(_, (m, t))| t > m)
                .map(|(i, (_, t))| (i, *t))
                .collect(),
        },
        _ => DeltaOp::BitsOr {
            bytes: crate::bits::missing(mine, theirs),
        },
    };
    if matches!(&op, DeltaOp::HllMax { registers } if registers.is_empty())
        || matches!(&op, DeltaOp::BitsOr { bytes } if bytes.is_empty())
    {
        return (Duplicate, None);
    }
    let v = change.version;
    (
        Applied,
        Some(Change {
            key: change.key,
            version: v,
            kind: ChangeKind::Delta { base: v, op },
        }),
    )
}
