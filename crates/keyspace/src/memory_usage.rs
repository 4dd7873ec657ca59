//! What one key takes in memory in its partition, for `MEMORY USAGE`: an
//! estimate computed from the sizes of the structures that hold it, not a
//! measurement (a later change makes memory accounting exact).
//!
//! It counts, as the allocator is asked for them (the bytes
//! `used_memory` counts, without the allocator's own rounding):
//! - the key's slot in the partition's map (`EntryMap`: one element of the
//!   map's entries vector, which holds the key's hash, the key (a
//!   [`MapKey`]: its bytes inline up to 22, else in a block of their own,
//!   counted) and the [`Entry`] inline, whose version and expiry are
//!   fields; and one slot of the map's index table);
//! - its element in the partition's expiry index, when it has a time to live;
//! - a string's bytes; for every other value but a hash, a set or a
//!   sorted set (inline in the [`Entry`]), its boxed struct (the map's [`Entry`] holds a
//!   pointer to it);
//! - a small hash's packed block (its fields' names, values, lengths and
//!   versions); a large hash's table (boxed: the map and the payload
//!   count), field names and values, and for every field the map has room
//!   for (its capacity, used or not) an element of its entries vector (hash,
//!   name handle, value handle, field version) and a slot of its index;
//!   a small set's packed block likewise (its members' bytes, lengths and
//!   versions), a large set's table likewise (a [`MapKey`] and a version
//!   per element, the member's bytes only past 22);
//!   a sorted set in the small form, its one buffer (members, scores,
//!   versions); in the large form, as a set's table (a `Bytes` handle per
//!   member, its bytes, score and version) plus, per member, its place in
//!   the order.
//!
//! It does not count: the spare room of the partition's own map (shared by
//! all its keys), the shared headers `Bytes` allocate when a buffer is
//! shared (a key also held by the expiry index or the log, the fields of
//! a large hash written by one HSET packed into one buffer), copies of the key or value held by the
//! partition log for replication and WAN, and tombstones.

use std::mem::{size_of, size_of_val};

use bytes::Bytes;

use crate::map_key::{self, MapKey};
use crate::value::{Entry, Field, FieldMap, MemberMap, Value, ZKey, ZMember};
use crate::version::Version;

/// One slot of a hash table's index (`hashbrown`, as `indexmap` uses it):
/// the entry's position and a control byte. The table keeps some slots
/// empty (at most 7/8 are used), counted here as an eighth more.
const INDEX_SLOT: usize = (size_of::<usize>() + 1) * 8 / 7;

/// One element of an `indexmap` entries vector: the hash, then key and value.
const fn map_element<K, V>() -> usize {
    size_of::<usize>() + size_of::<K>() + size_of::<V>()
}

/// The heap block a [`MapKey`] of these bytes has: none up to 22 bytes.
fn block_of(bytes: &[u8]) -> usize {
    if bytes.len() > map_key::INLINE {
        bytes.len()
    } else {
        0
    }
}

/// Bytes `key` and `entry` take in their partition (see the module docs
/// for what is counted).
pub fn entry_usage(key: &[u8], entry: &Entry) -> usize {
    let key_block = block_of(key);
    let in_map = key_block + map_element::<MapKey, Entry>() + INDEX_SLOT;
    let in_expiry_index = if entry.expire_at != 0 {
        size_of::<(u64, MapKey)>() + key_block
    } else {
        0
    };
    let value = match &entry.value {
        Value::Str(b) => b.len(),
        // The text and the state kept to merge it across sites.
        Value::Counter(c) => size_of_val(&**c) + c.text().len() + c.state_len(),
        Value::Hash(h) => {
            let fields = match h.packed_bytes() {
                Some(block) => block,
                None => {
                    size_of::<FieldMap>()
                        + size_of::<usize>()
                        + h.payload_len()
                        + h.capacity() * (map_element::<Bytes, Field>() + INDEX_SLOT)
                }
            };
            fields + h.counters_len()
        }
        // Packed: the block. In a table, members as keys are held: inline
        // up to 22 bytes.
        Value::Set(s) => match s.packed_bytes() {
            Some(block) => block,
            None => {
                size_of::<MemberMap>()
                    + size_of::<usize>()
                    + s.members().map(block_of).sum::<usize>()
                    + s.capacity() * (map_element::<MapKey, Version>() + INDEX_SLOT)
            }
        },
        // The small form: its one buffer. The large form: the member map
        // as a set's, plus each member's place in the order (its score and
        // a second handle of its name).
        // Inline in the entry as a hash or a set; boxed: the large form's
        // struct, or the small form's with score states.
        Value::ZSet(z) => {
            z.boxed_len()
                + z.counters_len()
                + match z.packed_len() {
                    Some(buf) => buf,
                    None => {
                        z.payload_len()
                            + z.capacity() * (map_element::<Bytes, ZMember>() + INDEX_SLOT)
                            + z.len() * size_of::<ZKey>()
                    }
                }
        }
    };
    in_map + in_expiry_index + value
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::HashValue;

    fn entry(value: Value, expire_at: u64) -> Entry {
        Entry::new(value, Version::ZERO, expire_at)
    }

    fn string(len: usize) -> Value {
        Value::Str(Bytes::from(vec![b'x'; len]))
    }

    #[test]
    fn a_string_costs_its_bytes_over_a_fixed_overhead() {
        let small = entry_usage(b"key", &entry(string(3), 0));
        let big = entry_usage(b"key", &entry(string(1003), 0));
        assert_eq!(big - small, 1000);
        // A short key is inline in its map slot; a long one counts byte for
        // byte.
        assert_eq!(entry_usage(b"key!", &entry(string(3), 0)), small);
        let long = [b'k'; map_key::INLINE + 1];
        assert_eq!(entry_usage(&long, &entry(string(3), 0)), small + long.len());
        // The entry, its map slot and the key's handle: more than the bytes.
        assert!(small > size_of::<Entry>() + 6, "{small}");
        assert!(small < 512, "{small}");
    }

    #[test]
    fn a_time_to_live_adds_its_expiry_index_element() {
        let plain = entry_usage(b"k", &entry(string(10), 0));
        let expiring = entry_usage(b"k", &entry(string(10), 1_000));
        assert_eq!(expiring - plain, size_of::<(u64, MapKey)>());
    }

    #[test]
    fn a_small_hash_costs_its_packed_block() {
        let mut h = HashValue::new();
        let empty = entry_usage(b"h", &entry(Value::Hash(h.clone()), 0));
        for i in 0..5u32 {
            h.set(
                Bytes::from(format!("field:{i}")),
                Bytes::from_static(b"v1"),
                Version::ZERO,
            );
        }
        let full = entry_usage(b"h", &entry(Value::Hash(h.clone()), 0));
        // A mode byte, one version, then lengths, names and values.
        assert_eq!(full - empty, 1 + 10 + 5 * (1 + 7 + 1 + 2));
    }

    #[test]
    fn a_large_hash_costs_its_payload_and_every_field_slot() {
        let mut h = HashValue::new();
        let empty = entry_usage(b"h", &entry(Value::Hash(h.clone()), 0));
        for i in 0..200u32 {
            let name = Bytes::from(format!("field:{i}"));
            h.set(name, Bytes::from(vec![b'v'; 20]), Version::ZERO);
        }
        assert!(!h.is_packed());
        let full = entry_usage(b"h", &entry(Value::Hash(h.clone()), 0));
        let per_field = map_element::<Bytes, Field>() + INDEX_SLOT;
        let table = size_of::<FieldMap>() + size_of::<usize>();
        assert_eq!(
            full - empty,
            table + h.payload_len() + h.capacity() * per_field
        );
        assert!(h.capacity() >= 200);
        assert!(full > 200 * (20 + 7) + 200 * per_field);
    }

    #[test]
    fn a_small_sorted_set_costs_its_one_buffer() {
        use crate::value::ZSetValue;
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
        let usage = |z: &ZSetValue| entry_usage(b"z", &entry(Value::ZSet(z.clone()), 0));
        let empty = usage(&ZSetValue::new());
        // Per member: length, bytes and a one-byte score.
        assert_eq!(usage(&small) - empty, 10 * (1 + 8 + 1));
        assert!(usage(&large) > usage(&small) + 10 * 64, "{}", usage(&large));
    }
}
