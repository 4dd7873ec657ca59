//! A session's blocked command (BZPOPMIN...): registering in the node's
//! blocking registry, and the command's turn when it is woken, times out
//! or is unblocked by CLIENT UNBLOCK.

use std::sync::atomic::Ordering;

use bytes::{Bytes, BytesMut};
use commands::args::owned;
use commands::{BlockMode, CommandSpec, Ctx, Wait};
use resp::ReplyWriter;

use super::{borrowed, Session};
use crate::clients;

/// A blocked command (see [`crate::blocking`]).
pub(super) struct Blocked {
    pub(super) spec: &'static CommandSpec,
    pub(super) args: Vec<Bytes>,
    /// Registered in the node's blocking registry.
    pub(super) keys: Vec<Bytes>,
    /// None: waits for ever.
    pub(super) deadline: Option<tokio::time::Instant>,
}

impl Session {
    /// While the client is blocked: Some(its deadline, None for ever).
    pub fn blocked(&self) -> Option<Option<tokio::time::Instant>> {
        self.blocked.as_ref().map(|b| b.deadline)
    }

    /// The connection was woken for the blocked command: the next
    /// [`Session::process`] runs it again.
    pub fn wake(&mut self) {
        self.woken = true;
    }

    /// The command found nothing and waits for `wait.keys`.
    pub(super) fn block(&mut self, spec: &'static CommandSpec, args: &[&[u8]], wait: Wait) {
        let deadline = (wait.timeout_ms > 0).then(|| {
            tokio::time::Instant::now() + std::time::Duration::from_millis(wait.timeout_ms)
        });
        self.node.blocking.block(self.id, &wait.keys);
        self.shared
            .block_state
            .store(clients::BLOCKED, Ordering::Release);
        self.blocked = Some(Blocked {
            spec,
            args: args.iter().map(|a| owned(a)).collect(),
            keys: wait.keys,
            deadline,
        });
        // A change made between the command's run and the registration
        // woke nobody: the connection runs the command once more.
        self.shared.unblock.notify_one();
    }

    /// The blocked command's turn: CLIENT UNBLOCK's answer, the timeout's
    /// (a null array), or, when woken, the command run again. Returns true
    /// while the client stays blocked.
    pub(super) fn resume(&mut self, outbuf: &mut BytesMut) -> bool {
        let Some(b) = self.blocked.take() else {
            return false;
        };
        let woken = std::mem::take(&mut self.woken);
        let mut out = ReplyWriter::new(outbuf, self.resp3);
        let state = self.shared.block_state.load(Ordering::Acquire);
        let timed_out = b.deadline.is_some_and(|d| d <= tokio::time::Instant::now());
        if state == clients::UNBLOCK_ERROR {
            let e = "UNBLOCKED client unblocked via CLIENT UNBLOCK";
            self.node.metrics.error(Some(b.spec), e, false);
            out.error(e);
        } else if state == clients::UNBLOCK_TIMEOUT || timed_out {
            out.null_array();
        } else if !woken {
            self.blocked = Some(b);
            return true;
        } else if let Some(handler) = b.spec.handler {
            let args = borrowed(&b.args);
            let mut ctx = Ctx {
                ks: &self.node.ks,
                out: &mut out,
                client_id: self.id,
                blocking: BlockMode::Retry,
                wait: None,
                read_any_key: true,
            };
            let result = handler(&mut ctx, &args);
            let again = ctx.wait.is_some();
            match result {
                Ok(()) if again => {
                    self.blocked = Some(b);
                    return true;
                }
                Ok(()) => {
                    if self.node.events.on() {
                        crate::notify::publish(&self.node, b.spec.name, &args);
                    }
                    if let Some(w) = keyspace::last_written() {
                        self.last_write = Some(w);
                    }
                }
                Err(e) => {
                    let e = e.to_string();
                    self.node.metrics.error(Some(b.spec), &e, false);
                    out.error(&e);
                }
            }
        }
        self.unblock(&b.keys);
        false
    }

    /// Out of the blocking registry (served, timed out, unblocked, gone).
    pub(super) fn unblock(&self, keys: &[Bytes]) {
        self.node.blocking.unblock(self.id, keys);
        self.shared
            .block_state
            .store(clients::NOT_BLOCKED, Ordering::Release);
    }
}
