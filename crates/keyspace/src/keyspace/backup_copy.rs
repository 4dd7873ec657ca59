//! Copies of partitions for backups to storage, each consistent at one
//! seq: taken under the partition lock, so the copy holds every change up
//! to that seq and none after it.
//!
//! A full copy holds every live key. An incremental copy, from a parent
//! backup at `(id, seq)`, holds the keys changed since (as they are now) and
//! the names of those that are gone; it falls back to a full copy when the
//! partition's changed-keys set is not anchored at that parent (see
//! [`crate::changed_keys`]). Either way the copy re-anchors the set, and
//! the replication sink tells the partition's backups to do the same.

use bytes::Bytes;

use super::Keyspace;
use crate::change::{Change, ChangeKind};

/// One partition as a backup layer holds it.
#[derive(Debug, Default)]
pub struct PartitionCopy {
    pub partition: usize,
    /// The last seq the copy holds (0: nothing was ever logged).
    pub seq: u64,
    /// Every live key (not only changes since a parent).
    pub full: bool,
    /// Full values of the keys in the copy.
    pub entries: Vec<Change>,
    /// Keys changed since the parent that no longer exist.
    pub deleted: Vec<Bytes>,
}

impl Keyspace {
    /// Copies partition `p` for backup `id`; `parent` is the previous
    /// backup's `(id, seq)` of this partition for an incremental copy.
    /// Keys whose time ran out count as gone.
    pub fn backup_partition(
        &self,
        p: usize,
        id: &str,
        parent: Option<(&str, u64)>,
    ) -> PartitionCopy {
        let now = self.now_ms();
        let mut part = self.parts[p].lock();
        let seq = part.log.next_seq() - 1;
        let live = |key: &[u8], part: &crate::partition::Partition| {
            part.get(key)
                .filter(|e| !e.is_expired(now))
                .map(|e| Change {
                    key: Bytes::copy_from_slice(key),
                    version: e.version,
                    kind: ChangeKind::Full {
                        value: e.value.clone(),
                        expire_at: e.expire_at,
                    },
                })
        };
        let mut copy = PartitionCopy {
            partition: p,
            seq,
            ..Default::default()
        };
        match parent.and_then(|(pid, pseq)| part.log.changed.since(pid, pseq)) {
            Some(keys) => {
                for key in keys {
                    match live(key, &part) {
                        Some(c) => copy.entries.push(c),
                        None => copy.deleted.push(key.clone()),
                    }
                }
            }
            None => {
                copy.full = true;
                copy.entries
                    .extend(part.iter().filter_map(|(key, _)| live(key, &part)));
            }
        }
        part.log.changed.anchor(id, seq);
        if let Some(sink) = self.sink.get() {
            sink.backup_taken(p, seq, id);
        }
        copy
    }

    /// A backup of partition `p` heard from its primary that backup `id`
    /// holds it up to `seq`. Anchors its changed-keys set there when its
    /// copy is exactly at that seq; otherwise continuity is not known, and
    /// the set is dropped.
    pub fn backup_taken_replica(&self, p: usize, seq: u64, id: &str) {
        let Some(part) = self.parts.get(p) else {
            return;
        };
        let mut part = part.lock();
        if part.replica && part.log.next_seq() == seq + 1 {
            part.log.changed.anchor(id, seq);
        } else {
            part.log.changed.drop_anchor();
        }
    }
}
