//! A node's part of `backup restore`, into partitions it is primary for
//! that hold nothing yet. Layer by layer (so each layer's time can be
//! reported), partitions in parallel:
//!
//! - `reverse` (default): newest layer first. A partition's set of
//!   settled keys (applied, or deleted in a newer layer) decides what an
//!   older layer still contributes: a chunk whose keys are all settled is
//!   not downloaded, and a partition is complete at its newest full layer,
//!   so older indexes are not read either. Each live key is applied once.
//! - `forward`: base first, then every layer in order, applying
//!   everything (and deleting what a layer deleted); for comparison.
//!
//! Restored keys go through the mirror write path (logged, replicated to
//! backups, waited for with sync replication). Keys whose time ran out
//! are skipped. On any error the partitions are emptied again: nothing
//! half restored stays.

use std::collections::HashSet;
use std::time::Instant;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use keyspace::{Change, ChangeKind, Write};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::index::{BlockInfo, PartitionIndex};
use crate::manifest::{self, chunk_object, Manifest, PartitionEntry};
use crate::{chunk, jobs::Progress, Error, Node, Store, PARALLEL};

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
    /// Chunk objects fetched from (wholly or in ranges) and not touched.
    pub chunks_read: u64,
    pub chunks_skipped: u64,
    pub blocks_read: u64,
    pub blocks_skipped: u64,
    pub keys_applied: u64,
    pub bytes_downloaded: u64,
}

#[derive(Default)]
struct PartitionState {
    /// Keys applied or deleted by a newer layer (reverse), or applied at
    /// least once (forward).
    settled: HashSet<Bytes, ahash::RandomState>,
    complete: bool,
}

pub async fn run(node: &Node, store: &Store, id: &str, order: Order, progress: &Mutex<Progress>) -> Result<(), Error> {
    let chain = manifest::chain(store, id).await?;
    if chain[0].partitions != node.ks.partitions() {
        return Err(Error::Refused(format!(
            "backup {id} has {} partitions and this site {}: restore needs the same partition count",
            chain[0].partitions,
            node.ks.partitions()
        )));
    }
    let mine = node.primaries();
    if let Some(p) = mine.iter().find(|&&p| node.ks.with_partition(p, |part, _| !part.is_empty())) {
        return Err(Error::Refused(format!("partition {p} holds keys: restore needs an empty node or site")));
    }
    let layers: Vec<&Manifest> = match order {
        Order::Reverse => chain.iter().collect(),
        Order::Forward => chain.iter().rev().collect(),
    };
    progress.lock().partitions_total = mine.len();
    let states: Vec<Mutex<PartitionState>> = mine.iter().map(|_| Mutex::default()).collect();
    let result = async {
        for (depth, layer) in layers.iter().enumerate() {
            let started = Instant::now();
            progress.lock().layers.push(LayerStats { id: layer.id.clone(), ..Default::default() });
            futures::stream::iter(0..mine.len())
                .map(|i| restore_partition(node, store, layer, &layer.entries[mine[i]], &states[i], order, progress))
                .buffer_unordered(PARALLEL)
                .try_collect::<Vec<()>>()
                .await?;
            let mut pr = progress.lock();
            pr.layers[depth].seconds = started.elapsed().as_secs_f64();
            pr.partitions_done = states.iter().filter(|s| s.lock().complete).count();
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

async fn restore_partition(
    node: &Node,
    store: &Store,
    layer: &Manifest,
    entry: &PartitionEntry,
    state: &Mutex<PartitionState>,
    order: Order,
    progress: &Mutex<Progress>,
) -> Result<(), Error> {
    let p = entry.partition as usize;
    if state.lock().complete {
        return Ok(());
    }
    let index = PartitionIndex::read(store, &layer.id, entry).await?;
    count(progress, |l| l.indexes_read += 1);
    if order == Order::Forward && index.full {
        // A full layer replaces whatever the partition held.
        clear_partition(node, p);
    }
    if order == Order::Reverse {
        let mut st = state.lock();
        if st.settled.is_empty() {
            // The newest layer's size is a good guess at the final one.
            st.settled.reserve(index.keys() as usize + index.deleted.len());
        }
        st.settled.extend(index.deleted.iter().cloned());
    }
    // A full layer is the partition's last: what it applies need not be
    // remembered.
    let remember = order == Order::Reverse && !index.full;
    // The blocks still needed, by chunk object.
    let mut needed: Vec<Vec<&BlockInfo>> = vec![Vec::new(); index.chunks as usize];
    let mut skipped = 0;
    {
        let st = state.lock();
        for b in &index.blocks {
            let settled = order == Order::Reverse && b.keys.iter().all(|k| st.settled.contains(k));
            match needed.get_mut(b.chunk as usize) {
                Some(list) if !settled => list.push(b),
                _ => skipped += 1,
            }
        }
    }
    count(progress, |l| {
        l.blocks_skipped += skipped;
        l.chunks_skipped += needed.iter().filter(|n| n.is_empty()).count() as u64;
    });
    for (c, blocks) in needed.iter().enumerate().filter(|(_, b)| !b.is_empty()) {
        let object = chunk_object(&layer.id, entry.partition, c);
        let ranges = coalesce(blocks);
        let stored = store.get_ranges(&object, &ranges).await?;
        let corrupt = |reason: String| Error::Corrupt { object: store.describe(&object), reason };
        let mut changes = Vec::new();
        let mut keys = Vec::new();
        let mut at = 0;
        for b in blocks.iter() {
            // The fetched range holding this block (blocks are in offset order).
            while ranges.get(at).is_some_and(|r| r.end < b.offset.saturating_add(b.stored_bytes)) {
                at += 1;
            }
            let (Some(range), Some(data)) = (ranges.get(at), stored.get(at)) else {
                return Err(corrupt(format!("block at {} is out of order or past the end", b.offset)));
            };
            let start = b.offset.checked_sub(range.start).and_then(|s| usize::try_from(s).ok());
            let bytes = start
                .and_then(|s| data.get(s..s.saturating_add(b.stored_bytes as usize)))
                .ok_or_else(|| corrupt(format!("block at {} runs past the object's end", b.offset)))?;
            keys.extend(b.keys.iter().cloned());
            changes.extend(
                chunk::open(bytes, b, |k| node.ks.partition_of(k) == p)
                    .map_err(|e| corrupt(format!("block at {}: {e}", b.offset)))?,
            );
        }
        let downloaded: u64 = stored.iter().map(|b| b.len() as u64).sum();
        count(progress, |l| {
            l.chunks_read += 1;
            l.blocks_read += blocks.len() as u64;
            l.bytes_downloaded += downloaded;
        });
        let now = node.ks.now_ms();
        let wanted: Vec<Change> = {
            let mut st = state.lock();
            // The index's key (a slice of the index) is what stays in the
            // set, not the block's, whose buffer the value no longer needs.
            changes
                .into_iter()
                .zip(keys)
                .filter(|(_, k)| match order {
                    Order::Forward => true,
                    Order::Reverse if remember => st.settled.insert(k.clone()),
                    Order::Reverse => !st.settled.contains(k),
                })
                .map(|(c, _)| c)
                .filter(|c| !matches!(c.kind, ChangeKind::Full { expire_at, .. } if expire_at != 0 && expire_at <= now))
                .collect()
        };
        let applied = wanted.len() as u64;
        apply(node, p, wanted).await?;
        count(progress, |l| l.keys_applied += applied);
    }
    if order == Order::Forward {
        delete(node, &index.deleted).await?;
    }
    if order == Order::Reverse && index.full {
        let mut st = state.lock();
        st.complete = true;
        st.settled = HashSet::default();
    }
    Ok(())
}

/// Blocks closer than this are fetched in one read (the bytes between
/// cost less than another request).
const GAP: u64 = 64 << 10;

/// The byte ranges to fetch for `blocks` (in offset order): one per run of
/// blocks with gaps under [`GAP`].
fn coalesce(blocks: &[&BlockInfo]) -> Vec<std::ops::Range<u64>> {
    let mut out: Vec<std::ops::Range<u64>> = Vec::new();
    for b in blocks {
        let r = b.offset..b.offset.saturating_add(b.stored_bytes);
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
        return Err(Error::Refused(format!("partition {p} moved to another node during the restore")));
    }
    // Nothing awaits between these calls: what this thread logs is ours.
    keyspace::take_written();
    node.ks.apply_batch(p, changes, 0).map_err(|e| Error::Refused(format!("partition {p}: {e}")))?;
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
    let keys: Vec<Bytes> = node.ks.with_partition(p, |part, _| part.iter().map(|(k, _)| k.clone()).collect());
    for key in keys {
        let _ = node.ks.txn([&key[..]], 0).write(&key, Write::Delete);
    }
}
