//! `SendMessageProcessor.consumerSendMsgBack` (CONSUMER_SEND_MSG_BACK, 36) and
//! `handleRetryAndDLQ`: a message a consumer failed goes to its group's retry topic
//! `%RETRY%<group>` at a delay level, to be consumed again when due, and once it was consumed
//! `maxReconsumeTimes` times (or the consumer asks with a negative level) to the group's
//! dead-letter queue `%DLQ%<group>`, which nobody consumes by default.
//!
//! As RocketMQ: the retry topic has the group's `retryQueueNums` queues and the DLQ one, both
//! readable and writable, created on first use (and the retry topic at the group's first
//! heartbeat); the retry message is the original as stored (read by its commit-log offset)
//! with `RETRY_TOPIC` = the topic it came from, `ORIGIN_MESSAGE_ID` = the first message's id,
//! the reconsume count + 1 and `DELAY` = the level asked, or `3 + reconsumeTimes` for 0 (the
//! store clamps a level past the last). A send-back is answered once stored, without waiting
//! for a slave (RocketMQ marks it `WAIT=false`).

use std::sync::atomic::Ordering;

use super::{Refusal, SendMessageProcessor};
use crate::broker::subscription_group::SubscriptionGroupConfig;
use crate::commitlog::record::{self, MessageDraft, PROPERTY_DELAY_TIME_LEVEL};
use crate::commitlog::OwnedRecord;
use crate::protocol::body::{perm, TopicConfig};
use crate::protocol::{DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX};
use crate::remoting::header::{ConsumerSendMsgBackRequestHeader, SendMessageRequestHeader};
use crate::remoting::{response_code, RemotingCommand};

/// `MixAll.DLQ_NUMS_PER_GROUP`.
const DLQ_NUMS_PER_GROUP: i32 = 1;
/// `MessageConst.PROPERTY_RETRY_TOPIC`: the topic a retried message first came from.
const PROPERTY_RETRY_TOPIC: &str = "RETRY_TOPIC";
/// `MessageConst.PROPERTY_ORIGIN_MESSAGE_ID`: the id of the first delivery of a retried message.
const PROPERTY_ORIGIN_MESSAGE_ID: &str = "ORIGIN_MESSAGE_ID";
/// `MQVersion.Version.V3_4_9`'s ordinal: from this client version on, a request's
/// `maxReconsumeTimes` overrides the group's `retryMaxTimes`.
const V3_4_9: i32 = 121;
/// `TopicSysFlag.buildSysFlag(false, true)`: a unit-mode consumer's retry topic.
const FLAG_UNIT_SUB: i32 = 0x1 << 1;
/// `FAQUrl.suggestTodo(FAQUrl.SUBSCRIPTION_GROUP_NOT_EXIST)`.
const SUBSCRIPTION_GROUP_NOT_EXIST_FAQ: &str =
    "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.";

/// `MixAll.getRetryTopic`.
pub(crate) fn retry_topic(group: &str) -> String {
    format!("{RETRY_GROUP_TOPIC_PREFIX}{group}")
}

/// `MixAll.getDLQTopic`.
fn dlq_topic(group: &str) -> String {
    format!("{DLQ_GROUP_TOPIC_PREFIX}{group}")
}

/// `TopicSysFlag` of a consumer's retry topic.
pub(crate) fn retry_topic_sys_flag(unit_mode: bool) -> i32 {
    if unit_mode {
        FLAG_UNIT_SUB
    } else {
        0
    }
}

fn refusal(code: i32, remark: impl Into<String>) -> Refusal {
    Refusal(code, remark.into())
}

impl SendMessageProcessor {
    /// CONSUMER_SEND_MSG_BACK; answered at once.
    pub(crate) fn consumer_send_msg_back(&self, request: &RemotingCommand) -> RemotingCommand {
        let (code, remark) = match self.send_back(request) {
            Ok(()) => (response_code::SUCCESS, None),
            Err(Refusal(code, remark)) => (code, Some(remark)),
        };
        RemotingCommand::response_to(request, code, remark)
    }

    fn send_back(&self, request: &RemotingCommand) -> Result<(), Refusal> {
        let s = &self.settings;
        if s.is_slave {
            return Err(refusal(
                response_code::SYSTEM_ERROR,
                format!(
                    "SERVICE_NOT_AVAILABLE: broker {} id {} is a SLAVE; send the message back \
                     to its master",
                    s.broker_name, s.broker_id
                ),
            ));
        }
        let header: ConsumerSendMsgBackRequestHeader = request
            .decode_custom_header()
            .map_err(|e| refusal(response_code::SYSTEM_ERROR, e.to_string()))?;
        let group = self.group(&header.group)?;
        if s.broker_permission.get() & i64::from(perm::PERM_WRITE) == 0 {
            return Err(refusal(
                response_code::NO_PERMISSION,
                format!("the broker[{}] sending message is forbidden", s.broker_name),
            ));
        }
        // A group with no retry queues asked for no retries: RocketMQ answers SUCCESS.
        if group.retry_queue_nums <= 0 {
            return Ok(());
        }
        let retry = self.topics.create_in_send_back(
            &retry_topic(&header.group),
            group.retry_queue_nums,
            perm::PERM_READ | perm::PERM_WRITE,
            retry_topic_sys_flag(header.unit_mode),
        );
        writable(&retry)?;
        let original = self.original(header.offset)?;
        let m = original.view();
        let bound = max_reconsume_times(request, header.max_reconsume_times, &group);
        let (target, level) = if m.reconsume_times >= bound || header.delay_level < 0 {
            (self.dlq(&header.group)?, 0)
        } else if header.delay_level == 0 {
            (retry, 3 + m.reconsume_times)
        } else {
            (retry, header.delay_level)
        };
        let origin_topic = String::from_utf8_lossy(m.topic);
        let origin_id = record::msg_id(&m.store_host, m.physical_offset);
        let level = level.to_string();
        let mut set = vec![(PROPERTY_DELAY_TIME_LEVEL, level.as_str())];
        if record::find_property(m.properties, PROPERTY_RETRY_TOPIC).is_none() {
            set.push((PROPERTY_RETRY_TOPIC, &origin_topic));
        }
        if record::find_property(m.properties, PROPERTY_ORIGIN_MESSAGE_ID).is_none() {
            set.push((PROPERTY_ORIGIN_MESSAGE_ID, &origin_id));
        }
        let properties = record::edit_properties(m.properties, &set, &[]);
        let queues = target.write_queue_nums.max(1) as u32;
        let draft = MessageDraft {
            topic: &target.topic_name,
            body: m.body,
            properties: &properties,
            queue_id: (self.next_retry_queue.fetch_add(1, Ordering::Relaxed) % queues) as i32,
            flag: m.flag,
            sys_flag: m.sys_flag,
            born_timestamp: m.born_timestamp,
            born_host: m.born_host,
            reconsume_times: m.reconsume_times + 1,
            prepared_tx_offset: 0,
        };
        self.store
            .put(&draft)
            .map(drop)
            .map_err(|e| refusal(response_code::SYSTEM_ERROR, e.to_string()))
    }

    /// The subscription group `name` (created when unknown, with `autoCreateSubscriptionGroup`).
    fn group(&self, name: &str) -> Result<SubscriptionGroupConfig, Refusal> {
        self.groups
            .find(name)
            .map_err(|e| refusal(response_code::SYSTEM_ERROR, e.to_string()))?
            .ok_or_else(|| {
                refusal(
                    response_code::SUBSCRIPTION_GROUP_NOT_EXIST,
                    format!(
                        "subscription group not exist, {name} (autoCreateSubscriptionGroup is \
                         false){SUBSCRIPTION_GROUP_NOT_EXIST_FAQ}"
                    ),
                )
            })
    }

    /// The stored message a send-back names by its commit log offset.
    fn original(&self, offset: i64) -> Result<OwnedRecord, Refusal> {
        self.store
            .look_message_by_offset(u64::try_from(offset).unwrap_or(u64::MAX))
            .ok_or_else(|| {
                refusal(
                    response_code::SYSTEM_ERROR,
                    format!(
                        "look message by offset failed, {offset}: no message starts there (the \
                         commit log holds [{}, {}))",
                        self.store.min_offset(),
                        self.store.max_offset()
                    ),
                )
            })
    }

    /// The group's dead-letter queue, created on first use. RocketMQ writes to a DLQ whatever
    /// its permission; refusing keeps the message with the consumer, which retries it,
    /// instead of storing it against the rule.
    fn dlq(&self, group: &str) -> Result<TopicConfig, Refusal> {
        let dlq = self.topics.create_in_send_back(
            &dlq_topic(group),
            DLQ_NUMS_PER_GROUP,
            perm::PERM_READ | perm::PERM_WRITE,
            0,
        );
        writable(&dlq)?;
        Ok(dlq)
    }

    /// `handleRetryAndDLQ`: a send to a group's retry topic (a consumer whose send-back failed
    /// sends the retry itself) goes to the group's dead-letter queue once its reconsume count
    /// reached the bound. `Some(dlq)` then: the send goes there, queue 0, undelayed.
    pub(super) fn retry_or_dlq(
        &self,
        request: &RemotingCommand,
        header: &SendMessageRequestHeader,
    ) -> Result<Option<String>, Refusal> {
        let Some(group) = header.topic.strip_prefix(RETRY_GROUP_TOPIC_PREFIX) else {
            return Ok(None);
        };
        let config = self.group(group)?;
        let bound = max_reconsume_times(request, header.max_reconsume_times, &config);
        if header.reconsume_times.unwrap_or(0) < bound {
            return Ok(None);
        }
        Ok(Some(self.dlq(group)?.topic_name))
    }
}

/// The request's `maxReconsumeTimes` from a client of V3_4_9 or later, else the group's
/// `retryMaxTimes`.
fn max_reconsume_times(
    request: &RemotingCommand,
    asked: Option<i32>,
    group: &SubscriptionGroupConfig,
) -> i32 {
    match asked {
        Some(times) if request.version >= V3_4_9 => times,
        _ => group.retry_max_times,
    }
}

/// `PermName.isWriteable` of a topic the broker is about to write a consumer's message to.
fn writable(topic: &TopicConfig) -> Result<(), Refusal> {
    if topic.perm & perm::PERM_WRITE == 0 {
        return Err(refusal(
            response_code::NO_PERMISSION,
            format!(
                "the topic[{}] sending message is forbidden (perm {})",
                topic.topic_name, topic.perm
            ),
        ));
    }
    Ok(())
}
