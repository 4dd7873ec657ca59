//! A selector: a set of allowed commands (a bitset over command ids, plus
//! allowed first arguments), key patterns with read/write permissions and
//! channel patterns. Every user has a root selector and may have more
//! `(...)` selectors. Rules follow acl.c `ACLSetSelector`.

use std::collections::BTreeMap;

use crate::args::has_spaces;
use crate::registry::{category_flag, registry, INTERNAL, MAX_IDS};
use crate::RuleError;

/// Read permission on a key pattern (`%R~`).
pub(crate) const PERM_READ: u8 = 1;
/// Write permission on a key pattern (`%W~`).
pub(crate) const PERM_WRITE: u8 = 2;
/// Both (`~`).
pub(crate) const PERM_ALL: u8 = PERM_READ | PERM_WRITE;

const WORDS: usize = MAX_IDS / 64;

/// A key pattern and the access it grants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KeyPattern {
    pub pattern: Vec<u8>,
    pub perms: u8,
}

impl KeyPattern {
    /// `~pat`, `%R~pat` or `%W~pat`.
    pub(crate) fn describe(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(match self.perms {
            PERM_READ => b"%R~",
            PERM_WRITE => b"%W~",
            _ => b"~",
        });
        out.extend_from_slice(&self.pattern);
    }
}

/// Commands, keys and channels a user may use (one of its selectors).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    pub(crate) bits: [u64; WORDS],
    /// Set by `+@all`/`allcommands`, cleared by `-@all`/`nocommands`: the
    /// rules describe as `+@all ...` rather than `-@all ...`.
    pub(crate) future: bool,
    /// Allowed first arguments of otherwise denied commands (`+select|0`).
    pub(crate) firstargs: BTreeMap<u16, Vec<Vec<u8>>>,
    pub(crate) all_keys: bool,
    pub(crate) keys: Vec<KeyPattern>,
    pub(crate) all_channels: bool,
    pub(crate) channels: Vec<Vec<u8>>,
}

impl Default for Selector {
    fn default() -> Self {
        Self::new()
    }
}

impl Selector {
    /// No permissions (Redis 7.0: `acl-pubsub-default resetchannels`).
    pub fn new() -> Selector {
        Selector {
            bits: [0; WORDS],
            future: false,
            firstargs: BTreeMap::new(),
            all_keys: false,
            keys: Vec::new(),
            all_channels: false,
            channels: Vec::new(),
        }
    }

    #[inline]
    pub(crate) fn bit(&self, id: u16) -> bool {
        let id = id as usize;
        id < MAX_IDS && self.bits[id / 64] & (1 << (id % 64)) != 0
    }

    fn set_bit(&mut self, id: u16, on: bool) {
        let id = id as usize;
        if id >= MAX_IDS {
            return;
        }
        if on {
            self.bits[id / 64] |= 1 << (id % 64);
        } else {
            self.bits[id / 64] &= !(1 << (id % 64));
        }
    }

    /// ACLChangeSelectorPerm: a command and, for a container, its subcommands.
    pub(crate) fn change_perm(&mut self, id: u16, allow: bool) {
        self.set_bit(id, allow);
        self.firstargs.remove(&id);
        let reg = registry();
        if let Some(info) = reg.cmds.get(id as usize) {
            for &sub in &info.subs {
                self.set_bit(sub, allow);
            }
        }
    }

    fn set_category(&mut self, flag: u32, allow: bool) {
        let reg = registry();
        for id in 0..reg.len() as u16 {
            if reg.info(id).categories & flag != 0 {
                self.change_perm(id, allow);
            }
        }
    }

    fn all_commands(&mut self) {
        let reg = registry();
        for id in 0..reg.len() as u16 {
            if reg.info(id).categories & INTERNAL == 0 {
                self.set_bit(id, true);
            }
        }
        self.future = true;
        self.firstargs.clear();
    }

    /// Applies one selector rule.
    pub(crate) fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let is = |s: &[u8]| op.eq_ignore_ascii_case(s);
        if is(b"allkeys") || is(b"~*") {
            self.all_keys = true;
            self.keys.clear();
        } else if is(b"resetkeys") {
            self.all_keys = false;
            self.keys.clear();
        } else if is(b"allchannels") || is(b"&*") {
            self.all_channels = true;
            self.channels.clear();
        } else if is(b"resetchannels") {
            self.all_channels = false;
            self.channels.clear();
        } else if is(b"allcommands") || is(b"+@all") {
            self.all_commands();
        } else if is(b"nocommands") || is(b"-@all") {
            self.bits = [0; WORDS];
            self.future = false;
            self.firstargs.clear();
        } else if op.first() == Some(&b'~') || op.first() == Some(&b'%') {
            self.add_key_pattern(op)?;
        } else if op.first() == Some(&b'&') {
            if self.all_channels {
                return Err(RuleError::ChannelsAfterAll);
            }
            let pat = &op[1..];
            if has_spaces(pat) {
                return Err(RuleError::Syntax);
            }
            if !self.channels.iter().any(|c| c == pat) {
                self.channels.push(pat.to_vec());
            }
            self.all_channels = false;
        } else if op.len() >= 2 && (op[0] == b'+' || op[0] == b'-') && op[1] == b'@' {
            let flag = category_flag(&op[2..]).ok_or(RuleError::Unknown)?;
            self.set_category(flag, op[0] == b'+');
        } else if op.first() == Some(&b'+') {
            self.allow_command(&op[1..])?;
        } else if op.first() == Some(&b'-') {
            let id = registry().lookup_rule(&op[1..]).ok_or(RuleError::Unknown)?;
            self.change_perm(id, false);
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }

    fn add_key_pattern(&mut self, op: &[u8]) -> Result<(), RuleError> {
        if self.all_keys {
            return Err(RuleError::KeysAfterAll);
        }
        let mut perms = 0;
        let mut offset = 1;
        if op[0] == b'%' {
            while offset < op.len() {
                let c = op[offset];
                if c.eq_ignore_ascii_case(&b'r') && perms & PERM_READ == 0 {
                    perms |= PERM_READ;
                } else if c.eq_ignore_ascii_case(&b'w') && perms & PERM_WRITE == 0 {
                    perms |= PERM_WRITE;
                } else if c == b'~' {
                    offset += 1;
                    break;
                } else {
                    return Err(RuleError::Syntax);
                }
                offset += 1;
            }
            // Redis would store a pattern granting nothing (`%~x`) and
            // later panic describing it: refused here.
            if perms == 0 {
                return Err(RuleError::Syntax);
            }
        } else {
            perms = PERM_ALL;
        }
        let pat = &op[offset.min(op.len())..];
        if has_spaces(pat) {
            return Err(RuleError::Syntax);
        }
        match self.keys.iter_mut().find(|k| k.pattern == pat) {
            Some(k) => k.perms |= perms,
            None => self.keys.push(KeyPattern {
                pattern: pat.to_vec(),
                perms,
            }),
        }
        self.all_keys = false;
        Ok(())
    }

    /// `+cmd`, `+container|sub`, `+cmd|firstarg`.
    fn allow_command(&mut self, name: &[u8]) -> Result<(), RuleError> {
        let reg = registry();
        let Some(bar) = name.iter().rposition(|&b| b == b'|') else {
            let id = reg.lookup_rule(name).ok_or(RuleError::Unknown)?;
            self.change_perm(id, true);
            return Ok(());
        };
        let (base, sub) = (&name[..bar], &name[bar + 1..]);
        let id = reg.lookup_rule(base).ok_or(RuleError::Unknown)?;
        if reg.info(id).parent.is_some() {
            return Err(RuleError::FirstArgOfSubcommand);
        }
        if sub.is_empty() {
            return Err(RuleError::Syntax);
        }
        if !reg.info(id).subs.is_empty() {
            let sid = reg.lookup_rule(name).ok_or(RuleError::Unknown)?;
            self.change_perm(sid, true);
        } else if !self.bit(id) {
            // Already allowed outright: a first-arg would change nothing.
            let list = self.firstargs.entry(id).or_default();
            if !list.iter().any(|a| a.eq_ignore_ascii_case(sub)) {
                list.push(sub.to_vec());
            }
        }
        Ok(())
    }

    /// Keys as ACL GETUSER shows them: `~*`, or the patterns joined by spaces.
    pub fn keys_string(&self) -> Vec<u8> {
        if self.all_keys {
            return b"~*".to_vec();
        }
        let mut out = Vec::new();
        for (i, k) in self.keys.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            k.describe(&mut out);
        }
        out
    }

    /// Channels as ACL GETUSER shows them: `&*`, or `&pat` joined by spaces.
    pub fn channels_string(&self) -> Vec<u8> {
        if self.all_channels {
            return b"&*".to_vec();
        }
        let mut out = Vec::new();
        for (i, c) in self.channels.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            out.push(b'&');
            out.extend_from_slice(c);
        }
        out
    }

    /// The command rules (`+@all -debug`), compacted as Redis's
    /// `ACLDescribeSelectorCommandRules`.
    pub fn commands_string(&self) -> Vec<u8> {
        crate::describe::command_rules(self)
    }

    /// ACLDescribeSelector: keys, channels, then command rules.
    pub fn describe(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.all_keys {
            out.extend_from_slice(b"~* ");
        } else {
            for k in &self.keys {
                k.describe(&mut out);
                out.push(b' ');
            }
        }
        if self.all_channels {
            out.extend_from_slice(b"&* ");
        } else {
            out.extend_from_slice(b"resetchannels ");
            for c in &self.channels {
                out.push(b'&');
                out.extend_from_slice(c);
                out.push(b' ');
            }
        }
        out.extend_from_slice(&self.commands_string());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(rules: &[&str]) -> Result<Selector, RuleError> {
        let mut s = Selector::new();
        for r in rules {
            s.apply(r.as_bytes())?;
        }
        Ok(s)
    }

    #[test]
    fn key_patterns() {
        let s = sel(&["%R~foo", "%W~bar", "~baz", "%RW~qux", "%W~foo"]).unwrap();
        assert_eq!(s.keys_string(), b"~foo %W~bar ~baz ~qux");
        assert_eq!(sel(&["~*", "~x"]), Err(RuleError::KeysAfterAll));
        assert_eq!(sel(&["&*", "&x"]), Err(RuleError::ChannelsAfterAll));
        assert_eq!(sel(&["%X~a"]), Err(RuleError::Syntax));
        assert_eq!(sel(&["%RR~a"]), Err(RuleError::Syntax));
        assert_eq!(sel(&["~a\0b"]), Err(RuleError::Syntax));
        assert_eq!(sel(&["allkeys"]).unwrap().keys_string(), b"~*");
        assert_eq!(
            sel(&["&a", "&b", "&a"]).unwrap().channels_string(),
            b"&a &b"
        );
    }

    #[test]
    fn command_rules() {
        assert_eq!(sel(&["+nosuch"]), Err(RuleError::Unknown));
        assert_eq!(sel(&["+@nosuch"]), Err(RuleError::Unknown));
        assert_eq!(
            sel(&["+config|get|x"]),
            Err(RuleError::FirstArgOfSubcommand)
        );
        assert_eq!(sel(&["+select|"]), Err(RuleError::Syntax));
        assert_eq!(sel(&["+config|nosuch"]), Err(RuleError::Unknown));
        assert_eq!(sel(&["-select|0"]), Err(RuleError::Unknown));
        assert_eq!(sel(&["bogus"]), Err(RuleError::Syntax));
        assert_eq!(sel(&["+"]), Err(RuleError::Unknown));
        assert_eq!(sel(&["+@"]), Err(RuleError::Unknown));
        let s = sel(&["+select|0", "+SELECT|0", "+select|1"]).unwrap();
        assert_eq!(s.firstargs.values().next().unwrap().len(), 2);
        assert!(sel(&["+@ALL"]).unwrap().future);
    }
}
