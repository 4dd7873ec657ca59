//! The pub/sub commands: (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE, PUBLISH,
//! SPUBLISH and PUBSUB, with Redis 7's replies. A RESP2 connection with any
//! subscription is in subscribed mode (see `Session::admit`).

use bytes::Bytes;
use cluster::broadcast::{Message, MessageKind};
use commands::args::owned;
use commands::CmdError;

use super::Scope;
use crate::session::{Reply, Session};

pub fn subscribe(s: &mut Session, scope: Scope, a: &[&[u8]], out: Reply) -> Result<(), CmdError> {
    let shared = s.shared.clone();
    for name in &a[1..] {
        let name = Bytes::copy_from_slice(name);
        let count = {
            let mut subs = shared.subs.lock();
            if subs.of(scope).insert(name.clone()) {
                s.node.pubsub.subscribe(scope, name.clone(), s.id);
            }
            s.subscriptions = subs.total();
            subs.count(scope)
        };
        out.push(3);
        out.bulk(scope.verbs().0);
        out.bulk(&name);
        out.int(count as i64);
    }
    Ok(())
}

/// Without names: from every subscription of that kind.
pub fn unsubscribe(s: &mut Session, scope: Scope, a: &[&[u8]], out: Reply) -> Result<(), CmdError> {
    let shared = s.shared.clone();
    let verb = scope.verbs().1;
    let names: Vec<Bytes> = if a.len() > 1 {
        a[1..].iter().map(|c| owned(c)).collect()
    } else {
        shared.subs.lock().of(scope).iter().cloned().collect()
    };
    if names.is_empty() {
        out.push(3);
        out.bulk(verb);
        out.null();
        out.int(shared.subs.lock().count(scope) as i64);
    }
    for name in names {
        let count = {
            let mut subs = shared.subs.lock();
            if subs.of(scope).remove(&name) {
                s.node.pubsub.unsubscribe(scope, &name, s.id);
            }
            s.subscriptions = subs.total();
            subs.count(scope)
        };
        out.push(3);
        out.bulk(verb);
        out.bulk(&name);
        out.int(count as i64);
    }
    Ok(())
}

/// Every subscription of the connection dropped, without replies (RESET,
/// the connection closing).
pub fn release_all(s: &mut Session) {
    let shared = s.shared.clone();
    let mut subs = shared.subs.lock();
    for scope in [Scope::Channel, Scope::Pattern, Scope::Shard] {
        for name in subs.of(scope).drain() {
            s.node.pubsub.unsubscribe(scope, &name, s.id);
        }
    }
    s.subscriptions = 0;
}

/// PUBLISH and SPUBLISH: this node's subscribers now, the site's through
/// the broadcast. The reply counts this node's receivers (Redis Cluster's
/// count too).
pub fn publish(
    s: &mut Session,
    kind: MessageKind,
    a: &[&[u8]],
    out: Reply,
) -> Result<(), CmdError> {
    let (node, channel, payload) = (&s.node, a[1], a[2]);
    let n = match kind {
        MessageKind::Publish => node.pubsub.publish(&node.clients, channel, payload),
        MessageKind::ShardPublish => node.pubsub.spublish(&node.clients, channel, payload),
    };
    if let Some(c) = &node.cluster {
        c.broadcast(&Message {
            kind,
            channel: owned(channel),
            payload: owned(payload),
        });
    }
    out.int(n as i64);
    Ok(())
}

/// PUBSUB CHANNELS|NUMSUB|NUMPAT|SHARDCHANNELS|SHARDNUMSUB|HELP, about this
/// node's subscribers (as Redis Cluster answers for its node).
pub fn pubsub(s: &mut Session, a: &[&[u8]], out: Reply) -> Result<(), CmdError> {
    let sub = String::from_utf8_lossy(a[1]).to_ascii_lowercase();
    let arity = |ok: bool| {
        if ok {
            Ok(())
        } else {
            Err(CmdError::WrongArity(format!("pubsub|{sub}")))
        }
    };
    let ps = &s.node.pubsub;
    match sub.as_str() {
        "channels" | "shardchannels" => {
            arity(a.len() <= 3)?;
            let scope = if sub == "channels" {
                Scope::Channel
            } else {
                Scope::Shard
            };
            let names = ps.names(scope, a.get(2).copied());
            out.array(names.len());
            for n in &names {
                out.bulk(n);
            }
        }
        "numsub" | "shardnumsub" => {
            let scope = if sub == "numsub" {
                Scope::Channel
            } else {
                Scope::Shard
            };
            out.array((a.len() - 2) * 2);
            for name in &a[2..] {
                out.bulk(name);
                out.int(ps.subscribers(scope, name) as i64);
            }
        }
        "numpat" => {
            arity(a.len() == 2)?;
            out.int(ps.patterns() as i64);
        }
        "help" => commands::help::reply(
            out,
            "PUBSUB",
            &[
                "CHANNELS [<pattern>]",
                "    Return the currently active channels matching a <pattern> (default: '*').",
                "NUMPAT",
                "    Return number of subscriptions to patterns.",
                "NUMSUB [<channel> ...]",
                "    Return the number of subscribers for the specified channels, excluding",
                "    pattern subscriptions(default: no channels).",
                "SHARDCHANNELS [<pattern>]",
                "    Return the currently active shard level channels matching a <pattern> (default: '*').",
                "SHARDNUMSUB [<shardchannel> ...]",
                "    Return the number of subscribers for the specified shard level channel(s)",
            ],
        ),
        _ => {
            return Err(CmdError::UnknownSubcommand {
                cmd: "PUBSUB".into(),
                sub: String::from_utf8_lossy(a[1]).into(),
            })
        }
    }
    Ok(())
}
