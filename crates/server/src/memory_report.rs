//! `MEMORY STATS` and `MEMORY DOCTOR`: what the node measures of its
//! memory, in Redis's field names where they mean the same. The heap
//! figures are the counting allocator's ([`crate::memory`]), the resident
//! set is the kernel's, and the dataset is the keyspace's own estimate of
//! its keys and values (`used_memory_dataset`). Fields Redis reports that
//! deltagrid does not measure apart (client buffers, Lua caches) are left
//! out rather than made up. (`MEMORY USAGE`, `PURGE` and `MALLOC-STATS` are
//! the keyspace's: `commands::object`.)

use commands::error::CmdError;

use crate::memory;
use crate::session::{Reply, Session};

/// Below this much heap in use the doctor declines, as Redis's does.
const DOCTOR_MIN_BYTES: usize = 5 << 20;

/// Whether `MEMORY <sub>` is answered here.
pub fn handles(a: &[&[u8]]) -> bool {
    a.len() >= 2 && (a[1].eq_ignore_ascii_case(b"stats") || a[1].eq_ignore_ascii_case(b"doctor"))
}

struct Figures {
    peak: usize,
    total: usize,
    startup: usize,
    logs: usize,
    keys: usize,
    dataset: usize,
    rss: usize,
}

fn figures(s: &Session) -> Figures {
    let node = &s.node;
    Figures {
        peak: memory::peak(),
        total: node.used_memory(),
        startup: memory::startup(),
        logs: node.ks.log_bytes(),
        keys: node.ks.len(),
        dataset: node.ks.footprint(),
        rss: memory::rss(),
    }
}

pub fn memory(s: &Session, a: &[&[u8]], out: Reply) -> Result<(), CmdError> {
    if a.len() != 2 {
        let sub = String::from_utf8_lossy(a[1]).to_ascii_lowercase();
        return Err(CmdError::WrongArity(format!("memory|{sub}")));
    }
    let f = figures(s);
    if a[1].eq_ignore_ascii_case(b"doctor") {
        out.verbatim("txt", doctor(&f, s).as_bytes());
        return Ok(());
    }
    let pct = |part: usize, whole: usize| 100.0 * part as f64 / whole.max(1) as f64;
    let grown = f.total.saturating_sub(f.startup);
    let ints: [(&str, usize); 9] = [
        ("peak.allocated", f.peak),
        ("total.allocated", f.total),
        ("startup.allocated", f.startup),
        ("replication.backlog", f.logs),
        ("overhead.total", f.total.saturating_sub(f.dataset)),
        ("keys.count", f.keys),
        ("keys.bytes-per-key", grown / f.keys.max(1)),
        ("dataset.bytes", f.dataset),
        ("allocator.resident", f.rss),
    ];
    let doubles: [(&str, f64); 3] = [
        ("dataset.percentage", pct(f.dataset, grown)),
        ("peak.percentage", pct(f.total, f.peak)),
        ("fragmentation", f.rss as f64 / f.total.max(1) as f64),
    ];
    out.map(ints.len() + doubles.len() + 1);
    for (name, v) in ints {
        out.bulk(name.as_bytes());
        out.int(v as i64);
    }
    for (name, v) in doubles {
        out.bulk(name.as_bytes());
        out.double(v);
    }
    out.bulk(b"fragmentation.bytes");
    out.int(f.rss as i64 - f.total as i64);
    Ok(())
}

/// A few lines on what looks wrong, or Redis's all-clear.
fn doctor(f: &Figures, s: &Session) -> String {
    if f.total < DOCTOR_MIN_BYTES {
        return "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting.\n".into();
    }
    let mb = |b: usize| b as f64 / (1 << 20) as f64;
    let mut issues = Vec::new();
    if f.peak > f.total * 3 / 2 {
        issues.push(format!(
            " * Peak memory: this node used {:.1} MB at its peak, more than 150% of the {:.1} MB it uses now. MEMORY PURGE hands the allocator's free pages back to the system.",
            mb(f.peak),
            mb(f.total)
        ));
    }
    if f.rss > f.total * 14 / 10 && f.rss - f.total > 10 << 20 {
        issues.push(format!(
            " * High fragmentation: the resident set ({:.1} MB) is {:.2} times the heap in use ({:.1} MB). MEMORY PURGE may give some of it back.",
            mb(f.rss),
            f.rss as f64 / f.total as f64,
            mb(f.total)
        ));
    }
    let max = s.node.runtime.maxmemory() as usize;
    if max > 0 && f.total > max / 10 * 9 && s.node.runtime.maxmemory_policy().name() == "noeviction"
    {
        issues.push(format!(
            " * Near maxmemory: {:.1} MB of {:.1} MB in use with maxmemory-policy noeviction: writes will get -OOM. An eviction policy (allkeys-lru for a cache) or more memory avoids it.",
            mb(f.total),
            mb(max)
        ));
    }
    if issues.is_empty() {
        return "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.\n".into();
    }
    format!(
        "Sam, I detected a few issues in this deltagrid node memory implants:\n\n{}\n",
        issues.join("\n\n")
    )
}
