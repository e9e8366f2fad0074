//! The locking helpers every thread of the core shares: a poison-tolerant lock, the one condvar
//! wait with a deadline that every timed wait (flush, group transfer, events) uses, the
//! [`ServiceThread`] every background service runs on, and the bounded event queue the event
//! loops report through.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::thread::JoinHandle;
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

/// Why a [`ServiceWaiter::wait_for_running`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Woke {
    /// [`ServiceThread::shutdown`]: the service does its last work and returns.
    Stopped,
    /// [`ServiceThread::wakeup`], now or before the wait began.
    Notified,
    /// The deadline passed.
    Timeout,
}

#[derive(Default)]
struct Flags {
    /// RocketMQ's `hasNotified`: a wake-up that comes while the service works is kept for its
    /// next wait instead of being lost.
    notified: bool,
    stopped: bool,
}

#[derive(Default)]
struct Control {
    flags: Mutex<Flags>,
    cv: Condvar,
}

/// RocketMQ's `ServiceThread`: a named thread that sleeps in [`ServiceWaiter::wait_for_running`]
/// until woken, a deadline, or stop, and is stopped and joined by [`Self::shutdown`] or on drop.
/// It provides only the wake, the deadline and the stop: the service keeps its own state and
/// decides on waking what there is to do, so a signal never depends on how the state is locked.
pub(crate) struct ServiceThread {
    name: &'static str,
    /// Runs off the latency path: see [`run_in_background`].
    background: bool,
    control: Arc<Control>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// The service thread's side of a [`ServiceThread`], handed to its body.
pub(crate) struct ServiceWaiter(Arc<Control>);

impl ServiceWaiter {
    /// RocketMQ's `waitForRunning`: returns at once when woken since the last wait (taking the
    /// wake-up) or stopped, else sleeps until either or `deadline` (`None`: none).
    pub(crate) fn wait_for_running(&self, deadline: Option<Instant>) -> Woke {
        let (mut flags, _) = wait_until(&self.0.cv, lock(&self.0.flags), deadline, |f| {
            f.stopped || f.notified
        });
        let notified = std::mem::take(&mut flags.notified);
        if flags.stopped {
            Woke::Stopped
        } else if notified {
            Woke::Notified
        } else {
            Woke::Timeout
        }
    }

    pub(crate) fn is_stopped(&self) -> bool {
        lock(&self.0.flags).stopped
    }
}

impl ServiceThread {
    /// A service not started yet: wake-ups are kept for its first wait, a shutdown ends it
    /// before it begins.
    pub(crate) fn new(name: &'static str) -> Self {
        Self {
            name,
            background: false,
            control: Arc::default(),
            thread: Mutex::new(None),
        }
    }

    /// A service whose work no request waits for (the index, retention): its thread
    /// [runs in the background](run_in_background).
    pub(crate) fn background(name: &'static str) -> Self {
        let mut service = Self::new(name);
        service.background = true;
        service
    }

    /// Runs `body` on the service's thread; it returns once its waiter says [`Woke::Stopped`].
    pub(crate) fn start(
        &self,
        body: impl FnOnce(ServiceWaiter) + Send + 'static,
    ) -> std::io::Result<()> {
        let waiter = ServiceWaiter(self.control.clone());
        let background = self.background;
        let thread = std::thread::Builder::new()
            .name(format!("rocketha-{}", self.name))
            .spawn(move || {
                if background {
                    run_in_background();
                }
                body(waiter)
            })?;
        *lock(&self.thread) = Some(thread);
        Ok(())
    }

    /// RocketMQ's `wakeup`: ends the current wait, or the next one if the service is busy. A
    /// wake-up already pending costs no futex wake.
    pub(crate) fn wakeup(&self) {
        let mut flags = lock(&self.control.flags);
        if !flags.notified {
            flags.notified = true;
            self.control.cv.notify_one();
        }
    }

    pub(crate) fn is_stopped(&self) -> bool {
        lock(&self.control.flags).stopped
    }

    /// Stops the service and waits for its body to return; safe to call again, and from the
    /// service's own thread (which then is not joined: it ends when its body returns).
    pub(crate) fn shutdown(&self) {
        lock(&self.control.flags).stopped = true;
        self.control.cv.notify_all();
        let thread = lock(&self.thread).take();
        if let Some(thread) = thread {
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}

impl Drop for ServiceThread {
    fn drop(&mut self) {
        self.shutdown();
    }
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

/// Puts the calling thread in Linux's SCHED_BATCH class, for threads whose work no request
/// waits for. Such a thread still gets its share of the CPU, but waking it never preempts the
/// thread that woke it: a put that wakes the index or the prefault no longer gives up its CPU
/// in the middle of its path, which `perf sched` showed costing a SYNC send two context
/// switches on the master and two on the slave before the slave's ack went out.
pub(crate) fn run_in_background() {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param for SCHED_BATCH,
        // which takes priority 0 and needs no privilege. A refusal leaves the thread as it was.
        unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
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

    const LONG: Duration = Duration::from_secs(3600);

    #[test]
    fn a_wakeup_before_the_wait_is_not_lost() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let service = ServiceThread::new("test-service");
        service
            .start(move |waiter| {
                // Woken before it waits: the wait returns at once instead of sleeping an hour.
                let _ = go_rx.recv();
                let _ = tx.send(waiter.wait_for_running(Instant::now().checked_add(LONG)));
                let _ = tx.send(waiter.wait_for_running(None));
            })
            .unwrap();
        service.wakeup();
        service.wakeup();
        go_tx.send(()).unwrap();
        assert_eq!(rx.recv().unwrap(), Woke::Notified);
        service.shutdown();
        assert_eq!(
            rx.recv().unwrap(),
            Woke::Stopped,
            "two wake-ups before one wait are one wake-up"
        );
        assert_eq!(
            ServiceWaiter(Arc::default()).wait_for_running(Some(Instant::now())),
            Woke::Timeout
        );
    }

    #[test]
    fn shutdown_and_drop_join_the_thread() {
        for by_drop in [false, true] {
            let ran_last = Arc::new(Mutex::new(false));
            let flag = ran_last.clone();
            let service = ServiceThread::new("test-service");
            service
                .start(move |waiter| {
                    while waiter.wait_for_running(None) != Woke::Stopped {}
                    *lock(&flag) = true;
                })
                .unwrap();
            if by_drop {
                drop(service);
            } else {
                service.shutdown();
                assert!(service.is_stopped());
                service.shutdown();
            }
            assert!(
                *lock(&ran_last),
                "returned before the body ended (drop: {by_drop})"
            );
        }
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

    #[cfg(target_os = "linux")]
    #[test]
    fn a_background_service_runs_in_the_batch_class_and_others_do_not() {
        let policy = |service: ServiceThread| {
            let (tx, rx) = std::sync::mpsc::channel();
            service
                .start(move |_| {
                    // SAFETY: pid 0 is the calling thread.
                    tx.send(unsafe { libc::sched_getscheduler(0) }).unwrap();
                })
                .unwrap();
            rx.recv().unwrap()
        };
        assert_eq!(policy(ServiceThread::background("bg")), libc::SCHED_BATCH);
        assert_eq!(policy(ServiceThread::new("fg")), libc::SCHED_OTHER);
    }
}
