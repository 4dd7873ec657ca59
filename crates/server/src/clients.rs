//! The registry of connected clients: what other connections and the node
//! need to see of a client (CLIENT LIST/KILL, tracking redirects, pub/sub
//! delivery). The connection task owns everything else about its session.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use commands::{CommandSpec, TABLE};
use parking_lot::Mutex;
use tokio::sync::{mpsc, Notify};

use crate::metrics::table_index;
use crate::pubsub::Subscriptions;

/// Messages delivered to a connection from elsewhere.
#[derive(Debug)]
pub enum Push {
    /// Keys to invalidate; None: everything (FLUSHALL).
    Invalidate(Option<Vec<Bytes>>),
    Message {
        channel: Bytes,
        payload: Bytes,
    },
    /// A message that reached the client through a pattern.
    PatternMessage {
        pattern: Bytes,
        channel: Bytes,
        payload: Bytes,
    },
    /// A message of a shard channel (SPUBLISH).
    ShardMessage {
        channel: Bytes,
        payload: Bytes,
    },
    /// The client's tracking REDIRECT target disconnected.
    RedirectBroken(u64),
    /// A MONITOR line, written as it is.
    Monitor(Bytes),
}

/// Pushes a client may have pending before it is considered stuck and cut off.
pub const PUSH_QUEUE: usize = 65_536;

#[derive(Clone, Debug, Default)]
pub struct TrackingState {
    pub on: bool,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// 0: pushes go to the client itself.
    pub redirect: u64,
    pub prefixes: Vec<Bytes>,
}

pub struct ClientShared {
    pub id: u64,
    pub addr: SocketAddr,
    pub laddr: SocketAddr,
    /// Connected over TLS (the `tls_listen` port).
    pub tls: bool,
    pub created: Instant,
    pub name: Mutex<Option<Bytes>>,
    /// The ACL user it is authenticated as (CLIENT LIST `user`).
    pub user: Mutex<Bytes>,
    pub lib: Mutex<(String, String)>,
    pub resp3: AtomicBool,
    /// The last command run ([`ClientShared::set_last_cmd`]): its index in
    /// the command table plus one (0: none yet). A plain store per command,
    /// where a lock took two locked instructions.
    pub last_cmd: AtomicUsize,
    pub last_active_ms: AtomicU64,
    pub killed: AtomicBool,
    pub wake: Notify,
    pub push_tx: mpsc::Sender<Push>,
    pub tracking: Mutex<TrackingState>,
    pub subs: Mutex<Subscriptions>,
    /// Bytes of requests read and not yet run (CLIENT LIST `qbuf`), and
    /// room left in the read buffer (`qbuf-free`).
    pub qbuf: AtomicUsize,
    pub qbuf_free: AtomicUsize,
    /// The connection's socket, to ask the kernel whether requests wait
    /// unread (see `pending_requests`).
    pub fd: std::os::fd::RawFd,
    /// Requests read and not yet run.
    pub busy: AtomicBool,
    /// Wakes the connection while its client is blocked (BZPOPMIN...): a
    /// key it waits for changed, or CLIENT UNBLOCK.
    pub unblock: Notify,
    /// [`NOT_BLOCKED`], [`BLOCKED`], or what CLIENT UNBLOCK asked
    /// ([`UNBLOCK_TIMEOUT`], [`UNBLOCK_ERROR`]).
    pub block_state: AtomicU8,
}

/// [`ClientShared::block_state`]: not blocked.
pub const NOT_BLOCKED: u8 = 0;
/// Blocked in a command, waiting for keys (CLIENT LIST flag `b`).
pub const BLOCKED: u8 = 1;
/// CLIENT UNBLOCK id TIMEOUT: answer as on a timeout.
pub const UNBLOCK_TIMEOUT: u8 = 2;
/// CLIENT UNBLOCK id ERROR: answer with an -UNBLOCKED error.
pub const UNBLOCK_ERROR: u8 = 3;

impl ClientShared {
    pub fn set_last_cmd(&self, spec: &'static CommandSpec) {
        self.last_cmd
            .store(table_index(spec) + 1, Ordering::Relaxed);
    }

    /// The name CLIENT LIST shows for the last command ("NULL": none yet).
    pub fn last_cmd_name(&self) -> &'static str {
        match self.last_cmd.load(Ordering::Relaxed) {
            0 => "NULL",
            i => TABLE.get(i - 1).map_or("NULL", |spec| spec.name),
        }
    }
}

impl ClientShared {
    pub fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    /// Queues a push; a client that lets its queue fill up is disconnected
    /// rather than letting memory grow without bound.
    pub fn push(&self, p: Push) {
        if self.push_tx.try_send(p).is_err() {
            tracing::warn!(client = self.id, "push queue full; disconnecting client");
            self.kill();
        }
    }

    pub fn subscribed_to(&self, channel: &[u8]) -> bool {
        self.subs.lock().channels.contains(channel)
    }

    /// Requests of this client wait: unread in its socket, or read and not
    /// yet run.
    pub fn pending_requests(&self) -> bool {
        if self.busy.load(Ordering::Acquire) {
            return true;
        }
        let mut unread: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int; a closed fd only makes it fail.
        let ok = unsafe { libc::ioctl(self.fd, libc::FIONREAD, &mut unread) } == 0;
        ok && unread > 0
    }

    /// Has any subscription (CLIENT LIST flag `P`, CLIENT KILL TYPE pubsub).
    pub fn subscribed(&self) -> bool {
        self.subs.lock().total() > 0
    }
}

#[derive(Default)]
pub struct Clients {
    map: Mutex<HashMap<u64, Arc<ClientShared>>>,
    next_id: AtomicU64,
    /// `map.len()`, read on every request batch without the lock.
    count: AtomicUsize,
}

impl Clients {
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub fn insert(&self, c: Arc<ClientShared>) {
        let mut map = self.map.lock();
        map.insert(c.id, c);
        self.count.store(map.len(), Ordering::Relaxed);
    }

    pub fn remove(&self, id: u64) {
        let mut map = self.map.lock();
        map.remove(&id);
        self.count.store(map.len(), Ordering::Relaxed);
    }

    pub fn get(&self, id: u64) -> Option<Arc<ClientShared>> {
        self.map.lock().get(&id).cloned()
    }

    pub fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn all(&self) -> Vec<Arc<ClientShared>> {
        let mut v: Vec<_> = self.map.lock().values().cloned().collect();
        v.sort_by_key(|c| c.id);
        v
    }
}
