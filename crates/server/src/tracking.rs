//! Client tracking (the server side of near caches), as Redis 6+: clients
//! that read a key in default mode are remembered per key; BCAST clients
//! register prefixes. On any change of a key, from any source (commands,
//! expiry, and later backups and WAN), the keyspace tells us and we push an
//! invalidation to each interested client (or its REDIRECT target) once,
//! after which the key must be read again to be tracked again.
//!
//! Memory is bounded: past `max_keys` remembered keys, the oldest are
//! invalidated early, which costs clients a re-read, never a stale value.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use indexmap::IndexMap;
use keyspace::ChangeObserver;
use parking_lot::{Mutex, RwLock};

use crate::clients::{Clients, Push};

pub struct Tracking {
    clients: Arc<Clients>,
    /// key -> client ids that read it (default mode).
    keys: Mutex<IndexMap<Bytes, Vec<u64>, ahash::RandomState>>,
    /// (prefix, client id) for BCAST clients; empty prefix matches all.
    prefixes: RwLock<Vec<(Bytes, u64)>>,
    enabled: AtomicUsize,
    /// `tracking-table-max-keys` (0: no limit, as Redis).
    max_keys: AtomicUsize,
}

impl Tracking {
    pub fn new(clients: Arc<Clients>, max_keys: usize) -> Self {
        Tracking {
            clients,
            keys: Mutex::new(IndexMap::default()),
            prefixes: RwLock::new(Vec::new()),
            enabled: AtomicUsize::new(0),
            max_keys: AtomicUsize::new(max_keys),
        }
    }

    /// A client turned tracking on (BCAST prefixes registered here).
    pub fn enable(&self, client: u64, bcast_prefixes: Option<&[Bytes]>) {
        self.enabled.fetch_add(1, Ordering::Relaxed);
        if let Some(prefixes) = bcast_prefixes {
            let mut all = self.prefixes.write();
            all.extend(prefixes.iter().map(|p| (p.clone(), client)));
        }
    }

    /// A client turned tracking off or went away. Its remembered keys are
    /// dropped lazily: a later change finds the client no longer tracking.
    pub fn disable(&self, client: u64) {
        self.enabled.fetch_sub(1, Ordering::Relaxed);
        self.prefixes.write().retain(|(_, c)| *c != client);
    }

    pub fn max_keys(&self) -> usize {
        self.max_keys.load(Ordering::Relaxed)
    }

    /// CONFIG SET tracking-table-max-keys: keys over it are invalidated
    /// (oldest first) at the next read that is remembered.
    pub fn set_max_keys(&self, n: usize) {
        self.max_keys.store(n, Ordering::Relaxed);
    }

    pub fn tracked_keys(&self) -> usize {
        self.keys.lock().len()
    }

    /// Remembers that `client` read `keys` (default mode).
    pub fn remember(&self, client: u64, keys: &[Bytes]) {
        let mut evicted = Vec::new();
        {
            let mut table = self.keys.lock();
            for k in keys {
                let ids = table.entry(k.clone()).or_default();
                if !ids.contains(&client) {
                    ids.push(client);
                }
            }
            let max = match self.max_keys.load(Ordering::Relaxed) {
                0 => usize::MAX,
                n => n,
            };
            while table.len() > max {
                if let Some((k, ids)) = table.shift_remove_index(0) {
                    evicted.push((k, ids));
                }
            }
        }
        for (k, ids) in evicted {
            self.deliver(ids.into_iter().map(|id| (id, k.clone())), 0);
        }
    }

    /// Sends each (client, key) invalidation to the right place, grouped
    /// into one push per destination.
    fn deliver(&self, targets: impl Iterator<Item = (u64, Bytes)>, origin: u64) {
        let mut by_dest: HashMap<u64, Vec<Bytes>> = HashMap::new();
        let mut broken: Vec<(u64, u64)> = Vec::new();
        for (id, key) in targets {
            let Some(c) = self.clients.get(id) else {
                continue;
            };
            let t = c.tracking.lock();
            if !t.on || (t.noloop && id == origin) {
                continue;
            }
            let dest = if t.redirect != 0 { t.redirect } else { id };
            if dest != id && self.clients.get(dest).is_none() {
                // The redirect target went away: tell the client (RESP3), once per change.
                if !broken.contains(&(id, dest)) {
                    broken.push((id, dest));
                }
                continue;
            }
            let keys = by_dest.entry(dest).or_default();
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        for (dest, keys) in by_dest {
            if let Some(c) = self.clients.get(dest) {
                c.push(Push::Invalidate(Some(keys)));
            }
        }
        for (source, dest) in broken {
            if let Some(c) = self.clients.get(source) {
                c.push(Push::RedirectBroken(dest));
            }
        }
    }
}

impl ChangeObserver for Tracking {
    fn active(&self) -> bool {
        self.enabled.load(Ordering::Relaxed) > 0
    }

    fn changed(&self, keys: &[Bytes], origin: u64) {
        let mut targets: Vec<(u64, Bytes)> = Vec::new();
        {
            let mut table = self.keys.lock();
            for k in keys {
                if let Some(ids) = table.swap_remove(k) {
                    targets.extend(ids.into_iter().map(|id| (id, k.clone())));
                }
            }
        }
        {
            let prefixes = self.prefixes.read();
            for (p, id) in prefixes.iter() {
                targets.extend(
                    keys.iter()
                        .filter(|k| k.starts_with(p))
                        .map(|k| (*id, k.clone())),
                );
            }
        }
        if !targets.is_empty() {
            self.deliver(targets.into_iter(), origin);
        }
    }

    fn flushed(&self, _origin: u64) {
        self.keys.lock().clear();
        let mut dests = Vec::new();
        for c in self.clients.all() {
            let t = c.tracking.lock();
            if t.on {
                dests.push(if t.redirect != 0 { t.redirect } else { c.id });
            }
        }
        dests.sort_unstable();
        dests.dedup();
        for d in dests {
            if let Some(c) = self.clients.get(d) {
                c.push(Push::Invalidate(None));
            }
        }
    }
}
