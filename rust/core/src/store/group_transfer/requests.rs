//! The waiting puts: each request's conditions and deadlines, the acks and flush that settle
//! them, and the in-order run of their completions once settled. The service decides when to
//! settle; this decides what is settled and who runs the completions.

use std::sync::Mutex;
use std::time::Instant;

use super::policy::{PutStatus, WaitPolicy};
use super::waiters::Completion;
use crate::sync::lock;

/// One condition of a request: still waited for (with its deadline), or settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Condition {
    Waiting(Instant),
    Met,
    TimedOut,
}

pub(super) struct Request {
    pub(super) next_offset: u64,
    /// Distinct slaves whose ack must cover `next_offset`.
    pub(super) slaves: usize,
    pub(super) flush: Condition,
    pub(super) replication: Condition,
    /// Refused at submit by the in-sync check: SLAVE_NOT_AVAILABLE once the flush is settled.
    pub(super) slave_not_available: bool,
    pub(super) done: Completion,
}

impl Request {
    /// Settles whatever still waits as not done in time (shutdown).
    pub(super) fn time_out(&mut self) {
        for c in [&mut self.flush, &mut self.replication] {
            if matches!(c, Condition::Waiting(_)) {
                *c = Condition::TimedOut;
            }
        }
    }

    pub(super) fn settled(&self) -> bool {
        !matches!(self.flush, Condition::Waiting(_))
            && !matches!(self.replication, Condition::Waiting(_))
    }

    /// The flush verdict first, as RocketMQ reports a put whose msync timed out whatever its
    /// slaves did.
    pub(super) fn status(&self) -> PutStatus {
        if self.flush == Condition::TimedOut {
            PutStatus::FlushDiskTimeout
        } else if self.slave_not_available {
            PutStatus::SlaveNotAvailable
        } else if self.replication == Condition::TimedOut {
            PutStatus::FlushSlaveTimeout
        } else {
            PutStatus::PutOk
        }
    }
}

#[derive(Default)]
pub(super) struct State {
    pub(super) policy: WaitPolicy,
    /// Each distinct slave's best ack, highest first.
    pub(super) covered: Vec<u64>,
    pub(super) flushed: u64,
    /// The flush thread's last error: puts that need a flush fail at once instead of waiting.
    pub(super) flush_failed: bool,
    pub(super) requests: Vec<Request>,
    /// The deadline the service thread sleeps until, to know when a new request must wake it.
    pub(super) sleeping_until: Option<Instant>,
    /// Shut down: a request submitted now is settled at once as timed out.
    pub(super) stop: bool,
    /// Settled requests whose completions have not run yet, in the order they were settled.
    unfinished: Vec<Request>,
    /// A thread is running the completions of `unfinished` (see [`Completions::run`]).
    finishing: bool,
}

impl State {
    /// No request yet, under `policy`, with `flushed` already on disk.
    pub(super) fn new(policy: WaitPolicy, flushed: u64) -> Self {
        Self {
            policy,
            flushed,
            ..Self::default()
        }
    }

    pub(super) fn replicated(&self, next_offset: u64, slaves: usize) -> bool {
        slaves == 0
            || self
                .covered
                .get(slaves - 1)
                .is_some_and(|o| *o >= next_offset)
    }

    /// RocketMQ's `isSlaveOK`: enough distinct slaves connected, and the best of them fewer
    /// than `haMaxGapNotInSync` bytes behind the put.
    pub(super) fn in_sync(&self, next_offset: u64) -> bool {
        self.policy.in_sync_replicas.is_some()
            || self.covered.len() >= self.policy.slaves
                && self.covered.first().is_none_or(|best| {
                    next_offset.saturating_sub(*best) < self.policy.max_gap_not_in_sync
                })
    }

    /// Marks what the current acks, flush and clock settle; returns the settled requests.
    pub(super) fn settle(&mut self, now: Instant) -> Vec<Request> {
        let (flushed, failed) = (self.flushed, self.flush_failed);
        let covered = std::mem::take(&mut self.covered);
        let mut settled = Vec::new();
        let mut i = 0;
        while i < self.requests.len() {
            let r = &mut self.requests[i];
            if let Condition::Waiting(deadline) = r.flush {
                if flushed >= r.next_offset {
                    r.flush = Condition::Met;
                } else if failed || now >= deadline {
                    r.flush = Condition::TimedOut;
                }
            }
            if let Condition::Waiting(deadline) = r.replication {
                let n = r.slaves;
                if n == 0 || covered.get(n - 1).is_some_and(|o| *o >= r.next_offset) {
                    r.replication = Condition::Met;
                } else if now >= deadline {
                    r.replication = Condition::TimedOut;
                }
            }
            if r.settled() {
                settled.push(self.requests.swap_remove(i));
            } else {
                i += 1;
            }
        }
        self.covered = covered;
        settled
    }

    pub(super) fn earliest_deadline(&self) -> Option<Instant> {
        self.requests
            .iter()
            .flat_map(|r| [r.flush, r.replication])
            .filter_map(|c| match c {
                Condition::Waiting(d) => Some(d),
                _ => None,
            })
            .min()
    }
}

/// Settled requests queued under the state lock, whose completions must still run: by
/// [`Completions::run`] once the caller released every lock it holds (the HA ack table's
/// included).
///
/// Why this keeps verdicts in order without a lock around the completions: verdicts are
/// decided only under the state lock, from acks and flushes applied in their order (the ack
/// table applies each change under its own lock, see `AckTable::update`), and each settled
/// batch joins `unfinished` under that same lock, lowest offset first. Exactly one thread at a
/// time (`finishing`) runs them, taking batches in queue order, and it only gives up the role
/// under the lock after seeing the queue empty: a batch queued by a racing ack is run either by
/// its own thread or by the finisher already running, never lost, never before an earlier one.
/// So a later ack never completes its puts before an earlier ack's, and since a higher offset
/// is acked only after every lower one, no put is answered before one below it that the same
/// acks settled. (A request settled when submitted completes on its submitter at once: its
/// verdict needed no event, so there is nothing to order it after.)
#[must_use = "the completions run only in Completions::run"]
pub(crate) struct Completions<'a>(pub(super) &'a Mutex<State>);

impl Completions<'_> {
    pub(crate) fn run(self) {
        let mut st = lock(self.0);
        if st.finishing {
            return;
        }
        st.finishing = true;
        // A completion that panics gives up the role, so that later ones still run.
        let _role = FinisherRole(self.0);
        loop {
            let batch = std::mem::take(&mut st.unfinished);
            if batch.is_empty() {
                st.finishing = false;
                // Released before the role is dropped: on a thread already unwinding (a
                // store dropped by a panic) its drop takes this lock.
                drop(st);
                return;
            }
            drop(st);
            for r in batch {
                let status = r.status();
                (r.done)(status);
            }
            st = lock(self.0);
        }
    }
}

struct FinisherRole<'a>(&'a Mutex<State>);

impl Drop for FinisherRole<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            lock(self.0).finishing = false;
        }
    }
}

impl State {
    /// Queues `settled` for [`Completions::run`], in offset order.
    pub(super) fn finish(&mut self, mut settled: Vec<Request>) {
        settled.sort_by_key(|r| r.next_offset);
        self.unfinished.append(&mut settled);
    }
}
