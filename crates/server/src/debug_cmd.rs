//! `DEBUG`, for tests, refused unless `enable-debug-command` is on: Redis's
//! subcommands the Redis test suite uses (OBJECT, PROTOCOL, PAUSE-CRON,
//! SET-ACTIVE-EXPIRE, SLEEP) with Redis's replies, and deltagrid's own
//! fault injection (CLOCK-ADVANCE, CLUSTER-ISOLATE, CLUSTER-HOLD).

use std::sync::atomic::Ordering;

use commands::args::is;
use commands::CmdError;
use keyspace::codec;

use crate::session::{Reply, Session};

const HELP: &[&str] = &[
    "SET-DISABLE-DENY-SCRIPTS <0|1>",
    "    Let scripts run (1) the commands not allowed from scripts (tests only).",
    "CLOCK-ADVANCE <milliseconds>",
    "    Move this node's clock forward (expiry and versions read it).",
    "CLUSTER-HOLD <member> <0|1>",
    "    Hold back (1) or let go (0) the replication batches for a site member.",
    "CLUSTER-ISOLATE <0|1>",
    "    Cut (1) or restore (0) this node's links to the other site members.",
    "OBJECT <key>",
    "    Show low level info about `key` and associated value.",
    "PAUSE-CRON <0|1>",
    "    Stop periodic cron job processing (active expiry).",
    "RELOAD",
    "    Answers OK and leaves the dataset as it is: a node keeps no snapshot to",
    "    save and load again (Redis saves and reloads its RDB file).",
    "PROTOCOL <type>",
    "    Reply with a test value of the specified type. <type> can be: string,",
    "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
    "    true, false.",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Setting it to 0 disables expiring keys in background when they are not",
    "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
    "    default.",
    "SLEEP <seconds>",
    "    Stop the server for <seconds>. Decimals allowed.",
];

pub fn debug(s: &mut Session, a: &[&[u8]], out: Reply) -> Result<(), CmdError> {
    if !s.node.settings.enable_debug_command {
        return Err(CmdError::other(
            "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.",
        ));
    }
    let sub = a[1];
    let argc = a.len();
    if is(sub, "HELP") && argc == 2 {
        commands::help::reply(out, "DEBUG", HELP);
        return Ok(());
    } else if is(sub, "OBJECT") && argc == 3 {
        return object(s, a[2], out);
    } else if is(sub, "PROTOCOL") && argc == 3 {
        return protocol(a[2], out);
    } else if is(sub, "CLOCK-ADVANCE") && argc == 3 {
        let ms = commands::args::int(a[2])?;
        if ms < 0 {
            return Err(CmdError::MustBePositive);
        }
        s.node.clock.advance(ms as u64);
    } else if is(sub, "SET-ACTIVE-EXPIRE") && argc == 3 {
        let on = atoi(a[2]) != 0;
        s.node.runtime.active_expire.store(on, Ordering::Relaxed);
    } else if is(sub, "SET-DISABLE-DENY-SCRIPTS") && argc == 3 {
        let allow = atoi(a[2]) != 0;
        s.node.scripts.allow_denied.store(allow, Ordering::Relaxed);
    } else if is(sub, "RELOAD") && argc == 2 {
        // Nothing to save and load back: the dataset after is the one
        // before, which is what a reload promises.
    } else if is(sub, "PAUSE-CRON") && argc == 3 {
        let paused = atoi(a[2]) != 0;
        s.node.runtime.cron_paused.store(paused, Ordering::Relaxed);
    } else if is(sub, "CLUSTER-ISOLATE") && argc == 3 {
        let on = commands::args::int(a[2])? != 0;
        match &s.node.cluster {
            Some(c) => c.set_isolated(on),
            None => return Err(cluster::cluster_cmd::disabled()),
        }
    } else if is(sub, "CLUSTER-HOLD") && argc == 4 {
        let node = String::from_utf8_lossy(a[2]).into_owned();
        let on = commands::args::int(a[3])? != 0;
        match &s.node.cluster {
            Some(c) if c.set_held(&node, on) => {}
            Some(_) => return Err(CmdError::other(format!("ERR no member named {node}"))),
            None => return Err(cluster::cluster_cmd::disabled()),
        }
    } else if is(sub, "SLEEP") && argc == 3 {
        let secs = commands::args::float(a[2])?.clamp(0.0, 60.0);
        std::thread::sleep(std::time::Duration::from_secs_f64(secs));
    } else {
        return Err(CmdError::SubcommandSyntax {
            cmd: "DEBUG".into(),
            sub: String::from_utf8_lossy(sub).into(),
        });
    }
    out.simple("OK");
    Ok(())
}

/// C's `atoi`, which Redis reads these switches with: optional leading
/// spaces and sign, then the digits there are ("1x" is 1, "x" is 0).
fn atoi(b: &[u8]) -> i64 {
    let text = b.trim_ascii_start();
    let (negative, digits) = match text.first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let n = digits
        .iter()
        .take_while(|c| c.is_ascii_digit())
        .fold(0i64, |n, c| {
            n.wrapping_mul(10).wrapping_add((c - b'0') as i64)
        });
    if negative {
        n.wrapping_neg()
    } else {
        n
    }
}

/// `DEBUG OBJECT key`, in Redis's line shape. `Value at` is where the
/// value is in memory (it stays put while the key is changed in place),
/// the encoding and refcount are what `OBJECT` answers, the serialized
/// length is what the value takes in a change (the partition log,
/// replication, backups); no access time is kept, so `lru` and
/// `lru_seconds_idle` are 0.
fn object(s: &Session, key: &[u8], out: Reply) -> Result<(), CmdError> {
    let ks = &s.node.ks;
    let mut txn = ks.txn([key], s.id);
    let Some(e) = txn.get(key) else {
        return Err(CmdError::NoSuchKey);
    };
    let line = format!(
        "Value at:{:p} refcount:{} encoding:{} serializedlength:{} lru:0 lru_seconds_idle:0",
        &e.value,
        commands::object::refcount(&e.value),
        commands::object::encoding(ks, &e.value),
        codec::value_len(&e.value),
    );
    drop(txn);
    out.simple(&line);
    Ok(())
}

/// `DEBUG PROTOCOL type`: a test value of each reply type, as Redis 7.0
/// sends them (RESP2 gets their RESP2 forms; an attribute is left out,
/// and a push is refused).
fn protocol(kind: &[u8], out: Reply) -> Result<(), CmdError> {
    let kind = String::from_utf8_lossy(kind).to_ascii_lowercase();
    match kind.as_str() {
        "string" => out.bulk(b"Hello World"),
        "integer" => out.int(12345),
        "double" => {
            // Redis's test value, not an approximation of pi.
            #[allow(clippy::approx_constant)]
            let value = 3.141;
            out.double(value)
        }
        "bignum" => out.big_number("1234567999999999999999999999999999999"),
        "null" => out.null(),
        "array" | "set" => {
            if kind == "set" {
                out.set(3);
            } else {
                out.array(3);
            }
            for j in 0..3 {
                out.int(j);
            }
        }
        "map" => {
            out.map(3);
            for j in 0..3 {
                out.int(j);
                out.boolean(j == 1);
            }
        }
        "attrib" => {
            if out.resp3() {
                out.attribute(1);
                out.bulk(b"key-popularity");
                out.array(2);
                out.bulk(b"key:123");
                out.int(90);
            }
            // An attribute is not a reply: a reply follows it.
            out.bulk(b"Some real reply following the attribute");
        }
        "push" => {
            if !out.resp3() {
                return Err(CmdError::other("ERR RESP2 is not supported by this command"));
            }
            out.push(2);
            out.bulk(b"server-cpu-usage");
            out.int(42);
            // A push is not a reply either: clients that drop it still
            // get one.
            out.bulk(b"Some real reply following the push reply");
        }
        "true" => out.boolean(true),
        "false" => out.boolean(false),
        "verbatim" => out.verbatim("txt", b"This is a verbatim\nstring"),
        _ => {
            return Err(CmdError::other(
                "ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
            ))
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::atoi;

    #[test]
    fn switches_read_as_c_atoi() {
        for (text, n) in [
            (&b"1"[..], 1),
            (b"0", 0),
            (b" 12x", 12),
            (b"-3", -3),
            (b"+7", 7),
            (b"x", 0),
            (b"", 0),
        ] {
            assert_eq!(atoi(text), n, "{text:?}");
        }
    }
}
