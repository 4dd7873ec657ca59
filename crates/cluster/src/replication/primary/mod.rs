//! The primary side: each replica's outgoing queue.
//!
//! Everything a primary sends one replica is one byte stream of entries
//! ([`Entry`]): the changes it logs, queued under the partition lock in
//! seq order (`ReplicationSink::logged`), markers (table epoch, WAN
//! watermarks, replicas taken), and snapshots for a new copy, which leave
//! ahead of the queue ([`snapshot`]). The connection to the replica takes a
//! batch at a time ([`Replicator::take_batch`]) and gives back what a
//! broken connection left unanswered ([`Replicator::requeue`]). What the
//! replica acknowledged, and the writes waiting for it, are in [`acks`].

pub mod acks;
pub mod snapshot;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use bytes::{Bytes, BytesMut};
use keyspace::{codec, Change, ReplicationSink};
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::stream::{put_change_header, Entry};
use super::{Replicator, Site, MAX_PENDING};
use crate::ack_wait::AckWaiters;
pub use acks::Durability;
use snapshot::{SnapshotSent, SnapshotStream};

/// The primary side's state.
pub(in crate::replication) struct Primary {
    /// Writes are released only while it holds.
    pub(super) lease: Arc<crate::lease::Lease>,
    /// Per member: what is queued for it as a replica.
    pub(in crate::replication) queues: Vec<ReplicaQueue>,
    /// `acked[member][partition]`: highest seq that member acknowledged.
    pub(in crate::replication) acked: Vec<Box<[AtomicU64]>>,
    /// `catching_up[member][partition]`: that replica loaded a snapshot of
    /// the partition from this primary, so writes wait for its acks too
    /// while the table does not say yet that it is in sync. Otherwise a
    /// write acknowledged between the replica catching up and the table
    /// saying so could be missing from it; if the primary then died and
    /// the replica, committed as in sync meanwhile, replaced the old copy,
    /// that write was lost (`test_cluster.py::
    /// test_backups_are_rebuilt_and_a_second_failure_loses_nothing`, about
    /// one run in ten under CPU contention).
    catching_up: Vec<Box<[AtomicBool]>>,
    /// `snapshot_point[member][partition]`: the partition's next seq when
    /// the latest snapshot for that member was taken (under the
    /// partition's lock, which the snapshots' lock never nests with).
    snapshot_point: Vec<Box<[AtomicU64]>>,
    /// Wakes writes whose replicas all answered but whose acks did not
    /// cover them yet (rare: see [`Replicator::wait`]).
    ack_notify: Notify,
    /// Bumped on every partition table change.
    table_generation: AtomicU64,
    /// Snapshots queued, by (partition, replica).
    snapshots: Mutex<HashMap<(usize, usize), SnapshotSent>>,
    /// The last [`SnapshotSent::id`] handed out.
    snapshot_ids: AtomicU64,
    /// Snapshots whose end the replica acknowledged and that were not
    /// reported finished yet: the few `take_finished_snapshots` looks at,
    /// on every ack, instead of every snapshot sent (thousands after a
    /// failover). Taken before `snapshots` when both are.
    answered_snapshots: Mutex<HashSet<(usize, usize)>>,
    /// A replica refused a snapshot since `take_refused_snapshots` last
    /// looked.
    refused_snapshots: AtomicBool,
    /// Replicas that reported a gap, by (partition, replica), with the
    /// partition epoch a resync was asked for (None: not yet asked).
    gaps: Mutex<HashMap<(usize, usize), Option<u64>>>,
    /// Copies a member loaded from its disk, by (partition, member): the
    /// seq each goes on at and the version of its last change. Its next
    /// snapshot is a catch-up from the log when the log still holds them.
    offers: Mutex<HashMap<(usize, usize), (u64, keyspace::Version)>>,
    /// Snapshots and catch-ups sent, and what they held (INFO replication).
    pub(in crate::replication) sent: SentCounts,
}

/// What a primary sent to new copies, for INFO replication.
#[derive(Debug, Default)]
pub struct SentCounts {
    pub snapshots: AtomicU64,
    pub snapshot_keys: AtomicU64,
    pub catch_ups: AtomicU64,
    pub catch_up_changes: AtomicU64,
}

/// What a primary queued for one replica.
pub(in crate::replication) struct ReplicaQueue {
    pub(in crate::replication) buf: Mutex<BytesMut>,
    /// The table epoch of the latest [`Entry::TableEpoch`] in `buf`
    /// (changed under its lock).
    stamped: AtomicU64,
    /// Bytes of this replica's stream taken out of `buf` so far (batches
    /// sent, or dropped when the replica was cut off); with `buf.len()`,
    /// the stream position. Changed only under the `buf` lock.
    taken: AtomicU64,
    /// Writes waiting for this replica, by stream position.
    acks: AckWaiters,
    ready: Notify,
    broken: AtomicBool,
    /// Snapshots for this replica, sent before anything in `buf`.
    snapshots: Mutex<VecDeque<SnapshotStream>>,
}

impl Primary {
    pub(super) fn new(lease: Arc<crate::lease::Lease>, members: usize, partitions: usize) -> Self {
        fn per_member<T>(members: usize, partitions: usize) -> Vec<Box<[T]>>
        where
            T: Default,
        {
            (0..members)
                .map(|_| (0..partitions).map(|_| T::default()).collect())
                .collect()
        }
        Primary {
            lease,
            queues: (0..members)
                .map(|_| ReplicaQueue {
                    buf: Mutex::new(BytesMut::new()),
                    stamped: AtomicU64::new(0),
                    taken: AtomicU64::new(0),
                    acks: AckWaiters::default(),
                    ready: Notify::new(),
                    broken: AtomicBool::new(false),
                    snapshots: Mutex::new(VecDeque::new()),
                })
                .collect(),
            acked: per_member(members, partitions),
            catching_up: per_member(members, partitions),
            snapshot_point: per_member(members, partitions),
            offers: Mutex::new(HashMap::new()),
            sent: SentCounts::default(),
            ack_notify: Notify::new(),
            table_generation: AtomicU64::new(0),
            snapshots: Mutex::new(HashMap::new()),
            snapshot_ids: AtomicU64::new(0),
            answered_snapshots: Mutex::new(HashSet::new()),
            refused_snapshots: AtomicBool::new(false),
            gaps: Mutex::new(HashMap::new()),
        }
    }
}

impl ReplicaQueue {
    /// Puts an [`Entry::TableEpoch`] in `buf` (this replica's, locked)
    /// unless the latest one there says `epoch` already.
    fn stamp(&self, buf: &mut BytesMut, epoch: u64) {
        if buf.is_empty() || self.stamped.load(Ordering::Relaxed) != epoch {
            Entry::TableEpoch { epoch }.encode(buf);
            self.stamped.store(epoch, Ordering::Relaxed);
        }
    }
}

impl Replicator {
    /// Tells each partition's replicas that remote site `target` applied
    /// its changes up to the seq given with it (a primary's WAN publisher
    /// calls this now and then with every partition that advanced).
    pub fn share_wan_applied(&self, target: &str, applied: &[(usize, u64)]) {
        self.queue_markers(applied, |partition, seq| Entry::WanApplied {
            partition,
            seq,
            target: target.as_bytes(),
        });
    }

    /// Tells each partition's replicas that the primary let go of its
    /// tombstones of removals up to the hlc given with it.
    pub fn share_tombstones_settled(&self, settled: &[(usize, u64)]) {
        self.queue_markers(settled, |partition, hlc| Entry::TombstonesSettled {
            partition,
            hlc,
        });
    }

    /// Queues the marker `marker` makes of each (partition, seq) for that
    /// partition's replicas, where this node is the primary, taking each
    /// replica's queue once. A replica that fell too far behind does not
    /// get them (it will be rebuilt from a snapshot).
    fn queue_markers<'a>(&self, marks: &[(usize, u64)], marker: impl Fn(u16, u64) -> Entry<'a>) {
        let table = self.table.load();
        let Some(table) = table.as_ref() else { return };
        let mut per_replica: Vec<Vec<(usize, u64)>> = vec![Vec::new(); self.primary.queues.len()];
        for &(p, seq) in marks {
            let owners = table.owners(p);
            if owners.primary == self.my_index {
                for &r in &owners.replicas {
                    per_replica[r].push((p, seq));
                }
            }
        }
        for (queue, marks) in self
            .primary
            .queues
            .iter()
            .zip(&per_replica)
            .filter(|(_, m)| !m.is_empty())
        {
            let mut buf = queue.buf.lock();
            queue.stamp(&mut buf, table.epoch);
            for &(p, seq) in marks {
                if buf.len() > MAX_PENDING {
                    break;
                }
                marker(p as u16, seq).encode(&mut buf);
            }
            drop(buf);
            queue.ready.notify_one();
        }
    }

    /// Replica `r` fell [`MAX_PENDING`] bytes behind: what is queued for
    /// it is dropped, and every copy it holds of this node's partitions is
    /// rebuilt from a snapshot: an in-sync one is first taken out of the
    /// in-sync set through the metadata group (which releases writes
    /// waiting for it; the new table sends the snapshot), the others get
    /// one at once. Until then nothing more is queued for it.
    fn cut_off(&self, r: usize) {
        if self.primary.queues[r].broken.swap(true, Ordering::AcqRel) {
            return;
        }
        tracing::error!(
            replica = r,
            "replica fell {MAX_PENDING} bytes behind: rebuilding its copies from snapshots"
        );
        let (Some(this), Some(site), Ok(rt)) = (
            self.this.upgrade(),
            self.site.get().and_then(Weak::upgrade),
            tokio::runtime::Handle::try_current(),
        ) else {
            return;
        };
        rt.spawn(async move { this.rebuild(&*site, r).await });
    }

    async fn rebuild(&self, site: &dyn Site, r: usize) {
        let queue = &self.primary.queues[r];
        {
            let mut buf = queue.buf.lock();
            queue.taken.fetch_add(buf.len() as u64, Ordering::Relaxed);
            buf.clear();
        }
        queue.snapshots.lock().clear();
        self.primary.snapshots.lock().retain(|(_, to), _| *to != r);
        let Some(table) = self.table.load_full() else {
            return;
        };
        queue.broken.store(false, Ordering::Release);
        for (p, o) in table.partitions.iter().enumerate() {
            if o.primary != self.my_index || !o.replicas.contains(&r) {
                continue;
            }
            if !o.in_sync.contains(&r) {
                self.send_snapshot(p, r, o.epoch);
                continue;
            }
            site.propose_out_of_sync(p, r, o.epoch).await;
        }
    }

    /// Bytes queued for member `peer` and not yet shipped.
    pub fn pending_bytes(&self, peer: usize) -> usize {
        self.primary.queues[peer].buf.lock().len()
    }

    /// The next batch for member `peer`: a chunk of the snapshot it is
    /// loading, or else everything queued; None when there is nothing.
    /// With it, the stream position where it ends, for [`Self::answered`].
    pub fn take_batch(&self, peer: usize) -> Option<(Bytes, u64)> {
        let queue = &self.primary.queues[peer];
        let mut snapshots = queue.snapshots.lock();
        if let Some(s) = snapshots.front_mut() {
            let mut chunk = BytesMut::new();
            let epoch = self.table.load().as_ref().map_or(0, |t| t.epoch);
            Entry::TableEpoch { epoch }.encode(&mut chunk);
            if s.next_chunk(&mut chunk) {
                snapshots.pop_front();
            }
            // More to send: ask the connection to come back.
            queue.ready.notify_one();
            return Some((chunk.freeze(), queue.taken.load(Ordering::Relaxed)));
        }
        // `snapshots` stays locked: a snapshot queued meanwhile (under its
        // partition lock) would otherwise fall behind changes logged after
        // its point that this batch takes.
        let mut buf = queue.buf.lock();
        if buf.is_empty() {
            return None;
        }
        let end = queue.taken.fetch_add(buf.len() as u64, Ordering::Relaxed) + buf.len() as u64;
        Some((buf.split().freeze(), end))
    }

    /// Member `peer` answered the batch ending at stream position `end`
    /// (after [`Self::acked_by`] took in its acks): wakes the writes it
    /// covers.
    pub fn answered(&self, peer: usize, end: u64) {
        self.primary.queues[peer].acks.answered(end);
    }

    /// Wakes member `peer`'s connection to look for a batch.
    pub fn wake(&self, peer: usize) {
        if let Some(queue) = self.primary.queues.get(peer) {
            queue.ready.notify_one();
        }
    }

    pub async fn batch_ready(&self, peer: usize) {
        self.primary.queues[peer].ready.notified().await
    }

    /// A reconnected replica is no longer cut off.
    pub fn peer_connected(&self, peer: usize) {
        self.primary.queues[peer]
            .broken
            .store(false, Ordering::Relaxed);
    }

    /// A connection to member `peer` ended with `batches` sent and not
    /// answered (oldest first): they may never have arrived, so they go
    /// out again, ahead of everything queued since. The replica skips what
    /// it already applied (the same primary's seqs) and fills in what it
    /// missed, instead of finding a gap at the next change and reloading
    /// the partition from a snapshot.
    pub fn requeue(&self, peer: usize, batches: impl IntoIterator<Item = Bytes>) {
        let queue = &self.primary.queues[peer];
        let mut again = BytesMut::new();
        for b in batches {
            again.extend_from_slice(&b);
        }
        if again.is_empty() {
            return;
        }
        let bytes = again.len();
        {
            let mut buf = queue.buf.lock();
            again.extend_from_slice(&buf);
            *buf = again;
        }
        tracing::info!(
            replica = peer,
            bytes,
            "connection lost with a batch unanswered: sending it again"
        );
        queue.ready.notify_one();
    }
}

impl ReplicationSink for Replicator {
    fn backup_taken(&self, partition: usize, seq: u64, id: &str) {
        self.queue_markers(&[(partition, seq)], |partition, seq| Entry::BackupTaken {
            partition,
            seq,
            id: id.as_bytes(),
        });
    }

    fn logged(&self, partition: usize, seq: u64, change: &Change, encoded: Option<&[u8]>) {
        let table = self.table.load();
        let Some(table) = table.as_ref() else { return };
        let owners = table.owners(partition);
        if owners.primary != self.my_index || owners.replicas.is_empty() {
            return;
        }
        // Copied from the log, or else encoded straight into the first
        // replica's queue (no allocation per change with one replica) and
        // copied from there for the others.
        let len = encoded.map_or_else(|| codec::encoded_len(change), <[u8]>::len);
        let mut copy: Option<Vec<u8>> = None;
        for (i, &r) in owners.replicas.iter().enumerate() {
            let queue = &self.primary.queues[r];
            let mut buf = queue.buf.lock();
            if buf.len() + len > MAX_PENDING || queue.broken.load(Ordering::Relaxed) {
                drop(buf);
                self.cut_off(r);
                continue;
            }
            queue.stamp(&mut buf, table.epoch);
            put_change_header(&mut buf, partition as u16, seq, len);
            match encoded.or(copy.as_deref()) {
                Some(e) => buf.extend_from_slice(e),
                None => {
                    let at = buf.len();
                    codec::encode(change, &mut *buf);
                    debug_assert_eq!(
                        buf.len() - at,
                        len,
                        "codec::encoded_len disagrees with codec::encode"
                    );
                    if i + 1 < owners.replicas.len() {
                        copy = Some(buf[at..].to_vec());
                    }
                }
            }
            drop(buf);
            queue.ready.notify_one();
        }
    }
}
