//! [`Cluster`]: this node's view of its site (members, connections, the
//! partition table it installed). The routing check every keyed command
//! passes is in [`routing`], what the node reports of the site in
//! [`status`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Instant;

use parking_lot::RwLock;

use keyspace::Keyspace;

mod routing;
mod status;
mod waiting;

pub use waiting::WaitingStatus;

pub use status::{MemberStatus, SiteStatus};

use crate::metadata::Metadata;
use crate::placement::{PartitionOwners, PartitionTable, SharedTable};
use crate::replication::{Replicator, Site};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replication {
    Sync,
    Async,
}

#[derive(Clone, Debug)]
pub struct ClusterSettings {
    pub cluster_listen: SocketAddr,
    /// The site's initial members, by their cluster address; order matters
    /// (placement follows it) and must be the same on every node. A node
    /// not among them joins the site they formed ([`crate::join`]).
    pub seeds: Vec<SocketAddr>,
    pub replicas: usize,
    pub replication: Replication,
    /// Set by [`crate::join::join`] before the node starts, for a node that
    /// is not a seed: its place in the site and the members it was told of.
    pub joined: Option<crate::join::Joined>,
    /// Shared by the site's nodes: every node-to-node connection starts by
    /// both ends proving they know it ([`crate::auth`]). None: anyone who
    /// reaches `cluster_listen` may speak the protocol.
    pub secret: Option<String>,
    /// This node's TLS client port (`node.tls_listen`), told to its peers so
    /// that MOVED and CLUSTER SLOTS name it to clients over TLS.
    pub tls_client_addr: Option<SocketAddr>,
    /// `[site] tls`: mutual TLS on every node-to-node connection (data,
    /// metadata, joins), each node's certificate naming the site.
    pub tls: Option<crate::auth::SiteTls>,
}

impl Member {
    /// The address to give a client: its TLS port's to a client over TLS
    /// when it has one.
    pub fn client_addr_for(&self, tls: bool) -> &str {
        match &self.tls_client_addr {
            Some(a) if tls => a,
            _ => &self.client_addr,
        }
    }
}

/// Member slots (node ids 1..=MAX_MEMBERS are indexes 0..MAX_MEMBERS).
pub const MAX_MEMBERS: usize = crate::metadata::state::MAX_MEMBER_ID as usize;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub node_id: String,
    pub cluster_addr: SocketAddr,
    pub client_addr: String,
    /// Its TLS client port, if it has one.
    pub tls_client_addr: Option<String>,
    /// The 40-hex-digit id Redis Cluster clients expect.
    pub cluster_id: String,
    pub connected: bool,
}

pub struct Cluster {
    pub settings: ClusterSettings,
    pub site_id: u16,
    pub partitions: u16,
    pub my_index: usize,
    pub me: Member,
    /// Per member index (node id - 1): its cluster address, from the
    /// seeds, the join answer and the committed metadata.
    addrs: RwLock<Vec<Option<SocketAddr>>>,
    /// Per member index: None until that member said hello.
    members: RwLock<Vec<Option<Member>>>,
    /// Read by every command (routing) and every change (replication):
    /// an ArcSwap, so readers write no shared cache line.
    table: SharedTable,
    ks: Arc<Keyspace>,
    /// Itself, for the tasks it spawns ([`Self::arc`]).
    this: Weak<Cluster>,
    pub replicator: Arc<Replicator>,
    /// Whether a majority of the site lets this node serve its primaries
    /// now ([`crate::lease`]).
    pub lease: Arc<crate::lease::Lease>,
    /// The site's metadata (Raft); the partition table comes from it.
    pub metadata: OnceLock<Metadata>,
    /// Where the metadata log lives.
    pub data_dir: PathBuf,
    /// Per member: since when its connection has been down (None: up).
    down_since: parking_lot::Mutex<Vec<Option<Instant>>>,
    /// Partitions whose primary moved, over all tables installed here.
    primary_changes: std::sync::atomic::AtomicU64,
    /// This process restarted into a site that already lists it: its data
    /// is gone, so it serves nothing until the group has marked it dead
    /// (its copies failed over) and active again.
    pub rejoining: std::sync::atomic::AtomicBool,
    /// Fault injection (`DEBUG CLUSTER-ISOLATE 1`): every node-to-node link
    /// is cut, both data and metadata, as if the network were partitioned.
    pub isolated: std::sync::atomic::AtomicBool,
    /// Local persistence, when on: with `fsync = "always"` a replica
    /// acknowledges a batch once its changes are on its disk.
    pub store: OnceLock<Arc<persist::Store>>,
    /// This node's copies came back whole from its disk with every
    /// acknowledged write (`persist::Recovered::complete`).
    pub restored: std::sync::atomic::AtomicBool,
    /// Members that said so when their connection opened
    /// (`wire::KIND_RESTORED`), by member index.
    restored_peers: parking_lot::Mutex<std::collections::HashSet<usize>>,
    /// Fault injection (`DEBUG CLUSTER-HOLD NODE 1`): bit i set, no
    /// replication batch leaves for member i (its link stays up, pings
    /// flow): as if its batches were slow to leave, up to `MAX_PENDING`.
    held: std::sync::atomic::AtomicU64,
    /// Per partition: writes refused with TRYAGAIN while a handover runs.
    pub(crate) fenced: Box<[std::sync::atomic::AtomicBool]>,
    /// Per partition: every copy went down and it waits for one to come
    /// back from a disk (`metadata::waiting`): CLUSTERDOWN for its slots.
    waiting: Box<[std::sync::atomic::AtomicBool]>,
    /// Replicas that finished their snapshots, waiting to be proposed into
    /// their in-sync sets, and whether a proposal is under way
    /// (`in_sync`: one at a time, each taking all that wait).
    pub(crate) in_sync_waiting: parking_lot::Mutex<Vec<(usize, usize, u64)>>,
    pub(crate) in_sync_proposing: std::sync::atomic::AtomicBool,
    /// Handovers under way here: partition -> epoch.
    pub(crate) handovers: parking_lot::Mutex<std::collections::HashMap<usize, u64>>,
    pub(crate) handovers_done: std::sync::atomic::AtomicU64,
    /// Waits until every command that passed routing has finished (the
    /// server's exec gate, taken exclusively for a moment).
    quiesce: OnceLock<Box<dyn Fn() + Send + Sync>>,
    /// Set once this node left the site (it was removed from the members):
    /// the process should end.
    pub left: tokio::sync::Notify,
    left_flag: std::sync::atomic::AtomicBool,
    was_member: std::sync::atomic::AtomicBool,
    /// Set by [`Cluster::stop`]: partitions led here are handed over.
    pub(crate) stopping: std::sync::atomic::AtomicBool,
    /// Pub/sub messages for the other members.
    pub messages: crate::broadcast::Broadcast,
}

/// Derives a stable 40-hex-digit id from a node id: FNV-1a of the name,
/// then five splitmix64 steps for the digits.
pub fn cluster_id(node_id: &str) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in node_id.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    (0..5)
        .map(|_| {
            h = h.wrapping_add(0x9e3779b97f4a7c15);
            let mut z = h;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
            format!("{:08x}", (z ^ (z >> 31)) as u32)
        })
        .collect()
}

impl Cluster {
    pub fn new(
        settings: ClusterSettings,
        site_id: u16,
        partitions: u16,
        node_id: &str,
        client_addr: SocketAddr,
        ks: Arc<Keyspace>,
        data_dir: PathBuf,
    ) -> Result<Arc<Cluster>, String> {
        let my_index = match (
            &settings.joined,
            settings
                .seeds
                .iter()
                .position(|s| *s == settings.cluster_listen),
        ) {
            (Some(j), _) => j.index,
            (None, Some(i)) => i,
            (None, None) => {
                return Err(format!(
                    "node.cluster_listen {} is not one of site.seeds",
                    settings.cluster_listen
                ))
            }
        };
        if my_index >= MAX_MEMBERS || settings.seeds.len() > MAX_MEMBERS {
            return Err(format!("a site has at most {MAX_MEMBERS} nodes"));
        }
        let mut addrs = vec![None; MAX_MEMBERS];
        for (i, a) in settings.seeds.iter().enumerate() {
            addrs[i] = Some(*a);
        }
        if let Some(j) = &settings.joined {
            for (i, a) in &j.members {
                if *i < MAX_MEMBERS {
                    addrs[*i] = Some(*a);
                }
            }
        }
        addrs[my_index] = Some(settings.cluster_listen);
        let me = Member {
            node_id: node_id.to_string(),
            cluster_addr: settings.cluster_listen,
            client_addr: client_addr.to_string(),
            tls_client_addr: settings.tls_client_addr.map(|a| a.to_string()),
            cluster_id: cluster_id(node_id),
            connected: true,
        };
        let n = MAX_MEMBERS;
        let mut members = vec![None; n];
        members[my_index] = Some(me.clone());
        let table = SharedTable::default();
        let lease = Arc::new(crate::lease::Lease::new(n));
        let cluster = Arc::new_cyclic(|this: &Weak<Cluster>| Cluster {
            settings,
            site_id,
            partitions,
            my_index,
            me,
            addrs: RwLock::new(addrs),
            members: RwLock::new(members),
            table: table.clone(),
            this: this.clone(),
            replicator: Replicator::new(ks.clone(), table, lease.clone(), n, my_index),
            lease,
            ks: ks.clone(),
            metadata: OnceLock::new(),
            data_dir,
            down_since: parking_lot::Mutex::new(vec![None; n]),
            primary_changes: Default::default(),
            rejoining: Default::default(),
            isolated: Default::default(),
            store: OnceLock::new(),
            restored: Default::default(),
            restored_peers: Default::default(),
            held: Default::default(),
            fenced: (0..partitions).map(|_| Default::default()).collect(),
            waiting: (0..partitions).map(|_| Default::default()).collect(),
            in_sync_waiting: Default::default(),
            in_sync_proposing: Default::default(),
            handovers: Default::default(),
            handovers_done: Default::default(),
            quiesce: OnceLock::new(),
            left: tokio::sync::Notify::new(),
            left_flag: Default::default(),
            was_member: Default::default(),
            stopping: Default::default(),
            messages: crate::broadcast::Broadcast::new(MAX_MEMBERS),
        });
        let site: Weak<dyn Site> = cluster.this.clone();
        cluster.replicator.set_site(site);
        ks.set_sink(cluster.replicator.clone());
        for (i, _) in cluster.known_addrs() {
            cluster.expect(i);
        }
        // Until the metadata says otherwise, this node owns nothing.
        for p in 0..partitions as usize {
            ks.set_replica(p, true);
        }
        Ok(cluster)
    }

    /// This cluster, for a task to own (None once it is being dropped).
    pub(crate) fn arc(&self) -> Option<Arc<Cluster>> {
        self.this.upgrade()
    }

    pub fn members(&self) -> Vec<Option<Member>> {
        self.members.read().clone()
    }

    /// [`Self::members`], each named to clients by
    /// [`Member::client_addr_for`]`(tls)` (CLUSTER SLOTS, NODES, SHARDS).
    pub fn members_for(&self, tls: bool) -> Vec<Option<Member>> {
        let mut members = self.members();
        for m in members.iter_mut().flatten() {
            m.client_addr = m.client_addr_for(tls).to_string();
        }
        members
    }

    pub fn table(&self) -> Option<Arc<PartitionTable>> {
        self.table.load_full()
    }

    /// Records a member's hello (not yet connected: its session says so);
    /// refused, with the reason, when it is not a known member (a seed, or
    /// one the metadata lists), claims this node's place, names itself
    /// other than the metadata knows the member at that address, or
    /// claims a member that another connection speaks for: a second
    /// process cannot take over a live node's identity. (A node that
    /// restarts is let in once its old connection closed, at once after a
    /// crash, else after [`crate::transport::SILENT_AFTER`].)
    pub fn learn(&self, m: Member) -> Result<(), String> {
        let addr = m.cluster_addr;
        let Some(i) = self.peer_index(addr) else {
            return Err(format!("{addr} is not a member of this site"));
        };
        if i == self.my_index {
            return Err(format!(
                "{} claims this node's own address {addr}",
                m.node_id
            ));
        }
        let meta = self.metadata.get().map(|md| md.current());
        if let Some(known) = meta.as_ref().and_then(|md| md.members.get(&(i as u64 + 1))) {
            if known.name != m.node_id {
                return Err(format!(
                    "{:?} claims the address {addr} of member {:?}",
                    m.node_id, known.name
                ));
            }
        }
        let mut members = self.members.write();
        if let Some(live) = members[i].as_ref().filter(|old| old.connected) {
            return Err(format!(
                "member {:?} at {addr} is connected already: a second process claiming its identity is refused",
                live.node_id
            ));
        }
        members[i] = Some(Member {
            connected: false,
            ..m
        });
        Ok(())
    }

    /// Member `i` is expected to connect: until it does, it counts as down
    /// from [`crate::transport::SILENT_AFTER`] on (as if a connection had
    /// gone silent now), so one that never connects, a phantom, is
    /// declared dead like any other.
    fn expect(&self, i: usize) {
        if i == self.my_index || self.is_connected(i) {
            return;
        }
        let mut down = self.down_since.lock();
        if down[i].is_none() {
            down[i] = Some(Instant::now() + crate::transport::SILENT_AFTER);
        }
    }

    /// The members' cluster addresses by index, as far as known.
    pub fn known_addrs(&self) -> Vec<(usize, SocketAddr)> {
        self.addrs
            .read()
            .iter()
            .enumerate()
            .filter_map(|(i, a)| a.map(|a| (i, a)))
            .collect()
    }

    /// Takes the members from committed metadata: new ones become known
    /// (their hellos are accepted), removed ones are forgotten. Returns
    /// whether this node itself is no longer a member (it left).
    pub fn sync_members(&self, meta: &crate::metadata::SiteMetadata) -> bool {
        if !meta.is_formed() {
            return false;
        }
        let mut expected = Vec::new();
        {
            let mut addrs = self.addrs.write();
            let mut members = self.members.write();
            for i in 0..MAX_MEMBERS {
                match meta.members.get(&(i as u64 + 1)) {
                    Some(m) => {
                        if addrs[i] != Some(m.cluster_addr) && i != self.my_index {
                            members[i] = None;
                            expected.push(i);
                        }
                        addrs[i] = Some(m.cluster_addr);
                    }
                    None if i != self.my_index => {
                        addrs[i] = None;
                        members[i] = None;
                        self.down_since.lock()[i] = None;
                    }
                    None => {}
                }
            }
        }
        expected.into_iter().for_each(|i| self.expect(i));
        let me = self.my_index as u64 + 1;
        // Removed, or leaving and holding nothing any more (the removal may
        // be committed after this node is out of the group and never seen).
        let drained = meta
            .members
            .get(&me)
            .is_some_and(|m| m.state == crate::metadata::MemberState::Leaving)
            && meta
                .table
                .as_ref()
                .is_some_and(|t| !t.partitions.iter().any(|a| a.holds(me)));
        // A joining node replays the log from before it joined: only a
        // node that was a member can leave.
        if meta.members.contains_key(&me) {
            self.was_member
                .store(true, std::sync::atomic::Ordering::Release);
        }
        let was_member = self.was_member.load(std::sync::atomic::Ordering::Acquire);
        let gone = was_member && (!meta.members.contains_key(&me) || drained);
        if gone
            && !self
                .left_flag
                .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            tracing::warn!("this node is no longer a member of its site: it left");
            self.left.notify_waiters();
            self.left.notify_one();
        }
        gone
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.load(std::sync::atomic::Ordering::Acquire)
    }

    pub fn has_left(&self) -> bool {
        self.left_flag.load(std::sync::atomic::Ordering::Acquire)
    }

    /// How the server lets a handover wait for commands already routed.
    pub fn set_quiesce(&self, f: Box<dyn Fn() + Send + Sync>) {
        let _ = self.quiesce.set(f);
    }

    pub(crate) fn quiesce(&self) {
        if let Some(f) = self.quiesce.get() {
            f();
        }
    }

    pub(crate) fn keyspace(&self) -> &Arc<Keyspace> {
        &self.ks
    }

    pub fn set_connected(&self, cluster_addr: SocketAddr, connected: bool) {
        let Some(i) = self.peer_index(cluster_addr) else {
            return;
        };
        self.set_connected_at(i, connected);
    }

    /// Whether member `i` (this node too) restarted with its copies whole
    /// from its disk, every acknowledged write included: a partition whose
    /// only copy it holds kept what remote sites delivered to it.
    pub fn restored_from_disk(&self, i: usize) -> bool {
        if i == self.my_index {
            return self.restored.load(std::sync::atomic::Ordering::Acquire);
        }
        self.restored_peers.lock().contains(&i)
    }

    /// What member `i` said of its copies when its connection opened.
    pub(crate) fn set_peer_restored(&self, i: usize, restored: bool) {
        let mut peers = self.restored_peers.lock();
        if restored {
            peers.insert(i);
        } else {
            peers.remove(&i);
        }
    }

    pub fn set_connected_at(&self, i: usize, connected: bool) {
        if let Some(m) = self.members.write()[i].as_mut() {
            m.connected = connected;
        }
        let mut down = self.down_since.lock();
        down[i] = match (connected, down[i]) {
            (true, _) => None,
            (false, Some(since)) => Some(since),
            (false, None) => Some(Instant::now()),
        };
    }

    pub fn set_isolated(&self, on: bool) {
        self.isolated
            .store(on, std::sync::atomic::Ordering::Release);
        if let Some(md) = self.metadata.get() {
            md.set_isolated(on);
        }
        tracing::warn!(
            isolated = on,
            "fault injection: node-to-node links {}",
            if on { "cut" } else { "restored" }
        );
    }

    /// Holds back (or lets go again) the replication batches for the
    /// member named `node_id`; false if no member has that name.
    pub fn set_held(&self, node_id: &str, on: bool) -> bool {
        let Some(i) = self
            .members()
            .iter()
            .position(|m| m.as_ref().is_some_and(|m| m.node_id == node_id))
        else {
            return false;
        };
        let bit = 1u64 << i;
        if on {
            self.held.fetch_or(bit, std::sync::atomic::Ordering::AcqRel);
        } else {
            self.held
                .fetch_and(!bit, std::sync::atomic::Ordering::AcqRel);
            self.replicator.wake(i);
        }
        tracing::warn!(
            node = node_id,
            held = on,
            "fault injection: replication batches to a member {}",
            if on { "held back" } else { "let go" }
        );
        true
    }

    pub fn is_held(&self, member: usize) -> bool {
        self.held.load(std::sync::atomic::Ordering::Acquire) & (1u64 << member) != 0
    }

    /// `site.secret`, as the handshake wants it.
    pub fn secret(&self) -> Option<&[u8]> {
        self.settings.secret.as_deref().map(str::as_bytes)
    }

    pub fn is_isolated(&self) -> bool {
        self.isolated.load(std::sync::atomic::Ordering::Acquire)
    }

    pub fn is_connected(&self, i: usize) -> bool {
        self.members
            .read()
            .get(i)
            .and_then(|m| m.as_ref())
            .is_some_and(|m| m.connected)
    }

    /// How long member `i`'s connection has been down (None: it is up).
    pub fn down_for(&self, i: usize) -> Option<std::time::Duration> {
        self.down_since.lock()[i].map(|t| t.elapsed())
    }

    /// Every seed has said hello: the site can be formed.
    pub fn all_known(&self) -> bool {
        self.members.read()[..self.settings.seeds.len()]
            .iter()
            .all(Option::is_some)
    }

    /// Installs a partition table committed by the metadata group: this
    /// node's primaries accept writes, its replicas take changes only from
    /// their primary, and writers waiting for acks re-check.
    pub fn install_table(&self, table: PartitionTable) {
        let old = self.table.load_full();
        if let Some(old) = &old {
            let moved = old
                .partitions
                .iter()
                .zip(&table.partitions)
                .filter(|(a, b)| a.primary != b.primary)
                .count();
            self.primary_changes
                .fetch_add(moved as u64, std::sync::atomic::Ordering::Relaxed);
        }
        // Under the old table no partition was primary here while rejoining.
        let was_rejoining = self.rejoining.load(std::sync::atomic::Ordering::Acquire);
        // Partitions whose only copy was here cannot fail over: their data
        // is gone with the old process, and they restart empty here.
        let only_copy = |o: &PartitionOwners| o.primary == self.my_index && o.replicas.is_empty();
        let holds =
            |o: &PartitionOwners| o.primary == self.my_index || o.replicas.contains(&self.my_index);
        if was_rejoining && !table.partitions.iter().any(|o| holds(o) && !only_copy(o)) {
            self.rejoining
                .store(false, std::sync::atomic::Ordering::Release);
            let lost = table.partitions.iter().filter(|o| only_copy(o)).count();
            if lost > 0 && self.store.get().is_some() {
                tracing::warn!(
                    partitions = lost,
                    "rejoined: partitions that had no other copy keep what was loaded from disk"
                );
            } else if lost > 0 {
                tracing::warn!(
                    partitions = lost,
                    "rejoined: partitions that had no other copy restart empty"
                );
            }
            tracing::info!("rejoined: this node holds no copies any more and takes new work");
        }
        let rejoining = self.rejoining.load(std::sync::atomic::Ordering::Acquire);
        let mut turned = Vec::new();
        for (p, owners) in table.partitions.iter().enumerate() {
            let was_primary = old
                .as_ref()
                .is_some_and(|t| t.owners(p).primary == self.my_index)
                && !was_rejoining;
            let primary = owners.primary == self.my_index && !rejoining;
            if primary != was_primary || old.is_none() {
                turned.push((p, !primary));
            }
            if !primary {
                self.fenced[p].store(false, std::sync::atomic::Ordering::Release);
            }
        }
        self.ks.set_replicas(&turned);
        // Copies this node stopped holding (neither primary nor replica any
        // more): no marker will release what it received of them.
        if let Some(old) = &old {
            let backs = |o: &PartitionOwners| o.replicas.contains(&self.my_index);
            let dropped: Vec<usize> = (0..table.partitions.len().min(old.partitions.len()))
                .filter(|&p| {
                    backs(old.owners(p))
                        && !backs(table.owners(p))
                        && table.owners(p).primary != self.my_index
                })
                .collect();
            self.ks.forget_received(&dropped);
        }
        tracing::info!(epoch = table.epoch, "partition table installed");
        let table = Arc::new(table);
        self.table.store(Some(table.clone()));
        self.replicator.table_changed();
        // A replica that is not in sync gets a snapshot from its primary;
        // a planned handover starts here.
        for (p, owners) in table.partitions.iter().enumerate() {
            if owners.primary != self.my_index || rejoining {
                continue;
            }
            match owners.moving_to {
                _ if self.is_stopping() => crate::handover::hand_off(self, p),
                Some(to) => crate::handover::start(
                    self,
                    p,
                    to,
                    owners.epoch,
                    crate::handover::Reason::Planned,
                ),
                None => crate::handover::settle(self, p),
            }
            for &b in owners
                .replicas
                .iter()
                .filter(|b| !owners.in_sync.contains(b))
            {
                self.replicator.send_snapshot(p, b, owners.epoch);
            }
        }
    }

    /// Converts the metadata's table (node ids are seed positions + 1).
    pub fn table_from_metadata(t: &crate::metadata::Table) -> PartitionTable {
        let idx = |id: &u64| (*id as usize).saturating_sub(1);
        PartitionTable::new(
            t.epoch,
            t.partitions
                .iter()
                .map(|a| PartitionOwners {
                    primary: idx(&a.primary),
                    replicas: a.replicas.iter().map(idx).collect(),
                    in_sync: a.in_sync.iter().map(idx).collect(),
                    epoch: a.epoch,
                    moving_to: a.moving_to.as_ref().map(idx),
                })
                .collect(),
        )
    }

    pub fn peer_index(&self, cluster_addr: SocketAddr) -> Option<usize> {
        self.addrs
            .read()
            .iter()
            .position(|s| *s == Some(cluster_addr))
    }

    pub fn sync_replication(&self) -> bool {
        self.settings.replication == Replication::Sync && self.settings.replicas > 0
    }

    pub fn is_up(&self) -> bool {
        self.table.load().is_some()
    }

    /// Starts loading what routing and replicating a write to partition
    /// `p` read (its owners entry, its fence, its replicas' acknowledged
    /// seqs) into cache, for a command that runs soon; see
    /// `Keyspace::prefetch`, which says when it is worth it.
    pub fn prefetch(&self, p: usize) {
        if let Some(owners) = self.table.load().as_ref().and_then(|t| t.partitions.get(p)) {
            keyspace::prefetch_line(owners);
        }
        if let Some(f) = self.fenced.get(p) {
            keyspace::prefetch_line(f);
        }
        self.replicator.prefetch(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::{PartitionOwners, PartitionTable};
    use crate::replication::tests::{keyspace, keyspace_of, primary_with_replica};
    use bytes::Bytes;
    use keyspace::{Change, ChangeKind, Value, Version};

    /// Every partition led by member 0 with `replica` as its replica.
    fn table(epoch: u64, replica: usize) -> PartitionTable {
        let owners = |_| PartitionOwners {
            primary: 0,
            replicas: [replica].into_iter().collect(),
            in_sync: [replica].into_iter().collect(),
            epoch,
            moving_to: None,
        };
        PartitionTable::new(epoch, (0..4).map(owners).collect())
    }

    /// What a replica received of a copy that a new table moves to another
    /// node goes with the copy (no marker would ever release it).
    #[test]
    fn a_copy_moved_elsewhere_takes_its_received_batches_along() {
        let seeds: Vec<SocketAddr> = (1..=3)
            .map(|i| SocketAddr::from(([127, 0, 0, 1], i)))
            .collect();
        let settings = ClusterSettings {
            tls_client_addr: None,
            cluster_listen: seeds[1],
            seeds: seeds.clone(),
            replicas: 1,
            replication: Replication::Sync,
            joined: None,
            secret: None,
            tls: None,
        };
        let ks = keyspace();
        let replica = Cluster::new(
            settings,
            1,
            4,
            "n2",
            seeds[1],
            ks.clone(),
            std::env::temp_dir(),
        )
        .unwrap();
        replica.install_table(table(1, 1));
        let primary = primary_with_replica();
        let primary_ks = keyspace_of(&primary);
        for i in 0..20u64 {
            let key = Bytes::from(format!("k{i}"));
            let p = primary_ks.partition_of(&key);
            let kind = ChangeKind::Full {
                value: Value::str(Bytes::from(vec![b'v'; 200])),
                expire_at: 0,
            };
            primary_ks
                .apply_batch(
                    p,
                    vec![Change {
                        key,
                        version: Version {
                            hlc: (i + 1) << 16,
                            site: 1,
                        },
                        kind,
                    }],
                    0,
                )
                .unwrap();
        }
        while let Some((batch, _)) = primary.take_batch(1) {
            replica.replicator.apply_batch(batch, 0).unwrap();
        }
        assert!(
            ks.log_bytes() > 20 * 200,
            "the replica holds what it received"
        );
        replica.install_table(table(2, 2));
        assert_eq!(
            ks.log_bytes(),
            0,
            "nothing held of copies this node no longer has"
        );
    }

    #[test]
    fn cluster_ids_are_stable_40_hex_digits() {
        let id = cluster_id("n1");
        assert_eq!(id.len(), 40);
        assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(id, cluster_id("n1"));
        assert_ne!(id, cluster_id("n2"));
    }
}
