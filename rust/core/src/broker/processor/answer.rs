//! The answers every processor builds the same way.

use crate::remoting::{response_code, CustomHeader, RemotingCommand};

/// SYSTEM_ERROR with the reason a request could not be served (a bad header or body, a store
/// error), as RocketMQ answers a `RemotingCommandException`.
pub(crate) fn system_error(
    request: &RemotingCommand,
    reason: impl std::fmt::Display,
) -> RemotingCommand {
    RemotingCommand::response_to(
        request,
        response_code::SYSTEM_ERROR,
        Some(reason.to_string()),
    )
}

/// SUCCESS with `header` as its custom header.
pub(crate) fn success_with<H: CustomHeader>(
    request: &RemotingCommand,
    header: &H,
) -> RemotingCommand {
    let mut r = RemotingCommand::response_to(request, response_code::SUCCESS, None);
    r.write_custom_header(header);
    r
}

/// SUCCESS carrying `body` (a table, a record, a JSON document).
pub(crate) fn with_body(request: &RemotingCommand, body: Vec<u8>) -> RemotingCommand {
    let mut r = RemotingCommand::response_to(request, response_code::SUCCESS, None);
    r.body = body;
    r
}
