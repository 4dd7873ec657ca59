//! The sending end: one task per (node, remote site).
//!
//! Per partition this node is primary for, the publisher keeps `next` (the
//! next log seq to read), `acked` (the highest seq the remote site applied)
//! and `spilled` (the highest seq written to the journal). The partition
//! log keeps everything from `max(acked, spilled) + 1` (the lowest over all
//! targets, see [`Wan::retain`]); that is the queue, there is no copy.
//! Only what outlives this node leaves: a log is read up to the seq its
//! in-sync replicas acknowledged (`cluster::Replicator::durable_seq`) or
//! what the copy held when it was promoted, whichever is later; bodies of
//! current values (copies, fallbacks) wait in the outbox until what they
//! read is durable. A change that dies with this node must not live on at
//! another site.
//!
//! A batch the target applied but for some of whose deltas it asked the
//! full value does not settle those partitions: their `acked` (what the
//! replicas are told, where a successor resumes) waits until the full
//! values are applied too, so a successor of a node that dies in between
//! ships the changes again (and is asked again) rather than resuming past
//! them.
//!
//! Sending order, which keeps every partition's changes in seq order:
//! bodies that are not log reads (full-value fallbacks, re-sync copies),
//! then the journal, then the logs in memory. When the node's logs are over
//! `memory_budget` and this target cannot take more (disconnected, paused,
//! window full), its unsent backlog moves to the journal; when the journal
//! is over `disk_budget` it is dropped and the target is marked
//! `needs-resync`, which streams the partitions' current contents once the
//! site is reachable and then continues from the log.
//!
//! Batches: up to `batch_max` bytes, growing while there is backlog and
//! shrinking when there is not; the window (batches sent but not yet
//! received) grows while round trips stay near their minimum and shrinks
//! when they grow (the link is queueing). A batch that drained the logs
//! holds the next for [`flow::SMALL_BATCH_EVERY`] (a small one also until
//! it is applied), so steady writes leave as a few large batches rather
//! than a large one and then one per change. In `on-apply` mode one batch
//! is in flight until it is applied.
//!
//! The rules are a core of plain state and methods on [`Publisher`],
//! without sockets, so they are tested directly; [`link`] does the I/O
//! around it. One concept per file:
//! - [`cursors`]: where the target is in each partition's log, what the
//!   logs may let go, which partitions this node leads, and the partitions
//!   held while full values are outstanding (settling).
//! - [`flow`]: batch size, window, round trips, the small-batch hold.
//! - [`batch`]: the order of sending, reads of the logs, batches in flight
//!   and their answers.
//! - [`values`]: current values (re-sync copies, full values asked for) and
//!   the outbox, which waits for the replicas, with its read-ahead.
//! - [`spill`]: the journal and the memory and disk budgets.
//! - [`settling`]: how far the target has passed each partition, announced
//!   so that it lets tombstones go.
//! - [`status`]: what `wan status` shows.
//! - [`link`]: connect, handshake, backoff, and the task's loop.

mod batch;
mod cursors;
mod flow;
mod link;
mod settling;
mod spill;
mod status;
#[cfg(test)]
mod testing;
mod values;

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keyspace::PartitionBits;
use tokio::sync::mpsc;

use crate::wire::Frame;
use crate::{Control, PublisherState, Target, Wan};

pub use link::run;
pub use status::Snapshot;

/// What the publisher asks of its own site: which partitions this node
/// leads and how far their replicas hold them. The cluster in a node (none
/// for a node alone: it leads everything and nothing waits); a stand-in in
/// the unit tests.
trait Site: Send + Sync {
    /// The partition table in force: ownership is read again when it is
    /// another one.
    fn table(&self) -> Option<Arc<cluster::PartitionTable>>;
    /// True when this node orders partition `p`'s writes.
    fn is_primary(&self, p: usize) -> bool;
    /// The last seq of partition `p` this site would keep if this node
    /// failed now (`Replicator::durable_seq`).
    fn durable_seq(&self, p: usize) -> u64;
    /// [`Site::durable_seq`] for many partitions, under one table.
    fn durability(&self) -> Box<dyn Fn(usize) -> u64 + '_>;
    /// Tells partitions' replicas how far `target` applied them (a node
    /// alone has none to tell).
    fn share_applied(&self, target: &str, applied: &[(usize, u64)]);
}

impl Site for Option<Arc<cluster::Cluster>> {
    fn table(&self) -> Option<Arc<cluster::PartitionTable>> {
        self.as_ref().and_then(|c| c.table())
    }

    fn is_primary(&self, p: usize) -> bool {
        self.as_ref().is_none_or(|c| c.owns(p))
    }

    fn durable_seq(&self, p: usize) -> u64 {
        self.as_ref()
            .map_or(u64::MAX, |c| c.replicator.durable_seq(p))
    }

    fn durability(&self) -> Box<dyn Fn(usize) -> u64 + '_> {
        match self {
            Some(c) => {
                let d = c.replicator.durability();
                Box::new(move |p| d.seq(p))
            }
            None => Box::new(|_| u64::MAX),
        }
    }

    fn share_applied(&self, target: &str, applied: &[(usize, u64)]) {
        if let Some(c) = self {
            c.replicator.share_wan_applied(target, applied);
        }
    }
}

/// The link as the core sees it: where batches go, while it is up.
struct Outlet {
    tx: mpsc::UnboundedSender<Frame>,
    endpoint: String,
}

/// One target's publisher, without its I/O: its state, and the rules that
/// the files of this module give it.
struct Publisher {
    wan: Arc<Wan>,
    target: Arc<Target>,
    site: Arc<dyn Site>,
    parts: usize,
    /// Per partition, where this target is in its log.
    cur: Vec<cursors::Cursor>,
    table: Option<Arc<cluster::PartitionTable>>,
    /// Owned partitions whose logs may hold something to read.
    pending: PartitionBits,
    /// Partitions whose `acked` waits for full values (see
    /// [`cursors::Held`]).
    held: HashMap<usize, cursors::Held>,
    /// Partitions the target's logs marked, taken from the target.
    dirty: Vec<usize>,
    /// Partitions whose applied seq advanced since it was last shared
    /// with their replicas.
    to_share: PartitionBits,
    last_share: Instant,
    /// Partitions to copy, and the one being copied.
    resync: BTreeSet<usize>,
    copying: Option<values::Copying>,
    /// Fallback and re-sync bodies, and batches given back by a broken
    /// connection.
    outbox: VecDeque<values::Outgoing>,
    /// The outbox's front waits for its changes to be durable.
    outbox_waits: bool,
    /// Requests for full values not yet read, oldest first, and the bytes
    /// of their keys.
    asked: VecDeque<values::Asked>,
    asked_bytes: usize,
    flow: flow::Flow,
    in_flight: VecDeque<batch::InFlight>,
    batch_id: u64,
    spill: spill::Spill,
    settling: settling::Settling,
    /// None while the link is down.
    out: Option<Outlet>,
    /// The target's data incarnation from its last welcome.
    remote_incarnation: Option<u64>,
    last_status: Instant,
    /// See [`Snapshot::last_error`].
    last_error: String,
}

impl Publisher {
    fn new(wan: Arc<Wan>, target: Arc<Target>, site: Arc<dyn Site>, journal_dir: PathBuf) -> Self {
        let parts = wan.ks.partitions() as usize;
        let mut p = Publisher {
            wan,
            target,
            site,
            parts,
            cur: vec![cursors::Cursor::default(); parts],
            table: None,
            pending: PartitionBits::new(parts),
            held: HashMap::new(),
            dirty: Vec::new(),
            to_share: PartitionBits::new(parts),
            last_share: Instant::now(),
            resync: BTreeSet::new(),
            copying: None,
            outbox: VecDeque::new(),
            outbox_waits: false,
            asked: VecDeque::new(),
            asked_bytes: 0,
            flow: flow::Flow::default(),
            in_flight: VecDeque::new(),
            batch_id: 0,
            spill: spill::Spill::new(journal_dir),
            settling: settling::Settling::new(parts),
            out: None,
            remote_incarnation: None,
            last_status: Instant::now() - Duration::from_secs(10),
            last_error: String::new(),
        };
        p.refresh_ownership(true);
        p
    }

    fn state(&self) -> PublisherState {
        self.target.state()
    }

    fn my_site(&self) -> u16 {
        self.wan.local.site_id
    }

    fn connected(&self) -> bool {
        self.out.is_some()
    }

    /// The last seq of partition `p` this site would keep if this node
    /// failed now (see `Replicator::durable_seq`); nothing after it (or
    /// after the log's `promoted_through`) is shipped.
    fn durable_seq(&self, p: usize) -> u64 {
        self.site.durable_seq(p)
    }

    /// Forgets the backlog and marks the target `needs-resync`: only a
    /// re-sync brings it back in step.
    fn needs_resync(&mut self) {
        self.drop_backlog();
        self.target.set_state(PublisherState::NeedsResync);
    }

    /// Carries out the operators' requests (`wan pause`, ...).
    fn run_controls(&mut self) {
        let controls: Vec<Control> = std::mem::take(&mut *self.target.control.lock());
        for c in controls {
            let name = &self.target.settings.name;
            match c {
                Control::Pause => {
                    tracing::info!(
                        target_site = name,
                        "WAN publisher paused: changes queue, nothing is sent"
                    );
                    self.target.set_state(PublisherState::Paused);
                }
                Control::Stop => {
                    tracing::warn!(
                        target_site = name,
                        "WAN publisher stopped: changes are neither queued nor sent; resume re-syncs"
                    );
                    self.target.set_state(PublisherState::Stopped);
                    self.drop_backlog();
                }
                Control::Resume => {
                    match self.state() {
                        PublisherState::Stopped => {
                            self.target.set_state(PublisherState::NeedsResync)
                        }
                        PublisherState::Paused => {
                            self.target.set_state(PublisherState::Replicating)
                        }
                        _ => {}
                    }
                    tracing::info!(
                        target_site = name,
                        "WAN publisher resumed ({})",
                        self.state().name()
                    );
                }
                Control::Resync => {
                    tracing::info!(target_site = name, "WAN re-sync requested");
                    self.needs_resync();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::Rig;
    use super::*;

    /// Pause queues and sends nothing; stop forgets the queue and a resume
    /// from it re-syncs; a re-sync asked for drops the backlog first.
    #[test]
    fn operators_pause_stop_resume_and_resync() {
        let mut r = Rig::new();
        let (p, _) = r.write("k", "1");
        r.link_up();
        r.target.control(Control::Pause);
        r.p.run_controls();
        assert_eq!(r.target.state(), PublisherState::Paused);
        r.p.fill();
        assert!(r.sent().is_empty());
        assert!(!r.p.can_send_logs());
        assert_eq!(r.needed(p), Some(1), "paused: still queued");
        r.target.control(Control::Resume);
        r.p.run_controls();
        assert_eq!(r.target.state(), PublisherState::Replicating);
        r.target.control(Control::Stop);
        r.p.run_controls();
        assert_eq!(r.target.state(), PublisherState::Stopped);
        assert_eq!(r.needed(p), None, "stopped: nothing queued");
        r.p.fill();
        assert!(r.sent().is_empty());
        r.target.control(Control::Resume);
        r.p.run_controls();
        assert_eq!(r.target.state(), PublisherState::NeedsResync);
        r.p.fill();
        assert_eq!(r.target.state(), PublisherState::Replicating);
        assert!(!r.sent().is_empty(), "the copy leaves");
    }
}
