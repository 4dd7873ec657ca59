//! Errors of the journal.
//!
//! Every error that comes from a file names the file, and damage names the
//! byte offset too, so an operator can inspect or move the file aside. A torn
//! tail in the last segment is not an error (it is repaired on open); damage
//! anywhere else is, because skipping it would lose records silently.

use std::io;
use std::path::PathBuf;

use crate::record::Damage;

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("journal I/O error on {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error("journal record in {} at offset {offset} is damaged: {damage}", path.display())]
    Corrupt {
        path: PathBuf,
        offset: u64,
        damage: Damage,
    },

    #[error("record of {len} bytes exceeds max_record ({max} bytes)")]
    RecordTooLarge { len: usize, max: usize },

    #[error(
        "journal segments are not contiguous: {} starts at id {found}, expected {expected}",
        path.display()
    )]
    Gap {
        path: PathBuf,
        expected: u64,
        found: u64,
    },

    #[error("journal record ids exhausted in {}", path.display())]
    IdsExhausted { path: PathBuf },

    #[error("invalid journal config: {0}")]
    Config(&'static str),

    #[error("journal is unusable after an earlier write failure; reopen it to recover")]
    Poisoned,
}

impl JournalError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> JournalError {
        let path = path.into();
        move |source| JournalError::Io { path, source }
    }
}
