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
    parse_normal_topic, polling_key, pop_retry_topic, pop_retry_topic_v1, put_check_point,
    revive_topic, PopCheckPoint, QueueLockManager, POP_ORDER_REVIVE_QUEUE, PROPERTY_POP_CK,
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
        // RocketMQ's TopicConfigManager creates the revive topic at start; here the first pop
        // does, so a broker nobody pops from keeps the table it had.
        if self.topics.select(&self.revive_topic).is_none() {
            self.topics.create_in_send_back(
                &self.revive_topic,
                s.pop.revive_queue_num,
                perm::PERM_READ | perm::PERM_WRITE,
                0,
            );
        }
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

mod orderly;
mod queue;
#[cfg(test)]
pub(crate) mod tests;
