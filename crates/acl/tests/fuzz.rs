//! Fuzz targets for the ACL parsers: the ACL file (`Acl::from_file`, read
//! at startup and by ACL LOAD) and ACL SETUSER's rules (`Acl::set_user`),
//! on arbitrary bytes, rule-like tokens and mutated valid files: no panic;
//! what is accepted saves (`to_file`) to a file that loads to the same
//! users. See docs/fuzzing.md.

use acl::Acl;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use fuzzing::{bounded, bytes, fuzz, measure, mutated, Hex};

const VOCABULARY: &[&str] = &[
    "on",
    "off",
    "nopass",
    "resetpass",
    ">pw1",
    ">pw2",
    "<pw1",
    "#5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8",
    "!5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8",
    "reset",
    "~foo*",
    "%R~bar",
    "%W~baz",
    "%RW~q",
    "allkeys",
    "resetkeys",
    "&ch*",
    "&x",
    "allchannels",
    "resetchannels",
    "+get",
    "-get",
    "+@string",
    "-@string",
    "+@all",
    "-@all",
    "+config|get",
    "-config|set",
    "+config",
    "-config",
    "+select|0",
    "+@internal",
    "+@slow",
    "-@write",
    "+@read",
    "allcommands",
    "nocommands",
    "sanitize-payload",
    "skip-sanitize-payload",
    "clearselectors",
    "(+get ~sel*)",
    "(+@all -@admin &c)",
    "(%R~r* +@read -@fast)",
    "+client|id",
    "-@pubsub",
    "+@dangerous",
    "-object|encoding",
    "(",
    ")",
    "~",
    "%",
    "&",
    "+",
    "-",
    "+@",
    "+|",
    "+get|",
    "%RWX~k",
    "~[a-z",
    "~\\",
    "+@nosuchcategory",
];

fn rule() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => proptest::sample::select(VOCABULARY).prop_map(|s| s.as_bytes().to_vec()),
        2 => "[-+~%&()<>#!@|RWa-z*\\[\\]^?0-9 ]{0,12}".prop_map(String::into_bytes),
        1 => proptest::collection::vec(any::<u8>(), 0..12),
    ]
}

/// Loaded, saved and loaded again: the same file.
fn stable(acl: &Acl) -> Result<(), TestCaseError> {
    let text = acl.to_file();
    let again = Acl::from_file(&text, "saved.acl", false).map_err(|e| {
        TestCaseError::fail(format!(
            "a saved ACL file does not load: {e:?}\n{}",
            String::from_utf8_lossy(&text)
        ))
    })?;
    let saved = again.to_file();
    prop_assert_eq!(
        String::from_utf8_lossy(&saved),
        String::from_utf8_lossy(&text)
    );
    Ok(())
}

fn valid_file() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        (
            "[a-z]{1,4}",
            proptest::collection::vec(proptest::sample::select(VOCABULARY), 0..8),
        ),
        1..4,
    )
    .prop_map(|users| {
        let mut acl = Acl::new();
        for (name, rules) in users {
            let _ = acl.set_user(name.as_bytes(), &rules);
        }
        acl.to_file()
    })
}

#[test]
fn acl_file_parser() {
    let strategy = prop_oneof![1 => bytes(200), 4 => mutated(valid_file())];
    fuzz("acl::Acl::from_file", strategy, |Hex(text)| {
        for pubsub_all in [false, true] {
            let (got, allocated) = measure(|| Acl::from_file(&text, "users.acl", pubsub_all));
            // Per user: its tables (command bits, selectors), a few KiB.
            bounded("Acl::from_file", allocated, text.len(), 4096, 1 << 20)?;
            if let Ok(acl) = got {
                stable(&acl)?;
            }
        }
        Ok(())
    });
}

#[test]
fn acl_setuser_rules() {
    let strategy = (
        proptest::collection::vec(any::<u8>(), 0..4),
        proptest::collection::vec(rule(), 0..10),
    );
    fuzz("acl::Acl::set_user", strategy, |(name, rules)| {
        let mut acl = Acl::new();
        let name = if name.is_empty() { b"u".to_vec() } else { name };
        if acl.set_user(&name, &rules).is_ok() {
            let user = acl.get(&name).unwrap();
            let line = user.describe();
            let mut again = Acl::new();
            let parts: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
            again.set_user(&name, &parts).map_err(|e| {
                TestCaseError::fail(format!(
                    "ACL LIST's rules do not apply: {e:?}: {}",
                    String::from_utf8_lossy(&line)
                ))
            })?;
            prop_assert_eq!(
                &*again.get(&name).unwrap(),
                &*user,
                "{}",
                String::from_utf8_lossy(&line)
            );
            if !name
                .iter()
                .any(|&b| b == b'\n' || b == b'\r' || b == b' ' || b == b'\t' || b == 0)
            {
                stable(&acl)?;
            }
        }
        Ok(())
    });
}
