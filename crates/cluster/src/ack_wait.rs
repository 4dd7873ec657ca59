//! Whom to wake when a replica answers a replication batch.
//!
//! Everything a primary queues for one replica is one byte stream. A write
//! waiting for that replica waits until the replica has answered the batch
//! holding the end of the stream as it stood right after the write (its
//! *target*). The connection knows where each batch it sent ends, and on
//! the answer wakes exactly the waiters at or before that point, instead of
//! every waiting client of the node (of which, with one batch in flight,
//! about half wrote after the batch left and would go back to sleep).
//!
//! This only decides whom to wake: whether a write is acknowledged is
//! still decided by the per-partition acks
//! ([`crate::replication::Replicator::wait`]).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Poll, Waker};

use parking_lot::Mutex;

#[derive(Default)]
pub(crate) struct AckWaiters {
    /// Stream position up to which the replica has answered.
    answered: AtomicU64,
    /// Parked waiters: (target, waker). A waiter that gave up (timed out)
    /// leaves its entry until the position passes it or [`Self::wake_all`].
    parked: Mutex<Vec<(u64, Waker)>>,
}

impl AckWaiters {
    /// The replica answered everything up to `pos`: wakes the waiters whose
    /// target that covers.
    pub fn answered(&self, pos: u64) {
        self.answered.fetch_max(pos, Ordering::AcqRel);
        let mut ready = Vec::new();
        {
            let mut parked = self.parked.lock();
            let mut i = 0;
            while i < parked.len() {
                if parked[i].0 <= pos {
                    ready.push(parked.swap_remove(i).1);
                } else {
                    i += 1;
                }
            }
        }
        ready.into_iter().for_each(Waker::wake);
    }

    pub fn has_answered(&self, target: u64) -> bool {
        self.answered.load(Ordering::Acquire) >= target
    }

    /// Wakes every waiter (the partition table changed: what they wait
    /// for may have changed too).
    pub fn wake_all(&self) {
        let parked = std::mem::take(&mut *self.parked.lock());
        parked.into_iter().for_each(|(_, w)| w.wake());
    }

    /// Resolves once the replica answered up to `target`, or once `changed`
    /// returns true (checked after every wake-up).
    pub fn reached<'a>(
        &'a self,
        target: u64,
        changed: impl Fn() -> bool + 'a,
    ) -> impl Future<Output = ()> + 'a {
        std::future::poll_fn(move |cx| {
            if self.has_answered(target) || changed() {
                return Poll::Ready(());
            }
            self.parked.lock().push((target, cx.waker().clone()));
            // `answered` and `wake_all` take the lock after their update,
            // so one that ran before the push is seen here.
            if self.has_answered(target) || changed() {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test]
    async fn only_waiters_at_or_before_the_answered_position_wake() {
        let w = Arc::new(AckWaiters::default());
        let spawn = |target| {
            let w = w.clone();
            tokio::spawn(async move { w.reached(target, || false).await })
        };
        let (early, late) = (spawn(10), spawn(20));
        tokio::task::yield_now().await;
        w.answered(15);
        tokio::time::timeout(Duration::from_secs(5), early)
            .await
            .expect("woken")
            .unwrap();
        assert!(!late.is_finished());
        assert_eq!(w.parked.lock().len(), 1);
        w.answered(20);
        tokio::time::timeout(Duration::from_secs(5), late)
            .await
            .expect("woken")
            .unwrap();
        assert!(w.parked.lock().is_empty());
    }

    #[tokio::test]
    async fn wake_all_releases_a_waiter_whose_condition_changed() {
        let w = Arc::new(AckWaiters::default());
        let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let waiter = {
            let (w, flag) = (w.clone(), flag.clone());
            tokio::spawn(async move { w.reached(100, || flag.load(Ordering::Acquire)).await })
        };
        tokio::task::yield_now().await;
        w.wake_all();
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "nothing changed: it parks again");
        flag.store(true, Ordering::Release);
        w.wake_all();
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("woken")
            .unwrap();
    }
}
