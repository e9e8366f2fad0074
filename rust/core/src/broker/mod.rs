//! The broker's side of RocketMQ's remoting protocol: its request processors under RocketMQ's
//! names (`SendMessageProcessor`, `TopicConfigManager`), serving the store they share with the
//! HA service, and the [`BrokerController`] that serves them on the client port and registers
//! the broker with the name servers.

pub(crate) mod controller;
pub(crate) mod outer_api;
pub(crate) mod processor;
pub(crate) mod send;
pub(crate) mod topic_config;

pub use controller::{BrokerController, BrokerControllerConfig, BrokerError};
pub use processor::ClientChannel;

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
    /// `autoCreateTopicEnable`.
    pub auto_create_topic: bool,
    /// `defaultTopicQueueNums`.
    pub default_topic_queue_nums: i32,
    /// `maxMessageSize`.
    pub max_message_size: usize,
    /// `brokerPermission`.
    pub broker_permission: i32,
}

impl Default for BrokerSettings {
    /// RocketMQ's defaults.
    fn default() -> Self {
        Self {
            cluster_name: "DefaultCluster".into(),
            broker_name: "broker-a".into(),
            broker_id: 0,
            is_slave: false,
            auto_create_topic: true,
            default_topic_queue_nums: 8,
            max_message_size: 4 << 20,
            broker_permission: crate::namesrv::perm::PERM_READ | crate::namesrv::perm::PERM_WRITE,
        }
    }
}
