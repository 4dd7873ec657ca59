//! Client tracking (the server side of near caches), as Redis 6+: clients
//! that read a key in default mode are remembered per key; BCAST clients
//! register prefixes. On any change of a key, from any source (commands,
//! expiry, replication and WAN), the keyspace tells us and we push an
//! invalidation to each interested client (or its REDIRECT target) once,
//! after which the key must be read again to be tracked again.
//!
//! As in Redis, a default-mode client gets one message per key; a BCAST
//! client one message per matching prefix with every key changed under it
//! by the batch of requests a connection ran ([`Tracking::defer`]: Redis
//! sends them once per event loop iteration), or by one change elsewhere
//! (expiry, replication, WAN).
//!
//! Memory is bounded: past `max_keys` remembered keys, the oldest are
//! invalidated early, which costs clients a re-read, never a stale value.

use std::cell::RefCell;
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
    /// at once, oldest first.
    pub fn set_max_keys(&self, n: usize) {
        self.max_keys.store(n, Ordering::Relaxed);
        self.evict_over_limit();
    }

    /// BCAST prefixes registered (INFO tracking_total_prefixes).
    pub fn prefixes(&self) -> usize {
        self.prefixes.read().len()
    }

    /// Readers remembered over all keys (INFO tracking_total_items).
    pub fn items(&self) -> usize {
        self.keys.lock().values().map(|ids| ids.len()).sum()
    }

    pub fn tracked_keys(&self) -> usize {
        self.keys.lock().len()
    }

    /// Remembers that `client` read `keys` (default mode).
    pub fn remember(&self, client: u64, keys: &[Bytes]) {
        {
            let mut table = self.keys.lock();
            for k in keys {
                let ids = table.entry(k.clone()).or_default();
                if !ids.contains(&client) {
                    ids.push(client);
                }
            }
        }
        self.evict_over_limit();
    }

    /// Keys over `max_keys` are forgotten, oldest first, and their readers
    /// told to drop them (an early invalidation, never a stale value).
    fn evict_over_limit(&self) {
        let max = match self.max_keys.load(Ordering::Relaxed) {
            0 => usize::MAX,
            n => n,
        };
        let mut evicted = Vec::new();
        {
            let mut table = self.keys.lock();
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

    /// Where a client's invalidations go: itself, its REDIRECT target, or
    /// nowhere (tracking off, NOLOOP and it made the change, a key it
    /// read in default mode while it now tracks in BCAST mode, or a target
    /// that went away, which the client is told of once).
    fn destination(
        &self,
        id: u64,
        origin: u64,
        bcast: bool,
        broken: &mut Vec<(u64, u64)>,
    ) -> Option<u64> {
        let c = self.clients.get(id)?;
        let t = c.tracking.lock();
        if !t.on || t.bcast != bcast || (t.noloop && id == origin) {
            return None;
        }
        let dest = if t.redirect != 0 { t.redirect } else { id };
        if dest != id && self.clients.get(dest).is_none() {
            if !broken.contains(&(id, dest)) {
                broken.push((id, dest));
            }
            return None;
        }
        Some(dest)
    }

    /// Default mode: one message per (destination, key).
    fn deliver(&self, targets: impl Iterator<Item = (u64, Bytes)>, origin: u64) {
        let mut sent: Vec<(u64, Bytes)> = Vec::new();
        let mut broken = Vec::new();
        for (id, key) in targets {
            let Some(dest) = self.destination(id, origin, false, &mut broken) else {
                continue;
            };
            if sent.iter().any(|(d, k)| *d == dest && *k == key) {
                continue;
            }
            if let Some(c) = self.clients.get(dest) {
                c.push(Push::Invalidate(Some(vec![key.clone()])));
            }
            sent.push((dest, key));
        }
        self.tell_broken(broken);
    }

    /// BCAST: one message per (destination, prefix) with its keys.
    fn deliver_prefixed(&self, targets: Vec<Prefixed>) {
        let mut groups: Vec<((u64, Bytes), Vec<Bytes>)> = Vec::new();
        let mut broken = Vec::new();
        for t in targets {
            let Some(dest) = self.destination(t.client, t.origin, true, &mut broken) else {
                continue;
            };
            let at = match groups
                .iter()
                .position(|(g, _)| g.0 == dest && g.1 == t.prefix)
            {
                Some(at) => at,
                None => {
                    groups.push(((dest, t.prefix), Vec::new()));
                    groups.len() - 1
                }
            };
            let keys = &mut groups[at].1;
            if !keys.contains(&t.key) {
                keys.push(t.key);
            }
        }
        for ((dest, _), keys) in groups {
            if let Some(c) = self.clients.get(dest) {
                c.push(Push::Invalidate(Some(keys)));
            }
        }
        self.tell_broken(broken);
    }

    fn tell_broken(&self, broken: Vec<(u64, u64)>) {
        for (source, dest) in broken {
            if let Some(c) = self.clients.get(source) {
                c.push(Push::RedirectBroken(dest));
            }
        }
    }

    /// Until the returned guard drops, BCAST invalidations of changes this
    /// thread makes are gathered and then sent one message per prefix (a
    /// connection's batch of requests, as Redis's event loop iteration).
    pub fn defer(&self) -> Deferred<'_> {
        let outer = DEFERRED.with(|d| {
            let mut d = d.borrow_mut();
            let outer = d.is_some();
            if !outer {
                *d = Some(Vec::new());
            }
            outer
        });
        Deferred {
            tracking: self,
            outer,
        }
    }
}

/// A BCAST invalidation: `client` registered `prefix`, `key` changed by `origin`.
struct Prefixed {
    client: u64,
    prefix: Bytes,
    key: Bytes,
    origin: u64,
}

thread_local! {
    static DEFERRED: RefCell<Option<Vec<Prefixed>>> = const { RefCell::new(None) };
}

/// See [`Tracking::defer`].
pub struct Deferred<'a> {
    tracking: &'a Tracking,
    /// Inside another deferral: the outer one sends.
    outer: bool,
}

impl Drop for Deferred<'_> {
    fn drop(&mut self) {
        if self.outer {
            return;
        }
        if let Some(targets) = DEFERRED.with(|d| d.borrow_mut().take()) {
            if !targets.is_empty() {
                self.tracking.deliver_prefixed(targets);
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
        if !targets.is_empty() {
            self.deliver(targets.into_iter(), origin);
        }
        let mut prefixed: Vec<Prefixed> = Vec::new();
        for (p, id) in self.prefixes.read().iter() {
            prefixed.extend(keys.iter().filter(|k| k.starts_with(p)).map(|k| Prefixed {
                client: *id,
                prefix: p.clone(),
                key: k.clone(),
                origin,
            }));
        }
        if prefixed.is_empty() {
            return;
        }
        let prefixed = DEFERRED.with(|d| match d.borrow_mut().as_mut() {
            Some(deferred) => {
                deferred.append(&mut prefixed);
                None
            }
            None => Some(prefixed),
        });
        if let Some(prefixed) = prefixed {
            self.deliver_prefixed(prefixed);
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
