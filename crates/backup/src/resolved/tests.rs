//! How a resolved object follows a chain: a key stays listed at its
//! newest position until a layer writes or deletes it.

use std::collections::{BTreeMap, HashSet};

use bytes::Bytes;

use super::*;
use crate::index::BlockInfo;

/// An index of blocks holding the given keys (each inner list a block).
fn index(blocks: &[&[&str]]) -> PartitionIndex {
    PartitionIndex {
        partition: 3,
        seq: 1,
        chunks: 1,
        blocks: blocks
            .iter()
            .enumerate()
            .map(|(i, keys)| BlockInfo {
                offset: i as u64 * 100,
                stored_bytes: 100,
                checksum: i as u64,
                raw_bytes: 200,
                keys: keys.iter().map(|k| Bytes::from(k.to_string())).collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// A chain of layers, each `(blocks, deleted)`; the first is full. The
/// resolved object of each layer after the first.
fn chain(layers: &[(&[&[&str]], &[&str])]) -> Vec<Resolved> {
    let mut out: Vec<Resolved> = Vec::new();
    for (n, (blocks, deleted)) in layers.iter().enumerate().skip(1) {
        let changed: HashSet<&str> = blocks
            .iter()
            .flat_map(|b| b.iter().copied())
            .chain(deleted.iter().copied())
            .collect();
        let parent = index(layers[n - 1].0);
        let r = Resolved::next(n as u64, &format!("L{}", n - 1), &parent, out.last(), |k| {
            changed.contains(std::str::from_utf8(k).unwrap())
        });
        out.push(r);
    }
    out
}

/// key -> (layer id, block, position) of every live entry.
fn listed(r: &Resolved) -> BTreeMap<String, (String, u32, u32)> {
    let mut out = BTreeMap::new();
    for b in &r.blocks {
        for e in &b.live {
            let key = String::from_utf8(e.key.to_vec()).unwrap();
            let was = out.insert(
                key.clone(),
                (r.layers[b.layer as usize].clone(), b.block, e.at),
            );
            assert!(was.is_none(), "{key} listed twice");
        }
    }
    out
}

fn at(layer: &str, block: u32, pos: u32) -> (String, u32, u32) {
    (layer.to_string(), block, pos)
}

#[test]
fn a_key_overwritten_later_is_listed_at_its_newest_place_only() {
    let rs = chain(&[
        (&[&["a", "b"], &["c"]], &[]),
        (&[&["a"]], &[]),
        (&[&["b"]], &[]),
        (&[&["a", "d"]], &[]),
        (&[&["e"]], &[]),
    ]);
    assert_eq!(
        listed(&rs[0]),
        BTreeMap::from([("b".into(), at("L0", 0, 1)), ("c".into(), at("L0", 1, 0))])
    );
    assert_eq!(listed(&rs[1]).get("a"), Some(&at("L1", 0, 0)));
    // Layer 3 rewrites a: no copy of it in layers 0-2 is listed any more.
    let l3 = listed(&rs[2]);
    assert_eq!(
        l3,
        BTreeMap::from([("b".into(), at("L2", 0, 0)), ("c".into(), at("L0", 1, 0))])
    );
    let l4 = listed(&rs[3]);
    assert_eq!(l4.get("a"), Some(&at("L3", 0, 0)));
    assert_eq!(l4.get("b"), Some(&at("L2", 0, 0)));
    assert_eq!(
        l4.get("c"),
        Some(&at("L0", 1, 0)),
        "a key only in the base stays at its base place"
    );
    assert_eq!(l4.get("d"), Some(&at("L3", 0, 1)));
    assert_eq!(rs[3].layers, ["L3", "L2", "L1", "L0"]);
}

#[test]
fn a_deleted_key_disappears_and_a_block_without_live_entries_is_not_listed() {
    let rs = chain(&[
        (&[&["a", "b"], &["c"]], &[]),
        (&[&["d"]], &[]),
        (&[], &["c"]),
        (&[&["x"]], &["a", "d"]),
    ]);
    let l2 = listed(&rs[1]);
    assert!(!l2.contains_key("c") && l2.contains_key("d"));
    assert!(
        rs[1].blocks.iter().all(|b| !(b.layer == 1 && b.block == 1)),
        "the base's block 1 held only c"
    );
    let l3 = listed(&rs[2]);
    assert_eq!(l3, BTreeMap::from([("b".into(), at("L0", 0, 1))]));
    assert_eq!(rs[2].keys(), 1);
    // The base's block 0 keeps its place, checksum and entry count.
    let b = &rs[2].blocks[0];
    assert_eq!(
        (b.layer, b.block, b.offset, b.checksum, b.entries),
        (2, 0, 0, 0, 2)
    );
}

#[test]
fn an_unchanged_partition_still_lists_everything_older() {
    let rs = chain(&[(&[&["a"], &["b"]], &[]), (&[], &[]), (&[], &[])]);
    assert_eq!(
        listed(&rs[1]),
        BTreeMap::from([("a".into(), at("L0", 0, 0)), ("b".into(), at("L0", 1, 0))])
    );
    assert_eq!(rs[1].layers, ["L1", "L0"]);
}

#[test]
fn blocks_stay_in_layer_then_block_order() {
    let rs = chain(&[
        (&[&["a"], &["b"], &["c"]], &[]),
        (&[&["d"], &["e"]], &["b"]),
        (&[&["f"]], &["d"]),
    ]);
    let order: Vec<(u32, u32)> = rs[1].blocks.iter().map(|b| (b.layer, b.block)).collect();
    assert_eq!(order, [(0, 1), (1, 0), (1, 2)]);
    assert_eq!(Resolved::decode(&rs[1].encode()).unwrap(), rs[1]);
}

fn manifest(id: &str, full: bool, blocks: u64, chunks: u32) -> Manifest {
    let entry = |p: u16| PartitionEntry {
        partition: p,
        seq: 0,
        full,
        chunks,
        blocks,
        keys: 0,
        deleted: 0,
        bytes: 0,
        index_bytes: 0,
        index_checksum: String::new(),
        resolved_bytes: 0,
        resolved_checksum: None,
    };
    Manifest {
        format: crate::manifest::FORMAT,
        id: id.into(),
        parent: None,
        created_ms: 0,
        site_id: 1,
        site_name: "s".into(),
        partitions: 4,
        entries: (0..4).map(entry).collect(),
    }
}

#[test]
fn the_chain_must_hold_every_layer_and_block_named() {
    let rs = chain(&[
        (&[&["a"], &["b"], &["c"]], &[]),
        (&[&["d"], &["e"]], &["b"]),
        (&[&["f"]], &["d"]),
    ]);
    let r = &rs[1];
    let good = [
        manifest("L2", false, 1, 1),
        manifest("L1", false, 2, 1),
        manifest("L0", true, 3, 1),
    ];
    assert_eq!(r.check_chain(&good), Ok(()));
    let short = [
        manifest("L2", false, 1, 1),
        manifest("L1", false, 2, 1),
        manifest("L0", true, 2, 1),
    ];
    assert!(r.check_chain(&short).unwrap_err().contains("block 2"));
    let renamed = [
        manifest("L2", false, 1, 1),
        manifest("L1", false, 2, 1),
        manifest("Lx", true, 3, 1),
    ];
    assert!(r
        .check_chain(&renamed)
        .unwrap_err()
        .contains("names layers"));
    let no_base = [
        manifest("L2", false, 1, 1),
        manifest("L1", false, 2, 1),
        manifest("L0", false, 3, 1),
    ];
    assert!(r.check_chain(&no_base).is_err());
    // A layer that holds the partition whole ends its chain there.
    let full_mid = [
        manifest("L2", false, 1, 1),
        manifest("L1", true, 2, 1),
        manifest("L0", true, 3, 1),
    ];
    assert!(r
        .check_chain(&full_mid)
        .unwrap_err()
        .contains("names layers"));
}

#[test]
fn the_index_must_hold_the_blocks_and_keys_named() {
    let base = index(&[&["a", "b"], &["c"]]);
    let r = Resolved::next(1, "L0", &base, None, |k| k == b"a");
    assert_eq!(r.check_index(0, &base), Ok(()));
    let moved = index(&[&["b", "a"], &["c"]]);
    assert!(r.check_index(0, &moved).is_err());
    let mut resealed = base.clone();
    resealed.blocks[1].checksum ^= 1;
    assert!(r.check_index(0, &resealed).is_err());
}
