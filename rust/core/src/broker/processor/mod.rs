//! The broker's request processors, one file per RocketMQ processor, registered by request code
//! in one [`ProcessorTable`] at start ([`BrokerProcessors::start`]): which processor answers
//! each code and which thread runs it, as RocketMQ's `BrokerController.registerProcessor`. The
//! ACL check (`aclEnable=true`: the [`PlainAccessValidator`], NO_PERMISSION when it refuses) and
//! the REQUEST_CODE_NOT_SUPPORTED answer for a code nobody registered stand in front of it.
//!
//! A new request code is a line in its processor's `CODES`; a new concern is a new file here
//! and one `register` line below.

pub(crate) mod ack;
pub(crate) mod admin;
mod answer;
pub(crate) mod client_manage;
pub(crate) mod consumer_manage;
pub(crate) mod end_transaction;
pub(crate) mod pop;
pub(crate) mod pull;
pub(crate) mod query;
pub(crate) mod recall;
pub(crate) mod send;

use std::sync::Arc;

use self::ack::AckMessageProcessor;
use self::admin::runtime_info::RuntimeView;
use self::admin::stats::{consumer_lag, ConsumerLag};
use self::admin::AdminBrokerProcessor;
use self::client_manage::ClientManageProcessor;
use self::consumer_manage::ConsumerManageProcessor;
use self::end_transaction::EndTransactionProcessor;
use self::pop::PopMessageProcessor;
use self::pull::PullMessageProcessor;
use self::query::QueryMessageProcessor;
use self::recall::RecallMessageProcessor;
use self::send::SendMessageProcessor;
use crate::acl::plain_access_validator::PlainAccessValidator;
use crate::broker::client_channel::{ClientChannel, ClientChannels};
use crate::broker::pop::revive::PopReviveService;
use crate::broker::rebalance_lock::RebalanceLockManager;
use crate::broker::register_service::RegisterService;
use crate::broker::topic_config::TopicConfigManager;
use crate::broker::transaction::TransactionalMessageService;
use crate::broker::{BrokerSettings, ConsumeTables};
use crate::remoting::{Executor, ProcessorTable, Worker};
use crate::store::MessageStore;
use crate::sync::lock;

/// What the processors share, handed to [`BrokerProcessors::start`].
pub(crate) struct BrokerTables {
    pub(crate) store: Arc<MessageStore>,
    pub(crate) topics: Arc<TopicConfigManager>,
    pub(crate) consume: ConsumeTables,
    pub(crate) settings: Arc<BrokerSettings>,
    pub(crate) register: Arc<RegisterService>,
    /// Half messages and their ends; its producer manager knows where check-backs go.
    pub(crate) transactions: Arc<TransactionalMessageService>,
}

/// The table the client port serves, and what the controller reads or stops of it.
pub(crate) struct BrokerProcessors {
    pub(crate) table: Arc<ProcessorTable>,
    pull: Arc<PullMessageProcessor>,
    pop: Arc<PopMessageProcessor>,
    /// A master's: messages popped and not acked in time come back.
    revive: Option<Arc<PopReviveService>>,
    clients: Arc<ClientChannels>,
    store: Arc<MessageStore>,
    consume: ConsumeTables,
    transactions: Arc<TransactionalMessageService>,
}

impl BrokerProcessors {
    /// Builds every processor and registers its codes; `acl` checks each request first.
    pub(crate) fn start(
        tables: BrokerTables,
        runtime: RuntimeView,
        acl: Option<Arc<PlainAccessValidator>>,
    ) -> std::io::Result<Self> {
        let BrokerTables {
            store,
            topics,
            consume,
            settings,
            register,
            transactions,
        } = tables;
        let pull = PullMessageProcessor::start(
            store.clone(),
            topics.clone(),
            consume.clone(),
            settings.clone(),
            runtime.stats.clone(),
        )?;
        let pop = PopMessageProcessor::start(
            store.clone(),
            topics.clone(),
            consume.clone(),
            settings.clone(),
            pull.clone(),
            consume.order_info.clone(),
        )?;
        let revive = if settings.is_slave {
            None
        } else {
            let revive = Arc::new(PopReviveService::new(
                store.clone(),
                topics.clone(),
                consume.groups.clone(),
                consume.offsets.clone(),
                crate::broker::pop::revive_topic(&settings.cluster_name),
                settings.broker_name.clone(),
                settings.pop,
            ));
            revive.start()?;
            Some(revive)
        };
        let (weak_pop, weak_revive) = (Arc::downgrade(&pop), revive.as_ref().map(Arc::downgrade));
        store.add_arriving_listener(Arc::new(move |topic, queue_id, _next, tags, props| {
            if let Some(pop) = weak_pop.upgrade() {
                pop.polling()
                    .notify_message_arriving(topic, queue_id, tags, props);
            }
            if let Some(revive) = weak_revive.as_ref().and_then(|w| w.upgrade()) {
                revive.arrived(topic);
            }
        }));
        let ack = AckMessageProcessor {
            store: store.clone(),
            topics: topics.clone(),
            settings: settings.clone(),
            pop: pop.clone(),
        };
        let clients = Arc::new(ClientChannels::default());
        let send = SendMessageProcessor::new(
            store.clone(),
            topics.clone(),
            consume.groups.clone(),
            settings.clone(),
            transactions.clone(),
            runtime.stats.clone(),
            register.clone(),
        );
        let consumer_manage = ConsumerManageProcessor {
            store: store.clone(),
            topics: topics.clone(),
            groups: consume.groups.clone(),
            consumers: consume.consumers.clone(),
            offsets: consume.offsets.clone(),
            memory_bytes: pull.memory_bytes(),
        };
        let client_manage = ClientManageProcessor {
            topics: topics.clone(),
            consume: consume.clone(),
            settings: settings.clone(),
            transactions: transactions.clone(),
            clients: clients.clone(),
            register: register.clone(),
        };
        let end_transaction = EndTransactionProcessor {
            store: store.clone(),
            settings: settings.clone(),
            transactions: transactions.clone(),
        };
        let query = QueryMessageProcessor {
            store: store.clone(),
        };
        let recall = RecallMessageProcessor {
            store: store.clone(),
            topics: topics.clone(),
            settings: settings.clone(),
        };
        let admin = AdminBrokerProcessor {
            store: store.clone(),
            topics,
            consume: consume.clone(),
            rebalance_locks: RebalanceLockManager::new(settings.rebalance_lock_max_live_time),
            settings,
            runtime,
            register,
            clients: clients.clone(),
            pull: pull.clone(),
        };

        let mut table = ProcessorTable::default();
        if let Some(acl) = acl {
            table.set_hook(acl);
        }
        // The event loop serves what answers from memory, or defers its answer without
        // blocking; the admin and query workers what may take long (each connection's
        // requests in order, connections in turn).
        let on_loop = || Executor::EventLoop;
        table.register(send::CODES, Arc::new(send), on_loop());
        // Before the pull processor: a closed connection's client leaves the tables first,
        // then its held pulls go.
        table.register(client_manage::CODES, Arc::new(client_manage), on_loop());
        table.register(pull::CODES, pull.clone(), on_loop());
        table.register(consumer_manage::CODES, Arc::new(consumer_manage), on_loop());
        table.register(end_transaction::CODES, Arc::new(end_transaction), on_loop());
        table.register(recall::CODES, Arc::new(recall), on_loop());
        table.register(pop::CODES, pop.clone(), on_loop());
        table.register(ack::CODES, Arc::new(ack), on_loop());
        let query_worker = Executor::Worker(Worker::start("broker-query")?);
        table.register(query::CODES, Arc::new(query), query_worker);
        let admin = Arc::new(admin);
        table.register(admin::CODES, admin.clone(), on_loop());
        let admin_worker = Executor::Worker(Worker::start("broker-admin")?);
        table.register(admin::SLOW_CODES, admin, admin_worker);
        Ok(Self {
            table: Arc::new(table),
            pull,
            pop,
            revive,
            clients,
            store,
            consume,
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
    pub(crate) fn consumer_lag(&self) -> Vec<ConsumerLag> {
        consumer_lag(&self.store, &self.consume)
    }

    /// The clients that sent heartbeats, by connection.
    pub(crate) fn clients(&self) -> Vec<ClientChannel> {
        lock(&self.clients).values().cloned().collect()
    }

    /// Ends the workers, once the client port no longer reads, and the pop's services.
    pub(crate) fn shutdown(&self) {
        self.table.shutdown();
        self.pop.polling().shutdown();
        if let Some(revive) = &self.revive {
            revive.shutdown();
        }
    }
}
