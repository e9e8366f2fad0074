//! RocketMQ's `NettyRemotingServer` on one mio event loop: it accepts connections, cuts each
//! one's byte stream into frames ([`super::frame::decode_frame`]), decodes the commands and
//! hands requests to a [`RequestProcessor`], then writes the responses back in the request's
//! serialize type with its opaque.
//!
//! A processor answers at once, or later from any thread through a [`Responder`] (a SYNC_MASTER
//! send answered when its slave acks). A later response is written by the responder's thread
//! itself when its connection has nothing queued (one `writev`, and the loop sleeps on);
//! otherwise it is queued for the loop and the loop's [`Waker`] is woken. The loop never polls:
//! it sleeps in epoll until a socket is ready, a queued response or shutdown wakes it, or the
//! nearest idle deadline passes.
//!
//! With TLS ([`ServerConfig::tls`], RocketMQ's `tls.server.mode`) a connection's bytes pass
//! through rustls below the frame decoder; plain connections take the same path as without it.
//!
//! A peer's fault costs only its own connection: a bad frame or header, an oversized length
//! prefix, or a client that never reads its responses (past `max_output_per_connection`) closes
//! that connection with the reason in [`ServerEvents`]; everyone else goes on.

mod config;
mod connection;
mod event_loop;
mod events;
mod invocations;
mod processor;
mod processor_table;
mod responder;
mod shared;

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use mio::net::TcpListener;

use crate::event_loop::{EventLoop as Poller, LoopThread};
use crate::sync::lock;
use event_loop::EventLoop;
use shared::Shared;

pub use config::ServerConfig;
pub use events::{ServerEvent, ServerEventKind, ServerEvents};
pub(crate) use invocations::InvokeError;
pub(crate) use processor::{not_supported, RequestProcessor};
pub(crate) use processor_table::{Executor, ProcessorTable, ServerRpcHook, Worker};
pub(crate) use responder::{RequestContext, Responder};

/// The server: a listening socket and its event loop thread.
pub(crate) struct RemotingServer {
    shared: Arc<Shared>,
    local_addr: SocketAddr,
    thread: LoopThread,
}

impl RemotingServer {
    /// [`RemotingServer::start_with_events`] with events of its own (tests).
    #[cfg(test)]
    pub(crate) fn start(
        listen: SocketAddr,
        processor: Arc<dyn RequestProcessor>,
        config: ServerConfig,
    ) -> Result<Self, io::Error> {
        Self::start_with_events(listen, processor, config, Arc::default())
    }

    /// Binds `listen` (port 0 = OS-chosen) and starts the event loop thread, reporting into
    /// `events`, which the processor may share.
    pub(crate) fn start_with_events(
        listen: SocketAddr,
        processor: Arc<dyn RequestProcessor>,
        config: ServerConfig,
        events: Arc<ServerEvents>,
    ) -> Result<Self, io::Error> {
        let std_listener = std::net::TcpListener::bind(listen)?;
        Self::start_on(std_listener, processor, config, events)
    }

    /// Serves a listener bound beforehand: a broker binds its port first, so the messages it
    /// stores carry the real port (`listenPort=0`) in their store host.
    pub(crate) fn start_on(
        std_listener: std::net::TcpListener,
        processor: Arc<dyn RequestProcessor>,
        config: ServerConfig,
        events: Arc<ServerEvents>,
    ) -> Result<Self, io::Error> {
        std_listener.set_nonblocking(true)?;
        let local_addr = std_listener.local_addr()?;
        let listener = TcpListener::from_std(std_listener);
        let poll = Poller::new()?;
        let shared = Arc::new(Shared {
            signal: poll.signal().clone(),
            outbox: Mutex::new(Vec::new()),
            events,
            max_frame_size: config.max_frame_size,
            invocations: invocations::Invocations::default(),
        });
        let event_loop = EventLoop::new(poll, listener, shared.clone(), processor, config)?;
        let thread = LoopThread::spawn(&shared.signal, "rocketha-remoting", move || {
            event_loop.run()
        })?;
        Ok(Self {
            shared,
            local_addr,
            thread,
        })
    }

    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub(crate) fn events(&self) -> &ServerEvents {
        &self.shared.events
    }

    /// Closes every connection and stops the loop; responses still queued are dropped.
    pub(crate) fn shutdown(&self) {
        self.thread.stop();
        lock(&self.shared.outbox).clear();
        self.shared.events.wake();
    }
}

impl Drop for RemotingServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}
