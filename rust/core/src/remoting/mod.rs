//! RocketMQ's remoting protocol, the client-facing port of a broker and of the name server:
//! the frame ([`frame`]), the command and its header in both serialize types, JSON and
//! ROCKETMQ (`command`), the typed custom headers carried in its `extFields` ([`header`]), and
//! the request and response codes (`codes`). Everything follows Apache RocketMQ's wire format
//! byte for byte, so its Java client, `mqadmin` and name server talk to rocketha unchanged.
//!
//! On top of the codec, the network: `server` (RocketMQ's `NettyRemotingServer`, one mio
//! event loop dispatching requests to a processor) and `client` (`NettyRemotingClient`: one
//! event loop, one connection per address, many requests in flight on each), both optionally
//! over TLS (`tls`).
//!
//! `pub(crate)` but for what other crates name: the fuzz crate drives the decoders and the
//! custom headers, the load generator speaks the protocol, the binding starts TLS and the
//! consume headers. The server and the client are the crate's own: their loopback tests are
//! unit tests (`remoting::tests`).

pub(crate) mod client;
#[cfg(feature = "harness")]
pub mod codes;
#[cfg(not(feature = "harness"))]
pub(crate) mod codes;
pub(crate) mod command;
#[cfg(feature = "harness")]
pub mod frame;
#[cfg(not(feature = "harness"))]
pub(crate) mod frame;
pub mod header;
pub(crate) mod server;
pub(crate) mod tls;

pub(crate) use client::{ClientConfig, ClientError, NettyRemotingClient, RemotingClient};
#[cfg_attr(feature = "harness", visibility::make(pub))]
pub(crate) use codes::{request_code, response_code};
pub use command::CommandError;
#[cfg_attr(feature = "harness", visibility::make(pub))]
pub(crate) use command::RemotingCommand;
#[cfg_attr(feature = "harness", visibility::make(pub))]
pub(crate) use header::CustomHeader;
pub(crate) use header::ExtFields;
pub use header::HeaderError;
pub(crate) use server::{
    not_supported, Executor, InvokeError, ProcessorTable, RemotingServer, RequestContext,
    RequestProcessor, Responder, ServerRpcHook, Worker,
};
pub use server::{ServerConfig, ServerEvent, ServerEventKind, ServerEvents};
pub use tls::{
    ClientAuth, ClientTls, ServerTls, ServerTrust, TlsError, TlsMode, TlsServerSettings,
};

#[cfg(test)]
mod tests;
