//! RocketMQ's `RebalanceLockManager`: which client of a consumer group holds each queue, so an
//! orderly consumer (`MessageListenerOrderly`) consumes a queue only while no other member
//! does. A lock lasts `rebalanceLockMaxLiveTime` from its holder's last LOCK_BATCH_MQ (the
//! Java client renews every 20 s); an expired lock goes to the next client that asks.
//! UNLOCK_BATCH_MQ gives back only the queues the asking client holds.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::protocol::lock_batch::{LockBatchRequestBody, LockBatchResponseBody, MessageQueue};
use crate::remoting::{request_code, response_code, RemotingCommand};
use crate::sync::lock;

/// `rebalanceLockMaxLiveTime`'s default, as `rocketmq.broker.rebalance.lockMaxLiveTime`'s.
pub(crate) const REBALANCE_LOCK_MAX_LIVE_TIME: Duration = Duration::from_secs(60);

struct LockEntry {
    client_id: String,
    last_update: Instant,
}

impl LockEntry {
    fn expired(&self, now: Instant, live: Duration) -> bool {
        now.duration_since(self.last_update) > live
    }
}

/// Group → queue → holder. One mutex: a batch is decided as a whole, as RocketMQ's `lock`.
pub(crate) struct RebalanceLockManager {
    table: Mutex<HashMap<String, HashMap<MessageQueue, LockEntry>>>,
    max_live_time: Duration,
}

impl RebalanceLockManager {
    pub(crate) fn new(max_live_time: Duration) -> Self {
        Self {
            table: Mutex::new(HashMap::new()),
            max_live_time,
        }
    }

    /// `tryLockBatch`: the queues of `mqs` that `client_id` holds afterwards. A queue nobody
    /// holds, or whose holder's lock expired, is taken; one the client holds is renewed; one
    /// another live client holds is left out.
    pub(crate) fn try_lock_batch(
        &self,
        group: &str,
        mqs: &BTreeSet<MessageQueue>,
        client_id: &str,
    ) -> BTreeSet<MessageQueue> {
        let now = Instant::now();
        let mut table = lock(&self.table);
        let queues = table.entry(group.to_owned()).or_default();
        let mut locked = BTreeSet::new();
        for mq in mqs {
            match queues.get_mut(mq) {
                Some(e) if e.client_id == client_id => e.last_update = now,
                Some(e) if e.expired(now, self.max_live_time) => {
                    log::warn!(
                        "queue lock of group {group} on {mq:?}: {} let it expire, {client_id} \
                         takes it",
                        e.client_id
                    );
                    e.client_id = client_id.to_owned();
                    e.last_update = now;
                }
                Some(e) => {
                    log::debug!(
                        "queue lock of group {group} on {mq:?} refused to {client_id}: held by {}",
                        e.client_id
                    );
                    continue;
                }
                None => {
                    queues.insert(
                        mq.clone(),
                        LockEntry {
                            client_id: client_id.to_owned(),
                            last_update: now,
                        },
                    );
                }
            }
            locked.insert(mq.clone());
        }
        locked
    }

    /// `unlockBatch`: gives back the queues of `mqs` that `client_id` holds; others are left.
    pub(crate) fn unlock_batch(&self, group: &str, mqs: &BTreeSet<MessageQueue>, client_id: &str) {
        let mut table = lock(&self.table);
        let Some(queues) = table.get_mut(group) else {
            return;
        };
        for mq in mqs {
            if queues.get(mq).is_some_and(|e| e.client_id == client_id) {
                queues.remove(mq);
            }
        }
        if queues.is_empty() {
            table.remove(group);
        }
    }
}

/// LOCK_BATCH_MQ and UNLOCK_BATCH_MQ (`AdminBrokerProcessor.lockBatchMQ` / `unlockBatchMQ`).
/// A body that does not parse is refused naming it, and changes no lock.
pub(crate) fn process(
    manager: &RebalanceLockManager,
    request: &RemotingCommand,
) -> RemotingCommand {
    let body = match LockBatchRequestBody::decode(&request.body) {
        Ok(body) => body,
        Err(e) => {
            return RemotingCommand::response_to(
                request,
                response_code::SYSTEM_ERROR,
                Some(e.to_string()),
            )
        }
    };
    let mut response = RemotingCommand::response_to(request, response_code::SUCCESS, None);
    if request.code == request_code::LOCK_BATCH_MQ {
        let locked = manager.try_lock_batch(&body.consumer_group, &body.mq_set, &body.client_id);
        response.body = LockBatchResponseBody {
            lock_ok_mq_set: locked,
        }
        .encode();
    } else {
        manager.unlock_batch(&body.consumer_group, &body.mq_set, &body.client_id);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mqs(ids: &[i32]) -> BTreeSet<MessageQueue> {
        ids.iter()
            .map(|&queue_id| MessageQueue {
                topic: "T".into(),
                broker_name: "b".into(),
                queue_id,
            })
            .collect()
    }

    #[test]
    fn a_queue_has_one_holder_until_it_gives_it_back() {
        let m = RebalanceLockManager::new(REBALANCE_LOCK_MAX_LIVE_TIME);
        assert_eq!(m.try_lock_batch("g", &mqs(&[0, 1]), "c1"), mqs(&[0, 1]));
        assert_eq!(m.try_lock_batch("g", &mqs(&[1, 2]), "c2"), mqs(&[2]));
        // Another group's locks are its own.
        assert_eq!(m.try_lock_batch("h", &mqs(&[1]), "c2"), mqs(&[1]));
        // Renewal by the holder; an unlock by someone else changes nothing.
        assert_eq!(m.try_lock_batch("g", &mqs(&[0, 1]), "c1"), mqs(&[0, 1]));
        m.unlock_batch("g", &mqs(&[1]), "c2");
        assert_eq!(m.try_lock_batch("g", &mqs(&[1]), "c2"), mqs(&[]));
        m.unlock_batch("g", &mqs(&[1]), "c1");
        assert_eq!(m.try_lock_batch("g", &mqs(&[1]), "c2"), mqs(&[1]));
        assert_eq!(m.try_lock_batch("g", &mqs(&[0, 1]), "c1"), mqs(&[0]));
    }

    #[test]
    fn an_expired_lock_goes_to_the_next_client_that_asks() {
        let m = RebalanceLockManager::new(Duration::ZERO);
        assert_eq!(m.try_lock_batch("g", &mqs(&[0]), "c1"), mqs(&[0]));
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(m.try_lock_batch("g", &mqs(&[0]), "c2"), mqs(&[0]));
        let table = lock(&m.table);
        assert_eq!(table["g"].values().next().unwrap().client_id, "c2");
    }

    #[test]
    fn requests_lock_and_unlock_and_a_garbage_body_changes_nothing() {
        let m = RebalanceLockManager::new(REBALANCE_LOCK_MAX_LIVE_TIME);
        let body = |client: &str| LockBatchRequestBody {
            consumer_group: "g".into(),
            client_id: client.into(),
            only_this_broker: false,
            mq_set: mqs(&[0, 1]),
        };
        let ask = |code: i32, client: &str| {
            let mut r = RemotingCommand::request(code, 0);
            r.body = body(client).encode();
            process(&m, &r)
        };
        let locked = ask(request_code::LOCK_BATCH_MQ, "c1");
        assert_eq!(locked.code, response_code::SUCCESS);
        let got = LockBatchResponseBody::decode(&locked.body).unwrap();
        assert_eq!(got.lock_ok_mq_set, mqs(&[0, 1]));
        let refused = ask(request_code::LOCK_BATCH_MQ, "c2");
        assert!(LockBatchResponseBody::decode(&refused.body)
            .unwrap()
            .lock_ok_mq_set
            .is_empty());

        let mut garbage = RemotingCommand::request(request_code::UNLOCK_BATCH_MQ, 0);
        garbage.body = b"\x00{not json".to_vec();
        let answer = process(&m, &garbage);
        assert_eq!(answer.code, response_code::SYSTEM_ERROR);
        assert!(answer.remark.unwrap().contains("LockBatchRequestBody"));
        assert_eq!(
            m.try_lock_batch("g", &mqs(&[0]), "c2"),
            mqs(&[]),
            "still c1's"
        );

        assert_eq!(
            ask(request_code::UNLOCK_BATCH_MQ, "c1").code,
            response_code::SUCCESS
        );
        assert_eq!(m.try_lock_batch("g", &mqs(&[0, 1]), "c2"), mqs(&[0, 1]));
    }

    #[test]
    fn unlocking_everything_forgets_the_group() {
        let m = RebalanceLockManager::new(REBALANCE_LOCK_MAX_LIVE_TIME);
        m.try_lock_batch("g", &mqs(&[0, 1]), "c1");
        m.unlock_batch("g", &mqs(&[0, 1]), "c1");
        assert!(lock(&m.table).is_empty());
        m.unlock_batch("nobody", &mqs(&[0]), "c1");
    }
}
