//! The site's metadata in a Raft group (openraft) among its members: who the
//! members are and who owns each partition, with epochs (docs/architecture.md,
//! "Site"). Data never goes through Raft; only the decisions about it do.
//!
//! [`Metadata`] is the handle a node holds. Writes are [`Command`]s
//! proposed from any member ([`Metadata::propose`] forwards to the leader);
//! each is applied by every member in log order through
//! [`SiteMetadata::apply`], and refused (changing nothing) when it breaks a
//! rule or its compare-and-set epoch is stale. Reads are local: the latest
//! applied [`SiteMetadata`] as an `Arc`, or a `watch` channel that wakes on
//! every change. A member's view can lag the leader's by the entries it has
//! not applied yet; anything that acts on an assignment carries the epoch
//! it saw, which is what fences a stale actor.
//!
//! Parts: [`state`] (the data and its rules), [`rebalance`] (computing
//! tables), [`waiting`] (partitions whose every copy went down, and which
//! copy takes them when members come back from their disks), `state_machine` (openraft's state machine, snapshots, the
//! watch), `log_store` (the redb log under the data directory), `rpc` (the
//! wire protocol) and `network` (connections between members).

mod log_store;
mod network;
pub mod rebalance;
pub mod rpc;
pub mod site_acl;
pub mod state;
mod state_machine;
#[cfg(test)]
mod tests;
pub mod waiting;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{ClientWriteError, InitializeError, RaftError};
use openraft::{ChangeMembers, Config, SnapshotPolicy};
use redb::Database;
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::time::Instant;

pub use log_store::StoreError;
pub use state::{
    Assignment, Command, InSyncEntry, Member, MemberState, NodeId, Outcome, Refused, SiteMetadata,
    Table,
};
pub use waiting::{DiskCopy, Report, Waiting};

use network::{CallError, Identity, Network, Peers};
use rpc::{ForwardError, LeaderOp, Request, Response};

/// How a member reaches another's metadata listener.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Peer {
    pub addr: String,
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.addr)
    }
}

openraft::declare_raft_types!(
    pub TypeConfig:
        D = Command,
        R = Outcome,
        NodeId = NodeId,
        Node = Peer,
        SnapshotData = std::io::Cursor<Vec<u8>>,
);

pub type Entry = openraft::Entry<TypeConfig>;
type Raft = openraft::Raft<TypeConfig>;

/// Pause between attempts while no leader answers.
const RETRY_PAUSE: Duration = Duration::from_millis(50);
/// The leader's heartbeat: how long a follower may take to learn that an
/// entry it holds was committed.
pub const HEARTBEAT_MILLIS: u64 = 150;
/// Longest wait for the group's tasks to let go of the store at shutdown.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Clone, Debug)]
pub struct MetadataConfig {
    pub node_id: NodeId,
    pub site_id: u16,
    /// The store (`metadata.redb`) goes here: the node's data directory.
    pub dir: PathBuf,
    pub heartbeat: Duration,
    /// A follower that hears no leader for between this and twice this
    /// starts an election.
    pub election_timeout: Duration,
    /// Entries between snapshots (after which the log before is dropped).
    pub snapshot_every: u64,
    /// Entries kept behind a snapshot, so that a member slightly behind
    /// catches up from the log rather than a whole snapshot.
    pub keep_behind_snapshot: u64,
    /// How long [`Metadata::propose`] keeps trying.
    pub propose_timeout: Duration,
    /// `site.secret`: connections this node opens prove it
    /// ([`crate::auth::initiate`]), as do those its own listener accepts.
    pub secret: Option<Arc<[u8]>>,
    /// `[site] tls`: every metadata connection is mutual TLS.
    pub tls: Option<crate::auth::SiteTls>,
}

impl MetadataConfig {
    pub fn new(node_id: NodeId, site_id: u16, dir: impl Into<PathBuf>) -> Self {
        MetadataConfig {
            node_id,
            site_id,
            dir: dir.into(),
            heartbeat: Duration::from_millis(HEARTBEAT_MILLIS),
            election_timeout: Duration::from_millis(750),
            snapshot_every: 5000,
            keep_behind_snapshot: 1000,
            propose_timeout: Duration::from_secs(5),
            secret: None,
            tls: None,
        }
    }

    fn raft_config(&self) -> Result<Config, MetadataError> {
        let millis = |d: Duration| d.as_millis().max(1) as u64;
        let config = Config {
            cluster_name: format!("deltagrid-site-{}", self.site_id),
            heartbeat_interval: millis(self.heartbeat),
            election_timeout_min: millis(self.election_timeout),
            election_timeout_max: millis(self.election_timeout) * 2,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(self.snapshot_every),
            max_in_snapshot_log_to_keep: self.keep_behind_snapshot,
            // Whole-table entries can be large: keep each append under the
            // frame limit (rpc::MAX_FRAME).
            max_payload_entries: 32,
            snapshot_max_chunk_size: 1 << 20,
            ..Default::default()
        };
        config
            .validate()
            .map_err(|e| MetadataError::Config(e.to_string()))
    }
}

/// One of the members a site is formed from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seed {
    pub id: NodeId,
    /// Its metadata listener.
    pub raft_addr: String,
    pub name: String,
    pub cluster_addr: SocketAddr,
    pub client_addr: String,
    pub tls_client_addr: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("bad metadata settings: {0}")]
    Config(String),
    #[error("refused: {0}")]
    Refused(#[from] Refused),
    #[error("no metadata leader reachable within {0:?}")]
    NoLeader(Duration),
    #[error("not committed within {0:?}: the command may still take effect")]
    Timeout(Duration),
    #[error("metadata group: {0}")]
    Raft(String),
}

/// This node's member of the metadata group.
pub struct Metadata {
    id: NodeId,
    me: Identity,
    raft: Raft,
    peers: Arc<Peers>,
    state: watch::Receiver<Arc<SiteMetadata>>,
    shutdown: watch::Sender<bool>,
    db: Option<Arc<Database>>,
    propose_timeout: Duration,
}

impl Metadata {
    /// Opens the store under `config.dir` (recovering whatever it holds),
    /// starts Raft and serves peers on `listener`, or, with None, on the
    /// connections handed to [`Metadata::accept`].
    pub async fn start(
        config: MetadataConfig,
        listener: Option<TcpListener>,
    ) -> Result<Metadata, MetadataError> {
        let raft_config = Arc::new(config.raft_config()?);
        let db = log_store::open(&config.dir)?;
        let (sm, state) = state_machine::StateMachine::load(db.clone())?;
        let me = Identity {
            site_id: config.site_id,
            node_id: config.node_id,
        };
        let (shutdown, shutdown_rx) = watch::channel(false);
        let peers = Peers::new(
            me,
            shutdown_rx.clone(),
            config.secret.clone(),
            config.tls.clone(),
        );
        let network = Network {
            peers: peers.clone(),
        };
        let log = log_store::LogStore::new(db.clone());
        let raft = Raft::new(config.node_id, raft_config, network, log, sm)
            .await
            .map_err(|e| MetadataError::Raft(e.to_string()))?;
        if let Some(listener) = listener {
            tokio::spawn(network::serve(
                listener,
                raft.clone(),
                me,
                shutdown_rx,
                config.secret.clone(),
                config.tls.clone(),
            ));
        }
        Ok(Metadata {
            id: config.node_id,
            me,
            raft,
            peers,
            state,
            shutdown,
            db: Some(db),
            propose_timeout: config.propose_timeout,
        })
    }

    pub fn id(&self) -> NodeId {
        self.id
    }

    /// Fault injection: cut (or restore) this member's metadata traffic in
    /// both directions, as a network partition would.
    pub fn set_isolated(&self, isolated: bool) {
        self.peers
            .blocked
            .store(isolated, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn is_isolated(&self) -> bool {
        self.peers
            .blocked
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Serves a metadata connection accepted elsewhere (a listener shared
    /// with the data protocol); `buf` holds the bytes already read from it.
    pub fn accept(
        &self,
        stream: framing::tls::PeerStream,
        peer: std::net::SocketAddr,
        buf: bytes::BytesMut,
    ) {
        if self.is_isolated() {
            return;
        }
        let shutdown = self.shutdown.subscribe();
        let blocked = self.peers.blocked.clone();
        tokio::spawn(network::serve_connection(
            stream,
            peer,
            buf,
            self.raft.clone(),
            self.me,
            shutdown,
            blocked,
        ));
    }

    /// Forms the site from `seeds` (the same list, in the same order, on
    /// every seed): the Raft group, then the members and the first table,
    /// [`rebalance::initial`] over the seeds' order. Every seed may call
    /// it, and calling it again (after a restart) changes nothing. Returns
    /// once this member's metadata shows the site formed.
    pub async fn form(
        &self,
        seeds: &[Seed],
        partitions: u16,
        replicas: usize,
    ) -> Result<(), MetadataError> {
        let nodes: BTreeMap<NodeId, Peer> = seeds
            .iter()
            .map(|s| {
                (
                    s.id,
                    Peer {
                        addr: s.raft_addr.clone(),
                    },
                )
            })
            .collect();
        match self.raft.initialize(nodes).await {
            Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {}
            Err(e) => return Err(MetadataError::Raft(e.to_string())),
        }
        if !self.current().is_formed() {
            let members = seeds
                .iter()
                .map(|s| {
                    let m = Member {
                        name: s.name.clone(),
                        cluster_addr: s.cluster_addr,
                        client_addr: s.client_addr.clone(),
                        tls_client_addr: s.tls_client_addr.clone(),
                        state: MemberState::Active,
                    };
                    (s.id, m)
                })
                .collect();
            let order: Vec<NodeId> = seeds.iter().map(|s| s.id).collect();
            let partitions = rebalance::initial(partitions, &order, replicas);
            let form = Command::Form {
                members,
                partitions,
                data_incarnation: crate::auth::random_u64(),
            };
            match self.propose(form).await {
                Ok(_) | Err(MetadataError::Refused(Refused::AlreadyFormed)) => {}
                Err(e) => return Err(e),
            }
        }
        self.wait_for(self.propose_timeout, SiteMetadata::is_formed)
            .await
            .map(|_| ())
            .ok_or(MetadataError::Timeout(self.propose_timeout))
    }

    /// Commits `cmd` through the leader, wherever it is, and returns the
    /// epoch it left (see [`Outcome`]); a refusal is
    /// [`MetadataError::Refused`]. Retries while there is no leader, up to
    /// the configured timeout. A command whose answer was lost may have
    /// been applied: compare-and-set commands are safe to retry (a repeat
    /// is refused as stale), others are idempotent.
    pub async fn propose(&self, cmd: Command) -> Result<u64, MetadataError> {
        self.on_leader(LeaderOp::Propose(cmd), self.propose_timeout)
            .await
    }

    /// Adds the node `id`, already started ([`Metadata::start`], without
    /// [`Metadata::form`]) and listening at `raft_addr`, to the group: it
    /// replicates the log as a learner, then becomes a voter once it has
    /// caught up. Waits up to `timeout` for both. Making it a member of the
    /// site ([`Command::AddMember`]) and giving it partitions are separate
    /// steps. Adding a node that is already a voter changes nothing.
    pub async fn add_voter(
        &self,
        id: NodeId,
        raft_addr: &str,
        timeout: Duration,
    ) -> Result<(), MetadataError> {
        self.on_leader(
            LeaderOp::AddVoter {
                id,
                addr: raft_addr.to_string(),
            },
            timeout,
        )
        .await
        .map(|_| ())
    }

    /// Takes `id` out of the group's voters (and its log replication): for
    /// a node that left the site, after its partitions moved away.
    pub async fn remove_voter(&self, id: NodeId) -> Result<(), MetadataError> {
        self.on_leader(LeaderOp::RemoveVoter { id }, self.propose_timeout)
            .await
            .map(|_| ())
    }

    /// Carries `op` out on the leader, here or forwarded, retrying while
    /// the group has no leader, for up to `timeout`.
    async fn on_leader(&self, op: LeaderOp, timeout: Duration) -> Result<u64, MetadataError> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let (leader, node) =
                match tokio::time::timeout(left, on_this_leader(&self.raft, op.clone())).await {
                    Err(_) => return Err(MetadataError::Timeout(timeout)),
                    Ok(Ok(outcome)) => return outcome.map_err(MetadataError::Refused),
                    Ok(Err(NotDone::NotLeader(leader, node))) => (leader, node),
                    Ok(Err(NotDone::Failed(e))) => return Err(MetadataError::Raft(e)),
                };
            if let (Some(leader), Some(node)) = (leader, node) {
                let left = deadline.saturating_duration_since(Instant::now());
                match self
                    .peers
                    .call(leader, &node.addr, &Request::Leader(op.clone()), left)
                    .await
                {
                    Ok(Response::Leader(Ok(outcome))) => {
                        return outcome.map_err(MetadataError::Refused)
                    }
                    Ok(Response::Leader(Err(ForwardError::Failed(e)))) => {
                        return Err(MetadataError::Raft(e))
                    }
                    Err(CallError::Timeout(_)) => return Err(MetadataError::Timeout(timeout)),
                    // Not the leader any more, unreachable, or confused:
                    // try again once the group settles.
                    Ok(_) | Err(_) => {}
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(MetadataError::NoLeader(timeout));
            }
            tokio::time::sleep(RETRY_PAUSE.min(left)).await;
        }
    }

    /// The metadata as this member last applied it.
    pub fn current(&self) -> Arc<SiteMetadata> {
        self.state.borrow().clone()
    }

    /// A channel that holds the latest metadata and wakes on every change.
    pub fn subscribe(&self) -> watch::Receiver<Arc<SiteMetadata>> {
        self.state.clone()
    }

    /// Waits up to `timeout` for this member's metadata to satisfy `pred`.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        pred: impl Fn(&SiteMetadata) -> bool,
    ) -> Option<Arc<SiteMetadata>> {
        let mut rx = self.subscribe();
        let seen = match tokio::time::timeout(timeout, rx.wait_for(|s| pred(s))).await {
            Ok(Ok(s)) => Some(s.clone()),
            _ => None,
        };
        seen
    }

    /// The leader this member knows of.
    pub fn leader(&self) -> Option<NodeId> {
        self.raft.metrics().borrow().current_leader
    }

    /// The index of the last log entry this member applied (0: none).
    pub fn applied_index(&self) -> u64 {
        self.raft
            .metrics()
            .borrow()
            .last_applied
            .map_or(0, |l| l.index)
    }

    /// The group's voters as this member knows them.
    pub fn voters(&self) -> BTreeSet<NodeId> {
        self.raft
            .metrics()
            .borrow()
            .membership_config
            .membership()
            .voter_ids()
            .collect()
    }

    pub fn is_leader(&self) -> bool {
        self.leader() == Some(self.id)
    }

    /// Stops this member: leaves the group's connections, stops Raft and
    /// waits until the store is closed, so the directory can be opened
    /// again (a restart) as soon as this returns.
    pub async fn shutdown(mut self) {
        let _ = self.shutdown.send(true);
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!("metadata raft stopped abnormally: {e}");
        }
        let Some(db) = self.db.take() else { return };
        let deadline = Instant::now() + CLOSE_TIMEOUT;
        while Arc::strong_count(&db) > 1 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if Arc::strong_count(&db) > 1 {
            tracing::warn!("metadata store still in use {CLOSE_TIMEOUT:?} after shutdown");
        }
    }
}

/// Why this node did not carry out a [`LeaderOp`].
pub(crate) enum NotDone {
    /// Not the leader; the leader it knows of, if any.
    NotLeader(Option<NodeId>, Option<Peer>),
    Failed(String),
}

/// Carries `op` out if this node is the leader.
pub(crate) async fn on_this_leader(raft: &Raft, op: LeaderOp) -> Result<Outcome, NotDone> {
    let not_done = |e: RaftError<NodeId, ClientWriteError<NodeId, Peer>>| match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => {
            NotDone::NotLeader(f.leader_id, f.leader_node)
        }
        e => NotDone::Failed(e.to_string()),
    };
    match op {
        LeaderOp::Propose(cmd) => raft
            .client_write(cmd)
            .await
            .map(|r| r.data)
            .map_err(not_done),
        LeaderOp::AddVoter { id, addr } => {
            raft.add_learner(id, Peer { addr }, true)
                .await
                .map_err(not_done)?;
            let voters = BTreeSet::from([id]);
            let r = raft
                .change_membership(ChangeMembers::AddVoterIds(voters), false)
                .await
                .map_err(not_done)?;
            Ok(Ok(r.log_id.index))
        }
        LeaderOp::RemoveVoter { id } => {
            let voters = BTreeSet::from([id]);
            let r = raft
                .change_membership(ChangeMembers::RemoveVoters(voters), false)
                .await
                .map_err(not_done)?;
            Ok(Ok(r.log_id.index))
        }
    }
}

impl Drop for Metadata {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let raft = self.raft.clone();
            rt.spawn(async move {
                let _ = raft.shutdown().await;
            });
        }
    }
}
