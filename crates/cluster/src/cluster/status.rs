//! What `/status`, `/metrics`, `INFO` and `deltagrid cluster status` show
//! of the site as this node sees it.

use std::sync::Arc;

use super::Cluster;
use crate::metadata::{Metadata, NodeId, SiteMetadata};
use crate::placement::PartitionOwners;

/// What `/status`, `/metrics` and `deltagrid cluster status` show of a site.
#[derive(Clone, Debug)]
pub struct SiteStatus {
    pub formed: bool,
    pub epoch: u64,
    pub leader: Option<String>,
    pub primary_changes: u64,
    /// Partitions with a handover asked or a replica still loading.
    pub migrating: usize,
    /// Handovers this node committed (partitions it handed to another).
    pub handovers: u64,
    /// This node holds its lease: it may serve the partitions it leads.
    pub lease: bool,
    pub members: Vec<MemberStatus>,
    /// Partitions every copy of which went down, waiting for one to come
    /// back from a disk.
    pub waiting: Vec<super::WaitingStatus>,
}

#[derive(Clone, Debug)]
pub struct MemberStatus {
    pub node_id: String,
    pub cluster_addr: String,
    pub client_addr: String,
    pub myself: bool,
    pub connected: bool,
    /// Active, Leaving or Dead, as the metadata group has it.
    pub state: String,
    pub primaries: usize,
    pub replicas: usize,
    pub in_sync: usize,
    /// Replication bytes this node has queued for the member.
    pub pending_bytes: usize,
    /// Changes of this node's primaries the member has not acknowledged.
    pub lag_changes: u64,
}

impl Cluster {
    pub fn status(&self) -> SiteStatus {
        let table = self.table();
        let meta = self.metadata.get().map(|m| m.current());
        let leader = self.metadata.get().and_then(|m| m.leader());
        let members = self.members();
        let name = |i: usize| {
            members
                .get(i)
                .and_then(|m| m.as_ref())
                .map(|m| m.node_id.clone())
        };
        let lags = table
            .as_ref()
            .map(|t| self.replicator.lags(t))
            .unwrap_or_default();
        SiteStatus {
            formed: table.is_some(),
            epoch: table.as_ref().map_or(0, |t| t.epoch),
            leader: leader.and_then(|id| name((id as usize).saturating_sub(1))),
            primary_changes: self
                .primary_changes
                .load(std::sync::atomic::Ordering::Relaxed),
            migrating: table.as_ref().map_or(0, |t| {
                t.partitions
                    .iter()
                    .filter(|o| o.moving_to.is_some() || o.replicas.len() != o.in_sync.len())
                    .count()
            }),
            handovers: self
                .handovers_done
                .load(std::sync::atomic::Ordering::Relaxed),
            lease: self.lease.valid(),
            waiting: self.waiting_status(),
            members: self
                .known_addrs()
                .into_iter()
                .map(|(i, addr)| {
                    let m = &members[i];
                    let count = |f: &dyn Fn(&PartitionOwners) -> bool| {
                        table
                            .as_ref()
                            .map_or(0, |t| t.partitions.iter().filter(|o| f(o)).count())
                    };
                    let state = meta
                        .as_ref()
                        .and_then(|md| md.members.get(&(i as u64 + 1)))
                        .map_or("unknown".to_string(), |m| {
                            format!("{:?}", m.state).to_lowercase()
                        });
                    MemberStatus {
                        node_id: m.as_ref().map_or_else(|| "?".into(), |m| m.node_id.clone()),
                        cluster_addr: addr.to_string(),
                        client_addr: m
                            .as_ref()
                            .map_or_else(String::new, |m| m.client_addr.clone()),
                        myself: i == self.my_index,
                        connected: i == self.my_index || m.as_ref().is_some_and(|m| m.connected),
                        state,
                        primaries: count(&|o| o.primary == i),
                        replicas: count(&|o| o.replicas.contains(&i)),
                        in_sync: count(&|o| o.in_sync.contains(&i)),
                        pending_bytes: if i == self.my_index {
                            0
                        } else {
                            self.replicator.pending_bytes(i)
                        },
                        lag_changes: lags.get(i).copied().unwrap_or(0),
                    }
                })
                .collect(),
        }
    }

    /// The metadata, as it stands, and the id of member `node` (its name,
    /// or its node id), for an operator's command.
    pub(crate) fn member_named(
        &self,
        node: &str,
    ) -> Result<(&Metadata, Arc<SiteMetadata>, NodeId), String> {
        let md = self
            .metadata
            .get()
            .ok_or("the site's metadata is not running on this node")?;
        let meta = md.current();
        let id = meta
            .members
            .iter()
            .find(|(id, m)| m.name == node || id.to_string() == node)
            .map(|(id, _)| *id)
            .ok_or_else(|| format!("no member {node:?} in this site"))?;
        Ok((md, meta, id))
    }

    /// Starts draining member `node` (its name, or its node id): its
    /// partitions migrate to the others, then it is removed and its
    /// process ends.
    pub async fn leave(&self, node: &str) -> Result<String, String> {
        let (md, meta, id) = self.member_named(node)?;
        let others = meta
            .active_members()
            .into_iter()
            .filter(|m| *m != id)
            .count();
        if others == 0 {
            return Err(
                "it is the site's only active member: nowhere to move its partitions".into(),
            );
        }
        md.propose(crate::metadata::Command::MarkLeaving { id })
            .await
            .map_err(|e| e.to_string())?;
        Ok(format!(
            "node {node} (id {id}) is leaving: its partitions move to the other members"
        ))
    }
}
