//! What `deltagrid bench wan-load` reads from the running sites: every
//! node's `/wan/status` (with short timeouts, so a node across a link that
//! is down costs nothing and keeps its last counters), the server
//! processes' memory and CPU from `/proc`, and the link itself (`ip link set
//! DEV down|up` for the outage).

use std::process::Command;

use anyhow::{bail, Context};

use crate::admin_http::{self, num};
use crate::gemfire::sites::Node;

/// One node's WAN counters and memory at one instant. Counters are the
/// sums over the node's targets (one here) and sources.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct NodeSample {
    /// `/wan/status` answered (false: counters are the previous sample's).
    pub ok: bool,
    pub state: String,
    pub connected: bool,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub events_queued: u64,
    pub events_distributed: u64,
    /// Batches the publishers sent.
    pub batches: u64,
    pub queue_events: u64,
    pub queue_bytes_primary: u64,
    pub queue_bytes_backup: u64,
    pub journal_bytes: u64,
    pub spilled_bytes: u64,
    pub lag_ms: u64,
    pub resyncs: u64,
    /// Batches sent and not yet applied, and the window (batches sent and
    /// not yet received) the publisher allows.
    pub in_flight: u64,
    pub window: u64,
    /// Receiver side (site 2): changes applied, and re-sent ones that changed nothing.
    pub applied: u64,
    pub duplicates: u64,
    /// VmRSS of the server process (KiB).
    pub rss_kib: u64,
}

/// POST /wan/{action}?target=NAME (the outage fallback without a link to cut).
pub fn wan_control(n: &Node, action: &str, target: &str) -> anyhow::Result<()> {
    let path = format!("/wan/{action}?target={target}");
    admin_http::request(n.admin, "POST", &path, admin_http::PATIENT).map(|_| ())
}

fn fetch(n: &Node, prev: &NodeSample) -> NodeSample {
    let rss_kib = proc_status_kib(n.pid(), "VmRSS").unwrap_or(0);
    let Some(s) = admin_http::wan_status(n.admin, admin_http::QUICK) else {
        return NodeSample {
            ok: false,
            connected: false,
            rss_kib,
            ..prev.clone()
        };
    };
    let mut out = NodeSample {
        ok: true,
        rss_kib,
        ..NodeSample::default()
    };
    for src in s["sources"].as_array().into_iter().flatten() {
        out.bytes_received += num(&src["bytes_received"]);
        out.applied += num(&src["applied"]);
        out.duplicates += num(&src["duplicates"]);
    }
    for t in s["targets"].as_array().into_iter().flatten() {
        out.state = t["state"].as_str().unwrap_or("").to_string();
        out.connected |= t["connected"].as_bool().unwrap_or(false);
        out.bytes_sent += num(&t["bytes_sent"]);
        out.events_queued += num(&t["events_queued"]);
        out.events_distributed += num(&t["events_distributed"]);
        out.batches += num(&t["batches"]);
        out.queue_events += num(&t["queue_events"]);
        out.queue_bytes_primary += num(&t["queue_bytes_primary"]);
        out.queue_bytes_backup += num(&t["queue_bytes_backup"]);
        out.journal_bytes += num(&t["journal_bytes"]);
        out.spilled_bytes += num(&t["spilled_bytes"]);
        out.lag_ms = out.lag_ms.max(num(&t["lag_ms"]));
        out.resyncs += num(&t["resyncs"]);
        out.in_flight += num(&t["in_flight"]);
        out.window += num(&t["window"]);
    }
    out
}

/// Every node, asked in parallel; a node that does not answer keeps `prev`'s counters.
pub fn sample(nodes: &[Node], prev: &[NodeSample]) -> Vec<NodeSample> {
    std::thread::scope(|s| {
        let asks: Vec<_> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let p = prev.get(i).cloned().unwrap_or_default();
                s.spawn(move || fetch(n, &p))
            })
            .collect();
        asks.into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    })
}

/// A `Vm*:` line of `/proc/<pid>/status`, in KiB.
pub fn proc_status_kib(pid: u32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(field).and_then(|r| r.strip_prefix(':')))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// CPU seconds (user + system) a process has used.
pub fn proc_cpu_seconds(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the ")" that ends the command name: state is field 3, utime 14, stime 15.
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / clock_ticks() as f64)
}

/// Seconds of CPU time the hypervisor gave to others, all CPUs together
/// (the `steal` column of /proc/stat's `cpu` line).
pub fn steal_seconds() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/stat").ok()?;
    let line = s.lines().find(|l| l.starts_with("cpu "))?;
    let steal: u64 = line.split_whitespace().nth(8)?.parse().ok()?;
    Some(steal as f64 / clock_ticks() as f64)
}

fn clock_ticks() -> u64 {
    static TCK: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TCK.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100)
    })
}

/// How the outage is made.
#[derive(Clone, Debug, serde::Serialize)]
pub enum OutageMethod {
    /// `ip [-n NETNS] link set DEV down` ... `up`.
    Link { dev: String, netns: Option<String> },
    /// No link to cut (loopback): `wan pause` / `wan resume` on site 1's
    /// publishers, which queue but send nothing. Not a network outage.
    Pause,
}

impl OutageMethod {
    pub fn describe(&self) -> String {
        match self {
            OutageMethod::Link { dev, netns } => match netns {
                Some(ns) => format!("ip -n {ns} link set {dev} down ... up"),
                None => format!("ip link set {dev} down ... up"),
            },
            OutageMethod::Pause => {
                "wan pause ... resume on site 1's publishers (loopback: no link to cut)".into()
            }
        }
    }

    pub fn set(&self, nodes: &[Node], up: bool) -> anyhow::Result<()> {
        match self {
            OutageMethod::Link { dev, netns } => {
                let mut c = Command::new("ip");
                if let Some(ns) = netns {
                    c.args(["-n", ns]);
                }
                let out = c
                    .args(["link", "set", dev, if up { "up" } else { "down" }])
                    .output()
                    .context("running ip")?;
                if !out.status.success() {
                    bail!(
                        "ip link set {dev}: {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    );
                }
                Ok(())
            }
            OutageMethod::Pause => {
                for n in nodes.iter().filter(|n| n.site == 1) {
                    wan_control(n, if up { "resume" } else { "pause" }, "site2")?;
                }
                Ok(())
            }
        }
    }
}
