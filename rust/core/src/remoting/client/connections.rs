//! The client's event loop: it owns every connection and every pending request. Callers hand
//! it work through [`Shared::push`] (a new connection, a request to write, close all) and wake
//! it; it writes requests in order, cuts responses out of each connection's byte stream, and
//! calls each request's callback once: with its response, at its deadline, or when its
//! connection fails. It sleeps in epoll until a socket is ready, a caller wakes it, or the
//! nearest deadline passes.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Token};

use super::config::ClientConfig;
use super::invoke::{ClientError, InvokeCallback, InvokeResult};
use crate::event_loop::{EventLoop, Signal, WAKER};
use crate::remoting::command::RemotingCommand;
use crate::remoting::frame::{decode_frame, Decoded};
use crate::remoting::tls;
use crate::sync::{deadline_after, lock};

/// Bytes asked of the socket per read.
const READ_CHUNK: usize = 64 * 1024;
/// The sleep when no request has a deadline; callers wake the loop anyway.
const IDLE: Duration = Duration::from_secs(3600);

/// A channel's state shared with its callers: open until the loop closes it, then why.
pub(super) struct Liveness {
    open: AtomicBool,
    /// For a request that reaches the loop after the close, its caller having found the
    /// channel still open: a TLS handshake refused while the first request was on its way.
    why: Mutex<Option<ClientError>>,
}

impl Liveness {
    pub(super) fn new() -> Arc<Self> {
        Arc::new(Self {
            open: AtomicBool::new(true),
            why: Mutex::new(None),
        })
    }

    pub(super) fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }

    fn close(&self, why: &ClientError) {
        *lock(&self.why) = Some(why.clone());
        self.open.store(false, Ordering::Release);
    }

    fn why(&self, addr: SocketAddr) -> ClientError {
        lock(&self.why)
            .clone()
            .unwrap_or(ClientError::Closed { addr })
    }
}

/// A request on its way to the loop.
pub(super) struct Request {
    pub(super) channel: u64,
    pub(super) alive: Arc<Liveness>,
    pub(super) remote: SocketAddr,
    pub(super) code: i32,
    pub(super) opaque: i32,
    pub(super) frame: Vec<u8>,
    pub(super) timeout: Duration,
    /// None for a oneway request.
    pub(super) callback: Option<InvokeCallback>,
}

pub(super) enum Op {
    Register {
        id: u64,
        stream: std::net::TcpStream,
        /// The TLS session to run on it, its handshake not started.
        tls: Option<Box<rustls::Connection>>,
        remote: SocketAddr,
        alive: Arc<Liveness>,
    },
    Send(Request),
    CloseAll,
}

struct Inbox {
    ops: Vec<Op>,
    /// The loop ended: nothing pushed now would ever be handled.
    closed: bool,
}

/// What callers and the loop share.
pub(super) struct Shared {
    pub(super) signal: Arc<Signal>,
    /// A lock rather than a channel: the loop takes the whole batch in one swap, and the
    /// `closed` flag under the same lock makes "pushed" and "handled or failed" one thing.
    inbox: Mutex<Inbox>,
}

impl Shared {
    pub(super) fn new(signal: Arc<Signal>) -> Self {
        Self {
            signal,
            inbox: Mutex::new(Inbox {
                ops: Vec::new(),
                closed: false,
            }),
        }
    }

    /// Queues `op` and wakes the loop; gives `op` back once the loop has ended.
    pub(super) fn push(&self, op: Op) -> Result<(), Op> {
        let first = {
            let mut inbox = lock(&self.inbox);
            if inbox.closed {
                return Err(op);
            }
            inbox.ops.push(op);
            inbox.ops.len() == 1
        };
        // A non-empty inbox already has a wake-up on its way.
        if first {
            self.signal.wake();
        }
        Ok(())
    }
}

struct Outgoing {
    opaque: i32,
    frame: Vec<u8>,
    written: usize,
}

struct Connection {
    stream: TcpStream,
    /// Its rustls state, on a TLS connection: frames are handed to it once its handshake is
    /// done, and only then count as sent.
    tls: Option<Box<rustls::Connection>>,
    remote: SocketAddr,
    alive: Arc<Liveness>,
    /// Frames not yet fully written, in request order.
    out: VecDeque<Outgoing>,
    /// Bytes read and not yet decoded (a partial frame).
    read_buf: Vec<u8>,
}

struct Pending {
    channel: u64,
    remote: SocketAddr,
    code: i32,
    deadline: Option<Instant>,
    timeout: Duration,
    callback: InvokeCallback,
    /// Some of its bytes were written: the server may have it.
    sent: bool,
}

pub(super) struct ClientLoop {
    poller: EventLoop,
    shared: Arc<Shared>,
    config: ClientConfig,
    conns: HashMap<u64, Connection>,
    /// By opaque, unique across connections.
    pending: HashMap<i32, Pending>,
    scratch: Box<[u8]>,
}

impl ClientLoop {
    pub(super) fn new(poller: EventLoop, shared: Arc<Shared>, config: ClientConfig) -> Self {
        Self {
            poller,
            shared,
            config,
            conns: HashMap::new(),
            pending: HashMap::new(),
            scratch: vec![0; READ_CHUNK].into_boxed_slice(),
        }
    }

    pub(super) fn run(mut self) {
        let mut events = Events::with_capacity(256);
        while !self.poller.stopped() {
            let timeout = self
                .pending
                .values()
                .filter_map(|p| p.deadline)
                .min()
                .map_or(IDLE, |d| d.saturating_duration_since(Instant::now()));
            if let Err(e) = self.poller.poll(&mut events, timeout) {
                log::error!("remoting client: epoll failed, failing every request: {e}");
                break;
            }
            for event in events.iter() {
                if event.token() == WAKER {
                    continue;
                }
                let id = event.token().0 as u64;
                if event.is_writable() {
                    self.flush(id);
                }
                if event.is_readable() || event.is_read_closed() || event.is_error() {
                    self.read(id);
                }
            }
            let ops = std::mem::take(&mut lock(&self.shared.inbox).ops);
            for op in ops {
                self.handle(op);
            }
            self.expire(Instant::now());
        }
        self.finish();
    }

    fn handle(&mut self, op: Op) {
        match op {
            Op::Register {
                id,
                stream,
                tls,
                remote,
                alive,
            } => {
                let mut stream = TcpStream::from_std(stream);
                let registered = self.poller.registry().register(
                    &mut stream,
                    Token(id as usize),
                    Interest::READABLE | Interest::WRITABLE,
                );
                if let Err(e) = registered {
                    log::warn!("{remote}: cannot watch the connection: {e}");
                    alive.close(&ClientError::Io {
                        addr: remote,
                        what: "watching the connection",
                        source: Arc::new(e),
                    });
                    return;
                }
                let has_tls = tls.is_some();
                let conn = Connection {
                    stream,
                    tls,
                    remote,
                    alive,
                    out: VecDeque::new(),
                    read_buf: Vec::new(),
                };
                self.conns.insert(id, conn);
                if has_tls {
                    // The ClientHello.
                    self.flush(id);
                }
            }
            Op::Send(request) => self.send(request),
            Op::CloseAll => {
                let ids: Vec<u64> = self.conns.keys().copied().collect();
                for id in ids {
                    self.close(id, ClientError::Shutdown);
                }
            }
        }
    }

    fn send(&mut self, r: Request) {
        let Some(conn) = self.conns.get_mut(&r.channel) else {
            // Closed between the caller's lookup and now.
            let error = ClientError::NotSent {
                addr: r.remote,
                code: r.code,
                reason: Box::new(r.alive.why(r.remote)),
            };
            match r.callback {
                Some(callback) => call(callback, Err(error)),
                None => log::info!("oneway request dropped: {error}"),
            }
            return;
        };
        if let Some(callback) = r.callback {
            let pending = Pending {
                channel: r.channel,
                remote: r.remote,
                code: r.code,
                deadline: deadline_after(r.timeout),
                timeout: r.timeout,
                callback,
                sent: false,
            };
            self.pending.insert(r.opaque, pending);
        }
        conn.out.push_back(Outgoing {
            opaque: r.opaque,
            frame: r.frame,
            written: 0,
        });
        self.flush(r.channel);
    }

    /// Writes queued frames until the socket is full; a writable event resumes.
    fn flush(&mut self, id: u64) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        if conn.tls.is_some() {
            return self.flush_tls(id);
        }
        let failed = loop {
            let Some(front) = conn.out.front_mut() else {
                break None;
            };
            match conn.stream.write(&front.frame[front.written..]) {
                Ok(0) => break Some(io::Error::from(io::ErrorKind::WriteZero)),
                Ok(n) => wrote(&mut conn.out, n, &mut self.pending),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break None,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Some(e),
            }
        };
        if let Some(e) = failed {
            let addr = conn.remote;
            self.close(id, lost(addr, "write", e));
        }
    }

    /// [`Self::flush`] through rustls: frames go in as far as it takes them, once its
    /// handshake is done, and its records out until the socket would block.
    fn flush_tls(&mut self, id: u64) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let addr = conn.remote;
        let Some(session) = conn.tls.as_deref_mut() else {
            return;
        };
        let failed = 'flush: loop {
            while let Some(front) = conn.out.front_mut() {
                let n = match tls::feed(session, &front.frame[front.written..]) {
                    Ok(n) => n,
                    Err(e) => break 'flush Some(e),
                };
                if n == 0 {
                    break;
                }
                wrote(&mut conn.out, n, &mut self.pending);
            }
            match tls::write_records(session, &mut conn.stream) {
                Ok((true, false)) if !conn.out.is_empty() && !session.is_handshaking() => {}
                Ok(_) => break None,
                Err(e) => break Some(e),
            }
        };
        if let Some(e) = failed {
            self.close(id, lost(addr, "write", e));
        }
    }

    /// Reads until the socket is empty, then hands every whole frame on.
    fn read(&mut self, id: u64) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let addr = conn.remote;
        let mut ended = None;
        if let Some(session) = conn.tls.as_deref_mut() {
            match tls::read_plaintext(session, &mut conn.stream, &mut conn.read_buf, usize::MAX) {
                Ok(seen) if seen.eof => ended = Some(ClientError::Closed { addr }),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                    // The alert saying why, if the socket takes it.
                    let _ = tls::write_records(session, &mut conn.stream);
                    ended = Some(ClientError::Tls {
                        addr,
                        reason: e.to_string(),
                    });
                }
                Err(e) => ended = Some(lost(addr, "read", e)),
            }
        } else {
            loop {
                match conn.stream.read(&mut self.scratch) {
                    Ok(0) => {
                        ended = Some(ClientError::Closed { addr });
                        break;
                    }
                    Ok(n) => conn.read_buf.extend_from_slice(&self.scratch[..n]),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        ended = Some(lost(addr, "read", e));
                        break;
                    }
                }
            }
        }
        // Frames that arrived before a close still answer their requests.
        let mut responses = Vec::new();
        let mut taken = 0;
        loop {
            match decode_frame(&conn.read_buf[taken..], self.config.max_frame_size) {
                Ok(Decoded::NeedMore { .. }) => break,
                Ok(Decoded::Frame { frame, consumed }) => {
                    taken += consumed;
                    match RemotingCommand::decode(&frame) {
                        Ok(command) => responses.push(command),
                        Err(source) => {
                            ended = Some(ClientError::BadCommand { addr, source });
                            break;
                        }
                    }
                }
                Err(source) => {
                    ended = Some(ClientError::BadFrame { addr, source });
                    break;
                }
            }
        }
        conn.read_buf.drain(..taken);
        for command in responses {
            self.complete(id, addr, command);
        }
        if let Some(error) = ended {
            self.close(id, error);
        } else if self.conns.get(&id).is_some_and(|c| c.tls.is_some()) {
            // The handshake's next flight, or, once it is done, the frames it held back.
            self.flush(id);
        }
    }

    fn complete(&mut self, id: u64, addr: SocketAddr, command: RemotingCommand) {
        if !command.is_response() {
            match &self.config.server_requests {
                Some(kept) if kept.accepts(command.code) => kept.push(addr, command),
                _ => log::debug!(
                    "{addr}: skipped a request from the server, code {}",
                    command.code
                ),
            }
            return;
        }
        match self.pending.get(&command.opaque) {
            Some(p) if p.channel == id => {
                if let Some(p) = self.pending.remove(&command.opaque) {
                    call(p.callback, Ok(command));
                }
            }
            _ => log::debug!(
                "{addr}: skipped a response with code {} to opaque {} nobody waits for \
                 (timed out)",
                command.code,
                command.opaque
            ),
        }
    }

    /// Forgets connection `id` and fails every request pending on it with `error`.
    fn close(&mut self, id: u64, error: ClientError) {
        let Some(mut conn) = self.conns.remove(&id) else {
            return;
        };
        // First, so a caller told of the failure reconnects on its next call.
        conn.alive.close(&error);
        let _ = self.poller.registry().deregister(&mut conn.stream);
        log::info!("{}: connection closed: {error}", conn.remote);
        let failed: Vec<i32> = self
            .pending
            .iter()
            .filter(|(_, p)| p.channel == id)
            .map(|(opaque, _)| *opaque)
            .collect();
        for opaque in failed {
            if let Some(p) = self.pending.remove(&opaque) {
                let error = if p.sent {
                    error.clone()
                } else {
                    ClientError::NotSent {
                        addr: p.remote,
                        code: p.code,
                        reason: Box::new(error.clone()),
                    }
                };
                call(p.callback, Err(error));
            }
        }
    }

    /// Fails the requests whose deadline passed, and only those.
    fn expire(&mut self, now: Instant) {
        let due: Vec<i32> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline.is_some_and(|d| d <= now))
            .map(|(opaque, _)| *opaque)
            .collect();
        for opaque in due {
            let Some(p) = self.pending.remove(&opaque) else {
                continue;
            };
            let timeout = ClientError::Timeout {
                addr: p.remote,
                code: p.code,
                opaque,
                ms: p.timeout.as_millis(),
            };
            let error = if p.sent {
                timeout
            } else {
                // Still queued whole: take it back, so it is never sent.
                if let Some(conn) = self.conns.get_mut(&p.channel) {
                    conn.out.retain(|o| o.opaque != opaque);
                }
                ClientError::NotSent {
                    addr: p.remote,
                    code: p.code,
                    reason: Box::new(timeout),
                }
            };
            call(p.callback, Err(error));
        }
    }

    /// The loop is ending: fail everything queued or pending, so no caller waits forever.
    fn finish(mut self) {
        let ops = {
            let mut inbox = lock(&self.shared.inbox);
            inbox.closed = true;
            std::mem::take(&mut inbox.ops)
        };
        for op in ops {
            match op {
                Op::Register { alive, .. } => alive.close(&ClientError::Shutdown),
                Op::Send(r) => {
                    if let Some(callback) = r.callback {
                        let reason = Box::new(ClientError::Shutdown);
                        let error = ClientError::NotSent {
                            addr: r.remote,
                            code: r.code,
                            reason,
                        };
                        call(callback, Err(error));
                    }
                }
                Op::CloseAll => {}
            }
        }
        let ids: Vec<u64> = self.conns.keys().copied().collect();
        for id in ids {
            self.close(id, ClientError::Shutdown);
        }
    }
}

/// `n` more bytes of the front frame left: its request counts as sent from its first byte.
fn wrote(out: &mut VecDeque<Outgoing>, n: usize, pending: &mut HashMap<i32, Pending>) {
    let Some(front) = out.front_mut() else {
        return;
    };
    if front.written == 0 {
        if let Some(p) = pending.get_mut(&front.opaque) {
            p.sent = true;
        }
    }
    front.written += n;
    if front.written == front.frame.len() {
        out.pop_front();
    }
}

fn lost(addr: SocketAddr, what: &'static str, e: io::Error) -> ClientError {
    match e.kind() {
        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe => ClientError::Closed { addr },
        _ => ClientError::Io {
            addr,
            what,
            source: Arc::new(e),
        },
    }
}

/// Runs a caller's callback; a panic in it is logged, never the end of the loop.
fn call(callback: InvokeCallback, result: InvokeResult) {
    if catch_unwind(AssertUnwindSafe(|| callback(result))).is_err() {
        log::error!("a remoting client callback panicked");
    }
}
