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

use std::path::PathBuf;

use anyhow::bail;

use crate::gemfire::{self, Placement, Workload, PAYLOAD};

/// `deltagrid demo`'s options.
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

/// Runs the demo; an error when the sites did not converge.
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
    let [off, on] = gemfire::off_then_on(&workload, &placement, &dir, |_| {})?;
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
