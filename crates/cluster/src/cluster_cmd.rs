//! CLUSTER subcommands, in the shapes Redis Cluster clients parse:
//! SLOTS, SHARDS, NODES, MYID, INFO, KEYSLOT, COUNTKEYSINSLOT, GETKEYSINSLOT.

use bytes::Bytes;
use commands::args::int;
use commands::CmdError;
use keyspace::slot::{key_slot, slot_partition, SLOTS};
use keyspace::Keyspace;
use resp::ReplyWriter;

use crate::cluster::{Cluster, Member};

fn split_addr(addr: &str) -> (&str, i64) {
    match addr.rsplit_once(':') {
        Some((host, port)) => (host, port.parse().unwrap_or(0)),
        None => (addr, 0),
    }
}

pub fn disabled() -> CmdError {
    CmdError::other("ERR This instance has cluster support disabled")
}

pub fn cluster(
    c: Option<&Cluster>,
    ks: &Keyspace,
    a: &[&[u8]],
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
            slots(c, out);
        }
        "shards" => {
            arity(a.len() == 2)?;
            shards(c, out);
        }
        "nodes" => {
            arity(a.len() == 2)?;
            out.verbatim("txt", nodes(c).as_bytes());
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
            .map(|(k, _)| k.clone())
            .collect()
    })
}

fn info(c: &Cluster) -> String {
    let members = c.members();
    let known = members.iter().filter(|m| m.is_some()).count();
    let up = c.is_up();
    let assigned = if up { SLOTS } else { 0 };
    // A node without its lease (cut off from the majority) serves nothing,
    // as the minority side of a Redis Cluster says `fail`.
    let up = up && c.lease.valid();
    format!(
        "cluster_enabled:1\r\ncluster_state:{}\r\ncluster_slots_assigned:{assigned}\r\ncluster_slots_ok:{assigned}\r\n\
         cluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:{known}\r\ncluster_size:{}\r\n\
         cluster_current_epoch:{}\r\ncluster_my_epoch:{}\r\n",
        if up { "ok" } else { "fail" },
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

fn slots(c: &Cluster, out: &mut ReplyWriter) {
    let (Some(table), members) = (c.table(), c.members()) else {
        out.array(0);
        return;
    };
    let ranges = table.ranges();
    out.array(ranges.len());
    for (first, last, owners) in ranges {
        let copies: Vec<&Member> = std::iter::once(owners.primary)
            .chain(owners.replicas.iter().copied())
            .filter_map(|i| members[i].as_ref())
            .collect();
        out.array(2 + copies.len());
        out.int(first as i64);
        out.int(last as i64);
        for m in copies {
            node_entry(m, out);
        }
    }
}

fn shards(c: &Cluster, out: &mut ReplyWriter) {
    let (Some(table), members) = (c.table(), c.members()) else {
        out.array(0);
        return;
    };
    // One shard per member: the slot ranges it is primary for.
    let ranges = table.ranges();
    out.array(members.len());
    for (i, m) in members.iter().enumerate() {
        let mine: Vec<(u16, u16)> = ranges
            .iter()
            .filter(|r| r.2.primary == i)
            .map(|r| (r.0, r.1))
            .collect();
        out.map(2);
        out.bulk(b"slots");
        out.array(mine.len() * 2);
        for (first, last) in &mine {
            out.int(*first as i64);
            out.int(*last as i64);
        }
        out.bulk(b"nodes");
        let Some(m) = m else {
            out.array(0);
            continue;
        };
        let (host, port) = split_addr(&m.client_addr);
        out.array(1);
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
        out.bulk(b"master");
        out.bulk(b"replication-offset");
        out.int(0);
        out.bulk(b"health");
        out.bulk(if m.connected {
            b"online".as_slice()
        } else {
            b"fail".as_slice()
        });
    }
}

fn nodes(c: &Cluster) -> String {
    let table = c.table();
    let ranges = table.as_ref().map(|t| t.ranges()).unwrap_or_default();
    let epoch = table.as_ref().map_or(0, |t| t.epoch);
    let mut text = String::new();
    for (i, m) in c.members().iter().enumerate() {
        let Some(m) = m else { continue };
        let myself = if i == c.my_index { "myself," } else { "" };
        let state = if m.connected {
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
        text.push_str(&format!(
            "{} {}@{} {myself}master - 0 0 {epoch} {state}{slots}\n",
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
