//! A slave connection's state from its first report on: the frame sink that hands what the
//! master pushes to the commit log (after the divergence check, recording AutoSwitch epochs).

use std::sync::Arc;
use std::time::Instant;

use super::super::dispatch::Frame;
use super::super::epoch::{EpochFileCache, EpochFileError};
use super::super::prefix_check::PrefixCheck;
use super::ended::DispatchError;
use crate::store::MessageStore;

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
