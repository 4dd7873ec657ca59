//! CLIENT subcommands: identity (ID, SETNAME, GETNAME, SETINFO, INFO, LIST),
//! KILL, UNBLOCK, and tracking (TRACKING, CACHING, TRACKINGINFO, GETREDIR).

use std::sync::atomic::Ordering;

use bytes::Bytes;
use commands::args::{int, is};
use commands::CmdError;

use crate::clients::{ClientShared, TrackingState, BLOCKED, UNBLOCK_ERROR, UNBLOCK_TIMEOUT};
use crate::session::{Reply, ReplyMode, Session};

pub fn client(s: &mut Session, a: &[&[u8]], out: Reply) -> Result<(), CmdError> {
    let sub = String::from_utf8_lossy(a[1]).to_ascii_lowercase();
    let arity = |ok: bool| {
        if ok {
            Ok(())
        } else {
            Err(CmdError::WrongArity(format!("client|{sub}")))
        }
    };
    match sub.as_str() {
        "id" => {
            arity(a.len() == 2)?;
            out.int(s.id as i64);
        }
        "setname" => {
            arity(a.len() == 3)?;
            valid_name(a[2])?;
            *s.shared.name.lock() = (!a[2].is_empty()).then(|| Bytes::copy_from_slice(a[2]));
            out.simple("OK");
        }
        "reply" => {
            arity(a.len() == 3)?;
            s.reply_mode = match String::from_utf8_lossy(a[2]).to_ascii_lowercase().as_str() {
                "on" => ReplyMode::On,
                "off" => ReplyMode::Off,
                "skip" => ReplyMode::Skip { armed: false },
                _ => return Err(CmdError::Syntax),
            };
            out.simple("OK");
        }
        "getname" => {
            arity(a.len() == 2)?;
            match &*s.shared.name.lock() {
                Some(n) => out.bulk(n),
                None => out.null(),
            }
        }
        "setinfo" => {
            arity(a.len() == 4)?;
            if valid_name(a[3]).is_err() {
                return Err(CmdError::other(format!(
                    "ERR {} cannot contain spaces, newlines or special characters.",
                    String::from_utf8_lossy(a[2])
                )));
            }
            let v = String::from_utf8_lossy(a[3]).into_owned();
            let mut lib = s.shared.lib.lock();
            if is(a[2], "LIB-NAME") {
                lib.0 = v;
            } else if is(a[2], "LIB-VER") {
                lib.1 = v;
            } else {
                return Err(CmdError::other(format!(
                    "ERR Unrecognized option '{}'",
                    String::from_utf8_lossy(a[2])
                )));
            }
            out.simple("OK");
        }
        "info" => {
            arity(a.len() == 2)?;
            let line = client_line(s, &s.shared, "client|info");
            out.verbatim("txt", line.as_bytes());
        }
        "list" => {
            let all = s.node.clients.all();
            let ids: Option<Vec<u64>> = match a.get(2) {
                Some(k) if is(k, "ID") && a.len() > 3 => Some(
                    a[3..]
                        .iter()
                        .map(|x| int(x).ok().filter(|id| *id > 0).map(|id| id as u64))
                        .collect::<Option<Vec<u64>>>()
                        .ok_or_else(|| CmdError::other("ERR Invalid client ID"))?,
                ),
                Some(k) if is(k, "TYPE") && a.len() == 4 => None,
                None => None,
                Some(_) => return Err(CmdError::Syntax),
            };
            let text: String = all
                .iter()
                .filter(|c| ids.as_ref().is_none_or(|ids| ids.contains(&c.id)))
                .map(|c| client_line(s, c, "client|list"))
                .collect();
            out.verbatim("txt", text.as_bytes());
        }
        "unblock" => {
            arity(a.len() >= 3)?;
            if a.len() > 4 {
                return Err(CmdError::SubcommandSyntax {
                    cmd: "CLIENT".into(),
                    sub: String::from_utf8_lossy(a[1]).into_owned(),
                });
            }
            let reason = match a.get(3) {
                None => UNBLOCK_TIMEOUT,
                Some(r) if is(r, "TIMEOUT") => UNBLOCK_TIMEOUT,
                Some(r) if is(r, "ERROR") => UNBLOCK_ERROR,
                Some(_) => {
                    return Err(CmdError::other(
                        "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
                    ))
                }
            };
            let id = int(a[2])?;
            out.int(u64::try_from(id).is_ok_and(|id| unblock(s, id, reason)) as i64);
        }
        "kill" => {
            arity(a.len() >= 3)?;
            kill(s, a, out)?
        }
        "tracking" => tracking(s, a, out)?,
        "caching" => {
            arity(a.len() == 3)?;
            let t = s.shared.tracking.lock().clone();
            if !t.on {
                return Err(CmdError::other(
                    "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled",
                ));
            }
            let yes = if is(a[2], "YES") {
                true
            } else if is(a[2], "NO") {
                false
            } else {
                return Err(CmdError::Syntax);
            };
            if (yes && !t.optin) || (!yes && !t.optout) {
                return Err(CmdError::other(if yes {
                    "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode."
                } else {
                    "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode."
                }));
            }
            s.set_caching(yes);
            out.simple("OK");
        }
        "getredir" => {
            arity(a.len() == 2)?;
            let t = s.shared.tracking.lock();
            out.int(if t.on { t.redirect as i64 } else { -1 });
        }
        "trackinginfo" => {
            arity(a.len() == 2)?;
            trackinginfo(s, out);
        }
        "no-evict" | "no-touch" => {
            arity(a.len() == 3)?;
            if !(is(a[2], "ON") || is(a[2], "OFF")) {
                return Err(CmdError::Syntax);
            }
            out.simple("OK");
        }
        _ => {
            return Err(CmdError::UnknownSubcommand {
                cmd: "CLIENT".into(),
                sub: String::from_utf8_lossy(a[1]).into(),
            })
        }
    }
    Ok(())
}

/// Names may not hold spaces, newlines or other special characters.
pub fn valid_name(name: &[u8]) -> Result<(), CmdError> {
    if name.iter().all(|&b| (b'!'..=b'~').contains(&b)) {
        Ok(())
    } else {
        Err(CmdError::other(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ))
    }
}

/// CLIENT UNBLOCK: a blocked client is woken to answer as `reason` says
/// ([`UNBLOCK_TIMEOUT`] or [`UNBLOCK_ERROR`]); false when it is not blocked.
fn unblock(s: &Session, id: u64, reason: u8) -> bool {
    let Some(c) = s.node.clients.get(id) else {
        return false;
    };
    let asked = c
        .block_state
        .compare_exchange(BLOCKED, reason, Ordering::AcqRel, Ordering::Acquire)
        .is_ok();
    if asked {
        c.unblock.notify_one();
    }
    asked
}

pub(crate) fn client_line(s: &Session, c: &ClientShared, current: &str) -> String {
    let name = c
        .name
        .lock()
        .as_ref()
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .unwrap_or_default();
    let lib = c.lib.lock().clone();
    let t = c.tracking.lock().clone();
    let mut flags = String::new();
    if c.block_state.load(Ordering::Relaxed) != crate::clients::NOT_BLOCKED {
        flags.push('b');
    }
    if t.on {
        flags.push('t');
    }
    if t.bcast {
        flags.push('B');
    }
    if c.subscribed() {
        flags.push('P');
    }
    if flags.is_empty() {
        flags.push('N');
    }
    let age = c.created.elapsed().as_secs();
    let subs = c.subs.lock();
    // The calling connection's buffer still holds the requests it is
    // running (Redis trims its query buffer after them).
    let (qbuf, qbuf_free) = if c.id == s.id {
        (s.qbuf, c.qbuf_free.load(Ordering::Relaxed))
    } else {
        (
            c.qbuf.load(Ordering::Relaxed),
            c.qbuf_free.load(Ordering::Relaxed),
        )
    };
    let cmd = if c.id == s.id {
        current
    } else {
        c.last_cmd_name()
    };
    format!(
        "id={} addr={} laddr={} fd=8 name={} age={} idle=0 flags={} db=0 sub={} psub={} ssub={} multi=-1 qbuf={} qbuf-free={} argv-mem=0 multi-mem=0 rbs=16384 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd={} user={} redir={} resp={} lib-name={} lib-ver={}\n",
        c.id,
        c.addr,
        c.laddr,
        name,
        age,
        flags,
        subs.channels.len(),
        subs.patterns.len(),
        subs.shard.len(),
        qbuf,
        qbuf_free,
        cmd,
        String::from_utf8_lossy(&c.user.lock()),
        if t.on { t.redirect as i64 } else { -1 },
        if c.resp3.load(Ordering::Relaxed) { 3 } else { 2 },
        lib.0,
        lib.1
    )
}

fn kill(s: &mut Session, a: &[&[u8]], out: Reply) -> Result<(), CmdError> {
    let all = s.node.clients.all();
    if a.len() == 3 {
        // Old form: CLIENT KILL addr:port.
        let addr = String::from_utf8_lossy(a[2]);
        let target = all
            .iter()
            .find(|c| c.addr.to_string() == addr)
            .ok_or(CmdError::other("ERR No such client"))?;
        target.kill();
        out.simple("OK");
        return Ok(());
    }
    if !a.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let mut skipme = true;
    type Filter = Box<dyn Fn(&ClientShared) -> bool>;
    let mut filters: Vec<Filter> = Vec::new();
    for pair in a[2..].chunks(2) {
        let (k, v) = (&pair[0], String::from_utf8_lossy(pair[1]).into_owned());
        if is(k, "ID") {
            let id = int(pair[1])
                .ok()
                .filter(|id| *id > 0)
                .ok_or_else(|| CmdError::other("ERR client-id should be greater than 0"))?;
            filters.push(Box::new(move |c| c.id as i64 == id));
        } else if is(k, "ADDR") {
            filters.push(Box::new(move |c| c.addr.to_string() == v));
        } else if is(k, "LADDR") {
            filters.push(Box::new(move |c| c.laddr.to_string() == v));
        } else if is(k, "SKIPME") {
            skipme = match v.to_ascii_lowercase().as_str() {
                "yes" => true,
                "no" => false,
                _ => return Err(CmdError::Syntax),
            };
        } else if is(k, "USER") {
            if v != "default" {
                return Err(CmdError::other(format!("ERR No such user '{v}'")));
            }
            filters.push(Box::new(|_| true));
        } else if is(k, "TYPE") {
            // Replicas here are site members, never client connections.
            let pubsub = match v.to_ascii_lowercase().as_str() {
                "normal" => false,
                "pubsub" => true,
                "master" | "replica" | "slave" => {
                    filters.push(Box::new(|_| false));
                    continue;
                }
                _ => return Err(CmdError::other(format!("ERR Unknown client type '{v}'"))),
            };
            filters.push(Box::new(move |c| c.subscribed() == pubsub));
        } else if is(k, "MAXAGE") {
            let age = int(pair[1])?;
            filters.push(Box::new(move |c| {
                c.created.elapsed().as_secs() as i64 >= age
            }));
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let mut n = 0;
    for c in all.iter().filter(|c| filters.iter().all(|f| f(c))) {
        if skipme && c.id == s.id {
            continue;
        }
        c.kill();
        n += 1;
    }
    out.int(n);
    Ok(())
}

fn tracking(s: &mut Session, a: &[&[u8]], out: Reply) -> Result<(), CmdError> {
    let on = if is(a[2], "ON") {
        true
    } else if is(a[2], "OFF") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    let mut new = TrackingState {
        on,
        ..Default::default()
    };
    let mut i = 3;
    while i < a.len() {
        let arg = &a[i];
        if is(arg, "REDIRECT") && i + 1 < a.len() {
            let id = int(a[i + 1])?;
            if id != s.id as i64 && s.node.clients.get(id as u64).is_none() {
                return Err(CmdError::other(
                    "ERR The client ID you want redirect to does not exist",
                ));
            }
            new.redirect = if id == s.id as i64 { 0 } else { id as u64 };
            i += 2;
            continue;
        } else if is(arg, "PREFIX") && i + 1 < a.len() {
            new.prefixes.push(Bytes::copy_from_slice(a[i + 1]));
            i += 2;
            continue;
        } else if is(arg, "BCAST") {
            new.bcast = true;
        } else if is(arg, "OPTIN") {
            new.optin = true;
        } else if is(arg, "OPTOUT") {
            new.optout = true;
        } else if is(arg, "NOLOOP") {
            new.noloop = true;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if !on {
        tracking_off(s);
        out.simple("OK");
        return Ok(());
    }
    let old = s.shared.tracking.lock().clone();
    if old.on && old.bcast != new.bcast {
        return Err(CmdError::other("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode."));
    }
    // Only a direct OPTIN <-> OPTOUT switch is refused (as Redis).
    if old.on && ((new.optin && old.optout) || (new.optout && old.optin)) {
        return Err(CmdError::other("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode."));
    }
    if !new.bcast && !new.prefixes.is_empty() {
        return Err(CmdError::other(
            "ERR PREFIX option requires BCAST mode to be enabled",
        ));
    }
    if new.optin && new.optout {
        return Err(CmdError::other(
            "ERR You can't specify both OPTIN mode and OPTOUT mode",
        ));
    }
    if new.bcast && (new.optin || new.optout) {
        return Err(CmdError::other(
            "ERR OPTIN and OPTOUT are not compatible with BCAST",
        ));
    }
    check_prefix_overlap(&old.prefixes, &new.prefixes)?;
    if old.on {
        s.node.tracking.disable(s.id);
        new.prefixes.extend(old.prefixes.iter().cloned());
        new.prefixes.dedup();
    }
    if new.bcast && new.prefixes.is_empty() {
        // BCAST without PREFIX: every key, i.e. the empty prefix.
        new.prefixes.push(Bytes::new());
    }
    s.node
        .tracking
        .enable(s.id, new.bcast.then_some(&new.prefixes[..]));
    *s.shared.tracking.lock() = new;
    s.set_tracking(true);
    out.simple("OK");
    Ok(())
}

fn check_prefix_overlap(old: &[Bytes], new: &[Bytes]) -> Result<(), CmdError> {
    let overlap = |p: &Bytes, q: &Bytes| p.starts_with(q) || q.starts_with(p);
    let err = |p: &Bytes, kind: &str, q: &Bytes| {
        CmdError::other(format!(
            "ERR Prefix '{}' overlaps with {kind} prefix '{}'. Prefixes for a single client must not overlap.",
            String::from_utf8_lossy(p),
            String::from_utf8_lossy(q)
        ))
    };
    for (i, p) in new.iter().enumerate() {
        if let Some(q) = old.iter().find(|q| *q != p && overlap(p, q)) {
            return Err(err(p, "an existing", q));
        }
        if let Some(q) = new
            .iter()
            .enumerate()
            .find(|(j, q)| *j != i && overlap(p, q))
            .map(|(_, q)| q)
        {
            return Err(err(p, "another provided", q));
        }
    }
    Ok(())
}

pub fn tracking_off(s: &mut Session) {
    let was_on = std::mem::take(&mut *s.shared.tracking.lock()).on;
    if was_on {
        s.node.tracking.disable(s.id);
    }
    s.set_tracking(false);
}

fn trackinginfo(s: &Session, out: Reply) {
    let t = s.shared.tracking.lock().clone();
    let mut flags: Vec<&str> = Vec::new();
    if !t.on {
        flags.push("off");
    } else {
        flags.push("on");
        if t.bcast {
            flags.push("bcast");
        }
        if t.optin {
            flags.push("optin");
            if s.caching == Some(true) {
                flags.push("caching-yes");
            }
        }
        if t.optout {
            flags.push("optout");
            if s.caching == Some(false) {
                flags.push("caching-no");
            }
        }
        if t.noloop {
            flags.push("noloop");
        }
        if t.redirect != 0 && s.node.clients.get(t.redirect).is_none() {
            flags.push("broken_redirect");
        }
    }
    out.map(3);
    out.bulk(b"flags");
    out.set(flags.len());
    for f in flags {
        out.bulk(f.as_bytes());
    }
    out.bulk(b"redirect");
    out.int(if t.on { t.redirect as i64 } else { -1 });
    out.bulk(b"prefixes");
    out.array(t.prefixes.len());
    for p in &t.prefixes {
        out.bulk(p);
    }
}
