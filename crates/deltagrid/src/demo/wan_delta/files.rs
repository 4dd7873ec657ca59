//! Result files of `deltagrid bench wan-delta`: `wan_delta.json` (the run's
//! settings, the machine, both phases with every sample, the reference
//! figures) and `wan_delta.csv` (one row per phase and one-second interval:
//! bytes received/s per site-2 node, events queued/distributed per second
//! and queue size per site-1 node, updates).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::json;

use super::THEIRS;
use crate::demo::gemfire::{PhaseResult, Placement, Workload, PAYLOAD};

/// Writes both files under `out` (created if missing); returns their paths.
pub fn write(
    out: &Path,
    w: &Workload,
    placement: &Placement,
    link: &str,
    results: &[PhaseResult],
    blob: Option<&PhaseResult>,
) -> anyhow::Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let reference: Vec<_> =
        THEIRS.iter().map(|(metric, off, on)| json!({ "metric": metric, "delta_off": off, "delta_on": on })).collect();
    let doc = json!({
        "experiment": "WAN delta propagation (GemFire 10.0 blog, REFERENCE.md #1)",
        "date": utc_now(),
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "machine": machine(),
        "workload": w,
        "payload_bytes": PAYLOAD,
        "placement": placement,
        "link": link,
        "phases": results,
        "blob_phase": blob,
        "reference_gemfire": {
            "source": "REFERENCE.md #1 (theirs: 100,000 objects, 300 s, 5 threads, 3+3 servers)",
            "rows": reference,
        },
    });
    let json_path = out.join("wan_delta.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&doc)? + "\n")
        .with_context(|| format!("writing {}", json_path.display()))?;
    let csv_path = out.join("wan_delta.csv");
    std::fs::write(&csv_path, csv(results)).with_context(|| format!("writing {}", csv_path.display()))?;
    Ok((json_path, csv_path))
}

/// Rates are over the interval ending at `time_s` (seconds since the phase's
/// writers started); `writing` is 0 once they stopped and site 2 catches up.
fn csv(results: &[PhaseResult]) -> String {
    let mut s = String::new();
    let Some(first) = results.first() else { return s };
    s.push_str("phase,time_s,writing,updates_total,updates_per_s");
    for (site, id) in &first.nodes {
        if *site == 2 {
            let _ = write!(s, ",bytes_received_per_s_{id}");
        }
    }
    for (site, id) in &first.nodes {
        if *site == 1 {
            let _ = write!(s, ",events_queued_per_s_{id},events_distributed_per_s_{id},queue_size_{id}");
        }
    }
    s.push('\n');
    for r in results {
        let phase = if r.delta { "delta_on" } else { "delta_off" };
        for pair in r.samples.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            let dt = (b.t - a.t).max(1e-3);
            let rate = |x: u64, y: u64| y.saturating_sub(x) as f64 / dt;
            let _ = write!(s, "{phase},{:.3},{},{},{:.1}", b.t, u8::from(b.writing), b.updates, rate(a.updates, b.updates));
            for (i, (site, _)) in r.nodes.iter().enumerate() {
                if *site == 2 {
                    let _ = write!(s, ",{:.0}", rate(a.nodes[i].received, b.nodes[i].received));
                }
            }
            for (i, (site, _)) in r.nodes.iter().enumerate() {
                if *site == 1 {
                    let (x, y) = (&a.nodes[i], &b.nodes[i]);
                    let _ = write!(s, ",{:.1},{:.1},{}", rate(x.queued, y.queued), rate(x.distributed, y.distributed), y.queue);
                }
            }
            s.push('\n');
        }
    }
    s
}

fn machine() -> serde_json::Value {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib: Option<u64> = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok());
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo.lines().find_map(|l| l.strip_prefix("model name")).map(|v| v.trim_start_matches([' ', '\t', ':']).to_string());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    json!({
        "nproc": std::thread::available_parallelism().map(|n| n.get()).ok(),
        "mem_total_kib": mem_kib,
        "cpu": cpu,
        "loadavg_at_end": load.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    })
}

/// Now as `YYYY-MM-DDTHH:MM:SSZ`.
fn utc_now() -> String {
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
