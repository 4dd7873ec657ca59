//! [`Journal`]: appending, reading by id, trimming and recovery over a
//! directory of segments.
//!
//! Appends go through a `BufWriter`, so spilling many small records costs few
//! system calls; `flush` hands the buffer to the OS and `sync` makes it
//! durable (or set `sync_on_append`). Reads never need `&mut self`: the
//! active segment is read through the writer's buffer (see `segment.rs`).
//!
//! Durability rules that recovery relies on:
//! - a segment is fsynced before the next one is created, so after a crash
//!   only the last segment can have a torn tail, and damage in any other
//!   segment is real corruption (reported, never skipped);
//! - new segment files and deletions are made durable with a directory
//!   fsync; segments are deleted oldest first, so a crash mid-trim leaves a
//!   contiguous suffix;
//! - `clear` creates the new, empty segment named `next_id` before deleting
//!   the old ones, so ids stay monotonic even across a crash in between.
//!
//! After a failed write or fsync the state of the active file is unknown;
//! the journal then refuses appends and reads with [`JournalError::Poisoned`]
//! until it is reopened, and recovery cuts whatever partial record was left.

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::error::JournalError;
use crate::record::{Header, RecordError};
use crate::segment::{self, Segment, SegmentReader, Splice};

/// Capacity of the append buffer.
const WRITE_BUF: usize = 64 * 1024;
/// Sparse index entries per full segment; bounds index memory per segment.
const INDEX_ENTRIES_PER_SEGMENT: u64 = 256;
/// Smallest index stride: below this, scanning is cheaper than indexing.
const MIN_STRIDE: u64 = 4 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalConfig {
    /// A segment is sealed and a new one started before a record would take
    /// it past this many bytes (a single larger record gets a segment alone).
    pub segment_bytes: u64,
    /// Largest payload accepted on append and on read; a length field above
    /// it is never allocated for.
    pub max_record: usize,
    /// fsync after every append. Off by default: the journal holds backlog
    /// that the partition log can re-create; `sync` is there when needed.
    pub sync_on_append: bool,
}

impl Default for JournalConfig {
    fn default() -> Self {
        JournalConfig {
            segment_bytes: 64 * 1024 * 1024,
            max_record: 64 * 1024 * 1024,
            sync_on_append: false,
        }
    }
}

impl JournalConfig {
    fn validate(&self) -> Result<(), JournalError> {
        if self.segment_bytes == 0 {
            return Err(JournalError::Config("segment_bytes must be greater than 0"));
        }
        if u32::try_from(self.max_record).is_err() {
            return Err(JournalError::Config("max_record must fit a u32 length"));
        }
        Ok(())
    }

    fn stride(&self) -> u64 {
        (self.segment_bytes / INDEX_ENTRIES_PER_SEGMENT).max(MIN_STRIDE)
    }
}

/// Where a sequential reader is: the id of the next record to read and, once
/// a read has happened, the exact segment and byte offset of that record, so
/// the next read starts there without any lookup. A cursor whose position
/// has been trimmed or cleared away falls back to a lookup by id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    id: u64,
    /// `(first id of the segment, byte offset of record `id`)`.
    at: Option<(u64, u64)>,
}

impl Cursor {
    /// A cursor that starts reading at record `from`.
    pub fn new(from: u64) -> Cursor {
        Cursor { id: from, at: None }
    }

    /// Record `id` starts at `offset` in the segment named `segment_first`.
    fn positioned(id: u64, segment_first: u64, offset: u64) -> Cursor {
        Cursor {
            id,
            at: Some((segment_first, offset)),
        }
    }

    /// The id of the next record this cursor reads.
    pub fn next_id(&self) -> u64 {
        self.id
    }
}

#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
    cfg: JournalConfig,
    /// Full segments, oldest first.
    sealed: VecDeque<Segment>,
    /// The segment being appended to; `writer` writes its file.
    active: Segment,
    writer: BufWriter<File>,
    poisoned: bool,
}

impl Journal {
    /// Opens (creating if needed) the journal in `dir` and recovers it: every
    /// segment is read and checked; a torn tail of the last segment is cut,
    /// any other damage or a gap between segments is an error.
    pub fn open(dir: impl AsRef<Path>, cfg: JournalConfig) -> Result<Journal, JournalError> {
        cfg.validate()?;
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).map_err(JournalError::io(&dir))?;
        let files = segment::list(&dir)?;
        let count = files.len();
        let mut sealed = VecDeque::with_capacity(count);
        for (k, (first_id, path)) in files.into_iter().enumerate() {
            if let Some(prev) = sealed.back().map(|s: &Segment| s.next_id) {
                if prev != first_id {
                    return Err(JournalError::Gap {
                        path,
                        expected: prev,
                        found: first_id,
                    });
                }
            }
            let (seg, damage) = Segment::scan(path, first_id, cfg.max_record, cfg.stride())?;
            if let Some((offset, damage)) = damage {
                if k + 1 < count || !damage.is_torn() {
                    return Err(JournalError::Corrupt {
                        path: seg.path,
                        offset,
                        damage,
                    });
                }
                tracing::warn!(
                    file = %seg.path.display(),
                    offset,
                    %damage,
                    "journal: cutting torn tail of the last segment"
                );
            }
            sealed.push_back(seg);
        }
        let active = match sealed.pop_back() {
            Some(seg) => seg,
            None => {
                let seg = Segment::empty(&dir, 0, cfg.stride());
                create_file(&seg.path)?;
                sync_dir(&dir)?;
                seg
            }
        };
        let writer = open_writer(&active)?;
        Ok(Journal {
            dir,
            cfg,
            sealed,
            active,
            writer,
            poisoned: false,
        })
    }

    /// Appends one record and returns its id.
    pub fn append(&mut self, payload: &[u8]) -> Result<u64, JournalError> {
        self.check_usable()?;
        let too_large = JournalError::RecordTooLarge {
            len: payload.len(),
            max: self.cfg.max_record,
        };
        if payload.len() > self.cfg.max_record {
            return Err(too_large);
        }
        let header = Header::for_payload(payload).ok_or(too_large)?;
        let id = self.active.next_id;
        if id == u64::MAX {
            return Err(JournalError::IdsExhausted {
                path: self.active.path.clone(),
            });
        }
        let record_len = header.record_len();
        if !self.active.is_empty()
            && self.active.len.saturating_add(record_len) > self.cfg.segment_bytes
        {
            let rotated = self.rotate(true);
            self.poison_on_err(rotated)?;
        }
        let written = self
            .writer
            .write_all(&header.to_bytes())
            .and_then(|()| self.writer.write_all(payload))
            .map_err(JournalError::io(&self.active.path));
        self.poison_on_err(written)?;
        self.active.push(id, record_len);
        if self.cfg.sync_on_append {
            self.sync()?;
        }
        Ok(id)
    }

    /// Hands buffered records to the OS (not durable until [`Journal::sync`]).
    pub fn flush(&mut self) -> Result<(), JournalError> {
        self.check_usable()?;
        let flushed = self
            .writer
            .flush()
            .map_err(JournalError::io(&self.active.path));
        self.poison_on_err(flushed)
    }

    /// Makes every appended record durable.
    pub fn sync(&mut self) -> Result<(), JournalError> {
        self.flush()?;
        let synced = self
            .writer
            .get_ref()
            .sync_data()
            .map_err(JournalError::io(&self.active.path));
        self.poison_on_err(synced)
    }

    /// Records with id `>= from` (from the oldest still stored if `from` was
    /// trimmed away). Returns at least one record if any exists; after the
    /// first, stops before a record that would take the payload total past
    /// `max_bytes`. Records appended but not yet flushed are included.
    pub fn read(&self, from: u64, max_bytes: usize) -> Result<Vec<(u64, Bytes)>, JournalError> {
        self.read_from_cursor(Cursor::new(from), max_bytes)
            .map(|(records, _)| records)
    }

    /// Like [`Journal::read`], starting at `cursor`; also returns the cursor
    /// for the next call, which resumes at the exact byte position.
    pub fn read_from_cursor(
        &self,
        cursor: Cursor,
        max_bytes: usize,
    ) -> Result<(Vec<(u64, Bytes)>, Cursor), JournalError> {
        self.check_usable()?;
        let target = cursor.id.max(self.first_id());
        let mut out = Vec::new();
        if target >= self.next_id() {
            let at = (target == self.next_id()).then_some((self.active.first_id, self.active.len));
            return Ok((out, Cursor { id: target, at }));
        }
        let (mut idx, mut id, mut offset) = self.locate(cursor, target);
        let mut total = 0usize;
        while let Some(seg) = self.segment(idx) {
            if offset >= seg.len {
                match self.segment(idx + 1) {
                    Some(next) => {
                        idx += 1;
                        id = next.first_id;
                        offset = 0;
                        continue;
                    }
                    None => break,
                }
            }
            let sealed_file;
            let src = if idx == self.sealed.len() {
                let tail = self.writer.buffer();
                let disk_len = seg.len.saturating_sub(tail.len() as u64);
                Splice::with_tail(self.writer.get_ref(), disk_len, tail)
            } else {
                sealed_file = File::open(&seg.path).map_err(JournalError::io(&seg.path))?;
                Splice::file(&sealed_file, seg.len)
            };
            let mut reader = SegmentReader::new(src, offset, seg.len, self.cfg.max_record);
            loop {
                offset = reader.offset();
                if !out.is_empty() && total >= max_bytes {
                    return Ok((out, Cursor::positioned(id, seg.first_id, offset)));
                }
                let header = match reader.header() {
                    Ok(Some(h)) => h,
                    Ok(None) => break,
                    Err(e) => return Err(read_error(seg, offset, e)),
                };
                let len = usize::try_from(header.len).unwrap_or(usize::MAX);
                if id >= target && !out.is_empty() && total.saturating_add(len) > max_bytes {
                    return Ok((out, Cursor::positioned(id, seg.first_id, offset)));
                }
                let payload = reader
                    .payload(header)
                    .map_err(|e| read_error(seg, offset, e))?;
                if id >= target {
                    total = total.saturating_add(len);
                    out.push((id, Bytes::from(payload)));
                }
                id += 1;
            }
        }
        Ok((
            out,
            Cursor::positioned(id, self.active.first_id, self.active.len),
        ))
    }

    /// Deletes every sealed segment whose records all have ids below `id`.
    /// Only whole segments go, so [`Journal::first_id`] may stay below `id`.
    /// The active segment is kept even when fully below `id`, so that a
    /// reader that keeps up does not turn every trim into a new file; use
    /// [`Journal::clear`] to drop everything.
    pub fn truncate_before(&mut self, id: u64) -> Result<(), JournalError> {
        let mut removed = false;
        while let Some(front) = self.sealed.front() {
            if front.next_id > id {
                break;
            }
            match fs::remove_file(&front.path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(JournalError::io(&front.path)(e)),
            }
            self.sealed.pop_front();
            removed = true;
        }
        if removed {
            sync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// Removes every record. `next_id` does not go back: the journal continues
    /// in a new empty segment named `next_id`.
    pub fn clear(&mut self) -> Result<(), JournalError> {
        self.check_usable()?;
        if !self.active.is_empty() {
            let rotated = self.rotate(false);
            self.poison_on_err(rotated)?;
        }
        self.truncate_before(self.active.first_id)
    }

    /// The id of the oldest record still stored (`next_id` when empty).
    pub fn first_id(&self) -> u64 {
        self.sealed
            .front()
            .map_or(self.active.first_id, |s| s.first_id)
    }

    /// The id the next append gets.
    pub fn next_id(&self) -> u64 {
        self.active.next_id
    }

    /// Bytes of all segment files, counting records still in the buffer.
    pub fn disk_bytes(&self) -> u64 {
        self.sealed
            .iter()
            .map(|s| s.len)
            .fold(self.active.len, u64::saturating_add)
    }

    /// Number of segment files.
    pub fn segment_count(&self) -> usize {
        self.sealed.len() + 1
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Segment `idx` in order, the active one last.
    fn segment(&self, idx: usize) -> Option<&Segment> {
        match self.sealed.get(idx) {
            Some(seg) => Some(seg),
            None if idx == self.sealed.len() => Some(&self.active),
            None => None,
        }
    }

    /// The segment whose first id is `first`, with its index.
    fn segment_named(&self, first: u64) -> Option<(usize, &Segment)> {
        if first == self.active.first_id {
            return Some((self.sealed.len(), &self.active));
        }
        let idx = self
            .sealed
            .binary_search_by_key(&first, |s| s.first_id)
            .ok()?;
        self.sealed.get(idx).map(|seg| (idx, seg))
    }

    /// Where to start reading for `target` (`first_id <= target < next_id`):
    /// `(segment index, id at offset, offset)`, at or before `target`.
    fn locate(&self, cursor: Cursor, target: u64) -> (usize, u64, u64) {
        if let (true, Some((first, offset))) = (cursor.id == target, cursor.at) {
            if let Some((idx, seg)) = self.segment_named(first) {
                if seg.first_id <= target && target <= seg.next_id && offset <= seg.len {
                    return (idx, target, offset);
                }
            }
        }
        let idx = if self.active.first_id <= target {
            self.sealed.len()
        } else {
            self.sealed
                .partition_point(|s| s.first_id <= target)
                .saturating_sub(1)
        };
        let (id, offset) = self
            .segment(idx)
            .map_or((target, 0), |seg| seg.seek_hint(target));
        (idx, id, offset)
    }

    /// Seals the active segment and starts a new one at `next_id`.
    fn rotate(&mut self, sync_sealed: bool) -> Result<(), JournalError> {
        let io_err = JournalError::io(&self.active.path);
        self.writer.flush().map_err(io_err)?;
        if sync_sealed {
            self.writer
                .get_ref()
                .sync_data()
                .map_err(JournalError::io(&self.active.path))?;
        }
        let next = Segment::empty(&self.dir, self.active.next_id, self.cfg.stride());
        let file = create_file(&next.path)?;
        sync_dir(&self.dir)?;
        self.writer = BufWriter::with_capacity(WRITE_BUF, file);
        let sealed = std::mem::replace(&mut self.active, next);
        tracing::debug!(file = %sealed.path.display(), bytes = sealed.len, "journal: segment sealed");
        self.sealed.push_back(sealed);
        Ok(())
    }

    fn check_usable(&self) -> Result<(), JournalError> {
        if self.poisoned {
            Err(JournalError::Poisoned)
        } else {
            Ok(())
        }
    }

    fn poison_on_err<T>(&mut self, r: Result<T, JournalError>) -> Result<T, JournalError> {
        if r.is_err() {
            self.poisoned = true;
        }
        r
    }
}

fn read_error(seg: &Segment, offset: u64, e: RecordError) -> JournalError {
    match e {
        RecordError::Io(source) => JournalError::Io {
            path: seg.path.clone(),
            source,
        },
        RecordError::Damaged(damage) => JournalError::Corrupt {
            path: seg.path.clone(),
            offset,
            damage,
        },
    }
}

fn create_file(path: &Path) -> Result<File, JournalError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(JournalError::io(path))
}

/// Opens the active segment for appending at `seg.len`, cutting off anything
/// after it (the torn tail recovery found).
fn open_writer(seg: &Segment) -> Result<BufWriter<File>, JournalError> {
    let io_err = || JournalError::io(&seg.path);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&seg.path)
        .map_err(io_err())?;
    if file.metadata().map_err(io_err())?.len() != seg.len {
        file.set_len(seg.len).map_err(io_err())?;
        file.sync_all().map_err(io_err())?;
    }
    file.seek(SeekFrom::Start(seg.len)).map_err(io_err())?;
    Ok(BufWriter::with_capacity(WRITE_BUF, file))
}

/// Makes creations and deletions of segment files in `dir` durable.
fn sync_dir(dir: &Path) -> Result<(), JournalError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(JournalError::io(dir))
}
