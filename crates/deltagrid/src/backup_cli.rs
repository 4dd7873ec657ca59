//! `deltagrid backup create|list|verify|restore`.
//!
//! Create and restore are run by the nodes themselves (each for the
//! partitions it is primary for), so data never passes through this
//! command: it learns the site's nodes from one admin endpoint
//! (`/status`) and coordinates them (`backup::coordinate`). List and
//! verify read the store directly.

use std::time::{Duration, Instant};

use anyhow::Context;
use backup::coordinate::{self, Site};
use backup::manifest;
use backup::restore::LayerStats;
use backup::{Progress, Store};

use crate::cluster_cli::http_get;

#[derive(clap::Args)]
pub struct Target {
    /// A node's admin address (its admin_listen); the whole site is used
    #[arg(long)]
    pub admin: String,
    /// The ACL user to log in as: BACKUPJOB needs `+@internal` (e.g.
    /// `ACL SETUSER backup on >secret +@all +@internal ~* &*`)
    #[arg(long, env = "DELTAGRID_USER")]
    pub user: Option<String>,
    /// Its password (or the nodes' requirepass, for the default user)
    #[arg(long, env = "DELTAGRID_PASSWORD", hide_env_values = true)]
    pub password: Option<String>,
}

#[derive(clap::Args)]
pub struct CreateArgs {
    #[command(flatten)]
    pub target: Target,
    /// file:///path or s3://bucket/prefix
    #[arg(long)]
    pub to: String,
    /// Write only what changed since the newest backup at --to
    #[arg(long)]
    pub incremental: bool,
    /// Bytes of entries per block before compression (restore fetches and
    /// decompresses whole blocks)
    #[arg(long, default_value_t = backup::create::BLOCK_BYTES)]
    pub block_bytes: usize,
    /// Bytes per stored chunk object (blocks are fetched from it by range)
    #[arg(long, default_value_t = backup::create::CHUNK_BYTES)]
    pub chunk_bytes: usize,
}

#[derive(clap::Args)]
pub struct RestoreArgs {
    #[command(flatten)]
    pub target: Target,
    #[arg(long)]
    pub from: String,
    /// The backup to restore (default: the newest)
    #[arg(long)]
    pub backup: Option<String>,
    /// reverse: newest layer first, each key once; forward: base first, for comparison
    #[arg(long, default_value = "reverse")]
    pub order: String,
    /// Also write the summary as JSON here
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
}

/// The site seen from one admin endpoint.
fn site(t: &Target) -> anyhow::Result<Site> {
    let v: serde_json::Value =
        serde_json::from_str(&http_get(&t.admin, "/status")?).context("parsing /status")?;
    let nodes = match v.get("cluster").filter(|c| !c.is_null()) {
        Some(c) => c["members"]
            .as_array()
            .into_iter()
            .flatten()
            // A member that is down holds no primaries once failover is done;
            // one that still does makes the coordinator report the gap.
            .filter(|m| {
                m["connected"].as_bool() == Some(true) || m["myself"].as_bool() == Some(true)
            })
            .filter_map(|m| m["client_addr"].as_str().map(str::to_string))
            .collect(),
        None => vec![v["listen"]
            .as_str()
            .context("/status has no listen address")?
            .to_string()],
    };
    Ok(Site {
        id: v["site"]["id"].as_u64().unwrap_or(0) as u16,
        name: v["site"]["name"].as_str().unwrap_or("").to_string(),
        partitions: v["site"]["partitions"]
            .as_u64()
            .context("/status has no partition count")? as u16,
        nodes,
        user: t.user.clone(),
        password: t.password.clone(),
    })
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// Prints a progress line every 2 s (to stderr).
fn reporter() -> impl FnMut(&[(String, Progress)]) {
    let started = Instant::now();
    let mut last = Instant::now();
    move |all| {
        let running = all.iter().any(|(_, p)| p.state == "running");
        if running && last.elapsed() < Duration::from_secs(2) {
            return;
        }
        last = Instant::now();
        let done: usize = all.iter().map(|(_, p)| p.partitions_done).sum();
        let total: usize = all.iter().map(|(_, p)| p.partitions_total).sum();
        let keys: u64 = all
            .iter()
            .map(|(_, p)| p.keys + p.layers.iter().map(|l| l.keys_applied).sum::<u64>())
            .sum();
        eprintln!(
            "  {:>6.1}s  {done}/{total} partitions  {keys} keys",
            started.elapsed().as_secs_f64()
        );
    }
}

fn mb(b: u64) -> String {
    format!("{:.2}", b as f64 / 1e6)
}

pub fn create(a: &CreateArgs) -> anyhow::Result<()> {
    let site = site(&a.target)?;
    let started = Instant::now();
    eprintln!("backup to {}: {} nodes", a.to, site.nodes.len());
    let m = runtime()?.block_on(coordinate::create(
        &site,
        &a.to,
        a.incremental,
        (a.block_bytes, a.chunk_bytes),
        reporter(),
    ))?;
    let full_parts = m.entries.iter().filter(|e| e.full).count();
    let deleted: u64 = m.entries.iter().map(|e| e.deleted).sum();
    println!(
        "backup {}: {} (parent {}), {} partitions ({full_parts} written whole), {} keys, {deleted} deleted, {} MB, {:.2} s",
        m.id,
        if m.is_full() { "full" } else { "incremental" },
        m.parent.as_deref().unwrap_or("none"),
        m.partitions,
        m.keys(),
        mb(m.bytes()),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

pub fn list(from: &str) -> anyhow::Result<()> {
    let store = Store::open(from)?;
    let all = runtime()?.block_on(manifest::list(&store))?;
    println!(
        "{:<26} {:<11} {:<26} {:>6} {:>10} {:>9} {:>11}",
        "id", "kind", "parent", "parts", "keys", "deleted", "MB"
    );
    for m in &all {
        let deleted: u64 = m.entries.iter().map(|e| e.deleted).sum();
        println!(
            "{:<26} {:<11} {:<26} {:>6} {:>10} {:>9} {:>11}",
            m.id,
            if m.is_full() { "full" } else { "incremental" },
            m.parent.as_deref().unwrap_or("-"),
            m.partitions,
            m.keys(),
            deleted,
            mb(m.bytes())
        );
    }
    if all.is_empty() {
        println!("(no backups at {})", store.url());
    }
    Ok(())
}

/// The backup `id`, or the newest one.
async fn resolve(store: &Store, id: Option<&str>) -> anyhow::Result<String> {
    match id {
        Some(id) => Ok(id.to_string()),
        None => Ok(manifest::list(store)
            .await?
            .pop()
            .with_context(|| format!("{} holds no backup", store.url()))?
            .id),
    }
}

pub fn verify(from: &str, id: Option<&str>) -> anyhow::Result<()> {
    let store = Store::open(from)?;
    let rt = runtime()?;
    let id = rt.block_on(resolve(&store, id))?;
    let started = Instant::now();
    let r = rt
        .block_on(backup::verify::run(&store, &id))
        .with_context(|| format!("verifying backup {id}"))?;
    println!(
        "backup {id}: ok ({} layers, {} partitions, {} chunks, {} resolved objects, {} blocks, {} keys, {} MB read in {:.2} s)",
        r.layers,
        r.partitions,
        r.chunks,
        r.resolved,
        r.blocks,
        r.keys,
        mb(r.bytes),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

pub fn restore(a: &RestoreArgs) -> anyhow::Result<()> {
    a.order
        .parse::<backup::restore::Order>()
        .map_err(anyhow::Error::msg)?;
    let store = Store::open(&a.from)?;
    let rt = runtime()?;
    let id = rt.block_on(resolve(&store, a.backup.as_deref()))?;
    // Refuse a missing or damaged layer before any node starts.
    let chain = rt.block_on(manifest::chain(&store, &id))?;
    let site = site(&a.target)?;
    eprintln!(
        "restore {id} ({} layers, order {}) from {}: {} nodes",
        chain.len(),
        a.order,
        store.url(),
        site.nodes.len()
    );
    let started = Instant::now();
    let results = rt.block_on(coordinate::run_job(
        &site,
        &["RESTORE", &a.from, &id, &a.order],
        reporter(),
    ))?;
    // The nodes' own job time (the slowest node's): the command's wall time
    // adds up to one polling interval.
    let wall_seconds = started.elapsed().as_secs_f64();
    let seconds = results.iter().map(|(_, p)| p.seconds).fold(0.0, f64::max);
    // Per layer: the slowest node's time, the sums of the counts.
    let mut layers: Vec<LayerStats> = Vec::new();
    for (_, p) in &results {
        for (i, l) in p.layers.iter().enumerate() {
            if layers.len() <= i {
                layers.push(LayerStats {
                    id: l.id.clone(),
                    ..Default::default()
                });
            }
            let t = &mut layers[i];
            t.seconds = t.seconds.max(l.seconds);
            t.indexes_read += l.indexes_read;
            t.resolved_read += l.resolved_read;
            t.chunks_read += l.chunks_read;
            t.chunks_skipped += l.chunks_skipped;
            t.blocks_read += l.blocks_read;
            t.blocks_skipped += l.blocks_skipped;
            t.keys_applied += l.keys_applied;
            t.bytes_downloaded += l.bytes_downloaded;
        }
    }
    println!(
        "{:<26} {:>9} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>12} {:>9}",
        "layer",
        "seconds",
        "indexes",
        "resolved",
        "chunks",
        "skipped",
        "blocks",
        "skipped",
        "keys applied",
        "MB read"
    );
    for l in &layers {
        println!(
            "{:<26} {:>9.3} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>12} {:>9}",
            l.id,
            l.seconds,
            l.indexes_read,
            l.resolved_read,
            l.chunks_read,
            l.chunks_skipped,
            l.blocks_read,
            l.blocks_skipped,
            l.keys_applied,
            mb(l.bytes_downloaded)
        );
    }
    let sum = |f: fn(&LayerStats) -> u64| layers.iter().map(f).sum::<u64>();
    let (read, skipped, keys, bytes) = (
        sum(|l| l.blocks_read),
        sum(|l| l.blocks_skipped),
        sum(|l| l.keys_applied),
        sum(|l| l.bytes_downloaded),
    );
    println!(
        "restored {id} ({} order): {} layers, {read} blocks read, {skipped} skipped, {keys} keys applied, {} MB downloaded, {seconds:.2} s",
        a.order,
        chain.len(),
        mb(bytes)
    );
    if let Some(path) = &a.json {
        let summary = serde_json::json!({
            "backup": id, "order": a.order, "layers": layers, "blocks_read": read, "blocks_skipped": skipped,
            "chunks_read": sum(|l| l.chunks_read), "chunks_skipped": sum(|l| l.chunks_skipped),
            "keys_applied": keys, "bytes_downloaded": bytes, "seconds": seconds, "wall_seconds": wall_seconds,
        });
        std::fs::write(path, serde_json::to_string_pretty(&summary)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
