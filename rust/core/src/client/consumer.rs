//! The consumer's wire side of `MQClientAPIImpl`: PULL_MESSAGE (asynchronous, so one
//! connection holds a long poll per queue at once), consumer offsets, queue offsets,
//! GET_CONSUMER_LIST_BY_GROUP, the consumer's HEART_BEAT, CONSUMER_SEND_MSG_BACK and an orderly
//! consumer's LOCK_BATCH_MQ / UNLOCK_BATCH_MQ. Which broker a pull goes to, rebalancing and
//! offset policy are the consumer's (Python).

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::Duration;

use super::{expect_success, MqClientApi, SendError, SEND_BACK_VERSION};
use crate::commitlog::record::{self, tags_hash_code, Peeked, RecordView};
use crate::error::RecordError;
use crate::filter::{self, SqlFilter};
use crate::protocol::lock_batch::{LockBatchRequestBody, LockBatchResponseBody, MessageQueue};
use crate::remoting::header::{
    ConsumerSendMsgBackRequestHeader, GetConsumerListByGroupRequestHeader, OffsetResponseHeader,
    PullMessageRequestHeader, PullMessageResponseHeader, QueryConsumerOffsetRequestHeader,
    QueryMessageRequestHeader, QueueRequestHeader, SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
};
use crate::remoting::{request_code, response_code, CustomHeader, RemotingCommand};

/// `SubscriptionData` as a heartbeat carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionData {
    pub topic: String,
    pub sub_string: String,
    /// `TAG` or `SQL92` (`ExpressionType`).
    pub expression_type: String,
    /// Empty for `*` and for SQL92, which the broker alone filters by.
    pub tags: Vec<String>,
    pub sub_version: i64,
}

impl SubscriptionData {
    /// `FilterAPI.build`: for TAG, `*` (or nothing) takes every message, `a || b` the
    /// messages tagged `a` or `b`, and an expression naming no tag is refused; a SQL92
    /// expression must compile as the broker will compile it. Another type is refused.
    pub fn build(
        topic: &str,
        sub_string: &str,
        expression_type: &str,
        sub_version: i64,
    ) -> Result<Self, String> {
        match expression_type {
            filter::TAG => Self::build_tag(topic, sub_string, sub_version),
            filter::SQL92 => {
                SqlFilter::compile(sub_string).map_err(|e| {
                    format!("SQL92 expression {sub_string:?} of topic {topic}: {e}")
                })?;
                Ok(Self {
                    topic: topic.to_owned(),
                    sub_string: sub_string.trim().to_owned(),
                    expression_type: filter::SQL92.to_owned(),
                    tags: Vec::new(),
                    sub_version,
                })
            }
            other => Err(format!(
                "expression type {other:?}: unknown; use {:?} or {:?}",
                filter::TAG,
                filter::SQL92
            )),
        }
    }

    fn build_tag(topic: &str, sub_string: &str, sub_version: i64) -> Result<Self, String> {
        let trimmed = sub_string.trim();
        let mut tags: Vec<String> = Vec::new();
        if !trimmed.is_empty() && trimmed != "*" {
            for tag in trimmed.split("||").map(str::trim).filter(|t| !t.is_empty()) {
                if !tags.iter().any(|t| t == tag) {
                    tags.push(tag.to_owned());
                }
            }
            if tags.is_empty() {
                return Err(format!(
                    "subscription {sub_string:?} of topic {topic} names no tag: use \"*\" or \
                     \"tagA || tagB\""
                ));
            }
        }
        Ok(Self {
            topic: topic.to_owned(),
            sub_string: if tags.is_empty() { "*" } else { trimmed }.to_owned(),
            expression_type: filter::TAG.to_owned(),
            tags,
            sub_version,
        })
    }

    fn to_json(&self) -> serde_json::Value {
        let codes: Vec<i64> = self.tags.iter().map(|t| tags_hash_code(t)).collect();
        serde_json::json!({
            "classFilterMode": false,
            "codeSet": codes,
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": self.tags,
            "topic": self.topic,
        })
    }
}

/// `ConsumerData` of a heartbeat.
#[derive(Debug, Clone)]
pub struct ConsumerData {
    pub group_name: String,
    /// `CONSUME_ACTIVELY` (pull) or `CONSUME_PASSIVELY` (push).
    pub consume_type: String,
    /// `CLUSTERING` or `BROADCASTING`.
    pub message_model: String,
    /// `CONSUME_FROM_LAST_OFFSET`, `CONSUME_FROM_FIRST_OFFSET`, `CONSUME_FROM_TIMESTAMP`.
    pub consume_from_where: String,
    pub subscriptions: Vec<SubscriptionData>,
}

/// `HeartbeatData` of a consumer, as fastjson writes it (keys sorted).
pub(crate) fn consumer_heartbeat_data(client_id: &str, consumer: &ConsumerData) -> Vec<u8> {
    let subs: Vec<serde_json::Value> = consumer
        .subscriptions
        .iter()
        .map(SubscriptionData::to_json)
        .collect();
    serde_json::json!({
        "clientID": client_id,
        "consumerDataSet": [{
            "consumeFromWhere": consumer.consume_from_where,
            "consumeType": consumer.consume_type,
            "groupName": consumer.group_name,
            "messageModel": consumer.message_model,
            "subscriptionDataSet": subs,
            "unitMode": false,
        }],
        "producerDataSet": [],
    })
    .to_string()
    .into_bytes()
}

/// A broker's answer to a pull (`PullResultExt` before decoding): the code and remark, the
/// response header (absent unless the code is one of the pull codes) and the raw records.
#[derive(Debug, Clone)]
pub struct PullReply {
    pub code: i32,
    pub remark: Option<String>,
    pub header: Option<PullMessageResponseHeader>,
    /// Commit log records exactly as stored, back to back.
    pub body: Vec<u8>,
}

impl PullReply {
    fn from_response(addr: &str, response: RemotingCommand) -> Result<Self, SendError> {
        let header = match response.code {
            response_code::SUCCESS
            | response_code::PULL_NOT_FOUND
            | response_code::PULL_RETRY_IMMEDIATELY
            | response_code::PULL_OFFSET_MOVED => {
                Some(response.decode_custom_header().map_err(|e| {
                    SendError::Unknown(format!("{addr} answered a pull with a bad header: {e}"))
                })?)
            }
            _ => None,
        };
        Ok(Self {
            code: response.code,
            remark: response.remark,
            header,
            body: response.body,
        })
    }
}

/// `pull_range`'s bookkeeping: which offsets are asked for, left to ask for, and answered.
struct RangePulls {
    /// The offset the range stops at.
    stop: i64,
    /// Offsets one pull asks for: learned from the answers, since the broker's transfer
    /// limits may cut a pull short.
    batch: i64,
    /// Whether an answer came: until then one pull at a time.
    learned: bool,
    /// The first offset no pull has asked for yet.
    next: i64,
    /// Pulls in flight: start offset -> the offset it asked up to.
    asked: BTreeMap<i64, i64>,
    /// Offsets answers left out, not asked for again yet: start -> end.
    left: BTreeMap<i64, i64>,
    /// Answers by start offset, with the offset they reach (a refusal reaches its start).
    answers: BTreeMap<i64, (PullReply, i64)>,
}

impl RangePulls {
    /// The next offsets to pull, `[from, to)`, while fewer than `window` pulls are in flight
    /// and something is left to ask for; counted as asked.
    fn next_piece(&mut self, window: usize) -> Option<(i64, i64)> {
        let room = if self.learned { window.max(1) } else { 1 };
        if self.asked.len() >= room {
            return None;
        }
        let (from, to) = match self.left.pop_first() {
            Some(range) => range,
            None if self.next < self.stop => (self.next, self.stop),
            None => return None,
        };
        let piece = to.min(from + self.batch);
        if to == self.stop && from == self.next {
            self.next = piece;
        } else if piece < to {
            self.left.insert(piece, to);
        }
        self.asked.insert(from, piece);
        Some((from, piece))
    }

    /// Records the answer to the pull that started at `from`.
    fn answered(&mut self, from: i64, reply: PullReply) {
        let to = self.asked.remove(&from).unwrap_or(from);
        let next_begin = reply.header.as_ref().map_or(from, |h| h.next_begin_offset);
        let reached = if reply.code == response_code::SUCCESS && next_begin > from {
            next_begin.min(to)
        } else {
            from
        };
        if reached > from && reached < to {
            // Cut short by the broker's transfer limits: the rest is asked for next, and
            // no pull asks for more than it answers.
            self.left.insert(reached, to);
            self.batch = if self.learned {
                self.batch.max(reached - from)
            } else {
                reached - from
            };
        }
        self.learned = true;
        self.answers.insert(from, (reply, reached));
    }

    /// Moves the answers that continue `out` into it, in offset order; false when a refusal
    /// ends the range.
    fn take_in_order(&mut self, out: &mut PulledRange) -> bool {
        while let Some((reply, reached)) = self.answers.remove(&out.next_offset) {
            if reached == out.next_offset {
                out.refused = Some(reply);
                return false;
            }
            out.bodies.push(reply.body);
            out.next_offset = reached;
        }
        true
    }
}

/// What [`MqClientApi::pull_range`] got: the FOUND answers' bodies in offset order, the offset
/// after them, and the first answer that was not FOUND (offset moved, not found, refused).
#[derive(Debug)]
pub struct PulledRange {
    pub bodies: Vec<Vec<u8>>,
    pub next_offset: i64,
    pub refused: Option<PullReply>,
}

/// `MessageDecoder.decodes`: the records of a pull's body, with the commit log's decoder and
/// its body CRC check.
pub fn decode_pulled(body: &[u8]) -> Result<Vec<RecordView<'_>>, RecordError> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < body.len() {
        match record::decode(&body[at..], true)? {
            Peeked::Record(r) => {
                at += r.total_size as usize;
                out.push(r);
            }
            // A pull carries whole records only; anything else is a broken answer.
            Peeked::Blank(_) | Peeked::End => return Err(RecordError::Truncated),
        }
    }
    Ok(out)
}

fn offset_of(addr: &str, what: &str, response: RemotingCommand) -> Result<i64, SendError> {
    if response.code != response_code::SUCCESS {
        return Err(SendError::Unknown(format!(
            "{addr} answered {what} with code {}: {}",
            response.code,
            response.remark.unwrap_or_default()
        )));
    }
    let header: OffsetResponseHeader = response
        .decode_custom_header()
        .map_err(|e| SendError::Unknown(format!("{addr} answered {what}: {e}")))?;
    Ok(header.offset)
}

fn send_back_request(header: &ConsumerSendMsgBackRequestHeader) -> RemotingCommand {
    let mut request = request(request_code::CONSUMER_SEND_MSG_BACK, header);
    request.version = SEND_BACK_VERSION;
    request
}

fn lock_request(
    code: i32,
    group: &str,
    client_id: &str,
    queues: &[(String, String, i32)],
) -> RemotingCommand {
    let mut request = RemotingCommand::request(code, 0);
    request.body = LockBatchRequestBody {
        consumer_group: group.to_owned(),
        client_id: client_id.to_owned(),
        only_this_broker: false,
        mq_set: queues
            .iter()
            .map(|(topic, broker_name, queue_id)| MessageQueue {
                topic: topic.clone(),
                broker_name: broker_name.clone(),
                queue_id: *queue_id,
            })
            .collect(),
    }
    .encode();
    request
}

fn request<H: CustomHeader>(code: i32, header: &H) -> RemotingCommand {
    let mut request = RemotingCommand::request(code, 0);
    request.write_custom_header(header);
    request
}

impl MqClientApi {
    /// PULL_MESSAGE (`CommunicationMode.ASYNC`): `callback` gets the answer on the client's
    /// loop thread. A long poll is held up to `header.suspend_timeout_millis`, so `timeout`
    /// must exceed it. An `Err` here means nothing was sent and `callback` will not be called.
    pub fn pull_message_async(
        &self,
        addr: &str,
        header: &PullMessageRequestHeader,
        timeout: Duration,
        callback: impl FnOnce(Result<PullReply, SendError>) + Send + 'static,
    ) -> Result<(), SendError> {
        let owned_addr = addr.to_owned();
        self.invoke_async(
            addr,
            request(request_code::PULL_MESSAGE, header),
            timeout,
            move |r| callback(r.and_then(|resp| PullReply::from_response(&owned_addr, resp))),
        )
    }

    /// PULL_MESSAGE over a known range of queue offsets, `window` pulls in flight at once
    /// (the suspend flag off), until about `max_rows` offsets from `header.queue_offset` are
    /// covered, `end` is reached or an answer is not FOUND. A range reader knows which offsets
    /// exist, so it need not wait for one answer's `nextBeginOffset` before asking for the
    /// next: one round trip per window rather than per pull.
    ///
    /// Each pull asks for up to `header.max_msg_nums` messages; the broker answers with at most
    /// its `maxTransfer*OnMessageInMemory`. The first pull goes alone and its answer's size
    /// sets the size of the rest (a pull the broker would cut short costs a second round
    /// trip); what an answer leaves out anyway is asked for first, in pulls of that size.
    pub fn pull_range(
        &self,
        addr: &str,
        header: &PullMessageRequestHeader,
        end: i64,
        window: usize,
        max_rows: i64,
        timeout: Duration,
    ) -> Result<PulledRange, SendError> {
        let (tx, rx) = mpsc::channel();
        let stop = end.min(header.queue_offset.saturating_add(max_rows.max(1)));
        let mut out = PulledRange {
            bodies: Vec::new(),
            next_offset: header.queue_offset,
            refused: None,
        };
        let mut pulls = RangePulls {
            stop,
            batch: i64::from(header.max_msg_nums.max(1)),
            learned: false,
            next: header.queue_offset,
            asked: BTreeMap::new(),
            left: BTreeMap::new(),
            answers: BTreeMap::new(),
        };
        while out.next_offset < stop {
            while let Some((from, to)) = pulls.next_piece(window) {
                let mut h = header.clone();
                h.queue_offset = from;
                h.max_msg_nums = i32::try_from(to - from).unwrap_or(i32::MAX);
                let tx = tx.clone();
                self.pull_message_async(addr, &h, timeout, move |r| {
                    // The receiver is gone only when the range stopped early: nothing to tell.
                    let _ = tx.send((from, r));
                })?;
            }
            let (from, reply) = rx
                .recv_timeout(timeout)
                .map_err(|_| SendError::Unknown(format!("{addr}: no answer to a pull")))?;
            pulls.answered(from, reply?);
            if !pulls.take_in_order(&mut out) {
                break;
            }
        }
        Ok(out)
    }

    /// QUERY_CONSUMER_OFFSET: the group's committed offset of the queue, `None` when the
    /// broker has none (QUERY_NOT_FOUND).
    pub fn query_consumer_offset(
        &self,
        addr: &str,
        header: &QueryConsumerOffsetRequestHeader,
        timeout: Duration,
    ) -> Result<Option<i64>, SendError> {
        let response = self.invoke(
            addr,
            request(request_code::QUERY_CONSUMER_OFFSET, header),
            timeout,
        )?;
        if response.code == response_code::QUERY_NOT_FOUND {
            return Ok(None);
        }
        offset_of(addr, "QUERY_CONSUMER_OFFSET", response).map(Some)
    }

    /// UPDATE_CONSUMER_OFFSET, waiting for the broker's answer (`oneway` false) or not.
    pub fn update_consumer_offset(
        &self,
        addr: &str,
        header: &UpdateConsumerOffsetRequestHeader,
        oneway: bool,
        timeout: Duration,
    ) -> Result<(), SendError> {
        let request = request(request_code::UPDATE_CONSUMER_OFFSET, header);
        if oneway {
            return self
                .remoting
                .invoke_oneway(addr, request, timeout)
                .map_err(super::send_error);
        }
        let response = self.invoke(addr, request, timeout)?;
        expect_success(addr, "UPDATE_CONSUMER_OFFSET", response)
    }

    /// GET_CONSUMER_LIST_BY_GROUP: the client ids of the group's consumers the broker has
    /// heartbeats from.
    pub fn get_consumer_id_list_by_group(
        &self,
        addr: &str,
        group: &str,
        timeout: Duration,
    ) -> Result<Vec<String>, SendError> {
        let header = GetConsumerListByGroupRequestHeader {
            consumer_group: group.to_owned(),
        };
        let response = self.invoke(
            addr,
            request(request_code::GET_CONSUMER_LIST_BY_GROUP, &header),
            timeout,
        )?;
        let body = response.body.clone();
        expect_success(addr, "GET_CONSUMER_LIST_BY_GROUP", response)?;
        #[derive(serde::Deserialize)]
        struct Body {
            #[serde(rename = "consumerIdList", default)]
            consumer_id_list: Vec<String>,
        }
        serde_json::from_slice::<Body>(&body)
            .map(|b| b.consumer_id_list)
            .map_err(|e| {
                SendError::Unknown(format!("{addr}: GET_CONSUMER_LIST_BY_GROUP body: {e}"))
            })
    }

    /// GET_MAX_OFFSET: the queue's next offset to be written.
    pub fn get_max_offset(
        &self,
        addr: &str,
        topic: &str,
        queue_id: i32,
        timeout: Duration,
    ) -> Result<i64, SendError> {
        self.queue_offset(addr, request_code::GET_MAX_OFFSET, topic, queue_id, timeout)
    }

    /// GET_MIN_OFFSET: the queue's first offset still stored.
    pub fn get_min_offset(
        &self,
        addr: &str,
        topic: &str,
        queue_id: i32,
        timeout: Duration,
    ) -> Result<i64, SendError> {
        self.queue_offset(addr, request_code::GET_MIN_OFFSET, topic, queue_id, timeout)
    }

    fn queue_offset(
        &self,
        addr: &str,
        code: i32,
        topic: &str,
        queue_id: i32,
        timeout: Duration,
    ) -> Result<i64, SendError> {
        let header = QueueRequestHeader {
            topic: topic.to_owned(),
            queue_id,
        };
        let response = self.invoke(addr, request(code, &header), timeout)?;
        offset_of(
            addr,
            request_code::name(code).unwrap_or("an offset request"),
            response,
        )
    }

    /// SEARCH_OFFSET_BY_TIMESTAMP: the first offset stored at or after `timestamp` (ms).
    pub fn search_offset_by_timestamp(
        &self,
        addr: &str,
        topic: &str,
        queue_id: i32,
        timestamp: i64,
        timeout: Duration,
    ) -> Result<i64, SendError> {
        let header = SearchOffsetRequestHeader {
            topic: topic.to_owned(),
            queue_id,
            timestamp,
            boundary_type: None,
        };
        let response = self.invoke(
            addr,
            request(request_code::SEARCH_OFFSET_BY_TIMESTAMP, &header),
            timeout,
        )?;
        offset_of(addr, "SEARCH_OFFSET_BY_TIMESTAMP", response)
    }

    /// QUERY_MESSAGE (`MQAdminImpl.queryMessage`, one broker): the raw records indexed under
    /// `key` (a unique key when `unique`, asked as `_UNIQUE_KEY_QUERY`) and stored in
    /// `[begin, end]`; empty when the broker found none (QUERY_NOT_FOUND).
    #[allow(clippy::too_many_arguments)]
    pub fn query_message(
        &self,
        addr: &str,
        topic: &str,
        key: &str,
        max_num: i32,
        (begin, end): (i64, i64),
        unique: bool,
        timeout: Duration,
    ) -> Result<Vec<u8>, SendError> {
        let header = QueryMessageRequestHeader {
            topic: topic.to_owned(),
            key: key.to_owned(),
            max_num,
            begin_timestamp: begin,
            end_timestamp: end,
        };
        let mut request = request(request_code::QUERY_MESSAGE, &header);
        if unique {
            request
                .ext_fields
                .insert("_UNIQUE_KEY_QUERY".into(), "true".into());
        }
        let response = self.invoke(addr, request, timeout)?;
        if response.code == response_code::QUERY_NOT_FOUND {
            return Ok(Vec::new());
        }
        let body = response.body.clone();
        expect_success(addr, "QUERY_MESSAGE", response)?;
        Ok(body)
    }

    /// CONSUMER_SEND_MSG_BACK (`MQClientAPIImpl.consumerSendMessageBack`): hands a message
    /// the consumer failed back to the broker that stored it (named by its commit-log offset),
    /// which schedules it in the group's retry topic or, past `maxReconsumeTimes`, puts it in
    /// the dead-letter queue. Returns the broker's code and remark: SUCCESS, or a refusal the
    /// caller reports (RocketMQ's client raises `MQBrokerException` for any other code).
    pub fn consumer_send_message_back(
        &self,
        addr: &str,
        header: &ConsumerSendMsgBackRequestHeader,
        timeout: Duration,
    ) -> Result<(i32, Option<String>), SendError> {
        let response = self.invoke(addr, send_back_request(header), timeout)?;
        Ok((response.code, response.remark))
    }

    /// LOCK_BATCH_MQ (`MQClientAPIImpl.lockBatchMQ`): asks the broker at `addr` to lock
    /// `queues` (topic, broker name, queue id) for `client_id` of `group`; returns the ones the
    /// client holds now. An orderly consumer consumes only those.
    pub fn lock_batch_mq(
        &self,
        addr: &str,
        group: &str,
        client_id: &str,
        queues: &[(String, String, i32)],
        timeout: Duration,
    ) -> Result<Vec<(String, String, i32)>, SendError> {
        let request = lock_request(request_code::LOCK_BATCH_MQ, group, client_id, queues);
        let body = self.invoke_lock(addr, request, timeout)?;
        let locked = LockBatchResponseBody::decode(&body)
            .map_err(|e| SendError::Unknown(format!("{addr}: LOCK_BATCH_MQ: {e}")))?;
        Ok(locked
            .lock_ok_mq_set
            .into_iter()
            .map(|mq| (mq.topic, mq.broker_name, mq.queue_id))
            .collect())
    }

    /// UNLOCK_BATCH_MQ: gives back the `queues` `client_id` holds, so another member of the
    /// group takes them at once rather than after the lock expires.
    pub fn unlock_batch_mq(
        &self,
        addr: &str,
        group: &str,
        client_id: &str,
        queues: &[(String, String, i32)],
        timeout: Duration,
    ) -> Result<(), SendError> {
        let request = lock_request(request_code::UNLOCK_BATCH_MQ, group, client_id, queues);
        self.invoke_lock(addr, request, timeout).map(drop)
    }

    /// A lock request's answer body, once it is SUCCESS.
    fn invoke_lock(
        &self,
        addr: &str,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<Vec<u8>, SendError> {
        let what = request_code::name(request.code).unwrap_or("a lock request");
        let response = self.invoke(addr, request, timeout)?;
        let body = response.body.clone();
        expect_success(addr, what, response)?;
        Ok(body)
    }

    /// HEART_BEAT of a consumer: the broker lists `client_id` in the group and keeps its
    /// subscriptions.
    pub fn send_consumer_heartbeat(
        &self,
        addr: &str,
        client_id: &str,
        consumer: &ConsumerData,
        timeout: Duration,
    ) -> Result<(), SendError> {
        let mut request = RemotingCommand::request(request_code::HEART_BEAT, 0);
        request.body = consumer_heartbeat_data(client_id, consumer);
        let response = self.invoke(addr, request, timeout)?;
        expect_success(addr, "HEART_BEAT", response)
    }

    /// CHECK_CLIENT_CONFIG (`checkClientInBroker`): asks a broker whether it takes a
    /// subscription before the consumer starts; the broker's remark says why not.
    pub fn check_client_config(
        &self,
        addr: &str,
        client_id: &str,
        group: &str,
        subscription: &SubscriptionData,
        timeout: Duration,
    ) -> Result<(), SendError> {
        let mut request = RemotingCommand::request(request_code::CHECK_CLIENT_CONFIG, 0);
        request.body = serde_json::json!({
            "clientId": client_id,
            "group": group,
            "subscriptionData": subscription.to_json(),
        })
        .to_string()
        .into_bytes();
        let response = self.invoke(addr, request, timeout)?;
        expect_success(addr, "CHECK_CLIENT_CONFIG", response)
    }
}

#[cfg(test)]
mod tests;
