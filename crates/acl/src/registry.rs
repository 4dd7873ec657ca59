//! The ACL command id space and categories. Every command of our table
//! gets an id (its bit in a selector's command bitset), and so does every
//! subcommand of a container command (CONFIG, CLIENT, ...), taken from
//! Redis's command metadata. Categories: Redis 7.0's, plus `internal` for
//! deltagrid's own inter-node commands, which `+@all` does not grant.

use std::collections::HashMap;
use std::sync::OnceLock;

use commands::{CommandSpec, Flags, TABLE};

use crate::keys::KeySource;
use crate::tables::{REDIS_CATEGORY_NAMES, REDIS_COMMANDS};

/// The number of command bits a selector holds (ids beyond are dropped).
pub(crate) const MAX_IDS: usize = 1024;

/// Category bit of `@internal` (after Redis's 21).
pub(crate) const INTERNAL: u32 = 1 << REDIS_CATEGORY_NAMES.len();

/// deltagrid's internal commands: only `+@internal` or naming them grants them.
const INTERNAL_COMMANDS: [&str; 3] = ["wanapply", "wansettled", "backupjob"];

/// How a command names Pub/Sub channels (db.c `commands_with_channels`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Channels {
    None,
    /// Every argument is a channel (SUBSCRIBE, SSUBSCRIBE).
    Subscribe,
    /// Every argument is a pattern, compared literally (PSUBSCRIBE).
    Pattern,
    /// The first argument is a channel (PUBLISH, SPUBLISH).
    Publish,
}

/// One command or subcommand.
#[derive(Debug)]
pub(crate) struct CmdInfo {
    /// `get`, or `config|get` for a subcommand.
    pub name: &'static str,
    /// Ids of the subcommands (a container command).
    pub subs: Vec<u16>,
    pub parent: Option<u16>,
    pub categories: u32,
    pub keys: KeySource,
    pub no_auth: bool,
    pub channels: Channels,
}

/// All commands, by id.
#[derive(Debug)]
pub(crate) struct Registry {
    pub cmds: Vec<CmdInfo>,
    /// Ids of top-level commands, in table order.
    pub top_level: Vec<u16>,
    by_name: HashMap<&'static str, u16, ahash::RandomState>,
    /// Index in [`TABLE`] -> id.
    table_ids: Vec<u16>,
}

fn redis_command(name: &str) -> Option<&'static crate::tables::RedisCommand> {
    REDIS_COMMANDS
        .binary_search_by(|c| c.name.cmp(name))
        .ok()
        .map(|i| &REDIS_COMMANDS[i])
}

/// Category bits from our own flags, for a command Redis lacks.
fn categories_from_flags(spec: &CommandSpec) -> u32 {
    let mut bits = 0;
    for cat in spec.acl_categories() {
        if let Some(bit) = category_flag(cat.trim_start_matches('@').as_bytes()) {
            bits |= bit;
        }
    }
    if INTERNAL_COMMANDS.contains(&spec.name) {
        bits |= INTERNAL;
    }
    bits
}

fn channels_of(name: &str) -> Channels {
    match name {
        "subscribe" | "ssubscribe" => Channels::Subscribe,
        "psubscribe" => Channels::Pattern,
        "publish" | "spublish" => Channels::Publish,
        _ => Channels::None,
    }
}

impl Registry {
    fn build() -> Registry {
        let mut reg = Registry {
            cmds: Vec::new(),
            top_level: Vec::new(),
            by_name: HashMap::default(),
            table_ids: Vec::new(),
        };
        for spec in TABLE {
            if reg.cmds.len() >= MAX_IDS {
                break;
            }
            let id = reg.cmds.len() as u16;
            let redis = redis_command(spec.name);
            let (categories, keys) = match redis {
                Some(r) => (r.categories, KeySource::Specs(r.name, r.key_specs)),
                None => (categories_from_flags(spec), KeySource::Legacy(spec)),
            };
            let no_auth = spec.flags.has(Flags::NOAUTH);
            reg.cmds.push(CmdInfo {
                name: spec.name,
                subs: Vec::new(),
                parent: None,
                categories,
                keys,
                no_auth,
                channels: channels_of(spec.name),
            });
            reg.by_name.insert(spec.name, id);
            reg.top_level.push(id);
            reg.table_ids.push(id);
            // Subcommands: the Redis entries named `<spec.name>|...`.
            let prefix_len = spec.name.len() + 1;
            let start = REDIS_COMMANDS.partition_point(|c| c.name < spec.name);
            for sub in REDIS_COMMANDS[start..]
                .iter()
                .take_while(|c| c.name.starts_with(spec.name))
                .filter(|c| c.name.len() > prefix_len && c.name.as_bytes()[prefix_len - 1] == b'|')
            {
                if reg.cmds.len() >= MAX_IDS {
                    break;
                }
                let sid = reg.cmds.len() as u16;
                reg.cmds.push(CmdInfo {
                    name: sub.name,
                    subs: Vec::new(),
                    parent: Some(id),
                    categories: sub.categories,
                    keys: KeySource::Specs(sub.name, sub.key_specs),
                    no_auth,
                    channels: Channels::None,
                });
                reg.by_name.insert(sub.name, sid);
                reg.cmds[id as usize].subs.push(sid);
            }
        }
        reg
    }

    pub(crate) fn info(&self, id: u16) -> &CmdInfo {
        &self.cmds[id as usize]
    }

    pub(crate) fn len(&self) -> usize {
        self.cmds.len()
    }

    fn by_lower_name(&self, name: &[u8]) -> Option<u16> {
        if name.len() > 64 {
            return None;
        }
        let lower = name.to_ascii_lowercase();
        let s = std::str::from_utf8(&lower).ok()?;
        self.by_name.get(s).copied()
    }

    /// ACLLookupCommand: `name` or `container|sub` (case-insensitive).
    pub(crate) fn lookup_rule(&self, name: &[u8]) -> Option<u16> {
        let mut parts = name.split(|&b| b == b'|');
        let base = parts.next()?;
        match (parts.next(), parts.next()) {
            (None, _) => {
                let id = self.by_lower_name(base)?;
                // A subcommand is only reachable through its container.
                self.info(id).parent.is_none().then_some(id)
            }
            (Some(_), None) => {
                let top = self.by_lower_name(base)?;
                if self.info(top).subs.is_empty() || self.info(top).parent.is_some() {
                    return None;
                }
                let id = self.by_lower_name(name)?;
                (self.info(id).parent == Some(top)).then_some(id)
            }
            _ => None,
        }
    }

    /// The id a call of `spec` with `args` (the name first) is checked
    /// against: the subcommand's for a container command.
    pub(crate) fn resolve(&self, spec: &CommandSpec, args: &[&[u8]]) -> u16 {
        let base = TABLE.as_ptr() as usize;
        let at = spec as *const CommandSpec as usize;
        let size = std::mem::size_of::<CommandSpec>();
        let top =
            if at >= base && (at - base).is_multiple_of(size) && (at - base) / size < TABLE.len() {
                self.table_ids.get((at - base) / size).copied()
            } else {
                None
            };
        let top = match top.or_else(|| self.by_lower_name(spec.name.as_bytes())) {
            Some(id) => id,
            None => return u16::MAX,
        };
        let info = self.info(top);
        if info.subs.is_empty() || args.len() < 2 {
            return top;
        }
        let sub = args[1];
        let name = info.name;
        if sub.len() > 64 || sub.contains(&b'|') {
            return top;
        }
        let mut full = Vec::with_capacity(name.len() + 1 + sub.len());
        full.extend_from_slice(name.as_bytes());
        full.push(b'|');
        full.extend_from_slice(sub);
        self.by_lower_name(&full).unwrap_or(top)
    }
}

/// The process-wide registry, built on first use.
pub(crate) fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Registry::build)
}

/// The category bit of `name` (case-insensitive, without the `@`).
pub(crate) fn category_flag(name: &[u8]) -> Option<u32> {
    categories()
        .iter()
        .position(|c| c.as_bytes().eq_ignore_ascii_case(name))
        .map(|i| 1 << i)
}

/// ACL CAT: the category names, Redis 7.0's order, then `internal`.
pub fn categories() -> &'static [&'static str] {
    const ALL: [&str; 22] = [
        "keyspace",
        "read",
        "write",
        "set",
        "sortedset",
        "list",
        "hash",
        "string",
        "bitmap",
        "hyperloglog",
        "geo",
        "stream",
        "pubsub",
        "admin",
        "fast",
        "slow",
        "blocking",
        "dangerous",
        "connection",
        "transaction",
        "scripting",
        "internal",
    ];
    &ALL
}

/// ACL CAT `<category>`: the commands (and `container|sub` subcommands) in
/// it, or None for an unknown category (reply `ERR Unknown category
/// '<name>'`).
pub fn commands_in(category: &[u8]) -> Option<Vec<&'static str>> {
    let flag = category_flag(category)?;
    let reg = registry();
    Some(
        reg.cmds
            .iter()
            .filter(|c| c.categories & flag != 0)
            .map(|c| c.name)
            .collect(),
    )
}

/// The categories of a command or subcommand by full name (`get`,
/// `config|get`), as COMMAND INFO lists them (`@read`, ...).
pub fn command_categories(name: &[u8]) -> Option<Vec<String>> {
    let reg = registry();
    let id = reg.lookup_rule(name)?;
    let bits = reg.info(id).categories;
    Some(
        categories()
            .iter()
            .enumerate()
            .filter(|(i, _)| bits & (1 << i) != 0)
            .map(|(_, c)| format!("@{c}"))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_cover_commands_and_subcommands() {
        let reg = registry();
        assert!(reg.len() < MAX_IDS);
        let get = reg.lookup_rule(b"GET").unwrap();
        assert_eq!(reg.info(get).name, "get");
        let cg = reg.lookup_rule(b"config|GET").unwrap();
        assert_eq!(reg.info(cg).name, "config|get");
        assert!(reg.lookup_rule(b"config|nosuch").is_none());
        assert!(reg.lookup_rule(b"select|0").is_none());
        assert!(reg.lookup_rule(b"config|get|x").is_none());
        assert!(reg.lookup_rule(b"config|get").is_some());
        assert!(reg.lookup_rule(b"nosuchcommand").is_none());
        let config = commands::lookup(b"config").unwrap();
        assert_eq!(reg.resolve(config, &[b"config", b"GET", b"x"]), cg);
        assert_eq!(
            reg.resolve(config, &[b"config", b"bogus"]),
            reg.lookup_rule(b"config").unwrap()
        );
    }

    #[test]
    fn categories_match_redis() {
        assert_eq!(categories().len(), 22);
        let cat = |n: &str| command_categories(n.as_bytes()).unwrap();
        assert_eq!(cat("get"), ["@read", "@string", "@fast"]);
        assert!(cat("wanapply").contains(&"@internal".to_string()));
        assert!(cat("config|set").contains(&"@dangerous".to_string()));
        assert!(commands_in(b"nosuch").is_none());
        let internal = commands_in(b"INTERNAL").unwrap();
        assert_eq!(internal, ["wanapply", "wansettled", "backupjob"]);
        assert!(commands_in(b"string").unwrap().contains(&"get"));
    }
}
