//! The command table, as data. Name, arity, flags and key positions drive
//! dispatch, arity errors, `COMMAND` output, the admission checks (auth,
//! OOM) and which keys client tracking remembers, as Redis's commands/*.json
//! do. Arity follows Redis: N means exactly N arguments including the name,
//! -N means at least N.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::zsets::{algebra as za, range as zr, scan as zs, write as zw};
use crate::{
    bitfield, bitops, bits, dump, hashes, hyperloglog, keys, lcs, lists, object, sets, sort,
    strings, Handler,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flags(pub u32);

impl Flags {
    pub const WRITE: u32 = 1;
    pub const READONLY: u32 = 1 << 1;
    pub const DENYOOM: u32 = 1 << 2;
    pub const FAST: u32 = 1 << 3;
    pub const ADMIN: u32 = 1 << 4;
    pub const NOAUTH: u32 = 1 << 5;
    pub const LOADING: u32 = 1 << 6;
    pub const STALE: u32 = 1 << 7;
    pub const PUBSUB: u32 = 1 << 8;
    pub const NOSCRIPT: u32 = 1 << 9;
    /// Allowed while the connection is in RESP2 subscribed mode.
    pub const SUBSCRIBED: u32 = 1 << 10;
    /// Refused inside MULTI (SAVE, SHUTDOWN).
    pub const NO_MULTI: u32 = 1 << 11;
    /// Meant for a cluster client following an -ASK redirect
    /// (RESTORE-ASKING), as Redis flags it.
    pub const ASKING: u32 = 1 << 12;
    /// May block the client (BZPOPMIN...): it waits in the server's
    /// blocking registry (ACL category `@blocking`).
    pub const BLOCKING: u32 = 1 << 13;

    const NAMES: [(u32, &'static str); 12] = [
        (Self::WRITE, "write"),
        (Self::READONLY, "readonly"),
        (Self::DENYOOM, "denyoom"),
        (Self::ADMIN, "admin"),
        (Self::PUBSUB, "pubsub"),
        (Self::NOSCRIPT, "noscript"),
        (Self::BLOCKING, "blocking"),
        (Self::LOADING, "loading"),
        (Self::STALE, "stale"),
        (Self::FAST, "fast"),
        (Self::NOAUTH, "no_auth"),
        (Self::ASKING, "asking"),
    ];

    pub fn has(self, f: u32) -> bool {
        self.0 & f != 0
    }

    pub fn names(self) -> impl Iterator<Item = &'static str> {
        Self::NAMES
            .into_iter()
            .filter(move |(f, _)| self.has(*f))
            .map(|(_, n)| n)
    }
}

#[derive(Debug)]
pub struct CommandSpec {
    /// Lower case, as `COMMAND` reports it.
    pub name: &'static str,
    pub arity: i32,
    pub flags: Flags,
    /// Key positions: first, last (-1: the last argument), step; 0 = no
    /// keys; a negative first: the count of keys is at -first and they
    /// follow it (EVAL, FCALL).
    pub first_key: i32,
    pub last_key: i32,
    pub step: i32,
    pub group: &'static str,
    pub since: &'static str,
    pub summary: &'static str,
    /// None: handled by the server crate (session and server commands).
    pub handler: Option<Handler>,
}

impl CommandSpec {
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i32;
        if self.arity >= 0 {
            argc == self.arity
        } else {
            argc >= -self.arity
        }
    }

    /// Positions of the keys in `args` (the command name first).
    pub fn key_positions(&self, args: &[&[u8]]) -> impl Iterator<Item = usize> {
        let argc = args.len() as i32;
        let (first, step) = (self.first_key, self.step.max(1));
        let range = if first < 0 {
            // EVAL's form: a count at -first, that many keys after it.
            let at = -first;
            let n = args
                .get(at as usize)
                .and_then(|a| std::str::from_utf8(a).ok()?.parse::<i32>().ok())
                .unwrap_or(0)
                .clamp(0, (argc - at - 1).max(0));
            at + 1..=at + n
        } else {
            let last = if self.last_key < 0 {
                argc + self.last_key
            } else {
                self.last_key.min(argc - 1)
            };
            // No keys (first == 0): an empty range.
            if first > 0 {
                first..=last
            } else {
                1..=last.min(0)
            }
        };
        range.step_by(step as usize).map(|i| i as usize)
    }

    pub fn acl_categories(&self) -> Vec<String> {
        let mut cats = vec![format!(
            "@{}",
            if self.group == "generic" {
                "keyspace"
            } else {
                self.group
            }
        )];
        for (flag, cat) in [
            (Flags::WRITE, "@write"),
            (Flags::READONLY, "@read"),
            (Flags::FAST, "@fast"),
            (Flags::ADMIN, "@admin"),
        ] {
            if self.flags.has(flag) {
                cats.push(cat.into());
            }
        }
        if !self.flags.has(Flags::FAST) {
            cats.push("@slow".into());
        }
        if self.flags.has(Flags::ADMIN) {
            cats.push("@dangerous".into());
        }
        if self.flags.has(Flags::BLOCKING) {
            cats.push("@blocking".into());
        }
        cats
    }
}

const W: u32 = Flags::WRITE;
const R: u32 = Flags::READONLY;
const M: u32 = Flags::DENYOOM;
const F: u32 = Flags::FAST;
const A: u32 = Flags::ADMIN;
const N: u32 = Flags::NOAUTH;
const L: u32 = Flags::LOADING | Flags::STALE;
const S: u32 = Flags::NOSCRIPT;
const P: u32 = Flags::PUBSUB;
const SUB: u32 = Flags::SUBSCRIBED;
const NOMULTI: u32 = Flags::NO_MULTI;
const ASK: u32 = Flags::ASKING;
const B: u32 = Flags::BLOCKING;

macro_rules! cmd {
    ($name:literal, $arity:expr, $flags:expr, $keys:expr, $group:literal, $since:literal, $h:expr, $summary:literal) => {
        CommandSpec {
            name: $name,
            arity: $arity,
            flags: Flags($flags),
            first_key: $keys.0,
            last_key: $keys.1,
            step: $keys.2,
            group: $group,
            since: $since,
            summary: $summary,
            handler: $h,
        }
    };
}

const NO_KEYS: (i32, i32, i32) = (0, 0, 0);
const KEY1: (i32, i32, i32) = (1, 1, 1);
const KEY2: (i32, i32, i32) = (2, 2, 1);
const ALL_KEYS: (i32, i32, i32) = (1, -1, 1);
const KEY_VALUE_PAIRS: (i32, i32, i32) = (1, -1, 2);
/// SMOVE: a source and a destination.
const KEYS_1_2: (i32, i32, i32) = (1, 2, 1);
/// After a numkeys argument (SINTERCARD): every later argument is taken
/// as a key, options included (a superset of Redis's movable keys).
const AFTER_NUMKEYS: (i32, i32, i32) = (2, -1, 1);
/// EVAL and FCALL: the script, numkeys, then exactly numkeys keys.
const NUMKEYS_AT_2: (i32, i32, i32) = (-2, 0, 1);

pub static TABLE: &[CommandSpec] = &[
    // connection
    cmd!("ping", -1, F | L | SUB, NO_KEYS, "connection", "1.0.0", None, "Returns the server's liveliness response."),
    cmd!("echo", 2, F | L, NO_KEYS, "connection", "1.0.0", None, "Returns the given string."),
    cmd!("hello", -1, F | N | L | S, NO_KEYS, "connection", "6.0.0", None, "Handshakes with the server."),
    cmd!("auth", -2, F | N | L | S, NO_KEYS, "connection", "1.0.0", None, "Authenticates the connection."),
    cmd!("select", 2, F | L, NO_KEYS, "connection", "1.0.0", None, "Changes the selected database."),
    cmd!("quit", -1, F | N | L | S | SUB, NO_KEYS, "connection", "1.0.0", None, "Closes the connection."),
    cmd!("reset", 1, F | N | L | S | SUB, NO_KEYS, "connection", "6.2.0", None, "Resets the connection."),
    cmd!("client", -2, L | S, NO_KEYS, "connection", "2.4.0", None, "A container for client connection commands."),
    cmd!("subscribe", -2, P | L | S | SUB, NO_KEYS, "pubsub", "2.0.0", None, "Listens for messages published to channels."),
    cmd!("unsubscribe", -1, P | L | S | SUB, NO_KEYS, "pubsub", "2.0.0", None, "Stops listening to messages posted to channels."),
    cmd!("publish", 3, P | L | F, NO_KEYS, "pubsub", "2.0.0", None, "Posts a message to a channel."),
    cmd!("psubscribe", -2, P | L | S | SUB, NO_KEYS, "pubsub", "2.0.0", None, "Listens for messages published to channels that match one or more patterns."),
    cmd!("punsubscribe", -1, P | L | S | SUB, NO_KEYS, "pubsub", "2.0.0", None, "Stops listening to messages published to channels that match one or more patterns."),
    cmd!("ssubscribe", -2, P | L | S | SUB, ALL_KEYS, "pubsub", "7.0.0", None, "Listens for messages published to shard channels."),
    cmd!("sunsubscribe", -1, P | L | S | SUB, ALL_KEYS, "pubsub", "7.0.0", None, "Stops listening to messages posted to shard channels."),
    cmd!("spublish", 3, P | L | F, KEY1, "pubsub", "7.0.0", None, "Post a message to a shard channel"),
    cmd!("pubsub", -2, P | L | S, NO_KEYS, "pubsub", "2.8.0", None, "A container for Pub/Sub commands."),
    // cluster
    cmd!("cluster", -2, L | S, NO_KEYS, "cluster", "3.0.0", None, "A container for Redis Cluster commands."),
    cmd!("asking", 1, F, NO_KEYS, "cluster", "3.0.0", None, "Signals that a cluster client is following an -ASK redirect."),
    cmd!("readonly", 1, F | L, NO_KEYS, "cluster", "3.0.0", None, "Enables read-only queries for a connection to a Redis Cluster replica node."),
    cmd!("readwrite", 1, F | L, NO_KEYS, "cluster", "3.0.0", None, "Enables read-write queries for a connection to a Redis Cluster replica node."),
    // transactions
    cmd!("multi", 1, F | L | S, NO_KEYS, "transactions", "1.2.0", None, "Starts a transaction."),
    cmd!("exec", 1, L | S, NO_KEYS, "transactions", "1.2.0", None, "Executes all commands in a transaction."),
    cmd!("discard", 1, F | L | S, NO_KEYS, "transactions", "2.0.0", None, "Discards a transaction."),
    cmd!("watch", -2, F | L | S, ALL_KEYS, "transactions", "2.2.0", None, "Monitors changes to keys to determine the execution of a transaction."),
    cmd!("unwatch", 1, F | L | S, NO_KEYS, "transactions", "2.2.0", None, "Forgets about watched keys of a transaction."),
    // server
    cmd!("command", -1, L, NO_KEYS, "server", "2.8.13", None, "Returns detailed information about all commands."),
    cmd!("info", -1, L, NO_KEYS, "server", "1.0.0", None, "Returns information and statistics about the server."),
    cmd!("config", -2, A | L | S, NO_KEYS, "server", "2.0.0", None, "A container for server configuration commands."),
    cmd!("acl", -2, L | S, NO_KEYS, "server", "6.0.0", None, "A container for Access List Control commands."),
    cmd!("dbsize", 1, R | F, NO_KEYS, "server", "1.0.0", Some(keys::dbsize), "Returns the number of keys in the database."),
    cmd!("flushall", -1, W, NO_KEYS, "server", "1.0.0", Some(keys::flushall), "Removes all keys from all databases."),
    cmd!("flushdb", -1, W, NO_KEYS, "server", "1.0.0", Some(keys::flushall), "Remove all keys from the current database."),
    // scripting
    cmd!("eval", -3, S, NUMKEYS_AT_2, "scripting", "2.6.0", None, "Executes a server-side Lua script."),
    cmd!("evalsha", -3, S, NUMKEYS_AT_2, "scripting", "2.6.0", None, "Executes a server-side Lua script by SHA1 digest."),
    cmd!("eval_ro", -3, R | S, NUMKEYS_AT_2, "scripting", "7.0.0", None, "Executes a read-only server-side Lua script."),
    cmd!("evalsha_ro", -3, R | S, NUMKEYS_AT_2, "scripting", "7.0.0", None, "Executes a read-only server-side Lua script by SHA1 digest."),
    cmd!("script", -2, S, NO_KEYS, "scripting", "2.6.0", None, "A container for Lua scripts management commands."),
    cmd!("fcall", -3, S, NUMKEYS_AT_2, "scripting", "7.0.0", None, "Invokes a function."),
    cmd!("fcall_ro", -3, R | S, NUMKEYS_AT_2, "scripting", "7.0.0", None, "Invokes a read-only function."),
    cmd!("function", -2, S, NO_KEYS, "scripting", "7.0.0", None, "A container for function commands."),
    cmd!("wait", 3, F, NO_KEYS, "generic", "3.0.0", None, "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed."),
    cmd!("monitor", 1, A | L | S, NO_KEYS, "server", "1.0.0", None, "Listens for all requests received by the server in real-time."),
    cmd!("save", 1, A | S | NOMULTI, NO_KEYS, "server", "1.0.0", None, "Synchronously saves the database(s) to disk."),
    cmd!("bgsave", -1, A | S, NO_KEYS, "server", "1.0.0", None, "Asynchronously saves the database(s) to disk."),
    cmd!("shutdown", -1, A | L | S | NOMULTI, NO_KEYS, "server", "1.0.0", None, "Synchronously saves the database(s) to disk and shuts down the Redis server."),
    cmd!("time", 1, F | L, NO_KEYS, "server", "2.6.0", None, "Returns the server time."),
    cmd!("lastsave", 1, F | L, NO_KEYS, "server", "1.0.0", None, "Returns the Unix timestamp of the last successful save to disk."),
    cmd!("wanapply", 3, W | A | L | S, NO_KEYS, "server", "0.1.0", None, "Internal: applies changes that arrived from a remote site (the WAN receiver sends it)."),
    cmd!("wansettled", 4, A | L | S, NO_KEYS, "server", "0.1.0", None, "Internal: how far a remote site has passed each partition, so that tombstones can go (the WAN receiver sends it)."),
    cmd!("backupjob", -2, A | L | S, NO_KEYS, "server", "0.1.0", None, "Internal: starts or reports this node's part of a backup to storage or a restore (`deltagrid backup` sends it)."),
    cmd!("debug", -2, A | L | S, NO_KEYS, "server", "1.0.0", None, "A container for debugging commands."),
    // The key of MEMORY USAGE, OBJECT ENCODING and OBJECT REFCOUNT is their
    // second argument; HELP and MALLOC-STATS have none (2 arguments).
    cmd!("memory", -2, R, KEY2, "server", "4.0.0", Some(object::memory), "A container for memory diagnostics commands."),
    cmd!("object", -2, R, KEY2, "generic", "2.2.3", Some(object::object), "A container for object introspection commands."),
    // strings
    cmd!("get", 2, R | F, KEY1, "string", "1.0.0", Some(strings::get), "Returns the string value of a key."),
    cmd!("set", -3, W | M, KEY1, "string", "1.0.0", Some(strings::set), "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist."),
    cmd!("setnx", 3, W | M | F, KEY1, "string", "1.0.0", Some(strings::setnx), "Set the string value of a key only when the key doesn't exist."),
    cmd!("setex", 4, W | M, KEY1, "string", "2.0.0", Some(strings::setex), "Sets the string value and expiration time of a key. Creates the key if it doesn't exist."),
    cmd!("psetex", 4, W | M, KEY1, "string", "2.6.0", Some(strings::psetex), "Sets both string value and expiration time in milliseconds of a key. The key is created if it doesn't exist."),
    cmd!("getset", 3, W | M | F, KEY1, "string", "1.0.0", Some(strings::getset), "Returns the previous string value of a key after setting it to a new value."),
    cmd!("getdel", 2, W | F, KEY1, "string", "6.2.0", Some(strings::getdel), "Returns the string value of a key after deleting the key."),
    cmd!("getex", -2, W | F, KEY1, "string", "6.2.0", Some(strings::getex), "Returns the string value of a key after setting its expiration time."),
    cmd!("mget", -2, R | F, ALL_KEYS, "string", "1.0.0", Some(strings::mget), "Atomically returns the string values of one or more keys."),
    cmd!("mset", -3, W | M, KEY_VALUE_PAIRS, "string", "1.0.1", Some(strings::mset), "Atomically creates or modifies the string values of one or more keys."),
    cmd!("msetnx", -3, W | M, KEY_VALUE_PAIRS, "string", "1.0.1", Some(strings::msetnx), "Atomically modifies the string values of one or more keys only when all keys don't exist."),
    cmd!("incr", 2, W | M | F, KEY1, "string", "1.0.0", Some(strings::incr), "Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist."),
    cmd!("decr", 2, W | M | F, KEY1, "string", "1.0.0", Some(strings::decr), "Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist."),
    cmd!("incrby", 3, W | M | F, KEY1, "string", "1.0.0", Some(strings::incrby), "Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist."),
    cmd!("decrby", 3, W | M | F, KEY1, "string", "1.0.0", Some(strings::decrby), "Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist."),
    cmd!("incrbyfloat", 3, W | M | F, KEY1, "string", "2.6.0", Some(strings::incrbyfloat), "Increment the floating point value of a key by a number. Uses 0 as initial value if the key doesn't exist."),
    cmd!("append", 3, W | M | F, KEY1, "string", "2.0.0", Some(strings::append), "Appends a string to the value of a key. Creates the key if it doesn't exist."),
    cmd!("strlen", 2, R | F, KEY1, "string", "2.2.0", Some(strings::strlen), "Returns the length of a string value."),
    cmd!("setrange", 4, W | M, KEY1, "string", "2.2.0", Some(strings::setrange), "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist."),
    cmd!("setbit", 4, W | M, KEY1, "bitmap", "2.2.0", Some(bits::setbit), "Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist."),
    cmd!("getbit", 3, R | F, KEY1, "bitmap", "2.2.0", Some(bits::getbit), "Returns a bit value by offset."),
    cmd!("bitcount", -2, R, KEY1, "bitmap", "2.6.0", Some(bitops::bitcount), "Counts the number of set bits (population counting) in a string."),
    cmd!("bitpos", -3, R, KEY1, "bitmap", "2.8.7", Some(bitops::bitpos), "Finds the first set (1) or clear (0) bit in a string."),
    cmd!("bitop", -4, W | M, (2, -1, 1), "bitmap", "2.6.0", Some(bitops::bitop), "Performs bitwise operations on multiple strings, and stores the result."),
    cmd!("bitfield", -2, W | M, KEY1, "bitmap", "3.2.0", Some(bitfield::bitfield), "Performs arbitrary bitfield integer operations on strings."),
    cmd!("bitfield_ro", -2, R | F, KEY1, "bitmap", "6.0.0", Some(bitfield::bitfield_ro), "Performs arbitrary read-only bitfield integer operations on strings."),
    cmd!("getrange", 4, R, KEY1, "string", "2.4.0", Some(strings::getrange), "Returns a substring of the string stored at a key."),
    cmd!("lcs", -3, R, (1, 2, 1), "string", "7.0.0", Some(lcs::lcs), "Finds the longest common substring."),
    // hyperloglog
    cmd!("pfadd", -2, W | M | F, KEY1, "hyperloglog", "2.8.9", Some(hyperloglog::pfadd), "Adds elements to a HyperLogLog key. Creates the key if it doesn't exist."),
    cmd!("pfcount", -2, R, ALL_KEYS, "hyperloglog", "2.8.9", Some(hyperloglog::pfcount), "Returns the approximated cardinality of the set(s) observed by the HyperLogLog key(s)."),
    cmd!("pfmerge", -2, W | M, ALL_KEYS, "hyperloglog", "2.8.9", Some(hyperloglog::pfmerge), "Merges one or more HyperLogLog values into a single key."),
    cmd!("pfdebug", 3, W | M | A, KEY2, "hyperloglog", "2.8.9", Some(hyperloglog::pfdebug), "Internal commands for debugging HyperLogLog values."),
    cmd!("pfselftest", 1, A, NO_KEYS, "hyperloglog", "2.8.9", Some(hyperloglog::pfselftest), "An internal command for testing HyperLogLog values."),
    // hashes
    cmd!("hset", -4, W | M | F, KEY1, "hash", "2.0.0", Some(hashes::hset), "Creates or modifies the value of a field in a hash."),
    cmd!("hsetnx", 4, W | M | F, KEY1, "hash", "2.0.0", Some(hashes::hsetnx), "Sets the value of a field in a hash only when the field doesn't exist."),
    cmd!("hget", 3, R | F, KEY1, "hash", "2.0.0", Some(hashes::hget), "Returns the value of a field in a hash."),
    cmd!("hmget", -3, R | F, KEY1, "hash", "2.0.0", Some(hashes::hmget), "Returns the values of all fields in a hash."),
    cmd!("hmset", -4, W | M | F, KEY1, "hash", "2.0.0", Some(hashes::hmset), "Sets the values of multiple fields."),
    cmd!("hgetall", 2, R, KEY1, "hash", "2.0.0", Some(hashes::hgetall), "Returns all fields and values in a hash."),
    cmd!("hdel", -3, W | F, KEY1, "hash", "2.0.0", Some(hashes::hdel), "Deletes one or more fields and their values from a hash. Deletes the hash if no fields remain."),
    cmd!("hexists", 3, R | F, KEY1, "hash", "2.0.0", Some(hashes::hexists), "Determines whether a field exists in a hash."),
    cmd!("hlen", 2, R | F, KEY1, "hash", "2.0.0", Some(hashes::hlen), "Returns the number of fields in a hash."),
    cmd!("hkeys", 2, R, KEY1, "hash", "2.0.0", Some(hashes::hkeys), "Returns all fields in a hash."),
    cmd!("hvals", 2, R, KEY1, "hash", "2.0.0", Some(hashes::hvals), "Returns all values in a hash."),
    cmd!("hincrby", 4, W | M | F, KEY1, "hash", "2.0.0", Some(hashes::hincrby), "Increments the integer value of a field in a hash by a number. Uses 0 as initial value if the field doesn't exist."),
    cmd!("hincrbyfloat", 4, W | M | F, KEY1, "hash", "2.6.0", Some(hashes::hincrbyfloat), "Increments the floating point value of a field by a number. Uses 0 as initial value if the field doesn't exist."),
    cmd!("hstrlen", 3, R | F, KEY1, "hash", "3.2.0", Some(hashes::hstrlen), "Returns the length of the value of a field."),
    cmd!("hscan", -3, R, KEY1, "hash", "2.8.0", Some(hashes::hscan), "Iterates over fields and values of a hash."),
    cmd!("hrandfield", -2, R, KEY1, "hash", "6.2.0", Some(hashes::hrandfield), "Returns one or more random fields from a hash."),
    cmd!("sort", -2, W | M, KEY1, "generic", "1.0.0", Some(sort::sort), "Sorts the elements in a list, a set, or a sorted set, optionally storing the result."),
    cmd!("sort_ro", -2, R, KEY1, "generic", "7.0.0", Some(sort::sort_ro), "Returns the sorted elements of a list, a set, or a sorted set."),
    // lists
    cmd!("lpush", -3, W | M | F, KEY1, "list", "1.0.0", Some(lists::lpush), "Prepends one or more elements to a list. Creates the key if it doesn't exist."),
    cmd!("rpush", -3, W | M | F, KEY1, "list", "1.0.0", Some(lists::rpush), "Appends one or more elements to a list. Creates the key if it doesn't exist."),
    cmd!("lpushx", -3, W | M | F, KEY1, "list", "2.2.0", Some(lists::lpushx), "Prepends one or more elements to a list only when the list exists."),
    cmd!("rpushx", -3, W | M | F, KEY1, "list", "2.2.0", Some(lists::rpushx), "Appends an element to a list only when the list exists."),
    cmd!("lpop", -2, W | F, KEY1, "list", "1.0.0", Some(lists::lpop), "Returns the first elements in a list after removing it. Deletes the list if the last element was popped."),
    cmd!("rpop", -2, W | F, KEY1, "list", "1.0.0", Some(lists::rpop), "Returns and removes the last elements of a list. Deletes the list if the last element was popped."),
    cmd!("llen", 2, R | F, KEY1, "list", "1.0.0", Some(lists::llen), "Returns the length of a list."),
    cmd!("lindex", 3, R, KEY1, "list", "1.0.0", Some(lists::lindex), "Returns an element from a list by its index."),
    cmd!("lrange", 4, R, KEY1, "list", "1.0.0", Some(lists::lrange), "Returns a range of elements from a list."),
    cmd!("lset", 4, W | M, KEY1, "list", "1.0.0", Some(lists::lset), "Sets the value of an element in a list by its index."),
    cmd!("linsert", 5, W | M, KEY1, "list", "2.2.0", Some(lists::linsert), "Inserts an element before or after another element in a list."),
    cmd!("lrem", 4, W, KEY1, "list", "1.0.0", Some(lists::lrem), "Removes elements from a list. Deletes the list if the last element was removed."),
    cmd!("ltrim", 4, W, KEY1, "list", "1.0.0", Some(lists::ltrim), "Removes elements from both ends a list. Deletes the list if all elements were trimmed."),
    cmd!("lpos", -3, R, KEY1, "list", "6.0.6", Some(lists::lpos), "Returns the index of matching elements in a list."),
    cmd!("lmove", 5, W | M, KEYS_1_2, "list", "6.2.0", Some(lists::lmove), "Returns an element after popping it from one list and pushing it to another. Deletes the list if the last element was moved."),
    cmd!("rpoplpush", 3, W | M, KEYS_1_2, "list", "1.2.0", Some(lists::rpoplpush), "Returns the last element of a list after removing and pushing it to another list. Deletes the list if the last element was popped."),
    cmd!("lmpop", -4, W, NO_KEYS, "list", "7.0.0", Some(lists::lmpop), "Returns multiple elements from a list after removing them. Deletes the list if the last element was popped."),
    cmd!("blpop", -3, W | S | B, (1, -2, 1), "list", "2.0.0", Some(lists::blpop), "Removes and returns the first element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped."),
    cmd!("brpop", -3, W | S | B, (1, -2, 1), "list", "2.0.0", Some(lists::brpop), "Removes and returns the last element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped."),
    cmd!("blmove", 6, W | M | S | B, KEYS_1_2, "list", "6.2.0", Some(lists::blmove), "Pops an element from a list, pushes it to another list and returns it. Blocks until an element is available otherwise. Deletes the list if the last element was moved."),
    cmd!("brpoplpush", 4, W | M | S | B, KEYS_1_2, "list", "2.2.0", Some(lists::brpoplpush), "Pops an element from a list, pushes it to another list and returns it. Block until an element is available otherwise. Deletes the list if the last element was popped."),
    cmd!("blmpop", -5, W | B, NO_KEYS, "list", "7.0.0", Some(lists::blmpop), "Pops the first element from one of multiple lists. Blocks until an element is available otherwise. Deletes the list if the last element was popped."),
    // sets
    cmd!("sadd", -3, W | M | F, KEY1, "set", "1.0.0", Some(sets::sadd), "Adds one or more members to a set. Creates the key if it doesn't exist."),
    cmd!("srem", -3, W | F, KEY1, "set", "1.0.0", Some(sets::srem), "Removes one or more members from a set. Deletes the set if the last member was removed."),
    cmd!("smembers", 2, R, KEY1, "set", "1.0.0", Some(sets::smembers), "Returns all members of a set."),
    cmd!("sismember", 3, R | F, KEY1, "set", "1.0.0", Some(sets::sismember), "Determines whether a member belongs to a set."),
    cmd!("smismember", -3, R | F, KEY1, "set", "6.2.0", Some(sets::smismember), "Determines whether multiple members belong to a set."),
    cmd!("scard", 2, R | F, KEY1, "set", "1.0.0", Some(sets::scard), "Returns the number of members in a set."),
    cmd!("spop", -2, W | F, KEY1, "set", "1.0.0", Some(sets::spop), "Returns one or more random members from a set after removing them. Deletes the set if the last member was popped."),
    cmd!("srandmember", -2, R, KEY1, "set", "1.0.0", Some(sets::srandmember), "Get one or multiple random members from a set"),
    cmd!("smove", 4, W | F, KEYS_1_2, "set", "1.0.0", Some(sets::smove), "Moves a member from one set to another."),
    cmd!("sinter", -2, R, ALL_KEYS, "set", "1.0.0", Some(sets::sinter), "Returns the intersect of multiple sets."),
    cmd!("sintercard", -3, R, AFTER_NUMKEYS, "set", "7.0.0", Some(sets::sintercard), "Returns the number of members of the intersect of multiple sets."),
    cmd!("sinterstore", -3, W | M, ALL_KEYS, "set", "1.0.0", Some(sets::sinterstore), "Stores the intersect of multiple sets in a key."),
    cmd!("sunion", -2, R, ALL_KEYS, "set", "1.0.0", Some(sets::sunion), "Returns the union of multiple sets."),
    cmd!("sunionstore", -3, W | M, ALL_KEYS, "set", "1.0.0", Some(sets::sunionstore), "Stores the union of multiple sets in a key."),
    cmd!("sdiff", -2, R, ALL_KEYS, "set", "1.0.0", Some(sets::sdiff), "Returns the difference of multiple sets."),
    cmd!("sdiffstore", -3, W | M, ALL_KEYS, "set", "1.0.0", Some(sets::sdiffstore), "Stores the difference of multiple sets in a key."),
    cmd!("sscan", -3, R, KEY1, "set", "2.0.0", Some(sets::sscan), "Iterates over members of a set."),
    // sorted sets
    cmd!("zadd", -4, W | M | F, KEY1, "sorted-set", "1.2.0", Some(zw::zadd), "Adds one or more members to a sorted set, or updates their scores. Creates the key if it doesn't exist."),
    cmd!("zincrby", 4, W | M | F, KEY1, "sorted-set", "1.2.0", Some(zw::zincrby), "Increments the score of a member in a sorted set."),
    cmd!("zrem", -3, W | F, KEY1, "sorted-set", "1.2.0", Some(zw::zrem), "Removes one or more members from a sorted set. Deletes the sorted set if all members were removed."),
    cmd!("zcard", 2, R | F, KEY1, "sorted-set", "1.2.0", Some(zr::zcard), "Returns the number of members in a sorted set."),
    cmd!("zscore", 3, R | F, KEY1, "sorted-set", "1.2.0", Some(zr::zscore), "Returns the score of a member in a sorted set."),
    cmd!("zmscore", -3, R | F, KEY1, "sorted-set", "6.2.0", Some(zr::zmscore), "Returns the score of one or more members in a sorted set."),
    cmd!("zcount", 4, R | F, KEY1, "sorted-set", "2.0.0", Some(zr::zcount), "Returns the count of members in a sorted set that have scores within a range."),
    cmd!("zlexcount", 4, R | F, KEY1, "sorted-set", "2.8.9", Some(zr::zlexcount), "Returns the number of members in a sorted set within a lexicographical range."),
    cmd!("zrank", -3, R | F, KEY1, "sorted-set", "2.0.0", Some(zr::zrank), "Returns the index of a member in a sorted set ordered by ascending scores."),
    cmd!("zrevrank", -3, R | F, KEY1, "sorted-set", "2.0.0", Some(zr::zrevrank), "Returns the index of a member in a sorted set ordered by descending scores."),
    cmd!("zrange", -4, R, KEY1, "sorted-set", "1.2.0", Some(zr::zrange), "Returns members in a sorted set within a range of indexes."),
    cmd!("zrevrange", -4, R, KEY1, "sorted-set", "1.2.0", Some(zr::zrevrange), "Returns members in a sorted set within a range of indexes in reverse order."),
    cmd!("zrangebyscore", -4, R, KEY1, "sorted-set", "1.0.5", Some(zr::zrangebyscore), "Returns members in a sorted set within a range of scores."),
    cmd!("zrevrangebyscore", -4, R, KEY1, "sorted-set", "2.2.0", Some(zr::zrevrangebyscore), "Returns members in a sorted set within a range of scores in reverse order."),
    cmd!("zrangebylex", -4, R, KEY1, "sorted-set", "2.8.9", Some(zr::zrangebylex), "Returns members in a sorted set within a lexicographical range."),
    cmd!("zrevrangebylex", -4, R, KEY1, "sorted-set", "2.8.9", Some(zr::zrevrangebylex), "Returns members in a sorted set within a lexicographical range in reverse order."),
    cmd!("zrangestore", -5, W | M, (1, 2, 1), "sorted-set", "6.2.0", Some(zr::zrangestore), "Stores a range of members from sorted set in a key."),
    cmd!("zpopmin", -2, W | F, KEY1, "sorted-set", "5.0.0", Some(zw::zpopmin), "Returns the lowest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped."),
    cmd!("zpopmax", -2, W | F, KEY1, "sorted-set", "5.0.0", Some(zw::zpopmax), "Returns the highest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped."),
    cmd!("zmpop", -4, W, NO_KEYS, "sorted-set", "7.0.0", Some(zw::zmpop), "Returns the highest- or lowest-scoring members from one or more sorted sets after removing them. Deletes the sorted set if the last member was popped."),
    cmd!("bzpopmin", -3, W | S | B | F, (1, -2, 1), "sorted-set", "5.0.0", Some(zw::bzpopmin), "Removes and returns the member with the lowest score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped."),
    cmd!("bzpopmax", -3, W | S | B | F, (1, -2, 1), "sorted-set", "5.0.0", Some(zw::bzpopmax), "Removes and returns the member with the highest score from one or more sorted sets. Blocks until a member available otherwise.  Deletes the sorted set if the last element was popped."),
    cmd!("bzmpop", -5, W | B, NO_KEYS, "sorted-set", "7.0.0", Some(zw::bzmpop), "Removes and returns a member by score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped."),
    cmd!("zremrangebyrank", 4, W, KEY1, "sorted-set", "2.0.0", Some(zw::zremrangebyrank), "Removes members in a sorted set within a range of indexes. Deletes the sorted set if all members were removed."),
    cmd!("zremrangebyscore", 4, W, KEY1, "sorted-set", "1.2.0", Some(zw::zremrangebyscore), "Removes members in a sorted set within a range of scores. Deletes the sorted set if all members were removed."),
    cmd!("zremrangebylex", 4, W, KEY1, "sorted-set", "2.8.9", Some(zw::zremrangebylex), "Removes members in a sorted set within a lexicographical range. Deletes the sorted set if all members were removed."),
    cmd!("zunionstore", -4, W | M, KEY1, "sorted-set", "2.0.0", Some(za::zunionstore), "Stores the union of multiple sorted sets in a key."),
    cmd!("zinterstore", -4, W | M, KEY1, "sorted-set", "2.0.0", Some(za::zinterstore), "Stores the intersect of multiple sorted sets in a key."),
    cmd!("zdiffstore", -4, W | M, KEY1, "sorted-set", "6.2.0", Some(za::zdiffstore), "Stores the difference of multiple sorted sets in a key."),
    cmd!("zunion", -3, R, NO_KEYS, "sorted-set", "6.2.0", Some(za::zunion), "Returns the union of multiple sorted sets."),
    cmd!("zinter", -3, R, NO_KEYS, "sorted-set", "6.2.0", Some(za::zinter), "Returns the intersect of multiple sorted sets."),
    cmd!("zdiff", -3, R, NO_KEYS, "sorted-set", "6.2.0", Some(za::zdiff), "Returns the difference between multiple sorted sets."),
    cmd!("zintercard", -3, R, NO_KEYS, "sorted-set", "7.0.0", Some(za::zintercard), "Returns the number of members of the intersect of multiple sorted sets."),
    cmd!("zrandmember", -2, R, KEY1, "sorted-set", "6.2.0", Some(zs::zrandmember), "Returns one or more random members from a sorted set."),
    cmd!("zscan", -3, R, KEY1, "sorted-set", "2.8.0", Some(zs::zscan), "Iterates over members and scores of a sorted set."),
    // generic keyspace
    cmd!("del", -2, W, ALL_KEYS, "generic", "1.0.0", Some(keys::del), "Deletes one or more keys."),
    cmd!("unlink", -2, W | F, ALL_KEYS, "generic", "4.0.0", Some(keys::del), "Asynchronously deletes one or more keys."),
    cmd!("exists", -2, R | F, ALL_KEYS, "generic", "1.0.0", Some(keys::exists), "Determines whether one or more keys exist."),
    cmd!("touch", -2, R | F, ALL_KEYS, "generic", "3.2.1", Some(keys::exists), "Returns the number of existing keys out of those specified after updating the time they were last accessed."),
    cmd!("type", 2, R | F, KEY1, "generic", "1.0.0", Some(keys::type_), "Determines the type of value stored at a key."),
    cmd!("expire", -3, W | F, KEY1, "generic", "1.0.0", Some(keys::expire), "Sets the expiration time of a key in seconds."),
    cmd!("pexpire", -3, W | F, KEY1, "generic", "2.6.0", Some(keys::pexpire), "Sets the expiration time of a key in milliseconds."),
    cmd!("expireat", -3, W | F, KEY1, "generic", "1.2.0", Some(keys::expireat), "Sets the expiration time of a key to a Unix timestamp."),
    cmd!("pexpireat", -3, W | F, KEY1, "generic", "2.6.0", Some(keys::pexpireat), "Sets the expiration time of a key to a Unix milliseconds timestamp."),
    cmd!("ttl", 2, R | F, KEY1, "generic", "1.0.0", Some(keys::ttl), "Returns the expiration time in seconds of a key."),
    cmd!("pttl", 2, R | F, KEY1, "generic", "2.6.0", Some(keys::pttl), "Returns the expiration time in milliseconds of a key."),
    cmd!("expiretime", 2, R | F, KEY1, "generic", "7.0.0", Some(keys::expiretime), "Returns the expiration time of a key as a Unix timestamp."),
    cmd!("pexpiretime", 2, R | F, KEY1, "generic", "7.0.0", Some(keys::pexpiretime), "Returns the expiration time of a key as a Unix milliseconds timestamp."),
    cmd!("persist", 2, W | F, KEY1, "generic", "2.2.0", Some(keys::persist), "Removes the expiration time of a key."),
    cmd!("rename", 3, W, (1, 2, 1), "generic", "1.0.0", Some(keys::rename), "Renames a key and overwrites the destination."),
    cmd!("copy", -3, W | M, (1, 2, 1), "generic", "6.2.0", Some(keys::copy), "Copies the value of a key to a new key."),
    cmd!("renamenx", 3, W | F, (1, 2, 1), "generic", "1.0.0", Some(keys::renamenx), "Renames a key only when the target key name doesn't exist."),
    cmd!("scan", -2, R, NO_KEYS, "generic", "2.8.0", Some(keys::scan), "Iterates over the key names in the database."),
    cmd!("keys", 2, R, NO_KEYS, "generic", "1.0.0", Some(keys::keys), "Returns all key names that match a pattern."),
    cmd!("randomkey", 1, R, NO_KEYS, "generic", "1.0.0", Some(keys::randomkey), "Returns a random key name from the database."),
    // serialization (DUMP/RESTORE: dump/)
    cmd!("dump", 2, R, KEY1, "generic", "2.6.0", Some(dump::dump), "Returns a serialized representation of the value stored at a key."),
    cmd!("restore", -4, W | M, KEY1, "generic", "2.6.0", Some(dump::restore), "Creates a key from the serialized representation of a value."),
    cmd!("restore-asking", -4, W | M | ASK, KEY1, "generic", "3.0.0", Some(dump::restore), "An internal command for migrating keys in a cluster."),
];

/// Finds a command by name, case-insensitively.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    static INDEX: OnceLock<HashMap<&'static [u8], &'static CommandSpec, ahash::RandomState>> =
        OnceLock::new();
    let index = INDEX.get_or_init(|| TABLE.iter().map(|c| (c.name.as_bytes(), c)).collect());
    let mut buf = [0u8; 32];
    if name.len() > buf.len() {
        return None;
    }
    for (d, s) in buf.iter_mut().zip(name) {
        *d = s.to_ascii_lowercase();
    }
    index.get(&buf[..name.len()]).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_lowercase_and_found_in_any_case() {
        let mut seen = std::collections::HashSet::new();
        for c in TABLE {
            assert!(seen.insert(c.name), "duplicate {}", c.name);
            assert_eq!(c.name, c.name.to_lowercase());
            assert!(std::ptr::eq(
                lookup(c.name.to_uppercase().as_bytes()).unwrap(),
                c
            ));
        }
        assert!(lookup(b"nosuchcommand").is_none());
    }

    #[test]
    fn key_positions_follow_the_spec() {
        let mset = lookup(b"mset").unwrap();
        let keys = |spec: &CommandSpec, args: &str| -> Vec<usize> {
            let args: Vec<&[u8]> = args.split(' ').map(str::as_bytes).collect();
            spec.key_positions(&args).collect()
        };
        assert_eq!(keys(mset, "mset a 1 b 2"), vec![1, 3]);
        let del = lookup(b"del").unwrap();
        assert_eq!(keys(del, "del a b c"), vec![1, 2, 3]);
        assert!(keys(lookup(b"ping").unwrap(), "ping").is_empty());
        let bitop = lookup(b"bitop").unwrap();
        assert_eq!(keys(bitop, "bitop and d a b"), vec![2, 3, 4]);
        let pfdebug = lookup(b"pfdebug").unwrap();
        assert_eq!(keys(pfdebug, "pfdebug getreg k"), vec![2]);
        let eval = lookup(b"eval").unwrap();
        assert_eq!(keys(eval, "eval s 2 k1 k2 a1"), vec![3, 4]);
        assert!(keys(eval, "eval s 0 a1").is_empty());
        assert_eq!(keys(eval, "eval s 5 k1"), vec![3], "a count past the end");
        assert!(keys(eval, "eval s x k1").is_empty());
        assert!(lookup(b"get").unwrap().arity_ok(2) && !lookup(b"get").unwrap().arity_ok(3));
        assert!(lookup(b"set").unwrap().arity_ok(5) && !lookup(b"set").unwrap().arity_ok(2));
    }
}
