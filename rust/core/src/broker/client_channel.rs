//! RocketMQ's `ClientChannelInfo`: what each connection's client said of itself in its
//! heartbeats, kept by the `ClientManageProcessor` and listed by `mqadmin consumerConnection`
//! and `producerConnection`.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

/// What one connection's client told the broker in its heartbeats (`ClientChannelInfo` and the
/// groups it belongs to).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientChannel {
    pub client_id: String,
    /// `ip:port` of the client's end of the connection.
    pub client_addr: String,
    /// The `LanguageCode` and `version` of its last heartbeat's header.
    pub language: String,
    pub version: i32,
    pub producer_groups: BTreeSet<String>,
    pub consumer_groups: BTreeSet<String>,
}

/// The clients by connection id. A lock: heartbeats on the loop thread, reads from others.
pub(crate) type ClientChannels = Mutex<HashMap<u64, ClientChannel>>;
