//! Requests a server sends on a client's own connection (RocketMQ's `ClientRemotingProcessor`
//! input), such as a broker's CHECK_TRANSACTION_STATE: the loop thread queues those of the
//! codes asked for, and the client's own thread takes them, so nothing a server sends blocks
//! the loop.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::remoting::RemotingCommand;
use crate::sync::lock;

/// What the queue holds at most; older requests are dropped past it (a server repeats a check
/// it got no answer to).
const MAX_QUEUED: usize = 4096;

#[derive(Debug)]
pub(crate) struct ServerRequests {
    /// The request codes kept; others are skipped and logged.
    codes: Vec<i32>,
    /// A lock and a condvar: the loop thread pushes, a client thread waits to take.
    queue: Mutex<VecDeque<(SocketAddr, RemotingCommand)>>,
    ready: Condvar,
}

impl ServerRequests {
    pub(crate) fn new(codes: Vec<i32>) -> Self {
        Self {
            codes,
            queue: Mutex::default(),
            ready: Condvar::new(),
        }
    }

    /// The client serves requests of this code.
    pub(crate) fn accepts(&self, code: i32) -> bool {
        self.codes.contains(&code)
    }

    /// On the loop thread: keeps `request` from `addr` for [`Self::take`].
    pub(crate) fn push(&self, addr: SocketAddr, request: RemotingCommand) {
        let mut queue = lock(&self.queue);
        if queue.len() >= MAX_QUEUED {
            if let Some((from, old)) = queue.pop_front() {
                log::warn!(
                    "{from}: request code {} dropped, {MAX_QUEUED} requests wait unserved",
                    old.code
                );
            }
        }
        queue.push_back((addr, request));
        self.ready.notify_one();
    }

    /// The oldest request, waiting up to `timeout` for one.
    pub(crate) fn take(&self, timeout: Duration) -> Option<(SocketAddr, RemotingCommand)> {
        let deadline = Instant::now() + timeout;
        let mut queue = lock(&self.queue);
        loop {
            if let Some(next) = queue.pop_front() {
                return Some(next);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            queue = self
                .ready
                .wait_timeout(queue, left)
                .map_or_else(|e| e.into_inner().0, |(q, _)| q);
        }
    }
}
