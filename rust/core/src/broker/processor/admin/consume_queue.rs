//! QUERY_CONSUME_QUEUE (`mqadmin queryCq`): a window of a consume queue's entries (each
//! message's commit log offset, size and tag hash), with the queue's bounds and, for a group,
//! its subscription. rocketha's consume queues have no extension file, so an entry carries no
//! filter bit map, as RocketMQ's do without `enableConsumeQueueExt`.

use serde::Serialize;

use super::connections::subscription_body;
use crate::broker::consumer_manager::ConsumerManager;
use crate::broker::processor::answer::system_error;
use crate::protocol::connection::SubscriptionBody;
use crate::protocol::json::{to_json, JsonStyle};
use crate::remoting::header::QueryConsumeQueueRequestHeader;
use crate::remoting::{response_code, RemotingCommand};
use crate::store::MessageStore;

/// `ConsumeQueueData`: fastjson writes the primitive `eval` even when false.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ConsumeQueueData {
    physic_offset: i64,
    physic_size: i32,
    tags_code: i64,
    eval: bool,
}

/// `QueryConsumeQueueResponseBody`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct QueryConsumeQueueResponseBody {
    #[serde(skip_serializing_if = "Option::is_none")]
    subscription_data: Option<SubscriptionBody>,
    #[serde(skip_serializing_if = "Option::is_none")]
    filter_data: Option<String>,
    queue_data: Vec<ConsumeQueueData>,
    max_queue_index: i64,
    min_queue_index: i64,
}

/// The most entries one answer holds, whatever `count` asks: a window, not a dump.
const MAX_COUNT: i32 = 10_000;

pub(crate) fn query_consume_queue(
    store: &MessageStore,
    consumers: &ConsumerManager,
    request: &RemotingCommand,
) -> RemotingCommand {
    let h: QueryConsumeQueueRequestHeader = match request.decode_custom_header() {
        Ok(h) => h,
        Err(e) => return system_error(request, e),
    };
    let Some(cq) = store.consume_queue(&h.topic, h.queue_id) else {
        let remark = format!("{}@{} is not exist!", h.queue_id, h.topic);
        return RemotingCommand::response_to(request, response_code::SYSTEM_ERROR, Some(remark));
    };
    let (subscription_data, filter_data) = match &h.consumer_group {
        None => (None, None),
        Some(group) => match consumers.find_subscription(group, &h.topic).flatten() {
            Some(sub) => (Some(subscription_body(sub)), None),
            None => (None, Some(format!("{group}@{} is not online!", h.topic))),
        },
    };
    let (min, max) = (cq.min_queue_offset(), cq.max_queue_offset());
    let mut response = RemotingCommand::response_to(request, response_code::SUCCESS, None);
    if h.index < min || h.index >= max {
        response.remark = Some(format!(
            "Index {} of {}@{} is not exist! (the queue holds [{min}, {max}))",
            h.index, h.queue_id, h.topic
        ));
    }
    let count = usize::try_from(h.count.clamp(0, MAX_COUNT)).unwrap_or(0);
    let queue_data = cq
        .get(h.index.max(min), count)
        .into_iter()
        .filter(|(offset, _)| *offset - h.index < i64::from(h.count))
        .map(|(_, e)| ConsumeQueueData {
            physic_offset: e.commitlog_offset,
            physic_size: e.size,
            tags_code: e.tags_code,
            eval: false,
        })
        .collect();
    let body = QueryConsumeQueueResponseBody {
        subscription_data,
        filter_data,
        queue_data,
        max_queue_index: max,
        min_queue_index: min,
    };
    response.body = to_json(&body, JsonStyle::Fastjson).into_bytes();
    response
}
