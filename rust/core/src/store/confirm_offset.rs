//! The confirm offset as readers and the put lock hold it (see [`super::confirm`]).

use std::sync::atomic::{AtomicU64, Ordering};

/// What a reader may read up to: `confirmed` (a [`MessageStore`]'s, shared with its index) while
/// records are held, else `max_offset`.
pub(super) fn readable_end(confirmed: &AtomicU64, max_offset: u64) -> u64 {
    match confirmed.load(Ordering::Acquire) {
        u64::MAX => max_offset,
        dispatched => dispatched.min(max_offset),
    }
}

/// The records held back from the consume queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Confirm {
    /// Records ending at or before it may be dispatched.
    pub(super) offset: u64,
    /// Where the checked, complete records end: the master's last append, the start of a
    /// slave's first incomplete record (what the reput offset is without a confirm offset).
    pub(super) complete: u64,
}
