//! Values across the Lua boundary, by Redis 7's rules.
//!
//! A command's reply becomes a Lua value ([`reply_to_lua`]): integers are
//! numbers, bulk strings strings, a RESP2 null `false`, arrays tables,
//! a status `{ok = text}` and an error `{err = text}`; after
//! `redis.setresp(3)` maps, sets, doubles, booleans and big numbers have
//! their own forms (`{map = ...}`, `{set = ...}`, `{double = n}`...).
//!
//! What a script returns becomes the reply ([`write_reply`]): a number is
//! truncated to an integer, `true` is 1, `false` and `nil` are null, a
//! table with `err`/`ok`/`double`/`big_number`/`map`/`set`
//! (or `verbatim_string`) is that reply and any other table an array up to
//! its first nil.

use mlua::{Lua, Table, Value};
use resp::{Frame, ReplyWriter};

/// Deepest table nesting a script's reply may have (Redis stops at the Lua
/// stack's limit).
const MAX_DEPTH: usize = 64;

/// One reply as the script sees it.
pub(crate) fn reply_to_lua(lua: &Lua, frame: Frame, resp3: bool) -> mlua::Result<Value> {
    Ok(match frame {
        Frame::Int(n) => Value::Number(n as f64),
        Frame::Bulk(b) => Value::String(lua.create_string(&b)?),
        Frame::Null if resp3 => Value::Nil,
        Frame::Null => Value::Boolean(false),
        Frame::Simple(s) => single(lua, "ok", Value::String(lua.create_string(s)?))?,
        Frame::Error(s) => single(lua, "err", Value::String(lua.create_string(s)?))?,
        Frame::Array(items) | Frame::Push(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.into_iter().enumerate() {
                t.raw_set(i + 1, reply_to_lua(lua, item, resp3)?)?;
            }
            Value::Table(t)
        }
        Frame::Map(pairs) => {
            let m = lua.create_table_with_capacity(0, pairs.len())?;
            for (k, v) in pairs {
                m.raw_set(reply_to_lua(lua, k, resp3)?, reply_to_lua(lua, v, resp3)?)?;
            }
            single(lua, "map", Value::Table(m))?
        }
        Frame::Set(items) => {
            let s = lua.create_table_with_capacity(0, items.len())?;
            for item in items {
                s.raw_set(reply_to_lua(lua, item, resp3)?, true)?;
            }
            single(lua, "set", Value::Table(s))?
        }
        Frame::Double(f) => single(lua, "double", Value::Number(f))?,
        Frame::Boolean(b) => Value::Boolean(b),
        Frame::BigNumber(s) => single(lua, "big_number", Value::String(lua.create_string(s)?))?,
        Frame::Verbatim(format, data) => {
            let v = lua.create_table()?;
            v.raw_set("format", format)?;
            v.raw_set("string", lua.create_string(&data)?)?;
            single(lua, "verbatim_string", Value::Table(v))?
        }
    })
}

/// `{field = value}`.
pub(crate) fn single(lua: &Lua, field: &str, value: Value) -> mlua::Result<Value> {
    let t = lua.create_table_with_capacity(0, 1)?;
    t.raw_set(field, value)?;
    Ok(Value::Table(t))
}

/// The reply for what a script returned; `resp3`: the script chose RESP3
/// (`redis.setresp(3)`), its booleans are booleans.
pub(crate) fn write_reply(value: &Value, out: &mut ReplyWriter, resp3: bool) {
    Writer { out, resp3 }.value(value, 0)
}

struct Writer<'a, 'b> {
    out: &'a mut ReplyWriter<'b>,
    resp3: bool,
}

impl Writer<'_, '_> {
    fn value(&mut self, value: &Value, depth: usize) {
        let out = &mut *self.out;
        match value {
            Value::String(s) => out.bulk(&s.as_bytes()),
            Value::Boolean(b) if self.resp3 => out.boolean(*b),
            Value::Boolean(true) => out.int(1),
            Value::Integer(n) => out.int(*n),
            Value::Number(f) => out.int(*f as i64),
            Value::Table(t) if depth >= MAX_DEPTH => {
                let _ = t;
                out.error("ERR reached lua stack limit")
            }
            Value::Table(t) => self.table(t, depth),
            _ => out.null(),
        }
    }

    fn table(&mut self, t: &Table, depth: usize) {
        let out = &mut *self.out;
        if let Ok(Value::String(e)) = t.raw_get::<Value>("err") {
            return out.error(&reply_error_text(&e.to_string_lossy()));
        }
        if let Ok(Value::String(s)) = t.raw_get::<Value>("ok") {
            return out.simple(&s.to_string_lossy().replace(['\r', '\n'], " "));
        }
        match t.raw_get::<Value>("double") {
            Ok(Value::Number(f)) => return out.double(f),
            Ok(Value::Integer(n)) => return out.double(n as f64),
            _ => {}
        }
        if let Ok(Value::Table(v)) = t.raw_get::<Value>("verbatim_string") {
            let format = v.raw_get::<mlua::LuaString>("format").ok();
            let text = v.raw_get::<mlua::LuaString>("string").ok();
            if let (Some(format), Some(text)) = (format, text) {
                let format = format.to_string_lossy();
                if format.len() == 3 {
                    return out.verbatim(&format, &text.as_bytes());
                }
            }
        }
        if let Ok(Value::String(s)) = t.raw_get::<Value>("big_number") {
            return out.big_number(&s.to_string_lossy().replace(['\r', '\n'], " "));
        }
        if let Ok(Value::Table(m)) = t.raw_get::<Value>("map") {
            let pairs: Vec<(Value, Value)> =
                m.pairs::<Value, Value>().filter_map(Result::ok).collect();
            out.map(pairs.len());
            for (k, v) in &pairs {
                self.value(k, depth + 1);
                self.value(v, depth + 1);
            }
            return;
        }
        if let Ok(Value::Table(s)) = t.raw_get::<Value>("set") {
            let members: Vec<Value> = s
                .pairs::<Value, Value>()
                .filter_map(Result::ok)
                .map(|(k, _)| k)
                .collect();
            out.set(members.len());
            for m in &members {
                self.value(m, depth + 1);
            }
            return;
        }
        let mut items = Vec::new();
        for i in 1.. {
            match t.raw_get::<Value>(i) {
                Ok(Value::Nil) | Err(_) => break,
                Ok(v) => items.push(v),
            }
        }
        out.array(items.len());
        for v in &items {
            self.value(v, depth + 1);
        }
    }
}

/// An error as a client receives it: one line.
pub(crate) fn reply_error_text(e: &str) -> String {
    e.replace(['\r', '\n'], " ")
}

/// A Redis error in the form Lua keeps it (`luaPushErrorBuff`): "-CODE
/// message" loses its dash, a message without a code gets "ERR".
pub fn lua_error_text(e: &str) -> String {
    let e = e.trim_end_matches(['\r', '\n']);
    match e.strip_prefix('-') {
        Some(rest) if rest.contains(' ') => rest.to_string(),
        Some(rest) => format!("ERR {rest}"),
        None => format!("ERR {e}"),
    }
}
