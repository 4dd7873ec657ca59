//! Result files of `deltagrid bench wan-delta`: `wan_delta.json` (the run's
//! settings, the machine, both phases with every sample, the reference
//! figures) and `wan_delta.csv` (one row per phase and one-second interval:
//! bytes received/s per site-2 node, events queued/distributed per second
//! and queue size per site-1 node, updates).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::reference::THEIRS;
use crate::gemfire::{PhaseResult, Placement, Workload, PAYLOAD};
use crate::result_files;

/// Writes both files under `out` (created if missing); returns their paths.
pub fn write(
    out: &Path,
    w: &Workload,
    placement: &Placement,
    link: &str,
    results: &[PhaseResult],
    blob: Option<&PhaseResult>,
) -> anyhow::Result<(PathBuf, PathBuf)> {
    let reference: Vec<_> = THEIRS
        .iter()
        .map(|(metric, off, on)| json!({ "metric": metric, "delta_off": off, "delta_on": on }))
        .collect();
    let doc = json!({
        "experiment": "WAN delta propagation (GemFire 10.0 blog, REFERENCE.md #1)",
        "date": result_files::utc_now(),
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "machine": result_files::machine(),
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
    result_files::write(out, "wan_delta", &doc, csv(results))
}

/// Rates are over the interval ending at `time_s` (seconds since the phase's
/// writers started); `writing` is 0 once they stopped and site 2 catches up.
fn csv(results: &[PhaseResult]) -> String {
    let mut s = String::new();
    let Some(first) = results.first() else {
        return s;
    };
    s.push_str("phase,time_s,writing,updates_total,updates_per_s");
    for (site, id) in &first.nodes {
        if *site == 2 {
            let _ = write!(s, ",bytes_received_per_s_{id}");
        }
    }
    for (site, id) in &first.nodes {
        if *site == 1 {
            let _ = write!(
                s,
                ",events_queued_per_s_{id},events_distributed_per_s_{id},queue_size_{id}"
            );
        }
    }
    s.push('\n');
    for r in results {
        let phase = if r.delta { "delta_on" } else { "delta_off" };
        for pair in r.samples.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            let dt = (b.t - a.t).max(1e-3);
            let rate = |x: u64, y: u64| y.saturating_sub(x) as f64 / dt;
            let _ = write!(
                s,
                "{phase},{:.3},{},{},{:.1}",
                b.t,
                u8::from(b.writing),
                b.updates,
                rate(a.updates, b.updates)
            );
            for (i, (site, _)) in r.nodes.iter().enumerate() {
                if *site == 2 {
                    let _ = write!(s, ",{:.0}", rate(a.nodes[i].received, b.nodes[i].received));
                }
            }
            for (i, (site, _)) in r.nodes.iter().enumerate() {
                if *site == 1 {
                    let (x, y) = (&a.nodes[i], &b.nodes[i]);
                    let _ = write!(
                        s,
                        ",{:.1},{:.1},{}",
                        rate(x.queued, y.queued),
                        rate(x.distributed, y.distributed),
                        y.queue
                    );
                }
            }
            s.push('\n');
        }
    }
    s
}
