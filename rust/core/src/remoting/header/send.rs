//! The send's headers: `SendMessageRequestHeader` under its long names and, with the same
//! fields under single letters, `SendMessageRequestHeaderV2` (what Java producers send by
//! default), and the answer, `SendMessageResponseHeader`.

use crate::remoting::codes::request_code;
use crate::remoting::command::RemotingCommand;

use super::{CustomHeader, HeaderError};

custom_header! {
    /// `SendMessageRequestHeader` (SEND_MESSAGE). `SendMessageRequestHeaderV2` carries the same
    /// fields under single-letter names; both decode to this one type.
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[cfg_attr(feature = "harness", visibility::make(pub))]
    pub(crate) struct SendMessageRequestHeader("SEND_MESSAGE");
    /// `SendMessageRequestHeaderV2`: the send header with fields `a`..`n`, which is what Java
    /// producers send by default.
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[cfg_attr(feature = "harness", visibility::make(pub))]
    pub(crate) struct SendMessageRequestHeaderV2("SEND_MESSAGE_V2");
    {
        pub producer_group: String = "producerGroup" / "a",
        pub topic: String = "topic" / "b",
        pub default_topic: String = "defaultTopic" / "c",
        pub default_topic_queue_nums: i32 = "defaultTopicQueueNums" / "d",
        pub queue_id: i32 = "queueId" / "e",
        pub sys_flag: i32 = "sysFlag" / "f",
        pub born_timestamp: i64 = "bornTimestamp" / "g",
        pub flag: i32 = "flag" / "h",
        pub properties: Option<String> = "properties" / "i",
        pub reconsume_times: Option<i32> = "reconsumeTimes" / "j",
        pub unit_mode: Option<bool> = "unitMode" / "k",
        pub max_reconsume_times: Option<i32> = "maxReconsumeTimes" / "l",
        pub batch: Option<bool> = "batch" / "m",
        /// `bname`, inherited from `RpcRequestHeader`.
        pub broker_name: Option<String> = "bname" / "n",
    }
}

impl SendMessageRequestHeader {
    /// `parseRequestHeader`: the V2 letters for SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE, the
    /// long names for SEND_MESSAGE.
    pub fn parse(cmd: &RemotingCommand) -> Result<Self, HeaderError> {
        match cmd.code {
            request_code::SEND_MESSAGE_V2 | request_code::SEND_BATCH_MESSAGE => {
                Ok(SendMessageRequestHeaderV2::from_ext_fields(&cmd.ext_fields)?.into())
            }
            request_code::SEND_MESSAGE => Self::from_ext_fields(&cmd.ext_fields),
            other => Err(HeaderError::NotASend(other)),
        }
    }
}

impl From<SendMessageRequestHeaderV2> for SendMessageRequestHeader {
    /// `createSendMessageRequestHeaderV1`.
    fn from(v2: SendMessageRequestHeaderV2) -> Self {
        v2.0
    }
}

impl From<SendMessageRequestHeader> for SendMessageRequestHeaderV2 {
    /// `createSendMessageRequestHeaderV2`.
    fn from(v1: SendMessageRequestHeader) -> Self {
        SendMessageRequestHeaderV2(v1)
    }
}

custom_header! {
    /// `SendMessageResponseHeader`.
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[cfg_attr(feature = "harness", visibility::make(pub))]
    pub(crate) struct SendMessageResponseHeader("SEND_MESSAGE response") {
        pub msg_id: String = "msgId",
        pub queue_id: i32 = "queueId",
        pub queue_offset: i64 = "queueOffset",
        pub transaction_id: Option<String> = "transactionId",
        pub batch_uniq_id: Option<String> = "batchUniqId",
        pub recall_handle: Option<String> = "recallHandle",
    }
}

custom_header! {
    /// `RecallMessageRequestHeader` (RECALL_MESSAGE).
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[cfg_attr(feature = "harness", visibility::make(pub))]
    pub(crate) struct RecallMessageRequestHeader("RECALL_MESSAGE") {
        pub producer_group: Option<String> = "producerGroup",
        pub topic: String = "topic",
        pub recall_handle: String = "recallHandle",
    }
}

custom_header! {
    /// `RecallMessageResponseHeader`: the recalled message's id.
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[cfg_attr(feature = "harness", visibility::make(pub))]
    pub(crate) struct RecallMessageResponseHeader("RECALL_MESSAGE response") {
        pub msg_id: String = "msgId",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::ExtFields;
    use proptest::prelude::*;

    fn fields(pairs: &[(&str, &str)]) -> ExtFields {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn send_header() -> SendMessageRequestHeader {
        SendMessageRequestHeader {
            producer_group: "pg".into(),
            topic: "TopicTest".into(),
            default_topic: "TBW102".into(),
            default_topic_queue_nums: 4,
            queue_id: 2,
            sys_flag: 0,
            born_timestamp: 1_700_000_000_000,
            flag: 0,
            properties: Some("KEYS\u{1}k\u{2}".into()),
            reconsume_times: Some(0),
            unit_mode: Some(false),
            max_reconsume_times: None,
            batch: Some(false),
            broker_name: Some("broker-a".into()),
        }
    }

    #[test]
    fn send_header_v1_and_v2() {
        let v1 = send_header();
        let long = v1.to_ext_fields();
        assert_eq!(long["queueId"], "2");
        assert_eq!(long["bornTimestamp"], "1700000000000");
        assert_eq!(long["bname"], "broker-a");
        assert!(!long.contains_key("maxReconsumeTimes"));
        let v2 = SendMessageRequestHeaderV2::from(v1.clone());
        let short = v2.to_ext_fields();
        assert_eq!(short["b"], "TopicTest");
        assert_eq!(short["e"], "2");
        assert_eq!(short["k"], "false");
        assert_eq!(short["n"], "broker-a");
        assert_eq!(short.len(), long.len());

        let mut cmd = RemotingCommand::request(request_code::SEND_MESSAGE_V2, 1);
        cmd.write_custom_header(&v2);
        assert_eq!(SendMessageRequestHeader::parse(&cmd), Ok(v1.clone()));
        cmd.code = request_code::SEND_MESSAGE;
        cmd.ext_fields = long;
        assert_eq!(SendMessageRequestHeader::parse(&cmd), Ok(v1));
        cmd.code = request_code::PULL_MESSAGE;
        assert_eq!(
            SendMessageRequestHeader::parse(&cmd),
            Err(HeaderError::NotASend(11))
        );
    }

    #[test]
    fn header_field_errors_name_the_field() {
        let mut long = send_header().to_ext_fields();
        long.remove("queueId");
        let err = SendMessageRequestHeader::from_ext_fields(&long).unwrap_err();
        assert_eq!(
            err.to_string(),
            "SEND_MESSAGE header: field `queueId` is missing"
        );
        long.insert("queueId".into(), "abc".into());
        let err = SendMessageRequestHeader::from_ext_fields(&long).unwrap_err();
        assert_eq!(
            err.to_string(),
            "SEND_MESSAGE header: `queueId`=abc is not an integer"
        );
        let mut short = SendMessageRequestHeaderV2(send_header()).to_ext_fields();
        short.insert("g".into(), "1e3".into());
        let err = SendMessageRequestHeaderV2::from_ext_fields(&short).unwrap_err();
        assert_eq!(
            err.to_string(),
            "SEND_MESSAGE_V2 header: `g`=1e3 is not an integer"
        );
        let err = SendMessageResponseHeader::from_ext_fields(&fields(&[
            ("msgId", "X"),
            ("queueId", "1"),
            ("queueOffset", "99999999999999999999"),
        ]))
        .unwrap_err();
        assert!(err
            .to_string()
            .contains("`queueOffset`=99999999999999999999"));
    }

    proptest! {
        #[test]
        fn send_headers_round_trip(
            group in ".{0,10}", topic in "[A-Za-z0-9_-]{1,20}", queue_id in any::<i32>(),
            born in any::<i64>(), reconsume in prop::option::of(any::<i32>()),
            unit_mode in prop::option::of(any::<bool>()), bname in prop::option::of(".{0,8}"),
        ) {
            let h = SendMessageRequestHeader {
                producer_group: group,
                topic,
                queue_id,
                born_timestamp: born,
                reconsume_times: reconsume,
                unit_mode,
                broker_name: bname,
                ..send_header()
            };
            let v1 = SendMessageRequestHeader::from_ext_fields(&h.to_ext_fields()).unwrap();
            prop_assert_eq!(&v1, &h);
            let v2 = SendMessageRequestHeaderV2::from(h.clone());
            let back = SendMessageRequestHeaderV2::from_ext_fields(&v2.to_ext_fields()).unwrap();
            prop_assert_eq!(SendMessageRequestHeader::from(back), h);
        }
    }
}

custom_header! {
    /// `ConsumerSendMsgBackRequestHeader` (CONSUMER_SEND_MSG_BACK): a consumer hands back a
    /// message it failed, named by its commit-log `offset`, for a retry after `delay_level`
    /// (0: the broker picks `3 + reconsumeTimes`; negative: straight to the dead-letter queue).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ConsumerSendMsgBackRequestHeader("CONSUMER_SEND_MSG_BACK") {
        pub offset: i64 = "offset",
        pub group: String = "group",
        pub delay_level: i32 = "delayLevel",
        pub origin_msg_id: Option<String> = "originMsgId",
        pub origin_topic: Option<String> = "originTopic",
        pub unit_mode: bool = "unitMode" or false,
        /// The consumer's own bound; absent, the subscription group's `retryMaxTimes`.
        pub max_reconsume_times: Option<i32> = "maxReconsumeTimes",
        /// `bname`, inherited from `RpcRequestHeader`.
        pub broker_name: Option<String> = "bname",
    }
}

custom_header! {
    /// `EndTransactionRequestHeader` (END_TRANSACTION): a producer's outcome of the local
    /// transaction of the half message at `commitLogOffset` / `tranStateTableOffset`.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct EndTransactionRequestHeader("END_TRANSACTION") {
        pub topic: Option<String> = "topic",
        pub producer_group: String = "producerGroup",
        pub tran_state_table_offset: i64 = "tranStateTableOffset",
        pub commit_log_offset: i64 = "commitLogOffset",
        /// `MessageSysFlag`'s TRANSACTION_COMMIT_TYPE, _ROLLBACK_TYPE or _NOT_TYPE (unknown).
        pub commit_or_rollback: i32 = "commitOrRollback",
        pub from_transaction_check: Option<bool> = "fromTransactionCheck",
        pub msg_id: String = "msgId",
        pub transaction_id: Option<String> = "transactionId",
    }
}

custom_header! {
    /// `CheckTransactionStateRequestHeader` (CHECK_TRANSACTION_STATE, broker to producer): the
    /// body is the half message as `MessageDecoder.encode` writes it.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct CheckTransactionStateRequestHeader("CHECK_TRANSACTION_STATE") {
        pub topic: Option<String> = "topic",
        pub tran_state_table_offset: i64 = "tranStateTableOffset",
        pub commit_log_offset: i64 = "commitLogOffset",
        pub msg_id: Option<String> = "msgId",
        pub transaction_id: Option<String> = "transactionId",
        pub offset_msg_id: Option<String> = "offsetMsgId",
        /// `bname`, inherited from `RpcRequestHeader`.
        pub broker_name: Option<String> = "bname",
    }
}
