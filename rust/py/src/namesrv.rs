//! The Python handle on a name server. Its threads never touch Python; these methods block with
//! the GIL released.

use std::time::Duration;

use pyo3::prelude::*;
use rocketha_core::{NameServer as CoreNameServer, NamesrvConfig};

use crate::errors::ForkGuard;
use crate::store::parse_host;
use crate::tls::ServerTls;

/// `(address, event, reason, is_problem)`.
type EventTuple = (String, &'static str, String, bool);

/// RocketMQ's name server on one epoll thread, with a housekeeping thread for expiry.
#[pyclass(frozen, module = "rocketha._core")]
pub struct NameServer {
    inner: CoreNameServer,
    guard: ForkGuard,
}

#[pymethods]
impl NameServer {
    /// Keyword arguments left out take the core's defaults (RocketMQ's).
    #[new]
    #[pyo3(signature = (listen, *, broker_channel_expired_time_ms=None, tls=None, kv_config_path=None))]
    fn new(
        py: Python<'_>,
        listen: &str,
        broker_channel_expired_time_ms: Option<u64>,
        tls: Option<PyRef<'_, ServerTls>>,
        kv_config_path: Option<std::path::PathBuf>,
    ) -> PyResult<Self> {
        let listen = parse_host(listen)?;
        let mut config = NamesrvConfig {
            kv_config_path,
            ..NamesrvConfig::default()
        };
        config.server.tls = tls.and_then(|t| t.inner.clone());
        if let Some(ms) = broker_channel_expired_time_ms {
            config.broker_channel_expired_time = Duration::from_millis(ms);
        }
        // An io::Error keeps its errno: EADDRINUSE arrives as OSError with the address.
        let inner = py
            .detach(|| CoreNameServer::start(listen, config))
            .map_err(|e| {
                pyo3::exceptions::PyOSError::new_err((
                    e.raw_os_error().unwrap_or(0),
                    format!("name server on {listen} cannot start: {e}"),
                ))
            })?;
        Ok(Self {
            inner,
            guard: ForkGuard::new(),
        })
    }

    #[getter]
    fn listen_address(&self) -> String {
        self.inner.local_addr().to_string()
    }

    #[getter]
    fn listen_port(&self) -> u16 {
        self.inner.local_addr().port()
    }

    /// Connections, registrations and expiries since the last call, waiting up to `timeout`
    /// for one.
    fn next_events(&self, py: Python<'_>, timeout: f64) -> PyResult<Vec<EventTuple>> {
        self.guard.check()?;
        let events = self.inner.events();
        let timeout = Duration::from_secs_f64(timeout.clamp(0.0, 1e9));
        Ok(py
            .detach(|| events.drain(timeout))
            .into_iter()
            .map(|e| (e.addr, e.kind.name(), e.reason, e.problem))
            .collect())
    }

    fn shutdown(&self, py: Python<'_>) -> PyResult<()> {
        self.guard.check()?;
        py.detach(|| self.inner.shutdown());
        Ok(())
    }
}
