//! The site's control loop, on every node: start the metadata group, form
//! the site once every seed has said hello, install each partition table
//! the group commits, and, on the metadata leader, turn a member whose
//! connection has been down for [`DETECT_AFTER`] into a committed failover:
//! `MarkDead` (which also drops it from every in-sync set, releasing writes
//! waiting for its acks) and then, once its lease has surely run out
//! ([`crate::lease::PROMOTE_AFTER`]), a table that promotes an in-sync
//! replica wherever it was primary. A new leader elected after the old one
//! died finds the same dead member and finishes the job.
//!
//! A member counts as down from the moment its connection closed, or went
//! silent for [`crate::transport::SILENT_AFTER`], or, for one that never
//! connected, that long after it became known: the failure-detection time
//! is [`DETECT_AFTER`] on top of that.
//!
//! The leader also repairs: a partition with fewer replicas than configured
//! gets new ones on the least loaded active members (they receive a
//! snapshot from the primary and join the in-sync set once loaded), and a
//! dead member whose connection is back is made active again, so it can
//! take such replicas.
//!
//! And it runs membership: a member that joined becomes a voter of the
//! metadata group; with nobody dead, partitions migrate step by step
//! towards a balanced table over the active members
//! ([`rebalance::migrate`]), which gives a joined node its share and
//! drains a leaving one; a leaving member that holds nothing is removed.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::cluster::Cluster;
use crate::metadata::{
    rebalance, waiting, Command, DiskCopy, MemberState, Metadata, MetadataConfig, NodeId, Seed,
    SiteMetadata,
};

/// How long a member's connection must stay down before it is declared dead.
pub const DETECT_AFTER: Duration = Duration::from_millis(1500);
const CHECK_EVERY: Duration = Duration::from_millis(250);
/// Partitions migrating at once (each is a snapshot in the replication
/// stream, which is bounded per peer).
const MAX_MOVING: usize = 8;

pub async fn run(c: Arc<Cluster>) {
    let mut config = MetadataConfig::new(
        c.my_index as u64 + 1,
        c.site_id,
        c.data_dir.join("metadata"),
    );
    config.secret = c
        .settings
        .secret
        .as_deref()
        .map(|s| Arc::from(s.as_bytes()));
    config.tls = c.settings.tls.clone();
    let md = match Metadata::start(config, None).await {
        Ok(md) => md,
        Err(e) => {
            tracing::error!("metadata store could not start: {e}; this node stays out of the site");
            return;
        }
    };
    if c.metadata.set(md).is_err() {
        return;
    }
    let Some(md) = c.metadata.get() else { return };
    // Restarted into a formed site: this process has none of the data the
    // table says it holds, or (with persistence) what it loaded from disk
    // may lack the last writes its replicas acknowledged. Serve nothing
    // until the group has failed its copies over to members that stayed
    // up (MarkDead) and made it active again; a partition with no such
    // copy stays here, with what was loaded.
    let persistent = c.waits_for_disks();
    let holds = md.current().table.as_ref().is_some_and(|t| {
        let me = c.my_index as u64 + 1;
        t.partitions
            .iter()
            .any(|a| a.primary == me || a.replicas.contains(&me))
    });
    if holds || (persistent && !md.current().waiting.is_empty()) {
        c.rejoining
            .store(true, std::sync::atomic::Ordering::Release);
        if persistent {
            tracing::warn!(
                "restarted into a formed site: giving up this node's copies to replicas that stayed up (copies loaded from disk are kept where no other copy is left)"
            );
        } else {
            tracing::warn!(
                "restarted without data into a formed site: giving up this node's copies"
            );
        }
        let me = c.my_index as u64 + 1;
        // With persistence, the copies loaded go with it: a partition whose
        // every copy went down waits for the best of them.
        let cmd = if persistent {
            Command::Restarted {
                id: me,
                copies: disk_copies(&c),
                whole: c.restored_from_disk(c.my_index),
            }
        } else {
            Command::MarkDead { id: me }
        };
        loop {
            match md.propose(cmd.clone()).await {
                Ok(_) => break,
                Err(e) => {
                    tracing::warn!("marking this restarted node dead: {e}; retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    }
    if c.settings.joined.is_some() {
        // Not a seed: the site exists; its leader adds this node to the
        // metadata group, which brings the table here.
        while !md.current().is_formed() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    } else {
        form(&c, md).await;
    }
    tokio::spawn(detect_failures(c.clone()));
    let mut rx = md.subscribe();
    loop {
        let meta = rx.borrow_and_update().clone();
        c.sync_members(&meta);
        c.set_waiting(&meta);
        if let Some(t) = &meta.table {
            c.install_table(Cluster::table_from_metadata(t));
        }
        if rx.changed().await.is_err() {
            return;
        }
    }
}

/// A seed forms the site once every seed has said hello.
async fn form(c: &Arc<Cluster>, md: &Metadata) {
    if md.current().is_formed() {
        return; // a restart: members may have left since
    }
    while !c.all_known() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let seeds: Vec<Seed> = c
        .members()
        .into_iter()
        .take(c.settings.seeds.len())
        .enumerate()
        .filter_map(|(i, m)| {
            m.map(|m| Seed {
                id: i as u64 + 1,
                raft_addr: m.cluster_addr.to_string(),
                name: m.node_id,
                cluster_addr: m.cluster_addr,
                client_addr: m.client_addr,
                tls_client_addr: m.tls_client_addr,
            })
        })
        .collect();
    loop {
        match md.form(&seeds, c.partitions, c.settings.replicas).await {
            Ok(()) => break,
            Err(e) => {
                tracing::warn!("forming the site: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
    tracing::info!(
        members = seeds.len(),
        partitions = c.partitions,
        replicas = c.settings.replicas,
        "site formed"
    );
    // The token nodes log in with to run each other's internal commands:
    // every seed proposes one, the first committed stays.
    while md.current().internal_token == [0, 0] {
        let token = crate::internal_auth::new_token();
        if let Err(e) = md.propose(Command::SetInternalToken { token }).await {
            tracing::warn!("setting the site's internal token: {e}; retrying");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

async fn detect_failures(c: Arc<Cluster>) {
    let Some(md) = c.metadata.get() else { return };
    let adding: Arc<Mutex<HashSet<NodeId>>> = Default::default();
    // Metadata for which failover, repair and migration had nothing to do:
    // they depend on nothing else, so they are not worked out again (each
    // walks every partition) until the metadata changes.
    let mut settled: Option<Arc<SiteMetadata>> = None;
    // When this node, as leader, first saw each member dead.
    let mut dead_since: HashMap<NodeId, std::time::Instant> = HashMap::new();
    loop {
        tokio::time::sleep(CHECK_EVERY).await;
        if !md.is_leader() {
            settled = None;
            dead_since.clear();
            continue;
        }
        let meta = md.current();
        for (id, m) in &meta.members {
            let i = (*id as usize).saturating_sub(1);
            // Back only once its copies failed over (it restarted without
            // data): else the failover would see it alive and skip it.
            let failed_over = || {
                meta.table.as_ref().is_none_or(|t| {
                    !t.partitions
                        .iter()
                        .any(|a| a.holds(*id) && (a.primary != *id || !a.replicas.is_empty()))
                })
            };
            if m.state == MemberState::Dead && c.reachable(i) && failed_over() {
                tracing::info!(node = %m.name, "dead member is reachable again: making it active");
                // What it still holds had no other copy: those partitions
                // restart empty (or, with persistence, as its disk held
                // them, which remote sites' changes may not all have
                // reached), so remote sites deliver them again: a re-sync
                // merges whole values, which applies nothing twice.
                let lost = meta
                    .table
                    .as_ref()
                    .map_or(0, |t| t.partitions.iter().filter(|a| a.holds(*id)).count());
                let back = Command::AddMember {
                    id: *id,
                    name: m.name.clone(),
                    cluster_addr: m.cluster_addr,
                    client_addr: m.client_addr.clone(),
                    tls_client_addr: m.tls_client_addr.clone(),
                };
                // First the incarnation: if the member came back and this
                // were lost, nothing would bring it back.
                // Whole on its disk: as it reported, or says on its link.
                let whole =
                    c.restored_from_disk(i) || meta.restarted.get(id).is_some_and(|r| r.whole);
                if lost > 0 && whole {
                    tracing::info!(
                        node = %m.name,
                        partitions = lost,
                        "partitions had no other copy: they keep what its disk held, every acknowledged write (fsync = always); remote sites resume"
                    );
                } else if lost > 0 {
                    let value = crate::auth::random_u64();
                    match md.propose(Command::NewDataIncarnation { value }).await {
                        Ok(_) => tracing::warn!(
                            node = %m.name,
                            partitions = lost,
                            "partitions had no other copy (empty, or as loaded from its disk): new data incarnation, remote sites re-sync"
                        ),
                        Err(e) => {
                            tracing::warn!("new data incarnation not committed: {e}");
                            continue;
                        }
                    }
                }
                if let Err(e) = md.propose(back).await {
                    tracing::warn!(node = %m.name, "could not reactivate: {e}");
                }
                continue;
            }
            if m.state != MemberState::Active || i == c.my_index {
                continue;
            }
            if c.down_for(i).is_some_and(|d| d >= DETECT_AFTER) {
                tracing::warn!(node = %m.name, "member unreachable for {DETECT_AFTER:?}: marking it dead");
                if let Err(e) = md.propose(Command::MarkDead { id: *id }).await {
                    tracing::warn!(node = %m.name, "could not mark dead: {e}");
                }
            }
        }
        let mut meta = md.current();
        let quiet = settled.as_ref().is_some_and(|s| Arc::ptr_eq(s, &meta));
        // Promote in-sync replicas wherever a dead member was primary (also
        // finishes a failover an earlier leader began), once no lease of
        // a dead primary can be left.
        let now = std::time::Instant::now();
        dead_since.retain(|id, _| {
            meta.members
                .get(id)
                .is_some_and(|m| m.state == MemberState::Dead)
        });
        for (id, m) in &meta.members {
            if m.state == MemberState::Dead {
                dead_since.entry(*id).or_insert(now);
            }
        }
        let leases_out = dead_since
            .values()
            .all(|t| now.duration_since(*t) >= crate::lease::PROMOTE_AFTER);
        let wait = c.waits_for_disks();
        let failover = (!quiet)
            .then(|| rebalance::failover_command(&meta, wait))
            .flatten();
        if failover.is_some() && !leases_out {
            continue; // not settled: this is worked out again next time
        }
        if let Some(cmd) = failover {
            match md.propose(cmd).await {
                Ok(epoch) => tracing::warn!(epoch, "failover committed"),
                Err(e) => tracing::warn!("failover not committed: {e}"),
            }
            meta = md.current();
        }
        if wait && resolve_waiting(&c, md, &meta).await {
            continue;
        }
        if let Some(cmd) = (!quiet)
            .then(|| repair(&meta, c.settings.replicas, wait))
            .flatten()
        {
            match md.propose(cmd).await {
                Ok(epoch) => tracing::info!(epoch, "new replicas assigned"),
                Err(e) => tracing::warn!("replica repair not committed: {e}"),
            }
            continue;
        }
        membership(&c, md, &adding).await;
        if quiet {
            continue;
        }
        if let Some(cmd) = rebalance::migrate_command(&meta, c.settings.replicas, MAX_MOVING) {
            match md.propose(cmd).await {
                Ok(epoch) => tracing::info!(epoch, "migration step committed"),
                Err(e) => tracing::warn!("migration step not committed: {e}"),
            }
            continue;
        }
        settled = Some(meta);
    }
}

/// Joined members become voters of the metadata group (in the
/// background: the leader waits for the new one to catch up); leaving
/// members that hold nothing any more are removed from the site and the
/// group.
async fn membership(c: &Arc<Cluster>, md: &Metadata, adding: &Arc<Mutex<HashSet<NodeId>>>) {
    let meta = md.current();
    let voters = md.voters();
    for (id, m) in &meta.members {
        if m.state != MemberState::Active || voters.contains(id) || !adding.lock().insert(*id) {
            continue;
        }
        let (c, adding, id, addr) = (c.clone(), adding.clone(), *id, m.cluster_addr.to_string());
        tokio::spawn(async move {
            if let Some(md) = c.metadata.get() {
                match md.add_voter(id, &addr, Duration::from_secs(30)).await {
                    Ok(()) => tracing::info!(node = id, "joined member is a metadata voter"),
                    Err(e) => tracing::warn!(
                        node = id,
                        "could not add the joined member to the metadata group: {e}"
                    ),
                }
            }
            adding.lock().remove(&id);
        });
    }
    for id in voters.iter().filter(|v| !meta.members.contains_key(v)) {
        if let Err(e) = md.remove_voter(*id).await {
            tracing::warn!(
                node = id,
                "could not take a removed member out of the metadata group: {e}"
            );
        }
    }
    let Some(table) = &meta.table else { return };
    for (id, m) in &meta.members {
        if m.state != MemberState::Leaving || table.partitions.iter().any(|a| a.holds(*id)) {
            continue;
        }
        match md.propose(Command::RemoveMember { id: *id }).await {
            Ok(_) => tracing::info!(node = %m.name, "member drained and removed from the site"),
            Err(e) => {
                tracing::warn!(node = %m.name, "could not remove the drained member: {e}");
                continue;
            }
        }
        if voters.contains(id) {
            if let Err(e) = md.remove_voter(*id).await {
                tracing::warn!(node = %m.name, "could not take the member out of the metadata group: {e}");
            }
        }
    }
}

/// A table where every partition with a live primary has `want` replicas
/// on active members (fewest replicas first), dead ones dropped. None when
/// nothing needs to change. New replicas are not in sync: they get there by
/// loading a snapshot. With `wait_for_disks`, a partition that waits for a
/// copy from a disk gets no replicas until it has one.
pub fn repair(meta: &SiteMetadata, want: usize, wait_for_disks: bool) -> Option<Command> {
    let table = meta.table.as_ref()?;
    let active: Vec<NodeId> = meta.active_members();
    let mut load: HashMap<NodeId, usize> = active.iter().map(|n| (*n, 0)).collect();
    for a in &table.partitions {
        for b in &a.replicas {
            if let Some(n) = load.get_mut(b) {
                *n += 1;
            }
        }
    }
    let mut partitions = table.partitions.clone();
    for (p, a) in partitions.iter_mut().enumerate() {
        if !active.contains(&a.primary) {
            continue; // failover first
        }
        if wait_for_disks && meta.waiting.contains_key(&(p as u16)) {
            continue;
        }
        a.replicas.retain(|b| active.contains(b));
        a.in_sync.retain(|b| a.replicas.contains(b));
        while a.replicas.len() < want {
            let candidate = active
                .iter()
                .filter(|n| **n != a.primary && !a.replicas.contains(n))
                .min_by_key(|n| (load.get(n).copied().unwrap_or(0), **n))
                .copied();
            let Some(n) = candidate else { break };
            a.replicas.push(n);
            *load.entry(n).or_default() += 1;
        }
    }
    (partitions != table.partitions).then_some(Command::SetTable {
        partitions,
        expected_epoch: table.epoch,
    })
}

/// This node's copies loaded from its disk, as [`Command::Restarted`]
/// reports them.
fn disk_copies(c: &Cluster) -> Vec<DiskCopy> {
    c.keyspace()
        .loaded_copies()
        .into_iter()
        .map(|(partition, next_seq, v)| DiskCopy {
            partition,
            next_seq,
            hlc: v.hlc,
            site: v.site,
        })
        .collect()
}

/// On the leader of a site whose nodes persist their data: gives each
/// waiting partition that awaits nobody to the best copy that came back
/// ([`waiting::resolutions`]), among members this node can reach. True
/// when it committed something.
async fn resolve_waiting(c: &Arc<Cluster>, md: &Metadata, meta: &SiteMetadata) -> bool {
    let Some(table) = &meta.table else {
        return false;
    };
    let reachable = |n: NodeId| c.reachable((n as usize).saturating_sub(1));
    let chosen: Vec<(u16, NodeId, bool)> = waiting::resolutions(meta)
        .into_iter()
        .filter(|(_, n, _)| reachable(*n))
        .collect();
    if chosen.is_empty() {
        return false;
    }
    // A partition that starts empty, or from a disk that did not come back
    // whole, lacks changes remote sites delivered: they deliver them again.
    let incomplete = chosen.iter().filter(|(_, _, whole)| !whole).count();
    if incomplete > 0 {
        let value = crate::auth::random_u64();
        if let Err(e) = md.propose(Command::NewDataIncarnation { value }).await {
            tracing::warn!("new data incarnation not committed: {e}");
            return false;
        }
        tracing::warn!(
            partitions = incomplete,
            "waiting partitions resume from a copy that may lack changes: new data incarnation, remote sites re-sync"
        );
    }
    let cmd = Command::Resolve {
        partitions: chosen.iter().map(|(p, n, _)| (*p, *n)).collect(),
        expected_epoch: table.epoch,
    };
    match md.propose(cmd).await {
        Ok(epoch) => {
            tracing::warn!(
                epoch,
                partitions = chosen.len(),
                "partitions whose every copy went down resume from the best copy that came back"
            );
            true
        }
        Err(e) => {
            tracing::warn!("waiting partitions not resolved: {e}");
            false
        }
    }
}
