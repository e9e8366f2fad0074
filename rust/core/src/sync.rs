//! The locking helpers every thread of the core shares: a poison-tolerant lock, the one condvar
//! wait with a deadline that every timed wait (flush, group transfer, events) uses, and the
//! bounded event queue the event loops report through.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

/// Locks `m`, taking the data even if a thread panicked while holding it: every guarded state
/// in the core stays consistent between statements, and a panic must not wedge the broker.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// [`lock`] for readers of an `RwLock`.
pub(crate) fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

/// [`lock`] for writers of an `RwLock`.
pub(crate) fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}

/// Waits on `cv` until `done(state)` holds or `deadline` passes, whichever comes first (`None`:
/// no deadline). Returns the guard and whether `done` held. Spurious wake-ups just re-check.
pub(crate) fn wait_until<'a, T>(
    cv: &Condvar,
    mut guard: MutexGuard<'a, T>,
    deadline: Option<Instant>,
    mut done: impl FnMut(&mut T) -> bool,
) -> (MutexGuard<'a, T>, bool) {
    loop {
        if done(&mut guard) {
            return (guard, true);
        }
        guard = match deadline {
            None => cv.wait(guard).unwrap_or_else(|p| p.into_inner()),
            Some(deadline) => {
                let now = Instant::now();
                if now >= deadline {
                    return (guard, false);
                }
                cv.wait_timeout(guard, deadline - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0
            }
        };
    }
}

/// `timeout` from now, or `None` (no deadline) when that is beyond what an `Instant` holds: a
/// caller asking for forever, or a peer announcing an absurd timeout, gets forever instead of
/// an overflow panic.
pub(crate) fn deadline_after(timeout: Duration) -> Option<Instant> {
    Instant::now().checked_add(timeout)
}

/// Enough to show the last events even if nobody drains them.
const MAX_QUEUED_EVENTS: usize = 10_000;

/// Events queued by a loop thread, drained by whoever observes the service (the Python
/// wrapper logs them). Bounded: the oldest go first when nobody drains.
pub(crate) struct EventQueue<E> {
    state: Mutex<Queued<E>>,
    ready: Condvar,
}

struct Queued<E> {
    events: VecDeque<E>,
    /// The service stopped: drains return at once instead of waiting for events that will
    /// not come, so an observer can block without a timeout and still see the end.
    closed: bool,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self {
            state: Mutex::new(Queued {
                events: VecDeque::new(),
                closed: false,
            }),
            ready: Condvar::new(),
        }
    }
}

impl<E> EventQueue<E> {
    pub(crate) fn push(&self, event: E) {
        let mut q = lock(&self.state);
        if q.events.len() >= MAX_QUEUED_EVENTS {
            q.events.pop_front();
        }
        q.events.push_back(event);
        self.ready.notify_all();
    }

    /// Waits up to `timeout` for events and returns all queued ones; returns at once once
    /// closed.
    pub(crate) fn drain(&self, timeout: Duration) -> Vec<E> {
        let (mut q, _) = wait_until(
            &self.ready,
            lock(&self.state),
            deadline_after(timeout),
            |q| !q.events.is_empty() || q.closed,
        );
        q.events.drain(..).collect()
    }

    /// The service stopped: no event will come after the ones still queued.
    pub(crate) fn is_closed(&self) -> bool {
        lock(&self.state).closed
    }

    /// Wakes every drainer, now and later (on shutdown).
    pub(crate) fn close(&self) {
        lock(&self.state).closed = true;
        self.ready.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn returns_when_the_condition_holds_or_the_deadline_passes() {
        let state = Arc::new((Mutex::new(0u32), Condvar::new()));
        let s2 = state.clone();
        let setter = std::thread::spawn(move || {
            *lock(&s2.0) = 3;
            s2.1.notify_all();
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        let (g, ok) = wait_until(&state.1, lock(&state.0), Some(deadline), |v| *v == 3);
        assert!(ok && *g == 3);
        drop(g);
        setter.join().unwrap();
        let (_guard, ok) = wait_until(&state.1, lock(&state.0), Some(Instant::now()), |v| *v == 4);
        assert!(!ok, "a passed deadline returns false at once");
    }

    #[test]
    fn a_closed_event_queue_never_makes_a_drainer_wait() {
        let q = Arc::new(EventQueue::<u32>::default());
        let q2 = q.clone();
        let drainer = std::thread::spawn(move || q2.drain(Duration::from_secs(3600)));
        q.push(1);
        assert_eq!(drainer.join().unwrap(), vec![1]);
        let q2 = q.clone();
        let drainer = std::thread::spawn(move || q2.drain(Duration::from_secs(3600)));
        q.close();
        assert!(drainer.join().unwrap().is_empty());
        q.push(2);
        assert_eq!(q.drain(Duration::from_secs(3600)), vec![2]);
    }
}
