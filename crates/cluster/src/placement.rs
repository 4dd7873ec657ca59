//! The partition table: which member is primary for each partition and
//! which hold its replicas. Placement is a pure function of the ordered
//! member list, so every node computes the same table without talking:
//! primaries in contiguous blocks (few slot ranges for clients to cache),
//! replicas on the next members around the ring (always distinct nodes).
//!
//! The table carries an epoch; later changes (failover, migration) come
//! with a higher epoch, which fences anything acting on an older table.

use keyspace::slot::SLOTS;

/// Member positions held inline: every write reads its partition's
/// replicas, and at 16,384 partitions a list on the heap was one more cache
/// miss per write.
pub type Members = smallvec::SmallVec<[usize; 2]>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionOwners {
    pub primary: usize,
    pub replicas: Members,
    /// The replicas a synchronous write waits for (a subset of `replicas`).
    pub in_sync: Members,
    /// Bumped by the metadata group whenever this partition's owners change.
    pub epoch: u64,
    /// A planned handover to this in-sync replica (see `handover`).
    pub moving_to: Option<usize>,
}

/// The current table, shared by the cluster and its replicator: readers
/// `load()` it without writing any shared cache line.
pub type SharedTable = std::sync::Arc<arc_swap::ArcSwapOption<PartitionTable>>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionTable {
    pub epoch: u64,
    pub partitions: Vec<PartitionOwners>,
    /// Each partition's primary again, two bytes each (32 KiB at 16,384
    /// partitions, which stay in cache): what routing a command reads,
    /// where `partitions` takes 80 bytes a partition.
    primaries: Vec<u16>,
}

impl PartitionTable {
    pub fn new(epoch: u64, partitions: Vec<PartitionOwners>) -> PartitionTable {
        let primaries = partitions
            .iter()
            .map(|o| o.primary.min(u16::MAX as usize) as u16)
            .collect();
        PartitionTable {
            epoch,
            partitions,
            primaries,
        }
    }

    /// The member position of `partition`'s primary.
    pub fn primary(&self, partition: usize) -> usize {
        self.primaries[partition] as usize
    }

    /// Spreads `partitions` over `members` members with `replicas` copies.
    pub fn place(partitions: u16, members: usize, replicas: usize) -> PartitionTable {
        let members = members.max(1);
        let replicas = replicas.min(members - 1);
        let parts = partitions as usize;
        let table = (0..parts)
            .map(|p| {
                let primary = p * members / parts;
                let replicas: Members = (1..=replicas).map(|k| (primary + k) % members).collect();
                PartitionOwners {
                    primary,
                    in_sync: replicas.clone(),
                    replicas,
                    epoch: 1,
                    moving_to: None,
                }
            })
            .collect();
        PartitionTable::new(1, table)
    }

    pub fn owners(&self, partition: usize) -> &PartitionOwners {
        &self.partitions[partition]
    }

    /// First and last slot of a partition (inverse of `slot_partition`).
    pub fn slot_range(partition: usize, partitions: u16) -> (u16, u16) {
        let n = partitions as u32;
        let first = (partition as u32 * SLOTS as u32).div_ceil(n);
        let last = ((partition as u32 + 1) * SLOTS as u32).div_ceil(n) - 1;
        (first as u16, last as u16)
    }

    /// Slot ranges with the same owners merged: (first, last, owners).
    pub fn ranges(&self) -> Vec<(u16, u16, &PartitionOwners)> {
        let n = self.partitions.len() as u16;
        let mut out: Vec<(u16, u16, &PartitionOwners)> = Vec::new();
        for (p, owners) in self.partitions.iter().enumerate() {
            let (first, last) = Self::slot_range(p, n);
            match out.last_mut() {
                Some(r) if r.2 == owners && r.1 + 1 == first => r.1 = last,
                _ => out.push((first, last, owners)),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyspace::slot::slot_partition;

    #[test]
    fn slot_ranges_invert_slot_partition() {
        for parts in [1u16, 3, 271, 16384] {
            for p in 0..parts as usize {
                let (first, last) = PartitionTable::slot_range(p, parts);
                assert_eq!(slot_partition(first, parts) as usize, p);
                assert_eq!(slot_partition(last, parts) as usize, p);
                if first > 0 {
                    assert_eq!(slot_partition(first - 1, parts) as usize, p - 1);
                }
            }
        }
    }

    #[test]
    fn copies_are_on_distinct_nodes_and_primaries_spread_evenly() {
        let t = PartitionTable::place(271, 3, 1);
        let mut per_node = [0usize; 3];
        for o in &t.partitions {
            per_node[o.primary] += 1;
            assert_eq!(o.replicas.len(), 1);
            assert_ne!(o.replicas[0], o.primary);
        }
        assert!(
            per_node.iter().all(|&n| (90..=91).contains(&n)),
            "{per_node:?}"
        );
        assert_eq!(t.ranges().len(), 3);
        assert_eq!(
            PartitionTable::place(271, 1, 1).partitions[0]
                .replicas
                .len(),
            0
        );
    }
}
