//! What the benchmarks' result files share: the machine they ran on, the
//! time, and writing `NAME.json` and `NAME.csv` under the output directory.

use std::path::{Path, PathBuf};

use anyhow::Context;

/// Writes `doc` as `out/NAME.json` and `csv` as `out/NAME.csv` (creating
/// `out`); returns both paths.
pub fn write(
    out: &Path,
    name: &str,
    doc: &serde_json::Value,
    csv: String,
) -> anyhow::Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let json_path = out.join(format!("{name}.json"));
    std::fs::write(&json_path, serde_json::to_string_pretty(doc)? + "\n")
        .with_context(|| format!("writing {}", json_path.display()))?;
    let csv_path = out.join(format!("{name}.csv"));
    std::fs::write(&csv_path, csv).with_context(|| format!("writing {}", csv_path.display()))?;
    Ok((json_path, csv_path))
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
        // The machine's CPUs, whatever this process is pinned to (taskset).
        "nproc": Some(cpuinfo.lines().filter(|l| l.starts_with("processor")).count()).filter(|&n| n > 0),
        "cpus_available": std::thread::available_parallelism().map(|n| n.get()).ok(),
        "mem_total_kib": mem_kib,
        "cpu": cpu,
        "kernel": kernel.trim(),
        "loadavg": load.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    })
}

/// Now as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
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
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
