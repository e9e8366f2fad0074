//! The register loop's thread (see [`BrokerOuterApi::run`](super::outer_api::BrokerOuterApi))
//! and the answers it holds. RocketMQ's `updateAndCreateTopic` registers the new topic with the
//! name servers before it answers (`registerIncrementBrokerData` waits for them), so a producer
//! that sends right after `mqadmin updateTopic` finds the route. Registering on the remoting
//! loop would stall every connection for a name server's round trip; the loop hands the answer
//! to the register thread instead, which sends it once it has registered the change.

use std::sync::{Arc, Mutex};

use super::topic_config::TopicConfigManager;
use crate::remoting::{RemotingCommand, Responder};
use crate::sync::{lock, ServiceThread, ServiceWaiter};

pub(crate) struct RegisterService {
    thread: ServiceThread,
    held: HeldAnswers,
}

impl RegisterService {
    pub(crate) fn new() -> Self {
        Self {
            thread: ServiceThread::new("broker-register"),
            held: HeldAnswers::default(),
        }
    }

    /// Runs `body` on the register thread, with the answers it is to send.
    pub(crate) fn start(
        &self,
        body: impl FnOnce(ServiceWaiter, HeldAnswers) + Send + 'static,
    ) -> std::io::Result<()> {
        let held = self.held.clone();
        self.thread.start(move |waiter| body(waiter, held))
    }

    /// The topics changed: register them now rather than at the next period.
    pub(crate) fn wakeup(&self) {
        self.thread.wakeup();
    }

    /// Runs `request`, one that may create a topic (a send, a send-back, a heartbeat's retry
    /// topic), and registers at once when it did, as `createTopicInSendMessageMethod` and
    /// `createTopicInSendMessageBackMethod` register (the register loop persists it first).
    pub(crate) fn registering_new_topics<R>(
        &self,
        topics: &TopicConfigManager,
        request: impl FnOnce() -> R,
    ) -> R {
        let before = topics.data_version();
        let result = request();
        if topics.data_version() != before {
            self.wakeup();
        }
        result
    }

    /// The topics changed, and `response` answers for the change: it goes out once the name
    /// servers have been told (or could not be: the change is the broker's either way, and
    /// RocketMQ answers success after a failed registration too).
    pub(crate) fn answer_once_registered(&self, responder: Responder, response: RemotingCommand) {
        lock(&self.held.0).push((responder, response));
        self.thread.wakeup();
    }

    /// Stops the thread, which sends what it still holds.
    pub(crate) fn shutdown(&self) {
        self.thread.shutdown();
    }
}

/// Answers waiting for the next registration.
#[derive(Clone, Default)]
pub(crate) struct HeldAnswers(Arc<Mutex<Vec<(Responder, RemotingCommand)>>>);

impl HeldAnswers {
    /// The answers held so far, taken before the changes to register are: a change is made
    /// before its answer is held, so the registration that follows covers each.
    pub(crate) fn take(&self) -> Answers {
        Answers(std::mem::take(&mut *lock(&self.0)))
    }
}

/// Answers taken from [`HeldAnswers`], to send once their changes are registered.
pub(crate) struct Answers(Vec<(Responder, RemotingCommand)>);

impl Answers {
    pub(crate) fn send(self) {
        for (responder, response) in self.0 {
            responder.send(response);
        }
    }
}
