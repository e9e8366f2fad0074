//! RocketMQ's `TopicMessageTypeValidator`: a send whose message is not of the type its topic's
//! `message.type` says is refused, when `enableTopicMessageTypeCheck`.
//!
//! RocketMQ checks this in its proxy (`ProxyConfig.enableTopicMessageTypeCheck`, on by
//! default), in front of gRPC clients and of remoting clients sent through it; its broker
//! stores whatever a remoting client sends it. rocketha has no proxy, so the check is the
//! broker's, off by default as RocketMQ's broker has it: on, a delayed message to a topic
//! without `message.type` (which reads as NORMAL) is refused, which a RocketMQ broker never
//! does. The rule and the remark are the proxy's (`DefaultTopicMessageTypeValidator`, which
//! its remoting side answers with MESSAGE_ILLEGAL).

use crate::broker::topic_attributes::{TopicMessageType, MESSAGE_TYPE};
use crate::broker::BrokerSettings;
use crate::commitlog::record::{find_property, PROPERTY_DELAY_TIME_LEVEL};
use crate::commitlog::transaction::is_transactional;
use crate::protocol::body::TopicConfig;
use crate::protocol::{DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX};
use crate::remoting::header::SendMessageRequestHeader;
use crate::store::timer::TIMER_PROPERTIES;

/// `MessageConst.PROPERTY_TRANSFER_FLAG`: a message moved between brokers, not a producer's.
const PROPERTY_TRANSFER_FLAG: &str = "TRANSFER_FLAG";
/// `MessageConst.PROPERTY_SHARDING_KEY`: a FIFO message's group (gRPC's `messageGroup`).
const PROPERTY_SHARDING_KEY: &str = "__SHARDINGKEY";

/// `TopicMessageType.parseFromMessageProperty`.
fn message_type(properties: &[u8]) -> TopicMessageType {
    let has = |name: &str| find_property(properties, name).is_some();
    if is_transactional(properties) {
        TopicMessageType::Transaction
    } else if has(PROPERTY_DELAY_TIME_LEVEL) || TIMER_PROPERTIES.into_iter().any(has) {
        TopicMessageType::Delay
    } else if has(PROPERTY_SHARDING_KEY) {
        TopicMessageType::Fifo
    } else {
        TopicMessageType::Normal
    }
}

/// `validate`, for a producer's send to `topic` (its config found or just created): the
/// remark of a refusal, which the proxy answers with MESSAGE_ILLEGAL. A retry or dead-letter
/// topic, and a transferred message, are not checked, as the proxy's `SendMessageActivity`
/// skips them. A batch is checked by the properties its request carries, as the proxy's
/// remoting side does.
pub(super) fn validate(
    settings: &BrokerSettings,
    topic: &TopicConfig,
    header: &SendMessageRequestHeader,
) -> Result<(), String> {
    let properties = header.properties.as_deref().unwrap_or("").as_bytes();
    let name = header.topic.as_str();
    if !settings.enable_topic_message_type_check
        || find_property(properties, PROPERTY_TRANSFER_FLAG).is_some()
        || name.starts_with(RETRY_GROUP_TOPIC_PREFIX)
        || name.starts_with(DLQ_GROUP_TOPIC_PREFIX)
    {
        return Ok(());
    }
    let expected = TopicMessageType::of_topic(topic);
    let actual = message_type(properties);
    if actual == expected || expected == TopicMessageType::Mixed {
        return Ok(());
    }
    let held = topic.attributes.get(MESSAGE_TYPE).map_or_else(
        || format!("has no {MESSAGE_TYPE}, which reads as NORMAL"),
        |value| format!("has {MESSAGE_TYPE}={value}"),
    );
    Err(format!(
        "TopicMessageType validate failed, the expected type is {expected}, but actual type \
         is {actual}: topic {name} {held} (enableTopicMessageTypeCheck is true); send it to a \
         topic of its type, or set the topic's with `mqadmin updateTopic -a \
         +{MESSAGE_TYPE}={actual}`"
    ))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::tests::{broker, send_v2};
    use super::*;
    use crate::broker::attribute::parse;
    use crate::remoting::{response_code, RemotingCommand};

    #[test]
    fn a_messages_type_is_read_from_its_properties_as_rocketmq_reads_it() {
        let of = |text: &str| message_type(text.as_bytes());
        assert_eq!(of(""), TopicMessageType::Normal);
        assert_eq!(of("KEYS\u{1}k\u{2}"), TopicMessageType::Normal);
        assert_eq!(of("TRAN_MSG\u{1}true\u{2}"), TopicMessageType::Transaction);
        assert_eq!(of("TRAN_MSG\u{1}false\u{2}"), TopicMessageType::Normal);
        assert_eq!(of("DELAY\u{1}3\u{2}"), TopicMessageType::Delay);
        for timer in TIMER_PROPERTIES {
            assert_eq!(of(&format!("{timer}\u{1}5\u{2}")), TopicMessageType::Delay);
        }
        assert_eq!(of("__SHARDINGKEY\u{1}g\u{2}"), TopicMessageType::Fifo);
        assert_eq!(
            of("__SHARDINGKEY\u{1}g\u{2}DELAY\u{1}1\u{2}"),
            TopicMessageType::Delay,
            "delay before FIFO, as RocketMQ orders them"
        );
    }

    fn refusal(topic: &TopicConfig, properties: &str) -> Option<String> {
        let settings = BrokerSettings {
            enable_topic_message_type_check: true,
            ..BrokerSettings::default()
        };
        let request = send_v2(&topic.topic_name, 0, properties, b"x");
        let header = SendMessageRequestHeader::parse(&request).unwrap();
        validate(&settings, topic, &header).err()
    }

    fn topic_of(name: &str, message_type: Option<&str>) -> TopicConfig {
        let attributes: BTreeMap<_, _> = message_type
            .map(|t| (MESSAGE_TYPE.to_owned(), t.to_owned()))
            .into_iter()
            .collect();
        TopicConfig {
            topic_name: name.into(),
            attributes,
            ..TopicConfig::default()
        }
    }

    #[test]
    fn a_message_of_another_type_than_its_topics_is_refused() {
        let plain = topic_of("plain", None);
        let remark = refusal(&plain, "DELAY\u{1}2\u{2}").unwrap();
        assert!(
            remark.starts_with(
                "TopicMessageType validate failed, the expected type is NORMAL, but actual type \
                 is DELAY: topic plain has no message.type, which reads as NORMAL"
            ),
            "{remark}"
        );
        assert_eq!(refusal(&plain, ""), None);
        let delay = topic_of("later", Some("DELAY"));
        assert_eq!(refusal(&delay, "TIMER_DELAY_SEC\u{1}5\u{2}"), None);
        let remark = refusal(&delay, "").unwrap();
        assert!(
            remark.contains("topic later has message.type=DELAY"),
            "{remark}"
        );
        assert!(remark.contains("+message.type=NORMAL"), "{remark}");
        let mixed = topic_of("any", Some("MIXED"));
        for properties in ["", "DELAY\u{1}1\u{2}", "TRAN_MSG\u{1}true\u{2}"] {
            assert_eq!(
                refusal(&mixed, properties),
                None,
                "MIXED takes {properties:?}"
            );
        }
        let unspecified = topic_of("unset", Some("UNSPECIFIED"));
        assert!(
            refusal(&unspecified, "").is_some(),
            "no message is UNSPECIFIED"
        );
        let fifo = topic_of("fifo", Some("FIFO"));
        assert_eq!(refusal(&fifo, "__SHARDINGKEY\u{1}g\u{2}"), None);
    }

    #[test]
    fn retries_dead_letters_and_transfers_are_not_checked() {
        for name in ["%RETRY%group", "%DLQ%group"] {
            assert_eq!(
                refusal(&topic_of(name, None), "DELAY\u{1}3\u{2}"),
                None,
                "{name}"
            );
        }
        let plain = topic_of("plain", None);
        assert_eq!(
            refusal(&plain, "DELAY\u{1}3\u{2}TRANSFER_FLAG\u{1}true\u{2}"),
            None
        );
    }

    fn send(p: &super::super::SendMessageProcessor, request: &RemotingCommand) -> RemotingCommand {
        let remote = "10.1.2.3:40000".parse().unwrap();
        p.send_message(request, remote, |_| {})
            .expect("answered at once")
    }

    #[test]
    fn the_broker_checks_only_when_enabled() {
        let dir = tempfile::tempdir().unwrap();
        let p = broker(dir.path(), BrokerSettings::default(), 0);
        let delayed = send_v2("auto", 0, "DELAY\u{1}2\u{2}", b"x");
        assert_eq!(
            send(&p, &delayed).code,
            response_code::SUCCESS,
            "RocketMQ's broker takes it"
        );

        let dir = tempfile::tempdir().unwrap();
        let settings = BrokerSettings {
            enable_topic_message_type_check: true,
            ..BrokerSettings::default()
        };
        let p = broker(dir.path(), settings, 0);
        let answer = send(&p, &delayed);
        assert_eq!(answer.code, response_code::MESSAGE_ILLEGAL);
        assert!(
            answer
                .remark
                .as_deref()
                .unwrap_or("")
                .contains("topic auto has no message.type"),
            "an auto-created topic is NORMAL: {:?}",
            answer.remark
        );
        assert_eq!(p.store.max_offset(), 0, "nothing is written");
        let later = TopicConfig {
            topic_name: "later".into(),
            ..TopicConfig::default()
        };
        p.topics
            .update_or_create(later, &parse("+message.type=DELAY").unwrap())
            .unwrap();
        let to_later = send_v2("later", 0, "DELAY\u{1}2\u{2}", b"x");
        assert_eq!(send(&p, &to_later).code, response_code::SUCCESS);
        assert_eq!(
            send(&p, &send_v2("auto", 0, "", b"x")).code,
            response_code::SUCCESS
        );
    }
}
