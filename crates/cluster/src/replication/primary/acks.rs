//! The primary side: what each replica acknowledged, and the writes that
//! wait for it.
//!
//! A write is acknowledged to its client once every replica it waits for
//! ([`Replicator::wait`]: the in-sync ones, and those catching up from a
//! snapshot they loaded) acknowledged its seq, and only while this node's
//! lease holds. The same acks say how much of a partition outlives this
//! node ([`Replicator::durable_seq`]), which is all a WAN publisher ships.

use std::sync::atomic::Ordering;
use std::time::Instant;

use bytes::Bytes;
use smallvec::SmallVec;

use crate::placement::{PartitionOwners, PartitionTable};
use crate::replication::stream::{Ack, Acks};
use crate::replication::{Replicator, SYNC_TIMEOUT};

/// The partition table as it stood when [`Replicator::durability`] was
/// called, to read [`Replicator::durable_seq`] of many partitions.
pub struct Durability<'a> {
    r: &'a Replicator,
    table: arc_swap::Guard<Option<std::sync::Arc<PartitionTable>>>,
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
            .map(|r| self.r.primary.acked[r][p].load(Ordering::Acquire))
            .min()
            .unwrap_or(u64::MAX)
    }
}

impl Replicator {
    /// Takes in an ack frame from member `peer`.
    pub fn acked_by(&self, peer: usize, acks: Bytes) {
        for ack in Acks::new(&acks) {
            match ack {
                Ack::Applied { partition, seq } => {
                    if let Some(a) = self.primary.acked[peer].get(partition as usize) {
                        a.fetch_max(seq, Ordering::AcqRel);
                    }
                }
                Ack::SnapshotNeeded { partition } => {
                    if partition < self.ks.partitions() {
                        let gap = (partition as usize, peer);
                        self.primary.gaps.lock().entry(gap).or_insert(None);
                    }
                }
                Ack::SnapshotLoaded { partition, id } => {
                    self.snapshot_answered(peer, partition as usize, id, true)
                }
                Ack::SnapshotRefused { partition, id } => {
                    self.snapshot_answered(peer, partition as usize, id, false)
                }
            }
        }
        self.primary.ack_notify.notify_waiters();
    }

    /// Partitions whose in-sync replica reported a gap and for which no
    /// resync was asked at the current partition epoch: (partition,
    /// replica, epoch), each returned once per epoch. A gap reported by a
    /// replica that is not in sync is forgotten: a snapshot is on its way
    /// (changes queued before it can arrive first and not fit).
    pub fn take_gaps(&self, table: &PartitionTable) -> Vec<(usize, usize, u64)> {
        let mut asked = Vec::new();
        self.primary.gaps.lock().retain(|&(p, r), at| {
            let o = table.owners(p);
            if o.primary != self.my_index || !o.in_sync.contains(&r) {
                return false;
            }
            if *at != Some(o.epoch) {
                *at = Some(o.epoch);
                asked.push((p, r, o.epoch));
            }
            true
        });
        asked
    }

    /// A gap `take_gaps` returned could not be acted on (the proposal to
    /// take the replica out of the in-sync set was not decided): it is
    /// returned again after the replica's next answer, instead of never
    /// (the replica would hold every write to the partition up until the
    /// sync timeout, for good).
    pub(crate) fn ask_gap_again(&self, p: usize, r: usize) {
        if let Some(at) = self.primary.gaps.lock().get_mut(&(p, r)) {
            *at = None;
        }
    }

    /// Those of `replicas` that have not acknowledged `seq` of partition
    /// `p`.
    pub fn not_acknowledged(&self, p: usize, seq: u64, replicas: &[usize]) -> Vec<usize> {
        replicas
            .iter()
            .copied()
            .filter(|&r| self.primary.acked[r][p].load(Ordering::Acquire) < seq)
            .collect()
    }

    /// Per member index: changes of this node's primaries in `table`
    /// that member replicates and has not acknowledged yet (replication
    /// lag). One pass over the partitions, each locked once.
    pub fn lags(&self, table: &PartitionTable) -> Vec<u64> {
        let acked = &self.primary.acked;
        let mut lag = vec![0u64; acked.len()];
        for (p, o) in table.partitions.iter().enumerate() {
            if o.primary != self.my_index || o.replicas.is_empty() {
                continue;
            }
            let last = self
                .ks
                .with_partition(p, |part, _| part.log.next_seq().saturating_sub(1));
            for &r in &o.replicas {
                if let (Some(l), Some(acked)) = (lag.get_mut(r), acked.get(r)) {
                    *l += last.saturating_sub(acked[p].load(Ordering::Acquire));
                }
            }
        }
        lag
    }

    /// Prefetches the acknowledged seqs of partition `p` (see
    /// `Cluster::prefetch`); a site's first few members only.
    pub(crate) fn prefetch(&self, p: usize) {
        for acked in self.primary.acked.iter().take(4) {
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

    /// The replicas a write to partition `p` waits for: the in-sync ones,
    /// and those catching up from a snapshot they loaded (`catching_up`).
    fn waited_for<'a>(
        &'a self,
        p: usize,
        owners: &'a PartitionOwners,
    ) -> impl Iterator<Item = usize> + 'a {
        owners.replicas.iter().copied().filter(move |&r| {
            owners.in_sync.contains(&r) || self.primary.catching_up[r][p].load(Ordering::Acquire)
        })
    }

    /// The last seq of partition `p` that every replica a write waits for
    /// ([`Self::wait`]) acknowledged: `u64::MAX` when no replica is waited
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

    /// The partition table changed (a replica left the in-sync set, a
    /// primary moved): waiting writers re-check against it.
    pub fn table_changed(&self) {
        self.primary.table_generation.fetch_add(1, Ordering::AcqRel);
        // A replica the table now has in sync is waited for as such, so a
        // later step out of the in-sync set releases the writes waiting
        // for it at once.
        if let Some(table) = self.table.load().as_ref() {
            for (p, owners) in table
                .partitions
                .iter()
                .enumerate()
                .filter(|(_, o)| o.primary == self.my_index)
            {
                for &r in &owners.in_sync {
                    let catching_up = &self.primary.catching_up;
                    if let Some(flag) = catching_up.get(r).and_then(|f| f.get(p)) {
                        flag.store(false, Ordering::Release);
                    }
                }
            }
        }
        self.sweep();
    }

    /// Per replica waited for by the written partitions: the position of
    /// its stream now, which (the writes being queued already) covers
    /// them.
    fn targets(&self, writes: &[(usize, u64)]) -> SmallVec<[(usize, u64); 2]> {
        let mut targets = SmallVec::new();
        let table = self.table.load();
        let Some(table) = table.as_ref() else {
            return targets;
        };
        for &(p, _) in writes {
            for r in self.waited_for(p, table.owners(p)) {
                if !targets.iter().any(|&(t, _)| t == r) {
                    let queue = &self.primary.queues[r];
                    let buf = queue.buf.lock();
                    targets.push((r, queue.taken.load(Ordering::Relaxed) + buf.len() as u64));
                }
            }
        }
        targets
    }

    /// Waits until every in-sync replica of each written partition, and
    /// every replica catching up from a snapshot it loaded
    /// (`catching_up`), acknowledged the seq; false on timeout.
    ///
    /// It sleeps until the replicas answered the batches holding the
    /// writes ([`crate::ack_wait`]); only when they did and the acks still
    /// do not cover the writes (a replica that refused a change, a new
    /// in-sync replica) does it wait for any ack or table change.
    ///
    /// The timeout needs no timer per write: [`Self::sweep`] wakes every
    /// waiter now and then, and a waiter past [`SYNC_TIMEOUT`] gives up.
    pub async fn wait(&self, writes: &[(usize, u64)]) -> bool {
        let targets = self.targets(writes);
        let started = Instant::now();
        let primary = &self.primary;
        loop {
            let generation = primary.table_generation.load(Ordering::Acquire);
            let notified = primary.ack_notify.notified();
            // Acknowledged only while this node's lease holds: a primary
            // cut off from the majority, or back from such a cut with a
            // table a newer one has replaced, may be waiting on replicas
            // that acknowledged under that old table ([`crate::lease`]).
            let acked = self.all_acked(writes);
            if acked && primary.lease.valid() {
                return true;
            }
            if started.elapsed() >= SYNC_TIMEOUT {
                return false;
            }
            match targets
                .iter()
                .find(|&&(r, target)| !acked && !primary.queues[r].acks.has_answered(target))
            {
                Some(&(r, target)) => {
                    let changed = || {
                        primary.table_generation.load(Ordering::Acquire) != generation
                            || started.elapsed() >= SYNC_TIMEOUT
                    };
                    primary.queues[r].acks.reached(target, changed).await
                }
                None => notified.await,
            }
        }
    }

    /// Wakes every waiting write, so that those past [`SYNC_TIMEOUT`] give
    /// up; the site runs it every [`crate::replication::SWEEP_EVERY`].
    pub fn sweep(&self) {
        self.primary.ack_notify.notify_waiters();
        self.primary
            .queues
            .iter()
            .for_each(|queue| queue.acks.wake_all());
    }
}
