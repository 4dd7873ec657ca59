//! Values held by the keyspace. A hash field carries its own version so that
//! field deltas from backups or remote sites merge field by field without a
//! base check. Sizes are tracked incrementally so that deciding whether a
//! delta is worth it, and reporting memory, never walks a whole value.

use bytes::{Bytes, BytesMut};

use crate::tombstones::Coll;
use crate::version::Version;

mod counter;
mod hash;
mod hash_pack;
mod list;
mod score;
mod set;
mod string;
mod zset;

pub use counter::{Base as CounterBase, Contribution, CounterValue, FloatContribution, Total};
pub use hash::{Field, FieldMap, FieldRef, HashValue, Iter as HashIter};
pub use list::{Edit as ListEdit, ListValue, OutOfRange as ListOutOfRange};
pub use score::{ScoreContribution, ScoreCounter};
pub use set::{MemberMap, SetValue};
pub use string::StrValue;
pub use zset::{same_score, Key as ZKey, Lex, Member as ZMember, Score, ZSetValue};

/// Parts that together take at most this many bytes are copied into one
/// allocation by [`copy_packed`].
pub const PACK_LIMIT: usize = 1024;

/// Owned copies of `parts` (e.g. the field names, or the values, of one
/// HSET), none pointing into the buffer they came from (a request or a
/// batch read from the network, which a stored value must not keep alive).
/// Small parts share one allocation: an 8-field HSET then costs one
/// allocation for its values instead of eight, and as many frees later. A
/// part kept longer than its siblings keeps at most [`PACK_LIMIT`] bytes
/// alive with it; larger parts are copied one by one.
pub fn copy_packed<'a, I>(parts: I) -> Vec<Bytes>
where
    I: IntoIterator<Item = &'a [u8]>,
    I::IntoIter: Clone,
{
    let parts = parts.into_iter();
    let (count, total) = parts.clone().fold((0, 0), |(n, t), p| (n + 1, t + p.len()));
    if count < 2 || total > PACK_LIMIT {
        return parts.map(Bytes::copy_from_slice).collect();
    }
    let mut buf = BytesMut::with_capacity(total);
    for p in parts.clone() {
        buf.extend_from_slice(p);
    }
    let all = buf.freeze();
    let mut start = 0;
    parts
        .map(|p| {
            let part = all.slice(start..start + p.len());
            start += p.len();
            part
        })
        .collect()
}

/// Owned copies of the field/value pairs of one hash write: the names
/// packed together and the values packed together by [`copy_packed`], so
/// that replacing every value later frees the old values' buffer while the
/// names stay. One pair is two plain copies.
pub fn copy_pairs<'a, I>(pairs: I) -> Vec<(Bytes, Bytes)>
where
    I: IntoIterator<Item = (&'a [u8], &'a [u8])>,
    I::IntoIter: Clone,
{
    let pairs = pairs.into_iter();
    let mut first_two = pairs.clone();
    if let (Some((f, v)), None) = (first_two.next(), first_two.next()) {
        return vec![(Bytes::copy_from_slice(f), Bytes::copy_from_slice(v))];
    }
    let names = copy_packed(pairs.clone().map(|(f, _)| f));
    let values = copy_packed(pairs.map(|(_, v)| v));
    names.into_iter().zip(values).collect()
}

/// A key's value. Every variant but a plain string is boxed, so that a
/// value (and the [`Entry`] in every partition map slot) is as small as a
/// string's: 288 bytes per entry unboxed, 64 boxed. A hash and a set are
/// inline: a [`HashValue`] or [`SetValue`] is no larger than a string's
/// `Bytes` (its elements are a block or a table of their own), and saves a
/// block per key; so is a sorted set's [`ZSetValue`] (its small form).
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A plain string, inline when short ([`StrValue`]).
    Str(StrValue),
    /// A string that merges increments across sites (see [`CounterValue`]).
    Counter(Box<CounterValue>),
    Hash(HashValue),
    Set(SetValue),
    ZSet(ZSetValue),
    /// A list: a whole value as a string is (its edits need the exact
    /// version they were made on), boxed ([`ListValue`]).
    List(Box<ListValue>),
}

impl Value {
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) | Value::Counter(_) => "string",
            Value::Hash(_) => "hash",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
            Value::List(_) => "list",
        }
    }

    /// Payload bytes (strings: length; hashes: fields plus values).
    pub fn payload_len(&self) -> usize {
        match self {
            Value::Str(b) => b.len(),
            Value::Counter(c) => c.text().len(),
            Value::Hash(h) => h.payload_len(),
            Value::Set(s) => s.payload_len(),
            Value::ZSet(z) => z.payload_len(),
            Value::List(l) => l.payload_len(),
        }
    }

    /// Whether this is a collection of elements with their own versions
    /// (a hash, set or sorted set), as opposed to a string or a list
    /// (whole values as far as merging goes).
    pub fn is_collection(&self) -> bool {
        !matches!(self, Value::Str(_) | Value::Counter(_) | Value::List(_))
    }

    /// The string a string value reads as (None: a collection).
    pub fn as_text(&self) -> Option<&[u8]> {
        match self {
            Value::Str(s) => Some(s),
            Value::Counter(c) => Some(c.text()),
            _ => None,
        }
    }

    /// The string a string value reads as, as a `Bytes` sharing the
    /// value's buffer where it has one (None: a collection).
    pub fn text_bytes(&self) -> Option<Bytes> {
        match self {
            Value::Str(s) => Some(s.to_bytes()),
            Value::Counter(c) => Some(c.text().clone()),
            _ => None,
        }
    }

    /// A plain string value holding `s`.
    pub fn str(s: impl Into<StrValue>) -> Self {
        Value::Str(s.into())
    }

    /// The number of elements of a collection (0 for a string or a list).
    pub fn elements(&self) -> usize {
        match self {
            Value::Str(_) | Value::Counter(_) => 0,
            Value::Hash(h) => h.len(),
            Value::Set(s) => s.len(),
            Value::ZSet(z) => z.len(),
            Value::List(_) => 0,
        }
    }

    /// The kind of collection this is (None: a string).
    pub fn coll(&self) -> Option<Coll> {
        match self {
            Value::Str(_) | Value::Counter(_) | Value::List(_) => None,
            Value::Hash(_) => Some(Coll::Hash),
            Value::Set(_) => Some(Coll::Set),
            Value::ZSet(_) => Some(Coll::ZSet),
        }
    }

    /// Whether a collection has no element left (never for a string).
    pub fn is_empty_collection(&self) -> bool {
        self.is_collection() && self.elements() == 0
    }

    /// The version of a collection's element `name`.
    pub fn element_version(&self, name: &[u8]) -> Option<Version> {
        match self {
            Value::Str(_) | Value::Counter(_) | Value::List(_) => None,
            Value::Hash(h) => h.get(name).map(|f| f.version),
            Value::Set(s) => s.version_of(name),
            Value::ZSet(z) => z.version_of(name),
        }
    }

    /// Removes a collection's element; true when it was held.
    pub fn remove_element(&mut self, name: &[u8]) -> bool {
        match self {
            Value::Str(_) | Value::Counter(_) | Value::List(_) => false,
            Value::Hash(h) => h.remove(name),
            Value::Set(s) => s.remove(name),
            Value::ZSet(z) => z.remove(name),
        }
    }

    /// Whether a collection holds an element older than `version`.
    pub fn has_element_older_than(&self, version: Version) -> bool {
        match self {
            Value::Str(_) | Value::Counter(_) | Value::List(_) => false,
            Value::Hash(h) => h.iter().any(|(_, f)| f.version < version),
            Value::Set(s) => s.iter().any(|(_, v)| v < version),
            Value::ZSet(z) => z.iter().any(|(_, m)| m.version < version),
        }
    }

    /// The names of a collection's elements older than `version`.
    pub fn elements_older_than(&self, version: Version) -> Vec<Bytes> {
        let older = |v: Version| v < version;
        match self {
            Value::Str(_) | Value::Counter(_) | Value::List(_) => Vec::new(),
            Value::Hash(h) => h
                .iter()
                .filter(|(_, f)| older(f.version))
                .map(|(n, _)| Bytes::copy_from_slice(n))
                .collect(),
            Value::Set(s) => s
                .iter()
                .filter(|(_, v)| older(*v))
                .map(|(n, _)| Bytes::copy_from_slice(n))
                .collect(),
            Value::ZSet(z) => z
                .iter()
                .filter(|(_, m)| older(m.version))
                .map(|(n, _)| Bytes::copy_from_slice(n))
                .collect(),
        }
    }

    /// Gives every element of a collection the version `v`.
    pub fn stamp(&mut self, v: Version) {
        match self {
            Value::Str(_) | Value::List(_) => {}
            Value::Counter(c) => c.stamp(v),
            Value::Hash(h) => h.stamp(v),
            Value::Set(s) => s.stamp(v),
            Value::ZSet(z) => z.stamp(v),
        }
    }

    /// Whether two values are of the same type (a counter is a string).
    pub fn same_type(&self, other: &Value) -> bool {
        self.type_name() == other.type_name()
    }
}

/// Whether two collections' merge states (the counters of a hash's fields,
/// the scores ZINCRBY made of a sorted set's members) hold the same, in
/// whatever order; none and an empty map are the same.
pub(crate) fn same_states<V: PartialEq>(
    a: &Option<Box<indexmap::IndexMap<Bytes, V, ahash::RandomState>>>,
    b: &Option<Box<indexmap::IndexMap<Bytes, V, ahash::RandomState>>>,
) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => a.len() == b.len() && a.iter().all(|(k, c)| b.get(k) == Some(c)),
        (Some(a), None) | (None, Some(a)) => a.is_empty(),
    }
}

/// One key's value, version and expiry (absolute ms since epoch, 0 = none),
/// and what eviction knows of its use ([`crate::access`]; in the 4 bytes
/// the version's packing leaves: the entry stays 64 bytes).
#[derive(Clone, Debug)]
pub struct Entry {
    pub value: Value,
    pub version: Version,
    pub expire_at: u64,
    pub access: u32,
}

impl PartialEq for Entry {
    /// Equal when they hold the same data (use differs between copies).
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
            && self.version == other.version
            && self.expire_at == other.expire_at
    }
}

impl Entry {
    /// An entry made now (its use starts as a new key's).
    pub fn new(value: Value, version: Version, expire_at: u64) -> Self {
        Entry {
            value,
            version,
            expire_at,
            access: crate::access::fresh(),
        }
    }

    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expire_at != 0 && self.expire_at <= now_ms
    }

    /// The string a string value reads as (a counter's value included).
    pub fn as_str(&self) -> Option<&[u8]> {
        self.value.as_text()
    }

    /// The string a string value reads as, sharing its buffer where it has
    /// one ([`Value::text_bytes`]).
    pub fn str_bytes(&self) -> Option<Bytes> {
        self.value.text_bytes()
    }

    pub fn as_hash(&self) -> Option<&HashValue> {
        match &self.value {
            Value::Hash(h) => Some(h),
            _ => None,
        }
    }

    pub fn as_set(&self) -> Option<&SetValue> {
        match &self.value {
            Value::Set(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_zset(&self) -> Option<&ZSetValue> {
        match &self.value {
            Value::ZSet(z) => Some(z),
            _ => None,
        }
    }

    pub fn as_list(&self) -> Option<&ListValue> {
        match &self.value {
            Value::List(l) => Some(l),
            _ => None,
        }
    }

    /// Heap bytes this entry owns beside its map slot, for the
    /// partition's accounting ([`crate::memory_usage::entry_heap`]).
    pub fn footprint(&self, key_len: usize) -> usize {
        crate::memory_usage::entry_heap(key_len, self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inside(part: &Bytes, buf: &[u8]) -> bool {
        let (p, b) = (part.as_ptr() as usize, buf.as_ptr() as usize);
        p >= b && p < b + buf.len()
    }

    #[test]
    fn packed_copies_own_their_bytes_and_share_one_buffer_when_small() {
        let request = Bytes::from_static(b"s1aaaal1123i17");
        let parts = [
            &request[0..2],
            &request[2..6],
            &request[6..8],
            &request[8..11],
            &request[11..14],
        ];
        let copies = copy_packed(parts);
        assert_eq!(
            copies,
            parts
                .iter()
                .map(|p| Bytes::copy_from_slice(p))
                .collect::<Vec<_>>()
        );
        assert!(
            copies.iter().all(|c| !inside(c, &request)),
            "a copy points into the request"
        );
        // One allocation: each part starts where the one before ended.
        for w in copies.windows(2) {
            assert_eq!(w[0].as_ptr() as usize + w[0].len(), w[1].as_ptr() as usize);
        }
    }

    #[test]
    fn large_parts_are_copied_one_by_one() {
        let big = vec![7u8; PACK_LIMIT];
        let copies = copy_packed([&big[..], b"x"]);
        assert_eq!(copies[0], big);
        assert_eq!(copies[1], Bytes::from_static(b"x"));
        assert_ne!(
            copies[0].as_ptr() as usize + copies[0].len(),
            copies[1].as_ptr() as usize
        );
        assert!(copy_packed(std::iter::empty::<&[u8]>()).is_empty());
    }
}

/// What the merge states' property tests share.
#[cfg(test)]
pub(crate) mod testing {
    /// Every site joins every other site's state, twice over (so joins of
    /// joins arrive too): states that merge as they should are then equal.
    pub(crate) fn join_everywhere<T: Clone>(sites: &mut [T], join: impl Fn(&mut T, &T) -> bool) {
        for _ in 0..2 {
            for a in 0..sites.len() {
                for b in 0..sites.len() {
                    let other = sites[b].clone();
                    join(&mut sites[a], &other);
                }
            }
        }
    }
}
#[cfg(test)]
mod size {
    #[test]
    fn an_entry_is_64_bytes_with_its_access_data() {
        assert_eq!(std::mem::size_of::<super::Entry>(), 64);
    }
}
