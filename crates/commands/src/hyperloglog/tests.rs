//! Tests of the HyperLogLog encoding and estimator: arbitrary bytes never
//! panic, sparse and dense agree register for register, and values and
//! counts match what Redis 7.0 produced for the same additions.

use proptest::prelude::*;

use super::encoding::{
    encoding_of, histogram, merge_into, Encoding, Hll, HllError, DENSE_LEN, HEADER_LEN, REGISTERS,
};
use super::estimator::{estimate, raw_histogram, register_and_count};
use super::sparse::{self, describe};
use super::{AddElement, SPARSE_MAX_BYTES};

/// `PFADD k item-0 .. item-(n-1)` then `PFCOUNT k` on redis-server 7.0.15
/// (sparse up to 1500, dense from 2000).
const REDIS_COUNTS: &[(usize, u64)] = &[
    (1, 1),
    (2, 2),
    (3, 3),
    (5, 5),
    (10, 10),
    (20, 20),
    (50, 50),
    (100, 100),
    (200, 199),
    (500, 497),
    (1000, 996),
    (1500, 1496),
    (2000, 2005),
    (3000, 2993),
    (5000, 4987),
    (10000, 9991),
    (20000, 19865),
    (50000, 50071),
    (100000, 100648),
    (200000, 202639),
];

/// `GET k` after `PFADD k item-0 .. item-19` on redis-server 7.0.15.
const REDIS_SPARSE_20: &str = "48594c4c01000000000000000000008045de8440718440bd98404888420c\
8046bb8c4a468443238440c48842838041228042948047bf8444238042f78041bb8042ad8443d98442\
6e80404380418b";

/// The registers of any HyperLogLog, one per byte.
fn regs_of(hll: &Hll) -> Vec<u8> {
    match hll.encoding() {
        Encoding::Sparse => {
            let mut regs = vec![0u8; REGISTERS];
            sparse::merge_into(&mut regs, &hll.bytes()[HEADER_LEN..]).expect("valid body");
            regs
        }
        Encoding::Dense => super::encoding::dense_registers(&hll.bytes()[HEADER_LEN..]),
    }
}

fn count(hll: &Hll) -> u64 {
    estimate(&histogram(hll.bytes(), hll.encoding()).expect("valid body"))
}

fn items(n: usize) -> impl Iterator<Item = Vec<u8>> {
    (0..n).map(|i| format!("item-{i}").into_bytes())
}

fn hll_of(n: usize) -> Hll {
    let mut h = Hll::new();
    for e in items(n) {
        h.add(&e, SPARSE_MAX_BYTES).unwrap();
    }
    h
}

#[test]
fn counts_match_redis() {
    // PFADD k item-0 .. item-(n-1) then PFCOUNT k, on redis-server 7.0.15.
    for (n, redis) in REDIS_COUNTS {
        let h = hll_of(*n);
        assert_eq!(count(&h), *redis, "n={n}");
        let mut dense = h.clone();
        dense.make_dense().unwrap();
        assert_eq!(count(&dense), *redis, "n={n} dense");
    }
}

#[test]
fn sparse_bytes_match_redis() {
    // GET k after PFADD k item-0 .. item-19 on redis-server 7.0.15.
    let h = hll_of(20);
    assert_eq!(h.encoding(), Encoding::Sparse);
    assert_eq!(hex(h.bytes()), REDIS_SPARSE_20);
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn promotion_happens_past_the_sparse_limit() {
    let mut h = Hll::new();
    let mut turned = None;
    for (i, e) in items(5000).enumerate() {
        let before = h.bytes().len();
        h.add(&e, SPARSE_MAX_BYTES).unwrap();
        if h.encoding() == Encoding::Dense {
            assert!(before <= SPARSE_MAX_BYTES);
            turned = Some(i);
            break;
        }
        assert!(h.bytes().len() <= SPARSE_MAX_BYTES);
    }
    assert!(turned.is_some_and(|i| i > 1000), "{turned:?}");
    assert_eq!(h.bytes().len(), DENSE_LEN);
}

#[test]
fn describe_reads_runs() {
    let h = Hll::new();
    assert_eq!(describe(&h.bytes()[HEADER_LEN..]), "Z:16384");
    let mut h = Hll::new();
    h.raise(0, 3, SPARSE_MAX_BYTES).unwrap();
    h.raise(100, 2, SPARSE_MAX_BYTES).unwrap();
    assert_eq!(
        describe(&h.bytes()[HEADER_LEN..]),
        "v:3,1 Z:99 v:2,1 Z:16283"
    );
}

#[test]
fn a_cut_body_is_corrupted() {
    let mut h = Hll::new().into_bytes();
    h.push(0x00); // one register too many
    assert_eq!(histogram(&h, Encoding::Sparse), Err(HllError::Corrupted));
    let mut max = vec![0u8; REGISTERS];
    assert_eq!(
        merge_into(&mut max, &h[..HEADER_LEN], Encoding::Sparse),
        Err(HllError::Corrupted)
    );
}

/// Register writes: (index, value 1..=63).
fn raises() -> impl Strategy<Value = Vec<(usize, u8)>> {
    prop::collection::vec((0..REGISTERS, 1u8..=63), 0..300)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn sparse_and_dense_hold_the_same_registers(writes in raises(), limit in 20usize..4000) {
        let mut model = vec![0u8; REGISTERS];
        let mut sparse_hll = Hll::new();
        let mut dense_hll = Hll::new();
        dense_hll.make_dense().unwrap();
        for &(i, v) in &writes {
            let grew = model[i] < v;
            model[i] = model[i].max(v);
            prop_assert_eq!(sparse_hll.raise(i, v, limit).unwrap(), grew);
            prop_assert_eq!(dense_hll.raise(i, v, limit).unwrap(), grew);
            if sparse_hll.encoding() == Encoding::Sparse {
                prop_assert!(sparse_hll.bytes().len() <= limit.max(HEADER_LEN + 2));
            }
        }
        prop_assert_eq!(&regs_of(&sparse_hll), &model);
        prop_assert_eq!(&regs_of(&dense_hll), &model);
        prop_assert_eq!(count(&sparse_hll), count(&dense_hll));
        prop_assert_eq!(count(&dense_hll), estimate(&raw_histogram(&model)));
        // Sparse to dense keeps every register.
        let mut converted = sparse_hll.clone();
        converted.make_dense().unwrap();
        prop_assert_eq!(converted.bytes().len(), DENSE_LEN);
        prop_assert_eq!(&regs_of(&converted), &model);
    }

    #[test]
    fn any_body_is_read_without_panic(body in prop::collection::vec(any::<u8>(), 0..600),
                                       writes in raises()) {
        let mut bytes = Hll::new().into_bytes();
        bytes.truncate(HEADER_LEN);
        bytes.extend_from_slice(&body);
        prop_assert_eq!(encoding_of(&bytes), Ok(Encoding::Sparse));
        let read = histogram(&bytes, Encoding::Sparse);
        let mut max = vec![0u8; REGISTERS];
        let merged = merge_into(&mut max, &bytes, Encoding::Sparse);
        if read.is_ok() {
            prop_assert!(merged.is_ok());
        }
        let _ = describe(&body);
        let mut hll = Hll::from_value(&bytes).unwrap();
        for &(i, v) in &writes {
            if hll.raise(i, v, SPARSE_MAX_BYTES).is_err() {
                break;
            }
        }
        let _ = histogram(hll.bytes(), hll.encoding());
        let _ = hll.clone().make_dense();
    }

    #[test]
    fn any_string_is_checked_without_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let mut with_magic = b"HYLL".to_vec();
        with_magic.extend_from_slice(&bytes);
        for candidate in [&bytes, &with_magic] {
            if let Ok(enc) = encoding_of(candidate) {
                let _ = histogram(candidate, enc);
            }
        }
    }

    #[test]
    fn adding_is_order_free(mut elements in prop::collection::vec(any::<u32>(), 0..400)) {
        let mut a = Hll::new();
        for e in &elements {
            a.add(&e.to_le_bytes(), SPARSE_MAX_BYTES).unwrap();
        }
        elements.reverse();
        let mut b = Hll::new();
        for e in &elements {
            b.add(&e.to_le_bytes(), SPARSE_MAX_BYTES).unwrap();
        }
        prop_assert_eq!(regs_of(&a), regs_of(&b));
        let (i, v) = register_and_count(b"x");
        prop_assert!(i < REGISTERS && (1..=51).contains(&v));
    }
}
