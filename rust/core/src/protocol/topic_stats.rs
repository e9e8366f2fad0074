//! `TopicStatsTable`, GET_TOPIC_STATS_INFO's body: per queue of a topic on one broker, its min
//! and max offsets and when its last message was stored (`mqadmin topicStatus`,
//! `DefaultMQAdminExt.examineTopicStats`).

use super::json::write_json_string;
use super::lock_batch::MessageQueue;

/// `TopicOffset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TopicOffset {
    pub(crate) min_offset: i64,
    pub(crate) max_offset: i64,
    pub(crate) last_update_timestamp: i64,
}

/// fastjson's text of a `TopicStatsTable`: its `offsetTable` is keyed by `MessageQueue`
/// objects, written as objects (not JSON, which fastjson reads back).
pub(crate) fn encode_topic_stats(table: &[(MessageQueue, TopicOffset)]) -> Vec<u8> {
    let mut out = String::from("{\"offsetTable\":{");
    for (i, (mq, offset)) in table.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"brokerName\":");
        write_json_string(&mut out, &mq.broker_name, false);
        out.push_str(&format!(",\"queueId\":{},\"topic\":", mq.queue_id));
        write_json_string(&mut out, &mq.topic, false);
        out.push_str(&format!(
            "}}:{{\"lastUpdateTimestamp\":{},\"maxOffset\":{},\"minOffset\":{}}}",
            offset.last_update_timestamp, offset.max_offset, offset.min_offset
        ));
    }
    out.push_str("}}");
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
}
