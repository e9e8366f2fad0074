//! GET_CONSUMER_CONNECTION_LIST and GET_PRODUCER_CONNECTION_LIST (`mqadmin consumerConnection`,
//! `producerConnection`): each connection of a group with its client's address, language and
//! version, from the heartbeats; for a consumer group, also what it subscribes to.

use crate::broker::client_channel::{ClientChannel, ClientChannels};
use crate::broker::consumer_manager::{ConsumerManager, SubscriptionData};
use crate::broker::processor::answer::system_error;
use crate::filter;
use crate::protocol::connection::{
    Connection, ConsumerConnection, ProducerConnection, SubscriptionBody,
};
use crate::remoting::header::{
    GetConsumerConnectionListRequestHeader, GetProducerConnectionListRequestHeader,
};
use crate::remoting::{response_code, RemotingCommand};
use crate::sync::lock;

/// The connections whose heartbeats named a group `in_group` picks, by client id.
fn connections(
    clients: &ClientChannels,
    in_group: impl Fn(&ClientChannel) -> bool,
) -> Vec<Connection> {
    let mut out: Vec<Connection> = lock(clients)
        .values()
        .filter(|c| in_group(c))
        .map(|c| Connection {
            client_id: c.client_id.clone(),
            client_addr: c.client_addr.clone(),
            language: c.language.clone(),
            version: c.version,
        })
        .collect();
    out.sort_by(|a, b| (&a.client_id, &a.client_addr).cmp(&(&b.client_id, &b.client_addr)));
    out
}

/// `SubscriptionData` as the Java side reads it back.
pub(crate) fn subscription_body(s: SubscriptionData) -> SubscriptionBody {
    let expression_type = if s.sql.is_some() {
        filter::SQL92
    } else {
        filter::TAG
    };
    let tags_set = match s.sub_string.as_str() {
        _ if s.sql.is_some() => Vec::new(),
        "*" => Vec::new(),
        tags => tags.split("||").map(|t| t.trim().to_owned()).collect(),
    };
    SubscriptionBody {
        class_filter_mode: false,
        topic: s.topic,
        sub_string: s.sub_string,
        tags_set,
        code_set: s.code_set.into_iter().collect(),
        sub_version: s.sub_version,
        expression_type: expression_type.into(),
    }
}

/// GET_CONSUMER_CONNECTION_LIST; CONSUMER_NOT_ONLINE when no member of the group is connected.
pub(crate) fn consumer(
    clients: &ClientChannels,
    consumers: &ConsumerManager,
    request: &RemotingCommand,
) -> RemotingCommand {
    let header: GetConsumerConnectionListRequestHeader = match request.decode_custom_header() {
        Ok(h) => h,
        Err(e) => return system_error(request, e),
    };
    let group = header.consumer_group;
    let Some((subscriptions, consuming)) = consumers.consuming(&group) else {
        return RemotingCommand::response_to(
            request,
            response_code::CONSUMER_NOT_ONLINE,
            Some(format!("the consumer group[{group}] not online")),
        );
    };
    let body = ConsumerConnection {
        connection_set: connections(clients, |c| c.consumer_groups.contains(&group)),
        subscription_table: subscriptions
            .into_iter()
            .map(|s| (s.topic.clone(), subscription_body(s)))
            .collect(),
        consume_type: consuming.consume_type,
        message_model: consuming.message_model,
        consume_from_where: consuming.consume_from_where,
    };
    let mut response = RemotingCommand::response_to(request, response_code::SUCCESS, None);
    response.body = body.encode();
    response
}

/// GET_PRODUCER_CONNECTION_LIST; SYSTEM_ERROR, as RocketMQ answers, for a group no connected
/// producer named.
pub(crate) fn producer(clients: &ClientChannels, request: &RemotingCommand) -> RemotingCommand {
    let header: GetProducerConnectionListRequestHeader = match request.decode_custom_header() {
        Ok(h) => h,
        Err(e) => return system_error(request, e),
    };
    let group = header.producer_group;
    let connection_set = connections(clients, |c| c.producer_groups.contains(&group));
    if connection_set.is_empty() {
        return RemotingCommand::response_to(
            request,
            response_code::SYSTEM_ERROR,
            Some(format!("the producer group[{group}] not exist")),
        );
    }
    let mut response = RemotingCommand::response_to(request, response_code::SUCCESS, None);
    response.body = ProducerConnection { connection_set }.encode();
    response
}
