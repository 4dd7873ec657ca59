//! The Raft log, vote and latest snapshot of the metadata group, in one
//! redb file (`metadata.redb`) under the node's data directory, so a node
//! restarted on the same directory recovers its log and catches up.
//!
//! Entries are keyed by log index and encoded with postcard. Every write
//! is its own transaction committed with immediate durability: Raft's
//! promises (a vote is never forgotten, an acknowledged entry is on disk)
//! hold only if the write reached the disk before we answer. Writes run on
//! the blocking pool so an fsync never stalls the runtime; metadata writes
//! are rare and small, so one transaction each costs nothing that matters.
//!
//! The state machine itself lives in memory: on start it loads the stored
//! snapshot and openraft re-applies the committed entries after it (the
//! committed log id is stored too, for that).

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::Arc;

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{
    ErrorSubject, ErrorVerb, LogId, OptionalSend, RaftLogReader, SnapshotMeta, StorageError,
    StorageIOError, Vote,
};
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

use super::state::NodeId;
use super::{Entry, Peer, TypeConfig};

const LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("raft_log");
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("raft_meta");

const VOTE: &str = "vote";
const COMMITTED: &str = "committed";
const LAST_PURGED: &str = "last_purged";
const SNAPSHOT: &str = "snapshot";

pub const FILE_NAME: &str = "metadata.redb";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("metadata store: {0}")]
    Db(#[from] redb::Error),
    #[error("metadata store holds an undecodable record: {0}")]
    Codec(#[from] postcard::Error),
    #[error("metadata store: {0}")]
    Io(#[from] std::io::Error),
    #[error("metadata store task failed: {0}")]
    Join(String),
}

macro_rules! from_redb {
    ($($t:ty),*) => {$(
        impl From<$t> for StoreError {
            fn from(e: $t) -> Self {
                StoreError::Db(e.into())
            }
        }
    )*};
}
from_redb!(
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError
);

/// The snapshot as stored: openraft's meta and the encoded state.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StoredSnapshot {
    pub meta: SnapshotMeta<NodeId, Peer>,
    pub data: Vec<u8>,
}

/// Opens (or creates) the store under `dir`, creating the directory.
pub fn open(dir: &Path) -> Result<Arc<Database>, StoreError> {
    std::fs::create_dir_all(dir)?;
    let db = Database::create(dir.join(FILE_NAME))?;
    // Create the tables once so that readers never meet a missing table.
    let tx = db.begin_write()?;
    tx.open_table(LOG)?;
    tx.open_table(META)?;
    tx.commit()?;
    Ok(Arc::new(db))
}

async fn write<T: Send + 'static>(
    db: &Arc<Database>,
    f: impl FnOnce(&redb::WriteTransaction) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    let db = db.clone();
    tokio::task::spawn_blocking(move || {
        let tx = db.begin_write()?;
        let out = f(&tx)?;
        tx.commit()?;
        Ok(out)
    })
    .await
    .map_err(|e| StoreError::Join(e.to_string()))?
}

fn read_meta<T: for<'de> Deserialize<'de>>(
    db: &Database,
    key: &str,
) -> Result<Option<T>, StoreError> {
    let tx = db.begin_read()?;
    let table = tx.open_table(META)?;
    let Some(v) = table.get(key)? else {
        return Ok(None);
    };
    Ok(Some(postcard::from_bytes(v.value())?))
}

async fn write_meta<T: Serialize>(
    db: &Arc<Database>,
    key: &'static str,
    value: &T,
) -> Result<(), StoreError> {
    let bytes = postcard::to_stdvec(value)?;
    write(db, move |tx| {
        tx.open_table(META)?.insert(key, bytes.as_slice())?;
        Ok(())
    })
    .await
}

pub async fn save_snapshot(
    db: &Arc<Database>,
    snapshot: &StoredSnapshot,
) -> Result<(), StoreError> {
    write_meta(db, SNAPSHOT, snapshot).await
}

pub fn load_snapshot(db: &Database) -> Result<Option<StoredSnapshot>, StoreError> {
    read_meta(db, SNAPSHOT)
}

fn io_err(subject: ErrorSubject<NodeId>, verb: ErrorVerb, e: StoreError) -> StorageError<NodeId> {
    StorageIOError::new(subject, verb, openraft::AnyError::new(&e)).into()
}

#[derive(Clone)]
pub struct LogStore {
    db: Arc<Database>,
}

impl LogStore {
    pub fn new(db: Arc<Database>) -> Self {
        LogStore { db }
    }

    fn entries(&self, range: (Bound<u64>, Bound<u64>)) -> Result<Vec<Entry>, StoreError> {
        let tx = self.db.begin_read()?;
        let table = tx.open_table(LOG)?;
        let mut out = Vec::new();
        for row in table.range::<u64>(range)? {
            let (_, v) = row?;
            out.push(postcard::from_bytes(v.value())?);
        }
        Ok(out)
    }

    fn last_entry(&self) -> Result<Option<Entry>, StoreError> {
        let tx = self.db.begin_read()?;
        let table = tx.open_table(LOG)?;
        let Some((_, v)) = table.last()? else {
            return Ok(None);
        };
        Ok(Some(postcard::from_bytes(v.value())?))
    }

    async fn remove(&self, range: (Bound<u64>, Bound<u64>)) -> Result<(), StoreError> {
        write(&self.db, move |tx| {
            tx.open_table(LOG)?
                .retain_in::<u64, _>(range, |_, _| false)?;
            Ok(())
        })
        .await
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError<NodeId>> {
        let range = (range.start_bound().cloned(), range.end_bound().cloned());
        self.entries(range)
            .map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Read, e))
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let read = || -> Result<_, StoreError> {
            let last_purged_log_id: Option<LogId<NodeId>> = read_meta(&self.db, LAST_PURGED)?;
            let last = self.last_entry()?.map(|e| e.log_id);
            Ok(LogState {
                last_purged_log_id,
                last_log_id: last.or(last_purged_log_id),
            })
        };
        read().map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Read, e))
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        write_meta(&self.db, VOTE, vote)
            .await
            .map_err(|e| io_err(ErrorSubject::Vote, ErrorVerb::Write, e))
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        read_meta(&self.db, VOTE).map_err(|e| io_err(ErrorSubject::Vote, ErrorVerb::Read, e))
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<NodeId>>,
    ) -> Result<(), StorageError<NodeId>> {
        write_meta(&self.db, COMMITTED, &committed)
            .await
            .map_err(|e| io_err(ErrorSubject::Store, ErrorVerb::Write, e))
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StorageError<NodeId>> {
        let committed: Option<Option<LogId<NodeId>>> = read_meta(&self.db, COMMITTED)
            .map_err(|e| io_err(ErrorSubject::Store, ErrorVerb::Read, e))?;
        Ok(committed.flatten())
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let encoded = entries
            .into_iter()
            .map(|e| Ok((e.log_id.index, postcard::to_stdvec(&e)?)))
            .collect::<Result<Vec<(u64, Vec<u8>)>, StoreError>>();
        let result = match encoded {
            Ok(rows) => {
                write(&self.db, move |tx| {
                    let mut table = tx.open_table(LOG)?;
                    for (index, bytes) in &rows {
                        table.insert(*index, bytes.as_slice())?;
                    }
                    Ok(())
                })
                .await
            }
            Err(e) => Err(e),
        };
        match result {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                let msg = e.to_string();
                callback.log_io_completed(Err(std::io::Error::other(msg)));
                Err(io_err(ErrorSubject::Logs, ErrorVerb::Write, e))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.remove((Bound::Included(log_id.index), Bound::Unbounded))
            .await
            .map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Delete, e))
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let purge = async {
            write_meta(&self.db, LAST_PURGED, &log_id).await?;
            self.remove((Bound::Unbounded, Bound::Included(log_id.index)))
                .await
        };
        purge
            .await
            .map_err(|e| io_err(ErrorSubject::Logs, ErrorVerb::Delete, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, EntryPayload};

    fn entry(term: u64, index: u64) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
            payload: EntryPayload::Blank,
        }
    }

    async fn append(store: &mut LogStore, entries: Vec<Entry>) {
        // Without a running Raft there is no flush callback to hand in;
        // write the rows the way `append` does.
        let rows: Vec<(u64, Vec<u8>)> = entries
            .iter()
            .map(|e| (e.log_id.index, postcard::to_stdvec(e).unwrap()))
            .collect();
        write(&store.db, move |tx| {
            let mut t = tx.open_table(LOG)?;
            for (i, b) in &rows {
                t.insert(*i, b.as_slice())?;
            }
            Ok(())
        })
        .await
        .unwrap();
    }

    #[tokio::test]
    async fn log_vote_and_purge_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut s = LogStore::new(open(dir.path()).unwrap());
            append(&mut s, (1..=5).map(|i| entry(1, i)).collect()).await;
            s.save_vote(&Vote::new(3, 2)).await.unwrap();
            s.save_committed(Some(entry(1, 4).log_id)).await.unwrap();
            s.truncate(entry(1, 5).log_id).await.unwrap();
            s.purge(entry(1, 2).log_id).await.unwrap();
        }
        let mut s = LogStore::new(open(dir.path()).unwrap());
        assert_eq!(s.read_vote().await.unwrap(), Some(Vote::new(3, 2)));
        assert_eq!(s.read_committed().await.unwrap(), Some(entry(1, 4).log_id));
        let state = s.get_log_state().await.unwrap();
        assert_eq!(state.last_purged_log_id, Some(entry(1, 2).log_id));
        assert_eq!(state.last_log_id, Some(entry(1, 4).log_id));
        let got: Vec<u64> = s
            .try_get_log_entries(0..100)
            .await
            .unwrap()
            .iter()
            .map(|e| e.log_id.index)
            .collect();
        assert_eq!(got, vec![3, 4]);
        let got = s.try_get_log_entries(4..=4).await.unwrap();
        assert_eq!(got.len(), 1);
    }

    #[tokio::test]
    async fn an_empty_store_reports_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = LogStore::new(open(dir.path()).unwrap());
        assert_eq!(s.read_vote().await.unwrap(), None);
        assert_eq!(s.read_committed().await.unwrap(), None);
        assert_eq!(s.get_log_state().await.unwrap(), LogState::default());
        assert!(load_snapshot(&s.db).unwrap().is_none());
    }
}
