//! `ExtraInfoUtil`: the `POP_CK` extra info a popped message carries back in its ack, and the
//! per-queue offset lists of a pop's response header, in RocketMQ's text formats.
//!
//! Extra info: `ckQueueOffset popTime invisibleTime reviveQid retry brokerName queueId
//! queueOffset`, space-separated, `retry` being 0 for the topic, 1 for its pop retry topic
//! (`%RETRY%group_topic`) and 2 for the v2 one (`%RETRY%group+topic`).

use super::{pop_retry_topic_v1, pop_retry_topic_v2, POP_RETRY_SEPARATOR_V2};
use crate::protocol::RETRY_GROUP_TOPIC_PREFIX;

/// An extra info taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExtraInfo {
    pub(crate) ck_queue_offset: i64,
    pub(crate) pop_time: i64,
    pub(crate) invisible_time: i64,
    pub(crate) revive_qid: i32,
    pub(crate) retry: String,
    pub(crate) broker_name: String,
    /// Absent in extra info older clients build.
    pub(crate) queue_id: Option<i32>,
}

impl ExtraInfo {
    /// Parses the first six fields every client sends; the error names the field.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let fields: Vec<&str> = text.split(' ').collect();
        let field = |i: usize, name: &str| {
            fields.get(i).copied().ok_or_else(|| {
                format!(
                    "extraInfo {text:?} has {} fields, no {name} (field {})",
                    fields.len(),
                    i + 1
                )
            })
        };
        let number = |i: usize, name: &str| -> Result<i64, String> {
            let f = field(i, name)?;
            f.parse()
                .map_err(|_| format!("extraInfo {text:?}: {name} {f:?} is not a number"))
        };
        let revive_qid = number(3, "reviveQid")?;
        Ok(Self {
            ck_queue_offset: number(0, "ckQueueOffset")?,
            pop_time: number(1, "popTime")?,
            invisible_time: number(2, "invisibleTime")?,
            revive_qid: i32::try_from(revive_qid)
                .map_err(|_| format!("extraInfo {text:?}: reviveQid {revive_qid} out of range"))?,
            retry: field(4, "retry")?.to_owned(),
            broker_name: field(5, "brokerName")?.to_owned(),
            queue_id: fields.get(6).and_then(|q| q.parse().ok()),
        })
    }
}

/// `getRealTopic(topic, cid, retry)`.
pub(crate) fn real_topic(topic: &str, group: &str, retry: &str) -> String {
    match retry {
        "1" => pop_retry_topic_v1(topic, group),
        "2" => pop_retry_topic_v2(topic, group),
        _ => topic.to_owned(),
    }
}

/// `getRetry`: 0, 1 or 2 for a topic, its pop retry topic, its v2 pop retry topic.
pub(crate) fn retry_flag(topic: &str) -> &'static str {
    if is_pop_retry_topic_v2(topic) {
        "2"
    } else if topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
        "1"
    } else {
        "0"
    }
}

/// `KeyBuilder.isPopRetryTopicV2`.
pub(crate) fn is_pop_retry_topic_v2(topic: &str) -> bool {
    topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) && topic.contains(POP_RETRY_SEPARATOR_V2)
}

/// `buildExtraInfo` with the message's queue offset (what the broker writes into a retried
/// message's `POP_CK`; the client builds the same for the others from the response header).
#[allow(clippy::too_many_arguments)]
pub(crate) fn build(
    ck_queue_offset: i64,
    pop_time: i64,
    invisible_time: i64,
    revive_qid: i32,
    topic: &str,
    broker_name: &str,
    queue_id: i32,
    queue_offset: i64,
) -> String {
    format!(
        "{ck_queue_offset} {pop_time} {invisible_time} {revive_qid} {} {broker_name} {queue_id} \
         {queue_offset}",
        retry_flag(topic)
    )
}

/// A pop response's `startOffsetInfo`, `msgOffsetInfo` and `orderCountInfo`: one entry per
/// queue popped, `;`-separated.
#[derive(Debug, Default)]
pub(crate) struct OffsetInfo {
    pub(crate) start_offsets: String,
    pub(crate) msg_offsets: String,
    pub(crate) order_counts: String,
}

impl OffsetInfo {
    /// `buildStartOffsetInfo` and `buildMsgOffsetInfo` for one queue.
    pub(crate) fn add(&mut self, topic: &str, queue_id: i32, start_offset: i64, offsets: &[i64]) {
        let retry = retry_flag(topic);
        for s in [&mut self.start_offsets, &mut self.msg_offsets] {
            if !s.is_empty() {
                s.push(';');
            }
        }
        self.start_offsets
            .push_str(&format!("{retry} {queue_id} {start_offset}"));
        let list: Vec<String> = offsets.iter().map(i64::to_string).collect();
        self.msg_offsets
            .push_str(&format!("{retry} {queue_id} {}", list.join(",")));
    }
}

impl OffsetInfo {
    /// `buildQueueOffsetOrderCountInfo` for each message handed out before (`retry
    /// qo<queueId>%<offset> count`), then `buildQueueIdOrderCountInfo` with the least count
    /// (0 when a message is new), which older clients read.
    pub(crate) fn add_order_counts(
        &mut self,
        topic: &str,
        queue_id: i32,
        counts: &std::collections::BTreeMap<i64, i32>,
        messages: usize,
    ) {
        let retry = retry_flag(topic);
        let mut push = |entry: String| {
            if !self.order_counts.is_empty() {
                self.order_counts.push(';');
            }
            self.order_counts.push_str(&entry);
        };
        for (offset, count) in counts {
            push(format!("{retry} qo{queue_id}%{offset} {count}"));
        }
        let least = if counts.len() == messages {
            counts.values().copied().min().unwrap_or(0)
        } else {
            0
        };
        push(format!("{retry} {queue_id} {least}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_info_round_trips_in_rocketmqs_format() {
        let text = build(7, 1000, 30_000, 3, "%RETRY%G_T", "broker-a", 0, 9);
        assert_eq!(text, "7 1000 30000 3 1 broker-a 0 9");
        let info = ExtraInfo::parse(&text).unwrap();
        assert_eq!(info.ck_queue_offset, 7);
        assert_eq!(info.revive_qid, 3);
        assert_eq!(info.queue_id, Some(0));
        assert_eq!(real_topic("T", "G", &info.retry), "%RETRY%G_T");
        assert_eq!(real_topic("T", "G", "2"), "%RETRY%G+T");
    }

    #[test]
    fn a_short_or_garbled_extra_info_names_the_field() {
        let e = ExtraInfo::parse("7 1000 30000").unwrap_err();
        assert!(e.contains("reviveQid"), "{e}");
        let e = ExtraInfo::parse("7 x 30000 1 0 b").unwrap_err();
        assert!(e.contains("popTime \"x\""), "{e}");
    }

    #[test]
    fn offset_info_lists_each_queue() {
        let mut info = OffsetInfo::default();
        info.add("T", 1, 5, &[5, 6]);
        info.add("%RETRY%G_T", 0, 0, &[0]);
        assert_eq!(info.start_offsets, "0 1 5;1 0 0");
        assert_eq!(info.msg_offsets, "0 1 5,6;1 0 0");
        info.add_order_counts("T", 2, &[(7, 1)].into(), 2);
        assert_eq!(info.order_counts, "0 qo2%7 1;0 2 0");
    }
}
