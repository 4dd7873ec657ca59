//! `deltagrid bench wan-load`: Hazelcast's "WAN replication under load"
//! experiment (REFERENCE.md #2) at a scale that fits one machine.
//!
//! Two sites of three nodes (`backups = 1`), a key space of `--keys` values
//! of `--value-bytes` random bytes preloaded at site 1 (and replicated to
//! site 2). Site 1's client threads do 50% SET / 50% GET, site 2's 100% GET
//! (in a child process in site 2's namespace), for `--seconds` per run:
//!
//! - `wan-off`: no `[wan]` section (both sites preloaded directly): the
//!   client rate without WAN replication;
//! - `wan-off-mirror`: the same, and site 2's own writers SET as many
//!   values as site 1's clients have so far (told every 250 ms), so site
//!   2's CPUs are about as busy as when they apply site 1's changes: the
//!   baseline of the client-rate target, since both sites share one
//!   machine here and work on site 2's CPUs slows site 1's;
//! - `on-apply-271` and `pipelined-271`: the ack modes at 271 partitions;
//! - `pipelined-2048`, `-5120`, `-16384`: the partition count;
//! - `outage-271` (and `outage-N` for each of `--outage-partitions`):
//!   pipelined, with the link cut (`ip link set DEV down`) for
//!   `--outage-seconds` in the middle of a longer write phase.
//!
//! Each run samples every node's `/wan/status` once a second, waits after
//! the writers stop until every site-1 publisher's events were applied at
//! site 2, compares every key's value at both sites, and reads each
//! server's peak RSS (VmHWM). Tables go to stdout, every sample to
//! `wan_load.json` / `wan_load.csv` (`files`) for `bench/plot_wan_load.py`.
//!
//! Here: the options and the sequence of runs. A run (`spec`) is made by
//! `one_run` with `clients` and `probe` (what it reads from the sites),
//! summarized by `summary` into a `result`; `report` prints the tables,
//! `targets` judges the targets, `reference` sets Hazelcast's
//! findings beside ours, `link` knows the link's rate.

mod clients;
mod files;
mod link;
mod one_run;
mod probe;
mod reference;
mod report;
mod result;
mod spec;
mod summary;
mod targets;

use std::path::PathBuf;

use anyhow::{bail, Context};
use serde_json::json;

use crate::gemfire::placement::PlacementArgs;
use crate::result_files;
use clients::Mirror;
use link::{parse_rate, LinkRate};
use one_run::run_one;
use probe::OutageMethod;
use reference::{print_reference, reference};
use report::{print_run, print_table};
use result::BACKLOG_EVENTS;
use spec::{RunSpec, Settings};
use targets::{print_targets, targets};

/// `deltagrid bench wan-load`'s options.
#[derive(clap::Args)]
pub struct WanLoadArgs {
    /// Seconds of client load per run [default: 30; smoke: 3]
    #[arg(long)]
    seconds: Option<u64>,
    /// Seconds the link is down in the outage run, which writes for
    /// --seconds + this, the outage in the middle [default: 60; smoke: 1]
    #[arg(long)]
    outage_seconds: Option<u64>,
    /// Keys in the key space [default: 50000; smoke: 2000]
    #[arg(long)]
    keys: Option<usize>,
    /// Bytes of each (random) value (Hazelcast: ~0.7 KB entries)
    #[arg(long, default_value_t = 700)]
    value_bytes: usize,
    /// Client threads at site 1 (50% SET / 50% GET)
    #[arg(long, default_value_t = 4)]
    site1_threads: usize,
    /// Client threads at site 2 (100% GET)
    #[arg(long, default_value_t = 2)]
    site2_threads: usize,
    /// Commands per round trip of each client thread (a cluster pipeline)
    #[arg(long, default_value_t = 8)]
    pipeline: usize,
    /// Site 2's reads per second, all threads (0: unthrottled). Capped so
    /// that site 2's readers, which share the CPUs, load every run alike
    #[arg(long, default_value_t = 5000.0)]
    site2_rate: f64,
    /// Partition counts of the pipelined runs, comma-separated
    /// [default: 271,2048,5120,16384; smoke: 271,2048, which a debug build
    /// forms in time]
    #[arg(long, value_delimiter = ',')]
    partitions: Option<Vec<u16>>,
    /// Partition counts of the outage runs (pipelined), comma-separated;
    /// 271,16384 also compares how fast a backlog drains
    #[arg(long, default_value = "271", value_delimiter = ',')]
    outage_partitions: Vec<u16>,
    /// Only these runs (comma-separated names: wan-off, on-apply-271, pipelined-N, outage-N)
    #[arg(long, value_delimiter = ',')]
    runs: Vec<String>,
    /// Make the runs this many times, alternating (wan-off, pipelined-271,
    /// wan-off, ...): the client-rate target then compares each round's
    /// runs and takes the median, which a noisy machine needs
    #[arg(long, default_value_t = 1)]
    rounds: u32,
    /// wan.memory_budget per node for every WAN run, e.g. 64MiB (default: the server's, 256 MiB)
    #[arg(long)]
    memory_budget: Option<String>,
    /// wan.disk_budget per node (default: the server's, 10 GiB)
    #[arg(long)]
    disk_budget: Option<String>,
    /// Seconds to wait for site 2 to catch up after the writers stop [default: 180; smoke: 30]
    #[arg(long)]
    catch_up_timeout: Option<u64>,
    /// Directory for wan_load.json and wan_load.csv
    #[arg(long, default_value = "docs/bench")]
    out: PathBuf,
    /// ~3 s per run, 2,000 keys, 1 s outage: checks the harness, not the numbers
    #[arg(long)]
    smoke: bool,
    #[command(flatten)]
    placement: PlacementArgs,
    /// The link's rate per direction (e.g. 1gbit), for link utilization
    #[arg(long)]
    link_rate: Option<String>,
    /// The link's rate during the outage runs (e.g. 200mbit), set with
    /// --set-link-rate before each and set back to --link-rate after: a
    /// link narrower than the sites can fill, so draining the backlog shows
    /// whether the publishers fill it, while the other runs keep headroom
    /// (Hazelcast's 5 Gbps link carried at most ~1.5 Gbps)
    #[arg(long, requires_all = ["link_rate", "set_link_rate"])]
    drain_link_rate: Option<String>,
    /// Command that sets the link's rate, the rate appended as its last
    /// argument (e.g. "bash bench/netns.sh rate")
    #[arg(long)]
    set_link_rate: Option<String>,
    /// Interface to take down for the outage (e.g. veth_dg1); without it
    /// the outage run pauses site 1's publishers instead, and says so
    #[arg(long)]
    outage_dev: Option<String>,
    /// Namespace holding --outage-dev (ip -n NS link set ...)
    #[arg(long)]
    outage_netns: Option<String>,
    /// Keep the nodes' data directories and logs (printed at the end)
    #[arg(long)]
    keep: bool,
    /// Internal: run site 2's readers (the child process)
    #[arg(long, hide = true)]
    reader_child: bool,
    #[arg(long, hide = true)]
    reader_urls: Option<String>,
    /// Internal: the child's mirror writer threads (`wan-off-mirror`)
    #[arg(long, hide = true)]
    mirror_threads: Option<usize>,
}

/// Makes the runs (or, with `--reader-child`, is site 2's readers); an
/// error when a run lost events or the sites differ after catch-up.
pub fn run(args: &WanLoadArgs) -> anyhow::Result<()> {
    if args.reader_child {
        let urls = args
            .reader_urls
            .as_deref()
            .context("--reader-child needs --reader-urls")?;
        return clients::reader_child(
            urls,
            args.site2_threads,
            args.keys.unwrap_or(50_000),
            args.pipeline,
            args.site2_rate,
            args.mirror_threads.map(|threads| Mirror {
                threads,
                value_bytes: args.value_bytes,
            }),
        );
    }
    let smoke = args.smoke;
    let s = Settings {
        seconds: args.seconds.unwrap_or(if smoke { 3 } else { 30 }),
        outage_seconds: args.outage_seconds.unwrap_or(if smoke { 1 } else { 60 }),
        keys: args.keys.unwrap_or(if smoke { 2_000 } else { 50_000 }),
        value_bytes: args.value_bytes,
        site1_threads: args.site1_threads,
        site2_threads: args.site2_threads,
        pipeline: args.pipeline.max(1),
        site2_rate: args.site2_rate,
        memory_budget: args.memory_budget.clone(),
        disk_budget: args.disk_budget.clone(),
        catch_up_timeout: args
            .catch_up_timeout
            .unwrap_or(if smoke { 30 } else { 180 }),
        smoke,
    };
    let (placement, link) = args.placement.resolve();
    let link_bps = match &args.link_rate {
        Some(r) => Some(parse_rate(r).with_context(|| format!("--link-rate {r:?}"))?),
        None => None,
    };
    let drain = match (&args.drain_link_rate, &args.set_link_rate) {
        (Some(r), Some(cmd)) => Some(LinkRate {
            drain: r.clone(),
            drain_bps: parse_rate(r).with_context(|| format!("--drain-link-rate {r:?}"))?,
            normal: args.link_rate.clone().unwrap_or_default(),
            cmd: cmd.clone(),
        }),
        _ => None,
    };
    let outage = match &args.outage_dev {
        Some(dev) => OutageMethod::Link {
            dev: dev.clone(),
            netns: args.outage_netns.clone(),
        },
        None => OutageMethod::Pause,
    };
    // The default runs unless --runs names others (in the order given; any
    // partition count may be named: `wan-off-16384` is the client rate
    // without WAN at 16,384 partitions).
    let names: Vec<String> = if args.runs.is_empty() {
        let partitions = args.partitions.clone().unwrap_or_else(|| {
            if smoke {
                vec![271, 2048]
            } else {
                vec![271, 2048, 5120, 16384]
            }
        });
        [
            "wan-off".to_string(),
            "wan-off-mirror".to_string(),
            "on-apply-271".to_string(),
        ]
        .into_iter()
        .chain(partitions.iter().map(|p| format!("pipelined-{p}")))
        .chain(args.outage_partitions.iter().map(|p| format!("outage-{p}")))
        .collect()
    } else {
        args.runs.clone()
    };
    let specs: Vec<RunSpec> = names
        .iter()
        .map(|name| {
            RunSpec::parse(name).with_context(|| {
                format!("no run named {name:?} (wan-off[-N], wan-off-mirror[-N], on-apply-N, pipelined-N, outage-N)")
            })
        })
        .collect::<anyhow::Result<_>>()?;

    let date = result_files::utc_now();
    let dir = std::env::temp_dir().join(format!("deltagrid-bench-wan-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    println!(
        "deltagrid bench wan-load: 2 sites x 3 nodes (backups = 1), {} keys x {} B random values; site 1: {} threads 50% SET / 50% GET, site 2: {} threads GET ({}), {} commands per round trip; {} s per run{}",
        s.keys,
        s.value_bytes,
        s.site1_threads,
        s.site2_threads,
        if s.site2_rate > 0.0 { format!("{:.0}/s", s.site2_rate) } else { "unthrottled".into() },
        s.pipeline,
        s.seconds,
        if smoke { " (smoke run)" } else { "" }
    );
    for (i, p) in placement.sites.iter().enumerate() {
        println!("site {}: {}", i + 1, p.describe());
    }
    println!("link: {link}");
    println!(
        "outage run: {} s of writes, link down for {} s from t = {} s ({})",
        s.seconds + s.outage_seconds,
        s.outage_seconds,
        s.seconds / 2,
        outage.describe()
    );
    println!(
        "runs: {}",
        specs
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );

    let rounds = args.rounds.max(1);
    let mut results = Vec::new();
    for round in 1..=rounds {
        for spec in &specs {
            let name = if rounds > 1 {
                format!("{}#{round}", spec.name)
            } else {
                spec.name.clone()
            };
            println!();
            println!("== {name} ==");
            let narrowed = drain.as_ref().filter(|_| spec.outage);
            if let Some(d) = narrowed {
                d.set(&d.drain)?;
                println!(
                    "link rate for this run: {} (set with: {} {})",
                    d.drain, d.cmd, d.drain
                );
            }
            let run_bps = narrowed.map_or(link_bps, |d| Some(d.drain_bps));
            let r = run_one(spec, &s, &placement, &outage, run_bps, &dir.join(&name));
            if let Some(d) = narrowed {
                d.set(&d.normal)?;
            }
            let mut r = r.with_context(|| format!("run {name}"))?;
            r.name = name;
            r.round = round;
            print_run(&r, run_bps);
            results.push(r);
        }
    }
    println!();
    print_table(&results, link_bps);
    let targets = targets(&results);
    print_targets(&targets);
    let reference = reference(&results);
    print_reference(&reference);

    let doc = json!({
        "experiment": "WAN replication under load (Hazelcast 4.1 engineering report, REFERENCE.md #2)",
        "date": date,
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "machine": result_files::machine(),
        "settings": s,
        "placement": placement,
        "link": link,
        "link_rate_bytes_per_s": link_bps,
        "drain_link_rate_bytes_per_s": drain.as_ref().map(|d| d.drain_bps),
        "outage_method": outage.describe(),
        "backlog_definition": format!("at least {BACKLOG_EVENTS} events queued for site 2 (sum of site-1 nodes' queue_events) at both ends of the one-second interval, link up at both ends; draining: and the queue shrank over it"),
        "targets": targets,
        "reference_hazelcast": reference,
        "runs": results,
    });
    let (json_path, csv_path) = files::write(&args.out, &doc, &results)?;
    println!();
    println!("results: {}", json_path.display());
    println!("samples: {}", csv_path.display());
    if args.keep {
        println!("data and logs kept in {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let lost: Vec<&str> = results
        .iter()
        .filter(|r| r.lost())
        .map(|r| r.name.as_str())
        .collect();
    if !lost.is_empty() {
        bail!(
            "sites differ or events were not distributed after catch-up in: {}",
            lost.join(", ")
        );
    }
    Ok(())
}
