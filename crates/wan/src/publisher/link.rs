//! The link to the target, and the publisher's task: the I/O around the
//! core.
//!
//! [`run`] loops: carry out the operators' requests, fill the window, then
//! wait for a frame from the target, a write to ship, the end of a hold or
//! the 50 ms tick. The tick checks ownership, a stalled link, sharing with
//! replicas, the budgets, and connects when the link is down: to the
//! target's endpoints in turn, with a backoff doubling to [`BACKOFF_MAX`].
//! A connection says hello, waits for the welcome, authenticates
//! (`wan.secret`), then runs as a writer task and a reader task feeding
//! the publisher's channels.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use framing::ReadError;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::{Outlet, Publisher, Site};
use crate::auth::{self, Role};
use crate::stats::add;
use crate::wire::{self, Frame, Hello};
use crate::{PublisherState, Target, Wan};

const TICK: Duration = Duration::from_millis(50);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
const BACKOFF_MIN: Duration = Duration::from_millis(100);
/// Between connection attempts at most: a link that comes back is used
/// within about this long (an attempt is one SYN, cheap to repeat).
const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// How often "remote site unreachable" is logged while it stays so.
const UNREACHABLE_LOG_EVERY: Duration = Duration::from_secs(30);

/// A publisher's core and its connection to the target.
struct Link {
    core: Publisher,
    /// Frames from the target, while connected.
    rx: Option<mpsc::UnboundedReceiver<Frame>>,
    endpoint_index: usize,
    backoff: Duration,
    next_connect: Instant,
    unreachable_logged: Option<Instant>,
}

pub async fn run(wan: Arc<Wan>, target: Arc<Target>, journal_dir: std::path::PathBuf) {
    // A journal left by an earlier run of this node describes a log that
    // is gone with the process; what it held is re-synced if still needed.
    let _ = std::fs::remove_dir_all(&journal_dir);
    // Publishers of one site start at different endpoints, so the remote
    // site's receivers share the work.
    let endpoint_index = wan.cluster.as_ref().map_or(0, |c| c.my_index);
    let site: Arc<dyn Site> = Arc::new(wan.cluster.clone());
    let mut l = Link {
        core: Publisher::new(wan, target, site, journal_dir),
        rx: None,
        endpoint_index,
        backoff: BACKOFF_MIN,
        next_connect: Instant::now(),
        unreachable_logged: None,
    };
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        l.core.run_controls();
        l.core.fill();
        if l.core.target.set_quiet(!l.core.can_send_logs()) {
            continue;
        }
        let target = l.core.target.clone();
        let hold_until = l.core.flow.hold_until;
        let hold = async {
            match hold_until {
                Some(t) => tokio::time::sleep_until(t.into()).await,
                None => std::future::pending().await,
            }
        };
        let frame = async {
            match l.rx.as_mut() {
                Some(rx) => rx.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            f = frame => match f {
                Some(f) => {
                    if let Err(why) = l.core.on_frame(f) {
                        l.disconnected(why);
                    }
                }
                None => l.disconnected("connection closed"),
            },
            _ = target.wake.notified() => {}
            _ = hold => {}
            _ = tick.tick() => l.on_tick().await,
        }
    }
}

impl Link {
    fn disconnected(&mut self, why: &str) {
        self.rx = None;
        self.core.link_down(why);
        self.next_connect = Instant::now() + self.backoff;
        self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
    }

    async fn on_tick(&mut self) {
        self.core.refresh_ownership(false);
        if self.core.stalled() {
            self.disconnected("no acknowledgement in time");
        }
        self.core.share_applied();
        self.core.announce_settled();
        // The budget first: connecting to a site that is down can take
        // up to the connect timeout.
        self.core.check_budget();
        if !self.core.connected()
            && self.core.state() != PublisherState::Stopped
            && Instant::now() >= self.next_connect
        {
            self.connect().await;
        }
        self.core.refresh_status_due();
    }

    async fn connect(&mut self) {
        let target = self.core.target.clone();
        let endpoints = &target.settings.endpoints;
        if endpoints.is_empty() {
            return;
        }
        let endpoint = endpoints[self.endpoint_index % endpoints.len()].clone();
        self.endpoint_index += 1;
        match open(&self.core.wan, &target, &endpoint).await {
            Ok((tx, rx, applied, incarnation)) => {
                tracing::info!(target_site = target.settings.name, endpoint, "WAN link up");
                self.unreachable_logged = None;
                self.rx = Some(rx);
                self.backoff = BACKOFF_MIN;
                self.core
                    .linked(Outlet { tx, endpoint }, applied, incarnation);
            }
            Err(e) => {
                tracing::debug!(
                    target_site = target.settings.name,
                    endpoint,
                    "WAN connect failed: {e}"
                );
                self.core.last_error = format!("{endpoint}: {e}");
                let log_due = self
                    .unreachable_logged
                    .is_none_or(|t| t.elapsed() >= UNREACHABLE_LOG_EVERY);
                if self.backoff >= BACKOFF_MAX && log_due {
                    self.unreachable_logged = Some(Instant::now());
                    tracing::warn!(
                        target_site = target.settings.name,
                        endpoint,
                        "remote site unreachable: {e}"
                    );
                }
                self.next_connect = Instant::now() + self.backoff;
                self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
}

/// A connection's sending and receiving ends, the partitions' applied
/// seqs from its welcome and the target's data incarnation.
type Opened = (
    mpsc::UnboundedSender<Frame>,
    mpsc::UnboundedReceiver<Frame>,
    Vec<(u16, u64)>,
    u64,
);

/// Connects, says hello and waits for the welcome; the connection's
/// reader and writer then run as tasks feeding the publisher's channels.
async fn open(wan: &Arc<Wan>, target: &Arc<Target>, endpoint: &str) -> Result<Opened, String> {
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(endpoint))
        .await
        .map_err(|_| "connect timed out".to_string())?
        .map_err(|e| e.to_string())?;
    let _ = stream.set_nodelay(true);
    // With [wan] tls: the receiver's certificate must name the target site.
    let (mut rd, mut wr) = match &wan.settings.tls {
        None => framing::tls::split(stream),
        Some(tls) => {
            let name = &target.settings.name;
            let s = tokio::time::timeout(CONNECT_TIMEOUT, tls.connect(stream, name))
                .await
                .map_err(|_| "TLS handshake timed out".to_string())?
                .map_err(|e| format!("TLS handshake with site {name:?} failed: {e}"))?;
            framing::tls::split(s)
        }
    };
    let mut out = BytesMut::new();
    let nonce = auth::nonce();
    wire::encode(
        &Frame::Hello(Hello {
            version: wire::PROTOCOL_VERSION,
            site_id: wan.local.site_id,
            site_name: wan.local.site_name.clone(),
            partitions: wan.ks.partitions(),
            node_id: wan.local.node_id.clone(),
            incarnation: wan.incarnation,
            nonce,
        }),
        &mut out,
    );
    wr.write_all(&out).await.map_err(|e| e.to_string())?;
    let mut buf = BytesMut::with_capacity(4096);
    let read = framing::read_with(&mut rd, &mut buf, wire::decode, |_| {});
    let welcome = framing::expect("welcome", HELLO_TIMEOUT, read)
        .await
        .map_err(|e| e.to_string())?;
    let (applied, incarnation) = match welcome {
        Frame::Welcome(w) => {
            if target.settings.name != w.site_name {
                return Err(format!(
                    "endpoint {endpoint} is site {:?}, not {:?}",
                    w.site_name, target.settings.name
                ));
            }
            authenticate(wan, &mut wr, &nonce, w.challenge.as_ref()).await?;
            (w.applied, w.data_incarnation)
        }
        Frame::Refuse(why) => return Err(format!("refused: {why}")),
        other => return Err(format!("unexpected first frame {other:?}")),
    };
    let (tx, mut out_rx) = mpsc::unbounded_channel::<Frame>();
    let (in_tx, rx) = mpsc::unbounded_channel::<Frame>();
    let target_name = endpoint.to_string();
    let stats_target = target.clone();
    tokio::spawn(async move {
        // Frames waiting to be written, in order; raw batch bodies are
        // written from the log reads' buffers, not copied again.
        let mut out = BytesMut::new();
        let mut parts: Vec<Bytes> = Vec::new();
        let mut lz4 = wire::Lz4Probe::default();
        while let Some(f) = out_rx.recv().await {
            let mut pending = 0;
            let mut next = Some(f);
            while let Some(f) = next.take() {
                if let Some(body) = wire::encode_parts(&f, &mut lz4, &mut out) {
                    pending += out.len() + body.len();
                    parts.push(out.split().freeze());
                    parts.push(body);
                }
                if pending + out.len() > 4 << 20 {
                    break;
                }
                next = out_rx.try_recv().ok();
            }
            pending += out.len();
            parts.push(out.split().freeze());
            add(&stats_target.stats.bytes_sent, pending as u64);
            if write_parts(&mut wr, &mut parts).await.is_err() {
                break;
            }
        }
    });
    tokio::spawn(async move {
        loop {
            match framing::read_with(&mut rd, &mut buf, wire::decode, |_| {}).await {
                Ok(Some(f)) => {
                    if in_tx.send(f).is_err() {
                        return;
                    }
                }
                Ok(None) | Err(ReadError::Io(_)) => return,
                Err(e) => {
                    tracing::warn!(endpoint = target_name, "bad frame from remote site: {e}");
                    return;
                }
            }
        }
    });
    Ok((tx, rx, applied, incarnation))
}

/// Writes every part, in order, with as few system calls as the socket
/// allows; empties `parts`.
async fn write_parts(wr: &mut framing::tls::Writer, parts: &mut Vec<Bytes>) -> std::io::Result<()> {
    use bytes::Buf;
    parts.retain(|p| !p.is_empty());
    let mut first = 0;
    while first < parts.len() {
        let slices: Vec<std::io::IoSlice> = parts[first..]
            .iter()
            .take(64)
            .map(|p| std::io::IoSlice::new(p))
            .collect();
        let mut n = wr.write_vectored(&slices).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while n > 0 {
            let p = &mut parts[first];
            let k = n.min(p.len());
            p.advance(k);
            n -= k;
            if p.is_empty() {
                first += 1;
            }
        }
    }
    parts.clear();
    Ok(())
}

/// Answers the receiver's challenge and checks its proof: a node with
/// `wan.secret` sends nothing to a site that cannot prove it knows it.
async fn authenticate(
    wan: &Wan,
    wr: &mut framing::tls::Writer,
    nonce: &auth::Nonce,
    challenge: Option<&wire::Challenge>,
) -> Result<(), String> {
    let secret = wan.settings.secret.as_deref().map(str::as_bytes);
    match (secret, challenge) {
        (None, None) => Ok(()),
        (None, Some(_)) => Err("authentication failed: the remote site asks for wan.secret, which this node does not have".into()),
        (Some(_), None) => Err(
            "authentication failed: the remote site has no wan.secret, so it cannot prove it is one of ours; not sending".into(),
        ),
        (Some(secret), Some(c)) => {
            // Ours first, even if theirs is wrong: their log then says why.
            let mut out = BytesMut::new();
            wire::encode(&Frame::Proof(auth::proof(secret, Role::Publisher, nonce, &c.nonce)), &mut out);
            wr.write_all(&out).await.map_err(|e| e.to_string())?;
            if auth::verify(secret, Role::Receiver, nonce, &c.nonce, &c.proof) {
                Ok(())
            } else {
                Err("authentication failed: the remote site's proof does not match wan.secret".into())
            }
        }
    }
}
