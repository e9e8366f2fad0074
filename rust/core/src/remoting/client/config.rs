//! A client's limits, TLS and RPC hook.

use std::sync::Arc;
use std::time::Duration;

use super::server_requests::ServerRequests;
use crate::remoting::command::RemotingCommand;
use crate::remoting::frame::DEFAULT_MAX_FRAME_SIZE;
use crate::remoting::tls::ClientTls;

/// RocketMQ's `RPCHook`, defined here so that remoting knows nothing of what a hook does (the
/// ACL implements it): `doBeforeRequest` runs on every request once it is complete.
pub(crate) trait RpcHook: std::fmt::Debug + Send + Sync {
    fn do_before_request(&self, request: &mut RemotingCommand);
}

/// Limits of a client, RocketMQ's `NettyClientConfig` defaults, and its `RPCHook`.
#[derive(Debug, Clone)]
pub(crate) struct ClientConfig {
    /// `connectTimeoutMillis`.
    pub connect_timeout: Duration,
    /// Largest frame sent or accepted (`NettyDecoder`'s 16 MiB).
    pub max_frame_size: usize,
    /// TLS on every connection, to name servers and brokers alike (`useTLS`); `None` is plain
    /// TCP.
    pub tls: Option<ClientTls>,
    /// Runs on every request before it is written: the ACL's signature for a broker with
    /// `aclEnable=true`.
    pub rpc_hook: Option<Arc<dyn RpcHook>>,
    /// Where requests the servers send go; without it they are skipped.
    pub server_requests: Option<Arc<ServerRequests>>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(3),
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            tls: None,
            rpc_hook: None,
            server_requests: None,
        }
    }
}
