//! A node's part of `backup restore`, into partitions it is primary for
//! that hold nothing yet. Layer by layer (so each layer's time can be
//! reported), partitions in parallel:
//!
//! - `reverse` (default): newest layer first. That layer is applied in
//!   full (it holds every key it names at its last value; its deletes
//!   need nothing in an empty partition), and its resolved object
//!   ([`crate::resolved`]) says which entries of which older blocks are
//!   still live: only those blocks are fetched, only those entries
//!   applied, and no older index is read. Each live key is applied once
//!   by construction; a partition is complete at its newest full layer.
//! - `forward`: base first, then every layer in order, applying
//!   everything (and deleting what a layer deleted); for comparison.
//!
//! Restored keys go through the mirror write path (logged, replicated to
//! backups, waited for with sync replication). Keys whose time ran out
//! are skipped. On any error the partitions are emptied again: nothing
//! half restored stays.

use std::time::Instant;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use keyspace::{Change, ChangeKind, Write};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::chunk::{self, BlockError};
use crate::index::{BlockInfo, PartitionIndex};
use crate::manifest::{self, chunk_object, Manifest};
use crate::resolved::{LiveBlock, Resolved};
use crate::{jobs::Progress, Error, Node, Store, PARALLEL};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    Reverse,
    Forward,
}

impl std::str::FromStr for Order {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "reverse" => Ok(Order::Reverse),
            "forward" => Ok(Order::Forward),
            _ => Err(format!("order {s:?}: use reverse or forward")),
        }
    }
}

/// What restoring one layer took, on this node.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LayerStats {
    pub id: String,
    pub seconds: f64,
    pub indexes_read: u64,
    #[serde(default)]
    pub resolved_read: u64,
    /// Chunk objects fetched from (wholly or in ranges) and not touched.
    pub chunks_read: u64,
    pub chunks_skipped: u64,
    pub blocks_read: u64,
    pub blocks_skipped: u64,
    pub keys_applied: u64,
    pub bytes_downloaded: u64,
}

/// What every step of one restore reads: the node, the store, the chain
/// (newest first) and the job's progress.
struct Job<'a> {
    node: &'a Node,
    store: &'a Store,
    chain: &'a [Manifest],
    progress: &'a Mutex<Progress>,
}

/// Reverse order: a partition's progress through the chain.
#[derive(Default)]
struct PartitionState {
    /// The newest layer's resolved object, less the older layers done.
    resolved: Option<Resolved>,
    complete: bool,
}

pub async fn run(
    node: &Node,
    store: &Store,
    id: &str,
    order: Order,
    progress: &Mutex<Progress>,
) -> Result<(), Error> {
    let chain = manifest::chain(store, id).await?;
    if chain[0].partitions != node.ks.partitions() {
        return Err(Error::Refused(format!(
            "backup {id} has {} partitions and this site {}: restore needs the same partition count",
            chain[0].partitions,
            node.ks.partitions()
        )));
    }
    let mine = node.primaries();
    if let Some(p) = mine
        .iter()
        .find(|&&p| node.ks.with_partition(p, |part, _| !part.is_empty()))
    {
        return Err(Error::Refused(format!(
            "partition {p} holds keys: restore needs an empty node or site"
        )));
    }
    progress.lock().partitions_total = mine.len();
    let states: Vec<Mutex<PartitionState>> = mine.iter().map(|_| Mutex::default()).collect();
    let job = Job {
        node,
        store,
        chain: &chain,
        progress,
    };
    let result = async {
        for depth in 0..chain.len() {
            let layer = match order {
                Order::Reverse => &chain[depth],
                Order::Forward => &chain[chain.len() - 1 - depth],
            };
            let started = Instant::now();
            progress.lock().layers.push(LayerStats {
                id: layer.id.clone(),
                ..Default::default()
            });
            futures::stream::iter(0..mine.len())
                .map(|i| job.partition(depth, mine[i], &states[i], order))
                .buffer_unordered(PARALLEL)
                .try_collect::<Vec<()>>()
                .await?;
            let mut pr = progress.lock();
            pr.layers[depth].seconds = started.elapsed().as_secs_f64();
            pr.partitions_done = match order {
                Order::Reverse => states.iter().filter(|s| s.lock().complete).count(),
                // Forward: a partition is done only with the last layer.
                Order::Forward if depth + 1 == chain.len() => mine.len(),
                Order::Forward => 0,
            };
        }
        Ok(())
    }
    .await;
    if result.is_err() {
        // Nothing half restored is served: the node was empty before.
        for &p in &mine {
            clear_partition(node, p);
        }
    }
    result
}

impl Job<'_> {
    /// One partition's step at `depth`.
    async fn partition(
        &self,
        depth: usize,
        p: usize,
        state: &Mutex<PartitionState>,
        order: Order,
    ) -> Result<(), Error> {
        match order {
            Order::Reverse if depth == 0 => self.newest(p, state).await,
            Order::Reverse => self.older(depth, p, state).await,
            Order::Forward => {
                self.forward(&self.chain[self.chain.len() - 1 - depth], p)
                    .await
            }
        }
    }

    /// Reverse, the newest layer: its resolved object (checked against the
    /// chain before anything is applied), then every block of its index.
    async fn newest(&self, p: usize, state: &Mutex<PartitionState>) -> Result<(), Error> {
        let (store, chain) = (self.store, self.chain);
        let (layer, entry) = (&chain[0], &chain[0].entries[p]);
        let index = PartitionIndex::read(store, &layer.id, entry).await?;
        count(self.progress, |l| l.indexes_read += 1);
        if entry.full {
            state.lock().complete = true;
        } else {
            let resolved = Resolved::read(store, &layer.id, entry).await?;
            resolved
                .check_chain(chain)
                .map_err(|reason| Error::Corrupt {
                    object: store.describe(&entry.resolved_object(&layer.id)),
                    reason,
                })?;
            count(self.progress, |l| l.resolved_read += 1);
            state.lock().resolved = Some(resolved);
        }
        self.apply_index(&layer.id, p, &index).await
    }

    /// Reverse, an older layer (`depth` in the chain): only the blocks and
    /// entries the newest layer's resolved object names in it.
    async fn older(
        &self,
        depth: usize,
        p: usize,
        state: &Mutex<PartitionState>,
    ) -> Result<(), Error> {
        let Some(mut resolved) = state.lock().resolved.take() else {
            return Ok(());
        };
        let (layer, entry) = (&self.chain[depth], &self.chain[depth].entries[p]);
        // Blocks are in layer order and earlier layers' are gone: this
        // layer's are the front.
        let n = resolved
            .blocks
            .partition_point(|b| (b.layer as usize) < depth);
        let blocks: Vec<LiveBlock> = resolved.blocks.drain(..n).collect();
        let mut chunks_read = 0;
        for run in blocks.chunk_by(|a, b| a.chunk == b.chunk) {
            let object = chunk_object(&layer.id, p as u16, run[0].chunk as usize);
            let places: Vec<(u64, u64)> = run.iter().map(|b| (b.offset, b.stored_bytes)).collect();
            let owns = |k: &[u8]| self.node.ks.partition_of(k) == p;
            self.apply_chunk(&object, p, &places, |i, bytes| {
                chunk::open_live(bytes, &run[i], owns)
            })
            .await?;
            chunks_read += 1;
        }
        count(self.progress, |l| {
            l.blocks_skipped += entry.blocks.saturating_sub(blocks.len() as u64);
            l.chunks_skipped += u64::from(entry.chunks).saturating_sub(chunks_read);
        });
        let mut st = state.lock();
        if depth == resolved.layers.len() {
            st.complete = true;
        } else {
            st.resolved = Some(resolved);
        }
        Ok(())
    }

    /// Forward: every block of the layer, then its deletes; a full layer
    /// first empties the partition.
    async fn forward(&self, layer: &Manifest, p: usize) -> Result<(), Error> {
        let index = PartitionIndex::read(self.store, &layer.id, &layer.entries[p]).await?;
        count(self.progress, |l| l.indexes_read += 1);
        if index.full {
            clear_partition(self.node, p);
        }
        self.apply_index(&layer.id, p, &index).await?;
        delete(self.node, &index.deleted).await
    }

    /// Every block an index lists, a chunk object at a time.
    async fn apply_index(&self, id: &str, p: usize, index: &PartitionIndex) -> Result<(), Error> {
        let mut by_chunk: Vec<Vec<&BlockInfo>> = vec![Vec::new(); index.chunks as usize];
        for b in &index.blocks {
            // PartitionIndex::read checked every chunk number.
            if let Some(list) = by_chunk.get_mut(b.chunk as usize) {
                list.push(b);
            }
        }
        count(self.progress, |l| {
            l.chunks_skipped += by_chunk.iter().filter(|b| b.is_empty()).count() as u64
        });
        for (c, blocks) in by_chunk.iter().enumerate().filter(|(_, b)| !b.is_empty()) {
            let object = chunk_object(id, p as u16, c);
            let places: Vec<(u64, u64)> =
                blocks.iter().map(|b| (b.offset, b.stored_bytes)).collect();
            let owns = |k: &[u8]| self.node.ks.partition_of(k) == p;
            self.apply_chunk(&object, p, &places, |i, bytes| {
                chunk::open(bytes, blocks[i], owns)
            })
            .await?;
        }
        Ok(())
    }

    /// Fetches the blocks at `places` (offset, stored bytes; in offset
    /// order) of one chunk object, nearby ones in one read, opens each
    /// (`open(i, bytes)` for the i-th) and applies the live values they
    /// hold.
    async fn apply_chunk(
        &self,
        object: &str,
        p: usize,
        places: &[(u64, u64)],
        open: impl Fn(usize, &[u8]) -> Result<Vec<Change>, BlockError>,
    ) -> Result<(), Error> {
        let corrupt = |reason: String| Error::Corrupt {
            object: self.store.describe(object),
            reason,
        };
        let ranges = coalesce(places);
        let stored = self.store.get_ranges(object, &ranges).await?;
        let now = self.node.ks.now_ms();
        let mut changes = Vec::with_capacity(places.len());
        let mut at = 0;
        for (i, &(offset, len)) in places.iter().enumerate() {
            // The fetched range holding this block.
            while ranges
                .get(at)
                .is_some_and(|r| r.end < offset.saturating_add(len))
            {
                at += 1;
            }
            let (Some(range), Some(data)) = (ranges.get(at), stored.get(at)) else {
                return Err(corrupt(format!(
                    "block at {offset} is out of order or past the end"
                )));
            };
            let bytes = offset
                .checked_sub(range.start)
                .and_then(|s| usize::try_from(s).ok())
                .and_then(|s| data.get(s..s.saturating_add(len as usize)))
                .ok_or_else(|| corrupt(format!("block at {offset} runs past the object's end")))?;
            let live = open(i, bytes).map_err(|e| corrupt(format!("block at {offset}: {e}")))?;
            changes.extend(live.into_iter().filter(
                |c| !matches!(c.kind, ChangeKind::Full { expire_at, .. } if expire_at != 0 && expire_at <= now),
            ));
        }
        let downloaded: u64 = stored.iter().map(|b| b.len() as u64).sum();
        let applied = changes.len() as u64;
        apply(self.node, p, changes).await?;
        count(self.progress, |l| {
            l.chunks_read += 1;
            l.blocks_read += places.len() as u64;
            l.bytes_downloaded += downloaded;
            l.keys_applied += applied;
        });
        Ok(())
    }
}

/// Blocks closer than this are fetched in one range (the bytes between
/// cost less than another range). Small, because the store coalesces
/// further where a range is costly: object_store merges an S3 object's
/// ranges within 1 MiB into one request, while a local file pays only a
/// seek and a read per range (a 64 KiB gap made the older layers of the
/// restore benchmark read 422 MB of chunks for about 27 MB of blocks).
const GAP: u64 = 4 << 10;

/// The byte ranges to fetch for `places` (offset, bytes; in offset order):
/// one per run of blocks with gaps under [`GAP`].
fn coalesce(places: &[(u64, u64)]) -> Vec<std::ops::Range<u64>> {
    let mut out: Vec<std::ops::Range<u64>> = Vec::new();
    for &(offset, len) in places {
        let r = offset..offset.saturating_add(len);
        match out.last_mut() {
            Some(last) if r.start >= last.start && r.start <= last.end.saturating_add(GAP) => {
                last.end = last.end.max(r.end)
            }
            _ => out.push(r),
        }
    }
    out
}

fn count(progress: &Mutex<Progress>, f: impl FnOnce(&mut LayerStats)) {
    let mut pr = progress.lock();
    if let Some(l) = pr.layers.last_mut() {
        f(l);
    }
}

/// Applies full values through the mirror path and waits for backups.
async fn apply(node: &Node, p: usize, changes: Vec<Change>) -> Result<(), Error> {
    if !node.owns(p) {
        return Err(Error::Refused(format!(
            "partition {p} moved to another node during the restore"
        )));
    }
    // Nothing awaits between these calls: what this thread logs is ours.
    keyspace::take_written();
    node.ks
        .apply_batch(p, changes, 0)
        .map_err(|e| Error::Refused(format!("partition {p}: {e}")))?;
    let written = keyspace::take_written();
    node.synced(&written).await
}

/// Deletes keys through the local write path (forward order only).
async fn delete(node: &Node, keys: &[Bytes]) -> Result<(), Error> {
    keyspace::take_written();
    for key in keys {
        let mut txn = node.ks.txn([&key[..]], 0);
        if txn.exists(key) {
            let _ = txn.write(key, Write::Delete);
        }
    }
    let written = keyspace::take_written();
    node.synced(&written).await
}

fn clear_partition(node: &Node, p: usize) {
    let keys: Vec<Bytes> = node.ks.with_partition(p, |part, _| {
        part.iter().map(|(k, _)| k.to_bytes()).collect()
    });
    for key in keys {
        let _ = node.ks.txn([&key[..]], 0).write(&key, Write::Delete);
    }
}
