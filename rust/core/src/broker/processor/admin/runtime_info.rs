//! GET_BROKER_RUNTIME_INFO (`AdminBrokerProcessor.getBrokerRuntimeInfo`, what `mqadmin
//! clusterList` and `brokerStatus` print): a KVTable of RocketMQ's keys where rocketha has the
//! figure, plus the replication state `rocketha status` shows.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::broker::replicas_manager::ReplicasManager;
use crate::broker::store_stats::StoreStatsService;
use crate::broker::{BrokerConfig, BrokerSettings};
use crate::ha::client::HaClient;
use crate::ha::master::HaMaster;
use crate::remoting::{response_code, RemotingCommand};
use crate::store::MessageStore;

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

/// `AdminBrokerProcessor.getBrokerRuntimeInfo`: a KVTable, the keys RocketMQ uses where
/// rocketha has the figure, plus the replication state `rocketha status` shows.
pub(crate) fn get_broker_runtime_info(
    store: &MessageStore,
    settings: &BrokerSettings,
    runtime: &RuntimeView,
    held_pulls: usize,
    request: &RemotingCommand,
) -> RemotingCommand {
    let mut table: BTreeMap<&str, String> = BTreeMap::new();
    table.insert(
        "brokerVersionDesc",
        format!("rocketha {}", env!("CARGO_PKG_VERSION")),
    );
    table.insert("brokerRole", runtime.broker_role.clone());
    table.insert("brokerName", settings.broker_name.clone());
    table.insert("brokerId", settings.broker_id.to_string());
    table.insert("commitLogMinOffset", store.min_offset().to_string());
    table.insert("commitLogMaxOffset", store.max_offset().to_string());
    table.insert("msgPutTotalTodayNow", runtime.stats.put_total().to_string());
    table.insert("msgGetTotalTodayNow", runtime.stats.get_total().to_string());
    runtime.stats.runtime_info(&mut table);
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
    store_runtime_info(store, settings, &mut table);
    table.insert("pullRequestsHeld", held_pulls.to_string());
    if let Some(gt) = store.group_transfer() {
        table.insert("groupTransferPending", gt.pending().to_string());
    }
    if let Some(master) = &runtime.ha_master {
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
    if let Some(ha) = &runtime.ha_client {
        table.insert("haMasterAddress", ha.master_address().unwrap_or_default());
        table.insert("haClientState", ha.state().name().to_owned());
    }
    let mut table: BTreeMap<String, String> =
        table.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    // `ScheduleMessageService.buildRunningStats`: each level's "delivered up to,queued up to".
    for (level, offset) in store.schedule().offsets() {
        let max = store
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

/// The store's part of the runtime info (`DefaultMessageStore.getRuntimeInfo`'s keys
/// `mqadmin clusterList` and `brokerStatus` print).
fn store_runtime_info(
    store: &MessageStore,
    settings: &BrokerSettings,
    table: &mut BTreeMap<&str, String>,
) {
    // A master delivers delayed messages (RocketMQ's `isSpecialServiceRunning`).
    table.insert("brokerActive", (!settings.is_slave).to_string());
    table.insert(
        "earliestMessageTimeStamp",
        store.earliest_message_time().to_string(),
    );
    if let Ok(ratio) = store.commit_log_disk_ratio() {
        table.insert("commitLogDiskRatio", ratio.to_string());
    }
    // Records are dispatched to their queues as they are put.
    table.insert("dispatchBehindBytes", "0".into());
    // RocketMQ's `lockTimeMills` (how long the put in progress has held the commit log's
    // lock) is not timed here: 0, what RocketMQ reports while no put holds it.
    table.insert("pageCacheLockTimeMills", "0".into());
}
