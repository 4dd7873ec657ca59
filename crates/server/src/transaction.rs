//! MULTI / EXEC / DISCARD / WATCH / UNWATCH.
//!
//! Commands after MULTI are checked (lookup, arity, auth, memory) and
//! queued; an error while queueing makes EXEC fail with EXECABORT, as in
//! Redis. EXEC holds the node's exec gate exclusively, so no other client's
//! command runs between the queued ones. WATCH remembers each key's version
//! (every write gives a key a new version, deletion and expiry remove it),
//! so EXEC aborts exactly when a watched key changed. A string where
//! partitions merge with other sites keeps its version while PFADD raises
//! its registers or SETBIT 1 sets its bits (`DeltaOp::HllMax`, `BitsOr`):
//! for every string the bytes' hash is kept too. Any string may be a
//! bitmap (there is no type), so all are hashed, at WATCH and at EXEC: a
//! cost linear in the watched string's length (a fast hash, the order of
//! a GET of it), and no memory per key.

use bytes::Bytes;
use commands::{CmdError, CommandSpec, Flags};
use keyspace::Version;

use crate::session::{borrowed, Reply, Session};

#[derive(Default)]
pub struct TxState {
    /// Some while between MULTI and EXEC/DISCARD.
    pub queued: Option<Vec<(&'static CommandSpec, Vec<Bytes>)>>,
    /// An error happened while queueing.
    pub dirty: bool,
    pub watched: Vec<(Bytes, Option<(Version, u64)>)>,
}

impl TxState {
    pub fn in_multi(&self) -> bool {
        self.queued.is_some()
    }

    pub fn clear(&mut self) {
        *self = TxState::default();
    }
}

/// Commands that act on the transaction itself instead of being queued.
pub fn is_control(spec: &CommandSpec) -> bool {
    matches!(
        spec.name,
        "multi" | "exec" | "discard" | "watch" | "quit" | "reset"
    )
}

pub fn multi(s: &mut Session, out: Reply) -> Result<(), CmdError> {
    if s.tx.in_multi() {
        return Err(CmdError::other("ERR MULTI calls can not be nested"));
    }
    s.tx.queued = Some(Vec::new());
    out.simple("OK");
    Ok(())
}

pub fn discard(s: &mut Session, out: Reply) -> Result<(), CmdError> {
    if !s.tx.in_multi() {
        return Err(CmdError::other("ERR DISCARD without MULTI"));
    }
    s.tx.clear();
    out.simple("OK");
    Ok(())
}

pub fn watch(s: &mut Session, a: &[&[u8]], out: Reply) -> Result<(), CmdError> {
    if s.tx.in_multi() {
        return Err(CmdError::other("ERR WATCH inside MULTI is not allowed"));
    }
    for key in &a[1..] {
        let version = s.node.ks.txn([&key[..]], s.id).get(key).map(stamp);
        s.tx.watched.push((Bytes::copy_from_slice(key), version));
    }
    out.simple("OK");
    Ok(())
}

pub fn unwatch(s: &mut Session, out: Reply) -> Result<(), CmdError> {
    s.tx.watched.clear();
    out.simple("OK");
    Ok(())
}

pub fn exec(s: &mut Session, out: Reply) -> Result<(), CmdError> {
    let caching = s.caching.take();
    let Some(queued) = s.tx.queued.take() else {
        return Err(CmdError::other("ERR EXEC without MULTI"));
    };
    let dirty = s.tx.dirty;
    let watched = std::mem::take(&mut s.tx.watched);
    s.tx.clear();
    if dirty {
        return Err(CmdError::other(
            "EXECABORT Transaction discarded because of previous errors.",
        ));
    }
    let node = s.node.clone();
    // What changed since the commands were queued: memory over maxmemory,
    // too few replicas (as Redis rejects the EXEC).
    for (spec, args) in &queued {
        let refused = if spec.flags.has(Flags::DENYOOM) && !node.make_room() {
            Err(CmdError::Oom)
        } else {
            s.enough_replicas(spec, &borrowed(args))
        };
        if let Err(e) = refused {
            return Err(CmdError::other(format!(
                "EXECABORT Transaction discarded because of: {}",
                e.to_string().trim_end_matches('.').to_string() + "."
            )));
        }
    }
    let _exclusive = node.exec_gate.exclusive();
    // Routing may have changed since the commands were queued (a slot was
    // handed to another node): check again under the gate.
    if let Some(cluster) = &node.cluster {
        for (spec, args) in &queued {
            cluster.check(spec, &borrowed(args), s.readonly, s.shared.tls)?;
        }
    }
    let changed = watched.iter().any(|(key, version)| {
        let now = node.ks.txn([&key[..]], s.id).get(key).map(stamp);
        now != *version
    });
    if changed {
        out.null_array();
        return Ok(());
    }
    out.array(queued.len());
    // CLIENT CACHING before MULTI covers every read of the transaction.
    // A blocking command inside the transaction answers at once.
    s.in_exec = true;
    for (spec, args) in queued {
        s.caching = caching;
        let args = borrowed(&args);
        // ACLs may have changed since the command was queued.
        if let Err(denied) = crate::acl_cmd::check_in(s, spec, &args, acl::LogContext::Multi) {
            out.error(&format!(
                "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {}",
                match denied {
                    acl::Denied::Command(_) => "no permission to execute the command or subcommand",
                    acl::Denied::Key(_) => "no permission to touch the specified keys",
                    acl::Denied::Channel(_) =>
                        "no permission to access one of the channels used as arguments",
                }
            ));
            continue;
        }
        s.run(spec, &args, out);
    }
    s.in_exec = false;
    s.caching = None;
    Ok(())
}

/// What tells a watched key's value changed: its version, and for a
/// string (whose raises keep the version) a hash of its bytes.
fn stamp(e: &keyspace::Entry) -> (Version, u64) {
    let hash = match &e.value {
        keyspace::Value::Str(b) => ahash::RandomState::with_seeds(1, 2, 3, 4).hash_one(&b[..]),
        _ => 0,
    };
    (e.version, hash)
}
