//! Loading a node's copies when it starts: the newest snapshot that reads
//! back whole (a damaged one is reported and the one before it is used),
//! then the change log from the record that snapshot starts from. A torn
//! or corrupted end of the log is cut (the journal checks every record's
//! CRC); damage earlier in the log ends the replay there, and every
//! segment from the damaged one on is set aside (renamed, not deleted).
//! A partition whose changes then have a gap is emptied rather than served
//! with changes missing; its replicas or primary give it back.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use journal::{Cursor, Journal, JournalError};
use keyspace::{codec, Keyspace};

use crate::record::Record;
use crate::snapshot::{self, Item, SnapshotError};
use crate::store::{journal_config, Store, StoreConfig, MAX_RECORD};

/// What a start found and loaded.
#[derive(Debug, Default)]
pub struct Recovered {
    /// The snapshot loaded (the log record it starts from), if any.
    pub snapshot: Option<u64>,
    pub snapshot_entries: u64,
    pub log_records: u64,
    /// Partitions emptied because changes were missing.
    pub emptied: Vec<usize>,
    /// Keys held after loading.
    pub keys: u64,
    pub millis: u64,
    /// Something was found on disk (a node that ran before).
    pub found_data: bool,
    /// Damage before the log's end was set aside, or a snapshot could not
    /// be used: what was loaded may lack acknowledged writes.
    pub damaged: bool,
}

impl Recovered {
    /// The copies came back whole from a node whose every acknowledged
    /// write was on its disk (`fsync = "always"`), with no damage and no
    /// partition emptied: what remote sites delivered to them is there.
    pub fn complete(&self, fsync: crate::Fsync) -> bool {
        self.found_data && !self.damaged && self.emptied.is_empty() && fsync == crate::Fsync::Always
    }
}

impl Store {
    /// Opens the store under `cfg.dir`, loads what it holds into `ks`
    /// (which must be empty and not serving), and returns it ready to be
    /// installed (`Keyspace::set_persist`) and started.
    pub fn open(cfg: StoreConfig, ks: &Arc<Keyspace>) -> Result<(Arc<Store>, Recovered), String> {
        let started = Instant::now();
        let mut got = Recovered::default();
        let (journal, damaged) = open_journal(&cfg)?;
        got.damaged = damaged;
        let snapshots = snapshot::list(&cfg.snapshot_dir());
        got.found_data = !snapshots.is_empty() || journal.next_id() > 0;
        let mut from = journal.first_id();
        for (start, path) in &snapshots {
            if *start < journal.first_id() {
                tracing::error!(
                    file = %path.display(),
                    "persistence: the log since this snapshot is gone; not using it"
                );
                continue;
            }
            match load_snapshot(path, ks) {
                Ok(entries) => {
                    got.snapshot = Some(*start);
                    got.snapshot_entries = entries;
                    from = *start;
                    break;
                }
                Err(e @ SnapshotError::Partitions { .. }) => return Err(e.to_string()),
                Err(e) => {
                    got.damaged = true;
                    tracing::error!("persistence: snapshot not loaded, trying the one before: {e}");
                    for p in 0..ks.partitions() as usize {
                        let _ = ks.recover_reset(p, 1, 0);
                    }
                }
            }
        }
        if got.snapshot.is_none() && journal.first_id() > 0 {
            got.damaged = true;
            tracing::error!(
                first = journal.first_id(),
                "persistence: no usable snapshot and the log's start is gone: loading what the log holds"
            );
        }
        let (records, broken) = replay(&journal, from, ks)?;
        got.log_records = records;
        for &p in &broken {
            tracing::error!(
                partition = p,
                "persistence: changes of this partition are missing from the log: its copy starts empty"
            );
            let _ = ks.recover_reset(p, 1, 0);
        }
        got.emptied = broken.into_iter().collect();
        got.emptied.sort_unstable();
        got.keys = ks.len() as u64;
        got.millis = started.elapsed().as_millis() as u64;
        if got.found_data {
            tracing::info!(
                keys = got.keys,
                snapshot_entries = got.snapshot_entries,
                log_records = got.log_records,
                ms = got.millis,
                "persistence: loaded this node's copies from disk"
            );
        }
        let store = Store::new(cfg, ks, journal);
        Ok((store, got))
    }
}

/// Opens the change log; damage before its last record (which the journal
/// cuts by itself) sets the damaged segment and every later one aside
/// (then true).
fn open_journal(cfg: &StoreConfig) -> Result<(Journal, bool), String> {
    let dir = cfg.log_dir();
    let mut damaged = false;
    for _ in 0..64 {
        match Journal::open(&dir, journal_config(cfg)) {
            Ok(j) => return Ok((j, damaged)),
            Err(JournalError::Corrupt {
                path,
                offset,
                damage,
            }) => {
                tracing::error!(
                    file = %path.display(),
                    offset,
                    %damage,
                    "persistence: the change log is damaged here: replaying up to it, setting the rest aside"
                );
                set_aside_from(&dir, &path, offset).map_err(|e| e.to_string())?;
                damaged = true;
            }
            Err(e) => return Err(format!("persistence: cannot open the change log: {e}")),
        }
    }
    Err("persistence: the change log stays damaged".into())
}

/// Keeps the records of `damaged` before `offset` (copied into a new
/// segment of the same name) and renames it and every later segment to
/// `*.damaged`.
fn set_aside_from(dir: &Path, damaged: &Path, offset: u64) -> std::io::Result<()> {
    let mut later: Vec<_> = std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg") && p.as_path() > damaged)
        .collect();
    later.sort();
    for p in later {
        std::fs::rename(&p, p.with_extension("seg.damaged"))?;
    }
    let aside = damaged.with_extension("seg.damaged");
    std::fs::rename(damaged, &aside)?;
    let bytes = std::fs::read(&aside)?;
    let keep = &bytes[..(offset as usize).min(bytes.len())];
    std::fs::write(damaged, keep)?;
    std::fs::File::open(damaged)?.sync_all()?;
    std::fs::File::open(dir)?.sync_all()
}

/// Loads one snapshot; the count of entries.
fn load_snapshot(path: &Path, ks: &Keyspace) -> Result<u64, SnapshotError> {
    // Read through once to check every record, then load.
    snapshot::read(path, ks.partitions(), MAX_RECORD, |_| Ok(()))?;
    let mut current: Option<usize> = None;
    let mut entries = 0u64;
    snapshot::read(path, ks.partitions(), MAX_RECORD, |item| match item {
        Item::Part {
            partition,
            next_seq,
            settled,
        } => {
            current = Some(partition as usize);
            ks.recover_reset(partition as usize, next_seq, settled)
                .map_err(|e| e.to_string())
        }
        Item::Entry(bytes) => {
            let p = current.ok_or("an entry before any partition")?;
            let change = decode_whole(&bytes)?;
            entries += 1;
            ks.recover_entry(p, change).map_err(|e| e.to_string())
        }
    })?;
    Ok(entries)
}

fn decode_whole(bytes: &[u8]) -> Result<keyspace::Change, String> {
    let (change, used) = codec::decode(bytes).map_err(|e| e.to_string())?;
    if used != bytes.len() {
        return Err(format!("{} bytes after a change", bytes.len() - used));
    }
    Ok(change)
}

/// Replays the log from record `from`: (records replayed, partitions with
/// changes missing).
fn replay(journal: &Journal, from: u64, ks: &Keyspace) -> Result<(u64, HashSet<usize>), String> {
    let mut cursor = Cursor::new(from);
    let mut count = 0u64;
    let mut broken: HashSet<usize> = HashSet::new();
    let partitions = ks.partitions() as usize;
    loop {
        let (batch, next) = journal
            .read_from_cursor(cursor, 16 << 20)
            .map_err(|e| format!("persistence: reading the change log: {e}"))?;
        cursor = next;
        if batch.is_empty() {
            break;
        }
        for (id, bytes) in batch {
            count += 1;
            let record = match Record::decode(&bytes) {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!(id, "persistence: unreadable log record skipped: {e}");
                    continue;
                }
            };
            let p = record.partition() as usize;
            if p >= partitions {
                tracing::error!(
                    id,
                    partition = p,
                    "persistence: log record of no partition of this node skipped"
                );
                continue;
            }
            let result = match record {
                Record::Reset {
                    next_seq, settled, ..
                } => {
                    broken.remove(&p);
                    ks.recover_reset(p, next_seq, settled)
                        .map_err(|e| e.to_string())
                }
                _ if broken.contains(&p) => Ok(()),
                Record::Loaded { body, .. } => decode_whole(body)
                    .and_then(|c| ks.recover_entry(p, c).map_err(|e| e.to_string())),
                Record::Change { seq, body, .. } => decode_whole(body).and_then(|c| {
                    ks.recover_change(p, seq, c)
                        .map(|_| ())
                        .map_err(|e| e.to_string())
                }),
            };
            if let Err(e) = result {
                tracing::error!(id, partition = p, "persistence: {e}");
                broken.insert(p);
            }
        }
    }
    Ok((count, broken))
}
