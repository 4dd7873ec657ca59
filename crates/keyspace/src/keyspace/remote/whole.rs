//! Keys as wholes, and the tombstones' accounting: what a site that could
//! not apply a delta, or a re-sync, gets of a key ([`Partition::full_changes`],
//! the removals as changes), and what a late whole value no longer brings
//! back once every site has passed it ([`settled_away`], see
//! [`crate::tombstones`]).

use std::collections::VecDeque;

use bytes::Bytes;

use super::Keyspace;
use crate::change::{Change, ChangeKind, DeltaOp};
use crate::partition::Partition;
use crate::tombstones::{Coll, Tomb};
use crate::value::{Entry, Value};
use crate::version::Version;

impl Keyspace {
    /// Bytes held by tombstones, all partitions.
    pub fn tombstone_bytes(&self) -> usize {
        self.parts.iter().map(|p| p.lock().tombstones.bytes()).sum()
    }

    /// Tombstones held, and how many were evicted over budget before every
    /// other site had passed them, all partitions.
    pub fn tombstone_counts(&self) -> (usize, u64) {
        self.parts.iter().fold((0, 0), |(n, e), p| {
            let p = p.lock();
            (n + p.tombstones.len(), e + p.tombstones.evicted_unsettled())
        })
    }

    /// Every other site applied partition `p` up to `hlc` (what
    /// `wan::settled` learnt from them): its tombstones at or below it
    /// can go, as no site will send a change older than them.
    pub fn settle_tombstones(&self, p: usize, hlc: u64) {
        if let Some(part) = self.parts.get(p) {
            part.lock().tombstones.settle(hlc);
        }
    }

    /// Forgets every partition's settled point (this site's data started
    /// over: what the other sites had passed, it no longer holds).
    pub fn unsettle_tombstones(&self) {
        for part in &self.parts {
            part.lock().tombstones.unsettle();
        }
    }
}

impl Partition {
    /// The key as this copy holds it, for a site that could not apply a
    /// delta: its floor as a Delete (the removal older writes lose to), the
    /// versions at which it was last a collection of each kind that lost
    /// its last element ([`emptied_at`]), its full value with its version,
    /// then its field and member tombstones (so that an element the
    /// remover saw does not come back there). Nothing when none is held.
    pub fn full_changes(&self, key: &Bytes) -> Vec<Change> {
        let mut out = Vec::with_capacity(2);
        if let Some(floor) = self.tombstones.key(key) {
            out.push(Change {
                key: key.clone(),
                version: floor,
                kind: ChangeKind::Delete,
            });
        }
        for coll in [Coll::Hash, Coll::Set, Coll::ZSet] {
            if let Some(v) = self.tombstones.emptied(key, coll) {
                out.push(emptied_at(key.clone(), coll, v));
            }
        }
        if let Some(e) = self.get(key) {
            out.push(Change {
                key: key.clone(),
                version: e.version,
                kind: ChangeKind::Full {
                    value: e.value.clone(),
                    expire_at: e.expire_at,
                },
            });
        }
        out.extend(
            self.tombstones
                .fields(key)
                .map(|(f, v)| field_tomb(key.clone(), f.clone(), v)),
        );
        for coll in [Coll::Set, Coll::ZSet] {
            out.extend(
                self.tombstones
                    .members(key, coll)
                    .map(|(m, v)| member_tomb(key.clone(), coll, m.clone(), v)),
            );
        }
        out
    }

    /// The key as a re-sync copies it ([`Partition::full_changes`], less a
    /// value expired by `now_ms`): with the keys taken at one moment
    /// ([`Partition::copy_keys`]) and read a batch at a time, whatever the
    /// log holds after that moment following them, a copy of the partition
    /// that never holds it all at once.
    pub fn copy_changes(&self, key: &Bytes, now_ms: u64) -> Vec<Change> {
        let mut out = self.full_changes(key);
        if self.get(key).is_some_and(|e| e.is_expired(now_ms)) {
            out.retain(|c| !matches!(c.kind, ChangeKind::Full { .. }));
        }
        out
    }

    /// Every key a re-sync copies: those held (less expired ones), then
    /// those that only have tombstones.
    pub fn copy_keys(&self, now_ms: u64) -> VecDeque<Bytes> {
        let held = self
            .iter()
            .filter(|(_, e)| !e.is_expired(now_ms))
            .map(|(k, _)| k.to_bytes());
        let gone = self
            .tombstones
            .keys()
            .filter(|k| self.get(k).is_none())
            .cloned();
        held.chain(gone).collect()
    }

    /// The tombstones as changes (a Delete per key floor, an HDEL per field
    /// tombstone, an HDEL of no field per hash version), oldest first:
    /// loaded after a snapshot's entries through
    /// [`Keyspace::load_replica_entry`], they give a new backup the
    /// primary's tombstones.
    pub fn tombstone_changes(&self) -> Vec<Change> {
        self.tombstones
            .iter()
            .map(|(key, what, version)| match what {
                Tomb::Key => Change {
                    key: key.clone(),
                    version,
                    kind: ChangeKind::Delete,
                },
                Tomb::Emptied(coll) => emptied_at(key.clone(), *coll, version),
                Tomb::Field(f) => field_tomb(key.clone(), f.clone(), version),
                Tomb::Member(coll, m) => member_tomb(key.clone(), *coll, m.clone(), version),
            })
            .collect()
    }
}

/// What every other site has passed (`settled`, see
/// [`crate::tombstones`]) this copy applied: what it lacks of that was
/// removed here, though the tombstone may have gone. So a change at or
/// below it for a key not held is lost (true), and a whole collection
/// (a late full value, a re-sync copy) loses the elements at or below it
/// that the held value lacks.
pub(super) fn settled_away(settled: u64, entry: Option<&Entry>, change: &mut Change) -> bool {
    if settled == 0 || matches!(change.kind, ChangeKind::Delete | ChangeKind::Expire) {
        return false;
    }
    // A HyperLogLog keeps the version of its assignment (or of the removal
    // it was made after, or none) while its registers rise: an old version
    // says nothing of what is new in it.
    if let ChangeKind::Full {
        value: Value::Str(b),
        ..
    } = &change.kind
    {
        if crate::hll::encoding_of(b).is_ok() {
            return false;
        }
    }
    if entry.is_none() && change.version.hlc <= settled {
        return true;
    }
    let ChangeKind::Full { value, .. } = &mut change.kind else {
        return false;
    };
    let held = entry
        .map(|e| &e.value)
        .filter(|h| h.coll().is_some() && h.coll() == value.coll());
    let lacked = |name: &[u8], version: Version| {
        version.hlc <= settled && held.is_none_or(|h| h.element_version(name).is_none())
    };
    let gone: Vec<Bytes> = match &*value {
        Value::Hash(h) => h
            .iter()
            .filter(|(n, f)| lacked(n, f.version))
            .map(|(n, _)| Bytes::copy_from_slice(n))
            .collect(),
        Value::Set(s) => s
            .iter()
            .filter(|(n, v)| lacked(n, *v))
            .map(|(n, _)| Bytes::copy_from_slice(n))
            .collect(),
        Value::ZSet(z) => z
            .iter()
            .filter(|(n, m)| lacked(n, m.version))
            .map(|(n, _)| Bytes::copy_from_slice(n))
            .collect(),
        _ => return false,
    };
    for name in &gone {
        value.remove_element(name);
    }
    !gone.is_empty() && value.is_empty_collection()
}

/// A field tombstone as a change: an HDEL of the field at `v`.
fn field_tomb(key: Bytes, field: Bytes, v: Version) -> Change {
    Change {
        key,
        version: v,
        kind: ChangeKind::Delta {
            base: Version::ZERO,
            op: DeltaOp::HashDel {
                fields: vec![field],
            },
        },
    }
}

/// A member tombstone as a change: the removal of the member as far as
/// `v` (the add it observed).
fn member_tomb(key: Bytes, coll: Coll, member: Bytes, v: Version) -> Change {
    Change {
        key,
        version: v,
        kind: ChangeKind::Delta {
            base: Version::ZERO,
            op: DeltaOp::Remove {
                coll,
                members: vec![(member, v)],
            },
        },
    }
}

/// "The key was a collection of kind `coll` at v, and emptied": an HDEL of
/// no field, or an add of no member.
pub(super) fn emptied_at(key: Bytes, coll: Coll, v: Version) -> Change {
    let op = match coll {
        Coll::Hash => DeltaOp::HashDel { fields: Vec::new() },
        Coll::Set => DeltaOp::SetAdd {
            members: Vec::new(),
        },
        Coll::ZSet => DeltaOp::ZAdd {
            members: Vec::new(),
        },
    };
    Change {
        key,
        version: v,
        kind: ChangeKind::Delta {
            base: Version::ZERO,
            op,
        },
    }
}
