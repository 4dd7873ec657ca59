//! Active expiry: keys whose time ran out removed a few at a time, the
//! partitions holding keys with a time to live visited round-robin. (A
//! read removes an expired key it finds itself: see [`super::Txn::get`].)

use std::sync::atomic::Ordering;

use super::Keyspace;

impl Keyspace {
    /// Active expiry: removes up to `max_keys` keys whose time ran out,
    /// visiting partitions round-robin so every one gets its turn. Returns
    /// how many were removed (== max_keys means there may be more).
    pub fn expire_cycle(&self, max_keys: usize) -> usize {
        let start = self.expire_cursor.load(Ordering::Relaxed);
        let now = self.now_ms();
        let mut removed = 0;
        // Only partitions holding keys with a time to live are visited.
        for p in self.expiring.members_from(start) {
            {
                let part = self.parts[p].lock();
                match part.next_expiry() {
                    None => {
                        self.expiring.remove(p);
                        continue;
                    }
                    Some(at) if part.replica || at > now => continue,
                    Some(_) => {}
                }
            }
            let mut txn = self.txn_partition(p, 0);
            if txn.guards[0].1.replica {
                continue;
            }
            let due = txn.guards[0].1.due(txn.now, max_keys - removed);
            for key in due {
                txn.expire_key(0, &key);
                removed += 1;
            }
            if removed >= max_keys {
                self.expire_cursor.store(p, Ordering::Relaxed);
                return removed;
            }
        }
        removed
    }
}
