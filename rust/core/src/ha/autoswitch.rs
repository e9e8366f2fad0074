//! RocketMQ 5's AutoSwitch HA, the replication of controller mode: the wire format
//! ([`frame`]) and the slave's truncation to the last point its log shares with the master's
//! ([`consistent_point`]). The master's connection (`connection.rs`) and the slave's client
//! (`client.rs`) speak it when `HaConfig::epochs` is set, and RocketMQ's classic protocol
//! otherwise: the two do not mix on one connection.
//!
//! A slave connects to the master's HA port and sends a handshake with its controller-given
//! broker id; the master answers with its max offset and its epoch entries; the slave cuts
//! its log back to where the two histories agree and reports its max offset; the master then
//! streams the commit log from there, each frame naming the epoch it belongs to and the
//! master's confirm offset (what every member of the SyncStateSet holds).

pub mod frame;

use super::epoch::{EpochEntry, EpochFileCache};

/// What a slave does with the master's handshake (`AutoSwitchHAClient.doTruncate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truncation {
    /// No epoch recorded here (a new slave): replicate from the offset it has.
    Nothing,
    /// Cut the log (and the epochs starting at or past it) back to this offset, then replicate.
    To(u64),
    /// No epoch is shared with the master: this log is another history, and the slave must not
    /// replicate onto it. RocketMQ retries forever; rocketha stops and says so.
    Diverged,
}

/// The point up to which the slave's log (`local`, max offset `local_max`) and the master's
/// (`master`, max offset `master_max`) agree.
pub fn consistent_point(
    local: &EpochFileCache,
    local_max: u64,
    master: &[EpochEntry],
    master_max: u64,
) -> Truncation {
    let mine = local.entries();
    if mine.is_empty() {
        return Truncation::Nothing;
    }
    let ours = EpochFileCache::in_memory(mine.iter().map(|e| (e.epoch, e.start_offset)));
    ours.set_last_end_offset(local_max);
    let theirs = EpochFileCache::in_memory(master.iter().map(|e| (e.epoch, e.start_offset)));
    theirs.set_last_end_offset(master_max);
    match ours.find_consistent_point(&theirs) {
        Some(point) => Truncation::To(point),
        None => Truncation::Diverged,
    }
}

#[cfg(test)]
mod tests;
