//! The mirror function: applies a [`Change`] to a partition. The local write
//! path uses it for its own changes, and backups, WAN receivers and restore
//! use it for changes from elsewhere, so a change means the same everywhere.
//!
//! Invariant: on error nothing was modified.

use crate::change::{Change, ChangeKind, DeltaOp};
use crate::delta::{self, StringOpError};
use crate::partition::Partition;
use crate::value::{Entry, HashValue, Value};
use crate::version::Version;

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// The delta was made against a version this copy does not hold: the
    /// sender must ship the full value.
    #[error("delta base {want:?} does not match held version {have:?}")]
    BaseMismatch { want: Version, have: Option<Version> },
    #[error("operation against a key holding the wrong kind of value")]
    WrongType,
    #[error(transparent)]
    StringOp(#[from] StringOpError),
}

pub fn apply_change(part: &mut Partition, change: &Change) -> Result<(), ApplyError> {
    let key = &change.key;
    match &change.kind {
        ChangeKind::Full { value, expire_at } => {
            part.put(key.clone(), Entry { value: value.clone(), version: change.version, expire_at: *expire_at });
        }
        ChangeKind::Delete | ChangeKind::Expire => {
            part.remove(key);
        }
        ChangeKind::Delta { base, op: op @ (DeltaOp::Splice { .. } | DeltaOp::Patch { .. } | DeltaOp::IncrBy(_)) } => {
            // One lookup; the closure checks before it changes anything.
            let applied = part.update(key, |e| {
                if e.version != *base {
                    return Err(ApplyError::BaseMismatch { want: *base, have: Some(e.version) });
                }
                let new = delta::apply_string_op(e.as_str().ok_or(ApplyError::WrongType)?, op)?;
                e.value = Value::Str(new);
                e.version = change.version;
                Ok(())
            });
            applied.unwrap_or(Err(ApplyError::BaseMismatch { want: *base, have: None }))?;
        }
        ChangeKind::Delta { op: DeltaOp::HashSet { fields }, .. } => {
            match part.get(key) {
                Some(e) if e.as_hash().is_none() => return Err(ApplyError::WrongType),
                Some(_) => {}
                None => part.put(
                    key.clone(),
                    Entry { value: Value::Hash(HashValue::new()), version: change.version, expire_at: 0 },
                ),
            }
            part.update(key, |e| {
                if let Value::Hash(h) = &mut e.value {
                    for (f, v) in fields {
                        h.set(f.clone(), v.clone(), change.version);
                    }
                }
                e.version = change.version;
            });
        }
        ChangeKind::Delta { op: DeltaOp::HashDel { fields }, .. } => {
            match part.get(key) {
                None => return Ok(()),
                Some(e) if e.as_hash().is_none() => return Err(ApplyError::WrongType),
                Some(_) => {}
            }
            let empty = part.update(key, |e| {
                if let Value::Hash(h) = &mut e.value {
                    for f in fields {
                        h.remove(f);
                    }
                    e.version = change.version;
                    h.is_empty()
                } else {
                    false
                }
            });
            if empty == Some(true) {
                part.remove(key);
            }
        }
        ChangeKind::Delta { op: DeltaOp::SetExpiry(at), .. } => {
            part.update(key, |e| {
                e.expire_at = *at;
                e.version = change.version;
            });
        }
    }
    Ok(())
}
