//! RocketMQ's numbers on the wire: request codes, response codes, `LanguageCode` and
//! `SerializeType`, with Apache RocketMQ's exact names and values (`RequestCode.java`,
//! `ResponseCode.java` and its base `RemotingSysResponseCode.java`, `LanguageCode.java`,
//! `SerializeType.java`), so a Java client, `mqadmin` and the Java name server understand us.
//!
//! Codes stay plain `i32` constants rather than enums: a peer may send any code, and an unknown
//! one must travel as far as the dispatcher to be answered with `REQUEST_CODE_NOT_SUPPORTED`.

/// Request codes (`RequestCode.java`), only those rocketha serves or sends.
#[cfg_attr(feature = "harness", visibility::make(pub))]
pub(crate) mod request_code {
    pub(crate) const SEND_MESSAGE: i32 = 10;
    pub(crate) const PULL_MESSAGE: i32 = 11;
    pub(crate) const QUERY_MESSAGE: i32 = 12;
    pub(crate) const QUERY_CONSUMER_OFFSET: i32 = 14;
    pub(crate) const UPDATE_CONSUMER_OFFSET: i32 = 15;
    #[cfg_attr(feature = "harness", visibility::make(pub))]
    pub(crate) const UPDATE_AND_CREATE_TOPIC: i32 = 17;
    pub(crate) const GET_ALL_TOPIC_CONFIG: i32 = 21;
    pub(crate) const UPDATE_BROKER_CONFIG: i32 = 25;
    pub(crate) const GET_BROKER_CONFIG: i32 = 26;
    pub(crate) const GET_BROKER_RUNTIME_INFO: i32 = 28;
    pub(crate) const SEARCH_OFFSET_BY_TIMESTAMP: i32 = 29;
    pub(crate) const GET_MAX_OFFSET: i32 = 30;
    pub(crate) const GET_MIN_OFFSET: i32 = 31;
    pub(crate) const GET_EARLIEST_MSG_STORETIME: i32 = 32;
    pub(crate) const VIEW_MESSAGE_BY_ID: i32 = 33;
    pub(crate) const HEART_BEAT: i32 = 34;
    pub(crate) const UNREGISTER_CLIENT: i32 = 35;
    pub(crate) const CONSUMER_SEND_MSG_BACK: i32 = 36;
    pub(crate) const END_TRANSACTION: i32 = 37;
    pub(crate) const GET_CONSUMER_LIST_BY_GROUP: i32 = 38;
    /// Broker to producer, oneway: how did the local transaction of this half message end?
    pub(crate) const CHECK_TRANSACTION_STATE: i32 = 39;
    /// Broker to consumer, oneway: the group's members changed, rebalance now.
    pub(crate) const NOTIFY_CONSUMER_IDS_CHANGED: i32 = 40;
    pub(crate) const LOCK_BATCH_MQ: i32 = 41;
    pub(crate) const UNLOCK_BATCH_MQ: i32 = 42;
    pub(crate) const GET_ALL_CONSUMER_OFFSET: i32 = 43;
    pub(crate) const GET_ALL_DELAY_OFFSET: i32 = 45;
    pub(crate) const GET_TIMER_CHECK_POINT: i32 = 60;
    /// 5.5: cancels a timer message by the recall handle its send answered.
    pub(crate) const RECALL_MESSAGE: i32 = 370;
    pub(crate) const POP_MESSAGE: i32 = 200_050;
    pub(crate) const ACK_MESSAGE: i32 = 200_051;
    pub(crate) const BATCH_ACK_MESSAGE: i32 = 200_151;
    pub(crate) const CHANGE_MESSAGE_INVISIBLETIME: i32 = 200_053;
    pub(crate) const GET_TIMER_METRICS: i32 = 61;
    pub(crate) const CHECK_CLIENT_CONFIG: i32 = 46;
    pub(crate) const PUT_KV_CONFIG: i32 = 100;
    pub(crate) const GET_KV_CONFIG: i32 = 101;
    pub(crate) const DELETE_KV_CONFIG: i32 = 102;
    pub(crate) const REGISTER_BROKER: i32 = 103;
    pub(crate) const UNREGISTER_BROKER: i32 = 104;
    pub(crate) const GET_ROUTEINFO_BY_TOPIC: i32 = 105;
    pub(crate) const GET_BROKER_CLUSTER_INFO: i32 = 106;
    pub(crate) const UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: i32 = 200;
    pub(crate) const GET_ALL_SUBSCRIPTIONGROUP_CONFIG: i32 = 201;
    pub(crate) const GET_TOPIC_STATS_INFO: i32 = 202;
    pub(crate) const GET_CONSUMER_CONNECTION_LIST: i32 = 203;
    /// Relayed to the consumer named (`mqadmin consumerStatus`).
    pub(crate) const GET_CONSUMER_RUNNING_INFO: i32 = 307;
    pub(crate) const GET_PRODUCER_CONNECTION_LIST: i32 = 204;
    pub(crate) const WIPE_WRITE_PERM_OF_BROKER: i32 = 205;
    pub(crate) const GET_ALL_TOPIC_LIST_FROM_NAMESERVER: i32 = 206;
    pub(crate) const DELETE_SUBSCRIPTIONGROUP: i32 = 207;
    pub(crate) const GET_CONSUME_STATS: i32 = 208;
    pub(crate) const DELETE_TOPIC_IN_BROKER: i32 = 215;
    pub(crate) const DELETE_TOPIC_IN_NAMESRV: i32 = 216;
    pub(crate) const GET_KVLIST_BY_NAMESPACE: i32 = 219;
    pub(crate) const INVOKE_BROKER_TO_RESET_OFFSET: i32 = 222;
    pub(crate) const GET_TOPICS_BY_CLUSTER: i32 = 224;
    pub(crate) const QUERY_TOPIC_CONSUME_BY_WHO: i32 = 300;
    pub const SEND_MESSAGE_V2: i32 = 310;
    pub(crate) const SEND_BATCH_MESSAGE: i32 = 320;
    pub(crate) const QUERY_CONSUME_QUEUE: i32 = 321;
    pub(crate) const ADD_WRITE_PERM_OF_BROKER: i32 = 327;
    pub(crate) const QUERY_DATA_VERSION: i32 = 322;
    pub(crate) const SEND_REPLY_MESSAGE: i32 = 324;
    pub(crate) const SEND_REPLY_MESSAGE_V2: i32 = 325;
    pub(crate) const GET_TOPIC_CONFIG: i32 = 351;
    pub(crate) const GET_SUBSCRIPTIONGROUP_CONFIG: i32 = 352;
    /// RocketMQ 5's `DefaultLitePullConsumer` pulls under this code, same header and answer.
    pub(crate) const LITE_PULL_MESSAGE: i32 = 361;
    /// Broker to controller, oneway, every `brokerHeartbeatInterval`.
    pub(crate) const BROKER_HEARTBEAT: i32 = 904;
    pub(crate) const CONTROLLER_ALTER_SYNC_STATE_SET: i32 = 1001;
    pub(crate) const CONTROLLER_ELECT_MASTER: i32 = 1002;
    pub(crate) const CONTROLLER_REGISTER_BROKER: i32 = 1003;
    pub(crate) const CONTROLLER_GET_REPLICA_INFO: i32 = 1004;
    pub(crate) const CONTROLLER_GET_METADATA_INFO: i32 = 1005;
    /// `mqadmin getBrokerEpoch`: the epochs of a broker's log, in controller mode.
    pub(crate) const GET_BROKER_EPOCH_CACHE: i32 = 1007;
    /// Controller leader to a broker's client port, oneway: the group's master changed.
    pub(crate) const NOTIFY_BROKER_ROLE_CHANGED: i32 = 1008;
    pub(crate) const CONTROLLER_GET_NEXT_BROKER_ID: i32 = 1012;
    pub(crate) const CONTROLLER_APPLY_BROKER_ID: i32 = 1013;

    /// RocketMQ's name of a request code, for logs and error messages.
    pub(crate) fn name(code: i32) -> Option<&'static str> {
        Some(match code {
            SEND_MESSAGE => "SEND_MESSAGE",
            PULL_MESSAGE => "PULL_MESSAGE",
            QUERY_MESSAGE => "QUERY_MESSAGE",
            QUERY_CONSUMER_OFFSET => "QUERY_CONSUMER_OFFSET",
            UPDATE_CONSUMER_OFFSET => "UPDATE_CONSUMER_OFFSET",
            UPDATE_AND_CREATE_TOPIC => "UPDATE_AND_CREATE_TOPIC",
            GET_ALL_TOPIC_CONFIG => "GET_ALL_TOPIC_CONFIG",
            UPDATE_BROKER_CONFIG => "UPDATE_BROKER_CONFIG",
            GET_BROKER_CONFIG => "GET_BROKER_CONFIG",
            GET_BROKER_RUNTIME_INFO => "GET_BROKER_RUNTIME_INFO",
            SEARCH_OFFSET_BY_TIMESTAMP => "SEARCH_OFFSET_BY_TIMESTAMP",
            GET_MAX_OFFSET => "GET_MAX_OFFSET",
            GET_MIN_OFFSET => "GET_MIN_OFFSET",
            GET_EARLIEST_MSG_STORETIME => "GET_EARLIEST_MSG_STORETIME",
            VIEW_MESSAGE_BY_ID => "VIEW_MESSAGE_BY_ID",
            HEART_BEAT => "HEART_BEAT",
            UNREGISTER_CLIENT => "UNREGISTER_CLIENT",
            CONSUMER_SEND_MSG_BACK => "CONSUMER_SEND_MSG_BACK",
            END_TRANSACTION => "END_TRANSACTION",
            GET_CONSUMER_LIST_BY_GROUP => "GET_CONSUMER_LIST_BY_GROUP",
            CHECK_TRANSACTION_STATE => "CHECK_TRANSACTION_STATE",
            NOTIFY_CONSUMER_IDS_CHANGED => "NOTIFY_CONSUMER_IDS_CHANGED",
            LOCK_BATCH_MQ => "LOCK_BATCH_MQ",
            UNLOCK_BATCH_MQ => "UNLOCK_BATCH_MQ",
            GET_ALL_CONSUMER_OFFSET => "GET_ALL_CONSUMER_OFFSET",
            GET_ALL_DELAY_OFFSET => "GET_ALL_DELAY_OFFSET",
            GET_TIMER_CHECK_POINT => "GET_TIMER_CHECK_POINT",
            GET_TIMER_METRICS => "GET_TIMER_METRICS",
            RECALL_MESSAGE => "RECALL_MESSAGE",
            POP_MESSAGE => "POP_MESSAGE",
            ACK_MESSAGE => "ACK_MESSAGE",
            BATCH_ACK_MESSAGE => "BATCH_ACK_MESSAGE",
            CHANGE_MESSAGE_INVISIBLETIME => "CHANGE_MESSAGE_INVISIBLETIME",
            CHECK_CLIENT_CONFIG => "CHECK_CLIENT_CONFIG",
            PUT_KV_CONFIG => "PUT_KV_CONFIG",
            GET_KV_CONFIG => "GET_KV_CONFIG",
            DELETE_KV_CONFIG => "DELETE_KV_CONFIG",
            GET_KVLIST_BY_NAMESPACE => "GET_KVLIST_BY_NAMESPACE",
            REGISTER_BROKER => "REGISTER_BROKER",
            UNREGISTER_BROKER => "UNREGISTER_BROKER",
            GET_ROUTEINFO_BY_TOPIC => "GET_ROUTEINFO_BY_TOPIC",
            GET_BROKER_CLUSTER_INFO => "GET_BROKER_CLUSTER_INFO",
            UPDATE_AND_CREATE_SUBSCRIPTIONGROUP => "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP",
            GET_ALL_SUBSCRIPTIONGROUP_CONFIG => "GET_ALL_SUBSCRIPTIONGROUP_CONFIG",
            GET_TOPIC_STATS_INFO => "GET_TOPIC_STATS_INFO",
            GET_TOPIC_CONFIG => "GET_TOPIC_CONFIG",
            GET_CONSUME_STATS => "GET_CONSUME_STATS",
            DELETE_SUBSCRIPTIONGROUP => "DELETE_SUBSCRIPTIONGROUP",
            DELETE_TOPIC_IN_BROKER => "DELETE_TOPIC_IN_BROKER",
            DELETE_TOPIC_IN_NAMESRV => "DELETE_TOPIC_IN_NAMESRV",
            INVOKE_BROKER_TO_RESET_OFFSET => "INVOKE_BROKER_TO_RESET_OFFSET",
            GET_CONSUMER_CONNECTION_LIST => "GET_CONSUMER_CONNECTION_LIST",
            GET_CONSUMER_RUNNING_INFO => "GET_CONSUMER_RUNNING_INFO",
            GET_PRODUCER_CONNECTION_LIST => "GET_PRODUCER_CONNECTION_LIST",
            GET_ALL_TOPIC_LIST_FROM_NAMESERVER => "GET_ALL_TOPIC_LIST_FROM_NAMESERVER",
            WIPE_WRITE_PERM_OF_BROKER => "WIPE_WRITE_PERM_OF_BROKER",
            ADD_WRITE_PERM_OF_BROKER => "ADD_WRITE_PERM_OF_BROKER",
            GET_TOPICS_BY_CLUSTER => "GET_TOPICS_BY_CLUSTER",
            QUERY_TOPIC_CONSUME_BY_WHO => "QUERY_TOPIC_CONSUME_BY_WHO",
            SEND_MESSAGE_V2 => "SEND_MESSAGE_V2",
            SEND_BATCH_MESSAGE => "SEND_BATCH_MESSAGE",
            QUERY_CONSUME_QUEUE => "QUERY_CONSUME_QUEUE",
            QUERY_DATA_VERSION => "QUERY_DATA_VERSION",
            SEND_REPLY_MESSAGE => "SEND_REPLY_MESSAGE",
            SEND_REPLY_MESSAGE_V2 => "SEND_REPLY_MESSAGE_V2",
            GET_SUBSCRIPTIONGROUP_CONFIG => "GET_SUBSCRIPTIONGROUP_CONFIG",
            LITE_PULL_MESSAGE => "LITE_PULL_MESSAGE",
            BROKER_HEARTBEAT => "BROKER_HEARTBEAT",
            CONTROLLER_ALTER_SYNC_STATE_SET => "CONTROLLER_ALTER_SYNC_STATE_SET",
            CONTROLLER_ELECT_MASTER => "CONTROLLER_ELECT_MASTER",
            CONTROLLER_REGISTER_BROKER => "CONTROLLER_REGISTER_BROKER",
            CONTROLLER_GET_REPLICA_INFO => "CONTROLLER_GET_REPLICA_INFO",
            CONTROLLER_GET_METADATA_INFO => "CONTROLLER_GET_METADATA_INFO",
            GET_BROKER_EPOCH_CACHE => "GET_BROKER_EPOCH_CACHE",
            NOTIFY_BROKER_ROLE_CHANGED => "NOTIFY_BROKER_ROLE_CHANGED",
            CONTROLLER_GET_NEXT_BROKER_ID => "CONTROLLER_GET_NEXT_BROKER_ID",
            CONTROLLER_APPLY_BROKER_ID => "CONTROLLER_APPLY_BROKER_ID",
            _ => return None,
        })
    }
}

/// Response codes (`RemotingSysResponseCode`, 0..=4, and `ResponseCode`, which extends it),
/// only those rocketha answers or acts on.
#[cfg_attr(feature = "harness", visibility::make(pub))]
pub(crate) mod response_code {
    pub const SUCCESS: i32 = 0;
    pub(crate) const SYSTEM_ERROR: i32 = 1;
    /// A worker's queue is full: the request was not run (`[REJECTREQUEST]system busy`).
    pub(crate) const SYSTEM_BUSY: i32 = 2;
    pub(crate) const REQUEST_CODE_NOT_SUPPORTED: i32 = 3;
    pub(crate) const FLUSH_DISK_TIMEOUT: i32 = 10;
    pub(crate) const SLAVE_NOT_AVAILABLE: i32 = 11;
    pub(crate) const FLUSH_SLAVE_TIMEOUT: i32 = 12;
    pub(crate) const MESSAGE_ILLEGAL: i32 = 13;
    pub(crate) const SERVICE_NOT_AVAILABLE: i32 = 14;
    pub(crate) const NO_PERMISSION: i32 = 16;
    pub(crate) const TOPIC_NOT_EXIST: i32 = 17;
    pub(crate) const PULL_NOT_FOUND: i32 = 19;
    pub(crate) const PULL_RETRY_IMMEDIATELY: i32 = 20;
    pub(crate) const PULL_OFFSET_MOVED: i32 = 21;
    pub(crate) const QUERY_NOT_FOUND: i32 = 22;
    pub(crate) const SUBSCRIPTION_PARSE_FAILED: i32 = 23;
    pub(crate) const SUBSCRIPTION_NOT_EXIST: i32 = 24;
    pub(crate) const SUBSCRIPTION_NOT_LATEST: i32 = 25;
    pub(crate) const SUBSCRIPTION_GROUP_NOT_EXIST: i32 = 26;
    pub(crate) const INVALID_PARAMETER: i32 = 29;
    pub(crate) const CONSUMER_NOT_ONLINE: i32 = 206;
    pub(crate) const CONSUME_MSG_TIMEOUT: i32 = 207;
    /// An ack or an invisible-time change for an offset outside the queue.
    pub(crate) const NO_MESSAGE: i32 = 208;
    /// A pop found nothing and could not be held: too many are held already.
    pub(crate) const POLLING_FULL: i32 = 209;
    /// A pop found nothing within its `pollTime`.
    pub(crate) const POLLING_TIMEOUT: i32 = 210;
    pub(crate) const ILLEGAL_OPERATION: i32 = 604;
    /// The controller answered a request only its Raft leader takes.
    pub(crate) const CONTROLLER_NOT_LEADER: i32 = 2007;
    /// CONTROLLER_GET_REPLICA_INFO for a group the controller has no record of.
    pub(crate) const CONTROLLER_BROKER_METADATA_NOT_EXIST: i32 = 2008;
    /// CONTROLLER_ELECT_MASTER: the group has a live master already (its info comes along).
    pub(crate) const CONTROLLER_MASTER_STILL_EXIST: i32 = 2011;

    /// A send answered with this code stored its message: the waits that fell short
    /// (`FLUSH_*_TIMEOUT`, `SLAVE_NOT_AVAILABLE`) still leave it in the master's log.
    pub(crate) fn send_stored(code: i32) -> bool {
        matches!(
            code,
            SUCCESS | FLUSH_DISK_TIMEOUT | FLUSH_SLAVE_TIMEOUT | SLAVE_NOT_AVAILABLE
        )
    }
}

/// The peer's implementation language (`LanguageCode.java`): a byte in the ROCKETMQ header, the
/// constant's name in the JSON one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LanguageCode {
    Java,
    Cpp,
    Dotnet,
    Python,
    Delphi,
    Erlang,
    Ruby,
    Other,
    Http,
    Go,
    Php,
    Oms,
    Rust,
    NodeJs,
}

impl LanguageCode {
    pub(crate) const ALL: [LanguageCode; 14] = [
        LanguageCode::Java,
        LanguageCode::Cpp,
        LanguageCode::Dotnet,
        LanguageCode::Python,
        LanguageCode::Delphi,
        LanguageCode::Erlang,
        LanguageCode::Ruby,
        LanguageCode::Other,
        LanguageCode::Http,
        LanguageCode::Go,
        LanguageCode::Php,
        LanguageCode::Oms,
        LanguageCode::Rust,
        LanguageCode::NodeJs,
    ];

    pub(crate) fn code(self) -> u8 {
        match self {
            LanguageCode::Java => 0,
            LanguageCode::Cpp => 1,
            LanguageCode::Dotnet => 2,
            LanguageCode::Python => 3,
            LanguageCode::Delphi => 4,
            LanguageCode::Erlang => 5,
            LanguageCode::Ruby => 6,
            LanguageCode::Other => 7,
            LanguageCode::Http => 8,
            LanguageCode::Go => 9,
            LanguageCode::Php => 10,
            LanguageCode::Oms => 11,
            LanguageCode::Rust => 12,
            LanguageCode::NodeJs => 13,
        }
    }

    /// The Java enum constant's name, as fastjson writes it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            LanguageCode::Java => "JAVA",
            LanguageCode::Cpp => "CPP",
            LanguageCode::Dotnet => "DOTNET",
            LanguageCode::Python => "PYTHON",
            LanguageCode::Delphi => "DELPHI",
            LanguageCode::Erlang => "ERLANG",
            LanguageCode::Ruby => "RUBY",
            LanguageCode::Other => "OTHER",
            LanguageCode::Http => "HTTP",
            LanguageCode::Go => "GO",
            LanguageCode::Php => "PHP",
            LanguageCode::Oms => "OMS",
            LanguageCode::Rust => "RUST",
            LanguageCode::NodeJs => "NODE_JS",
        }
    }

    pub(crate) fn from_code(code: u8) -> Option<LanguageCode> {
        LanguageCode::ALL.into_iter().find(|l| l.code() == code)
    }

    pub(crate) fn from_name(name: &str) -> Option<LanguageCode> {
        LanguageCode::ALL.into_iter().find(|l| l.name() == name)
    }
}

/// How a frame's header is serialized: the top byte of the frame's second word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "harness", visibility::make(pub))]
pub(crate) enum SerializeType {
    Json,
    RocketMq,
}

impl SerializeType {
    pub(crate) fn code(self) -> u8 {
        match self {
            SerializeType::Json => 0,
            SerializeType::RocketMq => 1,
        }
    }

    pub(crate) fn from_code(code: u8) -> Option<SerializeType> {
        match code {
            0 => Some(SerializeType::Json),
            1 => Some(SerializeType::RocketMq),
            _ => None,
        }
    }

    /// The Java enum constant's name (`serializeTypeCurrentRPC` in a JSON header).
    pub(crate) fn name(self) -> &'static str {
        match self {
            SerializeType::Json => "JSON",
            SerializeType::RocketMq => "ROCKETMQ",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn language_codes_match_rocketmq() {
        // LanguageCode.java: declaration order is the byte value.
        let names = [
            "JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO",
            "PHP", "OMS", "RUST", "NODE_JS",
        ];
        for (i, name) in names.iter().enumerate() {
            let l = LanguageCode::from_name(name).expect("known name");
            assert_eq!(usize::from(l.code()), i);
            assert_eq!(LanguageCode::from_code(i as u8), Some(l));
        }
        assert_eq!(LanguageCode::from_code(14), None);
        assert_eq!(LanguageCode::from_name("java"), None);
    }

    #[test]
    fn code_names() {
        assert_eq!(request_code::name(310), Some("SEND_MESSAGE_V2"));
        assert_eq!(request_code::name(105), Some("GET_ROUTEINFO_BY_TOPIC"));
        assert_eq!(request_code::name(9999), None);
        assert_eq!(SerializeType::from_code(1), Some(SerializeType::RocketMq));
        assert_eq!(SerializeType::from_code(2), None);
    }
}
