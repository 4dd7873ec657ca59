//! The libraries Redis gives scripts besides Lua's own: `redis` (all but
//! `call`/`pcall`, which the engine binds per run), `cjson` and `bit`
//! (`cmsgpack`: the `msgpack` module).
//!
//! Every function here answers `(true, results...)` or `(false, error)`;
//! the engine wraps each so that the error is raised as Lua raises it (see
//! `raising`). Not provided: `struct` (a script that uses it gets
//! "Script attempted to access nonexistent global variable").

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use mlua::{IntoLuaMulti, LightUserData, Lua, MultiValue, Table, Value, Variadic};

use crate::convert::single;

/// What a library function answers.
type Answer = mlua::Result<MultiValue>;

fn ok(lua: &Lua, v: impl IntoLuaMulti) -> Answer {
    let mut m = v.into_lua_multi(lua)?;
    m.push_front(Value::Boolean(true));
    Ok(m)
}

fn fail(lua: &Lua, msg: &str) -> Answer {
    (false, lua.create_string(msg)?).into_lua_multi(lua)
}

/// The `redis` table without `call`/`pcall`. `resp3` is the run's
/// `redis.setresp` choice.
pub(crate) fn redis(lua: &Lua, resp3: Arc<AtomicBool>, version: &str) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "sha1hex",
        lua.create_function(|lua, args: Variadic<Value>| {
            if args.len() != 1 {
                return fail(lua, "wrong number of arguments");
            }
            let bytes = match &args[0] {
                Value::String(s) => s.as_bytes().to_vec(),
                v => lua
                    .coerce_string(v.clone())?
                    .map(|s| s.as_bytes().to_vec())
                    .unwrap_or_default(),
            };
            ok(lua, sha1_hex(&bytes))
        })?,
    )?;
    t.set(
        "error_reply",
        lua.create_function(|lua, args: Variadic<Value>| match &args[..] {
            [Value::String(s)] => {
                let text = s.to_string_lossy();
                let text = if text.starts_with('-') {
                    text
                } else {
                    format!("-{text}")
                };
                let e = crate::convert::lua_error_text(&text);
                ok(
                    lua,
                    single(lua, "err", Value::String(lua.create_string(e)?))?,
                )
            }
            _ => ok(lua, wrong_args(lua)?),
        })?,
    )?;
    t.set(
        "status_reply",
        lua.create_function(|lua, args: Variadic<Value>| match &args[..] {
            [Value::String(s)] => ok(lua, single(lua, "ok", Value::String(s.clone()))?),
            _ => ok(lua, wrong_args(lua)?),
        })?,
    )?;
    t.set(
        "log",
        lua.create_function(|lua, args: Variadic<Value>| {
            if args.len() < 2 {
                return fail(lua, "redis.log() requires two arguments or more.");
            }
            let level = match &args[0] {
                Value::Integer(n) => *n,
                Value::Number(f) => *f as i64,
                _ => return fail(lua, "First argument must be a number (log level)."),
            };
            if !(0..=3).contains(&level) {
                return fail(lua, "Invalid debug level.");
            }
            let mut text = String::new();
            for (i, a) in args[1..].iter().enumerate() {
                if i > 0 {
                    text.push(' ');
                }
                if let Some(s) = lua.coerce_string(a.clone())? {
                    text.push_str(&s.to_string_lossy());
                }
            }
            match level {
                0 => tracing::debug!(target: "script", "{text}"),
                1 | 2 => tracing::info!(target: "script", "{text}"),
                _ => tracing::warn!(target: "script", "{text}"),
            }
            ok(lua, ())
        })?,
    )?;
    t.set(
        "setresp",
        lua.create_function(move |lua, args: Variadic<Value>| {
            if args.len() != 1 {
                return fail(lua, "redis.setresp() requires one argument.");
            }
            match &args[0] {
                Value::Integer(2) => resp3.store(false, Ordering::Relaxed),
                Value::Integer(3) => resp3.store(true, Ordering::Relaxed),
                Value::Number(f) if *f == 2.0 || *f == 3.0 => {
                    resp3.store(*f == 3.0, Ordering::Relaxed)
                }
                _ => return fail(lua, "RESP version must be 2 or 3."),
            }
            ok(lua, ())
        })?,
    )?;
    // Effects are what replicas and other sites receive, always: these
    // are accepted and change nothing.
    t.set(
        "set_repl",
        lua.create_function(|lua, args: Variadic<Value>| match &args[..] {
            [Value::Integer(0..=3)] => ok(lua, ()),
            [Value::Number(f)] if (0.0..=3.0).contains(f) => ok(lua, ()),
            [_] => fail(
                lua,
                "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
            ),
            _ => fail(lua, "redis.set_repl() requires one argument."),
        })?,
    )?;
    t.set(
        "replicate_commands",
        lua.create_function(|lua, _: Variadic<Value>| ok(lua, true))?,
    )?;
    t.set(
        "breakpoint",
        lua.create_function(|lua, _: Variadic<Value>| ok(lua, false))?,
    )?;
    t.set(
        "debug",
        lua.create_function(|lua, _: Variadic<Value>| ok(lua, ()))?,
    )?;
    for (name, v) in [
        ("LOG_DEBUG", 0),
        ("LOG_VERBOSE", 1),
        ("LOG_NOTICE", 2),
        ("LOG_WARNING", 3),
        ("REPL_NONE", 0),
        ("REPL_AOF", 1),
        ("REPL_SLAVE", 2),
        ("REPL_REPLICA", 2),
        ("REPL_ALL", 3),
    ] {
        t.set(name, v)?;
    }
    t.set("REDIS_VERSION", version)?;
    t.set("REDIS_VERSION_NUM", version_num(version))?;
    Ok(t)
}

fn wrong_args(lua: &Lua) -> mlua::Result<Value> {
    single(
        lua,
        "err",
        Value::String(lua.create_string("ERR wrong number or type of arguments")?),
    )
}

/// "7.2.4" as 0x070204.
fn version_num(v: &str) -> i64 {
    v.split('.')
        .take(3)
        .fold(0, |acc, p| (acc << 8) | p.parse::<i64>().unwrap_or(0))
}

pub fn sha1_hex(bytes: &[u8]) -> String {
    sha1_smol::Sha1::from(bytes).digest().to_string()
}

/// `cjson`: encode and decode; `cjson.null` is a null light userdata;
/// the settings scripts may change (`encode_max_depth`...), kept for the
/// Lua state's life as lua-cjson keeps them.
pub(crate) fn cjson(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let config = Arc::new(crate::json::Config::default());
    let c = config.clone();
    t.set(
        "encode",
        lua.create_function(move |lua, args: Variadic<Value>| {
            if args.len() != 1 {
                return fail(lua, "bad argument #1 to 'encode' (expected 1 argument)");
            }
            let mut out = Vec::new();
            match crate::json::encode(&args[0], &mut out, 1, &c) {
                Ok(()) => ok(lua, lua.create_string(out)?),
                Err(e) => fail(lua, &e),
            }
        })?,
    )?;
    let c = config.clone();
    t.set(
        "decode",
        lua.create_function(move |lua, args: Variadic<Value>| {
            let text = match args.first() {
                Some(Value::String(s)) => s.as_bytes().to_vec(),
                _ => return fail(lua, "bad argument #1 to 'decode' (string expected)"),
            };
            match crate::json::decode(lua, &text, &c) {
                Ok(v) => ok(lua, v),
                Err(e) => fail(lua, &e),
            }
        })?,
    )?;
    for (name, setting) in [
        ("encode_max_depth", crate::json::Setting::EncodeDepth),
        ("decode_max_depth", crate::json::Setting::DecodeDepth),
        (
            "encode_invalid_numbers",
            crate::json::Setting::InvalidNumbers,
        ),
        ("encode_keep_buffer", crate::json::Setting::KeepBuffer),
        (
            "decode_invalid_numbers",
            crate::json::Setting::Ignored(true),
        ),
        ("encode_sparse_array", crate::json::Setting::Ignored(false)),
        (
            "encode_number_precision",
            crate::json::Setting::Ignored(false),
        ),
    ] {
        let c = config.clone();
        t.set(
            name,
            lua.create_function(move |lua, args: Variadic<Value>| {
                ok(lua, c.set(setting, args.first()))
            })?,
        )?;
    }
    t.set(
        "null",
        Value::LightUserData(LightUserData(std::ptr::null_mut())),
    )?;
    Ok(t)
}

/// `bit` (LuaBitOp): 32-bit operations on numbers.
pub(crate) fn bit(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    type Op = fn(&[i32]) -> i32;
    let ops: [(&str, usize, Op); 12] = [
        ("tobit", 1, |a| a[0]),
        ("bnot", 1, |a| !a[0]),
        ("band", 1, |a| a.iter().fold(-1, |x, y| x & y)),
        ("bor", 1, |a| a.iter().fold(0, |x, y| x | y)),
        ("bxor", 1, |a| a.iter().fold(0, |x, y| x ^ y)),
        ("lshift", 2, |a| ((a[0] as u32) << (a[1] & 31)) as i32),
        ("rshift", 2, |a| ((a[0] as u32) >> (a[1] & 31)) as i32),
        ("arshift", 2, |a| a[0] >> (a[1] & 31)),
        ("rol", 2, |a| {
            (a[0] as u32).rotate_left((a[1] & 31) as u32) as i32
        }),
        ("ror", 2, |a| {
            (a[0] as u32).rotate_right((a[1] & 31) as u32) as i32
        }),
        ("bswap", 1, |a| a[0].swap_bytes()),
        ("tohex", 1, |a| a[0]),
    ];
    for (name, min, op) in ops {
        t.set(
            name,
            lua.create_function(move |lua, args: Variadic<Value>| {
                if args.len() < min {
                    return fail(
                        lua,
                        &format!(
                            "bad argument #{} to '{name}' (number expected, got no value)",
                            args.len() + 1
                        ),
                    );
                }
                let mut nums = Vec::with_capacity(args.len());
                for (i, a) in args.iter().enumerate() {
                    match to_bit(a) {
                        Some(n) => nums.push(n),
                        None if name == "tohex" && i == 1 => nums.push(8),
                        None => {
                            return fail(
                                lua,
                                &format!(
                                    "bad argument #{} to '{name}' (number expected, got {})",
                                    i + 1,
                                    a.type_name()
                                ),
                            )
                        }
                    }
                }
                if name == "tohex" {
                    return ok(lua, tohex(nums[0], nums.get(1).copied().unwrap_or(8)));
                }
                ok(lua, op(&nums) as f64)
            })?,
        )?;
    }
    Ok(t)
}

/// LuaBitOp's number to 32 bits: the low 32 bits of the integer part.
fn to_bit(v: &Value) -> Option<i32> {
    match v {
        Value::Integer(n) => Some(*n as i32),
        Value::Number(f) if f.is_finite() => Some((f.trunc() as i64) as i32),
        Value::String(s) => s
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()
            .map(|f| f as i64 as i32),
        _ => None,
    }
}

fn tohex(x: i32, n: i32) -> String {
    let upper = n < 0;
    let digits = n.unsigned_abs().clamp(1, 8) as usize;
    let s = format!("{:08x}", x as u32);
    let s = &s[8 - digits..];
    if upper {
        s.to_ascii_uppercase()
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_helpers_match_luabitop() {
        assert_eq!(tohex(255, 8), "000000ff");
        assert_eq!(tohex(-1, -4), "FFFF");
        assert_eq!(to_bit(&Value::Number(4294967295.0)), Some(-1));
        assert_eq!(version_num("7.2.4"), 0x070204);
        assert_eq!(sha1_hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    }
}
