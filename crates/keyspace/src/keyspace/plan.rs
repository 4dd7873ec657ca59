//! What a command wants done to one key ([`Write`]) and the change that
//! makes it: a similar old string makes a SET a delta, a string operation
//! or hash fields ship only what changed, a write that changes nothing
//! logs nothing.

use bytes::Bytes;

use crate::apply::ApplyError;
use crate::change::{ChangeKind, DeltaOp};
use crate::delta::{self, StringOpError};
use crate::number::add_texts;
use crate::tombstones::Coll;
use crate::value::{CounterValue, Entry, ListEdit, ListValue, Value, ZSetValue};
use crate::version::Version;

/// What a command wants to do to one key; [`Txn::write`](super::Txn::write) makes it a Change.
#[derive(Debug)]
pub enum Write {
    /// Replace the whole value; a similar old string makes this a delta.
    Set {
        value: Value,
        expire_at: u64,
    },
    /// A string operation (Splice, Patch, IncrBy) on the current string;
    /// on a missing key it applies to "" (or 0 for IncrBy).
    Str(DeltaOp),
    /// INCRBYFLOAT: add `by` (the float text given) to the string, whose
    /// new value is `text` (the command checked and printed it). Where
    /// sites merge it is logged as the site's running total of its
    /// INCRBYFLOATs (so increments at every site sum), else as a SET of
    /// `text` keeping `expire_at`.
    FloatIncr {
        by: Bytes,
        text: Bytes,
        expire_at: u64,
    },
    /// HINCRBYFLOAT: as [`Write::FloatIncr`] for hash field `field`.
    HashFloatIncr {
        field: Bytes,
        by: Bytes,
        text: Bytes,
    },
    HashSet(Vec<(Bytes, Bytes)>),
    /// HINCRBY: add `by` to field `field`, whose new value is `text` (the
    /// command checked it). Where sites merge it is logged as the site's
    /// running total of the field's increments, else as HSET of `text`.
    HashIncr {
        field: Bytes,
        by: i64,
        text: Bytes,
    },
    HashDel(Vec<Bytes>),
    /// Add members to the set (made if absent).
    SetAdd(Vec<Bytes>),
    /// Set members' scores in the sorted set (made if absent).
    ZAdd(Vec<(Bytes, f64)>),
    /// ZINCRBY (ZADD INCR): add `by` to member `member`'s score, which
    /// becomes `score` (the command checked it, and writes only a score
    /// that changes, or any where sites merge). Where sites merge it is
    /// logged as the site's running total of the member's increments (so
    /// increments at every site sum), else as a ZADD of `score`.
    ZIncr {
        member: Bytes,
        by: f64,
        score: f64,
    },
    /// Remove members of a set or sorted set; the key goes when it empties.
    Remove(Vec<Bytes>),
    /// PFADD, PFMERGE: the HyperLogLog `value` the command built, whose
    /// registers `(index, value)` it raised. Where sites merge (and the key
    /// holds a plain string or nothing) it is logged as those raises
    /// (`DeltaOp::HllMax`, against the key's version, or its last removal
    /// when created); elsewhere as a `Set` of `value` keeping the TTL.
    Hll {
        registers: Vec<(u16, u8)>,
        value: Bytes,
    },
    /// SETBIT 1 that sets a bit that was 0: byte `index` ORed with `mask`.
    /// Where sites merge and the key holds a string (not a HyperLogLog),
    /// it is logged as that raise (`DeltaOp::BitsOr`, against the key's
    /// version, which it keeps); elsewhere (a key created or converted,
    /// a HyperLogLog) as `splice`, the same write as a string operation.
    Bits {
        index: u32,
        mask: u8,
        splice: DeltaOp,
    },
    /// Edit the list (made if absent; removed when the edits empty it).
    /// The edits were made against the list the command read.
    List(Vec<ListEdit>),
    /// Set or clear (0) the expiry of an existing key.
    SetExpiry(u64),
    Delete,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    #[error("WRONGTYPE Operation against a key holding the wrong kind of value")]
    WrongType,
    #[error(transparent)]
    StringOp(#[from] StringOpError),
    #[error("ERR resulting score is not a number (NaN)")]
    NotANumber,
}

impl From<ApplyError> for WriteError {
    fn from(e: ApplyError) -> Self {
        match e {
            ApplyError::StringOp(e) => WriteError::StringOp(e),
            // A base mismatch cannot happen locally: the delta was made from
            // the entry under the same lock. Report it as a type error
            // rather than panic.
            ApplyError::WrongType
            | ApplyError::BaseMismatch { .. }
            | ApplyError::ListEdit
            | ApplyError::NotPrimary
            | ApplyError::ClockAhead { .. } => WriteError::WrongType,
        }
    }
}

/// What a write changes: the change to log, the bytes a delta saves over
/// shipping the full value, and for a SET logged as a delta the value the
/// entry takes (the same as applying the delta to the old value).
pub(super) struct Planned {
    pub(super) kind: ChangeKind,
    pub(super) saved: usize,
    pub(super) new_value: Option<Value>,
}

/// Turns an intended write into the change to log. None: nothing to change.
/// `merging`: the partition merges with other sites (keeps tombstones),
/// so adding a member already held is logged too: it renews the member's
/// version, and an add wins over a removal that did not see it.
/// `removed`: the key's last removal here (its floor, or the version at
/// which it was last a collection that emptied), for a HyperLogLog made
/// from nothing.
pub(super) fn plan(
    old: Option<&Entry>,
    w: Write,
    merge_site: Option<u16>,
    removed: Option<Version>,
) -> Result<Option<Planned>, WriteError> {
    let merging = merge_site.is_some();
    let w = match w {
        Write::Hll { registers, value } => match hll_max(old, registers, value, merging, removed) {
            Ok(planned) => return Ok(planned),
            Err(w) => *w,
        },
        Write::Bits {
            index,
            mask,
            splice,
        } => match old {
            Some(e) if merging && matches!(e.value, Value::Str(_)) && !is_hll(e) => {
                let op = DeltaOp::BitsOr {
                    bytes: vec![(index, mask)],
                };
                let saved = e
                    .value
                    .payload_len()
                    .saturating_sub(delta::op_payload_len(&op));
                return Ok(Some(Planned {
                    kind: ChangeKind::Delta {
                        base: e.version,
                        op,
                    },
                    saved,
                    new_value: None,
                }));
            }
            _ => Write::Str(splice),
        },
        w => w,
    };
    let base = old.map_or(Version::ZERO, |e| e.version);
    // Where sites do not merge a float increment is the value it makes.
    let w = match w {
        Write::FloatIncr {
            text, expire_at, ..
        } if !merging => Write::Set {
            value: Value::str(text),
            expire_at,
        },
        Write::HashFloatIncr { field, text, .. } if !merging => Write::HashSet(vec![(field, text)]),
        // The command wrote it because the score changes: no second lookup.
        Write::ZIncr { member, score, .. } if !merging => {
            if old.is_some_and(|e| e.as_zset().is_none()) {
                return Err(WriteError::WrongType);
            }
            return element_op(
                old,
                DeltaOp::ZAdd {
                    members: vec![(member, score)],
                },
            );
        }
        w => w,
    };
    let counter = old.and_then(|e| match &e.value {
        Value::Counter(c) => Some(c),
        _ => None,
    });
    let w = match counter {
        Some(c) => match assign(c, w, old, merging)? {
            Ok(planned) => return Ok(Some(planned)),
            Err(w) => w,
        },
        None => w,
    };
    let kind_and_saved = match w {
        // An increment where sites merge: logged as this site's total.
        Write::Str(DeltaOp::IncrBy(by)) if merging => {
            let site = merge_site.unwrap_or_default();
            let held = match old {
                Some(e) => Some(e.as_str().ok_or(WriteError::WrongType)?),
                None => None,
            };
            // As on a plain string: the value must be an integer that the
            // increment does not overflow.
            let current = match held {
                Some(h) => delta::parse_i64(h).ok_or(StringOpError::NotAnInteger)?,
                None => 0,
            };
            current.checked_add(by).ok_or(StringOpError::Overflow)?;
            let total = counter
                .map_or(0, |c| c.total_of(site))
                .checked_add(by)
                .ok_or(WriteError::StringOp(StringOpError::Overflow))?;
            let saved = held.map_or(0, |h| h.len().saturating_sub(18));
            (
                ChangeKind::Delta {
                    base: Version::ZERO,
                    op: DeltaOp::Count { by, total },
                },
                saved,
            )
        }
        // INCRBYFLOAT where sites merge: this site's float total.
        Write::FloatIncr { by, .. } => {
            let site = merge_site.unwrap_or_default();
            let held = match old {
                Some(e) => Some(e.as_str().ok_or(WriteError::WrongType)?),
                None => None,
            };
            let mine = counter.map_or(Bytes::from_static(b"0"), |c| c.float_total_of(site));
            let total = add_texts(&mine, &by);
            let saved = held.map_or(0, |h| h.len().saturating_sub(total.len() + 2));
            (
                ChangeKind::Delta {
                    base: Version::ZERO,
                    op: DeltaOp::FloatCount { total },
                },
                saved,
            )
        }
        Write::ZIncr { member, by, .. } => {
            let site = merge_site.unwrap_or_default();
            let z = match old {
                Some(e) => Some(e.as_zset().ok_or(WriteError::WrongType)?),
                None => None,
            };
            let total = z
                .and_then(|z| z.counter(&member))
                .map_or(0.0, |c| c.total_of(site))
                + by;
            if total.is_nan() {
                return Err(WriteError::NotANumber);
            }
            return element_op(old, DeltaOp::ZCount { member, total });
        }
        Write::HashFloatIncr { field, by, .. } => {
            let site = merge_site.unwrap_or_default();
            let hash = match old {
                Some(e) => Some(e.as_hash().ok_or(WriteError::WrongType)?),
                None => None,
            };
            let mine = hash
                .and_then(|h| h.counter(&field))
                .map_or(Bytes::from_static(b"0"), |c| c.float_total_of(site));
            let total = add_texts(&mine, &by);
            return element_op(old, DeltaOp::HashFloatCount { field, total });
        }
        // A string operation on a HyperLogLog where sites merge: its bytes
        // at one version differ between sites (raises keep the version),
        // so it is logged whole, never as a delta against them.
        Write::Str(op @ (DeltaOp::Splice { .. } | DeltaOp::Patch { .. }))
            if merging && old.is_some_and(is_hll) =>
        {
            let (held, expire_at) = match old {
                Some(e) => (e.as_str().ok_or(WriteError::WrongType)?, e.expire_at),
                None => return Ok(None),
            };
            let value = Value::str(delta::apply_string_op(held, &op)?);
            (ChangeKind::Full { value, expire_at }, 0)
        }
        Write::Set { value, expire_at } => {
            let delta = match (old, &value) {
                _ if merging && old.is_some_and(is_hll) => None,
                (Some(e), Value::Str(new)) if e.expire_at == expire_at => e
                    .as_str()
                    .and_then(|o| delta::diff(o, new).map(|op| checked(merging, o, op))),
                _ => None,
            };
            return Ok(Some(match delta {
                Some(op) => {
                    let saved = value
                        .payload_len()
                        .saturating_sub(delta::op_payload_len(&op));
                    Planned {
                        kind: ChangeKind::Delta { base, op },
                        saved,
                        new_value: Some(value),
                    }
                }
                None => Planned {
                    kind: ChangeKind::Full { value, expire_at },
                    saved: 0,
                    new_value: None,
                },
            }));
        }
        Write::Str(op) => match old {
            Some(e) => {
                let held = e.as_str().ok_or(WriteError::WrongType)?;
                let op = checked(merging, held, op);
                // A failing op (overflow...) fails in apply_change, which
                // changes nothing, so nothing is logged either.
                let saved = held.len().saturating_sub(delta::op_payload_len(&op));
                (ChangeKind::Delta { base, op }, saved)
            }
            None => {
                let empty: &[u8] = if matches!(op, DeltaOp::IncrBy(_)) {
                    b"0"
                } else {
                    b""
                };
                let value = Value::str(delta::apply_string_op(empty, &op)?);
                (
                    ChangeKind::Full {
                        value,
                        expire_at: 0,
                    },
                    0,
                )
            }
        },
        Write::HashIncr { field, by, text } => {
            let hash = match old {
                Some(e) => Some(e.as_hash().ok_or(WriteError::WrongType)?),
                None => None,
            };
            let op = match merge_site {
                Some(site) => {
                    let total = hash
                        .and_then(|h| h.counter(&field))
                        .map_or(0, |c| c.total_of(site))
                        .checked_add(by)
                        .ok_or(WriteError::StringOp(StringOpError::Overflow))?;
                    DeltaOp::HashCount { field, by, total }
                }
                None => DeltaOp::HashSet {
                    fields: vec![(field, text)],
                },
            };
            return element_op(old, op);
        }
        Write::HashSet(fields) => {
            let held = match old {
                Some(e) => e.as_hash().ok_or(WriteError::WrongType)?.payload_len(),
                None => 0,
            };
            let op = DeltaOp::HashSet { fields };
            let saved = held.saturating_sub(delta::op_payload_len(&op));
            // Field operations merge onto any version: no base to ship.
            (
                ChangeKind::Delta {
                    base: Version::ZERO,
                    op,
                },
                saved,
            )
        }
        Write::HashDel(fields) => {
            let Some(e) = old else { return Ok(None) };
            let held = e.as_hash().ok_or(WriteError::WrongType)?.payload_len();
            let op = DeltaOp::HashDel { fields };
            let saved = held.saturating_sub(delta::op_payload_len(&op));
            (
                ChangeKind::Delta {
                    base: Version::ZERO,
                    op,
                },
                saved,
            )
        }
        Write::SetAdd(mut members) => {
            let held = match old {
                Some(e) => Some(e.as_set().ok_or(WriteError::WrongType)?),
                None => None,
            };
            if let (Some(set), false) = (held, merging) {
                members.retain(|m| !set.contains(m));
            }
            if members.is_empty() {
                return Ok(None);
            }
            return element_op(old, DeltaOp::SetAdd { members });
        }
        Write::ZAdd(mut members) => {
            let held = match old {
                Some(e) => Some(e.as_zset().ok_or(WriteError::WrongType)?),
                None => None,
            };
            if let (Some(z), false) = (held, merging) {
                members
                    .retain(|(m, s)| z.score(m).is_none_or(|h| !crate::value::same_score(h, *s)));
            }
            if members.is_empty() {
                return Ok(None);
            }
            if let (Some(z), true) = (held, merging) {
                if members.iter().any(|(m, _)| z.counter(m).is_some()) {
                    return element_op(old, assign_scores(z, members));
                }
            }
            return element_op(old, DeltaOp::ZAdd { members });
        }
        Write::Remove(names) => {
            let Some(e) = old else { return Ok(None) };
            let coll = match &e.value {
                Value::Set(_) => Coll::Set,
                Value::ZSet(_) => Coll::ZSet,
                _ => return Err(WriteError::WrongType),
            };
            let members: Vec<(Bytes, Version)> = names
                .into_iter()
                .filter_map(|m| e.value.element_version(&m).map(|v| (m, v)))
                .collect();
            if members.is_empty() {
                return Ok(None);
            }
            return element_op(old, DeltaOp::Remove { coll, members });
        }
        Write::List(edits) => return list_edits(old, edits),
        Write::SetExpiry(at) => {
            let Some(e) = old else { return Ok(None) };
            let saved = e.value.payload_len();
            let op = match &e.value {
                // It gives the key a new version: a site holding other
                // bytes at the old one (raised) must take this site's.
                Value::Str(held) => checked(merging, held, DeltaOp::SetExpiry(at)),
                _ => DeltaOp::SetExpiry(at),
            };
            (ChangeKind::Delta { base, op }, saved)
        }
        // Planned above (as raises, or handed back as a Set).
        Write::Hll { .. } | Write::Bits { .. } => return Ok(None),
        Write::Delete => {
            if old.is_none() {
                return Ok(None);
            }
            (ChangeKind::Delete, 0)
        }
    };
    let (kind, saved) = kind_and_saved;
    Ok(Some(Planned {
        kind,
        saved,
        new_value: None,
    }))
}

/// List edits: against an existing list, logged as the edits against its
/// version (or a Delete when they empty it); on no key, the list they make
/// from nothing, whole. Edits that do not fit are a bug of the command:
/// refused, nothing logged.
fn list_edits(old: Option<&Entry>, edits: Vec<ListEdit>) -> Result<Option<Planned>, WriteError> {
    let list = match old {
        Some(e) => Some(e.as_list().ok_or(WriteError::WrongType)?),
        None => None,
    };
    let Some(l) = list else {
        let mut l = ListValue::new();
        if l.apply(&edits).is_err() {
            return Ok(None);
        }
        return Ok(Some(Planned {
            kind: ChangeKind::Full {
                value: Value::List(Box::new(l)),
                expire_at: 0,
            },
            saved: 0,
            new_value: None,
        }));
    };
    let kind = match l.len_after(&edits) {
        None => return Ok(None),
        Some(0) => ChangeKind::Delete,
        Some(_) => ChangeKind::Delta {
            base: old.map_or(Version::ZERO, |e| e.version),
            op: DeltaOp::ListEdit { edits },
        },
    };
    let saved = match &kind {
        ChangeKind::Delta { op, .. } => l.payload_len().saturating_sub(delta::op_payload_len(op)),
        _ => 0,
    };
    Ok(Some(Planned {
        kind,
        saved,
        new_value: None,
    }))
}

/// A write of a counter's whole string (SET, or APPEND, SETRANGE... on it,
/// or INCRBY where sites do not merge): an assignment, logged as the whole
/// counter (increments it has not seen stay counted at other sites, see
/// `CounterValue`). Any other write is handed back.
fn assign(
    c: &CounterValue,
    w: Write,
    old: Option<&Entry>,
    merging: bool,
) -> Result<Result<Planned, Write>, WriteError> {
    let (text, expire_at) = match w {
        Write::Set {
            value: Value::Str(text),
            expire_at,
        } => (text.to_bytes(), expire_at),
        Write::Str(DeltaOp::IncrBy(_)) if merging => return Ok(Err(w)),
        Write::Str(op) => (
            delta::apply_string_op(c.text(), &op)?,
            old.map_or(0, |e| e.expire_at),
        ),
        w => return Ok(Err(w)),
    };
    let mut c = c.clone();
    c.assign(text, Version::ZERO);
    Ok(Ok(Planned {
        kind: ChangeKind::Full {
            value: Value::Counter(Box::new(c)),
            expire_at,
        },
        saved: 0,
        new_value: None,
    }))
}

/// A ZADD naming members whose scores are counters: those are assigned
/// (each state as held, with the score; the write's version is stamped
/// later), the others set as a ZADD. A member named twice takes its last
/// score.
fn assign_scores(z: &ZSetValue, members: Vec<(Bytes, f64)>) -> DeltaOp {
    let mut named = std::collections::HashSet::new();
    let mut last: Vec<(Bytes, f64)> = members
        .into_iter()
        .rev()
        .filter(|(m, _)| named.insert(m.clone()))
        .collect();
    last.reverse();
    let mut plain = Vec::new();
    let mut counters = Vec::new();
    for (m, score) in last {
        match z.counter(&m) {
            Some(c) => {
                let mut c = c.clone();
                c.assign(score, Version::ZERO);
                counters.push((m, c));
            }
            None => plain.push((m, score)),
        }
    }
    DeltaOp::ZAssign {
        members: plain,
        counters,
    }
}

/// PFADD, PFMERGE where sites merge, on a plain string or nothing: the
/// raises, against the version of the key's assignment (its version, which
/// raises keep) or, created, its last removal; nothing when no register
/// was raised on an existing key. Anything else is handed back as a `Set`
/// of the whole value keeping the TTL (a counter's: an assignment).
fn hll_max(
    old: Option<&Entry>,
    registers: Vec<(u16, u8)>,
    value: Bytes,
    merging: bool,
    removed: Option<Version>,
) -> Result<Option<Planned>, Box<Write>> {
    let base = match old {
        _ if !merging => None,
        None => Some(removed.unwrap_or_default()),
        Some(e) if matches!(e.value, Value::Str(_)) => Some(e.version),
        Some(_) => None,
    };
    let Some(base) = base else {
        return Err(Box::new(Write::Set {
            value: Value::str(value),
            expire_at: old.map_or(0, |e| e.expire_at),
        }));
    };
    if old.is_some() && registers.is_empty() {
        return Ok(None);
    }
    let op = DeltaOp::HllMax { registers };
    let saved = value.len().saturating_sub(delta::op_payload_len(&op));
    Ok(Some(Planned {
        kind: ChangeKind::Delta { base, op },
        saved,
        new_value: None,
    }))
}

/// A splice, patch or expiry of `held` where sites merge, with the hash of
/// the bytes it is made on (`DeltaOp::Checked`: raises keep a string's
/// version, so a receiver must check it holds the same bytes); else as is.
fn checked(merging: bool, held: &[u8], op: DeltaOp) -> DeltaOp {
    match op {
        DeltaOp::Splice { .. } | DeltaOp::Patch { .. } | DeltaOp::SetExpiry(_) if merging => {
            DeltaOp::Checked {
                base_hash: crate::bits::bytes_hash(held),
                op: Box::new(op),
            }
        }
        op => op,
    }
}

/// Whether the entry is a string holding a HyperLogLog (its header).
fn is_hll(e: &Entry) -> bool {
    matches!(&e.value, Value::Str(b) if crate::hll::encoding_of(b).is_ok())
}

/// An element operation: it merges onto any version of the key, so no base
/// is shipped.
fn element_op(old: Option<&Entry>, op: DeltaOp) -> Result<Option<Planned>, WriteError> {
    let held = old.map_or(0, |e| e.value.payload_len());
    let saved = held.saturating_sub(delta::op_payload_len(&op));
    Ok(Some(Planned {
        kind: ChangeKind::Delta {
            base: Version::ZERO,
            op,
        },
        saved,
        new_value: None,
    }))
}
