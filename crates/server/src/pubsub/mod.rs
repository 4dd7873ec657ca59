//! Pub/sub: who listens to what on this node, and delivery to them.
//!
//! Three kinds of subscription, as Redis 7: channels (SUBSCRIBE), glob
//! patterns (PSUBSCRIBE) and shard channels (SSUBSCRIBE, routed by the
//! channel's slot like a key). PUBLISH and SPUBLISH deliver here and are
//! sent to every other member of the site ([`cluster::broadcast`]), whose
//! nodes deliver them to their own subscribers; the count a publisher gets
//! back is of this node's receivers, as in Redis Cluster. The commands are
//! in [`commands`]. Tracking invalidations reach RESP2 clients through
//! [`INVALIDATE_CHANNEL`].

pub mod commands;

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use keyspace::glob::glob_match;
use parking_lot::Mutex;

use crate::clients::{Clients, Push};

pub const INVALIDATE_CHANNEL: &[u8] = b"__redis__:invalidate";

/// The kind of a subscription.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Channel,
    Pattern,
    Shard,
}

impl Scope {
    /// The verbs of its replies: (subscribe, unsubscribe).
    pub fn verbs(self) -> (&'static [u8], &'static [u8]) {
        match self {
            Scope::Channel => (b"subscribe", b"unsubscribe"),
            Scope::Pattern => (b"psubscribe", b"punsubscribe"),
            Scope::Shard => (b"ssubscribe", b"sunsubscribe"),
        }
    }
}

/// One client's subscriptions (kept with the client, see `ClientShared`).
#[derive(Debug, Default)]
pub struct Subscriptions {
    pub channels: HashSet<Bytes>,
    pub patterns: HashSet<Bytes>,
    pub shard: HashSet<Bytes>,
}

impl Subscriptions {
    pub fn of(&mut self, scope: Scope) -> &mut HashSet<Bytes> {
        match scope {
            Scope::Channel => &mut self.channels,
            Scope::Pattern => &mut self.patterns,
            Scope::Shard => &mut self.shard,
        }
    }

    /// The count a (un)subscribe reply carries: channels and patterns
    /// together, shard channels apart (as Redis).
    pub fn count(&self, scope: Scope) -> usize {
        match scope {
            Scope::Shard => self.shard.len(),
            _ => self.channels.len() + self.patterns.len(),
        }
    }

    pub fn total(&self) -> usize {
        self.channels.len() + self.patterns.len() + self.shard.len()
    }
}

type Registry = Mutex<HashMap<Bytes, HashSet<u64>>>;

#[derive(Default)]
pub struct PubSub {
    channels: Registry,
    patterns: Registry,
    shard: Registry,
}

impl PubSub {
    fn registry(&self, scope: Scope) -> &Registry {
        match scope {
            Scope::Channel => &self.channels,
            Scope::Pattern => &self.patterns,
            Scope::Shard => &self.shard,
        }
    }

    pub fn subscribe(&self, scope: Scope, name: Bytes, client: u64) {
        self.registry(scope)
            .lock()
            .entry(name)
            .or_default()
            .insert(client);
    }

    pub fn unsubscribe(&self, scope: Scope, name: &[u8], client: u64) {
        let mut map = self.registry(scope).lock();
        if let Some(set) = map.get_mut(name) {
            set.remove(&client);
            if set.is_empty() {
                map.remove(name);
            }
        }
    }

    /// PUBLISH on this node: to the channel's subscribers and to every
    /// client whose pattern matches (once per pattern, as Redis). Returns
    /// how many receivers there were.
    pub fn publish(&self, clients: &Clients, channel: &[u8], payload: &[u8]) -> usize {
        let direct: Vec<u64> = self
            .channels
            .lock()
            .get(channel)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        let matched: Vec<(Bytes, Vec<u64>)> = self
            .patterns
            .lock()
            .iter()
            .filter(|(p, _)| glob_match(p, channel))
            .map(|(p, s)| (p.clone(), s.iter().copied().collect()))
            .collect();
        if direct.is_empty() && matched.is_empty() {
            return 0;
        }
        let channel = Bytes::copy_from_slice(channel);
        let payload = Bytes::copy_from_slice(payload);
        let mut n = direct.len();
        for id in direct {
            if let Some(c) = clients.get(id) {
                c.push(Push::Message {
                    channel: channel.clone(),
                    payload: payload.clone(),
                });
            }
        }
        for (pattern, ids) in matched {
            n += ids.len();
            for id in ids {
                if let Some(c) = clients.get(id) {
                    c.push(Push::PatternMessage {
                        pattern: pattern.clone(),
                        channel: channel.clone(),
                        payload: payload.clone(),
                    });
                }
            }
        }
        n
    }

    /// SPUBLISH on this node: to the shard channel's subscribers.
    pub fn spublish(&self, clients: &Clients, channel: &[u8], payload: &[u8]) -> usize {
        let ids: Vec<u64> = self
            .shard
            .lock()
            .get(channel)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        let (channel, payload) = (
            Bytes::copy_from_slice(channel),
            Bytes::copy_from_slice(payload),
        );
        for id in &ids {
            if let Some(c) = clients.get(*id) {
                c.push(Push::ShardMessage {
                    channel: channel.clone(),
                    payload: payload.clone(),
                });
            }
        }
        ids.len()
    }

    /// PUBSUB CHANNELS / SHARDCHANNELS: the names with subscribers here,
    /// matching `pattern` when given.
    pub fn names(&self, scope: Scope, pattern: Option<&[u8]>) -> Vec<Bytes> {
        self.registry(scope)
            .lock()
            .keys()
            .filter(|c| pattern.is_none_or(|p| glob_match(p, c)))
            .cloned()
            .collect()
    }

    /// PUBSUB NUMSUB / SHARDNUMSUB: subscribers of `name` here.
    pub fn subscribers(&self, scope: Scope, name: &[u8]) -> usize {
        self.registry(scope).lock().get(name).map_or(0, |s| s.len())
    }

    /// Anyone subscribed to anything here.
    pub fn has_subscribers(&self) -> bool {
        !self.channels.lock().is_empty()
            || !self.patterns.lock().is_empty()
            || !self.shard.lock().is_empty()
    }

    /// Up to `max` clients subscribed to anything here; none when there
    /// are more.
    pub fn subscriber_ids(&self, max: usize) -> Vec<u64> {
        let mut ids: Vec<u64> = Vec::new();
        for registry in [&self.channels, &self.patterns, &self.shard] {
            for set in registry.lock().values() {
                ids.extend(set.iter().copied());
                if ids.len() > max * 4 {
                    return Vec::new();
                }
            }
        }
        ids.sort_unstable();
        ids.dedup();
        if ids.len() > max {
            ids.clear();
        }
        ids
    }

    /// PUBSUB NUMPAT: patterns with subscribers here.
    pub fn patterns(&self) -> usize {
        self.patterns.lock().len()
    }
}
