//! RocketMQ's remoting frame, big-endian:
//! `i32 totalLength | i32 (serializeType << 24 | headerLength) | header | body`,
//! where `totalLength` counts everything after itself (so at least the 4 bytes of the second
//! word) and the body is whatever the frame holds past the header.
//!
//! [`decode_frame`] is incremental: it looks at the front of whatever bytes have arrived and
//! answers "need more", one complete frame (borrowed, no copy) with the bytes it used, or an
//! error. It refuses a bad length as soon as the first word is in, so a hostile peer cannot make
//! the receiver buffer 2 GiB before finding out.

use super::codes::SerializeType;

/// Netty's `LengthFieldBasedFrameDecoder` limit in RocketMQ's `NettyDecoder`
/// (`com.rocketmq.remoting.frameMaxLength`), counting the 4-byte length field too.
#[cfg_attr(feature = "harness", visibility::make(pub))]
pub(crate) const DEFAULT_MAX_FRAME_SIZE: usize = 16 * 1024 * 1024;
/// The header length has 24 bits of the second word.
pub(crate) const MAX_HEADER_LEN: usize = 0x00FF_FFFF;
/// The two leading words.
#[cfg_attr(feature = "harness", visibility::make(pub))]
pub(crate) const PREFIX_LEN: usize = 8;

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum RemotingFrameError {
    #[error("remoting frame length {0} is negative")]
    NegativeLength(i32),
    #[error("remoting frame length {0} is less than the 4 bytes of its header-length word")]
    TooShort(i32),
    #[error(
        "remoting frame of {size} bytes (length field included) exceeds the limit of {limit} bytes"
    )]
    TooLarge { size: usize, limit: usize },
    #[error("remoting header length {header_len} runs past the frame, which has {available} bytes after the header-length word")]
    HeaderPastFrame { header_len: usize, available: usize },
    #[error("unknown remoting serialize type {0} (0 is JSON, 1 is ROCKETMQ)")]
    UnknownSerializeType(u8),
    #[error(
        "remoting header of {0} bytes does not fit the 24-bit header length (at most 16777215)"
    )]
    HeaderTooLong(usize),
    #[error("remoting frame of {size} bytes exceeds the limit of {limit} bytes; not sent")]
    EncodeTooLarge { size: usize, limit: usize },
}

/// One complete frame, borrowing the receive buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "harness", visibility::make(pub))]
pub(crate) struct RawFrame<'a> {
    pub serialize_type: SerializeType,
    pub header: &'a [u8],
    pub body: &'a [u8],
}

/// What the front of the receive buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "harness", visibility::make(pub))]
pub(crate) enum Decoded<'a> {
    /// Not a whole frame yet; `at_least` is how many bytes the buffer needs before trying again
    /// (the whole frame once its length is known).
    NeedMore { at_least: usize },
    /// A frame, and how many bytes of the buffer it took.
    Frame {
        frame: RawFrame<'a>,
        consumed: usize,
    },
}

fn be_i32(buf: &[u8], at: usize) -> Option<i32> {
    let raw: [u8; 4] = buf.get(at..at + 4)?.try_into().ok()?;
    Some(i32::from_be_bytes(raw))
}

/// Decodes the frame at the front of `buf`, refusing frames larger than `max_frame_size` bytes
/// (length field included, as Netty counts).
#[cfg_attr(feature = "harness", visibility::make(pub))]
pub(crate) fn decode_frame(
    buf: &[u8],
    max_frame_size: usize,
) -> Result<Decoded<'_>, RemotingFrameError> {
    let Some(total) = be_i32(buf, 0) else {
        return Ok(Decoded::NeedMore { at_least: 4 });
    };
    if total < 0 {
        return Err(RemotingFrameError::NegativeLength(total));
    }
    if total < 4 {
        return Err(RemotingFrameError::TooShort(total));
    }
    // `total` is a non-negative i32, so this cannot overflow a usize.
    let size = total as usize + 4;
    if size > max_frame_size {
        return Err(RemotingFrameError::TooLarge {
            size,
            limit: max_frame_size,
        });
    }
    let Some(word) = be_i32(buf, 4) else {
        return Ok(Decoded::NeedMore { at_least: size });
    };
    let header_len = (word as u32 & 0x00FF_FFFF) as usize;
    let type_code = (word as u32 >> 24) as u8;
    let available = size - PREFIX_LEN;
    if header_len > available {
        return Err(RemotingFrameError::HeaderPastFrame {
            header_len,
            available,
        });
    }
    let serialize_type = SerializeType::from_code(type_code)
        .ok_or(RemotingFrameError::UnknownSerializeType(type_code))?;
    let Some(frame) = buf.get(PREFIX_LEN..size) else {
        return Ok(Decoded::NeedMore { at_least: size });
    };
    let (header, body) = frame.split_at(header_len);
    Ok(Decoded::Frame {
        frame: RawFrame {
            serialize_type,
            header,
            body,
        },
        consumed: size,
    })
}

/// Appends one frame to `out`, refusing what the peer's decoder would refuse.
#[cfg_attr(feature = "harness", visibility::make(pub))]
pub(crate) fn encode_frame(
    serialize_type: SerializeType,
    header: &[u8],
    body: &[u8],
    max_frame_size: usize,
    out: &mut Vec<u8>,
) -> Result<(), RemotingFrameError> {
    if header.len() > MAX_HEADER_LEN {
        return Err(RemotingFrameError::HeaderTooLong(header.len()));
    }
    let size = PREFIX_LEN + header.len() + body.len();
    let limit = max_frame_size.min(i32::MAX as usize);
    if size > limit {
        return Err(RemotingFrameError::EncodeTooLarge { size, limit });
    }
    // Both fit: size - 4 <= i32::MAX and header.len() <= 24 bits.
    let total = (size - 4) as i32;
    let word = (u32::from(serialize_type.code()) << 24) | header.len() as u32;
    out.reserve(size);
    out.extend_from_slice(&total.to_be_bytes());
    out.extend_from_slice(&word.to_be_bytes());
    out.extend_from_slice(header);
    out.extend_from_slice(body);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame_bytes(total: i32, word: u32, rest: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&total.to_be_bytes());
        v.extend_from_slice(&word.to_be_bytes());
        v.extend_from_slice(rest);
        v
    }

    #[test]
    fn golden_frame_layout() {
        let mut out = Vec::new();
        encode_frame(SerializeType::RocketMq, b"HDR", b"body", 1 << 20, &mut out).unwrap();
        // totalLength = 4 (header-length word) + 3 + 4; the type byte leads the second word.
        assert_eq!(
            out,
            [0, 0, 0, 11, 1, 0, 0, 3, b'H', b'D', b'R', b'b', b'o', b'd', b'y']
        );
        let mut json = Vec::new();
        encode_frame(SerializeType::Json, b"{}", b"", 1 << 20, &mut json).unwrap();
        assert_eq!(json, [0, 0, 0, 6, 0, 0, 0, 2, b'{', b'}']);
    }

    #[test]
    fn decodes_incrementally() {
        let bytes = frame_bytes(11, 0x0100_0003, b"HDRbody");
        for cut in 0..bytes.len() {
            match decode_frame(&bytes[..cut], DEFAULT_MAX_FRAME_SIZE).unwrap() {
                Decoded::NeedMore { at_least } => {
                    assert!(at_least > cut);
                    assert!(at_least <= bytes.len());
                }
                Decoded::Frame { .. } => panic!("frame from {cut} of {} bytes", bytes.len()),
            }
        }
        let mut two = bytes.clone();
        two.extend_from_slice(&bytes);
        let Decoded::Frame { frame, consumed } = decode_frame(&two, 100).unwrap() else {
            panic!("expected a frame");
        };
        assert_eq!(consumed, bytes.len());
        assert_eq!(frame.serialize_type, SerializeType::RocketMq);
        assert_eq!(frame.header, b"HDR");
        assert_eq!(frame.body, b"body");
    }

    #[test]
    fn bad_frames_are_refused_early() {
        let max = DEFAULT_MAX_FRAME_SIZE;
        assert_eq!(
            decode_frame(&(-1i32).to_be_bytes(), max),
            Err(RemotingFrameError::NegativeLength(-1))
        );
        // 2 GiB - 1: refused from its first 4 bytes, before anything is buffered.
        assert_eq!(
            decode_frame(&i32::MAX.to_be_bytes(), max),
            Err(RemotingFrameError::TooLarge {
                size: i32::MAX as usize + 4,
                limit: max
            })
        );
        assert_eq!(
            decode_frame(&3i32.to_be_bytes(), max),
            Err(RemotingFrameError::TooShort(3))
        );
        // The frame's limit counts the length field: 16 MiB - 4 passes, one more byte fails.
        let at_limit = (max - 4) as i32;
        assert!(decode_frame(&at_limit.to_be_bytes(), max).is_ok());
        assert!(decode_frame(&(at_limit + 1).to_be_bytes(), max).is_err());
        let past = frame_bytes(8, 5, b"abcd");
        assert_eq!(
            decode_frame(&past[..8], max),
            Err(RemotingFrameError::HeaderPastFrame {
                header_len: 5,
                available: 4
            })
        );
        let unknown = frame_bytes(4, 0x0200_0000, b"");
        assert_eq!(
            decode_frame(&unknown, max),
            Err(RemotingFrameError::UnknownSerializeType(2))
        );
        let msg = RemotingFrameError::TooLarge {
            size: 20,
            limit: 10,
        }
        .to_string();
        assert!(msg.contains("20") && msg.contains("10"), "{msg}");
    }

    #[test]
    fn encoder_refuses_what_decoders_would() {
        let mut out = Vec::new();
        assert_eq!(
            encode_frame(SerializeType::Json, b"{}", &[0; 100], 50, &mut out),
            Err(RemotingFrameError::EncodeTooLarge {
                size: 110,
                limit: 50
            })
        );
        assert!(out.is_empty());
    }
}
