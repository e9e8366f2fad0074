//! RocketMQ's `PopReviveService`: the master reads each revive queue as the timer delivers
//! into it, matches acks to checkpoints by their merge key, and once a checkpoint is safely
//! past its revive time puts each of its messages nobody acked into the group's pop retry
//! topic (reconsume count + 1, `1ST_POP_TIME` on the first), where the group's pops find it.
//!
//! "Safely past": RocketMQ's rule, the revive queue has shown messages due two seconds
//! (`ackTimeInterval` + 1 s) after the checkpoint's revive time, so its acks, due at that time,
//! were delivered first. Here the timer also vouches: when it has placed every timer message
//! and delivered every one due before a time, nothing due before that is still to come.
//!
//! Unlike RocketMQ's, which rereads a queue from its committed offset each second, the service
//! keeps what it read: a round reads only what arrived, and the thread sleeps until the next
//! checkpoint can be revived or the revive topic receives a message. The progress is the
//! committed offset of `CID_RMQ_SYS_REVIVE_GROUP` (the offset of the last message done with),
//! from which a new master, or this one after a restart, reads again.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{
    parse_normal_topic, pop_retry_topic, AckMsg, PopCheckPoint, PopSettings, ACK_TAG,
    ACK_TIME_INTERVAL_MS, BATCH_ACK_TAG, CK_TAG, PROPERTY_FIRST_POP_TIME, RETRY_QUEUE_NUM,
    REVIVE_GROUP,
};
use crate::broker::consumer_offset::ConsumerOffsetManager;
use crate::broker::subscription_group::SubscriptionGroupManager;
use crate::broker::topic_config::TopicConfigManager;
use crate::broker::transaction::bridge::as_draft;
use crate::commitlog::record::{self, MessageDraft, PROPERTY_TAGS};
use crate::error::CommitLogError;
use crate::protocol::body::perm;
use crate::protocol::{now_millis, RETRY_GROUP_TOPIC_PREFIX};
use crate::store::timer::PROPERTY_TIMER_OUT_MS;
use crate::store::MessageStore;
use crate::sync::{lock, ServiceThread, ServiceWaiter, Woke};

/// Messages of a revive queue read at a time.
const READ_BATCH: usize = 256;
/// How long past a checkpoint's revive time the queue must have shown messages.
const REVIVE_MARGIN_MS: i64 = ACK_TIME_INTERVAL_MS + 1000;
/// While the timer lags behind what a checkpoint needs, how soon the service looks again.
const TIMER_LAG_RECHECK: Duration = Duration::from_millis(200);

/// What the service read of one revive queue and has not done with yet.
#[derive(Default)]
struct ReviveQueue {
    /// The next queue offset to read.
    next: i64,
    /// Checkpoints read and not revived, by their offset in the queue.
    pending: BTreeMap<i64, PopCheckPoint>,
    /// Merge key -> offset in `pending`, to find a checkpoint's acks.
    by_key: HashMap<String, i64>,
    /// The latest due time of a message read (`endTime`).
    end_time: i64,
    /// The offset committed for `CID_RMQ_SYS_REVIVE_GROUP`.
    committed: i64,
}

pub(crate) struct PopReviveService {
    store: Arc<MessageStore>,
    topics: Arc<TopicConfigManager>,
    groups: Arc<SubscriptionGroupManager>,
    offsets: Arc<ConsumerOffsetManager>,
    revive_topic: String,
    broker_name: String,
    settings: PopSettings,
    queues: Mutex<Vec<ReviveQueue>>,
    service: ServiceThread,
}

impl PopReviveService {
    pub(crate) fn new(
        store: Arc<MessageStore>,
        topics: Arc<TopicConfigManager>,
        groups: Arc<SubscriptionGroupManager>,
        offsets: Arc<ConsumerOffsetManager>,
        revive_topic: String,
        broker_name: String,
        settings: PopSettings,
    ) -> Self {
        Self {
            store,
            topics,
            groups,
            offsets,
            revive_topic,
            broker_name,
            settings,
            queues: Mutex::default(),
            service: ServiceThread::new("pop-revive"),
        }
    }

    /// Starts reviving from the committed offsets (a master's service).
    pub(crate) fn start(self: &Arc<Self>) -> std::io::Result<()> {
        {
            let mut queues = lock(&self.queues);
            *queues = (0..self.settings.revive_queue_num.max(0))
                .map(|q| {
                    let committed = self
                        .offsets
                        .query_offset(REVIVE_GROUP, &self.revive_topic, q)
                        .unwrap_or(-1);
                    ReviveQueue {
                        next: committed + 1,
                        committed,
                        ..ReviveQueue::default()
                    }
                })
                .collect();
        }
        let service = self.clone();
        self.service.start(move |waiter| service.run(&waiter))
    }

    /// A record reached `topic`: one of the revive topic wakes the service.
    pub(crate) fn arrived(&self, topic: &str) {
        if topic == self.revive_topic {
            self.service.wakeup();
        }
    }

    pub(crate) fn shutdown(&self) {
        self.service.shutdown();
    }

    fn run(&self, waiter: &ServiceWaiter) {
        loop {
            let next = self.revive_round();
            if waiter.wait_for_running(next) == Woke::Stopped {
                return;
            }
        }
    }

    /// Reads, matches and revives every queue; returns when the next checkpoint is due.
    fn revive_round(&self) -> Option<Instant> {
        let mut queues = lock(&self.queues);
        let mut next: Option<Instant> = None;
        for (queue_id, q) in queues.iter_mut().enumerate() {
            let wake = self.revive_queue(queue_id as i32, q);
            next = match (next, wake) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        next
    }

    fn revive_queue(&self, queue_id: i32, q: &mut ReviveQueue) -> Option<Instant> {
        // Read before the queue: whatever is due before it is in the queue by now.
        let timer_safe = self
            .store
            .timer_status()
            .filter(|s| s.enqueue_behind <= 0)
            .map_or(i64::MIN, |s| s.delivered_before_ms);
        self.read(queue_id, q);
        let end = q.end_time.max(timer_safe);
        while let Some((&offset, ck)) = q.pending.first_key_value() {
            if end - ck.revive_time() <= REVIVE_MARGIN_MS {
                break;
            }
            if let Err(e) = self.revive(ck) {
                log::warn!("pop revive of {:?}: {e}; tried again later", ck);
                return Some(Instant::now() + TIMER_LAG_RECHECK);
            }
            let done = q
                .pending
                .remove(&offset)
                .map(|ck| ck.merge_key(&self.broker_name));
            if let Some(key) = done {
                q.by_key.remove(&key);
            }
        }
        let done_to = q
            .pending
            .keys()
            .next()
            .map_or(q.next - 1, |first| first - 1);
        if done_to > q.committed {
            self.offsets
                .commit_offset(REVIVE_GROUP, &self.revive_topic, queue_id, done_to);
            q.committed = done_to;
        }
        let first = q.pending.values().next()?;
        let due_ms = first.revive_time() + REVIVE_MARGIN_MS + 1 - now_millis();
        let wait = Duration::from_millis(due_ms.max(0) as u64).max(TIMER_LAG_RECHECK);
        Some(Instant::now() + wait)
    }

    /// Reads what arrived in the queue: checkpoints kept, acks set their bits.
    fn read(&self, queue_id: i32, q: &mut ReviveQueue) {
        loop {
            let batch =
                match self
                    .store
                    .get_messages(&self.revive_topic, queue_id, q.next, READ_BATCH)
                {
                    Ok(batch) => batch,
                    Err(CommitLogError::OffsetTooSmall { min_offset, .. }) => {
                        // Retention took the start of the queue: what was there is gone.
                        q.next = min_offset;
                        continue;
                    }
                    Err(e) => {
                        log::warn!(
                            "pop revive: reading {} queue {queue_id}: {e}",
                            self.revive_topic
                        );
                        return;
                    }
                };
            if batch.is_empty() {
                return;
            }
            for (offset, rec) in &batch {
                let m = rec.view();
                self.take(q, *offset, m.properties, m.body);
                let due = record::find_property(m.properties, PROPERTY_TIMER_OUT_MS)
                    .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok())
                    .unwrap_or(m.store_timestamp);
                q.end_time = q.end_time.max(due);
                q.next = offset + 1;
            }
        }
    }

    fn take(&self, q: &mut ReviveQueue, offset: i64, properties: &[u8], body: &[u8]) {
        let tag = record::find_property(properties, PROPERTY_TAGS).unwrap_or_default();
        if tag == CK_TAG.as_bytes() {
            match serde_json::from_slice::<PopCheckPoint>(body) {
                Ok(mut ck) => {
                    ck.revive_offset = offset;
                    q.by_key.insert(ck.merge_key(&self.broker_name), offset);
                    q.pending.insert(offset, ck);
                }
                Err(e) => log::warn!("pop revive: checkpoint at {offset} unreadable: {e}"),
            }
        } else if tag == ACK_TAG.as_bytes() || tag == BATCH_ACK_TAG.as_bytes() {
            let Ok(ack) = serde_json::from_slice::<AckMsg>(body) else {
                log::warn!("pop revive: ack at {offset} unreadable");
                return;
            };
            // An ack whose checkpoint was revived already (or never seen) changes nothing.
            let Some(ck) = q
                .by_key
                .get(&ack.merge_key(&self.broker_name))
                .and_then(|o| q.pending.get_mut(o))
            else {
                return;
            };
            for acked in ack.offsets() {
                if let Some(i) = ck.index_of_ack(acked) {
                    ck.set_acked(i);
                }
            }
        }
    }

    /// `reviveMsgFromCk`: each message not acked goes to the pop retry topic.
    fn revive(&self, ck: &PopCheckPoint) -> Result<(), CommitLogError> {
        let normal = parse_normal_topic(&ck.topic, &ck.cid);
        // A topic or a group deleted since: nobody will consume it again.
        if self.topics.select(&normal).is_none() || !self.groups.contains(&ck.cid) {
            return Ok(());
        }
        for i in 0..usize::from(ck.num) {
            if ck.acked(i) {
                continue;
            }
            let offset = ck.ack_offset_by_index(i);
            let found = self.store.get_messages(&ck.topic, ck.queue_id, offset, 1);
            // Gone with retention: nothing to revive.
            let Some((_, rec)) = found
                .ok()
                .and_then(|b| b.into_iter().find(|(o, _)| *o == offset))
            else {
                continue;
            };
            self.revive_retry(ck, rec.view())?;
        }
        Ok(())
    }

    /// `reviveRetry`.
    fn revive_retry(
        &self,
        ck: &PopCheckPoint,
        m: record::RecordView<'_>,
    ) -> Result<(), CommitLogError> {
        let retry = if ck.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
            ck.topic.clone()
        } else {
            pop_retry_topic(&ck.topic, &ck.cid, self.settings.enable_retry_topic_v2)
        };
        self.add_retry_topic_if_not_exist(&retry, &ck.cid);
        let first_pop = ck.pop_time.to_string();
        let properties = if m.reconsume_times == 0
            || record::find_property(m.properties, PROPERTY_FIRST_POP_TIME).is_none()
        {
            record::edit_properties(m.properties, &[(PROPERTY_FIRST_POP_TIME, &first_pop)], &[])
        } else {
            m.properties.to_vec()
        };
        // Put where it says: a delay or a timer the message once had is not asked again.
        self.store
            .put_now(&MessageDraft {
                properties: &properties,
                queue_id: 0,
                born_host: self.store.store_host(),
                reconsume_times: m.reconsume_times + 1,
                ..as_draft(&m, &retry)
            })
            .map(drop)
    }

    /// `addRetryTopicIfNotExist`, and the group's offset on it from its start.
    fn add_retry_topic_if_not_exist(&self, topic: &str, group: &str) {
        if self.topics.select(topic).is_some() {
            return;
        }
        self.topics.create_in_send_back(
            topic,
            RETRY_QUEUE_NUM,
            perm::PERM_READ | perm::PERM_WRITE,
            0,
        );
        if self.offsets.query_offset(group, topic, 0).is_none() {
            self.offsets.commit_offset(group, topic, 0, 0);
        }
    }
}
