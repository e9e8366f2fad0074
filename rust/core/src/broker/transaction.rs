//! RocketMQ's transactional messages: `TransactionalMessageServiceImpl` with its
//! `TransactionalMessageCheckService`, and `EndTransactionProcessor` ([`end`]).
//!
//! Everything a transaction does is a message in the commit log ([`bridge`]), so a slave
//! replicates half messages, check copies, commits and ops byte for byte, and a master
//! restarted (or a slave restarted as master) rebuilds what is pending from the log alone.
//!
//! ▲ RocketMQ finds what is pending by re-reading the op queue on every check round, and keys
//! an op by the half queue offset it names, so a producer that ends the original half message
//! after a check copy was put back leaves the copy pending: it is checked again and, answered
//! commit, committed twice. rocketha keys every copy by its transaction (the first half
//! message's queue offset, kept in `TRAN_PREPARED_QUEUE_OFFSET`) and keeps the pending set in
//! memory: a transaction ends once, whichever copy is named, and a second end is answered
//! with what the first did. The set is rebuilt at start from the half and op queues past the
//! progress kept under `CID_RMQ_SYS_TRANS` in the consumer offsets.

pub(crate) mod bridge;
pub(crate) mod end;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bridge::{HalfInfo, Op, HALF_TOPIC, OP_TOPIC};

use super::consumer_offset::ConsumerOffsetManager;
use super::producer_manager::ProducerManager;
use super::topic_config::TopicConfigManager;
use super::TransactionSettings;
use crate::commitlog::record::{MessageDraft, RecordView};
use crate::commitlog::AppendResult;
use crate::error::CommitLogError;
use crate::protocol::body::perm;
use crate::protocol::now_millis;
use crate::remoting::header::CheckTransactionStateRequestHeader;
use crate::remoting::{request_code, RemotingCommand};
use crate::store::MessageStore;
use crate::sync::{lock, ServiceThread, ServiceWaiter, Woke};

/// `TransactionalMessageUtil.buildConsumerGroup()`: whose offsets hold the check's progress.
pub(crate) const SYS_TRANS_GROUP: &str = "CID_RMQ_SYS_TRANS";
/// Ended transactions remembered, so a repeated end is answered with what the first did.
const REMEMBERED_OUTCOMES: usize = 65_536;

/// How a transaction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Commit,
    Rollback,
    /// Checked `transactionCheckMax` times without an answer.
    Discarded,
    /// Ended before the broker started; the op message does not say how.
    EndedBefore,
}

impl Outcome {
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Self::Commit => "committed",
            Self::Rollback => "rolled back",
            Self::Discarded => "discarded after transactionCheckMax check-backs",
            Self::EndedBefore => "ended (committed or rolled back) before the broker restarted",
        }
    }
}

/// A transaction waiting for its producer's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pending {
    /// Queue and commit log offsets of its latest half message (the first, or the last copy
    /// put back for a check).
    queue_offset: i64,
    commit_log_offset: i64,
    /// When it is checked first (born + `transactionTimeOut`, or its immunity time).
    first_check_at: i64,
    born_timestamp: i64,
    /// The op queue's head when it was prepared: no op before it can end this transaction.
    op_offset_at_prepare: i64,
}

/// The last ended transactions and how.
#[derive(Default)]
struct Outcomes {
    by_identity: HashMap<i64, Outcome>,
    order: VecDeque<i64>,
}

impl Outcomes {
    fn insert(&mut self, identity: i64, outcome: Outcome) {
        if self.by_identity.insert(identity, outcome).is_none() {
            self.order.push_back(identity);
        }
        while self.order.len() > REMEMBERED_OUTCOMES {
            if let Some(old) = self.order.pop_front() {
                self.by_identity.remove(&old);
            }
        }
    }
}

#[derive(Default)]
struct State {
    /// Transaction (its first half queue offset) -> where it stands.
    pending: BTreeMap<i64, Pending>,
    ended: Outcomes,
    /// The half and op queues' next offsets, as this service wrote them.
    next_half_offset: i64,
    next_op_offset: i64,
}

impl State {
    /// Where a rebuild may start reading the half and op queues: nothing before these is
    /// pending, or ends something pending (an op before a transaction's prepare cannot end it,
    /// and every copy of an ended transaction precedes the first of any pending one).
    fn progress(&self) -> (i64, i64) {
        let half = self.pending.values().map(|p| p.queue_offset).min();
        let op = self.pending.values().map(|p| p.op_offset_at_prepare).min();
        (
            half.unwrap_or(self.next_half_offset),
            op.unwrap_or(self.next_op_offset),
        )
    }
}

pub(crate) struct TransactionalMessageService {
    store: Arc<MessageStore>,
    /// Where the half, op and discard topics are registered on first use, as RocketMQ's
    /// bridge registers them (so they are in routes and `topicList`).
    topics: Arc<TopicConfigManager>,
    producers: Arc<ProducerManager>,
    offsets: Arc<ConsumerOffsetManager>,
    settings: TransactionSettings,
    broker_name: String,
    /// A lock: sends prepare, END_TRANSACTION ends and the check thread checks; each holds it
    /// across its puts, so a transaction ends once and the progress bounds stay true.
    state: Mutex<State>,
    thread: ServiceThread,
    started: AtomicBool,
    /// Spreads check-backs over a group's producers.
    turn: AtomicUsize,
}

impl TransactionalMessageService {
    pub(crate) fn new(
        store: Arc<MessageStore>,
        topics: Arc<TopicConfigManager>,
        producers: Arc<ProducerManager>,
        offsets: Arc<ConsumerOffsetManager>,
        settings: TransactionSettings,
        broker_name: String,
    ) -> Self {
        Self {
            store,
            topics,
            producers,
            offsets,
            settings,
            broker_name,
            state: Mutex::default(),
            thread: ServiceThread::new("transaction-check"),
            started: AtomicBool::new(false),
            turn: AtomicUsize::new(0),
        }
    }

    /// A master: rebuilds what is pending from the log, then checks every
    /// `transactionCheckInterval`. Once, however often called.
    pub(crate) fn start(self: &Arc<Self>) -> std::io::Result<()> {
        if self.started.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.recover();
        let service = self.clone();
        self.thread.start(move |waiter| service.run(&waiter))
    }

    /// Stops checking and records the progress; safe to call again.
    pub(crate) fn shutdown(&self) {
        self.thread.shutdown();
        if self.started.load(Ordering::Acquire) {
            self.record_progress();
        }
    }

    /// `asyncPrepareMessage`: stores `send` as a half message of `producer_group`.
    pub(crate) fn prepare(
        &self,
        send: &MessageDraft<'_>,
        producer_group: &str,
    ) -> Result<AppendResult, CommitLogError> {
        let half = bridge::half(send, producer_group);
        self.system_topic(HALF_TOPIC);
        let immunity = bridge::immunity_ms(send.properties);
        let mut st = lock(&self.state);
        let op_offset_at_prepare = st.next_op_offset;
        let result = self.store.put_now(&half.draft(send))?;
        st.next_half_offset = result.queue_offset + 1;
        st.pending.insert(
            result.queue_offset,
            Pending {
                queue_offset: result.queue_offset,
                commit_log_offset: result.offset as i64,
                first_check_at: send
                    .born_timestamp
                    .saturating_add(immunity.unwrap_or(self.settings.time_out.as_millis() as i64)),
                born_timestamp: send.born_timestamp,
                op_offset_at_prepare,
            },
        );
        Ok(result)
    }

    /// `selectTopicConfig` / `createTopicOfTranCheckMaxTime`: one of the transactions' own
    /// topics, registered with one queue when first written.
    pub(crate) fn system_topic(&self, topic: &str) {
        self.topics
            .create_in_send_back(topic, 1, perm::PERM_READ | perm::PERM_WRITE, 0);
    }

    /// The producers of each group, where check-backs go.
    pub(crate) fn producers(&self) -> &ProducerManager {
        &self.producers
    }

    /// Transactions waiting for their outcome.
    #[cfg(test)]
    pub(crate) fn pending_count(&self) -> usize {
        lock(&self.state).pending.len()
    }

    fn run(&self, waiter: &ServiceWaiter) {
        loop {
            let deadline = Instant::now() + self.settings.check_interval;
            if waiter.wait_for_running(Some(deadline)) == Woke::Stopped {
                break;
            }
            self.check_round(now_millis());
        }
    }

    /// `TransactionalMessageServiceImpl.check`: each transaction past its first check time is
    /// put back and checked, or, checked `transactionCheckMax` times (or older than the log
    /// keeps), discarded.
    pub(crate) fn check_round(&self, now: i64) {
        let due: Vec<i64> = lock(&self.state)
            .pending
            .iter()
            .filter(|(_, p)| p.first_check_at <= now)
            .map(|(identity, _)| *identity)
            .collect();
        for identity in due {
            if self.thread.is_stopped() {
                break;
            }
            if let Some((group, request)) = self.check_one(identity, now) {
                let turn = self.turn.fetch_add(1, Ordering::Relaxed);
                match self.producers.available_channel(&group, turn) {
                    Some(channel) => channel.send_oneway_request(request),
                    None => log::warn!(
                        "transaction check of {identity} not sent: no producer of group \
                         {group} is connected; checked again in {:?}",
                        self.settings.check_interval
                    ),
                }
            }
        }
        self.record_progress();
    }

    /// One transaction's check: the CHECK_TRANSACTION_STATE to send to its group, or `None`
    /// when it was discarded or is gone.
    fn check_one(&self, identity: i64, now: i64) -> Option<(String, RemotingCommand)> {
        let mut st = lock(&self.state);
        let pending = *st.pending.get(&identity)?;
        let record = u64::try_from(pending.commit_log_offset)
            .ok()
            .and_then(|o| self.store.look_message_by_offset(o));
        let Some(record) = record else {
            log::warn!(
                "transaction {identity}: its half message at {} is gone (retention); dropped",
                pending.commit_log_offset
            );
            st.pending.remove(&identity);
            st.ended.insert(identity, Outcome::Discarded);
            return None;
        };
        let r = record.view();
        let info = HalfInfo::of(&r)?;
        let too_old = now.saturating_sub(pending.born_timestamp)
            > self.settings.file_reserved.as_millis() as i64;
        if info.check_times >= self.settings.check_max || too_old {
            // `resolveDiscardMsg`, with an op so a rebuild does not find it pending again.
            self.system_topic(bridge::CHECK_MAX_TIME_TOPIC);
            self.system_topic(OP_TOPIC);
            let kept = bridge::discarded(&r);
            let op = Op::new(pending.queue_offset, identity);
            let drafts = [
                kept.draft(&bridge::as_draft(&r, HALF_TOPIC)),
                op.draft(self.store.store_host(), now),
            ];
            match self.store.put_batch(&drafts) {
                Ok(results) => {
                    log::warn!(
                        "transaction {identity} (msgId {}) of group {}: checked {} times without \
                         an outcome; discarded to {}",
                        info.uniq_key.as_deref().unwrap_or("?"),
                        info.producer_group,
                        info.check_times,
                        bridge::CHECK_MAX_TIME_TOPIC
                    );
                    st.next_op_offset = results[1].queue_offset + 1;
                    st.pending.remove(&identity);
                    st.ended.insert(identity, Outcome::Discarded);
                }
                Err(e) => log::warn!("transaction {identity}: discarding failed: {e}; retried"),
            }
            return None;
        }
        let copy = bridge::put_back(&r, &info);
        let appended = match self
            .store
            .put_now(&copy.draft(&bridge::as_draft(&r, HALF_TOPIC)))
        {
            Ok(a) => a,
            Err(e) => {
                log::warn!("transaction {identity}: putting it back for a check failed: {e}");
                return None;
            }
        };
        st.next_half_offset = appended.queue_offset + 1;
        if let Some(p) = st.pending.get_mut(&identity) {
            p.queue_offset = appended.queue_offset;
            p.commit_log_offset = appended.offset as i64;
        }
        drop(st);
        let copy_record = self.store.look_message_by_offset(appended.offset)?;
        let copy_view = copy_record.view();
        Some((
            info.producer_group.clone(),
            self.check_request(&copy_view, &info),
        ))
    }

    /// `sendCheckMessage`: CHECK_TRANSACTION_STATE for the copy just put back.
    fn check_request(&self, copy: &RecordView<'_>, info: &HalfInfo) -> RemotingCommand {
        let mut request = RemotingCommand::request(request_code::CHECK_TRANSACTION_STATE, 0);
        request.write_custom_header(&CheckTransactionStateRequestHeader {
            topic: Some(HALF_TOPIC.to_owned()),
            tran_state_table_offset: copy.queue_offset,
            commit_log_offset: copy.physical_offset,
            msg_id: info.uniq_key.clone(),
            transaction_id: info.uniq_key.clone(),
            offset_msg_id: Some(crate::commitlog::record::msg_id(
                &copy.store_host,
                copy.physical_offset,
            )),
            broker_name: Some(self.broker_name.clone()),
        });
        request.body = bridge::check_body(copy, info);
        request
    }

    /// The progress a rebuild starts from, in the consumer offsets (which slaves sync).
    fn record_progress(&self) {
        let (half, op) = lock(&self.state).progress();
        self.offsets
            .commit_offset(SYS_TRANS_GROUP, HALF_TOPIC, 0, half);
        self.offsets.commit_offset(SYS_TRANS_GROUP, OP_TOPIC, 0, op);
    }

    /// Rebuilds the pending transactions: every half message past the recorded progress,
    /// less those an op message past its progress ended.
    fn recover(&self) {
        let mut st = lock(&self.state);
        let mut copies: HashMap<i64, i64> = HashMap::new();
        let time_out = self.settings.time_out.as_millis() as i64;
        let op_from = self.start_of(OP_TOPIC);
        let half_from = self.start_of(HALF_TOPIC);
        st.next_half_offset = self.for_each_record(HALF_TOPIC, half_from, |queue_offset, r| {
            let Some(info) = HalfInfo::of(r) else {
                return;
            };
            copies.insert(queue_offset, info.identity);
            st.pending.insert(
                info.identity,
                Pending {
                    queue_offset,
                    commit_log_offset: r.physical_offset,
                    first_check_at: r
                        .born_timestamp
                        .saturating_add(info.immunity_ms.unwrap_or(time_out)),
                    born_timestamp: r.born_timestamp,
                    op_offset_at_prepare: op_from,
                },
            );
        });
        st.next_op_offset = self.for_each_record(OP_TOPIC, op_from, |_, r| {
            for half in bridge::op_offsets(r) {
                let identity = copies.get(&half).copied().unwrap_or(half);
                if st.pending.remove(&identity).is_some() {
                    st.ended.insert(identity, Outcome::EndedBefore);
                }
            }
        });
        if !st.pending.is_empty() {
            log::info!(
                "{} transactions wait for their producers' outcome",
                st.pending.len()
            );
        }
    }

    /// Calls `f` with each record of `topic`'s queue 0 from queue offset `from`, in order;
    /// returns the queue's next offset (0 for a queue never written).
    fn for_each_record(
        &self,
        topic: &str,
        from: i64,
        mut f: impl FnMut(i64, &RecordView<'_>),
    ) -> i64 {
        let Some(cq) = self.store.consume_queue(topic, 0) else {
            return 0;
        };
        let mut offset = from;
        loop {
            let entries = cq.get(offset, 256);
            let Some(&(last, _)) = entries.last() else {
                break;
            };
            for (queue_offset, entry) in entries {
                let record = u64::try_from(entry.commitlog_offset)
                    .ok()
                    .and_then(|o| self.store.look_message_by_offset(o));
                if let Some(record) = record {
                    f(queue_offset, &record.view());
                }
            }
            offset = last + 1;
        }
        cq.max_queue_offset()
    }

    /// The recorded progress in `topic`'s queue 0, within what the queue holds.
    fn start_of(&self, topic: &str) -> i64 {
        let recorded = self.offsets.query_offset(SYS_TRANS_GROUP, topic, 0);
        match self.store.consume_queue(topic, 0) {
            Some(cq) => recorded
                .unwrap_or(0)
                .clamp(cq.min_queue_offset(), cq.max_queue_offset()),
            None => 0,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
