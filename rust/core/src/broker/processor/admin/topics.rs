//! A topic's config as GET_TOPIC_CONFIG reads it, UPDATE_AND_CREATE_TOPIC's checks (its
//! attributes' among them), and DELETE_TOPIC_IN_BROKER (`mqadmin deleteTopic`, which then asks
//! the name servers too): the topic's config, its committed offsets and its consume queues go;
//! its records stay in the commit log until retention takes them, as in RocketMQ.

use crate::broker::attribute::{self, AttributeChange};
use crate::broker::consumer_offset::ConsumerOffsetManager;
use crate::broker::processor::answer::{system_error, with_body};
use crate::broker::topic_attributes::{refuse_unsupported, TopicMessageType, MESSAGE_TYPE};
use crate::broker::topic_config::{
    validate_topic, TopicConfigManager, AUTO_CREATE_TOPIC_KEY_TOPIC,
};
use crate::broker::BrokerSettings;
use crate::protocol::body::TopicConfig;
use crate::protocol::json::{to_json, JsonStyle};
use crate::remoting::header::{
    CreateTopicRequestHeader, DeleteTopicRequestHeader, GetTopicStatsInfoRequestHeader,
};
use crate::remoting::{response_code, RemotingCommand};
use crate::store::MessageStore;

/// `TopicValidator`'s system topics, which no operator may delete, and the prefix of the
/// topics it adds at runtime.
const SYSTEM_TOPICS: &[&str] = &[
    "TBW102",
    "SCHEDULE_TOPIC_XXXX",
    "BenchmarkTest",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRACE_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT",
];
const SYSTEM_TOPIC_PREFIX: &str = "rmq_sys_";

/// What the broker's own topics are: the system ones, and the topics named after its cluster
/// and itself, which RocketMQ adds to the system set.
pub(crate) struct ProtectedTopics<'a> {
    pub(crate) cluster_name: &'a str,
    pub(crate) broker_name: &'a str,
}

impl ProtectedTopics<'_> {
    fn contains(&self, topic: &str) -> bool {
        SYSTEM_TOPICS.contains(&topic)
            || topic.starts_with(SYSTEM_TOPIC_PREFIX)
            || topic == self.cluster_name
            || topic == self.broker_name
    }
}

/// DELETE_TOPIC_IN_BROKER. True in the second field when a topic was deleted, so the name
/// servers hear of it at once.
pub(crate) fn delete(
    topics: &TopicConfigManager,
    offsets: &ConsumerOffsetManager,
    store: &MessageStore,
    protected: &ProtectedTopics<'_>,
    request: &RemotingCommand,
) -> (RemotingCommand, bool) {
    let refuse = |code, remark: String| {
        let response = RemotingCommand::response_to(request, code, Some(remark));
        (response, false)
    };
    let header: DeleteTopicRequestHeader = match request.decode_custom_header() {
        Ok(h) => h,
        Err(e) => return (system_error(request, e), false),
    };
    let topic = header.topic.as_str();
    if topic.trim().is_empty() {
        return refuse(
            response_code::INVALID_PARAMETER,
            "The specified topic is blank.".into(),
        );
    }
    if protected.contains(topic) {
        return refuse(
            response_code::INVALID_PARAMETER,
            format!("The topic[{topic}] is conflict with system topic."),
        );
    }
    let deleted = match topics.delete(topic) {
        Ok(deleted) => deleted,
        Err(e) => return refuse(response_code::SYSTEM_ERROR, e.to_string()),
    };
    offsets.remove_where(|t, _| t == topic);
    if let Err(e) = store.delete_topic(topic) {
        return refuse(
            response_code::SYSTEM_ERROR,
            format!("topic {topic}: its config is deleted but its consume queues are not: {e}"),
        );
    }
    let response = RemotingCommand::response_to(request, response_code::SUCCESS, None);
    (response, deleted)
}

/// The topic UPDATE_AND_CREATE_TOPIC asks for and the changes its `attributes` make, or why
/// it is refused (`updateAndCreateTopic`'s checks, and rocketha's `maxTopicQueueNums`).
pub(crate) fn to_create(
    request: &RemotingCommand,
    settings: &BrokerSettings,
) -> Result<(TopicConfig, Vec<AttributeChange>), RemotingCommand> {
    let max = settings.max_topic_queue_nums;
    let refuse = |code, remark: String| RemotingCommand::response_to(request, code, Some(remark));
    let header: CreateTopicRequestHeader = match request.decode_custom_header() {
        Ok(h) => h,
        Err(e) => return Err(refuse(response_code::SYSTEM_ERROR, e.to_string())),
    };
    if let Err(why) = validate_topic(&header.topic) {
        return Err(refuse(response_code::SYSTEM_ERROR, why));
    }
    if header.topic == header.default_topic || header.topic == AUTO_CREATE_TOPIC_KEY_TOPIC {
        return Err(refuse(
            response_code::SYSTEM_ERROR,
            format!(
                "The specified topic {} is conflict with AUTO_CREATE_TOPIC_KEY_TOPIC.",
                header.topic
            ),
        ));
    }
    if header.read_queue_nums < 1 || header.write_queue_nums < 1 {
        return Err(refuse(
            response_code::SYSTEM_ERROR,
            format!(
                "topic {}: readQueueNums {} and writeQueueNums {} must be at least 1",
                header.topic, header.read_queue_nums, header.write_queue_nums
            ),
        ));
    }
    if header.read_queue_nums > max || header.write_queue_nums > max {
        return Err(refuse(
            response_code::SYSTEM_ERROR,
            format!(
                "topic {}: readQueueNums {} and writeQueueNums {} may be at most {max} \
                 (maxTopicQueueNums): each queue is a consume queue this broker maps and a \
                 queue every client of the topic holds",
                header.topic, header.read_queue_nums, header.write_queue_nums
            ),
        ));
    }
    let changes = attributes(&header, settings)
        .map_err(|(code, why)| refuse(code, format!("topic {}: {why}", header.topic)))?;
    let config = TopicConfig {
        topic_name: header.topic.clone(),
        read_queue_nums: header.read_queue_nums,
        write_queue_nums: header.write_queue_nums,
        perm: header.perm,
        topic_filter_type: header.topic_filter_type,
        topic_sys_flag: header.topic_sys_flag.unwrap_or(0),
        order: header.order,
        ..TopicConfig::default()
    };
    Ok((config, changes))
}

/// The header's `attributes` (`+message.type=FIFO,-reserve.time`), read and checked as far
/// as the topic's current ones are not needed: RocketMQ's format, MIXED only when
/// `enableMixedMessageType`, no value this broker would not act on. The response code and
/// the remark otherwise.
fn attributes(
    header: &CreateTopicRequestHeader,
    settings: &BrokerSettings,
) -> Result<Vec<AttributeChange>, (i32, String)> {
    let text = header.attributes.as_deref().unwrap_or("");
    let changes =
        attribute::parse(text).map_err(|e| (response_code::SYSTEM_ERROR, e.to_string()))?;
    let mixed = TopicMessageType::Mixed.name();
    if !settings.enable_mixed_message_type
        && changes.contains(&AttributeChange::Set(MESSAGE_TYPE.into(), mixed.into()))
    {
        return Err((
            response_code::INVALID_PARAMETER,
            format!(
                "MIXED message type is not supported. ({MESSAGE_TYPE}={mixed} needs the \
                 broker's enableMixedMessageType=true)"
            ),
        ));
    }
    refuse_unsupported(&changes).map_err(|e| (response_code::SYSTEM_ERROR, e.to_string()))?;
    Ok(changes)
}

/// GET_TOPIC_CONFIG (`AdminBrokerProcessor.getTopicConfig`, what 5.x's `examineTopicStats`
/// asks first): the topic's config as `TopicConfigAndQueueMapping`, with no static-topic
/// mapping (rocketha has no logic queues).
pub(crate) fn topic_config(
    topics: &TopicConfigManager,
    request: &RemotingCommand,
) -> RemotingCommand {
    let h: GetTopicStatsInfoRequestHeader = match request.decode_custom_header() {
        Ok(h) => h,
        Err(e) => return system_error(request, e),
    };
    match topics.select(&h.topic) {
        Some(config) => with_body(request, to_json(&config, JsonStyle::Fastjson).into_bytes()),
        None => RemotingCommand::response_to(
            request,
            response_code::TOPIC_NOT_EXIST,
            Some(format!("No topic in this broker. topic: {}", h.topic)),
        ),
    }
}

#[cfg(test)]
mod tests {
    use crate::broker::controller::tests::{client, create_topic, start, TIMEOUT};
    use crate::broker::{BrokerControllerConfig, BrokerSettings};
    use crate::remoting::header::GetTopicStatsInfoRequestHeader;
    use crate::remoting::{request_code, response_code, RemotingClient, RemotingCommand};

    /// UPDATE_AND_CREATE_TOPIC as `mqadmin updateTopic -a` sends it.
    fn create_with(c: &mut RemotingClient, topic: &str, attributes: &str) -> RemotingCommand {
        let mut request = create_topic(topic, 4);
        request
            .ext_fields
            .insert("attributes".into(), attributes.into());
        c.invoke(request, TIMEOUT).unwrap()
    }

    fn json(response: &RemotingCommand) -> serde_json::Value {
        assert_eq!(
            response.code,
            response_code::SUCCESS,
            "{:?}",
            response.remark
        );
        serde_json::from_slice(&response.body).unwrap()
    }

    fn topic_config(c: &mut RemotingClient, topic: &str) -> serde_json::Value {
        let mut request = RemotingCommand::request(request_code::GET_TOPIC_CONFIG, 0);
        request.write_custom_header(&GetTopicStatsInfoRequestHeader {
            topic: topic.into(),
        });
        json(&c.invoke(request, TIMEOUT).unwrap())
    }

    #[test]
    fn a_topics_attributes_are_set_read_and_synced_as_rocketmqs_are() {
        let b = start(BrokerControllerConfig::default(), 0, None);
        let mut c = client(b.controller.local_addr());
        let r = create_with(&mut c, "Later", "+message.type=DELAY");
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
        let config = topic_config(&mut c, "Later");
        assert_eq!(
            config["attributes"],
            serde_json::json!({"message.type": "DELAY"})
        );
        assert_eq!(config["writeQueueNums"], 4);
        // What a slave syncs.
        let all = RemotingCommand::request(request_code::GET_ALL_TOPIC_CONFIG, 0);
        let all = json(&c.invoke(all, TIMEOUT).unwrap());
        assert_eq!(
            all["topicConfigTable"]["Later"]["attributes"]["message.type"],
            "DELAY"
        );
        // `mqadmin updateTopic` without `-a` keeps them.
        let r = c.invoke(create_topic("Later", 8), TIMEOUT).unwrap();
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
        let config = topic_config(&mut c, "Later");
        assert_eq!(config["attributes"]["message.type"], "DELAY");
        assert_eq!(config["writeQueueNums"], 8);
    }

    #[test]
    fn a_bad_attribute_is_refused_naming_it_and_changes_nothing() {
        let b = start(BrokerControllerConfig::default(), 0, None);
        let mut c = client(b.controller.local_addr());
        assert_eq!(create_with(&mut c, "Fifo", "+message.type=FIFO").code, 0);
        for (attributes, code, remark) in [
            (
                "+message.type=LATER",
                response_code::SYSTEM_ERROR,
                "topic Fifo: attribute message.type=LATER: value is not in set: [UNSPECIFIED, \
                 NORMAL, FIFO, DELAY, TRANSACTION, MIXED]",
            ),
            (
                "+colour=red",
                response_code::SYSTEM_ERROR,
                "topic Fifo: unsupported key: colour (supported: cleanup.policy, message.type, \
                 queue.type, reserve.time)",
            ),
            (
                "+queue.type=SimpleCQ",
                response_code::SYSTEM_ERROR,
                "topic Fifo: attempt to update an unchangeable attribute. key: queue.type",
            ),
            (
                "message.type=DELAY",
                response_code::SYSTEM_ERROR,
                "topic Fifo: add/alter attribute format is wrong: message.type=DELAY (write \
                 +key=value)",
            ),
            (
                "+message.type=MIXED",
                response_code::INVALID_PARAMETER,
                "topic Fifo: MIXED message type is not supported. (message.type=MIXED needs \
                 the broker's enableMixedMessageType=true)",
            ),
            (
                "+reserve.time=24",
                response_code::SYSTEM_ERROR,
                "topic Fifo: attribute reserve.time=24 is not supported by this broker: Update \
                 topic reserveTime not supported",
            ),
        ] {
            let r = create_with(&mut c, "Fifo", attributes);
            assert_eq!(r.code, code, "{attributes}: {:?}", r.remark);
            let got = r.remark.unwrap_or_default();
            assert!(got.starts_with(remark), "{attributes}: {got}");
        }
        assert_eq!(
            topic_config(&mut c, "Fifo")["attributes"],
            serde_json::json!({"message.type": "FIFO"})
        );
    }

    #[test]
    fn mixed_topics_are_created_when_enable_mixed_message_type() {
        let config = BrokerControllerConfig {
            settings: BrokerSettings {
                enable_mixed_message_type: true,
                ..BrokerSettings::default()
            },
            ..BrokerControllerConfig::default()
        };
        let b = start(config, 0, None);
        let mut c = client(b.controller.local_addr());
        let r = create_with(&mut c, "Any", "+message.type=MIXED");
        assert_eq!(r.code, response_code::SUCCESS, "{:?}", r.remark);
        assert_eq!(
            topic_config(&mut c, "Any")["attributes"]["message.type"],
            "MIXED"
        );
    }
}
