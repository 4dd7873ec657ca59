//! The packed form of a small hash, as Redis's listpack: every field in
//! one heap block, found by a linear scan.
//!
//! The block is a mode byte, then the fields one after the other, each
//! `varint(name length) name varint(value length) value`:
//! - mode [`SHARED`]: the version every field has (written once, 10
//!   bytes, right after the mode byte), the common case of fields written
//!   by one HSET;
//! - mode [`PER_FIELD`]: each field followed by its own version.
//!
//! A hash whose fields come to share one version again (a field removed,
//! rewritten or stamped) goes back to [`SHARED`]. An empty hash holds no
//! block at all. The count of fields and the bytes of their names and
//! values are kept beside the block, so reading them costs no scan.
//!
//! The same block packs a small set ([`PackedSet`]): its entries are
//! names alone, `varint(name length) name`, with no value.

use std::fmt;

use crate::version::Version;

/// The fields share the version after the mode byte.
const SHARED: u8 = 0;
/// Each field carries its own version.
const PER_FIELD: u8 = 1;
/// A version as written in the block: hlc then site, little-endian.
const VERSION_LEN: usize = 10;

/// A hash field as read from either form: its value and version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldRef<'a> {
    pub value: &'a [u8],
    pub version: Version,
}

/// The fields of a small hash in one block (see the module docs).
pub(crate) type Packed = Block<true>;

/// The members of a small set in one block: entries without values.
pub(crate) type PackedSet = Block<false>;

/// Entries in one block, each with a value (`VALUES`) or a name alone.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct Block<const VALUES: bool> {
    buf: Box<[u8]>,
    len: u32,
    payload: u32,
}

/// Where one field lies in the block.
struct Span {
    /// Its first byte (the name's length).
    start: usize,
    /// The value's bytes.
    value: (usize, usize),
    /// Past its last byte (its version included in [`PER_FIELD`] mode).
    end: usize,
}

/// Lengths are the codec's varints ([`crate::codec::wire`]).
fn put_varint(out: &mut Vec<u8>, n: usize) {
    crate::codec::wire::put_varint(out, n as u64);
}

fn varint_len(n: usize) -> usize {
    crate::codec::wire::varint_len(n as u64)
}

fn read_varint(buf: &[u8], at: &mut usize) -> usize {
    let (mut n, mut shift) = (0usize, 0);
    loop {
        let b = buf[*at];
        *at += 1;
        n |= ((b & 0x7f) as usize) << shift;
        if b < 0x80 {
            return n;
        }
        shift += 7;
    }
}

fn put_version(out: &mut Vec<u8>, v: Version) {
    out.extend_from_slice(&v.hlc.to_le_bytes());
    out.extend_from_slice(&v.site.to_le_bytes());
}

fn read_version(buf: &[u8], at: usize) -> Version {
    let hlc = u64::from_le_bytes(buf[at..at + 8].try_into().expect("8 bytes"));
    let site = u16::from_le_bytes(buf[at + 8..at + 10].try_into().expect("2 bytes"));
    Version { hlc, site }
}

impl<const VALUES: bool> Block<VALUES> {
    /// The bytes an entry takes, its version aside.
    fn entry_len(name: &[u8], value: &[u8]) -> usize {
        let value_len = match VALUES {
            true => varint_len(value.len()) + value.len(),
            false => 0,
        };
        varint_len(name.len()) + name.len() + value_len
    }

    /// Writes an entry's value (nothing without values).
    fn put_value(out: &mut Vec<u8>, value: &[u8]) {
        if VALUES {
            put_varint(out, value.len());
            out.extend_from_slice(value);
        }
    }

    /// Packs `fields` (distinct names), in their order.
    pub(crate) fn build<'a>(
        fields: impl Iterator<Item = (&'a [u8], &'a [u8], Version)> + Clone,
    ) -> Self {
        let mut shared = None;
        let (mut len, mut payload, mut bytes, mut one_version) = (0u32, 0u32, 1, true);
        for (n, v, at) in fields.clone() {
            one_version &= *shared.get_or_insert(at) == at;
            len += 1;
            payload += (n.len() + v.len()) as u32;
            bytes += Self::entry_len(n, v);
        }
        let Some(first) = shared else {
            return Self::default();
        };
        let mut out =
            Vec::with_capacity(bytes + VERSION_LEN * if one_version { 1 } else { len as usize });
        if one_version {
            out.push(SHARED);
            put_version(&mut out, first);
        } else {
            out.push(PER_FIELD);
        }
        for (n, v, at) in fields {
            put_varint(&mut out, n.len());
            out.extend_from_slice(n);
            Self::put_value(&mut out, v);
            if !one_version {
                put_version(&mut out, at);
            }
        }
        Block {
            buf: out.into_boxed_slice(),
            len,
            payload,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }

    pub(crate) fn payload_len(&self) -> usize {
        self.payload as usize
    }

    /// Bytes of the block (the whole heap this form takes).
    pub(crate) fn block_len(&self) -> usize {
        self.buf.len()
    }

    /// The version every field has, when written once for all.
    pub(crate) fn shared_version(&self) -> Option<Version> {
        (self.buf.first() == Some(&SHARED)).then(|| read_version(&self.buf, 1))
    }

    fn first_field(&self) -> usize {
        match self.buf.first() {
            None => 0,
            Some(&SHARED) => 1 + VERSION_LEN,
            Some(_) => 1,
        }
    }

    /// The field starting at `at`, and where it lies.
    fn read_at(&self, at: usize) -> (&[u8], FieldRef<'_>, Span) {
        let buf = &self.buf[..];
        let mut i = at;
        let n = read_varint(buf, &mut i);
        let name = &buf[i..i + n];
        i += n;
        let v = if VALUES { read_varint(buf, &mut i) } else { 0 };
        let value = (i, i + v);
        i += v;
        let version = match buf[0] {
            SHARED => read_version(buf, 1),
            _ => {
                i += VERSION_LEN;
                read_version(buf, i - VERSION_LEN)
            }
        };
        let field = FieldRef {
            value: &buf[value.0..value.1],
            version,
        };
        (
            name,
            field,
            Span {
                start: at,
                value,
                end: i,
            },
        )
    }

    pub(crate) fn iter(&self) -> Iter<'_, VALUES> {
        Iter {
            packed: self,
            at: self.first_field(),
        }
    }

    fn find(&self, name: &[u8]) -> Option<(FieldRef<'_>, Span)> {
        let mut at = self.first_field();
        while at < self.buf.len() {
            let (n, f, span) = self.read_at(at);
            if n == name {
                return Some((f, span));
            }
            at = span.end;
        }
        None
    }

    pub(crate) fn get(&self, name: &[u8]) -> Option<FieldRef<'_>> {
        self.find(name).map(|(f, _)| f)
    }

    /// Whether setting a field at `version` keeps the mode the block has.
    fn fits_mode(&self, version: Version) -> bool {
        self.shared_version().is_none_or(|v| v == version)
    }

    /// Sets a field; true when it is new.
    pub(crate) fn set(&mut self, name: &[u8], value: &[u8], version: Version) -> bool {
        if self.buf.is_empty() {
            *self = Self::build(std::iter::once((name, value, version)));
            return true;
        }
        let found = self.find(name).map(|(f, span)| (f.value.len(), span));
        if !self.fits_mode(version) {
            // A second version in a shared block: every field gets its own
            // (or, the only field rewritten, the shared one changes).
            let rebuilt = {
                let fields = self.iter().map(|(n, f)| match n == name {
                    true => (n, value, version),
                    false => (n, f.value, f.version),
                });
                let added = found.is_none().then_some((name, value, version));
                Self::build(fields.chain(added))
            };
            *self = rebuilt;
            return found.is_none();
        }
        let per_field = self.buf[0] == PER_FIELD;
        let mut buf = std::mem::take(&mut self.buf).into_vec();
        let new = match found {
            Some((old_len, span)) => {
                self.payload = self.payload - old_len as u32 + value.len() as u32;
                if old_len == value.len() {
                    buf[span.value.0..span.value.1].copy_from_slice(value);
                    if per_field {
                        buf[span.end - VERSION_LEN..span.end]
                            .copy_from_slice(&version_bytes(version));
                    }
                } else {
                    let mut tail = Vec::with_capacity(Self::entry_len(name, value) + VERSION_LEN);
                    Self::put_value(&mut tail, value);
                    if per_field {
                        put_version(&mut tail, version);
                    }
                    let value_start = span.start + varint_len(name.len()) + name.len();
                    buf.splice(value_start..span.end, tail);
                }
                false
            }
            None => {
                buf.reserve_exact(
                    Self::entry_len(name, value) + if per_field { VERSION_LEN } else { 0 },
                );
                put_varint(&mut buf, name.len());
                buf.extend_from_slice(name);
                Self::put_value(&mut buf, value);
                if per_field {
                    put_version(&mut buf, version);
                }
                self.len += 1;
                self.payload += (name.len() + value.len()) as u32;
                true
            }
        };
        self.buf = buf.into_boxed_slice();
        if per_field {
            self.share_if_one_version();
        }
        new
    }

    /// Removes a field; true when it was held.
    pub(crate) fn remove(&mut self, name: &[u8]) -> bool {
        let Some((f, span)) = self.find(name) else {
            return false;
        };
        self.payload -= (name.len() + f.value.len()) as u32;
        self.len -= 1;
        if self.len == 0 {
            *self = Self::default();
            return true;
        }
        let mut buf = std::mem::take(&mut self.buf).into_vec();
        buf.drain(span.start..span.end);
        self.buf = buf.into_boxed_slice();
        if self.buf[0] == PER_FIELD {
            self.share_if_one_version();
        }
        true
    }

    /// Gives every field the version `v`.
    pub(crate) fn stamp(&mut self, v: Version) {
        match self.buf.first() {
            None => {}
            Some(&SHARED) => self.buf[1..1 + VERSION_LEN].copy_from_slice(&version_bytes(v)),
            Some(_) => {
                let fields = self.iter().map(|(n, f)| (n, f.value, v));
                *self = Self::build(fields);
            }
        }
    }

    /// A [`PER_FIELD`] block whose fields all have one version becomes
    /// [`SHARED`].
    fn share_if_one_version(&mut self) {
        let mut versions = self.iter().map(|(_, f)| f.version);
        let first = versions.next();
        if versions.all(|v| Some(v) == first) {
            let fields = self.iter().map(|(n, f)| (n, f.value, f.version));
            *self = Self::build(fields);
        }
    }

    /// The length of the longest field name or value.
    pub(crate) fn longest(&self) -> usize {
        self.iter()
            .map(|(n, f)| n.len().max(f.value.len()))
            .max()
            .unwrap_or(0)
    }
}

fn version_bytes(v: Version) -> [u8; VERSION_LEN] {
    let mut out = [0; VERSION_LEN];
    out[..8].copy_from_slice(&v.hlc.to_le_bytes());
    out[8..].copy_from_slice(&v.site.to_le_bytes());
    out
}

/// The entries of a [`Block`], in their order.
#[derive(Clone)]
pub(crate) struct Iter<'a, const VALUES: bool = true> {
    packed: &'a Block<VALUES>,
    at: usize,
}

impl<'a, const VALUES: bool> Iterator for Iter<'a, VALUES> {
    type Item = (&'a [u8], FieldRef<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.packed.buf.len() {
            return None;
        }
        let (name, field, span) = self.packed.read_at(self.at);
        self.at = span.end;
        Some((name, field))
    }
}

impl<const VALUES: bool> fmt::Debug for Block<VALUES> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(
                self.iter()
                    .map(|(n, v)| (bytes::Bytes::copy_from_slice(n), v)),
            )
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(hlc: u64) -> Version {
        Version { hlc, site: 1 }
    }

    fn fields(p: &Packed) -> Vec<(Vec<u8>, Vec<u8>, u64)> {
        p.iter()
            .map(|(n, f)| (n.to_vec(), f.value.to_vec(), f.version.hlc))
            .collect()
    }

    #[test]
    fn insert_replace_get_and_remove() {
        let mut p = Packed::default();
        assert_eq!(p.block_len(), 0);
        assert!(p.set(b"a", b"1", v(5)));
        assert!(p.set(b"bb", b"22", v(5)));
        assert!(!p.set(b"a", b"one", v(5)));
        assert_eq!(
            p.get(b"a"),
            Some(FieldRef {
                value: b"one",
                version: v(5)
            })
        );
        assert_eq!(p.get(b"c"), None);
        assert_eq!((p.len(), p.payload_len()), (2, 1 + 3 + 2 + 2));
        // Same-length rewrite in place.
        assert!(!p.set(b"bb", b"XY", v(5)));
        assert_eq!(
            fields(&p),
            vec![
                (b"a".to_vec(), b"one".to_vec(), 5),
                (b"bb".to_vec(), b"XY".to_vec(), 5)
            ]
        );
        assert!(p.remove(b"a"));
        assert!(!p.remove(b"a"));
        assert_eq!((p.len(), p.payload_len()), (1, 4));
        assert!(p.remove(b"bb"));
        assert_eq!((p.len(), p.payload_len(), p.block_len()), (0, 0, 0));
    }

    #[test]
    fn one_version_is_written_once() {
        let mut p = Packed::default();
        for i in 0..5u8 {
            p.set(&[b'f', i], &[b'v', i], v(7));
        }
        assert_eq!(p.shared_version(), Some(v(7)));
        // Mode byte, one version, five fields of 1 + 2 + 1 + 2 bytes.
        assert_eq!(p.block_len(), 1 + VERSION_LEN + 5 * 6);
    }

    #[test]
    fn versions_go_per_field_and_back() {
        let mut p = Packed::default();
        p.set(b"a", b"1", v(1));
        p.set(b"b", b"2", v(1));
        p.set(b"c", b"3", v(2));
        assert_eq!(p.shared_version(), None);
        assert_eq!(p.block_len(), 1 + 3 * (4 + VERSION_LEN));
        assert_eq!(
            fields(&p).iter().map(|f| f.2).collect::<Vec<_>>(),
            [1, 1, 2]
        );
        assert_eq!(p.get(b"c").unwrap().version, v(2));
        // The odd one out goes: shared again.
        p.remove(b"c");
        assert_eq!(p.shared_version(), Some(v(1)));
        p.set(b"a", b"1", v(3));
        assert_eq!(p.shared_version(), None);
        p.set(b"b", b"22", v(3));
        assert_eq!(p.shared_version(), Some(v(3)));
        p.set(b"b", b"2", v(4));
        p.stamp(v(9));
        assert_eq!(p.shared_version(), Some(v(9)));
        assert_eq!(
            fields(&p),
            vec![
                (b"a".to_vec(), b"1".to_vec(), 9),
                (b"b".to_vec(), b"2".to_vec(), 9)
            ]
        );
        // The only field rewritten at another version: still shared.
        let mut one = Packed::default();
        one.set(b"x", b"1", v(1));
        one.set(b"x", b"2", v(2));
        assert_eq!(one.shared_version(), Some(v(2)));
        assert_eq!(one.len(), 1);
    }

    #[test]
    fn long_names_and_values_take_multibyte_lengths() {
        let mut p = Packed::default();
        let long = vec![b'x'; 300];
        p.set(&long, &long, v(1));
        p.set(b"s", &long[..200], v(2));
        assert_eq!(p.get(&long).unwrap().value, &long[..]);
        assert_eq!(p.get(b"s").unwrap().value.len(), 200);
        assert_eq!(p.longest(), 300);
        assert_eq!(p.payload_len(), 600 + 201);
    }
}
