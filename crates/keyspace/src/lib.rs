//! The keyspace of one node: values with versions, partitions with their
//! change logs, deltas, expiry, tombstones, and changes from other sites.
//!
//! Every write goes through [`Txn::write`], which turns the intended effect
//! (a [`Write`]) into a versioned [`Change`], applies it through the same
//! code that backups, WAN receivers and restore use ([`apply`]), appends it
//! to the partition's [`PartitionLog`] and tells the [`ChangeObserver`]
//! (client tracking). Nothing else mutates a partition's map.
//!
//! Changes from other sites go through [`Keyspace::apply_remote`] on the
//! primary: it resolves them against what the partition holds (last writer
//! wins by [`Version`], hash fields merge field by field; see the `remote`
//! rules in its docs) and applies and logs only what wins, so backups
//! replay it like any change. A delta whose base is not held is answered
//! with [`RemoteOutcome::NeedFull`]. Deleted keys and hash fields leave
//! [`tombstones`] (when `tombstone_bytes` > 0), kept by [`apply_change`] on
//! primaries and backups alike, so that a delete never loses to an older
//! write arriving later.

pub mod access;
pub mod apply;
pub mod bits;
pub mod change;
pub mod changed_keys;
pub mod clock;
pub mod codec;
pub mod delta;
pub mod encodings;
pub mod entry_map;
pub mod glob;
pub mod hll;
mod keyspace;
pub mod map_key;
pub mod memory;
pub mod memory_usage;
pub mod notices;
pub mod number;
pub mod partition;
pub mod partition_bits;
pub mod partition_log;
pub mod received;
pub mod slot;
pub mod stats;
pub mod tombstones;
pub mod value;
pub mod version;

pub use apply::{apply_change, ApplyError};
pub use change::{Change, ChangeKind, DeltaOp};
pub use clock::{Clock, DebugClock, SystemClock};
pub use keyspace::{
    last_written, prefetch_line, take_written, ChangeObserver, CopyForDisk, Keyspace,
    KeyspaceConfig, LogListener, PartitionCopy, Persist, Policy, RecoveryError, RemoteOutcome,
    ReplicaError, ReplicationSink, Txn, Write, WriteError,
};
pub use map_key::MapKey;
pub use partition::Partition;
pub use partition_bits::PartitionBits;
pub use partition_log::PartitionLog;
pub use received::{HeldChange, HeldChanges, Pinned};
pub use stats::ChangeStats;
pub use tombstones::{Coll, Tombstones};
pub use value::{Entry, Field, HashValue, ListEdit, ListValue, SetValue, Value, ZSetValue};
pub use version::{Hlc, Version};
