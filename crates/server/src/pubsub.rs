//! Channels for PUBLISH/SUBSCRIBE. Needed first of all for RESP2 clients
//! that receive tracking invalidations through a REDIRECT to a connection
//! subscribed to `__redis__:invalidate`.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use parking_lot::Mutex;

use crate::clients::{Clients, Push};

pub const INVALIDATE_CHANNEL: &[u8] = b"__redis__:invalidate";

#[derive(Default)]
pub struct PubSub {
    channels: Mutex<HashMap<Bytes, HashSet<u64>>>,
}

impl PubSub {
    pub fn subscribe(&self, channel: Bytes, client: u64) {
        self.channels
            .lock()
            .entry(channel)
            .or_default()
            .insert(client);
    }

    pub fn unsubscribe(&self, channel: &[u8], client: u64) {
        let mut map = self.channels.lock();
        if let Some(set) = map.get_mut(channel) {
            set.remove(&client);
            if set.is_empty() {
                map.remove(channel);
            }
        }
    }

    /// Delivers to every subscriber; returns how many there were.
    pub fn publish(&self, clients: &Clients, channel: &[u8], payload: &[u8]) -> usize {
        let ids: Vec<u64> = self
            .channels
            .lock()
            .get(channel)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        if ids.is_empty() {
            return 0;
        }
        let (channel, payload) = (
            Bytes::copy_from_slice(channel),
            Bytes::copy_from_slice(payload),
        );
        for id in &ids {
            if let Some(c) = clients.get(*id) {
                c.push(Push::Message {
                    channel: channel.clone(),
                    payload: payload.clone(),
                });
            }
        }
        ids.len()
    }
}
