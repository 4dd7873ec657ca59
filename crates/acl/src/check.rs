//! Permission checks (acl.c `ACLCheckAllUserCommandPerm`): a call is
//! allowed if the root selector or any other selector allows its command,
//! every key it names (with the access the key spec says) and every
//! channel it names. A user with `+@all ~* &*` and no selectors only tests
//! one bit.

use commands::CommandSpec;
use keyspace::glob::glob_match;

use crate::keys::{kf, KeyRef};
use crate::registry::{registry, Channels, CmdInfo};
use crate::selector::{Selector, PERM_READ, PERM_WRITE};
use crate::user::User;

/// Why a call is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Denied {
    /// The command (`get`) or subcommand (`config|get`) is not allowed.
    Command(&'static str),
    /// The key at this argument index (the command name is index 0).
    Key(usize),
    /// The channel at this argument index.
    Channel(usize),
}

impl Denied {
    fn rank(&self) -> (u8, usize) {
        match *self {
            Denied::Command(_) => (1, 0),
            Denied::Key(i) => (2, i),
            Denied::Channel(i) => (4, i),
        }
    }

    /// ACL LOG `reason`: `command`, `key` or `channel`.
    pub fn reason(&self) -> &'static str {
        match self {
            Denied::Command(_) => "command",
            Denied::Key(_) => "key",
            Denied::Channel(_) => "channel",
        }
    }

    /// ACL LOG `object`: the command's full name, or the key or channel.
    pub fn object(&self, args: &[&[u8]]) -> Vec<u8> {
        match *self {
            Denied::Command(name) => name.as_bytes().to_vec(),
            Denied::Key(i) | Denied::Channel(i) => {
                args.get(i).map(|a| a.to_vec()).unwrap_or_default()
            }
        }
    }

    /// The error reply for a refused call, as Redis 7.0's processCommand
    /// (`NOPERM this user has no permissions to run the 'get' command`).
    pub fn noperm_message(&self) -> String {
        match self {
            Denied::Command(name) => {
                format!("NOPERM this user has no permissions to run the '{name}' command")
            }
            Denied::Key(_) => "NOPERM this user has no permissions to access one of the keys used as arguments".into(),
            Denied::Channel(_) => "NOPERM this user has no permissions to access one of the channels used as arguments".into(),
        }
    }

    /// ACL DRYRUN's reply text for this refusal (`args` as given to
    /// [`User::check`]).
    pub fn dryrun_message(&self, args: &[&[u8]]) -> String {
        let obj = String::from_utf8_lossy(&self.object(args)).into_owned();
        match self {
            Denied::Command(_) => {
                format!("This user has no permissions to run the '{obj}' command")
            }
            Denied::Key(_) => format!("This user has no permissions to access the '{obj}' key"),
            Denied::Channel(_) => {
                format!("This user has no permissions to access the '{obj}' channel")
            }
        }
    }
}

/// ACLSelectorCheckKey.
fn key_allowed(sel: &Selector, key: &[u8], spec_flags: u16) -> bool {
    if sel.all_keys {
        return true;
    }
    let mut need = 0;
    if spec_flags & kf::ACCESS != 0 {
        need |= PERM_READ;
    }
    if spec_flags & (kf::INSERT | kf::DELETE | kf::UPDATE) != 0 {
        need |= PERM_WRITE;
    }
    sel.keys
        .iter()
        .any(|p| p.perms & need == need && glob_match(&p.pattern, key))
}

/// ACLCheckChannelAgainstList: a pattern (PSUBSCRIBE) must equal an
/// allowed pattern; a channel is glob-matched.
fn channel_allowed(sel: &Selector, channel: &[u8], is_pattern: bool) -> bool {
    sel.all_channels
        || sel.channels.iter().any(|p| {
            if is_pattern {
                p == channel
            } else {
                glob_match(p, channel)
            }
        })
}

/// ACLSelectorCheckCmd. `keys` is computed at most once per check.
fn check_selector(
    sel: &Selector,
    id: u16,
    info: &CmdInfo,
    args: &[&[u8]],
    keys: &mut Option<Vec<KeyRef>>,
) -> Result<(), Denied> {
    if !info.no_auth && !sel.bit(id) {
        let first_ok = args.len() >= 2
            && sel
                .firstargs
                .get(&id)
                .is_some_and(|list| list.iter().any(|a| a.eq_ignore_ascii_case(args[1])));
        if !first_ok {
            return Err(Denied::Command(info.name));
        }
    }
    if !sel.all_keys && info.keys.has_keys() {
        let keys = keys.get_or_insert_with(|| info.keys.keys(args));
        for k in keys.iter() {
            if !key_allowed(sel, args[k.pos], k.flags) {
                return Err(Denied::Key(k.pos));
            }
        }
    }
    if !sel.all_channels && info.channels != Channels::None {
        let (end, pattern) = match info.channels {
            Channels::Publish => (args.len().min(2), false),
            Channels::Pattern => (args.len(), true),
            _ => (args.len(), false),
        };
        for (i, ch) in args.iter().enumerate().take(end).skip(1) {
            if !channel_allowed(sel, ch, pattern) {
                return Err(Denied::Channel(i));
            }
        }
    }
    Ok(())
}

impl User {
    /// Whether this user may run `spec` with `args` (the command name
    /// first, as received). Also ACL DRYRUN.
    pub fn check(&self, spec: &CommandSpec, args: &[&[u8]]) -> Result<(), Denied> {
        let reg = registry();
        let id = reg.resolve(spec, args);
        let Some(info) = reg.cmds.get(id as usize) else {
            return Err(Denied::Command(spec.name));
        };
        // Fast path: everything allowed, nothing to look at but one bit.
        let root = &self.root;
        if self.selectors.is_empty()
            && root.all_keys
            && root.all_channels
            && (info.no_auth || root.bit(id))
        {
            return Ok(());
        }
        let mut keys = None;
        let mut worst: Option<Denied> = None;
        for sel in std::iter::once(root).chain(&self.selectors) {
            match check_selector(sel, id, info, args, &mut keys) {
                Ok(()) => return Ok(()),
                Err(d) => {
                    if worst.as_ref().is_none_or(|w| d.rank() > w.rank()) {
                        worst = Some(d);
                    }
                }
            }
        }
        Err(worst.unwrap_or(Denied::Command(info.name)))
    }

    /// ACLUserCheckCmdWithUnrestrictedKeyAccess with read access (what
    /// SORT's BY and GET patterns need): some selector allows the call and
    /// may read every key (`allkeys`, or a `*` pattern with read).
    pub fn unrestricted_read(&self, spec: &CommandSpec, args: &[&[u8]]) -> bool {
        let reg = registry();
        let id = reg.resolve(spec, args);
        let Some(info) = reg.cmds.get(id as usize) else {
            return false;
        };
        let mut keys = None;
        std::iter::once(&self.root)
            .chain(&self.selectors)
            .any(|sel| {
                check_selector(sel, id, info, args, &mut keys).is_ok()
                    && (sel.all_keys
                        || sel
                            .keys
                            .iter()
                            .any(|p| p.perms & PERM_READ != 0 && p.pattern == b"*"))
            })
    }

    /// ACLUserCheckKeyPerm: whether some selector grants access to `key`
    /// with key-spec flags `flags` (see [`crate::keys::kf`]).
    pub fn check_key(&self, key: &[u8], flags: u16) -> bool {
        std::iter::once(&self.root)
            .chain(&self.selectors)
            .any(|s| key_allowed(s, key, flags))
    }

    /// ACLUserCheckChannelPerm: whether some selector allows `channel`
    /// (a PSUBSCRIBE pattern if `is_pattern`).
    pub fn check_channel(&self, channel: &[u8], is_pattern: bool) -> bool {
        std::iter::once(&self.root)
            .chain(&self.selectors)
            .any(|s| channel_allowed(s, channel, is_pattern))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(rules: &str) -> User {
        let mut u = User::new(b"u");
        let args: Vec<Vec<u8>> = rules.split(' ').map(|s| s.as_bytes().to_vec()).collect();
        for r in crate::args::merge_selectors(&args).unwrap() {
            u.apply(&r).unwrap();
        }
        u
    }

    fn check(u: &User, line: &str) -> Result<(), Denied> {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        u.check(commands::lookup(args[0]).unwrap(), &args)
    }

    #[test]
    fn commands_and_subcommands() {
        let u = user("on +get +config|get ~*");
        assert_eq!(check(&u, "get k"), Ok(()));
        assert_eq!(check(&u, "set k v"), Err(Denied::Command("set")));
        assert_eq!(check(&u, "config get x"), Ok(()));
        assert_eq!(
            check(&u, "CONFIG SET x y"),
            Err(Denied::Command("config|set"))
        );
        assert_eq!(
            check(&u, "auth x"),
            Ok(()),
            "no-auth commands are always allowed"
        );
        let u = user("+@all -config|set ~*");
        assert_eq!(
            check(&u, "config set a b"),
            Err(Denied::Command("config|set"))
        );
        assert_eq!(check(&u, "config get a"), Ok(()));
        assert_eq!(check(&u, "wanapply a b"), Err(Denied::Command("wanapply")));
        let u = user("+@all +@internal ~*");
        assert_eq!(check(&u, "wanapply a b"), Ok(()));
        let u = user("-@all +select|0 ~*");
        assert_eq!(check(&u, "select 0"), Ok(()));
        assert_eq!(check(&u, "select 1"), Err(Denied::Command("select")));
    }

    #[test]
    fn keys_with_read_write_patterns() {
        let u = user("+@all %R~read* %W~write* %RW~rw*");
        assert_eq!(check(&u, "get readstr"), Ok(()));
        assert_eq!(check(&u, "set readstr bar"), Err(Denied::Key(1)));
        assert_eq!(check(&u, "get writestr"), Err(Denied::Key(1)));
        assert_eq!(check(&u, "set writestr bar"), Ok(()));
        assert_eq!(check(&u, "set writestr get"), Ok(()));
        assert_eq!(check(&u, "set writestr bar ex get"), Err(Denied::Key(1)));
        assert_eq!(check(&u, "lpush writelist 1"), Ok(()));
        assert_eq!(check(&u, "copy readx writey"), Ok(()));
        assert_eq!(check(&u, "copy writey readx"), Err(Denied::Key(1)));
        assert_eq!(check(&u, "bitfield readstr get u4 0"), Ok(()));
        assert_eq!(check(&u, "bitfield writestr get u4 0"), Err(Denied::Key(1)));
        assert_eq!(
            check(&u, "bitfield writestr set u4 0 1"),
            Err(Denied::Key(1))
        );
        assert_eq!(check(&u, "bitfield rwx incrby u4 0 1"), Ok(()));
        assert_eq!(
            check(&u, "exists anything"),
            Err(Denied::Key(1)),
            "no pattern matches at all"
        );
        let u = user("+@all %R~x");
        assert_eq!(check(&u, "exists zzz"), Err(Denied::Key(1)));
    }

    #[test]
    fn selectors_pick_the_relevant_error() {
        // acl-v2.tcl "ACL log correctly identifies the relevant item".
        let u = user("on nopass +mget ~key (+mget ~key ~otherkey)");
        assert_eq!(check(&u, "get key"), Err(Denied::Command("get")));
        assert_eq!(check(&u, "mget otherkey someotherkey"), Err(Denied::Key(2)));
        assert_eq!(
            check(&u, "mget key otherkey someotherkey"),
            Err(Denied::Key(3))
        );
        let u = user("-@all ~* (+set ~write::*) (+get ~read::*)");
        assert_eq!(check(&u, "ping"), Err(Denied::Command("ping")));
        assert_eq!(check(&u, "set write::foo bar"), Ok(()));
        assert_eq!(check(&u, "get write::foo"), Err(Denied::Key(1)));
    }

    #[test]
    fn channels() {
        let u = user("+@all ~* resetchannels &foo* &bar");
        assert_eq!(check(&u, "publish foo1 m"), Ok(()));
        assert_eq!(check(&u, "publish baz m"), Err(Denied::Channel(1)));
        assert_eq!(check(&u, "subscribe foo1 bar"), Ok(()));
        assert_eq!(check(&u, "subscribe foo1 baz"), Err(Denied::Channel(2)));
        assert_eq!(check(&u, "psubscribe foo*"), Ok(()));
        assert_eq!(check(&u, "psubscribe foo1"), Err(Denied::Channel(1)));
        assert_eq!(check(&u, "ssubscribe bar"), Ok(()));
        assert_eq!(check(&u, "spublish baz m"), Err(Denied::Channel(1)));
        assert_eq!(check(&u, "unsubscribe baz"), Ok(()));
        assert!(u.check_channel(b"foo9", false) && !u.check_channel(b"fo*", true));
    }

    #[test]
    fn dryrun_texts() {
        let args: [&[u8]; 2] = [b"get", b"k"];
        assert_eq!(
            Denied::Command("get").dryrun_message(&args),
            "This user has no permissions to run the 'get' command"
        );
        assert_eq!(
            Denied::Key(1).dryrun_message(&args),
            "This user has no permissions to access the 'k' key"
        );
        assert_eq!(
            Denied::Channel(1).dryrun_message(&args),
            "This user has no permissions to access the 'k' channel"
        );
    }
}
