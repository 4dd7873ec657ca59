//! A site: the nodes that together own all partitions. This crate holds the
//! members, the partition table, the node-to-node transport and Redis
//! Cluster routing. The server calls it through [`Cluster`] only when
//! `site.seeds` is configured; a standalone node never touches it.
//!
//! The site forms once every seed has said hello; other nodes join it
//! ([`join`]) and leave it, and partitions migrate between members live
//! ([`metadata::rebalance::migrate`], [`handover`]). Changes replicate
//! from primaries to replicas ([`replication`]); the members and the
//! partition table live in a Raft group ([`metadata`]). See
//! docs/architecture.md, "Site".

mod ack_wait;
pub mod auth;
pub mod broadcast;
mod cluster;
pub mod cluster_cmd;
pub mod failover;
mod handover;
mod in_sync;
pub mod internal_auth;
pub mod join;
pub mod lease;
pub mod metadata;
pub mod placement;
pub mod replication;
pub mod transport;
pub mod wire;

pub use cluster::{
    Cluster, ClusterSettings, Member, MemberStatus, Replication, SiteStatus, WaitingStatus,
    MAX_MEMBERS,
};
pub use placement::{PartitionOwners, PartitionTable};
