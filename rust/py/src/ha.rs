//! Python handles on the HA master loop and the slave client. Their threads never touch Python;
//! these methods read shared state or block with the GIL released.

use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use rocketha_core::ha::client::HaClient;
use rocketha_core::ha::master::HaMaster;
use rocketha_core::ha::{HaConfig, HaEvent};

use crate::errors::{ha_to_py, ForkGuard};
use crate::store::{parse_host, PutStatus, PyMessageStore};

fn secs(timeout: f64) -> Duration {
    Duration::from_secs_f64(timeout.clamp(0.0, 1e9))
}

#[allow(clippy::too_many_arguments)]
fn ha_config(
    transfer_batch_size: usize,
    heartbeat_interval_ms: u64,
    housekeeping_interval_ms: u64,
    max_transfer_bytes_per_second: Option<u64>,
    sync_from_last_file: bool,
    auth_secret: Option<Vec<u8>>,
    frame_crc: bool,
) -> HaConfig {
    HaConfig {
        frame_crc,
        transfer_batch_size: transfer_batch_size.max(1),
        heartbeat_interval: Duration::from_millis(heartbeat_interval_ms.max(1)),
        housekeeping_interval: Duration::from_millis(housekeeping_interval_ms.max(1)),
        max_transfer_bytes_per_second,
        sync_from_last_file,
        auth_secret,
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
    inner: HaMaster,
    guard: ForkGuard,
}

#[pymethods]
impl HAMaster {
    #[new]
    #[pyo3(signature = (store, listen="127.0.0.1:0", *, transfer_batch_size=32768, heartbeat_interval_ms=5000, housekeeping_interval_ms=20000, max_transfer_bytes_per_second=None, sync_from_last_file=false, auth_secret=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        store: PyRef<'_, PyMessageStore>,
        listen: &str,
        transfer_batch_size: usize,
        heartbeat_interval_ms: u64,
        housekeeping_interval_ms: u64,
        max_transfer_bytes_per_second: Option<u64>,
        sync_from_last_file: bool,
        auth_secret: Option<Vec<u8>>,
    ) -> PyResult<Self> {
        let store = store.store()?.clone();
        let listen = parse_host(listen)?;
        let config = ha_config(
            transfer_batch_size,
            heartbeat_interval_ms,
            housekeeping_interval_ms,
            max_transfer_bytes_per_second,
            sync_from_last_file,
            auth_secret,
            false,
        );
        let inner = py
            .detach(|| HaMaster::start(store, listen, config))
            .map_err(ha_to_py)?;
        Ok(Self {
            inner,
            guard: ForkGuard::new(),
        })
    }

    #[getter]
    fn listen_port(&self) -> u16 {
        self.inner.local_addr().port()
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
                d.set_item("authenticated", c.authenticated)?;
                Ok(d)
            })
            .collect()
    }

    /// Distinct slaves whose ack covers `offset`.
    fn acked_count(&self, offset: u64) -> usize {
        self.inner.acks().count_at_least(offset)
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
        Ok(py.detach(|| acks.wait_for_ack(offset, count, secs(timeout))))
    }

    /// RocketMQ's `isSlaveOK`: `count` distinct slaves connected, the best fewer than
    /// `max_gap` bytes behind `next_offset`.
    fn in_sync(&self, next_offset: u64, count: usize, max_gap: u64) -> bool {
        self.inner.acks().in_sync(next_offset, count, max_gap)
    }

    /// A SYNC_MASTER put's replication verdict in one call, so a put crosses into Rust once
    /// to wait: SLAVE_NOT_AVAILABLE unless `in_sync`, else PUT_OK once `count` distinct slaves
    /// acked `next_offset` (GIL released meanwhile), FLUSH_SLAVE_TIMEOUT after `timeout`.
    fn await_replication<'py>(
        &self,
        py: Python<'py>,
        next_offset: u64,
        count: usize,
        timeout: f64,
        max_gap: u64,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.guard.check()?;
        let acks = self.inner.acks();
        let status = if !acks.in_sync(next_offset, count, max_gap) {
            PutStatus::SLAVE_NOT_AVAILABLE
        } else if py.detach(|| acks.wait_for_ack(next_offset, count, secs(timeout))) {
            PutStatus::PUT_OK
        } else {
            PutStatus::FLUSH_SLAVE_TIMEOUT
        };
        status.to_py(py)
    }

    /// Blocks (GIL released) until acks change after version `seen`; returns the new version.
    fn wait_ack_change(&self, py: Python<'_>, seen: u64, timeout: f64) -> PyResult<u64> {
        self.guard.check()?;
        let acks = self.inner.acks();
        Ok(py.detach(|| acks.wait_changed(seen, secs(timeout))))
    }

    #[getter]
    fn ack_version(&self) -> u64 {
        self.inner.acks().version()
    }

    /// Wakes `wait_ack_change` callers (a new request was queued).
    fn notify(&self) {
        self.inner.acks().notify();
    }

    /// State changes and closes since the last call, waiting up to `timeout` for one:
    /// `(address, state, reason, is_problem)`.
    fn next_events(&self, py: Python<'_>, timeout: f64) -> PyResult<Vec<EventTuple>> {
        self.guard.check()?;
        let events = self.inner.events();
        Ok(event_tuples(py.detach(|| events.drain(secs(timeout)))))
    }

    #[getter]
    fn running(&self) -> bool {
        self.inner.is_running()
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
    inner: HaClient,
    guard: ForkGuard,
}

#[pymethods]
impl HAClient {
    #[new]
    #[pyo3(signature = (store, master_address=None, *, slave_id=1, heartbeat_interval_ms=5000, housekeeping_interval_ms=20000, auth_secret=None, frame_crc=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        store: PyRef<'_, PyMessageStore>,
        master_address: Option<String>,
        slave_id: u64,
        heartbeat_interval_ms: u64,
        housekeeping_interval_ms: u64,
        auth_secret: Option<Vec<u8>>,
        frame_crc: bool,
    ) -> PyResult<Self> {
        let store = store.store()?.clone();
        let config = ha_config(
            32768,
            heartbeat_interval_ms,
            housekeeping_interval_ms,
            None,
            false,
            auth_secret,
            frame_crc,
        );
        let inner = py
            .detach(|| HaClient::start(store, master_address, config, slave_id))
            .map_err(ha_to_py)?;
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

    /// Points the client at another master (or none); the current connection is dropped.
    fn update_master_address(&self, address: Option<String>) -> PyResult<()> {
        self.inner.update_master_address(address).map_err(ha_to_py)
    }

    /// `(bytes_received, frames, buffer_swaps, connects)`.
    fn stats(&self) -> (u64, u64, u64, u64) {
        let s = self.inner.stats();
        (s.bytes_received, s.frames, s.buffer_swaps, s.connects)
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
