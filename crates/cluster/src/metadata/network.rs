//! Carrying the metadata group's RPCs between members over TCP.
//!
//! Outbound: one connection per peer ([`Peers`]), dialed on first use and
//! again after it breaks. openraft asks for several clients per peer
//! (replication, votes, snapshots); they all share that connection, each
//! call tagged with an id so answers may come back in any order. A call
//! that cannot connect reports the peer unreachable (openraft backs off);
//! one that gets no answer within openraft's deadline reports a timeout.
//!
//! Inbound: [`serve`] accepts connections, checks the hello (same site,
//! addressed to this node) and runs each request on its own task against
//! the local `Raft`, so a vote never waits behind a snapshot chunk.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use framing::tls::PeerStream;
use framing::ReadError;
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Timeout, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::RPCTypes;
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};

use super::rpc::{self, ForwardError, Hello, Request, Response, RpcError};
use super::state::NodeId;
use super::state_machine::MAX_SNAPSHOT;
use super::{Peer, Raft, TypeConfig};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("cannot reach {addr}: {reason}")]
    Unreachable { addr: String, reason: String },
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("connection closed before the answer")]
    Closed,
    #[error("bad answer: {0}")]
    Protocol(String),
}

/// Who this node is on the wire.
#[derive(Clone, Copy, Debug)]
pub struct Identity {
    pub site_id: u16,
    pub node_id: NodeId,
}

/// One outbound connection.
struct Conn {
    addr: String,
    out: mpsc::UnboundedSender<BytesMut>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Bytes>>>,
    next_id: AtomicU64,
    alive: AtomicBool,
}

/// A peer's connection, made by whoever first needs it.
type ConnCell = Arc<tokio::sync::Mutex<Option<Arc<Conn>>>>;

/// The outbound connections of this node, by peer.
pub struct Peers {
    me: Identity,
    conns: Mutex<HashMap<NodeId, ConnCell>>,
    shutdown: watch::Receiver<bool>,
    /// Fault injection: every call fails and every served connection
    /// drops, as if the network were cut.
    pub blocked: Arc<std::sync::atomic::AtomicBool>,
    /// `site.secret`, proven on every connection this node opens.
    secret: Option<Arc<[u8]>>,
    /// `[site] tls`, on every connection this node opens.
    tls: Option<crate::auth::SiteTls>,
}

impl Peers {
    pub fn new(
        me: Identity,
        shutdown: watch::Receiver<bool>,
        secret: Option<Arc<[u8]>>,
        tls: Option<crate::auth::SiteTls>,
    ) -> Arc<Peers> {
        Arc::new(Peers {
            me,
            conns: Mutex::new(HashMap::new()),
            shutdown,
            blocked: Default::default(),
            secret,
            tls,
        })
    }

    /// The live connection to `target` at `addr`, dialing if needed (one
    /// dial at a time per peer; other peers are not held up).
    async fn conn(&self, target: NodeId, addr: &str) -> Result<Arc<Conn>, CallError> {
        let cell = self.conns.lock().entry(target).or_default().clone();
        let mut cell = cell.lock().await;
        if let Some(c) = cell.as_ref() {
            if c.alive.load(Ordering::Acquire) && c.addr == addr {
                return Ok(c.clone());
            }
            c.alive.store(false, Ordering::Release);
        }
        let conn = self.dial(target, addr).await?;
        *cell = Some(conn.clone());
        Ok(conn)
    }

    async fn dial(&self, target: NodeId, addr: &str) -> Result<Arc<Conn>, CallError> {
        let unreachable = |reason: String| CallError::Unreachable {
            addr: addr.to_string(),
            reason,
        };
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| unreachable("connect timed out".into()))?
            .map_err(|e| unreachable(e.to_string()))?;
        let _ = stream.set_nodelay(true);
        let mut stream =
            crate::auth::secure_initiate(stream, self.secret.as_deref(), self.tls.as_ref())
                .await
                .map_err(unreachable)?;
        let mut hello = BytesMut::new();
        Hello {
            site_id: self.me.site_id,
            from: self.me.node_id,
            to: target,
        }
        .encode(&mut hello);
        stream
            .write_all(&hello)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let mut buf = BytesMut::with_capacity(4096);
        let theirs = read_hello(&mut stream, &mut buf)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        if theirs.site_id != self.me.site_id
            || theirs.from != target
            || theirs.to != self.me.node_id
        {
            return Err(unreachable(format!(
                "answered as node {} of site {}",
                theirs.from, theirs.site_id
            )));
        }
        let (rd, wr) = tokio::io::split(stream);
        let (tx, rx) = mpsc::unbounded_channel();
        let conn = Arc::new(Conn {
            addr: addr.to_string(),
            out: tx,
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            alive: AtomicBool::new(true),
        });
        tokio::spawn(write_loop(wr, rx, self.shutdown.clone()));
        tokio::spawn(read_answers(rd, buf, conn.clone(), self.shutdown.clone()));
        Ok(conn)
    }

    /// Sends one request to `target` and waits up to `ttl` for its answer.
    pub async fn call(
        &self,
        target: NodeId,
        addr: &str,
        req: &Request,
        ttl: Duration,
    ) -> Result<Response, CallError> {
        if self.blocked.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(CallError::Unreachable {
                addr: addr.to_string(),
                reason: "isolated (fault injection)".into(),
            });
        }
        let attempt = async {
            let conn = self.conn(target, addr).await?;
            let id = conn.next_id.fetch_add(1, Ordering::Relaxed);
            let mut frame = BytesMut::new();
            rpc::encode_message(rpc::KIND_REQUEST, id, req, &mut frame)
                .map_err(|e| CallError::Protocol(e.to_string()))?;
            let (tx, rx) = oneshot::channel();
            conn.pending.lock().insert(id, tx);
            let _forget = ForgetOnDrop { conn: &conn, id };
            if conn.out.send(frame).is_err() {
                return Err(CallError::Closed);
            }
            let payload = rx.await.map_err(|_| CallError::Closed)?;
            let (_, resp) = rpc::decode_message::<Response>(&payload)
                .map_err(|e| CallError::Protocol(e.to_string()))?;
            Ok(resp)
        };
        tokio::time::timeout(ttl, attempt)
            .await
            .map_err(|_| CallError::Timeout(ttl))?
    }
}

/// Removes a call's pending slot however the call ends (answer, timeout,
/// cancellation), so abandoned calls do not pile up.
struct ForgetOnDrop<'a> {
    conn: &'a Conn,
    id: u64,
}

impl Drop for ForgetOnDrop<'_> {
    fn drop(&mut self) {
        self.conn.pending.lock().remove(&self.id);
    }
}

async fn write_loop(
    mut wr: tokio::io::WriteHalf<PeerStream>,
    mut rx: mpsc::UnboundedReceiver<BytesMut>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            frame = rx.recv() => match frame {
                Some(frame) => {
                    if wr.write_all(&frame).await.is_err() {
                        return;
                    }
                }
                None => return,
            },
            _ = stopped(&mut shutdown) => return,
        }
    }
}

async fn read_answers(
    mut rd: tokio::io::ReadHalf<PeerStream>,
    mut buf: BytesMut,
    conn: Arc<Conn>,
    mut shutdown: watch::Receiver<bool>,
) {
    let result: Result<(), RpcError> = async {
        loop {
            while let Some((kind, payload)) = rpc::decode_frame(&mut buf)? {
                if kind != rpc::KIND_RESPONSE {
                    return Err(framing::Error::Malformed("answer kind").into());
                }
                let id = rpc::message_id(&payload).ok_or(framing::Error::Malformed("answer"))?;
                if let Some(tx) = conn.pending.lock().remove(&id) {
                    let _ = tx.send(payload);
                }
            }
            tokio::select! {
                read = rd.read_buf(&mut buf) => match read {
                    Ok(0) | Err(_) => return Ok(()),
                    Ok(_) => {}
                },
                _ = stopped(&mut shutdown) => return Ok(()),
            }
        }
    }
    .await;
    if let Err(e) = result {
        tracing::warn!(addr = %conn.addr, "metadata peer sent a bad frame: {e}");
    }
    conn.alive.store(false, Ordering::Release);
    // Dropping the senders fails every call still waiting.
    conn.pending.lock().clear();
}

/// Reads the peer's hello, refusing anything that is not one.
async fn read_hello(
    stream: &mut PeerStream,
    buf: &mut BytesMut,
) -> Result<Hello, ReadError<framing::Error>> {
    let (kind, payload) = rpc::PROTOCOL.read_hello(stream, buf, HELLO_TIMEOUT).await?;
    Hello::decode(kind, payload).map_err(ReadError::Frame)
}

/// What openraft uses to reach peers.
#[derive(Clone)]
pub struct Network {
    pub peers: Arc<Peers>,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &Peer) -> PeerClient {
        PeerClient {
            peers: self.peers.clone(),
            target,
            addr: node.addr.clone(),
        }
    }
}

pub struct PeerClient {
    peers: Arc<Peers>,
    target: NodeId,
    addr: String,
}

type RpcResult<T, E = openraft::error::Infallible> =
    Result<T, RPCError<NodeId, Peer, RaftError<NodeId, E>>>;

impl PeerClient {
    async fn call<E: std::error::Error>(
        &self,
        action: RPCTypes,
        req: Request,
        option: &RPCOption,
    ) -> RpcResult<Response, E> {
        let ttl = option.hard_ttl();
        self.peers
            .call(self.target, &self.addr, &req, ttl)
            .await
            .map_err(|e| match e {
                CallError::Unreachable { .. } => RPCError::Unreachable(Unreachable::new(&e)),
                CallError::Timeout(timeout) => RPCError::Timeout(Timeout {
                    action,
                    id: self.peers.me.node_id,
                    target: self.target,
                    timeout,
                }),
                CallError::Closed | CallError::Protocol(_) => {
                    RPCError::Network(NetworkError::new(&e))
                }
            })
    }

    fn remote<E: std::error::Error>(
        &self,
        e: RaftError<NodeId, E>,
    ) -> RPCError<NodeId, Peer, RaftError<NodeId, E>> {
        RPCError::RemoteError(RemoteError::new(self.target, e))
    }
}

fn unexpected<E: std::error::Error>(
    what: &'static str,
) -> RPCError<NodeId, Peer, RaftError<NodeId, E>> {
    RPCError::Network(NetworkError::new(&CallError::Protocol(format!(
        "expected a {what} answer"
    ))))
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>> {
        match self
            .call(
                RPCTypes::AppendEntries,
                Request::AppendEntries(rpc),
                &option,
            )
            .await?
        {
            Response::AppendEntries(r) => r.map_err(|e| self.remote(e)),
            _ => Err(unexpected("append-entries")),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        match self
            .call(
                RPCTypes::InstallSnapshot,
                Request::InstallSnapshot(rpc),
                &option,
            )
            .await?
        {
            Response::InstallSnapshot(r) => r.map_err(|e| self.remote(e)),
            _ => Err(unexpected("install-snapshot")),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>> {
        match self
            .call(RPCTypes::Vote, Request::Vote(rpc), &option)
            .await?
        {
            Response::Vote(r) => r.map_err(|e| self.remote(e)),
            _ => Err(unexpected("vote")),
        }
    }
}

/// Resolves once shutdown is signalled (or its sender is gone).
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|s| *s).await;
}

/// Accepts metadata connections until shutdown.
pub async fn serve(
    listener: TcpListener,
    raft: Raft,
    me: Identity,
    shutdown: watch::Receiver<bool>,
    secret: Option<Arc<[u8]>>,
    tls: Option<crate::auth::SiteTls>,
) {
    let mut stop = shutdown.clone();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let (raft, shutdown, secret, tls) =
                        (raft.clone(), shutdown.clone(), secret.clone(), tls.clone());
                    tokio::spawn(async move {
                        let stream = match crate::auth::secure_accept(stream, secret.as_deref(), tls.as_ref()).await {
                            Ok(s) => s,
                            Err(e) => {
                                tracing::warn!(%peer, "refused metadata connection: {e}");
                                return;
                            }
                        };
                        let buf = BytesMut::with_capacity(4096);
                        serve_connection(stream, peer, buf, raft, me, shutdown, Default::default()).await
                    });
                }
                Err(e) => {
                    tracing::warn!("metadata accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = stopped(&mut stop) => return,
        }
    }
}

/// Serves one metadata connection; `buf` holds bytes already read from it
/// (a listener shared with other protocols peeks before handing it over).
pub async fn serve_connection(
    mut stream: PeerStream,
    peer: std::net::SocketAddr,
    mut buf: BytesMut,
    raft: Raft,
    me: Identity,
    mut shutdown: watch::Receiver<bool>,
    blocked: Arc<std::sync::atomic::AtomicBool>,
) {
    let hello = match read_hello(&mut stream, &mut buf).await {
        Ok(h) if h.site_id != me.site_id => {
            tracing::warn!(%peer, "refused metadata connection: peer is in site {}, this node in site {}", h.site_id, me.site_id);
            return;
        }
        Ok(h) if h.to != me.node_id => {
            tracing::warn!(%peer, "refused metadata connection: addressed to node {}, this is node {}", h.to, me.node_id);
            return;
        }
        Ok(h) => h,
        Err(e) => {
            tracing::warn!(%peer, "refused connection on the metadata listener: {e}");
            return;
        }
    };
    let mut answer = BytesMut::new();
    Hello {
        site_id: me.site_id,
        from: me.node_id,
        to: hello.from,
    }
    .encode(&mut answer);
    if stream.write_all(&answer).await.is_err() {
        return;
    }
    let (mut rd, wr) = tokio::io::split(stream);
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(write_loop(wr, rx, shutdown.clone()));
    let result: Result<(), RpcError> = async {
        loop {
            while let Some((kind, payload)) = rpc::decode_frame(&mut buf)? {
                if blocked.load(std::sync::atomic::Ordering::Relaxed) {
                    return Ok(());
                }
                if kind != rpc::KIND_REQUEST {
                    return Err(framing::Error::Malformed("request kind").into());
                }
                let (id, req) = rpc::decode_message::<Request>(&payload)?;
                if let Request::InstallSnapshot(r) = &req {
                    if r.offset.saturating_add(r.data.len() as u64) > MAX_SNAPSHOT as u64 {
                        return Err(RpcError::SnapshotTooLarge);
                    }
                }
                let (raft, tx) = (raft.clone(), tx.clone());
                tokio::spawn(async move {
                    let resp = handle(&raft, req).await;
                    let mut frame = BytesMut::new();
                    match rpc::encode_message(rpc::KIND_RESPONSE, id, &resp, &mut frame) {
                        Ok(()) => {
                            let _ = tx.send(frame);
                        }
                        Err(e) => tracing::error!("cannot encode a metadata answer: {e}"),
                    }
                });
            }
            tokio::select! {
                read = rd.read_buf(&mut buf) => match read {
                    Ok(0) | Err(_) => return Ok(()),
                    Ok(_) => {}
                },
                _ = stopped(&mut shutdown) => return Ok(()),
            }
        }
    }
    .await;
    if let Err(e) = result {
        tracing::warn!(%peer, node = hello.from, "metadata peer sent a bad frame: {e}");
    }
}

async fn handle(raft: &Raft, req: Request) -> Response {
    match req {
        Request::AppendEntries(r) => Response::AppendEntries(raft.append_entries(r).await),
        Request::Vote(r) => Response::Vote(raft.vote(r).await),
        Request::InstallSnapshot(r) => Response::InstallSnapshot(raft.install_snapshot(r).await),
        Request::Leader(op) => {
            Response::Leader(super::on_this_leader(raft, op).await.map_err(|e| match e {
                super::NotDone::NotLeader(leader, _) => ForwardError::NotLeader(leader),
                super::NotDone::Failed(e) => ForwardError::Failed(e),
            }))
        }
    }
}
