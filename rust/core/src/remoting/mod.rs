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
pub(crate) mod codes;
pub(crate) mod command;
pub mod frame;
pub mod header;
pub(crate) mod server;
pub(crate) mod tls;

pub(crate) use client::{ClientConfig, ClientError, NettyRemotingClient, RemotingClient};
pub use codes::{request_code, response_code, LanguageCode, SerializeType};
pub(crate) use command::ExtFields;
pub use command::{CommandError, RemotingCommand};
pub use frame::{decode_frame, encode_frame, Decoded, RawFrame, RemotingFrameError};
pub use header::{CustomHeader, HeaderError};
pub(crate) use server::{
    not_supported, RemotingServer, RequestContext, RequestProcessor, Responder,
};
pub use server::{ServerConfig, ServerEvent, ServerEventKind, ServerEvents};
pub use tls::{
    ClientAuth, ClientTls, ServerTls, ServerTrust, TlsError, TlsMode, TlsServerSettings,
};

#[cfg(test)]
mod tests;
