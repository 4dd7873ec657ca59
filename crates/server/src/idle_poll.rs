//! Idle polling: a worker thread that was woken to do work and ran out of
//! it keeps polling for more for up to `idle_poll` before it sleeps again
//! (Seastar's `idle-poll-time-us`, Go's spinning threads). A request or a
//! replica's acknowledgement that arrives meanwhile is read at once; one
//! that arrives at a sleeping thread waits for the kernel to wake it, which
//! costs the sender an inter-processor interrupt and, in a virtual machine
//! whose idle vCPU halts, a VM exit and entry: ~30 µs here, against a
//! loopback round trip of 4.
//!
//! It runs in the runtime's park hook, before the worker blocks in its I/O
//! driver: it asks the kernel whether the driver's epoll instance has
//! anything ready (`poll` with no timeout, which reports readiness without
//! taking the events, so the driver still gets them) and returns as soon
//! as it does. Wake-ups from other threads reach the driver too. It polls
//! only after a wake-up (an idle node stays asleep), stops after
//! `idle_poll`, and stops as soon as the CPU is wanted by anything else:
//! every round gives it away (`sched_yield`), and a round that got it back
//! late means another thread ran, which polling would only slow.

use std::cell::Cell;
use std::os::fd::RawFd;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::runtime::{Builder, Runtime};

/// A round (a `poll` and a `sched_yield`, ~1 µs) that took this long lost
/// the CPU to another thread: polling stops.
const CONTENDED: Duration = Duration::from_micros(20);

thread_local! {
    /// The worker was woken since its park hook last ran.
    static WOKEN: Cell<bool> = const { Cell::new(false) };
}

/// Builds `builder`'s runtime with idle polling for up to `budget` in its
/// park hooks (zero: a plain runtime).
pub fn build_runtime(builder: &mut Builder, budget: Duration) -> std::io::Result<Runtime> {
    if budget.is_zero() {
        return builder.build();
    }
    Ok(build_with(builder, budget)?.0)
}

fn build_with(
    builder: &mut Builder,
    budget: Duration,
) -> std::io::Result<(Runtime, Arc<OnceLock<IdlePoll>>)> {
    let polling = Arc::new(OnceLock::<IdlePoll>::new());
    let (parking, unparked) = (polling.clone(), polling.clone());
    builder.on_thread_park(move || parking.get().map_or((), IdlePoll::parking));
    builder.on_thread_unpark(move || unparked.get().map_or((), IdlePoll::unparked));
    // The runtime's epoll instance is the one its building made (mio holds
    // it twice: its registry is a duplicate of the poller's descriptor).
    let before = epoll_instances();
    let rt = builder.build()?;
    let made: Vec<RawFd> = epoll_instances()
        .into_iter()
        .filter(|fd| !before.contains(fd))
        .collect();
    let epoll = match made[..] {
        [fd, ref others @ ..] if others.iter().all(|&o| same_file(fd, o)) => Some(fd),
        _ => {
            tracing::warn!(
                "idle polling is off: the runtime's epoll instance was not found in /proc/self/fd"
            );
            None
        }
    };
    let _ = polling.set(IdlePoll { budget, epoll });
    Ok((rt, polling))
}

struct IdlePoll {
    budget: Duration,
    /// The runtime's epoll instance; None: no polling.
    epoll: Option<RawFd>,
}

impl IdlePoll {
    /// For the runtime's `on_thread_unpark`.
    fn unparked(&self) {
        WOKEN.with(|w| w.set(true));
    }

    /// For the runtime's `on_thread_park`: the worker is about to block.
    /// Returns when its driver has something ready, after `budget`, or when
    /// the CPU is wanted elsewhere; at once unless it was woken since it
    /// last got here.
    fn parking(&self) {
        let Some(epoll) = self.epoll else { return };
        if !WOKEN.with(|w| w.replace(false)) {
            return;
        }
        let start = Instant::now();
        let mut round = start;
        loop {
            if has_ready(epoll) {
                return;
            }
            std::thread::yield_now();
            let now = Instant::now();
            if now - round > CONTENDED || now - start > self.budget {
                return;
            }
            round = now;
        }
    }
}

/// The epoll instance has events ready (or cannot be polled): the driver
/// will not block.
fn has_ready(epoll: RawFd) -> bool {
    let mut ready = libc::pollfd {
        fd: epoll,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd; a zero timeout never blocks.
    unsafe { libc::poll(&mut ready, 1, 0) != 0 }
}

/// Two descriptors of this process refer to one open file (`kcmp`).
fn same_file(a: RawFd, b: RawFd) -> bool {
    const KCMP_FILE: libc::c_long = 0;
    // SAFETY: kcmp only compares kernel objects; any arguments are safe.
    let pid = unsafe { libc::getpid() } as libc::c_long;
    unsafe {
        libc::syscall(
            libc::SYS_kcmp,
            pid,
            pid,
            KCMP_FILE,
            a as libc::c_long,
            b as libc::c_long,
        ) == 0
    }
}

/// The process's epoll instances.
fn epoll_instances() -> Vec<RawFd> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    dir.flatten()
        .filter(|e| {
            std::fs::read_link(e.path()).is_ok_and(|t| t.as_os_str() == "anon_inode:[eventpoll]")
        })
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sees_what_the_runtime_driver_has_ready_without_taking_it() {
        let (rt, polling) = build_with(
            Builder::new_current_thread().enable_all(),
            Duration::from_micros(50),
        )
        .unwrap();
        let poll = polling.get().unwrap();
        let epoll = poll.epoll.expect("the runtime's epoll instance");
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        b.set_nonblocking(true).unwrap();
        let b = rt.block_on(async {
            let b = tokio::net::UnixStream::from_std(b).unwrap();
            // A turn of the driver takes the registration's first events.
            tokio::task::yield_now().await;
            b
        });
        assert!(
            !has_ready(epoll),
            "nothing was sent, yet the driver has events ready"
        );
        std::io::Write::write_all(&mut &a, b"x").unwrap();
        assert!(
            has_ready(epoll),
            "a byte arrived and the driver's epoll instance does not say so"
        );
        // Polling left the event to the driver: the socket still becomes readable.
        rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(10), b.readable())
                .await
                .expect("the driver saw the byte")
                .unwrap();
        });
        // After a wake-up polling returns at once when something is ready,
        // and without one it does not poll at all.
        poll.unparked();
        poll.parking();
        poll.parking();
    }
}
