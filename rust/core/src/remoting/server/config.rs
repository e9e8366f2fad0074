//! A server's limits.

use std::time::Duration;

use crate::remoting::frame::DEFAULT_MAX_FRAME_SIZE;
use crate::remoting::tls::ServerTls;

/// Limits of a server, RocketMQ's by default.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Largest frame accepted or sent, its length field included (`NettyDecoder`'s 16 MiB).
    pub max_frame_size: usize,
    /// Cap on a connection's unwritten response bytes: past it the connection is closed (a
    /// client that sends requests but never reads the answers would otherwise grow it forever).
    pub max_output_per_connection: usize,
    /// A connection with nothing read or written for this long is closed
    /// (`serverChannelMaxIdleTimeSeconds`, 120 s); `None` keeps idle connections.
    pub idle_timeout: Option<Duration>,
    /// TLS (`tls.server.mode` permissive or enforcing, with its certificate); `None` serves
    /// plain TCP only.
    pub tls: Option<ServerTls>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            // Four largest frames: room for a burst of big answers to a slow reader, not for
            // one that stopped reading.
            max_output_per_connection: 4 * DEFAULT_MAX_FRAME_SIZE,
            idle_timeout: Some(Duration::from_secs(120)),
            tls: None,
        }
    }
}
