//! Joining a formed site: a node whose `cluster_listen` is not one of
//! `site.seeds` asks a seed (any member answers) for a place before it
//! starts. On `cluster_listen` it sends its hello and a join frame; the
//! member commits [`Command::Join`] through the metadata group (which
//! gives it the next free node id, or its old id when a member with the
//! same cluster address exists: a restart) and answers with that id and the
//! members' addresses. The metadata leader then adds the node to the Raft
//! group, and the migration planner gives it its share of partitions.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::cluster::{Cluster, MAX_MEMBERS};
use crate::metadata::{Command, MetadataError};
use crate::wire::{self, Hello, JoinAnswer, WireError};

/// How long one seed gets to answer (it commits through Raft).
const ASK_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a node keeps trying the seeds before it gives up.
const GIVE_UP_AFTER: Duration = Duration::from_secs(120);

/// The place a joining node got: its member index (node id - 1) and the
/// members' cluster addresses by index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Joined {
    pub index: usize,
    pub members: Vec<(usize, SocketAddr)>,
}

/// Asks the seeds (`settings.seeds`), in turn, until one lets this node
/// join, over the site's `secret` and `tls` as `settings` has them.
pub async fn join(
    settings: &crate::ClusterSettings,
    site_id: u16,
    node_id: &str,
    client_addr: &str,
) -> Result<Joined, String> {
    let (seeds, secret, tls) = (
        &settings.seeds,
        settings.secret.as_deref(),
        settings.tls.as_ref(),
    );
    let hello = Hello {
        version: wire::PROTOCOL_VERSION,
        site_id,
        node_id: node_id.to_string(),
        cluster_addr: settings.cluster_listen.to_string(),
        client_addr: client_addr.to_string(),
        tls_client_addr: settings.tls_client_addr.map(|a| a.to_string()),
    };
    let deadline = tokio::time::Instant::now() + GIVE_UP_AFTER;
    let mut last = String::from("no seed answered");
    loop {
        for seed in seeds {
            match tokio::time::timeout(ASK_TIMEOUT, ask(*seed, &hello, secret, tls)).await {
                Ok(Ok(joined)) => {
                    tracing::info!(%seed, node = joined.index + 1, "joined the site");
                    return Ok(joined);
                }
                // A secret the site does not share will not become right
                // by asking again (a handshake that broke off is retried).
                Ok(Err(e)) if e.starts_with(crate::auth::REFUSED) => {
                    return Err(format!("could not join the site through {seed}: {e}"));
                }
                Ok(Err(e)) => last = format!("{seed}: {e}"),
                Err(_) => last = format!("{seed}: no answer within {ASK_TIMEOUT:?}"),
            }
            tracing::warn!("joining the site: {last}");
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "could not join the site through any of site.seeds ({last})"
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn ask(
    seed: SocketAddr,
    hello: &Hello,
    secret: Option<&str>,
    tls: Option<&crate::auth::SiteTls>,
) -> Result<Joined, String> {
    let stream = TcpStream::connect(seed).await.map_err(|e| e.to_string())?;
    let mut stream = crate::auth::secure_initiate(stream, secret.map(str::as_bytes), tls).await?;
    let mut out = BytesMut::new();
    hello.encode(&mut out);
    wire::encode_frame(wire::KIND_JOIN, &[], &mut out);
    stream.write_all(&out).await.map_err(|e| e.to_string())?;
    let mut buf = BytesMut::with_capacity(1024);
    let read = wire::PROTOCOL.limits.read_frame(&mut stream, &mut buf);
    let (kind, payload) = framing::expect("join answer", ASK_TIMEOUT, read)
        .await
        .map_err(|e| {
            // TLS 1.3: a seed that refuses our certificate says so only
            // once we read (an alert), and that is final.
            let e = e.to_string();
            if e.contains("received fatal alert") {
                format!(
                    "{}: the seed refused our TLS certificate: {e}",
                    crate::auth::REFUSED
                )
            } else {
                e
            }
        })?;
    match kind {
        wire::KIND_JOINED => {
            let a = JoinAnswer::decode(payload).map_err(|e| e.to_string())?;
            let index = (a.id as usize)
                .checked_sub(1)
                .filter(|i| *i < MAX_MEMBERS)
                .ok_or("bad node id")?;
            let members = a
                .members
                .iter()
                .filter_map(|(id, addr)| Some(((*id as usize).checked_sub(1)?, addr.parse().ok()?)))
                .filter(|(i, _)| *i < MAX_MEMBERS)
                .collect();
            Ok(Joined { index, members })
        }
        wire::KIND_REFUSED => Err(format!("refused: {}", String::from_utf8_lossy(&payload))),
        _ => Err(WireError::Malformed("join answer").to_string()),
    }
}

/// A member's side: commits the join and answers (or says why not).
pub(crate) async fn answer(
    c: &Arc<Cluster>,
    stream: &mut framing::tls::PeerStream,
    hello: &Hello,
) -> Result<u64, String> {
    let result = admit(c, hello).await;
    let mut out = BytesMut::new();
    match &result {
        Ok(answer) => answer.encode(&mut out),
        Err(e) => wire::encode_frame(wire::KIND_REFUSED, e.as_bytes(), &mut out),
    }
    stream.write_all(&out).await.map_err(|e| e.to_string())?;
    result.map(|a| a.id)
}

async fn admit(c: &Arc<Cluster>, hello: &Hello) -> Result<JoinAnswer, String> {
    if hello.site_id != c.site_id {
        return Err(format!("this is site {}, not {}", c.site_id, hello.site_id));
    }
    let cluster_addr: SocketAddr = hello
        .cluster_addr
        .parse()
        .map_err(|_| "bad cluster address".to_string())?;
    let md = c
        .metadata
        .get()
        .ok_or("this member's metadata is not running yet")?;
    let cmd = Command::Join {
        name: hello.node_id.clone(),
        cluster_addr,
        client_addr: hello.client_addr.clone(),
        tls_client_addr: hello.tls_client_addr.clone(),
    };
    let id = md.propose(cmd).await.map_err(|e| match e {
        MetadataError::Refused(r) => r.to_string(),
        e => e.to_string(),
    })?;
    let meta = md
        .wait_for(Duration::from_secs(5), |m| m.members.contains_key(&id))
        .await
        .ok_or("the join was committed but has not reached this member yet")?;
    let members = meta
        .members
        .iter()
        .map(|(id, m)| (*id, m.cluster_addr.to_string()))
        .collect();
    Ok(JoinAnswer { id, members })
}
