//! Result files of `deltagrid bench wan-load`: `wan_load.json` (settings,
//! machine, link, every run's summary and samples, the reference findings,
//! the targets) and `wan_load.csv` (one row per run and one-second
//! interval), read by `bench/plot_wan_load.py`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::probe::NodeSample;
use super::result::{site_idx, RunResult, Sample};
use crate::result_files;

pub fn write(
    out: &Path,
    doc: &serde_json::Value,
    runs: &[RunResult],
) -> anyhow::Result<(PathBuf, PathBuf)> {
    result_files::write(out, "wan_load", doc, csv(runs))
}

/// Rates are over the interval ending at `time_s` (seconds since the run's
/// clients started); `writing` is 0 once they stopped and site 2 catches
/// up; `link_up` is 0 while the outage lasts. Queue and memory columns are
/// the values at `time_s`; `site2_log_bytes` is the partition log held by
/// site 2's primaries (what it keeps of the changes it applied).
fn csv(runs: &[RunResult]) -> String {
    let mut s = String::new();
    let Some(first) = runs.first() else { return s };
    s.push_str(
        "run,time_s,writing,link_up,site1_ops_per_s,site1_sets_per_s,site2_reads_per_s,wan_bytes_sent_per_s,\
wan_bytes_received_per_s,events_queued_per_s,events_distributed_per_s,queue_events,queue_bytes_primary,\
journal_bytes,lag_ms_max,site2_log_bytes",
    );
    for (site, id) in &first.nodes {
        if *site == 1 {
            let _ = write!(
                s,
                ",queue_events_{id},queue_bytes_primary_{id},queue_bytes_backup_{id},journal_bytes_{id},lag_ms_{id},connected_{id},in_flight_{id},window_{id}"
            );
        }
    }
    for (_, id) in &first.nodes {
        let _ = write!(s, ",rss_kib_{id}");
    }
    s.push('\n');
    for r in runs {
        let (site1, site2) = (site_idx(&r.nodes, 1), site_idx(&r.nodes, 2));
        for pair in r.samples.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            let dt = (b.t - a.t).max(1e-3);
            let rate = |x: u64, y: u64| y.saturating_sub(x) as f64 / dt;
            let sum = |idx: &[usize], f: fn(&NodeSample) -> u64, smp: &Sample| -> u64 {
                idx.iter().map(|&i| f(&smp.nodes[i])).sum()
            };
            let per_s =
                |idx: &[usize], f: fn(&NodeSample) -> u64| rate(sum(idx, f, a), sum(idx, f, b));
            let _ = write!(
                s,
                "{},{:.3},{},{},{:.1},{:.1},{:.1},{:.0},{:.0},{:.1},{:.1},{},{},{},{},{}",
                r.name,
                b.t,
                u8::from(b.writing),
                u8::from(b.link_up),
                rate(a.site1_ops, b.site1_ops),
                rate(a.site1_sets, b.site1_sets),
                rate(a.site2_reads, b.site2_reads),
                per_s(&site1, |n| n.bytes_sent),
                per_s(&site2, |n| n.bytes_received),
                per_s(&site1, |n| n.events_queued),
                per_s(&site1, |n| n.events_distributed),
                sum(&site1, |n| n.queue_events, b),
                sum(&site1, |n| n.queue_bytes_primary, b),
                sum(&site1, |n| n.journal_bytes, b),
                site1.iter().map(|&i| b.nodes[i].lag_ms).max().unwrap_or(0),
                sum(&site2, |n| n.queue_bytes_primary, b),
            );
            for &i in &site1 {
                let n = &b.nodes[i];
                let _ = write!(
                    s,
                    ",{},{},{},{},{},{},{},{}",
                    n.queue_events,
                    n.queue_bytes_primary,
                    n.queue_bytes_backup,
                    n.journal_bytes,
                    n.lag_ms,
                    u8::from(n.connected),
                    n.in_flight,
                    n.window
                );
            }
            for n in &b.nodes {
                let _ = write!(s, ",{}", n.rss_kib);
            }
            s.push('\n');
        }
    }
    s
}
