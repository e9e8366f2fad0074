//! The broker's side of RocketMQ's remoting protocol: its request processors and tables under
//! RocketMQ's names (`SendMessageProcessor`, `PullMessageProcessor`, `TopicConfigManager`,
//! `ConsumerOffsetManager`, `ConsumerManager`, `SubscriptionGroupManager`, `SlaveSynchronize`),
//! serving the store they share with the HA service, and the [`BrokerController`] that serves
//! them on the client port and registers the broker with the name servers.

pub(crate) mod attribute;
pub(crate) mod broker_stats;
pub(crate) mod client_channel;
pub(crate) mod config;
mod consume_tables;
pub(crate) mod consumer_manager;
pub(crate) mod consumer_offset;
pub(crate) mod consumer_order_info;
pub(crate) mod controller;
mod journaled_table;
pub(crate) mod live_setting;
pub(crate) mod outer_api;
pub(crate) mod pop;
pub(crate) mod processor;
pub(crate) mod producer_manager;
pub(crate) mod pull_request_hold;
pub(crate) mod rebalance_lock;
mod register_service;
pub mod replicas_manager;
pub(crate) mod slave_sync;
pub(crate) mod store_stats;
pub(crate) mod subscription_group;
pub(crate) mod topic_attributes;
pub(crate) mod topic_config;
pub(crate) mod transaction;

pub use client_channel::ClientChannel;
pub use config::{
    parse_properties, BrokerConfig, ConfigError, Loaded, PropertiesError, Value, IGNORED_KEYS,
};
pub use controller::{BrokerController, BrokerControllerConfig, BrokerError};
pub use live_setting::{LiveFlag, LiveNumber};
pub use pop::PopSettings;
pub use processor::admin::stats::ConsumerLag;

pub(crate) use consume_tables::ConsumeTables;

/// What the processors need to know of the broker (RocketMQ's `BrokerConfig` keys).
#[derive(Debug, Clone)]
pub struct BrokerSettings {
    /// `brokerClusterName`.
    pub cluster_name: String,
    /// `brokerName`.
    pub broker_name: String,
    /// `brokerId`: 0 is the master.
    pub broker_id: i64,
    /// `brokerRole=SLAVE`: sends are refused.
    pub is_slave: bool,
    /// `autoCreateTopicEnable` (changes at runtime).
    pub auto_create_topic: LiveFlag,
    /// `clusterTopicEnable`: the topic named after the cluster may be sent to and read, as
    /// well as name the brokers `createTopic(cluster, ...)` creates a topic on.
    pub cluster_topic_enable: bool,
    /// `brokerTopicEnable`: the same for the topic named after the broker.
    pub broker_topic_enable: bool,
    /// `defaultTopicQueueNums`.
    pub default_topic_queue_nums: i32,
    /// `maxTopicQueueNums`: the most queues UPDATE_AND_CREATE_TOPIC gives a topic.
    pub max_topic_queue_nums: i32,
    /// `maxMessageSize` (changes at runtime).
    pub max_message_size: LiveNumber,
    /// `brokerPermission` (changes at runtime).
    pub broker_permission: LiveNumber,
    /// `slaveReadEnable`: consumers that lag are sent to a slave, and a slave serves pulls
    /// (changes at runtime).
    pub slave_read_enable: LiveFlag,
    /// `whichBrokerWhenConsumeSlowly` of the subscription groups this broker creates.
    pub which_broker_when_consume_slowly: i64,
    /// `accessMessageInMemoryMaxRatio`: percent of RAM a consumer may lag before it is
    /// counted as reading from disk (and sent to a slave).
    pub access_message_in_memory_max_ratio: i32,
    /// `longPollingEnable`: a suspended pull is held for its `suspendTimeoutMillis` (else 1 s).
    pub long_polling_enable: bool,
    /// `compressedRegister`: registrations carry the topics compressed.
    pub compressed_register: bool,
    /// `rebalanceLockMaxLiveTime`: how long an orderly consumer's queue lock outlives its
    /// holder's last renewal.
    pub rebalance_lock_max_live_time: std::time::Duration,
    /// `enablePropertyFilter`: consumers may subscribe with SQL92 over message properties.
    pub enable_property_filter: bool,
    /// `autoCreateSubscriptionGroup` (changes at runtime).
    pub auto_create_subscription_group: LiveFlag,
    /// `maxTransferBytesOnMessageInMemory` / `maxTransferCountOnMessageInMemory`: one pull's
    /// bounds while its records are (likely) in the page cache.
    pub max_transfer_in_memory: TransferLimit,
    /// `maxTransferBytesOnMessageInDisk` / `maxTransferCountOnMessageInDisk`: smaller bounds
    /// for a consumer so far behind that its records are read from disk.
    pub max_transfer_in_disk: TransferLimit,
    /// How half messages wait for their producer and are checked back.
    pub transaction: TransactionSettings,
    /// `recallMessageEnable`: RECALL_MESSAGE cancels timer messages (RocketMQ's default: no).
    pub recall_message_enable: bool,
    /// `enableTopicMessageTypeCheck`: a send whose message is not of its topic's
    /// `message.type` is refused.
    pub enable_topic_message_type_check: bool,
    /// `enableMixedMessageType`: a topic may be created or changed to `message.type=MIXED`.
    pub enable_mixed_message_type: bool,
    /// Pop consumption's keys.
    pub pop: PopSettings,
}

/// `rejectTransactionMessage`, `transactionTimeOut`, `transactionCheckMax` and
/// `transactionCheckInterval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransactionSettings {
    pub reject: bool,
    pub time_out: std::time::Duration,
    pub check_max: i32,
    pub check_interval: std::time::Duration,
    /// `fileReservedTime`: a half message older than this is discarded unchecked, as its
    /// segment may be gone.
    pub file_reserved: std::time::Duration,
}

/// The most one pull answers with: whichever of the two is reached first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferLimit {
    pub bytes: usize,
    pub count: usize,
}

impl Default for BrokerSettings {
    /// RocketMQ's defaults, as [`BrokerConfig`] holds them.
    fn default() -> Self {
        BrokerConfig::default().settings()
    }
}
