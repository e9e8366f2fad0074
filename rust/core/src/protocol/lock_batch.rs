//! The bodies of LOCK_BATCH_MQ and UNLOCK_BATCH_MQ, by which orderly consumers take and give
//! back the queues they consume: `MessageQueue`, `LockBatchRequestBody` (UNLOCK_BATCH_MQ's
//! `UnlockBatchRequestBody` has the same fields) and `LockBatchResponseBody`.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::json::{parse_lenient, JsonError};

/// `MessageQueue`: one queue of a topic on one broker group.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MessageQueue {
    pub(crate) topic: String,
    pub(crate) broker_name: String,
    pub(crate) queue_id: i32,
}

/// `LockBatchRequestBody` / `UnlockBatchRequestBody`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct LockBatchRequestBody {
    pub(crate) consumer_group: String,
    pub(crate) client_id: String,
    /// Lock on this broker only, never through its group's other replicas
    /// (`lockInStrictMode`, which rocketha does not have, is what would look at it).
    pub(crate) only_this_broker: bool,
    pub(crate) mq_set: BTreeSet<MessageQueue>,
}

impl LockBatchRequestBody {
    pub(crate) fn decode(body: &[u8]) -> Result<Self, JsonError> {
        parse_lenient(body, "LockBatchRequestBody")
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// `LockBatchResponseBody`: the queues the client holds now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct LockBatchResponseBody {
    #[serde(rename = "lockOKMQSet")]
    pub(crate) lock_ok_mq_set: BTreeSet<MessageQueue>,
}

impl LockBatchResponseBody {
    pub(crate) fn decode(body: &[u8]) -> Result<Self, JsonError> {
        parse_lenient(body, "LockBatchResponseBody")
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_java_clients_request_decodes() {
        // As the Java client's fastjson writes it.
        let wire = br#"{"clientId":"127.0.0.1@1","consumerGroup":"g","mqSet":[{"brokerName":"broker-a","queueId":3,"topic":"T"}],"onlyThisBroker":false}"#;
        let body = LockBatchRequestBody::decode(wire).unwrap();
        assert_eq!(body.consumer_group, "g");
        assert_eq!(body.client_id, "127.0.0.1@1");
        let mq = body.mq_set.iter().next().unwrap();
        assert_eq!(
            (mq.topic.as_str(), mq.broker_name.as_str(), mq.queue_id),
            ("T", "broker-a", 3)
        );
        assert_eq!(LockBatchRequestBody::decode(&body.encode()).unwrap(), body);
    }

    #[test]
    fn the_response_names_the_field_as_java_reads_it() {
        let mut body = LockBatchResponseBody::default();
        body.lock_ok_mq_set.insert(MessageQueue {
            topic: "T".into(),
            broker_name: "b".into(),
            queue_id: 0,
        });
        let text = String::from_utf8(body.encode()).unwrap();
        assert!(text.contains("\"lockOKMQSet\":[{"), "{text}");
        assert_eq!(
            LockBatchResponseBody::decode(text.as_bytes()).unwrap(),
            body
        );
    }

    #[test]
    fn garbage_is_refused_by_name() {
        let err = LockBatchRequestBody::decode(b"{mqSet:").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("LockBatchRequestBody is not valid JSON"),
            "{err}"
        );
    }
}
