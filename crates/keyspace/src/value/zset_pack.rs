//! The small form of a sorted set, as Redis keeps one in a listpack: ONE
//! buffer holding its members sorted by (score, member), each with its
//! score and, when the members' versions differ, its version.
//!
//! Layout of the buffer: a table of `n` little-endian `u16` offsets (where
//! each entry starts, counted from the end of the table), then the entries:
//! - the member's length (a varint) and its bytes;
//! - the score: a varint `2 * zigzag(i)` for an integer `i` below 2^53 in
//!   magnitude (not -0), else the varint `1` and the f64's 8 bytes;
//! - only when the versions differ (`each`): the version's `hlc` (8 bytes)
//!   and `site` (2 bytes). While every member shares one version (a set
//!   written by one ZADD, or stamped whole), it is held once.
//!
//! Finding a member is a linear scan, as in Redis; ranks are positions,
//! and the offsets table makes the entry at a rank, hence binary searches
//! by score, direct. A set stays in this form while it has at most
//! `zset-max-listpack-entries` members of at most `zset-max-listpack-value`
//! bytes (the limits [`set_limits`] sets) and its buffer fits the `u16`
//! offsets; past them the sorted set moves to its large form.

use std::cmp::Ordering;
use std::sync::atomic::{AtomicUsize, Ordering as Atomic};

use crate::version::Version;

static MAX_ENTRIES: AtomicUsize = AtomicUsize::new(128);
static MAX_VALUE: AtomicUsize = AtomicUsize::new(64);

/// The most bytes a buffer may hold (its offsets are `u16`).
const MAX_BYTES: usize = u16::MAX as usize;
/// Bytes of a version held with its entry.
const VERSION_LEN: usize = 10;

/// Sets the limits past which a sorted set leaves the small form
/// (`zset-max-listpack-entries` and `-value`); sets already held keep
/// their form until they are next written, as in Redis.
pub fn set_limits(entries: usize, value: usize) {
    MAX_ENTRIES.store(entries, Atomic::Relaxed);
    MAX_VALUE.store(value, Atomic::Relaxed);
}

/// Whether `pack` may take a new member of `member_len` bytes (the
/// configured limits).
pub fn may_add(pack: &Pack, member_len: usize) -> bool {
    pack.len() < MAX_ENTRIES.load(Atomic::Relaxed) && member_len <= MAX_VALUE.load(Atomic::Relaxed)
}

/// Whether any write of a member of `member_len` bytes keeps `pack`'s
/// offsets in range, even should every entry take its own version.
pub fn has_room(pack: &Pack, member_len: usize) -> bool {
    pack.buf.len() + VERSION_LEN * (pack.len() + 1) + 2 + 10 + member_len + 9 <= MAX_BYTES
}

#[derive(Clone, Debug, Default)]
pub struct Pack {
    buf: Box<[u8]>,
    n: u16,
    /// Every entry carries its own version (else all share `version`).
    each: bool,
    /// Bytes of the members (at most the buffer's, so a `u16`).
    members_len: u16,
    /// The version every member shares, when not `each`: held as its
    /// parts so that the struct takes 32 bytes.
    hlc: u64,
    site: u16,
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(b: &[u8], at: &mut usize) -> u64 {
    let (mut v, mut shift) = (0u64, 0);
    loop {
        let x = b[*at];
        *at += 1;
        v |= u64::from(x & 0x7f) << shift;
        if x < 0x80 {
            return v;
        }
        shift += 7;
    }
}

/// The integer a score is, when it is held as one.
fn as_int(s: f64) -> Option<i64> {
    let whole = s == s.trunc() && s.abs() < (1u64 << 53) as f64;
    (whole && !(s == 0.0 && s.is_sign_negative())).then_some(s as i64)
}

fn put_entry(out: &mut Vec<u8>, member: &[u8], score: f64, version: Option<Version>) {
    put_varint(out, member.len() as u64);
    out.extend_from_slice(member);
    match as_int(score) {
        Some(i) => put_varint(out, (((i << 1) ^ (i >> 63)) as u64) << 1),
        None => {
            out.push(1);
            out.extend_from_slice(&score.to_bits().to_le_bytes());
        }
    }
    if let Some(v) = version {
        out.extend_from_slice(&v.hlc.to_le_bytes());
        out.extend_from_slice(&v.site.to_le_bytes());
    }
}

/// Orders (score, member) pairs as Redis does.
pub fn cmp(a: (f64, &[u8]), b: (f64, &[u8])) -> Ordering {
    a.0.partial_cmp(&b.0)
        .unwrap_or(Ordering::Equal)
        .then_with(|| a.1.cmp(b.1))
}

impl Pack {
    pub fn len(&self) -> usize {
        self.n as usize
    }

    /// Bytes of the buffer (what the form takes beside its struct).
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// Bytes of the members plus eight per score, as
    /// [`ZSetValue::payload_len`](super::ZSetValue::payload_len) counts.
    pub fn payload(&self) -> usize {
        self.members_len as usize + 8 * self.len()
    }

    fn version(&self) -> Version {
        Version {
            hlc: self.hlc,
            site: self.site,
        }
    }

    fn set_shared(&mut self, v: Version) {
        (self.hlc, self.site) = (v.hlc, v.site);
    }

    fn table(&self) -> usize {
        2 * self.len()
    }

    /// Where entry `i` starts in the buffer.
    fn start(&self, i: usize) -> usize {
        self.table() + u16::from_le_bytes([self.buf[2 * i], self.buf[2 * i + 1]]) as usize
    }

    fn end(&self, i: usize) -> usize {
        match i + 1 < self.len() {
            true => self.start(i + 1),
            false => self.buf.len(),
        }
    }

    /// The entry at rank `i`: member, score, version.
    pub fn get(&self, i: usize) -> (&[u8], f64, Version) {
        let b = &self.buf[..];
        let mut at = self.start(i);
        let len = get_varint(b, &mut at) as usize;
        let member = &b[at..at + len];
        at += len;
        let s = get_varint(b, &mut at);
        let score = if s & 1 == 0 {
            let z = s >> 1;
            ((z >> 1) as i64 ^ -((z & 1) as i64)) as f64
        } else {
            let x = f64::from_bits(u64::from_le_bytes(b[at..at + 8].try_into().unwrap()));
            at += 8;
            x
        };
        let version = match self.each {
            true => Version {
                hlc: u64::from_le_bytes(b[at..at + 8].try_into().unwrap()),
                site: u16::from_le_bytes([b[at + 8], b[at + 9]]),
            },
            false => self.version(),
        };
        (member, score, version)
    }

    /// The member at rank `i`, without decoding its score.
    pub fn member(&self, i: usize) -> &[u8] {
        let mut at = self.start(i);
        let len = get_varint(&self.buf, &mut at) as usize;
        &self.buf[at..at + len]
    }

    /// The rank of `member` (a linear scan, as Redis's).
    pub fn find(&self, member: &[u8]) -> Option<usize> {
        (0..self.len()).find(|&i| self.member(i) == member)
    }

    /// How many entries come before the first for which `before` is false
    /// (`before` is true for a prefix of the order).
    pub fn partition_point(&self, before: impl Fn(f64, &[u8]) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let (m, s, _) = self.get(mid);
            match before(s, m) {
                true => lo = mid + 1,
                false => hi = mid,
            }
        }
        lo
    }

    /// Rewrites the buffer with versions in every entry (`each`) or held
    /// once (then every member takes the shared version).
    fn rebuild(&mut self, each: bool) {
        let mut table = Vec::with_capacity(self.table());
        let mut out = Vec::new();
        for i in 0..self.len() {
            let (m, s, v) = self.get(i);
            table.extend_from_slice(&(out.len() as u16).to_le_bytes());
            put_entry(&mut out, m, s, each.then_some(v));
        }
        table.reserve_exact(out.len());
        table.extend_from_slice(&out);
        self.buf = table.into_boxed_slice();
        self.each = each;
    }

    /// Adds `member` (not held) at its place in the order; its rank.
    pub fn insert(&mut self, member: &[u8], score: f64, version: Version) -> usize {
        if self.n == 0 {
            self.set_shared(version);
            self.each = false;
        } else if !self.each && version != self.version() {
            self.rebuild(true);
        }
        let i = self.partition_point(|s, m| cmp((s, m), (score, member)) == Ordering::Less);
        let mut e = Vec::new();
        put_entry(&mut e, member, score, self.each.then_some(version));
        let table = self.table();
        let off = match i < self.len() {
            true => self.start(i) - table,
            false => self.buf.len() - table,
        };
        let mut v = std::mem::take(&mut self.buf).into_vec();
        v.reserve_exact(2 + e.len());
        v.splice(table + off..table + off, e.iter().copied());
        v.splice(2 * i..2 * i, (off as u16).to_le_bytes());
        for j in i + 1..=self.len() {
            let o = u16::from_le_bytes([v[2 * j], v[2 * j + 1]]) + e.len() as u16;
            v[2 * j..2 * j + 2].copy_from_slice(&o.to_le_bytes());
        }
        self.buf = v.into_boxed_slice();
        self.n += 1;
        self.members_len += member.len() as u16;
        i
    }

    /// Removes the entry at rank `i`.
    pub fn remove_at(&mut self, i: usize) {
        let (start, end) = (self.start(i), self.end(i));
        let len = end - start;
        let member_len = self.member(i).len();
        let mut v = std::mem::take(&mut self.buf).into_vec();
        v.drain(start..end);
        v.drain(2 * i..2 * i + 2);
        for j in i..self.len() - 1 {
            let o = u16::from_le_bytes([v[2 * j], v[2 * j + 1]]) - len as u16;
            v[2 * j..2 * j + 2].copy_from_slice(&o.to_le_bytes());
        }
        self.buf = v.into_boxed_slice();
        self.n -= 1;
        self.members_len -= member_len as u16;
        if self.n <= 1 && self.each {
            if self.n == 1 {
                self.set_shared(self.get(0).2);
            }
            self.rebuild(false);
        }
    }

    /// Gives the entry at rank `i` the version `v`.
    pub fn set_version(&mut self, i: usize, v: Version) {
        if !self.each {
            if self.n == 1 {
                self.set_shared(v);
            }
            if v == self.version() {
                return;
            }
            self.rebuild(true);
        }
        let end = self.end(i);
        self.buf[end - VERSION_LEN..end - 2].copy_from_slice(&v.hlc.to_le_bytes());
        self.buf[end - 2..end].copy_from_slice(&v.site.to_le_bytes());
    }

    /// Gives every entry the version `v` (held once).
    pub fn stamp(&mut self, v: Version) {
        self.set_shared(v);
        self.rebuild(false);
    }

    /// The length of the longest member.
    pub fn longest(&self) -> usize {
        (0..self.len())
            .map(|i| self.member(i).len())
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(n: u64) -> Version {
        Version { hlc: n, site: 2 }
    }

    fn all(p: &Pack) -> Vec<(Vec<u8>, f64, Version)> {
        (0..p.len())
            .map(|i| {
                let (m, s, v) = p.get(i);
                (m.to_vec(), s, v)
            })
            .collect()
    }

    #[test]
    fn sizes() {
        assert_eq!(std::mem::size_of::<Pack>(), 32);
        assert_eq!(std::mem::size_of::<super::super::ZSetValue>(), 40);
    }

    #[test]
    fn entries_stay_sorted_with_their_scores() {
        let mut p = Pack::default();
        for (m, s) in [
            ("b", 2.0),
            ("a", 2.0),
            ("c", -1.5),
            ("z", 1e300),
            ("y", -0.0),
        ] {
            p.insert(m.as_bytes(), s, v(1));
        }
        let got: Vec<(Vec<u8>, f64)> = all(&p).into_iter().map(|(m, s, _)| (m, s)).collect();
        let want: [(&str, f64); 5] = [
            ("c", -1.5),
            ("y", -0.0),
            ("a", 2.0),
            ("b", 2.0),
            ("z", 1e300),
        ];
        assert_eq!(got.len(), want.len());
        for ((m, s), (wm, ws)) in got.iter().zip(want) {
            assert_eq!(m, wm.as_bytes());
            assert_eq!(s.to_bits(), ws.to_bits(), "-0 stays -0");
        }
        assert_eq!(p.find(b"a"), Some(2));
        assert_eq!(p.find(b"x"), None);
        assert_eq!(p.payload(), 5 * 9);
        // One version, held once: small integers take one byte.
        assert!(!p.each);
        p.remove_at(2);
        assert_eq!(p.find(b"b"), Some(2));
        assert_eq!(p.payload(), 4 * 9);
    }

    #[test]
    fn versions_are_held_once_until_they_differ() {
        let mut p = Pack::default();
        p.insert(b"a", 1.0, v(1));
        p.insert(b"b", 2.0, v(1));
        let shared = p.bytes();
        p.insert(b"c", 3.0, v(5));
        assert!(p.each);
        assert!(p.bytes() > shared + 3 * VERSION_LEN);
        assert_eq!(
            all(&p).iter().map(|e| e.2).collect::<Vec<_>>(),
            [v(1), v(1), v(5)]
        );
        p.set_version(0, v(9));
        assert_eq!(p.get(0).2, v(9));
        assert_eq!(p.get(1).2, v(1));
        p.stamp(v(3));
        assert!(!p.each);
        assert_eq!(p.bytes(), shared + 2 + 2 + 1);
        assert!(all(&p).iter().all(|e| e.2 == v(3)));
        p.remove_at(0);
        p.set_version(0, v(4));
        assert!(p.each);
        p.remove_at(0);
        assert!(!p.each);
        assert_eq!(all(&p), [(b"c".to_vec(), 3.0, v(3))]);
    }

    #[test]
    fn scores_round_trip() {
        let mut p = Pack::default();
        let scores = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.5,
            f64::INFINITY,
            f64::NEG_INFINITY,
            9007199254740992.0,
            -4503599627370495.0,
            1e-300,
        ];
        for (i, s) in scores.iter().enumerate() {
            p.insert(format!("m{i}").as_bytes(), *s, v(1));
        }
        for (i, s) in scores.iter().enumerate() {
            let at = p.find(format!("m{i}").as_bytes()).unwrap();
            assert_eq!(p.get(at).1.to_bits(), s.to_bits());
        }
    }

    #[test]
    fn room_is_checked_before_the_offsets_overflow() {
        let mut p = Pack::default();
        let mut i = 0u32;
        while has_room(&p, 40) {
            p.insert(format!("{i:040}").as_bytes(), 0.5, v(1));
            i += 1;
        }
        // Even with every version held per entry, offsets stay in range.
        p.set_version(0, v(2));
        assert!(p.each && p.bytes() <= MAX_BYTES);
        assert_eq!(p.len(), i as usize);
        let last = format!("{:040}", i - 1);
        assert_eq!(p.get(p.len() - 1), (last.as_bytes(), 0.5, v(1)));
        assert_eq!(p.find(last.as_bytes()), Some(p.len() - 1));
    }
}
