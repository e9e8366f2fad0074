//! The divergence check of a reconnecting slave (seed 003's "dirty slave"): before it appends
//! anything, it re-reads the tail of its own log from the master and compares the two, so a
//! slave whose log parted from the master's is caught instead of extended.

use super::client::DispatchError;
use crate::error::CommitLogError;
use crate::store::MessageStore;

/// How far back a reconnecting slave re-reads its own log from the master to prove the two
/// agree before it appends anything.
const PREFIX_CHECK_WINDOW: u64 = 64 * 1024;

/// A reconnecting slave asks for bytes it already has, `[from, until)`, and compares them with
/// its own before resuming at `until`. A plain RocketMQ master serves this unchanged: it is
/// just an earlier offset request.
pub(super) struct PrefixCheck {
    pub(super) from: u64,
    pub(super) until: u64,
    /// The next offset a frame must start at.
    next: u64,
}

impl PrefixCheck {
    /// `None` when the slave holds nothing to compare.
    pub(super) fn new(store: &MessageStore) -> Option<Self> {
        let until = store.max_offset();
        let min = store.min_offset();
        if until <= min {
            return None;
        }
        // Stay inside the segment that holds the last byte, which the master must hold too.
        let size = store.commit_log().file_size() as u64;
        let segment_start = (until - 1) - (until - 1) % size;
        let from = until
            .saturating_sub(PREFIX_CHECK_WINDOW)
            .max(segment_start)
            .max(min);
        Some(Self {
            from,
            until,
            next: from,
        })
    }

    pub(super) fn done(&self) -> bool {
        self.next >= self.until
    }

    /// Compares the part of a frame we already hold; returns the part past it.
    pub(super) fn verify<'a>(
        &mut self,
        store: &MessageStore,
        offset: u64,
        body: &'a [u8],
    ) -> Result<&'a [u8], DispatchError> {
        let divergent = |at: u64| DispatchError::Divergent {
            at,
            slave_max: self.until,
            master_offset: offset,
        };
        if offset != self.next {
            // The frames must follow on from where the check stands, as appends follow on from
            // the max offset: the same mismatch, nothing written.
            let mismatch = CommitLogError::OffsetMismatch {
                offset,
                max_offset: self.next,
            };
            return Err(DispatchError::Store(mismatch));
        }
        if body.is_empty() {
            // A heartbeat before we reached our end: the master holds less than we do.
            return Err(divergent(offset));
        }
        let overlap = ((self.until - offset) as usize).min(body.len());
        let mut at = offset;
        let mut mine_done = 0;
        while mine_done < overlap {
            let Some(slice) = store.read_raw(at, overlap - mine_done) else {
                return Err(divergent(at));
            };
            let (mine, len) = (slice.bytes(), slice.len());
            let theirs = &body[mine_done..mine_done + len];
            if let Some(i) = mine.iter().zip(theirs).position(|(a, b)| a != b) {
                return Err(divergent(at + i as u64));
            }
            mine_done += len;
            at += len as u64;
        }
        self.next = offset + body.len() as u64;
        Ok(&body[overlap..])
    }
}
