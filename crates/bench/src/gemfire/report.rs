//! The GemFire blog's tables for one phase (bytes received per site-2 node,
//! updates per writer thread, events queued / distributed per site-1 node)
//! and the one-line comparison of the two phases.

use super::PhaseResult;

pub fn print_phase(r: &PhaseResult) {
    println!();
    let shape = if r.blob {
        ", clients SET whole serialized objects"
    } else {
        ""
    };
    println!(
        "== delta = {}{shape} ({:.1} s of updates) ==",
        r.delta, r.seconds
    );
    println!(
        "{:<10} {:>22} {:>22}",
        "site-2 node", "bytes received/s avg", "bytes received/s max"
    );
    for s in &r.received {
        println!("{:<10} {:>22.0} {:>22.0}", s.node, s.avg_per_s, s.max_per_s);
    }
    println!("{:<10} {:>22} {:>22}", "writer", "updates", "updates/s");
    for (i, u) in r.updates.iter().enumerate() {
        println!(
            "{:<10} {u:>22} {:>22.0}",
            format!("thread {}", i + 1),
            *u as f64 / r.seconds
        );
    }
    println!(
        "{:<10} {:>22} {:>22.0}",
        "total",
        r.total_updates(),
        r.update_rate()
    );
    println!(
        "{:<10} {:>22} {:>22} {:>16}",
        "site-1 node", "events queued/s", "events distributed/s", "max queue size"
    );
    for e in &r.events {
        println!(
            "{:<10} {:>22.0} {:>22.0} {:>16}",
            e.node, e.queued_per_s, e.distributed_per_s, e.queue_max
        );
    }
    println!("WAN bytes per update: {:.1}", r.bytes_per_update);
    println!(
        "both sites hold identical data ({} objects): {}",
        r.keys,
        if r.identical { "yes" } else { "NO" }
    );
}

/// `summary: bytes per update ... (delta off) vs ... (delta on), Nx less; update rate ...`
pub fn print_summary(off: &PhaseResult, on: &PhaseResult) {
    println!();
    println!(
        "summary: bytes per update {:.0} (delta off) vs {:.1} (delta on), {:.0}x less; update rate {:.0}/s vs {:.0}/s",
        off.bytes_per_update,
        on.bytes_per_update,
        off.bytes_per_update / on.bytes_per_update.max(0.001),
        off.update_rate(),
        on.update_rate(),
    );
}
