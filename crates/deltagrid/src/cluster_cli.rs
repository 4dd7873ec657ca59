//! `deltagrid cluster ...`: site administration through a node's admin
//! HTTP endpoint (`/status`, `/cluster/leave`, `/cluster/revoke`).

use anyhow::Context;
use server::admin_client::{request, PATIENT};

/// GET `path` from the admin endpoint at `addr`; returns the body.
pub fn http_get(addr: &str, path: &str) -> anyhow::Result<String> {
    http_request(addr, "GET", path)
}

/// One request without a body to a node's admin endpoint; the response
/// body when the status is 200, else an error with the endpoint's words.
pub fn http_request(addr: &str, method: &str, path: &str) -> anyhow::Result<String> {
    request(addr, method, path, PATIENT).map_err(anyhow::Error::msg)
}

pub fn status(admin: &str) -> anyhow::Result<()> {
    let body = http_get(admin, "/status")?;
    let v: serde_json::Value = serde_json::from_str(&body).context("parsing /status")?;
    let Some(site) = v.get("cluster").filter(|c| !c.is_null()) else {
        println!("node {} is standalone (no [site] seeds)", v["node_id"]);
        return Ok(());
    };
    println!(
        "site {} ({}), formed: {}, partition table epoch {}, metadata leader: {}, primary changes seen: {}, migrating: {}, \
         this node's lease: {}",
        v["site"]["id"],
        v["site"]["name"].as_str().unwrap_or(""),
        site["formed"],
        site["epoch"],
        site["leader"].as_str().unwrap_or("none"),
        site["primary_changes"],
        site["migrating"],
        if site["lease"].as_bool() == Some(true) { "held (serving)" } else { "lost (its partitions answer CLUSTERDOWN)" },
    );
    println!();
    println!(
        "{:<10} {:<22} {:<22} {:<8} {:<10} {:>9} {:>8} {:>8} {:>14}",
        "node",
        "cluster_addr",
        "client_addr",
        "link",
        "state",
        "primaries",
        "backups",
        "in-sync",
        "repl pending B"
    );
    for m in site["members"].as_array().into_iter().flatten() {
        let me = if m["myself"].as_bool() == Some(true) {
            "*"
        } else {
            ""
        };
        println!(
            "{:<10} {:<22} {:<22} {:<8} {:<10} {:>9} {:>8} {:>8} {:>14}",
            format!("{}{me}", m["node_id"].as_str().unwrap_or("?")),
            m["cluster_addr"].as_str().unwrap_or(""),
            m["client_addr"].as_str().unwrap_or(""),
            if m["connected"].as_bool() == Some(true) {
                "up"
            } else {
                "down"
            },
            m["state"].as_str().unwrap_or(""),
            m["primaries"],
            m["backups"],
            m["in_sync"],
            m["replication_pending_bytes"],
        );
    }
    println!("\n(* = the node answering; counts are partitions)");
    let waiting = site["waiting"].as_array().cloned().unwrap_or_default();
    if !waiting.is_empty() {
        // Grouped by whom they wait for.
        let mut by: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for w in &waiting {
            let awaits: Vec<&str> = w["awaits"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|n| n.as_str())
                .collect();
            let key = if awaits.is_empty() {
                "nobody (resuming)".to_string()
            } else {
                awaits.join(", ")
            };
            by.entry(key).or_default().push(w["partition"].to_string());
        }
        println!(
            "\n{} partitions wait for a copy from a disk (CLUSTERDOWN for their slots):",
            waiting.len()
        );
        for (awaits, parts) in by {
            println!(
                "  {} waiting for {awaits}: {}",
                parts.len(),
                parts.join(" ")
            );
        }
        println!(
            "  (start those nodes, or `deltagrid cluster revoke --node NAME` to give up on one)"
        );
    }
    Ok(())
}

/// `deltagrid cluster leave|revoke --node NODE`.
pub fn post(admin: &str, action: &str, node: &str) -> anyhow::Result<()> {
    let body = http_request(admin, "POST", &format!("/cluster/{action}?node={node}"))?;
    print!("{body}");
    Ok(())
}
