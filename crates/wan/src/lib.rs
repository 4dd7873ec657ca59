//! Replication between sites (WAN).
//!
//! The partition log is the queue: a [`publisher`] per remote site reads
//! the logs of the partitions this node is primary for, from what that site
//! has applied, and ships the changes that originated here in batches of
//! many partitions on one connection, compressed, several in flight. Over
//! the node's memory budget the unsent backlog spills to a per-target
//! [`journal::Journal`]; over the disk budget the target is marked
//! `needs-resync` and, once reachable again, gets the partitions' current
//! contents followed by the log. Writers are never failed or slowed.
//!
//! A [`receiver`] accepts remote publishers, drops what its watermarks say
//! already arrived, and hands changes to its own site's primaries through
//! the `WANAPPLY` command ([`local`]), which resolves conflicts by version
//! (`Keyspace::apply_remote`) and goes through the normal write path: logged,
//! replicated to replicas (waited for when replication is sync), near caches
//! invalidated.

pub mod auth;
pub mod local;
pub mod publisher;
pub mod receiver;
pub mod settled;
pub mod stats;
pub mod watermarks;
pub mod wire;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use keyspace::{Change, Keyspace, LogListener, PartitionBits};
use parking_lot::Mutex;
use tokio::sync::Notify;

pub use stats::{PublisherStats, ReceiverStats};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckMode {
    /// The window opens on "received"; the log is released on "applied".
    Pipelined,
    /// One batch at a time, the next only once the previous is applied
    /// (Hazelcast's ACK_ON_OPERATION_COMPLETE, for comparison).
    OnApply,
}

#[derive(Clone, Debug)]
pub struct TargetSettings {
    pub name: String,
    /// Any nodes of the remote site, `host:port` of their `wan.listen`.
    pub endpoints: Vec<String>,
    /// False ships the full value for every change (the GemFire baseline).
    pub delta: bool,
    pub ack: AckMode,
}

#[derive(Clone, Debug)]
pub struct WanSettings {
    /// Where remote publishers connect; None: this node receives nothing.
    pub listen: Option<SocketAddr>,
    /// Bytes of partition log held in memory for remote sites, per node.
    pub memory_budget: u64,
    /// Bytes of spilled backlog on disk, per node, before re-sync.
    pub disk_budget: u64,
    /// Bytes of tombstones per node (see [`settled`]).
    pub tombstone_memory: u64,
    pub targets: Vec<TargetSettings>,
    /// Where the journals live (`<data_dir>/wan`).
    pub dir: PathBuf,
    /// Shared by the sites: both ends of a link prove they know it
    /// ([`auth`]). None: this node accepts any publisher that reaches
    /// `listen` and sends to any receiver.
    pub secret: Option<String>,
    /// `[wan] tls`: mutual TLS on every link, each site named by its
    /// certificate ([`framing::tls`]).
    pub tls: Option<framing::tls::PeerTls>,
}

/// What the node around the WAN tells it: its identity and how to reach
/// its own site's primaries.
#[derive(Clone, Debug)]
pub struct LocalSite {
    pub site_id: u16,
    pub site_name: String,
    pub node_id: String,
    /// This node's Redis address (where `WANAPPLY` goes when it owns a key).
    pub client_addr: String,
    /// With local persistence: whether this node's copies came back whole
    /// from its disk (`persist::Recovered::complete`); then its publishers
    /// keep the incarnation they had, so remote receivers' watermarks
    /// still hold for them. None: no persistence (a new one each start).
    pub restored: Option<bool>,
}

/// A publisher's state, as operators see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum PublisherState {
    Replicating = 0,
    /// Queue, don't send.
    Paused = 1,
    /// Neither queue nor send; resuming re-syncs.
    Stopped = 2,
    /// The backlog outgrew the disk budget; a re-sync runs once reachable.
    NeedsResync = 3,
}

impl PublisherState {
    pub fn name(self) -> &'static str {
        match self {
            PublisherState::Replicating => "replicating",
            PublisherState::Paused => "paused",
            PublisherState::Stopped => "stopped",
            PublisherState::NeedsResync => "needs-resync",
        }
    }

    fn from_u8(v: u8) -> Self {
        match v {
            1 => PublisherState::Paused,
            2 => PublisherState::Stopped,
            3 => PublisherState::NeedsResync,
            _ => PublisherState::Replicating,
        }
    }
}

/// An operator's request to a publisher.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    Pause,
    Resume,
    Stop,
    Resync,
}

/// The shared face of one target's publisher: state, counters, and the
/// partitions whose logs grew since it last looked.
pub struct Target {
    pub settings: TargetSettings,
    state: AtomicU8,
    pub stats: PublisherStats,
    /// The partitions whose log grew.
    dirty: PartitionBits,
    wake: Notify,
    /// The publisher cannot send what a write adds (a small batch is held,
    /// the window is full, the link is down, it is paused): writes only
    /// mark their partition and do not wake it. Without this a publisher
    /// holding a small batch woke once per newly marked partition, about
    /// once per write at 271 partitions.
    quiet: AtomicBool,
    control: Mutex<Vec<Control>>,
    /// Per partition, the lowest seq this target still needs from the log
    /// (u64::MAX: nothing).
    needed: Box<[AtomicU64]>,
    /// Per partition, the highest seq this target applied, as the
    /// partition's primary last shared it (read when this node is promoted).
    shared_applied: Box<[AtomicU64]>,
    /// Per partition, the highest hlc among the log entries this target
    /// applied (this node's publisher's, see [`settled`]).
    own_settled: Box<[AtomicU64]>,
    /// Filled by the publisher for `wan status` and metrics.
    pub status: Mutex<publisher::Snapshot>,
}

impl Target {
    fn new(settings: TargetSettings, partitions: u16) -> Self {
        Target {
            settings,
            state: AtomicU8::new(PublisherState::Replicating as u8),
            stats: PublisherStats::default(),
            dirty: PartitionBits::new(partitions as usize),
            wake: Notify::new(),
            quiet: AtomicBool::new(false),
            control: Mutex::new(Vec::new()),
            needed: (0..partitions).map(|_| AtomicU64::new(u64::MAX)).collect(),
            shared_applied: (0..partitions).map(|_| AtomicU64::new(0)).collect(),
            own_settled: (0..partitions).map(|_| AtomicU64::new(0)).collect(),
            status: Mutex::new(publisher::Snapshot::default()),
        }
    }

    pub fn state(&self) -> PublisherState {
        PublisherState::from_u8(self.state.load(Ordering::Relaxed))
    }

    fn set_state(&self, s: PublisherState) {
        self.state.store(s as u8, Ordering::Relaxed);
    }

    /// Marks partition `p`'s log as grown; `wake` wakes the publisher
    /// unless it is quiet (changes from other sites only have to be read
    /// past, so a passive site's publishers do not wake per change).
    fn mark(&self, p: usize, wake: bool) {
        // SeqCst pairs with `set_quiet(false)`: either the publisher sees
        // this mark after leaving quiet, or this sees it not quiet.
        if self.dirty.insert(p) && wake && !self.quiet.load(Ordering::SeqCst) {
            self.wake.notify_one();
        }
    }

    /// The publisher says whether it could send a write's change now;
    /// returns whether partitions were marked meanwhile (when leaving
    /// quiet, the publisher then reads them instead of waiting).
    fn set_quiet(&self, quiet: bool) -> bool {
        self.quiet.store(quiet, Ordering::SeqCst);
        !quiet && !self.dirty.is_empty()
    }

    pub fn control(&self, c: Control) {
        self.control.lock().push(c);
        self.wake.notify_one();
    }
}

/// The WAN side of one node.
pub struct Wan {
    pub settings: WanSettings,
    pub local: LocalSite,
    pub ks: Arc<Keyspace>,
    pub cluster: Option<Arc<cluster::Cluster>>,
    pub targets: Vec<Arc<Target>>,
    /// Per source site: what this node's receiver has seen and applied.
    pub received: Mutex<HashMap<u16, Arc<ReceiverStats>>>,
    /// What this node's receiver applied, per publisher and partition.
    pub watermarks: Mutex<watermarks::Watermarks>,
    /// How far each remote site is known to have passed each partition
    /// (see [`settled`]).
    pub settled: settled::Settled,
    /// This node's publishers' incarnation (see [`wire::Hello`]): new at
    /// each start, unless the node's copies came back whole from its disk
    /// ([`LocalSite::restored`]).
    pub incarnation: u64,
    /// Local persistence: changes applied here from remote sites are
    /// acknowledged once on disk when it says so (`fsync = "always"`).
    pub store: std::sync::OnceLock<Arc<persist::Store>>,
}

impl LogListener for Wan {
    fn appended(&self, partition: usize, change: &Change) {
        // Changes from other sites (and evictions) are not shipped, but the
        // publisher reads past them so the log can let them go.
        let local = change.ships_from(self.local.site_id);
        for t in &self.targets {
            if t.state() != PublisherState::Stopped {
                if local {
                    t.stats.events_queued.fetch_add(1, Ordering::Relaxed);
                }
                t.mark(partition, local);
            }
        }
    }
}

impl cluster::replication::WanWatermarks for Wan {
    fn applied(&self, target: &str, partition: usize, seq: u64) {
        if let Some(a) = self
            .target(target)
            .and_then(|t| t.shared_applied.get(partition))
        {
            a.fetch_max(seq, Ordering::Relaxed);
            // What every target applied is of no use to a promoted copy:
            // this copy's log keeps only what some target may still need.
            let all = self
                .targets
                .iter()
                .map(|t| t.shared_applied[partition].load(Ordering::Relaxed))
                .min();
            if let Some(all) = all.filter(|&seq| seq > 0) {
                self.ks.release_log_before(partition, all + 1);
            }
        }
    }
}

/// The publishers' incarnation: kept in `<dir>/publisher.incarnation` with
/// persistence, and used again only when the node's copies came back whole.
fn publisher_incarnation(dir: &std::path::Path, restored: Option<bool>) -> u64 {
    let path = dir.join("publisher.incarnation");
    if restored == Some(true) {
        let kept = std::fs::read_to_string(&path)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .filter(|&i| i != 0);
        if let Some(i) = kept {
            return i;
        }
    }
    let fresh = cluster::auth::random_u64();
    if restored.is_some() {
        let written =
            std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, fresh.to_string()));
        if let Err(e) = written {
            tracing::warn!(file = %path.display(), "cannot keep the publishers' incarnation: {e}");
        }
    }
    fresh
}

impl Wan {
    pub fn new(
        settings: WanSettings,
        local: LocalSite,
        ks: Arc<Keyspace>,
        cluster: Option<Arc<cluster::Cluster>>,
    ) -> Arc<Wan> {
        let targets = settings
            .targets
            .iter()
            .map(|t| Arc::new(Target::new(t.clone(), ks.partitions())))
            .collect();
        let (dir, local_restored) = (settings.dir.clone(), local.restored);
        let wan = Arc::new(Wan {
            settings,
            local,
            ks: ks.clone(),
            cluster,
            targets,
            received: Mutex::new(HashMap::new()),
            watermarks: Mutex::new(watermarks::Watermarks::default()),
            settled: settled::Settled::default(),
            incarnation: publisher_incarnation(&dir, local_restored),
            store: std::sync::OnceLock::new(),
        });
        ks.set_listener(wan.clone());
        if let Some(c) = &wan.cluster {
            c.replicator.set_wan_watermarks(wan.clone());
        }
        wan
    }

    /// Starts the receiver (when `listen` is set) and one publisher per
    /// target. Fails only when the WAN port cannot be bound.
    pub async fn start(self: &Arc<Self>) -> std::io::Result<()> {
        if let Some(addr) = self.settings.listen {
            let listener = tokio::net::TcpListener::bind(addr).await?;
            tokio::spawn(receiver::serve(self.clone(), listener));
        }
        tokio::spawn(settled::watch(self.clone()));
        for t in &self.targets {
            let journal_dir = self.settings.dir.join(&t.settings.name);
            tokio::spawn(publisher::run(self.clone(), t.clone(), journal_dir));
        }
        Ok(())
    }

    pub fn target(&self, name: &str) -> Option<&Arc<Target>> {
        self.targets.iter().find(|t| t.settings.name == name)
    }

    /// True when this node orders partition `p`'s writes.
    pub fn is_primary(&self, p: usize) -> bool {
        match &self.cluster {
            Some(c) => c.owns(p),
            None => true,
        }
    }

    /// Tells partition `p`'s log what the targets together still need.
    fn retain(&self, p: usize) {
        self.ks.set_log_needed_from(p, self.needed(p));
    }

    /// [`Wan::retain`] when what a target needs only moved forward (an
    /// acknowledgement): the log trims when its partition is next locked.
    fn retain_forward(&self, p: usize) {
        self.ks.advance_log_needed_from(p, || self.needed(p));
    }

    /// The lowest seq of partition `p` some target still needs.
    fn needed(&self, p: usize) -> Option<u64> {
        let low = self
            .targets
            .iter()
            .map(|t| t.needed[p].load(Ordering::SeqCst))
            .min()
            .unwrap_or(u64::MAX);
        (low != u64::MAX).then_some(low)
    }

    fn receiver_stats(&self, site: u16) -> Arc<ReceiverStats> {
        self.received.lock().entry(site).or_default().clone()
    }
}

/// Per remote site, what this node's publisher is doing.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TargetStatus {
    pub name: String,
    pub state: &'static str,
    pub delta: bool,
    pub ack: &'static str,
    #[serde(flatten)]
    pub snapshot: publisher::Snapshot,
    pub bytes_sent: u64,
    pub events_queued: u64,
    pub events_distributed: u64,
    pub batches: u64,
    pub batch_rtt_avg_us: u64,
    pub deltas_shipped: u64,
    pub fulls_shipped: u64,
    pub full_fallbacks: u64,
    pub resyncs: u64,
    pub partition_copies: u64,
    pub spilled_events: u64,
    pub spilled_bytes: u64,
}

/// Per remote site, what this node's receiver got from it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SourceStatus {
    pub site_id: u16,
    pub site_name: String,
    pub bytes_received: u64,
    pub batches: u64,
    pub events_received: u64,
    pub applied: u64,
    pub duplicates: u64,
    pub conflicts_lost: u64,
    pub need_full: u64,
    pub refused: u64,
}

/// Per remote site, how far it has passed this site's partitions (see
/// [`settled`]): the lowest and highest hlc over the partitions.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SettledStatus {
    pub site_name: String,
    pub lowest_hlc: u64,
    pub highest_hlc: u64,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct WanStatus {
    pub site_id: u16,
    pub site_name: String,
    pub targets: Vec<TargetStatus>,
    pub sources: Vec<SourceStatus>,
    pub settled: Vec<SettledStatus>,
    /// Tombstones this node holds, and how many went over
    /// `tombstone_bytes` before every remote site had passed them.
    pub tombstones: usize,
    pub tombstones_evicted_unsettled: u64,
}

impl Wan {
    pub fn status(&self) -> WanStatus {
        use stats::get;
        let targets = self
            .targets
            .iter()
            .map(|t| {
                let s = &t.stats;
                TargetStatus {
                    name: t.settings.name.clone(),
                    state: t.state().name(),
                    delta: t.settings.delta,
                    ack: match t.settings.ack {
                        AckMode::Pipelined => "pipelined",
                        AckMode::OnApply => "on-apply",
                    },
                    snapshot: t.status.lock().clone(),
                    bytes_sent: get(&s.bytes_sent),
                    events_queued: get(&s.events_queued),
                    events_distributed: get(&s.events_distributed),
                    batches: get(&s.batches),
                    batch_rtt_avg_us: s.rtt_avg_us(),
                    deltas_shipped: get(&s.deltas_shipped),
                    fulls_shipped: get(&s.fulls_shipped),
                    full_fallbacks: get(&s.full_fallbacks),
                    resyncs: get(&s.resyncs),
                    partition_copies: get(&s.partition_copies),
                    spilled_events: get(&s.spilled_events),
                    spilled_bytes: get(&s.spilled_bytes),
                }
            })
            .collect();
        let mut sources: Vec<SourceStatus> = self
            .received
            .lock()
            .iter()
            .map(|(id, s)| SourceStatus {
                site_id: *id,
                site_name: s.name.lock().clone(),
                bytes_received: get(&s.bytes_received),
                batches: get(&s.batches),
                events_received: get(&s.events_received),
                applied: get(&s.applied),
                duplicates: get(&s.duplicates),
                conflicts_lost: get(&s.conflicts_lost),
                need_full: get(&s.need_full),
                refused: get(&s.refused),
            })
            .collect();
        sources.sort_by_key(|s| s.site_id);
        let settled = self
            .settled
            .summary()
            .into_iter()
            .map(|(site_name, lowest_hlc, highest_hlc)| SettledStatus {
                site_name,
                lowest_hlc,
                highest_hlc,
            })
            .collect();
        let (tombstones, tombstones_evicted_unsettled) = self.ks.tombstone_counts();
        WanStatus {
            site_id: self.local.site_id,
            site_name: self.local.site_name.clone(),
            targets,
            sources,
            settled,
            tombstones,
            tombstones_evicted_unsettled,
        }
    }
}
