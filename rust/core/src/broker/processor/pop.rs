//! RocketMQ 5's `PopMessageProcessor` (POP_MESSAGE): a consumer group's messages handed out
//! for an invisible time, each pop leaving a checkpoint in the revive topic (see
//! [`crate::broker::pop`]).
//!
//! A pop is checked as a pull is (broker and topic permission, the queue, the group, created
//! when unknown with `autoCreateSubscriptionGroup`, the subscription), then reads the group's
//! queues from their offsets: the queue asked for, or all of them from a random one for -1, and
//! the group's pop retry topic first in `popFromRetryProbability` percent of pops, else after
//! the topic when the pop is not full. Each queue it takes messages from is locked against
//! other pops of the group for the read; its checkpoint is stored before its offset moves past
//! them, and a checkpoint that could not be stored hands nothing out. A retried message is
//! answered under the topic it was popped for, with its `POP_CK`. A pop that finds nothing is
//! held up to its `pollTime` and woken by an arrival.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::pull::{GetMessageResult, GetMessageStatus, PullMessageProcessor};
use crate::broker::consumer_manager::SubscriptionData;
use crate::broker::consumer_order_info::{CommitAndNext, ConsumerOrderInfoManager};
use crate::broker::pop::extra_info::{self, OffsetInfo};
use crate::broker::pop::long_polling::{HeldPop, PollingResult, PopLongPollingService};
use crate::broker::pop::{
    check_point, parse_normal_topic, polling_key, pop_retry_topic, pop_retry_topic_v1,
    put_revive_message, revive_topic, PopCheckPoint, QueueLockManager, ACK_TIME_INTERVAL_MS,
    CK_TAG, POP_ORDER_REVIVE_QUEUE, PROPERTY_POP_CK,
};
use crate::broker::topic_config::TopicConfigManager;
use crate::broker::{BrokerSettings, ConsumeTables};
use crate::commitlog::record::{self, MessageDraft, Peeked};
use crate::filter;
use crate::protocol::body::{perm, TopicConfig};
use crate::protocol::{now_millis, RETRY_GROUP_TOPIC_PREFIX};
use crate::remoting::header::{
    PopMessageRequestHeader, PopMessageResponseHeader, PullMessageRequestHeader,
};
use crate::remoting::{
    request_code, response_code, RemotingCommand, RequestContext, RequestProcessor, Responder,
};
use crate::store::MessageStore;

/// The most messages one pop takes.
const MAX_MSG_NUMS: i32 = 32;
/// `isTimeoutTooMuch`: a pop that arrives this long past its `pollTime` is answered at once.
const TIMEOUT_TOO_MUCH_MS: i64 = 500;
/// `ConsumeInitMode.MIN`: a queue the group never read is popped from its start.
const INIT_MODE_MIN: i32 = 1;
/// The header field a pop's deadline counts from.
const BORN_TIME: &str = "bornTime";

/// A pop refused before any queue is read.
struct Refusal(i32, String);

/// What one pop gathers across the queues it reads.
#[derive(Default)]
struct Popped {
    body: Vec<u8>,
    count: usize,
    rest: i64,
    offsets: OffsetInfo,
}

/// The checked request: what every queue read needs.
struct PopRequest {
    header: PopMessageRequestHeader,
    sub: SubscriptionData,
    retry_sub: SubscriptionData,
    pop_time: i64,
    revive_qid: i32,
}

pub(crate) struct PopMessageProcessor {
    store: Arc<MessageStore>,
    topics: Arc<TopicConfigManager>,
    consume: ConsumeTables,
    settings: Arc<BrokerSettings>,
    /// Reads a queue as a pull does (`getMessage`).
    pull: Arc<PullMessageProcessor>,
    polling: Arc<PopLongPollingService>,
    queue_locks: QueueLockManager,
    order_info: Arc<ConsumerOrderInfoManager>,
    /// `ckMessageNumber`: pops take the revive queues in turn.
    ck_number: AtomicU64,
    revive_topic: String,
}

impl PopMessageProcessor {
    /// The processor and its long polling service's thread, which runs held pops again.
    pub(crate) fn start(
        store: Arc<MessageStore>,
        topics: Arc<TopicConfigManager>,
        consume: ConsumeTables,
        settings: Arc<BrokerSettings>,
        pull: Arc<PullMessageProcessor>,
        order_info: Arc<ConsumerOrderInfoManager>,
    ) -> std::io::Result<Arc<Self>> {
        let revive_topic = revive_topic(&settings.cluster_name);
        // A system topic of every broker, as RocketMQ's TopicConfigManager creates it.
        topics.create_in_send_back(
            &revive_topic,
            settings.pop.revive_queue_num,
            perm::PERM_READ | perm::PERM_WRITE,
            0,
        );
        let polling = Arc::new(PopLongPollingService::new(settings.pop.polling_size));
        let processor = Arc::new(Self {
            store,
            topics,
            consume,
            settings,
            pull,
            polling: polling.clone(),
            queue_locks: QueueLockManager::default(),
            order_info,
            ck_number: AtomicU64::new(0),
            revive_topic,
        });
        let weak = Arc::downgrade(&processor);
        polling.start(move |held: HeldPop| {
            if let Some(p) = weak.upgrade() {
                p.wake(held);
            }
        })?;
        Ok(processor)
    }

    /// The long polling service, for the store's arrivals.
    pub(crate) fn polling(&self) -> &PopLongPollingService {
        &self.polling
    }

    fn wake(&self, held: HeldPop) {
        let responder = held.responder.clone();
        if let Some(response) = self.process_request(
            &held.request,
            held.connection_id,
            held.remote,
            Some(held.responder),
        ) {
            responder.send(response);
        }
    }

    fn process_request(
        &self,
        request: &RemotingCommand,
        connection_id: u64,
        remote: SocketAddr,
        suspend_with: Option<Responder>,
    ) -> Option<RemotingCommand> {
        let (pop, topic) = match self.check(request) {
            Ok(checked) => checked,
            Err(Refusal(code, remark)) => {
                return Some(RemotingCommand::response_to(request, code, Some(remark)))
            }
        };
        let popped = self.pop(&pop, &topic);
        let header = &pop.header;
        let code = if popped.count > 0 {
            response_code::SUCCESS
        } else {
            let deadline_ms = header.born_time.saturating_add(header.poll_time);
            let wait_ms = deadline_ms - now_millis();
            match suspend_with {
                Some(responder) if wait_ms > 0 => {
                    let held = HeldPop::new(
                        request.clone(),
                        connection_id,
                        remote,
                        responder,
                        &header.consumer_group,
                        &header.topic,
                        header.queue_id,
                        pop.sub.clone(),
                        Instant::now() + Duration::from_millis(wait_ms as u64),
                    );
                    let arrived = || self.anything_to_pop(&pop, &topic);
                    match self.polling.polling(held, arrived) {
                        PollingResult::Suc => return None,
                        PollingResult::Full => response_code::POLLING_FULL,
                    }
                }
                _ => response_code::POLLING_TIMEOUT,
            }
        };
        let remark = if code == response_code::SUCCESS {
            "FOUND"
        } else {
            "NO_MESSAGE_IN_QUEUE"
        };
        let mut response = RemotingCommand::response_to(request, code, Some(remark.into()));
        response.write_custom_header(&PopMessageResponseHeader {
            pop_time: pop.pop_time,
            invisible_time: header.invisible_time,
            revive_qid: pop.revive_qid,
            rest_num: popped.rest,
            start_offset_info: Some(popped.offsets.start_offsets),
            msg_offset_info: Some(popped.offsets.msg_offsets),
            order_count_info: (header.order == Some(true)).then_some(popped.offsets.order_counts),
        });
        if code == response_code::SUCCESS {
            response.body = popped.body;
        }
        Some(response)
    }

    /// What `processRequest` checks before it reads: the request and the topic's config.
    fn check(&self, request: &RemotingCommand) -> Result<(PopRequest, TopicConfig), Refusal> {
        let header: PopMessageRequestHeader = request
            .decode_custom_header()
            .map_err(|e| Refusal(response_code::SYSTEM_ERROR, e.to_string()))?;
        let s = &self.settings;
        let now = now_millis();
        if now - header.born_time - header.poll_time > TIMEOUT_TOO_MUCH_MS {
            return Err(Refusal(
                response_code::POLLING_TIMEOUT,
                format!(
                    "the broker[{}] pop message is timeout too much (bornTime {} + pollTime {} \
                     is {} ms ago)",
                    s.broker_name,
                    header.born_time,
                    header.poll_time,
                    now - header.born_time - header.poll_time
                ),
            ));
        }
        if s.broker_permission.get() & i64::from(perm::PERM_READ) == 0 {
            return Err(Refusal(
                response_code::NO_PERMISSION,
                format!("the broker[{}] pop message is forbidden", s.broker_name),
            ));
        }
        if s.is_slave {
            return Err(Refusal(
                response_code::SYSTEM_ERROR,
                format!(
                    "the broker[{}] id {} is a SLAVE: pop from its master (a pop writes its \
                     checkpoint and moves the group's offset)",
                    s.broker_name, s.broker_id
                ),
            ));
        }
        if header.max_msg_nums > MAX_MSG_NUMS || header.max_msg_nums <= 0 {
            return Err(Refusal(
                response_code::INVALID_PARAMETER,
                format!(
                    "the broker[{}] pop message's num is greater than {MAX_MSG_NUMS} or not \
                     positive (maxMsgNums {})",
                    s.broker_name, header.max_msg_nums
                ),
            ));
        }
        if header.invisible_time < 0 || header.poll_time < 0 {
            return Err(Refusal(
                response_code::INVALID_PARAMETER,
                format!(
                    "invisibleTime {} and pollTime {} must not be negative",
                    header.invisible_time, header.poll_time
                ),
            ));
        }
        if !self.store.config().timer.enable {
            return Err(Refusal(
                response_code::SYSTEM_ERROR,
                format!(
                    "the broker[{}] pop message is forbidden because timerWheelEnable is false",
                    s.broker_name
                ),
            ));
        }
        let topic = self.check_topic(&header)?;
        self.check_group(&header.consumer_group)?;
        let (sub, retry_sub) = self.subscriptions(&header)?;
        let revive_qid = if header.order == Some(true) {
            POP_ORDER_REVIVE_QUEUE
        } else {
            let n = self.settings.pop.revive_queue_num.max(1) as u64;
            (self.ck_number.fetch_add(1, Ordering::Relaxed) % n) as i32
        };
        Ok((
            PopRequest {
                header,
                sub,
                retry_sub,
                pop_time: now,
                revive_qid,
            },
            topic,
        ))
    }

    fn check_topic(&self, header: &PopMessageRequestHeader) -> Result<TopicConfig, Refusal> {
        let topic = self.topics.select(&header.topic).ok_or_else(|| {
            Refusal(
                response_code::TOPIC_NOT_EXIST,
                format!("topic[{}] not exist, apply first please!", header.topic),
            )
        })?;
        if topic.perm & perm::PERM_READ == 0 {
            return Err(Refusal(
                response_code::NO_PERMISSION,
                format!("the topic[{}] peeking message is forbidden", header.topic),
            ));
        }
        if header.queue_id >= topic.read_queue_nums {
            return Err(Refusal(
                response_code::INVALID_PARAMETER,
                format!(
                    "queueId[{}] is illegal, topic:[{}] topicConfig.readQueueNums:[{}]",
                    header.queue_id, header.topic, topic.read_queue_nums
                ),
            ));
        }
        Ok(topic)
    }

    /// The group must exist (created when unknown, as `findSubscriptionGroupConfig` does with
    /// `autoCreateSubscriptionGroup`) and may consume.
    fn check_group(&self, group: &str) -> Result<(), Refusal> {
        let config = self
            .consume
            .groups
            .find(group)
            .map_err(|e| Refusal(response_code::SYSTEM_ERROR, e.to_string()))?
            .ok_or_else(|| {
                Refusal(
                    response_code::SUBSCRIPTION_GROUP_NOT_EXIST,
                    format!(
                        "subscription group [{group}] does not exist (consumerGroup; \
                         autoCreateSubscriptionGroup is off)"
                    ),
                )
            })?;
        if !config.consume_enable {
            return Err(Refusal(
                response_code::NO_PERMISSION,
                format!("subscription group no permission, {group}"),
            ));
        }
        Ok(())
    }

    /// The topic's subscription (`*` without an expression) and the retry topic's (`*`).
    fn subscriptions(
        &self,
        header: &PopMessageRequestHeader,
    ) -> Result<(SubscriptionData, SubscriptionData), Refusal> {
        let exp = header
            .exp
            .as_deref()
            .filter(|e| !e.is_empty())
            .unwrap_or("*");
        let sub = SubscriptionData::build(&header.topic, exp, header.exp_type.as_deref(), 0)
            .map_err(|why| {
                Refusal(
                    response_code::SUBSCRIPTION_PARSE_FAILED,
                    format!("parse the consumer's subscription failed (exp {exp:?}): {why}"),
                )
            })?;
        if sub.sql.is_some() && !self.settings.enable_property_filter {
            return Err(Refusal(
                response_code::SYSTEM_ERROR,
                format!(
                    "The broker does not support consumer to filter message by {} \
                     (enablePropertyFilter is false)",
                    filter::SQL92
                ),
            ));
        }
        let retry_topic = pop_retry_topic(
            &header.topic,
            &header.consumer_group,
            self.settings.pop.enable_retry_topic_v2,
        );
        let retry_sub = SubscriptionData::build(&retry_topic, "*", None, 0)
            .map_err(|why| Refusal(response_code::SYSTEM_ERROR, why))?;
        Ok((sub, retry_sub))
    }

    /// The retry topics a pop reads: the configured one, and with v2 on the v1 one too.
    fn retry_topics(&self, header: &PopMessageRequestHeader) -> Vec<String> {
        let p = &self.settings.pop;
        let mut topics = vec![pop_retry_topic(
            &header.topic,
            &header.consumer_group,
            p.enable_retry_topic_v2,
        )];
        if p.enable_retry_topic_v2 && p.retrieve_from_retry_topic_v1 {
            topics.push(pop_retry_topic_v1(&header.topic, &header.consumer_group));
        }
        topics
    }

    /// Reads the queues in RocketMQ's order until the pop is full.
    fn pop(&self, pop: &PopRequest, topic: &TopicConfig) -> Popped {
        let mut popped = Popped::default();
        let header = &pop.header;
        let random = getrandom::u32().unwrap_or(0);
        let order = header.order == Some(true);
        let retry_first = !order
            && (random % 100)
                < u32::try_from(self.settings.pop.pop_from_retry_probability).unwrap_or(0);
        let retry_topics = if order {
            Vec::new()
        } else {
            self.retry_topics(header)
        };
        let read_retry = |popped: &mut Popped| {
            for retry in &retry_topics {
                if let Some(config) = self.topics.select(retry) {
                    self.pop_from_topic(pop, &config, true, random, popped);
                }
            }
        };
        if retry_first {
            read_retry(&mut popped);
        }
        if header.queue_id < 0 {
            self.pop_from_topic(pop, topic, false, random, &mut popped);
        } else {
            self.pop_from_queue(pop, &topic.topic_name, false, header.queue_id, &mut popped);
        }
        if !retry_first && popped.count < header.max_msg_nums as usize {
            read_retry(&mut popped);
        }
        popped
    }

    fn pop_from_topic(
        &self,
        pop: &PopRequest,
        topic: &TopicConfig,
        is_retry: bool,
        random: u32,
        popped: &mut Popped,
    ) {
        let n = topic.read_queue_nums.max(0) as u32;
        for i in 0..n {
            let queue_id = ((random % n.max(1) + i) % n) as i32;
            self.pop_from_queue(pop, &topic.topic_name, is_retry, queue_id, popped);
        }
    }

    /// `popMsgFromQueue`: the queue's messages from the group's offset, its checkpoint stored,
    /// its offset moved past them.
    fn pop_from_queue(
        &self,
        pop: &PopRequest,
        topic: &str,
        is_retry: bool,
        queue_id: i32,
        popped: &mut Popped,
    ) {
        let header = &pop.header;
        let group = &header.consumer_group;
        let max = self.max_offset(topic, queue_id);
        let Some(_lock) = self
            .queue_locks
            .try_lock(polling_key(topic, group, queue_id))
        else {
            popped.rest += max - self.pop_offset(topic, group, queue_id, header.init_mode, false);
            return;
        };
        let mut offset = self.pop_offset(topic, group, queue_id, header.init_mode, true);
        let order = header.order == Some(true);
        let attempt = header.attempt_id.as_deref();
        if order
            && self
                .order_info
                .check_block(attempt, topic, group, queue_id, header.invisible_time)
        {
            // Its last orderly pop holds it; its backlog is not this pop's to count.
            return;
        }
        if popped.count >= header.max_msg_nums as usize {
            popped.rest += max - offset;
            return;
        }
        let sub = if is_retry { &pop.retry_sub } else { &pop.sub };
        let mut result = self.get_message(group, topic, queue_id, offset, header, popped, sub);
        if matches!(
            result.status,
            GetMessageStatus::OffsetTooSmall
                | GetMessageStatus::OffsetOverflowBadly
                | GetMessageStatus::OffsetFoundNull
        ) {
            // The group's offset is outside the queue (retention took its start): it moves
            // to where the queue's messages are.
            self.consume
                .offsets
                .commit_offset(group, topic, queue_id, result.next_begin_offset);
            offset = result.next_begin_offset;
            result = self.get_message(group, topic, queue_id, offset, header, popped, sub);
        }
        popped.rest += result.max_offset - result.next_begin_offset;
        if result.count == 0 {
            if result.status != GetMessageStatus::Found && result.next_begin_offset > offset {
                // Filtered out or removed: nothing to hand out, the offset moves on.
                self.consume.offsets.commit_offset(
                    group,
                    topic,
                    queue_id,
                    result.next_begin_offset,
                );
            }
            return;
        }
        let records = split_records(&result.body);
        let offsets: Vec<i64> = records.iter().map(|r| r.1).collect();
        if order {
            let counts = self.order_info.update(
                attempt,
                topic,
                group,
                queue_id,
                pop.pop_time,
                header.invisible_time,
                &offsets,
            );
            popped
                .offsets
                .add_order_counts(topic, queue_id, &counts, offsets.len());
            // The offset stays at the pop's start until acks move it.
            self.consume
                .offsets
                .commit_offset(group, topic, queue_id, offset);
        } else {
            let mut ck = PopCheckPoint::new(
                topic,
                group,
                queue_id,
                offset,
                pop.pop_time,
                header.invisible_time,
                &self.settings.broker_name,
            );
            offsets.iter().for_each(|&o| ck.add(o));
            let put = put_revive_message(
                &self.store,
                &self.revive_topic,
                pop.revive_qid,
                CK_TAG,
                &ck.to_json(),
                &check_point::ck_unique_id(&ck),
                ck.revive_time() - ACK_TIME_INTERVAL_MS,
            );
            if let Err(e) = put {
                // Handed out without a checkpoint, they could never come back: kept instead.
                log::warn!(
                    "pop of {topic} queue {queue_id} by {group}: checkpoint not stored: {e}"
                );
                popped.rest += result.count as i64;
                return;
            }
        }
        if !order {
            self.consume
                .offsets
                .commit_offset(group, topic, queue_id, result.next_begin_offset);
        }
        popped.offsets.add(topic, queue_id, offset, &offsets);
        popped.count += result.count;
        let broker = &self.settings.broker_name;
        for (raw, queue_offset) in records {
            if !is_retry || self.settings.pop.response_return_actual_retry_topic {
                popped.body.extend_from_slice(raw);
                continue;
            }
            let ck = extra_info::build(
                offset,
                pop.pop_time,
                header.invisible_time,
                pop.revive_qid,
                topic,
                broker,
                queue_id,
                queue_offset,
            );
            reencode_under(
                raw,
                &parse_normal_topic(topic, group),
                &ck,
                &mut popped.body,
            );
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn get_message(
        &self,
        group: &str,
        topic: &str,
        queue_id: i32,
        offset: i64,
        header: &PopMessageRequestHeader,
        popped: &Popped,
        sub: &SubscriptionData,
    ) -> GetMessageResult {
        let left = header.max_msg_nums - popped.count as i32;
        let pull = PullMessageRequestHeader::tag(
            group.to_owned(),
            topic.to_owned(),
            queue_id,
            offset,
            left.max(1),
            0,
            sub.sub_string.clone(),
        );
        self.pull.get_message(&pull, sub)
    }

    fn max_offset(&self, topic: &str, queue_id: i32) -> i64 {
        self.store
            .consume_queue(topic, queue_id)
            .map_or(0, |q| q.max_queue_offset())
    }

    /// `getPopOffset`: the group's offset; for a queue it never read, `getInitOffset`
    /// (committed when `init`), and an operator's reset waiting for it taken.
    fn pop_offset(
        &self,
        topic: &str,
        group: &str,
        queue_id: i32,
        init_mode: i32,
        init: bool,
    ) -> i64 {
        let offsets = &self.consume.offsets;
        if init {
            if let Some(reset) = offsets.take_reset_offset(group, topic, queue_id) {
                // `resetPopOffset`: an orderly pop's hold on the queue goes with it.
                self.order_info.clear_block(topic, group, queue_id);
                offsets.commit_offset(group, topic, queue_id, reset);
                return reset;
            }
        }
        if let Some(offset) = offsets
            .query_offset(group, topic, queue_id)
            .filter(|&o| o >= 0)
        {
            return offset;
        }
        let offset = self.init_offset(topic, queue_id, init_mode);
        if init {
            offsets.commit_offset(group, topic, queue_id, offset);
        }
        offset
    }

    /// `getInitOffset`: a retry topic and `ConsumeInitMode.MIN` from the start; otherwise the
    /// last message, or the start of a queue whose first message is still in memory
    /// (`initPopOffsetByCheckMsgInMem`: a new topic is read whole).
    fn init_offset(&self, topic: &str, queue_id: i32, init_mode: i32) -> i64 {
        let Some(cq) = self.store.consume_queue(topic, queue_id) else {
            return 0;
        };
        let (min, max) = (cq.min_queue_offset(), cq.max_queue_offset());
        if init_mode == INIT_MODE_MIN || topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
            return min;
        }
        let first_in_memory = min <= 0
            && cq.get(0, 1).first().is_some_and(|(_, e)| {
                self.store
                    .max_offset()
                    .saturating_sub(e.commitlog_offset as u64)
                    <= self.pull.memory_bytes()
            });
        if first_in_memory {
            0
        } else {
            (max - 1).max(0)
        }
    }

    /// `ackOrderly`: an orderly pop's message acked; the group's offset moves past what is
    /// acked, and a pop held for the queue runs again. `Err` with the remark for an offset
    /// the pop did not take.
    pub(crate) fn ack_orderly(
        &self,
        topic: &str,
        group: &str,
        queue_id: i32,
        ack_offset: i64,
        pop_time: i64,
    ) -> Result<(), String> {
        let offsets = &self.consume.offsets;
        let committed = || offsets.query_offset(group, topic, queue_id).unwrap_or(-1);
        if ack_offset < committed() {
            return Ok(());
        }
        // A pop reading the queue now would hand the message out again after this ack.
        let _lock = self.queue_locks.lock(polling_key(topic, group, queue_id));
        let old = committed();
        if ack_offset < old {
            return Ok(());
        }
        match self
            .order_info
            .commit_and_next(topic, group, queue_id, ack_offset, pop_time)
        {
            CommitAndNext::Next(next) => {
                offsets.commit_offset(group, topic, queue_id, next);
                self.polling.wake_queue(topic, group, queue_id);
                Ok(())
            }
            CommitAndNext::Stale => Ok(()),
            CommitAndNext::NotPopped => Err(format!(
                "offset is illegal, key:{}, old:{old}, commit:{ack_offset}, next:-1: the \
                 queue's last orderly pop did not take it",
                polling_key(topic, group, queue_id)
            )),
        }
    }

    /// An orderly pop's message invisible until `next_visible_time`; false when the pop is
    /// not the queue's last (nothing to change).
    pub(crate) fn change_invisible_orderly(
        &self,
        topic: &str,
        group: &str,
        queue_id: i32,
        offset: i64,
        pop_time: i64,
        next_visible_time: i64,
    ) -> bool {
        let _lock = self.queue_locks.lock(polling_key(topic, group, queue_id));
        self.order_info.update_next_visible_time(
            topic,
            group,
            queue_id,
            offset,
            pop_time,
            next_visible_time,
        )
    }

    /// Whether a record a held pop could take came since it read the queues.
    fn anything_to_pop(&self, pop: &PopRequest, topic: &TopicConfig) -> bool {
        let header = &pop.header;
        let group = &header.consumer_group;
        let queues: Vec<i32> = if header.queue_id < 0 {
            (0..topic.read_queue_nums).collect()
        } else {
            vec![header.queue_id]
        };
        let behind = |t: &str, q: i32| {
            self.consume
                .offsets
                .query_offset(group, t, q)
                .is_some_and(|o| self.max_offset(t, q) > o)
        };
        queues.iter().any(|&q| behind(&topic.topic_name, q))
            || self.retry_topics(header).iter().any(|t| behind(t, 0))
    }
}

/// The records of a pull's body and their queue offsets.
fn split_records(body: &[u8]) -> Vec<(&[u8], i64)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < body.len() {
        match record::decode(&body[at..], false) {
            Ok(Peeked::Record(r)) => {
                let size = r.total_size as usize;
                out.push((&body[at..at + size], r.queue_offset));
                at += size;
            }
            _ => break,
        }
    }
    out
}

/// A retried message as its consumer expects it: under `topic` (the one it popped), with its
/// `POP_CK` (the client could not build it: the response's offsets name the retry queue).
fn reencode_under(raw: &[u8], topic: &str, pop_ck: &str, out: &mut Vec<u8>) {
    let Ok(Peeked::Record(r)) = record::decode(raw, false) else {
        return;
    };
    let properties = if record::find_property(r.properties, PROPERTY_POP_CK).is_some() {
        r.properties.to_vec()
    } else {
        record::edit_properties(r.properties, &[(PROPERTY_POP_CK, pop_ck)], &[])
    };
    let draft = MessageDraft {
        topic,
        body: r.body,
        properties: &properties,
        queue_id: r.queue_id,
        flag: r.flag,
        sys_flag: r.sys_flag,
        born_timestamp: r.born_timestamp,
        born_host: r.born_host,
        reconsume_times: r.reconsume_times,
        prepared_tx_offset: r.prepared_tx_offset,
    };
    let start = out.len();
    out.resize(start + draft.encoded_len(&r.store_host), 0);
    draft.encode_into(
        &mut out[start..],
        r.queue_offset,
        r.physical_offset,
        r.store_timestamp,
        &r.store_host,
    );
}

/// The codes it answers.
pub(crate) const CODES: &[i32] = &[request_code::POP_MESSAGE];

impl RequestProcessor for PopMessageProcessor {
    /// `None` when the pop is held.
    fn process(
        &self,
        mut request: RemotingCommand,
        ctx: &RequestContext,
    ) -> Option<RemotingCommand> {
        // A pop without its born time (Apache's proxy sends 0) was born now: written into the
        // request, so a held pop run again keeps its deadline.
        let born = request.ext_fields.get(BORN_TIME).map(String::as_str);
        if matches!(born, None | Some("0")) {
            request
                .ext_fields
                .insert(BORN_TIME.to_owned(), now_millis().to_string());
        }
        self.process_request(
            &request,
            ctx.connection_id(),
            ctx.remote(),
            Some(ctx.responder()),
        )
    }

    fn on_close(&self, connection_id: u64, _remote: SocketAddr) {
        self.polling.on_close(connection_id);
    }
}

#[cfg(test)]
pub(crate) mod tests;
