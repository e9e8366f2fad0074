//! RocketMQ's `SendMessageProcessor`: SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE and
//! CONSUMER_SEND_MSG_BACK ([`back`]).
//!
//! A send is checked (role, permission, topic, queue, size), appended, and answered as soon as
//! the store's GroupTransferService settles it: at once on an ASYNC_MASTER, on the slave ack that
//! covers it on a SYNC_MASTER (never by polling), with RocketMQ's response codes for each
//! `PutStatus`. Nothing is written for a refused send. A send that creates its topic registers
//! it with the name servers at once.

mod back;
mod topic_message_type_validator;

use std::net::SocketAddr;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;

pub(crate) use back::{retry_topic, retry_topic_sys_flag};

use super::recall::RecallHandle;
use crate::broker::register_service::RegisterService;
use crate::broker::store_stats::StoreStatsService;
use crate::broker::subscription_group::SubscriptionGroupManager;
use crate::broker::topic_config::TopicConfigManager;
use crate::broker::transaction::TransactionalMessageService;
use crate::broker::BrokerSettings;
use crate::client::uniq_key;
use crate::commitlog::record::{self, MessageDraft};
use crate::commitlog::transaction::{is_transactional, sys_flag};
use crate::commitlog::AppendResult;
use crate::error::{CommitLogError, RecordError};
use crate::protocol::body::{perm, TopicConfig};
use crate::remoting::header::SendMessageRequestHeader;
use crate::remoting::{
    request_code, response_code, RemotingCommand, RequestContext, RequestProcessor,
};
use crate::store::group_transfer::PutStatus;
use crate::store::timer::{asks_for_timer, TIMER_PROPERTIES, TIMER_TOPIC};
use crate::store::MessageStore;

/// `MessageConst.PROPERTY_CLUSTER`: the broker stamps every message with its cluster.
const PROPERTY_CLUSTER: &str = "CLUSTER";
/// `MessageConst.PROPERTY_WAIT_STORE_MSG_OK`: `false` asks not to wait for flush or slaves.
const PROPERTY_WAIT_STORE_MSG_OK: &str = "WAIT";

/// `TopicValidator`'s topics no producer may send to (the broker's own bookkeeping).
const NOT_ALLOWED_SEND_TOPICS: [&str; 5] = [
    record::SCHEDULE_TOPIC,
    TIMER_TOPIC,
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC",
];

/// `TRAN_MSG=true` makes a send a half message, unless it is a consumer's retry of a committed
/// one (`reconsumeTimes` and a delay level, as the Java client's fallback send to the retry
/// topic is), which RocketMQ stores as it comes.
fn is_half_message(header: &SendMessageRequestHeader) -> bool {
    let properties = header.properties.as_deref().unwrap_or("");
    is_transactional(properties.as_bytes())
        && !(header.reconsume_times.unwrap_or(0) > 0 && asks_for_delay_level(properties))
}

/// `DELAY` asks for a level (> 0); a value that is no integer counts as asking, so the store
/// refuses it with its reason.
fn asks_for_delay_level(properties: &str) -> bool {
    crate::store::schedule::delay_level(properties.as_bytes()).map_or(true, |l| l.is_some())
}

/// The refusal of a put the store did not take: RocketMQ answers a full disk
/// SERVICE_NOT_AVAILABLE, and a bad delay level MESSAGE_ILLEGAL.
fn refused_put(e: CommitLogError) -> Refusal {
    let code = match e {
        CommitLogError::DiskFull { .. } => response_code::SERVICE_NOT_AVAILABLE,
        CommitLogError::Record(
            RecordError::BadDelayLevel(_)
            | RecordError::DelayedBatch
            | RecordError::TimerIllegal(_)
            | RecordError::TimerBatch,
        ) => response_code::MESSAGE_ILLEGAL,
        _ => response_code::SYSTEM_ERROR,
    };
    Refusal(code, e.to_string())
}

/// A refused send: the response code and the remark that names what is wrong.
struct Refusal(i32, String);

fn refuse(request: &RemotingCommand, refusal: Refusal) -> RemotingCommand {
    RemotingCommand::response_to(request, refusal.0, Some(refusal.1))
}

/// One message of a send, borrowed from the request.
struct Incoming<'a> {
    body: &'a [u8],
    flag: i32,
    /// `key\x01value\x02` pairs, the commit log's own encoding.
    properties: Vec<u8>,
}

pub(crate) struct SendMessageProcessor {
    store: Arc<MessageStore>,
    topics: Arc<TopicConfigManager>,
    groups: Arc<SubscriptionGroupManager>,
    settings: Arc<BrokerSettings>,
    /// Spreads send-backs over a retry topic's queues (RocketMQ picks at random).
    next_retry_queue: AtomicU32,
    /// Where half messages go.
    transactions: Arc<TransactionalMessageService>,
    /// Counts what is stored (`msgPutTotalTodayNow`, `putTps`), when it is answered.
    stats: Arc<StoreStatsService>,
    /// Told when a send created its topic.
    register: Arc<RegisterService>,
}

/// The codes it answers.
pub(crate) const CODES: &[i32] = &[
    request_code::SEND_MESSAGE,
    request_code::SEND_MESSAGE_V2,
    request_code::SEND_BATCH_MESSAGE,
    request_code::CONSUMER_SEND_MSG_BACK,
];

impl SendMessageProcessor {
    pub(crate) fn new(
        store: Arc<MessageStore>,
        topics: Arc<TopicConfigManager>,
        groups: Arc<SubscriptionGroupManager>,
        settings: Arc<BrokerSettings>,
        transactions: Arc<TransactionalMessageService>,
        stats: Arc<StoreStatsService>,
        register: Arc<RegisterService>,
    ) -> Self {
        Self {
            store,
            topics,
            groups,
            settings,
            next_retry_queue: AtomicU32::new(0),
            transactions,
            stats,
            register,
        }
    }

    /// Handles a send from `remote`. Returns the response now, or `None` when the put waits
    /// in the GroupTransferService: `reply` then gets the response when it is settled.
    pub(crate) fn send_message(
        &self,
        request: &RemotingCommand,
        remote: SocketAddr,
        reply: impl FnOnce(RemotingCommand) + Send + 'static,
    ) -> Option<RemotingCommand> {
        match self.put(request, remote) {
            Err(refusal) => Some(refuse(request, refusal)),
            Ok(Put {
                results,
                queue_id,
                wait,
                uniq,
            }) => {
                let mut response = Response::new(request, &self.store, &results, queue_id, uniq);
                response.attach_recall_handle(
                    request,
                    &self.store,
                    &results,
                    &self.settings.broker_name,
                );
                let next_offset = results.last().map_or(0, AppendResult::next_offset);
                if !wait
                    || !self
                        .store
                        .group_transfer()
                        .is_some_and(|g| g.policy().waits())
                {
                    return Some(response.finish(PutStatus::PutOk));
                }
                let queued = self.store.submit_put(
                    next_offset,
                    Box::new(move |status| reply(response.finish(status))),
                );
                match queued {
                    Ok(()) => None,
                    Err(e) => Some(refuse(
                        request,
                        Refusal(response_code::SYSTEM_ERROR, e.to_string()),
                    )),
                }
            }
        }
    }

    /// Checks and appends.
    fn put(&self, request: &RemotingCommand, remote: SocketAddr) -> Result<Put, Refusal> {
        let header = self.check(request)?;
        let topic = self.topic(&header)?;
        topic_message_type_validator::validate(&self.settings, &topic, &header)
            .map_err(|remark| Refusal(response_code::MESSAGE_ILLEGAL, remark))?;
        let mut queue_id = self.queue_id(&header, &topic, remote)?;
        let header_props = header.properties.as_deref().unwrap_or("");
        let (mut batch_props, wait) = self.broker_properties(header_props)?;
        let dlq = self.retry_or_dlq(request, &header)?;
        if dlq.is_some() {
            queue_id = 0;
            batch_props = record::edit_properties(
                &batch_props,
                &[(record::PROPERTY_DELAY_TIME_LEVEL, "0")],
                &[],
            );
        }
        let topic_name = dlq.as_deref().unwrap_or(&header.topic);
        let messages = if request.code == request_code::SEND_BATCH_MESSAGE {
            decode_batch(&request.body, &batch_props)?
        } else {
            vec![Incoming {
                body: &request.body,
                flag: header.flag,
                properties: batch_props,
            }]
        };
        self.check_messages(request, &messages)?;
        // RocketMQ's `needHandleHA`: only a put that waits for replication is refused.
        if wait {
            self.store.check_in_sync_replicas().map_err(refused_put)?;
        }
        let drafts: Vec<MessageDraft<'_>> = messages
            .iter()
            .map(|m| MessageDraft {
                topic: topic_name,
                body: m.body,
                properties: &m.properties,
                queue_id,
                flag: m.flag,
                // Whatever the transaction bits said, a message stored as sent is a plain one
                // (a half message gets its own flag).
                sys_flag: header.sys_flag & !sys_flag::MASK,
                born_timestamp: header.born_timestamp,
                born_host: remote,
                reconsume_times: header.reconsume_times.unwrap_or(0),
                prepared_tx_offset: 0,
            })
            .collect();
        let appended = if drafts.len() == 1 && is_half_message(&header) {
            self.transactions
                .prepare(&drafts[0], &header.producer_group)
                .map(|r| vec![r])
        } else if drafts.len() == 1 {
            self.store.put(&drafts[0]).map(|r| vec![r])
        } else {
            self.store.put_batch(&drafts)
        };
        let results = appended.map_err(refused_put)?;
        Ok(Put {
            results,
            queue_id,
            wait,
            uniq: uniq_key(header_props).map(str::to_owned),
        })
    }

    /// Each message's own checks: its size, and no delay in a batch (RocketMQ's
    /// `putMessages` refuses a batch that asks for one, even of one message).
    fn check_messages(
        &self,
        request: &RemotingCommand,
        messages: &[Incoming<'_>],
    ) -> Result<(), Refusal> {
        for m in messages {
            if request.code == request_code::SEND_BATCH_MESSAGE
                && crate::store::schedule::delay_level(&m.properties).map_or(true, |l| l.is_some())
            {
                return Err(Refusal(
                    response_code::MESSAGE_ILLEGAL,
                    RecordError::DelayedBatch.to_string(),
                ));
            }
            if m.body.len() as i64 > self.settings.max_message_size.get() {
                return Err(Refusal(
                    response_code::MESSAGE_ILLEGAL,
                    format!(
                        "the message body size {} is over the max value, MAX: {} (maxMessageSize)",
                        m.body.len(),
                        self.settings.max_message_size.get()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// RocketMQ's `msgCheck` before any topic is looked at: the role, the header, the broker's
    /// write permission, the broker's own topics, and transactional sends.
    fn check(&self, request: &RemotingCommand) -> Result<SendMessageRequestHeader, Refusal> {
        let s = &self.settings;
        if s.is_slave {
            return Err(Refusal(
                response_code::SERVICE_NOT_AVAILABLE,
                format!(
                    "broker {} id {} is a SLAVE: it takes no sends; send to its master",
                    s.broker_name, s.broker_id
                ),
            ));
        }
        let header = SendMessageRequestHeader::parse(request)
            .map_err(|e| Refusal(response_code::SYSTEM_ERROR, e.to_string()))?;
        if s.broker_permission.get() & i64::from(perm::PERM_WRITE) == 0 {
            return Err(Refusal(
                response_code::NO_PERMISSION,
                format!("the broker[{}] sending message is forbidden", s.broker_name),
            ));
        }
        self.check_transactional(request, &header)?;
        if NOT_ALLOWED_SEND_TOPICS.contains(&header.topic.as_str()) {
            return Err(Refusal(
                response_code::NO_PERMISSION,
                format!("Sending message to topic[{}] is forbidden.", header.topic),
            ));
        }
        Ok(header)
    }

    /// A half message ([`is_half_message`]): allowed unless `rejectTransactionMessage`, alone
    /// (not in a batch) and not delayed. A transaction flag without `TRAN_MSG` is refused:
    /// RocketMQ would store such a message where no consumer ever sees it.
    fn check_transactional(
        &self,
        request: &RemotingCommand,
        header: &SendMessageRequestHeader,
    ) -> Result<(), Refusal> {
        let properties = header.properties.as_deref().unwrap_or("");
        if !is_half_message(header) {
            if header.sys_flag & sys_flag::MASK != 0 && !is_transactional(properties.as_bytes()) {
                return Err(Refusal(
                    response_code::MESSAGE_ILLEGAL,
                    format!(
                        "sysFlag {} marks a transactional message, but its property TRAN_MSG \
                         is not true: send it as a half message (TRAN_MSG=true) or without \
                         the transaction bits",
                        header.sys_flag
                    ),
                ));
            }
            return Ok(());
        }
        let illegal = |what: &str| Err(Refusal(response_code::MESSAGE_ILLEGAL, what.to_owned()));
        if self.settings.transaction.reject {
            return Err(Refusal(
                response_code::NO_PERMISSION,
                format!(
                    "the broker[{}] sending transaction message is forbidden \
                     (rejectTransactionMessage=true)",
                    self.settings.broker_name
                ),
            ));
        }
        if request.code == request_code::SEND_BATCH_MESSAGE {
            return illegal("a transactional message cannot be sent in a batch");
        }
        if asks_for_delay_level(properties) || asks_for_timer(properties.as_bytes()) {
            return illegal(
                "a transactional message cannot be delayed: it is delivered when committed \
                 (remove DELAY and the TIMER_ properties)",
            );
        }
        Ok(())
    }

    /// The topic's config, created from the sender's template when `autoCreateTopicEnable`.
    fn topic(&self, header: &SendMessageRequestHeader) -> Result<TopicConfig, Refusal> {
        if let Some(config) = self.topics.select(&header.topic) {
            return Ok(config);
        }
        let created = if self.settings.auto_create_topic.get() {
            self.topics.create_in_send(
                &header.topic,
                &header.default_topic,
                header.default_topic_queue_nums,
                0,
            )
        } else {
            None
        };
        created.ok_or_else(|| {
            Refusal(
                response_code::TOPIC_NOT_EXIST,
                format!(
                    "topic[{}] not exist, apply first please! (autoCreateTopicEnable is {})",
                    header.topic,
                    self.settings.auto_create_topic.get()
                ),
            )
        })
    }

    fn queue_id(
        &self,
        header: &SendMessageRequestHeader,
        topic: &TopicConfig,
        remote: SocketAddr,
    ) -> Result<i32, Refusal> {
        let queues = topic.write_queue_nums.max(1);
        if header.queue_id >= queues {
            return Err(Refusal(
                response_code::SYSTEM_ERROR,
                format!(
                    "request queueId[{}] is illegal, topic {} has {} write queues Producer: {remote}",
                    header.queue_id, topic.topic_name, topic.write_queue_nums
                ),
            ));
        }
        // A negative queue id lets the broker choose (RocketMQ picks at random; the born
        // timestamp spreads such sends as well, without a random source).
        Ok(if header.queue_id < 0 {
            (header.born_timestamp.unsigned_abs() % queues as u64) as i32
        } else {
            header.queue_id
        })
    }

    /// The properties the broker stores for the request's own: the cluster added, `WAIT`
    /// dropped (9 bytes a message RocketMQ does not store either) but honoured.
    fn broker_properties(&self, header: &str) -> Result<(Vec<u8>, bool), Refusal> {
        let mut wait = true;
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        // A delay level wins over timer properties, which go, as 5.x's `checkIfTimerMessage`
        // clears them.
        let drop_timer = asks_for_delay_level(header);
        for pair in header.split('\u{2}').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('\u{1}').unwrap_or((pair, ""));
            match k {
                PROPERTY_WAIT_STORE_MSG_OK => wait = v != "false",
                PROPERTY_CLUSTER => {}
                _ if drop_timer && TIMER_PROPERTIES.contains(&k) => {}
                _ => pairs.push((k, v)),
            }
        }
        pairs.push((PROPERTY_CLUSTER, &self.settings.cluster_name));
        let encoded = record::encode_properties(pairs)
            .map_err(|e| Refusal(response_code::MESSAGE_ILLEGAL, e.to_string()))?;
        Ok((encoded, wait))
    }
}

/// `MessageDecoder.decodeMessages` of a SEND_BATCH_MESSAGE body: per message
/// `totalSize i32 | magic i32 | bodyCRC i32 | flag i32 | bodyLen i32 | body | propLen i16 |
/// properties`. Each stored message carries its own properties, then the batch's.
fn decode_batch<'a>(body: &'a [u8], batch_props: &[u8]) -> Result<Vec<Incoming<'a>>, Refusal> {
    let bad = |at: usize, what: &str| {
        Refusal(
            response_code::MESSAGE_ILLEGAL,
            format!("SEND_BATCH_MESSAGE body: message at byte {at}: {what}"),
        )
    };
    let i32_at = |b: &[u8], at: usize| -> Option<i32> {
        Some(i32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
    };
    let mut out = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let total = i32_at(body, at).ok_or_else(|| bad(at, "truncated size"))?;
        let end = usize::try_from(total)
            .ok()
            .and_then(|t| at.checked_add(t))
            .filter(|e| *e <= body.len() && total >= 22)
            .ok_or_else(|| bad(at, &format!("size {total} does not fit the body")))?;
        let msg = &body[at..end];
        let flag = i32_at(msg, 12).ok_or_else(|| bad(at, "truncated flag"))?;
        let body_len = usize::try_from(i32_at(msg, 16).unwrap_or(-1))
            .ok()
            .filter(|n| 20 + n + 2 <= msg.len())
            .ok_or_else(|| bad(at, "body length does not fit"))?;
        let props_at = 20 + body_len;
        let props_len = i16::from_be_bytes([msg[props_at], msg[props_at + 1]]);
        let own = usize::try_from(props_len)
            .ok()
            .and_then(|n| msg.get(props_at + 2..props_at + 2 + n))
            .filter(|p| props_at + 2 + p.len() == msg.len())
            .ok_or_else(|| bad(at, &format!("properties length {props_len} does not fit")))?;
        let mut properties = own.to_vec();
        if !properties.is_empty() && properties.last() != Some(&b'\x02') {
            properties.push(b'\x02');
        }
        properties.extend_from_slice(batch_props);
        out.push(Incoming {
            body: &msg[20..props_at],
            flag,
            properties,
        });
        at = end;
    }
    if out.is_empty() {
        return Err(bad(0, "the batch holds no message"));
    }
    Ok(out)
}

/// Where a send's messages landed.
struct Put {
    results: Vec<AppendResult>,
    queue_id: i32,
    /// The sender waits for the put's flush and slaves.
    wait: bool,
    /// The request's own `UNIQ_KEY`, answered as a single message's `transactionId`. A batch
    /// gets no `batchUniqId`: RocketMQ sets it only for its inner batches (batch consume queue
    /// topics), and a 5.x client that sees it takes the batch's one id for every message's.
    uniq: Option<String>,
}

/// `SendMessageResponseHeader` for what was appended, completed by the put's verdict.
struct Response {
    command: RemotingCommand,
}

impl Response {
    /// `attachRecallHandle`: a single send stored as a timer message gets the handle that
    /// recalls it (not a batch, nor a consumer's send-back).
    fn attach_recall_handle(
        &mut self,
        request: &RemotingCommand,
        store: &MessageStore,
        results: &[AppendResult],
        broker_name: &str,
    ) {
        let [result] = results else {
            return;
        };
        if request.code == request_code::SEND_BATCH_MESSAGE {
            return;
        }
        let handle = store
            .look_message_by_offset(result.offset)
            .and_then(|r| RecallHandle::of_stored(&r.view(), broker_name));
        if let Some(handle) = handle {
            self.command
                .ext_fields
                .insert("recallHandle".into(), handle.encode());
        }
    }

    fn new(
        request: &RemotingCommand,
        store: &MessageStore,
        results: &[AppendResult],
        queue_id: i32,
        uniq: Option<String>,
    ) -> Self {
        let host = store.store_host();
        let msg_id = results
            .iter()
            .map(|r| record::msg_id(&host, r.offset as i64))
            .collect::<Vec<_>>()
            .join(",");
        let batch = request.code == request_code::SEND_BATCH_MESSAGE;
        let mut command = RemotingCommand::response_to(request, response_code::SUCCESS, None);
        command.write_custom_header(&crate::remoting::header::SendMessageResponseHeader {
            msg_id,
            queue_id,
            queue_offset: results[0].queue_offset,
            transaction_id: uniq.filter(|_| !batch),
            batch_uniq_id: None,
            recall_handle: None,
        });
        // What a Java client reads besides the header (SendResult's region and trace switch).
        command
            .ext_fields
            .insert("MSG_REGION".into(), "DefaultRegion".into());
        command.ext_fields.insert("TRACE_ON".into(), "true".into());
        Self { command }
    }

    /// `handlePutMessageResult`: the response code of each `PutStatus`.
    fn finish(mut self, status: PutStatus) -> RemotingCommand {
        let (code, remark) = match status {
            PutStatus::PutOk => (response_code::SUCCESS, None),
            PutStatus::FlushDiskTimeout => (
                response_code::FLUSH_DISK_TIMEOUT,
                Some("stored, but not flushed within syncFlushTimeout"),
            ),
            PutStatus::FlushSlaveTimeout => (
                response_code::FLUSH_SLAVE_TIMEOUT,
                Some("stored, but no slave acknowledged it within slaveTimeout"),
            ),
            PutStatus::SlaveNotAvailable => (
                response_code::SLAVE_NOT_AVAILABLE,
                Some(
                    "stored, but no slave is in sync (none connected, or beyond haMaxGapNotInSync)",
                ),
            ),
        };
        self.command.code = code;
        self.command.remark = remark.map(str::to_owned);
        self.command
    }
}

impl RequestProcessor for SendMessageProcessor {
    fn process(&self, request: RemotingCommand, ctx: &RequestContext) -> Option<RemotingCommand> {
        self.register.registering_new_topics(&self.topics, || {
            if request.code == request_code::CONSUMER_SEND_MSG_BACK {
                return Some(self.consumer_send_msg_back(&request));
            }
            let responder = ctx.responder();
            let stats = self.stats.clone();
            let now = self.send_message(&request, ctx.remote(), move |r| {
                count_stored(&stats, &r);
                responder.send(r);
            });
            if let Some(r) = &now {
                count_stored(&self.stats, r);
            }
            now
        })
    }
}

/// Adds the messages a send response reports stored (one msg id each; the waits that fell
/// short, `FLUSH_*_TIMEOUT` and `SLAVE_NOT_AVAILABLE`, stored them too).
fn count_stored(stats: &StoreStatsService, response: &RemotingCommand) {
    let stored = response_code::send_stored(response.code);
    if let Some(ids) = response.ext_fields.get("msgId").filter(|_| stored) {
        stats.add_put(ids.split(',').count() as u64);
    }
}

#[cfg(test)]
pub(crate) mod tests;
