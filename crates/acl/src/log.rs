//! The ACL LOG: a bounded, per-node list of refused commands, keys,
//! channels and failed AUTHs, newest first. Like Redis's addACLLogEntry, a
//! new event equal to one of the 10 newest entries (same reason, context,
//! object and username, within 60 s) bumps that entry instead.

use std::collections::VecDeque;

/// `acl-log-max-len`'s default.
pub const DEFAULT_LOG_MAX_LEN: usize = 128;

/// Events closer than this (ms) are grouped.
const GROUPING_MAX_MS: u64 = 60_000;

/// How many recent entries are scanned for grouping.
const GROUPING_SCAN: usize = 10;

/// ACL LOG `reason`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogReason {
    Command,
    Key,
    Channel,
    Auth,
}

impl LogReason {
    pub fn as_str(self) -> &'static str {
        match self {
            LogReason::Command => "command",
            LogReason::Key => "key",
            LogReason::Channel => "channel",
            LogReason::Auth => "auth",
        }
    }
}

impl From<&crate::Denied> for LogReason {
    fn from(d: &crate::Denied) -> Self {
        match d {
            crate::Denied::Command(_) => LogReason::Command,
            crate::Denied::Key(_) => LogReason::Key,
            crate::Denied::Channel(_) => LogReason::Channel,
        }
    }
}

/// ACL LOG `context`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogContext {
    Toplevel,
    Multi,
    Lua,
}

impl LogContext {
    pub fn as_str(self) -> &'static str {
        match self {
            LogContext::Toplevel => "toplevel",
            LogContext::Multi => "multi",
            LogContext::Lua => "lua",
        }
    }
}

/// One ACL LOG entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogEntry {
    pub count: u64,
    pub reason: LogReason,
    pub context: LogContext,
    /// The command (`get`, `config|set`), key, channel, or for `auth` the
    /// command name as sent (`AUTH`).
    pub object: Vec<u8>,
    pub username: Vec<u8>,
    /// Last update, milliseconds since the Unix epoch.
    pub updated_ms: u64,
    /// CLIENT LIST-style line of the last client.
    pub client_info: Vec<u8>,
}

impl LogEntry {
    /// ACL LOG `age-seconds` at `now_ms`.
    pub fn age_seconds(&self, now_ms: u64) -> f64 {
        now_ms.saturating_sub(self.updated_ms) as f64 / 1000.0
    }
}

/// The log, newest entry first.
#[derive(Clone, Debug)]
pub struct AclLog {
    entries: VecDeque<LogEntry>,
    max_len: usize,
}

impl Default for AclLog {
    fn default() -> Self {
        Self::new(DEFAULT_LOG_MAX_LEN)
    }
}

impl AclLog {
    pub fn new(max_len: usize) -> AclLog {
        AclLog {
            entries: VecDeque::new(),
            max_len,
        }
    }

    /// CONFIG SET acl-log-max-len: older entries beyond it go (at once).
    pub fn set_max_len(&mut self, max_len: usize) {
        self.max_len = max_len;
        self.entries.truncate(max_len);
    }

    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Records an event at `now_ms`.
    pub fn add(
        &mut self,
        reason: LogReason,
        context: LogContext,
        object: &[u8],
        username: &[u8],
        client_info: &[u8],
        now_ms: u64,
    ) {
        let similar = self.entries.iter().take(GROUPING_SCAN).position(|e| {
            e.reason == reason
                && e.context == context
                && e.updated_ms.abs_diff(now_ms) <= GROUPING_MAX_MS
                && e.object == object
                && e.username == username
        });
        if let Some(i) = similar {
            if let Some(mut e) = self.entries.remove(i) {
                e.count += 1;
                e.updated_ms = now_ms;
                e.client_info = client_info.to_vec();
                self.entries.push_front(e);
            }
            return;
        }
        self.entries.push_front(LogEntry {
            count: 1,
            reason,
            context,
            object: object.to_vec(),
            username: username.to_vec(),
            updated_ms: now_ms,
            client_info: client_info.to_vec(),
        });
        self.entries.truncate(self.max_len);
    }

    /// Entries, newest first (ACL LOG `[count]`: take that many).
    pub fn entries(&self) -> impl Iterator<Item = &LogEntry> {
        self.entries.iter()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// ACL LOG RESET.
    pub fn reset(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_similar_entries_within_a_minute() {
        let mut log = AclLog::default();
        log.add(
            LogReason::Command,
            LogContext::Toplevel,
            b"get",
            b"u",
            b"id=1",
            1_000,
        );
        log.add(
            LogReason::Key,
            LogContext::Toplevel,
            b"k",
            b"u",
            b"id=1",
            2_000,
        );
        log.add(
            LogReason::Command,
            LogContext::Toplevel,
            b"get",
            b"u",
            b"id=2",
            3_000,
        );
        assert_eq!(log.len(), 2);
        let first = log.entries().next().unwrap();
        assert_eq!(
            (
                first.count,
                first.object.as_slice(),
                first.client_info.as_slice()
            ),
            (2, &b"get"[..], &b"id=2"[..])
        );
        assert_eq!(first.age_seconds(4_500), 1.5);
        log.add(
            LogReason::Command,
            LogContext::Multi,
            b"get",
            b"u",
            b"",
            3_000,
        );
        log.add(
            LogReason::Command,
            LogContext::Toplevel,
            b"get",
            b"u",
            b"",
            100_000,
        );
        assert_eq!(log.len(), 4);
        log.reset();
        assert!(log.is_empty());
    }

    #[test]
    fn bounded() {
        let mut log = AclLog::new(3);
        for i in 0..10u8 {
            log.add(LogReason::Auth, LogContext::Toplevel, b"AUTH", &[i], b"", 0);
        }
        let names: Vec<u8> = log.entries().map(|e| e.username[0]).collect();
        assert_eq!(names, [9, 8, 7]);
        log.set_max_len(1);
        assert_eq!(log.len(), 1);
    }
}
