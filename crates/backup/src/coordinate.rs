//! Coordinating a site's nodes for a backup or a restore (the CLI and the
//! `[backup]` schedule both use this): send every node its `BACKUPJOB`,
//! poll their progress until none runs, and for a backup write the
//! manifest once every partition has its entry. Retention removes whole
//! chains (a full backup and the incrementals built on it), manifests
//! first, so a half-removed backup no longer exists.

use std::time::Duration;

use crate::jobs::Progress;
use crate::manifest::{self, Manifest};
use crate::{create, Error, Store};

/// A site as the coordinator sees it.
#[derive(Clone, Debug)]
pub struct Site {
    pub id: u16,
    pub name: String,
    pub partitions: u16,
    /// Redis addresses (host:port) of its nodes.
    pub nodes: Vec<String>,
    /// Who the coordinator logs in as: BACKUPJOB is an `@internal`
    /// command (a node logs in as `cluster::internal_auth::USER`; the CLI
    /// as a user the operator gave `+@internal`).
    pub user: Option<String>,
    pub password: Option<String>,
}

async fn connect(addr: &str, site: &Site) -> Result<redis::aio::MultiplexedConnection, Error> {
    let refused = |e: String| Error::Refused(format!("node {addr}: {e}"));
    let (host, port) = addr
        .rsplit_once(':')
        .ok_or_else(|| refused("not host:port".into()))?;
    let info = redis::ConnectionInfo {
        addr: redis::ConnectionAddr::Tcp(
            host.to_string(),
            port.parse().map_err(|_| refused("bad port".into()))?,
        ),
        redis: redis::RedisConnectionInfo {
            username: site.user.clone(),
            password: site.password.clone(),
            ..Default::default()
        },
    };
    let client = redis::Client::open(info).map_err(|e| refused(e.to_string()))?;
    tokio::time::timeout(
        Duration::from_secs(5),
        client.get_multiplexed_async_connection(),
    )
    .await
    .map_err(|_| refused("connect timed out".into()))?
    .map_err(|e| refused(e.to_string()))
}

/// Starts `args` on every node and polls until none runs; calls
/// `progress` with every poll's results. The final progress per node, or
/// the errors of those that failed.
pub async fn run_job(
    site: &Site,
    args: &[&str],
    mut progress: impl FnMut(&[(String, Progress)]),
) -> Result<Vec<(String, Progress)>, Error> {
    let mut conns = Vec::new();
    for addr in &site.nodes {
        let mut c = connect(addr, site).await?;
        redis::cmd("BACKUPJOB")
            .arg(args)
            .query_async::<()>(&mut c)
            .await
            .map_err(|e| Error::Refused(format!("node {addr}: {e}")))?;
        conns.push((addr.clone(), c));
    }
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut all = Vec::new();
        for (addr, c) in conns.iter_mut() {
            let json: String = redis::cmd("BACKUPJOB")
                .arg("STATUS")
                .query_async(c)
                .await
                .map_err(|e| Error::Refused(format!("node {addr}: {e}")))?;
            let p: Progress = serde_json::from_str(&json)
                .map_err(|e| Error::Refused(format!("node {addr}: {e}")))?;
            all.push((addr.clone(), p));
        }
        progress(&all);
        if all.iter().all(|(_, p)| p.state != "running") {
            let failed: Vec<String> = all
                .iter()
                .filter(|(_, p)| p.state != "done")
                .map(|(a, p)| format!("node {a}: {}", p.error.as_deref().unwrap_or(&p.state)))
                .collect();
            if !failed.is_empty() {
                return Err(Error::Refused(failed.join("; ")));
            }
            return Ok(all);
        }
    }
}

/// A full backup, or an incremental on top of the newest one at `url`.
pub async fn create(
    site: &Site,
    url: &str,
    incremental: bool,
    (block_bytes, chunk_bytes): (usize, usize),
    progress: impl FnMut(&[(String, Progress)]),
) -> Result<Manifest, Error> {
    let store = Store::open(url)?;
    let parent = match incremental {
        true => Some(manifest::list(&store).await?.pop().ok_or_else(|| {
            Error::Refused(format!(
                "--incremental: {} holds no backup to build on (take a full one first)",
                store.url()
            ))
        })?),
        false => None,
    };
    if let Some(p) = &parent {
        p.restorable()?;
    }
    if let Some(p) = parent.as_ref().filter(|p| p.partitions != site.partitions) {
        return Err(Error::Refused(format!(
            "the newest backup {} has {} partitions and this site {}: take a full backup",
            p.id, p.partitions, site.partitions
        )));
    }
    let created_ms = now_ms();
    let id = manifest::new_id(created_ms);
    let parent_id = parent.as_ref().map_or("-".to_string(), |p| p.id.clone());
    let (block, chunk) = (block_bytes.to_string(), chunk_bytes.to_string());
    let results = run_job(
        site,
        &["CREATE", url, &id, &parent_id, &block, &chunk],
        progress,
    )
    .await?;
    let m = Manifest {
        format: manifest::FORMAT,
        id,
        parent: parent.map(|p| p.id),
        created_ms,
        site_id: site.id,
        site_name: site.name.clone(),
        partitions: site.partitions,
        entries: Vec::new(),
    };
    create::finish(&store, m, results.into_iter().flat_map(|(_, p)| p.entries)).await
}

/// Keeps the newest `keep_full` full backups and what is built on them;
/// removes older chains. The ids removed.
pub async fn apply_retention(store: &Store, keep_full: usize) -> Result<Vec<String>, Error> {
    let all = manifest::list(store).await?;
    let fulls: Vec<&Manifest> = all.iter().filter(|m| m.is_full()).collect();
    if keep_full == 0 || fulls.len() <= keep_full {
        return Ok(Vec::new());
    }
    let oldest_kept = &fulls[fulls.len() - keep_full];
    // Newest first, so an interrupted removal leaves whole chains behind.
    let doomed: Vec<&Manifest> = all
        .iter()
        .filter(|m| (m.created_ms, &m.id) < (oldest_kept.created_ms, &oldest_kept.id))
        .collect();
    let mut removed = Vec::new();
    for m in doomed.into_iter().rev() {
        store.remove_folder(&m.id).await?;
        removed.push(m.id.clone());
    }
    Ok(removed)
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
