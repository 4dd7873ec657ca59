//! The thresholds under which a value keeps its small encoding (Redis's
//! `hash-max-listpack-entries` and `-value`, `set-max-listpack-entries`
//! and `-value`), set by CONFIG SET.
//!
//! A hash is packed in one block up to the hash thresholds
//! ([`crate::value::HashValue`]) and says so to OBJECT ENCODING and HSCAN;
//! so is a set up to the set thresholds ([`crate::value::SetValue`]). A
//! value decides its form wherever it is written (the write path, merges
//! of other sites' values, decoding), where no keyspace is at hand: the
//! thresholds are therefore the process's ([`hash_limits`],
//! [`set_limits`]), which the keyspace's [`Encodings`] sets (one keyspace
//! serves a process). Sorted sets likewise take their small form up to
//! the process's zset thresholds, which [`Encodings`] sets too.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

use crate::value::{HashValue, ListValue, SetValue, ZSetValue};

/// Redis 7.2's defaults for sets and sorted sets.
const SET_MAX_INTSET_ENTRIES: usize = 512;
const SET_MAX_LISTPACK_ENTRIES: usize = 128;
const MAX_LISTPACK_VALUE: usize = 64;

static SET_MAX_ENTRIES: AtomicUsize = AtomicUsize::new(SET_MAX_LISTPACK_ENTRIES);
/// `set-max-intset-entries`: only what OBJECT ENCODING says changes (a set
/// of integers is held as any small set).
static SET_MAX_INTSET: AtomicUsize = AtomicUsize::new(SET_MAX_INTSET_ENTRIES);
static SET_MAX_VALUE: AtomicUsize = AtomicUsize::new(MAX_LISTPACK_VALUE);

/// Redis 7.2's `list-max-listpack-size` default (-2: a list whose
/// listpack would take up to 8 KiB is one listpack, else a quicklist).
const LIST_MAX_LISTPACK_SIZE: i64 = -2;

/// Redis 7.2's defaults for hashes.
const HASH_MAX_LISTPACK_ENTRIES: usize = 128;
const HASH_MAX_LISTPACK_VALUE: usize = 64;

static HASH_MAX_ENTRIES: AtomicUsize = AtomicUsize::new(HASH_MAX_LISTPACK_ENTRIES);
static HASH_MAX_VALUE: AtomicUsize = AtomicUsize::new(HASH_MAX_LISTPACK_VALUE);

/// The most fields, and the longest name or value, a packed hash holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HashLimits {
    pub max_entries: usize,
    pub max_value: usize,
}

impl Default for HashLimits {
    fn default() -> Self {
        HashLimits {
            max_entries: HASH_MAX_LISTPACK_ENTRIES,
            max_value: HASH_MAX_LISTPACK_VALUE,
        }
    }
}

/// The process's hash thresholds (see the module docs).
pub fn hash_limits() -> HashLimits {
    HashLimits {
        max_entries: HASH_MAX_ENTRIES.load(Ordering::Relaxed),
        max_value: HASH_MAX_VALUE.load(Ordering::Relaxed),
    }
}

/// The most members, and the longest member, a packed set holds (Redis
/// 7.2's defaults for sets are those for hashes: 128 and 64).
pub type SetLimits = HashLimits;

/// The process's set thresholds (see the module docs).
pub fn set_limits() -> SetLimits {
    SetLimits {
        max_entries: SET_MAX_ENTRIES.load(Ordering::Relaxed),
        max_value: SET_MAX_VALUE.load(Ordering::Relaxed),
    }
}

pub struct Encodings {
    zset_max_entries: AtomicUsize,
    zset_max_value: AtomicUsize,
    list_max_size: AtomicI64,
}

impl Default for Encodings {
    fn default() -> Self {
        Encodings {
            zset_max_entries: AtomicUsize::new(128),
            zset_max_value: AtomicUsize::new(MAX_LISTPACK_VALUE),
            list_max_size: AtomicI64::new(LIST_MAX_LISTPACK_SIZE),
        }
    }
}

impl Encodings {
    pub fn hash_max_entries(&self) -> usize {
        HASH_MAX_ENTRIES.load(Ordering::Relaxed)
    }

    /// Hashes written from now on are packed up to `n` fields (those
    /// packed already stay so until written, as in Redis).
    pub fn set_hash_max_entries(&self, n: usize) {
        HASH_MAX_ENTRIES.store(n, Ordering::Relaxed)
    }

    pub fn hash_max_value(&self) -> usize {
        HASH_MAX_VALUE.load(Ordering::Relaxed)
    }

    /// Hashes written from now on are packed while no name or value is
    /// longer than `n` bytes.
    pub fn set_hash_max_value(&self, n: usize) {
        HASH_MAX_VALUE.store(n, Ordering::Relaxed)
    }

    /// Whether a hash is in its packed form (a listpack in Redis): it is
    /// until it outgrows the thresholds, and never again after.
    pub fn hash_is_small(&self, h: &HashValue) -> bool {
        h.is_packed()
    }

    pub fn set_max_entries(&self) -> usize {
        SET_MAX_ENTRIES.load(Ordering::Relaxed)
    }

    /// Sets written from now on are packed up to `n` members (those
    /// packed already stay so until written, as in Redis).
    pub fn set_set_max_entries(&self, n: usize) {
        SET_MAX_ENTRIES.store(n, Ordering::Relaxed)
    }

    pub fn set_max_value(&self) -> usize {
        SET_MAX_VALUE.load(Ordering::Relaxed)
    }

    /// Sets written from now on are packed while no member is longer than
    /// `n` bytes.
    pub fn set_set_max_value(&self, n: usize) {
        SET_MAX_VALUE.store(n, Ordering::Relaxed)
    }

    pub fn set_max_intset(&self) -> usize {
        SET_MAX_INTSET.load(Ordering::Relaxed)
    }

    /// `set-max-intset-entries` (OBJECT ENCODING only).
    pub fn set_set_max_intset(&self, n: usize) {
        SET_MAX_INTSET.store(n, Ordering::Relaxed)
    }

    /// What Redis 7.2 calls a set's encoding: `intset` (integers only, up
    /// to `set-max-intset-entries`), `listpack` (the packed form: up to
    /// `set-max-listpack-entries` members of at most
    /// `set-max-listpack-value` bytes) or `hashtable`.
    pub fn set_encoding(&self, s: &SetValue) -> &'static str {
        if s.len() <= self.set_max_intset() && s.all_integers() {
            "intset"
        } else if s.is_packed() {
            "listpack"
        } else {
            "hashtable"
        }
    }

    /// A sorted set held in the small form, as Redis holds one in a
    /// listpack (else a skiplist). Sorted sets take the form these
    /// thresholds call for when they are written, as in Redis.
    pub fn zset_is_small(&self, z: &ZSetValue) -> bool {
        z.is_small()
    }

    pub fn zset_max_entries(&self) -> usize {
        self.zset_max_entries.load(Ordering::Relaxed)
    }

    pub fn set_zset_max_entries(&self, n: usize) {
        self.zset_max_entries.store(n, Ordering::Relaxed);
        ZSetValue::set_limits(n, self.zset_max_value());
    }

    pub fn zset_max_value(&self) -> usize {
        self.zset_max_value.load(Ordering::Relaxed)
    }

    pub fn set_zset_max_value(&self, n: usize) {
        self.zset_max_value.store(n, Ordering::Relaxed);
        ZSetValue::set_limits(self.zset_max_entries(), n);
    }

    /// A list Redis 7.2 would hold in one listpack, by
    /// `list-max-listpack-size`: at most that many elements when
    /// positive; when negative (-1 to -5), a listpack of at most 4, 8, 16,
    /// 32 or 64 KiB (its elements with 2 bytes of header each and the
    /// listpack's 7). The list's form here is the same either way
    /// ([`ListValue`]).
    pub fn list_is_small(&self, l: &ListValue) -> bool {
        match self.list_max_size() {
            n if n > 0 => l.len() as i64 <= n,
            n => {
                let bytes = 4096usize << (n.clamp(-5, -1).unsigned_abs() - 1);
                l.payload_len() + 2 * l.len() + 7 <= bytes
            }
        }
    }

    pub fn list_max_size(&self) -> i64 {
        self.list_max_size.load(Ordering::Relaxed)
    }

    pub fn set_list_max_size(&self, n: i64) {
        self.list_max_size.store(n, Ordering::Relaxed);
    }
}
