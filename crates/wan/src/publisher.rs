//! The sending end: one task per (node, remote site).
//!
//! Per partition this node is primary for, the publisher keeps `next` (the
//! next log seq to read), `acked` (the highest seq the remote site applied)
//! and `spilled` (the highest seq written to the journal). The partition
//! log keeps everything from `max(acked, spilled) + 1` (the lowest over all
//! targets, see [`Wan::retain`]); that is the queue, there is no copy.
//! Only what outlives this node leaves: a log is read up to the seq its
//! in-sync backups acknowledged (`cluster::Replicator::durable_seq`) or
//! what the copy held when it was promoted, whichever is later; bodies of
//! current values (copies, fallbacks) wait in the outbox until what they
//! read is durable. A change that dies with this node must not live on at
//! another site.
//!
//! A batch the target applied but for some of whose deltas it asked the
//! full value does not settle those partitions: their `acked` (what the
//! backups are told, where a successor resumes) waits until the full values
//! are applied too, so a successor of a node that dies in between ships the
//! changes again (and is asked again) rather than resuming past them.
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
//! holds the next for [`SMALL_BATCH_EVERY`] (a small one also until it is
//! applied), so steady writes leave as a few large batches rather than a
//! large one and then one per change. In `on-apply` mode one batch is in
//! flight until it is applied.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use journal::{Journal, JournalConfig};
use keyspace::partition_log::Logged;
use keyspace::{Change, ChangeKind, PartitionBits};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::auth::{self, Role};
use crate::stats::{add, get};
use crate::wire::{self, Frame, Hello};
use crate::{AckMode, Control, PublisherState, Target, Wan};

const TICK: Duration = Duration::from_millis(50);
const BATCH_MIN: usize = 16 << 10;
const BATCH_MAX: usize = 1 << 20;
const WINDOW_MIN: usize = 2;
const WINDOW_MAX: usize = 64;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// Between connection attempts at most: a link that comes back is used
/// within about this long (an attempt is one SYN, cheap to repeat).
const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// How often "remote site unreachable" is logged while it stays so.
const UNREACHABLE_LOG_EVERY: Duration = Duration::from_secs(30);
/// How often a primary tells its backups how far each target applied
/// (after a failover the new primary re-sends at most this much, which the
/// target's watermarks skip). Backups' logs let go of what every target
/// applied, so this also bounds what they hold beyond the unapplied changes.
const SHARE_EVERY: Duration = Duration::from_millis(100);
/// A batch that drained the logs (not full) is followed by the next one
/// no sooner than this, so a target's fixed work per batch (and both
/// sites' per-batch wake-ups and packets) is shared by more changes; a
/// backlog fills whole batches, which are not held.
const SMALL_BATCH_EVERY: Duration = Duration::from_millis(50);
/// A batch not received in this long means the link is gone.
const STALL: Duration = Duration::from_secs(10);
/// Keys of full values asked for and not yet read may take this share of
/// `memory_budget` (at least [`ASKED_MIN_BYTES`]); past it the target is
/// re-synced instead, so a site asking for more than this node can hold,
/// or asking again and again, cannot grow its memory.
const ASKED_BUDGET_SHARE: usize = 4;
const ASKED_MIN_BYTES: usize = 64 << 10;

/// Bodies of current values (copies, full values) read ahead into the
/// outbox while its front waits for the backups, at most.
const READ_AHEAD_BYTES: usize = 8 << 20;

/// What a key asked for counts against the share above.
fn asked_size(key: &Bytes) -> usize {
    key.len() + 16
}

/// What `wan status` shows for a target, refreshed by the publisher.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Snapshot {
    pub connected: bool,
    pub endpoint: String,
    /// Log entries of primary partitions not yet applied by the target.
    pub queue_events: u64,
    /// Partition log bytes held in memory: primaries, and backups' copies.
    pub queue_bytes_primary: u64,
    pub queue_bytes_backup: u64,
    pub journal_bytes: u64,
    /// Age of the oldest change not yet applied by the target.
    pub lag_ms: u64,
    pub in_flight: usize,
    pub window: usize,
    pub batch_bytes: usize,
    pub rtt_us: u64,
    /// Why the link is down, when it is (empty while it is up): the last
    /// failed connect ("authentication failed: ...", "connect timed out")
    /// or disconnect.
    pub last_error: String,
}

struct InFlight {
    id: u64,
    sent: Instant,
    received: bool,
    events: u64,
    /// (partition, seq) this batch lets go of once applied.
    seqs: Vec<(u16, u64)>,
    journal: Option<u64>,
    /// Bodies that cannot be read again from a log or the journal.
    body: Option<Bytes>,
    /// Partitions whose hold it releases once applied (see [`Held`]).
    releases: Vec<usize>,
}

/// A partition whose `acked` waits for full values the target asked for:
/// how many fallbacks are not yet applied, and the highest seq applied
/// meanwhile (what `acked` becomes when the last one is).
#[derive(Debug, Default)]
struct Held {
    fallbacks: u32,
    applied: u64,
}

/// Where a publisher is in one partition's log. One struct per partition
/// rather than a vector per field: a partition a batch reads or an
/// acknowledgement settles costs one cache line, not five (with 16,384
/// partitions few are warm).
#[derive(Clone, Copy, Debug, Default)]
struct Cursor {
    /// The next seq to read.
    next: u64,
    /// The highest seq the target applied.
    acked: u64,
    /// The highest seq spilled into the journal.
    spilled: u64,
    /// Batches in flight holding entries of the partition.
    inflight: u32,
    /// This node is the partition's primary.
    owned: bool,
}

/// Keys whose full values the target asked for, not yet read.
struct Asked {
    keys: VecDeque<(u16, Bytes)>,
    /// Their partitions, held (see [`Held`]) until the batch that reads
    /// the last of them is applied.
    releases: Vec<usize>,
    /// A batch of them is in the outbox or on its way.
    started: bool,
}

/// The partition being copied (see [`Publisher::begin_copy`]): the keys it
/// held when the copy began, read a batch at a time.
struct Copying {
    p: usize,
    keys: VecDeque<Bytes>,
    /// Where its log goes on after the copy: the copy's last body settles
    /// `next - 1`.
    next: u64,
}

/// A body that is not a log read, waiting to be sent.
struct Outgoing {
    body: Bytes,
    /// The (partition, seq) it settles.
    seqs: Vec<(u16, u64)>,
    /// It holds current values, which may be changes the backups do not
    /// hold yet: sent once each (partition, seq) is durable (see
    /// `durable_seq`), or dropped if the partition is led elsewhere by
    /// then (its new primary re-syncs or goes on from its log).
    after: Vec<(usize, u64)>,
    /// Full values the target asked for: read again from this node's
    /// copy if dropped (nobody else would send them).
    keys: Vec<(u16, Bytes)>,
    /// Partitions whose hold it releases once applied (see [`Held`]).
    releases: Vec<usize>,
}

struct Conn {
    tx: mpsc::UnboundedSender<Frame>,
    rx: mpsc::UnboundedReceiver<Frame>,
    endpoint: String,
}

struct Publisher {
    wan: Arc<Wan>,
    target: Arc<Target>,
    parts: usize,
    /// Per partition, where this target is in its log.
    cur: Vec<Cursor>,
    table: Option<Arc<cluster::PartitionTable>>,
    pending: PartitionBits,
    /// Partitions to copy, and the one being copied.
    resync: BTreeSet<usize>,
    copying: Option<Copying>,
    /// Fallback and re-sync bodies, and batches given back by a broken
    /// connection.
    outbox: VecDeque<Outgoing>,
    /// The outbox's front waits for its changes to be durable.
    outbox_waits: bool,
    /// Partitions whose `acked` waits for full values (see [`Held`]).
    held: HashMap<usize, Held>,
    /// Requests for full values not yet read, oldest first, and the bytes
    /// of their keys.
    asked: VecDeque<Asked>,
    asked_bytes: usize,
    in_flight: VecDeque<InFlight>,
    /// A small batch read from the logs is on its way and not yet
    /// applied: more changes wait for it to fill the next batch (Nagle).
    /// Waiting for the apply rather than the receipt makes a batch carry
    /// what was written during one apply at the target, so the target's
    /// work per batch (routing, a backup round trip) is shared by many
    /// changes; a backlog fills whole batches, which pipeline as before.
    small_in_flight: Option<u64>,
    /// No batch from the logs before this: after one that drained them,
    /// the next waits [`SMALL_BATCH_EVERY`].
    hold_until: Option<Instant>,
    journal_dir: PathBuf,
    journal: Option<Journal>,
    /// Next journal record to send.
    journal_read: u64,
    /// Per spill into the journal: the id after its last record and the
    /// time of its oldest change, so the lag counts the journal too.
    spill_ages: VecDeque<(u64, u64)>,
    conn: Option<Conn>,
    batch_id: u64,
    batch_max: usize,
    /// Bytes the last read of the logs took: the next one starts with room
    /// for as much (a body grown from empty to hundreds of KiB was copied
    /// again at each doubling).
    last_read: usize,
    window: usize,
    rtt_min_us: u64,
    rtt_ewma_us: u64,
    endpoint_index: usize,
    /// The target's data incarnation from its last welcome.
    remote_incarnation: Option<u64>,
    backoff: Duration,
    next_connect: Instant,
    unreachable_logged: Option<Instant>,
    dirty: Vec<usize>,
    /// Partitions whose applied seq advanced since it was last shared
    /// with their backups.
    to_share: PartitionBits,
    last_share: Instant,
    last_status: Instant,
    /// See [`Snapshot::last_error`].
    last_error: String,
}

pub async fn run(wan: Arc<Wan>, target: Arc<Target>, journal_dir: PathBuf) {
    let parts = wan.ks.partitions() as usize;
    let mut p = Publisher {
        wan,
        target,
        parts,
        cur: vec![Cursor::default(); parts],
        table: None,
        pending: PartitionBits::new(parts),
        resync: BTreeSet::new(),
        copying: None,
        outbox: VecDeque::new(),
        outbox_waits: false,
        held: HashMap::new(),
        asked: VecDeque::new(),
        asked_bytes: 0,
        in_flight: VecDeque::new(),
        small_in_flight: None,
        hold_until: None,
        journal_dir,
        journal: None,
        journal_read: 0,
        spill_ages: VecDeque::new(),
        conn: None,
        batch_id: 0,
        batch_max: 64 << 10,
        last_read: 0,
        window: 4,
        rtt_min_us: u64::MAX,
        rtt_ewma_us: 0,
        endpoint_index: 0,
        remote_incarnation: None,
        backoff: Duration::from_millis(100),
        next_connect: Instant::now(),
        unreachable_logged: None,
        dirty: Vec::new(),
        to_share: PartitionBits::new(parts),
        last_share: Instant::now(),
        last_status: Instant::now() - Duration::from_secs(10),
        last_error: String::new(),
    };
    // Publishers of one site start at different endpoints, so the remote
    // site's receivers share the work.
    p.endpoint_index = p.wan.cluster.as_ref().map_or(0, |c| c.my_index);
    // A journal left by an earlier run of this node describes a log that
    // is gone with the process; what it held is re-synced if still needed.
    let _ = std::fs::remove_dir_all(&p.journal_dir);
    p.refresh_ownership(true);
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        p.run_controls();
        p.fill();
        if p.target.set_quiet(!p.can_send_logs()) {
            continue;
        }
        let target = p.target.clone();
        let hold = async {
            match p.hold_until {
                Some(t) => tokio::time::sleep_until(t.into()).await,
                None => std::future::pending().await,
            }
        };
        let frame = async {
            match p.conn.as_mut() {
                Some(c) => c.rx.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            f = frame => match f {
                Some(f) => p.on_frame(f),
                None => p.disconnected("connection closed"),
            },
            _ = target.wake.notified() => {}
            _ = hold => {}
            _ = tick.tick() => p.on_tick().await,
        }
    }
}

impl Publisher {
    fn state(&self) -> PublisherState {
        self.target.state()
    }

    fn my_site(&self) -> u16 {
        self.wan.local.site_id
    }

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
                    self.drop_backlog();
                    self.target.set_state(PublisherState::NeedsResync);
                }
            }
        }
    }

    /// Forgets the queue for this target: the logs may let go, the journal
    /// is emptied; only a re-sync brings the target back in step.
    fn drop_backlog(&mut self) {
        if let Some(j) = self.journal.as_mut() {
            if let Err(e) = j.clear() {
                tracing::warn!("clearing the WAN journal: {e}");
            }
            self.journal_read = j.next_id();
        }
        self.spill_ages.clear();
        self.cur.iter_mut().for_each(|c| c.spilled = 0);
        self.outbox.clear();
        self.copying = None;
        self.asked.clear();
        self.asked_bytes = 0;
        self.held.clear();
        self.pending.clear();
        for p in 0..self.parts {
            self.set_needed(p, None);
        }
    }

    fn set_needed(&self, p: usize, seq: Option<u64>) {
        self.target.needed[p].store(seq.unwrap_or(u64::MAX), Ordering::SeqCst);
        self.wan.retain(p);
    }

    /// [`Self::set_needed`] for what was acknowledged: `low(p)` only grows
    /// there, so the log is told without locking its partition.
    fn advance_needed(&self, p: usize) {
        self.target.needed[p].store(self.low(p), Ordering::SeqCst);
        self.wan.retain_forward(p);
    }

    /// The target applied partition `p` through `seq`: `acked` moves (the
    /// log may let go, the backups are told) unless full values the target
    /// asked for are outstanding there.
    fn settle(&mut self, p: usize, seq: u64) {
        // Almost always empty: then no hashing per partition settled.
        if !self.held.is_empty() {
            if let Some(h) = self.held.get_mut(&p) {
                h.applied = h.applied.max(seq);
                return;
            }
        }
        let Some(c) = self.cur.get_mut(p) else { return };
        if seq > c.acked {
            c.acked = seq;
            let owned = c.owned;
            self.to_share.insert(p);
            if owned && self.queueing() {
                self.advance_needed(p);
            }
        }
    }

    /// One of `p`'s outstanding fallbacks was applied.
    fn release(&mut self, p: usize) {
        let Some(h) = self.held.get_mut(&p) else {
            return;
        };
        h.fallbacks = h.fallbacks.saturating_sub(1);
        if h.fallbacks == 0 {
            let applied = h.applied;
            self.held.remove(&p);
            self.settle(p, applied);
        }
    }

    /// Raises what partition `p` is known to have applied to `seq` (a
    /// welcome's watermark, what a previous primary shared), or the held
    /// value while full values are outstanding there: the target may have
    /// applied past a change whose full value it still lacks.
    fn raise_acked(&mut self, p: usize, seq: u64) {
        match self.held.get_mut(&p) {
            Some(h) => h.applied = h.applied.max(seq),
            None => {
                if let Some(c) = self.cur.get_mut(p) {
                    c.acked = c.acked.max(seq);
                }
            }
        }
    }

    /// Largest body of current values (re-sync copies, full values): the
    /// batch size, but not so small that a copy takes many round trips.
    fn body_max(&self) -> usize {
        self.batch_max.max(256 << 10)
    }

    fn low(&self, p: usize) -> u64 {
        self.cur[p].acked.max(self.cur[p].spilled) + 1
    }

    fn queueing(&self) -> bool {
        matches!(
            self.state(),
            PublisherState::Replicating | PublisherState::Paused
        )
    }

    /// Re-reads which partitions this node is primary for when the table
    /// changed (always on `force`).
    fn refresh_ownership(&mut self, force: bool) {
        let table = self.wan.cluster.as_ref().and_then(|c| c.table());
        let same = match (&table, &self.table) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => !force,
            _ => false,
        };
        if same && !force {
            return;
        }
        self.table = table;
        for p in 0..self.parts {
            let owned = self.wan.is_primary(p);
            if owned == self.cur[p].owned && !force {
                continue;
            }
            self.cur[p].owned = owned;
            if owned {
                // Promoted: resume from what the previous primary shared.
                let shared = self.target.shared_applied[p].load(Ordering::Relaxed);
                self.raise_acked(p, shared);
                self.cur[p].next = self.low(p);
                self.pending.insert(p);
                if self.queueing() {
                    self.set_needed(p, Some(self.low(p)));
                }
            } else {
                self.pending.remove(p);
                self.resync.remove(&p);
                if self.copying.as_ref().is_some_and(|c| c.p == p) {
                    self.copying = None;
                }
                self.set_needed(p, None);
            }
        }
    }

    fn connected(&self) -> bool {
        self.conn.is_some()
    }

    fn window_full(&self) -> bool {
        match self.target.settings.ack {
            AckMode::OnApply => !self.in_flight.is_empty(),
            AckMode::Pipelined => {
                self.in_flight.iter().filter(|f| !f.received).count() >= self.window
            }
        }
    }

    /// Whether a change written now would be sent at once: otherwise
    /// writes need not wake this publisher.
    fn can_send_logs(&self) -> bool {
        self.state() == PublisherState::Replicating
            && self.connected()
            && self.small_in_flight.is_none()
            && self.hold_until.is_none()
            && !self.window_full()
            && !self.outbox_waits
    }

    /// Sends while the window has room.
    fn fill(&mut self) {
        if self.hold_until.is_some_and(|t| Instant::now() >= t) {
            self.hold_until = None;
        }
        if self.state() == PublisherState::NeedsResync && self.connected() {
            self.begin_resync();
        }
        if self.state() != PublisherState::Replicating || !self.connected() {
            return;
        }
        self.outbox_waits = false;
        while !self.window_full() {
            if let Some(front) = self.outbox.front() {
                if let Some(&(p, _)) = front
                    .after
                    .iter()
                    .find(|&&(p, seq)| self.durable_seq(p) < seq)
                {
                    if self.cur[p].owned {
                        // A backup round trip away; the next tick sends it
                        // (quiet till then: nothing else may go first).
                        // Meanwhile a copy or a request for full values
                        // reads ahead, so that under writes they do not
                        // leave one batch per wait.
                        if self.read_ahead() {
                            continue;
                        }
                        self.outbox_waits = true;
                        break;
                    }
                    if let Some(o) = self.outbox.pop_front() {
                        if !o.keys.is_empty() {
                            self.ask_full_values(o.keys);
                        }
                        o.releases.into_iter().for_each(|p| self.release(p));
                    }
                    continue;
                }
                let Some(o) = self.outbox.pop_front() else {
                    break;
                };
                self.send(o.body.clone(), o.seqs, None, Some(o.body), o.releases);
                continue;
            }
            if self.read_current_values() {
                continue;
            }
            if let Some(p) = self.resync.pop_first() {
                self.begin_copy(p);
                continue;
            }
            if let Some(j) = self.journal.as_ref() {
                if self.journal_read < j.next_id() {
                    match j.read(self.journal_read, 1) {
                        Ok(records) if !records.is_empty() => {
                            let (id, body) = records[0].clone();
                            self.journal_read = id + 1;
                            let seqs = wire::max_seqs(&body);
                            self.send(body, seqs, Some(id), None, Vec::new());
                            continue;
                        }
                        Ok(_) => {}
                        Err(e) => {
                            tracing::error!(
                                target_site = self.target.settings.name,
                                "WAN journal unreadable, re-syncing: {e}"
                            );
                            self.drop_backlog();
                            self.target.set_state(PublisherState::NeedsResync);
                            return;
                        }
                    }
                }
            }
            if self.small_in_flight.is_some() || self.hold_until.is_some() {
                break;
            }
            let (body, seqs) = self.read_logs(self.batch_max);
            if body.is_empty() {
                // Small batches: nothing waits to be sent; shrink.
                self.batch_max = (self.batch_max / 2).max(BATCH_MIN);
                break;
            }
            let full = body.len() >= self.batch_max;
            if full {
                self.batch_max = (self.batch_max * 2).min(BATCH_MAX);
            }
            let small = body.len() < BATCH_MIN;
            self.send(body, seqs, None, None, Vec::new());
            if !full {
                // The logs are drained: what is written next waits to fill
                // a batch rather than leaving one change at a time.
                self.hold_until = Some(Instant::now() + SMALL_BATCH_EVERY);
                if small {
                    self.small_in_flight = Some(self.batch_id);
                }
            }
        }
    }

    /// Reads up to `max` bytes of unsent changes from the logs of owned
    /// partitions, in seq order per partition; returns the batch body and
    /// the highest seq read per partition.
    fn read_logs(&mut self, max: usize) -> (Bytes, Vec<(u16, u64)>) {
        self.target.dirty.take(&mut self.dirty);
        for p in self.dirty.drain(..) {
            if self.cur.get(p).is_some_and(|c| c.owned) {
                self.pending.insert(p);
            }
        }
        let candidates: Vec<usize> = self.pending.members_from(0);
        let cluster = self.wan.cluster.clone();
        let durability = cluster.as_ref().map(|c| c.replicator.durability());
        let room = if candidates.is_empty() {
            0
        } else {
            self.last_read.min(max) + (4 << 10)
        };
        let mut body = BytesMut::with_capacity(room);
        let mut seqs = Vec::new();
        let mut copies = 0u64;
        for (i, &p) in candidates.iter().enumerate() {
            if body.len() >= max {
                break;
            }
            if let Some(&next) = candidates.get(i + 1) {
                if self.wan.ks.prefetch_partition(next) {
                    if let Some(c) = self.cur.get(next) {
                        keyspace::prefetch_line(c);
                    }
                }
            }
            if self.resync.contains(&p) {
                continue;
            }
            let from = self.cur[p].next;
            let site = self.my_site();
            let delta = self.target.settings.delta;
            let stats = &self.target.stats;
            let durable = durability.as_ref().map_or(u64::MAX, |d| d.seq(p));
            let read = self.wan.ks.with_partition(p, |part, _now| {
                if part.replica {
                    // A backup copy now, whatever the table this publisher
                    // last read says: its log stores nothing, and the next
                    // table makes the partition someone else's.
                    return Some((None, true, false));
                }
                let durable = part.durable_through(durable);
                let iter = part.log.read_from(from)?;
                let mut last = None;
                let mut done = true;
                let mut shipped = false;
                for logged in iter {
                    // Past what the backups hold: read again later.
                    if body.len() >= max || logged.seq > durable {
                        done = false;
                        break;
                    }
                    last = Some(logged.seq);
                    if logged.head.version.site != site {
                        continue;
                    }
                    put_change(&mut body, p as u16, &logged, delta, part, stats);
                    shipped = true;
                }
                Some((last, done, shipped))
            });
            match read {
                None => {
                    // Trimmed before this target had it: copy the contents.
                    self.resync.insert(p);
                    self.pending.remove(p);
                    copies += 1;
                }
                Some((last, done, shipped)) => {
                    if let Some(last) = last {
                        let c = &mut self.cur[p];
                        c.next = last + 1;
                        if shipped {
                            seqs.push((p as u16, last));
                        } else if c.inflight == 0 && c.spilled <= c.acked {
                            // Only other sites' changes, nothing of this
                            // partition on its way: nothing to wait for.
                            // The backups are told too (since session 28),
                            // so they let go of the batches holding these
                            // and a promoted one resumes from here.
                            self.settle(p, last);
                        } else {
                            // Settled by the batch in flight or the journal.
                            seqs.push((p as u16, last));
                        }
                    }
                    if done {
                        self.pending.remove(p);
                    }
                }
            }
        }
        if copies > 0 {
            add(&self.target.stats.partition_copies, copies);
            tracing::warn!(
                target_site = %self.target.settings.name,
                partitions = copies,
                "the log no longer reaches back to what the target has (a promoted backup's log keeps node.log_memory): copying these partitions' contents"
            );
        }
        if !self.resync.is_empty() {
            self.target.wake.notify_one();
        }
        self.last_read = body.len();
        (body.freeze(), seqs)
    }

    fn send(
        &mut self,
        body: Bytes,
        seqs: Vec<(u16, u64)>,
        journal: Option<u64>,
        keep: Option<Bytes>,
        releases: Vec<usize>,
    ) {
        let Some(conn) = self.conn.as_ref() else {
            return;
        };
        self.batch_id += 1;
        let events = wire::count_entries(&body);
        let frame = Frame::Batch {
            id: self.batch_id,
            body,
        };
        if conn.tx.send(frame).is_err() {
            return;
        }
        add(&self.target.stats.batches, 1);
        for (p, _) in &seqs {
            if let Some(c) = self.cur.get_mut(*p as usize) {
                c.inflight += 1;
            }
        }
        self.in_flight.push_back(InFlight {
            id: self.batch_id,
            sent: Instant::now(),
            received: false,
            events,
            seqs,
            journal,
            body: keep,
            releases,
        });
    }

    /// After `needs-resync`: every primary partition is to be copied.
    fn begin_resync(&mut self) {
        tracing::warn!(
            target_site = self.target.settings.name,
            "WAN re-sync: copying the current contents and tombstones of every primary partition"
        );
        add(&self.target.stats.resyncs, 1);
        for p in 0..self.parts {
            if self.cur[p].owned {
                self.resync.insert(p);
            }
        }
        self.target.set_state(PublisherState::Replicating);
    }

    /// The last seq of partition `p` this site would keep if this node
    /// failed now (see `Replicator::durable_seq`); nothing after it (or
    /// after the log's `promoted_through`) is shipped.
    fn durable_seq(&self, p: usize) -> u64 {
        self.wan
            .cluster
            .as_ref()
            .map_or(u64::MAX, |c| c.replicator.durable_seq(p))
    }

    /// Begins copying a partition whose log no longer goes back far enough
    /// (or any owned one after `needs-resync`): its keys are taken under
    /// its lock, with the log's next seq, where the log goes on after the
    /// copy; [`Self::read_copy`] then reads them into the outbox a batch at
    /// a time, entries as full values with their versions, tombstones as
    /// removals. A value read later than the moment of the keys is newer,
    /// and the log ships what changed meanwhile again (last writer wins),
    /// so the copy is what the partition held then or later, and a
    /// re-sync holds at most a batch of it and the keys of one partition
    /// (shared with the partition, a pointer each).
    fn begin_copy(&mut self, p: usize) {
        if !self.cur[p].owned {
            return;
        }
        let (keys, next) = self
            .wan
            .ks
            .with_partition(p, |part, now| (part.copy_keys(now), part.log.next_seq()));
        self.cur[p].next = next;
        self.pending.insert(p);
        self.set_needed(p, Some(self.low(p).max(next)));
        self.copying = Some(Copying { p, keys, next });
    }

    /// Reads the next batch of full values asked for, or else of the
    /// partition being copied, into the outbox; false if neither is under
    /// way.
    fn read_current_values(&mut self) -> bool {
        if self.read_full_values() {
            return true;
        }
        if self.copying.is_some() {
            self.read_copy();
            return true;
        }
        false
    }

    /// [`Self::read_current_values`] while the outbox's front waits to be
    /// durable, unless the outbox holds [`READ_AHEAD_BYTES`] already.
    fn read_ahead(&mut self) -> bool {
        if self.asked.is_empty() && self.copying.is_none() {
            return false;
        }
        self.outbox.iter().map(|o| o.body.len()).sum::<usize>() < READ_AHEAD_BYTES
            && self.read_current_values()
    }

    /// Reads the next batch of the partition being copied into the outbox;
    /// its last one settles what the log held when the copy began.
    fn read_copy(&mut self) {
        let max = self.body_max();
        let Some(c) = self.copying.as_mut() else {
            return;
        };
        let p = c.p;
        let mut body = BytesMut::new();
        // Read after the values: at or past the changes that made them.
        let unsettled = self.wan.ks.with_partition(p, |part, now| {
            while body.len() < max {
                let Some(key) = c.keys.pop_front() else { break };
                for change in part.copy_changes(&key, now) {
                    wire::put_entry(&mut body, p as u16, 0, &change);
                }
            }
            part.logged_as_primary()
        });
        let (last, next) = (c.keys.is_empty(), c.next);
        let seqs = if last && next > 1 {
            vec![(p as u16, next - 1)]
        } else {
            Vec::new()
        };
        let after = unsettled.map(|l| (p, l)).into_iter().collect();
        self.outbox.push_back(Outgoing {
            body: body.freeze(),
            seqs,
            after,
            keys: Vec::new(),
            releases: Vec::new(),
        });
        if last {
            self.copying = None;
        }
    }

    fn on_frame(&mut self, f: Frame) {
        match f {
            Frame::Received(id) => {
                let now = Instant::now();
                let was_full = self.window_full();
                if let Some(b) = self.in_flight.iter_mut().find(|b| b.id == id) {
                    b.received = true;
                    let rtt = now.duration_since(b.sent).as_micros() as u64;
                    add(&self.target.stats.rtt_us_sum, rtt);
                    add(&self.target.stats.rtt_count, 1);
                    self.rtt_min_us = self.rtt_min_us.min(rtt.max(1));
                    self.rtt_ewma_us = if self.rtt_ewma_us == 0 {
                        rtt
                    } else {
                        (self.rtt_ewma_us * 7 + rtt) / 8
                    };
                    // Delay-based: grow while the link does not queue.
                    if self.rtt_ewma_us > self.rtt_min_us * 3 + 2_000 {
                        self.window = (self.window * 3 / 4).max(WINDOW_MIN);
                    } else if was_full {
                        self.window = (self.window + 1).min(WINDOW_MAX);
                    }
                }
            }
            Frame::Applied(id) => {
                if self.small_in_flight.is_some_and(|s| s <= id) {
                    self.small_in_flight = None;
                }
                let Some(pos) = self.in_flight.iter().position(|b| b.id == id) else {
                    return;
                };
                let Some(b) = self.in_flight.remove(pos) else {
                    return;
                };
                add(&self.target.stats.events_distributed, b.events);
                for (p, seq) in b.seqs {
                    let p = p as usize;
                    let Some(c) = self.cur.get_mut(p) else {
                        continue;
                    };
                    c.inflight = c.inflight.saturating_sub(1);
                    self.settle(p, seq);
                }
                b.releases.into_iter().for_each(|p| self.release(p));
                self.trim_journal();
            }
            Frame::NeedFull(keys) => self.ask_full_values(keys),
            Frame::Refuse(why) => {
                tracing::warn!(
                    target_site = self.target.settings.name,
                    "remote site refused: {why}"
                );
                self.disconnected("refused");
            }
            other => {
                tracing::warn!(
                    target_site = self.target.settings.name,
                    "unexpected frame from remote site: {other:?}"
                );
                self.disconnected("protocol error");
            }
        }
    }

    /// The receiver lacked the base of these keys' deltas: their full
    /// values are read and sent a batch at a time ([`Self::read_full_values`]).
    /// The batch that asked is acknowledged as applied next; it does not
    /// settle these partitions until the last of them is applied too.
    fn ask_full_values(&mut self, keys: Vec<(u16, Bytes)>) {
        let keys: VecDeque<(u16, Bytes)> = keys
            .into_iter()
            .filter(|(p, key)| {
                (*p as usize) < self.parts && self.wan.ks.partition_of(key) == *p as usize
            })
            .collect();
        if keys.is_empty() {
            return;
        }
        let mut releases: Vec<usize> = keys.iter().map(|(p, _)| *p as usize).collect();
        releases.sort_unstable();
        releases.dedup();
        for &p in &releases {
            self.held.entry(p).or_default().fallbacks += 1;
        }
        self.asked_bytes += keys.iter().map(|(_, k)| asked_size(k)).sum::<usize>();
        self.asked.push_back(Asked {
            keys,
            releases,
            started: false,
        });
        let limit =
            (self.wan.settings.memory_budget as usize / ASKED_BUDGET_SHARE).max(ASKED_MIN_BYTES);
        if self.asked_bytes > limit {
            tracing::error!(
                target_site = self.target.settings.name,
                bytes = self.asked_bytes,
                "the target asked for more full values than this node keeps requests for ({limit} bytes of keys, a quarter of wan.memory_budget): re-syncing it instead"
            );
            self.drop_backlog();
            self.target.set_state(PublisherState::NeedsResync);
        }
    }

    /// Reads the next batch of full values asked for (up to `batch_max`
    /// bytes: a request for many large values neither makes one body over
    /// the frame limit nor holds them all at once) into the outbox; false
    /// if none is asked for.
    fn read_full_values(&mut self) -> bool {
        if self.asked.is_empty() {
            return false;
        }
        let max = self.body_max();
        let mut body = BytesMut::new();
        let mut after: Vec<(usize, u64)> = Vec::new();
        let mut keys = Vec::new();
        let mut unheld = 0u64;
        while body.len() < max {
            let Some((p16, key)) = self.asked.front_mut().and_then(|a| a.keys.pop_front()) else {
                break;
            };
            self.asked_bytes = self.asked_bytes.saturating_sub(asked_size(&key));
            let p = p16 as usize;
            // A partition led elsewhere since the batch left still gets
            // the value this node holds as its backup (its primary's
            // publisher counts the change as applied: nobody else sends
            // it); last writer wins makes an older one harmless.
            let changes = self.wan.ks.full_changes(&key);
            if changes.is_empty() && !self.cur[p].owned {
                unheld += 1;
            }
            for change in changes {
                wire::put_entry(&mut body, p16, 0, &change);
            }
            // Read after the value: at or past the change that made it.
            let unsettled = self
                .wan
                .ks
                .with_partition(p, |part, _| part.logged_as_primary());
            if let Some(last) = unsettled.filter(|_| self.cur[p].owned) {
                match after.iter_mut().find(|(q, _)| *q == p) {
                    Some(a) => a.1 = a.1.max(last),
                    None => after.push((p, last)),
                }
            }
            keys.push((p16, key));
            add(&self.target.stats.full_fallbacks, 1);
        }
        if unheld > 0 {
            tracing::warn!(
                target_site = %self.target.settings.name,
                keys = unheld,
                "the target asked for full values of keys in partitions this node no longer holds: they may differ there until written again"
            );
        }
        // The request's last batch releases its partitions (an empty one
        // too, if earlier ones are on their way: it is applied after them).
        let Some(front) = self.asked.front_mut() else {
            return true;
        };
        let started = std::mem::replace(&mut front.started, true);
        let releases = match front.keys.is_empty() {
            true => self
                .asked
                .pop_front()
                .map(|a| a.releases)
                .unwrap_or_default(),
            false => Vec::new(),
        };
        if body.is_empty() && !started {
            releases.into_iter().for_each(|p| self.release(p));
            return true;
        }
        let keys = if after.is_empty() { Vec::new() } else { keys };
        self.outbox.push_back(Outgoing {
            body: body.freeze(),
            seqs: Vec::new(),
            after,
            keys,
            releases,
        });
        true
    }

    fn trim_journal(&mut self) {
        let Some(j) = self.journal.as_mut() else {
            return;
        };
        let oldest_unapplied = self
            .in_flight
            .iter()
            .filter_map(|b| b.journal)
            .min()
            .unwrap_or(self.journal_read);
        while self
            .spill_ages
            .front()
            .is_some_and(|&(end, _)| end <= oldest_unapplied)
        {
            self.spill_ages.pop_front();
        }
        // Every record applied: drop the active segment too (truncate_before
        // keeps it), or journal_bytes and the disk budget would keep counting
        // a delivered backlog of up to a whole segment.
        let result = if oldest_unapplied >= j.next_id() {
            if j.disk_bytes() > 0 {
                j.clear()
            } else {
                Ok(())
            }
        } else {
            j.truncate_before(oldest_unapplied)
        };
        if let Err(e) = result {
            tracing::warn!("trimming the WAN journal: {e}");
        }
    }

    fn disconnected(&mut self, why: &str) {
        self.last_error = format!("link down: {why}");
        if self.conn.take().is_some() {
            tracing::warn!(
                target_site = self.target.settings.name,
                "WAN link down ({why}); will reconnect"
            );
            self.last_status = Instant::now() - Duration::from_secs(1);
        }
        // Everything not applied is sent again, in order: kept bodies
        // first, the journal from its oldest unapplied record, the logs
        // from what was applied (or spilled).
        self.small_in_flight = None;
        self.hold_until = None;
        self.cur.iter_mut().for_each(|c| c.inflight = 0);
        let mut kept: Vec<Outgoing> = Vec::new();
        for b in self.in_flight.drain(..) {
            if let Some(id) = b.journal {
                self.journal_read = self.journal_read.min(id);
            }
            if let Some(body) = b.body {
                // Sent once, so it was durable then.
                kept.push(Outgoing {
                    body,
                    seqs: b.seqs,
                    after: Vec::new(),
                    keys: Vec::new(),
                    releases: b.releases,
                });
            }
        }
        for k in kept.into_iter().rev() {
            self.outbox.push_front(k);
        }
        for p in 0..self.parts {
            if self.cur[p].owned {
                self.cur[p].next = self.low(p);
                self.pending.insert(p);
            }
        }
        self.window = 4;
        self.next_connect = Instant::now() + self.backoff;
        self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
    }

    async fn on_tick(&mut self) {
        self.refresh_ownership(false);
        // A link that silently stopped carrying (a cable pulled, a peer
        // frozen) is noticed by acknowledgements that never come.
        let stalled = self
            .in_flight
            .iter()
            .find(|b| !b.received)
            .is_some_and(|b| b.sent.elapsed() > STALL);
        if stalled {
            self.disconnected("no acknowledgement in time");
        }
        if let Some(c) = &self.wan.cluster {
            if self.last_share.elapsed() >= SHARE_EVERY {
                self.last_share = Instant::now();
                let mut shared = Vec::new();
                self.to_share.take(&mut shared);
                let applied: Vec<(usize, u64)> = shared
                    .into_iter()
                    .filter(|&p| self.cur[p].owned)
                    .map(|p| (p, self.cur[p].acked))
                    .collect();
                c.replicator
                    .share_wan_applied(&self.target.settings.name, &applied);
            }
        }
        // The budget first: connecting to a site that is down can take
        // up to the connect timeout.
        self.check_budget();
        if !self.connected()
            && self.state() != PublisherState::Stopped
            && Instant::now() >= self.next_connect
        {
            self.connect().await;
        }
        if self.last_status.elapsed() >= Duration::from_millis(500) {
            self.last_status = Instant::now();
            self.refresh_status();
        }
    }

    async fn connect(&mut self) {
        let endpoints = &self.target.settings.endpoints;
        if endpoints.is_empty() {
            return;
        }
        let endpoint = endpoints[self.endpoint_index % endpoints.len()].clone();
        self.endpoint_index += 1;
        match open(&self.wan, &self.target, &endpoint).await {
            Ok((conn, applied, incarnation)) => {
                tracing::info!(
                    target_site = self.target.settings.name,
                    endpoint,
                    "WAN link up"
                );
                self.unreachable_logged = None;
                self.last_error.clear();
                add(&self.target.stats.connects, 1);
                let restarted =
                    incarnation != 0 && self.remote_incarnation.is_some_and(|i| i != incarnation);
                if incarnation != 0 {
                    self.remote_incarnation = Some(incarnation);
                }
                if restarted && self.queueing() {
                    tracing::warn!(
                        target_site = self.target.settings.name,
                        "the remote site started over without its data: re-syncing it"
                    );
                    self.cur.iter_mut().for_each(|c| c.acked = 0);
                    self.drop_backlog();
                    self.target.set_state(PublisherState::NeedsResync);
                }
                for (p, seq) in applied {
                    self.raise_acked(p as usize, seq);
                }
                for p in 0..self.parts {
                    if self.cur[p].owned {
                        self.cur[p].next = self.low(p);
                        self.pending.insert(p);
                    }
                }
                self.conn = Some(conn);
                self.backoff = Duration::from_millis(100);
                // `wan status` shows the link up now, not at the next refresh.
                self.refresh_status();
            }
            Err(e) => {
                tracing::debug!(
                    target_site = self.target.settings.name,
                    endpoint,
                    "WAN connect failed: {e}"
                );
                self.last_error = format!("{endpoint}: {e}");
                let log_due = self
                    .unreachable_logged
                    .is_none_or(|t| t.elapsed() >= UNREACHABLE_LOG_EVERY);
                if self.backoff >= BACKOFF_MAX && log_due {
                    self.unreachable_logged = Some(Instant::now());
                    tracing::warn!(
                        target_site = self.target.settings.name,
                        endpoint,
                        "remote site unreachable: {e}"
                    );
                }
                self.next_connect = Instant::now() + self.backoff;
                self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
            }
        }
    }

    /// Over the memory budget, moves this target's unsent backlog to its
    /// journal (the link is down or slower than the writes); over the disk
    /// budget, drops it and marks the target for re-sync.
    fn check_budget(&mut self) {
        if !self.queueing() {
            return;
        }
        let budget = self.wan.settings.memory_budget as usize;
        if self.wan.ks.log_bytes() <= budget {
            return;
        }
        if self.journal.is_none() {
            match Journal::open(&self.journal_dir, JournalConfig::default()) {
                Ok(j) => {
                    self.journal_read = j.next_id();
                    self.journal = Some(j);
                }
                Err(e) => {
                    tracing::error!(
                        target_site = self.target.settings.name,
                        "cannot open the WAN journal, re-syncing instead: {e}"
                    );
                    self.drop_backlog();
                    self.target.set_state(PublisherState::NeedsResync);
                    return;
                }
            }
        }
        let owned: Vec<usize> = (0..self.parts).filter(|&p| self.cur[p].owned).collect();
        let mut spilled_any = false;
        let mut oldest_ms = u64::MAX;
        for p in owned {
            // Re-spill from what was applied: entries in flight from memory
            // go to the journal too, so the journal always precedes the log.
            let from = self.low(p);
            let site = self.my_site();
            let delta = self.target.settings.delta;
            let stats = &self.target.stats;
            let mut body = BytesMut::new();
            let mut last = None;
            let mut done = true;
            let durable = self.durable_seq(p);
            let read = self.wan.ks.with_partition(p, |part, _| {
                if part.replica {
                    return Some(());
                }
                let durable = part.durable_through(durable);
                let iter = part.log.read_from(from)?;
                for logged in iter {
                    if logged.seq > durable {
                        done = false;
                        break;
                    }
                    last = Some(logged.seq);
                    if logged.head.version.site == site {
                        put_change(&mut body, p as u16, &logged, delta, part, stats);
                        add(&stats.spilled_events, 1);
                        oldest_ms = oldest_ms.min(logged.head.version.millis());
                    }
                }
                Some(())
            });
            if read.is_none() {
                self.resync.insert(p);
                continue;
            }
            let Some(last) = last else { continue };
            if !body.is_empty() {
                let Some(j) = self.journal.as_mut() else {
                    return;
                };
                let len = body.len() as u64;
                if let Err(e) = append_chunked(j, &body.freeze()) {
                    tracing::error!(
                        target_site = self.target.settings.name,
                        "WAN journal write failed, re-syncing instead: {e}"
                    );
                    self.drop_backlog();
                    self.target.set_state(PublisherState::NeedsResync);
                    return;
                }
                add(&self.target.stats.spilled_bytes, len);
            }
            self.cur[p].spilled = last;
            self.cur[p].next = self.cur[p].next.max(last + 1);
            if done {
                self.pending.remove(p);
            }
            self.set_needed(p, Some(self.low(p)));
            spilled_any = true;
        }
        if let Some(j) = self.journal.as_mut() {
            if oldest_ms != u64::MAX {
                self.spill_ages.push_back((j.next_id(), oldest_ms));
            }
            let _ = j.flush();
            if spilled_any && j.disk_bytes() > self.wan.settings.disk_budget {
                tracing::error!(
                    target_site = self.target.settings.name,
                    disk_bytes = j.disk_bytes(),
                    disk_budget = self.wan.settings.disk_budget,
                    "WAN backlog is over the disk budget: the target needs a re-sync, which runs once it is reachable"
                );
                self.drop_backlog();
                self.target.set_state(PublisherState::NeedsResync);
            }
        }
    }

    fn refresh_status(&mut self) {
        let now_ms = self.wan.ks.now_ms();
        let site = self.my_site();
        let mut scan_budget: u64 = 1 << 20;
        let mut s = Snapshot {
            connected: self.connected(),
            endpoint: self
                .conn
                .as_ref()
                .map(|c| c.endpoint.clone())
                .unwrap_or_default(),
            journal_bytes: self.journal.as_ref().map_or(0, |j| j.disk_bytes()),
            in_flight: self.in_flight.len(),
            window: self.window,
            batch_bytes: self.batch_max,
            rtt_us: self.rtt_ewma_us,
            last_error: self.last_error.clone(),
            ..Default::default()
        };
        // Only the partitions this node is primary for are visited; the
        // backups' copies are the rest of the logs' running total.
        for p in (0..self.parts).filter(|&p| self.cur[p].owned) {
            let acked = self.cur[p].acked;
            self.wan.ks.with_partition(p, |part, _| {
                if part.replica {
                    return;
                }
                s.queue_bytes_primary += part.log.allocated() as u64;
                // Only changes that originated here are queued for the
                // site; past a scan budget, every unacknowledged entry
                // counts (an upper bound), so a status never holds a
                // partition lock for long.
                let unacked = part.log.next_seq().saturating_sub(acked + 1);
                let Some(it) = part.log.read_from(acked + 1) else {
                    s.queue_events += unacked;
                    return;
                };
                if unacked > scan_budget {
                    s.queue_events += unacked;
                    if let Some(l) = it.take(1000).find(|l| l.head.version.site == site) {
                        s.lag_ms = s.lag_ms.max(now_ms.saturating_sub(l.head.version.millis()));
                    }
                    return;
                }
                scan_budget -= unacked;
                let mut first = true;
                for l in it.filter(|l| l.head.version.site == site) {
                    if first {
                        s.lag_ms = s.lag_ms.max(now_ms.saturating_sub(l.head.version.millis()));
                        first = false;
                    }
                    s.queue_events += 1;
                }
            });
        }
        s.queue_bytes_backup =
            (self.wan.ks.log_bytes() as u64).saturating_sub(s.queue_bytes_primary);
        if let Some(&(_, oldest)) = self.spill_ages.front() {
            s.lag_ms = s.lag_ms.max(now_ms.saturating_sub(oldest));
        }
        if self.state() == PublisherState::Stopped {
            s.queue_events = 0;
            s.lag_ms = 0;
        }
        *self.target.status.lock() = s;
    }
}

/// Appends a spilled body to the journal as records of at most
/// [`BATCH_MAX`] bytes (whole entries each), so every record is a batch
/// the receiver accepts.
fn append_chunked(j: &mut Journal, body: &Bytes) -> Result<(), journal::JournalError> {
    for chunk in wire::split_body(body, BATCH_MAX) {
        j.append(&chunk)?;
    }
    Ok(())
}

/// Writes a log entry into a batch body as the log holds it; with `delta`
/// off a delta becomes the key's current full value (what a system without
/// deltas ships).
fn put_change(
    body: &mut BytesMut,
    p: u16,
    logged: &Logged,
    delta: bool,
    part: &keyspace::Partition,
    stats: &crate::PublisherStats,
) {
    let is_delta = logged.head.kind == ChangeKind::DELTA_INDEX;
    if is_delta && !delta {
        if let Some(e) = part.get(logged.head.key) {
            let full = Change {
                key: Bytes::copy_from_slice(logged.head.key),
                version: e.version,
                kind: ChangeKind::Full {
                    value: e.value.clone(),
                    expire_at: e.expire_at,
                },
            };
            wire::put_entry(body, p, logged.seq, &full);
            add(&stats.fulls_shipped, 1);
        }
        return;
    }
    wire::put_encoded(body, p, logged.seq, logged.encoded);
    add(
        if is_delta {
            &stats.deltas_shipped
        } else {
            &stats.fulls_shipped
        },
        1,
    );
}

/// Connects, says hello and waits for the welcome; the connection's
/// reader and writer then run as tasks feeding the publisher's channels.
async fn open(
    wan: &Arc<Wan>,
    target: &Arc<Target>,
    endpoint: &str,
) -> Result<(Conn, Vec<(u16, u64)>, u64), String> {
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(endpoint))
        .await
        .map_err(|_| "connect timed out".to_string())?
        .map_err(|e| e.to_string())?;
    let _ = stream.set_nodelay(true);
    let (mut rd, mut wr) = stream.into_split();
    let mut out = BytesMut::new();
    let nonce = auth::nonce();
    wire::encode(
        &Frame::Hello(Hello {
            version: wire::PROTOCOL_VERSION,
            site_id: wan.local.site_id,
            site_name: wan.local.site_name.clone(),
            partitions: wan.ks.partitions(),
            node_id: wan.local.node_id.clone(),
            incarnation: wan.incarnation,
            nonce,
        }),
        &mut out,
    );
    wr.write_all(&out).await.map_err(|e| e.to_string())?;
    let mut buf = BytesMut::with_capacity(4096);
    let welcome = tokio::time::timeout(HELLO_TIMEOUT, async {
        loop {
            if let Some(f) = wire::decode(&mut buf).map_err(|e| e.to_string())? {
                return Ok::<Frame, String>(f);
            }
            if rd.read_buf(&mut buf).await.map_err(|e| e.to_string())? == 0 {
                return Err("closed before the welcome".to_string());
            }
        }
    })
    .await
    .map_err(|_| "no welcome in time".to_string())??;
    let (applied, incarnation) = match welcome {
        Frame::Welcome(w) => {
            if target.settings.name != w.site_name {
                return Err(format!(
                    "endpoint {endpoint} is site {:?}, not {:?}",
                    w.site_name, target.settings.name
                ));
            }
            authenticate(wan, &mut wr, &nonce, w.challenge.as_ref()).await?;
            (w.applied, w.data_incarnation)
        }
        Frame::Refuse(why) => return Err(format!("refused: {why}")),
        other => return Err(format!("unexpected first frame {other:?}")),
    };
    let (tx, mut out_rx) = mpsc::unbounded_channel::<Frame>();
    let (in_tx, rx) = mpsc::unbounded_channel::<Frame>();
    let target_name = endpoint.to_string();
    let stats_target = target.clone();
    tokio::spawn(async move {
        // Frames waiting to be written, in order; raw batch bodies are
        // written from the log reads' buffers, not copied again.
        let mut out = BytesMut::new();
        let mut parts: Vec<Bytes> = Vec::new();
        let mut lz4 = wire::Lz4Probe::default();
        while let Some(f) = out_rx.recv().await {
            let mut pending = 0;
            let mut next = Some(f);
            while let Some(f) = next.take() {
                if let Some(body) = wire::encode_parts(&f, &mut lz4, &mut out) {
                    pending += out.len() + body.len();
                    parts.push(out.split().freeze());
                    parts.push(body);
                }
                if pending + out.len() > 4 << 20 {
                    break;
                }
                next = out_rx.try_recv().ok();
            }
            pending += out.len();
            parts.push(out.split().freeze());
            add(&stats_target.stats.bytes_sent, pending as u64);
            if write_parts(&mut wr, &mut parts).await.is_err() {
                break;
            }
        }
    });
    tokio::spawn(async move {
        loop {
            match wire::decode(&mut buf) {
                Ok(Some(f)) => {
                    if in_tx.send(f).is_err() {
                        return;
                    }
                    continue;
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(endpoint = target_name, "bad frame from remote site: {e}");
                    return;
                }
            }
            match rd.read_buf(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    });
    Ok((
        Conn {
            tx,
            rx,
            endpoint: endpoint.to_string(),
        },
        applied,
        incarnation,
    ))
}

/// Writes every part, in order, with as few system calls as the socket
/// allows; empties `parts`.
async fn write_parts(
    wr: &mut tokio::net::tcp::OwnedWriteHalf,
    parts: &mut Vec<Bytes>,
) -> std::io::Result<()> {
    use bytes::Buf;
    parts.retain(|p| !p.is_empty());
    let mut first = 0;
    while first < parts.len() {
        let slices: Vec<std::io::IoSlice> = parts[first..]
            .iter()
            .take(64)
            .map(|p| std::io::IoSlice::new(p))
            .collect();
        let mut n = wr.write_vectored(&slices).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while n > 0 {
            let p = &mut parts[first];
            let k = n.min(p.len());
            p.advance(k);
            n -= k;
            if p.is_empty() {
                first += 1;
            }
        }
    }
    parts.clear();
    Ok(())
}

/// Answers the receiver's challenge and checks its proof: a node with
/// `wan.secret` sends nothing to a site that cannot prove it knows it.
async fn authenticate(
    wan: &Wan,
    wr: &mut tokio::net::tcp::OwnedWriteHalf,
    nonce: &auth::Nonce,
    challenge: Option<&wire::Challenge>,
) -> Result<(), String> {
    let secret = wan.settings.secret.as_deref().map(str::as_bytes);
    match (secret, challenge) {
        (None, None) => Ok(()),
        (None, Some(_)) => Err("authentication failed: the remote site asks for wan.secret, which this node does not have".into()),
        (Some(_), None) => Err(
            "authentication failed: the remote site has no wan.secret, so it cannot prove it is one of ours; not sending".into(),
        ),
        (Some(secret), Some(c)) => {
            // Ours first, even if theirs is wrong: their log then says why.
            let mut out = BytesMut::new();
            wire::encode(&Frame::Proof(auth::proof(secret, Role::Publisher, nonce, &c.nonce)), &mut out);
            wr.write_all(&out).await.map_err(|e| e.to_string())?;
            if auth::verify(secret, Role::Receiver, nonce, &c.nonce, &c.proof) {
                Ok(())
            } else {
                Err("authentication failed: the remote site's proof does not match wan.secret".into())
            }
        }
    }
}

impl crate::PublisherStats {
    /// Average batch round trip (send to received), microseconds.
    pub fn rtt_avg_us(&self) -> u64 {
        get(&self.rtt_us_sum) / get(&self.rtt_count).max(1)
    }
}
