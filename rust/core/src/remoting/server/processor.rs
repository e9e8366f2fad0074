//! What a server asks of whoever answers its requests, and the answers it gives itself.

use std::net::SocketAddr;

use super::responder::RequestContext;
use crate::remoting::codes::response_code;
use crate::remoting::command::RemotingCommand;

/// Handles requests; one instance serves every connection of a server.
pub(crate) trait RequestProcessor: Send + Sync + 'static {
    /// Handles one request on the loop thread (must not block). Returns the response now, or
    /// None when it will be sent later through `ctx.responder()` (a SYNC_MASTER send waiting
    /// for its slave ack), or for a oneway request.
    fn process(&self, request: RemotingCommand, ctx: &RequestContext) -> Option<RemotingCommand>;

    /// A connection closed, for whatever reason (RocketMQ's `ChannelEventListener.onChannelClose`;
    /// the name server forgets the brokers registered over it). Runs on the loop thread.
    fn on_close(&self, _connection_id: u64, _remote: SocketAddr) {}
}

/// `REQUEST_CODE_NOT_SUPPORTED` for `request`, with the remark RocketMQ gives.
pub(crate) fn not_supported(request: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response_to(
        request,
        response_code::REQUEST_CODE_NOT_SUPPORTED,
        Some(format!(" request type {} not supported", request.code)),
    )
}

/// `processor`'s answer to `request`; a panic in it is answered SYSTEM_ERROR, as Netty's
/// handler answers an exception, and the thread (the loop, a worker) and its peers go on.
pub(super) fn process_caught(
    processor: &dyn RequestProcessor,
    request: RemotingCommand,
    ctx: &RequestContext,
) -> Option<RemotingCommand> {
    let (code, opaque) = (request.code, request.opaque);
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        processor.process(request, ctx)
    }))
    .unwrap_or_else(|_| {
        Some(RemotingCommand::response_to(
            &RemotingCommand::request(code, opaque),
            response_code::SYSTEM_ERROR,
            Some(format!(
                "request code {code} failed: the processor panicked"
            )),
        ))
    })
}
