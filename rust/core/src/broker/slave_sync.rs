//! RocketMQ's `SlaveSynchronize`: a slave fetches its master's topic config, consumer offsets,
//! delay offsets and subscription groups (`syncAll`) at start and every `slaveSyncInterval`
//! (60 s), from the master's client address the name servers name in their `registerBroker`
//! answer, so consumers that move to the slave find their topics and resume at their offsets.
//!
//! As RocketMQ does: the topic table is replaced when the master's data version differs; the
//! master's offsets overwrite the slave's key by key (`topic@group`), so offsets committed only
//! to the slave while the master was away survive until the master has the same key; the
//! subscription groups are replaced.
//!
//! rocketha's slave also names its topic and group tables' versions ([`SINCE_DATA_VERSION`]);
//! a rocketha master that still holds that version answers with only what changed since
//! ([`DELTA`]), so an unchanged table costs a few bytes instead of the whole table. RocketMQ's
//! master ignores the field and answers whole, as it answers its own slaves.

use std::net::ToSocketAddrs;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::de::DeserializeOwned;

use super::consumer_offset::{ConsumerOffsetManager, ConsumerOffsetSerializeWrapper};
use super::journaled_table::Delta;
use super::subscription_group::SubscriptionGroupManager;
use super::topic_config::TopicConfigManager;
use crate::protocol::body::DataVersion;
use crate::protocol::json::parse_lenient;
use crate::remoting::{request_code, response_code, ClientTls, RemotingClient, RemotingCommand};
use crate::store::MessageStore;
use crate::sync::lock;

/// How long one sync call may take (RocketMQ's 3 s).
const SYNC_TIMEOUT: Duration = Duration::from_secs(3);
/// rocketha: a GET_ALL_TOPIC_CONFIG or GET_ALL_SUBSCRIPTIONGROUP_CONFIG field, the slave's
/// table's data version as JSON.
pub(crate) const SINCE_DATA_VERSION: &str = "sinceDataVersion";
/// rocketha: the answer's field saying its body is a [`Delta`], not the whole table.
pub(crate) const DELTA: &str = "delta";

/// The version a sync request names, if any (a RocketMQ slave names none).
pub(crate) fn since(request: &RemotingCommand) -> Option<DataVersion> {
    let raw = request.ext_fields.get(SINCE_DATA_VERSION)?;
    serde_json::from_str(raw).ok()
}

/// A table's answer: `Delta` when the master sent one, else the whole table.
enum Answer<W, E> {
    Whole(W),
    Delta(Delta<E>),
}

impl<W: DeserializeOwned, E: DeserializeOwned> Answer<W, E> {
    fn parse(r: RemotingCommand, what: &'static str) -> Result<Self, String> {
        if r.ext_fields.get(DELTA).map(String::as_str) == Some("true") {
            let delta = serde_json::from_slice(&r.body)
                .map_err(|e| format!("{what} delta from the master: {e}"))?;
            return Ok(Self::Delta(delta));
        }
        parse_lenient(&r.body, what)
            .map(Self::Whole)
            .map_err(|e| e.to_string())
    }
}

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
        let mut link = MasterLink::connect(master, self.tls.clone())?;
        let results = [
            self.sync_topics(&mut link),
            link.ask(request_code::GET_ALL_CONSUMER_OFFSET, None)
                .and_then(|r| {
                    let wrapper: ConsumerOffsetSerializeWrapper =
                        parse_lenient(&r.body, "ConsumerOffsetSerializeWrapper")
                            .map_err(|e| e.to_string())?;
                    self.offsets
                        .put_all(wrapper.offset_table)
                        .map_err(|e| e.to_string())
                }),
            link.ask(request_code::GET_ALL_DELAY_OFFSET, None)
                .and_then(|r| self.store.schedule().replace(&r.body)),
            self.sync_groups(&mut link),
        ];
        results
            .into_iter()
            .collect::<Result<(), String>>()
            .map(|()| true)
    }

    /// `syncTimerCheckPoint` and `syncTimerMetrics`, more often than the rest (a promoted
    /// slave resumes delivery where the last one left it). `Ok(false)` when there is nothing
    /// to sync: no master known yet, or no timer on either side.
    pub(crate) fn sync_timer(&self) -> Result<bool, String> {
        let Some(timer) = self.store.timer() else {
            return Ok(false);
        };
        let Some(master) = self.master_addr().filter(|m| *m != self.broker_addr) else {
            return Ok(false);
        };
        let mut link = MasterLink::connect(master, self.tls.clone())?;
        let checkpoint = match link.ask(request_code::GET_TIMER_CHECK_POINT, None) {
            Ok(r) => r,
            // A master without a timer (timerWheelEnable=false, or 4.x) has no timer messages.
            Err(_) if link.refused_the_code() => return Ok(false),
            Err(e) => return Err(e),
        };
        timer.sync_checkpoint(&checkpoint.body)?;
        let metrics = link.ask(request_code::GET_TIMER_METRICS, None)?;
        timer.sync_metrics(&metrics.body)?;
        Ok(true)
    }

    fn sync_topics(&self, link: &mut MasterLink) -> Result<(), String> {
        let since = self.topics.data_version();
        let r = link.ask(request_code::GET_ALL_TOPIC_CONFIG, Some(since))?;
        match Answer::parse(r, "TopicConfigSerializeWrapper")? {
            Answer::Whole(wrapper) => self.topics.replace(wrapper),
            Answer::Delta(delta) => self.topics.apply_delta(delta),
        }
        .map_err(|e| e.to_string())
    }

    fn sync_groups(&self, link: &mut MasterLink) -> Result<(), String> {
        let since = self.groups.data_version();
        let r = link.ask(request_code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG, Some(since))?;
        match Answer::parse(r, "SubscriptionGroupWrapper")? {
            Answer::Whole(wrapper) => self.groups.replace(wrapper),
            Answer::Delta(delta) => self.groups.apply_delta(delta),
        }
        .map_err(|e| e.to_string())
    }
}

/// A connection to the master's client port for one sync.
struct MasterLink {
    master: String,
    client: RemotingClient,
    /// The last answer's code.
    last_code: Option<i32>,
}

impl MasterLink {
    fn connect(master: String, tls: Option<ClientTls>) -> Result<Self, String> {
        let addr = master
            .to_socket_addrs()
            .map_err(|e| format!("master address {master}: {e}"))?
            .next()
            .ok_or_else(|| format!("master address {master} resolves to nothing"))?;
        let client = RemotingClient::connect_with(addr, SYNC_TIMEOUT, tls)
            .map_err(|e| format!("master {master}: {e}"))?;
        Ok(Self {
            master,
            client,
            last_code: None,
        })
    }

    /// Whether the last answer refused the request itself (a code not supported, or a master
    /// without a timer store), rather than failing to serve it.
    fn refused_the_code(&self) -> bool {
        matches!(
            self.last_code,
            Some(response_code::REQUEST_CODE_NOT_SUPPORTED | response_code::SYSTEM_ERROR)
        )
    }

    /// One table's request, naming `since` when the slave holds a version of it.
    fn ask(&mut self, code: i32, since: Option<DataVersion>) -> Result<RemotingCommand, String> {
        let what = request_code::name(code).unwrap_or("a table");
        let master = &self.master;
        let mut request = RemotingCommand::request(code, 0);
        if let Some(version) = since {
            let json = serde_json::to_string(&version).unwrap_or_default();
            request.ext_fields.insert(SINCE_DATA_VERSION.into(), json);
        }
        let r = self
            .client
            .invoke(request, SYNC_TIMEOUT)
            .map_err(|e| format!("{what} from master {master}: {e}"))?;
        self.last_code = Some(r.code);
        if r.code != response_code::SUCCESS {
            return Err(format!(
                "{what} from master {master}: code {}: {}",
                r.code,
                r.remark.unwrap_or_default()
            ));
        }
        Ok(r)
    }
}
