//! RocketMQ's `StoreCheckpoint` file: where a crash's recovery may start scanning.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::error::CommitLogError;
use crate::protocol::now_millis;

/// `checkpoint`: physic, logics and index timestamps as RocketMQ keeps them, then the commit log
/// offset known flushed, which bounds how far back crash recovery must scan.
pub(super) fn read_checkpoint(root: &Path) -> Option<u64> {
    let raw = std::fs::read(root.join("checkpoint")).ok()?;
    let bytes: [u8; 8] = raw.get(24..32)?.try_into().ok()?;
    Some(u64::from_be_bytes(bytes))
}

pub(super) fn write_checkpoint(root: &Path, flushed: u64) -> Result<(), CommitLogError> {
    let path = root.join("checkpoint");
    let now = now_millis();
    let mut raw = Vec::with_capacity(32);
    for v in [now, now, now] {
        raw.extend_from_slice(&v.to_be_bytes());
    }
    raw.extend_from_slice(&flushed.to_be_bytes());
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| CommitLogError::io(&path, e))?;
    file.write_all_at(&raw, 0)
        .map_err(|e| CommitLogError::io(&path, e))
}
