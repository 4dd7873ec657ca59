//! A handover of one partition from its primary (this node) to an in-sync
//! replica, as the migration planner asks with
//! [`crate::metadata::Assignment::moving_to`], or as a node that stops
//! (SIGTERM) does for every partition it leads ([`Reason::Stopping`]):
//!
//! 1. fence: routing answers writes for the partition with `TRYAGAIN`, and
//!    once every command already routed has finished (the exec gate) the
//!    partition turns read-only here (no expiry either), so its log ends;
//! 2. wait until every in-sync replica acknowledged the last seq, so every
//!    copy is the same;
//! 3. commit the switch (compare-and-set on the partition epoch): the target
//!    becomes primary and this node an in-sync replica. Clients get `MOVED`
//!    from here on.
//!
//! The whole partition moves at once, so no key is ever served by two
//! primaries and Redis's per-key `ASK` redirection is never needed. Writes
//! wait for one replication round trip and one Raft commit (milliseconds).
//! If anything changes meanwhile (the target fails, the table moves on),
//! the fence is lifted and the planner decides again. A replica that does
//! not acknowledge the last seq within the sync timeout is taken out of
//! the in-sync set (and rebuilt from a snapshot): with writes fenced, no
//! later change would ever reveal what it missed.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::cluster::Cluster;
use crate::metadata::Command;
use crate::replication::Site as _;

const RETRY_AFTER: Duration = Duration::from_millis(200);

/// Why a partition is handed over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reason {
    /// The table asks for it (`moving_to`).
    Planned,
    /// This node is stopping: the partition goes to its first in-sync
    /// replica, whatever the planner wants.
    Stopping,
}

/// This node is stopping: hands `p` to an in-sync replica if it leads it
/// in the installed table and has one (else nothing: it fails over or, with
/// no other copy, waits for this node to come back).
pub(crate) fn hand_off(c: &Cluster, p: usize) {
    let Some(t) = c.table() else { return };
    let o = t.owners(p);
    if o.primary == c.my_index {
        if let Some(&to) = o.in_sync.first() {
            start(c, p, to, o.epoch, Reason::Stopping);
        }
    }
}

/// Starts the handover of `p` to member `to` for partition epoch `epoch`,
/// unless one is running for `p` already.
pub(crate) fn start(c: &Cluster, p: usize, to: usize, epoch: u64, why: Reason) {
    {
        let mut running = c.handovers.lock();
        if running.contains_key(&p) {
            return;
        }
        running.insert(p, epoch);
    }
    let Some(c) = c.arc() else {
        return;
    };
    tokio::spawn(async move {
        run(&c, p, to, epoch, why).await;
        c.handovers.lock().remove(&p);
        if c.is_stopping() {
            return hand_off(&c, p);
        }
        // The table may have asked for another handover meanwhile.
        match c.table().map(|t| t.owners(p).clone()) {
            Some(o) if o.primary == c.my_index && o.epoch != epoch => match o.moving_to {
                Some(next) => start(&c, p, next, o.epoch, Reason::Planned),
                None => settle(&c, p),
            },
            _ => settle(&c, p),
        }
    });
}

/// Lifts a fence nobody needs any more: the installed table has this node
/// as `p`'s primary with no handover asked and none running (a handover
/// called off). Before the table that called it off arrives, the fence
/// stays: the switch may have been committed.
pub(crate) fn settle(c: &Cluster, p: usize) {
    if !c.fenced[p].load(Ordering::Acquire) || c.handovers.lock().contains_key(&p) {
        return;
    }
    let Some(t) = c.table() else { return };
    let o = t.owners(p);
    if o.primary == c.my_index && o.moving_to.is_none() {
        c.keyspace().set_replica(p, false);
        c.fenced[p].store(false, Ordering::Release);
        tracing::info!(partition = p, "handover called off: serving writes again");
    }
}

/// The handover is still possible (and, planned, what the table asks for).
fn wanted(c: &Cluster, p: usize, to: usize, epoch: u64, why: Reason) -> bool {
    c.table().is_some_and(|t| {
        let o = t.owners(p);
        let planned = why == Reason::Stopping || o.moving_to == Some(to);
        o.primary == c.my_index && o.epoch == epoch && planned && o.in_sync.contains(&to)
    })
}

/// Returns once the switch is committed or the table no longer asks for it.
async fn run(c: &Arc<Cluster>, p: usize, to: usize, epoch: u64, why: Reason) {
    let Some(md) = c.metadata.get() else { return };
    c.fenced[p].store(true, Ordering::Release);
    let quiesce = c.clone();
    if tokio::task::spawn_blocking(move || quiesce.quiesce())
        .await
        .is_err()
    {
        return;
    }
    c.keyspace().set_replica(p, true);
    let last = c
        .keyspace()
        .with_partition(p, |part, _| part.log.next_seq().saturating_sub(1));
    tracing::info!(
        partition = p,
        to,
        seq = last,
        ?why,
        "handover: writes fenced, waiting for replicas"
    );
    loop {
        if !wanted(c, p, to, epoch, why) {
            return;
        }
        if !c.replicator.wait(&[(p, last)]).await {
            // No more changes come to show a gap, so a replica that did not
            // acknowledge `last` within SYNC_TIMEOUT (a batch or its ack
            // went with a broken connection, or it is stuck) would hold
            // the fence forever: it leaves the in-sync set and gets a
            // snapshot, which calls this handover off until it is back.
            if let Some(t) = c
                .table()
                .filter(|t| t.owners(p).primary == c.my_index && t.owners(p).epoch == epoch)
            {
                let o = t.owners(p);
                for b in c.replicator.not_acknowledged(p, last, &o.in_sync) {
                    tracing::warn!(
                        partition = p,
                        replica = b,
                        seq = last,
                        "handover: replica did not acknowledge the last change: rebuilding its copy"
                    );
                    c.propose_out_of_sync(p, b, o.epoch).await;
                }
            }
            tokio::time::sleep(RETRY_AFTER).await;
            continue;
        }
        let Some(table) = c.table() else { return };
        let o = table.owners(p);
        let id = |i: usize| i as u64 + 1;
        let swap = |list: &[usize]| -> Vec<u64> {
            list.iter()
                .map(|&b| if b == to { id(c.my_index) } else { id(b) })
                .collect()
        };
        let cmd = Command::SetPartition {
            partition: p as u16,
            primary: id(to),
            replicas: swap(&o.replicas),
            in_sync: swap(&o.in_sync),
            expected_epoch: epoch,
        };
        match md.propose(cmd).await {
            Ok(new_epoch) => {
                c.handovers_done.fetch_add(1, Ordering::Relaxed);
                tracing::info!(partition = p, to, epoch = new_epoch, "handover committed");
                return;
            }
            Err(crate::metadata::MetadataError::Refused(e)) => {
                tracing::info!(partition = p, "handover refused: {e}");
                return;
            }
            Err(e) => {
                tracing::warn!(partition = p, "handover not committed yet: {e}");
                tokio::time::sleep(RETRY_AFTER).await;
            }
        }
    }
}

impl Cluster {
    /// Stops this node's part in the site without leaving it (SIGTERM,
    /// SIGINT): every partition it leads goes to an in-sync replica
    /// (a handover: writes wait a replication round trip and a commit),
    /// for at most `timeout`; then it declares itself dead, so that
    /// writes of the partitions it backs up stop waiting for it at once
    /// and its copies are rebuilt elsewhere. It stays a member: started
    /// again with the same `data_dir`, it rejoins under the same id
    /// (as after a crash) and gets its share back. Leaving for good is
    /// `deltagrid cluster leave`.
    pub async fn stop(&self, timeout: std::time::Duration) {
        let Some(md) = self.metadata.get() else {
            return;
        };
        self.stopping
            .store(true, std::sync::atomic::Ordering::Release);
        if !self.lease.valid() {
            // Cut off from the majority (or the last of the site to stop):
            // nothing can be committed; the site finds out by itself.
            tracing::info!("stopping without handing over: no majority of the site is reachable");
            return;
        }
        let led = |t: &crate::PartitionTable| {
            t.partitions
                .iter()
                .filter(|o| o.primary == self.my_index && !o.in_sync.is_empty())
                .count()
        };
        let before = self.table().map_or(0, |t| led(&t));
        tracing::info!(
            partitions = before,
            "stopping: handing the partitions this node leads to their replicas"
        );
        for p in 0..self.partitions as usize {
            crate::handover::hand_off(self, p);
        }
        let handed = tokio::time::timeout(timeout, async {
            while self.table().is_some_and(|t| led(&t) > 0) {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        })
        .await;
        let left = self.table().map_or(0, |t| led(&t));
        if handed.is_err() {
            tracing::warn!(
                partitions = left,
                "stopping: not every partition was handed over within {timeout:?}; they fail over"
            );
        }
        let me = self.my_index as u64 + 1;
        match tokio::time::timeout(
            crate::replication::SYNC_TIMEOUT,
            md.propose(crate::metadata::Command::MarkDead { id: me }),
        )
        .await
        {
            Ok(Ok(_)) => tracing::info!(
                "stopped: partitions handed over, this member is down until it starts again"
            ),
            Ok(Err(e)) => tracing::warn!(
                "stopping: could not mark this member down: {e}; the site will find out"
            ),
            Err(_) => tracing::warn!(
                "stopping: marking this member down took too long; the site will find out"
            ),
        }
    }
}
