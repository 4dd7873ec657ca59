//! `ACL` (Redis 7.0's subcommands), the per-command permission check of
//! the admission pipeline, and the ACL LOG entries refusals leave.
//!
//! Changes (SETUSER, DELUSER, LOAD) are [`AclChange`]s: applied to this
//! node's users at once, and in a site also committed through the site's
//! metadata, so every member installs the same users (see
//! [`crate::site_acl`]).

use std::sync::Arc;

use acl::{Denied, LogContext, LogReason, User};
use commands::args::is;
use commands::{CmdError, CommandSpec};
use keyspace::clock::Clock;

use crate::session::{Reply, Session};

pub use cluster::metadata::site_acl::AclChange;

const HELP: &[&str] = &[
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
];

const NO_ACLFILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

/// Subcommands and their arity (Redis's: with `ACL`, negative: at least).
const SUBCOMMANDS: &[(&str, i32)] = &[
    ("cat", -2),
    ("deluser", -3),
    ("dryrun", -4),
    ("genpass", -2),
    ("getuser", 3),
    ("help", 2),
    ("list", 2),
    ("load", 2),
    ("log", -2),
    ("save", 2),
    ("setuser", -3),
    ("users", 2),
    ("whoami", 2),
];

pub fn acl(s: &mut Session, a: &[&[u8]], out: Reply) -> Result<(), CmdError> {
    let sub = a[1];
    let n = a.len();
    let Some(&(name, arity)) = SUBCOMMANDS.iter().find(|(name, _)| is(sub, name)) else {
        return Err(CmdError::other(format!(
            "ERR unknown subcommand '{}'. Try ACL HELP.",
            String::from_utf8_lossy(&sub[..sub.len().min(128)])
        )));
    };
    if (arity >= 0 && n as i32 != arity) || (arity < 0 && (n as i32) < -arity) {
        return Err(CmdError::WrongArity(format!("acl|{name}")));
    }
    let users = &s.node.users;
    if is(sub, "SETUSER") && n >= 3 {
        let change = AclChange::SetUser {
            name: a[2].to_vec(),
            rules: a[3..].iter().map(|r| r.to_vec()).collect(),
        };
        s.change_users(change)?;
        out.simple("OK");
    } else if is(sub, "DELUSER") && n >= 3 {
        let change = AclChange::DelUser {
            names: a[2..].iter().map(|r| r.to_vec()).collect(),
        };
        let deleted = s.change_users(change)?;
        out.int(deleted as i64);
    } else if is(sub, "GETUSER") && n == 3 {
        match users.user(a[2]) {
            Some(u) => getuser(&u, out),
            None => out.null(),
        }
    } else if (is(sub, "LIST") || is(sub, "USERS")) && n == 2 {
        let acl = users.current();
        let lines = if is(sub, "USERS") {
            acl.users()
        } else {
            acl.list()
        };
        out.array(lines.len());
        for l in lines {
            out.bulk(&l);
        }
    } else if is(sub, "WHOAMI") && n == 2 {
        out.bulk(s.user.name());
    } else if users.file.is_none() && n == 2 && (is(sub, "LOAD") || is(sub, "SAVE")) {
        return Err(CmdError::other(NO_ACLFILE));
    } else if is(sub, "LOAD") && n == 2 {
        let path = users.file.clone().unwrap_or_default();
        let text = std::fs::read(&path).map_err(|e| {
            CmdError::other(format!(
                "ERR Error loading ACLs, opening file '{}': {e}",
                path.display()
            ))
        })?;
        s.change_users(AclChange::Load {
            text,
            file: path.display().to_string(),
        })?;
        out.simple("OK");
    } else if is(sub, "SAVE") && n == 2 {
        save(s).map_err(|e| {
            tracing::warn!("ACL SAVE: {e}");
            CmdError::other("ERR There was an error trying to save the ACLs. Please check the server logs for more information")
        })?;
        out.simple("OK");
    } else if is(sub, "CAT") && n == 2 {
        let cats = acl::categories();
        out.array(cats.len());
        for c in cats {
            out.bulk(c.as_bytes());
        }
    } else if is(sub, "CAT") && n == 3 {
        let Some(names) = acl::commands_in(a[2]) else {
            return Err(CmdError::other(format!(
                "ERR Unknown category '{}'",
                String::from_utf8_lossy(&a[2][..a[2].len().min(128)])
            )));
        };
        out.array(names.len());
        for name in names {
            out.bulk(name.as_bytes());
        }
    } else if is(sub, "GENPASS") && (n == 2 || n == 3) {
        let bits = match a.get(2) {
            Some(b) => Some(commands::args::int(b)?),
            None => None,
        };
        let pass = acl::genpass(bits).map_err(|e| CmdError::other(e.to_string()))?;
        out.bulk(pass.as_bytes());
    } else if is(sub, "LOG") && (n == 2 || n == 3) {
        log(s, a, out)?;
    } else if is(sub, "DRYRUN") && n >= 4 {
        dryrun(s, &a[2..], out)?;
    } else if is(sub, "HELP") && n == 2 {
        commands::help::reply(out, "ACL", HELP);
    } else {
        return Err(CmdError::other(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try ACL HELP.",
            String::from_utf8_lossy(sub)
        )));
    }
    Ok(())
}

fn getuser(u: &User, out: Reply) {
    let selectors = u.selectors();
    out.map(6);
    out.bulk(b"flags");
    let flags = u.flags();
    out.set(flags.len());
    for f in flags {
        out.bulk(f.as_bytes());
    }
    out.bulk(b"passwords");
    out.array(u.passwords().len());
    for p in u.passwords() {
        out.bulk(p.as_bytes());
    }
    selector_fields(u.root(), out);
    out.bulk(b"selectors");
    out.array(selectors.len());
    for sel in selectors {
        out.map(3);
        selector_fields(sel, out);
    }
}

/// commands, keys, channels of one selector (three pairs).
fn selector_fields(sel: &acl::Selector, out: Reply) {
    out.bulk(b"commands");
    out.bulk(&sel.commands_string());
    out.bulk(b"keys");
    out.bulk(&sel.keys_string());
    out.bulk(b"channels");
    out.bulk(&sel.channels_string());
}

fn log(s: &Session, a: &[&[u8]], out: Reply) -> Result<(), CmdError> {
    let mut count = 10usize;
    if let Some(arg) = a.get(2) {
        if is(arg, "RESET") {
            s.node.users.log.lock().reset();
            out.simple("OK");
            return Ok(());
        }
        count = commands::args::int(arg)?.max(0) as usize;
    }
    let now = keyspace::clock::SystemClock.now_ms();
    let log = s.node.users.log.lock();
    let entries: Vec<_> = log.entries().take(count).collect();
    out.array(entries.len());
    for e in entries {
        out.map(7);
        out.bulk(b"count");
        out.int(e.count as i64);
        out.bulk(b"reason");
        out.bulk(e.reason.as_str().as_bytes());
        out.bulk(b"context");
        out.bulk(e.context.as_str().as_bytes());
        out.bulk(b"object");
        out.bulk(&e.object);
        out.bulk(b"username");
        out.bulk(&e.username);
        out.bulk(b"age-seconds");
        out.double(e.age_seconds(now));
        out.bulk(b"client-info");
        out.bulk(&e.client_info);
    }
    Ok(())
}

fn dryrun(s: &Session, a: &[&[u8]], out: Reply) -> Result<(), CmdError> {
    let acl = s.node.users.current();
    let Some(user) = acl.get(a[0]) else {
        return Err(CmdError::other(format!(
            "ERR User '{}' not found",
            String::from_utf8_lossy(a[0])
        )));
    };
    let args = &a[1..];
    let Some(spec) = commands::lookup(args[0]) else {
        return Err(CmdError::other(format!(
            "ERR Command '{}' not found",
            String::from_utf8_lossy(args[0])
        )));
    };
    if !spec.arity_ok(args.len()) {
        return Err(CmdError::WrongArity(spec.name.into()));
    }
    match user.check(spec, args) {
        Ok(()) => out.simple("OK"),
        Err(d) => out.bulk(d.dryrun_message(args).as_bytes()),
    }
    Ok(())
}

/// ACL SAVE: the users in the ACL file's format, written to a temporary
/// file beside it and renamed over it (as Redis).
fn save(s: &Session) -> std::io::Result<()> {
    let Some(path) = &s.node.users.file else {
        return Ok(());
    };
    let text = s.node.users.current().to_file();
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&tmp, &text)?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Where a command runs, for the ACL LOG.
pub fn context(s: &Session) -> LogContext {
    if s.in_script {
        LogContext::Lua
    } else if s.tx.in_multi() || s.in_exec {
        LogContext::Multi
    } else {
        LogContext::Toplevel
    }
}

/// Adds an ACL LOG entry for this client.
pub fn log_entry(
    s: &Session,
    current: &str,
    reason: LogReason,
    context: LogContext,
    object: &[u8],
    username: &[u8],
) {
    let info = crate::client_cmd::client_line(s, &s.shared, current);
    let info = info.trim_end_matches('\n');
    let now = keyspace::clock::SystemClock.now_ms();
    s.node
        .users
        .log
        .lock()
        .add(reason, context, object, username, info.as_bytes(), now);
}

/// The permission check of the admission pipeline: Ok, or the refusal
/// (logged) as the error the client gets.
pub fn check(s: &mut Session, spec: &'static CommandSpec, args: &[&[u8]]) -> Result<(), Denied> {
    let ctx = context(s);
    check_in(s, spec, args, ctx)
}

/// [`check`] in an explicit context (EXEC's commands are `multi`).
pub fn check_in(
    s: &mut Session,
    spec: &'static CommandSpec,
    args: &[&[u8]],
    ctx: LogContext,
) -> Result<(), Denied> {
    s.refresh_user();
    let denied = match s.user.check(spec, args) {
        Ok(()) => return Ok(()),
        Err(d) => d,
    };
    let user: Arc<User> = s.user.clone();
    log_entry(
        s,
        spec.name,
        LogReason::from(&denied),
        ctx,
        &denied.object(args),
        user.name(),
    );
    Err(denied)
}

/// After a change to the users: ends the connections of users that no
/// longer exist, and subscribers whose user lost a channel or pattern
/// they listen to (as Redis's ACLKillPubsubClientsIfNeeded).
///
/// `reloaded` (ACL LOAD): every user but `default` was replaced, and
/// their connections end, as Redis frees the old users' clients.
pub fn enforce(node: &crate::node::Node, reloaded: bool) {
    let acl = node.users.current();
    for c in node.clients.all() {
        let name = c.user.lock().clone();
        if reloaded && &name[..] != b"default" {
            c.kill();
            continue;
        }
        let Some(user) = acl.get(&name) else {
            c.kill();
            continue;
        };
        let subs = c.subs.lock();
        let lost = subs
            .channels
            .iter()
            .any(|ch| !user.check_channel(ch, false))
            || subs.shard.iter().any(|ch| !user.check_channel(ch, false))
            || subs.patterns.iter().any(|p| !user.check_channel(p, true));
        drop(subs);
        if lost {
            c.kill();
        }
    }
}

/// Why a script's command was refused (Redis's getAclErrorMessage).
pub fn refusal_reason(denied: &Denied) -> &'static str {
    match denied {
        Denied::Command(_) => "can't run this command or subcommand",
        Denied::Key(_) => {
            "can't access at least one of the keys mentioned in the command arguments"
        }
        Denied::Channel(_) => "can't publish to the channel mentioned in the command",
    }
}
