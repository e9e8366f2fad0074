//! RocketMQ's `TimerCheckpoint`: `ROOT/config/timercheck`, one page holding seven big-endian
//! longs: how far delivery got (`lastReadTimeMs`), the timer log's flushed end, how far
//! enqueueing got in the timer topic's queue, the master's enqueue offset (a slave enqueues no
//! further), and a `DataVersion`. GET_TIMER_CHECK_POINT answers the same 56 bytes.
//!
//! ▲ Written through the mapping at every change (RocketMQ copies its fields in at each
//! flush), so a killed broker restarts from its last slot rather than its last flush.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use memmap2::{MmapMut, MmapOptions};

use crate::error::CommitLogError;
use crate::protocol::body::DataVersion;

/// The encoded length: seven longs.
pub(crate) const ENCODED_LEN: usize = 56;
const PAGE: usize = 4096;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Checkpoint {
    pub(crate) last_read_time_ms: i64,
    pub(crate) last_timer_log_flush_pos: i64,
    pub(crate) last_timer_queue_offset: i64,
    pub(crate) master_timer_queue_offset: i64,
    pub(crate) data_version: DataVersion,
}

impl Checkpoint {
    pub(crate) fn encode(&self) -> [u8; ENCODED_LEN] {
        let mut b = [0u8; ENCODED_LEN];
        for (i, v) in [
            self.last_read_time_ms,
            self.last_timer_log_flush_pos,
            self.last_timer_queue_offset,
            self.master_timer_queue_offset,
            self.data_version.state_version,
            self.data_version.timestamp,
            self.data_version.counter,
        ]
        .into_iter()
        .enumerate()
        {
            b[i * 8..i * 8 + 8].copy_from_slice(&v.to_be_bytes());
        }
        b
    }

    /// A GET_TIMER_CHECK_POINT body (32 bytes from a master before the data version, 56
    /// since), or what the file holds.
    pub(crate) fn decode(b: &[u8]) -> Result<Self, String> {
        if b.len() < 32 {
            return Err(format!(
                "a timer checkpoint is 32 or 56 bytes, this one {}",
                b.len()
            ));
        }
        let at = |i: usize| {
            b.get(i * 8..i * 8 + 8)
                .map_or(0, |s| i64::from_be_bytes(s.try_into().unwrap_or_default()))
        };
        Ok(Self {
            last_read_time_ms: at(0),
            last_timer_log_flush_pos: at(1),
            last_timer_queue_offset: at(2),
            master_timer_queue_offset: at(3),
            data_version: DataVersion {
                state_version: at(4),
                timestamp: at(5),
                counter: at(6),
            },
        })
    }
}

/// The file, mapped.
pub(crate) struct TimerCheckpoint {
    path: PathBuf,
    map: MmapMut,
    pub(crate) value: Checkpoint,
}

impl TimerCheckpoint {
    /// Opens `ROOT/config/timercheck`, creating it (all zero) when absent.
    pub(crate) fn open(root: &Path) -> Result<Self, CommitLogError> {
        let dir = root.join("config");
        std::fs::create_dir_all(&dir).map_err(|e| CommitLogError::io(&dir, e))?;
        let path = dir.join("timercheck");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| CommitLogError::io(&path, e))?;
        let len = file
            .metadata()
            .map_err(|e| CommitLogError::io(&path, e))?
            .len();
        if len < PAGE as u64 {
            file.set_len(PAGE as u64)
                .map_err(|e| CommitLogError::io(&path, e))?;
        }
        // SAFETY: one page, written only under the timer store's lock, living in `self`.
        let map = unsafe { MmapOptions::new().len(PAGE).map_mut(&file) }
            .map_err(|e| CommitLogError::io(&path, e))?;
        let value = Checkpoint::decode(&map[..ENCODED_LEN]).unwrap_or_default();
        Ok(Self { path, map, value })
    }

    /// Writes the fields into the page (the kernel has them; [`Self::flush`] makes them
    /// durable).
    pub(crate) fn write(&mut self) {
        self.map[..ENCODED_LEN].copy_from_slice(&self.value.encode());
    }

    pub(crate) fn flush(&self) -> Result<(), CommitLogError> {
        self.map
            .flush()
            .map_err(|e| CommitLogError::io(&self.path, e))
    }
}
