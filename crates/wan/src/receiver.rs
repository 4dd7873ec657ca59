//! The receiving end: accepts publishers of remote sites on `wan.listen`.
//!
//! A connection must open with a [`Hello`] from a site this node lists as a
//! target (by name), with another site id than its own and the id it used
//! before; anything else is refused with a log line and counted. With
//! `wan.secret`, the welcome challenges the publisher, whose next frame must
//! prove it knows the secret ([`crate::auth`]). Each batch
//! is acknowledged as received at once, then decoded (a malformed batch
//! closes that connection only), filtered by the applied watermarks, applied
//! at this site's primaries ([`crate::local`]) and acknowledged as applied.
//! Batches of one connection apply in order. A [`Frame::Settled`] goes to
//! every node of this site in turn, after the batches read before it
//! ([`crate::settled`]).

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use framing::tls::{Reader, Writer};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use crate::auth::{self, Role};
use crate::local::{LocalRouter, Outcome};
use crate::stats::add;
use crate::wire::{self, Challenge, Frame, Hello, Welcome};
use crate::Wan;

const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// How often an idle connection checks its site's data incarnation.
const CHECK_EVERY: Duration = Duration::from_secs(1);
/// Batches read ahead of the one being applied.
const APPLY_QUEUE: usize = 8;

/// What the connection hands its applier, in the order it read them.
enum Work {
    Batch(u64, Vec<wire::Entry>),
    Settled(Vec<(u16, u64)>),
}

pub async fn serve(wan: Arc<Wan>, listener: TcpListener) {
    if let (None, Ok(addr)) = (&wan.settings.secret, listener.local_addr()) {
        if !addr.ip().is_loopback() {
            tracing::warn!(%addr, "wan.listen has no wan.secret: any host that reaches it can write to this site");
        }
    }
    loop {
        match listener.accept().await {
            Ok((stream, addr)) => {
                let _ = stream.set_nodelay(true);
                tokio::spawn(connection(wan.clone(), stream, addr));
            }
            Err(e) => {
                tracing::warn!("WAN accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Reads one frame, adding what it read to `counter`.
async fn read_frame(
    rd: &mut Reader,
    buf: &mut BytesMut,
    counter: Option<&std::sync::atomic::AtomicU64>,
) -> Result<Option<Frame>, String> {
    let counted = |n: usize| {
        if let Some(c) = counter {
            add(c, n as u64);
        }
    };
    framing::read_with(rd, buf, wire::decode, counted)
        .await
        .map_err(|e| e.to_string())
}

/// Why a hello is refused, if it is.
fn check_hello(wan: &Wan, h: &Hello) -> Result<(), String> {
    if h.site_id == wan.local.site_id {
        return Err(format!("site id {} is this site's own id", h.site_id));
    }
    if !wan.settings.targets.iter().any(|t| t.name == h.site_name) {
        return Err(format!(
            "unknown site {:?} (id {}): not one of this site's wan.targets",
            h.site_name, h.site_id
        ));
    }
    if h.partitions == 0 || h.partitions > keyspace::slot::SLOTS {
        return Err(format!("bad partition count {}", h.partitions));
    }
    Ok(())
}

async fn connection(wan: Arc<Wan>, stream: TcpStream, addr: std::net::SocketAddr) {
    // With [wan] tls: the publisher shows a certificate from our CA, and
    // (below, once its hello says which site it is) one naming that site.
    let (mut rd, mut wr, tls) = match &wan.settings.tls {
        None => {
            let (rd, wr) = framing::tls::split(stream);
            (rd, wr, None)
        }
        Some(t) => match tokio::time::timeout(HELLO_TIMEOUT, t.accept(stream)).await {
            Ok(Ok(s)) => {
                let names = |site: &str| framing::tls::peer_is(&s, site);
                let check: Box<dyn Fn(&str) -> bool + Send + Sync> = {
                    let ok: std::collections::HashSet<String> = wan
                        .settings
                        .targets
                        .iter()
                        .map(|t| t.name.clone())
                        .filter(|n| names(n))
                        .collect();
                    Box::new(move |site: &str| ok.contains(site))
                };
                let (rd, wr) = framing::tls::split(s);
                (rd, wr, Some(check))
            }
            Ok(Err(e)) => {
                tracing::warn!(%addr, "refused WAN connection: TLS handshake failed: {e}");
                add(&wan.receiver_stats(0).refused, 1);
                return;
            }
            Err(_) => {
                tracing::warn!(%addr, "refused WAN connection: no TLS handshake in time");
                add(&wan.receiver_stats(0).refused, 1);
                return;
            }
        },
    };
    let mut buf = BytesMut::with_capacity(64 << 10);
    let hello = match tokio::time::timeout(HELLO_TIMEOUT, read_frame(&mut rd, &mut buf, None)).await
    {
        Ok(Ok(Some(Frame::Hello(h)))) => h,
        Ok(Ok(None)) => return,
        outcome => {
            let why = match outcome {
                Ok(Err(e)) => e,
                Err(_) => "no hello in time".into(),
                _ => "first frame is not a hello".into(),
            };
            tracing::warn!(%addr, "refused WAN connection: {why}");
            add(&wan.receiver_stats(0).refused, 1);
            refuse(&mut wr, why).await;
            return;
        }
    };
    let stats = wan.receiver_stats(hello.site_id);
    let certified = |h: &Hello| match &tls {
        Some(names) if !names(&h.site_name) => Err(format!(
            "its TLS certificate does not name site {:?}",
            h.site_name
        )),
        _ => Ok(()),
    };
    if let Err(why) = check_hello(&wan, &hello).and_then(|()| certified(&hello)) {
        tracing::warn!(%addr, site = hello.site_name, "refused WAN connection: {why}");
        add(&stats.refused, 1);
        refuse(&mut wr, why).await;
        return;
    }
    let data_incarnation = site_incarnation(&wan);
    if data_incarnation == 0 {
        // Taking batches now could let a publisher resume past what a site
        // formed anew never had.
        let why = "this site is not formed yet".to_string();
        tracing::info!(%addr, site = hello.site_name, "refused WAN connection: {why}");
        refuse(&mut wr, why).await;
        return;
    }
    let source = hello.site_id;
    *stats.name.lock() = hello.site_name.clone();
    let inc = hello.incarnation;
    let applied = wan.watermarks.lock().of(source, inc);
    let secret = wan.settings.secret.as_deref().map(str::as_bytes);
    let challenge = secret.map(|secret| {
        let nonce = auth::nonce();
        Challenge {
            nonce,
            proof: auth::proof(secret, Role::Receiver, &hello.nonce, &nonce),
        }
    });
    let (tx, mut rx) = mpsc::unbounded_channel::<Frame>();
    let _ = tx.send(Frame::Welcome(Welcome {
        site_id: wan.local.site_id,
        site_name: wan.local.site_name.clone(),
        applied,
        data_incarnation,
        challenge: challenge.clone(),
    }));
    let writer = tokio::spawn(async move {
        let mut out = BytesMut::new();
        while let Some(f) = rx.recv().await {
            out.clear();
            wire::encode(&f, &mut out);
            while let Ok(f) = rx.try_recv() {
                wire::encode(&f, &mut out);
            }
            if wr.write_all(&out).await.is_err() {
                break;
            }
        }
    });
    if let (Some(secret), Some(c)) = (secret, &challenge) {
        let answer = tokio::time::timeout(HELLO_TIMEOUT, read_frame(&mut rd, &mut buf, None)).await;
        let why = match answer {
            Ok(Ok(Some(Frame::Proof(p))))
                if auth::verify(secret, Role::Publisher, &hello.nonce, &c.nonce, &p) =>
            {
                None
            }
            Ok(Ok(Some(Frame::Proof(_)))) => {
                Some("authentication failed: its proof does not match wan.secret".into())
            }
            Ok(Ok(Some(other))) => Some(format!(
                "authentication failed: {} instead of a proof of wan.secret",
                other.name()
            )),
            Ok(Ok(None)) => {
                Some("authentication failed: closed without proving it knows wan.secret".into())
            }
            Ok(Err(e)) => Some(format!("authentication failed: {e}")),
            Err(_) => Some("authentication failed: no proof of wan.secret in time".into()),
        };
        if let Some(why) = why {
            tracing::warn!(%addr, site = hello.site_name, node = hello.node_id, "refused WAN connection: {why}");
            add(&stats.refused, 1);
            let _ = tx.send(Frame::Refuse(why));
            drop(tx);
            let _ = writer.await;
            return;
        }
    }
    tracing::info!(%addr, site = hello.site_name, node = hello.node_id, authenticated = challenge.is_some(), tls = tls.is_some(), "WAN publisher connected");
    let (batch_tx, batch_rx) = mpsc::channel(APPLY_QUEUE);
    let applier = tokio::spawn(apply_loop(
        wan.clone(),
        hello.clone(),
        data_incarnation,
        batch_rx,
        tx.clone(),
    ));
    loop {
        // A timeout loses nothing: read_frame keeps what it read in `buf`.
        let frame = tokio::time::timeout(
            CHECK_EVERY,
            read_frame(&mut rd, &mut buf, Some(&stats.bytes_received)),
        )
        .await;
        if site_incarnation(&wan) != data_incarnation {
            // Partitions restarted empty here: the publisher must see the
            // new incarnation (and re-sync) rather than go on from its seqs.
            tracing::warn!(%addr, site = hello.site_name, "this site's data incarnation changed: closing the WAN connection");
            let _ = tx.send(Frame::Refuse(
                "this site's data incarnation changed: reconnect".into(),
            ));
            break;
        }
        let Ok(frame) = frame else { continue };
        match frame {
            Ok(Some(Frame::Batch { id, body })) => {
                add(&stats.batches, 1);
                let _ = tx.send(Frame::Received(id));
                match wire::decode_entries(&body, hello.partitions) {
                    Ok(entries) => {
                        add(&stats.events_received, entries.len() as u64);
                        if batch_tx.send(Work::Batch(id, entries)).await.is_err() {
                            break;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(%addr, site = hello.site_name, "refused WAN batch {id}: {e}; closing the connection");
                        add(&stats.refused, 1);
                        let _ = tx.send(Frame::Refuse(format!("batch {id}: {e}")));
                        break;
                    }
                }
            }
            Ok(Some(Frame::Settled(marks))) => {
                if marks.iter().any(|(p, _)| *p >= hello.partitions) {
                    tracing::warn!(%addr, site = hello.site_name, "refused settled marks past the partition count; closing the connection");
                    add(&stats.refused, 1);
                    break;
                }
                if batch_tx.send(Work::Settled(marks)).await.is_err() {
                    break;
                }
            }
            Ok(Some(other)) => {
                tracing::warn!(%addr, site = hello.site_name, "unexpected WAN frame {other:?}; closing the connection");
                add(&stats.refused, 1);
                break;
            }
            Ok(None) => break,
            Err(e) => {
                tracing::warn!(%addr, site = hello.site_name, "bad WAN frame: {e}; closing the connection");
                add(&stats.refused, 1);
                let _ = tx.send(Frame::Refuse(e));
                break;
            }
        }
    }
    drop(batch_tx);
    // Let the batches already read finish applying (their applied acks may
    // no longer reach the publisher; it re-sends, the watermarks skip).
    let _ = applier.await;
    drop(tx);
    let _ = writer.await;
    tracing::info!(%addr, site = hello.site_name, "WAN publisher disconnected");
}

/// Tells a publisher why it is refused, before the connection closes.
async fn refuse(wr: &mut Writer, why: String) {
    let mut out = BytesMut::new();
    wire::encode(&Frame::Refuse(why), &mut out);
    let _ = wr.write_all(&out).await;
}

/// What a publisher compares to tell a site that started over without its
/// data: this process for a lone node; for a site of several, the one in its
/// metadata (its data lives while any copy does). 0: not formed yet.
pub(crate) fn site_incarnation(wan: &Wan) -> u64 {
    match &wan.cluster {
        None => wan.incarnation,
        Some(c) => c
            .metadata
            .get()
            .map_or(0, |md| md.current().data_incarnation),
    }
}

async fn apply_loop(
    wan: Arc<Wan>,
    hello: Hello,
    incarnation: u64,
    mut batches: mpsc::Receiver<Work>,
    tx: mpsc::UnboundedSender<Frame>,
) {
    let source = hello.site_id;
    let inc = hello.incarnation;
    let stats = wan.receiver_stats(source);
    let mut router = LocalRouter::new(
        wan.local.clone(),
        wan.ks.clone(),
        wan.cluster.clone(),
        wan.store.get().cloned(),
    );
    while let Some(work) = batches.recv().await {
        let (id, entries) = match work {
            Work::Batch(id, entries) => (id, entries),
            Work::Settled(marks) => {
                wan.settled(&hello.site_name, &marks, incarnation);
                router.settled(&hello.site_name, &marks, incarnation).await;
                continue;
            }
        };
        let total = entries.len();
        let fresh: Vec<wire::Entry> = {
            let marks = wan.watermarks.lock();
            entries
                .into_iter()
                .filter(|e| {
                    e.seq == 0
                        || marks
                            .get(source, inc, e.partition)
                            .is_none_or(|m| e.seq > m)
                })
                .collect()
        };
        add(&stats.duplicates, (total - fresh.len()) as u64);
        let changes: Vec<keyspace::Change> = fresh.iter().map(|e| e.change.clone()).collect();
        wan.check_data_incarnation();
        let outcomes = router.apply(source, &changes, || batches.is_closed()).await;
        if outcomes
            .iter()
            .any(|o| matches!(o, Outcome::Moved | Outcome::ClockAhead))
        {
            // The link closed while some waited: not acknowledged, so the
            // publisher sends them again.
            break;
        }
        let mut need = Vec::new();
        for (e, o) in fresh.iter().zip(&outcomes) {
            match o {
                Outcome::Applied => add(&stats.applied, 1),
                Outcome::Duplicate => add(&stats.duplicates, 1),
                Outcome::ConflictLost => add(&stats.conflicts_lost, 1),
                Outcome::NeedFull => {
                    add(&stats.need_full, 1);
                    need.push((e.partition, e.change.key.clone()));
                }
                Outcome::Moved | Outcome::ClockAhead => {}
            }
        }
        wan.watermarks.lock().raise(
            source,
            inc,
            fresh
                .iter()
                .filter(|e| e.seq != 0)
                .map(|e| (e.partition, e.seq)),
        );
        if !need.is_empty() {
            let _ = tx.send(Frame::NeedFull(need));
        }
        if tx.send(Frame::Applied(id)).is_err() {
            break;
        }
    }
}
