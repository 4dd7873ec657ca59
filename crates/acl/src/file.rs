//! The ACL file (`aclfile`): one `user <name> <rules...>` line per user.
//! Loading follows acl.c `ACLLoadFromFile`: every line is checked, errors
//! are collected naming `<file>:<line>`, and any error rejects the whole
//! file. Saving writes ACL LIST's lines.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::args::{has_spaces, merge_selectors};
use crate::db::Acl;
use crate::user::User;
use crate::{AclError, RuleError};

fn trim(mut s: &[u8], set: &[u8]) -> Vec<u8> {
    while let [first, rest @ ..] = s {
        if !set.contains(first) {
            break;
        }
        s = rest;
    }
    while let [rest @ .., last] = s {
        if !set.contains(last) {
            break;
        }
        s = rest;
    }
    s.to_vec()
}

impl Acl {
    /// The ACL file text (ACL SAVE): ACL LIST's lines, each ending in `\n`.
    pub fn to_file(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for line in self.list() {
            out.extend_from_slice(&line);
            out.push(b'\n');
        }
        out
    }

    /// Parses an ACL file (ACL LOAD, startup). `filename` only names the
    /// file in errors. Without a `default` line, `default` gets its
    /// initial rules. Errors are Redis's, e.g. `ERR users.acl:3: Syntax
    /// error. WARNING: ACL errors detected, no change to the previously
    /// active ACL rules was performed`.
    /// `pubsub_all`: `acl-pubsub-default allchannels`.
    pub fn from_file(text: &[u8], filename: &str, pubsub_all: bool) -> Result<Acl, AclError> {
        let mut users: BTreeMap<Vec<u8>, Arc<User>> = BTreeMap::new();
        let mut errors = String::new();
        for (i, line) in text.split(|&b| b == b'\n').enumerate() {
            let linenum = i + 1;
            let line = trim(line, b" \t\r\n");
            if line.is_empty() {
                continue;
            }
            let argv: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
            if argv[0] != b"user" || argv.len() < 2 {
                errors.push_str(&format!(
                    "{filename}:{linenum} should start with user keyword followed by the username. "
                ));
                continue;
            }
            let name = argv[1];
            if has_spaces(name) {
                errors.push_str(&format!(
                    "'{filename}:{linenum}: username '{}' contains invalid characters. ",
                    String::from_utf8_lossy(name)
                ));
                continue;
            }
            if users.contains_key(name) {
                errors.push_str(&format!(
                    "WARNING: Duplicate user '{}' found on line {linenum}. ",
                    String::from_utf8_lossy(name)
                ));
                continue;
            }
            let mut user = User::new_with(name, pubsub_all);
            let rules = match merge_selectors(&argv[2..]) {
                Ok(rules) => rules,
                Err(_) => {
                    errors.push_str(&format!(
                        "{filename}:{linenum}: Unmatched parenthesis in selector definition."
                    ));
                    Vec::new()
                }
            };
            let mut syntax_error = false;
            for rule in rules {
                let rule = trim(&rule, b"\t\r\n");
                match user.apply_rule(&rule, pubsub_all) {
                    Ok(()) => {}
                    Err(RuleError::Unknown) => errors.push_str(&format!(
                        "{filename}:{linenum}: Error in applying operation '{}': {}. ",
                        String::from_utf8_lossy(&rule),
                        RuleError::Unknown.message()
                    )),
                    Err(e) if !syntax_error => {
                        errors.push_str(&format!("{filename}:{linenum}: {}. ", e.message()));
                        syntax_error = true;
                    }
                    Err(_) => {}
                }
            }
            users.insert(name.to_vec(), Arc::new(user));
        }
        if !errors.is_empty() {
            errors.push_str(
                "WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
            );
            return Err(AclError::new(errors));
        }
        users
            .entry(b"default".to_vec())
            .or_insert_with(|| Arc::new(User::default_user()));
        Ok(Acl { users, pubsub_all })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Acl, String> {
        Acl::from_file(text.as_bytes(), "users.acl", false).map_err(|e| e.to_string())
    }

    #[test]
    fn loads_redis_test_asset() {
        // tests/assets/user.acl of Redis 7.0.15.
        let acl = load("user alice on allcommands allkeys &* >alice\nuser bob on -@all +@set +acl ~set* &* >bob\nuser default on nopass ~* &* +@all\n");
        let acl = match acl {
            Ok(acl) => acl,
            // Our table may lack ACL: then +acl is unknown, as in Redis.
            Err(e) => {
                assert!(e.contains("Error in applying operation '+acl'"), "{e}");
                load("user alice on allcommands allkeys &* >alice\nuser default on nopass ~* &* +@all\n").unwrap()
            }
        };
        assert!(acl.authenticate(b"alice", b"alice").is_ok());
        assert_eq!(acl.default_user().describe(), b"on nopass ~* &* +@all");
    }

    #[test]
    fn round_trips_and_adds_default() {
        let mut acl = Acl::new();
        let rules: [&[u8]; 5] = [b"on", b">x", b"%R~a*", b"+@all", b"(+get ~b)"];
        acl.set_user(b"u", &rules).unwrap();
        let text = acl.to_file();
        let again = Acl::from_file(&text, "f", false).unwrap();
        assert_eq!(again.to_file(), text);
        let only = load("user u on\n").unwrap();
        assert_eq!(only.users().len(), 2);
    }

    #[test]
    fn errors_name_the_line() {
        assert_eq!(
            load("user a on\n\nfoo bar\n").unwrap_err(),
            "ERR users.acl:3 should start with user keyword followed by the username. WARNING: ACL errors detected, no change to the previously active ACL rules was performed"
        );
        assert_eq!(
            load("user a on bogus bogus2 +nosuch\n").unwrap_err(),
            "ERR users.acl:1: Syntax error. users.acl:1: Error in applying operation '+nosuch': Unknown command or category name in ACL. WARNING: ACL errors detected, no change to the previously active ACL rules was performed"
        );
        assert!(load("user a on\nuser a off\n")
            .unwrap_err()
            .contains("WARNING: Duplicate user 'a' found on line 2. "));
        assert!(load("user a (~x +get\n")
            .unwrap_err()
            .contains("users.acl:1: Unmatched parenthesis in selector definition."));
        assert!(load("user\n").is_err());
    }
}
