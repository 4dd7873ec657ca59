//! The site's side of what replication reports: replicas proposed into
//! and out of the in-sync set through the metadata group, which replication
//! does not reach itself (it asks through [`Site`]), and refused snapshots
//! sent again.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::cluster::Cluster;
use crate::metadata::{Command, InSyncEntry, MetadataError};
use crate::replication::{Site, RESEND_REFUSED_AFTER, SYNC_TIMEOUT};

/// At most this many replicas are proposed into their in-sync sets by one
/// metadata entry (bounds the entry's size: ~20 bytes each).
const IN_SYNC_BATCH: usize = 1024;

impl Cluster {
    /// After acks arrive: replicas that finished loading a snapshot are
    /// proposed as in sync (compare-and-set on the partition epoch the
    /// snapshot was sent for, so a stale one is refused), in-sync replicas
    /// that reported a gap are proposed out of it (which sends them a
    /// snapshot), and snapshots a replica refused are sent again after
    /// [`RESEND_REFUSED_AFTER`] (time for its table to
    /// catch up with ours) if the table still asks for them.
    pub fn report_finished_snapshots(&self) {
        let done = self.replicator.take_finished_snapshots();
        let gaps = self
            .table()
            .map(|t| self.replicator.take_gaps(&t))
            .unwrap_or_default();
        let refused = self.replicator.take_refused_snapshots();
        if !done.is_empty() {
            self.in_sync_waiting.lock().extend(done);
            self.propose_in_sync();
        }
        if gaps.is_empty() && refused.is_empty() {
            return;
        }
        let Some(c) = self.arc() else {
            return;
        };
        tokio::spawn(async move {
            for (p, b, epoch) in gaps {
                tracing::warn!(
                    partition = p,
                    replica = b,
                    "replica reported a replication gap: rebuilding its copy"
                );
                if !c.propose_out_of_sync(p, b, epoch).await {
                    c.replicator.ask_gap_again(p, b);
                }
            }
            if refused.is_empty() {
                return;
            }
            tokio::time::sleep(RESEND_REFUSED_AFTER).await;
            let Some(table) = c.table() else { return };
            for (p, b, epoch) in refused {
                let o = table.owners(p);
                if o.primary == c.my_index
                    && o.epoch == epoch
                    && o.replicas.contains(&b)
                    && !o.in_sync.contains(&b)
                {
                    c.replicator.send_snapshot(p, b, epoch);
                }
            }
        });
    }
}

impl Cluster {
    /// Proposes the replicas waiting in `in_sync_waiting` into their in-sync
    /// sets, unless a proposal is under way (it takes them when it is done).
    /// One metadata entry per batch: after a failover hundreds of replicas
    /// finish within moments, and an entry each would have every member
    /// apply and publish the whole table hundreds of times while the
    /// metadata group is at its busiest.
    fn propose_in_sync(&self) {
        if self.in_sync_proposing.swap(true, Ordering::AcqRel) {
            return;
        }
        let Some(c) = self.arc() else {
            self.in_sync_proposing.store(false, Ordering::Release);
            return;
        };
        tokio::spawn(async move {
            loop {
                let batch: Vec<_> = {
                    let mut waiting = c.in_sync_waiting.lock();
                    let n = waiting.len().min(IN_SYNC_BATCH);
                    waiting.drain(..n).collect()
                };
                if batch.is_empty() {
                    c.in_sync_proposing.store(false, Ordering::Release);
                    // One that arrived after the drain and saw the flag set.
                    if c.in_sync_waiting.lock().is_empty()
                        || c.in_sync_proposing.swap(true, Ordering::AcqRel)
                    {
                        return;
                    }
                    continue;
                }
                c.add_to_in_sync(&batch).await;
            }
        });
    }

    async fn add_to_in_sync(&self, batch: &[(usize, usize, u64)]) {
        let Some(md) = self.metadata.get() else {
            return;
        };
        let entries = batch
            .iter()
            .map(|&(p, b, epoch)| InSyncEntry {
                partition: p as u16,
                node: b as u64 + 1,
                expected_epoch: epoch,
            })
            .collect();
        match md.propose(Command::AddManyToInSync { entries }).await {
            Ok(epoch) => {
                // Which of them counted, once this member applied the entry.
                let meta = md
                    .wait_for(SYNC_TIMEOUT, |m| {
                        m.table.as_ref().is_some_and(|t| t.epoch >= epoch)
                    })
                    .await
                    .unwrap_or_else(|| md.current());
                let Some(table) = meta.table.as_ref() else {
                    return;
                };
                let mut added = 0;
                for &(p, b, _) in batch {
                    let node = b as u64 + 1;
                    if table
                        .partitions
                        .get(p)
                        .is_some_and(|a| a.in_sync.contains(&node))
                    {
                        added += 1;
                        tracing::debug!(partition = p, replica = b, "replica caught up: in sync");
                    } else {
                        tracing::warn!(
                            partition = p,
                            replica = b,
                            "replica not added to the in-sync set: its partition changed owners since its snapshot"
                        );
                    }
                }
                tracing::info!(replicas = added, "replicas caught up: in sync");
            }
            Err(e @ MetadataError::Refused(_)) => tracing::warn!(
                replicas = batch.len(),
                "replicas not added to the in-sync set: {e}"
            ),
            Err(e) => {
                // Not decided (no leader, a slow commit): asked again after
                // their next answer, or they never count.
                tracing::warn!(
                    replicas = batch.len(),
                    "replicas not added to the in-sync set yet: {e}"
                );
                for &(p, b, epoch) in batch {
                    self.replicator.report_again(p, b, epoch);
                }
            }
        }
    }
}

impl Site for Cluster {
    /// A proposal that fails without being refused (no leader yet, a
    /// commit too slow: a heal or an election) is made again, for up to
    /// [`SYNC_TIMEOUT`].
    fn propose_out_of_sync(
        &self,
        p: usize,
        r: usize,
        epoch: u64,
    ) -> Pin<Box<dyn Future<Output = bool> + Send + '_>> {
        Box::pin(async move {
            let Some(md) = self.metadata.get() else {
                return false;
            };
            let cmd = Command::RemoveFromInSync {
                partition: p as u16,
                node: r as u64 + 1,
                expected_epoch: epoch,
            };
            let started = Instant::now();
            loop {
                match md.propose(cmd.clone()).await {
                    Ok(_) | Err(MetadataError::Refused(_)) => return true,
                    Err(e) if started.elapsed() >= SYNC_TIMEOUT => {
                        tracing::warn!(
                            partition = p,
                            replica = r,
                            "could not take the replica out of the in-sync set: {e}"
                        );
                        return false;
                    }
                    Err(_) => tokio::time::sleep(RESEND_REFUSED_AFTER).await,
                }
            }
        })
    }
}
