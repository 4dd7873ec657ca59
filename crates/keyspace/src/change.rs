//! A [`Change`] is one effect of one write on one key, with the version the
//! write got. It is what the partition log holds and what backups, WAN
//! receivers and restore apply. Deltas name the version they apply to, so a
//! copy at another version asks for the full value instead of guessing.

use bytes::Bytes;

use crate::tombstones::Coll;
use crate::value::{ListEdit, ScoreCounter, Total, Value};
use crate::version::Version;

#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub key: Bytes,
    pub version: Version,
    pub kind: ChangeKind,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ChangeKind {
    /// The whole value and its expiry (0 = none).
    Full { value: Value, expire_at: u64 },
    /// An operation against the value at version `base`.
    Delta { base: Version, op: DeltaOp },
    /// Removed by a command.
    Delete,
    /// Removed because its time to live ran out.
    Expire,
    /// Removed by eviction (`maxmemory-policy`): a local decision, applied
    /// by the site's replicas (they evict what their primary evicts) and
    /// never shipped to other sites, which keep the key.
    Evict,
}

#[derive(Clone, Debug, PartialEq)]
pub enum DeltaOp {
    /// Replace `remove` bytes at `offset` by `insert` (APPEND, SETRANGE, a
    /// SET that changes one region of a string).
    Splice {
        offset: u32,
        remove: u32,
        insert: Bytes,
    },
    /// Overwrite several ranges of a string of unchanged length.
    Patch { ranges: Vec<(u32, Bytes)> },
    /// Add to the integer held by a string (INCR, INCRBY, DECR, DECRBY).
    IncrBy(i64),
    /// Set hash fields; each takes the change's version. Creates the hash.
    HashSet { fields: Vec<(Bytes, Bytes)> },
    /// Remove hash fields; the key goes when the hash becomes empty.
    HashDel { fields: Vec<Bytes> },
    /// Set (ms since epoch) or clear (0) the key's expiry.
    SetExpiry(u64),
    /// An increment of a merging counter (INCRBY... on a partition that
    /// merges with other sites): by `by`, making the running total of the
    /// increments made at the change's site `total`. Applied as the total,
    /// so a change counts once however often it arrives.
    Count { by: i64, total: i64 },
    /// An increment of a merging counter in hash field `field` (HINCRBY
    /// where partitions merge with other sites); as `Count`.
    HashCount { field: Bytes, by: i64, total: i64 },
    /// An INCRBYFLOAT of a merging counter: the running total of the
    /// INCRBYFLOATs made at the change's site became `total` (a decimal
    /// text). Applied as the total, as `Count`; float and integer totals
    /// are kept apart (see `CounterValue`).
    FloatCount { total: Bytes },
    /// An HINCRBYFLOAT of a merging counter in hash field `field`; as
    /// `FloatCount`.
    HashFloatCount { field: Bytes, total: Bytes },
    /// Add set members; each takes the change's version. Creates the set.
    SetAdd { members: Vec<Bytes> },
    /// A ZINCRBY (or ZADD INCR) of member `member` where partitions merge
    /// with other sites: the running total of the increments of its score
    /// made at the change's site became `total`. Applied as the total, so
    /// it counts once however often it arrives; creates the sorted set and
    /// the member (see `ScoreCounter`).
    ZCount { member: Bytes, total: f64 },
    /// A ZADD where partitions merge with other sites that names members
    /// ZINCRBY made score counters: `members` as a ZADD, and each counter
    /// member's state as the writing site held it, assigned by this write
    /// (its score, and the contributions it had seen: increments made
    /// concurrently elsewhere are kept). Joined into what is held.
    ZAssign {
        members: Vec<(Bytes, f64)>,
        counters: Vec<(Bytes, ScoreCounter)>,
    },
    /// Set sorted-set members' scores; each takes the change's version.
    /// Creates the sorted set.
    ZAdd { members: Vec<(Bytes, f64)> },
    /// Remove members of a set or sorted set (`coll`), each only as far as
    /// the version given: the version the member had where it was removed
    /// (an observed remove), so an add the remover did not see stays. The
    /// key goes when it empties. Also what a member's tombstone is
    /// replayed as.
    Remove {
        coll: Coll,
        members: Vec<(Bytes, Version)>,
    },
    /// Raise registers of the HyperLogLog the key holds (PFADD, PFMERGE
    /// where partitions merge with other sites): `(index, value)`, only
    /// those the write raised. `base` is the version of the write that
    /// assigned the HyperLogLog (the key's version, which raises keep; or
    /// the key's last removal when PFADD created it): the raise applies to
    /// that assignment only. Idempotent and commutative (see `crate::hll::merge`).
    HllMax { registers: Vec<(u16, u8)> },
    /// Set bits of the string the key holds (SETBIT 1 where partitions
    /// merge with other sites): `(byte index, mask)` ORed in, the string
    /// grown with zero bytes up to the index first. Against `base`, the
    /// version of the write that assigned the string (the key's version,
    /// which raises keep), as `HllMax`. Idempotent and commutative (see
    /// `crate::bits`).
    BitsOr { bytes: Vec<(u32, u8)> },
    /// A string operation (`Splice` or `Patch`), or the `SetExpiry` of a
    /// string, made where sites merge, with the hash of the bytes it was
    /// made on (`crate::bits::bytes_hash`): raises keep a string's
    /// version, so its bytes at one version may differ between sites; a
    /// receiver applies it only to the same bytes and otherwise asks for
    /// the full value. Never nested (the decoder refuses it).
    Checked { base_hash: u64, op: Box<DeltaOp> },
    /// Edit the list the key holds: each edit, in order, removes elements
    /// at an index and inserts others there (every list command is a
    /// sequence of them; see `crate::value::ListValue`). Positions mean
    /// something only in the exact list they were made on: applied to the
    /// version `base` only, a copy holding another asks for the full list.
    /// An edit never empties the list (the write path logs a Delete).
    ListEdit { edits: Vec<ListEdit> },
}

impl DeltaOp {
    /// String operations only make sense on the exact base value; hash field
    /// and expiry operations merge onto any version of the key.
    pub fn needs_base(&self) -> bool {
        match self {
            DeltaOp::Splice { .. }
            | DeltaOp::Patch { .. }
            | DeltaOp::IncrBy(_)
            | DeltaOp::ListEdit { .. } => true,
            DeltaOp::Checked { op, .. } => !matches!(**op, DeltaOp::SetExpiry(_)),
            _ => false,
        }
    }

    /// The expiry a `SetExpiry`, plain or checked, sets (None: another op).
    pub fn expiry(&self) -> Option<u64> {
        match self {
            DeltaOp::SetExpiry(at) => Some(*at),
            DeltaOp::Checked { op, .. } => match **op {
                DeltaOp::SetExpiry(at) => Some(at),
                _ => None,
            },
            _ => None,
        }
    }

    /// The kind of collection an element operation is about (None: a
    /// string or expiry operation).
    pub fn coll(&self) -> Option<Coll> {
        match self {
            DeltaOp::HashSet { .. }
            | DeltaOp::HashDel { .. }
            | DeltaOp::HashCount { .. }
            | DeltaOp::HashFloatCount { .. } => Some(Coll::Hash),
            DeltaOp::SetAdd { .. } => Some(Coll::Set),
            DeltaOp::ZAdd { .. } | DeltaOp::ZCount { .. } | DeltaOp::ZAssign { .. } => {
                Some(Coll::ZSet)
            }
            DeltaOp::Remove { coll, .. } => Some(*coll),
            _ => None,
        }
    }
}

impl DeltaOp {
    /// A raise applied to the string `held` (None: nothing changes), or,
    /// nothing held, the string it makes from nothing. Err: not a raise, or
    /// one that does not apply (a register raise on a string that is not a
    /// HyperLogLog, a byte index past the longest string).
    pub fn raised(&self, held: Option<&[u8]>) -> Result<Option<Vec<u8>>, NotRaisable> {
        match (self, held) {
            (DeltaOp::HllMax { registers }, None) => crate::hll::merge::created(registers)
                .map(Some)
                .map_err(|_| NotRaisable),
            (DeltaOp::HllMax { registers }, Some(b)) => {
                crate::hll::merge::raised(b, registers).map_err(|_| NotRaisable)
            }
            (DeltaOp::BitsOr { bytes }, held) => {
                match crate::bits::ored(held.unwrap_or_default(), bytes) {
                    Ok(None) if held.is_none() => Ok(Some(Vec::new())),
                    Ok(r) => Ok(r),
                    Err(_) => Err(NotRaisable),
                }
            }
            _ => Err(NotRaisable),
        }
    }
}

/// A raise that does not apply to the string held (see [`DeltaOp::raised`]).
#[derive(Debug, PartialEq, Eq)]
pub struct NotRaisable;

impl DeltaOp {
    /// The running total a counter increment ships (None: not one).
    pub fn total(&self) -> Option<Total<'_>> {
        match self {
            DeltaOp::Count { total, .. } | DeltaOp::HashCount { total, .. } => {
                Some(Total::Int(*total))
            }
            DeltaOp::FloatCount { total } | DeltaOp::HashFloatCount { total, .. } => {
                Some(Total::Float(total))
            }
            _ => None,
        }
    }
}

impl Change {
    /// Whether a WAN publisher of `site` ships this change: made at that
    /// site (another site's change is not shipped back) and not an
    /// eviction (a local decision: the other sites keep the key).
    pub fn ships_from(&self, site: u16) -> bool {
        self.version.site == site && !matches!(self.kind, ChangeKind::Evict)
    }
}

impl ChangeKind {
    pub const NAMES: [&'static str; 5] = ["full", "delta", "delete", "expire", "evict"];
    /// [`ChangeKind::index`] of a `Delta`.
    pub const DELTA_INDEX: usize = 1;
    /// [`ChangeKind::index`] of an `Evict`.
    pub const EVICT_INDEX: usize = 4;

    /// Index into [`ChangeKind::NAMES`], for per-kind counters.
    pub fn index(&self) -> usize {
        match self {
            ChangeKind::Full { .. } => 0,
            ChangeKind::Delta { .. } => 1,
            ChangeKind::Delete => 2,
            ChangeKind::Expire => 3,
            ChangeKind::Evict => 4,
        }
    }

    /// Whether [`crate::apply::apply_owned_at`] moves this change's data
    /// into the entry (a whole value, hash fields) instead of cloning it.
    pub fn moves_into_entry(&self) -> bool {
        matches!(
            self,
            ChangeKind::Full { .. }
                | ChangeKind::Delta {
                    op: DeltaOp::HashSet { .. },
                    ..
                }
        )
    }
}
