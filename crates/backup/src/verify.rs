//! `backup verify`: reads every index and chunk of a chain back and checks
//! its checksum and contents, naming the first object that fails.

use futures::{StreamExt, TryStreamExt};
use serde::Serialize;

use crate::index::PartitionIndex;
use crate::manifest::{self, chunk_object, PartitionEntry};
use crate::{chunk, Error, Store};

#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub layers: usize,
    pub partitions: usize,
    pub chunks: u64,
    pub blocks: u64,
    pub keys: u64,
    pub bytes: u64,
}

pub async fn run(store: &Store, id: &str) -> Result<Report, Error> {
    let chain = manifest::chain(store, id).await?;
    let mut report = Report { layers: chain.len(), partitions: chain[0].partitions as usize, ..Default::default() };
    let partitions = chain[0].partitions;
    for m in &chain {
        let counts: Vec<Report> = futures::stream::iter(&m.entries)
            .map(|e| partition(store, &m.id, e, partitions))
            .buffer_unordered(8)
            .try_collect()
            .await?;
        for r in counts {
            report.chunks += r.chunks;
            report.blocks += r.blocks;
            report.keys += r.keys;
            report.bytes += r.bytes;
        }
    }
    Ok(report)
}

async fn partition(store: &Store, id: &str, e: &PartitionEntry, partitions: u16) -> Result<Report, Error> {
    let index = PartitionIndex::read(store, id, e).await?;
    let corrupt = |object: &str, reason: String| Error::Corrupt { object: store.describe(object), reason };
    let mut report = Report {
        chunks: index.chunks as u64,
        blocks: e.blocks,
        keys: index.keys(),
        bytes: e.index_bytes,
        ..Default::default()
    };
    let owns = |k: &[u8]| keyspace::slot::slot_partition(keyspace::slot::key_slot(k), partitions) == e.partition;
    for c in 0..index.chunks {
        let object = chunk_object(id, e.partition, c as usize);
        let stored = store.get(&object).await?;
        report.bytes += stored.len() as u64;
        let mut end = 0;
        for block in index.blocks.iter().filter(|b| b.chunk == c) {
            let bytes = chunk::slice(&stored, block)
                .ok_or_else(|| corrupt(&object, format!("block at {} runs past the object's end", block.offset)))?;
            chunk::open(bytes, block, owns)
                .map_err(|err| corrupt(&object, format!("block at {}: {err}", block.offset)))?;
            end = end.max(block.offset + block.stored_bytes);
        }
        if end != stored.len() as u64 {
            return Err(corrupt(&object, format!("{} bytes, its blocks cover {end}", stored.len())));
        }
    }
    Ok(report)
}
