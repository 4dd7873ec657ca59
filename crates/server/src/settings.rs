//! Node settings: fixed at start ([`NodeSettings`]) and changeable at run
//! time with CONFIG SET ([`Runtime`], atomics read on the hot path).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};

use parking_lot::RwLock;

#[derive(Clone, Debug)]
pub struct NodeSettings {
    pub node_id: String,
    pub listen: SocketAddr,
    pub admin_listen: Option<SocketAddr>,
    /// What the admin endpoint's state-changing requests must carry
    /// (`Authorization: Bearer <token>`); None: `requirepass`, and with
    /// neither they are open.
    pub admin_token: Option<String>,
    pub data_dir: PathBuf,
    pub maxmemory: u64,
    /// What goes when memory passes `maxmemory` (`noeviction`: writes get -OOM).
    pub maxmemory_policy: keyspace::Policy,
    /// Keys eviction samples per choice (Redis's `maxmemory-samples`).
    pub maxmemory_samples: usize,
    pub requirepass: Option<String>,
    pub maxclients: usize,
    /// Worker threads of the node's runtime; 0: one per CPU.
    pub threads: usize,
    /// How long a worker woken to do work keeps polling for more before it
    /// sleeps again ([`crate::idle_poll`]); zero: it sleeps at once.
    pub idle_poll: std::time::Duration,
    pub proto_max_bulk_len: usize,
    pub client_query_buffer_limit: usize,
    pub enable_debug_command: bool,
    pub site_id: u16,
    pub site_name: String,
    pub partitions: u16,
    /// Bytes of partition log a replica's copies keep of the changes some
    /// remote site may not have applied yet (a primary keeps what its WAN
    /// publishers have yet to read or see applied); None:
    /// [`DEFAULT_LOG_RETAIN_BYTES`] with WAN replication, else 0 (only a
    /// WAN publisher, or a replica that may be promoted to one, reads it).
    pub log_retain_bytes: Option<usize>,
    /// Keys remembered for client tracking before the oldest are invalidated.
    pub tracking_table_max_keys: usize,
    /// Bytes each Lua state (EVAL's, the functions') may allocate; a script
    /// that needs more fails with an error.
    pub script_memory: usize,
    /// Set when the node is a member of a multi-node site.
    pub cluster: Option<cluster::ClusterSettings>,
    /// Set when the node replicates to or from other sites.
    pub wan: Option<wan::WanSettings>,
    /// Bytes of key names per node remembered for incremental backups.
    pub changed_keys_bytes: usize,
    /// Scheduled backups to storage, when configured.
    pub backup: Option<backup::schedule::Schedule>,
    /// How far ahead of this node's clock a version from a peer or a
    /// remote site may be, in milliseconds (0: no bound).
    pub max_clock_offset_ms: u64,
    /// Where `BACKUPJOB` may write or read (`[backup] allowed_urls`; by
    /// default only the schedule's `backup.to`).
    pub backup_allowed_urls: backup::AllowedUrls,
    /// Local persistence (`node.persistence`, `node.fsync`).
    pub persistence: Persistence,
    /// The TLS client port (`node.tls_listen` and its files).
    pub tls: Option<crate::tls::TlsSettings>,
    /// `aclfile`: ACL users loaded at start, by ACL LOAD, written by ACL SAVE.
    pub aclfile: Option<std::path::PathBuf>,
    /// Refuse to start with a port other hosts reach and no proof asked
    /// there ([`crate::protected`]).
    pub protected_mode: bool,
}

/// `node.persistence`, `node.fsync`, `node.snapshot_every`: whether and how
/// the node keeps its copies on its disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Persistence {
    /// "log" (true) or "off" (false); None: not said, and then on once a
    /// data directory is given.
    pub log: Option<bool>,
    pub fsync: persist::Fsync,
    /// Log growth after which a snapshot is taken (0: on BGSAVE only).
    pub snapshot_after_bytes: u64,
}

/// `node.snapshot_every` when not set.
pub const DEFAULT_SNAPSHOT_AFTER: u64 = 256 << 20;

impl Default for Persistence {
    fn default() -> Self {
        Persistence {
            log: None,
            fsync: persist::Fsync::default(),
            snapshot_after_bytes: DEFAULT_SNAPSHOT_AFTER,
        }
    }
}

impl Persistence {
    /// Whether the node keeps its copies on disk.
    pub fn is_on(&self) -> bool {
        self.log == Some(true)
    }
}

/// `node.script_memory` when not set.
pub const DEFAULT_SCRIPT_MEMORY: usize = 256 << 20;

/// `node.idle_poll_us` when not set.
pub const DEFAULT_IDLE_POLL: std::time::Duration = std::time::Duration::from_micros(50);

/// Log kept per node with WAN replication when `node.log_memory` is not set.
pub const DEFAULT_LOG_RETAIN_BYTES: usize = 4 << 20;

impl Default for NodeSettings {
    fn default() -> Self {
        NodeSettings {
            node_id: "n1".into(),
            listen: "127.0.0.1:6379".parse().expect("valid literal"),
            admin_listen: Some("127.0.0.1:9379".parse().expect("valid literal")),
            admin_token: None,
            data_dir: PathBuf::from("./data"),
            maxmemory: 0,
            maxmemory_policy: keyspace::Policy::NoEviction,
            maxmemory_samples: 5,
            requirepass: None,
            maxclients: 10_000,
            threads: 0,
            idle_poll: DEFAULT_IDLE_POLL,
            proto_max_bulk_len: 512 << 20,
            client_query_buffer_limit: 1 << 30,
            enable_debug_command: false,
            site_id: 1,
            site_name: "local".into(),
            partitions: 271,
            log_retain_bytes: None,
            tracking_table_max_keys: 1_000_000,
            script_memory: DEFAULT_SCRIPT_MEMORY,
            cluster: None,
            wan: None,
            changed_keys_bytes: 64 << 20,
            backup_allowed_urls: backup::AllowedUrls::default(),
            max_clock_offset_ms: keyspace::version::DEFAULT_MAX_OFFSET_MS,
            backup: None,
            persistence: Persistence::default(),
            tls: None,
            aclfile: None,
            protected_mode: true,
        }
    }
}

/// What CONFIG SET may change while running.
pub struct Runtime {
    pub maxmemory: AtomicU64,
    /// [`keyspace::Policy::index`] of `maxmemory-policy`.
    maxmemory_policy: AtomicU8,
    pub maxmemory_samples: AtomicUsize,
    pub maxclients: AtomicUsize,
    pub proto_max_bulk_len: AtomicUsize,
    pub client_query_buffer_limit: AtomicUsize,
    pub requirepass: RwLock<Option<String>>,
    pub active_expire: AtomicBool,
    /// DEBUG PAUSE-CRON: the periodic work Redis's cron would do (here:
    /// active expiry) waits until it is resumed.
    pub cron_paused: AtomicBool,
    /// Redis's `hz`: active expiry passes per second (1..=500).
    pub hz: AtomicU64,
    /// `min-replicas-to-write`: writes are refused (NOREPLICAS) unless
    /// their partition has this many in-sync replicas.
    pub min_replicas_to_write: AtomicUsize,
}

impl Runtime {
    pub fn new(s: &NodeSettings) -> Self {
        let runtime = Runtime {
            maxmemory: AtomicU64::new(s.maxmemory),
            maxmemory_policy: AtomicU8::new(s.maxmemory_policy.index()),
            maxmemory_samples: AtomicUsize::new(s.maxmemory_samples),
            maxclients: AtomicUsize::new(s.maxclients),
            proto_max_bulk_len: AtomicUsize::new(s.proto_max_bulk_len),
            client_query_buffer_limit: AtomicUsize::new(s.client_query_buffer_limit),
            requirepass: RwLock::new(s.requirepass.clone()),
            active_expire: AtomicBool::new(true),
            cron_paused: AtomicBool::new(false),
            hz: AtomicU64::new(10),
            min_replicas_to_write: AtomicUsize::new(0),
        };
        keyspace::access::set_lfu(s.maxmemory_policy.lfu());
        runtime
    }

    pub fn maxmemory(&self) -> u64 {
        self.maxmemory.load(Ordering::Relaxed)
    }

    pub fn maxmemory_policy(&self) -> keyspace::Policy {
        keyspace::Policy::from_index(self.maxmemory_policy.load(Ordering::Relaxed))
    }

    /// Sets the policy; keys count accesses from now on if it is an LFU one
    /// (what they held reads differently for a while, as in Redis).
    pub fn set_maxmemory_policy(&self, p: keyspace::Policy) {
        self.maxmemory_policy.store(p.index(), Ordering::Relaxed);
        keyspace::access::set_lfu(p.lfu());
    }

    pub fn limits(&self) -> resp::Limits {
        resp::Limits {
            max_bulk_len: self.proto_max_bulk_len.load(Ordering::Relaxed),
            ..resp::Limits::default()
        }
    }
}
