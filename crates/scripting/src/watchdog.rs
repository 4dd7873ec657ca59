//! What other connections see of the script that runs: since when it runs,
//! whether it has run past `busy-reply-threshold` (they then answer BUSY
//! instead of waiting), whether it wrote (SCRIPT KILL refuses then), and
//! the kill request the Lua hook acts on.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::Mutex;

/// Redis's default `busy-reply-threshold` (`lua-time-limit`), milliseconds.
pub const DEFAULT_BUSY_MS: u64 = 5000;

pub struct Watchdog {
    started: Mutex<Option<Instant>>,
    /// `busy-reply-threshold` in milliseconds; 0: never busy.
    pub threshold_ms: AtomicU64,
    busy: AtomicBool,
    kill: AtomicBool,
    wrote: AtomicBool,
}

impl Default for Watchdog {
    fn default() -> Self {
        Watchdog {
            started: Mutex::new(None),
            threshold_ms: AtomicU64::new(DEFAULT_BUSY_MS),
            busy: AtomicBool::new(false),
            kill: AtomicBool::new(false),
            wrote: AtomicBool::new(false),
        }
    }
}

/// What SCRIPT KILL / FUNCTION KILL answers when it cannot kill.
#[derive(Debug, PartialEq, Eq)]
pub enum KillRefused {
    NotBusy,
    Wrote,
}

impl KillRefused {
    pub fn reply(&self) -> &'static str {
        match self {
            KillRefused::NotBusy => "NOTBUSY No scripts in execution right now.",
            KillRefused::Wrote => "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.",
        }
    }
}

impl Watchdog {
    /// A script has run longer than the threshold: other commands answer
    /// BUSY.
    pub fn busy(&self) -> bool {
        self.busy.load(Ordering::Acquire)
    }

    /// The running script wrote: it can no longer be killed.
    pub fn wrote(&self) {
        self.wrote.store(true, Ordering::Release);
    }

    pub fn has_written(&self) -> bool {
        self.wrote.load(Ordering::Acquire)
    }

    /// SCRIPT KILL: the script stops at its next hook.
    pub fn kill(&self) -> Result<(), KillRefused> {
        if self.started.lock().is_none() {
            return Err(KillRefused::NotBusy);
        }
        if self.wrote.load(Ordering::Acquire) {
            return Err(KillRefused::Wrote);
        }
        self.kill.store(true, Ordering::Release);
        Ok(())
    }

    /// The node stops: a running script stops at its next hook, whether it
    /// wrote or not.
    pub fn force_kill(&self) {
        if self.started.lock().is_some() {
            self.kill.store(true, Ordering::Release);
        }
    }

    pub(crate) fn killed(&self) -> bool {
        self.kill.load(Ordering::Acquire)
    }

    pub(crate) fn begin(&self) {
        self.kill.store(false, Ordering::Release);
        self.wrote.store(false, Ordering::Release);
        self.busy.store(false, Ordering::Release);
        *self.started.lock() = Some(Instant::now());
    }

    pub(crate) fn end(&self) {
        *self.started.lock() = None;
        self.busy.store(false, Ordering::Release);
        self.kill.store(false, Ordering::Release);
    }

    /// Called from the Lua hook: marks the script busy once past the
    /// threshold. True when it just became busy.
    pub(crate) fn tick(&self) -> bool {
        if self.busy() {
            return false;
        }
        let limit = self.threshold_ms.load(Ordering::Relaxed);
        let over = limit > 0
            && self
                .started
                .lock()
                .is_some_and(|s| s.elapsed().as_millis() as u64 >= limit);
        if over {
            self.busy.store(true, Ordering::Release);
        }
        over
    }
}
