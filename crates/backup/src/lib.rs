//! Backups to storage: every primary writes its partitions, each
//! consistent at a partition-log seq, as a base (every key) and then
//! incremental layers (keys changed since the parent layer, deletes
//! included), zstd-compressed and checksummed, to a directory or an
//! S3-compatible store; the manifest is written last.
//!
//! Restore walks the chain newest layer first: it applies that layer in
//! full, and from older layers only what its resolved object (computed at
//! backup time) lists as still live, so an older block nobody needs is
//! never downloaded and an older index is never read. Each live key is
//! applied once; a partition stops at its newest full layer; partitions
//! restore in parallel. `forward` order (base first, then each layer)
//! exists to compare.
//!
//! The pieces: [`store`] (object_store behind a URL), [`manifest`] (what a
//! backup holds, the chain), [`index`], [`resolved`] and [`chunk`] (the
//! stored formats, with [`framing`] and [`key_list`]), [`create`] and
//! [`restore`] (what a node does), [`verify`] (reads a whole chain back),
//! [`jobs`] (one running job per node, its progress), [`allowed`] (the
//! storage URLs a node may use).

pub mod allowed;
pub mod chunk;
pub mod coordinate;
pub mod create;
pub mod framing;
pub mod index;
pub mod jobs;
pub mod key_list;
pub mod manifest;
pub mod resolved;
pub mod restore;
pub mod schedule;
pub mod store;
pub mod verify;

use std::sync::Arc;

pub use allowed::AllowedUrls;
pub use jobs::{Jobs, Progress};
pub use manifest::Manifest;
pub use store::Store;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("bad backup URL {0}")]
    Url(String),
    #[error("{object}: {reason}")]
    Store { object: String, reason: String },
    #[error("{object}: missing")]
    Missing { object: String },
    #[error("{object}: {reason}")]
    Corrupt { object: String, reason: String },
    #[error("{0}")]
    Refused(String),
}

/// What a node's backup work needs of it.
#[derive(Clone)]
pub struct Node {
    pub ks: Arc<keyspace::Keyspace>,
    pub cluster: Option<Arc<cluster::Cluster>>,
    pub site_id: u16,
    pub site_name: String,
}

impl Node {
    /// Partitions this node is primary for (all of them when standalone).
    pub fn primaries(&self) -> Vec<usize> {
        (0..self.ks.partitions() as usize)
            .filter(|&p| self.owns(p))
            .collect()
    }

    pub fn owns(&self, p: usize) -> bool {
        self.cluster.as_ref().is_none_or(|c| c.owns(p))
    }

    /// Waits until every in-sync backup holds what this thread logged
    /// since the matching `keyspace::take_written()`.
    async fn synced(&self, written: &[(usize, u64)]) -> Result<(), Error> {
        match self.cluster.as_ref().filter(|c| c.sync_replication()) {
            Some(c) if !written.is_empty() && !c.replicator.wait(written).await => Err(
                Error::Refused("backups did not acknowledge restored keys in time".into()),
            ),
            _ => Ok(()),
        }
    }
}

/// Partitions a node works on at once.
pub const PARALLEL: usize = 4;
