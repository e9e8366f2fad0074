//! Master/slave replication of the commit log: RocketMQ's classic `DefaultHAService`,
//! byte-compatible on the wire, driven by epoll (mio) instead of polling.
//!
//! The master runs one event loop thread for all slave connections (RocketMQ's
//! AcceptSocketService plus every HAConnection's ReadSocketService and WriteSocketService);
//! each slave runs one HAClient thread. Neither touches Python: the binding reads their state
//! through [`HaEvents`], [`ack::AckTable`] and connection snapshots.

mod accept;
pub(crate) mod ack;
pub(crate) mod auth;
pub mod autoswitch;
pub mod client;
mod connection;
#[cfg(feature = "harness")]
pub mod dispatch;
#[cfg(not(feature = "harness"))]
pub(crate) mod dispatch;
pub mod epoch;
mod flow;
#[cfg(feature = "harness")]
pub mod frame;
#[cfg(not(feature = "harness"))]
pub(crate) mod frame;
pub mod master;
mod prefix_check;

pub use ack::{SyncStateEvent, SyncStateListener, SyncStateSet};

use std::time::Duration;

use crate::sync::EventQueue;

/// RocketMQ 5's `HAConnectionState`, and one state of our own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HaState {
    Ready,
    Handshake,
    Transfer,
    Shutdown,
    /// A slave that stopped replicating because its master keeps sending a record that fails
    /// validation at one offset; it waits for an operator instead of reconnecting forever
    /// (RocketMQ's issue #3388 is that loop).
    Stopped,
}

impl HaState {
    pub fn name(&self) -> &'static str {
        match self {
            HaState::Ready => "READY",
            HaState::Handshake => "HANDSHAKE",
            HaState::Transfer => "TRANSFER",
            HaState::Shutdown => "SHUTDOWN",
            HaState::Stopped => "STOPPED",
        }
    }
}

/// A state change or a closed connection, with the reason, for logging and callbacks.
#[derive(Debug, Clone)]
pub struct HaEvent {
    pub addr: String,
    pub state: HaState,
    pub reason: String,
    /// Warnings (a refused peer, a mismatch) as opposed to routine transitions.
    pub problem: bool,
}

/// Events queued by the loops, drained by whoever observes the service.
#[derive(Default)]
pub struct HaEvents(EventQueue<HaEvent>);

impl HaEvents {
    pub(crate) fn push(
        &self,
        addr: impl Into<String>,
        state: HaState,
        reason: impl Into<String>,
        problem: bool,
    ) {
        self.0.push(HaEvent {
            addr: addr.into(),
            state,
            reason: reason.into(),
            problem,
        });
    }

    /// Waits up to `timeout` for events and returns all queued ones.
    pub fn drain(&self, timeout: Duration) -> Vec<HaEvent> {
        self.0.drain(timeout)
    }

    /// Wakes drainers early, and keeps them from waiting from now on (on shutdown).
    pub(crate) fn wake(&self) {
        self.0.close();
    }
}

/// Timing and limits shared by both sides, with RocketMQ's defaults.
#[derive(Debug, Clone)]
pub struct HaConfig {
    pub transfer_batch_size: usize,
    pub heartbeat_interval: Duration,
    pub housekeeping_interval: Duration,
    /// Bytes a second per connection, headers and bodies; `None` without flow control.
    pub max_transfer_bytes_per_second: Option<u64>,
    pub sync_from_last_file: bool,
    pub auth_secret: Option<Vec<u8>>,
    /// Slave: ask for the per-frame CRC32 extension (needs `auth_secret`).
    pub frame_crc: bool,
    /// Slave, `haAcceptZeroBodyCrc`: take records whose BODYCRC is 0 from masters that never
    /// fill it in; every other check of incoming records stays on.
    pub accept_zero_body_crc: bool,
    /// Speak RocketMQ 5's AutoSwitch HA (controller mode) with these epochs: a master answers
    /// handshakes with them and labels its frames; a slave checks its log against its
    /// master's, its slave id being the broker id the controller gave.
    pub epochs: Option<std::sync::Arc<epoch::EpochFileCache>>,
}

impl Default for HaConfig {
    fn default() -> Self {
        Self {
            transfer_batch_size: 32 * 1024,
            heartbeat_interval: Duration::from_millis(5000),
            housekeeping_interval: Duration::from_millis(20000),
            max_transfer_bytes_per_second: None,
            sync_from_last_file: false,
            auth_secret: None,
            frame_crc: false,
            accept_zero_body_crc: false,
            epochs: None,
        }
    }
}

impl HaConfig {
    /// The handshake must finish well before housekeeping would notice a stuck peer.
    pub(crate) fn handshake_timeout(&self) -> Duration {
        self.housekeeping_interval.min(Duration::from_secs(5))
    }
}
