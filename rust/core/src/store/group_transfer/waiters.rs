//! How a waiter learns its put's verdict: a completion called once; a blocked caller's slot
//! that completion fills; or, for waiters that cannot run a completion on another thread, a
//! queue of verdicts by ticket.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::policy::PutStatus;
use crate::sync::{lock, wait_until};

/// Called once with the verdict of a request.
pub(crate) type Completion = Box<dyn FnOnce(PutStatus) + Send>;

/// Where a blocked caller's verdict lands.
pub(super) struct Slot(Arc<(Mutex<Option<PutStatus>>, Condvar)>);

impl Slot {
    pub(super) fn new() -> (Self, Completion) {
        let slot = Arc::new((Mutex::new(None), Condvar::new()));
        let filled = slot.clone();
        let done = Box::new(move |status| {
            *lock(&filled.0) = Some(status);
            filled.1.notify_one();
        });
        (Self(slot), done)
    }

    /// Every request is settled by an event, its deadline or shutdown; `backstop`, a second
    /// past its last deadline, only guards against an expiry thread that could not start.
    pub(super) fn wait(self, backstop: Instant) -> PutStatus {
        let (guard, _) = wait_until(&self.0 .1, lock(&self.0 .0), Some(backstop), |s| {
            s.is_some()
        });
        guard.unwrap_or(PutStatus::FlushSlaveTimeout)
    }
}

/// Verdicts by ticket, for waiters that cannot run a completion on another thread (Python
/// futures, completed by a Python thread that drains this queue with [`Self::wait`]): a put's
/// status here, a network send's outcome in the client.
pub struct Verdicts<T = PutStatus> {
    queue: Mutex<Queued<T>>,
    ready: Condvar,
    next_ticket: std::sync::atomic::AtomicU64,
}

/// What a [`Verdicts::wait`] returns for: verdicts, or a [`Verdicts::wake`] (a flag under the
/// lock, so that a wake that comes before the wait is not lost and the wait does not take it
/// for a spurious wake-up and sleep on).
struct Queued<T> {
    verdicts: Vec<(u64, T)>,
    woken: bool,
}

impl<T> Default for Verdicts<T> {
    fn default() -> Self {
        Self {
            queue: Mutex::new(Queued {
                verdicts: Vec::new(),
                woken: false,
            }),
            ready: Condvar::new(),
            next_ticket: std::sync::atomic::AtomicU64::new(0),
        }
    }
}

impl<T: Send + 'static> Verdicts<T> {
    /// A completion that queues its verdict under a new ticket; returns both.
    pub fn ticket(self: &Arc<Self>) -> (u64, Box<dyn FnOnce(T) + Send>) {
        let ticket = self
            .next_ticket
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let verdicts = self.clone();
        let done = Box::new(move |verdict| {
            lock(&verdicts.queue).verdicts.push((ticket, verdict));
            verdicts.ready.notify_one();
        });
        (ticket, done)
    }

    /// The verdicts queued so far, waiting up to `timeout` for the first one or a
    /// [`Self::wake`].
    pub fn wait(&self, timeout: Duration) -> Vec<(u64, T)> {
        let deadline = Instant::now() + timeout;
        let (mut q, _) = wait_until(&self.ready, lock(&self.queue), Some(deadline), |q| {
            !q.verdicts.is_empty() || q.woken
        });
        q.woken = false;
        std::mem::take(&mut q.verdicts)
    }

    /// Ends the current (or the next) [`Self::wait`] early: more work for its caller, or
    /// shutdown.
    pub fn wake(&self) {
        lock(&self.queue).woken = true;
        self.ready.notify_all();
    }
}
