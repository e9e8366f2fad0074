//! The classic RocketMQ HA wire format, big-endian:
//! slave -> master `i64 offset` (8 bytes: request, ack and heartbeat in one);
//! master -> slave `i64 physicOffset | i32 bodySize` (12 bytes) then the body;
//! `bodySize == 0` is a heartbeat.

use crate::error::FrameError;

#[cfg_attr(feature = "harness", visibility::make(pub))]
pub(crate) const REPORT_LEN: usize = 8;
#[cfg_attr(feature = "harness", visibility::make(pub))]
pub(crate) const HEADER_LEN: usize = 12;
/// With the CRC extension every frame and report ends in `u32 crc32(frame bytes before it)`.
pub(crate) const CRC_LEN: usize = 4;

pub(crate) fn crc_trailer(parts: &[&[u8]]) -> [u8; CRC_LEN] {
    let mut h = crc32fast::Hasher::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().to_be_bytes()
}

#[cfg_attr(feature = "harness", visibility::make(pub))]
pub(crate) fn encode_report(offset: u64) -> [u8; REPORT_LEN] {
    (offset as i64).to_be_bytes()
}

#[cfg_attr(feature = "harness", visibility::make(pub))]
pub(crate) fn decode_report(raw: [u8; REPORT_LEN]) -> Result<u64, FrameError> {
    let v = i64::from_be_bytes(raw);
    if v < 0 {
        return Err(FrameError::NegativeOffset(v));
    }
    Ok(v as u64)
}

#[cfg_attr(feature = "harness", visibility::make(pub))]
pub(crate) fn encode_header(offset: u64, body_size: usize) -> [u8; HEADER_LEN] {
    let mut out = [0u8; HEADER_LEN];
    out[..8].copy_from_slice(&(offset as i64).to_be_bytes());
    out[8..].copy_from_slice(&(body_size as i32).to_be_bytes());
    out
}

/// Decodes a header, refusing bodies larger than `max_body` (what the receiver can buffer).
#[cfg_attr(feature = "harness", visibility::make(pub))]
pub(crate) fn decode_header(
    raw: &[u8; HEADER_LEN],
    max_body: usize,
) -> Result<(u64, usize), FrameError> {
    let mut o = [0u8; 8];
    o.copy_from_slice(&raw[..8]);
    let mut s = [0u8; 4];
    s.copy_from_slice(&raw[8..]);
    let (offset, size) = (i64::from_be_bytes(o), i32::from_be_bytes(s));
    if offset < 0 {
        return Err(FrameError::NegativeOffset(offset));
    }
    if size < 0 {
        return Err(FrameError::NegativeBodySize(size));
    }
    if size as usize > max_body {
        return Err(FrameError::BodyTooLarge {
            size,
            limit: max_body,
        });
    }
    Ok((offset as u64, size as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_frames() {
        assert_eq!(
            encode_report(0x0102_0304_0506_0708),
            [1, 2, 3, 4, 5, 6, 7, 8]
        );
        assert_eq!(
            encode_header(1 << 30, 32768),
            [0, 0, 0, 0, 0x40, 0, 0, 0, 0, 0, 0x80, 0]
        );
        // A heartbeat: the offset and a zero size.
        assert_eq!(encode_header(5, 0), [0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0]);
        assert_eq!(
            decode_header(&[0, 0, 0, 0, 0x40, 0, 0, 0, 0, 0, 0x80, 0], 1 << 20),
            Ok((1 << 30, 32768))
        );
    }

    #[test]
    fn bad_frames_are_refused() {
        assert_eq!(
            decode_report([0xFF; 8]),
            Err(FrameError::NegativeOffset(-1))
        );
        let mut h = encode_header(0, 0);
        h[8] = 0xFF;
        assert!(matches!(
            decode_header(&h, 100),
            Err(FrameError::NegativeBodySize(_))
        ));
        assert!(matches!(
            decode_header(&encode_header(0, 101), 100),
            Err(FrameError::BodyTooLarge { .. })
        ));
    }
}
