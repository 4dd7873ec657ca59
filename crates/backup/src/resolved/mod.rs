//! A partition's resolved object in an incremental layer: for every older
//! layer of its chain, exactly the entries still live at this layer (no
//! newer layer, this one included, wrote or deleted their key). Written at
//! backup time, so a newest-first restore applies this layer's blocks in
//! full and then fetches from older layers only the blocks named here,
//! applying only the entries named here: each live key once, with no
//! older index read and no set of settled keys.
//!
//! Layer N's object is computed from its parent's (the entries live at
//! the parent) and the parent's index (every parent entry is live at the
//! parent), minus the keys layer N names. A layer that holds a partition
//! whole has no resolved object for it: nothing older matters. Every
//! incremental partition has one, changed or not, so the rule holds
//! wherever the partition's primary moves: everything is read through the
//! store. An object holds at most one entry per live key of the partition.
//!
//! The stored format is in [`format`](mod@format); [`Resolved::read`] checks an object
//! against its manifest entry and [`Resolved::check_chain`] against the
//! chain it names (every layer, block and chunk must exist).

mod format;
#[cfg(test)]
mod tests;

use bytes::Bytes;

pub use format::{ResolvedError, MAGIC, MAX_RESOLVED_BYTES, VERSION};

use crate::index::PartitionIndex;
use crate::manifest::{Manifest, PartitionEntry};
use crate::{Error, Store};

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Resolved {
    pub partition: u16,
    /// The seq of the layer this object belongs to (as in its index).
    pub seq: u64,
    /// Ids of the older layers of the partition's chain: the parent first,
    /// down to the newest layer that holds the partition whole.
    pub layers: Vec<String>,
    /// Older blocks holding at least one live entry, ordered by (layer,
    /// block), so by chunk and offset within a layer.
    pub blocks: Vec<LiveBlock>,
}

/// A block of an older layer, where it is and how to check it (copied
/// from that layer's index), and its live entries: [`LiveEntry`]s in
/// memory, their positions alone in the stored header (`format`).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Block<L> {
    /// Position in [`Resolved::layers`].
    pub layer: u32,
    /// Position in that layer's index.
    pub block: u32,
    pub chunk: u32,
    pub offset: u64,
    pub stored_bytes: u64,
    pub checksum: u64,
    pub raw_bytes: u64,
    /// Entries the block holds, live or not.
    pub entries: u32,
    /// The live ones, in block order.
    pub live: L,
}

pub type LiveBlock = Block<Vec<LiveEntry>>;

impl<L> Block<L> {
    /// The same block with another list of live entries.
    pub fn with_live<M>(&self, live: M) -> Block<M> {
        Block {
            layer: self.layer,
            block: self.block,
            chunk: self.chunk,
            offset: self.offset,
            stored_bytes: self.stored_bytes,
            checksum: self.checksum,
            raw_bytes: self.raw_bytes,
            entries: self.entries,
            live,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct LiveEntry {
    /// Position in the block.
    pub at: u32,
    pub key: Bytes,
}

impl Resolved {
    /// Layer `seq`'s object, from its parent `parent_id`: the parent's
    /// index, the parent's resolved object (None when the parent holds the
    /// partition whole), and `changed(key)`, whether the new layer writes
    /// or deletes `key`.
    pub fn next(
        seq: u64,
        parent_id: &str,
        parent_index: &PartitionIndex,
        parent_resolved: Option<&Resolved>,
        changed: impl Fn(&[u8]) -> bool,
    ) -> Resolved {
        let mut layers = vec![parent_id.to_string()];
        let mut blocks = Vec::new();
        for (i, b) in parent_index.blocks.iter().enumerate() {
            let live: Vec<LiveEntry> = (b.keys.iter().enumerate())
                .filter(|(_, k)| !changed(k))
                .map(|(at, k)| LiveEntry {
                    at: at as u32,
                    key: k.clone(),
                })
                .collect();
            if !live.is_empty() {
                blocks.push(LiveBlock {
                    layer: 0,
                    block: i as u32,
                    chunk: b.chunk,
                    offset: b.offset,
                    stored_bytes: b.stored_bytes,
                    checksum: b.checksum,
                    raw_bytes: b.raw_bytes,
                    entries: b.keys.len() as u32,
                    live,
                });
            }
        }
        if let Some(older) = parent_resolved {
            layers.extend(older.layers.iter().cloned());
            for b in &older.blocks {
                let live: Vec<LiveEntry> = b
                    .live
                    .iter()
                    .filter(|e| !changed(&e.key))
                    .cloned()
                    .collect();
                if !live.is_empty() {
                    blocks.push(LiveBlock {
                        layer: b.layer + 1,
                        live,
                        ..b.clone()
                    });
                }
            }
        }
        Resolved {
            partition: parent_index.partition,
            seq,
            layers,
            blocks,
        }
    }

    /// Live entries in all.
    pub fn keys(&self) -> u64 {
        self.blocks.iter().map(|b| b.live.len() as u64).sum()
    }

    /// Reads and checks the resolved object of `entry`'s partition in
    /// backup `id`: its checksum against the manifest, its partition and
    /// seq against the entry.
    pub async fn read(store: &Store, id: &str, entry: &PartitionEntry) -> Result<Resolved, Error> {
        let object = entry.resolved_object(id);
        let corrupt = |reason: String| Error::Corrupt {
            object: store.describe(&object),
            reason,
        };
        let Some(want) = &entry.resolved_checksum else {
            return Err(corrupt(
                "the manifest lists no resolved object for this partition".into(),
            ));
        };
        let data = store.get(&object).await?;
        if &format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&data)) != want {
            return Err(corrupt(
                "checksum mismatch (stored object is damaged)".into(),
            ));
        }
        let resolved = Resolved::decode(&data).map_err(|e| corrupt(e.to_string()))?;
        if resolved.partition != entry.partition || resolved.seq != entry.seq {
            return Err(corrupt("does not match its manifest entry".into()));
        }
        Ok(resolved)
    }

    /// Checks the object against `chain` (its own layer first, then the
    /// older ones, as [`crate::manifest::chain`] returns it): it names the
    /// partition's older layers in order down to its newest full one, and
    /// every block and chunk it names exists there.
    pub fn check_chain(&self, chain: &[Manifest]) -> Result<(), String> {
        let p = self.partition as usize;
        let older = chain.get(1..).unwrap_or_default();
        let Some(full) = older
            .iter()
            .position(|m| m.entries.get(p).is_some_and(|e| e.full))
        else {
            return Err("the chain has no layer holding the partition whole".into());
        };
        let want: Vec<&str> = older[..=full].iter().map(|m| m.id.as_str()).collect();
        if self
            .layers
            .iter()
            .map(String::as_str)
            .ne(want.iter().copied())
        {
            return Err(format!(
                "names layers {:?}, the chain's are {want:?}",
                self.layers
            ));
        }
        for b in &self.blocks {
            let layer = older
                .get(b.layer as usize)
                .ok_or("names a layer past the last")?;
            let e = layer
                .entries
                .get(p)
                .ok_or("names a partition past the last")?;
            if u64::from(b.block) >= e.blocks || b.chunk >= e.chunks {
                return Err(format!(
                    "names block {} in chunk {} of layer {}, which has {} blocks in {} chunks",
                    b.block, b.chunk, layer.id, e.blocks, e.chunks
                ));
            }
        }
        Ok(())
    }

    /// Checks the blocks this object names in layer `layer` against that
    /// layer's index: same place, checksum and sizes, and the live keys
    /// where the index lists them.
    pub fn check_index(&self, layer: u32, index: &PartitionIndex) -> Result<(), String> {
        for b in self.blocks.iter().filter(|b| b.layer == layer) {
            let matches = index.blocks.get(b.block as usize).is_some_and(|i| {
                i.chunk == b.chunk
                    && i.offset == b.offset
                    && i.stored_bytes == b.stored_bytes
                    && i.checksum == b.checksum
                    && i.raw_bytes == b.raw_bytes
                    && i.keys.len() as u64 == u64::from(b.entries)
                    && b.live
                        .iter()
                        .all(|e| i.keys.get(e.at as usize) == Some(&e.key))
            });
            if !matches {
                let id = self.layers.get(layer as usize).map_or("?", String::as_str);
                return Err(format!(
                    "block {} of layer {id} differs from that layer's index",
                    b.block
                ));
            }
        }
        Ok(())
    }
}
