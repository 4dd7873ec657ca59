//! CLUSTER subcommands, in the shapes Redis Cluster clients parse:
//! SLOTS, SHARDS, NODES, MYID, INFO, KEYSLOT, COUNTKEYSINSLOT, GETKEYSINSLOT.

use bytes::Bytes;
use commands::args::int;
use commands::CmdError;
use keyspace::slot::{key_slot, slot_partition, SLOTS};
use keyspace::Keyspace;
use resp::ReplyWriter;

use crate::cluster::{Cluster, Member};
use crate::metadata::state::MemberState;
use crate::placement::PartitionOwners;

fn split_addr(addr: &str) -> (&str, i64) {
    match addr.rsplit_once(':') {
        Some((host, port)) => (host, port.parse().unwrap_or(0)),
        None => (addr, 0),
    }
}

pub fn disabled() -> CmdError {
    CmdError::other("ERR This instance has cluster support disabled")
}

/// `tls`: the client is connected over TLS, so members are named by their
/// TLS client ports where they have one (Redis with `tls-cluster yes`).
pub fn cluster(
    c: Option<&Cluster>,
    ks: &Keyspace,
    a: &[&[u8]],
    tls: bool,
    out: &mut ReplyWriter,
) -> Result<(), CmdError> {
    let sub = String::from_utf8_lossy(a[1]).to_ascii_lowercase();
    let arity = |ok: bool| {
        if ok {
            Ok(())
        } else {
            Err(CmdError::WrongArity(format!("cluster|{sub}")))
        }
    };
    // KEYSLOT works without cluster mode, as in Redis.
    if sub == "keyslot" {
        arity(a.len() == 3)?;
        out.int(key_slot(a[2]) as i64);
        return Ok(());
    }
    let c = c.ok_or_else(disabled)?;
    match sub.as_str() {
        "myid" => {
            arity(a.len() == 2)?;
            out.bulk(c.me.cluster_id.as_bytes());
        }
        "info" => {
            arity(a.len() == 2)?;
            out.verbatim("txt", info(c).as_bytes());
        }
        "slots" => {
            arity(a.len() == 2)?;
            slots(c, tls, out);
        }
        "shards" => {
            arity(a.len() == 2)?;
            shards(c, tls, out);
        }
        "nodes" => {
            arity(a.len() == 2)?;
            out.verbatim("txt", nodes(c, tls).as_bytes());
        }
        "countkeysinslot" => {
            arity(a.len() == 3)?;
            let slot = slot_arg(a[2])?;
            let n = keys_in_slot(c, ks, slot, usize::MAX).len();
            out.int(n as i64);
        }
        "getkeysinslot" => {
            arity(a.len() == 4)?;
            let slot = slot_arg(a[2])?;
            let count = int(a[3])?;
            if count < 0 {
                return Err(CmdError::other("ERR Invalid number of keys"));
            }
            let keys = keys_in_slot(c, ks, slot, count as usize);
            out.array(keys.len());
            for k in keys {
                out.bulk(&k);
            }
        }
        _ => {
            return Err(CmdError::UnknownSubcommand {
                cmd: "CLUSTER".into(),
                sub: String::from_utf8_lossy(a[1]).into(),
            })
        }
    }
    Ok(())
}

fn slot_arg(arg: &[u8]) -> Result<u16, CmdError> {
    match int(arg) {
        Ok(s) if (0..SLOTS as i64).contains(&s) => Ok(s as u16),
        _ => Err(CmdError::other("ERR Invalid or out of range slot")),
    }
}

fn keys_in_slot(c: &Cluster, ks: &Keyspace, slot: u16, max: usize) -> Vec<Bytes> {
    let p = slot_partition(slot, c.partitions) as usize;
    ks.with_partition(p, |part, now| {
        part.iter()
            .filter(|(k, e)| !e.is_expired(now) && key_slot(k) == slot)
            .take(max)
            .map(|(k, _)| k.to_bytes())
            .collect()
    })
}

fn info(c: &Cluster) -> String {
    let members = c.members();
    let known = members.iter().filter(|m| m.is_some()).count();
    let up = c.is_up();
    let assigned = if up { SLOTS } else { 0 };
    // A node without its lease (cut off from the majority) serves nothing,
    // as the minority side of a Redis Cluster says `fail`; slots whose
    // partition waits for a copy from a disk are not served either (Redis:
    // `fail` while a slot has no live primary).
    let failed = if up {
        (0..SLOTS)
            .filter(|s| c.is_waiting(slot_partition(*s, c.partitions) as usize))
            .count()
    } else {
        0
    };
    let up = up && c.lease.valid() && failed == 0;
    format!(
        "cluster_enabled:1\r\ncluster_state:{}\r\ncluster_slots_assigned:{assigned}\r\ncluster_slots_ok:{}\r\n\
         cluster_slots_pfail:0\r\ncluster_slots_fail:{failed}\r\ncluster_known_nodes:{known}\r\ncluster_size:{}\r\n\
         cluster_current_epoch:{}\r\ncluster_my_epoch:{}\r\n",
        if up { "ok" } else { "fail" },
        assigned as usize - failed,
        members.len(),
        c.table().map_or(0, |t| t.epoch),
        c.table().map_or(0, |t| t.epoch),
    )
}

fn node_entry(m: &Member, out: &mut ReplyWriter) {
    let (host, port) = split_addr(&m.client_addr);
    out.array(4);
    out.bulk(host.as_bytes());
    out.int(port);
    out.bulk(m.cluster_id.as_bytes());
    out.map(0);
}

fn slots(c: &Cluster, tls: bool, out: &mut ReplyWriter) {
    let (Some(table), members) = (c.table(), c.members_for(tls)) else {
        out.array(0);
        return;
    };
    // A range whose primary this node has not heard of since it started
    // (a member that is down) is left out, as Redis leaves out slots
    // nobody serves: clients expect a primary in every entry.
    let ranges: Vec<_> = table
        .ranges()
        .into_iter()
        .filter(|(_, _, o)| members.get(o.primary).is_some_and(|m| m.is_some()))
        .collect();
    out.array(ranges.len());
    for (first, last, owners) in ranges {
        let copies: Vec<&Member> = std::iter::once(owners.primary)
            .chain(owners.replicas.iter().copied())
            .filter_map(|i| members.get(i).and_then(|m| m.as_ref()))
            .collect();
        out.array(2 + copies.len());
        out.int(first as i64);
        out.int(last as i64);
        for m in copies {
            node_entry(m, out);
        }
    }
}

/// WAIT: how many replicas hold the connection's last write, `(partition,
/// seq)`. With synchronous replication, every in-sync replica has it before
/// the write's reply leaves (else the connection closes unanswered), so the
/// answer is at once the in-sync count; otherwise the replicas that
/// acknowledged it. Without a write yet: the fewest in-sync replicas of any
/// partition this node leads (each holds everything before).
pub fn replicas_holding(c: &Cluster, last_write: Option<(usize, u64)>) -> usize {
    let Some(table) = c.table() else { return 0 };
    let led = |p: usize| table.partitions.get(p).filter(|o| o.primary == c.my_index);
    match last_write {
        Some((p, seq)) => match led(p) {
            Some(o) if c.sync_replication() => o.in_sync.len(),
            Some(o) => {
                let replicas: Vec<usize> = o.replicas.to_vec();
                replicas.len() - c.replicator.not_acknowledged(p, seq, &replicas).len()
            }
            None => 0,
        },
        None => (0..table.partitions.len())
            .filter_map(led)
            .map(|o| o.in_sync.len())
            .min()
            .unwrap_or(0),
    }
}

/// min-replicas-to-write: the in-sync replicas of the partition `key`
/// belongs to (without a key: the fewest of any partition led here).
pub fn in_sync_replicas(c: &Cluster, key: Option<&[u8]>) -> usize {
    let Some(table) = c.table() else { return 0 };
    match key {
        Some(k) => {
            let p = slot_partition(key_slot(k), c.partitions) as usize;
            table.partitions.get(p).map_or(0, |o| o.in_sync.len())
        }
        None => replicas_holding(c, None),
    }
}

/// Per member index: declared dead by the metadata group (Redis's `fail`).
fn dead_members(c: &Cluster, n: usize) -> Vec<bool> {
    let mut dead = vec![false; n];
    if let Some(md) = c.metadata.get() {
        for (id, m) in &md.current().members {
            if m.state == MemberState::Dead {
                if let Some(d) = (*id as usize).checked_sub(1).and_then(|i| dead.get_mut(i)) {
                    *d = true;
                }
            }
        }
    }
    dead
}

/// One shard per set of owners (a primary and its replicas): the slot
/// ranges they hold together. A member leads some partitions and replicates
/// others, so it appears in several shards, as `master` where it leads and
/// `replica` where it copies.
fn shards(c: &Cluster, tls: bool, out: &mut ReplyWriter) {
    let (Some(table), members) = (c.table(), c.members_for(tls)) else {
        out.array(0);
        return;
    };
    let dead = dead_members(c, members.len());
    let mut groups: Vec<(&PartitionOwners, Vec<(u16, u16)>)> = Vec::new();
    for (first, last, owners) in table.ranges() {
        let same =
            |o: &&PartitionOwners| o.primary == owners.primary && o.replicas == owners.replicas;
        match groups.iter_mut().find(|(o, _)| same(o)) {
            Some((_, ranges)) => ranges.push((first, last)),
            None => groups.push((owners, vec![(first, last)])),
        }
    }
    out.array(groups.len());
    for (owners, ranges) in groups {
        out.map(2);
        out.bulk(b"slots");
        out.array(ranges.len() * 2);
        for (first, last) in &ranges {
            out.int(*first as i64);
            out.int(*last as i64);
        }
        out.bulk(b"nodes");
        let copies: Vec<(&Member, bool, bool)> = std::iter::once(owners.primary)
            .chain(owners.replicas.iter().copied())
            .filter_map(|i| {
                let m = members.get(i)?.as_ref()?;
                let primary = i == owners.primary;
                let failed =
                    dead.get(i).copied().unwrap_or(false) || (!m.connected && i != c.my_index);
                Some((m, primary, failed))
            })
            .collect();
        out.array(copies.len());
        for (m, primary, failed) in copies {
            shard_node(m, primary, failed, out);
        }
    }
}

fn shard_node(m: &Member, primary: bool, failed: bool, out: &mut ReplyWriter) {
    let (host, port) = split_addr(&m.client_addr);
    out.map(7);
    for (k, v) in [
        ("id", m.cluster_id.as_str()),
        ("ip", host),
        ("endpoint", host),
    ] {
        out.bulk(k.as_bytes());
        out.bulk(v.as_bytes());
    }
    out.bulk(b"port");
    out.int(port);
    out.bulk(b"role");
    out.bulk(if primary {
        &b"master"[..]
    } else {
        &b"replica"[..]
    });
    out.bulk(b"replication-offset");
    out.int(0);
    out.bulk(b"health");
    out.bulk(if failed {
        &b"failed"[..]
    } else {
        &b"online"[..]
    });
}

/// One line per member. A member that leads slots is a `master` with them;
/// one that leads none (all its copies are replicas) is a `slave` of the
/// member whose partitions it copies most. A member the metadata declared
/// dead has the `fail` flag. Which member copies which slot range is in
/// CLUSTER SLOTS and CLUSTER SHARDS.
fn nodes(c: &Cluster, tls: bool) -> String {
    let table = c.table();
    let ranges = table.as_ref().map(|t| t.ranges()).unwrap_or_default();
    let epoch = table.as_ref().map_or(0, |t| t.epoch);
    let members = c.members_for(tls);
    let dead = dead_members(c, members.len());
    let mut text = String::new();
    for (i, m) in members.iter().enumerate() {
        let Some(m) = m else { continue };
        let myself = if i == c.my_index { "myself," } else { "" };
        let fail = if dead[i] { ",fail" } else { "" };
        let state = if m.connected || i == c.my_index {
            "connected"
        } else {
            "disconnected"
        };
        let slots: String = ranges
            .iter()
            .filter(|r| r.2.primary == i)
            .map(|r| {
                if r.0 == r.1 {
                    format!(" {}", r.0)
                } else {
                    format!(" {}-{}", r.0, r.1)
                }
            })
            .collect();
        let mut copied = vec![0usize; members.len()];
        for r in ranges.iter().filter(|r| r.2.replicas.contains(&i)) {
            copied[r.2.primary] += 1;
        }
        let master_of = (0..members.len())
            .filter(|&p| copied[p] > 0)
            .max_by_key(|&p| copied[p])
            .and_then(|p| members[p].as_ref());
        let (role, master) = match master_of {
            Some(p) if slots.is_empty() => ("slave", p.cluster_id.as_str()),
            _ => ("master", "-"),
        };
        text.push_str(&format!(
            "{} {}@{} {myself}{role}{fail} {master} 0 0 {epoch} {state}{slots}\n",
            m.cluster_id,
            m.client_addr,
            m.cluster_addr.port()
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::split_addr;

    #[test]
    fn addresses_split_into_host_and_port() {
        assert_eq!(split_addr("127.0.0.1:7001"), ("127.0.0.1", 7001));
        assert_eq!(split_addr("[::1]:7001"), ("[::1]", 7001));
    }
}
