//! A client's session and the admission pipeline every command passes, in
//! Redis's order: lookup, arity, authentication, subscribed-mode limits,
//! memory; then the handler; then tracking of the keys it read, and metrics.
//!
//! Data commands run from the command table (commands crate); the commands
//! that act on the session or the node are dispatched here by name.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use commands::args::{is, owned};
use commands::{lookup, BlockMode, CmdError, CommandSpec, Ctx, Flags};
use resp::{Located, ReplyWriter};

use crate::clients::ClientShared;
use crate::exec_gate::HeldShared;
use crate::node::Node;
use crate::pubsub::{commands as pubsub, Scope};
use crate::transaction::{self, TxState};
use crate::{client_cmd, config_cmd, debug_cmd, internal_cmd, introspection, persistence_cmd};
use cluster::broadcast::MessageKind;

mod blocked;
mod handshake;
mod user;

use blocked::Blocked;

pub struct Session {
    pub node: Arc<Node>,
    pub shared: Arc<ClientShared>,
    pub id: u64,
    pub resp3: bool,
    pub authenticated: bool,
    /// The ACL user its commands run as (a snapshot, looked up again when
    /// [`crate::users::Users::epoch`] moves past `user_epoch`).
    pub user: Arc<acl::User>,
    user_epoch: u64,
    /// Logged in as another node (`cluster::internal_auth::USER`).
    internal: bool,
    /// ACL changes made here, to commit to the site before the replies
    /// leave ([`crate::site_acl`]).
    pub(crate) pending_acl: Vec<crate::site_acl::Pending>,
    closing: bool,
    /// Tracking on (copy of shared.tracking.on for the hot path).
    pub tracking: bool,
    /// CLIENT CACHING yes/no, valid for the next command or transaction.
    pub caching: Option<bool>,
    caching_set_now: bool,
    pub subscriptions: usize,
    pub tx: TxState,
    /// READONLY: reads of partitions this node backs up are served here.
    pub readonly: bool,
    /// (partition, seq) of this connection's last write, for WAIT.
    last_write: Option<(usize, u64)>,
    /// Bytes in the read buffer while its requests run (CLIENT LIST qbuf).
    pub qbuf: usize,
    /// CLIENT REPLY: which replies are sent.
    pub reply_mode: ReplyMode,
    /// Where the request being run has its arguments in the read buffer;
    /// one allocation for the connection's life.
    places: Vec<(usize, usize)>,
    /// The same for the request after it (see `process`).
    places_ahead: Vec<(usize, usize)>,
    /// The argument slices' vector, kept empty between requests so that
    /// a request of many arguments (an 8-field HSET) allocates nothing.
    spare_args: Vec<&'static [u8]>,
    /// The blocking command this client waits in (BZPOPMIN...), if any:
    /// requests after it wait until it is answered.
    blocked: Option<Blocked>,
    /// The connection was woken for the blocked command: a key it waits
    /// for changed (or it registered and tries once more).
    woken: bool,
    /// EXEC is running the queued commands: a blocking one may not wait.
    pub(crate) in_exec: bool,
    /// A script is running its commands: their reads are not tracked one
    /// by one; `script_read` says whether any read ran (then the script's
    /// declared keys are tracked, as Redis does).
    pub(crate) in_script: bool,
    pub(crate) script_read: bool,
}

pub type Reply<'a, 'b> = &'a mut ReplyWriter<'b>;

/// CLIENT REPLY ON | OFF | SKIP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyMode {
    On,
    Off,
    /// SKIP was sent: its own reply and the next command's are dropped
    /// (`armed` once SKIP's own is gone).
    Skip {
        armed: bool,
    },
}

/// `v` emptied, as a vector of slices of another lifetime in the same
/// allocation: collecting an empty vector's `into_iter` through a map to a
/// type of the same layout reuses its buffer (std's in-place collection).
fn emptied<'b>(mut v: Vec<&[u8]>) -> Vec<&'b [u8]> {
    v.clear();
    v.into_iter()
        .map(|_| -> &'b [u8] { unreachable!("the vector is empty") })
        .collect()
}

/// EVAL, FCALL and their forms: they hold the exec gate exclusively.
fn is_script(spec: &CommandSpec) -> bool {
    spec.name.starts_with("eval") || spec.name.starts_with("fcall")
}

/// Owned arguments (an inline command's, a queued one's) as handlers take them.
pub(crate) fn borrowed(args: &[Bytes]) -> Vec<&[u8]> {
    args.iter().map(|a| &a[..]).collect()
}

impl Session {
    pub fn new(node: Arc<Node>, shared: Arc<ClientShared>) -> Self {
        let user_epoch = node.users.epoch();
        let user = node.users.current().default_user();
        // As Redis: a connection starts authenticated as `default` when
        // that user needs no password and is on.
        let authenticated = user.enabled() && user.nopass();
        Session {
            id: shared.id,
            node,
            shared,
            resp3: false,
            authenticated,
            user,
            user_epoch,
            internal: false,
            pending_acl: Vec::new(),
            closing: false,
            tracking: false,
            caching: None,
            caching_set_now: false,
            subscriptions: 0,
            tx: TxState::default(),
            readonly: false,
            last_write: None,
            qbuf: 0,
            reply_mode: ReplyMode::On,
            places: Vec::new(),
            places_ahead: Vec::new(),
            spare_args: Vec::new(),
            blocked: None,
            woken: false,
            in_exec: false,
            in_script: false,
            script_read: false,
        }
    }

    /// Runs every complete request in `inbuf`, replies into `out`. Returns
    /// true when the connection must close (QUIT, protocol error).
    ///
    /// An array request's arguments are borrowed from `inbuf` while its
    /// command runs (nothing is shared or counted per argument); what a
    /// command keeps it copies. Inline commands are decoded into copies.
    pub fn process(&mut self, inbuf: &mut BytesMut, out: &mut BytesMut) -> bool {
        let node = self.node.clone();
        self.qbuf = inbuf.len();
        let mut limits = self.request_limits();
        node.clock.refresh();
        // One clock read per command: a command's end is the next one's
        // start. quanta's clock reads the TSC, without the fence and the
        // conversion of clock_gettime (16 ns instead of 37 here, per command).
        let mut start = quanta::Instant::now();
        let mut gate = HeldShared::new(&node.exec_gate);
        // BCAST invalidations of this batch's writes: one message per prefix.
        let _bcast =
            keyspace::ChangeObserver::active(&*node.tracking).then(|| node.tracking.defer());
        if self.blocked.is_some() {
            gate.hold(|| false);
            if self.resume(out) {
                return false;
            }
            start = quanta::Instant::now();
        }
        let mut places = std::mem::take(&mut self.places);
        let mut ahead = std::mem::take(&mut self.places_ahead);
        let mut spare = std::mem::take(&mut self.spare_args);
        // Bytes of `inbuf` already run, dropped from it once at the end.
        let mut done = 0;
        // The next array request's length when it was located while the
        // one before ran (its places then in `ahead`).
        let mut located_ahead = None;
        let look_ahead = node.ks.prefetching();
        let close = loop {
            let located = match located_ahead.take() {
                Some(end) => {
                    std::mem::swap(&mut places, &mut ahead);
                    Ok(Some(Located::Array { end }))
                }
                None => resp::locate_request(&inbuf[done..], &limits, &mut places),
            };
            match located {
                Ok(None) => break false,
                Ok(Some(Located::Array { end })) => {
                    // One request ahead: the partition of its first
                    // argument (the key, for most commands) loads into
                    // cache while this one runs. Anything but a complete
                    // array is located again in its turn.
                    let next = done + end;
                    if look_ahead {
                        if let Ok(Some(Located::Array { end })) =
                            resp::locate_request(&inbuf[next..], &limits, &mut ahead)
                        {
                            if let Some(&(at, len)) = ahead.get(1) {
                                node.prefetch(&inbuf[next + at..next + at + len]);
                            }
                            located_ahead = Some(end);
                        }
                    }
                    let request = &inbuf[done..done + end];
                    let mut args = emptied(spare);
                    args.extend(places.iter().map(|&(at, len)| &request[at..at + len]));
                    done += end;
                    if !args.is_empty() {
                        let was = self.authenticated;
                        start = self.execute(&mut gate, &args, out, start);
                        if self.authenticated != was {
                            limits = self.request_limits();
                            located_ahead = None;
                        }
                    }
                    spare = emptied(args);
                    if self.closing {
                        break true;
                    }
                    if self.blocked.is_some() {
                        break false;
                    }
                }
                Ok(Some(Located::Inline)) => {
                    inbuf.advance(std::mem::take(&mut done));
                    let mut owned = Vec::new();
                    match resp::decode_request_into(inbuf, &limits, &mut owned) {
                        Ok(false) => break false,
                        Ok(true) if owned.is_empty() => {}
                        Ok(true) => {
                            start = self.execute(&mut gate, &borrowed(&owned), out, start);
                            limits = self.request_limits();
                            if self.closing {
                                break true;
                            }
                            if self.blocked.is_some() {
                                break false;
                            }
                        }
                        Err(e) => break self.protocol_error(e, out),
                    }
                }
                Err(e) => break self.protocol_error(e, out),
            }
        };
        inbuf.advance(done);
        self.places = places;
        self.places_ahead = ahead;
        self.spare_args = spare;
        close
    }

    /// The request size limits: a client not yet authenticated may send
    /// at most 10 arguments of at most 16 KiB each (as Redis).
    fn request_limits(&self) -> resp::Limits {
        let mut limits = self.node.runtime.limits();
        if !self.authenticated {
            limits.max_multibulk_len = limits.max_multibulk_len.min(10);
            limits.max_bulk_len = limits.max_bulk_len.min(16 * 1024);
        }
        limits
    }

    fn protocol_error(&self, e: resp::ProtocolError, out: &mut BytesMut) -> bool {
        self.node
            .metrics
            .protocol_errors
            .fetch_add(1, Ordering::Relaxed);
        tracing::info!(client = self.id, addr = %self.shared.addr, "protocol error: {e}");
        let text = match e {
            resp::ProtocolError::InvalidMultibulkLength if !self.authenticated => {
                "Protocol error: unauthenticated multibulk length".to_string()
            }
            resp::ProtocolError::InvalidBulkLength if !self.authenticated => {
                "Protocol error: unauthenticated bulk length".to_string()
            }
            e => e.to_string(),
        };
        ReplyWriter::new(out, self.resp3).error(&format!("ERR {text}"));
        true
    }

    /// Runs one command; returns the time it ended.
    fn execute(
        &mut self,
        gate: &mut HeldShared,
        args: &[&[u8]],
        outbuf: &mut BytesMut,
        start: quanta::Instant,
    ) -> quanta::Instant {
        let mark = outbuf.len();
        let end = self.execute_replying(gate, args, outbuf, start);
        // CLIENT REPLY OFF/SKIP: the reply is dropped; (un)subscribe
        // confirmations are pushes and still go out, as in Redis.
        match self.reply_mode {
            ReplyMode::On => {}
            ReplyMode::Off => {
                if !lookup(args[0]).is_some_and(|s| s.name.ends_with("subscribe")) {
                    outbuf.truncate(mark)
                }
            }
            ReplyMode::Skip { armed } => {
                if !armed || !lookup(args[0]).is_some_and(|s| s.name.ends_with("subscribe")) {
                    outbuf.truncate(mark);
                }
                self.reply_mode = if armed {
                    ReplyMode::On
                } else {
                    ReplyMode::Skip { armed: true }
                };
            }
        }
        end
    }

    fn execute_replying(
        &mut self,
        gate: &mut HeldShared,
        args: &[&[u8]],
        outbuf: &mut BytesMut,
        start: quanta::Instant,
    ) -> quanta::Instant {
        let mut out = ReplyWriter::new(outbuf, self.resp3);
        let Some(spec) = lookup(args[0]) else {
            self.tx.dirty |= self.tx.in_multi();
            let e = CmdError::unknown_command(args).to_string();
            self.node.metrics.error(None, &e, true);
            out.error(&e);
            return start;
        };
        // Routing (in admit) and the command run under the exec gate, so a
        // handover that takes the gate knows every routed command is done.
        // EXEC and a script take it exclusively themselves. While a script
        // runs past busy-reply-threshold, commands answer BUSY.
        let busy = || self.node.scripts.watchdog.busy();
        let takes_gate = spec.name == "exec" || (is_script(spec) && !self.tx.in_multi());
        let held = if takes_gate {
            gate.release();
            !busy()
        } else {
            gate.hold(busy)
        };
        if !held && !crate::scripts::allowed_when_busy(spec, args) {
            let busy = self.node.scripts.watchdog.busy_reply();
            self.node.metrics.error(Some(spec), busy, true);
            // Inside MULTI the transaction fails as on any refusal; EXEC
            // discards it at once (as Redis).
            if spec.name == "exec" && self.tx.in_multi() {
                self.tx.clear();
                out.error(&format!(
                    "EXECABORT Transaction discarded because of: {busy}"
                ));
            } else {
                self.tx.dirty |= self.tx.in_multi();
                out.error(busy);
            }
            return start;
        }
        if let Err(e) = self.admit(spec, args) {
            self.tx.dirty |= self.tx.in_multi();
            if e == CmdError::Oom {
                self.node
                    .metrics
                    .oom_rejections
                    .fetch_add(1, Ordering::Relaxed);
            }
            let e = e.to_string();
            self.node.metrics.error(Some(spec), &e, true);
            out.error(&e);
        } else if self.tx.in_multi() && spec.flags.has(Flags::NO_MULTI) {
            self.tx.dirty = true;
            let e = "ERR Command not allowed inside a transaction";
            self.node.metrics.error(Some(spec), e, true);
            out.error(e);
        } else if self.tx.in_multi() && !transaction::is_control(spec) {
            if let Some(q) = self.tx.queued.as_mut() {
                q.push((spec, args.iter().map(|a| owned(a)).collect()));
            }
            out.simple("QUEUED");
        } else if spec.name == "exec" {
            // EXEC holds the gate exclusively itself.
            if let Err(e) = transaction::exec(self, &mut out) {
                let e = e.to_string();
                self.node.metrics.error(Some(spec), &e, false);
                out.error(&e);
            }
            self.monitor_feed(spec, args);
        } else {
            self.run(spec, args, &mut out);
        }
        self.shared.set_last_cmd(spec);
        let end = quanta::Instant::now();
        self.node.metrics.command(spec, end - start);
        end
    }

    /// Runs an admitted command: the handler, then tracking of its reads.
    pub fn run(&mut self, spec: &'static CommandSpec, args: &[&[u8]], out: Reply) {
        self.caching_set_now = false;
        let result = match spec.handler {
            _ if spec.name == "memory" && crate::memory_report::handles(args) => {
                crate::memory_report::memory(self, args, out)
            }
            Some(handler) => {
                let mut ctx = Ctx {
                    ks: &self.node.ks,
                    out,
                    client_id: self.id,
                    blocking: if self.in_exec {
                        BlockMode::Deny
                    } else {
                        BlockMode::Allow
                    },
                    wait: None,
                    // Only SORT asks (its BY and GET patterns).
                    read_any_key: !spec.name.starts_with("sort")
                        || self.user.unrestricted_read(spec, args),
                };
                let result = handler(&mut ctx, args);
                if let Some(wait) = ctx.wait.take() {
                    self.block(spec, args, wait);
                }
                result
            }
            None => self.builtin(spec, args, out),
        };
        if self.node.events.on() {
            crate::notify::publish(&self.node, spec.name, args);
        }
        // A script's own line goes out before its commands' (scripts).
        if !is_script(spec) {
            self.monitor_feed(spec, args);
        }
        if spec.flags.has(Flags::WRITE) {
            if let Some(w) = keyspace::last_written() {
                self.last_write = Some(w);
            }
        }
        match result {
            Err(e) => {
                let e = e.to_string();
                self.node.metrics.error(Some(spec), &e, false);
                out.error(&e)
            }
            Ok(()) if self.in_script && spec.flags.has(Flags::READONLY) => self.script_read = true,
            Ok(()) if self.tracking && spec.flags.has(Flags::READONLY) && !is_script(spec) => {
                let keys: Vec<&[u8]> = spec.key_positions(args).map(|i| args[i]).collect();
                self.remember_reads(&keys)
            }
            Ok(()) => {}
        }
        // CLIENT CACHING applies to the next command, or to the next
        // transaction as a whole: MULTI keeps it, and EXEC clears it after
        // the queued commands ran (as Redis's resetClient).
        if !self.caching_set_now && !self.tx.in_multi() {
            self.caching = None;
        }
    }

    fn admit(&mut self, spec: &'static CommandSpec, args: &[&[u8]]) -> Result<(), CmdError> {
        if !spec.arity_ok(args.len()) {
            return Err(CmdError::WrongArity(spec.name.into()));
        }
        if !self.authenticated && !spec.flags.has(Flags::NOAUTH) {
            return Err(CmdError::NoAuth);
        }
        if let Err(denied) = crate::acl_cmd::check(self, spec, args) {
            return Err(CmdError::other(denied.noperm_message()));
        }
        if self.subscriptions > 0 && !self.resp3 && !spec.flags.has(Flags::SUBSCRIBED) {
            return Err(CmdError::other(format!(
                "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                spec.name
            )));
        }
        if self.node.backups.restoring() && !spec.flags.has(Flags::LOADING) {
            return Err(CmdError::other(
                "LOADING deltagrid is restoring a backup into this node",
            ));
        }
        if let Some(cluster) = &self.node.cluster {
            cluster.check(spec, args, self.readonly, self.shared.tls)?;
        }
        // As Redis, eviction runs before any command (its invalidations
        // then reach a tracking client before the reply); only a write that
        // may grow memory is refused when nothing could be evicted.
        if self.node.runtime.maxmemory() > 0
            && !self.node.make_room()
            && spec.flags.has(Flags::DENYOOM)
        {
            return Err(CmdError::Oom);
        }
        self.enough_replicas(spec, args)
    }

    /// `min-replicas-to-write`: a write needs that many in-sync replicas
    /// of its partition (a node alone has none).
    pub fn enough_replicas(&self, spec: &CommandSpec, args: &[&[u8]]) -> Result<(), CmdError> {
        let min = self
            .node
            .runtime
            .min_replicas_to_write
            .load(Ordering::Relaxed);
        if min == 0 || !spec.flags.has(Flags::WRITE) {
            return Ok(());
        }
        let key = spec.key_positions(args).next().map(|i| args[i]);
        let good = self
            .node
            .cluster
            .as_deref()
            .map_or(0, |c| cluster::cluster_cmd::in_sync_replicas(c, key));
        if good < min {
            return Err(CmdError::other(
                "NOREPLICAS Not enough good replicas to write.",
            ));
        }
        Ok(())
    }

    /// Default-mode tracking remembers the keys a read-only command read
    /// (a script: the keys it declared, when it read any), subject to
    /// OPTIN/OPTOUT and CLIENT CACHING.
    pub(crate) fn remember_reads(&self, keys: &[&[u8]]) {
        let t = self.shared.tracking.lock();
        if t.bcast
            || (t.optin && self.caching != Some(true))
            || (t.optout && self.caching == Some(false))
        {
            return;
        }
        drop(t);
        let keys: Vec<Bytes> = keys.iter().map(|k| owned(k)).collect();
        if !keys.is_empty() {
            self.node.tracking.remember(self.id, &keys);
        }
    }

    pub fn set_caching(&mut self, yes: bool) {
        self.caching = Some(yes);
        self.caching_set_now = true;
    }

    fn builtin(
        &mut self,
        spec: &'static CommandSpec,
        a: &[&[u8]],
        out: Reply,
    ) -> Result<(), CmdError> {
        match spec.name {
            "ping" => self.ping(a, out),
            "echo" => {
                out.bulk(a[1]);
                Ok(())
            }
            "hello" => self.hello(a, out),
            "auth" => self.auth(a, out),
            "acl" => crate::acl_cmd::acl(self, a, out),
            "select" => match commands::args::int(a[1])? {
                0 => {
                    out.simple("OK");
                    Ok(())
                }
                _ => Err(CmdError::DbIndexOutOfRange),
            },
            "quit" => {
                out.simple("OK");
                self.closing = true;
                // Gone from the node at once, as Redis frees the client
                // right after the reply: a write that follows cannot be
                // sent to it any more (a REDIRECT to it is broken).
                self.close();
                Ok(())
            }
            "monitor" => {
                self.node.monitors.add(self.id);
                out.simple("OK");
                Ok(())
            }
            "save" => persistence_cmd::save(self, out),
            "bgsave" => persistence_cmd::bgsave(self, a, out),
            "lastsave" => persistence_cmd::lastsave(self, out),
            "shutdown" => self.shutdown(a),
            "reset" => {
                self.reset();
                out.simple("RESET");
                Ok(())
            }
            "client" => client_cmd::client(self, a, out),
            "subscribe" => pubsub::subscribe(self, Scope::Channel, a, out),
            "psubscribe" => pubsub::subscribe(self, Scope::Pattern, a, out),
            "ssubscribe" => pubsub::subscribe(self, Scope::Shard, a, out),
            "unsubscribe" => pubsub::unsubscribe(self, Scope::Channel, a, out),
            "punsubscribe" => pubsub::unsubscribe(self, Scope::Pattern, a, out),
            "sunsubscribe" => pubsub::unsubscribe(self, Scope::Shard, a, out),
            "publish" => pubsub::publish(self, MessageKind::Publish, a, out),
            "spublish" => pubsub::publish(self, MessageKind::ShardPublish, a, out),
            "pubsub" => pubsub::pubsub(self, a, out),
            "command" => introspection::command(a, out),
            "info" => introspection::info(self, a, out),
            "config" => config_cmd::config(self, a, out),
            "time" => {
                let us = self.node.clock_micros();
                out.array(2);
                out.bulk(itoa::Buffer::new().format(us / 1_000_000).as_bytes());
                out.bulk(itoa::Buffer::new().format(us % 1_000_000).as_bytes());
                Ok(())
            }
            "debug" => debug_cmd::debug(self, a, out),
            "wait" => {
                let _numreplicas = commands::args::int(a[1])?;
                if commands::args::int(a[2])? < 0 {
                    return Err(CmdError::other("ERR timeout is negative"));
                }
                let n = self.node.cluster.as_deref().map_or(0, |c| {
                    cluster::cluster_cmd::replicas_holding(c, self.last_write)
                });
                out.int(n as i64);
                Ok(())
            }
            "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" => {
                crate::scripts::eval(self, spec, a, out)
            }
            "script" => crate::script_cmd::script(self, a, out),
            "function" => crate::script_cmd::function(self, a, out),
            "wanapply" => internal_cmd::wanapply(self, a, out),
            "wansettled" => internal_cmd::wansettled(self, a, out),
            "backupjob" => internal_cmd::backupjob(self, a, out),
            "cluster" => cluster::cluster_cmd::cluster(
                self.node.cluster.as_deref(),
                &self.node.ks,
                a,
                self.shared.tls,
                out,
            ),
            "asking" | "readonly" | "readwrite" => {
                if self.node.cluster.is_none() {
                    return Err(cluster::cluster_cmd::disabled());
                }
                self.readonly = match spec.name {
                    "readonly" => true,
                    "readwrite" => false,
                    _ => self.readonly,
                };
                out.simple("OK");
                Ok(())
            }
            "multi" => transaction::multi(self, out),
            "discard" => transaction::discard(self, out),
            "watch" => transaction::watch(self, a, out),
            "unwatch" => transaction::unwatch(self, out),
            _ => Err(CmdError::unknown_command(a)),
        }
    }

    pub fn set_tracking(&mut self, on: bool) {
        self.tracking = on;
    }

    /// Connection ended: release what the node holds for it (again
    /// harmless).
    pub fn close(&mut self) {
        if let Some(b) = self.blocked.take() {
            self.unblock(&b.keys);
        }
        client_cmd::tracking_off(self);
        pubsub::release_all(self);
        self.node.monitors.remove(self.id);
        self.node.clients.remove(self.id);
    }

    /// MONITOR: a command that ran (those of a transaction as EXEC runs
    /// them, then EXEC itself).
    pub(crate) fn monitor_feed(&self, spec: &CommandSpec, args: &[&[u8]]) {
        if self.node.monitors.active() && spec.name != "monitor" {
            // A script's commands show as Redis shows them: from "lua".
            let addr = if self.in_script {
                "lua".to_string()
            } else {
                self.shared.addr.to_string()
            };
            self.node
                .monitors
                .feed(&self.node.clients, spec, args, self.id, &addr);
        }
    }

    /// `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]`: the node stops as on
    /// SIGTERM (partitions handed over, then the process ends); no reply.
    fn shutdown(&mut self, a: &[&[u8]]) -> Result<(), CmdError> {
        let mut abort = false;
        for arg in &a[1..] {
            if is(arg, "ABORT") {
                abort = true;
            } else if is(arg, "SAVE") {
                return Err(CmdError::other(
                    "ERR SHUTDOWN SAVE: deltagrid keeps no RDB file to save; use SHUTDOWN or SHUTDOWN NOSAVE",
                ));
            } else if !(is(arg, "NOSAVE") || is(arg, "NOW") || is(arg, "FORCE")) {
                return Err(CmdError::Syntax);
            }
        }
        if abort {
            return Err(CmdError::other("ERR No shutdown in progress."));
        }
        tracing::info!(client = self.id, addr = %self.shared.addr, "SHUTDOWN asked by a client");
        self.node.shutdown.notify_one();
        self.closing = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_emptied_argument_vector_keeps_its_allocation() {
        let request = b"HSET h f1 v1 f2 v2 f3 v3 f4 v4 f5 v5".to_vec();
        let mut args: Vec<&[u8]> = request.split(|&b| b == b' ').collect();
        args.reserve(32);
        let (ptr, cap) = (args.as_ptr() as usize, args.capacity());
        let again: Vec<&'static [u8]> = super::emptied(args);
        assert!(again.is_empty());
        assert_eq!((again.as_ptr() as usize, again.capacity()), (ptr, cap));
    }
}
