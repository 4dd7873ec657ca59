//! Property tests: no input panics the rule parser, the file parser or the
//! checks; ACL LIST's description of any user rebuilds that same user.

use acl::Acl;
use proptest::prelude::*;

const VOCABULARY: &[&str] = &[
    "on",
    "off",
    "nopass",
    "resetpass",
    ">pw1",
    ">pw2",
    "<pw1",
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
    "+SELECT|1",
    "+@internal",
    "-wanapply",
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
];

fn split(line: &[u8]) -> Vec<&[u8]> {
    line.split(|&b| b == b' ').collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn setuser_never_panics(rules in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..12), 0..8)) {
        let mut acl = Acl::new();
        let before = acl.list();
        let r = acl.set_user(b"u", &rules);
        if r.is_err() {
            prop_assert_eq!(acl.list(), before, "a failed SETUSER changes nothing");
        } else {
            let _ = acl.get(b"u").unwrap().describe();
        }
    }

    #[test]
    fn setuser_structured_noise_never_panics(rules in prop::collection::vec("[-+~%&()<>#!@|RWa-z* ]{0,10}", 0..8)) {
        let mut acl = Acl::new();
        if acl.set_user(b"u", &rules).is_ok() {
            let _ = acl.list();
        }
    }

    #[test]
    fn file_parser_never_panics(text in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = Acl::from_file(&text, "f", false);
    }

    #[test]
    fn file_lines_never_panic(lines in prop::collection::vec("user [a-z]{0,3}( [-+~%&()<>#!@|a-z*]{0,8}){0,5}", 0..5)) {
        let _ = Acl::from_file(lines.join("\n").as_bytes(), "f", false);
    }

    #[test]
    fn describe_round_trips(picks in prop::collection::vec(0..VOCABULARY.len(), 0..14)) {
        let rules: Vec<&str> = picks.iter().map(|&i| VOCABULARY[i]).collect();
        let mut acl = Acl::new();
        if acl.set_user(b"u", &rules).is_err() {
            return Ok(());
        }
        let user = acl.get(b"u").unwrap();
        let text = user.describe();
        let mut again = Acl::new();
        again.set_user(b"u", &split(&text)).unwrap();
        prop_assert_eq!(&*again.get(b"u").unwrap(), &*user, "{}", String::from_utf8_lossy(&text));
        // And through the file format.
        let loaded = Acl::from_file(&acl.to_file(), "f", false).unwrap();
        prop_assert_eq!(&*loaded.get(b"u").unwrap(), &*user);
    }

    #[test]
    fn checks_never_panic(
        picks in prop::collection::vec(0..VOCABULARY.len(), 0..10),
        cmd in 0..commands::TABLE.len(),
        args in prop::collection::vec("[a-z0-9*]{0,4}", 0..6),
    ) {
        let rules: Vec<&str> = picks.iter().map(|&i| VOCABULARY[i]).collect();
        let mut acl = Acl::new();
        if acl.set_user(b"u", &rules).is_err() {
            return Ok(());
        }
        let spec = &commands::TABLE[cmd];
        let mut argv: Vec<&[u8]> = vec![spec.name.as_bytes()];
        argv.extend(args.iter().map(|a| a.as_bytes()));
        let user = acl.get(b"u").unwrap();
        if let Err(denied) = user.check(spec, &argv) {
            let _ = denied.dryrun_message(&argv);
        }
        let expected = if ["wanapply", "wansettled", "backupjob"].contains(&spec.name) {
            Err(acl::Denied::Command(spec.name))
        } else {
            Ok(())
        };
        prop_assert_eq!(acl.default_user().check(spec, &argv), expected);
    }
}
