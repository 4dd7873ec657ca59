//! Binary encoding of a [`Change`]: what the partition log counts, and the
//! form changes take between nodes, sites and in backups. Integers are
//! LEB128 varints; byte strings are length-prefixed.
//!
//! The decoder reads bytes from peers and files: every length is checked
//! against what is left before anything is allocated, and every error is a
//! [`DecodeError`], never a panic. What it returns owns its bytes (copied,
//! small hash fields packed): a decoded change is stored, and must not keep
//! the batch or block it came from alive.

use bytes::BufMut;

use crate::change::{Change, ChangeKind, DeltaOp};
use crate::tombstones::Coll;
use crate::value::{HashValue, ListEdit, ListValue, SetValue, Value, ZSetValue};
use crate::version::Version;

mod states;
pub(crate) mod wire;

use states::{counter_len, put_counter, put_score_counter, score_counter_len};
use wire::{
    bytes_len, put_bytes, put_varint, put_version, unzigzag, varint_len, version_len, zigzag,
    Reader,
};

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("truncated change")]
    Truncated,
    #[error("varint too long")]
    BadVarint,
    #[error("unknown {what} tag {tag}")]
    BadTag { what: &'static str, tag: u8 },
    #[error("value out of range")]
    OutOfRange,
}

const FULL: u8 = 0;
const DELTA: u8 = 1;
const DELETE: u8 = 2;
const EXPIRE: u8 = 3;
const EVICT: u8 = 4;

const STR: u8 = 0;
const HASH: u8 = 1;
const SET: u8 = 2;
const ZSET: u8 = 3;
const COUNTER: u8 = 4;
/// A hash with counter fields: the fields, then each counter's state.
const HASH_COUNTERS: u8 = 5;
/// A sorted set with score states: the members, then each state.
const ZSET_COUNTERS: u8 = 6;
/// A list: the count, then each element from the head.
const LIST: u8 = 7;

const SPLICE: u8 = 0;
const PATCH: u8 = 1;
const INCRBY: u8 = 2;
const HSET: u8 = 3;
const HDEL: u8 = 4;
const SETEXPIRY: u8 = 5;
const SADD: u8 = 6;
const ZADD: u8 = 7;
const REMOVE: u8 = 8;
const COUNT: u8 = 9;
const HCOUNT: u8 = 10;
const FCOUNT: u8 = 11;
const HFCOUNT: u8 = 12;
const ZCOUNT: u8 = 13;
const ZASSIGN: u8 = 14;
/// A count of edits, then per edit its index, the elements it removes and
/// the count and bytes of those it inserts.
const LISTEDIT: u8 = 15;
/// Tags 16..=19 are left for other ops.
const HLLMAX: u8 = 20;
/// Tag 21 is left for other ops.
/// A count, then per raise a byte index (4 bytes, little-endian, under
/// `bits::MAX_LEN`) and a mask.
const BITSOR: u8 = 22;
/// The base's hash (8 bytes, little-endian), then a splice, a patch or an
/// expiry (never another checked op).
const CHECKED: u8 = 23;

/// Exact length of [`encode`]'s output, computed without encoding.
pub fn encoded_len(c: &Change) -> usize {
    bytes_len(&c.key)
        + version_len(&c.version)
        + 1
        + match &c.kind {
            ChangeKind::Full { value, expire_at } => value_len(value) + varint_len(*expire_at),
            ChangeKind::Delta { base, op } => version_len(base) + op_len(op),
            ChangeKind::Delete | ChangeKind::Expire | ChangeKind::Evict => 0,
        }
}

/// Length of a value's encoding inside a full change (its type tag, then
/// the string, or the fields with their versions): what the value takes
/// in the partition log, a replication stream or a backup.
pub fn value_len(v: &Value) -> usize {
    1 + match v {
        Value::Str(b) => bytes_len(b),
        Value::Counter(c) => counter_len(c),
        Value::Hash(h) => {
            varint_len(h.len() as u64)
                + h.iter()
                    .map(|(f, fv)| bytes_len(f) + bytes_len(fv.value) + version_len(&fv.version))
                    .sum::<usize>()
                + match h.counters().count() {
                    0 => 0,
                    n => {
                        varint_len(n as u64)
                            + h.counters()
                                .map(|(f, c)| bytes_len(f) + counter_len(c))
                                .sum::<usize>()
                    }
                }
        }
        Value::List(l) => varint_len(l.len() as u64) + l.iter().map(bytes_len).sum::<usize>(),
        Value::Set(set) => {
            varint_len(set.len() as u64)
                + set
                    .iter()
                    .map(|(m, v)| bytes_len(m) + version_len(&v))
                    .sum::<usize>()
        }
        Value::ZSet(z) => {
            varint_len(z.len() as u64)
                + z.iter()
                    .map(|(m, x)| bytes_len(m) + 8 + version_len(&x.version))
                    .sum::<usize>()
                + match z.counters().count() {
                    0 => 0,
                    n => {
                        varint_len(n as u64)
                            + z.counters()
                                .map(|(m, c)| bytes_len(m) + score_counter_len(c))
                                .sum::<usize>()
                    }
                }
        }
    }
}

fn op_len(op: &DeltaOp) -> usize {
    1 + match op {
        DeltaOp::Splice {
            offset,
            remove,
            insert,
        } => varint_len(*offset as u64) + varint_len(*remove as u64) + bytes_len(insert),
        DeltaOp::Patch { ranges } => {
            varint_len(ranges.len() as u64)
                + ranges
                    .iter()
                    .map(|(o, b)| varint_len(*o as u64) + bytes_len(b))
                    .sum::<usize>()
        }
        DeltaOp::IncrBy(n) => varint_len(zigzag(*n)),
        DeltaOp::HashSet { fields } => {
            varint_len(fields.len() as u64)
                + fields
                    .iter()
                    .map(|(f, v)| bytes_len(f) + bytes_len(v))
                    .sum::<usize>()
        }
        DeltaOp::HashDel { fields } => {
            varint_len(fields.len() as u64) + fields.iter().map(|f| bytes_len(f)).sum::<usize>()
        }
        DeltaOp::SetExpiry(at) => varint_len(*at),
        DeltaOp::Count { by, total } => varint_len(zigzag(*by)) + varint_len(zigzag(*total)),
        DeltaOp::HashCount { field, by, total } => {
            bytes_len(field) + varint_len(zigzag(*by)) + varint_len(zigzag(*total))
        }
        DeltaOp::FloatCount { total } => bytes_len(total),
        DeltaOp::ZCount { member, .. } => bytes_len(member) + 8,
        DeltaOp::ZAssign { members, counters } => {
            varint_len(members.len() as u64)
                + members.iter().map(|(m, _)| bytes_len(m) + 8).sum::<usize>()
                + varint_len(counters.len() as u64)
                + counters
                    .iter()
                    .map(|(m, c)| bytes_len(m) + score_counter_len(c))
                    .sum::<usize>()
        }
        DeltaOp::HashFloatCount { field, total } => bytes_len(field) + bytes_len(total),
        DeltaOp::SetAdd { members } => {
            varint_len(members.len() as u64) + members.iter().map(|m| bytes_len(m)).sum::<usize>()
        }
        DeltaOp::ZAdd { members } => {
            varint_len(members.len() as u64)
                + members.iter().map(|(m, _)| bytes_len(m) + 8).sum::<usize>()
        }
        DeltaOp::HllMax { registers } => varint_len(registers.len() as u64) + 3 * registers.len(),
        DeltaOp::BitsOr { bytes } => varint_len(bytes.len() as u64) + 5 * bytes.len(),
        DeltaOp::Checked { op, .. } => 8 + op_len(op),
        DeltaOp::ListEdit { edits } => {
            varint_len(edits.len() as u64)
                + edits
                    .iter()
                    .map(|e| {
                        varint_len(e.at as u64)
                            + varint_len(e.remove as u64)
                            + varint_len(e.insert.len() as u64)
                            + e.insert.iter().map(|b| bytes_len(b)).sum::<usize>()
                    })
                    .sum::<usize>()
        }
        DeltaOp::Remove { members, .. } => {
            1 + varint_len(members.len() as u64)
                + members
                    .iter()
                    .map(|(m, v)| bytes_len(m) + version_len(v))
                    .sum::<usize>()
        }
    }
}

pub fn encode(c: &Change, out: &mut impl BufMut) {
    put_bytes(out, &c.key);
    put_version(out, &c.version);
    match &c.kind {
        ChangeKind::Full { value, expire_at } => {
            out.put_u8(FULL);
            encode_value(value, out);
            put_varint(out, *expire_at);
        }
        ChangeKind::Delta { base, op } => {
            out.put_u8(DELTA);
            put_version(out, base);
            encode_op(op, out);
        }
        ChangeKind::Delete => out.put_u8(DELETE),
        ChangeKind::Expire => out.put_u8(EXPIRE),
        ChangeKind::Evict => out.put_u8(EVICT),
    }
}

fn encode_value(v: &Value, out: &mut impl BufMut) {
    match v {
        Value::Str(b) => {
            out.put_u8(STR);
            put_bytes(out, b);
        }
        Value::Counter(c) => {
            out.put_u8(COUNTER);
            put_counter(out, c);
        }
        Value::Hash(h) => {
            let counters = h.counters().count();
            out.put_u8(if counters > 0 { HASH_COUNTERS } else { HASH });
            put_varint(out, h.len() as u64);
            for (f, fv) in h.iter() {
                put_bytes(out, f);
                put_bytes(out, fv.value);
                put_version(out, &fv.version);
            }
            if counters > 0 {
                put_varint(out, counters as u64);
                for (f, c) in h.counters() {
                    put_bytes(out, f);
                    put_counter(out, c);
                }
            }
        }
        Value::List(l) => {
            out.put_u8(LIST);
            put_varint(out, l.len() as u64);
            for e in l.iter() {
                put_bytes(out, e);
            }
        }
        Value::Set(set) => {
            out.put_u8(SET);
            put_varint(out, set.len() as u64);
            for (m, v) in set.iter() {
                put_bytes(out, m);
                put_version(out, &v);
            }
        }
        Value::ZSet(z) => {
            let counters = z.counters().count();
            out.put_u8(if counters == 0 { ZSET } else { ZSET_COUNTERS });
            put_varint(out, z.len() as u64);
            for (m, x) in z.iter() {
                put_bytes(out, m);
                out.put_f64_le(x.score);
                put_version(out, &x.version);
            }
            if counters > 0 {
                put_varint(out, counters as u64);
                for (m, c) in z.counters() {
                    put_bytes(out, m);
                    put_score_counter(out, c);
                }
            }
        }
    }
}

fn encode_op(op: &DeltaOp, out: &mut impl BufMut) {
    match op {
        DeltaOp::Splice {
            offset,
            remove,
            insert,
        } => {
            out.put_u8(SPLICE);
            put_varint(out, *offset as u64);
            put_varint(out, *remove as u64);
            put_bytes(out, insert);
        }
        DeltaOp::Patch { ranges } => {
            out.put_u8(PATCH);
            put_varint(out, ranges.len() as u64);
            for (o, b) in ranges {
                put_varint(out, *o as u64);
                put_bytes(out, b);
            }
        }
        DeltaOp::IncrBy(n) => {
            out.put_u8(INCRBY);
            put_varint(out, zigzag(*n));
        }
        DeltaOp::HashSet { fields } => {
            out.put_u8(HSET);
            put_varint(out, fields.len() as u64);
            for (f, v) in fields {
                put_bytes(out, f);
                put_bytes(out, v);
            }
        }
        DeltaOp::HashDel { fields } => {
            out.put_u8(HDEL);
            put_varint(out, fields.len() as u64);
            for f in fields {
                put_bytes(out, f);
            }
        }
        DeltaOp::SetExpiry(at) => {
            out.put_u8(SETEXPIRY);
            put_varint(out, *at);
        }
        DeltaOp::Count { by, total } => {
            out.put_u8(COUNT);
            put_varint(out, zigzag(*by));
            put_varint(out, zigzag(*total));
        }
        DeltaOp::HashCount { field, by, total } => {
            out.put_u8(HCOUNT);
            put_bytes(out, field);
            put_varint(out, zigzag(*by));
            put_varint(out, zigzag(*total));
        }
        DeltaOp::ZAssign { members, counters } => {
            out.put_u8(ZASSIGN);
            put_varint(out, members.len() as u64);
            for (m, score) in members {
                put_bytes(out, m);
                out.put_f64_le(*score);
            }
            put_varint(out, counters.len() as u64);
            for (m, c) in counters {
                put_bytes(out, m);
                put_score_counter(out, c);
            }
        }
        DeltaOp::ZCount { member, total } => {
            out.put_u8(ZCOUNT);
            put_bytes(out, member);
            out.put_f64_le(*total);
        }
        DeltaOp::FloatCount { total } => {
            out.put_u8(FCOUNT);
            put_bytes(out, total);
        }
        DeltaOp::HashFloatCount { field, total } => {
            out.put_u8(HFCOUNT);
            put_bytes(out, field);
            put_bytes(out, total);
        }
        DeltaOp::SetAdd { members } => {
            out.put_u8(SADD);
            put_varint(out, members.len() as u64);
            for m in members {
                put_bytes(out, m);
            }
        }
        DeltaOp::ZAdd { members } => {
            out.put_u8(ZADD);
            put_varint(out, members.len() as u64);
            for (m, score) in members {
                put_bytes(out, m);
                out.put_f64_le(*score);
            }
        }
        DeltaOp::HllMax { registers } => {
            out.put_u8(HLLMAX);
            put_varint(out, registers.len() as u64);
            for (i, v) in registers {
                out.put_u16_le(*i);
                out.put_u8(*v);
            }
        }
        DeltaOp::Checked { base_hash, op } => {
            out.put_u8(CHECKED);
            out.put_u64_le(*base_hash);
            encode_op(op, out);
        }
        DeltaOp::BitsOr { bytes } => {
            out.put_u8(BITSOR);
            put_varint(out, bytes.len() as u64);
            for (i, m) in bytes {
                out.put_u32_le(*i);
                out.put_u8(*m);
            }
        }
        DeltaOp::ListEdit { edits } => {
            out.put_u8(LISTEDIT);
            put_varint(out, edits.len() as u64);
            for e in edits {
                put_varint(out, e.at as u64);
                put_varint(out, e.remove as u64);
                put_varint(out, e.insert.len() as u64);
                for b in &e.insert {
                    put_bytes(out, b);
                }
            }
        }
        DeltaOp::Remove { coll, members } => {
            out.put_u8(REMOVE);
            out.put_u8(*coll as u8);
            put_varint(out, members.len() as u64);
            for (m, v) in members {
                put_bytes(out, m);
                put_version(out, v);
            }
        }
    }
}

/// Hash field name/value pairs.
/// Decodes one change from the front of `buf`; returns it and the bytes used.
pub fn decode(buf: &[u8]) -> Result<(Change, usize), DecodeError> {
    let mut r = Reader { buf, pos: 0 };
    let key = r.bytes()?;
    let version = r.version()?;
    let kind = match r.u8()? {
        FULL => {
            let value = decode_value(&mut r)?;
            ChangeKind::Full {
                value,
                expire_at: r.varint()?,
            }
        }
        DELTA => {
            let base = r.version()?;
            ChangeKind::Delta {
                base,
                op: decode_op(&mut r)?,
            }
        }
        DELETE => ChangeKind::Delete,
        EXPIRE => ChangeKind::Expire,
        EVICT => ChangeKind::Evict,
        tag => {
            return Err(DecodeError::BadTag {
                what: "change",
                tag,
            })
        }
    };
    Ok((Change { key, version, kind }, r.pos))
}

/// The front of an encoded change: what filtering and routing need, read
/// without decoding (or copying) the rest.
#[derive(Debug, PartialEq)]
pub struct Head<'a> {
    pub key: &'a [u8],
    pub version: Version,
    /// [`ChangeKind::index`] of the change.
    pub kind: usize,
}

impl Head<'_> {
    /// Whether a WAN publisher of `site` ships this change (see
    /// [`Change::ships_from`]).
    pub fn ships_from(&self, site: u16) -> bool {
        self.version.site == site && self.kind != ChangeKind::EVICT_INDEX
    }
}

/// Reads the [`Head`] of the change encoded at the front of `buf`.
pub fn head(buf: &[u8]) -> Result<Head<'_>, DecodeError> {
    let mut r = Reader { buf, pos: 0 };
    let key = r.slice()?;
    let version = r.version()?;
    let kind = match r.u8()? {
        FULL => 0,
        DELTA => 1,
        DELETE => 2,
        EXPIRE => 3,
        EVICT => 4,
        tag => {
            return Err(DecodeError::BadTag {
                what: "change",
                tag,
            })
        }
    };
    Ok(Head { key, version, kind })
}

fn decode_value(r: &mut Reader) -> Result<Value, DecodeError> {
    match r.u8()? {
        STR => Ok(Value::str(r.bytes()?)),
        COUNTER => Ok(Value::Counter(Box::new(r.counter()?))),
        tag @ (HASH | HASH_COUNTERS) => {
            let n = r.count(4)?;
            let (fields, versions) = r.pairs(n, true)?;
            let mut h = HashValue::new();
            for ((f, v), version) in fields.into_iter().zip(versions) {
                h.set(f, v, version);
            }
            if tag == HASH_COUNTERS {
                let n = r.count(8)?;
                for _ in 0..n {
                    let field = r.bytes()?;
                    let counter = r.counter()?;
                    // A counter is only ever of a field the hash holds.
                    let version = h.get(&field).ok_or(DecodeError::OutOfRange)?.version;
                    h.set_counter(&field, counter, version);
                }
            }
            Ok(Value::Hash(h))
        }
        LIST => {
            let n = r.count(1)?;
            // A list is never empty (its last element's removal deletes it).
            if n == 0 {
                return Err(DecodeError::OutOfRange);
            }
            let items = r.members(n, |_| Ok(()))?;
            Ok(Value::List(Box::new(ListValue::from_items(
                items.into_iter().map(|(e, ())| e),
            ))))
        }
        SET => {
            let n = r.count(3)?;
            let mut set = SetValue::new();
            for (m, v) in r.members(n, Reader::version)? {
                set.add(&m, v);
            }
            Ok(Value::Set(set))
        }
        tag @ (ZSET | ZSET_COUNTERS) => {
            let n = r.count(11)?;
            let mut z = ZSetValue::new();
            for (m, (score, v)) in r.members(n, |r| Ok((r.score()?, r.version()?)))? {
                z.insert(&m, score, v);
            }
            if tag == ZSET_COUNTERS {
                let n = r.count(22)?;
                for _ in 0..n {
                    let member = r.bytes()?;
                    let counter = r.score_counter()?;
                    // A state is only ever of a member the set holds.
                    if z.get(&member).is_none() {
                        return Err(DecodeError::OutOfRange);
                    }
                    z.set_counter(&member, counter);
                }
            }
            Ok(Value::ZSet(z))
        }
        tag => Err(DecodeError::BadTag { what: "value", tag }),
    }
}

fn decode_op(r: &mut Reader) -> Result<DeltaOp, DecodeError> {
    Ok(match r.u8()? {
        SPLICE => DeltaOp::Splice {
            offset: r.u32()?,
            remove: r.u32()?,
            insert: r.bytes()?,
        },
        PATCH => {
            let n = r.count(2)?;
            let mut ranges = Vec::with_capacity(n);
            for _ in 0..n {
                ranges.push((r.u32()?, r.bytes()?));
            }
            DeltaOp::Patch { ranges }
        }
        INCRBY => DeltaOp::IncrBy(unzigzag(r.varint()?)),
        HSET => {
            let n = r.count(2)?;
            DeltaOp::HashSet {
                fields: r.pairs(n, false)?.0,
            }
        }
        HDEL => {
            let n = r.count(1)?;
            let mut fields = Vec::with_capacity(n);
            for _ in 0..n {
                fields.push(r.bytes()?);
            }
            DeltaOp::HashDel { fields }
        }
        SETEXPIRY => DeltaOp::SetExpiry(r.varint()?),
        COUNT => DeltaOp::Count {
            by: unzigzag(r.varint()?),
            total: unzigzag(r.varint()?),
        },
        HCOUNT => DeltaOp::HashCount {
            field: r.bytes()?,
            by: unzigzag(r.varint()?),
            total: unzigzag(r.varint()?),
        },
        ZASSIGN => {
            let n = r.count(9)?;
            let members = r.members(n, Reader::score)?;
            let n = r.count(22)?;
            let mut counters = Vec::with_capacity(n);
            for _ in 0..n {
                counters.push((r.bytes()?, r.score_counter()?));
            }
            DeltaOp::ZAssign { members, counters }
        }
        ZCOUNT => DeltaOp::ZCount {
            member: r.bytes()?,
            total: r.score()?,
        },
        FCOUNT => DeltaOp::FloatCount {
            total: r.float_text()?,
        },
        HFCOUNT => DeltaOp::HashFloatCount {
            field: r.bytes()?,
            total: r.float_text()?,
        },
        SADD => {
            let n = r.count(1)?;
            let members = r.members(n, |_| Ok(()))?;
            DeltaOp::SetAdd {
                members: members.into_iter().map(|(m, ())| m).collect(),
            }
        }
        ZADD => {
            let n = r.count(9)?;
            DeltaOp::ZAdd {
                members: r.members(n, Reader::score)?,
            }
        }
        REMOVE => {
            let coll = match r.u8()? {
                1 => Coll::Set,
                2 => Coll::ZSet,
                tag => {
                    return Err(DecodeError::BadTag {
                        what: "removal",
                        tag,
                    })
                }
            };
            let n = r.count(3)?;
            DeltaOp::Remove {
                coll,
                members: r.members(n, Reader::version)?,
            }
        }
        HLLMAX => {
            let n = r.count(3)?;
            if n > crate::hll::REGISTERS {
                return Err(DecodeError::OutOfRange);
            }
            let mut registers = Vec::with_capacity(n);
            for _ in 0..n {
                let i = u16::from_le_bytes([r.u8()?, r.u8()?]);
                let v = r.u8()?;
                if usize::from(i) >= crate::hll::REGISTERS
                    || v > crate::hll::merge::REGISTER_VALUE_MAX
                {
                    return Err(DecodeError::OutOfRange);
                }
                registers.push((i, v));
            }
            DeltaOp::HllMax { registers }
        }
        CHECKED => {
            let mut h = [0u8; 8];
            for b in &mut h {
                *b = r.u8()?;
            }
            let base_hash = u64::from_le_bytes(h);
            // Only a splice, a patch or an expiry inside, decoded by their
            // own arms: no nesting, so no recursion deeper than one level
            // on outside bytes.
            match r.buf.get(r.pos) {
                Some(&(SPLICE | PATCH | SETEXPIRY)) => {}
                Some(&tag) => {
                    return Err(DecodeError::BadTag {
                        what: "checked delta",
                        tag,
                    })
                }
                None => return Err(DecodeError::Truncated),
            }
            DeltaOp::Checked {
                base_hash,
                op: Box::new(decode_op(r)?),
            }
        }
        BITSOR => {
            // `count` bounds the allocation by the bytes left.
            let n = r.count(5)?;
            let mut bytes = Vec::with_capacity(n);
            for _ in 0..n {
                let i = u32::from_le_bytes([r.u8()?, r.u8()?, r.u8()?, r.u8()?]);
                let m = r.u8()?;
                if i as usize >= crate::bits::MAX_LEN {
                    return Err(DecodeError::OutOfRange);
                }
                bytes.push((i, m));
            }
            DeltaOp::BitsOr { bytes }
        }
        LISTEDIT => {
            let n = r.count(3)?;
            let mut edits = Vec::with_capacity(n);
            for _ in 0..n {
                let (at, remove) = (r.u32()?, r.u32()?);
                let k = r.count(1)?;
                let insert = r.members(k, |_| Ok(()))?;
                edits.push(ListEdit {
                    at,
                    remove,
                    insert: insert.into_iter().map(|(e, ())| e).collect(),
                });
            }
            DeltaOp::ListEdit { edits }
        }
        tag => return Err(DecodeError::BadTag { what: "delta", tag }),
    })
}

#[cfg(test)]
pub(crate) mod tests;
