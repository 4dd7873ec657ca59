//! One segment file: its name, what is known about it in memory, and reading
//! records out of it.
//!
//! A segment is named by the id of its first record, zero-padded to 20 digits
//! so that names sort like ids (`00000000000000000042.seg`). Only that exact
//! form counts as a segment; anything else in the directory is left alone.
//!
//! In memory a segment is its id range, its length and a sparse index of
//! `(id, offset)` pairs, one every `stride` bytes. The stride is a fraction
//! of the segment size, so the index has a bounded number of entries per
//! segment whatever the record count, and finding an id costs one binary
//! search plus reading at most `stride` bytes.
//!
//! The active segment's newest bytes may still sit in the writer's buffer.
//! [`Splice`] reads the file up to what the OS has and then the buffer, so a
//! reader sees every appended record without forcing a flush (and without
//! `&mut` access to the journal).

use std::fs::{self, File};
use std::io::{self, BufReader, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::JournalError;
use crate::record::{self, Damage, Header, RecordError};

const SUFFIX: &str = ".seg";
const DIGITS: usize = 20;
/// Read-ahead of a segment reader.
const READ_BUF: usize = 64 * 1024;

/// The file name of the segment whose first record is `first_id`.
pub(crate) fn file_name(first_id: u64) -> String {
    format!("{first_id:0DIGITS$}{SUFFIX}")
}

/// The first id of a segment file name; `None` for anything that is not
/// exactly what [`file_name`] produces.
pub(crate) fn parse_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(SUFFIX)?;
    if digits.len() != DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Segment files of `dir`, sorted by first id. Other entries are ignored.
pub(crate) fn list(dir: &Path) -> Result<Vec<(u64, PathBuf)>, JournalError> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).map_err(JournalError::io(dir))? {
        let entry = entry.map_err(JournalError::io(dir))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.ends_with(SUFFIX) {
            continue;
        }
        let path = entry.path();
        let is_file = entry
            .file_type()
            .map_err(JournalError::io(&path))?
            .is_file();
        match parse_file_name(name) {
            Some(first_id) if is_file => found.push((first_id, path)),
            _ => {
                tracing::warn!(file = %path.display(), "journal: ignoring entry that is not a segment")
            }
        }
    }
    found.sort_unstable_by_key(|(id, _)| *id);
    Ok(found)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct IndexEntry {
    id: u64,
    offset: u64,
}

/// What the journal keeps in memory about one segment file.
#[derive(Debug)]
pub(crate) struct Segment {
    pub path: PathBuf,
    pub first_id: u64,
    /// One past the id of the last record.
    pub next_id: u64,
    /// Bytes of records, including any still in the writer's buffer.
    pub len: u64,
    stride: u64,
    /// Starts with `(first_id, 0)`; ids and offsets increase.
    index: Vec<IndexEntry>,
}

impl Segment {
    pub fn empty(dir: &Path, first_id: u64, stride: u64) -> Segment {
        Segment::at(dir.join(file_name(first_id)), first_id, stride)
    }

    fn at(path: PathBuf, first_id: u64, stride: u64) -> Segment {
        Segment {
            path,
            first_id,
            next_id: first_id,
            len: 0,
            stride: stride.max(1),
            index: vec![IndexEntry {
                id: first_id,
                offset: 0,
            }],
        }
    }

    pub fn is_empty(&self) -> bool {
        self.next_id == self.first_id
    }

    /// Records that record `id` of `record_len` bytes now ends the segment.
    pub fn push(&mut self, id: u64, record_len: u64) {
        let offset = self.len;
        let last = self.index.last().map_or(0, |e| e.offset);
        if offset >= last.saturating_add(self.stride) {
            self.index.push(IndexEntry { id, offset });
        }
        self.next_id = id.saturating_add(1);
        self.len = offset.saturating_add(record_len);
    }

    /// The indexed position closest before `id`: `(id_there, offset)`.
    pub fn seek_hint(&self, id: u64) -> (u64, u64) {
        let i = self.index.partition_point(|e| e.id <= id);
        self.index
            .get(i.saturating_sub(1))
            .map_or((self.first_id, 0), |e| (e.id, e.offset))
    }

    /// Reads a segment file from the start, building its index. Stops at the
    /// first damaged record and returns it with its offset; the caller
    /// decides whether that is a torn tail or an error.
    pub fn scan(
        path: PathBuf,
        first_id: u64,
        max_record: usize,
        stride: u64,
    ) -> Result<(Segment, Option<(u64, Damage)>), JournalError> {
        let file = File::open(&path).map_err(JournalError::io(&path))?;
        let file_len = file.metadata().map_err(JournalError::io(&path))?.len();
        let mut seg = Segment::at(path, first_id, stride);
        let mut reader = SegmentReader::new(Splice::file(&file, file_len), 0, file_len, max_record);
        loop {
            let offset = reader.offset();
            let header = match reader.header() {
                Ok(Some(h)) => h,
                Ok(None) => return Ok((seg, None)),
                Err(RecordError::Damaged(d)) => return Ok((seg, Some((offset, d)))),
                Err(RecordError::Io(e)) => return Err(JournalError::io(&seg.path)(e)),
            };
            match reader.payload(header) {
                Ok(_) => {}
                Err(RecordError::Damaged(d)) => return Ok((seg, Some((offset, d)))),
                Err(RecordError::Io(e)) => return Err(JournalError::io(&seg.path)(e)),
            }
            let id = seg.next_id;
            if id == u64::MAX {
                return Err(JournalError::IdsExhausted { path: seg.path });
            }
            seg.push(id, header.record_len());
        }
    }
}

/// Byte source of a segment: the file up to `disk_len`, then `tail` (the
/// writer's unflushed buffer, empty for sealed segments). Reads with
/// positioned I/O, so it shares the writer's file handle without moving its
/// position.
pub(crate) struct Splice<'a> {
    file: &'a File,
    disk_len: u64,
    tail: &'a [u8],
    pos: u64,
}

impl<'a> Splice<'a> {
    pub fn file(file: &'a File, len: u64) -> Splice<'a> {
        Splice::with_tail(file, len, &[])
    }

    pub fn with_tail(file: &'a File, disk_len: u64, tail: &'a [u8]) -> Splice<'a> {
        Splice {
            file,
            disk_len,
            tail,
            pos: 0,
        }
    }
}

impl Read for Splice<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pos < self.disk_len {
            let left = self.disk_len - self.pos;
            let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
            let n = self.file.read_at(&mut buf[..want], self.pos)?;
            self.pos += n as u64;
            return Ok(n);
        }
        let from = usize::try_from(self.pos - self.disk_len).unwrap_or(usize::MAX);
        let rest = self.tail.get(from..).unwrap_or(&[]);
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.pos += n as u64;
        Ok(n)
    }
}

/// Reads records of one segment from a record boundary up to `end`, never
/// trusting a length to stay inside the segment.
pub(crate) struct SegmentReader<'a> {
    inner: BufReader<Splice<'a>>,
    offset: u64,
    end: u64,
    max_record: usize,
}

impl<'a> SegmentReader<'a> {
    pub fn new(mut src: Splice<'a>, offset: u64, end: u64, max_record: usize) -> SegmentReader<'a> {
        src.pos = offset;
        SegmentReader {
            inner: BufReader::with_capacity(READ_BUF, src),
            offset,
            end,
            max_record,
        }
    }

    /// Offset of the next record.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The next record's header, `None` at the end of the segment. A length
    /// running past the end is a torn payload (checked first, so a tail cut
    /// inside a huge forged length is torn, not "too large"); a length over
    /// `max_record` that does fit is a record written under another limit.
    pub fn header(&mut self) -> Result<Option<Header>, RecordError> {
        let left = self.end.saturating_sub(self.offset);
        if left == 0 {
            return Ok(None);
        }
        let mut limited = (&mut self.inner).take(left);
        let Some(header) = record::read_header(&mut limited)? else {
            return Err(Damage::TornHeader { got: 0 }.into());
        };
        self.offset += record::HEADER_LEN as u64;
        let avail = self.end.saturating_sub(self.offset);
        if u64::from(header.len) > avail {
            return Err(Damage::TornPayload {
                len: header.len,
                got: avail,
            }
            .into());
        }
        header.check(self.max_record)?;
        Ok(Some(header))
    }

    /// The payload after [`SegmentReader::header`], CRC checked.
    pub fn payload(&mut self, header: Header) -> Result<Vec<u8>, RecordError> {
        let payload = record::read_payload(&mut self.inner, header)?;
        self.offset += u64::from(header.len);
        Ok(payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_reject_lookalikes() {
        assert_eq!(file_name(42), "00000000000000000042.seg");
        assert_eq!(parse_file_name("00000000000000000042.seg"), Some(42));
        assert_eq!(parse_file_name(&file_name(u64::MAX)), Some(u64::MAX));
        for bad in [
            "42.seg",
            "0000000000000000042x.seg",
            "00000000000000000042.se",
            "99999999999999999999.seg",
            "+0000000000000000042.seg",
        ] {
            assert_eq!(parse_file_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn sparse_index_is_bounded_by_stride() {
        let mut seg = Segment::at(PathBuf::from("x"), 10, 100);
        for id in 10..1010 {
            seg.push(id, 10);
        }
        assert_eq!(seg.len, 10_000);
        assert_eq!(seg.index.len(), 100);
        assert_eq!(seg.seek_hint(10), (10, 0));
        assert_eq!(seg.seek_hint(25), (20, 100));
        assert_eq!(seg.seek_hint(5), (10, 0));
        assert_eq!(seg.seek_hint(u64::MAX), (1000, 9900));
    }
}
