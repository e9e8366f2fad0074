//! Python handles on the HA master loop and the slave client. Their threads never touch Python;
//! these methods read shared state or block with the GIL released.

use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use rocketha_core::ha::client::HaClient;
use rocketha_core::ha::master::HaMaster;
use rocketha_core::ha::{HaConfig, HaEvent, SyncStateSet};

use crate::config::PyBrokerConfig;
use crate::errors::{ha_to_py, ForkGuard};
use crate::replicas::PyEpochFileCache;
use crate::store::{parse_host, PyMessageStore};

fn secs(timeout: f64) -> Duration {
    Duration::from_secs_f64(timeout.clamp(0.0, 1e9))
}

/// `config`'s HA settings (the core's defaults without one), with what the caller gave instead.
fn ha_config(
    config: Option<PyRef<'_, PyBrokerConfig>>,
    heartbeat_interval_ms: Option<u64>,
    housekeeping_interval_ms: Option<u64>,
    auth_secret: Option<Vec<u8>>,
) -> HaConfig {
    let d = config.map_or_else(HaConfig::default, |c| c.inner.ha_config(None));
    HaConfig {
        heartbeat_interval: heartbeat_interval_ms
            .map_or(d.heartbeat_interval, Duration::from_millis),
        housekeeping_interval: housekeeping_interval_ms
            .map_or(d.housekeeping_interval, Duration::from_millis),
        auth_secret,
        ..d
    }
}

type EventTuple = (String, &'static str, String, bool);

fn event_tuples(events: Vec<HaEvent>) -> Vec<EventTuple> {
    events
        .into_iter()
        .map(|e| (e.addr, e.state.name(), e.reason, e.problem))
        .collect()
}

/// The master's accept side and every slave connection, on one epoll thread.
#[pyclass(frozen, module = "rocketha._core")]
pub struct HAMaster {
    /// Shared with the broker's client port, which reports the slaves' acks.
    pub(crate) inner: Arc<HaMaster>,
    guard: ForkGuard,
}

#[pymethods]
impl HAMaster {
    /// Keyword arguments left out take `config`'s values, or the core's defaults. With
    /// `epochs` it speaks RocketMQ 5's AutoSwitch HA (controller mode).
    #[new]
    #[pyo3(signature = (store, listen, *, config=None, transfer_batch_size=None, heartbeat_interval_ms=None, housekeeping_interval_ms=None, max_transfer_bytes_per_second=None, sync_from_last_file=None, auth_secret=None, epochs=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        store: PyRef<'_, PyMessageStore>,
        listen: &str,
        config: Option<PyRef<'_, PyBrokerConfig>>,
        transfer_batch_size: Option<usize>,
        heartbeat_interval_ms: Option<u64>,
        housekeeping_interval_ms: Option<u64>,
        max_transfer_bytes_per_second: Option<u64>,
        sync_from_last_file: Option<bool>,
        auth_secret: Option<Vec<u8>>,
        epochs: Option<PyRef<'_, PyEpochFileCache>>,
    ) -> PyResult<Self> {
        let store = store.store()?.clone();
        let listen = parse_host(listen)?;
        let mut config = ha_config(
            config,
            heartbeat_interval_ms,
            housekeeping_interval_ms,
            auth_secret,
        );
        config.transfer_batch_size = transfer_batch_size.unwrap_or(config.transfer_batch_size);
        config.max_transfer_bytes_per_second =
            max_transfer_bytes_per_second.or(config.max_transfer_bytes_per_second);
        config.sync_from_last_file = sync_from_last_file.unwrap_or(config.sync_from_last_file);
        config.epochs = epochs.map(|e| e.inner.clone());
        let inner = py
            .detach(|| HaMaster::start(store, listen, config))
            .map_err(ha_to_py)?;
        let inner = Arc::new(inner);
        Ok(Self {
            inner,
            guard: ForkGuard::new(),
        })
    }

    #[getter]
    fn listen_port(&self) -> u16 {
        self.inner.local_addr().port()
    }

    /// Controller mode: puts follow this SyncStateSet (`slaves`: its broker ids less the
    /// master's). With `all_ack` (`allAckInSyncStateSet`) they wait for exactly these slaves,
    /// else for any `inSyncReplicas - 1`; below `minInSyncReplicas` they are refused.
    #[pyo3(signature = (slaves, all_ack))]
    fn set_sync_state_set(&self, slaves: Vec<u64>, all_ack: bool) {
        self.inner.acks().set_sync_state_set(Some(SyncStateSet {
            slaves: slaves.into_iter().collect(),
            all_ack,
        }));
    }

    #[getter]
    fn listen_address(&self) -> String {
        self.inner.local_addr().to_string()
    }

    /// The highest offset any slave has acknowledged.
    #[getter]
    fn push2slave_max_offset(&self) -> u64 {
        self.inner.acks().push2slave_max_offset()
    }

    /// One dict per live connection.
    fn connections<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.inner
            .connections()
            .into_iter()
            .map(|c| {
                let d = PyDict::new(py);
                d.set_item("id", c.id)?;
                d.set_item("address", c.addr)?;
                d.set_item("state", c.state.name())?;
                d.set_item("slave_ack_offset", c.slave_ack_offset)?;
                d.set_item("next_transfer_from", c.next_transfer_from)?;
                d.set_item("bytes_sent", c.bytes_sent)?;
                d.set_item("since_ms", c.since_ms)?;
                d.set_item("last_ack_ms", c.last_ack_ms)?;
                d.set_item("slave_id", c.slave_id)?;
                d.set_item("authenticated", c.authenticated)?;
                Ok(d)
            })
            .collect()
    }

    /// Controller mode: `(slave id, seconds since its ack last reached the max offset)` of
    /// each live slave that ever caught up (RocketMQ's `connectionCaughtUpTimeTable`).
    fn caught_up(&self) -> Vec<(u64, f64)> {
        self.inner
            .acks()
            .caught_up()
            .into_iter()
            .map(|(slave, ago)| (slave, ago.as_secs_f64()))
            .collect()
    }

    /// Acked offsets of the live slaves, one per slave, highest first.
    fn slave_ack_offsets(&self) -> Vec<u64> {
        self.inner.acks().slave_offsets()
    }

    /// Blocks (GIL released) until `count` distinct slaves acked `offset`; False on timeout.
    fn wait_for_ack(
        &self,
        py: Python<'_>,
        offset: u64,
        count: usize,
        timeout: f64,
    ) -> PyResult<bool> {
        self.guard.check()?;
        let acks = self.inner.acks();
        Ok(py.detach(|| acks.wait_for(offset, count, secs(timeout))))
    }

    /// State changes and closes since the last call, waiting up to `timeout` for one:
    /// `(address, state, reason, is_problem)`.
    fn next_events(&self, py: Python<'_>, timeout: f64) -> PyResult<Vec<EventTuple>> {
        self.guard.check()?;
        let events = self.inner.events();
        Ok(event_tuples(py.detach(|| events.drain(secs(timeout)))))
    }

    fn shutdown(&self, py: Python<'_>) -> PyResult<()> {
        self.guard.check()?;
        py.detach(|| self.inner.shutdown());
        Ok(())
    }
}

/// The slave's client: connects to the master, appends what it pushes, reports its offset.
#[pyclass(frozen, module = "rocketha._core")]
pub struct HAClient {
    /// Shared with the broker's registration, which points it at the master.
    pub(crate) inner: Arc<HaClient>,
    guard: ForkGuard,
}

#[pymethods]
impl HAClient {
    /// Keyword arguments left out take the core's defaults (RocketMQ's).
    #[new]
    /// With `epochs` it speaks RocketMQ 5's AutoSwitch HA (controller mode), `slave_id` being
    /// its controller-given broker id.
    #[pyo3(signature = (store, master_address=None, *, config=None, slave_id=1, heartbeat_interval_ms=None, housekeeping_interval_ms=None, auth_secret=None, frame_crc=None, accept_zero_body_crc=None, epochs=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        store: PyRef<'_, PyMessageStore>,
        master_address: Option<String>,
        config: Option<PyRef<'_, PyBrokerConfig>>,
        slave_id: u64,
        heartbeat_interval_ms: Option<u64>,
        housekeeping_interval_ms: Option<u64>,
        auth_secret: Option<Vec<u8>>,
        frame_crc: Option<bool>,
        accept_zero_body_crc: Option<bool>,
        epochs: Option<PyRef<'_, PyEpochFileCache>>,
    ) -> PyResult<Self> {
        let store = store.store()?.clone();
        let mut config = ha_config(
            config,
            heartbeat_interval_ms,
            housekeeping_interval_ms,
            auth_secret,
        );
        config.frame_crc = frame_crc.unwrap_or(config.frame_crc);
        config.accept_zero_body_crc = accept_zero_body_crc.unwrap_or(config.accept_zero_body_crc);
        config.epochs = epochs.map(|e| e.inner.clone());
        let inner = py
            .detach(|| HaClient::start(store, master_address, config, slave_id))
            .map_err(ha_to_py)?;
        let inner = Arc::new(inner);
        Ok(Self {
            inner,
            guard: ForkGuard::new(),
        })
    }

    #[getter]
    fn state(&self) -> &'static str {
        self.inner.state().name()
    }

    #[getter]
    fn master_address(&self) -> Option<String> {
        self.inner.master_address()
    }

    /// While the state is STOPPED: `(offset, reason, master_address)` of the record the master
    /// keeps sending that fails validation; None otherwise.
    #[getter]
    fn stop_reason(&self) -> Option<(u64, String, String)> {
        self.inner
            .stop_reason()
            .map(|s| (s.offset, s.reason, s.master))
    }

    /// Points the client at another master (or none); the current connection is dropped.
    fn update_master_address(&self, address: Option<String>) -> PyResult<()> {
        self.inner.update_master_address(address).map_err(ha_to_py)
    }

    /// `(bytes_received, frames, buffer_swaps, connects)`.
    fn stats(&self) -> (u64, u64, u64, u64) {
        let s = self.inner.stats();
        (s.bytes_received, s.frames, s.buffer_swaps, s.connects)
    }

    /// AutoSwitch HA: the master's confirm offset as of its last frame, capped at ours.
    #[getter]
    fn confirm_offset(&self) -> u64 {
        self.inner.stats().confirm_offset
    }

    fn next_events(&self, py: Python<'_>, timeout: f64) -> PyResult<Vec<EventTuple>> {
        self.guard.check()?;
        let events = self.inner.events();
        Ok(event_tuples(py.detach(|| events.drain(secs(timeout)))))
    }

    fn shutdown(&self, py: Python<'_>) -> PyResult<()> {
        self.guard.check()?;
        py.detach(|| self.inner.shutdown());
        Ok(())
    }
}
