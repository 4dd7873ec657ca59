//! `cmsgpack`: MessagePack as Redis's lua-cmsgpack writes and reads it.
//! `pack(...)` concatenates its arguments' encodings: integral numbers as
//! the smallest integer form, others as a float32 when exact, else a
//! float64; strings as raw (fixstr, str8/16/32); a table whose keys are
//! exactly 1..n as an array, any other as a map (in the table's own
//! order), nested tables past 16 levels as nil; other values as nil.
//! `unpack(s)` gives every object, `unpack_one(s, offset)` one and the
//! offset after it, `unpack_limit(s, limit, offset)` up to `limit`; the
//! offset is -1 once the input is consumed. Decoding checks every length
//! against the bytes left (the input comes from a script).

use mlua::{IntoLuaMulti, Lua, MultiValue, Table, Value, Variadic};

/// Tables deeper than this are encoded as nil (lua-cmsgpack's limit).
const MAX_NESTING: usize = 16;

type Answer = mlua::Result<MultiValue>;

fn fail(lua: &Lua, msg: &str) -> Answer {
    (false, lua.create_string(msg)?).into_lua_multi(lua)
}

fn ok(values: Vec<Value>) -> Answer {
    let mut m = MultiValue::from_vec(values);
    m.push_front(Value::Boolean(true));
    Ok(m)
}

/// The `cmsgpack` table (functions answering `(ok, ...)`, see `libs`).
pub(crate) fn table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "pack",
        lua.create_function(|lua, args: Variadic<Value>| {
            if args.is_empty() {
                return fail(lua, "MessagePack pack needs input.");
            }
            let mut out = Vec::new();
            for a in args.iter() {
                encode(a, &mut out, 0);
            }
            ok(vec![Value::String(lua.create_string(out)?)])
        })?,
    )?;
    t.set(
        "unpack",
        lua.create_function(|lua, s: mlua::LuaString| {
            let bytes = s.as_bytes();
            let mut r = Reader {
                buf: &bytes,
                pos: 0,
            };
            let mut values = Vec::new();
            while r.pos < bytes.len() {
                match r.value(lua) {
                    Ok(v) => values.push(v),
                    Err(e) => return fail(lua, e),
                }
            }
            ok(values)
        })?,
    )?;
    for (name, limited) in [("unpack_one", false), ("unpack_limit", true)] {
        t.set(
            name,
            lua.create_function(move |lua, args: Variadic<Value>| {
                let Some(Value::String(s)) = args.first() else {
                    return fail(lua, "bad argument #1 (string expected)");
                };
                let number = |v: Option<&Value>| match v {
                    Some(Value::Integer(n)) => Some(*n),
                    Some(Value::Number(f)) => Some(*f as i64),
                    _ => None,
                };
                let (limit, offset) = if limited {
                    (
                        number(args.get(1)).unwrap_or(0),
                        number(args.get(2)).unwrap_or(0),
                    )
                } else {
                    (1, number(args.get(1)).unwrap_or(0))
                };
                let bytes = s.as_bytes();
                if offset < 0 || offset as usize > bytes.len() {
                    return fail(lua, "Start offset greater than input length.");
                }
                let mut r = Reader {
                    buf: &bytes,
                    pos: offset as usize,
                };
                let mut values = vec![Value::Nil];
                while r.pos < bytes.len() && (limit <= 0 || (values.len() as i64) <= limit) {
                    match r.value(lua) {
                        Ok(v) => values.push(v),
                        Err(e) => return fail(lua, e),
                    }
                }
                let next = if r.pos >= bytes.len() {
                    -1
                } else {
                    r.pos as i64
                };
                values[0] = Value::Integer(next);
                ok(values)
            })?,
        )?;
    }
    Ok(t)
}

fn encode(v: &Value, out: &mut Vec<u8>, level: usize) {
    match v {
        Value::Boolean(true) => out.push(0xc3),
        Value::Boolean(false) => out.push(0xc2),
        Value::Integer(n) => int(*n, out),
        Value::Number(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.2e18 => {
            int(*f as i64, out)
        }
        Value::Number(f) => {
            let single = *f as f32;
            if single as f64 == *f {
                out.push(0xca);
                out.extend_from_slice(&single.to_be_bytes());
            } else {
                out.push(0xcb);
                out.extend_from_slice(&f.to_be_bytes());
            }
        }
        Value::String(s) => raw(&s.as_bytes(), out),
        Value::Table(t) if level < MAX_NESTING => table_value(t, out, level),
        _ => out.push(0xc0),
    }
}

fn int(n: i64, out: &mut Vec<u8>) {
    match n {
        0..=127 => out.push(n as u8),
        128..=0xff => out.extend_from_slice(&[0xcc, n as u8]),
        0x100..=0xffff => {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        0x1_0000..=0xffff_ffff => {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        }
        n if n > 0 => {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
        -32..=-1 => out.push(n as i8 as u8),
        -128..=-33 => out.extend_from_slice(&[0xd0, n as i8 as u8]),
        -32768..=-129 => {
            out.push(0xd1);
            out.extend_from_slice(&(n as i16).to_be_bytes());
        }
        -2_147_483_648..=-32769 => {
            out.push(0xd2);
            out.extend_from_slice(&(n as i32).to_be_bytes());
        }
        _ => {
            out.push(0xd3);
            out.extend_from_slice(&n.to_be_bytes());
        }
    }
}

fn raw(s: &[u8], out: &mut Vec<u8>) {
    let n = s.len();
    if n < 32 {
        out.push(0xa0 | n as u8);
    } else if n <= 0xff {
        out.extend_from_slice(&[0xd9, n as u8]);
    } else if n <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

fn header(n: usize, fix: u8, x16: u8, x32: u8, out: &mut Vec<u8>) {
    if n <= 15 {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(x16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(x32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

fn table_value(t: &Table, out: &mut Vec<u8>, level: usize) {
    let pairs: Vec<(Value, Value)> = t.pairs::<Value, Value>().filter_map(Result::ok).collect();
    let mut max = 0usize;
    let is_array = pairs.iter().all(|(k, _)| {
        let i = match k {
            Value::Integer(i) if *i > 0 => *i as usize,
            Value::Number(f) if *f > 0.0 && f.fract() == 0.0 => *f as usize,
            _ => return false,
        };
        max = max.max(i);
        true
    }) && max == pairs.len();
    if is_array {
        header(max, 0x90, 0xdc, 0xdd, out);
        for i in 1..=max {
            let v: Value = t.raw_get(i).unwrap_or(Value::Nil);
            encode(&v, out, level + 1);
        }
    } else {
        header(pairs.len(), 0x80, 0xde, 0xdf, out);
        for (k, v) in &pairs {
            encode(k, out, level + 1);
            encode(v, out, level + 1);
        }
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

const MISSING: &str = "Missing bytes in input.";
const BAD: &str = "Bad data format in input.";

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], &'static str> {
        if n > self.buf.len() - self.pos {
            return Err(MISSING);
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn uint(&mut self, n: usize) -> Result<u64, &'static str> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, b| (acc << 8) | *b as u64))
    }

    fn value(&mut self, lua: &Lua) -> Result<Value, &'static str> {
        let b = self.take(1)?[0];
        let number = |n: f64| Value::Number(n);
        Ok(match b {
            0x00..=0x7f => number(b as f64),
            0x80..=0x8f => self.map(lua, (b & 0x0f) as usize)?,
            0x90..=0x9f => self.array(lua, (b & 0x0f) as usize)?,
            0xa0..=0xbf => self.string(lua, (b & 0x1f) as usize)?,
            0xc0 => Value::Nil,
            0xc2 => Value::Boolean(false),
            0xc3 => Value::Boolean(true),
            0xc4 | 0xd9 => {
                let n = self.uint(1)? as usize;
                self.string(lua, n)?
            }
            0xc5 | 0xda => {
                let n = self.uint(2)? as usize;
                self.string(lua, n)?
            }
            0xc6 | 0xdb => {
                let n = self.uint(4)? as usize;
                self.string(lua, n)?
            }
            0xca => number(f32::from_bits(self.uint(4)? as u32) as f64),
            0xcb => number(f64::from_bits(self.uint(8)?)),
            0xcc => number(self.uint(1)? as f64),
            0xcd => number(self.uint(2)? as f64),
            0xce => number(self.uint(4)? as f64),
            0xcf => number(self.uint(8)? as f64),
            0xd0 => number(self.uint(1)? as u8 as i8 as f64),
            0xd1 => number(self.uint(2)? as u16 as i16 as f64),
            0xd2 => number(self.uint(4)? as u32 as i32 as f64),
            0xd3 => number(self.uint(8)? as i64 as f64),
            0xdc => {
                let n = self.uint(2)? as usize;
                self.array(lua, n)?
            }
            0xdd => {
                let n = self.uint(4)? as usize;
                self.array(lua, n)?
            }
            0xde => {
                let n = self.uint(2)? as usize;
                self.map(lua, n)?
            }
            0xdf => {
                let n = self.uint(4)? as usize;
                self.map(lua, n)?
            }
            0xe0..=0xff => number(b as i8 as f64),
            _ => return Err(BAD),
        })
    }

    fn string(&mut self, lua: &Lua, n: usize) -> Result<Value, &'static str> {
        let bytes = self.take(n)?;
        lua.create_string(bytes).map(Value::String).map_err(|_| BAD)
    }

    fn array(&mut self, lua: &Lua, n: usize) -> Result<Value, &'static str> {
        // Every element takes a byte at least: a forged count fails here.
        if n > self.buf.len() - self.pos {
            return Err(MISSING);
        }
        let t = lua.create_table_with_capacity(n, 0).map_err(|_| BAD)?;
        for i in 1..=n {
            let v = self.value(lua)?;
            t.raw_set(i, v).map_err(|_| BAD)?;
        }
        Ok(Value::Table(t))
    }

    fn map(&mut self, lua: &Lua, n: usize) -> Result<Value, &'static str> {
        if n.saturating_mul(2) > self.buf.len() - self.pos {
            return Err(MISSING);
        }
        let t = lua.create_table_with_capacity(0, n).map_err(|_| BAD)?;
        for _ in 0..n {
            let k = self.value(lua)?;
            let v = self.value(lua)?;
            if !matches!(k, Value::Nil) {
                t.raw_set(k, v).map_err(|_| BAD)?;
            }
        }
        Ok(Value::Table(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(v: &Value) -> String {
        let mut out = Vec::new();
        encode(v, &mut out, 0);
        out.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn numbers_as_lua_cmsgpack_writes_them() {
        assert_eq!(hex(&Value::Number(0.1)), "cb3fb999999999999a");
        assert_eq!(hex(&Value::Number(-1099511627776.0)), "d3ffffff0000000000");
        assert_eq!(hex(&Value::Number(0.5)), "ca3f000000");
        assert_eq!(hex(&Value::Integer(200)), "ccc8");
        assert_eq!(hex(&Value::Integer(-5)), "fb");
    }

    #[test]
    fn forged_input_fails_without_allocating_its_counts() {
        let lua = Lua::new();
        for bad in [
            &b"\xdd\xff\xff\xff\xff"[..],
            b"\xdb\xff\xff\xff\xff",
            b"\xc1",
            b"\xcd\x01",
        ] {
            let mut r = Reader { buf: bad, pos: 0 };
            assert!(r.value(&lua).is_err(), "{bad:?}");
        }
        let mut out = Vec::new();
        encode(&Value::Number(1.5), &mut out, 0);
        let mut r = Reader { buf: &out, pos: 0 };
        assert_eq!(r.value(&lua).unwrap(), Value::Number(1.5));
    }
}
