//! GemFire's WAN delta workload (REFERENCE.md, experiment 1), shared by
//! `deltagrid demo` and `deltagrid bench wan-delta`.
//!
//! One phase: start two sites of three nodes (`sites`), create objects
//! shaped like GemFire's at site 1 (hash fields `payload` of 10,240 random
//! bytes, `id`, `count`, `timestamp`), wait until site 2 holds them, then run
//! writer threads updating `count` and `timestamp` through the Redis Cluster
//! client for the given time while sampling every node's WAN counters once a
//! second, wait until site 2 has caught up, and check that both sites hold
//! identical data (`converge`). `summary` makes the blog's statistics of the
//! samples and `report` prints them as the blog's tables; `off_then_on` runs
//! the experiment: a phase with full values, then one with deltas.
//!
//! With `Workload::blob` the objects are strings instead, serialized as a
//! client library would (fixed-width `id`, `count`, `timestamp`, then the
//! payload), and every update SETs the whole serialized object: the node
//! finds the changed bytes itself (automatic deltas, no delta code in the
//! client, unlike GemFire's `Delta` interface).

mod converge;
pub mod placement;
pub mod report;
pub mod sites;
mod summary;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, RngCore, SeedableRng};

use converge::{drained, wait_identical};
pub use placement::Placement;
pub use sites::NodeCounters;
use sites::{cluster, sample, start_sites};
use summary::summarize;

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

/// The experiment: a phase with full values (`delta = false`), then one
/// with deltas, each printed as the blog's tables and handed to `after`,
/// then the one-line comparison of the two. Node data and logs go under
/// `dir/delta-false` and `dir/delta-true`.
pub fn off_then_on(
    w: &Workload,
    placement: &Placement,
    dir: &Path,
    mut after: impl FnMut(&PhaseResult),
) -> anyhow::Result<[PhaseResult; 2]> {
    let mut run = |delta: bool| -> anyhow::Result<PhaseResult> {
        let r = phase(w, placement, &dir.join(format!("delta-{delta}")), delta)?;
        report::print_phase(&r);
        after(&r);
        Ok(r)
    };
    let (off, on) = (run(false)?, run(true)?);
    report::print_summary(&off, &on);
    Ok([off, on])
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
