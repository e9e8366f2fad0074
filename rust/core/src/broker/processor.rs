//! The broker's dispatching `RequestProcessor`: sends go to [`SendMessageProcessor`], pulls to
//! [`PullMessageProcessor`], consumer offsets and group members to the
//! [`ConsumerManageProcessor`], queue offsets, lookups and the slave's sync tables to
//! [`admin`](super::admin), the orderly consumers' queue locks to
//! [`rebalance_lock`](super::rebalance_lock); topic creation and runtime info are RocketMQ's
//! `AdminBrokerProcessor`, heartbeats and client unregistration its `ClientManageProcessor`.
//! Every other code is answered `REQUEST_CODE_NOT_SUPPORTED`. With `aclEnable=true`, every
//! request first passes the [`PlainAccessValidator`] or is answered `NO_PERMISSION`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use super::admin;
use super::admin::broker_config;
use super::admin::call_consumer::call_consumer;
use super::admin::connections;
use super::admin::consume_queue;
use super::admin::epoch_cache;
use super::admin::groups;
use super::admin::offsets::{self, ResetTables};
use super::admin::topics::{self, ProtectedTopics};
use super::consumer_manage::ConsumerManageProcessor;
use super::consumer_manager::{ConsumerManager, SubscriptionData};
use super::consumer_offset::ConsumerOffsetManager;
use super::pull::PullMessageProcessor;
use super::rebalance_lock::{self, RebalanceLockManager};
use super::register_service::RegisterService;
use super::replicas_manager::ReplicasManager;
use super::send::{retry_topic, retry_topic_sys_flag, SendMessageProcessor};
use super::slave_sync;
use super::store_stats::StoreStatsService;
use super::subscription_group::SubscriptionGroupManager;
use super::topic_config::TopicConfigManager;
use super::transaction::end::Ended;
use super::transaction::TransactionalMessageService;
use super::{BrokerConfig, BrokerSettings};
use crate::acl::plain_access_validator::PlainAccessValidator;
use crate::filter;
use crate::ha::client::HaClient;
use crate::ha::master::HaMaster;
use crate::protocol::body::perm;
use crate::protocol::heartbeat::{CheckClientRequestBody, HeartbeatData};
use crate::protocol::json::parse_lenient;
use crate::remoting::header::UnregisterClientRequestHeader;
use crate::remoting::{
    not_supported, request_code, response_code, RemotingCommand, RequestContext, RequestProcessor,
    Responder,
};
use crate::store::group_transfer::PutStatus;
use crate::store::MessageStore;
use crate::sync::lock;

/// What one connection's client told the broker in its heartbeats (`ClientChannelInfo` and the
/// groups it belongs to).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientChannel {
    pub client_id: String,
    /// `ip:port` of the client's end of the connection.
    pub client_addr: String,
    /// The `LanguageCode` and `version` of its last heartbeat's header.
    pub language: String,
    pub version: i32,
    pub producer_groups: BTreeSet<String>,
    pub consumer_groups: BTreeSet<String>,
}

/// What GET_BROKER_RUNTIME_INFO reports besides the store.
pub(crate) struct RuntimeView {
    /// `brokerRole` as configured (ASYNC_MASTER, SYNC_MASTER, SLAVE).
    pub(crate) broker_role: String,
    pub(crate) ha_master: Option<Arc<HaMaster>>,
    pub(crate) ha_client: Option<Arc<HaClient>>,
    /// Puts and pulls counted and sampled (`msgPutTotalTodayNow`, `putTps`, ...); shared with
    /// the deferred answers, which count when they are sent.
    pub(crate) stats: Arc<StoreStatsService>,
    /// The `broker.conf` as it runs: GET_BROKER_CONFIG answers it, UPDATE_BROKER_CONFIG
    /// changes its live keys.
    pub(crate) config: Mutex<BrokerConfig>,
    /// Controller mode: the controller's decisions go to it.
    pub(crate) replicas: Option<Arc<ReplicasManager>>,
}

/// The consume side's tables, shared with the controller's housekeeping and the slave's sync.
#[derive(Clone)]
pub(crate) struct ConsumeTables {
    pub(crate) groups: Arc<SubscriptionGroupManager>,
    pub(crate) consumers: Arc<ConsumerManager>,
    pub(crate) offsets: Arc<ConsumerOffsetManager>,
}

pub(crate) struct BrokerProcessor {
    send: SendMessageProcessor,
    pull: Arc<PullMessageProcessor>,
    consumer_manage: ConsumerManageProcessor,
    pub(crate) consume: ConsumeTables,
    store: Arc<MessageStore>,
    topics: Arc<TopicConfigManager>,
    settings: Arc<BrokerSettings>,
    runtime: RuntimeView,
    register: Arc<RegisterService>,
    /// Heartbeats by connection id. A lock: heartbeats on the loop thread, reads from others.
    clients: Mutex<HashMap<u64, ClientChannel>>,
    /// `aclEnable=true`: every request is checked before it is processed.
    acl: Option<Arc<PlainAccessValidator>>,
    /// Which client of a group holds each queue for orderly consumption.
    rebalance_locks: RebalanceLockManager,
    /// Half messages and their ends; its producer manager knows where check-backs go.
    transactions: Arc<TransactionalMessageService>,
}

impl BrokerProcessor {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        store: Arc<MessageStore>,
        topics: Arc<TopicConfigManager>,
        settings: Arc<BrokerSettings>,
        runtime: RuntimeView,
        register: Arc<RegisterService>,
        tables: &ConsumeTables,
        acl: Option<Arc<PlainAccessValidator>>,
        transactions: Arc<TransactionalMessageService>,
    ) -> std::io::Result<Self> {
        let pull = PullMessageProcessor::start(
            store.clone(),
            topics.clone(),
            tables.groups.clone(),
            tables.consumers.clone(),
            tables.offsets.clone(),
            settings.clone(),
            runtime.stats.clone(),
        )?;
        Ok(Self {
            send: SendMessageProcessor::new(
                store.clone(),
                topics.clone(),
                tables.groups.clone(),
                settings.clone(),
                transactions.clone(),
            ),
            consumer_manage: ConsumerManageProcessor {
                store: store.clone(),
                topics: topics.clone(),
                groups: tables.groups.clone(),
                consumers: tables.consumers.clone(),
                offsets: tables.offsets.clone(),
                memory_bytes: pull.memory_bytes(),
            },
            pull,
            consume: tables.clone(),
            store,
            topics,
            rebalance_locks: RebalanceLockManager::new(settings.rebalance_lock_max_live_time),
            settings,
            runtime,
            register,
            clients: Mutex::default(),
            acl,
            transactions,
        })
    }

    pub(crate) fn pull(&self) -> &PullMessageProcessor {
        &self.pull
    }

    pub(crate) fn transactions(&self) -> &TransactionalMessageService {
        &self.transactions
    }

    /// Every group's committed progress against its queues' heads.
    pub(crate) fn consumer_lag(&self) -> Vec<admin::ConsumerLag> {
        admin::consumer_lag(&self.store, &self.consume)
    }

    /// The clients that sent heartbeats, by connection.
    pub(crate) fn clients(&self) -> Vec<ClientChannel> {
        lock(&self.clients).values().cloned().collect()
    }

    fn send_message(
        &self,
        request: &RemotingCommand,
        ctx: &RequestContext,
    ) -> Option<RemotingCommand> {
        let before = self.topics.data_version();
        let responder = ctx.responder();
        let stats = self.runtime.stats.clone();
        let now = self.send.process(request, ctx.remote(), move |r| {
            count_stored(&stats, &r);
            responder.send(r);
        });
        if let Some(r) = &now {
            count_stored(&self.runtime.stats, r);
        }
        self.registered_if_changed(&before);
        now
    }

    /// A request that created a topic (a send, a send-back, a heartbeat's retry topic): the
    /// name servers learn the route at once, as `createTopicInSendMessageMethod` and
    /// `createTopicInSendMessageBackMethod` register (and the register loop persists it first).
    fn registered_if_changed(&self, before: &crate::protocol::body::DataVersion) {
        if self.topics.data_version() != *before {
            self.register.wakeup();
        }
    }

    /// The tables a slave syncs (`GET_ALL_*`), each whole, or for a rocketha slave that names
    /// its version, the topics or groups changed since.
    fn table(&self, request: &RemotingCommand) -> RemotingCommand {
        let since = slave_sync::since(request);
        let delta = since.and_then(|version| match request.code {
            request_code::GET_ALL_TOPIC_CONFIG => self
                .topics
                .delta_since(&version)
                .and_then(|d| serde_json::to_vec(&d).ok()),
            request_code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG => self
                .consume
                .groups
                .delta_since(&version)
                .and_then(|d| serde_json::to_vec(&d).ok()),
            _ => None,
        });
        // A delta that cannot be written (never, for these types) goes whole instead.
        if let Some(body) = delta {
            let mut response = admin::table(request, body);
            response
                .ext_fields
                .insert(slave_sync::DELTA.into(), "true".into());
            return response;
        }
        let body = match request.code {
            request_code::GET_ALL_TOPIC_CONFIG => {
                serde_json::to_vec(&self.topics.wrapper()).unwrap_or_default()
            }
            request_code::GET_ALL_CONSUMER_OFFSET => self.consume.offsets.encode(),
            request_code::GET_ALL_DELAY_OFFSET => self.store.schedule().encode(),
            _ => self.consume.groups.encode(),
        };
        admin::table(request, body)
    }

    /// `EndTransactionProcessor`: a commit is answered once the store settles it, as a send.
    fn end_transaction(
        &self,
        request: &RemotingCommand,
        ctx: &RequestContext,
    ) -> Option<RemotingCommand> {
        if self.settings.is_slave {
            return Some(RemotingCommand::response_to(
                request,
                response_code::SLAVE_NOT_AVAILABLE,
                Some("Message store is slave mode, so end transaction is forbidden.".into()),
            ));
        }
        // RocketMQ's EndTransactionProcessor puts as a send does: refused before the write
        // while the SyncStateSet is too small; the half message stays for the check-back.
        if let Err(e) = self.store.check_in_sync_replicas() {
            return Some(system_error(request, e));
        }
        let (response, next_offset) = match self.transactions.end_transaction(request) {
            Ended::Silent => return None,
            Ended::Now(response) => return Some(response),
            Ended::AfterPut(response, next_offset) => (response, next_offset),
        };
        // A oneway end (the Java client's) is not answered: the loop drops this.
        if request.is_oneway()
            || !self
                .store
                .group_transfer()
                .is_some_and(|g| g.policy().waits())
        {
            return Some(response);
        }
        let responder = ctx.responder();
        let queued = self.store.submit_put(
            next_offset,
            Box::new(move |status| {
                let mut response = response;
                if status != PutStatus::PutOk {
                    // Stored and committed, as RocketMQ answers; the remark says what fell short.
                    response.remark = Some(format!("committed, but {status:?}"));
                }
                responder.send(response);
            }),
        );
        queued.err().map(|e| system_error(request, e))
    }

    /// CONSUMER_SEND_MSG_BACK.
    fn consumer_send_msg_back(&self, request: &RemotingCommand) -> RemotingCommand {
        let before = self.topics.data_version();
        let response = self.send.consumer_send_msg_back(request);
        self.registered_if_changed(&before);
        response
    }

    /// `AdminBrokerProcessor.updateAndCreateTopic`: a topic created or changed is answered
    /// once the name servers have its route, as RocketMQ's registration before the answer.
    fn update_and_create_topic(
        &self,
        request: &RemotingCommand,
        responder: Responder,
    ) -> Option<RemotingCommand> {
        let config = match topics::to_create(request, self.settings.max_topic_queue_nums) {
            Ok(config) => config,
            Err(refused) => return Some(refused),
        };
        let changed = match self.topics.update_or_create(config) {
            Ok(changed) => changed,
            Err(e) => return Some(system_error(request, e)),
        };
        let answer = RemotingCommand::response_to(request, response_code::SUCCESS, None);
        if !changed {
            return Some(answer);
        }
        self.register.answer_once_registered(responder, answer);
        None
    }

    /// The store's part of the runtime info (`DefaultMessageStore.getRuntimeInfo`'s keys
    /// `mqadmin clusterList` and `brokerStatus` print).
    fn store_runtime_info(&self, table: &mut BTreeMap<&str, String>) {
        // A master delivers delayed messages (RocketMQ's `isSpecialServiceRunning`).
        table.insert("brokerActive", (!self.settings.is_slave).to_string());
        table.insert(
            "earliestMessageTimeStamp",
            self.store.earliest_message_time().to_string(),
        );
        if let Ok(ratio) = self.store.commit_log_disk_ratio() {
            table.insert("commitLogDiskRatio", ratio.to_string());
        }
        // Records are dispatched to their queues as they are put.
        table.insert("dispatchBehindBytes", "0".into());
        // RocketMQ's `lockTimeMills` (how long the put in progress has held the commit log's
        // lock) is not timed here: 0, what RocketMQ reports while no put holds it.
        table.insert("pageCacheLockTimeMills", "0".into());
    }

    /// `AdminBrokerProcessor.getBrokerRuntimeInfo`: a KVTable, the keys RocketMQ uses where
    /// rocketha has the figure, plus the replication state `rocketha status` shows.
    fn get_broker_runtime_info(&self, request: &RemotingCommand) -> RemotingCommand {
        let mut table: BTreeMap<&str, String> = BTreeMap::new();
        table.insert(
            "brokerVersionDesc",
            format!("rocketha {}", env!("CARGO_PKG_VERSION")),
        );
        table.insert("brokerRole", self.runtime.broker_role.clone());
        table.insert("brokerName", self.settings.broker_name.clone());
        table.insert("brokerId", self.settings.broker_id.to_string());
        table.insert("commitLogMinOffset", self.store.min_offset().to_string());
        table.insert("commitLogMaxOffset", self.store.max_offset().to_string());
        table.insert(
            "msgPutTotalTodayNow",
            self.runtime.stats.put_total().to_string(),
        );
        table.insert(
            "msgGetTotalTodayNow",
            self.runtime.stats.get_total().to_string(),
        );
        self.runtime.stats.runtime_info(&mut table);
        // Sends and pulls are served on the event loop as they are read, with no thread pool
        // queue for a request to wait in.
        for key in [
            "sendThreadPoolQueueSize",
            "sendThreadPoolQueueHeadWaitTimeMills",
            "pullThreadPoolQueueSize",
            "pullThreadPoolQueueHeadWaitTimeMills",
        ] {
            table.insert(key, "0".into());
        }
        self.store_runtime_info(&mut table);
        table.insert(
            "pullRequestsHeld",
            self.pull.hold_service().held().to_string(),
        );
        if let Some(gt) = self.store.group_transfer() {
            table.insert("groupTransferPending", gt.pending().to_string());
        }
        if let Some(master) = &self.runtime.ha_master {
            let acks = master.acks();
            let offsets = acks.slave_offsets();
            table.insert("haConnectionNum", master.connections().len().to_string());
            table.insert(
                "push2SlaveMaxOffset",
                acks.push2slave_max_offset().to_string(),
            );
            table.insert(
                "slaveAckOffsets",
                offsets
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
            );
        }
        if let Some(ha) = &self.runtime.ha_client {
            table.insert("haMasterAddress", ha.master_address().unwrap_or_default());
            table.insert("haClientState", ha.state().name().to_owned());
        }
        let mut table: BTreeMap<String, String> =
            table.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        // `ScheduleMessageService.buildRunningStats`: each level's "delivered up to,queued up to".
        for (level, offset) in self.store.schedule().offsets() {
            let max = self
                .store
                .consume_queue(crate::commitlog::record::SCHEDULE_TOPIC, level - 1)
                .map_or(0, |cq| cq.max_queue_offset());
            table.insert(
                format!("scheduleMessageOffset_{level}"),
                format!("{offset},{max}"),
            );
        }
        let mut response = RemotingCommand::response_to(request, response_code::SUCCESS, None);
        response.body = serde_json::json!({ "table": table })
            .to_string()
            .into_bytes();
        response
    }

    /// `ClientManageProcessor.heartBeat`: the client's groups are remembered per connection.
    fn heart_beat(&self, request: &RemotingCommand, ctx: &RequestContext) -> RemotingCommand {
        let data: HeartbeatData = match parse_lenient(&request.body, "HeartbeatData") {
            Ok(d) => d,
            Err(e) => return system_error(request, e),
        };
        let mut refused = Vec::new();
        let now = std::time::Instant::now();
        let before = self.topics.data_version();
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
        self.registered_if_changed(&before);
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
                (!request.is_oneway()).then(|| RemotingCommand::response_to(request, response_code::SUCCESS, None))
            }
            None => Some(RemotingCommand::response_to(
                request,
                response_code::SYSTEM_ERROR,
                Some("NOTIFY_BROKER_ROLE_CHANGED: this broker is not in controller mode (enableControllerMode=false)".into()),
            )),
        }
    }
}

/// SYSTEM_ERROR with the reason a request could not be read, as RocketMQ answers a bad header.
fn system_error(request: &RemotingCommand, reason: impl std::fmt::Display) -> RemotingCommand {
    RemotingCommand::response_to(
        request,
        response_code::SYSTEM_ERROR,
        Some(reason.to_string()),
    )
}

/// Adds the messages a send response reports stored (one msg id each; the waits that fell
/// short, `FLUSH_*_TIMEOUT` and `SLAVE_NOT_AVAILABLE`, stored them too).
fn count_stored(stats: &StoreStatsService, response: &RemotingCommand) {
    let stored = response_code::send_stored(response.code);
    if let Some(ids) = response.ext_fields.get("msgId").filter(|_| stored) {
        stats.add_put(ids.split(',').count() as u64);
    }
}

impl RequestProcessor for BrokerProcessor {
    fn process(&self, request: RemotingCommand, ctx: &RequestContext) -> Option<RemotingCommand> {
        // RocketMQ's ACL hook runs before any processor, so a refused request changes nothing.
        if let Some(acl) = &self.acl {
            if let Err(why) = acl.validate(&request, ctx.remote().ip()) {
                return Some(RemotingCommand::response_to(
                    &request,
                    response_code::NO_PERMISSION,
                    Some(why),
                ));
            }
        }
        match request.code {
            request_code::SEND_MESSAGE
            | request_code::SEND_MESSAGE_V2
            | request_code::SEND_BATCH_MESSAGE => self.send_message(&request, ctx),
            request_code::UPDATE_AND_CREATE_TOPIC => {
                self.update_and_create_topic(&request, ctx.responder())
            }
            request_code::GET_BROKER_RUNTIME_INFO => Some(self.get_broker_runtime_info(&request)),
            request_code::HEART_BEAT => Some(self.heart_beat(&request, ctx)),
            request_code::UNREGISTER_CLIENT => Some(self.unregister_client(&request, ctx)),
            request_code::CHECK_CLIENT_CONFIG => Some(self.check_client_config(&request)),
            request_code::PULL_MESSAGE | request_code::LITE_PULL_MESSAGE => {
                self.pull
                    .process(&request, ctx.connection_id(), ctx.remote(), ctx.responder())
            }
            request_code::QUERY_CONSUMER_OFFSET => {
                Some(self.consumer_manage.query_consumer_offset(&request))
            }
            request_code::UPDATE_CONSUMER_OFFSET => {
                Some(self.consumer_manage.update_consumer_offset(&request))
            }
            request_code::GET_CONSUMER_LIST_BY_GROUP => {
                Some(self.consumer_manage.get_consumer_list_by_group(&request))
            }
            request_code::GET_MAX_OFFSET
            | request_code::GET_MIN_OFFSET
            | request_code::GET_EARLIEST_MSG_STORETIME => {
                Some(admin::queue_offset(&self.store, &request))
            }
            request_code::SEARCH_OFFSET_BY_TIMESTAMP => {
                Some(admin::search_offset_by_timestamp(&self.store, &request))
            }
            request_code::GET_TOPIC_STATS_INFO => Some(admin::topic_stats(
                &self.store,
                &self.topics,
                &self.settings.broker_name,
                &request,
            )),
            request_code::GET_CONSUME_STATS => Some(admin::consume_stats(
                &self.store,
                &self.topics,
                &self.consume,
                self.runtime.stats.groups(),
                &self.settings.broker_name,
                &request,
            )),
            request_code::GET_TOPIC_CONFIG => Some(admin::topic_config(&self.topics, &request)),
            request_code::QUERY_MESSAGE => Some(admin::query_message(&self.store, &request)),
            request_code::VIEW_MESSAGE_BY_ID => {
                Some(admin::view_message_by_id(&self.store, &request))
            }
            request_code::GET_ALL_TOPIC_CONFIG
            | request_code::GET_ALL_CONSUMER_OFFSET
            | request_code::GET_ALL_DELAY_OFFSET
            | request_code::GET_ALL_SUBSCRIPTIONGROUP_CONFIG => Some(self.table(&request)),
            request_code::CONSUMER_SEND_MSG_BACK => Some(self.consumer_send_msg_back(&request)),
            request_code::END_TRANSACTION => self.end_transaction(&request, ctx),
            request_code::GET_CONSUMER_RUNNING_INFO => {
                call_consumer(&self.consume.consumers, &request, ctx)
            }
            request_code::LOCK_BATCH_MQ | request_code::UNLOCK_BATCH_MQ => {
                Some(rebalance_lock::process(&self.rebalance_locks, &request))
            }
            request_code::NOTIFY_BROKER_ROLE_CHANGED => {
                self.notify_broker_role_changed(&request, ctx)
            }
            _ => Some(self.process_admin(&request)),
        }
    }

    fn on_close(&self, connection_id: u64, _remote: SocketAddr) {
        lock(&self.clients).remove(&connection_id);
        self.transactions.producers().closed(connection_id);
        self.consume.consumers.on_close(connection_id);
        self.pull.hold_service().on_close(connection_id);
    }
}

impl BrokerProcessor {
    /// The operators' requests (`AdminBrokerProcessor`), and the answer to a code not served.
    fn process_admin(&self, request: &RemotingCommand) -> RemotingCommand {
        let groups = &self.consume.groups;
        match request.code {
            request_code::GET_BROKER_EPOCH_CACHE => self.broker_epoch_cache(request),
            request_code::GET_BROKER_CONFIG => {
                broker_config::get_broker_config(&self.runtime.config, request)
            }
            request_code::UPDATE_BROKER_CONFIG => {
                let updated = broker_config::update_broker_config(
                    &self.runtime.config,
                    &self.settings,
                    request,
                );
                if updated.permission_changed {
                    self.topics.next_version();
                    self.register.wakeup();
                }
                updated.response
            }
            request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP => {
                groups::update_and_create(groups, request)
            }
            request_code::DELETE_SUBSCRIPTIONGROUP => {
                groups::delete(groups, &self.consume.offsets, request)
            }
            request_code::GET_SUBSCRIPTIONGROUP_CONFIG => groups::get(groups, request),
            request_code::QUERY_CONSUME_QUEUE => {
                consume_queue::query_consume_queue(&self.store, &self.consume.consumers, request)
            }
            request_code::QUERY_TOPIC_CONSUME_BY_WHO => {
                groups::consumed_by(&self.consume.consumers, &self.consume.offsets, request)
            }
            request_code::INVOKE_BROKER_TO_RESET_OFFSET => {
                let tables = ResetTables {
                    store: &self.store,
                    topics: &self.topics,
                    groups,
                    offsets: &self.consume.offsets,
                    broker_name: &self.settings.broker_name,
                    is_slave: self.settings.is_slave,
                    hold: self.pull.hold_service(),
                };
                offsets::reset_offset(&tables, request)
            }
            request_code::GET_CONSUMER_CONNECTION_LIST => {
                connections::consumer(&self.clients, &self.consume.consumers, request)
            }
            request_code::GET_PRODUCER_CONNECTION_LIST => {
                connections::producer(&self.clients, request)
            }
            request_code::DELETE_TOPIC_IN_BROKER => {
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
            _ => not_supported(request),
        }
    }
}
