//! `backup verify`: reads every index, resolved object and chunk of a chain
//! back and checks its checksum and contents, naming the first object that
//! fails. A resolved object must name the chain's layers and, in each, only
//! blocks and keys that layer's index lists at the place it says.

use futures::{StreamExt, TryStreamExt};
use serde::Serialize;

use crate::index::PartitionIndex;
use crate::manifest::{self, chunk_object, Manifest};
use crate::resolved::Resolved;
use crate::{chunk, Error, Store};

#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub layers: usize,
    pub partitions: usize,
    pub chunks: u64,
    /// Resolved objects checked.
    pub resolved: u64,
    pub blocks: u64,
    pub keys: u64,
    pub bytes: u64,
}

pub async fn run(store: &Store, id: &str) -> Result<Report, Error> {
    let chain = manifest::chain(store, id).await?;
    let mut report = Report {
        layers: chain.len(),
        partitions: chain[0].partitions as usize,
        ..Default::default()
    };
    let partitions = chain[0].partitions;
    for depth in 0..chain.len() {
        let counts: Vec<Report> = futures::stream::iter(0..partitions as usize)
            .map(|p| partition(store, &chain[depth..], p))
            .buffer_unordered(8)
            .try_collect()
            .await?;
        for r in counts {
            report.chunks += r.chunks;
            report.resolved += r.resolved;
            report.blocks += r.blocks;
            report.keys += r.keys;
            report.bytes += r.bytes;
        }
    }
    Ok(report)
}

/// Partition `p` of the first layer of `chain` (which continues down to
/// the base).
async fn partition(store: &Store, chain: &[Manifest], p: usize) -> Result<Report, Error> {
    let (id, e, partitions) = (&chain[0].id, &chain[0].entries[p], chain[0].partitions);
    let index = PartitionIndex::read(store, id, e).await?;
    let corrupt = |object: &str, reason: String| Error::Corrupt {
        object: store.describe(object),
        reason,
    };
    let mut report = Report {
        chunks: index.chunks as u64,
        blocks: e.blocks,
        keys: index.keys(),
        bytes: e.index_bytes,
        ..Default::default()
    };
    let owns = |k: &[u8]| {
        keyspace::slot::slot_partition(keyspace::slot::key_slot(k), partitions) == e.partition
    };
    for c in 0..index.chunks {
        let object = chunk_object(id, e.partition, c as usize);
        let stored = store.get(&object).await?;
        report.bytes += stored.len() as u64;
        let mut end = 0;
        for block in index.blocks.iter().filter(|b| b.chunk == c) {
            let bytes = chunk::slice(&stored, block).ok_or_else(|| {
                corrupt(
                    &object,
                    format!("block at {} runs past the object's end", block.offset),
                )
            })?;
            chunk::open(bytes, block, owns)
                .map_err(|err| corrupt(&object, format!("block at {}: {err}", block.offset)))?;
            end = end.max(block.offset + block.stored_bytes);
        }
        if end != stored.len() as u64 {
            return Err(corrupt(
                &object,
                format!("{} bytes, its blocks cover {end}", stored.len()),
            ));
        }
    }
    if !e.full {
        let resolved = Resolved::read(store, id, e).await?;
        let object = e.resolved_object(id);
        resolved
            .check_chain(chain)
            .map_err(|reason| corrupt(&object, reason))?;
        // One older index at a time, each only if the object names it.
        for (layer, older) in chain[1..].iter().enumerate().take(resolved.layers.len()) {
            if resolved.blocks.iter().any(|b| b.layer as usize == layer) {
                let index = PartitionIndex::read(store, &older.id, &older.entries[p]).await?;
                resolved
                    .check_index(layer as u32, &index)
                    .map_err(|reason| corrupt(&object, reason))?;
            }
        }
        report.resolved = 1;
        report.bytes += e.resolved_bytes;
    }
    Ok(report)
}
