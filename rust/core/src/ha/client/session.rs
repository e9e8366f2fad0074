//! A slave connection's state from its first report on: the frame sink that hands what the
//! master pushes to the commit log (after the divergence check, recording AutoSwitch epochs),
//! and why a connection ended.

use std::sync::Arc;
use std::time::Instant;

use super::super::dispatch::Frame;
use super::super::epoch::{EpochFileCache, EpochFileError};
use super::super::prefix_check::{divergence_reason, record_divergence, PrefixCheck};
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

/// One connection's transfer state, from the first report on.
pub(super) struct Session {
    pub(super) store: Arc<MessageStore>,
    /// `haAcceptZeroBodyCrc`.
    pub(super) accept_zero_body_crc: bool,
    /// The CRC extension was negotiated: reports carry a CRC32 trailer.
    pub(super) crc: bool,
    /// Set while the divergence check still compares bytes we hold.
    pub(super) check: Option<PrefixCheck>,
    /// The offset of the first report: while the check runs, heartbeats repeat it.
    pub(super) first: u64,
    pub(super) reported: u64,
    pub(super) last_read: Instant,
    /// Any byte came on this connection: a master sends heartbeats, so silence from the start
    /// means the address is not a master's HA port.
    pub(super) heard: bool,
    pub(super) last_report: Instant,
    /// AutoSwitch HA: this log's epochs, the epoch of the master's last frame (-1 before the
    /// first, as RocketMQ's `currentReceivedEpoch`) and the confirm offset it named.
    pub(super) epochs: Option<Arc<EpochFileCache>>,
    pub(super) received_epoch: i32,
    pub(super) confirm_offset: u64,
}

impl Session {
    /// The frame sink: the part of a frame past what the divergence check still compares goes
    /// to the commit log, heartbeats included, so that it checks every offset the master pushes.
    pub(super) fn sink(&mut self, f: Frame<'_>) -> Result<(), DispatchError> {
        self.record_epoch(&f)?;
        let Some(offset) = f.offset else {
            // A heartbeat from before the master started the transfer: it carries no offset.
            return Ok(());
        };
        let body = match self.check.as_mut() {
            Some(c) => {
                let rest = c.verify(&self.store, offset, f.body)?;
                if !c.done() {
                    // Still inside bytes we hold: nothing to append yet.
                    return Ok(());
                }
                self.check = None;
                rest
            }
            None => f.body,
        };
        let at = offset + (f.body.len() - body.len()) as u64;
        if f.epoch.is_some() && !self.store.holds_for_confirm() {
            // AutoSwitch: consumers read only what the master confirmed (RocketMQ's slave
            // dispatches up to the confirm offset of its master's last frame).
            self.confirm(self.confirm_offset)?;
        }
        self.store
            .append_raw(at, body, self.accept_zero_body_crc)
            .map_err(DispatchError::Store)?;
        if let Some((_, _, confirm)) = f.epoch {
            let confirm = confirm.min(self.store.max_offset());
            if confirm != self.confirm_offset {
                self.confirm(confirm)?;
                self.confirm_offset = confirm;
            }
        }
        Ok(())
    }

    fn confirm(&self, offset: u64) -> Result<(), DispatchError> {
        self.store
            .set_confirm_offset(Some(offset))
            .map_err(DispatchError::Store)
    }

    /// AutoSwitch: a frame of a new epoch records where that epoch starts, heartbeats too (a
    /// RocketMQ master labels the frame that ends an epoch with the next one). An entry the
    /// cache already has, or one that does not follow its last, is RocketMQ's no-op.
    fn record_epoch(&mut self, f: &Frame<'_>) -> Result<(), DispatchError> {
        let (Some(epochs), Some((epoch, start, _))) = (&self.epochs, f.epoch) else {
            return Ok(());
        };
        if epoch == self.received_epoch {
            return Ok(());
        }
        self.received_epoch = epoch;
        match epochs.append(epoch, start) {
            Ok(()) | Err(EpochFileError::NotAfterLast { .. }) => Ok(()),
            Err(e) => Err(DispatchError::Epoch(e)),
        }
    }

    /// The report due now, if any: the new max offset after appends, or, when `heartbeat` is
    /// set, the current one (the first report again while the check runs).
    pub(super) fn due_report(&self, heartbeat: bool) -> Option<u64> {
        match &self.check {
            Some(_) => heartbeat.then_some(self.first),
            None => {
                let max = self.store.max_offset();
                (heartbeat || max > self.reported).then_some(max)
            }
        }
    }
}
