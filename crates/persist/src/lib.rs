//! Local persistence: a node keeps its copies (the partitions it holds as
//! primary or replica) on its own disk and loads them when it starts again
//! (docs/architecture.md, "Persistence").
//!
//! Every change a copy takes, logged by a primary or applied by a replica
//! at its seq, and every snapshot a replica loads from its primary, is
//! handed to the [`Store`] under the partition's lock
//! ([`keyspace::Persist`]) and appended by one writer thread to the change
//! log (a `journal`: segments of CRC-framed records, a torn tail cut on
//! open) with one write and, per `fsync`, one fsync for everything that
//! arrived together (group commit). With `fsync = "always"` a connection's
//! replies, and a replica's acks, wait for the fsync that covers its
//! changes. Snapshots ([`snapshot`]) are taken partition by partition
//! without stopping writers; the log before the previous snapshot is then
//! dropped, so disk use is two snapshots and the log since the older one.
//! On start [`Store::open`] loads the newest snapshot that reads back whole
//! (else the one before) and replays the log after it ([`recover`]).

pub mod record;
mod recover;
pub mod snapshot;
mod store;

pub use recover::Recovered;
pub use store::{take_handed, Fsync, Store, StoreConfig, StoreStats};
#[cfg(test)]
mod tests;
