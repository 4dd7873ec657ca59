//! A site: the nodes that together own all partitions. This crate holds the
//! members, the partition table, the node-to-node transport and Redis
//! Cluster routing. The server calls it through [`Cluster`] only when
//! `site.seeds` is configured; a standalone node never touches it.
//!
//! Membership today is static: the members are the configured seeds, the
//! site forms once every seed has said hello, and placement is computed from
//! that list. Changes replicate from primaries to backups ([`replication`]).
//! Raft-managed metadata, failover and migration build on this (see
//! docs/architecture.md, "Site").

mod cluster;
pub mod cluster_cmd;
pub mod failover;
pub mod metadata;
pub mod placement;
pub mod replication;
pub mod transport;
pub mod wire;

pub use cluster::{Cluster, ClusterSettings, Member, MemberStatus, Replication, SiteStatus};
pub use placement::{PartitionOwners, PartitionTable};
