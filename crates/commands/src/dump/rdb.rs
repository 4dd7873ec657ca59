//! One value in Redis's RDB format, as DUMP writes it and RESTORE reads it:
//! a type byte and the object, then a footer of the RDB version (u16 LE)
//! and the CRC-64 of everything before it (u64 LE).
//!
//! Written (RDB 10, Redis 7.0): strings as `RDB_TYPE_STRING` (an integer
//! that fits 32 bits as Redis's integer encoding, else raw), hashes as
//! `RDB_TYPE_HASH`, sets as `RDB_TYPE_SET_INTSET` (every member an integer,
//! at most 512) or `RDB_TYPE_SET`, sorted sets as `RDB_TYPE_ZSET_2`, lists
//! as `RDB_TYPE_LIST_QUICKLIST_2` with one plain node per element (which
//! Redis 7 loads as they are). Counters are written as the string they
//! read as.
//!
//! Read (RDB ≤ 11, Redis 7.0 and 7.2, and the older encodings Redis still
//! loads): strings raw, integer-encoded or LZF-compressed; hashes plain,
//! ziplist or listpack; sets plain, intset or listpack; sorted sets with
//! text or binary scores, ziplist or listpack; lists plain, ziplist,
//! quicklist of ziplists, quicklist of listpacks or plain nodes. Other
//! types (streams, modules) are refused.
//!
//! The payload comes from a client: every length is checked against the
//! bytes left before anything is allocated, so a forged length fails as
//! [`Malformed`] and never panics or allocates beyond the payload's size.

use std::borrow::Cow;

use bytes::Bytes;
use keyspace::{HashValue, ListValue, SetValue, Value, Version, ZSetValue};

use super::{crc64::crc64, intset, listpack, lzf, ziplist};
use crate::number::parse_f64;

/// The RDB version DUMP writes (Redis 7.0's).
pub const DUMP_VERSION: u16 = 10;
/// The newest RDB version RESTORE reads (Redis 7.2's).
pub const MAX_VERSION: u16 = 11;
/// The most members a set is dumped as an intset with (Redis's
/// `set-max-intset-entries` default).
const INTSET_MAX: usize = 512;

const T_STRING: u8 = 0;
const T_LIST: u8 = 1;
const T_SET: u8 = 2;
const T_ZSET: u8 = 3;
const T_HASH: u8 = 4;
const T_ZSET_2: u8 = 5;
const T_LIST_ZIPLIST: u8 = 10;
const T_SET_INTSET: u8 = 11;
const T_ZSET_ZIPLIST: u8 = 12;
const T_HASH_ZIPLIST: u8 = 13;
const T_LIST_QUICKLIST: u8 = 14;
const T_HASH_LISTPACK: u8 = 16;
const T_ZSET_LISTPACK: u8 = 17;
const T_LIST_QUICKLIST_2: u8 = 18;
/// A quicklist node of one element, as is (Redis's plain container).
const NODE_PLAIN: u64 = 1;
/// A quicklist node holding a listpack (Redis's packed container).
const NODE_PACKED: u64 = 2;
const T_SET_LISTPACK: u8 = 20;

/// The payload does not decode (Redis: "Bad data format").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

/// `N` bytes of `blob` from `at` (the headers of a listpack or ziplist).
pub(super) fn fixed<const N: usize>(blob: &[u8], at: usize) -> Result<[u8; N], Malformed> {
    let end = at.checked_add(N).ok_or(Malformed)?;
    blob.get(at..end)
        .and_then(|s| s.try_into().ok())
        .ok_or(Malformed)
}

/// Why a payload cannot be restored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadError {
    /// Too short, an RDB version newer than [`MAX_VERSION`], or a wrong
    /// checksum.
    Footer,
    /// The object does not decode, or is of a type not held here.
    Malformed,
}

impl From<Malformed> for LoadError {
    fn from(_: Malformed) -> Self {
        LoadError::Malformed
    }
}

/// One element of a ziplist or listpack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elem<'a> {
    Str(&'a [u8]),
    Int(i64),
}

impl Elem<'_> {
    fn to_bytes(self) -> Bytes {
        match self {
            Elem::Str(s) => Bytes::copy_from_slice(s),
            Elem::Int(v) => Bytes::copy_from_slice(itoa::Buffer::new().format(v).as_bytes()),
        }
    }

    fn score(self) -> Result<f64, Malformed> {
        match self {
            Elem::Int(v) => Ok(v as f64),
            Elem::Str(s) => parse_f64(s).ok_or(Malformed),
        }
    }
}

// ---- writing ----

/// The DUMP payload of `value`: the object, the RDB version and the CRC.
pub fn dump(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.payload_len() + 16);
    match value {
        Value::Str(b) => {
            out.push(T_STRING);
            put_string(&mut out, b);
        }
        Value::Counter(c) => {
            out.push(T_STRING);
            put_string(&mut out, c.text());
        }
        Value::Hash(h) => {
            out.push(T_HASH);
            put_len(&mut out, h.len() as u64);
            for (name, field) in h.iter() {
                put_string(&mut out, name);
                put_string(&mut out, field.value);
            }
        }
        Value::Set(s) if s.len() <= INTSET_MAX && s.all_integers() => {
            out.push(T_SET_INTSET);
            let ints = s.members().filter_map(canonical_int).collect();
            put_raw(&mut out, &intset::encode(ints));
        }
        Value::Set(s) => {
            out.push(T_SET);
            put_len(&mut out, s.len() as u64);
            for m in s.members() {
                put_string(&mut out, m);
            }
        }
        Value::List(l) => {
            out.push(T_LIST_QUICKLIST_2);
            put_len(&mut out, l.len() as u64);
            for e in l.iter() {
                put_len(&mut out, NODE_PLAIN);
                put_raw(&mut out, e);
            }
        }
        Value::ZSet(z) => {
            // Highest score first, as Redis walks its skiplist.
            out.push(T_ZSET_2);
            put_len(&mut out, z.len() as u64);
            let mut items: Vec<(&[u8], f64)> = z.range(0, z.len()).collect();
            items.reverse();
            for (m, score) in items {
                put_string(&mut out, m);
                out.extend_from_slice(&score.to_le_bytes());
            }
        }
    }
    out.extend_from_slice(&DUMP_VERSION.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// RDB's opcode for a function library (Redis 7's `RDB_OPCODE_FUNCTION2`).
const OPCODE_FUNCTION2: u8 = 245;

/// FUNCTION DUMP's payload: each library's code after the opcode, then the
/// footer, as Redis writes it (so payloads move between deltagrid and
/// Redis both ways).
pub fn dump_functions<'a>(codes: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        out.push(OPCODE_FUNCTION2);
        put_raw(&mut out, code);
    }
    out.extend_from_slice(&DUMP_VERSION.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The libraries' codes of a FUNCTION RESTORE payload.
pub fn restore_functions(payload: &[u8]) -> Result<Vec<Vec<u8>>, LoadError> {
    let body = verify(payload)?;
    let mut r = Reader { buf: body, pos: 0 };
    let mut codes = Vec::new();
    while r.left() > 0 {
        if r.take(1)?[0] != OPCODE_FUNCTION2 {
            return Err(LoadError::Malformed);
        }
        codes.push(r.string()?.into_owned());
    }
    Ok(codes)
}

/// Redis's `rdbSaveLen`.
fn put_len(out: &mut Vec<u8>, len: u64) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.push(0x40 | (len >> 8) as u8);
        out.push(len as u8);
    } else if len <= u32::MAX as u64 {
        out.push(0x80);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

fn put_raw(out: &mut Vec<u8>, s: &[u8]) {
    put_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// A string, integer-encoded when it is the canonical text of an integer
/// that fits 32 bits (Redis's `rdbTryIntegerEncoding`), else raw.
fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    match canonical_int(s) {
        Some(v) if i8::try_from(v).is_ok() => out.extend_from_slice(&[0xc0, v as u8]),
        Some(v) if i16::try_from(v).is_ok() => {
            out.push(0xc1);
            out.extend_from_slice(&(v as i16).to_le_bytes());
        }
        Some(v) if i32::try_from(v).is_ok() => {
            out.push(0xc2);
            out.extend_from_slice(&(v as i32).to_le_bytes());
        }
        _ => put_raw(out, s),
    }
}

/// The integer `s` is the canonical text of ("12", not "012" or "+12").
fn canonical_int(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let v: i64 = std::str::from_utf8(s).ok()?.parse().ok()?;
    (itoa::Buffer::new().format(v).as_bytes() == s).then_some(v)
}

// ---- reading ----

/// The object of a payload whose footer is valid.
pub fn restore(payload: &[u8]) -> Result<Value, LoadError> {
    let body = verify(payload)?;
    Ok(load(body)?)
}

/// Checks the footer (Redis's `verifyDumpPayload`) and returns the bytes
/// before it.
pub fn verify(payload: &[u8]) -> Result<&[u8], LoadError> {
    if payload.len() < 10 {
        return Err(LoadError::Footer);
    }
    let (signed, crc) = payload.split_at(payload.len() - 8);
    let version = u16::from_le_bytes([signed[signed.len() - 2], signed[signed.len() - 1]]);
    if version > MAX_VERSION || crc64(0, signed).to_le_bytes() != crc {
        return Err(LoadError::Footer);
    }
    Ok(&signed[..signed.len() - 2])
}

/// Reads bounds-checked pieces of a payload.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

/// A length, or the marker of a specially encoded string.
enum Len {
    Plain(u64),
    Encoded(u8),
}

impl<'a> Reader<'a> {
    fn left(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        if n > self.left() {
            return Err(Malformed);
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], Malformed> {
        self.take(N)?.try_into().map_err(|_| Malformed)
    }

    fn u8(&mut self) -> Result<u8, Malformed> {
        Ok(self.array::<1>()?[0])
    }

    /// Redis's `rdbLoadLenByRef`.
    fn len(&mut self) -> Result<Len, Malformed> {
        let b = self.u8()?;
        Ok(match b >> 6 {
            0 => Len::Plain((b & 0x3f) as u64),
            1 => Len::Plain(((b & 0x3f) as u64) << 8 | self.u8()? as u64),
            2 if b == 0x80 => Len::Plain(u32::from_be_bytes(self.array()?) as u64),
            2 if b == 0x81 => Len::Plain(u64::from_be_bytes(self.array()?)),
            2 => return Err(Malformed),
            _ => Len::Encoded(b & 0x3f),
        })
    }

    /// A plain length that is at most what is left (each counted thing
    /// takes at least `min_each` bytes).
    fn count(&mut self, min_each: usize) -> Result<usize, Malformed> {
        match self.len()? {
            Len::Plain(n) if n <= (self.left() / min_each) as u64 => Ok(n as usize),
            _ => Err(Malformed),
        }
    }

    /// Redis's `rdbGenericLoadStringObject`.
    fn string(&mut self) -> Result<Cow<'a, [u8]>, Malformed> {
        let text = |v: i64| Cow::Owned(itoa::Buffer::new().format(v).as_bytes().to_vec());
        match self.len()? {
            Len::Plain(n) => {
                let n = usize::try_from(n).map_err(|_| Malformed)?;
                Ok(Cow::Borrowed(self.take(n)?))
            }
            Len::Encoded(0) => Ok(text(i8::from_le_bytes(self.array()?) as i64)),
            Len::Encoded(1) => Ok(text(i16::from_le_bytes(self.array()?) as i64)),
            Len::Encoded(2) => Ok(text(i32::from_le_bytes(self.array()?) as i64)),
            Len::Encoded(3) => {
                let clen = self.count(1)?;
                let Len::Plain(len) = self.len()? else {
                    return Err(Malformed);
                };
                let len = usize::try_from(len).map_err(|_| Malformed)?;
                let compressed = self.take(clen)?;
                lzf::decompress(compressed, len)
                    .map(Cow::Owned)
                    .ok_or(Malformed)
            }
            Len::Encoded(_) => Err(Malformed),
        }
    }

    fn bytes(&mut self) -> Result<Bytes, Malformed> {
        Ok(match self.string()? {
            Cow::Borrowed(s) => Bytes::copy_from_slice(s),
            Cow::Owned(v) => Bytes::from(v),
        })
    }

    /// Redis's `rdbLoadDoubleValue` (a score written as text).
    fn text_double(&mut self) -> Result<f64, Malformed> {
        match self.u8()? {
            253 => Err(Malformed), // NaN
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            n => parse_f64(self.take(n as usize)?).ok_or(Malformed),
        }
    }

    fn binary_double(&mut self) -> Result<f64, Malformed> {
        let v = f64::from_le_bytes(self.array()?);
        if v.is_nan() {
            return Err(Malformed);
        }
        Ok(v)
    }
}

/// The object of a payload's body (type byte and object; what follows it
/// is ignored, as Redis ignores it).
pub fn load(body: &[u8]) -> Result<Value, Malformed> {
    let mut r = Reader { buf: body, pos: 0 };
    let v = Version::ZERO;
    let value = match r.u8()? {
        T_STRING => Value::str(r.bytes()?),
        T_SET => {
            let n = r.count(1)?;
            let mut s = SetValue::new();
            for _ in 0..n {
                add_member(&mut s, r.bytes()?)?;
            }
            Value::Set(s)
        }
        T_SET_INTSET => {
            let mut s = SetValue::new();
            for i in intset::decode(&r.string()?)? {
                add_member(&mut s, Elem::Int(i).to_bytes())?;
            }
            Value::Set(s)
        }
        T_SET_LISTPACK => {
            let blob = r.string()?;
            let mut s = SetValue::new();
            for e in listpack::decode(&blob)? {
                add_member(&mut s, e.to_bytes())?;
            }
            Value::Set(s)
        }
        T_HASH => {
            let n = r.count(2)?;
            let mut h = HashValue::new();
            for _ in 0..n {
                let (f, val) = (r.bytes()?, r.bytes()?);
                if !h.set(f, val, v) {
                    return Err(Malformed);
                }
            }
            Value::Hash(h)
        }
        t @ (T_HASH_ZIPLIST | T_HASH_LISTPACK) => {
            let blob = r.string()?;
            let elems = packed(t == T_HASH_ZIPLIST, &blob)?;
            let mut h = HashValue::new();
            for pair in pairs(&elems)? {
                if !h.set(pair[0].to_bytes(), pair[1].to_bytes(), v) {
                    return Err(Malformed);
                }
            }
            Value::Hash(h)
        }
        t @ (T_ZSET | T_ZSET_2) => {
            let n = r.count(if t == T_ZSET { 2 } else { 9 })?;
            let mut z = ZSetValue::new();
            for _ in 0..n {
                let m = r.bytes()?;
                let score = if t == T_ZSET {
                    r.text_double()?
                } else {
                    r.binary_double()?
                };
                if !z.insert(&m, score, v) {
                    return Err(Malformed);
                }
            }
            Value::ZSet(z)
        }
        t @ (T_ZSET_ZIPLIST | T_ZSET_LISTPACK) => {
            let blob = r.string()?;
            let elems = packed(t == T_ZSET_ZIPLIST, &blob)?;
            let mut z = ZSetValue::new();
            for pair in pairs(&elems)? {
                if !z.insert(&pair[0].to_bytes(), pair[1].score()?, v) {
                    return Err(Malformed);
                }
            }
            Value::ZSet(z)
        }
        T_LIST => {
            let n = r.count(1)?;
            let mut l = ListValue::new();
            for _ in 0..n {
                l.push_back(&r.string()?);
            }
            list(l)?
        }
        T_LIST_ZIPLIST => {
            let blob = r.string()?;
            list(ListValue::from_items(
                packed(true, &blob)?.into_iter().map(Elem::to_bytes),
            ))?
        }
        t @ (T_LIST_QUICKLIST | T_LIST_QUICKLIST_2) => {
            let n = r.count(2)?;
            let mut l = ListValue::new();
            for _ in 0..n {
                let container = match t {
                    T_LIST_QUICKLIST => NODE_PACKED,
                    _ => match r.len()? {
                        Len::Plain(c @ (NODE_PLAIN | NODE_PACKED)) => c,
                        _ => return Err(Malformed),
                    },
                };
                let blob = r.string()?;
                if container == NODE_PLAIN {
                    l.push_back(&blob);
                    continue;
                }
                let elems = packed(t == T_LIST_QUICKLIST, &blob)?;
                // Redis refuses an empty node too.
                if elems.is_empty() {
                    return Err(Malformed);
                }
                for e in elems {
                    l.push_back(&e.to_bytes());
                }
            }
            list(l)?
        }
        _ => return Err(Malformed),
    };
    // An empty collection is corrupt (Redis: "empty keys").
    if value.is_empty_collection() {
        return Err(Malformed);
    }
    Ok(value)
}

/// A list loaded; an empty one is corrupt.
fn list(l: ListValue) -> Result<Value, Malformed> {
    match l.is_empty() {
        true => Err(Malformed),
        false => Ok(Value::List(Box::new(l))),
    }
}

fn add_member(s: &mut SetValue, m: Bytes) -> Result<(), Malformed> {
    if s.add(&m, Version::ZERO) {
        Ok(())
    } else {
        Err(Malformed)
    }
}

fn packed(ziplist: bool, blob: &[u8]) -> Result<Vec<Elem<'_>>, Malformed> {
    if ziplist {
        ziplist::decode(blob)
    } else {
        listpack::decode(blob)
    }
}

/// Consecutive pairs (field and value, member and score).
fn pairs<'e, 'a>(
    elems: &'e [Elem<'a>],
) -> Result<std::slice::ChunksExact<'e, Elem<'a>>, Malformed> {
    if !elems.len().is_multiple_of(2) {
        return Err(Malformed);
    }
    Ok(elems.chunks_exact(2))
}
