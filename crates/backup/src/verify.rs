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
    pub keys: u64,
    pub bytes: u64,
}

pub async fn run(store: &Store, id: &str) -> Result<Report, Error> {
    let chain = manifest::chain(store, id).await?;
    let mut report = Report { layers: chain.len(), partitions: chain[0].partitions as usize, ..Default::default() };
    let partitions = chain[0].partitions;
    for m in &chain {
        let counts: Vec<(u64, u64, u64)> = futures::stream::iter(&m.entries)
            .map(|e| partition(store, &m.id, e, partitions))
            .buffer_unordered(8)
            .try_collect()
            .await?;
        for (chunks, keys, bytes) in counts {
            report.chunks += chunks;
            report.keys += keys;
            report.bytes += bytes;
        }
    }
    Ok(report)
}

async fn partition(store: &Store, id: &str, e: &PartitionEntry, partitions: u16) -> Result<(u64, u64, u64), Error> {
    let object = e.index_object(id);
    let data = store.get(&object).await?;
    let corrupt = |object: &str, reason: String| Error::Corrupt { object: store.describe(object), reason };
    if format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&data)) != e.index_checksum {
        return Err(corrupt(&object, "checksum mismatch (stored object is damaged)".into()));
    }
    let index = PartitionIndex::decode(&data).map_err(|err| corrupt(&object, err.to_string()))?;
    if index.partition != e.partition || index.seq != e.seq || index.chunks.len() != e.chunks as usize {
        return Err(corrupt(&object, "does not match its manifest entry".into()));
    }
    let mut bytes = data.len() as u64;
    let owns = |k: &[u8]| keyspace::slot::slot_partition(keyspace::slot::key_slot(k), partitions) as u16 == e.partition;
    for (i, info) in index.chunks.iter().enumerate() {
        let object = chunk_object(id, e.partition, i);
        let stored = store.get(&object).await?;
        chunk::open(&stored, info, owns).map_err(|err| corrupt(&object, err.to_string()))?;
        bytes += stored.len() as u64;
    }
    Ok((index.chunks.len() as u64, index.keys(), bytes))
}
