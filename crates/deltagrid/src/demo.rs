//! `deltagrid demo`: two sites of three nodes on loopback, replaying the
//! shape of GemFire's WAN delta experiment (REFERENCE.md, experiment 1).
//!
//! The demo runs the workload in `gemfire` twice on 127.0.0.1: first with
//! `delta = false` on the WAN targets (full values, the GemFire baseline),
//! then with `delta = true`; it prints the same statistics as the blog's
//! tables, and exits 0 only if both sites hold identical data after each
//! phase. `wan_delta` is the same workload as a benchmark
//! (`deltagrid bench wan-delta`): longer, optionally across network
//! namespaces joined by an emulated link, with JSON/CSV results.

pub mod gemfire;
pub mod result_files;
pub mod wan_delta;
pub mod wan_load;

use std::path::PathBuf;

use anyhow::bail;

use gemfire::report::{print_phase, print_summary};
use gemfire::{Placement, Workload, PAYLOAD};

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

pub fn run(args: &DemoArgs) -> anyhow::Result<()> {
    let dir: PathBuf = std::env::temp_dir().join(format!("deltagrid-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    println!(
        "deltagrid demo: 2 sites x 3 nodes on loopback, {} objects of {} B payload + id/count/timestamp, {} writers updating count+timestamp",
        args.objects, PAYLOAD, args.writers
    );
    let workload = Workload {
        objects: args.objects,
        writers: args.writers,
        seconds: args.seconds,
        blob: false,
    };
    let placement = Placement::loopback();
    let mut results = Vec::new();
    for delta in [false, true] {
        let r = gemfire::phase(
            &workload,
            &placement,
            &dir.join(format!("delta-{delta}")),
            delta,
        )?;
        print_phase(&r);
        results.push(r);
    }
    let (off, on) = (&results[0], &results[1]);
    print_summary(off, on);
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
