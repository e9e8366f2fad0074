//! The slave's receive path: a 4 MiB read buffer and a 4 MiB backup. When the read buffer is
//! full, the unconsumed tail moves to the start of the backup and the two swap (RocketMQ's
//! `reallocateByteBuffer`), so a frame split across reads is never lost or copied twice.

use std::io::{self, Read};

use super::autoswitch::frame::{TransferHeader, TRANSFER_HEADER_LEN};
use super::frame::{self, CRC_LEN, HEADER_LEN};
use crate::error::FrameError;

pub(crate) const READ_BUFFER_SIZE: usize = 4 * 1024 * 1024;

#[cfg_attr(feature = "harness", visibility::make(pub))]
pub(crate) struct FrameDispatcher {
    buf: Vec<u8>,
    backup: Vec<u8>,
    /// End of the bytes read from the socket.
    read_pos: usize,
    /// Start of the first frame not yet dispatched.
    dispatch_pos: usize,
    swaps: u64,
    /// The CRC extension was negotiated: every frame ends in a CRC32 trailer.
    crc: bool,
    /// RocketMQ 5's AutoSwitch frames: a 36-byte header naming the epoch and confirm offset.
    autoswitch: bool,
}

/// What the dispatcher hands to its sink: a body to append, or a heartbeat.
#[cfg_attr(feature = "harness", visibility::make(pub))]
pub(crate) struct Frame<'a> {
    /// None only in an AutoSwitch heartbeat sent before the transfer started.
    pub offset: Option<u64>,
    pub body: &'a [u8],
    /// AutoSwitch frames: `(epoch, its start offset, the master's confirm offset)`.
    pub epoch: Option<(i32, u64, u64)>,
}

impl FrameDispatcher {
    pub fn new(capacity: usize) -> Self {
        Self {
            buf: vec![0; capacity],
            backup: vec![0; capacity],
            read_pos: 0,
            dispatch_pos: 0,
            swaps: 0,
            crc: false,
            autoswitch: false,
        }
    }

    /// Reads RocketMQ 5's AutoSwitch frames from now on.
    pub(crate) fn set_autoswitch(&mut self, autoswitch: bool) {
        self.autoswitch = autoswitch;
    }

    /// Expects (and checks) the CRC32 trailer on every frame from now on.
    pub(crate) fn set_crc(&mut self, crc: bool) {
        self.crc = crc;
    }

    pub(crate) fn swaps(&self) -> u64 {
        self.swaps
    }

    /// Bytes read but not yet dispatched (a partial frame); the fuzzer's oracle checks it.
    #[cfg(feature = "harness")]
    pub fn pending(&self) -> usize {
        self.read_pos - self.dispatch_pos
    }

    fn reallocate(&mut self) {
        let tail = self.read_pos - self.dispatch_pos;
        self.backup[..tail].copy_from_slice(&self.buf[self.dispatch_pos..self.read_pos]);
        std::mem::swap(&mut self.buf, &mut self.backup);
        self.dispatch_pos = 0;
        self.read_pos = tail;
        self.swaps += 1;
    }

    /// The last read filled all the free space: the socket may hold more. A shorter read
    /// drained it.
    pub(crate) fn filled(&self) -> bool {
        self.read_pos == self.buf.len()
    }

    /// One `read` into the free space, swapping buffers first when none is left.
    #[cfg_attr(feature = "harness", visibility::make(pub))]
    pub(crate) fn read_from(&mut self, src: &mut impl Read) -> io::Result<usize> {
        if self.read_pos == self.buf.len() {
            self.reallocate();
        }
        let n = src.read(&mut self.buf[self.read_pos..])?;
        self.read_pos += n;
        Ok(n)
    }

    /// Feeds bytes directly, without a socket.
    #[cfg(test)]
    fn feed(&mut self, mut data: &[u8]) -> usize {
        let mut fed = 0;
        while !data.is_empty() {
            if self.read_pos == self.buf.len() {
                if self.dispatch_pos == 0 {
                    break;
                }
                self.reallocate();
            }
            let n = data.len().min(self.buf.len() - self.read_pos);
            self.buf[self.read_pos..self.read_pos + n].copy_from_slice(&data[..n]);
            self.read_pos += n;
            data = &data[n..];
            fed += n;
        }
        fed
    }

    /// Hands every complete frame to `sink`, in order. A frame the sink refuses stays
    /// undispatched and the error is returned; so does a malformed header.
    #[cfg_attr(feature = "harness", visibility::make(pub))]
    pub(crate) fn dispatch<E: From<FrameError>>(
        &mut self,
        mut sink: impl FnMut(Frame<'_>) -> Result<(), E>,
    ) -> Result<usize, E> {
        let trailer = if self.crc { CRC_LEN } else { 0 };
        let header_len = if self.autoswitch {
            TRANSFER_HEADER_LEN
        } else {
            HEADER_LEN
        };
        let max_body = self.buf.len() - header_len - trailer;
        let mut frames = 0;
        while self.read_pos - self.dispatch_pos >= header_len {
            let raw = &self.buf[self.dispatch_pos..self.dispatch_pos + header_len];
            let (offset, size, epoch) = self.decode_header(raw, max_body)?;
            let body_at = self.dispatch_pos + header_len;
            if self.read_pos - body_at < size + trailer {
                break;
            }
            let end = body_at + size;
            if self.crc
                && frame::crc_trailer(&[&self.buf[self.dispatch_pos..end]])[..]
                    != self.buf[end..end + CRC_LEN]
            {
                let offset = offset.unwrap_or_default();
                return Err(FrameError::BadCrc { offset }.into());
            }
            sink(Frame {
                offset,
                body: &self.buf[body_at..end],
                epoch,
            })?;
            self.dispatch_pos = end + trailer;
            frames += 1;
        }
        Ok(frames)
    }

    /// `(offset, body size, AutoSwitch epoch info)` of the header in `raw`.
    #[allow(clippy::type_complexity)]
    fn decode_header(
        &self,
        raw: &[u8],
        max_body: usize,
    ) -> Result<(Option<u64>, usize, Option<(i32, u64, u64)>), FrameError> {
        if self.autoswitch {
            let raw: &[u8; TRANSFER_HEADER_LEN] = raw.try_into().unwrap_or(&[0; 36]);
            let h = TransferHeader::decode(raw, max_body)?;
            let epoch = (h.epoch, h.epoch_start_offset, h.confirm_offset);
            return Ok((h.offset, h.body_size, Some(epoch)));
        }
        let mut header = [0u8; HEADER_LEN];
        header.copy_from_slice(raw);
        let (offset, size) = frame::decode_header(&header, max_body)?;
        Ok((Some(offset), size, None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn stream(frames: &[(u64, Vec<u8>)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (off, body) in frames {
            out.extend_from_slice(&frame::encode_header(*off, body.len()));
            out.extend_from_slice(body);
        }
        out
    }

    fn run(buffer: usize, chunks: &[&[u8]]) -> Vec<(u64, Vec<u8>)> {
        let mut d = FrameDispatcher::new(buffer);
        let mut got = Vec::new();
        for chunk in chunks {
            let mut rest = *chunk;
            while !rest.is_empty() {
                let n = d.feed(rest);
                rest = &rest[n..];
                d.dispatch::<FrameError>(|f| {
                    got.push((f.offset.unwrap_or_default(), f.body.to_vec()));
                    Ok(())
                })
                .unwrap();
            }
        }
        got
    }

    proptest! {
        /// The same stream cut at any byte boundaries dispatches the same frames.
        #[test]
        fn any_split_dispatches_the_same_frames(
            bodies in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..20),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..10),
        ) {
            let mut frames = Vec::new();
            let mut off = 0u64;
            for b in bodies {
                frames.push((off, b.clone()));
                off += b.len() as u64;
            }
            let bytes = stream(&frames);
            let mut points: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
            points.sort();
            let mut chunks = Vec::new();
            let mut last = 0;
            for p in points {
                chunks.push(&bytes[last..p]);
                last = p;
            }
            chunks.push(&bytes[last..]);
            // A small buffer forces many double-buffer swaps.
            prop_assert_eq!(run(HEADER_LEN + 300, &chunks), frames);
        }
    }

    #[test]
    fn every_single_split_point() {
        let frames: Vec<(u64, Vec<u8>)> = vec![(0, vec![1; 10]), (10, vec![]), (10, vec![2; 33])];
        let bytes = stream(&frames);
        for cut in 0..=bytes.len() {
            assert_eq!(
                run(64, &[&bytes[..cut], &bytes[cut..]]),
                frames,
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn crc_trailer_catches_a_flipped_body_byte() {
        let mut bytes = stream(&[(0, vec![5; 40])]);
        let crc = frame::crc_trailer(&[&bytes]);
        bytes.extend_from_slice(&crc);
        let mut d = FrameDispatcher::new(256);
        d.set_crc(true);
        d.feed(&bytes);
        assert_eq!(d.dispatch::<FrameError>(|_| Ok(())), Ok(1));
        bytes[HEADER_LEN + 3] ^= 1;
        let mut d = FrameDispatcher::new(256);
        d.set_crc(true);
        d.feed(&bytes);
        let mut written = 0;
        assert_eq!(
            d.dispatch::<FrameError>(|_| {
                written += 1;
                Ok(())
            }),
            Err(FrameError::BadCrc { offset: 0 })
        );
        assert_eq!(written, 0);
    }

    #[test]
    fn oversized_and_negative_sizes_are_errors() {
        let mut d = FrameDispatcher::new(64);
        d.feed(&frame::encode_header(0, 1000));
        assert!(matches!(
            d.dispatch::<FrameError>(|_| Ok(())),
            Err(FrameError::BodyTooLarge { .. })
        ));
        let mut d = FrameDispatcher::new(64);
        let mut h = frame::encode_header(0, 0);
        h[8] = 0x80;
        d.feed(&h);
        assert!(matches!(
            d.dispatch::<FrameError>(|_| Ok(())),
            Err(FrameError::NegativeBodySize(_))
        ));
    }
}
