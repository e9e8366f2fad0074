//! The consume side of RocketMQ's `AdminBrokerProcessor` and `QueryMessageProcessor`: queue
//! offsets (GET_MAX_OFFSET, GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP,
//! GET_EARLIEST_MSG_STORETIME), a message by its offset id (VIEW_MESSAGE_BY_ID) or by key
//! (QUERY_MESSAGE), and the tables
//! a slave syncs from its master (GET_ALL_TOPIC_CONFIG, GET_ALL_CONSUMER_OFFSET,
//! GET_ALL_DELAY_OFFSET, GET_ALL_SUBSCRIPTIONGROUP_CONFIG) in RocketMQ's body shapes.

pub(crate) mod broker_config;
pub(crate) mod call_consumer;
pub(crate) mod connections;
pub(crate) mod consume_queue;
pub(crate) mod epoch_cache;
pub(crate) mod groups;
pub(crate) mod offsets;
pub(crate) mod topics;

#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

use super::broker_stats::BrokerStatsManager;
use super::processor::ConsumeTables;
use super::topic_config::TopicConfigManager;
use crate::commitlog::record::{self, Peeked};
use crate::consume_queue::ConsumeQueue;
use crate::protocol::json::{to_json, JsonStyle};
use crate::protocol::lock_batch::MessageQueue;
use crate::protocol::queue_stats::{
    encode_consume_stats, encode_topic_stats, OffsetWrapper, TopicOffset,
};
use crate::remoting::header::{
    GetConsumeStatsRequestHeader, GetEarliestMsgStoretimeResponseHeader,
    GetTopicStatsInfoRequestHeader, OffsetResponseHeader, QueryMessageRequestHeader,
    QueryMessageResponseHeader, QueueRequestHeader, SearchOffsetRequestHeader,
    ViewMessageRequestHeader,
};
use crate::remoting::{request_code, response_code, CustomHeader, RemotingCommand};
use crate::store::{KeyQuery, MessageStore};

/// The raw record at commit log offset `offset` and its store timestamp, if one starts there.
pub(crate) fn record_at(store: &MessageStore, offset: u64) -> Option<(Vec<u8>, i64)> {
    let slice = store.read_raw(offset, usize::MAX)?;
    match record::decode(slice.bytes(), false) {
        Ok(Peeked::Record(r)) if r.physical_offset as u64 == offset => Some((
            slice.bytes()[..r.total_size as usize].to_vec(),
            r.store_timestamp,
        )),
        _ => None,
    }
}

fn success_with<H: CustomHeader>(request: &RemotingCommand, header: &H) -> RemotingCommand {
    let mut r = RemotingCommand::response_to(request, response_code::SUCCESS, None);
    r.write_custom_header(header);
    r
}

fn bad_header(request: &RemotingCommand, e: impl std::fmt::Display) -> RemotingCommand {
    RemotingCommand::response_to(request, response_code::SYSTEM_ERROR, Some(e.to_string()))
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
        Err(e) => return bad_header(request, e),
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
fn store_time_at(
    store: &MessageStore,
    cq: Option<&ConsumeQueue>,
    at: impl Fn(&ConsumeQueue) -> i64,
) -> i64 {
    cq.and_then(|q| q.get(at(q), 1).into_iter().next())
        .and_then(|(_, e)| record_at(store, e.commitlog_offset as u64))
        .map_or(-1, |(_, t)| t)
}

/// GET_TOPIC_CONFIG (`AdminBrokerProcessor.getTopicConfig`, what 5.x's `examineTopicStats`
/// asks first): the topic's config as `TopicConfigAndQueueMapping`, with no static-topic
/// mapping (rocketha has no logic queues).
pub(crate) fn topic_config(
    topics: &TopicConfigManager,
    request: &RemotingCommand,
) -> RemotingCommand {
    let h: GetTopicStatsInfoRequestHeader = match request.decode_custom_header() {
        Ok(h) => h,
        Err(e) => return bad_header(request, e),
    };
    match topics.select(&h.topic) {
        Some(config) => table(request, to_json(&config, JsonStyle::Fastjson).into_bytes()),
        None => RemotingCommand::response_to(
            request,
            response_code::TOPIC_NOT_EXIST,
            Some(format!("No topic in this broker. topic: {}", h.topic)),
        ),
    }
}

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
        Err(e) => return bad_header(request, e),
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
    table(request, encode_topic_stats(&offsets))
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
        Err(e) => return bad_header(request, e),
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
    self::table(request, encode_consume_stats(&table, tps))
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

/// SEARCH_OFFSET_BY_TIMESTAMP: the first queue offset whose message was stored at or after
/// `timestamp` (RocketMQ 5's `boundaryType` UPPER: the last one stored at or before it); the
/// max offset when every message is older, the min when every one is newer.
pub(crate) fn search_offset_by_timestamp(
    store: &MessageStore,
    request: &RemotingCommand,
) -> RemotingCommand {
    let h: SearchOffsetRequestHeader = match request.decode_custom_header() {
        Ok(h) => h,
        Err(e) => return bad_header(request, e),
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
            .and_then(|(_, e)| record_at(store, e.commitlog_offset as u64))
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

/// VIEW_MESSAGE_BY_ID: the record at the commit log offset the offset msg id names
/// (`MessageDecoder.decodeMessageId`: store host, then that offset), raw.
pub(crate) fn view_message_by_id(
    store: &MessageStore,
    request: &RemotingCommand,
) -> RemotingCommand {
    let h: ViewMessageRequestHeader = match request.decode_custom_header() {
        Ok(h) => h,
        Err(e) => return bad_header(request, e),
    };
    let found = u64::try_from(h.offset)
        .ok()
        .and_then(|o| record_at(store, o));
    match found {
        Some((raw, _)) => {
            let mut r = RemotingCommand::response_to(request, response_code::SUCCESS, None);
            r.body = raw;
            r
        }
        None => RemotingCommand::response_to(
            request,
            response_code::SYSTEM_ERROR,
            Some(format!(
                "can not find message by the offset, {} (offset: no record starts there; the \
                 commit log holds [{}, {}))",
                h.offset,
                store.min_offset(),
                store.max_offset()
            )),
        ),
    }
}

/// `MixAll.UNIQUE_MSG_QUERY_FLAG`: the key is a message's unique key (its client msg id).
const UNIQUE_MSG_QUERY_FLAG: &str = "_UNIQUE_KEY_QUERY";
/// `defaultQueryMaxNum`: how many a unique key query asks for, whatever the client says.
const DEFAULT_QUERY_MAX_NUM: i32 = 32;

/// QUERY_MESSAGE (RocketMQ's `QueryMessageProcessor.queryMessage`): the raw records indexed
/// under the key and stored in the range, oldest first, or QUERY_NOT_FOUND. Answered as the
/// index stands now: a message stored a moment ago may not be indexed yet, as in RocketMQ.
pub(crate) fn query_message(store: &MessageStore, request: &RemotingCommand) -> RemotingCommand {
    let mut h: QueryMessageRequestHeader = match request.decode_custom_header() {
        Ok(h) => h,
        Err(e) => return bad_header(request, e),
    };
    let unique = request
        .ext_fields
        .get(UNIQUE_MSG_QUERY_FLAG)
        .is_some_and(|v| v == "true");
    if unique {
        h.max_num = DEFAULT_QUERY_MAX_NUM;
    }
    let not_found = |why: String| {
        RemotingCommand::response_to(request, response_code::QUERY_NOT_FOUND, Some(why))
    };
    if h.begin_timestamp > h.end_timestamp || h.max_num <= 0 {
        return not_found(format!(
            "can not find message, maybe time range not correct: beginTimestamp {} is after \
             endTimestamp {}, or maxNum {} is not positive",
            h.begin_timestamp, h.end_timestamp, h.max_num
        ));
    }
    let max = usize::try_from(h.max_num).unwrap_or_default();
    let query = KeyQuery {
        topic: &h.topic,
        key: &h.key,
        unique,
        max,
        begin: h.begin_timestamp,
        end: h.end_timestamp,
    };
    let (records, offsets) = match store.query_message(&query) {
        Ok(found) => found,
        Err(e) => {
            return RemotingCommand::response_to(
                request,
                response_code::SYSTEM_ERROR,
                Some(e.to_string()),
            )
        }
    };
    if records.is_empty() {
        return not_found(format!(
            "can not find message, maybe time range not correct: no message of topic {} with \
             {} {:?} stored in [{}, {}]",
            h.topic,
            if unique { "unique key" } else { "key" },
            h.key,
            h.begin_timestamp,
            h.end_timestamp
        ));
    }
    let mut r = success_with(
        request,
        &QueryMessageResponseHeader {
            index_last_update_timestamp: offsets.index_last_update_timestamp,
            index_last_update_phyoffset: offsets.index_last_update_phy_offset,
        },
    );
    r.body = records
        .iter()
        .flat_map(|rec| rec.bytes().to_vec())
        .collect();
    r
}

/// A SUCCESS carrying one of the tables a slave syncs.
pub(crate) fn table(request: &RemotingCommand, body: Vec<u8>) -> RemotingCommand {
    let mut r = RemotingCommand::response_to(request, response_code::SUCCESS, None);
    r.body = body;
    r
}
