//! Blocked clients (BZPOPMIN, BZPOPMAX, BZMPOP; BLPOP and the other list
//! forms when lists come): a registry of key → the clients waiting for it,
//! first blocked first, as Redis serves them.
//!
//! A blocking command that finds nothing to take tells the session which
//! keys it waits for ([`commands::Wait`]); the session registers them here
//! and stops running the connection's requests (those pipelined after it
//! wait, as in Redis). The keyspace tells the registry of every changed
//! key, from any source (commands, replication, WAN, restores), as it tells
//! client tracking ([`Observers`]); the registry wakes the first client
//! waiting for each changed key. The woken connection runs the command
//! again under the key's lock ([`commands::BlockMode::Retry`]): another
//! client may have taken the members, and then it waits again, keeping its
//! place. A client served leaves the registry and wakes the next client of
//! its keys, which finds what is left (or nothing, and waits again).
//!
//! Entries live only while their client waits: it leaves the registry
//! when it is served, times out, is unblocked (CLIENT UNBLOCK) or
//! disconnects; a key nobody waits for has no entry.
//!
//! No wake-up is lost: the keyspace decides whether to notify under the
//! partition lock a write holds (or after the change, for remote ones), and
//! a client that registers runs its command once more afterwards (it wakes
//! itself), so a change either is seen by that run or notifies it.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use keyspace::ChangeObserver;
use parking_lot::Mutex;

use crate::clients::Clients;
use crate::tracking::Tracking;

pub struct Blocking {
    clients: Arc<Clients>,
    /// key → ids of the clients waiting for it, first blocked first.
    waiting: Mutex<HashMap<Bytes, VecDeque<u64>, ahash::RandomState>>,
    /// Clients blocked (INFO `blocked_clients`).
    blocked: AtomicUsize,
}

impl Blocking {
    pub fn new(clients: Arc<Clients>) -> Self {
        Blocking {
            clients,
            waiting: Mutex::new(HashMap::default()),
            blocked: AtomicUsize::new(0),
        }
    }

    /// `client` waits for `keys` (each once), behind those already waiting.
    pub fn block(&self, client: u64, keys: &[Bytes]) {
        let mut waiting = self.waiting.lock();
        for k in keys {
            waiting.entry(k.clone()).or_default().push_back(client);
        }
        self.blocked.fetch_add(1, Ordering::Relaxed);
    }

    /// `client` waits no more (served, timed out, unblocked, gone). The
    /// clients now first for its keys are woken: one may have been woken
    /// for a change this client left untaken.
    pub fn unblock(&self, client: u64, keys: &[Bytes]) {
        let mut fronts = Vec::new();
        {
            let mut waiting = self.waiting.lock();
            for k in keys {
                if let Some(queue) = waiting.get_mut(k) {
                    queue.retain(|&id| id != client);
                    match queue.front() {
                        None => {
                            waiting.remove(k);
                        }
                        Some(&id) => fronts.push(id),
                    }
                }
            }
            self.blocked.fetch_sub(1, Ordering::Relaxed);
        }
        self.wake(fronts);
    }

    /// Clients blocked now.
    pub fn blocked(&self) -> usize {
        self.blocked.load(Ordering::Relaxed)
    }

    /// Keys some client waits for (a test's way to see that nothing is
    /// left behind).
    pub fn keys(&self) -> usize {
        self.waiting.lock().len()
    }

    /// Wakes the first client waiting for each of `keys`.
    pub fn signal(&self, keys: &[Bytes]) {
        let fronts: Vec<u64> = {
            let waiting = self.waiting.lock();
            keys.iter()
                .filter_map(|k| waiting.get(k)?.front().copied())
                .collect()
        };
        self.wake(fronts);
    }

    fn wake(&self, mut ids: Vec<u64>) {
        ids.sort_unstable();
        ids.dedup();
        for id in ids {
            if let Some(c) = self.clients.get(id) {
                c.unblock.notify_one();
            }
        }
    }
}

impl ChangeObserver for Blocking {
    fn active(&self) -> bool {
        self.blocked() > 0
    }

    fn changed(&self, keys: &[Bytes], _origin: u64) {
        self.signal(keys);
    }

    /// FLUSHALL only removes: nothing for a waiting client to take.
    fn flushed(&self, _origin: u64) {}
}

/// What the keyspace tells of changes goes to client tracking and to the
/// blocked clients (the keyspace has one observer).
pub struct Observers {
    pub tracking: Arc<Tracking>,
    pub blocking: Arc<Blocking>,
}

impl ChangeObserver for Observers {
    fn active(&self) -> bool {
        self.tracking.active() || self.blocking.active()
    }

    fn changed(&self, keys: &[Bytes], origin: u64) {
        if self.tracking.active() {
            self.tracking.changed(keys, origin);
        }
        if self.blocking.active() {
            self.blocking.changed(keys, origin);
        }
    }

    fn flushed(&self, origin: u64) {
        if self.tracking.active() {
            self.tracking.flushed(origin);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_go_when_their_clients_do() {
        let b = Blocking::new(Arc::new(Clients::default()));
        let (k1, k2) = (Bytes::from_static(b"k1"), Bytes::from_static(b"k2"));
        b.block(1, &[k1.clone(), k2.clone()]);
        b.block(2, std::slice::from_ref(&k1));
        assert_eq!((b.blocked(), b.keys()), (2, 2));
        assert_eq!(b.waiting.lock()[&k1], [1, 2]);
        b.unblock(1, &[k1.clone(), k2.clone()]);
        assert_eq!((b.blocked(), b.keys()), (1, 1));
        assert_eq!(b.waiting.lock()[&k1], [2]);
        b.unblock(2, &[k1]);
        assert_eq!((b.blocked(), b.keys()), (0, 0));
        assert!(!b.active());
    }
}
