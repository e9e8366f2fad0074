//! RocketMQ's `BrokerController`: the client port (a [`RemotingServer`] with the
//! [`BrokerProcessor`]) over a store and its HA side, and the registration thread
//! ([`BrokerOuterApi`]) that keeps the name servers informed.

use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::outer_api::{BrokerOuterApi, RegisterSignal, Registration};
use super::processor::{BrokerProcessor, ClientChannel, RuntimeView};
use super::topic_config::{TopicConfigError, TopicConfigManager};
use super::BrokerSettings;
use crate::ha::client::HaClient;
use crate::ha::master::HaMaster;
use crate::remoting::{RemotingServer, ServerConfig, ServerEvents};
use crate::store::MessageStore;
use crate::sync::lock;

#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// `config/topics.json` could not be read.
    #[error("broker topic config: {0}")]
    TopicConfig(String),
    #[error("broker client port: {0}")]
    Io(#[from] std::io::Error),
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
    pub server: ServerConfig,
}

impl Default for BrokerControllerConfig {
    fn default() -> Self {
        Self {
            settings: BrokerSettings::default(),
            broker_role: "ASYNC_MASTER".into(),
            broker_ip1: "127.0.0.1".into(),
            namesrv_addr: String::new(),
            register_name_server_period: Duration::from_millis(30_000),
            ha_server_addr: String::new(),
            update_master_ha_server_addr_periodically: false,
            server: ServerConfig::default(),
        }
    }
}

/// A broker's network side, running until [`BrokerController::shutdown`].
pub struct BrokerController {
    server: RemotingServer,
    processor: Arc<BrokerProcessor>,
    signal: Arc<RegisterSignal>,
    register_thread: Mutex<Option<JoinHandle<()>>>,
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
        let topics = TopicConfigManager::load(
            &store.config().root,
            settings.auto_create_topic,
            settings.default_topic_queue_nums,
        )
        .map_err(|e: TopicConfigError| BrokerError::TopicConfig(e.to_string()))?;
        let topics = Arc::new(topics);
        let signal = Arc::new(RegisterSignal::default());
        let events = Arc::new(ServerEvents::default());
        let port = listener.local_addr()?.port();
        let processor = Arc::new(BrokerProcessor::new(
            store,
            topics.clone(),
            settings.clone(),
            RuntimeView {
                broker_role: config.broker_role.clone(),
                ha_master,
                ha_client: ha_client.clone(),
            },
            signal.clone(),
        ));
        let server =
            RemotingServer::start_on(listener, processor.clone(), config.server, events.clone())?;
        let outer = BrokerOuterApi::new(
            &config.namesrv_addr,
            Registration {
                cluster_name: settings.cluster_name.clone(),
                broker_name: settings.broker_name.clone(),
                broker_id: settings.broker_id,
                broker_addr: format!("{}:{port}", config.broker_ip1),
                ha_server_addr: config.ha_server_addr.clone(),
            },
            topics,
            ha_client.filter(|_| config.update_master_ha_server_addr_periodically),
            events,
        );
        let period = config.register_name_server_period;
        let worker = signal.clone();
        let register_thread = std::thread::Builder::new()
            .name("rocketha-broker-register".into())
            .spawn(move || outer.run(&worker, period))?;
        Ok(Self {
            server,
            processor,
            signal,
            register_thread: Mutex::new(Some(register_thread)),
        })
    }

    pub fn local_addr(&self) -> std::net::SocketAddr {
        self.server.local_addr()
    }

    /// Connections, registrations and their failures, with reasons.
    pub fn events(&self) -> &ServerEvents {
        self.server.events()
    }

    /// Registers with the name servers now rather than at the next period.
    pub fn register_now(&self) {
        self.signal.request();
    }

    /// The clients that sent heartbeats, one per connection.
    pub fn clients(&self) -> Vec<ClientChannel> {
        self.processor.clients()
    }

    /// Unregisters from the name servers, closes the port; safe to call again.
    pub fn shutdown(&self) {
        self.signal.stop();
        let thread = lock(&self.register_thread).take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
        self.server.shutdown();
    }
}

impl Drop for BrokerController {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests;
