//! `AdminBrokerProcessor.callConsumer`: GET_CONSUMER_RUNNING_INFO (307, `mqadmin
//! consumerStatus`) is relayed to the consumer it names, over that consumer's own connection,
//! and the consumer's answer (its `ConsumerRunningInfo`) goes back to the operator as it came.

use std::time::Duration;

use crate::broker::consumer_manager::ConsumerManager;
use crate::remoting::{response_code, InvokeError, RemotingCommand, RequestContext};

/// `Broker2Client.callClient`'s wait for the consumer.
const CALL_CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

/// Relays `request` to the consumer it names; the answer comes later through `ctx`, or now
/// when the consumer is not connected.
pub(crate) fn call_consumer(
    consumers: &ConsumerManager,
    request: &RemotingCommand,
    ctx: &RequestContext,
) -> Option<RemotingCommand> {
    let field = |name: &str| request.ext_fields.get(name).cloned().unwrap_or_default();
    let (group, client_id) = (field("consumerGroup"), field("clientId"));
    let Some(channel) = consumers.find_channel(&group, &client_id) else {
        return Some(RemotingCommand::response_to(
            request,
            response_code::SYSTEM_ERROR,
            Some(format!("The Consumer <{group}> <{client_id}> not online")),
        ));
    };
    let mut relayed = RemotingCommand::request(request.code, 0);
    relayed.ext_fields = request.ext_fields.clone();
    relayed.body = request.body.clone();
    let operator = ctx.responder();
    let asked = request.clone();
    channel.invoke(
        relayed,
        CALL_CLIENT_TIMEOUT,
        Box::new(move |answer| {
            let response = match answer {
                Ok(answer) => {
                    let mut r = RemotingCommand::response_to(&asked, answer.code, answer.remark);
                    r.body = answer.body;
                    r
                }
                Err(e @ InvokeError::Timeout(_)) => RemotingCommand::response_to(
                    &asked,
                    response_code::CONSUME_MSG_TIMEOUT,
                    Some(format!("consumer <{group}> <{client_id}> Timeout: {e}")),
                ),
                Err(e) => RemotingCommand::response_to(
                    &asked,
                    response_code::SYSTEM_ERROR,
                    Some(format!(
                        "invoke consumer <{group}> <{client_id}> Exception: {e}"
                    )),
                ),
            };
            operator.send(response);
        }),
    );
    None
}
