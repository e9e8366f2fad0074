//! The name server: [`NameServer`] (RocketMQ's `NamesrvController`) serving
//! `DefaultRequestProcessor` ([`processor`]) over the remoting server, on RocketMQ's
//! `RouteInfoManager` ([`route_info`]). The bodies it reads and answers with are the
//! [`protocol`](crate::protocol)'s.

mod controller;
pub(crate) mod kv_config;
pub(crate) mod processor;
mod registered_topics;
pub(crate) mod route_info;

pub use controller::{NameServer, NamesrvConfig};
