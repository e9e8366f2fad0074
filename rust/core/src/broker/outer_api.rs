//! RocketMQ's `BrokerOuterAPI`: REGISTER_BROKER to every name server (at start, every
//! `registerNameServerPeriod`, and at once when a topic changes) and UNREGISTER_BROKER at
//! shutdown. A name server that is down is reported and tried again next period; it never
//! holds the broker up. A slave without `haMasterAddress` follows the master's HA address the
//! name servers answer with (`updateMasterHAServerAddrPeriodically`, seed 004). A slave with
//! both `haMasterAddress` and name servers replicates only once a name server confirms that
//! address is its own group's master: RocketMQ would silently copy whatever log it points at,
//! another group's included.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::register_service::HeldAnswers;
use super::replicas_manager::ReplicasManager;
use super::slave_sync::SlaveSynchronize;
use super::topic_config::{TopicConfigError, TopicConfigManager, Unregistered};
use super::BrokerSettings;
use crate::ha::client::HaClient;
use crate::protocol::body::{mq_version, perm, RegisterBrokerBody, TopicConfigSerializeWrapper};
use crate::protocol::body_crc;
use crate::remoting::header::{
    RegisterBrokerRequestHeader, RegisterBrokerResponseHeader, UnRegisterBrokerRequestHeader,
};
use crate::remoting::{
    request_code, response_code, ClientTls, RemotingClient, RemotingCommand, ServerEventKind,
    ServerEvents,
};
use crate::sync::{lock, ServiceThread, ServiceWaiter, Woke};

/// Connect and answer timeout of one name server call: short, so a dead name server costs a
/// period's registration little time and shutdown waits little.
const NAMESRV_TIMEOUT: Duration = Duration::from_secs(3);
/// A registration whose JSON is longer is sent compressed, whatever `compressedRegister`
/// says: a name server refuses frames over 16 MiB (about 100,000 topics as JSON).
const COMPRESS_ABOVE: usize = 4 * 1024 * 1024;
/// How soon a slave in controller mode registers again while the name servers do not name the
/// master the controller chose: after an election, the new master registers at about the
/// moment its slaves do, and the next registration period can be 30 s away.
const FOLLOW_RETRY: Duration = Duration::from_millis(500);

/// Who the broker is to the name servers.
#[derive(Debug, Clone)]
pub(crate) struct Registration {
    /// The cluster, name and id, and `brokerPermission`, which an operator may change.
    pub(crate) settings: Arc<BrokerSettings>,
    /// `brokerIP1:listenPort`.
    pub(crate) broker_addr: String,
    /// The HA address a slave of this broker connects to ("" on a slave).
    pub(crate) ha_server_addr: String,
}

/// One kept connection per name server: the name server forgets a broker whose connection
/// closes, so it is not reopened per call.
struct NameServerLink {
    addr: String,
    client: Option<RemotingClient>,
}

/// Which name servers took a registration.
struct Answered {
    any: bool,
    all: bool,
}

/// What the name servers said of a configured `haMasterAddress`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum MasterCheck {
    Confirmed,
    /// The name server names this other address as the group's master.
    Refused(String),
    /// No master of the group is registered yet.
    NoMaster,
    /// No name server answered: replicating unchecked.
    Unchecked,
}

pub(crate) struct BrokerOuterApi {
    links: Mutex<Vec<NameServerLink>>,
    me: Registration,
    topics: Arc<TopicConfigManager>,
    /// The slave's HA client to point at the master the name servers name.
    follow: Option<Arc<HaClient>>,
    /// A slave's configured `haMasterAddress`, which `follow` takes only once a name server
    /// names it as this group's master (see [`Self::check_master`]).
    configured_master: Option<String>,
    /// Controller mode: `follow` and the metadata sync take the name servers' answer only once
    /// it names the master the controller chose, not one the controller deposed.
    replicas: Option<Arc<ReplicasManager>>,
    /// The last verdict on `configured_master` reported, so each is logged once, not every
    /// registration period.
    master_check: Mutex<Option<MasterCheck>>,
    /// A slave's metadata sync, told the master's client address the name servers name, and
    /// the signal that runs it at once when that address changes.
    slave_sync: Option<(Arc<SlaveSynchronize>, Arc<ServiceThread>)>,
    events: Arc<ServerEvents>,
    /// TLS to the name servers (`tls.enable`).
    tls: Option<ClientTls>,
}

impl BrokerOuterApi {
    /// `namesrv_addr` is RocketMQ's `namesrvAddr`: addresses separated by `;`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        namesrv_addr: &str,
        me: Registration,
        topics: Arc<TopicConfigManager>,
        follow: Option<Arc<HaClient>>,
        (configured_master, replicas): (Option<String>, Option<Arc<ReplicasManager>>),
        slave_sync: Option<(Arc<SlaveSynchronize>, Arc<ServiceThread>)>,
        events: Arc<ServerEvents>,
        tls: Option<ClientTls>,
    ) -> Self {
        let links = namesrv_addr
            .split(';')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(|addr| NameServerLink {
                addr: addr.to_owned(),
                client: None,
            })
            .collect();
        Self {
            links: Mutex::new(links),
            me,
            topics,
            follow,
            configured_master,
            replicas,
            master_check: Mutex::new(None),
            slave_sync,
            events,
            tls,
        }
    }

    /// Registers the whole table every `period`, and the topics that changed when signalled
    /// (`registerIncrementBrokerData`), until stopped; unregisters last. The answers `held`
    /// for changes go out once those are registered (see [`HeldAnswers`]). The first
    /// registration is the broker's start's (see `BrokerController::start`). Topics sends
    /// created are persisted first: woken by their creation, this thread keeps the fsync off
    /// the remoting loop, and a route the name servers hand out is on disk. The last ones are
    /// persisted by `BrokerController::shutdown`, once no send can come.
    pub(crate) fn run(&self, waiter: &ServiceWaiter, held: &HeldAnswers, period: Duration) {
        let mut last_whole = Instant::now();
        loop {
            let due = last_whole.checked_add(self.next_period(period));
            if waiter.wait_for_running(due) == Woke::Stopped {
                break;
            }
            let answers = held.take();
            self.persist_topics();
            match self.topics.take_unregistered() {
                Unregistered::Topics(changed) if due.is_some_and(|d| Instant::now() < d) => {
                    // A name server the increment missed needs the whole table.
                    let sent = changed.topic_config_table.is_empty()
                        || self.register_broker(changed, "the changed topics").all;
                    if !sent {
                        self.topics.register_all_next();
                    }
                }
                _ => {
                    self.register_broker_all();
                    last_whole = Instant::now();
                }
            }
            answers.send();
        }
        // Stopping: what the changes answer for is the broker's, registered at its next start.
        held.take().send();
        self.unregister_broker_all();
    }

    /// `period`, or [`FOLLOW_RETRY`] for a slave in controller mode that follows no master yet.
    fn next_period(&self, period: Duration) -> Duration {
        let waiting = self.replicas.is_some()
            && self
                .follow
                .as_ref()
                .is_some_and(|ha| ha.master_address().is_none());
        if waiting {
            period.min(FOLLOW_RETRY)
        } else {
            period
        }
    }

    /// [`TopicConfigManager::persist_unsaved`], a failure reported (and tried again next time).
    fn persist_topics(&self) {
        report_topics_persist(self.topics.persist_unsaved(), &self.events);
    }

    fn invoke(
        &self,
        link: &mut NameServerLink,
        request: RemotingCommand,
    ) -> Result<RemotingCommand, String> {
        if link.client.is_none() {
            let addr: SocketAddr = link
                .addr
                .to_socket_addrs()
                .map_err(|e| format!("bad name server address: {e}"))?
                .next()
                .ok_or("the name server address resolves to nothing")?;
            let client = RemotingClient::connect_with(addr, NAMESRV_TIMEOUT, self.tls.clone())
                .map_err(|e| e.to_string())?;
            link.client = Some(client);
        }
        let Some(client) = link.client.as_mut() else {
            return Err("not connected".into());
        };
        client.invoke(request, NAMESRV_TIMEOUT).map_err(|e| {
            link.client = None;
            e.to_string()
        })
    }

    /// The topics as registered: a broker whose `brokerPermission` takes no sends (or no
    /// pulls) registers every topic without that permission, so clients stop routing them
    /// here (RocketMQ's `registerBrokerAll`).
    fn limit_to_broker_permission(&self, topics: &mut TopicConfigSerializeWrapper) {
        let broker = i32::try_from(self.me.settings.broker_permission.get()).unwrap_or(0);
        let all = perm::PERM_READ | perm::PERM_WRITE;
        if broker & all != all {
            for config in topics.topic_config_table.values_mut() {
                config.perm &= broker;
            }
        }
    }

    /// `registerBrokerAll`: the whole topic config to every name server.
    pub(crate) fn register_broker_all(&self) {
        self.topics.registering_whole();
        let whole = self.topics.wrapper();
        if !self.register_broker(whole, "the whole table").any && !lock(&self.links).is_empty() {
            self.unchecked_master();
        }
    }

    /// REGISTER_BROKER of `topics` to every name server.
    fn register_broker(&self, mut topics: TopicConfigSerializeWrapper, what: &str) -> Answered {
        self.limit_to_broker_permission(&mut topics);
        let registered = RegisterBrokerBody {
            topic_config_serialize_wrapper: topics,
            filter_server_list: Vec::new(),
        };
        let json = Some(&registered)
            .filter(|_| !self.me.settings.compressed_register)
            .map(RegisterBrokerBody::encode)
            .filter(|json| json.len() <= COMPRESS_ABOVE);
        let compressed = json.is_none();
        let body = json.unwrap_or_else(|| registered.encode_compressed());
        let me = &self.me;
        let header = RegisterBrokerRequestHeader {
            broker_name: me.settings.broker_name.clone(),
            broker_addr: me.broker_addr.clone(),
            cluster_name: me.settings.cluster_name.clone(),
            ha_server_addr: me.ha_server_addr.clone(),
            broker_id: me.settings.broker_id,
            heartbeat_timeout_millis: None,
            enable_acting_master: Some(false),
            compressed,
            body_crc32: body_crc(&body),
            zone_name: None,
        };
        let mut links = lock(&self.links);
        let mut answered = 0;
        for link in links.iter_mut() {
            let mut request = RemotingCommand::request(request_code::REGISTER_BROKER, 0);
            request.version = mq_version::V5_0_0;
            request.write_custom_header(&header);
            request.body = body.clone();
            match self.invoke(link, request) {
                Ok(r) if r.code == response_code::SUCCESS => {
                    answered += 1;
                    self.registered(&link.addr, &r)
                }
                Ok(r) => self.report(
                    &link.addr,
                    "REGISTER_FAILED",
                    format!(
                        "{what}: answered code {}: {}; trying again next period",
                        r.code,
                        r.remark.unwrap_or_default()
                    ),
                ),
                Err(e) => self.report(
                    &link.addr,
                    "REGISTER_FAILED",
                    format!("{what}: {e}; trying again next period"),
                ),
            }
        }
        Answered {
            any: answered > 0,
            all: answered == links.len(),
        }
    }

    /// No name server could say who the group's master is: a slave that is not replicating yet
    /// takes its configured `haMasterAddress` unchecked, as RocketMQ would, and says so.
    fn unchecked_master(&self) {
        let (Some(ha), Some(configured)) = (&self.follow, &self.configured_master) else {
            return;
        };
        if ha.master_address().is_some() {
            return;
        }
        self.set_master(
            "-",
            configured,
            MasterCheck::Unchecked,
            format!(
                "no name server answered, so haMasterAddress={configured} cannot be checked \
                 against broker {}'s registered master; replicating from it unchecked",
                self.me.settings.broker_name
            ),
        );
    }

    /// Points the HA client at `master` (when it is not there already) and reports why once.
    fn set_master(&self, namesrv: &str, master: &str, check: MasterCheck, why: String) {
        let Some(ha) = &self.follow else { return };
        if ha.master_address().as_deref() != Some(master) {
            if let Err(e) = ha.update_master_address(Some(master.to_owned())) {
                return self.report(namesrv, "MASTER_HA_ADDRESS", e.to_string());
            }
        }
        self.note_check(namesrv, check, why, false);
    }

    /// Reports a verdict on the configured master the first time it is reached.
    fn note_check(&self, namesrv: &str, check: MasterCheck, why: String, problem: bool) {
        let mut last = lock(&self.master_check);
        if last.as_ref() != Some(&check) {
            *last = Some(check);
            let kind = ServerEventKind::Processor("MASTER_HA_ADDRESS");
            self.events.push(namesrv, kind, why, problem);
        }
    }

    /// `haMasterAddress` against the group's master the name server named (`named`, empty
    /// when the group has none registered): replicate when they agree, stop and say so when
    /// they do not.
    fn check_master(&self, namesrv: &str, configured: &str, named: Option<String>) {
        let Some(ha) = &self.follow else { return };
        let group = &self.me.settings.broker_name;
        match named {
            Some(named) if same_address(&named, configured) => self.set_master(
                namesrv,
                configured,
                MasterCheck::Confirmed,
                format!(
                    "haMasterAddress={configured} is broker {group}'s master, as the name \
                     server confirms; replicating from it"
                ),
            ),
            Some(named) => {
                if ha.master_address().is_some() {
                    if let Err(e) = ha.update_master_address(None) {
                        self.report(namesrv, "MASTER_HA_ADDRESS", e.to_string());
                    }
                }
                let why = format!(
                    "refusing to replicate: haMasterAddress={configured} is not the master of \
                     this slave's group {group}: the name server names {named} as broker \
                     {group}'s master, so {configured} serves another broker group's log. \
                     Remove haMasterAddress (a slave learns its master from the name server) \
                     or set it to {named}"
                );
                self.note_check(namesrv, MasterCheck::Refused(named), why, true);
            }
            None if ha.master_address().is_none() => {
                let why = format!(
                    "waiting for broker {group}'s master to register before replicating from \
                     haMasterAddress={configured}: the name server names no master of the \
                     group yet, so the address cannot be checked"
                );
                self.note_check(namesrv, MasterCheck::NoMaster, why, true);
            }
            None => {}
        }
    }

    fn registered(&self, namesrv: &str, response: &RemotingCommand) {
        self.events.push(
            namesrv,
            ServerEventKind::Processor("REGISTERED"),
            format!("registered {} with the name server", self.me.broker_addr),
            false,
        );
        if self.follow.is_none() && self.slave_sync.is_none() {
            return;
        }
        let header: RegisterBrokerResponseHeader = match response.decode_custom_header() {
            Ok(h) => h,
            Err(e) => return self.report(namesrv, "REGISTER_FAILED", e.to_string()),
        };
        if let Some(chosen) = self.controller_master() {
            let named = header.master_addr.as_deref().unwrap_or_default();
            if !same_address(named, &chosen) {
                let why = format!(
                    "waiting for the name server to name {chosen}, the master the controller \
                     chose, as broker {}'s master (it names {})",
                    self.me.settings.broker_name,
                    if named.is_empty() { "none" } else { named }
                );
                return self.note_check(namesrv, MasterCheck::NoMaster, why, false);
            }
        }
        if let Some((sync, wake)) = &self.slave_sync {
            let master = header.master_addr.clone().filter(|a| !a.is_empty());
            if master.is_some() && sync.set_master_addr(master) {
                wake.wakeup();
            }
        }
        let Some(ha) = &self.follow else { return };
        let named = header.ha_server_addr.filter(|a| !a.is_empty());
        if let Some(configured) = &self.configured_master {
            return self.check_master(namesrv, configured, named);
        }
        let Some(master) = named else {
            return;
        };
        if ha.master_address().as_deref() == Some(master.as_str()) {
            return;
        }
        match ha.update_master_address(Some(master.clone())) {
            Ok(()) => self.events.push(
                namesrv,
                ServerEventKind::Processor("MASTER_HA_ADDRESS"),
                format!("replicating from the master's HA address {master}, as the name server answered"),
                false,
            ),
            Err(e) => self.report(namesrv, "MASTER_HA_ADDRESS", e.to_string()),
        }
    }

    /// The master's client address the controller last named, in controller mode.
    fn controller_master(&self) -> Option<String> {
        self.replicas.as_ref()?.state().master_address
    }

    fn report(&self, namesrv: &str, what: &'static str, reason: String) {
        self.events
            .push(namesrv, ServerEventKind::Processor(what), reason, true);
    }

    /// `unregisterBrokerAll`, at shutdown; failures only reported.
    fn unregister_broker_all(&self) {
        let header = UnRegisterBrokerRequestHeader {
            broker_name: self.me.settings.broker_name.clone(),
            broker_addr: self.me.broker_addr.clone(),
            cluster_name: self.me.settings.cluster_name.clone(),
            broker_id: self.me.settings.broker_id,
        };
        let mut links = lock(&self.links);
        for link in links.iter_mut() {
            // Only name servers the broker reached: a dead one knows nothing to forget.
            if link.client.is_none() {
                continue;
            }
            let mut request = RemotingCommand::request(request_code::UNREGISTER_BROKER, 0);
            request.write_custom_header(&header);
            match self.invoke(link, request) {
                Ok(r) if r.code == response_code::SUCCESS => self.events.push(
                    link.addr.as_str(),
                    ServerEventKind::Processor("UNREGISTERED"),
                    format!("unregistered {}", self.me.broker_addr),
                    false,
                ),
                Ok(r) => self.report(
                    &link.addr,
                    "UNREGISTER_FAILED",
                    format!("answered code {}: {}", r.code, r.remark.unwrap_or_default()),
                ),
                Err(e) => self.report(&link.addr, "UNREGISTER_FAILED", e),
            }
            link.client = None;
        }
    }
}

/// Whether two `host:port` addresses reach the same socket: equal as written, or resolving to
/// a common address (`localhost:10912` is `127.0.0.1:10912`).
/// A failed save of the topics reported (what it did not save is tried again next time).
pub(crate) fn report_topics_persist(result: Result<(), TopicConfigError>, events: &ServerEvents) {
    if let Err(e) = result {
        events.push(
            "topics",
            ServerEventKind::Processor("TOPIC_CONFIG_PERSIST_FAILED"),
            e.to_string(),
            true,
        );
    }
}

fn same_address(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let resolve = |s: &str| -> Vec<SocketAddr> {
        s.to_socket_addrs()
            .map(|addrs| addrs.collect())
            .unwrap_or_default()
    };
    let theirs = resolve(b);
    resolve(a).iter().any(|x| theirs.contains(x))
}
