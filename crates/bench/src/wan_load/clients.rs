//! The clients of `deltagrid bench wan-load`: site 1's threads doing 50%
//! SET / 50% GET, site 2's threads doing GET only (in a child process, so
//! they can run in site 2's network namespace as Hazelcast's site-B clients
//! ran in site B), the preload, and the key-by-key comparison of the sites.
//!
//! Every client uses the redis crate's sync Redis Cluster client and sends
//! `pipeline` commands per round trip (a cluster pipeline: each command
//! goes to its key's primary).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context;
use rand::{Rng, RngCore, SeedableRng};

use crate::gemfire::placement::Placement;
use crate::gemfire::sites::Node;

pub fn key(i: usize) -> String {
    format!("key:{i:06}")
}

pub fn connect(urls: &[String]) -> anyhow::Result<redis::cluster::ClusterConnection> {
    Ok(redis::cluster::ClusterClient::new(urls.to_vec())?.get_connection()?)
}

pub fn site_urls(nodes: &[Node], site: usize) -> Vec<String> {
    nodes
        .iter()
        .filter(|n| n.site == site)
        .map(|n| format!("redis://{}/", n.client))
        .collect()
}

/// Writes every key once (random values), `chunk` per round trip.
pub fn preload(urls: &[String], keys: usize, value_bytes: usize, seed: u64) -> anyhow::Result<()> {
    let mut conn = connect(urls)?;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut value = vec![0u8; value_bytes];
    for start in (0..keys).step_by(1000) {
        let mut pipe = redis::cluster::cluster_pipe();
        for i in start..(start + 1000).min(keys) {
            rng.fill_bytes(&mut value);
            pipe.cmd("SET").arg(key(i)).arg(&value[..]).ignore();
        }
        pipe.query::<()>(&mut conn).context("preloading")?;
    }
    Ok(())
}

/// Counters shared by one site's client threads.
#[derive(Default)]
pub struct Counts {
    pub sets: AtomicU64,
    pub gets: AtomicU64,
    pub errors: AtomicU64,
}

impl Counts {
    pub fn ops(&self) -> u64 {
        self.sets.load(Ordering::Relaxed) + self.gets.load(Ordering::Relaxed)
    }
}

#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Mix {
    pub keys: usize,
    pub value_bytes: usize,
    pub pipeline: usize,
    /// Share of commands that are SETs (0.5 at site 1, 0 at site 2).
    pub set_share: f64,
    /// Commands per second over all threads (0: as fast as they go).
    pub rate: f64,
}

/// Runs `threads` client threads until `stop`; returns their handles.
pub fn spawn(
    urls: &[String],
    threads: usize,
    mix: Mix,
    seed: u64,
    stop: Arc<AtomicBool>,
    counts: Arc<Counts>,
) -> anyhow::Result<Vec<JoinHandle<()>>> {
    let mut handles = Vec::new();
    for k in 0..threads {
        let mut conn = connect(urls)?;
        let (urls, stop, counts) = (urls.to_vec(), stop.clone(), counts.clone());
        handles.push(std::thread::spawn(move || {
            let mut rng =
                rand::rngs::SmallRng::seed_from_u64(seed.wrapping_mul(1000).wrapping_add(k as u64));
            let mut value = vec![0u8; mix.value_bytes];
            // Paced: each round trip of `pipeline` commands has its slot.
            let per_batch = (mix.rate > 0.0)
                .then(|| Duration::from_secs_f64(mix.pipeline as f64 * threads as f64 / mix.rate));
            let mut next = std::time::Instant::now();
            while !stop.load(Ordering::Relaxed) {
                if let Some(d) = per_batch {
                    std::thread::sleep(next.saturating_duration_since(std::time::Instant::now()));
                    next += d;
                }
                let mut pipe = redis::cluster::cluster_pipe();
                let (mut sets, mut gets) = (0, 0);
                for _ in 0..mix.pipeline {
                    let i = rng.gen_range(0..mix.keys);
                    if rng.gen_bool(mix.set_share) {
                        rng.fill_bytes(&mut value);
                        pipe.cmd("SET").arg(key(i)).arg(&value[..]);
                        sets += 1;
                    } else {
                        pipe.cmd("GET").arg(key(i));
                        gets += 1;
                    }
                }
                if query(&pipe, &mut conn, &urls, &counts) {
                    counts.sets.fetch_add(sets, Ordering::Relaxed);
                    counts.gets.fetch_add(gets, Ordering::Relaxed);
                }
            }
        }));
    }
    Ok(handles)
}

/// Sends one pipeline; on an error counts it, waits 50 ms and reconnects.
fn query(
    pipe: &redis::cluster::ClusterPipeline,
    conn: &mut redis::cluster::ClusterConnection,
    urls: &[String],
    counts: &Counts,
) -> bool {
    if pipe.query::<Vec<redis::Value>>(conn).is_ok() {
        return true;
    }
    counts.errors.fetch_add(1, Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(50));
    if let Ok(c) = connect(urls) {
        *conn = c;
    }
    false
}

/// Site 2's readers, running in a child process (`bench wan-load
/// --reader-child`, under `ip netns exec` when site 2 has a namespace),
/// which reports its counts on stdout and stops when its stdin closes.
pub struct Readers {
    child: Child,
    stdin: Option<ChildStdin>,
    pub counts: Arc<Counts>,
    pump: Option<JoinHandle<()>>,
    /// CPU seconds the child used, read just before it was told to stop.
    pub cpu_seconds: f64,
}

/// Site 2's mirror writers (`wan-off-mirror`): this many threads SETting
/// values of this size, as many as site 1's clients SET so far.
#[derive(Clone, Copy, Debug)]
pub struct Mirror {
    pub threads: usize,
    pub value_bytes: usize,
}

impl Readers {
    pub fn start(
        nodes: &[Node],
        placement: &Placement,
        threads: usize,
        mix: Mix,
        mirror: Option<Mirror>,
    ) -> anyhow::Result<Readers> {
        let exe = std::env::current_exe()?;
        let mut cmd = placement.sites[1].command(&exe);
        cmd.args(["bench", "wan-load", "--reader-child", "--reader-urls"])
            .arg(site_urls(nodes, 2).join(","))
            .args([
                "--keys",
                &mix.keys.to_string(),
                "--site2-threads",
                &threads.to_string(),
            ])
            .args([
                "--pipeline",
                &mix.pipeline.to_string(),
                "--site2-rate",
                &mix.rate.to_string(),
            ]);
        if let Some(m) = mirror {
            cmd.args([
                "--mirror-threads",
                &m.threads.to_string(),
                "--value-bytes",
                &m.value_bytes.to_string(),
            ]);
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = cmd.spawn().context("starting site 2's readers")?;
        let stdout = child.stdout.take().context("reader stdout")?;
        let stdin = child.stdin.take();
        let counts = Arc::new(Counts::default());
        let c = counts.clone();
        let pump = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let f: Vec<u64> = line
                    .split_whitespace()
                    .filter_map(|w| w.parse().ok())
                    .collect();
                if let [gets, errors, sets] = f[..] {
                    c.gets.store(gets, Ordering::Relaxed);
                    c.errors.store(errors, Ordering::Relaxed);
                    c.sets.store(sets, Ordering::Relaxed);
                }
            }
        });
        Ok(Readers {
            child,
            stdin,
            counts,
            pump: Some(pump),
            cpu_seconds: 0.0,
        })
    }

    /// Lets the mirror writers SET up to `sets` values in all.
    pub fn mirror(&mut self, sets: u64) {
        if let Some(stdin) = self.stdin.as_mut() {
            let _ = writeln!(stdin, "mirror {sets}");
        }
    }

    /// Stops the readers; their counts are final afterwards.
    pub fn stop(&mut self) {
        if self.stdin.is_some() {
            self.cpu_seconds = super::probe::proc_cpu_seconds(self.child.id()).unwrap_or(0.0);
        }
        self.stdin.take();
        let _ = self.child.wait();
        if let Some(p) = self.pump.take() {
            let _ = p.join();
        }
    }
}

impl Drop for Readers {
    fn drop(&mut self) {
        if self.pump.is_some() {
            let _ = self.child.kill();
            self.stop();
        }
    }
}

/// The child's side: GETs (and mirrored SETs, told "mirror N" on stdin)
/// until stdin closes, printing "GETS ERRORS SETS" every 200 ms.
pub fn reader_child(
    urls: &str,
    threads: usize,
    keys: usize,
    pipeline: usize,
    rate: f64,
    mirror: Option<Mirror>,
) -> anyhow::Result<()> {
    let urls: Vec<String> = urls.split(',').map(str::to_string).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Counts::default());
    let mix = Mix {
        keys,
        value_bytes: 0,
        pipeline,
        set_share: 0.0,
        rate,
    };
    let mut handles = spawn(&urls, threads, mix, 99, stop.clone(), counts.clone())?;
    let allowed = Arc::new(AtomicU64::new(0));
    if let Some(m) = mirror {
        handles.extend(spawn_mirror(
            &urls,
            m,
            keys,
            pipeline,
            allowed.clone(),
            stop.clone(),
            counts.clone(),
        )?);
    }
    let s = stop.clone();
    std::thread::spawn(move || {
        let mut line = String::new();
        while std::io::stdin().read_line(&mut line).is_ok_and(|n| n > 0) {
            if let Some(n) = line
                .trim()
                .strip_prefix("mirror ")
                .and_then(|n| n.parse().ok())
            {
                allowed.store(n, Ordering::Relaxed);
            }
            line.clear();
        }
        s.store(true, Ordering::Relaxed);
    });
    let report = |counts: &Counts| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "{} {} {}",
            counts.gets.load(Ordering::Relaxed),
            counts.errors.load(Ordering::Relaxed),
            counts.sets.load(Ordering::Relaxed)
        );
        let _ = out.flush();
    };
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(200));
        report(&counts);
    }
    for h in handles {
        let _ = h.join();
    }
    report(&counts);
    Ok(())
}

/// Mirror writers: SET random keys to random values, `pipeline` per round
/// trip, while fewer than `allowed` were SET (site 1's clients' count, so
/// site 2 writes as much as WAN replication would make it apply).
fn spawn_mirror(
    urls: &[String],
    m: Mirror,
    keys: usize,
    pipeline: usize,
    allowed: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    counts: Arc<Counts>,
) -> anyhow::Result<Vec<JoinHandle<()>>> {
    let claimed = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for k in 0..m.threads {
        let mut conn = connect(urls)?;
        let (urls, allowed, claimed, stop, counts) = (
            urls.to_vec(),
            allowed.clone(),
            claimed.clone(),
            stop.clone(),
            counts.clone(),
        );
        handles.push(std::thread::spawn(move || {
            let mut rng = rand::rngs::SmallRng::seed_from_u64(7000 + k as u64);
            let mut value = vec![0u8; m.value_bytes];
            while !stop.load(Ordering::Relaxed) {
                let (limit, got) = (
                    allowed.load(Ordering::Relaxed),
                    claimed.load(Ordering::Relaxed),
                );
                if got >= limit {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
                let n = (limit - got).min(pipeline as u64);
                if claimed
                    .compare_exchange(got, got + n, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
                {
                    continue;
                }
                let mut pipe = redis::cluster::cluster_pipe();
                for _ in 0..n {
                    rng.fill_bytes(&mut value);
                    pipe.cmd("SET")
                        .arg(key(rng.gen_range(0..keys)))
                        .arg(&value[..]);
                }
                if query(&pipe, &mut conn, &urls, &counts) {
                    counts.sets.fetch_add(n, Ordering::Relaxed);
                }
            }
        }));
    }
    Ok(handles)
}

/// Keys whose values differ between the sites (a missing key counts), comparing every key.
pub fn differing(
    site1: &[String],
    site2: &[String],
    keys: usize,
) -> anyhow::Result<(usize, Vec<String>)> {
    let (mut a, mut b) = (connect(site1)?, connect(site2)?);
    let mut n = 0;
    let mut examples = Vec::new();
    for start in (0..keys).step_by(1000) {
        let range = start..(start + 1000).min(keys);
        let get =
            |conn: &mut redis::cluster::ClusterConnection| -> anyhow::Result<Vec<Option<Vec<u8>>>> {
                let mut pipe = redis::cluster::cluster_pipe();
                for i in range.clone() {
                    pipe.cmd("GET").arg(key(i));
                }
                Ok(pipe.query(conn)?)
            };
        let (x, y) = (get(&mut a)?, get(&mut b)?);
        for (i, (p, q)) in range.clone().zip(x.iter().zip(&y)) {
            if p != q || p.is_none() {
                n += 1;
                if examples.len() < 5 {
                    examples.push(key(i));
                }
            }
        }
    }
    Ok((n, examples))
}
