//! The consume side's custom headers, under RocketMQ's class and field names: pulls, consumer
//! offsets, queue offsets and message lookups.

use super::{CustomHeader, ExtFields, Fields, FieldsOut, HeaderError};

/// `PullMessageRequestHeader` (PULL_MESSAGE).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullMessageRequestHeader {
    pub consumer_group: String,
    pub topic: String,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub max_msg_nums: i32,
    /// `PullSysFlag` bits: commit offset, suspend, subscription, class filter, lite pull.
    pub sys_flag: i32,
    pub commit_offset: i64,
    pub suspend_timeout_millis: i64,
    pub subscription: Option<String>,
    pub sub_version: i64,
    pub expression_type: Option<String>,
    /// RocketMQ 5: a byte bound on the answer.
    pub max_msg_bytes: Option<i32>,
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

/// `PullSysFlag`.
pub mod pull_sys_flag {
    pub const FLAG_COMMIT_OFFSET: i32 = 0x1;
    pub const FLAG_SUSPEND: i32 = 0x1 << 1;
    pub const FLAG_SUBSCRIPTION: i32 = 0x1 << 2;
    pub const FLAG_CLASS_FILTER: i32 = 0x1 << 3;
    pub const FLAG_LITE_PULL_MESSAGE: i32 = 0x1 << 4;
}

impl CustomHeader for PullMessageRequestHeader {
    fn from_ext_fields(map: &ExtFields) -> Result<Self, HeaderError> {
        let f = Fields {
            map,
            header: "PULL_MESSAGE",
        };
        Ok(PullMessageRequestHeader {
            consumer_group: f.str("consumerGroup")?,
            topic: f.str("topic")?,
            queue_id: f.int("queueId")?,
            queue_offset: f.int("queueOffset")?,
            max_msg_nums: f.int("maxMsgNums")?,
            sys_flag: f.int("sysFlag")?,
            commit_offset: f.int("commitOffset")?,
            suspend_timeout_millis: f.int("suspendTimeoutMillis")?,
            subscription: f.opt_str("subscription"),
            sub_version: f.int("subVersion")?,
            expression_type: f.opt_str("expressionType"),
            max_msg_bytes: f.opt_int("maxMsgBytes")?,
        })
    }

    fn to_ext_fields(&self) -> ExtFields {
        FieldsOut::default()
            .put("consumerGroup", &self.consumer_group)
            .put("topic", &self.topic)
            .put("queueId", self.queue_id)
            .put("queueOffset", self.queue_offset)
            .put("maxMsgNums", self.max_msg_nums)
            .put("sysFlag", self.sys_flag)
            .put("commitOffset", self.commit_offset)
            .put("suspendTimeoutMillis", self.suspend_timeout_millis)
            .opt("subscription", &self.subscription)
            .put("subVersion", self.sub_version)
            .opt("expressionType", &self.expression_type)
            .opt("maxMsgBytes", &self.max_msg_bytes)
            .done()
    }
}

/// `PullMessageResponseHeader`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullMessageResponseHeader {
    pub suggest_which_broker_id: i64,
    pub next_begin_offset: i64,
    pub min_offset: i64,
    pub max_offset: i64,
}

impl CustomHeader for PullMessageResponseHeader {
    fn from_ext_fields(map: &ExtFields) -> Result<Self, HeaderError> {
        let f = Fields {
            map,
            header: "PULL_MESSAGE response",
        };
        Ok(PullMessageResponseHeader {
            suggest_which_broker_id: f.int("suggestWhichBrokerId")?,
            next_begin_offset: f.int("nextBeginOffset")?,
            min_offset: f.int("minOffset")?,
            max_offset: f.int("maxOffset")?,
        })
    }

    fn to_ext_fields(&self) -> ExtFields {
        FieldsOut::default()
            .put("suggestWhichBrokerId", self.suggest_which_broker_id)
            .put("nextBeginOffset", self.next_begin_offset)
            .put("minOffset", self.min_offset)
            .put("maxOffset", self.max_offset)
            .done()
    }
}

/// `QueryConsumerOffsetRequestHeader` (QUERY_CONSUMER_OFFSET).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryConsumerOffsetRequestHeader {
    pub consumer_group: String,
    pub topic: String,
    pub queue_id: i32,
    /// RocketMQ 5: answer 0 rather than QUERY_NOT_FOUND for a queue nobody committed.
    pub set_zero_if_not_found: Option<bool>,
}

impl CustomHeader for QueryConsumerOffsetRequestHeader {
    fn from_ext_fields(map: &ExtFields) -> Result<Self, HeaderError> {
        let f = Fields {
            map,
            header: "QUERY_CONSUMER_OFFSET",
        };
        Ok(QueryConsumerOffsetRequestHeader {
            consumer_group: f.str("consumerGroup")?,
            topic: f.str("topic")?,
            queue_id: f.int("queueId")?,
            set_zero_if_not_found: f.opt_bool("setZeroIfNotFound"),
        })
    }

    fn to_ext_fields(&self) -> ExtFields {
        FieldsOut::default()
            .put("consumerGroup", &self.consumer_group)
            .put("topic", &self.topic)
            .put("queueId", self.queue_id)
            .opt("setZeroIfNotFound", &self.set_zero_if_not_found)
            .done()
    }
}

/// `UpdateConsumerOffsetRequestHeader` (UPDATE_CONSUMER_OFFSET).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateConsumerOffsetRequestHeader {
    pub consumer_group: String,
    pub topic: String,
    pub queue_id: i32,
    pub commit_offset: i64,
}

impl CustomHeader for UpdateConsumerOffsetRequestHeader {
    fn from_ext_fields(map: &ExtFields) -> Result<Self, HeaderError> {
        let f = Fields {
            map,
            header: "UPDATE_CONSUMER_OFFSET",
        };
        Ok(UpdateConsumerOffsetRequestHeader {
            consumer_group: f.str("consumerGroup")?,
            topic: f.str("topic")?,
            queue_id: f.int("queueId")?,
            commit_offset: f.int("commitOffset")?,
        })
    }

    fn to_ext_fields(&self) -> ExtFields {
        FieldsOut::default()
            .put("consumerGroup", &self.consumer_group)
            .put("topic", &self.topic)
            .put("queueId", self.queue_id)
            .put("commitOffset", self.commit_offset)
            .done()
    }
}

/// One queue of a topic: `GetMaxOffsetRequestHeader`, `GetMinOffsetRequestHeader` and
/// `GetEarliestMsgStoretimeRequestHeader` carry just these two fields (RocketMQ 5 adds an
/// optional `committed` to the first, which a store without a dispatch lag can ignore).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueRequestHeader {
    pub topic: String,
    pub queue_id: i32,
}

impl QueueRequestHeader {
    pub fn parse(map: &ExtFields, header: &'static str) -> Result<Self, HeaderError> {
        let f = Fields { map, header };
        Ok(QueueRequestHeader {
            topic: f.str("topic")?,
            queue_id: f.int("queueId")?,
        })
    }
}

impl CustomHeader for QueueRequestHeader {
    fn from_ext_fields(map: &ExtFields) -> Result<Self, HeaderError> {
        Self::parse(map, "queue request")
    }

    fn to_ext_fields(&self) -> ExtFields {
        FieldsOut::default()
            .put("topic", &self.topic)
            .put("queueId", self.queue_id)
            .done()
    }
}

/// `SearchOffsetRequestHeader` (SEARCH_OFFSET_BY_TIMESTAMP).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchOffsetRequestHeader {
    pub topic: String,
    pub queue_id: i32,
    pub timestamp: i64,
    /// RocketMQ 5's `BoundaryType`: LOWER (default) or UPPER.
    pub boundary_type: Option<String>,
}

impl CustomHeader for SearchOffsetRequestHeader {
    fn from_ext_fields(map: &ExtFields) -> Result<Self, HeaderError> {
        let f = Fields {
            map,
            header: "SEARCH_OFFSET_BY_TIMESTAMP",
        };
        Ok(SearchOffsetRequestHeader {
            topic: f.str("topic")?,
            queue_id: f.int("queueId")?,
            timestamp: f.int("timestamp")?,
            boundary_type: f.opt_str("boundaryType"),
        })
    }

    fn to_ext_fields(&self) -> ExtFields {
        FieldsOut::default()
            .put("topic", &self.topic)
            .put("queueId", self.queue_id)
            .put("timestamp", self.timestamp)
            .opt("boundaryType", &self.boundary_type)
            .done()
    }
}

/// The one-field answers: `QueryConsumerOffsetResponseHeader`, `GetMaxOffsetResponseHeader`,
/// `GetMinOffsetResponseHeader`, `SearchOffsetResponseHeader` (`offset`) and
/// `GetEarliestMsgStoretimeResponseHeader` (`timestamp`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetResponseHeader {
    pub field: &'static str,
    pub value: i64,
}

impl OffsetResponseHeader {
    pub fn offset(value: i64) -> Self {
        Self {
            field: "offset",
            value,
        }
    }

    pub fn timestamp(value: i64) -> Self {
        Self {
            field: "timestamp",
            value,
        }
    }
}

impl CustomHeader for OffsetResponseHeader {
    /// Reads `offset` (the common one).
    fn from_ext_fields(map: &ExtFields) -> Result<Self, HeaderError> {
        let f = Fields {
            map,
            header: "offset response",
        };
        f.int("offset").map(Self::offset)
    }

    fn to_ext_fields(&self) -> ExtFields {
        FieldsOut::default().put(self.field, self.value).done()
    }
}

/// `ViewMessageRequestHeader` (VIEW_MESSAGE_BY_ID): the commit log offset the msg id names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewMessageRequestHeader {
    pub offset: i64,
    /// RocketMQ 5 names the topic too; checked against the record when present.
    pub topic: Option<String>,
}

impl CustomHeader for ViewMessageRequestHeader {
    fn from_ext_fields(map: &ExtFields) -> Result<Self, HeaderError> {
        let f = Fields {
            map,
            header: "VIEW_MESSAGE_BY_ID",
        };
        Ok(ViewMessageRequestHeader {
            offset: f.int("offset")?,
            topic: f.opt_str("topic"),
        })
    }

    fn to_ext_fields(&self) -> ExtFields {
        FieldsOut::default()
            .put("offset", self.offset)
            .opt("topic", &self.topic)
            .done()
    }
}

/// `GetConsumerListByGroupRequestHeader` (GET_CONSUMER_LIST_BY_GROUP).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetConsumerListByGroupRequestHeader {
    pub consumer_group: String,
}

impl CustomHeader for GetConsumerListByGroupRequestHeader {
    fn from_ext_fields(map: &ExtFields) -> Result<Self, HeaderError> {
        let f = Fields {
            map,
            header: "GET_CONSUMER_LIST_BY_GROUP",
        };
        Ok(GetConsumerListByGroupRequestHeader {
            consumer_group: f.str("consumerGroup")?,
        })
    }

    fn to_ext_fields(&self) -> ExtFields {
        FieldsOut::default()
            .put("consumerGroup", &self.consumer_group)
            .done()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::{RemotingCommand, SerializeType};

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
        let out = OffsetResponseHeader::offset(5).to_ext_fields();
        assert_eq!(out.get("offset").map(String::as_str), Some("5"));
        let out = OffsetResponseHeader::timestamp(6).to_ext_fields();
        assert_eq!(out.get("timestamp").map(String::as_str), Some("6"));
    }
}
