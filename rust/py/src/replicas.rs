//! Python handles on controller mode: a broker's epochs (`EpochFileCache`) and its
//! `ReplicasManager`, whose decisions (master of an epoch, or slave of a master) Python drains
//! and applies to the broker.

use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::prelude::*;
use rocketha_core::ha::epoch::{EpochFileCache, EpochFileError};
use rocketha_core::ha::SyncStateEvent;
use rocketha_core::remoting::ServerEvents;
use rocketha_core::replicas_manager::{
    ControllerApi, ReplicasManager as CoreReplicasManager, RoleListener, SyncStateSet,
};
use rocketha_core::MessageStore;

use crate::config::PyBrokerConfig;
use crate::errors::{ConfigError, ForkGuard, HAError};
use crate::ha::HAMaster;
use crate::store::PyMessageStore;

/// The epochs of a broker's log (`storePathEpochFile`), shared by its HA side and its
/// replicas manager.
#[pyclass(frozen, module = "rocketha._core", name = "EpochFileCache")]
pub struct PyEpochFileCache {
    pub(crate) inner: Arc<EpochFileCache>,
}

#[pymethods]
impl PyEpochFileCache {
    #[new]
    fn new(path: PathBuf) -> PyResult<Self> {
        let inner = EpochFileCache::load(&path).map_err(|e| ConfigError::new_err(e.to_string()))?;
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    /// `(epoch, start offset)` of each epoch, oldest first.
    fn entries(&self) -> Vec<(i32, u64)> {
        self.inner
            .entries()
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect()
    }

    /// Records that `epoch` starts at `start_offset`; False when RocketMQ's rule refuses it
    /// (the last epoch is not older, or started at or after it).
    fn append(&self, epoch: i32, start_offset: u64) -> PyResult<bool> {
        match self.inner.append(epoch, start_offset) {
            Ok(()) => Ok(true),
            Err(EpochFileError::NotAfterLast { .. }) => Ok(false),
            Err(e) => Err(ConfigError::new_err(e.to_string())),
        }
    }

    #[getter]
    fn last_epoch(&self) -> i32 {
        self.inner.last_epoch()
    }
}

/// `("MASTER", epoch, sync state set)` or `("SLAVE", epoch, master address, master id)`, or
/// what may change a master's SyncStateSet: `("CAUGHT_UP" | "DISCONNECTED", 0, None, slave
/// id)`; `("WAKE", ...)` ends a wait.
type Decision = (&'static str, i32, Option<String>, Option<i64>, Vec<i64>);

/// Queues the manager's decisions for Python; reads the store for the heartbeats.
struct Decisions {
    tx: Mutex<Sender<Decision>>,
    store: Arc<MessageStore>,
    epochs: Arc<EpochFileCache>,
}

impl RoleListener for Decisions {
    fn change_to_master(&self, epoch: i32, set: &SyncStateSet) {
        let members = set.sync_state_set.iter().copied().collect();
        let _ = self.send(("MASTER", epoch, None, None, members));
    }
    fn change_to_slave(&self, master_addr: &str, master_id: i64, epoch: i32) {
        let decision = (
            "SLAVE",
            epoch,
            Some(master_addr.to_owned()),
            Some(master_id),
            vec![],
        );
        let _ = self.send(decision);
    }
    fn sync_state_set_changed(&self, set: &SyncStateSet) {
        let members = set.sync_state_set.iter().copied().collect();
        let _ = self.send((
            "SYNC_STATE_SET",
            set.sync_state_set_epoch,
            None,
            None,
            members,
        ));
    }
    fn offsets(&self) -> (i32, u64, u64) {
        let max = self.store.max_offset();
        (self.epochs.last_epoch(), max, max)
    }
}

impl Decisions {
    fn send(&self, d: Decision) -> Result<(), std::sync::mpsc::SendError<Decision>> {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).send(d)
    }
}

/// RocketMQ 5's `ReplicasManager`: registers the broker with the controllers at
/// `controller_addr`, beats, and says what the controller decided.
#[pyclass(frozen, module = "rocketha._core")]
pub struct ReplicasManager {
    pub(crate) inner: Arc<CoreReplicasManager>,
    /// Where the master's SyncStateSet events and [`Self::wake`] join the decisions.
    listener: Arc<Decisions>,
    decisions: Mutex<Receiver<Decision>>,
    events: Arc<ServerEvents>,
    guard: ForkGuard,
}

#[pymethods]
impl ReplicasManager {
    /// The manager of the broker `config` describes, whose client port is `broker_addr` and
    /// whose store keeps its broker id at `identity_path`.
    #[new]
    fn new(
        store: PyRef<'_, PyMessageStore>,
        epochs: PyRef<'_, PyEpochFileCache>,
        config: PyRef<'_, PyBrokerConfig>,
        broker_addr: String,
        identity_path: PathBuf,
    ) -> PyResult<Self> {
        let api = ControllerApi::new(config.inner.controller_addrs(), None)?;
        let (tx, rx) = channel();
        let listener = Arc::new(Decisions {
            tx: Mutex::new(tx),
            store: store.store()?.clone(),
            epochs: epochs.inner.clone(),
        });
        let config = config.inner.replicas_config(broker_addr, identity_path);
        let events = Arc::new(ServerEvents::default());
        let inner = CoreReplicasManager::new(api, config, listener.clone(), events.clone());
        Ok(Self {
            inner: Arc::new(inner),
            listener,
            decisions: Mutex::new(rx),
            events,
            guard: ForkGuard::new(),
        })
    }

    fn start(&self) -> PyResult<()> {
        self.guard.check()?;
        Ok(self.inner.start()?)
    }

    /// The controller's decisions since the last call, waiting up to `timeout` for one:
    /// `(kind, epoch, master address, master id, sync state set)`, kind MASTER, SLAVE or
    /// SYNC_STATE_SET (its epoch in the second field).
    fn next_decisions(&self, py: Python<'_>, timeout: f64) -> PyResult<Vec<Decision>> {
        self.guard.check()?;
        let timeout = Duration::from_secs_f64(timeout.clamp(0.0, 1e9));
        Ok(py.detach(|| {
            let rx = self.decisions.lock().unwrap_or_else(|p| p.into_inner());
            let mut out: Vec<Decision> = rx.recv_timeout(timeout).into_iter().collect();
            out.extend(rx.try_iter());
            out
        }))
    }

    /// As master: `master`'s slaves catching up and disconnecting arrive among the decisions.
    fn watch(&self, master: PyRef<'_, HAMaster>) {
        let decisions = self.listener.clone();
        master
            .inner
            .acks()
            .set_sync_state_listener(Arc::new(move |event| {
                let (kind, slave) = match event {
                    SyncStateEvent::CaughtUp(slave) => ("CAUGHT_UP", slave),
                    SyncStateEvent::Disconnected(slave) => ("DISCONNECTED", slave),
                };
                let slave = i64::try_from(slave).ok();
                let _ = decisions.send((kind, 0, None, slave, vec![]));
            }));
    }

    /// Ends a [`Self::next_decisions`] wait now (a stop).
    fn wake(&self) {
        let _ = self.listener.send(("WAKE", 0, None, None, vec![]));
    }

    /// Registrations, elections and failures, with reasons: `(controller, event, reason,
    /// is_problem)`.
    fn next_events(
        &self,
        py: Python<'_>,
        timeout: f64,
    ) -> Vec<(String, &'static str, String, bool)> {
        let timeout = Duration::from_secs_f64(timeout.clamp(0.0, 1e9));
        py.detach(|| self.events.drain(timeout))
            .into_iter()
            .map(|e| (e.addr, e.kind.name(), e.reason, e.problem))
            .collect()
    }

    /// `(broker id, master id, master address, master epoch, sync state set, running,
    /// controller leader)`.
    #[allow(clippy::type_complexity)]
    fn state(
        &self,
    ) -> (
        Option<i64>,
        Option<i64>,
        Option<String>,
        i32,
        Vec<i64>,
        bool,
        Option<String>,
    ) {
        let s = self.inner.state();
        (
            s.broker_id,
            s.master_broker_id,
            s.master_address,
            s.master_epoch,
            s.sync_state_set.sync_state_set.into_iter().collect(),
            s.running,
            s.controller_leader,
        )
    }

    /// A master proposes `members` (its own id among them) as its SyncStateSet; the
    /// controller's answer: `(members, sync state set epoch)`.
    fn alter_sync_state_set(&self, py: Python<'_>, members: Vec<i64>) -> PyResult<(Vec<i64>, i32)> {
        let set = py
            .detach(|| {
                self.inner
                    .alter_sync_state_set(members.into_iter().collect())
            })
            .map_err(|e| HAError::new_err(e.to_string()))?;
        Ok((
            set.sync_state_set.into_iter().collect(),
            set.sync_state_set_epoch,
        ))
    }

    fn shutdown(&self, py: Python<'_>) {
        py.detach(|| self.inner.shutdown());
    }
}
