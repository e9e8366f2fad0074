//! RocketMQ's `NettyRemotingClient` without Netty: one connection per address, all served by
//! one mio event loop thread ([`connections`]), with any number of requests in flight on each,
//! matched to their responses by `opaque`.
//!
//! - [`NettyRemotingClient::invoke_async`] queues a request and returns; its callback runs on
//!   the loop thread exactly once, with the response, a timeout, or the connection's failure.
//!   A pull consumer holds several long polls on one connection this way.
//! - [`NettyRemotingClient::invoke_sync`] is `invoke_async` plus a wait for the callback.
//! - [`NettyRemotingClient::invoke_oneway`] queues a request no response answers.
//!
//! As in Java's `getAndCreateChannel`, a missing connection is opened by the calling thread
//! (bounded by `connect_timeout`), then handed to the loop. A timeout fails only its own
//! request; a connection that closes or sends a bad frame fails every request pending on it,
//! and the next call opens a new one. Responses nobody waits for (their request timed out) and
//! requests the server sends on its own go to [`ServerRequests`] when the client asked for
//! their code, and are skipped and logged otherwise.
//!
//! Every error says whether the request can have reached the server:
//! [`ClientError::may_have_arrived`] is false only when none of its bytes left the process.

mod config;
mod connections;
mod invoke;
mod server_requests;

pub(crate) use config::{ClientConfig, RpcHook};
pub(crate) use invoke::{ClientError, InvokeCallback, InvokeResult};
pub(crate) use server_requests::ServerRequests;

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use super::command::RemotingCommand;
use super::tls::ClientTls;
use crate::event_loop::{EventLoop, LoopThread};
use crate::sync::lock;
use connections::{Liveness, Op, Request, Shared};

/// A connection the loop serves; `alive` drops when it closes, so the next call reconnects.
struct Channel {
    id: u64,
    remote: SocketAddr,
    alive: Arc<Liveness>,
}

type ChannelSlot = Arc<Mutex<Option<Channel>>>;

/// Connections to any number of servers, one event loop thread for all. Thread-safe.
pub(crate) struct NettyRemotingClient {
    config: ClientConfig,
    shared: Arc<Shared>,
    /// A lock per address, held while connecting: concurrent first calls open one connection,
    /// and a slow connect delays only calls to that address.
    channels: Mutex<HashMap<String, ChannelSlot>>,
    next_channel: AtomicU64,
    /// `RemotingCommand`'s request id counter, one for all connections.
    next_opaque: AtomicI32,
    thread: LoopThread,
}

impl NettyRemotingClient {
    /// Starts the event loop thread; connections are opened by the first call to each address.
    pub(crate) fn start(config: ClientConfig) -> io::Result<Self> {
        let poller = EventLoop::new()?;
        let shared = Arc::new(Shared::new(poller.signal().clone()));
        let event_loop = connections::ClientLoop::new(poller, shared.clone(), config.clone());
        let thread = LoopThread::spawn(&shared.signal, "rocketha-remoting-client", move || {
            event_loop.run()
        })?;
        Ok(Self {
            config,
            shared,
            channels: Mutex::new(HashMap::new()),
            next_channel: AtomicU64::new(0),
            next_opaque: AtomicI32::new(0),
            thread,
        })
    }

    /// Sends `request` (its opaque replaced by a fresh one) to `addr` and returns at once;
    /// `callback` gets the response, or the error, within `timeout`. An error returned here
    /// (bad address, connect failure, encoding) means nothing was sent and the callback is
    /// dropped uncalled.
    pub(crate) fn invoke_async(
        &self,
        addr: &str,
        request: RemotingCommand,
        timeout: Duration,
        callback: impl FnOnce(InvokeResult) + Send + 'static,
    ) -> Result<(), ClientError> {
        self.submit(addr, request, timeout, Some(Box::new(callback)))
    }

    /// Sends `request` and blocks the caller until its response or `timeout`.
    pub(crate) fn invoke_sync(
        &self,
        addr: &str,
        request: RemotingCommand,
        timeout: Duration,
    ) -> InvokeResult {
        let (tx, rx) = mpsc::sync_channel(1);
        self.invoke_async(addr, request, timeout, move |result| {
            let _ = tx.send(result);
        })?;
        // The loop calls every callback once (response, timeout, close or shutdown); a
        // callback dropped uncalled still ends this wait, as a disconnect.
        rx.recv().unwrap_or(Err(ClientError::Shutdown))
    }

    /// Queues `request` marked oneway: no response comes, and a failure after this returns is
    /// only logged (`invokeOneway`).
    pub(crate) fn invoke_oneway(
        &self,
        addr: &str,
        mut request: RemotingCommand,
        timeout: Duration,
    ) -> Result<(), ClientError> {
        request.mark_oneway();
        self.submit(addr, request, timeout, None)
    }

    /// Closes every connection; what was pending on them fails, and later calls reconnect.
    pub(crate) fn close_channels(&self) {
        lock(&self.channels).clear();
        // After shutdown there is nothing left to close.
        let _ = self.shared.push(Op::CloseAll);
    }

    /// Stops the loop; every pending request fails with [`ClientError::Shutdown`].
    pub(crate) fn shutdown(&self) {
        self.thread.stop();
    }

    fn submit(
        &self,
        addr: &str,
        mut request: RemotingCommand,
        timeout: Duration,
        callback: Option<InvokeCallback>,
    ) -> Result<(), ClientError> {
        if self.shared.signal.stopped() {
            return Err(ClientError::Shutdown);
        }
        let (channel, remote, alive) = self.channel(addr)?;
        let opaque = self.next_opaque.fetch_add(1, Ordering::Relaxed);
        request.opaque = opaque;
        // Last, as `doBeforeRpcHooks`: the signature covers the request as it is sent.
        if let Some(hook) = &self.config.rpc_hook {
            hook.do_before_request(&mut request);
        }
        let frame = request
            .encode(self.config.max_frame_size)
            .map_err(|source| ClientError::Encode {
                addr: remote,
                code: request.code,
                source,
            })?;
        let op = Op::Send(Request {
            channel,
            alive,
            remote,
            code: request.code,
            opaque,
            frame,
            timeout,
            callback,
        });
        match self.shared.push(op) {
            Ok(()) => Ok(()),
            // The loop stopped between the check above and now; its callback is dropped.
            Err(_) => Err(ClientError::Shutdown),
        }
    }

    /// The live connection to `addr`, opened now if there is none.
    fn channel(&self, addr: &str) -> Result<(u64, SocketAddr, Arc<Liveness>), ClientError> {
        let slot = lock(&self.channels)
            .entry(addr.to_owned())
            .or_default()
            .clone();
        // Held across the connect: one connection per address.
        let mut slot = lock(&slot);
        if let Some(c) = slot.as_ref() {
            if c.alive.is_open() {
                return Ok((c.id, c.remote, c.alive.clone()));
            }
        }
        let remote = resolve(addr)?;
        // Before connecting: a name rustls cannot check is the caller's mistake, not the
        // network's.
        let session = match &self.config.tls {
            None => None,
            Some(tls) => {
                let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
                let session = tls
                    .connect(host)
                    .map_err(|reason| ClientError::BadAddress {
                        addr: addr.to_owned(),
                        reason,
                    })?;
                Some(Box::new(session))
            }
        };
        let stream = connect(remote, self.config.connect_timeout)?;
        let id = self.next_channel.fetch_add(1, Ordering::Relaxed);
        let alive = Liveness::new();
        self.shared
            .push(Op::Register {
                id,
                stream,
                tls: session,
                remote,
                alive: alive.clone(),
            })
            .map_err(|_| ClientError::Shutdown)?;
        *slot = Some(Channel {
            id,
            remote,
            alive: alive.clone(),
        });
        Ok((id, remote, alive))
    }
}

impl Drop for NettyRemotingClient {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn resolve(addr: &str) -> Result<SocketAddr, ClientError> {
    let bad = |reason: String| ClientError::BadAddress {
        addr: addr.to_owned(),
        reason,
    };
    addr.to_socket_addrs()
        .map_err(|e| bad(e.to_string()))?
        .next()
        .ok_or_else(|| bad("it resolves to no address".into()))
}

fn connect(addr: SocketAddr, timeout: Duration) -> Result<std::net::TcpStream, ClientError> {
    let stream = std::net::TcpStream::connect_timeout(&addr, timeout).map_err(|e| {
        if matches!(
            e.kind(),
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
        ) {
            ClientError::ConnectTimeout {
                addr,
                ms: timeout.as_millis(),
            }
        } else {
            ClientError::Connect {
                addr,
                source: Arc::new(e),
            }
        }
    })?;
    let io_error = |what, e| ClientError::Io {
        addr,
        what,
        source: Arc::new(e),
    };
    // Requests are small and latency-bound.
    stream
        .set_nodelay(true)
        .map_err(|e| io_error("set_nodelay", e))?;
    stream
        .set_nonblocking(true)
        .map_err(|e| io_error("set_nonblocking", e))?;
    Ok(stream)
}

/// A client of one address: the call shape of the name server's and the broker's own
/// requests, which go one at a time (registration, tests).
pub(crate) struct RemotingClient {
    addr: SocketAddr,
    client: NettyRemotingClient,
}

impl RemotingClient {
    /// [`Self::connect_with`] without TLS (tests).
    #[cfg(test)]
    pub(crate) fn connect(addr: SocketAddr, timeout: Duration) -> Result<Self, ClientError> {
        Self::connect_with(addr, timeout, None)
    }

    /// Connects to `addr` within `timeout`, which later reconnects use too; over TLS when
    /// `tls` is given.
    pub(crate) fn connect_with(
        addr: SocketAddr,
        timeout: Duration,
        tls: Option<ClientTls>,
    ) -> Result<Self, ClientError> {
        let client = NettyRemotingClient::start(ClientConfig {
            connect_timeout: timeout,
            tls,
            ..ClientConfig::default()
        })
        .map_err(|e| ClientError::Io {
            addr,
            what: "starting the client loop",
            source: Arc::new(e),
        })?;
        client.channel(&addr.to_string())?;
        Ok(Self { addr, client })
    }

    /// Sends `request` and waits up to `timeout` for its response. `&mut`: this shape serves
    /// one caller's requests in turn; share a [`NettyRemotingClient`] instead.
    pub(crate) fn invoke(&mut self, request: RemotingCommand, timeout: Duration) -> InvokeResult {
        self.client
            .invoke_sync(&self.addr.to_string(), request, timeout)
    }

    /// Sends `request` as oneway (no response comes).
    #[cfg(test)]
    pub(crate) fn invoke_oneway(
        &mut self,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<(), ClientError> {
        self.client
            .invoke_oneway(&self.addr.to_string(), request, timeout)
    }
}
