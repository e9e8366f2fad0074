//! How a pop reads one queue: the group's offset (initialised as `getInitOffset` does), the
//! messages from there, the checkpoint stored or, for an orderly pop, the queue's order info
//! updated, then the offset moved; a retried message re-encoded under the topic popped.

use super::*;
use crate::broker::transaction::bridge::as_draft;

impl PopMessageProcessor {
    pub(super) fn pop_from_topic(
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
    pub(super) fn pop_from_queue(
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
            if let Err(e) = put_check_point(&self.store, &self.revive_topic, pop.revive_qid, &ck) {
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

    /// Whether a record a held pop could take came since it read the queues.
    pub(super) fn anything_to_pop(&self, pop: &PopRequest, topic: &TopicConfig) -> bool {
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
        properties: &properties,
        ..as_draft(&r, topic)
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
