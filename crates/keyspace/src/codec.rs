//! Binary encoding of a [`Change`]: what the partition log counts, and the
//! form changes take between nodes, sites and in backups. Integers are
//! LEB128 varints; byte strings are length-prefixed.
//!
//! The decoder reads bytes from peers and files: every length is checked
//! against what is left before anything is allocated, and every error is a
//! [`DecodeError`], never a panic. What it returns owns its bytes (copied,
//! small hash fields packed): a decoded change is stored, and must not keep
//! the batch or block it came from alive.

use bytes::{BufMut, Bytes};

use crate::change::{Change, ChangeKind, DeltaOp};
use crate::tombstones::Coll;
use crate::value::{
    copy_packed, copy_pairs, Contribution, CounterBase, CounterValue, HashValue, SetValue, Value,
    ZSetValue,
};
use crate::version::Version;

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

const STR: u8 = 0;
const HASH: u8 = 1;
const SET: u8 = 2;
const ZSET: u8 = 3;
const COUNTER: u8 = 4;
/// A hash with counter fields: the fields, then each counter's state.
const HASH_COUNTERS: u8 = 5;

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

fn varint_len(mut n: u64) -> usize {
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

fn put_varint(out: &mut impl BufMut, mut n: u64) {
    while n >= 0x80 {
        out.put_u8((n as u8) | 0x80);
        n >>= 7;
    }
    out.put_u8(n as u8);
}

fn varint128_len(mut n: u128) -> usize {
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

fn put_varint128(out: &mut impl BufMut, mut n: u128) {
    while n >= 0x80 {
        out.put_u8((n as u8) | 0x80);
        n >>= 7;
    }
    out.put_u8(n as u8);
}

fn zigzag128(n: i128) -> u128 {
    ((n << 1) ^ (n >> 127)) as u128
}

fn unzigzag128(n: u128) -> i128 {
    ((n >> 1) as i128) ^ -((n & 1) as i128)
}

/// A counter's state: the assignment's version, its floor, its base (0 and an
/// integer, or 1 and a text), then each site's contribution.
fn counter_len(c: &CounterValue) -> usize {
    version_len(&c.assigned())
        + version_len(&c.floor())
        + version_len(&c.expiry())
        + 1
        + match c.base() {
            CounterBase::Int(n) => varint128_len(zigzag128(*n)),
            CounterBase::Text(t) => bytes_len(t),
        }
        + varint_len(c.contributions().len() as u64)
        + c.contributions()
            .iter()
            .map(|x| {
                varint_len(x.site as u64) + varint_len(zigzag(x.total)) + version_len(&x.version)
            })
            .sum::<usize>()
}

fn put_counter(out: &mut impl BufMut, c: &CounterValue) {
    put_version(out, &c.assigned());
    put_version(out, &c.floor());
    put_version(out, &c.expiry());
    match c.base() {
        CounterBase::Int(n) => {
            out.put_u8(0);
            put_varint128(out, zigzag128(*n));
        }
        CounterBase::Text(t) => {
            out.put_u8(1);
            put_bytes(out, t);
        }
    }
    put_varint(out, c.contributions().len() as u64);
    for x in c.contributions() {
        put_varint(out, x.site as u64);
        put_varint(out, zigzag(x.total));
        put_version(out, &x.version);
    }
}

fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

fn unzigzag(n: u64) -> i64 {
    ((n >> 1) as i64) ^ -((n & 1) as i64)
}

fn bytes_len(b: &[u8]) -> usize {
    varint_len(b.len() as u64) + b.len()
}

fn put_bytes(out: &mut impl BufMut, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.put_slice(b);
}

fn version_len(v: &Version) -> usize {
    varint_len(v.hlc) + varint_len(v.site as u64)
}

fn put_version(out: &mut impl BufMut, v: &Version) {
    put_varint(out, v.hlc);
    put_varint(out, v.site as u64);
}

/// Exact length of [`encode`]'s output, computed without encoding.
pub fn encoded_len(c: &Change) -> usize {
    bytes_len(&c.key)
        + version_len(&c.version)
        + 1
        + match &c.kind {
            ChangeKind::Full { value, expire_at } => value_len(value) + varint_len(*expire_at),
            ChangeKind::Delta { base, op } => version_len(base) + op_len(op),
            ChangeKind::Delete | ChangeKind::Expire => 0,
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
                    .map(|(f, fv)| bytes_len(f) + bytes_len(&fv.value) + version_len(&fv.version))
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
        DeltaOp::SetAdd { members } => {
            varint_len(members.len() as u64) + members.iter().map(|m| bytes_len(m)).sum::<usize>()
        }
        DeltaOp::ZAdd { members } => {
            varint_len(members.len() as u64)
                + members.iter().map(|(m, _)| bytes_len(m) + 8).sum::<usize>()
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
                put_bytes(out, &fv.value);
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
        Value::Set(set) => {
            out.put_u8(SET);
            put_varint(out, set.len() as u64);
            for (m, v) in set.iter() {
                put_bytes(out, m);
                put_version(out, &v);
            }
        }
        Value::ZSet(z) => {
            out.put_u8(ZSET);
            put_varint(out, z.len() as u64);
            for (m, x) in z.iter() {
                put_bytes(out, m);
                out.put_f64_le(x.score);
                put_version(out, &x.version);
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
type HashFields = Vec<(Bytes, Bytes)>;

/// Reads from a byte slice; what it returns as `Bytes` is copied out of it.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn u8(&mut self) -> Result<u8, DecodeError> {
        let b = *self.buf.get(self.pos).ok_or(DecodeError::Truncated)?;
        self.pos += 1;
        Ok(b)
    }

    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut n: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            if shift == 63 && b > 1 {
                return Err(DecodeError::BadVarint);
            }
            n |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(DecodeError::BadVarint)
    }

    fn varint128(&mut self) -> Result<u128, DecodeError> {
        let mut n: u128 = 0;
        for shift in (0..128).step_by(7) {
            let b = self.u8()?;
            if shift == 126 && b > 3 {
                return Err(DecodeError::BadVarint);
            }
            n |= ((b & 0x7f) as u128) << shift;
            if b & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(DecodeError::BadVarint)
    }

    fn counter(&mut self) -> Result<CounterValue, DecodeError> {
        let assigned = self.version()?;
        let floor = self.version()?;
        let expiry = self.version()?;
        let base = match self.u8()? {
            0 => CounterBase::Int(unzigzag128(self.varint128()?)),
            1 => CounterBase::Text(self.bytes()?),
            tag => {
                return Err(DecodeError::BadTag {
                    what: "counter base",
                    tag,
                })
            }
        };
        let n = self.count(3)?;
        let mut contributions = Vec::with_capacity(n);
        for _ in 0..n {
            let site = u16::try_from(self.varint()?).map_err(|_| DecodeError::OutOfRange)?;
            let total = unzigzag(self.varint()?);
            let version = self.version()?;
            contributions.push(Contribution {
                site,
                total,
                version,
            });
        }
        Ok(CounterValue::from_parts(
            assigned,
            base,
            floor,
            expiry,
            contributions,
        ))
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        u32::try_from(self.varint()?).map_err(|_| DecodeError::OutOfRange)
    }

    /// A length-prefixed byte string, borrowed from the input.
    fn slice(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = self.varint()?;
        let left = (self.buf.len() - self.pos) as u64;
        if len > left {
            return Err(DecodeError::Truncated);
        }
        let b = &self.buf[self.pos..self.pos + len as usize];
        self.pos += len as usize;
        Ok(b)
    }

    /// A length-prefixed byte string, copied: what is decoded is stored
    /// (keys, values), and must not keep the whole input (a replication or
    /// WAN batch, a backup block) alive with it.
    fn bytes(&mut self) -> Result<Bytes, DecodeError> {
        self.slice().map(Bytes::copy_from_slice)
    }

    /// `n` hash field name/value pairs, copied with [`copy_pairs`];
    /// `versioned`: a version follows each pair.
    fn pairs(
        &mut self,
        n: usize,
        versioned: bool,
    ) -> Result<(HashFields, Vec<Version>), DecodeError> {
        let mut pairs = Vec::with_capacity(n);
        let mut versions = Vec::with_capacity(if versioned { n } else { 0 });
        for _ in 0..n {
            pairs.push((self.slice()?, self.slice()?));
            if versioned {
                versions.push(self.version()?);
            }
        }
        Ok((copy_pairs(pairs.iter().copied()), versions))
    }

    /// A sorted-set score: eight bytes, little endian, never NaN.
    fn score(&mut self) -> Result<f64, DecodeError> {
        let end = self.pos + 8;
        let b = self.buf.get(self.pos..end).ok_or(DecodeError::Truncated)?;
        self.pos = end;
        let score = f64::from_le_bytes(b.try_into().map_err(|_| DecodeError::Truncated)?);
        if score.is_nan() {
            return Err(DecodeError::OutOfRange);
        }
        Ok(score)
    }

    /// `n` members (each followed by what `each` reads), the names copied
    /// with [`copy_packed`].
    fn members<T>(
        &mut self,
        n: usize,
        mut each: impl FnMut(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Vec<(Bytes, T)>, DecodeError> {
        let mut names = Vec::with_capacity(n);
        let mut extra = Vec::with_capacity(n);
        for _ in 0..n {
            names.push(self.slice()?);
            extra.push(each(self)?);
        }
        Ok(copy_packed(names.iter().copied())
            .into_iter()
            .zip(extra)
            .collect())
    }

    fn version(&mut self) -> Result<Version, DecodeError> {
        let hlc = self.varint()?;
        let site = u16::try_from(self.varint()?).map_err(|_| DecodeError::OutOfRange)?;
        Ok(Version { hlc, site })
    }

    /// A count of items each at least `min_size` bytes: refused when the
    /// input cannot hold that many, so a forged count allocates nothing.
    fn count(&mut self, min_size: usize) -> Result<usize, DecodeError> {
        let n = self.varint()?;
        let left = (self.buf.len() - self.pos) as u64;
        if n.saturating_mul(min_size as u64) > left {
            return Err(DecodeError::Truncated);
        }
        Ok(n as usize)
    }
}

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
        STR => Ok(Value::Str(r.bytes()?)),
        COUNTER => Ok(Value::Counter(r.counter()?)),
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
        SET => {
            let n = r.count(3)?;
            let mut set = SetValue::new();
            for (m, v) in r.members(n, Reader::version)? {
                set.add(&m, v);
            }
            Ok(Value::Set(set))
        }
        ZSET => {
            let n = r.count(11)?;
            let mut z = ZSetValue::new();
            for (m, (score, v)) in r.members(n, |r| Ok((r.score()?, r.version()?)))? {
                z.insert(&m, score, v);
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
        tag => return Err(DecodeError::BadTag { what: "delta", tag }),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bytes() -> impl Strategy<Value = Bytes> {
        proptest::collection::vec(any::<u8>(), 0..12).prop_map(Bytes::from)
    }

    fn version() -> impl Strategy<Value = Version> {
        (any::<u64>(), any::<u16>()).prop_map(|(hlc, site)| Version { hlc, site })
    }

    fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            bytes().prop_map(Value::Str),
            proptest::collection::vec((bytes(), bytes(), version()), 0..4).prop_map(|fs| {
                let mut h = HashValue::new();
                for (f, v, ver) in fs {
                    h.set(f, v, ver);
                }
                Value::Hash(h)
            }),
            (
                version(),
                version(),
                any::<i64>(),
                proptest::option::of(bytes()),
                proptest::collection::vec((0u16..5, any::<i64>(), version()), 0..3)
            )
                .prop_map(|(assigned, floor, n, text, cs)| {
                    let base = match text {
                        Some(t) => CounterBase::Text(t),
                        None => CounterBase::Int(n as i128 * 3),
                    };
                    let cs = cs
                        .into_iter()
                        .map(|(site, total, version)| Contribution {
                            site,
                            total,
                            version,
                        })
                        .collect();
                    Value::Counter(CounterValue::from_parts(assigned, base, floor, floor, cs))
                }),
            proptest::collection::vec((bytes(), version()), 0..4).prop_map(|ms| {
                let mut set = SetValue::new();
                for (m, v) in ms {
                    set.add(&m, v);
                }
                Value::Set(set)
            }),
            proptest::collection::vec((bytes(), score(), version()), 0..4).prop_map(|ms| {
                let mut z = ZSetValue::new();
                for (m, score, v) in ms {
                    z.insert(&m, score, v);
                }
                Value::ZSet(z)
            }),
        ]
    }

    fn score() -> impl Strategy<Value = f64> {
        any::<f64>().prop_filter("not NaN", |s| !s.is_nan())
    }

    fn op() -> impl Strategy<Value = DeltaOp> {
        prop_oneof![
            (any::<u32>(), any::<u32>(), bytes()).prop_map(|(offset, remove, insert)| {
                DeltaOp::Splice {
                    offset,
                    remove,
                    insert,
                }
            }),
            proptest::collection::vec((any::<u32>(), bytes()), 0..4)
                .prop_map(|ranges| DeltaOp::Patch { ranges }),
            any::<i64>().prop_map(DeltaOp::IncrBy),
            proptest::collection::vec((bytes(), bytes()), 0..4)
                .prop_map(|fields| DeltaOp::HashSet { fields }),
            proptest::collection::vec(bytes(), 0..4).prop_map(|fields| DeltaOp::HashDel { fields }),
            any::<u64>().prop_map(DeltaOp::SetExpiry),
            (any::<i64>(), any::<i64>()).prop_map(|(by, total)| DeltaOp::Count { by, total }),
            (bytes(), any::<i64>(), any::<i64>())
                .prop_map(|(field, by, total)| DeltaOp::HashCount { field, by, total }),
            proptest::collection::vec(bytes(), 0..4)
                .prop_map(|members| DeltaOp::SetAdd { members }),
            proptest::collection::vec((bytes(), score()), 0..4)
                .prop_map(|members| DeltaOp::ZAdd { members }),
            (
                any::<bool>(),
                proptest::collection::vec((bytes(), version()), 0..4)
            )
                .prop_map(|(z, members)| DeltaOp::Remove {
                    coll: if z { Coll::ZSet } else { Coll::Set },
                    members
                }),
        ]
    }

    pub fn change() -> impl Strategy<Value = Change> {
        let kind = prop_oneof![
            (value(), any::<u64>())
                .prop_map(|(value, expire_at)| ChangeKind::Full { value, expire_at }),
            (version(), op()).prop_map(|(base, op)| ChangeKind::Delta { base, op }),
            Just(ChangeKind::Delete),
            Just(ChangeKind::Expire),
        ];
        (bytes(), version(), kind).prop_map(|(key, version, kind)| Change { key, version, kind })
    }

    #[test]
    fn decoded_changes_do_not_point_into_their_input() {
        let fields = vec![
            (Bytes::from_static(b"count"), Bytes::from_static(b"7")),
            (Bytes::from_static(b"big"), Bytes::from(vec![1u8; 2000])),
        ];
        let ops = [
            ChangeKind::Full {
                value: Value::Str(Bytes::from_static(b"value")),
                expire_at: 0,
            },
            ChangeKind::Delta {
                base: Version::ZERO,
                op: DeltaOp::HashSet {
                    fields: fields.clone(),
                },
            },
            ChangeKind::Delta {
                base: Version::ZERO,
                op: DeltaOp::Splice {
                    offset: 1,
                    remove: 0,
                    insert: Bytes::from_static(b"ab"),
                },
            },
        ];
        for kind in ops {
            let c = Change {
                key: Bytes::from_static(b"key"),
                version: Version::ZERO,
                kind,
            };
            let mut buf = Vec::new();
            encode(&c, &mut buf);
            let input = Bytes::from(buf);
            let (back, _) = decode(&input).unwrap();
            assert_eq!(back, c);
            let range = input.as_ptr() as usize..input.as_ptr() as usize + input.len();
            let mut held: Vec<Bytes> = vec![back.key.clone()];
            match &back.kind {
                ChangeKind::Full {
                    value: Value::Str(v),
                    ..
                } => held.push(v.clone()),
                ChangeKind::Delta {
                    op: DeltaOp::HashSet { fields },
                    ..
                } => held.extend(fields.iter().flat_map(|(f, v)| [f.clone(), v.clone()])),
                ChangeKind::Delta {
                    op: DeltaOp::Splice { insert, .. },
                    ..
                } => held.push(insert.clone()),
                _ => unreachable!(),
            }
            for b in held {
                assert!(
                    !range.contains(&(b.as_ptr() as usize)),
                    "{b:?} points into the decoded buffer"
                );
            }
        }
    }

    proptest! {
        #[test]
        fn round_trips_and_len_is_exact(c in change()) {
            let mut out = Vec::new();
            encode(&c, &mut out);
            prop_assert_eq!(out.len(), encoded_len(&c));
            let (back, used) = decode(&out).unwrap();
            prop_assert_eq!(used, out.len());
            let h = head(&out).unwrap();
            prop_assert_eq!((h.key, h.version, h.kind), (&c.key[..], c.version, c.kind.index()));
            prop_assert_eq!(back, c);
        }

        #[test]
        fn truncated_or_mutated_input_is_an_error_not_a_panic(
            c in change(), cut in any::<prop::sample::Index>(), flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4)
        ) {
            let mut out = Vec::new();
            encode(&c, &mut out);
            let n = cut.index(out.len().max(1));
            prop_assert!(decode(&out[..n]).is_err());
            for (i, b) in flips { let i = i.index(out.len()); out[i] ^= b; }
            let _ = decode(&out);
            let _ = head(&out);
        }

        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode(&data);
            let _ = head(&data);
        }
    }

    #[test]
    fn forged_counts_allocate_nothing() {
        // key "", version 0/0, Delta base 0/0, HSET with 2^60 fields.
        let mut buf = vec![0, 0, 0, DELTA, 0, 0, HSET];
        put_varint(&mut buf, 1 << 60);
        assert_eq!(decode(&Bytes::from(buf)), Err(DecodeError::Truncated));
    }
}
