//! The keyspace of one node: values with versions, partitions with their
//! change logs, deltas, and expiry.
//!
//! Every write goes through [`Txn::write`], which turns the intended effect
//! (a [`Write`]) into a versioned [`Change`], applies it through the same
//! code that backups, WAN receivers and restore use ([`apply`]), appends it
//! to the partition's [`PartitionLog`] and tells the [`ChangeObserver`]
//! (client tracking). Nothing else mutates a partition's map.

pub mod apply;
pub mod change;
pub mod clock;
pub mod codec;
pub mod delta;
pub mod glob;
mod keyspace;
pub mod partition;
pub mod partition_log;
pub mod slot;
pub mod stats;
pub mod value;
pub mod version;

pub use apply::{apply_change, ApplyError};
pub use change::{Change, ChangeKind, DeltaOp};
pub use clock::{Clock, DebugClock, SystemClock};
pub use keyspace::{
    take_written, ChangeObserver, Keyspace, KeyspaceConfig, ReplicaError, ReplicationSink, Txn, Write, WriteError,
};
pub use partition::Partition;
pub use partition_log::PartitionLog;
pub use stats::ChangeStats;
pub use value::{Entry, Field, HashValue, Value};
pub use version::{Hlc, Version};
