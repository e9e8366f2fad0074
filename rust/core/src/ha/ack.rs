//! Slave acknowledgements on the master, and the blocking wait GroupTransferService builds on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// One blocked `wait_for_ack` call: woken alone, when its offset is covered.
struct Waiter {
    target: u64,
    count: usize,
    done: Mutex<bool>,
    woken: Condvar,
}

impl Waiter {
    fn finish(&self) {
        *self.done.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.woken.notify_one();
    }
}

#[derive(Default)]
struct Acks {
    /// connection id -> (slave key, acked offset). The key is the slave's authenticated id, or
    /// the connection id without authentication.
    by_connection: HashMap<u64, (u64, u64)>,
    version: u64,
    /// Callers inside `wait_changed`: with none, an ack change skips the notify (a futex
    /// syscall per ack even with nobody waiting).
    watchers: usize,
    /// Blocked puts. An ack change wakes only those it satisfies: waking every producer on
    /// every ack would have them all fight for the GIL to find most still unsatisfied.
    waiters: Vec<Arc<Waiter>>,
}

#[derive(Default)]
pub struct AckTable {
    inner: Mutex<Acks>,
    /// Signalled on every ack change and every explicit `notify`.
    changed: Condvar,
    /// RocketMQ's `push2SlaveMaxOffset`: the highest offset any slave ever acked.
    push2slave_max_offset: AtomicU64,
}

impl Acks {
    /// Each distinct slave's best ack, highest first.
    fn covered(&self) -> Vec<u64> {
        let mut best: HashMap<u64, u64> = HashMap::new();
        for (k, off) in self.by_connection.values() {
            let e = best.entry(*k).or_default();
            *e = (*e).max(*off);
        }
        let mut offsets: Vec<u64> = best.into_values().collect();
        offsets.sort_unstable_by(|a, b| b.cmp(a));
        offsets
    }

    /// Distinct slaves whose ack covers `target`.
    fn count_at_least(&self, target: u64) -> usize {
        self.covered().iter().take_while(|o| **o >= target).count()
    }

    /// Finishes the waiters the current acks satisfy.
    fn wake_satisfied(&mut self) {
        if self.waiters.is_empty() {
            return;
        }
        let covered = self.covered();
        self.waiters.retain(|w| {
            let ok = w.count == 0 || covered.get(w.count - 1).is_some_and(|o| *o >= w.target);
            if ok {
                w.finish();
            }
            !ok
        });
    }
}

impl AckTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, Acks> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn update(&self, connection: u64, slave_key: u64, offset: u64) {
        let mut a = self.lock();
        let prev = a.by_connection.insert(connection, (slave_key, offset));
        if prev.map(|p| p.1) != Some(offset) {
            a.version += 1;
            self.push2slave_max_offset
                .fetch_max(offset, Ordering::AcqRel);
            a.wake_satisfied();
            self.notify_watchers(&a);
        }
    }

    fn notify_watchers(&self, a: &Acks) {
        if a.watchers > 0 {
            self.changed.notify_all();
        }
    }

    pub(crate) fn remove(&self, connection: u64) {
        let mut a = self.lock();
        if a.by_connection.remove(&connection).is_some() {
            a.version += 1;
            self.notify_watchers(&a);
        }
    }

    pub fn push2slave_max_offset(&self) -> u64 {
        self.push2slave_max_offset.load(Ordering::Acquire)
    }

    pub fn count_at_least(&self, target: u64) -> usize {
        self.lock().count_at_least(target)
    }

    /// RocketMQ's `isSlaveOK`: at least `count` distinct slaves connected, and the best of
    /// them fewer than `max_gap` bytes behind `next_offset`.
    pub fn in_sync(&self, next_offset: u64, count: usize, max_gap: u64) -> bool {
        let offsets = self.lock().covered();
        offsets.len() >= count
            && offsets
                .first()
                .is_none_or(|best| next_offset.saturating_sub(*best) < max_gap)
    }

    /// Acked offsets of live slaves (one per distinct slave, its best), highest first.
    pub fn slave_offsets(&self) -> Vec<u64> {
        self.lock().covered()
    }

    /// Blocks until `count` distinct slaves acked `target`; false on timeout. Only an ack that
    /// satisfies this call wakes it.
    pub fn wait_for_ack(&self, target: u64, count: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let waiter = {
            let mut a = self.lock();
            if a.count_at_least(target) >= count {
                return true;
            }
            let w = Arc::new(Waiter {
                target,
                count,
                done: Mutex::new(false),
                woken: Condvar::new(),
            });
            a.waiters.push(w.clone());
            w
        };
        let mut done = waiter.done.lock().unwrap_or_else(|p| p.into_inner());
        while !*done {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            done = waiter
                .woken
                .wait_timeout(done, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        if *done {
            return true;
        }
        drop(done);
        let mut a = self.lock();
        a.waiters.retain(|w| !Arc::ptr_eq(w, &waiter));
        // An ack may have landed between the timeout and taking the lock.
        let finished = *waiter.done.lock().unwrap_or_else(|p| p.into_inner());
        finished
    }

    /// Blocks until the table changed since `seen` (or `notify` was called); returns the new
    /// version, or `seen` on timeout.
    pub fn wait_changed(&self, seen: u64, timeout: Duration) -> u64 {
        let deadline = Instant::now() + timeout;
        let mut a = self.lock();
        a.watchers += 1;
        while a.version == seen {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            a = self
                .changed
                .wait_timeout(a, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        a.watchers -= 1;
        a.version
    }

    pub fn version(&self) -> u64 {
        self.lock().version
    }

    /// Wakes `wait_changed` callers without an ack change (a new request arrived, or shutdown).
    pub fn notify(&self) {
        let mut a = self.lock();
        a.version += 1;
        self.notify_watchers(&a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_slaves_are_counted_once() {
        let t = AckTable::default();
        t.update(1, 100, 50);
        t.update(2, 100, 60); // the same slave on a second connection
        assert_eq!(t.count_at_least(50), 1);
        t.update(3, 200, 70);
        assert_eq!(t.count_at_least(50), 2);
        assert_eq!(t.push2slave_max_offset(), 70);
        t.remove(3);
        assert_eq!(t.count_at_least(50), 1);
    }

    #[test]
    fn in_sync_needs_enough_slaves_and_the_best_within_the_gap() {
        let t = AckTable::default();
        assert!(!t.in_sync(100, 1, 50), "no slave");
        assert!(t.in_sync(100, 0, 50), "none required");
        t.update(1, 1, 60);
        assert!(t.in_sync(100, 1, 50));
        assert!(!t.in_sync(110, 1, 50), "the best is 50 bytes behind");
        assert!(!t.in_sync(100, 2, 50), "one slave of two");
        t.update(2, 2, 10);
        assert!(
            t.in_sync(100, 2, 50),
            "only the best must be within the gap"
        );
    }

    #[test]
    fn only_satisfied_waiters_wake() {
        let t = Arc::new(AckTable::default());
        let spawn = |target: u64, count: usize| {
            let t = t.clone();
            std::thread::spawn(move || t.wait_for_ack(target, count, Duration::from_secs(30)))
        };
        let (near, far, two) = (spawn(10, 1), spawn(20, 1), spawn(10, 2));
        while t.lock().waiters.len() < 3 {
            std::thread::yield_now();
        }
        t.update(1, 1, 15);
        assert!(near.join().unwrap());
        assert_eq!(
            t.lock().waiters.len(),
            2,
            "the far and the two-slave waiters still wait"
        );
        t.update(2, 2, 12);
        assert!(two.join().unwrap());
        t.update(1, 1, 20);
        assert!(far.join().unwrap());
        assert!(t.lock().waiters.is_empty());
    }

    #[test]
    fn waiters_wake_on_ack() {
        let t = Arc::new(AckTable::default());
        let t2 = t.clone();
        let h = std::thread::spawn(move || t2.wait_for_ack(10, 1, Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(20));
        t.update(1, 1, 10);
        assert!(h.join().unwrap());
        assert!(!t.wait_for_ack(11, 1, Duration::from_millis(1)));
        // A timed-out waiter leaves nothing behind.
        assert!(t.lock().waiters.is_empty());
        let v = t.version();
        t.notify();
        assert_eq!(t.wait_changed(v, Duration::from_secs(30)), v + 1);
    }
}
