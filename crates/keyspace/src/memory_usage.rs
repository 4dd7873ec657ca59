//! What one key takes in memory in its partition, for `MEMORY USAGE` and
//! the dataset figure (`used_memory_dataset`): an estimate computed from
//! the sizes of the structures that hold it (`size_of`, lengths and
//! capacities), each heap block counted as glibc's malloc takes it
//! ([`chunk`]: the request, its header and rounding), so that it agrees
//! with what the process's resident set grows by.
//!
//! A key costs:
//! - its share of its partition's map ([`map_share`]): the map
//!   ([`crate::entry_map::EntryMap`]) allocates, for the room it has (its
//!   capacity, used or not), a vector whose elements hold the key (a
//!   [`MapKey`]) and the [`Entry`] inline, and a table of a 4-byte
//!   position and a control byte per bucket ([`entry_map_bytes`]; of a
//!   vector large enough for glibc to map it apart, only the pages its
//!   entries were written to are resident); a key's share is that divided
//!   by the keys the map holds, so a map at 80% of its room costs each key
//!   a quarter more than its slot;
//! - what the entry owns ([`entry_heap`]): the key's bytes past the 22 a
//!   [`MapKey`] holds inline, its element in the partition's expiry index
//!   when it has a time to live, and the value's heap blocks
//!   ([`value_heap`], one function per value form).
//!
//! It does not count the shared headers `Bytes` allocate when a buffer is
//! shared (a large hash's fields written by one HSET share one buffer),
//! copies of the key or value held by the partition log for replication
//! and WAN, and tombstones. The table forms of hashes, sets and sorted
//! sets are estimated without walking their elements (the figure is kept
//! up to date on every write): each element's own block is its bytes plus
//! a header and the rounding's average.

use std::mem::size_of;

use bytes::Bytes;

use crate::map_key::{self, MapKey};
use crate::memory::chunk;
use crate::value::{
    CounterValue, Entry, Field, HashValue, ListValue, SetValue, StrValue, Value, ZKey, ZMember,
    ZSetValue,
};
use crate::version::Version;

/// glibc's chunk header, and its rounding on average (half its 16-byte
/// alignment), per heap block whose exact size is not looked at.
const BLOCK_OVERHEAD: usize = 8 + 16 / 2;

/// The control bytes a hash table keeps past its buckets (one SSE2
/// group, so that a probe may read a whole group from any bucket).
const GROUP_WIDTH: usize = 16;

/// One element of an `indexmap` entries vector: the hash, then key and value.
const fn map_element<K, V>() -> usize {
    size_of::<usize>() + size_of::<K>() + size_of::<V>()
}

/// The buckets of a hash table (`hashbrown`) with room for `capacity`
/// entries: a power of two, at most 7/8 used (one empty below 8).
fn buckets(capacity: usize) -> usize {
    match capacity {
        0 => 0,
        1..=3 => 4,
        4..=7 => 8,
        _ => (capacity * 8 / 7).next_power_of_two(),
    }
}

/// Requests from this size up glibc serves by `mmap` (`M_MMAP_THRESHOLD`'s
/// default): pages of such a block that were never written are not
/// resident.
const MMAP_THRESHOLD: usize = 128 << 10;

const PAGE: usize = 4096;

/// Resident bytes of a vector of `len` elements of `element` bytes with
/// room for `capacity`: its whole block (a block from the heap mostly
/// reuses written memory), but of a mapped block only the pages its
/// elements take (the room past them is never written until used).
fn vec_bytes(capacity: usize, len: usize, element: usize) -> usize {
    let block = capacity * element;
    if block >= MMAP_THRESHOLD {
        (len * element).next_multiple_of(PAGE)
    } else {
        chunk(block)
    }
}

/// Heap bytes of an `IndexMap<K, V>` of `len` entries with room for
/// `capacity`: its entries vector (as many elements as its index table
/// has room for; see [`vec_bytes`]) and its index table (a `usize` and a
/// control byte per bucket, and a group's worth of control bytes more:
/// all written, the control bytes when it is made, the buckets as entries
/// land all over it).
pub fn indexmap_bytes<K, V>(capacity: usize, len: usize) -> usize {
    if capacity == 0 {
        return 0;
    }
    let buckets = buckets(capacity);
    let index =
        (buckets * size_of::<usize>()).next_multiple_of(GROUP_WIDTH) + buckets + GROUP_WIDTH;
    vec_bytes(capacity, len, map_element::<K, V>()) + chunk(index)
}

/// Heap bytes of a partition's map ([`crate::entry_map::EntryMap`]) of
/// `len` keys: its vector of `(key, entry)` with room for `capacity` (see
/// [`vec_bytes`]) and its table's one block of `table_bytes` (4-byte
/// positions and control bytes).
pub fn entry_map_bytes(capacity: usize, len: usize, table_bytes: usize) -> usize {
    let table = match table_bytes {
        0 => 0,
        n => chunk(n),
    };
    vec_bytes(capacity, len, size_of::<(MapKey, Entry)>()) + table
}

/// A key's share of its partition's map ([`entry_map_bytes`]), over the
/// `len` keys it holds.
pub fn map_share(capacity: usize, len: usize, table_bytes: usize) -> usize {
    entry_map_bytes(capacity, len, table_bytes) / len.max(1)
}

/// The heap block a [`MapKey`] of `len` bytes has: none up to 22 bytes.
fn key_block(len: usize) -> usize {
    if len > map_key::INLINE {
        chunk(len)
    } else {
        0
    }
}

/// A string's heap bytes: none inline (up to 30 bytes), else its one block.
pub fn str_heap(s: &StrValue) -> usize {
    match s.is_inline() {
        true => 0,
        false => chunk(s.len()),
    }
}

/// A merging counter's heap bytes: the boxed state, its text and what it
/// keeps to merge across sites.
pub fn counter_heap(c: &CounterValue) -> usize {
    let beyond_struct = c.state_len() - size_of::<CounterValue>();
    chunk(size_of::<CounterValue>()) + chunk(c.text().len()) + beyond_struct
}

/// A hash's heap bytes. Packed: its one block. A table: the boxed table
/// (its map and payload count), the map's room, and a block per name and
/// per value (written by one HSET, they share blocks: fewer headers).
pub fn hash_heap(h: &HashValue) -> usize {
    let fields = match h.packed_bytes() {
        Some(block) => chunk(block),
        None => {
            chunk(size_of::<crate::value::FieldMap>() + size_of::<usize>())
                + indexmap_bytes::<Bytes, Field>(h.capacity(), h.len())
                + h.payload_len()
                + 2 * h.len() * BLOCK_OVERHEAD
        }
    };
    fields + h.counters_len()
}

/// A set's heap bytes. Packed: its one block. A table: the boxed table,
/// the map's room (members as [`MapKey`]s: a block of their own past 22
/// bytes, estimated from the members' mean length).
pub fn set_heap(s: &SetValue) -> usize {
    match s.packed_bytes() {
        Some(block) => chunk(block),
        None => {
            let mean = s.payload_len() / s.len().max(1);
            let blocks = if mean > map_key::INLINE {
                s.payload_len() + s.len() * BLOCK_OVERHEAD
            } else {
                0
            };
            chunk(size_of::<crate::value::MemberMap>() + size_of::<usize>())
                + indexmap_bytes::<MapKey, Version>(s.capacity(), s.len())
                + blocks
        }
    }
}

/// A sorted set's heap bytes (inline in the entry as a hash or a set): in
/// the small form its one buffer, and the boxed struct only for a small
/// set with score states ([`ZSetValue::boxed_len`]); in the large form its
/// boxed structures, the member map's room, a block per member, and each
/// member's place in the order (its score and a second handle of its
/// name).
pub fn zset_heap(z: &ZSetValue) -> usize {
    let boxed = match z.boxed_len() {
        0 => 0,
        n => chunk(n),
    };
    let members = match z.packed_len() {
        Some(buf) => chunk(buf),
        None => {
            indexmap_bytes::<Bytes, ZMember>(z.capacity(), z.len())
                + z.payload_len()
                + z.len() * (BLOCK_OVERHEAD + size_of::<ZKey>())
        }
    };
    boxed + members + z.counters_len()
}

/// The heap bytes a value holds, by its form.
pub fn value_heap(value: &Value) -> usize {
    match value {
        Value::Str(b) => str_heap(b),
        Value::Counter(c) => counter_heap(c),
        Value::Hash(h) => hash_heap(h),
        Value::Set(s) => set_heap(s),
        Value::ZSet(z) => zset_heap(z),
        Value::List(l) => list_heap(l),
    }
}

/// A list's heap bytes: the boxed list and its elements' blocks (one
/// packed block, or a ring buffer and the elements past 30 bytes:
/// [`ListValue::heap_bytes`]).
pub fn list_heap(l: &ListValue) -> usize {
    chunk(size_of::<ListValue>()) + l.heap_bytes()
}

/// What an entry of a `key_len`-byte key owns beside its map slot: the
/// key's own block, its expiry index element, its value's blocks. The
/// partition keeps the sum over its keys ([`Entry::footprint`]).
pub fn entry_heap(key_len: usize, entry: &Entry) -> usize {
    let in_expiry_index = if entry.expire_at != 0 {
        // A B-tree's nodes are between half full and full: an element
        // takes about half its size again.
        size_of::<(u64, MapKey)>() * 3 / 2 + key_block(key_len)
    } else {
        0
    };
    key_block(key_len) + in_expiry_index + value_heap(&entry.value)
}

/// Bytes `key` and `entry` take in their partition, whose map holds `len`
/// keys with room for `capacity` (see the module docs).
pub fn entry_usage(
    key: &[u8],
    entry: &Entry,
    capacity: usize,
    len: usize,
    table_bytes: usize,
) -> usize {
    map_share(capacity, len, table_bytes) + entry_heap(key.len(), entry)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::HashValue;

    fn entry(value: Value, expire_at: u64) -> Entry {
        Entry::new(value, Version::ZERO, expire_at)
    }

    fn string(len: usize) -> Value {
        Value::str(Bytes::from(vec![b'x'; len]))
    }

    fn heap(value: Value) -> usize {
        entry_heap(1, &entry(value, 0))
    }

    #[test]
    fn a_string_costs_its_block_as_the_allocator_takes_it() {
        // Up to 30 bytes inline in the value: no block.
        assert_eq!(heap(string(0)), 0);
        assert_eq!(heap(string(30)), 0);
        assert_eq!(heap(string(31)), 48);
        assert_eq!(heap(string(1003)), chunk(1003));
        // A short key is inline in its map slot; a long one has a block.
        let long = [b'k'; map_key::INLINE + 1];
        let value = entry(string(3), 0);
        assert_eq!(entry_heap(long.len(), &value), entry_heap(3, &value) + 32);
    }

    #[test]
    fn the_map_is_shared_by_its_keys_at_its_load() {
        // Room for 1,024 entries of key and Entry; a table of 1,024
        // buckets of 4-byte positions and control bytes.
        let element = size_of::<MapKey>() + size_of::<Entry>();
        let table = 1024 * 4 + 1024 + 16;
        let map = chunk(1024 * element) + chunk(table);
        assert_eq!(entry_map_bytes(1024, 700, table), map);
        assert_eq!(map_share(1024, 1024, table), map / 1024);
        assert_eq!(map_share(1024, 512, table), map / 512);
        assert_eq!(entry_map_bytes(0, 0, 0), 0);
        // Room for 4,096 (a mapped block): only the pages of its entries.
        let table = 8192 * 4 + 8192 + 16;
        let mapped = (3690 * element).next_multiple_of(PAGE) + chunk(table);
        assert_eq!(entry_map_bytes(4096, 3690, table), mapped);
        let table = 1024 * 4 + 1024 + 16;
        let usage = entry_usage(b"key", &entry(string(16), 0), 1024, 700, table);
        assert_eq!(usage, map / 700);
        // The hash tables of hashes and sets: room for 3 and 7 is 4 and 8
        // buckets.
        assert_eq!(buckets(3), 4);
        assert_eq!(buckets(7), 8);
        assert_eq!(buckets(14), 16);
    }

    #[test]
    fn a_time_to_live_adds_its_expiry_index_element() {
        let plain = entry_heap(1, &entry(string(10), 0));
        let expiring = entry_heap(1, &entry(string(10), 1_000));
        assert_eq!(expiring - plain, size_of::<(u64, MapKey)>() * 3 / 2);
    }

    #[test]
    fn a_small_hash_costs_its_packed_block() {
        let mut h = HashValue::new();
        assert_eq!(heap(Value::Hash(h.clone())), 0);
        for i in 0..5u32 {
            h.set(
                Bytes::from(format!("field:{i}")),
                Bytes::from_static(b"v1"),
                Version::ZERO,
            );
        }
        // A mode byte, one version, then lengths, names and values.
        let block = 1 + 10 + 5 * (1 + 7 + 1 + 2);
        assert_eq!(h.packed_bytes(), Some(block));
        assert_eq!(heap(Value::Hash(h)), chunk(block));
    }

    #[test]
    fn a_large_hash_costs_its_payload_and_every_field_slot() {
        let mut h = HashValue::new();
        for i in 0..200u32 {
            let name = Bytes::from(format!("field:{i}"));
            h.set(name, Bytes::from(vec![b'v'; 20]), Version::ZERO);
        }
        assert!(!h.is_packed());
        assert!(h.capacity() >= 200);
        let full = heap(Value::Hash(h.clone()));
        assert!(full > h.payload_len() + indexmap_bytes::<Bytes, Field>(h.capacity(), h.len()));
        assert!(full > 200 * (20 + 7) + 200 * map_element::<Bytes, Field>());
    }

    #[test]
    fn a_small_sorted_set_costs_its_one_buffer() {
        let mut small = ZSetValue::new();
        let mut large = ZSetValue::new();
        for i in 0..129u32 {
            large.insert(format!("member:{i}").as_bytes(), i as f64, Version::ZERO);
        }
        for i in 0..10u32 {
            small.insert(format!("member:{i}").as_bytes(), i as f64, Version::ZERO);
        }
        for i in 10..129u32 {
            large.remove(format!("member:{i}").as_bytes());
        }
        assert!(small.is_small() && !large.is_small() && small == large);
        let usage = |z: &ZSetValue| heap(Value::ZSet(z.clone()));
        // Inline in the entry: nothing boxed.
        assert_eq!(usage(&ZSetValue::new()), 0);
        // Per member: length, bytes and a one-byte score.
        assert_eq!(small.packed_len(), Some(10 * (1 + 8 + 1)));
        assert_eq!(usage(&small), chunk(10 * (1 + 8 + 1)));
        assert!(usage(&large) > usage(&small) + 10 * 64, "{}", usage(&large));
    }
}
