//! One client connection: read bytes, decode every complete request, run
//! each through the admission pipeline, and write all replies with one
//! write per read (so pipelined requests cost one syscall each way). Pushes
//! (tracking invalidations, pub/sub messages) arrive on a bounded channel
//! and are written between requests, never inside a reply.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Notify};

use crate::clients::{ClientShared, Push, TrackingState, PUSH_QUEUE};
use crate::node::Node;
use crate::pubsub::INVALIDATE_CHANNEL;
use crate::session::Session;

/// Bytes a read asks for at first; a connection whose reads fill that
/// (pipelined requests in flight) asks for up to `MAX_READ_CHUNK`, so a
/// batch of requests comes in with one read rather than two.
const READ_CHUNK: usize = 16 * 1024;
const MAX_READ_CHUNK: usize = 256 * 1024;

/// What a connection reads and writes: a TCP socket, or TLS over one
/// ([`crate::tls::TlsClient`]). Reads wait for the socket to be readable,
/// then take what is there without blocking (see `serve`).
pub trait ClientStream: AsyncWrite + Unpin + Send + 'static {
    fn readable(&self) -> impl std::future::Future<Output = std::io::Result<()>> + Send;
    fn try_read_buf(&mut self, buf: &mut BytesMut) -> std::io::Result<usize>;
    fn socket(&self) -> &TcpStream;
    const TLS: bool;
}

impl ClientStream for TcpStream {
    fn readable(&self) -> impl std::future::Future<Output = std::io::Result<()>> + Send {
        TcpStream::readable(self)
    }
    fn try_read_buf(&mut self, buf: &mut BytesMut) -> std::io::Result<usize> {
        TcpStream::try_read_buf(self, buf)
    }
    fn socket(&self) -> &TcpStream {
        self
    }
    const TLS: bool = false;
}

impl ClientStream for crate::tls::TlsClient {
    fn readable(&self) -> impl std::future::Future<Output = std::io::Result<()>> + Send {
        crate::tls::TlsClient::readable(self)
    }
    fn try_read_buf(&mut self, buf: &mut BytesMut) -> std::io::Result<usize> {
        crate::tls::TlsClient::try_read_buf(self, buf)
    }
    fn socket(&self) -> &TcpStream {
        crate::tls::TlsClient::socket(self)
    }
    const TLS: bool = true;
}

pub async fn serve<S: ClientStream>(node: Arc<Node>, mut stream: S, addr: SocketAddr) {
    node.metrics
        .connections_received
        .fetch_add(1, Ordering::Relaxed);
    let _ = stream.socket().set_nodelay(true);
    if node.clients.len() >= node.runtime.maxclients.load(Ordering::Relaxed) {
        node.metrics
            .rejected_connections
            .fetch_add(1, Ordering::Relaxed);
        let _ = stream
            .write_all(b"-ERR max number of clients reached\r\n")
            .await;
        let _ = stream.flush().await;
        return;
    }
    let laddr = stream.socket().local_addr().unwrap_or(addr);
    let (push_tx, mut push_rx) = mpsc::channel(PUSH_QUEUE);
    let shared = Arc::new(ClientShared {
        id: node.clients.next_id(),
        addr,
        laddr,
        tls: S::TLS,
        created: std::time::Instant::now(),
        name: Mutex::new(None),
        user: Mutex::new(Bytes::from_static(b"default")),
        lib: Mutex::new((String::new(), String::new())),
        resp3: Default::default(),
        last_cmd: AtomicUsize::new(0),
        last_active_ms: Default::default(),
        killed: Default::default(),
        wake: Notify::new(),
        push_tx,
        tracking: Mutex::new(TrackingState::default()),
        subs: Mutex::new(Default::default()),
        qbuf: AtomicUsize::new(0),
        qbuf_free: AtomicUsize::new(0),
        fd: std::os::fd::AsRawFd::as_raw_fd(stream.socket()),
        busy: Default::default(),
        unblock: Notify::new(),
        block_state: Default::default(),
    });
    node.clients.insert(shared.clone());
    let mut session = Session::new(node.clone(), shared.clone());
    let mut inbuf = BytesMut::with_capacity(READ_CHUNK);
    let mut outbuf = BytesMut::with_capacity(READ_CHUNK);
    let mut read_chunk = READ_CHUNK;
    // Registered once, not per request batch (a `Notified` takes the
    // Notify's lock to register and again to unregister).
    let wake = shared.wake.notified();
    tokio::pin!(wake);
    loop {
        if shared.killed.load(Ordering::Acquire) {
            break;
        }
        let blocked = session.blocked();
        tokio::select! {
            ready = stream.readable() => {
                if ready.is_err() {
                    break;
                }
                // Marked busy before the bytes leave the socket, so a
                // PUBLISH that asks (see `pending_requests`) sees them
                // either unread or read and not yet run.
                shared.busy.store(true, Ordering::Release);
                match stream.try_read_buf(&mut inbuf) {
                    Ok(0) => break,
                    Ok(n) if n >= read_chunk => read_chunk = (read_chunk * 2).min(MAX_READ_CHUNK),
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        shared.busy.store(false, Ordering::Release);
                        continue;
                    }
                    Err(_) => break,
                }
                // Killed while this read was under way (select! may pick the
                // read over the wake-up): run nothing more.
                if shared.killed.load(Ordering::Acquire) {
                    break;
                }
                if !run_batch(&node, &shared, &mut session, &mut stream, &mut inbuf, &mut outbuf, &mut push_rx).await {
                    break;
                }
                if inbuf.capacity() - inbuf.len() < read_chunk {
                    inbuf.reserve(read_chunk);
                }
            }
            // A blocked client (BZPOPMIN...): a key it waits for changed,
            // or CLIENT UNBLOCK, or its timeout.
            _ = async { shared.unblock.notified().await }, if blocked.is_some() => {
                session.wake();
                shared.busy.store(true, Ordering::Release);
                if !run_batch(&node, &shared, &mut session, &mut stream, &mut inbuf, &mut outbuf, &mut push_rx).await {
                    break;
                }
            }
            _ = async {
                match blocked.flatten() {
                    Some(deadline) => tokio::time::sleep_until(deadline).await,
                    None => std::future::pending().await,
                }
            }, if blocked.is_some_and(|d| d.is_some()) => {
                shared.busy.store(true, Ordering::Release);
                if !run_batch(&node, &shared, &mut session, &mut stream, &mut inbuf, &mut outbuf, &mut push_rx).await {
                    break;
                }
            }
            Some(push) = push_rx.recv() => {
                write_push(&session, &shared, push, &mut outbuf);
                while let Ok(p) = push_rx.try_recv() {
                    write_push(&session, &shared, p, &mut outbuf);
                }
                if !outbuf.is_empty() && write_out(&mut stream, &outbuf).await.is_err() {
                    break;
                }
                outbuf.clear();
            }
            _ = &mut wake => wake.set(shared.wake.notified()),
        }
    }
    session.close();
}

/// Runs the requests read (after a blocked command's turn, see
/// [`Session::process`]) and writes the replies. False: the connection
/// must close.
/// Writes `out` whole (TLS: and the records it makes).
async fn write_out<S: ClientStream>(stream: &mut S, out: &[u8]) -> std::io::Result<()> {
    stream.write_all(out).await?;
    stream.flush().await
}

async fn run_batch<S: ClientStream>(
    node: &Node,
    shared: &ClientShared,
    session: &mut Session,
    stream: &mut S,
    inbuf: &mut BytesMut,
    outbuf: &mut BytesMut,
    push_rx: &mut mpsc::Receiver<Push>,
) -> bool {
    // Eviction first (Redis evicts before each command): the
    // invalidations it sends this client then go out before the
    // replies, as in Redis. The commands evict again if need be.
    if node.runtime.maxmemory() > 0 {
        node.make_room();
    }
    // Pushes already queued go before the replies to these
    // requests, whichever branch select! picked first: an
    // invalidation for a write another client saw acknowledged
    // must reach this client before its next reply (Redis
    // writes it into the client's output buffer at once).
    while let Ok(p) = push_rx.try_recv() {
        write_push(session, shared, p, outbuf);
    }
    // A PUBLISH lets every connection already woken run first,
    // so an UNSUBSCRIBE sent before it is applied before it
    // counts receivers, as Redis's one thread takes requests in
    // arrival order (the scheduler runs the connection woken
    // last first).
    if node.pubsub.has_subscribers() && starts_with_publish(inbuf) {
        let subscribers = node.pubsub.subscriber_ids(PUBLISH_WAITS_FOR);
        let since = std::time::Instant::now();
        while since.elapsed() < PUBLISH_WAITS_AT_MOST {
            tokio::task::yield_now().await;
            let waiting = subscribers.iter().any(|&id| {
                id != shared.id && node.clients.get(id).is_some_and(|c| c.pending_requests())
            });
            if !waiting {
                break;
            }
        }
    }
    // Writes are collected per batch on this thread: nothing
    // awaits between these three calls.
    keyspace::take_written();
    persist::take_handed();
    let close = session.process(inbuf, outbuf);
    shared.busy.store(false, Ordering::Release);
    shared.qbuf.store(inbuf.len(), Ordering::Relaxed);
    shared
        .qbuf_free
        .store(inbuf.capacity() - inbuf.len(), Ordering::Relaxed);
    let written = keyspace::take_written();
    if !written.is_empty() {
        if let Some(cluster) = node.cluster.as_ref().filter(|c| c.sync_replication()) {
            if !cluster.replicator.wait(&written).await {
                tracing::warn!(
                    client = shared.id,
                    "replicas did not acknowledge in time; closing the connection unanswered"
                );
                return false;
            }
        }
    }
    // ACL changes made here hold on every member before the client hears
    // OK (see site_acl).
    if !session.pending_acl.is_empty() {
        let pending = std::mem::take(&mut session.pending_acl);
        if let Err(e) = crate::site_acl::commit(node, pending).await {
            tracing::warn!(client = shared.id, "{e}; closing the connection unanswered");
            return false;
        }
    }
    // fsync = "always": replies wait until the changes are on disk (one
    // fsync covers every connection's changes that arrived meanwhile).
    let handed = persist::take_handed();
    if let Some((store, _)) = node.store.as_ref().filter(|(s, _)| handed > 0 && s.waits()) {
        if !store.wait_durable(handed).await {
            tracing::warn!(
                client = shared.id,
                "the change log cannot be written; closing the connection unanswered"
            );
            return false;
        }
    }
    // A closing client (QUIT) is gone before its last reply leaves, as in
    // Redis: whoever reads that reply and writes next finds it gone (a
    // tracking redirection to it is broken, not delivered to a socket
    // about to close).
    if close {
        session.close();
    }
    // Replies go out after every other connection that is ready
    // has run its requests (Redis writes them in `beforeSleep`):
    // writes back to back wake a sleeping client once, not once
    // per connection, and a wake-up on another CPU costs more
    // than a batch of requests (an IPI, a VM exit). A lone
    // client does not wait for the scheduler.
    if !outbuf.is_empty() {
        if node.clients.len() > 1 {
            tokio::task::yield_now().await;
        }
        if write_out(stream, outbuf).await.is_err() {
            return false;
        }
    }
    outbuf.clear();
    if close {
        return false;
    }
    if inbuf.len()
        > node
            .runtime
            .client_query_buffer_limit
            .load(Ordering::Relaxed)
    {
        tracing::warn!(
            client = shared.id,
            "closing client that reached max query buffer length"
        );
        return false;
    }
    true
}

/// Subscribers whose waiting requests a PUBLISH lets run first (past that
/// many, it does not wait), and for how long at most.
const PUBLISH_WAITS_FOR: usize = 64;
const PUBLISH_WAITS_AT_MOST: std::time::Duration = std::time::Duration::from_millis(10);

/// Whether the first request of `inbuf` looks like a PUBLISH or SPUBLISH
/// (the name in its first few bytes, any case).
fn starts_with_publish(inbuf: &[u8]) -> bool {
    let head = &inbuf[..inbuf.len().min(24)];
    head.windows(7).any(|w| w.eq_ignore_ascii_case(b"publish"))
}

/// Encodes a push in the connection's protocol: RESP3 push frames; for
/// RESP2, pub/sub messages (invalidations only to subscribers of
/// `__redis__:invalidate`, as Redis does for REDIRECT targets).
fn write_push(session: &Session, shared: &ClientShared, push: Push, out: &mut BytesMut) {
    let resp3 = session.resp3;
    let mut w = resp::ReplyWriter::new(out, resp3);
    match push {
        Push::Invalidate(keys) => {
            if resp3 {
                w.push(2);
                w.bulk(b"invalidate");
            } else if shared.subscribed_to(INVALIDATE_CHANNEL) {
                w.array(3);
                w.bulk(b"message");
                w.bulk(INVALIDATE_CHANNEL);
            } else {
                return;
            }
            match keys {
                Some(keys) => {
                    w.array(keys.len());
                    for k in &keys {
                        w.bulk(k);
                    }
                }
                // FLUSHALL: RESP3 null, RESP2 a null bulk (as Redis sends).
                None => w.null(),
            }
        }
        Push::Monitor(line) => out.extend_from_slice(&line),
        Push::RedirectBroken(id) => {
            if resp3 {
                w.push(2);
                w.bulk(b"tracking-redir-broken");
                w.int(id as i64);
            }
        }
        Push::Message { channel, payload } => {
            w.push(3);
            w.bulk(b"message");
            w.bulk(&channel);
            w.bulk(&payload);
        }
        Push::PatternMessage {
            pattern,
            channel,
            payload,
        } => {
            w.push(4);
            w.bulk(b"pmessage");
            w.bulk(&pattern);
            w.bulk(&channel);
            w.bulk(&payload);
        }
        Push::ShardMessage { channel, payload } => {
            w.push(3);
            w.bulk(b"smessage");
            w.bulk(&channel);
            w.bulk(&payload);
        }
    }
}
