//! The store end to end on a real directory: writes through the keyspace's
//! write path, a stop (or none: a crash), a fresh keyspace opened on the
//! same directory holds the same data; snapshots and damaged tails.

use std::sync::Arc;

use bytes::Bytes;
use keyspace::{DebugClock, Keyspace, KeyspaceConfig, Value, Write};

use crate::{Fsync, Store, StoreConfig};

fn keyspace() -> Arc<Keyspace> {
    Arc::new(Keyspace::new(
        KeyspaceConfig {
            partitions: 7,
            ..Default::default()
        },
        Arc::new(DebugClock::default()),
    ))
}

fn set(ks: &Keyspace, key: &str, val: &str) {
    ks.txn([key.as_bytes()], 0)
        .write(
            key.as_bytes(),
            Write::Set {
                value: Value::str(Bytes::copy_from_slice(val.as_bytes())),
                expire_at: 0,
            },
        )
        .unwrap();
}

fn get(ks: &Keyspace, key: &str) -> Option<Bytes> {
    ks.with_partition(ks.partition_of(key.as_bytes()), |p, _| {
        p.get(key.as_bytes()).and_then(|e| e.str_bytes())
    })
}

fn open(dir: &std::path::Path, fsync: Fsync) -> (Arc<Keyspace>, Arc<Store>, crate::Recovered) {
    let ks = keyspace();
    let mut cfg = StoreConfig::new(dir, fsync);
    cfg.segment_bytes = 4096;
    let (store, got) = Store::open(cfg, &ks).unwrap();
    ks.set_persist(store.clone());
    store.start().unwrap();
    (ks, store, got)
}

async fn settle(store: &Store) {
    let target = crate::take_handed();
    assert!(store.wait_durable(target).await);
}

#[tokio::test]
async fn writes_survive_a_restart_with_and_without_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (ks, store, got) = open(dir.path(), Fsync::Always);
        assert!(!got.found_data);
        for i in 0..200 {
            set(&ks, &format!("k{i}"), &format!("v{i}"));
        }
        settle(&store).await;
        store.snapshot().unwrap();
        for i in 0..100 {
            set(&ks, &format!("k{i}"), &format!("w{i}"));
        }
        settle(&store).await;
        // No stop: as after kill -9 (the records are synced).
        std::mem::forget(store);
    }
    let (ks, store, got) = open(dir.path(), Fsync::Always);
    assert!(got.found_data);
    assert!(got.snapshot.is_some());
    assert_eq!(got.log_records, 100);
    assert_eq!(ks.len(), 200);
    assert_eq!(get(&ks, "k5").unwrap(), "w5");
    assert_eq!(get(&ks, "k150").unwrap(), "v150");
    // A write after the restart continues the partition's seqs.
    set(&ks, "k5", "x5");
    settle(&store).await;
    store.stop();
    let (ks, _store, _) = open(dir.path(), Fsync::Always);
    assert_eq!(get(&ks, "k5").unwrap(), "x5");
}

/// The change log's segment files, oldest first.
fn segments(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut segs: Vec<_> = std::fs::read_dir(dir.join("store/log"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    segs.sort();
    segs
}

/// Flips the byte `at` from the end (negative) or the start of `path`.
fn flip(path: &std::path::Path, at: isize) {
    let mut bytes = std::fs::read(path).unwrap();
    let i = if at < 0 {
        bytes.len() - at.unsigned_abs()
    } else {
        at as usize
    };
    bytes[i] ^= 0xff;
    std::fs::write(path, bytes).unwrap();
}

#[tokio::test]
async fn a_torn_tail_is_cut_and_what_precedes_it_loads() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (ks, store, _) = open(dir.path(), Fsync::Always);
        for i in 0..50 {
            set(&ks, &format!("k{i}"), "v");
        }
        settle(&store).await;
        store.stop();
    }
    // Flip a byte in the last record of the last segment.
    flip(segments(dir.path()).last().unwrap(), -2);
    let (ks, _store, got) = open(dir.path(), Fsync::Always);
    assert_eq!(got.log_records, 49);
    assert_eq!(ks.len(), 49);
}

#[tokio::test]
async fn damage_in_an_earlier_segment_ends_the_replay_there() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (ks, store, _) = open(dir.path(), Fsync::Always);
        for i in 0..400 {
            set(&ks, &format!("key-{i}"), "some value of a few bytes");
        }
        settle(&store).await;
        store.stop();
    }
    let segs = segments(dir.path());
    assert!(segs.len() > 3, "{segs:?}");
    flip(&segs[1], 100);
    let log = dir.path().join("store/log");
    let (ks, _store, got) = open(dir.path(), Fsync::Always);
    // What precedes the damage loads; no partition is served with a gap.
    assert!(got.log_records < 400 && got.log_records > 0);
    assert!(ks.len() <= got.log_records as usize);
    assert!(std::fs::read_dir(&log)
        .unwrap()
        .flatten()
        .any(|e| e.path().to_string_lossy().ends_with(".damaged")));
}

#[tokio::test]
async fn a_damaged_snapshot_falls_back_to_the_one_before() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (ks, store, _) = open(dir.path(), Fsync::Always);
        for i in 0..30 {
            set(&ks, &format!("k{i}"), "a");
        }
        settle(&store).await;
        store.snapshot().unwrap();
        for i in 0..30 {
            set(&ks, &format!("k{i}"), "b");
        }
        settle(&store).await;
        store.snapshot().unwrap();
        set(&ks, "k0", "c");
        settle(&store).await;
        store.stop();
    }
    let snaps = crate::snapshot::list(&dir.path().join("store/snapshots"));
    assert_eq!(snaps.len(), 2);
    let newest = &snaps[0].1;
    let mut bytes = std::fs::read(newest).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0x55;
    std::fs::write(newest, bytes).unwrap();
    let (ks, _store, got) = open(dir.path(), Fsync::Always);
    assert_eq!(got.snapshot, Some(snaps[1].0));
    assert_eq!(get(&ks, "k0").unwrap(), "c");
    assert_eq!(get(&ks, "k7").unwrap(), "b");
    assert_eq!(ks.len(), 30);
}

proptest::proptest! {
    /// A snapshot file of any bytes reads as an error (or, by chance, a
    /// snapshot), never a panic or an allocation past its length.
    #[test]
    fn any_snapshot_bytes_read_or_fail(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.snap");
        std::fs::write(&path, &bytes).unwrap();
        let _ = crate::snapshot::read(&path, 7, 1 << 20, |_| Ok(()));
    }
}

/// A real snapshot cut anywhere never loads.
#[tokio::test]
async fn a_snapshot_cut_short_is_refused_at_every_length() {
    let dir = tempfile::tempdir().unwrap();
    let (ks, store, _) = open(dir.path(), Fsync::No);
    for i in 0..20 {
        set(&ks, &format!("k{i}"), "v");
    }
    store.snapshot().unwrap();
    let (_, path) = crate::snapshot::list(&dir.path().join("store/snapshots")).remove(0);
    let bytes = std::fs::read(&path).unwrap();
    assert!(crate::snapshot::read(&path, 7, 1 << 20, |_| Ok(())).is_ok());
    for cut in 0..bytes.len() {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        assert!(
            crate::snapshot::read(&path, 7, 1 << 20, |_| Ok(())).is_err(),
            "cut at {cut}"
        );
    }
}
