//! The primary side: snapshots of one partition on their way to a new
//! replica, sent in chunks, and what the replica answered about them.
//!
//! The copy is taken under the partition lock, at the primary's next seq,
//! as the entries' keys and values (reference-counted: cheap) rather than
//! encoded bytes, and encoded [`CHUNK_BYTES`] at a time as the connection
//! to the replica asks for batches. A replica's stream sends its snapshots
//! before any change queued for it, so every change logged after a
//! snapshot's point follows its end entry; changes from before it arrive
//! after the end and change nothing (the replica has their seqs). The size
//! of a partition therefore never has to fit in the per-replica queue.
//!
//! The end entry carries a snapshot id that the replica's ack returns, so
//! the late ack of a snapshot that a newer one replaced (new partition
//! epoch) does not count the replica in sync while it is still loading the
//! newer one.

use std::sync::atomic::Ordering;

use bytes::BytesMut;
use keyspace::{codec, Change};

use crate::replication::stream::Entry;
use crate::replication::Replicator;

/// Bytes of snapshot entries per batch.
pub const CHUNK_BYTES: usize = 1 << 20;

/// A snapshot being sent, chunk by chunk.
pub struct SnapshotStream {
    pub partition: usize,
    /// Entries in the whole snapshot (sent with the end entry).
    total: u64,
    /// The primary's next seq when the copy was taken.
    next: u64,
    /// The copy's settled point (see [`Entry::SnapshotBegin`]).
    settled: u64,
    /// Sent with the end entry, acknowledged with it.
    id: u64,
    entries: std::vec::IntoIter<Change>,
    /// A catch-up instead: the replica's copy goes on at this seq with a
    /// last change of this version, and the log's changes from it follow.
    catch_up: Option<(u64, keyspace::Version)>,
    changes: std::vec::IntoIter<(u64, bytes::Bytes)>,
    begun: bool,
}

impl SnapshotStream {
    pub fn new(
        partition: usize,
        (next, settled): (u64, u64),
        id: u64,
        entries: Vec<Change>,
    ) -> SnapshotStream {
        SnapshotStream {
            partition,
            next,
            settled,
            id,
            total: entries.len() as u64,
            entries: entries.into_iter(),
            catch_up: None,
            changes: Vec::new().into_iter(),
            begun: false,
        }
    }

    /// A catch-up of a copy at `from` (whose last change has `version`)
    /// with the log's `changes` from `from` up to `next - 1`.
    pub fn catch_up(
        partition: usize,
        next: u64,
        (from, version): (u64, keyspace::Version),
        id: u64,
        changes: Vec<(u64, bytes::Bytes)>,
    ) -> SnapshotStream {
        SnapshotStream {
            catch_up: Some((from, version)),
            changes: changes.into_iter(),
            ..SnapshotStream::new(partition, (next, 0), id, Vec::new())
        }
    }

    pub fn keys(&self) -> usize {
        self.entries.len()
    }

    /// Appends the next chunk (the begin entry first, the end entry last)
    /// to `out`; true once the end entry is in.
    pub fn next_chunk(&mut self, out: &mut BytesMut) -> bool {
        let partition = self.partition as u16;
        if !self.begun {
            match self.catch_up {
                Some((next, v)) => Entry::CatchUpBegin {
                    partition,
                    next,
                    hlc: v.hlc,
                    site: v.site,
                },
                None => Entry::SnapshotBegin {
                    partition,
                    next: self.next,
                    settled: self.settled,
                },
            }
            .encode(out);
            self.begun = true;
        }
        let start = out.len();
        while out.len() - start < CHUNK_BYTES {
            let Some((seq, change)) = self.changes.next() else {
                break;
            };
            Entry::Change {
                partition,
                seq,
                change: &change,
            }
            .encode(out);
        }
        let mut body = Vec::new();
        while out.len() - start < CHUNK_BYTES {
            let Some(change) = self.entries.next() else {
                if self.changes.len() > 0 {
                    return false;
                }
                Entry::SnapshotEnd {
                    partition,
                    next: self.next,
                    id: self.id,
                    entries: self.total,
                }
                .encode(out);
                return true;
            };
            body.clear();
            codec::encode(&change, &mut body);
            Entry::SnapshotData {
                partition,
                change: &body,
            }
            .encode(out);
        }
        false
    }
}

/// A snapshot queued for a replica.
pub(in crate::replication) struct SnapshotSent {
    /// The partition epoch it was sent for.
    epoch: u64,
    /// Which snapshot this is: its end entry carries the id and the
    /// replica acknowledges it with it, so the end of an earlier snapshot
    /// of the same partition (replaced while its ack was on the way)
    /// never counts for this one.
    id: u64,
    /// The replica acknowledged its end.
    acknowledged: bool,
    /// The replica refused it ([`crate::replication::Ack::SnapshotRefused`]).
    refused: bool,
    /// [`Replicator::take_finished_snapshots`] returned it.
    reported: bool,
    /// The partition's last seq when the replica acknowledged the end:
    /// writes up to it may have been acknowledged without this replica,
    /// so it is reported in sync only once it acknowledged this seq.
    need: Option<u64>,
}

impl Replicator {
    /// Queues a snapshot of partition `p` for replica `r`, once per
    /// partition epoch. Returns false when one was already queued.
    pub fn send_snapshot(&self, p: usize, r: usize, epoch: u64) -> bool {
        let primary = &self.primary;
        let id = {
            let mut snaps = primary.snapshots.lock();
            if snaps.get(&(p, r)).is_some_and(|s| s.epoch == epoch) {
                return false;
            }
            let id = primary.snapshot_ids.fetch_add(1, Ordering::Relaxed) + 1;
            let sent = SnapshotSent {
                epoch,
                id,
                acknowledged: false,
                refused: false,
                reported: false,
                need: None,
            };
            snaps.insert((p, r), sent);
            id
        };
        let queue = &primary.queues[r];
        let offer = primary.offers.lock().remove(&(p, r));
        let keys = self.ks.with_partition(p, |part, _| {
            let next = part.log.next_seq();
            let sent = &primary.sent;
            let catch_up = offer.and_then(|o| Some((o, catch_up_changes(part, o)?)));
            let (stream, keys) = match catch_up {
                Some((offer, changes)) => {
                    sent.catch_ups.fetch_add(1, Ordering::Relaxed);
                    sent.catch_up_changes
                        .fetch_add(changes.len() as u64, Ordering::Relaxed);
                    (SnapshotStream::catch_up(p, next, offer, id, changes), None)
                }
                None => {
                    // Entries, then tombstones (so older writes from other
                    // sites keep losing on the new copy).
                    let entries = part.iter().map(|(key, e)| Change {
                        key: key.to_bytes(),
                        version: e.version,
                        kind: keyspace::ChangeKind::Full {
                            value: e.value.clone(),
                            expire_at: e.expire_at,
                        },
                    });
                    let entries: Vec<Change> = entries.chain(part.tombstone_changes()).collect();
                    let stream =
                        SnapshotStream::new(p, (next, part.tombstones.settled()), id, entries);
                    let keys = stream.keys();
                    sent.snapshots.fetch_add(1, Ordering::Relaxed);
                    sent.snapshot_keys.fetch_add(keys as u64, Ordering::Relaxed);
                    (stream, Some(keys))
                }
            };
            // The replica's acks start over from the snapshot (or catch-up).
            primary.acked[r][p].store(0, Ordering::Release);
            primary.snapshot_point[r][p].store(next, Ordering::Release);
            primary.catching_up[r][p].store(false, Ordering::Release);
            // Queued before the lock lets the next change be logged, so
            // no change past the snapshot's point can reach the replica
            // ahead of its begin entry (see `take_batch`).
            let mut queued = queue.snapshots.lock();
            queued.retain(|s| s.partition != p);
            queued.push_back(stream);
            keys
        });
        match keys {
            Some(keys) => tracing::info!(
                partition = p,
                replica = r,
                keys,
                "snapshot queued for a new replica"
            ),
            None => tracing::info!(
                partition = p,
                replica = r,
                "catch-up from the log queued for a copy loaded from disk"
            ),
        }
        queue.ready.notify_one();
        true
    }

    /// Member `peer` answered the end of snapshot `id` of partition `p`:
    /// `loaded` it, or refused it.
    pub(super) fn snapshot_answered(&self, peer: usize, p: usize, id: u64, loaded: bool) {
        let primary = &self.primary;
        let counted = match primary
            .snapshots
            .lock()
            .get_mut(&(p, peer))
            .filter(|s| s.id == id)
        {
            Some(s) if loaded && !s.acknowledged => {
                s.acknowledged = true;
                // It holds what the snapshot held (see `durable_seq`):
                // an idle partition's acks would never get there.
                if let (Some(a), Some(point)) = (
                    primary.acked[peer].get(p),
                    primary.snapshot_point[peer].get(p),
                ) {
                    let held = point.load(Ordering::Acquire).saturating_sub(1);
                    a.fetch_max(held, Ordering::AcqRel);
                }
                true
            }
            Some(s) if !loaded => {
                s.refused = true;
                primary.refused_snapshots.store(true, Ordering::Release);
                false
            }
            _ => false,
        };
        if counted {
            primary.answered_snapshots.lock().insert((p, peer));
            // Counted for acks first, then the last seq read under the
            // partition's lock (with the snapshots' lock let go: the two
            // are never nested): a write logged after that sees the flag
            // when it checks its acks.
            primary.catching_up[peer][p].store(true, Ordering::Release);
            let last = self.ks.with_partition(p, |part, _| part.log.next_seq() - 1);
            if let Some(s) = primary
                .snapshots
                .lock()
                .get_mut(&(p, peer))
                .filter(|s| s.id == id)
            {
                s.need = Some(last);
            }
        }
    }

    /// Snapshots whose end the replica acknowledged, whose replica has
    /// since acknowledged every change logged before that (see
    /// [`SnapshotSent::need`]), and that nobody has reported yet:
    /// (partition, replica, partition epoch).
    pub fn take_finished_snapshots(&self) -> Vec<(usize, usize, u64)> {
        let mut done = Vec::new();
        let mut answered = self.primary.answered_snapshots.lock();
        if answered.is_empty() {
            return done;
        }
        let mut snapshots = self.primary.snapshots.lock();
        answered.retain(|&(p, r)| {
            let Some(s) = snapshots.get_mut(&(p, r)) else {
                return false; // forgotten (refused, its replica gone)
            };
            let acked = || self.primary.acked[r][p].load(Ordering::Acquire);
            if !s.acknowledged || s.reported {
                return false;
            }
            if s.need.is_some_and(|need| acked() >= need) {
                s.reported = true;
                done.push((p, r, s.epoch));
                return false;
            }
            true
        });
        done
    }

    /// Snapshots the replica refused, forgotten here so that they can be
    /// sent again: (partition, replica, partition epoch).
    pub fn take_refused_snapshots(&self) -> Vec<(usize, usize, u64)> {
        let mut refused = Vec::new();
        if !self.primary.refused_snapshots.swap(false, Ordering::AcqRel) {
            return refused;
        }
        self.primary.snapshots.lock().retain(|&(p, r), s| {
            if s.refused {
                refused.push((p, r, s.epoch));
            }
            !s.refused
        });
        refused
    }

    /// A finished snapshot `take_finished_snapshots` returned could not be
    /// reported (the proposal was not decided): it is returned again.
    pub(crate) fn report_again(&self, p: usize, r: usize, epoch: u64) {
        if let Some(s) = self
            .primary
            .snapshots
            .lock()
            .get_mut(&(p, r))
            .filter(|s| s.epoch == epoch)
        {
            s.reported = false;
        } else {
            return;
        }
        self.primary.answered_snapshots.lock().insert((p, r));
    }
}

/// The changes a copy at `from` whose last change has `version` lacks, if
/// this log holds them and holds that very change at `from - 1` (the
/// copy's history is this primary's up to there).
fn catch_up_changes(
    part: &keyspace::Partition,
    (from, version): (u64, keyspace::Version),
) -> Option<Vec<(u64, bytes::Bytes)>> {
    let next = part.log.next_seq();
    if from < 2 || from > next || part.log.first_seq() > from - 1 {
        return None;
    }
    let (last, _) = codec::decode(part.log.get(from - 1)?).ok()?;
    if last.version != version {
        return None;
    }
    (from..next)
        .map(|seq| Some((seq, bytes::Bytes::copy_from_slice(part.log.get(seq)?))))
        .collect()
}

impl Replicator {
    /// Member `peer` holds copies loaded from its disk: (partition, the
    /// seq each goes on at, the version of its last change). Its next
    /// snapshot of each is a catch-up when this node's log allows.
    pub fn offered(&self, peer: usize, copies: &[(u16, u64, keyspace::Version)]) {
        let mut offers = self.primary.offers.lock();
        offers.retain(|&(_, r), _| r != peer);
        for &(p, next, version) in copies {
            if (p as usize) < self.ks.partitions() as usize {
                offers.insert((p as usize, peer), (next, version));
            }
        }
    }

    /// Snapshots and catch-ups this node sent as a primary.
    pub fn sent(&self) -> &super::SentCounts {
        &self.primary.sent
    }
}
