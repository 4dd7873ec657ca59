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

use std::sync::Arc;

use bytes::BytesMut;
use commands::args::{int, is};
use commands::{lookup, CmdError, CommandSpec, Flags};
use parking_lot::Mutex;
use resp::{Frame, ReplyWriter};
use scripting::{Engine, Host, Watchdog};

use crate::session::{Reply, Session};

pub struct Scripts {
    pub engine: Mutex<Engine>,
    pub watchdog: Arc<Watchdog>,
}

impl Default for Scripts {
    fn default() -> Self {
        let watchdog = Arc::new(Watchdog::default());
        let engine = Engine::new(watchdog.clone(), crate::REDIS_VERSION).expect("a new Lua state");
        Scripts {
            engine: Mutex::new(engine),
            watchdog,
        }
    }
}

/// BUSY, for a command that arrives while a script runs past the
/// threshold.
pub const BUSY: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";

/// Commands that run while a script is busy (Redis's `allow-busy`).
pub fn allowed_when_busy(spec: &CommandSpec, args: &[&[u8]]) -> bool {
    match spec.name {
        "script" => args.get(1).is_some_and(|a| is(a, "KILL")),
        "shutdown" | "auth" | "hello" | "quit" | "reset" => true,
        _ => false,
    }
}

/// EVAL / EVALSHA / EVAL_RO / EVALSHA_RO.
pub fn eval(
    s: &mut Session,
    spec: &'static CommandSpec,
    a: &[&[u8]],
    out: Reply,
) -> Result<(), CmdError> {
    let numkeys = int(a[2])?;
    if numkeys > (a.len() - 3) as i64 {
        return Err(CmdError::other(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    if numkeys < 0 {
        return Err(CmdError::other("ERR Number of keys can't be negative"));
    }
    // The script may run long, holding this thread: the runtime's other
    // connections move to another thread meanwhile (they would otherwise
    // wait behind it, unable even to answer BUSY).
    blocking(|| run_script(s, spec, a, numkeys as usize, out))
}

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
    let by_sha = spec.name.starts_with("evalsha");
    let ro_command = spec.name.ends_with("_ro");
    let node = s.node.clone();
    // The gate first, then the engine: SCRIPT LOAD holds the gate shared
    // while it takes the engine.
    let _exclusive = (!s.in_exec).then(|| node.exec_gate.exclusive());
    if let Some(cluster) = &node.cluster {
        cluster.check(spec, a, s.readonly)?;
    }
    let mut engine = node.scripts.engine.lock();
    let sha = if by_sha {
        if a[1].len() != 40 || !engine.exists(a[1]) {
            return Err(CmdError::other(
                "NOSCRIPT No matching script. Please use EVAL.",
            ));
        }
        String::from_utf8_lossy(a[1]).to_ascii_lowercase()
    } else {
        engine.create(a[1], false).map_err(CmdError::other)?
    };
    let flags = engine.flags(sha.as_bytes()).unwrap_or_default();
    if ro_command && flags.shebang && !flags.no_writes {
        return Err(CmdError::other(
            "ERR Can not execute a script with write flag using *_ro command.",
        ));
    }
    let keys_end = 3 + numkeys;
    let was_in_exec = std::mem::replace(&mut s.in_exec, true);
    let mut host = ScriptHost {
        s,
        read_only: ro_command || flags.no_writes,
        watchdog: &node.scripts.watchdog,
        allow_oom: flags.allow_oom,
        slot: None,
        cross_slot: flags.allow_cross_slot_keys,
    };
    engine.run(
        sha.as_bytes(),
        &a[3..keys_end],
        &a[keys_end..],
        &mut host,
        out,
    );
    s.in_exec = was_in_exec;
    Ok(())
}

/// SCRIPT LOAD | EXISTS | FLUSH | KILL | HELP.
pub fn script(s: &mut Session, a: &[&[u8]], out: Reply) -> Result<(), CmdError> {
    let sub = String::from_utf8_lossy(a[1]).to_ascii_uppercase();
    let node = &s.node;
    match (sub.as_str(), a.len()) {
        ("LOAD", 3) => {
            let sha = node
                .scripts
                .engine
                .lock()
                .create(a[2], true)
                .map_err(CmdError::other)?;
            out.bulk(sha.as_bytes());
        }
        ("EXISTS", n) if n >= 3 => {
            let engine = node.scripts.engine.lock();
            out.array(n - 2);
            for sha in &a[2..] {
                out.int(engine.exists(sha) as i64);
            }
        }
        ("FLUSH", n) => {
            if n > 3 || (n == 3 && !(is(a[2], "SYNC") || is(a[2], "ASYNC"))) {
                return Err(CmdError::other(
                    "ERR SCRIPT FLUSH only support SYNC|ASYNC option",
                ));
            }
            node.scripts
                .engine
                .lock()
                .flush()
                .map_err(|e| CmdError::other(format!("ERR {e}")))?;
            out.simple("OK");
        }
        ("KILL", 2) => {
            node.scripts
                .watchdog
                .kill()
                .map_err(|e| CmdError::other(e.reply()))?;
            out.simple("OK");
        }
        ("HELP", 2) => {
            let lines = [
                "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "EXISTS <sha1> [<sha1> ...]",
                "    Return information about the existence of the scripts in the script cache.",
                "FLUSH [ASYNC|SYNC]",
                "    Flush the Lua scripts cache. Very dangerous on replicas.",
                "KILL",
                "    Kill the currently executing Lua script.",
                "LOAD <script>",
                "    Load a script into the scripts cache without executing it.",
                "HELP",
                "    Prints this help.",
            ];
            out.array(lines.len());
            for l in lines {
                out.simple(l);
            }
        }
        ("LOAD" | "EXISTS" | "KILL" | "HELP", _) => {
            return Err(CmdError::other(format!(
                "ERR wrong number of arguments for 'script|{}' command",
                sub.to_ascii_lowercase()
            )))
        }
        _ => {
            return Err(CmdError::other(format!(
                "ERR unknown subcommand '{}'. Try SCRIPT HELP.",
                String::from_utf8_lossy(a[1])
            )))
        }
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
        if spec.flags.has(Flags::NOSCRIPT) {
            return Err("ERR This Redis command is not allowed from script".into());
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
            if let Err(e) = cluster.check(spec, args, self.s.readonly) {
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

/// INFO's scripting figures: (cached scripts, bytes of their texts, bytes
/// of the Lua state).
pub fn memory(node: &crate::node::Node) -> (usize, usize, usize) {
    // A running script holds the engine: report nothing rather than wait.
    match node.scripts.engine.try_lock() {
        Some(e) => {
            let (n, bytes) = e.cached();
            (n, bytes, e.memory())
        }
        None => (0, 0, 0),
    }
}

/// Whether a script is running past the threshold.
pub fn busy(node: &crate::node::Node) -> bool {
    node.scripts.watchdog.busy()
}
