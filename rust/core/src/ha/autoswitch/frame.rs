//! The AutoSwitch HA wire format of RocketMQ 5.1.1 and later, big-endian throughout; the
//! first field of every frame is the sender's `HAConnectionState` ordinal:
//!
//! | direction | frame | bytes |
//! |---|---|---|
//! | slave → master | handshake | `i32 1 · i16 syncFromLastFile · i16 asyncLearner · i64 brokerId` (16) |
//! | master → slave | handshake answer | `i32 1 · i32 12n · i64 maxOffset · i32 lastEpoch`, then n × `i32 epoch · i64 startOffset` |
//! | master → slave | transfer | `i32 2 · i32 bodySize · i64 offset · i32 epoch · i64 epochStartOffset · i64 confirmOffset` (36), then the body; an empty body is a heartbeat |
//! | slave → master | report | `i32 2 · i64 maxOffset` (12) |

use crate::error::FrameError;
use crate::ha::epoch::EpochEntry;

/// `HAConnectionState.HANDSHAKE.ordinal()`.
pub const HANDSHAKE: i32 = 1;
/// `HAConnectionState.TRANSFER.ordinal()`.
pub const TRANSFER: i32 = 2;

pub const SLAVE_HANDSHAKE_LEN: usize = 16;
pub const MASTER_HANDSHAKE_HEADER_LEN: usize = 20;
pub const EPOCH_ENTRY_LEN: usize = 12;
pub const TRANSFER_HEADER_LEN: usize = 36;
pub const REPORT_LEN: usize = 12;
/// The entries a Java slave can take in one handshake answer (its buffer holds 1000).
pub const MAX_EPOCH_ENTRIES: usize = 1000;

fn i32_at(raw: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(raw[at..at + 4].try_into().unwrap_or_default())
}

fn i64_at(raw: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(raw[at..at + 8].try_into().unwrap_or_default())
}

fn offset_at(raw: &[u8], at: usize) -> Result<u64, FrameError> {
    let v = i64_at(raw, at);
    u64::try_from(v).map_err(|_| FrameError::NegativeOffset(v))
}

fn expect_state(raw: &[u8], expected: i32, name: &'static str) -> Result<(), FrameError> {
    match i32_at(raw, 0) {
        got if got == expected => Ok(()),
        got => Err(FrameError::UnexpectedState {
            got,
            expected: name,
        }),
    }
}

/// The slave's first frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlaveHandshake {
    pub sync_from_last_file: bool,
    pub async_learner: bool,
    pub broker_id: i64,
}

impl SlaveHandshake {
    pub fn encode(&self) -> [u8; SLAVE_HANDSHAKE_LEN] {
        let mut out = [0u8; SLAVE_HANDSHAKE_LEN];
        out[..4].copy_from_slice(&HANDSHAKE.to_be_bytes());
        out[4..6].copy_from_slice(&i16::from(self.sync_from_last_file).to_be_bytes());
        out[6..8].copy_from_slice(&i16::from(self.async_learner).to_be_bytes());
        out[8..].copy_from_slice(&self.broker_id.to_be_bytes());
        out
    }

    /// As the Java master reads the flags: exactly 1 is true.
    pub fn decode(raw: &[u8; SLAVE_HANDSHAKE_LEN]) -> Result<Self, FrameError> {
        expect_state(raw, HANDSHAKE, "HANDSHAKE (1)")?;
        let flag = |at: usize| i16::from_be_bytes([raw[at], raw[at + 1]]) == 1;
        Ok(Self {
            sync_from_last_file: flag(4),
            async_learner: flag(6),
            broker_id: i64_at(raw, 8),
        })
    }
}

/// The master's answer to a handshake: its max offset and its whole epoch history.
pub fn encode_master_handshake(max_offset: u64, entries: &[EpochEntry]) -> Vec<u8> {
    let last_epoch = entries.last().map_or(-1, |e| e.epoch);
    let mut out = Vec::with_capacity(MASTER_HANDSHAKE_HEADER_LEN + entries.len() * EPOCH_ENTRY_LEN);
    out.extend_from_slice(&HANDSHAKE.to_be_bytes());
    out.extend_from_slice(&((entries.len() * EPOCH_ENTRY_LEN) as i32).to_be_bytes());
    out.extend_from_slice(&(max_offset as i64).to_be_bytes());
    out.extend_from_slice(&last_epoch.to_be_bytes());
    for e in entries {
        out.extend_from_slice(&e.epoch.to_be_bytes());
        out.extend_from_slice(&(e.start_offset as i64).to_be_bytes());
    }
    out
}

/// The handshake answer's header: `(body size, max offset, last epoch)`.
pub fn decode_master_handshake_header(
    raw: &[u8; MASTER_HANDSHAKE_HEADER_LEN],
) -> Result<(usize, u64, i32), FrameError> {
    expect_state(raw, HANDSHAKE, "HANDSHAKE (1)")?;
    let size = i32_at(raw, 4);
    let limit = MAX_EPOCH_ENTRIES * EPOCH_ENTRY_LEN;
    match usize::try_from(size) {
        Err(_) => Err(FrameError::NegativeBodySize(size)),
        Ok(n) if n > limit => Err(FrameError::BodyTooLarge { size, limit }),
        Ok(n) if n % EPOCH_ENTRY_LEN != 0 => Err(FrameError::BadEpochEntries(format!(
            "{n} bytes is not a whole number of {EPOCH_ENTRY_LEN}-byte entries"
        ))),
        Ok(n) => Ok((n, offset_at(raw, 8)?, i32_at(raw, 16))),
    }
}

/// The handshake answer's entries, which must rise in epoch and start offset.
pub fn decode_epoch_entries(body: &[u8]) -> Result<Vec<EpochEntry>, FrameError> {
    let mut entries: Vec<EpochEntry> = Vec::with_capacity(body.len() / EPOCH_ENTRY_LEN);
    for raw in body.chunks_exact(EPOCH_ENTRY_LEN) {
        let entry = EpochEntry::new(i32_at(raw, 0), offset_at(raw, 4)?);
        if let Some(last) = entries.last() {
            if last.epoch >= entry.epoch || last.start_offset > entry.start_offset {
                return Err(FrameError::BadEpochEntries(format!(
                    "{}-{} follows {}-{}",
                    entry.epoch, entry.start_offset, last.epoch, last.start_offset
                )));
            }
        }
        entries.push(entry);
    }
    Ok(entries)
}

/// A transfer frame's header (a heartbeat when `body_size` is 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferHeader {
    pub body_size: usize,
    /// None only in a heartbeat sent before the transfer started: RocketMQ's master then has
    /// no `nextTransferFromWhere` yet and writes -1.
    pub offset: Option<u64>,
    pub epoch: i32,
    pub epoch_start_offset: u64,
    pub confirm_offset: u64,
}

impl TransferHeader {
    pub fn encode(&self) -> [u8; TRANSFER_HEADER_LEN] {
        let mut out = [0u8; TRANSFER_HEADER_LEN];
        out[..4].copy_from_slice(&TRANSFER.to_be_bytes());
        out[4..8].copy_from_slice(&(self.body_size as i32).to_be_bytes());
        let offset = self.offset.map_or(-1, |o| o as i64);
        out[8..16].copy_from_slice(&offset.to_be_bytes());
        out[16..20].copy_from_slice(&self.epoch.to_be_bytes());
        out[20..28].copy_from_slice(&(self.epoch_start_offset as i64).to_be_bytes());
        out[28..].copy_from_slice(&(self.confirm_offset as i64).to_be_bytes());
        out
    }

    /// Refuses bodies larger than `max_body` (what the slave buffers).
    pub fn decode(raw: &[u8; TRANSFER_HEADER_LEN], max_body: usize) -> Result<Self, FrameError> {
        expect_state(raw, TRANSFER, "TRANSFER (2)")?;
        let size = i32_at(raw, 4);
        let body_size = match usize::try_from(size) {
            Err(_) => return Err(FrameError::NegativeBodySize(size)),
            Ok(n) if n > max_body => {
                return Err(FrameError::BodyTooLarge {
                    size,
                    limit: max_body,
                })
            }
            Ok(n) => n,
        };
        let offset = match offset_at(raw, 8) {
            Ok(offset) => Some(offset),
            Err(_) if body_size == 0 => None,
            Err(e) => return Err(e),
        };
        Ok(Self {
            body_size,
            offset,
            epoch: i32_at(raw, 16),
            epoch_start_offset: offset_at(raw, 20)?,
            // A master whose confirm offset is not computed yet sends -1: nothing confirmed.
            confirm_offset: offset_at(raw, 28).unwrap_or(0),
        })
    }
}

pub fn encode_report(max_offset: u64) -> [u8; REPORT_LEN] {
    let mut out = [0u8; REPORT_LEN];
    out[..4].copy_from_slice(&TRANSFER.to_be_bytes());
    out[4..].copy_from_slice(&(max_offset as i64).to_be_bytes());
    out
}

/// What a master reads from a slave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlaveFrame {
    Handshake(SlaveHandshake),
    Report(u64),
}

/// The next whole slave frame at the start of `buf` and its length; None until it has all
/// arrived (the Java master decodes a handshake after 12 bytes, reading stale bytes for the
/// broker id; this waits for the 16).
pub fn decode_slave_frame(buf: &[u8]) -> Result<Option<(SlaveFrame, usize)>, FrameError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    match i32_at(buf, 0) {
        HANDSHAKE if buf.len() >= SLAVE_HANDSHAKE_LEN => {
            let raw: &[u8; SLAVE_HANDSHAKE_LEN] =
                buf[..SLAVE_HANDSHAKE_LEN].try_into().unwrap_or(&[0; 16]);
            Ok(Some((
                SlaveFrame::Handshake(SlaveHandshake::decode(raw)?),
                SLAVE_HANDSHAKE_LEN,
            )))
        }
        TRANSFER if buf.len() >= REPORT_LEN => {
            Ok(Some((SlaveFrame::Report(offset_at(buf, 4)?), REPORT_LEN)))
        }
        HANDSHAKE | TRANSFER => Ok(None),
        got => Err(FrameError::UnexpectedState {
            got,
            expected: "HANDSHAKE (1) or TRANSFER (2)",
        }),
    }
}
