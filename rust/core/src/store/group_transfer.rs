//! RocketMQ's `GroupTransferService`, with its `GroupCommitService` wait folded in: the one place
//! a put waits for what its role and flush type demand, and the one place that decides its
//! `PutStatus`.
//!
//! A put that must wait becomes a request: its record's end (`nextOffset`), a deadline per
//! condition, and a completion. Every kind of waiter goes through the same request: a blocking
//! put parks on a slot its completion fills ([`GroupTransferService::wait`]); a Python future and
//! a network send's response are completions of their own ([`GroupTransferService::submit`]).
//!
//! Requests are resolved by the events that can satisfy them, never by polling: an ack change
//! (pushed by the HA master's ack table through [`GroupTransferService::record_acks`]) and a flush
//! (pushed by the flush service through [`GroupTransferService::on_flushed`]). One thread only
//! expires requests whose deadline passed, sleeping until the earliest one.
//!
//! Completions run outside every lock (one may write a response to a client's socket, or call
//! back into the store), yet in the order their verdicts were reached: see [`Completions`].
//!
//! ▲ RocketMQ wakes its service every 10 ms / 1 ms to re-check; here an ack that covers a
//! request completes it at once, and a slow request never holds back the ones behind it.
//!
//! This file is the service: its expiry thread and the events it is told of. What a put waits
//! for is `policy`, the waiting requests and their settling `requests`, and how each kind of
//! waiter gets its verdict `waiters`.

mod policy;
mod requests;
mod waiters;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use policy::{PutStatus, WaitPolicy};
pub(crate) use requests::Completions;
use requests::{Condition, Request, State};
pub(crate) use waiters::Completion;
use waiters::Slot;
pub use waiters::Verdicts;

use crate::sync::{lock, ServiceThread, ServiceWaiter, Woke};

pub(crate) struct GroupTransferService {
    state: Arc<Mutex<State>>,
    /// The expiry thread, woken by a request due before its current sleep ends.
    service: ServiceThread,
}

/// How long past its last deadline a blocked caller gives up on a verdict that never came.
const BACKSTOP_GRACE: Duration = Duration::from_secs(1);

impl GroupTransferService {
    /// Starts the expiry thread; `flushed` is the offset already on disk.
    pub(crate) fn start(policy: WaitPolicy, flushed: u64) -> Self {
        let state = Arc::new(Mutex::new(State::new(policy, flushed)));
        let worker = state.clone();
        let service = ServiceThread::new("group-transfer");
        // Without it a blocked caller still gets its verdict from the slot's backstop.
        let _ = service.start(move |waiter| Self::expire_loop(&worker, &waiter));
        Self { state, service }
    }

    fn expire_loop(state: &Mutex<State>, waiter: &ServiceWaiter) {
        loop {
            let until = {
                let mut st = lock(state);
                // Idle, it still sleeps only as long as the shortest timeout: a request
                // submitted meanwhile is due later than that, so submitting never has to wake
                // this thread (a futex wake and a context switch on every put of a lone
                // producer).
                let until = st
                    .earliest_deadline()
                    .unwrap_or_else(|| Instant::now() + st.policy.shortest_timeout());
                st.sleeping_until = Some(until);
                until
            };
            if waiter.wait_for_running(Some(until)) == Woke::Stopped {
                return;
            }
            {
                let mut st = lock(state);
                let settled = st.settle(Instant::now());
                st.finish(settled);
            }
            Completions(state).run();
        }
    }

    pub(crate) fn policy(&self) -> WaitPolicy {
        lock(&self.state).policy.clone()
    }

    /// Replaces the policy; requests already waiting keep their deadlines.
    pub(crate) fn set_policy(&self, policy: WaitPolicy) {
        lock(&self.state).policy = policy;
    }

    /// Queues a wait for the put whose record ends at `next_offset`; `done` gets the verdict,
    /// at once when nothing needs waiting for.
    pub(crate) fn submit(&self, next_offset: u64, done: Completion) {
        let now = Instant::now();
        let st = lock(&self.state);
        let flush = match st.policy.sync_flush_timeout {
            None => Condition::Met,
            Some(_) if st.flushed >= next_offset => Condition::Met,
            Some(_) if st.flush_failed => Condition::TimedOut,
            Some(t) => Condition::Waiting(now + t),
        };
        let (slaves, in_sync) = (st.policy.slaves, st.in_sync(next_offset));
        let replication = if !in_sync || st.replicated(next_offset, slaves) {
            Condition::Met
        } else {
            Condition::Waiting(now + st.policy.slave_timeout)
        };
        let request = Request {
            next_offset,
            slaves,
            flush,
            replication,
            slave_not_available: !in_sync,
            done,
        };
        self.enqueue(st, request);
    }

    fn enqueue(&self, mut st: std::sync::MutexGuard<'_, State>, mut request: Request) {
        if st.stop {
            request.time_out();
        }
        if request.settled() {
            // Settled by acks and flushes already applied: completed here at once, not queued
            // behind a finisher busy with other puts (a put that needs no wait never waits).
            drop(st);
            let status = request.status();
            return (request.done)(status);
        }
        let due = [request.flush, request.replication]
            .into_iter()
            .filter_map(|c| match c {
                Condition::Waiting(d) => Some(d),
                _ => None,
            })
            .min();
        st.requests.push(request);
        // Only a request due before the thread's wake-up needs to wake it: with the policy's
        // timeouts never (see `expire_loop`), with a shorter explicit wait sometimes.
        if due.is_some() && st.sleeping_until.is_none_or(|s| due.is_some_and(|d| d < s)) {
            st.sleeping_until = due;
            drop(st);
            self.service.wakeup();
        }
    }

    /// Blocks until `slaves` distinct slaves acked `offset`, whatever the policy; false after
    /// `timeout`. For operators and benchmarks: a caught-up slave before a switch-over.
    pub(crate) fn wait_for_acks(&self, offset: u64, slaves: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let (slot, done) = Slot::new();
        let st = lock(&self.state);
        let replication = if st.replicated(offset, slaves) {
            Condition::Met
        } else {
            Condition::Waiting(deadline)
        };
        let request = Request {
            next_offset: offset,
            slaves,
            flush: Condition::Met,
            replication,
            slave_not_available: false,
            done,
        };
        self.enqueue(st, request);
        slot.wait(deadline + BACKSTOP_GRACE) == PutStatus::PutOk
    }

    /// Blocks until the put ending at `next_offset` is settled; returns its verdict.
    pub(crate) fn wait(&self, next_offset: u64) -> PutStatus {
        let (slot, done) = Slot::new();
        let longest = {
            let p = lock(&self.state).policy.clone();
            p.sync_flush_timeout
                .map_or(p.slave_timeout, |t| t.max(p.slave_timeout))
        };
        let backstop = Instant::now() + longest + BACKSTOP_GRACE;
        self.submit(next_offset, done);
        slot.wait(backstop)
    }

    /// RocketMQ's `isSlaveOK` for a put ending at `next_offset`, under the current policy.
    #[cfg(test)]
    pub(crate) fn in_sync(&self, next_offset: u64) -> bool {
        lock(&self.state).in_sync(next_offset)
    }

    /// The acks changed: `covered` has each distinct slave's best ack, highest first.
    #[cfg(test)]
    pub(crate) fn on_acks(&self, covered: Vec<u64>) {
        self.record_acks(covered).run();
    }

    /// The acks changed, for a caller holding a lock: the verdicts are reached now, the
    /// completions run when the caller runs the result, after releasing its lock.
    pub(crate) fn record_acks(&self, covered: Vec<u64>) -> Completions<'_> {
        let mut st = lock(&self.state);
        st.covered = covered;
        if !st.requests.is_empty() {
            let settled = st.settle(Instant::now());
            st.finish(settled);
        }
        Completions(&self.state)
    }

    /// The flush service made `flushed` durable, or failed (`Err`: puts needing a flush time
    /// out instead of waiting for a flush that will not come).
    pub(crate) fn on_flushed(&self, flushed: Result<u64, ()>) {
        let mut st = lock(&self.state);
        match flushed {
            Ok(offset) => {
                st.flushed = st.flushed.max(offset);
                st.flush_failed = false;
            }
            Err(()) => st.flush_failed = true,
        }
        if st.requests.is_empty() {
            return;
        }
        let settled = st.settle(Instant::now());
        st.finish(settled);
        drop(st);
        Completions(&self.state).run();
    }

    /// Pending requests, for status and tests.
    pub(crate) fn pending(&self) -> usize {
        lock(&self.state).requests.len()
    }

    /// Ends the expiry thread; requests still waiting are settled as timed out.
    pub(crate) fn shutdown(&self) {
        {
            let mut st = lock(&self.state);
            st.stop = true;
            st.requests.iter_mut().for_each(Request::time_out);
            let pending = std::mem::take(&mut st.requests);
            st.finish(pending);
        }
        self.service.shutdown();
        Completions(&self.state).run();
    }
}

impl Drop for GroupTransferService {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn sync_master(slaves: usize, timeout_ms: u64) -> WaitPolicy {
        WaitPolicy {
            slaves,
            slave_timeout: Duration::from_millis(timeout_ms),
            ..WaitPolicy::default()
        }
    }

    fn submit(g: &GroupTransferService, next: u64) -> mpsc::Receiver<PutStatus> {
        let (tx, rx) = mpsc::channel();
        g.submit(
            next,
            Box::new(move |s| {
                let _ = tx.send(s);
            }),
        );
        rx
    }

    const LONG: Duration = Duration::from_secs(60);

    #[test]
    fn each_request_gets_its_own_verdict_when_its_ack_arrives() {
        let g = GroupTransferService::start(sync_master(1, 60_000), 0);
        g.on_acks(vec![0]);
        let (near, far) = (submit(&g, 10), submit(&g, 20));
        g.on_acks(vec![15]);
        assert_eq!(near.recv_timeout(LONG), Ok(PutStatus::PutOk));
        assert!(
            far.try_recv().is_err(),
            "not acked, a minute from its deadline"
        );
        assert_eq!(g.pending(), 1);
        g.on_acks(vec![20]);
        assert_eq!(far.recv_timeout(LONG), Ok(PutStatus::PutOk));
    }

    #[test]
    fn a_request_past_its_deadline_times_out_alone() {
        let g = GroupTransferService::start(sync_master(1, 60_000), 0);
        g.on_acks(vec![0]);
        let slow = submit(&g, 10);
        g.set_policy(sync_master(1, 20));
        let expiring = submit(&g, 30);
        assert_eq!(
            expiring.recv_timeout(LONG),
            Ok(PutStatus::FlushSlaveTimeout)
        );
        assert!(slow.try_recv().is_err());
        g.shutdown();
        assert_eq!(
            slow.recv_timeout(LONG),
            Ok(PutStatus::FlushSlaveTimeout),
            "shutdown settles what still waits as not acknowledged in time"
        );
    }

    #[test]
    fn the_in_sync_check_refuses_at_once() {
        let g = GroupTransferService::start(sync_master(1, 60_000), 0);
        assert_eq!(g.wait(10), PutStatus::SlaveNotAvailable, "no slave");
        g.on_acks(vec![5]);
        let mut far_behind = sync_master(1, 60_000);
        far_behind.max_gap_not_in_sync = 100;
        g.set_policy(far_behind);
        assert_eq!(
            g.wait(200),
            PutStatus::SlaveNotAvailable,
            "the best slave lags"
        );
        g.set_policy(sync_master(2, 60_000));
        assert_eq!(g.wait(5), PutStatus::SlaveNotAvailable, "one slave of two");
        g.on_acks(vec![9, 5]);
        assert_eq!(g.wait(5), PutStatus::PutOk, "both acked already");
    }

    #[test]
    fn distinct_slaves_are_counted_by_their_position() {
        let g = GroupTransferService::start(sync_master(2, 60_000), 0);
        g.on_acks(vec![0, 0]);
        let both = submit(&g, 10);
        g.on_acks(vec![15, 0]);
        assert!(both.try_recv().is_err(), "one slave of two");
        g.on_acks(vec![15, 12]);
        assert_eq!(both.recv_timeout(LONG), Ok(PutStatus::PutOk));
    }

    #[test]
    fn flush_and_replication_are_waited_for_together() {
        let policy = WaitPolicy {
            sync_flush_timeout: Some(Duration::from_secs(60)),
            ..sync_master(1, 60_000)
        };
        let g = GroupTransferService::start(policy, 0);
        g.on_acks(vec![0]);
        let r = submit(&g, 10);
        g.on_acks(vec![10]);
        assert!(r.try_recv().is_err(), "acked but not flushed");
        g.on_flushed(Ok(10));
        assert_eq!(r.recv_timeout(LONG), Ok(PutStatus::PutOk));

        let failing = submit(&g, 20);
        g.on_flushed(Err(()));
        g.on_acks(vec![20]);
        assert_eq!(
            failing.recv_timeout(LONG),
            Ok(PutStatus::FlushDiskTimeout),
            "a failed flush is reported before the slaves' verdict"
        );
    }

    #[test]
    fn verdicts_queue_by_ticket() {
        let g = GroupTransferService::start(sync_master(1, 60_000), 0);
        g.on_acks(vec![0]);
        let verdicts = Arc::new(Verdicts::default());
        let (a, done_a) = verdicts.ticket();
        let (b, done_b) = verdicts.ticket();
        g.submit(10, done_a);
        g.submit(20, done_b);
        assert!(verdicts.wait(Duration::ZERO).is_empty());
        g.on_acks(vec![20]);
        let mut got = verdicts.wait(LONG);
        got.sort_unstable_by_key(|v| v.0);
        assert_eq!(got, vec![(a, PutStatus::PutOk), (b, PutStatus::PutOk)]);
    }

    #[test]
    fn a_wake_ends_a_wait_even_when_it_comes_first() {
        let verdicts = Arc::new(Verdicts::<PutStatus>::default());
        verdicts.wake();
        let started = Instant::now();
        assert!(verdicts.wait(LONG).is_empty());
        assert!(
            started.elapsed() < LONG,
            "the wake was lost: the wait ran to its timeout"
        );
        // Taken by that wait: the next one waits for its own.
        assert!(verdicts.wait(Duration::from_millis(20)).is_empty());
        let waiter = {
            let verdicts = verdicts.clone();
            std::thread::spawn(move || verdicts.wait(LONG))
        };
        verdicts.wake();
        assert!(waiter.join().unwrap().is_empty());
    }

    #[test]
    fn an_explicit_ack_wait_ignores_the_policy() {
        let g = GroupTransferService::start(WaitPolicy::default(), 0);
        assert!(
            !g.wait_for_acks(10, 1, Duration::from_millis(10)),
            "no slave"
        );
        g.on_acks(vec![10]);
        assert!(g.wait_for_acks(10, 1, Duration::ZERO));
        assert!(
            !g.wait_for_acks(10, 2, Duration::from_millis(10)),
            "one slave of two"
        );
    }

    #[test]
    fn without_anything_to_wait_for_a_put_is_ok_at_once() {
        let g = GroupTransferService::start(WaitPolicy::default(), 0);
        assert_eq!(g.wait(1 << 40), PutStatus::PutOk);
        assert_eq!(g.pending(), 0);
    }
}
