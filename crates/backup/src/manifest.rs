//! A backup's manifest: what it holds, per partition, and its parent. It
//! is written last, so a backup without a manifest does not exist (an
//! interrupted one leaves objects that nothing refers to).
//!
//! Objects of backup `ID`: `ID/manifest.json`, and per partition
//! `ID/pNNNNN.idx` (its [`crate::index::PartitionIndex`]),
//! `ID/pNNNNN-CCCC.chunk`, and for a partition the layer holds as changes
//! only, `ID/pNNNNN.resolved` (its [`crate::resolved::Resolved`]).
//!
//! Format 2 added the resolved objects. Format 1 manifests still load (so
//! `list` and retention see them), but a chain holding one is refused for
//! restore, verify and as a parent: this build restores only through the
//! resolved objects.

use serde::{Deserialize, Serialize};

use crate::store::Store;
use crate::Error;

pub const FORMAT: u32 = 2;
/// The oldest format that still loads (listed, removed by retention, never
/// restored).
pub const OLDEST_LISTED: u32 = 1;
/// Layers a chain may have; deeper is refused (and means a loop).
pub const MAX_CHAIN: usize = 10_000;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub format: u32,
    pub id: String,
    /// The layer this one holds the changes since; None for a full backup.
    pub parent: Option<String>,
    pub created_ms: u64,
    pub site_id: u16,
    pub site_name: String,
    pub partitions: u16,
    /// One per partition, in partition order.
    pub entries: Vec<PartitionEntry>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartitionEntry {
    pub partition: u16,
    /// The last seq of the partition this layer holds.
    pub seq: u64,
    /// The layer holds every live key of the partition.
    pub full: bool,
    pub chunks: u32,
    pub blocks: u64,
    pub keys: u64,
    pub deleted: u64,
    /// Stored bytes of the index and the chunks.
    pub bytes: u64,
    pub index_bytes: u64,
    /// xxh3-64 of the index object, as 16 hex digits.
    pub index_checksum: String,
    /// Stored bytes of the resolved object (0: none, the layer is full).
    #[serde(default)]
    pub resolved_bytes: u64,
    /// xxh3-64 of the resolved object; None when the layer holds the
    /// partition whole (and in format 1).
    #[serde(default)]
    pub resolved_checksum: Option<String>,
}

impl PartitionEntry {
    pub fn index_object(&self, id: &str) -> String {
        index_object(id, self.partition)
    }

    pub fn resolved_object(&self, id: &str) -> String {
        resolved_object(id, self.partition)
    }
}

pub fn index_object(id: &str, partition: u16) -> String {
    format!("{id}/p{partition:05}.idx")
}

pub fn resolved_object(id: &str, partition: u16) -> String {
    format!("{id}/p{partition:05}.resolved")
}

pub fn chunk_object(id: &str, partition: u16, chunk: usize) -> String {
    format!("{id}/p{partition:05}-{chunk:04}.chunk")
}

pub fn manifest_object(id: &str) -> String {
    format!("{id}/manifest.json")
}

impl Manifest {
    pub fn keys(&self) -> u64 {
        self.entries.iter().map(|e| e.keys).sum()
    }

    pub fn bytes(&self) -> u64 {
        self.entries.iter().map(|e| e.bytes).sum()
    }

    pub fn is_full(&self) -> bool {
        self.parent.is_none()
    }

    /// Refuses a manifest older than [`FORMAT`] for anything but listing.
    pub fn restorable(&self) -> Result<(), Error> {
        if self.format == FORMAT {
            return Ok(());
        }
        Err(Error::Refused(format!(
            "backup {} was written by an older deltagrid (manifest format {}, without resolved objects); this build \
             restores format {FORMAT} only: restore it with the version that wrote it, or take a new full backup",
            self.id, self.format
        )))
    }

    /// Checks what the rest of the code relies on: one entry per
    /// partition, in order; a full backup has only full entries.
    fn check(&self) -> Result<(), String> {
        if !(OLDEST_LISTED..=FORMAT).contains(&self.format) {
            return Err(format!(
                "format {} is not supported (this build reads {FORMAT})",
                self.format
            ));
        }
        if self.partitions == 0 || self.entries.len() != self.partitions as usize {
            return Err(format!(
                "{} partition entries for {} partitions",
                self.entries.len(),
                self.partitions
            ));
        }
        for (i, e) in self.entries.iter().enumerate() {
            if e.partition as usize != i {
                return Err(format!("entry {i} is for partition {}", e.partition));
            }
            if self.parent.is_none() && !e.full {
                return Err(format!(
                    "a backup with no parent has an incremental partition {i}"
                ));
            }
            if self.format == FORMAT && e.full == e.resolved_checksum.is_some() {
                return Err(format!("partition {i} is full and resolved, or neither"));
            }
        }
        if !valid_id(&self.id) {
            return Err(format!("bad id {:?}", self.id));
        }
        Ok(())
    }

    pub async fn load(store: &Store, id: &str) -> Result<Manifest, Error> {
        if !valid_id(id) {
            return Err(Error::Refused(format!("{id:?} is not a backup id")));
        }
        let object = manifest_object(id);
        let data = store.get(&object).await?;
        let m: Manifest = serde_json::from_slice(&data).map_err(|e| Error::Corrupt {
            object: store.describe(&object),
            reason: e.to_string(),
        })?;
        m.check().map_err(|reason| Error::Corrupt {
            object: store.describe(&object),
            reason,
        })?;
        if m.id != id {
            return Err(Error::Corrupt {
                object: store.describe(&object),
                reason: format!("names backup {:?}", m.id),
            });
        }
        Ok(m)
    }

    pub async fn save(&self, store: &Store) -> Result<(), Error> {
        let json = serde_json::to_vec_pretty(self).map_err(|e| Error::Refused(e.to_string()))?;
        store.put(&manifest_object(&self.id), json.into()).await
    }
}

/// Ids are made by [`new_id`]; anything else is refused before it is used
/// in an object name.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A new backup id: UTC time (sortable) and a random suffix.
pub fn new_id(now_ms: u64) -> String {
    let secs = now_ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    let suffix = xxhash_rust::xxh3::xxh3_64(&now_ms.to_le_bytes()) ^ std::process::id() as u64;
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}{:03}Z-{:04x}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        now_ms % 1000,
        suffix & 0xffff
    )
}

/// (year, month, day) of a day count since 1970-01-01 (Howard Hinnant's
/// algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// The chain ending at `id`, newest first: that backup, its parent, ...,
/// down to its full base. A missing or damaged layer is an error naming
/// its object, and so is a layer of an older format.
pub async fn chain(store: &Store, id: &str) -> Result<Vec<Manifest>, Error> {
    let mut out: Vec<Manifest> = Vec::new();
    let mut next = Some(id.to_string());
    while let Some(id) = next {
        if out.len() >= MAX_CHAIN || out.iter().any(|m| m.id == id) {
            return Err(Error::Refused(format!(
                "backup chain at {id} loops or is deeper than {MAX_CHAIN}"
            )));
        }
        let m = match Manifest::load(store, &id).await {
            Err(Error::Missing { object }) if !out.is_empty() => {
                return Err(Error::Missing {
                    object: format!("{object} (layer {id}, parent of {})", out[out.len() - 1].id),
                })
            }
            other => other?,
        };
        if let Some(child) = out.last() {
            if m.partitions != child.partitions {
                return Err(Error::Refused(format!(
                    "layer {} has {} partitions, its child {}",
                    m.id, m.partitions, child.partitions
                )));
            }
        }
        m.restorable()?;
        next = m.parent.clone();
        out.push(m);
    }
    Ok(out)
}

/// Every backup with a manifest, oldest first.
pub async fn list(store: &Store) -> Result<Vec<Manifest>, Error> {
    let mut out = Vec::new();
    for id in store.folders().await? {
        match Manifest::load(store, &id).await {
            Ok(m) => out.push(m),
            // No manifest: an interrupted backup, which does not exist.
            Err(Error::Missing { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    out.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_sort_by_time_and_are_valid() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_413), (2025, 11, 21));
        let a = new_id(1_763_719_500_123);
        assert!(a.starts_with("20251121T100500123Z-"), "{a}");
        assert!(valid_id(&a));
        assert!(new_id(1_763_719_500_124) > a);
        assert!(!valid_id("../etc") && !valid_id("") && !valid_id("a/b"));
    }
}
