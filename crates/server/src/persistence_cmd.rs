//! SAVE, BGSAVE, LASTSAVE and INFO persistence over local persistence (the
//! `persist` crate): a snapshot of the node's copies stands for Redis's
//! RDB file, the change log for its AOF.

use std::sync::atomic::Ordering::Relaxed;

use commands::args::is;
use commands::CmdError;

use crate::node::Node;
use crate::session::{Reply, Session};

fn store(s: &Session) -> Result<&persist::Store, CmdError> {
    s.node.store.as_ref().map(|(st, _)| st.as_ref()).ok_or_else(|| {
        CmdError::other(
            "ERR persistence is off on this node (node.persistence = \"off\" or no data_dir): nothing to save",
        )
    })
}

/// SAVE: a snapshot now, on this connection's worker (Redis blocks too).
pub fn save(s: &Session, out: Reply) -> Result<(), CmdError> {
    let st = store(s)?;
    if st.stats.snapshot_in_progress.load(Relaxed) {
        return Err(CmdError::other("ERR Background save already in progress"));
    }
    st.snapshot()
        .map_err(|e| CmdError::other(format!("ERR snapshot failed: {e}")))?;
    out.simple("OK");
    Ok(())
}

/// `BGSAVE [SCHEDULE]`: a snapshot in the background.
pub fn bgsave(s: &Session, a: &[&[u8]], out: Reply) -> Result<(), CmdError> {
    let schedule = match a.get(1) {
        None => false,
        Some(x) if is(x, "schedule") && a.len() == 2 => true,
        Some(_) => return Err(CmdError::Syntax),
    };
    let st = store(s)?;
    if st.request_snapshot() {
        out.simple("Background saving started");
    } else if schedule {
        out.simple("Background saving scheduled");
    } else {
        return Err(CmdError::other("ERR Background save already in progress"));
    }
    Ok(())
}

/// LASTSAVE: when the last snapshot was written (or the node started).
pub fn lastsave(s: &Session, out: Reply) -> Result<(), CmdError> {
    let at = match &s.node.store {
        Some((st, _)) => st.stats.last_snapshot_unix.load(Relaxed),
        None => started_unix(&s.node),
    };
    out.int(at as i64);
    Ok(())
}

/// INFO persistence's fields.
pub fn info(
    node: &Node,
    changes_since_start: u64,
    kv: &mut dyn FnMut(&str, &dyn std::fmt::Display),
) {
    let Some((st, got)) = &node.store else {
        kv("loading", &0);
        kv("async_loading", &0);
        kv("rdb_changes_since_last_save", &changes_since_start);
        kv("rdb_bgsave_in_progress", &0);
        kv("rdb_last_save_time", &started_unix(node));
        kv("aof_enabled", &0);
        kv("persistence", &"off");
        return;
    };
    let stats = &st.stats;
    let ok = |b: bool| if b { "ok" } else { "err" };
    kv("loading", &0);
    kv("async_loading", &0);
    kv("loading_loaded_perc", &"100.00");
    kv("loading_last_load_ms", &got.millis);
    kv("loading_loaded_keys", &got.keys);
    kv("rdb_changes_since_last_save", &st.changes_since_snapshot());
    kv(
        "rdb_bgsave_in_progress",
        &(stats.snapshot_in_progress.load(Relaxed) as u8),
    );
    kv(
        "rdb_last_save_time",
        &stats.last_snapshot_unix.load(Relaxed),
    );
    kv(
        "rdb_last_bgsave_status",
        &ok(stats.last_snapshot_ok.load(Relaxed)),
    );
    kv(
        "rdb_last_bgsave_time_sec",
        &(stats.last_snapshot_micros.load(Relaxed) / 1_000_000),
    );
    kv("rdb_saves", &stats.snapshots.load(Relaxed));
    kv("aof_enabled", &1);
    kv("aof_rewrite_in_progress", &0);
    kv("aof_last_write_status", &ok(stats.write_ok.load(Relaxed)));
    kv("aof_current_size", &stats.log_bytes.load(Relaxed));
    kv("persistence", &"log");
    kv("persistence_fsync", &st.cfg.fsync.name());
    kv("persistence_log_bytes", &stats.log_bytes.load(Relaxed));
    kv("persistence_snapshot_bytes", &st.snapshot_disk_bytes());
    kv("persistence_fsyncs", &stats.fsyncs.load(Relaxed));
    kv(
        "persistence_fsync_last_us",
        &stats.fsync_micros_last.load(Relaxed),
    );
    kv(
        "persistence_fsync_total_us",
        &stats.fsync_micros_total.load(Relaxed),
    );
    kv("persistence_loaded_snapshot_entries", &got.snapshot_entries);
    kv("persistence_loaded_log_records", &got.log_records);
    kv("persistence_loaded_emptied_partitions", &got.emptied.len());
    kv("persistence_loaded_damaged", &(got.damaged as u8));
    kv(
        "persistence_loaded_complete",
        &(got.complete(st.cfg.fsync) as u8),
    );
}

/// When the node started, in Unix seconds.
fn started_unix(node: &Node) -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        .saturating_sub(node.started.elapsed().as_secs())
}
