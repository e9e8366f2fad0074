//! RocketMQ's `ClientManageProcessor`: HEART_BEAT (a client's producer and consumer groups, kept
//! per connection), UNREGISTER_CLIENT and CHECK_CLIENT_CONFIG (whether the broker takes a
//! consumer's subscription). A closed connection's client leaves every table it joined.

use std::net::SocketAddr;
use std::sync::Arc;

use super::answer::system_error;
use super::send::{retry_topic, retry_topic_sys_flag};
use crate::broker::client_channel::ClientChannels;
use crate::broker::consumer_manager::SubscriptionData;
use crate::broker::register_service::RegisterService;
use crate::broker::topic_config::TopicConfigManager;
use crate::broker::transaction::TransactionalMessageService;
use crate::broker::{BrokerSettings, ConsumeTables};
use crate::filter;
use crate::protocol::body::perm;
use crate::protocol::heartbeat::{CheckClientRequestBody, HeartbeatData};
use crate::protocol::json::parse_lenient;
use crate::remoting::header::UnregisterClientRequestHeader;
use crate::remoting::{
    request_code, response_code, RemotingCommand, RequestContext, RequestProcessor,
};
use crate::sync::lock;

/// The codes it answers.
pub(crate) const CODES: &[i32] = &[
    request_code::HEART_BEAT,
    request_code::UNREGISTER_CLIENT,
    request_code::CHECK_CLIENT_CONFIG,
];

pub(crate) struct ClientManageProcessor {
    pub(crate) topics: Arc<TopicConfigManager>,
    pub(crate) consume: ConsumeTables,
    pub(crate) settings: Arc<BrokerSettings>,
    /// Its producer manager knows where a producer group's check-backs go.
    pub(crate) transactions: Arc<TransactionalMessageService>,
    pub(crate) clients: Arc<ClientChannels>,
    /// Told when a heartbeat created a group's retry topic.
    pub(crate) register: Arc<RegisterService>,
}

impl RequestProcessor for ClientManageProcessor {
    fn process(&self, request: RemotingCommand, ctx: &RequestContext) -> Option<RemotingCommand> {
        Some(match request.code {
            request_code::HEART_BEAT => self
                .register
                .registering_new_topics(&self.topics, || self.heart_beat(&request, ctx)),
            request_code::UNREGISTER_CLIENT => self.unregister_client(&request, ctx),
            _ => self.check_client_config(&request),
        })
    }

    fn on_close(&self, connection_id: u64, _remote: SocketAddr) {
        lock(&self.clients).remove(&connection_id);
        self.transactions.producers().closed(connection_id);
        self.consume.consumers.on_close(connection_id);
    }
}

impl ClientManageProcessor {
    /// `ClientManageProcessor.heartBeat`: the client's groups are remembered per connection.
    fn heart_beat(&self, request: &RemotingCommand, ctx: &RequestContext) -> RemotingCommand {
        let data: HeartbeatData = match parse_lenient(&request.body, "HeartbeatData") {
            Ok(d) => d,
            Err(e) => return system_error(request, e),
        };
        let mut refused = Vec::new();
        let now = std::time::Instant::now();
        for consumer in &data.consumer_data_set {
            // The group a consumer names exists from its first heartbeat
            // (`autoCreateSubscriptionGroup`), so its first offset commit is taken, and so does
            // its retry topic, which its push consumers subscribe to.
            match self.consume.groups.find(&consumer.group_name) {
                Err(e) => return system_error(request, e),
                Ok(Some(group)) if group.retry_queue_nums > 0 => {
                    self.topics.create_in_send_back(
                        &retry_topic(&consumer.group_name),
                        group.retry_queue_nums,
                        perm::PERM_READ | perm::PERM_WRITE,
                        retry_topic_sys_flag(consumer.unit_mode),
                    );
                }
                Ok(_) => {}
            }
            refused.extend(self.consume.consumers.register(
                ctx.connection_id(),
                &data.client_id,
                consumer,
                now,
                Some(ctx.responder()),
            ));
        }
        for producer in &data.producer_data_set {
            self.transactions.producers().register(
                &producer.group_name,
                ctx.connection_id(),
                ctx.responder(),
            );
        }
        let mut clients = lock(&self.clients);
        let channel = clients.entry(ctx.connection_id()).or_default();
        channel.client_id = data.client_id;
        channel.client_addr = ctx.remote().to_string();
        channel.language = request.language.name().to_owned();
        channel.version = request.version;
        channel
            .producer_groups
            .extend(data.producer_data_set.into_iter().map(|g| g.group_name));
        channel
            .consumer_groups
            .extend(data.consumer_data_set.into_iter().map(|g| g.group_name));
        // RocketMQ logs a subscription it cannot parse and answers the heartbeat; the remark
        // tells the client too.
        let remark = (!refused.is_empty()).then(|| refused.join("; "));
        RemotingCommand::response_to(request, response_code::SUCCESS, remark)
    }

    /// `ClientManageProcessor.checkClientConfig`: a consumer about to start asks whether the
    /// broker takes its subscription. TAG always; SQL92 only with `enablePropertyFilter`, and
    /// only when it compiles (SUBSCRIPTION_PARSE_FAILED with the reason otherwise).
    fn check_client_config(&self, request: &RemotingCommand) -> RemotingCommand {
        let body: CheckClientRequestBody =
            match parse_lenient(&request.body, "CheckClientRequestBody") {
                Ok(b) => b,
                Err(e) => return system_error(request, e),
            };
        let Some(sub) = body.subscription_data else {
            return RemotingCommand::response_to(request, response_code::SUCCESS, None);
        };
        let expression_type = sub.expression_type.as_deref().filter(|t| !t.is_empty());
        if expression_type.is_none_or(|t| t == filter::TAG) {
            return RemotingCommand::response_to(request, response_code::SUCCESS, None);
        }
        let t = expression_type.unwrap_or_default();
        if !self.settings.enable_property_filter {
            return system_error(
                request,
                format!(
                    "The broker does not support consumer to filter message by {t} \
                     (enablePropertyFilter is false)"
                ),
            );
        }
        match SubscriptionData::build(&sub.topic, &sub.sub_string, Some(t), sub.sub_version) {
            Ok(_) => RemotingCommand::response_to(request, response_code::SUCCESS, None),
            Err(why) => RemotingCommand::response_to(
                request,
                response_code::SUBSCRIPTION_PARSE_FAILED,
                Some(format!("client {}@{}: {why}", body.client_id, body.group)),
            ),
        }
    }

    /// `ClientManageProcessor.unregisterClient`.
    fn unregister_client(
        &self,
        request: &RemotingCommand,
        ctx: &RequestContext,
    ) -> RemotingCommand {
        let header: UnregisterClientRequestHeader = match request.decode_custom_header() {
            Ok(h) => h,
            Err(e) => return system_error(request, e),
        };
        let mut clients = lock(&self.clients);
        if let Some(channel) = clients.get_mut(&ctx.connection_id()) {
            if let Some(g) = &header.producer_group {
                channel.producer_groups.remove(g);
                self.transactions
                    .producers()
                    .unregister(g, ctx.connection_id());
            }
            if let Some(g) = &header.consumer_group {
                channel.consumer_groups.remove(g);
                self.consume.consumers.unregister(g, ctx.connection_id());
            }
            if channel.producer_groups.is_empty() && channel.consumer_groups.is_empty() {
                clients.remove(&ctx.connection_id());
            }
        }
        RemotingCommand::response_to(request, response_code::SUCCESS, None)
    }
}
