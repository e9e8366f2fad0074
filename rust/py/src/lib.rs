//! `rocketha._core`: thin PyO3 wrappers over rocketha-core. Arguments are extracted first, then
//! every blocking or long call runs with the GIL released (`py.detach`).

use pyo3::prelude::*;
use pyo3::types::PyDict;
use rocketha_core::ha::HaConfig;
use rocketha_core::StoreConfig;

mod arrow;
mod broker;
mod buffer;
mod client;
mod consumer;
mod errors;
mod ha;
mod message;
mod namesrv;
mod retention;
mod store;
mod tls;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    arrow::register(m)?;
    m.add_class::<message::Message>()?;
    m.add_class::<message::PutResult>()?;
    m.add_class::<message::MessageExt>()?;
    m.add_function(wrap_pyfunction!(message::register_put_status, m)?)?;
    m.add_class::<buffer::SegmentSlice>()?;
    m.add_class::<store::PyMessageStore>()?;
    m.add_function(wrap_pyfunction!(retention::check_retention, m)?)?;
    m.add_class::<retention::CleanEventQueue>()?;
    m.add_class::<ha::HAMaster>()?;
    m.add_class::<ha::HAClient>()?;
    m.add_class::<namesrv::NameServer>()?;
    m.add_class::<broker::BrokerController>()?;
    m.add_class::<client::MQClientAPI>()?;
    m.add_class::<tls::ServerTls>()?;
    m.add_class::<tls::ClientTls>()?;
    m.add_function(wrap_pyfunction!(consumer::parse_subscription, m)?)?;
    m.add("DEFAULTS", defaults(m.py())?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

/// The core's defaults by RocketMQ key, so `BrokerConfig` states each of them once.
fn defaults(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let store = StoreConfig::new("");
    let ha = HaConfig::default();
    let ms = |d: std::time::Duration| d.as_millis() as u64;
    let d = PyDict::new(py);
    d.set_item("mappedFileSizeCommitLog", store.mapped_file_size)?;
    d.set_item(
        "mappedFileSizeConsumeQueue",
        store.mapped_file_size_consume_queue(),
    )?;
    d.set_item("flushIntervalCommitLog", ms(store.flush_interval))?;
    d.set_item("syncFlushTimeout", ms(store.sync_flush_timeout))?;
    d.set_item("slaveTimeout", ms(store.slave_timeout))?;
    d.set_item("haMaxGapNotInSync", store.ha_max_gap_not_in_sync)?;
    d.set_item("haTransferBatchSize", ha.transfer_batch_size)?;
    d.set_item("haSendHeartbeatInterval", ms(ha.heartbeat_interval))?;
    d.set_item("haHousekeepingInterval", ms(ha.housekeeping_interval))?;
    let clean = &store.clean;
    d.set_item("fileReservedTime", clean.file_reserved_time)?;
    d.set_item("diskMaxUsedSpaceRatio", clean.disk_max_used_space_ratio)?;
    d.set_item(
        "diskSpaceCleanForciblyRatio",
        clean.disk_space_clean_forcibly_ratio,
    )?;
    d.set_item(
        "diskSpaceWarningLevelRatio",
        clean.disk_space_warning_level_ratio,
    )?;
    d.set_item("cleanResourceInterval", ms(clean.clean_resource_interval))?;
    d.set_item("deleteFileBatchMax", clean.delete_file_batch_max)?;
    Ok(d)
}
