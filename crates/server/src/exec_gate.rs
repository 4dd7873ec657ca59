//! The gate that makes EXEC exclusive: every command holds it shared, EXEC
//! holds it exclusively. A single reader-writer lock would have every
//! command on every core write the same cache line; here each thread reads
//! its own shard (padded to its own cache line), and EXEC takes all shards
//! in order. Sections under the gate never await.
//!
//! A session holds it across the commands of one batch of requests
//! ([`HeldShared`]) rather than taking it per command: a pipeline of 16
//! INCRs took and gave back a lock 16 times, two locked instructions each.

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::thread_shard::thread_shard;

const SHARDS: usize = 16;
/// A session gives the gate back after this many commands (and takes it
/// again), so EXEC or a handover waits for at most that many of a long
/// pipeline.
const HOLD_COMMANDS: u32 = 64;
/// How often a command waiting for the gate checks whether a script has
/// become busy.
const BUSY_POLL: std::time::Duration = std::time::Duration::from_millis(10);

#[repr(align(128))]
#[derive(Default)]
struct Shard(RwLock<()>);

#[derive(Default)]
pub struct ExecGate {
    shards: [Shard; SHARDS],
}

impl ExecGate {
    /// Held while one command runs.
    pub fn shared(&self) -> RwLockReadGuard<'_, ()> {
        self.shards[thread_shard(SHARDS)].0.read()
    }

    /// Held while a transaction runs: no other command runs meanwhile.
    pub fn exclusive(&self) -> Vec<RwLockWriteGuard<'_, ()>> {
        self.shards.iter().map(|s| s.0.write()).collect()
    }
}

/// The gate as one session holds it while it runs a batch of requests:
/// taken by the first command, given back before EXEC (which takes it
/// exclusively), every [`HOLD_COMMANDS`] commands, and when dropped at the
/// batch's end.
pub struct HeldShared<'a> {
    gate: &'a ExecGate,
    guard: Option<RwLockReadGuard<'a, ()>>,
    commands: u32,
}

impl<'a> HeldShared<'a> {
    pub fn new(gate: &'a ExecGate) -> Self {
        HeldShared {
            gate,
            guard: None,
            commands: 0,
        }
    }

    /// Before a command other than EXEC: the gate is held. While it waits
    /// (a transaction or a script holds it exclusively) it asks `busy`
    /// every few milliseconds: true gives up, not held (a script has run
    /// past `busy-reply-threshold`: the command answers BUSY).
    pub fn hold(&mut self, busy: impl Fn() -> bool) -> bool {
        if self.commands == HOLD_COMMANDS {
            self.release();
        }
        if self.guard.is_none() {
            let shard = &self.gate.shards[thread_shard(SHARDS)].0;
            loop {
                if let Some(g) = shard.try_read_for(BUSY_POLL) {
                    self.guard = Some(g);
                    break;
                }
                if busy() {
                    return false;
                }
            }
        }
        self.commands += 1;
        true
    }

    /// Before EXEC: the gate is not held.
    pub fn release(&mut self) {
        self.guard = None;
        self.commands = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    impl ExecGate {
        fn try_exclusive(&self) -> Option<Vec<RwLockWriteGuard<'_, ()>>> {
            self.shards.iter().map(|s| s.0.try_write()).collect()
        }
    }

    #[test]
    fn a_command_on_any_thread_keeps_exec_out() {
        let gate = Arc::new(ExecGate::default());
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let g = gate.clone();
        let reader = std::thread::spawn(move || {
            let _held = g.shared();
            held_tx.send(()).unwrap();
            release_rx.recv().unwrap();
        });
        held_rx.recv().unwrap();
        assert!(
            gate.try_exclusive().is_none(),
            "EXEC could start while a command held the gate"
        );
        release_tx.send(()).unwrap();
        reader.join().unwrap();
        assert!(gate.try_exclusive().is_some());
    }

    #[test]
    fn a_batch_holds_the_gate_until_exec_or_its_end_and_lets_exec_in_between_long_runs() {
        let gate = ExecGate::default();
        let mut held = HeldShared::new(&gate);
        held.hold(|| false);
        held.hold(|| false);
        assert!(
            gate.try_exclusive().is_none(),
            "EXEC could start between two commands of a batch"
        );
        held.release();
        assert!(
            gate.try_exclusive().is_some(),
            "the gate stayed held for EXEC"
        );
        for _ in 0..HOLD_COMMANDS {
            held.hold(|| false);
        }
        assert_eq!(held.commands, HOLD_COMMANDS);
        held.hold(|| false);
        assert_eq!(
            held.commands, 1,
            "the gate was not given back after HOLD_COMMANDS commands"
        );
        drop(held);
        assert!(
            gate.try_exclusive().is_some(),
            "the batch's end did not give the gate back"
        );
        let exclusive = gate.exclusive();
        let mut other = HeldShared::new(&gate);
        assert!(
            !other.hold(|| true),
            "a command waited for the gate while a script was busy"
        );
        drop(exclusive);
        assert!(other.hold(|| true));
    }
}
