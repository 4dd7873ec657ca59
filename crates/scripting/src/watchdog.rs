//! What other connections see of the script that runs: since when it runs,
//! whether it has run past `busy-reply-threshold` (they then answer BUSY
//! instead of waiting), whether it wrote (SCRIPT KILL refuses then), and
//! the kill request the Lua hook acts on.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::Mutex;

/// Redis's default `busy-reply-threshold` (`lua-time-limit`), milliseconds.
pub const DEFAULT_BUSY_MS: u64 = 5000;

/// The script or function that runs.
struct Running {
    since: Instant,
    eval: bool,
    name: String,
    command: Vec<String>,
}

/// Called once in a run that goes on past the hook's first check (see
/// [`Watchdog::set_on_long_run`]).
type OnLongRun = Box<dyn Fn() + Send + Sync>;

pub struct Watchdog {
    started: Mutex<Option<Running>>,
    on_long_run: Mutex<Option<OnLongRun>>,
    /// This run has called `on_long_run`.
    long_run: AtomicBool,
    /// While FUNCTION LOAD runs a library's code: when it must be done.
    load_deadline: Mutex<Option<Instant>>,
    /// The command of the next run (FUNCTION STATS shows it).
    next_command: Mutex<Vec<String>>,
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
            on_long_run: Mutex::new(None),
            long_run: AtomicBool::new(false),
            load_deadline: Mutex::new(None),
            next_command: Mutex::new(Vec::new()),
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
    /// SCRIPT KILL while a function runs, or FUNCTION KILL while a script
    /// does: the BUSY error naming the right one.
    OtherKind(&'static str),
}

/// BUSY while an EVAL script runs.
pub const BUSY_EVAL: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
/// BUSY while a function runs.
pub const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

impl KillRefused {
    pub fn reply(&self) -> &'static str {
        match self {
            KillRefused::OtherKind(e) => e,
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

    /// SCRIPT KILL (`eval`) or FUNCTION KILL: the script stops at its
    /// next hook.
    pub fn kill(&self, eval: bool) -> Result<(), KillRefused> {
        match &*self.started.lock() {
            None => return Err(KillRefused::NotBusy),
            Some(r) if r.eval != eval => {
                return Err(KillRefused::OtherKind(if r.eval {
                    BUSY_EVAL
                } else {
                    BUSY_FUNCTION
                }))
            }
            Some(_) => {}
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

    /// The BUSY error for what runs now.
    pub fn busy_reply(&self) -> &'static str {
        match &*self.started.lock() {
            Some(r) if !r.eval => BUSY_FUNCTION,
            _ => BUSY_EVAL,
        }
    }

    /// The command (EVAL or FCALL and its arguments) of the run about to
    /// start.
    pub fn set_command(&self, args: &[&[u8]]) {
        *self.next_command.lock() = args
            .iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
    }

    /// What runs: its name (a script's SHA1 or a function's name), whether
    /// it is an EVAL script, its command and for how long, in milliseconds
    /// (FUNCTION STATS).
    pub fn running(&self) -> Option<(String, bool, Vec<String>, u64)> {
        self.started.lock().as_ref().map(|r| {
            (
                r.name.clone(),
                r.eval,
                r.command.clone(),
                r.since.elapsed().as_millis() as u64,
            )
        })
    }

    /// What to do once a script turns out to run long (the hook's first
    /// check, after 100,000 Lua instructions).
    pub fn set_on_long_run(&self, f: impl Fn() + Send + Sync + 'static) {
        *self.on_long_run.lock() = Some(Box::new(f));
    }

    pub(crate) fn begin(&self, eval: bool, name: &str) {
        self.long_run.store(false, Ordering::Relaxed);
        self.kill.store(false, Ordering::Release);
        self.wrote.store(false, Ordering::Release);
        self.busy.store(false, Ordering::Release);
        *self.started.lock() = Some(Running {
            since: Instant::now(),
            eval,
            name: name.to_string(),
            command: std::mem::take(&mut *self.next_command.lock()),
        });
    }

    pub(crate) fn begin_load(&self, ms: u64) {
        *self.load_deadline.lock() = Some(Instant::now() + std::time::Duration::from_millis(ms));
    }

    pub(crate) fn end_load(&self) {
        *self.load_deadline.lock() = None;
    }

    pub(crate) fn load_overdue(&self) -> bool {
        self.load_deadline
            .lock()
            .is_some_and(|d| Instant::now() >= d)
    }

    pub(crate) fn end(&self) {
        *self.started.lock() = None;
        self.busy.store(false, Ordering::Release);
        self.kill.store(false, Ordering::Release);
    }

    /// Called from the Lua hook: the first time in a run, `on_long_run`;
    /// marks the script busy once past the threshold. True when it just
    /// became busy.
    pub(crate) fn tick(&self) -> bool {
        if !self.long_run.swap(true, Ordering::Relaxed) {
            if let Some(f) = &*self.on_long_run.lock() {
                f();
            }
        }
        if self.busy() {
            return false;
        }
        let limit = self.threshold_ms.load(Ordering::Relaxed);
        let over = limit > 0
            && self
                .started
                .lock()
                .as_ref()
                .is_some_and(|r| r.since.elapsed().as_millis() as u64 >= limit);
        if over {
            self.busy.store(true, Ordering::Release);
        }
        over
    }
}
