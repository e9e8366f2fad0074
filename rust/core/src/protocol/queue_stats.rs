//! The admin bodies keyed by `MessageQueue`: `TopicStatsTable` (GET_TOPIC_STATS_INFO: per queue
//! of a topic on one broker, its min and max offsets and when its last message was stored;
//! `mqadmin topicStatus`) and `ConsumeStats` (GET_CONSUME_STATS: per queue, the broker's and
//! a group's offsets; `mqadmin consumerProgress`) and `ResetOffsetBody` (a group's offsets as
//! an operator reset them; `mqadmin resetOffsetByTime`). fastjson writes such a map with the queues
//! as object keys, which is not JSON but what the Java client reads back.

use super::json::write_json_string;
use super::lock_batch::MessageQueue;

/// `TopicOffset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TopicOffset {
    pub(crate) min_offset: i64,
    pub(crate) max_offset: i64,
    pub(crate) last_update_timestamp: i64,
}

/// `OffsetWrapper`: a group's progress in one queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OffsetWrapper {
    pub(crate) broker_offset: i64,
    pub(crate) consumer_offset: i64,
    pub(crate) pull_offset: i64,
    /// When the last message the group consumed was stored; 0 when none.
    pub(crate) last_timestamp: i64,
}

/// `"offsetTable":{{queue}:{fields},...}`, each value's fields already written.
fn offset_table<T>(out: &mut String, table: &[(MessageQueue, T)], value: impl Fn(&T) -> String) {
    out.push_str("\"offsetTable\":{");
    for (i, (mq, v)) in table.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"brokerName\":");
        write_json_string(out, &mq.broker_name, false);
        out.push_str(&format!(",\"queueId\":{},\"topic\":", mq.queue_id));
        write_json_string(out, &mq.topic, false);
        out.push_str("}:");
        out.push_str(&value(v));
    }
    out.push('}');
}

/// fastjson's text of a `TopicStatsTable`.
pub(crate) fn encode_topic_stats(table: &[(MessageQueue, TopicOffset)]) -> Vec<u8> {
    let mut out = String::from("{");
    offset_table(&mut out, table, |o| {
        format!(
            "{{\"lastUpdateTimestamp\":{},\"maxOffset\":{},\"minOffset\":{}}}",
            o.last_update_timestamp, o.max_offset, o.min_offset
        )
    });
    out.push('}');
    out.into_bytes()
}

/// fastjson's text of a `ConsumeStats` (4.9's `OffsetWrapper` has no `pullOffset`; fastjson
/// skips what a class does not have).
pub(crate) fn encode_consume_stats(table: &[(MessageQueue, OffsetWrapper)], tps: f64) -> Vec<u8> {
    let mut out = format!("{{\"consumeTps\":{tps:?},");
    offset_table(&mut out, table, |o| {
        format!(
            "{{\"brokerOffset\":{},\"consumerOffset\":{},\"lastTimestamp\":{},\"pullOffset\":{}}}",
            o.broker_offset, o.consumer_offset, o.last_timestamp, o.pull_offset
        )
    });
    out.push('}');
    out.into_bytes()
}

/// fastjson's text of a `ResetOffsetBody`: each queue's new offset.
pub(crate) fn encode_reset_offset(table: &[(MessageQueue, i64)]) -> Vec<u8> {
    let mut out = String::from("{");
    offset_table(&mut out, table, i64::to_string);
    out.push('}');
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_are_object_keys_as_fastjson_writes_them() {
        let mq = MessageQueue {
            topic: "T".into(),
            broker_name: "b\"1".into(),
            queue_id: 3,
        };
        let offset = TopicOffset {
            min_offset: 1,
            max_offset: 9,
            last_update_timestamp: 77,
        };
        let text = String::from_utf8(encode_topic_stats(&[(mq, offset)])).unwrap();
        assert_eq!(
            text,
            r#"{"offsetTable":{{"brokerName":"b\"1","queueId":3,"topic":"T"}:{"lastUpdateTimestamp":77,"maxOffset":9,"minOffset":1}}}"#
        );
        assert_eq!(encode_topic_stats(&[]), br#"{"offsetTable":{}}"#);
    }

    #[test]
    fn consume_stats_carry_the_tps_and_each_queues_offsets() {
        let mq = MessageQueue {
            topic: "T".into(),
            broker_name: "b".into(),
            queue_id: 0,
        };
        let offsets = OffsetWrapper {
            broker_offset: 10,
            consumer_offset: 4,
            pull_offset: 4,
            last_timestamp: 5,
        };
        let text = String::from_utf8(encode_consume_stats(&[(mq, offsets)], 0.0)).unwrap();
        assert_eq!(
            text,
            r#"{"consumeTps":0.0,"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":10,"consumerOffset":4,"lastTimestamp":5,"pullOffset":4}}}"#
        );
    }
}
