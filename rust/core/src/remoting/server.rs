//! RocketMQ's `NettyRemotingServer` on one mio event loop: it accepts connections, cuts each
//! one's byte stream into frames ([`decode_frame`]), decodes the commands and hands requests to a
//! [`RequestProcessor`], then writes the responses back in the request's serialize type with its
//! opaque.
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

use std::collections::{HashMap, VecDeque};
use std::io::{self, IoSlice, Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::unix::SourceFd;
use mio::{Events, Interest, Token};

use super::codes::{response_code, SerializeType};
use super::command::RemotingCommand;
use super::frame::{decode_frame, Decoded, DEFAULT_MAX_FRAME_SIZE};
use super::tls::{self, ServerTls, TlsMode, HANDSHAKE_RECORD};
use crate::event_loop::{EventLoop as Poller, LoopThread, Signal, WAKER};
use crate::sync::{lock, EventQueue};

const LISTENER: Token = Token(0);
const FIRST_CONNECTION: u64 = 1;

/// Bytes asked of the socket per read, into the loop's one scratch buffer.
const READ_CHUNK: usize = 64 * 1024;
/// Reads one connection gets before the others have their turn: a client pipelining without
/// pause must not starve the rest of the loop.
const READS_PER_TURN: usize = 16;
/// A connection's buffer of undecoded bytes is given back past this once empty, so a single
/// large frame does not pin its memory for the life of the connection.
const KEEP_READ_CAPACITY: usize = 64 * 1024;
/// Frames handed to one `writev`.
const MAX_IOVECS: usize = 64;
/// rustls reads 4 KiB at a time: a TLS connection's turn is as many bytes as a plain one's.
const TLS_READS_PER_TURN: usize = READS_PER_TURN * READ_CHUNK / 4096;

/// Handles requests; one instance serves every connection of a server.
pub trait RequestProcessor: Send + Sync + 'static {
    /// Handles one request on the loop thread (must not block). Returns the response now, or
    /// None when it will be sent later through `ctx.responder()` (a SYNC_MASTER send waiting
    /// for its slave ack), or for a oneway request.
    fn process(&self, request: RemotingCommand, ctx: &RequestContext) -> Option<RemotingCommand>;

    /// A connection closed, for whatever reason (RocketMQ's `ChannelEventListener.onChannelClose`;
    /// the name server forgets the brokers registered over it). Runs on the loop thread.
    fn on_close(&self, _connection_id: u64, _remote: SocketAddr) {}
}

/// `REQUEST_CODE_NOT_SUPPORTED` for `request`, with the remark RocketMQ gives.
pub fn not_supported(request: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response_to(
        request,
        response_code::REQUEST_CODE_NOT_SUPPORTED,
        Some(format!(" request type {} not supported", request.code)),
    )
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

/// What happened to a connection or the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerEventKind {
    Connected,
    Closed,
    /// A server-wide failure (accept, epoll), not tied to one connection.
    Error,
    /// A processor's own news (the name server's `REGISTERED`, `EXPIRED`).
    Processor(&'static str),
}

impl ServerEventKind {
    pub fn name(&self) -> &'static str {
        match self {
            ServerEventKind::Connected => "CONNECTED",
            ServerEventKind::Closed => "CLOSED",
            ServerEventKind::Error => "ERROR",
            ServerEventKind::Processor(name) => name,
        }
    }
}

/// One event, with its reason, for logging.
#[derive(Debug, Clone)]
pub struct ServerEvent {
    /// The peer (`ip:port`), or the listen address for server-wide events.
    pub addr: String,
    pub kind: ServerEventKind,
    pub reason: String,
    /// Warnings (a malformed frame, a client closed for not reading) as opposed to routine
    /// connects and closes.
    pub problem: bool,
}

/// Events queued by the loop (and a processor), drained by whoever observes the server.
#[derive(Default)]
pub struct ServerEvents(EventQueue<ServerEvent>);

impl ServerEvents {
    pub fn push(
        &self,
        addr: impl Into<String>,
        kind: ServerEventKind,
        reason: impl Into<String>,
        problem: bool,
    ) {
        self.0.push(ServerEvent {
            addr: addr.into(),
            kind,
            reason: reason.into(),
            problem,
        });
    }

    /// Waits up to `timeout` for events and returns all queued ones.
    pub fn drain(&self, timeout: Duration) -> Vec<ServerEvent> {
        self.0.drain(timeout)
    }

    /// Wakes drainers early, and keeps them from waiting from now on (on shutdown).
    pub fn wake(&self) {
        self.0.close();
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
}

/// Sends the response to one request later, from any thread.
#[derive(Clone)]
pub struct Responder {
    connection_id: u64,
    opaque: i32,
    serialize_type: SerializeType,
    /// Weak: a closed connection's socket is closed by the loop at once, whoever still holds
    /// a responder for it.
    output: Weak<Output>,
    shared: Arc<Shared>,
}

impl Responder {
    /// Thread-safe. Dropped silently if the connection is gone. The response is sent with the
    /// request's opaque and serialize type, and marked as a response, whatever the processor
    /// built.
    ///
    /// When the connection has nothing queued, the response is written from this thread: a
    /// SYNC_MASTER send settled by its slave's ack goes out from the HA thread that read the
    /// ack, without waking the loop (an eventfd write, an epoll wake-up and a context switch
    /// per response on a lone connection). Otherwise, or when it does not encode, it joins the
    /// loop's outbox, behind what is queued.
    pub fn send(&self, mut response: RemotingCommand) {
        response.opaque = self.opaque;
        response.mark_response();
        self.queue(response);
    }

    /// Sends a oneway request of the server's own on this request's connection, as RocketMQ's
    /// broker `invokeOneway`s NOTIFY_CONSUMER_IDS_CHANGED to a group's consumers. Thread-safe;
    /// dropped silently if the connection is gone; written like [`Self::send`]'s responses.
    pub fn send_oneway_request(&self, mut request: RemotingCommand) {
        request.mark_oneway();
        self.queue(request);
    }

    fn queue(&self, mut command: RemotingCommand) {
        if self.shared.signal.stopped() {
            return;
        }
        command.serialize_type = self.serialize_type;
        let Some(output) = self.output.upgrade() else {
            return;
        };
        {
            let mut queue = lock(&output.queue);
            if queue.frames.is_empty() && !queue.write_blocked {
                if let Ok(frame) = command.encode(self.shared.max_frame_size) {
                    queue.push(frame);
                    // What the socket does not take now goes on its writable edge, in the
                    // loop. A failed write means a broken socket, which epoll reports to the
                    // loop as well: the loop closes the connection and logs why.
                    let _ = queue.flush(&output.stream);
                    return;
                }
            }
        }
        let first = {
            let mut outbox = lock(&self.shared.outbox);
            outbox.push((self.connection_id, command));
            outbox.len() == 1
        };
        // A non-empty outbox already has a wake-up on its way.
        if first {
            self.shared.signal.wake();
        }
    }
}

/// What a processor knows about the request in hand.
pub struct RequestContext {
    remote: SocketAddr,
    responder: Responder,
}

impl RequestContext {
    pub fn remote(&self) -> SocketAddr {
        self.remote
    }

    pub fn connection_id(&self) -> u64 {
        self.responder.connection_id
    }

    /// Answers this request later, from any thread.
    pub fn responder(&self) -> Responder {
        self.responder.clone()
    }
}

/// The server: a listening socket and its event loop thread.
pub struct RemotingServer {
    shared: Arc<Shared>,
    local_addr: SocketAddr,
    thread: LoopThread,
}

impl RemotingServer {
    /// Binds `listen` (port 0 = OS-chosen) and starts the event loop thread.
    pub fn start(
        listen: SocketAddr,
        processor: Arc<dyn RequestProcessor>,
        config: ServerConfig,
    ) -> Result<Self, io::Error> {
        Self::start_with_events(listen, processor, config, Arc::default())
    }

    /// [`RemotingServer::start`] reporting into `events`, which the processor may share.
    pub fn start_with_events(
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
    pub fn start_on(
        std_listener: std::net::TcpListener,
        processor: Arc<dyn RequestProcessor>,
        config: ServerConfig,
        events: Arc<ServerEvents>,
    ) -> Result<Self, io::Error> {
        std_listener.set_nonblocking(true)?;
        let local_addr = std_listener.local_addr()?;
        let mut listener = TcpListener::from_std(std_listener);
        let poll = Poller::new()?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let shared = Arc::new(Shared {
            signal: poll.signal().clone(),
            outbox: Mutex::new(Vec::new()),
            events,
            max_frame_size: config.max_frame_size,
        });
        let event_loop = EventLoop {
            shared: shared.clone(),
            processor,
            config,
            poll,
            listener,
            local_addr,
            conns: HashMap::new(),
            next_id: FIRST_CONNECTION,
            scratch: vec![0; READ_CHUNK].into_boxed_slice(),
        };
        let thread = LoopThread::spawn(&shared.signal, "rocketha-remoting", move || {
            event_loop.run()
        })?;
        Ok(Self {
            shared,
            local_addr,
            thread,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn events(&self) -> &ServerEvents {
        &self.shared.events
    }

    /// Closes every connection and stops the loop; responses still queued are dropped.
    pub fn shutdown(&self) {
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

/// Why a connection is closed, and whether that is the peer's fault.
struct Close {
    reason: String,
    problem: bool,
}

impl Close {
    fn problem(reason: String) -> Self {
        Self {
            reason,
            problem: true,
        }
    }
}

/// A connection's write side, shared (weakly) with the responders of its requests.
struct Output {
    stream: TcpStream,
    /// Taken by whoever writes, the loop or a responder's thread: frames never interleave on
    /// the socket and go out in the order they were queued.
    queue: Mutex<OutQueue>,
}

/// Encoded responses not yet written.
#[derive(Default)]
struct OutQueue {
    /// The front one from `written` on.
    frames: VecDeque<Vec<u8>>,
    written: usize,
    bytes: usize,
    /// The socket said WouldBlock: nothing more goes out until its writable edge.
    write_blocked: bool,
    /// A TLS connection's rustls state; its reads take this lock too. Frames stay in `frames`
    /// until rustls takes them, so `bytes` and the output cap count what is unsent.
    tls: Option<Box<rustls::Connection>>,
}

/// What a connection's bytes are.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wire {
    Plain,
    /// A TLS-enabled port, before the first byte told which.
    Undecided,
    Tls,
}

struct Connection {
    id: u64,
    output: Arc<Output>,
    remote: SocketAddr,
    wire: Wire,
    /// Bytes read and not yet decoded (a partial frame).
    read_buf: Vec<u8>,
    /// Its turn ended before the socket said WouldBlock: the loop reads it again before
    /// sleeping, since edge-triggered epoll will not report it again.
    more_to_read: bool,
    /// epoll reported the peer's FIN (or an error): read on to the end of the stream, as a
    /// short read no longer proves the socket drained of what is left to see.
    read_closed: bool,
    /// Last read or loop-side write (a responder's write does not count: it answers a
    /// request read at most `slaveTimeout` before).
    last_active: Instant,
}

impl OutQueue {
    fn push(&mut self, frame: Vec<u8>) {
        self.bytes += frame.len();
        self.frames.push_back(frame);
    }

    /// Writes until the socket would block or nothing is left; returns whether it wrote.
    fn flush(&mut self, stream: &TcpStream) -> Result<bool, Close> {
        if self.tls.is_some() {
            return self.flush_tls(stream);
        }
        let mut wrote = false;
        while !self.frames.is_empty() && !self.write_blocked {
            let mut slices = [IoSlice::new(&[]); MAX_IOVECS];
            let mut count = 0;
            for (slice, f) in slices.iter_mut().zip(&self.frames) {
                *slice = IoSlice::new(if count == 0 { &f[self.written..] } else { f });
                count += 1;
            }
            match (&*stream).write_vectored(&slices[..count]) {
                Ok(0) => return Err(Close::problem("write returned 0 bytes".into())),
                Ok(mut n) => {
                    wrote = true;
                    self.bytes -= n;
                    while n > 0 {
                        let Some(front) = self.frames.front() else {
                            break;
                        };
                        let left = front.len() - self.written;
                        if n >= left {
                            n -= left;
                            self.frames.pop_front();
                            self.written = 0;
                        } else {
                            self.written += n;
                            n = 0;
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.write_blocked = true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Close::problem(format!("write failed: {e}"))),
            }
        }
        Ok(wrote)
    }

    /// [`Self::flush`] through rustls: frames go in as far as it takes them, its records out
    /// until the socket would block; handshake records go out even with no frame queued.
    fn flush_tls(&mut self, stream: &TcpStream) -> Result<bool, Close> {
        let Some(tls) = self.tls.as_deref_mut() else {
            return Ok(false);
        };
        let mut wrote = false;
        while !self.write_blocked {
            while let Some(front) = self.frames.front() {
                let n = tls::feed(tls, &front[self.written..])
                    .map_err(|e| Close::problem(format!("TLS write failed: {e}")))?;
                if n == 0 {
                    break;
                }
                self.bytes -= n;
                self.written += n;
                if self.written == front.len() {
                    self.frames.pop_front();
                    self.written = 0;
                }
            }
            let (wrote_now, blocked) = tls::write_records(tls, &mut &*stream)
                .map_err(|e| Close::problem(format!("write failed: {e}")))?;
            wrote |= wrote_now;
            self.write_blocked = blocked;
            // Done when rustls took every frame (or holds them for its handshake) and sent
            // every record.
            if !wrote_now || self.frames.is_empty() || tls.is_handshaking() {
                break;
            }
        }
        Ok(wrote)
    }
}

struct EventLoop {
    shared: Arc<Shared>,
    processor: Arc<dyn RequestProcessor>,
    config: ServerConfig,
    poll: Poller,
    listener: TcpListener,
    local_addr: SocketAddr,
    conns: HashMap<u64, Connection>,
    next_id: u64,
    scratch: Box<[u8]>,
}

impl EventLoop {
    fn run(mut self) {
        let mut events = Events::with_capacity(256);
        while !self.poll.stopped() {
            let timeout = if self.conns.values().any(|c| c.more_to_read) {
                Some(Duration::ZERO)
            } else {
                self.idle_deadline()
                    .map(|d| d.saturating_duration_since(Instant::now()))
            };
            // Without an idle deadline it sleeps until an event (mio caps the wait itself).
            if let Err(e) = self
                .poll
                .poll(&mut events, timeout.unwrap_or(Duration::MAX))
            {
                self.shared.events.push(
                    self.local_addr.to_string(),
                    ServerEventKind::Error,
                    format!("epoll failed, the server stops: {e}"),
                    true,
                );
                break;
            }
            for event in events.iter() {
                match event.token() {
                    LISTENER => self.accept(),
                    WAKER => {}
                    Token(token) => {
                        let id = token as u64;
                        let closed = event.is_read_closed() || event.is_error();
                        let result = self.on_event(
                            id,
                            event.is_writable(),
                            event.is_readable() || closed,
                            closed,
                        );
                        if let Err(close) = result {
                            self.close(id, close);
                        }
                    }
                }
            }
            self.read_the_rest();
            self.deliver_outbox();
            self.close_idle();
        }
        let ids: Vec<u64> = self.conns.keys().copied().collect();
        for id in ids {
            self.close(
                id,
                Close {
                    reason: "server shutting down".into(),
                    problem: false,
                },
            );
        }
    }

    /// The nearest moment a connection turns idle; `None` sleeps until an event.
    fn idle_deadline(&self) -> Option<Instant> {
        let idle = self.config.idle_timeout?;
        self.conns
            .values()
            .filter_map(|c| c.last_active.checked_add(idle))
            .min()
    }

    fn close_idle(&mut self) {
        let Some(idle) = self.config.idle_timeout else {
            return;
        };
        let now = Instant::now();
        let idle_ids: Vec<u64> = self
            .conns
            .values()
            .filter(|c| now.saturating_duration_since(c.last_active) >= idle)
            .map(|c| c.id)
            .collect();
        for id in idle_ids {
            let reason = format!(
                "idle for {} ms (serverChannelMaxIdleTimeSeconds)",
                idle.as_millis()
            );
            self.close(
                id,
                Close {
                    reason,
                    problem: false,
                },
            );
        }
    }

    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((mut stream, remote)) => {
                    // Requests and responses are small and latency-bound.
                    let _ = stream.set_nodelay(true);
                    let id = self.next_id;
                    self.next_id += 1;
                    if let Err(e) = self.poll.registry().register(
                        &mut stream,
                        Token(id as usize),
                        Interest::READABLE | Interest::WRITABLE,
                    ) {
                        self.shared.events.push(
                            remote.to_string(),
                            ServerEventKind::Closed,
                            format!("register with epoll failed: {e}"),
                            true,
                        );
                        continue;
                    }
                    let wire = if self.config.tls.is_some() {
                        Wire::Undecided
                    } else {
                        Wire::Plain
                    };
                    self.conns.insert(
                        id,
                        Connection {
                            id,
                            output: Arc::new(Output {
                                stream,
                                queue: Mutex::default(),
                            }),
                            remote,
                            wire,
                            read_buf: Vec::new(),
                            more_to_read: false,
                            read_closed: false,
                            last_active: Instant::now(),
                        },
                    );
                    self.shared.events.push(
                        remote.to_string(),
                        ServerEventKind::Connected,
                        format!("connection {id} accepted"),
                        false,
                    );
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // Out of file descriptors and the like: report, retry on the next event.
                    self.shared.events.push(
                        self.local_addr.to_string(),
                        ServerEventKind::Error,
                        format!("accept failed: {e}"),
                        true,
                    );
                    return;
                }
            }
        }
    }

    fn on_event(
        &mut self,
        id: u64,
        writable: bool,
        readable: bool,
        read_closed: bool,
    ) -> Result<(), Close> {
        let Some(conn) = self.conns.get_mut(&id) else {
            return Ok(());
        };
        if writable {
            lock(&conn.output.queue).write_blocked = false;
            self.flush(id)?;
        }
        if readable {
            let Some(conn) = self.conns.get_mut(&id) else {
                return Ok(());
            };
            conn.read_closed |= read_closed;
            if conn.wire == Wire::Undecided && !self.sniff(id)? {
                return Ok(());
            }
            // What was answered goes out even when the read ends the connection (a client
            // that half-closes after its last request still gets its responses).
            let read = self.read(id);
            self.flush(id)?;
            read?;
        }
        Ok(())
    }

    /// Reads until the socket is drained or the connection's turn ends, dispatching every
    /// complete frame as it arrives, so its buffer holds at most one partial frame. Responses
    /// given at once are queued; the caller writes them all with one `writev` ([`Self::flush`]).
    ///
    /// A read shorter than the scratch buffer took everything the socket held: bytes arriving
    /// later raise a new edge in epoll, so the read that would only say EAGAIN (one syscall
    /// per request for a synchronous client) is skipped. Once the peer's FIN was reported it
    /// reads on to the end of the stream, since no later edge would come for it.
    fn read(&mut self, id: u64) -> Result<(), Close> {
        if self.conns.get(&id).is_some_and(|c| c.wire == Wire::Tls) {
            return self.read_tls(id);
        }
        for _ in 0..READS_PER_TURN {
            let Some(conn) = self.conns.get_mut(&id) else {
                return Ok(());
            };
            match (&conn.output.stream).read(&mut self.scratch) {
                Ok(0) => {
                    return Err(Close {
                        reason: "closed by the peer".into(),
                        problem: false,
                    })
                }
                Ok(n) => {
                    conn.last_active = Instant::now();
                    conn.read_buf.extend_from_slice(&self.scratch[..n]);
                    let drained = n < self.scratch.len() && !conn.read_closed;
                    self.dispatch_frames(id)?;
                    if drained {
                        if let Some(conn) = self.conns.get_mut(&id) {
                            conn.more_to_read = false;
                        }
                        return Ok(());
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    conn.more_to_read = false;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Close::problem(format!("read failed: {e}"))),
            }
        }
        if let Some(conn) = self.conns.get_mut(&id) {
            conn.more_to_read = true;
        }
        Ok(())
    }

    /// Tells a TLS connection from a plain one by its first byte, as RocketMQ's
    /// `HandshakeHandler` does; false while no byte has come.
    fn sniff(&mut self, id: u64) -> Result<bool, Close> {
        let Some(tls) = self.config.tls.as_ref() else {
            return Ok(true);
        };
        let Some(conn) = self.conns.get_mut(&id) else {
            return Ok(false);
        };
        let mut first = [0u8; 1];
        match conn.output.stream.peek(&mut first) {
            Ok(0) => Err(Close {
                reason: "closed by the peer".into(),
                problem: false,
            }),
            Ok(_) if first[0] == HANDSHAKE_RECORD => {
                let session = tls
                    .accept()
                    .map_err(|e| Close::problem(format!("TLS: {e}")))?;
                lock(&conn.output.queue).tls = Some(Box::new(session));
                conn.wire = Wire::Tls;
                Ok(true)
            }
            Ok(_) if tls.mode() == TlsMode::Enforcing => Err(Close::problem(
                "a plain-text client on a TLS-only port (tls.server.mode=enforcing): \
                 connect with TLS (useTLS)"
                    .into(),
            )),
            Ok(_) => {
                conn.wire = Wire::Plain;
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(false),
            Err(e) => Err(Close::problem(format!("read failed: {e}"))),
        }
    }

    /// [`Self::read`] of a TLS connection: records in, plaintext frames out, under the output
    /// lock that rustls' state lives behind.
    fn read_tls(&mut self, id: u64) -> Result<(), Close> {
        let Some(conn) = self.conns.get_mut(&id) else {
            return Ok(());
        };
        let seen = {
            let mut queue = lock(&conn.output.queue);
            let Some(session) = queue.tls.as_deref_mut() else {
                return Ok(());
            };
            let mut stream = &conn.output.stream;
            match tls::read_plaintext(session, &mut stream, &mut conn.read_buf, TLS_READS_PER_TURN)
            {
                Ok(seen) => seen,
                Err(e) => {
                    // The alert saying why, if the socket takes it.
                    let _ = tls::write_records(session, &mut stream);
                    return Err(Close::problem(if e.kind() == io::ErrorKind::InvalidData {
                        e.to_string()
                    } else {
                        format!("read failed: {e}")
                    }));
                }
            }
        };
        conn.last_active = Instant::now();
        conn.more_to_read = !seen.drained && !seen.eof;
        self.dispatch_frames(id)?;
        if seen.eof {
            return Err(Close {
                reason: "closed by the peer".into(),
                problem: false,
            });
        }
        Ok(())
    }

    /// Reads again from the connections whose turn ended with bytes left in their socket.
    fn read_the_rest(&mut self) {
        let ids: Vec<u64> = self
            .conns
            .values()
            .filter(|c| c.more_to_read)
            .map(|c| c.id)
            .collect();
        for id in ids {
            let read = self.read(id);
            if let Err(close) = self.flush(id).and(read) {
                self.close(id, close);
            }
        }
    }

    fn dispatch_frames(&mut self, id: u64) -> Result<(), Close> {
        let max_frame_size = self.config.max_frame_size;
        let mut start = 0;
        loop {
            let Some(conn) = self.conns.get_mut(&id) else {
                return Ok(());
            };
            let (command, consumed) = match decode_frame(&conn.read_buf[start..], max_frame_size) {
                Ok(Decoded::NeedMore { .. }) => break,
                Ok(Decoded::Frame { frame, consumed }) => {
                    let command = RemotingCommand::decode(&frame)
                        .map_err(|e| Close::problem(format!("malformed command: {e}")))?;
                    (command, consumed)
                }
                Err(e) => {
                    // A length whose first byte is 0x16 is over any frame limit: most likely
                    // a TLS ClientHello on a port that serves plain TCP.
                    let hint = if conn.read_buf.get(start) == Some(&HANDSHAKE_RECORD) {
                        " (a TLS handshake? this port serves plain TCP: tls.server.mode=disabled)"
                    } else {
                        ""
                    };
                    return Err(Close::problem(format!("malformed frame: {e}{hint}")));
                }
            };
            start += consumed;
            let (remote, output) = (conn.remote, Arc::downgrade(&conn.output));
            self.dispatch(id, remote, output, command)?;
        }
        if let Some(conn) = self.conns.get_mut(&id) {
            conn.read_buf.drain(..start);
            if conn.read_buf.is_empty() && conn.read_buf.capacity() > KEEP_READ_CAPACITY {
                conn.read_buf = Vec::new();
            }
        }
        Ok(())
    }

    fn dispatch(
        &mut self,
        id: u64,
        remote: SocketAddr,
        output: Weak<Output>,
        request: RemotingCommand,
    ) -> Result<(), Close> {
        if request.is_response() {
            // The server sends no requests of its own, so no response is awaited.
            log::debug!(
                "{remote}: dropped a response (code {}, opaque {}) nobody asked for",
                request.code,
                request.opaque
            );
            return Ok(());
        }
        let oneway = request.is_oneway();
        let (opaque, serialize_type) = (request.opaque, request.serialize_type);
        let ctx = RequestContext {
            remote,
            responder: Responder {
                connection_id: id,
                opaque,
                serialize_type,
                output,
                shared: self.shared.clone(),
            },
        };
        let code = request.code;
        let processor = &self.processor;
        let response = match catch_unwind(AssertUnwindSafe(|| processor.process(request, &ctx))) {
            Ok(response) => response,
            // As Netty's handler answers an exception: the loop and the other peers go on.
            Err(_) => Some(RemotingCommand::response_to(
                &RemotingCommand::request(code, opaque),
                response_code::SYSTEM_ERROR,
                Some(format!(
                    "request code {code} failed: the processor panicked"
                )),
            )),
        };
        let Some(mut response) = response else {
            return Ok(());
        };
        if oneway {
            return Ok(());
        }
        response.opaque = opaque;
        response.serialize_type = serialize_type;
        response.mark_response();
        self.queue(id, response)
    }

    /// Encodes and queues one response for the connection's next [`Self::flush`]; a response
    /// too large for a frame goes out as SYSTEM_ERROR instead, so the client is not left
    /// waiting.
    fn queue(&mut self, id: u64, response: RemotingCommand) -> Result<(), Close> {
        let max_frame_size = self.config.max_frame_size;
        let Some(conn) = self.conns.get_mut(&id) else {
            return Ok(());
        };
        let frame = match response.encode(max_frame_size) {
            Ok(frame) => frame,
            Err(e) => {
                let reason = format!("response code {} not sent: {e}", response.code);
                self.shared.events.push(
                    conn.remote.to_string(),
                    ServerEventKind::Error,
                    reason.clone(),
                    true,
                );
                let mut error = response;
                error.code = response_code::SYSTEM_ERROR;
                error.remark = Some(reason);
                error.ext_fields.clear();
                error.body = Vec::new();
                error
                    .encode(max_frame_size)
                    .map_err(|e| Close::problem(format!("cannot encode a response: {e}")))?
            }
        };
        lock(&conn.output.queue).push(frame);
        Ok(())
    }

    /// Writes what the connection has queued, all of it in one `writev` when the socket takes
    /// it, and closes a client that lets too much pile up unread.
    fn flush(&mut self, id: u64) -> Result<(), Close> {
        let cap = self.config.max_output_per_connection;
        let Some(conn) = self.conns.get_mut(&id) else {
            return Ok(());
        };
        let mut queue = lock(&conn.output.queue);
        if queue.flush(&conn.output.stream)? {
            conn.last_active = Instant::now();
        }
        if queue.bytes > cap {
            return Err(Close::problem(format!(
                "{} response bytes unread by the client, over the cap of {cap} \
                 (max_output_per_connection): a client that does not read its responses",
                queue.bytes
            )));
        }
        Ok(())
    }

    /// Writes the responses other threads queued: each connection's with one `writev`.
    fn deliver_outbox(&mut self) {
        let queued = std::mem::take(&mut *lock(&self.shared.outbox));
        let mut touched: Vec<u64> = Vec::with_capacity(queued.len());
        for (id, response) in queued {
            if let Err(close) = self.queue(id, response) {
                self.close(id, close);
            }
            touched.push(id);
        }
        touched.sort_unstable();
        touched.dedup();
        for id in touched {
            if let Err(close) = self.flush(id) {
                self.close(id, close);
            }
        }
    }

    fn close(&mut self, id: u64, close: Close) {
        if let Some(conn) = self.conns.remove(&id) {
            // By its fd: responders share the stream. The socket closes when `conn` drops
            // (their references are weak).
            let fd = conn.output.stream.as_raw_fd();
            let _ = self.poll.registry().deregister(&mut SourceFd(&fd));
            // The processor first: whoever sees the event finds its consequences done.
            let processor = &self.processor;
            if catch_unwind(AssertUnwindSafe(|| processor.on_close(id, conn.remote))).is_err() {
                log::error!("{}: on_close of connection {id} panicked", conn.remote);
            }
            self.shared.events.push(
                conn.remote.to_string(),
                ServerEventKind::Closed,
                format!("connection {id}: {}", close.reason),
                close.problem,
            );
        }
    }
}
