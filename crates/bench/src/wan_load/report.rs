//! The tables `deltagrid bench wan-load` prints: each run's figures as it
//! ends, and one row per run at the end.

use super::result::{RunResult, BACKLOG_EVENTS};
use super::targets::off_run;

/// Bytes (per second) in millions: `12.34M`.
pub fn mb(v: f64) -> String {
    format!("{:.2}M", v / 1e6)
}

/// Bytes in MiB, one decimal.
pub fn mib(v: u64) -> String {
    format!("{:.1}", v as f64 / 1048576.0)
}

/// A share as a whole percentage, `-` when unknown.
pub fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |u| format!("{:.0}%", u * 100.0))
}

/// Seconds with one decimal, `-` when unknown.
pub fn opt_s(v: Option<f64>) -> String {
    v.map_or("-".into(), |c| format!("{c:.1}"))
}

/// A run's figures, printed as it ends.
pub fn print_run(r: &RunResult, link_bps: Option<f64>) {
    if r.spec.mirror {
        println!(
            "site 2's mirror writers: {:.0} SETs/s (site 1's clients: {:.0} SETs/s)",
            r.site2_sets_per_s,
            r.site1_sets as f64 / r.write_seconds
        );
    }
    println!(
        "clients: site 1 {:.0} ops/s ({} ops in {:.1} s), site 2 {:.0} reads/s, {} client errors",
        r.site1_ops_per_s, r.site1_ops, r.write_seconds, r.site2_reads_per_s, r.client_errors
    );
    if !r.spec.wan {
        println!("WAN off: nothing replicated, sites not compared");
    } else {
        println!(
            "WAN bytes/s sent by site 1: mean {} max {}; received by site 2: mean {} max {}; events applied {:.0}/s, {:.1} per batch",
            mb(r.wan_bytes_per_s_mean),
            mb(r.wan_bytes_per_s_max),
            mb(r.wan_received_per_s_mean),
            mb(r.wan_received_per_s_max),
            r.events_distributed_per_s,
            r.events_per_batch
        );
        println!(
            "backlog (>= {BACKLOG_EVENTS} events queued, link up): {} s, link utilization then {} (max {}); draining: {} s, utilization {}, {} B/s{}",
            r.backlog_seconds,
            pct(r.link_utilization_backlog),
            pct(r.link_utilization_backlog_max),
            r.draining_seconds,
            pct(r.link_utilization_draining),
            r.draining_bytes_per_s.map_or("-".into(), mb),
            if link_bps.is_none() { " [no --link-rate]" } else { "" }
        );
        println!(
            "site 2's partition logs (primaries) hold {} MiB at the end",
            mib(r.site2_log_bytes_end)
        );
        println!(
            "queue max: {} events, {} MiB primary log, {} MiB backup log, {} MiB journal; lag p50 {} ms p99 {} ms max {} ms",
            r.queue_events_max,
            mib(r.queue_bytes_primary_max),
            mib(r.queue_bytes_backup_max),
            mib(r.journal_bytes_max),
            r.lag_p50_ms,
            r.lag_p99_ms,
            r.lag_max_ms
        );
        if let Some(o) = &r.outage {
            println!(
                "outage: down at {:.1} s, up at {:.1} s; publishers reconnected {} s and caught up {} s after the link came back",
                o.down_at_s,
                o.up_at_s,
                opt_s(o.reconnected_after_s),
                opt_s(o.catch_up_seconds)
            );
        }
        println!(
            "catch-up after the writers stopped: {} s; events queued {} distributed {} (difference {}; site 2 applied {}, duplicates {}); keys differing {} of {}{}; re-syncs {}",
            opt_s(r.catch_up_seconds),
            r.events_queued,
            r.events_distributed,
            r.events_undistributed,
            r.site2_applied,
            r.site2_duplicates,
            r.keys_differing.map_or("-".into(), |d| d.to_string()),
            r.keys_compared,
            if r.differing_examples.is_empty() { String::new() } else { format!(" (e.g. {})", r.differing_examples.join(", ")) },
            r.resyncs
        );
    }
    let rss: Vec<String> = r
        .node_end
        .iter()
        .map(|n| {
            format!(
                "{} {} MiB / {:.1} s CPU",
                n.node,
                n.peak_rss_kib / 1024,
                n.cpu_seconds
            )
        })
        .collect();
    println!("peak RSS / CPU per node: {}", rss.join(", "));
    println!(
        "CPU of site 1's clients: {:.1} s, of site 2's readers: {:.1} s; site 1's nodes while the clients ran: {:.1} s, {:.1} µs per client op; CPU stolen by the hypervisor: {:.1} s",
        r.client_cpu_seconds[0],
        r.client_cpu_seconds[1],
        r.site1_node_cpu_seconds,
        r.site1_cpu_us_per_op,
        r.steal_seconds
    );
}

/// One row per run, printed after the last.
pub fn print_table(results: &[RunResult], _link_bps: Option<f64>) {
    println!(
        "{:<16} {:>9} {:>8} {:>8} {:>9} {:>9} {:>13} {:>10} {:>9} {:>9} {:>11} {:>8} {:>8} {:>9} {:>9} {:>9}",
        "run",
        "s1 ops/s",
        "vs off",
        "s1 us/op",
        "WAN B/s",
        "WAN max",
        "util bl/drain",
        "queue max",
        "q MiB",
        "jrnl MiB",
        "lag p50/p99",
        "RSS MiB",
        "catch-up",
        "differing",
        "q-d",
        "ev/s"
    );
    for r in results {
        let rss = r.node_end.iter().map(|n| n.peak_rss_kib).max().unwrap_or(0) / 1024;
        let vs = off_run(results, r.spec.partitions, r.round, false).map_or("-".into(), |o| {
            format!("{:.0}%", r.site1_ops_per_s / o.site1_ops_per_s * 100.0)
        });
        if !r.spec.wan {
            println!(
                "{:<16} {:>9.0} {:>8} {:>8.1} {:>9} {:>9} {:>13} {:>10} {:>9} {:>9} {:>11} {:>8} {:>8} {:>9} {:>9} {:>9}",
                r.name, r.site1_ops_per_s, vs, r.site1_cpu_us_per_op, "-", "-", "-", "-", "-", "-", "-", rss, "-", "-", "-", "-"
            );
            continue;
        }
        println!(
            "{:<16} {:>9.0} {:>8} {:>8.1} {:>9} {:>9} {:>13} {:>10} {:>9} {:>9} {:>11} {:>8} {:>8} {:>9} {:>9} {:>9.0}",
            r.name,
            r.site1_ops_per_s,
            vs,
            r.site1_cpu_us_per_op,
            mb(r.wan_bytes_per_s_mean),
            mb(r.wan_bytes_per_s_max),
            format!("{}/{}", pct(r.link_utilization_backlog), pct(r.link_utilization_draining)),
            r.queue_events_max,
            mib(r.queue_bytes_primary_max),
            mib(r.journal_bytes_max),
            format!("{}/{}", r.lag_p50_ms, r.lag_p99_ms),
            rss,
            opt_s(r.catch_up_seconds),
            r.keys_differing.map_or("-".into(), |d| d.to_string()),
            r.events_undistributed,
            r.events_distributed_per_s
        );
    }
}
