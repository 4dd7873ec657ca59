//! Who hears about changes: the observer (client tracking), the
//! replication sink (backups) and the log listener (WAN publishers), and
//! this thread's list of what it logged ([`take_written`]). Every change
//! is logged and announced by `Keyspace::record`.

use std::sync::Arc;

use bytes::Bytes;
use smallvec::SmallVec;

use super::Keyspace;
use crate::change::Change;
use crate::partition::Partition;

/// Hears about every change, from any source, after locks are released.
pub trait ChangeObserver: Send + Sync {
    /// False when nobody listens, so the write path collects nothing.
    fn active(&self) -> bool;
    /// `origin` is the client id that caused the changes (0: the node itself).
    fn changed(&self, keys: &[Bytes], origin: u64);
    /// Every key is gone (FLUSHALL).
    fn flushed(&self, origin: u64);
}

/// Hears every change a primary logs, in seq order per partition, while the
/// partition is still locked (replication to backups).
pub trait ReplicationSink: Send + Sync {
    /// `encoded`: the change as [`codec::encode`](crate::codec::encode)
    /// writes it, when the log holds it (None: the log keeps nothing).
    fn logged(&self, partition: usize, seq: u64, change: &Change, encoded: Option<&[u8]>);
    /// A backup to storage named `id` now holds the partition up to `seq`
    /// (its copies anchor their changed-keys sets there too).
    fn backup_taken(&self, _partition: usize, _seq: u64, _id: &str) {}
}

/// Hears every change to this node's copies in the order they were made,
/// while the partition is locked (local persistence, the `persist`
/// crate): changes logged or applied at a seq, a copy replaced by a
/// snapshot from its primary, and that snapshot's entries. It must only
/// take note (copy the bytes), never block.
pub trait Persist: Send + Sync {
    /// Partition `partition` logged (as primary) or applied (as a replica)
    /// `encoded` at `seq`.
    fn changed(&self, partition: usize, seq: u64, encoded: &[u8]);
    /// The copy of `partition` was emptied to load a snapshot; its log
    /// goes on at `next_seq`, its tombstones settled at `settled`.
    fn reset(&self, partition: usize, next_seq: u64, settled: u64);
    /// One entry of the snapshot being loaded into `partition`.
    fn loaded(&self, partition: usize, encoded: &[u8]);
}

/// Hears that a partition's log grew (WAN publishers), while the partition
/// is locked: it must only take note, never lock or block.
pub trait LogListener: Send + Sync {
    fn appended(&self, partition: usize, change: &Change);
}

thread_local! {
    /// (partition, seq) of the changes this thread logged since the last
    /// [`take_written`]; how a connection learns what it must wait for.
    static WRITTEN: std::cell::RefCell<SmallVec<[(usize, u64); 4]>> = std::cell::RefCell::new(SmallVec::new());
}

thread_local! {
    /// Where a change the log did not keep is encoded for persistence.
    static ENCODED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The (partition, seq) of every change this thread logged since the last
/// call, in order. A command runs on one thread from start to end, so a
/// connection calls this around the commands it runs.
pub fn take_written() -> SmallVec<[(usize, u64); 4]> {
    WRITTEN.with(|w| std::mem::take(&mut *w.borrow_mut()))
}

/// The (partition, seq) of the last change this thread logged since the
/// last [`take_written`], left in place (WAIT asks what its connection
/// wrote last).
pub fn last_written() -> Option<(usize, u64)> {
    WRITTEN.with(|w| w.borrow().last().copied())
}

impl Keyspace {
    /// Installs the observer; only the first call has an effect.
    pub fn set_observer(&self, observer: Arc<dyn ChangeObserver>) {
        let _ = self.observer.set(observer);
    }

    /// Installs the replication sink; only the first call has an effect.
    pub fn set_sink(&self, sink: Arc<dyn ReplicationSink>) {
        let _ = self.sink.set(sink);
    }

    /// Installs local persistence; only the first call has an effect.
    pub fn set_persist(&self, persist: Arc<dyn Persist>) {
        let _ = self.persist.set(persist);
    }

    pub(super) fn persist(&self) -> Option<&Arc<dyn Persist>> {
        self.persist.get()
    }

    /// Installs the log listener; only the first call has an effect.
    pub fn set_listener(&self, listener: Arc<dyn LogListener>) {
        let _ = self.listener.set(listener);
    }

    pub(super) fn observer(&self) -> Option<&Arc<dyn ChangeObserver>> {
        self.observer.get().filter(|o| o.active())
    }

    /// A remote change that changed nothing (a duplicate, or older than
    /// what is held) was decided by what the partition holds, which may be
    /// an earlier attempt's change whose backups never acknowledged it (its
    /// sender retries after a failed wait): the caller waits, as for a
    /// write, until the backups hold the partition's log so far. Not for
    /// what was logged before this copy became primary: no backup
    /// acknowledges that again (an idle partition handed over would wait
    /// for ever; found by test_wan_chaos.py).
    pub(crate) fn written_through_now(&self, part: &Partition) {
        if let Some(last) = part
            .logged_as_primary()
            .filter(|_| self.sink.get().is_some())
        {
            WRITTEN.with(|w| w.borrow_mut().push((part.id as usize, last)));
        }
    }

    pub(super) fn record(&self, part: &mut Partition, change: &Change, saved: usize) -> u64 {
        if let Some(l) = self.listener.get() {
            l.appended(part.id as usize, change);
        }
        // The append trims what this lets go.
        self.catch_up_log(part);
        let (seq, size) = part.log.append(change);
        if let Some(d) = self.persist.get() {
            match part.log.get(seq) {
                Some(encoded) => d.changed(part.id as usize, seq, encoded),
                None => ENCODED.with(|b| {
                    let mut b = b.borrow_mut();
                    b.clear();
                    crate::codec::encode(change, &mut *b);
                    d.changed(part.id as usize, seq, &b);
                }),
            }
        }
        if let Some(sink) = self.sink.get() {
            sink.logged(part.id as usize, seq, change, part.log.get(seq));
            WRITTEN.with(|w| w.borrow_mut().push((part.id as usize, seq)));
        }
        part.stats.record(change.kind.index(), size, saved);
        seq
    }
}
