//! The remoting server and client over loopback, plain and TLS: unit tests of the crate, as no
//! other crate starts a `RemotingServer` or a `NettyRemotingClient` of its own.

mod client;
mod fixture;
mod processor_table;
mod server;
mod tls;
