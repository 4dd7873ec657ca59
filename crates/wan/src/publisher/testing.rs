//! What the unit tests of the publisher's core share: a node of site 1
//! with four partitions, a stand-in for its site (who leads what, what the
//! replicas hold), a link that is a channel the test reads, and writes.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use keyspace::{Change, ChangeKind, DebugClock, Keyspace, KeyspaceConfig, Value, Version};
use parking_lot::Mutex;
use tokio::sync::mpsc;

use super::{Outlet, Publisher, Site};
use crate::wire::{self, Frame};
use crate::{AckMode, LocalSite, Target, TargetSettings, Wan, WanSettings};

pub(super) const PARTITIONS: usize = 4;

/// The site around the node: every partition led here and durable unless
/// a test says otherwise; what was shared with replicas is kept.
pub(super) struct Stand {
    primary: Vec<AtomicBool>,
    durable: Vec<AtomicU64>,
    pub(super) shared: Mutex<Vec<(usize, u64)>>,
}

impl Stand {
    pub(super) fn set_durable(&self, p: usize, seq: u64) {
        self.durable[p].store(seq, Ordering::Relaxed);
    }

    pub(super) fn set_primary(&self, p: usize, primary: bool) {
        self.primary[p].store(primary, Ordering::Relaxed);
    }
}

impl Site for Stand {
    fn table(&self) -> Option<Arc<cluster::PartitionTable>> {
        None
    }

    fn is_primary(&self, p: usize) -> bool {
        self.primary[p].load(Ordering::Relaxed)
    }

    fn durable_seq(&self, p: usize) -> u64 {
        self.durable[p].load(Ordering::Relaxed)
    }

    fn durability(&self) -> Box<dyn Fn(usize) -> u64 + '_> {
        Box::new(|p| self.durable_seq(p))
    }

    fn share_applied(&self, _target: &str, applied: &[(usize, u64)]) {
        self.shared.lock().extend_from_slice(applied);
    }
}

/// What a test may change from the defaults.
pub(super) struct Options {
    pub(super) memory_budget: u64,
    pub(super) disk_budget: u64,
    pub(super) ack: AckMode,
    /// The logs' own retention (`node.log_memory`).
    pub(super) log_retain_bytes: usize,
}

impl Options {
    /// Any log in memory is over the budget.
    pub(super) fn over_memory_budget() -> Options {
        Options {
            memory_budget: 0,
            ..Default::default()
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            memory_budget: 64 << 20,
            disk_budget: 1 << 30,
            ack: AckMode::Pipelined,
            log_retain_bytes: 1 << 20,
        }
    }
}

/// A publisher's core with everything around it.
pub(super) struct Rig {
    pub(super) p: Publisher,
    pub(super) site: Arc<Stand>,
    pub(super) ks: Arc<Keyspace>,
    pub(super) target: Arc<Target>,
    /// What the target gets while the link is up.
    rx: Option<mpsc::UnboundedReceiver<Frame>>,
    hlc: u64,
    _dir: tempfile::TempDir,
}

impl Rig {
    pub(super) fn new() -> Rig {
        Rig::with(Options::default())
    }

    pub(super) fn with(o: Options) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let ks = Arc::new(Keyspace::new(
            KeyspaceConfig {
                partitions: PARTITIONS as u16,
                site_id: 1,
                log_retain_bytes: o.log_retain_bytes,
                tombstone_bytes: 1 << 20,
                ..Default::default()
            },
            Arc::new(DebugClock::default()),
        ));
        let wan = Wan::new(
            WanSettings {
                listen: None,
                memory_budget: o.memory_budget,
                disk_budget: o.disk_budget,
                tombstone_memory: 1 << 20,
                targets: vec![TargetSettings {
                    name: "b".into(),
                    endpoints: Vec::new(),
                    delta: true,
                    ack: o.ack,
                }],
                dir: dir.path().to_path_buf(),
                secret: None,
                tls: None,
            },
            LocalSite {
                restored: None,
                site_id: 1,
                site_name: "a".into(),
                node_id: "n1".into(),
                client_addr: String::new(),
            },
            ks.clone(),
            None,
        );
        let site = Arc::new(Stand {
            primary: (0..PARTITIONS).map(|_| AtomicBool::new(true)).collect(),
            durable: (0..PARTITIONS).map(|_| AtomicU64::new(u64::MAX)).collect(),
            shared: Mutex::new(Vec::new()),
        });
        let target = wan.targets[0].clone();
        let p = Publisher::new(wan, target.clone(), site.clone(), dir.path().join("b"));
        Rig {
            p,
            site,
            ks,
            target,
            rx: None,
            hlc: 0,
            _dir: dir,
        }
    }

    /// Sets `key` to `value` at `site` (1: here); returns its partition
    /// and the seq it was logged at.
    pub(super) fn write_at(&mut self, site: u16, key: &str, value: &[u8]) -> (usize, u64) {
        self.hlc += 1;
        let change = Change {
            key: Bytes::copy_from_slice(key.as_bytes()),
            version: Version {
                hlc: self.hlc << 16,
                site,
            },
            kind: ChangeKind::Full {
                value: Value::str(Bytes::copy_from_slice(value)),
                expire_at: 0,
            },
        };
        let seq = self.ks.apply(change, 0).unwrap();
        (self.ks.partition_of(key.as_bytes()), seq)
    }

    /// A change made here.
    pub(super) fn write(&mut self, key: &str, value: &str) -> (usize, u64) {
        self.write_at(1, key, value.as_bytes())
    }

    /// Keys of partition `p`, `n` of them.
    pub(super) fn keys_of(&self, p: usize, n: usize) -> Vec<String> {
        (0..)
            .map(|i| format!("k{i}"))
            .filter(|k| self.ks.partition_of(k.as_bytes()) == p)
            .take(n)
            .collect()
    }

    /// The link comes up; the target's welcome says it applied `applied`.
    pub(super) fn link_up_with(&mut self, applied: Vec<(u16, u64)>, incarnation: u64) {
        let (tx, rx) = mpsc::unbounded_channel();
        self.rx = Some(rx);
        let out = Outlet {
            tx,
            endpoint: "b:1".into(),
        };
        self.p.linked(out, applied, incarnation);
    }

    pub(super) fn link_up(&mut self) {
        self.link_up_with(Vec::new(), 0);
    }

    /// The batches sent since last asked: (id, entries).
    pub(super) fn sent(&mut self) -> Vec<(u64, Vec<wire::Entry>)> {
        let mut got = Vec::new();
        let Some(rx) = self.rx.as_mut() else {
            return got;
        };
        while let Ok(f) = rx.try_recv() {
            match f {
                Frame::Batch { id, body } => {
                    let entries = wire::decode_entries(&body, PARTITIONS as u16).unwrap();
                    got.push((id, entries));
                }
                Frame::Settled(_) => {}
                other => panic!("not a batch: {other:?}"),
            }
        }
        got
    }

    /// The settled marks announced since last asked.
    pub(super) fn announced(&mut self) -> Vec<(u16, u64)> {
        self.p.settling.last_announce -= super::settling::ANNOUNCE_EVERY;
        self.p.announce_settled();
        let mut got = Vec::new();
        let Some(rx) = self.rx.as_mut() else {
            return got;
        };
        while let Ok(f) = rx.try_recv() {
            if let Frame::Settled(marks) = f {
                got.extend(marks);
            }
        }
        got
    }

    /// The target received and applied batch `id`.
    pub(super) fn ack(&mut self, id: u64) {
        self.p.on_frame(Frame::Received(id)).unwrap();
        self.p.on_frame(Frame::Applied(id)).unwrap();
    }

    /// The small-batch hold is over (its time passed).
    pub(super) fn hold_over(&mut self) {
        if self.p.flow.hold_until.is_some() {
            self.p.flow.hold_until = Some(std::time::Instant::now());
        }
    }

    /// What partition `p`'s log is told this target needs (None: nothing).
    pub(super) fn needed(&self, p: usize) -> Option<u64> {
        let seq = self.target.needed[p].load(Ordering::SeqCst);
        (seq != u64::MAX).then_some(seq)
    }
}

/// (partition, seq, key) of each entry.
pub(super) fn seqs(entries: &[wire::Entry]) -> Vec<(u16, u64, String)> {
    entries
        .iter()
        .map(|e| {
            (
                e.partition,
                e.seq,
                String::from_utf8_lossy(&e.change.key).into_owned(),
            )
        })
        .collect()
}
