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

mod connection;
mod event_loop;
mod events;
mod invocations;
mod processor_table;
mod responder;

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mio::net::TcpListener;

use super::codes::response_code;
use super::command::RemotingCommand;
use super::frame::DEFAULT_MAX_FRAME_SIZE;
use super::tls::ServerTls;
use crate::event_loop::{EventLoop as Poller, LoopThread, Signal};
use crate::sync::lock;
use event_loop::EventLoop;

pub use events::{ServerEvent, ServerEventKind, ServerEvents};
use invocations::InvokeCallback;
pub(crate) use invocations::InvokeError;
pub(crate) use processor_table::{Executor, ProcessorTable, ServerRpcHook, Worker};
pub(crate) use responder::{RequestContext, Responder};

/// Handles requests; one instance serves every connection of a server.
pub(crate) trait RequestProcessor: Send + Sync + 'static {
    /// Handles one request on the loop thread (must not block). Returns the response now, or
    /// None when it will be sent later through `ctx.responder()` (a SYNC_MASTER send waiting
    /// for its slave ack), or for a oneway request.
    fn process(&self, request: RemotingCommand, ctx: &RequestContext) -> Option<RemotingCommand>;

    /// A connection closed, for whatever reason (RocketMQ's `ChannelEventListener.onChannelClose`;
    /// the name server forgets the brokers registered over it). Runs on the loop thread.
    fn on_close(&self, _connection_id: u64, _remote: SocketAddr) {}
}

/// `REQUEST_CODE_NOT_SUPPORTED` for `request`, with the remark RocketMQ gives.
pub(crate) fn not_supported(request: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response_to(
        request,
        response_code::REQUEST_CODE_NOT_SUPPORTED,
        Some(format!(" request type {} not supported", request.code)),
    )
}

/// `processor`'s answer to `request`; a panic in it is answered SYSTEM_ERROR, as Netty's
/// handler answers an exception, and the thread (the loop, a worker) and its peers go on.
fn process_caught(
    processor: &dyn RequestProcessor,
    request: RemotingCommand,
    ctx: &RequestContext,
) -> Option<RemotingCommand> {
    let (code, opaque) = (request.code, request.opaque);
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        processor.process(request, ctx)
    }))
    .unwrap_or_else(|_| {
        Some(RemotingCommand::response_to(
            &RemotingCommand::request(code, opaque),
            response_code::SYSTEM_ERROR,
            Some(format!(
                "request code {code} failed: the processor panicked"
            )),
        ))
    })
}

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

/// What the loop shares with responders and the owning handle.
struct Shared {
    signal: Arc<Signal>,
    /// Responses sent from other threads, by connection id, for the loop to write. A lock
    /// rather than a channel: the loop takes the whole batch in one swap.
    outbox: Mutex<Vec<(u64, RemotingCommand)>>,
    events: Arc<ServerEvents>,
    max_frame_size: usize,
    /// The server's own requests waiting for a client's response.
    invocations: invocations::Invocations,
}

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
