//! What a request's caller gets back: its response or why there is none.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::remoting::command::{CommandError, RemotingCommand};
use crate::remoting::frame::RemotingFrameError;

#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum ClientError {
    #[error("{addr:?} is not a host:port address: {reason}")]
    BadAddress { addr: String, reason: String },
    #[error("connect to {addr} failed: {source}")]
    Connect {
        addr: SocketAddr,
        source: Arc<io::Error>,
    },
    #[error("connect to {addr} timed out after {ms} ms")]
    ConnectTimeout { addr: SocketAddr, ms: u128 },
    #[error("{addr}: no response to request code {code} (opaque {opaque}) within {ms} ms")]
    Timeout {
        addr: SocketAddr,
        code: i32,
        opaque: i32,
        ms: u128,
    },
    #[error("{addr} closed the connection")]
    Closed { addr: SocketAddr },
    #[error("{addr}: {what} failed: {source}")]
    Io {
        addr: SocketAddr,
        what: &'static str,
        source: Arc<io::Error>,
    },
    #[error("{addr} sent a bad frame: {source}")]
    BadFrame {
        addr: SocketAddr,
        source: RemotingFrameError,
    },
    #[error("{addr} sent a bad command: {source}")]
    BadCommand {
        addr: SocketAddr,
        source: CommandError,
    },
    #[error("request code {code} not sent to {addr}: {source}")]
    Encode {
        addr: SocketAddr,
        code: i32,
        source: CommandError,
    },
    #[error("the remoting client closed its connections")]
    Shutdown,
    /// The TLS handshake or a record failed: a certificate refused, a plain-text server.
    #[error("{addr}: {reason}")]
    Tls { addr: SocketAddr, reason: String },
    /// The request failed before any of its bytes were written: `reason` is why.
    #[error("request code {code} not sent to {addr}: {reason}")]
    NotSent {
        addr: SocketAddr,
        code: i32,
        reason: Box<ClientError>,
    },
}

impl ClientError {
    /// False when nothing of the request left the process, so retrying it elsewhere cannot
    /// store it twice.
    pub(crate) fn may_have_arrived(&self) -> bool {
        !matches!(
            self,
            ClientError::BadAddress { .. }
                | ClientError::Connect { .. }
                | ClientError::ConnectTimeout { .. }
                | ClientError::Encode { .. }
                | ClientError::Shutdown
                | ClientError::NotSent { .. }
        )
    }
}

/// What a request's callback gets, on the loop thread.
pub(crate) type InvokeResult = Result<RemotingCommand, ClientError>;
/// Called once per request; must not block (it runs on the loop thread).
pub(crate) type InvokeCallback = Box<dyn FnOnce(InvokeResult) + Send>;
