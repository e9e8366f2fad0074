//! RocketMQ's `SlaveSynchronize`: a slave fetches its master's topic config, consumer offsets,
//! delay offsets and subscription groups (`syncAll`) at start and every `slaveSyncInterval`
//! (60 s), from the master's client address the name servers name in their `registerBroker`
//! answer, so consumers that move to the slave find their topics and resume at their offsets.
//!
//! As RocketMQ does: the topic table is replaced when the master's data version differs; the
//! master's offsets overwrite the slave's key by key (`topic@group`), so offsets committed only
//! to the slave while the master was away survive until the master has the same key; the
//! subscription groups are replaced.

use std::net::ToSocketAddrs;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::consumer_offset::{ConsumerOffsetManager, ConsumerOffsetSerializeWrapper};
use super::subscription_group::{SubscriptionGroupManager, SubscriptionGroupWrapper};
use super::topic_config::TopicConfigManager;
use crate::protocol::body::TopicConfigSerializeWrapper;
use crate::protocol::json::parse_lenient;
use crate::remoting::{request_code, response_code, ClientTls, RemotingClient, RemotingCommand};
use crate::store::MessageStore;
use crate::sync::lock;

/// How long one sync call may take (RocketMQ's 3 s).
const SYNC_TIMEOUT: Duration = Duration::from_secs(3);

pub(crate) struct SlaveSynchronize {
    /// `masterAddr`: set by the registration thread, read by the sync.
    master_addr: Mutex<Option<String>>,
    /// This broker's own client address: a master named as itself is not synced from.
    broker_addr: String,
    topics: Arc<TopicConfigManager>,
    offsets: Arc<ConsumerOffsetManager>,
    groups: Arc<SubscriptionGroupManager>,
    /// Its `config/delayOffset.json` takes the master's delivery progress.
    store: Arc<MessageStore>,
    /// TLS to the master's client port (`tls.enable`).
    tls: Option<ClientTls>,
}

impl SlaveSynchronize {
    pub(crate) fn new(
        broker_addr: String,
        topics: Arc<TopicConfigManager>,
        offsets: Arc<ConsumerOffsetManager>,
        groups: Arc<SubscriptionGroupManager>,
        store: Arc<MessageStore>,
        tls: Option<ClientTls>,
    ) -> Self {
        Self {
            master_addr: Mutex::new(None),
            broker_addr,
            topics,
            offsets,
            groups,
            store,
            tls,
        }
    }

    /// `setMasterAddr`; true when it changed (the caller syncs at once).
    pub(crate) fn set_master_addr(&self, addr: Option<String>) -> bool {
        let mut current = lock(&self.master_addr);
        let changed = *current != addr;
        *current = addr;
        changed
    }

    pub(crate) fn master_addr(&self) -> Option<String> {
        lock(&self.master_addr).clone()
    }

    /// `syncAll`: every table, or the reason the first failing one failed (the others are
    /// still tried). `Ok(false)` when no master is known yet.
    pub(crate) fn sync_all(&self) -> Result<bool, String> {
        let Some(master) = self.master_addr().filter(|m| *m != self.broker_addr) else {
            return Ok(false);
        };
        let addr = master
            .to_socket_addrs()
            .map_err(|e| format!("master address {master}: {e}"))?
            .next()
            .ok_or_else(|| format!("master address {master} resolves to nothing"))?;
        let mut client = RemotingClient::connect_with(addr, SYNC_TIMEOUT, self.tls.clone())
            .map_err(|e| format!("master {master}: {e}"))?;
        let mut fetch = |code: i32, what: &str| -> Result<Vec<u8>, String> {
            let r = client
                .invoke(RemotingCommand::request(code, 0), SYNC_TIMEOUT)
                .map_err(|e| format!("{what} from master {master}: {e}"))?;
            if r.code != response_code::SUCCESS {
                return Err(format!(
                    "{what} from master {master}: code {}: {}",
                    r.code,
                    r.remark.unwrap_or_default()
                ));
            }
            Ok(r.body)
        };
        let mut first_error = None;
        let mut keep = |result: Result<(), String>| {
            if let Err(e) = result {
                first_error.get_or_insert(e);
            }
        };
        keep(
            fetch(request_code::GET_ALL_TOPIC_CONFIG, "GET_ALL_TOPIC_CONFIG").and_then(|body| {
                let wrapper: TopicConfigSerializeWrapper =
                    parse_lenient(&body, "TopicConfigSerializeWrapper")
                        .map_err(|e| e.to_string())?;
                self.topics.replace(wrapper).map_err(|e| e.to_string())
            }),
        );
        keep(
            fetch(
                request_code::GET_ALL_CONSUMER_OFFSET,
                "GET_ALL_CONSUMER_OFFSET",
            )
            .and_then(|body| {
                let wrapper: ConsumerOffsetSerializeWrapper =
                    parse_lenient(&body, "ConsumerOffsetSerializeWrapper")
                        .map_err(|e| e.to_string())?;
                self.offsets
                    .put_all(wrapper.offset_table)
                    .map_err(|e| e.to_string())
            }),
        );
        keep(
            fetch(request_code::GET_ALL_DELAY_OFFSET, "GET_ALL_DELAY_OFFSET")
                .and_then(|body| self.store.schedule().replace(&body)),
        );
        keep(
            fetch(
                request_code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
                "GET_ALL_SUBSCRIPTIONGROUP_CONFIG",
            )
            .and_then(|body| {
                let wrapper: SubscriptionGroupWrapper =
                    parse_lenient(&body, "SubscriptionGroupWrapper").map_err(|e| e.to_string())?;
                self.groups.replace(wrapper).map_err(|e| e.to_string())
            }),
        );
        first_error.map_or(Ok(true), Err)
    }
}
