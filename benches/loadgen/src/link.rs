//! One non-blocking remoting connection as both ends of the benchmark use it: bytes in, whole
//! frames handed out, frames to send gathered into one buffer and written with one `write`.

use std::io::{self, Read, Write};

use mio::net::TcpStream;
use rocketha_core::remoting::frame::{decode_frame, Decoded, RawFrame};

/// RocketMQ's `NettyDecoder` limit.
pub(crate) const MAX_FRAME_SIZE: usize = 16 << 20;

pub(crate) struct Link {
    pub(crate) stream: TcpStream,
    /// Bytes read and not yet decoded (a partial frame).
    read_buf: Vec<u8>,
    /// Frames to send; `out[written..]` is still unwritten.
    pub(crate) out: Vec<u8>,
    written: usize,
}

impl Link {
    pub(crate) fn new(stream: TcpStream) -> Self {
        Self {
            stream,
            read_buf: Vec::new(),
            out: Vec::new(),
            written: 0,
        }
    }

    /// Reads what the socket holds, hands `each` every complete frame with the output buffer
    /// to answer into, then writes that buffer. A read shorter than `scratch` drained the
    /// socket (epoll reports the next bytes as a new edge), which saves the read that would
    /// only say EAGAIN; after the peer's FIN (`closed`) it reads on until end of stream.
    pub(crate) fn on_readable(
        &mut self,
        scratch: &mut [u8],
        closed: bool,
        mut each: impl FnMut(RawFrame<'_>, &mut Vec<u8>) -> io::Result<()>,
    ) -> io::Result<()> {
        loop {
            match self.stream.read(scratch) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => {
                    self.read_buf.extend_from_slice(&scratch[..n]);
                    if n < scratch.len() && !closed {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let mut start = 0;
        loop {
            match decode_frame(&self.read_buf[start..], MAX_FRAME_SIZE) {
                Ok(Decoded::NeedMore { .. }) => break,
                Ok(Decoded::Frame { frame, consumed }) => {
                    each(frame, &mut self.out)?;
                    start += consumed;
                }
                Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
            }
        }
        self.read_buf.drain(..start);
        self.flush()
    }

    /// Writes until done or the socket would block (the rest goes on its writable edge).
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        while self.written < self.out.len() {
            match self.stream.write(&self.out[self.written..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.out.clear();
        self.written = 0;
        Ok(())
    }
}
