//! The user database: `ACL SETUSER` (atomic), `DELUSER`, `GETUSER`,
//! `LIST`, `USERS`, `DRYRUN` and authentication. Users are shared as
//! `Arc<User>`; changing a user replaces its `Arc`, so a connection's
//! snapshot stays valid and cheap.

use std::collections::BTreeMap;
use std::sync::Arc;

use commands::CommandSpec;

use crate::args::{has_spaces, merge_selectors};
use crate::check::Denied;
use crate::user::User;
use crate::AclError;

/// Why AUTH failed. All of them reply [`AuthFailure::MESSAGE`] and log an
/// `auth` entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthFailure {
    NoSuchUser,
    Disabled,
    WrongPassword,
}

impl AuthFailure {
    /// The error reply (after the `-`).
    pub const MESSAGE: &'static str =
        "WRONGPASS invalid username-password pair or user is disabled.";
}

/// The users, by name (sorted by bytes, as Redis's rax).
#[derive(Clone, Debug)]
pub struct Acl {
    pub(crate) users: BTreeMap<Vec<u8>, Arc<User>>,
    /// `acl-pubsub-default allchannels`: new users, `reset` and new
    /// selectors start with every channel (Redis 7.0's default: none).
    pub(crate) pubsub_all: bool,
}

impl Default for Acl {
    fn default() -> Self {
        Self::new()
    }
}

impl Acl {
    /// A fresh database: only `default` (`on nopass ~* &* +@all`).
    pub fn new() -> Acl {
        let mut users = BTreeMap::new();
        users.insert(b"default".to_vec(), Arc::new(User::default_user()));
        Acl {
            users,
            pubsub_all: false,
        }
    }

    /// `acl-pubsub-default`: true for `allchannels`, false for
    /// `resetchannels`.
    pub fn set_pubsub_default(&mut self, all: bool) {
        self.pubsub_all = all;
    }

    pub fn pubsub_default_all(&self) -> bool {
        self.pubsub_all
    }

    pub fn get(&self, name: &[u8]) -> Option<Arc<User>> {
        self.users.get(name).cloned()
    }

    /// The `default` user (always present).
    pub fn default_user(&self) -> Arc<User> {
        self.get(b"default")
            .unwrap_or_else(|| Arc::new(User::default_user()))
    }

    /// ACL USERS: the names, sorted.
    pub fn users(&self) -> Vec<Vec<u8>> {
        self.users.keys().cloned().collect()
    }

    /// ACL LIST: `user <name> <rules>` for each user, sorted by name.
    pub fn list(&self) -> Vec<Vec<u8>> {
        self.users
            .values()
            .map(|u| {
                let mut line = b"user ".to_vec();
                line.extend_from_slice(u.name());
                line.push(b' ');
                line.extend_from_slice(&u.describe());
                line
            })
            .collect()
    }

    /// ACL SETUSER: creates the user if needed and applies `rules` in
    /// order; on any error nothing changes.
    pub fn set_user<R: AsRef<[u8]>>(&mut self, name: &[u8], rules: &[R]) -> Result<(), AclError> {
        if has_spaces(name) {
            return Err(AclError::new(
                "Usernames can't contain spaces or null characters",
            ));
        }
        let base = self.users.get(name).map(|u| &**u);
        let user = build_user(base, name, rules, self.pubsub_all)?;
        self.users.insert(name.to_vec(), Arc::new(user));
        Ok(())
    }

    /// ACL DELUSER: how many of `names` existed; `default` is refused.
    pub fn del_users<N: AsRef<[u8]>>(&mut self, names: &[N]) -> Result<usize, AclError> {
        if names.iter().any(|n| n.as_ref() == b"default") {
            return Err(AclError::new("The 'default' user cannot be removed"));
        }
        Ok(names
            .iter()
            .filter(|n| self.users.remove(n.as_ref()).is_some())
            .count())
    }

    /// AUTH / HELLO AUTH: the user if it exists, is `on` and accepts the
    /// password.
    pub fn authenticate(&self, name: &[u8], password: &[u8]) -> Result<Arc<User>, AuthFailure> {
        let user = self.users.get(name).ok_or(AuthFailure::NoSuchUser)?;
        if !user.enabled() {
            return Err(AuthFailure::Disabled);
        }
        if !user.password_matches(password) {
            return Err(AuthFailure::WrongPassword);
        }
        Ok(user.clone())
    }

    /// ACL DRYRUN `<user> <command> [args...]` after the server resolved
    /// the command and checked arity: Err for an unknown user (`ERR User
    /// '<name>' not found`), else the check (render a refusal with
    /// [`Denied::dryrun_message`] as a bulk string, success as `+OK`).
    pub fn dry_run(
        &self,
        name: &[u8],
        spec: &CommandSpec,
        args: &[&[u8]],
    ) -> Result<Result<(), Denied>, AclError> {
        let user = self.users.get(name).ok_or_else(|| {
            AclError::new(format!(
                "User '{}' not found",
                String::from_utf8_lossy(name)
            ))
        })?;
        Ok(user.check(spec, args))
    }
}

/// ACLStringSetUser: `rules` (selectors may span several) applied to a
/// copy of `base` (or a new user).
pub(crate) fn build_user<R: AsRef<[u8]>>(
    base: Option<&User>,
    name: &[u8],
    rules: &[R],
    pubsub_all: bool,
) -> Result<User, AclError> {
    let merged = merge_selectors(rules).map_err(|at| {
        AclError::new(format!(
            "Unmatched parenthesis in acl selector starting at '{}'.",
            String::from_utf8_lossy(rules[at].as_ref())
        ))
    })?;
    let mut user = match base {
        Some(u) => u.with_name(name),
        None => User::new_with(name, pubsub_all),
    };
    for rule in &merged {
        user.apply_rule(rule, pubsub_all).map_err(|e| {
            AclError::new(format!(
                "Error in ACL SETUSER modifier '{}': {}",
                String::from_utf8_lossy(rule),
                e.message()
            ))
        })?;
    }
    Ok(user)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(acl: &mut Acl, name: &str, rules: &str) -> Result<(), String> {
        let rules: Vec<&[u8]> = rules.split(' ').map(str::as_bytes).collect();
        acl.set_user(name.as_bytes(), &rules)
            .map_err(|e| e.to_string())
    }

    fn list(acl: &Acl) -> Vec<String> {
        acl.list()
            .into_iter()
            .map(|l| String::from_utf8(l).unwrap())
            .collect()
    }

    #[test]
    fn fresh_database() {
        let acl = Acl::new();
        assert_eq!(list(&acl), ["user default on nopass ~* &* +@all"]);
        assert_eq!(acl.users(), [b"default".to_vec()]);
        assert!(acl.authenticate(b"default", b"whatever").is_ok());
    }

    #[test]
    fn setuser_is_atomic_with_redis_errors() {
        let mut acl = Acl::new();
        set(&mut acl, "newuser", "").unwrap();
        assert_eq!(list(&acl)[1], "user newuser off resetchannels -@all");
        assert_eq!(
            set(&mut acl, "newuser", "on >p1 +get bogus"),
            Err("ERR Error in ACL SETUSER modifier 'bogus': Syntax error".into())
        );
        assert_eq!(list(&acl)[1], "user newuser off resetchannels -@all");
        assert_eq!(
            set(&mut acl, "newuser", "+nosuch"),
            Err("ERR Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL".into())
        );
        assert_eq!(
            set(&mut acl, "x", "on (this-is-invalid)"),
            Err("ERR Error in ACL SETUSER modifier '(this-is-invalid)': Syntax error".into())
        );
        assert!(acl.get(b"x").is_none(), "a failed SETUSER creates nothing");
        assert_eq!(
            set(&mut acl, "x", "(&* &fail)").unwrap_err(),
            "ERR Error in ACL SETUSER modifier '(&* &fail)': Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels"
        );
        assert_eq!(
            set(&mut acl, "x", "on (~a +get").unwrap_err(),
            "ERR Unmatched parenthesis in acl selector starting at '(~a'."
        );
        assert_eq!(
            set(&mut acl, "a b", "on").unwrap_err(),
            "ERR Usernames can't contain spaces or null characters"
        );
        set(&mut acl, "flex", "(~key1 +get ) ( ~key2 +set)").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(acl.get(b"flex").unwrap().selectors().len(), 2);
    }

    #[test]
    fn users_are_replaced_not_mutated() {
        let mut acl = Acl::new();
        set(&mut acl, "u", "on >pw +@all ~*").unwrap();
        let snapshot = acl.authenticate(b"u", b"pw").unwrap();
        set(&mut acl, "u", "-get").unwrap();
        assert!(snapshot
            .root()
            .bit(crate::registry::registry().lookup_rule(b"get").unwrap()));
        assert_eq!(
            acl.authenticate(b"u", b"no"),
            Err(AuthFailure::WrongPassword)
        );
        set(&mut acl, "u", "off").unwrap();
        assert_eq!(acl.authenticate(b"u", b"pw"), Err(AuthFailure::Disabled));
        assert_eq!(
            acl.authenticate(b"nobody", b"pw"),
            Err(AuthFailure::NoSuchUser)
        );
    }

    #[test]
    fn deluser() {
        let mut acl = Acl::new();
        set(&mut acl, "a", "on").unwrap();
        assert_eq!(
            acl.del_users(&[&b"a"[..], b"default"])
                .unwrap_err()
                .to_string(),
            "ERR The 'default' user cannot be removed"
        );
        assert_eq!(acl.del_users(&[&b"a"[..], b"zz"]).unwrap(), 1);
        assert_eq!(acl.users().len(), 1);
    }

    #[test]
    fn dry_run() {
        let mut acl = Acl::new();
        set(&mut acl, "u", "on +get ~k*").unwrap();
        let get = commands::lookup(b"get").unwrap();
        assert_eq!(acl.dry_run(b"u", get, &[b"get", b"k1"]).unwrap(), Ok(()));
        assert_eq!(
            acl.dry_run(b"u", get, &[b"get", b"x"]).unwrap(),
            Err(Denied::Key(1))
        );
        assert_eq!(
            acl.dry_run(b"nobody", get, &[b"get", b"x"])
                .unwrap_err()
                .to_string(),
            "ERR User 'nobody' not found"
        );
    }
}
