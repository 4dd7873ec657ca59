//! Handing received changes to this site's primaries.
//!
//! A receiver groups a batch's changes by the node that is primary for
//! their key here. Its own group it applies in process; each other group
//! goes as one `WANAPPLY source-site payload` command to that node's Redis
//! port, where it runs in a normal session. Either way conflicts are
//! resolved under the partition lock, the result is logged and replicated
//! to replicas, and with sync replication the outcome waits for them. The
//! reply has one outcome byte per change.
//! A change whose partition moved is routed again; an unreachable primary
//! is retried until the site has one: nothing is dropped.
//!
//! Settled marks ([`crate::settled`]) go to every node of the site, as
//! `WANSETTLED site-name incarnation payload` to the others; a node that cannot be
//! reached misses them until the publisher announces them again.

use std::collections::HashMap;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use keyspace::{codec, Change, Keyspace, RemoteOutcome};
use resp::Frame;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::LocalSite;

/// One byte per change in a `WANAPPLY` reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Outcome {
    Applied = 0,
    Duplicate = 1,
    ConflictLost = 2,
    NeedFull = 3,
    /// This node is not the key's primary (any more): route again.
    Moved = 4,
    /// The change's version lies further ahead of the primary's clock than
    /// `max_clock_offset`: refused, and sent again until that clock has
    /// caught up (the link waits; the remote site's clock needs fixing).
    ClockAhead = 5,
}

impl Outcome {
    fn from_u8(b: u8) -> Option<Outcome> {
        Some(match b {
            0 => Outcome::Applied,
            1 => Outcome::Duplicate,
            2 => Outcome::ConflictLost,
            3 => Outcome::NeedFull,
            4 => Outcome::Moved,
            5 => Outcome::ClockAhead,
            _ => return None,
        })
    }
}

/// Encodes changes as a `WANAPPLY` payload.
pub fn encode_payload<'a>(changes: impl IntoIterator<Item = &'a Change>) -> Bytes {
    let mut out = Vec::new();
    for c in changes {
        codec::encode(c, &mut out);
    }
    Bytes::from(out)
}

/// The server side of `WANAPPLY`: decodes `payload` and applies it with
/// [`apply_changes`]; an error text for a payload that does not decode
/// (then nothing was applied).
pub fn apply_payload(
    ks: &Keyspace,
    is_primary: impl Fn(usize) -> bool,
    payload: &Bytes,
    origin: u64,
) -> Result<Vec<u8>, String> {
    let mut changes = Vec::new();
    let mut rest = payload.clone();
    while !rest.is_empty() {
        let (c, used) = codec::decode(&rest).map_err(|e| format!("bad WANAPPLY payload: {e}"))?;
        changes.push(c);
        rest = rest.slice(used..);
    }
    Ok(apply_changes(ks, is_primary, changes, origin))
}

/// Applies each change that belongs to a partition this node is primary
/// for, resolving conflicts by version; one outcome byte per change.
pub fn apply_changes(
    ks: &Keyspace,
    is_primary: impl Fn(usize) -> bool,
    changes: impl IntoIterator<Item = Change>,
    origin: u64,
) -> Vec<u8> {
    let mut out = Vec::new();
    for c in changes {
        if !is_primary(ks.partition_of(&c.key)) {
            out.push(Outcome::Moved as u8);
            continue;
        }
        let outcome = match ks.apply_remote(c, origin) {
            Ok(RemoteOutcome::Applied) => Outcome::Applied,
            Ok(RemoteOutcome::Duplicate) => Outcome::Duplicate,
            Ok(RemoteOutcome::ConflictLost) => Outcome::ConflictLost,
            Ok(RemoteOutcome::NeedFull) => Outcome::NeedFull,
            // The partition stopped being led here since the check above,
            // or is fenced for a handover (its copy is read-only while the
            // table still names this node): routed again once the table
            // moves on. Answering NeedFull here lost changes whose
            // publisher no longer led their partition by the time the
            // answer came (found by test_wan_chaos.py).
            Err(keyspace::ApplyError::NotPrimary) => Outcome::Moved,
            Err(keyspace::ApplyError::ClockAhead { .. }) => Outcome::ClockAhead,
            // Whatever else did not apply (a type clash, an overflow
            // against a base we hold differently) is settled by the full
            // value, sent to the primary.
            Err(_) => Outcome::NeedFull,
        };
        out.push(outcome as u8);
    }
    out
}

/// Connections to this site's nodes, by Redis address.
pub struct LocalRouter {
    local: LocalSite,
    ks: std::sync::Arc<Keyspace>,
    cluster: Option<std::sync::Arc<cluster::Cluster>>,
    /// Local persistence (see [`crate::Wan::store`]).
    store: Option<std::sync::Arc<persist::Store>>,
    conns: HashMap<String, Conn>,
}

struct Conn {
    stream: TcpStream,
    buf: BytesMut,
}

const RETRY: Duration = Duration::from_millis(100);

impl LocalRouter {
    pub fn new(
        local: LocalSite,
        ks: std::sync::Arc<Keyspace>,
        cluster: Option<std::sync::Arc<cluster::Cluster>>,
        store: Option<std::sync::Arc<persist::Store>>,
    ) -> Self {
        LocalRouter {
            local,
            ks,
            cluster,
            store,
            conns: HashMap::new(),
        }
    }

    /// The Redis address of the primary of local partition `p`, if known.
    fn primary_addr(&self, p: usize) -> Option<String> {
        let Some(cluster) = &self.cluster else {
            return Some(self.local.client_addr.clone());
        };
        let table = cluster.table()?;
        let primary = table.partitions.get(p)?.primary;
        if primary == cluster.my_index {
            return Some(self.local.client_addr.clone());
        }
        cluster
            .members()
            .get(primary)?
            .as_ref()
            .map(|m| m.client_addr.clone())
    }

    /// Applies `changes` (from site `source`) at this site's primaries,
    /// retrying until every one has an outcome other than Moved or
    /// ClockAhead, or until `gone()` (the link closed): then some may be
    /// left Moved or ClockAhead, unapplied. Changes of
    /// one key keep their order: they share a partition, hence a group.
    pub async fn apply(
        &mut self,
        source: u16,
        changes: &[Change],
        gone: impl Fn() -> bool,
    ) -> Vec<Outcome> {
        let mut outcomes = vec![Outcome::Moved; changes.len()];
        let mut attempt = 0u32;
        let again = |o: &Outcome| matches!(o, Outcome::Moved | Outcome::ClockAhead);
        loop {
            let mut groups: HashMap<String, Vec<usize>> = HashMap::new();
            let mut unrouted = false;
            for (i, c) in changes.iter().enumerate() {
                if !again(&outcomes[i]) {
                    continue;
                }
                match self.primary_addr(self.ks.partition_of(&c.key)) {
                    Some(addr) => groups.entry(addr).or_default().push(i),
                    None => unrouted = true,
                }
            }
            if groups.is_empty() && !unrouted {
                return outcomes;
            }
            for (addr, idx) in groups {
                let result = if addr == self.local.client_addr {
                    self.apply_here(idx.iter().map(|&i| changes[i].clone()))
                        .await
                } else {
                    let payload = encode_payload(idx.iter().map(|&i| &changes[i]));
                    self.call(&addr, source, payload).await
                };
                match result {
                    Ok(codes) if codes.len() == idx.len() => {
                        for (&i, &b) in idx.iter().zip(codes.iter()) {
                            outcomes[i] = Outcome::from_u8(b).unwrap_or(Outcome::Moved);
                        }
                    }
                    Ok(codes) => {
                        tracing::warn!(
                            addr,
                            got = codes.len(),
                            want = idx.len(),
                            "WANAPPLY answered for the wrong number of changes"
                        );
                        self.conns.remove(&addr);
                    }
                    Err(e) => {
                        if attempt.is_multiple_of(50) {
                            tracing::warn!(
                                addr,
                                "applying WAN changes at this site failed, retrying: {e}"
                            );
                        }
                        self.conns.remove(&addr);
                    }
                }
            }
            if let Some(at) = outcomes.iter().position(|o| *o == Outcome::ClockAhead) {
                if attempt.is_multiple_of(50) {
                    tracing::warn!(
                        source,
                        version_ms = changes[at].version.millis(),
                        "changes from site {source} carry versions further ahead of this site's \
                         clock than max_clock_offset: refused and retried until this clock has \
                         caught up (check that site's clock; counted in deltagrid_clock_ahead_total)"
                    );
                }
            }
            if outcomes.iter().any(again) {
                if gone() {
                    // Nobody is left to acknowledge them to: the publisher
                    // sends them again (they were not acknowledged).
                    return outcomes;
                }
                attempt += 1;
                tokio::time::sleep(RETRY).await;
            }
        }
    }

    /// The changes this node is primary for, applied in this process as
    /// `WANAPPLY` would (no loopback hop), then waited for as a client's
    /// write is: every in-sync replica has them when this returns Ok.
    async fn apply_here(&self, changes: impl Iterator<Item = Change>) -> Result<Vec<u8>, String> {
        let cluster = self.cluster.clone();
        let is_primary = |p: usize| cluster.as_ref().is_none_or(|c| c.owns(p));
        // Nothing awaits between these calls: the changes this thread logs
        // are exactly these.
        keyspace::take_written();
        persist::take_handed();
        let codes = apply_changes(&self.ks, is_primary, changes, 0);
        let written = keyspace::take_written();
        let handed = persist::take_handed();
        if let Some(c) = cluster.as_ref().filter(|c| c.sync_replication()) {
            if !written.is_empty() && !c.replicator.wait(&written).await {
                return Err("replicas did not acknowledge in time".into());
            }
        }
        if let Some(store) = self.store.as_ref().filter(|s| handed > 0 && s.waits()) {
            if !store.wait_durable(handed).await {
                return Err("the change log cannot be written".into());
            }
        }
        Ok(codes)
    }

    /// Hands settled marks from remote site `site` (on a link of data
    /// incarnation `incarnation`) to every other node of this site.
    pub async fn settled(&mut self, site: &str, marks: &[(u16, u64)], incarnation: u64) {
        let Some(cluster) = self.cluster.clone() else {
            return;
        };
        let payload = crate::settled::encode_marks(marks);
        let others: Vec<String> = cluster
            .members()
            .iter()
            .flatten()
            .map(|m| m.client_addr.clone())
            .filter(|a| *a != self.local.client_addr)
            .collect();
        let incarnation = incarnation.to_string();
        for addr in others {
            let args: [&[u8]; 4] = [
                b"WANSETTLED",
                site.as_bytes(),
                incarnation.as_bytes(),
                &payload,
            ];
            if let Err(e) = self.request(&addr, &args).await {
                tracing::debug!(addr, "settled marks not delivered: {e}");
                self.conns.remove(&addr);
            }
        }
    }

    async fn call(&mut self, addr: &str, source: u16, payload: Bytes) -> Result<Vec<u8>, String> {
        let site = source.to_string();
        match self
            .request(addr, &[b"WANAPPLY", site.as_bytes(), &payload])
            .await?
        {
            Frame::Bulk(codes) => Ok(codes.to_vec()),
            Frame::Error(e) => Err(e),
            other => Err(format!("unexpected reply {other:?}")),
        }
    }

    /// Sends one command to the node at `addr`, connecting (and
    /// authenticating) first when needed.
    async fn request(&mut self, addr: &str, args: &[&[u8]]) -> Result<Frame, String> {
        if !self.conns.contains_key(addr) {
            let stream = TcpStream::connect(addr)
                .await
                .map_err(|e| format!("connect {addr}: {e}"))?;
            let _ = stream.set_nodelay(true);
            let mut conn = Conn {
                stream,
                buf: BytesMut::with_capacity(4096),
            };
            // WANAPPLY and WANSETTLED are internal commands: log in as a node.
            let pass = cluster::internal_auth::password(self.cluster.as_deref())
                .ok_or("this site's internal token is not set yet")?;
            let user = cluster::internal_auth::USER.as_bytes();
            match conn.request(&[b"AUTH", user, pass.as_bytes()]).await? {
                Frame::Simple(_) => {}
                other => return Err(format!("AUTH at {addr}: {other:?}")),
            }
            self.conns.insert(addr.to_string(), conn);
        }
        let conn = self.conns.get_mut(addr).ok_or("no connection")?;
        conn.request(args).await
    }
}

impl Conn {
    async fn request(&mut self, args: &[&[u8]]) -> Result<Frame, String> {
        let mut out = BytesMut::new();
        resp::encode_request(args, &mut out);
        self.stream
            .write_all(&out)
            .await
            .map_err(|e| e.to_string())?;
        let limits = resp::Limits::default();
        loop {
            if let Some(f) =
                resp::decode_reply(&mut self.buf, &limits).map_err(|e| e.to_string())?
            {
                return Ok(f);
            }
            if self
                .stream
                .read_buf(&mut self.buf)
                .await
                .map_err(|e| e.to_string())?
                == 0
            {
                return Err("connection closed".into());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyspace::{ChangeKind, DebugClock, KeyspaceConfig, Value, Version};
    use std::sync::Arc;

    fn set(key: &str, hlc: u64) -> Change {
        Change {
            key: Bytes::copy_from_slice(key.as_bytes()),
            version: Version { hlc, site: 2 },
            kind: ChangeKind::Full {
                value: Value::str(Bytes::from_static(b"v")),
                expire_at: 0,
            },
        }
    }

    /// A partition fenced for a handover (its copy read-only, the table
    /// still naming this node) sends a change on to wherever it is led
    /// next, rather than asking its publisher for the full value: that
    /// publisher may no longer lead the partition when the answer comes.
    #[test]
    fn a_change_for_a_copy_that_stopped_leading_is_routed_again() {
        let ks = Keyspace::new(
            KeyspaceConfig {
                partitions: 4,
                site_id: 1,
                ..Default::default()
            },
            Arc::new(DebugClock::default()),
        );
        let p = ks.partition_of(b"k");
        assert_eq!(
            apply_changes(&ks, |_| true, [set("k", 1 << 16)], 0),
            vec![Outcome::Applied as u8]
        );
        ks.set_replica(p, true);
        assert_eq!(
            apply_changes(&ks, |_| true, [set("k", 2 << 16)], 0),
            vec![Outcome::Moved as u8]
        );
        assert_eq!(
            apply_changes(&ks, |_| false, [set("k", 2 << 16)], 0),
            vec![Outcome::Moved as u8]
        );
    }
}
