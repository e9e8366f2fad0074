//! RocketMQ 5's pop consumption, the broker's side: what a pop leaves behind and how messages
//! not acked in time come back.
//!
//! A pop takes messages from a group's queues and writes a checkpoint ([`PopCheckPoint`]) to
//! the cluster's revive topic `rmq_sys_REVIVE_LOG_<cluster>` as a timer message due one second
//! before its messages' invisible time ends; an ack writes an [`AckMsg`] there due when it
//! ends. The [`revive`] service reads the revive topic as the timer delivers it, matches acks
//! to checkpoints, and puts every message of a checkpoint that was not acked in time into the
//! group's pop retry topic `%RETRY%<group>_<topic>`, which pops read too. Everything is in the
//! commit log, so a slave holds it byte for byte and a new master revives where the old one
//! stopped; the revive queues' progress is the offsets of `CID_RMQ_SYS_REVIVE_GROUP`, as
//! RocketMQ keeps it.
//!
//! As RocketMQ with `enablePopBufferMerge=false` (its default): each checkpoint and each ack
//! is one message; the group's offset moves past what a pop took once its checkpoint is
//! stored, so a pop never hands out what another pop holds.

pub(crate) mod check_point;
pub(crate) mod extra_info;
pub(crate) mod long_polling;
pub(crate) mod revive;

pub(crate) use check_point::{AckMsg, PopCheckPoint, ACK_TAG, BATCH_ACK_TAG, CK_TAG};

use std::collections::HashSet;
use std::sync::Mutex;

use crate::client::PROPERTY_UNIQ_KEY;
use crate::commitlog::record::{encode_properties, MessageDraft, PROPERTY_TAGS};
use crate::commitlog::AppendResult;
use crate::error::CommitLogError;
use crate::protocol::{now_millis, RETRY_GROUP_TOPIC_PREFIX};
use crate::store::timer::PROPERTY_TIMER_DELIVER_MS;
use crate::store::MessageStore;
use crate::sync::lock;

/// `PopAckConstants.REVIVE_TOPIC`: the prefix of the cluster's revive topic.
pub(crate) const REVIVE_TOPIC_PREFIX: &str = "rmq_sys_REVIVE_LOG_";
/// `PopAckConstants.REVIVE_GROUP`: whose offsets are the revive queues' progress.
pub(crate) const REVIVE_GROUP: &str = "CID_RMQ_SYS_REVIVE_GROUP";
/// `PopAckConstants.ackTimeInterval`: a checkpoint is due this long before its revive time,
/// so it is read before the acks due at that time.
pub(crate) const ACK_TIME_INTERVAL_MS: i64 = 1000;
/// `KeyBuilder.POP_ORDER_REVIVE_QUEUE`: the revive queue id of a FIFO pop (no checkpoint).
pub(crate) const POP_ORDER_REVIVE_QUEUE: i32 = 999;
/// `PopAckConstants.retryQueueNum`: queues of a pop retry topic.
pub(crate) const RETRY_QUEUE_NUM: i32 = 1;
/// `MessageConst.PROPERTY_POP_CK`: a popped message's extra info.
pub(crate) const PROPERTY_POP_CK: &str = "POP_CK";
/// `MessageConst.PROPERTY_FIRST_POP_TIME`: when a retried message was first popped.
pub(crate) const PROPERTY_FIRST_POP_TIME: &str = "1ST_POP_TIME";
const POP_RETRY_SEPARATOR_V1: char = '_';
const POP_RETRY_SEPARATOR_V2: char = '+';

/// The pop keys of `BrokerConfig`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PopSettings {
    /// `reviveQueueNum`: queues of the revive topic; pops take them in turn.
    pub revive_queue_num: i32,
    /// `popFromRetryProbability`: percent of pops that look at the pop retry topic first.
    pub pop_from_retry_probability: i32,
    /// `enableRetryTopicV2`: retried messages go to `%RETRY%group+topic`.
    pub enable_retry_topic_v2: bool,
    /// `retrieveMessageFromPopRetryTopicV1`: with v2 on, the v1 retry topic is read too.
    pub retrieve_from_retry_topic_v1: bool,
    /// `popResponseReturnActualRetryTopic`: a retried message is answered under its retry
    /// topic, not re-encoded under the topic it was popped for.
    pub response_return_actual_retry_topic: bool,
    /// `popPollingSize`: pops held at most per topic, group and queue.
    pub polling_size: usize,
}

impl Default for PopSettings {
    fn default() -> Self {
        Self {
            revive_queue_num: 8,
            pop_from_retry_probability: 20,
            enable_retry_topic_v2: false,
            retrieve_from_retry_topic_v1: true,
            response_return_actual_retry_topic: false,
            polling_size: 1024,
        }
    }
}

/// `PopAckConstants.buildClusterReviveTopic`.
pub(crate) fn revive_topic(cluster: &str) -> String {
    format!("{REVIVE_TOPIC_PREFIX}{cluster}")
}

/// `KeyBuilder.buildPopRetryTopicV1`: `%RETRY%group_topic`.
pub(crate) fn pop_retry_topic_v1(topic: &str, group: &str) -> String {
    format!("{RETRY_GROUP_TOPIC_PREFIX}{group}{POP_RETRY_SEPARATOR_V1}{topic}")
}

/// `KeyBuilder.buildPopRetryTopicV2`: `%RETRY%group+topic`.
pub(crate) fn pop_retry_topic_v2(topic: &str, group: &str) -> String {
    format!("{RETRY_GROUP_TOPIC_PREFIX}{group}{POP_RETRY_SEPARATOR_V2}{topic}")
}

/// `KeyBuilder.buildPopRetryTopic`: where the group's retried messages of `topic` go.
pub(crate) fn pop_retry_topic(topic: &str, group: &str, v2: bool) -> String {
    if v2 {
        pop_retry_topic_v2(topic, group)
    } else {
        pop_retry_topic_v1(topic, group)
    }
}

/// `KeyBuilder.parseNormalTopic(topic, cid)`: the topic a pop retry topic retries.
pub(crate) fn parse_normal_topic(topic: &str, group: &str) -> String {
    let Some(rest) = topic.strip_prefix(RETRY_GROUP_TOPIC_PREFIX) else {
        return topic.to_owned();
    };
    rest.strip_prefix(group)
        .and_then(|r| r.strip_prefix([POP_RETRY_SEPARATOR_V2, POP_RETRY_SEPARATOR_V1]))
        .unwrap_or(rest)
        .to_owned()
}

/// `KeyBuilder.buildPollingKey`: `topic@group@queueId`, the queue lock's and the held pops' key.
pub(crate) fn polling_key(topic: &str, group: &str, queue_id: i32) -> String {
    format!("{topic}@{group}@{queue_id}")
}

/// `QueueLockManager`: the queues a pop is reading or an orderly ack is moving, by
/// `topic@group@queueId`.
#[derive(Default)]
pub(crate) struct QueueLockManager {
    locked: Mutex<HashSet<String>>,
}

/// A queue held, released when dropped.
pub(crate) struct QueueLock<'a> {
    manager: &'a QueueLockManager,
    key: String,
}

impl QueueLockManager {
    /// The queue, unless another holds it: a pop passes a held queue by rather than wait.
    pub(crate) fn try_lock(&self, key: String) -> Option<QueueLock<'_>> {
        lock(&self.locked)
            .insert(key.clone())
            .then_some(QueueLock { manager: self, key })
    }

    /// The queue, once its holder (a pop reading it) lets go.
    pub(crate) fn lock(&self, key: String) -> QueueLock<'_> {
        loop {
            if let Some(held) = self.try_lock(key.clone()) {
                return held;
            }
            std::thread::yield_now();
        }
    }
}

impl Drop for QueueLock<'_> {
    fn drop(&mut self) {
        lock(&self.manager.locked).remove(&self.key);
    }
}

/// Puts a checkpoint or an ack into revive queue `queue_id`, a timer message due at
/// `deliver_ms` (at once if that has passed), as `buildCkMsg` and `appendAck` build theirs.
pub(crate) fn put_revive_message(
    store: &MessageStore,
    revive_topic: &str,
    queue_id: i32,
    tag: &str,
    body: &[u8],
    unique_key: &str,
    deliver_ms: i64,
) -> Result<AppendResult, CommitLogError> {
    let deliver = deliver_ms.to_string();
    let properties = encode_properties([
        (PROPERTY_TAGS, tag),
        (PROPERTY_UNIQ_KEY, unique_key),
        (PROPERTY_TIMER_DELIVER_MS, deliver.as_str()),
    ])?;
    store.put(&MessageDraft {
        topic: revive_topic,
        body,
        properties: &properties,
        queue_id,
        flag: 0,
        sys_flag: 0,
        born_timestamp: now_millis(),
        born_host: store.store_host(),
        reconsume_times: 0,
        prepared_tx_offset: 0,
    })
}

/// `buildCkMsg` put: a checkpoint, due `ackTimeInterval` before its revive time.
pub(crate) fn put_check_point(
    store: &MessageStore,
    revive_topic: &str,
    revive_qid: i32,
    ck: &PopCheckPoint,
) -> Result<AppendResult, CommitLogError> {
    put_revive_message(
        store,
        revive_topic,
        revive_qid,
        CK_TAG,
        &ck.to_json(),
        &check_point::ck_unique_id(ck),
        ck.revive_time() - ACK_TIME_INTERVAL_MS,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_topics_are_named_as_rocketmq_names_them() {
        assert_eq!(pop_retry_topic("T", "G", false), "%RETRY%G_T");
        assert_eq!(pop_retry_topic("T", "G", true), "%RETRY%G+T");
        assert_eq!(parse_normal_topic("%RETRY%G_T", "G"), "T");
        assert_eq!(parse_normal_topic("%RETRY%G+T", "G"), "T");
        assert_eq!(parse_normal_topic("T", "G"), "T");
        assert_eq!(
            revive_topic("DefaultCluster"),
            "rmq_sys_REVIVE_LOG_DefaultCluster"
        );
    }
}
