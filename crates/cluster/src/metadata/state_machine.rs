//! The metadata state machine as openraft drives it: committed entries go
//! through [`SiteMetadata::apply`], and every change is published on a
//! `watch` channel as a fresh `Arc<SiteMetadata>`, so readers take a
//! consistent snapshot without a lock and the node wakes when the table
//! changes.
//!
//! Snapshots are the postcard encoding of [`SiteMetadata`]; the latest one
//! is stored in the log store's file and loaded at start (openraft then
//! re-applies the committed entries after it). A snapshot that arrives from
//! the leader is decoded with a size limit, like everything from a peer.

use std::io::Cursor;
use std::sync::Arc;

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    EntryPayload, ErrorSubject, ErrorVerb, LogId, OptionalSend, RaftSnapshotBuilder, SnapshotMeta,
    StorageError, StorageIOError, StoredMembership,
};
use redb::Database;
use tokio::sync::watch;

use super::log_store::{self, StoreError, StoredSnapshot};
use super::state::{NodeId, Outcome, SiteMetadata};
use super::{Entry, Peer, TypeConfig};

/// Largest snapshot this node accepts from a peer.
pub const MAX_SNAPSHOT: usize = 64 << 20;

#[derive(Clone)]
pub struct StateMachine {
    state: SiteMetadata,
    last_applied: Option<LogId<NodeId>>,
    last_membership: StoredMembership<NodeId, Peer>,
    db: Arc<Database>,
    publish: Arc<watch::Sender<Arc<SiteMetadata>>>,
}

fn io_err<E: std::error::Error + 'static>(
    subject: ErrorSubject<NodeId>,
    verb: ErrorVerb,
    e: &E,
) -> StorageError<NodeId> {
    StorageIOError::new(subject, verb, openraft::AnyError::new(e)).into()
}

/// Decodes snapshot data, ours or a peer's (the network stops a peer's at
/// [`MAX_SNAPSHOT`] bytes before it gets here).
pub fn decode_snapshot(data: &[u8]) -> Result<SiteMetadata, postcard::Error> {
    postcard::from_bytes(data)
}

impl StateMachine {
    /// Loads the stored snapshot, if any, and returns the machine with the
    /// receiving end of its watch channel.
    pub fn load(
        db: Arc<Database>,
    ) -> Result<(StateMachine, watch::Receiver<Arc<SiteMetadata>>), StoreError> {
        let mut sm = StateMachine {
            state: SiteMetadata::default(),
            last_applied: None,
            last_membership: StoredMembership::default(),
            db,
            publish: Arc::new(watch::channel(Arc::new(SiteMetadata::default())).0),
        };
        if let Some(stored) = log_store::load_snapshot(&sm.db)? {
            sm.state = decode_snapshot(&stored.data)?;
            sm.last_applied = stored.meta.last_log_id;
            sm.last_membership = stored.meta.last_membership;
        }
        sm.publish.send_replace(Arc::new(sm.state.clone()));
        let rx = sm.publish.subscribe();
        Ok((sm, rx))
    }

    fn publish(&self) {
        self.publish.send_replace(Arc::new(self.state.clone()));
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        let data = postcard::to_stdvec(&self.state)
            .map_err(|e| io_err(ErrorSubject::StateMachine, ErrorVerb::Read, &e))?;
        let snapshot_id = match &self.last_applied {
            Some(l) => format!("{}-{}", l.leader_id, l.index),
            None => "empty".to_string(),
        };
        let meta = SnapshotMeta {
            last_log_id: self.last_applied,
            last_membership: self.last_membership.clone(),
            snapshot_id,
        };
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data,
        };
        log_store::save_snapshot(&self.db, &stored)
            .await
            .map_err(|e| {
                io_err(
                    ErrorSubject::Snapshot(Some(meta.signature())),
                    ErrorVerb::Write,
                    &e,
                )
            })?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(stored.data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, Peer>), StorageError<NodeId>> {
        Ok((self.last_applied, self.last_membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Outcome>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut outcomes = Vec::new();
        let mut changed = false;
        for entry in entries {
            self.last_applied = Some(entry.log_id);
            let outcome = match entry.payload {
                EntryPayload::Blank => Ok(0),
                EntryPayload::Normal(cmd) => {
                    let out = self.state.apply(&cmd);
                    changed |= out.is_ok();
                    if let Err(refused) = &out {
                        tracing::debug!(
                            index = entry.log_id.index,
                            "metadata command refused: {refused}"
                        );
                    }
                    out
                }
                EntryPayload::Membership(m) => {
                    self.last_membership = StoredMembership::new(Some(entry.log_id), m);
                    Ok(0)
                }
            };
            outcomes.push(outcome);
        }
        if changed {
            self.publish();
        }
        Ok(outcomes)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, Peer>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        let data = snapshot.into_inner();
        let subject = || ErrorSubject::Snapshot(Some(meta.signature()));
        let state = decode_snapshot(&data).map_err(|e| io_err(subject(), ErrorVerb::Read, &e))?;
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data,
        };
        log_store::save_snapshot(&self.db, &stored)
            .await
            .map_err(|e| io_err(subject(), ErrorVerb::Write, &e))?;
        self.state = state;
        self.last_applied = meta.last_log_id;
        self.last_membership = meta.last_membership.clone();
        self.publish();
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        let stored = log_store::load_snapshot(&self.db)
            .map_err(|e| io_err(ErrorSubject::Snapshot(None), ErrorVerb::Read, &e))?;
        Ok(stored.map(|s| Snapshot {
            meta: s.meta,
            snapshot: Box::new(Cursor::new(s.data)),
        }))
    }
}
