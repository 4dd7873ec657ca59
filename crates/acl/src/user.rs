//! A user: on/off, passwords (SHA-256 only), payload sanitizing, a root
//! selector and extra `(...)` selectors. Rules follow acl.c `ACLSetUser`.

use crate::args::split_args;
use crate::password::{constant_time_eq, hash_password, valid_hash};
use crate::selector::Selector;
use crate::RuleError;

/// A user of the ACL database. Immutable once published: a change builds
/// a new `User` (the database shares them as `Arc<User>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    name: Vec<u8>,
    enabled: bool,
    nopass: bool,
    /// None: neither flag; Some(true): `sanitize-payload`; Some(false):
    /// `skip-sanitize-payload`.
    sanitize: Option<bool>,
    /// SHA-256 hex of each password, in the order added.
    passwords: Vec<String>,
    pub(crate) root: Selector,
    pub(crate) selectors: Vec<Selector>,
}

impl User {
    /// A new user as ACL SETUSER creates it: `off resetchannels -@all`.
    pub fn new(name: &[u8]) -> User {
        User {
            name: name.to_vec(),
            enabled: false,
            nopass: false,
            sanitize: None,
            passwords: Vec::new(),
            root: Selector::new(),
            selectors: Vec::new(),
        }
    }

    /// The `default` user of a fresh server: `on nopass ~* &* +@all`.
    pub fn default_user() -> User {
        let mut u = User::new(b"default");
        for op in ["+@all", "~*", "&*", "on", "nopass"] {
            let _ = u.apply(op.as_bytes());
        }
        u
    }

    /// A new user, with every channel when `acl-pubsub-default` is
    /// `allchannels`.
    pub(crate) fn new_with(name: &[u8], pubsub_all: bool) -> User {
        let mut u = User::new(name);
        if pubsub_all {
            u.root.all_channels = true;
        }
        u
    }

    /// Applies one rule as [`User::apply`], where `reset` and a new
    /// selector start from `acl-pubsub-default` (`pubsub_all`: every
    /// channel) as Redis's do.
    pub(crate) fn apply_rule(&mut self, op: &[u8], pubsub_all: bool) -> Result<(), RuleError> {
        if !pubsub_all {
            return self.apply(op);
        }
        if op.eq_ignore_ascii_case(b"reset") {
            self.apply(op)?;
            self.root.all_channels = true;
            return Ok(());
        }
        if op.len() >= 2 && op[0] == b'(' && op[op.len() - 1] == b')' {
            let mut with = b"(allchannels ".to_vec();
            with.extend_from_slice(&op[1..]);
            return self.apply(&with);
        }
        self.apply(op)
    }

    pub(crate) fn with_name(&self, name: &[u8]) -> User {
        User {
            name: name.to_vec(),
            ..self.clone()
        }
    }

    /// Applies one rule (ACLSetUser); on error the user may be partly
    /// changed, so callers work on a copy.
    pub(crate) fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let is = |s: &[u8]| op.eq_ignore_ascii_case(s);
        if op.is_empty() {
            return Ok(());
        }
        if is(b"on") {
            self.enabled = true;
        } else if is(b"off") {
            self.enabled = false;
        } else if is(b"skip-sanitize-payload") {
            self.sanitize = Some(false);
        } else if is(b"sanitize-payload") {
            self.sanitize = Some(true);
        } else if is(b"nopass") {
            self.nopass = true;
            self.passwords.clear();
        } else if is(b"resetpass") {
            self.nopass = false;
            self.passwords.clear();
        } else if op[0] == b'>' || op[0] == b'#' {
            let hash = if op[0] == b'>' {
                hash_password(&op[1..])
            } else if valid_hash(&op[1..]) {
                String::from_utf8_lossy(&op[1..]).into_owned()
            } else {
                return Err(RuleError::BadHash);
            };
            if !self.passwords.contains(&hash) {
                self.passwords.push(hash);
            }
            self.nopass = false;
        } else if op[0] == b'<' || op[0] == b'!' {
            let hash = if op[0] == b'<' {
                hash_password(&op[1..])
            } else if valid_hash(&op[1..]) {
                String::from_utf8_lossy(&op[1..]).into_owned()
            } else {
                return Err(RuleError::BadHash);
            };
            let at = self.passwords.iter().position(|p| *p == hash);
            match at {
                Some(i) => {
                    self.passwords.remove(i);
                }
                None => return Err(RuleError::NoSuchPassword),
            }
        } else if op[0] == b'(' && op[op.len() - 1] == b')' {
            let mut sel = Selector::new();
            let inner = if op.len() >= 2 {
                &op[1..op.len() - 1]
            } else {
                &[][..]
            };
            // Unbalanced quotes inside: no rules at all, as Redis.
            for rule in split_args(inner).unwrap_or_default() {
                sel.apply(&rule)?;
            }
            self.selectors.push(sel);
        } else if is(b"clearselectors") {
            self.selectors.clear();
        } else if is(b"reset") {
            self.nopass = false;
            self.passwords.clear();
            self.root.apply(b"resetkeys")?;
            self.root.apply(b"resetchannels")?;
            self.enabled = false;
            self.sanitize = Some(true);
            self.selectors.clear();
            self.root.apply(b"-@all")?;
        } else {
            self.root.apply(op)?;
        }
        Ok(())
    }

    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// `on`: the user may authenticate.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// `nopass`: any password is accepted.
    pub fn nopass(&self) -> bool {
        self.nopass
    }

    /// Whether RESTORE payloads must be sanitized: Some(true) for
    /// `sanitize-payload`, Some(false) for `skip-sanitize-payload`, None
    /// when neither is set (the server's `sanitize-dump-payload` decides).
    pub fn sanitize_payload(&self) -> Option<bool> {
        self.sanitize
    }

    /// ACL GETUSER `flags`, in Redis's order.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut out = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            out.push("nopass");
        }
        match self.sanitize {
            Some(false) => out.push("skip-sanitize-payload"),
            Some(true) => out.push("sanitize-payload"),
            None => {}
        }
        out
    }

    /// ACL GETUSER `passwords`: SHA-256 hex strings.
    pub fn passwords(&self) -> &[String] {
        &self.passwords
    }

    /// The root selector (ACL GETUSER's top-level commands/keys/channels).
    pub fn root(&self) -> &Selector {
        &self.root
    }

    /// The `(...)` selectors, in order.
    pub fn selectors(&self) -> &[Selector] {
        &self.selectors
    }

    /// Whether `password` is accepted (nopass, or its hash is one of ours).
    /// Disabled users are refused by [`crate::Acl::authenticate`].
    pub fn password_matches(&self, password: &[u8]) -> bool {
        if self.nopass {
            return true;
        }
        let hashed = hash_password(password);
        self.passwords.iter().fold(false, |ok, p| {
            constant_time_eq(p.as_bytes(), hashed.as_bytes()) | ok
        })
    }

    /// The rules as ACL LIST prints them after `user <name> `
    /// (ACLDescribeUser). Applying them to a new user rebuilds this user.
    pub fn describe(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for f in self.flags() {
            out.extend_from_slice(f.as_bytes());
            out.push(b' ');
        }
        for p in &self.passwords {
            out.push(b'#');
            out.extend_from_slice(p.as_bytes());
            out.push(b' ');
        }
        out.extend_from_slice(&self.root.describe());
        for s in &self.selectors {
            out.extend_from_slice(b" (");
            out.extend_from_slice(&s.describe());
            out.push(b')');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(rules: &[&str]) -> Result<User, RuleError> {
        let mut u = User::new(b"u");
        for r in rules {
            u.apply(r.as_bytes())?;
        }
        Ok(u)
    }

    fn text(u: &User) -> String {
        String::from_utf8(u.describe()).unwrap()
    }

    #[test]
    fn describes_like_acl_list() {
        assert_eq!(text(&User::default_user()), "on nopass ~* &* +@all");
        assert_eq!(text(&User::new(b"x")), "off resetchannels -@all");
        let u = user(&["on", "nopass", "resetchannels", "&foo", "+@all"]).unwrap();
        assert_eq!(text(&u), "on nopass resetchannels &foo +@all");
        let u = user(&["reset"]).unwrap();
        assert_eq!(text(&u), "off sanitize-payload resetchannels -@all");
        let u = user(&[
            "on",
            ">foo",
            "%R~foo1",
            "%W~bar1",
            "~baz1",
            "&channel1",
            "+get",
            "(%R~foo2 &channel2 +set)",
        ])
        .unwrap();
        assert_eq!(
            text(&u),
            "on #2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae %R~foo1 %W~bar1 ~baz1 resetchannels &channel1 -@all +get (%R~foo2 resetchannels &channel2 -@all +set)"
        );
    }

    #[test]
    fn passwords() {
        let u = user(&[">foo", ">bar", ">foo"]).unwrap();
        assert_eq!(u.passwords().len(), 2);
        assert!(u.password_matches(b"bar") && !u.password_matches(b"baz"));
        assert_eq!(user(&["<nosuch"]), Err(RuleError::NoSuchPassword));
        assert_eq!(user(&["#abc"]), Err(RuleError::BadHash));
        assert_eq!(user(&["!abc"]), Err(RuleError::BadHash));
        let h = crate::password::hash_password(b"foo");
        let u = user(&[&format!("#{h}"), "nopass"]).unwrap();
        assert!(u.passwords().is_empty() && u.password_matches(b"anything"));
        let u = user(&[">foo", &format!("!{h}")]).unwrap();
        assert!(u.passwords().is_empty() && !u.password_matches(b"foo"));
        assert_eq!(user(&["nopass", ">x"]).unwrap().flags(), ["off"]);
    }

    #[test]
    fn selectors_and_flags() {
        let u = user(&["(~a +get)", "()", "clearselectors"]).unwrap();
        assert!(u.selectors().is_empty());
        assert_eq!(user(&["(this-is-invalid)"]), Err(RuleError::Syntax));
        assert_eq!(user(&["(on)"]), Err(RuleError::Syntax));
        assert_eq!(user(&[")"]), Err(RuleError::Syntax));
        assert_eq!(
            user(&["skip-sanitize-payload"]).unwrap().flags(),
            ["off", "skip-sanitize-payload"]
        );
        assert_eq!(user(&["(\"x)"]).unwrap().selectors().len(), 1);
    }
}
