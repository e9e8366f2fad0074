//! Error enums of the core, one per concern; every message names the file, offset or limit.

use std::io;
use std::path::PathBuf;

#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum RecordError {
    #[error("topic is empty")]
    EmptyTopic,
    #[error("topic is {0} bytes, more than the 32767 a record can hold")]
    TopicTooLong(usize),
    #[error("topic contains {0:?}; topics use only letters, digits and %|_-")]
    BadTopicChar(char),
    #[error("body is {0} bytes, more than maxMessageSize (4194304)")]
    BodyTooLarge(usize),
    #[error("properties encode to {0} bytes, more than the 32767 a record can hold")]
    PropertiesTooLong(usize),
    #[error("property {what} of {name:?} contains a separator byte (\\x01 or \\x02)")]
    PropertySeparator { what: &'static str, name: String },
    #[error("property name is empty")]
    EmptyPropertyName,
    #[error("queue id {0} is negative")]
    NegativeQueueId(i32),
    #[error("record is truncated")]
    Truncated,
    #[error("bad magic code {0:#010x}")]
    BadMagic(i32),
    #[error("bad record size {0}")]
    BadSize(i32),
    #[error("bad {0} length {1}")]
    BadLength(&'static str, i64),
    #[error("record size field says {total} bytes but its fields add up to {computed}")]
    LengthMismatch { total: usize, computed: usize },
    #[error("body CRC mismatch: stored {stored:#x}, computed {computed:#x}")]
    BadCrc { stored: i32, computed: i32 },
    #[error("property DELAY={0:?} is not a delay level (an integer; 1 is the first level of messageDelayLevel)")]
    BadDelayLevel(String),
    /// RocketMQ's `putMessages` refuses a batch that asks for a delay (MESSAGE_ILLEGAL).
    #[error("a batch cannot hold delayed messages (property DELAY): send them one by one")]
    DelayedBatch,
    /// `WHEEL_TIMER_NOT_ENABLE` (SYSTEM_ERROR).
    #[error("accurate timer message is not enabled, timerWheelEnable is false")]
    TimerNotEnabled,
    /// `WHEEL_TIMER_MSG_ILLEGAL` (MESSAGE_ILLEGAL).
    #[error("{0}")]
    TimerIllegal(String),
    /// `WHEEL_TIMER_FLOW_CONTROL` (SYSTEM_ERROR).
    #[error("{0}")]
    TimerFlowControl(String),
    #[error("a batch cannot hold timer messages (TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS): send them one by one")]
    TimerBatch,
}

#[derive(Debug, thiserror::Error)]
pub enum CommitLogError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("invalid message: {0}")]
    Record(#[from] RecordError),
    #[error("mappedFileSizeCommitLog {0} must be a positive multiple of 4096, at most 2 GiB")]
    BadFileSize(u64),
    #[error("record of {size} bytes does not fit a segment of {file_size} bytes (a record needs 8 bytes to spare for the end-of-file blank); raise mappedFileSizeCommitLog")]
    RecordTooLarge { size: usize, file_size: u64 },
    /// `key` is the setting the size comes from: the commit log's or the consume queue's.
    #[error("{path}: segment is {actual} bytes but {key} is {expected}; open the store with the size it was written with")]
    SegmentSizeMismatch {
        path: PathBuf,
        actual: u64,
        expected: u64,
        key: &'static str,
    },
    #[error("{path}: segment file name is not a 20-digit offset")]
    BadSegmentName { path: PathBuf },
    #[error("{path}: segment starts at {start} but the previous one ends at {expected}: a segment is missing")]
    SegmentGap {
        path: PathBuf,
        start: u64,
        expected: u64,
    },
    /// RocketMQ's HAClient check, in its words: replicated bytes must start where the log ends.
    #[error("master pushed offset not equal the max phy offset in slave, SLAVE: {max_offset} MASTER: {offset}; nothing written")]
    OffsetMismatch { offset: u64, max_offset: u64 },
    #[error("offset {offset} is outside the commit log [{min_offset}, {max_offset})")]
    OffsetOutOfRange {
        offset: u64,
        min_offset: u64,
        max_offset: u64,
    },
    /// RocketMQ's disk-full flag: a put refused with SERVICE_NOT_AVAILABLE.
    #[error("put refused: disk of {path} is {used:.1}% used, past diskSpaceWarningLevelRatio {warning:.0}% (RocketMQ's SERVICE_NOT_AVAILABLE); puts resume once retention brings it below diskSpaceCleanForciblyRatio {forcibly:.0}%: free space, or lower fileReservedTime")]
    DiskFull {
        path: PathBuf,
        used: f64,
        warning: f64,
        forcibly: f64,
    },
    /// RocketMQ's IN_SYNC_REPLICAS_NOT_ENOUGH, answered SYSTEM_ERROR with its remark.
    #[error("in-sync replicas not enough: the SyncStateSet holds {in_sync} broker(s), minInSyncReplicas is {min}; nothing written, send again once the slaves caught up")]
    InSyncReplicasNotEnough { in_sync: usize, min: usize },
    /// RocketMQ's OFFSET_TOO_SMALL (PULL_OFFSET_MOVED to a consumer).
    #[error("queue offset {offset} of {topic} queue {queue_id} is below its min offset {min_offset}: retention deleted the messages it pointed to (OFFSET_TOO_SMALL); resume from {min_offset}")]
    OffsetTooSmall {
        topic: String,
        queue_id: i32,
        offset: i64,
        min_offset: i64,
    },
    #[error("commit log corrupted at offset {offset} in {path}: {reason}")]
    Corrupted {
        offset: u64,
        path: PathBuf,
        reason: RecordError,
    },
    #[error(transparent)]
    MidLogCorruption(Box<MidLogCorruption>),
    #[error("store {path} is already open by another process (lock held on {path}/lock)")]
    Locked { path: PathBuf },
    /// A setting out of range, naming the key.
    #[error("{0}")]
    Config(String),
    /// A store's JSON table (`config/delayOffset.json`) that does not parse.
    #[error("{path} is not what it should hold: {reason}")]
    BadConfigFile { path: PathBuf, reason: String },
    #[error("store is read-only")]
    ReadOnly,
    #[error("store is closed")]
    Closed,
}

impl CommitLogError {
    #[cold]
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        CommitLogError::Io {
            path: path.into(),
            source,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FrameError {
    #[error("frame body size {0} is negative")]
    NegativeBodySize(i32),
    #[error("frame body size {size} exceeds the limit of {limit} bytes")]
    BodyTooLarge { size: i32, limit: usize },
    #[error("frame offset {0} is negative")]
    NegativeOffset(i64),
    #[error("frame at offset {offset} failed its CRC32 check: corrupted in transit")]
    BadCrc { offset: u64 },
    /// AutoSwitch HA: a frame's state field is not the one this point of the exchange expects
    /// (a classic HA peer's bytes read as an AutoSwitch frame end here).
    #[error("frame state {got} where {expected} was expected: is the peer in the same HA mode (enableControllerMode)?")]
    UnexpectedState { got: i32, expected: &'static str },
    /// AutoSwitch HA: the master's epoch entries do not make a history.
    #[error("bad epoch entries in the master's handshake: {0}")]
    BadEpochEntries(String),
}

#[derive(Debug, thiserror::Error)]
pub enum HaError {
    #[error("HA socket {addr}: {source}")]
    Io {
        addr: String,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    CommitLog(#[from] CommitLogError),
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error("invalid master address {0:?}: expected host:port")]
    BadAddress(String),
    /// Settings that cannot work together.
    #[error("HA: {0}")]
    Config(String),
}

/// An invalid record with valid records after it: corruption in the middle of the log, which
/// recovery refuses to cut on its own.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "commit log corrupted in the middle, not a torn tail: {path}: invalid record at offset \
     {offset} ({reason}), and {valid_records} valid records ({valid_bytes} bytes) follow from \
     offset {next_valid}; nothing was truncated. Look with `rocketha inspect {store}`, then \
     choose: `rocketha repair --truncate-at-corruption {store}` cuts the log at offset {offset} \
     and drops those records; `rocketha repair --accept-zero-body-crc {store}` keeps them where \
     the only problem is a BODYCRC of 0 (a peer that never fills it in; then set \
     haAcceptZeroBodyCrc=true)",
    path = .path.display(),
    store = .store.display()
)]
pub struct MidLogCorruption {
    pub offset: u64,
    pub path: PathBuf,
    pub reason: RecordError,
    /// The store directory, for the commands the message suggests.
    pub store: PathBuf,
    /// The first record after `offset` that is valid (or valid but for a BODYCRC of 0).
    pub next_valid: u64,
    /// Such records from `next_valid` on, and their bytes.
    pub valid_records: u64,
    pub valid_bytes: u64,
}
