//! [`Cluster`]: this node's view of its site, and the routing check every
//! keyed command passes in cluster mode.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use commands::{CmdError, CommandSpec, Flags};
use keyspace::slot::{key_slot, slot_partition};
use parking_lot::RwLock;

use keyspace::Keyspace;

use crate::placement::PartitionTable;
use crate::replication::Replicator;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replication {
    Sync,
    Async,
}

#[derive(Clone, Debug)]
pub struct ClusterSettings {
    pub cluster_listen: SocketAddr,
    /// The site's initial members, by their cluster address; order matters
    /// (placement follows it) and must be the same on every node.
    pub seeds: Vec<SocketAddr>,
    pub backups: usize,
    pub replication: Replication,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub node_id: String,
    pub cluster_addr: SocketAddr,
    pub client_addr: String,
    /// The 40-hex-digit id Redis Cluster clients expect.
    pub cluster_id: String,
    pub connected: bool,
}

pub struct Cluster {
    pub settings: ClusterSettings,
    pub site_id: u16,
    pub partitions: u16,
    pub my_index: usize,
    pub me: Member,
    /// One slot per seed; None until that member said hello.
    members: RwLock<Vec<Option<Member>>>,
    table: RwLock<Option<Arc<PartitionTable>>>,
    ks: Arc<Keyspace>,
    pub replicator: Arc<Replicator>,
}

/// Derives a stable 40-hex-digit id from a node id: FNV-1a of the name,
/// then five splitmix64 steps for the digits.
pub fn cluster_id(node_id: &str) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in node_id.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    (0..5)
        .map(|_| {
            h = h.wrapping_add(0x9e3779b97f4a7c15);
            let mut z = h;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
            format!("{:08x}", (z ^ (z >> 31)) as u32)
        })
        .collect()
}

impl Cluster {
    pub fn new(
        settings: ClusterSettings,
        site_id: u16,
        partitions: u16,
        node_id: &str,
        client_addr: SocketAddr,
        ks: Arc<Keyspace>,
    ) -> Result<Arc<Cluster>, String> {
        let my_index = settings
            .seeds
            .iter()
            .position(|s| *s == settings.cluster_listen)
            .ok_or_else(|| format!("node.cluster_listen {} is not one of site.seeds", settings.cluster_listen))?;
        let me = Member {
            node_id: node_id.to_string(),
            cluster_addr: settings.cluster_listen,
            client_addr: client_addr.to_string(),
            cluster_id: cluster_id(node_id),
            connected: true,
        };
        let n = settings.seeds.len();
        let mut members = vec![None; n];
        members[my_index] = Some(me.clone());
        let cluster = Arc::new_cyclic(|weak| Cluster {
            settings,
            site_id,
            partitions,
            my_index,
            me,
            members: RwLock::new(members),
            table: RwLock::new(None),
            replicator: Arc::new(Replicator::new(ks.clone(), weak.clone(), n, my_index)),
            ks: ks.clone(),
        });
        ks.set_sink(cluster.replicator.clone());
        cluster.maybe_form();
        Ok(cluster)
    }

    pub fn members(&self) -> Vec<Option<Member>> {
        self.members.read().clone()
    }

    pub fn table(&self) -> Option<Arc<PartitionTable>> {
        self.table.read().clone()
    }

    /// Records a member's hello; false when it is not one of the seeds or
    /// claims another member's place.
    pub fn learn(&self, m: Member) -> bool {
        let Some(i) = self.settings.seeds.iter().position(|s| *s == m.cluster_addr) else {
            return false;
        };
        if i == self.my_index {
            return false;
        }
        self.members.write()[i] = Some(m);
        self.maybe_form();
        true
    }

    pub fn set_connected(&self, cluster_addr: SocketAddr, connected: bool) {
        if let Some(Some(m)) = self.members.write().iter_mut().find(|m| m.as_ref().is_some_and(|m| m.cluster_addr == cluster_addr)) {
            m.connected = connected;
        }
    }

    /// The site forms once every seed is known.
    fn maybe_form(&self) {
        let members = self.members.read();
        if self.table.read().is_none() && members.iter().all(Option::is_some) {
            let table = PartitionTable::place(self.partitions, members.len(), self.settings.backups);
            for (p, owners) in table.partitions.iter().enumerate() {
                self.ks.set_replica(p, owners.primary != self.my_index);
            }
            tracing::info!(members = members.len(), partitions = self.partitions, backups = self.settings.backups, "site formed");
            *self.table.write() = Some(Arc::new(table));
        }
    }

    pub fn peer_index(&self, cluster_addr: SocketAddr) -> Option<usize> {
        self.settings.seeds.iter().position(|s| *s == cluster_addr)
    }

    pub fn sync_replication(&self) -> bool {
        self.settings.replication == Replication::Sync && self.settings.backups > 0
    }

    pub fn is_up(&self) -> bool {
        self.table.read().is_some()
    }

    /// Redis Cluster routing for one command: every key in one slot, and
    /// that slot's partition served here (or a backup here and the
    /// connection said READONLY, for a read).
    pub fn check(&self, spec: &CommandSpec, args: &[Bytes], readonly_conn: bool) -> Result<(), CmdError> {
        let mut positions = spec.key_positions(args.len());
        let Some(first) = positions.next() else { return Ok(()) };
        let slot = key_slot(&args[first]);
        if positions.any(|i| key_slot(&args[i]) != slot) {
            return Err(CmdError::other("CROSSSLOT Keys in request don't hash to the same slot"));
        }
        let table = self.table.read();
        let Some(table) = table.as_ref() else {
            return Err(CmdError::other("CLUSTERDOWN The cluster is down"));
        };
        let owners = table.owners(slot_partition(slot, self.partitions) as usize);
        if owners.primary == self.my_index
            || (readonly_conn && spec.flags.has(Flags::READONLY) && owners.backups.contains(&self.my_index))
        {
            return Ok(());
        }
        match &self.members.read()[owners.primary] {
            Some(m) => Err(CmdError::other(format!("MOVED {slot} {}", m.client_addr))),
            None => Err(CmdError::other("CLUSTERDOWN Hash slot not served")),
        }
    }

    /// Whether this node is primary for `partition` (commands without keys
    /// such as KEYS and SCAN still see only this node's data, as in Redis).
    pub fn owns(&self, partition: usize) -> bool {
        self.table.read().as_ref().is_some_and(|t| t.owners(partition).primary == self.my_index)
    }
}

#[cfg(test)]
mod tests {
    use super::cluster_id;

    #[test]
    fn cluster_ids_are_stable_40_hex_digits() {
        let id = cluster_id("n1");
        assert_eq!(id.len(), 40);
        assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(id, cluster_id("n1"));
        assert_ne!(id, cluster_id("n2"));
    }
}
