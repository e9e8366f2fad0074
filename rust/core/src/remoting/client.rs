//! A blocking remoting client for one address, RocketMQ's `invokeSync` and `invokeOneway`
//! without Netty: write the request, read frames until the response with the request's opaque
//! arrives. What the server sends on its own (requests, flag bit 0 clear) and responses to
//! other opaques are skipped, never taken for the answer.
//!
//! Calls take `&mut self`, so a client is shared behind a `Mutex`. After any error the
//! connection is dropped (a response may be half read) and the next call connects again.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use super::frame::{decode_frame, Decoded, RemotingFrameError, DEFAULT_MAX_FRAME_SIZE};
use super::header::{CommandError, RemotingCommand};

/// Longer waits are cut to this, which an `Instant` always holds (`Duration::MAX` would
/// overflow it).
const MAX_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 3600);

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("connect to {addr} failed: {source}")]
    Connect { addr: SocketAddr, source: io::Error },
    #[error("connect to {addr} timed out after {ms} ms")]
    ConnectTimeout { addr: SocketAddr, ms: u128 },
    #[error("{addr}: no response to request code {code} (opaque {opaque}) within {ms} ms")]
    Timeout {
        addr: SocketAddr,
        code: i32,
        opaque: i32,
        ms: u128,
    },
    #[error("{addr} closed the connection")]
    Closed { addr: SocketAddr },
    #[error("{addr}: {what} failed: {source}")]
    Io {
        addr: SocketAddr,
        what: &'static str,
        source: io::Error,
    },
    #[error("{addr} sent a bad frame: {source}")]
    BadFrame {
        addr: SocketAddr,
        source: RemotingFrameError,
    },
    #[error("{addr} sent a bad command: {source}")]
    BadCommand {
        addr: SocketAddr,
        source: CommandError,
    },
    #[error("request code {code} not sent to {addr}: {source}")]
    Encode {
        addr: SocketAddr,
        code: i32,
        source: CommandError,
    },
}

/// One connection to one server, reopened on the next call after an error.
pub struct RemotingClient {
    addr: SocketAddr,
    connect_timeout: Duration,
    max_frame_size: usize,
    stream: Option<TcpStream>,
    /// Bytes read past the last frame taken.
    read_buf: Vec<u8>,
    next_opaque: i32,
}

impl RemotingClient {
    /// Connects to `addr` within `timeout`, which later reconnects use too.
    pub fn connect(addr: SocketAddr, timeout: Duration) -> Result<Self, ClientError> {
        let mut client = Self {
            addr,
            connect_timeout: timeout,
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            stream: None,
            read_buf: Vec::new(),
            next_opaque: 0,
        };
        client.ensure_connected()?;
        Ok(client)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn ensure_connected(&mut self) -> Result<&mut TcpStream, ClientError> {
        let addr = self.addr;
        if self.stream.is_none() {
            let stream = TcpStream::connect_timeout(&addr, self.connect_timeout).map_err(|e| {
                if matches!(
                    e.kind(),
                    io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
                ) {
                    ClientError::ConnectTimeout {
                        addr,
                        ms: self.connect_timeout.as_millis(),
                    }
                } else {
                    ClientError::Connect { addr, source: e }
                }
            })?;
            // Requests are small and latency-bound.
            let _ = stream.set_nodelay(true);
            self.read_buf.clear();
            self.stream = Some(stream);
        }
        match self.stream.as_mut() {
            Some(stream) => Ok(stream),
            None => Err(ClientError::Closed { addr }),
        }
    }

    /// Sends `request` (its opaque replaced by a fresh one) and waits up to `timeout` for the
    /// response with that opaque.
    pub fn invoke(
        &mut self,
        mut request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, ClientError> {
        let timeout = timeout.min(MAX_TIMEOUT);
        let deadline = Instant::now() + timeout;
        let opaque = self.prepare(&mut request);
        let result = self
            .write(&request, deadline, timeout)
            .and_then(|()| self.read_response(request.code, opaque, deadline, timeout));
        if result.is_err() {
            self.stream = None;
        }
        result
    }

    /// Sends `request` as oneway (no response comes) within `timeout`.
    pub fn invoke_oneway(
        &mut self,
        mut request: RemotingCommand,
        timeout: Duration,
    ) -> Result<(), ClientError> {
        request.mark_oneway();
        self.prepare(&mut request);
        let timeout = timeout.min(MAX_TIMEOUT);
        let result = self.write(&request, Instant::now() + timeout, timeout);
        if result.is_err() {
            self.stream = None;
        }
        result
    }

    fn prepare(&mut self, request: &mut RemotingCommand) -> i32 {
        let opaque = self.next_opaque;
        self.next_opaque = self.next_opaque.wrapping_add(1);
        request.opaque = opaque;
        opaque
    }

    fn write(
        &mut self,
        request: &RemotingCommand,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<(), ClientError> {
        let addr = self.addr;
        let frame = request
            .encode(self.max_frame_size)
            .map_err(|source| ClientError::Encode {
                addr,
                code: request.code,
                source,
            })?;
        let stream = self.ensure_connected()?;
        let timed_out = || ClientError::Timeout {
            addr,
            code: request.code,
            opaque: request.opaque,
            ms: timeout.as_millis(),
        };
        let left = remaining(deadline).ok_or_else(timed_out)?;
        stream
            .set_write_timeout(Some(left))
            .map_err(|source| io_error(addr, "set_write_timeout", source))?;
        stream.write_all(&frame).map_err(|e| match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => timed_out(),
            io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset => {
                ClientError::Closed { addr }
            }
            _ => io_error(addr, "write", e),
        })
    }

    fn read_response(
        &mut self,
        code: i32,
        opaque: i32,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<RemotingCommand, ClientError> {
        let addr = self.addr;
        let timed_out = || ClientError::Timeout {
            addr,
            code,
            opaque,
            ms: timeout.as_millis(),
        };
        loop {
            // Frames already buffered first.
            while let Decoded::Frame { frame, consumed } =
                decode_frame(&self.read_buf, self.max_frame_size)
                    .map_err(|source| ClientError::BadFrame { addr, source })?
            {
                let command = RemotingCommand::decode(&frame)
                    .map_err(|source| ClientError::BadCommand { addr, source })?;
                self.read_buf.drain(..consumed);
                if command.is_response() && command.opaque == opaque {
                    return Ok(command);
                }
                log::debug!(
                    "{addr}: skipped a {} with code {} and opaque {} while waiting for opaque {opaque}",
                    if command.is_response() { "response" } else { "request" },
                    command.code,
                    command.opaque
                );
            }
            let left = remaining(deadline).ok_or_else(timed_out)?;
            let stream = self.ensure_connected()?;
            stream
                .set_read_timeout(Some(left))
                .map_err(|source| io_error(addr, "set_read_timeout", source))?;
            let mut chunk = [0u8; 64 * 1024];
            match stream.read(&mut chunk) {
                Ok(0) => return Err(ClientError::Closed { addr }),
                Ok(n) => self.read_buf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(timed_out())
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                    return Err(ClientError::Closed { addr })
                }
                Err(e) => return Err(io_error(addr, "read", e)),
            }
        }
    }
}

/// Time left before `deadline`; `None` once it passed (a zero socket timeout means "forever").
fn remaining(deadline: Instant) -> Option<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    (!left.is_zero()).then_some(left)
}

fn io_error(addr: SocketAddr, what: &'static str, source: io::Error) -> ClientError {
    ClientError::Io { addr, what, source }
}
