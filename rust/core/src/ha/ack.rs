//! Slave acknowledgements on the master, and the blocking wait GroupTransferService builds on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

#[derive(Default)]
struct Acks {
    /// connection id -> (slave key, acked offset). The key is the slave's authenticated id, or
    /// the connection id without authentication.
    by_connection: HashMap<u64, (u64, u64)>,
    version: u64,
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
    /// Distinct slaves whose ack covers `target`.
    fn count_at_least(&self, target: u64) -> usize {
        let mut keys: Vec<u64> = self
            .by_connection
            .values()
            .filter(|(_, off)| *off >= target)
            .map(|(k, _)| *k)
            .collect();
        keys.sort_unstable();
        keys.dedup();
        keys.len()
    }
}

impl AckTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, Acks> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn update(&self, connection: u64, slave_key: u64, offset: u64) {
        let mut a = self.lock();
        let prev = a.by_connection.insert(connection, (slave_key, offset));
        if prev.map(|p| p.1) != Some(offset) {
            a.version += 1;
            self.push2slave_max_offset
                .fetch_max(offset, Ordering::AcqRel);
            self.changed.notify_all();
        }
    }

    pub fn remove(&self, connection: u64) {
        let mut a = self.lock();
        if a.by_connection.remove(&connection).is_some() {
            a.version += 1;
            self.changed.notify_all();
        }
    }

    pub fn push2slave_max_offset(&self) -> u64 {
        self.push2slave_max_offset.load(Ordering::Acquire)
    }

    pub fn count_at_least(&self, target: u64) -> usize {
        self.lock().count_at_least(target)
    }

    /// Acked offsets of live slaves (one per distinct slave, its best).
    pub fn slave_offsets(&self) -> Vec<u64> {
        let a = self.lock();
        let mut best: HashMap<u64, u64> = HashMap::new();
        for (k, off) in a.by_connection.values() {
            let e = best.entry(*k).or_default();
            *e = (*e).max(*off);
        }
        best.into_values().collect()
    }

    /// Blocks until `count` distinct slaves acked `target`; false on timeout.
    pub fn wait_for_ack(&self, target: u64, count: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut a = self.lock();
        loop {
            if a.count_at_least(target) >= count {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            a = self
                .changed
                .wait_timeout(a, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Blocks until the table changed since `seen` (or `notify` was called); returns the new
    /// version, or `seen` on timeout.
    pub fn wait_changed(&self, seen: u64, timeout: Duration) -> u64 {
        let deadline = Instant::now() + timeout;
        let mut a = self.lock();
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
        a.version
    }

    pub fn version(&self) -> u64 {
        self.lock().version
    }

    /// Wakes `wait_changed` callers without an ack change (a new request arrived, or shutdown).
    pub fn notify(&self) {
        let mut a = self.lock();
        a.version += 1;
        self.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

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
    fn waiters_wake_on_ack() {
        let t = Arc::new(AckTable::default());
        let t2 = t.clone();
        let h = std::thread::spawn(move || t2.wait_for_ack(10, 1, Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(20));
        t.update(1, 1, 10);
        assert!(h.join().unwrap());
        assert!(!t.wait_for_ack(11, 1, Duration::from_millis(1)));
        let v = t.version();
        t.notify();
        assert_eq!(t.wait_changed(v, Duration::from_secs(30)), v + 1);
    }
}
