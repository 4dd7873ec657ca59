//! The node's ACL users (Redis 7 ACLs, [`acl`] crate): the database every
//! connection checks its commands against, the ACL LOG, and the ACL file.
//!
//! Connections hold their user as an `Arc` snapshot and compare
//! [`Users::epoch`] before each command (one relaxed load), so a change
//! holds for every connection from its next command on, as Redis's
//! in-place user edit does. In a site, changes are made through the
//! site's metadata ([`crate::acl_cmd`]) and every member installs the
//! committed database ([`Users::install`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use acl::{Acl, AclError, AclLog, User};
use arc_swap::ArcSwap;
use parking_lot::Mutex;

pub struct Users {
    acl: ArcSwap<Acl>,
    epoch: AtomicU64,
    /// ACL LOG (per node, as Redis Enterprise keeps it).
    pub log: Mutex<AclLog>,
    /// `aclfile`: ACL LOAD and ACL SAVE read and write it.
    pub file: Option<PathBuf>,
    /// Serialises changes (each is read, modified, stored).
    changing: Mutex<()>,
    /// The site's ACL version installed last (0: none yet).
    pub site_version: AtomicU64,
    /// `acl-pubsub-default allchannels`.
    pubsub_all: AtomicBool,
}

impl Users {
    /// The users of a fresh node: `default` with `requirepass` as its
    /// password (none: `nopass`), then the ACL file's users if there is
    /// one (an error names the file and line).
    pub fn new(file: Option<PathBuf>, requirepass: Option<&str>) -> Result<Users, String> {
        let mut acl = Acl::new();
        set_default_password(&mut acl, requirepass).map_err(|e| e.to_string())?;
        if let Some(path) = &file {
            match std::fs::read(path) {
                Ok(text) => {
                    acl = Acl::from_file(&text, &path.display().to_string(), false)
                        .map_err(|e| format!("aclfile {}: {e}", path.display()))?;
                }
                // Redis refuses to start without the file; so do we.
                Err(e) => return Err(format!("aclfile {}: {e}", path.display())),
            }
        }
        Ok(Users {
            acl: ArcSwap::from_pointee(acl),
            epoch: AtomicU64::new(1),
            log: Mutex::new(AclLog::new(acl::DEFAULT_LOG_MAX_LEN)),
            file,
            changing: Mutex::new(()),
            site_version: AtomicU64::new(0),
            pubsub_all: AtomicBool::new(false),
        })
    }

    /// The database now.
    pub fn current(&self) -> Arc<Acl> {
        self.acl.load_full()
    }

    /// Bumped on every change: a connection whose copy is older looks its
    /// user up again.
    #[inline]
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// The user `name` now (None: deleted).
    pub fn user(&self, name: &[u8]) -> Option<Arc<User>> {
        self.acl.load().get(name)
    }

    /// Applies `f` to a copy of the database and installs the result; an
    /// error changes nothing.
    pub fn change<R>(
        &self,
        f: impl FnOnce(&mut Acl) -> Result<R, AclError>,
    ) -> Result<R, AclError> {
        let _one = self.changing.lock();
        let mut acl = Acl::clone(&self.acl.load());
        let r = f(&mut acl)?;
        self.store(acl);
        Ok(r)
    }

    /// Installs a whole database (ACL LOAD, the site's committed one).
    pub fn install(&self, mut acl: Acl) {
        let _one = self.changing.lock();
        acl.set_pubsub_default(self.pubsub_all.load(Ordering::Relaxed));
        self.store(acl);
    }

    fn store(&self, acl: Acl) {
        self.acl.store(Arc::new(acl));
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// `acl-pubsub-default`: true for `allchannels`.
    pub fn set_pubsub_default(&self, all: bool) {
        self.pubsub_all.store(all, Ordering::Relaxed);
        let _ = self.change(|acl| {
            acl.set_pubsub_default(all);
            Ok(())
        });
    }

    pub fn pubsub_default_all(&self) -> bool {
        self.pubsub_all.load(Ordering::Relaxed)
    }
}

/// `requirepass` as the default user's password (Redis's
/// ACLUpdateDefaultUserPassword): none or empty means `nopass`.
pub fn set_default_password(acl: &mut Acl, pass: Option<&str>) -> Result<(), AclError> {
    match pass.filter(|p| !p.is_empty()) {
        Some(p) => {
            let rule = format!(">{p}");
            acl.set_user(b"default", &[&b"resetpass"[..], rule.as_bytes()])
        }
        None => acl.set_user(b"default", &[&b"nopass"[..]]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirepass_is_the_default_users_password() {
        let users = Users::new(None, Some("s3cret")).unwrap();
        let acl = users.current();
        assert!(acl.authenticate(b"default", b"s3cret").is_ok());
        assert!(acl.authenticate(b"default", b"other").is_err());
        let open = Users::new(None, None).unwrap();
        assert!(open.current().default_user().nopass());
    }

    #[test]
    fn a_change_bumps_the_epoch_and_a_failed_one_changes_nothing() {
        let users = Users::new(None, None).unwrap();
        let e = users.epoch();
        users
            .change(|a| a.set_user(b"alice", &[&b"on"[..]]))
            .unwrap();
        assert!(users.epoch() > e);
        let e = users.epoch();
        assert!(users
            .change(|a| a.set_user(b"bob", &[&b"bogus"[..]]))
            .is_err());
        assert_eq!(users.epoch(), e);
        assert!(users.user(b"bob").is_none());
        assert!(users.user(b"alice").is_some());
    }

    #[test]
    fn a_missing_or_bad_aclfile_is_an_error_naming_it() {
        let dir = std::env::temp_dir().join(format!("dg-users-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let missing = dir.join("missing.acl");
        let err = |r: Result<Users, String>| r.err().unwrap_or_default();
        assert!(err(Users::new(Some(missing), None)).contains("missing.acl"));
        let bad = dir.join("bad.acl");
        std::fs::write(&bad, "user alice on bogus\n").unwrap();
        assert!(err(Users::new(Some(bad.clone()), None)).contains("bad.acl"));
        std::fs::write(&bad, "user alice on >pw ~* +@all\n").unwrap();
        let users = Users::new(Some(bad), None).unwrap();
        assert!(users.current().authenticate(b"alice", b"pw").is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
