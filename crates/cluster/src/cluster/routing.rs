//! Redis Cluster routing: the check every keyed command passes in cluster
//! mode (MOVED, CROSSSLOT, CLUSTERDOWN without the lease or while the slot
//! waits for a copy from a disk, TRYAGAIN while a slot is handed over),
//! and which partitions this node serves.

use commands::{CmdError, CommandSpec, Flags};
use keyspace::slot::{key_slot, slot_partition};

use super::Cluster;

impl Cluster {
    /// Redis Cluster routing for one command: every key in one slot, and
    /// that slot's partition served here (or a replica here and the
    /// connection said READONLY, for a read). A MOVED names the TLS port
    /// of the member to a connection over TLS (`tls_conn`).
    pub fn check(
        &self,
        spec: &CommandSpec,
        args: &[&[u8]],
        readonly_conn: bool,
        tls_conn: bool,
    ) -> Result<(), CmdError> {
        let mut positions = spec.key_positions(args);
        let Some(first) = positions.next() else {
            return Ok(());
        };
        let slot = key_slot(args[first]);
        if positions.any(|i| key_slot(args[i]) != slot) {
            return Err(CmdError::other(
                "CROSSSLOT Keys in request don't hash to the same slot",
            ));
        }
        let table = self.table.load();
        let Some(table) = table.as_ref() else {
            return Err(CmdError::other("CLUSTERDOWN The cluster is down"));
        };
        let p = slot_partition(slot, self.partitions) as usize;
        if self.is_waiting(p) {
            return Err(CmdError::other(
                "CLUSTERDOWN Hash slot not served: every copy of its partition went down; it waits for one to come back from its disk (deltagrid cluster status)",
            ));
        }
        let primary = table.primary(p);
        if primary == self.my_index && self.rejoining.load(std::sync::atomic::Ordering::Acquire) {
            return Err(CmdError::other(
                "TRYAGAIN this node restarted and is rejoining its site",
            ));
        }
        if primary == self.my_index && !self.lease.valid() {
            return Err(CmdError::other("CLUSTERDOWN The cluster is down"));
        }
        if primary == self.my_index
            && self.fenced[p].load(std::sync::atomic::Ordering::Acquire)
            && !spec.flags.has(Flags::READONLY)
        {
            return Err(CmdError::other(
                "TRYAGAIN this slot is being handed to another node",
            ));
        }
        if primary == self.my_index
            || (readonly_conn
                && spec.flags.has(Flags::READONLY)
                && table.owners(p).replicas.contains(&self.my_index))
        {
            return Ok(());
        }
        let owners = table.owners(p);
        if let Some(m) = &self.members.read()[owners.primary] {
            return Err(CmdError::other(format!(
                "MOVED {slot} {}",
                m.client_addr_for(tls_conn)
            )));
        }
        // Not connected to it (yet): the metadata knows where it serves.
        let meta = self.metadata.get().map(|md| md.current());
        match meta
            .as_ref()
            .and_then(|md| md.members.get(&(owners.primary as u64 + 1)))
        {
            Some(m) => Err(CmdError::other(format!(
                "MOVED {slot} {}",
                m.client_addr_for(tls_conn)
            ))),
            None => Err(CmdError::other("CLUSTERDOWN Hash slot not served")),
        }
    }

    /// Whether this node is primary for `partition` (commands without keys
    /// such as KEYS and SCAN still see only this node's data, as in Redis).
    pub fn owns(&self, partition: usize) -> bool {
        self.table
            .load()
            .as_ref()
            .is_some_and(|t| t.primary(partition) == self.my_index)
    }
}
