//! The broker's side of RocketMQ's remoting protocol: its request processors under RocketMQ's
//! names (`SendMessageProcessor`, `TopicConfigManager`), serving the store they share with the
//! HA service.

// Served by the broker's client port (next step: the remoting server).
#![allow(dead_code)]

pub(crate) mod send;
pub(crate) mod topic_config;

/// What the processors need to know of the broker (RocketMQ's `BrokerConfig` keys).
#[derive(Debug, Clone)]
pub(crate) struct BrokerSettings {
    /// `brokerClusterName`.
    pub(crate) cluster_name: String,
    /// `brokerName`.
    pub(crate) broker_name: String,
    /// `brokerId`: 0 is the master.
    pub(crate) broker_id: i64,
    /// `brokerRole=SLAVE`: sends are refused.
    pub(crate) is_slave: bool,
    /// `autoCreateTopicEnable`.
    pub(crate) auto_create_topic: bool,
    /// `defaultTopicQueueNums`.
    pub(crate) default_topic_queue_nums: i32,
    /// `maxMessageSize`.
    pub(crate) max_message_size: usize,
    /// `brokerPermission`.
    pub(crate) broker_permission: i32,
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
