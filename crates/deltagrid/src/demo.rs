//! `deltagrid demo`: two sites of three nodes on loopback, replaying the
//! shape of GemFire's WAN delta experiment (REFERENCE.md, experiment 1).
//!
//! The demo starts the six nodes as child processes of this binary, creates
//! objects shaped like GemFire's (hash fields `payload` 10,240 bytes, `id`,
//! `count`, `timestamp`) at site 1, runs writer threads updating `count` and
//! `timestamp` through the Redis cluster client, first with `delta = false`
//! on the WAN target (full values, the GemFire baseline) and then with
//! `delta = true`, prints the same statistics as the blog's tables, checks
//! that both sites hold identical data, and exits 0 only if they do.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use rand::{Rng, RngCore, SeedableRng};
use redis::Commands;

use crate::cluster_cli::http_get;

#[derive(clap::Args)]
pub struct DemoArgs {
    /// Seconds each writer phase runs
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Objects created at site 1
    #[arg(long, default_value_t = 200)]
    objects: usize,
    /// Writer threads
    #[arg(long, default_value_t = 5)]
    writers: usize,
    /// Keep the nodes' data directories and logs (printed at the end)
    #[arg(long)]
    keep: bool,
}

const PAYLOAD: usize = 10_240;

struct Node {
    site: usize,
    id: String,
    port: u16,
    admin: String,
    child: Child,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Starts two sites of three nodes; each node lists the other site's three
/// WAN endpoints.
fn start_sites(dir: &Path, delta: bool) -> anyhow::Result<Vec<Node>> {
    let mut ports = Vec::new();
    for _ in 0..6 {
        ports.push((free_port()?, free_port()?, free_port()?, free_port()?));
    }
    let exe = std::env::current_exe().context("finding this binary")?;
    let mut nodes = Vec::new();
    for site in 1..=2usize {
        let mine = &ports[(site - 1) * 3..site * 3];
        let other = &ports[(2 - site) * 3..(3 - site) * 3];
        let seeds: Vec<String> = mine.iter().map(|p| format!("\"127.0.0.1:{}\"", p.2)).collect();
        let endpoints: Vec<String> = other.iter().map(|p| format!("\"127.0.0.1:{}\"", p.3)).collect();
        for (i, (port, admin, cluster, wan)) in mine.iter().enumerate() {
            let id = format!("s{site}n{}", i + 1);
            let node_dir = dir.join(&id);
            std::fs::create_dir_all(&node_dir)?;
            let config = format!(
                r#"[node]
id = "{id}"
listen = "127.0.0.1:{port}"
admin_listen = "127.0.0.1:{admin}"
cluster_listen = "127.0.0.1:{cluster}"
data_dir = "{data}"
[site]
id = {site}
name = "site{site}"
seeds = [{seeds}]
backups = 1
[wan]
listen = "127.0.0.1:{wan}"
[[wan.targets]]
name = "site{other_site}"
endpoints = [{endpoints}]
delta = {delta}
"#,
                data = node_dir.join("data").display(),
                seeds = seeds.join(", "),
                other_site = 3 - site,
                endpoints = endpoints.join(", "),
            );
            let cfg = node_dir.join("deltagrid.toml");
            std::fs::write(&cfg, config)?;
            let log = std::fs::File::create(node_dir.join("server.log"))?;
            let child = Command::new(&exe)
                .arg("server")
                .arg("--config")
                .arg(&cfg)
                .env("RUST_LOG", "warn")
                .stdout(Stdio::from(log.try_clone()?))
                .stderr(Stdio::from(log))
                .spawn()
                .context("starting a node")?;
            nodes.push(Node { site, id, port: *port, admin: format!("127.0.0.1:{admin}"), child });
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    for n in &nodes {
        loop {
            let ok = redis::Client::open(format!("redis://127.0.0.1:{}/", n.port))
                .and_then(|c| c.get_connection())
                .and_then(|mut c| redis::cmd("CLUSTER").arg("INFO").query::<String>(&mut c))
                .is_ok_and(|info| info.contains("cluster_state:ok"));
            if ok {
                break;
            }
            if Instant::now() > deadline {
                bail!("node {} did not join its site in 30 s (log: {})", n.id, dir.join(&n.id).join("server.log").display());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    Ok(nodes)
}

fn cluster(nodes: &[Node], site: usize) -> anyhow::Result<redis::cluster::ClusterConnection> {
    let urls: Vec<String> = nodes.iter().filter(|n| n.site == site).map(|n| format!("redis://127.0.0.1:{}/", n.port)).collect();
    Ok(redis::cluster::ClusterClient::new(urls)?.get_connection()?)
}

fn wan_status(n: &Node) -> serde_json::Value {
    http_get(&n.admin, "/wan/status").ok().and_then(|b| serde_json::from_str(&b).ok()).unwrap_or_default()
}

fn num(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// Per node: (bytes received from the other site, events queued, events
/// distributed, queue events) right now.
fn sample(nodes: &[Node]) -> Vec<(u64, u64, u64, u64)> {
    nodes
        .iter()
        .map(|n| {
            let s = wan_status(n);
            let received = s["sources"].as_array().into_iter().flatten().map(|x| num(&x["bytes_received"])).sum();
            let t = &s["targets"][0];
            (received, num(&t["events_queued"]), num(&t["events_distributed"]), num(&t["queue_events"]))
        })
        .collect()
}

/// Every object as both sites hold it: field -> value, per key.
fn contents(conn: &mut redis::cluster::ClusterConnection, objects: usize) -> anyhow::Result<Vec<BTreeMap<String, Vec<u8>>>> {
    (0..objects).map(|i| Ok(conn.hgetall(format!("object:{i}"))?)).collect()
}

struct PhaseResult {
    delta: bool,
    updates: Vec<u64>,
    seconds: f64,
    /// Per site-2 node: average and max bytes received per second.
    received: Vec<(String, f64, u64)>,
    /// Per site-1 node: events queued/s, distributed/s, max queue size.
    events: Vec<(String, f64, f64, u64)>,
    bytes_per_update: f64,
    identical: bool,
    keys: usize,
}

fn phase(args: &DemoArgs, dir: &Path, delta: bool) -> anyhow::Result<PhaseResult> {
    let nodes = start_sites(dir, delta)?;
    let mut site1 = cluster(&nodes, 1)?;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    for i in 0..args.objects {
        // Random bytes: a value that compresses is not what GemFire shipped.
        let mut payload = vec![0u8; PAYLOAD];
        rng.fill_bytes(&mut payload);
        let _: () = redis::cmd("HSET")
            .arg(format!("object:{i}"))
            .arg("payload")
            .arg(payload)
            .arg("id")
            .arg(i)
            .arg("count")
            .arg(0)
            .arg("timestamp")
            .arg(0)
            .query(&mut site1)?;
    }
    let mut site2 = cluster(&nodes, 2)?;
    wait_converged(&mut site1, &mut site2, args.objects, Duration::from_secs(30))?;

    let before = sample(&nodes);
    let stop = Arc::new(AtomicBool::new(false));
    let counters: Vec<Arc<AtomicU64>> = (0..args.writers).map(|_| Arc::new(AtomicU64::new(0))).collect();
    let mut writers = Vec::new();
    for (w, count) in counters.iter().enumerate() {
        let (stop, count) = (stop.clone(), count.clone());
        let mut conn = cluster(&nodes, 1)?;
        let objects = args.objects;
        writers.push(std::thread::spawn(move || -> anyhow::Result<()> {
            let mut rng = rand::rngs::SmallRng::seed_from_u64(w as u64);
            while !stop.load(Ordering::Relaxed) {
                let key = format!("object:{}", rng.gen_range(0..objects));
                let n = count.fetch_add(1, Ordering::Relaxed) + 1;
                let ts = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_millis() as u64;
                let _: () = redis::cmd("HSET").arg(&key).arg("count").arg(n).arg("timestamp").arg(ts).query(&mut conn)?;
            }
            Ok(())
        }));
    }
    // One sample per second for the per-second maxima.
    let started = Instant::now();
    let mut samples = vec![before.clone()];
    while started.elapsed() < Duration::from_secs(args.seconds) {
        std::thread::sleep(Duration::from_secs(1).min(Duration::from_secs(args.seconds).saturating_sub(started.elapsed())));
        samples.push(sample(&nodes));
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().map_err(|_| anyhow::anyhow!("writer thread panicked"))??;
    }
    let seconds = started.elapsed().as_secs_f64();
    let updates: Vec<u64> = counters.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    let identical = wait_converged(&mut site1, &mut site2, args.objects, Duration::from_secs(60)).is_ok();
    let after = sample(&nodes);
    samples.push(after.clone());

    let mut received = Vec::new();
    let mut events = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        let max_step = |f: fn(&(u64, u64, u64, u64)) -> u64| {
            samples.windows(2).map(|w| f(&w[1][i]).saturating_sub(f(&w[0][i]))).max().unwrap_or(0)
        };
        if n.site == 2 {
            let total = after[i].0 - before[i].0;
            received.push((n.id.clone(), total as f64 / seconds, max_step(|s| s.0)));
        } else {
            let queued = (after[i].1 - before[i].1) as f64 / seconds;
            let distributed = (after[i].2 - before[i].2) as f64 / seconds;
            let max_queue = samples.iter().map(|s| s[i].3).max().unwrap_or(0);
            events.push((n.id.clone(), queued, distributed, max_queue));
        }
    }
    let total_updates: u64 = updates.iter().sum();
    let total_received: u64 = nodes.iter().enumerate().filter(|(_, n)| n.site == 2).map(|(i, _)| after[i].0 - before[i].0).sum();
    let _ = &mut site2;
    Ok(PhaseResult {
        delta,
        updates,
        seconds,
        received,
        events,
        bytes_per_update: total_received as f64 / total_updates.max(1) as f64,
        identical,
        keys: args.objects,
    })
}

/// Polls until both sites return the same contents for every object.
fn wait_converged(
    a: &mut redis::cluster::ClusterConnection,
    b: &mut redis::cluster::ClusterConnection,
    objects: usize,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let (x, y) = (contents(a, objects)?, contents(b, objects)?);
        if x == y && x.iter().all(|h| h.len() == 4) {
            return Ok(());
        }
        if Instant::now() > deadline {
            let differ = x.iter().zip(&y).filter(|(p, q)| p != q).count();
            bail!("sites still differ in {differ} of {objects} objects after {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn print_phase(r: &PhaseResult) {
    println!();
    println!("== delta = {} ({:.1} s of updates) ==", r.delta, r.seconds);
    println!("{:<10} {:>22} {:>22}", "site-2 node", "bytes received/s avg", "bytes received/s max");
    for (id, avg, max) in &r.received {
        println!("{id:<10} {avg:>22.0} {max:>22}");
    }
    let total: u64 = r.updates.iter().sum();
    println!("{:<10} {:>22} {:>22}", "writer", "updates", "updates/s");
    for (i, u) in r.updates.iter().enumerate() {
        println!("{:<10} {u:>22} {:>22.0}", format!("thread {}", i + 1), *u as f64 / r.seconds);
    }
    println!("{:<10} {total:>22} {:>22.0}", "total", total as f64 / r.seconds);
    println!("{:<10} {:>22} {:>22} {:>16}", "site-1 node", "events queued/s", "events distributed/s", "max queue size");
    for (id, q, d, max) in &r.events {
        println!("{id:<10} {q:>22.0} {d:>22.0} {max:>16}");
    }
    println!("WAN bytes per update: {:.1}", r.bytes_per_update);
    println!(
        "both sites hold identical data ({} objects): {}",
        r.keys,
        if r.identical { "yes" } else { "NO" }
    );
}

pub fn run(args: &DemoArgs) -> anyhow::Result<()> {
    let dir: PathBuf = std::env::temp_dir().join(format!("deltagrid-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    println!(
        "deltagrid demo: 2 sites x 3 nodes on loopback, {} objects of {} B payload + id/count/timestamp, {} writers updating count+timestamp",
        args.objects, PAYLOAD, args.writers
    );
    let mut results = Vec::new();
    for delta in [false, true] {
        let r = phase(args, &dir.join(format!("delta-{delta}")), delta)?;
        print_phase(&r);
        results.push(r);
    }
    let (off, on) = (&results[0], &results[1]);
    let rate = |r: &PhaseResult| r.updates.iter().sum::<u64>() as f64 / r.seconds;
    println!();
    println!(
        "summary: bytes per update {:.0} (delta off) vs {:.1} (delta on), {:.0}x less; update rate {:.0}/s vs {:.0}/s",
        off.bytes_per_update,
        on.bytes_per_update,
        off.bytes_per_update / on.bytes_per_update.max(0.001),
        rate(off),
        rate(on),
    );
    if args.keep {
        println!("data and logs kept in {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    if !(off.identical && on.identical) {
        bail!("the sites did not converge");
    }
    Ok(())
}
