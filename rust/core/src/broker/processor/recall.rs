//! RocketMQ 5.5's `RecallMessageProcessor`: RECALL_MESSAGE cancels a timer message not
//! delivered yet, by the recall handle its send answered. The handle (`RecallMessageHandle`
//! v1: `v1 TOPIC BROKER TIME UNIQ_KEY`, base64url) names the message's slot; the recall is a
//! delete mark put in that slot (`TIMER_DEL_UNIQKEY`), so the dequeue drops the message.

use std::sync::Arc;

use base64::engine::general_purpose::URL_SAFE;
use base64::Engine;

use super::answer::{success_with, system_error};
use crate::broker::topic_config::TopicConfigManager;
use crate::broker::BrokerSettings;
use crate::commitlog::record::{self, find_property, MessageDraft, RecordView};
use crate::protocol::now_millis;
use crate::remoting::header::{
    CustomHeader, RecallMessageRequestHeader, RecallMessageResponseHeader,
};
use crate::remoting::{
    request_code, response_code, RemotingCommand, RequestContext, RequestProcessor,
};
use crate::store::schedule::PROPERTY_REAL_TOPIC;
use crate::store::timer::{
    PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DEL_UNIQKEY, PROPERTY_TIMER_OUT_MS,
    PROPERTY_UNIQ_KEY, TIMER_TOPIC,
};
use crate::store::MessageStore;

/// The codes it answers.
pub(crate) const CODES: &[i32] = &[request_code::RECALL_MESSAGE];

/// The tag of a recall's delete mark.
const RECALL_MESSAGE_TAG: &str = "_RECALL_TAG_";
const VERSION_1: &str = "v1";

/// `RecallMessageHandle.HandleV1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecallHandle {
    pub(crate) topic: String,
    pub(crate) broker_name: String,
    pub(crate) timestamp: String,
    pub(crate) message_id: String,
}

impl RecallHandle {
    /// `attachRecallHandle`: the handle of a send stored in the timer topic (its slot, one
    /// past `TIMER_OUT_MS`, lands in the same slot again); none for other sends, or a retry.
    pub(crate) fn of_stored(m: &RecordView<'_>, broker_name: &str) -> Option<Self> {
        if m.topic != TIMER_TOPIC.as_bytes() {
            return None;
        }
        let text = |name| {
            find_property(m.properties, name).map(|v| String::from_utf8_lossy(v).into_owned())
        };
        let topic = text(PROPERTY_REAL_TOPIC).filter(|t| !t.starts_with("%RETRY%"))?;
        let out: i64 = text(PROPERTY_TIMER_OUT_MS)?.parse().ok()?;
        Some(Self {
            topic,
            broker_name: broker_name.to_owned(),
            timestamp: (out + 1).to_string(),
            message_id: text(PROPERTY_UNIQ_KEY)?,
        })
    }

    pub(crate) fn encode(&self) -> String {
        let raw = [
            VERSION_1,
            &self.topic,
            &self.broker_name,
            &self.timestamp,
            &self.message_id,
        ]
        .join(" ");
        URL_SAFE.encode(raw)
    }

    pub(crate) fn decode(handle: &str) -> Result<Self, String> {
        let invalid = || "recall handle is invalid".to_owned();
        let raw = URL_SAFE.decode(handle.trim()).map_err(|_| invalid())?;
        let raw = String::from_utf8(raw).map_err(|_| invalid())?;
        let items: Vec<&str> = raw.split(' ').collect();
        if items.len() < 5 || items[0] != VERSION_1 {
            return Err(invalid());
        }
        Ok(Self {
            topic: items[1].to_owned(),
            broker_name: items[2].to_owned(),
            timestamp: items[3].to_owned(),
            message_id: items[4].to_owned(),
        })
    }
}

pub(crate) struct RecallMessageProcessor {
    pub(crate) store: Arc<MessageStore>,
    pub(crate) topics: Arc<TopicConfigManager>,
    pub(crate) settings: Arc<BrokerSettings>,
}

impl RequestProcessor for RecallMessageProcessor {
    fn process(&self, request: RemotingCommand, ctx: &RequestContext) -> Option<RemotingCommand> {
        Some(self.recall(&request, ctx).unwrap_or_else(|(code, remark)| {
            RemotingCommand::response_to(&request, code, Some(remark))
        }))
    }
}

impl RecallMessageProcessor {
    fn recall(
        &self,
        request: &RemotingCommand,
        ctx: &RequestContext,
    ) -> Result<RemotingCommand, (i32, String)> {
        let s = &self.settings;
        if !s.recall_message_enable {
            return Err((
                response_code::NO_PERMISSION,
                "recall failed, operation is forbidden (recallMessageEnable=false)".into(),
            ));
        }
        if s.is_slave {
            return Err((
                response_code::SLAVE_NOT_AVAILABLE,
                "recall failed, broker service not available: this broker is a slave".into(),
            ));
        }
        let header = RecallMessageRequestHeader::from_ext_fields(&request.ext_fields)
            .map_err(|e| (response_code::SYSTEM_ERROR, e.to_string()))?;
        if self.topics.select(&header.topic).is_none() {
            return Err((
                response_code::TOPIC_NOT_EXIST,
                format!("recall failed, the topic[{}] not exist", header.topic),
            ));
        }
        let illegal = |remark: String| (response_code::ILLEGAL_OPERATION, remark);
        let handle = RecallHandle::decode(&header.recall_handle).map_err(illegal)?;
        if handle.topic != header.topic {
            return Err(illegal(format!(
                "recall failed, topic not match: the handle is of topic {}, not {}",
                handle.topic, header.topic
            )));
        }
        if handle.broker_name != s.broker_name {
            return Err(illegal(format!(
                "recall failed, broker service not available: the handle is of broker {}, \
                 this is {}",
                handle.broker_name, s.broker_name
            )));
        }
        let left = handle
            .timestamp
            .parse::<i64>()
            .map_or(-1, |t| t - now_millis());
        let max_ms = self
            .store
            .config()
            .timer
            .max_delay_sec
            .saturating_mul(1_000);
        if left <= 0 || left >= max_ms {
            return Err(illegal(
                "recall failed, timestamp invalid: the message is delivered already".into(),
            ));
        }
        let key = format!("{}+{}", handle.topic, handle.message_id);
        let born = now_millis().to_string();
        let group = header.producer_group.unwrap_or_default();
        let properties = record::encode_properties([
            ("TAGS", RECALL_MESSAGE_TAG),
            (PROPERTY_TIMER_DEL_UNIQKEY, key.as_str()),
            (PROPERTY_UNIQ_KEY, handle.message_id.as_str()),
            (PROPERTY_TIMER_DELIVER_MS, handle.timestamp.as_str()),
            ("BORN_TIMESTAMP", born.as_str()),
            ("PGROUP", group.as_str()),
        ])
        .map_err(|e| (response_code::MESSAGE_ILLEGAL, e.to_string()))?;
        let draft = MessageDraft {
            topic: &handle.topic,
            body: b"0",
            properties: &properties,
            queue_id: 0,
            flag: 0,
            sys_flag: 0,
            born_timestamp: now_millis(),
            born_host: ctx.remote(),
            reconsume_times: 0,
            prepared_tx_offset: 0,
        };
        match self.store.put(&draft) {
            Ok(_) => Ok(success_with(
                request,
                &RecallMessageResponseHeader {
                    msg_id: handle.message_id,
                },
            )),
            Err(e) => Ok(system_error(
                request,
                format!("recall failed, execute error: {e}"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_is_rocketmqs_v1_and_garbage_is_refused() {
        let handle = RecallHandle {
            topic: "orders".into(),
            broker_name: "broker-a".into(),
            timestamp: "1700000000001".into(),
            message_id: "7F0000010001".into(),
        };
        let text = handle.encode();
        assert_eq!(
            URL_SAFE.decode(&text).unwrap(),
            b"v1 orders broker-a 1700000000001 7F0000010001"
        );
        assert_eq!(RecallHandle::decode(&text).unwrap(), handle);
        for bad in [
            "",
            "!!!",
            &URL_SAFE.encode("v2 a b c d"),
            &URL_SAFE.encode("v1 a b"),
        ] {
            assert_eq!(
                RecallHandle::decode(bad).unwrap_err(),
                "recall handle is invalid"
            );
        }
    }
}
