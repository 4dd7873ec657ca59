//! The [`Store`]: changes handed over under partition locks, appended and
//! synced by one writer thread, waited for by connections and replicas
//! when `fsync = "always"`, and snapshots that let the log be dropped.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use journal::{Journal, JournalConfig};
use keyspace::Keyspace;
use parking_lot::{Condvar, Mutex};

use crate::record::Record;
use crate::snapshot;

/// When the change log reaches the disk (Redis's `appendfsync`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Fsync {
    /// Before the reply to the write (group commit).
    Always,
    /// Once a second: a crash loses at most about the last second.
    #[default]
    Everysec,
    /// When the OS writes it back.
    No,
}

impl Fsync {
    pub fn parse(s: &str) -> Option<Fsync> {
        match s.to_ascii_lowercase().as_str() {
            "always" => Some(Fsync::Always),
            "everysec" => Some(Fsync::Everysec),
            "no" => Some(Fsync::No),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Fsync::Always => "always",
            Fsync::Everysec => "everysec",
            Fsync::No => "no",
        }
    }
}

#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// `<data_dir>/store`: `log/` (the change log) and `snapshots/`.
    pub dir: PathBuf,
    pub fsync: Fsync,
    /// A snapshot is taken when the log has grown by this many bytes since
    /// the last one (0: only on BGSAVE/SAVE).
    pub snapshot_after_bytes: u64,
    pub segment_bytes: u64,
}

impl StoreConfig {
    pub fn new(data_dir: &Path, fsync: Fsync) -> StoreConfig {
        StoreConfig {
            dir: data_dir.join("store"),
            fsync,
            snapshot_after_bytes: 256 << 20,
            segment_bytes: 64 << 20,
        }
    }

    pub(crate) fn log_dir(&self) -> PathBuf {
        self.dir.join("log")
    }

    pub(crate) fn snapshot_dir(&self) -> PathBuf {
        self.dir.join("snapshots")
    }
}

/// A change (or a whole value) as large as Redis allows must fit a record.
pub(crate) const MAX_RECORD: usize = 1 << 30;

pub(crate) fn journal_config(cfg: &StoreConfig) -> JournalConfig {
    JournalConfig {
        segment_bytes: cfg.segment_bytes,
        max_record: MAX_RECORD,
        sync_on_append: false,
    }
}

/// Records handed over, not yet appended: `u32 LE length | record` each.
#[derive(Default)]
struct Pending {
    buf: Vec<u8>,
    stop: bool,
    snapshot_asked: bool,
    /// The writer waits for a first record (not collecting).
    asleep: bool,
}

/// Without `fsync = "always"` the writer writes what arrived at most this
/// often (a `kill -9` may lose the acknowledged writes of the last
/// interval; an OS crash, up to the last second with `everysec`).
const WRITE_EVERY: Duration = Duration::from_millis(2);

/// ... or sooner once this much is waiting.
const WAKE_BYTES: usize = 1 << 20;

/// Figures for INFO persistence and /metrics.
#[derive(Debug, Default)]
pub struct StoreStats {
    pub fsyncs: AtomicU64,
    pub fsync_micros_total: AtomicU64,
    pub fsync_micros_last: AtomicU64,
    pub log_bytes: AtomicU64,
    pub log_bytes_since_snapshot: AtomicU64,
    pub snapshot_bytes: AtomicU64,
    pub snapshots: AtomicU64,
    /// Unix seconds of the last snapshot written (or of the start).
    pub last_snapshot_unix: AtomicU64,
    pub last_snapshot_micros: AtomicU64,
    pub snapshot_in_progress: AtomicBool,
    pub last_snapshot_ok: AtomicBool,
    pub write_ok: AtomicBool,
    /// The log record the last snapshot starts from (at start: the next
    /// one), for [`Store::changes_since_snapshot`].
    pub snapshot_from: AtomicU64,
}

pub struct Store {
    pub cfg: StoreConfig,
    ks: Weak<Keyspace>,
    pending: Mutex<Pending>,
    wake: Condvar,
    /// The id the next record handed over gets (its change-log id).
    next_id: AtomicU64,
    /// Every record below this id is appended (and synced with `always`).
    durable: AtomicU64,
    durable_notify: tokio::sync::Notify,
    /// The writer failed: waiting writes are not acknowledged.
    failed: AtomicBool,
    pub(crate) journal: Mutex<Journal>,
    /// Serialises snapshots (BGSAVE while one runs, SAVE).
    snapshotting: Mutex<()>,
    pub stats: StoreStats,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

thread_local! {
    /// The id after the last record this thread handed over (0: none)
    /// since [`take_handed`].
    static HANDED: Cell<u64> = const { Cell::new(0) };
}

/// The change-log position a connection's writes on this thread need
/// durable (0: it handed nothing over) since the last call.
pub fn take_handed() -> u64 {
    HANDED.with(|h| h.replace(0))
}

impl Store {
    pub(crate) fn new(cfg: StoreConfig, ks: &Arc<Keyspace>, journal: Journal) -> Arc<Store> {
        let next = journal.next_id();
        let stats = StoreStats::default();
        stats.write_ok.store(true, Ordering::Relaxed);
        stats.last_snapshot_ok.store(true, Ordering::Relaxed);
        stats
            .last_snapshot_unix
            .store(unix_now(), Ordering::Relaxed);
        stats
            .log_bytes
            .store(journal.disk_bytes(), Ordering::Relaxed);
        Arc::new(Store {
            cfg,
            ks: Arc::downgrade(ks),
            pending: Mutex::new(Pending::default()),
            wake: Condvar::new(),
            next_id: AtomicU64::new(next),
            durable: AtomicU64::new(next),
            durable_notify: tokio::sync::Notify::new(),
            failed: AtomicBool::new(false),
            journal: Mutex::new(journal),
            snapshotting: Mutex::new(()),
            stats,
            writer: Mutex::new(None),
        })
    }

    /// Starts the writer thread.
    pub fn start(self: &Arc<Self>) -> Result<(), String> {
        let me = self.clone();
        let handle = std::thread::Builder::new()
            .name("persist-writer".into())
            .spawn(move || me.write_loop())
            .map_err(|e| format!("persistence: cannot start the log writer: {e}"))?;
        *self.writer.lock() = Some(handle);
        Ok(())
    }

    /// Changes handed over since the last snapshot began (or the start):
    /// Redis's `rdb_changes_since_last_save`.
    pub fn changes_since_snapshot(&self) -> u64 {
        self.next_id
            .load(Ordering::Relaxed)
            .saturating_sub(self.stats.snapshot_from.load(Ordering::Relaxed))
    }

    /// Whether writes wait for the disk before their reply.
    pub fn waits(&self) -> bool {
        self.cfg.fsync == Fsync::Always
    }

    fn hand(&self, record: Record<'_>) {
        let len = record.encoded_len();
        let mut p = self.pending.lock();
        let was_empty = p.buf.is_empty();
        p.buf.extend_from_slice(&(len as u32).to_le_bytes());
        record.encode(&mut p.buf);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        // With `always` a reply waits: the writer starts at once. Otherwise
        // it collects for WRITE_EVERY and is woken only from its sleep (or
        // by a full buffer): a wake-up per write cost writers more than
        // the log did.
        let wake = match self.cfg.fsync {
            Fsync::Always => was_empty,
            _ => (was_empty && p.asleep) || p.buf.len() >= WAKE_BYTES,
        };
        drop(p);
        HANDED.with(|h| h.set(id));
        if wake {
            self.wake.notify_one();
        }
    }

    /// Waits until every record below `target` is on disk; false when the
    /// log cannot be written (the write must not be acknowledged).
    pub async fn wait_durable(&self, target: u64) -> bool {
        loop {
            let notified = self.durable_notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.durable.load(Ordering::Acquire) >= target {
                return true;
            }
            if self.failed.load(Ordering::Acquire) {
                return false;
            }
            notified.await;
        }
    }

    /// The writer: takes what was handed over, appends it, flushes and
    /// syncs per `fsync`, and wakes who waits.
    fn write_loop(self: Arc<Self>) {
        let mut taken = Vec::new();
        let mut last_sync = Instant::now();
        let mut unsynced = false;
        loop {
            let (stop, snapshot_asked) = {
                let mut p = self.pending.lock();
                while p.buf.is_empty() && !p.stop && !p.snapshot_asked {
                    let timeout = match (self.cfg.fsync, unsynced) {
                        (Fsync::Everysec, true) => {
                            Duration::from_secs(1).saturating_sub(last_sync.elapsed())
                        }
                        _ => Duration::from_secs(1),
                    };
                    if timeout.is_zero() {
                        break;
                    }
                    p.asleep = true;
                    self.wake.wait_for(&mut p, timeout);
                    p.asleep = false;
                }
                if self.cfg.fsync != Fsync::Always && !p.buf.is_empty() && !p.stop {
                    // Let more changes arrive: one write per WRITE_EVERY.
                    self.wake.wait_for(&mut p, WRITE_EVERY);
                }
                std::mem::swap(&mut taken, &mut p.buf);
                let asked = std::mem::take(&mut p.snapshot_asked);
                (p.stop, asked)
            };
            let ok = self.append_all(&taken, &mut last_sync, &mut unsynced);
            taken.clear();
            if !ok {
                self.failed.store(true, Ordering::Release);
                self.stats.write_ok.store(false, Ordering::Relaxed);
            }
            self.durable_notify.notify_waiters();
            if stop {
                if unsynced {
                    let _ = self.journal.lock().sync();
                }
                return;
            }
            let grown = self.stats.log_bytes_since_snapshot.load(Ordering::Relaxed);
            let due = self.cfg.snapshot_after_bytes > 0 && grown >= self.cfg.snapshot_after_bytes;
            if (due || snapshot_asked) && !self.stats.snapshot_in_progress.load(Ordering::Acquire) {
                self.background_snapshot();
            }
        }
    }

    /// Appends the framed records in `taken`; true when all went to disk as
    /// `fsync` asks.
    fn append_all(&self, taken: &[u8], last_sync: &mut Instant, unsynced: &mut bool) -> bool {
        let mut j = self.journal.lock();
        let mut count = 0u64;
        let before = j.disk_bytes();
        let mut rest = taken;
        while let Some((len, r)) = rest.split_first_chunk::<4>() {
            let len = u32::from_le_bytes(*len) as usize;
            let Some((record, r)) = r.split_at_checked(len) else {
                break; // never: `hand` frames every record whole
            };
            rest = r;
            if let Err(e) = j.append(record) {
                tracing::error!("persistence: the change log cannot be written: {e}");
                return false;
            }
            count += 1;
        }
        if count > 0 {
            if let Err(e) = j.flush() {
                tracing::error!("persistence: the change log cannot be written: {e}");
                return false;
            }
            *unsynced = true;
        }
        let sync_now = match self.cfg.fsync {
            Fsync::Always => count > 0,
            Fsync::Everysec => *unsynced && last_sync.elapsed() >= Duration::from_secs(1),
            Fsync::No => false,
        };
        if sync_now {
            let t = Instant::now();
            if let Err(e) = j.sync() {
                tracing::error!("persistence: fsync of the change log failed: {e}");
                return false;
            }
            let us = t.elapsed().as_micros() as u64;
            self.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
            self.stats
                .fsync_micros_total
                .fetch_add(us, Ordering::Relaxed);
            self.stats.fsync_micros_last.store(us, Ordering::Relaxed);
            *last_sync = Instant::now();
            *unsynced = false;
        }
        let after = j.disk_bytes();
        let next = j.next_id();
        drop(j);
        self.stats.log_bytes.store(after, Ordering::Relaxed);
        self.stats
            .log_bytes_since_snapshot
            .fetch_add(after.saturating_sub(before), Ordering::Relaxed);
        self.durable.store(next, Ordering::Release);
        true
    }

    /// Asks the writer to start a snapshot (BGSAVE); false when one runs.
    pub fn request_snapshot(&self) -> bool {
        if self.stats.snapshot_in_progress.load(Ordering::Acquire) {
            return false;
        }
        self.pending.lock().snapshot_asked = true;
        self.wake.notify_one();
        true
    }

    fn background_snapshot(self: &Arc<Self>) {
        self.stats
            .snapshot_in_progress
            .store(true, Ordering::Release);
        let me = self.clone();
        let spawned = std::thread::Builder::new()
            .name("persist-snapshot".into())
            .spawn(move || {
                let _ = me.snapshot();
            });
        if let Err(e) = spawned {
            tracing::error!("persistence: cannot start a snapshot: {e}");
            self.stats
                .snapshot_in_progress
                .store(false, Ordering::Release);
        }
    }

    /// Takes a snapshot now, on this thread (SAVE; the background one runs
    /// this too), then drops what the one before no longer needs.
    pub fn snapshot(&self) -> Result<snapshot::Written, String> {
        let _one = self.snapshotting.lock();
        self.stats
            .snapshot_in_progress
            .store(true, Ordering::Release);
        let started = Instant::now();
        let result = self.snapshot_inner();
        self.stats
            .last_snapshot_micros
            .store(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        self.stats
            .last_snapshot_ok
            .store(result.is_ok(), Ordering::Relaxed);
        self.stats
            .snapshot_in_progress
            .store(false, Ordering::Release);
        match &result {
            Ok(w) => tracing::info!(
                from = w.from,
                bytes = w.bytes,
                entries = w.entries,
                ms = started.elapsed().as_millis() as u64,
                "persistence: snapshot written"
            ),
            Err(e) => tracing::error!("persistence: snapshot failed: {e}"),
        }
        result
    }

    fn snapshot_inner(&self) -> Result<snapshot::Written, String> {
        let ks = self.ks.upgrade().ok_or("the node is gone")?;
        // Every record handed over before this point was applied before
        // any partition is copied below.
        let from = {
            let _p = self.pending.lock();
            self.next_id.load(Ordering::Relaxed)
        };
        let grown_before = self.stats.log_bytes_since_snapshot.load(Ordering::Relaxed);
        let dir = self.cfg.snapshot_dir();
        let written = snapshot::write(&dir, from, &ks, MAX_RECORD).map_err(|e| e.to_string())?;
        self.stats
            .log_bytes_since_snapshot
            .fetch_sub(grown_before, Ordering::Relaxed);
        self.stats.snapshot_from.store(from, Ordering::Relaxed);
        self.stats.snapshots.fetch_add(1, Ordering::Relaxed);
        self.stats
            .last_snapshot_unix
            .store(unix_now(), Ordering::Relaxed);
        self.stats
            .snapshot_bytes
            .store(written.bytes, Ordering::Relaxed);
        // Keep this one and the one before (in case this one is found
        // damaged on the next start), and the log since the one before.
        let all = snapshot::list(&dir);
        if let Some(&(previous, _)) = all.get(1) {
            for (_, old) in all.iter().skip(2) {
                if let Err(e) = std::fs::remove_file(old) {
                    tracing::warn!(file = %old.display(), "persistence: cannot remove an old snapshot: {e}");
                }
            }
            let mut j = self.journal.lock();
            if let Err(e) = j.truncate_before(previous) {
                tracing::warn!("persistence: cannot drop old log segments: {e}");
            }
            self.stats
                .log_bytes
                .store(j.disk_bytes(), Ordering::Relaxed);
        }
        Ok(written)
    }

    /// Stops the writer after it appended (and synced) what was handed over.
    pub fn stop(&self) {
        self.pending.lock().stop = true;
        self.wake.notify_one();
        if let Some(h) = self.writer.lock().take() {
            let _ = h.join();
        }
    }

    /// Bytes of snapshots on disk.
    pub fn snapshot_disk_bytes(&self) -> u64 {
        snapshot::list(&self.cfg.snapshot_dir())
            .iter()
            .filter_map(|(_, p)| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum()
    }
}

impl keyspace::Persist for Store {
    fn changed(&self, partition: usize, seq: u64, encoded: &[u8]) {
        self.hand(Record::Change {
            partition: partition as u16,
            seq,
            body: encoded,
        });
    }

    fn reset(&self, partition: usize, next_seq: u64, settled: u64) {
        self.hand(Record::Reset {
            partition: partition as u16,
            next_seq,
            settled,
        });
    }

    fn loaded(&self, partition: usize, encoded: &[u8]) {
        self.hand(Record::Loaded {
            partition: partition as u16,
            body: encoded,
        });
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
