//! RocketMQ's `PullMessageProcessor` (PULL_MESSAGE) over the store's consume queues, and its
//! `PullRequestHoldService` ([`pull_request_hold`](crate::broker::pull_request_hold)).
//!
//! A pull is checked (broker and topic permission, subscription group, queue, subscription),
//! then answered from the mapping: the body is the matching records' raw bytes, one after the
//! other, as the commit log holds them. The store's verdict (`GetMessageStatus`) maps onto the
//! response codes as RocketMQ maps it, and `suggestWhichBrokerId` sends a consumer that lags
//! beyond `accessMessageInMemoryMaxRatio` of RAM to the slave when `slaveReadEnable`. A pull that
//! finds nothing and may be suspended is held until a record for its queue is dispatched or its
//! `suspendTimeoutMillis` passes.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::broker::consumer_manager::SubscriptionData;
use crate::broker::pull_request_hold::{HeldPull, PullRequestHoldService};
use crate::broker::store_stats::StoreStatsService;
use crate::broker::subscription_group::SubscriptionGroupConfig;
use crate::broker::topic_config::TopicConfigManager;
use crate::broker::{BrokerSettings, ConsumeTables, TransferLimit};
use crate::commitlog::record::{self, Peeked};
use crate::filter;
use crate::protocol::body::{perm, MASTER_ID};
use crate::remoting::header::{pull_sys_flag, PullMessageRequestHeader, PullMessageResponseHeader};
use crate::remoting::{
    request_code, response_code, RemotingCommand, RequestContext, RequestProcessor, Responder,
};
use crate::store::MessageStore;

/// Consume queue entries one pull looks at, for filtered subscriptions
/// (`maxFilterMessageCount` = 16000 bytes of entries).
const MAX_FILTER_ENTRIES: usize = 16_000 / crate::consume_queue::CQ_ENTRY_SIZE;
/// `shortPollingTimeMills`: how long a suspended pull is held with `longPollingEnable` off.
const SHORT_POLLING_MILLIS: i64 = 1000;

/// `GetMessageStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GetMessageStatus {
    Found,
    NoMatchedMessage,
    MessageWasRemoving,
    OffsetFoundNull,
    OffsetOverflowBadly,
    OffsetOverflowOne,
    OffsetTooSmall,
    NoMatchedLogicQueue,
    NoMessageInQueue,
}

/// `GetMessageResult`: the records' bytes and where the consumer goes next.
#[derive(Debug)]
pub(crate) struct GetMessageResult {
    pub(crate) status: GetMessageStatus,
    pub(crate) next_begin_offset: i64,
    pub(crate) min_offset: i64,
    pub(crate) max_offset: i64,
    pub(crate) body: Vec<u8>,
    pub(crate) count: usize,
    pub(crate) suggest_pulling_from_slave: bool,
}

/// A pull refused before the store is asked: the code and a remark naming the field.
struct Refusal(i32, String);

pub(crate) struct PullMessageProcessor {
    store: Arc<MessageStore>,
    topics: Arc<TopicConfigManager>,
    /// The groups, their subscriptions and their committed offsets.
    consume: ConsumeTables,
    settings: Arc<BrokerSettings>,
    hold: Arc<PullRequestHoldService>,
    /// `TotalPhysicalMemorySize * accessMessageInMemoryMaxRatio / 100`: a consumer further
    /// behind the head than this reads from disk.
    memory_bytes: u64,
    /// Pulls found and missed and messages returned (atomics: held pulls are answered on the
    /// hold service's thread and the rest on the loop thread).
    stats: Arc<StoreStatsService>,
}

impl PullMessageProcessor {
    /// The processor and its hold service, whose thread answers held pulls through it.
    pub(crate) fn start(
        store: Arc<MessageStore>,
        topics: Arc<TopicConfigManager>,
        consume: ConsumeTables,
        settings: Arc<BrokerSettings>,
        stats: Arc<StoreStatsService>,
    ) -> std::io::Result<Arc<Self>> {
        let memory_bytes = total_physical_memory()
            .saturating_mul(settings.access_message_in_memory_max_ratio.clamp(0, 100) as u64)
            / 100;
        let hold = Arc::new(PullRequestHoldService::default());
        let processor = Arc::new(Self {
            store: store.clone(),
            topics,
            consume,
            settings,
            hold: hold.clone(),
            memory_bytes,
            stats,
        });
        // Weak: the service's thread must not keep the processor (and the store) alive.
        let weak = Arc::downgrade(&processor);
        hold.start(store, move |held: HeldPull| {
            if let Some(p) = weak.upgrade() {
                p.wake(held);
            }
        })?;
        Ok(processor)
    }

    /// Bytes behind the head a consumer may lag and still be read from memory.
    pub(crate) fn memory_bytes(&self) -> u64 {
        self.memory_bytes
    }

    pub(crate) fn hold_service(&self) -> &PullRequestHoldService {
        &self.hold
    }

    /// A held pull woken by an arrival or its timeout: answered whatever the store says now.
    fn wake(&self, held: HeldPull) {
        if let Some(response) =
            self.process_request(&held.request, held.connection_id, held.remote, None)
        {
            held.responder.send(response);
        }
    }

    fn process_request(
        &self,
        request: &RemotingCommand,
        connection_id: u64,
        remote: SocketAddr,
        suspend_with: Option<Responder>,
    ) -> Option<RemotingCommand> {
        let (header, sub, which_broker, broker_id) = match self.check(request, remote) {
            Ok(checked) => checked,
            Err(Refusal(code, remark)) => {
                return Some(RemotingCommand::response_to(request, code, Some(remark)))
            }
        };
        if let Some(offset) = self.take_reset_offset(&header) {
            return Some(self.offset_reset(request, &header, offset));
        }
        let result = self.get_message(&header, &sub);
        let (code, suggest) = self.code_and_suggestion(&header, &result, which_broker, broker_id);
        if suspend_with.is_some()
            && header.sys_flag & pull_sys_flag::FLAG_COMMIT_OFFSET != 0
            && !self.settings.is_slave
        {
            self.consume.offsets.commit_offset(
                &header.consumer_group,
                &header.topic,
                header.queue_id,
                header.commit_offset,
            );
        }
        let suspend = header.sys_flag & pull_sys_flag::FLAG_SUSPEND != 0;
        if code == response_code::PULL_NOT_FOUND && suspend {
            if let Some(responder) = suspend_with {
                let held = HeldPull::new(
                    request.clone(),
                    connection_id,
                    remote,
                    responder,
                    &header,
                    sub,
                    self.suspend_timeout_millis(&header),
                );
                // A lookup that found nothing, as `getMessage` counts it; its wake-up counts again.
                self.stats.add_get(0);
                self.hold.suspend(held, &self.store);
                return None;
            }
        }
        Some(self.response(request, &header, code, suggest, result))
    }

    /// The response code for the store's verdict and `suggestWhichBrokerId`: a consumer that
    /// lags goes to the group's slow-consumer broker; one that keeps up to the group's broker,
    /// the master unless configured otherwise.
    fn code_and_suggestion(
        &self,
        header: &PullMessageRequestHeader,
        result: &GetMessageResult,
        which_broker: i64,
        broker_id: i64,
    ) -> (i32, i64) {
        let mut code = response_code_of(result.status, header.queue_offset);
        let mut suggest = match (
            self.settings.slave_read_enable.get(),
            result.suggest_pulling_from_slave,
        ) {
            (false, _) => MASTER_ID,
            (true, true) => which_broker,
            (true, false) => broker_id,
        };
        if self.settings.is_slave && !self.settings.slave_read_enable.get() {
            code = response_code::PULL_RETRY_IMMEDIATELY;
        }
        // A slave does not move consumers' offsets (`offsetCheckInSlave` off): retry instead.
        if code == response_code::PULL_OFFSET_MOVED && self.settings.is_slave {
            code = response_code::PULL_RETRY_IMMEDIATELY;
            suggest = broker_id;
        }
        (code, suggest)
    }

    /// An operator's reset of the group's offset in this queue, waiting for this pull (a
    /// master's only: a slave never moves offsets).
    fn take_reset_offset(&self, header: &PullMessageRequestHeader) -> Option<i64> {
        if self.settings.is_slave {
            return None;
        }
        self.consume.offsets.take_reset_offset(
            &header.consumer_group,
            &header.topic,
            header.queue_id,
        )
    }

    /// RocketMQ's OFFSET_RESET answer: PULL_OFFSET_MOVED with the reset offset as the next,
    /// which every client takes as its new position in the queue.
    fn offset_reset(
        &self,
        request: &RemotingCommand,
        header: &PullMessageRequestHeader,
        offset: i64,
    ) -> RemotingCommand {
        let (min_offset, max_offset) = self
            .store
            .consume_queue(&header.topic, header.queue_id)
            .map_or((0, 0), |q| (q.min_queue_offset(), q.max_queue_offset()));
        let remark = format!(
            "the offset of group {} in topic {} queueId {} was reset to {offset}",
            header.consumer_group, header.topic, header.queue_id
        );
        let mut response =
            RemotingCommand::response_to(request, response_code::PULL_OFFSET_MOVED, Some(remark));
        response.write_custom_header(&PullMessageResponseHeader {
            suggest_which_broker_id: MASTER_ID,
            next_begin_offset: offset,
            min_offset,
            max_offset,
        });
        self.stats.add_get(0);
        response
    }

    /// How long a suspended pull is held: the consumer's timeout with long polling, else
    /// `shortPollingTimeMills`.
    fn suspend_timeout_millis(&self, header: &PullMessageRequestHeader) -> i64 {
        if self.settings.long_polling_enable {
            header.suspend_timeout_millis
        } else {
            SHORT_POLLING_MILLIS
        }
    }

    /// The answer to a pull that is not held: the records on success, else a remark saying
    /// where the queue stands.
    fn response(
        &self,
        request: &RemotingCommand,
        header: &PullMessageRequestHeader,
        code: i32,
        suggest: i64,
        result: GetMessageResult,
    ) -> RemotingCommand {
        let mut response = RemotingCommand::response_to(request, code, None);
        response.write_custom_header(&PullMessageResponseHeader {
            suggest_which_broker_id: suggest,
            next_begin_offset: result.next_begin_offset,
            min_offset: result.min_offset,
            max_offset: result.max_offset,
        });
        self.stats.add_get(if code == response_code::SUCCESS {
            result.count as u64
        } else {
            0
        });
        if code == response_code::SUCCESS {
            self.stats.groups().inc_group_get_nums(
                &header.consumer_group,
                &header.topic,
                result.count as u64,
            );
            response.body = result.body;
        } else {
            response.remark = Some(format!(
                "{:?}: topic {} queueId {} queueOffset {} (queue holds [{}, {}))",
                result.status,
                header.topic,
                header.queue_id,
                header.queue_offset,
                result.min_offset,
                result.max_offset
            ));
        }
        response
    }

    /// What `processRequest` checks before the store: returns the header, the subscription
    /// to filter by, and the group's `whichBrokerWhenConsumeSlowly` and `brokerId`.
    fn check(
        &self,
        request: &RemotingCommand,
        remote: SocketAddr,
    ) -> Result<(PullMessageRequestHeader, SubscriptionData, i64, i64), Refusal> {
        let header: PullMessageRequestHeader = request
            .decode_custom_header()
            .map_err(|e| Refusal(response_code::SYSTEM_ERROR, e.to_string()))?;
        let s = &self.settings;
        if s.broker_permission.get() & i64::from(perm::PERM_READ) == 0 {
            return Err(Refusal(
                response_code::NO_PERMISSION,
                format!("the broker[{}] pulling message is forbidden", s.broker_name),
            ));
        }
        let group = self.check_subscription_group(&header)?;
        self.check_topic_and_queue(&header, remote)?;
        let sub = if header.sys_flag & pull_sys_flag::FLAG_SUBSCRIPTION != 0 {
            SubscriptionData::build(
                &header.topic,
                header.subscription.as_deref().unwrap_or(""),
                header.expression_type.as_deref(),
                header.sub_version,
            )
            .map_err(|why| {
                Refusal(
                    response_code::SUBSCRIPTION_PARSE_FAILED,
                    format!("parse the consumer's subscription failed (subscription): {why}"),
                )
            })?
        } else {
            self.registered_subscription(&header)?
        };
        if sub.sql.is_some() && !s.enable_property_filter {
            return Err(Refusal(
                response_code::SYSTEM_ERROR,
                format!(
                    "The broker does not support consumer to filter message by {} \
                     (enablePropertyFilter is false)",
                    filter::SQL92
                ),
            ));
        }
        Ok((
            header,
            sub,
            group.which_broker_when_consume_slowly,
            group.broker_id,
        ))
    }

    /// The consumer group must exist and may consume.
    fn check_subscription_group(
        &self,
        header: &PullMessageRequestHeader,
    ) -> Result<SubscriptionGroupConfig, Refusal> {
        let group = self
            .consume
            .groups
            .find(&header.consumer_group)
            .map_err(|e| Refusal(response_code::SYSTEM_ERROR, e.to_string()))?
            .ok_or_else(|| {
                Refusal(
                    response_code::SUBSCRIPTION_GROUP_NOT_EXIST,
                    format!(
                        "subscription group [{}] does not exist (consumerGroup; \
                         autoCreateSubscriptionGroup is off)",
                        header.consumer_group
                    ),
                )
            })?;
        if !group.consume_enable {
            return Err(Refusal(
                response_code::NO_PERMISSION,
                format!(
                    "subscription group no permission, {}",
                    header.consumer_group
                ),
            ));
        }
        Ok(group)
    }

    /// The topic must exist and be readable, and the queue id within its read queues.
    fn check_topic_and_queue(
        &self,
        header: &PullMessageRequestHeader,
        remote: SocketAddr,
    ) -> Result<(), Refusal> {
        let topic = self.topics.select(&header.topic).ok_or_else(|| {
            Refusal(
                response_code::TOPIC_NOT_EXIST,
                format!(
                    "topic[{}] not exist, apply first please! (topic, consumer {remote})",
                    header.topic
                ),
            )
        })?;
        if topic.perm & perm::PERM_READ == 0 {
            return Err(Refusal(
                response_code::NO_PERMISSION,
                format!("the topic[{}] pulling message is forbidden", header.topic),
            ));
        }
        if header.queue_id < 0 || header.queue_id >= topic.read_queue_nums {
            return Err(Refusal(
                response_code::SYSTEM_ERROR,
                format!(
                    "queueId[{}] is illegal, topic:[{}] topicConfig.readQueueNums:[{}] \
                     consumer:[{remote}]",
                    header.queue_id, header.topic, topic.read_queue_nums
                ),
            ));
        }
        Ok(())
    }

    /// The subscription a push consumer's heartbeat registered, for a pull that carries none.
    fn registered_subscription(
        &self,
        header: &PullMessageRequestHeader,
    ) -> Result<SubscriptionData, Refusal> {
        let not_exist = |what: &str| {
            Refusal(
                response_code::SUBSCRIPTION_NOT_EXIST,
                format!(
                    "the consumer's {what} not exist (consumerGroup {}, topic {}): send a \
                     heartbeat first",
                    header.consumer_group, header.topic
                ),
            )
        };
        let sub = self
            .consume
            .consumers
            .find_subscription(&header.consumer_group, &header.topic)
            .ok_or_else(|| not_exist("group info"))?
            .ok_or_else(|| not_exist("subscription"))?;
        if sub.sub_version < header.sub_version {
            return Err(Refusal(
                response_code::SUBSCRIPTION_NOT_LATEST,
                format!(
                    "the consumer's subscription not latest (subVersion {} < {})",
                    sub.sub_version, header.sub_version
                ),
            ));
        }
        Ok(sub)
    }

    /// `DefaultMessageStore.getMessage` for one queue.
    pub(crate) fn get_message(
        &self,
        header: &PullMessageRequestHeader,
        sub: &SubscriptionData,
    ) -> GetMessageResult {
        let offset = header.queue_offset;
        let max_offset_py = self.store.max_offset();
        let mut result = GetMessageResult {
            status: GetMessageStatus::NoMatchedLogicQueue,
            next_begin_offset: self.correct(offset, 0),
            min_offset: 0,
            max_offset: 0,
            body: Vec::new(),
            count: 0,
            suggest_pulling_from_slave: false,
        };
        let Some(cq) = self.store.consume_queue(&header.topic, header.queue_id) else {
            return result;
        };
        let (min, max) = (cq.min_queue_offset(), cq.max_queue_offset());
        result.min_offset = min;
        result.max_offset = max;
        let (status, next) = if max == 0 {
            (GetMessageStatus::NoMessageInQueue, self.correct(offset, 0))
        } else if offset < min {
            (GetMessageStatus::OffsetTooSmall, self.correct(offset, min))
        } else if offset == max {
            (
                GetMessageStatus::OffsetOverflowOne,
                self.correct(offset, offset),
            )
        } else if offset > max {
            let to = if min == 0 { min } else { max };
            (
                GetMessageStatus::OffsetOverflowBadly,
                self.correct(offset, to),
            )
        } else {
            self.read_queue(&cq, header, sub, max_offset_py, &mut result);
            return result;
        };
        result.status = status;
        result.next_begin_offset = next;
        result
    }

    /// The found branch of `getMessage`: the queue's entries from the pull's offset, filtered
    /// by tag hash, their records copied from the mapping until a batch bound is reached.
    fn read_queue(
        &self,
        cq: &crate::consume_queue::ConsumeQueue,
        header: &PullMessageRequestHeader,
        sub: &SubscriptionData,
        max_offset_py: u64,
        result: &mut GetMessageResult,
    ) {
        let max_msgs = usize::try_from(header.max_msg_nums).unwrap_or(0).max(1);
        let max_bytes = header
            .max_msg_bytes
            .and_then(|b| usize::try_from(b).ok())
            .unwrap_or(usize::MAX);
        // A filtered subscription may skip many entries for each one it takes.
        let scan = if !sub.is_filtered() {
            max_msgs
        } else {
            max_msgs.max(MAX_FILTER_ENTRIES)
        };
        let entries = cq.get(header.queue_offset, scan);
        if entries.is_empty() {
            result.status = GetMessageStatus::OffsetFoundNull;
            result.next_begin_offset = self.correct(header.queue_offset, cq.min_queue_offset());
            return;
        }
        let min_py = self.store.min_offset();
        let mut next = header.queue_offset;
        let mut max_py_pulling: Option<u64> = None;
        let mut status = GetMessageStatus::NoMatchedMessage;
        for (qo, entry) in entries {
            let offset_py = entry.commitlog_offset as u64;
            let size = entry.size as usize;
            if offset_py < min_py {
                status = GetMessageStatus::MessageWasRemoving;
                next = qo + 1;
                continue;
            }
            let in_disk = max_offset_py.saturating_sub(offset_py) > self.memory_bytes;
            let limit = if in_disk {
                self.settings.max_transfer_in_disk
            } else {
                self.settings.max_transfer_in_memory
            };
            if batch_full(size, max_msgs, max_bytes, result, limit) {
                break;
            }
            max_py_pulling = Some(offset_py);
            if !sub.matches(entry.tags_code) {
                next = qo + 1;
                continue;
            }
            let Some(slice) = self
                .store
                .read_raw(offset_py, size)
                .filter(|s| s.len() == size)
            else {
                break;
            };
            if !matches_by_commit_log(sub, slice.bytes()) {
                next = qo + 1;
                continue;
            }
            result.body.extend_from_slice(slice.bytes());
            result.count += 1;
            status = GetMessageStatus::Found;
            next = qo + 1;
        }
        result.status = status;
        result.next_begin_offset = next;
        result.suggest_pulling_from_slave =
            max_py_pulling.is_some_and(|p| max_offset_py.saturating_sub(p) > self.memory_bytes);
    }

    /// `nextOffsetCorrection`: a master moves a consumer's offset; a slave
    /// (`offsetCheckInSlave` off) leaves it where the consumer asked.
    fn correct(&self, old: i64, new: i64) -> i64 {
        if self.settings.is_slave {
            old
        } else {
            new
        }
    }
}

/// The response code for the store's `GetMessageStatus`, as `PullMessageProcessor` maps it.
fn response_code_of(status: GetMessageStatus, queue_offset: i64) -> i32 {
    match status {
        GetMessageStatus::Found => response_code::SUCCESS,
        GetMessageStatus::MessageWasRemoving | GetMessageStatus::NoMatchedMessage => {
            response_code::PULL_RETRY_IMMEDIATELY
        }
        GetMessageStatus::NoMatchedLogicQueue | GetMessageStatus::NoMessageInQueue => {
            if queue_offset != 0 {
                response_code::PULL_OFFSET_MOVED
            } else {
                response_code::PULL_NOT_FOUND
            }
        }
        GetMessageStatus::OffsetFoundNull | GetMessageStatus::OffsetOverflowOne => {
            response_code::PULL_NOT_FOUND
        }
        GetMessageStatus::OffsetOverflowBadly | GetMessageStatus::OffsetTooSmall => {
            response_code::PULL_OFFSET_MOVED
        }
    }
}

/// `isMatchedByCommitLog` over a stored record: its properties decide a SQL92 subscription.
/// A record that does not decode is not the filter's to judge: it goes to the consumer, whose
/// own decoding reports it.
fn matches_by_commit_log(sub: &SubscriptionData, record: &[u8]) -> bool {
    if sub.sql.is_none() {
        return true;
    }
    match record::decode(record, false) {
        Ok(Peeked::Record(r)) => sub.matches_properties(r.properties),
        _ => true,
    }
}

/// `isTheBatchFull`: the pull's own bounds, then the broker's for where the records are.
fn batch_full(
    size: usize,
    max_msgs: usize,
    max_bytes: usize,
    result: &GetMessageResult,
    limit: TransferLimit,
) -> bool {
    let (total, count) = (result.body.len(), result.count);
    if total == 0 || count == 0 {
        return false;
    }
    count >= max_msgs.min(limit.count) || total + size > max_bytes.min(limit.bytes)
}

/// `TotalPhysicalMemorySize`.
fn total_physical_memory() -> u64 {
    // SAFETY: sysconf only reads system constants.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    u64::try_from(pages).unwrap_or(0) * u64::try_from(page).unwrap_or(0)
}

/// The codes it answers.
pub(crate) const CODES: &[i32] = &[request_code::PULL_MESSAGE, request_code::LITE_PULL_MESSAGE];

impl RequestProcessor for PullMessageProcessor {
    /// `processRequest` with `brokerAllowSuspend`: `None` when the pull is held.
    fn process(&self, request: RemotingCommand, ctx: &RequestContext) -> Option<RemotingCommand> {
        self.process_request(
            &request,
            ctx.connection_id(),
            ctx.remote(),
            Some(ctx.responder()),
        )
    }

    /// A held pull of a closed connection is dropped.
    fn on_close(&self, connection_id: u64, _remote: SocketAddr) {
        self.hold.on_close(connection_id);
    }
}

#[cfg(test)]
pub(crate) mod tests;
