//! The server's event loop: accepts connections, reads their frames and dispatches the
//! requests to the processor, writes the responses, and closes idle or faulty connections.

use std::collections::{BTreeSet, HashMap};
use std::io::{self, Read};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use mio::net::TcpListener;
use mio::unix::SourceFd;
use mio::{Events, Interest, Token};

use super::config::ServerConfig;
use super::connection::{Close, Connection, Output, Wire};
use super::events::ServerEventKind;
use super::processor::{process_caught, RequestProcessor};
use super::responder::{RequestContext, Responder};
use super::shared::Shared;
use crate::event_loop::{EventLoop as Poller, WAKER};
use crate::remoting::codes::response_code;
use crate::remoting::command::RemotingCommand;
use crate::remoting::frame::{decode_frame, Decoded};
use crate::remoting::tls::{self, TlsMode, HANDSHAKE_RECORD};
use crate::sync::lock;

const LISTENER: Token = Token(0);
/// Connection ids, unique in the process: servers that share a processor table (a broker's
/// port and its VIP channel) tell it apart which connection closed.
static NEXT_CONNECTION: AtomicU64 = AtomicU64::new(1);

/// Bytes asked of the socket per read, into the loop's one scratch buffer.
const READ_CHUNK: usize = 64 * 1024;
/// Reads one connection gets before the others have their turn: a client pipelining without
/// pause must not starve the rest of the loop.
const READS_PER_TURN: usize = 16;
/// A connection's buffer of undecoded bytes is given back past this once empty, so a single
/// large frame does not pin its memory for the life of the connection.
const KEEP_READ_CAPACITY: usize = 64 * 1024;
/// rustls reads 4 KiB at a time: a TLS connection's turn is as many bytes as a plain one's.
const TLS_READS_PER_TURN: usize = READS_PER_TURN * READ_CHUNK / 4096;

pub(super) struct EventLoop {
    shared: Arc<Shared>,
    processor: Arc<dyn RequestProcessor>,
    config: ServerConfig,
    poll: Poller,
    listener: TcpListener,
    local_addr: SocketAddr,
    conns: HashMap<u64, Connection>,
    /// Connections whose turn ended before the socket said WouldBlock: the loop reads them
    /// again before sleeping, since edge-triggered epoll will not report them again. A set,
    /// so a loop turn costs the same with 1,000 idle clients as with one.
    unread: BTreeSet<u64>,
    /// When a connection may next have been idle for `idle_timeout`: the earliest deadline
    /// at the last scan, or a newer connection's. Scanning every connection at every turn
    /// would make each request cost in proportion to the clients connected.
    idle_scan_at: Option<Instant>,
    scratch: Box<[u8]>,
}

impl EventLoop {
    /// The loop of `listener`, registered with `poll`, the poller `shared` signals.
    pub(super) fn new(
        poll: Poller,
        mut listener: TcpListener,
        shared: Arc<Shared>,
        processor: Arc<dyn RequestProcessor>,
        config: ServerConfig,
    ) -> io::Result<Self> {
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        Ok(EventLoop {
            shared,
            processor,
            config,
            poll,
            local_addr: listener.local_addr()?,
            listener,
            conns: HashMap::new(),
            unread: BTreeSet::new(),
            idle_scan_at: None,
            scratch: vec![0; READ_CHUNK].into_boxed_slice(),
        })
    }

    pub(super) fn run(mut self) {
        let mut events = Events::with_capacity(256);
        let mut invocation_deadline = None;
        while !self.poll.stopped() {
            let timeout = if !self.unread.is_empty() {
                Some(Duration::ZERO)
            } else {
                [self.idle_scan_at, invocation_deadline]
                    .into_iter()
                    .flatten()
                    .min()
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
            if self.idle_scan_at.is_some_and(|at| at <= Instant::now()) {
                self.close_idle();
                self.idle_scan_at = self.idle_deadline();
            }
            invocation_deadline = self.shared.invocations.expire(Instant::now());
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
                    let id = NEXT_CONNECTION.fetch_add(1, Ordering::Relaxed);
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
                            read_closed: false,
                            last_active: Instant::now(),
                        },
                    );
                    if let Some(idle) = self.config.idle_timeout {
                        let at = Instant::now() + idle;
                        self.idle_scan_at = Some(self.idle_scan_at.map_or(at, |s| s.min(at)));
                    }
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
                        self.unread.remove(&id);
                        return Ok(());
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.unread.remove(&id);
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Close::problem(format!("read failed: {e}"))),
            }
        }
        if self.conns.contains_key(&id) {
            self.unread.insert(id);
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
        if !seen.drained && !seen.eof {
            self.unread.insert(id);
        } else {
            self.unread.remove(&id);
        }
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
        let ids: Vec<u64> = self.unread.iter().copied().collect();
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
            let (code, opaque) = (request.code, request.opaque);
            if !self.shared.invocations.complete(id, request) {
                log::debug!(
                    "{remote}: dropped a response (code {code}, opaque {opaque}) nobody asked for \
                     (timed out)"
                );
            }
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
        let response = process_caught(&*self.processor, request, &ctx);
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
        self.unread.remove(&id);
        if let Some(conn) = self.conns.remove(&id) {
            // By its fd: responders share the stream. The socket closes when `conn` drops
            // (their references are weak).
            let fd = conn.output.stream.as_raw_fd();
            let _ = self.poll.registry().deregister(&mut SourceFd(&fd));
            // The processor first: whoever sees the event finds its consequences done.
            self.shared.invocations.closed(id);
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
