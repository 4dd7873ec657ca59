//! GemFire's WAN delta workload (REFERENCE.md, experiment 1), shared by
//! `deltagrid demo` and `deltagrid bench wan-delta`.
//!
//! One phase: start two sites of three nodes (`sites`), create objects
//! shaped like GemFire's at site 1 (hash fields `payload` of 10,240 random
//! bytes, `id`, `count`, `timestamp`), wait until site 2 holds them, then run
//! writer threads updating `count` and `timestamp` through the Redis Cluster
//! client for the given time while sampling every node's WAN counters once a
//! second, wait until site 2 has caught up, and check that both sites hold
//! identical data. `report` prints the result as the blog's tables.
//!
//! With `Workload::blob` the objects are strings instead, serialized as a
//! client library would (fixed-width `id`, `count`, `timestamp`, then the
//! payload), and every update SETs the whole serialized object: the node
//! finds the changed bytes itself (automatic deltas, no delta code in the
//! client, unlike GemFire's `Delta` interface).

pub mod report;
pub mod sites;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use rand::{Rng, RngCore, SeedableRng};

use sites::{cluster, sample, start_sites, Node};
pub use sites::{NodeCounters, Placement};

/// Bytes of each object's `payload` field (GemFire's byte array).
pub const PAYLOAD: usize = 10_240;

/// How much work one phase does.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Workload {
    pub objects: usize,
    pub writers: usize,
    /// Seconds the writers run.
    pub seconds: u64,
    /// Objects are whole serialized strings, updated by SET.
    pub blob: bool,
}

/// An object serialized as one string: fixed-width fields, then the payload.
pub fn serialize(id: usize, count: u64, timestamp: u64, payload: &[u8]) -> Vec<u8> {
    let mut out =
        format!("id={id:010};count={count:020};timestamp={timestamp:020};payload=").into_bytes();
    out.extend_from_slice(payload);
    out
}

/// Every node's counters at `t` seconds after the writers started (negative:
/// before; after `seconds`: the writers have stopped and site 2 catches up).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Sample {
    pub t: f64,
    /// Updates done by all writers so far.
    pub updates: u64,
    pub writing: bool,
    /// In the order of `PhaseResult::nodes`.
    pub nodes: Vec<NodeCounters>,
}

/// Per site-1 node (sender): averages over the writing period.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SenderStats {
    pub node: String,
    pub queued_per_s: f64,
    pub distributed_per_s: f64,
    pub queue_avg: f64,
    pub queue_max: u64,
}

/// Per site-2 node (receiver): bytes received per second.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ReceiverStats {
    pub node: String,
    /// Over the writing period.
    pub avg_per_s: f64,
    /// Highest one-second interval, catching up included.
    pub max_per_s: f64,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct PhaseResult {
    pub delta: bool,
    /// Objects were serialized strings updated by SET.
    pub blob: bool,
    /// Updates per writer thread.
    pub updates: Vec<u64>,
    /// Seconds the writers ran.
    pub seconds: f64,
    /// Seconds from the writers stopping until site 2 held every update
    /// (seen at the once-a-second samples, so rounded up to one).
    pub catch_up_seconds: f64,
    pub received: Vec<ReceiverStats>,
    pub events: Vec<SenderStats>,
    /// Bytes site 2 received from the writers' start until it caught up,
    /// divided by the updates made.
    pub bytes_received: u64,
    pub bytes_per_update: f64,
    pub identical: bool,
    pub keys: usize,
    /// (site, node id), the order of every sample's counters.
    pub nodes: Vec<(usize, String)>,
    pub samples: Vec<Sample>,
}

impl PhaseResult {
    pub fn total_updates(&self) -> u64 {
        self.updates.iter().sum()
    }

    pub fn update_rate(&self) -> f64 {
        self.total_updates() as f64 / self.seconds
    }
}

/// Runs one phase with `delta` on every WAN target; node data and logs go under `dir`.
pub fn phase(
    w: &Workload,
    placement: &Placement,
    dir: &Path,
    delta: bool,
) -> anyhow::Result<PhaseResult> {
    let nodes = start_sites(dir, delta, placement)?;
    let mut site1 = cluster(&nodes, 1)?;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    // The blob writers hold their objects, as GemFire's clients did.
    let mut payloads = Vec::new();
    for i in 0..w.objects {
        // Random bytes: a value that compresses is not what GemFire shipped.
        let mut payload = vec![0u8; PAYLOAD];
        rng.fill_bytes(&mut payload);
        if w.blob {
            let _: () = redis::cmd("SET")
                .arg(format!("object:{i}"))
                .arg(serialize(i, 0, 0, &payload))
                .query(&mut site1)?;
            payloads.push(payload);
            continue;
        }
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
    let payloads = Arc::new(payloads);
    let mut site2 = cluster(&nodes, 2)?;
    let load_timeout = Duration::from_secs(60);
    drained(&nodes, load_timeout, Instant::now(), |_| {})?;
    wait_identical(&mut site1, &mut site2, w, load_timeout)?;

    let stop = Arc::new(AtomicBool::new(false));
    let counters: Vec<Arc<AtomicU64>> = (0..w.writers)
        .map(|_| Arc::new(AtomicU64::new(0)))
        .collect();
    let updates_now = || {
        counters
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum::<u64>()
    };
    let mut writers = Vec::new();
    let mut samples = vec![Sample {
        t: 0.0,
        updates: 0,
        writing: true,
        nodes: sample(&nodes),
    }];
    let started = Instant::now();
    for (k, count) in counters.iter().enumerate() {
        let (stop, count) = (stop.clone(), count.clone());
        let mut conn = cluster(&nodes, 1)?;
        let (objects, blob, payloads) = (w.objects, w.blob, payloads.clone());
        writers.push(std::thread::spawn(move || -> anyhow::Result<()> {
            let mut rng = rand::rngs::SmallRng::seed_from_u64(k as u64);
            while !stop.load(Ordering::Relaxed) {
                let i = rng.gen_range(0..objects);
                let key = format!("object:{i}");
                let n = count.fetch_add(1, Ordering::Relaxed) + 1;
                let ts = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)?
                    .as_millis() as u64;
                if blob {
                    let _: () = redis::cmd("SET")
                        .arg(&key)
                        .arg(serialize(i, n, ts, &payloads[i]))
                        .query(&mut conn)?;
                } else {
                    let _: () = redis::cmd("HSET")
                        .arg(&key)
                        .arg("count")
                        .arg(n)
                        .arg("timestamp")
                        .arg(ts)
                        .query(&mut conn)?;
                }
            }
            Ok(())
        }));
    }
    // One sample per second, on the second.
    let run = Duration::from_secs(w.seconds);
    for k in 1..=w.seconds {
        let at = started + Duration::from_secs(k);
        std::thread::sleep(at.saturating_duration_since(Instant::now()));
        let updates = updates_now();
        let t = started.elapsed().as_secs_f64();
        samples.push(Sample {
            t,
            updates,
            writing: true,
            nodes: sample(&nodes),
        });
    }
    stop.store(true, Ordering::Relaxed);
    for h in writers {
        h.join()
            .map_err(|_| anyhow::anyhow!("writer thread panicked"))??;
    }
    let seconds = started.elapsed().as_secs_f64().max(run.as_secs_f64());
    let updates: Vec<u64> = counters.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    let total_updates: u64 = updates.iter().sum();

    // Catching up: keep sampling, still once a second on the second, until
    // no site-1 publisher has anything queued.
    let catch_up_timeout = Duration::from_secs(60.max(3 * w.seconds));
    let stopped = Instant::now();
    let caught_up = drained(
        &nodes,
        catch_up_timeout,
        started + run + Duration::from_secs(1),
        |nodes| {
            let t = started.elapsed().as_secs_f64();
            samples.push(Sample {
                t,
                updates: total_updates,
                writing: false,
                nodes,
            });
        },
    );
    let catch_up_seconds = stopped.elapsed().as_secs_f64();
    let identical = caught_up.is_ok()
        && wait_identical(&mut site1, &mut site2, w, Duration::from_secs(30)).is_ok();
    let t = started.elapsed().as_secs_f64();
    samples.push(Sample {
        t,
        updates: total_updates,
        writing: false,
        nodes: sample(&nodes),
    });

    let mut r = summarize(
        &nodes,
        delta,
        updates,
        seconds,
        catch_up_seconds,
        samples,
        identical,
        w.objects,
    );
    r.blob = w.blob;
    Ok(r)
}

#[allow(clippy::too_many_arguments)]
fn summarize(
    nodes: &[Node],
    delta: bool,
    updates: Vec<u64>,
    seconds: f64,
    catch_up_seconds: f64,
    samples: Vec<Sample>,
    identical: bool,
    keys: usize,
) -> PhaseResult {
    let (first, last) = (&samples[0], &samples[samples.len() - 1]);
    let writing: Vec<&Sample> = samples.iter().filter(|s| s.writing).collect();
    let end = writing[writing.len() - 1];
    let span = (end.t - first.t).max(1e-9);
    let mut received = Vec::new();
    let mut events = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        if n.site == 2 {
            let max_per_s = samples
                .windows(2)
                .map(|w| {
                    w[1].nodes[i]
                        .received
                        .saturating_sub(w[0].nodes[i].received) as f64
                        / (w[1].t - w[0].t).max(1e-3)
                })
                .fold(0.0, f64::max);
            let during = end.nodes[i]
                .received
                .saturating_sub(first.nodes[i].received);
            received.push(ReceiverStats {
                node: n.id.clone(),
                avg_per_s: during as f64 / span,
                max_per_s,
            });
        } else {
            let rate = |f: fn(&NodeCounters) -> u64| {
                f(&end.nodes[i]).saturating_sub(f(&first.nodes[i])) as f64 / span
            };
            let queues: Vec<u64> = writing.iter().map(|s| s.nodes[i].queue).collect();
            events.push(SenderStats {
                node: n.id.clone(),
                queued_per_s: rate(|c| c.queued),
                distributed_per_s: rate(|c| c.distributed),
                queue_avg: queues.iter().sum::<u64>() as f64 / queues.len() as f64,
                queue_max: samples.iter().map(|s| s.nodes[i].queue).max().unwrap_or(0),
            });
        }
    }
    let site2 = |s: &Sample| {
        nodes
            .iter()
            .zip(&s.nodes)
            .filter(|(n, _)| n.site == 2)
            .map(|(_, c)| c.received)
            .sum::<u64>()
    };
    let bytes_received = site2(last) - site2(first);
    let total_updates: u64 = updates.iter().sum();
    PhaseResult {
        delta,
        blob: false,
        updates,
        seconds,
        catch_up_seconds,
        received,
        events,
        bytes_received,
        bytes_per_update: bytes_received as f64 / total_updates.max(1) as f64,
        identical,
        keys,
        nodes: nodes.iter().map(|n| (n.site, n.id.clone())).collect(),
        samples,
    }
}

/// Samples every node once a second from `first` on (handing each sample
/// to `each`) until no site-1 publisher has anything queued for site 2.
fn drained(
    nodes: &[Node],
    timeout: Duration,
    first: Instant,
    mut each: impl FnMut(Vec<NodeCounters>),
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    let mut next = first;
    loop {
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        next += Duration::from_secs(1);
        let now = sample(nodes);
        let queued: u64 = nodes
            .iter()
            .zip(&now)
            .filter(|(n, _)| n.site == 1)
            .map(|(_, c)| c.queue)
            .sum();
        each(now);
        if queued == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("site 1 still has {queued} events queued for site 2 after {timeout:?}");
        }
    }
}

/// Every object as a site holds it: field -> value, per key (a blob is
/// one field, ""), pipelined, so a remote site costs a few round trips, not
/// one per object.
fn contents(
    conn: &mut redis::cluster::ClusterConnection,
    w: &Workload,
) -> anyhow::Result<Vec<BTreeMap<String, Vec<u8>>>> {
    let mut all = Vec::with_capacity(w.objects);
    for chunk in (0..w.objects).collect::<Vec<_>>().chunks(200) {
        let mut pipe = redis::cluster::cluster_pipe();
        for i in chunk {
            pipe.cmd(if w.blob { "GET" } else { "HGETALL" })
                .arg(format!("object:{i}"));
        }
        if w.blob {
            let part: Vec<Option<Vec<u8>>> = pipe.query(conn)?;
            all.extend(part.into_iter().map(|v| {
                v.map(|v| BTreeMap::from([(String::new(), v)]))
                    .unwrap_or_default()
            }));
        } else {
            let part: Vec<BTreeMap<String, Vec<u8>>> = pipe.query(conn)?;
            all.extend(part);
        }
    }
    Ok(all)
}

/// Polls until both sites return the same contents for every object.
fn wait_identical(
    a: &mut redis::cluster::ClusterConnection,
    b: &mut redis::cluster::ClusterConnection,
    w: &Workload,
    timeout: Duration,
) -> anyhow::Result<()> {
    let (deadline, objects, fields) = (
        Instant::now() + timeout,
        w.objects,
        if w.blob { 1 } else { 4 },
    );
    loop {
        let (x, y) = (contents(a, w)?, contents(b, w)?);
        if x == y && x.iter().all(|h| h.len() == fields) {
            return Ok(());
        }
        if Instant::now() > deadline {
            let differ = x.iter().zip(&y).filter(|(p, q)| p != q).count();
            bail!("sites still differ in {differ} of {objects} objects after {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
