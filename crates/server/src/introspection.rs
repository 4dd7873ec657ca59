//! COMMAND and INFO: what the server says about itself. COMMAND is generated
//! from the command table, so it can never disagree with dispatch.

use commands::args::is;
use commands::{lookup, CmdError, CommandSpec, TABLE};
use keyspace::glob::glob_match;
use keyspace::ChangeKind;

use crate::session::{Reply, Session};

pub fn command(a: &[&[u8]], out: Reply) -> Result<(), CmdError> {
    let Some(sub) = a.get(1) else {
        out.array(TABLE.len());
        for c in TABLE {
            command_info(c, out);
        }
        return Ok(());
    };
    let sub_arity = |ok: bool, name: &str| {
        if ok {
            Ok(())
        } else {
            Err(CmdError::WrongArity(format!("command|{name}")))
        }
    };
    if is(sub, "COUNT") {
        sub_arity(a.len() == 2, "count")?;
        out.int(TABLE.len() as i64);
    } else if is(sub, "INFO") {
        let names: Vec<&[u8]> = if a.len() > 2 {
            a[2..].iter().map(|b| &b[..]).collect()
        } else {
            TABLE.iter().map(|c| c.name.as_bytes()).collect()
        };
        out.array(names.len());
        for n in names {
            match lookup(n) {
                Some(c) => command_info(c, out),
                None => out.null(),
            }
        }
    } else if is(sub, "DOCS") {
        let specs: Vec<&CommandSpec> = if a.len() > 2 {
            a[2..].iter().filter_map(|n| lookup(n)).collect()
        } else {
            TABLE.iter().collect()
        };
        out.map(specs.len());
        for c in specs {
            out.bulk(c.name.as_bytes());
            out.map(4);
            out.bulk(b"summary");
            out.bulk(c.summary.as_bytes());
            out.bulk(b"since");
            out.bulk(c.since.as_bytes());
            out.bulk(b"group");
            out.bulk(c.group.as_bytes());
            // Arguments as far as the table knows them: the key arguments.
            let keys = if c.first_key > 0 { 1 } else { 0 };
            out.bulk(b"arguments");
            out.array(keys);
            if keys == 1 {
                out.map(4);
                out.bulk(b"name");
                out.bulk(b"key");
                out.bulk(b"type");
                out.bulk(b"key");
                out.bulk(b"display_text");
                out.bulk(b"key");
                out.bulk(b"key_spec_index");
                out.int(0);
            }
        }
    } else if is(sub, "GETKEYS") || is(sub, "GETKEYSANDFLAGS") {
        let Some(spec) = a.get(2).and_then(|n| lookup(n)) else {
            return Err(CmdError::other("ERR Invalid command specified"));
        };
        let args = &a[2..];
        if !spec.arity_ok(args.len()) {
            return Err(CmdError::other(
                "ERR Invalid number of arguments specified for command",
            ));
        }
        let keys: Vec<usize> = spec.key_positions(args).collect();
        if keys.is_empty() {
            return Err(CmdError::other("ERR The command has no key arguments"));
        }
        let with_flags = is(sub, "GETKEYSANDFLAGS");
        out.array(keys.len());
        for i in keys {
            if with_flags {
                out.array(2);
                out.bulk(args[i]);
                let flag: &[u8] = if spec.flags.has(commands::Flags::WRITE) {
                    b"RW"
                } else {
                    b"RO"
                };
                out.array(1);
                out.simple(std::str::from_utf8(flag).unwrap_or("RO"));
            } else {
                out.bulk(args[i]);
            }
        }
    } else if is(sub, "LIST") {
        let pattern = match a.get(2) {
            None => None,
            Some(f) if is(f, "FILTERBY") && a.len() == 5 && is(a[3], "PATTERN") => Some(a[4]),
            Some(_) => return Err(CmdError::Syntax),
        };
        let subs = SUBCOMMANDS
            .iter()
            .flat_map(|(parent, subs)| subs.iter().map(move |s| format!("{parent}|{s}")));
        let names: Vec<String> = TABLE
            .iter()
            .map(|c| c.name.to_string())
            .chain(subs)
            .filter(|n| pattern.as_ref().is_none_or(|p| glob_match(p, n.as_bytes())))
            .collect();
        out.array(names.len());
        for n in names {
            out.bulk(n.as_bytes());
        }
    } else {
        return Err(CmdError::UnknownSubcommand {
            cmd: "COMMAND".into(),
            sub: String::from_utf8_lossy(sub).into(),
        });
    }
    Ok(())
}

/// Subcommands of the container commands, for COMMAND LIST.
const SUBCOMMANDS: [(&str, &[&str]); 6] = [
    (
        "client",
        &[
            "caching",
            "getname",
            "getredir",
            "id",
            "info",
            "kill",
            "list",
            "no-evict",
            "no-touch",
            "setinfo",
            "setname",
            "tracking",
            "trackinginfo",
        ],
    ),
    ("command", &["count", "docs", "info", "list"]),
    ("config", &["get", "resetstat", "rewrite", "set"]),
    (
        "debug",
        &[
            "clock-advance",
            "cluster-hold",
            "cluster-isolate",
            "help",
            "object",
            "pause-cron",
            "protocol",
            "set-active-expire",
            "sleep",
        ],
    ),
    ("memory", &["help", "malloc-stats", "purge", "usage"]),
    ("object", &["encoding", "help", "refcount"]),
];

/// One command's entry in Redis 7's COMMAND INFO shape (10 elements).
fn command_info(c: &CommandSpec, out: Reply) {
    out.array(10);
    out.bulk(c.name.as_bytes());
    out.int(c.arity as i64);
    // Keys after a count (EVAL, FCALL): "movablekeys", positions 0, and a
    // keynum key spec; clients then ask COMMAND GETKEYS, as with Redis.
    let movable = c.first_key < 0;
    let mut flags: Vec<&str> = c.flags.names().collect();
    if movable {
        flags.push("movablekeys");
    }
    out.set(flags.len());
    for f in flags {
        out.simple(f);
    }
    let (first, last, step) = if movable {
        (0, 0, 0)
    } else {
        (c.first_key, c.last_key, c.step)
    };
    out.int(first as i64);
    out.int(last as i64);
    out.int(step as i64);
    let cats = c.acl_categories();
    out.set(cats.len());
    for cat in cats {
        out.simple(&cat);
    }
    out.set(0);
    if c.first_key != 0 {
        // One key spec: keys from an index, as a range, or (EVAL, FCALL)
        // as many as the count at the index says.
        out.array(1);
        out.map(4);
        out.bulk(b"flags");
        out.set(0);
        out.bulk(b"begin_search");
        out.map(2);
        out.bulk(b"type");
        out.bulk(b"index");
        out.bulk(b"spec");
        out.map(1);
        out.bulk(b"index");
        out.int(c.first_key.abs() as i64);
        out.bulk(b"find_keys");
        out.map(2);
        out.bulk(b"type");
        let spec: [(&[u8], i64); 3] = if movable {
            out.bulk(b"keynum");
            [(b"keynumidx", 0), (b"firstkey", 1), (b"keystep", 1)]
        } else {
            out.bulk(b"range");
            let last = if c.last_key < 0 {
                c.last_key
            } else {
                c.last_key - c.first_key
            };
            [
                (b"lastkey", last as i64),
                (b"keystep", c.step as i64),
                (b"limit", 0),
            ]
        };
        out.bulk(b"spec");
        out.map(spec.len());
        for (name, v) in spec {
            out.bulk(name);
            out.int(v);
        }
        out.bulk(b"notes");
        out.bulk(b"");
    } else {
        out.array(0);
    }
    out.array(0);
}

/// Sections in INFO's order; `commandstats` only when asked for (or
/// `all`/`everything`), as in Redis.
const SECTIONS: [&str; 11] = [
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "commandstats",
    "errorstats",
    "cluster",
    "keyspace",
];

pub fn info(s: &Session, a: &[&[u8]], out: Reply) -> Result<(), CmdError> {
    let wanted: Vec<String> = a[1..]
        .iter()
        .map(|x| String::from_utf8_lossy(x).to_ascii_lowercase())
        .collect();
    let everything = wanted.iter().any(|w| w == "all" || w == "everything");
    let default = wanted.is_empty() || wanted.iter().any(|w| w == "default");
    let mut text = String::new();
    for section in SECTIONS {
        if everything
            || (default && section != "commandstats")
            || wanted.iter().any(|w| w == section)
        {
            if !text.is_empty() {
                text.push_str("\r\n");
            }
            section_text(s, section, &mut text);
        }
    }
    out.verbatim("txt", text.as_bytes());
    Ok(())
}

fn section_text(s: &Session, section: &str, t: &mut String) {
    use std::fmt::Write;
    let node = &s.node;
    let mut title = section.to_string();
    title[..1].make_ascii_uppercase();
    if section == "cpu" {
        title.make_ascii_uppercase();
    }
    let _ = write!(t, "# {title}\r\n");
    let mut kv = |k: &str, v: &dyn std::fmt::Display| {
        let _ = write!(t, "{k}:{v}\r\n");
    };
    match section {
        "server" => {
            let up = node.started.elapsed().as_secs();
            kv("redis_version", &crate::REDIS_VERSION);
            kv("redis_git_sha1", &"00000000");
            kv("redis_git_dirty", &0);
            kv("redis_build_id", &"0");
            kv("deltagrid_version", &env!("CARGO_PKG_VERSION"));
            kv("redis_mode", &"standalone");
            kv("os", &std::env::consts::OS);
            kv("arch_bits", &64);
            kv("multiplexing_api", &"epoll");
            kv("atomicvar_api", &"c11-builtin");
            kv("process_id", &std::process::id());
            kv("run_id", &node.run_id);
            kv("tcp_port", &node.settings.listen.port());
            kv("uptime_in_seconds", &up);
            kv("uptime_in_days", &(up / 86400));
            let hz = node.runtime.hz.load(std::sync::atomic::Ordering::Relaxed);
            kv("hz", &hz);
            kv("configured_hz", &hz);
            kv(
                "executable",
                &std::env::current_exe().map_or(String::new(), |p| p.display().to_string()),
            );
            kv("node_id", &node.settings.node_id);
            kv("site_id", &node.settings.site_id);
            kv("site_name", &node.settings.site_name);
            kv("partitions", &node.settings.partitions);
            // Worker threads of the runtime serving this node (node.threads).
            let workers =
                tokio::runtime::Handle::try_current().map_or(0, |h| h.metrics().num_workers());
            kv("threads", &workers);
        }
        "clients" => {
            kv("connected_clients", &node.clients.len());
            kv(
                "maxclients",
                &node
                    .runtime
                    .maxclients
                    .load(std::sync::atomic::Ordering::Relaxed),
            );
            kv("blocked_clients", &node.blocking.blocked());
            kv(
                "tracking_clients",
                &node
                    .clients
                    .all()
                    .iter()
                    .filter(|c| c.tracking.lock().on)
                    .count(),
            );
        }
        "memory" => {
            let used = node.used_memory();
            kv("used_memory", &used);
            kv("used_memory_human", &human(used as u64));
            let (rss, peak) = (crate::memory::rss(), crate::memory::peak());
            kv("used_memory_rss", &rss);
            kv("used_memory_rss_human", &human(rss as u64));
            kv("used_memory_peak", &peak);
            kv("used_memory_peak_human", &human(peak as u64));
            kv("used_memory_dataset", &node.ks.footprint());
            kv("partition_log_bytes", &node.ks.log_bytes());
            kv("maxmemory", &node.runtime.maxmemory());
            kv("maxmemory_human", &human(node.runtime.maxmemory()));
            kv("maxmemory_policy", &node.runtime.maxmemory_policy().name());
            let lua = crate::scripts::memory(node);
            kv("used_memory_lua", &lua.lua_bytes);
            kv("used_memory_vm_functions", &lua.functions_lua_bytes);
            kv("used_memory_scripts", &lua.script_bytes);
            kv("number_of_cached_scripts", &lua.scripts);
            kv("number_of_functions", &lua.functions);
            kv("number_of_libraries", &lua.libraries);
            kv(
                "mem_fragmentation_ratio",
                &format!("{:.2}", rss as f64 / used.max(1) as f64),
            );
            // Everything counts against maxmemory; nothing is freed later.
            kv("mem_not_counted_for_evict", &0);
            kv("lazyfree_pending_objects", &0);
            // The system allocator, counted (server::memory).
            kv("mem_allocator", &"libc");
        }
        "persistence" => {
            // Without persistence nothing is saved: the changes this node's
            // writes logged since it started, one per key a write changed
            // (Redis's dirty counter, near enough: Redis counts some
            // multi-field writes once per field, and no expiries).
            let st = node.ks.stats();
            let changes: u64 = ChangeKind::NAMES
                .iter()
                .enumerate()
                .filter(|(_, name)| !matches!(**name, "expire" | "evict"))
                .map(|(k, _)| st.count(k))
                .sum();
            crate::persistence_cmd::info(node, changes, &mut kv);
        }
        "stats" => {
            use std::sync::atomic::Ordering::Relaxed;
            let m = &node.metrics;
            let st = node.ks.stats();
            kv(
                "total_connections_received",
                &m.connections_received.load(Relaxed),
            );
            kv("total_commands_processed", &m.commands_processed());
            kv(
                "rejected_connections",
                &m.rejected_connections.load(Relaxed),
            );
            kv("expired_keys", &st.count(3));
            kv("evicted_keys", &st.count(ChangeKind::EVICT_INDEX));
            kv("tracking_total_keys", &node.tracking.tracked_keys());
            kv("tracking_total_items", &node.tracking.items());
            kv("tracking_total_prefixes", &node.tracking.prefixes());
            kv("total_error_replies", &m.error_replies());
            kv("changes_full", &st.count(0));
            kv("changes_delta", &st.count(1));
            kv("changes_delete", &st.count(2));
            kv("changes_expire", &st.count(3));
            kv("changes_evict", &st.count(ChangeKind::EVICT_INDEX));
            kv("delta_bytes_saved", &st.delta_bytes_saved());
        }
        "replication" => {
            kv("role", &"master");
            if let Some(site) = node.cluster.as_ref().map(|c| c.status()) {
                let me = site.members.iter().find(|m| m.myself);
                kv("partition_table_epoch", &site.epoch);
                kv("partitions_primary", &me.map_or(0, |m| m.primaries));
                kv("partitions_backup", &me.map_or(0, |m| m.replicas));
                kv("primary_changes", &site.primary_changes);
                kv("partitions_migrating", &site.migrating);
                kv("lease", &(site.lease as u8));
                kv("handovers", &site.handovers);
                if let Some(c) = &node.cluster {
                    use std::sync::atomic::Ordering::Relaxed;
                    let sent = c.replicator.sent();
                    kv("snapshots_sent", &sent.snapshots.load(Relaxed));
                    kv("snapshot_keys_sent", &sent.snapshot_keys.load(Relaxed));
                    kv("catch_ups_sent", &sent.catch_ups.load(Relaxed));
                    kv(
                        "catch_up_changes_sent",
                        &sent.catch_up_changes.load(Relaxed),
                    );
                }
                for m in site.members.iter().filter(|m| !m.myself) {
                    let line = format!(
                        "state={},connected={},replication_pending_bytes={},lag_changes={}",
                        m.state, m.connected as u8, m.pending_bytes, m.lag_changes
                    );
                    kv(&format!("peer_{}", m.node_id), &line);
                }
            }
            kv("connected_slaves", &0);
            kv("master_failover_state", &"no-failover");
            kv("master_replid", &node.run_id);
            kv("master_repl_offset", &0);
        }
        "cluster" => {
            kv("cluster_enabled", &(node.cluster.is_some() as u8));
        }
        "cpu" => {
            let (sys, user) = cpu_seconds(libc::RUSAGE_SELF);
            let (csys, cuser) = cpu_seconds(libc::RUSAGE_CHILDREN);
            kv("used_cpu_sys", &format!("{sys:.6}"));
            kv("used_cpu_user", &format!("{user:.6}"));
            kv("used_cpu_sys_children", &format!("{csys:.6}"));
            kv("used_cpu_user_children", &format!("{cuser:.6}"));
        }
        "commandstats" => {
            for c in node.metrics.commandstats() {
                let per_call = if c.calls > 0 {
                    c.usec as f64 / c.calls as f64
                } else {
                    0.0
                };
                kv(
                    &format!("cmdstat_{}", c.name),
                    &format!(
                        "calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}",
                        c.calls, c.usec, c.rejected, c.failed
                    ),
                );
            }
        }
        "errorstats" => {
            for (prefix, count) in node.metrics.errorstats() {
                kv(&format!("errorstat_{prefix}"), &format!("count={count}"));
            }
        }
        "keyspace" => {
            let keys = node.ks.len();
            if keys > 0 {
                let _ = write!(
                    t,
                    "db0:keys={},expires={},avg_ttl=0\r\n",
                    keys,
                    node.ks.expires_len()
                );
            }
        }
        _ => {}
    }
}

/// (system, user) CPU seconds of this process or of its children.
fn cpu_seconds(who: libc::c_int) -> (f64, f64) {
    // SAFETY: getrusage writes the struct it is given and nothing else.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(who, &mut ru) } != 0 {
        return (0.0, 0.0);
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(ru.ru_stime), secs(ru.ru_utime))
}

fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "K", "M", "G", "T"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.2}{}", UNITS[u])
}
