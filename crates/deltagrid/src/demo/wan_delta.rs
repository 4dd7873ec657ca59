//! `deltagrid bench wan-delta`: GemFire's WAN delta experiment
//! (REFERENCE.md, experiment 1) as a benchmark. Runs the `gemfire` workload
//! with `delta = false`, then `delta = true`, prints the blog's tables for
//! each and a comparison with the blog's figures (labelled as theirs), and
//! writes `wan_delta.json` and `wan_delta.csv` (`files`) for
//! `bench/plot_wan_delta.py`.
//!
//! By default both sites run on 127.0.0.1. With `--site1-netns/--site1-ip`
//! and `--site2-netns/--site2-ip` each site's nodes run inside a network
//! namespace (`bench/netns.sh` joins two with an emulated link); this
//! process is then expected to run in site 1's namespace, as GemFire's
//! client ran in site 1.

mod files;

use std::path::PathBuf;

use anyhow::bail;

use super::gemfire::report::{print_phase, print_summary};
use super::gemfire::sites::PlacementArgs;
use super::gemfire::{self, PhaseResult, Workload, PAYLOAD};

#[derive(clap::Args)]
pub struct WanDeltaArgs {
    /// Seconds each writer phase runs [default: 20; GemFire ran 300]
    #[arg(long)]
    seconds: Option<u64>,
    /// Objects created at site 1 [default: 2000; GemFire created 100,000]
    #[arg(long)]
    objects: Option<usize>,
    /// Writer threads (GemFire: 5)
    #[arg(long, default_value_t = 5)]
    writers: usize,
    /// Directory for wan_delta.json and wan_delta.csv
    #[arg(long, default_value = "docs/bench")]
    out: PathBuf,
    /// A short run (2 s, 50 objects unless given) that checks the harness, not the numbers
    #[arg(long)]
    smoke: bool,
    #[command(flatten)]
    placement: PlacementArgs,
    /// Keep the nodes' data directories and logs (printed at the end)
    #[arg(long)]
    keep: bool,
    /// Skip the third phase (delta on, clients SETting whole serialized objects)
    #[arg(long)]
    no_blob: bool,
}

/// REFERENCE.md #1, VMware GemFire 10.0: (metric, delta off, delta on).
/// The second row is derived (three receivers).
pub const THEIRS: [(&str, &str, &str); 8] = [
    (
        "bytes received/s per receiver, avg",
        "19.9M-22.9M",
        "0.53M-0.64M",
    ),
    (
        "bytes received/s, all receivers, avg",
        "~60M-69M",
        "~1.6M-1.9M",
    ),
    (
        "bytes received/s per receiver, max",
        "41.5M-45.8M",
        "0.76M-0.91M",
    ),
    ("client updates/s (5 threads)", "6,485", "11,970"),
    ("events queued/s per sender, avg", "~3,960", "~7,170"),
    ("events distributed/s per sender, avg", "~2,010", "~3,740"),
    (
        "sender queue size, avg (max)",
        "~670 (3,400)",
        "~510 (3,570)",
    ),
    ("WAN bytes per update (derived)", "~9,900", "~150"),
];

fn m(v: f64) -> String {
    format!("{:.2}M", v / 1e6)
}

fn range(vs: impl Iterator<Item = f64>, f: fn(f64) -> String) -> String {
    let vs: Vec<f64> = vs.collect();
    let (lo, hi) = vs
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
    if vs.is_empty() {
        "-".into()
    } else if f(lo) == f(hi) {
        f(lo)
    } else {
        format!("{}-{}", f(lo), f(hi))
    }
}

fn whole(v: f64) -> String {
    format!("{v:.0}")
}

/// Our figures in the rows of `THEIRS`.
pub fn ours(r: &PhaseResult) -> [String; 8] {
    let queue_avg =
        r.events.iter().map(|e| e.queue_avg).sum::<f64>() / r.events.len().max(1) as f64;
    let queue_max = r.events.iter().map(|e| e.queue_max).max().unwrap_or(0);
    [
        range(r.received.iter().map(|s| s.avg_per_s), m),
        m(r.received.iter().map(|s| s.avg_per_s).sum()),
        range(r.received.iter().map(|s| s.max_per_s), m),
        whole(r.update_rate()),
        range(r.events.iter().map(|e| e.queued_per_s), whole),
        range(r.events.iter().map(|e| e.distributed_per_s), whole),
        format!("{queue_avg:.0} ({queue_max})"),
        format!("{:.1}", r.bytes_per_update),
    ]
}

fn print_comparison(w: &Workload, off: &PhaseResult, on: &PhaseResult) {
    println!();
    println!(
        "== compared with GemFire 10.0 (theirs: REFERENCE.md #1, 100,000 objects, 300 s, 3+3 servers; ours: {} objects, {} s) ==",
        w.objects, w.seconds
    );
    println!(
        "{:<38} {:>16} {:>16} {:>16} {:>16}",
        "metric", "theirs, off", "ours, off", "theirs, on", "ours, on"
    );
    let (a, b) = (ours(off), ours(on));
    for (i, (metric, t_off, t_on)) in THEIRS.iter().enumerate() {
        println!(
            "{metric:<38} {t_off:>16} {:>16} {t_on:>16} {:>16}",
            a[i], b[i]
        );
    }
    println!(
        "{:<38} {:>16} {:>16.1} {:>16} {:>16.2}",
        "delta on: bytes/update less by, rate x",
        "~66x",
        off.bytes_per_update / on.bytes_per_update.max(0.001),
        "1.85x",
        on.update_rate() / off.update_rate().max(0.001)
    );
}

pub fn run(args: &WanDeltaArgs) -> anyhow::Result<()> {
    let (seconds, objects) = if args.smoke { (2, 50) } else { (20, 2000) };
    let workload = Workload {
        objects: args.objects.unwrap_or(objects),
        writers: args.writers,
        seconds: args.seconds.unwrap_or(seconds),
        blob: false,
    };
    let (placement, link) = args.placement.resolve();
    let dir =
        std::env::temp_dir().join(format!("deltagrid-bench-wan-delta-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    println!(
        "deltagrid bench wan-delta: 2 sites x 3 nodes, {} objects of {} B payload + id/count/timestamp, {} writers updating count+timestamp for {} s per phase{}",
        workload.objects,
        PAYLOAD,
        workload.writers,
        workload.seconds,
        if args.smoke { " (smoke run)" } else { "" }
    );
    for (i, s) in placement.sites.iter().enumerate() {
        println!("site {}: {}", i + 1, s.describe());
    }
    println!("link: {link}");
    let mut results = Vec::new();
    for delta in [false, true] {
        let r = gemfire::phase(
            &workload,
            &placement,
            &dir.join(format!("delta-{delta}")),
            delta,
        )?;
        print_phase(&r);
        println!(
            "site 2 caught up {:.1} s after the writers stopped",
            r.catch_up_seconds
        );
        results.push(r);
    }
    let (off, on) = (&results[0], &results[1]);
    print_summary(off, on);
    print_comparison(&workload, off, on);
    // The same with whole objects SET by the clients: deltas found by the
    // node, none written by the user.
    let blob = match args.no_blob {
        true => None,
        false => {
            let w = Workload {
                blob: true,
                ..workload.clone()
            };
            let r = gemfire::phase(&w, &placement, &dir.join("blob"), true)?;
            print_phase(&r);
            println!();
            println!(
                "automatic deltas: {:.1} WAN bytes per update for a SET of the whole {}-byte object \
                 (hash fields: {:.1}; full values: {:.1}), {:.0} updates/s (hash fields: {:.0})",
                r.bytes_per_update,
                gemfire::serialize(0, 0, 0, &[0; PAYLOAD]).len(),
                on.bytes_per_update,
                off.bytes_per_update,
                r.update_rate(),
                on.update_rate()
            );
            Some(r)
        }
    };
    let (json, csv) = files::write(
        &args.out,
        &workload,
        &placement,
        &link,
        &results,
        blob.as_ref(),
    )?;
    println!();
    println!("results: {}", json.display());
    println!("samples: {}", csv.display());
    if args.keep {
        println!("data and logs kept in {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    if !(off.identical && on.identical && blob.as_ref().is_none_or(|b| b.identical)) {
        bail!("the sites did not converge");
    }
    Ok(())
}
