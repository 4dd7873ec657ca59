//! The connection's ACL user: logging in (AUTH, HELLO AUTH), following
//! changes to it, and changes to the users made from this connection.

use std::sync::Arc;

use acl::{AuthFailure, LogReason, User};
use bytes::Bytes;
use commands::CmdError;

use cluster::internal_auth;

use super::Session;
use crate::acl_cmd::{self, AclChange};

impl Session {
    /// Takes the latest version of this connection's user. A user deleted
    /// meanwhile (ACL DELUSER, ACL LOAD without it) ends the connection,
    /// as Redis frees the clients of a deleted user.
    pub(crate) fn refresh_user(&mut self) {
        let epoch = self.node.users.epoch();
        if epoch == self.user_epoch {
            return;
        }
        if self.internal {
            self.user_epoch = epoch;
            return;
        }
        self.user_epoch = epoch;
        match self.node.users.user(self.user.name()) {
            Some(u) => self.user = u,
            None => {
                self.shared.kill();
                // Nothing runs as nobody until the connection closes.
                self.user = Arc::new(User::new(self.user.name()));
            }
        }
    }

    /// AUTH / HELLO AUTH: the user, once the password is checked; a
    /// failure is logged (reason `auth`, object the command as sent).
    pub(super) fn login(&mut self, cmd: &[u8], user: &[u8], pass: &[u8]) -> Result<(), CmdError> {
        if user == internal_auth::USER.as_bytes()
            && internal_auth::verify(self.node.cluster.as_deref(), pass)
        {
            self.user_epoch = self.node.users.epoch();
            *self.shared.user.lock() = Bytes::from_static(internal_auth::USER.as_bytes());
            self.user = internal_user();
            self.internal = true;
            self.authenticated = true;
            return Ok(());
        }
        match self.node.users.current().authenticate(user, pass) {
            Ok(u) => {
                self.internal = false;
                self.user_epoch = self.node.users.epoch();
                *self.shared.user.lock() = Bytes::copy_from_slice(u.name());
                self.user = u;
                self.authenticated = true;
                Ok(())
            }
            Err(AuthFailure::NoSuchUser | AuthFailure::Disabled | AuthFailure::WrongPassword) => {
                let name = String::from_utf8_lossy(cmd).to_ascii_lowercase();
                let ctx = acl_cmd::context(self);
                acl_cmd::log_entry(self, &name, LogReason::Auth, ctx, cmd, user);
                Err(CmdError::WrongPass)
            }
        }
    }

    /// Back to `default`, authenticated only if it needs no password (RESET).
    pub(super) fn logout(&mut self) {
        self.internal = false;
        self.user_epoch = self.node.users.epoch();
        self.user = self.node.users.current().default_user();
        self.authenticated = self.user.enabled() && self.user.nopass();
        *self.shared.user.lock() = Bytes::from_static(b"default");
    }

    /// Applies a change to the users (ACL SETUSER, DELUSER, LOAD) on this
    /// node, then ends what it no longer allows: the connections of deleted
    /// users, and subscribers to channels their user lost.
    pub(crate) fn change_users(&mut self, change: AclChange) -> Result<usize, CmdError> {
        let mut base = Vec::new();
        let r = self
            .node
            .users
            .change(|acl| {
                base = acl.to_file();
                change.apply(acl)
            })
            .map_err(|e| CmdError::other(e.to_string()))?;
        if self.node.cluster.is_some() {
            self.pending_acl.push(crate::site_acl::Pending {
                change: change.clone(),
                base,
            });
        }
        let reloaded = matches!(change, AclChange::Load { .. });
        crate::acl_cmd::enforce(&self.node, reloaded);
        Ok(r)
    }
}

/// What a node logged in as [`internal_auth::USER`] may run: everything,
/// internal commands included.
fn internal_user() -> Arc<User> {
    static USER: std::sync::OnceLock<Arc<User>> = std::sync::OnceLock::new();
    USER.get_or_init(|| {
        let mut acl = acl::Acl::new();
        let rules: [&[u8]; 6] = [b"on", b"nopass", b"~*", b"&*", b"+@all", b"+@internal"];
        let name = internal_auth::USER.as_bytes();
        acl.set_user(name, &rules)
            .ok()
            .and_then(|()| acl.get(name))
            .unwrap_or_else(|| Arc::new(User::new(name)))
    })
    .clone()
}
