//! The Python handle on a broker's client port: `BrokerController(listen)` binds the port (so
//! the store can be opened with the real `listenPort` in its store host), `start` serves it
//! for a store and its HA side and registers with the name servers.

use std::net::TcpListener;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use pyo3::exceptions::{PyOSError, PyRuntimeError};
use pyo3::prelude::*;
use rocketha_core::BrokerController as CoreBrokerController;

use crate::config::PyBrokerConfig;
use crate::errors::{ConfigError, ForkGuard};
use crate::ha::{HAClient, HAMaster};
use crate::replicas::ReplicasManager;
use crate::store::{parse_host, PyMessageStore};
use crate::tls::{ClientTls, ServerTls};

/// `(address, event, reason, is_problem)`.
type EventTuple = (String, &'static str, String, bool);
/// `(client_id, producer_groups, consumer_groups)`.
type ClientTuple = (String, Vec<String>, Vec<String>);
/// (group, topic, queue id, broker offset, consumer offset).
type LagTuple = (String, String, i32, i64, i64);

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

    /// Serves the port for `store` as `config` says; `ha_master` on a master (its port is
    /// what the name servers hand the slaves), `ha_client` on a slave. What a running broker
    /// found (the ACL file, TLS material) comes alongside; in controller mode, the
    /// `replicas` manager that takes the controller's NOTIFY_BROKER_ROLE_CHANGED.
    #[pyo3(signature = (store, config, *, ha_master=None, ha_client=None, acl_file=None, tls=None, client_tls=None, replicas=None))]
    #[allow(clippy::too_many_arguments)]
    fn start(
        &self,
        py: Python<'_>,
        store: PyRef<'_, PyMessageStore>,
        config: PyRef<'_, PyBrokerConfig>,
        ha_master: Option<PyRef<'_, HAMaster>>,
        ha_client: Option<PyRef<'_, HAClient>>,
        acl_file: Option<std::path::PathBuf>,
        tls: Option<PyRef<'_, ServerTls>>,
        client_tls: Option<PyRef<'_, ClientTls>>,
        replicas: Option<PyRef<'_, ReplicasManager>>,
    ) -> PyResult<()> {
        self.guard.check()?;
        let store = store.store()?.clone();
        let ha_master = ha_master.map(|m| m.inner.clone());
        let ha_client = ha_client.map(|c| c.inner.clone());
        let mut controller_config = config.inner.controller_config();
        if let Some(master) = &ha_master {
            controller_config.ha_server_addr = config
                .inner
                .advertised_ha_address(master.local_addr().port());
        }
        controller_config.server.tls = tls.and_then(|t| t.inner.clone());
        controller_config.client_tls = client_tls.map(|t| t.inner.clone());
        controller_config.acl_file = acl_file;
        controller_config.replicas = replicas.map(|r| r.inner.clone());
        let config = controller_config;
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

    /// `[(group, topic, queue_id, broker_offset, consumer_offset)]` of every group that
    /// committed an offset here.
    fn consumer_lag(&self) -> PyResult<Vec<LagTuple>> {
        Ok(self
            .running()?
            .consumer_lag()
            .into_iter()
            .map(|l| {
                (
                    l.group,
                    l.topic,
                    l.queue_id,
                    l.broker_offset,
                    l.consumer_offset,
                )
            })
            .collect())
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
