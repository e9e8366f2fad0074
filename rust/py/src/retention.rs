//! Retention's log lines (RocketMQ's `CleanCommitLogService` deleting, the disk-full flag), for
//! the Python thread that logs them; the retention keys themselves are `BrokerConfig`'s.

use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use rocketha_core::store::CleanEvents;

/// Retention's log lines of one store, for the thread that logs them.
#[pyclass(frozen, module = "rocketha._core")]
pub struct CleanEventQueue {
    inner: Arc<CleanEvents>,
}

impl CleanEventQueue {
    pub(crate) fn new(events: CleanEvents) -> Self {
        Self {
            inner: Arc::new(events),
        }
    }
}

#[pymethods]
impl CleanEventQueue {
    /// `[(problem, text)]`, waiting up to `timeout` seconds (GIL released) for one; `None`
    /// once the store closed and every line was taken.
    fn next(&self, py: Python<'_>, timeout: f64) -> Option<Vec<(bool, String)>> {
        let events = self.inner.clone();
        let timeout = Duration::try_from_secs_f64(timeout.max(0.0)).unwrap_or(Duration::MAX);
        py.detach(move || events.next(timeout))
    }

    /// Ends the waits now: `next` returns what is queued, then `None`.
    fn close(&self) {
        self.inner.close();
    }
}
