//! The broker's administration and client-management headers: a topic's creation and a
//! client's unregistration.

custom_header! {
    /// `CreateTopicRequestHeader` (UPDATE_AND_CREATE_TOPIC).
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[cfg_attr(feature = "harness", visibility::make(pub))]
    pub(crate) struct CreateTopicRequestHeader("UPDATE_AND_CREATE_TOPIC") {
        pub topic: String = "topic",
        pub default_topic: String = "defaultTopic",
        pub read_queue_nums: i32 = "readQueueNums",
        pub write_queue_nums: i32 = "writeQueueNums",
        pub perm: i32 = "perm",
        pub topic_filter_type: String = "topicFilterType",
        pub topic_sys_flag: Option<i32> = "topicSysFlag",
        /// A Java primitive boolean: absent reads as false.
        pub order: bool = "order" or false,
        /// RocketMQ 5's changes to the topic's attributes, `AttributeParser`'s text:
        /// `+message.type=FIFO,-reserve.time` (`+` sets, `-` deletes).
        pub attributes: Option<String> = "attributes",
    }
}

custom_header! {
    /// `GetTopicStatsInfoRequestHeader` (GET_TOPIC_STATS_INFO); `GetTopicConfigRequestHeader`
    /// (GET_TOPIC_CONFIG) has the same field.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct GetTopicStatsInfoRequestHeader("GET_TOPIC_STATS_INFO") {
        pub topic: String = "topic",
    }
}

custom_header! {
    /// `GetConsumeStatsRequestHeader` (GET_CONSUME_STATS): a group's progress, in one topic,
    /// in the topics listed (5.x, separated by `;`), or in every topic it committed in.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct GetConsumeStatsRequestHeader("GET_CONSUME_STATS") {
        pub consumer_group: String = "consumerGroup",
        pub topic: Option<String> = "topic",
        pub topic_list: Option<String> = "topicList",
    }
}

custom_header! {
    /// `DeleteTopicRequestHeader` (DELETE_TOPIC_IN_BROKER).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct DeleteTopicRequestHeader("DELETE_TOPIC_IN_BROKER") {
        pub topic: String = "topic",
    }
}

custom_header! {
    /// `DeleteSubscriptionGroupRequestHeader` (DELETE_SUBSCRIPTIONGROUP): `cleanOffset` also
    /// drops the group's committed offsets.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct DeleteSubscriptionGroupRequestHeader("DELETE_SUBSCRIPTIONGROUP") {
        pub group_name: String = "groupName",
        pub clean_offset: bool = "cleanOffset" or false,
    }
}

custom_header! {
    /// `GetSubscriptionGroupConfigRequestHeader` (GET_SUBSCRIPTIONGROUP_CONFIG).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct GetSubscriptionGroupConfigRequestHeader("GET_SUBSCRIPTIONGROUP_CONFIG") {
        pub group: String = "group",
    }
}

custom_header! {
    /// `GetConsumerConnectionListRequestHeader` (GET_CONSUMER_CONNECTION_LIST).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct GetConsumerConnectionListRequestHeader("GET_CONSUMER_CONNECTION_LIST") {
        pub consumer_group: String = "consumerGroup",
    }
}

custom_header! {
    /// `GetProducerConnectionListRequestHeader` (GET_PRODUCER_CONNECTION_LIST).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct GetProducerConnectionListRequestHeader("GET_PRODUCER_CONNECTION_LIST") {
        pub producer_group: String = "producerGroup",
    }
}

custom_header! {
    /// `ResetOffsetRequestHeader` (INVOKE_BROKER_TO_RESET_OFFSET): every queue of the topic
    /// to the first message stored at or after `timestamp` (-1: the end), or (5.x) one queue,
    /// to `offset` when given.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct ResetOffsetRequestHeader("INVOKE_BROKER_TO_RESET_OFFSET") {
        pub topic: String = "topic",
        pub group: String = "group",
        pub queue_id: Option<i32> = "queueId",
        pub offset: Option<i64> = "offset",
        pub timestamp: i64 = "timestamp",
        pub is_force: bool = "isForce" or false,
    }
}

custom_header! {
    /// `QueryConsumeQueueRequestHeader`.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct QueryConsumeQueueRequestHeader("QUERY_CONSUME_QUEUE") {
        pub topic: String = "topic",
        pub queue_id: i32 = "queueId",
        pub index: i64 = "index",
        pub count: i32 = "count",
        pub consumer_group: Option<String> = "consumerGroup",
    }
}

custom_header! {
    /// `UnregisterClientRequestHeader` (UNREGISTER_CLIENT).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct UnregisterClientRequestHeader("UNREGISTER_CLIENT") {
        pub client_id: String = "clientID",
        pub producer_group: Option<String> = "producerGroup",
        pub consumer_group: Option<String> = "consumerGroup",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::CustomHeader;

    #[test]
    fn create_topic_reads_java_primitives_and_writes_every_one() {
        let header = CreateTopicRequestHeader {
            topic: "T".into(),
            default_topic: "TBW102".into(),
            read_queue_nums: 8,
            write_queue_nums: 8,
            perm: 6,
            topic_filter_type: "SINGLE_TAG".into(),
            topic_sys_flag: None,
            order: false,
            attributes: None,
        };
        let mut fields = header.to_ext_fields();
        assert_eq!(fields["order"], "false");
        assert_eq!(fields.len(), 7);
        assert_eq!(
            CreateTopicRequestHeader::from_ext_fields(&fields),
            Ok(header)
        );
        // A Java primitive boolean: absent reads as false; "TRUE" is Boolean.parseBoolean's true.
        fields.remove("order");
        assert!(
            !CreateTopicRequestHeader::from_ext_fields(&fields)
                .unwrap()
                .order
        );
        fields.insert("order".into(), "TRUE".into());
        assert!(
            CreateTopicRequestHeader::from_ext_fields(&fields)
                .unwrap()
                .order
        );
        fields.remove("perm");
        assert_eq!(
            CreateTopicRequestHeader::from_ext_fields(&fields)
                .unwrap_err()
                .to_string(),
            "UPDATE_AND_CREATE_TOPIC header: field `perm` is missing"
        );
    }

    #[test]
    fn create_topic_carries_the_attributes_as_mqadmin_writes_them() {
        let mut fields = CreateTopicRequestHeader {
            topic: "T".into(),
            default_topic: "TBW102".into(),
            read_queue_nums: 8,
            write_queue_nums: 8,
            perm: 6,
            topic_filter_type: "SINGLE_TAG".into(),
            topic_sys_flag: Some(0),
            order: false,
            attributes: None,
        }
        .to_ext_fields();
        // `AttributeParser.parseToString` of `updateTopic -a +message.type=DELAY,+a=b`.
        fields.insert("attributes".into(), "+message.type=DELAY,+a=b".into());
        let header = CreateTopicRequestHeader::from_ext_fields(&fields).unwrap();
        assert_eq!(
            header.attributes.as_deref(),
            Some("+message.type=DELAY,+a=b")
        );
        assert_eq!(
            header.to_ext_fields()["attributes"],
            "+message.type=DELAY,+a=b"
        );
    }
}
