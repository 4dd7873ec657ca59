//! The `[backup]` schedule: a full backup every `full_every`, an
//! incremental every `incremental_every` in between, and the newest
//! `keep_full` full backups kept with what is built on them.
//!
//! Every node runs the loop; only one acts: the node with the smallest id
//! among those it can reach (all of them when standalone). It looks at the
//! store itself to decide what is due, so restarts, other coordinators
//! (a manual `deltagrid backup create`) and a change of acting node all
//! just work. Two nodes acting at once (a network split) cannot both run a
//! backup: each node runs one job at a time, and the loser's attempt fails
//! and is retried later.

use std::time::Duration;

use crate::coordinate::{self, now_ms, Site};
use crate::{manifest, Error, Node, Store};

#[derive(Clone, Debug)]
pub struct Schedule {
    pub to: String,
    pub full_every: Duration,
    pub incremental_every: Option<Duration>,
    /// Full backups to keep (with their incrementals); 0 keeps everything.
    pub keep_full: usize,
}

/// After a failed attempt, wait this long before the next one.
const RETRY: Duration = Duration::from_secs(60);

/// What this node needs to coordinate its site.
pub struct Coordinator {
    pub node: Node,
    pub node_id: String,
    pub client_addr: String,
}

pub async fn run(schedule: Schedule, me: Coordinator) {
    let store = match Store::open(&schedule.to) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("[backup] schedule disabled: {e}");
            return;
        }
    };
    // How often the acting node looks at the store.
    let check = schedule
        .incremental_every
        .unwrap_or(schedule.full_every)
        .min(schedule.full_every)
        / 10;
    let check = check.clamp(Duration::from_millis(500), Duration::from_secs(60));
    loop {
        tokio::time::sleep(check).await;
        let Some(site) = me.acting_site() else {
            continue;
        };
        let incremental = match due(&store, &schedule).await {
            Ok(Some(incremental)) => incremental,
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!("[backup] cannot read {}: {e}", store.url());
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        let sizes = (crate::create::BLOCK_BYTES, crate::create::CHUNK_BYTES);
        match coordinate::create(&site, &schedule.to, incremental, sizes, |_| {}).await {
            Ok(m) => tracing::info!(
                id = m.id,
                kind = if m.is_full() { "full" } else { "incremental" },
                keys = m.keys(),
                bytes = m.bytes(),
                "[backup] scheduled backup written"
            ),
            Err(e) => {
                tracing::error!(
                    "[backup] scheduled backup failed (retrying in {} s): {e}",
                    RETRY.as_secs()
                );
                tokio::time::sleep(RETRY).await;
                continue;
            }
        }
        match coordinate::apply_retention(&store, schedule.keep_full).await {
            Ok(removed) if !removed.is_empty() => {
                tracing::info!(?removed, "[backup] retention removed old backups")
            }
            Ok(_) => {}
            Err(e) => tracing::error!("[backup] retention failed: {e}"),
        }
    }
}

/// Some(false): a full backup is due; Some(true): an incremental.
/// Reads manifests newest first (ids sort by time) down to the newest full
/// one, not the whole store.
async fn due(store: &Store, s: &Schedule) -> Result<Option<bool>, Error> {
    let mut ids = store.folders().await?;
    ids.sort();
    let now = now_ms();
    let age = |m: &manifest::Manifest| Duration::from_millis(now.saturating_sub(m.created_ms));
    let mut newest = None;
    for id in ids.iter().rev().filter(|id| manifest::valid_id(id)) {
        let m = match manifest::Manifest::load(store, id).await {
            Ok(m) => m,
            Err(Error::Missing { .. }) => continue, // interrupted: does not exist
            Err(e) => return Err(e),
        };
        if newest.is_none() && m.format != manifest::FORMAT {
            // Nothing restores on top of an older format: start a new chain.
            return Ok(Some(false));
        }
        let newest_age = *newest.get_or_insert(age(&m));
        if m.is_full() {
            if age(&m) >= s.full_every {
                return Ok(Some(false));
            }
            return Ok(s
                .incremental_every
                .filter(|every| newest_age >= *every)
                .map(|_| true));
        }
    }
    Ok(Some(false))
}

impl Coordinator {
    /// The site to back up, when this node is the one that acts.
    fn acting_site(&self) -> Option<Site> {
        let ks = &self.node.ks;
        let mut site = Site {
            id: self.node.site_id,
            name: self.node.site_name.clone(),
            partitions: ks.partitions(),
            nodes: vec![self.client_addr.clone()],
            // BACKUPJOB is internal: the coordinator logs in as a node.
            user: Some(cluster::internal_auth::USER.to_string()),
            password: cluster::internal_auth::password(self.node.cluster.as_deref()),
        };
        let Some(cluster) = &self.node.cluster else {
            return Some(site);
        };
        let members: Vec<_> = cluster.members().into_iter().flatten().collect();
        let reachable = members
            .iter()
            .filter(|m| m.connected)
            .map(|m| m.node_id.as_str());
        if reachable.chain([self.node_id.as_str()]).min() != Some(self.node_id.as_str()) {
            return None;
        }
        site.nodes = members
            .iter()
            .filter(|m| m.connected || m.node_id == self.node_id)
            .map(|m| m.client_addr.clone())
            .collect();
        Some(site)
    }
}
