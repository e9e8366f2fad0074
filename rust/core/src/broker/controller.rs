//! RocketMQ's `BrokerController`: the client port (a [`RemotingServer`] serving the
//! [`BrokerProcessors`]) over a store and its HA side, the registration thread
//! ([`BrokerOuterApi`]) that keeps the name servers informed, and the housekeeping thread that
//! persists consumer offsets, drops silent consumers, reloads a changed `plain_acl.yml` and, on a
//! slave, runs [`SlaveSynchronize`].

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::client_channel::ClientChannel;
use super::consumer_manager::ConsumerManager;
use super::consumer_offset::ConsumerOffsetManager;
use super::consumer_order_info::ConsumerOrderInfoManager;
use super::outer_api::{report_topics_persist, BrokerOuterApi, Registration};
use super::processor::admin::runtime_info::RuntimeView;
use super::processor::{BrokerProcessors, BrokerTables};
use super::producer_manager::ProducerManager;
use super::register_service::RegisterService;
use super::replicas_manager::ReplicasManager;
use super::slave_sync::SlaveSynchronize;
use super::store_stats::StoreStatsService;
use super::subscription_group::SubscriptionGroupManager;
use super::topic_config::{TopicConfigError, TopicConfigManager};
use super::transaction::TransactionalMessageService;
use super::{BrokerSettings, ConsumeTables};
use crate::acl::plain_access_validator::PlainAccessValidator;
use crate::acl::{AclError, PlainPermissionManager};
use crate::ha::client::HaClient;
use crate::ha::master::HaMaster;
use crate::remoting::{ClientTls, RemotingServer, ServerConfig, ServerEvents};
use crate::store::MessageStore;
use crate::sync::{ServiceThread, ServiceWaiter, Woke};

#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// `config/topics.json` could not be read.
    #[error("broker topic config: {0}")]
    TopicConfig(String),
    /// `config/consumerOffset.json` or `config/subscriptionGroup.json` could not be read.
    #[error("broker consumer config: {0}")]
    ConsumerConfig(String),
    #[error("broker client port: {0}")]
    Io(#[from] std::io::Error),
    /// `aclEnable=true` and the `plain_acl.yml` could not be loaded.
    #[error("broker ACL: {0}")]
    Acl(#[from] AclError),
}

/// What the controller needs beyond the processors' [`BrokerSettings`].
#[derive(Debug, Clone)]
pub struct BrokerControllerConfig {
    pub settings: BrokerSettings,
    /// `brokerRole` as configured, for the runtime info.
    pub broker_role: String,
    /// `brokerIP1`: with the listen port, the address the name servers hand to clients.
    pub broker_ip1: String,
    /// `namesrvAddr`: `;`-separated; empty registers nowhere.
    pub namesrv_addr: String,
    /// `registerNameServerPeriod` (30 s).
    pub register_name_server_period: Duration,
    /// The HA address this broker's slaves connect to (a master's; "" on a slave).
    pub ha_server_addr: String,
    /// A slave without `haMasterAddress`: follow the master HA address the name servers give.
    pub update_master_ha_server_addr_periodically: bool,
    /// A slave's `haMasterAddress` when it also has name servers: its HA client starts with no
    /// master and replicates from this address once a name server confirms it is the group's.
    pub check_master_ha_server_addr: Option<String>,
    /// `flushConsumerOffsetInterval` (5 s): how often committed offsets reach the file.
    pub flush_consumer_offset_interval: Duration,
    /// `slaveSyncInterval` (rocketha's key; RocketMQ's is fixed at 60 s): how often a slave
    /// fetches its master's topics, offsets and groups.
    pub slave_sync_interval: Duration,
    /// `aclEnable=true`: the `plain_acl.yml` every request is checked against.
    pub acl_file: Option<PathBuf>,
    pub server: ServerConfig,
    /// TLS on the broker's own connections, to name servers and (a slave's) master
    /// (RocketMQ's `tls.enable`).
    pub client_tls: Option<ClientTls>,
    /// The whole `broker.conf`, for GET_BROKER_CONFIG and UPDATE_BROKER_CONFIG.
    pub broker_config: super::BrokerConfig,
    /// Controller mode: takes the controller's NOTIFY_BROKER_ROLE_CHANGED.
    pub replicas: Option<Arc<ReplicasManager>>,
}

impl Default for BrokerControllerConfig {
    /// RocketMQ's defaults, as [`BrokerConfig`](super::BrokerConfig) holds them.
    fn default() -> Self {
        super::BrokerConfig::default().controller_config()
    }
}

/// A broker's network side, running until [`BrokerController::shutdown`].
pub struct BrokerController {
    server: RemotingServer,
    /// RocketMQ's `fastRemotingServer` on `listenPort - 2` (the VIP channel), where RocketMQ's
    /// slaves sync from their master; none when that port is taken.
    vip_server: Option<RemotingServer>,
    pub(crate) processor: BrokerProcessors,
    /// The register loop, woken when the topics change.
    register: Arc<RegisterService>,
    /// The housekeeping thread, woken when a slave learns its master.
    housekeeping: Arc<ServiceThread>,
    /// Persisted at shutdown: the topics sends created since the register loop last did.
    pub(crate) topics: Arc<TopicConfigManager>,
    /// Its delay-level delivery stops (and writes its progress) at shutdown.
    store: Arc<MessageStore>,
    /// A slave's master, for the tests.
    #[cfg(test)]
    pub(crate) slave_sync: Option<Arc<SlaveSynchronize>>,
}

/// What the broker registers with the name servers as.
fn registration(
    settings: &Arc<BrokerSettings>,
    broker_addr: String,
    ha_server_addr: String,
) -> Registration {
    Registration {
        settings: settings.clone(),
        broker_addr,
        ha_server_addr,
    }
}

impl BrokerController {
    /// Serves `listener` (bound beforehand, so the store knows the real port) for `store`;
    /// `ha_master` on a master, `ha_client` on a slave: their state is in the runtime info,
    /// and the slave's client follows the name servers' master address.
    pub fn start(
        listener: TcpListener,
        store: Arc<MessageStore>,
        ha_master: Option<Arc<HaMaster>>,
        ha_client: Option<Arc<HaClient>>,
        config: BrokerControllerConfig,
    ) -> Result<Self, BrokerError> {
        let settings = Arc::new(config.settings.clone());
        let (topics, tables) = Self::initialize_metadata(&store, &settings)?;
        let acl = Self::initial_acl(&config)?;
        let register = Arc::new(RegisterService::new());
        let housekeeping = Arc::new(ServiceThread::new("broker-housekeeping"));
        let events = Arc::new(ServerEvents::default());
        let port = listener.local_addr()?.port();
        let broker_addr = format!("{}:{port}", config.broker_ip1);
        let slave_sync = settings
            .is_slave
            .then(|| Self::slave_synchronize(&broker_addr, &topics, &tables, &store, &config));
        let transactions = Self::start_master_services(&store, &topics, &tables, &settings)?;
        let stats = Arc::new(StoreStatsService::default());
        let processor = BrokerProcessors::start(
            BrokerTables {
                store: store.clone(),
                topics: topics.clone(),
                consume: tables.clone(),
                settings: settings.clone(),
                register: register.clone(),
                transactions,
            },
            Self::runtime_view(&config, ha_master, ha_client.clone(), stats.clone()),
            acl.clone(),
        )?;
        let vip_server = Self::start_vip_channel(&listener, &processor, &config, &events);
        let server = RemotingServer::start_on(
            listener,
            processor.table.clone(),
            config.server,
            events.clone(),
        )?;
        let outer = BrokerOuterApi::new(
            &config.namesrv_addr,
            registration(&settings, broker_addr, config.ha_server_addr.clone()),
            topics.clone(),
            ha_client.filter(|_| {
                config.update_master_ha_server_addr_periodically
                    || config.check_master_ha_server_addr.is_some()
            }),
            (
                config.check_master_ha_server_addr.clone(),
                config.replicas.clone(),
            ),
            slave_sync.clone().map(|s| (s, housekeeping.clone())),
            events.clone(),
            config.client_tls.clone(),
        );
        // As BrokerController.start: registered once before the broker counts as started, so
        // a client that asks the name servers right after finds its routes.
        outer.register_broker_all();
        let period = config.register_name_server_period;
        register.start(move |waiter, held| outer.run(&waiter, &held, period))?;
        let keeper = Housekeeping {
            tables,
            stats,
            slave_sync: slave_sync.clone(),
            events,
            flush_interval: config.flush_consumer_offset_interval,
            sync_interval: config.slave_sync_interval,
            acl,
        };
        housekeeping.start(move |waiter| keeper.run(&waiter))?;
        Ok(Self {
            server,
            vip_server,
            processor,
            register,
            housekeeping,
            topics,
            store,
            #[cfg(test)]
            slave_sync,
        })
    }

    /// `MixAll.brokerVIPChannel`: the same processors on `listenPort - 2`, which a RocketMQ
    /// slave's SlaveSynchronize (topics, offsets, the timer's checkpoint) dials. A port taken
    /// already is reported, not fatal: rocketha's own slaves and every client use the port.
    fn start_vip_channel(
        listener: &TcpListener,
        processor: &BrokerProcessors,
        config: &BrokerControllerConfig,
        events: &Arc<ServerEvents>,
    ) -> Option<RemotingServer> {
        let local = listener.local_addr().ok()?;
        let port = local.port().checked_sub(2).filter(|p| *p > 0)?;
        let started = TcpListener::bind((local.ip(), port)).and_then(|vip| {
            RemotingServer::start_on(
                vip,
                processor.table.clone(),
                config.server.clone(),
                events.clone(),
            )
        });
        match started {
            Ok(server) => Some(server),
            Err(e) => {
                events.push(
                    format!("{}:{port}", local.ip()),
                    crate::remoting::ServerEventKind::Processor("VIP_CHANNEL_UNAVAILABLE"),
                    format!(
                        "the VIP channel (listenPort - 2) cannot listen: {e}; RocketMQ slaves \
                         of this broker will not sync its topics, offsets and timer"
                    ),
                    true,
                );
                None
            }
        }
    }

    /// What GET_BROKER_RUNTIME_INFO and the controller-mode requests read of the running broker.
    fn runtime_view(
        config: &BrokerControllerConfig,
        ha_master: Option<Arc<HaMaster>>,
        ha_client: Option<Arc<HaClient>>,
        stats: Arc<StoreStatsService>,
    ) -> RuntimeView {
        RuntimeView {
            broker_role: config.broker_role.clone(),
            ha_master,
            ha_client,
            stats,
            config: Mutex::new(config.broker_config.clone()),
            replicas: config.replicas.clone(),
        }
    }

    /// Only a master delivers delayed and timer messages and checks transactions back; a
    /// slave replicates what its master did.
    fn start_master_services(
        store: &Arc<MessageStore>,
        topics: &Arc<TopicConfigManager>,
        tables: &ConsumeTables,
        settings: &BrokerSettings,
    ) -> std::io::Result<Arc<TransactionalMessageService>> {
        let transactions = Arc::new(TransactionalMessageService::new(
            store.clone(),
            topics.clone(),
            Arc::new(ProducerManager::default()),
            tables.offsets.clone(),
            settings.transaction,
            settings.broker_name.clone(),
        ));
        if !settings.is_slave {
            store.start_schedule()?;
            transactions.start()?;
        }
        // A slave places what it replicates, so that promoted it delivers it.
        store.start_timer(!settings.is_slave)?;
        Ok(transactions)
    }

    /// `BrokerController.initializeMetadata`: the topic, subscription group and consumer
    /// offset tables, loaded from the store's root.
    fn initialize_metadata(
        store: &MessageStore,
        settings: &Arc<BrokerSettings>,
    ) -> Result<(Arc<TopicConfigManager>, ConsumeTables), BrokerError> {
        let root = &store.config().root;
        let topics = TopicConfigManager::load(root, settings)
            .map_err(|e: TopicConfigError| BrokerError::TopicConfig(e.to_string()))?;
        let topics = Arc::new(topics);
        let consumer_config =
            |e: &dyn std::fmt::Display| BrokerError::ConsumerConfig(e.to_string());
        let tables = ConsumeTables {
            groups: Arc::new(
                SubscriptionGroupManager::load(root, settings.clone())
                    .map_err(|e| consumer_config(&e))?,
            ),
            consumers: Arc::new(ConsumerManager::default()),
            offsets: Arc::new(ConsumerOffsetManager::load(root).map_err(|e| consumer_config(&e))?),
            order_info: Arc::new(
                ConsumerOrderInfoManager::load(root).map_err(|e| consumer_config(&e))?,
            ),
        };
        Ok((topics, tables))
    }

    /// A slave's `SlaveSynchronize`: copies the master's topics, offsets and groups.
    fn slave_synchronize(
        broker_addr: &str,
        topics: &Arc<TopicConfigManager>,
        tables: &ConsumeTables,
        store: &Arc<MessageStore>,
        config: &BrokerControllerConfig,
    ) -> Arc<SlaveSynchronize> {
        Arc::new(SlaveSynchronize::new(
            broker_addr.to_string(),
            topics.clone(),
            tables.offsets.clone(),
            tables.groups.clone(),
            store.clone(),
            config.client_tls.clone(),
        ))
    }

    /// `BrokerController.initialAcl`: the plain ACL validator when an ACL file is configured.
    fn initial_acl(
        config: &BrokerControllerConfig,
    ) -> Result<Option<Arc<PlainAccessValidator>>, BrokerError> {
        Ok(match &config.acl_file {
            Some(path) => Some(Arc::new(PlainAccessValidator {
                manager: PlainPermissionManager::load(path)?,
            })),
            None => None,
        })
    }

    /// A slave: its master's tables now, rather than at the next `slaveSyncInterval`.
    pub fn sync_from_master_now(&self) {
        self.housekeeping.wakeup();
    }

    /// A slave's master client address, once the name servers named it.
    #[cfg(test)]
    pub(crate) fn master_addr(&self) -> Option<String> {
        self.slave_sync.as_ref().and_then(|s| s.master_addr())
    }

    #[cfg(test)]
    pub(crate) fn local_addr(&self) -> std::net::SocketAddr {
        self.server.local_addr()
    }

    /// Connections, registrations and their failures, with reasons.
    pub fn events(&self) -> &ServerEvents {
        self.server.events()
    }

    /// Registers with the name servers now rather than at the next period.
    pub fn register_now(&self) {
        self.topics.register_all_next();
        self.register.wakeup();
    }

    /// Each consumer group's committed offset and its queue's head, per queue.
    pub fn consumer_lag(&self) -> Vec<super::ConsumerLag> {
        self.processor.consumer_lag()
    }

    /// The clients that sent heartbeats, one per connection.
    pub fn clients(&self) -> Vec<ClientChannel> {
        self.processor.clients()
    }

    /// Unregisters from the name servers, closes the port, persists the consumer offsets;
    /// safe to call again.
    pub fn shutdown(&self) {
        self.register.shutdown();
        self.server.shutdown();
        if let Some(vip) = &self.vip_server {
            vip.shutdown();
        }
        self.processor.shutdown();
        report_topics_persist(self.topics.close(), self.server.events());
        self.processor.pull().hold_service().shutdown();
        // Before the offsets' last write: it records how far the checks got.
        self.processor.transactions().shutdown();
        self.housekeeping.shutdown();
        self.store.shutdown_schedule();
        self.store.shutdown_timer();
    }
}

impl Drop for BrokerController {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// How often the put and get counters are sampled (`FREQUENCY_OF_SAMPLING`).
const SAMPLING_INTERVAL: Duration = Duration::from_secs(1);
/// How often consumers are checked for missing heartbeats (`scanNotActiveChannel`'s 10 s).
const SCAN_NOT_ACTIVE_INTERVAL: Duration = Duration::from_secs(10);
/// How often a slave takes its master's timer checkpoint (RocketMQ's 3 s: what a promotion
/// delivers again).
const TIMER_SYNC_INTERVAL: Duration = Duration::from_secs(3);

/// How often `plain_acl.yml` is looked at for changes (RocketMQ's `FileWatchService` looks
/// every 500 ms too).
const ACL_CHECK_INTERVAL: Duration = Duration::from_millis(500);

/// The housekeeping thread's work, each on its own period.
struct Housekeeping {
    tables: ConsumeTables,
    stats: Arc<StoreStatsService>,
    slave_sync: Option<Arc<SlaveSynchronize>>,
    events: Arc<ServerEvents>,
    flush_interval: Duration,
    sync_interval: Duration,
    acl: Option<Arc<PlainAccessValidator>>,
}

impl Housekeeping {
    fn run(&self, waiter: &ServiceWaiter) {
        let start = Instant::now();
        let mut next_flush = start + self.flush_interval;
        let mut next_scan = start + SCAN_NOT_ACTIVE_INTERVAL;
        let mut next_acl_check = start + ACL_CHECK_INTERVAL;
        let mut next_sample = start + SAMPLING_INTERVAL;
        // A slave syncs at start (once the name servers named its master) and every period.
        let mut next_sync = start;
        let mut next_timer_sync = start;
        loop {
            let now = Instant::now();
            if now >= next_flush {
                self.persist_offsets();
                next_flush = now + self.flush_interval;
            }
            if now >= next_sample {
                self.stats.sampling();
                next_sample = now + SAMPLING_INTERVAL;
            }
            if now >= next_scan {
                self.tables.consumers.scan_not_active(now);
                next_scan = now + SCAN_NOT_ACTIVE_INTERVAL;
            }
            if let Some(acl) = self.acl.as_ref().filter(|_| now >= next_acl_check) {
                match acl.manager.reload_if_changed() {
                    Some(Ok(summary)) => self.report("ACL_RELOADED", &summary, false),
                    Some(Err(why)) => self.report("ACL_RELOAD_FAILED", &why, true),
                    None => {}
                }
                next_acl_check = now + ACL_CHECK_INTERVAL;
            }
            if let Some(sync) = self.slave_sync.as_ref().filter(|_| now >= next_sync) {
                match sync.sync_all() {
                    Ok(true) => {
                        self.report("SLAVE_SYNC", "synced topics, offsets and groups", false);
                        next_sync = now + self.sync_interval;
                    }
                    // No master named yet: the registration wakes this thread when one is.
                    Ok(false) => next_sync = now + self.sync_interval,
                    Err(e) => {
                        self.report("SLAVE_SYNC_FAILED", &e, true);
                        next_sync = now + self.sync_interval;
                    }
                }
            }
            if let Some(sync) = self.slave_sync.as_ref().filter(|_| now >= next_timer_sync) {
                if let Err(e) = sync.sync_timer() {
                    self.report("SLAVE_SYNC_FAILED", &e, true);
                }
                next_timer_sync = now + TIMER_SYNC_INTERVAL;
            }
            let mut due = next_flush.min(next_scan).min(next_sample);
            if self.slave_sync.is_some() {
                due = due.min(next_sync).min(next_timer_sync);
            }
            if self.acl.is_some() {
                due = due.min(next_acl_check);
            }
            match waiter.wait_for_running(Some(due)) {
                Woke::Stopped => break,
                Woke::Notified => {
                    next_sync = Instant::now();
                    next_timer_sync = next_sync;
                }
                Woke::Timeout => {}
            }
        }
        self.persist_offsets();
        // Every change is saved already; the journal folded, the file alone holds them.
        if let Err(e) = self.tables.groups.close() {
            self.report("SUBSCRIPTION_GROUP_PERSIST_FAILED", &e.to_string(), true);
        }
    }

    fn persist_offsets(&self) {
        if let Err(e) = self.tables.offsets.persist() {
            self.report("CONSUMER_OFFSET_PERSIST_FAILED", &e.to_string(), true);
        }
        if let Err(e) = self.tables.order_info.persist() {
            self.report("CONSUMER_ORDER_INFO_PERSIST_FAILED", &e.to_string(), true);
        }
    }

    fn report(&self, what: &'static str, message: &str, error: bool) {
        self.events.push(
            "housekeeping",
            crate::remoting::ServerEventKind::Processor(what),
            message.to_owned(),
            error,
        );
    }
}

#[cfg(test)]
pub(crate) mod tests;
