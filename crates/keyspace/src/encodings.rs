//! The thresholds under which a value keeps its small encoding (Redis's
//! `hash-max-listpack-entries` and `-value`), set by CONFIG SET. Today they
//! decide what a small hash looks like to clients (HSCAN returns it whole,
//! as Redis does a listpack); the sorted-set ones choose the form new
//! writes give a sorted set (the small form is what Redis's listpack is).

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::value::{HashValue, SetValue, ZSetValue};

/// Redis 7.2's defaults for sets and sorted sets (not settable yet).
const SET_MAX_INTSET_ENTRIES: usize = 512;
const SET_MAX_LISTPACK_ENTRIES: usize = 128;
const MAX_LISTPACK_VALUE: usize = 64;

pub struct Encodings {
    hash_max_entries: AtomicUsize,
    hash_max_value: AtomicUsize,
    zset_max_entries: AtomicUsize,
    zset_max_value: AtomicUsize,
}

impl Default for Encodings {
    fn default() -> Self {
        Encodings {
            hash_max_entries: AtomicUsize::new(128),
            hash_max_value: AtomicUsize::new(64),
            zset_max_entries: AtomicUsize::new(128),
            zset_max_value: AtomicUsize::new(MAX_LISTPACK_VALUE),
        }
    }
}

impl Encodings {
    pub fn hash_max_entries(&self) -> usize {
        self.hash_max_entries.load(Ordering::Relaxed)
    }

    pub fn set_hash_max_entries(&self, n: usize) {
        self.hash_max_entries.store(n, Ordering::Relaxed)
    }

    pub fn hash_max_value(&self) -> usize {
        self.hash_max_value.load(Ordering::Relaxed)
    }

    pub fn set_hash_max_value(&self, n: usize) {
        self.hash_max_value.store(n, Ordering::Relaxed)
    }

    /// A hash of `len` fields whose longest field or value is `longest`
    /// bytes is small (a listpack in Redis).
    pub fn small_hash(&self, len: usize, longest: usize) -> bool {
        len <= self.hash_max_entries() && longest <= self.hash_max_value()
    }

    /// [`small_hash`](Self::small_hash) for a hash held: its fields are
    /// read only when their count is under the limit, so a large hash
    /// costs nothing to classify.
    pub fn hash_is_small(&self, h: &HashValue) -> bool {
        h.len() <= self.hash_max_entries() && self.small_hash(h.len(), h.longest())
    }

    /// What Redis 7.2 calls a set's encoding: `intset` (integers only, up
    /// to 512), `listpack` (up to 128 members of at most 64 bytes) or
    /// `hashtable`.
    pub fn set_encoding(&self, s: &SetValue) -> &'static str {
        if s.len() <= SET_MAX_INTSET_ENTRIES && s.all_integers() {
            "intset"
        } else if s.len() <= SET_MAX_LISTPACK_ENTRIES && s.longest() <= MAX_LISTPACK_VALUE {
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
}
