//! How nodes run each other's internal commands (WANAPPLY, WANSETTLED,
//! BACKUPJOB): they log in on the client port as [`USER`] with a password
//! only nodes know, and that login may run `@internal` commands, which no
//! ACL user gets from `+@all`. In a site the password is the token the
//! site's metadata holds (random, set once the site forms); a node alone
//! uses a random token of its own process.

use std::sync::OnceLock;

use crate::auth::random_u64;
use crate::Cluster;

/// The login of node-to-node calls (not an ACL user: ACL USERS does not
/// list it, and it cannot be changed or deleted).
pub const USER: &str = "deltagrid-internal";

fn hex(token: [u64; 2]) -> String {
    format!("{:016x}{:016x}", token[0], token[1])
}

/// A random token, made once per process (a node alone).
fn local() -> [u64; 2] {
    static TOKEN: OnceLock<[u64; 2]> = OnceLock::new();
    *TOKEN.get_or_init(|| [random_u64() | 1, random_u64()])
}

/// The password of [`USER`] on this node's site (None: a site whose
/// token is not set yet).
pub fn password(cluster: Option<&Cluster>) -> Option<String> {
    match cluster {
        None => Some(hex(local())),
        Some(c) => {
            let token = c.metadata.get()?.current().internal_token;
            (token != [0, 0]).then(|| hex(token))
        }
    }
}

/// Whether `pass` is [`USER`]'s password here (compared in constant time).
pub fn verify(cluster: Option<&Cluster>, pass: &[u8]) -> bool {
    let Some(want) = password(cluster) else {
        return false;
    };
    acl::password::constant_time_eq(want.as_bytes(), pass)
}

/// A fresh token for [`crate::metadata::Command::SetInternalToken`].
pub fn new_token() -> [u64; 2] {
    [random_u64() | 1, random_u64()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_node_verifies_its_own_token_only() {
        let pass = password(None).unwrap();
        assert_eq!(pass.len(), 32);
        assert!(verify(None, pass.as_bytes()));
        assert!(!verify(None, b"0000000000000000000000000000000"));
        let mut wrong = pass.into_bytes();
        wrong[0] ^= 1;
        assert!(!verify(None, &wrong));
    }
}
