//! `HeartbeatData`: what a client tells each broker it uses, every heartbeat interval, of its
//! producer and consumer groups (the parts a broker keeps; unknown fields are ignored).

use serde::Deserialize;

/// `HeartbeatData`, the parts the broker keeps.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct HeartbeatData {
    #[serde(rename = "clientID")]
    pub(crate) client_id: String,
    #[serde(rename = "producerDataSet")]
    pub(crate) producer_data_set: Vec<GroupData>,
    #[serde(rename = "consumerDataSet")]
    pub(crate) consumer_data_set: Vec<ConsumerData>,
}

/// `ProducerData`: a producer's group.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct GroupData {
    #[serde(rename = "groupName")]
    pub(crate) group_name: String,
}

/// `ConsumerData` of a heartbeat, the parts the broker keeps.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct ConsumerData {
    pub(crate) group_name: String,
    pub(crate) consume_type: String,
    pub(crate) message_model: String,
    pub(crate) consume_from_where: String,
    pub(crate) subscription_data_set: Vec<SubscriptionWire>,
    /// Its retry topic is created with `TopicSysFlag`'s unit-sub flag.
    pub(crate) unit_mode: bool,
}

/// `SubscriptionData` as a heartbeat carries it.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct SubscriptionWire {
    pub(crate) topic: String,
    pub(crate) sub_string: String,
    pub(crate) sub_version: i64,
    pub(crate) expression_type: Option<String>,
}

/// `CheckClientRequestBody`: the subscription a consumer asks a broker to check before it
/// starts (CHECK_CLIENT_CONFIG).
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct CheckClientRequestBody {
    pub(crate) client_id: String,
    pub(crate) group: String,
    pub(crate) subscription_data: Option<SubscriptionWire>,
}
