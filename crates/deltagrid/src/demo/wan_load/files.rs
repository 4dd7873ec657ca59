//! Result files of `deltagrid bench wan-load`: `wan_load.json` (settings,
//! machine, link, every run's summary and samples, the reference findings,
//! the targets) and `wan_load.csv` (one row per run and one-second
//! interval), read by `bench/plot_wan_load.py`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::RunResult;

pub fn write(out: &Path, doc: &serde_json::Value, runs: &[RunResult]) -> anyhow::Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let json_path = out.join("wan_load.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(doc)? + "\n")
        .with_context(|| format!("writing {}", json_path.display()))?;
    let csv_path = out.join("wan_load.csv");
    std::fs::write(&csv_path, csv(runs)).with_context(|| format!("writing {}", csv_path.display()))?;
    Ok((json_path, csv_path))
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
        let site1: Vec<usize> = r.nodes.iter().enumerate().filter(|(_, n)| n.0 == 1).map(|(i, _)| i).collect();
        let site2: Vec<usize> = r.nodes.iter().enumerate().filter(|(_, n)| n.0 == 2).map(|(i, _)| i).collect();
        for pair in r.samples.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            let dt = (b.t - a.t).max(1e-3);
            let rate = |x: u64, y: u64| y.saturating_sub(x) as f64 / dt;
            let sum = |idx: &[usize], f: fn(&super::NodeSample) -> u64, smp: &super::Sample| -> u64 {
                idx.iter().map(|&i| f(&smp.nodes[i])).sum()
            };
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
                rate(sum(&site1, |n| n.bytes_sent, a), sum(&site1, |n| n.bytes_sent, b)),
                rate(sum(&site2, |n| n.bytes_received, a), sum(&site2, |n| n.bytes_received, b)),
                rate(sum(&site1, |n| n.events_queued, a), sum(&site1, |n| n.events_queued, b)),
                rate(sum(&site1, |n| n.events_distributed, a), sum(&site1, |n| n.events_distributed, b)),
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

pub fn machine() -> serde_json::Value {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib: Option<u64> = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok());
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    serde_json::json!({
        "nproc": std::thread::available_parallelism().map(|n| n.get()).ok(),
        "mem_total_kib": mem_kib,
        "cpu": cpu,
        "kernel": kernel.trim(),
        "loadavg": load.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    })
}

/// Now as `YYYY-MM-DDTHH:MM:SSZ` (same as wan_delta's).
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}
