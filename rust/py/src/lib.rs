//! `rocketha._core`: thin PyO3 wrappers over rocketha-core. Arguments are extracted first, then
//! every blocking or long call runs with the GIL released (`py.detach`).

use pyo3::prelude::*;

mod arrow;
mod broker;
mod buffer;
mod client;
mod config;
mod consumer;
mod errors;
mod ha;
mod message;
mod namesrv;
mod replicas;
mod retention;
mod send;
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
    m.add_class::<config::PyBrokerConfig>()?;
    m.add_function(wrap_pyfunction!(config::broker_config_keys, m)?)?;
    m.add_function(wrap_pyfunction!(config::parse_properties, m)?)?;
    m.add("IGNORED_KEYS", rocketha_core::IGNORED_KEYS.to_vec())?;
    m.add_class::<store::PyMessageStore>()?;
    m.add_class::<retention::CleanEventQueue>()?;
    m.add_class::<ha::HAMaster>()?;
    m.add_class::<ha::HAClient>()?;
    m.add_class::<replicas::PyEpochFileCache>()?;
    m.add_class::<replicas::ReplicasManager>()?;
    m.add_class::<namesrv::NameServer>()?;
    m.add_class::<broker::BrokerController>()?;
    m.add_class::<client::MQClientAPI>()?;
    m.add_class::<tls::ServerTls>()?;
    m.add_class::<tls::ClientTls>()?;
    m.add_function(wrap_pyfunction!(consumer::parse_subscription, m)?)?;
    m.add_function(wrap_pyfunction!(client::standard_json, m)?)?;
    m.add(
        "AUTO_CREATE_TOPIC_KEY_TOPIC",
        rocketha_core::client::AUTO_CREATE_TOPIC_KEY_TOPIC,
    )?;
    m.add(
        "DEFAULT_TOPIC_QUEUE_NUMS",
        rocketha_core::client::DEFAULT_TOPIC_QUEUE_NUMS,
    )?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
