//! Answers given later: a [`Responder`] sends one request's response from any thread, and the
//! [`RequestContext`] a processor gets hands it out.

use std::net::SocketAddr;
use std::sync::{Arc, Weak};

use super::connection::Output;
use super::invocations::InvokeCallback;
use super::shared::Shared;
use crate::remoting::codes::SerializeType;
use crate::remoting::command::RemotingCommand;
use crate::sync::lock;

/// Sends the response to one request later, from any thread.
#[derive(Clone)]
pub(crate) struct Responder {
    pub(super) connection_id: u64,
    pub(super) opaque: i32,
    pub(super) serialize_type: SerializeType,
    /// Weak: a closed connection's socket is closed by the loop at once, whoever still holds
    /// a responder for it.
    pub(super) output: Weak<Output>,
    pub(super) shared: Arc<Shared>,
}

impl Responder {
    /// Thread-safe. Dropped silently if the connection is gone. The response is sent with the
    /// request's opaque and serialize type, and marked as a response, whatever the processor
    /// built.
    ///
    /// When the connection has nothing queued, the response is written from this thread: a
    /// SYNC_MASTER send settled by its slave's ack goes out from the HA thread that read the
    /// ack, without waking the loop (an eventfd write, an epoll wake-up and a context switch
    /// per response on a lone connection). Otherwise, or when it does not encode, it joins the
    /// loop's outbox, behind what is queued.
    pub(crate) fn send(&self, mut response: RemotingCommand) {
        response.opaque = self.opaque;
        response.mark_response();
        self.queue(response);
    }

    /// Sends a oneway request of the server's own on this request's connection, as RocketMQ's
    /// broker `invokeOneway`s NOTIFY_CONSUMER_IDS_CHANGED to a group's consumers. Thread-safe;
    /// dropped silently if the connection is gone; written like [`Self::send`]'s responses.
    pub(crate) fn send_oneway_request(&self, mut request: RemotingCommand) {
        request.mark_oneway();
        self.queue(request);
    }

    /// Sends a request of the server's own on this request's connection and hands its response
    /// to `callback` (`invokeSync` on a channel: the broker asks a consumer for its running
    /// info). Thread-safe; `callback` gets a timeout after `timeout`, or the connection's close.
    pub(crate) fn invoke(
        &self,
        mut request: RemotingCommand,
        timeout: std::time::Duration,
        callback: InvokeCallback,
    ) {
        request.opaque = self
            .shared
            .invocations
            .register(self.connection_id, timeout, callback);
        self.queue(request);
        // The loop keeps the deadline: it may be sleeping past it.
        self.shared.signal.wake();
    }

    /// The connection closed: nothing sent through this responder would reach anyone.
    pub(crate) fn is_closed(&self) -> bool {
        self.output.strong_count() == 0 || self.shared.signal.stopped()
    }

    fn queue(&self, mut command: RemotingCommand) {
        if self.shared.signal.stopped() {
            return;
        }
        command.serialize_type = self.serialize_type;
        let Some(output) = self.output.upgrade() else {
            return;
        };
        {
            let mut queue = lock(&output.queue);
            if queue.frames.is_empty() && !queue.write_blocked {
                if let Ok(frame) = command.encode(self.shared.max_frame_size) {
                    queue.push(frame);
                    // What the socket does not take now goes on its writable edge, in the
                    // loop. A failed write means a broken socket, which epoll reports to the
                    // loop as well: the loop closes the connection and logs why.
                    let _ = queue.flush(&output.stream);
                    return;
                }
            }
        }
        let first = {
            let mut outbox = lock(&self.shared.outbox);
            outbox.push((self.connection_id, command));
            outbox.len() == 1
        };
        // A non-empty outbox already has a wake-up on its way.
        if first {
            self.shared.signal.wake();
        }
    }
}

/// What a processor knows about the request in hand; a clone answers it from another thread.
#[derive(Clone)]
pub(crate) struct RequestContext {
    pub(super) remote: SocketAddr,
    pub(super) responder: Responder,
}

impl RequestContext {
    pub(crate) fn remote(&self) -> SocketAddr {
        self.remote
    }

    pub(crate) fn connection_id(&self) -> u64 {
        self.responder.connection_id
    }

    /// Answers this request later, from any thread.
    pub(crate) fn responder(&self) -> Responder {
        self.responder.clone()
    }
}
