//! The site's ACL users, held in its metadata so every member agrees (as
//! Redis Enterprise keeps users per database, not per shard): a change
//! (ACL SETUSER, DELUSER, LOAD) is a [`Command::ChangeAcl`] applied in
//! Raft order to the users as the ACL file format holds them, so two
//! changes made at once on two members both take effect, one after the
//! other. The site also holds the token its nodes use to call each other's
//! internal commands (WANAPPLY, BACKUPJOB...).
//!
//! [`Command::ChangeAcl`]: super::Command::ChangeAcl

use acl::{Acl, AclError};
use serde::{Deserialize, Serialize};

/// The users as the site agreed on them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiteAcl {
    /// Bumped by every change applied (0: never changed; members keep
    /// the users they started with).
    pub version: u64,
    /// The users in the ACL file format ([`Acl::to_file`]).
    pub text: Vec<u8>,
    /// The last change replaced every user (ACL LOAD): members end the
    /// connections of the users it replaced.
    pub reloaded: bool,
}

/// A change to the users.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AclChange {
    SetUser {
        name: Vec<u8>,
        rules: Vec<Vec<u8>>,
    },
    DelUser {
        names: Vec<Vec<u8>>,
    },
    /// ACL LOAD: a whole file (`file` names it in errors).
    Load {
        text: Vec<u8>,
        file: String,
    },
}

impl AclChange {
    /// Applies the change to `acl`; what DELUSER counts, 0 otherwise.
    pub fn apply(&self, acl: &mut Acl) -> Result<usize, AclError> {
        match self {
            AclChange::SetUser { name, rules } => acl.set_user(name, rules).map(|()| 0),
            AclChange::DelUser { names } => acl.del_users(names),
            AclChange::Load { text, file } => {
                *acl = Acl::from_file(text, file, acl.pubsub_default_all())?;
                Ok(0)
            }
        }
    }
}

impl SiteAcl {
    /// The users this version holds (`pubsub_all`: the proposer's
    /// `acl-pubsub-default`, for the users a change creates).
    pub fn users(&self, pubsub_all: bool) -> Acl {
        let mut acl = if self.version == 0 {
            Acl::new()
        } else {
            // Written by `to_file` of a valid database: it parses.
            Acl::from_file(&self.text, "site metadata", pubsub_all).unwrap_or_default()
        };
        acl.set_pubsub_default(pubsub_all);
        acl
    }

    /// Applies `change` on top of this version (`base`: the users the
    /// proposer held when the site had none yet, as an ACL file).
    pub fn apply(
        &mut self,
        change: &AclChange,
        base: &[u8],
        pubsub_all: bool,
    ) -> Result<u64, AclError> {
        let mut acl = if self.version == 0 && !base.is_empty() {
            Acl::from_file(base, "proposer", pubsub_all)?
        } else {
            self.users(pubsub_all)
        };
        acl.set_pubsub_default(pubsub_all);
        change.apply(&mut acl)?;
        self.text = acl.to_file();
        self.version += 1;
        self.reloaded = matches!(change, AclChange::Load { .. });
        Ok(self.version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(name: &str, rules: &[&str]) -> AclChange {
        AclChange::SetUser {
            name: name.as_bytes().to_vec(),
            rules: rules.iter().map(|r| r.as_bytes().to_vec()).collect(),
        }
    }

    #[test]
    fn changes_apply_in_order_and_a_bad_one_changes_nothing() {
        let mut site = SiteAcl::default();
        assert_eq!(
            site.apply(&set("alice", &["on", ">pw", "+get", "~app:*"]), b"", false),
            Ok(1)
        );
        assert_eq!(
            site.apply(&set("bob", &["on", "nopass"]), b"", false),
            Ok(2)
        );
        let before = site.clone();
        assert!(site.apply(&set("carol", &["bogus"]), b"", false).is_err());
        assert_eq!(site, before);
        let users = site.users(false);
        assert!(users.authenticate(b"alice", b"pw").is_ok());
        assert_eq!(
            users.users(),
            vec![b"alice".to_vec(), b"bob".to_vec(), b"default".to_vec()]
        );
        let del = AclChange::DelUser {
            names: vec![b"bob".to_vec(), b"nobody".to_vec()],
        };
        assert_eq!(site.apply(&del, b"", false), Ok(3));
        assert!(site.users(false).get(b"bob").is_none());
        assert!(!site.reloaded);
    }

    #[test]
    fn the_first_change_starts_from_the_proposers_users() {
        let mut site = SiteAcl::default();
        let base = b"user default on >secret ~* &* +@all\n";
        site.apply(&set("alice", &["on", "nopass"]), base, false)
            .unwrap();
        let users = site.users(false);
        assert!(users.authenticate(b"default", b"secret").is_ok());
        assert!(users.authenticate(b"default", b"").is_err());
    }

    #[test]
    fn a_load_replaces_everyone_and_says_so() {
        let mut site = SiteAcl::default();
        site.apply(&set("alice", &["on"]), b"", false).unwrap();
        let load = AclChange::Load {
            text: b"user zed on nopass +@all ~*\n".to_vec(),
            file: "users.acl".into(),
        };
        site.apply(&load, b"", false).unwrap();
        let users = site.users(false);
        assert!(users.get(b"alice").is_none() && users.get(b"zed").is_some());
        assert!(site.reloaded);
    }
}
