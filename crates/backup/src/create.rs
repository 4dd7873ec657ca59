//! A node's part of `backup create`: copies each partition it is primary
//! for (consistent at one seq, see `Keyspace::backup_partition`), writes
//! its chunks, its index and, when the copy holds only the changes since
//! the parent, its resolved object (computed from the parent's index and
//! resolved object, read back from the store: the parent may have been
//! written by another node), and reports the partition's manifest entry.
//! The coordinator writes the manifest once every partition has one.

use std::collections::HashSet;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use parking_lot::Mutex;

use crate::index::PartitionIndex;
use crate::manifest::{chunk_object, index_object, resolved_object, Manifest, PartitionEntry};
use crate::resolved::Resolved;
use crate::{chunk, jobs::Progress, Error, Node, Store, PARALLEL};

/// Default bytes per chunk object (compressed).
pub const CHUNK_BYTES: usize = 4 << 20;
/// Default bytes of entries per block, before compression: small, so a
/// restore decompresses little it does not need.
pub const BLOCK_BYTES: usize = 1 << 10;

pub async fn run(
    node: &Node,
    store: &Store,
    id: &str,
    parent: Option<&Manifest>,
    (block_bytes, chunk_bytes): (usize, usize),
    progress: &Mutex<Progress>,
) -> Result<Vec<PartitionEntry>, Error> {
    if let Some(parent) = parent {
        parent.restorable()?;
        if parent.partitions != node.ks.partitions() {
            return Err(Error::Refused(format!(
                "parent backup {} has {} partitions, this site {}",
                parent.id,
                parent.partitions,
                node.ks.partitions()
            )));
        }
    }
    let mine = node.primaries();
    progress.lock().partitions_total = mine.len();
    let sizes = (
        block_bytes.clamp(1, 16 << 20),
        chunk_bytes.clamp(4 << 10, 256 << 20),
    );
    futures::stream::iter(mine)
        .map(|p| partition(node, store, id, parent, sizes, p, progress))
        .buffer_unordered(PARALLEL)
        .try_collect()
        .await
}

async fn partition(
    node: &Node,
    store: &Store,
    id: &str,
    parent: Option<&Manifest>,
    (block_bytes, chunk_bytes): (usize, usize),
    p: usize,
    progress: &Mutex<Progress>,
) -> Result<PartitionEntry, Error> {
    let parent_at = parent.map(|m| (m.id.as_str(), m.entries[p].seq));
    let mut copy = node.ks.backup_partition(p, id, parent_at);
    let (chunks, blocks) = chunk::build(&copy.entries, block_bytes, chunk_bytes);
    let index = PartitionIndex {
        partition: p as u16,
        seq: copy.seq,
        full: copy.full,
        chunks: chunks.len() as u32,
        blocks,
        deleted: std::mem::take(&mut copy.deleted),
    };
    drop(copy);
    let mut bytes = 0;
    for (i, stored) in chunks.into_iter().enumerate() {
        bytes += stored.len() as u64;
        store.put(&chunk_object(id, p as u16, i), stored).await?;
    }
    let encoded = Bytes::from(index.encode());
    store
        .put(&index_object(id, p as u16), encoded.clone())
        .await?;
    let resolved = match parent {
        Some(parent) if !index.full => {
            let r = Bytes::from(resolve(store, parent, &index).await?.encode());
            store.put(&resolved_object(id, p as u16), r.clone()).await?;
            Some(r)
        }
        _ => None,
    };
    let entry = PartitionEntry {
        partition: p as u16,
        seq: index.seq,
        full: index.full,
        chunks: index.chunks,
        blocks: index.blocks.len() as u64,
        keys: index.keys(),
        deleted: index.deleted.len() as u64,
        bytes: bytes + encoded.len() as u64 + resolved.as_ref().map_or(0, |r| r.len() as u64),
        index_bytes: encoded.len() as u64,
        index_checksum: format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&encoded)),
        resolved_bytes: resolved.as_ref().map_or(0, |r| r.len() as u64),
        resolved_checksum: resolved.map(|r| format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&r))),
    };
    let mut pr = progress.lock();
    pr.partitions_done += 1;
    pr.keys += entry.keys;
    pr.bytes += entry.bytes;
    Ok(entry)
}

/// The resolved object of `index`'s partition in a new layer on top of
/// `parent`: what of the parent and older layers no key of `index` (written
/// or deleted) replaces.
async fn resolve(
    store: &Store,
    parent: &Manifest,
    index: &PartitionIndex,
) -> Result<Resolved, Error> {
    let pe = &parent.entries[index.partition as usize];
    let parent_index = PartitionIndex::read(store, &parent.id, pe).await?;
    let parent_resolved = match pe.full {
        true => None,
        false => {
            let r = Resolved::read(store, &parent.id, pe).await?;
            if r.layers.first() != parent.parent.as_ref() {
                return Err(Error::Corrupt {
                    object: store.describe(&pe.resolved_object(&parent.id)),
                    reason: format!("names layers {:?}, not starting at its parent", r.layers),
                });
            }
            Some(r)
        }
    };
    let changed: HashSet<&[u8], ahash::RandomState> = index
        .blocks
        .iter()
        .flat_map(|b| &b.keys)
        .chain(&index.deleted)
        .map(|k| &k[..])
        .collect();
    Ok(Resolved::next(
        index.seq,
        &parent.id,
        &parent_index,
        parent_resolved.as_ref(),
        |k| changed.contains(k),
    ))
}

/// The coordinator's last step: checks every partition has exactly one
/// entry (a primary that moved during the backup leaves a hole or a
/// double) and writes the manifest.
pub async fn finish(
    store: &Store,
    mut manifest: Manifest,
    entries: impl IntoIterator<Item = PartitionEntry>,
) -> Result<Manifest, Error> {
    let n = manifest.partitions as usize;
    let mut slots: Vec<Option<PartitionEntry>> = vec![None; n];
    for e in entries {
        let p = e.partition as usize;
        match slots.get_mut(p) {
            Some(slot @ None) => *slot = Some(e),
            Some(Some(_)) => {
                return Err(Error::Refused(format!(
                    "partition {p} was written twice (its primary moved during the backup); run the backup again"
                )))
            }
            None => return Err(Error::Refused(format!("partition {p} is out of range"))),
        }
    }
    let missing: Vec<usize> = (0..n).filter(|&p| slots[p].is_none()).collect();
    if !missing.is_empty() {
        return Err(Error::Refused(format!(
            "{} partitions were not written (first: {}; no primary, or it moved during the backup); run the backup again",
            missing.len(),
            missing[0]
        )));
    }
    manifest.entries = slots.into_iter().flatten().collect();
    manifest.save(store).await?;
    Ok(manifest)
}
