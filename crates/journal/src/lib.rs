//! The journal: the node's on-disk segments where partition logs spill when
//! memory is over budget (docs/architecture.md, "Between sites").
//!
//! A journal is a directory of append-only segment files. Each segment is
//! named by the id of its first record (`00000000000000000042.seg`) and holds
//! records framed as `len u32 LE | crc32c u32 LE | payload`. Records are
//! opaque bytes here; the WAN layer decides what they mean.
//!
//! Why segments: the backlog is consumed from the front (a remote site acks)
//! while it grows at the back, so trimming must be cheap. Deleting a whole
//! file is; rewriting one is not. Why a CRC per record: a crash can leave a
//! half-written record at the tail, and the bytes on disk are not trusted.
//! On open the tail of the last segment is checked and a torn record is cut
//! away; damage anywhere else is reported, never skipped, because skipping
//! would silently drop changes a remote site still needs.
//!
//! Invariants:
//! - record ids are dense and increase by one, across segments and reopens;
//!   `clear` keeps `next_id` monotonic so a reader never sees an id reused;
//! - segment `k + 1` starts at the id following the last record of segment
//!   `k`; a gap is an error at open;
//! - memory is O(segments): per segment a sparse offset index with a bounded
//!   number of entries, never per record.

mod error;
mod journal;
pub mod record;
mod segment;

pub use error::JournalError;
pub use journal::{Cursor, Journal, JournalConfig};
pub use record::Damage;
