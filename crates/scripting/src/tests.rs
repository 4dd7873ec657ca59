//! The engine against a small fake host: conversions, errors as Redis 7
//! words them, the sandbox, SCRIPT KILL.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use resp::{Frame, ReplyWriter};

use crate::{Engine, Host, Watchdog};

#[derive(Default)]
struct Fake(HashMap<Vec<u8>, Vec<u8>>);

impl Host for Fake {
    fn call(&mut self, args: &[&[u8]], _resp3: bool) -> Frame {
        let name = String::from_utf8_lossy(args[0]).to_ascii_lowercase();
        match (name.as_str(), args.len()) {
            ("set", 3) => {
                self.0.insert(args[1].to_vec(), args[2].to_vec());
                Frame::Simple("OK".into())
            }
            ("get", 2) => self
                .0
                .get(args[1])
                .map_or(Frame::Null, |v| Frame::Bulk(Bytes::from(v.clone()))),
            ("incr", 2) => {
                let v = self.0.entry(args[1].to_vec()).or_insert(b"0".to_vec());
                let n: i64 = String::from_utf8_lossy(v).parse::<i64>().unwrap() + 1;
                *v = n.to_string().into_bytes();
                Frame::Int(n)
            }
            ("lrange", _) => Frame::Array(vec![Frame::Bulk("a".into()), Frame::Bulk("b".into())]),
            ("hget", _) => Frame::Error(
                "WRONGTYPE Operation against a key holding the wrong kind of value".into(),
            ),
            ("set" | "get" | "incr", _) => {
                Frame::Error("ERR Wrong number of args calling Redis command from script".into())
            }
            _ => Frame::Error("ERR Unknown Redis command called from script".into()),
        }
    }
}

fn engine() -> Engine {
    Engine::new(Arc::new(Watchdog::default()), "7.2.4", false).unwrap()
}

fn eval(e: &mut Engine, host: &mut Fake, body: &str, keys: &[&str], argv: &[&str]) -> Frame {
    let sha = match e.create(body.as_bytes(), false) {
        Ok(sha) => sha,
        Err(err) => return Frame::Error(err),
    };
    let keys: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
    let argv: Vec<&[u8]> = argv.iter().map(|k| k.as_bytes()).collect();
    let mut buf = BytesMut::new();
    e.run(
        sha.as_bytes(),
        &keys,
        &argv,
        host,
        &mut ReplyWriter::new(&mut buf, false),
    );
    resp::decode_reply(&mut buf, &resp::Limits::default())
        .unwrap()
        .unwrap()
}

fn err(f: Frame) -> String {
    match f {
        Frame::Error(e) => e,
        other => panic!("not an error: {other:?}"),
    }
}

#[test]
fn values_convert_both_ways_as_redis() {
    let (mut e, mut h) = (engine(), Fake::default());
    assert_eq!(eval(&mut e, &mut h, "return 3.99", &[], &[]), Frame::Int(3));
    assert_eq!(eval(&mut e, &mut h, "return true", &[], &[]), Frame::Int(1));
    assert_eq!(eval(&mut e, &mut h, "return false", &[], &[]), Frame::Null);
    assert_eq!(
        eval(&mut e, &mut h, "return {1, 'x', {2}, nil, 5}", &[], &[]),
        Frame::Array(vec![
            Frame::Int(1),
            Frame::Bulk("x".into()),
            Frame::Array(vec![Frame::Int(2)])
        ])
    );
    assert_eq!(
        eval(
            &mut e,
            &mut h,
            "return redis.call('set', KEYS[1], ARGV[1])",
            &["k"],
            &["v"]
        ),
        Frame::Simple("OK".into())
    );
    assert_eq!(
        eval(
            &mut e,
            &mut h,
            "return {redis.call('get', 'k'), redis.call('get', 'nope')}",
            &[],
            &[]
        ),
        Frame::Array(vec![Frame::Bulk("v".into()), Frame::Null])
    );
    assert_eq!(
        eval(
            &mut e,
            &mut h,
            "local n; for i = 1, 10 do n = redis.call('incr', 'c') end return n",
            &[],
            &[]
        ),
        Frame::Int(10)
    );
    assert_eq!(
        eval(
            &mut e,
            &mut h,
            "return redis.call('set', 'n', 1.5)",
            &[],
            &[]
        ),
        Frame::Simple("OK".into())
    );
    assert_eq!(h.0[&b"n"[..]], b"1.5");
    assert_eq!(
        err(eval(&mut e, &mut h, "return {err='My Error'}", &[], &[])),
        "My Error"
    );
    assert_eq!(
        err(eval(
            &mut e,
            &mut h,
            "return redis.error_reply('My Error')",
            &[],
            &[]
        )),
        "My Error"
    );
    assert_eq!(
        eval(
            &mut e,
            &mut h,
            "return redis.status_reply('FINE')",
            &[],
            &[]
        ),
        Frame::Simple("FINE".into())
    );
    assert_eq!(
        eval(&mut e, &mut h, "return redis.sha1hex('')", &[], &[]),
        Frame::Bulk("da39a3ee5e6b4b0d3255bfef95601890afd80709".into())
    );
    assert_eq!(
        eval(
            &mut e,
            &mut h,
            "return cjson.encode(cjson.decode('[1,2,\"a/b\"]'))",
            &[],
            &[]
        ),
        Frame::Bulk(Bytes::from_static(br#"[1,2,"a\/b"]"#))
    );
    assert_eq!(
        eval(&mut e, &mut h, "return bit.band(0xff, 0x0f)", &[], &[]),
        Frame::Int(15)
    );
    assert_eq!(
        eval(&mut e, &mut h, "return bit.tohex(255)", &[], &[]),
        Frame::Bulk("000000ff".into())
    );
    assert_eq!(
        eval(&mut e, &mut h, "return ('abc'):upper()", &[], &[]),
        Frame::Bulk("ABC".into())
    );
}

#[test]
fn errors_say_what_redis_says() {
    let (mut e, mut h) = (engine(), Fake::default());
    let body = "return redis.call('hget', 'k', 'f')";
    let sha = crate::sha1_hex(body.as_bytes());
    assert_eq!(
        err(eval(&mut e, &mut h, body, &[], &[])),
        format!("WRONGTYPE Operation against a key holding the wrong kind of value script: {sha}, on @user_script:1.")
    );
    let e1 = err(eval(
        &mut e,
        &mut h,
        "return redis.pcall('hget', 'k', 'f')",
        &[],
        &[],
    ));
    assert_eq!(
        e1,
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    let e2 = err(eval(
        &mut e,
        &mut h,
        "\nreturn redis.call('nosuch')",
        &[],
        &[],
    ));
    assert!(
        e2.starts_with("ERR Unknown Redis command called from script script: "),
        "{e2}"
    );
    assert!(e2.ends_with("on @user_script:2."), "{e2}");
    let e3 = err(eval(
        &mut e,
        &mut h,
        "return redis.call('get', {})",
        &[],
        &[],
    ));
    assert!(
        e3.starts_with("ERR Lua redis lib command arguments must be strings or integers script:"),
        "{e3}"
    );
    let e4 = err(eval(&mut e, &mut h, "return a", &[], &[]));
    assert!(
        e4.starts_with(
            "ERR user_script:1: Script attempted to access nonexistent global variable 'a' script:"
        ),
        "{e4}"
    );
    let e5 = err(eval(&mut e, &mut h, "a = 1", &[], &[]));
    assert!(
        e5.starts_with("ERR user_script:1: Attempt to modify a readonly table script:"),
        "{e5}"
    );
    for trick in [
        "redis.call = function() return 1 end",
        "cjson.encode = 1",
        "bit.lshift = 1",
        "setmetatable(_G, {})",
        "local g = getmetatable(_G) g.__index = {}",
        "_G = {}",
        "redis = 1",
    ] {
        let msg = err(eval(&mut e, &mut h, trick, &[], &[]));
        assert!(
            msg.contains("Attempt to modify a readonly table"),
            "{trick}: {msg}"
        );
    }
    for gone in ["print", "loadfile", "dofile", "os", "io", "require"] {
        let msg = err(eval(&mut e, &mut h, &format!("return {gone}"), &[], &[]));
        assert!(
            msg.contains(&format!("nonexistent global variable '{gone}'")),
            "{msg}"
        );
    }
    let e6 = err(eval(
        &mut e,
        &mut h,
        "return loadstring(string.dump(function() return 1 end))()",
        &[],
        &[],
    ));
    assert!(e6.contains("attempt to call a nil value"), "{e6}");
    let e7 = err(eval(&mut e, &mut h, "error('boom')", &[], &[]));
    assert!(e7.starts_with("ERR user_script:1: boom script:"), "{e7}");
    let e8 = err(eval(&mut e, &mut h, "return (", &[], &[]));
    assert!(
        e8.starts_with("ERR Error compiling script (new function): user_script:1:"),
        "{e8}"
    );
    assert_eq!(
        eval(
            &mut e,
            &mut h,
            "local ok, m = pcall(function() redis.call('hget','k','f') end) return m",
            &[],
            &[]
        ),
        Frame::Bulk("WRONGTYPE Operation against a key holding the wrong kind of value".into())
    );
}

#[test]
fn a_killed_script_stops_even_inside_pcall() {
    let wd = Arc::new(Watchdog::default());
    let mut e = Engine::new(wd.clone(), "7.2.4", false).unwrap();
    let mut h = Fake::default();
    let killer = std::thread::spawn(move || {
        while wd.kill(true).is_err() {
            std::thread::yield_now();
        }
    });
    let msg = err(eval(
        &mut e,
        &mut h,
        "while true do pcall(function() while true do end end) end",
        &[],
        &[],
    ));
    killer.join().unwrap();
    assert!(
        msg.starts_with("ERR Script killed by user with SCRIPT KILL..."),
        "{msg}"
    );
    // The engine serves the next script.
    assert_eq!(eval(&mut e, &mut h, "return 1", &[], &[]), Frame::Int(1));
}
