//! The Python handle on a broker's client port: `BrokerController(listen)` binds the port (so
//! the store can be opened with the real `listenPort` in its store host), `start` serves it
//! for a store and its HA side and registers with the name servers.

use std::net::TcpListener;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use pyo3::exceptions::{PyOSError, PyRuntimeError};
use pyo3::prelude::*;
use rocketha_core::{BrokerController as CoreBrokerController, BrokerControllerConfig};

use crate::errors::{ConfigError, ForkGuard};
use crate::ha::{HAClient, HAMaster};
use crate::store::{parse_host, PyMessageStore};
use crate::tls::{ClientTls, ServerTls};

/// `(address, event, reason, is_problem)`.
type EventTuple = (String, &'static str, String, bool);
/// `(client_id, producer_groups, consumer_groups)`.
type ClientTuple = (String, Vec<String>, Vec<String>);

#[pyclass(frozen, module = "rocketha._core")]
pub struct BrokerController {
    /// The bound port until `start` takes it. A lock: `start` may race another call.
    listener: Mutex<Option<TcpListener>>,
    local: std::net::SocketAddr,
    inner: OnceLock<CoreBrokerController>,
    guard: ForkGuard,
}

impl BrokerController {
    fn running(&self) -> PyResult<&CoreBrokerController> {
        self.guard.check()?;
        self.inner
            .get()
            .ok_or_else(|| PyRuntimeError::new_err("the broker's client port is not started"))
    }
}

#[pymethods]
impl BrokerController {
    /// Binds `listen` (`ip:port`, port 0 = OS-chosen); nothing is served until `start`.
    #[new]
    fn new(py: Python<'_>, listen: &str) -> PyResult<Self> {
        let addr = parse_host(listen)?;
        let listener = py.detach(|| TcpListener::bind(addr)).map_err(|e| {
            PyOSError::new_err((
                e.raw_os_error().unwrap_or(0),
                format!("broker cannot listen on {addr} (listenPort): {e}"),
            ))
        })?;
        let local = listener.local_addr()?;
        Ok(Self {
            listener: Mutex::new(Some(listener)),
            local,
            inner: OnceLock::new(),
            guard: ForkGuard::new(),
        })
    }

    /// Serves the port for `store`. Keyword arguments are RocketMQ's `BrokerConfig` keys;
    /// left out, they take the core's defaults (RocketMQ's).
    #[pyo3(signature = (store, *, ha_master=None, ha_client=None, cluster_name=None, broker_name=None, broker_id=None, broker_role=None, broker_ip1=None, namesrv_addr=None, register_name_server_period_ms=None, ha_server_addr=None, update_master_ha_server_addr=false, check_master_ha_server_addr=None, auto_create_topic_enable=None, default_topic_queue_nums=None, max_message_size=None, broker_permission=None, slave_read_enable=None, which_broker_when_consume_slowly=None, access_message_in_memory_max_ratio=None, long_polling_enable=None, auto_create_subscription_group=None, max_transfer_bytes_on_message_in_memory=None, max_transfer_count_on_message_in_memory=None, max_transfer_bytes_on_message_in_disk=None, max_transfer_count_on_message_in_disk=None, flush_consumer_offset_interval_ms=None, slave_sync_interval_ms=None, acl_file=None, tls=None, client_tls=None))]
    #[allow(clippy::too_many_arguments)]
    fn start(
        &self,
        py: Python<'_>,
        store: PyRef<'_, PyMessageStore>,
        ha_master: Option<PyRef<'_, HAMaster>>,
        ha_client: Option<PyRef<'_, HAClient>>,
        cluster_name: Option<String>,
        broker_name: Option<String>,
        broker_id: Option<i64>,
        broker_role: Option<String>,
        broker_ip1: Option<String>,
        namesrv_addr: Option<String>,
        register_name_server_period_ms: Option<u64>,
        ha_server_addr: Option<String>,
        update_master_ha_server_addr: bool,
        check_master_ha_server_addr: Option<String>,
        auto_create_topic_enable: Option<bool>,
        default_topic_queue_nums: Option<i32>,
        max_message_size: Option<usize>,
        broker_permission: Option<i32>,
        slave_read_enable: Option<bool>,
        which_broker_when_consume_slowly: Option<i64>,
        access_message_in_memory_max_ratio: Option<i32>,
        long_polling_enable: Option<bool>,
        auto_create_subscription_group: Option<bool>,
        max_transfer_bytes_on_message_in_memory: Option<usize>,
        max_transfer_count_on_message_in_memory: Option<usize>,
        max_transfer_bytes_on_message_in_disk: Option<usize>,
        max_transfer_count_on_message_in_disk: Option<usize>,
        flush_consumer_offset_interval_ms: Option<u64>,
        slave_sync_interval_ms: Option<u64>,
        acl_file: Option<std::path::PathBuf>,
        tls: Option<PyRef<'_, ServerTls>>,
        client_tls: Option<PyRef<'_, ClientTls>>,
    ) -> PyResult<()> {
        self.guard.check()?;
        let store = store.store()?.clone();
        let ha_master = ha_master.map(|m| m.inner.clone());
        let ha_client = ha_client.map(|c| c.inner.clone());
        let mut config = BrokerControllerConfig::default();
        let s = &mut config.settings;
        s.cluster_name = cluster_name.unwrap_or(std::mem::take(&mut s.cluster_name));
        s.broker_name = broker_name.unwrap_or(std::mem::take(&mut s.broker_name));
        s.broker_id = broker_id.unwrap_or(s.broker_id);
        s.auto_create_topic = auto_create_topic_enable.unwrap_or(s.auto_create_topic);
        s.default_topic_queue_nums = default_topic_queue_nums.unwrap_or(s.default_topic_queue_nums);
        s.max_message_size = max_message_size.unwrap_or(s.max_message_size);
        s.broker_permission = broker_permission.unwrap_or(s.broker_permission);
        s.slave_read_enable = slave_read_enable.unwrap_or(s.slave_read_enable);
        s.which_broker_when_consume_slowly =
            which_broker_when_consume_slowly.unwrap_or(s.which_broker_when_consume_slowly);
        s.access_message_in_memory_max_ratio =
            access_message_in_memory_max_ratio.unwrap_or(s.access_message_in_memory_max_ratio);
        s.long_polling_enable = long_polling_enable.unwrap_or(s.long_polling_enable);
        s.auto_create_subscription_group =
            auto_create_subscription_group.unwrap_or(s.auto_create_subscription_group);
        let (memory, disk) = (&mut s.max_transfer_in_memory, &mut s.max_transfer_in_disk);
        memory.bytes = max_transfer_bytes_on_message_in_memory.unwrap_or(memory.bytes);
        memory.count = max_transfer_count_on_message_in_memory.unwrap_or(memory.count);
        disk.bytes = max_transfer_bytes_on_message_in_disk.unwrap_or(disk.bytes);
        disk.count = max_transfer_count_on_message_in_disk.unwrap_or(disk.count);
        if let Some(role) = broker_role {
            s.is_slave = role == "SLAVE";
            config.broker_role = role;
        }
        config.broker_ip1 = broker_ip1.unwrap_or(config.broker_ip1);
        config.namesrv_addr = namesrv_addr.unwrap_or_default();
        if let Some(ms) = register_name_server_period_ms {
            config.register_name_server_period = Duration::from_millis(ms);
        }
        if let Some(ms) = flush_consumer_offset_interval_ms {
            config.flush_consumer_offset_interval = Duration::from_millis(ms);
        }
        if let Some(ms) = slave_sync_interval_ms {
            config.slave_sync_interval = Duration::from_millis(ms);
        }
        config.ha_server_addr = ha_server_addr.unwrap_or_default();
        config.update_master_ha_server_addr_periodically = update_master_ha_server_addr;
        config.check_master_ha_server_addr = check_master_ha_server_addr;
        config.server.tls = tls.and_then(|t| t.inner.clone());
        config.client_tls = client_tls.map(|t| t.inner.clone());
        config.acl_file = acl_file;
        let listener = self
            .listener
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| {
                PyRuntimeError::new_err("the broker's client port is already started")
            })?;
        let controller = py
            .detach(|| CoreBrokerController::start(listener, store, ha_master, ha_client, config))
            .map_err(|e| ConfigError::new_err(e.to_string()))?;
        // Cannot be set already: the listener was taken exactly once above.
        let _ = self.inner.set(controller);
        Ok(())
    }

    #[getter]
    fn listen_address(&self) -> String {
        self.local.to_string()
    }

    #[getter]
    fn listen_port(&self) -> u16 {
        self.local.port()
    }

    /// Registers with the name servers now rather than at the next period.
    fn register_now(&self) -> PyResult<()> {
        self.running()?.register_now();
        Ok(())
    }

    /// A slave: fetches its master's topics, offsets and groups now rather than at the next
    /// `slaveSyncInterval`.
    fn sync_from_master_now(&self) -> PyResult<()> {
        self.running()?.sync_from_master_now();
        Ok(())
    }

    /// `[(client_id, producer_groups, consumer_groups)]` of the clients that sent heartbeats.
    fn clients(&self) -> PyResult<Vec<ClientTuple>> {
        Ok(self
            .running()?
            .clients()
            .into_iter()
            .map(|c| {
                (
                    c.client_id,
                    c.producer_groups.into_iter().collect(),
                    c.consumer_groups.into_iter().collect(),
                )
            })
            .collect())
    }

    /// Connections, registrations and their failures since the last call, waiting up to
    /// `timeout` for one.
    fn next_events(&self, py: Python<'_>, timeout: f64) -> PyResult<Vec<EventTuple>> {
        let controller = self.running()?;
        let timeout = Duration::from_secs_f64(timeout.clamp(0.0, 1e9));
        Ok(py
            .detach(|| controller.events().drain(timeout))
            .into_iter()
            .map(|e| (e.addr, e.kind.name(), e.reason, e.problem))
            .collect())
    }

    /// Unregisters from the name servers and closes the port; safe to call again.
    fn shutdown(&self, py: Python<'_>) -> PyResult<()> {
        self.guard.check()?;
        // Never started: closing the bound port is all there is.
        self.listener
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(controller) = self.inner.get() {
            py.detach(|| controller.shutdown());
        }
        Ok(())
    }
}
