//! The headers of RocketMQ 5's pop consumption: POP_MESSAGE, ACK_MESSAGE and
//! CHANGE_MESSAGE_INVISIBLETIME (`PopMessageRequestHeader`, `AckMessageRequestHeader`,
//! `ChangeInvisibleTimeRequestHeader` and their responses).

custom_header! {
    /// `PopMessageRequestHeader` (POP_MESSAGE).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct PopMessageRequestHeader("POP_MESSAGE") {
        pub consumer_group: String = "consumerGroup",
        pub topic: String = "topic",
        /// A queue, or -1 for every queue of the topic.
        pub queue_id: i32 = "queueId",
        pub max_msg_nums: i32 = "maxMsgNums",
        /// Milliseconds the popped messages stay invisible to the group's other pops.
        pub invisible_time: i64 = "invisibleTime",
        /// Milliseconds the pop may be held when nothing is there.
        pub poll_time: i64 = "pollTime",
        /// When the client sent it (its clock): a pop past its `pollTime` is not held. The
        /// proxy sends none (0): the broker's arrival time stands in.
        pub born_time: i64 = "bornTime" or 0,
        /// `ConsumeInitMode`: 0 from the end of a queue the group never read, 1 from its start.
        pub init_mode: i32 = "initMode",
        pub exp_type: Option<String> = "expType",
        pub exp: Option<String> = "exp",
        /// FIFO: a queue's messages one pop at a time, the next after an ack.
        pub order: Option<bool> = "order",
        pub attempt_id: Option<String> = "attemptId",
    }
}

custom_header! {
    /// `PopMessageResponseHeader`.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct PopMessageResponseHeader("POP_MESSAGE response") {
        pub pop_time: i64 = "popTime",
        pub invisible_time: i64 = "invisibleTime",
        pub revive_qid: i32 = "reviveQid",
        /// Messages left in the queues looked at.
        pub rest_num: i64 = "restNum",
        /// `retry queueId startOffset` per queue popped, `;`-separated (`ExtraInfoUtil`).
        pub start_offset_info: Option<String> = "startOffsetInfo",
        /// `retry queueId offset,offset,...` per queue popped.
        pub msg_offset_info: Option<String> = "msgOffsetInfo",
        pub order_count_info: Option<String> = "orderCountInfo",
    }
}

custom_header! {
    /// `AckMessageRequestHeader` (ACK_MESSAGE).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct AckMessageRequestHeader("ACK_MESSAGE") {
        pub consumer_group: String = "consumerGroup",
        /// The topic the message was popped from: a pop retry topic for a retried message.
        pub topic: String = "topic",
        pub queue_id: i32 = "queueId",
        /// The message's `POP_CK` extra info.
        pub extra_info: String = "extraInfo",
        /// The message's queue offset.
        pub offset: i64 = "offset",
    }
}

custom_header! {
    /// `ChangeInvisibleTimeRequestHeader` (CHANGE_MESSAGE_INVISIBLETIME).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ChangeInvisibleTimeRequestHeader("CHANGE_MESSAGE_INVISIBLETIME") {
        pub consumer_group: String = "consumerGroup",
        pub topic: String = "topic",
        pub queue_id: i32 = "queueId",
        pub extra_info: String = "extraInfo",
        pub offset: i64 = "offset",
        /// Milliseconds from now the message stays invisible.
        pub invisible_time: i64 = "invisibleTime",
    }
}

custom_header! {
    /// `ChangeInvisibleTimeResponseHeader`: the message's new pop time and invisible time,
    /// from which the client builds its new extra info.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ChangeInvisibleTimeResponseHeader("CHANGE_MESSAGE_INVISIBLETIME response") {
        pub pop_time: i64 = "popTime",
        pub invisible_time: i64 = "invisibleTime",
        pub revive_qid: i32 = "reviveQid",
    }
}
