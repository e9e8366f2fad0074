//! The slave's receive path on hostile input: any byte stream, cut into reads at any points,
//! through the double-buffer `FrameDispatcher`, must dispatch exactly the frames a straight
//! one-pass decode finds, and stop at the same malformed header, without panicking or stalling.
//! The header and report codecs must only accept what they would encode identically.

#![no_main]

use std::io::{self, Read};

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use rocketha_core::error::FrameError;
use rocketha_core::ha::dispatch::FrameDispatcher;
use rocketha_core::ha::frame::{self, HEADER_LEN, REPORT_LEN};

#[derive(Arbitrary, Debug)]
struct Input {
    /// Buffer size beyond one header: small, so double-buffer swaps happen constantly.
    capacity: u16,
    /// Sizes of successive socket reads (cycled); 0 is read as 1.
    reads: Vec<u8>,
    /// Frames at these indices are refused once by the sink, as a failing append would be.
    refuse: Vec<u8>,
    stream: Vec<u8>,
}

/// A socket that hands out the stream in reads of the given sizes.
struct ChunkedReader<'a> {
    data: &'a [u8],
    sizes: &'a [u8],
    next: usize,
}

impl Read for ChunkedReader<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let want = match self.sizes {
            [] => self.data.len(),
            sizes => usize::from(sizes[self.next % sizes.len()].max(1)),
        };
        self.next += 1;
        let n = want.min(out.len()).min(self.data.len());
        out[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

#[derive(Debug, PartialEq)]
enum SinkError {
    Frame(FrameError),
    Refused,
}

impl From<FrameError> for SinkError {
    fn from(e: FrameError) -> Self {
        SinkError::Frame(e)
    }
}

type Frames = Vec<(u64, Vec<u8>)>;

/// The reference: one pass over the whole stream.
fn decode_all(stream: &[u8], max_body: usize) -> (Frames, Option<FrameError>) {
    let mut frames = Vec::new();
    let mut pos = 0;
    while let Some(raw) = stream.get(pos..pos + HEADER_LEN) {
        let header: [u8; HEADER_LEN] = raw.try_into().expect("slice of HEADER_LEN");
        match frame::decode_header(&header, max_body) {
            Ok((offset, size)) => match stream.get(pos + HEADER_LEN..pos + HEADER_LEN + size) {
                Some(body) => {
                    frames.push((offset, body.to_vec()));
                    pos += HEADER_LEN + size;
                }
                None => break,
            },
            Err(e) => return (frames, Some(e)),
        }
    }
    (frames, None)
}

fn check_codecs(stream: &[u8]) {
    if let Some(raw) = stream.get(..HEADER_LEN) {
        let header: [u8; HEADER_LEN] = raw.try_into().expect("slice of HEADER_LEN");
        if let Ok((offset, size)) = frame::decode_header(&header, usize::MAX) {
            assert_eq!(frame::encode_header(offset, size), header);
        }
    }
    if let Some(raw) = stream.get(..REPORT_LEN) {
        let report: [u8; REPORT_LEN] = raw.try_into().expect("slice of REPORT_LEN");
        if let Ok(offset) = frame::decode_report(report) {
            assert_eq!(frame::encode_report(offset), report);
        }
    }
}

fuzz_target!(|input: Input| {
    check_codecs(&input.stream);
    let capacity = HEADER_LEN + usize::from(input.capacity % 4096);
    let (expected, expected_error) = decode_all(&input.stream, capacity - HEADER_LEN);

    let mut dispatcher = FrameDispatcher::new(capacity);
    let mut reader = ChunkedReader {
        data: &input.stream,
        sizes: &input.reads,
        next: 0,
    };
    let mut got: Frames = Vec::new();
    let mut offered = 0usize;
    let mut error = None;
    'reading: loop {
        let n = dispatcher
            .read_from(&mut reader)
            .expect("in-memory reads cannot fail");
        loop {
            let result = dispatcher.dispatch(|f| {
                let index = offered;
                offered += 1;
                if index < 256 && input.refuse.contains(&(index as u8)) {
                    return Err(SinkError::Refused);
                }
                got.push((f.offset.unwrap_or_default(), f.body.to_vec()));
                Ok(())
            });
            match result {
                Ok(_) => break,
                // A refused frame stays queued and comes again on the next dispatch.
                Err(SinkError::Refused) => continue,
                Err(SinkError::Frame(e)) => {
                    error = Some(e);
                    break 'reading;
                }
            }
        }
        if n == 0 {
            // A full buffer always holds a complete frame or a bad header, so a read of zero
            // bytes must mean the stream is exhausted, never that the dispatcher is stuck.
            assert!(reader.data.is_empty(), "dispatcher stalled with input left");
            break;
        }
    }
    assert_eq!(got, expected);
    assert_eq!(error, expected_error);
    if error.is_none() {
        let consumed: usize = got.iter().map(|(_, b)| HEADER_LEN + b.len()).sum();
        assert_eq!(dispatcher.pending(), input.stream.len() - consumed);
    }
});
