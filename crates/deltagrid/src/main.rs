//! `deltagrid`: one binary for the server and its tools.

mod backup_cli;
mod cluster_cli;
mod config;
mod wan_cli;

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use server::memory::{parse_size, CountingAlloc};
use server::{Node, NodeSettings};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

#[derive(Parser)]
#[command(
    name = "deltagrid",
    version,
    about = "An in-memory data grid that speaks Redis and replicates between data centers"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Parsed once at start-up: its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Run a node (defaults: RESP on 127.0.0.1:6379, admin HTTP on 127.0.0.1:9379)
    Server(ServerArgs),
    /// Two sites of three nodes on loopback: WAN replication with deltas off, then on (GemFire's experiment)
    Demo(bench::demo::DemoArgs),
    /// Site administration
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// Replication between sites: status and publisher control
    #[command(subcommand)]
    Wan(WanCommand),
    /// Backups to storage: base + incremental layers, restored newest-first
    #[command(subcommand)]
    Backup(BackupCommand),
    /// Benchmark programs (they print tables; see docs/benchmarks.md)
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Subcommand)]
enum BackupCommand {
    /// Every primary writes its partitions (full, or --incremental since the newest backup); the manifest last
    Create(backup_cli::CreateArgs),
    /// Backups at a URL: ids, time, parent, keys, bytes
    List {
        #[arg(long)]
        from: String,
    },
    /// Read and check every chunk of a backup's chain
    Verify {
        #[arg(long)]
        from: String,
        /// Default: the newest
        #[arg(long)]
        backup: Option<String>,
    },
    /// Restore into an empty node or site (newest layer first by default)
    Restore(backup_cli::RestoreArgs),
}

#[derive(Subcommand)]
enum ClusterCommand {
    /// Members, their health, primaries/replicas/in-sync partitions per node, table epoch
    Status {
        /// A node's admin address (its admin_listen)
        #[arg(long)]
        admin: String,
    },
    /// Drain a node out of the site: its partitions move to the others
    /// while clients keep writing, then it is removed and its process ends
    Leave {
        /// A node's admin address (any member)
        #[arg(long)]
        admin: String,
        /// The leaving node's name (node.id) or node id
        #[arg(long)]
        node: String,
    },
    /// Give up on a dead node's disk: partitions whose every copy went
    /// down stop waiting for it and resume from the best copy that came
    /// back (acknowledged writes only it held are lost)
    Revoke {
        /// A node's admin address (any member)
        #[arg(long)]
        admin: String,
        /// The revoked node's name (node.id) or node id
        #[arg(long)]
        node: String,
    },
}

#[derive(Subcommand)]
enum WanCommand {
    /// Per node and remote site: state, lag, queue in memory and on disk, rates
    Status {
        /// Admin addresses of the nodes to ask, comma-separated
        #[arg(long)]
        admin: String,
    },
    /// Queue changes for a site but send nothing
    Pause(WanTargetArgs),
    /// Send again (after pause), or re-sync and send (after stop)
    Resume(WanTargetArgs),
    /// Neither queue nor send; resume re-syncs
    Stop(WanTargetArgs),
    /// Copy the current contents of every primary partition to the site, then continue from the log
    Resync(WanTargetArgs),
}

#[derive(clap::Args)]
struct WanTargetArgs {
    /// The remote site's name (wan.targets.name)
    #[arg(long)]
    target: String,
    /// Admin addresses of the nodes to tell, comma-separated (publishers run on every node)
    #[arg(long)]
    admin: String,
}

#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum BenchCommand {
    /// One client, one op in flight, against a loopback TCP echo floor (GigaSpaces' method)
    Latency(bench::latency::LatencyArgs),
    /// GemFire's WAN delta experiment: 2 sites x 3 nodes, delta off then on, JSON/CSV results (bench/wan_delta.sh)
    WanDelta(bench::wan_delta::WanDeltaArgs),
    /// Hazelcast's WAN-under-load experiment: ack modes, partition counts, a link outage, WAN off; JSON/CSV results (bench/wan_load.sh)
    WanLoad(bench::wan_load::WanLoadArgs),
}

#[derive(clap::Args)]
struct ServerArgs {
    /// TOML config file; flags given here override it
    #[arg(long)]
    config: Option<PathBuf>,
    /// Address for Redis clients
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Address for /metrics, /health, /status
    #[arg(long)]
    admin_listen: Option<SocketAddr>,
    /// Where the node keeps its metadata, WAN spill and (with persistence)
    /// its data
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// log (default once a data directory is given) or off
    #[arg(long)]
    persistence: Option<String>,
    /// always, everysec (default) or no: when the change log is synced
    #[arg(long)]
    fsync: Option<String>,
    /// Bytes, e.g. 4GiB, 512mb; past it keys go by --maxmemory-policy
    /// (default noeviction: writes get -OOM)
    #[arg(long)]
    maxmemory: Option<String>,
    /// noeviction, allkeys-lru, allkeys-lfu, allkeys-random, volatile-lru,
    /// volatile-lfu, volatile-random or volatile-ttl (as Redis)
    #[arg(long)]
    maxmemory_policy: Option<String>,
    #[arg(long)]
    requirepass: Option<String>,
    /// What state-changing admin requests (POST /cluster/leave, /wan/...)
    /// must carry as `Authorization: Bearer`; default: the requirepass
    #[arg(long)]
    admin_token: Option<String>,
    /// no: start even with ports other hosts reach and no password or
    /// secret asked there (Redis's protected-mode)
    #[arg(long)]
    protected_mode: Option<String>,
    /// Where `deltagrid backup` may write and read: a URL and everything
    /// under it (repeat for more); over `[backup] allowed_urls`
    #[arg(long = "backup-allowed-url")]
    backup_allowed_urls: Vec<String>,
    /// How far ahead of this node's clock a version from a peer or a
    /// remote site may be ("500ms"; "0ms": no bound)
    #[arg(long)]
    max_clock_offset: Option<String>,
    #[arg(long)]
    maxclients: Option<usize>,
    /// Worker threads (default: one per CPU)
    #[arg(long)]
    threads: Option<usize>,
    /// Microseconds a worker woken to do work keeps polling for more before
    /// it sleeps again; 0: never (for cores shared with other busy processes)
    /// [default: 50]
    #[arg(long)]
    idle_poll_us: Option<u64>,
    /// Allow DEBUG (CLOCK-ADVANCE, SET-ACTIVE-EXPIRE): for tests
    #[arg(long)]
    enable_debug_command: bool,
    /// Address of the TLS client port (Redis's tls-port)
    #[arg(long)]
    tls_listen: Option<SocketAddr>,
    /// PEM certificate chain of the TLS port
    #[arg(long)]
    tls_cert_file: Option<PathBuf>,
    /// PEM private key of the TLS port
    #[arg(long)]
    tls_key_file: Option<PathBuf>,
    /// PEM CA certificates client certificates are checked against
    #[arg(long)]
    tls_ca_cert_file: Option<PathBuf>,
    /// yes (default), optional or no: whether TLS clients show a certificate
    #[arg(long)]
    tls_auth_clients: Option<String>,
    /// ACL users file (Redis's aclfile format): loaded at start, read by
    /// ACL LOAD, written by ACL SAVE
    #[arg(long)]
    aclfile: Option<PathBuf>,
}

impl ServerArgs {
    fn settings(self) -> anyhow::Result<NodeSettings> {
        let mut s = NodeSettings::default();
        if let Some(path) = &self.config {
            config::ConfigFile::load(path)?.apply(&mut s)?;
        }
        if let Some(v) = self.listen {
            s.listen = v;
        }
        if let Some(v) = self.admin_listen {
            s.admin_listen = Some(v);
        }
        let dir_given = self.data_dir.is_some();
        if let Some(v) = self.data_dir {
            if let Some(w) = s.wan.as_mut() {
                w.dir = v.join("wan");
            }
            s.data_dir = v;
        }
        s.persistence = config::persistence(
            self.persistence.as_deref(),
            self.fsync.as_deref(),
            None,
            dir_given,
            s.persistence,
        )?;
        if let Some(v) = self.maxmemory {
            s.maxmemory = parse_size(&v).with_context(|| format!("invalid --maxmemory {v:?}"))?;
        }
        if let Some(v) = self.maxmemory_policy {
            s.maxmemory_policy = server::EvictionPolicy::parse(&v)
                .with_context(|| format!("invalid --maxmemory-policy {v:?}"))?;
        }
        if let Some(v) = self.requirepass {
            s.requirepass = Some(v);
        }
        if let Some(v) = &self.protected_mode {
            s.protected_mode = match v.as_str() {
                "yes" => true,
                "no" => false,
                _ => anyhow::bail!("--protected-mode {v:?}: use yes or no"),
            };
        }
        if let Some(v) = self.admin_token {
            s.admin_token = (!v.is_empty()).then_some(v);
        }
        if let Some(v) = self.aclfile {
            s.aclfile = Some(v);
        }
        if !self.backup_allowed_urls.is_empty() {
            s.backup_allowed_urls = backup::AllowedUrls::new(&self.backup_allowed_urls)
                .map_err(|e| anyhow::anyhow!("--backup-allowed-url: {e}"))?;
        }
        if let Some(v) = &self.max_clock_offset {
            s.max_clock_offset_ms = config::duration_ms(v)
                .with_context(|| format!("invalid --max-clock-offset {v:?}"))?;
        }
        if let Some(v) = self.maxclients {
            s.maxclients = v;
        }
        if let Some(v) = self.threads {
            s.threads = v;
        }
        if let Some(v) = self.idle_poll_us {
            s.idle_poll = config::idle_poll(v)?;
        }
        s.enable_debug_command |= self.enable_debug_command;
        let tls_flags = self.tls_listen.is_some()
            || self.tls_cert_file.is_some()
            || self.tls_key_file.is_some()
            || self.tls_ca_cert_file.is_some()
            || self.tls_auth_clients.is_some();
        if tls_flags {
            // Flags over the file's [node] tls_* keys.
            let file = s.tls.take();
            s.tls = config::tls(
                self.tls_listen.or(file.as_ref().map(|t| t.listen)),
                self.tls_cert_file
                    .or(file.as_ref().map(|t| t.cert_file.clone())),
                self.tls_key_file
                    .or(file.as_ref().map(|t| t.key_file.clone())),
                self.tls_ca_cert_file
                    .or(file.as_ref().and_then(|t| t.ca_cert_file.clone())),
                self.tls_auth_clients
                    .or(file.map(|t| t.auth_clients.name().to_string())),
            )?;
        }
        // Told to the site's other members (MOVED, CLUSTER SLOTS over TLS).
        if let Some(c) = s.cluster.as_mut() {
            c.tls_client_addr = s.tls.as_ref().map(|t| t.listen);
        }
        Ok(s)
    }
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,openraft=warn".into()),
        )
        .init();
    match Cli::parse().command {
        Command::Server(args) => run_server(args.settings()?),
        Command::Demo(args) => bench::demo::run(&args),
        Command::Bench(BenchCommand::Latency(args)) => bench::latency::run(&args),
        Command::Bench(BenchCommand::WanDelta(args)) => bench::wan_delta::run(&args),
        Command::Bench(BenchCommand::WanLoad(args)) => bench::wan_load::run(&args),
        Command::Cluster(ClusterCommand::Status { admin }) => cluster_cli::status(&admin),
        Command::Cluster(ClusterCommand::Leave { admin, node }) => {
            cluster_cli::post(&admin, "leave", &node)
        }
        Command::Cluster(ClusterCommand::Revoke { admin, node }) => {
            cluster_cli::post(&admin, "revoke", &node)
        }
        Command::Backup(BackupCommand::Create(args)) => backup_cli::create(&args),
        Command::Backup(BackupCommand::List { from }) => backup_cli::list(&from),
        Command::Backup(BackupCommand::Verify { from, backup }) => {
            backup_cli::verify(&from, backup.as_deref())
        }
        Command::Backup(BackupCommand::Restore(args)) => backup_cli::restore(&args),
        Command::Wan(WanCommand::Status { admin }) => wan_cli::status(&admin),
        Command::Wan(WanCommand::Pause(a)) => wan_cli::control(&a.admin, "pause", &a.target),
        Command::Wan(WanCommand::Resume(a)) => wan_cli::control(&a.admin, "resume", &a.target),
        Command::Wan(WanCommand::Stop(a)) => wan_cli::control(&a.admin, "stop", &a.target),
        Command::Wan(WanCommand::Resync(a)) => wan_cli::control(&a.admin, "resync", &a.target),
    }
}

/// How long a stopping node waits for the partitions it leads to be
/// handed to their replicas.
const HAND_OFF_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// SIGTERM or SIGINT (what systemd, Kubernetes and Ctrl-C send): the node
/// stops, it does not leave its site. Its client listener is closed, it hands
/// the partitions it leads to their in-sync replicas and tells the site it
/// is down ([`cluster::Cluster::stop`]); started again with the same
/// `data_dir` it rejoins as the same member. A second signal ends the
/// process at once. Leaving the site is `deltagrid cluster leave`.
async fn stop(node: &Node, signal: &str) {
    tracing::info!("{signal}: stopping (a second signal ends the process at once)");
    if let Some(c) = &node.cluster {
        c.stop(HAND_OFF_TIMEOUT).await;
    }
    if let Some((store, _)) = &node.store {
        // What was handed over reaches the disk (synced) before the exit.
        store.stop();
    }
    tracing::info!("shutting down");
}

/// Resolves at the next SIGTERM or SIGINT, with its name.
async fn next_signal(terminate: &mut tokio::signal::unix::Signal) -> &'static str {
    tokio::select! {
        _ = terminate.recv() => "terminated",
        _ = tokio::signal::ctrl_c() => "interrupted",
    }
}

fn run_server(settings: NodeSettings) -> anyhow::Result<()> {
    // Before any port opens: refuse ports others reach without proof.
    let users =
        server::users::Users::new(settings.aclfile.clone(), settings.requirepass.as_deref())
            .map_err(anyhow::Error::msg)?;
    server::protected::check(&settings, &users).map_err(anyhow::Error::msg)?;
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if settings.threads > 0 {
        rt.worker_threads(settings.threads);
    }
    let rt = server::idle_poll::build_runtime(rt.enable_all(), settings.idle_poll)?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(settings.listen)
            .await
            .with_context(|| format!("binding {}", settings.listen))?;
        let tls_listener = match &settings.tls {
            Some(t) => Some(
                tokio::net::TcpListener::bind(t.listen)
                    .await
                    .with_context(|| format!("binding tls_listen {}", t.listen))?,
            ),
            None => None,
        };
        let admin = match settings.admin_listen {
            Some(a) => Some(tokio::net::TcpListener::bind(a).await.with_context(|| format!("binding admin {a}"))?),
            None => None,
        };
        tracing::info!(
            node = %settings.node_id, listen = %settings.listen, admin = ?settings.admin_listen,
            partitions = settings.partitions, "deltagrid {} ready", env!("CARGO_PKG_VERSION")
        );
        let peers = match &settings.cluster {
            Some(c) => Some(
                tokio::net::TcpListener::bind(c.cluster_listen)
                    .await
                    .with_context(|| format!("binding cluster_listen {}", c.cluster_listen))?,
            ),
            None => None,
        };
        let mut settings = settings;
        if let Some(c) = settings.cluster.as_mut().filter(|c| !c.seeds.contains(&c.cluster_listen)) {
            let client_addr = settings.listen.to_string();
            let joined = cluster::join::join(c, settings.site_id, &settings.node_id, &client_addr)
                .await
                .map_err(anyhow::Error::msg)?;
            c.joined = Some(joined);
        }
        // Loading copies from disk: clients are answered LOADING meanwhile.
        let (node, listener) = if settings.persistence.is_on() {
            let loading = server::loading::Loading::answer(listener);
            let node = Node::new(settings).map_err(anyhow::Error::msg)?;
            (node, loading.done().await.context("the client listener")?)
        } else {
            (Node::new(settings).map_err(anyhow::Error::msg)?, listener)
        };
        let left = async {
            match &node.cluster {
                Some(c) => c.left.notified().await,
                None => std::future::pending().await,
            }
        };
        let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let signal = tokio::select! {
            _ = node.clone().serve(listener, tls_listener, admin, peers) => None,
            _ = left => {
                tracing::info!("this node left its site: shutting down");
                None
            }
            signal = next_signal(&mut terminate) => Some(signal),
            _ = node.shutdown.notified() => Some("SHUTDOWN"),
        };
        // The serve future is gone: its client listener is closed, while
        // the connections already open and the site's work (spawned tasks)
        // go on until the process ends.
        if let Some(signal) = signal {
            // A script that runs on would hold the exec gate the handover
            // needs: it stops, written or not (Redis exits under it too).
            node.scripts.watchdog.force_kill();
            tokio::select! {
                _ = stop(&node, signal) => {}
                again = next_signal(&mut terminate) => tracing::warn!("{again} again: shutting down at once"),
            }
        }
        Ok(())
    })
}
