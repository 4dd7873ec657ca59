//! Hazelcast's findings in its WAN-under-load report (REFERENCE.md #2)
//! next to ours for the same question, printed (labelled as theirs) and
//! written to the results.

use serde::Serialize;

use super::report::{mb, mib, opt_s};
use super::result::RunResult;
use super::targets::find;

/// One finding: theirs, and what our runs showed.
#[derive(Clone, Debug, Serialize)]
pub struct Reference {
    pub finding: &'static str,
    pub hazelcast: &'static str,
    pub deltagrid: String,
}

pub fn reference(results: &[RunResult]) -> Vec<Reference> {
    let describe = |name: &str| -> String {
        find(results, name).map_or("not run".into(), |r| {
            format!(
                "{} B/s mean ({} max), queue max {} events / {} MiB, lag p50/p99 {}/{} ms, catch-up {} s, peak RSS {} MiB",
                mb(r.wan_bytes_per_s_mean),
                mb(r.wan_bytes_per_s_max),
                r.queue_events_max,
                mib(r.queue_bytes_primary_max),
                r.lag_p50_ms,
                r.lag_p99_ms,
                opt_s(r.catch_up_seconds),
                r.node_end.iter().map(|n| n.peak_rss_kib).max().unwrap_or(0) / 1024
            )
        })
    };
    let parts: Vec<String> = results
        .iter()
        .filter(|r| r.name.starts_with("pipelined-"))
        .map(|r| {
            format!(
                "{}: {:.0} events/s, {} B/s, peak RSS {} MiB",
                r.spec.partitions,
                r.events_distributed_per_s,
                mb(r.wan_bytes_per_s_mean),
                r.node_end.iter().map(|n| n.peak_rss_kib).max().unwrap_or(0) / 1024
            )
        })
        .collect();
    let outages: Vec<String> = results.iter().filter(|r| r.spec.outage).map(|r| {
        format!(
            "{}: queue max {} events, {} MiB in memory, {} MiB journal; lost: {} keys differing, queued - distributed {}; caught up {} s after the link came back",
            r.name,
            r.queue_events_max,
            mib(r.queue_bytes_primary_max),
            mib(r.journal_bytes_max),
            r.keys_differing.map_or("-".into(), |d| d.to_string()),
            r.events_undistributed,
            r.outage.as_ref().map_or("-".into(), |o| opt_s(o.catch_up_seconds))
        )
    }).collect();
    let outage = if outages.is_empty() {
        "not run".to_string()
    } else {
        outages.join("; ")
    };
    vec![
        Reference {
            finding: "ack on apply (ACK_ON_OPERATION_COMPLETE / on-apply)",
            hazelcast: "network peaked ~1.5 Gbps then fell; queue grew without bound; OOME with a large queue, dropped events with a capped one",
            deltagrid: describe("on-apply-271"),
        },
        Reference {
            finding: "ack on receipt (ACK_ON_RECEIPT / pipelined)",
            hazelcast: "kept up to the end of the run; queue healthy; publish latency sub-second",
            deltagrid: describe("pipelined-271"),
        },
        Reference {
            finding: "partition count 271 -> 2K -> 5K (-> 50K)",
            hazelcast: "WAN degraded steadily; OOME at 5K partitions (per-partition backup-removal invocations per batch)",
            deltagrid: if parts.is_empty() { "not run".into() } else { parts.join("; ") },
        },
        Reference {
            finding: "queue capacity / full behaviour",
            hazelcast: "10,000 entries, DISCARD_AFTER_MUTATION: events dropped, full re-sync needed",
            deltagrid: format!("byte budget in memory, then journal on disk; {outage}"),
        },
    ]
}

pub fn print_reference(r: &[Reference]) {
    println!();
    println!(
        "== compared with Hazelcast 4.1 (theirs: REFERENCE.md #2, 3+3 c5.9xlarge, 5 Gbps WAN) =="
    );
    for x in r {
        println!("{}:", x.finding);
        println!("  theirs: {}", x.hazelcast);
        println!("  ours:   {}", x.deltagrid);
    }
}
