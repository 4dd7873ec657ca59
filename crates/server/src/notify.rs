//! Keyspace notifications, as Redis's `notify-keyspace-events`: after each
//! command (and each active expiry pass) the notices the keyspace left
//! ([`keyspace::notices`]) become messages on `__keyspace@0__:<key>`
//! (payload: the event) and `__keyevent@0__:<event>` (payload: the key),
//! for the classes switched on. Like Redis Cluster, a node publishes the
//! events of its own keys to its own subscribers.

use std::sync::atomic::{AtomicU32, Ordering};

use keyspace::notices::{take_notices, Notice, Noticed};

use crate::node::Node;

pub const KEYSPACE: u32 = 1 << 0; // K
pub const KEYEVENT: u32 = 1 << 1; // E
pub const GENERIC: u32 = 1 << 2; // g
pub const STRING: u32 = 1 << 3; // $
pub const LIST: u32 = 1 << 4; // l
pub const SET: u32 = 1 << 5; // s
pub const HASH: u32 = 1 << 6; // h
pub const ZSET: u32 = 1 << 7; // z
pub const EXPIRED: u32 = 1 << 8; // x
pub const EVICTED: u32 = 1 << 9; // e
pub const STREAM: u32 = 1 << 10; // t
pub const KEY_MISS: u32 = 1 << 11; // m
pub const MODULE: u32 = 1 << 13; // d
pub const NEW: u32 = 1 << 14; // n
/// `A`: every class but key misses and new keys.
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

const CLASSES: [(u32, char); 11] = [
    (GENERIC, 'g'),
    (STRING, '$'),
    (LIST, 'l'),
    (SET, 's'),
    (HASH, 'h'),
    (ZSET, 'z'),
    (EXPIRED, 'x'),
    (EVICTED, 'e'),
    (STREAM, 't'),
    (MODULE, 'd'),
    (NEW, 'n'),
];

/// The classes of `notify-keyspace-events` text; None for an unknown letter.
pub fn parse(text: &str) -> Option<u32> {
    text.chars().try_fold(0, |flags, c| {
        let f = match c {
            'A' => ALL,
            'K' => KEYSPACE,
            'E' => KEYEVENT,
            'm' => KEY_MISS,
            _ => CLASSES.iter().find(|(_, l)| *l == c)?.0,
        };
        Some(flags | f)
    })
}

/// The text CONFIG GET shows for `flags` (Redis's order: `A` or the
/// classes, then `K`, `E`, `m`).
pub fn format(flags: u32) -> String {
    let mut s = String::new();
    if flags & ALL == ALL {
        s.push('A');
    } else {
        s.extend(
            CLASSES
                .iter()
                .filter(|(f, _)| flags & f != 0)
                .map(|(_, c)| c),
        );
    }
    for (f, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & f != 0 {
            s.push(c);
        }
    }
    s
}

/// The node's setting; events are collected only while it names a class
/// and a channel kind (K or E).
#[derive(Default)]
pub struct KeyspaceEvents {
    flags: AtomicU32,
}

impl KeyspaceEvents {
    pub fn flags(&self) -> u32 {
        self.flags.load(Ordering::Relaxed)
    }

    pub fn set(&self, node_ks: &keyspace::Keyspace, flags: u32) {
        self.flags.store(flags, Ordering::Relaxed);
        let on = flags & (KEYSPACE | KEYEVENT) != 0 && flags & !(KEYSPACE | KEYEVENT) != 0;
        node_ks.set_notices(on);
        if !on {
            take_notices();
        }
    }

    pub fn on(&self) -> bool {
        let f = self.flags();
        f & (KEYSPACE | KEYEVENT) != 0 && f & !(KEYSPACE | KEYEVENT) != 0
    }
}

/// Publishes the events of what `cmd` (with `args`; empty for active
/// expiry) did, in order.
pub fn publish(node: &Node, cmd: &str, args: &[&[u8]]) {
    let notices = take_notices();
    if notices.is_empty() {
        return;
    }
    let flags = node.events.flags();
    let mut events = Vec::new();
    for n in &notices {
        events.clear();
        events_of(cmd, args, n, &mut events);
        for &(class, event) in &events {
            if flags & class == 0 {
                continue;
            }
            if flags & KEYSPACE != 0 {
                let mut channel = b"__keyspace@0__:".to_vec();
                channel.extend_from_slice(&n.key);
                node.pubsub
                    .publish(&node.clients, &channel, event.as_bytes());
            }
            if flags & KEYEVENT != 0 {
                let channel = format!("__keyevent@0__:{event}");
                node.pubsub
                    .publish(&node.clients, channel.as_bytes(), &n.key);
            }
        }
    }
}

/// Redis's event names for a notice, by the command that caused it.
fn events_of(cmd: &str, args: &[&[u8]], n: &Notice, out: &mut Vec<(u32, &'static str)>) {
    let written = !matches!(
        n.what,
        Noticed::Deleted | Noticed::Expired | Noticed::Evicted
    );
    if n.created && written {
        out.push((NEW, "new"));
    }
    match n.what {
        Noticed::Expired => out.push((EXPIRED, "expired")),
        Noticed::Evicted => out.push((EVICTED, "evicted")),
        Noticed::Deleted => out.push((
            GENERIC,
            match cmd {
                "rename" | "renamenx" => "rename_from",
                _ => "del",
            },
        )),
        Noticed::Set { expire_at } => {
            out.extend(string_event(cmd));
            if expire_at != 0 && sets_ttl(cmd, args) {
                out.push((GENERIC, "expire"));
            }
        }
        Noticed::Str => out.extend(string_event(cmd)),
        Noticed::HashSet => out.push((
            HASH,
            match cmd {
                "hincrby" => "hincrby",
                "hincrbyfloat" => "hincrbyfloat",
                _ => "hset",
            },
        )),
        Noticed::HashDel => {
            out.push((HASH, "hdel"));
            if n.removed {
                out.push((GENERIC, "del"));
            }
        }
        Noticed::Added => out.push(match cmd {
            "zadd" => (ZSET, "zadd"),
            "zincrby" => (ZSET, "zincr"),
            _ => (SET, "sadd"),
        }),
        Noticed::Removed => {
            out.push(match cmd {
                "spop" => (SET, "spop"),
                "zrem" => (ZSET, "zrem"),
                "zpopmin" | "bzpopmin" => (ZSET, "zpopmin"),
                "zpopmax" | "bzpopmax" => (ZSET, "zpopmax"),
                "zmpop" | "bzmpop" => match args.get(
                    2 + args
                        .get(1)
                        .and_then(|n| std::str::from_utf8(n).ok()?.parse::<usize>().ok())
                        .unwrap_or(1),
                ) {
                    Some(w) if w.eq_ignore_ascii_case(b"max") => (ZSET, "zpopmax"),
                    _ => (ZSET, "zpopmin"),
                },
                "zremrangebyscore" => (ZSET, "zrembyscore"),
                "zremrangebyrank" => (ZSET, "zrembyrank"),
                "zremrangebylex" => (ZSET, "zrembylex"),
                _ => (SET, "srem"),
            });
            if n.removed {
                out.push((GENERIC, "del"));
            }
        }
        Noticed::List => {
            out.extend(list_events(cmd, args, &n.key));
            if n.removed {
                out.push((GENERIC, "del"));
            }
        }
        Noticed::Expiry(0) => out.push((GENERIC, "persist")),
        Noticed::Expiry(_) => out.push((GENERIC, "expire")),
    }
}

/// The events of a list edit of `key` by `cmd`, in Redis's order (a
/// move's push before its pop; both on a list rotated onto itself).
fn list_events(cmd: &str, args: &[&[u8]], key: &[u8]) -> Vec<(u32, &'static str)> {
    let end = |left: bool, push: bool| match (left, push) {
        (true, true) => (LIST, "lpush"),
        (false, true) => (LIST, "rpush"),
        (true, false) => (LIST, "lpop"),
        (false, false) => (LIST, "rpop"),
    };
    let is_left = |i: usize| args.get(i).is_some_and(|w| w.eq_ignore_ascii_case(b"left"));
    let moved = |from_left: bool, to_left: bool| {
        let mut events = Vec::new();
        if args.get(2).is_some_and(|d| *d == key) {
            events.push(end(to_left, true));
        }
        if args.get(1).is_some_and(|s| *s == key) {
            events.push(end(from_left, false));
        }
        events
    };
    let mpop = |numkeys_at: usize| {
        let numkeys = args
            .get(numkeys_at)
            .and_then(|n| std::str::from_utf8(n).ok()?.parse::<usize>().ok())
            .unwrap_or(1);
        vec![end(is_left(numkeys_at + 1 + numkeys), false)]
    };
    match cmd {
        "lpush" | "lpushx" => vec![end(true, true)],
        "rpush" | "rpushx" => vec![end(false, true)],
        "lpop" | "blpop" => vec![end(true, false)],
        "rpop" | "brpop" => vec![end(false, false)],
        "lmpop" => mpop(1),
        "blmpop" => mpop(2),
        "lmove" | "blmove" => moved(is_left(3), is_left(4)),
        "rpoplpush" | "brpoplpush" => moved(false, true),
        "lset" => vec![(LIST, "lset")],
        "linsert" => vec![(LIST, "linsert")],
        "lrem" => vec![(LIST, "lrem")],
        "ltrim" => vec![(LIST, "ltrim")],
        _ => Vec::new(),
    }
}

/// The event of a string written by `cmd`; None for a write Redis makes
/// without one (PFDEBUG turning a HyperLogLog dense).
fn string_event(cmd: &str) -> Option<(u32, &'static str)> {
    Some(match cmd {
        "rename" | "renamenx" => (GENERIC, "rename_to"),
        "copy" => (GENERIC, "copy_to"),
        "restore" => (GENERIC, "restore"),
        "incr" | "decr" | "incrby" | "decrby" => (STRING, "incrby"),
        "incrbyfloat" => (STRING, "incrbyfloat"),
        "append" => (STRING, "append"),
        "setrange" => (STRING, "setrange"),
        "setbit" | "bitfield" => (STRING, "setbit"),
        // PFMERGE too: Redis calls it a mass PFADD.
        "pfadd" | "pfmerge" => (STRING, "pfadd"),
        "pfdebug" => return None,
        "sinterstore" => (SET, "sinterstore"),
        "sunionstore" => (SET, "sunionstore"),
        "sdiffstore" => (SET, "sdiffstore"),
        "zunionstore" => (ZSET, "zunionstore"),
        "zinterstore" => (ZSET, "zinterstore"),
        "zdiffstore" => (ZSET, "zdiffstore"),
        "zrangestore" => (ZSET, "zrangestore"),
        _ => (STRING, "set"),
    })
}

/// Whether the command itself set a time to live (SET EX..., SETEX), as
/// opposed to keeping the one the key had.
fn sets_ttl(cmd: &str, args: &[&[u8]]) -> bool {
    match cmd {
        "setex" | "psetex" => true,
        "set" => args.iter().skip(3).any(|a| {
            [&b"EX"[..], b"PX", b"EXAT", b"PXAT"]
                .iter()
                .any(|o| a.eq_ignore_ascii_case(o))
        }),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_read_and_print_as_redis() {
        for (given, shown) in [
            ("gKE", "gKE"),
            ("$lshzxeKE", "$lshzxeKE"),
            ("KA", "AK"),
            ("EA", "AE"),
            ("", ""),
        ] {
            assert_eq!(format(parse(given).unwrap()), shown, "{given}");
        }
        assert_eq!(parse("KEw"), None);
    }
}
