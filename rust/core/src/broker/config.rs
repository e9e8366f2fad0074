//! RocketMQ's `BrokerConfig` and `MessageStoreConfig` as one `broker.conf`: every key rocketha
//! knows, by RocketMQ's camelCase name, with its default, parsed from properties with errors
//! naming the key and the value. The store's, HA's and retention's own settings
//! ([`StoreConfig`], [`HaConfig`], [`CleanConfig`]) and the broker's ([`BrokerSettings`],
//! [`BrokerControllerConfig`]) are derived from it, so each default is written once: the store's
//! and HA's keys default to what those modules define, every other key's default is here.

mod derive;
mod properties;
mod validate;
mod value;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::broker::pop::PopSettings;
use crate::commitlog::flush::FlushDiskType;
use crate::ha::HaConfig;
use crate::store::{render_message_delay_level, StoreConfig};

use properties::closest_key;
pub use properties::{parse_properties, PropertiesError};
pub(crate) use value::ConfigValue;
pub use value::Value;

/// `brokerRole`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BrokerRole {
    AsyncMaster,
    SyncMaster,
    Slave,
}

impl BrokerRole {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::AsyncMaster => "ASYNC_MASTER",
            Self::SyncMaster => "SYNC_MASTER",
            Self::Slave => "SLAVE",
        }
    }

    pub(crate) fn is_master(self) -> bool {
        self != Self::Slave
    }
}

impl ConfigValue for BrokerRole {
    fn value(&self) -> Value {
        Value::Str(self.name().to_owned())
    }

    const EXPECTED: &'static str = "BrokerRole (one of ASYNC_MASTER, SYNC_MASTER, SLAVE)";
    fn parse(text: &str) -> Option<Self> {
        match text.to_ascii_uppercase().as_str() {
            "ASYNC_MASTER" => Some(Self::AsyncMaster),
            "SYNC_MASTER" => Some(Self::SyncMaster),
            "SLAVE" => Some(Self::Slave),
            _ => None,
        }
    }
    fn render(&self) -> Option<String> {
        Some(self.name().to_owned())
    }
}

/// A key that is not known, or a value that does not fit its key or the others.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("unknown key '{key}'{}", suggestion.as_ref().map(|s| format!("; did you mean '{s}'?")).unwrap_or_default())]
    UnknownKey {
        key: String,
        suggestion: Option<String>,
    },
    /// `key` is RocketMQ's name (or `retention`, for the retention keys checked together).
    #[error("{key}: {problem}")]
    Invalid { key: &'static str, problem: String },
}

impl ConfigError {
    /// The key the error is about, as RocketMQ names it.
    pub fn key(&self) -> &str {
        match self {
            Self::UnknownKey { key, .. } => key,
            Self::Invalid { key, .. } => key,
        }
    }
}

#[cold]
fn invalid(key: &'static str, problem: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        problem: problem.into(),
    }
}

/// Declares the struct, its defaults, the key table, the typed setter and the writer from one
/// list, so a key cannot be added to one and missed in another.
macro_rules! broker_config {
    (defaults($s:ident, $h:ident); $( $(#[doc = $doc:literal])* $field:ident: $ty:ty = $key:literal, $default:expr; )*) => {
        /// One broker's `broker.conf`; fields are RocketMQ's keys in snake_case.
        #[derive(Debug, Clone, PartialEq)]
        pub struct BrokerConfig {
            $( $(#[doc = $doc])* pub(crate) $field: $ty, )*
        }

        impl Default for BrokerConfig {
            fn default() -> Self {
                // The store's and HA's keys default to what those modules define.
                let $s = StoreConfig::new(default_store_path_root_dir());
                let $h = HaConfig::default();
                Self { $( $field: $default, )* }
            }
        }

        impl BrokerConfig {
            /// Every key, by RocketMQ's name, in the order of the fields.
            pub const KEYS: &'static [&'static str] = &[$($key),*];

            /// The snake_case field of each key, in the same order.
            pub const FIELDS: &'static [&'static str] = &[$(stringify!($field)),*];

            /// Sets `key` from its text (trimmed first); `Ok(false)` for a key not listed.
            fn set_known(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
                let value = value.trim();
                match key {
                    $( $key => {
                        self.$field = <$ty as ConfigValue>::parse(value).ok_or_else(|| {
                            invalid($key, format!(
                                "bad value '{value}', expected {}",
                                <$ty as ConfigValue>::EXPECTED
                            ))
                        })?;
                        Ok(true)
                    } )*
                    _ => Ok(false),
                }
            }

            /// `(field, value)` of every key, typed; secrets included.
            pub fn values(&self) -> Vec<(&'static str, Value)> {
                vec![$( (stringify!($field), ConfigValue::value(&self.$field)), )*]
            }

            /// `(key, value)` of every key, `None` when unset; secrets included.
            pub(crate) fn entries(&self) -> Vec<(&'static str, Option<String>)> {
                vec![$( ($key, ConfigValue::render(&self.$field)), )*]
            }
        }
    };
}

const MIB: i64 = 1024 * 1024;

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn int<T: TryInto<i64>>(n: T) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

/// RocketMQ's `storePathRootDir`: `~/store`.
fn default_store_path_root_dir() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default()
        .join("store")
}

broker_config! {
    defaults(s, h);
    broker_cluster_name: String = "brokerClusterName", "DefaultCluster".into();
    broker_name: String = "brokerName", "broker-a".into();
    /// 0 is the master.
    broker_id: i64 = "brokerId", 0;
    broker_role: BrokerRole = "brokerRole", BrokerRole::AsyncMaster;
    flush_disk_type: FlushDiskType = "flushDiskType", s.flush_disk_type;
    store_path_root_dir: String = "storePathRootDir", s.root.to_string_lossy().into_owned();
    mapped_file_size_commit_log: i64 = "mappedFileSizeCommitLog", int(s.mapped_file_size);
    mapped_file_size_consume_queue: i64 = "mappedFileSizeConsumeQueue",
        int(s.mapped_file_size_consume_queue());
    /// With `listenPort` the store host recorded in every message (and in msg ids).
    broker_ip1: String = "brokerIP1", "127.0.0.1".into();
    /// The client port; 0 = OS-chosen.
    listen_port: i64 = "listenPort", 10911;
    /// rocketha: the interface the client port binds (RocketMQ binds all of them).
    listen_address: String = "listenAddress", "127.0.0.1".into();
    /// rocketha: allow a client port on a non-loopback address without `aclEnable`.
    remoting_allow_insecure: bool = "remotingAllowInsecure", false;
    /// `disabled`, `permissive` (TLS and plain) or `enforcing`.
    tls_server_mode: String = "tls.server.mode", "disabled".into();
    tls_server_cert_path: Option<String> = "tls.server.certPath", None;
    tls_server_key_path: Option<String> = "tls.server.keyPath", None;
    /// Not supported (encrypted keys): set, the broker refuses to start.
    tls_server_key_password: Option<String> = "tls.server.keyPassword", None;
    /// `none`, `optional` or `require`, checked against `tls.server.trustCertPath`.
    tls_server_need_client_auth: String = "tls.server.need.client.auth", "none".into();
    tls_server_trust_cert_path: Option<String> = "tls.server.trustCertPath", None;
    /// TLS on the broker's own connections: to name servers, and a slave's to its master.
    tls_enable: bool = "tls.enable", false;
    /// Trust any server certificate (RocketMQ's default is true; rocketha verifies).
    tls_test_mode_enable: bool = "tls.test.mode.enable", false;
    tls_client_trust_cert_path: Option<String> = "tls.client.trustCertPath", None;
    tls_client_cert_path: Option<String> = "tls.client.certPath", None;
    tls_client_key_path: Option<String> = "tls.client.keyPath", None;
    /// Not supported (encrypted keys): set, the broker refuses to start.
    tls_client_key_password: Option<String> = "tls.client.keyPassword", None;
    /// Check every client request against `plain_acl.yml` (RocketMQ's ACL 1.0).
    acl_enable: bool = "aclEnable", false;
    /// rocketha: the ACL file; by default `$ROCKETMQ_HOME/conf/plain_acl.yml`.
    acl_plain_file: Option<String> = "aclPlainFile", None;
    /// Name servers to register with, `host:port` separated by `;`.
    namesrv_addr: Option<String> = "namesrvAddr", None;
    /// Milliseconds between registrations with the name servers.
    register_name_server_period: i64 = "registerNameServerPeriod", 30_000;
    /// Registrations carry the topics zlib-compressed (RocketMQ's binary form). rocketha also
    /// compresses, whatever this says, a table whose JSON is over 4 MiB: past 16 MiB it
    /// would exceed the name servers' frame limit.
    compressed_register: bool = "compressedRegister", false;
    /// Sends to an unknown topic create it from `TBW102` (RocketMQ 4.x's default: true).
    auto_create_topic_enable: bool = "autoCreateTopicEnable", true;
    /// The topic named after the cluster takes sends and pulls (it exists either way, so that
    /// `createTopic(cluster, ...)` finds the cluster's brokers).
    cluster_topic_enable: bool = "clusterTopicEnable", true;
    /// The same for the topic named after the broker.
    broker_topic_enable: bool = "brokerTopicEnable", true;
    /// Queues of the `TBW102` template, so at most this many per auto-created topic.
    default_topic_queue_nums: i64 = "defaultTopicQueueNums", 8;
    /// rocketha: the most queues (read or write) one topic may be created with. Each queue is
    /// a consume queue the broker maps and a `MessageQueue` every client holds; RocketMQ has
    /// no limit, and 100,000 queues would pass `vm.max_map_count` once written to.
    max_topic_queue_nums: i64 = "maxTopicQueueNums", 1024;
    /// 6 = read and write; 4 = read only; 2 = write only.
    broker_permission: i64 = "brokerPermission", int(
        crate::protocol::body::perm::PERM_READ | crate::protocol::body::perm::PERM_WRITE
    );
    ha_listen_port: i64 = "haListenPort", 10912;
    /// rocketha: the interface the HA port binds; loopback, as `listenAddress`.
    ha_listen_address: String = "haListenAddress", "127.0.0.1".into();
    ha_master_address: Option<String> = "haMasterAddress", None;
    ha_send_heartbeat_interval: i64 = "haSendHeartbeatInterval", ms(h.heartbeat_interval);
    ha_housekeeping_interval: i64 = "haHousekeepingInterval", ms(h.housekeeping_interval);
    ha_transfer_batch_size: i64 = "haTransferBatchSize", int(h.transfer_batch_size);
    slave_timeout: i64 = "slaveTimeout", ms(s.slave_timeout);
    sync_flush_timeout: i64 = "syncFlushTimeout", ms(s.sync_flush_timeout);
    /// Replicas, the master included, that must hold a put; unset, 2 for SYNC_MASTER, else 1.
    in_sync_replicas: Option<i64> = "inSyncReplicas", None;
    ha_max_gap_not_in_sync: i64 = "haMaxGapNotInSync", int(s.ha_max_gap_not_in_sync);
    ha_flow_control_enable: bool = "haFlowControlEnable", false;
    max_ha_transfer_byte_in_second: i64 = "maxHaTransferByteInSecond", 100 * MIB;
    sync_from_last_file: bool = "syncFromLastFile", h.sync_from_last_file;
    /// Consumers that lag are sent to a slave, and a slave serves pulls.
    slave_read_enable: bool = "slaveReadEnable", false;
    /// Percent of RAM a consumer may lag behind the head before it counts as reading from disk.
    access_message_in_memory_max_ratio: i64 = "accessMessageInMemoryMaxRatio", 40;
    /// The broker id the subscription groups this broker creates send lagging consumers to.
    which_broker_when_consume_slowly: i64 = "whichBrokerWhenConsumeSlowly", 1;
    /// Consumers may subscribe with SQL92 expressions over message properties.
    enable_property_filter: bool = "enablePropertyFilter", false;
    /// A suspended pull is held for its `suspendTimeoutMillis` (else 1 s).
    long_polling_enable: bool = "longPollingEnable", true;
    /// Milliseconds between writes of `config/consumerOffset.json`.
    flush_consumer_offset_interval: i64 = "flushConsumerOffsetInterval", 5000;
    /// Consumer groups are created on first use; off, an unknown group is refused.
    auto_create_subscription_group: bool = "autoCreateSubscriptionGroup", true;
    /// The most one pull answers with while its records are in memory: bytes, and messages.
    max_transfer_bytes_on_message_in_memory: i64 = "maxTransferBytesOnMessageInMemory", 256 * 1024;
    max_transfer_count_on_message_in_memory: i64 = "maxTransferCountOnMessageInMemory", 32;
    /// The same for a consumer so far behind that its records are read from disk.
    max_transfer_bytes_on_message_in_disk: i64 = "maxTransferBytesOnMessageInDisk", 64 * 1024;
    max_transfer_count_on_message_in_disk: i64 = "maxTransferCountOnMessageInDisk", 8;
    /// rocketha, slave: milliseconds between fetches of the master's tables (RocketMQ: 60 s).
    slave_sync_interval: i64 = "slaveSyncInterval", 60_000;
    flush_interval_commit_log: i64 = "flushIntervalCommitLog", ms(s.flush_interval);
    max_message_size: i64 = "maxMessageSize", 4 * MIB;
    /// rocketha: shared secret for the HA handshake; or read from a file or an env variable.
    ha_auth_secret: Option<String> = "haAuthSecret", None;
    ha_auth_secret_file: Option<String> = "haAuthSecretFile", None;
    ha_auth_secret_env: Option<String> = "haAuthSecretEnv", None;
    /// rocketha, slave: ask the master for a CRC32 on every frame (needs haAuthSecret).
    ha_transfer_crc: bool = "haTransferCrc", h.frame_crc;
    /// rocketha: take records whose BODYCRC is 0 (peers that never fill it in).
    ha_accept_zero_body_crc: bool = "haAcceptZeroBodyCrc", s.accept_zero_body_crc;
    /// rocketha: allow an HA port on a non-loopback address without a secret.
    ha_allow_insecure: bool = "haAllowInsecure", false;
    /// rocketha: serve `/metrics` and `/status` on this port (0 = OS-chosen; unset = off).
    metrics_port: Option<i64> = "metricsPort", None;
    /// rocketha: the interface the metrics port binds.
    metrics_address: String = "metricsAddress", "127.0.0.1".into();
    /// Local hours (`04`, or `04;10`) at which expired commit log segments are deleted.
    delete_when: String = "deleteWhen", render_delete_when(&s.clean.delete_when);
    /// Hours a commit log segment is kept after its last write.
    file_reserved_time: i64 = "fileReservedTime", int(s.clean.file_reserved_time);
    disk_max_used_space_ratio: i64 = "diskMaxUsedSpaceRatio",
        i64::from(s.clean.disk_max_used_space_ratio);
    disk_space_clean_forcibly_ratio: i64 = "diskSpaceCleanForciblyRatio",
        i64::from(s.clean.disk_space_clean_forcibly_ratio);
    disk_space_warning_level_ratio: i64 = "diskSpaceWarningLevelRatio",
        i64::from(s.clean.disk_space_warning_level_ratio);
    clean_resource_interval: i64 = "cleanResourceInterval", ms(s.clean.clean_resource_interval);
    delete_file_batch_max: i64 = "deleteFileBatchMax", int(s.clean.delete_file_batch_max);
    /// rocketha, for tests only: milliseconds in one `fileReservedTime` hour.
    file_reserved_time_unit_ms: i64 = "fileReservedTimeUnitMs", ms(s.clean.hour);
    /// The commit log's directory; by default `storePathRootDir/commitlog`.
    store_path_commit_log: Option<String> = "storePathCommitLog", None;
    /// The delays of levels 1, 2, ... that a message's `DELAY` property picks (s, m, h, d).
    message_delay_level: String = "messageDelayLevel",
        render_message_delay_level(&s.message_delay_level);
    /// Milliseconds between writes of `config/delayOffset.json` (delayed delivery's progress).
    flush_delay_offset_interval: i64 = "flushDelayOffsetInterval",
        ms(s.flush_delay_offset_interval);
    /// The timer store: messages delivered at any moment (`TIMER_DELIVER_MS`, ...).
    timer_wheel_enable: bool = "timerWheelEnable", s.timer.enable;
    /// Milliseconds of one slot of the timer wheel.
    timer_precision_ms: i64 = "timerPrecisionMs", s.timer.precision_ms;
    /// Seconds ahead a timer message may be delivered at most; a later one is refused.
    timer_max_delay_sec: i64 = "timerMaxDelaySec", s.timer.max_delay_sec;
    /// Slots ahead a timer message is placed; a later one rolls over at the window's end.
    timer_roll_window_slot: i64 = "timerRollWindowSlot", s.timer.roll_window_slots;
    /// Milliseconds between msyncs of the timer's files.
    timer_flush_interval_ms: i64 = "timerFlushIntervalMs", ms(s.timer.flush_interval);
    /// Bytes of one timer log file.
    mapped_file_size_timer_log: i64 = "mappedFileSizeTimerLog", int(s.timer.log_file_size);
    /// Timer messages one slot takes before it refuses some sends (all past twice this).
    timer_congest_num_each_slot: i64 = "timerCongestNumEachSlot",
        s.timer.congest_num_each_slot;
    /// RECALL_MESSAGE cancels a timer message by its send's recall handle (NO_PERMISSION when
    /// off, RocketMQ's default).
    recall_message_enable: bool = "recallMessageEnable", false;
    /// rocketha: a send whose message is not of the type its topic's `message.type` says
    /// (none reads as NORMAL; MIXED takes any) is refused with MESSAGE_ILLEGAL. RocketMQ checks
    /// this in its proxy (`ProxyConfig`, on there); its broker does not, hence off here.
    enable_topic_message_type_check: bool = "enableTopicMessageTypeCheck", false;
    /// Topics may be created or changed to `message.type=MIXED` (taking any message).
    enable_mixed_message_type: bool = "enableMixedMessageType", false;
    /// Queues of the revive topic `rmq_sys_REVIVE_LOG_<cluster>`, where pops write their
    /// checkpoints and acks; pops take them in turn.
    revive_queue_num: i64 = "reviveQueueNum", i64::from(PopSettings::default().revive_queue_num);
    /// Percent of pops that read the group's pop retry topic before the topic.
    pop_from_retry_probability: i64 = "popFromRetryProbability",
        i64::from(PopSettings::default().pop_from_retry_probability);
    /// Messages a pop's consumer did not ack in time go to `%RETRY%group+topic` (else
    /// `%RETRY%group_topic`).
    enable_retry_topic_v2: bool = "enableRetryTopicV2", PopSettings::default().enable_retry_topic_v2;
    /// With `enableRetryTopicV2`: pops still read the v1 retry topic.
    retrieve_message_from_pop_retry_topic_v1: bool = "retrieveMessageFromPopRetryTopicV1",
        PopSettings::default().retrieve_from_retry_topic_v1;
    /// A retried message is answered under its retry topic, not under the topic popped.
    pop_response_return_actual_retry_topic: bool = "popResponseReturnActualRetryTopic",
        PopSettings::default().response_return_actual_retry_topic;
    /// Pops held at most per topic while they wait for a message (`pollTime`).
    pop_polling_size: i64 = "popPollingSize", PopSettings::default().polling_size as i64;
    /// Transactional sends are refused (NO_PERMISSION).
    reject_transaction_message: bool = "rejectTransactionMessage", false;
    /// Milliseconds a half message waits for its producer's outcome before it is checked.
    transaction_time_out: i64 = "transactionTimeOut", 6_000;
    /// Check-backs of one half message before it is discarded to `TRANS_CHECK_MAX_TIME_TOPIC`.
    transaction_check_max: i64 = "transactionCheckMax", 15;
    /// Milliseconds between check rounds (each half message past its time out is checked).
    transaction_check_interval: i64 = "transactionCheckInterval", 30_000;
    /// rocketha: milliseconds an orderly consumer's queue lock lasts after its holder's last
    /// LOCK_BATCH_MQ; RocketMQ's `-Drocketmq.broker.rebalance.lockMaxLiveTime`. Keep it above
    /// the clients' lock interval (20 s by default), or a live holder loses its queues.
    rebalance_lock_max_live_time: i64 = "rebalanceLockMaxLiveTime",
        ms(crate::broker::rebalance_lock::REBALANCE_LOCK_MAX_LIVE_TIME);
    /// rocketha: topics (`,`-separated) the table tier writes into the Delta table at
    /// `tableTierPath` (the Python broker's `rocketha.table_tier`).
    table_tier_topics: Option<String> = "tableTierTopics", None;
    table_tier_path: Option<String> = "tableTierPath", None;
    /// rocketha: milliseconds between the table tier's writes.
    table_tier_interval: i64 = "tableTierInterval", 60_000;
    /// rocketha: the segment being written goes into the table up to records this many
    /// milliseconds old (sealed segments go whole).
    table_tier_tail_age: i64 = "tableTierTailAge", 60_000;
    /// RocketMQ 5's controller mode: the controllers at `controllerAddr` elect the group's
    /// master; `brokerRole` and `brokerId` are not read.
    enable_controller_mode: bool = "enableControllerMode", false;
    /// The controllers, `host:port;host:port`.
    controller_addr: String = "controllerAddr", String::new();
    /// Controller mode: a put on the master waits for every slave of its SyncStateSet, so
    /// the controller may elect any member without losing an acknowledged message. False
    /// (RocketMQ's default) waits for `inSyncReplicas - 1` slaves, any of them.
    all_ack_in_sync_state_set: bool = "allAckInSyncStateSet", false;
    /// Milliseconds between heartbeats to every controller node.
    broker_heartbeat_interval: i64 = "brokerHeartbeatInterval", 1_000;
    /// Milliseconds the controller keeps this broker alive without a heartbeat.
    controller_heart_beat_timeout_mills: i64 = "controllerHeartBeatTimeoutMills", 10_000;
    /// Milliseconds between reads of the group's master from the controller (the controller
    /// also tells the members of each election at once).
    sync_broker_metadata_period: i64 = "syncBrokerMetadataPeriod", 5_000;
    /// Milliseconds between looks for the controllers' leader.
    sync_controller_metadata_period: i64 = "syncControllerMetadataPeriod", 10_000;
    /// The controller elects the live candidate with the lowest priority first.
    broker_election_priority: i64 = "brokerElectionPriority", i64::from(i32::MAX);
    /// Milliseconds a slave of the SyncStateSet may stay behind the master before the master
    /// drops it from the set.
    ha_max_time_slave_not_catchup: i64 = "haMaxTimeSlaveNotCatchup", 15_000;
    /// Controller mode: puts are refused while the SyncStateSet is smaller. Only 1 (RocketMQ's
    /// default, never refused) is taken so far; a larger value fails the load rather than
    /// being ignored.
    min_in_sync_replicas: i64 = "minInSyncReplicas", 1;
    /// Index every message's keys and unique key, to find it by them (`QUERY_MESSAGE`).
    message_index_enable: bool = "messageIndexEnable", s.index.enabled;
    /// Hash slots of one index file.
    max_hash_slot_num: i64 = "maxHashSlotNum", int(s.index.max_hash_slot_num);
    /// Entries of one index file (each key of each message takes one).
    max_index_num: i64 = "maxIndexNum", int(s.index.max_index_num);
}

/// `deleteWhen` as written: two-digit hours separated by `;`.
fn render_delete_when(hours: &[u32]) -> String {
    hours
        .iter()
        .map(|h| format!("{h:02}"))
        .collect::<Vec<_>>()
        .join(";")
}

/// RocketMQ broker and store keys that load but that rocketha does not act on.
pub const IGNORED_KEYS: &[&str] = &[
    "brokerIP2",
    "storePathConsumeQueue",
    "storePathIndex",
    "storeCheckpoint",
    "abortFile",
    "sendMessageThreadPoolNums",
    "pullMessageThreadPoolNums",
    "flushCommitLogLeastPages",
    "flushConsumeQueueLeastPages",
    "flushCommitLogThoroughInterval",
    "flushConsumeQueueThoroughInterval",
    "flushIntervalConsumeQueue",
    "transientStorePoolEnable",
    "transientStorePoolSize",
    "mapedFileSizeConsumeQueue",
    "traceTopicEnable",
    "useEpollNativeSelector",
    "warmMapedFileEnable",
    "warmMappedFileEnable",
    "destroyMapedFileIntervalForcibly",
    "redeleteHangedFileInterval",
    "checkCRCOnRecover",
    "messageIndexSafe",
    "duplicationEnable",
    "enableDLegerCommitLog",
    "fetchNamesrvAddrByAddressServer",
    "serverWorkerThreads",
    "serverSelectorThreads",
    "clientWorkerThreads",
    "shortPollingTimeMills",
    "notifyConsumerIdsChangedEnable",
    "highSpeedMode",
    "commercialEnable",
    "osPageCacheBusyTimeOutMills",
    "defaultQueryMaxNum",
    "transferMsgByHeap",
    "maxDelayTime",
    // The timer's tuning of RocketMQ's thread pools and queues, which rocketha's two threads
    // do not have, and its operators' pauses and self-checks.
    "timerGetMessageThreadNum",
    "timerPutMessageThreadNum",
    "timerEnableDisruptor",
    "timerEnableCheckMetrics",
    "timerCheckMetricsWhen",
    "timerMetricSmallThreshold",
    "timerInterceptDelayLevel",
    "timerSkipUnknownError",
    "timerWarmEnable",
    "timerEnableRetryUntilSuccess",
    "timerProgressLogIntervalMs",
    "timerStopEnqueue",
    "timerStopDequeue",
    "enableScheduleMessageStats",
    // Pop's in-memory merge of checkpoints and acks (off in RocketMQ too), its RocksDB variant,
    // its async appends and its polling scans, which rocketha's event-driven revive and
    // synchronous checkpoints do not have.
    "enablePopBufferMerge",
    "popCkStayBufferTime",
    "popCkStayBufferTimeOut",
    "popCkMaxBufferSize",
    "popCkOffsetMaxQueueSize",
    "enablePopBatchAck",
    "popConsumerKVServiceEnable",
    "appendAckAsync",
    "appendCkAsync",
    "reviveInterval",
    "reviveMaxSlow",
    "reviveScanTime",
    "enablePopLog",
    "popPollingMapSize",
    "maxPopPollingSize",
    // RocketMQ reads it only with enableSlaveActingMaster, which rocketha does not have.
    "enableAutoInSyncReplicas",
    // rocketha checks client certificates against tls.server.trustCertPath whenever
    // tls.server.need.client.auth asks for one, and servers' against tls.client.trustCertPath
    // unless tls.test.mode.enable.
    "tls.server.authClient",
    "tls.client.authServer",
];

/// Keys whose values are secrets: never written back by [`BrokerConfig::to_properties`].
const SECRET_KEYS: &[&str] = &[
    "haAuthSecret",
    "tls.server.keyPassword",
    "tls.client.keyPassword",
];

/// What a file's keys come to: the config, and the keys that were read but are not acted on.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub config: BrokerConfig,
    pub ignored: BTreeMap<String, String>,
}

impl BrokerConfig {
    /// Sets one key from its text. An unknown key fails, naming the closest known one.
    pub(crate) fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        if self.set_known(key, value)? {
            return Ok(());
        }
        Err(ConfigError::UnknownKey {
            key: key.to_owned(),
            suggestion: closest_key(key, Self::KEYS.iter().chain(IGNORED_KEYS)),
        })
    }

    /// The defaults with `properties` applied (later keys win), checked as a whole.
    pub fn from_properties<'a>(
        properties: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Loaded, ConfigError> {
        let mut config = Self::default();
        let mut ignored = BTreeMap::new();
        for (key, value) in properties {
            if IGNORED_KEYS.contains(&key) {
                ignored.insert(key.to_owned(), value.trim().to_owned());
            } else {
                config.set(key, value)?;
            }
        }
        config.validate()?;
        Ok(Loaded { config, ignored })
    }

    /// RocketMQ's key of a snake_case field.
    pub fn key_of(field: &str) -> Option<&'static str> {
        let index = Self::FIELDS.iter().position(|f| *f == field)?;
        Self::KEYS.get(index).copied()
    }

    /// The value of `key` as text, `None` when unset or unknown.
    pub fn get(&self, key: &str) -> Option<String> {
        self.entries()
            .into_iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, v)| v)
    }

    /// The config as a `broker.conf` text, secrets left out, `inSyncReplicas` resolved.
    pub fn to_properties(&self) -> String {
        let mut out = String::new();
        for (key, value) in self.entries() {
            let value = match key {
                "inSyncReplicas" => Some(self.in_sync_replicas().to_string()),
                _ if SECRET_KEYS.contains(&key) => None,
                _ => value,
            };
            if let Some(value) = value {
                out.push_str(&format!("{key}={value}\n"));
            }
        }
        out
    }

    /// `inSyncReplicas`, resolved: unset, 2 for a classic SYNC_MASTER (one slave, as 4.x's
    /// SYNC_MASTER waits for) and 1 otherwise, in controller mode too (RocketMQ 5's default:
    /// without `allAckInSyncStateSet`, its controller-mode master waits for no slave).
    pub fn in_sync_replicas(&self) -> i64 {
        self.in_sync_replicas.unwrap_or(
            if self.broker_role == BrokerRole::SyncMaster && !self.enable_controller_mode {
                2
            } else {
                1
            },
        )
    }

    /// `brokerIP1:listenPort`: the address recorded in every message (and in msg ids).
    pub fn store_host(&self) -> String {
        format!("{}:{}", self.broker_ip1, self.listen_port)
    }

    /// Distinct slaves a SYNC_MASTER put waits for.
    pub fn slave_acks_required(&self) -> usize {
        usize::try_from(self.in_sync_replicas() - 1).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests;
