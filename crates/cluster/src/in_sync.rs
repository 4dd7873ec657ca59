//! The site's side of what replication reports: replicas proposed into
//! and out of the in-sync set through the metadata group, which replication
//! does not reach itself (it asks through [`Site`]), and refused snapshots
//! sent again.

use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

use crate::cluster::Cluster;
use crate::metadata::{Command, MetadataError};
use crate::replication::{Site, RESEND_REFUSED_AFTER, SYNC_TIMEOUT};

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
        if done.is_empty() && gaps.is_empty() && refused.is_empty() {
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
            let Some(md) = c.metadata.get() else { return };
            for (p, b, epoch) in done {
                let cmd = Command::AddToInSync {
                    partition: p as u16,
                    node: b as u64 + 1,
                    expected_epoch: epoch,
                };
                match md.propose(cmd).await {
                    Ok(_) => {
                        tracing::info!(partition = p, replica = b, "replica caught up: in sync")
                    }
                    Err(e @ MetadataError::Refused(_)) => {
                        tracing::warn!(
                            partition = p,
                            replica = b,
                            "replica not added to the in-sync set: {e}"
                        )
                    }
                    Err(e) => {
                        // Not decided (no leader, a slow commit): asked again
                        // after its next answer, or it never counts.
                        tracing::warn!(
                            partition = p,
                            replica = b,
                            "replica not added to the in-sync set yet: {e}"
                        );
                        c.replicator.report_again(p, b, epoch);
                    }
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
