//! Redis 7.0 ACLs as pure logic: the user database ([`Acl`]), rules
//! (`ACL SETUSER`), permission checks ([`User::check`], also ACL DRYRUN),
//! the ACL file format ([`Acl::to_file`], [`Acl::from_file`]) and the ACL
//! LOG ([`AclLog`]). No networking: the server renders replies.
//!
//! The reference is Redis 7.0.15's acl.c; error texts are Redis's. Command
//! facts (categories, key specs) come from its commands/*.json through
//! the generated [`tables`] module. deltagrid adds one category,
//! `@internal` (WANAPPLY, WANSETTLED, BACKUPJOB), which `+@all` does not
//! grant.

mod args;
mod check;
mod db;
mod describe;
mod file;
pub mod keys;
mod log;
pub mod password;
mod registry;
mod selector;
mod tables;
mod user;

use std::fmt;

pub use check::Denied;
pub use db::{Acl, AuthFailure};
pub use log::{AclLog, LogContext, LogEntry, LogReason, DEFAULT_LOG_MAX_LEN};
pub use password::genpass;
pub use registry::{categories, command_categories, commands_in};
pub use selector::Selector;
pub use user::User;

/// An error reply. `Display` gives the full text after the `-`, starting
/// with `ERR ` as Redis sends it (e.g. `ERR Error in ACL SETUSER modifier
/// 'foo': Syntax error`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclError {
    message: String,
}

impl AclError {
    /// An `ERR` error with this text; CR and LF become spaces (RESP errors
    /// are one line, as Redis's addReplyErrorSdsSafe).
    pub(crate) fn new(text: impl Into<String>) -> AclError {
        let text: String = text.into();
        AclError {
            message: text.replace(['\r', '\n'], " "),
        }
    }

    /// The text without the `ERR ` prefix.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for AclError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ERR {}", self.message)
    }
}

impl std::error::Error for AclError {}

/// Why a rule was refused (acl.c's errno values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RuleError {
    /// EINVAL
    Syntax,
    /// ENOENT
    Unknown,
    /// EEXIST
    KeysAfterAll,
    /// EISDIR
    ChannelsAfterAll,
    /// ENODEV
    NoSuchPassword,
    /// EBADMSG
    BadHash,
    /// ECHILD
    FirstArgOfSubcommand,
}

impl RuleError {
    /// ACLSetUserStringError.
    pub(crate) fn message(self) -> &'static str {
        match self {
            RuleError::Syntax => "Syntax error",
            RuleError::Unknown => "Unknown command or category name in ACL",
            RuleError::KeysAfterAll => "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
            RuleError::ChannelsAfterAll => "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
            RuleError::NoSuchPassword => "The password you are trying to remove from the user does not exist",
            RuleError::BadHash => "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
            RuleError::FirstArgOfSubcommand => "Allowing first-arg of a subcommand is not supported",
        }
    }
}
