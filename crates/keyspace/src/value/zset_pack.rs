//! The small form of a sorted set, as Redis keeps one in a listpack: ONE
//! buffer holding its members sorted by (score, member), each with its
//! score and, when the members' versions differ, its version.
//!
//! The buffer is the entries one after the other, each:
//! - the member's length (a varint) and its bytes;
//! - the score: a varint `2 * zigzag(i)` for an integer `i` below 2^53 in
//!   magnitude (not -0), else the varint `1` and the f64's 8 bytes;
//! - only when the versions differ (`each`): the version's `hlc` (8 bytes)
//!   and `site` (2 bytes). While every member shares one version (a set
//!   written by one ZADD, or stamped whole), it is held once.
//!
//! As in Redis's listpack, everything is a walk from the first entry:
//! finding a member, the entry at a rank, a score bound (at most
//! `zset-max-listpack-entries`, 128 by default, entries of a few bytes);
//! ranges are read in one walk ([`Pack::iter`]). A set stays in this form
//! while it has at most `zset-max-listpack-entries` members of at most
//! `zset-max-listpack-value` bytes (the limits [`set_limits`] sets) and its
//! buffer at most 64 KiB (its member bytes are counted in a `u16`); past
//! them the sorted set moves to its large form.

use std::cmp::Ordering;
use std::sync::atomic::{AtomicUsize, Ordering as Atomic};

use crate::version::Version;

static MAX_ENTRIES: AtomicUsize = AtomicUsize::new(128);
static MAX_VALUE: AtomicUsize = AtomicUsize::new(64);

/// The most bytes a buffer may hold (its member bytes are a `u16`).
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

/// Whether any write of a member of `member_len` bytes keeps `pack`
/// within [`MAX_BYTES`], even should every entry take its own version.
pub fn has_room(pack: &Pack, member_len: usize) -> bool {
    pack.buf.len() + VERSION_LEN * (pack.len() + 1) + 10 + member_len + 9 <= MAX_BYTES
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

use crate::codec::wire::put_varint;

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

    /// The entry at byte `at`: member, score, version, and where the
    /// next one starts.
    fn decode(&self, mut at: usize) -> (&[u8], f64, Version, usize) {
        let b = &self.buf[..];
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
            true => {
                at += VERSION_LEN;
                Version {
                    hlc: u64::from_le_bytes(b[at - 10..at - 2].try_into().unwrap()),
                    site: u16::from_le_bytes([b[at - 2], b[at - 1]]),
                }
            }
            false => self.version(),
        };
        (member, score, version, at)
    }

    /// Where the entry after the one at byte `at` starts.
    fn skip(&self, mut at: usize) -> usize {
        let b = &self.buf[..];
        at += get_varint(b, &mut at) as usize;
        if get_varint(b, &mut at) & 1 == 1 {
            at += 8;
        }
        match self.each {
            true => at + VERSION_LEN,
            false => at,
        }
    }

    /// Where entry `i` starts (its end, for `i == len`).
    fn start(&self, i: usize) -> usize {
        (0..i).fold(0, |at, _| self.skip(at))
    }

    /// The entry at rank `i`: member, score, version.
    pub fn get(&self, i: usize) -> (&[u8], f64, Version) {
        let (m, s, v, _) = self.decode(self.start(i));
        (m, s, v)
    }

    /// The entries in order, from rank `from`, with where each starts.
    fn walk(&self, from: usize) -> impl Iterator<Item = (usize, (&[u8], f64, Version))> {
        let mut at = self.start(from);
        std::iter::from_fn(move || {
            (at < self.buf.len()).then(|| {
                let (m, s, v, next) = self.decode(at);
                let here = at;
                at = next;
                (here, (m, s, v))
            })
        })
    }

    /// The entries in order from rank `from`: member, score, version.
    pub fn iter(&self, from: usize) -> impl Iterator<Item = (&[u8], f64, Version)> {
        self.walk(from).map(|(_, e)| e)
    }

    /// The rank of `member` (a linear scan, as Redis's).
    pub fn find(&self, member: &[u8]) -> Option<usize> {
        self.iter(0).position(|(m, _, _)| m == member)
    }

    /// How many entries come before the first for which `before` is false
    /// (`before` is true for a prefix of the order).
    pub fn partition_point(&self, before: impl Fn(f64, &[u8]) -> bool) -> usize {
        self.iter(0)
            .position(|(m, s, _)| !before(s, m))
            .unwrap_or(self.len())
    }

    /// Rewrites the buffer with versions in every entry (`each`) or held
    /// once (then every member takes the shared version).
    fn rebuild(&mut self, each: bool) {
        let mut out = Vec::new();
        for (m, s, v) in self.iter(0) {
            put_entry(&mut out, m, s, each.then_some(v));
        }
        out.shrink_to_fit();
        self.buf = out.into_boxed_slice();
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
        let below = |s, m| cmp((s, m), (score, member)) == Ordering::Less;
        let (i, at) = self
            .walk(0)
            .enumerate()
            .find(|(_, (_, (m, s, _)))| !below(*s, m))
            .map_or((self.len(), self.buf.len()), |(i, (at, _))| (i, at));
        let mut e = Vec::new();
        put_entry(&mut e, member, score, self.each.then_some(version));
        let mut v = std::mem::take(&mut self.buf).into_vec();
        v.reserve_exact(e.len());
        v.splice(at..at, e);
        self.buf = v.into_boxed_slice();
        self.n += 1;
        self.members_len += member.len() as u16;
        i
    }

    /// Removes the entry at rank `i`.
    pub fn remove_at(&mut self, i: usize) {
        let start = self.start(i);
        let (m, _, _, end) = self.decode(start);
        self.members_len -= m.len() as u16;
        let mut v = std::mem::take(&mut self.buf).into_vec();
        v.drain(start..end);
        self.buf = v.into_boxed_slice();
        self.n -= 1;
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
        let end = self.skip(self.start(i));
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
        self.iter(0).map(|(m, _, _)| m.len()).max().unwrap_or(0)
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
        assert_eq!(std::mem::size_of::<super::super::ZSetValue>(), 32);
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
        assert_eq!(p.bytes(), shared + 2 + 1);
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
        // Even with every version held per entry, the buffer stays in range.
        p.set_version(0, v(2));
        assert!(p.each && p.bytes() <= MAX_BYTES);
        assert_eq!(p.len(), i as usize);
        let last = format!("{:040}", i - 1);
        assert_eq!(p.get(p.len() - 1), (last.as_bytes(), 0.5, v(1)));
        assert_eq!(p.find(last.as_bytes()), Some(p.len() - 1));
    }
}
