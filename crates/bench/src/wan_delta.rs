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
mod reference;

use std::path::PathBuf;

use anyhow::bail;

use crate::gemfire::placement::PlacementArgs;
use crate::gemfire::report::print_phase;
use crate::gemfire::{self, Workload, PAYLOAD};
use reference::print_comparison;

/// `deltagrid bench wan-delta`'s options.
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

/// Runs the phases and writes the result files; an error when the sites
/// did not converge.
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
    let results = gemfire::off_then_on(&workload, &placement, &dir, |r| {
        println!(
            "site 2 caught up {:.1} s after the writers stopped",
            r.catch_up_seconds
        );
    })?;
    let [off, on] = &results;
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
