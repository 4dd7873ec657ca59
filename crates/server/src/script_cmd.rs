//! SCRIPT (LOAD, EXISTS, FLUSH, KILL) and FUNCTION (LOAD, DELETE, FLUSH,
//! LIST, STATS, KILL, DUMP, RESTORE: Redis's RDB payload): the script cache and the function libraries of a
//! node, as Redis keeps them per server. In a site every node keeps its
//! own (a client loads a script or library on each node, as Redis Cluster
//! asks; EVALSHA answers NOSCRIPT where it is missing and clients then
//! send EVAL).

use commands::args::is;
use commands::dump::rdb::LoadError;
use commands::CmdError;
use keyspace::glob::glob_match;
use scripting::RestorePolicy;

use crate::session::{Reply, Session};

fn help(out: Reply, lines: &[&str]) {
    out.array(lines.len());
    for l in lines {
        out.simple(l);
    }
}

fn wrong_args(command: &str, sub: &str) -> CmdError {
    CmdError::other(format!(
        "ERR wrong number of arguments for '{command}|{}' command",
        sub.to_ascii_lowercase()
    ))
}

fn unknown_sub(command: &str, sub: &[u8]) -> CmdError {
    CmdError::other(format!(
        "ERR unknown subcommand '{}'. Try {command} HELP.",
        String::from_utf8_lossy(sub)
    ))
}

/// `[ASYNC|SYNC]` of SCRIPT FLUSH and FUNCTION FLUSH.
fn flush_mode(a: &[&[u8]], error: &str) -> Result<(), CmdError> {
    match a.len() {
        2 => Ok(()),
        3 if is(a[2], "SYNC") || is(a[2], "ASYNC") => Ok(()),
        _ => Err(CmdError::other(error)),
    }
}

/// SCRIPT LOAD | EXISTS | FLUSH | KILL | HELP.
pub fn script(s: &mut Session, a: &[&[u8]], out: Reply) -> Result<(), CmdError> {
    let sub = String::from_utf8_lossy(a[1]).to_ascii_uppercase();
    let scripts = &s.node.scripts;
    match (sub.as_str(), a.len()) {
        ("LOAD", 3) => {
            let sha = scripts
                .engine
                .lock()
                .create(a[2], true)
                .map_err(CmdError::other)?;
            out.bulk(sha.as_bytes());
        }
        ("EXISTS", n) if n >= 3 => {
            let engine = scripts.engine.lock();
            out.array(n - 2);
            for sha in &a[2..] {
                out.int(engine.exists(sha) as i64);
            }
        }
        ("FLUSH", _) => {
            flush_mode(a, "ERR SCRIPT FLUSH only support SYNC|ASYNC option")?;
            scripts
                .engine
                .lock()
                .flush()
                .map_err(|e| CmdError::other(format!("ERR {e}")))?;
            out.simple("OK");
        }
        ("KILL", 2) => {
            scripts
                .watchdog
                .kill(true)
                .map_err(|e| CmdError::other(e.reply()))?;
            out.simple("OK");
        }
        ("HELP", 2) => help(
            out,
            &[
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
            ],
        ),
        ("LOAD" | "EXISTS" | "KILL" | "HELP", _) => return Err(wrong_args("script", &sub)),
        _ => return Err(unknown_sub("SCRIPT", a[1])),
    }
    Ok(())
}

/// FUNCTION LOAD | DELETE | FLUSH | LIST | STATS | KILL | HELP.
pub fn function(s: &mut Session, a: &[&[u8]], out: Reply) -> Result<(), CmdError> {
    let sub = String::from_utf8_lossy(a[1]).to_ascii_uppercase();
    let scripts = &s.node.scripts;
    // LOAD and RESTORE add to memory: refused over maxmemory, as Redis's
    // deny-oom subcommands.
    if matches!(sub.as_str(), "LOAD" | "RESTORE")
        && s.node.runtime.maxmemory() > 0
        && !s.node.make_room()
    {
        return Err(CmdError::Oom);
    }
    match (sub.as_str(), a.len()) {
        ("LOAD", n) if n >= 3 => {
            let mut replace = false;
            let mut i = 2;
            while i < n - 1 {
                if !is(a[i], "REPLACE") {
                    return Err(CmdError::other(format!(
                        "ERR Unknown option given: {}",
                        String::from_utf8_lossy(a[i])
                    )));
                }
                replace = true;
                i += 1;
            }
            let name = scripts
                .functions
                .lock()
                .load_library(a[n - 1], replace)
                .map_err(CmdError::other)?;
            out.bulk(name.as_bytes());
        }
        ("DELETE", 3) => {
            let name = String::from_utf8_lossy(a[2]);
            if !scripts.functions.lock().delete_library(&name) {
                return Err(CmdError::other("ERR Library not found"));
            }
            out.simple("OK");
        }
        ("FLUSH", 2 | 3) => {
            flush_mode(a, "ERR FUNCTION FLUSH only supports SYNC|ASYNC option")?;
            scripts
                .functions
                .lock()
                .flush()
                .map_err(|e| CmdError::other(format!("ERR {e}")))?;
            out.simple("OK");
        }
        ("LIST", _) => list(s, a, out)?,
        ("DUMP", 2) => {
            let engine = scripts.functions.lock();
            let payload =
                commands::dump::rdb::dump_functions(engine.libraries().map(|l| &l.code[..]));
            out.bulk(&payload);
        }
        ("RESTORE", 3 | 4) => {
            let policy = match a.get(3) {
                None => RestorePolicy::Append,
                Some(p) if is(p, "APPEND") => RestorePolicy::Append,
                Some(p) if is(p, "REPLACE") => RestorePolicy::Replace,
                Some(p) if is(p, "FLUSH") => RestorePolicy::Flush,
                Some(_) => {
                    return Err(CmdError::other(
                        "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
                    ))
                }
            };
            let codes = commands::dump::rdb::restore_functions(a[2]).map_err(|e| {
                CmdError::other(match e {
                    LoadError::Footer => "ERR DUMP payload version or checksum are wrong",
                    LoadError::Malformed => "ERR given type is not a function",
                })
            })?;
            scripts
                .functions
                .lock()
                .restore_libraries(&codes, policy)
                .map_err(CmdError::other)?;
            out.simple("OK");
        }
        ("STATS", 2) => {
            out.map(2);
            out.bulk(b"running_script");
            match scripts.watchdog.running() {
                Some((name, false, command, ms)) => {
                    out.map(3);
                    out.bulk(b"name");
                    out.bulk(name.as_bytes());
                    out.bulk(b"command");
                    out.array(command.len());
                    for arg in &command {
                        out.bulk(arg.as_bytes());
                    }
                    out.bulk(b"duration_ms");
                    out.int(ms as i64);
                }
                _ => out.null(),
            }
            out.bulk(b"engines");
            out.map(1);
            out.bulk(b"LUA");
            // A function that runs holds the engine: its counts are not
            // read then.
            let (libs, funcs) = scripts
                .functions
                .try_lock()
                .map_or((0, 0), |e| e.function_counts());
            out.map(2);
            out.bulk(b"libraries_count");
            out.int(libs as i64);
            out.bulk(b"functions_count");
            out.int(funcs as i64);
        }
        ("KILL", 2) => {
            scripts
                .watchdog
                .kill(false)
                .map_err(|e| CmdError::other(e.reply()))?;
            out.simple("OK");
        }
        ("HELP", 2) => help(
            out,
            &[
                "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "LOAD [REPLACE] <FUNCTION CODE>",
                "    Create a new library with the given library name and code.",
                "DELETE <LIBRARY NAME>",
                "    Delete the given library.",
                "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
                "    Return general information on all the libraries.",
                "STATS",
                "    Return information about the current function running.",
                "KILL",
                "    Kill the current running function.",
                "FLUSH [ASYNC|SYNC]",
                "    Delete all the libraries.",
                "DUMP",
                "    Return a serialized payload representing the current libraries.",
                "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
                "    Restore the libraries represented by the given payload (APPEND by default).",
                "HELP",
                "    Prints this help.",
            ],
        ),
        ("FLUSH", _) => return Err(CmdError::other(
            "ERR unknown subcommand or wrong number of arguments for 'flush'. Try FUNCTION HELP.",
        )),
        ("LOAD" | "DELETE" | "STATS" | "KILL" | "HELP" | "DUMP", _) => {
            return Err(wrong_args("function", &sub))
        }
        ("RESTORE", _) => return Err(CmdError::other(
            "ERR unknown subcommand or wrong number of arguments for 'restore'. Try FUNCTION HELP.",
        )),
        _ => return Err(unknown_sub("FUNCTION", a[1])),
    }
    Ok(())
}

/// `FUNCTION LIST [WITHCODE] [LIBRARYNAME pattern]`.
fn list(s: &Session, a: &[&[u8]], out: Reply) -> Result<(), CmdError> {
    let mut with_code = false;
    let mut pattern: Option<&[u8]> = None;
    let mut i = 2;
    while i < a.len() {
        if is(a[i], "WITHCODE") && !with_code {
            with_code = true;
            i += 1;
        } else if is(a[i], "LIBRARYNAME") && pattern.is_none() {
            let Some(p) = a.get(i + 1) else {
                return Err(CmdError::other("ERR library name argument was not given"));
            };
            pattern = Some(p);
            i += 2;
        } else {
            return Err(CmdError::other(format!(
                "ERR Unknown argument {}",
                String::from_utf8_lossy(a[i])
            )));
        }
    }
    let engine = s.node.scripts.functions.lock();
    let libs: Vec<_> = engine
        .libraries()
        .filter(|l| pattern.is_none_or(|p| glob_match(p, l.name.as_bytes())))
        .collect();
    out.array(libs.len());
    for lib in libs {
        out.map(if with_code { 4 } else { 3 });
        out.bulk(b"library_name");
        out.bulk(lib.name.as_bytes());
        out.bulk(b"engine");
        out.bulk(b"LUA");
        out.bulk(b"functions");
        out.array(lib.functions.len());
        for name in &lib.functions {
            let f = engine.function(name);
            out.map(3);
            out.bulk(b"name");
            out.bulk(name.as_bytes());
            out.bulk(b"description");
            match f.and_then(|f| f.description.as_deref()) {
                Some(d) => out.bulk(d.as_bytes()),
                None => out.null(),
            }
            out.bulk(b"flags");
            let flags = f.map_or(&[][..], |f| &f.flag_names[..]);
            out.set(flags.len());
            for flag in flags {
                out.simple(flag);
            }
        }
        if with_code {
            out.bulk(b"library_code");
            out.bulk(&lib.code);
        }
    }
    Ok(())
}
