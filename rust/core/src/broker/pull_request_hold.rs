//! RocketMQ's `PullRequestHoldService`, event-driven: a suspended pull waits here until the
//! store dispatches a record it can take (the store's arriving listener, on a master's put and
//! on a slave's replication alike) or its `suspendTimeoutMillis` passes, then the service's
//! thread answers it through the connection's `Responder`. RocketMQ re-checks every held pull
//! on a 5 s / 1 s timer; here the only timer is the nearest deadline.
//!
//! A pull is registered, then the queue is looked at again under the same lock the arrivals
//! take, so a record dispatched between the pull's read and its registration still wakes it.
//! Pulls of a closed connection are dropped at once.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::broker::consumer_manager::SubscriptionData;
use crate::remoting::header::PullMessageRequestHeader;
use crate::remoting::{RemotingCommand, Responder};
use crate::store::MessageStore;
use crate::sync::{lock, ServiceThread, ServiceWaiter, Woke};

/// A suspended pull: the request to run again and where its answer goes.
pub(crate) struct HeldPull {
    pub(crate) request: RemotingCommand,
    pub(crate) connection_id: u64,
    pub(crate) remote: SocketAddr,
    pub(crate) responder: Responder,
    group: String,
    topic: String,
    queue_id: i32,
    /// `pullFromThisOffset`: an arrival at or past it wakes the pull.
    pull_from: i64,
    sub: SubscriptionData,
    deadline: Instant,
}

impl HeldPull {
    pub(crate) fn new(
        request: RemotingCommand,
        connection_id: u64,
        remote: SocketAddr,
        responder: Responder,
        header: &PullMessageRequestHeader,
        sub: SubscriptionData,
        suspend_millis: i64,
    ) -> Self {
        Self {
            request,
            connection_id,
            remote,
            responder,
            group: header.consumer_group.clone(),
            topic: header.topic.clone(),
            queue_id: header.queue_id,
            pull_from: header.queue_offset,
            sub,
            deadline: Instant::now() + Duration::from_millis(suspend_millis.max(0) as u64),
        }
    }
}

#[derive(Default)]
struct HoldState {
    /// topic -> queue id -> held pulls.
    table: HashMap<String, HashMap<i32, Vec<HeldPull>>>,
    /// Woken or expired, for the thread to answer.
    ready: Vec<HeldPull>,
}

pub(crate) struct PullRequestHoldService {
    /// Suspends on the loop thread, arrivals on the putting or replicating thread, answers on
    /// the service's own: one lock orders a registration against an arrival.
    state: Mutex<HoldState>,
    /// Pulls in `table`: an arrival with none held costs one atomic load.
    held: AtomicUsize,
    /// Woken when a pull is ready to answer or a new one may expire sooner.
    service: ServiceThread,
}

impl Default for PullRequestHoldService {
    fn default() -> Self {
        Self {
            state: Mutex::default(),
            held: AtomicUsize::new(0),
            service: ServiceThread::new("pull-hold"),
        }
    }
}

impl PullRequestHoldService {
    /// Listens to `store`'s arrivals and starts the thread that hands woken and expired pulls
    /// to `answer`.
    pub(crate) fn start(
        self: &Arc<Self>,
        store: Arc<MessageStore>,
        answer: impl Fn(HeldPull) + Send + 'static,
    ) -> std::io::Result<()> {
        let weak = Arc::downgrade(self);
        store.add_arriving_listener(Arc::new(
            move |topic, queue_id, next, tags_code, properties: &[u8]| {
                if let Some(service) = weak.upgrade() {
                    service.notify_message_arriving(topic, queue_id, next, tags_code, properties);
                }
            },
        ));
        let service = self.clone();
        self.service
            .start(move |waiter| service.run(&waiter, answer))
    }

    /// `suspendPullRequest`. The queue is looked at again under the lock arrivals take: a
    /// record dispatched since the pull read it wakes the pull at once.
    pub(crate) fn suspend(&self, pull: HeldPull, store: &MessageStore) {
        if self.service.is_stopped() {
            return;
        }
        let mut st = lock(&self.state);
        let max = store
            .consume_queue(&pull.topic, pull.queue_id)
            .map_or(0, |cq| cq.max_queue_offset());
        if max > pull.pull_from {
            st.ready.push(pull);
        } else {
            st.table
                .entry(pull.topic.clone())
                .or_default()
                .entry(pull.queue_id)
                .or_default()
                .push(pull);
            self.held.fetch_add(1, Ordering::AcqRel);
        }
        drop(st);
        // Ready to answer, or held with a deadline the thread may not sleep until yet.
        self.service.wakeup();
    }

    /// Wakes the pulls of a queue a record just went to (the store's arriving listener): those
    /// waiting at or before it whose subscription takes it, by its tag and, for SQL92, by its
    /// properties (`isMatchedByCommitLog`).
    pub(crate) fn notify_message_arriving(
        &self,
        topic: &str,
        queue_id: i32,
        next_queue_offset: i64,
        tags_code: i64,
        properties: &[u8],
    ) {
        if self.held.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut st = lock(&self.state);
        let HoldState { table, ready, .. } = &mut *st;
        let Some(pulls) = table.get_mut(topic).and_then(|q| q.get_mut(&queue_id)) else {
            return;
        };
        let before = ready.len();
        let mut i = 0;
        while i < pulls.len() {
            let sub = &pulls[i].sub;
            if next_queue_offset > pulls[i].pull_from
                && sub.matches(tags_code)
                && sub.matches_properties(properties)
            {
                ready.push(pulls.swap_remove(i));
            } else {
                i += 1;
            }
        }
        let woken = ready.len() - before;
        drop(st);
        if woken > 0 {
            self.held.fetch_sub(woken, Ordering::AcqRel);
            self.service.wakeup();
        }
    }

    /// Wakes the pulls `group` holds in `topic`: an operator reset its offsets, which their
    /// next run answers.
    pub(crate) fn wake_group(&self, topic: &str, group: &str) {
        let mut st = lock(&self.state);
        let HoldState { table, ready, .. } = &mut *st;
        let before = ready.len();
        for pulls in table
            .get_mut(topic)
            .into_iter()
            .flat_map(|q| q.values_mut())
        {
            ready.extend(pulls.extract_if(.., |p| p.group == group));
        }
        let woken = ready.len() - before;
        drop(st);
        if woken > 0 {
            self.held.fetch_sub(woken, Ordering::AcqRel);
            self.service.wakeup();
        }
    }

    /// The connection is gone: its held pulls are dropped unanswered.
    pub(crate) fn on_close(&self, connection_id: u64) {
        let mut st = lock(&self.state);
        let mut dropped = 0;
        for queues in st.table.values_mut() {
            for pulls in queues.values_mut() {
                let before = pulls.len();
                pulls.retain(|p| p.connection_id != connection_id);
                dropped += before - pulls.len();
            }
        }
        self.held.fetch_sub(dropped, Ordering::AcqRel);
    }

    /// Pulls held now.
    pub(crate) fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    /// Stops the thread; pulls still held are dropped (their connections close with the port).
    pub(crate) fn shutdown(&self) {
        self.service.shutdown();
    }

    /// Answers what is ready, then sleeps until the nearest deadline or a wake-up: one that
    /// comes while it answers is kept for the next wait, so nothing is checked on a timer.
    fn run(&self, waiter: &ServiceWaiter, answer: impl Fn(HeldPull)) {
        loop {
            let (ready, nearest) = {
                let mut st = lock(&self.state);
                let expired = take_expired(&mut st, Instant::now());
                if expired > 0 {
                    self.held.fetch_sub(expired, Ordering::AcqRel);
                }
                let nearest = st
                    .table
                    .values()
                    .flat_map(|q| q.values())
                    .flatten()
                    .map(|p| p.deadline)
                    .min();
                (std::mem::take(&mut st.ready), nearest)
            };
            if ready.is_empty() {
                if waiter.wait_for_running(nearest) == Woke::Stopped {
                    return;
                }
            } else if waiter.is_stopped() {
                return;
            } else {
                ready.into_iter().for_each(&answer);
            }
        }
    }
}

/// Moves to `ready` the pulls past their deadline; returns how many left the table.
fn take_expired(st: &mut HoldState, now: Instant) -> usize {
    let HoldState { table, ready, .. } = st;
    let mut moved = 0;
    for queues in table.values_mut() {
        for pulls in queues.values_mut() {
            let mut i = 0;
            while i < pulls.len() {
                if pulls[i].deadline <= now {
                    ready.push(pulls.swap_remove(i));
                    moved += 1;
                } else {
                    i += 1;
                }
            }
        }
    }
    table.retain(|_, q| {
        q.retain(|_, p| !p.is_empty());
        !q.is_empty()
    });
    moved
}
