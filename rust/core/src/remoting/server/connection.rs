//! One connection of the server: its socket's write side, shared with the responders of its
//! requests, the queue of encoded responses not yet written, and why it closes.

use std::collections::VecDeque;
use std::io::{self, IoSlice, Write};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use mio::net::TcpStream;

use crate::remoting::tls;

/// Frames handed to one `writev`.
const MAX_IOVECS: usize = 64;

/// Why a connection is closed, and whether that is the peer's fault.
pub(super) struct Close {
    pub(super) reason: String,
    pub(super) problem: bool,
}

impl Close {
    pub(super) fn problem(reason: String) -> Self {
        Self {
            reason,
            problem: true,
        }
    }
}

/// A connection's write side, shared (weakly) with the responders of its requests.
pub(super) struct Output {
    pub(super) stream: TcpStream,
    /// Taken by whoever writes, the loop or a responder's thread: frames never interleave on
    /// the socket and go out in the order they were queued.
    pub(super) queue: Mutex<OutQueue>,
}

/// Encoded responses not yet written.
#[derive(Default)]
pub(super) struct OutQueue {
    /// The front one from `written` on.
    pub(super) frames: VecDeque<Vec<u8>>,
    pub(super) written: usize,
    pub(super) bytes: usize,
    /// The socket said WouldBlock: nothing more goes out until its writable edge.
    pub(super) write_blocked: bool,
    /// A TLS connection's rustls state; its reads take this lock too. Frames stay in `frames`
    /// until rustls takes them, so `bytes` and the output cap count what is unsent.
    pub(super) tls: Option<Box<rustls::Connection>>,
}

/// What a connection's bytes are.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Wire {
    Plain,
    /// A TLS-enabled port, before the first byte told which.
    Undecided,
    Tls,
}

pub(super) struct Connection {
    pub(super) id: u64,
    pub(super) output: Arc<Output>,
    pub(super) remote: SocketAddr,
    pub(super) wire: Wire,
    /// Bytes read and not yet decoded (a partial frame).
    pub(super) read_buf: Vec<u8>,
    /// epoll reported the peer's FIN (or an error): read on to the end of the stream, as a
    /// short read no longer proves the socket drained of what is left to see.
    pub(super) read_closed: bool,
    /// Last read or loop-side write (a responder's write does not count: it answers a
    /// request read at most `slaveTimeout` before).
    pub(super) last_active: Instant,
}

impl OutQueue {
    pub(super) fn push(&mut self, frame: Vec<u8>) {
        self.bytes += frame.len();
        self.frames.push_back(frame);
    }

    /// Writes until the socket would block or nothing is left; returns whether it wrote.
    pub(super) fn flush(&mut self, stream: &TcpStream) -> Result<bool, Close> {
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
