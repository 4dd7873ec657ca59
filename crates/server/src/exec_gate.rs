//! The gate that makes EXEC exclusive: every command holds it shared, EXEC
//! holds it exclusively. A single reader-writer lock would have every
//! command on every core write the same cache line; here each thread reads
//! its own shard (padded to its own cache line), and EXEC takes all shards
//! in order. Sections under the gate never await.

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::thread_shard::thread_shard;

const SHARDS: usize = 16;

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
        assert!(gate.try_exclusive().is_none(), "EXEC could start while a command held the gate");
        release_tx.send(()).unwrap();
        reader.join().unwrap();
        assert!(gate.try_exclusive().is_some());
    }
}
