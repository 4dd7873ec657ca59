//! A node: the keyspace plus everything a running server shares between
//! connections (settings, clients, tracking, pub/sub, metrics), and the
//! tasks that serve it: the RESP listener, the admin HTTP listener and the
//! active expiry cycle.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keyspace::{DebugClock, Keyspace, KeyspaceConfig};
use tokio::net::TcpListener;

use crate::clients::Clients;
use crate::metrics::{Metrics, Snapshot};
use crate::pubsub::PubSub;
use crate::settings::{NodeSettings, Runtime, DEFAULT_LOG_RETAIN_BYTES};
use crate::tracking::Tracking;
use crate::{admin, connection, memory};
use cluster::broadcast::MessageKind;

pub struct Node {
    pub settings: NodeSettings,
    pub runtime: Runtime,
    pub ks: Arc<Keyspace>,
    pub clock: Arc<DebugClock>,
    pub clients: Arc<Clients>,
    pub tracking: Arc<Tracking>,
    /// Clients blocked in BZPOPMIN and the like, by the keys they wait for.
    pub blocking: Arc<crate::blocking::Blocking>,
    pub pubsub: PubSub,
    /// `notify-keyspace-events`.
    pub events: crate::notify::KeyspaceEvents,
    /// MONITOR connections.
    pub monitors: crate::monitor::Monitors,
    /// SHUTDOWN was asked: the process stops as on SIGTERM.
    pub shutdown: tokio::sync::Notify,
    pub metrics: Metrics,
    pub started: Instant,
    pub run_id: String,
    /// Commands run under a shared hold; EXEC takes it exclusively, so a
    /// transaction's commands run with no other client's in between.
    pub exec_gate: crate::exec_gate::ExecGate,
    /// The Lua engine and its script cache (EVAL, SCRIPT).
    pub scripts: crate::scripts::Scripts,
    /// The site, when this node is one of several; None when standalone.
    pub cluster: Option<Arc<cluster::Cluster>>,
    /// Replication to and from other sites, when configured.
    pub wan: Option<Arc<wan::Wan>>,
    /// This node's part of backups to storage and restores.
    pub backups: Arc<backup::Jobs>,
    /// Local persistence (`node.persistence = "log"`), with what the start
    /// loaded.
    pub store: Option<(Arc<persist::Store>, persist::Recovered)>,
    /// The TLS client port's configuration, when there is one.
    pub tls: Option<Arc<crate::tls::Tls>>,
    /// ACL users, the ACL LOG and the ACL file.
    pub users: crate::users::Users,
}

/// Keys the active expiry cycle may remove per pass (it runs `hz` times a
/// second, 10 by default); a pass that hits the budget is followed at once
/// by another.
const EXPIRE_BUDGET: usize = 2000;

/// Keys one [`Node::make_room`] may evict: a write waits for at most this
/// many evictions (the periodic pass, and the next writes, go on).
const EVICT_BUDGET: usize = 256;

/// How long a TLS client has to finish its handshake.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

impl Node {
    /// Starts loading what a command on `key` will read first (its
    /// partition's header, and in a site its routing and replication
    /// state) into cache: the session calls it for the next request of a
    /// pipeline while the current one runs (see `Keyspace::prefetch`).
    pub fn prefetch(&self, key: &[u8]) {
        if let (Some(p), Some(c)) = (self.ks.prefetch(key), &self.cluster) {
            c.prefetch(p);
        }
    }

    pub fn new(settings: NodeSettings) -> Result<Arc<Node>, String> {
        let clock = Arc::new(DebugClock::default());
        let ks = Arc::new(Keyspace::new(
            KeyspaceConfig {
                partitions: settings.partitions,
                site_id: settings.site_id,
                // The log must never be what pushes a node over maxmemory.
                // With persistence, a replica that restarts is brought up
                // to date from its primary's log when it holds the changes
                // (a node alone has no replica: its disk is its log).
                log_retain_bytes: match (settings.log_retain_bytes, &settings.wan) {
                    (Some(bytes), _) => bytes,
                    (None, Some(_)) => DEFAULT_LOG_RETAIN_BYTES,
                    (None, None) if settings.persistence.is_on() && settings.cluster.is_some() => {
                        DEFAULT_LOG_RETAIN_BYTES
                    }
                    (None, None) => 0,
                }
                .min(match settings.maxmemory {
                    0 => usize::MAX,
                    max => max as usize / 16,
                })
                .min(
                    settings
                        .wan
                        .as_ref()
                        .map_or(usize::MAX, |w| w.memory_budget as usize / 4),
                ),
                // Deletes are remembered only where another site may send
                // an older write of the same key.
                tombstone_bytes: settings
                    .wan
                    .as_ref()
                    .map_or(0, |w| w.tombstone_memory as usize),
                changed_keys_bytes: settings.changed_keys_bytes,
            },
            clock.clone(),
        ));
        ks.hlc().set_max_offset_ms(settings.max_clock_offset_ms);
        let store = match settings.persistence {
            p if p.is_on() => {
                let mut cfg = persist::StoreConfig::new(&settings.data_dir, p.fsync);
                cfg.snapshot_after_bytes = p.snapshot_after_bytes;
                let (store, got) = persist::Store::open(cfg, &ks)?;
                ks.set_persist(store.clone());
                store.start()?;
                Some((store, got))
            }
            _ => None,
        };
        let clients = Arc::new(Clients::default());
        let tracking = Arc::new(Tracking::new(
            clients.clone(),
            settings.tracking_table_max_keys,
        ));
        let blocking = Arc::new(crate::blocking::Blocking::new(clients.clone()));
        ks.set_observer(Arc::new(crate::blocking::Observers {
            tracking: tracking.clone(),
            blocking: blocking.clone(),
        }));
        let cluster = match &settings.cluster {
            Some(c) => Some(cluster::Cluster::new(
                c.clone(),
                settings.site_id,
                settings.partitions,
                &settings.node_id,
                settings.listen,
                ks.clone(),
                settings.data_dir.clone(),
            )?),
            None => None,
        };
        if let (Some(c), Some((st, got))) = (&cluster, &store) {
            let _ = c.store.set(st.clone());
            c.restored.store(
                got.complete(st.cfg.fsync),
                std::sync::atomic::Ordering::Release,
            );
        }
        let wan = settings.wan.clone().map(|w| {
            let local = wan::LocalSite {
                site_id: settings.site_id,
                site_name: settings.site_name.clone(),
                node_id: settings.node_id.clone(),
                client_addr: settings.listen.to_string(),
                restored: store.as_ref().map(|(st, got)| got.complete(st.cfg.fsync)),
            };
            let wan = wan::Wan::new(w, local, ks.clone(), cluster.clone());
            if let Some((st, _)) = &store {
                let _ = wan.store.set(st.clone());
            }
            wan
        });
        let backups = backup::Jobs::new(
            backup::Node {
                ks: ks.clone(),
                cluster: cluster.clone(),
                site_id: settings.site_id,
                site_name: settings.site_name.clone(),
            },
            settings.backup_allowed_urls.clone(),
        );
        // Commands are timed by quanta's TSC clock (session.rs), which
        // calibrates itself at its first use: here, not in a command.
        let _ = quanta::Instant::now();
        let run_id: String = (0..40).map(|_| format!("{:x}", rand_nibble())).collect();
        let script_memory = settings.script_memory;
        let tls = match &settings.tls {
            Some(t) => Some(Arc::new(crate::tls::Tls::new(t.clone())?)),
            None => None,
        };
        let users =
            crate::users::Users::new(settings.aclfile.clone(), settings.requirepass.as_deref())?;
        let node = Arc::new(Node {
            tls,
            users,
            runtime: Runtime::new(&settings),
            settings,
            ks,
            clock,
            clients,
            tracking,
            blocking,
            pubsub: PubSub::default(),
            events: Default::default(),
            monitors: Default::default(),
            shutdown: tokio::sync::Notify::new(),
            metrics: Metrics::new(),
            started: Instant::now(),
            run_id,
            exec_gate: Default::default(),
            scripts: crate::scripts::Scripts::new(script_memory),
            cluster,
            wan,
            backups,
            store,
        });
        if let Some(c) = &node.cluster {
            // PUBLISH/SPUBLISH on another member: this node's subscribers.
            let weak = Arc::downgrade(&node);
            c.messages.set_sink(move |m| {
                let Some(n) = weak.upgrade() else { return };
                match m.kind {
                    MessageKind::Publish => n.pubsub.publish(&n.clients, &m.channel, &m.payload),
                    MessageKind::ShardPublish => {
                        n.pubsub.spublish(&n.clients, &m.channel, &m.payload)
                    }
                };
            });
            // A handover waits for every command already routed to finish.
            let weak = Arc::downgrade(&node);
            c.set_quiesce(Box::new(move || {
                if let Some(n) = weak.upgrade() {
                    drop(n.exec_gate.exclusive());
                }
            }));
        }
        memory::mark_startup();
        Ok(node)
    }

    /// Microseconds since the epoch on the node's clock (TIME). Read
    /// afresh: a script that loops on TIME must see it move.
    pub fn clock_micros(&self) -> u64 {
        let sub_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_micros() as u64 % 1000);
        self.clock.refresh() * 1000 + sub_ms
    }

    pub fn used_memory(&self) -> usize {
        memory::allocated()
    }

    /// Brings memory back under `maxmemory` by evicting keys as
    /// `maxmemory-policy` says (see `keyspace::Policy`), at most
    /// [`EVICT_BUDGET`] keys a call; true when a write that may grow
    /// memory may go ahead: memory is under the limit, or eviction is
    /// making progress towards it (as Redis lets a command run while its
    /// eviction has only run out of time). False: over the limit with
    /// nothing the policy may take (`noeviction`; a `volatile-*` policy
    /// and no key with a time to live): the write gets -OOM.
    pub fn make_room(&self) -> bool {
        let max = self.runtime.maxmemory();
        if max == 0 {
            return true;
        }
        let policy = self.runtime.maxmemory_policy();
        let samples = self.runtime.maxmemory_samples.load(Ordering::Relaxed);
        // Memory is read once per step: other threads evict and write
        // meanwhile, and a write must not be refused because memory was
        // back over the limit by the time a second reading was taken.
        for _ in 0..EVICT_BUDGET {
            if self.used_memory() as u64 <= max {
                return true;
            }
            if !self.ks.evict_one(policy, samples) {
                return false;
            }
        }
        true
    }

    pub fn snapshot(&self) -> Snapshot {
        let stats = self.ks.stats();
        Snapshot {
            connected_clients: self.clients.len(),
            keys: self.ks.len(),
            expires: self.ks.expires_len(),
            used_memory: self.used_memory(),
            maxmemory: self.runtime.maxmemory(),
            log_bytes: self.ks.log_bytes(),
            tracked_keys: self.tracking.tracked_keys(),
            changes: std::array::from_fn(|k| stats.count(k)),
            change_bytes: std::array::from_fn(|k| stats.bytes(k)),
            delta_bytes_saved: stats.delta_bytes_saved(),
            clock_ahead: self.ks.hlc().ahead_count(),
            site: self.cluster.as_ref().map(|c| c.status()),
            wan: self.wan.as_ref().map(|w| w.status()),
            persist: self.store.as_ref().map(|(st, _)| {
                use std::sync::atomic::Ordering::Relaxed;
                let f = &st.stats;
                crate::metrics::PersistFigures {
                    fsyncs: f.fsyncs.load(Relaxed),
                    fsync_micros_total: f.fsync_micros_total.load(Relaxed),
                    log_bytes: f.log_bytes.load(Relaxed),
                    snapshot_bytes: st.snapshot_disk_bytes(),
                    snapshots: f.snapshots.load(Relaxed),
                    changes_since_snapshot: st.changes_since_snapshot(),
                    write_ok: f.write_ok.load(Relaxed),
                }
            }),
        }
    }

    /// Serves until the process ends: RESP clients (plain, and over TLS
    /// on `tls_listener`), admin HTTP, expiry.
    pub async fn serve(
        self: Arc<Self>,
        listener: TcpListener,
        tls_listener: Option<TcpListener>,
        admin: Option<TcpListener>,
        peers: Option<TcpListener>,
    ) {
        if let (Some(tls), Some(l)) = (self.tls.clone(), tls_listener) {
            tokio::spawn(self.clone().serve_tls(tls, l));
        }
        if let Some(admin) = admin {
            tokio::spawn(admin::serve(self.clone(), admin));
        }
        if let Some(wan) = &self.wan {
            if let Err(e) = wan.start().await {
                tracing::error!(
                    "cannot listen for remote sites on {:?}: {e}",
                    wan.settings.listen
                );
                std::process::exit(1);
            }
        }
        if let (Some(cluster), Some(peers)) = (self.cluster.clone(), peers) {
            tokio::spawn(cluster::transport::run(cluster, peers));
        }
        tokio::spawn(self.clone().expire_loop());
        if self.cluster.is_some() {
            tokio::spawn(crate::site_acl::follow(self.clone()));
        }
        if let Some(schedule) = self.settings.backup.clone() {
            let me = backup::schedule::Coordinator {
                node: self.backups.node().clone(),
                node_id: self.settings.node_id.clone(),
                client_addr: self.settings.listen.to_string(),
            };
            tokio::spawn(backup::schedule::run(schedule, me));
        }
        loop {
            match listener.accept().await {
                Ok((stream, addr)) => {
                    tokio::spawn(connection::serve(self.clone(), stream, addr));
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off, keep serving.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    /// The TLS client port: a handshake (at most [`TLS_HANDSHAKE_TIMEOUT`])
    /// per connection, then the connection as on the plain port; SIGHUP
    /// reads the certificate files again.
    async fn serve_tls(self: Arc<Self>, tls: Arc<crate::tls::Tls>, listener: TcpListener) {
        if let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        {
            let tls = tls.clone();
            tokio::spawn(async move {
                while hup.recv().await.is_some() {
                    match tls.reload() {
                        Ok(()) => tracing::info!("SIGHUP: TLS certificates read again"),
                        Err(e) => tracing::error!(
                            "SIGHUP: TLS certificates not reloaded, the old ones stay: {e}"
                        ),
                    }
                }
            });
        }
        loop {
            match listener.accept().await {
                Ok((stream, addr)) => {
                    let node = self.clone();
                    let acceptor = tls.acceptor();
                    tokio::spawn(async move {
                        let _ = stream.set_nodelay(true);
                        match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream))
                            .await
                        {
                            Ok(Ok(s)) => {
                                connection::serve(node, crate::tls::TlsClient::new(s), addr).await
                            }
                            Ok(Err(e)) => {
                                node.metrics
                                    .tls_handshake_failures
                                    .fetch_add(1, Ordering::Relaxed);
                                tracing::debug!(%addr, "TLS handshake failed: {e}");
                            }
                            Err(_) => {
                                node.metrics
                                    .tls_handshake_failures
                                    .fetch_add(1, Ordering::Relaxed);
                                tracing::debug!(%addr, "TLS handshake timed out");
                            }
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!("TLS accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    async fn expire_loop(self: Arc<Self>) {
        loop {
            let hz = self.runtime.hz.load(Ordering::Relaxed).clamp(1, 500);
            tokio::time::sleep(Duration::from_millis(1000 / hz)).await;
            self.clock.refresh();
            crate::memory::peak();
            if crate::memory::should_trim() {
                // A trim walks the allocator's free lists: not on a worker
                // that serves clients.
                let _ = tokio::task::spawn_blocking(keyspace::memory::purge).await;
            }
            if !self.runtime.cron_paused.load(Ordering::Relaxed) {
                self.ks.trim_idle_logs(16);
            }
            if !self.runtime.active_expire.load(Ordering::Relaxed)
                || self.runtime.cron_paused.load(Ordering::Relaxed)
            {
                continue;
            }
            // Bounded passes so one cycle never holds a worker for long.
            for _ in 0..10 {
                let node = self.clone();
                let removed = tokio::task::spawn_blocking(move || {
                    let removed = node.ks.expire_cycle(EXPIRE_BUDGET);
                    // Writes that arrive from replication or other sites
                    // grow memory too: eviction keeps up here as well.
                    node.make_room();
                    // Expiry replicates like any change; nobody waits for it.
                    keyspace::take_written();
                    if node.events.on() {
                        crate::notify::publish(&node, "", &[]);
                    }
                    removed
                })
                .await
                .unwrap_or(0);
                if removed < EXPIRE_BUDGET {
                    break;
                }
            }
        }
    }
}

fn rand_nibble() -> u8 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut h = RandomState::new().build_hasher();
    h.write_u64(Instant::now().elapsed().as_nanos() as u64);
    (h.finish() & 0xf) as u8
}
