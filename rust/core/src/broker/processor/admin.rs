//! RocketMQ's `AdminBrokerProcessor`: the operators' requests (`mqadmin`) and the tables a slave
//! syncs, split by concern into the files below; this file only routes each code to its
//! concern. Most answer from memory on the event loop; those in [`SLOW_CODES`] run on a worker
//! thread of their own, as RocketMQ's `adminBrokerExecutor`: their answers (every topic as
//! JSON, a group's stats over thousands of queues, a search through a queue's records on disk)
//! take long enough to stall the sends and pulls the event loop serves meanwhile.

pub(crate) mod broker_config;
pub(crate) mod call_consumer;
pub(crate) mod connections;
pub(crate) mod consume_queue;
pub(crate) mod epoch_cache;
pub(crate) mod groups;
pub(crate) mod offsets;
pub(crate) mod runtime_info;
pub(crate) mod stats;
pub(crate) mod sync_tables;
pub(crate) mod timer;
pub(crate) mod topics;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use self::offsets::ResetTables;
use self::runtime_info::RuntimeView;
use self::topics::ProtectedTopics;
use super::pull::PullMessageProcessor;
use crate::broker::client_channel::ClientChannels;
use crate::broker::rebalance_lock::{self, RebalanceLockManager};
use crate::broker::register_service::RegisterService;
use crate::broker::topic_config::TopicConfigManager;
use crate::broker::{BrokerSettings, ConsumeTables};
use crate::remoting::{
    not_supported, request_code, response_code, RemotingCommand, RequestContext, RequestProcessor,
    Responder,
};
use crate::store::MessageStore;

/// The codes it answers on the event loop.
pub(crate) const CODES: &[i32] = &[
    request_code::UPDATE_AND_CREATE_TOPIC,
    request_code::DELETE_TOPIC_IN_BROKER,
    request_code::GET_TOPIC_CONFIG,
    request_code::GET_MAX_OFFSET,
    request_code::GET_MIN_OFFSET,
    request_code::GET_EARLIEST_MSG_STORETIME,
    request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
    request_code::DELETE_SUBSCRIPTIONGROUP,
    request_code::GET_SUBSCRIPTIONGROUP_CONFIG,
    request_code::GET_CONSUMER_CONNECTION_LIST,
    request_code::GET_PRODUCER_CONNECTION_LIST,
    request_code::GET_CONSUMER_RUNNING_INFO,
    request_code::LOCK_BATCH_MQ,
    request_code::UNLOCK_BATCH_MQ,
    request_code::GET_BROKER_RUNTIME_INFO,
    request_code::GET_BROKER_CONFIG,
    request_code::UPDATE_BROKER_CONFIG,
    request_code::GET_BROKER_EPOCH_CACHE,
    request_code::NOTIFY_BROKER_ROLE_CHANGED,
    request_code::GET_TIMER_CHECK_POINT,
    request_code::GET_TIMER_METRICS,
];

/// The codes whose answers take long: run on the admin worker.
pub(crate) const SLOW_CODES: &[i32] = &[
    request_code::GET_ALL_TOPIC_CONFIG,
    request_code::GET_ALL_CONSUMER_OFFSET,
    request_code::GET_ALL_DELAY_OFFSET,
    request_code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
    request_code::GET_TOPIC_STATS_INFO,
    request_code::GET_CONSUME_STATS,
    request_code::SEARCH_OFFSET_BY_TIMESTAMP,
    request_code::INVOKE_BROKER_TO_RESET_OFFSET,
    request_code::QUERY_CONSUME_QUEUE,
    request_code::QUERY_TOPIC_CONSUME_BY_WHO,
];

pub(crate) struct AdminBrokerProcessor {
    pub(crate) store: Arc<MessageStore>,
    pub(crate) topics: Arc<TopicConfigManager>,
    pub(crate) consume: ConsumeTables,
    pub(crate) settings: Arc<BrokerSettings>,
    pub(crate) runtime: RuntimeView,
    /// Told when the topics or the broker's permission changed.
    pub(crate) register: Arc<RegisterService>,
    /// Who is connected, for the connection lists.
    pub(crate) clients: Arc<ClientChannels>,
    /// Where pulls are held: a reset wakes them, the runtime info counts them.
    pub(crate) pull: Arc<PullMessageProcessor>,
    /// Which client of a group holds each queue for orderly consumption.
    pub(crate) rebalance_locks: RebalanceLockManager,
}

impl RequestProcessor for AdminBrokerProcessor {
    fn process(&self, request: RemotingCommand, ctx: &RequestContext) -> Option<RemotingCommand> {
        let request = &request;
        let (store, consume) = (&*self.store, &self.consume);
        let broker_name = &self.settings.broker_name;
        Some(match request.code {
            request_code::UPDATE_AND_CREATE_TOPIC => {
                return self.update_and_create_topic(request, ctx.responder())
            }
            request_code::DELETE_TOPIC_IN_BROKER => self.delete_topic(request),
            request_code::GET_TOPIC_CONFIG => topics::topic_config(&self.topics, request),
            request_code::GET_TOPIC_STATS_INFO => {
                stats::topic_stats(store, &self.topics, broker_name, request)
            }
            request_code::GET_CONSUME_STATS => stats::consume_stats(
                store,
                &self.topics,
                consume,
                self.runtime.stats.groups(),
                broker_name,
                request,
            ),
            request_code::GET_MAX_OFFSET
            | request_code::GET_MIN_OFFSET
            | request_code::GET_EARLIEST_MSG_STORETIME => offsets::queue_offset(store, request),
            request_code::SEARCH_OFFSET_BY_TIMESTAMP => {
                offsets::search_offset_by_timestamp(store, request)
            }
            request_code::INVOKE_BROKER_TO_RESET_OFFSET => {
                let tables = ResetTables {
                    store,
                    topics: &self.topics,
                    groups: &consume.groups,
                    offsets: &consume.offsets,
                    broker_name,
                    is_slave: self.settings.is_slave,
                    hold: self.pull.hold_service(),
                };
                offsets::reset_offset(&tables, request)
            }
            code if sync_tables::CODES.contains(&code) => {
                sync_tables::get_all(store, &self.topics, consume, request)
            }
            request_code::GET_TIMER_CHECK_POINT | request_code::GET_TIMER_METRICS => {
                timer::answer(store, request)
            }
            request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP => {
                groups::update_and_create(&consume.groups, request)
            }
            request_code::DELETE_SUBSCRIPTIONGROUP => {
                groups::delete(&consume.groups, &consume.offsets, request)
            }
            request_code::GET_SUBSCRIPTIONGROUP_CONFIG => groups::get(&consume.groups, request),
            request_code::QUERY_CONSUME_QUEUE => {
                consume_queue::query_consume_queue(store, &consume.consumers, request)
            }
            request_code::QUERY_TOPIC_CONSUME_BY_WHO => {
                groups::consumed_by(&consume.consumers, &consume.offsets, request)
            }
            request_code::GET_CONSUMER_CONNECTION_LIST => {
                connections::consumer(&self.clients, &consume.consumers, request)
            }
            request_code::GET_PRODUCER_CONNECTION_LIST => {
                connections::producer(&self.clients, request)
            }
            request_code::GET_CONSUMER_RUNNING_INFO => {
                return call_consumer::call_consumer(&consume.consumers, request, ctx)
            }
            request_code::LOCK_BATCH_MQ | request_code::UNLOCK_BATCH_MQ => {
                rebalance_lock::process(&self.rebalance_locks, request)
            }
            request_code::GET_BROKER_RUNTIME_INFO => runtime_info::get_broker_runtime_info(
                store,
                &self.settings,
                &self.runtime,
                self.pull.hold_service().held(),
                request,
            ),
            request_code::GET_BROKER_CONFIG => {
                broker_config::get_broker_config(&self.runtime.config, request)
            }
            request_code::UPDATE_BROKER_CONFIG => self.update_broker_config(request),
            request_code::GET_BROKER_EPOCH_CACHE => self.broker_epoch_cache(request),
            request_code::NOTIFY_BROKER_ROLE_CHANGED => {
                return self.notify_broker_role_changed(request, ctx)
            }
            // Only CODES and SLOW_CODES are routed here.
            _ => not_supported(request),
        })
    }
}

impl AdminBrokerProcessor {
    /// `updateAndCreateTopic`: a topic created or changed is answered once the name servers
    /// have its route, as RocketMQ's registration before the answer.
    fn update_and_create_topic(
        &self,
        request: &RemotingCommand,
        responder: Responder,
    ) -> Option<RemotingCommand> {
        let (config, attributes) = match topics::to_create(request, &self.settings) {
            Ok(asked) => asked,
            Err(refused) => return Some(refused),
        };
        let topic = config.topic_name.clone();
        let changed = match self.topics.update_or_create(config, &attributes) {
            Ok(changed) => changed,
            Err(e) => {
                return Some(super::answer::system_error(
                    request,
                    format!("topic {topic}: {e}"),
                ))
            }
        };
        let answer = RemotingCommand::response_to(request, response_code::SUCCESS, None);
        if !changed {
            return Some(answer);
        }
        self.register.answer_once_registered(responder, answer);
        None
    }

    /// `deleteTopic`; the name servers learn it at once.
    fn delete_topic(&self, request: &RemotingCommand) -> RemotingCommand {
        let protected = ProtectedTopics {
            cluster_name: &self.settings.cluster_name,
            broker_name: &self.settings.broker_name,
        };
        let (response, deleted) = topics::delete(
            &self.topics,
            &self.consume.offsets,
            &self.store,
            &protected,
            request,
        );
        if deleted {
            self.register.wakeup();
        }
        response
    }

    /// `updateBrokerConfig`; a changed `brokerPermission` is registered at once.
    fn update_broker_config(&self, request: &RemotingCommand) -> RemotingCommand {
        let updated =
            broker_config::update_broker_config(&self.runtime.config, &self.settings, request);
        if updated.permission_changed {
            self.topics.next_version();
            self.register.wakeup();
        }
        updated.response
    }

    /// GET_BROKER_EPOCH_CACHE: the epochs the HA side (master or slave) speaks with.
    fn broker_epoch_cache(&self, request: &RemotingCommand) -> RemotingCommand {
        let r = &self.runtime;
        let master = r.ha_master.as_ref().and_then(|m| m.epochs());
        let epochs = master.or_else(|| r.ha_client.as_ref().and_then(|c| c.epochs()));
        let max = self.store.max_offset();
        epoch_cache::get_broker_epoch_cache(&self.settings, epochs.map(|e| &**e), max, request)
    }

    /// The controller's NOTIFY_BROKER_ROLE_CHANGED, oneway as the controller sends it; a
    /// broker not in controller mode says so to whoever asked two-way.
    fn notify_broker_role_changed(
        &self,
        request: &RemotingCommand,
        ctx: &RequestContext,
    ) -> Option<RemotingCommand> {
        match &self.runtime.replicas {
            Some(replicas) => {
                replicas.notify_broker_role_changed(request, &ctx.remote().to_string());
                (!request.is_oneway())
                    .then(|| RemotingCommand::response_to(request, response_code::SUCCESS, None))
            }
            None => Some(RemotingCommand::response_to(
                request,
                response_code::SYSTEM_ERROR,
                Some(
                    "NOTIFY_BROKER_ROLE_CHANGED: this broker is not in controller mode \
                     (enableControllerMode=false)"
                        .into(),
                ),
            )),
        }
    }
}
