//! DUMP/RESTORE payloads: what real Redis wrote decodes, every value round
//! trips, and no byte string (arbitrary, or a valid payload mutated under a
//! recomputed checksum) makes the decoder panic or allocate past its input.

use bytes::Bytes;
use keyspace::{HashValue, SetValue, Value, Version, ZSetValue};
use proptest::prelude::*;
use proptest::strategy::ValueTree;

use super::crc64::crc64;
use super::intset;
use super::listpack::build::{int_entry, listpack, str_entry};
use super::rdb::{dump, load, restore, LoadError, Malformed};
use super::ziplist::build::build as ziplist;

const V: Version = Version::ZERO;

/// `body` with a footer of RDB version `version` and the right checksum.
fn sealed(body: &[u8], version: u16) -> Vec<u8> {
    let mut p = body.to_vec();
    p.extend_from_slice(&version.to_le_bytes());
    let crc = crc64(0, &p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn set_of(ms: &[&str]) -> Value {
    let mut s = SetValue::new();
    for m in ms {
        s.add(&b(m), V);
    }
    Value::Set(s)
}

#[test]
fn reads_payloads_redis_wrote() {
    // DUMP output of redis-server 7.0.15.
    let cases: [(&[u8], Value); 5] = [
        (b"\x00\x05hello\n\x00cr\xdfve4 \n", Value::str(b("hello"))),
        (b"\x00\xc190\n\x00\x9d\x94\xea'\x93\xfc\x08\xb9", Value::str(b("12345"))),
        (
            b"\x00\xc3\x12C\xe8\x01aa\xe0\xff\x00\xe0\xff\x00\xe0\xff\x00\xe0\xc3\x00\x01aa\n\x00\x86\xc2\x12\xdbT\x81\x9e<",
            Value::str(Bytes::from(vec![b'a'; 1000])),
        ),
        (
            b"\x0b\x0e\x02\x00\x00\x00\x03\x00\x00\x00\x01\x00\x02\x00\x03\x00\n\x00\xa5\x02\\\xe2mnM\x1b",
            set_of(&["1", "2", "3"]),
        ),
        (b"\x02\x02\x01a\x01b\n\x00\xfed!%\xeb\x03=\r", set_of(&["a", "b"])),
    ];
    for (payload, want) in cases {
        assert_eq!(restore(payload).unwrap(), want);
        // And what we write for it is read back the same.
        assert_eq!(restore(&dump(&want)).unwrap(), want);
    }
    let h = restore(b"\x10\r\r\x00\x00\x00\x02\x00\x81f\x02\x81v\x02\xff\n\x00 \xf1=D#T\x08\x9d")
        .unwrap();
    let mut want = HashValue::new();
    want.set(b("f"), b("v"), V);
    assert_eq!(h, Value::Hash(want));
    let z = restore(b"\x11\x14\x14\x00\x00\x00\x04\x00\x81a\x02\x831.5\x04\x81b\x02\x02\x01\xff\n\x00\xfa\x02\xb4%\xaf\x18\x87c").unwrap();
    let Value::ZSet(z) = z else {
        panic!("not a zset")
    };
    assert_eq!(
        (z.score(b"a"), z.score(b"b"), z.len()),
        (Some(1.5), Some(2.0), 2)
    );
}

#[test]
fn writes_what_redis_writes_for_strings_and_intsets() {
    assert_eq!(
        dump(&Value::str(b("hello"))),
        b"\x00\x05hello\n\x00cr\xdfve4 \n"
    );
    assert_eq!(
        dump(&Value::str(b("12345"))),
        b"\x00\xc190\n\x00\x9d\x94\xea'\x93\xfc\x08\xb9"
    );
    assert_eq!(
        dump(&set_of(&["3", "1", "2"])),
        b"\x0b\x0e\x02\x00\x00\x00\x03\x00\x00\x00\x01\x00\x02\x00\x03\x00\n\x00\xa5\x02\\\xe2mnM\x1b"
    );
    // Not canonical, or too wide for 32 bits: raw.
    for s in ["012", "+1", "-0", "4294967296", ""] {
        let p = dump(&Value::str(b(s)));
        assert_eq!(p[1] as usize, s.len(), "{s}");
    }
}

#[test]
fn reads_listpack_sets_and_zsets_with_every_score_form() {
    let lp = listpack(&[str_entry(b"a"), int_entry(-5), int_entry(1 << 40)]);
    let mut body = vec![20u8];
    body.push(lp.len() as u8);
    body.extend_from_slice(&lp);
    assert_eq!(
        restore(&sealed(&body, 11)).unwrap(),
        set_of(&["a", "-5", "1099511627776"])
    );

    // RDB_TYPE_ZSET: scores as text, with the inf markers.
    let body = b"\x03\x03\x01a\x031.5\x01b\xfe\x01c\xff";
    let Value::ZSet(z) = restore(&sealed(body, 9)).unwrap() else {
        panic!()
    };
    assert_eq!(z.score(b"a"), Some(1.5));
    assert_eq!(z.score(b"b"), Some(f64::INFINITY));
    assert_eq!(z.score(b"c"), Some(f64::NEG_INFINITY));
    // A NaN score is refused.
    assert_eq!(
        restore(&sealed(b"\x03\x01\x01a\xfd", 9)),
        Err(LoadError::Malformed)
    );
    let mut nan = b"\x05\x01\x01a".to_vec();
    nan.extend_from_slice(&f64::NAN.to_le_bytes());
    assert_eq!(restore(&sealed(&nan, 10)), Err(LoadError::Malformed));
}

#[test]
fn refuses_bad_footers_types_and_forged_lengths() {
    let good = dump(&Value::str(b("hello")));
    assert!(restore(&good).is_ok());
    let mut bad_crc = good.clone();
    *bad_crc.last_mut().unwrap() ^= 1;
    assert_eq!(restore(&bad_crc), Err(LoadError::Footer));
    assert_eq!(restore(b"short"), Err(LoadError::Footer));
    assert_eq!(
        restore(&sealed(b"\x00\x05hello", 12)),
        Err(LoadError::Footer)
    );
    assert!(restore(&sealed(b"\x00\x05hello", 11)).is_ok());
    // Lists, streams, modules, zipmaps: not held here.
    for t in [1u8, 6, 7, 9, 10, 14, 15, 18, 19, 21, 200] {
        assert_eq!(
            restore(&sealed(&[t, 0], 10)),
            Err(LoadError::Malformed),
            "type {t}"
        );
    }
    // Forged lengths: a 2^40-byte string, a 2^40-member set, an LZF string
    // claiming 2^40 bytes, a 64-bit length.
    let forged: [&[u8]; 5] = [
        b"\x00\x81\x00\x00\x01\x00\x00\x00\x00\x00x",
        b"\x02\x81\x00\x00\x01\x00\x00\x00\x00\x00\x01a",
        b"\x00\xc3\x02\x81\x00\x00\x01\x00\x00\x00\x00\x00\x00a",
        b"\x04\x81\xff\xff\xff\xff\xff\xff\xff\xff",
        b"\x05\x80\xff\xff\xff\xff",
    ];
    for body in forged {
        assert_eq!(load(body), Err(Malformed), "{body:?}");
    }
    // Empty collections and duplicates are corrupt.
    assert_eq!(load(b"\x02\x00"), Err(Malformed));
    assert_eq!(load(b"\x02\x02\x01a\x01a"), Err(Malformed));
    assert_eq!(load(b"\x04\x02\x01a\x01x\x01a\x01y"), Err(Malformed));
}

// ---- properties ----

fn member() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        (-300i64..300).prop_map(|n| Bytes::from(n.to_string())),
        any::<i64>().prop_map(|n| Bytes::from(n.to_string())),
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(Bytes::from),
        (0usize..3000).prop_map(|n| Bytes::from(vec![b'q'; n])),
    ]
}

fn score() -> impl Strategy<Value = f64> {
    prop_oneof![
        (-1000i32..1000).prop_map(f64::from),
        any::<f64>().prop_filter("not NaN", |f| !f.is_nan()),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    let many = |n| proptest::collection::vec(member(), 1..n);
    prop_oneof![
        member().prop_map(Value::str),
        proptest::collection::vec((member(), member()), 1..40).prop_map(|fs| {
            let mut h = HashValue::new();
            for (f, v) in fs {
                h.set(f, v, V);
            }
            Value::Hash(h)
        }),
        many(40).prop_map(|ms| {
            let mut s = SetValue::new();
            for m in ms {
                s.add(&m, V);
            }
            Value::Set(s)
        }),
        // Enough integers to go past the intset limit.
        proptest::collection::vec(any::<i64>(), 1..700).prop_map(|ns| {
            let mut s = SetValue::new();
            for n in ns {
                s.add(&Bytes::from(n.to_string()), V);
            }
            Value::Set(s)
        }),
        proptest::collection::vec((member(), score()), 1..200).prop_map(|ms| {
            let mut z = ZSetValue::new();
            for (m, s) in ms {
                z.insert(&m, s, V);
            }
            Value::ZSet(z)
        }),
    ]
}

/// A mutation of a payload body.
#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Cut(usize),
    Insert(usize, u8),
    Remove(usize),
}

fn mutate(body: &mut Vec<u8>, m: &Mutation) {
    let n = body.len();
    match *m {
        Mutation::Flip(i, x) if n > 0 => body[i % n] ^= x.max(1),
        Mutation::Cut(i) => body.truncate(i % (n + 1)),
        Mutation::Insert(i, x) => body.insert(i % (n + 1), x),
        Mutation::Remove(i) if n > 0 => {
            body.remove(i % n);
        }
        _ => {}
    }
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, x)| Mutation::Flip(i, x)),
        any::<usize>().prop_map(Mutation::Cut),
        (any::<usize>(), any::<u8>()).prop_map(|(i, x)| Mutation::Insert(i, x)),
        any::<usize>().prop_map(Mutation::Remove),
    ]
}

/// A payload body of type `t` whose object is the blob `blob`.
fn blob_body(t: u8, blob: &[u8]) -> Vec<u8> {
    let mut body = vec![t, 0x80];
    body.extend_from_slice(&(blob.len() as u32).to_be_bytes());
    body.extend_from_slice(blob);
    body
}

/// A ziplist entry (without the previous length) holding `m`.
fn ziplist_entry(m: &[u8]) -> Vec<u8> {
    let mut e = if m.len() < 64 {
        vec![m.len() as u8]
    } else {
        vec![0x40 | (m.len() >> 8) as u8, m.len() as u8]
    };
    e.extend_from_slice(m);
    e
}

/// Payloads of the packed encodings Redis writes (listpack sorted sets,
/// ziplist hashes, intsets), for the mutation property to start from.
fn packed_payload() -> impl Strategy<Value = Vec<u8>> {
    // Distinct members: a packed blob with a repeated one is corrupt.
    let pairs = || proptest::collection::btree_map(member(), -5000i64..5000, 1..20);
    prop_oneof![
        pairs().prop_map(|ms| {
            let mut entries = Vec::new();
            for (m, s) in &ms {
                entries.push(str_entry(m));
                entries.push(int_entry(*s));
            }
            blob_body(17, &listpack(&entries))
        }),
        pairs().prop_map(|ms| {
            let entries: Vec<Vec<u8>> = ms
                .iter()
                .flat_map(|(m, s)| [ziplist_entry(m), vec![0xc0, *s as u8, (*s >> 8) as u8]])
                .collect();
            let refs: Vec<&[u8]> = entries.iter().map(Vec::as_slice).collect();
            blob_body(13, &ziplist(&refs))
        }),
        proptest::collection::btree_set(any::<i64>(), 1..50)
            .prop_map(|ns| blob_body(11, &intset::encode(ns.into_iter().collect()))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// DUMP then RESTORE gives the value back, for every type.
    #[test]
    fn every_value_round_trips(v in value()) {
        let back = restore(&dump(&v)).expect("own payload restores");
        prop_assert_eq!(back, v);
    }

    /// Arbitrary bytes are refused or decoded, never a panic.
    #[test]
    fn arbitrary_payloads_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300), version in 0u16..13) {
        let _ = load(&bytes);
        let _ = restore(&bytes);
        let _ = restore(&sealed(&bytes, version));
    }

    /// Valid payloads (ours, and packed encodings) mutated under a
    /// recomputed checksum: errors only, never a panic.
    #[test]
    fn mutated_payloads_never_panic(
        body in prop_oneof![value().prop_map(|v| { let p = dump(&v); p[..p.len() - 10].to_vec() }), packed_payload()],
        ms in proptest::collection::vec(mutation(), 1..4),
    ) {
        let mut body = body;
        for m in &ms {
            mutate(&mut body, m);
        }
        let _ = restore(&sealed(&body, 10));
    }
}

#[test]
fn packed_payloads_decode_unmutated() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    for _ in 0..50 {
        let body = packed_payload().new_tree(&mut runner).unwrap().current();
        assert!(restore(&sealed(&body, 10)).is_ok(), "{body:?}");
    }
}

#[test]
fn packed_zset_payload_decodes() {
    // The starting point of the mutation property is itself valid.
    let lp = listpack(&[
        str_entry(b"m"),
        int_entry(7),
        str_entry(b"n"),
        str_entry(b"2.5"),
    ]);
    let mut body = vec![17u8, 0x80];
    body.extend_from_slice(&(lp.len() as u32).to_be_bytes());
    body.extend_from_slice(&lp);
    let Value::ZSet(z) = restore(&sealed(&body, 10)).unwrap() else {
        panic!()
    };
    assert_eq!((z.score(b"m"), z.score(b"n")), (Some(7.0), Some(2.5)));
}
