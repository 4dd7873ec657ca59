//! Primary -> replica replication over the node-to-node connections.
//!
//! The keyspace hands every change a primary logs to the replicator
//! (`ReplicationSink::logged`) while the partition is locked, so entries
//! enter each replica's outgoing queue in seq order. The connection to that
//! replica ships the queue as one batch frame per flush, however many
//! partitions it spans. The replica applies entries through the mirror path
//! at the same seq (so its log is the primary's) and acknowledges
//! cumulatively, one ack per partition touched by the batch.
//!
//! With `replication = "sync"` a connection holds its replies until every
//! replica of every partition it wrote has acknowledged those seqs (woken by
//! the answer to the batch holding its writes, [`crate::ack_wait`]). A
//! replica that does not answer within [`SYNC_TIMEOUT`] makes the connection
//! close without replying: the client learns nothing was acknowledged,
//! which is never wrong. Batches a broken connection took unanswered are
//! sent again on the next one ([`Replicator::requeue`]). A replica that
//! falls [`MAX_PENDING`] bytes behind is cut off and rebuilt from
//! snapshots, leaving the in-sync set through Raft first.
//!
//! A new replica (rebuilt after a failover, or a node that came back) first
//! gets a snapshot, queued under the partition lock so it sits in the
//! stream exactly where the log continues, and streamed in chunks ahead of
//! the changes queued for the replica, so a partition of any size can be
//! copied: a begin entry that empties the replica's copy, one entry per
//! key, and an end entry that the replica acknowledges as "everything
//! before the snapshot's point" plus "snapshot loaded", or, when it did not
//! load all of it, refuses and gets again. Once the ack of that very
//! snapshot is in (not of an earlier one it replaced), the primary asks the
//! metadata group to count the replica as in sync.
//!
//! Files: [`stream`] has the entries and acks ([`Entry`], [`Ack`]) and
//! their bytes; [`primary`] the primary side (each replica's queue, what it
//! acknowledged and the writes waiting for that, snapshots for new
//! replicas); [`replica`] the replica side (applying batches). The
//! replicator asks the site around it for one thing only, through
//! [`Site`]: to change the in-sync set, which the metadata group owns.

pub mod primary;
pub mod replica;
pub mod stream;
#[cfg(test)]
pub(crate) mod tests;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use bytes::BytesMut;
use keyspace::Keyspace;

use crate::placement::SharedTable;
pub use primary::Durability;
pub use stream::{Ack, BatchError, Entry};

pub const SYNC_TIMEOUT: Duration = Duration::from_secs(5);
/// How often waiting writes check their [`SYNC_TIMEOUT`].
pub const SWEEP_EVERY: Duration = Duration::from_millis(250);
/// How long a primary waits before sending a refused snapshot again.
pub const RESEND_REFUSED_AFTER: Duration = Duration::from_millis(200);
/// Unshipped bytes a replica may fall behind by before it is cut off.
pub const MAX_PENDING: usize = 32 << 20;

/// What the replicator asks of the site it replicates in.
pub trait Site: Send + Sync {
    /// Proposes that replica `r` of partition `p` leave the in-sync set
    /// (at partition epoch `epoch`); the table that does it sends a
    /// snapshot. Resolves to whether the metadata group decided
    /// (committed it, or refused it: the partition moved on).
    fn propose_out_of_sync(
        &self,
        p: usize,
        r: usize,
        epoch: u64,
    ) -> Pin<Box<dyn Future<Output = bool> + Send + '_>>;
}

/// Where a replica hands the WAN watermarks its primary shares.
pub trait WanWatermarks: Send + Sync {
    fn applied(&self, target: &str, partition: usize, seq: u64);
}

/// This node's replication, both sides: as the primary of some partitions
/// ([`primary`]) and as a replica of others ([`replica`]).
pub struct Replicator {
    ks: Arc<Keyspace>,
    my_index: usize,
    /// The site's partition table (the cluster's, shared).
    table: SharedTable,
    /// Itself, for the tasks it spawns.
    this: Weak<Replicator>,
    site: OnceLock<Weak<dyn Site>>,
    primary: primary::Primary,
    replica: replica::Replica,
}

impl Replicator {
    pub fn new(
        ks: Arc<Keyspace>,
        table: SharedTable,
        lease: Arc<crate::lease::Lease>,
        members: usize,
        my_index: usize,
    ) -> Arc<Self> {
        let partitions = ks.partitions() as usize;
        Arc::new_cyclic(|this| Replicator {
            ks,
            my_index,
            table,
            this: this.clone(),
            site: OnceLock::new(),
            primary: primary::Primary::new(lease, members, partitions),
            replica: replica::Replica::default(),
        })
    }

    /// Installs the site the replicator asks to change in-sync sets; first
    /// call wins.
    pub fn set_site(&self, site: Weak<dyn Site>) {
        let _ = self.site.set(site);
    }

    pub fn encode_acks(acks: &[Ack], out: &mut BytesMut) {
        out.reserve(acks.iter().map(Ack::encoded_len).sum());
        acks.iter().for_each(|a| a.encode(out));
    }
}
