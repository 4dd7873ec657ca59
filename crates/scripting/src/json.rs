//! `cjson.encode` / `cjson.decode` with lua-cjson's rules: a table whose
//! keys are exactly 1..n is an array, any other an object (number keys
//! written as strings), an empty table `{}`; numbers as `%.14g`; `/` is
//! escaped; JSON null decodes to `cjson.null`. Decoding goes through
//! serde_json and is bounded in depth like cjson (1000).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use mlua::{LightUserData, Lua, Value};

/// lua-cjson's settings that change what encode and decode do.
pub(crate) struct Config {
    encode_depth: AtomicUsize,
    decode_depth: AtomicUsize,
    invalid_numbers: AtomicBool,
    keep_buffer: AtomicBool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            encode_depth: AtomicUsize::new(1000),
            decode_depth: AtomicUsize::new(1000),
            invalid_numbers: AtomicBool::new(false),
            keep_buffer: AtomicBool::new(true),
        }
    }
}

#[derive(Clone, Copy)]
pub(crate) enum Setting {
    EncodeDepth,
    DecodeDepth,
    InvalidNumbers,
    KeepBuffer,
    /// Accepted, changes nothing; answers this.
    Ignored(bool),
}

impl Config {
    /// `cjson.<setting>(value)`: sets it when given, answers what it is.
    pub(crate) fn set(&self, setting: Setting, v: Option<&Value>) -> Value {
        let number = |v: Option<&Value>| match v {
            Some(Value::Integer(n)) if *n > 0 => Some(*n as usize),
            Some(Value::Number(f)) if *f >= 1.0 => Some(*f as usize),
            _ => None,
        };
        let flag = |v: Option<&Value>| match v {
            Some(Value::Boolean(b)) => Some(*b),
            Some(Value::String(s)) => Some(&*s.as_bytes() == b"on"),
            _ => None,
        };
        match setting {
            Setting::EncodeDepth | Setting::DecodeDepth => {
                let cell = match setting {
                    Setting::EncodeDepth => &self.encode_depth,
                    _ => &self.decode_depth,
                };
                if let Some(n) = number(v) {
                    cell.store(n, Ordering::Relaxed);
                }
                Value::Integer(cell.load(Ordering::Relaxed) as i64)
            }
            Setting::InvalidNumbers | Setting::KeepBuffer => {
                let cell = match setting {
                    Setting::InvalidNumbers => &self.invalid_numbers,
                    _ => &self.keep_buffer,
                };
                if let Some(b) = flag(v) {
                    cell.store(b, Ordering::Relaxed);
                }
                Value::Boolean(cell.load(Ordering::Relaxed))
            }
            Setting::Ignored(b) => Value::Boolean(b),
        }
    }
}

pub(crate) fn encode(
    v: &Value,
    out: &mut Vec<u8>,
    depth: usize,
    config: &Config,
) -> Result<(), String> {
    match v {
        Value::Nil => put(out, "null"),
        Value::LightUserData(p) if p.0.is_null() => put(out, "null"),
        Value::Boolean(b) => put(out, if *b { "true" } else { "false" }),
        Value::Integer(n) => put(out, &format_g14(*n as f64)),
        Value::Number(f) if !f.is_finite() => {
            if !config.invalid_numbers.load(Ordering::Relaxed) {
                return Err("Cannot serialise number: must not be NaN or Inf".into());
            }
            put(
                out,
                if f.is_nan() {
                    "nan"
                } else if *f > 0.0 {
                    "inf"
                } else {
                    "-inf"
                },
            )
        }
        Value::Number(f) => put(out, &format_g14(*f)),
        Value::String(s) => string(&s.as_bytes(), out),
        Value::Table(_) if depth > config.encode_depth.load(Ordering::Relaxed) => {
            return Err(format!("Cannot serialise, excessive nesting ({depth})"));
        }
        Value::Table(t) => {
            let pairs: Vec<(Value, Value)> = t
                .clone()
                .pairs::<Value, Value>()
                .collect::<mlua::Result<_>>()
                .map_err(|e| e.to_string())?;
            let n = pairs.len();
            let is_array = n > 0
                && pairs.iter().all(|(k, _)| match k {
                    Value::Integer(i) => *i >= 1 && (*i as usize) <= n,
                    Value::Number(f) => f.fract() == 0.0 && *f >= 1.0 && (*f as usize) <= n,
                    _ => false,
                });
            if is_array {
                out.push(b'[');
                for i in 1..=n {
                    if i > 1 {
                        out.push(b',');
                    }
                    let item: Value = t.raw_get(i).map_err(|e| e.to_string())?;
                    encode(&item, out, depth + 1, config)?;
                }
                out.push(b']');
            } else {
                out.push(b'{');
                for (i, (k, v)) in pairs.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    match k {
                        Value::String(s) => string(&s.as_bytes(), out),
                        Value::Integer(n) => string(format_g14(*n as f64).as_bytes(), out),
                        Value::Number(f) => string(format_g14(*f).as_bytes(), out),
                        _ => {
                            return Err(
                                "Cannot serialise table: table key must be a number or string"
                                    .into(),
                            )
                        }
                    }
                    out.push(b':');
                    encode(v, out, depth + 1, config)?;
                }
                out.push(b'}');
            }
        }
        other => {
            return Err(format!(
                "Cannot serialise {}: type not supported",
                other.type_name()
            ))
        }
    }
    Ok(())
}

fn string(bytes: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in bytes {
        match b {
            b'"' => put(out, "\\\""),
            b'\\' => put(out, "\\\\"),
            b'/' => put(out, "\\/"),
            b'\n' => put(out, "\\n"),
            b'\r' => put(out, "\\r"),
            b'\t' => put(out, "\\t"),
            0x08 => put(out, "\\b"),
            0x0c => put(out, "\\f"),
            0..=0x1f | 0x7f => put(out, &format!("\\u{b:04x}")),
            // Other bytes go through as they are (cjson does not check UTF-8).
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

fn put(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(s.as_bytes());
}

/// `%.14g`, as lua-cjson prints numbers.
pub(crate) fn format_g14(f: f64) -> String {
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let exp = f.abs().log10().floor() as i32;
    if (-4..14).contains(&exp) {
        let decimals = (13 - exp).max(0) as usize;
        let s = format!("{f:.decimals$}");
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    } else {
        let s = format!("{f:.13e}");
        let (mantissa, e) = s.split_once('e').unwrap_or((&s, "0"));
        let mantissa = if mantissa.contains('.') {
            mantissa.trim_end_matches('0').trim_end_matches('.')
        } else {
            mantissa
        };
        let e: i32 = e.parse().unwrap_or(0);
        format!("{mantissa}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
    }
}

pub(crate) fn decode(lua: &Lua, text: &[u8], config: &Config) -> Result<Value, String> {
    let v: serde_json::Value = serde_json::from_slice(text).map_err(|e| {
        format!(
            "Expected value but found invalid token at character {}",
            e.column().max(1)
        )
    })?;
    let max = config.decode_depth.load(Ordering::Relaxed);
    if nesting(&v) > max {
        return Err(format!(
            "Found too many nested data structures ({})",
            max + 1
        ));
    }
    to_lua(lua, v).map_err(|e| e.to_string())
}

fn nesting(v: &serde_json::Value) -> usize {
    match v {
        serde_json::Value::Array(items) => 1 + items.iter().map(nesting).max().unwrap_or(0),
        serde_json::Value::Object(map) => 1 + map.values().map(nesting).max().unwrap_or(0),
        _ => 0,
    }
}

fn to_lua(lua: &Lua, v: serde_json::Value) -> mlua::Result<Value> {
    Ok(match v {
        serde_json::Value::Null => Value::LightUserData(LightUserData(std::ptr::null_mut())),
        serde_json::Value::Bool(b) => Value::Boolean(b),
        serde_json::Value::Number(n) => Value::Number(n.as_f64().unwrap_or(0.0)),
        serde_json::Value::String(s) => Value::String(lua.create_string(s)?),
        serde_json::Value::Array(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.into_iter().enumerate() {
                t.raw_set(i + 1, to_lua(lua, item)?)?;
            }
            Value::Table(t)
        }
        serde_json::Value::Object(map) => {
            let t = lua.create_table_with_capacity(0, map.len())?;
            for (k, v) in map {
                t.raw_set(k, to_lua(lua, v)?)?;
            }
            Value::Table(t)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_as_lua_cjson_does() {
        assert_eq!(format_g14(1.0), "1");
        assert_eq!(format_g14(-2.5), "-2.5");
        assert_eq!(format_g14(0.1), "0.1");
        assert_eq!(format_g14(1e15), "1e+15");
        assert_eq!(format_g14(123456789012345.0), "1.2345678901234e+14");
        assert_eq!(format_g14(12345678901234.0), "12345678901234");
        assert_eq!(format_g14(0.00001), "1e-05");
        assert_eq!(format_g14(1.0 / 3.0), "0.33333333333333");
    }

    #[test]
    fn a_table_round_trips() {
        let lua = Lua::new();
        let config = Config::default();
        let v = decode(&lua, br#"{"a":[1,2,{"b":null}],"c":"x/y"}"#, &config).unwrap();
        let mut out = Vec::new();
        encode(&v, &mut out, 1, &config).unwrap();
        let back: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert_eq!(back, serde_json::json!({"a":[1,2,{"b":null}],"c":"x/y"}));
        assert!(out.contains(r#""x\/y""#));
        assert!(decode(&lua, b"{bad", &config).is_err());
        config.set(Setting::DecodeDepth, Some(&Value::Integer(1)));
        assert!(decode(&lua, br#"{"a":[1]}"#, &config).is_err());
        assert!(decode(&lua, br#"[1]"#, &config).is_ok());
    }
}
