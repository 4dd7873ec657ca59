//! The two sites of the WAN experiments (GemFire's workload, and
//! `wan_load`'s with `SiteOptions`): six `deltagrid server` child
//! processes (three per site), each on the address its site is placed at,
//! optionally inside a network namespace (`ip netns exec NS`), and what the
//! workload reads from them: Redis Cluster connections and `/wan/status`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::placement::Placement;
use crate::admin_http::{self, num};

/// One `deltagrid server` child process of a site; dropping it kills it.
pub struct Node {
    pub site: usize,
    pub id: String,
    pub client: SocketAddr,
    pub admin: SocketAddr,
    child: Child,
}

impl Node {
    /// The server's process id (`ip netns exec` execs in place, so this is
    /// the server itself, for `/proc/<pid>/status`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Counters of one node's `/wan/status` at one instant.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct NodeCounters {
    /// Bytes received from the other site (all sources).
    pub received: u64,
    /// Events queued / distributed by the publisher to the other site.
    pub queued: u64,
    pub distributed: u64,
    /// Publisher queue size (log entries not yet applied by the other site).
    pub queue: u64,
}

/// `n` distinct ports free on `ip` right now, from below the kernel's
/// ephemeral range (as tests/python/ports.py): ports are chosen for both
/// sites before any node starts, and the first nodes' outgoing connections
/// (to each other, and to the other site's WAN ports) take their local
/// ports from that range, so a port the kernel handed out for binding could
/// be someone's by the time its node binds it ("Address already in use",
/// seen once in session 29). When `ip` is not an address of this namespace
/// (the other site's namespace), ports free on loopback here are used: that
/// namespace is fresh and holds nothing else.
fn free_ports(ip: IpAddr, n: usize) -> anyhow::Result<Vec<u16>> {
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768)
        .max(10_001);
    let mut rng = rand::thread_rng();
    let mut held: Vec<TcpListener> = Vec::new();
    for _ in 0..10_000 {
        if held.len() == n {
            break;
        }
        let port = rand::Rng::gen_range(&mut rng, 10_000..low);
        // A port already held on `ip` would bind again on loopback below:
        // the same port twice (listen = cluster_listen, CI stop 48).
        if held
            .iter()
            .any(|l| l.local_addr().map(|a| a.port()).ok() == Some(port))
        {
            continue;
        }
        if let Ok(l) = TcpListener::bind((ip, port))
            .or_else(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, port)))
        {
            held.push(l);
        }
    }
    anyhow::ensure!(held.len() == n, "no {n} free ports between 10000 and {low}");
    held.iter().map(|l| Ok(l.local_addr()?.port())).collect()
}

fn quoted(addrs: impl Iterator<Item = SocketAddr>) -> String {
    addrs
        .map(|a| format!("\"{a}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How `start_sites_with` configures the nodes beyond placement: the WAN
/// delta setting, and (for `deltagrid bench wan-load`) the partition count,
/// the ack mode, the WAN memory/disk budgets, or no WAN at all.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct SiteOptions {
    /// `wan.targets.delta`.
    pub delta: bool,
    /// `site.partitions` (None: the server's default, 271).
    pub partitions: Option<u16>,
    /// `wan.targets.ack`: "pipelined" or "on-apply" (None: the server's default).
    pub ack: Option<String>,
    /// `wan.memory_budget` / `wan.disk_budget`, e.g. "64MiB" (None: defaults).
    pub memory_budget: Option<String>,
    pub disk_budget: Option<String>,
    /// No `[wan]` section: the sites do not replicate to each other.
    pub wan_off: bool,
}

/// Starts two sites of three nodes; each node lists the other site's three
/// WAN endpoints with `delta` as given. Returns once every node reports
/// `cluster_state:ok`.
pub fn start_sites(dir: &Path, delta: bool, placement: &Placement) -> anyhow::Result<Vec<Node>> {
    start_sites_with(
        dir,
        &SiteOptions {
            delta,
            ..SiteOptions::default()
        },
        placement,
    )
}

/// `start_sites` with every option of `SiteOptions`.
pub fn start_sites_with(
    dir: &Path,
    opts: &SiteOptions,
    placement: &Placement,
) -> anyhow::Result<Vec<Node>> {
    let delta = opts.delta;
    // Per site, per node: (client, admin, cluster, wan).
    let mut addrs = Vec::new();
    for p in &placement.sites {
        let ports = free_ports(p.ip, 12)?;
        let a: Vec<[SocketAddr; 4]> = ports
            .chunks(4)
            .map(|c| [0, 1, 2, 3].map(|k| SocketAddr::new(p.ip, c[k])))
            .collect();
        addrs.push(a);
    }
    let exe = std::env::current_exe().context("finding this binary")?;
    let mut nodes = Vec::new();
    for site in 1..=2usize {
        let mine = &addrs[site - 1];
        let other = &addrs[2 - site];
        let seeds = quoted(mine.iter().map(|a| a[2]));
        let endpoints = quoted(other.iter().map(|a| a[3]));
        for (i, [client, admin, cluster, wan]) in mine.iter().enumerate() {
            let id = format!("s{site}n{}", i + 1);
            let node_dir = dir.join(&id);
            std::fs::create_dir_all(&node_dir)?;
            let mut config = format!(
                r#"[node]
id = "{id}"
listen = "{client}"
admin_listen = "{admin}"
cluster_listen = "{cluster}"
data_dir = "{data}"
persistence = "off"
# Network namespaces of this machine (bench/netns.sh): no passwords.
protected_mode = false
[site]
id = {site}
name = "site{site}"
seeds = [{seeds}]
backups = 1
"#,
                data = node_dir.join("data").display(),
            );
            if let Some(p) = opts.partitions {
                config.push_str(&format!("partitions = {p}\n"));
            }
            if !opts.wan_off {
                config.push_str(&format!("[wan]\nlisten = \"{wan}\"\n"));
                if let Some(b) = &opts.memory_budget {
                    config.push_str(&format!("memory_budget = \"{b}\"\n"));
                }
                if let Some(b) = &opts.disk_budget {
                    config.push_str(&format!("disk_budget = \"{b}\"\n"));
                }
                config.push_str(&format!(
                    "[[wan.targets]]\nname = \"site{other_site}\"\nendpoints = [{endpoints}]\ndelta = {delta}\n",
                    other_site = 3 - site,
                ));
                if let Some(a) = &opts.ack {
                    config.push_str(&format!("ack = \"{a}\"\n"));
                }
            }
            let cfg = node_dir.join("deltagrid.toml");
            std::fs::write(&cfg, config)?;
            let log = std::fs::File::create(node_dir.join("server.log"))?;
            // `ip netns exec` and `taskset` exec the command in place:
            // killing the child kills the server.
            let mut cmd = placement.sites[site - 1].command(&exe);
            let child = cmd
                .arg("server")
                .arg("--config")
                .arg(&cfg)
                // Membership and table changes too: enough to tell why a
                // site did not form.
                .env("RUST_LOG", "warn,cluster=info")
                .stdout(Stdio::from(log.try_clone()?))
                .stderr(Stdio::from(log))
                .spawn()
                .context("starting a node")?;
            nodes.push(Node {
                site,
                id,
                client: *client,
                admin: *admin,
                child,
            });
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    for n in &mut nodes {
        loop {
            let info = redis::Client::open(format!("redis://{}/", n.client))
                .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
                .and_then(|mut c| redis::cmd("CLUSTER").arg("INFO").query::<String>(&mut c));
            if info
                .as_ref()
                .is_ok_and(|info| info.contains("cluster_state:ok"))
            {
                break;
            }
            let log = dir.join(&n.id).join("server.log");
            if let Some(status) = n.child.try_wait()? {
                bail!(
                    "node {} exited ({status}) before joining its site (log: {})",
                    n.id,
                    log.display()
                );
            }
            if Instant::now() > deadline {
                let last = match &info {
                    Ok(info) => info.lines().take(4).collect::<Vec<_>>().join(", "),
                    Err(e) => e.to_string(),
                };
                bail!(
                    "node {} did not join its site in 30 s (CLUSTER INFO: {last}; log: {})",
                    n.id,
                    log.display()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    Ok(nodes)
}

/// A Redis Cluster connection to `site`'s nodes.
pub fn cluster(nodes: &[Node], site: usize) -> anyhow::Result<redis::cluster::ClusterConnection> {
    let urls: Vec<String> = nodes
        .iter()
        .filter(|n| n.site == site)
        .map(|n| format!("redis://{}/", n.client))
        .collect();
    Ok(redis::cluster::ClusterClient::new(urls)?.get_connection()?)
}

fn counters(n: &Node) -> NodeCounters {
    let s = admin_http::wan_status(n.admin, admin_http::PATIENT).unwrap_or_default();
    let received = s["sources"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|x| num(&x["bytes_received"]))
        .sum();
    let t = &s["targets"][0];
    NodeCounters {
        received,
        queued: num(&t["events_queued"]),
        distributed: num(&t["events_distributed"]),
        queue: num(&t["queue_events"]),
    }
}

/// Every node's counters, asked in parallel (a remote site is a round trip away).
pub fn sample(nodes: &[Node]) -> Vec<NodeCounters> {
    std::thread::scope(|s| {
        let asks: Vec<_> = nodes.iter().map(|n| s.spawn(move || counters(n))).collect();
        asks.into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    })
}
