//! The replica side: applying the batches a primary sends.
//!
//! A replica applies each change at the primary's seq through the mirror
//! path (`Keyspace::apply_replicated`), so its log is the primary's, and
//! answers every batch with its acks ([`Ack`]): per partition the last seq
//! it holds, snapshots loaded or refused, and copies that need a snapshot
//! (a gap, or a history that diverged from the sender's).
//!
//! It takes nothing from a primary that its own, newer table has replaced
//! (fencing, [`Entry::TableEpoch`]): nothing applied, held or acknowledged.
//! Such a sender has not learned yet that it lost the partition (it was
//! cut off, or its metadata lags); a sender with the same or a newer table
//! is trusted, the table it acted on having been committed.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use keyspace::{codec, Change, HeldChange, HeldChanges, Pinned, ReplicaError, Version};
use parking_lot::Mutex;
use smallvec::SmallVec;

use super::stream::{Ack, BatchError, Entries, Entry};
use super::{Replicator, WanWatermarks};
use crate::placement::PartitionTable;

/// In `loading`: a catch-up from the primary's log (no snapshot's next seq
/// is this).
const CATCHING_UP: u64 = u64::MAX;

/// The replica side's state.
#[derive(Default)]
pub(super) struct Replica {
    /// Snapshots being loaded, by partition: (next seq, entries received
    /// since the begin entry), or ([`CATCHING_UP`], 0).
    loading: Mutex<HashMap<u16, (u64, u64)>>,
    wan: OnceLock<Arc<dyn WanWatermarks>>,
}

impl Replicator {
    /// Installs the receiver of shared WAN watermarks; first call wins.
    pub fn set_wan_watermarks(&self, w: Arc<dyn WanWatermarks>) {
        let _ = self.replica.wan.set(w);
    }

    /// Applies a batch from site member `from`, our primary for the
    /// partitions in it; returns the acks.
    pub fn apply_batch(&self, batch: Bytes, from: usize) -> Result<Vec<Ack>, BatchError> {
        self.apply_received(batch, None, from)
    }

    /// [`Self::apply_batch`] for a batch read into the buffer `pin`
    /// counts. With WAN replication the batch is held first
    /// (`Keyspace::hold_received`): the replica's logs store nothing, and a
    /// copy promoted while the batch is being applied finds in it the
    /// changes it applied.
    pub fn apply_received(
        &self,
        batch: Bytes,
        pin: Option<Arc<Pinned>>,
        from: usize,
    ) -> Result<Vec<Ack>, BatchError> {
        let table = self.table.load();
        let table = table.as_ref();
        if self.ks.holds_received() {
            let held = held_changes(&batch, |p, epoch| stale_sender(table, p, from, epoch));
            self.ks.hold_received(batch.clone(), held, pin);
        }
        // The sender's table epoch, from the batch's table epoch entries.
        let mut sender_epoch = 0;
        // Partitions whose entries came from a replaced primary (refused).
        let mut stale: SmallVec<[u16; 2]> = SmallVec::new();
        let sender = from;
        let from = from as u16;
        // (partition, seq) per change applied, then the last per partition:
        // no map per batch (a batch mostly holds distinct partitions).
        let mut applied: Vec<(u16, u64)> = Vec::new();
        // Snapshots loaded or refused.
        let mut ends: Vec<Ack> = Vec::new();
        let mut gaps: SmallVec<[u16; 2]> = SmallVec::new();
        // Partitions this node leads now: what a stale primary sent of
        // them was held above and is let go below.
        let mut led: SmallVec<[usize; 2]> = SmallVec::new();
        let mut entries = Entries::new(&batch);
        while let Some(entry) = entries.next() {
            let entry = entry?;
            let p = entry.partition();
            if p >= self.ks.partitions() {
                return Err(BatchError::Partition(p));
            }
            match entry {
                Entry::TableEpoch { epoch } => sender_epoch = epoch,
                entry if stale_sender(table, p, sender, sender_epoch) => {
                    if !stale.contains(&p) {
                        tracing::warn!(
                            partition = p,
                            sender,
                            sender_epoch,
                            "replicated change refused: it comes from a primary this node's newer table replaced"
                        );
                        stale.push(p);
                    }
                    if let Entry::SnapshotEnd { id, .. } = entry {
                        ends.push(Ack::SnapshotRefused { partition: p, id });
                    }
                }
                Entry::WanApplied { seq, target, .. } => {
                    if let (Ok(target), Some(w)) =
                        (std::str::from_utf8(target), self.replica.wan.get())
                    {
                        w.applied(target, p as usize, seq);
                    }
                }
                Entry::TombstonesSettled { hlc, .. } => {
                    self.ks.settle_tombstones(p as usize, hlc);
                }
                Entry::BackupTaken { seq, id, .. } => {
                    if let Ok(id) = std::str::from_utf8(id) {
                        self.ks.backup_taken_replica(p as usize, seq, id);
                    }
                }
                Entry::SnapshotBegin { next, settled, .. } => {
                    self.begin_snapshot(p, (next, settled), from)
                }
                Entry::CatchUpBegin {
                    next, hlc, site, ..
                } => self.begin_catch_up(p, next, Version { hlc, site }, from),
                Entry::SnapshotEnd {
                    next,
                    id,
                    entries: total,
                    ..
                } => {
                    let loaded = self.end_snapshot(p, next, total);
                    if loaded {
                        applied.push((p, next - 1));
                        ends.push(Ack::SnapshotLoaded { partition: p, id });
                    } else {
                        ends.push(Ack::SnapshotRefused { partition: p, id });
                    }
                }
                Entry::SnapshotData { change: body, .. } => {
                    let change = self.decode_change(p, body)?;
                    if let Some((_, n)) = self.replica.loading.lock().get_mut(&p) {
                        *n += 1;
                    }
                    if let Err(e) = self.ks.load_replica_entry(change, body) {
                        tracing::error!(partition = p, "snapshot entry refused: {e}");
                    }
                }
                Entry::Change {
                    seq, change: body, ..
                } => {
                    let change = self.decode_change(p, body)?;
                    if let Some(next) = entries.next_partition() {
                        self.ks.prefetch_partition(next as usize);
                    }
                    match self.ks.apply_replicated(seq, change, body, from) {
                        Ok(()) => applied.push((p, seq)),
                        Err(e @ (ReplicaError::Gap { .. } | ReplicaError::Diverged { .. })) => {
                            if !gaps.contains(&p) {
                                tracing::warn!(
                                    partition = p,
                                    "{e}: asking the primary for a snapshot"
                                );
                                gaps.push(p);
                            }
                        }
                        Err(ReplicaError::NotReplica) => {
                            if !led.contains(&(p as usize)) {
                                tracing::warn!(
                                    partition = p,
                                    seq,
                                    "replicated change refused: this node leads the partition now"
                                );
                                led.push(p as usize);
                            }
                        }
                        Err(e) => {
                            tracing::error!(partition = p, seq, "replicated change refused: {e}")
                        }
                    }
                }
            }
        }
        self.ks.forget_received(&led);
        // Seq acks first (the last per partition), then snapshots loaded
        // or refused, then copies that need a snapshot.
        applied.sort_by_key(|&(p, _)| p);
        applied.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                kept.1 = later.1;
            }
            same
        });
        let applied = applied
            .into_iter()
            .map(|(partition, seq)| Ack::Applied { partition, seq });
        let needed = gaps
            .into_iter()
            .map(|partition| Ack::SnapshotNeeded { partition });
        Ok(applied.chain(ends).chain(needed).collect())
    }

    /// A change's keyspace encoding, which must be all of `body` and be of
    /// a key in partition `p`.
    fn decode_change(&self, p: u16, body: &[u8]) -> Result<Change, BatchError> {
        let (change, used) = codec::decode(body)?;
        if used != body.len() {
            return Err(BatchError::Truncated);
        }
        if self.ks.partition_of(&change.key) != p as usize {
            return Err(BatchError::Partition(p));
        }
        Ok(change)
    }

    /// A snapshot of partition `p` begins: the copy is emptied and
    /// continues at the primary's seq `next` (refused, and logged, where
    /// the partition is not a replica copy).
    fn begin_snapshot(&self, p: u16, (next, settled): (u64, u64), from: u16) {
        match self.ks.reset_replica(p as usize, (next, settled), from) {
            Ok(()) => {
                self.replica.loading.lock().insert(p, (next, 0));
            }
            Err(e) => {
                self.replica.loading.lock().remove(&p);
                tracing::error!(partition = p, "snapshot refused: {e}");
            }
        }
    }

    /// Partition `p`'s copy, as loaded from this node's disk, is brought
    /// up to date from the primary's log: changes from `next` on follow.
    /// Refused (the copy changed, or is not a replica's) leaves nothing
    /// loading, so the end is refused and the primary sends a snapshot.
    fn begin_catch_up(&self, p: u16, next: u64, version: Version, from: u16) {
        match self.ks.begin_catch_up(p as usize, next, version, from) {
            Ok(()) => {
                self.replica.loading.lock().insert(p, (CATCHING_UP, 0));
            }
            Err(e) => {
                self.replica.loading.lock().remove(&p);
                tracing::warn!(
                    partition = p,
                    "catch-up from the primary's log refused: {e}"
                );
            }
        }
    }

    /// A snapshot of partition `p` at `next` with `total` entries ends:
    /// whether it was loaded whole. Only if its begin emptied a replica
    /// copy here and set its log to `next` (changes past the snapshot's
    /// point come after this end), and every entry between arrived (a
    /// connection that broke mid-snapshot loses the chunks in flight).
    fn end_snapshot(&self, p: u16, next: u64, total: u64) -> bool {
        let counted = match self.replica.loading.lock().remove(&p) {
            // A catch-up: every change up to `next` was applied (below).
            Some((CATCHING_UP, 0)) => total == 0,
            loading => loading == Some((next, total)),
        };
        let loaded = counted
            && self.ks.with_partition(p as usize, |part, _| {
                part.replica && part.log.next_seq() == next
            });
        if !loaded {
            tracing::warn!(
                partition = p,
                "snapshot not loaded (not a replica copy here yet, or entries missing): asking for it again"
            );
        }
        loaded
    }
}

/// Where the changes of a batch are (not its markers or snapshot
/// entries), up to the first entry that cannot be read (applying the batch
/// refuses it there), leaving out those from a replaced primary.
fn held_changes(batch: &[u8], stale: impl Fn(u16, u64) -> bool) -> HeldChanges {
    let mut held = HeldChanges::new();
    let mut sender_epoch = 0;
    let mut entries = Entries::new(batch);
    while let Some(Ok(entry)) = entries.next() {
        match entry {
            Entry::TableEpoch { epoch } => sender_epoch = epoch,
            Entry::Change {
                partition,
                seq,
                change,
            } if !stale(partition, sender_epoch) => held.push(HeldChange {
                partition,
                seq,
                start: (entries.position() - change.len()) as u32,
                len: change.len() as u32,
            }),
            _ => {}
        }
    }
    held
}

/// Whether an entry for partition `p` from member `sender`, queued under
/// its table epoch `sender_epoch`, comes from a primary that `table` (this
/// node's) has replaced: the table is newer and names another primary.
fn stale_sender(
    table: Option<&Arc<PartitionTable>>,
    p: u16,
    sender: usize,
    sender_epoch: u64,
) -> bool {
    table.is_some_and(|t| {
        t.epoch > sender_epoch
            && t.partitions
                .get(p as usize)
                .is_some_and(|o| o.primary != sender)
    })
}
