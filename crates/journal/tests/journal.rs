//! Black-box tests of the journal on real files in temporary directories.

use std::fs;
use std::path::{Path, PathBuf};

use journal::{Cursor, Damage, Journal, JournalConfig, JournalError};

fn small(segment_bytes: u64) -> JournalConfig {
    JournalConfig {
        segment_bytes,
        max_record: 1024,
        sync_on_append: false,
    }
}

fn payload(i: u64) -> Vec<u8> {
    format!("record-{i}-{}", "x".repeat((i % 50) as usize)).into_bytes()
}

fn read_all(j: &Journal) -> Vec<(u64, Vec<u8>)> {
    j.read(0, usize::MAX)
        .unwrap()
        .into_iter()
        .map(|(id, b)| (id, b.to_vec()))
        .collect()
}

fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    files.sort();
    files
}

#[test]
fn append_read_reopen_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::open(dir.path(), JournalConfig::default()).unwrap();
    assert_eq!((j.first_id(), j.next_id()), (0, 0));
    assert!(j.read(0, usize::MAX).unwrap().is_empty());
    for i in 0..100 {
        assert_eq!(j.append(&payload(i)).unwrap(), i);
    }
    // Not flushed yet: reads see the writer's buffer.
    let expected: Vec<_> = (0..100).map(|i| (i, payload(i))).collect();
    assert_eq!(read_all(&j), expected);
    let bytes = j.disk_bytes();
    drop(j);

    let mut j = Journal::open(dir.path(), JournalConfig::default()).unwrap();
    assert_eq!((j.first_id(), j.next_id()), (0, 100));
    assert_eq!(j.disk_bytes(), bytes);
    assert_eq!(read_all(&j), expected);
    assert_eq!(j.append(b"after reopen").unwrap(), 100);
    j.sync().unwrap();
    drop(j);
    let j = Journal::open(dir.path(), JournalConfig::default()).unwrap();
    assert_eq!(j.read(100, 0).unwrap()[0].1.as_ref(), b"after reopen");
    assert_eq!(
        segment_files(dir.path()),
        vec![dir.path().join("00000000000000000000.seg")]
    );
}

#[test]
fn rotation_names_segments_by_first_id() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::open(dir.path(), small(100)).unwrap();
    // Each record is 8 + 40 bytes: two fit in a 100-byte segment.
    for i in 0..7 {
        j.append(&[i as u8; 40]).unwrap();
    }
    assert_eq!(j.segment_count(), 4);
    let names: Vec<String> = segment_files(dir.path())
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [0, 2, 4, 6].map(|id| format!("{id:020}.seg")).to_vec()
    );
    assert_eq!(j.disk_bytes(), 7 * 48);
    // A record larger than a segment gets a segment of its own.
    j.append(&[9u8; 500]).unwrap();
    j.append(b"small").unwrap();
    assert_eq!(j.segment_count(), 6);
    let all = read_all(&j);
    assert_eq!(all.len(), 9);
    assert_eq!(all[7].1, vec![9u8; 500]);
}

#[test]
fn truncate_before_removes_whole_segments_only() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::open(dir.path(), small(100)).unwrap();
    for i in 0..7 {
        j.append(&[i as u8; 40]).unwrap();
    }
    // Segments: [0,1] [2,3] [4,5] [6].
    j.truncate_before(3).unwrap();
    assert_eq!(j.first_id(), 2);
    assert_eq!(segment_files(dir.path()).len(), 3);
    j.truncate_before(4).unwrap();
    assert_eq!(j.first_id(), 4);
    let ids: Vec<u64> = read_all(&j).iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, vec![4, 5, 6]);
    // Reading below first_id starts at first_id.
    assert_eq!(j.read(1, 0).unwrap()[0].0, 4);
    // The active segment stays even when fully trimmed.
    j.truncate_before(100).unwrap();
    assert_eq!((j.first_id(), j.next_id()), (6, 7));
    assert_eq!(segment_files(dir.path()).len(), 1);
    assert_eq!(j.append(b"more").unwrap(), 7);
    drop(j);
    let j = Journal::open(dir.path(), small(100)).unwrap();
    assert_eq!((j.first_id(), j.next_id()), (6, 8));
    assert_eq!(read_all(&j)[1], (7, b"more".to_vec()));
}

#[test]
fn read_by_id_and_max_bytes() {
    let dir = tempfile::tempdir().unwrap();
    // Large segments so ids are found through the sparse index.
    let mut j = Journal::open(dir.path(), small(1 << 20)).unwrap();
    for i in 0..5000 {
        j.append(&payload(i)).unwrap();
    }
    j.flush().unwrap();
    for from in [0, 1, 77, 1234, 4096, 4999] {
        let got = j.read(from, 0).unwrap();
        assert_eq!(got.len(), 1, "at least one record even with max_bytes 0");
        assert_eq!((got[0].0, got[0].1.to_vec()), (from, payload(from)));
    }
    assert!(j.read(5000, usize::MAX).unwrap().is_empty());
    assert!(j.read(u64::MAX, usize::MAX).unwrap().is_empty());
    // Stops before the record that would pass max_bytes.
    let limit = payload(10).len() + payload(11).len() + payload(12).len() - 1;
    let got = j.read(10, limit).unwrap();
    assert_eq!(
        got.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        vec![10, 11]
    );
    let got = j.read(10, limit + 1).unwrap();
    assert_eq!(got.len(), 3);
}

#[test]
fn cursor_resumes_across_segments_appends_and_trims() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::open(dir.path(), small(200)).unwrap();
    for i in 0..40 {
        j.append(&payload(i)).unwrap();
    }
    let mut cursor = Cursor::new(0);
    let mut seen = Vec::new();
    loop {
        let (batch, next) = j.read_from_cursor(cursor, 100).unwrap();
        if batch.is_empty() {
            break;
        }
        seen.extend(batch.into_iter().map(|(id, b)| (id, b.to_vec())));
        cursor = next;
    }
    assert_eq!(seen, (0..40).map(|i| (i, payload(i))).collect::<Vec<_>>());
    assert_eq!(cursor.next_id(), 40);

    // New appends after the cursor reached the end.
    j.append(&payload(40)).unwrap();
    let (batch, cursor) = j.read_from_cursor(cursor, 100).unwrap();
    assert_eq!(batch[0].0, 40);

    // The cursor's segment trimmed away: it falls back to the oldest record.
    let stale = Cursor::new(3);
    let (batch, _) = j.read_from_cursor(stale, 0).unwrap();
    assert_eq!(batch[0].0, 3);
    j.truncate_before(30).unwrap();
    let (batch, _) = j.read_from_cursor(stale, 0).unwrap();
    assert_eq!(batch[0].0, j.first_id());
    assert!(j.first_id() > 3 && j.first_id() <= 30);
    let (batch, _) = j.read_from_cursor(cursor, 0).unwrap();
    assert!(batch.is_empty());
}

#[test]
fn clear_keeps_ids_monotonic() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::open(dir.path(), small(100)).unwrap();
    for i in 0..5 {
        j.append(&[i; 40]).unwrap();
    }
    j.clear().unwrap();
    assert_eq!((j.first_id(), j.next_id(), j.disk_bytes()), (5, 5, 0));
    assert!(j.read(0, usize::MAX).unwrap().is_empty());
    assert_eq!(
        segment_files(dir.path()),
        vec![dir.path().join(format!("{:020}.seg", 5))]
    );
    drop(j);
    let mut j = Journal::open(dir.path(), small(100)).unwrap();
    assert_eq!(j.next_id(), 5);
    assert_eq!(j.append(b"x").unwrap(), 5);
    j.clear().unwrap();
    j.clear().unwrap();
    assert_eq!(j.append(b"y").unwrap(), 6);
    assert_eq!(read_all(&j), vec![(6, b"y".to_vec())]);
}

#[test]
fn record_larger_than_max_is_rejected_on_append_and_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::open(dir.path(), small(1 << 20)).unwrap();
    let err = j.append(&[0u8; 1025]).unwrap_err();
    assert!(matches!(
        err,
        JournalError::RecordTooLarge {
            len: 1025,
            max: 1024
        }
    ));
    assert_eq!(j.next_id(), 0);
    j.append(&[1u8; 10]).unwrap();
    j.append(&[2u8; 1024]).unwrap();
    drop(j);

    let mut cfg = small(1 << 20);
    cfg.max_record = 100;
    let err = Journal::open(dir.path(), cfg).unwrap_err();
    match err {
        JournalError::Corrupt {
            path,
            offset,
            damage,
        } => {
            assert_eq!(path, dir.path().join(format!("{:020}.seg", 0)));
            assert_eq!(offset, 18);
            assert_eq!(
                damage,
                Damage::TooLarge {
                    len: 1024,
                    max: 100
                }
            );
        }
        other => panic!("unexpected {other}"),
    }
    // Nothing was cut: the old limit still reads everything.
    let j = Journal::open(dir.path(), small(1 << 20)).unwrap();
    assert_eq!(j.next_id(), 2);
}

#[test]
fn torn_tail_of_last_segment_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::open(dir.path(), small(100)).unwrap();
    for i in 0..5 {
        j.append(&[i; 40]).unwrap();
    }
    drop(j);
    let last = segment_files(dir.path()).pop().unwrap();
    let mut bytes = fs::read(&last).unwrap();
    bytes.extend_from_slice(&[7, 0, 0]); // half a header
    fs::write(&last, &bytes).unwrap();
    let mut j = Journal::open(dir.path(), small(100)).unwrap();
    assert_eq!(j.next_id(), 5);
    assert_eq!(fs::metadata(&last).unwrap().len(), 48);
    assert_eq!(j.append(b"next").unwrap(), 5);
    assert_eq!(read_all(&j).len(), 6);
}

#[test]
fn damage_in_a_sealed_segment_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::open(dir.path(), small(100)).unwrap();
    for i in 0..5 {
        j.append(&[i; 40]).unwrap();
    }
    drop(j);
    let first = segment_files(dir.path()).remove(0);
    let mut bytes = fs::read(&first).unwrap();
    bytes[48 + 20] ^= 0xff; // payload of the second record
    fs::write(&first, &bytes).unwrap();
    match Journal::open(dir.path(), small(100)).unwrap_err() {
        JournalError::Corrupt {
            path,
            offset,
            damage,
        } => {
            assert_eq!((path, offset), (first.clone(), 48));
            assert!(matches!(damage, Damage::Checksum { .. }));
        }
        other => panic!("unexpected {other}"),
    }
    // A cut sealed segment is an error too, not a torn tail.
    fs::write(&first, &bytes[..60]).unwrap();
    let err = Journal::open(dir.path(), small(100)).unwrap_err();
    assert!(
        err.to_string().contains("00000000000000000000.seg"),
        "{err}"
    );
}

#[test]
fn gap_between_segments_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::open(dir.path(), small(100)).unwrap();
    for i in 0..7 {
        j.append(&[i; 40]).unwrap();
    }
    drop(j);
    fs::remove_file(dir.path().join(format!("{:020}.seg", 2))).unwrap();
    match Journal::open(dir.path(), small(100)).unwrap_err() {
        JournalError::Gap {
            path,
            expected,
            found,
        } => {
            assert_eq!((expected, found), (2, 4));
            assert_eq!(path, dir.path().join(format!("{:020}.seg", 4)));
        }
        other => panic!("unexpected {other}"),
    }
}

#[test]
fn other_files_are_ignored() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("README"), b"not a segment").unwrap();
    fs::write(dir.path().join("42.seg"), b"garbage").unwrap();
    fs::create_dir(dir.path().join(format!("{:020}.seg", 99))).unwrap();
    let mut j = Journal::open(dir.path(), small(100)).unwrap();
    assert_eq!(j.append(b"a").unwrap(), 0);
    drop(j);
    let j = Journal::open(dir.path(), small(100)).unwrap();
    assert_eq!(read_all(&j), vec![(0, b"a".to_vec())]);
}

#[test]
fn sync_on_append_and_config_validation() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = JournalConfig {
        sync_on_append: true,
        ..small(100)
    };
    let mut j = Journal::open(dir.path().join("nested/dir"), cfg).unwrap();
    j.append(b"durable").unwrap();
    // Synced means on disk without any flush or drop.
    let file = dir.path().join("nested/dir").join(format!("{:020}.seg", 0));
    assert_eq!(fs::metadata(file).unwrap().len(), 15);

    let bad = JournalConfig {
        segment_bytes: 0,
        ..JournalConfig::default()
    };
    assert!(matches!(
        Journal::open(dir.path(), bad),
        Err(JournalError::Config(_))
    ));
}
