//! The state a server's loop shares with its responders and its handle.

use std::sync::{Arc, Mutex};

use super::events::ServerEvents;
use super::invocations::Invocations;
use crate::event_loop::Signal;
use crate::remoting::command::RemotingCommand;

/// What the loop shares with responders and the owning handle.
pub(super) struct Shared {
    pub(super) signal: Arc<Signal>,
    /// Responses sent from other threads, by connection id, for the loop to write. A lock
    /// rather than a channel: the loop takes the whole batch in one swap.
    pub(super) outbox: Mutex<Vec<(u64, RemotingCommand)>>,
    pub(super) events: Arc<ServerEvents>,
    pub(super) max_frame_size: usize,
    /// The server's own requests waiting for a client's response.
    pub(super) invocations: Invocations,
}
