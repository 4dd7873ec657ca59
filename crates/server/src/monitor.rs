//! MONITOR: connections that asked to see every command the node runs, in
//! Redis's line format (`+<secs>.<usecs> [0 <addr>] "arg" ...`). Commands
//! are shown as they run (those of a transaction when EXEC runs them);
//! admin commands are not shown, and AUTH's and HELLO's passwords are
//! shown as `(redacted)`, as in Redis.

use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use commands::{CommandSpec, Flags};
use parking_lot::Mutex;

use crate::clients::{Clients, Push};

#[derive(Default)]
pub struct Monitors {
    ids: Mutex<Vec<u64>>,
    /// Anyone monitoring (read by every command).
    any: AtomicBool,
}

impl Monitors {
    pub fn add(&self, client: u64) {
        let mut ids = self.ids.lock();
        if !ids.contains(&client) {
            ids.push(client);
        }
        self.any.store(true, Ordering::Release);
    }

    pub fn remove(&self, client: u64) {
        let mut ids = self.ids.lock();
        ids.retain(|&id| id != client);
        self.any.store(!ids.is_empty(), Ordering::Release);
    }

    pub fn active(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }

    /// Shows `args` (run by the client at `addr`) to every monitor but
    /// the client itself.
    pub fn feed(
        &self,
        clients: &Clients,
        spec: &CommandSpec,
        args: &[&[u8]],
        client: u64,
        addr: &str,
    ) {
        if spec.flags.has(Flags::ADMIN) {
            return;
        }
        let ids = self.ids.lock().clone();
        if ids.iter().all(|&id| id == client) {
            return;
        }
        let line = Bytes::from(format_line(spec.name, args, addr));
        for id in ids.into_iter().filter(|&id| id != client) {
            if let Some(c) = clients.get(id) {
                c.push(Push::Monitor(line.clone()));
            }
        }
    }
}

fn format_line(name: &str, args: &[&[u8]], addr: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let mut line = format!("+{}.{:06} [0 {addr}]", now.as_secs(), now.subsec_micros());
    let redact_from = match name {
        "auth" => 1,
        // HELLO [protover [AUTH username password] ...]
        "hello" => args
            .iter()
            .position(|a| a.eq_ignore_ascii_case(b"AUTH"))
            .map_or(args.len(), |i| i + 1),
        _ => args.len(),
    };
    for (i, a) in args.iter().enumerate() {
        line.push(' ');
        let redacted = i >= redact_from && (name == "auth" || i < redact_from + 2);
        if redacted {
            line.push_str("\"(redacted)\"");
        } else {
            quote(a, &mut line);
        }
    }
    line.push_str("\r\n");
    line
}

/// Redis's `sdscatrepr`: a quoted string with escapes.
fn quote(s: &[u8], out: &mut String) {
    out.push('"');
    for &b in s {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            7 => out.push_str("\\a"),
            8 => out.push_str("\\b"),
            b if b.is_ascii_graphic() || b == b' ' => out.push(b as char),
            b => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_quote_and_redact_as_redis() {
        let line = format_line("set", &[b"set", b"k\"1", b"a\nb\x01"], "127.0.0.1:5");
        assert!(
            line.ends_with(" [0 127.0.0.1:5] \"set\" \"k\\\"1\" \"a\\nb\\x01\"\r\n"),
            "{line}"
        );
        let line = format_line("auth", &[b"auth", b"user", b"pass"], "a:1");
        assert!(
            line.ends_with("\"auth\" \"(redacted)\" \"(redacted)\"\r\n"),
            "{line}"
        );
        let line = format_line(
            "hello",
            &[b"hello", b"2", b"AUTH", b"u", b"p", b"SETNAME", b"n"],
            "a:1",
        );
        assert!(
            line.ends_with(
                "\"hello\" \"2\" \"AUTH\" \"(redacted)\" \"(redacted)\" \"SETNAME\" \"n\"\r\n"
            ),
            "{line}"
        );
    }
}
