//! RocketMQ's `ConsumerManageProcessor`: QUERY_CONSUMER_OFFSET, UPDATE_CONSUMER_OFFSET and
//! GET_CONSUMER_LIST_BY_GROUP, over the [`ConsumerOffsetManager`] and the [`ConsumerManager`].
//!
//! A slave stores the offsets committed to it, as RocketMQ's does: consumers that moved to the
//! slave while the master was down keep their place there, and the next sync from the master
//! (every `slaveSyncInterval`) replaces them with the master's table.

use std::sync::Arc;

use crate::broker::consumer_manager::ConsumerManager;
use crate::broker::consumer_offset::ConsumerOffsetManager;
use crate::broker::subscription_group::SubscriptionGroupManager;
use crate::broker::topic_config::TopicConfigManager;
use crate::remoting::header::{
    GetConsumerListByGroupRequestHeader, OffsetResponseHeader, QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
};
use crate::remoting::{
    request_code, response_code, RemotingCommand, RequestContext, RequestProcessor,
};
use crate::store::MessageStore;

pub(crate) struct ConsumerManageProcessor {
    pub(crate) store: Arc<MessageStore>,
    pub(crate) topics: Arc<TopicConfigManager>,
    pub(crate) groups: Arc<SubscriptionGroupManager>,
    pub(crate) consumers: Arc<ConsumerManager>,
    pub(crate) offsets: Arc<ConsumerOffsetManager>,
    /// Bytes behind the head still counted as in memory (`accessMessageInMemoryMaxRatio`).
    pub(crate) memory_bytes: u64,
}

fn answer(request: &RemotingCommand, code: i32, remark: String) -> RemotingCommand {
    RemotingCommand::response_to(request, code, Some(remark))
}

impl ConsumerManageProcessor {
    /// `queryConsumerOffset`: the committed offset; for a group that never committed, 0 when
    /// the queue still starts at 0 and its first message is in memory (a new group reads the
    /// queue from its start), else QUERY_NOT_FOUND, as RocketMQ answers.
    pub(crate) fn query_consumer_offset(&self, request: &RemotingCommand) -> RemotingCommand {
        let h: QueryConsumerOffsetRequestHeader = match request.decode_custom_header() {
            Ok(h) => h,
            Err(e) => return answer(request, response_code::SYSTEM_ERROR, e.to_string()),
        };
        let found = self
            .offsets
            .query_offset(&h.consumer_group, &h.topic, h.queue_id)
            .or_else(|| {
                if h.set_zero_if_not_found == Some(false) {
                    return None;
                }
                let Some(cq) = self.store.consume_queue(&h.topic, h.queue_id) else {
                    return Some(0);
                };
                let first = cq.get(0, 1).into_iter().next();
                let in_memory = first.is_none_or(|(_, e)| {
                    self.store
                        .max_offset()
                        .saturating_sub(e.commitlog_offset as u64)
                        <= self.memory_bytes
                });
                (cq.min_queue_offset() <= 0 && in_memory).then_some(0)
            });
        match found {
            Some(offset) => {
                let mut r = RemotingCommand::response_to(request, response_code::SUCCESS, None);
                r.write_custom_header(&OffsetResponseHeader { offset });
                r
            }
            None => answer(
                request,
                response_code::QUERY_NOT_FOUND,
                format!(
                    "Not found: consumerGroup {} committed no offset for topic {} queueId {}",
                    h.consumer_group, h.topic, h.queue_id
                ),
            ),
        }
    }

    /// `updateConsumerOffset`, with RocketMQ 5's checks: the topic, the group and the queue
    /// must exist; a refused commit changes nothing.
    pub(crate) fn update_consumer_offset(&self, request: &RemotingCommand) -> RemotingCommand {
        let h: UpdateConsumerOffsetRequestHeader = match request.decode_custom_header() {
            Ok(h) => h,
            Err(e) => return answer(request, response_code::SYSTEM_ERROR, e.to_string()),
        };
        let Some(topic) = self.topics.select(&h.topic) else {
            return answer(
                request,
                response_code::TOPIC_NOT_EXIST,
                format!("Topic {} not exist! (topic)", h.topic),
            );
        };
        if !self.groups.contains(&h.consumer_group) {
            return answer(
                request,
                response_code::SUBSCRIPTION_GROUP_NOT_EXIST,
                format!(
                    "Subscription group {} not exist! (consumerGroup)",
                    h.consumer_group
                ),
            );
        }
        if h.queue_id < 0 || h.queue_id >= topic.read_queue_nums.max(topic.write_queue_nums) {
            return answer(
                request,
                response_code::SYSTEM_ERROR,
                format!(
                    "queueId {} is illegal: topic {} has {} queues (queueId)",
                    h.queue_id, h.topic, topic.read_queue_nums
                ),
            );
        }
        if h.commit_offset < 0 {
            return answer(
                request,
                response_code::SYSTEM_ERROR,
                format!(
                    "commitOffset {} is negative (commitOffset)",
                    h.commit_offset
                ),
            );
        }
        let taken =
            self.offsets
                .commit_offset(&h.consumer_group, &h.topic, h.queue_id, h.commit_offset);
        // As RocketMQ answers: success, with why the offset did not move.
        let remark = (!taken).then(|| "Offset has been previously reset".to_owned());
        RemotingCommand::response_to(request, response_code::SUCCESS, remark)
    }

    /// `getConsumerListByGroup`: `{"consumerIdList":[...]}`.
    pub(crate) fn get_consumer_list_by_group(&self, request: &RemotingCommand) -> RemotingCommand {
        let h: GetConsumerListByGroupRequestHeader = match request.decode_custom_header() {
            Ok(h) => h,
            Err(e) => return answer(request, response_code::SYSTEM_ERROR, e.to_string()),
        };
        match self.consumers.client_ids(&h.consumer_group) {
            Some(ids) if !ids.is_empty() => {
                let mut r = RemotingCommand::response_to(request, response_code::SUCCESS, None);
                r.body = serde_json::json!({ "consumerIdList": ids })
                    .to_string()
                    .into_bytes();
                r
            }
            _ => answer(
                request,
                response_code::SYSTEM_ERROR,
                format!("no consumer for this group, {}", h.consumer_group),
            ),
        }
    }
}

/// The codes it answers.
pub(crate) const CODES: &[i32] = &[
    request_code::QUERY_CONSUMER_OFFSET,
    request_code::UPDATE_CONSUMER_OFFSET,
    request_code::GET_CONSUMER_LIST_BY_GROUP,
];

impl RequestProcessor for ConsumerManageProcessor {
    fn process(&self, request: RemotingCommand, _ctx: &RequestContext) -> Option<RemotingCommand> {
        Some(match request.code {
            request_code::QUERY_CONSUMER_OFFSET => self.query_consumer_offset(&request),
            request_code::UPDATE_CONSUMER_OFFSET => self.update_consumer_offset(&request),
            _ => self.get_consumer_list_by_group(&request),
        })
    }
}

#[cfg(test)]
mod tests;
