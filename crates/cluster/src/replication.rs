//! Primary -> backup replication over the node-to-node connections.
//!
//! The keyspace hands every change a primary logs to [`Replicator::logged`]
//! while the partition is locked, so entries enter each backup's outgoing
//! buffer in seq order. The connection to that backup ships the buffer as
//! one batch frame per flush, however many partitions it spans. The backup
//! applies entries through the mirror path at the same seq (so its log is
//! the primary's) and acknowledges cumulatively, one (partition, seq) per
//! partition touched by the batch.
//!
//! With `replication = "sync"` a connection holds its replies until every
//! backup of every partition it wrote has acknowledged those seqs (woken by
//! the answer to the batch holding its writes, [`crate::ack_wait`]). A
//! backup that does not answer within [`SYNC_TIMEOUT`] makes the connection close
//! without replying: the client learns nothing was acknowledged, which is
//! never wrong. Batches a broken connection took unanswered are sent again
//! on the next one ([`Replicator::requeue`]). A backup that falls [`MAX_PENDING`] bytes behind is cut off
//! and rebuilt from snapshots, leaving the in-sync set through Raft first.
//! Snapshots stream in chunks ahead of the changes queued for the backup
//! (`snapshot`), so a partition of any size can be copied.
//!
//! Entry: `partition u16 | seq u64 | len u32 | change (keyspace codec)`.
//! Ack: `partition u16 | seq u64`, repeated.
//!
//! A new backup (rebuilt after a failover, or a node that came back) first
//! gets a snapshot, queued under the partition lock so it sits in the
//! stream exactly where the log continues: a begin entry (`seq` =
//! [`SNAPSHOT_BEGIN`], body = the primary's next seq) that empties the
//! backup's copy, one entry per key (`seq` = [`SNAPSHOT_DATA`], a full
//! value), and an end entry ([`SNAPSHOT_END`], body = next seq | snapshot
//! id | entries) that the backup acknowledges as "everything before next
//! seq" plus the pair `(partition, SNAPSHOT_END), (partition, id)`, or,
//! when it did not load all of it, refuses with `(partition,
//! SNAPSHOT_REFUSED), (partition, id)` and gets it again. Once the ack of
//! that very snapshot is in (not of an earlier one it replaced), the
//! primary asks the metadata group to count the backup as in sync.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use keyspace::{codec, Change, Held, HeldChanges, Keyspace, Pinned, ReplicaError, ReplicationSink};
use parking_lot::Mutex;
use smallvec::SmallVec;
use tokio::sync::Notify;

use crate::ack_wait::AckWaiters;
use crate::cluster::Cluster;
use crate::placement::{PartitionOwners, PartitionTable, SharedTable};
use crate::snapshot::SnapshotStream;

pub const SYNC_TIMEOUT: Duration = Duration::from_secs(5);
/// How often waiting writes check their [`SYNC_TIMEOUT`].
pub const SWEEP_EVERY: Duration = Duration::from_millis(250);
pub const SNAPSHOT_DATA: u64 = 0;
pub const SNAPSHOT_BEGIN: u64 = u64::MAX;
pub const SNAPSHOT_END: u64 = u64::MAX - 1;
/// A WAN watermark, not a change: body `seq u64 | target site name`, the
/// highest seq of the partition that remote site has applied. Backups keep
/// it so that, promoted, they resume shipping from there.
pub const WAN_APPLIED: u64 = u64::MAX - 2;
/// A backup to storage, not a change: body `seq u64 | backup id`, queued
/// under the partition lock when the primary copied the partition at
/// `seq`, so backups anchor their changed-keys sets at the same point.
pub const BACKUP_TAKEN: u64 = u64::MAX - 3;
/// In acks only: the backup's copy of the partition has a gap (it was
/// sent a change past the next seq it holds) and needs a snapshot. The
/// primary takes an in-sync backup out of the in-sync set, which sends one;
/// until then writes to the partition wait for an ack that cannot come.
pub const SNAPSHOT_NEEDED: u64 = u64::MAX - 4;
/// In acks only, followed by `(partition, snapshot id)`: the backup did
/// not load all of that snapshot (the partition is not a backup copy there
/// yet, its table being older than its primary's, or entries went with a
/// broken connection), so it holds nothing the primary may count on; the
/// primary sends it again a little later.
pub const SNAPSHOT_REFUSED: u64 = u64::MAX - 5;
/// The epoch of the partition table the sender had when it queued what
/// follows (body `epoch u64`; its partition field means nothing). A
/// backup whose table is newer and names another primary for an entry's
/// partition refuses the entry: it comes from a primary that was replaced
/// (`stale_sender`). Every batch starts with one.
pub const TABLE_EPOCH: u64 = u64::MAX - 6;
/// The lowest marker: seqs from here up are never changes' seqs.
const FIRST_MARKER: u64 = TABLE_EPOCH;
const _: () = assert!(FIRST_MARKER < SNAPSHOT_REFUSED && SNAPSHOT_NEEDED < BACKUP_TAKEN);
/// How long a primary waits before sending a refused snapshot again.
pub const RESEND_REFUSED_AFTER: Duration = Duration::from_millis(200);
/// Unshipped bytes a backup may fall behind by before it is cut off.
pub const MAX_PENDING: usize = 32 << 20;
const ENTRY_HEADER: usize = 2 + 8 + 4;

struct PeerOut {
    buf: Mutex<BytesMut>,
    /// The table epoch of the latest [`TABLE_EPOCH`] marker in `buf`
    /// (changed under its lock).
    stamped: AtomicU64,
    /// Bytes of this peer's stream taken out of `buf` so far (batches
    /// sent, or dropped when the peer was cut off); with `buf.len()`, the
    /// stream position. Changed only under the `buf` lock.
    taken: AtomicU64,
    /// Writes waiting for this peer, by stream position.
    acks: AckWaiters,
    ready: Notify,
    broken: AtomicBool,
    /// Snapshots for this backup, sent before anything in `buf`.
    snapshots: Mutex<std::collections::VecDeque<SnapshotStream>>,
}

impl PeerOut {
    /// Puts a [`TABLE_EPOCH`] marker in `buf` (this peer's, locked) unless
    /// the latest one there says `epoch` already.
    fn stamp(&self, buf: &mut BytesMut, epoch: u64) {
        if buf.is_empty() || self.stamped.load(Ordering::Relaxed) != epoch {
            put_marker(buf, 0, TABLE_EPOCH, &[epoch]);
            self.stamped.store(epoch, Ordering::Relaxed);
        }
    }
}

/// A snapshot queued for a backup.
struct SnapshotSent {
    /// The partition epoch it was sent for.
    epoch: u64,
    /// Which snapshot this is: its end marker carries the id and the
    /// backup acknowledges it with it, so the end of an earlier snapshot
    /// of the same partition (replaced while its ack was on the way)
    /// never counts for this one.
    id: u64,
    /// The backup acknowledged its end.
    acknowledged: bool,
    /// The backup answered its end with [`SNAPSHOT_REFUSED`].
    refused: bool,
    /// [`Replicator::take_finished_snapshots`] returned it.
    reported: bool,
    /// The partition's last seq when the backup acknowledged the end:
    /// writes up to it may have been acknowledged without this backup,
    /// so it is reported in sync only once it acknowledged this seq.
    need: Option<u64>,
}

pub struct Replicator {
    ks: Arc<Keyspace>,
    my_index: usize,
    cluster: std::sync::Weak<Cluster>,
    /// The cluster's table, read here without upgrading `cluster`.
    table: SharedTable,
    /// Writes are released only while it holds.
    lease: Arc<crate::lease::Lease>,
    out: Vec<PeerOut>,
    /// `acked[member][partition]`: highest seq that member acknowledged.
    acked: Vec<Box<[AtomicU64]>>,
    /// `catching_up[member][partition]`: that backup loaded a snapshot of
    /// the partition from this primary, so writes wait for its acks too
    /// while the table does not say yet that it is in sync. Otherwise a
    /// write acknowledged between the backup catching up and the table
    /// saying so could be missing from it; if the primary then died and
    /// the backup, committed as in sync meanwhile, replaced the old copy,
    /// that write was lost (`test_cluster.py::
    /// test_backups_are_rebuilt_and_a_second_failure_loses_nothing`, about
    /// one run in ten under CPU contention).
    catching_up: Vec<Box<[AtomicBool]>>,
    /// `snapshot_point[member][partition]`: the partition's next seq when
    /// the latest snapshot for that member was taken (under the
    /// partition's lock, which the snapshots' lock never nests with).
    snapshot_point: Vec<Box<[AtomicU64]>>,
    /// Wakes writes whose backups all answered but whose acks did not
    /// cover them yet (rare: see [`Self::wait`]).
    ack_notify: Notify,
    /// Bumped on every partition table change.
    table_generation: AtomicU64,
    /// Snapshots queued, by (partition, backup).
    snapshots: Mutex<HashMap<(usize, usize), SnapshotSent>>,
    /// The last [`SnapshotSent::id`] handed out.
    snapshot_ids: AtomicU64,
    /// As a backup: snapshots being loaded, by partition: (next seq,
    /// entries received since the begin marker).
    loading: Mutex<HashMap<u16, (u64, u64)>>,
    /// Backups that reported a gap, by (partition, backup), with the
    /// partition epoch a resync was asked for (None: not yet asked).
    gaps: Mutex<HashMap<(usize, usize), Option<u64>>>,
    wan: std::sync::OnceLock<Arc<dyn WanWatermarks>>,
}

/// The partition table as it stood when [`Replicator::durability`] was
/// called, to read [`Replicator::durable_seq`] of many partitions.
pub struct Durability<'a> {
    r: &'a Replicator,
    table: arc_swap::Guard<Option<Arc<PartitionTable>>>,
}

impl Durability<'_> {
    pub fn seq(&self, p: usize) -> u64 {
        let Some(owners) = self.table.as_ref().and_then(|t| t.partitions.get(p)) else {
            return 0;
        };
        if owners.primary != self.r.my_index {
            return 0;
        }
        self.r
            .waited_for(p, owners)
            .map(|b| self.r.acked[b][p].load(Ordering::Acquire))
            .min()
            .unwrap_or(u64::MAX)
    }
}

/// Where a backup hands the WAN watermarks its primary shares.
pub trait WanWatermarks: Send + Sync {
    fn applied(&self, target: &str, partition: usize, seq: u64);
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    #[error("truncated replication entry")]
    Truncated,
    #[error("partition {0} out of range, or not the partition of the change's key")]
    Partition(u16),
    #[error("bad change: {0}")]
    Change(#[from] codec::DecodeError),
}

impl Replicator {
    pub fn new(
        ks: Arc<Keyspace>,
        cluster: std::sync::Weak<Cluster>,
        table: SharedTable,
        lease: Arc<crate::lease::Lease>,
        members: usize,
        my_index: usize,
    ) -> Self {
        let parts = ks.partitions() as usize;
        Replicator {
            ks,
            my_index,
            cluster,
            table,
            lease,
            out: (0..members)
                .map(|_| PeerOut {
                    buf: Mutex::new(BytesMut::new()),
                    stamped: AtomicU64::new(0),
                    taken: AtomicU64::new(0),
                    acks: AckWaiters::default(),
                    ready: Notify::new(),
                    broken: AtomicBool::new(false),
                    snapshots: Mutex::new(Default::default()),
                })
                .collect(),
            acked: (0..members)
                .map(|_| (0..parts).map(|_| AtomicU64::new(0)).collect())
                .collect(),
            catching_up: (0..members)
                .map(|_| (0..parts).map(|_| AtomicBool::new(false)).collect())
                .collect(),
            snapshot_point: (0..members)
                .map(|_| (0..parts).map(|_| AtomicU64::new(0)).collect())
                .collect(),
            ack_notify: Notify::new(),
            table_generation: AtomicU64::new(0),
            snapshots: Mutex::new(HashMap::new()),
            snapshot_ids: AtomicU64::new(0),
            loading: Mutex::new(HashMap::new()),
            gaps: Mutex::new(HashMap::new()),
            wan: std::sync::OnceLock::new(),
        }
    }

    pub(crate) fn cluster(&self) -> Option<Arc<Cluster>> {
        self.cluster.upgrade()
    }

    /// Installs the receiver of shared WAN watermarks; first call wins.
    pub fn set_wan_watermarks(&self, w: Arc<dyn WanWatermarks>) {
        let _ = self.wan.set(w);
    }

    /// Tells each partition's backups that remote site `target` applied
    /// its changes up to the seq given with it (a primary's WAN publisher
    /// calls this now and then with every partition that advanced).
    pub fn share_wan_applied(&self, target: &str, applied: &[(usize, u64)]) {
        self.send_named_markers(applied, WAN_APPLIED, target);
    }

    /// Queues a marker `kind` with body `seq u64 | name` for each
    /// (partition, seq)'s backups, where this node is the primary, taking
    /// each backup's buffer once. A backup that fell too far behind does
    /// not get them (it will be rebuilt from a snapshot).
    fn send_named_markers(&self, marks: &[(usize, u64)], kind: u64, name: &str) {
        let table = self.table.load();
        let Some(table) = table.as_ref() else { return };
        let mut per_backup: Vec<Vec<(usize, u64)>> = vec![Vec::new(); self.out.len()];
        for &(p, seq) in marks {
            let owners = table.owners(p);
            if owners.primary == self.my_index {
                for &b in &owners.backups {
                    per_backup[b].push((p, seq));
                }
            }
        }
        for (peer, marks) in self
            .out
            .iter()
            .zip(&per_backup)
            .filter(|(_, m)| !m.is_empty())
        {
            let mut buf = peer.buf.lock();
            peer.stamp(&mut buf, table.epoch);
            for &(p, seq) in marks {
                if buf.len() > MAX_PENDING {
                    break;
                }
                buf.put_u16_le(p as u16);
                buf.put_u64_le(kind);
                buf.put_u32_le(8 + name.len() as u32);
                buf.put_u64_le(seq);
                buf.put_slice(name.as_bytes());
            }
            drop(buf);
            peer.ready.notify_one();
        }
    }

    /// Queues a snapshot of partition `p` for backup `b`, once per
    /// partition epoch. Returns false when one was already queued.
    pub fn send_snapshot(&self, p: usize, b: usize, epoch: u64) -> bool {
        let id = {
            let mut snaps = self.snapshots.lock();
            if snaps.get(&(p, b)).is_some_and(|s| s.epoch == epoch) {
                return false;
            }
            let id = self.snapshot_ids.fetch_add(1, Ordering::Relaxed) + 1;
            snaps.insert(
                (p, b),
                SnapshotSent {
                    epoch,
                    id,
                    acknowledged: false,
                    refused: false,
                    reported: false,
                    need: None,
                },
            );
            id
        };
        let peer = &self.out[b];
        let keys = self.ks.with_partition(p, |part, _| {
            // Entries, then tombstones (so older writes from other sites
            // keep losing on the new copy).
            let entries = part.iter().map(|(key, e)| Change {
                key: key.clone(),
                version: e.version,
                kind: keyspace::ChangeKind::Full {
                    value: e.value.clone(),
                    expire_at: e.expire_at,
                },
            });
            let entries: Vec<Change> = entries.chain(part.tombstone_changes()).collect();
            // The backup's acks start over from the snapshot.
            self.acked[b][p].store(0, Ordering::Release);
            self.snapshot_point[b][p].store(part.log.next_seq(), Ordering::Release);
            self.catching_up[b][p].store(false, Ordering::Release);
            let stream = SnapshotStream::new(p, part.log.next_seq(), id, entries);
            let keys = stream.keys();
            // Queued before the lock lets the next change be logged, so
            // no change past the snapshot's point can reach the backup
            // ahead of its begin marker (see `take_batch`).
            let mut queued = peer.snapshots.lock();
            queued.retain(|s| s.partition != p);
            queued.push_back(stream);
            keys
        });
        tracing::info!(
            partition = p,
            backup = b,
            keys,
            "snapshot queued for a new backup"
        );
        peer.ready.notify_one();
        true
    }

    /// Backup `b` fell [`MAX_PENDING`] bytes behind: what is queued for it
    /// is dropped, and every copy it holds of this node's partitions is
    /// rebuilt from a snapshot: an in-sync one is first taken out of the
    /// in-sync set through the metadata group (which releases writes
    /// waiting for it; the new table sends the snapshot), the others get
    /// one at once. Until then nothing more is queued for it.
    fn cut_off(&self, b: usize) {
        if self.out[b].broken.swap(true, Ordering::AcqRel) {
            return;
        }
        tracing::error!(
            backup = b,
            "backup fell {MAX_PENDING} bytes behind: rebuilding its copies from snapshots"
        );
        let (Some(cluster), Ok(rt)) = (
            self.cluster.upgrade(),
            tokio::runtime::Handle::try_current(),
        ) else {
            return;
        };
        rt.spawn(async move { cluster.replicator.rebuild(&cluster, b).await });
    }

    async fn rebuild(&self, cluster: &Cluster, b: usize) {
        let peer = &self.out[b];
        {
            let mut buf = peer.buf.lock();
            peer.taken.fetch_add(buf.len() as u64, Ordering::Relaxed);
            buf.clear();
        }
        peer.snapshots.lock().clear();
        self.snapshots.lock().retain(|(_, to), _| *to != b);
        let Some(table) = cluster.table() else { return };
        peer.broken.store(false, Ordering::Release);
        for (p, o) in table.partitions.iter().enumerate() {
            if o.primary != self.my_index || !o.backups.contains(&b) {
                continue;
            }
            if !o.in_sync.contains(&b) {
                self.send_snapshot(p, b, o.epoch);
                continue;
            }
            take_out_of_sync(cluster, p, b, o.epoch).await;
        }
    }

    /// Partitions whose in-sync backup reported a gap and for which no
    /// resync was asked at the current partition epoch: (partition,
    /// backup, epoch), each returned once per epoch. A gap reported by a
    /// backup that is not in sync is forgotten: a snapshot is on its way
    /// (changes queued before it can arrive first and not fit).
    pub fn take_gaps(&self, table: &crate::placement::PartitionTable) -> Vec<(usize, usize, u64)> {
        let mut asked = Vec::new();
        self.gaps.lock().retain(|&(p, b), at| {
            let o = table.owners(p);
            if o.primary != self.my_index || !o.in_sync.contains(&b) {
                return false;
            }
            if *at != Some(o.epoch) {
                *at = Some(o.epoch);
                asked.push((p, b, o.epoch));
            }
            true
        });
        asked
    }

    /// Snapshots whose end the backup acknowledged, whose backup has since
    /// acknowledged every change logged before that (see
    /// [`SnapshotSent::need`]), and that nobody has reported yet:
    /// (partition, backup, partition epoch).
    pub fn take_finished_snapshots(&self) -> Vec<(usize, usize, u64)> {
        let mut done = Vec::new();
        for ((p, b), s) in self.snapshots.lock().iter_mut() {
            if s.acknowledged
                && !s.reported
                && s.need
                    .is_some_and(|need| self.acked[*b][*p].load(Ordering::Acquire) >= need)
            {
                s.reported = true;
                done.push((*p, *b, s.epoch));
            }
        }
        done
    }

    /// Snapshots the backup refused, forgotten here so that they can be
    /// sent again: (partition, backup, partition epoch).
    pub fn take_refused_snapshots(&self) -> Vec<(usize, usize, u64)> {
        let mut refused = Vec::new();
        self.snapshots.lock().retain(|&(p, b), s| {
            if s.refused {
                refused.push((p, b, s.epoch));
            }
            !s.refused
        });
        refused
    }

    /// Those of `backups` that have not acknowledged `seq` of partition `p`.
    pub fn not_acknowledged(&self, p: usize, seq: u64, backups: &[usize]) -> Vec<usize> {
        backups
            .iter()
            .copied()
            .filter(|&b| self.acked[b][p].load(Ordering::Acquire) < seq)
            .collect()
    }

    /// Per member index: changes of this node's primaries in `table`
    /// that member backs up and has not acknowledged yet (replication lag).
    /// One pass over the partitions, each locked once.
    pub fn lags(&self, table: &crate::placement::PartitionTable) -> Vec<u64> {
        let mut lag = vec![0u64; self.acked.len()];
        for (p, o) in table.partitions.iter().enumerate() {
            if o.primary != self.my_index || o.backups.is_empty() {
                continue;
            }
            let last = self
                .ks
                .with_partition(p, |part, _| part.log.next_seq().saturating_sub(1));
            for &b in &o.backups {
                if let (Some(l), Some(acked)) = (lag.get_mut(b), self.acked.get(b)) {
                    *l += last.saturating_sub(acked[p].load(Ordering::Acquire));
                }
            }
        }
        lag
    }

    /// Bytes queued for `peer` and not yet shipped.
    pub fn pending_bytes(&self, peer: usize) -> usize {
        self.out[peer].buf.lock().len()
    }

    /// The next batch for `peer`: a chunk of the snapshot it is loading,
    /// or else everything queued; None when there is nothing. With it, the
    /// stream position where it ends, for [`Self::answered`].
    pub fn take_batch(&self, peer: usize) -> Option<(Bytes, u64)> {
        let out = &self.out[peer];
        let mut snapshots = out.snapshots.lock();
        if let Some(s) = snapshots.front_mut() {
            let mut chunk = BytesMut::new();
            put_marker(
                &mut chunk,
                0,
                TABLE_EPOCH,
                &[self.table.load().as_ref().map_or(0, |t| t.epoch)],
            );
            if s.next_chunk(&mut chunk) {
                snapshots.pop_front();
            }
            // More to send: ask the connection to come back.
            out.ready.notify_one();
            return Some((chunk.freeze(), out.taken.load(Ordering::Relaxed)));
        }
        // `snapshots` stays locked: a snapshot queued meanwhile (under its
        // partition lock) would otherwise fall behind changes logged after
        // its point that this batch takes.
        let mut buf = out.buf.lock();
        if buf.is_empty() {
            return None;
        }
        let end = out.taken.fetch_add(buf.len() as u64, Ordering::Relaxed) + buf.len() as u64;
        Some((buf.split().freeze(), end))
    }

    /// `peer` answered the batch ending at stream position `end` (after
    /// [`Self::acked_by`] took in its acks): wakes the writes it covers.
    pub fn answered(&self, peer: usize, end: u64) {
        self.out[peer].acks.answered(end);
    }

    /// Wakes `peer`'s connection to look for a batch.
    pub fn wake(&self, peer: usize) {
        if let Some(out) = self.out.get(peer) {
            out.ready.notify_one();
        }
    }

    pub async fn batch_ready(&self, peer: usize) {
        self.out[peer].ready.notified().await
    }

    /// A reconnected backup is no longer cut off.
    pub fn peer_connected(&self, peer: usize) {
        self.out[peer].broken.store(false, Ordering::Relaxed);
    }

    /// A connection to `peer` ended with `batches` sent and not answered
    /// (oldest first): they may never have arrived, so they go out again,
    /// ahead of everything queued since. The backup skips what it already
    /// applied (the same primary's seqs) and fills in what it missed,
    /// instead of finding a gap at the next change and reloading the
    /// partition from a snapshot.
    pub fn requeue(&self, peer: usize, batches: impl IntoIterator<Item = Bytes>) {
        let out = &self.out[peer];
        let mut again = BytesMut::new();
        for b in batches {
            again.extend_from_slice(&b);
        }
        if again.is_empty() {
            return;
        }
        let bytes = again.len();
        {
            let mut buf = out.buf.lock();
            again.extend_from_slice(&buf);
            *buf = again;
        }
        tracing::info!(
            backup = peer,
            bytes,
            "connection lost with a batch unanswered: sending it again"
        );
        out.ready.notify_one();
    }

    /// Applies a batch from site member `from`, our primary for the
    /// partitions in it; returns the cumulative acks.
    pub fn apply_batch(&self, batch: Bytes, from: usize) -> Result<Vec<(u16, u64)>, BatchError> {
        self.apply_received(batch, None, from)
    }

    /// [`Self::apply_batch`] for a batch read into the buffer `pin`
    /// counts. With WAN replication the batch is held first
    /// (`Keyspace::hold_received`): the backup's logs store nothing, and a
    /// copy promoted while the batch is being applied finds in it the
    /// changes it applied.
    pub fn apply_received(
        &self,
        mut batch: Bytes,
        pin: Option<Arc<Pinned>>,
        from: usize,
    ) -> Result<Vec<(u16, u64)>, BatchError> {
        let table = self.table.load();
        let table = table.as_ref();
        if self.ks.holds_received() {
            self.ks.hold_received(
                batch.clone(),
                held_changes(&batch, |p, epoch| stale_sender(table, p, from, epoch)),
                pin,
            );
        }
        // The sender's table epoch, from the batch's TABLE_EPOCH markers.
        let mut sender_epoch = 0;
        // Partitions whose entries came from a replaced primary (refused).
        let mut stale: SmallVec<[u16; 2]> = SmallVec::new();
        let sender = from;
        let from = from as u16;
        // (partition, seq) per change applied, then the last per partition:
        // no map per batch (a batch mostly holds distinct partitions).
        let mut acks: Vec<(u16, u64)> = Vec::new();
        // (partition, SNAPSHOT_END or SNAPSHOT_REFUSED, snapshot id) per
        // snapshot end.
        let mut ends: Vec<(u16, u64, u64)> = Vec::new();
        let mut gaps: SmallVec<[u16; 2]> = SmallVec::new();
        // Partitions this node leads now: what a stale primary sent of
        // them was held above and is let go below.
        let mut led: SmallVec<[usize; 2]> = SmallVec::new();
        while batch.has_remaining() {
            if batch.remaining() < ENTRY_HEADER {
                return Err(BatchError::Truncated);
            }
            let (p, seq, len) = entry_head(&batch);
            batch.advance(ENTRY_HEADER);
            if len > batch.remaining() {
                return Err(BatchError::Truncated);
            }
            if p >= self.ks.partitions() {
                return Err(BatchError::Partition(p));
            }
            let body = batch.split_to(len);
            if seq == TABLE_EPOCH {
                let epoch: [u8; 8] = body[..].try_into().map_err(|_| BatchError::Truncated)?;
                sender_epoch = u64::from_le_bytes(epoch);
                continue;
            }
            if stale_sender(table, p, sender, sender_epoch) {
                if !stale.contains(&p) {
                    tracing::warn!(
                        partition = p,
                        sender,
                        sender_epoch,
                        "replicated change refused: it comes from a primary this node's newer table replaced"
                    );
                    stale.push(p);
                }
                if seq == SNAPSHOT_END {
                    if let Some(id) = body
                        .get(8..16)
                        .and_then(|w| w.try_into().ok())
                        .map(u64::from_le_bytes)
                    {
                        ends.push((p, SNAPSHOT_REFUSED, id));
                    }
                }
                continue;
            }
            if seq == WAN_APPLIED || seq == BACKUP_TAKEN {
                if body.len() < 8 {
                    return Err(BatchError::Truncated);
                }
                let at =
                    u64::from_le_bytes(body[..8].try_into().map_err(|_| BatchError::Truncated)?);
                let Ok(name) = std::str::from_utf8(&body[8..]) else {
                    continue;
                };
                if seq == BACKUP_TAKEN {
                    self.ks.backup_taken_replica(p as usize, at, name);
                } else if let Some(w) = self.wan.get() {
                    w.applied(name, p as usize, at);
                }
                continue;
            }
            if seq == SNAPSHOT_BEGIN || seq == SNAPSHOT_END {
                let word = |i: usize| {
                    body.get(i * 8..i * 8 + 8)
                        .and_then(|w| w.try_into().ok())
                        .map(u64::from_le_bytes)
                };
                let (next, end) = match (seq, body.len()) {
                    (SNAPSHOT_BEGIN, 8) => (word(0), None),
                    (SNAPSHOT_END, 24) => (word(0), word(1).zip(word(2))),
                    _ => return Err(BatchError::Truncated),
                };
                let next = next.filter(|&n| n != 0).ok_or(BatchError::Truncated)?;
                match end {
                    None => match self.ks.reset_replica(p as usize, next, from) {
                        Ok(()) => {
                            self.loading.lock().insert(p, (next, 0));
                        }
                        Err(e) => {
                            self.loading.lock().remove(&p);
                            tracing::error!(partition = p, "snapshot refused: {e}");
                        }
                    },
                    Some((id, entries)) => {
                        // Loaded only if its begin emptied a backup copy
                        // here and set its log to `next` (changes past
                        // the snapshot's point come after this end), and
                        // every entry between arrived (a connection that
                        // broke mid-snapshot loses the chunks in flight).
                        let counted = self.loading.lock().remove(&p) == Some((next, entries));
                        let loaded = counted
                            && self.ks.with_partition(p as usize, |part, _| {
                                part.replica && part.log.next_seq() == next
                            });
                        if loaded {
                            acks.push((p, next - 1));
                            ends.push((p, SNAPSHOT_END, id));
                        } else {
                            tracing::warn!(partition = p, "snapshot not loaded (not a backup copy here yet, or entries missing): asking for it again");
                            ends.push((p, SNAPSHOT_REFUSED, id));
                        }
                    }
                }
                continue;
            }
            let (change, used) = codec::decode(&body)?;
            if used != len {
                return Err(BatchError::Truncated);
            }
            if self.ks.partition_of(&change.key) != p as usize {
                return Err(BatchError::Partition(p));
            }
            if seq == SNAPSHOT_DATA {
                if let Some((_, n)) = self.loading.lock().get_mut(&p) {
                    *n += 1;
                }
                if let Err(e) = self.ks.load_replica_entry(change) {
                    tracing::error!(partition = p, "snapshot entry refused: {e}");
                }
                continue;
            }
            if let [a, b, ..] = batch[..] {
                self.ks
                    .prefetch_partition(u16::from_le_bytes([a, b]) as usize);
            }
            match self.ks.apply_replicated(seq, change, &body, from) {
                Ok(()) => acks.push((p, seq)),
                Err(e @ (ReplicaError::Gap { .. } | ReplicaError::Diverged { .. })) => {
                    if !gaps.contains(&p) {
                        tracing::warn!(partition = p, "{e}: asking the primary for a snapshot");
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
                Err(e) => tracing::error!(partition = p, seq, "replicated change refused: {e}"),
            }
        }
        self.ks.forget_received(&led);
        // Seq acks first, then "snapshot loaded": an ack with seq
        // SNAPSHOT_END followed by one with the snapshot's id.
        acks.sort_by_key(|&(p, _)| p);
        acks.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                kept.1 = later.1;
            }
            same
        });
        acks.extend(
            ends.into_iter()
                .flat_map(|(p, kind, id)| [(p, kind), (p, id)]),
        );
        acks.extend(gaps.into_iter().map(|p| (p, SNAPSHOT_NEEDED)));
        Ok(acks)
    }

    pub fn encode_acks(acks: &[(u16, u64)], out: &mut BytesMut) {
        out.reserve(acks.len() * 10);
        for (p, seq) in acks {
            out.put_u16_le(*p);
            out.put_u64_le(*seq);
        }
    }

    pub fn acked_by(&self, peer: usize, mut acks: Bytes) {
        while acks.remaining() >= 10 {
            let p = acks.get_u16_le() as usize;
            let seq = acks.get_u64_le();
            if seq == SNAPSHOT_NEEDED {
                if p < self.ks.partitions() as usize {
                    self.gaps.lock().entry((p, peer)).or_insert(None);
                }
            } else if seq == SNAPSHOT_END || seq == SNAPSHOT_REFUSED {
                if acks.remaining() < 10 {
                    break;
                }
                let (_, id) = (acks.get_u16_le(), acks.get_u64_le());
                let loaded = match self
                    .snapshots
                    .lock()
                    .get_mut(&(p, peer))
                    .filter(|s| s.id == id)
                {
                    Some(s) if seq == SNAPSHOT_END && !s.acknowledged => {
                        s.acknowledged = true;
                        // It holds what the snapshot held (see `durable_seq`):
                        // an idle partition's acks would never get there.
                        if let (Some(a), Some(point)) =
                            (self.acked[peer].get(p), self.snapshot_point[peer].get(p))
                        {
                            a.fetch_max(
                                point.load(Ordering::Acquire).saturating_sub(1),
                                Ordering::AcqRel,
                            );
                        }
                        true
                    }
                    Some(s) if seq == SNAPSHOT_REFUSED => {
                        s.refused = true;
                        false
                    }
                    _ => false,
                };
                if loaded {
                    // Counted for acks first, then the last seq read under
                    // the partition's lock (with the snapshots' lock let
                    // go: the two are never nested): a write logged after
                    // that sees the flag when it checks its acks.
                    self.catching_up[peer][p].store(true, Ordering::Release);
                    let last = self.ks.with_partition(p, |part, _| part.log.next_seq() - 1);
                    if let Some(s) = self
                        .snapshots
                        .lock()
                        .get_mut(&(p, peer))
                        .filter(|s| s.id == id)
                    {
                        s.need = Some(last);
                    }
                }
            } else if let Some(a) = self.acked[peer].get(p).filter(|_| seq < FIRST_MARKER) {
                a.fetch_max(seq, Ordering::AcqRel);
            }
        }
        self.ack_notify.notify_waiters();
    }

    /// Prefetches the acknowledged seqs of partition `p` (see
    /// `Cluster::prefetch`); a site's first few members only.
    pub(crate) fn prefetch(&self, p: usize) {
        for acked in self.acked.iter().take(4) {
            if let Some(a) = acked.get(p) {
                keyspace::prefetch_line(a);
            }
        }
    }

    fn all_acked(&self, writes: &[(usize, u64)]) -> bool {
        // A partition this node no longer leads has durable seq 0: whether
        // the write survives is not ours to say, so it is never
        // acknowledged (seqs start at 1).
        let durability = self.durability();
        writes.iter().all(|&(p, seq)| durability.seq(p) >= seq)
    }

    /// The backups a write to partition `p` waits for: the in-sync ones,
    /// and those catching up from a snapshot they loaded (`catching_up`).
    fn waited_for<'a>(
        &'a self,
        p: usize,
        owners: &'a PartitionOwners,
    ) -> impl Iterator<Item = usize> + 'a {
        owners.backups.iter().copied().filter(move |&b| {
            owners.in_sync.contains(&b) || self.catching_up[b][p].load(Ordering::Acquire)
        })
    }

    /// The last seq of partition `p` that every backup a write waits for
    /// ([`Self::wait`]) acknowledged: `u64::MAX` when no backup is waited
    /// for, 0 when this node does not lead `p`. A change after it (and
    /// after [`keyspace::Partition::promoted_through`]) dies with this
    /// node if it fails now, so WAN publishers ship nothing past it: the
    /// promoted copy numbers its next changes from where its log ends, and
    /// a remote site that had the lost change would skip as already
    /// applied the new changes that reuse its seq, and keep a value this
    /// site never had.
    pub fn durable_seq(&self, p: usize) -> u64 {
        self.durability().seq(p)
    }

    /// [`Self::durable_seq`] for many partitions under one table.
    pub fn durability(&self) -> Durability<'_> {
        Durability {
            r: self,
            table: self.table.load(),
        }
    }

    /// The partition table changed (a backup left the in-sync set, a
    /// primary moved): waiting writers re-check against it.
    pub fn table_changed(&self) {
        self.table_generation.fetch_add(1, Ordering::AcqRel);
        // A backup the table now has in sync is waited for as such, so a
        // later step out of the in-sync set releases the writes waiting
        // for it at once.
        if let Some(table) = self.table.load().as_ref() {
            for (p, owners) in table
                .partitions
                .iter()
                .enumerate()
                .filter(|(_, o)| o.primary == self.my_index)
            {
                for &b in &owners.in_sync {
                    if let Some(flag) = self.catching_up.get(b).and_then(|f| f.get(p)) {
                        flag.store(false, Ordering::Release);
                    }
                }
            }
        }
        self.sweep();
    }

    /// Per in-sync backup of the written partitions: the position of its
    /// stream now, which (the writes being queued already) covers them.
    fn targets(&self, writes: &[(usize, u64)]) -> SmallVec<[(usize, u64); 2]> {
        let mut targets = SmallVec::new();
        let table = self.table.load();
        let Some(table) = table.as_ref() else {
            return targets;
        };
        for &(p, _) in writes {
            for b in self.waited_for(p, table.owners(p)) {
                if !targets.iter().any(|&(t, _)| t == b) {
                    let peer = &self.out[b];
                    let buf = peer.buf.lock();
                    targets.push((b, peer.taken.load(Ordering::Relaxed) + buf.len() as u64));
                }
            }
        }
        targets
    }

    /// Waits until every in-sync backup of each written partition, and
    /// every backup catching up from a snapshot it loaded
    /// (`catching_up`), acknowledged the seq; false on timeout.
    ///
    /// It sleeps until the backups answered the batches holding the writes
    /// ([`AckWaiters`]); only when they did and the acks still do not cover
    /// the writes (a backup that refused a change, a new in-sync backup)
    /// does it wait for any ack or table change.
    ///
    /// The timeout needs no timer per write: [`Self::sweep`] wakes every
    /// waiter now and then, and a waiter past [`SYNC_TIMEOUT`] gives up.
    pub async fn wait(&self, writes: &[(usize, u64)]) -> bool {
        let targets = self.targets(writes);
        let started = Instant::now();
        loop {
            let generation = self.table_generation.load(Ordering::Acquire);
            let notified = self.ack_notify.notified();
            // Acknowledged only while this node's lease holds: a primary
            // cut off from the majority, or back from such a cut with a
            // table a newer one has replaced, may be waiting on backups
            // that acknowledged under that old table ([`crate::lease`]).
            let acked = self.all_acked(writes);
            if acked && self.lease.valid() {
                return true;
            }
            if started.elapsed() >= SYNC_TIMEOUT {
                return false;
            }
            match targets
                .iter()
                .find(|&&(b, target)| !acked && !self.out[b].acks.has_answered(target))
            {
                Some(&(b, target)) => {
                    let changed = || {
                        self.table_generation.load(Ordering::Acquire) != generation
                            || started.elapsed() >= SYNC_TIMEOUT
                    };
                    self.out[b].acks.reached(target, changed).await
                }
                None => notified.await,
            }
        }
    }

    /// Wakes every waiting write, so that those past [`SYNC_TIMEOUT`] give
    /// up; the site runs it every [`SWEEP_EVERY`].
    pub fn sweep(&self) {
        self.ack_notify.notify_waiters();
        self.out.iter().for_each(|peer| peer.acks.wake_all());
    }
}

/// Proposes that backup `b` of partition `p` leave the in-sync set (at
/// partition epoch `epoch`); the table that does it sends a snapshot.
/// A proposal that fails without being refused (no leader yet, a commit
/// too slow: a heal or an election) is made again, for up to
/// [`SYNC_TIMEOUT`]. Returns whether the group decided (committed it, or
/// refused it: the partition moved on).
pub(crate) async fn take_out_of_sync(cluster: &Cluster, p: usize, b: usize, epoch: u64) -> bool {
    let Some(md) = cluster.metadata.get() else {
        return false;
    };
    let cmd = crate::metadata::Command::RemoveFromInSync {
        partition: p as u16,
        node: b as u64 + 1,
        expected_epoch: epoch,
    };
    let started = Instant::now();
    loop {
        match md.propose(cmd.clone()).await {
            Ok(_) | Err(crate::metadata::MetadataError::Refused(_)) => return true,
            Err(e) if started.elapsed() >= SYNC_TIMEOUT => {
                tracing::warn!(
                    partition = p,
                    backup = b,
                    "could not take the backup out of the in-sync set: {e}"
                );
                return false;
            }
            Err(_) => tokio::time::sleep(RESEND_REFUSED_AFTER).await,
        }
    }
}

impl Replicator {
    /// A gap `take_gaps` returned could not be acted on (see
    /// [`take_out_of_sync`]): it is returned again after the backup's next
    /// answer, instead of never (the backup would hold every write to the
    /// partition up until the sync timeout, for good).
    pub(crate) fn ask_gap_again(&self, p: usize, b: usize) {
        if let Some(at) = self.gaps.lock().get_mut(&(p, b)) {
            *at = None;
        }
    }

    /// A finished snapshot `take_finished_snapshots` returned could not be
    /// reported (the proposal was not decided): it is returned again.
    pub(crate) fn report_again(&self, p: usize, b: usize, epoch: u64) {
        if let Some(s) = self
            .snapshots
            .lock()
            .get_mut(&(p, b))
            .filter(|s| s.epoch == epoch)
        {
            s.reported = false;
        }
    }
}

/// Where the changes of a batch are (not its markers or snapshot
/// entries), up to the first entry that does not fit (applying the batch
/// refuses it there).
fn held_changes(batch: &[u8], stale: impl Fn(u16, u64) -> bool) -> HeldChanges {
    let mut held = HeldChanges::new();
    let mut at = 0;
    let mut sender_epoch = 0;
    while batch.len() - at >= ENTRY_HEADER {
        let (p, seq, len) = entry_head(&batch[at..]);
        let start = at + ENTRY_HEADER;
        if len > batch.len() - start {
            break;
        }
        if seq == TABLE_EPOCH {
            if let Some(epoch) = batch.get(start..start + 8).and_then(|w| w.try_into().ok()) {
                sender_epoch = u64::from_le_bytes(epoch);
            }
        } else if seq != SNAPSHOT_DATA && seq < FIRST_MARKER && !stale(p, sender_epoch) {
            held.push(Held {
                partition: p,
                seq,
                start: start as u32,
                len: len as u32,
            });
        }
        at = start + len;
    }
    held
}

/// Whether an entry for partition `p` from member `sender`, queued under
/// its table epoch `sender_epoch`, comes from a primary that `table` (this
/// node's) has replaced: the table is newer and names another primary.
/// Such a sender has not learned yet that it lost the partition (it was
/// cut off, or its metadata lags); what it sends must not be applied, let
/// alone acknowledged. A sender with the same or a newer table is trusted:
/// the table it acted on was committed.
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

/// Partition, seq and length of the entry `at` begins with (at least
/// [`ENTRY_HEADER`] bytes).
fn entry_head(at: &[u8]) -> (u16, u64, usize) {
    let h: &[u8; ENTRY_HEADER] = at[..ENTRY_HEADER].try_into().expect("an entry header");
    let [p0, p1, s @ .., l0, l1, l2, l3] = *h;
    (
        u16::from_le_bytes([p0, p1]),
        u64::from_le_bytes(s),
        u32::from_le_bytes([l0, l1, l2, l3]) as usize,
    )
}

/// A snapshot marker: `seq` [`SNAPSHOT_BEGIN`] or [`SNAPSHOT_END`], body
/// the words given (the primary's next seq; for an end, then the snapshot
/// id and its number of entries).
pub(crate) fn put_marker(buf: &mut BytesMut, p: usize, seq: u64, words: &[u64]) {
    buf.put_u16_le(p as u16);
    buf.put_u64_le(seq);
    buf.put_u32_le(8 * words.len() as u32);
    words.iter().for_each(|&w| buf.put_u64_le(w));
}

impl ReplicationSink for Replicator {
    fn backup_taken(&self, partition: usize, seq: u64, id: &str) {
        self.send_named_markers(&[(partition, seq)], BACKUP_TAKEN, id);
    }

    fn logged(&self, partition: usize, seq: u64, change: &Change, encoded: Option<&[u8]>) {
        let table = self.table.load();
        let Some(table) = table.as_ref() else { return };
        let owners = table.owners(partition);
        if owners.primary != self.my_index || owners.backups.is_empty() {
            return;
        }
        // Copied from the log, or else encoded straight into the first
        // backup's buffer (no allocation per change with one backup) and
        // copied from there for the others.
        let len = encoded.map_or_else(|| codec::encoded_len(change), <[u8]>::len);
        let mut copy: Option<Vec<u8>> = None;
        for (i, &b) in owners.backups.iter().enumerate() {
            let peer = &self.out[b];
            let mut buf = peer.buf.lock();
            if buf.len() + len > MAX_PENDING || peer.broken.load(Ordering::Relaxed) {
                drop(buf);
                self.cut_off(b);
                continue;
            }
            peer.stamp(&mut buf, table.epoch);
            buf.put_u16_le(partition as u16);
            buf.put_u64_le(seq);
            buf.put_u32_le(len as u32);
            match encoded.or(copy.as_deref()) {
                Some(e) => buf.put_slice(e),
                None => {
                    let at = buf.len();
                    codec::encode(change, &mut *buf);
                    debug_assert_eq!(
                        buf.len() - at,
                        len,
                        "codec::encoded_len disagrees with codec::encode"
                    );
                    if i + 1 < owners.backups.len() {
                        copy = Some(buf[at..].to_vec());
                    }
                }
            }
            drop(buf);
            peer.ready.notify_one();
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use keyspace::{ChangeKind, DebugClock, KeyspaceConfig, Value, Version};
    use proptest::prelude::*;

    /// Four partitions, a log kept (so received batches are held).
    pub(crate) fn keyspace() -> Arc<Keyspace> {
        Arc::new(Keyspace::new(
            KeyspaceConfig {
                partitions: 4,
                site_id: 1,
                log_retain_bytes: 1 << 20,
                ..Default::default()
            },
            Arc::new(DebugClock::default()),
        ))
    }

    fn replicator() -> Replicator {
        let ks = keyspace();
        for p in 0..4 {
            ks.set_replica(p, true);
        }
        Replicator::new(
            ks,
            std::sync::Weak::new(),
            SharedTable::default(),
            Arc::new(crate::lease::Lease::held(2)),
            2,
            1,
        )
    }

    fn entry(p: u16, seq: u64, key: &str, value: &str) -> BytesMut {
        let change = Change {
            key: Bytes::copy_from_slice(key.as_bytes()),
            version: Version {
                hlc: seq << 16,
                site: 1,
            },
            kind: ChangeKind::Full {
                value: Value::Str(Bytes::copy_from_slice(value.as_bytes())),
                expire_at: 0,
            },
        };
        let mut body = Vec::new();
        codec::encode(&change, &mut body);
        let mut out = BytesMut::new();
        out.put_u16_le(p);
        out.put_u64_le(seq);
        out.put_u32_le(body.len() as u32);
        out.put_slice(&body);
        out
    }

    /// One batch of changes to key "k", (seq, value) each.
    fn batch_of(p: u16, changes: &[(u64, &str)]) -> BytesMut {
        let mut batch = BytesMut::new();
        for &(seq, value) in changes {
            batch.extend_from_slice(&entry(p, seq, "k", value));
        }
        batch
    }

    #[test]
    fn batches_apply_in_seq_order_and_resent_entries_change_nothing() {
        let r = replicator();
        let p = r.ks.partition_of(b"k") as u16;
        let batch = batch_of(p, &[(1, "a"), (2, "b")]);
        assert_eq!(
            r.apply_batch(batch.clone().freeze(), 0).unwrap(),
            vec![(p, 2)]
        );
        // The same batch again: seqs already held are skipped.
        assert_eq!(r.apply_batch(batch.freeze(), 0).unwrap(), vec![(p, 2)]);
        let mut txn = r.ks.txn([&b"k"[..]], 0);
        assert_eq!(
            txn.get(b"k").and_then(|e| e.as_str()).map(|b| b.to_vec()),
            Some(b"b".to_vec())
        );
    }

    /// A failover with two backups: the dead primary (member 0) sent seq 3
    /// to this backup but not to the promoted one (member 2), whose own
    /// change 3 is another history. This backup must not skip it as held
    /// (and acknowledge it), nor apply anything after it, until a snapshot
    /// of the new primary replaces the copy.
    #[test]
    fn a_held_seq_from_a_new_primary_is_a_divergence_not_a_duplicate() {
        let r = replicator();
        let p = r.ks.partition_of(b"k") as u16;
        let old = batch_of(p, &[(1, "a"), (2, "b"), (3, "lost")]);
        assert_eq!(r.apply_batch(old.freeze(), 0).unwrap(), vec![(p, 3)]);
        let new = batch_of(p, &[(3, "acked"), (4, "later")]);
        assert_eq!(
            r.apply_batch(new.freeze(), 2).unwrap(),
            vec![(p, SNAPSHOT_NEEDED)]
        );
        // Nothing of the new primary's is applied or acknowledged, even at
        // a seq past the ones held, until the copy is replaced.
        assert_eq!(
            r.apply_batch(entry(p, 4, "k", "later").freeze(), 2)
                .unwrap(),
            vec![(p, SNAPSHOT_NEEDED)]
        );
        let mut txn = r.ks.txn([&b"k"[..]], 0);
        assert_eq!(
            txn.get(b"k").and_then(|e| e.as_str()).map(|b| b.to_vec()),
            Some(b"lost".to_vec())
        );
        drop(txn);
        // Its snapshot (at the new primary's next seq 4) resets the copy:
        // changes from seq 4 on apply again.
        let mut snap = BytesMut::new();
        for (seq, body) in [
            (SNAPSHOT_BEGIN, [4u64].as_slice()),
            (SNAPSHOT_END, [4u64, 7, 0].as_slice()),
        ] {
            snap.put_u16_le(p);
            snap.put_u64_le(seq);
            snap.put_u32_le(body.len() as u32 * 8);
            body.iter().for_each(|w| snap.put_u64_le(*w));
        }
        assert_eq!(
            r.apply_batch(snap.freeze(), 2).unwrap(),
            vec![(p, 3), (p, SNAPSHOT_END), (p, 7)]
        );
        assert_eq!(
            r.apply_batch(entry(p, 4, "k", "later").freeze(), 2)
                .unwrap(),
            vec![(p, 4)]
        );
    }

    /// A copy that never held anything (a process restarted without its
    /// data, still listed as a backup) does not take a primary's change at
    /// seq 5 as the start of its copy: that is a gap, and it asks for a
    /// snapshot instead of acknowledging what it does not hold.
    #[test]
    fn an_empty_copy_is_not_started_by_a_later_change() {
        let r = replicator();
        let p = r.ks.partition_of(b"k") as u16;
        assert_eq!(
            r.apply_batch(batch_of(p, &[(5, "x")]).freeze(), 0).unwrap(),
            vec![(p, SNAPSHOT_NEEDED)]
        );
        assert_eq!(
            r.ks.with_partition(p as usize, |part, _| (part.len(), part.log.next_seq())),
            (0, 1)
        );
    }

    /// The promoted backup held everything this one did: its first change
    /// follows on, and this backup stays in sync without a snapshot.
    #[test]
    fn a_new_primary_that_shares_the_history_is_followed_without_a_snapshot() {
        let r = replicator();
        let p = r.ks.partition_of(b"k") as u16;
        let old = batch_of(p, &[(1, "a"), (2, "b")]);
        assert_eq!(r.apply_batch(old.freeze(), 0).unwrap(), vec![(p, 2)]);
        let new = entry(p, 3, "k", "c");
        assert_eq!(
            r.apply_batch(new.clone().freeze(), 2).unwrap(),
            vec![(p, 3)]
        );
        // And the new primary's batch again is a duplicate, not a divergence.
        assert_eq!(r.apply_batch(new.freeze(), 2).unwrap(), vec![(p, 3)]);
    }

    #[test]
    fn bad_batches_are_errors() {
        let r = replicator();
        let p = r.ks.partition_of(b"k") as u16;
        let good = entry(p, 1, "k", "v");
        assert_eq!(
            r.apply_batch(Bytes::copy_from_slice(&good[..good.len() - 1]), 0),
            Err(BatchError::Truncated)
        );
        assert_eq!(
            r.apply_batch(entry(9, 1, "k", "v").freeze(), 0),
            Err(BatchError::Partition(9))
        );
        let other = (p + 1) % 4;
        assert_eq!(
            r.apply_batch(entry(other, 1, "k", "v").freeze(), 0),
            Err(BatchError::Partition(other))
        );
    }

    #[test]
    fn a_snapshot_larger_than_a_chunk_streams_ahead_of_queued_changes() {
        let primary = replicator();
        let key = |i: usize| format!("k{i}");
        // About 6 MiB in one partition: six chunks.
        let p = primary.ks.partition_of(b"k0");
        primary.ks.set_replica(p, false);
        let keys: Vec<String> = (0..40_000)
            .map(key)
            .filter(|k| primary.ks.partition_of(k.as_bytes()) == p)
            .collect();
        let mut live = BytesMut::new();
        for (i, k) in keys.iter().enumerate() {
            let value = Value::Str(Bytes::from(vec![b'x'; 600]));
            let change = Change {
                key: Bytes::copy_from_slice(k.as_bytes()),
                version: Version {
                    hlc: (i as u64 + 1) << 16,
                    site: 1,
                },
                kind: ChangeKind::Full {
                    value,
                    expire_at: 0,
                },
            };
            primary.ks.apply_batch(p, vec![change], 0).unwrap();
        }
        let next = primary.ks.with_partition(p, |part, _| part.log.next_seq());
        assert!(primary.send_snapshot(p, 0, 7));
        assert!(!primary.send_snapshot(p, 0, 7), "once per epoch");
        // A change logged after the snapshot point, already queued.
        live.extend_from_slice(&entry(p as u16, next, &keys[0], "after"));
        primary.out[0].buf.lock().extend_from_slice(&live);

        let backup = replicator();
        let mut batches = 0;
        let mut acks = Vec::new();
        while let Some((batch, _)) = primary.take_batch(0) {
            assert!(batch.len() < 2 * crate::snapshot::CHUNK_BYTES);
            acks.extend(backup.apply_batch(batch, 0).unwrap());
            batches += 1;
        }
        assert!(batches > 4, "{batches} batches");
        assert!(acks.contains(&(p as u16, SNAPSHOT_END)));
        assert_eq!(
            acks.last(),
            Some(&(p as u16, next)),
            "the queued change came after the snapshot"
        );
        let (have, want) = (
            backup.ks.with_partition(p, |part, _| part.len()),
            keys.len(),
        );
        assert_eq!(have, want);
        let mut txn = backup.ks.txn([keys[0].as_bytes()], 0);
        assert_eq!(
            txn.get(keys[0].as_bytes())
                .and_then(|e| e.as_str())
                .map(|b| b.to_vec()),
            Some(b"after".to_vec())
        );
    }

    /// Four partitions, each with primary member 0 and backup member 1
    /// (in sync or not), all at partition epoch `epoch`.
    fn table(epoch: u64, in_sync: bool) -> crate::placement::PartitionTable {
        let owners = |_| crate::placement::PartitionOwners {
            primary: 0,
            backups: [1].into_iter().collect(),
            in_sync: if in_sync {
                [1].into_iter().collect()
            } else {
                Default::default()
            },
            epoch,
            moving_to: None,
        };
        crate::placement::PartitionTable::new(epoch, (0..4).map(owners).collect())
    }

    /// A primary (member 0) whose partitions all have member 1 as a
    /// backup that is not in sync yet, with itself as the keyspace's sink.
    /// A replicator's keyspace, for tests outside this module.
    pub(crate) fn keyspace_of(r: &Replicator) -> &Arc<Keyspace> {
        &r.ks
    }

    pub(crate) fn primary_with_backup() -> Arc<Replicator> {
        primary_with_lease(Arc::new(crate::lease::Lease::held(2)))
    }

    fn primary_with_lease(lease: Arc<crate::lease::Lease>) -> Arc<Replicator> {
        let ks = keyspace();
        let shared = SharedTable::default();
        shared.store(Some(Arc::new(table(1, false))));
        let r = Arc::new(Replicator::new(
            ks.clone(),
            std::sync::Weak::new(),
            shared,
            lease,
            2,
            0,
        ));
        ks.set_sink(r.clone());
        r
    }

    /// Every batch queued for member 1, applied by `backup`, its acks
    /// returned to `primary`.
    fn ship(primary: &Replicator, backup: &Replicator) {
        while let Some((batch, _)) = primary.take_batch(1) {
            answer(primary, backup, batch);
        }
    }

    /// `batch` applied by `backup`, its acks returned to `primary` (as
    /// member 1); returns the acks.
    fn answer(primary: &Replicator, backup: &Replicator, batch: Bytes) -> Vec<(u16, u64)> {
        let applied = backup.apply_batch(batch, 0).unwrap();
        let mut acks = BytesMut::new();
        Replicator::encode_acks(&applied, &mut acks);
        primary.acked_by(1, acks.freeze());
        applied
    }

    fn contents(r: &Replicator, p: usize) -> Vec<(Bytes, Version)> {
        r.ks.with_partition(p, |part, _| {
            let mut keys: Vec<_> = part.iter().map(|(k, e)| (k.clone(), e.version)).collect();
            keys.sort();
            keys
        })
    }

    /// A backup's logs store nothing; promoted, its log holds what it
    /// received from where every remote site applied, as its primary's
    /// did, and it keeps that through being handed back and forth.
    #[test]
    fn a_promoted_backup_logs_what_it_received_from_where_every_site_applied() {
        let primary = primary_with_backup();
        let backup = replicator();
        let p = primary.ks.partition_of(b"k0");
        for i in 1..=10u64 {
            let change = Change {
                key: Bytes::from(format!("k{}", i % 3)),
                version: Version {
                    hlc: i << 16,
                    site: 1,
                },
                kind: ChangeKind::Full {
                    value: Value::Str(Bytes::from(vec![b'v'; 100 * i as usize])),
                    expire_at: 0,
                },
            };
            let p_of = primary.ks.partition_of(&change.key);
            primary.ks.apply_batch(p_of, vec![change], 0).unwrap();
        }
        ship(&primary, &backup);
        let log = |r: &Replicator, from: u64| {
            r.ks.with_partition(p, |part, _| {
                part.log
                    .read_from(from)
                    .map(|it| it.map(|l| (l.seq, l.encoded.to_vec())).collect::<Vec<_>>())
            })
        };
        let next = backup.ks.with_partition(p, |part, _| part.log.next_seq());
        assert!(next > 3, "changes of partition {p} reached the backup");
        assert_eq!(
            backup.ks.with_partition(p, |part, _| part.log.len()),
            0,
            "a backup's log stores nothing"
        );
        assert!(backup.ks.log_bytes() > 0, "the batches are held instead");
        backup.ks.release_log_before(p, 3);
        // Promoted with another copy (one pass over what was received).
        backup.ks.set_replicas(&[(p, false), ((p + 1) % 4, false)]);
        let want = log(&primary, 3).unwrap();
        assert_eq!(want.len() as u64, next - 3);
        assert_eq!(log(&backup, 3), Some(want.clone()));
        assert_eq!(log(&backup, 2), None, "what every site applied is not kept");
        // Handed back (a handover), then promoted again.
        backup.ks.set_replica(p, true);
        assert_eq!(backup.ks.with_partition(p, |part, _| part.log.len()), 0);
        backup.ks.set_replica(p, false);
        assert_eq!(log(&backup, 3), Some(want));
        // A snapshot replaces the copy: nothing of the old one comes back.
        backup.ks.set_replica(p, true);
        backup.ks.reset_replica(p, next + 5, 0).unwrap();
        backup.ks.set_replica(p, false);
        assert_eq!(
            backup
                .ks
                .with_partition(p, |part, _| (part.log.len(), part.log.next_seq())),
            (0, next + 5)
        );
    }

    /// A stale primary's batch for a partition this node leads is held
    /// before it is refused; refused, it goes at once instead of keeping
    /// the received queue's front until the budget trims it.
    #[test]
    fn changes_a_leader_refuses_are_not_held() {
        let primary = primary_with_backup();
        let backup = replicator();
        let p = primary.ks.partition_of(b"k0");
        let keys: Vec<Bytes> = (0..200)
            .map(|i| Bytes::from(format!("k{i}")))
            .filter(|k| primary.ks.partition_of(k) == p)
            .take(6)
            .collect();
        let write = |i: u64| {
            for k in &keys {
                let change = Change {
                    key: k.clone(),
                    version: Version {
                        hlc: i << 16,
                        site: 1,
                    },
                    kind: ChangeKind::Full {
                        value: Value::Str(Bytes::from(vec![b'v'; 300])),
                        expire_at: 0,
                    },
                };
                primary.ks.apply_batch(p, vec![change], 0).unwrap();
            }
        };
        write(1);
        ship(&primary, &backup);
        backup.ks.set_replica(p, false);
        assert_eq!(
            backup.ks.with_partition(p, |part, _| part.log.len()),
            keys.len(),
            "promoted with what it received"
        );
        // The old primary goes on sending: refused, and not kept.
        write(2);
        ship(&primary, &backup);
        let (len, log) = backup
            .ks
            .with_partition(p, |part, _| (part.log.len(), part.log.allocated()));
        assert_eq!(len, keys.len());
        assert_eq!(
            backup.ks.log_bytes(),
            log,
            "nothing held but the promoted copy's log"
        );
    }

    /// Snapshots taken again and again while a writer keeps logging and
    /// the connection keeps shipping: no change logged after a snapshot's
    /// point may reach the backup ahead of it (the backup would
    /// acknowledge it, then lose it to the snapshot's reset).
    #[test]
    fn snapshots_taken_while_changes_flow_lose_none_of_them() {
        let primary = primary_with_backup();
        let backup = replicator();
        let p = primary.ks.partition_of(b"k0");
        let keys: Vec<Bytes> = (0..2_000)
            .map(|i| Bytes::from(format!("k{i}")))
            .filter(|k| primary.ks.partition_of(k) == p)
            .take(64)
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (primary, stop, keys) = (primary.clone(), stop.clone(), keys.clone());
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let change = Change {
                        key: keys[i as usize % keys.len()].clone(),
                        version: Version {
                            hlc: i << 16,
                            site: 1,
                        },
                        kind: ChangeKind::Full {
                            value: Value::Str(Bytes::from(i.to_string())),
                            expire_at: 0,
                        },
                    };
                    primary.ks.apply_batch(p, vec![change], 0).unwrap();
                }
            })
        };
        let snapshotter = {
            let (primary, stop) = (primary.clone(), stop.clone());
            std::thread::spawn(move || {
                for epoch in 2..3_000 {
                    assert!(primary.send_snapshot(p, 1, epoch));
                    std::thread::yield_now();
                }
                stop.store(true, Ordering::Relaxed);
            })
        };
        while !stop.load(Ordering::Relaxed) {
            ship(&primary, &backup);
        }
        writer.join().unwrap();
        snapshotter.join().unwrap();
        ship(&primary, &backup);
        let last = primary
            .ks
            .with_partition(p, |part, _| part.log.next_seq() - 1);
        assert_eq!(
            backup
                .ks
                .with_partition(p, |part, _| part.log.next_seq() - 1),
            last
        );
        assert_eq!(primary.acked[1][p].load(Ordering::Acquire), last);
        assert_eq!(contents(&backup, p), contents(&primary, p));
        assert_eq!(primary.take_finished_snapshots(), vec![(p, 1, 2_999)]);
    }

    /// The end of a snapshot that a newer one replaced, acknowledged
    /// late, does not count the backup as loaded.
    #[test]
    fn the_late_end_of_a_replaced_snapshot_does_not_count() {
        let primary = primary_with_backup();
        let backup = replicator();
        let p = primary.ks.partition_of(b"k");
        assert!(primary.send_snapshot(p, 1, 2));
        let (first, _) = primary.take_batch(1).unwrap();
        assert!(primary.send_snapshot(p, 1, 3));
        answer(&primary, &backup, first);
        assert_eq!(primary.take_finished_snapshots(), vec![]);
        ship(&primary, &backup);
        assert_eq!(primary.take_finished_snapshots(), vec![(p, 1, 3)]);
    }

    /// The primary writes value `i` to key "k" at hlc `i`.
    fn write_k(primary: &Replicator, i: u64) {
        let change = Change {
            key: Bytes::from_static(b"k"),
            version: Version {
                hlc: i << 16,
                site: 1,
            },
            kind: ChangeKind::Full {
                value: Value::Str(Bytes::from(i.to_string())),
                expire_at: 0,
            },
        };
        primary
            .ks
            .apply_batch(primary.ks.partition_of(b"k"), vec![change], 0)
            .unwrap();
    }

    /// A table at `epoch` where every partition is led by member
    /// `primary` and backed up by member 1.
    fn led_by(primary: usize, epoch: u64) -> Option<Arc<crate::placement::PartitionTable>> {
        let mut t = table(epoch, true);
        t.epoch = epoch;
        t.partitions.iter_mut().for_each(|o| o.primary = primary);
        Some(Arc::new(t))
    }

    /// A primary that a newer table replaced (it was cut off, or its
    /// metadata lags) gets nothing applied, held or acknowledged at a
    /// backup that has the newer table; a primary whose table merely lags
    /// the backup's, but which the backup's table still names, is followed.
    #[test]
    fn a_replaced_primary_gets_nothing_applied_or_acknowledged() {
        let primary = primary_with_backup(); // its table: epoch 1, member 0 leads
        write_k(&primary, 1);
        let (batch, _) = primary.take_batch(1).expect("a batch for the backup");
        let p = primary.ks.partition_of(b"k");
        let backup = replicator();
        backup.table.store(led_by(2, 5)); // epoch 5: member 2 leads now
        assert_eq!(
            backup.apply_batch(batch.clone(), 0).unwrap(),
            vec![],
            "no ack for the replaced primary"
        );
        assert!(contents(&backup, p).is_empty(), "nothing applied");
        assert_eq!(backup.ks.log_bytes(), 0, "nothing held");
        // The same batch, the backup's newer table still naming member 0.
        backup.table.store(led_by(0, 5));
        assert_eq!(
            backup.apply_batch(batch.clone(), 0).unwrap(),
            vec![(p as u16, 1)]
        );
        // And a sender whose table is as new as the backup's is trusted.
        let fresh = replicator();
        fresh.table.store(led_by(2, 1));
        assert_eq!(fresh.apply_batch(batch, 0).unwrap(), vec![(p as u16, 1)]);
    }

    /// What may leave the site is what outlives the primary: everything
    /// while no backup is waited for, else up to what every waited-for
    /// backup acknowledged (a loaded snapshot counts for what it held),
    /// and, on a promoted copy, what its log held when promoted.
    #[test]
    fn only_what_the_backups_hold_is_durable() {
        let primary = primary_with_backup();
        let backup = replicator();
        let p = primary.ks.partition_of(b"k");
        let write = |i: u64| write_k(&primary, i);
        write(1);
        assert_eq!(
            primary.durable_seq(p),
            u64::MAX,
            "the backup is not in sync: nothing is waited for"
        );
        primary.table.store(Some(Arc::new(table(2, true))));
        primary.table_changed();
        assert_eq!(
            primary.durable_seq(p),
            0,
            "the backup has acknowledged nothing yet"
        );
        ship(&primary, &backup);
        assert_eq!(primary.durable_seq(p), 1);
        write(2);
        write(3);
        assert_eq!(
            primary.durable_seq(p),
            1,
            "seqs 2 and 3 are not on the backup yet"
        );
        ship(&primary, &backup);
        assert_eq!(primary.durable_seq(p), 3);
        // A new copy from a snapshot: nothing until it is loaded, then
        // what the snapshot held, though no change came after it.
        backup.ks.set_replica(p, true);
        assert!(primary.send_snapshot(p, 1, 3));
        assert_eq!(primary.durable_seq(p), 0);
        ship(&primary, &backup);
        assert_eq!(primary.durable_seq(p), 3);
        assert_eq!(backup.durable_seq(p), 0, "not its primary");
        // Promoted, a copy may ship what its log held.
        backup.ks.set_replica(p, false);
        assert_eq!(
            backup.ks.with_partition(p, |part, _| part.promoted_through),
            3
        );
    }

    /// A write its backups acknowledged is released only while the
    /// primary's lease holds: a primary cut off from the majority, or back
    /// from a cut with a table that was replaced, acknowledges nothing.
    #[tokio::test]
    async fn a_write_is_released_only_while_the_lease_holds() {
        let lease = Arc::new(crate::lease::Lease::new(2));
        let primary = primary_with_lease(lease.clone());
        primary.table.store(Some(Arc::new(table(2, true))));
        let backup = replicator();
        write_k(&primary, 1);
        let p = primary.ks.partition_of(b"k");
        ship(&primary, &backup);
        assert_eq!(primary.durable_seq(p), 1, "the backup has it");
        let waiting = tokio::spawn({
            let primary = primary.clone();
            async move { primary.wait(&[(p, 1)]).await }
        });
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert!(!waiting.is_finished(), "no lease: not acknowledged");
        assert_eq!(lease.refresh(Some(0), &[0, 1]), (false, false));
        lease.grant(1, lease.now());
        assert_eq!(lease.refresh(Some(0), &[0, 1]), (false, true));
        primary.sweep();
        let acked = tokio::time::timeout(Duration::from_secs(2), waiting)
            .await
            .expect("released")
            .unwrap();
        assert!(acked);
    }

    /// A connection broke with a batch in flight: the connection gives it
    /// back, it goes out again ahead of what was queued meanwhile, and the
    /// backup fills in what it missed instead of finding a gap. Given back
    /// after it did arrive, it changes nothing.
    #[test]
    fn a_batch_unanswered_when_its_connection_broke_is_sent_again() {
        let primary = primary_with_backup();
        let backup = replicator();
        let p = primary.ks.partition_of(b"k");
        let write = |i: u64| write_k(&primary, i);
        write(1);
        ship(&primary, &backup);
        write(2);
        write(3);
        let (lost, _) = primary.take_batch(1).unwrap(); // in flight when the connection broke
        write(4); // queued while it was down
        primary.requeue(1, [lost]);
        let (batch, _) = primary.take_batch(1).unwrap();
        let acks = answer(&primary, &backup, batch.clone());
        assert_eq!(acks, vec![(p as u16, 4)], "seqs 2 to 4 arrive in order");
        assert_eq!(contents(&backup, p), contents(&primary, p));
        // The same batch given back though it had arrived: all skipped.
        primary.requeue(1, [batch]);
        ship(&primary, &backup);
        assert_eq!(contents(&backup, p), contents(&primary, p));
    }

    /// A node that does not hold the partition as a backup copy yet (its
    /// table is older than the primary's) refuses the snapshot at its end
    /// instead of acknowledging what it did not load; the primary forgets
    /// it, so that it can be sent again.
    #[test]
    fn a_snapshot_the_backup_could_not_load_is_refused_not_acknowledged() {
        let primary = primary_with_backup();
        let backup = replicator();
        let p = primary.ks.partition_of(b"k");
        backup.ks.set_replica(p, false);
        assert!(primary.send_snapshot(p, 1, 2));
        let (batch, _) = primary.take_batch(1).unwrap();
        let applied = answer(&primary, &backup, batch);
        assert_eq!(
            applied.iter().map(|a| a.1).collect::<Vec<_>>(),
            vec![SNAPSHOT_REFUSED, 1]
        );
        assert_eq!(primary.take_finished_snapshots(), vec![]);
        assert_eq!(primary.take_refused_snapshots(), vec![(p, 1, 2)]);
        assert!(
            primary.send_snapshot(p, 1, 2),
            "forgotten: it can be sent again"
        );
        backup.ks.set_replica(p, true);
        ship(&primary, &backup);
        assert_eq!(primary.take_finished_snapshots(), vec![(p, 1, 2)]);
    }

    /// A chunk lost with a connection that broke mid-snapshot: the end
    /// finds entries missing and refuses the snapshot.
    #[test]
    fn a_snapshot_missing_a_chunk_is_refused() {
        let primary = primary_with_backup();
        let backup = replicator();
        let p = primary.ks.partition_of(b"k0");
        let keys = (0..40_000)
            .map(|i| format!("k{i}"))
            .filter(|k| primary.ks.partition_of(k.as_bytes()) == p);
        for (i, k) in keys.enumerate() {
            let change = Change {
                key: Bytes::from(k),
                version: Version {
                    hlc: (i as u64 + 1) << 16,
                    site: 1,
                },
                kind: ChangeKind::Full {
                    value: Value::Str(Bytes::from(vec![b'x'; 600])),
                    expire_at: 0,
                },
            };
            primary.ks.apply_batch(p, vec![change], 0).unwrap();
        }
        primary.take_batch(1); // the changes queued so far
        assert!(primary.send_snapshot(p, 1, 2));
        let mut kinds = Vec::new();
        let mut n = 0;
        while let Some((batch, _)) = primary.take_batch(1) {
            n += 1;
            if n != 2 {
                kinds.extend(
                    backup
                        .apply_batch(batch, 0)
                        .unwrap()
                        .into_iter()
                        .map(|a| a.1),
                );
            }
        }
        assert!(n > 3, "{n} batches");
        assert!(
            kinds.contains(&SNAPSHOT_REFUSED) && !kinds.contains(&SNAPSHOT_END),
            "{kinds:?}"
        );
    }

    /// A backup sent a change past the next seq it holds asks for a
    /// snapshot; its primary asks once per partition epoch, and only for
    /// an in-sync backup (one that is not has a snapshot coming).
    #[test]
    fn a_gap_at_an_in_sync_backup_asks_for_a_resync_once_per_epoch() {
        let primary = primary_with_backup();
        let backup = replicator();
        let p = backup.ks.partition_of(b"k");
        let mut batch = entry(p as u16, 1, "k", "a");
        batch.extend_from_slice(&entry(p as u16, 3, "k", "c"));
        batch.extend_from_slice(&entry(p as u16, 4, "k", "d"));
        let applied = answer(&primary, &backup, batch.freeze());
        assert_eq!(applied, vec![(p as u16, 1), (p as u16, SNAPSHOT_NEEDED)]);
        assert_eq!(
            primary.acked[1][p].load(Ordering::Acquire),
            1,
            "the marker is not a seq"
        );
        assert_eq!(primary.take_gaps(&table(5, true)), vec![(p, 1, 5)]);
        assert_eq!(
            primary.take_gaps(&table(5, true)),
            vec![],
            "asked already at this epoch"
        );
        assert_eq!(
            primary.take_gaps(&table(6, true)),
            vec![(p, 1, 6)],
            "the ask was lost: again"
        );
        primary.ask_gap_again(p, 1);
        assert_eq!(
            primary.take_gaps(&table(6, true)),
            vec![(p, 1, 6)],
            "the proposal failed: again at the same epoch"
        );
        assert_eq!(
            primary.take_gaps(&table(7, false)),
            vec![],
            "out of sync: a snapshot is coming"
        );
        assert_eq!(primary.take_gaps(&table(8, true)), vec![], "and forgotten");
    }

    proptest! {
        #[test]
        fn random_batches_never_panic(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            let r = replicator();
            let _ = r.apply_batch(Bytes::from(data), 0);
        }

        /// Acks from a peer, whatever they hold, never panic and never
        /// count a marker value as an acknowledged seq.
        #[test]
        fn random_acks_never_panic(acks in proptest::collection::vec((0u16..6, prop_oneof![
            0u64..50,
            Just(SNAPSHOT_END),
            Just(SNAPSHOT_NEEDED),
            Just(SNAPSHOT_REFUSED),
            Just(SNAPSHOT_BEGIN),
            Just(WAN_APPLIED),
        ]), 0..20), cut in 0usize..10) {
            let primary = primary_with_backup();
            primary.send_snapshot(0, 1, 2);
            let mut bytes = BytesMut::new();
            Replicator::encode_acks(&acks, &mut bytes);
            let len = bytes.len().saturating_sub(cut);
            primary.acked_by(1, bytes.freeze().slice(..len));
            let _ = primary.take_finished_snapshots();
            let _ = primary.take_refused_snapshots();
            for p in 0..4 {
                prop_assert!(primary.acked[1][p].load(Ordering::Acquire) < 50);
            }
        }
    }
}
