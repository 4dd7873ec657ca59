//! The Lua VM of a node and its script cache.
//!
//! One [`Engine`] per node, as Redis has one Lua state: scripts are
//! compiled once (by EVAL or SCRIPT LOAD) and kept by their SHA1; a run
//! binds `redis.call`/`redis.pcall` to a [`Host`] (the server runs the
//! command as the calling client would, into a reply the script reads),
//! sets `KEYS` and `ARGV`, calls the script under the prelude's error
//! handler and writes what it returned, or its error, as the reply.
//! SCRIPT FLUSH replaces the whole state, as Redis does.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use mlua::{
    Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, Variadic, VmState,
};
use resp::{Frame, ReplyWriter};

use crate::convert::{reply_to_lua, single, write_reply};
use crate::libs::sha1_hex;
use crate::raising::raising;
use crate::shebang::{self, ScriptFlags};
use crate::watchdog::Watchdog;

/// Scripts cached by EVAL (not SCRIPT LOAD) beyond this many are dropped,
/// oldest first, as Redis 7.4 does: a client that sends ever new script
/// texts cannot grow the cache without bound.
const MAX_EVAL_SCRIPTS: usize = 500;

/// Lua instructions between two checks of the watchdog (Redis: 100,000).
const HOOK_EVERY: u32 = 100_000;

/// Runs between two garbage collection steps (Redis: 50).
const GC_EVERY: u32 = 50;

const KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";

/// What runs a script's commands.
pub trait Host {
    /// Runs one command for the script and returns its reply in RESP2, or
    /// RESP3 when `resp3` (after `redis.setresp(3)`); a command refused
    /// (unknown, not allowed from scripts...) is an error reply.
    fn call(&mut self, args: &[&[u8]], resp3: bool) -> Frame;
}

struct Script {
    flags: ScriptFlags,
    func: Function,
    /// Bytes of its text (SCRIPT memory figures).
    len: usize,
}

pub struct Engine {
    lua: Lua,
    /// The prelude's private table: `current` is the run's `redis.call`.
    internal: Table,
    globals: Table,
    env: Table,
    /// The prelude's `run`, `call` and `load` (see prelude.lua).
    run: Function,
    call: Function,
    pub(crate) load: Function,
    resp3: Arc<AtomicBool>,
    watchdog: Arc<Watchdog>,
    scripts: HashMap<String, Script>,
    /// Scripts EVAL cached, oldest first (SCRIPT LOAD's are kept).
    evaled: VecDeque<String>,
    /// FUNCTION LOAD's libraries and their functions (the engine made
    /// for functions only).
    pub(crate) libraries: crate::functions::Libraries,
    for_functions: bool,
    version: String,
    /// Bytes the Lua state may allocate (0: no limit).
    memory_limit: usize,
    /// Runs since the last garbage collection step.
    runs_since_gc: u32,
}

impl Engine {
    /// A new Lua state with Redis's libraries and protections. `version`
    /// is what `redis.REDIS_VERSION` says; `for_functions`: the state
    /// FUNCTION LOAD and FCALL use (Redis keeps it apart from EVAL's, so
    /// SCRIPT FLUSH leaves functions alone).
    pub fn new(
        watchdog: Arc<Watchdog>,
        version: &str,
        for_functions: bool,
    ) -> mlua::Result<Engine> {
        // The debug library is for the prelude's error handler only: the
        // prelude takes what it needs and removes it from the globals.
        let lua = unsafe {
            Lua::unsafe_new_with(
                StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::DEBUG,
                LuaOptions::default(),
            )
        };
        let resp3 = Arc::new(AtomicBool::new(false));
        let globals = lua.globals();
        for (name, lib) in [
            ("redis", crate::libs::redis(&lua, resp3.clone(), version)?),
            ("cjson", crate::libs::cjson(&lua)?),
            ("bit", crate::libs::bit(&lua)?),
            ("cmsgpack", crate::msgpack::table(&lua)?),
        ] {
            for (k, v) in lib
                .pairs::<Value, Value>()
                .collect::<mlua::Result<Vec<_>>>()?
            {
                if let Value::Function(f) = v {
                    lib.raw_set(k, raising(&lua, f)?)?;
                }
            }
            globals.set(name, lib)?;
        }
        let internal = lua.create_table()?;
        let current = internal.clone();
        internal.set(
            "call",
            lua.create_function(move |_, args: MultiValue| {
                match current.raw_get::<Value>("current")? {
                    Value::Function(f) => f.call::<MultiValue>(args),
                    _ => Err(mlua::Error::runtime(
                        "redis.call/pcall can only be called inside a script invocation",
                    )),
                }
            })?,
        )?;
        internal.set("raising_call", raising(&lua, internal.get("call")?)?)?;
        internal.set("functions", for_functions)?;
        let wd = watchdog.clone();
        internal.set(
            "killed",
            lua.create_function(move |lua, ()| {
                if wd.killed() {
                    single(lua, "err", Value::String(lua.create_string(KILLED)?))
                } else if wd.load_overdue() {
                    let e = format!("ERR {}", crate::functions::LOAD_TIMEOUT);
                    single(lua, "err", Value::String(lua.create_string(e)?))
                } else {
                    Ok(Value::Nil)
                }
            })?,
        )?;
        let api: Table = lua
            .load(include_str!("prelude.lua"))
            .set_name("=prelude")
            .call(internal.clone())?;
        let wd = watchdog.clone();
        lua.set_hook(
            HookTriggers::new().every_nth_instruction(HOOK_EVERY),
            move |_, _| {
                if wd.killed() {
                    return Err(mlua::Error::runtime(KILLED));
                }
                if wd.load_overdue() {
                    return Err(mlua::Error::runtime(crate::functions::LOAD_TIMEOUT));
                }
                if wd.tick() {
                    tracing::warn!(
                        "a script has run longer than busy-reply-threshold: other clients get BUSY until it ends or SCRIPT KILL stops it"
                    );
                }
                Ok(VmState::Continue)
            },
        )?;
        Ok(Engine {
            env: api.get("env")?,
            run: api.get("run")?,
            call: api.get("call")?,
            load: api.get("load")?,
            lua,
            internal,
            globals,
            resp3,
            watchdog,
            scripts: HashMap::new(),
            evaled: VecDeque::new(),
            libraries: Default::default(),
            for_functions,
            version: version.to_string(),
            memory_limit: 0,
            runs_since_gc: 0,
        })
    }

    /// Compiles `body` unless cached; its SHA1 (lower-case hex), or the
    /// error reply (a shebang refused, a compile error).
    pub fn create(&mut self, body: &[u8], by_load: bool) -> Result<String, String> {
        let sha = sha1_hex(body);
        if self.scripts.contains_key(&sha) {
            if by_load {
                self.evaled.retain(|s| *s != sha);
            }
            return Ok(sha);
        }
        let (flags, skip) = shebang::parse(body).map_err(|e| format!("ERR {e}"))?;
        let func = self.compile(
            &body[skip..],
            "@user_script",
            "Error compiling script (new function)",
        )?;
        self.scripts.insert(
            sha.clone(),
            Script {
                flags,
                func,
                len: body.len(),
            },
        );
        if !by_load {
            self.evaled.push_back(sha.clone());
            while self.evaled.len() > MAX_EVAL_SCRIPTS {
                if let Some(old) = self.evaled.pop_front() {
                    self.scripts.remove(&old);
                }
            }
        }
        Ok(sha)
    }

    /// `code` as a function in the scripts' environment, named `name` in
    /// errors; a syntax error as the error reply `ERR <what>: <error>`.
    pub(crate) fn compile(&self, code: &[u8], name: &str, what: &str) -> Result<Function, String> {
        self.lua
            .load(code)
            .set_name(name)
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| {
                let msg = match &e {
                    mlua::Error::SyntaxError { message, .. } => message.clone(),
                    e => e.to_string(),
                };
                format!("ERR {what}: {msg}")
            })
    }

    /// The flags of a cached script (`sha` in either case).
    pub fn flags(&self, sha: &[u8]) -> Option<ScriptFlags> {
        self.scripts.get(&lower(sha)).map(|s| s.flags)
    }

    pub fn exists(&self, sha: &[u8]) -> bool {
        self.scripts.contains_key(&lower(sha))
    }

    /// SCRIPT FLUSH: a new Lua state, no scripts.
    pub fn flush(&mut self) -> mlua::Result<()> {
        let limit = self.memory_limit;
        *self = Engine::new(self.watchdog.clone(), &self.version, self.for_functions)?;
        self.set_memory_limit(limit);
        Ok(())
    }

    /// At most `bytes` for the Lua state (0: no limit): an allocation past
    /// it fails the script that made it ("not enough memory").
    pub fn set_memory_limit(&mut self, bytes: usize) {
        self.memory_limit = bytes;
        // Only a state mlua did not create can refuse; this one can't.
        let _ = self.lua.set_memory_limit(bytes);
    }

    /// Scripts cached and the bytes of their texts.
    pub fn cached(&self) -> (usize, usize) {
        (
            self.scripts.len(),
            self.scripts.values().map(|s| s.len).sum(),
        )
    }

    pub(crate) fn watchdog(&self) -> &Watchdog {
        &self.watchdog
    }

    /// Bytes the Lua state uses.
    pub fn memory(&self) -> usize {
        self.lua.used_memory()
    }

    /// Runs a cached script and writes its reply (or error) into `out`.
    pub fn run(
        &mut self,
        sha: &[u8],
        keys: &[&[u8]],
        argv: &[&[u8]],
        host: &mut dyn Host,
        out: &mut ReplyWriter,
    ) {
        let sha = lower(sha);
        let Some(script) = self.scripts.get(&sha) else {
            out.error("NOSCRIPT No matching script. Please use EVAL.");
            return;
        };
        let func = script.func.clone();
        self.invoke(Invocation::Eval(func), &sha, keys, argv, host, out);
    }

    /// Runs `target` (a script, KEYS and ARGV as globals; or a function,
    /// given them as arguments) and writes its reply or error, naming
    /// `name` in errors.
    pub(crate) fn invoke(
        &mut self,
        target: Invocation,
        name: &str,
        keys: &[&[u8]],
        argv: &[&[u8]],
        host: &mut dyn Host,
        out: &mut ReplyWriter,
    ) {
        self.resp3.store(false, Ordering::Relaxed);
        self.watchdog
            .begin(matches!(target, Invocation::Eval(_)), name);
        let host = RefCell::new(host);
        let resp3 = &self.resp3;
        let result = self.lua.scope(|scope| {
            let call = scope.create_function(|lua, args: Variadic<Value>| {
                call_from_script(lua, &host, &args, resp3.load(Ordering::Relaxed))
            })?;
            self.internal.raw_set("current", call)?;
            let keys = strings(&self.lua, keys)?;
            let argv = strings(&self.lua, argv)?;
            let result = match target {
                Invocation::Eval(func) => {
                    self.globals.raw_set("KEYS", keys)?;
                    self.globals.raw_set("ARGV", argv)?;
                    self.run.call::<(bool, Value)>(func)
                }
                Invocation::Function(func) => self.call.call::<(bool, Value)>((func, keys, argv)),
            };
            self.internal.raw_set("current", Value::Nil)?;
            result
        });
        let killed = self.watchdog.killed();
        self.watchdog.end();
        // A step of garbage collection every few runs, as Redis does, so
        // that short scripts' garbage does not pile up between the
        // collector's own cycles.
        self.runs_since_gc += 1;
        if self.runs_since_gc == GC_EVERY {
            self.runs_since_gc = 0;
            for _ in 0..GC_EVERY {
                if self.lua.gc_step().unwrap_or(true) {
                    break;
                }
            }
        }
        match result {
            Ok((true, value)) => write_reply(&value, out, self.resp3.load(Ordering::Relaxed)),
            Ok((false, Value::Table(err))) => {
                let text: String = if killed {
                    KILLED.to_string()
                } else {
                    err.raw_get::<mlua::LuaString>("err")
                        .map(|s| s.to_string_lossy())
                        .unwrap_or_else(|_| "ERR execution failure".into())
                };
                let mut msg = crate::convert::reply_error_text(&text);
                if let (Ok(source), Ok(line)) = (
                    err.raw_get::<mlua::LuaString>("source"),
                    err.raw_get::<i64>("line"),
                ) {
                    msg.push_str(&format!(
                        " script: {name}, on {}:{line}.",
                        source.to_string_lossy()
                    ));
                }
                out.error(&msg);
            }
            Ok((false, other)) => out.error(&format!(
                "ERR Error running script {name}, {}",
                other.to_string().unwrap_or_default()
            )),
            Err(e) => out.error(&crate::convert::reply_error_text(&format!(
                "ERR Error running script {name}, {e}"
            ))),
        }
    }
}

/// What [`Engine::invoke`] runs.
pub(crate) enum Invocation {
    Eval(Function),
    Function(Function),
}

/// `redis.call`/`redis.pcall` for one run: (true, reply) or (false, error
/// table), see the prelude.
fn call_from_script(
    lua: &Lua,
    host: &RefCell<&mut dyn Host>,
    args: &[Value],
    resp3: bool,
) -> mlua::Result<(bool, Value)> {
    let fail = |msg: &str| -> mlua::Result<(bool, Value)> {
        Ok((
            false,
            single(lua, "err", Value::String(lua.create_string(msg)?))?,
        ))
    };
    if args.is_empty() {
        return fail("ERR Please specify at least one argument for this redis lib call");
    }
    let mut owned: Vec<Vec<u8>> = Vec::with_capacity(args.len());
    for a in args {
        match a {
            Value::String(s) => owned.push(s.as_bytes().to_vec()),
            Value::Integer(n) => owned.push(n.to_string().into_bytes()),
            Value::Number(f) => owned.push(number_text(*f).into_bytes()),
            _ => return fail("ERR Lua redis lib command arguments must be strings or integers"),
        }
    }
    let argv: Vec<&[u8]> = owned.iter().map(|a| &a[..]).collect();
    let frame = host
        .try_borrow_mut()
        .map_err(|_| mlua::Error::RecursiveMutCallback)?
        .call(&argv, resp3);
    match frame {
        Frame::Error(e) => fail(&e),
        f => Ok((true, reply_to_lua(lua, f, resp3)?)),
    }
}

/// A Lua number as a command argument: integers without a fraction, others
/// in their shortest exact form (Redis: fpconv_dtoa).
fn number_text(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e17 {
        format!("{}", f as i64)
    } else {
        format!("{f}")
    }
}

fn strings(lua: &Lua, items: &[&[u8]]) -> mlua::Result<Table> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, item) in items.iter().enumerate() {
        t.raw_set(i + 1, lua.create_string(item)?)?;
    }
    Ok(t)
}

fn lower(sha: &[u8]) -> String {
    String::from_utf8_lossy(sha).to_ascii_lowercase()
}
