//! One run of `deltagrid bench wan-load`: start the two sites, preload
//! the key space, run both sites' clients while sampling every node four
//! times a second (a sample kept each second), cut the link and bring it
//! back in an outage run, wait until site 2 has caught up, compare the
//! sites key by key and read each server's peak memory and CPU.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;

use super::clients::{self, Counts, Mirror, Mix, Readers};
use super::probe::{self, NodeSample, OutageMethod};
use super::result::{site_idx, NodeEnd, OutageTimes, RunResult, Sample, BACKLOG_EVENTS};
use super::spec::{RunSpec, Settings};
use super::summary::{summarize, SummaryInput};
use crate::gemfire::placement::Placement;
use crate::gemfire::sites::{start_sites_with, Node, SiteOptions};

/// Every site-1 publisher has had every queued event applied.
fn drained(nodes: &[Node], now: &[NodeSample]) -> bool {
    nodes
        .iter()
        .zip(now)
        .filter(|(n, _)| n.site == 1)
        .all(|(_, c)| c.ok && c.events_distributed >= c.events_queued)
}

fn wait_drained(nodes: &[Node], timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    let mut prev = Vec::new();
    loop {
        prev = probe::sample(nodes, &prev);
        if drained(nodes, &prev) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("site 2 did not catch up with the preload in {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Runs `spec` with the sites under `dir`; `link_bps` is the link's rate
/// in this run, if known.
pub fn run_one(
    spec: &RunSpec,
    s: &Settings,
    placement: &Placement,
    outage: &OutageMethod,
    link_bps: Option<f64>,
    dir: &Path,
) -> anyhow::Result<RunResult> {
    let opts = SiteOptions {
        delta: true,
        partitions: Some(spec.partitions),
        ack: spec.ack.map(str::to_string),
        memory_budget: s.memory_budget.clone(),
        disk_budget: s.disk_budget.clone(),
        wan_off: !spec.wan,
    };
    let t_start = Instant::now();
    let nodes = start_sites_with(dir, &opts, placement)?;
    let startup_seconds = t_start.elapsed().as_secs_f64();
    let (u1, u2) = (clients::site_urls(&nodes, 1), clients::site_urls(&nodes, 2));
    let t_pre = Instant::now();
    clients::preload(&u1, s.keys, s.value_bytes, 1)?;
    if spec.wan {
        wait_drained(&nodes, Duration::from_secs(120))?;
    } else {
        clients::preload(&u2, s.keys, s.value_bytes, 2)?;
    }
    let preload_seconds = t_pre.elapsed().as_secs_f64();
    println!(
        "sites up in {startup_seconds:.1} s, {} keys preloaded{} in {preload_seconds:.1} s",
        s.keys,
        if spec.wan {
            " and replicated"
        } else {
            " at both sites"
        }
    );

    let stop = Arc::new(AtomicBool::new(false));
    let c1 = Arc::new(Counts::default());
    let mix = |set_share, rate| Mix {
        keys: s.keys,
        value_bytes: s.value_bytes,
        pipeline: s.pipeline,
        set_share,
        rate,
    };
    let mirror = spec.mirror.then_some(Mirror {
        threads: s.site1_threads,
        value_bytes: s.value_bytes,
    });
    let mut readers = Readers::start(
        &nodes,
        placement,
        s.site2_threads,
        mix(0.0, s.site2_rate),
        mirror,
    )?;
    let cpu_before = probe::proc_cpu_seconds(std::process::id()).unwrap_or(0.0);
    let site1_cpu = || -> f64 {
        nodes
            .iter()
            .filter(|n| n.site == 1)
            .map(|n| probe::proc_cpu_seconds(n.pid()).unwrap_or(0.0))
            .sum()
    };
    let site1_cpu_before = site1_cpu();
    let steal_before = probe::steal_seconds().unwrap_or(0.0);
    let writers = clients::spawn(
        &u1,
        s.site1_threads,
        mix(0.5, 0.0),
        1,
        stop.clone(),
        c1.clone(),
    )?;
    let (write_for, down_at, up_at) = if spec.outage {
        let down = (s.seconds / 2) as f64;
        (
            (s.seconds + s.outage_seconds) as f64,
            down,
            down + s.outage_seconds as f64,
        )
    } else {
        (s.seconds as f64, f64::MAX, f64::MAX)
    };
    let t0 = Instant::now();
    let now = || t0.elapsed().as_secs_f64();
    let mut prev = probe::sample(&nodes, &[]);
    let snap =
        |t: f64, writing: bool, link_up: bool, nodes_now: Vec<NodeSample>, r: &Readers| Sample {
            t,
            writing,
            link_up,
            site1_ops: c1.ops(),
            site1_sets: c1.sets.load(Ordering::Relaxed),
            site2_reads: r.counts.gets.load(Ordering::Relaxed),
            site2_sets: r.counts.sets.load(Ordering::Relaxed),
            client_errors: c1.errors.load(Ordering::Relaxed)
                + r.counts.errors.load(Ordering::Relaxed),
            nodes: nodes_now,
        };
    let mut samples = vec![snap(0.0, true, true, prev.clone(), &readers)];
    let tick = Duration::from_millis(250);
    let mut link_up = true;
    let (mut went_down, mut came_up) = (None, None);
    let mut k = 0u32;
    let mut outage_err = None;
    loop {
        k += 1;
        std::thread::sleep((t0 + tick * k).saturating_duration_since(Instant::now()));
        let t = f64::from(k) * 0.25;
        if link_up && went_down.is_none() && t >= down_at {
            if let Err(e) = outage.set(&nodes, false) {
                outage_err = Some(e);
                break;
            }
            link_up = false;
            went_down = Some(now());
            println!("t = {t:.1} s: link down ({})", outage.describe());
        }
        if !link_up && t >= up_at {
            if let Err(e) = outage.set(&nodes, true) {
                outage_err = Some(e);
                break;
            }
            link_up = true;
            came_up = Some(now());
            println!("t = {t:.1} s: link up");
        }
        if spec.mirror {
            readers.mirror(c1.sets.load(Ordering::Relaxed));
        }
        if k.is_multiple_of(4) {
            prev = probe::sample(&nodes, &prev);
            samples.push(snap(now(), true, link_up, prev.clone(), &readers));
        }
        if t >= write_for {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let write_seconds = now();
    for h in writers {
        let _ = h.join();
    }
    let site1_node_cpu = site1_cpu() - site1_cpu_before;
    let steal = probe::steal_seconds().unwrap_or(0.0) - steal_before;
    readers.stop();
    let client_cpu = [
        probe::proc_cpu_seconds(std::process::id()).unwrap_or(0.0) - cpu_before,
        readers.cpu_seconds,
    ];
    if let Some(e) = outage_err {
        if !link_up {
            let _ = outage.set(&nodes, true);
        }
        return Err(e.context("the outage"));
    }
    // Catching up: poll every 250 ms, keep a sample once a second.
    let stopped = Instant::now();
    let mut catch_up_seconds = None;
    if spec.wan {
        let timeout = Duration::from_secs(s.catch_up_timeout);
        let mut j = 0u32;
        loop {
            j += 1;
            std::thread::sleep((stopped + tick * j).saturating_duration_since(Instant::now()));
            prev = probe::sample(&nodes, &prev);
            let done = drained(&nodes, &prev);
            if done || j.is_multiple_of(4) {
                samples.push(snap(now(), false, true, prev.clone(), &readers));
            }
            if done {
                catch_up_seconds = Some(stopped.elapsed().as_secs_f64());
                break;
            }
            if stopped.elapsed() > timeout {
                println!("site 2 had not caught up {timeout:?} after the writers stopped");
                break;
            }
        }
    }
    let (keys_differing, differing_examples) = if spec.wan {
        let (n, ex) = clients::differing(&u1, &u2, s.keys)?;
        (Some(n), ex)
    } else {
        (None, Vec::new())
    };
    prev = probe::sample(&nodes, &prev);
    samples.push(snap(now(), false, true, prev.clone(), &readers));
    let node_end: Vec<NodeEnd> = nodes
        .iter()
        .map(|n| NodeEnd {
            node: n.id.clone(),
            site: n.site,
            peak_rss_kib: probe::proc_status_kib(n.pid(), "VmHWM").unwrap_or(0),
            cpu_seconds: probe::proc_cpu_seconds(n.pid()).unwrap_or(0.0),
        })
        .collect();
    let node_ids: Vec<(usize, String)> = nodes.iter().map(|n| (n.site, n.id.clone())).collect();
    drop(nodes);

    let outage_times = spec.outage.then(|| {
        let up = came_up.unwrap_or(up_at);
        let site1 = site_idx(&node_ids, 1);
        let after: Vec<&Sample> = samples.iter().filter(|x| x.t >= up).collect();
        let reconnected_after_s = after
            .iter()
            .find(|x| site1.iter().all(|&i| x.nodes[i].connected))
            .map(|x| x.t - up);
        // Back to what the queue held before the outage (at most twice its
        // highest, or BACKLOG_EVENTS / 10).
        let down = went_down.unwrap_or(down_at);
        let before = samples
            .iter()
            .filter(|x| x.t < down)
            .map(|x| site1.iter().map(|&i| x.nodes[i].queue_events).sum::<u64>())
            .max()
            .unwrap_or(0);
        let normal = (2 * before).max(BACKLOG_EVENTS / 10);
        let writing_catch_up = after
            .iter()
            .filter(|x| x.writing)
            .find(|x| {
                site1.iter().all(|&i| x.nodes[i].ok)
                    && site1.iter().map(|&i| x.nodes[i].queue_events).sum::<u64>() <= normal
            })
            .map(|x| x.t - up);
        let catch_up = writing_catch_up.or(catch_up_seconds.map(|c| write_seconds + c - up));
        OutageTimes {
            method: outage.describe(),
            down_at_s: went_down.unwrap_or(down_at),
            up_at_s: up,
            catch_up_seconds: catch_up,
            reconnected_after_s,
        }
    });
    Ok(summarize(SummaryInput {
        spec,
        s,
        link_bps,
        startup_seconds,
        preload_seconds,
        write_seconds,
        catch_up_seconds,
        outage: outage_times,
        keys_differing,
        differing_examples,
        node_end,
        client_cpu,
        site1_node_cpu,
        steal,
        nodes: node_ids,
        samples,
    }))
}
