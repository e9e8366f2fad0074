//! rocketha-core: RocketMQ's commit log and classic master/slave HA replication in pure Rust,
//! with its network front end: the remoting protocol's server and client ([`remoting`]) and
//! the name server ([`NameServer`]).
//!
//! The Python package drives this crate through the thin `rocketha-py` binding; everything here
//! is usable and testable without Python.

pub mod acl;
pub mod arrow;
mod broker;
pub mod client;
pub mod commitlog;
mod consume_queue;
pub mod error;
mod event_loop;
mod filter;
pub mod ha;
mod namesrv;
pub(crate) mod protocol;
pub mod remoting;
pub mod store;
mod sync;

/// Controller mode: the broker's side of RocketMQ 5's controller.
pub use broker::replicas_manager;
pub use broker::{
    parse_properties, BrokerConfig, BrokerController, BrokerControllerConfig, BrokerError,
    BrokerSettings, ClientChannel, ConfigError, LiveFlag, LiveNumber, Loaded, PropertiesError,
    Value, IGNORED_KEYS,
};
pub use commitlog::flush::FlushDiskType;
pub use namesrv::{NameServer, NamesrvConfig};
pub use store::{MessageStore, StoreConfig};
