//! Snapshots of a node's copies on disk, taken without fork and without
//! stopping writers: partition by partition, each copied under its lock
//! at one point of its log (values are shared, so a copy is cheap) and
//! written after the lock is let go. A snapshot names the change-log
//! record it starts from: every change logged before that record is in
//! it (it was applied before the copy of its partition was taken), and
//! changes logged after it that the copy holds too are told apart on
//! replay by their seq.
//!
//! A file `<from as 20 digits>.snap` is a sequence of journal-framed
//! records (`len | crc32c | payload`, `journal::record`): a header
//! (`DGSNAP1 | from u64 | partitions u16`), per partition held a part
//! record (`P | partition u16 | next_seq u64 | settled u64 | entries u64`)
//! followed by its entries (`E | encoded change`), and an end record
//! (`Z | parts u64 | entries u64`). It is written under a temporary name,
//! synced and renamed: a file with its end record was complete, and any
//! damage shows as a CRC or count mismatch.

use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use keyspace::{codec, Keyspace};

use crate::record::split_u64;

const MAGIC: &[u8; 7] = b"DGSNAP1";
const EXT: &str = "snap";

/// One item of a snapshot, in file order.
#[derive(Debug)]
pub enum Item {
    /// The entries that follow are partition `partition`'s, whose log
    /// goes on at `next_seq`.
    Part {
        partition: u16,
        next_seq: u64,
        settled: u64,
    },
    /// An encoded change (a full value or a tombstone).
    Entry(Vec<u8>),
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path}: damaged: {reason}")]
    Damaged { path: PathBuf, reason: String },
    #[error("{path}: holds {found} partitions, this node has {want}")]
    Partitions {
        path: PathBuf,
        found: u16,
        want: u16,
    },
    #[error("{path}: {reason}")]
    Refused { path: PathBuf, reason: String },
}

/// What a written snapshot holds.
#[derive(Clone, Copy, Debug, Default)]
pub struct Written {
    pub from: u64,
    pub bytes: u64,
    pub entries: u64,
}

/// Snapshots in `dir`, newest first: (the record they start from, path).
pub fn list(dir: &Path) -> Vec<(u64, PathBuf)> {
    let mut found: Vec<(u64, PathBuf)> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let path = e.path();
            (path.extension()? == EXT)
                .then(|| path.file_stem()?.to_str()?.parse().ok())
                .flatten()
                .map(|from| (from, path))
        })
        .collect();
    found.sort_by_key(|f| std::cmp::Reverse(f.0));
    found
}

fn path_of(dir: &Path, from: u64) -> PathBuf {
    dir.join(format!("{from:020}.{EXT}"))
}

/// Writes a snapshot of every partition of `ks` starting from change-log
/// record `from`, durably (synced, renamed, directory synced).
pub fn write(dir: &Path, from: u64, ks: &Keyspace, max_record: usize) -> io::Result<Written> {
    fs::create_dir_all(dir)?;
    let path = path_of(dir, from);
    let tmp = path.with_extension("tmp");
    let mut out = BufWriter::with_capacity(1 << 20, File::create(&tmp)?);
    let mut w = Framer {
        buf: Vec::new(),
        max_record,
        bytes: 0,
    };
    let mut head = MAGIC.to_vec();
    head.extend_from_slice(&from.to_le_bytes());
    head.extend_from_slice(&ks.partitions().to_le_bytes());
    w.put(&mut out, &head)?;
    let (mut parts, mut entries) = (0u64, 0u64);
    let mut body = Vec::new();
    for p in 0..ks.partitions() as usize {
        let copy = ks.copy_for_disk(p);
        if copy.next_seq <= 1 && copy.entries.is_empty() {
            continue;
        }
        let mut part = vec![b'P'];
        part.extend_from_slice(&(p as u16).to_le_bytes());
        part.extend_from_slice(&copy.next_seq.to_le_bytes());
        part.extend_from_slice(&copy.settled.to_le_bytes());
        part.extend_from_slice(&(copy.entries.len() as u64).to_le_bytes());
        w.put(&mut out, &part)?;
        for change in &copy.entries {
            body.clear();
            body.push(b'E');
            codec::encode(change, &mut body);
            w.put(&mut out, &body)?;
        }
        parts += 1;
        entries += copy.entries.len() as u64;
    }
    let mut end = vec![b'Z'];
    end.extend_from_slice(&parts.to_le_bytes());
    end.extend_from_slice(&entries.to_le_bytes());
    w.put(&mut out, &end)?;
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    drop(file);
    fs::rename(&tmp, &path)?;
    File::open(dir)?.sync_all()?;
    Ok(Written {
        from,
        bytes: w.bytes,
        entries,
    })
}

struct Framer {
    buf: Vec<u8>,
    max_record: usize,
    bytes: u64,
}

impl Framer {
    fn put(&mut self, out: &mut impl Write, payload: &[u8]) -> io::Result<()> {
        self.buf.clear();
        journal::record::encode(payload, self.max_record, &mut self.buf)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        self.bytes += self.buf.len() as u64;
        out.write_all(&self.buf)
    }
}

/// Reads the snapshot at `path`, handing each item to `visit`; returns the
/// record it starts from. Whatever `visit` was given before an error must
/// be undone by the caller (read once to check, then to load).
pub fn read(
    path: &Path,
    partitions: u16,
    max_record: usize,
    mut visit: impl FnMut(Item) -> Result<(), String>,
) -> Result<u64, SnapshotError> {
    let damaged = |reason: String| SnapshotError::Damaged {
        path: path.to_path_buf(),
        reason,
    };
    let file = File::open(path).map_err(|source| SnapshotError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut r = BufReader::with_capacity(1 << 20, file);
    let mut next = || -> Result<Vec<u8>, SnapshotError> {
        match journal::record::read_record(&mut r, max_record) {
            Ok(Some(p)) => Ok(p),
            Ok(None) => Err(damaged("ends before its end record".into())),
            Err(e) => Err(damaged(e.to_string())),
        }
    };
    let head = next()?;
    let rest = head
        .strip_prefix(MAGIC.as_slice())
        .ok_or_else(|| damaged("not a deltagrid snapshot".into()))?;
    let (from, rest) = split_u64(rest).map_err(|e| damaged(e.to_string()))?;
    let found = match rest {
        [a, b] => u16::from_le_bytes([*a, *b]),
        _ => return Err(damaged("bad header".into())),
    };
    if found != partitions {
        return Err(SnapshotError::Partitions {
            path: path.to_path_buf(),
            found,
            want: partitions,
        });
    }
    let (mut parts, mut entries, mut left) = (0u64, 0u64, 0u64);
    loop {
        let rec = next()?;
        let bad = |what: &str| damaged(format!("bad {what} record"));
        match rec.split_first() {
            Some((b'P', rest)) => {
                if left != 0 {
                    return Err(damaged(format!("{left} entries missing")));
                }
                let (p, rest) = rest.split_first_chunk::<2>().ok_or_else(|| bad("part"))?;
                let partition = u16::from_le_bytes(*p);
                if partition >= partitions {
                    return Err(bad("part"));
                }
                let (next_seq, rest) = split_u64(rest).map_err(|_| bad("part"))?;
                let (settled, rest) = split_u64(rest).map_err(|_| bad("part"))?;
                let (count, rest) = split_u64(rest).map_err(|_| bad("part"))?;
                if !rest.is_empty() {
                    return Err(bad("part"));
                }
                left = count;
                parts += 1;
                visit(Item::Part {
                    partition,
                    next_seq,
                    settled,
                })
                .map_err(|reason| refused(path, reason))?;
            }
            Some((b'E', _)) => {
                left = left.checked_sub(1).ok_or_else(|| bad("entry"))?;
                entries += 1;
                let mut rec = rec;
                rec.remove(0);
                visit(Item::Entry(rec)).map_err(|reason| refused(path, reason))?;
            }
            Some((b'Z', rest)) => {
                let (p, rest) = split_u64(rest).map_err(|_| bad("end"))?;
                let (e, _) = split_u64(rest).map_err(|_| bad("end"))?;
                if (p, e) != (parts, entries) || left != 0 {
                    return Err(damaged(format!(
                        "holds {parts} partitions and {entries} entries, its end says {p} and {e}"
                    )));
                }
                return Ok(from);
            }
            _ => return Err(bad("unknown")),
        }
    }
}

fn refused(path: &Path, reason: String) -> SnapshotError {
    SnapshotError::Refused {
        path: path.to_path_buf(),
        reason,
    }
}
