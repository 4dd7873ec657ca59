//! Node-to-node connections on `cluster_listen`: one per pair of members
//! (the member with the higher node id dials the lower one, both use it;
//! so a node that joins dials the members it was told of, and nobody needs
//! to learn new addresses to dial). Each
//! side sends a hello first; a peer that does not speak the protocol, speaks
//! another version, or belongs to another site is refused and logged. After
//! the hello both sides ping every [`PING_EVERY`]: a connection silent for
//! [`SILENT_AFTER`] is closed (what failure detection starts from), and
//! the answers carry the lease ([`crate::lease`]). A hello that claims the
//! address of a member another connection speaks for, or of a member the
//! metadata knows by another name, is refused and logged.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use framing::tls::PeerStream;
use framing::ReadError;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use keyspace::Pinned;

use crate::cluster::{cluster_id, Cluster, Member};
use crate::metadata::rpc;
use crate::replication::Replicator;
use crate::wire::{self, Hello, WireError};

const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
use crate::lease::PING_EVERY;
/// A connection over which nothing arrived for this long is closed.
pub const SILENT_AFTER: Duration = Duration::from_secs(2);
const REDIAL_AFTER: Duration = Duration::from_millis(300);
/// Replication batches sent to a peer and not yet answered. While one is
/// in flight, changes gather in the peer's buffer and leave as one batch
/// when the answer comes: batches grow with the load by themselves (the
/// way Nagle's algorithm does it, without its timer), so the per-batch
/// cost (a send and a wake-up here, a read, an apply and an ack there) is
/// shared by more writes the busier the node, and an idle node's write
/// still leaves at once.
const MAX_BATCHES_IN_FLIGHT: usize = 1;

pub async fn run(cluster: Arc<Cluster>, listener: TcpListener) {
    tokio::spawn(crate::failover::run(cluster.clone()));
    tokio::spawn(sweep_waiting_writes(Arc::downgrade(&cluster)));
    tokio::spawn(keep_lease(Arc::downgrade(&cluster)));
    for (i, _) in cluster.known_addrs() {
        if i < cluster.my_index {
            tokio::spawn(dial_loop(cluster.clone(), i));
        }
    }
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                // Small frames (acks, batches a sync write waits for) must
                // not sit out Nagle's delay on this side either.
                let _ = stream.set_nodelay(true);
                tokio::spawn(inbound(cluster.clone(), stream, peer));
            }
            Err(e) => {
                tracing::warn!("cluster accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Lets writes waiting for replicas notice their timeout
/// ([`Replicator::sweep`]), and reports what replicas finished or lack
/// when no answer came to do it (a proposal that was not decided is made
/// again so), for as long as the site lives.
async fn sweep_waiting_writes(c: std::sync::Weak<Cluster>) {
    let mut every = tokio::time::interval(crate::replication::SWEEP_EVERY);
    while let Some(c) = c.upgrade() {
        c.replicator.sweep();
        c.report_finished_snapshots();
        drop(c);
        every.tick().await;
    }
}

/// Recomputes the lease every [`crate::lease::TICK`], so that it runs out
/// when no grant comes.
async fn keep_lease(c: std::sync::Weak<Cluster>) {
    let mut every = tokio::time::interval(crate::lease::TICK);
    while let Some(c) = c.upgrade() {
        c.refresh_lease();
        drop(c);
        every.tick().await;
    }
}

fn my_hello(c: &Cluster) -> BytesMut {
    let mut out = BytesMut::new();
    Hello {
        version: wire::PROTOCOL_VERSION,
        site_id: c.site_id,
        node_id: c.me.node_id.clone(),
        cluster_addr: c.me.cluster_addr.to_string(),
        client_addr: c.me.client_addr.clone(),
        tls_client_addr: c.me.tls_client_addr.clone(),
    }
    .encode(&mut out);
    out
}

#[derive(Debug, thiserror::Error)]
enum HandshakeError {
    #[error(transparent)]
    Read(#[from] ReadError<WireError>),
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Refused(String),
    /// Not an error: the connection carried a join and is done.
    #[error("joined")]
    Joined,
}

/// Reads the peer's hello, refusing anything that is not one.
async fn read_hello(stream: &mut PeerStream, buf: &mut BytesMut) -> Result<Hello, HandshakeError> {
    let (kind, payload) = wire::PROTOCOL
        .read_hello(stream, buf, HELLO_TIMEOUT)
        .await?;
    Ok(Hello::decode(kind, payload)?)
}

fn accept_member(c: &Cluster, h: &Hello) -> Result<Member, HandshakeError> {
    if h.site_id != c.site_id {
        return Err(HandshakeError::Refused(format!(
            "peer is in site {}, this node in site {}",
            h.site_id, c.site_id
        )));
    }
    let cluster_addr: SocketAddr = h.cluster_addr.parse().map_err(|_| {
        HandshakeError::Refused(format!("bad cluster address {:?}", h.cluster_addr))
    })?;
    let m = Member {
        node_id: h.node_id.clone(),
        cluster_addr,
        client_addr: h.client_addr.clone(),
        tls_client_addr: h.tls_client_addr.clone(),
        cluster_id: cluster_id(&h.node_id),
        connected: true,
    };
    c.learn(m.clone()).map_err(HandshakeError::Refused)?;
    Ok(m)
}

/// Reads the first bytes of an inbound connection and tells the data
/// protocol's hello from the metadata group's (both start with a frame
/// header, a hello kind and a 4-byte magic).
async fn sniff(stream: &mut PeerStream, buf: &mut BytesMut) -> Result<bool, HandshakeError> {
    let which = |b: &mut BytesMut| {
        let metadata = rpc::PROTOCOL.check_preamble(b).is_ok();
        if !metadata && wire::PROTOCOL.check_preamble(b).is_err() {
            return Err(wire::PROTOCOL.bad_magic());
        }
        Ok((b.len() >= 9).then_some(metadata))
    };
    let read = framing::read_with(stream, buf, which, |_| {});
    Ok(framing::expect("hello", HELLO_TIMEOUT, read).await?)
}

async fn inbound(c: Arc<Cluster>, stream: TcpStream, peer: SocketAddr) {
    if c.is_isolated() {
        return;
    }
    let mut stream =
        match crate::auth::secure_accept(stream, c.secret(), c.settings.tls.as_ref()).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(%peer, "refused connection on cluster_listen: {e}");
                return;
            }
        };
    let mut buf = BytesMut::with_capacity(1024);
    match sniff(&mut stream, &mut buf).await {
        Ok(true) => {
            match c.metadata.get() {
                Some(md) => md.accept(stream, peer, buf),
                None => {
                    tracing::warn!(%peer, "metadata connection before the metadata store started; refused")
                }
            }
            return;
        }
        Ok(false) => {}
        Err(e) => {
            tracing::warn!(%peer, "refused connection on cluster_listen: {e}");
            return;
        }
    }
    let result = async {
        let hello = read_hello(&mut stream, &mut buf).await?;
        if asks_to_join(&c, &hello, &mut stream, &mut buf).await? {
            return Err(HandshakeError::Joined);
        }
        let m = accept_member(&c, &hello)?;
        stream.write_all(&my_hello(&c)).await?;
        Ok::<_, HandshakeError>(m)
    }
    .await;
    match result {
        Ok(m) => {
            tracing::info!(peer = %m.node_id, addr = %m.cluster_addr, "cluster peer connected");
            session(&c, stream, buf, m.cluster_addr).await;
        }
        Err(HandshakeError::Joined) => {}
        Err(e) => tracing::warn!(%peer, "refused connection on cluster_listen: {e}"),
    }
}

/// A hello from a node this one does not know, followed by a join frame:
/// answers the join ([`crate::join::answer`]) and returns true.
async fn asks_to_join(
    c: &Arc<Cluster>,
    hello: &Hello,
    stream: &mut PeerStream,
    buf: &mut BytesMut,
) -> Result<bool, HandshakeError> {
    let known = hello
        .cluster_addr
        .parse()
        .ok()
        .and_then(|a| c.peer_index(a))
        .is_some();
    if known {
        return Ok(false);
    }
    let read = wire::PROTOCOL.limits.read_frame(stream, buf);
    let (kind, _) = framing::expect("join", HELLO_TIMEOUT, read).await?;
    if kind != wire::KIND_JOIN {
        let addr = &hello.cluster_addr;
        return Err(HandshakeError::Refused(format!(
            "{addr} is not a member of this site and did not ask to join"
        )));
    }
    match crate::join::answer(c, stream, hello).await {
        Ok(id) => {
            tracing::info!(node = %hello.node_id, addr = %hello.cluster_addr, id, "node joined the site")
        }
        Err(e) => {
            tracing::warn!(node = %hello.node_id, addr = %hello.cluster_addr, "join refused: {e}")
        }
    }
    Ok(true)
}

/// Keeps a connection to member `i` (lower id than this node), at the
/// address the site knows for it, until it is no longer a member.
async fn dial_loop(c: Arc<Cluster>, i: usize) {
    loop {
        let Some(addr) = c
            .known_addrs()
            .into_iter()
            .find(|(j, _)| *j == i)
            .map(|(_, a)| a)
        else {
            tracing::info!(
                member = i + 1,
                "no longer a member: not dialing it any more"
            );
            return;
        };
        if c.is_isolated() {
            tokio::time::sleep(REDIAL_AFTER).await;
            continue;
        }
        match TcpStream::connect(addr).await {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                let mut buf = BytesMut::with_capacity(1024);
                let result = async {
                    let mut stream =
                        crate::auth::secure_initiate(stream, c.secret(), c.settings.tls.as_ref())
                            .await
                            .map_err(HandshakeError::Refused)?;
                    stream.write_all(&my_hello(&c)).await?;
                    let hello = read_hello(&mut stream, &mut buf).await?;
                    accept_member(&c, &hello).map(|m| (m, stream))
                }
                .await;
                match result {
                    Ok((m, stream)) => {
                        tracing::info!(peer = %m.node_id, %addr, "cluster peer connected");
                        session(&c, stream, buf, addr).await;
                    }
                    Err(e) => tracing::warn!(%addr, "cluster handshake failed: {e}"),
                }
            }
            Err(e) => tracing::debug!(%addr, "cluster dial failed: {e}"),
        }
        tokio::time::sleep(REDIAL_AFTER).await;
    }
}

/// Carries pings, replication batches to the peer (when it backs up our
/// partitions) and acks back; returns when the connection breaks or the
/// peer goes silent. Every batch frame is answered by one ack frame (empty
/// when the batch held no change, e.g. only snapshot data), which is what
/// [`MAX_BATCHES_IN_FLIGHT`] counts.
async fn session(c: &Arc<Cluster>, stream: PeerStream, buf: BytesMut, addr: SocketAddr) {
    let Some(peer) = c.peer_index(addr) else {
        return;
    };
    let mut rb = ReadBuffer::new(buf, c.keyspace().holds_received());
    c.set_connected(addr, true);
    c.replicator.peer_connected(peer);
    let (mut rd, mut wr) = tokio::io::split(stream);
    let mut ping = tokio::time::interval(PING_EVERY);
    let mut last_heard = tokio::time::Instant::now();
    let mut in_flight = Unanswered {
        c,
        peer,
        batches: VecDeque::new(),
    };
    let mut out = BytesMut::new();
    // Copies loaded from disk, offered to the peer as their primary: it
    // may bring them up to date from its log instead of a snapshot.
    let tails = c.keyspace().recovered_tails();
    if !tails.is_empty() {
        wire::encode_frame(
            wire::KIND_HOLDINGS,
            &wire::encode_holdings(&tails),
            &mut out,
        );
    }
    // Whether its copies came back whole: known afresh on every connection.
    c.set_peer_restored(peer, false);
    if c.restored_from_disk(c.my_index) {
        wire::encode_frame(wire::KIND_RESTORED, &[], &mut out);
    }
    // Reused for every ack frame (a batch's acks, one per partition).
    let mut acks = BytesMut::new();
    loop {
        rb.make_room();
        tokio::select! {
            _ = c.replicator.batch_ready(peer), if in_flight.batches.len() < MAX_BATCHES_IN_FLIGHT => {
                if c.is_isolated() {
                    break;
                }
                queue_next_batch(c, peer, &mut out, &mut in_flight);
            }
            _ = c.messages.ready(peer) => {
                if c.is_isolated() {
                    break;
                }
                c.messages.drain(peer, &mut out);
            }
            _ = ping.tick() => {
                if c.is_isolated() {
                    break;
                }
                if last_heard.elapsed() > SILENT_AFTER {
                    tracing::warn!(%addr, "cluster peer silent for {SILENT_AFTER:?}");
                    break;
                }
                wire::encode_frame(wire::KIND_PING, &c.lease.now().to_le_bytes(), &mut out);
            }
            read = rd.read_buf(&mut rb.buf) => {
                match read {
                    Ok(0) | Err(_) => break,
                    Ok(_) if c.is_isolated() => break,
                    Ok(_) => {}
                }
                let mut answered = false;
                loop {
                    match wire::decode_frame(&mut rb.buf) {
                        Ok(Some((kind, payload))) => {
                            last_heard = tokio::time::Instant::now();
                            match kind {
                                wire::KIND_BATCH => match c.replicator.apply_received(payload, rb.pin.clone(), peer) {
                                    Ok(applied) => {
                                        // fsync = "always": acknowledged once on this disk too.
                                        let handed = persist::take_handed();
                                        if let Some(store) = c.store.get().filter(|s| handed > 0 && s.waits()) {
                                            if !store.wait_durable(handed).await {
                                                tracing::error!(%addr, "changes not written to disk: not acknowledging them");
                                                c.set_connected(addr, false);
                                                return;
                                            }
                                        }
                                        acks.clear();
                                        Replicator::encode_acks(&applied, &mut acks);
                                        wire::encode_frame(wire::KIND_ACK, &acks, &mut out);
                                    }
                                    Err(e) => {
                                        tracing::warn!(%addr, "bad replication batch: {e}");
                                        c.set_connected(addr, false);
                                        return;
                                    }
                                },
                                wire::KIND_PING => {
                                    // The lease's question: what did this node apply?
                                    if let Ok(token) = <[u8; 8]>::try_from(&payload[..]) {
                                        let mut pong = [0u8; 16];
                                        pong[..8].copy_from_slice(&token);
                                        pong[8..].copy_from_slice(&c.applied_index().to_le_bytes());
                                        wire::encode_frame(wire::KIND_PONG, &pong, &mut out);
                                    }
                                }
                                wire::KIND_PONG if payload.len() == 16 => {
                                    let mut pong = payload.clone();
                                    let token = pong.get_u64_le();
                                    let applied = pong.get_u64_le();
                                    c.lease_answered(peer, token, applied);
                                }
                                wire::KIND_MESSAGE => c.messages.received(payload, peer),
                                wire::KIND_RESTORED => c.set_peer_restored(peer, true),
                                wire::KIND_HOLDINGS => match wire::decode_holdings(&payload) {
                                    Some(copies) => c.replicator.offered(peer, &copies),
                                    None => tracing::warn!(%addr, "cluster peer sent a bad holdings frame"),
                                },
                                wire::KIND_ACK => {
                                    answered = true;
                                    c.replicator.acked_by(peer, payload);
                                    if let Some((end, _)) = in_flight.batches.pop_front() {
                                        c.replicator.answered(peer, end);
                                    }
                                }
                                _ => {}
                            }
                        }
                        Ok(None) => break,
                        Err(e) => {
                            tracing::warn!(%addr, "cluster peer sent a bad frame: {e}");
                            c.set_connected(addr, false);
                            return;
                        }
                    }
                }
                if answered {
                    c.report_finished_snapshots();
                    // What gathered while the batch was out leaves now,
                    // in the same write as any acks of ours.
                    if in_flight.batches.len() < MAX_BATCHES_IN_FLIGHT && !c.is_isolated() {
                        queue_next_batch(c, peer, &mut out, &mut in_flight);
                    }
                }
            }
        }
        if !out.is_empty() {
            if wr.write_all(&out).await.is_err() {
                break;
            }
            out.clear();
        }
    }
    c.set_connected(addr, false);
    c.messages.disconnected(peer);
    tracing::info!(%addr, "cluster peer disconnected");
}

/// What a connection reads into, in buffers of at least this many bytes
/// while received batches are held.
const READ_BUFFER: usize = 64 << 10;

/// The buffer a connection reads frames into. While this node holds the
/// batches it receives as a replica (`Keyspace::hold_received`), each
/// buffer is allocated here, sized for the frame begun in it, with a
/// [`Pinned`] that counts its memory for as long as held batches keep it
/// alive; otherwise `read_buf` grows and reuses one buffer.
struct ReadBuffer {
    buf: BytesMut,
    pin: Option<Arc<Pinned>>,
    pinned: bool,
}

impl ReadBuffer {
    fn new(buf: BytesMut, pinned: bool) -> Self {
        let mut rb = ReadBuffer {
            buf,
            pin: None,
            pinned,
        };
        if pinned {
            rb.fresh();
        }
        rb
    }

    /// Room for the next read: a new buffer once this one is full.
    fn make_room(&mut self) {
        if self.pinned && self.buf.capacity() == self.buf.len() {
            self.fresh();
        }
    }

    /// Moves what was read and not taken yet into a new pinned buffer,
    /// with room for the rest of the frame begun in it: up to twice what
    /// arrived of it, so memory follows the bytes a peer sent, not the
    /// length it announced.
    fn fresh(&mut self) {
        let frame = framing::announced_len(&self.buf).map_or(0, |n| n.min(wire::MAX_FRAME));
        let want = READ_BUFFER.max((4 + frame).min(2 * self.buf.len()));
        let mut fresh = BytesMut::with_capacity(want);
        fresh.extend_from_slice(&self.buf);
        self.pin = Some(Arc::new(Pinned::new(fresh.capacity())));
        self.buf = fresh;
    }
}

/// The batches a connection sent and the peer has not answered yet, oldest
/// first, each with where it ends in the peer's stream. However the
/// connection ends, they go back to the replicator to be sent again
/// ([`Replicator::requeue`]).
struct Unanswered<'a> {
    c: &'a Cluster,
    peer: usize,
    batches: VecDeque<(u64, Bytes)>,
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        self.c
            .replicator
            .requeue(self.peer, self.batches.drain(..).map(|(_, b)| b));
    }
}

/// Frames the peer's next batch, if any, into `out` and remembers it.
fn queue_next_batch(c: &Cluster, peer: usize, out: &mut BytesMut, in_flight: &mut Unanswered<'_>) {
    if c.is_held(peer) {
        return;
    }
    if let Some((batch, end)) = c.replicator.take_batch(peer) {
        wire::encode_frame(wire::KIND_BATCH, &batch, out);
        in_flight.batches.push_back((end, batch));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `data` to a pinned [`ReadBuffer`] at most `step` bytes per
    /// read, as `read_buf` would (never past the buffer's capacity);
    /// returns the frames and how many buffers it allocated.
    fn read_all(data: &[u8], step: usize) -> (Vec<(u8, Bytes)>, usize) {
        let mut rb = ReadBuffer::new(BytesMut::new(), true);
        let (mut frames, mut buffers, mut at) = (Vec::new(), 1, 0);
        while at < data.len() {
            let before = rb.pin.as_ref().map(Arc::as_ptr);
            rb.make_room();
            if rb.pin.as_ref().map(Arc::as_ptr) != before {
                buffers += 1;
            }
            let n = (rb.buf.capacity() - rb.buf.len())
                .min(step)
                .min(data.len() - at);
            assert!(n > 0, "room for the next read");
            rb.buf.extend_from_slice(&data[at..at + n]);
            at += n;
            while let Some(f) = wire::decode_frame(&mut rb.buf).unwrap() {
                frames.push(f);
            }
        }
        (frames, buffers)
    }

    #[test]
    fn frames_arrive_whole_in_buffers_sized_by_what_was_read() {
        let bodies: Vec<Vec<u8>> = [300, 70_000, 5, 1 << 20, 40]
            .iter()
            .map(|&n| (0..n).map(|i| i as u8).collect())
            .collect();
        let mut data = BytesMut::new();
        for b in &bodies {
            wire::encode_frame(wire::KIND_BATCH, b, &mut data);
        }
        let (frames, buffers) = read_all(&data, 16 << 10);
        assert_eq!(frames.len(), bodies.len());
        for ((kind, got), want) in frames.iter().zip(&bodies) {
            assert_eq!((*kind, &got[..]), (wire::KIND_BATCH, &want[..]));
        }
        // 1.1 MB in buffers of 64 KiB and more, each at most twice what
        // had arrived of its frame: a handful, not one per read.
        assert!(buffers <= 12, "{buffers} buffers");
    }

    #[test]
    fn an_announced_length_allocates_only_as_the_bytes_come() {
        let mut rb = ReadBuffer::new(BytesMut::new(), true);
        rb.buf
            .extend_from_slice(&(wire::MAX_FRAME as u32).to_le_bytes());
        rb.buf.extend_from_slice(&[wire::KIND_BATCH; 100]);
        while rb.buf.len() < rb.buf.capacity() {
            rb.buf.extend_from_slice(&[0]);
        }
        rb.make_room();
        assert!(
            rb.buf.capacity() <= 2 * READ_BUFFER,
            "{} bytes for a frame announced at {} of which 64 KiB came",
            rb.buf.capacity(),
            wire::MAX_FRAME
        );
    }
}
