//! Partitions that wait for a copy from a disk, as this node serves them:
//! `CLUSTERDOWN` for their slots, what `cluster status` lists, and the
//! operator's way out (`deltagrid cluster revoke`). The decisions are the
//! metadata's (`metadata::waiting`).

use std::sync::atomic::Ordering;

use crate::metadata::{Command, SiteMetadata};

use super::Cluster;

/// A partition that waits, and for whom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitingStatus {
    pub partition: u16,
    /// Names of the members it waits for (empty: about to be resolved).
    pub awaits: Vec<String>,
}

impl Cluster {
    /// Whether this node waits for disks at all: only when it persists its
    /// data (every node of a site shares that setting).
    pub(crate) fn waits_for_disks(&self) -> bool {
        self.store.get().is_some()
    }

    /// Member `i` can be acted upon now: this node, or one whose link is
    /// up (the leader counts itself reachable: when every node restarted,
    /// it is one of them).
    pub(crate) fn reachable(&self, i: usize) -> bool {
        i == self.my_index || (self.down_for(i).is_none() && self.is_connected(i))
    }

    /// Follows the metadata's waiting partitions.
    pub(crate) fn set_waiting(&self, meta: &SiteMetadata) {
        let on = self.waits_for_disks();
        for (p, flag) in self.waiting.iter().enumerate() {
            flag.store(
                on && meta.waiting.contains_key(&(p as u16)),
                Ordering::Release,
            );
        }
    }

    /// Partition `p` answers CLUSTERDOWN: it waits for a copy.
    pub fn is_waiting(&self, p: usize) -> bool {
        self.waiting
            .get(p)
            .is_some_and(|w| w.load(Ordering::Acquire))
    }

    /// The partitions that wait, with the names of the members they wait for.
    pub fn waiting_status(&self) -> Vec<WaitingStatus> {
        let Some(meta) = self.metadata.get().map(|m| m.current()) else {
            return Vec::new();
        };
        if !self.waits_for_disks() {
            return Vec::new();
        }
        meta.waiting
            .keys()
            .map(|p| WaitingStatus {
                partition: *p,
                awaits: meta
                    .awaits(*p)
                    .iter()
                    .map(|n| {
                        meta.members
                            .get(n)
                            .map_or_else(|| n.to_string(), |m| m.name.clone())
                    })
                    .collect(),
            })
            .collect()
    }

    /// Stops every partition waiting for dead member `node` (its name or
    /// node id): each resumes from the best copy that came back, and
    /// acknowledged writes only that member held are lost.
    pub async fn revoke(&self, node: &str) -> Result<String, String> {
        let (md, meta, id) = self.member_named(node)?;
        let waited = meta
            .waiting
            .keys()
            .filter(|p| meta.awaits(**p).contains(&id))
            .count();
        md.propose(Command::Revoke { id })
            .await
            .map_err(|e| e.to_string())?;
        Ok(format!(
            "node {node} (id {id}) revoked: {waited} partitions stop waiting for it and resume from the best copy that came back"
        ))
    }
}
