//! CONFIG GET / SET / RESETSTAT / REWRITE for the settings clients and tools
//! probe. Values that deltagrid does not have (save, appendonly) answer with
//! what they mean here, so tools like redis-benchmark read them correctly.

use std::sync::atomic::Ordering;

use commands::args::is;
use commands::CmdError;
use keyspace::glob::glob_match;

use crate::memory::parse_size;
use crate::session::{Reply, Session};

fn params(s: &Session) -> Vec<(&'static str, String)> {
    let rt = &s.node.runtime;
    vec![
        ("maxmemory", rt.maxmemory().to_string()),
        ("maxmemory-policy", "noeviction".into()),
        (
            "maxclients",
            rt.maxclients.load(Ordering::Relaxed).to_string(),
        ),
        (
            "proto-max-bulk-len",
            rt.proto_max_bulk_len.load(Ordering::Relaxed).to_string(),
        ),
        (
            "client-query-buffer-limit",
            rt.client_query_buffer_limit
                .load(Ordering::Relaxed)
                .to_string(),
        ),
        (
            "requirepass",
            rt.requirepass.read().clone().unwrap_or_default(),
        ),
        ("save", String::new()),
        ("appendonly", "no".into()),
        ("databases", "1".into()),
        ("port", s.node.settings.listen.port().to_string()),
        ("bind", s.node.settings.listen.ip().to_string()),
        ("timeout", "0".into()),
        ("tcp-keepalive", "300".into()),
        ("hz", "10".into()),
        ("cluster-enabled", "no".into()),
        (
            "tracking-table-max-keys",
            s.node.settings.tracking_table_max_keys.to_string(),
        ),
        ("dir", s.node.settings.data_dir.display().to_string()),
        // Encoding thresholds clients and tools probe; informational here.
        ("hash-max-listpack-entries", "128".into()),
        ("hash-max-listpack-value", "64".into()),
        ("hash-max-ziplist-entries", "128".into()),
        ("hash-max-ziplist-value", "64".into()),
        ("list-max-listpack-size", "-2".into()),
        ("set-max-intset-entries", "512".into()),
        ("set-max-listpack-entries", "128".into()),
        ("zset-max-listpack-entries", "128".into()),
        ("zset-max-ziplist-entries", "128".into()),
        (
            "enable-debug-command",
            if s.node.settings.enable_debug_command {
                "yes"
            } else {
                "no"
            }
            .into(),
        ),
    ]
}

pub fn config(s: &mut Session, a: &[&[u8]], out: Reply) -> Result<(), CmdError> {
    let sub = &a[1];
    if is(sub, "GET") {
        if a.len() < 3 {
            return Err(CmdError::WrongArity("config|get".into()));
        }
        let all = params(s);
        // A plain name is echoed as the client typed it; glob matches
        // answer with our (lower-case) names. Each parameter appears once.
        let mut matched: Vec<(Vec<u8>, &String)> = Vec::new();
        for p in &a[2..] {
            let lower = p.to_ascii_lowercase();
            let is_glob = p.iter().any(|b| matches!(b, b'*' | b'?' | b'['));
            for (k, v) in &all {
                let hit = if is_glob {
                    glob_match(&lower, k.as_bytes())
                } else {
                    lower == k.as_bytes()
                };
                if hit
                    && !matched
                        .iter()
                        .any(|(m, _)| m.eq_ignore_ascii_case(k.as_bytes()))
                {
                    matched.push((
                        if is_glob {
                            k.as_bytes().to_vec()
                        } else {
                            p.to_vec()
                        },
                        v,
                    ));
                }
            }
        }
        out.map(matched.len());
        for (k, v) in matched {
            out.bulk(&k);
            out.bulk(v.as_bytes());
        }
    } else if is(sub, "SET") {
        if a.len() < 4 || !a.len().is_multiple_of(2) {
            return Err(CmdError::WrongArity("config|set".into()));
        }
        for pair in a[2..].chunks(2) {
            set(s, pair[0], pair[1])?;
        }
        out.simple("OK");
    } else if is(sub, "RESETSTAT") || is(sub, "REWRITE") {
        out.simple("OK");
    } else {
        return Err(CmdError::UnknownSubcommand {
            cmd: "CONFIG".into(),
            sub: String::from_utf8_lossy(sub).into(),
        });
    }
    Ok(())
}

fn set(s: &mut Session, key: &[u8], value: &[u8]) -> Result<(), CmdError> {
    let name = String::from_utf8_lossy(key).to_ascii_lowercase();
    let text = String::from_utf8_lossy(value).into_owned();
    let invalid = || {
        CmdError::other(format!("ERR CONFIG SET failed (possibly related to argument '{name}') - argument couldn't be parsed into an integer"))
    };
    let rt = &s.node.runtime;
    match name.as_str() {
        "maxmemory" => {
            let v = parse_size(&text).ok_or_else(|| {
                CmdError::other(format!(
                    "ERR CONFIG SET failed (possibly related to argument '{name}') - argument must be a memory value"
                ))
            })?;
            rt.maxmemory.store(v, Ordering::Relaxed)
        }
        "maxclients" => rt
            .maxclients
            .store(text.parse().map_err(|_| invalid())?, Ordering::Relaxed),
        "proto-max-bulk-len" => {
            let v = parse_size(&text).ok_or_else(invalid)?;
            rt.proto_max_bulk_len
                .store(v.max(1024 * 1024) as usize, Ordering::Relaxed)
        }
        "client-query-buffer-limit" => {
            let v = parse_size(&text).ok_or_else(invalid)?;
            rt.client_query_buffer_limit
                .store(v.max(1024 * 1024) as usize, Ordering::Relaxed)
        }
        "requirepass" => *rt.requirepass.write() = (!text.is_empty()).then_some(text),
        // Accepted and meaningless here: no RDB/AOF, one database.
        "save" | "appendonly" | "hz" | "timeout" | "tcp-keepalive" | "maxmemory-policy" => {}
        _ => {
            return Err(CmdError::other(format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
            )))
        }
    }
    Ok(())
}
