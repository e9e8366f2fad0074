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

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::sync::{lock, wait_until, ServiceThread, ServiceWaiter, Woke};

/// The outcome of a put, as RocketMQ's `PutMessageStatus` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutStatus {
    PutOk,
    FlushDiskTimeout,
    FlushSlaveTimeout,
    SlaveNotAvailable,
}

impl PutStatus {
    pub const ALL: [PutStatus; 4] = [
        PutStatus::PutOk,
        PutStatus::FlushDiskTimeout,
        PutStatus::FlushSlaveTimeout,
        PutStatus::SlaveNotAvailable,
    ];

    pub fn name(self) -> &'static str {
        match self {
            PutStatus::PutOk => "PUT_OK",
            PutStatus::FlushDiskTimeout => "FLUSH_DISK_TIMEOUT",
            PutStatus::FlushSlaveTimeout => "FLUSH_SLAVE_TIMEOUT",
            PutStatus::SlaveNotAvailable => "SLAVE_NOT_AVAILABLE",
        }
    }
}

/// What a put waits for, set from the role and flush type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitPolicy {
    /// SYNC_FLUSH: how long to wait for the msync (`syncFlushTimeout`); `None` for ASYNC_FLUSH.
    pub sync_flush_timeout: Option<Duration>,
    /// SYNC_MASTER: distinct slaves that must ack (`inSyncReplicas - 1`); 0 otherwise.
    pub slaves: usize,
    /// `slaveTimeout`.
    pub slave_timeout: Duration,
    /// `haMaxGapNotInSync`: RocketMQ's `isSlaveOK` refuses to wait on a slave further behind.
    pub max_gap_not_in_sync: u64,
    /// Controller mode, as master: its SyncStateSet's size, itself included (RocketMQ's
    /// `inSyncReplicasNums`). A put then waits for its slaves up to `slaveTimeout` without the
    /// `isSlaveOK` check (RocketMQ 5's controller-mode master never answers SLAVE_NOT_AVAILABLE:
    /// a member that has not reported yet, as a RocketMQ slave does only every
    /// `haSendHeartbeatInterval` when idle, is waited for); `None` in classic HA.
    pub in_sync_replicas: Option<usize>,
    /// `minInSyncReplicas`: with `in_sync_replicas`, a put that waits for replication is refused
    /// before its append while the SyncStateSet is smaller (see [`WaitPolicy::admits`]).
    pub min_in_sync_replicas: usize,
}

impl Default for WaitPolicy {
    /// ASYNC_MASTER with ASYNC_FLUSH, RocketMQ's defaults for the rest.
    fn default() -> Self {
        Self {
            sync_flush_timeout: None,
            slaves: 0,
            slave_timeout: Duration::from_millis(3000),
            max_gap_not_in_sync: 256 << 20,
            in_sync_replicas: None,
            min_in_sync_replicas: 1,
        }
    }
}

impl WaitPolicy {
    /// The soonest any request under this policy can be due.
    fn shortest_timeout(&self) -> Duration {
        self.sync_flush_timeout
            .map_or(self.slave_timeout, |t| t.min(self.slave_timeout))
    }

    /// Whether a put must wait at all: without it, every put is PUT_OK once appended.
    pub fn waits(&self) -> bool {
        self.sync_flush_timeout.is_some() || self.slaves > 0
    }

    /// RocketMQ's check before a controller-mode append: `inSyncReplicasNums` at least
    /// `minInSyncReplicas` (IN_SYNC_REPLICAS_NOT_ENOUGH otherwise); always true in classic HA.
    pub fn admits(&self) -> Result<(), (usize, usize)> {
        match self.in_sync_replicas {
            Some(n) if n < self.min_in_sync_replicas => Err((n, self.min_in_sync_replicas)),
            _ => Ok(()),
        }
    }
}

/// Called once with the verdict of a request.
pub(crate) type Completion = Box<dyn FnOnce(PutStatus) + Send>;

/// One condition of a request: still waited for (with its deadline), or settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Condition {
    Waiting(Instant),
    Met,
    TimedOut,
}

struct Request {
    next_offset: u64,
    /// Distinct slaves whose ack must cover `next_offset`.
    slaves: usize,
    flush: Condition,
    replication: Condition,
    /// Refused at submit by the in-sync check: SLAVE_NOT_AVAILABLE once the flush is settled.
    slave_not_available: bool,
    done: Completion,
}

impl Request {
    /// Settles whatever still waits as not done in time (shutdown).
    fn time_out(&mut self) {
        for c in [&mut self.flush, &mut self.replication] {
            if matches!(c, Condition::Waiting(_)) {
                *c = Condition::TimedOut;
            }
        }
    }

    fn settled(&self) -> bool {
        !matches!(self.flush, Condition::Waiting(_))
            && !matches!(self.replication, Condition::Waiting(_))
    }

    /// The flush verdict first, as RocketMQ reports a put whose msync timed out whatever its
    /// slaves did.
    fn status(&self) -> PutStatus {
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
struct State {
    policy: WaitPolicy,
    /// Each distinct slave's best ack, highest first.
    covered: Vec<u64>,
    flushed: u64,
    /// The flush thread's last error: puts that need a flush fail at once instead of waiting.
    flush_failed: bool,
    requests: Vec<Request>,
    /// The deadline the service thread sleeps until, to know when a new request must wake it.
    sleeping_until: Option<Instant>,
    /// Shut down: a request submitted now is settled at once as timed out.
    stop: bool,
    /// Settled requests whose completions have not run yet, in the order they were settled.
    unfinished: Vec<Request>,
    /// A thread is running the completions of `unfinished` (see [`Completions::run`]).
    finishing: bool,
}

impl State {
    fn replicated(&self, next_offset: u64, slaves: usize) -> bool {
        slaves == 0
            || self
                .covered
                .get(slaves - 1)
                .is_some_and(|o| *o >= next_offset)
    }

    /// RocketMQ's `isSlaveOK`: enough distinct slaves connected, and the best of them fewer
    /// than `haMaxGapNotInSync` bytes behind the put.
    fn in_sync(&self, next_offset: u64) -> bool {
        self.policy.in_sync_replicas.is_some()
            || self.covered.len() >= self.policy.slaves
                && self.covered.first().is_none_or(|best| {
                    next_offset.saturating_sub(*best) < self.policy.max_gap_not_in_sync
                })
    }

    /// Marks what the current acks, flush and clock settle; returns the settled requests.
    fn settle(&mut self, now: Instant) -> Vec<Request> {
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

    fn earliest_deadline(&self) -> Option<Instant> {
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

pub(crate) struct GroupTransferService {
    state: Arc<Mutex<State>>,
    /// The expiry thread, woken by a request due before its current sleep ends.
    service: ServiceThread,
}

/// How long past its last deadline a blocked caller gives up on a verdict that never came.
const BACKSTOP_GRACE: Duration = Duration::from_secs(1);

/// Where a blocked caller's verdict lands.
struct Slot(Arc<(Mutex<Option<PutStatus>>, Condvar)>);

impl Slot {
    fn new() -> (Self, Completion) {
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
    fn wait(self, backstop: Instant) -> PutStatus {
        let (guard, _) = wait_until(&self.0 .1, lock(&self.0 .0), Some(backstop), |s| {
            s.is_some()
        });
        guard.unwrap_or(PutStatus::FlushSlaveTimeout)
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
pub(crate) struct Completions<'a>(&'a Mutex<State>);

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
    fn finish(&mut self, mut settled: Vec<Request>) {
        settled.sort_by_key(|r| r.next_offset);
        self.unfinished.append(&mut settled);
    }
}

impl GroupTransferService {
    /// Starts the expiry thread; `flushed` is the offset already on disk.
    pub(crate) fn start(policy: WaitPolicy, flushed: u64) -> Self {
        let state = Arc::new(Mutex::new(State {
            policy,
            flushed,
            ..State::default()
        }));
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
