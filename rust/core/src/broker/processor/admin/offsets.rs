//! A queue's offsets as operators and consumers ask for them (`AdminBrokerProcessor`): its min
//! and max (GET_MIN_OFFSET, GET_MAX_OFFSET), its earliest store time (GET_EARLIEST_MSG_STORETIME),
//! the offset stored at a time (SEARCH_OFFSET_BY_TIMESTAMP); and
//! INVOKE_BROKER_TO_RESET_OFFSET (`mqadmin resetOffsetByTime`, `DefaultMQAdminExt.
//! resetOffsetByTimestamp`), served on the broker as RocketMQ 5 does by default
//! (`useServerSideResetOffset`): each queue's offset is set at once, the group's own commits
//! of it are ignored until its next pull, and that pull is answered PULL_OFFSET_MOVED to the
//! new offset. Consumers need no part in it, so it works whether they run or not, whatever
//! their client.

use crate::broker::consumer_offset::ConsumerOffsetManager;
use crate::broker::processor::answer::{success_with, system_error};
use crate::broker::pull_request_hold::PullRequestHoldService;
use crate::broker::subscription_group::SubscriptionGroupManager;
use crate::broker::topic_config::TopicConfigManager;
use crate::consume_queue::ConsumeQueue;
use crate::protocol::lock_batch::MessageQueue;
use crate::protocol::queue_stats::encode_reset_offset;
use crate::remoting::header::{
    GetEarliestMsgStoretimeResponseHeader, OffsetResponseHeader, QueueRequestHeader,
    ResetOffsetRequestHeader, SearchOffsetRequestHeader,
};
use crate::remoting::{request_code, response_code, CustomHeader, RemotingCommand};
use crate::store::MessageStore;

/// The tables a reset reads and changes.
pub(crate) struct ResetTables<'a> {
    pub(crate) store: &'a MessageStore,
    pub(crate) topics: &'a TopicConfigManager,
    pub(crate) groups: &'a SubscriptionGroupManager,
    pub(crate) offsets: &'a ConsumerOffsetManager,
    pub(crate) broker_name: &'a str,
    pub(crate) is_slave: bool,
    /// Where the group's pulls wait: woken, they take the new offsets at once.
    pub(crate) hold: &'a PullRequestHoldService,
}

/// `resetOffsetInner`: the new offset of each queue, as a `ResetOffsetBody`.
pub(crate) fn reset_offset(t: &ResetTables<'_>, request: &RemotingCommand) -> RemotingCommand {
    let refuse = |code, remark: String| RemotingCommand::response_to(request, code, Some(remark));
    let h: ResetOffsetRequestHeader = match request.decode_custom_header() {
        Ok(h) => h,
        Err(e) => return system_error(request, e),
    };
    if t.is_slave {
        return refuse(
            response_code::SYSTEM_ERROR,
            "Can not reset offset in slave broker".into(),
        );
    }
    let Some(topic) = t.topics.select(&h.topic) else {
        return refuse(
            response_code::TOPIC_NOT_EXIST,
            format!("Topic {} does not exist", h.topic),
        );
    };
    if !t.groups.contains(&h.group) {
        return refuse(
            response_code::SUBSCRIPTION_GROUP_NOT_EXIST,
            format!("Group {} does not exist", h.group),
        );
    }
    let table = match targets(t, &h, topic.read_queue_nums) {
        Ok(table) => table,
        Err((code, remark)) => return refuse(code, remark),
    };
    let mut body = Vec::with_capacity(table.len());
    for (queue_id, offset) in table {
        t.offsets
            .assign_reset_offset(&h.group, &h.topic, queue_id, offset);
        let mq = MessageQueue {
            topic: h.topic.clone(),
            broker_name: t.broker_name.to_owned(),
            queue_id,
        };
        body.push((mq, offset));
    }
    t.hold.wake_group(&h.topic, &h.group);
    let mut response = RemotingCommand::response_to(request, response_code::SUCCESS, None);
    response.body = encode_reset_offset(&body);
    response
}

/// (queue id, new offset) of each queue the request resets, or the code and remark it is
/// refused with.
fn targets(
    t: &ResetTables<'_>,
    h: &ResetOffsetRequestHeader,
    read_queue_nums: i32,
) -> Result<Vec<(i32, i64)>, (i32, String)> {
    let head = |queue_id: i32| {
        t.store
            .consume_queue(&h.topic, queue_id)
            .map_or((0, 0), |q| (q.min_queue_offset(), q.max_queue_offset()))
    };
    let by_time = |queue_id: i32| match h.timestamp {
        // -1: past everything stored.
        at if at < 0 => head(queue_id).1,
        at => offset_by_time(t.store, &h.topic, queue_id, at, false),
    };
    let Some(queue_id) = h.queue_id.filter(|q| *q >= 0) else {
        return Ok((0..read_queue_nums).map(|q| (q, by_time(q))).collect());
    };
    if queue_id >= read_queue_nums {
        return Err((
            response_code::INVALID_PARAMETER,
            format!(
                "queueId {queue_id} is illegal: topic {} has {read_queue_nums} read queues",
                h.topic
            ),
        ));
    }
    let offset = match h.offset.filter(|o| *o != -1) {
        Some(offset) => {
            let (min, max) = head(queue_id);
            if offset < min || offset > max {
                return Err((
                    response_code::SYSTEM_ERROR,
                    format!("Target offset {offset} not in consume queue range [{min}-{max}]"),
                ));
            }
            offset
        }
        None => by_time(queue_id),
    };
    Ok(vec![(queue_id, offset)])
}

/// GET_MAX_OFFSET, GET_MIN_OFFSET, GET_EARLIEST_MSG_STORETIME: a queue nobody wrote to has
/// offsets 0 and no earliest time (-1), as RocketMQ's store answers.
pub(crate) fn queue_offset(store: &MessageStore, request: &RemotingCommand) -> RemotingCommand {
    let name = match request.code {
        request_code::GET_MAX_OFFSET => "GET_MAX_OFFSET",
        request_code::GET_MIN_OFFSET => "GET_MIN_OFFSET",
        _ => "GET_EARLIEST_MSG_STORETIME",
    };
    let h = match QueueRequestHeader::read_ext_fields(&request.ext_fields, name) {
        Ok(h) => h,
        Err(e) => return system_error(request, e),
    };
    let cq = store.consume_queue(&h.topic, h.queue_id);
    match request.code {
        request_code::GET_MAX_OFFSET => {
            let offset = cq.map_or(0, |q| q.max_queue_offset());
            success_with(request, &OffsetResponseHeader { offset })
        }
        request_code::GET_MIN_OFFSET => {
            let offset = cq.map_or(0, |q| q.min_queue_offset());
            success_with(request, &OffsetResponseHeader { offset })
        }
        _ => {
            let timestamp = store_time_at(store, cq.as_deref(), |q| q.min_queue_offset());
            success_with(
                request,
                &GetEarliestMsgStoretimeResponseHeader { timestamp },
            )
        }
    }
}

/// When the message at the queue offset `at` picks was stored; -1 for an empty queue.
pub(super) fn store_time_at(
    store: &MessageStore,
    cq: Option<&ConsumeQueue>,
    at: impl Fn(&ConsumeQueue) -> i64,
) -> i64 {
    cq.and_then(|q| q.get(at(q), 1).into_iter().next())
        .and_then(|(_, e)| store.record_at(e.commitlog_offset as u64))
        .map_or(-1, |(_, t)| t)
}

/// SEARCH_OFFSET_BY_TIMESTAMP: the first queue offset whose message was stored at or after
/// `timestamp` (RocketMQ 5's `boundaryType` UPPER: the last one stored at or before it); the
/// max offset when every message is older, the min when every one is newer.
pub(crate) fn search_offset_by_timestamp(
    store: &MessageStore,
    request: &RemotingCommand,
) -> RemotingCommand {
    let h: SearchOffsetRequestHeader = match request.decode_custom_header() {
        Ok(h) => h,
        Err(e) => return system_error(request, e),
    };
    let upper = h
        .boundary_type
        .as_deref()
        .is_some_and(|b| b.eq_ignore_ascii_case("UPPER"));
    let offset = offset_by_time(store, &h.topic, h.queue_id, h.timestamp, upper);
    success_with(request, &OffsetResponseHeader { offset })
}

/// `getOffsetInQueueByTime`: the first queue offset stored at or after `timestamp` (with
/// `upper`, the last one stored at or before it); 0 for a queue that does not exist.
pub(crate) fn offset_by_time(
    store: &MessageStore,
    topic: &str,
    queue_id: i32,
    timestamp: i64,
    upper: bool,
) -> i64 {
    let Some(cq) = store.consume_queue(topic, queue_id) else {
        return 0;
    };
    let stored_at = |qo: i64| {
        cq.get(qo, 1)
            .into_iter()
            .next()
            .and_then(|(_, e)| store.record_at(e.commitlog_offset as u64))
            .map_or(i64::MAX, |(_, t)| t)
    };
    // Store timestamps grow with the queue offset: the first offset stored after the bound.
    let (mut lo, mut hi) = (cq.min_queue_offset(), cq.max_queue_offset());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let t = stored_at(mid);
        if t < timestamp || (upper && t == timestamp) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if upper {
        (lo - 1).max(cq.min_queue_offset())
    } else {
        lo
    }
}
