//! `deltagrid wan ...`: WAN replication status and publisher control,
//! through nodes' admin endpoints. Publisher state is per node, so a command
//! goes to every node named by `--admin` (comma-separated).

use anyhow::Context;

use crate::cluster_cli::{http_get, http_request};

fn admins(list: &str) -> Vec<&str> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// `pause`, `resume`, `stop` or `resync` the publisher to `target` on every node.
pub fn control(admin: &str, action: &str, target: &str) -> anyhow::Result<()> {
    for a in admins(admin) {
        let body = http_request(a, "POST", &format!("/wan/{action}?target={target}"))?;
        print!("{a}: {body}");
    }
    Ok(())
}

fn mib(v: &serde_json::Value) -> String {
    format!("{:.1}", v.as_f64().unwrap_or(0.0) / (1 << 20) as f64)
}

pub fn status(admin: &str) -> anyhow::Result<()> {
    println!(
        "{:<22} {:<10} {:<13} {:<5} {:>9} {:>9} {:>10} {:>10} {:>10} {:>9} {:>12} {:>12} {:>7}",
        "node",
        "target",
        "state",
        "link",
        "lag s",
        "queue ev",
        "mem MiB",
        "backup MiB",
        "disk MiB",
        "rtt ms",
        "queued",
        "distributed",
        "resyncs"
    );
    for a in admins(admin) {
        let v: serde_json::Value =
            serde_json::from_str(&http_get(a, "/wan/status")?).context("parsing /wan/status")?;
        for t in v["targets"].as_array().into_iter().flatten() {
            println!(
                "{:<22} {:<10} {:<13} {:<5} {:>9.1} {:>9} {:>10} {:>10} {:>10} {:>9.2} {:>12} {:>12} {:>7}",
                a,
                t["name"].as_str().unwrap_or("?"),
                t["state"].as_str().unwrap_or("?"),
                if t["connected"].as_bool() == Some(true) { "up" } else { "down" },
                t["lag_ms"].as_f64().unwrap_or(0.0) / 1000.0,
                t["queue_events"],
                mib(&t["queue_bytes_primary"]),
                mib(&t["queue_bytes_backup"]),
                mib(&t["journal_bytes"]),
                t["rtt_us"].as_f64().unwrap_or(0.0) / 1000.0,
                t["events_queued"],
                t["events_distributed"],
                t["resyncs"],
            );
            let down = t["connected"].as_bool() != Some(true);
            if let Some(e) = t["last_error"].as_str().filter(|e| down && !e.is_empty()) {
                println!(
                    "{:<22}   {} link: {e}",
                    "",
                    t["name"].as_str().unwrap_or("?")
                );
            }
        }
        for s in v["sources"].as_array().into_iter().flatten() {
            println!(
                "{:<22} from {:<5} received {} events ({} bytes), applied {}, duplicates {}, conflicts lost {}, full values asked {}, refused {}",
                a,
                s["site_name"].as_str().filter(|n| !n.is_empty()).unwrap_or("?"),
                s["events_received"],
                s["bytes_received"],
                s["applied"],
                s["duplicates"],
                s["conflicts_lost"],
                s["need_full"],
                s["refused"],
            );
        }
    }
    Ok(())
}
