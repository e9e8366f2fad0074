//! RocketMQ's `PopLongPollingService`, event-driven as the pull's hold
//! ([`PullRequestHoldService`](crate::broker::pull_request_hold)): a pop that found nothing
//! waits here until a record it could take is dispatched to its topic (the queue it asked for,
//! or any with queue -1) or to its group's pop retry topic, or until its `pollTime` passes;
//! then the service's thread runs it again through the processor. No timer but the nearest
//! deadline.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use super::{pop_retry_topic_v1, pop_retry_topic_v2};
use crate::broker::consumer_manager::SubscriptionData;
use crate::protocol::RETRY_GROUP_TOPIC_PREFIX;
use crate::remoting::{RemotingCommand, Responder};
use crate::sync::{lock, ServiceThread, ServiceWaiter, Woke};

/// A pop held: the request to run again and where its answer goes.
pub(crate) struct HeldPop {
    pub(crate) request: RemotingCommand,
    pub(crate) connection_id: u64,
    pub(crate) remote: SocketAddr,
    pub(crate) responder: Responder,
    group: String,
    topic: String,
    /// -1: any queue of the topic.
    queue_id: i32,
    sub: SubscriptionData,
    deadline: Instant,
}

impl HeldPop {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        request: RemotingCommand,
        connection_id: u64,
        remote: SocketAddr,
        responder: Responder,
        group: &str,
        topic: &str,
        queue_id: i32,
        sub: SubscriptionData,
        deadline: Instant,
    ) -> Self {
        Self {
            request,
            connection_id,
            remote,
            responder,
            group: group.to_owned(),
            topic: topic.to_owned(),
            queue_id,
            sub,
            deadline,
        }
    }

    /// Whether a record dispatched to `topic`'s `queue_id` is one this pop may take.
    fn wakes_on(&self, topic: &str, queue_id: i32, tags_code: i64, properties: &[u8]) -> bool {
        if topic == self.topic {
            return (self.queue_id < 0 || self.queue_id == queue_id)
                && self.sub.matches(tags_code)
                && self.sub.matches_properties(properties);
        }
        // A retried message matched the subscription when it was first delivered.
        topic == pop_retry_topic_v1(&self.topic, &self.group)
            || topic == pop_retry_topic_v2(&self.topic, &self.group)
    }
}

#[derive(Default)]
struct PollingState {
    /// Held pops by the topic they pop.
    table: HashMap<String, Vec<HeldPop>>,
    /// Woken or expired, for the thread to run again.
    ready: Vec<HeldPop>,
}

pub(crate) struct PopLongPollingService {
    /// Pops are held on the loop thread, arrivals come on the putting thread, the answers go
    /// on the service's own: one lock orders a hold against an arrival.
    state: Mutex<PollingState>,
    held: AtomicUsize,
    /// `popPollingSize`: pops held at most per topic.
    capacity: usize,
    service: ServiceThread,
}

/// What [`PopLongPollingService::polling`] did with a pop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PollingResult {
    /// Held: it is answered later.
    Suc,
    /// Not held: too many are (POLLING_FULL).
    Full,
}

impl PopLongPollingService {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            state: Mutex::default(),
            held: AtomicUsize::new(0),
            capacity,
            service: ServiceThread::new("pop-polling"),
        }
    }

    /// Starts the thread that hands woken and expired pops to `answer`.
    pub(crate) fn start(
        self: &std::sync::Arc<Self>,
        answer: impl Fn(HeldPop) + Send + 'static,
    ) -> std::io::Result<()> {
        let service = self.clone();
        self.service
            .start(move |waiter| service.run(&waiter, answer))
    }

    /// `polling`: holds `pop` until an arrival or its deadline. The caller looked at the
    /// queues before; `arrived_meanwhile` says whether a record came since (the pop then runs
    /// again at once).
    pub(crate) fn polling(
        &self,
        pop: HeldPop,
        arrived_meanwhile: impl Fn() -> bool,
    ) -> PollingResult {
        if self.service.is_stopped() {
            return PollingResult::Full;
        }
        let mut st = lock(&self.state);
        let held = st.table.entry(pop.topic.clone()).or_default();
        if held.len() >= self.capacity {
            return PollingResult::Full;
        }
        if arrived_meanwhile() {
            st.ready.push(pop);
        } else {
            held.push(pop);
            self.held.fetch_add(1, Ordering::AcqRel);
        }
        drop(st);
        self.service.wakeup();
        PollingResult::Suc
    }

    /// The store dispatched a record to `topic`'s `queue_id`: the pops it may feed wake.
    pub(crate) fn notify_message_arriving(
        &self,
        topic: &str,
        queue_id: i32,
        tags_code: i64,
        properties: &[u8],
    ) {
        if self.held.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut st = lock(&self.state);
        let PollingState { table, ready } = &mut *st;
        let before = ready.len();
        let mut take = |pops: &mut Vec<HeldPop>| {
            ready.extend(
                pops.extract_if(.., |p| p.wakes_on(topic, queue_id, tags_code, properties)),
            );
        };
        if let Some(group_topic) = topic.strip_prefix(RETRY_GROUP_TOPIC_PREFIX) {
            // `%RETRY%group_topic`: the pops of every topic the name may end with.
            for (t, pops) in table.iter_mut() {
                if group_topic.ends_with(t.as_str()) {
                    take(pops);
                }
            }
        } else if let Some(pops) = table.get_mut(topic) {
            take(pops);
        }
        let woken = ready.len() - before;
        drop(st);
        if woken > 0 {
            self.held.fetch_sub(woken, Ordering::AcqRel);
            self.service.wakeup();
        }
    }

    /// An orderly ack freed the queue: the group's pops held for it run again.
    pub(crate) fn wake_queue(&self, topic: &str, group: &str, queue_id: i32) {
        let mut st = lock(&self.state);
        let PollingState { table, ready } = &mut *st;
        let Some(pops) = table.get_mut(topic) else {
            return;
        };
        let before = ready.len();
        ready.extend(pops.extract_if(.., |p| {
            p.group == group && (p.queue_id < 0 || p.queue_id == queue_id)
        }));
        let woken = ready.len() - before;
        drop(st);
        if woken > 0 {
            self.held.fetch_sub(woken, Ordering::AcqRel);
            self.service.wakeup();
        }
    }

    /// The connection is gone: its held pops are dropped unanswered.
    pub(crate) fn on_close(&self, connection_id: u64) {
        let mut st = lock(&self.state);
        let mut dropped = 0;
        for pops in st.table.values_mut() {
            let before = pops.len();
            pops.retain(|p| p.connection_id != connection_id);
            dropped += before - pops.len();
        }
        self.held.fetch_sub(dropped, Ordering::AcqRel);
    }

    pub(crate) fn shutdown(&self) {
        self.service.shutdown();
    }

    fn run(&self, waiter: &ServiceWaiter, answer: impl Fn(HeldPop)) {
        loop {
            let (ready, nearest) = {
                let mut st = lock(&self.state);
                let now = Instant::now();
                let PollingState { table, ready } = &mut *st;
                let before = ready.len();
                for pops in table.values_mut() {
                    ready.extend(pops.extract_if(.., |p| p.deadline <= now));
                }
                table.retain(|_, p| !p.is_empty());
                self.held.fetch_sub(ready.len() - before, Ordering::AcqRel);
                let nearest = table.values().flatten().map(|p| p.deadline).min();
                (std::mem::take(ready), nearest)
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
