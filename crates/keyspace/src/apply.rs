//! The mirror function: applies a [`Change`] to a partition. The local write
//! path uses it for its own changes, and backups, WAN receivers and restore
//! use it for changes from elsewhere, so a change means the same everywhere.
//!
//! A change from another site is first resolved against what the partition
//! holds ([`crate::Keyspace::apply_remote`]: last writer wins by version,
//! hash fields merge field by field) and only what wins is applied here and
//! logged. For that the rules below never move a key backwards: hash field
//! operations and expiry leave the key at the newer of its version and the
//! change's, and a Delete/Expire removes only what is older than itself (a
//! hash keeps newer fields). On the local write path every change is the
//! newest, so these rules are plain overwrites there.
//!
//! When the partition keeps tombstones, this is also where they are kept: a
//! Delete/Expire leaves a floor for the key, HDEL leaves field tombstones
//! (and the hash's version when it empties it), a string put drops the
//! older ones, so a backup replaying the log ends with the primary's
//! tombstones.
//!
//! Invariant: on error nothing was modified.

use bytes::Bytes;

use crate::change::{Change, ChangeKind, DeltaOp};
use crate::delta::{self, StringOpError};
use crate::partition::Partition;
use crate::tombstones::Coll;
use crate::value::{CounterValue, Entry, ScoreCounter, Total, Value};
use crate::version::Version;

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// The delta was made against a version this copy does not hold: the
    /// sender must ship the full value.
    #[error("delta base {want:?} does not match held version {have:?}")]
    BaseMismatch {
        want: Version,
        have: Option<Version>,
    },
    #[error("operation against a key holding the wrong kind of value")]
    WrongType,
    #[error(transparent)]
    StringOp(#[from] StringOpError),
    /// A list edit naming an index past the list's end (bytes from
    /// elsewhere that do not fit the list held at their base).
    #[error("list edit out of range")]
    ListEdit,
    /// A change from another site reached a partition this node holds as a
    /// backup: only the primary resolves and orders them.
    #[error("not the primary of this partition")]
    NotPrimary,
    /// A change from another site whose version lies further ahead of
    /// this node's clock than `max_clock_offset` allows.
    #[error("version {ahead_ms} ms ahead of this node's clock (max_clock_offset {max_ms} ms)")]
    ClockAhead { ahead_ms: u64, max_ms: u64 },
}

pub fn apply_change(part: &mut Partition, change: &Change) -> Result<(), ApplyError> {
    apply_change_at(part, None, change)
}

/// [`apply_change`] when the caller already knows where the partition's map
/// holds the change's key (`at`, from [`Partition::index_of`]; None: not
/// known), so that the key is not hashed and probed for again.
pub fn apply_change_at(
    part: &mut Partition,
    at: Option<usize>,
    change: &Change,
) -> Result<(), ApplyError> {
    let key = &change.key;
    debug_assert!(
        at.is_none_or(|i| part.get_index(i).is_some_and(|(k, _)| k[..] == key[..])),
        "index of another key"
    );
    match &change.kind {
        ChangeKind::Full { value, expire_at } => {
            put_full(part, at, key, value.clone(), change.version, *expire_at)
        }
        ChangeKind::Delete | ChangeKind::Expire => remove_older(part, key, change.version),
        // The primary's decision, whatever the version held: no
        // tombstone (the key was not deleted; other sites keep it).
        ChangeKind::Evict => {
            part.remove(key);
        }
        // Plain or checked (the check is the remote resolution's): an
        // expiry merges onto any version of the key.
        ChangeKind::Delta { op, .. } if op.expiry().is_some() => {
            let expire_at = op.expiry().unwrap_or_default();
            update_held(part, at, key, |e| {
                e.expire_at = expire_at;
                e.version = e.version.max(change.version);
                if let Value::Counter(c) = &mut e.value {
                    c.expiry_set(change.version);
                }
            });
        }
        ChangeKind::Delta {
            base,
            op:
                op @ (DeltaOp::Splice { .. }
                | DeltaOp::Patch { .. }
                | DeltaOp::IncrBy(_)
                | DeltaOp::Checked { .. }),
        } => on_base(part, at, key, *base, change.version, |value| {
            match (value, op) {
                (Value::Str(held), DeltaOp::IncrBy(by)) => delta::incr_in_place(held, *by)?,
                (Value::Str(held), op) => *held = delta::apply_string_op(held, op)?.into(),
                // A whole-string write of a counter: an assignment.
                (Value::Counter(c), op) => {
                    let text = delta::apply_string_op(c.text(), op)?;
                    c.assign(text, change.version);
                }
                _ => return Err(ApplyError::WrongType),
            }
            Ok(())
        })?,
        ChangeKind::Delta {
            base,
            op: DeltaOp::ListEdit { edits },
        } => on_base(part, at, key, *base, change.version, |value| match value {
            Value::List(l) => l.apply(edits).map_err(|_| ApplyError::ListEdit),
            _ => Err(ApplyError::WrongType),
        })?,
        ChangeKind::Delta {
            op: DeltaOp::HashSet { fields },
            ..
        } => set_fields(
            part,
            at,
            key,
            fields.iter().map(|(f, v)| (f, v.clone())),
            change.version,
        )?,
        ChangeKind::Delta {
            op: DeltaOp::HashDel { fields },
            ..
        } => {
            let version = change.version;
            part.tombstones.fields_deleted(key, fields, version);
            match part.get(key).map(|e| (e.as_hash().is_some(), e.version)) {
                Some((true, _)) => {}
                // Only from another site (the write path refuses HDEL on
                // another type): the key was a hash at this version.
                Some(_) | None => {
                    emptied_over(part, key, Coll::Hash, version);
                    return Ok(());
                }
            }
            let emptied = part.update(key, |e| match &mut e.value {
                Value::Hash(h) => {
                    for f in fields {
                        match (h.counter(f), h.get(f)) {
                            // A counter written since keeps what is newer.
                            (Some(c), Some(held)) if held.version > version => {
                                let (mut c, at) = (c.clone(), held.version);
                                c.prune_older(version);
                                h.set_counter(f, c, at);
                            }
                            // A field written after this removal stays (a
                            // snapshot's tombstones come after its entries).
                            (None, Some(held)) if held.version > version => {}
                            _ => {
                                h.remove(f);
                            }
                        }
                    }
                    e.version = e.version.max(version);
                    h.is_empty().then_some(e.version)
                }
                _ => None,
            });
            if let Some(Some(held)) = emptied {
                part.remove(key);
                part.tombstones.emptied_at(key, Coll::Hash, held);
            }
        }
        ChangeKind::Delta {
            op: op @ (DeltaOp::Count { .. } | DeltaOp::FloatCount { .. }),
            ..
        } => {
            if let Some(total) = op.total() {
                count(part, at, key, total, change.version)?
            }
        }
        ChangeKind::Delta {
            op: op @ (DeltaOp::HashCount { field, .. } | DeltaOp::HashFloatCount { field, .. }),
            ..
        } => {
            if let Some(total) = op.total() {
                count_field(part, at, key, field, total, change.version)?
            }
        }
        ChangeKind::Delta {
            op: DeltaOp::ZCount { member, total },
            ..
        } => count_member(part, at, key, member, *total, change.version)?,
        ChangeKind::Delta {
            op: DeltaOp::ZAssign { members, counters },
            ..
        } => assign_members(part, at, key, members, counters, change.version)?,
        ChangeKind::Delta {
            op: DeltaOp::SetAdd { members },
            ..
        } if members.is_empty() => emptied_over(part, key, Coll::Set, change.version),
        ChangeKind::Delta {
            op: DeltaOp::ZAdd { members },
            ..
        } if members.is_empty() => emptied_over(part, key, Coll::ZSet, change.version),
        ChangeKind::Delta {
            op: DeltaOp::SetAdd { members },
            ..
        } => update_collection(
            part,
            at,
            key,
            change.version,
            Value::Set(Default::default()),
            |value, v| {
                if let Value::Set(set) = value {
                    for m in members {
                        set.add(m, v);
                    }
                }
            },
        )?,
        ChangeKind::Delta {
            op: DeltaOp::ZAdd { members },
            ..
        } => update_collection(
            part,
            at,
            key,
            change.version,
            Value::ZSet(Default::default()),
            |value, v| {
                if let Value::ZSet(z) = value {
                    z.assign(members, v);
                }
            },
        )?,
        ChangeKind::Delta {
            op: DeltaOp::Remove { coll, members },
            ..
        } => remove_members(part, key, *coll, members, change.version),
        ChangeKind::Delta {
            base,
            op: op @ (DeltaOp::HllMax { .. } | DeltaOp::BitsOr { .. }),
        } => raise(part, at, key, *base, op)?,
        ChangeKind::Delta {
            op: DeltaOp::SetExpiry(_),
            ..
        } => unreachable!("an expiry is applied above"),
    }
    Ok(())
}

/// [`apply_change_at`] for a change the caller has no further use for (the
/// write path, after logging it): a full value and a hash's field values
/// move into the partition instead of being cloned (the first clone of a
/// fresh `Bytes` allocates its shared header).
pub fn apply_owned_at(
    part: &mut Partition,
    at: Option<usize>,
    change: Change,
) -> Result<(), ApplyError> {
    match change.kind {
        ChangeKind::Full { value, expire_at } => {
            put_full(part, at, &change.key, value, change.version, expire_at);
            Ok(())
        }
        ChangeKind::Delta {
            op: DeltaOp::HashSet { fields },
            ..
        } => set_fields(part, at, &change.key, fields.into_iter(), change.version),
        kind => apply_change_at(part, at, &Change { kind, ..change }),
    }
}

/// A delta that applies to the exact version `base` only: `f` changes the
/// value held at `base`, which then takes `version`; another version held,
/// or none, is a [`ApplyError::BaseMismatch`]. One lookup at most; `f`
/// checks before it changes anything.
fn on_base(
    part: &mut Partition,
    at: Option<usize>,
    key: &Bytes,
    base: Version,
    version: Version,
    f: impl FnOnce(&mut Value) -> Result<(), ApplyError>,
) -> Result<(), ApplyError> {
    let applied = update_held(part, at, key, |e| {
        if e.version != base {
            return Err(ApplyError::BaseMismatch {
                want: base,
                have: Some(e.version),
            });
        }
        f(&mut e.value)?;
        e.version = version;
        Ok(())
    });
    applied.unwrap_or(Err(ApplyError::BaseMismatch {
        want: base,
        have: None,
    }))
}

/// A whole value replaces what `key` holds.
fn put_full(
    part: &mut Partition,
    mut at: Option<usize>,
    key: &Bytes,
    mut value: Value,
    mut version: Version,
    expire_at: u64,
) {
    if let (Value::Counter(c), Some(floor)) = (&mut value, removed_at(part, key)) {
        // What of a counter is older than the key's last removal is gone
        // (the counter came from a site that had not seen the removal).
        c.prune_older(floor);
    }
    if part.tombstones.enabled() {
        // The old entry is looked at first: find it once, so the
        // overwrite below goes by index (a backup's or receiver's
        // apply comes without one).
        at = at.or_else(|| part.index_of(key));
        match (
            held(part, at, key).map(|e| (!e.value.same_type(&value), e.version)),
            &value,
        ) {
            // A collection replacing a value of another type: that
            // value's overwrite still holds older elements back.
            (Some((true, old)), v) if v.is_collection() => part.tombstones.deleted(key, old),
            // A counter replacing a collection or a list: what of it is
            // older than the collection or list was overwritten by it (at
            // a site where the list lost, `overwrite_loses` did the same).
            (Some((true, old)), Value::Counter(_)) => {
                part.tombstones.deleted(key, old);
                if let Value::Counter(c) = &mut value {
                    c.prune_older(old);
                }
            }
            // (Not a list: a counter written later does not join with a
            // list, so the floors it must be pruned to stay.)
            (_, Value::Str(_)) => part.tombstones.overwritten(key, version),
            _ => {}
        }
        if let Some(coll) = value.coll() {
            version = created(part, key, coll, version);
        }
    }
    let entry = Entry::new(value, version, expire_at);
    match at {
        Some(i) => {
            part.update_at(i, |e| *e = entry);
        }
        None => part.put(key, entry),
    }
}

/// HSET: `fields` set at `version` on the hash `key` holds (made if absent).
fn set_fields<N: std::borrow::Borrow<Bytes>>(
    part: &mut Partition,
    at: Option<usize>,
    key: &Bytes,
    fields: impl Iterator<Item = (N, Bytes)>,
    version: Version,
) -> Result<(), ApplyError> {
    let empty = Value::Hash(Default::default());
    update_collection(part, at, key, version, empty, |value, version| {
        if let Value::Hash(h) = value {
            for (f, v) in fields {
                // Written whole: a plain value again.
                h.drop_counter(f.borrow());
                h.set_ref(f.borrow(), v, version);
            }
        }
    })
}

/// SADD, ZADD: `f` adds the members at `version` to the set or sorted set
/// `key` holds (`empty` made first if absent); a key of another type is
/// WRONGTYPE.
fn update_collection(
    part: &mut Partition,
    mut at: Option<usize>,
    key: &Bytes,
    version: Version,
    empty: Value,
    f: impl FnOnce(&mut Value, Version),
) -> Result<(), ApplyError> {
    at = at.or_else(|| part.index_of(key));
    match held(part, at, key) {
        Some(e) if !e.value.same_type(&empty) => return Err(ApplyError::WrongType),
        Some(_) => {}
        None => {
            // A collection that lost its last element and comes back keeps
            // its version.
            let coll = empty.coll().unwrap_or(Coll::Set);
            let version = created(part, key, coll, version);
            part.put(key, Entry::new(empty, version, 0));
            at = None;
        }
    }
    update_held(part, at, key, |e| {
        f(&mut e.value, version);
        e.version = e.version.max(version);
    });
    Ok(())
}

/// SREM, ZREM (and element tombstones replayed): each member goes if what
/// is held of it is no newer than the version given; a tombstone stays at
/// that version. A string held is left alone (the removal is older than
/// it: see remote resolution).
fn remove_members(
    part: &mut Partition,
    key: &Bytes,
    coll: Coll,
    members: &[(Bytes, Version)],
    version: Version,
) {
    part.tombstones.members_removed(key, coll, members, version);
    match part.get(key).map(|e| e.value.coll()) {
        Some(c) if c == Some(coll) => {}
        Some(_) => return,
        // The key was such a collection at `version` where this was
        // written: when it comes back here it starts from there.
        None => return part.tombstones.emptied_at(key, coll, version),
    }
    let emptied = part.update(key, |e| {
        for (m, upto) in members {
            if e.value.element_version(m).is_some_and(|v| v <= *upto) {
                e.value.remove_element(m);
            } else if let Value::ZSet(z) = &mut e.value {
                // A score counter written since: what the remover saw goes.
                if let Some(c) = z.counter(m).filter(|c| c.floor() < *upto) {
                    let mut c = c.clone();
                    c.prune(*upto);
                    z.set_counter(m, c);
                }
            }
        }
        e.version = e.version.max(version);
        e.value.is_empty_collection().then_some(e.version)
    });
    if let Some(Some(held)) = emptied {
        part.remove(key);
        part.tombstones.emptied_at(key, coll, held);
    }
}

/// HINCRBY where sites merge: field `field`'s counter (made from its plain
/// value, or from nothing) takes the change's site's `total`.
fn count_field(
    part: &mut Partition,
    at: Option<usize>,
    key: &Bytes,
    field: &Bytes,
    total: Total<'_>,
    version: Version,
) -> Result<(), ApplyError> {
    let removal = part
        .tombstones
        .field_or_key(key, field)
        .max(part.tombstones.emptied_other(key, Some(Coll::Hash)));
    let empty = Value::Hash(Default::default());
    update_collection(part, at, key, version, empty, |value, version| {
        let Value::Hash(h) = value else { return };
        let held = h.get(field).map(|f| f.version);
        let mut c = match (h.counter(field), h.get(field)) {
            (Some(c), _) => c.clone(),
            // Written after the increment: it saw it.
            (None, Some(f)) if f.version >= version => return,
            (None, Some(f)) => CounterValue::from_plain(Bytes::copy_from_slice(f.value), f.version),
            (None, None) => {
                let mut c = CounterValue::from_nothing();
                if let Some(r) = removal {
                    c.prune_older(r);
                }
                c
            }
        };
        c.count(version.site, total, version);
        h.set_counter(field, c, held.map_or(version, |v| v.max(version)));
    })
}

/// ZINCRBY where sites merge: member `member`'s score state (made from its
/// plain score, or from nothing above its last removal) takes the change's
/// site's `total`.
fn count_member(
    part: &mut Partition,
    at: Option<usize>,
    key: &Bytes,
    member: &Bytes,
    total: f64,
    version: Version,
) -> Result<(), ApplyError> {
    let removal = part
        .tombstones
        .member(key, Coll::ZSet, member)
        .max(part.tombstones.key(key))
        .max(part.tombstones.emptied_other(key, Some(Coll::ZSet)));
    let empty = Value::ZSet(Default::default());
    update_collection(part, at, key, version, empty, |value, version| {
        let Value::ZSet(z) = value else { return };
        let mut c = match (z.counter(member), z.get(member)) {
            (Some(c), _) => c.clone(),
            (None, Some(m)) => ScoreCounter::from_plain(m.score, m.version),
            (None, None) => ScoreCounter::from_nothing(),
        };
        if let Some(r) = removal {
            c.prune(r);
        }
        if c.count(version.site, total, version) {
            z.set_counter(member, c);
        }
    })
}

/// ZADD where sites merge of members some of which are score counters:
/// `members` as a ZADD, `counters` (each as the writing site held it,
/// assigned by this write) joined into what is held of them.
fn assign_members(
    part: &mut Partition,
    at: Option<usize>,
    key: &Bytes,
    members: &[(Bytes, f64)],
    counters: &[(Bytes, ScoreCounter)],
    version: Version,
) -> Result<(), ApplyError> {
    let removals: Vec<Option<Version>> = counters
        .iter()
        .map(|(m, _)| {
            part.tombstones
                .member(key, Coll::ZSet, m)
                .max(part.tombstones.key(key))
                .max(part.tombstones.emptied_other(key, Some(Coll::ZSet)))
        })
        .collect();
    let empty = Value::ZSet(Default::default());
    update_collection(part, at, key, version, empty, |value, version| {
        let Value::ZSet(z) = value else { return };
        z.assign(members, version);
        for ((m, theirs), removal) in counters.iter().zip(removals) {
            let mut c = z.state_of(m).unwrap_or_else(ScoreCounter::from_nothing);
            c.join(theirs);
            if let Some(r) = removal {
                c.prune(r);
            }
            z.set_counter(m, c);
        }
    })
}

/// The newest removal of `key` a counter made there starts above: its
/// floor, or the version at which it was last a collection that emptied
/// (a write of another type, which overwrote what was older).
pub(crate) fn removed_at(part: &Partition, key: &[u8]) -> Option<Version> {
    part.tombstones
        .key(key)
        .max(part.tombstones.emptied_other(key, None))
}

/// An increment of a merging counter: the change's site's running total
/// becomes `total`. A plain string becomes a counter (assigned at its own
/// version); a missing key a counter from 0.
fn count(
    part: &mut Partition,
    mut at: Option<usize>,
    key: &Bytes,
    total: Total<'_>,
    version: Version,
) -> Result<(), ApplyError> {
    at = at.or_else(|| part.index_of(key));
    if held(part, at, key).is_some_and(|e| e.value.is_collection()) {
        return Err(ApplyError::WrongType);
    }
    if held(part, at, key).is_none() {
        // From nothing, above the key's last removal.
        let mut counter = CounterValue::from_nothing();
        if let Some(floor) = removed_at(part, key) {
            counter.prune_older(floor);
        }
        part.put(
            key,
            Entry::new(Value::Counter(Box::new(counter)), version, 0),
        );
        at = None;
    }
    update_held(part, at, key, |e| {
        if let Value::Str(text) = &e.value {
            if e.version >= version {
                // Written after the increment: it saw it.
                return;
            }
            e.value = Value::Counter(Box::new(CounterValue::from_plain(
                text.to_bytes(),
                e.version,
            )));
        }
        if let Value::Counter(c) = &mut e.value {
            c.count(version.site, total, version);
        }
        e.version = e.version.max(version);
    });
    Ok(())
}

/// A raise of the string the key holds where sites merge (PFADD, PFMERGE:
/// registers raised, rewritten in the canonical layout, see `hll::merge`;
/// SETBIT 1: bits ORed in, see `crate::bits`); the key keeps its version
/// (that of the assignment the raises apply to, see `DeltaOp::HllMax`)
/// and time to live. A missing key is created at `base` (its last removal
/// where it was made). Another value, or a string the raise does not
/// apply to, is WRONGTYPE (remote resolution only lets raises of the same
/// assignment through).
fn raise(
    part: &mut Partition,
    mut at: Option<usize>,
    key: &Bytes,
    base: Version,
    op: &DeltaOp,
) -> Result<(), ApplyError> {
    at = at.or_else(|| part.index_of(key));
    let raised = match held(part, at, key) {
        None => {
            let value = op
                .raised(None)
                .map_err(|_| ApplyError::WrongType)?
                .unwrap_or_default();
            part.put(key, Entry::new(Value::str(value), base, 0));
            return Ok(());
        }
        Some(Entry {
            value: Value::Str(held),
            ..
        }) => op.raised(Some(held)).map_err(|_| ApplyError::WrongType)?,
        Some(_) => return Err(ApplyError::WrongType),
    };
    if let Some(value) = raised {
        update_held(part, at, key, |e| e.value = Value::str(value));
    }
    Ok(())
}

/// "The key was a collection of kind `coll` at `version`, and emptied" (an
/// HDEL, or an add of no member, from another site or a re-sync): a
/// collection of that kind held takes the version if it is newer; a value
/// of another type older than it was overwritten (removed, its version
/// kept as the key's floor); none held leaves the mark.
fn emptied_over(part: &mut Partition, key: &Bytes, coll: Coll, version: Version) {
    match part.get(key).map(|e| (e.value.coll(), e.version)) {
        Some((c, held)) if c == Some(coll) => {
            if held < version {
                part.update(key, |e| e.version = version);
            }
        }
        Some((_, held)) if held < version => {
            part.remove(key);
            part.tombstones.deleted(key, held);
            part.tombstones.emptied_at(key, coll, version);
        }
        Some(_) => {}
        None => part.tombstones.emptied_at(key, coll, version),
    }
}

/// A collection of kind `coll` is created at `version`: it starts from the
/// version at which it last emptied, and the marks other kinds left (the
/// key was one of them, which overwrote older elements of this kind)
/// become its floor.
fn created(part: &mut Partition, key: &Bytes, coll: Coll, version: Version) -> Version {
    if let Some(other) = part.tombstones.emptied_other(key, Some(coll)) {
        part.tombstones.deleted(key, other);
    }
    version.max(part.tombstones.take_emptied(key, coll).unwrap_or_default())
}

/// The entry for `key`, at index `at` when that is known.
fn held<'p>(part: &'p Partition, at: Option<usize>, key: &[u8]) -> Option<&'p Entry> {
    match at {
        Some(i) => part.get_index(i).map(|(_, e)| e),
        None => part.get(key),
    }
}

fn update_held<R>(
    part: &mut Partition,
    at: Option<usize>,
    key: &[u8],
    f: impl FnOnce(&mut Entry) -> R,
) -> Option<R> {
    match at {
        Some(i) => part.update_at(i, f),
        None => part.update(key, f),
    }
}

/// A Delete/Expire at `version`: removes what the key holds that is older.
/// On the write path that is all of it; a change from another site leaves a
/// newer string whole and a hash its newer fields. The key's floor is
/// recorded unless a newer string stays; a hash that loses its last field
/// this way leaves its version too.
fn remove_older(part: &mut Partition, key: &Bytes, version: Version) {
    let held = part
        .get(key)
        .map(|e| (e.version < version, e.value.is_collection()));
    match held {
        None => {}
        Some((true, _)) => {
            part.remove(key);
        }
        Some((false, false)) => {
            // A string newer than the removal stays; a counter loses what
            // is older than it.
            part.update(key, |e| {
                if let Value::Counter(c) = &mut e.value {
                    c.prune_older(version);
                    if c.expiry() == Version::ZERO {
                        // The time to live went with what was removed.
                        e.expire_at = 0;
                    }
                }
            });
            if !part
                .get(key)
                .is_some_and(|e| matches!(e.value, Value::Counter(_)))
            {
                return;
            }
        }
        Some((false, true)) => {
            let emptied = part.update(key, |e| {
                for name in e.value.elements_older_than(version) {
                    e.value.remove_element(&name);
                }
                match &mut e.value {
                    Value::Hash(h) => h.prune_counters(version),
                    Value::ZSet(z) => z.prune_counters(version),
                    _ => {}
                }
                e.value
                    .is_empty_collection()
                    .then_some((e.value.coll(), e.version))
            });
            if let Some(Some((Some(coll), held))) = emptied {
                part.remove(key);
                part.tombstones.emptied_at(key, coll, held);
            }
        }
    }
    part.tombstones.deleted(key, version);
}
