//! What the server reports: connections accepted and closed, with their reasons, server-wide
//! failures and a processor's own news, queued for whoever observes the server.

use std::time::Duration;

use crate::sync::EventQueue;

/// What happened to a connection or the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerEventKind {
    Connected,
    Closed,
    /// A server-wide failure (accept, epoll), not tied to one connection.
    Error,
    /// A processor's own news (the name server's `REGISTERED`, `EXPIRED`).
    Processor(&'static str),
}

impl ServerEventKind {
    pub fn name(&self) -> &'static str {
        match self {
            ServerEventKind::Connected => "CONNECTED",
            ServerEventKind::Closed => "CLOSED",
            ServerEventKind::Error => "ERROR",
            ServerEventKind::Processor(name) => name,
        }
    }
}

/// One event, with its reason, for logging.
#[derive(Debug, Clone)]
pub struct ServerEvent {
    /// The peer (`ip:port`), or the listen address for server-wide events.
    pub addr: String,
    pub kind: ServerEventKind,
    pub reason: String,
    /// Warnings (a malformed frame, a client closed for not reading) as opposed to routine
    /// connects and closes.
    pub problem: bool,
}

/// Events queued by the loop (and a processor), drained by whoever observes the server.
#[derive(Default)]
pub struct ServerEvents(EventQueue<ServerEvent>);

impl ServerEvents {
    pub(crate) fn push(
        &self,
        addr: impl Into<String>,
        kind: ServerEventKind,
        reason: impl Into<String>,
        problem: bool,
    ) {
        self.0.push(ServerEvent {
            addr: addr.into(),
            kind,
            reason: reason.into(),
            problem,
        });
    }

    /// Waits up to `timeout` for events and returns all queued ones.
    pub fn drain(&self, timeout: Duration) -> Vec<ServerEvent> {
        self.0.drain(timeout)
    }

    /// Wakes drainers early, and keeps them from waiting from now on (on shutdown).
    pub(crate) fn wake(&self) {
        self.0.close();
    }
}
