//! The client port's receive path on hostile input: any byte stream, arriving in reads of
//! fuzzer-chosen sizes, through the incremental `remoting::decode_frame`, must yield exactly the
//! frames (and stop at the same error) a one-pass decode of the whole stream finds, without
//! panicking; every frame, and the raw bytes as either header type, go through the JSON and
//! ROCKETMQ header decoders and the typed custom headers. A header that decodes must re-encode
//! to one that decodes to the same command.

#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use rocketha_core::remoting::codes::SerializeType;
use rocketha_core::remoting::frame::{self, decode_frame, Decoded, RemotingFrameError, DEFAULT_MAX_FRAME_SIZE};
use rocketha_core::remoting::header::{
    GetRouteInfoRequestHeader, QueryDataVersionRequestHeader, RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader, SendMessageRequestHeader, SendMessageResponseHeader,
    UnRegisterBrokerRequestHeader,
};
use rocketha_core::remoting::{CustomHeader, RemotingCommand};

#[derive(Arbitrary, Debug)]
struct Input {
    /// Frame size limit beyond the 8-byte prefix; 0 picks RocketMQ's 16 MiB default.
    limit: u16,
    /// Sizes of successive reads (cycled); 0 is read as 1.
    reads: Vec<u8>,
    stream: Vec<u8>,
}

type Frames = Vec<(SerializeType, Vec<u8>, Vec<u8>)>;

fn owned(f: &frame::RawFrame<'_>) -> (SerializeType, Vec<u8>, Vec<u8>) {
    (f.serialize_type, f.header.to_vec(), f.body.to_vec())
}

/// The reference: one pass over the whole stream.
fn decode_all(stream: &[u8], max: usize) -> (Frames, Option<RemotingFrameError>) {
    let mut frames = Vec::new();
    let mut pos = 0;
    loop {
        match decode_frame(&stream[pos..], max) {
            Ok(Decoded::Frame { frame, consumed }) => {
                assert!(consumed >= frame::PREFIX_LEN && consumed <= max);
                assert_eq!(
                    consumed,
                    frame::PREFIX_LEN + frame.header.len() + frame.body.len()
                );
                frames.push(owned(&frame));
                pos += consumed;
            }
            Ok(Decoded::NeedMore { at_least }) => {
                assert!(at_least > stream.len() - pos, "NeedMore with enough bytes");
                return (frames, None);
            }
            Err(e) => return (frames, Some(e)),
        }
    }
}

/// The same stream arriving in reads, decoded whenever bytes arrive.
fn decode_incrementally(
    stream: &[u8],
    reads: &[u8],
    max: usize,
) -> (Frames, Option<RemotingFrameError>) {
    let mut frames = Vec::new();
    let (mut start, mut end, mut next) = (0, 0, 0);
    while end < stream.len() {
        let step = reads
            .get(next % reads.len().max(1))
            .map_or(stream.len(), |&r| usize::from(r.max(1)));
        next += 1;
        end = (end + step).min(stream.len());
        loop {
            match decode_frame(&stream[start..end], max) {
                Ok(Decoded::Frame { frame, consumed }) => {
                    frames.push(owned(&frame));
                    start += consumed;
                }
                Ok(Decoded::NeedMore { at_least }) => {
                    assert!(at_least > end - start);
                    break;
                }
                Err(e) => return (frames, Some(e)),
            }
        }
    }
    (frames, None)
}

fn typed_headers(cmd: &RemotingCommand) {
    let f = &cmd.ext_fields;
    let _ = SendMessageRequestHeader::parse(cmd);
    if let Ok(h) = SendMessageRequestHeader::from_ext_fields(f) {
        assert_eq!(
            SendMessageRequestHeader::from_ext_fields(&h.to_ext_fields()),
            Ok(h)
        );
    }
    if let Ok(h) = SendMessageResponseHeader::from_ext_fields(f) {
        assert_eq!(
            SendMessageResponseHeader::from_ext_fields(&h.to_ext_fields()),
            Ok(h)
        );
    }
    if let Ok(h) = RegisterBrokerRequestHeader::from_ext_fields(f) {
        assert_eq!(
            RegisterBrokerRequestHeader::from_ext_fields(&h.to_ext_fields()),
            Ok(h)
        );
    }
    let _ = RegisterBrokerResponseHeader::from_ext_fields(f);
    let _ = UnRegisterBrokerRequestHeader::from_ext_fields(f);
    let _ = QueryDataVersionRequestHeader::from_ext_fields(f);
    let _ = GetRouteInfoRequestHeader::from_ext_fields(f);
}

/// Decodes `header` as `ty`; whatever decodes must survive a re-encode in the same type.
fn check_header(header: &[u8], ty: SerializeType) {
    let Ok(cmd) = RemotingCommand::decode_header(header, ty) else {
        return;
    };
    assert_eq!(cmd.serialize_type, ty);
    typed_headers(&cmd);
    // A ROCKETMQ key whose invalid UTF-8 was replaced may outgrow its 16-bit length.
    if let Ok(again) = cmd.encode_header() {
        assert_eq!(
            RemotingCommand::decode_header(&again, ty).as_ref(),
            Ok(&cmd)
        );
    }
}

fuzz_target!(|input: Input| {
    let max = match input.limit {
        0 => DEFAULT_MAX_FRAME_SIZE,
        n => frame::PREFIX_LEN + usize::from(n),
    };
    let (expected, expected_error) = decode_all(&input.stream, max);
    let (got, error) = decode_incrementally(&input.stream, &input.reads, max);
    assert_eq!(got, expected);
    assert_eq!(error, expected_error);

    for (ty, header, body) in &expected {
        check_header(header, *ty);
        let raw = frame::RawFrame {
            serialize_type: *ty,
            header,
            body,
        };
        if let Ok(cmd) = RemotingCommand::decode(&raw) {
            assert_eq!(&cmd.body, body);
            if let Ok(bytes) = cmd.encode(DEFAULT_MAX_FRAME_SIZE) {
                let Ok(Decoded::Frame { frame, consumed }) =
                    decode_frame(&bytes, DEFAULT_MAX_FRAME_SIZE)
                else {
                    panic!("an encoded frame does not decode");
                };
                assert_eq!(consumed, bytes.len());
                assert_eq!(RemotingCommand::decode(&frame).as_ref(), Ok(&cmd));
            }
        }
    }
    // The raw bytes as a bare header of either type.
    check_header(&input.stream, SerializeType::Json);
    check_header(&input.stream, SerializeType::RocketMq);
});
