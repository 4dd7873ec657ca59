//! The TOML configuration file. Every table denies unknown keys, so a typo
//! is an error naming the key instead of a silently ignored setting.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::Deserialize;
use server::memory::parse_size;
use server::NodeSettings;

/// The `maxmemory-policy` names, for error messages.
fn policy_names() -> String {
    let names: Vec<&str> = server::EvictionPolicy::ALL
        .iter()
        .map(|(n, _)| *n)
        .collect();
    names.join(", ")
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default)]
    pub node: NodeSection,
    #[serde(default)]
    pub site: SiteSection,
    pub wan: Option<WanSection>,
    pub backup: Option<BackupSection>,
}

/// `[backup]`: the changed-keys budget and an optional schedule.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackupSection {
    /// Where scheduled backups go (file:///path or s3://bucket/prefix).
    pub to: Option<String>,
    /// e.g. "24h": a full backup when the newest full one is this old.
    pub full_every: Option<String>,
    /// e.g. "1h": an incremental when the newest backup is this old.
    pub incremental_every: Option<String>,
    /// Full backups kept, each with its incrementals (0: all).
    pub keep_full: Option<usize>,
    /// Bytes of key names per node remembered for incrementals.
    pub tracking_memory: Option<Size>,
    /// Where `deltagrid backup` may write and read (URLs and everything
    /// under them); default: only `to`.
    pub allowed_urls: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WanSection {
    pub listen: Option<SocketAddr>,
    pub memory_budget: Option<Size>,
    pub disk_budget: Option<Size>,
    /// Bytes of tombstones per node (deletes kept until every remote site
    /// has passed them).
    pub tombstone_memory: Option<Size>,
    /// Shared by all sites: a link is up only when both ends prove they
    /// know it.
    pub secret: Option<String>,
    /// Mutual TLS on every WAN link: each site's certificate (from the
    /// shared CA) names the site.
    pub tls: Option<bool>,
    pub tls_cert_file: Option<PathBuf>,
    pub tls_key_file: Option<PathBuf>,
    pub tls_ca_cert_file: Option<PathBuf>,
    #[serde(default)]
    pub targets: Vec<WanTarget>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WanTarget {
    pub name: String,
    pub endpoints: Vec<String>,
    pub delta: Option<bool>,
    pub ack: Option<AckMode>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AckMode {
    Pipelined,
    OnApply,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSection {
    pub id: Option<String>,
    pub listen: Option<SocketAddr>,
    pub admin_listen: Option<SocketAddr>,
    /// What state-changing admin requests must carry (default: requirepass).
    pub admin_token: Option<String>,
    /// false: start even with ports other hosts reach and no proof asked
    /// there (see README, "Security").
    pub protected_mode: Option<bool>,
    pub data_dir: Option<PathBuf>,
    /// "log" (the default once data_dir is set) or "off".
    pub persistence: Option<String>,
    /// "always", "everysec" (default) or "no" (Redis's appendfsync).
    pub fsync: Option<String>,
    /// Log growth after which a snapshot is taken (0: BGSAVE only).
    pub snapshot_every: Option<Size>,
    pub maxmemory: Option<Size>,
    /// Redis's `maxmemory-policy` (noeviction, allkeys-lru, ...).
    pub maxmemory_policy: Option<String>,
    /// Redis's `maxmemory-samples`.
    pub maxmemory_samples: Option<usize>,
    pub requirepass: Option<String>,
    pub maxclients: Option<usize>,
    /// Worker threads serving clients, replication and WAN (0 or unset:
    /// one per CPU).
    pub threads: Option<usize>,
    /// Microseconds a worker woken to do work keeps polling for more
    /// before it sleeps again (0: never polls).
    pub idle_poll_us: Option<u64>,
    pub proto_max_bulk_len: Option<Size>,
    pub client_query_buffer_limit: Option<Size>,
    pub log_memory: Option<Size>,
    pub tracking_table_max_keys: Option<usize>,
    /// Bytes each Lua state may allocate (EVAL's, the functions').
    pub script_memory: Option<Size>,
    /// How far ahead of this node's clock a version from a peer or a
    /// remote site may be ("500ms"; "0ms": no bound).
    pub max_clock_offset: Option<String>,
    pub enable_debug_command: Option<bool>,
    /// Node-to-node address (metadata and replication) in a multi-node site.
    pub cluster_listen: Option<SocketAddr>,
    /// The TLS client port (Redis's `tls-port`), beside `listen`.
    pub tls_listen: Option<SocketAddr>,
    /// PEM certificate chain and private key of the TLS port.
    pub tls_cert_file: Option<PathBuf>,
    pub tls_key_file: Option<PathBuf>,
    /// PEM CA certificates that client certificates are checked against.
    pub tls_ca_cert_file: Option<PathBuf>,
    /// "yes" (default, as Redis), "optional" or "no": whether TLS clients
    /// must show a certificate signed by `tls_ca_cert_file`.
    pub tls_auth_clients: Option<String>,
    /// ACL users (Redis's aclfile format), loaded at start; ACL LOAD and
    /// ACL SAVE read and write it.
    pub aclfile: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiteSection {
    pub id: Option<u16>,
    pub name: Option<String>,
    pub partitions: Option<u16>,
    /// Initial members' cluster addresses; set: this node is part of a site.
    pub seeds: Option<Vec<SocketAddr>>,
    /// Replicas per partition (in-site copies; the key keeps its first name).
    pub backups: Option<usize>,
    pub replication: Option<ReplicationMode>,
    /// Shared by the site's nodes: node-to-node connections open only
    /// between nodes that prove they know it.
    pub secret: Option<String>,
    /// Mutual TLS on every node-to-node connection: each node's
    /// certificate (from the site's CA) names the site.
    pub tls: Option<bool>,
    pub tls_cert_file: Option<PathBuf>,
    pub tls_key_file: Option<PathBuf>,
    pub tls_ca_cert_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReplicationMode {
    Sync,
    Async,
}

/// A byte size: an integer, or a string like "4GiB" / "512mb".
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(try_from = "SizeRepr")]
pub struct Size(pub u64);

#[derive(Deserialize)]
#[serde(untagged)]
enum SizeRepr {
    Int(u64),
    Text(String),
}

impl TryFrom<SizeRepr> for Size {
    type Error = String;
    fn try_from(r: SizeRepr) -> Result<Self, String> {
        match r {
            SizeRepr::Int(n) => Ok(Size(n)),
            SizeRepr::Text(s) => parse_size(&s)
                .map(Size)
                .ok_or_else(|| format!("invalid size {s:?} (use e.g. \"4GiB\", \"512mb\")")),
        }
    }
}

impl ConfigFile {
    pub fn load(path: &Path) -> anyhow::Result<ConfigFile> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        toml::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{}: {}", path.display(), e.to_string().trim_end()))
    }

    /// Applies the file on top of the defaults.
    pub fn apply(self, s: &mut NodeSettings) -> anyhow::Result<()> {
        let n = self.node;
        if let Some(v) = n.id {
            s.node_id = v;
        }
        if let Some(v) = n.listen {
            s.listen = v;
        }
        if let Some(v) = n.admin_listen {
            s.admin_listen = Some(v);
        }
        if let Some(v) = n.protected_mode {
            s.protected_mode = v;
        }
        if let Some(v) = n.admin_token {
            s.admin_token = (!v.is_empty()).then_some(v);
        }
        s.tls = tls(
            n.tls_listen,
            n.tls_cert_file,
            n.tls_key_file,
            n.tls_ca_cert_file,
            n.tls_auth_clients,
        )?;
        if let Some(v) = n.aclfile {
            s.aclfile = Some(v);
        }
        let dir_given = n.data_dir.is_some();
        if let Some(v) = n.data_dir {
            s.data_dir = v;
        }
        s.persistence = persistence(
            n.persistence.as_deref(),
            n.fsync.as_deref(),
            n.snapshot_every.map(|v| v.0),
            dir_given,
            s.persistence,
        )?;
        if let Some(v) = n.maxmemory {
            s.maxmemory = v.0;
        }
        if let Some(v) = n.maxmemory_policy {
            s.maxmemory_policy = server::EvictionPolicy::parse(&v).with_context(|| {
                format!("node.maxmemory_policy {v:?}: not one of {}", policy_names())
            })?;
        }
        if let Some(v) = n.maxmemory_samples {
            anyhow::ensure!(v > 0, "node.maxmemory_samples must be at least 1");
            s.maxmemory_samples = v;
        }
        if let Some(v) = n.requirepass {
            s.requirepass = (!v.is_empty()).then_some(v);
        }
        if let Some(v) = n.maxclients {
            s.maxclients = v;
        }
        if let Some(v) = n.threads {
            s.threads = v;
        }
        if let Some(v) = n.idle_poll_us {
            s.idle_poll = idle_poll(v)?;
        }
        if let Some(v) = n.max_clock_offset {
            s.max_clock_offset_ms = duration_ms(&v).with_context(|| {
                format!("node.max_clock_offset = {v:?}: use e.g. \"500ms\", \"2s\"")
            })?;
        }
        if let Some(v) = n.proto_max_bulk_len {
            s.proto_max_bulk_len = v.0 as usize;
        }
        if let Some(v) = n.client_query_buffer_limit {
            s.client_query_buffer_limit = v.0 as usize;
        }
        if let Some(v) = n.log_memory {
            s.log_retain_bytes = Some(v.0 as usize);
        }
        if let Some(v) = n.tracking_table_max_keys {
            s.tracking_table_max_keys = v;
        }
        if let Some(v) = n.script_memory {
            s.script_memory = v.0 as usize;
        }
        if let Some(v) = n.enable_debug_command {
            s.enable_debug_command = v;
        }
        let site = self.site;
        if let Some(v) = site.id {
            if v == 0 {
                bail!("site.id must be in 1..=65535");
            }
            s.site_id = v;
        }
        if let Some(v) = site.name {
            s.site_name = v;
        }
        if let Some(v) = site.partitions {
            if !(1..=16384).contains(&v) {
                bail!("site.partitions must be in 1..=16384, got {v}");
            }
            s.partitions = v;
        }
        match (site.seeds, n.cluster_listen) {
            (None, None) => {}
            (None, Some(_)) => bail!("node.cluster_listen is set but site.seeds is not"),
            (Some(_), None) => bail!("site.seeds is set but node.cluster_listen is not"),
            (Some(seeds), Some(cluster_listen)) => {
                if seeds.is_empty() {
                    bail!("site.seeds is empty: list the site's first members (this node joins them if it is not one)");
                }
                check_secret("site.secret", &site.secret)?;
                let tls = peer_tls(
                    "site",
                    site.tls,
                    site.tls_cert_file.clone(),
                    site.tls_key_file.clone(),
                    site.tls_ca_cert_file.clone(),
                )?
                .map(|tls| cluster::auth::SiteTls {
                    tls,
                    site: s.site_name.clone(),
                });
                s.cluster = Some(cluster::ClusterSettings {
                    tls,
                    secret: site.secret.clone(),
                    cluster_listen,
                    seeds,
                    joined: None,
                    // Set from node.tls_listen once flags are applied.
                    tls_client_addr: None,
                    replicas: site.backups.unwrap_or(1),
                    replication: match site.replication.unwrap_or(ReplicationMode::Sync) {
                        ReplicationMode::Sync => cluster::Replication::Sync,
                        ReplicationMode::Async => cluster::Replication::Async,
                    },
                });
            }
        }
        if let Some(w) = self.wan {
            s.wan = Some(wan_settings(w, s)?);
        }
        if let Some(b) = self.backup {
            if let Some(v) = b.tracking_memory {
                s.changed_keys_bytes = v.0 as usize;
            }
            let allowed = match (&b.allowed_urls, &b.to) {
                (Some(list), _) => list.clone(),
                (None, to) => to.iter().cloned().collect(),
            };
            s.backup_allowed_urls = backup::AllowedUrls::new(&allowed)
                .map_err(|e| anyhow::anyhow!("backup.allowed_urls: {e}"))?;
            s.backup = backup_schedule(b)?;
        }
        Ok(())
    }
}

/// `node.tls_*` (or their flags): the TLS client port, when `tls_listen`
/// is set.
pub fn tls(
    listen: Option<SocketAddr>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    ca: Option<PathBuf>,
    auth: Option<String>,
) -> anyhow::Result<Option<server::tls::TlsSettings>> {
    let Some(listen) = listen else {
        if cert.is_some() || key.is_some() || ca.is_some() || auth.is_some() {
            bail!("node.tls_* is set but node.tls_listen is not");
        }
        return Ok(None);
    };
    let (Some(cert_file), Some(key_file)) = (cert, key) else {
        bail!("node.tls_listen needs node.tls_cert_file and node.tls_key_file");
    };
    let auth_clients = match auth.as_deref() {
        None => server::tls::AuthClients::Yes,
        Some(a) => server::tls::AuthClients::parse(a).with_context(|| {
            format!("node.tls_auth_clients {a:?}: not one of yes, optional, no")
        })?,
    };
    Ok(Some(server::tls::TlsSettings {
        listen,
        cert_file,
        key_file,
        ca_cert_file: ca,
        auth_clients,
    }))
}

/// `node.persistence`, `node.fsync` and `node.snapshot_every` (or their
/// flags) over `base`: "log" unless "off", once a data directory is given.
pub fn persistence(
    mode: Option<&str>,
    fsync: Option<&str>,
    snapshot_every: Option<u64>,
    dir_given: bool,
    base: server::Persistence,
) -> anyhow::Result<server::Persistence> {
    let fsync = match fsync {
        Some(f) => persist::Fsync::parse(f)
            .with_context(|| format!("node.fsync {f:?}: not one of always, everysec, no"))?,
        None => base.fsync,
    };
    let log = match mode {
        Some("off") => Some(false),
        Some("log") => Some(true),
        Some(m) => bail!("node.persistence {m:?}: not one of log, off"),
        None => base.log.or(dir_given.then_some(true)),
    };
    Ok(server::Persistence {
        log,
        fsync,
        snapshot_after_bytes: snapshot_every.unwrap_or(base.snapshot_after_bytes),
    })
}

/// An empty secret would be a secret everyone knows.
fn check_secret(key: &str, v: &Option<String>) -> anyhow::Result<()> {
    if v.as_deref() == Some("") {
        bail!("{key} is empty: leave it out, or give every node the same non-empty one");
    }
    Ok(())
}

/// `[section] tls = true` and its files: the link's mutual TLS, loaded
/// (an error names the key and the file).
fn peer_tls(
    section: &str,
    on: Option<bool>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    ca: Option<PathBuf>,
) -> anyhow::Result<Option<framing::tls::PeerTls>> {
    if on != Some(true) {
        if cert.is_some() || key.is_some() || ca.is_some() {
            bail!("{section}.tls_* files are set but {section}.tls is not true");
        }
        return Ok(None);
    }
    let need = |v: Option<PathBuf>, k: &str| {
        v.with_context(|| format!("{section}.tls = true needs {section}.{k}"))
    };
    let files = framing::tls::TlsFiles {
        cert_file: need(cert, "tls_cert_file")?,
        key_file: need(key, "tls_key_file")?,
        ca_cert_file: need(ca, "tls_ca_cert_file")?,
    };
    framing::tls::PeerTls::load(&files, section)
        .map(Some)
        .map_err(anyhow::Error::msg)
}

fn backup_schedule(b: BackupSection) -> anyhow::Result<Option<backup::schedule::Schedule>> {
    let every = |name: &str, v: Option<String>| -> anyhow::Result<Option<std::time::Duration>> {
        v.map(|v| {
            parse_duration(&v).with_context(|| {
                format!("backup.{name} = {v:?}: use e.g. \"90s\", \"15m\", \"1h\", \"7d\"")
            })
        })
        .transpose()
    };
    let full_every = every("full_every", b.full_every)?;
    let incremental_every = every("incremental_every", b.incremental_every)?;
    let Some(to) = b.to else {
        if full_every.is_some() || incremental_every.is_some() || b.keep_full.is_some() {
            bail!("backup: a schedule needs backup.to (where backups go)");
        }
        return Ok(None);
    };
    backup::Store::open(&to).map_err(|e| anyhow::anyhow!("backup.to: {e}"))?;
    let full_every = full_every.context("backup.to is set but backup.full_every is not")?;
    Ok(Some(backup::schedule::Schedule {
        to,
        full_every,
        incremental_every,
        keep_full: b.keep_full.unwrap_or(0),
    }))
}

/// `idle_poll_us`: polling longer than a millisecond only burns a core.
pub fn idle_poll(us: u64) -> anyhow::Result<std::time::Duration> {
    if us > 1000 {
        bail!("node.idle_poll_us must be in 0..=1000, got {us}");
    }
    Ok(std::time::Duration::from_micros(us))
}

/// "90s", "15m", "1h", "7d" (a number and one unit).
fn parse_duration(v: &str) -> anyhow::Result<std::time::Duration> {
    let ms = duration_ms(v)?;
    if ms == 0 {
        bail!("must be more than zero");
    }
    Ok(std::time::Duration::from_millis(ms))
}

/// "500ms", "90s", "15m", "1h", "7d" in milliseconds (0 allowed).
pub fn duration_ms(v: &str) -> anyhow::Result<u64> {
    let v = v.trim();
    let split = v.find(|c: char| !c.is_ascii_digit()).context("no unit")?;
    let n: u64 = v[..split].parse().context("not a number")?;
    let unit: u64 = match &v[split..] {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        u => bail!("unknown unit {u:?}"),
    };
    n.checked_mul(unit).context("too large")
}

fn wan_settings(w: WanSection, s: &NodeSettings) -> anyhow::Result<wan::WanSettings> {
    let mut names = std::collections::HashSet::new();
    for t in &w.targets {
        if t.name.is_empty()
            || !t
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            bail!(
                "wan.targets: name {:?} must be letters, digits, '-' or '_'",
                t.name
            );
        }
        if t.name == s.site_name {
            bail!(
                "wan.targets: {:?} is this site's own name (site.name)",
                t.name
            );
        }
        if !names.insert(t.name.clone()) {
            bail!("wan.targets: {:?} is listed twice", t.name);
        }
        if t.endpoints.is_empty() {
            bail!("wan.targets {:?}: endpoints is empty", t.name);
        }
    }
    check_secret("wan.secret", &w.secret)?;
    let tls = peer_tls(
        "wan",
        w.tls,
        w.tls_cert_file,
        w.tls_key_file,
        w.tls_ca_cert_file,
    )?;
    Ok(wan::WanSettings {
        listen: w.listen,
        secret: w.secret,
        tls,
        memory_budget: w.memory_budget.map_or(256 << 20, |v| v.0),
        disk_budget: w.disk_budget.map_or(10 << 30, |v| v.0),
        tombstone_memory: w.tombstone_memory.map_or(32 << 20, |v| v.0),
        targets: w
            .targets
            .into_iter()
            .map(|t| wan::TargetSettings {
                name: t.name,
                endpoints: t.endpoints,
                delta: t.delta.unwrap_or(true),
                ack: match t.ack.unwrap_or(AckMode::Pipelined) {
                    AckMode::Pipelined => wan::AckMode::Pipelined,
                    AckMode::OnApply => wan::AckMode::OnApply,
                },
            })
            .collect(),
        dir: s.data_dir.join("wan"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn persistence_is_on_with_a_data_dir_and_keeps_the_files_fsync() {
        let mut s = NodeSettings::default();
        let c: ConfigFile = toml::from_str("[node]\nfsync = \"always\"\n").unwrap();
        c.apply(&mut s).unwrap();
        assert!(!s.persistence.is_on(), "no data_dir yet");
        // The data directory from the command line, fsync from the file.
        s.persistence = persistence(None, None, None, true, s.persistence).unwrap();
        assert!(s.persistence.is_on());
        assert_eq!(s.persistence.fsync, persist::Fsync::Always);
        let c: ConfigFile =
            toml::from_str("[node]\ndata_dir = \"/d\"\npersistence = \"off\"\n").unwrap();
        let mut s = NodeSettings::default();
        c.apply(&mut s).unwrap();
        s.persistence = persistence(None, None, None, true, s.persistence).unwrap();
        assert!(!s.persistence.is_on(), "off stays off");
        let e = toml::from_str::<ConfigFile>("[node]\nfsync = \"sometimes\"\n")
            .unwrap()
            .apply(&mut NodeSettings::default())
            .unwrap_err();
        assert!(
            e.to_string().contains("not one of always, everysec, no"),
            "{e}"
        );
    }

    #[test]
    fn the_documented_example_parses() {
        let c: ConfigFile = toml::from_str(
            r#"
            [node]
            id = "n1"
            listen = "127.0.0.1:7001"
            admin_listen = "127.0.0.1:9001"
            data_dir = "/var/lib/deltagrid/n1"
            maxmemory = "4GiB"
            maxmemory_policy = "allkeys-lfu"
            maxmemory_samples = 10
            threads = 1
            [site]
            id = 1
            name = "london"
            partitions = 271
            "#,
        )
        .unwrap();
        let mut s = NodeSettings::default();
        c.apply(&mut s).unwrap();
        assert_eq!(s.maxmemory, 4 << 30);
        assert_eq!(s.maxmemory_policy, server::EvictionPolicy::AllKeysLfu);
        assert_eq!(s.maxmemory_samples, 10);
        assert_eq!(s.site_name, "london");
        assert_eq!(s.listen.port(), 7001);
        assert_eq!(s.threads, 1);
    }

    #[test]
    fn an_unknown_eviction_policy_is_refused_with_the_names() {
        let c: ConfigFile = toml::from_str("[node]\nmaxmemory_policy = \"lru\"\n").unwrap();
        let e = c
            .apply(&mut NodeSettings::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("allkeys-lru") && e.contains("\"lru\""), "{e}");
    }

    #[test]
    fn unknown_keys_are_named() {
        let e = toml::from_str::<ConfigFile>("[node]\nlisten_addr = \"x\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("listen_addr"), "{e}");
        let e = toml::from_str::<ConfigFile>("[nodes]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("nodes"), "{e}");
        let e = toml::from_str::<ConfigFile>("[node]\nmaxmemory = \"lots\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("lots"), "{e}");
    }

    #[test]
    fn idle_polling_is_set_in_microseconds_up_to_a_millisecond() {
        let mut s = NodeSettings::default();
        assert_eq!(s.idle_poll, server::settings::DEFAULT_IDLE_POLL);
        let c: ConfigFile = toml::from_str("[node]\nidle_poll_us = 0\n").unwrap();
        c.apply(&mut s).unwrap();
        assert!(s.idle_poll.is_zero());
        let c: ConfigFile = toml::from_str("[node]\nidle_poll_us = 200\n").unwrap();
        c.apply(&mut s).unwrap();
        assert_eq!(s.idle_poll, std::time::Duration::from_micros(200));
        let c: ConfigFile = toml::from_str("[node]\nidle_poll_us = 5000\n").unwrap();
        let e = c.apply(&mut s).unwrap_err().to_string();
        assert!(e.contains("idle_poll_us"), "{e}");
    }

    #[test]
    fn partitions_out_of_range_are_refused() {
        let c: ConfigFile = toml::from_str("[site]\npartitions = 20000\n").unwrap();
        assert!(c.apply(&mut NodeSettings::default()).is_err());
    }
}
