//! One backup job at a time per node (create or restore), run in the
//! background and polled for its progress, so an admin command never
//! holds a connection for the length of a backup. While a restore runs
//! the node answers data commands with `-LOADING`, as Redis does while it
//! loads a dataset.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::manifest::{Manifest, PartitionEntry};
use crate::restore::{LayerStats, Order};
use crate::{create, restore, AllowedUrls, Error, Node, Store};

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Progress {
    /// "create" or "restore".
    pub kind: String,
    /// "running", "done" or "failed".
    pub state: String,
    pub error: Option<String>,
    pub id: String,
    pub partitions_total: usize,
    pub partitions_done: usize,
    /// Create: keys and stored bytes written so far.
    pub keys: u64,
    pub bytes: u64,
    pub seconds: f64,
    /// Restore: per layer, in the order restored.
    pub layers: Vec<LayerStats>,
    /// Create: the manifest entries of the partitions written.
    pub entries: Vec<PartitionEntry>,
}

pub struct Jobs {
    node: Node,
    allowed: AllowedUrls,
    current: Arc<Mutex<Progress>>,
    running: AtomicBool,
    restoring: Arc<AtomicBool>,
}

impl Jobs {
    /// Jobs of `node`, reading and writing only under `allowed`.
    pub fn new(node: Node, allowed: AllowedUrls) -> Arc<Jobs> {
        Arc::new(Jobs {
            node,
            allowed,
            current: Arc::default(),
            running: AtomicBool::new(false),
            restoring: Arc::new(AtomicBool::new(false)),
        })
    }

    pub fn node(&self) -> &Node {
        &self.node
    }

    /// True while a restore runs: data commands must wait.
    pub fn restoring(&self) -> bool {
        self.restoring.load(Ordering::Relaxed)
    }

    /// The current job's progress; a create's manifest entries (one per
    /// partition written) only once it is done, so polling stays cheap.
    pub fn progress(&self) -> Progress {
        let pr = self.current.lock();
        if pr.state == "running" {
            return Progress {
                entries: Vec::new(),
                ..pr.clone()
            };
        }
        pr.clone()
    }

    /// Starts writing this node's primaries as backup `id` (an incremental
    /// on top of `parent` when given).
    pub fn start_create(
        self: &Arc<Self>,
        url: &str,
        id: &str,
        parent: Option<String>,
        sizes: (usize, usize),
    ) -> Result<(), Error> {
        self.allowed.check(url)?;
        let store = Store::open(url)?;
        let (job_id, me) = (id.to_string(), self.clone());
        self.start("create", id, async move {
            let id = job_id;
            let parent = match parent {
                Some(p) => Some(Manifest::load(&store, &p).await?),
                None => None,
            };
            let entries =
                create::run(&me.node, &store, &id, parent.as_ref(), sizes, &me.current).await?;
            me.current.lock().entries = entries;
            Ok(())
        })
    }

    /// Starts restoring backup `id` into this node's (empty) primaries.
    pub fn start_restore(self: &Arc<Self>, url: &str, id: &str, order: Order) -> Result<(), Error> {
        self.allowed.check(url)?;
        let store = Store::open(url)?;
        let (job_id, me) = (id.to_string(), self.clone());
        self.restoring.store(true, Ordering::Relaxed);
        let restoring = self.restoring.clone();
        let started = self.start("restore", id, async move {
            let r = restore::run(&me.node, &store, &job_id, order, &me.current).await;
            restoring.store(false, Ordering::Relaxed);
            r
        });
        if started.is_err() {
            self.restoring.store(false, Ordering::Relaxed);
        }
        started
    }

    fn start(
        self: &Arc<Self>,
        kind: &str,
        id: &str,
        job: impl std::future::Future<Output = Result<(), Error>> + Send + 'static,
    ) -> Result<(), Error> {
        if !crate::manifest::valid_id(id) {
            return Err(Error::Refused(format!("{id:?} is not a backup id")));
        }
        if self.running.swap(true, Ordering::AcqRel) {
            return Err(Error::Refused(
                "a backup job is already running on this node".into(),
            ));
        }
        *self.current.lock() = Progress {
            kind: kind.into(),
            state: "running".into(),
            id: id.into(),
            ..Default::default()
        };
        let me = self.clone();
        let started = Instant::now();
        tokio::spawn(async move {
            let result = job.await;
            let mut pr = me.current.lock();
            pr.seconds = started.elapsed().as_secs_f64();
            match result {
                Ok(()) => pr.state = "done".into(),
                Err(e) => {
                    tracing::error!(kind = pr.kind, id = pr.id, "backup job failed: {e}");
                    pr.state = "failed".into();
                    pr.error = Some(e.to_string());
                }
            }
            drop(pr);
            me.running.store(false, Ordering::Release);
        });
        Ok(())
    }
}
