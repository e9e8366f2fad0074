//! Requests the server sends a client over the client's own connection and whose answer it
//! waits for (`NettyRemotingServer.invokeSync` on a channel): the broker asks a consumer for its
//! running info, or to consume one message, on an operator's behalf. Each waits under an
//! opaque of the server's own until the client's response arrives on that connection, the
//! connection closes, or its deadline passes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::remoting::RemotingCommand;
use crate::sync::lock;

/// Why no response came.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum InvokeError {
    #[error("no response within {0} ms")]
    Timeout(u128),
    #[error("the connection closed before the response")]
    Closed,
}

/// Called once, with the response or why none came; must not block (it may run on the loop).
pub(crate) type InvokeCallback = Box<dyn FnOnce(Result<RemotingCommand, InvokeError>) + Send>;

struct Waiting {
    deadline: Instant,
    timeout: Duration,
    callback: InvokeCallback,
}

#[derive(Default)]
pub(super) struct Invocations {
    /// Opaques of the server's requests: negative, so they never meet a client's own.
    next_opaque: AtomicI32,
    /// (connection, opaque) -> the caller. A lock: callers register from any thread, the loop
    /// completes and expires.
    waiting: Mutex<HashMap<(u64, i32), Waiting>>,
}

impl Invocations {
    /// A fresh opaque for a request on `connection`, whose answer goes to `callback`.
    pub(super) fn register(
        &self,
        connection: u64,
        timeout: Duration,
        callback: InvokeCallback,
    ) -> i32 {
        let opaque = -1 - (self.next_opaque.fetch_add(1, Ordering::Relaxed) & i32::MAX);
        let waiting = Waiting {
            deadline: Instant::now() + timeout,
            timeout,
            callback,
        };
        lock(&self.waiting).insert((connection, opaque), waiting);
        opaque
    }

    /// A response on `connection`: true when a caller waited for it.
    pub(super) fn complete(&self, connection: u64, response: RemotingCommand) -> bool {
        let waiting = lock(&self.waiting).remove(&(connection, response.opaque));
        match waiting {
            Some(w) => {
                (w.callback)(Ok(response));
                true
            }
            None => false,
        }
    }

    /// Fails what waits on a connection that closed.
    pub(super) fn closed(&self, connection: u64) {
        let failed: Vec<Waiting> = {
            let mut waiting = lock(&self.waiting);
            let keys: Vec<(u64, i32)> = waiting
                .keys()
                .filter(|(c, _)| *c == connection)
                .copied()
                .collect();
            keys.iter().filter_map(|k| waiting.remove(k)).collect()
        };
        for w in failed {
            (w.callback)(Err(InvokeError::Closed));
        }
    }

    /// Fails what waited past its deadline; the nearest deadline left.
    pub(super) fn expire(&self, now: Instant) -> Option<Instant> {
        let (expired, next) = {
            let mut waiting = lock(&self.waiting);
            let keys: Vec<(u64, i32)> = waiting
                .iter()
                .filter(|(_, w)| w.deadline <= now)
                .map(|(k, _)| *k)
                .collect();
            let expired: Vec<Waiting> = keys.iter().filter_map(|k| waiting.remove(k)).collect();
            (expired, waiting.values().map(|w| w.deadline).min())
        };
        for w in expired {
            (w.callback)(Err(InvokeError::Timeout(w.timeout.as_millis())));
        }
        next
    }
}
