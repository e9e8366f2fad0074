//! `ConsumerConnection` and `ProducerConnection`: who is connected in a group and, for a
//! consumer group, what it subscribes to and how it consumes (GET_CONSUMER_CONNECTION_LIST and
//! GET_PRODUCER_CONNECTION_LIST; `mqadmin consumerConnection`, `producerConnection`).

use std::collections::BTreeMap;

use serde::Serialize;

use super::json::{to_json, JsonStyle};

/// `Connection`: one client's connection, as its heartbeats came.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Connection {
    pub(crate) client_id: String,
    /// `ip:port` of the client's end.
    pub(crate) client_addr: String,
    /// `LanguageCode`'s name (`JAVA`, `GO`, `RUST`, ...).
    pub(crate) language: String,
    /// The client's `MQVersion` ordinal.
    pub(crate) version: i32,
}

/// `SubscriptionData` as the Java side reads it back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SubscriptionBody {
    pub(crate) class_filter_mode: bool,
    pub(crate) topic: String,
    pub(crate) sub_string: String,
    pub(crate) tags_set: Vec<String>,
    pub(crate) code_set: Vec<i64>,
    pub(crate) sub_version: i64,
    pub(crate) expression_type: String,
}

/// `ConsumerConnection`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ConsumerConnection {
    pub(crate) connection_set: Vec<Connection>,
    pub(crate) subscription_table: BTreeMap<String, SubscriptionBody>,
    /// `CONSUME_ACTIVELY` (pull) or `CONSUME_PASSIVELY` (push).
    pub(crate) consume_type: String,
    /// `CLUSTERING` or `BROADCASTING`.
    pub(crate) message_model: String,
    pub(crate) consume_from_where: String,
}

impl ConsumerConnection {
    pub(crate) fn encode(&self) -> Vec<u8> {
        to_json(self, JsonStyle::Fastjson).into_bytes()
    }
}

/// `ProducerConnection`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ProducerConnection {
    pub(crate) connection_set: Vec<Connection>,
}

impl ProducerConnection {
    pub(crate) fn encode(&self) -> Vec<u8> {
        to_json(self, JsonStyle::Fastjson).into_bytes()
    }
}
