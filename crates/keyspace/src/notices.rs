//! What each write did to which key, for keyspace notifications (Redis's
//! `notify-keyspace-events`). While switched on ([`Keyspace::set_notices`]),
//! every write and every expiry made through a [`Txn`] leaves a [`Notice`]
//! on its thread; the server takes them after each command (and after each
//! active expiry pass) and publishes the events the configuration asks for.
//! Switched off, a write pays one relaxed load.
//!
//! [`Keyspace::set_notices`]: crate::Keyspace::set_notices
//! [`Txn`]: crate::Txn

use std::cell::RefCell;

use bytes::Bytes;

/// What happened to the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Noticed {
    /// The whole value replaced (SET and friends); `expire_at` as written.
    Set { expire_at: u64 },
    /// A string operation (APPEND, SETRANGE, INCRBY...).
    Str,
    /// Hash fields set.
    HashSet,
    /// Hash fields removed.
    HashDel,
    /// Set members added or sorted-set scores set.
    Added,
    /// Set or sorted-set members removed.
    Removed,
    /// A list edited (the command says how: pushed, popped, trimmed...).
    List,
    /// The time to live set (`0`: removed, PERSIST).
    Expiry(u64),
    /// Deleted by a command.
    Deleted,
    /// Removed because its time ran out.
    Expired,
    /// Removed by eviction (`maxmemory-policy`).
    Evicted,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    pub key: Bytes,
    pub what: Noticed,
    /// The key did not exist before (Redis's `new` event).
    pub created: bool,
    /// The write removed the key (the last element removed).
    pub removed: bool,
}

thread_local! {
    static NOTICES: RefCell<Vec<Notice>> = const { RefCell::new(Vec::new()) };
}

pub(crate) fn push(n: Notice) {
    NOTICES.with(|v| v.borrow_mut().push(n));
}

/// The notices this thread left since the last call, in order.
pub fn take_notices() -> Vec<Notice> {
    NOTICES.with(|v| std::mem::take(&mut *v.borrow_mut()))
}
