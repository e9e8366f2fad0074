//! The consume side's custom headers, under RocketMQ's class and field names: pulls, consumer
//! offsets, queue offsets and message lookups.

custom_header! {
    /// `PullMessageRequestHeader` (PULL_MESSAGE).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct PullMessageRequestHeader("PULL_MESSAGE") {
        pub consumer_group: String = "consumerGroup",
        pub topic: String = "topic",
        pub queue_id: i32 = "queueId",
        pub queue_offset: i64 = "queueOffset",
        pub max_msg_nums: i32 = "maxMsgNums",
        /// `PullSysFlag` bits: commit offset, suspend, subscription, class filter, lite pull.
        pub sys_flag: i32 = "sysFlag",
        pub commit_offset: i64 = "commitOffset",
        pub suspend_timeout_millis: i64 = "suspendTimeoutMillis",
        pub subscription: Option<String> = "subscription",
        pub sub_version: i64 = "subVersion",
        pub expression_type: Option<String> = "expressionType",
        /// RocketMQ 5: a byte bound on the answer.
        pub max_msg_bytes: Option<i32> = "maxMsgBytes",
    }
}

impl PullMessageRequestHeader {
    /// A pull of a TAG subscription (`*` or `a || b`) from `queue_offset`: no offset to
    /// commit, not held (`suspendTimeoutMillis` 0), `subVersion` 0, no byte bound; set those
    /// fields on the result when a pull needs them.
    pub fn tag(
        consumer_group: String,
        topic: String,
        queue_id: i32,
        queue_offset: i64,
        max_msg_nums: i32,
        sys_flag: i32,
        subscription: String,
    ) -> Self {
        Self {
            consumer_group,
            topic,
            queue_id,
            queue_offset,
            max_msg_nums,
            sys_flag,
            commit_offset: 0,
            suspend_timeout_millis: 0,
            subscription: Some(subscription),
            sub_version: 0,
            expression_type: Some("TAG".to_owned()),
            max_msg_bytes: None,
        }
    }
}

/// `PullSysFlag`'s bits, those rocketha sets or reads.
pub(crate) mod pull_sys_flag {
    pub(crate) const FLAG_COMMIT_OFFSET: i32 = 0x1;
    pub(crate) const FLAG_SUSPEND: i32 = 0x1 << 1;
    pub(crate) const FLAG_SUBSCRIPTION: i32 = 0x1 << 2;
}

custom_header! {
    /// `PullMessageResponseHeader`.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct PullMessageResponseHeader("PULL_MESSAGE response") {
        pub suggest_which_broker_id: i64 = "suggestWhichBrokerId",
        pub next_begin_offset: i64 = "nextBeginOffset",
        pub min_offset: i64 = "minOffset",
        pub max_offset: i64 = "maxOffset",
    }
}

custom_header! {
    /// `QueryConsumerOffsetRequestHeader` (QUERY_CONSUMER_OFFSET).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct QueryConsumerOffsetRequestHeader("QUERY_CONSUMER_OFFSET") {
        pub consumer_group: String = "consumerGroup",
        pub topic: String = "topic",
        pub queue_id: i32 = "queueId",
        /// RocketMQ 5: answer 0 rather than QUERY_NOT_FOUND for a queue nobody committed.
        pub set_zero_if_not_found: Option<bool> = "setZeroIfNotFound",
    }
}

custom_header! {
    /// `UpdateConsumerOffsetRequestHeader` (UPDATE_CONSUMER_OFFSET).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct UpdateConsumerOffsetRequestHeader("UPDATE_CONSUMER_OFFSET") {
        pub consumer_group: String = "consumerGroup",
        pub topic: String = "topic",
        pub queue_id: i32 = "queueId",
        pub commit_offset: i64 = "commitOffset",
    }
}

custom_header! {
    /// One queue of a topic: `GetMaxOffsetRequestHeader`, `GetMinOffsetRequestHeader` and
    /// `GetEarliestMsgStoretimeRequestHeader` carry just these two fields (RocketMQ 5 adds an
    /// optional `committed` to the first, which a store without a dispatch lag can ignore).
    /// Errors name the request at hand ([`super::CustomHeader::read_ext_fields`]).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct QueueRequestHeader("queue request") {
        pub topic: String = "topic",
        pub queue_id: i32 = "queueId",
    }
}

custom_header! {
    /// `SearchOffsetRequestHeader` (SEARCH_OFFSET_BY_TIMESTAMP).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct SearchOffsetRequestHeader("SEARCH_OFFSET_BY_TIMESTAMP") {
        pub topic: String = "topic",
        pub queue_id: i32 = "queueId",
        pub timestamp: i64 = "timestamp",
        /// RocketMQ 5's `BoundaryType`: LOWER (default) or UPPER.
        pub boundary_type: Option<String> = "boundaryType",
    }
}

custom_header! {
    /// The one-offset answers: `QueryConsumerOffsetResponseHeader`,
    /// `GetMaxOffsetResponseHeader`, `GetMinOffsetResponseHeader` and
    /// `SearchOffsetResponseHeader`.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct OffsetResponseHeader("offset response") {
        pub offset: i64 = "offset",
    }
}

custom_header! {
    /// `GetEarliestMsgStoretimeResponseHeader`.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct GetEarliestMsgStoretimeResponseHeader("GET_EARLIEST_MSG_STORETIME response") {
        pub timestamp: i64 = "timestamp",
    }
}

custom_header! {
    /// `ViewMessageRequestHeader` (VIEW_MESSAGE_BY_ID): the commit log offset the msg id names.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct ViewMessageRequestHeader("VIEW_MESSAGE_BY_ID") {
        pub offset: i64 = "offset",
        /// RocketMQ 5 names the topic too; checked against the record when present.
        pub topic: Option<String> = "topic",
    }
}

custom_header! {
    /// `QueryMessageRequestHeader` (QUERY_MESSAGE): messages by key stored in a time range.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct QueryMessageRequestHeader("QUERY_MESSAGE") {
        pub topic: String = "topic",
        pub key: String = "key",
        pub max_num: i32 = "maxNum",
        pub begin_timestamp: i64 = "beginTimestamp",
        pub end_timestamp: i64 = "endTimestamp",
    }
}

custom_header! {
    /// `QueryMessageResponseHeader`: how far the index had got when it answered.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct QueryMessageResponseHeader("QUERY_MESSAGE response") {
        pub index_last_update_timestamp: i64 = "indexLastUpdateTimestamp",
        pub index_last_update_phyoffset: i64 = "indexLastUpdatePhyoffset",
    }
}

custom_header! {
    /// `GetConsumerListByGroupRequestHeader` (GET_CONSUMER_LIST_BY_GROUP).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct GetConsumerListByGroupRequestHeader("GET_CONSUMER_LIST_BY_GROUP") {
        pub consumer_group: String = "consumerGroup",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::codes::SerializeType;
    use crate::remoting::{CustomHeader, ExtFields, RemotingCommand};

    /// A PULL_MESSAGE as RocketMQ 4.9's `PullAPIWrapper` sends it from a push consumer, each
    /// field written here by hand in the ROCKETMQ serialize type.
    #[test]
    fn golden_pull_request_rocketmq_header() {
        let fields: [(&str, &str); 10] = [
            ("consumerGroup", "cg"),
            ("topic", "T"),
            ("queueId", "3"),
            ("queueOffset", "42"),
            ("maxMsgNums", "32"),
            ("sysFlag", "3"),
            ("commitOffset", "40"),
            ("suspendTimeoutMillis", "15000"),
            ("subVersion", "1700000000000"),
            ("expressionType", "TAG"),
        ];
        let mut raw = Vec::new();
        raw.extend_from_slice(&11i16.to_be_bytes()); // code PULL_MESSAGE
        raw.push(0); // language JAVA
        raw.extend_from_slice(&399i16.to_be_bytes()); // version
        raw.extend_from_slice(&7i32.to_be_bytes()); // opaque
        raw.extend_from_slice(&0i32.to_be_bytes()); // flag
        raw.extend_from_slice(&0i32.to_be_bytes()); // no remark
        let mut ext = Vec::new();
        for (k, v) in fields {
            ext.extend_from_slice(&(k.len() as i16).to_be_bytes());
            ext.extend_from_slice(k.as_bytes());
            ext.extend_from_slice(&(v.len() as i32).to_be_bytes());
            ext.extend_from_slice(v.as_bytes());
        }
        raw.extend_from_slice(&(ext.len() as i32).to_be_bytes());
        raw.extend_from_slice(&ext);
        let cmd = RemotingCommand::decode_header(&raw, SerializeType::RocketMq).unwrap();
        let h: PullMessageRequestHeader = cmd.decode_custom_header().unwrap();
        assert_eq!(
            h,
            PullMessageRequestHeader {
                consumer_group: "cg".into(),
                topic: "T".into(),
                queue_id: 3,
                queue_offset: 42,
                max_msg_nums: 32,
                sys_flag: pull_sys_flag::FLAG_COMMIT_OFFSET | pull_sys_flag::FLAG_SUSPEND,
                commit_offset: 40,
                suspend_timeout_millis: 15000,
                subscription: None,
                sub_version: 1_700_000_000_000,
                expression_type: Some("TAG".into()),
                max_msg_bytes: None,
            }
        );
    }

    #[test]
    fn golden_pull_response_json_header() {
        let mut request = RemotingCommand::request(11, 9);
        request.serialize_type = SerializeType::Json;
        let mut response = RemotingCommand::response_to(&request, 0, None);
        response.write_custom_header(&PullMessageResponseHeader {
            suggest_which_broker_id: 1,
            next_begin_offset: 10,
            min_offset: 0,
            max_offset: 12,
        });
        assert_eq!(
            response.encode_json_header(),
            concat!(
                r#"{"code":0,"extFields":{"maxOffset":"12","minOffset":"0","#,
                r#""nextBeginOffset":"10","suggestWhichBrokerId":"1"},"flag":1,"#,
                r#""language":"RUST","opaque":9,"serializeTypeCurrentRPC":"JSON","version":0}"#
            )
        );
    }

    #[test]
    fn a_pull_without_a_required_field_names_it() {
        let mut fields = PullMessageRequestHeader {
            consumer_group: "g".into(),
            topic: "T".into(),
            queue_id: 0,
            queue_offset: 0,
            max_msg_nums: 1,
            sys_flag: 0,
            commit_offset: 0,
            suspend_timeout_millis: 0,
            subscription: None,
            sub_version: 0,
            expression_type: None,
            max_msg_bytes: None,
        }
        .to_ext_fields();
        fields.remove("queueOffset");
        let err = PullMessageRequestHeader::from_ext_fields(&fields).unwrap_err();
        assert_eq!(
            err.to_string(),
            "PULL_MESSAGE header: field `queueOffset` is missing"
        );
        fields.insert("queueOffset".into(), "x1".into());
        let err = PullMessageRequestHeader::from_ext_fields(&fields).unwrap_err();
        assert_eq!(
            err.to_string(),
            "PULL_MESSAGE header: `queueOffset`=x1 is not an integer"
        );
    }

    #[test]
    fn golden_offset_headers() {
        let mut ext = ExtFields::new();
        for (k, v) in [
            ("consumerGroup", "g"),
            ("topic", "T"),
            ("queueId", "2"),
            ("commitOffset", "17"),
        ] {
            ext.insert(k.into(), v.into());
        }
        let u = UpdateConsumerOffsetRequestHeader::from_ext_fields(&ext).unwrap();
        assert_eq!((u.queue_id, u.commit_offset), (2, 17));
        let q = QueryConsumerOffsetRequestHeader::from_ext_fields(&ext).unwrap();
        assert_eq!(q.set_zero_if_not_found, None);
        let out = OffsetResponseHeader { offset: 5 }.to_ext_fields();
        assert_eq!(out.get("offset").map(String::as_str), Some("5"));
        let out = GetEarliestMsgStoretimeResponseHeader { timestamp: 6 }.to_ext_fields();
        assert_eq!(out.get("timestamp").map(String::as_str), Some("6"));
    }
}
