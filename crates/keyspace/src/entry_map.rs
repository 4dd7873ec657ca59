//! A partition's keys and entries: a dense vector of `(key, entry)` and a
//! hash table of positions into it, as an `IndexMap` is built, with two
//! savings that matter at hundreds of thousands of keys per node:
//!
//! - The table holds 4-byte positions and no hash beside each entry (an
//!   `IndexMap` keeps an 8-byte hash per entry and 8-byte positions): a
//!   key's hash is computed again when the table grows or an entry moves,
//!   cheap for keys mostly held inline ([`MapKey`]).
//! - The vector grows as a `Vec` does (doubling), not to the table's
//!   capacity. Growing by a quarter instead left it fuller but the heap
//!   full of holes (271 partitions' vectors grow in step; the freed old
//!   blocks are not returned): 200,000 small strings cost 147 bytes per key
//!   against 133 doubling (docs/benchmarks.md).
//!
//! Positions are as `IndexMap`'s: dense, `0..len`; removing swaps the last
//! entry into the hole ([`EntryMap::swap_remove`]). A position is valid
//! until the map changes.

use hashbrown::HashTable;

use crate::map_key::MapKey;
use crate::value::Entry;

/// See the module docs.
#[derive(Default)]
pub struct EntryMap {
    table: HashTable<u32>,
    entries: Vec<(MapKey, Entry)>,
    hasher: ahash::RandomState,
}

/// Where a key is, or the hash it will be stored under.
pub enum Found {
    At(usize),
    Absent(u64),
}

impl EntryMap {
    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Where `key` is, or the hash to insert it with ([`EntryMap::insert_absent`]).
    pub fn find(&self, key: &[u8]) -> Found {
        let hash = self.hash(key);
        let entries = &self.entries;
        match self
            .table
            .find(hash, |&i| entries[i as usize].0.as_slice() == key)
        {
            Some(&i) => Found::At(i as usize),
            None => Found::Absent(hash),
        }
    }

    pub fn get_index_of(&self, key: &[u8]) -> Option<usize> {
        match self.find(key) {
            Found::At(i) => Some(i),
            Found::Absent(_) => None,
        }
    }

    pub fn get(&self, key: &[u8]) -> Option<&Entry> {
        self.get_index_of(key).map(|i| &self.entries[i].1)
    }

    pub fn get_index(&self, i: usize) -> Option<(&MapKey, &Entry)> {
        self.entries.get(i).map(|(k, e)| (k, e))
    }

    pub fn get_index_mut(&mut self, i: usize) -> Option<(&MapKey, &mut Entry)> {
        self.entries.get_mut(i).map(|(k, e)| (&*k, e))
    }

    pub fn iter(&self) -> impl Iterator<Item = (&MapKey, &Entry)> {
        self.entries.iter().map(|(k, e)| (k, e))
    }

    /// Stores a key [`EntryMap::find`] said is absent, under the hash it
    /// gave; returns its position.
    pub fn insert_absent(&mut self, hash: u64, key: MapKey, entry: Entry) -> usize {
        let i = self.entries.len();
        assert!(
            i < u32::MAX as usize,
            "a partition holds fewer than 2^32 keys"
        );
        self.entries.push((key, entry));
        let (entries, hasher) = (&self.entries, &self.hasher);
        self.table.insert_unique(hash, i as u32, |&j| {
            hasher.hash_one(entries[j as usize].0.as_slice())
        });
        i
    }

    /// Removes `key`, moving the last entry into its place.
    pub fn swap_remove(&mut self, key: &[u8]) -> Option<(MapKey, Entry)> {
        let hash = self.hash(key);
        let entries = &self.entries;
        let found = self
            .table
            .find_entry(hash, |&i| entries[i as usize].0.as_slice() == key)
            .ok()?;
        let (i, _) = found.remove();
        let i = i as usize;
        let last = self.entries.len() - 1;
        if i != last {
            // The last entry moves to `i`: its position in the table too.
            let moved = self.hash(self.entries[last].0.as_slice());
            let slot = self
                .table
                .find_mut(moved, |&j| j as usize == last)
                .expect("every entry has a position in the table");
            *slot = i as u32;
        }
        let removed = self.entries.swap_remove(i);
        self.shrink_if_sparse();
        Some(removed)
    }

    /// Gives back room once at most a quarter of it is used (deletes and
    /// evictions free memory, not only FLUSHALL).
    fn shrink_if_sparse(&mut self) {
        let (len, cap) = (self.entries.len(), self.entries.capacity());
        if cap >= 64 && len <= cap / 4 {
            self.entries.shrink_to(len + len / 4);
            let (entries, hasher) = (&self.entries, &self.hasher);
            self.table
                .shrink_to(len, |&j| hasher.hash_one(entries[j as usize].0.as_slice()));
        }
    }

    /// Every key and entry, the map left empty with no room kept.
    pub fn take(&mut self) -> Vec<(MapKey, Entry)> {
        self.table = HashTable::new();
        std::mem::take(&mut self.entries)
    }

    /// Room of the vector, in entries.
    pub fn capacity(&self) -> usize {
        self.entries.capacity()
    }

    /// Bytes of the table's one block (positions and control bytes).
    pub fn table_bytes(&self) -> usize {
        self.table.allocation_size()
    }

    /// Heap bytes the map's own structures take (its vector and table,
    /// not what entries point to).
    pub fn heap_bytes(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<(MapKey, Entry)>()
            + self.table.allocation_size()
    }
}

impl std::fmt::Debug for EntryMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Value;
    use crate::Version;

    fn entry(n: u64) -> Entry {
        Entry::new(Value::str(n.to_string().into_bytes()), Version::ZERO, n)
    }

    fn put(m: &mut EntryMap, key: &[u8], e: Entry) {
        match m.find(key) {
            Found::At(i) => *m.get_index_mut(i).unwrap().1 = e,
            Found::Absent(h) => {
                m.insert_absent(h, MapKey::new(key), e);
            }
        }
    }

    #[test]
    fn behaves_as_a_map_through_inserts_removes_and_shrinks() {
        let mut m = EntryMap::default();
        let mut model = std::collections::HashMap::new();
        let mut rng = 12345u64;
        for step in 0..20_000u64 {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let k = format!("key:{}", (rng >> 33) % 3000);
            // Long keys too (held on the heap).
            let k = if step.is_multiple_of(7) {
                k.repeat(4)
            } else {
                k
            };
            if (rng >> 20).is_multiple_of(3) {
                assert_eq!(
                    m.swap_remove(k.as_bytes()).map(|(_, e)| e.expire_at),
                    model.remove(&k)
                );
            } else {
                put(&mut m, k.as_bytes(), entry(step));
                model.insert(k, step);
            }
            if step.is_multiple_of(1000) {
                // Drop most keys: the map shrinks and stays right.
                let keys: Vec<_> = model.keys().cloned().collect();
                for k in keys.iter().skip(10) {
                    m.swap_remove(k.as_bytes()).unwrap();
                    model.remove(k);
                }
            }
            assert_eq!(m.len(), model.len());
        }
        for (k, v) in &model {
            let i = m.get_index_of(k.as_bytes()).expect("held");
            let (key, e) = m.get_index(i).unwrap();
            assert_eq!((key.as_slice(), e.expire_at), (k.as_bytes(), *v));
        }
        assert_eq!(m.iter().count(), model.len());
        let all = m.take();
        assert_eq!(all.len(), model.len());
        assert!(m.is_empty() && m.heap_bytes() == 0);
    }

    #[test]
    fn an_entry_costs_its_slot_and_no_hash() {
        let mut m = EntryMap::default();
        for n in 0..10_000u64 {
            put(&mut m, format!("k{n}").as_bytes(), entry(n));
        }
        let slot = std::mem::size_of::<(MapKey, Entry)>();
        // No hash per entry and 4-byte positions: the vector (at most half
        // empty) and a table of 16,384 buckets of 5 bytes.
        assert_eq!(slot, 88);
        assert!(
            m.heap_bytes() <= 16_384 * slot + 16_384 * 5 + 64,
            "{}",
            m.heap_bytes()
        );
    }
}
