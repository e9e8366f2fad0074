//! RocketMQ 5's `TopicAttributes` (the attributes a topic may hold) and `TopicMessageType`
//! (what its `message.type` says it carries), with the values rocketha refuses to set because
//! it would not act on them.

use std::fmt;

use super::attribute::{Attribute, AttributeChange, AttributeError, AttributeKind};
use crate::protocol::body::TopicConfig;

/// `TOPIC_MESSAGE_TYPE_ATTRIBUTE`'s name.
pub(crate) const MESSAGE_TYPE: &str = "message.type";
const QUEUE_TYPE: &str = "queue.type";
const CLEANUP_POLICY: &str = "cleanup.policy";
const RESERVE_TIME: &str = "reserve.time";

/// `TopicAttributes.ALL`.
pub(crate) const TOPIC_ATTRIBUTES: &[Attribute] = &[
    Attribute {
        name: CLEANUP_POLICY,
        changeable: false,
        kind: AttributeKind::Enum(&["DELETE", "COMPACTION"]),
    },
    Attribute {
        name: MESSAGE_TYPE,
        changeable: true,
        kind: AttributeKind::Enum(&TopicMessageType::NAMES),
    },
    Attribute {
        name: QUEUE_TYPE,
        changeable: false,
        kind: AttributeKind::Enum(&["BatchCQ", "SimpleCQ"]),
    },
    // The tiered store's retention of the topic, in hours; -1 is its default.
    Attribute {
        name: RESERVE_TIME,
        changeable: true,
        kind: AttributeKind::LongRange {
            min: -1,
            max: i64::MAX,
        },
    },
];

/// `TopicMessageType`: the messages a topic is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TopicMessageType {
    Unspecified,
    Normal,
    Fifo,
    Delay,
    Transaction,
    /// Takes any message; created only when `enableMixedMessageType`.
    Mixed,
}

impl TopicMessageType {
    const ALL: [Self; 6] = [
        Self::Unspecified,
        Self::Normal,
        Self::Fifo,
        Self::Delay,
        Self::Transaction,
        Self::Mixed,
    ];
    /// `topicMessageTypeSet`: the names of [`Self::ALL`].
    const NAMES: [&'static str; 6] = [
        "UNSPECIFIED",
        "NORMAL",
        "FIFO",
        "DELAY",
        "TRANSACTION",
        "MIXED",
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Unspecified => "UNSPECIFIED",
            Self::Normal => "NORMAL",
            Self::Fifo => "FIFO",
            Self::Delay => "DELAY",
            Self::Transaction => "TRANSACTION",
            Self::Mixed => "MIXED",
        }
    }

    /// `TopicConfig.getTopicMessageType`: NORMAL for a topic without the attribute. A value
    /// that is none of the names (a hand-edited `topics.json`: every update is checked) reads
    /// as UNSPECIFIED, which no message matches, where RocketMQ's `valueOf` would throw.
    pub(crate) fn of_topic(config: &TopicConfig) -> Self {
        let Some(value) = config.attributes.get(MESSAGE_TYPE) else {
            return Self::Normal;
        };
        let named = Self::ALL.into_iter().find(|t| t.name() == value);
        named.unwrap_or(Self::Unspecified)
    }
}

impl fmt::Display for TopicMessageType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The values of RocketMQ's attributes that only its other stores act on: a topic set so
/// would look batched, compacted or tiered to its operator, and be none of them here.
/// Already held (a RocketMQ broker's `topics.json`), they stay as they are.
pub(crate) fn refuse_unsupported(changes: &[AttributeChange]) -> Result<(), AttributeError> {
    for change in changes {
        let AttributeChange::Set(key, value) = change else {
            continue;
        };
        let why = match (key.as_str(), value.as_str()) {
            (QUEUE_TYPE, "BatchCQ") => {
                "rocketha's consume queues are SimpleCQ (it has no BatchConsumeQueue)"
            }
            (CLEANUP_POLICY, "COMPACTION") => {
                "rocketha has no compaction store: its commit log is cleaned by time"
            }
            // RocketMQ's words when the store is not the tiered one.
            (RESERVE_TIME, _) => {
                "Update topic reserveTime not supported (it is the tiered store's retention, \
                 and rocketha has no tiered store)"
            }
            _ => continue,
        };
        return Err(AttributeError::NotSupported {
            key: key.clone(),
            value: value.clone(),
            why,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::attribute::parse;

    #[test]
    fn a_topic_without_the_attribute_is_normal() {
        let mut topic = TopicConfig::default();
        assert_eq!(TopicMessageType::of_topic(&topic), TopicMessageType::Normal);
        for (name, kind) in TopicMessageType::NAMES.iter().zip(TopicMessageType::ALL) {
            topic.attributes.insert(MESSAGE_TYPE.into(), (*name).into());
            assert_eq!(TopicMessageType::of_topic(&topic), kind);
            assert_eq!(kind.to_string(), *name);
        }
        topic.attributes.insert(MESSAGE_TYPE.into(), "delay".into());
        assert_eq!(
            TopicMessageType::of_topic(&topic),
            TopicMessageType::Unspecified
        );
    }

    #[test]
    fn what_only_rocketmqs_other_stores_do_is_refused() {
        for ok in [
            "+queue.type=SimpleCQ",
            "+cleanup.policy=DELETE",
            "-reserve.time",
        ] {
            assert_eq!(refuse_unsupported(&parse(ok).unwrap()), Ok(()), "{ok}");
        }
        let refused = |text: &str| {
            refuse_unsupported(&parse(text).unwrap())
                .unwrap_err()
                .to_string()
        };
        assert!(refused("+message.type=FIFO,+queue.type=BatchCQ")
            .starts_with("attribute queue.type=BatchCQ is not supported by this broker"));
        assert!(refused("+cleanup.policy=COMPACTION").contains("no compaction store"));
        assert!(refused("+reserve.time=24").contains("Update topic reserveTime not supported"));
    }
}
