//! The operators' figures of `AdminBrokerProcessor`: a topic's queues (GET_TOPIC_STATS_INFO,
//! `mqadmin topicStatus`) and a group's progress in them (GET_CONSUME_STATS, `mqadmin
//! consumerProgress`), and the lag `rocketha status` lists.

use std::collections::BTreeSet;

use super::offsets::store_time_at;
use crate::broker::broker_stats::BrokerStatsManager;
use crate::broker::processor::answer::{system_error, with_body};
use crate::broker::topic_config::TopicConfigManager;
use crate::broker::ConsumeTables;
use crate::protocol::lock_batch::MessageQueue;
use crate::protocol::queue_stats::{
    encode_consume_stats, encode_topic_stats, OffsetWrapper, TopicOffset,
};
use crate::remoting::header::{GetConsumeStatsRequestHeader, GetTopicStatsInfoRequestHeader};
use crate::remoting::{response_code, RemotingCommand};
use crate::store::MessageStore;

/// GET_TOPIC_STATS_INFO (`AdminBrokerProcessor.getTopicStatsInfo`): each write queue's min and
/// max offsets and the store time of its last message (0 when it has none).
pub(crate) fn topic_stats(
    store: &MessageStore,
    topics: &TopicConfigManager,
    broker_name: &str,
    request: &RemotingCommand,
) -> RemotingCommand {
    let h: GetTopicStatsInfoRequestHeader = match request.decode_custom_header() {
        Ok(h) => h,
        Err(e) => return system_error(request, e),
    };
    let Some(config) = topics.select(&h.topic) else {
        return RemotingCommand::response_to(
            request,
            response_code::TOPIC_NOT_EXIST,
            Some(format!("topic[{}] not exist", h.topic)),
        );
    };
    let offsets: Vec<(MessageQueue, TopicOffset)> = (0..config.write_queue_nums)
        .map(|queue_id| {
            let cq = store.consume_queue(&h.topic, queue_id);
            let (min, max) = cq
                .as_ref()
                .map_or((0, 0), |q| (q.min_queue_offset(), q.max_queue_offset()));
            let last = store_time_at(store, cq.as_deref(), |q| q.max_queue_offset() - 1);
            let queue = MessageQueue {
                topic: h.topic.clone(),
                broker_name: broker_name.to_owned(),
                queue_id,
            };
            let offset = TopicOffset {
                min_offset: min,
                max_offset: max,
                last_update_timestamp: last.max(0),
            };
            (queue, offset)
        })
        .collect();
    with_body(request, encode_topic_stats(&offsets))
}

/// GET_CONSUME_STATS (`AdminBrokerProcessor.getConsumeStats`): per read queue of each topic
/// asked for (by default every topic the group committed in, less those a live group does not
/// subscribe to), the queue's max offset, the group's committed offset and when the last
/// message it consumed was stored. `consumeTps` is 0: rocketha samples no per-group rate.
pub(crate) fn consume_stats(
    store: &MessageStore,
    topics: &TopicConfigManager,
    consume: &ConsumeTables,
    stats: &BrokerStatsManager,
    broker_name: &str,
    request: &RemotingCommand,
) -> RemotingCommand {
    let h: GetConsumeStatsRequestHeader = match request.decode_custom_header() {
        Ok(h) => h,
        Err(e) => return system_error(request, e),
    };
    let group = &h.consumer_group;
    let listed: BTreeSet<String> = h
        .topic_list
        .iter()
        .flat_map(|l| l.split(';'))
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect();
    let wanted = if !listed.is_empty() {
        listed
    } else {
        let mut wanted = match h.topic.as_deref().filter(|t| !t.is_empty()) {
            Some(topic) => BTreeSet::from([topic.to_owned()]),
            None => consume.offsets.topics_of(group),
        };
        if let Some(subscribed) = consume.consumers.subscribed_topics(group) {
            if !subscribed.is_empty() {
                wanted.retain(|t| subscribed.contains(t));
            }
        }
        wanted
    };
    let mut table = Vec::new();
    let mut tps = 0.0;
    for topic in wanted {
        let Some(config) = topics.select(&topic) else {
            continue;
        };
        tps += stats.tps_group_get_nums(group, &topic);
        for queue_id in 0..config.read_queue_nums {
            let cq = store.consume_queue(&topic, queue_id);
            let broker_offset = cq.as_ref().map_or(0, |q| q.max_queue_offset());
            let consumer_offset = consume
                .offsets
                .query_offset(group, &topic, queue_id)
                .unwrap_or(0)
                .max(0);
            let last = if consumer_offset > 0 {
                store_time_at(store, cq.as_deref(), |_| consumer_offset - 1)
            } else {
                0
            };
            let queue = MessageQueue {
                topic: topic.clone(),
                broker_name: broker_name.to_owned(),
                queue_id,
            };
            let offsets = OffsetWrapper {
                broker_offset,
                consumer_offset,
                pull_offset: consumer_offset,
                last_timestamp: last.max(0),
            };
            table.push((queue, offsets));
        }
    }
    with_body(request, encode_consume_stats(&table, tps))
}

/// One consumer group's progress in one queue: what `rocketha status` lists as lag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerLag {
    pub group: String,
    pub topic: String,
    pub queue_id: i32,
    /// The queue's next offset to be written.
    pub broker_offset: i64,
    /// The group's committed offset.
    pub consumer_offset: i64,
}

/// The progress of every group that committed an offset here, by group, topic and queue.
pub(crate) fn consumer_lag(store: &MessageStore, consume: &ConsumeTables) -> Vec<ConsumerLag> {
    let mut out: Vec<ConsumerLag> = consume
        .offsets
        .all()
        .into_iter()
        .map(|(group, topic, queue_id, consumer_offset)| ConsumerLag {
            broker_offset: store
                .consume_queue(&topic, queue_id)
                .map_or(0, |q| q.max_queue_offset()),
            group,
            topic,
            queue_id,
            consumer_offset,
        })
        .collect();
    out.sort_by(|a, b| (&a.group, &a.topic, a.queue_id).cmp(&(&b.group, &b.topic, b.queue_id)));
    out
}
