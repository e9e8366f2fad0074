//! RocketMQ's remoting protocol, the client-facing port of a broker and of the name server:
//! the frame ([`frame`]), the command header in both serialize types, JSON and ROCKETMQ, and the
//! typed custom headers carried in its `extFields` ([`header`]), and the request and response
//! codes ([`codes`]). Everything follows Apache RocketMQ's wire format byte for byte, so its Java
//! client, `mqadmin` and name server talk to rocketha unchanged.
//!
//! On top of the codec, the network: [`server`] (RocketMQ's `NettyRemotingServer`, one mio
//! event loop dispatching requests to a processor) and [`client`] (`NettyRemotingClient`: one
//! event loop, one connection per address, many requests in flight on each), both optionally
//! over TLS ([`tls`]).
//!
//! Public (not `pub(crate)`) because the fuzz crate drives the decoders, and the broker, the
//! name server and the integration tests build on the server and the client.

pub mod client;
pub mod codes;
pub mod command;
pub mod frame;
pub mod header;
pub mod server;
pub mod tls;

pub use client::{
    ClientConfig, ClientError, InvokeCallback, InvokeResult, NettyRemotingClient, RemotingClient,
};
pub use codes::{request_code, response_code, LanguageCode, SerializeType};
pub use command::{CommandError, ExtFields, RemotingCommand};
pub use frame::{decode_frame, encode_frame, Decoded, RawFrame, RemotingFrameError};
pub use header::{CustomHeader, HeaderError};
pub use server::{
    not_supported, RemotingServer, RequestContext, RequestProcessor, Responder, ServerConfig,
    ServerEvent, ServerEventKind, ServerEvents,
};
pub use tls::{
    ClientAuth, ClientTls, ServerTls, ServerTrust, TlsError, TlsMode, TlsServerSettings,
};
