//! Why a slave connection ended, and why the frame sink refused a frame: the reasons the
//! HAClient logs and reports, apart from the session and the divergence check that both raise
//! them. A divergent log's finding is left in the store here, when the connection ends on it.

use super::super::epoch::EpochFileError;
use crate::error::{CommitLogError, FrameError};
use crate::store::MessageStore;

/// Why the transfer loop ended: a reason to log, and whether it is a problem or routine.
pub(super) struct Ended {
    pub(super) reason: String,
    pub(super) problem: bool,
    /// The offset and reason of a record from the master that failed validation.
    pub(super) rejected: Option<(u64, String)>,
}

impl Ended {
    pub(super) fn problem(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            problem: true,
            rejected: None,
        }
    }
    pub(super) fn routine(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            problem: false,
            rejected: None,
        }
    }
}

/// Why the frame sink refused a frame; nothing of it was written.
pub(in crate::ha) enum DispatchError {
    Frame(FrameError),
    /// The master's bytes differ from ours at `at`, inside what we already hold.
    Divergent {
        at: u64,
        slave_max: u64,
        master_offset: u64,
    },
    /// The commit log refused the bytes; an offset mismatch says so in RocketMQ's words.
    Store(CommitLogError),
    /// The epoch a frame starts could not be recorded.
    Epoch(EpochFileError),
}

impl From<FrameError> for DispatchError {
    fn from(e: FrameError) -> Self {
        DispatchError::Frame(e)
    }
}

impl DispatchError {
    pub(super) fn ended(self, store: &MessageStore, master: &str) -> Ended {
        match self {
            DispatchError::Store(CommitLogError::OffsetMismatch { offset, max_offset })
                if offset > max_offset =>
            {
                // A master sends from where it was asked, unless what was asked is gone.
                Ended::problem(format!(
                    "{}: the master's log now starts at {offset}, past this slave's offset \
                     {max_offset}: its retention deleted what this slave still needs, so this \
                     slave can never catch up from here. Repair: stop this slave, move its \
                     store aside and start it empty; it then copies from the master's min offset",
                    CommitLogError::OffsetMismatch { offset, max_offset }
                ))
            }
            DispatchError::Store(e @ CommitLogError::OffsetMismatch { .. }) => {
                Ended::problem(e.to_string())
            }
            DispatchError::Store(e) => {
                let rejected = match &e {
                    CommitLogError::Corrupted { offset, reason, .. } => {
                        Some((*offset, reason.to_string()))
                    }
                    _ => None,
                };
                Ended {
                    rejected,
                    ..Ended::problem(format!("append failed: {e}"))
                }
            }
            DispatchError::Divergent {
                at,
                slave_max,
                master_offset,
            } => {
                record_divergence(store, at, slave_max, master);
                Ended::problem(divergence_reason(at, slave_max, master_offset))
            }
            DispatchError::Frame(e) => {
                Ended::problem(format!("bad frame from master: {e}; nothing written"))
            }
            DispatchError::Epoch(e) => Ended::problem(format!("recording the epoch failed: {e}")),
        }
    }
}

fn divergence_reason(at: u64, slave_max: u64, master_offset: u64) -> String {
    format!(
        "divergent slave: its log differs from the master's at offset {at} (slave max offset \
         {slave_max}, master frame at {master_offset}); nothing written. Inspect it, then run \
         `rocketha repair --truncate-to-common-prefix STORE`"
    )
}

/// Leaves the finding in the store, so `rocketha repair` knows where the logs part.
fn record_divergence(store: &MessageStore, at: u64, slave_max: u64, master: &str) {
    let text = format!("offset={at}\nslave_max_offset={slave_max}\nmaster={master}\n");
    let _ = std::fs::write(store.config().root.join("divergence"), text);
}
