//! EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT: the node's Lua engine
//! (the `scripting` crate) bound to the keyspace.
//!
//! A script runs as a transaction does: under the exec gate held
//! exclusively, so no other client's command runs between its commands.
//! Each `redis.call` runs through [`Session::run`] as the calling client
//! would send it, after the checks Redis makes for scripts (commands not
//! allowed from scripts, writes from read-only scripts, OOM before the
//! first write, cluster routing of every key), so a script's writes are
//! ordinary changes through the one write path: replicas and other sites
//! receive the writes (effects), never the script. Across sites a script is
//! atomic at its own site only: another site applies its writes as they
//! arrive, partition by partition, each by its type's merge rule.
//!
//! A script that runs past `busy-reply-threshold` makes other clients'
//! commands answer BUSY instead of waiting (the session checks the
//! watchdog while it waits for the gate); SCRIPT KILL stops a script that
//! has not written.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::BytesMut;
use commands::args::{int, is};
use commands::{lookup, CmdError, CommandSpec, Flags};
use parking_lot::Mutex;
use resp::{Frame, ReplyWriter};
use scripting::{Engine, Host, Watchdog};

use crate::session::{Reply, Session};

pub struct Scripts {
    /// EVAL's Lua state and script cache.
    pub engine: Mutex<Engine>,
    /// FUNCTION LOAD's libraries and FCALL, in a Lua state of their own.
    pub functions: Mutex<Engine>,
    pub watchdog: Arc<Watchdog>,
    /// DEBUG SET-DISABLE-DENY-SCRIPTS: scripts may run commands flagged
    /// noscript (Redis's test suite uses it).
    pub allow_denied: AtomicBool,
}

impl Scripts {
    /// Two Lua states of at most `memory` bytes each.
    pub fn new(memory: usize) -> Self {
        let watchdog = Arc::new(Watchdog::default());
        watchdog.set_on_long_run(hand_off_worker);
        let engine = |functions| {
            let mut e = Engine::new(watchdog.clone(), crate::REDIS_VERSION, functions)
                .expect("a new Lua state");
            e.set_memory_limit(memory);
            Mutex::new(e)
        };
        Scripts {
            engine: engine(false),
            functions: engine(true),
            watchdog,
            allow_denied: AtomicBool::new(false),
        }
    }
}

/// Commands that run while a script is busy (Redis's `allow-busy`).
pub fn allowed_when_busy(spec: &CommandSpec, args: &[&[u8]]) -> bool {
    match spec.name {
        "script" => args.get(1).is_some_and(|a| is(a, "KILL")),
        "function" => args.get(1).is_some_and(|a| is(a, "KILL") || is(a, "STATS")),
        "shutdown" | "auth" | "hello" | "quit" | "reset" | "multi" | "discard" | "watch"
        | "unwatch" => true,
        _ => false,
    }
}

/// EVAL / EVALSHA / EVAL_RO / EVALSHA_RO / FCALL / FCALL_RO.
pub fn eval(
    s: &mut Session,
    spec: &'static CommandSpec,
    a: &[&[u8]],
    out: Reply,
) -> Result<(), CmdError> {
    // MONITOR shows the script's command before its commands, as Redis.
    s.monitor_feed(spec, a);
    let numkeys = int(a[2]).map_err(|e| {
        if spec.name.starts_with("fcall") {
            CmdError::other("ERR Bad number of keys provided")
        } else {
            e
        }
    })?;
    if numkeys > (a.len() - 3) as i64 {
        return Err(CmdError::other(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    if numkeys < 0 {
        return Err(CmdError::other("ERR Number of keys can't be negative"));
    }
    run_script(s, spec, a, numkeys as usize, out)
}

/// A script that runs long holds its worker thread, and with it the
/// runtime's other connections queued there, and its I/O when no other
/// worker is awake: their requests would wait unread behind it, unable
/// even to answer BUSY. Once a script turns out long (the hook's first
/// check), its thread gives its worker up: `block_in_place` hands the
/// worker to another thread, and the pause gives that thread time to take
/// it (returning at once, this thread would often take it back). Short
/// scripts do not pay for the hand-off (~100 µs of thread switching per
/// EVAL when every script did).
fn hand_off_worker() {
    blocking(|| std::thread::sleep(std::time::Duration::from_millis(2)));
}

/// `f` inside tokio's `block_in_place` on a multi-threaded runtime, as is
/// elsewhere.
fn blocking<R>(f: impl FnOnce() -> R) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

fn run_script(
    s: &mut Session,
    spec: &'static CommandSpec,
    a: &[&[u8]],
    numkeys: usize,
    out: Reply,
) -> Result<(), CmdError> {
    let fcall = spec.name.starts_with("fcall");
    let by_sha = spec.name.starts_with("evalsha");
    let ro_command = spec.name.ends_with("_ro");
    let node = s.node.clone();
    // The gate first, then the engine: SCRIPT LOAD holds the gate shared
    // while it takes the engine.
    let _exclusive = (!s.in_exec).then(|| node.exec_gate.exclusive());
    if let Some(cluster) = &node.cluster {
        cluster.check(spec, a, s.readonly, s.shared.tls)?;
    }
    let mut engine = if fcall {
        node.scripts.functions.lock()
    } else {
        node.scripts.engine.lock()
    };
    let name = String::from_utf8_lossy(a[1]).into_owned();
    // What runs: a function's name, or a script's SHA1.
    let (target, flags) = if fcall {
        let f = engine
            .function(&name)
            .ok_or_else(|| CmdError::other("ERR Function not found"))?;
        (name, f.flags)
    } else {
        let sha = if by_sha {
            if a[1].len() != 40 || !engine.exists(a[1]) {
                return Err(CmdError::other(
                    "NOSCRIPT No matching script. Please use EVAL.",
                ));
            }
            name.to_ascii_lowercase()
        } else {
            engine.create(a[1], false).map_err(CmdError::other)?
        };
        let flags = engine.flags(sha.as_bytes()).unwrap_or_default();
        (sha, flags)
    };
    if ro_command && flags.shebang && !flags.no_writes {
        return Err(CmdError::other(
            "ERR Can not execute a script with write flag using *_ro command.",
        ));
    }
    // A script that declares its flags may write unless it says no-writes:
    // over maxmemory it does not start (Redis checks before the run).
    if flags.shebang
        && !flags.allow_oom
        && !flags.no_writes
        && node.runtime.maxmemory() > 0
        && !node.make_room()
    {
        return Err(CmdError::other(
            "OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'",
        ));
    }
    // And with min-replicas-to-write, it does not start without them.
    if flags.shebang && !flags.no_writes {
        let min = node.runtime.min_replicas_to_write.load(Ordering::Relaxed);
        let key = (numkeys > 0).then(|| a[3]);
        let good = node
            .cluster
            .as_deref()
            .map_or(0, |c| cluster::cluster_cmd::in_sync_replicas(c, key));
        if min > 0 && good < min {
            return Err(CmdError::other(
                "NOREPLICAS Not enough good replicas to write.",
            ));
        }
    }
    node.scripts.watchdog.set_command(a);
    let keys_end = 3 + numkeys;
    let was_in_exec = std::mem::replace(&mut s.in_exec, true);
    s.in_script = true;
    s.script_read = false;
    let mut host = ScriptHost {
        s,
        read_only: ro_command || flags.no_writes,
        watchdog: &node.scripts.watchdog,
        allow_oom: flags.allow_oom,
        slot: None,
        cross_slot: flags.allow_cross_slot_keys,
    };
    let (keys, argv) = (&a[3..keys_end], &a[keys_end..]);
    if fcall {
        engine.call_function(&target, keys, argv, &mut host, out);
    } else {
        engine.run(target.as_bytes(), keys, argv, &mut host, out);
    }
    s.in_exec = was_in_exec;
    s.in_script = false;
    // Tracking: a script that read anything read its declared keys.
    if s.tracking && s.script_read {
        s.remember_reads(keys);
    }
    Ok(())
}

/// Runs a script's commands as its client.
struct ScriptHost<'a> {
    s: &'a mut Session,
    read_only: bool,
    watchdog: &'a Watchdog,
    allow_oom: bool,
    /// The slot of the first key the script touched (cluster mode): every
    /// later key must be in it.
    slot: Option<u16>,
    cross_slot: bool,
}

impl ScriptHost<'_> {
    fn check(&mut self, spec: &'static CommandSpec, args: &[&[u8]]) -> Result<(), String> {
        if !spec.arity_ok(args.len()) {
            return Err("ERR Wrong number of args calling Redis command from script".into());
        }
        if spec.flags.has(Flags::NOSCRIPT)
            && !self.s.node.scripts.allow_denied.load(Ordering::Relaxed)
        {
            return Err("ERR This Redis command is not allowed from script".into());
        }
        if let Err(denied) = crate::acl_cmd::check_in(self.s, spec, args, acl::LogContext::Lua) {
            return Err(format!(
                "ERR The user executing the script {}",
                crate::acl_cmd::refusal_reason(&denied)
            ));
        }
        let node = &self.s.node;
        if spec.flags.has(Flags::WRITE) {
            if self.read_only {
                return Err("ERR Write commands are not allowed from read-only scripts.".into());
            }
            // Before the first write only: a script is not stopped half-way.
            if !self.watchdog.has_written() {
                if !self.allow_oom
                    && spec.flags.has(Flags::DENYOOM)
                    && node.runtime.maxmemory() > 0
                    && !node.make_room()
                {
                    return Err(CmdError::Oom.to_string());
                }
                self.s
                    .enough_replicas(spec, args)
                    .map_err(|e| e.to_string())?;
            }
        }
        if let Some(cluster) = &node.cluster {
            if let Err(e) = cluster.check(spec, args, self.s.readonly, self.s.shared.tls) {
                let e = e.to_string();
                return Err(if e.starts_with("CLUSTERDOWN") {
                    "ERR Script attempted to execute a command while the cluster is down".into()
                } else if e.starts_with("CROSSSLOT") {
                    e
                } else {
                    "ERR Script attempted to access a non local key in a cluster node".into()
                });
            }
            if let Some(first) = spec.key_positions(args).next() {
                let slot = keyspace::slot::key_slot(args[first]);
                match self.slot {
                    None => self.slot = Some(slot),
                    Some(s) if s != slot && !self.cross_slot => {
                        return Err(
                            "ERR Script attempted to access keys that do not hash to the same slot"
                                .into(),
                        )
                    }
                    _ => {}
                }
            }
        }
        if spec.flags.has(Flags::WRITE) {
            self.watchdog.wrote();
        }
        Ok(())
    }
}

impl Host for ScriptHost<'_> {
    fn call(&mut self, args: &[&[u8]], resp3: bool) -> Frame {
        let Some(spec) = lookup(args[0]) else {
            return Frame::Error("ERR Unknown Redis command called from script".into());
        };
        if let Err(e) = self.check(spec, args) {
            self.s.node.metrics.error(Some(spec), &e, true);
            return Frame::Error(e);
        }
        let start = quanta::Instant::now();
        let mut buf = BytesMut::new();
        self.s
            .run(spec, args, &mut ReplyWriter::new(&mut buf, resp3));
        self.s.node.metrics.command(spec, start.elapsed());
        let limits = resp::Limits {
            max_bulk_len: usize::MAX,
            max_multibulk_len: usize::MAX,
            ..Default::default()
        };
        match resp::decode_reply(&mut buf, &limits) {
            Ok(Some(frame)) => frame,
            _ => Frame::Error("ERR the command's reply could not be read".into()),
        }
    }
}

/// INFO's scripting figures.
#[derive(Default)]
pub struct LuaMemory {
    pub scripts: usize,
    pub script_bytes: usize,
    pub lua_bytes: usize,
    pub functions: usize,
    pub libraries: usize,
    pub functions_lua_bytes: usize,
}

/// What the engines hold; an engine a script is running in is not waited
/// for (its figures read 0).
pub fn memory(node: &crate::node::Node) -> LuaMemory {
    let mut m = LuaMemory::default();
    if let Some(e) = node.scripts.engine.try_lock() {
        (m.scripts, m.script_bytes) = e.cached();
        m.lua_bytes = e.memory();
    }
    if let Some(e) = node.scripts.functions.try_lock() {
        (m.libraries, m.functions) = e.function_counts();
        m.functions_lua_bytes = e.memory();
    }
    m
}
