//! RocketMQ 5's `AckMessageProcessor` (ACK_MESSAGE, BATCH_ACK_MESSAGE) and
//! `ChangeInvisibleTimeProcessor` (CHANGE_MESSAGE_INVISIBLETIME): a popped message is done
//! with, or stays invisible longer.
//!
//! An ack is an [`AckMsg`] put into the revive queue its extra info names, due when the pop's
//! invisible time ends: the revive service, reading it there, leaves the message alone. An
//! invisible-time change writes a checkpoint of the one message popped now for the new time,
//! then acks the old pop. A malformed extra info, a queue or an offset outside the topic, an
//! unknown revive queue: RocketMQ's codes, with a remark naming the field, and nothing written.

use std::sync::Arc;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::Deserialize;

use super::answer::success_with;
use super::pop::PopMessageProcessor;
use crate::broker::pop::extra_info::{real_topic, ExtraInfo};
use crate::broker::pop::{
    put_check_point, put_revive_message, revive_topic, AckMsg, PopCheckPoint, ACK_TAG,
    BATCH_ACK_TAG, POP_ORDER_REVIVE_QUEUE,
};
use crate::broker::topic_config::TopicConfigManager;
use crate::broker::BrokerSettings;
use crate::protocol::now_millis;
use crate::remoting::header::{
    AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader,
};
use crate::remoting::{
    request_code, response_code, RemotingCommand, RequestContext, RequestProcessor,
};
use crate::store::MessageStore;

/// The codes it answers.
pub(crate) const CODES: &[i32] = &[
    request_code::ACK_MESSAGE,
    request_code::BATCH_ACK_MESSAGE,
    request_code::CHANGE_MESSAGE_INVISIBLETIME,
];

/// An ack refused: the code and a remark naming what was wrong.
struct Refusal(i32, String);

/// `BatchAckMessageRequestBody`, in fastjson's short names.
#[derive(Debug, Deserialize)]
struct BatchAckMessageRequestBody {
    #[serde(rename = "brokerName", default)]
    broker_name: Option<String>,
    #[serde(default)]
    acks: Vec<BatchAck>,
}

/// `BatchAck`: one pop's acked messages, as a bit set over offsets from `startOffset`.
#[derive(Debug, Deserialize)]
struct BatchAck {
    #[serde(rename = "c", alias = "consumerGroup")]
    consumer_group: String,
    #[serde(rename = "t", alias = "topic")]
    topic: String,
    #[serde(rename = "r", alias = "retry", default)]
    retry: String,
    #[serde(rename = "so", alias = "startOffset")]
    start_offset: i64,
    #[serde(rename = "q", alias = "queueId")]
    queue_id: i32,
    #[serde(rename = "rq", alias = "reviveQueueId")]
    revive_queue_id: i32,
    #[serde(rename = "pt", alias = "popTime")]
    pop_time: i64,
    #[serde(rename = "it", alias = "invisibleTime")]
    invisible_time: i64,
    /// `BitSet.toByteArray`, base64 (fastjson's byte arrays).
    #[serde(rename = "b", alias = "bitSet", default)]
    bit_set: String,
}

pub(crate) struct AckMessageProcessor {
    pub(crate) store: Arc<MessageStore>,
    pub(crate) topics: Arc<TopicConfigManager>,
    pub(crate) settings: Arc<BrokerSettings>,
    /// Orderly pops' acks go to its `ConsumerOrderInfoManager`, under its queue locks.
    pub(crate) pop: Arc<PopMessageProcessor>,
}

impl AckMessageProcessor {
    fn ack(&self, request: &RemotingCommand) -> Result<RemotingCommand, Refusal> {
        let h: AckMessageRequestHeader = request
            .decode_custom_header()
            .map_err(|e| Refusal(response_code::MESSAGE_ILLEGAL, e.to_string()))?;
        self.check_offset(&h.topic, h.queue_id, h.offset, true)?;
        let info = extra_info(&h.extra_info)?;
        if info.revive_qid == POP_ORDER_REVIVE_QUEUE {
            self.ack_orderly(
                &h.topic,
                &h.consumer_group,
                h.queue_id,
                h.offset,
                info.pop_time,
            )?;
            return Ok(RemotingCommand::response_to(
                request,
                response_code::SUCCESS,
                None,
            ));
        }
        self.check_revive_queue(info.revive_qid)?;
        self.ack_one(h.consumer_group, h.topic, h.queue_id, h.offset, info)?;
        Ok(RemotingCommand::response_to(
            request,
            response_code::SUCCESS,
            None,
        ))
    }

    /// `appendAck` of one message popped with `info`: due when its invisible time ends.
    fn ack_one(
        &self,
        consumer_group: String,
        topic: String,
        queue_id: i32,
        offset: i64,
        info: ExtraInfo,
    ) -> Result<(), Refusal> {
        let ack = AckMsg {
            ack_offset: offset,
            start_offset: info.ck_queue_offset,
            consumer_group,
            topic,
            queue_id,
            pop_time: info.pop_time,
            broker_name: Some(info.broker_name),
            ack_offset_list: Vec::new(),
        };
        self.put_ack(&ack, info.revive_qid, info.pop_time + info.invisible_time)
    }

    fn ack_orderly(
        &self,
        topic: &str,
        group: &str,
        queue_id: i32,
        offset: i64,
        pop_time: i64,
    ) -> Result<(), Refusal> {
        self.pop
            .ack_orderly(topic, group, queue_id, offset, pop_time)
            .map_err(|remark| Refusal(response_code::MESSAGE_ILLEGAL, remark))
    }

    fn batch_ack(&self, request: &RemotingCommand) -> Result<RemotingCommand, Refusal> {
        let body: BatchAckMessageRequestBody =
            serde_json::from_slice(&request.body).map_err(|e| {
                Refusal(
                    response_code::MESSAGE_ILLEGAL,
                    format!("batch ack body: {e}"),
                )
            })?;
        if body.acks.is_empty() {
            return Err(Refusal(
                response_code::NO_MESSAGE,
                "no acks in the body".into(),
            ));
        }
        // Every ack is checked before any is written: nothing half-applied.
        let mut acks = Vec::with_capacity(body.acks.len());
        let mut orderly = Vec::new();
        for b in &body.acks {
            let topic = real_topic(&b.topic, &b.consumer_group, &b.retry);
            if b.revive_queue_id != POP_ORDER_REVIVE_QUEUE {
                self.check_revive_queue(b.revive_queue_id)?;
            }
            let bits = STANDARD.decode(&b.bit_set).map_err(|e| {
                Refusal(
                    response_code::MESSAGE_ILLEGAL,
                    format!("batch ack bitSet: {e}"),
                )
            })?;
            let (min, max) = self.queue_range(&topic, b.queue_id);
            let offsets: Vec<i64> = set_bits(&bits)
                .map(|i| b.start_offset + i as i64)
                .filter(|o| (min..=max).contains(o))
                .collect();
            if offsets.is_empty() {
                continue;
            }
            if b.revive_queue_id == POP_ORDER_REVIVE_QUEUE {
                orderly.push((topic, b, offsets));
                continue;
            }
            let ack = AckMsg {
                ack_offset: -1,
                start_offset: b.start_offset,
                consumer_group: b.consumer_group.clone(),
                topic,
                queue_id: b.queue_id,
                pop_time: b.pop_time,
                broker_name: body.broker_name.clone(),
                ack_offset_list: offsets,
            };
            acks.push((ack, b.revive_queue_id, b.pop_time + b.invisible_time));
        }
        for (ack, revive_qid, due) in &acks {
            self.put_ack(ack, *revive_qid, *due)?;
        }
        for (topic, b, offsets) in orderly {
            for offset in offsets {
                self.ack_orderly(&topic, &b.consumer_group, b.queue_id, offset, b.pop_time)?;
            }
        }
        Ok(RemotingCommand::response_to(
            request,
            response_code::SUCCESS,
            None,
        ))
    }

    fn change_invisible_time(&self, request: &RemotingCommand) -> Result<RemotingCommand, Refusal> {
        let h: ChangeInvisibleTimeRequestHeader = request
            .decode_custom_header()
            .map_err(|e| Refusal(response_code::MESSAGE_ILLEGAL, e.to_string()))?;
        self.check_offset(&h.topic, h.queue_id, h.offset, false)?;
        if h.invisible_time < 0 {
            return Err(Refusal(
                response_code::INVALID_PARAMETER,
                format!("invisibleTime {} must not be negative", h.invisible_time),
            ));
        }
        let info = extra_info(&h.extra_info)?;
        let now = now_millis();
        if info.revive_qid == POP_ORDER_REVIVE_QUEUE {
            // No checkpoint: the queue's order info holds the message's next visible time.
            let visible_at = now + h.invisible_time;
            self.pop.change_invisible_orderly(
                &h.topic,
                &h.consumer_group,
                h.queue_id,
                h.offset,
                info.pop_time,
                visible_at,
            );
            return Ok(success_with(
                request,
                &ChangeInvisibleTimeResponseHeader {
                    pop_time: info.pop_time,
                    invisible_time: visible_at - info.pop_time,
                    revive_qid: POP_ORDER_REVIVE_QUEUE,
                },
            ));
        }
        self.check_revive_queue(info.revive_qid)?;
        let mut ck = PopCheckPoint::new(
            &h.topic,
            &h.consumer_group,
            h.queue_id,
            h.offset,
            now,
            h.invisible_time,
            &info.broker_name,
        );
        ck.add(h.offset);
        put_check_point(&self.store, &self.revive_topic(), info.revive_qid, &ck)
            .map_err(|e| Refusal(response_code::SYSTEM_ERROR, e.to_string()))?;
        let revive_qid = info.revive_qid;
        self.ack_one(h.consumer_group, h.topic, h.queue_id, h.offset, info)?;
        Ok(success_with(
            request,
            &ChangeInvisibleTimeResponseHeader {
                pop_time: now,
                invisible_time: h.invisible_time,
                revive_qid,
            },
        ))
    }

    fn revive_topic(&self) -> String {
        revive_topic(&self.settings.cluster_name)
    }

    fn put_ack(&self, ack: &AckMsg, revive_qid: i32, due: i64) -> Result<(), Refusal> {
        let tag = if ack.ack_offset_list.is_empty() {
            ACK_TAG
        } else {
            BATCH_ACK_TAG
        };
        put_revive_message(
            &self.store,
            &self.revive_topic(),
            revive_qid,
            tag,
            &ack.to_json(),
            &ack.unique_id(),
            due,
        )
        .map(drop)
        .map_err(|e| Refusal(response_code::SYSTEM_ERROR, e.to_string()))
    }

    /// The queue exists and holds `offset`: `[min, max]` for an ack (RocketMQ's bound), `[min,
    /// max)` for an invisible-time change.
    fn check_offset(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_inclusive: bool,
    ) -> Result<(), Refusal> {
        let config = self.topics.select(topic).ok_or_else(|| {
            Refusal(
                response_code::TOPIC_NOT_EXIST,
                format!("topic[{topic}] not exist, apply first please!"),
            )
        })?;
        if queue_id < 0 || queue_id >= config.read_queue_nums {
            return Err(Refusal(
                response_code::MESSAGE_ILLEGAL,
                format!(
                    "queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{}]",
                    config.read_queue_nums
                ),
            ));
        }
        let (min, max) = self.queue_range(topic, queue_id);
        let inside = offset >= min && (offset < max || (max_inclusive && offset == max));
        if !inside {
            return Err(Refusal(
                response_code::NO_MESSAGE,
                format!(
                    "offset is illegal, key:{topic}@{queue_id}, commit:{offset}, store:{min}~{max}"
                ),
            ));
        }
        Ok(())
    }

    fn queue_range(&self, topic: &str, queue_id: i32) -> (i64, i64) {
        self.store
            .consume_queue(topic, queue_id)
            .map_or((0, 0), |q| (q.min_queue_offset(), q.max_queue_offset()))
    }

    /// A revive queue of this broker's revive topic.
    fn check_revive_queue(&self, revive_qid: i32) -> Result<(), Refusal> {
        if revive_qid < 0 || revive_qid >= self.settings.pop.revive_queue_num {
            return Err(Refusal(
                response_code::MESSAGE_ILLEGAL,
                format!(
                    "extraInfo names revive queue {revive_qid}; this broker has {} \
                     (reviveQueueNum)",
                    self.settings.pop.revive_queue_num
                ),
            ));
        }
        Ok(())
    }
}

fn extra_info(text: &str) -> Result<ExtraInfo, Refusal> {
    ExtraInfo::parse(text).map_err(|e| Refusal(response_code::MESSAGE_ILLEGAL, e))
}

/// The set bits of `BitSet.toByteArray`'s little-endian bytes.
fn set_bits(bytes: &[u8]) -> impl Iterator<Item = usize> + '_ {
    bytes.iter().enumerate().flat_map(|(i, b)| {
        (0..8)
            .filter(move |bit| b & (1 << bit) != 0)
            .map(move |bit| i * 8 + bit)
    })
}

impl RequestProcessor for AckMessageProcessor {
    fn process(&self, request: RemotingCommand, _ctx: &RequestContext) -> Option<RemotingCommand> {
        let answer = match request.code {
            request_code::ACK_MESSAGE => self.ack(&request),
            request_code::BATCH_ACK_MESSAGE => self.batch_ack(&request),
            _ => self.change_invisible_time(&request),
        };
        Some(answer.unwrap_or_else(|Refusal(code, remark)| {
            RemotingCommand::response_to(&request, code, Some(remark))
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::set_bits;

    #[test]
    fn a_java_bit_set_reads_little_endian() {
        // BitSet {0, 3, 9}.toByteArray() = [0x09, 0x02]
        assert_eq!(set_bits(&[0x09, 0x02]).collect::<Vec<_>>(), vec![0, 3, 9]);
    }
}
