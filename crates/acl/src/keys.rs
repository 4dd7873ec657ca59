//! Which arguments of a command are keys, and how the command uses each
//! one: Redis 7.0's key specs (`begin_search` + `find_keys` + access flags)
//! evaluated as db.c `getKeysUsingKeySpecs` does, with the `getkeys_proc`
//! fallbacks ACL checks need (SET and BITFIELD have variable flags, SORT
//! has unknown specs). Commands Redis lacks use our table's positions.

use commands::{CommandSpec, Flags};

/// Key-spec flags (Redis's `CMD_KEY_*`).
pub mod kf {
    /// Read-only access.
    pub const RO: u16 = 1;
    /// Read-write access.
    pub const RW: u16 = 1 << 1;
    /// Overwrite.
    pub const OW: u16 = 1 << 2;
    /// Deletes the key.
    pub const RM: u16 = 1 << 3;
    /// Returns or copies user data from the key: needs read permission.
    pub const ACCESS: u16 = 1 << 4;
    /// Updates the value: needs write permission.
    pub const UPDATE: u16 = 1 << 5;
    /// Adds data: needs write permission.
    pub const INSERT: u16 = 1 << 6;
    /// Removes data: needs write permission.
    pub const DELETE: u16 = 1 << 7;
    /// Not a key (shard channels): skipped.
    pub const NOT_KEY: u16 = 1 << 8;
    /// The spec may miss keys.
    pub const INCOMPLETE: u16 = 1 << 9;
    /// The flags depend on the arguments.
    pub const VARIABLE_FLAGS: u16 = 1 << 10;
}

/// Where the search for a spec's first key starts.
#[derive(Clone, Copy, Debug)]
pub enum Begin {
    /// At this argument.
    Index(i32),
    /// After this (lower-case) keyword, searched from `startfrom`
    /// (negative: from the end, backwards).
    Keyword(&'static [u8], i32),
    /// Not expressible (a `getkeys_proc` knows).
    Unknown,
}

/// How the keys follow the first one.
#[derive(Clone, Copy, Debug)]
pub enum Find {
    /// Up to `lastkey` (relative; negative: from the end), every `step`.
    Range { lastkey: i32, step: i32, limit: i32 },
    /// A count at `keynumidx`, the keys from `firstkey`, every `step`.
    Keynum {
        keynumidx: i32,
        firstkey: i32,
        step: i32,
    },
    /// Not expressible.
    Unknown,
}

/// One Redis key spec.
#[derive(Clone, Copy, Debug)]
pub struct KeySpec {
    pub flags: u16,
    pub begin: Begin,
    pub find: Find,
}

/// A key argument and how it is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyRef {
    pub pos: usize,
    pub flags: u16,
}

/// How the keys of a command are found.
#[derive(Clone, Copy, Debug)]
pub(crate) enum KeySource {
    /// Redis's key specs (and its getkeys fallbacks, by name).
    Specs(&'static str, &'static [KeySpec]),
    /// Our table's positions, with flags from the command's flags.
    Legacy(&'static CommandSpec),
}

impl KeySource {
    pub(crate) fn has_keys(&self) -> bool {
        match self {
            KeySource::Specs(name, specs) => {
                matches!(*name, "sort" | "set" | "bitfield")
                    || specs.iter().any(|s| s.flags & kf::NOT_KEY == 0)
            }
            KeySource::Legacy(spec) => spec.first_key != 0,
        }
    }

    /// The keys of `args` (the command name first).
    pub(crate) fn keys(&self, args: &[&[u8]]) -> Vec<KeyRef> {
        match self {
            KeySource::Specs("set", _) => set_keys(args),
            KeySource::Specs("bitfield", _) => bitfield_keys(args),
            KeySource::Specs("sort", _) => sort_keys(args),
            KeySource::Specs(_, specs) => from_specs(specs, args),
            KeySource::Legacy(spec) => {
                let flags = if spec.flags.has(Flags::READONLY) {
                    kf::RO | kf::ACCESS
                } else {
                    kf::RW | kf::ACCESS | kf::UPDATE
                };
                spec.key_positions(args)
                    .filter(|&pos| pos < args.len())
                    .map(|pos| KeyRef { pos, flags })
                    .collect()
            }
        }
    }
}

fn eq_ic(a: &[u8], b: &[u8]) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// getKeysUsingKeySpecs: an invalid spec (out of range, bad count) yields
/// no keys at all, as Redis (the command then fails on its own).
fn from_specs(specs: &[KeySpec], args: &[&[u8]]) -> Vec<KeyRef> {
    let argc = args.len() as i64;
    let mut out = Vec::new();
    for spec in specs {
        if spec.flags & kf::NOT_KEY != 0 {
            continue;
        }
        let mut first: i64 = match spec.begin {
            Begin::Index(i) => i as i64,
            Begin::Keyword(kw, from) => {
                let from = from as i64;
                let found = if from > 0 {
                    // Never the last argument: a key must follow.
                    (from..argc - 1).find(|&i| eq_ic(args[i as usize], kw))
                } else {
                    let start = argc + from;
                    (2..=start.min(argc - 1))
                        .rev()
                        .find(|&i| eq_ic(args[i as usize], kw))
                };
                match found {
                    Some(i) => i + 1,
                    None => continue,
                }
            }
            Begin::Unknown => return Vec::new(),
        };
        let (last, step) = match spec.find {
            Find::Range {
                lastkey,
                step,
                limit,
            } => {
                let (lastkey, limit) = (lastkey as i64, limit as i64);
                let last = if lastkey >= 0 {
                    first + lastkey
                } else if limit == 0 {
                    argc + lastkey
                } else {
                    first + ((argc - first) / limit + lastkey)
                };
                (last, step as i64)
            }
            Find::Keynum {
                keynumidx,
                firstkey,
                step,
            } => {
                let at = first + keynumidx as i64;
                if keynumidx as i64 >= argc || at >= argc || at < 0 {
                    return Vec::new();
                }
                let n = match std::str::from_utf8(args[at as usize])
                    .ok()
                    .and_then(|s| s.parse::<i64>().ok())
                {
                    Some(n) if n >= 0 => n,
                    _ => return Vec::new(),
                };
                first += firstkey as i64;
                (first + n - 1, step as i64)
            }
            Find::Unknown => return Vec::new(),
        };
        if last < first {
            // No keys (numkeys 0): Redis counts it invalid too.
            return Vec::new();
        }
        if last >= argc || first >= argc {
            return Vec::new();
        }
        let step = step.max(1);
        let mut i = first;
        while i <= last {
            out.push(KeyRef {
                pos: i as usize,
                flags: spec.flags,
            });
            i += step;
        }
        if spec.flags & kf::INCOMPLETE != 0 {
            return Vec::new();
        }
    }
    out
}

/// setGetKeys: with a GET argument the key is also read.
fn set_keys(args: &[&[u8]]) -> Vec<KeyRef> {
    if args.len() < 2 {
        return Vec::new();
    }
    let get = args.iter().skip(3).any(|a| eq_ic(a, b"get"));
    let flags = if get {
        kf::RW | kf::ACCESS | kf::UPDATE
    } else {
        kf::OW | kf::UPDATE
    };
    vec![KeyRef { pos: 1, flags }]
}

/// bitfieldGetKeys: read-only when only GET (and OVERFLOW) appear.
fn bitfield_keys(args: &[&[u8]]) -> Vec<KeyRef> {
    if args.len() < 2 {
        return Vec::new();
    }
    let argc = args.len();
    let mut readonly = true;
    let mut i = 2;
    while i < argc {
        let rem = argc - i - 1;
        let a = args[i];
        if eq_ic(a, b"get") && rem >= 2 {
            i += 3;
        } else if (eq_ic(a, b"set") || eq_ic(a, b"incrby")) && rem >= 3 {
            readonly = false;
            break;
        } else if eq_ic(a, b"overflow") && rem >= 1 {
            i += 2;
        } else {
            readonly = false;
            break;
        }
    }
    let flags = if readonly {
        kf::RO | kf::ACCESS
    } else {
        kf::RW | kf::ACCESS | kf::UPDATE
    };
    vec![KeyRef { pos: 1, flags }]
}

/// sortGetKeys: the sorted key, and the STORE destination if any.
fn sort_keys(args: &[&[u8]]) -> Vec<KeyRef> {
    if args.len() < 2 {
        return Vec::new();
    }
    let mut out = vec![KeyRef {
        pos: 1,
        flags: kf::RO | kf::ACCESS,
    }];
    let mut store = None;
    let mut i = 2;
    while i < args.len() {
        let skip = [(&b"limit"[..], 2), (b"get", 1), (b"by", 1)]
            .iter()
            .find(|(kw, _)| eq_ic(args[i], kw))
            .map(|&(_, n)| n);
        if let Some(n) = skip {
            i += n;
        } else if eq_ic(args[i], b"store") && i + 1 < args.len() {
            // The last STORE wins, as Redis.
            store = Some(i + 1);
            i += 1;
        }
        i += 1;
    }
    if let Some(pos) = store {
        out.push(KeyRef {
            pos,
            flags: kf::OW | kf::UPDATE,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::registry;

    fn keys(line: &str) -> Vec<(usize, u16)> {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        let reg = registry();
        let spec = commands::lookup(args[0]).unwrap();
        let id = reg.resolve(spec, &args);
        reg.info(id)
            .keys
            .keys(&args)
            .into_iter()
            .map(|k| (k.pos, k.flags))
            .collect()
    }

    #[test]
    fn per_position_flags_follow_redis_key_specs() {
        assert_eq!(
            keys("lmove a b left right"),
            vec![
                (1, kf::RW | kf::ACCESS | kf::DELETE),
                (2, kf::RW | kf::INSERT)
            ]
        );
        assert_eq!(
            keys("copy a b"),
            vec![(1, kf::RO | kf::ACCESS), (2, kf::OW | kf::UPDATE)]
        );
        assert_eq!(keys("bitop and d a b").len(), 3);
        assert_eq!(keys("bitop and d a b")[0], (2, kf::OW | kf::UPDATE));
        assert_eq!(
            keys("mset a 1 b 2").iter().map(|k| k.0).collect::<Vec<_>>(),
            vec![1, 3]
        );
        assert_eq!(
            keys("lmpop 2 a b left")
                .iter()
                .map(|k| k.0)
                .collect::<Vec<_>>(),
            vec![2, 3]
        );
        assert!(keys("lmpop x a b left").is_empty());
        assert_eq!(
            keys("eval s 1 k a").iter().map(|k| k.0).collect::<Vec<_>>(),
            vec![3]
        );
        assert_eq!(
            keys("blpop a b 0").iter().map(|k| k.0).collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert_eq!(keys("object encoding k"), vec![(2, kf::RO)]);
        assert!(keys("exists a")[0].1 & (kf::ACCESS | kf::UPDATE | kf::INSERT | kf::DELETE) == 0);
    }

    #[test]
    fn variable_flag_commands() {
        assert_eq!(keys("set k v"), vec![(1, kf::OW | kf::UPDATE)]);
        assert_eq!(
            keys("set k v ex get"),
            vec![(1, kf::RW | kf::ACCESS | kf::UPDATE)]
        );
        assert_eq!(keys("set k get"), vec![(1, kf::OW | kf::UPDATE)]);
        assert_eq!(keys("bitfield k get u4 0"), vec![(1, kf::RO | kf::ACCESS)]);
        assert_eq!(
            keys("bitfield k get u4 0 set u4 0 1")[0].1,
            kf::RW | kf::ACCESS | kf::UPDATE
        );
        assert_eq!(
            keys("sort k by x store d"),
            vec![(1, kf::RO | kf::ACCESS), (5, kf::OW | kf::UPDATE)]
        );
        assert_eq!(keys("sort k"), vec![(1, kf::RO | kf::ACCESS)]);
    }
}
