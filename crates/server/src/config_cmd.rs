//! CONFIG GET / SET / RESETSTAT / REWRITE over a table of parameters.
//!
//! Every parameter CONFIG SET accepts acts on the node. A parameter whose
//! feature does not exist here (RDB/AOF persistence, eviction policies,
//! types not yet implemented) is shown with what it means here and accepts
//! only that value; any other value is refused with Redis's error shape and
//! the reason. Names CONFIG SET does not know get Redis's "Unknown option"
//! error. A SET of several parameters checks them all before applying any.

use std::sync::atomic::Ordering;

use commands::args::is;
use commands::CmdError;
use keyspace::glob::glob_match;

use crate::memory::parse_size;
use crate::node::Node;
use crate::notify;
use crate::session::{Reply, Session};

type Get = fn(&Node) -> String;
/// Checks a value; the returned action applies it. Err: the reason.
type Check = fn(&Node, &str) -> Result<Apply, String>;
type Apply = Box<dyn FnOnce(&Node)>;

struct Param {
    name: &'static str,
    /// Redis's older name for it (CONFIG accepts both).
    alias: Option<&'static str>,
    get: Get,
    /// None: immutable (set in the config file, at start).
    set: Option<Check>,
}

const IMMUTABLE: &str = "can't set immutable config";

/// Shown only when asked for by name, never by a pattern (as Redis's
/// hidden debugging settings).
const HIDDEN: &[&str] = &["key-load-delay"];

fn int(v: &str) -> Result<i64, String> {
    v.parse()
        .map_err(|_| "argument couldn't be parsed into an integer".to_string())
}

fn memory(v: &str) -> Result<u64, String> {
    parse_size(v).ok_or_else(|| "argument must be a memory value".to_string())
}

/// An integer setting of 0 to `i32::MAX`, as Redis bounds them.
fn non_negative(v: &str) -> Result<u32, String> {
    u32::try_from(int(v)?)
        .ok()
        .filter(|v| *v <= i32::MAX as u32)
        .ok_or_else(|| "argument must be between 0 and 2147483647 inclusive".into())
}

/// A setting with one meaning here: only that value is accepted.
fn only(v: &str, allowed: &str, why: &str) -> Result<Apply, String> {
    if v.eq_ignore_ascii_case(allowed) {
        Ok(Box::new(|_| {}))
    } else {
        Err(format!("only '{allowed}' is supported: {why}"))
    }
}

/// Set in the config file, at start: the value it has is accepted (nothing
/// changes), any other refused.
fn unchanged(v: &str, now: &str) -> Result<Apply, String> {
    if v == now {
        Ok(Box::new(|_| {}))
    } else {
        Err("can't be changed at run time here: set it in the config file and restart".into())
    }
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

fn hash_limit(v: &str) -> Result<usize, String> {
    let n = int(v)?;
    if n < 0 {
        return Err("argument must be between 0 and 9223372036854775807 inclusive".into());
    }
    Ok(n as usize)
}

static PARAMS: &[Param] = &[
    Param {
        name: "maxmemory",
        alias: None,
        get: |n| n.runtime.maxmemory().to_string(),
        set: Some(|_, v| {
            let v = memory(v)?;
            Ok(Box::new(move |n| {
                n.runtime.maxmemory.store(v, Ordering::Relaxed)
            }))
        }),
    },
    Param {
        name: "maxmemory-policy",
        alias: None,
        get: |n| n.runtime.maxmemory_policy().name().into(),
        set: Some(|_, v| {
            let p = keyspace::Policy::parse(v).ok_or("argument(s) must be one of the following: volatile-lru, allkeys-lru, volatile-lfu, allkeys-lfu, volatile-random, allkeys-random, volatile-ttl, noeviction")?;
            Ok(Box::new(move |n| n.runtime.set_maxmemory_policy(p)))
        }),
    },
    Param {
        name: "maxmemory-clients",
        alias: None,
        get: |_| "0".into(),
        set: Some(|_, v| {
            if let Some(pct) = v.strip_suffix('%') {
                if int(pct)? > 100 {
                    return Err("percentage argument must be less or equal to 100".into());
                }
            } else {
                memory(v)?;
            }
            only(v, "0", "client eviction is not implemented")
        }),
    },
    Param {
        name: "maxclients",
        alias: None,
        get: |n| n.runtime.maxclients.load(Ordering::Relaxed).to_string(),
        set: Some(|_, v| {
            let v = int(v)?;
            if v < 1 {
                return Err("argument must be between 1 and 4294967295 inclusive".into());
            }
            Ok(Box::new(move |n| {
                n.runtime.maxclients.store(v as usize, Ordering::Relaxed)
            }))
        }),
    },
    Param {
        name: "proto-max-bulk-len",
        alias: None,
        get: |n| {
            n.runtime
                .proto_max_bulk_len
                .load(Ordering::Relaxed)
                .to_string()
        },
        set: Some(|_, v| {
            let v = memory(v)?.max(1 << 20) as usize;
            Ok(Box::new(move |n| {
                n.runtime.proto_max_bulk_len.store(v, Ordering::Relaxed)
            }))
        }),
    },
    Param {
        name: "client-query-buffer-limit",
        alias: None,
        get: |n| {
            n.runtime
                .client_query_buffer_limit
                .load(Ordering::Relaxed)
                .to_string()
        },
        set: Some(|_, v| {
            let v = memory(v)?.max(1 << 20) as usize;
            Ok(Box::new(move |n| {
                n.runtime
                    .client_query_buffer_limit
                    .store(v, Ordering::Relaxed)
            }))
        }),
    },
    Param {
        name: "requirepass",
        alias: None,
        get: |n| n.runtime.requirepass.read().clone().unwrap_or_default(),
        set: Some(|_, v| {
            let v = (!v.is_empty()).then(|| v.to_string());
            Ok(Box::new(move |n| {
                // The default user's password (Redis 6+: requirepass is
                // a shorthand for it).
                let _ = n
                    .users
                    .change(|acl| crate::users::set_default_password(acl, v.as_deref()));
                *n.runtime.requirepass.write() = v;
            }))
        }),
    },
    Param {
        name: "acllog-max-len",
        alias: None,
        get: |n| n.users.log.lock().max_len().to_string(),
        set: Some(|_, v| {
            let v = int(v)?;
            if v < 0 {
                return Err("argument must be between 0 and 9223372036854775807 inclusive".into());
            }
            Ok(Box::new(move |n| {
                n.users.log.lock().set_max_len(v as usize)
            }))
        }),
    },
    Param {
        name: "acl-pubsub-default",
        alias: None,
        get: |n| {
            if n.users.pubsub_default_all() {
                "allchannels".into()
            } else {
                "resetchannels".into()
            }
        },
        set: Some(|_, v| {
            let all = match v.to_ascii_lowercase().as_str() {
                "allchannels" => true,
                "resetchannels" => false,
                _ => {
                    return Err(
                        "argument(s) must be one of the following: allchannels, resetchannels"
                            .into(),
                    )
                }
            };
            Ok(Box::new(move |n| n.users.set_pubsub_default(all)))
        }),
    },
    Param {
        name: "aclfile",
        alias: None,
        get: |n| {
            n.users
                .file
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        },
        set: None,
    },
    Param {
        name: "hz",
        alias: None,
        get: |n| n.runtime.hz.load(Ordering::Relaxed).to_string(),
        set: Some(|_, v| {
            let v = int(v)?;
            if v < 0 {
                return Err("argument must be between 0 and 2147483647 inclusive".into());
            }
            let v = (v as u64).clamp(1, 500);
            Ok(Box::new(move |n| n.runtime.hz.store(v, Ordering::Relaxed)))
        }),
    },
    Param {
        name: "notify-keyspace-events",
        alias: None,
        get: |n| notify::format(n.events.flags()),
        set: Some(|_, v| {
            let flags =
                notify::parse(v).ok_or("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")?;
            Ok(Box::new(move |n| n.events.set(&n.ks, flags)))
        }),
    },
    Param {
        name: "tracking-table-max-keys",
        alias: None,
        get: |n| n.tracking.max_keys().to_string(),
        set: Some(|_, v| {
            let v = hash_limit(v)?;
            Ok(Box::new(move |n| n.tracking.set_max_keys(v)))
        }),
    },
    Param {
        name: "hash-max-listpack-entries",
        alias: Some("hash-max-ziplist-entries"),
        get: |n| n.ks.encodings().hash_max_entries().to_string(),
        set: Some(|_, v| {
            let v = hash_limit(v)?;
            Ok(Box::new(move |n| n.ks.encodings().set_hash_max_entries(v)))
        }),
    },
    Param {
        name: "hash-max-listpack-value",
        alias: Some("hash-max-ziplist-value"),
        get: |n| n.ks.encodings().hash_max_value().to_string(),
        set: Some(|_, v| {
            let v = hash_limit(v)?;
            Ok(Box::new(move |n| n.ks.encodings().set_hash_max_value(v)))
        }),
    },
    Param {
        name: "min-replicas-to-write",
        alias: Some("min-slaves-to-write"),
        get: |n| {
            n.runtime
                .min_replicas_to_write
                .load(Ordering::Relaxed)
                .to_string()
        },
        set: Some(|_, v| {
            let v = hash_limit(v)?;
            Ok(Box::new(move |n| {
                n.runtime.min_replicas_to_write.store(v, Ordering::Relaxed)
            }))
        }),
    },
    Param {
        name: "min-replicas-max-lag",
        alias: Some("min-slaves-max-lag"),
        get: |_| "10".into(),
        set: Some(|_, v| {
            only(
                v,
                "10",
                "in-sync replicas hold every acknowledged write: there is no lag to bound",
            )
        }),
    },
    Param {
        name: "maxmemory-samples",
        alias: None,
        get: |n| {
            n.runtime
                .maxmemory_samples
                .load(Ordering::Relaxed)
                .to_string()
        },
        set: Some(|_, v| {
            let v = int(v)?;
            if !(1..=64).contains(&v) {
                return Err("argument must be between 1 and 64 inclusive".into());
            }
            Ok(Box::new(move |n| {
                n.runtime
                    .maxmemory_samples
                    .store(v as usize, Ordering::Relaxed)
            }))
        }),
    },
    Param {
        name: "busy-reply-threshold",
        alias: Some("lua-time-limit"),
        get: |n| {
            n.scripts
                .watchdog
                .threshold_ms
                .load(Ordering::Relaxed)
                .to_string()
        },
        set: Some(|_, v| {
            let v = non_negative(v)?;
            Ok(Box::new(move |n| {
                n.scripts
                    .watchdog
                    .threshold_ms
                    .store(v as u64, Ordering::Relaxed)
            }))
        }),
    },
    Param {
        name: "lfu-log-factor",
        alias: None,
        get: |_| keyspace::access::lfu_log_factor().to_string(),
        set: Some(|_, v| {
            let v = non_negative(v)?;
            Ok(Box::new(move |_| keyspace::access::set_lfu_log_factor(v)))
        }),
    },
    Param {
        name: "lfu-decay-time",
        alias: None,
        get: |_| keyspace::access::lfu_decay_time().to_string(),
        set: Some(|_, v| {
            let v = non_negative(v)?;
            Ok(Box::new(move |_| keyspace::access::set_lfu_decay_time(v)))
        }),
    },
    Param {
        name: "hll-sparse-max-bytes",
        alias: None,
        get: |_| commands::hyperloglog::SPARSE_MAX_BYTES.to_string(),
        set: Some(|_, v| {
            only(
                v,
                &commands::hyperloglog::SPARSE_MAX_BYTES.to_string(),
                "a sparse HyperLogLog turns dense past Redis's default size",
            )
        }),
    },
    Param {
        name: "key-load-delay",
        alias: None,
        get: |_| "0".into(),
        set: Some(|_, v| only(v, "0", "nothing is loaded at start to be slowed down")),
    },
    Param {
        name: "save",
        alias: None,
        get: |_| String::new(),
        set: Some(|_, v| {
            only(
                v,
                "",
                "snapshots follow the change log's growth (node.snapshot_every) and BGSAVE",
            )
        }),
    },
    Param {
        name: "appendonly",
        alias: None,
        // The change log of local persistence (node.persistence = "log").
        get: |n| yes_no(n.store.is_some()),
        set: Some(|n, v| unchanged(v, &yes_no(n.store.is_some()))),
    },
    Param {
        name: "appendfsync",
        alias: None,
        get: |n| {
            n.store
                .as_ref()
                .map_or("no", |(s, _)| s.cfg.fsync.name())
                .into()
        },
        set: Some(|n, v| {
            let now = n.store.as_ref().map_or("no", |(s, _)| s.cfg.fsync.name());
            unchanged(v, now)
        }),
    },
    Param {
        name: "timeout",
        alias: None,
        get: |_| "0".into(),
        set: Some(|_, v| only(v, "0", "idle clients are not closed")),
    },
    Param {
        name: "tcp-keepalive",
        alias: None,
        get: |_| "0".into(),
        set: Some(|_, v| only(v, "0", "TCP keepalive is not set on client sockets")),
    },
    Param {
        name: "set-max-intset-entries",
        alias: None,
        get: |n| n.ks.encodings().set_max_intset().to_string(),
        set: Some(|_, v| {
            let v = hash_limit(v)?;
            Ok(Box::new(move |n| n.ks.encodings().set_set_max_intset(v)))
        }),
    },
    Param {
        name: "set-max-listpack-entries",
        alias: None,
        get: |n| n.ks.encodings().set_max_entries().to_string(),
        set: Some(|_, v| {
            let v = hash_limit(v)?;
            Ok(Box::new(move |n| n.ks.encodings().set_set_max_entries(v)))
        }),
    },
    Param {
        name: "set-max-listpack-value",
        alias: None,
        get: |n| n.ks.encodings().set_max_value().to_string(),
        set: Some(|_, v| {
            let v = hash_limit(v)?;
            Ok(Box::new(move |n| n.ks.encodings().set_set_max_value(v)))
        }),
    },
    Param {
        name: "zset-max-listpack-entries",
        alias: Some("zset-max-ziplist-entries"),
        get: |n| n.ks.encodings().zset_max_entries().to_string(),
        set: Some(|_, v| {
            let v = hash_limit(v)?;
            Ok(Box::new(move |n| n.ks.encodings().set_zset_max_entries(v)))
        }),
    },
    Param {
        name: "zset-max-listpack-value",
        alias: Some("zset-max-ziplist-value"),
        get: |n| n.ks.encodings().zset_max_value().to_string(),
        set: Some(|_, v| {
            let v = hash_limit(v)?;
            Ok(Box::new(move |n| n.ks.encodings().set_zset_max_value(v)))
        }),
    },
    Param {
        name: "list-max-listpack-size",
        alias: Some("list-max-ziplist-size"),
        get: |n| n.ks.encodings().list_max_size().to_string(),
        set: Some(|_, v| {
            let v = int(v)?;
            if i32::try_from(v).is_err() {
                return Err("argument must be between -2147483648 and 2147483647 inclusive".into());
            }
            Ok(Box::new(move |n| n.ks.encodings().set_list_max_size(v)))
        }),
    },
    Param {
        name: "databases",
        alias: None,
        get: |_| "1".into(),
        set: None,
    },
    Param {
        name: "daemonize",
        alias: None,
        get: |_| "no".into(),
        set: None,
    },
    Param {
        name: "replicaof",
        alias: Some("slaveof"),
        get: |_| String::new(),
        set: None,
    },
    Param {
        name: "port",
        alias: None,
        get: |n| n.settings.listen.port().to_string(),
        set: Some(|n, v| unchanged(v, &n.settings.listen.port().to_string())),
    },
    Param {
        name: "bind",
        alias: None,
        get: |n| n.settings.listen.ip().to_string(),
        set: Some(|n, v| unchanged(v, &n.settings.listen.ip().to_string())),
    },
    Param {
        name: "dir",
        alias: None,
        get: |n| n.settings.data_dir.display().to_string(),
        set: Some(|n, v| unchanged(v, &n.settings.data_dir.display().to_string())),
    },
    Param {
        name: "cluster-enabled",
        alias: None,
        get: |n| yes_no(n.cluster.is_some()),
        set: None,
    },
    Param {
        name: "enable-debug-command",
        alias: None,
        get: |n| yes_no(n.settings.enable_debug_command),
        set: None,
    },
    Param {
        name: "tls-port",
        alias: None,
        get: |n| {
            n.tls
                .as_ref()
                .map_or(0, |t| t.settings().listen.port())
                .to_string()
        },
        set: None,
    },
    Param {
        name: "tls-cert-file",
        alias: None,
        get: |n| tls_get(n, |t| t.cert_file.display().to_string()),
        set: Some(tls_path),
    },
    Param {
        name: "tls-key-file",
        alias: None,
        get: |n| tls_get(n, |t| t.key_file.display().to_string()),
        set: Some(tls_path),
    },
    Param {
        name: "tls-ca-cert-file",
        alias: None,
        get: |n| {
            tls_get(n, |t| {
                t.ca_cert_file
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            })
        },
        set: Some(|_, _| Ok(Box::new(|_| {}))),
    },
    Param {
        name: "tls-auth-clients",
        alias: None,
        // Redis's default, also shown while TLS is off.
        get: |n| {
            n.tls
                .as_ref()
                .map_or("yes", |t| t.settings().auth_clients.name())
                .to_string()
        },
        set: Some(|_, v| {
            crate::tls::AuthClients::parse(v)
                .map(|_| -> Apply { Box::new(|_| {}) })
                .ok_or_else(|| "argument(s) must be one of the following: no, yes, optional".into())
        }),
    },
];

fn tls_get(n: &Node, f: impl Fn(&crate::tls::TlsSettings) -> String) -> String {
    n.tls.as_ref().map(|t| f(&t.settings())).unwrap_or_default()
}

/// A path is read (and checked) by [`set_tls`], with the other tls-* files.
fn tls_path(_: &Node, _: &str) -> Result<Apply, String> {
    Ok(Box::new(|_| {}))
}

/// CONFIG SET of `tls-*` parameters, all at once: the files they name are
/// read together (a new certificate with its new key) before anything
/// else is applied; on an error nothing changes. New TLS connections get
/// the result, open ones keep theirs.
fn set_tls(node: &Node, changes: &[(&'static str, String)]) -> Result<(), (String, String)> {
    if changes.is_empty() {
        return Ok(());
    }
    let Some(tls) = &node.tls else {
        // Without TLS, setting a value to what CONFIG GET shows changes
        // nothing (Redis accepts it too); anything else needs tls_listen.
        let unchanged = changes
            .iter()
            .all(|(name, v)| find(name.as_bytes()).is_some_and(|p| (p.get)(node) == *v));
        if unchanged {
            return Ok(());
        }
        let name = changes[0].0.to_string();
        return Err((
            name,
            "TLS is not enabled: set node.tls_listen in the config file and restart".into(),
        ));
    };
    tls.reconfigure(|t| {
        for (name, v) in changes {
            match *name {
                "tls-cert-file" => t.cert_file = v.into(),
                "tls-key-file" => t.key_file = v.into(),
                "tls-ca-cert-file" => t.ca_cert_file = (!v.is_empty()).then(|| v.into()),
                "tls-auth-clients" => {
                    t.auth_clients = crate::tls::AuthClients::parse(v).unwrap_or(t.auth_clients)
                }
                _ => {}
            }
        }
    })
    .map_err(|e| (changes[0].0.to_string(), e))
}

fn find(name: &[u8]) -> Option<&'static Param> {
    PARAMS.iter().find(|p| {
        name.eq_ignore_ascii_case(p.name.as_bytes())
            || p.alias
                .is_some_and(|a| name.eq_ignore_ascii_case(a.as_bytes()))
    })
}

pub fn config(s: &mut Session, a: &[&[u8]], out: Reply) -> Result<(), CmdError> {
    let sub = &a[1];
    let node = &s.node;
    if is(sub, "GET") {
        if a.len() < 3 {
            return Err(CmdError::WrongArity("config|get".into()));
        }
        // A plain name is echoed as the client typed it; glob matches
        // answer with our (lower-case) names. Each parameter appears once.
        let mut matched: Vec<(Vec<u8>, &Param)> = Vec::new();
        for p in &a[2..] {
            let lower = p.to_ascii_lowercase();
            let is_glob = p.iter().any(|b| matches!(b, b'*' | b'?' | b'['));
            let names = PARAMS
                .iter()
                .flat_map(|p| std::iter::once((p.name, p)).chain(p.alias.map(|a| (a, p))));
            for (name, param) in names {
                if is_glob && HIDDEN.contains(&name) {
                    continue;
                }
                let hit = if is_glob {
                    glob_match(&lower, name.as_bytes())
                } else {
                    lower == name.as_bytes()
                };
                let key = if is_glob {
                    name.as_bytes().to_vec()
                } else {
                    p.to_vec()
                };
                if hit && !matched.iter().any(|(m, _)| m.eq_ignore_ascii_case(&key)) {
                    matched.push((key, param));
                }
            }
        }
        out.map(matched.len());
        for (k, p) in matched {
            out.bulk(&k);
            out.bulk((p.get)(node).as_bytes());
        }
    } else if is(sub, "SET") {
        if a.len() < 4 || !a.len().is_multiple_of(2) {
            return Err(CmdError::WrongArity("config|set".into()));
        }
        let mut actions: Vec<Apply> = Vec::new();
        let mut seen: Vec<&'static str> = Vec::new();
        let mut tls_changes: Vec<(&'static str, String)> = Vec::new();
        for pair in a[2..].chunks(2) {
            let typed = String::from_utf8_lossy(pair[0]).into_owned();
            let failed = |why: &str| {
                CmdError::other(format!(
                    "ERR CONFIG SET failed (possibly related to argument '{typed}') - {why}"
                ))
            };
            let Some(param) = find(pair[0]) else {
                return Err(CmdError::other(format!(
                    "ERR Unknown option or number of arguments for CONFIG SET - '{typed}'"
                )));
            };
            if seen.contains(&param.name) {
                return Err(failed("duplicate parameter"));
            }
            seen.push(param.name);
            let check = param.set.ok_or_else(|| failed(IMMUTABLE))?;
            let value = String::from_utf8_lossy(pair[1]);
            actions.push(check(node, &value).map_err(|why| failed(&why))?);
            if param.name.starts_with("tls-") {
                tls_changes.push((param.name, value.into_owned()));
            }
        }
        set_tls(node, &tls_changes).map_err(|(name, why)| {
            CmdError::other(format!(
                "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
            ))
        })?;
        for apply in actions {
            apply(node);
        }
        out.simple("OK");
    } else if is(sub, "RESETSTAT") {
        out.simple("OK");
    } else if is(sub, "REWRITE") {
        return Err(CmdError::other(
            "ERR The server is running without a config file",
        ));
    } else {
        return Err(CmdError::UnknownSubcommand {
            cmd: "CONFIG".into(),
            sub: String::from_utf8_lossy(sub).into(),
        });
    }
    Ok(())
}
