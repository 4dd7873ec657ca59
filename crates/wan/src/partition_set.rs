//! A set of partition numbers as one bit each, for a publisher's own
//! bookkeeping (not shared; [`keyspace::PartitionBits`] is the atomic
//! kind writers mark). With 16,384 partitions a batch names ~750 of them,
//! and a tree set cost an allocation and a few cache lines per insert;
//! this costs a bit in 2 KiB.

pub struct PartitionSet {
    words: Vec<u64>,
    partitions: usize,
}

impl PartitionSet {
    /// An empty set of partitions `0..partitions`.
    pub fn new(partitions: usize) -> Self {
        PartitionSet { words: vec![0; partitions.div_ceil(64)], partitions }
    }

    /// Adds `p`; a number past the set's partitions is ignored.
    pub fn insert(&mut self, p: usize) {
        if p >= self.partitions {
            return;
        }
        if let Some(w) = self.words.get_mut(p / 64) {
            *w |= 1 << (p % 64);
        }
    }

    pub fn remove(&mut self, p: usize) {
        if let Some(w) = self.words.get_mut(p / 64) {
            *w &= !(1 << (p % 64));
        }
    }

    pub fn clear(&mut self) {
        self.words.fill(0);
    }

    /// The members, ascending.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &w)| {
            let mut bits = w;
            std::iter::from_fn(move || {
                (bits != 0).then(|| {
                    let b = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    i * 64 + b
                })
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        /// Behaves as a BTreeSet of the partitions for any sequence of
        /// inserts, removes and clears (numbers past the end ignored).
        #[test]
        fn behaves_as_an_ordered_set(parts in 1usize..300, ops in prop::collection::vec((0u8..3, 0usize..320), 0..200)) {
            let mut set = PartitionSet::new(parts);
            let mut model = BTreeSet::new();
            for (op, p) in ops {
                match op {
                    0 => {
                        set.insert(p);
                        if p < parts {
                            model.insert(p);
                        }
                    }
                    1 => {
                        set.remove(p);
                        model.remove(&p);
                    }
                    _ => {
                        set.clear();
                        model.clear();
                    }
                }
                prop_assert_eq!(set.iter().collect::<Vec<_>>(), model.iter().copied().collect::<Vec<_>>());
            }
        }
    }
}
