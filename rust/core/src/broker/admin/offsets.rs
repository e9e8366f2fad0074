//! INVOKE_BROKER_TO_RESET_OFFSET (`mqadmin resetOffsetByTime`, `DefaultMQAdminExt.
//! resetOffsetByTimestamp`), served on the broker as RocketMQ 5 does by default
//! (`useServerSideResetOffset`): each queue's offset is set at once, the group's own commits
//! of it are ignored until its next pull, and that pull is answered PULL_OFFSET_MOVED to the
//! new offset. Consumers need no part in it, so it works whether they run or not, whatever
//! their client.

use super::super::consumer_offset::ConsumerOffsetManager;
use super::super::pull::hold::PullRequestHoldService;
use super::super::subscription_group::SubscriptionGroupManager;
use super::super::topic_config::TopicConfigManager;
use super::{bad_header, offset_by_time};
use crate::protocol::lock_batch::MessageQueue;
use crate::protocol::queue_stats::encode_reset_offset;
use crate::remoting::header::ResetOffsetRequestHeader;
use crate::remoting::{response_code, RemotingCommand};
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
        Err(e) => return bad_header(request, e),
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
