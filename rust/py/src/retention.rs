//! Retention's settings from Python keywords (RocketMQ's `deleteWhen`, `fileReservedTime`, the
//! disk ratios, ...), checked by the core, for the store and for `BrokerConfig`'s validation.

use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use rocketha_core::store::{CleanConfig, CleanEvents};

use crate::errors::ConfigError;

/// Builds the core's config from the keywords given, RocketMQ's defaults for the rest.
#[allow(clippy::too_many_arguments)]
pub(crate) fn clean_config(
    delete_when: Option<&str>,
    file_reserved_time: Option<u64>,
    file_reserved_time_unit_ms: Option<u64>,
    disk_max_used_space_ratio: Option<u32>,
    disk_space_clean_forcibly_ratio: Option<u32>,
    disk_space_warning_level_ratio: Option<u32>,
    clean_resource_interval: Option<u64>,
    delete_file_batch_max: Option<usize>,
) -> PyResult<CleanConfig> {
    let mut c = CleanConfig::default();
    if let Some(text) = delete_when {
        c.delete_when = CleanConfig::parse_delete_when(text).map_err(ConfigError::new_err)?;
    }
    c.file_reserved_time = file_reserved_time.unwrap_or(c.file_reserved_time);
    c.hour = file_reserved_time_unit_ms.map_or(c.hour, Duration::from_millis);
    c.disk_max_used_space_ratio = disk_max_used_space_ratio.unwrap_or(c.disk_max_used_space_ratio);
    c.disk_space_clean_forcibly_ratio =
        disk_space_clean_forcibly_ratio.unwrap_or(c.disk_space_clean_forcibly_ratio);
    c.disk_space_warning_level_ratio =
        disk_space_warning_level_ratio.unwrap_or(c.disk_space_warning_level_ratio);
    c.clean_resource_interval =
        clean_resource_interval.map_or(c.clean_resource_interval, Duration::from_millis);
    c.delete_file_batch_max = delete_file_batch_max.unwrap_or(c.delete_file_batch_max);
    c.validate().map_err(ConfigError::new_err)?;
    Ok(c)
}

/// Checks retention settings as a store would at open; raises `ConfigError` naming the key.
#[pyfunction]
#[pyo3(signature = (*, delete_when=None, file_reserved_time=None, file_reserved_time_unit_ms=None, disk_max_used_space_ratio=None, disk_space_clean_forcibly_ratio=None, disk_space_warning_level_ratio=None, clean_resource_interval=None, delete_file_batch_max=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn check_retention(
    delete_when: Option<&str>,
    file_reserved_time: Option<u64>,
    file_reserved_time_unit_ms: Option<u64>,
    disk_max_used_space_ratio: Option<u32>,
    disk_space_clean_forcibly_ratio: Option<u32>,
    disk_space_warning_level_ratio: Option<u32>,
    clean_resource_interval: Option<u64>,
    delete_file_batch_max: Option<usize>,
) -> PyResult<()> {
    clean_config(
        delete_when,
        file_reserved_time,
        file_reserved_time_unit_ms,
        disk_max_used_space_ratio,
        disk_space_clean_forcibly_ratio,
        disk_space_warning_level_ratio,
        clean_resource_interval,
        delete_file_batch_max,
    )
    .map(|_| ())
}

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
