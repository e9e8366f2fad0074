//! The tables a slave syncs from its master (`SlaveSynchronize`): GET_ALL_TOPIC_CONFIG,
//! GET_ALL_CONSUMER_OFFSET, GET_ALL_DELAY_OFFSET and GET_ALL_SUBSCRIPTIONGROUP_CONFIG in
//! RocketMQ's body shapes, each whole, or for a rocketha slave that names its version, the
//! topics or groups changed since.

use crate::broker::processor::answer::with_body;
use crate::broker::slave_sync;
use crate::broker::topic_config::TopicConfigManager;
use crate::broker::ConsumeTables;
use crate::remoting::{request_code, RemotingCommand};
use crate::store::MessageStore;

/// The codes it answers.
pub(crate) const CODES: &[i32] = &[
    request_code::GET_ALL_TOPIC_CONFIG,
    request_code::GET_ALL_CONSUMER_OFFSET,
    request_code::GET_ALL_DELAY_OFFSET,
    request_code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
];

/// The tables a slave syncs (`GET_ALL_*`), each whole, or for a rocketha slave that names
/// its version, the topics or groups changed since.
pub(crate) fn get_all(
    store: &MessageStore,
    topics: &TopicConfigManager,
    consume: &ConsumeTables,
    request: &RemotingCommand,
) -> RemotingCommand {
    let since = slave_sync::since(request);
    let delta = since.and_then(|version| match request.code {
        request_code::GET_ALL_TOPIC_CONFIG => topics
            .delta_since(&version)
            .and_then(|d| serde_json::to_vec(&d).ok()),
        request_code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG => consume
            .groups
            .delta_since(&version)
            .and_then(|d| serde_json::to_vec(&d).ok()),
        _ => None,
    });
    // A delta that cannot be written (never, for these types) goes whole instead.
    if let Some(body) = delta {
        let mut response = with_body(request, body);
        response
            .ext_fields
            .insert(slave_sync::DELTA.into(), "true".into());
        return response;
    }
    let body = match request.code {
        request_code::GET_ALL_TOPIC_CONFIG => {
            serde_json::to_vec(&topics.wrapper()).unwrap_or_default()
        }
        request_code::GET_ALL_CONSUMER_OFFSET => consume.offsets.encode(),
        request_code::GET_ALL_DELAY_OFFSET => store.schedule().encode(),
        _ => consume.groups.encode(),
    };
    with_body(request, body)
}
